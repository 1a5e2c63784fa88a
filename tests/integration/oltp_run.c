/*
 * oltp_run.c (integration) - what `make run-oltp` does, checked: a
 * cabrank-ledger on SQLite in a temporary directory and a cabrank-gateway in
 * front of it; cabrank-oltp-load opens and funds the accounts through the
 * gateway, runs a short load of transfers (8 clients, 2 s) through it with
 * the checker, then a mixed load (balance reads, sessions) straight at the
 * ledger, appending to the same log, checked again, and an open-loop run
 * of 200 requests at 400/s, a connection each, through the gateway. Each
 * must end "5 passed, 0 failed" with exit 0. Then the checker is shown able to fail:
 * an empty log against the same database finds every row foreign.
 * Exit 0 pass, 1 fail (never skips: every program is ours).
 */
#include "../support/oltp_client.h"
#include "httpd_client.h"

int main(void)
{
    char dir[64] = "/tmp/cr-oltp-run-XXXXXX";
    char db[128];
    char log[128];
    char empty[128];
    char ledger_addr[32];
    char gw_addr[32];
    char out[16384];
    struct hc_server ledger = {0};
    struct hc_server gateway = {0};
    int rc;

    signal(SIGPIPE, SIG_IGN);
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(db, sizeof(db), "%s/ledger.db", dir);
    snprintf(log, sizeof(log), "%s/acked.log", dir);
    snprintf(empty, sizeof(empty), "%s/empty.log", dir);

    {
        char *args[] = {"--listen", "127.0.0.1:0", "--db", db, "--threads", "8", NULL};

        if (cr_test_oltp_spawn("cabrank-ledger", args, &ledger.pid, &ledger.port,
                               cr_test_tmo(20000)) < 0) {
            hc_failures++;
            goto out;
        }
    }
    snprintf(ledger_addr, sizeof(ledger_addr), "127.0.0.1:%u", ledger.port);
    {
        char *args[] = {"--listen",  "127.0.0.1:0", "--backend", ledger_addr,
                        "--threads", "8",           NULL};

        if (cr_test_oltp_spawn("cabrank-gateway", args, &gateway.pid, &gateway.port,
                               cr_test_tmo(20000)) < 0) {
            hc_failures++;
            goto out;
        }
    }
    snprintf(gw_addr, sizeof(gw_addr), "127.0.0.1:%u", gateway.port);

    /* Through the gateway: set-up, then transfers with the checker. */
    {
        char *args[] = {"--target", gw_addr, "--setup", "--clients", "8", "--seconds",
                        "2",        "--log", log,       "--check",   db,  NULL};

        rc = cr_test_oltp_run_load(args, out, sizeof(out), cr_test_tmo(60000));
        CHECK(rc == 0, "load through the gateway: exit %d", rc);
        CHECK(strstr(out, "PASS acknowledged_once\n") != NULL, "the checker ran");
        CHECK(strstr(out, "\n5 passed, 0 failed\n") != NULL, "through the gateway: all passed");
    }

    /* Straight at the ledger, mixed, the same log: both runs checked. */
    {
        char *args[] = {"--target", ledger_addr, "--clients", "8",        "--seconds", "2", "--mix",
                        "mixed",    "--log",     log,         "--append", "--check",   db,  NULL};

        rc = cr_test_oltp_run_load(args, out, sizeof(out), cr_test_tmo(60000));
        CHECK(rc == 0, "mixed load on the ledger: exit %d", rc);
        CHECK(strstr(out, "\n5 passed, 0 failed\n") != NULL, "on the ledger: all passed");
        CHECK(strstr(out, "in 0 sessions") == NULL, "some sessions committed");
    }

    /* Open loop, bounded by a count, a connection per request, through the
     * gateway: the same log again. */
    {
        char *args[] = {"--target",   gw_addr,  "--clients",
                        "4",          "--rate", "400",
                        "--requests", "200",    "--connect-per-request",
                        "--log",      log,      "--append",
                        "--check",    db,       NULL};

        rc = cr_test_oltp_run_load(args, out, sizeof(out), cr_test_tmo(60000));
        CHECK(rc == 0, "open loop through the gateway: exit %d", rc);
        CHECK(strstr(out, "open loop at 400/s") != NULL, "open loop");
        {
            /* Paced: the 200th request is not due before 0.4975 s. */
            const char *p = strstr(out, "transfers acknowledged: 200 in ");
            double secs = p != NULL ? atof(p + strlen("transfers acknowledged: 200 in ")) : 0;

            CHECK(secs >= 0.49, "200 requests at 400/s took %.3f s", secs);
        }
        CHECK(strstr(out, "\n5 passed, 0 failed\n") != NULL, "open loop: all passed");
    }

    /* The checker can fail: an empty log has sent none of the rows. */
    {
        FILE *f = fopen(empty, "w");
        char *args[] = {"--check-only", "--log", empty, "--db", db, NULL};

        CHECK(f != NULL && fclose(f) == 0, "empty log");
        rc = cr_test_oltp_run_load(args, out, sizeof(out), cr_test_tmo(60000));
        CHECK(rc == 1, "an empty log: exit %d", rc);
        CHECK(strstr(out, "FAIL nothing_unsent: ") != NULL, "foreign rows found");
        CHECK(strstr(out, "\n3 passed, 1 failed\n") != NULL, "only that check failed");
    }

out:
    /* Each must stop on TERM and exit 0. */
    CHECK(hc_stop_sig(&gateway, SIGTERM, cr_test_tmo(10000)) == 0, "cabrank-gateway: TERM, exit 0");
    CHECK(hc_stop_sig(&ledger, SIGTERM, cr_test_tmo(10000)) == 0, "cabrank-ledger: TERM, exit 0");
    (void)cr_test_rmtree(dir);
    fprintf(stderr, "oltp_run: %s\n", hc_failures == 0 ? "pass" : "FAIL");
    return hc_failures == 0 ? 0 : 1;
}
