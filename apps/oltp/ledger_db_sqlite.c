/*
 * ledger_db_sqlite.c - the ledger's SQLite backend (ledger_db_internal.h):
 * one file in WAL mode with synchronous=FULL, so a commit is durable once
 * COMMIT returns (one fsync of the WAL). Each connection belongs to one
 * thread at a time (ledger_db.c keys them by thread), so it is opened with
 * SQLITE_OPEN_NOMUTEX and keeps its prepared statements cached for its
 * lifetime. Writers serialize on SQLite's write lock: BEGIN IMMEDIATE takes
 * it up front (waiting up to the busy timeout), so a transaction never fails
 * halfway for a lock. Owns its sqlite3 handle and statements.
 *
 * A failed sync is never taken for "nothing applied": after SQLite's fsync
 * of the WAL fails at COMMIT, the commit's frames may still be in the file
 * and a later open's recovery may replay them. So every I/O error
 * (SQLITE_IOERR_*, SQLITE_IOERR_FSYNC among them) and corruption is
 * LEDGER_DB_BROKEN, and any error of COMMIT but busy is in doubt. The WAL's
 * checkpoints, which sync the database file, run from this file's WAL hook
 * rather than SQLite's default one, which ignores their errors.
 */
#include "ledger_db_internal.h"

#include <cabrank/log.h>

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

/* Checkpoint once the WAL holds this many frames (SQLite's default). */
#define CHECKPOINT_FRAMES 1000

/* The statements a connection prepares on first use and keeps. */
enum stmt_id {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_SAVEPOINT,
    ST_ROLLBACK_TO,
    ST_RELEASE,
    ST_KEY_FIND,
    ST_BALANCE,
    ST_OPEN,
    ST_SET_BALANCE,
    ST_TXN_INSERT,
    ST_HISTORY,
    ST_TOTALS,
    ST_EACH_KEYED,
    ST_COUNT
};

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_SAVEPOINT] = "SAVEPOINT unit",
    [ST_ROLLBACK_TO] = "ROLLBACK TO unit",
    [ST_RELEASE] = "RELEASE unit",
    [ST_KEY_FIND] = "SELECT op, account, other, amount, balance_after FROM txns WHERE key = ?1",
    [ST_BALANCE] = "SELECT balance FROM accounts WHERE id = ?1",
    [ST_OPEN] = "INSERT OR IGNORE INTO accounts(id, balance) VALUES (?1, 0)",
    [ST_SET_BALANCE] = "UPDATE accounts SET balance = ?2 WHERE id = ?1",
    [ST_TXN_INSERT] = "INSERT INTO txns(key, op, account, other, amount, balance_after) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    /* Two index range scans (account, id) and (other, id), each cut at the
     * limit, merged: an OR would sort every row of a busy account. */
    [ST_HISTORY] = "SELECT * FROM (SELECT id, op, account, other, amount FROM txns "
                   "WHERE account = ?1 ORDER BY id DESC LIMIT ?2) "
                   "UNION ALL SELECT * FROM (SELECT id, op, account, other, amount FROM txns "
                   "WHERE other = ?1 ORDER BY id DESC LIMIT ?2) ORDER BY 1 DESC LIMIT ?2",
    [ST_TOTALS] = "SELECT COALESCE(SUM(balance), 0), COUNT(*), "
                  "COALESCE(SUM(balance < 0), 0) FROM accounts",
    [ST_EACH_KEYED] = "SELECT op, account, other, amount, key, balance_after FROM txns "
                      "WHERE key IS NOT NULL ORDER BY id",
};

static const char schema_sql[] = "CREATE TABLE IF NOT EXISTS accounts ("
                                 " id INTEGER PRIMARY KEY,"
                                 " balance INTEGER NOT NULL CHECK (balance >= 0));"
                                 "CREATE TABLE IF NOT EXISTS txns ("
                                 " id INTEGER PRIMARY KEY,"
                                 " key BLOB UNIQUE,"
                                 " op INTEGER NOT NULL,"
                                 " account INTEGER NOT NULL,"
                                 " other INTEGER NOT NULL,"
                                 " amount INTEGER NOT NULL,"
                                 " balance_after INTEGER NOT NULL);"
                                 "CREATE INDEX IF NOT EXISTS txns_account ON txns(account, id);"
                                 "CREATE INDEX IF NOT EXISTS txns_other ON txns(other, id);";

struct sq_conn {
    sqlite3 *db;
    sqlite3_stmt *st[ST_COUNT];
    /* The error of the checkpoint the last COMMIT ran, or SQLITE_OK. */
    int checkpoint_rc;
};

static bool is_storage_error(int rc)
{
    int prim = rc & 0xff;

    return prim == SQLITE_IOERR || prim == SQLITE_CORRUPT || prim == SQLITE_NOTADB;
}

/* Busy (past the busy timeout) and locked are transient: ledger_db.c rolls
 * back and reruns the transaction. Anything else is logged; a storage error
 * is LEDGER_DB_BROKEN (the top of the file). */
static int sq_err(struct sq_conn *c, int rc, const char *what)
{
    int prim = rc & 0xff;

    if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED)
        return -EAGAIN;
    CR_LOG(CR_LOG_ERROR, "sqlite: %s failed: %s (%d)", what, sqlite3_errmsg(c->db), rc);
    return is_storage_error(rc) ? LEDGER_DB_BROKEN : -EIO;
}

/* The WAL hook, run after each commit of c (its WAL already synced): the
 * checkpoint SQLite's default hook would run, with its error kept for
 * sq_commit. Busy (a reader in the way) is no error: the next one goes on. */
static int on_wal_commit(void *arg, sqlite3 *db, const char *name, int frames)
{
    struct sq_conn *c = arg;
    int rc;

    if (frames < CHECKPOINT_FRAMES)
        return SQLITE_OK;
    rc = sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_BUSY)
        c->checkpoint_rc = rc;
    return SQLITE_OK;
}

static int stmt_get(struct sq_conn *c, enum stmt_id id, sqlite3_stmt **out)
{
    int rc;

    if (c->st[id] == NULL) {
        rc = sqlite3_prepare_v3(c->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &c->st[id],
                                NULL);
        if (rc != SQLITE_OK)
            return sq_err(c, rc, stmt_sql[id]);
    }
    *out = c->st[id];
    return 0;
}

static void stmt_done(sqlite3_stmt *s)
{
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
}

/* Runs a statement without bindings or rows (transaction control). */
static int run_simple(struct sq_conn *c, enum stmt_id id)
{
    sqlite3_stmt *s = NULL;
    int err = stmt_get(c, id, &s);
    int rc;

    if (err < 0)
        return err;
    rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE)
        return sq_err(c, rc, stmt_sql[id]);
    return 0;
}

static const char *url_path(const char *url)
{
    if (strncmp(url, "sqlite:", 7) == 0)
        return url + 7;
    return url;
}

static void sq_disconnect(void *conn)
{
    struct sq_conn *c = conn;

    if (c == NULL)
        return;
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(c->st[i]);
    sqlite3_close(c->db);
    free(c);
}

static int sq_connect(const struct ledger_db_config *cfg, void **conn)
{
    const char *path = url_path(cfg->url);
    struct sq_conn *c;
    char *msg = NULL;
    int rc;

    if (path[0] == '\0')
        return -EINVAL;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return -ENOMEM;
    /* NOMUTEX: one thread at a time uses a connection (ledger_db.c). */
    rc = sqlite3_open_v2(path, &c->db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        if (c->db == NULL) {
            free(c);
            return -ENOMEM;
        }
        CR_LOG(CR_LOG_ERROR, "sqlite: open %s failed: %s", path, sqlite3_errmsg(c->db));
        goto out_close;
    }
    sqlite3_extended_result_codes(c->db, 1);
    sqlite3_wal_hook(c->db, on_wal_commit, c);
    sqlite3_busy_timeout(c->db, cfg->busy_timeout_ms ? (int)cfg->busy_timeout_ms : 10000);
    /* WAL: readers do not block the writer; FULL: the WAL is fsynced at
     * every commit, so an acknowledged unit survives a kill or a crash. */
    rc = sqlite3_exec(c->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        CR_LOG(CR_LOG_ERROR, "sqlite: %s: WAL setup failed: %s", path, msg ? msg : "?");
        sqlite3_free(msg);
        goto out_close;
    }
    *conn = c;
    return 0;

out_close:
    sqlite3_close(c->db);
    free(c);
    return -EIO;
}

static int sq_schema(void *conn)
{
    struct sq_conn *c = conn;
    char *msg = NULL;
    int rc = sqlite3_exec(c->db, schema_sql, NULL, NULL, &msg);

    if (rc == SQLITE_OK)
        return 0;
    CR_LOG(CR_LOG_ERROR, "sqlite: schema failed: %s", msg ? msg : "?");
    sqlite3_free(msg);
    return (rc & 0xff) == SQLITE_BUSY ? -EAGAIN : -EIO;
}

static int sq_begin(void *conn)
{
    return run_simple(conn, ST_BEGIN);
}

static int sq_commit(void *conn)
{
    struct sq_conn *c = conn;
    int err;

    c->checkpoint_rc = SQLITE_OK;
    err = run_simple(c, ST_COMMIT);
    if (err == 0 && c->checkpoint_rc != SQLITE_OK) {
        CR_LOG(CR_LOG_ERROR, "sqlite: checkpoint after COMMIT failed: %s (%d)",
               sqlite3_errstr(c->checkpoint_rc), c->checkpoint_rc);
        /* The commit is in the synced WAL, but after a storage error the
         * database file's state is unknown: the commit is answered in
         * doubt, and the db fails (a checkpoint that later seemed to
         * succeed could reset a WAL whose pages never reached the file).
         * Any other failure of a checkpoint leaves the WAL as it was. */
        if (is_storage_error(c->checkpoint_rc))
            return LEDGER_DB_BROKEN;
    }
    /* Busy leaves the transaction open, unapplied (-EAGAIN: rerun). Any
     * other error may have left a commit record that recovery replays. */
    return err == -EIO ? LEDGER_DB_IN_DOUBT : err;
}

static void sq_fence(void *conn)
{
    struct sq_conn *c = conn;

    /* Leave the WAL for the next open's recovery; a checkpoint now would
     * trust syncs of a file whose earlier sync failed. */
    (void)sqlite3_db_config(c->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
}

static int sq_rollback(void *conn)
{
    struct sq_conn *c = conn;

    /* SQLite may have rolled back by itself (some I/O errors, full disk). */
    if (sqlite3_get_autocommit(c->db))
        return 0;
    return run_simple(c, ST_ROLLBACK);
}

static int sq_savepoint(void *conn)
{
    return run_simple(conn, ST_SAVEPOINT);
}

static int sq_rollback_to(void *conn)
{
    return run_simple(conn, ST_ROLLBACK_TO);
}

static int sq_release(void *conn)
{
    return run_simple(conn, ST_RELEASE);
}

static bool is_zero_key(const uint8_t *key)
{
    for (size_t i = 0; i < OLTP_KEY_SIZE; i++) {
        if (key[i] != 0)
            return false;
    }
    return true;
}

/* The other account a txns row stores for op. */
static uint64_t other_of(const struct ledger_op *op)
{
    return op->op == OLTP_OP_TRANSFER ? op->to : 0;
}

/* 1 with *status and *balance when op's key has a row, 0 when not. */
static int key_lookup(struct sq_conn *c, const struct ledger_op *op, uint16_t *status,
                      int64_t *balance)
{
    sqlite3_stmt *s = NULL;
    int err = stmt_get(c, ST_KEY_FIND, &s);
    int rc;

    if (err < 0)
        return err;
    sqlite3_bind_blob(s, 1, op->key, OLTP_KEY_SIZE, SQLITE_STATIC);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        bool same = sqlite3_column_int64(s, 0) == op->op &&
                    (uint64_t)sqlite3_column_int64(s, 1) == op->account &&
                    (uint64_t)sqlite3_column_int64(s, 2) == other_of(op) &&
                    sqlite3_column_int64(s, 3) == op->amount;

        *status = same ? OLTP_ST_OK : OLTP_ST_KEY_REUSED;
        *balance = same ? sqlite3_column_int64(s, 4) : 0;
        err = 1;
    } else if (rc != SQLITE_DONE) {
        err = sq_err(c, rc, "key lookup");
    }
    stmt_done(s);
    return err;
}

/* 0 with *bal, -ENOENT, -EAGAIN, -EIO. */
static int read_balance(struct sq_conn *c, uint64_t account, int64_t *bal)
{
    sqlite3_stmt *s = NULL;
    int err = stmt_get(c, ST_BALANCE, &s);
    int rc;

    if (err < 0)
        return err;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)account);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *bal = sqlite3_column_int64(s, 0);
    else if (rc == SQLITE_DONE)
        err = -ENOENT;
    else
        err = sq_err(c, rc, "balance");
    stmt_done(s);
    return err;
}

static int set_balance(struct sq_conn *c, uint64_t account, int64_t bal)
{
    sqlite3_stmt *s = NULL;
    int err = stmt_get(c, ST_SET_BALANCE, &s);
    int rc;

    if (err < 0)
        return err;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)account);
    sqlite3_bind_int64(s, 2, bal);
    rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE)
        return sq_err(c, rc, "balance update");
    return 0;
}

static int insert_txn(struct sq_conn *c, const struct ledger_op *op, int64_t balance_after)
{
    sqlite3_stmt *s = NULL;
    int err = stmt_get(c, ST_TXN_INSERT, &s);
    int rc;

    if (err < 0)
        return err;
    if (is_zero_key(op->key))
        sqlite3_bind_null(s, 1);
    else
        sqlite3_bind_blob(s, 1, op->key, OLTP_KEY_SIZE, SQLITE_STATIC);
    sqlite3_bind_int(s, 2, op->op);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)op->account);
    sqlite3_bind_int64(s, 4, (sqlite3_int64)other_of(op));
    sqlite3_bind_int64(s, 5, op->amount);
    sqlite3_bind_int64(s, 6, balance_after);
    rc = sqlite3_step(s);
    stmt_done(s);
    /* Cannot happen with one writer that looked the key up first; retrying
     * finds the row and answers from it. */
    if (rc == SQLITE_CONSTRAINT_UNIQUE)
        return -EAGAIN;
    if (rc != SQLITE_DONE)
        return sq_err(c, rc, "txn insert");
    return 0;
}

static int apply_open(struct sq_conn *c, const struct ledger_op *op, uint16_t *status,
                      int64_t *balance)
{
    sqlite3_stmt *s = NULL;
    int err = stmt_get(c, ST_OPEN, &s);
    int rc;

    if (err < 0)
        return err;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)op->account);
    rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE)
        return sq_err(c, rc, "open");
    *status = sqlite3_changes(c->db) == 1 ? OLTP_ST_OK : OLTP_ST_EXISTS;
    *balance = 0;
    return 0;
}

/* The new balances are computed here and checked before the UPDATE; the
 * CHECK constraint stays as the last line, never the way a status is found. */
static int apply_money(struct sq_conn *c, const struct ledger_op *op, uint16_t *status,
                       int64_t *balance)
{
    int64_t from_bal;
    int64_t to_bal = 0;
    int64_t from_after;
    int err;

    err = read_balance(c, op->account, &from_bal);
    if (err == 0 && op->op == OLTP_OP_TRANSFER)
        err = read_balance(c, op->to, &to_bal);
    if (err == -ENOENT) {
        *status = OLTP_ST_NO_ACCOUNT;
        return 0;
    }
    if (err < 0)
        return err;
    if (op->op == OLTP_OP_DEPOSIT) {
        if (from_bal > INT64_MAX - op->amount) {
            *status = OLTP_ST_BAD_AMOUNT;
            return 0;
        }
        from_after = from_bal + op->amount;
    } else {
        if (from_bal < op->amount) {
            *status = OLTP_ST_INSUFFICIENT;
            return 0;
        }
        from_after = from_bal - op->amount;
        if (op->op == OLTP_OP_TRANSFER && to_bal > INT64_MAX - op->amount) {
            *status = OLTP_ST_BAD_AMOUNT;
            return 0;
        }
    }
    if (op->op == OLTP_OP_TRANSFER && op->to < op->account)
        err = set_balance(c, op->to, to_bal + op->amount);
    if (err == 0)
        err = set_balance(c, op->account, from_after);
    if (err == 0 && op->op == OLTP_OP_TRANSFER && op->to > op->account)
        err = set_balance(c, op->to, to_bal + op->amount);
    if (err == 0)
        err = insert_txn(c, op, from_after);
    if (err < 0)
        return err;
    *status = OLTP_ST_OK;
    *balance = from_after;
    return 0;
}

static int sq_apply(void *conn, const struct ledger_op *op, uint16_t *status, int64_t *balance)
{
    struct sq_conn *c = conn;
    int err;

    *balance = 0;
    switch (op->op) {
    case OLTP_OP_OPEN:
        return apply_open(c, op, status, balance);
    case OLTP_OP_DEPOSIT:
    case OLTP_OP_WITHDRAW:
    case OLTP_OP_TRANSFER:
        if (!is_zero_key(op->key)) {
            err = key_lookup(c, op, status, balance);
            if (err != 0)
                return err < 0 ? err : 0;
        }
        return apply_money(c, op, status, balance);
    default:
        *status = OLTP_ST_UNKNOWN_OP;
        return 0;
    }
}

static int sq_balance(void *conn, uint64_t account, int64_t *balance)
{
    return read_balance(conn, account, balance);
}

static int sq_history(void *conn, uint64_t account, struct oltp_hist *out, unsigned max,
                      unsigned *n)
{
    struct sq_conn *c = conn;
    sqlite3_stmt *s = NULL;
    int64_t bal;
    unsigned k = 0;
    int err = read_balance(c, account, &bal);
    int rc = SQLITE_DONE;

    if (err < 0)
        return err;
    err = stmt_get(c, ST_HISTORY, &s);
    if (err < 0)
        return err;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)account);
    sqlite3_bind_int64(s, 2, max);
    while (k < max && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        int op = sqlite3_column_int(s, 1);
        uint64_t from = (uint64_t)sqlite3_column_int64(s, 2);
        uint64_t other = (uint64_t)sqlite3_column_int64(s, 3);
        int64_t amount = sqlite3_column_int64(s, 4);
        bool in = op == OLTP_OP_DEPOSIT || (op == OLTP_OP_TRANSFER && from != account);

        out[k].txn = (uint64_t)sqlite3_column_int64(s, 0);
        out[k].delta = in ? amount : -amount;
        out[k].other = op != OLTP_OP_TRANSFER ? 0 : (from == account ? other : from);
        k++;
    }
    if (k < max && rc != SQLITE_DONE)
        err = sq_err(c, rc, "history");
    stmt_done(s);
    *n = k;
    return err;
}

static int sq_totals(void *conn, int64_t *sum, uint64_t *accounts, uint64_t *negative)
{
    struct sq_conn *c = conn;
    sqlite3_stmt *s = NULL;
    int err = stmt_get(c, ST_TOTALS, &s);
    int rc;

    if (err < 0)
        return err;
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *sum = sqlite3_column_int64(s, 0);
        *accounts = (uint64_t)sqlite3_column_int64(s, 1);
        *negative = (uint64_t)sqlite3_column_int64(s, 2);
    } else {
        err = sq_err(c, rc, "totals");
    }
    stmt_done(s);
    return err;
}

static int sq_each_keyed(void *conn, ledger_db_row_fn *fn, void *arg)
{
    struct sq_conn *c = conn;
    sqlite3_stmt *s = NULL;
    int err = stmt_get(c, ST_EACH_KEYED, &s);
    int rc = SQLITE_DONE;

    if (err < 0)
        return err;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct ledger_op row = {
            .op = (uint8_t)sqlite3_column_int(s, 0),
            .account = (uint64_t)sqlite3_column_int64(s, 1),
            .to = (uint64_t)sqlite3_column_int64(s, 2),
            .amount = sqlite3_column_int64(s, 3),
        };
        const void *key = sqlite3_column_blob(s, 4);

        if (key != NULL && sqlite3_column_bytes(s, 4) == OLTP_KEY_SIZE)
            memcpy(row.key, key, OLTP_KEY_SIZE);
        err = fn(arg, &row, sqlite3_column_int64(s, 5));
        if (err != 0)
            break;
    }
    if (err == 0 && rc != SQLITE_DONE)
        err = sq_err(c, rc, "keyed rows");
    stmt_done(s);
    return err;
}

const struct ledger_backend_ops ledger_backend_sqlite = {
    .name = "sqlite",
    .connect = sq_connect,
    .disconnect = sq_disconnect,
    .fence = sq_fence,
    .schema = sq_schema,
    .begin = sq_begin,
    .commit = sq_commit,
    .rollback = sq_rollback,
    .savepoint = sq_savepoint,
    .rollback_to = sq_rollback_to,
    .release = sq_release,
    .apply = sq_apply,
    .balance = sq_balance,
    .history = sq_history,
    .totals = sq_totals,
    .each_keyed = sq_each_keyed,
};
