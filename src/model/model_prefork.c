/*
 * model_prefork.c - the prefork model: a Worker Pool of processes and its
 * Worker Pool Manager (Apache's prefork and worker MPMs). cr_server
 * (src/server.c) drives it through cr__model_prefork_ops.
 *
 * Master: the manager thread runs a cr_reactor with a pidfd per worker
 * (readable when it exits: reaped and, when the pool is short, replaced at
 * once), a 1 s maintenance timer and an eventfd through which stop and
 * restart (any thread) reach it. It alone forks, claims and frees scoreboard
 * slots and signals workers. It never accepts: listening is the workers'
 * business (the paper: a manager in the listener's task would add the cost
 * of fork to the listener's latency).
 *
 * Maintenance (Apache's rule): it keeps the idle workers (IDLE or LISTENING,
 * STARTING counted as about to be idle) of the current generation within
 * [min_spare, max_spare], never below cfg->workers nor above max_workers:
 * short of min_spare it spawns 1, then 2, 4, ... 32 per tick while still
 * short, back to 1 once satisfied; beyond max_spare it retires one idle
 * worker per tick. It logs (once per connection) a worker busy on one
 * connection longer than busy_warn_ms.
 *
 * Workers: a worker process runs cfg->threads threads (classic prefork:
 * one), each in the same Leader/Followers loop across processes: IDLE,
 * take the in-process leadership (a mutex and condvar) then the accept lock
 * (accept_lock_internal.h) as a follower; LISTENING as the leader: wait on
 * the listeners (epoll, 100 ms at a time so a stop is seen), accept4 (EAGAIN:
 * another process took it, wait again); release the accept lock and the
 * leadership (promoting a follower, thread or process), BUSY: serve the
 * connection to its end with blocking waits (cr__conn_serve_blocking), and
 * round again. With accept_lock none, every process's leader waits with
 * EPOLLEXCLUSIVE, so one is woken per connection. With reuseport the
 * master opens cfg->workers SO_REUSEPORT copies of each listener (the
 * kernel spreads connections over them) and each worker accepts on the
 * copy of its index (and, as every worker, on the master's socket, which
 * is in the same group): the copies live in the master, so a worker that
 * exits leaves the connections queued on its copy to its successor, where
 * a copy of the worker's own would reset them when closed. Spare workers
 * beyond cfg->workers have no copy of their own.
 *
 * The trade-off of the blocking design, as in Apache prefork/worker: a
 * keep-alive connection holds its thread (with threads 1, its whole process)
 * until it closes or its idle timeout passes, so the number of open
 * connections is bounded by max_workers * threads; the manager's spare
 * workers are what keeps new connections from waiting behind idle ones.
 *
 * Stopping a worker: the manager sets its slot's stop and signals it through
 * its pidfd (SIGTERM graceful, SIGQUIT immediate: cr__proc_stop, proc.c),
 * which every thread reads at least every 100 ms; max_requests_per_child
 * sets the same flag from inside. Graceful: a request in flight is
 * answered, and a connection accepted just before the stop gets its first
 * request served (up to STOP_GRACE_MS for it to arrive): the listening
 * sockets stay open in the master, so during a graceful restart no
 * connection is refused or dropped. Immediate: connections close at once;
 * workers still alive IMMEDIATE_KILL_MS later get SIGKILL.
 *
 * Graceful restart: generation++, cfg->workers new workers at once, every
 * older worker told to stop gracefully. Old slots never block the new
 * generation (scoreboard capacity, and eviction of the oldest stopping one).
 *
 * Counters: workers serve in their own processes, so the server-wide
 * counters (accepted, bytes, requests) are the scoreboard's totals, shared
 * like its slots, and open connections are its busy threads; each worker's
 * own are in its slot.
 *
 * A worker closes what the model holds and it does not use (its siblings'
 * pidfds, the manager's reactor and eventfd, the other workers' reuseport
 * copies), never a range of descriptors: the service's own (a file cache,
 * a log) must survive the fork. Whatever else the master's process has
 * open when it forks is inherited too, as with any fork.
 *
 * Statistics: cr_server_stats lists one worker per process in the
 * scoreboard (IDLE as follower, LISTENING as leader, BUSY as processing,
 * STOPPING as stopped; its connections as events; no time per role).
 *
 * Ownership: the model owns the manager thread, its reactor and eventfd,
 * the worker processes (a struct proc each, manager thread only), the
 * scoreboard (with the server-wide totals), the accept lock and the
 * reuseport copies; it borrows the listening sockets (server.c's) and the service.
 *
 * Lock order: m->lock alone (never held across a fork or a reactor call);
 * in a worker, w->lock alone.
 */
#include <cabrank/clock.h>
#include <cabrank/listener.h>
#include <cabrank/log.h>
#include <cabrank/reactor.h>

#include "model/model_internal.h"
#include "net/accept_lock_internal.h"
#include "os/proc_internal.h"
#include "os/sync_internal.h"
#include "pool/scoreboard_internal.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/pidfd.h>
#include <unistd.h>

#define TICK_MS           1000u /* maintenance period */
#define MAX_SPAWN_RATE    32u   /* Apache's MAX_SPAWN_RATE */
#define POLL_MS           100   /* a worker looks at its stop flag this often */
#define STOP_GRACE_MS     1000u /* a fresh connection's first request, at a stop */
#define IMMEDIATE_KILL_MS 2000u /* immediate stop: SIGKILL after */
#define ACCEPT_BACKOFF_US 10000 /* out of descriptors: pause */
#define MAX_EVENTS        8

/* A worker process as the manager knows it. Manager thread only. */
struct proc {
    struct cr_model *m;
    struct proc *prev;
    struct proc *next;
    pid_t pid;
    int pidfd;
    int slot;     /* scoreboard slot; -1 once evicted */
    int rp_index; /* reuseport: the copies it accepts on; -1: none */
    uint32_t tag; /* the slot's claim tag */
    unsigned generation;
    int told;              /* 0, CR__CONN_STOP_GRACEFUL or CR__CONN_STOP_NOW */
    uint64_t warned_since; /* busy_since_ns already reported */
};

struct cr_model {
    /* Immutable after create. */
    struct cr_model_env env;
    const struct cr_server_config *cfg;
    struct cr__accept_lock *alock;
    struct cr__scoreboard *sb;
    struct cr__scoreboard_totals *totals; /* sb's */
    struct cr_reactor *r;
    int efd; /* eventfd: stop and restart requests for the manager */

    /* Owner thread only (start, wait, destroy). */
    pthread_t manager;
    bool started;
    bool joined;

    /* Manager thread only. */
    struct proc *procs; /* live (unreaped) workers */
    unsigned generation;
    unsigned spawn_rate;
    int stop_applied;    /* the stop mode acted on */
    uint64_t kill_timer; /* immediate stop's SIGKILL timer; 0: none */

    struct cr_mutex lock;
    pthread_cond_t cv; /* start waits for the first workers */
    /* Protected by lock. */
    bool start_done;
    int start_err;
    unsigned restart_pending;
    int stop_mode; /* 0, CR__CONN_STOP_GRACEFUL or CR__CONN_STOP_NOW */
};

/* ======================================================================
 * Worker side: runs in the child processes.
 * ====================================================================== */

struct wthread;

/* One worker process (its own copy of memory). */
struct wproc {
    struct cr_model *m;
    struct cr__slot *slot; /* ours while the tag matches (my_slot) */
    unsigned slot_idx;
    uint32_t tag;
    unsigned nthreads;
    struct cr__conn_config conn;
    int epfd;
    int rp_index; /* reuseport: its copies (copy_fd); -1: none */
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

/* reuseport: whether the server opened a copy per worker index. */
static bool has_copies(const struct cr_model *m)
{
    return m->env.listen_groups > 1;
}

/* reuseport: worker index k's copy of listener i (its listen group k + 1;
 * group 0 is the sockets every worker shares). */
static int copy_fd(const struct cr_model *m, int k, unsigned i)
{
    return m->env.listen_fds[(size_t)(k + 1) * m->env.nlisten + i];
}

static void counter_add(uint64_t *counter, int64_t delta)
{
    /* Relaxed: statistics (model_internal.h). */
    __atomic_fetch_add(counter, (uint64_t)delta, __ATOMIC_RELAXED);
}

/* The slot, unless the manager evicted us from it (the slot is then
 * another worker's). */
static struct cr__slot *my_slot(struct wproc *w)
{
    return cr__scoreboard_owns(w->m->sb, w->slot_idx, w->tag) ? w->slot : NULL;
}

/* 0, CR__CONN_STOP_GRACEFUL or CR__CONN_STOP_NOW: the signal's flag, or the
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
    uint64_t max = w->m->cfg->max_requests_per_child;
    uint64_t n = __atomic_add_fetch(&w->requests, 1, __ATOMIC_RELAXED);

    if (s != NULL) {
        __atomic_fetch_add(&s->requests, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&s->last_request_ns, cr_clock_wall_ns(), __ATOMIC_RELAXED);
    }
    if (max != 0 && n == max) {
        /* Retire: finish what is in flight and exit 0; the manager
         * replaces us. Never downgrades an immediate stop. */
        int zero = 0;

        (void)__atomic_compare_exchange_n(&cr__proc_stop, &zero, CR__CONN_STOP_GRACEFUL, false,
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

        if (st == CR__CONN_STOP_NOW)
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

    counter_add(&w->m->totals->accepted, 1);
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

/* The leader: waits on the listeners and accepts one connection. Returns
 * its fd, or -1 once a stop is seen. Holds the accept lock. */
static int lead(struct wproc *w)
{
    const struct cr_model *m = w->m;
    bool exclusive = cr__accept_lock_is_exclusive(m->alock);

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
            for (unsigned i = 0; i < m->env.nlisten && fd < 0; i++) {
                if (cr_listener_accept(m->env.listen_fds[i], &fd) < 0)
                    fd = -1;
                if (fd < 0 && w->rp_index >= 0 &&
                    cr_listener_accept(copy_fd(m, w->rp_index, i), &fd) < 0)
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

/* Takes the in-process leadership, then the accept lock. false once a stop
 * is seen. */
static bool become_leader(struct wproc *w)
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
        err = cr__accept_lock_acquire(w->m->alock, POLL_MS);
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
        (void)__atomic_compare_exchange_n(&cr__proc_stop, &zero, CR__CONN_STOP_GRACEFUL, false,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    }
    return err == 0;
}

/* Releases the accept lock, then the leadership: a follower (thread or
 * process) leads next. */
static void step_down(struct wproc *w)
{
    cr__accept_lock_release(w->m->alock);
    cr_mutex_lock(&w->lock);
    w->leading = false;
    w->has_leader = false;
    cr_cond_signal(&w->cv);
    publish_state(w);
    cr_mutex_unlock(&w->lock);
}

static void *thread_main(void *arg)
{
    struct wthread *t = arg;
    struct wproc *w = t->w;

    while (become_leader(w)) {
        int fd = lead(w);

        step_down(w);
        if (fd < 0)
            break;
        serve(t, fd);
    }
    return NULL;
}

/* Master-side resources a worker does not use: its siblings' pidfds, the
 * manager's reactor and eventfd. The fork came from the manager thread,
 * the only one that touches them, so none of their locks is held. */
static void drop_master_state(struct cr_model *m)
{
    for (struct proc *p = m->procs; p != NULL; p = p->next)
        close(p->pidfd);
    close(m->efd);
    cr_reactor_destroy(m->r);
}

/* reuseport: the copies of the other indices are not this worker's. The
 * server's table keeps the numbers; this process never uses them again. */
static void drop_other_copies(struct cr_model *m, int keep)
{
    if (!has_copies(m))
        return;
    for (int k = 0; k < m->cfg->workers; k++) {
        for (unsigned i = 0; i < m->env.nlisten && k != keep; i++)
            close(copy_fd(m, k, i));
    }
}

static int watch(int epfd, int fd, uint32_t flags)
{
    struct epoll_event ev = {.events = EPOLLIN | flags, .data.fd = fd};

    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

/* The worker's epoll set: the shared listeners (EPOLLEXCLUSIVE when no lock
 * picks a single leader) and its own copies. */
static int setup_listeners(struct wproc *w)
{
    const struct cr_model *m = w->m;
    bool exclusive = cr__accept_lock_is_exclusive(m->alock);
    int err;

    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (w->epfd < 0)
        return -errno;
    for (unsigned i = 0; i < m->env.nlisten; i++) {
        /* With a lock, plain level-triggered: an arrival is queued in every
         * set, so the next leader sees what the last one left. */
        err = watch(w->epfd, m->env.listen_fds[i], exclusive ? 0 : EPOLLEXCLUSIVE);
        /* Its copy: shared with its successor during a restart. */
        if (err == 0 && w->rp_index >= 0)
            err = watch(w->epfd, copy_fd(m, w->rp_index, i), EPOLLEXCLUSIVE);
        if (err < 0)
            return err;
    }
    return 0;
}

/* The body of a worker process (cr__proc_spawn); returns its exit status. */
static int worker_main(void *arg)
{
    struct proc *p = arg;
    struct cr_model *m = p->m;
    const struct cr_service *svc = m->env.conn.svc;
    struct wproc wp;
    struct wproc *w = &wp;
    pthread_attr_t attr;
    unsigned started = 1;
    int status = 0;
    int err;

    drop_master_state(m);
    drop_other_copies(m, p->rp_index);
    memset(w, 0, sizeof(*w));
    w->m = m;
    w->slot_idx = (unsigned)p->slot;
    w->tag = p->tag;
    w->slot = cr__scoreboard_slot(m->sb, w->slot_idx);
    w->rp_index = p->rp_index;
    w->nthreads = m->cfg->threads > 0 ? (unsigned)m->cfg->threads : 1;
    w->epfd = -1;
    w->conn = m->env.conn;
    w->conn.bytes_in = &m->totals->bytes_in;
    w->conn.bytes_out = &m->totals->bytes_out;
    w->conn.requests = &m->totals->requests;
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
    err = cr__accept_lock_child_init(m->alock);
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

/* ======================================================================
 * Master side: the manager thread.
 * ====================================================================== */

static void on_proc_exit(struct cr_reactor *r, int fd, unsigned events, void *arg);

static void tell(struct proc *p, int how)
{
    struct cr__slot *s;

    if (p->told >= how)
        return;
    p->told = how;
    if (p->slot >= 0 && cr__scoreboard_owns(p->m->sb, (unsigned)p->slot, p->tag)) {
        s = cr__scoreboard_slot(p->m->sb, (unsigned)p->slot);
        /* Relaxed: the worker polls it (scoreboard_internal.h). */
        __atomic_store_n(&s->stop, how, __ATOMIC_RELAXED);
        /* STOPPING at once, though the worker writes its state: one busy
         * in a long request would not say so before it is done, and only
         * STOPPING slots can be evicted for a new generation. The worker
         * publishes STOPPING too from now on (it reads stop first). */
        __atomic_store_n(&s->state, (int)CR_WORKER_STOPPING, __ATOMIC_RELAXED);
    }
    /* Through the pidfd: the pid cannot have been reused, it is not reaped. */
    if (pidfd_send_signal(p->pidfd, how == CR__CONN_STOP_NOW ? SIGQUIT : SIGTERM, NULL, 0) < 0 &&
        errno != ESRCH)
        CR_LOG(CR_LOG_WARN, "prefork: signalling worker %d: %s", (int)p->pid, strerror(errno));
}

/* Frees a scoreboard slot for a new worker, evicting the oldest stopping
 * worker's when every slot is taken. */
static int claim_slot(struct cr_model *m)
{
    int idx = cr__scoreboard_claim(m->sb, m->generation);

    if (idx == -ENOSPC) {
        int victim = cr__scoreboard_evict(m->sb);

        if (victim < 0)
            return victim;
        for (struct proc *p = m->procs; p != NULL; p = p->next) {
            if (p->slot == victim)
                p->slot = -1;
        }
        idx = cr__scoreboard_claim(m->sb, m->generation);
    }
    return idx;
}

/* reuseport: the lowest copy index no worker of the current generation
 * (not told to stop) accepts on; an old worker shares it with its successor
 * until it exits; -1 when all are taken (a spare) or there are none. */
static int free_copy(struct cr_model *m)
{
    if (!has_copies(m))
        return -1;
    for (int k = 0; k < m->cfg->workers; k++) {
        bool taken = false;

        for (struct proc *p = m->procs; p != NULL && !taken; p = p->next)
            taken = p->rp_index == k && p->told == 0 && p->generation == m->generation;
        if (!taken)
            return k;
    }
    return -1;
}

static int spawn_one(struct cr_model *m)
{
    struct proc *p;
    int idx;
    int err;

    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    idx = claim_slot(m);
    if (idx < 0) {
        free(p);
        return idx;
    }
    p->m = m;
    p->slot = idx;
    p->tag = __atomic_load_n(&cr__scoreboard_slot(m->sb, (unsigned)idx)->tag, __ATOMIC_RELAXED);
    p->generation = m->generation;
    p->pidfd = -1;
    p->rp_index = free_copy(m);
    err = cr__proc_spawn(worker_main, p, &p->pid, &p->pidfd);
    if (err < 0)
        goto out_release;
    __atomic_store_n(&cr__scoreboard_slot(m->sb, (unsigned)idx)->pid, (int)p->pid,
                     __ATOMIC_RELAXED);
    err = cr_reactor_add(m->r, p->pidfd, CR_EV_READ, 0, on_proc_exit, p);
    if (err < 0) {
        /* Unwatched, it could never be reaped: end it now. */
        pidfd_send_signal(p->pidfd, SIGKILL, NULL, 0);
        while (cr__proc_reap(p->pidfd, &(int){0}) == -EAGAIN)
            usleep(1000);
        close(p->pidfd);
        goto out_release;
    }
    p->next = m->procs;
    if (m->procs != NULL)
        m->procs->prev = p;
    m->procs = p;
    __atomic_fetch_add(&m->totals->processes, 1u, __ATOMIC_RELAXED);
    return 0;

out_release:
    cr__scoreboard_release(m->sb, (unsigned)idx);
    free(p);
    return err;
}

static void spawn(struct cr_model *m, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        int err = spawn_one(m);

        if (err < 0) {
            CR_LOG(CR_LOG_ERROR, "prefork: starting a worker: %s", strerror(-err));
            return;
        }
    }
}

/* Workers of the current generation not told to stop, and the idle ones
 * among them (a worker still starting counts as idle: it soon is). */
static void count_pool(struct cr_model *m, unsigned *live, unsigned *idle)
{
    *live = 0;
    *idle = 0;
    for (struct proc *p = m->procs; p != NULL; p = p->next) {
        int st;

        if (p->generation != m->generation || p->told != 0 || p->slot < 0)
            continue;
        (*live)++;
        st = __atomic_load_n(&cr__scoreboard_slot(m->sb, (unsigned)p->slot)->state,
                             __ATOMIC_RELAXED);
        if (st == CR_WORKER_STARTING || st == CR_WORKER_IDLE || st == CR_WORKER_LISTENING)
            (*idle)++;
    }
}

/* What the pool lacks now: below cfg->workers or min_spare, capped by
 * max_workers. */
static unsigned shortfall(struct cr_model *m, unsigned live, unsigned idle)
{
    unsigned want = 0;
    unsigned room = (unsigned)m->cfg->max_workers > live ? (unsigned)m->cfg->max_workers - live : 0;

    if ((unsigned)m->cfg->workers > live)
        want = (unsigned)m->cfg->workers - live;
    if ((unsigned)m->cfg->min_spare > idle && (unsigned)m->cfg->min_spare - idle > want)
        want = (unsigned)m->cfg->min_spare - idle;
    return want < room ? want : room;
}

/* Retires one idle worker: an IDLE one rather than the leader. */
static void retire_one(struct cr_model *m)
{
    struct proc *pick = NULL;

    for (struct proc *p = m->procs; p != NULL; p = p->next) {
        int st;

        /* reuseport: a worker with a copy of its own stays, or
         * connections queued on the copy would wait for its successor. */
        if (p->generation != m->generation || p->told != 0 || p->slot < 0 || p->rp_index >= 0)
            continue;
        st = __atomic_load_n(&cr__scoreboard_slot(m->sb, (unsigned)p->slot)->state,
                             __ATOMIC_RELAXED);
        if (st == CR_WORKER_IDLE || (st == CR_WORKER_LISTENING && pick == NULL))
            pick = p;
    }
    if (pick != NULL)
        tell(pick, CR__CONN_STOP_GRACEFUL);
}

/* The 1 s maintenance (Apache's perform_idle_server_maintenance). */
static void maintain(struct cr_model *m)
{
    unsigned live;
    unsigned idle;

    /* reuseport: a copy nobody accepts on gets a worker first. */
    if (free_copy(m) >= 0)
        spawn(m, 1);
    count_pool(m, &live, &idle);
    CR_LOG(CR_LOG_DEBUG, "prefork: maintenance: %u live, %u idle, rate %u", live, idle,
           m->spawn_rate);
    if (live < (unsigned)m->cfg->workers) {
        spawn(m, shortfall(m, live, idle));
    } else if (idle > (unsigned)m->cfg->max_spare && live > (unsigned)m->cfg->workers) {
        retire_one(m);
        m->spawn_rate = 1;
    } else if (idle < (unsigned)m->cfg->min_spare && live < (unsigned)m->cfg->max_workers) {
        unsigned room = (unsigned)m->cfg->max_workers - live;

        spawn(m, m->spawn_rate < room ? m->spawn_rate : room);
        if (m->spawn_rate < MAX_SPAWN_RATE)
            m->spawn_rate *= 2;
    } else {
        m->spawn_rate = 1;
    }
}

/* Reports workers busy on one connection longer than busy_warn_ms, once
 * per connection. */
static void check_busy(struct cr_model *m)
{
    uint64_t now = cr_clock_now_ns();
    uint64_t limit = m->cfg->busy_warn_ms * CR_NSEC_PER_MSEC;

    for (struct proc *p = m->procs; p != NULL; p = p->next) {
        struct cr__slot *s;
        uint64_t since;

        if (p->slot < 0)
            continue;
        s = cr__scoreboard_slot(m->sb, (unsigned)p->slot);
        since = __atomic_load_n(&s->busy_since_ns, __ATOMIC_RELAXED);
        if (since == 0 || since == p->warned_since || now < since || now - since <= limit)
            continue;
        p->warned_since = since;
        CR_LOG(CR_LOG_WARN,
               "prefork: worker %d (generation %u) busy on one connection for %llu ms "
               "(busy_warn_ms %llu)",
               (int)p->pid, p->generation, (unsigned long long)((now - since) / CR_NSEC_PER_MSEC),
               (unsigned long long)m->cfg->busy_warn_ms);
    }
}

static void on_tick(struct cr_reactor *r, uint64_t id, void *arg)
{
    struct cr_model *m = arg;

    CR_UNUSED(id);
    if (m->stop_applied != 0)
        return;
    maintain(m);
    check_busy(m);
    if (cr_reactor_timer_add(r, TICK_MS, on_tick, m, NULL) < 0)
        CR_LOG(CR_LOG_ERROR, "prefork: maintenance timer lost: out of memory");
}

static void on_kill_timer(struct cr_reactor *r, uint64_t id, void *arg)
{
    struct cr_model *m = arg;

    CR_UNUSED(r);
    CR_UNUSED(id);
    m->kill_timer = 0;
    for (struct proc *p = m->procs; p != NULL; p = p->next) {
        CR_LOG(CR_LOG_WARN, "prefork: worker %d did not stop: SIGKILL", (int)p->pid);
        (void)pidfd_send_signal(p->pidfd, SIGKILL, NULL, 0);
    }
}

static void on_proc_exit(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct proc *p = arg;
    struct cr_model *m = p->m;
    bool was_starting = false;
    char desc[96];
    int status;
    int err;

    CR_UNUSED(events);
    err = cr__proc_reap(fd, &status);
    if (err == -EAGAIN)
        return; /* not yet: level-triggered, it comes again */
    if (err < 0) {
        CR_LOG(CR_LOG_ERROR, "prefork: reaping worker %d: %s", (int)p->pid, strerror(-err));
        status = 0;
    }
    if (cr_reactor_remove(r, fd) < 0)
        CR_LOG(CR_LOG_ERROR, "prefork: worker %d's pidfd was not registered", (int)p->pid);
    close(fd);
    if (p->slot >= 0 && cr__scoreboard_owns(m->sb, (unsigned)p->slot, p->tag)) {
        struct cr__slot *s = cr__scoreboard_slot(m->sb, (unsigned)p->slot);

        was_starting = __atomic_load_n(&s->state, __ATOMIC_RELAXED) == CR_WORKER_STARTING;
        cr__scoreboard_release(m->sb, (unsigned)p->slot);
    }
    /* Told to stop, or retired itself (exit 0): expected. Otherwise a
     * crash: killed, or failed. */
    if (p->told == 0 && status != 0) {
        counter_add(&m->totals->crashes, 1);
        CR_LOG(CR_LOG_WARN, "prefork: worker %d (generation %u) died: %s", (int)p->pid,
               p->generation, cr__proc_describe(status, desc, sizeof(desc)));
    }
    if (p->prev != NULL)
        p->prev->next = p->next;
    else
        m->procs = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    free(p);
    __atomic_fetch_sub(&m->totals->processes, 1u, __ATOMIC_RELAXED);

    /* Replace at once what the pool lacks, except after a death before
     * the worker was ready (a process_init that fails would otherwise
     * fork in a loop): the next tick does that, at its rate. */
    if (m->stop_applied == 0 && !was_starting) {
        unsigned live;
        unsigned idle;
        unsigned n;

        count_pool(m, &live, &idle);
        n = shortfall(m, live, idle);
        /* reuseport: its copy needs a successor even when the pool is
         * not short (a spare may have outlived a retired copy holder). */
        if (n == 0 && free_copy(m) >= 0)
            n = 1;
        spawn(m, n);
    }
}

/* n restarts asked since the last look: one new generation of workers,
 * numbered as if each had been done (generation and restarts agree). */
static void do_restart(struct cr_model *m, unsigned n)
{
    m->generation += n;
    __atomic_store_n(&m->totals->generation, m->generation, __ATOMIC_RELAXED);
    counter_add(&m->totals->restarts, n);
    CR_LOG(CR_LOG_INFO, "prefork: graceful restart: generation %u", m->generation);
    /* The new workers first, then the old told to go: the listeners are
     * never without a worker that takes its turn. */
    spawn(m, (unsigned)m->cfg->workers);
    for (struct proc *p = m->procs; p != NULL; p = p->next) {
        if (p->generation != m->generation)
            tell(p, CR__CONN_STOP_GRACEFUL);
    }
    m->spawn_rate = 1;
}

static void apply_stop(struct cr_model *m, int how)
{
    m->stop_applied = how;
    for (struct proc *p = m->procs; p != NULL; p = p->next)
        tell(p, how);
    if (how == CR__CONN_STOP_NOW && m->kill_timer == 0 &&
        cr_reactor_timer_add(m->r, IMMEDIATE_KILL_MS, on_kill_timer, m, &m->kill_timer) < 0)
        m->kill_timer = 0;
}

/* stop and restart requests. */
static void on_request_fd(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct cr_model *m = arg;
    uint64_t v;
    unsigned restarts;
    int stop;

    CR_UNUSED(r);
    CR_UNUSED(events);
    while (read(fd, &v, sizeof(v)) > 0)
        ;
    cr_mutex_lock(&m->lock);
    restarts = m->restart_pending;
    m->restart_pending = 0;
    stop = m->stop_mode;
    cr_mutex_unlock(&m->lock);
    if (stop > m->stop_applied)
        apply_stop(m, stop);
    else if (restarts > 0 && m->stop_applied == 0)
        do_restart(m, restarts);
}

static void *manager_main(void *arg)
{
    struct cr_model *m = arg;
    int err;

    spawn(m, (unsigned)m->cfg->workers);
    err = m->procs != NULL ? 0 : -EAGAIN;
    if (err == 0)
        err = cr_reactor_timer_add(m->r, TICK_MS, on_tick, m, NULL);
    cr_mutex_lock(&m->lock);
    m->start_err = err;
    m->start_done = true;
    cr_cond_broadcast(&m->cv);
    cr_mutex_unlock(&m->lock);
    if (err < 0) {
        apply_stop(m, CR__CONN_STOP_NOW);
    }
    /* Until stopped and every worker reaped. */
    while (m->stop_applied == 0 || m->procs != NULL) {
        err = cr_reactor_handle_events(m->r, -1, 0);
        if (err < 0 && err != -EINTR) {
            CR_LOG(CR_LOG_ERROR, "prefork: manager reactor failed: %s", strerror(-err));
            usleep(10000);
        }
    }
    return NULL;
}

/* ======================================================================
 * Model ops.
 * ====================================================================== */

static void prefork_destroy(struct cr_model *m);

static int prefork_create(struct cr_model **out, const struct cr_model_env *env)
{
    struct cr_reactor_config rcfg = {.backend = NULL, .batch = 0};
    enum cr__accept_lock_kind kind;
    struct cr_model *m;
    int err;

    *out = NULL;
    if (env->nlisten == 0 || env->cfg->threads < 1)
        return -EINVAL;
    err = cr__accept_lock_parse(env->cfg->accept_lock != NULL ? env->cfg->accept_lock : "pthread",
                                &kind);
    if (err < 0)
        return err;
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return -ENOMEM;
    m->env = *env;
    m->cfg = env->cfg;
    m->efd = -1;
    m->generation = 1;
    m->spawn_rate = 1;
    err = cr_mutex_init(&m->lock);
    if (err < 0) {
        free(m);
        return err;
    }
    err = cr_cond_init(&m->cv);
    if (err < 0) {
        cr_mutex_fini(&m->lock);
        free(m);
        return err;
    }
    /* From here prefork_destroy undoes whatever was set up. */
    err = cr__scoreboard_create(&m->sb, CR__SCOREBOARD_SLOTS(env->cfg->max_workers));
    if (err < 0)
        goto out_destroy;
    m->totals = cr__scoreboard_totals(m->sb);
    m->totals->generation = 1;
    err = cr__accept_lock_create(&m->alock, kind);
    if (err < 0)
        goto out_destroy;
    if (kind == CR__ACCEPT_LOCK_REUSEPORT &&
        env->listen_groups != (unsigned)env->cfg->workers + 1) {
        err = -EINVAL; /* server.c opens the copies (listen_groups_for) */
        goto out_destroy;
    }
    err = cr_reactor_create(&m->r, &rcfg);
    if (err < 0)
        goto out_destroy;
    m->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (m->efd < 0) {
        err = -errno;
        goto out_destroy;
    }
    err = cr_reactor_add(m->r, m->efd, CR_EV_READ, 0, on_request_fd, m);
    if (err < 0)
        goto out_destroy;
    *out = m;
    return 0;

out_destroy:
    prefork_destroy(m);
    return err;
}

/* Wakes the manager for a request made under m->lock. */
static void poke(struct cr_model *m)
{
    uint64_t one = 1;

    /* Fails only when the counter is saturated: it is readable anyway. */
    (void)!write(m->efd, &one, sizeof(one));
}

static int prefork_start(struct cr_model *m)
{
    int err;

    err = -pthread_create(&m->manager, NULL, manager_main, m);
    if (err < 0)
        return err;
    m->started = true;
    cr_mutex_lock(&m->lock);
    while (!m->start_done)
        cr_cond_wait(&m->cv, &m->lock);
    err = m->start_err;
    cr_mutex_unlock(&m->lock);
    if (err < 0) {
        /* The manager stops what it started and ends. */
        pthread_join(m->manager, NULL);
        m->joined = true;
    }
    return err;
}

static void prefork_stop(struct cr_model *m, bool graceful)
{
    int how = graceful ? CR__CONN_STOP_GRACEFUL : CR__CONN_STOP_NOW;

    cr_mutex_lock(&m->lock);
    /* A graceful stop never undoes an immediate one. */
    if (how > m->stop_mode)
        m->stop_mode = how;
    cr_mutex_unlock(&m->lock);
    poke(m);
}

static int prefork_restart(struct cr_model *m)
{
    cr_mutex_lock(&m->lock);
    if (m->stop_mode != 0) {
        cr_mutex_unlock(&m->lock);
        return -ECANCELED;
    }
    m->restart_pending++;
    cr_mutex_unlock(&m->lock);
    poke(m);
    return 0;
}

static int prefork_wait(struct cr_model *m)
{
    if (!m->started || m->joined)
        return 0;
    pthread_join(m->manager, NULL);
    m->joined = true;
    return 0;
}

static void prefork_destroy(struct cr_model *m)
{
    if (m == NULL)
        return;
    if (m->started && !m->joined) {
        prefork_stop(m, false);
        (void)prefork_wait(m);
    }
    /* The eventfd's registration goes with the reactor. */
    cr_reactor_destroy(m->r);
    if (m->efd >= 0)
        close(m->efd);
    cr__accept_lock_destroy(m->alock);
    cr__scoreboard_destroy(m->sb);
    cr_cond_fini(&m->cv);
    cr_mutex_fini(&m->lock);
    free(m);
}

static enum cr_role role_of(int state)
{
    switch (state) {
    case CR_WORKER_IDLE:
        return CR_ROLE_FOLLOWER;
    case CR_WORKER_LISTENING:
        return CR_ROLE_LEADER;
    case CR_WORKER_BUSY:
        return CR_ROLE_PROCESSING;
    case CR_WORKER_STOPPING:
    case CR_WORKER_DEAD:
        return CR_ROLE_STOPPED;
    default:
        return CR_ROLE_IDLE;
    }
}

static unsigned prefork_stats(const struct cr_model *m, struct cr_server_stats *st,
                              struct cr_worker_stats *workers, unsigned max)
{
    struct cr_scoreboard_entry e[64];
    unsigned n;

    /* The master serves nothing: its own counters (which server.c filled
     * in) are zero, and the scoreboard's are the server's. */
    cr__scoreboard_stats(m->sb, st);

    /* One entry per worker process in the scoreboard: its state as a role
     * and the connections it served as events (no time per role). */
    n = cr__scoreboard_copy(m->sb, e, sizeof(e) / sizeof(e[0]));
    for (unsigned i = 0; i < n && i < sizeof(e) / sizeof(e[0]) && i < max; i++) {
        memset(&workers[i], 0, sizeof(workers[i]));
        workers[i].role = role_of((int)e[i].state);
        workers[i].events = e[i].connections;
    }
    return n;
}

static unsigned prefork_scoreboard(const struct cr_model *m, struct cr_scoreboard_entry *e,
                                   unsigned max)
{
    return cr__scoreboard_copy(m->sb, e, max);
}

const struct cr_model_ops cr__model_prefork_ops = {
    .name = "prefork",
    /* A worker's one blocking thread sleeps in sendfile each time half the
     * mark is left: 1m.bin 12% slower with 64 KiB (README, "Unsent bytes"). */
    .notsent_lowat = CR_SERVER_NOTSENT_SYSTEM,
    .create = prefork_create,
    .start = prefork_start,
    .stop = prefork_stop,
    .wait = prefork_wait,
    .destroy = prefork_destroy,
    .stats = prefork_stats,
    .restart = prefork_restart,
    .scoreboard = prefork_scoreboard,
};
