/*
 * model_forking.c - the forking server (Request Processing Server patterns,
 * "Forking Server"; the classic inetd / pre-1.3 Apache shape): the master
 * accepts, and for each connection forks a child that serves it to its end
 * with blocking waits (cr__conn_serve_blocking) and exits. cr_server
 * (src/server.c) drives it through cr__model_forking_ops. Owns the manager
 * thread, its reactor and acceptors, a pidfd per child and the scoreboard
 * (with the server-wide totals); borrows the listening sockets and the
 * service, whose calls all happen in the children.
 *
 * Manager: one thread runs a cr_reactor holding a cr_acceptor per listening
 * socket (the accept loop, accept_loop_internal.h) and each live child's
 * pidfd (readable when the child exits: no SIGCHLD, proc_internal.h says
 * why). It accepts, forks (cr__proc_spawn), closes its copy of the
 * connection at once, and reaps children as their pidfds fire. It is the
 * only thread that forks, claims or releases slots and reaps;
 * PR_SET_PDEATHSIG ties the children to it, and it lives until the last one
 * is reaped.
 *
 * Cap: children alive <= cap (cfg->max_workers, and no more than
 * max_connections). At the cap the acceptors pause, so new connections wait
 * in the listen backlog; a reaped child below the cap resumes them.
 *
 * The child: closes what the model holds and it does not need (the
 * listening sockets, the reactor's descriptors, the other children's
 * pidfds), never a range of descriptors, since the service's own (a file
 * cache, a log) must survive; then process_init, the connection, its
 * scoreboard slot (BUSY, connections, bytes, requests through on_request),
 * process_exit, exit. It touches no lock of the master's: another master
 * thread may have held one at the fork, and in the child it would stay held.
 * Its counters go to shared memory (the slot, and the scoreboard's totals
 * for the server's bytes and requests), since the master's counters are not
 * shared.
 *
 * Stop: every child is told with a signal through its pidfd, TERM for a
 * graceful stop (cr__proc_stop becomes CR__STOP_GRACEFUL: the request
 * in flight is answered, then the child exits once idle) and QUIT for an
 * immediate one (CR__STOP_NOW; the signal wakes its poll at once); a
 * child still alive KILL_AFTER_MS after an immediate stop gets SIGKILL. The
 * slot's `stop` says the same for status pages. The acceptors go at the
 * first stop; wait() returns once every child is reaped and the manager
 * thread joined.
 *
 * Lock order: m->lock, then the accept loop's lock, then an acceptor's
 * lock, then the reactor's (accept_loop.c, acceptor.c). m->lock guards the
 * child table, which stop() walks to signal children while the manager forks
 * and reaps.
 */
#include <cabrank/clock.h>
#include <cabrank/log.h>
#include <cabrank/reactor.h>

#include "demux/reactor_internal.h"
#include "model/model_internal.h"
#include "net/accept_loop_internal.h"
#include "os/clock_internal.h"
#include "os/proc_internal.h"
#include "os/sync_internal.h"
#include "pool/scoreboard_internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* An immediate stop escalates to SIGKILL for a child that ignored QUIT this
 * long (a service handler blocked outside the driver's poll). */
#define KILL_AFTER_MS 5000
/* Most descriptors a reactor opens (epoll + eventfd, signalfd...). */

/* One child process; the table's index is its scoreboard slot. */
struct child {
    /* Immutable after create. */
    struct cr_model *m;
    unsigned idx;
    /* Protected by m->lock; written by the manager thread only. */
    bool live;
    bool told; /* told to stop: its death is not a crash */
    pid_t pid;
    int pidfd; /* registered in m->r while live */
    uint32_t tag;
};

struct cr_model {
    /* Immutable after create. */
    struct cr_model_env env;
    unsigned cap;
    struct cr__accept_loop *loop; /* the manager thread, its reactor and acceptors */
    struct cr_reactor *r;         /* the loop's */
    int reactor_fds[CR__REACTOR_MAX_FDS];
    unsigned nreactor_fds;
    struct cr__scoreboard *sb;             /* cap slots and the totals, shared */
    struct cr__scoreboard_totals *totals;  /* sb's */
    struct child *children;                /* cap entries */
    struct sockaddr_storage *listen_addrs; /* local address of each listener */
    unsigned nlisten_addrs;

    struct cr_mutex lock;
    /* Protected by lock. */
    unsigned nchildren; /* live children */
    int stopping;       /* 0, CR__STOP_GRACEFUL or CR__STOP_NOW */
    bool kill_armed;    /* the SIGKILL timer is set */
};

/* What the child needs, on the manager's stack at the fork (the child has
 * its own copy of that stack). */
struct spawn_arg {
    struct cr_model *m;
    int fd;
    unsigned slot;
    uint64_t accepted_ns; /* the connection's arrival, for the service's open */
};

/* The child's context for on_request. */
struct child_ctx {
    struct cr__slot *slot;
    struct cr_conn *c;
};

static void counter_add(uint64_t *counter, int64_t delta)
{
    /* Relaxed: statistics (model_internal.h). */
    __atomic_fetch_add(counter, (uint64_t)delta, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------- the child */

/* cr_conn_request_done in the child: the slot's counters. Only this process
 * writes them while it owns the slot. */
static void on_child_request(void *arg)
{
    struct child_ctx *cc = arg;

    __atomic_fetch_add(&cc->slot->requests, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&cc->slot->last_request_ns, cr_clock_wall_ns(), __ATOMIC_RELAXED);
    /* The answer is queued, not yet sent: count it, or the slot would
     * lag one answer behind until the connection ends. */
    if (cc->c != NULL)
        __atomic_store_n(&cc->slot->bytes, cr__conn_bytes_out(cc->c) + cr_conn_pending(cc->c),
                         __ATOMIC_RELAXED);
}

/* True when a (local or peer) address is that of listener l: the same
 * port and family, and the same IP unless the listener's is a wildcard. */
static bool is_listener_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *l)
{
    if (a->ss_family != l->ss_family)
        return false;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a;
        const struct sockaddr_in *y = (const void *)l;

        return x->sin_port == y->sin_port && (y->sin_addr.s_addr == htonl(INADDR_ANY) ||
                                              x->sin_addr.s_addr == y->sin_addr.s_addr);
    }
    if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const void *)a;
        const struct sockaddr_in6 *y = (const void *)l;

        return x->sin6_port == y->sin6_port &&
               (IN6_IS_ADDR_UNSPECIFIED(&y->sin6_addr) ||
                memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0);
    }
    return false;
}

/*
 * True when socket fd is another end of this server: the master's other
 * connections, or a client of this server in the master's process (a test,
 * a health check), whose peer is one of our listeners. A child holding the
 * client end of another connection would keep that connection open after
 * the client closed it.
 */
static bool is_server_socket(struct cr_model *m, int fd)
{
    struct sockaddr_storage addr[2];
    socklen_t len;

    memset(addr, 0, sizeof(addr));
    len = sizeof(addr[0]);
    if (getsockname(fd, (struct sockaddr *)&addr[0], &len) < 0)
        return false; /* ENOTSOCK */
    len = sizeof(addr[1]);
    if (getpeername(fd, (struct sockaddr *)&addr[1], &len) < 0)
        memset(&addr[1], 0, sizeof(addr[1]));
    for (unsigned i = 0; i < m->nlisten_addrs; i++) {
        if (is_listener_addr(&addr[0], &m->listen_addrs[i]) ||
            is_listener_addr(&addr[1], &m->listen_addrs[i]))
            return true;
    }
    return false;
}

/*
 * Closes, in the child, each descriptor of the model's that the child does
 * not use: the listening sockets, the reactor's descriptors, the other
 * children's pidfds, and sockets that are other ends of this server
 * (is_server_socket). Never a range: the service's descriptors stay. The
 * table is the manager's, copied at the fork by the manager itself, so it is
 * consistent without the lock (which the child never takes).
 */
struct close_ctx {
    struct cr_model *m;
    int conn_fd;
};

static void close_if_server_socket(int fd, void *arg)
{
    struct close_ctx *cc = arg;

    if (fd != cc->conn_fd && is_server_socket(cc->m, fd))
        close(fd);
}

static void child_close_model_fds(struct cr_model *m, int conn_fd)
{
    struct close_ctx cc = {m, conn_fd};

    for (unsigned i = 0; i < m->env.nlisten * m->env.listen_groups; i++)
        close(m->env.listen_fds[i]);
    for (unsigned i = 0; i < m->nreactor_fds; i++)
        close(m->reactor_fds[i]);
    for (unsigned i = 0; i < m->cap; i++) {
        if (m->children[i].live)
            close(m->children[i].pidfd);
    }
    (void)cr__proc_each_fd(close_if_server_socket, &cc);
}

static int child_main(void *arg)
{
    struct spawn_arg *sa = arg;
    struct cr_model *m = sa->m;
    const struct cr_service *svc = m->env.conn.svc;
    struct cr__slot *slot = cr__scoreboard_slot(m->sb, sa->slot);
    struct cr__conn_config ccfg = m->env.conn;
    struct child_ctx cc = {.slot = slot};
    bool timeline = m->env.cfg->timeline_events != CR_SERVER_TIMELINE_OFF;
    struct cr_conn *c;
    uint64_t outer;
    uint64_t now;
    int err;

    child_close_model_fds(m, sa->fd);
    __atomic_store_n(&slot->pid, (int)getpid(), __ATOMIC_RELAXED);
    if (svc->process_init != NULL) {
        err = svc->process_init(svc->ctx);
        if (err < 0) {
            CR_LOG(CR_LOG_ERROR, "forking: process_init failed: %s", strerror(-err));
            close(sa->fd);
            return 1;
        }
    }
    ccfg.bytes_in = &m->totals->bytes_in;
    ccfg.bytes_out = &m->totals->bytes_out;
    ccfg.requests = &m->totals->requests;
    ccfg.on_request = on_child_request;
    ccfg.on_request_arg = &cc;
    now = cr_clock_now_ns();
    __atomic_store_n(&slot->busy_since_ns, now, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->busy_threads, 1u, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->connections, (uint64_t)1, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->state, (int)CR_WORKER_BUSY, __ATOMIC_RELAXED);
    if (timeline) {
        /* Its lane: busy from here to the end of its connection. */
        cr__slot_timeline_start(slot);
        cr__slot_timeline_note(slot, now, CR_WORKER_BUSY);
    }
    /* The connection arrived at the accept, not after the fork: the
     * service's timeouts (a header timeout) count from there. */
    outer = cr__clock_event_enter(sa->accepted_ns);
    err = cr__conn_create(&c, sa->fd, &ccfg);
    cr__clock_event_leave(outer);
    if (err == 0) {
        cc.c = c;
        cr__conn_serve_blocking(c, 0, &cr__proc_stop);
        __atomic_store_n(&slot->bytes, cr__conn_bytes_out(c), __ATOMIC_RELAXED);
        cc.c = NULL;
        cr__conn_destroy(c);
    }
    /* err < 0: the service refused the connection (fd closed); not a crash. */
    __atomic_store_n(&slot->busy_threads, 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->state, (int)CR_WORKER_STOPPING, __ATOMIC_RELAXED);
    if (timeline)
        cr__slot_timeline_note(slot, cr_clock_now_ns(), CR_WORKER_STOPPING);
    if (svc->process_exit != NULL)
        svc->process_exit(svc->ctx);
    return 0;
}

/* ------------------------------------------------------------ the master */

/* Signals a live child to stop at level. Caller holds m->lock. */
static void tell_child(struct cr_model *m, unsigned i, int level)
{
    struct child *ch = &m->children[i];
    struct cr__slot *slot = cr__scoreboard_slot(m->sb, i);
    int signo = level == CR__STOP_NOW ? SIGQUIT : SIGTERM;

    cr_mutex_assert_held(&m->lock);
    ch->told = true;
    __atomic_store_n(&slot->stop, level, __ATOMIC_RELAXED);
    /* Through the pidfd: the pid cannot have been reused, since this
     * process has not reaped it. ESRCH: it is exiting already. */
    if (pidfd_send_signal(ch->pidfd, signo, NULL, 0) < 0 && errno != ESRCH)
        CR_LOG(CR_LOG_WARN, "forking: pidfd_send_signal(%d) to %d failed: %s", signo, (int)ch->pid,
               strerror(errno));
}

/* Pauses or resumes the acceptors to keep children under the cap. Caller
 * holds m->lock. */
static void update_pause(struct cr_model *m)
{
    cr_mutex_assert_held(&m->lock);
    cr__accept_loop_update(m->loop, m->nchildren);
}

/* Drops the reaped child of slot i: closes its pidfd (no longer in the
 * reactor), frees its slot, accepts again below the cap. Caller holds
 * m->lock; manager thread. */
static void forget_child(struct cr_model *m, unsigned i)
{
    struct child *ch = &m->children[i];

    cr_mutex_assert_held(&m->lock);
    close(ch->pidfd);
    ch->live = false;
    ch->pidfd = -1;
    /* Ours since the claim: forking never evicts. */
    assert(cr__scoreboard_owns(m->sb, i, ch->tag));
    __atomic_store_n(&cr__scoreboard_slot(m->sb, i)->state, (int)CR_WORKER_DEAD, __ATOMIC_RELAXED);
    cr__scoreboard_release(m->sb, i);
    /* After the release: whoever sees the process gone sees its slot (and
     * connection) gone too. */
    __atomic_fetch_sub(&m->totals->processes, 1u, __ATOMIC_RELAXED);
    m->nchildren--;
    update_pause(m);
}

/* The child in slot i exited (status from wait). Manager thread. */
static void child_gone(struct cr_model *m, unsigned i, int status)
{
    struct child *ch = &m->children[i];
    int err;

    err = cr_reactor_remove(m->r, ch->pidfd);
    assert(err == 0);
    (void)err;
    cr_mutex_lock(&m->lock);
    if (!ch->told && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
        char buf[64];

        counter_add(&m->totals->crashes, 1);
        CR_LOG(CR_LOG_WARN, "forking: child %d %s", (int)ch->pid,
               cr__proc_describe(status, buf, sizeof(buf)));
    }
    forget_child(m, i);
    cr_mutex_unlock(&m->lock);
}

static void on_child_exit(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct child *ch = arg;
    int status = 0;
    int err;

    CR_UNUSED(r);
    CR_UNUSED(events);
    err = cr__proc_reap(fd, &status);
    if (err == -EAGAIN)
        return; /* not yet (a pidfd is readable only at exit, but be safe) */
    if (err < 0) {
        /* ECHILD: reaped by someone else's waitpid(-1); it is gone. */
        CR_LOG(CR_LOG_WARN, "forking: waitid(child %d) failed: %s", (int)ch->pid, strerror(-err));
        status = 0;
    }
    child_gone(ch->m, ch->idx, status);
}

/* SIGKILL for children that ignored an immediate stop. Manager thread. */
static void on_kill_timer(struct cr_reactor *r, uint64_t id, void *arg)
{
    struct cr_model *m = arg;

    CR_UNUSED(r);
    CR_UNUSED(id);
    cr_mutex_lock(&m->lock);
    for (unsigned i = 0; i < m->cap; i++) {
        if (m->children[i].live) {
            CR_LOG(CR_LOG_WARN, "forking: child %d ignored the immediate stop; killing it",
                   (int)m->children[i].pid);
            (void)pidfd_send_signal(m->children[i].pidfd, SIGKILL, NULL, 0);
        }
    }
    cr_mutex_unlock(&m->lock);
}

/* Forks a child for connection fd (taken). Manager thread. */
static void spawn_child(struct cr_model *m, int fd)
{
    struct spawn_arg sa = {.m = m, .fd = fd, .accepted_ns = cr_clock_event_ns()};
    struct child *ch;
    pid_t pid;
    int pidfd;
    int slot;
    int err;

    /* The manager alone claims and releases; nchildren < cap (else the
     * acceptors are paused), so a slot is free. */
    slot = cr__scoreboard_claim(m->sb, 1);
    if (slot < 0) {
        CR_LOG(CR_LOG_ERROR, "forking: no free scoreboard slot; closing connection");
        close(fd);
        return;
    }
    sa.slot = (unsigned)slot;
    /* Counted before the fork, so everything the child does (its first reply included) comes
     * after: counted after it, a stats reader could see the child serve and the count lag. */
    __atomic_fetch_add(&m->totals->processes, 1u, __ATOMIC_RELAXED);
    err = cr__proc_spawn(child_main, &sa, &pid, &pidfd);
    /* The child has its copy; the master keeps none, so later children do
     * not inherit it. */
    close(fd);
    if (err < 0) {
        CR_LOG(CR_LOG_WARN, "forking: fork failed: %s; closing connection", strerror(-err));
        cr__scoreboard_release(m->sb, (unsigned)slot);
        __atomic_fetch_sub(&m->totals->processes, 1u, __ATOMIC_RELAXED);
        return;
    }
    __atomic_store_n(&cr__scoreboard_slot(m->sb, (unsigned)slot)->pid, (int)pid, __ATOMIC_RELAXED);
    ch = &m->children[slot];
    cr_mutex_lock(&m->lock);
    ch->live = true;
    ch->told = false;
    ch->pid = pid;
    ch->pidfd = pidfd;
    ch->tag = cr__scoreboard_slot(m->sb, (unsigned)slot)->tag;
    m->nchildren++;
    /* A stop that came during the fork did not see this child. */
    if (m->stopping != 0)
        tell_child(m, (unsigned)slot, m->stopping);
    update_pause(m);
    cr_mutex_unlock(&m->lock);
    err = cr_reactor_add(m->r, pidfd, CR_EV_READ, 0, on_child_exit, ch);
    if (err < 0) {
        siginfo_t si;

        /* Cannot watch it: kill it and reap it now. */
        CR_LOG(CR_LOG_ERROR, "forking: cannot watch child %d: %s; killing it", (int)pid,
               strerror(-err));
        (void)pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
        memset(&si, 0, sizeof(si));
        (void)waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED);
        cr_mutex_lock(&m->lock);
        forget_child(m, (unsigned)slot);
        cr_mutex_unlock(&m->lock);
    }
}

static void on_accept(struct cr__accept_loop *l, int fd, void *arg)
{
    struct cr_model *m = arg;
    int stopping;

    CR_UNUSED(l);
    counter_add(&m->totals->accepted, 1);
    cr_mutex_lock(&m->lock);
    stopping = m->stopping;
    cr_mutex_unlock(&m->lock);
    /* A stop came in the middle of an accept batch. */
    if (stopping != 0) {
        close(fd);
        return;
    }
    spawn_child(m, fd);
}

static void manager_main(struct cr__accept_loop *l, void *arg)
{
    struct cr_model *m = arg;
    bool dropped = false;

    for (;;) {
        int stopping;
        unsigned n;
        bool arm = false;
        int err;

        cr_mutex_lock(&m->lock);
        stopping = m->stopping;
        n = m->nchildren;
        if (stopping == CR__STOP_NOW && !m->kill_armed) {
            m->kill_armed = true;
            arm = true;
        }
        cr_mutex_unlock(&m->lock);
        if (stopping != 0 && !dropped) {
            /* At the first stop: no more accepts. */
            cr__accept_loop_drop(l);
            dropped = true;
        }
        if (arm && cr_reactor_timer_add(m->r, KILL_AFTER_MS, on_kill_timer, m, NULL) < 0)
            CR_LOG(CR_LOG_WARN, "forking: cannot arm the kill timer");
        if (stopping != 0 && n == 0)
            break;
        /* stop() wakes the wait; a child's exit is an event. */
        err = cr_reactor_handle_events(m->r, -1, 0);
        if (err < 0 && err != -EINTR) {
            CR_LOG(CR_LOG_ERROR, "forking: manager reactor failed: %s", strerror(-err));
            /* Cannot see children exit any more: poll for them. */
            usleep(10000);
            for (unsigned i = 0; i < m->cap; i++) {
                struct child *ch = &m->children[i];
                int status;
                bool live;
                int pidfd;

                cr_mutex_lock(&m->lock);
                live = ch->live;
                pidfd = ch->pidfd;
                cr_mutex_unlock(&m->lock);
                if (live && cr__proc_reap(pidfd, &status) == 0)
                    child_gone(m, i, status);
            }
        }
    }
}

/* Creates the accept loop (its reactor and acceptors) and records the
 * reactor's descriptors, for the children to close (reactor_internal.h). */
static int create_loop(struct cr_model *m)
{
    struct cr__accept_loop_config lcfg = {
        .backend = m->env.cfg->backend,
        .listen_fds = m->env.listen_fds,
        .nlisten = m->env.nlisten,
        .cap = m->cap,
        .on_accept = on_accept,
        .run = manager_main,
        .arg = m,
    };
    int err;

    err = cr__accept_loop_create(&m->loop, &lcfg);
    if (err < 0)
        return err;
    m->r = cr__accept_loop_reactor(m->loop);
    m->nreactor_fds = cr__reactor_fds(m->r, m->reactor_fds);
    return 0;
}

/* ------------------------------------------------------------- model ops */

static void forking_stop(struct cr_model *m, bool graceful);
static int forking_wait(struct cr_model *m);
static void forking_destroy(struct cr_model *m);

static int forking_create(struct cr_model **out, const struct cr_model_env *env)
{
    struct cr_model *m;
    unsigned cap;
    int err;

    *out = NULL;
    cap = (unsigned)env->cfg->max_workers;
    if (env->cfg->max_connections > 0 && (unsigned)env->cfg->max_connections < cap)
        cap = (unsigned)env->cfg->max_connections;
    if (cap == 0)
        return -EINVAL;

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
    /* From here forking_destroy undoes whatever was set up. */
    m->children = calloc(cap, sizeof(*m->children));
    m->listen_addrs = calloc(env->nlisten * env->listen_groups + 1, sizeof(*m->listen_addrs));
    if (m->children == NULL || m->listen_addrs == NULL) {
        err = -ENOMEM;
        goto out_destroy;
    }
    for (unsigned i = 0; i < cap; i++) {
        m->children[i].m = m;
        m->children[i].idx = i;
        m->children[i].pidfd = -1;
    }
    /* Before any fork, so every child shares them. */
    err = cr__scoreboard_create(&m->sb, cap);
    if (err < 0)
        goto out_destroy;
    m->totals = cr__scoreboard_totals(m->sb);
    m->totals->generation = 1;
    for (unsigned i = 0; i < env->nlisten * env->listen_groups; i++) {
        socklen_t len = sizeof(m->listen_addrs[0]);

        if (getsockname(env->listen_fds[i], (struct sockaddr *)&m->listen_addrs[i], &len) < 0) {
            err = -errno;
            goto out_destroy;
        }
        m->nlisten_addrs++;
    }
    err = create_loop(m);
    if (err < 0)
        goto out_destroy;
    *out = m;
    return 0;

out_destroy:
    forking_destroy(m);
    return err;
}

static int forking_start(struct cr_model *m)
{
    return cr__accept_loop_start(m->loop);
}

static void forking_stop(struct cr_model *m, bool graceful)
{
    int level = graceful ? CR__STOP_GRACEFUL : CR__STOP_NOW;

    cr_mutex_lock(&m->lock);
    /* A graceful stop never undoes an immediate one. */
    if (level > m->stopping) {
        m->stopping = level;
        for (unsigned i = 0; i < m->cap; i++) {
            if (m->children[i].live)
                tell_child(m, i, level);
        }
    }
    cr_mutex_unlock(&m->lock);
    /* The manager looks at `stopping` after each wait. */
    cr_reactor_wake(m->r);
}

static int forking_wait(struct cr_model *m)
{
    (void)cr__accept_loop_join(m->loop);
    return 0;
}

static void forking_destroy(struct cr_model *m)
{
    if (m == NULL)
        return;
    if (m->loop != NULL && cr__accept_loop_is_joinable(m->loop)) {
        forking_stop(m, false);
        (void)forking_wait(m);
    }
    /* Joined (or never started): no child is alive, no callback runs. */
    cr__accept_loop_destroy(m->loop);
    cr__scoreboard_destroy(m->sb);
    free(m->children);
    free(m->listen_addrs);
    cr_mutex_fini(&m->lock);
    free(m);
}

/*
 * Lock-free and from shared memory only: a child serving a status page
 * calls it too, and a lock another master thread held at the fork would be
 * held forever in the child. The live children are the slots in use.
 */
static unsigned forking_stats(const struct cr_model *m, struct cr_server_stats *st,
                              struct cr_worker_stats *workers, unsigned max)
{
    unsigned n = cr__scoreboard_copy(m->sb, NULL, 0);

    cr__scoreboard_stats(m->sb, st);
    for (unsigned i = 0; i < n && i < max; i++) {
        memset(&workers[i], 0, sizeof(workers[i]));
        workers[i].role = CR_ROLE_PROCESSING;
        workers[i].events = 1; /* a child serves one connection */
    }
    return n;
}

static unsigned forking_scoreboard(const struct cr_model *m, struct cr_scoreboard_entry *e,
                                   unsigned max)
{
    return cr__scoreboard_copy(m->sb, e, max);
}

static int forking_timeline(const struct cr_model *m, struct cr_timeline_view *v, uint64_t since_ns)
{
    return cr__scoreboard_timeline(m->sb, v, since_ns);
}

/* Each child is a fresh fork: nothing to restart. */
static int forking_restart(struct cr_model *m)
{
    CR_UNUSED(m);
    return 0;
}

const struct cr_model_ops cr__model_forking_ops = {
    .name = "forking",
    .create = forking_create,
    .start = forking_start,
    .stop = forking_stop,
    .wait = forking_wait,
    .destroy = forking_destroy,
    .stats = forking_stats,
    .restart = forking_restart,
    .scoreboard = forking_scoreboard,
    .timeline = forking_timeline,
};
