/*
 * test_prefork.c - the prefork model (src/model/prefork_manager.c and
 * prefork_worker.c) end to end: the master (manager thread) runs in the
 * test process, its workers are real child processes, and the test drives
 * clients over 127.0.0.1. The service here answers each line with the pid
 * of the worker process that served it, so tests can see which worker did
 * what.
 *
 * Covers: every accept lock with one and two threads per worker; a worker
 * killed with SIGKILL under load (replaced, only its connection fails, one
 * crash counted); a leader killed while it holds the pthread accept lock
 * (the robust mutex recovers); graceful restarts every 200 ms under
 * connection-per-request load (no failed request, old generations drain),
 * and once through SIGHUP and cr_server_run in a child process; spare
 * workers following a load that rises and falls; a burst of keep-alive
 * connections, far more than the workers, served at once with each lock,
 * and every request answered while the surplus retires; slow heads on
 * more connections than max_workers holding no worker, and timed out from
 * their accept; max_requests_per_child;
 * a busy worker reported; immediate stop. Every test ends by checking that
 * no child process (zombie or not) is left and /dev/shm has nothing new.
 *
 * Loads are bounded in count and time; waits that expect an event scale
 * with CK_TIMEOUT_MULTIPLIER (sanitizer builds); no timing is asserted
 * beyond generous bounds.
 */
#include <cabrank/log.h>
#include <cabrank/server.h>

#include "../support/support.h"

#include <check.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_ENTRIES 128

/* ms scaled for slow (sanitizer) builds, for waits that expect an event. */
/* ------------------------------------------------------------ the service */

/* "<anything>\n" -> "<pid>\n"; "sleep <ms>\n" sleeps first (signals or not); "close\n" then
 * closes. One cr_conn_request_done per line. */
static ssize_t pid_input(void *ctx, void *state, struct cr_conn *c, const char *data, size_t len)
{
    const char *nl = memchr(data, '\n', len);
    char buf[32];
    size_t n;
    int k;

    CR_UNUSED(ctx);
    CR_UNUSED(state);
    if (nl == NULL)
        return len > 256 ? -EBADMSG : 0;
    n = (size_t)(nl - data) + 1;
    if (n > 6 && memcmp(data, "sleep ", 6) == 0) {
        unsigned ms = 0;

        for (size_t i = 6; i < n && data[i] >= '0' && data[i] <= '9'; i++)
            ms = ms * 10 + (unsigned)(data[i] - '0');
        uint64_t end = cr_test_now_ms() + (ms < 10000 ? ms : 10000);

        /* A signal (the worker told to stop) must not cut it short. */
        while (cr_test_now_ms() < end)
            usleep(10000);
    }
    k = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
    if (cr_conn_write(c, buf, (size_t)k) < 0)
        return -ENOMEM;
    cr_conn_request_done(c);
    if (n == 6 && memcmp(data, "close\n", 6) == 0)
        cr_conn_close_after_flush(c);
    return (ssize_t)n;
}

/* Shared with the workers (forked after it is set up): process_init and
 * process_exit calls. */
struct hooks {
    uint64_t inits;
    uint64_t exits;
};

static struct hooks *hooks;

static int pid_process_init(void *ctx)
{
    CR_UNUSED(ctx);
    __atomic_fetch_add(&hooks->inits, 1, __ATOMIC_RELAXED);
    return 0;
}

static void pid_process_exit(void *ctx)
{
    CR_UNUSED(ctx);
    __atomic_fetch_add(&hooks->exits, 1, __ATOMIC_RELAXED);
}

static const struct cr_service pid_svc = {
    .name = "pid",
    .input = pid_input,
    .process_init = pid_process_init,
    .process_exit = pid_process_exit,
};

/* --------------------------------------------------------------- clients */

/* Reads one line into buf within timeout_ms. Its length or -errno. */
static int read_line(int fd, char *buf, size_t max, int timeout_ms)
{
    uint64_t end = cr_test_now_ms() + (uint64_t)timeout_ms;
    size_t len = 0;

    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        uint64_t now = cr_test_now_ms();
        ssize_t n;

        if (now >= end)
            return -ETIMEDOUT;
        if (poll(&pfd, 1, (int)(end - now)) <= 0)
            continue;
        n = read(fd, buf + len, max - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EPIPE;
        len += (size_t)n;
        buf[len] = '\0';
        if (memchr(buf, '\n', len) != NULL)
            return (int)len;
        if (len == max - 1)
            return -ENOSPC;
    }
}

/* Sends line on fd and returns the pid in the answer, or -errno. */
static int ask(int fd, const char *line, int timeout_ms)
{
    char buf[64];
    int err = cr_test_write_all(fd, line, strlen(line));

    if (err < 0)
        return err;
    err = read_line(fd, buf, sizeof(buf), timeout_ms);
    if (err < 0)
        return err;
    return atoi(buf) > 0 ? atoi(buf) : -EPROTO;
}

/* Closes a client socket with a FIN even when a worker forked meanwhile
 * holds a copy of it (the test's clients live in the master's process, so
 * a worker forked while a connection is open inherits its client end; a
 * real master holds no client sockets). */
static void hangup(int fd)
{
    (void)shutdown(fd, SHUT_RDWR);
    close(fd);
}

/* One connection, one request, close: the pid that served it or -errno. */
static int request_once(uint16_t port, const char *line, int timeout_ms)
{
    int fd = cr_test_connect(port);
    int pid;

    if (fd < 0)
        return fd;
    pid = ask(fd, line, timeout_ms);
    hangup(fd);
    return pid;
}

/* Clients in a loop, each request on its own connection. */
struct load {
    uint16_t port;
    int stop;    /* relaxed atomic */
    uint64_t ok; /* relaxed atomics */
    uint64_t failed;
    int last_err;
    pthread_t threads[4];
    int nthreads;
};

static void *load_main(void *arg)
{
    struct load *l = arg;

    while (!__atomic_load_n(&l->stop, __ATOMIC_RELAXED)) {
        int r = request_once(l->port, "hello\n", cr_test_tmo(5000));

        if (r > 0) {
            __atomic_fetch_add(&l->ok, 1, __ATOMIC_RELAXED);
        } else {
            __atomic_fetch_add(&l->failed, 1, __ATOMIC_RELAXED);
            __atomic_store_n(&l->last_err, r, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

static void load_start(struct load *l, uint16_t port, int nthreads)
{
    memset(l, 0, sizeof(*l));
    l->port = port;
    l->nthreads = nthreads;
    for (int i = 0; i < nthreads; i++)
        ck_assert_int_eq(pthread_create(&l->threads[i], NULL, load_main, l), 0);
}

static void load_stop(struct load *l)
{
    __atomic_store_n(&l->stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < l->nthreads; i++)
        pthread_join(l->threads[i], NULL);
}

/* --------------------------------------------------------------- fixture */

struct fixture {
    struct cr_server *s;
    uint16_t port;
    char shm_before[4096];
};

/* The names in /dev/shm, in directory order, as one string. PostgreSQL's
 * dynamic shared memory segments are left out: the OLTP suites run their
 * own servers beside these tests (tests/support/pg.c). */
static void list_shm(char *out, size_t max)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    size_t len = 0;

    out[0] = '\0';
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        int n;

        if (strncmp(e->d_name, "PostgreSQL.", 11) == 0)
            continue;
        n = snprintf(out + len, max - len, "%s/", e->d_name);
        if (n < 0 || (size_t)n >= max - len)
            break;
        len += (size_t)n;
    }
    closedir(d);
}

/* Child processes of ours (any state, zombies included), from /proc. */
static int count_children(void)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL) {
        char path[300];
        char buf[512];
        FILE *f;
        char *rp;

        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        f = fopen(path, "r");
        if (f == NULL)
            continue;
        if (fgets(buf, sizeof(buf), f) != NULL && (rp = strrchr(buf, ')')) != NULL) {
            char state;
            int ppid;

            if (sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == (int)getpid())
                n++;
        }
        fclose(f);
    }
    closedir(d);
    return n;
}

static void fx_start_svc(struct fixture *f, struct cr_server_config cfg,
                         const struct cr_service *svc)
{
    char addr[64];
    char *colon;

    memset(f, 0, sizeof(*f));
    if (hooks == NULL) {
        hooks =
            mmap(NULL, sizeof(*hooks), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        ck_assert_ptr_ne(hooks, MAP_FAILED);
    }
    memset(hooks, 0, sizeof(*hooks));
    list_shm(f->shm_before, sizeof(f->shm_before));
    cfg.model = "prefork";
    cfg.listen[0] = "127.0.0.1:0";
    ck_assert_int_eq(cr_server_create(&f->s, &cfg, svc), 0);
    ck_assert_int_eq(cr_server_address(f->s, 0, addr, sizeof(addr)), 0);
    colon = strrchr(addr, ':');
    ck_assert_ptr_nonnull(colon);
    f->port = (uint16_t)atoi(colon + 1);
    ck_assert_int_eq(cr_server_start(f->s), 0);
}

static void fx_start(struct fixture *f, struct cr_server_config cfg)
{
    fx_start_svc(f, cfg, &pid_svc);
}

/* Stops (graceful or not), waits, destroys, and checks that nothing is
 * left: no child process, nothing new in /dev/shm, process_exit ran in
 * every worker that ran process_init (graceful only) but the killed ones. */
static void fx_stop(struct fixture *f, bool graceful, unsigned killed)
{
    char shm_after[4096];
    struct cr_server_stats st;
    uint64_t t0 = cr_test_now_ms();

    cr_server_stop(f->s, graceful);
    ck_assert_int_eq(cr_server_wait(f->s), 0);
    ck_assert_uint_lt(cr_test_now_ms() - t0, (uint64_t)cr_test_tmo(10000));
    (void)cr_server_stats(f->s, &st, NULL, 0);
    ck_assert_uint_eq(st.processes, 0);
    ck_assert_uint_eq(cr_server_scoreboard(f->s, NULL, 0), 0);
    cr_server_destroy(f->s);
    f->s = NULL;
    ck_assert_int_eq(count_children(), 0);
    list_shm(shm_after, sizeof(shm_after));
    ck_assert_str_eq(shm_after, f->shm_before);
    if (graceful)
        ck_assert_uint_eq(__atomic_load_n(&hooks->exits, __ATOMIC_RELAXED) + killed,
                          __atomic_load_n(&hooks->inits, __ATOMIC_RELAXED));
}

static unsigned scoreboard(struct fixture *f, struct cr_scoreboard_entry *e)
{
    unsigned n = cr_server_scoreboard(f->s, e, MAX_ENTRIES);

    return n < MAX_ENTRIES ? n : MAX_ENTRIES;
}

/* Waits until n workers show in state st (any generation). */
static bool wait_state(struct fixture *f, enum cr_worker_state st, unsigned n, int timeout_ms)
{
    uint64_t end = cr_test_now_ms() + (uint64_t)timeout_ms;

    while (cr_test_now_ms() < end) {
        struct cr_scoreboard_entry e[MAX_ENTRIES];
        unsigned k = scoreboard(f, e);
        unsigned c = 0;

        for (unsigned i = 0; i < k; i++)
            c += e[i].state == st;
        if (c >= n)
            return true;
        usleep(10000);
    }
    return false;
}

/* The crashes counted, once at least n are or timeout_ms has passed. */
static uint64_t wait_crashes(struct fixture *f, uint64_t n, int timeout_ms)
{
    uint64_t end = cr_test_now_ms() + (uint64_t)timeout_ms;
    struct cr_server_stats st;

    for (;;) {
        (void)cr_server_stats(f->s, &st, NULL, 0);
        if (st.crashes >= n || cr_test_now_ms() >= end)
            return st.crashes;
        usleep(5000);
    }
}

/* Adds the children of pid (forked by any of its threads) not yet in pids[*n]. */
static void add_children(pid_t pid, int *pids, int *n, int max)
{
    char path[300];
    DIR *d;
    struct dirent *e;

    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    d = opendir(path);
    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL) {
        FILE *f;
        int c;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%s/children", (int)pid, e->d_name);
        f = fopen(path, "r");
        if (f == NULL)
            continue;
        while (fscanf(f, "%d", &c) == 1) {
            bool seen = false;

            for (int i = 0; i < *n && !seen; i++)
                seen = pids[i] == c;
            if (!seen && *n < max)
                pids[(*n)++] = c;
        }
        fclose(f);
    }
    closedir(d);
}

/* ------------------------------------------------------------------ tests */

static const char *const locks[] = {"pthread", "fcntl", "none", "reuseport"};
#define NLOCKS 4

/* Each lock with 1 and 2 threads per worker: clients served on connections
 * of their own, concurrently, and on keep-alive ones, one at a time. */
START_TEST(serves_clients_with_each_lock)
{
    struct cr_server_config cfg = {
        .workers = 2,
        .threads = 1 + _i / NLOCKS,
        .accept_lock = locks[_i % NLOCKS],
    };
    struct cr_scoreboard_entry e[MAX_ENTRIES];
    struct cr_server_stats st;
    struct fixture f;
    struct load l;
    unsigned n;
    unsigned forked;

    fx_start(&f, cfg);
    ck_assert(wait_state(&f, CR_WORKER_LISTENING, 1, cr_test_tmo(5000)));
    load_start(&l, f.port, 3);
    usleep(300000);
    load_stop(&l);
    ck_assert_msg(l.failed == 0, "%llu failed (last %d)", (unsigned long long)l.failed, l.last_err);
    ck_assert_uint_gt(l.ok, 10);
    for (int i = 0; i < 3; i++) {
        int fd = cr_test_connect(f.port);

        ck_assert_int_ge(fd, 0);
        for (int r = 0; r < 10; r++)
            ck_assert_int_gt(ask(fd, "again\n", cr_test_tmo(5000)), 0);
        hangup(fd);
    }

    (void)cr_server_stats(f.s, &st, NULL, 0);
    ck_assert_str_eq(st.model, "prefork");
    ck_assert_uint_ge(st.processes, 2);
    ck_assert_uint_eq(st.generation, 1);
    ck_assert_uint_eq(st.crashes, 0);
    ck_assert_uint_ge(st.requests, l.ok + 30);
    ck_assert_uint_ge(st.accepted, l.ok + 3);
    n = scoreboard(&f, e);
    ck_assert_uint_ge(n, 2);
    forked = 0;
    for (unsigned i = 0; i < n; i++) {
        /* The manager may be starting one more for the load just ended: its
         * slot shows before the new process has run. */
        ck_assert_msg(e[i].pid > 0 || e[i].state == CR_WORKER_STARTING,
                      "entry %u: pid %d in state %d", i, e[i].pid, (int)e[i].state);
        forked += e[i].pid > 0;
        ck_assert_uint_eq(e[i].generation, 1);
    }
    ck_assert_uint_ge(forked, 2);
    fx_stop(&f, true, 0);
    ck_assert_uint_ge(hooks->inits, 2);
}
END_TEST

static bool has_pid(const struct cr_scoreboard_entry *e, unsigned n, int pid)
{
    for (unsigned i = 0; i < n; i++) {
        if (e[i].pid == pid)
            return true;
    }
    return false;
}

/* kill -9 a worker under load: replaced at once, one crash, and only the
 * connection it was serving (threads 1: at most one) fails. */
START_TEST(replaces_killed_worker)
{
    struct cr_server_config cfg = {.workers = 2, .threads = 1};
    struct cr_scoreboard_entry e[MAX_ENTRIES];
    struct cr_scoreboard_entry e2[MAX_ENTRIES];
    struct cr_server_stats st;
    struct fixture f;
    struct load l;
    uint64_t t0;
    bool replaced = false;
    unsigned n;
    int victim;

    fx_start(&f, cfg);
    ck_assert(wait_state(&f, CR_WORKER_LISTENING, 1, cr_test_tmo(5000)));
    load_start(&l, f.port, 2);
    usleep(200000);
    n = scoreboard(&f, e);
    ck_assert_uint_ge(n, 2);
    victim = e[0].pid;
    ck_assert_int_gt(victim, 0);
    t0 = cr_test_now_ms();
    ck_assert_int_eq(kill(victim, SIGKILL), 0);
    while (!replaced && cr_test_now_ms() - t0 < (uint64_t)cr_test_tmo(3000)) {
        unsigned k = scoreboard(&f, e2);

        replaced = !has_pid(e2, k, victim);
        for (unsigned i = 0; i < k && replaced; i++)
            replaced = e2[i].pid > 0;
        replaced = replaced && k >= 2;
        if (!replaced)
            usleep(5000);
    }
    ck_assert_msg(replaced, "worker %d not replaced", victim);
    /* A killed worker is replaced within 1 s (scaled for sanitizer builds);
     * unsanitized it takes a few ms. */
    ck_assert_uint_lt(cr_test_now_ms() - t0, (uint64_t)cr_test_tmo(1000));
    usleep(300000);
    load_stop(&l);
    ck_assert_msg(l.failed <= 1, "%llu failed (last %d)", (unsigned long long)l.failed, l.last_err);
    ck_assert_uint_gt(l.ok, 10);
    (void)cr_server_stats(f.s, &st, NULL, 0);
    ck_assert_uint_eq(st.crashes, 1);
    fx_stop(&f, true, 1);
}
END_TEST

/* kill -9 a worker busy on a held connection: once it is reaped, its
 * connection no longer counts as open (none is left behind to decrement). */
START_TEST(killed_worker_leaves_no_open_connection)
{
    struct cr_server_config cfg = {.workers = 2, .threads = 1};
    struct cr_server_stats st;
    struct fixture f;
    int victim;
    int fd;

    fx_start(&f, cfg);
    ck_assert(wait_state(&f, CR_WORKER_LISTENING, 1, cr_test_tmo(5000)));
    fd = cr_test_connect(f.port);
    ck_assert_int_ge(fd, 0);
    victim = ask(fd, "hold\n", cr_test_tmo(5000));
    ck_assert_int_gt(victim, 0);
    (void)cr_server_stats(f.s, &st, NULL, 0);
    ck_assert_uint_eq(st.open_connections, 1);
    ck_assert_int_eq(kill(victim, SIGKILL), 0);
    ck_assert_uint_eq(wait_crashes(&f, 1, cr_test_tmo(5000)), 1);
    (void)cr_server_stats(f.s, &st, NULL, 0);
    ck_assert_uint_eq(st.open_connections, 0);
    hangup(fd);
    fx_stop(&f, true, 1);
}
END_TEST

/* The leader (LISTENING: it holds the pthread accept lock) killed: the next
 * taker recovers the robust mutex and the pool serves on. */
START_TEST(recovers_lock_from_killed_leader)
{
    struct cr_server_config cfg = {.workers = 3, .threads = 1, .accept_lock = "pthread"};
    struct cr_scoreboard_entry e[MAX_ENTRIES];
    struct cr_server_stats st;
    struct fixture f;
    int victim = 0;
    unsigned n;

    fx_start(&f, cfg);
    ck_assert(wait_state(&f, CR_WORKER_LISTENING, 1, cr_test_tmo(5000)));
    n = scoreboard(&f, e);
    for (unsigned i = 0; i < n && victim == 0; i++) {
        if (e[i].state == CR_WORKER_LISTENING)
            victim = e[i].pid;
    }
    ck_assert_int_gt(victim, 0);
    ck_assert_int_eq(kill(victim, SIGKILL), 0);
    for (int i = 0; i < 30; i++)
        ck_assert_int_gt(request_once(f.port, "after\n", cr_test_tmo(5000)), 0);
    /* The kernel releases the victim's robust mutex early in its exit, and reports the exit
     * (the pidfd the manager reaps it by) only once its memory is torn down, which under ASan
     * takes a while: the others can serve all 30 before the crash is counted. */
    ck_assert_uint_eq(wait_crashes(&f, 1, cr_test_tmo(5000)), 1);
    /* Reaped, so its slot is gone: this leader is another worker. */
    ck_assert(wait_state(&f, CR_WORKER_LISTENING, 1, cr_test_tmo(5000)));
    (void)cr_server_stats(f.s, &st, NULL, 0);
    ck_assert_uint_eq(st.crashes, 1);
    fx_stop(&f, true, 1);
}
END_TEST

/* True once every worker in the scoreboard is of generation gen. */
static bool only_generation(struct fixture *f, unsigned gen, int timeout_ms)
{
    uint64_t end = cr_test_now_ms() + (uint64_t)timeout_ms;

    while (cr_test_now_ms() < end) {
        struct cr_scoreboard_entry e[MAX_ENTRIES];
        unsigned k = scoreboard(f, e);
        bool only = k > 0;

        for (unsigned i = 0; i < k; i++)
            only = only && e[i].generation == gen;
        if (only)
            return true;
        usleep(20000);
    }
    return false;
}

/* cr_server_restart every 200 ms, ten times, under connection-per-request
 * load, with each lock and 1 or 2 threads: no request fails, and the old
 * generations drain. */
static bool wait_generation(struct fixture *f, unsigned gen, int timeout_ms);

START_TEST(graceful_restart_loses_nothing)
{
    struct cr_server_config cfg = {
        .workers = 2,
        .threads = 1 + _i % 2,
        .accept_lock = locks[_i / 2],
    };
    struct cr_server_stats st;
    struct fixture f;
    struct load l;

    fx_start(&f, cfg);
    ck_assert(wait_state(&f, CR_WORKER_LISTENING, 1, cr_test_tmo(5000)));
    load_start(&l, f.port, 3);
    for (int i = 0; i < 10; i++) {
        usleep(200000);
        ck_assert_int_eq(cr_server_restart(f.s), 0);
    }
    usleep(300000);
    load_stop(&l);
    ck_assert_msg(l.failed == 0, "%llu of %llu failed (last %d)", (unsigned long long)l.failed,
                  (unsigned long long)(l.ok + l.failed), l.last_err);
    ck_assert_uint_gt(l.ok, 20);
    /* The manager acts on a restart asynchronously: the last may still be
     * on its way (a starved machine). */
    ck_assert(wait_generation(&f, 11, cr_test_tmo(5000)));
    (void)cr_server_stats(f.s, &st, NULL, 0);
    ck_assert_uint_eq(st.restarts, 10);
    ck_assert_uint_eq(st.generation, 11);
    ck_assert_uint_eq(st.crashes, 0);
    ck_assert(only_generation(&f, 11, cr_test_tmo(5000)));
    fx_stop(&f, true, 0);
}
END_TEST

/* What the server process of the SIGHUP test shares with the test. */
struct hup_shared {
    int hups;
    uint16_t port;
};

static void on_hup(struct cr_server *s, void *arg)
{
    struct hup_shared *h = arg;

    CR_UNUSED(s);
    __atomic_fetch_add(&h->hups, 1, __ATOMIC_RELAXED);
}

/* The server process: prefork under cr_server_run. */
static int run_server(struct hup_shared *h)
{
    struct cr_server_config cfg = {
        .model = "prefork",
        .listen = {"127.0.0.1:0"},
        .workers = 2,
        .threads = 1,
        .on_hup = on_hup,
        .signal_arg = h,
    };
    struct cr_service svc = pid_svc;
    struct cr_server *s;
    char addr[64];
    int err;

    svc.process_init = NULL;
    svc.process_exit = NULL;
    if (cr_server_create(&s, &cfg, &svc) != 0 || cr_server_address(s, 0, addr, sizeof(addr)) != 0)
        return 1;
    __atomic_store_n(&h->port, (uint16_t)atoi(strrchr(addr, ':') + 1), __ATOMIC_RELEASE);
    err = cr_server_run(s);
    cr_server_destroy(s);
    return err == 0 ? 0 : 2;
}

/* Forks a process running run_server and waits until it listens. *out
 * returns the page it shares with the test (to munmap). Returns its pid. */
static pid_t start_server_process(struct hup_shared **out)
{
    struct hup_shared *h;
    uint64_t end;
    pid_t child;

    h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(h, MAP_FAILED);
    memset(h, 0, sizeof(*h));
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0)
        _exit(run_server(h));
    end = cr_test_now_ms() + (uint64_t)cr_test_tmo(5000);
    while (__atomic_load_n(&h->port, __ATOMIC_ACQUIRE) == 0 && cr_test_now_ms() < end)
        usleep(5000);
    ck_assert_uint_ne(h->port, 0);
    *out = h;
    return child;
}

/* SIGHUP to a process in cr_server_run: on_hup runs, a new generation
 * serves (new pids), no request fails; SIGTERM then stops it cleanly and
 * leaves no worker behind. */
START_TEST(sighup_restarts_through_server_run)
{
    struct hup_shared *h;
    int before[64];
    int nbefore = 0;
    int status;
    bool fresh = false;
    uint64_t end;
    pid_t child;

    child = start_server_process(&h);
    for (int i = 0; i < 20; i++) {
        int pid = request_once(h->port, "before\n", cr_test_tmo(5000));

        ck_assert_int_gt(pid, 0);
        if (nbefore < 64)
            before[nbefore++] = pid;
    }
    /* Every worker of the first generation, not only those that served: with the pthread lock
     * one worker can serve all 20, and its sibling is no new generation. */
    add_children(child, before, &nbefore, 64);
    ck_assert_int_ge(nbefore, 2);
    ck_assert_int_eq(kill(child, SIGHUP), 0);
    /* on_hup runs just before the restart is asked for. */
    end = cr_test_now_ms() + (uint64_t)cr_test_tmo(5000);
    while (__atomic_load_n(&h->hups, __ATOMIC_RELAXED) == 0 && cr_test_now_ms() < end)
        usleep(5000);
    ck_assert_int_eq(__atomic_load_n(&h->hups, __ATOMIC_RELAXED), 1);
    /* Until the old workers have left (the restart told them to) and a request is served by a
     * worker not seen before; every request on the way is served. */
    end = cr_test_now_ms() + (uint64_t)cr_test_tmo(5000);
    while (!fresh && cr_test_now_ms() < end) {
        bool old_gone = true;
        int pid;

        for (int i = 0; i < nbefore; i++)
            old_gone = old_gone && cr_test_proc_is_gone(before[i]);
        pid = request_once(h->port, "after\n", cr_test_tmo(5000));
        ck_assert_int_gt(pid, 0);
        fresh = old_gone;
        for (int i = 0; i < nbefore; i++)
            fresh = fresh && before[i] != pid;
        if (!fresh)
            usleep(10000);
    }
    ck_assert(fresh);
    ck_assert_int_eq(__atomic_load_n(&h->hups, __ATOMIC_RELAXED), 1);
    ck_assert_int_eq(kill(child, SIGTERM), 0);
    ck_assert_int_eq(cr_test_wait_exit(child, cr_test_tmo(10000), &status), 0);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* Its workers are gone too (no orphan). */
    for (int i = 0; i < nbefore; i++)
        ck_assert(kill(before[i], 0) < 0 && errno == ESRCH);
    munmap(h, sizeof(*h));
    ck_assert_int_eq(count_children(), 0);
}
END_TEST

/* The master killed with SIGKILL (no chance to stop anything): its workers
 * get the parent-death signal, stop and exit; none is left orphaned. */
START_TEST(workers_leave_when_master_dies)
{
    struct hup_shared *h;
    int pids[64];
    int npids = 0;
    int status;
    uint64_t end;
    bool all_gone = false;
    pid_t child;

    child = start_server_process(&h);
    for (int i = 0; i < 20; i++) {
        int pid = request_once(h->port, "who\n", cr_test_tmo(5000));
        bool seen = false;

        ck_assert_int_gt(pid, 0);
        for (int j = 0; j < npids && !seen; j++)
            seen = pids[j] == pid;
        if (!seen && npids < 64)
            pids[npids++] = pid;
    }
    ck_assert_int_ge(npids, 1);
    ck_assert_int_eq(kill(child, SIGKILL), 0);
    ck_assert_int_eq(cr_test_wait_exit(child, cr_test_tmo(5000), &status), 0);
    end = cr_test_now_ms() + (uint64_t)cr_test_tmo(3000);
    while (!all_gone && cr_test_now_ms() < end) {
        all_gone = true;
        for (int i = 0; i < npids; i++)
            all_gone = all_gone && cr_test_proc_is_gone(pids[i]);
        if (!all_gone)
            usleep(10000);
    }
    ck_assert_msg(all_gone, "a worker outlived its master");
    munmap(h, sizeof(*h));
}
END_TEST

/* Processes of the pool right now. */
static unsigned processes(struct fixture *f)
{
    struct cr_server_stats st;

    (void)cr_server_stats(f->s, &st, NULL, 0);
    return st.processes;
}

/* Held-open connections take every idle worker: the manager spawns more
 * (toward max_workers, 1, 2, 4 per second), and once they leave it retires
 * the surplus down to max_spare. */
START_TEST(spares_follow_load)
{
    struct cr_server_config cfg = {
        .workers = 1,
        .min_spare = 2,
        .max_spare = 3,
        .max_workers = 8,
        .threads = 1,
    };
    struct fixture f;
    int held[6];
    uint64_t t0;
    unsigned peak = 0;

    fx_start(&f, cfg);
    /* min_spare 2 over workers 1: a second worker within a tick or two. */
    t0 = cr_test_now_ms();
    while (processes(&f) < 2 && cr_test_now_ms() - t0 < (uint64_t)cr_test_tmo(5000))
        usleep(20000);
    ck_assert_uint_ge(processes(&f), 2);

    /* Six connections, each holding a worker (threads 1). A connection is
     * served once a worker is free; connect returns at once anyway (the
     * backlog). */
    for (int i = 0; i < 6; i++) {
        held[i] = cr_test_connect(f.port);
        ck_assert_int_ge(held[i], 0);
        ck_assert_int_eq(cr_test_write_all(held[i], "hold\n", 5), 0);
    }
    t0 = cr_test_now_ms();
    while (cr_test_now_ms() - t0 < (uint64_t)cr_test_tmo(10000)) {
        unsigned p = processes(&f);

        peak = p > peak ? p : peak;
        if (p >= 8)
            break;
        usleep(20000);
    }
    ck_assert_uint_eq(peak, 8); /* 6 busy + 2 idle = max_workers */
    /* Every held connection got its answer. */
    for (int i = 0; i < 6; i++) {
        char buf[64];

        ck_assert_int_gt(read_line(held[i], buf, sizeof(buf), cr_test_tmo(5000)), 0);
    }
    for (int i = 0; i < 6; i++)
        hangup(held[i]);
    /* Idle 8 > max_spare 3: one retired per tick down to 3. */
    t0 = cr_test_now_ms();
    while (processes(&f) > 3 && cr_test_now_ms() - t0 < (uint64_t)cr_test_tmo(15000))
        usleep(50000);
    ck_assert_uint_le(processes(&f), 3);
    ck_assert_uint_ge(processes(&f), 2);
    fx_stop(&f, true, 0);
}
END_TEST

/* max_requests_per_child, with each lock: workers retire after 5 requests
 * and are replaced; no request fails. */
START_TEST(max_requests_retires_workers)
{
    struct cr_server_config cfg = {
        .workers = 2,
        .threads = 1,
        .max_requests_per_child = 5,
        .accept_lock = locks[_i],
    };
    struct cr_server_stats st;
    struct fixture f;
    int pids[40];
    int distinct = 0;

    fx_start(&f, cfg);
    for (int i = 0; i < 40; i++) {
        pids[i] = request_once(f.port, "count\n", cr_test_tmo(5000));
        ck_assert_int_gt(pids[i], 0);
    }
    for (int i = 0; i < 40; i++) {
        bool seen = false;

        for (int j = 0; j < i && !seen; j++)
            seen = pids[j] == pids[i];
        distinct += !seen;
    }
    /* 40 requests, at most 5 per worker. */
    ck_assert_int_ge(distinct, 8);
    (void)cr_server_stats(f.s, &st, NULL, 0);
    ck_assert_uint_eq(st.crashes, 0);
    ck_assert_uint_eq(st.requests, 40);
    fx_stop(&f, true, 0);
}
END_TEST

/* With each lock: a burst of keep-alive connections, far more than the
 * workers (threads 1), is served at once: the manager spawns for what waits
 * in the accept queues (every reuseport copy included), and any free
 * worker takes a connection from any copy. Then, with half of them closed,
 * the surplus workers retire while the other half keep asking: every
 * request on every connection is answered. */
#define BURST 24
START_TEST(keepalive_burst_is_served_at_once)
{
    struct cr_server_config cfg = {
        .workers = 2,
        .threads = 1,
        .max_workers = BURST + 8,
        .accept_lock = locks[_i],
    };
    struct cr_server_stats st;
    struct fixture f;
    int fds[BURST];
    uint64_t answered = 0;
    uint64_t t0;
    unsigned before;

    fx_start(&f, cfg);
    ck_assert(wait_state(&f, CR_WORKER_LISTENING, 1, cr_test_tmo(5000)));
    for (int i = 0; i < BURST; i++) {
        fds[i] = cr_test_connect(f.port);
        ck_assert_int_ge(fds[i], 0);
        ck_assert_int_eq(cr_test_write_all(fds[i], "first\n", 6), 0);
    }
    /* The 1 s tick alone (1, 2, 4, 8 more) needs 5 s for 24. */
    t0 = cr_test_now_ms();
    for (int i = 0; i < BURST; i++) {
        char buf[64];
        uint64_t now = cr_test_now_ms();
        uint64_t end = t0 + (uint64_t)cr_test_tmo(2500);
        int n = read_line(fds[i], buf, sizeof(buf), now < end ? (int)(end - now) : 1);

        ck_assert_msg(n > 0, "connection %d of %d unanswered after %llu ms: %d", i, BURST,
                      (unsigned long long)(cr_test_now_ms() - t0), n);
        answered++;
    }
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < BURST; i++) {
            ck_assert_int_gt(ask(fds[i], "again\n", cr_test_tmo(5000)), 0);
            answered++;
        }
    }
    /* Half leave: idle workers beyond max_spare retire, one per tick; the
     * other half ask on until one has. */
    for (int i = BURST / 2; i < BURST; i++)
        hangup(fds[i]);
    before = processes(&f);
    t0 = cr_test_now_ms();
    while (processes(&f) >= before && cr_test_now_ms() - t0 < (uint64_t)cr_test_tmo(5000)) {
        for (int i = 0; i < BURST / 2; i++) {
            ck_assert_int_gt(ask(fds[i], "more\n", cr_test_tmo(5000)), 0);
            answered++;
        }
        usleep(20000);
    }
    ck_assert_uint_lt(processes(&f), before);
    for (int i = 0; i < BURST / 2; i++) {
        ck_assert_int_gt(ask(fds[i], "last\n", cr_test_tmo(5000)), 0);
        answered++;
        hangup(fds[i]);
    }
    (void)cr_server_stats(f.s, &st, NULL, 0);
    ck_assert_uint_eq(st.requests, answered);
    ck_assert_uint_eq(st.crashes, 0);
    fx_stop(&f, true, 0);
}
END_TEST

/* Connections that never finish their first line ("slow heads"), four
 * times the most workers there may be (max_workers 3): none holds a worker,
 * so a new client is answered at once, as fast as before them give or take
 * a generous margin; each slow one, finished later, is answered too. With
 * each lock. Before the park set, the three workers each held one and the
 * new client waited in the accept queue for the idle timeout (60 s). */
#define SLOW 12
START_TEST(slow_heads_hold_no_worker)
{
    struct cr_server_config cfg = {
        .workers = 2,
        .threads = 1,
        .max_workers = 3,
        .accept_lock = locks[_i],
    };
    struct cr_server_stats st;
    struct fixture f;
    int fds[SLOW];
    uint64_t t0;
    uint64_t normal;
    uint64_t took;

    fx_start(&f, cfg);
    ck_assert(wait_state(&f, CR_WORKER_LISTENING, 1, cr_test_tmo(5000)));
    t0 = cr_test_now_ms();
    ck_assert_int_gt(request_once(f.port, "before\n", cr_test_tmo(5000)), 0);
    normal = cr_test_now_ms() - t0;
    for (int i = 0; i < SLOW; i++) {
        fds[i] = cr_test_connect(f.port);
        ck_assert_int_ge(fds[i], 0);
        ck_assert_int_eq(cr_test_write_all(fds[i], "slow", 4), 0);
    }
    usleep(200 * 1000); /* taken, or waiting for a worker */
    t0 = cr_test_now_ms();
    ck_assert_int_gt(request_once(f.port, "hello\n", cr_test_tmo(1000) + (int)normal * 10), 0);
    took = cr_test_now_ms() - t0;
    ck_assert_msg(took <= (uint64_t)cr_test_tmo(1000) + normal * 10,
                  "a new client waited %llu ms behind %d slow heads (%llu ms without)",
                  (unsigned long long)took, SLOW, (unsigned long long)normal);
    /* Parked ones count as open (the new client's goes soon). */
    t0 = cr_test_now_ms();
    do {
        usleep(10000);
        (void)cr_server_stats(f.s, &st, NULL, 0);
    } while (st.open_connections != SLOW && cr_test_now_ms() - t0 < (uint64_t)cr_test_tmo(2000));
    ck_assert_uint_eq(st.open_connections, SLOW);
    for (int i = 0; i < SLOW; i++) {
        ck_assert_int_gt(ask(fds[i], "\n", cr_test_tmo(2000)), 0);
        ck_assert_int_gt(ask(fds[i], "again\n", cr_test_tmo(2000)), 0);
    }
    for (int i = 0; i < SLOW; i++)
        hangup(fds[i]);
    (void)cr_server_stats(f.s, &st, NULL, 0);
    ck_assert_uint_eq(st.requests, 2 + 2 * SLOW);
    fx_stop(&f, true, 0);
}
END_TEST

/* The input timeout of a slow head counts from the connection's accept,
 * which comes at once: eight slow heads on at most three workers are each
 * closed one timeout (1 s) after they connected, give or take a margin.
 * Before the park set, the workers took them three at a time, and closed
 * the last ones two timeouts late. */
START_TEST(slow_heads_time_out_from_arrival)
{
    struct cr_server_config cfg = {
        .workers = 2,
        .threads = 1,
        .max_workers = 3,
        .idle_timeout_ms = 1000,
    };
    struct fixture f;
    int fds[8];
    uint64_t at[8];
    long closed[8];

    fx_start(&f, cfg);
    ck_assert(wait_state(&f, CR_WORKER_LISTENING, 1, cr_test_tmo(5000)));
    for (int i = 0; i < 8; i++) {
        fds[i] = cr_test_connect(f.port);
        ck_assert_int_ge(fds[i], 0);
        ck_assert_int_eq(cr_test_write_all(fds[i], "slow", 4), 0);
        at[i] = cr_test_now_ms();
        closed[i] = -1;
    }
    for (int left = 8; left > 0 && cr_test_now_ms() - at[0] < (uint64_t)cr_test_tmo(5000);) {
        for (int i = 0; i < 8; i++) {
            struct pollfd pfd = {.fd = fds[i], .events = POLLIN};
            char buf[16];

            if (closed[i] >= 0 || poll(&pfd, 1, 0) <= 0)
                continue;
            if (read(fds[i], buf, sizeof(buf)) <= 0) {
                closed[i] = (long)(cr_test_now_ms() - at[i]);
                left--;
            }
        }
        usleep(5000);
    }
    for (int i = 0; i < 8; i++) {
        ck_assert_msg(closed[i] >= 850 && closed[i] <= 1000 + cr_test_tmo(600),
                      "slow head %d closed %ld ms after it connected (timeout 1000 ms)", i,
                      closed[i]);
        hangup(fds[i]);
    }
    fx_stop(&f, true, 0);
}
END_TEST

/* A worker busy on one connection beyond busy_warn_ms is reported once;
 * an immediate stop ends it without waiting for its handler's sleep to
 * be answered. */
START_TEST(reports_busy_worker_and_stops_immediately)
{
    struct cr_server_config cfg = {.workers = 1, .threads = 1, .busy_warn_ms = 100};
    struct cr_scoreboard_entry e[MAX_ENTRIES];
    char path[] = "/tmp/cr-prefork-log-XXXXXX";
    char log[8192];
    struct fixture f;
    ssize_t len;
    int logfd;
    int fd;
    unsigned n;
    bool busy = false;

    logfd = mkstemp(path);
    ck_assert_int_ge(logfd, 0);
    unlink(path);
    cr_log_set_fd(logfd);
    fx_start(&f, cfg);
    fd = cr_test_connect(f.port);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(cr_test_write_all(fd, "sleep 2500\n", 11), 0);
    ck_assert(wait_state(&f, CR_WORKER_BUSY, 1, cr_test_tmo(5000)));
    n = scoreboard(&f, e);
    for (unsigned i = 0; i < n; i++)
        busy = busy || (e[i].state == CR_WORKER_BUSY && e[i].busy_threads == 1);
    ck_assert(busy);
    /* A tick (1 s) after 100 ms busy. */
    usleep((useconds_t)cr_test_tmo(1500) * 1000);
    fx_stop(&f, false, 0);
    hangup(fd);
    cr_log_set_fd(-1);
    len = pread(logfd, log, sizeof(log) - 1, 0);
    close(logfd);
    ck_assert_int_gt(len, 0);
    log[len] = '\0';
    ck_assert_msg(strstr(log, "busy on one connection") != NULL, "log: %s", log);
    /* Once per connection. */
    ck_assert_ptr_null(strstr(strstr(log, "busy on one connection") + 1, "busy on one connection"));
}
END_TEST

/* Ten restarts while every old worker is busy on a long (5 s) request: the old
 * generations outnumber the scoreboard (4 * max_workers + 4 = 8 slots), so
 * the oldest stopping workers are evicted from their slots, yet each new
 * generation starts and every long request is answered. */
/* Waits until the server reports generation gen. */
static bool wait_generation(struct fixture *f, unsigned gen, int timeout_ms)
{
    uint64_t end = cr_test_now_ms() + (uint64_t)timeout_ms;

    while (cr_test_now_ms() < end) {
        struct cr_server_stats st;

        (void)cr_server_stats(f->s, &st, NULL, 0);
        if (st.generation >= gen)
            return true;
        usleep(2000);
    }
    return false;
}

START_TEST(restarts_never_wait_for_a_slot)
{
    struct cr_server_config cfg = {.workers = 1, .max_workers = 1, .threads = 1};
    struct cr_server_stats st;
    struct fixture f;
    int fds[10];
    unsigned peak = 0;
    uint64_t t0;

    fx_start(&f, cfg);
    t0 = cr_test_now_ms();
    for (int i = 0; i < 10; i++) {
        ck_assert(wait_state(&f, CR_WORKER_LISTENING, 1, cr_test_tmo(5000)));
        fds[i] = cr_test_connect(f.port);
        ck_assert_int_ge(fds[i], 0);
        ck_assert_int_eq(cr_test_write_all(fds[i], "sleep 5000\n", 11), 0);
        ck_assert(wait_state(&f, CR_WORKER_BUSY, 1, cr_test_tmo(5000)));
        ck_assert_int_eq(cr_server_restart(f.s), 0);
        /* The manager acts on it asynchronously: wait, so that each
         * restart is one generation with its own busy worker. */
        ck_assert(wait_generation(&f, (unsigned)i + 2, cr_test_tmo(5000)));
        peak = processes(&f) > peak ? processes(&f) : peak;
        ck_assert_uint_le(cr_server_scoreboard(f.s, NULL, 0), 8);
    }
    /* Every old worker still busy, unless the restarts took so long that
     * the first requests ended (a slow build). */
    if (cr_test_now_ms() - t0 < 4000)
        ck_assert_uint_ge(peak, 9);
    else
        cr_test_skip("prefork: every old worker still busy", "the restarts took over 4 s");
    for (int i = 0; i < 10; i++) {
        char buf[64];

        ck_assert_int_gt(read_line(fds[i], buf, sizeof(buf), cr_test_tmo(15000)), 0);
        hangup(fds[i]);
    }
    ck_assert(only_generation(&f, 11, cr_test_tmo(5000)));
    ck_assert_int_gt(request_once(f.port, "last\n", cr_test_tmo(5000)), 0);
    (void)cr_server_stats(f.s, &st, NULL, 0);
    ck_assert_uint_eq(st.crashes, 0);
    fx_stop(&f, true, 0);
}
END_TEST

static int failing_init(void *ctx)
{
    CR_UNUSED(ctx);
    return -EIO;
}

/* A process_init that always fails: each worker exits at once and counts
 * as a crash, and the manager replaces them at its tick's pace, not in a
 * fork loop. */
START_TEST(failing_process_init_is_not_a_fork_loop)
{
    struct cr_server_config cfg = {.workers = 2, .threads = 1};
    struct cr_service svc = pid_svc;
    struct cr_server_stats st;
    struct fixture f;

    svc.process_init = failing_init;
    svc.process_exit = NULL;
    fx_start_svc(&f, cfg, &svc);
    usleep(2500000);
    (void)cr_server_stats(f.s, &st, NULL, 0);
    ck_assert_uint_ge(st.crashes, 2);
    /* 2 at start, then at most workers (2) a tick. */
    ck_assert_uint_le(st.crashes, 12);
    fx_stop(&f, true, 0);
}
END_TEST

Suite *prefork_suite(void);
Suite *prefork_suite(void)
{
    Suite *s = suite_create("prefork");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, serves_clients_with_each_lock, 0, 2 * NLOCKS);
    tcase_add_test(tc, replaces_killed_worker);
    tcase_add_test(tc, killed_worker_leaves_no_open_connection);
    tcase_add_test(tc, recovers_lock_from_killed_leader);
    tcase_add_loop_test(tc, graceful_restart_loses_nothing, 0, 2 * NLOCKS);
    tcase_add_test(tc, sighup_restarts_through_server_run);
    tcase_add_test(tc, spares_follow_load);
    tcase_add_loop_test(tc, keepalive_burst_is_served_at_once, 0, NLOCKS);
    tcase_add_loop_test(tc, slow_heads_hold_no_worker, 0, NLOCKS);
    tcase_add_test(tc, slow_heads_time_out_from_arrival);
    tcase_add_loop_test(tc, max_requests_retires_workers, 0, NLOCKS);
    tcase_add_test(tc, reports_busy_worker_and_stops_immediately);
    tcase_add_test(tc, failing_process_init_is_not_a_fork_loop);
    tcase_add_test(tc, restarts_never_wait_for_a_slot);
    tcase_add_test(tc, workers_leave_when_master_dies);
    suite_add_tcase(s, tc);
    return s;
}
