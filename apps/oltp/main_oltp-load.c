/*
 * main_oltp-load.c - cabrank-oltp-load, the transaction service's load
 * generator and checker: parses the flags, optionally opens and
 * funds the accounts (--setup), runs the load (oltp_load.h), prints its
 * figures, then runs the checker (oltp_check.h) against the database. Runs
 * on the main thread; the clients are oltp_load's threads.
 *
 * Output ends with "N passed, N failed": one check for the load itself (no
 * unexpected error, something acknowledged) and the checker's four. Exit 0
 * when none failed, 1 otherwise, 2 for a bad flag.
 */
#include "../common/options.h"
#include "oltp_check.h"
#include "oltp_load.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG       "cabrank-oltp-load"
#define EXIT_USAGE OPTS_EXIT_USAGE

/* What the flags set: the load's configuration and the checker's. */
struct options {
    struct oltp_load_config cfg;
    const char *db;
    bool setup;
    bool check_only;
    bool have_sum;
    int64_t expect_sum;
};

static opts_special_fn set_special;

static const struct opts_def opt_defs[] = {
    {OPTS_DEF_STRING("target", struct options, cfg.target, "ADDR",
                     "a cabrank-gateway or cabrank-ledger")},
    {OPTS_DEF_NUM("clients", struct options, cfg.clients, 1, 10000, "N",
                  "clients, each a connection and a thread (1)")},
    {OPTS_DEF_SPECIAL("rate", "R",
                      "requests/s over all clients, open loop (a session counts as\n"
                      "one); 0 = closed loop (0)")},
    {OPTS_DEF_SPECIAL("seconds", "S", "run for S seconds")},
    {OPTS_DEF_NUM("requests", struct options, cfg.requests, 0, UINT64_MAX, "N",
                  "run for N requests (with neither bound: 1 s)")},
    {OPTS_DEF_NUM("accounts", struct options, cfg.accounts, 2, 10000000, "N",
                  "accounts 1..N (100)")},
    {OPTS_DEF_FLAG("setup", struct options, setup,
                   "open and fund the accounts first (again: no change);\n"
                   "with no bound given, only that")},
    {OPTS_DEF_SPECIAL("mix", "transfer|mixed",
                      "transfers only, or with balance reads and sessions")},
    {OPTS_DEF_STRING("log", struct options, cfg.log, "FILE",
                     "acknowledged transfers (and FILE.sent: outcome unknown)")},
    {OPTS_DEF_FLAG("append", struct options, cfg.append,
                   "append to the logs (several runs, one database)")},
    {OPTS_DEF_STRING("check", struct options, db, "DBURL",
                     "then check the database (SQLite path or postgresql://)")},
    {OPTS_DEF_STRING("db", struct options, db, "DBURL", "the same, for --check-only")},
    {OPTS_DEF_FLAG("check-only", struct options, check_only, "no load: check --log against --db")},
    {OPTS_DEF_FLAG("retry", struct options, cfg.retry,
                   "resend a transfer whose connection failed until acknowledged")},
    {OPTS_DEF_SPECIAL("expect-sum", "S", "the sum of balances to expect (accounts * 100000)")},
    {OPTS_DEF_FLAG("connect-per-request", struct options, cfg.connect_per_request,
                   "a new connection for every request")},
};

static const struct opts_table opt_table = {
    OPTS_TABLE(opt_defs, set_special, 22),
    .prog = PROG,
    .usage = "usage: " PROG " --target HOST:PORT [options]\n",
};

/* A number >= 0 (fractions allowed) into *v. */
static bool parse_double(const char *s, double *v)
{
    char *end;

    /* strtod alone takes " 1", "-0", "inf" and "nan". */
    if (!((s[0] >= '0' && s[0] <= '9') || s[0] == '.'))
        return false;
    errno = 0;
    *v = strtod(s, &end);
    return errno == 0 && end != s && *end == '\0' && *v >= 0;
}

/* The options that are not a plain field: doubles, an enum, a signed sum. */
static int set_special(void *obj, const struct opts_def *d, const char *v, void *arg,
                       struct opts_err *e)
{
    struct options *o = obj;

    (void)arg;
    if (strcmp(d->name, "rate") == 0) {
        if (!parse_double(v, &o->cfg.rate))
            return opts_fail(e, "--rate: '%s' is not a number >= 0", v);
    } else if (strcmp(d->name, "seconds") == 0) {
        if (!parse_double(v, &o->cfg.seconds) || o->cfg.seconds > 86400)
            return opts_fail(e, "--seconds: '%s' is not a number in 0..86400", v);
    } else if (strcmp(d->name, "mix") == 0) {
        if (strcmp(v, "transfer") == 0)
            o->cfg.mix = OLTP_MIX_TRANSFER;
        else if (strcmp(v, "mixed") == 0)
            o->cfg.mix = OLTP_MIX_MIXED;
        else
            return opts_fail(e, "unknown --mix '%s' (transfer, mixed)", v);
    } else if (strcmp(d->name, "expect-sum") == 0) {
        char *end;

        errno = 0;
        o->expect_sum = strtoll(v, &end, 10);
        if (errno != 0 || end == v || *end != '\0')
            return opts_fail(e, "--expect-sum: '%s' is not an integer", v);
        o->have_sum = true;
    }
    return 0;
}

/* The options from argv, checked together; exits for --help and a bad flag. */
static void parse_args(struct options *o, int argc, char **argv)
{
    struct opts_err e;

    opts_parse_or_exit(&opt_table, o, argc, argv, NULL);
    if (o->check_only && (o->db == NULL || o->cfg.log == NULL)) {
        opts_fail(&e, "--check-only needs --log and --db");
        opts_exit_usage(&opt_table, &e);
    }
    if (!o->check_only && o->cfg.target == NULL) {
        opts_fail(&e, "--target is required");
        opts_exit_usage(&opt_table, &e);
    }
}

static void verdict(unsigned *passed, unsigned *failed, const char *name, bool pass,
                    const char *what)
{
    if (pass) {
        ++*passed;
        printf("PASS %s\n", name);
    } else {
        ++*failed;
        printf("FAIL %s: %s\n", name, what);
    }
}

int main(int argc, char **argv)
{
    struct options opts = {0};
    struct options *o = &opts;
    struct oltp_load_config *cfg = &opts.cfg;
    char tmp_log[64] = "";
    unsigned passed = 0;
    unsigned failed = 0;

    parse_args(o, argc, argv);
    if (!o->have_sum)
        o->expect_sum =
            (int64_t)(cfg->accounts != 0 ? cfg->accounts : OLTP_LOAD_ACCOUNTS) * OLTP_LOAD_DEPOSIT;
    setvbuf(stdout, NULL, _IOLBF, 0);

    if (!o->check_only) {
        struct oltp_load_result res;
        char what[160];
        int err;

        if (o->setup) {
            if (oltp_load_setup(cfg, stderr) < 0)
                return 1;
            printf("setup: accounts 1..%" PRIu64 " open, %d each\n",
                   cfg->accounts != 0 ? cfg->accounts : OLTP_LOAD_ACCOUNTS, OLTP_LOAD_DEPOSIT);
            if (cfg->seconds == 0 && cfg->requests == 0 && o->db == NULL)
                return 0;
        }
        if (o->db != NULL && cfg->log == NULL) {
            int fd;

            /* The checker reads what the load wrote: it needs a log. */
            snprintf(tmp_log, sizeof(tmp_log), "/tmp/cabrank-oltp-load-XXXXXX");
            fd = mkstemp(tmp_log);
            if (fd < 0) {
                perror(PROG ": mkstemp");
                return 1;
            }
            close(fd);
            cfg->log = tmp_log;
        }
        err = oltp_load_run(cfg, &res, stderr);
        if (err == -EINVAL)
            return EXIT_USAGE;
        oltp_load_print(cfg, &res, stdout);
        snprintf(what, sizeof(what),
                 "%" PRIu64 " unexpected errors, %" PRIu64 " transfers acknowledged%s",
                 res.unexpected, res.acked, err < 0 ? ", the run failed" : "");
        verdict(&passed, &failed, "load", err == 0 && res.unexpected == 0 && res.acked > 0, what);
    }
    if (o->db != NULL) {
        struct oltp_check_config cc = {
            .log = cfg->log, .db_url = o->db, .expect_sum = o->expect_sum};
        struct oltp_check_result cr;

        if (oltp_check_run(&cc, stdout, &cr) < 0) {
            printf("FAIL checker: out of memory\n");
            failed++;
        } else {
            passed += cr.passed;
            failed += cr.failed;
        }
    }
    if (tmp_log[0] != '\0') {
        char sent[80];

        snprintf(sent, sizeof(sent), "%s.sent", tmp_log);
        unlink(sent);
        unlink(tmp_log);
    }
    printf("%u passed, %u failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
