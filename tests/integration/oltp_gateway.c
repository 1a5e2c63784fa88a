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
 * Also: --help, a bad flag (exit 2), a graceful TERM (exit 0).
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include "../../apps/oltp/ledger_db.h"
#include "../../apps/oltp/proto.h"
#include "../support/pg.h"
#include "httpd_client.h"

#ifdef CR_HAVE_LIBPQ
#include <libpq-fe.h>
#endif
#include <poll.h>
#include <pthread.h>

#define ACCOUNTS      32
#define START_BALANCE 100000
#define CLIENTS       8
#define MAX_PER       300
#define HY_CLIENTS    16

/* ------------------------------------------------------------------ protocol
 */

static int send_req(int fd, const struct oltp_req *r)
{
    uint8_t buf[128];
    size_t n = oltp_req_encode(r, buf, sizeof(buf));

    if (n == 0)
        return -EINVAL;
    return cr_test_write_all(fd, buf, n);
}

static int recv_reply(int fd, struct oltp_reply *rp, int tmo)
{
    static _Thread_local uint8_t buf[OLTP_MAX_FRAME];
    uint32_t body;
    int err = cr_test_read_exact(fd, buf, OLTP_HEADER_SIZE, tmo);

    if (err < 0)
        return err;
    body = (uint32_t)buf[4] << 24 | (uint32_t)buf[5] << 16 | (uint32_t)buf[6] << 8 | buf[7];
    if (body > OLTP_MAX_BODY)
        return -EBADMSG;
    err = cr_test_read_exact(fd, buf + OLTP_HEADER_SIZE, body, tmo);
    if (err < 0)
        return err;
    if (oltp_reply_decode(buf, OLTP_HEADER_SIZE + body, rp) != (ssize_t)(OLTP_HEADER_SIZE + body))
        return -EBADMSG;
    return 0;
}

/* Client c's seq-th transfer key: "gw" c seq, the rest zero. */
static void key_of(unsigned c, unsigned seq, uint8_t key[OLTP_KEY_SIZE])
{
    memset(key, 0, OLTP_KEY_SIZE);
    key[0] = 'g';
    key[1] = 'w';
    memcpy(key + 4, &c, sizeof(c));
    memcpy(key + 8, &seq, sizeof(seq));
}

static bool parse_key(const uint8_t key[OLTP_KEY_SIZE], unsigned *c, unsigned *seq)
{
    if (key[0] != 'g' || key[1] != 'w')
        return false;
    memcpy(c, key + 4, sizeof(*c));
    memcpy(seq, key + 8, sizeof(*seq));
    return true;
}

/* ------------------------------------------------------------------ processes
 */

static int start_ledger(struct hc_server *s, const char *db)
{
    char path[4096];
    char *argv[] = {path,        "--listen", "127.0.0.1:0", "--db", (char *)db,
                    "--threads", "8",        "--log-level", "warn", NULL};
    int err;

    cr_test_build_path("cabrank-ledger", path, sizeof(path));
    err = cr_test_spawn_server(argv, &s->pid, &s->port, hc_tmo(20000));
    if (err < 0)
        fprintf(stderr, "starting %s: %s\n", path, strerror(-err));
    return err;
}

/* A gateway with threads threads in front of the ledgers on ports[0..n),
 * a PING every health seconds (no reply in twice as long fails a connection:
 * a ledger whose threads all wait for the database answers none). */
static int start_gateway(struct hc_server *s, const uint16_t *ports, unsigned n,
                         const char *threads, const char *health, const char *log)
{
    static char addrs[4][32];
    char path[4096];
    char *argv[32];
    int k = 0;
    int err;

    cr_test_build_path("cabrank-gateway", path, sizeof(path));
    argv[k++] = path;
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
    err = cr_test_spawn_server(argv, &s->pid, &s->port, hc_tmo(20000));
    if (err < 0)
        fprintf(stderr, "starting %s: %s\n", path, strerror(-err));
    return err;
}

/* ------------------------------------------------------------------ the
 * database */

static int make_db(const char *url)
{
    struct ledger_db_config dc = {.url = url};
    struct ledger_db *db;
    int err = ledger_db_open(&db, &dc);

    if (err < 0)
        return err;
    for (uint64_t a = 1; a <= ACCOUNTS && err == 0; a++) {
        struct ledger_op ops[2] = {
            {.op = OLTP_OP_OPEN, .account = a},
            {.op = OLTP_OP_DEPOSIT, .account = a, .amount = START_BALANCE},
        };
        struct ledger_result res;

        err = ledger_db_apply(db, ops, 2, &res);
        if (err == 0 && res.status != OLTP_ST_OK)
            err = -EIO;
    }
    ledger_db_close(db);
    return err;
}

/* ------------------------------------------------------------------ failover
 * load */

struct xfer {
    uint64_t from;
    uint64_t to;
    int64_t amount;
    uint16_t status;
};

struct load {
    uint16_t port;
    unsigned per_client;
    /* Atomic: acknowledged so far, all clients (the killer watches it). */
    unsigned acked;
    struct worker {
        struct load *ld;
        unsigned idx;
        unsigned sent;
        unsigned errors; /* a transport error or a status the client must not see */
        uint16_t bad_status;
        struct xfer x[MAX_PER];
    } w[CLIENTS];
};

static void *client_main(void *arg)
{
    struct worker *w = arg;
    unsigned seed = 7919 * (w->idx + 1);
    int fd = cr_test_connect(w->ld->port);

    if (fd < 0) {
        w->errors++;
        return NULL;
    }
    for (unsigned s = 0; s < w->ld->per_client; s++) {
        struct xfer *x = &w->x[s];
        struct oltp_req q;
        struct oltp_reply rp;

        memset(&q, 0, sizeof(q));
        x->from = 1 + rand_r(&seed) % ACCOUNTS;
        x->to = 1 + (x->from + rand_r(&seed) % (ACCOUNTS - 1)) % ACCOUNTS;
        x->amount = 1 + rand_r(&seed) % 500;
        q.op = OLTP_OP_TRANSFER;
        q.id = s + 1;
        q.account = x->from;
        q.to = x->to;
        q.amount = x->amount;
        key_of(w->idx, s, q.key);
        w->sent = s + 1;
        if (send_req(fd, &q) < 0 || recv_reply(fd, &rp, hc_tmo(60000)) < 0 || rp.id != q.id) {
            w->errors++;
            x->status = 0xffff;
            break;
        }
        x->status = rp.status;
        if (rp.status == OLTP_ST_OK) {
            __atomic_add_fetch(&w->ld->acked, 1, __ATOMIC_RELAXED);
        } else if (rp.status != OLTP_ST_INSUFFICIENT) {
            w->errors++;
            w->bad_status = rp.status;
        }
    }
    close(fd);
    return NULL;
}

struct check {
    struct load *ld;
    unsigned seen[CLIENTS][MAX_PER];
    unsigned strangers;
    unsigned mismatched;
};

static int each_row(void *arg, const struct ledger_op *row, int64_t balance_after)
{
    struct check *ck = arg;
    unsigned c;
    unsigned s;

    CR_UNUSED(balance_after);
    if (!parse_key(row->key, &c, &s) || c >= CLIENTS || s >= ck->ld->w[c].sent) {
        ck->strangers++;
        return 0;
    }
    ck->seen[c][s]++;
    if (row->op != OLTP_OP_TRANSFER || row->account != ck->ld->w[c].x[s].from ||
        row->to != ck->ld->w[c].x[s].to || row->amount != ck->ld->w[c].x[s].amount)
        ck->mismatched++;
    return 0;
}

static void check_db(const char *url, struct load *ld)
{
    static struct check ck;
    struct ledger_db_config dc = {.url = url};
    struct ledger_db *db;
    int64_t sum = 0;
    uint64_t accounts = 0;
    uint64_t negative = 0;
    unsigned acked = 0;
    unsigned missing = 0;
    unsigned twice = 0;
    unsigned applied_refused = 0;

    memset(&ck, 0, sizeof(ck));
    ck.ld = ld;
    CHECK(ledger_db_open(&db, &dc) == 0, "open %s", url);
    CHECK(ledger_db_each_keyed(db, each_row, &ck) == 0, "walk");
    CHECK(ledger_db_totals(db, &sum, &accounts, &negative) == 0, "totals");
    ledger_db_close(db);
    for (unsigned c = 0; c < CLIENTS; c++) {
        for (unsigned s = 0; s < ld->w[c].sent; s++) {
            uint16_t st = ld->w[c].x[s].status;

            if (ck.seen[c][s] > 1)
                twice++;
            if (st == OLTP_ST_OK) {
                acked++;
                if (ck.seen[c][s] == 0)
                    missing++;
            } else if (st == OLTP_ST_INSUFFICIENT && ck.seen[c][s] != 0) {
                applied_refused++;
            }
        }
    }
    printf("failover: %u transfers acknowledged, %u rows checked\n", acked, acked - missing);
    CHECK(acked > 0, "nothing acknowledged");
    CHECK(missing == 0, "%u acknowledged transfers missing", missing);
    CHECK(twice == 0, "%u transfers applied twice", twice);
    CHECK(applied_refused == 0, "%u refused transfers applied", applied_refused);
    CHECK(ck.strangers == 0, "%u rows never sent", ck.strangers);
    CHECK(ck.mismatched == 0, "%u rows differ from what was sent", ck.mismatched);
    CHECK(accounts == ACCOUNTS, "%llu accounts", (unsigned long long)accounts);
    CHECK(sum == (int64_t)ACCOUNTS * START_BALANCE, "sum %lld", (long long)sum);
    CHECK(negative == 0, "%llu negative balances", (unsigned long long)negative);
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
    static struct load ld;
    char log[512];
    struct hc_server la = {0};
    struct hc_server lb = {0};
    struct hc_server gw = {0};
    pthread_t th[CLIENTS];
    uint16_t ports[2];
    uint64_t end;
    unsigned kill_at;
    int status = 0;

    snprintf(log, sizeof(log), "%s/gateway-failover.log", dir);
    memset(&ld, 0, sizeof(ld));
    ld.per_client = hc_is_sanitized() ? MAX_PER / 3 : MAX_PER;
    kill_at = CLIENTS * ld.per_client / 3;
    if (make_db(url) < 0 || start_ledger(&la, url) < 0 || start_ledger(&lb, url) < 0) {
        CHECK(false, "set-up");
        goto out;
    }
    ports[0] = la.port;
    ports[1] = lb.port;
    if (start_gateway(&gw, ports, 2, "4", "2", log) < 0) {
        CHECK(false, "gateway start");
        goto out;
    }
    ld.port = gw.port;
    for (unsigned i = 0; i < CLIENTS; i++) {
        ld.w[i].ld = &ld;
        ld.w[i].idx = i;
        if (pthread_create(&th[i], NULL, client_main, &ld.w[i]) != 0)
            abort();
    }
    /* Mid-load: a third of the transfers acknowledged. */
    end = cr_test_now_ms() + (uint64_t)hc_tmo(60000);
    while (__atomic_load_n(&ld.acked, __ATOMIC_RELAXED) < kill_at && cr_test_now_ms() < end)
        usleep(1000);
    CHECK(__atomic_load_n(&ld.acked, __ATOMIC_RELAXED) >= kill_at, "load too slow");
    kill(la.pid, SIGKILL);
    CHECK(cr_test_wait_exit(la.pid, hc_tmo(10000), &status) == 0, "ledger a gone");
    la.pid = 0;
    for (unsigned i = 0; i < CLIENTS; i++)
        pthread_join(th[i], NULL);
    for (unsigned i = 0; i < CLIENTS; i++) {
        CHECK(ld.w[i].errors == 0, "client %u: %u errors (last status %u: %s)", i, ld.w[i].errors,
              ld.w[i].bad_status, oltp_status_name(ld.w[i].bad_status));
        CHECK(ld.w[i].sent == ld.per_client, "client %u sent %u", i, ld.w[i].sent);
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
        key_of(99, (unsigned)nfd, q.key);
        fd[nfd] = cr_test_connect(gw.port);
        if (fd[nfd] < 0)
            break;
        CHECK(send_req(fd[nfd], &q) == 0, "send %d", nfd);
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

        CHECK(send_req(pfd, &ping) == 0, "ping");
        CHECK(recv_reply(pfd, &rp, hc_tmo(10000)) == 0 && rp.id == 77 && rp.status == OLTP_ST_OK,
              "PING answered while every thread waits");
    }
    for (int i = 0; i < nfd; i++) {
        struct pollfd p = {.fd = fd[i], .events = POLLIN};

        CHECK(poll(&p, 1, 0) == 0, "client %d answered before the lock went", i);
    }
    CHECK(pq_ok(locker, "COMMIT"), "unlock");
    for (int i = 0; i < nfd; i++) {
        CHECK(recv_reply(fd[i], &rp, hc_tmo(30000)) == 0 && rp.id == 500 + (uint64_t)i &&
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

int main(void)
{
    struct cr_test_pg pg;
    int err;

    signal(SIGPIPE, SIG_IGN);
    test_cli();
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
