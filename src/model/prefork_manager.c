/*
 * prefork_manager.c - the prefork model: a Worker Pool of processes and its
 * Worker Pool Manager (Apache's prefork and worker MPMs, the master's
 * side; the workers are prefork_worker.c). cr_server (src/server.c) drives
 * it through cr__model_prefork_ops.
 *
 * The manager thread runs a cr_reactor with a pidfd per worker (readable
 * when it exits: reaped and, when the pool is short, replaced at once), a
 * 100 ms look at the accept queues (connections waiting beyond the free
 * threads get workers at once), a 1 s maintenance (Apache's rule: idle
 * workers of the current generation within [min_spare, max_spare], never
 * below cfg->workers nor above max_workers) and an eventfd through which
 * stop and restart (any thread) reach it. It alone forks, claims and frees
 * scoreboard slots and signals workers. It never accepts: a manager in the
 * listener's task would add the cost of fork to the listener's latency. A
 * graceful restart starts a new generation of workers and tells every older
 * one to stop; the listening sockets stay open here, so no connection is
 * refused or dropped meanwhile. docs/design/prefork.md has the design.
 *
 * Ownership: the model owns the manager thread, its reactor and eventfd,
 * the worker processes (a struct proc each, manager thread only), the
 * scoreboard (with the server-wide totals, which are the server's counters:
 * workers serve in their own processes), the accept lock and the reuseport
 * copies; it borrows the listening sockets (server.c's) and the service.
 *
 * Lock order: m->lock alone, never held across a fork or a reactor call.
 */
#include <cabrank/clock.h>
#include <cabrank/log.h>
#include <cabrank/reactor.h>

#include "model/prefork_internal.h"
#include "os/proc_internal.h"
#include "os/sync_internal.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/pidfd.h>
#include <unistd.h>

#define TICK_MS           1000u /* maintenance period */
#define DEMAND_MS         100u  /* the accept queues are looked at this often */
#define MAX_SPAWN_RATE    32u   /* Apache's MAX_SPAWN_RATE */
#define IMMEDIATE_KILL_MS 2000u /* immediate stop: SIGKILL after */

/* A worker process as the manager knows it. Manager thread only. */
struct proc {
    struct cr_model *m;
    struct proc *prev;
    struct proc *next;
    pid_t pid;
    int pidfd;
    int slot;     /* scoreboard slot; -1 once evicted */
    uint32_t tag; /* the slot's claim tag */
    unsigned generation;
    int told;              /* 0, CR__STOP_GRACEFUL or CR__STOP_NOW */
    uint64_t warned_since; /* busy_since_ns already reported */
};

struct cr_model {
    /* Immutable after create. */
    struct cr__prefork_pool pool; /* what the workers inherit */
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
    unsigned looks;      /* on_tick's calls */
    unsigned queued;     /* the accept queues at the last look */
    bool warned_full;    /* max_workers reached with connections queued */
    int stop_applied;    /* the stop mode acted on */
    uint64_t kill_timer; /* immediate stop's SIGKILL timer; 0: none */

    struct cr_mutex lock;
    pthread_cond_t cv; /* start waits for the first workers */
    /* Protected by lock. */
    bool start_done;
    int start_err;
    unsigned restart_pending;
    int stop_mode; /* 0, CR__STOP_GRACEFUL or CR__STOP_NOW */
};

static void counter_add(uint64_t *counter, int64_t delta)
{
    /* Relaxed: statistics (model_internal.h). */
    __atomic_fetch_add(counter, (uint64_t)delta, __ATOMIC_RELAXED);
}

static void on_proc_exit(struct cr_reactor *r, int fd, unsigned events, void *arg);

static void tell(struct proc *p, int how)
{
    struct cr__slot *s;

    if (p->told >= how)
        return;
    p->told = how;
    if (p->slot >= 0 && cr__scoreboard_owns(p->m->pool.sb, (unsigned)p->slot, p->tag)) {
        s = cr__scoreboard_slot(p->m->pool.sb, (unsigned)p->slot);
        /* Relaxed: the worker polls it (scoreboard_internal.h). */
        __atomic_store_n(&s->stop, how, __ATOMIC_RELAXED);
        /* STOPPING at once, though the worker writes its state: one busy
         * in a long request would not say so before it is done, and only
         * STOPPING slots can be evicted for a new generation. The worker
         * publishes STOPPING too from now on (it reads stop first). */
        __atomic_store_n(&s->state, (int)CR_WORKER_STOPPING, __ATOMIC_RELAXED);
    }
    /* Through the pidfd: the pid cannot have been reused, it is not reaped. */
    if (pidfd_send_signal(p->pidfd, how == CR__STOP_NOW ? SIGQUIT : SIGTERM, NULL, 0) < 0 &&
        errno != ESRCH)
        CR_LOG(CR_LOG_WARN, "prefork: signalling worker %d: %s", (int)p->pid, strerror(errno));
}

/* Frees a scoreboard slot for a new worker, evicting the oldest stopping
 * worker's when every slot is taken. */
static int claim_slot(struct cr_model *m)
{
    int idx = cr__scoreboard_claim(m->pool.sb, m->generation);

    if (idx == -ENOSPC) {
        int victim = cr__scoreboard_evict(m->pool.sb);

        if (victim < 0)
            return victim;
        for (struct proc *p = m->procs; p != NULL; p = p->next) {
            if (p->slot == victim)
                p->slot = -1;
        }
        idx = cr__scoreboard_claim(m->pool.sb, m->generation);
    }
    return idx;
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

/* The child's side of spawn_one (cr__proc_spawn): leaves the master's
 * state, then is a worker. */
static int child_main(void *arg)
{
    struct proc *p = arg;
    struct cr_model *m = p->m;

    drop_master_state(m);
    return cr__prefork_worker_main(&m->pool, (unsigned)p->slot, p->tag);
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
    p->tag =
        __atomic_load_n(&cr__scoreboard_slot(m->pool.sb, (unsigned)idx)->tag, __ATOMIC_RELAXED);
    p->generation = m->generation;
    p->pidfd = -1;
    err = cr__proc_spawn(child_main, p, &p->pid, &p->pidfd);
    if (err < 0)
        goto out_release;
    __atomic_store_n(&cr__scoreboard_slot(m->pool.sb, (unsigned)idx)->pid, (int)p->pid,
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
    __atomic_fetch_add(&m->pool.totals->processes, 1u, __ATOMIC_RELAXED);
    return 0;

out_release:
    cr__scoreboard_release(m->pool.sb, (unsigned)idx);
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
        st = __atomic_load_n(&cr__scoreboard_slot(m->pool.sb, (unsigned)p->slot)->state,
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
    unsigned room =
        (unsigned)m->pool.cfg->max_workers > live ? (unsigned)m->pool.cfg->max_workers - live : 0;

    if ((unsigned)m->pool.cfg->workers > live)
        want = (unsigned)m->pool.cfg->workers - live;
    if ((unsigned)m->pool.cfg->min_spare > idle && (unsigned)m->pool.cfg->min_spare - idle > want)
        want = (unsigned)m->pool.cfg->min_spare - idle;
    return want < room ? want : room;
}

/* Retires one idle worker with nothing parked: an IDLE one, not the leader. */
static void retire_one(struct cr_model *m)
{
    struct proc *pick = NULL;

    for (struct proc *p = m->procs; p != NULL; p = p->next) {
        struct cr__slot *s;
        int st;

        if (p->generation != m->generation || p->told != 0 || p->slot < 0)
            continue;
        s = cr__scoreboard_slot(m->pool.sb, (unsigned)p->slot);
        st = __atomic_load_n(&s->state, __ATOMIC_RELAXED);
        if (__atomic_load_n(&s->parked, __ATOMIC_RELAXED) == 0 &&
            (st == CR_WORKER_IDLE || (st == CR_WORKER_LISTENING && pick == NULL)))
            pick = p;
    }
    if (pick != NULL)
        tell(pick, CR__STOP_GRACEFUL);
}

/* The 1 s maintenance (Apache's perform_idle_server_maintenance): short of
 * min_spare idle workers it spawns 1, then 2, 4, ... MAX_SPAWN_RATE per tick
 * while still short, back to 1 once satisfied; beyond max_spare it retires
 * one idle worker per tick, unless connections wait in the accept queues. */
static unsigned queued_connections(const struct cr_model *m);

static void maintain(struct cr_model *m)
{
    unsigned live;
    unsigned idle;

    count_pool(m, &live, &idle);
    CR_LOG(CR_LOG_DEBUG, "prefork: maintenance: %u live, %u idle, rate %u", live, idle,
           m->spawn_rate);
    if (live < (unsigned)m->pool.cfg->workers) {
        spawn(m, shortfall(m, live, idle));
    } else if (idle > (unsigned)m->pool.cfg->max_spare && live > (unsigned)m->pool.cfg->workers) {
        /* Not while connections wait: the idle ones (starting ones
         * counted) are about to take them. */
        if (queued_connections(m) == 0)
            retire_one(m);
        m->spawn_rate = 1;
    } else if (idle < (unsigned)m->pool.cfg->min_spare &&
               live < (unsigned)m->pool.cfg->max_workers) {
        unsigned room = (unsigned)m->pool.cfg->max_workers - live;

        spawn(m, m->spawn_rate < room ? m->spawn_rate : room);
        if (m->spawn_rate < MAX_SPAWN_RATE)
            m->spawn_rate *= 2;
    } else {
        m->spawn_rate = 1;
    }
}

/* Connections the kernel holds in the accept queues of the listening
 * sockets, the reuseport copies included (a listening socket's TCP_INFO
 * gives its queue in tcpi_unacked); a socket that does not say counts 0. */
static unsigned queued_connections(const struct cr_model *m)
{
    unsigned n = 0;

    for (size_t k = 0; k < cr__prefork_nsockets(&m->pool); k++) {
        struct tcp_info ti;
        socklen_t len = sizeof(ti);

        memset(&ti, 0, sizeof(ti));
        if (getsockopt(m->pool.env.listen_fds[k], IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
            ti.tcpi_state == TCP_LISTEN)
            n += ti.tcpi_unacked;
    }
    return n;
}

/* Threads of the current generation that take a connection now or soon:
 * all of a starting worker's, the ones not busy of a running worker's. */
static unsigned free_threads(struct cr_model *m)
{
    unsigned threads = (unsigned)m->pool.cfg->threads;
    unsigned n = 0;

    for (struct proc *p = m->procs; p != NULL; p = p->next) {
        struct cr__slot *s;
        unsigned busy;
        int st;

        if (p->generation != m->generation || p->told != 0 || p->slot < 0)
            continue;
        s = cr__scoreboard_slot(m->pool.sb, (unsigned)p->slot);
        st = __atomic_load_n(&s->state, __ATOMIC_RELAXED);
        if (st == CR_WORKER_STOPPING || st == CR_WORKER_DEAD)
            continue;
        busy = st == CR_WORKER_STARTING ? 0 : __atomic_load_n(&s->busy_threads, __ATOMIC_RELAXED);
        n += busy < threads ? threads - busy : 0;
    }
    return n;
}

/* Connections queued at two looks in a row (slow heads are parked in ms)
 * beyond the free threads (starting workers' count) get workers at once, up
 * to max_workers: an answered keep-alive connection holds its thread, and the
 * 1 s tick's 1, 2, 4 ... left a burst of them queued for seconds. */
static void grow_on_demand(struct cr_model *m)
{
    unsigned threads = (unsigned)m->pool.cfg->threads;
    unsigned now = queued_connections(m);
    unsigned waiting = now < m->queued ? now : m->queued;
    unsigned avail;
    unsigned live;
    unsigned idle;
    unsigned room;
    unsigned want;

    m->queued = now;
    if (waiting == 0)
        return;
    avail = free_threads(m);
    if (waiting <= avail)
        return;
    count_pool(m, &live, &idle);
    room =
        (unsigned)m->pool.cfg->max_workers > live ? (unsigned)m->pool.cfg->max_workers - live : 0;
    want = (waiting - avail + threads - 1) / threads;
    want = want < room ? want : room;
    if (want == 0) {
        if (!m->warned_full)
            CR_LOG(CR_LOG_WARN,
                   "prefork: %u workers (max_workers) busy and %u connections queued: "
                   "consider a higher max_workers or threads",
                   live, waiting - avail);
        m->warned_full = true;
        return;
    }
    CR_LOG(CR_LOG_DEBUG, "prefork: %u connections queued, %u free threads: %u more workers",
           waiting, avail, want);
    spawn(m, want);
}

/* Reports workers busy on one connection longer than busy_warn_ms, once
 * per connection. */
static void check_busy(struct cr_model *m)
{
    uint64_t now = cr_clock_now_ns();
    uint64_t limit = m->pool.cfg->busy_warn_ms * CR_NSEC_PER_MSEC;

    for (struct proc *p = m->procs; p != NULL; p = p->next) {
        struct cr__slot *s;
        uint64_t since;

        if (p->slot < 0)
            continue;
        s = cr__scoreboard_slot(m->pool.sb, (unsigned)p->slot);
        since = __atomic_load_n(&s->busy_since_ns, __ATOMIC_RELAXED);
        if (since == 0 || since == p->warned_since || now < since || now - since <= limit)
            continue;
        p->warned_since = since;
        CR_LOG(CR_LOG_WARN,
               "prefork: worker %d (generation %u) busy on one connection for %llu ms "
               "(busy_warn_ms %llu)",
               (int)p->pid, p->generation, (unsigned long long)((now - since) / CR_NSEC_PER_MSEC),
               (unsigned long long)m->pool.cfg->busy_warn_ms);
    }
}

/* Every DEMAND_MS the accept queues; every TICK_MS the maintenance. */
static void on_tick(struct cr_reactor *r, uint64_t id, void *arg)
{
    struct cr_model *m = arg;

    CR_UNUSED(id);
    if (m->stop_applied != 0)
        return;
    grow_on_demand(m);
    if (++m->looks % (TICK_MS / DEMAND_MS) == 0) {
        maintain(m);
        check_busy(m);
    }
    if (cr_reactor_timer_add(r, DEMAND_MS, on_tick, m, NULL) < 0)
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
    if (p->slot >= 0 && cr__scoreboard_owns(m->pool.sb, (unsigned)p->slot, p->tag)) {
        struct cr__slot *s = cr__scoreboard_slot(m->pool.sb, (unsigned)p->slot);

        was_starting = __atomic_load_n(&s->state, __ATOMIC_RELAXED) == CR_WORKER_STARTING;
        cr__scoreboard_release(m->pool.sb, (unsigned)p->slot);
    }
    /* Told to stop, or retired itself (exit 0): expected. Otherwise a
     * crash: killed, or failed. */
    if (p->told == 0 && status != 0) {
        counter_add(&m->pool.totals->crashes, 1);
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
    __atomic_fetch_sub(&m->pool.totals->processes, 1u, __ATOMIC_RELAXED);

    /* Replace at once what the pool lacks, except after a death before
     * the worker was ready (a process_init that fails would otherwise
     * fork in a loop): the next tick does that, at its rate. */
    if (m->stop_applied == 0 && !was_starting) {
        unsigned live;
        unsigned idle;
        unsigned n;

        count_pool(m, &live, &idle);
        n = shortfall(m, live, idle);
        spawn(m, n);
    }
}

/* n restarts asked since the last look: one new generation of workers,
 * numbered as if each had been done (generation and restarts agree). */
static void do_restart(struct cr_model *m, unsigned n)
{
    m->generation += n;
    __atomic_store_n(&m->pool.totals->generation, m->generation, __ATOMIC_RELAXED);
    counter_add(&m->pool.totals->restarts, n);
    CR_LOG(CR_LOG_INFO, "prefork: graceful restart: generation %u", m->generation);
    /* The new workers first, then the old told to go: the listeners are
     * never without a worker that takes its turn. */
    spawn(m, (unsigned)m->pool.cfg->workers);
    for (struct proc *p = m->procs; p != NULL; p = p->next) {
        if (p->generation != m->generation)
            tell(p, CR__STOP_GRACEFUL);
    }
    m->spawn_rate = 1;
}

static void apply_stop(struct cr_model *m, int how)
{
    m->stop_applied = how;
    for (struct proc *p = m->procs; p != NULL; p = p->next)
        tell(p, how);
    if (how == CR__STOP_NOW && m->kill_timer == 0 &&
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

    spawn(m, (unsigned)m->pool.cfg->workers);
    err = m->procs != NULL ? 0 : -EAGAIN;
    if (err == 0)
        err = cr_reactor_timer_add(m->r, DEMAND_MS, on_tick, m, NULL);
    cr_mutex_lock(&m->lock);
    m->start_err = err;
    m->start_done = true;
    cr_cond_broadcast(&m->cv);
    cr_mutex_unlock(&m->lock);
    if (err < 0) {
        apply_stop(m, CR__STOP_NOW);
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

/* ------------------------------------------------------------------ model ops */

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
    m->pool.env = *env;
    m->pool.cfg = env->cfg;
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
    err = cr__scoreboard_create(&m->pool.sb, CR__SCOREBOARD_SLOTS(env->cfg->max_workers));
    if (err < 0)
        goto out_destroy;
    m->pool.totals = cr__scoreboard_totals(m->pool.sb);
    m->pool.totals->generation = 1;
    err = cr__accept_lock_create(&m->pool.alock, kind);
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
    int how = graceful ? CR__STOP_GRACEFUL : CR__STOP_NOW;

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
    cr__accept_lock_destroy(m->pool.alock);
    cr__scoreboard_destroy(m->pool.sb);
    cr_cond_fini(&m->cv);
    cr_mutex_fini(&m->lock);
    free(m);
}

static unsigned prefork_stats(const struct cr_model *m, struct cr_server_stats *st,
                              struct cr_worker_stats *workers, unsigned max)
{
    struct cr_scoreboard_entry e[64];
    unsigned n;

    /* The master serves nothing: its own counters (which server.c filled
     * in) are zero, and the scoreboard's are the server's. */
    cr__scoreboard_stats(m->pool.sb, st);

    /* One entry per worker process in the scoreboard: its state as a role
     * and the connections it served as events (no time per role). */
    n = cr__scoreboard_copy(m->pool.sb, e, sizeof(e) / sizeof(e[0]));
    for (unsigned i = 0; i < n && i < sizeof(e) / sizeof(e[0]) && i < max; i++) {
        memset(&workers[i], 0, sizeof(workers[i]));
        workers[i].role = cr__scoreboard_role((int)e[i].state);
        workers[i].events = e[i].connections;
    }
    return n;
}

static unsigned prefork_scoreboard(const struct cr_model *m, struct cr_scoreboard_entry *e,
                                   unsigned max)
{
    return cr__scoreboard_copy(m->pool.sb, e, max);
}

static int prefork_timeline(const struct cr_model *m, struct cr_timeline_view *v, uint64_t since_ns)
{
    return cr__scoreboard_timeline(m->pool.sb, v, since_ns);
}

const struct cr_model_ops cr__model_prefork_ops = {
    .name = "prefork",
    /* A worker's one blocking thread would sleep in sendfile each time half
     * a mark were left: the system's (measured in docs/design/prefork.md). */
    .notsent_lowat = CR_SERVER_NOTSENT_SYSTEM,
    .create = prefork_create,
    .start = prefork_start,
    .stop = prefork_stop,
    .wait = prefork_wait,
    .destroy = prefork_destroy,
    .stats = prefork_stats,
    .restart = prefork_restart,
    .scoreboard = prefork_scoreboard,
    .timeline = prefork_timeline,
};
