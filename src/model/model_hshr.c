/*
 * model_hshr.c - the Half-Sync/Half-Reactive model (POSA2; the Job Queue of
 * Gröne & Tabeling), the baseline the Leader/Followers paper argues against:
 * one listener thread waits for readiness on every handle, accepts and runs
 * the timers itself, and queues each ready connection on a bounded
 * synchronized job queue; a pool of `threads` worker threads takes the jobs
 * and serves them. cr_server (src/server.c) drives it through
 * cr__model_hshr_ops. Owns the reactors, the queues, the listeners and the
 * worker threads; the connections, their deadline timers, the connection
 * limit and graceful stop are model_reactive.c's (shared with the reactor
 * and lf models, so only the hand-off differs when the models are compared).
 *
 * The listener is the reactive half: it waits in the reactor and dispatches
 * every event itself. Accepting (the acceptors' batches), the connections'
 * deadline timers and the graceful stop's grace timer run on it, as the
 * pattern has it; only a ready connection goes to the synchronous half.
 * model_reactive's connection handler, given the defer hook, does not serve
 * the connection but calls defer_conn(), which queues the job {connection,
 * ready bits}; a worker pops it and runs cr__reactive_handle() - what the
 * handler would have run: cr__conn_handle, then re-arm with
 * cr_reactor_modify (the reactor takes registrations from any thread) or
 * close. The handle is one-shot and disarmed when the listener took the
 * event, so no second event of that connection is queued before a worker
 * re-arms it.
 *
 * A job is two words copied into the ring. Nothing is allocated and no
 * request byte is copied per job: the worker reads the socket itself,
 * through the driver, into its own thread-local buffer. That is what a
 * well-built HS/HR does; the paper's Example instead has the I/O thread read
 * each request into a heap-allocated message and queue that, a cost the L/F
 * paper rightly charges to it and which we do not impose here. What remains
 * of HS/HR's cost - a lock, a condition signal and a context switch per
 * ready connection, and the request handled on a different core from the
 * one that saw it ready - is the inherent difference the benchmarks measure.
 *
 * Backpressure: when the queue is full the listener blocks in
 * cr__job_queue_push() (inside defer_conn) and takes no further events:
 * it neither accepts nor runs timers meanwhile. Each connection has at
 * most one event outstanding (one-shot), so a full queue means the workers
 * are saturated, and waiting is right: the kernel keeps buffering what
 * arrives (receive buffers fill, TCP windows close, new connections wait in
 * the listen backlog), nothing is dropped, our memory stays bounded, and
 * events keep their order. An overflow list would only move that queueing
 * from the kernel into our memory. The block cannot outlast a stop: an
 * immediate stop closes the queue, which fails the push (the job is then
 * dropped: model_reactive's destroy closes connections whose deferred events
 * never ran); a graceful stop leaves the queue open, and the workers, which
 * never wait for the listener, keep draining it.
 *
 * Stop: cr__reactive_stop() stops accepting; graceful closes idle
 * connections and lets busy ones finish within its grace period; immediate
 * ends at once. When it is done (stopped()), the reactor is stopped, the
 * listener leaves its loop and closes the queue; workers handle what is
 * queued (graceful) or drop it (immediate), and exit. destroy closes what is
 * left.
 *
 * Roles: the listener is LISTENER (also while it accepts, runs timers or
 * blocks on a full queue; its events count every event it dispatched);
 * a worker is IDLE while it waits for a job and PROCESSING while it handles
 * one. Stats list the workers first (index = the cr_conn_worker() index)
 * and the listener last; queue_depth is the jobs queued now.
 *
 * Sets (`groups` = G > 1): G independent copies of the above, each with its
 * own reactor, listener thread, job queue and threads / G workers (the
 * first sets take the remainder); fewer threads than sets is -EINVAL. Over
 * listeners it opened itself, cr_server opens each address once per set
 * with SO_REUSEPORT (env->listen_groups) and each set's reactor accepts on
 * its own copies, so the kernel spreads new connections over the sets; over
 * inherited sockets every set accepts on every socket. A connection stays
 * in the set that accepted it: its events reach only that set's listener,
 * which queues them on its own queue (the set is the listener's
 * thread-local), for that set's workers. The sets share the reactive
 * connection set, so the connection limit, the timeouts and the stop are
 * server-wide. Each listener closes its own queue when it leaves; the stop's
 * stopped() stops every reactor, and an immediate stop closes every queue.
 * Stats: the workers of every set (set order), then the G listeners, each
 * with its set (cr_worker_stats.group); groups and group_accepted per set;
 * the queue depth is the sum. With one set, groups is 0 (no sets). Why per-set queues:
 * docs/design/hshr.md.
 *
 * Lock order: the queues' locks are leaves; no other lock is held across a
 * push or pop.
 */
#include <cabrank/clock.h>
#include <cabrank/log.h>
#include <cabrank/reactor.h>

#include "model/model_internal.h"
#include "model/model_reactive_internal.h"
#include "pool/job_queue_internal.h"
#include "pool/role_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A ready connection, deferred by model_reactive's handler (defer_conn). */
struct hshr_job {
    struct cr__reactive_conn *rc;
    unsigned events; /* CR_EV_* */
};

/* One listener, its reactor, its queue and its workers. */
struct hshr_set {
    /* Immutable after create. */
    struct cr_reactor *r;      /* also the model's reactors[idx] */
    struct cr_job_queue *jobs; /* of struct hshr_job */
    unsigned idx;
    int listener_lane; /* its listener's timeline lane; -1: none */
};

/* One thread: a worker or a listener. */
struct hshr_thread {
    struct cr_model *m;
    struct hshr_set *set;
    unsigned idx;
    pthread_t thread;
    /* Written by this thread, read by stats (role_internal.h). */
    struct cr__role_clock clock;
};

struct cr_model {
    /* Immutable after create. */
    const struct cr_model_env *env;
    struct cr__reactive *rs;
    struct hshr_set sets[CR_SERVER_MAX_GROUPS];
    struct cr_reactor *reactors[CR_SERVER_MAX_GROUPS]; /* sets[i].r, for the reactive set */
    unsigned nsets;
    unsigned nworkers;
    /* nworkers workers (set by set), then a listener per set. */
    struct hshr_thread *threads;

    /* Owner thread only (start, wait, destroy). */
    unsigned nstarted;   /* workers started */
    unsigned nlisteners; /* listeners started */
    bool joined;

    /* Atomic: an immediate stop was requested; workers drop queued jobs.
     * Relaxed: the queues' close, which follows it, publishes it. */
    int immediate;
};

/* The worker index of the calling thread, for cr_conn_worker(). Set once by
 * each worker; 0 on other threads. */
static __thread unsigned tl_worker;
/* The set of the calling listener: where defer_conn queues. */
static __thread struct hshr_set *tl_set;

static bool is_immediate(const struct cr_model *m)
{
    return __atomic_load_n(&m->immediate, __ATOMIC_RELAXED) != 0;
}

/* Ends the listeners and workers at once; any thread. */
static void stop_immediately(struct cr_model *m)
{
    /* Before the close: a worker that sees its queue closed drops. */
    __atomic_store_n(&m->immediate, 1, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < m->nsets; i++) {
        /* Wakes a listener blocked on a full queue. */
        cr__job_queue_close(m->sets[i].jobs);
        cr_reactor_stop(m->sets[i].r);
    }
}

static void hshr_stop(struct cr_model *m, bool graceful);

/* ------------------------------------------------------------------ threads */

static void *worker_main(void *arg)
{
    struct hshr_thread *t = arg;
    struct cr_model *m = t->m;
    struct hshr_job job;

    tl_worker = t->idx;
    cr__role_set(&t->clock, CR_ROLE_IDLE);
    /* Fails only once the queue is closed and drained. */
    while (cr__job_queue_pop(t->set->jobs, &job) == 0) {
        if (is_immediate(m))
            continue; /* cr__reactive_destroy closes its connection */
        /* The timeline's hand-off arrow: from the set's listener. */
        t->clock.from = t->set->listener_lane;
        cr__role_set(&t->clock, CR_ROLE_PROCESSING);
        cr__role_event(&t->clock);
        cr__reactive_handle(job.rc, job.events);
        cr__role_set(&t->clock, CR_ROLE_IDLE);
    }
    cr__role_set(&t->clock, CR_ROLE_STOPPED);
    return NULL;
}

static void *listener_main(void *arg)
{
    struct hshr_thread *t = arg;
    struct cr_model *m = t->m;
    struct hshr_set *set = t->set;

    tl_set = set;
    cr__role_set(&t->clock, CR_ROLE_LISTENER);
    /* An immediate stop also stops the reactor, but may not have yet. */
    while (!cr_reactor_is_stopped(set->r) && !is_immediate(m)) {
        struct cr_reactor_event ev;
        int n = cr_reactor_next(set->r, -1, &ev);

        if (n < 0) {
            CR_LOG(CR_LOG_ERROR, "hshr: waiting for events: %s", strerror(-n));
            /* Without a listener its set cannot progress: end everything. */
            hshr_stop(m, false);
            break;
        }
        if (n == 0)
            continue; /* a wake-up: stop, or a registration */
        cr__role_event(&t->clock);
        /* Accepts and timers run here; a connection goes to defer_conn. */
        cr_reactor_dispatch(set->r, &ev);
    }
    cr__role_set(&t->clock, CR_ROLE_STOPPED);
    /* Its workers handle (or, immediate, drop) what is queued, then leave. */
    cr__job_queue_close(set->jobs);
    return NULL;
}

/* ------------------------------------------------------------------ reactive hooks */

static unsigned current_worker(void *arg)
{
    CR_UNUSED(arg);
    return tl_worker;
}

/* model_reactive's connection handler, on the listener of the connection's
 * set (only listeners dispatch): queue the ready connection for a worker of
 * that set. */
static void defer_conn(struct cr__reactive_conn *rc, unsigned events, void *arg)
{
    struct hshr_job job = {.rc = rc, .events = events};

    CR_UNUSED(arg);
    /* Blocks while the queue is full: the backpressure (file comment). Fails
     * only once an immediate stop closed the queue: the job is dropped and
     * cr__reactive_destroy closes rc. */
    if (cr__job_queue_push(tl_set->jobs, &job) < 0)
        CR_LOG(CR_LOG_DEBUG, "hshr: stopping; connection event dropped");
}

/* The stop is complete: end every listener's loop. Any thread. */
static void on_stopped(void *arg)
{
    struct cr_model *m = arg;

    for (unsigned i = 0; i < m->nsets; i++)
        cr_reactor_stop(m->sets[i].r);
}

/* ------------------------------------------------------------------ model ops */

static void hshr_destroy(struct cr_model *m);

/* A timeline lane per worker and per listener (none when it is off). */
static int attach_lanes(struct cr_model *m)
{
    for (unsigned i = 0; i < m->nworkers + m->nsets; i++) {
        bool listener = i >= m->nworkers;
        unsigned k = listener ? i - m->nworkers : i;
        char name[32];
        int err;

        snprintf(name, sizeof(name), listener ? "hshr listener %u" : "hshr worker %u", k);
        err = cr__role_attach(&m->threads[i].clock, m->env->timeline, name);
        if (err < 0)
            return err;
        if (listener)
            m->sets[k].listener_lane = cr__role_lane(&m->threads[i].clock);
    }
    return 0;
}

/* Workers of set i of nsets: threads / nsets, the first sets one more. */
static unsigned set_workers(unsigned threads, unsigned nsets, unsigned i)
{
    return threads / nsets + (i < threads % nsets ? 1 : 0);
}

/* Creates the sets' reactors and queues and lays out the threads. */
static int create_sets(struct cr_model *m, size_t qsize)
{
    unsigned w = 0;

    for (unsigned i = 0; i < m->nsets; i++) {
        struct hshr_set *set = &m->sets[i];
        struct hshr_thread *listener = &m->threads[m->nworkers + i];
        int err;

        set->idx = i;
        err = cr__job_queue_create(&set->jobs, qsize, sizeof(struct hshr_job));
        if (err < 0)
            return err;
        err = cr_reactor_create(&set->r, &m->env->reactor);
        if (err < 0)
            return err;
        m->reactors[i] = set->r;
        for (unsigned k = set_workers(m->nworkers, m->nsets, i); k > 0; k--, w++)
            m->threads[w] = (struct hshr_thread){.m = m, .set = set, .idx = w};
        *listener = (struct hshr_thread){.m = m, .set = set, .idx = m->nworkers + i};
    }
    return 0;
}

static int hshr_create(struct cr_model **out, const struct cr_model_env *env)
{
    struct cr__reactive_config rscfg = {
        .env = env,
        .worker = current_worker,
        .stopped = on_stopped,
        .defer = defer_conn,
    };
    unsigned nworkers = env->cfg->threads > 0 ? (unsigned)env->cfg->threads : 1;
    unsigned nsets = env->cfg->groups > 0 ? (unsigned)env->cfg->groups : 1;
    size_t qsize = env->cfg->queue_size > 0 ? (size_t)env->cfg->queue_size : 1024;
    struct cr_model *m;
    int err;

    *out = NULL;
    if (nsets > CR_SERVER_MAX_GROUPS || nsets > nworkers)
        return -EINVAL; /* every set needs a worker */
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return -ENOMEM;
    m->env = env;
    m->nworkers = nworkers;
    m->nsets = nsets;
    m->threads = calloc(nworkers + nsets, sizeof(*m->threads));
    if (m->threads == NULL) {
        err = -ENOMEM;
        goto out_destroy;
    }
    err = create_sets(m, qsize);
    if (err < 0)
        goto out_destroy;
    err = attach_lanes(m);
    if (err < 0)
        goto out_destroy;
    rscfg.reactors = m->reactors;
    rscfg.nreactors = nsets;
    rscfg.arg = m;
    err = cr__reactive_create(&m->rs, &rscfg);
    if (err < 0)
        goto out_destroy;
    *out = m;
    return 0;

out_destroy:
    hshr_destroy(m);
    return err;
}

static int hshr_wait(struct cr_model *m)
{
    if (m->joined)
        return 0;
    for (unsigned i = 0; i < m->nlisteners; i++)
        pthread_join(m->threads[m->nworkers + i].thread, NULL);
    for (unsigned i = 0; i < m->nstarted; i++)
        pthread_join(m->threads[i].thread, NULL);
    m->joined = true;
    return 0;
}

static int hshr_start(struct cr_model *m)
{
    int err = 0;

    /* Workers first: a listener has somewhere to put its first event. */
    for (; m->nstarted < m->nworkers; m->nstarted++) {
        struct hshr_thread *t = &m->threads[m->nstarted];

        err = -pthread_create(&t->thread, NULL, worker_main, t);
        if (err < 0)
            goto out_stop;
    }
    for (; m->nlisteners < m->nsets; m->nlisteners++) {
        struct hshr_thread *t = &m->threads[m->nworkers + m->nlisteners];

        err = -pthread_create(&t->thread, NULL, listener_main, t);
        if (err < 0)
            goto out_stop;
    }
    return 0;

out_stop:
    /* Leave nothing running: the stop ends the listeners started, the
     * queues' close the workers. */
    stop_immediately(m);
    (void)hshr_wait(m);
    m->nstarted = 0;
    m->nlisteners = 0;
    m->joined = false;
    return err;
}

static void hshr_stop(struct cr_model *m, bool graceful)
{
    /* stopped() runs once; a graceful stop may have made it run with busy
     * connections still open. */
    if (!graceful)
        stop_immediately(m);
    cr__reactive_stop(m->rs, graceful);
}

static void hshr_destroy(struct cr_model *m)
{
    if (m == NULL)
        return;
    if (m->nlisteners > 0 && !m->joined) {
        hshr_stop(m, false);
        (void)hshr_wait(m);
    }
    /* Jobs left in the queues are deferred events never handled: the
     * reactive set closes their connections. */
    cr__reactive_destroy(m->rs);
    for (unsigned i = 0; i < m->nsets; i++) {
        cr_reactor_destroy(m->sets[i].r);
        cr__job_queue_destroy(m->sets[i].jobs);
    }
    for (unsigned i = 0; m->threads != NULL && i < m->nworkers + m->nsets; i++)
        cr__role_detach(&m->threads[i].clock, m->env->timeline);
    free(m->threads);
    free(m);
}

static unsigned hshr_stats(const struct cr_model *m, struct cr_server_stats *st,
                           struct cr_worker_stats *workers, unsigned max)
{
    uint64_t now = cr_clock_now_ns();
    unsigned n = m->nworkers + m->nsets;

    st->queue_depth = 0;
    for (unsigned i = 0; i < m->nsets; i++)
        st->queue_depth += cr__job_queue_depth(m->sets[i].jobs);
    /* One listener is the classic model, without sets. */
    st->groups = m->nsets > 1 ? m->nsets : 0;
    for (unsigned i = 0; i < st->groups; i++)
        st->group_accepted[i] = cr__reactive_accepted(m->rs, i);
    for (unsigned i = 0; i < n && i < max; i++) {
        cr__role_read(&m->threads[i].clock, now, &workers[i]);
        if (m->nsets > 1)
            workers[i].group = m->threads[i].set->idx;
    }
    return n;
}

const struct cr_model_ops cr__model_hshr_ops = {
    .name = "hshr",
    .create = hshr_create,
    .start = hshr_start,
    .stop = hshr_stop,
    .wait = hshr_wait,
    .destroy = hshr_destroy,
    .stats = hshr_stats,
};
