/*
 * ledger.c - cabrank-ledger's transaction service (contract in ledger.h).
 * input() runs on whichever worker thread the model gives a connection; a
 * write blocks that thread in ledger_db_apply until the unit is durable
 * (group commit lets the blocked threads share one fsync), and only then
 * encodes the reply, so no reply ever announces what a crash could undo.
 *
 * A model calls input() for one connection on one thread at a time, so a
 * connection that pipelines its writes - the gateway's, carrying many
 * clients' requests - would get one commit per write, its group commit
 * capped at one unit. input() therefore gathers the consecutive whole
 * frames that are session-less single writes (a run, up to RUN_MAX) and
 * applies them with one ledger_db_apply_batch: each still its own atomic
 * unit with its own reply, all of them in one group commit. Any other frame
 * ends the run: the run is applied and answered first, then the frame, so
 * replies keep the order of the requests and a read sees the writes sent
 * before it.
 *
 * What one process owns - the database handle, the session table and the
 * sweeper thread that collects idle sessions - lives in a struct
 * ledger_proc. Under the process models (cfg.process_model) the master has
 * none: it opens the database once to check it and create the schema, and
 * closes it before any fork, since an SQLite connection must not cross a
 * fork (the child would inherit the parent's view of its file locks, not
 * the locks), and a sweeper's mutexes could be copied held. Each worker
 * process builds its own in process_init and frees it in process_exit.
 *
 * Sessions: a context is a queue of ledger_op, checked out by one request
 * at a time (cr_session_acquire), so two requests of one session never
 * append to it at once; a COMMIT keeps it checked out while the database
 * applies it (a request meanwhile finds SESSION_BUSY), then removes and
 * frees it. The queue is allocated with its first op and doubles as it
 * fills, so a BEGIN costs a small context, not room for OLTP_MAX_SESSION_OPS
 * ops. Each connection is an owner in the session manager (a serial drawn
 * at open), which caps the sessions it began and has not ended.
 */
#include "ledger.h"

#include <cabrank/clock.h>
#include <cabrank/log.h>
#include <cabrank/session.h>

#include "ledger_db.h"
#include "proto.h"

#include <assert.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Stop decoding pipelined frames once this much output waits: the model
 * calls again with the rest when it has drained below its high-water mark. */
#define OUTPUT_BATCH (64 * 1024)
/* Most writes one run gathers. Far under OUTPUT_BATCH in replies, and
 * within the batch ledger_db_apply_batch accepts (the ledger opens its
 * database with the default max_batch). */
#define RUN_MAX 64
/* The largest reply of a single write: the status and a balance. */
#define WRITE_REPLY_MAX (OLTP_HEADER_SIZE + 2 + 8)
_Static_assert(RUN_MAX <= LEDGER_DB_MAX_BATCH_DEFAULT, "a run must fit one ledger_db batch");
/* Bounds on the sweeper's period (a quarter of the session timeout). */
#define SWEEP_MIN_MS 10
#define SWEEP_MAX_MS 1000

/* A session's context: the ops queued so far, in ops[0..n) of cap. */
struct session_ctx {
    unsigned n;
    unsigned cap;
    struct ledger_op *ops; /* NULL until the first op */
};
/* The queue's first allocation, in ops. */
#define SESSION_OPS_FIRST 4

/* A connection's state: its owner id in the session manager. */
struct ledger_conn {
    uint64_t owner;
};

/* The writes gathered by one input() call (see the top of the file), on
 * its stack: units[i] points at ops[i]. */
struct run {
    size_t n;
    uint64_t ids[RUN_MAX];
    struct ledger_op ops[RUN_MAX];
    struct ledger_unit units[RUN_MAX];
    struct ledger_result res[RUN_MAX];
};

/* What one process owns (see the top of the file). */
struct ledger_proc {
    /* Immutable after proc_create. */
    struct ledger_db *db;
    struct cr_session_mgr *sessions;
    uint64_t sweep_ms;
    pthread_t sweeper;
    bool has_sweeper;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    /* Protected by lock. */
    bool stopping;
};

struct ledger {
    struct cr_service svc;
    /* Immutable after create (a worker process sets proc in process_init,
     * before it serves). */
    struct ledger_config cfg;
    char *db_url;
    uint64_t sweep_ms;
    struct ledger_proc *proc; /* NULL in a process model's master */
    /* Relaxed atomic: the last owner id drawn (ledger_open). */
    uint64_t conn_serial;
    /* Relaxed atomics (counters for stats only). */
    uint64_t requests;
    uint64_t writes;
    uint64_t sessions;
    uint64_t session_commits;
    uint64_t session_aborts;
};

static void count(uint64_t *counter)
{
    __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------ per process */

static void *sweep_main(void *arg)
{
    struct ledger_proc *p = arg;
    struct timespec at;

    pthread_mutex_lock(&p->lock);
    while (!p->stopping) {
        clock_gettime(CLOCK_MONOTONIC, &at);
        at.tv_sec += (time_t)(p->sweep_ms / 1000);
        at.tv_nsec += (long)(p->sweep_ms % 1000) * 1000000L;
        if (at.tv_nsec >= 1000000000L) {
            at.tv_sec++;
            at.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&p->wake, &p->lock, &at);
        if (p->stopping)
            break;
        pthread_mutex_unlock(&p->lock);
        (void)cr_session_expire(p->sessions);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void session_free(struct session_ctx *s)
{
    free(s->ops);
    free(s);
}

static void free_ctx(void *ctx, void *arg)
{
    CR_UNUSED(arg);
    session_free(ctx);
}

static void proc_destroy(struct ledger_proc *p)
{
    if (p == NULL)
        return;
    if (p->has_sweeper) {
        pthread_mutex_lock(&p->lock);
        p->stopping = true;
        pthread_cond_signal(&p->wake);
        pthread_mutex_unlock(&p->lock);
        pthread_join(p->sweeper, NULL);
    }
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    cr_session_mgr_destroy(p->sessions);
    ledger_db_close(p->db);
    free(p);
}

/* Opens the database and the session table and starts the sweeper, into
 * l->proc. 0 or -errno with l->proc NULL. */
static int proc_create(struct ledger *l)
{
    struct ledger_db_config dc = {.url = l->db_url, .group_commit = l->cfg.group_commit};
    struct cr_session_config sc = {
        .idle_timeout_ms = l->cfg.session_timeout_ms,
        .max_sessions = l->cfg.max_sessions,
        .max_per_owner = l->cfg.max_sessions_per_conn,
        .free_ctx = free_ctx,
    };
    struct ledger_proc *p = calloc(1, sizeof(*p));
    pthread_condattr_t ca;
    sigset_t all;
    sigset_t old;
    int err;

    l->proc = NULL;
    if (p == NULL)
        return -ENOMEM;
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->wake, &ca);
    pthread_condattr_destroy(&ca);
    err = ledger_db_open(&p->db, &dc);
    if (err < 0)
        goto out_free;
    err = cr_session_mgr_create(&p->sessions, &sc);
    if (err < 0)
        goto out_free;
    p->sweep_ms = l->sweep_ms;
    /* The sweeper starts with every signal blocked: a TERM meant for
     * cr_server_run's sigwait must not land on it and kill the process. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    err = -pthread_create(&p->sweeper, NULL, sweep_main, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err < 0)
        goto out_free;
    p->has_sweeper = true;
    l->proc = p;
    return 0;

out_free:
    proc_destroy(p);
    return err;
}

/* ------------------------------------------------------------------ requests */

/* Queues the reply and counts it. 0 or -ENOMEM. */
static int send_reply(struct ledger *l, struct cr_conn *c, const struct oltp_reply *rp)
{
    char *p = cr_conn_reserve(c, OLTP_MAX_FRAME);
    size_t n;

    if (p == NULL)
        return -ENOMEM;
    n = oltp_reply_encode(rp, p, OLTP_MAX_FRAME);
    /* Every reply this file builds has a known op and status. */
    assert(n > 0);
    cr_conn_commit(c, n);
    cr_conn_request_done(c);
    count(&l->requests);
    return 0;
}

static void to_op(const struct oltp_req *r, struct ledger_op *op)
{
    memset(op, 0, sizeof(*op));
    op->op = r->op;
    op->account = r->account;
    op->to = r->to;
    op->amount = r->amount;
    memcpy(op->key, r->key, OLTP_KEY_SIZE);
}

/* Appends r's op to s; OLTP_ST_QUEUED, TOO_LARGE when full, INTERNAL
 * without memory (the session then stays as it was). */
static uint16_t session_append(struct session_ctx *s, const struct oltp_req *r)
{
    if (s->n == OLTP_MAX_SESSION_OPS)
        return OLTP_ST_TOO_LARGE;
    if (s->n == s->cap) {
        unsigned cap = s->cap == 0 ? SESSION_OPS_FIRST : s->cap * 2;
        struct ledger_op *ops;

        if (cap > OLTP_MAX_SESSION_OPS)
            cap = OLTP_MAX_SESSION_OPS;
        ops = realloc(s->ops, cap * sizeof(*ops));
        if (ops == NULL)
            return OLTP_ST_INTERNAL;
        s->ops = ops;
        s->cap = cap;
    }
    to_op(r, &s->ops[s->n++]);
    return OLTP_ST_QUEUED;
}

/* Applies ops[0..n) as one unit; the status, with *balance on OK. A failed
 * database leaves its own status in res (INTERNAL, IN_DOUBT, UNAVAILABLE:
 * ledger_db.h), so the error itself adds nothing. */
static uint16_t apply(struct ledger *l, const struct ledger_op *ops, size_t n, int64_t *balance)
{
    struct ledger_result res = {0};

    (void)!ledger_db_apply(l->proc->db, ops, n, &res);
    *balance = res.balance;
    return res.status;
}

/* BEGIN on the connection of owner id owner. */
static uint16_t begin(struct ledger *l, uint64_t owner, struct oltp_reply *rp)
{
    struct session_ctx *s = calloc(1, sizeof(*s));
    uint64_t id;
    int err;

    if (s == NULL)
        return OLTP_ST_INTERNAL;
    err = cr_session_create_owned(l->proc->sessions, s, owner, &id);
    if (err < 0) {
        free(s);
        /* -EAGAIN: the process's cap; -EMFILE: the connection's. */
        return err == -EAGAIN || err == -EMFILE ? OLTP_ST_TOO_MANY_SESSIONS : OLTP_ST_INTERNAL;
    }
    count(&l->sessions);
    rp->session = id;
    return OLTP_ST_OK;
}

/* A request without a session, on the connection of owner id owner. */
static uint16_t run_plain(struct ledger *l, uint64_t owner, const struct oltp_req *r,
                          struct oltp_reply *rp)
{
    int err;

    switch (r->op) {
    case OLTP_OP_OPEN:
    case OLTP_OP_DEPOSIT:
    case OLTP_OP_WITHDRAW:
    case OLTP_OP_TRANSFER:
        /* A valid one is always gathered into a run (is_run_write). */
        assert(!"a session-less write outside a run");
        return OLTP_ST_INTERNAL;
    case OLTP_OP_BALANCE:
        err = ledger_db_balance(l->proc->db, r->account, &rp->balance);
        break;
    case OLTP_OP_HISTORY:
        err = ledger_db_history(l->proc->db, r->account, rp->hist, r->limit, &rp->count);
        break;
    case OLTP_OP_BEGIN:
        return begin(l, owner, rp);
    case OLTP_OP_PING:
        return OLTP_ST_OK;
    default: /* COMMIT, ABORT */
        return OLTP_ST_NO_SESSION;
    }
    if (err == -ENOENT)
        return OLTP_ST_NO_ACCOUNT;
    if (err == -ESHUTDOWN)
        return OLTP_ST_UNAVAILABLE;
    return err < 0 ? OLTP_ST_INTERNAL : OLTP_ST_OK;
}

/* COMMIT of session id, checked out by the caller: ends it either way. It
 * stays checked out while the database applies it, so a request of the
 * session meanwhile is SESSION_BUSY, and NO_SESSION once it has ended. */
static uint16_t commit(struct ledger *l, uint64_t id, struct session_ctx *s, struct oltp_reply *rp)
{
    uint16_t st = OLTP_ST_OK;
    int64_t balance;
    void *ctx;

    if (s->n > 0)
        st = apply(l, s->ops, s->n, &balance);
    if (st == OLTP_ST_OK) {
        rp->count = s->n;
        count(&l->session_commits);
    } else {
        count(&l->session_aborts);
    }
    /* Checked out by us, so neither expired nor removed by another. */
    if (cr_session_remove(l->proc->sessions, id, &ctx) == 0)
        session_free(ctx);
    return st;
}

/* A request carrying a session id. */
static uint16_t run_in_session(struct ledger *l, const struct oltp_req *r, struct oltp_reply *rp)
{
    struct cr_session_mgr *m = l->proc->sessions;
    struct session_ctx *s;
    void *ctx;
    uint16_t st;
    int err;

    switch (r->op) {
    case OLTP_OP_DEPOSIT:
    case OLTP_OP_WITHDRAW:
    case OLTP_OP_TRANSFER:
    case OLTP_OP_COMMIT:
    case OLTP_OP_ABORT:
    case OLTP_OP_PING:
        break;
    default: /* OPEN, BALANCE, HISTORY, BEGIN */
        return OLTP_ST_NOT_IN_SESSION;
    }
    err = cr_session_acquire(m, r->session, &ctx);
    if (err == -EBUSY)
        return OLTP_ST_SESSION_BUSY;
    if (err < 0)
        return OLTP_ST_NO_SESSION;
    s = ctx;
    switch (r->op) {
    case OLTP_OP_COMMIT:
        return commit(l, r->session, s, rp);
    case OLTP_OP_ABORT:
        if (cr_session_remove(m, r->session, &ctx) < 0)
            return OLTP_ST_NO_SESSION;
        session_free(ctx);
        count(&l->session_aborts);
        return OLTP_ST_OK;
    case OLTP_OP_PING:
        st = OLTP_ST_OK;
        break;
    default:
        st = session_append(s, r);
        break;
    }
    cr_session_release(m, r->session);
    return st;
}

/* Runs one decoded frame (status: the decoder's) of connection c (state lc)
 * and queues its reply. */
static int serve(struct ledger *l, struct cr_conn *c, const struct ledger_conn *lc,
                 const struct oltp_req *r, uint16_t status)
{
    struct oltp_reply rp;

    rp.op = r->op;
    rp.id = r->id;
    rp.session = r->session;
    rp.balance = 0;
    rp.count = 0;
    if (status == OLTP_ST_OK)
        status = oltp_req_check(r);
    /* A failed database (ledger_db_is_failed) takes nothing more, PING
     * included, so that a client or a monitor sees the ledger refuse. */
    if (status == OLTP_ST_OK && ledger_db_is_failed(l->proc->db))
        status = OLTP_ST_UNAVAILABLE;
    if (status == OLTP_ST_OK)
        status = r->session != 0 ? run_in_session(l, r, &rp) : run_plain(l, lc->owner, r, &rp);
    rp.status = status;
    return send_reply(l, c, &rp);
}

/* A frame (status: the decoder's) that joins a run: a valid single write
 * outside any session. */
static bool is_run_write(const struct oltp_req *r, uint16_t status)
{
    if (status != OLTP_ST_OK || r->session != 0)
        return false;
    switch (r->op) {
    case OLTP_OP_OPEN:
    case OLTP_OP_DEPOSIT:
    case OLTP_OP_WITHDRAW:
    case OLTP_OP_TRANSFER:
        return oltp_req_check(r) == OLTP_ST_OK;
    default:
        return false;
    }
}

static void run_add(struct run *run, const struct oltp_req *r)
{
    size_t i = run->n++;

    assert(i < RUN_MAX);
    run->ids[i] = r->id;
    to_op(r, &run->ops[i]);
    run->units[i] = (struct ledger_unit){.ops = &run->ops[i], .nops = 1};
}

/* Applies the run's writes (returning once all are durable or failed) and
 * queues their replies in order; empties the run. 0 or -ENOMEM. */
static int run_flush(struct ledger *l, struct cr_conn *c, struct run *run)
{
    size_t n = run->n;
    int err;

    if (n == 0)
        return 0;
    run->n = 0;
    /* -EIO and -ESHUTDOWN leave the reply of each unit they cost in its
     * result (ledger_db.h); the others have their own. -EINVAL would be
     * a run out of the bounds checked above. */
    err = ledger_db_apply_batch(l->proc->db, run->units, n, run->res);
    assert(err == 0 || err == -EIO || err == -ESHUTDOWN);
    for (size_t i = 0; i < n; i++) {
        struct oltp_reply rp = {
            .op = run->ops[i].op,
            .id = run->ids[i],
            .status = run->res[i].status,
            .balance = run->res[i].balance,
        };

        count(&l->writes);
        err = send_reply(l, c, &rp);
        if (err < 0)
            return err;
    }
    return 0;
}

/* ------------------------------------------------------------------ the service */

static int ledger_open(void *ctx, struct cr_conn *c, void **state)
{
    struct ledger *l = ctx;
    struct ledger_conn *lc = malloc(sizeof(*lc));

    *state = NULL;
    if (lc == NULL)
        return -ENOMEM;
    /* Relaxed: only unique; ids never repeat in a process (64 bits). */
    lc->owner = __atomic_add_fetch(&l->conn_serial, 1, __ATOMIC_RELAXED);
    *state = lc;
    cr_conn_set_input_timeout(c, l->cfg.idle_timeout_ms);
    return 0;
}

static void ledger_close(void *ctx, void *state)
{
    CR_UNUSED(ctx);
    free(state);
}

static ssize_t ledger_input(void *ctx, void *state, struct cr_conn *c, const char *data, size_t len)
{
    struct ledger *l = ctx;
    const struct ledger_conn *lc = state;
    struct run run;
    size_t used = 0;
    int err;

    run.n = 0;
    /* used counts the frames of the run too: it is flushed before every
     * return. */
    while (used < len) {
        struct oltp_req r;
        uint16_t status;
        ssize_t n;

        /* The run's replies are not queued yet, but will be. */
        if (used > 0 && cr_conn_pending(c) + run.n * WRITE_REPLY_MAX >= OUTPUT_BATCH)
            break;
        n = oltp_req_decode(data + used, len - used, &r, &status);
        if (n == -EAGAIN)
            break;
        if (n < 0) {
            /* Not our protocol, or a frame longer than any of ours: what
             * follows cannot be delimited. The writes before it are
             * applied and their replies, like those queued before, still
             * go out. */
            CR_LOG(CR_LOG_DEBUG, "unusable frame; closing the connection");
            err = run_flush(l, c, &run);
            if (err < 0)
                return err;
            cr_conn_close_after_flush(c);
            return -EBADMSG;
        }
        used += (size_t)n;
        if (is_run_write(&r, status)) {
            run_add(&run, &r);
            err = run.n == RUN_MAX ? run_flush(l, c, &run) : 0;
        } else {
            err = run_flush(l, c, &run);
            if (err == 0)
                err = serve(l, c, lc, &r, status);
        }
        if (err < 0)
            return err;
    }
    err = run_flush(l, c, &run);
    if (err < 0)
        return err;
    cr_conn_set_input_timeout(c, l->cfg.idle_timeout_ms);
    return (ssize_t)used;
}

/* A new worker process: a database, session table and sweeper of its own
 * (see the top of the file). */
static int ledger_process_init(void *ctx)
{
    struct ledger *l = ctx;
    int err;

    assert(l->proc == NULL);
    err = proc_create(l);
    if (err < 0)
        CR_LOG(CR_LOG_ERROR, "worker process: opening the database %s: %s", l->db_url,
               strerror(-err));
    return err;
}

static void ledger_process_exit(void *ctx)
{
    struct ledger *l = ctx;

    proc_destroy(l->proc);
    l->proc = NULL;
}

/* ------------------------------------------------------------------ lifecycle */

int ledger_create(struct ledger **out, const struct ledger_config *cfg)
{
    struct ledger *l;
    int err;

    *out = NULL;
    if (cfg == NULL || cfg->db_url == NULL || cfg->db_url[0] == '\0')
        return -EINVAL;
    l = calloc(1, sizeof(*l));
    if (l == NULL)
        return -ENOMEM;
    l->cfg = *cfg;
    if (l->cfg.idle_timeout_ms == 0)
        l->cfg.idle_timeout_ms = LEDGER_IDLE_TIMEOUT_MS_DEFAULT;
    if (l->cfg.session_timeout_ms == 0)
        l->cfg.session_timeout_ms = LEDGER_SESSION_TIMEOUT_MS_DEFAULT;
    if (l->cfg.max_sessions == 0)
        l->cfg.max_sessions = LEDGER_MAX_SESSIONS_DEFAULT;
    if (l->cfg.max_sessions_per_conn == 0)
        l->cfg.max_sessions_per_conn = LEDGER_MAX_SESSIONS_PER_CONN_DEFAULT;
    l->sweep_ms = l->cfg.session_timeout_ms / 4;
    if (l->sweep_ms < SWEEP_MIN_MS)
        l->sweep_ms = SWEEP_MIN_MS;
    if (l->sweep_ms > SWEEP_MAX_MS)
        l->sweep_ms = SWEEP_MAX_MS;
    l->db_url = strdup(cfg->db_url);
    if (l->db_url == NULL) {
        err = -ENOMEM;
        goto out_free;
    }
    l->cfg.db_url = l->db_url;
    if (l->cfg.process_model) {
        struct ledger_db_config dc = {.url = l->db_url, .group_commit = l->cfg.group_commit};
        struct ledger_db *db;

        err = ledger_db_open(&db, &dc);
        ledger_db_close(db);
    } else {
        err = proc_create(l);
    }
    if (err < 0)
        goto out_free;
    l->svc = (struct cr_service){
        .name = "ledger",
        .ctx = l,
        .open = ledger_open,
        .input = ledger_input,
        .close = ledger_close,
        .process_init = ledger_process_init,
        .process_exit = ledger_process_exit,
    };
    *out = l;
    return 0;

out_free:
    free(l->db_url);
    free(l);
    return err;
}

void ledger_destroy(struct ledger *l)
{
    if (l == NULL)
        return;
    proc_destroy(l->proc);
    free(l->db_url);
    free(l);
}

const struct cr_service *ledger_service(struct ledger *l)
{
    return &l->svc;
}

unsigned ledger_expire_sessions(struct ledger *l)
{
    return l->proc != NULL ? cr_session_expire(l->proc->sessions) : 0;
}

void ledger_stats(struct ledger *l, struct ledger_stats *st)
{
    struct cr_session_stats ss = {0};
    struct ledger_db_stats ds = {0};

    if (l->proc != NULL) {
        cr_session_stats(l->proc->sessions, &ss);
        ledger_db_stats(l->proc->db, &ds);
    }
    st->requests = __atomic_load_n(&l->requests, __ATOMIC_RELAXED);
    st->writes = __atomic_load_n(&l->writes, __ATOMIC_RELAXED);
    st->sessions = __atomic_load_n(&l->sessions, __ATOMIC_RELAXED);
    st->session_commits = __atomic_load_n(&l->session_commits, __ATOMIC_RELAXED);
    st->session_aborts = __atomic_load_n(&l->session_aborts, __ATOMIC_RELAXED);
    st->expired = ss.expired;
    st->live_sessions = ss.live;
    st->begins_refused = ss.full + ss.owner_full;
    st->units = ds.units;
    st->commits = ds.commits;
    st->max_batch = ds.max_batch;
}
