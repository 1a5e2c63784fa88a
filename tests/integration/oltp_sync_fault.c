/*
 * oltp_sync_fault.c (integration) - cabrank-ledger on SQLite when fsync
 * and fdatasync fail (the sync_fault.so shim, tests/support/preload/, in
 * LD_PRELOAD). Client threads send keyed transfers; every answer must be OK,
 * INSUFFICIENT, IN_DOUBT (the commit whose sync failed: it may be durable or
 * not) or UNAVAILABLE (refused), never INTERNAL ("not applied"), and a
 * client that met IN_DOUBT or UNAVAILABLE is refused from then on: after a
 * failed sync the ledger takes nothing more (PING, reads and writes are
 * UNAVAILABLE) and logs why. Then the ledger is stopped and started again
 * without the shim on the same file (SQLite recovers from its WAL), each
 * transfer answered IN_DOUBT is sent again with its key (answered OK: it
 * was there, or it is applied now), and the database is checked against
 * the answers: every OK transfer is there once, no refused one is, the sum
 * is unchanged. Two runs: every sync after the 5th fails, under group
 * commit; each sync fails with probability 0.25 (seeded), one commit per
 * transfer. And cabrank-oltp-load against such a ledger: it counts the
 * IN_DOUBT answers on their own and logs only those as of unknown outcome,
 * and its checker agrees with the database. Exit 0 pass, 1 fail.
 */
#include "../support/oltp_client.h"
#include "httpd_client.h"

#include <limits.h>

#define ACCOUNTS      16
#define START_BALANCE 1000
#define CLIENTS       4

static char dir[256];

/* Sets LD_PRELOAD to the shim and its knobs, for the next child only. An
 * ASan program checks that its runtime comes first; with a preload it
 * cannot, and the check is off (the shim intercepts nothing ASan does). */
static void preload_on(const char *after, const char *prob)
{
    char rel[PATH_MAX];
    char abs[PATH_MAX];
    const char *asan = getenv("ASAN_OPTIONS");
    char opts[1024];

    cr_test_build_path("test-preload/sync_fault.so", rel, sizeof(rel));
    if (realpath(rel, abs) == NULL)
        snprintf(abs, sizeof(abs), "%s", rel);
    setenv("LD_PRELOAD", abs, 1);
    if (after != NULL)
        setenv("CR_SYNC_FAULT_AFTER", after, 1);
    if (prob != NULL) {
        setenv("CR_SYNC_FAULT_PROB", prob, 1);
        setenv("CR_SYNC_FAULT_SEED", "42", 1);
    }
    snprintf(opts, sizeof(opts), "%s%sverify_asan_link_order=0", asan != NULL ? asan : "",
             asan != NULL && asan[0] != '\0' ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
}

static void preload_off(const char *asan)
{
    unsetenv("LD_PRELOAD");
    unsetenv("CR_SYNC_FAULT_AFTER");
    unsetenv("CR_SYNC_FAULT_PROB");
    unsetenv("CR_SYNC_FAULT_SEED");
    if (asan != NULL)
        setenv("ASAN_OPTIONS", asan, 1);
    else
        unsetenv("ASAN_OPTIONS");
}

static int start_ledger(struct hc_server *s, const char *db, const char *log, bool group)
{
    char *args[] = {"--listen",
                    "127.0.0.1:0",
                    "--db",
                    (char *)db,
                    "--threads",
                    "8",
                    "--log-level",
                    "warn",
                    "--error-log",
                    (char *)log,
                    group ? NULL : "--no-group-commit",
                    NULL};

    return cr_test_oltp_spawn("cabrank-ledger", args, &s->pid, &s->port, hc_tmo(20000));
}

/* One request on a new connection: its status, or UINT16_MAX when none. */
static unsigned status_of(uint16_t port, const struct oltp_req *r)
{
    struct oltp_reply rp;
    int fd = cr_test_connect(port);
    int err = fd >= 0 ? cr_test_oltp_call(fd, r, &rp, hc_tmo(10000)) : fd;

    if (fd >= 0)
        close(fd);
    return err == 0 ? rp.status : UINT16_MAX;
}

static bool file_has(const char *path, const char *needle)
{
    static char buf[65536];
    FILE *f = fopen(path, "re");
    size_t n;

    if (f == NULL)
        return false;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

/* The answers of the load, by status, and the order rule: in each client's
 * sequence nothing is applied (OK) after its first IN_DOUBT or UNAVAILABLE. */
static void judge_answers(const char *what, const struct cr_test_oltp_load *ld)
{
    unsigned ok = 0;
    unsigned in_doubt = 0;
    unsigned refused = 0;

    for (unsigned c = 0; c < ld->cfg.clients; c++) {
        bool failed = false;

        CHECK(ld->c[c].failed == 0 && ld->c[c].sent == ld->cfg.per_client,
              "%s: client %u got no answer at %u", what, c, ld->c[c].sent);
        for (unsigned i = 0; i < ld->c[c].sent; i++) {
            uint16_t st = ld->c[c].x[i].status;

            CHECK(st == OLTP_ST_OK || st == OLTP_ST_INSUFFICIENT || st == OLTP_ST_IN_DOUBT ||
                      st == OLTP_ST_UNAVAILABLE,
                  "%s: client %u transfer %u answered %u (%s): a failed sync must be IN_DOUBT",
                  what, c, i, st, oltp_status_name(st));
            CHECK(!(failed && st == OLTP_ST_OK),
                  "%s: client %u transfer %u applied after the ledger failed", what, c, i);
            ok += st == OLTP_ST_OK;
            in_doubt += st == OLTP_ST_IN_DOUBT;
            refused += st == OLTP_ST_UNAVAILABLE;
            failed |= st == OLTP_ST_IN_DOUBT || st == OLTP_ST_UNAVAILABLE;
        }
    }
    fprintf(stderr, "%s: %u OK, %u IN_DOUBT, %u UNAVAILABLE\n", what, ok, in_doubt, refused);
    CHECK(ok > 0, "%s: nothing applied before the failing sync", what);
    CHECK(in_doubt > 0, "%s: no commit answered IN_DOUBT", what);
}

/* Sends each IN_DOUBT transfer again with its key, to the restarted
 * ledger: OK (or INSUFFICIENT, applied nowhere) settles it either way. */
static void settle_in_doubt(const char *what, struct cr_test_oltp_load *ld, uint16_t port)
{
    for (unsigned c = 0; c < ld->cfg.clients; c++) {
        for (unsigned i = 0; i < ld->c[c].sent; i++) {
            struct cr_test_oltp_xfer *x = &ld->c[c].x[i];
            struct oltp_req r = {.op = OLTP_OP_TRANSFER, .id = 1};
            unsigned st;

            if (x->status != OLTP_ST_IN_DOUBT)
                continue;
            r.account = x->from;
            r.to = x->to;
            r.amount = x->amount;
            cr_test_oltp_key(c, i, r.key);
            st = status_of(port, &r);
            CHECK(st == OLTP_ST_OK || st == OLTP_ST_INSUFFICIENT,
                  "%s: client %u transfer %u sent again: %u", what, c, i, st);
            if (st != UINT16_MAX)
                x->status = (uint16_t)st;
        }
    }
}

static void test_faulty(const char *what, const char *after, const char *prob, bool group,
                        unsigned per)
{
    static struct cr_test_oltp_load ld;
    static struct cr_test_oltp_verdict v;
    const char *asan_env = getenv("ASAN_OPTIONS");
    char *asan = asan_env != NULL ? strdup(asan_env) : NULL;
    struct cr_test_oltp_load_config cfg = {
        .clients = CLIENTS,
        .per_client = per,
        .accounts = ACCOUNTS,
        .max_amount = 300,
        .seed = 777u,
        .reply_tmo_ms = hc_tmo(10000),
    };
    struct oltp_req ping = {.op = OLTP_OP_PING, .id = 1};
    struct oltp_req balance = {.op = OLTP_OP_BALANCE, .id = 2, .account = 1};
    struct hc_server s = {0};
    char db[512];
    char log[512];
    int err;

    snprintf(db, sizeof(db), "%s/%s.db", dir, what);
    snprintf(log, sizeof(log), "%s/%s.log", dir, what);
    CHECK(cr_test_oltp_make_db(db, ACCOUNTS, START_BALANCE) == 0, "%s: creating the database",
          what);
    preload_on(after, prob);
    err = start_ledger(&s, db, log, group);
    preload_off(asan);
    free(asan);
    if (err < 0) {
        hc_failures++;
        return;
    }
    cfg.port = s.port;
    CHECK(cr_test_oltp_load_start(&ld, &cfg) == 0, "%s: starting clients", what);
    cr_test_oltp_load_join(&ld);
    judge_answers(what, &ld);
    /* Refused from now on, and said why. */
    CHECK(status_of(s.port, &ping) == OLTP_ST_UNAVAILABLE, "%s: PING after the failure", what);
    CHECK(status_of(s.port, &balance) == OLTP_ST_UNAVAILABLE, "%s: BALANCE after the failure",
          what);
    CHECK(file_has(log, "storage failed"), "%s: the ledger's log does not say why", what);
    CHECK(hc_stop(&s) == 0, "%s: graceful stop", what);

    /* Without the shim: SQLite recovers the file, the ledger serves. */
    if (start_ledger(&s, db, log, group) < 0) {
        hc_failures++;
        return;
    }
    CHECK(status_of(s.port, &ping) == OLTP_ST_OK, "%s: PING after the restart", what);
    settle_in_doubt(what, &ld, s.port);
    CHECK(hc_stop(&s) == 0, "%s: graceful stop after the restart", what);
    CHECK(cr_test_oltp_check(&ld, db, ACCOUNTS, START_BALANCE, &v) == 0 && v.ok,
          "%s: the database against the answers:\n%s", what, v.report);
    fprintf(stderr, "%s: %u transfers acknowledged, all present once; sum %lld\n", what, v.acked,
            (long long)v.sum);
}

/* The number after label in out (the first one), or -1. */
static long number_after(const char *out, const char *label)
{
    const char *p = strstr(out, label);

    return p != NULL ? strtol(p + strlen(label), NULL, 10) : -1;
}

/*
 * cabrank-oltp-load against a ledger whose syncs fail: its report counts
 * the transfers answered IN_DOUBT on their own ("answered in doubt N"),
 * logs exactly those as of unknown outcome (the refused ones were not
 * applied), and its checker then agrees with the database.
 */
static void test_load_tool(void)
{
    static char out[16384];
    const char *asan_env = getenv("ASAN_OPTIONS");
    char *asan = asan_env != NULL ? strdup(asan_env) : NULL;
    struct hc_server s = {0};
    char db[512];
    char log[512];
    char acked[512];
    char target[64];
    long in_doubt;
    long unknown;
    int err;

    snprintf(db, sizeof(db), "%s/tool.db", dir);
    snprintf(log, sizeof(log), "%s/tool.log", dir);
    snprintf(acked, sizeof(acked), "%s/acked.log", dir);
    CHECK(cr_test_oltp_make_db(db, ACCOUNTS, 100000) == 0, "tool: creating the database");
    preload_on("5", NULL);
    err = start_ledger(&s, db, log, true);
    preload_off(asan);
    free(asan);
    if (err < 0) {
        hc_failures++;
        return;
    }
    snprintf(target, sizeof(target), "127.0.0.1:%u", (unsigned)s.port);
    {
        char *args[] = {"--target",   target, "--accounts", "16",  "--clients", "2",
                        "--requests", "60",   "--log",      acked, NULL};

        /* Not 0: the refused transfers are errors the run did not expect. */
        CHECK(cr_test_oltp_run_load(args, out, sizeof(out), hc_tmo(60000)) == 1,
              "tool: the load's exit status");
    }
    in_doubt = number_after(out, "answered in doubt ");
    unknown = number_after(out, "outcome unknown ");
    CHECK(in_doubt > 0, "tool: no transfer counted as answered in doubt");
    CHECK(unknown == in_doubt, "tool: %ld transfers of unknown outcome, %ld answered in doubt",
          unknown, in_doubt);
    CHECK(hc_stop(&s) == 0, "tool: graceful stop");
    {
        char *args[] = {"--check-only", "--log", acked,          "--db",    db,
                        "--accounts",   "16",    "--expect-sum", "1600000", NULL};

        CHECK(cr_test_oltp_run_load(args, out, sizeof(out), hc_tmo(60000)) == 0 &&
                  strstr(out, "4 passed, 0 failed") != NULL,
              "tool: the checker against the database");
    }
}

int main(void)
{
    unsigned per = hc_is_sanitized() ? 15 : 40;

    signal(SIGPIPE, SIG_IGN);
    if (hc_mkdtemp(dir, sizeof(dir)) < 0) {
        perror("mkdtemp");
        return 1;
    }
    test_faulty("after5", "5", NULL, true, per);
    test_faulty("random", NULL, "0.25", false, per);
    test_load_tool();
    (void)cr_test_rmtree(dir);
    if (hc_failures != 0) {
        fprintf(stderr, "oltp_sync_fault: %d checks failed\n", hc_failures);
        return 1;
    }
    fprintf(stderr, "oltp_sync_fault: all checks passed\n");
    return 0;
}
