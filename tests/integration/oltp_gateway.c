/*
 * oltp_gateway.c (integration) - cabrank-gateway end to end, in front of
 * cabrank-ledger processes that share one PostgreSQL database (a throwaway
 * server of tests/support/pg.h; without PostgreSQL the test skips, 77).
 *
 * Failover: two ledgers behind one gateway; client threads send keyed
 * transfers (idempotent) through the gateway; one ledger is killed with
 * SIGKILL mid-load. The gateway retries the transfers in flight on it on the
 * other ledger, so the clients see no error at all; then the database, read
 * through ledger_db.h, holds every acknowledged transfer exactly once with
 * the arguments it was sent with, nothing that was never sent, the sum of the
 * balances unchanged and none negative.
 *
 * Hybrid deadlock, at the program level: a gateway with two threads in front
 * of one ledger whose writes are blocked (the test holds an exclusive lock
 * on the accounts table): sixteen clients send a transfer each, so every
 * gateway thread waits for a reply; a new client's PING is still answered;
 * once the lock goes, all sixteen transfers are answered.
 *
 * Handle sets: the gateway logs the sets and threads it serves with:
 * --groups 2 gives two of two threads, and with no flag, in a process pinned
 * to one CPU (sched_setaffinity, inherited by the child), one set of two;
 * --threads fewer than --groups is a usage error.
 *
 * Also: --help, a bad flag (exit 2), a graceful TERM (exit 0).
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include "../support/oltp_client.h"
#include "../support/pg.h"
#include "httpd_client.h"

#ifdef CR_HAVE_LIBPQ
#include <libpq-fe.h>
#endif
#include <poll.h>
#include <sched.h>

#define ACCOUNTS      32
#define START_BALANCE 100000
#define CLIENTS       8
#define MAX_PER       300
#define HY_CLIENTS    16

/* ------------------------------------------------------------------ processes
 */

static int start_ledger(struct hc_server *s, const char *db)
{
    char *args[] = {"--listen", "127.0.0.1:0", "--db", (char *)db, "--threads",
                    "8",        "--log-level", "warn", NULL};

    return cr_test_oltp_spawn("cabrank-ledger", args, &s->pid, &s->port, hc_tmo(20000));
}

/* A gateway with threads threads in front of the ledgers on ports[0..n),
 * a PING every health seconds (no reply in twice as long fails a connection:
 * a ledger whose threads all wait for the database answers none). */
static int start_gateway(struct hc_server *s, const uint16_t *ports, unsigned n,
                         const char *threads, const char *health, const char *log)
{
    static char addrs[4][32];
    char *argv[32];
    int k = 0;

    argv[k++] = "--listen";
    argv[k++] = "127.0.0.1:0";
    argv[k++] = "--threads";
    argv[k++] = (char *)threads;
    argv[k++] = "--health-interval";
    argv[k++] = (char *)health;
    argv[k++] = "--timeout";
    argv[k++] = "60";
    argv[k++] = "--log-level";
    argv[k++] = "info";
    argv[k++] = "--error-log";
    argv[k++] = (char *)log;
    for (unsigned i = 0; i < n && i < 4; i++) {
        snprintf(addrs[i], sizeof(addrs[i]), "127.0.0.1:%u", ports[i]);
        argv[k++] = "--backend";
        argv[k++] = addrs[i];
    }
    argv[k] = NULL;
    return cr_test_oltp_spawn("cabrank-gateway", argv, &s->pid, &s->port, hc_tmo(20000));
}

/* ------------------------------------------------------------------ failover
 * load */

static void check_db(const char *url, struct cr_test_oltp_load *ld)
{
    static struct cr_test_oltp_verdict v;
    int err = cr_test_oltp_check(ld, url, ACCOUNTS, START_BALANCE, &v);

    printf("failover: %u transfers acknowledged\n", v.acked);
    CHECK(err == 0 && v.ok, "the database against the answers (%s):\n%s", strerror(-err), v.report);
}

/* The number after "name " in the gateway's totals line of its log, or -1. */
static long long logged_total(const char *log, const char *name)
{
    static char text[1 << 16];
    char pat[64];
    const char *t;
    const char *p;
    ssize_t n;
    int fd = open(log, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return -1;
    n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n < 0)
        return -1;
    text[n] = '\0';
    t = strstr(text, "totals: ");
    snprintf(pat, sizeof(pat), " %s ", name);
    p = t != NULL ? strstr(t, pat) : NULL;
    return p != NULL ? atoll(p + strlen(pat)) : -1;
}

static void test_failover(const char *url, const char *dir)
{
    static struct cr_test_oltp_load ld;
    char log[512];
    struct hc_server la = {0};
    struct hc_server lb = {0};
    struct hc_server gw = {0};
    uint16_t ports[2];
    uint64_t end;
    unsigned per = hc_is_sanitized() ? MAX_PER / 3 : MAX_PER;
    unsigned kill_at = CLIENTS * per / 3;
    int status = 0;

    snprintf(log, sizeof(log), "%s/gateway-failover.log", dir);
    if (cr_test_oltp_make_db(url, ACCOUNTS, START_BALANCE) < 0 || start_ledger(&la, url) < 0 ||
        start_ledger(&lb, url) < 0) {
        CHECK(false, "set-up");
        goto out;
    }
    ports[0] = la.port;
    ports[1] = lb.port;
    if (start_gateway(&gw, ports, 2, "4", "2", log) < 0) {
        CHECK(false, "gateway start");
        goto out;
    }
    /* Every transfer answered, none resent by a client: the gateway does
     * the resending. */
    if (cr_test_oltp_load_start(&ld, &(struct cr_test_oltp_load_config){
                                         .port = gw.port,
                                         .clients = CLIENTS,
                                         .per_client = per,
                                         .accounts = ACCOUNTS,
                                         .max_amount = 500,
                                         .seed = 7919u,
                                         .reply_tmo_ms = hc_tmo(60000),
                                     }) < 0)
        abort();
    /* Mid-load: a third of the transfers acknowledged. */
    end = cr_test_now_ms() + (uint64_t)hc_tmo(60000);
    while (atomic_load_explicit(&ld.acked, memory_order_relaxed) < kill_at &&
           cr_test_now_ms() < end)
        usleep(1000);
    CHECK(atomic_load_explicit(&ld.acked, memory_order_relaxed) >= kill_at, "load too slow");
    /* Frozen first, so that transfers are in flight on it when it dies: in
     * a closed loop at full speed they nearly always are, but not by
     * construction, and a kill between two would leave nothing to resend. */
    kill(la.pid, SIGSTOP);
    usleep(200 * 1000);
    kill(la.pid, SIGKILL);
    CHECK(cr_test_wait_exit(la.pid, hc_tmo(10000), &status) == 0, "ledger a gone");
    la.pid = 0;
    cr_test_oltp_load_join(&ld);
    for (unsigned i = 0; i < CLIENTS; i++) {
        /* A transport error, or a status a client must not see. */
        CHECK(ld.c[i].failed == 0 && ld.c[i].unexpected == 0,
              "client %u: %u errors (last status %u: %s)", i, ld.c[i].failed + ld.c[i].unexpected,
              ld.c[i].last_unexpected, oltp_status_name(ld.c[i].last_unexpected));
        CHECK(ld.c[i].sent == per, "client %u sent %u", i, ld.c[i].sent);
    }
    CHECK(hc_stop(&gw) == 0, "gateway: graceful stop, exit 0");
    CHECK(hc_stop(&lb) == 0, "ledger b: graceful stop");
    /* Transfers were in flight on the ledger that died (8 clients, closed
     * loop, spread over two ledgers): sent again, none in doubt. */
    CHECK(logged_total(log, "retried") >= 1, "retried %lld", logged_total(log, "retried"));
    CHECK(logged_total(log, "doubt") == 0, "in doubt %lld", logged_total(log, "doubt"));
    CHECK(logged_total(log, "unavailable") == 0, "unavailable %lld",
          logged_total(log, "unavailable"));
    printf("failover: %lld transfers sent again after the kill\n", logged_total(log, "retried"));
    check_db(url, &ld);
out:
    hc_stop_sig(&gw, SIGKILL, hc_tmo(10000));
    hc_stop_sig(&la, SIGKILL, hc_tmo(10000));
    hc_stop_sig(&lb, SIGKILL, hc_tmo(10000));
}

/* ------------------------------------------------------------------ hybrid
 * deadlock */

#ifdef CR_HAVE_LIBPQ
static bool pq_ok(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;

    if (!ok)
        fprintf(stderr, "%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return ok;
}

/* Backends of the database waiting for a lock now. */
static int lock_waiters(PGconn *c)
{
    PGresult *r = PQexec(c, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'");
    int n = -1;

    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        n = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

static void test_hybrid_deadlock(const char *url, const char *dir)
{
    char log[512];
    struct hc_server led = {0};
    struct hc_server gw = {0};
    PGconn *locker = NULL;
    PGconn *watcher = NULL;
    int fd[HY_CLIENTS];
    int pfd = -1;
    int nfd = 0;
    uint64_t end;
    struct oltp_reply rp;

    snprintf(log, sizeof(log), "%s/gateway-hybrid.log", dir);
    if (start_ledger(&led, url) < 0 || start_gateway(&gw, &led.port, 1, "2", "30", log) < 0) {
        CHECK(false, "set-up");
        goto out;
    }
    locker = PQconnectdb(url);
    watcher = PQconnectdb(url);
    if (PQstatus(locker) != CONNECTION_OK || PQstatus(watcher) != CONNECTION_OK) {
        CHECK(false, "libpq connect");
        goto out;
    }
    /* Every write of the ledger waits for this lock. */
    CHECK(pq_ok(locker, "BEGIN"), "begin");
    CHECK(pq_ok(locker, "LOCK TABLE accounts IN EXCLUSIVE MODE"), "lock");
    for (nfd = 0; nfd < HY_CLIENTS; nfd++) {
        struct oltp_req q;

        memset(&q, 0, sizeof(q));
        q.op = OLTP_OP_TRANSFER;
        q.id = 500 + (uint64_t)nfd;
        q.account = 1 + (uint64_t)nfd % ACCOUNTS;
        q.to = 1 + (uint64_t)(nfd + 1) % ACCOUNTS;
        q.amount = 1;
        cr_test_oltp_key(99, (unsigned)nfd, q.key);
        fd[nfd] = cr_test_connect(gw.port);
        if (fd[nfd] < 0)
            break;
        CHECK(cr_test_oltp_send(fd[nfd], &q) == 0, "send %d", nfd);
    }
    CHECK(nfd == HY_CLIENTS, "connected %d", nfd);
    end = cr_test_now_ms() + (uint64_t)hc_tmo(20000);
    while (lock_waiters(watcher) < 1 && cr_test_now_ms() < end)
        usleep(2000);
    CHECK(lock_waiters(watcher) >= 1, "the ledger never waited for the lock");
    /* Both gateway threads wait for replies; a new client is served. */
    pfd = cr_test_connect(gw.port);
    CHECK(pfd >= 0, "connect");
    if (pfd >= 0) {
        struct oltp_req ping = {.op = OLTP_OP_PING, .id = 77};

        CHECK(cr_test_oltp_send(pfd, &ping) == 0, "ping");
        CHECK(cr_test_oltp_recv(pfd, &rp, hc_tmo(10000)) == 0 && rp.id == 77 &&
                  rp.status == OLTP_ST_OK,
              "PING answered while every thread waits");
    }
    for (int i = 0; i < nfd; i++) {
        struct pollfd p = {.fd = fd[i], .events = POLLIN};

        CHECK(poll(&p, 1, 0) == 0, "client %d answered before the lock went", i);
    }
    CHECK(pq_ok(locker, "COMMIT"), "unlock");
    for (int i = 0; i < nfd; i++) {
        CHECK(cr_test_oltp_recv(fd[i], &rp, hc_tmo(30000)) == 0 && rp.id == 500 + (uint64_t)i &&
                  rp.status == OLTP_ST_OK,
              "client %d: transfer answered OK", i);
    }
    CHECK(hc_stop(&gw) == 0, "gateway: graceful stop, exit 0");
    CHECK(hc_stop(&led) == 0, "ledger: graceful stop");
out:
    for (int i = 0; i < nfd; i++)
        close(fd[i]);
    if (pfd >= 0)
        close(pfd);
    PQfinish(locker);
    PQfinish(watcher);
    hc_stop_sig(&gw, SIGKILL, hc_tmo(10000));
    hc_stop_sig(&led, SIGKILL, hc_tmo(10000));
}
#endif /* CR_HAVE_LIBPQ */

/* ------------------------------------------------------------------ command
 * line */

/* Runs the gateway with argv[1..] and returns its exit status, its stdout
 * and stderr in out. */
static int run_cli(char *const *args, char *out, size_t cap)
{
    char path[4096];
    char *argv[8];
    int pipefd[2];
    int status = -1;
    size_t len = 0;
    pid_t pid;

    cr_test_build_path("cabrank-gateway", path, sizeof(path));
    argv[0] = path;
    for (int i = 0; i < 6 && args[i] != NULL; i++) {
        argv[i + 1] = args[i];
        argv[i + 2] = NULL;
    }
    if (pipe(pipefd) < 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 1);
        dup2(pipefd[1], 2);
        execv(path, argv);
        _exit(127);
    }
    close(pipefd[1]);
    for (;;) {
        ssize_t n = read(pipefd[0], out + len, cap - 1 - len);

        if (n <= 0)
            break;
        len += (size_t)n;
    }
    out[len] = '\0';
    close(pipefd[0]);
    if (cr_test_wait_exit(pid, hc_tmo(10000), &status) < 0)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_cli(void)
{
    static char out[8192];
    char *help[] = {"--help", NULL};
    char *bad[] = {"--backend", "127.0.0.1:1", "--bogus", NULL};
    char *none[] = {"--threads", "2", NULL};
    char *badaddr[] = {"--backend", "localhost:7", NULL};

    CHECK(run_cli(help, out, sizeof(out)) == 0 && strstr(out, "--backend") != NULL &&
              strstr(out, "--health-interval") != NULL,
          "--help: %s", out);
    CHECK(run_cli(bad, out, sizeof(out)) == 2 && strchr(out, '\n') == out + strlen(out) - 1,
          "bad flag: one line, exit 2: %s", out);
    CHECK(run_cli(none, out, sizeof(out)) == 2, "no --backend: exit 2: %s", out);
    CHECK(run_cli(badaddr, out, sizeof(out)) == 2, "bad address: exit 2: %s", out);
}

/* Whether a gateway started with extra (in front of 127.0.0.1:1, which
 * refuses: its connections retry in the background), pinned to one CPU when
 * one_cpu, logs want as its "serving with" line. */
static bool serves_with(char *const *extra, bool one_cpu, const char *want)
{
    char dir[] = "/tmp/cr-gw-sets-XXXXXX";
    char log[64];
    char *args[16];
    struct hc_server gw = {0};
    cpu_set_t saved;
    cpu_set_t one;
    char *text = NULL;
    bool ok = false;
    int k = 0;

    if (mkdtemp(dir) == NULL)
        return false;
    snprintf(log, sizeof(log), "%s/gateway.log", dir);
    args[k++] = "--listen";
    args[k++] = "127.0.0.1:0";
    args[k++] = "--backend";
    args[k++] = "127.0.0.1:1";
    args[k++] = "--error-log";
    args[k++] = log;
    for (int i = 0; extra[i] != NULL && k < 14; i++)
        args[k++] = extra[i];
    args[k] = NULL;
    if (sched_getaffinity(0, sizeof(saved), &saved) < 0)
        goto out;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE && CPU_COUNT(&one) == 0; c++) {
        if (CPU_ISSET(c, &saved))
            CPU_SET(c, &one);
    }
    if (one_cpu && sched_setaffinity(0, sizeof(one), &one) < 0)
        goto out;
    k = cr_test_oltp_spawn("cabrank-gateway", args, &gw.pid, &gw.port, hc_tmo(20000));
    if (one_cpu && sched_setaffinity(0, sizeof(saved), &saved) < 0)
        hc_failures++;
    if (k < 0)
        goto out;
    text = cr_test_read_file(log, NULL);
    ok = text != NULL && strstr(text, want) != NULL;
    if (!ok)
        fprintf(stderr, "wanted '%s' in:\n%s\n", want, text != NULL ? text : "(no log)");
    if (hc_stop_sig(&gw, SIGTERM, hc_tmo(20000)) != 0)
        ok = false;
out:
    free(text);
    unlink(log);
    rmdir(dir);
    return ok;
}

static void test_sets(void)
{
    static char out[8192];
    char *two[] = {"--groups", "2", NULL};
    char *none[] = {NULL};
    char *autow[] = {"--groups", "auto", "--threads", "6", NULL};
    char *few[] = {"--backend", "127.0.0.1:1", "--groups", "3", "--threads", "2", NULL};

    CHECK(serves_with(two, false, "serving with 2 handle sets, 4 threads"), "--groups 2");
    CHECK(serves_with(none, true, "serving with 1 handle set, 2 threads"),
          "no flag, one CPU: one set");
    CHECK(serves_with(autow, true, "serving with 1 handle set, 6 threads"),
          "--groups auto --threads 6, one CPU: one set (at most one per CPU)");
    CHECK(run_cli(few, out, sizeof(out)) == 2 && strstr(out, "--groups") != NULL,
          "--threads fewer than --groups: exit 2: %s", out);
}

int main(void)
{
    struct cr_test_pg pg;
    int err;

    signal(SIGPIPE, SIG_IGN);
    test_cli();
    test_sets();
    err = cr_test_pg_start(&pg);
    if (err == -ENOENT) {
        fprintf(stderr, "oltp_gateway: no PostgreSQL, skipped\n");
        return hc_failures == 0 ? 77 : 1;
    }
    if (err < 0) {
        fprintf(stderr, "oltp_gateway: PostgreSQL did not start: %s\n", strerror(-err));
        return 1;
    }
    /* The gateways' logs go with the database's directory. */
    test_failover(pg.url, pg.dir);
#ifdef CR_HAVE_LIBPQ
    test_hybrid_deadlock(pg.url, pg.dir);
#endif
    cr_test_pg_stop(&pg);
    if (hc_failures == 0)
        printf("oltp_gateway: passed\n");
    return hc_failures == 0 ? 0 : 1;
}
