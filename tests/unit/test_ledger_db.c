/*
 * test_ledger_db.c - the ledger's database (apps/oltp/ledger_db.c over
 * ledger_db_sqlite.c): the schema and reopening, every op's statuses, units
 * that fail as a whole, idempotency keys, a busy database retried and then
 * failing with -EIO, connections reused across threads, group commit
 * forming batches with many threads (and not disturbing a batch's other
 * units when one fails), ledger_db_apply_batch (each unit its own result
 * and atomicity, in order; n bounded; batches beside single callers within
 * max_batch), and acknowledged units surviving a SIGKILL of the
 * process that applied them. Each test uses a fresh database file in its
 * own directory below a mkdtemp directory that the case's unchecked fixture
 * removes, pass or fail.
 * The "postgresql" case runs the tests of ledger_db.c's own logic (group
 * commit, savepoints, reruns) again over ledger_db_pg.c, each in a fresh
 * database of a throwaway server (tests/support/pg.h) that its unchecked
 * fixture starts and stops.
 */
#include "../../apps/oltp/ledger_db.h"
#include "../support/pg.h"
#include "../support/support.h"

#include <cabrank/log.h>

#include <check.h>
#ifdef CR_HAVE_LIBPQ
#include <libpq-fe.h>
#endif
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TEST_TIMEOUT 60 /* seconds, times CK_TIMEOUT_MULTIPLIER */

/* Set by the unchecked fixture in the runner, inherited by each test. */
static char base_dir[64];

static void make_base_dir(void)
{
    strcpy(base_dir, "/tmp/ledger_db_XXXXXX");
    if (mkdtemp(base_dir) == NULL) {
        perror("mkdtemp");
        abort();
    }
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void remove_base_dir(void)
{
    nftw(base_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ms scaled for slow (sanitizer) builds, for waits that expect an event. */
static int tmo(int ms)
{
    const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
    int k = m != NULL ? atoi(m) : 1;

    return ms * (k > 1 ? (k < 10 ? k : 10) : 1);
}

/* A fresh database path in its own directory. */
static void fresh_path(char *path, size_t len)
{
    char dir[128];

    snprintf(dir, sizeof(dir), "%s/t_XXXXXX", base_dir);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, len, "%s/ledger.db", dir);
}

/* The "postgresql" case's server: pg_err is 0 while it runs; set in the
 * runner by the case's unchecked fixture, inherited by its tests. */
static bool pg_mode;
static int pg_err;

#ifdef CR_HAVE_LIBPQ
static struct cr_test_pg pg;

static void start_pg(void)
{
    pg_mode = true;
    pg_err = cr_test_pg_start(&pg);
}

static void stop_pg(void)
{
    if (pg_err == 0)
        cr_test_pg_stop(&pg);
    pg_mode = false;
}

/* A new database on the server, named for this test's process. */
static void fresh_pg_url(char *url, size_t len)
{
    char sql[64];
    char *slash = strrchr(pg.url, '/');
    PGconn *c = PQconnectdb(pg.url);
    PGresult *r;

    ck_assert_ptr_nonnull(slash);
    ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
    snprintf(sql, sizeof(sql), "CREATE DATABASE t_%d", (int)getpid());
    r = PQexec(c, sql);
    ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    snprintf(url, len, "%.*s/t_%d", (int)(slash - pg.url), pg.url, (int)getpid());
}
#endif /* CR_HAVE_LIBPQ */

/*
 * A fresh database: a file, or in the "postgresql" case a new database.
 * False when the case cannot run (PostgreSQL is not installed): the test
 * then passes without testing anything, and says so.
 */
static bool fresh_url(char *url, size_t len)
{
    if (!pg_mode) {
        fresh_path(url, len);
        return true;
    }
    if (pg_err == -ENOENT) {
        fprintf(stderr, "ledger_db: PostgreSQL is not installed: test skipped\n");
        return false;
    }
    ck_assert_msg(pg_err == 0, "PostgreSQL did not start: %s", strerror(-pg_err));
#ifdef CR_HAVE_LIBPQ
    fresh_pg_url(url, len);
#endif
    return true;
}

static struct ledger_db *open_db(const char *path, bool group_commit)
{
    struct ledger_db_config cfg = {.url = path, .group_commit = group_commit};
    struct ledger_db *db = NULL;

    ck_assert_int_eq(ledger_db_open(&db, &cfg), 0);
    ck_assert_ptr_nonnull(db);
    return db;
}

static void key_of(uint8_t key[OLTP_KEY_SIZE], uint32_t a, uint32_t b)
{
    memset(key, 0, OLTP_KEY_SIZE);
    memcpy(key, &a, sizeof(a));
    memcpy(key + 4, &b, sizeof(b));
    key[15] = 0xa5; /* never the all-zero "no key" */
}

static struct ledger_op op_of(uint8_t op, uint64_t account, uint64_t to, int64_t amount)
{
    struct ledger_op o = {.op = op, .account = account, .to = to, .amount = amount};

    return o;
}

/* Applies one op as its own unit; returns its status, *balance when OK. */
static uint16_t apply1(struct ledger_db *db, struct ledger_op op, int64_t *balance)
{
    struct ledger_result res;

    ck_assert_int_eq(ledger_db_apply(db, &op, 1, &res), 0);
    if (balance != NULL)
        *balance = res.balance;
    return res.status;
}

static int64_t balance_of(struct ledger_db *db, uint64_t account)
{
    int64_t bal = -1;

    ck_assert_int_eq(ledger_db_balance(db, account, &bal), 0);
    return bal;
}

static unsigned history_len(struct ledger_db *db, uint64_t account)
{
    static struct oltp_hist h[OLTP_MAX_HISTORY];
    unsigned n = 0;

    ck_assert_int_eq(ledger_db_history(db, account, h, OLTP_MAX_HISTORY, &n), 0);
    return n;
}

/* Opens accounts 1..count with initial each, in one unit. */
static void open_accounts(struct ledger_db *db, unsigned count, int64_t initial)
{
    struct ledger_op ops[OLTP_MAX_SESSION_OPS];
    struct ledger_result res;
    size_t n = 0;

    ck_assert_uint_le(count * 2, OLTP_MAX_SESSION_OPS);
    for (unsigned a = 1; a <= count; a++) {
        ops[n++] = op_of(OLTP_OP_OPEN, a, 0, 0);
        ops[n++] = op_of(OLTP_OP_DEPOSIT, a, 0, initial);
    }
    ck_assert_int_eq(ledger_db_apply(db, ops, n, &res), 0);
    ck_assert_uint_eq(res.status, OLTP_ST_OK);
}

START_TEST(open_creates_the_schema_and_reopen_keeps_the_data)
{
    char path[256];
    char url[300];
    struct ledger_db *db;
    int64_t sum = -1;
    uint64_t accounts = 1;
    uint64_t negative = 1;
    int64_t bal;

    fresh_path(path, sizeof(path));
    db = open_db(path, false);
    ck_assert_int_eq(ledger_db_totals(db, &sum, &accounts, &negative), 0);
    ck_assert_int_eq(sum, 0);
    ck_assert_uint_eq(accounts, 0);
    ck_assert_uint_eq(negative, 0);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_OPEN, 7, 0, 0), NULL), OLTP_ST_OK);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_DEPOSIT, 7, 0, 1234), &bal), OLTP_ST_OK);
    ck_assert_int_eq(bal, 1234);
    ledger_db_close(db);

    /* The same file through the "sqlite:" form, and with group commit. */
    snprintf(url, sizeof(url), "sqlite:%s", path);
    db = open_db(url, true);
    ck_assert_int_eq(balance_of(db, 7), 1234);
    ck_assert_int_eq(ledger_db_totals(db, &sum, &accounts, &negative), 0);
    ck_assert_int_eq(sum, 1234);
    ck_assert_uint_eq(accounts, 1);
    ck_assert_uint_eq(negative, 0);
    ck_assert_uint_eq(history_len(db, 7), 1);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_OPEN, 7, 0, 0), NULL), OLTP_ST_EXISTS);
    ledger_db_close(db);
    ledger_db_close(NULL);
}
END_TEST

START_TEST(open_rejects_bad_urls)
{
    static const char *const invalid[] = {"", "sqlite:", "mysql://127.0.0.1/ledger"};
    struct ledger_db_config cfg = {0};
    struct ledger_db *db = (void *)1;
    char path[256];
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    int err;

    ck_assert_int_ge(devnull, 0);
    ck_assert_int_eq(ledger_db_open(&db, &cfg), -EINVAL);
    ck_assert_ptr_null(db);
    for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
        cfg.url = invalid[i];
        db = (void *)1;
        ck_assert_int_eq(ledger_db_open(&db, &cfg), -EINVAL);
        ck_assert_ptr_null(db);
    }
    /* A directory that does not exist: SQLite refuses (and logs why). */
    fresh_path(path, sizeof(path));
    strcat(path, ".d/missing/ledger.db");
    cfg.url = path;
    cr_log_set_fd(devnull);
    err = ledger_db_open(&db, &cfg);
    cr_log_set_fd(-1);
    ck_assert_int_eq(err, -EIO);
    ck_assert_ptr_null(db);
    /* Port 1 on loopback refuses at once: -EIO with libpq, else -ENOSYS. */
    cfg.url = "postgresql://127.0.0.1:1/ledger?connect_timeout=2";
    cr_log_set_fd(devnull);
    err = ledger_db_open(&db, &cfg);
    cr_log_set_fd(-1);
#ifdef CR_HAVE_LIBPQ
    ck_assert_msg(err == -EIO, "postgresql url: %d", err);
#else
    ck_assert_msg(err == -ENOSYS, "postgresql url: %d", err);
#endif
    ck_assert_ptr_null(db);
    close(devnull);
}
END_TEST

START_TEST(each_op_returns_its_status_and_balance)
{
    char path[256];
    struct ledger_db *db;
    struct oltp_hist h[OLTP_MAX_HISTORY];
    unsigned n;
    int64_t bal;

    if (!fresh_url(path, sizeof(path)))
        return;
    db = open_db(path, _i == 1);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_OPEN, 1, 0, 0), &bal), OLTP_ST_OK);
    ck_assert_int_eq(bal, 0);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_OPEN, 1, 0, 0), NULL), OLTP_ST_EXISTS);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_DEPOSIT, 1, 0, 100), &bal), OLTP_ST_OK);
    ck_assert_int_eq(bal, 100);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_WITHDRAW, 1, 0, 30), &bal), OLTP_ST_OK);
    ck_assert_int_eq(bal, 70);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_WITHDRAW, 1, 0, 71), NULL), OLTP_ST_INSUFFICIENT);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_DEPOSIT, 9, 0, 5), NULL), OLTP_ST_NO_ACCOUNT);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_WITHDRAW, 9, 0, 5), NULL), OLTP_ST_NO_ACCOUNT);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_TRANSFER, 1, 2, 5), NULL), OLTP_ST_NO_ACCOUNT);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_TRANSFER, 9, 1, 5), NULL), OLTP_ST_NO_ACCOUNT);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_OPEN, 2, 0, 0), NULL), OLTP_ST_OK);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_TRANSFER, 1, 2, 50), &bal), OLTP_ST_OK);
    ck_assert_int_eq(bal, 20);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_TRANSFER, 1, 2, 21), NULL), OLTP_ST_INSUFFICIENT);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_TRANSFER, 1, 2, 20), &bal), OLTP_ST_OK);
    ck_assert_int_eq(bal, 0);
    /* Values the database never sees. */
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_DEPOSIT, 1, 0, 0), NULL), OLTP_ST_BAD_AMOUNT);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_TRANSFER, 2, 2, 1), NULL), OLTP_ST_BAD_ACCOUNT);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_OPEN, 0, 0, 0), NULL), OLTP_ST_BAD_ACCOUNT);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_BALANCE, 1, 0, 0), NULL), OLTP_ST_UNKNOWN_OP);

    ck_assert_int_eq(balance_of(db, 1), 0);
    ck_assert_int_eq(balance_of(db, 2), 70);
    ck_assert_int_eq(ledger_db_balance(db, 3, &bal), -ENOENT);

    /* Newest first; a transfer is - for its from, + for its to. */
    ck_assert_int_eq(ledger_db_history(db, 1, h, OLTP_MAX_HISTORY, &n), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(h[0].delta, -20);
    ck_assert_uint_eq(h[0].other, 2);
    ck_assert_int_eq(h[1].delta, -50);
    ck_assert_uint_eq(h[1].other, 2);
    ck_assert_int_eq(h[2].delta, -30);
    ck_assert_uint_eq(h[2].other, 0);
    ck_assert_int_eq(h[3].delta, 100);
    ck_assert_uint_eq(h[3].other, 0);
    for (unsigned i = 1; i < n; i++)
        ck_assert_uint_gt(h[i - 1].txn, h[i].txn);
    ck_assert_int_eq(ledger_db_history(db, 2, h, OLTP_MAX_HISTORY, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(h[0].delta, 20);
    ck_assert_uint_eq(h[0].other, 1);
    ck_assert_int_eq(h[1].delta, 50);
    ck_assert_int_eq(ledger_db_history(db, 1, h, 2, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(h[1].delta, -50);
    ck_assert_int_eq(ledger_db_history(db, 3, h, OLTP_MAX_HISTORY, &n), -ENOENT);
    ck_assert_uint_eq(n, 0);
    ledger_db_close(db);
}
END_TEST

START_TEST(a_failing_op_rolls_back_its_whole_unit)
{
    char path[256];
    struct ledger_db *db;
    struct ledger_op ops[3];
    struct ledger_result res;

    if (!fresh_url(path, sizeof(path)))
        return;
    db = open_db(path, _i == 1);
    open_accounts(db, 2, 100);
    ops[0] = op_of(OLTP_OP_DEPOSIT, 1, 0, 10);
    ops[1] = op_of(OLTP_OP_TRANSFER, 1, 2, 60);
    ops[2] = op_of(OLTP_OP_WITHDRAW, 2, 0, 1000);
    ck_assert_int_eq(ledger_db_apply(db, ops, 3, &res), 0);
    ck_assert_uint_eq(res.status, OLTP_ST_INSUFFICIENT);
    ck_assert_uint_eq(res.failed_op, 2);
    ck_assert_int_eq(balance_of(db, 1), 100);
    ck_assert_int_eq(balance_of(db, 2), 100);
    ck_assert_uint_eq(history_len(db, 1), 1); /* the initial deposit only */
    ck_assert_uint_eq(history_len(db, 2), 1);

    /* The same unit without its failing op: applied whole, last balance. */
    ck_assert_int_eq(ledger_db_apply(db, ops, 2, &res), 0);
    ck_assert_uint_eq(res.status, OLTP_ST_OK);
    ck_assert_int_eq(res.balance, 50);
    ck_assert_int_eq(balance_of(db, 2), 160);
    ledger_db_close(db);
}
END_TEST

struct key_count {
    unsigned rows;
    struct ledger_op last;
    int64_t balance_after;
};

static int count_row(void *arg, const struct ledger_op *row, int64_t balance_after)
{
    struct key_count *kc = arg;

    kc->rows++;
    kc->last = *row;
    kc->balance_after = balance_after;
    return 0;
}

static int stop_at_first(void *arg, const struct ledger_op *row, int64_t balance_after)
{
    (void)row;
    (void)balance_after;
    ++*(unsigned *)arg;
    return 42;
}

START_TEST(a_keyed_op_is_applied_once)
{
    char path[256];
    struct ledger_db *db;
    struct ledger_op t = op_of(OLTP_OP_TRANSFER, 1, 2, 40);
    struct ledger_op d = op_of(OLTP_OP_DEPOSIT, 2, 0, 5);
    struct ledger_op other;
    struct key_count kc = {0};
    unsigned calls = 0;
    int64_t bal;

    if (!fresh_url(path, sizeof(path)))
        return;
    db = open_db(path, _i == 1);
    open_accounts(db, 2, 100);
    key_of(t.key, 1, 1);
    ck_assert_uint_eq(apply1(db, t, &bal), OLTP_ST_OK);
    ck_assert_int_eq(bal, 60);
    ck_assert_uint_eq(apply1(db, t, &bal), OLTP_ST_OK);
    ck_assert_int_eq(bal, 60);
    ck_assert_int_eq(balance_of(db, 1), 60);
    ck_assert_int_eq(balance_of(db, 2), 140);

    /* The key with other arguments. */
    other = t;
    other.amount = 41;
    ck_assert_uint_eq(apply1(db, other, NULL), OLTP_ST_KEY_REUSED);
    other = t;
    other.to = 3;
    ck_assert_uint_eq(apply1(db, other, NULL), OLTP_ST_KEY_REUSED);
    other = t;
    other.op = OLTP_OP_WITHDRAW;
    ck_assert_uint_eq(apply1(db, other, NULL), OLTP_ST_KEY_REUSED);
    ck_assert_int_eq(balance_of(db, 1), 60);

    /* Without a key a deposit is applied every time. */
    ck_assert_uint_eq(apply1(db, d, NULL), OLTP_ST_OK);
    ck_assert_uint_eq(apply1(db, d, &bal), OLTP_ST_OK);
    ck_assert_int_eq(bal, 150);

    ck_assert_int_eq(ledger_db_each_keyed(db, count_row, &kc), 0);
    ck_assert_uint_eq(kc.rows, 1);
    ck_assert_uint_eq(kc.last.op, OLTP_OP_TRANSFER);
    ck_assert_uint_eq(kc.last.account, 1);
    ck_assert_uint_eq(kc.last.to, 2);
    ck_assert_int_eq(kc.last.amount, 40);
    ck_assert_mem_eq(kc.last.key, t.key, OLTP_KEY_SIZE);
    ck_assert_int_eq(kc.balance_after, 60);
    ck_assert_int_eq(ledger_db_each_keyed(db, stop_at_first, &calls), 42);
    ck_assert_uint_eq(calls, 1);
    ledger_db_close(db);
}
END_TEST

struct holder {
    sqlite3 *hold;
    struct ledger_db *db;
    uint64_t retries; /* release once the db has retried more than this */
};

static void *release_when_retried(void *p)
{
    struct holder *h = p;
    struct ledger_db_stats st;
    uint64_t deadline = cr_test_now_ms() + (uint64_t)tmo(10000);

    do {
        usleep(1000);
        ledger_db_stats(h->db, &st);
    } while (st.retries <= h->retries && cr_test_now_ms() < deadline);
    return (void *)(intptr_t)sqlite3_exec(h->hold, "ROLLBACK", NULL, NULL, NULL);
}

START_TEST(a_busy_database_is_retried_and_then_fails_with_eio)
{
    char path[256];
    struct ledger_db_config cfg = {.url = path, .group_commit = _i == 1, .busy_timeout_ms = 100};
    struct ledger_db *db;
    struct ledger_op dep = op_of(OLTP_OP_DEPOSIT, 1, 0, 5);
    struct ledger_result res;
    struct ledger_db_stats st;
    struct holder h;
    pthread_t th;
    void *ret;
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    int err;

    fresh_path(path, sizeof(path));
    ck_assert_int_eq(ledger_db_open(&db, &cfg), 0);
    open_accounts(db, 1, 100);
    /* Another connection holds the write lock: every try meets BUSY. */
    ck_assert_int_eq(sqlite3_open(path, &h.hold), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h.hold, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    cr_log_set_fd(devnull);
    err = ledger_db_apply(db, &dep, 1, &res);
    cr_log_set_fd(-1);
    ck_assert_int_eq(err, -EIO);
    ck_assert_uint_eq(res.status, OLTP_ST_INTERNAL);
    ledger_db_stats(db, &st);
    ck_assert_uint_ge(st.retries, 10);
    ck_assert_uint_eq(st.units, 1);

    /* Released while the unit is being retried: it goes through. */
    h.db = db;
    h.retries = st.retries;
    ck_assert_int_eq(pthread_create(&th, NULL, release_when_retried, &h), 0);
    ck_assert_int_eq(ledger_db_apply(db, &dep, 1, &res), 0);
    ck_assert_uint_eq(res.status, OLTP_ST_OK);
    ck_assert_int_eq(res.balance, 105);
    ck_assert_int_eq(pthread_join(th, &ret), 0);
    ck_assert_int_eq((intptr_t)ret, SQLITE_OK);
    ledger_db_stats(db, &st);
    ck_assert_uint_gt(st.retries, h.retries);
    ck_assert_uint_eq(st.units, 2);
    ck_assert_int_eq(balance_of(db, 1), 105);
    sqlite3_close(h.hold);
    ledger_db_close(db);
    close(devnull);
}
END_TEST

static unsigned open_fds(void)
{
    char path[64];
    unsigned n = 0;

    for (int fd = 0; fd < 4096; fd++) {
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        if (access(path, F_OK) == 0)
            n++;
    }
    return n;
}

static void *read_balance_once(void *p)
{
    int64_t bal;

    return (void *)(intptr_t)ledger_db_balance(p, 1, &bal);
}

START_TEST(a_new_thread_reuses_the_connection_of_an_exited_one)
{
    char path[256];
    struct ledger_db *db;
    unsigned before;

    fresh_path(path, sizeof(path));
    db = open_db(path, false);
    open_accounts(db, 1, 1);
    /* The first thread opens a second connection (files and WAL index). */
    for (int i = 0; i < 101; i++) {
        pthread_t th;
        void *ret;

        ck_assert_int_eq(pthread_create(&th, NULL, read_balance_once, db), 0);
        ck_assert_int_eq(pthread_join(th, &ret), 0);
        ck_assert_int_eq((intptr_t)ret, 0);
        if (i == 0)
            before = open_fds();
    }
    ck_assert_uint_eq(open_fds(), before);
    ledger_db_close(db);
}
END_TEST

#define GC_THREADS   16
#define GC_TRANSFERS 50
#define GC_ACCOUNTS  32
#define GC_INITIAL   1000000

struct gc_arg {
    struct ledger_db *db;
    uint32_t id;
    unsigned ok;
};

static void *gc_transfers(void *p)
{
    struct gc_arg *a = p;
    unsigned seed = a->id * 7919u + 1;

    for (uint32_t i = 0; i < GC_TRANSFERS; i++) {
        uint64_t from = 1 + (uint64_t)rand_r(&seed) % GC_ACCOUNTS;
        uint64_t to = 1 + (from + (uint64_t)rand_r(&seed) % (GC_ACCOUNTS - 1)) % GC_ACCOUNTS;
        struct ledger_op op = op_of(OLTP_OP_TRANSFER, from, to, 1 + rand_r(&seed) % 100);
        struct ledger_result res;

        key_of(op.key, a->id, i);
        if (ledger_db_apply(a->db, &op, 1, &res) == 0 && res.status == OLTP_ST_OK)
            a->ok++;
    }
    return NULL;
}

START_TEST(group_commit_shares_commits_between_threads)
{
    bool group = _i == 1;
    char path[256];
    struct ledger_db *db;
    pthread_t th[GC_THREADS];
    struct gc_arg args[GC_THREADS];
    struct ledger_db_stats st;
    int64_t sum;
    uint64_t accounts;
    uint64_t negative;

    if (!fresh_url(path, sizeof(path)))
        return;
    db = open_db(path, group);
    open_accounts(db, GC_ACCOUNTS, GC_INITIAL);
    for (uint32_t t = 0; t < GC_THREADS; t++) {
        args[t] = (struct gc_arg){.db = db, .id = t + 1};
        ck_assert_int_eq(pthread_create(&th[t], NULL, gc_transfers, &args[t]), 0);
    }
    for (int t = 0; t < GC_THREADS; t++) {
        ck_assert_int_eq(pthread_join(th[t], NULL), 0);
        ck_assert_uint_eq(args[t].ok, GC_TRANSFERS);
    }
    ck_assert_int_eq(ledger_db_totals(db, &sum, &accounts, &negative), 0);
    ck_assert_int_eq(sum, (int64_t)GC_ACCOUNTS * GC_INITIAL);
    ck_assert_uint_eq(accounts, GC_ACCOUNTS);
    ck_assert_uint_eq(negative, 0);
    ledger_db_stats(db, &st);
    ck_assert_uint_eq(st.units, 1 + GC_THREADS * GC_TRANSFERS);
    if (group) {
        ck_assert_uint_lt(st.commits, st.units);
        ck_assert_uint_gt(st.max_batch, 1);
    } else {
        ck_assert_uint_eq(st.commits, st.units);
        ck_assert_uint_eq(st.max_batch, 1);
    }
    ledger_db_close(db);
}
END_TEST

#define MIX_THREADS 8
#define MIX_ROUNDS  15

struct mix_arg {
    struct ledger_db *db;
    uint64_t a;
    uint64_t b;
    int64_t want_a; /* the balances this thread's own statuses imply */
    int64_t want_b;
    unsigned wrong; /* results that differ from the model */
};

static void mix_apply(struct mix_arg *m, const struct ledger_op *ops, size_t n, uint16_t want)
{
    struct ledger_result res;

    if (ledger_db_apply(m->db, ops, n, &res) != 0 || res.status != want)
        m->wrong++;
}

/* a and b are this thread's alone, so its model of them is exact. */
static void *mix_units(void *p)
{
    struct mix_arg *m = p;

    for (int r = 0; r < MIX_ROUNDS; r++) {
        struct ledger_op ops[2];
        bool ok;

        /* A transfer that overdraws every other round or so. */
        ops[0] = op_of(OLTP_OP_TRANSFER, m->a, m->b, 30);
        ok = m->want_a >= 30;
        mix_apply(m, ops, 1, ok ? OLTP_ST_OK : OLTP_ST_INSUFFICIENT);
        if (ok) {
            m->want_a -= 30;
            m->want_b += 30;
        }
        ops[0] = op_of(OLTP_OP_TRANSFER, m->b, m->a, 70);
        ok = m->want_b >= 70;
        mix_apply(m, ops, 1, ok ? OLTP_ST_OK : OLTP_ST_INSUFFICIENT);
        if (ok) {
            m->want_b -= 70;
            m->want_a += 70;
        }
        /* Always fails at its second op: its first must not stay. */
        ops[0] = op_of(OLTP_OP_DEPOSIT, m->a, 0, 5);
        ops[1] = op_of(OLTP_OP_WITHDRAW, m->b, 0, 1000000);
        mix_apply(m, ops, 2, OLTP_ST_INSUFFICIENT);
        /* Always succeeds. */
        ops[0] = op_of(OLTP_OP_DEPOSIT, m->b, 0, 1);
        mix_apply(m, ops, 1, OLTP_ST_OK);
        m->want_b += 1;
    }
    return NULL;
}

START_TEST(a_failing_unit_does_not_disturb_its_batch)
{
    char path[256];
    struct ledger_db *db;
    pthread_t th[MIX_THREADS];
    struct mix_arg args[MIX_THREADS];
    struct ledger_op ops[OLTP_MAX_SESSION_OPS];
    struct ledger_result res;
    struct ledger_db_stats st;
    size_t n = 0;

    if (!fresh_url(path, sizeof(path)))
        return;
    db = open_db(path, true);
    for (uint64_t acc = 1; acc <= 2 * MIX_THREADS; acc++)
        ops[n++] = op_of(OLTP_OP_OPEN, acc, 0, 0);
    for (int t = 0; t < MIX_THREADS; t++)
        ops[n++] = op_of(OLTP_OP_DEPOSIT, 2 * (uint64_t)t + 1, 0, 100);
    ck_assert_int_eq(ledger_db_apply(db, ops, n, &res), 0);
    ck_assert_uint_eq(res.status, OLTP_ST_OK);
    for (int t = 0; t < MIX_THREADS; t++) {
        args[t] = (struct mix_arg){
            .db = db, .a = 2 * (uint64_t)t + 1, .b = 2 * (uint64_t)t + 2, .want_a = 100};
        ck_assert_int_eq(pthread_create(&th[t], NULL, mix_units, &args[t]), 0);
    }
    for (int t = 0; t < MIX_THREADS; t++) {
        ck_assert_int_eq(pthread_join(th[t], NULL), 0);
        ck_assert_uint_eq(args[t].wrong, 0);
        ck_assert_int_eq(balance_of(db, args[t].a), args[t].want_a);
        ck_assert_int_eq(balance_of(db, args[t].b), args[t].want_b);
    }
    ledger_db_stats(db, &st);
    ck_assert_uint_eq(st.units, 1 + MIX_THREADS * MIX_ROUNDS * 4);
    ledger_db_close(db);
}
END_TEST

#define CRASH_ACKS 30 /* acknowledged transfers before the kill */

/* The child: transfers back and forth, one index to the pipe per ack. */
static void crash_child(const char *path, int fd)
{
    struct ledger_db_config cfg = {.url = path, .group_commit = true};
    struct ledger_db *db;

    if (ledger_db_open(&db, &cfg) != 0)
        _exit(2);
    for (uint32_t i = 0;; i++) {
        struct ledger_op op = op_of(OLTP_OP_TRANSFER, 1 + i % 2, 2 - i % 2, 1 + i % 7);
        struct ledger_result res;

        key_of(op.key, 99, i);
        if (ledger_db_apply(db, &op, 1, &res) != 0 || res.status != OLTP_ST_OK)
            _exit(3);
        if (write(fd, &i, sizeof(i)) != (ssize_t)sizeof(i))
            _exit(4);
    }
}

struct acked {
    uint8_t *seen; /* per index: 1 acknowledged, 2 also found */
    uint32_t count;
    unsigned found;
};

static int find_acked(void *arg, const struct ledger_op *row, int64_t balance_after)
{
    struct acked *ak = arg;
    uint32_t owner;
    uint32_t i;

    (void)balance_after;
    memcpy(&owner, row->key, sizeof(owner));
    memcpy(&i, row->key + 4, sizeof(i));
    if (owner == 99 && i < ak->count && ak->seen[i] == 1) {
        ak->seen[i] = 2;
        ak->found++;
    }
    return 0;
}

START_TEST(acknowledged_units_survive_a_sigkill)
{
    char path[256];
    struct ledger_db *db;
    struct acked ak = {0};
    int fds[2];
    pid_t pid;
    uint32_t idx;
    uint32_t acks = 0;
    int status;
    int64_t sum;
    uint64_t accounts;
    uint64_t negative;
    uint64_t deadline;

    fresh_path(path, sizeof(path));
    db = open_db(path, false);
    open_accounts(db, 2, 1000);
    ledger_db_close(db);

    ck_assert_int_eq(pipe(fds), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        crash_child(path, fds[1]);
    }
    close(fds[1]);
    ak.count = 1u << 20;
    ak.seen = calloc(ak.count, 1);
    ck_assert_ptr_nonnull(ak.seen);
    deadline = cr_test_now_ms() + (uint64_t)tmo(20000);
    while (acks < CRASH_ACKS) {
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};

        ck_assert_msg(cr_test_now_ms() < deadline, "child acknowledged only %u", acks);
        if (poll(&pfd, 1, 1000) <= 0)
            continue;
        ck_assert_int_eq(read(fds[0], &idx, sizeof(idx)), sizeof(idx));
        ck_assert_uint_lt(idx, ak.count);
        ak.seen[idx] = 1;
        acks++;
    }
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    /* Acks written before the kill are still in the pipe. */
    while (read(fds[0], &idx, sizeof(idx)) == (ssize_t)sizeof(idx)) {
        ck_assert_uint_lt(idx, ak.count);
        ak.seen[idx] = 1;
        acks++;
    }
    close(fds[0]);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    db = open_db(path, true);
    ck_assert_int_eq(ledger_db_each_keyed(db, find_acked, &ak), 0);
    ck_assert_uint_eq(ak.found, acks);
    ck_assert_int_eq(ledger_db_totals(db, &sum, &accounts, &negative), 0);
    ck_assert_int_eq(sum, 2000);
    ck_assert_uint_eq(accounts, 2);
    ck_assert_uint_eq(negative, 0);
    ledger_db_close(db);
    free(ak.seen);
}
END_TEST

/* Applies units[0..n) with ledger_db_apply_batch; the call must return 0. */
static void apply_batch_ok(struct ledger_db *db, const struct ledger_unit *units, size_t n,
                           struct ledger_result *res)
{
    ck_assert_int_eq(ledger_db_apply_batch(db, units, n, res), 0);
}

START_TEST(apply_batch_gives_each_unit_its_own_result)
{
    bool group = _i == 1;
    char path[256];
    struct ledger_db *db;
    struct ledger_db_stats before;
    struct ledger_db_stats after;
    struct ledger_op t12 = op_of(OLTP_OP_TRANSFER, 1, 2, 30);
    struct ledger_op dep_overdraw[2] = {op_of(OLTP_OP_DEPOSIT, 3, 0, 5),
                                        op_of(OLTP_OP_WITHDRAW, 3, 0, 1000)};
    struct ledger_op t21 = op_of(OLTP_OP_TRANSFER, 2, 1, 130);
    struct ledger_op no_account = op_of(OLTP_OP_DEPOSIT, 99, 0, 1);
    struct ledger_op bad_amount = op_of(OLTP_OP_WITHDRAW, 4, 0, 0);
    struct ledger_op reopen = op_of(OLTP_OP_OPEN, 1, 0, 0);
    struct ledger_op in_out[2] = {op_of(OLTP_OP_DEPOSIT, 4, 0, 7),
                                  op_of(OLTP_OP_WITHDRAW, 4, 0, 7)};
    const struct ledger_unit units[] = {
        {&t12, 1},        {dep_overdraw, 2}, {&t21, 1},   {&no_account, 1},
        {&bad_amount, 1}, {&reopen, 1},      {in_out, 2},
    };
    struct ledger_result res[7];
    int64_t sum;
    uint64_t accounts;
    uint64_t negative;

    if (!fresh_url(path, sizeof(path)))
        return;
    db = open_db(path, group);
    open_accounts(db, 4, 100);
    ledger_db_stats(db, &before);
    apply_batch_ok(db, units, 7, res);
    /* In array order: the second transfer spends what the first brought. */
    ck_assert_uint_eq(res[0].status, OLTP_ST_OK);
    ck_assert_int_eq(res[0].balance, 70);
    ck_assert_uint_eq(res[1].status, OLTP_ST_INSUFFICIENT);
    ck_assert_uint_eq(res[1].failed_op, 1);
    ck_assert_uint_eq(res[2].status, OLTP_ST_OK);
    ck_assert_int_eq(res[2].balance, 0);
    ck_assert_uint_eq(res[3].status, OLTP_ST_NO_ACCOUNT);
    ck_assert_uint_eq(res[4].status, OLTP_ST_BAD_AMOUNT);
    ck_assert_uint_eq(res[4].failed_op, 0);
    ck_assert_uint_eq(res[5].status, OLTP_ST_EXISTS);
    ck_assert_uint_eq(res[6].status, OLTP_ST_OK);
    ck_assert_int_eq(res[6].balance, 100);
    /* The failing units left nothing (3's deposit undone with its unit),
     * their neighbours everything. */
    ck_assert_int_eq(balance_of(db, 1), 200);
    ck_assert_int_eq(balance_of(db, 2), 0);
    ck_assert_int_eq(balance_of(db, 3), 100);
    ck_assert_int_eq(balance_of(db, 4), 100);
    ck_assert_int_eq(ledger_db_totals(db, &sum, &accounts, &negative), 0);
    ck_assert_int_eq(sum, 400);
    ck_assert_uint_eq(accounts, 4);
    ck_assert_uint_eq(history_len(db, 3), 1);
    ck_assert_uint_eq(history_len(db, 4), 3);
    ledger_db_stats(db, &after);
    /* The bad amount never reaches the database. */
    ck_assert_uint_eq(after.units - before.units, 6);
    if (group) {
        /* One caller alone: all its units in one commit. */
        ck_assert_uint_eq(after.commits - before.commits, 1);
        ck_assert_uint_ge(after.max_batch, 6);
    } else {
        /* A unit of its own each; the failing ones roll back, no commit. */
        ck_assert_uint_eq(after.commits - before.commits, 3);
        ck_assert_uint_eq(after.max_batch, 1);
    }
    ledger_db_close(db);
}
END_TEST

START_TEST(apply_batch_rejects_n_of_0_and_over_max_batch)
{
    struct ledger_db_config cfg = {.group_commit = _i == 1, .max_batch = 4};
    char path[256];
    struct ledger_db *db;
    struct ledger_op dep = op_of(OLTP_OP_DEPOSIT, 1, 0, 1);
    struct ledger_op many[OLTP_MAX_SESSION_OPS + 1];
    struct ledger_unit units[5];
    struct ledger_result res[5];

    fresh_path(path, sizeof(path));
    cfg.url = path;
    ck_assert_int_eq(ledger_db_open(&db, &cfg), 0);
    ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_OPEN, 1, 0, 0), NULL), OLTP_ST_OK);
    for (size_t i = 0; i < 5; i++)
        units[i] = (struct ledger_unit){&dep, 1};
    for (size_t i = 0; i <= OLTP_MAX_SESSION_OPS; i++)
        many[i] = dep;
    ck_assert_int_eq(ledger_db_apply_batch(db, units, 0, res), -EINVAL);
    memset(res, 0, sizeof(res));
    ck_assert_int_eq(ledger_db_apply_batch(db, units, 5, res), -EINVAL);
    for (size_t i = 0; i < 5; i++)
        ck_assert_uint_eq(res[i].status, OLTP_ST_INTERNAL);
    /* A unit out of range spoils the whole call, before anything runs. */
    units[2] = (struct ledger_unit){many, 0};
    ck_assert_int_eq(ledger_db_apply_batch(db, units, 3, res), -EINVAL);
    units[2] = (struct ledger_unit){many, OLTP_MAX_SESSION_OPS + 1};
    ck_assert_int_eq(ledger_db_apply_batch(db, units, 3, res), -EINVAL);
    ck_assert_int_eq(balance_of(db, 1), 0);
    /* The bound itself is accepted. */
    units[2] = (struct ledger_unit){many, OLTP_MAX_SESSION_OPS};
    apply_batch_ok(db, units, 4, res);
    for (size_t i = 0; i < 4; i++)
        ck_assert_uint_eq(res[i].status, OLTP_ST_OK);
    ck_assert_int_eq(balance_of(db, 1), 3 + OLTP_MAX_SESSION_OPS);
    ledger_db_close(db);
}
END_TEST

#define BT_BATCHERS 4
#define BT_SINGLES  4
#define BT_ROUNDS   10
#define BT_UNITS    16
#define BT_MAX      20                /* the db's max_batch: a batcher's 16 and a few singles */
#define BT_OVERDRAW 7                 /* the unit of each batch that overdraws an empty account */
#define BT_EMPTY    (GC_ACCOUNTS + 1) /* + the thread's index: opened with 0 */

struct bt_arg {
    struct ledger_db *db;
    uint32_t id;
    bool batcher;
    unsigned wrong; /* results other than expected */
};

static struct ledger_op bt_transfer(struct bt_arg *a, unsigned *seed, uint32_t i)
{
    uint64_t from = 1 + (uint64_t)rand_r(seed) % GC_ACCOUNTS;
    uint64_t to = 1 + (from + (uint64_t)rand_r(seed) % (GC_ACCOUNTS - 1)) % GC_ACCOUNTS;
    struct ledger_op op = op_of(OLTP_OP_TRANSFER, from, to, 1 + rand_r(seed) % 100);

    key_of(op.key, a->id, i);
    return op;
}

static void *bt_main(void *p)
{
    struct bt_arg *a = p;
    unsigned seed = a->id * 7919u + 1;
    uint32_t k = 0;

    for (int r = 0; r < BT_ROUNDS; r++) {
        struct ledger_op ops[BT_UNITS];
        struct ledger_unit units[BT_UNITS];
        struct ledger_result res[BT_UNITS];
        size_t n = a->batcher ? BT_UNITS : 1;

        for (size_t i = 0; i < n; i++) {
            ops[i] = bt_transfer(a, &seed, k++);
            units[i] = (struct ledger_unit){&ops[i], 1};
        }
        if (a->batcher) {
            ops[BT_OVERDRAW] = op_of(OLTP_OP_TRANSFER, BT_EMPTY + a->id, 1, 1);
            if (ledger_db_apply_batch(a->db, units, n, res) != 0) {
                a->wrong++;
                continue;
            }
        } else if (ledger_db_apply(a->db, ops, 1, res) != 0) {
            a->wrong++;
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            uint16_t want = a->batcher && i == BT_OVERDRAW ? OLTP_ST_INSUFFICIENT : OLTP_ST_OK;

            a->wrong += res[i].status != want;
        }
    }
    return NULL;
}

/* Batches of 16 (one unit failing in each) from 4 threads while 4 others
 * apply single units: every result as expected, the sum kept, and no
 * commit over max_batch. */
START_TEST(apply_batch_runs_beside_other_callers)
{
    struct ledger_db_config cfg = {.group_commit = _i == 1, .max_batch = BT_MAX};
    char path[256];
    struct ledger_db *db;
    pthread_t th[BT_BATCHERS + BT_SINGLES];
    struct bt_arg args[BT_BATCHERS + BT_SINGLES];
    struct ledger_db_stats st;
    int64_t sum;
    uint64_t accounts;
    uint64_t negative;
    uint64_t units = 1 + BT_BATCHERS + BT_ROUNDS * (BT_BATCHERS * BT_UNITS + BT_SINGLES);
    uint64_t failing = BT_BATCHERS * BT_ROUNDS;

    if (!fresh_url(path, sizeof(path)))
        return;
    cfg.url = path;
    ck_assert_int_eq(ledger_db_open(&db, &cfg), 0);
    open_accounts(db, GC_ACCOUNTS, GC_INITIAL);
    for (uint32_t t = 0; t < BT_BATCHERS; t++)
        ck_assert_uint_eq(apply1(db, op_of(OLTP_OP_OPEN, BT_EMPTY + t, 0, 0), NULL), OLTP_ST_OK);
    for (uint32_t t = 0; t < BT_BATCHERS + BT_SINGLES; t++) {
        args[t] = (struct bt_arg){.db = db, .id = t, .batcher = t < BT_BATCHERS};
        ck_assert_int_eq(pthread_create(&th[t], NULL, bt_main, &args[t]), 0);
    }
    for (int t = 0; t < BT_BATCHERS + BT_SINGLES; t++) {
        ck_assert_int_eq(pthread_join(th[t], NULL), 0);
        ck_assert_uint_eq(args[t].wrong, 0);
    }
    ck_assert_int_eq(ledger_db_totals(db, &sum, &accounts, &negative), 0);
    ck_assert_int_eq(sum, (int64_t)GC_ACCOUNTS * GC_INITIAL);
    ck_assert_uint_eq(accounts, GC_ACCOUNTS + BT_BATCHERS);
    ck_assert_uint_eq(negative, 0);
    for (uint32_t t = 0; t < BT_BATCHERS; t++)
        ck_assert_uint_eq(history_len(db, BT_EMPTY + t), 0);
    ledger_db_stats(db, &st);
    ck_assert_uint_eq(st.units, units);
    if (_i == 1) {
        /* A batcher's units share one commit, so at most 1 + 4 * 10 + 4 *
         * 10 + 4 commits; fewer when callers met. */
        ck_assert_uint_le(st.commits, 1 + BT_BATCHERS + BT_ROUNDS * (BT_BATCHERS + BT_SINGLES));
        ck_assert_uint_ge(st.max_batch, BT_UNITS);
        ck_assert_uint_le(st.max_batch, BT_MAX);
    } else {
        ck_assert_uint_eq(st.commits, units - failing);
        ck_assert_uint_eq(st.max_batch, 1);
    }
    ledger_db_close(db);
}
END_TEST

Suite *ledger_db_suite(void);
Suite *ledger_db_suite(void)
{
    Suite *s = suite_create("ledger_db");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, TEST_TIMEOUT);
    tcase_add_unchecked_fixture(tc, make_base_dir, remove_base_dir);
    tcase_add_test(tc, open_creates_the_schema_and_reopen_keeps_the_data);
    tcase_add_test(tc, open_rejects_bad_urls);
    /* Loops: _i 0 without, 1 with group commit. */
    tcase_add_loop_test(tc, each_op_returns_its_status_and_balance, 0, 2);
    tcase_add_loop_test(tc, a_failing_op_rolls_back_its_whole_unit, 0, 2);
    tcase_add_loop_test(tc, a_keyed_op_is_applied_once, 0, 2);
    tcase_add_loop_test(tc, a_busy_database_is_retried_and_then_fails_with_eio, 0, 2);
    tcase_add_test(tc, a_new_thread_reuses_the_connection_of_an_exited_one);
    tcase_add_loop_test(tc, group_commit_shares_commits_between_threads, 0, 2);
    tcase_add_test(tc, a_failing_unit_does_not_disturb_its_batch);
    tcase_add_loop_test(tc, apply_batch_gives_each_unit_its_own_result, 0, 2);
    tcase_add_loop_test(tc, apply_batch_rejects_n_of_0_and_over_max_batch, 0, 2);
    tcase_add_loop_test(tc, apply_batch_runs_beside_other_callers, 0, 2);
    tcase_add_test(tc, acknowledged_units_survive_a_sigkill);
    suite_add_tcase(s, tc);
#ifdef CR_HAVE_LIBPQ
    tc = tcase_create("postgresql");
    tcase_set_timeout(tc, TEST_TIMEOUT);
    tcase_add_unchecked_fixture(tc, start_pg, stop_pg);
    tcase_add_loop_test(tc, each_op_returns_its_status_and_balance, 0, 2);
    tcase_add_loop_test(tc, a_failing_op_rolls_back_its_whole_unit, 0, 2);
    tcase_add_loop_test(tc, a_keyed_op_is_applied_once, 0, 2);
    tcase_add_loop_test(tc, group_commit_shares_commits_between_threads, 0, 2);
    tcase_add_test(tc, a_failing_unit_does_not_disturb_its_batch);
    tcase_add_loop_test(tc, apply_batch_gives_each_unit_its_own_result, 0, 2);
    tcase_add_loop_test(tc, apply_batch_runs_beside_other_callers, 0, 2);
    suite_add_tcase(s, tc);
#endif
    return s;
}
