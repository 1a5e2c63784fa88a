/*
 * test_access_log.c - cabrank-httpd's access log (apps/httpd/access_log.c):
 * the Common and Combined line formats ("-" for what is missing or empty,
 * escaping that keeps a line from being split or forged, IPv6 and mapped
 * IPv4 peers, long fields cut with the status kept), buffering until a flush,
 * a full buffer or close, the flusher thread's periodic write, reopening
 * after the file was moved away, and concurrent appends from many threads
 * arriving as whole lines (run under TSan by `make test`), and fork while
 * other threads log hard: children log through access_log_after_fork and
 * access_log_before_exit, and every line of parent and children appears
 * exactly once (no lock left held in a child, no buffered line written twice).
 */
#include "../../apps/httpd/access_log.h"

#include "../support/support.h"

#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* 2023-11-14 22:13:20 UTC. */
#define T0 1700000000

static struct sockaddr_in v4;

static void utc(void)
{
    setenv("TZ", "UTC", 1);
    tzset();
    memset(&v4, 0, sizeof(v4));
    v4.sin_family = AF_INET;
    v4.sin_addr.s_addr = htonl(0x7f000001);
}

static struct access_log_entry entry(const char *method, const char *target, int status,
                                     uint64_t bytes)
{
    struct access_log_entry e = {
        .peer = (const struct sockaddr *)&v4,
        .time_sec = T0,
        .method = method,
        .method_len = method != NULL ? strlen(method) : 0,
        .target = target,
        .target_len = target != NULL ? strlen(target) : 0,
        .version_minor = 1,
        .status = status,
        .bytes = bytes,
    };

    return e;
}

static const char *fmt(enum access_log_format f, const struct access_log_entry *e)
{
    static char buf[ACCESS_LOG_LINE_MAX + 1];
    size_t n = access_log_format(buf, ACCESS_LOG_LINE_MAX, f, e);

    ck_assert_uint_le(n, ACCESS_LOG_LINE_MAX);
    buf[n] = '\0';
    return buf;
}

START_TEST(formats_a_common_line)
{
    struct access_log_entry e = entry("GET", "/hello.txt", 200, 13);

    utc();
    ck_assert_str_eq(fmt(ACCESS_LOG_COMMON, &e),
                     "127.0.0.1 - - [14/Nov/2023:22:13:20 +0000] \"GET /hello.txt HTTP/1.1\" "
                     "200 13\n");
    e.version_minor = 0;
    e.bytes = 0;
    e.status = 304;
    ck_assert_str_eq(fmt(ACCESS_LOG_COMMON, &e),
                     "127.0.0.1 - - [14/Nov/2023:22:13:20 +0000] \"GET /hello.txt HTTP/1.0\" "
                     "304 -\n");
}
END_TEST

START_TEST(formats_a_combined_line_with_dashes_for_missing_fields)
{
    struct access_log_entry e = entry("HEAD", "/", 200, 0);

    utc();
    ck_assert_str_eq(fmt(ACCESS_LOG_COMBINED, &e),
                     "127.0.0.1 - - [14/Nov/2023:22:13:20 +0000] \"HEAD / HTTP/1.1\" 200 - "
                     "\"-\" \"-\"\n");
    e.referer = "http://example.com/";
    e.referer_len = strlen(e.referer);
    e.user_agent = "curl/8.0";
    e.user_agent_len = strlen(e.user_agent);
    ck_assert_str_eq(fmt(ACCESS_LOG_COMBINED, &e),
                     "127.0.0.1 - - [14/Nov/2023:22:13:20 +0000] \"HEAD / HTTP/1.1\" 200 - "
                     "\"http://example.com/\" \"curl/8.0\"\n");
}
END_TEST

START_TEST(uses_the_local_time_offset)
{
    struct access_log_entry e = entry("GET", "/", 200, 1);

    setenv("TZ", "XST+05:30", 1); /* five and a half hours west of UTC */
    tzset();
    ck_assert_ptr_nonnull(strstr(fmt(ACCESS_LOG_COMMON, &e), "[14/Nov/2023:16:43:20 -0530]"));
}
END_TEST

START_TEST(escapes_quotes_backslashes_controls_and_non_ascii)
{
    struct access_log_entry e = entry("GET", "/a\"b\\c\x01\xff", 400, 0);

    utc();
    e.user_agent = "x\" 200 1 \"forged\n";
    e.user_agent_len = strlen(e.user_agent);
    ck_assert_str_eq(fmt(ACCESS_LOG_COMBINED, &e),
                     "127.0.0.1 - - [14/Nov/2023:22:13:20 +0000] "
                     "\"GET /a\\x22b\\x5Cc\\x01\\xFF HTTP/1.1\" 400 - \"-\" "
                     "\"x\\x22 200 1 \\x22forged\\x0A\"\n");
}
END_TEST

START_TEST(writes_a_dash_for_a_request_without_a_line)
{
    struct access_log_entry e = entry(NULL, NULL, 400, 0);

    utc();
    e.version_minor = -1;
    e.peer = NULL;
    ck_assert_str_eq(fmt(ACCESS_LOG_COMMON, &e),
                     "- - - [14/Nov/2023:22:13:20 +0000] \"-\" 400 -\n");
}
END_TEST

START_TEST(writes_ipv6_and_mapped_ipv4_peers)
{
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    struct access_log_entry e = entry("GET", "/", 200, 1);

    utc();
    e.peer = (const struct sockaddr *)&v6;
    ck_assert_int_eq(inet_pton(AF_INET6, "2001:db8::1", &v6.sin6_addr), 1);
    ck_assert_int_eq(strncmp(fmt(ACCESS_LOG_COMMON, &e), "2001:db8::1 - - [", 17), 0);
    ck_assert_int_eq(inet_pton(AF_INET6, "::ffff:10.1.2.3", &v6.sin6_addr), 1);
    ck_assert_int_eq(strncmp(fmt(ACCESS_LOG_COMMON, &e), "10.1.2.3 - - [", 14), 0);
}
END_TEST

START_TEST(cuts_long_fields_but_keeps_the_status_and_the_newline)
{
    static char target[20000];
    char small[300];
    struct access_log_entry e;
    size_t n;

    utc();
    memset(target, 'a', sizeof(target) - 1);
    target[0] = '/';
    e = entry("GET", target, 414, 0);
    e.user_agent = target;
    e.user_agent_len = strlen(target);
    n = access_log_format(small, sizeof(small), ACCESS_LOG_COMBINED, &e);
    ck_assert_uint_le(n, sizeof(small));
    ck_assert_int_eq(small[n - 1], '\n');
    ck_assert_ptr_nonnull(memmem(small, n, "\" 414 - \"-\" \"/aaa", 17));
    ck_assert_ptr_null(memchr(small, '\n', n - 1));
    n = access_log_format(small, 128, ACCESS_LOG_COMMON, &e);
    ck_assert_uint_le(n, 128);
    ck_assert_ptr_nonnull(memmem(small, n, "\" 414 -\n", 8));
}
END_TEST

/* ------------------------------------------------------------------ files */

static char dir[64];
static char path[128];

static void make_dir(void)
{
    utc();
    snprintf(dir, sizeof(dir), "/tmp/cr-alog-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/access.log", dir);
}

static void remove_dir(void)
{
    char moved[160];

    snprintf(moved, sizeof(moved), "%s.1", path);
    unlink(path);
    unlink(moved);
    rmdir(dir);
}

static size_t size_of(const char *p)
{
    struct stat st;

    return stat(p, &st) == 0 ? (size_t)st.st_size : 0;
}

static int lines_of(const char *p)
{
    char buf[1 << 16];
    int fd = open(p, O_RDONLY);
    int lines = 0;
    ssize_t n;

    if (fd < 0)
        return -1;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        for (ssize_t i = 0; i < n; i++)
            lines += buf[i] == '\n';
    }
    close(fd);
    return lines;
}

static struct access_log *open_log(size_t buffer_size, uint64_t flush_ms, unsigned buffers)
{
    struct access_log_config cfg = {
        .path = path,
        .format = ACCESS_LOG_COMMON,
        .buffers = buffers,
        .buffer_size = buffer_size,
        .flush_interval_ms = flush_ms,
    };
    struct access_log *l = NULL;

    ck_assert_int_eq(access_log_open(&l, &cfg), 0);
    ck_assert_ptr_nonnull(l);
    return l;
}

START_TEST(buffers_until_a_flush_and_writes_the_rest_at_close)
{
    struct access_log_entry e = entry("GET", "/x", 200, 1);
    struct access_log *l;

    make_dir();
    l = open_log(0, 60000, 2);
    for (int i = 0; i < 3; i++)
        access_log_append(l, (unsigned)i, &e);
    ck_assert_uint_eq(size_of(path), 0);
    access_log_flush(l);
    ck_assert_int_eq(lines_of(path), 3);
    access_log_append(l, 0, &e);
    access_log_close(l);
    ck_assert_int_eq(lines_of(path), 4);
    remove_dir();
}
END_TEST

START_TEST(writes_a_full_buffer_at_once)
{
    struct access_log_entry e = entry("GET", "/x", 200, 1);
    struct access_log *l;
    int n = 0;

    make_dir();
    l = open_log(ACCESS_LOG_LINE_MAX, 60000, 1);
    while (size_of(path) == 0 && n < 1000) {
        access_log_append(l, 0, &e);
        n++;
    }
    ck_assert_uint_gt(size_of(path), 0);
    ck_assert_uint_le(size_of(path), ACCESS_LOG_LINE_MAX);
    access_log_close(l);
    ck_assert_int_eq(lines_of(path), n);
    remove_dir();
}
END_TEST

START_TEST(the_flusher_writes_within_its_interval)
{
    struct access_log_entry e = entry("GET", "/x", 200, 1);
    struct access_log *l;
    int waited = 0;

    make_dir();
    l = open_log(0, 50, 1);
    access_log_append(l, 0, &e);
    while (size_of(path) == 0 && waited < 5000) {
        usleep(10000);
        waited += 10;
    }
    ck_assert_int_eq(lines_of(path), 1);
    access_log_close(l);
    remove_dir();
}
END_TEST

START_TEST(reopens_after_the_file_was_moved)
{
    struct access_log_entry e = entry("GET", "/x", 200, 1);
    char moved[160];
    struct access_log *l;

    make_dir();
    snprintf(moved, sizeof(moved), "%s.1", path);
    l = open_log(0, 60000, 1);
    access_log_append(l, 0, &e);
    access_log_append(l, 0, &e);
    ck_assert_int_eq(rename(path, moved), 0);
    ck_assert_int_eq(access_log_reopen(l), 0);
    /* What was buffered before the reopen went to the old file. */
    ck_assert_int_eq(lines_of(moved), 2);
    access_log_append(l, 0, &e);
    access_log_close(l);
    ck_assert_int_eq(lines_of(path), 1);
    ck_assert_int_eq(lines_of(moved), 2);
    remove_dir();
}
END_TEST

START_TEST(open_fails_for_an_unwritable_path)
{
    struct access_log_config cfg = {.path = "/nonexistent-dir/x/access.log"};
    struct access_log *l = (struct access_log *)&cfg;

    ck_assert_int_eq(access_log_open(&l, &cfg), -ENOENT);
    ck_assert_ptr_null(l);
    access_log_close(NULL);
}
END_TEST

#define THREADS          4
#define LINES_PER_THREAD 2000

struct appender {
    struct access_log *l;
    unsigned worker;
};

static void *append_many(void *arg)
{
    struct appender *a = arg;
    char target[32];

    for (int i = 0; i < LINES_PER_THREAD; i++) {
        struct access_log_entry e;

        snprintf(target, sizeof(target), "/t%u/%d", a->worker, i);
        e = entry("GET", target, 200, (uint64_t)i);
        /* Two threads share each buffer: workers wrap modulo 2. */
        access_log_append(a->l, a->worker, &e);
    }
    return NULL;
}

START_TEST(concurrent_appends_arrive_as_whole_lines)
{
    pthread_t th[THREADS];
    struct appender a[THREADS];
    struct access_log *l;
    char *buf;
    size_t len;
    int fd;

    make_dir();
    l = open_log(ACCESS_LOG_LINE_MAX * 2, 20, 2);
    for (unsigned i = 0; i < THREADS; i++) {
        a[i] = (struct appender){.l = l, .worker = i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, append_many, &a[i]), 0);
    }
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    access_log_close(l);
    ck_assert_int_eq(lines_of(path), THREADS * LINES_PER_THREAD);
    len = size_of(path);
    buf = malloc(len + 1);
    ck_assert_ptr_nonnull(buf);
    fd = open(path, O_RDONLY);
    ck_assert_int_eq(read(fd, buf, len), (ssize_t)len);
    close(fd);
    buf[len] = '\0';
    /* Every line is whole: it starts with the peer and ends with the size. */
    for (char *line = buf; *line != '\0';) {
        char *nl = strchr(line, '\n');

        ck_assert_ptr_nonnull(nl);
        ck_assert_int_eq(strncmp(line, "127.0.0.1 - - [", 15), 0);
        line = nl + 1;
    }
    free(buf);
    remove_dir();
}
END_TEST

/* ------------------------------------------------------------------ fork */

#define FORK_CHILDREN    6
#define FORK_CHILD_LINES 500
#define FORK_LOGGERS     2

struct hard_logger {
    struct access_log *l;
    unsigned worker;
    int stop; /* relaxed atomic, set by the test thread */
    unsigned lines;
};

static void *log_hard(void *arg)
{
    struct hard_logger *h = arg;
    char target[32];

    while (!__atomic_load_n(&h->stop, __ATOMIC_RELAXED)) {
        struct access_log_entry e;

        snprintf(target, sizeof(target), "/p%u/%u", h->worker, h->lines);
        e = entry("GET", target, 200, 1);
        access_log_append(h->l, h->worker, &e);
        h->lines++;
        /* Bursts with short pauses: hard enough that forks land inside
         * appends and flushes, bounded so the file stays small. */
        if (h->lines % 4 == 0)
            usleep(20);
    }
    return NULL;
}

/* A forked child: logs into the same buffers the parent's threads use (a
 * lock held at the fork would hang it here), then exits through the hook. */
static int child_logs(struct access_log *l, unsigned k)
{
    char target[32];

    if (access_log_after_fork(l) != 0)
        return 3;
    for (unsigned i = 0; i < FORK_CHILD_LINES; i++) {
        struct access_log_entry e;

        snprintf(target, sizeof(target), "/c%u/%u", k, i);
        e = entry("GET", target, 200, 1);
        access_log_append(l, i, &e);
        if (i == FORK_CHILD_LINES / 2)
            usleep(30 * 1000); /* the child's flusher writes some */
    }
    access_log_before_exit(l);
    return 0;
}

/* Counts of each "/p<w>/<n>" and "/c<k>/<n>" line in the file. */
static void check_each_line_once(const struct hard_logger *h)
{
    size_t len = size_of(path);
    char *buf = malloc(len + 1);
    unsigned char *pseen[FORK_LOGGERS];
    unsigned char cseen[FORK_CHILDREN][FORK_CHILD_LINES];
    int fd = open(path, O_RDONLY);

    ck_assert_ptr_nonnull(buf);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(read(fd, buf, len), (ssize_t)len);
    close(fd);
    buf[len] = '\0';
    memset(cseen, 0, sizeof(cseen));
    for (unsigned w = 0; w < FORK_LOGGERS; w++) {
        pseen[w] = calloc(h[w].lines + 1, 1);
        ck_assert_ptr_nonnull(pseen[w]);
    }
    for (char *line = buf; *line != '\0';) {
        char *nl = strchr(line, '\n');
        char *t = strstr(line, "\"GET /");
        char kind;
        unsigned a;
        unsigned n;

        ck_assert_ptr_nonnull(nl);
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(sscanf(t, "\"GET /%c%u/%u ", &kind, &a, &n), 3);
        if (kind == 'p') {
            ck_assert_uint_lt(a, FORK_LOGGERS);
            ck_assert_uint_lt(n, h[a].lines);
            ck_assert_msg(pseen[a][n]++ == 0, "parent line /p%u/%u twice", a, n);
        } else {
            ck_assert_int_eq(kind, 'c');
            ck_assert_uint_lt(a, FORK_CHILDREN);
            ck_assert_uint_lt(n, FORK_CHILD_LINES);
            ck_assert_msg(cseen[a][n]++ == 0, "child line /c%u/%u twice", a, n);
        }
        line = nl + 1;
    }
    for (unsigned w = 0; w < FORK_LOGGERS; w++) {
        for (unsigned n = 0; n < h[w].lines; n++)
            ck_assert_msg(pseen[w][n] == 1, "parent line /p%u/%u missing", w, n);
        free(pseen[w]);
    }
    for (unsigned k = 0; k < FORK_CHILDREN; k++) {
        for (unsigned n = 0; n < FORK_CHILD_LINES; n++)
            ck_assert_msg(cseen[k][n] == 1, "child line /c%u/%u missing", k, n);
    }
    free(buf);
}

/*
 * Reaps child k by the deadline (ms, cr_test_now_ms). One still running then
 * is stuck (a lock held at the fork, say): the failure names where its
 * threads wait (/proc/<pid>/task/<tid>/wchan), rather than the test running
 * into Check's timeout; the child is killed.
 */
static void wait_child(pid_t pid, unsigned k, uint64_t deadline, int *st)
{
    char where[256] = "";
    char proc[96];
    char one[64];
    size_t used = 0;
    DIR *tasks;
    struct dirent *t;
    pid_t r;

    while ((r = waitpid(pid, st, WNOHANG)) == 0 && cr_test_now_ms() < deadline)
        usleep(2000);
    if (r == pid)
        return;
    ck_assert_int_eq(r, 0);
    snprintf(proc, sizeof(proc), "/proc/%d/task", (int)pid);
    tasks = opendir(proc);
    while (tasks != NULL && (t = readdir(tasks)) != NULL && used + sizeof(one) < sizeof(where)) {
        if (t->d_name[0] == '.')
            continue;
        snprintf(proc, sizeof(proc), "/proc/%d/task/%.16s/wchan", (int)pid, t->d_name);
        if (cr_test_read_small(proc, one, sizeof(one)))
            used +=
                (size_t)snprintf(where + used, sizeof(where) - used, " %.16s:%s", t->d_name, one);
    }
    if (tasks != NULL)
        closedir(tasks);
    kill(pid, SIGKILL);
    (void)waitpid(pid, st, 0);
    ck_abort_msg("child %u (pid %d) stuck: threads waiting in%s", k, (int)pid,
                 where[0] != '\0' ? where : " (unknown)");
}

START_TEST(fork_while_logging_writes_every_line_exactly_once)
{
    uint64_t deadline;
    pthread_t th[FORK_LOGGERS];
    struct hard_logger h[FORK_LOGGERS];
    pid_t pids[FORK_CHILDREN];
    struct access_log *l;

    make_dir();
    /* Small buffers and a short interval: flushes (fd_lock held) and full
     * buffers happen all the time, so forks land inside them. */
    l = open_log(ACCESS_LOG_LINE_MAX, 1, 2);
    for (unsigned w = 0; w < FORK_LOGGERS; w++) {
        h[w] = (struct hard_logger){.l = l, .worker = w};
        ck_assert_int_eq(pthread_create(&th[w], NULL, log_hard, &h[w]), 0);
    }
    for (unsigned k = 0; k < FORK_CHILDREN; k++) {
        usleep(5 * 1000);
        pids[k] = fork();
        ck_assert_int_ge(pids[k], 0);
        if (pids[k] == 0)
            _exit(child_logs(l, k));
    }
    /* Short of the test's own timeout (20 s, scaled the same way). */
    deadline = cr_test_now_ms() + (uint64_t)cr_test_tmo(15000);
    for (unsigned k = 0; k < FORK_CHILDREN; k++) {
        int st = 0;

        wait_child(pids[k], k, deadline, &st);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %u: status %#x", k, st);
    }
    for (unsigned w = 0; w < FORK_LOGGERS; w++) {
        __atomic_store_n(&h[w].stop, 1, __ATOMIC_RELAXED);
        pthread_join(th[w], NULL);
    }
    access_log_close(l);
    check_each_line_once(h);
    remove_dir();
}
END_TEST

Suite *access_log_suite(void);
Suite *access_log_suite(void)
{
    Suite *s = suite_create("access_log");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, formats_a_common_line);
    tcase_add_test(tc, formats_a_combined_line_with_dashes_for_missing_fields);
    tcase_add_test(tc, uses_the_local_time_offset);
    tcase_add_test(tc, escapes_quotes_backslashes_controls_and_non_ascii);
    tcase_add_test(tc, writes_a_dash_for_a_request_without_a_line);
    tcase_add_test(tc, writes_ipv6_and_mapped_ipv4_peers);
    tcase_add_test(tc, cuts_long_fields_but_keeps_the_status_and_the_newline);
    tcase_add_test(tc, buffers_until_a_flush_and_writes_the_rest_at_close);
    tcase_add_test(tc, writes_a_full_buffer_at_once);
    tcase_add_test(tc, the_flusher_writes_within_its_interval);
    tcase_add_test(tc, reopens_after_the_file_was_moved);
    tcase_add_test(tc, open_fails_for_an_unwritable_path);
    tcase_add_test(tc, concurrent_appends_arrive_as_whole_lines);
    tcase_add_test(tc, fork_while_logging_writes_every_line_exactly_once);
    suite_add_tcase(s, tc);
    return s;
}
