/*
 * test_ledger_db_pg.c - the ledger database on PostgreSQL (ledger_db_pg.c
 * under ledger_db.c): statuses of every op, idempotent keyed transfers,
 * group commit from 8 threads, two ledger_db handles on one database (as
 * two ledgers) with crossing transfers and with the same keys, and a
 * server killed under a ledger and restarted.
 *
 * Each test gets its own server (tests/support/pg.h, about 1 s to start),
 * started by a checked fixture in the test's own process: the server dies
 * with the test if it crashes or times out. Without PostgreSQL installed
 * every test prints "skip: ..." and passes. Loads are bounded in count;
 * waits scale with CK_TIMEOUT_MULTIPLIER; no timing is asserted.
 */
#include "../../apps/oltp/ledger_db.h"
#include "../support/pg.h"

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define TEST_TIMEOUT 60 /* seconds, times CK_TIMEOUT_MULTIPLIER */

static struct cr_test_pg pg;
static int pg_err;

static void setup(void)
{
    pg_err = cr_test_pg_start(&pg);
}

static void teardown(void)
{
    cr_test_pg_stop(&pg);
}

/* True (after saying so) when PostgreSQL is not installed; fails the test
 * when it is but would not start. */
static bool skip_without_pg(void)
{
    if (pg_err == -ENOENT) {
        fprintf(stderr, "skip: PostgreSQL (initdb, postgres) is not installed\n");
        return true;
    }
    ck_assert_msg(pg_err == 0, "cr_test_pg_start: %s", strerror(-pg_err));
    return false;
}

static struct ledger_db *open_db(bool group_commit)
{
    struct ledger_db_config cfg = {.url = pg.url, .group_commit = group_commit};
    struct ledger_db *db;

    ck_assert_int_eq(ledger_db_open(&db, &cfg), 0);
    return db;
}

static void make_key(uint8_t key[OLTP_KEY_SIZE], unsigned tag, unsigned n)
{
    memset(key, 0, OLTP_KEY_SIZE);
    /* A zero byte inside and a high bit: the key is bytes, not text. */
    key[0] = 0xA5;
    key[1] = 0;
    memcpy(key + 2, &tag, sizeof(tag));
    memcpy(key + 8, &n, sizeof(n));
}

static struct ledger_op op_of(uint8_t op, uint64_t account, uint64_t to, int64_t amount)
{
    struct ledger_op o = {.op = op, .account = account, .to = to, .amount = amount};

    return o;
}

/* Applies one op as its own unit; returns its status, *balance after. */
static uint16_t apply1(struct ledger_db *db, struct ledger_op o, int64_t *balance)
{
    struct ledger_result res;

    ck_assert_int_eq(ledger_db_apply(db, &o, 1, &res), 0);
    if (balance != NULL)
        *balance = res.balance;
    return res.status;
}

static int64_t balance_of(struct ledger_db *db, uint64_t account)
{
    int64_t b = -1;

    ck_assert_int_eq(ledger_db_balance(db, account, &b), 0);
    return b;
}

static void open_funded(struct ledger_db *db, uint64_t first, uint64_t last, int64_t amount)
{
    for (uint64_t a = first; a <= last; a++) {
        ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_OPEN, a, 0, 0), NULL), OLTP_ST_OK);
        ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_DEPOSIT, a, 0, amount), NULL), OLTP_ST_OK);
    }
}

START_TEST(harness_starts_a_server_and_stop_removes_it)
{
    char dir[sizeof(pg.dir)];
    pid_t pid = pg.pid;
    struct stat st;

    if (skip_without_pg())
        return;
    ck_assert_int_gt(pid, 0);
    ck_assert_int_gt(pg.port, 0);
    ck_assert_ptr_nonnull(strstr(pg.url, "@127.0.0.1:"));
    memcpy(dir, pg.dir, sizeof(dir));
    ck_assert_int_eq(stat(dir, &st), 0);
    cr_test_pg_stop(&pg);
    ck_assert_int_eq(pg.pid, 0);
    ck_assert_int_eq(kill(pid, 0), -1);
    ck_assert_int_eq(stat(dir, &st), -1);
    cr_test_pg_stop(&pg); /* twice is harmless */
}
END_TEST

START_TEST(ops_report_their_statuses_and_units_are_atomic)
{
    struct ledger_db *db;
    struct ledger_result res;
    struct oltp_hist hist[8];
    struct ledger_op unit[2];
    unsigned n;
    int64_t b;
    int64_t sum;
    uint64_t accounts;
    uint64_t negative;

    if (skip_without_pg())
        return;
    db = open_db(false);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_OPEN, 1, 0, 0), &b), OLTP_ST_OK);
    ck_assert_int_eq(b, 0);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_OPEN, 1, 0, 0), NULL), OLTP_ST_EXISTS);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_OPEN, 2, 0, 0), NULL), OLTP_ST_OK);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_OPEN, 3, 0, 0), NULL), OLTP_ST_OK);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_DEPOSIT, 1, 0, 100), &b), OLTP_ST_OK);
    ck_assert_int_eq(b, 100);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_WITHDRAW, 1, 0, 30), &b), OLTP_ST_OK);
    ck_assert_int_eq(b, 70);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_WITHDRAW, 1, 0, 71), NULL), OLTP_ST_INSUFFICIENT);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_WITHDRAW, 9, 0, 1), NULL), OLTP_ST_NO_ACCOUNT);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_DEPOSIT, 9, 0, 1), NULL), OLTP_ST_NO_ACCOUNT);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_TRANSFER, 1, 2, 50), &b), OLTP_ST_OK);
    ck_assert_int_eq(b, 20);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_TRANSFER, 2, 1, 51), NULL), OLTP_ST_INSUFFICIENT);
    /* Missing "to" above and below "from": either lock order. */
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_TRANSFER, 1, 9, 5), NULL), OLTP_ST_NO_ACCOUNT);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_TRANSFER, 2, 1, 5), &b), OLTP_ST_OK);
    ck_assert_int_eq(b, 45);
    /* The credit of 1 is done first (lower id), then undone with the unit. */
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_TRANSFER, 9, 1, 5), NULL), OLTP_ST_NO_ACCOUNT);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_TRANSFER, 3, 1, 5), NULL), OLTP_ST_INSUFFICIENT);
    ck_assert_int_eq(balance_of(db, 1), 25);
    ck_assert_int_eq(balance_of(db, 2), 45);
    ck_assert_int_eq(ledger_db_balance(db, 9, &b), -ENOENT);

    /* A unit whose second op fails leaves nothing of its first. */
    unit[0] = op_of(OLTP_OP_DEPOSIT, 3, 0, 10);
    unit[1] = op_of(OLTP_OP_WITHDRAW, 2, 0, 1000);
    ck_assert_int_eq(ledger_db_apply(db, unit, 2, &res), 0);
    ck_assert_uint_eq(res.status, OLTP_ST_INSUFFICIENT);
    ck_assert_uint_eq(res.failed_op, 1);
    ck_assert_int_eq(balance_of(db, 3), 0);
    unit[1] = op_of(OLTP_OP_TRANSFER, 3, 2, 4);
    ck_assert_int_eq(ledger_db_apply(db, unit, 2, &res), 0);
    ck_assert_uint_eq(res.status, OLTP_ST_OK);
    ck_assert_int_eq(res.balance, 6);

    ck_assert_int_eq(ledger_db_history(db, 1, hist, 8, &n), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(hist[0].delta, 5);
    ck_assert_uint_eq(hist[0].other, 2);
    ck_assert_int_eq(hist[1].delta, -50);
    ck_assert_uint_eq(hist[1].other, 2);
    ck_assert_int_eq(hist[2].delta, -30);
    ck_assert_uint_eq(hist[2].other, 0);
    ck_assert_int_eq(hist[3].delta, 100);
    ck_assert_uint_gt(hist[0].txn, hist[1].txn);
    ck_assert_uint_gt(hist[2].txn, hist[3].txn);
    ck_assert_int_eq(ledger_db_history(db, 1, hist, 2, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(hist[1].delta, -50);
    ck_assert_int_eq(ledger_db_history(db, 2, hist, 8, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(hist[0].delta, 4);
    ck_assert_uint_eq(hist[0].other, 3);
    ck_assert_int_eq(ledger_db_history(db, 9, hist, 8, &n), -ENOENT);
    ledger_db_close(db);

    /* Opened again: the schema is there and nothing is lost. */
    db = open_db(true);
    ck_assert_int_eq(ledger_db_totals(db, &sum, &accounts, &negative), 0);
    ck_assert_int_eq(sum, 25 + 49 + 6);
    ck_assert_uint_eq(accounts, 3);
    ck_assert_uint_eq(negative, 0);
    ledger_db_close(db);
}
END_TEST

struct keyed_walk {
    unsigned rows;
    struct ledger_op last;
    int64_t balance_after;
};

static int count_keyed(void *arg, const struct ledger_op *row, int64_t balance_after)
{
    struct keyed_walk *w = arg;

    w->rows++;
    w->last = *row;
    w->balance_after = balance_after;
    return 0;
}

static int stop_walk(void *arg, const struct ledger_op *row, int64_t balance_after)
{
    (void)arg;
    (void)row;
    (void)balance_after;
    return 42;
}

START_TEST(keyed_transfer_is_applied_once)
{
    struct ledger_db *db;
    struct ledger_op t = op_of(OLTP_OP_TRANSFER, 2, 1, 30);
    struct ledger_op other;
    struct keyed_walk w = {0};
    int64_t b;

    if (skip_without_pg())
        return;
    db = open_db(false);
    open_funded(db, 1, 2, 100);
    make_key(t.key, 1, 1);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(apply1(db, t, &b), OLTP_ST_OK);
        ck_assert_int_eq(b, 70);
    }
    ck_assert_int_eq(balance_of(db, 2), 70);
    ck_assert_int_eq(balance_of(db, 1), 130);
    /* The stored result, even once the balance moved on. */
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_WITHDRAW, 2, 0, 70), NULL), OLTP_ST_OK);
    ck_assert_uint_eq(apply1(db, t, &b), OLTP_ST_OK);
    ck_assert_int_eq(b, 70);
    ck_assert_int_eq(balance_of(db, 2), 0);

    other = t;
    other.amount = 31;
    ck_assert_uint_eq(apply1(db, other, NULL), OLTP_ST_KEY_REUSED);
    other = t;
    other.to = 3;
    ck_assert_uint_eq(apply1(db, other, NULL), OLTP_ST_KEY_REUSED);
    other = op_of(OLTP_OP_DEPOSIT, 2, 0, 30);
    memcpy(other.key, t.key, OLTP_KEY_SIZE);
    ck_assert_uint_eq(apply1(db, other, NULL), OLTP_ST_KEY_REUSED);
    ck_assert_int_eq(balance_of(db, 2), 0);

    ck_assert_int_eq(ledger_db_each_keyed(db, count_keyed, &w), 0);
    ck_assert_uint_eq(w.rows, 1);
    ck_assert_uint_eq(w.last.op, OLTP_OP_TRANSFER);
    ck_assert_uint_eq(w.last.account, 2);
    ck_assert_uint_eq(w.last.to, 1);
    ck_assert_int_eq(w.last.amount, 30);
    ck_assert_mem_eq(w.last.key, t.key, OLTP_KEY_SIZE);
    ck_assert_int_eq(w.balance_after, 70);
    ck_assert_int_eq(ledger_db_each_keyed(db, stop_walk, NULL), 42);
    /* The walk stopped early, yet the connection serves the next call. */
    ck_assert_int_eq(balance_of(db, 1), 130);
    ledger_db_close(db);
}
END_TEST

#define GC_THREADS 8
#define GC_UNITS   40

struct gc_arg {
    struct ledger_db *db;
    unsigned id;
    unsigned errors;
};

static void *gc_worker(void *p)
{
    struct gc_arg *a = p;

    for (unsigned i = 0; i < GC_UNITS; i++) {
        struct ledger_op t =
            op_of(OLTP_OP_TRANSFER, 1 + a->id, 1 + (a->id + 1 + i) % GC_THREADS, 1 + i % 7);
        struct ledger_result res;

        if (t.to == t.account)
            t.to = 1 + (t.to % GC_THREADS);
        make_key(t.key, a->id, i);
        if (ledger_db_apply(a->db, &t, 1, &res) != 0 || res.status != OLTP_ST_OK)
            a->errors++;
    }
    return NULL;
}

START_TEST(group_commit_of_8_threads_keeps_the_sum_with_fewer_commits)
{
    struct ledger_db *db;
    struct gc_arg args[GC_THREADS];
    pthread_t th[GC_THREADS];
    struct ledger_db_stats st;
    struct ledger_db_stats before;
    struct keyed_walk w = {0};
    int64_t sum;
    uint64_t accounts;
    uint64_t negative;

    if (skip_without_pg())
        return;
    db = open_db(true);
    open_funded(db, 1, GC_THREADS, 1000);
    ledger_db_stats(db, &before);
    for (unsigned i = 0; i < GC_THREADS; i++) {
        args[i] = (struct gc_arg){.db = db, .id = i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, gc_worker, &args[i]), 0);
    }
    for (unsigned i = 0; i < GC_THREADS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_uint_eq(args[i].errors, 0);
    }
    ledger_db_stats(db, &st);
    ck_assert_uint_eq(st.units - before.units, GC_THREADS * GC_UNITS);
    ck_assert_uint_lt(st.commits - before.commits, st.units - before.units);
    ck_assert_uint_gt(st.max_batch, 1);
    ck_assert_int_eq(ledger_db_totals(db, &sum, &accounts, &negative), 0);
    ck_assert_int_eq(sum, GC_THREADS * 1000);
    ck_assert_uint_eq(accounts, GC_THREADS);
    ck_assert_uint_eq(negative, 0);
    ck_assert_int_eq(ledger_db_each_keyed(db, count_keyed, &w), 0);
    ck_assert_uint_eq(w.rows, GC_THREADS * GC_UNITS);
    ledger_db_close(db);
}
END_TEST

/*
 * Two handles on one database, as two ledgers, transfer between the same
 * accounts in opposite directions at once. Variant 0: single transfers,
 * one transaction each. Variants 1 and 2 (grouped): each unit moves money
 * between two pairs, the two handles take the pairs in opposite orders, so
 * locking account by account as the ops come would take 1,2 then 3,4
 * against 3,4 then 1,2 and deadlock, and the reruns could run out under
 * load (docs/design/oltp.md). Every transaction locks all its accounts in increasing id order
 * first (ledger_db_internal.h, lock), so none deadlocks, nothing is rerun
 * and no caller sees an error.
 */
#define CROSS_THREADS 2 /* per handle */
#define CROSS_UNITS   25

struct cross_arg {
    struct ledger_db *db;
    bool reverse;
    bool pairs;
    unsigned errors;
};

static void *cross_worker(void *p)
{
    struct cross_arg *a = p;

    for (unsigned i = 0; i < CROSS_UNITS; i++) {
        struct ledger_op u[2];
        struct ledger_result res;

        if (!a->reverse) {
            u[0] = op_of(OLTP_OP_TRANSFER, 1, 2, 3);
            u[1] = op_of(OLTP_OP_TRANSFER, 3, 4, 5);
        } else {
            u[0] = op_of(OLTP_OP_TRANSFER, 2, 1, 3);
            u[1] = op_of(OLTP_OP_TRANSFER, 4, 3, 5);
            if (a->pairs) {
                struct ledger_op t = u[0];

                u[0] = u[1];
                u[1] = t;
            }
        }
        if (ledger_db_apply(a->db, u, a->pairs ? 2 : 1, &res) != 0 || res.status != OLTP_ST_OK)
            a->errors++;
    }
    return NULL;
}

START_TEST(two_handles_cross_transfers_without_errors)
{
    bool pairs = _i > 0;
    struct ledger_db *db[2];
    struct cross_arg args[2 * CROSS_THREADS];
    pthread_t th[2 * CROSS_THREADS];
    struct ledger_db_stats st[2];

    if (skip_without_pg())
        return;
    db[0] = open_db(_i == 2);
    db[1] = open_db(_i == 2);
    open_funded(db[0], 1, 4, 100000);
    ledger_db_stats(db[0], &st[0]);
    ck_assert_uint_eq(st[0].retries, 0);
    for (unsigned i = 0; i < 2 * CROSS_THREADS; i++) {
        args[i] = (struct cross_arg){.db = db[i % 2], .reverse = i % 2 == 1, .pairs = pairs};
        ck_assert_int_eq(pthread_create(&th[i], NULL, cross_worker, &args[i]), 0);
    }
    for (unsigned i = 0; i < 2 * CROSS_THREADS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_uint_eq(args[i].errors, 0);
    }
    /* Every unit applied, each way the same count: back where it began. */
    for (uint64_t a = 1; a <= 4; a++)
        ck_assert_int_eq(balance_of(db[1], a), 100000);
    ledger_db_stats(db[0], &st[0]);
    ledger_db_stats(db[1], &st[1]);
    ck_assert_uint_eq(st[0].units + st[1].units, 2 * CROSS_THREADS * CROSS_UNITS + 8);
    ck_assert_uint_eq(st[0].retries + st[1].retries, 0);
    fprintf(stderr, "two_handles_cross_transfers (variant %d): %llu reruns\n", _i,
            (unsigned long long)(st[0].retries + st[1].retries));
    ledger_db_close(db[0]);
    ledger_db_close(db[1]);
}
END_TEST

/* Both handles apply the same keyed transfers at once (released together
 * by a barrier, round by round): each is applied once, both callers see
 * it succeed with the same balance. */
#define SAME_ROUNDS 40

struct same_arg {
    struct ledger_db *db;
    pthread_barrier_t *barrier;
    int64_t balances[SAME_ROUNDS];
    unsigned errors;
};

static void *same_worker(void *p)
{
    struct same_arg *a = p;

    for (unsigned r = 0; r < SAME_ROUNDS; r++) {
        struct ledger_op t = op_of(OLTP_OP_TRANSFER, 1 + r % 2, 2 - r % 2, 1 + r);
        struct ledger_result res;

        make_key(t.key, 7, r);
        pthread_barrier_wait(a->barrier);
        if (ledger_db_apply(a->db, &t, 1, &res) != 0 || res.status != OLTP_ST_OK)
            a->errors++;
        a->balances[r] = res.balance;
    }
    return NULL;
}

START_TEST(same_key_through_two_handles_is_applied_once)
{
    struct ledger_db *db[2];
    pthread_barrier_t barrier;
    struct same_arg args[2];
    pthread_t th[2];
    struct keyed_walk w = {0};
    int64_t moved = 0;

    if (skip_without_pg())
        return;
    db[0] = open_db(false);
    db[1] = open_db(true);
    open_funded(db[0], 1, 2, 10000);
    pthread_barrier_init(&barrier, NULL, 2);
    for (unsigned i = 0; i < 2; i++) {
        args[i] = (struct same_arg){.db = db[i], .barrier = &barrier};
        ck_assert_int_eq(pthread_create(&th[i], NULL, same_worker, &args[i]), 0);
    }
    for (unsigned i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        ck_assert_uint_eq(args[i].errors, 0);
    }
    pthread_barrier_destroy(&barrier);
    for (unsigned r = 0; r < SAME_ROUNDS; r++) {
        ck_assert_int_eq(args[0].balances[r], args[1].balances[r]);
        moved += r % 2 == 0 ? (int64_t)(1 + r) : -(int64_t)(1 + r);
    }
    ck_assert_int_eq(balance_of(db[0], 1), 10000 - moved);
    ck_assert_int_eq(balance_of(db[1], 2), 10000 + moved);
    ck_assert_int_eq(ledger_db_each_keyed(db[1], count_keyed, &w), 0);
    ck_assert_uint_eq(w.rows, SAME_ROUNDS);
    ledger_db_close(db[0]);
    ledger_db_close(db[1]);
}
END_TEST

/* Ledgers that start at once all create the schema: each open succeeds
 * (concurrent CREATE TABLE IF NOT EXISTS alone can fail on the catalog). */
#define OPENERS 4

struct open_arg {
    const char *url;
    pthread_barrier_t *barrier;
    struct ledger_db *db;
    int err;
};

static void *opener(void *p)
{
    struct open_arg *a = p;
    struct ledger_db_config cfg = {.url = a->url};

    pthread_barrier_wait(a->barrier);
    a->err = ledger_db_open(&a->db, &cfg);
    return NULL;
}

START_TEST(ledgers_opening_at_once_all_get_the_schema)
{
    struct open_arg args[OPENERS];
    pthread_t th[OPENERS];
    pthread_barrier_t barrier;

    if (skip_without_pg())
        return;
    pthread_barrier_init(&barrier, NULL, OPENERS);
    for (unsigned i = 0; i < OPENERS; i++) {
        args[i] = (struct open_arg){.url = pg.url, .barrier = &barrier};
        ck_assert_int_eq(pthread_create(&th[i], NULL, opener, &args[i]), 0);
    }
    for (unsigned i = 0; i < OPENERS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&barrier);
    for (unsigned i = 0; i < OPENERS; i++)
        ck_assert_int_eq(args[i].err, 0);
    ck_assert_uint_eq(apply1(args[0].db, op_of(OLTP_OP_OPEN, 1, 0, 0), NULL), OLTP_ST_OK);
    ck_assert_uint_eq(apply1(args[1].db, op_of(OLTP_OP_OPEN, 1, 0, 0), NULL), OLTP_ST_EXISTS);
    for (unsigned i = 0; i < OPENERS; i++)
        ledger_db_close(args[i].db);
}
END_TEST

/* What the server committed survives its crash; the ledger's connections
 * fail while it is down and connect again once it is back. */
START_TEST(a_killed_server_fails_calls_then_serves_again_after_restart)
{
    struct ledger_db *db;
    struct ledger_result res;
    struct ledger_op d = op_of(OLTP_OP_DEPOSIT, 1, 0, 5);
    int64_t b;

    if (skip_without_pg())
        return;
    db = open_db(_i == 1);
    open_funded(db, 1, 1, 10);
    ck_assert_int_eq(cr_test_pg_kill(&pg), 0);
    ck_assert_int_eq(ledger_db_apply(db, &d, 1, &res), -EIO);
    ck_assert_uint_eq(res.status, OLTP_ST_INTERNAL);
    ck_assert_int_eq(ledger_db_balance(db, 1, &b), -EIO);
    ck_assert_int_eq(cr_test_pg_restart(&pg), 0);
    ck_assert_uint_eq(apply1(db, d, &b), OLTP_ST_OK);
    ck_assert_int_eq(b, 15);
    ck_assert_int_eq(balance_of(db, 1), 15);
    ledger_db_close(db);
}
END_TEST

Suite *ledger_db_pg_suite(void);

Suite *ledger_db_pg_suite(void)
{
    Suite *s = suite_create("ledger_db_pg");
    TCase *tc = tcase_create("postgresql");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, TEST_TIMEOUT);
    tcase_add_test(tc, harness_starts_a_server_and_stop_removes_it);
    tcase_add_test(tc, ops_report_their_statuses_and_units_are_atomic);
    tcase_add_test(tc, keyed_transfer_is_applied_once);
    tcase_add_test(tc, group_commit_of_8_threads_keeps_the_sum_with_fewer_commits);
    tcase_add_loop_test(tc, two_handles_cross_transfers_without_errors, 0, 3);
    tcase_add_test(tc, same_key_through_two_handles_is_applied_once);
    tcase_add_test(tc, ledgers_opening_at_once_all_get_the_schema);
    tcase_add_loop_test(tc, a_killed_server_fails_calls_then_serves_again_after_restart, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
