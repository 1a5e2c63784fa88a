/*
 * ledger_db_pg.c - the ledger's PostgreSQL backend (ledger_db_internal.h),
 * over libpq's synchronous API, so that several ledgers share one database.
 * Called by ledger_db.c, one connection per thread: a connection is used by
 * one thread at a time. Owns its PGconn.
 *
 * Transactions run in READ COMMITTED: no serialization failures, and each
 * UPDATE sees the newest committed balance and locks its row, so the
 * conditional debit (balance >= amount) can never take a balance below 0
 * and a transfer's rows are locked in increasing account order: two
 * ledgers never wait for each other in a cycle over one transfer. They
 * still may on a key both insert, which PostgreSQL resolves as a unique
 * violation (23505) or a deadlock (40P01): -EAGAIN, and the rerun finds the
 * other's row. A group commit's batch, or a session of several ops, takes
 * its rows in the order of its ops, so two ledgers' batches can deadlock
 * too: PostgreSQL finds it only after deadlock_timeout (1 s by default;
 * lower it on a database that several ledgers share), aborts one, and that
 * batch is rerun. Commits are durable (synchronous_commit on).
 *
 * Every statement is prepared once per connection, with binary parameters
 * and results: keys are bytea, numbers int8 (big-endian on the wire).
 */
#include "ledger_db_internal.h"

#include <cabrank/log.h>

#include <errno.h>
#include <stdlib.h>

#ifdef CR_HAVE_LIBPQ

#include <libpq-fe.h>
#include <string.h>

/* Types of the parameters we send (pg_type.oid, fixed in every release). */
#define OID_BYTEA 17
#define OID_INT8  20

/* The name PostgreSQL gives the UNIQUE constraint of txns.key. */
#define KEY_CONSTRAINT "txns_key_key"

/*
 * Serialises schema creation among ledgers that start at once: concurrent
 * CREATE TABLE IF NOT EXISTS of one table can fail on the catalog's own
 * unique index. Any constant; this is "cabrnk" in ASCII.
 */
#define SCHEMA_LOCK "109269914644075"

static const char schema_sql[] = "BEGIN;"
                                 "SELECT pg_advisory_xact_lock(" SCHEMA_LOCK ");"
                                 "CREATE TABLE IF NOT EXISTS accounts ("
                                 " id bigint PRIMARY KEY,"
                                 " balance bigint NOT NULL CHECK (balance >= 0));"
                                 "CREATE TABLE IF NOT EXISTS txns ("
                                 " id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
                                 " key bytea UNIQUE,"
                                 " op smallint NOT NULL,"
                                 " account bigint NOT NULL,"
                                 " other bigint NOT NULL,"
                                 " amount bigint NOT NULL,"
                                 " balance_after bigint NOT NULL);"
                                 "CREATE INDEX IF NOT EXISTS txns_account ON txns (account, id);"
                                 "CREATE INDEX IF NOT EXISTS txns_other ON txns (other, id);"
                                 "COMMIT";

enum stmt {
    ST_OPEN,
    ST_CREDIT,
    ST_DEBIT,
    ST_ACCOUNT,
    ST_KEY,
    ST_LOG,
    ST_HISTORY,
    ST_TOTALS,
    ST_KEYED,
    ST_COUNT,
};

static const struct {
    const char *name;
    const char *sql;
    int nparams;
} stmts[ST_COUNT] = {
    [ST_OPEN] = {"open",
                 "INSERT INTO accounts (id, balance) VALUES ($1, 0)"
                 " ON CONFLICT (id) DO NOTHING RETURNING balance",
                 1},
    [ST_CREDIT] = {"credit",
                   "UPDATE accounts SET balance = balance + $2 WHERE id = $1"
                   " RETURNING balance",
                   2},
    /* The condition is evaluated again on the newest row version when a
     * concurrent transaction changed it (READ COMMITTED's recheck). */
    [ST_DEBIT] = {"debit",
                  "UPDATE accounts SET balance = balance - $2"
                  " WHERE id = $1 AND balance >= $2 RETURNING balance",
                  2},
    [ST_ACCOUNT] = {"account", "SELECT balance FROM accounts WHERE id = $1", 1},
    [ST_KEY] = {"key", "SELECT op, account, other, amount, balance_after FROM txns WHERE key = $1",
                1},
    [ST_LOG] = {"log",
                "INSERT INTO txns (key, op, account, other, amount, balance_after)"
                " VALUES ($1, $2, $3, $4, $5, $6)",
                6},
    /* Two index scans, newest first, rather than one filtered scan of all
     * of txns. An account is never both sides of one row. */
    [ST_HISTORY] = {"history",
                    "(SELECT id, op, account, other, amount FROM txns WHERE account = $1"
                    "  ORDER BY id DESC LIMIT $2)"
                    " UNION ALL"
                    " (SELECT id, op, account, other, amount FROM txns WHERE other = $1"
                    "  ORDER BY id DESC LIMIT $2)"
                    " ORDER BY id DESC LIMIT $2",
                    2},
    [ST_TOTALS] = {"totals",
                   "SELECT COALESCE(SUM(balance), 0)::bigint, COUNT(*),"
                   " COUNT(*) FILTER (WHERE balance < 0) FROM accounts",
                   0},
    [ST_KEYED] = {"keyed",
                  "SELECT key, op, account, other, amount, balance_after FROM txns"
                  " WHERE key IS NOT NULL ORDER BY id",
                  0},
};

struct pg_conn {
    PGconn *pg;
    /* Whether stmts are prepared on this session (they need the schema,
     * and a reset connection is a new session). */
    bool prepared;
};

/* Binary parameters of one statement call. */
struct params {
    const char *values[6];
    int lengths[6];
    int formats[6];
    unsigned char be[6][8];
};

static void param_i64(struct params *p, int i, int64_t v)
{
    uint64_t u = (uint64_t)v;

    for (int b = 7; b >= 0; b--) {
        p->be[i][b] = (unsigned char)u;
        u >>= 8;
    }
    p->values[i] = (const char *)p->be[i];
    p->lengths[i] = 8;
    p->formats[i] = 1;
}

/* A key of all zero bytes is none: SQL NULL, which UNIQUE never compares. */
static void param_key(struct params *p, int i, const uint8_t *key)
{
    bool none = true;

    for (size_t k = 0; k < OLTP_KEY_SIZE; k++)
        none = none && key[k] == 0;
    p->values[i] = none ? NULL : (const char *)key;
    p->lengths[i] = OLTP_KEY_SIZE;
    p->formats[i] = 1;
}

/* An integer column of a binary result (int2, int4 or int8). */
static int64_t get_int(const PGresult *r, int row, int col)
{
    const unsigned char *v = (const unsigned char *)PQgetvalue(r, row, col);
    int len = PQgetlength(r, row, col);
    uint64_t u = len > 0 && (v[0] & 0x80) ? ~(uint64_t)0 : 0;

    for (int i = 0; i < len && i < 8; i++)
        u = u << 8 | v[i];
    return (int64_t)u;
}

static bool has_key(const uint8_t *key)
{
    for (size_t k = 0; k < OLTP_KEY_SIZE; k++) {
        if (key[k] != 0)
            return true;
    }
    return false;
}

static void on_notice(void *arg, const char *message)
{
    (void)arg;
    CR_LOG(CR_LOG_DEBUG, "postgresql: %s", message);
}

/* Logs msg (libpq's end with a newline) for what. */
static void log_error(const char *what, const char *msg)
{
    size_t len = strlen(msg);

    while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == ' '))
        len--;
    CR_LOG(CR_LOG_ERROR, "postgresql: %s: %.*s", what, (int)len, msg);
}

/*
 * What a failed result means for ledger_db.c: -EAGAIN for the conflicts a
 * rerun of the transaction resolves, else -EIO (logged). Clears r.
 */
static int result_error(struct pg_conn *c, PGresult *r, const char *what)
{
    const char *state = r != NULL ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    const char *constraint = r != NULL ? PQresultErrorField(r, PG_DIAG_CONSTRAINT_NAME) : NULL;
    int err = -EIO;

    if (state != NULL && (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0))
        err = -EAGAIN;
    /* Another ledger committed (or is committing) this key first. */
    if (state != NULL && strcmp(state, "23505") == 0 && constraint != NULL &&
        strcmp(constraint, KEY_CONSTRAINT) == 0)
        err = -EAGAIN;
    if (err == -EAGAIN)
        CR_LOG(CR_LOG_DEBUG, "postgresql: %s: %s (rerun)", what, state);
    else
        log_error(what, r != NULL ? PQresultErrorMessage(r) : PQerrorMessage(c->pg));
    PQclear(r);
    return err;
}

/* Runs a statement without a result; 0, -EAGAIN or -EIO. */
static int exec_command(struct pg_conn *c, const char *sql)
{
    PGresult *r = PQexec(c->pg, sql);

    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        return result_error(c, r, sql);
    PQclear(r);
    return 0;
}

static int prepare_all(struct pg_conn *c)
{
    /* Every parameter is int8, but the key, always $1 where it is one. */
    static const Oid int8s[6] = {OID_INT8, OID_INT8, OID_INT8, OID_INT8, OID_INT8, OID_INT8};
    static const Oid key_first[6] = {OID_BYTEA, OID_INT8, OID_INT8, OID_INT8, OID_INT8, OID_INT8};

    if (c->prepared)
        return 0;
    for (int i = 0; i < ST_COUNT; i++) {
        const Oid *types = i == ST_KEY || i == ST_LOG ? key_first : int8s;
        PGresult *r = PQprepare(c->pg, stmts[i].name, stmts[i].sql, stmts[i].nparams, types);

        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            int err = result_error(c, r, stmts[i].name);

            /* The next try prepares every name again. */
            PQclear(PQexec(c->pg, "DEALLOCATE ALL"));
            return err;
        }
        PQclear(r);
    }
    c->prepared = true;
    return 0;
}

/*
 * Before a transaction or a read: a connection the server dropped (a
 * restart) is opened again, then prepared. Never inside a transaction,
 * whose work a reset would silently lose.
 */
static int ensure_ready(struct pg_conn *c)
{
    if (PQstatus(c->pg) != CONNECTION_OK) {
        PQreset(c->pg);
        c->prepared = false;
        if (PQstatus(c->pg) != CONNECTION_OK) {
            log_error("reconnect", PQerrorMessage(c->pg));
            return -EIO;
        }
    }
    return prepare_all(c);
}

/*
 * Runs prepared statement st with p; binary results. 0 with *out (the
 * caller clears it), -EAGAIN or -EIO.
 */
static int exec_stmt(struct pg_conn *c, enum stmt st, const struct params *p, PGresult **out)
{
    PGresult *r =
        PQexecPrepared(c->pg, stmts[st].name, stmts[st].nparams, p != NULL ? p->values : NULL,
                       p != NULL ? p->lengths : NULL, p != NULL ? p->formats : NULL, 1);
    ExecStatusType s = PQresultStatus(r);

    if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK)
        return result_error(c, r, stmts[st].name);
    *out = r;
    return 0;
}

/* Runs st with the one parameter id; *found says whether it returned a
 * row, whose first column goes to *v. */
static int exec_id(struct pg_conn *c, enum stmt st, uint64_t id, int64_t amount, bool *found,
                   int64_t *v)
{
    struct params p;
    PGresult *r;
    int err;

    param_i64(&p, 0, (int64_t)id);
    param_i64(&p, 1, amount);
    err = exec_stmt(c, st, &p, &r);
    if (err < 0)
        return err;
    *found = PQntuples(r) > 0;
    if (*found)
        *v = get_int(r, 0, 0);
    PQclear(r);
    return 0;
}

static int pg_connect(const struct ledger_db_config *cfg, void **conn)
{
    struct pg_conn *c = calloc(1, sizeof(*c));
    int err;

    if (c == NULL)
        return -ENOMEM;
    c->pg = PQconnectdb(cfg->url);
    if (c->pg == NULL) {
        free(c);
        return -ENOMEM;
    }
    if (PQstatus(c->pg) != CONNECTION_OK) {
        log_error("connect", PQerrorMessage(c->pg));
        err = -EIO;
        goto out_finish;
    }
    PQsetNoticeProcessor(c->pg, on_notice, NULL);
    /* The server's default, but a ledger acknowledges only durable
     * commits, whatever the database's configuration says. */
    err = exec_command(c, "SET synchronous_commit = on");
    if (err < 0)
        goto out_finish;
    *conn = c;
    return 0;

out_finish:
    PQfinish(c->pg);
    free(c);
    return err == -EAGAIN ? -EIO : err;
}

static void pg_disconnect(void *conn)
{
    struct pg_conn *c = conn;

    if (c == NULL)
        return;
    PQfinish(c->pg);
    free(c);
}

static int pg_schema(void *conn)
{
    struct pg_conn *c = conn;
    int err = exec_command(c, schema_sql);

    if (err < 0) {
        /* A failed multi-statement string leaves its transaction open. */
        PQclear(PQexec(c->pg, "ROLLBACK"));
        return err;
    }
    return prepare_all(c);
}

static int pg_begin(void *conn)
{
    struct pg_conn *c = conn;
    int err = ensure_ready(c);

    return err < 0 ? err : exec_command(c, "BEGIN ISOLATION LEVEL READ COMMITTED");
}

/*
 * Whether a COMMIT that failed with r may still have committed: the server
 * only reports "nothing committed" with an ERROR on a connection that is
 * still up (a deferred constraint, a serialization failure). No result, a
 * connection lost (its FATAL 57P01 after pg_terminate_backend, a crash, a
 * network failure: class 08), or a FATAL or PANIC severity leave it unknown:
 * the server may have written the commit record before the connection went.
 */
static bool is_commit_in_doubt(struct pg_conn *c, const PGresult *r)
{
    const char *state = r != NULL ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    const char *sev = r != NULL ? PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED) : NULL;

    if (r == NULL || state == NULL || PQstatus(c->pg) != CONNECTION_OK)
        return true;
    if (strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0)
        return true;
    return sev != NULL && (strcmp(sev, "FATAL") == 0 || strcmp(sev, "PANIC") == 0);
}

static int pg_commit(void *conn)
{
    struct pg_conn *c = conn;
    PGresult *r = PQexec(c->pg, "COMMIT");

    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        if (is_commit_in_doubt(c, r)) {
            log_error("COMMIT: the outcome is unknown",
                      r != NULL ? PQresultErrorMessage(r) : PQerrorMessage(c->pg));
            PQclear(r);
            return LEDGER_DB_IN_DOUBT;
        }
        return result_error(c, r, "COMMIT");
    }
    /* COMMIT of a transaction that met an error ends it as a ROLLBACK,
     * without an error. */
    if (strcmp(PQcmdStatus(r), "COMMIT") != 0) {
        CR_LOG(CR_LOG_ERROR, "postgresql: COMMIT ended as %s", PQcmdStatus(r));
        PQclear(r);
        return -EIO;
    }
    PQclear(r);
    return 0;
}

static int pg_rollback(void *conn)
{
    return exec_command(conn, "ROLLBACK");
}

/* SELECT ... FOR UPDATE of the ids, in id order (the ORDER BY makes the
 * row locks come in that order). The ids go as one int8[] literal. */
static int pg_lock(void *conn, const uint64_t *ids, size_t n)
{
    struct pg_conn *c = conn;
    size_t cap = n * 21 + 3;
    char *arr = malloc(cap);
    const char *values[1];
    size_t len = 0;
    PGresult *r;
    int err = 0;

    if (arr == NULL)
        return -EIO;
    arr[len++] = '{';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(arr + len, cap - len, "%s%llu", i > 0 ? "," : "",
                                (unsigned long long)ids[i]);
    arr[len++] = '}';
    arr[len] = '\0';
    values[0] = arr;
    r = PQexecParams(c->pg,
                     "SELECT id FROM accounts WHERE id = ANY($1::int8[]) ORDER BY id FOR UPDATE", 1,
                     NULL, values, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        err = result_error(c, r, "lock accounts");
    else
        PQclear(r);
    free(arr);
    return err;
}

static int pg_savepoint(void *conn)
{
    return exec_command(conn, "SAVEPOINT u");
}

static int pg_rollback_to(void *conn)
{
    return exec_command(conn, "ROLLBACK TO SAVEPOINT u");
}

static int pg_release(void *conn)
{
    return exec_command(conn, "RELEASE SAVEPOINT u");
}

/* The status of a debit that changed no row: whose account is missing, or
 * whose balance is short. */
static int debit_failed(struct pg_conn *c, uint64_t account, uint16_t *status)
{
    bool found;
    int64_t balance;
    int err = exec_id(c, ST_ACCOUNT, account, 0, &found, &balance);

    if (err == 0)
        *status = found ? OLTP_ST_INSUFFICIENT : OLTP_ST_NO_ACCOUNT;
    return err;
}

static int debit(struct pg_conn *c, uint64_t account, int64_t amount, uint16_t *status,
                 int64_t *balance)
{
    bool found;
    int err = exec_id(c, ST_DEBIT, account, amount, &found, balance);

    if (err == 0 && !found)
        err = debit_failed(c, account, status);
    return err;
}

static int credit(struct pg_conn *c, uint64_t account, int64_t amount, uint16_t *status,
                  int64_t *balance)
{
    bool found;
    int err = exec_id(c, ST_CREDIT, account, amount, &found, balance);

    if (err == 0 && !found)
        *status = OLTP_ST_NO_ACCOUNT;
    return err;
}

/* Locks (updates) the lower account id first: see the file comment. */
static int transfer(struct pg_conn *c, const struct ledger_op *op, uint16_t *status,
                    int64_t *balance)
{
    int64_t to_balance;
    int err;

    if (op->account < op->to) {
        err = debit(c, op->account, op->amount, status, balance);
        if (err == 0 && *status == OLTP_ST_OK)
            err = credit(c, op->to, op->amount, status, &to_balance);
    } else {
        err = credit(c, op->to, op->amount, status, &to_balance);
        if (err == 0 && *status == OLTP_ST_OK)
            err = debit(c, op->account, op->amount, status, balance);
    }
    return err;
}

/* The other account a txns row stores for op. */
static uint64_t other_of(const struct ledger_op *op)
{
    return op->op == OLTP_OP_TRANSFER ? op->to : 0;
}

/*
 * A keyed op's row, if its key has one: *found, with *status OK and the
 * stored balance_after when the row is this op, else KEY_REUSED.
 */
static int find_key(struct pg_conn *c, const struct ledger_op *op, bool *found, uint16_t *status,
                    int64_t *balance)
{
    struct params p;
    PGresult *r;
    int err;

    param_key(&p, 0, op->key);
    err = exec_stmt(c, ST_KEY, &p, &r);
    if (err < 0)
        return err;
    *found = PQntuples(r) > 0;
    if (*found) {
        bool same = get_int(r, 0, 0) == op->op && (uint64_t)get_int(r, 0, 1) == op->account &&
                    (uint64_t)get_int(r, 0, 2) == other_of(op) && get_int(r, 0, 3) == op->amount;

        if (same)
            *balance = get_int(r, 0, 4);
        else
            *status = OLTP_ST_KEY_REUSED;
    }
    PQclear(r);
    return 0;
}

static int log_txn(struct pg_conn *c, const struct ledger_op *op, int64_t balance)
{
    struct params p;
    PGresult *r;
    int err;

    param_key(&p, 0, op->key);
    param_i64(&p, 1, op->op);
    param_i64(&p, 2, (int64_t)op->account);
    param_i64(&p, 3, (int64_t)other_of(op));
    param_i64(&p, 4, op->amount);
    param_i64(&p, 5, balance);
    err = exec_stmt(c, ST_LOG, &p, &r);
    if (err == 0)
        PQclear(r);
    return err;
}

static int pg_apply(void *conn, const struct ledger_op *op, uint16_t *status, int64_t *balance)
{
    struct pg_conn *c = conn;
    bool found = false;
    int err;

    *status = OLTP_ST_OK;
    *balance = 0;
    if (op->op == OLTP_OP_OPEN) {
        err = exec_id(c, ST_OPEN, op->account, 0, &found, balance);
        if (err == 0 && !found)
            *status = OLTP_ST_EXISTS;
        return err;
    }
    if (op->op != OLTP_OP_DEPOSIT && op->op != OLTP_OP_WITHDRAW && op->op != OLTP_OP_TRANSFER) {
        *status = OLTP_ST_UNKNOWN_OP;
        return 0;
    }
    if (has_key(op->key)) {
        err = find_key(c, op, &found, status, balance);
        if (err < 0 || found)
            return err;
    }
    if (op->op == OLTP_OP_DEPOSIT)
        err = credit(c, op->account, op->amount, status, balance);
    else if (op->op == OLTP_OP_WITHDRAW)
        err = debit(c, op->account, op->amount, status, balance);
    else
        err = transfer(c, op, status, balance);
    if (err < 0 || *status != OLTP_ST_OK)
        return err;
    return log_txn(c, op, *balance);
}

static int pg_balance(void *conn, uint64_t account, int64_t *balance)
{
    struct pg_conn *c = conn;
    bool found;
    int err = ensure_ready(c);

    if (err == 0)
        err = exec_id(c, ST_ACCOUNT, account, 0, &found, balance);
    if (err == 0 && !found)
        err = -ENOENT;
    return err;
}

static int pg_history(void *conn, uint64_t account, struct oltp_hist *out, unsigned max,
                      unsigned *n)
{
    struct pg_conn *c = conn;
    struct params p;
    PGresult *r;
    int rows;
    int err = ensure_ready(c);

    *n = 0;
    if (err < 0)
        return err;
    param_i64(&p, 0, (int64_t)account);
    param_i64(&p, 1, max);
    err = exec_stmt(c, ST_HISTORY, &p, &r);
    if (err < 0)
        return err;
    rows = PQntuples(r);
    for (int i = 0; i < rows && (unsigned)i < max; i++) {
        int64_t amount = get_int(r, i, 4);
        uint64_t from = (uint64_t)get_int(r, i, 2);
        struct oltp_hist *h = &out[i];

        h->txn = (uint64_t)get_int(r, i, 0);
        switch (get_int(r, i, 1)) {
        case OLTP_OP_DEPOSIT:
            h->delta = amount;
            h->other = 0;
            break;
        case OLTP_OP_WITHDRAW:
            h->delta = -amount;
            h->other = 0;
            break;
        default:
            h->delta = from == account ? -amount : amount;
            h->other = from == account ? (uint64_t)get_int(r, i, 3) : from;
            break;
        }
        *n = (unsigned)i + 1;
    }
    PQclear(r);
    if (rows == 0) {
        int64_t balance;

        err = pg_balance(c, account, &balance);
    }
    return err;
}

static int pg_totals(void *conn, int64_t *sum, uint64_t *accounts, uint64_t *negative)
{
    struct pg_conn *c = conn;
    PGresult *r;
    int err = ensure_ready(c);

    if (err == 0)
        err = exec_stmt(c, ST_TOTALS, NULL, &r);
    if (err < 0)
        return err;
    *sum = get_int(r, 0, 0);
    *accounts = (uint64_t)get_int(r, 0, 1);
    *negative = (uint64_t)get_int(r, 0, 2);
    PQclear(r);
    return 0;
}

/*
 * Streams the rows (single-row mode), so that a checker's walk over a long
 * run's txns needs no memory for all of them at once. After fn stops the
 * walk, the rest of the result is still read and dropped: the connection
 * takes no other query before.
 */
static int pg_each_keyed(void *conn, ledger_db_row_fn *fn, void *arg)
{
    struct pg_conn *c = conn;
    PGresult *r;
    int err = ensure_ready(c);

    if (err < 0)
        return err;
    if (!PQsendQueryPrepared(c->pg, stmts[ST_KEYED].name, 0, NULL, NULL, NULL, 1)) {
        log_error("keyed", PQerrorMessage(c->pg));
        return -EIO;
    }
    if (!PQsetSingleRowMode(c->pg))
        CR_LOG(CR_LOG_DEBUG, "postgresql: no single-row mode; keyed rows come at once");
    while ((r = PQgetResult(c->pg)) != NULL) {
        ExecStatusType s = PQresultStatus(r);

        if (s != PGRES_SINGLE_TUPLE && s != PGRES_TUPLES_OK) {
            int e = result_error(c, r, "keyed");

            err = err != 0 ? err : e;
            continue;
        }
        for (int i = 0; i < PQntuples(r) && err == 0; i++) {
            struct ledger_op row = {.op = (uint8_t)get_int(r, i, 1)};
            int len = PQgetlength(r, i, 0);

            memcpy(row.key, PQgetvalue(r, i, 0),
                   len < OLTP_KEY_SIZE ? (size_t)len : (size_t)OLTP_KEY_SIZE);
            row.account = (uint64_t)get_int(r, i, 2);
            row.to = (uint64_t)get_int(r, i, 3);
            row.amount = get_int(r, i, 4);
            err = fn(arg, &row, get_int(r, i, 5));
        }
        PQclear(r);
    }
    return err;
}

const struct ledger_backend_ops ledger_backend_pg = {
    .name = "postgresql",
    .connect = pg_connect,
    .disconnect = pg_disconnect,
    .schema = pg_schema,
    .begin = pg_begin,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .lock = pg_lock,
    .savepoint = pg_savepoint,
    .rollback_to = pg_rollback_to,
    .release = pg_release,
    .apply = pg_apply,
    .balance = pg_balance,
    .history = pg_history,
    .totals = pg_totals,
    .each_keyed = pg_each_keyed,
};

#else /* !CR_HAVE_LIBPQ */

/* A build without libpq: ledger_db_open of a PostgreSQL url fails with
 * -ENOSYS from connect; nothing else is ever called. */
static int pg_connect(const struct ledger_db_config *cfg, void **conn)
{
    (void)cfg;
    *conn = NULL;
    CR_LOG(CR_LOG_ERROR, "postgresql: this build has no libpq");
    return -ENOSYS;
}

static void pg_disconnect(void *conn)
{
    (void)conn;
}

const struct ledger_backend_ops ledger_backend_pg = {
    .name = "postgresql",
    .connect = pg_connect,
    .disconnect = pg_disconnect,
};

#endif /* CR_HAVE_LIBPQ */
