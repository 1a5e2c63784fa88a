/*
 * model_hshr.c - the Half-Sync/Half-Reactive model (POSA2; the Job Queue of
 * Gröne & Tabeling), the baseline the Leader/Followers paper argues against:
 * one listener thread waits for readiness on every handle, accepts and runs
 * the timers itself, and queues each ready connection on a bounded
 * synchronized job queue; a pool of `threads` worker threads takes the jobs
 * and serves them. cr_server (src/server.c) drives it through
 * cr__model_hshr_ops. Owns the reactor, the queue, the listener and the
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
 * Lock order: the queue's lock is a leaf; no other lock is held across a
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
#include <stdlib.h>
#include <string.h>

/* A ready connection, deferred by model_reactive's handler (defer_conn). */
struct hshr_job {
    struct cr__reactive_conn *rc;
    unsigned events; /* CR_EV_* */
};

/* One thread: a worker or the listener. */
struct hshr_thread {
    struct cr_model *m;
    unsigned idx;
    pthread_t thread;
    /* Written by this thread, read by stats (role_internal.h). */
    struct cr__role_clock clock;
};

struct cr_model {
    /* Immutable after create. */
    const struct cr_model_env *env;
    struct cr_reactor *r;
    struct cr__reactive *rs;
    struct cr_job_queue *jobs; /* of struct hshr_job */
    unsigned nworkers;
    struct hshr_thread *threads; /* nworkers workers, then the listener */

    /* Owner thread only (start, wait, destroy). */
    unsigned nstarted; /* workers started */
    bool listener_started;
    bool joined;

    /* Atomic: an immediate stop was requested; workers drop queued jobs.
     * Relaxed: the queue's close, which follows it, publishes it. */
    int immediate;
};

/* The worker index of the calling thread, for cr_conn_worker(). Set once by
 * each worker; 0 on other threads. */
static __thread unsigned tl_worker;

static bool is_immediate(const struct cr_model *m)
{
    return __atomic_load_n(&m->immediate, __ATOMIC_RELAXED) != 0;
}

/* ------------------------------------------------------------------ threads */

static void *worker_main(void *arg)
{
    struct hshr_thread *t = arg;
    struct cr_model *m = t->m;
    struct hshr_job job;

    tl_worker = t->idx;
    cr__role_set(&t->clock, CR_ROLE_IDLE);
    /* Fails only once the queue is closed and drained. */
    while (cr__job_queue_pop(m->jobs, &job) == 0) {
        if (is_immediate(m))
            continue; /* cr__reactive_destroy closes its connection */
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

    cr__role_set(&t->clock, CR_ROLE_LISTENER);
    /* An immediate stop also stops the reactor, but may not have yet. */
    while (!cr_reactor_is_stopped(m->r) && !is_immediate(m)) {
        struct cr_reactor_event ev;
        int n = cr_reactor_next(m->r, -1, &ev);

        if (n < 0) {
            CR_LOG(CR_LOG_ERROR, "hshr: waiting for events: %s", strerror(-n));
            /* Without a listener nothing progresses: end everything. */
            __atomic_store_n(&m->immediate, 1, __ATOMIC_RELAXED);
            cr__reactive_stop(m->rs, false);
            break;
        }
        if (n == 0)
            continue; /* a wake-up: stop, or a registration */
        cr__role_event(&t->clock);
        /* Accepts and timers run here; a connection goes to defer_conn. */
        cr_reactor_dispatch(m->r, &ev);
    }
    cr__role_set(&t->clock, CR_ROLE_STOPPED);
    /* Workers handle (or, immediate, drop) what is queued, then leave. */
    cr__job_queue_close(m->jobs);
    return NULL;
}

/* ------------------------------------------------------------------ reactive hooks */

static unsigned current_worker(void *arg)
{
    CR_UNUSED(arg);
    return tl_worker;
}

/* model_reactive's connection handler, on the listener: queue the ready
 * connection for a worker. */
static void defer_conn(struct cr__reactive_conn *rc, unsigned events, void *arg)
{
    struct cr_model *m = arg;
    struct hshr_job job = {.rc = rc, .events = events};

    /* Blocks while the queue is full: the backpressure (file comment). Fails
     * only once an immediate stop closed the queue: the job is dropped and
     * cr__reactive_destroy closes rc. */
    if (cr__job_queue_push(m->jobs, &job) < 0)
        CR_LOG(CR_LOG_DEBUG, "hshr: stopping; connection event dropped");
}

/* The stop is complete: end the listener's loop. Any thread. */
static void on_stopped(void *arg)
{
    struct cr_model *m = arg;

    cr_reactor_stop(m->r);
}

/* ------------------------------------------------------------------ model ops */

static void hshr_stop(struct cr_model *m, bool graceful);
static int hshr_wait(struct cr_model *m);

static int hshr_create(struct cr_model **out, const struct cr_model_env *env)
{
    struct cr__reactive_config rscfg = {
        .env = env,
        .nreactors = 1,
        .worker = current_worker,
        .stopped = on_stopped,
        .defer = defer_conn,
    };
    unsigned nworkers = env->cfg->threads > 0 ? (unsigned)env->cfg->threads : 1;
    size_t qsize = env->cfg->queue_size > 0 ? (size_t)env->cfg->queue_size : 1024;
    struct cr_model *m;
    int err;

    *out = NULL;
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return -ENOMEM;
    m->env = env;
    m->nworkers = nworkers;
    m->threads = calloc(nworkers + 1, sizeof(*m->threads));
    if (m->threads == NULL) {
        err = -ENOMEM;
        goto out_free;
    }
    for (unsigned i = 0; i <= nworkers; i++) {
        m->threads[i].m = m;
        m->threads[i].idx = i;
    }
    err = cr__job_queue_create(&m->jobs, qsize, sizeof(struct hshr_job));
    if (err < 0)
        goto out_free_threads;
    err = cr_reactor_create(&m->r, &env->reactor);
    if (err < 0)
        goto out_destroy_jobs;
    rscfg.reactors = &m->r;
    rscfg.arg = m;
    err = cr__reactive_create(&m->rs, &rscfg);
    if (err < 0)
        goto out_destroy_reactor;
    *out = m;
    return 0;

out_destroy_reactor:
    cr_reactor_destroy(m->r);
out_destroy_jobs:
    cr__job_queue_destroy(m->jobs);
out_free_threads:
    free(m->threads);
out_free:
    free(m);
    return err;
}

static int hshr_start(struct cr_model *m)
{
    struct hshr_thread *listener = &m->threads[m->nworkers];
    int err = 0;

    /* Workers first: the listener has somewhere to put its first event. */
    for (; m->nstarted < m->nworkers; m->nstarted++) {
        struct hshr_thread *t = &m->threads[m->nstarted];

        err = -pthread_create(&t->thread, NULL, worker_main, t);
        if (err < 0)
            goto out_stop;
    }
    err = -pthread_create(&listener->thread, NULL, listener_main, listener);
    if (err < 0)
        goto out_stop;
    m->listener_started = true;
    return 0;

out_stop:
    /* Leave nothing running: the queue's close ends the started workers. */
    __atomic_store_n(&m->immediate, 1, __ATOMIC_RELAXED);
    cr__job_queue_close(m->jobs);
    for (unsigned i = 0; i < m->nstarted; i++)
        pthread_join(m->threads[i].thread, NULL);
    m->nstarted = 0;
    return err;
}

static void hshr_stop(struct cr_model *m, bool graceful)
{
    if (!graceful) {
        /* Before the close: a worker that sees the queue closed drops. */
        __atomic_store_n(&m->immediate, 1, __ATOMIC_RELAXED);
        /* Wakes a listener blocked on a full queue. */
        cr__job_queue_close(m->jobs);
        /* stopped() runs once; a graceful stop may have made it run with
         * busy connections still open. */
        cr_reactor_stop(m->r);
    }
    cr__reactive_stop(m->rs, graceful);
}

static int hshr_wait(struct cr_model *m)
{
    if (m->joined)
        return 0;
    if (m->listener_started)
        pthread_join(m->threads[m->nworkers].thread, NULL);
    for (unsigned i = 0; i < m->nstarted; i++)
        pthread_join(m->threads[i].thread, NULL);
    m->joined = true;
    return 0;
}

static void hshr_destroy(struct cr_model *m)
{
    if (m == NULL)
        return;
    if (m->listener_started && !m->joined) {
        hshr_stop(m, false);
        (void)hshr_wait(m);
    }
    /* Jobs left in the queue are deferred events never handled: the
     * reactive set closes their connections. */
    cr__reactive_destroy(m->rs);
    cr_reactor_destroy(m->r);
    cr__job_queue_destroy(m->jobs);
    free(m->threads);
    free(m);
}

static unsigned hshr_stats(const struct cr_model *m, struct cr_server_stats *st,
                           struct cr_worker_stats *workers, unsigned max)
{
    uint64_t now = cr_clock_now_ns();
    unsigned n = m->nworkers + 1;

    if (st != NULL)
        st->queue_depth = cr__job_queue_depth(m->jobs);
    for (unsigned i = 0; i < n && i < max; i++)
        cr__role_read(&m->threads[i].clock, now, &workers[i]);
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
