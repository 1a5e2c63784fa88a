/*
 * prefork_worker.c - a worker process of the prefork model's Worker Pool
 * (Apache's prefork and worker MPMs, the child's side). The manager
 * (prefork_manager.c) forks it into cr__prefork_worker_main. It runs
 * cfg->threads threads (classic prefork: one), each in the Leader/Followers
 * loop below: IDLE as a follower, LISTENING as the leader, which accepts one
 * connection, BUSY while it serves a connection with blocking waits. A
 * connection without a whole request yet is parked, not served: the
 * process's park set (an epoll set of its own, watched by whichever thread
 * leads or waits to) holds it until input arrives, so a slow head holds no
 * thread; once a request is answered the thread serves the connection on
 * (cr__conn_serve_yielding), parking it again between requests only when a
 * parked one is ready and no other thread of the process is free. The
 * process publishes its state in its scoreboard slot, and writes there only
 * while the slot's tag is its own (the manager may evict it and give the
 * slot to another).
 *
 * Stopping: the manager sets the slot's stop and signals the process
 * (cr__proc_stop, proc.c); max_requests_per_child sets the same flag from
 * inside. Every thread looks at least every POLL_MS. Graceful: a request in
 * flight is answered, and a parked connection that has had no request gets
 * STOP_GRACE_MS for one. Immediate: connections close at once.
 *
 * Under reuseport it accepts on every copy of every listener, as every
 * worker does: a connection the kernel queued on one copy is taken by
 * whichever worker is free, never left behind a busy one. It closes
 * nothing it inherits by range: the service's own descriptors (a file
 * cache, a log) must survive the fork. docs/design/prefork.md has the
 * whole design.
 *
 * Owns, in its process, its epoll sets, its threads, their connections and
 * the parked ones; borrows the pool (its copy of the master's) and the
 * service. Lock order: the accept lock, then w->lock (a leaf; lf_follow
 * takes it with the accept lock held, nothing takes the accept lock under
 * it; the park set's epoll calls are made under it).
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
#define PARK_MAX          256u /* parked connections per process; beyond, it accepts no more */
#define PARK_POLL_MS      10   /* with some parked, the wait for the accept lock is cut this fine */
#define SWEEP_MS          50u  /* parked connections' deadlines are looked at this often */

/* A parked connection: its entry in the park set (epoll data: gen << 32 |
 * index, so a stale event finds the entry reused and is dropped). */
struct parked {
    struct cr_conn *c; /* NULL: free */
    uint32_t gen;
    bool served; /* it had a request: parked between requests */
};

struct wthread;

/* One worker process (its own copy of memory). */
struct wproc {
    const struct cr__prefork_pool *pool;
    struct cr__slot *slot; /* ours while the tag matches (my_slot) */
    unsigned slot_idx;
    uint32_t tag;
    unsigned nthreads;
    struct cr__conn_config conn;
    int epfd; /* the listeners and hfd */
    int hfd;  /* the park set */
    uint64_t requests;

    struct cr_mutex lock;
    pthread_cond_t cv; /* a follower thread waits for the leadership */
    /* Protected by lock. */
    bool has_leader;
    bool leading; /* the leader holds the accept lock */
    bool stopping;
    unsigned busy_threads;
    struct wthread *threads;
    struct parked *park; /* PARK_MAX entries */
    unsigned nparked;
    uint64_t next_sweep;
    uint64_t grace_end; /* a graceful stop's end for parked fresh connections */
    int tl_state;       /* the last state on the slot's timeline lane; -1: none */
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
    __atomic_store_n(&s->parked, w->nparked, __ATOMIC_RELAXED);
    __atomic_store_n(&s->busy_since_ns, since, __ATOMIC_RELAXED);
    /* Release: whoever sees this state (the acquire load in
     * cr__scoreboard_copy) sees the pid stored at the worker's start. */
    __atomic_store_n(&s->state, (int)st, __ATOMIC_RELEASE);
    if (w->pool->cfg->timeline_events != CR_SERVER_TIMELINE_OFF && (int)st != w->tl_state) {
        /* A reading per change of the process's state: per connection,
         * not per request (docs/design/timeline.md says why not the
         * coarse clock). */
        cr__slot_timeline_note(s, cr_clock_now_ns(), (int)st);
        w->tl_state = (int)st;
    }
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

/* The end of a connection: its bytes to the slot, then closed. */
static void finish(struct wproc *w, struct cr_conn *c)
{
    struct cr__slot *s = my_slot(w);

    if (s != NULL)
        __atomic_fetch_add(&s->bytes, cr__conn_bytes_out(c), __ATOMIC_RELAXED);
    cr__conn_destroy(c);
}

/* Parks c until input arrives. false: the set is full or epoll failed (the
 * caller closes it). */
static bool park(struct wproc *w, struct cr_conn *c, bool served)
{
    bool ok = false;

    cr_mutex_lock(&w->lock);
    for (unsigned i = 0; i < PARK_MAX && !ok; i++) {
        struct parked *p = &w->park[i];
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT};

        if (p->c != NULL)
            continue;
        p->gen++;
        ev.data.u64 = (uint64_t)p->gen << 32 | i;
        if (epoll_ctl(w->hfd, EPOLL_CTL_ADD, cr__conn_fd(c), &ev) < 0) {
            CR_LOG(CR_LOG_WARN, "prefork: parking a connection: %s", strerror(errno));
            break;
        }
        p->c = c;
        p->served = served;
        w->nparked++;
        ok = true;
    }
    publish_state(w);
    cr_mutex_unlock(&w->lock);
    return ok;
}

/* Takes entry i out of the park set. Caller holds w->lock. */
static struct cr_conn *unpark(struct wproc *w, unsigned i, bool *served)
{
    struct parked *p = &w->park[i];
    struct cr_conn *c = p->c;

    cr_mutex_assert_held(&w->lock);
    (void)epoll_ctl(w->hfd, EPOLL_CTL_DEL, cr__conn_fd(c), NULL);
    p->c = NULL;
    *served = p->served;
    w->nparked--;
    publish_state(w);
    return c;
}

/* A parked connection with input (or a hang-up), within timeout_ms. */
static struct cr_conn *take_ready(struct wproc *w, int timeout_ms, bool *served)
{
    struct epoll_event ev;
    struct cr_conn *c = NULL;
    unsigned i;

    if (epoll_wait(w->hfd, &ev, 1, timeout_ms) != 1)
        return NULL;
    i = (unsigned)(ev.data.u64 & 0xffffffffu);
    cr_mutex_lock(&w->lock);
    if (i < PARK_MAX && w->park[i].c != NULL && w->park[i].gen == (uint32_t)(ev.data.u64 >> 32))
        c = unpark(w, i, served);
    cr_mutex_unlock(&w->lock);
    return c;
}

/*
 * Closes the parked connections whose deadline passed (the service's: a
 * header timeout counts from the connection's accept), and at a stop: all
 * at once when immediate; when graceful, the idle ones that had a request,
 * and the rest STOP_GRACE_MS after the stop. At most every SWEEP_MS unless
 * stopping.
 */
static void sweep(struct wproc *w)
{
    struct cr_conn *gone[PARK_MAX];
    uint64_t now = cr_clock_now_ns();
    int level = stop_level(w);
    unsigned n = 0;

    cr_mutex_lock(&w->lock);
    if (w->nparked == 0 || (level == 0 && now < w->next_sweep)) {
        cr_mutex_unlock(&w->lock);
        return;
    }
    w->next_sweep = now + SWEEP_MS * CR_NSEC_PER_MSEC;
    if (level != 0 && w->grace_end == 0)
        w->grace_end = now + STOP_GRACE_MS * CR_NSEC_PER_MSEC;
    for (unsigned i = 0; i < PARK_MAX; i++) {
        struct parked *p = &w->park[i];
        uint64_t deadline;
        bool served;

        if (p->c == NULL)
            continue;
        deadline = cr__conn_deadline(p->c);
        if (level == CR__STOP_NOW || (deadline != 0 && now >= deadline) ||
            (level != 0 && ((p->served && cr__conn_is_idle(p->c)) || now >= w->grace_end)))
            gone[n++] = unpark(w, i, &served);
    }
    cr_mutex_unlock(&w->lock);
    for (unsigned i = 0; i < n; i++)
        finish(w, gone[i]);
}

/* cr__conn_serve_yielding's question, every 100 ms at most and at each
 * wait: the sweep, and whether a parked connection that becomes ready
 * would find no other thread free (then this one leaves its idle one). */
static bool may_yield(void *arg)
{
    struct wproc *w = arg;
    bool yes;

    sweep(w);
    cr_mutex_lock(&w->lock);
    yes = w->nparked > 0 && w->nparked < PARK_MAX && w->busy_threads >= w->nthreads;
    cr_mutex_unlock(&w->lock);
    return yes;
}

/* Thread t takes or gives back a connection: BUSY or not. */
static void set_busy(struct wthread *t, bool busy)
{
    struct wproc *w = t->w;

    cr_mutex_lock(&w->lock);
    w->busy_threads += busy ? 1 : (unsigned)-1;
    t->busy_since = busy ? cr_clock_now_ns() : 0;
    publish_state(w);
    cr_mutex_unlock(&w->lock);
}

/* A connection just accepted, or NULL (refused: fd closed). */
static struct cr_conn *accept_conn(struct wproc *w, int fd)
{
    struct cr__slot *s = my_slot(w);
    struct cr_conn *c;
    int err;

    /* Relaxed: statistics (model_internal.h). */
    __atomic_fetch_add(&w->pool->totals->accepted, 1, __ATOMIC_RELAXED);
    if (s != NULL)
        __atomic_fetch_add(&s->connections, 1, __ATOMIC_RELAXED);
    err = cr__conn_create(&c, fd, &w->conn);
    if (err < 0) {
        /* fd is closed; the service refused it or memory ran out. */
        CR_LOG(CR_LOG_DEBUG, "prefork: connection refused: %s", strerror(-err));
        return NULL;
    }
    return c;
}

/*
 * Runs connection c on thread t: reads what is there; without an answer
 * yet (no whole request) it is parked again. Once answered it is served on
 * with blocking waits, until it ends or, idle between requests, gives the
 * thread to a parked one that is ready (it is parked then).
 */
static void run(struct wthread *t, struct cr_conn *c, bool served)
{
    struct wproc *w = t->w;
    struct cr__conn_yield y = {.fd = w->hfd, .may_yield = may_yield, .arg = w};
    bool keep;

    set_busy(t, true);
    if (!served) {
        uint64_t out0 = cr__conn_bytes_out(c) + cr_conn_pending(c);
        enum cr__conn_next next = cr__conn_handle(c, CR_EV_READ, t->idx);

        if (next == CR__CONN_READ && cr__conn_bytes_out(c) + cr_conn_pending(c) == out0) {
            if (!park(w, c, false))
                finish(w, c);
            set_busy(t, false);
            return;
        }
        if (next == CR__CONN_CLOSE) {
            finish(w, c);
            set_busy(t, false);
            return;
        }
    }
    keep = cr__conn_serve_yielding(c, t->idx, &cr__proc_stop, &y);
    if (!keep || !park(w, c, true))
        finish(w, c);
    set_busy(t, false);
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
 * listening sockets and the process's park set (its own epoll set, 100 ms
 * at a time so that a stop is seen), takes one connection (accepted, or a
 * parked one with input) and steps down before running it. The candidate
 * that waits for the accept lock watches the park set meanwhile (the lock
 * has no descriptor to wait on: PARK_POLL_MS at a time while any is
 * parked), and takes a ready parked connection instead of leading. With the
 * lock kinds none and reuseport every process's candidate leads at once and
 * EPOLLEXCLUSIVE or the kernel picks who accepts.
 */

/* Takes the in-process leadership, then the accept lock. false once a stop
 * is seen, or when *ready is a parked connection taken instead. */
static bool lf_follow(struct wproc *w, struct cr_conn **ready, bool *served)
{
    unsigned nparked;
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
        sweep(w);
        cr_mutex_lock(&w->lock);
        nparked = w->nparked;
        cr_mutex_unlock(&w->lock);
        /* A full park set: no more accepts here until some leave. */
        err = nparked >= PARK_MAX
                  ? -ETIMEDOUT
                  : cr__accept_lock_acquire(w->pool->alock, nparked > 0 ? 0 : POLL_MS);
        if (err != -ETIMEDOUT)
            break;
        /* The lock is another's: a while on the parked ones. */
        if (nparked > 0 && (*ready = take_ready(w, PARK_POLL_MS, served)) != NULL) {
            err = -ECANCELED;
            break;
        }
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

/* The leader: waits on the listeners and the park set and accepts one
 * connection, or takes a parked one with input (*ready). Returns the
 * accepted fd, or -1 (with *ready, or once a stop is seen). Holds the
 * accept lock. */
static int lf_lead(struct wproc *w, struct cr_conn **ready, bool *served)
{
    const struct cr__prefork_pool *pool = w->pool;
    bool exclusive = cr__accept_lock_is_exclusive(pool->alock);

    while (!note_stop(w)) {
        struct epoll_event ev[MAX_EVENTS];
        int n = epoll_wait(w->epfd, ev, MAX_EVENTS, POLL_MS);
        int fd = -1;

        sweep(w);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.fd == w->hfd && (*ready = take_ready(w, 0, served)) != NULL)
                return -1;
        }

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
            int err = ev[i].data.fd == w->hfd ? -EAGAIN : cr_listener_accept(ev[i].data.fd, &fd);

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

/* After a stop: runs the parked connections that get input until none is
 * left (the sweep closes the rest, sweep's rules). */
static void drain(struct wthread *t)
{
    struct wproc *w = t->w;

    for (;;) {
        struct cr_conn *c;
        unsigned n;
        bool served;

        sweep(w);
        cr_mutex_lock(&w->lock);
        n = w->nparked;
        cr_mutex_unlock(&w->lock);
        if (n == 0)
            return;
        c = take_ready(w, PARK_POLL_MS, &served);
        if (c != NULL)
            run(t, c, served);
    }
}

/* A worker thread: follower, leader, running a connection, and round
 * again; after a stop, what is parked. */
static void *thread_main(void *arg)
{
    struct wthread *t = arg;
    struct wproc *w = t->w;

    for (;;) {
        struct cr_conn *c = NULL;
        bool served = false;
        int fd = -1;

        if (lf_follow(w, &c, &served)) {
            fd = lf_lead(w, &c, &served);
            lf_unlead(w);
        }
        if (fd >= 0)
            c = accept_conn(w, fd);
        else if (c == NULL)
            break; /* a stop */
        if (c != NULL)
            run(t, c, served);
    }
    drain(t);
    return NULL;
}

static int watch(int epfd, int fd, uint32_t flags)
{
    struct epoll_event ev = {.events = EPOLLIN | flags, .data.fd = fd};

    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

/* The worker's epoll set: every listening socket, the reuseport copies
 * included (EPOLLEXCLUSIVE when no lock picks a single leader), and the
 * park set. */
static int setup_listeners(struct wproc *w)
{
    const struct cr__prefork_pool *pool = w->pool;
    bool exclusive = cr__accept_lock_is_exclusive(pool->alock);
    int err;

    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (w->epfd < 0)
        return -errno;
    w->hfd = epoll_create1(EPOLL_CLOEXEC);
    if (w->hfd < 0)
        return -errno;
    err = watch(w->epfd, w->hfd, 0);
    if (err < 0)
        return err;
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
    /* The manager stores the pid too, but only once the spawn has returned:
     * the slot must name its process before it shows any state of ours. */
    __atomic_store_n(&w->slot->pid, (int)getpid(), __ATOMIC_RELAXED);
    /* The slot's timeline lane is this worker's from here on. */
    cr__slot_timeline_start(w->slot);
    w->tl_state = -1;
    w->nthreads = pool->cfg->threads > 0 ? (unsigned)pool->cfg->threads : 1;
    w->epfd = -1;
    w->hfd = -1;
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
    w->park = calloc(PARK_MAX, sizeof(*w->park));
    if (w->threads == NULL || w->park == NULL) {
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
    if (w->hfd >= 0)
        close(w->hfd);
    cr_cond_fini(&w->cv);
    cr_mutex_fini(&w->lock);
out_exit:
    free(w->park);
    free(w->threads);
    if (svc->process_exit != NULL)
        svc->process_exit(svc->ctx);
    return status;
}
