/*
 * ledger_db_internal.h - what ledger_db.c (thread-local connections, group
 * commit, retries) asks of a database backend: ledger_db_sqlite.c and
 * ledger_db_pg.c, one const struct ledger_backend_ops each. A backend
 * connection is used by one thread at a time.
 *
 * Transient failures - SQLITE_BUSY past the busy timeout, PostgreSQL
 * serialization failures (40001), deadlocks (40P01) and unique violations
 * on the key (23505, another ledger applied the same key first) - return
 * -EAGAIN from the call that met them; ledger_db.c then rolls the whole
 * transaction back and runs it again (every unit of the batch), which is
 * safe because no caller has its result before the commit. Anything else
 * is -EIO, logged by the backend with the database's message, except:
 *
 * - LEDGER_DB_IN_DOUBT, from commit only: the transaction may or may not
 *   be durable (PostgreSQL's connection was lost before COMMIT's answer).
 * - LEDGER_DB_BROKEN, from any call: the storage failed under it (SQLite's
 *   I/O errors, a failed fsync among them, and corruption), so the state of
 *   the file is unknown. From commit it also means in doubt; from any other
 *   call, that the transaction did not commit. ledger_db.c then refuses
 *   every request of the db until it is opened again (docs/oltp.md says why).
 *
 * docs/oltp.md has the table of each backend's error paths and the status
 * each one yields.
 */
#define LEDGER_DB_IN_DOUBT (-EINPROGRESS)
#define LEDGER_DB_BROKEN   (-EUCLEAN)
#ifndef CABRANK_OLTP_LEDGER_DB_INTERNAL_H
#define CABRANK_OLTP_LEDGER_DB_INTERNAL_H

#include "ledger_db.h"

#include <errno.h>

struct ledger_backend_ops {
    const char *name; /* "sqlite", "postgresql" */
    /* Opens a connection for url (cfg of ledger_db_open). */
    int (*connect)(const struct ledger_db_config *cfg, void **conn);
    void (*disconnect)(void *conn);
    /* Optional. The db has failed (LEDGER_DB_BROKEN): conn's disconnect,
     * which follows, must not trust the storage (SQLite: no checkpoint, so
     * the WAL stays for the next open's recovery). */
    void (*fence)(void *conn);
    /* CREATE TABLE IF NOT EXISTS ...; run once, on the first connection. */
    int (*schema)(void *conn);
    /* A write transaction: SQLite BEGIN IMMEDIATE; PostgreSQL BEGIN
     * (READ COMMITTED: rows are locked by the UPDATEs, in account order). */
    int (*begin)(void *conn);
    /* 0 once durable; -EAGAIN, -EIO (not committed), LEDGER_DB_IN_DOUBT or
     * LEDGER_DB_BROKEN (either way the outcome is unknown). */
    int (*commit)(void *conn);
    /* Also called after a begin or commit that failed, when the database
     * may have ended the transaction itself: then it just returns 0. */
    int (*rollback)(void *conn);
    /*
     * Optional (NULL: the database serializes writers itself, as SQLite's
     * BEGIN IMMEDIATE does). Right after begin: locks the accounts ids[0..n)
     * (sorted, distinct) for the rest of the transaction. Every writer
     * taking its whole transaction's accounts in increasing id order first,
     * two ledgers never deadlock, whatever the order of the ops in their
     * units and batches.
     */
    int (*lock)(void *conn, const uint64_t *ids, size_t n);
    /* One savepoint at a time, around each unit of a group commit.
     * ledger_db.c calls savepoint, the unit's applies, then release when
     * they succeeded, or rollback_to and then release when one failed:
     * rollback_to undoes the unit and leaves the savepoint open (as SQL's
     * ROLLBACK TO does), release closes it. */
    int (*savepoint)(void *conn);
    int (*rollback_to)(void *conn);
    int (*release)(void *conn);
    /*
     * Inside a transaction: applies one op. 0 with *status OLTP_ST_OK and
     * *balance (after; TRANSFER: of from), or 0 with an error status
     * (NO_ACCOUNT, EXISTS, INSUFFICIENT, KEY_REUSED: the caller rolls the
     * unit back), or -EAGAIN / -EIO. A keyed op whose key has a row returns
     * that row's balance_after (or KEY_REUSED) and changes nothing. A
     * TRANSFER updates its two accounts in increasing id order, so two
     * ledgers never deadlock on them.
     */
    int (*apply)(void *conn, const struct ledger_op *op, uint16_t *status, int64_t *balance);
    /* Reads, outside any transaction (ledger_db.h has their contracts). */
    int (*balance)(void *conn, uint64_t account, int64_t *balance);
    int (*history)(void *conn, uint64_t account, struct oltp_hist *out, unsigned max, unsigned *n);
    int (*totals)(void *conn, int64_t *sum, uint64_t *accounts, uint64_t *negative);
    int (*each_keyed)(void *conn, ledger_db_row_fn *fn, void *arg);
};

extern const struct ledger_backend_ops ledger_backend_sqlite;
/* Defined in every build; without libpq its connect returns -ENOSYS. */
extern const struct ledger_backend_ops ledger_backend_pg;

#endif /* CABRANK_OLTP_LEDGER_DB_INTERNAL_H */
