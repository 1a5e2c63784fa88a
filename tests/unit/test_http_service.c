/*
 * test_http_service.c - cabrank-httpd's HTTP service (apps/httpd/
 * http_service.c) driven in-process through cr_server on 127.0.0.1:0 under
 * the lf and reactor models, and its status counters (apps/httpd/status.c):
 * a GET and a pipelined pair answered with the fields every response
 * carries, the per-worker counters summed by http_service_requests and the
 * status page, the status page at a configured path or turned off, the
 * latency buckets, and create failing for an unusable root. Process
 * models: the process hooks start a worker's access log flusher and write
 * its lines before it exits (in a forked child), a reconfiguration opens the
 * new root before it drops the old one (and keeps the old on an error), and,
 * once prefork or forking are listed, the same GET/status check runs under
 * them with the request count taken from the scoreboard.
 */
#include <cabrank/server.h>

#include "../../apps/httpd/http_service.h"
#include "../../apps/httpd/status.h"
#include "../support/services.h"
#include "../support/support.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct fixture {
    char dir[64];
    struct http_service *h;
    struct cr_server *s;
    uint16_t port;
};

static void fx_start(struct fixture *f, const char *model, const char *status_path)
{
    struct http_service_config hc = {.workers = 4, .status_path = status_path};
    struct cr_server_config sc = {.model = model, .threads = 2};
    char path[128];
    char addr[64];
    int fd;

    memset(f, 0, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/cr-hsvc-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    snprintf(path, sizeof(path), "%s/hello.txt", f->dir);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "Hello, world\n", 13), 13);
    close(fd);
    hc.root = f->dir;
    ck_assert_int_eq(http_service_create(&f->h, &hc), 0);
    sc.listen[0] = "127.0.0.1:0";
    ck_assert_int_eq(cr_server_create(&f->s, &sc, http_service_get(f->h)), 0);
    ck_assert_int_eq(cr_server_address(f->s, 0, addr, sizeof(addr)), 0);
    f->port = (uint16_t)atoi(strrchr(addr, ':') + 1);
    ck_assert_int_eq(cr_server_start(f->s), 0);
}

static void fx_finish(struct fixture *f)
{
    char path[128];

    cr_server_stop(f->s, true);
    ck_assert_int_eq(cr_server_wait(f->s), 0);
    cr_server_destroy(f->s);
    http_service_destroy(f->h);
    snprintf(path, sizeof(path), "%s/hello.txt", f->dir);
    unlink(path);
    rmdir(f->dir);
}

/* Reads one response head and its Content-Length body into buf. */
static void read_response(struct cr_test_client *cl, char *head, size_t cap, char *body,
                          size_t *body_len)
{
    char line[1024];
    size_t used = 0;
    size_t clen = 0;

    for (;;) {
        ssize_t n = cr_test_client_line(cl, line, sizeof(line), 5000);

        ck_assert_int_ge(n, 1);
        if (strncasecmp(line, "Content-Length:", 15) == 0)
            clen = (size_t)strtoul(line + 15, NULL, 10);
        used += (size_t)snprintf(head + used, cap - used, "%s\n", line);
        if (strcmp(line, "\r") == 0)
            break;
    }
    ck_assert_int_eq(cr_test_client_read(cl, body, clen, 5000), 0);
    body[clen] = '\0';
    *body_len = clen;
}

static void serves_in_model(const char *model)
{
    struct fixture f;
    struct cr_test_client cl;
    char head[4096];
    char body[65536];
    size_t blen;

    fx_start(&f, model, NULL);
    ck_assert_int_eq(cr_test_client_open(&cl, f.port), 0);
    ck_assert_int_eq(cr_test_client_send(&cl, "GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n"
                                              "GET /missing HTTP/1.1\r\nHost: x\r\n\r\n"),
                     0);
    read_response(&cl, head, sizeof(head), body, &blen);
    ck_assert_int_eq(strncmp(head, "HTTP/1.1 200 OK\r\n", 17), 0);
    ck_assert_ptr_nonnull(strstr(head, "\nServer: cabrank\r\n"));
    ck_assert_ptr_nonnull(strstr(head, "\nDate: "));
    ck_assert_ptr_nonnull(strstr(head, "\nContent-Length: 13\r\n"));
    ck_assert_str_eq(body, "Hello, world\n");
    read_response(&cl, head, sizeof(head), body, &blen);
    ck_assert_int_eq(strncmp(head, "HTTP/1.1 404 Not Found\r\n", 24), 0);
    if (strcmp(model, "prefork") == 0 || strcmp(model, "forking") == 0) {
        struct cr_server_stats ss;

        /* Workers served them: this process's own counters saw nothing;
         * the server's shared ones did. */
        (void)cr_server_stats(f.s, &ss, NULL, 0);
        ck_assert_uint_eq(ss.requests, 2);
        ck_assert_uint_eq(http_service_requests(f.h), 0);
    } else {
        ck_assert_uint_eq(http_service_requests(f.h), 2);
    }

    ck_assert_int_eq(
        cr_test_client_send(&cl, "GET /server-status?format=json HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    read_response(&cl, head, sizeof(head), body, &blen);
    ck_assert_int_eq(strncmp(head, "HTTP/1.1 200 OK\r\n", 17), 0);
    ck_assert_ptr_nonnull(strstr(head, "\nCache-Control: no-store\r\n"));
    ck_assert_ptr_nonnull(strstr(body, "\"requests\":2,"));
    ck_assert_ptr_nonnull(strstr(body, "\"4xx\":1"));
    ck_assert_ptr_nonnull(strstr(body, model));
    cr_test_client_close(&cl);
    fx_finish(&f);
}

START_TEST(serves_files_and_counts_under_lf)
{
    serves_in_model("lf");
}
END_TEST

START_TEST(serves_files_and_counts_under_reactor)
{
    serves_in_model("reactor");
}
END_TEST

START_TEST(status_path_is_configurable_and_can_be_off)
{
    struct fixture f;
    struct cr_test_client cl;
    char head[4096];
    char body[65536]; /* the status page */
    size_t blen;

    /* Off: the path is an ordinary (missing) file. */
    fx_start(&f, "lf", "");
    ck_assert_int_eq(cr_test_client_open(&cl, f.port), 0);
    ck_assert_int_eq(cr_test_client_send(&cl, "GET /server-status HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    read_response(&cl, head, sizeof(head), body, &blen);
    ck_assert_int_eq(strncmp(head, "HTTP/1.1 404", 12), 0);
    cr_test_client_close(&cl);
    fx_finish(&f);

    /* Elsewhere. */
    fx_start(&f, "lf", "/status");
    ck_assert_int_eq(cr_test_client_open(&cl, f.port), 0);
    ck_assert_int_eq(cr_test_client_send(&cl, "GET /status HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    read_response(&cl, head, sizeof(head), body, &blen);
    ck_assert_int_eq(strncmp(head, "HTTP/1.1 200", 12), 0);
    ck_assert_ptr_nonnull(strstr(body, "cabrank-httpd status"));
    cr_test_client_close(&cl);
    fx_finish(&f);
}
END_TEST

START_TEST(create_fails_for_an_unusable_root)
{
    struct http_service_config hc = {.root = "/nonexistent/cabrank-root"};
    struct http_service *h = (struct http_service *)&hc;
    char file[] = "/tmp/cabrank-root-file.XXXXXX";
    int fd;

    ck_assert_int_eq(http_service_create(&h, &hc), -ENOENT);
    ck_assert_ptr_null(h);
    /* A root that is a regular file (one of our own: always there). */
    ck_assert_int_ge(fd = mkstemp(file), 0);
    close(fd);
    hc.root = file;
    ck_assert_int_eq(http_service_create(&h, &hc), -ENOTDIR);
    ck_assert_ptr_null(h);
    unlink(file);
    http_service_destroy(NULL);
}
END_TEST

START_TEST(latency_buckets_are_log2_microseconds)
{
    ck_assert_uint_eq(status_latency_bucket(0), 0);
    ck_assert_uint_eq(status_latency_bucket(999), 0);
    ck_assert_uint_eq(status_latency_bucket(1000), 1);
    ck_assert_uint_eq(status_latency_bucket(1999), 1);
    ck_assert_uint_eq(status_latency_bucket(2000), 2);
    ck_assert_uint_eq(status_latency_bucket(1000000), 10); /* 1 ms: [512, 1024) us */
    ck_assert_uint_eq(status_latency_bucket(UINT64_MAX), STATUS_LATENCY_BUCKETS - 1);
}
END_TEST

START_TEST(status_sums_every_worker_slot)
{
    struct status *st;
    struct status_totals t;
    char *page;
    size_t len;

    ck_assert_int_eq(status_create(&st, 3), 0);
    status_record(st, 0, 200, 10, 500);
    status_record(st, 1, 404, 5, 1500);
    status_record(st, 7, 304, 0, 3000000); /* wraps onto slot 1 */
    status_sum(st, &t);
    ck_assert_uint_eq(t.requests, 3);
    ck_assert_uint_eq(t.body_bytes, 15);
    ck_assert_uint_eq(t.classes[2], 1);
    ck_assert_uint_eq(t.classes[3], 1);
    ck_assert_uint_eq(t.classes[4], 1);
    ck_assert_uint_eq(t.latency[0], 1);
    ck_assert_uint_eq(t.latency[1], 1);
    ck_assert_uint_eq(t.latency[12], 1);
    ck_assert_int_eq(status_render(st, NULL, true, &page, &len), 0);
    ck_assert_uint_eq(strlen(page), len);
    ck_assert_ptr_nonnull(strstr(page, "\"requests\":3,"));
    ck_assert_ptr_nonnull(strstr(page, "{\"lt\":1,\"count\":1}"));
    free(page);
    ck_assert_int_eq(status_render(st, NULL, false, &page, &len), 0);
    ck_assert_ptr_nonnull(strstr(page, "<meta http-equiv=\"refresh\" content=\"2\">"));
    free(page);
    status_destroy(st);
}
END_TEST

START_TEST(serves_files_and_counts_under_the_process_models)
{
    serves_in_model("prefork");
    serves_in_model("forking");
}
END_TEST

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[160];
    int fd;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static void remove_file(const char *dir, const char *name)
{
    char path[160];

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    unlink(path);
}

START_TEST(process_hooks_run_a_workers_access_log)
{
    char dir[64];
    char path[128];
    char buf[4096];
    struct access_log_config lc = {.format = ACCESS_LOG_COMMON, .buffers = 2};
    struct access_log *log;
    struct http_service_config hc = {.workers = 2};
    struct http_service *h;
    const struct cr_service *svc;
    struct access_log_entry e = {
        .method = "GET", .method_len = 3, .version_minor = -1, .status = 200};
    pid_t pid;
    int st = 0;
    int fd;
    ssize_t n;

    snprintf(dir, sizeof(dir), "/tmp/cr-hsvc-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/access.log", dir);
    lc.path = path;
    ck_assert_int_eq(access_log_open(&log, &lc), 0);
    hc.root = dir;
    hc.log = log;
    ck_assert_int_eq(http_service_create(&h, &hc), 0);
    svc = http_service_get(h);
    ck_assert_ptr_nonnull(svc->process_init);
    ck_assert_ptr_nonnull(svc->process_exit);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* A worker: its lines reach the file through the hooks alone. */
        e.target = "/from-the-child";
        e.target_len = strlen(e.target);
        if (svc->process_init(svc->ctx) != 0)
            _exit(3);
        access_log_append(log, 1, &e);
        svc->process_exit(svc->ctx);
        _exit(0);
    }
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    http_service_destroy(h);
    access_log_close(log);
    fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    ck_assert_int_gt(n, 0);
    buf[n] = '\0';
    ck_assert_ptr_nonnull(strstr(buf, "\"GET /from-the-child\" 200"));
    ck_assert_ptr_null(strstr(strstr(buf, "/from-the-child") + 1, "/from-the-child"));
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(reconfigure_switches_the_root_or_keeps_the_old_one)
{
    char a[64];
    char b[64];
    struct http_service_config hc = {.workers = 2};
    struct cr_server_config sc = {.model = "reactor"};
    struct http_service *h;
    struct cr_server *s;
    struct cr_test_client cl;
    char addr[64];
    char head[4096];
    char body[65536]; /* the status page */
    size_t blen;

    snprintf(a, sizeof(a), "/tmp/cr-hsvc-XXXXXX");
    snprintf(b, sizeof(b), "/tmp/cr-hsvc-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(a));
    ck_assert_ptr_nonnull(mkdtemp(b));
    write_file(a, "which.txt", "a\n");
    write_file(b, "which.txt", "b\n");
    hc.root = a;
    ck_assert_int_eq(http_service_create(&h, &hc), 0);
    hc.root = b;
    hc.status_path = "/st";
    ck_assert_int_eq(http_service_reconfigure(h, &hc), 0);
    hc.root = "/nonexistent/cabrank-root";
    ck_assert_int_eq(http_service_reconfigure(h, &hc), -ENOENT);
    sc.listen[0] = "127.0.0.1:0";
    ck_assert_int_eq(cr_server_create(&s, &sc, http_service_get(h)), 0);
    ck_assert_int_eq(cr_server_address(s, 0, addr, sizeof(addr)), 0);
    ck_assert_int_eq(cr_server_start(s), 0);
    ck_assert_int_eq(cr_test_client_open(&cl, (uint16_t)atoi(strrchr(addr, ':') + 1)), 0);
    ck_assert_int_eq(cr_test_client_send(&cl, "GET /which.txt HTTP/1.1\r\nHost: x\r\n\r\n"
                                              "GET /st HTTP/1.1\r\nHost: x\r\n\r\n"),
                     0);
    read_response(&cl, head, sizeof(head), body, &blen);
    ck_assert_int_eq(strncmp(head, "HTTP/1.1 200", 12), 0);
    ck_assert_str_eq(body, "b\n");
    read_response(&cl, head, sizeof(head), body, &blen);
    ck_assert_int_eq(strncmp(head, "HTTP/1.1 200", 12), 0);
    ck_assert_ptr_nonnull(strstr(body, "cabrank-httpd status"));
    cr_test_client_close(&cl);
    cr_server_stop(s, true);
    ck_assert_int_eq(cr_server_wait(s), 0);
    cr_server_destroy(s);
    http_service_destroy(h);
    remove_file(a, "which.txt");
    remove_file(b, "which.txt");
    rmdir(a);
    rmdir(b);
}
END_TEST

Suite *http_service_suite(void);
Suite *http_service_suite(void)
{
    Suite *s = suite_create("http_service");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, serves_files_and_counts_under_lf);
    tcase_add_test(tc, serves_files_and_counts_under_reactor);
    tcase_add_test(tc, status_path_is_configurable_and_can_be_off);
    tcase_add_test(tc, create_fails_for_an_unusable_root);
    tcase_add_test(tc, latency_buckets_are_log2_microseconds);
    tcase_add_test(tc, status_sums_every_worker_slot);
    tcase_add_test(tc, serves_files_and_counts_under_the_process_models);
    tcase_add_test(tc, process_hooks_run_a_workers_access_log);
    tcase_add_test(tc, reconfigure_switches_the_root_or_keeps_the_old_one);
    suite_add_tcase(s, tc);
    return s;
}
