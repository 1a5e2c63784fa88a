/*
 * test_oltp_check.c - the OLTP checker (apps/oltp/oltp_check.c) on hand-made
 * logs and a SQLite ledger built through ledger_db.h: it passes a consistent
 * database, and each check fails on its own when the database is damaged
 * behind the ledger's back with the sqlite3 API (an acknowledged row
 * deleted, a row duplicated, a row of another amount, a row never sent, a
 * balance changed, a negative balance), and when a log cannot be read. The
 * log line format round-trips and rejects garbage.
 */
#include "../../apps/oltp/ledger_db.h"
#include "../../apps/oltp/oltp_check.h"
#include "../support/support.h"

#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEPOSIT  1000
#define ACCOUNTS 4

/* One test's files: the database and the two logs, in a fresh directory. */
struct fixture {
    char dir[64];
    char db[128];
    char log[128];
    char sent[160];
    struct ledger_op acked[3];
    struct ledger_op in_doubt_applied;
    struct ledger_op in_doubt_lost;
};

static void make_key(uint8_t *key, unsigned n)
{
    memset(key, 0, OLTP_KEY_SIZE);
    key[0] = 0xA5;
    key[15] = (uint8_t)n;
    key[7] = (uint8_t)(n * 37);
}

static struct ledger_op transfer(unsigned n, uint64_t from, uint64_t to, int64_t amount)
{
    struct ledger_op t = {.op = OLTP_OP_TRANSFER, .account = from, .to = to, .amount = amount};

    make_key(t.key, n);
    return t;
}

static void apply(struct ledger_db *db, const struct ledger_op *op)
{
    struct ledger_result res;

    ck_assert_int_eq(ledger_db_apply(db, op, 1, &res), 0);
    ck_assert_uint_eq(res.status, OLTP_ST_OK);
}

static void write_log(const char *path, const struct ledger_op *ops, size_t n)
{
    FILE *f = fopen(path, "w");

    ck_assert_ptr_nonnull(f);
    for (size_t i = 0; i < n; i++) {
        char line[OLTP_LOG_LINE_MAX];
        size_t len = oltp_log_format(&ops[i], line);

        ck_assert_uint_gt(len, 0);
        ck_assert_uint_eq(fwrite(line, 1, len, f), len);
    }
    ck_assert_int_eq(fclose(f), 0);
}

/*
 * Accounts 1..4 with DEPOSIT each (keyed, as the load's setup does), three
 * acknowledged transfers, one in doubt that was applied and one in doubt
 * that was not: a consistent ledger and its logs.
 */
static void fixture_init(struct fixture *fx)
{
    struct ledger_db_config cfg = {.url = fx->db};
    struct ledger_db *db;

    snprintf(fx->dir, sizeof(fx->dir), "/tmp/cr-oltp-check-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(fx->dir));
    snprintf(fx->db, sizeof(fx->db), "%s/ledger.db", fx->dir);
    snprintf(fx->log, sizeof(fx->log), "%s/acked.log", fx->dir);
    snprintf(fx->sent, sizeof(fx->sent), "%s.sent", fx->log);
    ck_assert_int_eq(ledger_db_open(&db, &cfg), 0);
    for (uint64_t a = 1; a <= ACCOUNTS; a++) {
        struct ledger_op open_op = {.op = OLTP_OP_OPEN, .account = a};
        struct ledger_op dep = {.op = OLTP_OP_DEPOSIT, .account = a, .amount = DEPOSIT};

        memcpy(dep.key, "crsetup", 8);
        dep.key[15] = (uint8_t)a;
        apply(db, &open_op);
        apply(db, &dep);
    }
    fx->acked[0] = transfer(1, 1, 2, 10);
    fx->acked[1] = transfer(2, 2, 3, 25);
    fx->acked[2] = transfer(3, 4, 1, 7);
    fx->in_doubt_applied = transfer(4, 3, 4, 5);
    fx->in_doubt_lost = transfer(5, 1, 3, 9);
    for (int i = 0; i < 3; i++)
        apply(db, &fx->acked[i]);
    apply(db, &fx->in_doubt_applied);
    ledger_db_close(db);
    write_log(fx->log, fx->acked, 3);
    {
        struct ledger_op doubt[2] = {fx->in_doubt_applied, fx->in_doubt_lost};

        write_log(fx->sent, doubt, 2);
    }
}

static void fixture_fini(struct fixture *fx)
{
    ck_assert_int_eq(cr_test_rmtree(fx->dir), 0);
}

/* Runs sql on the database file directly, as a damaged disk or a buggy
 * ledger would leave it. */
static void tamper(const struct fixture *fx, const char *sql)
{
    sqlite3 *db;
    char *msg = NULL;

    ck_assert_int_eq(sqlite3_open(fx->db, &db), SQLITE_OK);
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        ck_abort_msg("%s: %s", sql, msg);
    sqlite3_close(db);
}

/* Runs the checker; returns its output (owned by the caller). */
static char *check(const struct fixture *fx, struct oltp_check_result *res)
{
    struct oltp_check_config cfg = {
        .log = fx->log, .db_url = fx->db, .expect_sum = ACCOUNTS * DEPOSIT};
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(oltp_check_run(&cfg, f, res), 0);
    ck_assert_int_eq(fclose(f), 0);
    return out;
}

/* Asserts the one failing check is name (and the other three pass). */
static void expect_only_failure(const struct fixture *fx, const char *name)
{
    struct oltp_check_result res;
    char *out = check(fx, &res);
    char want[64];

    snprintf(want, sizeof(want), "FAIL %s: ", name);
    ck_assert_msg(strstr(out, want) != NULL, "no '%s' in:\n%s", want, out);
    ck_assert_msg(res.failed == 1 && res.passed == 3, "%u passed, %u failed:\n%s", res.passed,
                  res.failed, out);
    free(out);
}

START_TEST(passes_a_consistent_database)
{
    struct fixture fx;
    struct oltp_check_result res;
    char *out;

    fixture_init(&fx);
    out = check(&fx, &res);
    ck_assert_msg(res.passed == 4 && res.failed == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "PASS acknowledged_once\n"));
    ck_assert_ptr_nonnull(strstr(out, "PASS nothing_unsent\n"));
    ck_assert_ptr_nonnull(strstr(out, "PASS sum_unchanged\n"));
    ck_assert_ptr_nonnull(strstr(out, "PASS no_negative\n"));
    free(out);
    fixture_fini(&fx);
}
END_TEST

START_TEST(fails_when_an_acknowledged_transfer_is_missing)
{
    struct fixture fx;

    fixture_init(&fx);
    /* The row goes, the balances stay: only the first check can see it. */
    tamper(&fx, "DELETE FROM txns WHERE op = 4 AND amount = 25");
    expect_only_failure(&fx, "acknowledged_once");
    fixture_fini(&fx);
}
END_TEST

START_TEST(fails_when_a_transfer_is_applied_twice)
{
    struct fixture fx;

    fixture_init(&fx);
    /* The key's UNIQUE constraint would refuse the copy: rebuild the table
     * without it, as a ledger with a broken schema would have it. */
    tamper(&fx, "CREATE TABLE t2 AS SELECT * FROM txns; DROP TABLE txns;"
                "ALTER TABLE t2 RENAME TO txns;"
                "INSERT INTO txns (id, key, op, account, other, amount, balance_after)"
                " SELECT (SELECT MAX(id) + 1 FROM txns), key, op, account, other, amount,"
                " balance_after FROM txns WHERE op = 4 AND amount = 7");
    expect_only_failure(&fx, "acknowledged_once");
    fixture_fini(&fx);
}
END_TEST

START_TEST(fails_when_an_acknowledged_transfer_has_another_amount)
{
    struct fixture fx;

    fixture_init(&fx);
    tamper(&fx, "UPDATE txns SET amount = 11 WHERE op = 4 AND amount = 10");
    expect_only_failure(&fx, "acknowledged_once");
    fixture_fini(&fx);
}
END_TEST

START_TEST(fails_on_a_transfer_never_sent)
{
    struct fixture fx;
    struct ledger_db_config cfg = {0};
    struct ledger_db *db;
    struct ledger_op foreign = transfer(99, 2, 4, 3);

    fixture_init(&fx);
    cfg.url = fx.db;
    ck_assert_int_eq(ledger_db_open(&db, &cfg), 0);
    apply(db, &foreign);
    ledger_db_close(db);
    expect_only_failure(&fx, "nothing_unsent");
    fixture_fini(&fx);
}
END_TEST

START_TEST(fails_when_a_balance_is_changed)
{
    struct fixture fx;

    fixture_init(&fx);
    tamper(&fx, "UPDATE accounts SET balance = balance + 1 WHERE id = 3");
    expect_only_failure(&fx, "sum_unchanged");
    fixture_fini(&fx);
}
END_TEST

START_TEST(fails_on_a_negative_balance)
{
    struct fixture fx;

    fixture_init(&fx);
    /* The sum stays; only the sign is wrong, past the CHECK constraint. */
    tamper(&fx, "PRAGMA ignore_check_constraints = ON;"
                "UPDATE accounts SET balance = balance + 5 +"
                " (SELECT balance FROM accounts WHERE id = 2) WHERE id = 1;"
                "UPDATE accounts SET balance = -5 WHERE id = 2");
    expect_only_failure(&fx, "no_negative");
    fixture_fini(&fx);
}
END_TEST

START_TEST(fails_when_the_log_is_unreadable)
{
    struct fixture fx;
    struct oltp_check_result res;
    char *out;

    fixture_init(&fx);
    ck_assert_int_eq(unlink(fx.log), 0);
    out = check(&fx, &res);
    ck_assert_msg(strstr(out, "FAIL acknowledged_once: ") != NULL &&
                      strstr(out, "FAIL nothing_unsent: ") != NULL,
                  "%s", out);
    ck_assert_uint_eq(res.failed, 2);
    free(out);
    fixture_fini(&fx);
}
END_TEST

START_TEST(fails_when_the_database_is_missing)
{
    struct fixture fx;
    struct oltp_check_result res;
    char *out;

    fixture_init(&fx);
    ck_assert_int_eq(unlink(fx.db), 0);
    out = check(&fx, &res);
    ck_assert_msg(res.failed == 4 && res.passed == 0, "%s", out);
    /* And the checker did not create an empty one. */
    ck_assert_int_ne(access(fx.db, F_OK), 0);
    free(out);
    fixture_fini(&fx);
}
END_TEST

START_TEST(log_lines_round_trip_and_garbage_is_refused)
{
    struct ledger_op t = transfer(42, 1000000000000ULL, 7, 1000000000000LL);
    struct ledger_op back;
    char line[OLTP_LOG_LINE_MAX];
    size_t len = oltp_log_format(&t, line);

    ck_assert_uint_eq(len, strlen(line));
    ck_assert_int_eq(line[len - 1], '\n');
    ck_assert_int_eq(oltp_log_parse(line, &back), 0);
    ck_assert_int_eq(memcmp(&t, &back, sizeof(t)), 0);
    line[len - 1] = '\0';
    ck_assert_int_eq(oltp_log_parse(line, &back), 0);
    ck_assert_int_eq(memcmp(&t, &back, sizeof(t)), 0);

    ck_assert_int_eq(oltp_log_parse("", &back), -EBADMSG);
    ck_assert_int_eq(oltp_log_parse("a5 1 2 3\n", &back), -EBADMSG);
    ck_assert_int_eq(oltp_log_parse("a500000000000000000000000000002a 1 2\n", &back), -EBADMSG);
    ck_assert_int_eq(oltp_log_parse("a500000000000000000000000000002a 1 2 3 4\n", &back), -EBADMSG);
    ck_assert_int_eq(oltp_log_parse("a500000000000000000000000000002a 1 -2 3\n", &back), -EBADMSG);
    ck_assert_int_eq(oltp_log_parse("A500000000000000000000000000002X 1 2 3\n", &back), -EBADMSG);
    ck_assert_int_eq(
        oltp_log_parse("a500000000000000000000000000002a 1 2 99999999999999999999\n", &back),
        -EBADMSG);
}
END_TEST

Suite *oltp_check_suite(void);
Suite *oltp_check_suite(void)
{
    Suite *s = suite_create("oltp_check");
    TCase *tc = tcase_create("core");

    /* Each test builds a small SQLite ledger with synchronous=FULL. */
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, passes_a_consistent_database);
    tcase_add_test(tc, fails_when_an_acknowledged_transfer_is_missing);
    tcase_add_test(tc, fails_when_a_transfer_is_applied_twice);
    tcase_add_test(tc, fails_when_an_acknowledged_transfer_has_another_amount);
    tcase_add_test(tc, fails_on_a_transfer_never_sent);
    tcase_add_test(tc, fails_when_a_balance_is_changed);
    tcase_add_test(tc, fails_on_a_negative_balance);
    tcase_add_test(tc, fails_when_the_log_is_unreadable);
    tcase_add_test(tc, fails_when_the_database_is_missing);
    tcase_add_test(tc, log_lines_round_trip_and_garbage_is_refused);
    suite_add_tcase(s, tc);
    return s;
}
