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
#include "../support/oltp_client.h"
#include "../support/pg.h"
#include "httpd_client.h"

#define ACCOUNTS      16
#define START_BALANCE 1000

/* The load: with reconnect, a client resends every transfer it holds no
 * answer for (for 40 s, scaled); without, a lost connection ends it. */
static int start_load(struct cr_test_oltp_load *ld, uint16_t port, unsigned clients, unsigned per,
                      bool reconnect)
{
    struct cr_test_oltp_load_config cfg = {
        .port = port,
        .clients = clients,
        .per_client = per,
        .accounts = ACCOUNTS,
        .max_amount = 300,
        .seed = 12345u,
        .reply_tmo_ms = hc_tmo(10000),
        .reconnect = reconnect,
        .deadline_ms = cr_test_now_ms() + (uint64_t)hc_tmo(40000),
    };

    return cr_test_oltp_load_start(ld, &cfg);
}

/* The checker: what the clients were told against what the database holds. */
static void check_db(const char *what, const char *path, struct cr_test_oltp_load *ld)
{
    static struct cr_test_oltp_verdict v;

    CHECK(cr_test_oltp_check(ld, path, ACCOUNTS, START_BALANCE, &v) == 0 && v.ok,
          "%s: the database against the answers:\n%s", what, v.report);
    fprintf(stderr, "%s: %u transfers acknowledged, all present once; sum %lld\n", what, v.acked,
            (long long)v.sum);
}

/* ------------------------------------------------------------------ the server */

static char dir[256];

static int start_ledger(struct hc_server *s, const char *listen, const char *db, const char *model)
{
    bool procs = strcmp(model, "prefork") == 0 || strcmp(model, "forking") == 0;
    /* prefork: 2 processes of 4 threads; forking: a process per connection. */
    char *threads = procs ? "4" : "8";
    char *workers = procs ? "--workers" : NULL;
    char *args[] = {
        "--listen", (char *)listen, "--db", (char *)db, "--model", (char *)model, "--threads",
        threads,    "--log-level",  "warn", workers,    "2",       NULL};

    return cr_test_oltp_spawn("cabrank-ledger", args, &s->pid, &s->port, hc_tmo(20000));
}

static void db_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s.db", dir, name);
}

/* The load under model, on the database at url (NULL: a new SQLite file). */
static void test_model(const char *model, const char *url, unsigned clients, unsigned per)
{
    static struct cr_test_oltp_load ld;
    struct hc_server s = {0};
    char db[512];
    char what[64];
    uint64_t t0;

    if (url != NULL)
        snprintf(db, sizeof(db), "%s", url);
    else
        db_path(db, sizeof(db), model);
    snprintf(what, sizeof(what), "%s%s", model, url != NULL ? " over postgresql" : "");
    CHECK(cr_test_oltp_make_db(db, ACCOUNTS, START_BALANCE) == 0, "%s: creating the database",
          what);
    if (start_ledger(&s, "127.0.0.1:0", db, model) < 0) {
        hc_failures++;
        return;
    }
    t0 = cr_test_now_ms();
    CHECK(start_load(&ld, s.port, clients, per, false) == 0, "%s: starting clients", what);
    cr_test_oltp_load_join(&ld);
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
    static struct cr_test_oltp_load ld;
    struct hc_server s = {0};
    char db[512];
    char listen[64];
    uint64_t until;
    int status;
    int err = -1;

    db_path(db, sizeof(db), "crash");
    CHECK(cr_test_oltp_make_db(db, ACCOUNTS, START_BALANCE) == 0, "crash: creating the database");
    if (start_ledger(&s, "127.0.0.1:0", db, "lf") < 0) {
        hc_failures++;
        return;
    }
    CHECK(start_load(&ld, s.port, clients, per, true) == 0, "crash: starting clients");
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
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", (unsigned)ld.cfg.port);
    until = cr_test_now_ms() + (uint64_t)hc_tmo(10000);
    while (cr_test_now_ms() < until) {
        err = start_ledger(&s, listen, db, "lf");
        if (err == 0)
            break;
        usleep(100000);
    }
    CHECK(err == 0, "crash: restarting on %s", listen);
    if (err == 0)
        CHECK(s.port == ld.cfg.port, "crash: restarted on port %u", s.port);
    cr_test_oltp_load_join(&ld);
    CHECK(atomic_load(&ld.lost_connections) > 0, "crash: no client saw the crash");
    for (unsigned c = 0; c < clients; c++)
        CHECK(ld.c[c].failed == 0 && ld.c[c].sent == per, "crash: client %u gave up at %u", c,
              ld.c[c].sent);
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
    (void)cr_test_rmtree(dir);
    if (hc_failures != 0) {
        fprintf(stderr, "oltp_ledger: %d checks failed\n", hc_failures);
        return 1;
    }
    fprintf(stderr, "oltp_ledger: all checks passed\n");
    return 0;
}
