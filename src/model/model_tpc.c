/*
 * model_tpc.c - the thread-per-connection model (Proactor paper, A.1;
 * Listener/Worker of Gröne & Tabeling): one acceptor thread accepts, and each
 * connection is served to its end by one thread with blocking waits
 * (cr__conn_serve_blocking). cr_server (src/server.c) drives it through
 * cr__model_tpc_ops. Owns the acceptor thread, its reactor and acceptors,
 * the connection threads, the hand-off queue and every open connection;
 * borrows the listening sockets and the service.
 *
 * Acceptor: a cr_reactor with one cr_acceptor per listening socket, run by
 * one thread (cr_reactor_run): the accept loop (accept_loop_internal.h).
 * That is "poll on the listening sockets with a wake-up fd": stop wakes it
 * through the reactor, and the acceptor's EMFILE back-off and batching are
 * reused rather than written again.
 *
 * Threads are reused: a cached pool (the Worker Pool pattern) that grows on
 * demand up to the cap and keeps its threads until stop. The acceptor creates
 * the connection and pushes it onto a job queue (job_queue_internal.h) whose
 * idle threads pop it; it starts a new thread only when every thread it has
 * is busy. Creating a thread per connection would put pthread_create (tens of
 * microseconds, a fresh stack) on every connection's path (the Forking
 * Server's liability); a pool grown on demand costs that once per slot.
 * Idle threads are not retired: at most cap of them wait in the queue,
 * costing a stack each and no CPU.
 *
 * Cap: `busy` counts connections handed out and not finished (queued or
 * being served). When it reaches the cap (cfg->threads, at most
 * TPC_MAX_THREADS, and no more than max_connections) the acceptors are paused,
 * so new connections wait in the listen backlog; a thread that finishes a
 * connection below the cap resumes them. busy <= cap also bounds the queue,
 * so a push never blocks.
 *
 * Stop: graceful sets `stop` to CR__STOP_GRACEFUL, which the driver
 * reads at least every 100 ms: a thread answers the request in flight and
 * returns once its connection is idle (an idle keep-alive connection thus
 * closes within 100 ms); the acceptor thread leaves its loop, destroys the
 * acceptors and closes the queue, and idle threads serve what is queued
 * (under the same rule) and exit. Immediate sets CR__STOP_NOW and shuts
 * every served socket down (shutdown(2) wakes a thread blocked in poll on it
 * at once), and connections still queued are closed unserved. wait() joins
 * every thread; none is left blocked.
 *
 * Lock order: m->lock, then the accept loop's lock, then an acceptor's
 * lock, then the reactor's (the order accept_loop.c and acceptor.c state);
 * the job queue's lock is never taken under m->lock.
 */
#include <cabrank/clock.h>
#include <cabrank/log.h>
#include <cabrank/reactor.h>

#include "model/model_internal.h"
#include "net/accept_loop_internal.h"
#include "os/sync_internal.h"
#include "pool/job_queue_internal.h"
#include "pool/role_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* server.h: "tpc: cap 1024". */
#define TPC_MAX_THREADS 1024u

/* One connection thread. */
struct tpc_slot {
    struct cr_model *m;
    unsigned idx;
    pthread_t thread; /* valid for idx < m->nthreads */

    /* Protected by m->lock: the connection being served, for an immediate
     * stop to shut down. */
    struct cr_conn *conn;

    /* Written by the slot's thread, read by stats (role_internal.h);
     * its events are the connections served. */
    struct cr__role_clock clock;
};

struct cr_model {
    /* Immutable after create. */
    struct cr_model_env env;
    unsigned cap;
    struct cr__accept_loop *loop; /* the acceptor thread, its reactor and acceptors */
    struct cr_reactor *r;         /* the loop's */
    struct cr_job_queue *jobs;
    struct tpc_slot *slots; /* cap entries */

    struct cr_mutex lock;
    /* Protected by lock. */
    unsigned busy;     /* connections handed out, not finished */
    unsigned nthreads; /* slots whose thread was started */
    bool immediate;    /* an immediate stop was requested */

    /* 0, CR__STOP_GRACEFUL or CR__STOP_NOW: set by stop, read by
     * the driver at least every 100 ms. Relaxed atomics. */
    volatile int stop;
};

/* ----------------------------------------------------------- connections */

static void counter_add(uint64_t *counter, int64_t delta)
{
    /* Relaxed: server-wide statistics (model_internal.h). */
    __atomic_fetch_add(counter, (uint64_t)delta, __ATOMIC_RELAXED);
}

/* Closes a connection this model created. (The driver adds its bytes to
 * the server's counters itself.) */
static void close_conn(struct cr_model *m, struct cr_conn *c)
{
    cr__conn_destroy(c);
    counter_add(m->env.open_connections, -1);
}

/* A connection is finished: below the cap again, accept again. */
static void release_busy(struct cr_model *m)
{
    cr_mutex_lock(&m->lock);
    assert(m->busy > 0);
    m->busy--;
    /* Resumes the acceptors paused at the cap, unless the acceptor thread
     * has dropped them. */
    cr__accept_loop_update(m->loop, m->busy);
    cr_mutex_unlock(&m->lock);
}

/* Serves c to its end on the calling slot's thread. */
static void serve(struct tpc_slot *s, struct cr_conn *c)
{
    struct cr_model *m = s->m;
    bool immediate;

    cr_mutex_lock(&m->lock);
    /* Under the lock: either stop's sweep sees the connection and shuts it
     * down, or we see the stop. */
    immediate = m->immediate;
    if (!immediate)
        s->conn = c;
    cr_mutex_unlock(&m->lock);
    if (!immediate) {
        cr__role_set(&s->clock, CR_ROLE_PROCESSING);
        cr__role_event(&s->clock);
        cr__conn_serve_blocking(c, s->idx, &m->stop);
        cr_mutex_lock(&m->lock);
        s->conn = NULL;
        cr_mutex_unlock(&m->lock);
        cr__role_set(&s->clock, CR_ROLE_IDLE);
    }
    close_conn(m, c);
    release_busy(m);
}

static void *slot_main(void *arg)
{
    struct tpc_slot *s = arg;
    struct cr_conn *c;

    cr__role_set(&s->clock, CR_ROLE_IDLE);
    /* Fails only once the queue is closed and drained. */
    while (cr__job_queue_pop(s->m->jobs, &c) == 0)
        serve(s, c);
    cr__role_set(&s->clock, CR_ROLE_STOPPED);
    return NULL;
}

/* -------------------------------------------------------------- acceptor */

/*
 * Hands a new connection to an idle thread, starting one if every thread is
 * busy, and pauses the acceptors at the cap. Acceptor thread.
 */
static void hand_off(struct cr_model *m, struct cr_conn *c)
{
    struct tpc_slot *spawn = NULL;
    int err;

    cr_mutex_lock(&m->lock);
    m->busy++;
    if (m->busy > m->nthreads) {
        /* busy <= cap, so a slot is free. */
        spawn = &m->slots[m->nthreads];
        m->nthreads++;
    }
    /* Pauses the acceptors at the cap. */
    cr__accept_loop_update(m->loop, m->busy);
    cr_mutex_unlock(&m->lock);

    if (spawn != NULL) {
        char name[32];

        /* Its timeline lane, before the thread runs; without memory for
         * one it runs unrecorded. */
        snprintf(name, sizeof(name), "tpc %u", spawn->idx);
        err = cr__role_attach(&spawn->clock, m->env.timeline, name);
        if (err < 0)
            CR_LOG(CR_LOG_WARN, "tpc: timeline lane: %s", strerror(-err));
        err = -pthread_create(&spawn->thread, NULL, slot_main, spawn);
        if (err < 0) {
            cr__role_detach(&spawn->clock, m->env.timeline);
            /* Only this thread starts threads, so the slot is still the
             * last one. Out of threads: refuse the connection. */
            CR_LOG(CR_LOG_WARN, "tpc: pthread_create() failed: %s; closing connection",
                   strerror(-err));
            cr_mutex_lock(&m->lock);
            m->nthreads--;
            cr_mutex_unlock(&m->lock);
            close_conn(m, c);
            release_busy(m);
            return;
        }
    }
    /* busy <= cap = capacity: never blocks. Closed only by this thread. */
    err = cr__job_queue_push(m->jobs, &c);
    assert(err == 0);
    (void)err;
}

static void on_accept(struct cr__accept_loop *l, int fd, void *arg)
{
    struct cr_model *m = arg;
    struct cr_conn *c;
    int err;

    CR_UNUSED(l);
    counter_add(m->env.accepted, 1);
    /* A stop came in the middle of an accept batch. */
    if (__atomic_load_n(&m->stop, __ATOMIC_RELAXED) != 0) {
        close(fd);
        return;
    }
    err = cr__conn_create(&c, fd, &m->env.conn);
    if (err < 0) {
        /* The service refused it or memory ran out; fd is closed. */
        CR_LOG(CR_LOG_DEBUG, "tpc: connection refused: %s", strerror(-err));
        return;
    }
    counter_add(m->env.open_connections, 1);
    hand_off(m, c);
}

static void acceptor_main(struct cr__accept_loop *l, void *arg)
{
    struct cr_model *m = arg;
    int err;

    err = cr_reactor_run(m->r);
    if (err < 0)
        CR_LOG(CR_LOG_ERROR, "tpc: acceptor reactor failed: %s", strerror(-err));

    /* Connection threads no longer resume acceptors once they are dropped.
     * No thread is inside their callbacks: only this one runs the reactor. */
    cr__accept_loop_drop(l);
    /* Idle threads take what is queued and leave. */
    cr__job_queue_close(m->jobs);
}

/* ------------------------------------------------------------- model ops */

static void tpc_stop(struct cr_model *m, bool graceful);
static int tpc_wait(struct cr_model *m);
static void tpc_destroy(struct cr_model *m);

static int tpc_create(struct cr_model **out, const struct cr_model_env *env)
{
    struct cr__accept_loop_config lcfg = {.backend = env->cfg->backend,
                                          .listen_fds = env->listen_fds,
                                          .nlisten = env->nlisten,
                                          .on_accept = on_accept,
                                          .run = acceptor_main};
    struct cr_model *m;
    unsigned cap;
    int err;

    *out = NULL;
    cap = env->cfg->threads > 0 ? (unsigned)env->cfg->threads : TPC_MAX_THREADS;
    if (cap > TPC_MAX_THREADS)
        cap = TPC_MAX_THREADS;
    if (env->cfg->max_connections > 0 && (unsigned)env->cfg->max_connections < cap)
        cap = (unsigned)env->cfg->max_connections;

    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return -ENOMEM;
    m->env = *env;
    m->cap = cap;
    err = cr_mutex_init(&m->lock);
    if (err < 0) {
        free(m);
        return err;
    }
    /* From here tpc_destroy undoes whatever was set up. */
    m->slots = calloc(cap, sizeof(*m->slots));
    if (m->slots == NULL) {
        err = -ENOMEM;
        goto out_destroy;
    }
    for (unsigned i = 0; i < cap; i++) {
        m->slots[i].m = m;
        m->slots[i].idx = i;
    }
    err = cr__job_queue_create(&m->jobs, cap, sizeof(struct cr_conn *));
    if (err < 0)
        goto out_destroy;
    lcfg.cap = cap;
    lcfg.arg = m;
    err = cr__accept_loop_create(&m->loop, &lcfg);
    if (err < 0)
        goto out_destroy;
    m->r = cr__accept_loop_reactor(m->loop);
    *out = m;
    return 0;

out_destroy:
    tpc_destroy(m);
    return err;
}

static int tpc_start(struct cr_model *m)
{
    return cr__accept_loop_start(m->loop);
}

static void tpc_stop(struct cr_model *m, bool graceful)
{
    /* Relaxed, as the driver reads it: a flag; every other effect of stop
     * goes through m->lock, the queue or the reactor. A graceful stop never
     * undoes an immediate one. */
    if (graceful)
        (void)__atomic_compare_exchange_n(&m->stop, &(int){0}, CR__STOP_GRACEFUL, false,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    else
        __atomic_store_n(&m->stop, CR__STOP_NOW, __ATOMIC_RELAXED);
    if (!graceful) {
        cr_mutex_lock(&m->lock);
        m->immediate = true;
        for (unsigned i = 0; i < m->nthreads; i++) {
            /* The fd stays open until the slot's thread, which needs
             * m->lock to clear conn, destroys the connection. */
            if (m->slots[i].conn != NULL)
                shutdown(cr__conn_fd(m->slots[i].conn), SHUT_RDWR);
        }
        cr_mutex_unlock(&m->lock);
    }
    cr_reactor_stop(m->r);
}

static int tpc_wait(struct cr_model *m)
{
    unsigned n;

    /* Once: false when never started or joined before. */
    if (!cr__accept_loop_join(m->loop))
        return 0;
    /* The acceptor thread has ended: nthreads no longer changes. */
    cr_mutex_lock(&m->lock);
    n = m->nthreads;
    cr_mutex_unlock(&m->lock);
    for (unsigned i = 0; i < n; i++)
        pthread_join(m->slots[i].thread, NULL);
    return 0;
}

static void tpc_destroy(struct cr_model *m)
{
    struct cr_conn *c;

    if (m == NULL)
        return;
    if (m->loop != NULL && cr__accept_loop_is_joinable(m->loop)) {
        tpc_stop(m, false);
        (void)tpc_wait(m);
    }
    if (m->jobs != NULL) {
        /* Never started: connections accepted and never served. */
        while (cr__job_queue_try_pop(m->jobs, &c) == 0)
            close_conn(m, c);
    }
    cr__accept_loop_destroy(m->loop);
    cr__job_queue_destroy(m->jobs);
    for (unsigned i = 0; m->slots != NULL && i < m->cap; i++)
        cr__role_detach(&m->slots[i].clock, m->env.timeline);
    free(m->slots);
    cr_mutex_fini(&m->lock);
    free(m);
}

static unsigned tpc_stats(const struct cr_model *m, struct cr_server_stats *st,
                          struct cr_worker_stats *workers, unsigned max)
{
    struct cr_model *mm = (struct cr_model *)m; /* the lock, not the model, changes */
    uint64_t now = cr_clock_now_ns();
    unsigned n;

    CR_UNUSED(st);
    cr_mutex_lock(&mm->lock);
    n = mm->nthreads;
    cr_mutex_unlock(&mm->lock);
    for (unsigned i = 0; i < n && i < max; i++)
        cr__role_read(&m->slots[i].clock, now, &workers[i]);
    return n;
}

const struct cr_model_ops cr__model_tpc_ops = {
    .name = "tpc",
    .create = tpc_create,
    .start = tpc_start,
    .stop = tpc_stop,
    .wait = tpc_wait,
    .destroy = tpc_destroy,
    .stats = tpc_stats,
};
