/*
 * reactor.c - the Reactor's demultiplexer: the table of handles indexed by
 * fd over a cr_handle_set, taking one event at a time (due timers first,
 * reactor_timers.c), dispatching it, and wake-up. Signals arrive as one
 * more handle (reactor_signals.c). Used by every reactive model (reactor,
 * lf, hshr) and by the acceptor. One thread at a time waits (the leader);
 * every other function may run on any thread meanwhile. Owns the handle
 * set, the table and the batch of fetched events; borrows the handlers'
 * arguments. The lock: reactor_state_internal.h.
 *
 * Why generations: a wait may fetch a batch of events, and under
 * Leader/Followers the rest of a batch is dispatched by later leaders. By
 * then a handle may have been removed, its fd closed and reused by a new
 * registration. Each registration gets a fresh 32-bit generation, passed to
 * the handle set as the event's tag; an event whose tag no longer matches the
 * table, or whose handle is deactivated, is dropped when it is taken. So no
 * handle is dispatched twice and no stale event reaches a new handler.
 *
 * Edge-triggered one-shot (CR_REACTOR_EDGE, where the handle set has edge
 * triggering): the fd is registered once for everything, edge-triggered, and
 * the one-shot is kept here: taking an event disarms the entry, re-arming
 * (modify, reactivate, rearm) sets `armed` and the interest, and makes no
 * system call - one per request fewer for a connection. An event that comes
 * while the entry is disarmed or waits for something else is kept in
 * `missed`; a re-arm for something missed, or one whose caller says the fd
 * may still be ready (it stopped short of EAGAIN), queues the entry on the
 * ready list, which take() serves before it waits. The caller's part: re-arm
 * only once the fd would block for what it re-arms for, or say it may not.
 */
#include <cabrank/clock.h>
#include <cabrank/reactor.h>

#include "demux/handle_set_internal.h"
#include "demux/reactor_internal.h"
#include "demux/reactor_state_internal.h"
#include "os/clock_internal.h"

#include <stdlib.h>
#include <string.h>

/* A window that grows starts at its ceiling / this, and one that shrinks
 * below it closes. */
#define POLL_GROW_START 4
#define DEFAULT_BATCH   64
#define MAX_BATCH       256

struct handler_entry {
    cr_reactor_handler_fn *fn;
    void *arg;
    unsigned interest;
    unsigned flags;
    uint32_t gen;    /* 0: not registered */
    bool armed;      /* included in the wait */
    bool edge;       /* edge-triggered one-shot (see the top of the file) */
    bool queued;     /* edge: on the ready list */
    unsigned missed; /* edge: events that came while it could not take them */
};

/* An entry on the ready list (edge): the generation drops a stale one. */
struct ready_item {
    int fd;
    uint32_t gen;
};

/* ------------------------------------------------------------------ table */

static int ensure_table(struct cr_reactor *r, int fd)
{
    size_t len = r->table_len ? r->table_len : 64;
    struct handler_entry *t;

    cr_lock_assert_held(&r->lock);
    if ((size_t)fd < r->table_len)
        return 0;
    while (len <= (size_t)fd)
        len *= 2;
    t = realloc(r->table, len * sizeof(*t));
    if (t == NULL)
        return -ENOMEM;
    memset(t + r->table_len, 0, (len - r->table_len) * sizeof(*t));
    r->table = t;
    r->table_len = len;
    return 0;
}

/* The registered entry of fd, or NULL. */
static struct handler_entry *find_entry(struct cr_reactor *r, int fd)
{
    cr_lock_assert_held(&r->lock);
    if (fd < 0 || (size_t)fd >= r->table_len || r->table[fd].gen == 0)
        return NULL;
    return &r->table[fd];
}

static unsigned hs_flags(const struct handler_entry *e)
{
    if (e->edge)
        return CR_HS_EDGE;
    return (e->flags & CR_REACTOR_ONESHOT) ? CR_HS_ONESHOT : 0;
}

/* What an edge entry can take now: its interest, and hang-ups and errors. */
static unsigned takes(const struct handler_entry *e)
{
    return e->interest | CR_EV_HUP | CR_EV_ERR;
}

int cr__reactor_add_locked(struct cr_reactor *r, int fd, unsigned interest, unsigned flags,
                           cr_reactor_handler_fn *fn, void *arg)
{
    struct handler_entry *e;
    int err;

    cr_lock_assert_held(&r->lock);
    err = ensure_table(r, fd);
    if (err < 0)
        return err;
    e = &r->table[fd];
    if (e->gen != 0)
        return -EEXIST;
    if (++r->next_gen == 0)
        r->next_gen = 1;
    e->fn = fn;
    e->arg = arg;
    e->interest = interest;
    e->flags = flags;
    e->armed = true;
    e->edge = (flags & CR_REACTOR_EDGE) && cr_handle_set_has_edge(r->hs);
    e->gen = r->next_gen;
    /* Edge: registered for everything once; `interest` filters here. */
    err = cr_handle_set_add(r->hs, fd, e->edge ? CR_EV_READ | CR_EV_WRITE : interest, hs_flags(e),
                            e->gen);
    if (err < 0)
        memset(e, 0, sizeof(*e));
    return err;
}

static int remove_locked(struct cr_reactor *r, int fd)
{
    struct handler_entry *e = find_entry(r, fd);
    int err;

    if (e == NULL)
        return -ENOENT;
    memset(e, 0, sizeof(*e));
    err = cr_handle_set_remove(r->hs, fd);
    /* A caller that closed the fd first already took it out of an epoll set;
     * the registration is gone either way. */
    return err == -ENOENT || err == -EBADF ? 0 : err;
}

/* ------------------------------------------------------------------ lifecycle */

int cr_reactor_create(struct cr_reactor **out, const struct cr_reactor_config *cfg)
{
    struct cr_reactor *r;
    int err;

    *out = NULL;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return -ENOMEM;
    r->batch = cfg != NULL && cfg->batch > 0 ? cfg->batch : DEFAULT_BATCH;
    if (r->batch > MAX_BATCH)
        r->batch = MAX_BATCH;
    r->busy_poll_ns = cfg != NULL ? (uint64_t)cfg->busy_poll_us * 1000 : 0;
    /* Open wide: the first idle gaps teach it how far to close. */
    r->poll_window = r->busy_poll_ns;
    cr__reactor_timers_init(r);
    cr__reactor_signals_init(r);
    r->pending = calloc((size_t)r->batch, sizeof(*r->pending));
    if (r->pending == NULL) {
        err = -ENOMEM;
        goto out_free;
    }
    err = cr_lock_init(&r->lock);
    if (err < 0)
        goto out_free_pending;
    err = cr_handle_set_open(&r->hs, cfg != NULL ? cfg->backend : NULL);
    if (err < 0)
        goto out_fini_lock;
    *out = r;
    return 0;

out_fini_lock:
    cr_lock_fini(&r->lock);
out_free_pending:
    free(r->pending);
out_free:
    free(r);
    return err;
}

void cr_reactor_destroy(struct cr_reactor *r)
{
    if (r == NULL)
        return;
    cr__reactor_signals_fini(r);
    cr_handle_set_close(r->hs);
    cr_lock_fini(&r->lock);
    free(r->table);
    cr__reactor_timers_fini(r);
    free(r->pending);
    free(r->ready);
    free(r);
}

unsigned cr__reactor_fds(const struct cr_reactor *r, int *fds)
{
    unsigned n = cr__handle_set_fds(r->hs, fds);

    if (r->sigfd >= 0)
        fds[n++] = r->sigfd;
    return n;
}

const char *cr_reactor_backend(const struct cr_reactor *r)
{
    return cr_handle_set_name(r->hs);
}

/* ------------------------------------------------------------------ handles */

int cr_reactor_add(struct cr_reactor *r, int fd, unsigned interest, unsigned flags,
                   cr_reactor_handler_fn *fn, void *arg)
{
    int err;

    if (fd < 0)
        return -EBADF;
    if (fn == NULL || (flags & ~(CR_REACTOR_ONESHOT | CR_REACTOR_EDGE)) != 0 ||
        (flags & CR_REACTOR_EDGE && !(flags & CR_REACTOR_ONESHOT)))
        return -EINVAL;
    cr_lock_lock(&r->lock);
    err = cr__reactor_add_locked(r, fd, interest, flags, fn, arg);
    cr_lock_unlock(&r->lock);
    return err;
}

/* Puts edge entry e of fd on the ready list, once. Caller holds r->lock. */
static int queue_ready(struct cr_reactor *r, int fd, struct handler_entry *e)
{
    if (e->queued)
        return 0;
    if (r->ready_pos == r->ready_len)
        r->ready_pos = r->ready_len = 0;
    if (r->ready_len == r->ready_cap) {
        size_t cap = r->ready_cap != 0 ? r->ready_cap * 2 : 64;
        struct ready_item *a = realloc(r->ready, cap * sizeof(*a));

        if (a == NULL)
            return -ENOMEM;
        r->ready = a;
        r->ready_cap = cap;
    }
    r->ready[r->ready_len++] = (struct ready_item){.fd = fd, .gen = e->gen};
    e->queued = true;
    return 0;
}

/*
 * Re-arms e with the handle set, with a new interest when asked. Edge: no
 * system call; onto the ready list if it missed what it now waits for or
 * may still be ready, and *wake when a thread waits meanwhile. Caller holds
 * r->lock.
 */
static int arm(struct cr_reactor *r, int fd, struct handler_entry *e, bool maybe_ready, bool *wake)
{
    e->armed = true;
    if (!e->edge)
        return cr_handle_set_modify(r->hs, fd, e->interest, hs_flags(e), e->gen);
    if (maybe_ready)
        e->missed |= e->interest;
    if ((e->missed & takes(e)) == 0)
        return 0;
    *wake = r->waiting;
    return queue_ready(r, fd, e);
}

int cr_reactor_rearm(struct cr_reactor *r, int fd, unsigned interest, bool maybe_ready)
{
    struct handler_entry *e;
    bool wake = false;
    int err = -ENOENT;

    cr_lock_lock(&r->lock);
    e = find_entry(r, fd);
    if (e != NULL) {
        e->interest = interest;
        err = arm(r, fd, e, maybe_ready, &wake);
    }
    cr_lock_unlock(&r->lock);
    if (wake)
        cr_handle_set_wake(r->hs);
    return err;
}

int cr_reactor_modify(struct cr_reactor *r, int fd, unsigned interest)
{
    return cr_reactor_rearm(r, fd, interest, false);
}

int cr_reactor_remove(struct cr_reactor *r, int fd)
{
    int err;

    cr_lock_lock(&r->lock);
    err = remove_locked(r, fd);
    cr_lock_unlock(&r->lock);
    return err;
}

int cr_reactor_deactivate(struct cr_reactor *r, int fd)
{
    struct handler_entry *e;
    int err = -ENOENT;

    cr_lock_lock(&r->lock);
    e = find_entry(r, fd);
    if (e != NULL) {
        e->armed = false;
        /* One-shot with no interest: at most one hang-up can still come, and
         * `armed` drops it; a level-triggered one would come back forever.
         * Edge: `armed` alone, what comes meanwhile is missed. */
        err = e->edge ? 0 : cr_handle_set_modify(r->hs, fd, 0, CR_HS_ONESHOT, e->gen);
    }
    cr_lock_unlock(&r->lock);
    return err;
}

int cr_reactor_reactivate(struct cr_reactor *r, int fd)
{
    struct handler_entry *e;
    bool wake = false;
    int err = -ENOENT;

    cr_lock_lock(&r->lock);
    e = find_entry(r, fd);
    if (e != NULL)
        err = arm(r, fd, e, false, &wake);
    cr_lock_unlock(&r->lock);
    if (wake)
        cr_handle_set_wake(r->hs);
    return err;
}

/* ------------------------------------------------------------------ waiting */

void cr_reactor_wake(struct cr_reactor *r)
{
    cr_lock_lock(&r->lock);
    r->wake_requested = true;
    cr_lock_unlock(&r->lock);
    cr_handle_set_wake(r->hs);
}

void cr_reactor_stop(struct cr_reactor *r)
{
    __atomic_store_n(&r->stopped, 1, __ATOMIC_RELEASE);
    cr_reactor_wake(r);
}

bool cr_reactor_is_stopped(const struct cr_reactor *r)
{
    return __atomic_load_n(&r->stopped, __ATOMIC_ACQUIRE) != 0;
}

static void fill_fd_event(struct cr_reactor_event *ev, int fd, unsigned events,
                          const struct handler_entry *e)
{
    ev->kind = CR__REACTOR_KIND_FD;
    ev->fd = fd;
    ev->events = events;
    ev->timer_id = 0;
    ev->handler = e->fn;
    ev->timer = NULL;
    ev->arg = e->arg;
}

/* Takes the next valid event of the pending batch into ev. */
static bool take_pending(struct cr_reactor *r, struct cr_reactor_event *ev)
{
    while (r->pending_pos < r->pending_len) {
        const struct cr_handle_event *he = &r->pending[r->pending_pos++];
        struct handler_entry *e = find_entry(r, he->fd);
        unsigned events = he->events;

        if (e == NULL || e->gen != he->tag)
            continue; /* removed or replaced since the wait */
        if (e->edge) {
            events |= e->missed;
            if (!e->armed || (events & takes(e)) == 0) {
                e->missed = events; /* the edge will not come again */
                continue;
            }
            e->missed = 0;
        } else if (!e->armed) {
            continue; /* deactivated since the wait */
        }
        if (e->flags & CR_REACTOR_ONESHOT)
            e->armed = false;
        fill_fd_event(ev, he->fd, events, e);
        return true;
    }
    return false;
}

/* Takes the first entry of the ready list (edge) that is still armed. */
static bool take_ready(struct cr_reactor *r, struct cr_reactor_event *ev)
{
    while (r->ready_pos < r->ready_len) {
        struct ready_item it = r->ready[r->ready_pos++];
        struct handler_entry *e = find_entry(r, it.fd);
        unsigned events;

        if (e == NULL || e->gen != it.gen)
            continue; /* removed or replaced since it was queued */
        e->queued = false;
        events = e->missed;
        if (!e->armed || (events & takes(e)) == 0)
            continue; /* taken through the handle set meanwhile */
        e->missed = 0;
        e->armed = false;
        fill_fd_event(ev, it.fd, events, e);
        return true;
    }
    return false;
}

/* How long the handle set may sleep: until the caller's deadline or the next
 * timer, whichever is first. CR__REACTOR_NO_DEADLINE means forever. */
static int wait_ms(const struct cr_reactor *r, uint64_t now, uint64_t deadline, uint64_t *until)
{
    uint64_t d = deadline;
    uint64_t first = cr__reactor_timer_first(r);

    if (first < d)
        d = first;
    *until = d;
    if (d == CR__REACTOR_NO_DEADLINE)
        return -1;
    if (d <= now)
        return 0;
    /* Round up: waking a little late is fine, waking early costs a loop. */
    return (int)((d - now + CR_NSEC_PER_MSEC - 1) / CR_NSEC_PER_MSEC);
}

/*
 * The poll window after an idle gap of idle ns (from when a wait found
 * nothing until something came), as KVM adapts its halt polling: keep a
 * window the gap fitted in; widen one that a longer poll would have
 * covered; narrow one that was polled in vain before a long sleep, down to
 * none. So a busy server polls across its short gaps, sparing whoever
 * makes it ready a wake-up, while an idle one, or one whose clients pause
 * longer than max, soon sleeps at once.
 */
uint64_t cr__reactor_poll_window(uint64_t window, uint64_t max, uint64_t idle)
{
    uint64_t start = max / POLL_GROW_START;

    if (idle <= window)
        return window;
    if (idle <= max) {
        window = window < start ? start : window * 2;
        return window < max ? window : max;
    }
    window /= 2;
    return window < start ? 0 : window;
}

uint64_t cr__reactor_poll_window_now(struct cr_reactor *r)
{
    uint64_t w;

    cr_lock_lock(&r->lock);
    w = r->poll_window;
    cr_lock_unlock(&r->lock);
    return w;
}

/* When the fetched events still untaken were fetched, or 0 if none are.
 * Caller holds r->lock. */
static uint64_t backlog_since_locked(const struct cr_reactor *r)
{
    return r->pending_pos < r->pending_len ? r->pending_at : 0;
}

/* A wait that began at idle_from (0: none did) has ended at now. */
static void end_idle(struct cr_reactor *r, uint64_t idle_from, uint64_t now)
{
    if (idle_from != 0 && r->busy_poll_ns != 0)
        r->poll_window = cr__reactor_poll_window(r->poll_window, r->busy_poll_ns, now - idle_from);
}

/*
 * The one taking routine: due timers first, then the pending batch, then (if
 * allowed) one wait. *nowp: the caller's fresh cr_clock_now_ns() reading, or
 * 0 to read one here; on return, the latest reading. Returns 1 with *ev, 0 on
 * timeout, wake-up or stop, or -errno.
 */
static int take(struct cr_reactor *r, int timeout_ms, bool may_wait, uint64_t *nowp,
                struct cr_reactor_event *ev)
{
    uint64_t now = *nowp;
    uint64_t deadline;
    uint64_t idle_from = 0; /* when this call first found nothing to take */
    int found = 0;
    int n;

    if (now == 0)
        now = cr_clock_now_ns();
    deadline =
        timeout_ms < 0 ? CR__REACTOR_NO_DEADLINE : now + (uint64_t)timeout_ms * CR_NSEC_PER_MSEC;
    cr_lock_lock(&r->lock);
    for (;;) {
        uint64_t until;
        bool poll;
        int ms;

        if (cr__reactor_timer_take(r, now, ev) || take_pending(r, ev) || take_ready(r, ev)) {
            ev->taken_ns = now; /* the handler's event time */
            ev->backlog_ns = backlog_since_locked(r);
            found = 1;
            break;
        }
        if (!may_wait || cr_reactor_is_stopped(r) || now >= deadline)
            break;
        if (r->wake_requested) {
            r->wake_requested = false;
            break;
        }
        ms = wait_ms(r, now, deadline, &until);
        if (idle_from == 0)
            idle_from = now;
        /* Busy poll: a wait that does not sleep, then this loop again, so
         * timers, the ready list and wake-ups are seen here without the
         * eventfd (waiting stays false: nobody needs to write it). */
        poll = ms != 0 && now - idle_from < r->poll_window;
        r->waiting = !poll;
        r->wait_until = until;
        cr_lock_unlock(&r->lock);
        /* The wait counts from the take's reading: none is read for it. */
        n = cr__handle_set_wait(r->hs, r->pending, r->batch, poll ? 0 : ms, now);
        cr_lock_lock(&r->lock);
        r->waiting = false;
        if (n < 0) {
            found = n;
            break;
        }
        r->pending_len = n;
        r->pending_pos = 0;
        now = cr_clock_now_ns();
        r->pending_at = now;
    }
    end_idle(r, idle_from, now);
    cr_lock_unlock(&r->lock);
    *nowp = now;
    return found;
}

uint64_t cr__reactor_backlog_since(struct cr_reactor *r)
{
    uint64_t since;

    cr_lock_lock(&r->lock);
    since = backlog_since_locked(r);
    cr_lock_unlock(&r->lock);
    return since;
}

int cr_reactor_next(struct cr_reactor *r, int timeout_ms, struct cr_reactor_event *ev)
{
    uint64_t now = 0;

    return take(r, timeout_ms, true, &now, ev);
}

int cr__reactor_take(struct cr_reactor *r, int timeout_ms, bool may_wait, uint64_t *now,
                     struct cr_reactor_event *ev)
{
    return take(r, timeout_ms, may_wait, now, ev);
}

void cr_reactor_dispatch(struct cr_reactor *r, const struct cr_reactor_event *ev)
{
    uint64_t outer = cr__clock_event_enter(ev->taken_ns);

    if (ev->kind == CR__REACTOR_KIND_FD)
        ev->handler(r, ev->fd, ev->events, ev->arg);
    else if (ev->kind == CR__REACTOR_KIND_TIMER)
        ev->timer(r, ev->timer_id, ev->arg);
    cr__clock_event_leave(outer);
}

int cr_reactor_handle_events(struct cr_reactor *r, int timeout_ms, unsigned mode)
{
    struct cr_reactor_event ev;
    uint64_t now = 0;
    int count = 0;
    int n;

    n = take(r, timeout_ms, true, &now, &ev);
    if (n <= 0)
        return n;
    for (;;) {
        cr_reactor_dispatch(r, &ev);
        count++;
        if (mode & CR_REACTOR_ONE)
            break;
        /* Only what is already ready: no second wait in one call. The
         * handler took time: a new reading. */
        now = 0;
        if (take(r, 0, false, &now, &ev) <= 0)
            break;
    }
    return count;
}

int cr_reactor_run(struct cr_reactor *r)
{
    while (!cr_reactor_is_stopped(r)) {
        int n = cr_reactor_handle_events(r, -1, 0);

        if (n < 0)
            return n;
    }
    return 0;
}
