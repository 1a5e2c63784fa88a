/*
 * main_oltp-load.c - cabrank-oltp-load, the transaction service's load
 * generator and checker (issue #8): parses the flags, optionally opens and
 * funds the accounts (--setup), runs the load (oltp_load.h), prints its
 * figures, then runs the checker (oltp_check.h) against the database. Runs
 * on the main thread; the clients are oltp_load's threads.
 *
 * Output ends with "N passed, N failed": one check for the load itself (no
 * unexpected error, something acknowledged) and the checker's four. Exit 0
 * when none failed, 1 otherwise, 2 for a bad flag.
 */
#include "oltp_check.h"
#include "oltp_load.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG       "cabrank-oltp-load"
#define EXIT_USAGE 2

enum {
    OPT_TARGET = 256,
    OPT_CLIENTS,
    OPT_RATE,
    OPT_SECONDS,
    OPT_REQUESTS,
    OPT_ACCOUNTS,
    OPT_SETUP,
    OPT_MIX,
    OPT_LOG,
    OPT_APPEND,
    OPT_CHECK,
    OPT_DB,
    OPT_CHECK_ONLY,
    OPT_RETRY,
    OPT_EXPECT_SUM,
    OPT_CPR,
    OPT_HELP,
};

static const struct option long_opts[] = {
    {"target", required_argument, NULL, OPT_TARGET},
    {"clients", required_argument, NULL, OPT_CLIENTS},
    {"rate", required_argument, NULL, OPT_RATE},
    {"seconds", required_argument, NULL, OPT_SECONDS},
    {"requests", required_argument, NULL, OPT_REQUESTS},
    {"accounts", required_argument, NULL, OPT_ACCOUNTS},
    {"setup", no_argument, NULL, OPT_SETUP},
    {"mix", required_argument, NULL, OPT_MIX},
    {"log", required_argument, NULL, OPT_LOG},
    {"append", no_argument, NULL, OPT_APPEND},
    {"check", required_argument, NULL, OPT_CHECK},
    {"db", required_argument, NULL, OPT_DB},
    {"check-only", no_argument, NULL, OPT_CHECK_ONLY},
    {"retry", no_argument, NULL, OPT_RETRY},
    {"expect-sum", required_argument, NULL, OPT_EXPECT_SUM},
    {"connect-per-request", no_argument, NULL, OPT_CPR},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static const char usage[] =
    "usage: " PROG " --target HOST:PORT [options]\n"
    "  --target ADDR          a cabrank-gateway or cabrank-ledger\n"
    "  --clients N            clients, each a connection and a thread (1)\n"
    "  --rate R               requests/s over all clients, open loop (a session counts as\n"
    "                         one); 0 = closed loop (0)\n"
    "  --seconds S            run for S seconds\n"
    "  --requests N           run for N requests (with neither bound: 1 s)\n"
    "  --accounts N           accounts 1..N (100)\n"
    "  --setup                open and fund the accounts first (again: no change);\n"
    "                         with no bound given, only that\n"
    "  --mix transfer|mixed   transfers only, or with balance reads and sessions\n"
    "  --log FILE             acknowledged transfers (and FILE.sent: outcome unknown)\n"
    "  --append               append to the logs (several runs, one database)\n"
    "  --check DBURL          then check the database (SQLite path or postgresql://)\n"
    "  --db DBURL             the same, for --check-only\n"
    "  --check-only           no load: check --log against --db\n"
    "  --retry                resend a transfer whose connection failed until acknowledged\n"
    "  --expect-sum S         the sum of balances to expect (accounts * 100000)\n"
    "  --connect-per-request  a new connection for every request\n";

static int bad(const char *what, const char *arg)
{
    fprintf(stderr, PROG ": %s%s (--help)\n", arg, what);
    return EXIT_USAGE;
}

static bool parse_u64(const char *s, uint64_t *v)
{
    char *end;

    errno = 0;
    *v = strtoull(s, &end, 10);
    return errno == 0 && end != s && *end == '\0' && s[0] != '-';
}

static bool parse_double(const char *s, double *v)
{
    char *end;

    errno = 0;
    *v = strtod(s, &end);
    return errno == 0 && end != s && *end == '\0' && *v >= 0;
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
    struct oltp_load_config cfg = {0};
    const char *db = NULL;
    bool setup = false;
    bool check_only = false;
    bool have_sum = false;
    int64_t expect_sum = 0;
    char tmp_log[64] = "";
    unsigned passed = 0;
    unsigned failed = 0;
    int opt;

    while ((opt = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        uint64_t u;

        switch (opt) {
        case OPT_TARGET:
            cfg.target = optarg;
            break;
        case OPT_CLIENTS:
            if (!parse_u64(optarg, &u) || u == 0 || u > 10000)
                return bad(" for --clients: 1..10000", optarg);
            cfg.clients = (unsigned)u;
            break;
        case OPT_RATE:
            if (!parse_double(optarg, &cfg.rate))
                return bad(" for --rate: a number >= 0", optarg);
            break;
        case OPT_SECONDS:
            if (!parse_double(optarg, &cfg.seconds) || cfg.seconds > 86400)
                return bad(" for --seconds: 0..86400", optarg);
            break;
        case OPT_REQUESTS:
            if (!parse_u64(optarg, &cfg.requests))
                return bad(" for --requests: a count", optarg);
            break;
        case OPT_ACCOUNTS:
            if (!parse_u64(optarg, &cfg.accounts) || cfg.accounts < 2 || cfg.accounts > 10000000)
                return bad(" for --accounts: 2..10000000", optarg);
            break;
        case OPT_SETUP:
            setup = true;
            break;
        case OPT_MIX:
            if (strcmp(optarg, "transfer") == 0)
                cfg.mix = OLTP_MIX_TRANSFER;
            else if (strcmp(optarg, "mixed") == 0)
                cfg.mix = OLTP_MIX_MIXED;
            else
                return bad(" for --mix: transfer or mixed", optarg);
            break;
        case OPT_LOG:
            cfg.log = optarg;
            break;
        case OPT_APPEND:
            cfg.append = true;
            break;
        case OPT_CHECK:
        case OPT_DB:
            db = optarg;
            break;
        case OPT_CHECK_ONLY:
            check_only = true;
            break;
        case OPT_RETRY:
            cfg.retry = true;
            break;
        case OPT_EXPECT_SUM: {
            char *end;

            errno = 0;
            expect_sum = strtoll(optarg, &end, 10);
            if (errno != 0 || end == optarg || *end != '\0')
                return bad(" for --expect-sum: an integer", optarg);
            have_sum = true;
            break;
        }
        case OPT_CPR:
            cfg.connect_per_request = true;
            break;
        case OPT_HELP:
            fputs(usage, stdout);
            return 0;
        default:
            return bad("", "bad option");
        }
    }
    if (optind < argc)
        return bad(": unexpected argument", argv[optind]);
    if (check_only && (db == NULL || cfg.log == NULL))
        return bad("", "--check-only needs --log and --db");
    if (!check_only && cfg.target == NULL)
        return bad("", "--target is required");
    if (!have_sum)
        expect_sum =
            (int64_t)(cfg.accounts != 0 ? cfg.accounts : OLTP_LOAD_ACCOUNTS) * OLTP_LOAD_DEPOSIT;
    setvbuf(stdout, NULL, _IOLBF, 0);

    if (!check_only) {
        struct oltp_load_result res;
        char what[160];
        int err;

        if (setup) {
            if (oltp_load_setup(&cfg, stderr) < 0)
                return 1;
            printf("setup: accounts 1..%" PRIu64 " open, %d each\n",
                   cfg.accounts != 0 ? cfg.accounts : OLTP_LOAD_ACCOUNTS, OLTP_LOAD_DEPOSIT);
            if (cfg.seconds == 0 && cfg.requests == 0 && db == NULL)
                return 0;
        }
        if (db != NULL && cfg.log == NULL) {
            int fd;

            /* The checker reads what the load wrote: it needs a log. */
            snprintf(tmp_log, sizeof(tmp_log), "/tmp/cabrank-oltp-load-XXXXXX");
            fd = mkstemp(tmp_log);
            if (fd < 0) {
                perror(PROG ": mkstemp");
                return 1;
            }
            close(fd);
            cfg.log = tmp_log;
        }
        err = oltp_load_run(&cfg, &res, stderr);
        if (err == -EINVAL)
            return EXIT_USAGE;
        oltp_load_print(&cfg, &res, stdout);
        snprintf(what, sizeof(what),
                 "%" PRIu64 " unexpected errors, %" PRIu64 " transfers acknowledged%s",
                 res.unexpected, res.acked, err < 0 ? ", the run failed" : "");
        verdict(&passed, &failed, "load", err == 0 && res.unexpected == 0 && res.acked > 0, what);
    }
    if (db != NULL) {
        struct oltp_check_config cc = {.log = cfg.log, .db_url = db, .expect_sum = expect_sum};
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
