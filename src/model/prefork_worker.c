/*
 * prefork_worker.c - a worker process of the prefork model's Worker Pool
 * (Apache's prefork and worker MPMs, the child's side). The manager
 * (prefork_manager.c) forks it into cr__prefork_worker_main. It runs
 * cfg->threads threads (classic prefork: one), each in the Leader/Followers
 * loop below: IDLE as a follower, LISTENING as the leader, which accepts one
 * connection, BUSY while it serves that connection to its end with blocking
 * waits (cr__conn_serve_blocking). The process publishes its state in its
 * scoreboard slot, and writes there only while the slot's tag is its own
 * (the manager may evict it and give the slot to another).
 *
 * Stopping: the manager sets the slot's stop and signals the process
 * (cr__proc_stop, proc.c); max_requests_per_child sets the same flag from
 * inside. Every thread looks at least every POLL_MS. Graceful: a request in
 * flight is answered, and a connection accepted just before the stop gets
 * its first request served. Immediate: connections close at once.
 *
 * Under reuseport it accepts on every copy of every listener, as every
 * worker does: a connection the kernel queued on one copy is taken by
 * whichever worker is free, never left behind a busy one. It closes
 * nothing it inherits by range: the service's own descriptors (a file
 * cache, a log) must survive the fork. docs/design/prefork.md has the
 * whole design.
 *
 * Owns, in its process, its epoll set, its threads and their connections;
 * borrows the pool (its copy of the master's) and the service. Lock order:
 * the accept lock, then w->lock (a leaf; lf_follow takes it with the accept
 * lock held, nothing takes the accept lock under it).
 */
#include <cabrank/clock.h>
#include <cabrank/listener.h>
#include <cabrank/log.h>

#include "model/prefork_internal.h"
#include "os/proc_internal.h"
#include "os/sync_internal.h"

#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define POLL_MS           100   /* a worker looks at its stop flag this often */
#define STOP_GRACE_MS     1000u /* a fresh connection's first request, at a stop */
#define ACCEPT_BACKOFF_US 10000 /* out of descriptors: pause */
#define MAX_EVENTS        8

struct wthread;

/* One worker process (its own copy of memory). */
struct wproc {
    const struct cr__prefork_pool *pool;
    struct cr__slot *slot; /* ours while the tag matches (my_slot) */
    unsigned slot_idx;
    uint32_t tag;
    unsigned nthreads;
    struct cr__conn_config conn;
    int epfd;
    uint64_t requests;

    struct cr_mutex lock;
    pthread_cond_t cv; /* a follower thread waits for the leadership */
    /* Protected by lock. */
    bool has_leader;
    bool leading; /* the leader holds the accept lock */
    bool stopping;
    unsigned busy_threads;
    struct wthread *threads;
};

struct wthread {
    struct wproc *w;
    unsigned idx;
    pthread_t thread;
    /* Protected by w->lock: when its connection began (0: none). */
    uint64_t busy_since;
};

/* The slot, unless the manager evicted us from it (the slot is then
 * another worker's). */
static struct cr__slot *my_slot(struct wproc *w)
{
    return cr__scoreboard_owns(w->pool->sb, w->slot_idx, w->tag) ? w->slot : NULL;
}

/* 0, CR__STOP_GRACEFUL or CR__STOP_NOW: the signal's flag, or the
 * slot's stop should a signal have gone astray. */
static int stop_level(struct wproc *w)
{
    /* Relaxed: flags; the signal handler writes cr__proc_stop. */
    int st = __atomic_load_n(&cr__proc_stop, __ATOMIC_RELAXED);
    struct cr__slot *s;

    if (st == 0 && (s = my_slot(w)) != NULL)
        st = __atomic_load_n(&s->stop, __ATOMIC_RELAXED);
    return st;
}

/* Writes the process's state from what its threads do. Caller holds w->lock. */
static void publish_state(struct wproc *w)
{
    struct cr__slot *s = my_slot(w);
    enum cr_worker_state st;
    uint64_t since = 0;

    cr_mutex_assert_held(&w->lock);
    if (s == NULL)
        return;
    if (w->stopping || stop_level(w) != 0)
        st = CR_WORKER_STOPPING;
    else if (w->leading)
        st = CR_WORKER_LISTENING;
    else if (w->busy_threads >= w->nthreads)
        st = CR_WORKER_BUSY;
    else
        st = CR_WORKER_IDLE;
    /* The oldest connection in service, for the busy report. */
    for (unsigned i = 0; i < w->nthreads; i++) {
        uint64_t b = w->threads[i].busy_since;

        if (b != 0 && (since == 0 || b < since))
            since = b;
    }
    /* Relaxed: the scoreboard's single-writer fields (scoreboard_internal.h). */
    __atomic_store_n(&s->busy_threads, w->busy_threads, __ATOMIC_RELAXED);
    __atomic_store_n(&s->busy_since_ns, since, __ATOMIC_RELAXED);
    __atomic_store_n(&s->state, (int)st, __ATOMIC_RELAXED);
}

/* A stop was seen: the slot says STOPPING. */
static bool note_stop(struct wproc *w)
{
    if (stop_level(w) == 0)
        return false;
    cr_mutex_lock(&w->lock);
    if (!w->stopping) {
        w->stopping = true;
        cr_cond_broadcast(&w->cv);
        publish_state(w);
    }
    cr_mutex_unlock(&w->lock);
    return true;
}

/* cr_conn_request_done: the slot's counters and max_requests_per_child.
 * Serving thread. */
static void on_request(void *arg)
{
    struct wproc *w = arg;
    struct cr__slot *s = my_slot(w);
    uint64_t max = w->pool->cfg->max_requests_per_child;
    uint64_t n = __atomic_add_fetch(&w->requests, 1, __ATOMIC_RELAXED);

    if (s != NULL) {
        __atomic_fetch_add(&s->requests, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&s->last_request_ns, cr_clock_wall_ns(), __ATOMIC_RELAXED);
    }
    if (max != 0 && n == max) {
        /* Retire: finish what is in flight and exit 0; the manager
         * replaces us. Never downgrades an immediate stop. */
        int zero = 0;

        (void)__atomic_compare_exchange_n(&cr__proc_stop, &zero, CR__STOP_GRACEFUL, false,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    }
}

/*
 * Waits for the first bytes of a connection just accepted, before the
 * driver's wait: the driver treats a connection without input as idle, so
 * a graceful stop that came between accept and the client's request would
 * close it unanswered. A graceful stop gives the request STOP_GRACE_MS to
 * arrive. Returns false to close the connection unserved.
 */
static bool await_first_request(struct wproc *w, struct cr_conn *c)
{
    struct pollfd pfd = {.fd = cr__conn_fd(c), .events = POLLIN};
    uint64_t deadline = cr__conn_deadline(c);
    uint64_t grace_end = 0;

    if (!cr__conn_is_idle(c))
        return true; /* open queued output: the driver sends it */
    for (;;) {
        uint64_t now = cr_clock_now_ns();
        int st = stop_level(w);
        int n;

        if (st == CR__STOP_NOW)
            return false;
        if (st != 0 && grace_end == 0)
            grace_end = now + STOP_GRACE_MS * CR_NSEC_PER_MSEC;
        if ((grace_end != 0 && now >= grace_end) || (deadline != 0 && now >= deadline))
            return false;
        n = poll(&pfd, 1, POLL_MS);
        if (n > 0)
            return true; /* input, hang-up or error: the driver sees which */
        if (n < 0 && errno != EINTR)
            return true;
    }
}

/* Serves one accepted connection on thread t. */
static void serve(struct wthread *t, int fd)
{
    struct wproc *w = t->w;
    struct cr__slot *s;
    struct cr_conn *c;
    int err;

    /* Relaxed: statistics (model_internal.h). */
    __atomic_fetch_add(&w->pool->totals->accepted, 1, __ATOMIC_RELAXED);
    cr_mutex_lock(&w->lock);
    w->busy_threads++;
    t->busy_since = cr_clock_now_ns();
    s = my_slot(w);
    if (s != NULL)
        __atomic_fetch_add(&s->connections, 1, __ATOMIC_RELAXED);
    publish_state(w);
    cr_mutex_unlock(&w->lock);

    err = cr__conn_create(&c, fd, &w->conn);
    if (err == 0) {
        if (await_first_request(w, c))
            cr__conn_serve_blocking(c, t->idx, &cr__proc_stop);
        s = my_slot(w);
        if (s != NULL)
            __atomic_fetch_add(&s->bytes, cr__conn_bytes_out(c), __ATOMIC_RELAXED);
        cr__conn_destroy(c);
    } else {
        /* fd is closed; the service refused it or memory ran out. */
        CR_LOG(CR_LOG_DEBUG, "prefork: connection refused: %s", strerror(-err));
    }

    cr_mutex_lock(&w->lock);
    w->busy_threads--;
    t->busy_since = 0;
    publish_state(w);
    cr_mutex_unlock(&w->lock);
}

/*
 * Leader/Followers across processes (lf_follow, lf_lead, lf_unlead). The
 * pattern of src/pool/lf_pool.c, which this code cannot use: there the
 * followers are threads of one process waiting on one condvar and the
 * leader waits in a cr_reactor; here the followers are threads of this
 * process and of every other worker process, so the leadership has two
 * levels. An in-process mutex and condvar (has_leader) pick this
 * process's candidate; the accept lock, in shared memory or a file lock
 * (accept_lock_internal.h), picks among processes. The leader waits on the
 * listening sockets alone (its own epoll set, 100 ms at a time so that a
 * stop is seen), accepts one connection and steps down before serving it
 * with blocking I/O: the handle set is the listeners, the event an accept.
 * With the lock kinds none and reuseport every process's candidate leads
 * at once and EPOLLEXCLUSIVE or the kernel picks who accepts.
 */

/* Takes the in-process leadership, then the accept lock. false once a stop
 * is seen. */
static bool lf_follow(struct wproc *w)
{
    int err;

    cr_mutex_lock(&w->lock);
    while (w->has_leader && !w->stopping) {
        (void)cr_cond_timedwait(&w->cv, &w->lock,
                                cr_clock_now_ns() + (uint64_t)POLL_MS * CR_NSEC_PER_MSEC);
        if (stop_level(w) != 0)
            break;
    }
    if (w->has_leader || w->stopping || stop_level(w) != 0) {
        cr_mutex_unlock(&w->lock);
        (void)note_stop(w);
        return false;
    }
    w->has_leader = true;
    cr_mutex_unlock(&w->lock);

    for (;;) {
        if (note_stop(w)) {
            err = -ECANCELED;
            break;
        }
        err = cr__accept_lock_acquire(w->pool->alock, POLL_MS);
        if (err != -ETIMEDOUT)
            break;
    }
    cr_mutex_lock(&w->lock);
    if (err == 0) {
        w->leading = true;
        publish_state(w);
    } else {
        w->has_leader = false;
        cr_cond_signal(&w->cv);
    }
    cr_mutex_unlock(&w->lock);
    if (err < 0 && err != -ECANCELED) {
        /* Only a corrupted mutex gets here: leave, the manager replaces us. */
        CR_LOG(CR_LOG_ERROR, "prefork: accept lock: %s", strerror(-err));
        int zero = 0;
        (void)__atomic_compare_exchange_n(&cr__proc_stop, &zero, CR__STOP_GRACEFUL, false,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    }
    return err == 0;
}

/* The leader: waits on the listeners and accepts one connection. Returns
 * its fd, or -1 once a stop is seen. Holds the accept lock. */
static int lf_lead(struct wproc *w)
{
    const struct cr__prefork_pool *pool = w->pool;
    bool exclusive = cr__accept_lock_is_exclusive(pool->alock);

    while (!note_stop(w)) {
        struct epoll_event ev[MAX_EVENTS];
        int n = epoll_wait(w->epfd, ev, MAX_EVENTS, POLL_MS);
        int fd = -1;

        if (n < 0) {
            if (errno == EINTR)
                continue;
            CR_LOG(CR_LOG_ERROR, "prefork: epoll_wait() failed: %s", strerror(errno));
            return -1;
        }
        if (n == 0 && !exclusive) {
            /* EPOLLEXCLUSIVE wakes one waiter per arrival; one woken while
             * it was still busy with the previous arrival leaves the other
             * leaders asleep. A look at every listener now and then bounds
             * that wait. */
            for (size_t k = 0; k < cr__prefork_nsockets(pool) && fd < 0; k++) {
                if (cr_listener_accept(pool->env.listen_fds[k], &fd) < 0)
                    fd = -1;
            }
        }
        for (int i = 0; i < n && fd < 0; i++) {
            int err = cr_listener_accept(ev[i].data.fd, &fd);

            if (err == 0)
                break;
            fd = -1;
            if (err != -EAGAIN) {
                /* EMFILE and the like: pause rather than spin. */
                CR_LOG(CR_LOG_WARN, "prefork: accept4() failed: %s", strerror(-err));
                usleep(ACCEPT_BACKOFF_US);
                break;
            }
        }
        if (fd >= 0)
            return fd;
    }
    return -1;
}

/* Releases the accept lock, then the leadership: a follower (thread or
 * process) leads next. */
static void lf_unlead(struct wproc *w)
{
    cr__accept_lock_release(w->pool->alock);
    cr_mutex_lock(&w->lock);
    w->leading = false;
    w->has_leader = false;
    cr_cond_signal(&w->cv);
    publish_state(w);
    cr_mutex_unlock(&w->lock);
}

/* A worker thread: follower, leader, processing, and round again. */
static void *thread_main(void *arg)
{
    struct wthread *t = arg;
    struct wproc *w = t->w;

    while (lf_follow(w)) {
        int fd = lf_lead(w);

        lf_unlead(w);
        if (fd < 0)
            break;
        serve(t, fd);
    }
    return NULL;
}

static int watch(int epfd, int fd, uint32_t flags)
{
    struct epoll_event ev = {.events = EPOLLIN | flags, .data.fd = fd};

    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

/* The worker's epoll set: every listening socket, the reuseport copies
 * included (EPOLLEXCLUSIVE when no lock picks a single leader). */
static int setup_listeners(struct wproc *w)
{
    const struct cr__prefork_pool *pool = w->pool;
    bool exclusive = cr__accept_lock_is_exclusive(pool->alock);
    int err;

    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (w->epfd < 0)
        return -errno;
    for (size_t k = 0; k < cr__prefork_nsockets(pool); k++) {
        /* With a lock, plain level-triggered: an arrival is queued in every
         * set, so the next leader sees what the last one left. */
        err = watch(w->epfd, pool->env.listen_fds[k], exclusive ? 0 : EPOLLEXCLUSIVE);
        if (err < 0)
            return err;
    }
    return 0;
}

int cr__prefork_worker_main(const struct cr__prefork_pool *pool, unsigned slot, uint32_t tag)
{
    const struct cr_service *svc = pool->env.conn.svc;
    struct wproc wp;
    struct wproc *w = &wp;
    pthread_attr_t attr;
    unsigned started = 1;
    int status = 0;
    int err;

    memset(w, 0, sizeof(*w));
    w->pool = pool;
    w->slot_idx = slot;
    w->tag = tag;
    w->slot = cr__scoreboard_slot(pool->sb, w->slot_idx);
    w->nthreads = pool->cfg->threads > 0 ? (unsigned)pool->cfg->threads : 1;
    w->epfd = -1;
    w->conn = pool->env.conn;
    w->conn.bytes_in = &pool->totals->bytes_in;
    w->conn.bytes_out = &pool->totals->bytes_out;
    w->conn.requests = &pool->totals->requests;
    w->conn.on_request = on_request;
    w->conn.on_request_arg = w;

    if (svc->process_init != NULL) {
        err = svc->process_init(svc->ctx);
        if (err < 0) {
            CR_LOG(CR_LOG_ERROR, "prefork: worker %d: process_init failed: %s", (int)getpid(),
                   strerror(-err));
            return 3;
        }
    }
    w->threads = calloc(w->nthreads, sizeof(*w->threads));
    if (w->threads == NULL) {
        status = 4;
        goto out_exit;
    }
    err = cr_mutex_init(&w->lock);
    if (err == 0) {
        err = cr_cond_init(&w->cv);
        if (err < 0)
            cr_mutex_fini(&w->lock);
    }
    if (err < 0) {
        status = 4;
        goto out_exit;
    }
    err = cr__accept_lock_child_init(pool->alock);
    if (err == 0)
        err = setup_listeners(w);
    if (err < 0) {
        CR_LOG(CR_LOG_ERROR, "prefork: worker %d: listeners: %s", (int)getpid(), strerror(-err));
        status = 5;
        goto out_close;
    }

    cr_mutex_lock(&w->lock);
    publish_state(w); /* IDLE: ready */
    cr_mutex_unlock(&w->lock);
    for (unsigned i = 0; i < w->nthreads; i++) {
        w->threads[i].w = w;
        w->threads[i].idx = i;
    }
    err = -pthread_attr_init(&attr);
    if (err < 0) {
        status = 4;
        goto out_close;
    }
#ifdef CR_TSAN
    /* After fork, glibc hands the parent's other threads' stacks to new
     * threads, so a worker thread gets the pthread_t of a parent thread
     * TSan still counts as running ("dup thread with used id"). A size no
     * cached stack has makes glibc map a fresh one. */
    (void)pthread_attr_setstacksize(&attr, 9u << 20);
#endif
    for (; started < w->nthreads; started++) {
        err =
            -pthread_create(&w->threads[started].thread, &attr, thread_main, &w->threads[started]);
        if (err < 0) {
            CR_LOG(CR_LOG_WARN, "prefork: worker %d: %u of %u threads: %s", (int)getpid(), started,
                   w->nthreads, strerror(-err));
            break;
        }
    }
    pthread_attr_destroy(&attr);
    (void)thread_main(&w->threads[0]);
    for (unsigned i = 1; i < started; i++)
        pthread_join(w->threads[i].thread, NULL);
    (void)note_stop(w);

out_close:
    if (w->epfd >= 0)
        close(w->epfd);
    cr_cond_fini(&w->cv);
    cr_mutex_fini(&w->lock);
out_exit:
    free(w->threads);
    if (svc->process_exit != NULL)
        svc->process_exit(svc->ctx);
    return status;
}
