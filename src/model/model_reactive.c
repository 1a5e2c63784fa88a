/*
 * model_reactive.c - connections served by event handlers on cr_reactors:
 * accept, register one-shot, handle, re-arm, time out, limit, stop. Shared by
 * the reactor model (one thread), the lf model (a Leader/Followers pool per
 * reactor) and the hshr model (one listener thread; workers handle the
 * connections it defers to them). Acceptors and timers run on whichever
 * threads dispatch the reactors' events; a connection's handler runs there
 * too, or, with the defer hook, on the thread the model hands the event to
 * (cr__reactive_handle); stop runs on any thread. Owns the acceptors and the
 * connections; borrows the reactors, the listening sockets and the env.
 * Every reactor accepts on every listening socket, or, with grouped
 * listeners (env->listen_groups, the lf and hshr models' SO_REUSEPORT copies), on its
 * own group's copies only.
 *
 * One thread per connection at a time: the connection's fd is registered
 * one-shot, so the reactor hands out one event and then nothing until the
 * handler re-arms it, which is the last thing the handler does with it. A
 * deferred event is still that one event: the dispatching thread passes it
 * to defer and touches the connection no more, and the handler that
 * cr__reactive_handle runs later re-arms it as the last thing, as above.
 *
 * Timers and stops never close a connection themselves. Under
 * Leader/Followers an event may have been taken by one thread (the handle
 * disarmed) and not yet dispatched while a timer fires on another; under
 * hshr an event deferred to the job queue waits there while the listener
 * runs timers. Either way the taken event will still reach the handler with
 * the connection as its argument. So a timer or a stop that wants a
 * connection gone marks it `expired` and shuts its socket down (under
 * rc->lock, while `closed` is false, so the fd cannot be closed and reused
 * meanwhile): the socket becomes readable and writable, the armed handle
 * fires (or the taken event arrives), and the handler, seeing `expired`,
 * closes it. The handler alone closes.
 *
 * A connection's timer is lazy: armed for the deadline of the wait, and left
 * alone when a later wait moves the deadline further out (the usual case:
 * the idle timeout restarts with every request); when it fires early it
 * re-arms for the rest. It is replaced only when a deadline moves earlier.
 * A timer that fires while a handler runs does nothing: the handler re-arms
 * one when it is done. Nor does one that finds the socket ready for what the
 * connection waits for: its event came in time and is pending, taken by a
 * leader that was preempted before dispatching it, or deferred and queued
 * behind other jobs; it looks again shortly. Each pending timer holds a
 * reference on the connection (a cancelled timer may already have been taken
 * for dispatch).
 *
 * Lock order: rs->lock, then rc->lock, then an acceptor's lock, then a
 * reactor's lock (the last two are leaf locks of acceptor.c and reactor.c).
 * No lock is held while a handler calls into the service, nor while defer
 * runs.
 */
#include <cabrank/acceptor.h>
#include <cabrank/clock.h>
#include <cabrank/log.h>

#include "model/model_reactive_internal.h"
#include "os/sync_internal.h"

#include <assert.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A deadline passed while the socket was ready: look again this much later. */
#define RECHECK_MS 50

/* One acceptor: a listener on a reactor. */
struct accept_slot {
    struct cr__reactive *rs;
    struct cr_reactor *r;
    unsigned reactor; /* r's index in the config */
    struct cr_acceptor *a;
};

struct cr__reactive_conn {
    /* Immutable after accept. */
    struct cr__reactive *rs;
    struct cr_reactor *r;
    struct cr_conn *conn;
    int fd;

    /* The handling thread's (one at a time, ordered by the reactor lock):
     * the fd is in the reactor. */
    bool registered;

    /* Protected by rs->lock. */
    struct cr__reactive_conn *prev;
    struct cr__reactive_conn *next;

    /* The list's reference plus one per pending timer. Atomic: acq_rel on
     * the decrement, so the thread that frees sees every other's writes. */
    unsigned refs;

    struct cr_lock lock;
    /* Protected by lock. */
    bool busy;         /* a handler runs */
    bool idle;         /* nothing in flight after the last handler */
    bool expired;      /* socket shut down; the next handler closes */
    bool closed;       /* the handler is closing: fd no longer usable */
    short wait_for;    /* POLLIN or POLLOUT: what the current wait is for */
    uint64_t deadline; /* of the current wait (ns), 0: none */
    uint64_t timer_id; /* pending timer, 0: none */
    uint64_t timer_at; /* when it fires */
};

struct cr__reactive {
    /* Immutable after create. */
    const struct cr_model_env *env;
    unsigned (*worker)(void *arg);
    void (*stopped)(void *arg);
    void (*defer)(struct cr__reactive_conn *rc, unsigned events, void *arg);
    void *arg;
    uint64_t grace_ms;
    unsigned max_connections;
    bool optimistic; /* serve a new connection on the accepting thread */
    struct accept_slot *slots;
    unsigned nslots;

    /* Atomic: set once (release) under lock; handlers read it (acquire)
     * under their rc->lock, see settle(). */
    int stopping;
    /* Atomic: stopped() was called (exchange, so once). */
    int stop_done;

    struct cr_lock lock;
    /* Protected by lock. */
    struct cr__reactive_conn *conns; /* open connections */
    unsigned live;
    bool limit_paused; /* acceptors paused at max_connections */
    bool grace_armed;
    uint64_t grace_timer;
    struct cr_reactor *grace_reactor;
};

static void on_conn_event(struct cr_reactor *r, int fd, unsigned events, void *arg);

static bool is_stopping(const struct cr__reactive *rs)
{
    /* Pairs with the release store in cr__reactive_stop. */
    return __atomic_load_n(&rs->stopping, __ATOMIC_ACQUIRE) != 0;
}

static void rconn_get(struct cr__reactive_conn *rc)
{
    /* Relaxed: the caller already holds a reference. */
    __atomic_fetch_add(&rc->refs, 1, __ATOMIC_RELAXED);
}

static void rconn_put(struct cr__reactive_conn *rc)
{
    if (__atomic_sub_fetch(&rc->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    cr_lock_fini(&rc->lock);
    free(rc);
}

/* Drops a timer's reference while the list still holds one, so it never
 * frees; saying so keeps rc's later uses visibly safe (gcc's use-after-free
 * warning saw the free of rconn_put once inlining put both in one body). */
static void rconn_put_held(struct cr__reactive_conn *rc)
{
    unsigned left = __atomic_sub_fetch(&rc->refs, 1, __ATOMIC_ACQ_REL);

    assert(left != 0);
    (void)left;
}

/* Calls stopped() the first time only. */
static void finish_stop(struct cr__reactive *rs)
{
    if (__atomic_exchange_n(&rs->stop_done, 1, __ATOMIC_ACQ_REL) == 0 && rs->stopped != NULL)
        rs->stopped(rs->arg);
}

/* Pauses or resumes every acceptor. Caller holds rs->lock. */
static void set_accepting(struct cr__reactive *rs, bool on)
{
    cr_lock_assert_held(&rs->lock);
    for (unsigned i = 0; i < rs->nslots; i++) {
        if (on)
            cr_acceptor_resume(rs->slots[i].a);
        else
            cr_acceptor_pause(rs->slots[i].a);
    }
}

/* ------------------------------------------------------------------ timers */

static void on_conn_timer(struct cr_reactor *r, uint64_t timer_id, void *arg);

/* Arms rc's timer for its deadline. Caller holds rc->lock; no timer pending. */
static void arm_timer(struct cr__reactive_conn *rc, uint64_t now)
{
    uint64_t delay_ms = 0;
    uint64_t id;
    int err;

    cr_lock_assert_held(&rc->lock);
    if (rc->deadline > now)
        delay_ms = (rc->deadline - now + CR_NSEC_PER_MSEC - 1) / CR_NSEC_PER_MSEC;
    rconn_get(rc);
    err = cr_reactor_timer_add(rc->r, delay_ms, on_conn_timer, rc, &id);
    if (err < 0) {
        /* The connection then has no timeout until its next wait. */
        CR_LOG(CR_LOG_WARN, "connection timer: %s", strerror(-err));
        rconn_put_held(rc);
        return;
    }
    rc->timer_id = id;
    rc->timer_at = rc->deadline;
}

/* Wakes the handler to close rc: see the top of the file. Caller holds
 * rc->lock. */
static void expire(struct cr__reactive_conn *rc)
{
    cr_lock_assert_held(&rc->lock);
    if (rc->expired || rc->closed)
        return;
    rc->expired = true;
    (void)shutdown(rc->fd, SHUT_RDWR);
}

/* True when rc's socket is ready for what it waits for (or hung up), so its
 * handler is about to run. Caller holds rc->lock (the fd is open). */
static bool is_ready(const struct cr__reactive_conn *rc)
{
    struct pollfd pfd = {.fd = rc->fd, .events = rc->wait_for};

    return poll(&pfd, 1, 0) > 0;
}

static void on_conn_timer(struct cr_reactor *r, uint64_t timer_id, void *arg)
{
    struct cr__reactive_conn *rc = arg;

    CR_UNUSED(r);
    cr_lock_lock(&rc->lock);
    /* A replaced or cancelled timer may still be dispatched once taken. */
    if (rc->timer_id == timer_id && !rc->closed) {
        rc->timer_id = 0;
        if (!rc->busy && rc->deadline != 0) {
            uint64_t now = cr_clock_now_ns();

            if (now < rc->deadline) {
                arm_timer(rc, now); /* the deadline moved out meanwhile */
            } else if (is_ready(rc)) {
                /* What it waited for came in time; its event is pending or
                 * taken but not yet dispatched (a leader preempted). */
                rc->deadline = now + RECHECK_MS * CR_NSEC_PER_MSEC;
                arm_timer(rc, now);
            } else {
                expire(rc);
            }
        }
    }
    cr_lock_unlock(&rc->lock);
    rconn_put(rc);
}

/* ------------------------------------------------------------------ connections */

/* Closes rc on the thread that owns it now (its handler, or destroy). */
static void close_conn(struct cr__reactive_conn *rc)
{
    struct cr__reactive *rs = rc->rs;
    bool done = false;
    uint64_t timer;
    int err;

    cr_lock_lock(&rc->lock);
    rc->closed = true;
    timer = rc->timer_id;
    rc->timer_id = 0;
    cr_lock_unlock(&rc->lock);
    /* -ENOENT: taken for dispatch; on_conn_timer drops its reference. */
    if (timer != 0 && cr_reactor_timer_cancel(rc->r, timer) == 0)
        rconn_put_held(rc);
    err = rc->registered ? cr_reactor_remove(rc->r, rc->fd) : 0;
    if (err < 0 && err != -ENOENT)
        CR_LOG(CR_LOG_WARN, "removing connection fd %d: %s", rc->fd, strerror(-err));
    cr__conn_destroy(rc->conn);

    cr_lock_lock(&rs->lock);
    if (rc->prev != NULL)
        rc->prev->next = rc->next;
    else
        rs->conns = rc->next;
    if (rc->next != NULL)
        rc->next->prev = rc->prev;
    rs->live--;
    if (is_stopping(rs)) {
        done = rs->live == 0;
    } else if (rs->limit_paused && rs->live < rs->max_connections) {
        rs->limit_paused = false;
        set_accepting(rs, true);
    }
    cr_lock_unlock(&rs->lock);
    /* Relaxed: a statistic (cr_server_stats reads it relaxed). */
    __atomic_fetch_sub(rs->env->open_connections, 1, __ATOMIC_RELAXED);
    rconn_put(rc);
    if (done)
        finish_stop(rs);
}

/*
 * After cr__conn_handle: records the new wait, fixes the timer and re-arms
 * the handle, or says to close. The re-arm is the last use of rc: another
 * thread may take its next event at once.
 */
static bool settle(struct cr__reactive_conn *rc, enum cr__conn_next next)
{
    uint64_t deadline = cr__conn_deadline(rc->conn);
    bool idle = next == CR__CONN_READ && cr__conn_is_idle(rc->conn);
    int err;

    cr_lock_lock(&rc->lock);
    rc->busy = false;
    rc->idle = idle;
    rc->wait_for = next == CR__CONN_WRITE ? POLLOUT : POLLIN;
    rc->deadline = deadline;
    /* stopping is read under rc->lock: either cr__reactive_stop's walk saw
     * busy and left rc to us, or it comes after and sees idle. */
    if (rc->expired || (idle && is_stopping(rc->rs))) {
        cr_lock_unlock(&rc->lock);
        return false;
    }
    if (deadline != 0 && (rc->timer_id == 0 || deadline < rc->timer_at)) {
        if (rc->timer_id != 0 && cr_reactor_timer_cancel(rc->r, rc->timer_id) == 0)
            rconn_put_held(rc);
        rc->timer_id = 0;
        arm_timer(rc, cr_clock_now_ns());
    }
    cr_lock_unlock(&rc->lock);
    if (rc->registered) {
        err = cr_reactor_rearm(rc->r, rc->fd, next == CR__CONN_WRITE ? CR_EV_WRITE : CR_EV_READ,
                               !cr__conn_would_block(rc->conn));
    } else {
        rc->registered = true; /* before: once added, another thread may run */
        /* A new registration reports what is ready already. */
        err = cr_reactor_add(rc->r, rc->fd, next == CR__CONN_WRITE ? CR_EV_WRITE : CR_EV_READ,
                             CR_REACTOR_ONESHOT | CR_REACTOR_EDGE, on_conn_event, rc);
        if (err < 0)
            rc->registered = false;
    }
    if (err < 0) {
        /* Not armed, so no event can come: ours to close. */
        CR_LOG(CR_LOG_WARN, "re-arming connection fd %d: %s", rc->fd, strerror(-err));
        return false;
    }
    return true;
}

void cr__reactive_handle(struct cr__reactive_conn *rc, unsigned events)
{
    struct cr__reactive *rs = rc->rs;
    enum cr__conn_next next;
    bool expired;

    cr_lock_lock(&rc->lock);
    expired = rc->expired;
    rc->busy = !expired;
    cr_lock_unlock(&rc->lock);
    if (expired) {
        close_conn(rc);
        return;
    }
    next = cr__conn_handle(rc->conn, events, rs->worker != NULL ? rs->worker(rs->arg) : 0);
    if (next == CR__CONN_CLOSE || !settle(rc, next))
        close_conn(rc);
}

static void on_conn_event(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct cr__reactive_conn *rc = arg;
    struct cr__reactive *rs = rc->rs;

    CR_UNUSED(r);
    CR_UNUSED(fd);
    /* After defer, rc is the model's to hand to cr__reactive_handle. */
    if (rs->defer != NULL)
        rs->defer(rc, events, rs->arg);
    else
        cr__reactive_handle(rc, events);
}

static void on_accept(struct cr_acceptor *a, int fd, void *arg)
{
    struct accept_slot *slot = arg;
    struct cr__reactive *rs = slot->rs;
    struct cr_conn *conn;
    struct cr__reactive_conn *rc;
    int err;

    CR_UNUSED(a);
    /* Relaxed: statistics. */
    __atomic_fetch_add(rs->env->accepted, 1, __ATOMIC_RELAXED);
    if (is_stopping(rs)) {
        close(fd);
        return;
    }
    err = cr__conn_create(&conn, fd, &rs->env->conn);
    if (err < 0) {
        CR_LOG(err == -ENOMEM ? CR_LOG_WARN : CR_LOG_DEBUG, "connection refused: %s",
               strerror(-err));
        return;
    }
    rc = calloc(1, sizeof(*rc));
    if (rc == NULL || cr_lock_init(&rc->lock) < 0) {
        CR_LOG(CR_LOG_WARN, "connection dropped: out of memory");
        free(rc);
        cr__conn_destroy(conn);
        return;
    }
    rc->rs = rs;
    rc->r = slot->r;
    rc->conn = conn;
    rc->fd = fd;
    rc->refs = 1;
    rc->idle = true;
    rc->wait_for = POLLIN;
    rc->deadline = cr__conn_deadline(conn);
    __atomic_fetch_add(rs->env->open_connections, 1, __ATOMIC_RELAXED);

    /* Listed before it is registered: once registered another thread may
     * handle and close it. */
    cr_lock_lock(&rs->lock);
    rc->next = rs->conns;
    if (rs->conns != NULL)
        rs->conns->prev = rc;
    rs->conns = rc;
    rs->live++;
    if (!rs->limit_paused && rs->live >= rs->max_connections) {
        rs->limit_paused = true;
        set_accepting(rs, false);
    }
    cr_lock_lock(&rc->lock);
    /* A graceful stop that walked the list before rc joined it. */
    if (is_stopping(rs))
        expire(rc);
    else if (rc->deadline != 0 && !rs->optimistic)
        arm_timer(rc, cr_clock_now_ns());
    cr_lock_unlock(&rc->lock);
    cr_lock_unlock(&rs->lock);

    /* With TCP_DEFER_ACCEPT the request is here already: read it at once,
     * which spares a registration, a wait and (Connection: close) a removal;
     * settle registers what still has to wait, and arms its timer. Without
     * it, the request is usually a moment behind the handshake, and the read
     * would be an EAGAIN. hshr defers connections to its workers. */
    if (rs->optimistic) {
        cr__reactive_handle(rc, CR_EV_READ);
        return;
    }
    rc->registered = true;
    err = cr_reactor_add(slot->r, fd, CR_EV_READ, CR_REACTOR_ONESHOT | CR_REACTOR_EDGE,
                         on_conn_event, rc);
    if (err < 0) {
        rc->registered = false;
        CR_LOG(CR_LOG_WARN, "registering connection fd %d: %s", fd, strerror(-err));
        close_conn(rc);
    }
}

/* ------------------------------------------------------------------ stop */

static void on_grace_timer(struct cr_reactor *r, uint64_t timer_id, void *arg)
{
    struct cr__reactive *rs = arg;
    bool mine;

    CR_UNUSED(r);
    cr_lock_lock(&rs->lock);
    mine = rs->grace_armed && rs->grace_timer == timer_id;
    rs->grace_armed = false;
    cr_lock_unlock(&rs->lock);
    if (mine) {
        CR_LOG(CR_LOG_INFO, "graceful stop: %u connections still busy after %llu ms",
               cr__reactive_connections(rs), (unsigned long long)rs->grace_ms);
        finish_stop(rs);
    }
}

void cr__reactive_stop(struct cr__reactive *rs, bool graceful)
{
    bool done;

    cr_lock_lock(&rs->lock);
    /* Release: pairs with the acquire in is_stopping. */
    __atomic_store_n(&rs->stopping, 1, __ATOMIC_RELEASE);
    if (!rs->limit_paused) {
        rs->limit_paused = true; /* never resumed now */
        set_accepting(rs, false);
    }
    if (graceful) {
        for (struct cr__reactive_conn *rc = rs->conns; rc != NULL; rc = rc->next) {
            cr_lock_lock(&rc->lock);
            if (!rc->busy && rc->idle)
                expire(rc);
            cr_lock_unlock(&rc->lock);
        }
    }
    done = !graceful || rs->live == 0;
    if (!done && !rs->grace_armed) {
        int err = cr_reactor_timer_add(rs->grace_reactor, rs->grace_ms, on_grace_timer, rs,
                                       &rs->grace_timer);

        if (err < 0) {
            CR_LOG(CR_LOG_WARN, "graceful stop timer: %s; stopping at once", strerror(-err));
            done = true;
        } else {
            rs->grace_armed = true;
        }
    }
    cr_lock_unlock(&rs->lock);
    if (done)
        finish_stop(rs);
}

uint64_t cr__reactive_accepted(const struct cr__reactive *rs, unsigned reactor)
{
    uint64_t sum = 0;

    /* The slots are immutable after create; each count is a relaxed load. */
    for (unsigned i = 0; i < rs->nslots; i++) {
        if (rs->slots[i].reactor == reactor)
            sum += cr_acceptor_accepted(rs->slots[i].a);
    }
    return sum;
}

unsigned cr__reactive_connections(const struct cr__reactive *rs)
{
    struct cr__reactive *m = (struct cr__reactive *)rs; /* the lock only */
    unsigned live;

    cr_lock_lock(&m->lock);
    live = m->live;
    cr_lock_unlock(&m->lock);
    return live;
}

/* ------------------------------------------------------------------ lifecycle */

int cr__reactive_create(struct cr__reactive **out, const struct cr__reactive_config *cfg)
{
    const struct cr_model_env *env = cfg->env;
    struct cr__reactive *rs;
    int err;

    *out = NULL;
    if (cfg->nreactors == 0 || cfg->reactors == NULL || env == NULL)
        return -EINVAL;
    /* Grouped listeners: one group of sockets per reactor. */
    if (env->listen_groups > 1 && env->listen_groups != cfg->nreactors)
        return -EINVAL;
    rs = calloc(1, sizeof(*rs));
    if (rs == NULL)
        return -ENOMEM;
    rs->env = env;
    rs->worker = cfg->worker;
    rs->stopped = cfg->stopped;
    rs->defer = cfg->defer;
    rs->arg = cfg->arg;
    rs->grace_ms = cfg->grace_ms != 0 ? cfg->grace_ms : CR__REACTIVE_GRACE_MS;
    rs->max_connections =
        env->cfg->max_connections > 0 ? (unsigned)env->cfg->max_connections : UINT32_MAX;
    rs->optimistic = env->cfg->defer_accept_s != 0 && cfg->defer == NULL;
    rs->grace_reactor = cfg->reactors[0];
    err = cr_lock_init(&rs->lock);
    if (err < 0)
        goto out_free;
    rs->slots = calloc((size_t)cfg->nreactors * env->nlisten + 1, sizeof(*rs->slots));
    if (rs->slots == NULL) {
        err = -ENOMEM;
        goto out_fini_lock;
    }
    for (unsigned i = 0; i < cfg->nreactors; i++) {
        /* Reactor i's own copies, or the sockets every reactor shares. */
        const int *fds = env->listen_fds + (env->listen_groups > 1 ? i * env->nlisten : 0);

        for (unsigned j = 0; j < env->nlisten; j++) {
            struct accept_slot *slot = &rs->slots[rs->nslots];
            struct cr_acceptor_config acfg = {.listen_fd = fds[j]};

            slot->rs = rs;
            slot->r = cfg->reactors[i];
            slot->reactor = i;
            err = cr_acceptor_create(&slot->a, slot->r, &acfg, on_accept, slot);
            if (err < 0)
                goto out_destroy_acceptors;
            rs->nslots++;
        }
    }
    *out = rs;
    return 0;

out_destroy_acceptors:
    for (unsigned i = 0; i < rs->nslots; i++)
        cr_acceptor_destroy(rs->slots[i].a);
    free(rs->slots);
out_fini_lock:
    cr_lock_fini(&rs->lock);
out_free:
    free(rs);
    return err;
}

void cr__reactive_destroy(struct cr__reactive *rs)
{
    if (rs == NULL)
        return;
    for (unsigned i = 0; i < rs->nslots; i++)
        cr_acceptor_destroy(rs->slots[i].a);
    rs->nslots = 0;
    __atomic_store_n(&rs->stopping, 1, __ATOMIC_RELEASE);
    while (rs->conns != NULL) {
        struct cr__reactive_conn *rc = rs->conns;

        /* No thread dispatches any more, so a timer is either pending (and
         * cancelled here) or was dispatched: only the list's reference is
         * left. Setting it outright also covers a timer taken and never
         * dispatched, which would otherwise keep rc forever. */
        if (rc->timer_id != 0 && cr_reactor_timer_cancel(rc->r, rc->timer_id) < 0)
            CR_LOG(CR_LOG_DEBUG, "connection timer taken and never dispatched");
        rc->timer_id = 0;
        rc->refs = 1;
        close_conn(rc);
    }
    if (rs->grace_armed && cr_reactor_timer_cancel(rs->grace_reactor, rs->grace_timer) < 0)
        CR_LOG(CR_LOG_DEBUG, "grace timer taken and never dispatched");
    free(rs->slots);
    cr_lock_fini(&rs->lock);
    free(rs);
}
