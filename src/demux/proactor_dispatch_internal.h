/*
 * proactor_dispatch_internal.h - the proactor object and its dispatcher
 * threads, shared by the proactor's common part: proactor.c (create, engine
 * choice, start/stop), proactor_dispatch.c (the dispatcher loop, handlers,
 * deferred and handed-off starts), proactor_dispatch_lf.c (the lf strategy's
 * leader role and per-token order) and proactor_token.c (the asynchronous
 * completion tokens). The engines do not see it (proactor_internal.h is
 * theirs). Library-internal.
 *
 * Lock order: lf_lock, then an engine's locks; seq_lock is taken alone.
 */
#ifndef CABRANK_PROACTOR_DISPATCH_INTERNAL_H
#define CABRANK_PROACTOR_DISPATCH_INTERNAL_H

#include "demux/proactor_internal.h"

#include "os/sync_internal.h"

#include <pthread.h>

/* Completion dispatcher strategies (cr_proactor_config.dispatch). */
enum cr__dispatch {
    CR__DISPATCH_SINGLE,          /* one thread, one ring */
    CR__DISPATCH_LF,              /* threads take turns as leader on one ring */
    CR__DISPATCH_RING_PER_THREAD, /* each thread alone on its own ring */
};

/* One dispatcher thread. */
struct cr__worker {
    /* Immutable after create. */
    struct cr_proactor *p;
    unsigned ring;
    pthread_t tid;
    /* Atomic; written by the worker's thread, read by starters (submit). */
    struct cr_aop *running; /* the token whose handler runs now */
    /* Atomic: an operation of `running` started by another thread while its
     * handler ran, for this worker to submit (cr__proactor_submit). */
    struct cr_aop *handoff;
    /* The worker's own thread only. */
    struct cr_aop *deferred; /* its next operation, started by that handler */
};

struct cr_proactor {
    /* Immutable after create. */
    const struct cr__engine_ops *eng;
    enum cr__dispatch dispatch;
    unsigned nrings;
    unsigned nthreads;
    struct cr__ring *rings;
    struct cr__worker *workers;
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

/* Thread body of a dispatcher thread; arg is its struct cr__worker. */
void *cr__proactor_worker_main(void *arg);

/* Stopped and nothing left in flight: the threads may exit. Thread-safe. */
bool cr__proactor_is_done(struct cr_proactor *p);

/* Makes every ring's wait() return. Thread-safe. */
void cr__proactor_wake_all(struct cr_proactor *p);

/*
 * Hands op, claimed and filled by a cr_aop_* start, to its engine, or defers
 * it while a handler of op runs (proactor_dispatch.c says why). 0, or the
 * engine's -errno (op is then free again). Thread-safe.
 */
int cr__proactor_submit(struct cr_aop *op);

/* lf (proactor_dispatch_lf.c). Init/fini of lf_lock, lf_cv, seq_lock and
 * seq_cv: before start only / after the threads were joined. */
int cr__proactor_lf_init(struct cr_proactor *p);
void cr__proactor_lf_fini(struct cr_proactor *p);

/*
 * The lf leader's turn on ring r: waits to become the leader, waits for one
 * completion, numbers it for its token (*ticket), promotes a follower.
 * 1 with *c and *ticket, 0 when woken without one, -1 when the proactor is
 * done (the thread exits). Dispatcher threads only.
 */
int cr__proactor_lf_take(struct cr_proactor *p, struct cr__ring *r, struct cr__completion *c,
                         unsigned *ticket);

/* Wakes the followers waiting for the leader role (the proactor stops).
 * Thread-safe. */
void cr__proactor_lf_wake_followers(struct cr_proactor *p);

/* Waits until the handler of op's completion ticket - 1 returned. */
void cr__proactor_lf_wait_turn(struct cr_proactor *p, struct cr_aop *op, unsigned ticket);

/* Lets the handler of op's completion ticket + 1 run. */
void cr__proactor_lf_end_turn(struct cr_proactor *p, struct cr_aop *op, unsigned ticket);

#endif /* CABRANK_PROACTOR_DISPATCH_INTERNAL_H */
