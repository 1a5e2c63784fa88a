/*
 * oltp_check.h - the OLTP checker: reads the load generator's log
 * of acknowledged transfers and its log of transfers left in flight, then
 * the ledger's database, and says whether the database kept its promises:
 * every acknowledged transfer present exactly once, nothing that was never
 * sent, the sum of balances unchanged, no negative balance. Called by
 * cabrank-oltp-load (after a load or with --check-only) and by the tests.
 * Runs on the caller's thread; owns nothing between calls.
 *
 * Both logs are text, one transfer a line: "KEYHEX FROM TO AMOUNT\n" (the
 * 16-byte key as 32 lowercase hex digits, then decimal numbers).
 */
#ifndef CABRANK_OLTP_CHECK_H
#define CABRANK_OLTP_CHECK_H

#include "ledger_db.h"

#include <stdio.h>

/* The longest log line with its newline. */
#define OLTP_LOG_LINE_MAX 96

struct oltp_check_config {
    /* The log of acknowledged transfers. Required. Borrowed. */
    const char *log;
    /* The log of transfers whose outcome the load never learnt; NULL:
     * "<log>.sent". A missing file is an empty log. Borrowed. */
    const char *sent;
    /* The ledger's database (ledger_db_config.url). Required. Borrowed. */
    const char *db_url;
    /* What the sum of every balance must be. */
    int64_t expect_sum;
};

struct oltp_check_result {
    unsigned passed;
    unsigned failed;
};

/*
 * Runs the four checks and prints one line each to out: "PASS <name>" or
 * "FAIL <name>: <what>" (names: acknowledged_once, nothing_unsent,
 * sum_unchanged, no_negative). A log or database that cannot be read fails
 * the checks that need it. Returns 0 with *res, or -ENOMEM. Thread-safe.
 */
CR_MUST_CHECK int oltp_check_run(const struct oltp_check_config *cfg, FILE *out,
                                 struct oltp_check_result *res);

/* Formats t (a TRANSFER) as one log line with its newline into buf (at
 * least OLTP_LOG_LINE_MAX bytes); returns its length. Thread-safe. */
size_t oltp_log_format(const struct ledger_op *t, char *buf);

/* Parses one log line (with or without its newline) into *t (op TRANSFER).
 * 0 or -EBADMSG. Thread-safe. */
CR_MUST_CHECK int oltp_log_parse(const char *line, struct ledger_op *t);

#endif /* CABRANK_OLTP_CHECK_H */
