/*
 * oltp_ledger.c (integration) - cabrank-ledger end to end, over SQLite in a
 * temporary directory. Under the lf, hshr and proactor models (the proactor
 * falls back to its emulated engine without io_uring), client threads do a
 * bounded number of keyed transfers between random accounts, then the test
 * reads the database through ledger_db.h: every acknowledged transfer is
 * there exactly once with the arguments it was sent with, nothing is there
 * that was never sent, the sum of the balances is unchanged and none is
 * negative. Then the crash: the ledger is killed with SIGKILL mid-load and
 * restarted on the same port and database; the clients reconnect and resend
 * every transfer they hold no answer for (with its key, so a transfer
 * applied before the crash is not applied again), and the same checks
 * pass. The same load under prefork and forking (a database per worker
 * process), tpc and reactor, and over PostgreSQL under prefork where PostgreSQL is
 * installed. Also: --help, a bad flag (exit 2) and a graceful TERM (exit 0).
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include "../../apps/oltp/ledger_db.h"
#include "../../apps/oltp/proto.h"
#include "../support/pg.h"
#include "httpd_client.h"

#include <pthread.h>
#include <stdatomic.h>

#define ACCOUNTS      16
#define START_BALANCE 1000
#define MAX_CLIENTS   8
#define MAX_PER       400

/* One transfer a client sends (and resends until it has an answer). */
struct xfer {
    uint64_t from;
    uint64_t to;
    int64_t amount;
    uint16_t status; /* the answer's; 0xffff: none yet */
};

struct load {
    uint16_t port;
    unsigned clients;
    unsigned per_client;
    bool reconnect; /* resend after a lost connection (the crash test) */
    uint64_t deadline_ms;
    atomic_uint acked;
    atomic_uint lost_connections;
    struct xfer x[MAX_CLIENTS][MAX_PER];
    unsigned sent[MAX_CLIENTS]; /* transfers a client has sent at least once */
    unsigned failed[MAX_CLIENTS];
};

struct worker {
    struct load *ld;
    unsigned id;
};

static void key_of(unsigned client, unsigned seq, uint8_t key[OLTP_KEY_SIZE])
{
    char buf[OLTP_KEY_SIZE + 1];

    snprintf(buf, sizeof(buf), "c%02u-s%010u", client, seq);
    memcpy(key, buf, OLTP_KEY_SIZE);
}

static bool parse_key(const uint8_t key[OLTP_KEY_SIZE], unsigned *client, unsigned *seq)
{
    char buf[OLTP_KEY_SIZE + 1];

    memcpy(buf, key, OLTP_KEY_SIZE);
    buf[OLTP_KEY_SIZE] = '\0';
    return sscanf(buf, "c%02u-s%010u", client, seq) == 2 && *client < MAX_CLIENTS && *seq < MAX_PER;
}

static int send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Sends r and reads its reply on fd. 0 or -errno (the connection is gone
 * or stuck). */
static int roundtrip(int fd, const struct oltp_req *r, struct oltp_reply *rp, int tmo)
{
    unsigned char buf[OLTP_MAX_FRAME];
    size_t n = oltp_req_encode(r, buf, sizeof(buf));
    size_t body;
    int err;

    if (n == 0)
        return -EINVAL;
    err = send_all(fd, buf, n);
    if (err < 0)
        return err;
    err = cr_test_read_exact(fd, buf, OLTP_HEADER_SIZE, tmo);
    if (err < 0)
        return err;
    body = (size_t)buf[4] << 24 | (size_t)buf[5] << 16 | (size_t)buf[6] << 8 | buf[7];
    if (body > OLTP_MAX_BODY)
        return -EBADMSG;
    err = cr_test_read_exact(fd, buf + OLTP_HEADER_SIZE, body, tmo);
    if (err < 0)
        return err;
    if (oltp_reply_decode(buf, OLTP_HEADER_SIZE + body, rp) <= 0 || rp->id != r->id)
        return -EBADMSG;
    return 0;
}

static int connect_retry(struct load *ld)
{
    for (;;) {
        int fd = cr_test_connect(ld->port);

        if (fd >= 0 || !ld->reconnect || cr_test_now_ms() >= ld->deadline_ms)
            return fd;
        usleep(20000);
    }
}

static void *client_main(void *arg)
{
    struct worker *w = arg;
    struct load *ld = w->ld;
    unsigned seed = 12345u + w->id * 7919u;
    int fd = connect_retry(ld);

    for (unsigned i = 0; i < ld->per_client; i++) {
        struct xfer *x = &ld->x[w->id][i];
        struct oltp_req r = {.op = OLTP_OP_TRANSFER, .id = i + 1};
        struct oltp_reply rp;

        x->from = 1 + rand_r(&seed) % ACCOUNTS;
        x->to = 1 + (x->from + rand_r(&seed) % (ACCOUNTS - 1)) % ACCOUNTS;
        x->amount = 1 + rand_r(&seed) % 300;
        x->status = 0xffff;
        r.account = x->from;
        r.to = x->to;
        r.amount = x->amount;
        key_of(w->id, i, r.key);
        ld->sent[w->id] = i + 1;
        for (;;) {
            int err = fd >= 0 ? roundtrip(fd, &r, &rp, hc_tmo(10000)) : fd;

            if (err == 0) {
                x->status = rp.status;
                if (rp.status == OLTP_ST_OK)
                    atomic_fetch_add(&ld->acked, 1);
                break;
            }
            if (fd >= 0)
                close(fd);
            fd = -1;
            atomic_fetch_add(&ld->lost_connections, 1);
            if (!ld->reconnect || cr_test_now_ms() >= ld->deadline_ms) {
                ld->failed[w->id]++;
                return NULL;
            }
            /* The answer is lost, not the transfer: resend it with its key. */
            fd = connect_retry(ld);
        }
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

static int run_clients(struct load *ld, pthread_t *th, struct worker *w)
{
    for (unsigned i = 0; i < ld->clients; i++) {
        w[i] = (struct worker){.ld = ld, .id = i};
        if (pthread_create(&th[i], NULL, client_main, &w[i]) != 0)
            return -1;
    }
    return 0;
}

static void join_clients(struct load *ld, pthread_t *th)
{
    for (unsigned i = 0; i < ld->clients; i++)
        pthread_join(th[i], NULL);
}

/* ------------------------------------------------------------------ the database */

static int make_db(const char *path)
{
    struct ledger_db_config dc = {.url = path};
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

struct check {
    struct load *ld;
    unsigned seen[MAX_CLIENTS][MAX_PER];
    unsigned strangers; /* rows no client sent */
    unsigned mismatched;
};

static int each_row(void *arg, const struct ledger_op *row, int64_t balance_after)
{
    struct check *ck = arg;
    unsigned c;
    unsigned s;

    CR_UNUSED(balance_after);
    if (!parse_key(row->key, &c, &s) || c >= ck->ld->clients || s >= ck->ld->sent[c]) {
        ck->strangers++;
        return 0;
    }
    ck->seen[c][s]++;
    if (row->op != OLTP_OP_TRANSFER || row->account != ck->ld->x[c][s].from ||
        row->to != ck->ld->x[c][s].to || row->amount != ck->ld->x[c][s].amount)
        ck->mismatched++;
    return 0;
}

/* The checker: what the clients were told against what the database holds. */
static void check_db(const char *what, const char *path, struct load *ld)
{
    struct ledger_db_config dc = {.url = path};
    struct ledger_db *db;
    struct check *ck = calloc(1, sizeof(*ck));
    int64_t sum = -1;
    uint64_t accounts = 0;
    uint64_t negative = 1;
    unsigned acked = 0;
    unsigned lost = 0;
    unsigned twice = 0;
    unsigned refused_applied = 0;

    CHECK(ck != NULL, "%s: memory", what);
    if (ck == NULL)
        return;
    ck->ld = ld;
    CHECK(ledger_db_open(&db, &dc) == 0, "%s: reopening the database", what);
    CHECK(ledger_db_each_keyed(db, each_row, ck) == 0, "%s: reading the txns", what);
    CHECK(ledger_db_totals(db, &sum, &accounts, &negative) == 0, "%s: totals", what);
    ledger_db_close(db);
    for (unsigned c = 0; c < ld->clients; c++) {
        for (unsigned s = 0; s < ld->sent[c]; s++) {
            uint16_t st = ld->x[c][s].status;

            if (st == OLTP_ST_OK) {
                acked++;
                lost += ck->seen[c][s] == 0;
            } else if (st != 0xffff && ck->seen[c][s] != 0) {
                refused_applied++; /* refused, yet in the database */
            }
            twice += ck->seen[c][s] > 1;
        }
    }
    CHECK(lost == 0, "%s: %u acknowledged transfers lost", what, lost);
    CHECK(twice == 0, "%s: %u transfers applied more than once", what, twice);
    CHECK(refused_applied == 0, "%s: %u refused transfers applied", what, refused_applied);
    CHECK(ck->strangers == 0, "%s: %u rows no client sent", what, ck->strangers);
    CHECK(ck->mismatched == 0, "%s: %u rows with other arguments", what, ck->mismatched);
    CHECK(accounts == ACCOUNTS, "%s: %llu accounts", what, (unsigned long long)accounts);
    CHECK(sum == (int64_t)ACCOUNTS * START_BALANCE, "%s: sum %lld", what, (long long)sum);
    CHECK(negative == 0, "%s: %llu negative balances", what, (unsigned long long)negative);
    CHECK(acked > 0, "%s: nothing acknowledged", what);
    fprintf(stderr, "%s: %u transfers acknowledged, all present once; sum %lld\n", what, acked,
            (long long)sum);
    free(ck);
}

/* ------------------------------------------------------------------ the server */

static char dir[256];

static int start_ledger(struct hc_server *s, const char *listen, const char *db, const char *model)
{
    char path[4096];
    bool procs = strcmp(model, "prefork") == 0 || strcmp(model, "forking") == 0;
    /* prefork: 2 processes of 4 threads; forking: a process per connection. */
    char *argv[] = {path,          "--listen",  (char *)listen,
                    "--db",        (char *)db,  "--model",
                    (char *)model, "--threads", procs ? "4" : "8",
                    "--log-level", "warn",      procs ? "--workers" : NULL,
                    "2",           NULL};
    int err;

    cr_test_build_path("cabrank-ledger", path, sizeof(path));
    err = cr_test_spawn_server(argv, &s->pid, &s->port, hc_tmo(20000));
    if (err < 0)
        fprintf(stderr, "starting %s: %s\n", path, strerror(-err));
    return err;
}

static void db_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s.db", dir, name);
}

/* The load under model, on the database at url (NULL: a new SQLite file). */
static void test_model(const char *model, const char *url, unsigned clients, unsigned per)
{
    static struct load ld;
    pthread_t th[MAX_CLIENTS];
    struct worker w[MAX_CLIENTS];
    struct hc_server s = {0};
    char db[512];
    char what[64];
    uint64_t t0;

    memset(&ld, 0, sizeof(ld));
    if (url != NULL)
        snprintf(db, sizeof(db), "%s", url);
    else
        db_path(db, sizeof(db), model);
    snprintf(what, sizeof(what), "%s%s", model, url != NULL ? " over postgresql" : "");
    CHECK(make_db(db) == 0, "%s: creating the database", what);
    if (start_ledger(&s, "127.0.0.1:0", db, model) < 0) {
        hc_failures++;
        return;
    }
    ld.port = s.port;
    ld.clients = clients;
    ld.per_client = per;
    t0 = cr_test_now_ms();
    CHECK(run_clients(&ld, th, w) == 0, "%s: starting clients", what);
    join_clients(&ld, th);
    fprintf(stderr, "%s: %u clients x %u transfers in %llu ms\n", what, clients, per,
            (unsigned long long)(cr_test_now_ms() - t0));
    CHECK(atomic_load(&ld.lost_connections) == 0, "%s: %u connections lost", what,
          atomic_load(&ld.lost_connections));
    CHECK(hc_stop(&s) == 0, "%s: graceful stop", what);
    check_db(what, db, &ld);
}

/* SIGKILL mid-load, a restart on the same port and database, resends. */
static void test_kill_restart(unsigned clients, unsigned per)
{
    static struct load ld;
    pthread_t th[MAX_CLIENTS];
    struct worker w[MAX_CLIENTS];
    struct hc_server s = {0};
    char db[512];
    char listen[64];
    uint64_t until;
    int status;
    int err = -1;

    memset(&ld, 0, sizeof(ld));
    db_path(db, sizeof(db), "crash");
    CHECK(make_db(db) == 0, "crash: creating the database");
    if (start_ledger(&s, "127.0.0.1:0", db, "lf") < 0) {
        hc_failures++;
        return;
    }
    ld.port = s.port;
    ld.clients = clients;
    ld.per_client = per;
    ld.reconnect = true;
    ld.deadline_ms = cr_test_now_ms() + (uint64_t)hc_tmo(40000);
    CHECK(run_clients(&ld, th, w) == 0, "crash: starting clients");
    /* Mid-load: about a second, or a quarter of the transfers answered
     * (a slow sanitizer build), whichever comes first. */
    until = cr_test_now_ms() + 1000;
    while ((cr_test_now_ms() < until && atomic_load(&ld.acked) < clients * per / 4) ||
           atomic_load(&ld.acked) < clients)
        usleep(5000);
    kill(s.pid, SIGKILL);
    waitpid(s.pid, &status, 0);
    fprintf(stderr, "crash: killed after %u acknowledged transfers\n", atomic_load(&ld.acked));
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "crash: not killed");
    /* The port may still be held for a moment (connections closing). */
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", (unsigned)ld.port);
    until = cr_test_now_ms() + (uint64_t)hc_tmo(10000);
    while (cr_test_now_ms() < until) {
        err = start_ledger(&s, listen, db, "lf");
        if (err == 0)
            break;
        usleep(100000);
    }
    CHECK(err == 0, "crash: restarting on %s", listen);
    if (err == 0)
        CHECK(s.port == ld.port, "crash: restarted on port %u", s.port);
    join_clients(&ld, th);
    CHECK(atomic_load(&ld.lost_connections) > 0, "crash: no client saw the crash");
    for (unsigned c = 0; c < clients; c++)
        CHECK(ld.failed[c] == 0 && ld.sent[c] == per, "crash: client %u gave up at %u", c,
              ld.sent[c]);
    if (err == 0)
        CHECK(hc_stop(&s) == 0, "crash: graceful stop after the restart");
    check_db("crash", db, &ld);
}

/* Reads fd to its end into out (NUL-terminated). */
static void read_all(int fd, char *out, size_t cap)
{
    size_t used = 0;
    ssize_t n;

    while (used < cap - 1 && (n = read(fd, out + used, cap - 1 - used)) > 0)
        used += (size_t)n;
    out[used] = '\0';
    close(fd);
}

static void test_cli(void)
{
    char path[4096];
    char out[4096];
    int status;
    pid_t pid;
    int pfd[2];

    cr_test_build_path("cabrank-ledger", path, sizeof(path));
    CHECK(pipe(pfd) == 0, "pipe");
    pid = fork();
    if (pid == 0) {
        dup2(pfd[1], STDERR_FILENO);
        execl(path, path, "--no-such-flag", (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    read_all(pfd[0], out, sizeof(out));
    CHECK(cr_test_wait_exit(pid, hc_tmo(10000), &status) == 0 && WIFEXITED(status) &&
              WEXITSTATUS(status) == 2,
          "a bad flag: exit 2");
    CHECK(strstr(out, "--no-such-flag") != NULL && strchr(out, '\n') == out + strlen(out) - 1,
          "a bad flag: one line naming it, got '%s'", out);

    CHECK(pipe(pfd) == 0, "pipe");
    pid = fork();
    if (pid == 0) {
        dup2(pfd[1], STDOUT_FILENO);
        execl(path, path, "--help", (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    read_all(pfd[0], out, sizeof(out));
    CHECK(cr_test_wait_exit(pid, hc_tmo(10000), &status) == 0 && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0,
          "--help: exit 0");
    CHECK(strstr(out, "usage: cabrank-ledger") != NULL, "--help: usage");
}

int main(void)
{
    bool san = hc_is_sanitized();
    unsigned per = san ? 20 : 60;
    struct cr_test_pg pg;
    int err;

    signal(SIGPIPE, SIG_IGN);
    if (hc_mkdtemp(dir, sizeof(dir)) < 0) {
        perror("mkdtemp");
        return 1;
    }
    test_cli();
    test_model("lf", NULL, 8, per);
    test_model("hshr", NULL, 8, per);
    test_model("proactor", NULL, 8, per);
    test_model("prefork", NULL, 8, per);
    test_model("forking", NULL, 4, per / 2);
    /* One thread for every connection, and one thread for all of them
     * (each write then waits for the previous one's fsync). */
    test_model("tpc", NULL, 4, per / 2);
    test_model("reactor", NULL, 4, per / 2);
    /* PostgreSQL, where it is installed (make test installs it), under
     * prefork: each worker process has connections of its own. */
    err = cr_test_pg_start(&pg);
    if (err == 0) {
        test_model("prefork", pg.url, 8, per);
        cr_test_pg_stop(&pg);
    } else if (err == -ENOENT) {
        fprintf(stderr, "oltp_ledger: PostgreSQL not installed; its run skipped\n");
    } else {
        CHECK(err == 0, "starting PostgreSQL: %s", strerror(-err));
    }
    test_kill_restart(8, san ? 60 : 300);
    hc_rmtree(dir);
    if (hc_failures != 0) {
        fprintf(stderr, "oltp_ledger: %d checks failed\n", hc_failures);
        return 1;
    }
    fprintf(stderr, "oltp_ledger: all checks passed\n");
    return 0;
}
