/*
 * ledger_db.h - the ledger's database: accounts, balances that
 * never go negative, a transaction log with idempotency keys, over SQLite
 * (embedded, one file, WAL, synchronous=FULL) or PostgreSQL (libpq), so
 * that several ledgers can share one database.
 *
 * Every write is a unit of ops applied atomically (all or none) and durable
 * before ledger_db_apply (or ledger_db_apply_batch, for several units at
 * once) returns: the caller replies only then.
 *
 * Group commit (cfg.group_commit): concurrent ledger_db_apply calls share
 * one database transaction and so one fsync. The first caller to find no
 * commit in progress leads: it takes the units queued so far (up to
 * cfg.max_batch, whole calls only), opens one transaction, applies each unit
 * under its own savepoint (a unit that fails, say for insufficient funds, is
 * rolled back to its savepoint alone and gets its error), commits once, and
 * wakes each caller with its own results; units that arrive meanwhile wait
 * for the next leader (one of them). A caller still returns only after the
 * commit holding its units is durable. Without group commit each unit is its
 * own transaction and fsync.
 *
 * ledger_db_apply_batch queues all the units of one call at once, so one
 * thread - say one serving a connection that pipelines its writes - fills
 * a group commit as well as that many threads would.
 *
 * Connections: each calling thread uses its own connection, opened on its
 * first call (thread-local, keyed by the ledger_db) and closed by
 * ledger_db_close; the group commit leader runs the batch on its own.
 *
 * Schema (created if missing; the same tables in both databases):
 *   accounts(id PRIMARY KEY, balance NOT NULL CHECK (balance >= 0))
 *   txns(id PRIMARY KEY (increasing), key UNIQUE NULL, op, account, other,
 *        amount, balance_after)
 *   one txns row per applied DEPOSIT, WITHDRAW, TRANSFER (account = from).
 * An op with a key whose row exists is not applied again: it succeeds with
 * the stored balance_after (a retry after a failover), or fails with
 * OLTP_ST_KEY_REUSED if its op, accounts or amount differ.
 */
#ifndef CABRANK_OLTP_LEDGER_DB_H
#define CABRANK_OLTP_LEDGER_DB_H

#include "proto.h"

#include <cabrank/common.h>

struct ledger_db;

#define LEDGER_DB_MAX_BATCH_DEFAULT 256

struct ledger_db_config {
    /* "postgresql://..." or "postgres://..." (libpq), else a SQLite file
     * path ("sqlite:PATH" also accepted). Required. Borrowed. */
    const char *url;
    bool group_commit;
    /* Most units one group commit takes, and one ledger_db_apply_batch
     * call may pass; 0 = LEDGER_DB_MAX_BATCH_DEFAULT. */
    unsigned max_batch;
    /* SQLite: busy timeout per statement, ms; 0 = 10000. */
    unsigned busy_timeout_ms;
};

/* One write: what oltp_req carries for OPEN, DEPOSIT, WITHDRAW, TRANSFER. */
struct ledger_op {
    uint8_t op;       /* OLTP_OP_OPEN, _DEPOSIT, _WITHDRAW, _TRANSFER */
    uint64_t account; /* TRANSFER: from */
    uint64_t to;
    int64_t amount;
    uint8_t key[OLTP_KEY_SIZE]; /* all zero: none */
};

/* One unit of ledger_db_apply_batch: ops[0..nops), applied atomically. */
struct ledger_unit {
    const struct ledger_op *ops;
    size_t nops;
};

/* The outcome of one unit: status OLTP_ST_OK, or the first failing op's
 * status (then nothing of the unit was applied) and its index. balance is
 * the last op's balance_after on success. */
struct ledger_result {
    uint16_t status;
    unsigned failed_op;
    int64_t balance;
};

struct ledger_db_stats {
    uint64_t units;     /* units that reached the database and ended (either outcome) */
    uint64_t commits;   /* database commits (fsyncs): < units under group commit */
    uint64_t max_batch; /* the most units one commit carried */
    uint64_t retries;   /* busy/serialization retries */
};

/*
 * Opens (and creates the schema of) the database. 0, -EINVAL (bad url),
 * -EIO (the database refused; the reason is logged), -ENOMEM, -ENOSYS (a
 * PostgreSQL url in a build without libpq). *out returns owned. Thread-safe.
 */
CR_MUST_CHECK int ledger_db_open(struct ledger_db **out, const struct ledger_db_config *cfg);

/* Closes every thread's connection. No call may run or follow. NULL-safe.
 * Owner thread only. */
void ledger_db_close(struct ledger_db *db);

/*
 * Applies ops[0..n) (1 <= n <= OLTP_MAX_SESSION_OPS) as one atomic unit and
 * returns once it is durable, or once it failed: res says which. Returns 0
 * (see res->status), or -EIO or -ESHUTDOWN as ledger_db_apply_batch does,
 * res->status saying what the unit's reply is. Thread-safe; blocks.
 */
CR_MUST_CHECK int ledger_db_apply(struct ledger_db *db, const struct ledger_op *ops, size_t n,
                                  struct ledger_result *res);

/*
 * Applies units[0..n) (1 <= n <= cfg.max_batch; each unit's nops 1..
 * OLTP_MAX_SESSION_OPS), each as its own atomic unit with its own outcome in
 * res[i] (res: n results, returns owned by the caller), and returns once every
 * one of them is durable or failed. A unit that fails is undone alone; the
 * others are applied as if each were a ledger_db_apply call of its own, in
 * array order. Under group commit all n are queued at once and share a
 * commit with each other and with other callers' units; without, they run
 * one after the other. ledger_db_apply is the call with n == 1. Returns 0
 * (see each res[i].status), -EINVAL (n or a nops out of range: nothing
 * applied, every res[i].status OLTP_ST_INTERNAL), -EIO when the database
 * failed for some unit (under group commit that is all n), or -ESHUTDOWN
 * when the db has failed (ledger_db_is_failed) before the units reached it.
 * A unit the database failed says:
 * - OLTP_ST_INTERNAL when it is known not to be applied (the transaction
 *   failed before its commit, or the database refused the commit);
 * - OLTP_ST_IN_DOUBT when its commit's outcome is unknown (SQLite's sync
 *   failed, PostgreSQL's connection was lost at COMMIT): it may be durable
 *   or not, and only reading the database after recovery tells;
 * - OLTP_ST_UNAVAILABLE when the db had failed before: not applied.
 * Thread-safe; blocks.
 */
CR_MUST_CHECK int ledger_db_apply_batch(struct ledger_db *db, const struct ledger_unit *units,
                                        size_t n, struct ledger_result *res);

/*
 * Whether the db refuses every request: its storage failed (an I/O error,
 * such as a failed fsync, or corruption) so the state of its file is
 * unknown, and only opening it again (a restart of the ledger, whose
 * database then recovers from its log) makes it usable. Set once, never
 * cleared; logged when it is set. Thread-safe.
 */
bool ledger_db_is_failed(struct ledger_db *db);

/* The balance of account: 0 with *balance, -ENOENT, -EIO, -ESHUTDOWN (the
 * db has failed). Thread-safe. */
CR_MUST_CHECK int ledger_db_balance(struct ledger_db *db, uint64_t account, int64_t *balance);

/*
 * Up to max of account's txns rows, newest first (delta: + for money in, -
 * out; other: the other account of a transfer, else 0). 0 with *n, -ENOENT
 * (no such account), -EIO, -ESHUTDOWN (the db has failed). Thread-safe.
 */
CR_MUST_CHECK int ledger_db_history(struct ledger_db *db, uint64_t account, struct oltp_hist *out,
                                    unsigned max, unsigned *n);

/* For the checker. The sum of every balance, how many accounts and how many
 * of them are negative (never, by the CHECK). 0, -EIO or -ESHUTDOWN (the db
 * has failed). Thread-safe. */
CR_MUST_CHECK int ledger_db_totals(struct ledger_db *db, int64_t *sum, uint64_t *accounts,
                                   uint64_t *negative);

/* For the checker: calls fn once per txns row that has a key. 0, -EIO, or
 * what fn returned if not 0 (which stops the walk). Thread-safe. */
typedef int ledger_db_row_fn(void *arg, const struct ledger_op *row, int64_t balance_after);
CR_MUST_CHECK int ledger_db_each_keyed(struct ledger_db *db, ledger_db_row_fn *fn, void *arg);

void ledger_db_stats(struct ledger_db *db, struct ledger_db_stats *st);

#endif /* CABRANK_OLTP_LEDGER_DB_H */
