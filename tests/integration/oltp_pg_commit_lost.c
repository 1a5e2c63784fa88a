/*
 * oltp_pg_commit_lost.c (integration) - cabrank-ledger over PostgreSQL when
 * the database connection is lost at COMMIT. The ledger reaches the test's
 * PostgreSQL (tests/support/pg.h) through a TCP proxy in this program that,
 * once armed, forwards the ledger's COMMIT to the server and then closes
 * both sides before the server's answer comes back: the server commits, the
 * ledger cannot know. An unkeyed DEPOSIT sent then must be answered
 * IN_DOUBT (not INTERNAL, "not applied": a client would deposit again),
 * directly and through cabrank-gateway; the deposit is read in the database
 * either way, and the ledger goes on serving on a new connection. Exit 0
 * pass, 1 fail, 77 skip (PostgreSQL not installed).
 */
#include "../support/oltp_client.h"
#include "../support/pg.h"
#include "httpd_client.h"

#include "../../apps/oltp/ledger_db.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#define ACCOUNTS      4
#define START_BALANCE 1000

/* The simple-query message the ledger's pg_commit sends: 'Q', length 11,
 * "COMMIT" and its NUL. */
static const char commit_msg[] = {'Q', 0, 0, 0, 11, 'C', 'O', 'M', 'M', 'I', 'T', 0};

struct proxy {
    int lfd;
    uint16_t port;
    uint16_t pg_port;
    atomic_bool armed;
    atomic_int dropped;
    pthread_t th;
};

struct relay {
    struct proxy *p;
    int cfd; /* the ledger's side */
    int sfd; /* the server's side */
};

static bool has_commit(const char *buf, size_t n)
{
    return memmem(buf, n, commit_msg, sizeof(commit_msg)) != NULL;
}

/* Copies both ways until either side closes; drops both right after a
 * COMMIT has gone to the server while armed (once). */
static void *relay_main(void *arg)
{
    struct relay *r = arg;
    char buf[65536];

    for (;;) {
        struct pollfd pf[2] = {{.fd = r->cfd, .events = POLLIN}, {.fd = r->sfd, .events = POLLIN}};
        ssize_t n;

        if (poll(pf, 2, -1) < 0)
            break;
        if (pf[0].revents != 0) {
            n = read(r->cfd, buf, sizeof(buf));
            if (n <= 0 || cr_test_write_all(r->sfd, buf, (size_t)n) < 0)
                break;
            if (has_commit(buf, (size_t)n) && atomic_exchange(&r->p->armed, false)) {
                atomic_fetch_add(&r->p->dropped, 1);
                break;
            }
        }
        if (pf[1].revents != 0) {
            n = read(r->sfd, buf, sizeof(buf));
            if (n <= 0 || cr_test_write_all(r->cfd, buf, (size_t)n) < 0)
                break;
        }
    }
    close(r->cfd);
    close(r->sfd);
    free(r);
    return NULL;
}

static void *accept_main(void *arg)
{
    struct proxy *p = arg;

    for (;;) {
        int cfd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
        struct relay *r;
        pthread_t th;

        if (cfd < 0)
            return NULL; /* the listener was shut down */
        r = malloc(sizeof(*r));
        if (r == NULL) {
            close(cfd);
            continue;
        }
        r->p = p;
        r->cfd = cfd;
        r->sfd = cr_test_connect(p->pg_port);
        if (r->sfd < 0 || pthread_create(&th, NULL, relay_main, r) != 0) {
            if (r->sfd >= 0)
                close(r->sfd);
            close(cfd);
            free(r);
            continue;
        }
        pthread_detach(th);
    }
}

static int proxy_start(struct proxy *p, uint16_t pg_port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);

    p->pg_port = pg_port;
    atomic_init(&p->armed, false);
    atomic_init(&p->dropped, 0);
    p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        listen(p->lfd, 64) < 0 || getsockname(p->lfd, (struct sockaddr *)&a, &len) < 0)
        return -errno;
    p->port = ntohs(a.sin_port);
    return -pthread_create(&p->th, NULL, accept_main, p);
}

static void proxy_stop(struct proxy *p)
{
    shutdown(p->lfd, SHUT_RDWR);
    pthread_join(p->th, NULL);
    close(p->lfd);
}

/* One request on a new connection to port: 0 with *rp, or -errno. */
static int call(uint16_t port, const struct oltp_req *r, struct oltp_reply *rp)
{
    int fd = cr_test_connect(port);
    int err = fd >= 0 ? cr_test_oltp_call(fd, r, rp, hc_tmo(20000)) : fd;

    if (fd >= 0)
        close(fd);
    return err;
}

static int64_t db_balance(const char *url, uint64_t account)
{
    struct ledger_db_config dc = {.url = url};
    struct ledger_db *db;
    int64_t b = -1;

    if (ledger_db_open(&db, &dc) < 0)
        return -1;
    if (ledger_db_balance(db, account, &b) < 0)
        b = -1;
    ledger_db_close(db);
    return b;
}

/* An unkeyed DEPOSIT of amount into account through port while the proxy
 * drops the COMMIT: IN_DOUBT, and the database holds it or not. Returns
 * the amount found applied (0 or amount). */
static int64_t deposit_lost(const char *what, struct proxy *p, const char *url, uint16_t port,
                            uint64_t account, int64_t amount)
{
    struct oltp_req r = {.op = OLTP_OP_DEPOSIT, .id = 7, .account = account, .amount = amount};
    struct oltp_reply rp;
    int64_t before = db_balance(url, account);
    int64_t after;
    int err;

    atomic_store(&p->armed, true);
    err = call(port, &r, &rp);
    atomic_store(&p->armed, false);
    CHECK(atomic_load(&p->dropped) > 0, "%s: the proxy saw no COMMIT", what);
    atomic_store(&p->dropped, 0);
    CHECK(err == 0, "%s: no answer: %s", what, strerror(-err));
    CHECK(err < 0 || rp.status == OLTP_ST_IN_DOUBT,
          "%s: a COMMIT lost with its connection answered %u (%s), not IN_DOUBT", what, rp.status,
          oltp_status_name(rp.status));
    after = db_balance(url, account);
    CHECK(after == before || after == before + amount, "%s: balance %lld before, %lld after", what,
          (long long)before, (long long)after);
    fprintf(stderr, "%s: answered %s; the deposit is %s in the database\n", what,
            err == 0 ? oltp_status_name(rp.status) : "nothing",
            after == before + amount ? "applied" : "not applied");
    return after - before;
}

int main(void)
{
    struct oltp_req bal = {.op = OLTP_OP_BALANCE, .id = 9, .account = 2};
    struct oltp_reply rp;
    struct hc_server ledger = {0};
    struct hc_server gw = {0};
    struct cr_test_pg pg;
    struct proxy p;
    char url[256];
    char backend[64];
    int64_t applied;
    int err;

    signal(SIGPIPE, SIG_IGN);
    err = cr_test_pg_start(&pg);
    if (err == -ENOENT) {
        fprintf(stderr, "oltp_pg_commit_lost: PostgreSQL not installed; skipped\n");
        return 77;
    }
    if (err < 0) {
        fprintf(stderr, "oltp_pg_commit_lost: starting PostgreSQL: %s\n", strerror(-err));
        return 1;
    }
    CHECK(cr_test_oltp_make_db(pg.url, ACCOUNTS, START_BALANCE) == 0, "creating the database");
    CHECK(proxy_start(&p, (uint16_t)pg.port) == 0, "starting the proxy");
    snprintf(url, sizeof(url), "postgresql://cabrank@127.0.0.1:%u/postgres", (unsigned)p.port);
    {
        char *args[] = {"--listen", "127.0.0.1:0", "--db", url, "--threads",
                        "2",        "--log-level", "warn", NULL};

        err = cr_test_oltp_spawn("cabrank-ledger", args, &ledger.pid, &ledger.port, hc_tmo(20000));
    }
    CHECK(err == 0, "starting the ledger");
    if (err == 0) {
        snprintf(backend, sizeof(backend), "127.0.0.1:%u", (unsigned)ledger.port);
        char *args[] = {"--listen",  "127.0.0.1:0", "--backend",   backend, "--groups", "1",
                        "--threads", "2",           "--log-level", "warn",  NULL};

        err = cr_test_oltp_spawn("cabrank-gateway", args, &gw.pid, &gw.port, hc_tmo(20000));
        CHECK(err == 0, "starting the gateway");
    }
    if (err == 0) {
        applied = deposit_lost("ledger", &p, pg.url, ledger.port, 2, 7);
        /* The ledger serves again, on a new database connection. */
        CHECK(call(ledger.port, &bal, &rp) == 0 && rp.status == OLTP_ST_OK &&
                  rp.balance == START_BALANCE + applied,
              "the ledger after the lost COMMIT: balance status %u, %lld", rp.status,
              (long long)rp.balance);
        deposit_lost("gateway", &p, pg.url, gw.port, 3, 11);
    }
    if (gw.pid > 0)
        CHECK(hc_stop(&gw) == 0, "graceful stop of the gateway");
    if (ledger.pid > 0)
        CHECK(hc_stop(&ledger) == 0, "graceful stop of the ledger");
    proxy_stop(&p);
    cr_test_pg_stop(&pg);
    if (hc_failures != 0) {
        fprintf(stderr, "oltp_pg_commit_lost: %d checks failed\n", hc_failures);
        return 1;
    }
    fprintf(stderr, "oltp_pg_commit_lost: all checks passed\n");
    return 0;
}
