/*
 * proactor.c - the Proactor's common part: configuration and the choice of
 * engine (io_uring, or the emulated engine with one log line when io_uring
 * cannot be used), the asynchronous completion tokens (start, cancel, busy),
 * and the completion dispatcher strategies: single, lf (Leader/Followers over
 * one ring) and ring-per-thread. Called by the proactor model and any
 * application; the dispatcher threads it owns run the handlers. Owns the
 * rings (engine instances) and the threads; borrows the tokens.
 *
 * Handlers of one token never run concurrently. Two things could make them:
 * (1) under lf, completions of one multishot accept taken by two threads; so
 * the leader numbers each token's completions as it takes them (seq_taken)
 * and a handler runs only when the previous one returned (seq_served); (2) a
 * handler starting its token's next operation, which could complete on
 * another thread before the handler returns; so such a start is deferred
 * (struct worker.deferred) and submitted when the handler has returned; (3)
 * another thread starting the token's next operation while its final handler
 * still runs (the token is no longer busy then, so that the handler can
 * restart it: a connection's receive handler starting its send, say); so
 * such a start looks for the token in the workers' running slots and hands
 * the operation to that worker (struct worker.handoff), which submits it when
 * the handler has returned. The dispatcher never touches a token after its
 * final handler returns: the handler may have freed it.
 *
 * Lock order: lf_lock, then an engine's locks; seq_lock is taken alone.
 */
#include "demux/proactor_internal.h"

#include <cabrank/clock.h>
#include <cabrank/log.h>

#include "os/sync_internal.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum dispatch {
    DISPATCH_SINGLE,
    DISPATCH_LF,
    DISPATCH_RING_PER_THREAD,
};

static const char *const dispatch_names[] = {
    [DISPATCH_SINGLE] = "single",
    [DISPATCH_LF] = "lf",
    [DISPATCH_RING_PER_THREAD] = "ring-per-thread",
};

struct worker {
    /* Immutable after create. */
    struct cr_proactor *p;
    unsigned ring;
    pthread_t tid;
    /* Atomic; written by the worker's thread, read by starters (begin_op). */
    struct cr_aop *running; /* the token whose handler runs now */
    /* Atomic: an operation of `running` started by another thread while its
     * handler ran, for this worker to submit (submit_op). */
    struct cr_aop *handoff;
    /* The worker's own thread only. */
    struct cr_aop *deferred; /* its next operation, started by that handler */
};

struct cr_proactor {
    /* Immutable after create. */
    const struct cr__engine_ops *eng;
    enum dispatch dispatch;
    unsigned nrings;
    unsigned nthreads;
    struct cr__ring *rings;
    struct worker *workers;
    /* Owner thread only. */
    unsigned started; /* threads running */
    /* Atomics: stopping set once by stop; inflight counts operations
     * started and not yet finished (final handler returned). */
    int stopping;
    long inflight;
    /* lf: the leader role. */
    struct cr_mutex lf_lock;
    pthread_cond_t lf_cv;
    /* Protected by lf_lock. */
    bool has_leader;
    /* lf: a handler waiting for the previous one of its token. */
    struct cr_mutex seq_lock;
    pthread_cond_t seq_cv;
    int seq_waiters; /* atomic */
};

/* The dispatcher thread running on this thread, if any. */
static __thread struct worker *self;

bool cr__proactor_is_stopping(const struct cr_proactor *p)
{
    /* Pairs with the seq_cst exchange in cr_proactor_stop. */
    return __atomic_load_n(&p->stopping, __ATOMIC_SEQ_CST) != 0;
}

static bool is_uring_disabled_by_env(void)
{
    const char *v = getenv("CABRANK_URING_DISABLE");

    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

/* Opens every ring with eng; on failure closes those opened. */
static int open_rings(struct cr_proactor *p, const struct cr__engine_ops *eng,
                      const struct cr_proactor_config *cfg, const char **why)
{
    int err = 0;
    unsigned i;

    for (i = 0; i < p->nrings; i++) {
        p->rings[i].p = p;
        p->rings[i].index = i;
        p->rings[i].engine = NULL;
        err = eng->open(&p->rings[i], cfg, why);
        if (err < 0)
            break;
    }
    if (err == 0) {
        p->eng = eng;
        return 0;
    }
    while (i-- > 0)
        eng->close(&p->rings[i]);
    return err;
}

/* Picks the engine: the one asked for, or uring where it works, else the
 * emulated engine, saying why once. */
static int open_engine(struct cr_proactor *p, const struct cr_proactor_config *cfg)
{
    const char *asked = cfg->engine;
    const char *why = NULL;
    int err;

    if (asked != NULL && strcmp(asked, "emulated") == 0)
        return open_rings(p, &cr__proactor_emulated_ops, cfg, &why);
    if (asked != NULL && strcmp(asked, "uring") != 0)
        return -EINVAL;
    if (is_uring_disabled_by_env()) {
        err = -ENOSYS;
        why = "CABRANK_URING_DISABLE is set";
    } else {
#ifdef CR_HAVE_LIBURING
        err = open_rings(p, &cr__proactor_uring_ops, cfg, &why);
        if (err == 0)
            return 0;
#else
        err = -ENOSYS;
        why = "built without liburing";
#endif
    }
    if (asked != NULL)
        return -ENOSYS;
    CR_LOG(CR_LOG_WARN, "proactor: io_uring cannot be used (%s: %s); using the emulated engine",
           why != NULL ? why : "io_uring_queue_init() failed", strerror(-err));
    return open_rings(p, &cr__proactor_emulated_ops, cfg, &why);
}

static int parse_dispatch(const char *name, enum dispatch *out)
{
    if (name == NULL) {
        *out = DISPATCH_LF;
        return 0;
    }
    for (size_t i = 0; i < sizeof(dispatch_names) / sizeof(dispatch_names[0]); i++) {
        if (strcmp(name, dispatch_names[i]) == 0) {
            *out = (enum dispatch)i;
            return 0;
        }
    }
    return -EINVAL;
}

int cr_proactor_create(struct cr_proactor **out, const struct cr_proactor_config *cfg)
{
    static const struct cr_proactor_config defaults;
    struct cr_proactor *p;
    enum dispatch d;
    unsigned threads;
    int err;

    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (cfg == NULL)
        cfg = &defaults;
    err = parse_dispatch(cfg->dispatch, &d);
    if (err < 0)
        return err;
    if (cfg->engine != NULL && strcmp(cfg->engine, "uring") != 0 &&
        strcmp(cfg->engine, "emulated") != 0)
        return -EINVAL;
    threads = cfg->threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);

        threads = n > 0 ? (unsigned)n : 1;
    }
    if (d == DISPATCH_SINGLE)
        threads = 1;
    if (threads > 1024)
        return -EINVAL;

    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    p->dispatch = d;
    p->nthreads = threads;
    p->nrings = d == DISPATCH_RING_PER_THREAD ? threads : 1;
    p->rings = calloc(p->nrings, sizeof(*p->rings));
    p->workers = calloc(p->nthreads, sizeof(*p->workers));
    if (p->rings == NULL || p->workers == NULL) {
        err = -ENOMEM;
        goto out_free;
    }
    for (unsigned i = 0; i < p->nthreads; i++) {
        p->workers[i].p = p;
        p->workers[i].ring = d == DISPATCH_RING_PER_THREAD ? i : 0;
    }
    err = cr_mutex_init(&p->lf_lock);
    if (err < 0)
        goto out_free;
    err = cr_mutex_init(&p->seq_lock);
    if (err < 0)
        goto out_lf_lock;
    err = -pthread_cond_init(&p->lf_cv, NULL);
    if (err < 0)
        goto out_seq_lock;
    err = -pthread_cond_init(&p->seq_cv, NULL);
    if (err < 0)
        goto out_lf_cv;
    err = open_engine(p, cfg);
    if (err < 0)
        goto out_seq_cv;
    *out = p;
    return 0;

out_seq_cv:
    cr_cond_fini(&p->seq_cv);
out_lf_cv:
    cr_cond_fini(&p->lf_cv);
out_seq_lock:
    cr_mutex_fini(&p->seq_lock);
out_lf_lock:
    cr_mutex_fini(&p->lf_lock);
out_free:
    free(p->workers);
    free(p->rings);
    free(p);
    return err;
}

const char *cr_proactor_engine(const struct cr_proactor *p)
{
    return p->eng->name;
}

const char *cr_proactor_dispatch(const struct cr_proactor *p)
{
    return dispatch_names[p->dispatch];
}

unsigned cr_proactor_rings(const struct cr_proactor *p)
{
    return p->nrings;
}

unsigned cr_proactor_threads(const struct cr_proactor *p)
{
    return p->nthreads;
}

unsigned cr_proactor_current_ring(const struct cr_proactor *p)
{
    return self != NULL && self->p == p ? self->ring : 0;
}

/* Stopped and nothing left in flight: the threads may exit. */
static bool is_done(struct cr_proactor *p)
{
    return cr__proactor_is_stopping(p) && __atomic_load_n(&p->inflight, __ATOMIC_SEQ_CST) == 0;
}

static void wake_all(struct cr_proactor *p)
{
    for (unsigned i = 0; i < p->nrings; i++)
        p->eng->wake(&p->rings[i]);
}

/* An operation finished (its final handler returned, or it never started). */
static void op_finished(struct cr_proactor *p)
{
    /* seq_cst: pairs with stop's store of stopping and load of inflight, so
     * one of the two sees the other and wakes the threads. */
    if (__atomic_sub_fetch(&p->inflight, 1, __ATOMIC_SEQ_CST) == 0 && cr__proactor_is_stopping(p))
        wake_all(p);
}

/* lf: waits until the token's previous completion's handler has returned. */
static void wait_turn(struct cr_proactor *p, struct cr_aop *op, unsigned ticket)
{
    /* Acquire: pairs with the release in end_turn, so the previous handler's
     * writes to the token are visible to this one. */
    if (__atomic_load_n(&op->seq_served, __ATOMIC_ACQUIRE) == ticket)
        return;
    __atomic_add_fetch(&p->seq_waiters, 1, __ATOMIC_SEQ_CST);
    cr_mutex_lock(&p->seq_lock);
    while (__atomic_load_n(&op->seq_served, __ATOMIC_ACQUIRE) != ticket)
        cr_cond_wait(&p->seq_cv, &p->seq_lock);
    cr_mutex_unlock(&p->seq_lock);
    __atomic_sub_fetch(&p->seq_waiters, 1, __ATOMIC_SEQ_CST);
}

static void end_turn(struct cr_proactor *p, struct cr_aop *op, unsigned ticket)
{
    __atomic_store_n(&op->seq_served, ticket + 1, __ATOMIC_SEQ_CST);
    /* seq_cst against the waiter's increment of seq_waiters: either it sees
     * the new seq_served under seq_lock or we see it waiting and broadcast
     * under the lock it waits with. */
    if (__atomic_load_n(&p->seq_waiters, __ATOMIC_SEQ_CST) > 0) {
        cr_mutex_lock(&p->seq_lock);
        cr_cond_broadcast(&p->seq_cv);
        cr_mutex_unlock(&p->seq_lock);
    }
}

static void run_handler(struct worker *w, struct cr_aop *op, ssize_t res, unsigned flags)
{
    /* Seq_cst store, then (final) the seq_cst clear of BUSY: a starter whose
     * CAS sees BUSY clear then sees op here (submit_op). */
    __atomic_store_n(&w->running, op, __ATOMIC_SEQ_CST);
    if (!(flags & CR_AOP_MORE))
        __atomic_fetch_and(&op->state, ~(CR__AOP_BUSY | CR__AOP_CANCEL), __ATOMIC_SEQ_CST);
    op->handler(op, res, flags);
    /* Seq_cst against hand_off's CAS of handoff then load of running:
     * either it sees op gone, or we see what it handed us. */
    __atomic_store_n(&w->running, NULL, __ATOMIC_SEQ_CST);
}

/* Runs the final handler of op, then submits the operations it deferred. */
static void run_final(struct worker *w, struct cr_aop *op, ssize_t res)
{
    struct cr_proactor *p = w->p;

    for (;;) {
        struct cr_aop *next;
        int err;

        run_handler(w, op, res, 0);
        next = w->deferred;
        w->deferred = NULL;
        if (next == NULL)
            next = __atomic_exchange_n(&w->handoff, NULL, __ATOMIC_SEQ_CST);
        op_finished(p);
        if (next == NULL)
            return;
        err = p->eng->start(&p->rings[next->ring], next);
        if (err == 0)
            return;
        /* The start was accepted: its failure is its completion. */
        op = next;
        res = err;
    }
}

static void dispatch_one(struct worker *w, const struct cr__completion *c, unsigned ticket)
{
    struct cr_proactor *p = w->p;
    struct cr_aop *op = c->op;
    bool ordered = p->dispatch == DISPATCH_LF;

    if (ordered)
        wait_turn(p, op, ticket);
    if (c->flags & CR_AOP_MORE) {
        /* The operation stays in flight: the token outlives the handler. */
        run_handler(w, op, c->res, c->flags);
        if (ordered)
            end_turn(p, op, ticket);
        return;
    }
    /* Final: the turn passes before the handler, which may free the token;
     * the token's next operation cannot complete before it returns (a start
     * from the handler is deferred). */
    if (ordered)
        end_turn(p, op, ticket);
    run_final(w, op, c->res);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct cr_proactor *p = w->p;
    struct cr__ring *r = &p->rings[w->ring];

    self = w;
    for (;;) {
        struct cr__completion c;
        unsigned ticket = 0;
        int got;

        if (p->dispatch == DISPATCH_LF) {
            cr_mutex_lock(&p->lf_lock);
            while (p->has_leader && !is_done(p))
                cr_cond_wait(&p->lf_cv, &p->lf_lock);
            if (is_done(p)) {
                cr_cond_broadcast(&p->lf_cv);
                cr_mutex_unlock(&p->lf_lock);
                break;
            }
            p->has_leader = true;
            cr_mutex_unlock(&p->lf_lock);

            got = p->eng->wait(r, &c);
            /* Numbered while still the leader: the ring's order. */
            if (got)
                ticket = c.op->seq_taken++;

            /* Promote a follower, then run the handler. */
            cr_mutex_lock(&p->lf_lock);
            p->has_leader = false;
            cr_cond_signal(&p->lf_cv);
            cr_mutex_unlock(&p->lf_lock);
        } else {
            if (is_done(p))
                break;
            got = p->eng->wait(r, &c);
        }
        if (got)
            dispatch_one(w, &c, ticket);
    }
    self = NULL;
    return NULL;
}

int cr_proactor_start(struct cr_proactor *p)
{
    int err;

    if (p->started != 0)
        return -EALREADY;
    for (unsigned i = 0; i < p->nthreads; i++) {
        err = -pthread_create(&p->workers[i].tid, NULL, worker_main, &p->workers[i]);
        if (err < 0) {
            /* Those started exit once stopped with nothing in flight. */
            cr_proactor_stop(p);
            return err;
        }
        p->started++;
    }
    return 0;
}

void cr_proactor_stop(struct cr_proactor *p)
{
    if (__atomic_exchange_n(&p->stopping, 1, __ATOMIC_SEQ_CST) != 0)
        return;
    for (unsigned i = 0; i < p->nrings; i++)
        p->eng->cancel_all(&p->rings[i]);
    /* Pairs with op_finished. */
    if (__atomic_load_n(&p->inflight, __ATOMIC_SEQ_CST) == 0)
        wake_all(p);
    /* lf followers wait on lf_cv, not on the ring. */
    cr_mutex_lock(&p->lf_lock);
    cr_cond_broadcast(&p->lf_cv);
    cr_mutex_unlock(&p->lf_lock);
}

int cr_proactor_wait(struct cr_proactor *p)
{
    int err = 0;

    for (unsigned i = 0; i < p->started; i++) {
        int rc = pthread_join(p->workers[i].tid, NULL);

        if (rc != 0 && err == 0)
            err = -rc;
    }
    p->started = 0;
    return err;
}

void cr_proactor_destroy(struct cr_proactor *p)
{
    if (p == NULL)
        return;
    for (unsigned i = 0; i < p->nrings; i++)
        p->eng->close(&p->rings[i]);
    cr_cond_fini(&p->seq_cv);
    cr_cond_fini(&p->lf_cv);
    cr_mutex_fini(&p->seq_lock);
    cr_mutex_fini(&p->lf_lock);
    free(p->workers);
    free(p->rings);
    free(p);
}

void cr_aop_init(struct cr_aop *op, struct cr_proactor *p, unsigned ring, cr_aop_fn *handler)
{
    memset(op, 0, sizeof(*op));
    op->handler = handler;
    op->p = p;
    op->ring = ring % p->nrings;
    op->fd = -1;
    op->fd2 = -1;
    op->pipe[0] = -1;
    op->pipe[1] = -1;
}

bool cr_aop_is_busy(const struct cr_aop *op)
{
    return (__atomic_load_n(&op->state, __ATOMIC_ACQUIRE) & CR__AOP_BUSY) != 0;
}

/* The worker, other than the calling thread, that runs op's handler. */
static struct worker *running_elsewhere(struct cr_proactor *p, struct cr_aop *op)
{
    for (unsigned i = 0; i < p->nthreads; i++) {
        struct worker *w = &p->workers[i];

        if (w != self && __atomic_load_n(&w->running, __ATOMIC_SEQ_CST) == op)
            return w;
    }
    return NULL;
}

/* Hands op to w, whose handler of op still runs: true when w will submit
 * it once the handler returns; false when the handler returned meanwhile
 * and op is the caller's to submit. */
static bool hand_off(struct worker *w, struct cr_aop *op)
{
    struct cr_aop *expected = NULL;

    /* One handler per worker, and op is busy: the slot is free. */
    if (!__atomic_compare_exchange_n(&w->handoff, &expected, op, false, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST))
        return false;
    if (__atomic_load_n(&w->running, __ATOMIC_SEQ_CST) == op)
        return true;
    /* The handler returned: take op back, unless w took it already. */
    expected = op;
    return !__atomic_compare_exchange_n(&w->handoff, &expected, NULL, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST);
}

bool cr__aop_advance(struct cr_aop *op, size_t n)
{
    op->done += n;
    if (op->kind == CR__AOP_SENDV) {
        while (op->iovpos < op->iovcnt) {
            struct iovec *v = &op->iov[op->iovpos];

            if (n < v->iov_len) {
                v->iov_base = (char *)v->iov_base + n;
                v->iov_len -= n;
                break;
            }
            n -= v->iov_len;
            op->iovpos++;
        }
    }
    return op->done == op->len;
}

/* Claims the token for a new operation. */
static int begin_op(struct cr_aop *op, int kind, int fd, uint64_t timeout_ms)
{
    int st = __atomic_load_n(&op->state, __ATOMIC_RELAXED);

    if (cr__proactor_is_stopping(op->p))
        return -ESHUTDOWN;
    /* A stale CR__AOP_CANCEL (a cancel that lost to the completion) is
     * dropped here; BUSY is what makes the token ours. */
    do {
        if (st & CR__AOP_BUSY)
            return -EBUSY;
    } while (!__atomic_compare_exchange_n(&op->state, &st, CR__AOP_BUSY, false, __ATOMIC_SEQ_CST,
                                          __ATOMIC_RELAXED));
    op->kind = kind;
    op->fd = fd;
    op->fd2 = -1;
    op->flags = 0;
    op->deadline_ns = timeout_ms != 0 ? cr_clock_now_ns() + timeout_ms * CR_NSEC_PER_MSEC : 0;
    op->buf = NULL;
    op->len = 0;
    op->done = 0;
    op->off = 0;
    op->iovcnt = 0;
    op->iovpos = 0;
    op->res = 0;
    op->cflags = 0;
    op->inpipe = 0;
    return 0;
}

/* Hands the claimed, filled token to its engine (or defers it: see the top). */
static int submit_op(struct cr_aop *op)
{
    struct cr_proactor *p = op->p;
    struct worker *w;
    int err;

    __atomic_add_fetch(&p->inflight, 1, __ATOMIC_SEQ_CST);
    cr__aop_publish(op);
    if (self != NULL && self->p == p && __atomic_load_n(&self->running, __ATOMIC_RELAXED) == op) {
        self->deferred = op;
        return 0;
    }
    w = running_elsewhere(p, op);
    if (w != NULL && hand_off(w, op))
        return 0;
    err = p->eng->start(&p->rings[op->ring], op);
    if (err < 0) {
        __atomic_fetch_and(&op->state, ~(CR__AOP_BUSY | CR__AOP_CANCEL), __ATOMIC_RELEASE);
        op_finished(p);
    }
    return err;
}

int cr_aop_accept(struct cr_aop *op, int listen_fd, bool multishot)
{
    int err;

    if (listen_fd < 0)
        return -EBADF;
    err = begin_op(op, CR__AOP_ACCEPT, listen_fd, 0);
    if (err < 0)
        return err;
    op->flags = multishot ? CR__AOPF_MULTISHOT : 0;
    return submit_op(op);
}

int cr_aop_recv(struct cr_aop *op, int fd, void *buf, size_t len, uint64_t timeout_ms)
{
    int err;

    if (fd < 0)
        return -EBADF;
    if (buf == NULL && len != 0)
        return -EINVAL;
    err = begin_op(op, CR__AOP_RECV, fd, timeout_ms);
    if (err < 0)
        return err;
    op->buf = buf;
    op->len = len;
    return submit_op(op);
}

int cr_aop_send(struct cr_aop *op, int fd, const void *buf, size_t len, uint64_t timeout_ms)
{
    int err;

    if (fd < 0)
        return -EBADF;
    if ((buf == NULL && len != 0) || len > SSIZE_MAX)
        return -EINVAL;
    err = begin_op(op, CR__AOP_SEND, fd, timeout_ms);
    if (err < 0)
        return err;
    /* The engines only read through buf. */
    op->buf = (void *)(uintptr_t)buf;
    op->len = len;
    return submit_op(op);
}

int cr_aop_sendv(struct cr_aop *op, int fd, const struct iovec *iov, int iovcnt,
                 uint64_t timeout_ms)
{
    size_t total = 0;
    int err;

    if (fd < 0)
        return -EBADF;
    if (iov == NULL || iovcnt <= 0 || iovcnt > CR_AOP_MAX_IOV)
        return -EINVAL;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len > SSIZE_MAX - total)
            return -EINVAL;
        total += iov[i].iov_len;
    }
    err = begin_op(op, CR__AOP_SENDV, fd, timeout_ms);
    if (err < 0)
        return err;
    memcpy(op->iov, iov, (size_t)iovcnt * sizeof(*iov));
    op->iovcnt = iovcnt;
    op->len = total;
    return submit_op(op);
}

int cr_aop_sendfile(struct cr_aop *op, int sock_fd, int file_fd, off_t off, size_t len,
                    uint64_t timeout_ms)
{
    int err;

    if (sock_fd < 0 || file_fd < 0)
        return -EBADF;
    if (off < 0 || len > SSIZE_MAX)
        return -EINVAL;
    err = begin_op(op, CR__AOP_SENDFILE, sock_fd, timeout_ms);
    if (err < 0)
        return err;
    op->fd2 = file_fd;
    op->off = off;
    op->len = len;
    return submit_op(op);
}

int cr_aop_connect(struct cr_aop *op, int fd, const struct sockaddr *addr, socklen_t addrlen,
                   uint64_t timeout_ms)
{
    int err;

    if (fd < 0)
        return -EBADF;
    if (addr == NULL || addrlen == 0 || addrlen > sizeof(op->addr))
        return -EINVAL;
    err = begin_op(op, CR__AOP_CONNECT, fd, timeout_ms);
    if (err < 0)
        return err;
    memcpy(&op->addr, addr, addrlen);
    op->addrlen = addrlen;
    return submit_op(op);
}

int cr_aop_timer(struct cr_aop *op, uint64_t ms)
{
    int err = begin_op(op, CR__AOP_TIMER, -1, 0);

    if (err < 0)
        return err;
    op->deadline_ns = cr_clock_now_ns() + ms * CR_NSEC_PER_MSEC;
    return submit_op(op);
}

int cr_aop_post(struct cr_aop *op, ssize_t res)
{
    int err = begin_op(op, CR__AOP_POST, -1, 0);

    if (err < 0)
        return err;
    op->res = res;
    return submit_op(op);
}

int cr_aop_cancel(struct cr_aop *op)
{
    struct cr_proactor *p = op->p;

    if (!(__atomic_load_n(&op->state, __ATOMIC_ACQUIRE) & CR__AOP_BUSY))
        return -ENOENT;
    /* If the operation finished meanwhile, the bit is stale and the next
     * begin_op drops it. */
    __atomic_fetch_or(&op->state, CR__AOP_CANCEL, __ATOMIC_SEQ_CST);
    p->eng->cancel(&p->rings[op->ring], op);
    return 0;
}
