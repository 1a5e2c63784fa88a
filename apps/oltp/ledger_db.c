/*
 * ledger_db.c - the ledger's database, the part every backend shares
 * (ledger_db.h): the url picks the backend (ledger_db_sqlite.c or
 * ledger_db_pg.c), each calling thread gets its own connection (a pthread
 * key per ledger_db; every connection is also on the db's list, so that
 * ledger_db_close closes them all, whichever thread opened them, and a
 * thread that exits leaves its connection there for the next new thread),
 * units are applied as their own transaction or by group commit,
 * transactions that met a transient failure (-EAGAIN) are rolled back and
 * run again. Called by the ledger's worker threads; owns the connections.
 * Threads that used a db must not be exiting while ledger_db_close runs.
 *
 * Group commit: a queue of waiters under gc_lock, one per call, each
 * holding that call's units (one for ledger_db_apply, n for
 * ledger_db_apply_batch) and a condition variable, on its caller's stack.
 * The caller that finds no leader leads: it cuts whole waiters off the head
 * of the queue (its own is the head) while their units fit in max_batch, so
 * a call's units always share one commit and a batch never exceeds the
 * bound (n <= max_batch is checked on entry), runs them in one transaction
 * on its own connection with gc_lock released, then, under gc_lock again,
 * marks each waiter done, wakes its caller, and hands leadership to the
 * waiter now at the head, if any. So each leader runs exactly one batch,
 * the one holding its own units, and returns: nobody leads forever, and
 * every caller returns as soon as the commit holding its units is durable.
 *
 * Failure: a backend that meets LEDGER_DB_BROKEN (its storage failed, say a
 * failed fsync) fails the whole db: every request from then on is refused
 * (-ESHUTDOWN, status OLTP_ST_UNAVAILABLE), and its connections close
 * without trusting the storage again (the backend's fence). A commit whose
 * outcome is unknown answers OLTP_ST_IN_DOUBT, never OLTP_ST_INTERNAL.
 *
 * Lock order: conns_lock and gc_lock are never held together.
 */
#include "ledger_db_internal.h"

#include <cabrank/log.h>

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Tries of one transaction before a unit fails with -EIO. SQLite meets
 * -EAGAIN only past its busy timeout, PostgreSQL on conflicts that a rerun
 * resolves: this bounds a livelock, it is not a tuning knob. */
#define MAX_ATTEMPTS 16

/* A connection; on db->conns until ledger_db_close. A thread holds it
 * from its first call until it exits (then the key's destructor frees it
 * for the next new thread: a thread-per-connection server must not open a
 * database connection per client). */
struct conn_slot {
    /* Immutable after creation. */
    struct ledger_db *db;
    void *conn;
    /* Protected by db->conns_lock. */
    struct conn_slot *next;
    bool in_use;
};

/* One call's units waiting in the group commit queue (or, without group
 * commit, one unit run alone). Lives on its caller's stack until it
 * returns. */
struct waiter {
    /* Immutable once queued. */
    const struct ledger_unit *units;
    size_t n;
    struct ledger_result *res; /* res[0..n): written by the leader running
                                  the waiter, read by its caller once done */
    pthread_cond_t cond;
    /* Protected by db->gc_lock. */
    struct waiter *next;
    int err;
    bool done;
    bool lead;
};

struct ledger_db {
    /* Immutable after open. */
    const struct ledger_backend_ops *ops;
    struct ledger_db_config cfg; /* cfg.url points at url */
    char *url;
    pthread_key_t key; /* -> this thread's struct conn_slot */

    pthread_mutex_t conns_lock;
    /* Protected by conns_lock. */
    struct conn_slot *conns;

    pthread_mutex_t gc_lock;
    /* Protected by gc_lock. */
    struct waiter *head;
    struct waiter *tail;
    bool leading;

    /* Set once by note_err (release), read by is_failed (acquire). */
    bool failed;

    /* Relaxed atomics: counters read only for ledger_db_stats. */
    struct ledger_db_stats stats;
};

static void stat_add(uint64_t *counter, uint64_t n)
{
    __atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

static void stat_max(uint64_t *counter, uint64_t v)
{
    uint64_t cur = __atomic_load_n(counter, __ATOMIC_RELAXED);

    while (cur < v &&
           !__atomic_compare_exchange_n(counter, &cur, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* Spreads reruns of conflicting transactions apart (at most ~10 ms). */
static void backoff(unsigned attempt)
{
    struct timespec ts = {.tv_nsec = (long)(attempt < 50 ? attempt : 50) * 200000L};

    nanosleep(&ts, NULL);
}

static bool is_failed(struct ledger_db *db)
{
    return __atomic_load_n(&db->failed, __ATOMIC_ACQUIRE);
}

/* Fails db for good when err says its storage failed (the top of the file);
 * the first to do so logs why. Returns err. */
static int note_err(struct ledger_db *db, int err)
{
    if (err == LEDGER_DB_BROKEN && !__atomic_exchange_n(&db->failed, true, __ATOMIC_RELEASE))
        CR_LOG(CR_LOG_ERROR,
               "ledger_db: the %s database's storage failed (an I/O error, such as a failed "
               "sync): its state is unknown, so every request is refused from now on; "
               "restart the ledger to recover the database from its log",
               db->ops->name);
    return err;
}

bool ledger_db_is_failed(struct ledger_db *db)
{
    return is_failed(db);
}

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The backend for url: 0, -EINVAL, -ENOSYS. */
static int pick_backend(const char *url, const struct ledger_backend_ops **ops)
{
    if (has_prefix(url, "postgresql://") || has_prefix(url, "postgres://")) {
        /* Without libpq its connect says -ENOSYS. */
        *ops = &ledger_backend_pg;
        return 0;
    }
    if (has_prefix(url, "sqlite:")) {
        if (url[strlen("sqlite:")] == '\0')
            return -EINVAL;
    } else if (url[0] == '\0' || strstr(url, "://") != NULL) {
        /* An empty path, or a scheme we do not speak. */
        return -EINVAL;
    }
    *ops = &ledger_backend_sqlite;
    return 0;
}

/* The key's destructor, run by an exiting thread that used the db. */
static void release_slot(void *arg)
{
    struct conn_slot *slot = arg;
    struct ledger_db *db = slot->db;

    pthread_mutex_lock(&db->conns_lock);
    slot->in_use = false;
    pthread_mutex_unlock(&db->conns_lock);
}

/* This thread's connection to db: the one it holds, one an exited thread
 * left, or a new one. 0, -ENOMEM, -EIO... */
static int thread_conn(struct ledger_db *db, void **conn)
{
    struct conn_slot *slot = pthread_getspecific(db->key);
    int err;

    if (slot != NULL) {
        *conn = slot->conn;
        return 0;
    }
    pthread_mutex_lock(&db->conns_lock);
    for (slot = db->conns; slot != NULL && slot->in_use; slot = slot->next)
        ;
    if (slot != NULL)
        slot->in_use = true;
    pthread_mutex_unlock(&db->conns_lock);
    if (slot == NULL) {
        slot = calloc(1, sizeof(*slot));
        if (slot == NULL)
            return -ENOMEM;
        slot->db = db;
        slot->in_use = true;
        err = db->ops->connect(&db->cfg, &slot->conn);
        if (err < 0) {
            free(slot);
            return err;
        }
        pthread_mutex_lock(&db->conns_lock);
        slot->next = db->conns;
        db->conns = slot;
        pthread_mutex_unlock(&db->conns_lock);
    }
    err = -pthread_setspecific(db->key, slot);
    if (err < 0) {
        release_slot(slot);
        return err;
    }
    *conn = slot->conn;
    return 0;
}

int ledger_db_open(struct ledger_db **out, const struct ledger_db_config *cfg)
{
    struct ledger_db *db;
    void *conn;
    int err;

    *out = NULL;
    if (cfg == NULL || cfg->url == NULL)
        return -EINVAL;
    db = calloc(1, sizeof(*db));
    if (db == NULL)
        return -ENOMEM;
    err = pick_backend(cfg->url, &db->ops);
    if (err < 0)
        goto out_free_db;
    db->url = strdup(cfg->url);
    if (db->url == NULL) {
        err = -ENOMEM;
        goto out_free_db;
    }
    db->cfg = *cfg;
    db->cfg.url = db->url;
    if (db->cfg.max_batch == 0)
        db->cfg.max_batch = LEDGER_DB_MAX_BATCH_DEFAULT;
    if (db->cfg.busy_timeout_ms == 0)
        db->cfg.busy_timeout_ms = 10000;
    err = -pthread_key_create(&db->key, release_slot);
    if (err < 0)
        goto out_free_url;
    pthread_mutex_init(&db->conns_lock, NULL);
    pthread_mutex_init(&db->gc_lock, NULL);
    /* The opener's connection creates the schema: a database that refuses
     * us is reported here, not at the first request. */
    err = thread_conn(db, &conn);
    for (unsigned attempt = 1; err == 0; attempt++) {
        err = db->ops->schema(conn);
        if (err != -EAGAIN || attempt == MAX_ATTEMPTS)
            break;
        backoff(attempt);
    }
    if (err < 0) {
        ledger_db_close(db);
        return err == -EAGAIN || err == LEDGER_DB_BROKEN ? -EIO : err;
    }
    *out = db;
    return 0;

out_free_url:
    free(db->url);
out_free_db:
    free(db);
    return err;
}

void ledger_db_close(struct ledger_db *db)
{
    struct conn_slot *slot;

    if (db == NULL)
        return;
    assert(db->head == NULL);
    /* First, so that no thread exiting from now on runs release_slot on a
     * slot about to be freed. The threads still alive that used db keep a
     * dead value under a deleted key, which nobody reads. */
    pthread_key_delete(db->key);
    while ((slot = db->conns) != NULL) {
        db->conns = slot->next;
        if (is_failed(db) && db->ops->fence != NULL)
            db->ops->fence(slot->conn);
        db->ops->disconnect(slot->conn);
        free(slot);
    }
    pthread_mutex_destroy(&db->gc_lock);
    pthread_mutex_destroy(&db->conns_lock);
    free(db->url);
    free(db);
}

static bool is_account(uint64_t id)
{
    return id >= 1 && id <= OLTP_MAX_ACCOUNT;
}

/* The status of an op the database need not see, or OLTP_ST_OK. */
static uint16_t check_op(const struct ledger_op *op)
{
    switch (op->op) {
    case OLTP_OP_OPEN:
        return is_account(op->account) ? OLTP_ST_OK : OLTP_ST_BAD_ACCOUNT;
    case OLTP_OP_TRANSFER:
        if (!is_account(op->to) || op->to == op->account)
            return OLTP_ST_BAD_ACCOUNT;
        /* fall through */
    case OLTP_OP_DEPOSIT:
    case OLTP_OP_WITHDRAW:
        if (!is_account(op->account))
            return OLTP_ST_BAD_ACCOUNT;
        if (op->amount <= 0 || op->amount > OLTP_MAX_AMOUNT)
            return OLTP_ST_BAD_AMOUNT;
        return OLTP_ST_OK;
    default:
        return OLTP_ST_UNKNOWN_OP;
    }
}

/* Checks u's ops: true when the database need see it, else false with
 * *res the first bad op's status. Pure, so it is asked again at each use
 * rather than remembered. */
static bool is_db_unit(const struct ledger_unit *u, struct ledger_result *res)
{
    for (size_t i = 0; i < u->nops; i++) {
        uint16_t status = check_op(&u->ops[i]);

        if (status != OLTP_ST_OK) {
            res->status = status;
            res->failed_op = (unsigned)i;
            res->balance = 0;
            return false;
        }
    }
    return true;
}

/* Applies u's ops inside the open transaction: 0 with *res (an error
 * status: the caller undoes the unit), or -EAGAIN / -EIO. */
static int apply_unit(struct ledger_db *db, void *conn, const struct ledger_unit *u,
                      struct ledger_result *res)
{
    res->status = OLTP_ST_OK;
    res->failed_op = 0;
    res->balance = 0;
    for (size_t i = 0; i < u->nops; i++) {
        uint16_t status;
        int64_t balance;
        int err = db->ops->apply(conn, &u->ops[i], &status, &balance);

        if (err < 0)
            return err;
        if (status != OLTP_ST_OK) {
            res->status = status;
            res->failed_op = (unsigned)i;
            res->balance = 0;
            return 0;
        }
        res->balance = balance;
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

/* The backend's lock of every account the batch from first touches, sorted
 * and distinct (ledger_db_internal.h says why). 0, -EAGAIN, -EIO. */
static int lock_accounts(struct ledger_db *db, void *conn, struct waiter *first)
{
    size_t cap = 0;
    size_t n = 0;
    uint64_t *ids;
    int err;

    for (struct waiter *w = first; w != NULL; w = w->next) {
        for (size_t i = 0; i < w->n; i++)
            cap += 2 * w->units[i].nops;
    }
    if (cap == 0)
        return 0;
    ids = malloc(cap * sizeof(*ids));
    if (ids == NULL)
        return -EIO;
    for (struct waiter *w = first; w != NULL; w = w->next) {
        for (size_t i = 0; i < w->n; i++) {
            for (size_t k = 0; k < w->units[i].nops; k++) {
                const struct ledger_op *op = &w->units[i].ops[k];

                ids[n++] = op->account;
                if (op->op == OLTP_OP_TRANSFER)
                    ids[n++] = op->to;
            }
        }
    }
    qsort(ids, n, sizeof(*ids), cmp_u64);
    cap = 0;
    for (size_t i = 0; i < n; i++) {
        if (cap == 0 || ids[cap - 1] != ids[i])
            ids[cap++] = ids[i];
    }
    err = db->ops->lock(conn, ids, cap);
    free(ids);
    return err;
}

/*
 * One try of the transaction holding the units of the waiters from first (a
 * batch, each unit under its own savepoint, when grouped; else first holds
 * one unit, run without savepoint). Units the database need not see are
 * skipped. 0 when committed (or, for a lone unit that failed, rolled back),
 * else -EAGAIN / -EIO with the transaction rolled back, or LEDGER_DB_IN_DOUBT
 * when the commit's outcome is unknown. Fails db on LEDGER_DB_BROKEN.
 */
static int try_batch(struct ledger_db *db, void *conn, struct waiter *first, bool grouped)
{
    const struct ledger_backend_ops *ops = db->ops;
    int err = ops->begin(conn);

    if (err == 0 && ops->lock != NULL)
        err = lock_accounts(db, conn, first);
    if (err < 0)
        goto out_rollback;
    for (struct waiter *w = first; w != NULL; w = w->next) {
        for (size_t i = 0; i < w->n; i++) {
            const struct ledger_unit *u = &w->units[i];
            struct ledger_result *res = &w->res[i];

            if (!is_db_unit(u, res))
                continue;
            if (grouped) {
                err = ops->savepoint(conn);
                if (err < 0)
                    goto out_rollback;
            }
            err = apply_unit(db, conn, u, res);
            if (err < 0)
                goto out_rollback;
            if (!grouped) {
                if (res->status != OLTP_ST_OK) {
                    /* Nothing to keep: no commit, no fsync. */
                    err = ops->rollback(conn);
                    goto out;
                }
                continue;
            }
            /* ROLLBACK TO keeps the savepoint open; RELEASE closes it either
             * way, so the next unit's savepoint is not nested in this one. */
            if (res->status != OLTP_ST_OK)
                err = ops->rollback_to(conn);
            if (err == 0)
                err = ops->release(conn);
            if (err < 0)
                goto out_rollback;
        }
    }
    err = ops->commit(conn);
    if (err == LEDGER_DB_BROKEN || err == LEDGER_DB_IN_DOUBT) {
        /* Not "nothing applied": the commit may have reached the disk. */
        (void)note_err(db, err);
        (void)ops->rollback(conn);
        return LEDGER_DB_IN_DOUBT;
    }
    if (err < 0)
        goto out_rollback;
    stat_add(&db->stats.commits, 1);
    return 0;

out_rollback:
    /* The database's own error is what the caller needs; a failing
     * rollback after it adds nothing (the backend logged it). */
    (void)note_err(db, ops->rollback(conn));
out:
    /* Before the commit: the transaction did not commit, whatever broke. */
    return note_err(db, err) == LEDGER_DB_BROKEN ? -EIO : err;
}

/* The reply of a unit whose transaction ended with err (< 0). */
static uint16_t failed_status(int err)
{
    if (err == LEDGER_DB_IN_DOUBT)
        return OLTP_ST_IN_DOUBT;
    return err == -ESHUTDOWN ? OLTP_ST_UNAVAILABLE : OLTP_ST_INTERNAL;
}

/* Runs the transaction of the waiters from first until it commits, reruns
 * on -EAGAIN. 0, -EIO or -ESHUTDOWN (db failed before); then the result of
 * every unit the database was to see says failed_status, but when only the
 * commit's outcome is unknown, a unit already undone by its savepoint keeps
 * its own status (not applied either way). */
static int run_batch(struct ledger_db *db, void *conn, struct waiter *first, bool grouped)
{
    size_t k = 0;
    int err;

    for (unsigned attempt = 1;; attempt++) {
        if (is_failed(db)) {
            err = -ESHUTDOWN;
            break;
        }
        err = try_batch(db, conn, first, grouped);
        if (err != -EAGAIN)
            break;
        stat_add(&db->stats.retries, 1);
        if (attempt == MAX_ATTEMPTS) {
            CR_LOG(CR_LOG_ERROR, "ledger_db: transaction still conflicting after %u tries",
                   attempt);
            err = -EIO;
            break;
        }
        backoff(attempt);
    }
    for (struct waiter *w = first; w != NULL; w = w->next) {
        for (size_t i = 0; i < w->n; i++) {
            if (!is_db_unit(&w->units[i], &w->res[i]))
                continue;
            k++;
            if (err == LEDGER_DB_IN_DOUBT && w->res[i].status != OLTP_ST_OK)
                continue;
            if (err < 0) {
                w->res[i].status = failed_status(err);
                w->res[i].failed_op = 0;
                w->res[i].balance = 0;
            }
        }
    }
    if (err < 0)
        return err == -ESHUTDOWN ? err : -EIO;
    stat_add(&db->stats.units, k);
    stat_max(&db->stats.max_batch, k);
    return 0;
}

static int apply_grouped(struct ledger_db *db, void *conn, struct waiter *w)
{
    struct waiter *last;
    struct waiter *next;
    size_t k;
    int err;

    pthread_mutex_lock(&db->gc_lock);
    if (db->tail != NULL)
        db->tail->next = w;
    else
        db->head = w;
    db->tail = w;
    if (!db->leading) {
        db->leading = true;
        w->lead = true;
    }
    while (!w->done && !w->lead)
        pthread_cond_wait(&w->cond, &db->gc_lock);
    if (w->done) {
        pthread_mutex_unlock(&db->gc_lock);
        return w->err;
    }
    /* Leader: w is the head; cut the batch off the queue. The first waiter
     * fits (its n was checked), the others only whole: stopping at the
     * first that does not fit keeps the queue's order. */
    last = w;
    k = w->n;
    while (last->next != NULL && k + last->next->n <= db->cfg.max_batch) {
        last = last->next;
        k += last->n;
    }
    db->head = last->next;
    if (db->head == NULL)
        db->tail = NULL;
    last->next = NULL;
    pthread_mutex_unlock(&db->gc_lock);

    err = run_batch(db, conn, w, true);

    pthread_mutex_lock(&db->gc_lock);
    for (struct waiter *b = w; b != NULL; b = next) {
        /* Read before the wake: b's caller may return once we unlock. */
        next = b->next;
        b->err = err;
        b->done = true;
        if (b != w)
            pthread_cond_signal(&b->cond);
    }
    if (db->head != NULL) {
        db->head->lead = true;
        pthread_cond_signal(&db->head->cond);
    } else {
        db->leading = false;
    }
    pthread_mutex_unlock(&db->gc_lock);
    return err;
}

int ledger_db_apply_batch(struct ledger_db *db, const struct ledger_unit *units, size_t n,
                          struct ledger_result *res)
{
    struct waiter w = {.units = units, .n = n, .res = res};
    bool has_db_unit = false;
    void *conn;
    int err;

    for (size_t i = 0; i < n; i++) {
        res[i].status = OLTP_ST_INTERNAL;
        res[i].failed_op = 0;
        res[i].balance = 0;
    }
    if (n == 0 || n > db->cfg.max_batch)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (units[i].nops == 0 || units[i].nops > OLTP_MAX_SESSION_OPS)
            return -EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        has_db_unit |= is_db_unit(&units[i], &res[i]);
    if (!has_db_unit)
        return 0;
    if (is_failed(db)) {
        for (size_t i = 0; i < n; i++) {
            if (is_db_unit(&units[i], &res[i]))
                res[i].status = OLTP_ST_UNAVAILABLE;
        }
        return -ESHUTDOWN;
    }
    err = thread_conn(db, &conn);
    if (err < 0) {
        /* The units the database was to see still say OLTP_ST_INTERNAL. */
        CR_LOG(CR_LOG_ERROR, "ledger_db: no connection: %s", strerror(-err));
        return -EIO;
    }
    if (!db->cfg.group_commit) {
        err = 0;
        for (size_t i = 0; i < n; i++) {
            struct waiter one = {.units = &units[i], .n = 1, .res = &res[i]};
            int r = is_db_unit(&units[i], &res[i]) ? run_batch(db, conn, &one, false) : 0;

            if (r < 0 && err == 0)
                err = r;
        }
        return err;
    }
    pthread_cond_init(&w.cond, NULL);
    err = apply_grouped(db, conn, &w);
    pthread_cond_destroy(&w.cond);
    return err;
}

int ledger_db_apply(struct ledger_db *db, const struct ledger_op *ops, size_t n,
                    struct ledger_result *res)
{
    struct ledger_unit u = {.ops = ops, .nops = n};

    return ledger_db_apply_batch(db, &u, 1, res);
}

/* Reads run outside any transaction, so a busy database is simply asked
 * again. True (after a pause) when err calls for that. */
static bool is_read_again(struct ledger_db *db, int err, unsigned attempt)
{
    if (err != -EAGAIN || attempt == MAX_ATTEMPTS)
        return false;
    stat_add(&db->stats.retries, 1);
    backoff(attempt);
    return true;
}

/* What a read returns for err: 0, -ENOENT, -ESHUTDOWN, else -EIO. Fails
 * db on LEDGER_DB_BROKEN. */
static int read_status(struct ledger_db *db, int err)
{
    (void)note_err(db, err);
    return err == 0 || err == -ENOENT || err == -ESHUTDOWN ? err : -EIO;
}

int ledger_db_balance(struct ledger_db *db, uint64_t account, int64_t *balance)
{
    void *conn;
    int err;

    for (unsigned attempt = 1;; attempt++) {
        err = is_failed(db) ? -ESHUTDOWN : thread_conn(db, &conn);
        if (err == 0)
            err = db->ops->balance(conn, account, balance);
        if (!is_read_again(db, err, attempt))
            break;
    }
    return read_status(db, err);
}

int ledger_db_history(struct ledger_db *db, uint64_t account, struct oltp_hist *out, unsigned max,
                      unsigned *n)
{
    void *conn;
    int err;

    *n = 0;
    for (unsigned attempt = 1;; attempt++) {
        err = is_failed(db) ? -ESHUTDOWN : thread_conn(db, &conn);
        if (err == 0)
            err = db->ops->history(conn, account, out, max, n);
        if (!is_read_again(db, err, attempt))
            break;
    }
    return read_status(db, err);
}

int ledger_db_totals(struct ledger_db *db, int64_t *sum, uint64_t *accounts, uint64_t *negative)
{
    void *conn;
    int err;

    for (unsigned attempt = 1;; attempt++) {
        err = is_failed(db) ? -ESHUTDOWN : thread_conn(db, &conn);
        if (err == 0)
            err = db->ops->totals(conn, sum, accounts, negative);
        if (!is_read_again(db, err, attempt))
            break;
    }
    return err == -ENOENT ? -EIO : read_status(db, err);
}

int ledger_db_each_keyed(struct ledger_db *db, ledger_db_row_fn *fn, void *arg)
{
    void *conn;
    int err = thread_conn(db, &conn);

    if (err < 0)
        return -EIO;
    /* No retry: fn may have seen rows when a busy error comes. What fn
     * returned passes through as it is. */
    return db->ops->each_keyed(conn, fn, arg);
}

void ledger_db_stats(struct ledger_db *db, struct ledger_db_stats *st)
{
    st->units = __atomic_load_n(&db->stats.units, __ATOMIC_RELAXED);
    st->commits = __atomic_load_n(&db->stats.commits, __ATOMIC_RELAXED);
    st->max_batch = __atomic_load_n(&db->stats.max_batch, __ATOMIC_RELAXED);
    st->retries = __atomic_load_n(&db->stats.retries, __ATOMIC_RELAXED);
}
