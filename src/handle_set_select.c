/*
 * handle_set_select.c - the select(2) backend, for comparison with poll and
 * epoll and for systems that have nothing better. Like the poll backend it
 * keeps the registrations itself: a table indexed by fd (grown on demand by
 * add) under one mutex. Each wait fills fd_sets owned by the waiting thread
 * from the armed entries, selects without the lock, then translates the
 * results under the lock, dropping any whose registration changed meanwhile.
 * An eventfd in the read set wakes the waiter both for cr_handle_set_wake()
 * and after add/modify/remove, so the waiter rebuilds its sets and a handle
 * added while it waits is watched by that wait.
 *
 * An fd_set holds only fds below FD_SETSIZE: add refuses others with -EINVAL
 * and never FD_SETs them (that would write past the set).
 *
 * What select can report is less than the contract asks, and this is all of it:
 * - READ interest puts the fd in readfds and exceptfds; either reports
 *   CR_EV_READ (exceptfds is POLLPRI on Linux, which epoll also reports as
 *   READ). End of file, hang-up and a pending error all look readable, so they
 *   come as CR_EV_READ; the caller's read() tells them apart.
 * - WRITE interest puts the fd in writefds; writable, an error, or a peer that
 *   stopped reading come as CR_EV_WRITE.
 * - CR_EV_HUP and CR_EV_ERR are never reported, except CR_EV_ERR for a
 *   registered fd that was closed without remove (select fails with EBADF;
 *   the wait finds the fd and reports it, as poll does with POLLNVAL).
 * - A handle with an empty interest mask is not watched: putting it in
 *   readfds to see a hang-up would also report it readable, on every wait,
 *   whenever data waits unread.
 *
 * Lock order: s->lock is a leaf; nothing else is locked while it is held.
 * Any thread calls add/modify/remove/wake; one thread at a time calls wait.
 */
#include "handle_set_internal.h"

#include "os/sync_internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <unistd.h>

/* First size of the registration table; it doubles from there as fds need. */
#define SELECT_TABLE_MIN 64

/* One registration. Every add/modify/remove bumps gen, so a waiter can tell
 * whether the entry it selected on is still the one in the table. */
struct select_reg {
    uint32_t tag;
    uint32_t gen;
    unsigned interest;
    unsigned flags;
    bool registered;
    /* False once a one-shot handle has been reported, until modify. */
    bool armed;
};

struct select_set {
    struct cr_handle_set base;
    /* Immutable after open; below FD_SETSIZE. */
    int wakefd;

    struct cr_mutex lock;
    /* Protected by lock. */
    struct select_reg *regs; /* indexed by fd; cap entries, cap <= FD_SETSIZE */
    size_t cap;
    /* True between building the fd_sets and translating their results; a
     * change to the table then writes wakefd so the waiter rebuilds. */
    bool waiting;

    /* Set by cr_handle_set_wake() before it writes wakefd (release), taken
     * by the waiter with an acquire exchange, so a wait returns early only for
     * an explicit wake-up and simply rebuilds after a table change. */
    int wake_pending;

    /* Owned by the waiting thread (one at a time, by contract). gens[fd] is
     * the gen of fd's entry when the sets were built; nfds is select's first
     * argument. */
    fd_set rd;
    fd_set wr;
    fd_set ex;
    uint32_t gens[FD_SETSIZE];
    int nfds;
    /* fd where translation starts: just past the last one reported, so a
     * small max does not starve the fds after it. */
    int rotor;
};

/* The entry of a registered fd, or NULL. Caller holds s->lock. */
static struct select_reg *find_reg(struct select_set *s, int fd)
{
    cr_mutex_assert_held(&s->lock);
    if ((size_t)fd >= s->cap || !s->regs[fd].registered)
        return NULL;
    return &s->regs[fd];
}

/* Makes the table hold fd, which is below FD_SETSIZE. Caller holds s->lock. */
static int grow_table(struct select_set *s, int fd)
{
    size_t cap = s->cap < SELECT_TABLE_MIN ? SELECT_TABLE_MIN : s->cap;
    struct select_reg *regs;

    cr_mutex_assert_held(&s->lock);
    assert(fd < FD_SETSIZE);
    if ((size_t)fd < s->cap)
        return 0;
    while (cap <= (size_t)fd)
        cap *= 2;
    if (cap > FD_SETSIZE)
        cap = FD_SETSIZE;
    regs = realloc(s->regs, cap * sizeof(*regs));
    if (regs == NULL)
        return -ENOMEM;
    memset(regs + s->cap, 0, (cap - s->cap) * sizeof(*regs));
    s->regs = regs;
    s->cap = cap;
    return 0;
}

static void write_wakefd(struct select_set *s)
{
    uint64_t one = 1;

    /* Fails only when the counter is saturated, which is a wake-up already. */
    if (write(s->wakefd, &one, sizeof(one)) < 0)
        return;
}

static void drain_wakefd(struct select_set *s)
{
    uint64_t v;

    /* EAGAIN only: the wake-up was consumed by an earlier read. */
    if (read(s->wakefd, &v, sizeof(v)) < 0)
        return;
}

/* Ends a table change: unlocks and, if a thread is selecting on sets built
 * from the old table, makes it rebuild. Caller holds s->lock. */
static void unlock_changed(struct select_set *s)
{
    bool waiting = s->waiting;

    cr_mutex_unlock(&s->lock);
    if (waiting)
        write_wakefd(s);
}

static int select_set_open(struct cr_handle_set **out)
{
    struct select_set *s;
    int err;

    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->base.ops = &cr__handle_set_select_ops;
    s->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->wakefd < 0) {
        err = -errno;
        goto out_free;
    }
    /* The lowest free fd is already this high: no fd_set can hold it. */
    if (s->wakefd >= FD_SETSIZE) {
        err = -EMFILE;
        goto out_close_wakefd;
    }
    err = cr_mutex_init(&s->lock);
    if (err < 0)
        goto out_close_wakefd;
    *out = &s->base;
    return 0;

out_close_wakefd:
    close(s->wakefd);
out_free:
    free(s);
    return err;
}

static void select_set_close(struct cr_handle_set *hs)
{
    struct select_set *s = (struct select_set *)hs;

    cr_mutex_fini(&s->lock);
    close(s->wakefd);
    free(s->regs);
    free(s);
}

static int select_set_add(struct cr_handle_set *hs, int fd, unsigned interest, unsigned flags,
                          uint32_t tag)
{
    struct select_set *s = (struct select_set *)hs;
    struct select_reg *r;
    int err;

    if (fd >= FD_SETSIZE)
        return -EINVAL;
    if (fd == s->wakefd)
        return -EEXIST; /* ours, never the caller's */
    cr_mutex_lock(&s->lock);
    if (find_reg(s, fd) != NULL) {
        cr_mutex_unlock(&s->lock);
        return -EEXIST;
    }
    err = grow_table(s, fd);
    if (err < 0) {
        cr_mutex_unlock(&s->lock);
        return err;
    }
    r = &s->regs[fd];
    r->tag = tag;
    r->gen++;
    r->interest = interest;
    r->flags = flags;
    r->registered = true;
    r->armed = true;
    unlock_changed(s);
    return 0;
}

static int select_set_modify(struct cr_handle_set *hs, int fd, unsigned interest, unsigned flags,
                             uint32_t tag)
{
    struct select_set *s = (struct select_set *)hs;
    struct select_reg *r;

    cr_mutex_lock(&s->lock);
    r = find_reg(s, fd);
    if (r == NULL) {
        cr_mutex_unlock(&s->lock);
        return -ENOENT;
    }
    r->tag = tag;
    r->gen++;
    r->interest = interest;
    r->flags = flags;
    r->armed = true;
    unlock_changed(s);
    return 0;
}

static int select_set_remove(struct cr_handle_set *hs, int fd)
{
    struct select_set *s = (struct select_set *)hs;
    struct select_reg *r;

    cr_mutex_lock(&s->lock);
    r = find_reg(s, fd);
    if (r == NULL) {
        cr_mutex_unlock(&s->lock);
        return -ENOENT;
    }
    r->gen++;
    r->registered = false;
    r->armed = false;
    unlock_changed(s);
    return 0;
}

/* Fills the waiter's fd_sets from the armed entries and marks the set as being
 * waited on. Caller holds s->lock. */
static void build_fd_sets(struct select_set *s)
{
    cr_mutex_assert_held(&s->lock);
    FD_ZERO(&s->rd);
    FD_ZERO(&s->wr);
    FD_ZERO(&s->ex);
    FD_SET(s->wakefd, &s->rd);
    s->nfds = s->wakefd + 1;
    /* cap <= FD_SETSIZE, so every fd here fits an fd_set. */
    for (size_t i = 0; i < s->cap; i++) {
        const struct select_reg *r = &s->regs[i];
        int fd = (int)i;

        if (!r->registered || !r->armed || r->interest == 0)
            continue;
        if (r->interest & CR_EV_READ) {
            FD_SET(fd, &s->rd);
            FD_SET(fd, &s->ex);
        }
        if (r->interest & CR_EV_WRITE)
            FD_SET(fd, &s->wr);
        s->gens[fd] = r->gen;
        if (fd >= s->nfds)
            s->nfds = fd + 1;
    }
    s->waiting = true;
}

/* Fills *ev for fd if its registration is the one selected on and armed, and
 * disarms it if one-shot. Returns the number of events filled, 1 or 0.
 * Caller holds s->lock. */
static int report(struct select_set *s, int fd, unsigned events, struct cr_handle_event *ev)
{
    struct select_reg *r = find_reg(s, fd);

    cr_mutex_assert_held(&s->lock);
    if (r == NULL || r->gen != s->gens[fd] || !r->armed)
        return 0;
    ev->fd = fd;
    ev->events = events;
    ev->tag = r->tag;
    if (r->flags & CR_HS_ONESHOT)
        r->armed = false;
    return 1;
}

/* Turns select's results into events, at most max, skipping entries that were
 * removed, changed or disarmed while the lock was free. Caller holds s->lock. */
static int translate(struct select_set *s, struct cr_handle_event *evs, int max)
{
    int start = s->rotor % s->nfds;
    int out = 0;

    cr_mutex_assert_held(&s->lock);
    for (int k = 0; k < s->nfds && out < max; k++) {
        int fd = (start + k) % s->nfds;
        unsigned events = 0;

        if (fd == s->wakefd)
            continue;
        if (FD_ISSET(fd, &s->rd) || FD_ISSET(fd, &s->ex))
            events |= CR_EV_READ;
        if (FD_ISSET(fd, &s->wr))
            events |= CR_EV_WRITE;
        if (events != 0 && report(s, fd, events, &evs[out])) {
            out++;
            s->rotor = fd + 1;
        }
    }
    return out;
}

/*
 * After select failed with EBADF: a registered fd was closed. If it was
 * removed first (remove, then close, while we waited), rebuilding drops it and
 * this reports nothing. If it is still registered, the caller closed it without
 * remove; it is reported as CR_EV_ERR on every wait, like POLLNVAL, until
 * removed. Returns the events filled, or -EBADF if our own eventfd is gone.
 * Caller holds s->lock.
 */
static int report_closed(struct select_set *s, struct cr_handle_event *evs, int max)
{
    int out = 0;

    cr_mutex_assert_held(&s->lock);
    if (fcntl(s->wakefd, F_GETFD) < 0)
        return -EBADF;
    for (int fd = 0; fd < s->nfds && out < max; fd++) {
        if (fd == s->wakefd || (!FD_ISSET(fd, &s->rd) && !FD_ISSET(fd, &s->wr)))
            continue;
        if (fcntl(fd, F_GETFD) < 0)
            out += report(s, fd, CR_EV_ERR, &evs[out]);
    }
    return out;
}

static int select_set_wait(struct cr_handle_set *hs, struct cr_handle_event *evs, int max,
                           int timeout_ms)
{
    struct select_set *s = (struct select_set *)hs;
    uint64_t deadline = cr__handle_set_deadline(timeout_ms);

    for (;;) {
        struct timeval tv;
        struct timeval *tvp = NULL;
        fd_set want_rd;
        fd_set want_wr;
        int ms;
        int n;
        int out;
        int err;
        bool woken;

        cr_mutex_lock(&s->lock);
        build_fd_sets(s);
        cr_mutex_unlock(&s->lock);
        /* select clears what is not ready; keep what was asked for EBADF. */
        want_rd = s->rd;
        want_wr = s->wr;
        /* A wake-up that came before this select: look, but do not block.
         * Pairs with the release store in select_set_wake(). */
        woken = __atomic_exchange_n(&s->wake_pending, 0, __ATOMIC_ACQUIRE);
        ms = woken ? 0 : cr__handle_set_remaining_ms(timeout_ms, deadline);
        if (ms >= 0) {
            tv.tv_sec = ms / 1000;
            tv.tv_usec = (ms % 1000) * 1000;
            tvp = &tv;
        }
        n = select(s->nfds, &s->rd, &s->wr, &s->ex, tvp);
        err = n < 0 ? -errno : 0;
        if (n > 0 && FD_ISSET(s->wakefd, &s->rd)) {
            drain_wakefd(s);
            /* Pairs with the release store in select_set_wake(). */
            woken |= __atomic_exchange_n(&s->wake_pending, 0, __ATOMIC_ACQUIRE);
        }
        cr_mutex_lock(&s->lock);
        s->waiting = false;
        out = 0;
        if (n > 0) {
            out = translate(s, evs, max);
        } else if (err == -EBADF) {
            s->rd = want_rd;
            s->wr = want_wr;
            out = report_closed(s, evs, max);
        }
        cr_mutex_unlock(&s->lock);
        if (err == -EINTR || err == -EBADF) {
            /* out: events, -EBADF, or 0 after a wake-up, which ends the wait. */
            if (out != 0 || woken)
                return out;
            continue;
        }
        if (err < 0)
            return err;
        /* n > 0 with nothing to report: a table change woke us, or every
         * result belonged to a changed registration. Select on the new table. */
        if (out > 0 || woken || n == 0)
            return out;
    }
}

static void select_set_wake(struct cr_handle_set *hs)
{
    struct select_set *s = (struct select_set *)hs;

    /* Pairs with the acquire exchanges in select_set_wait(). */
    __atomic_store_n(&s->wake_pending, 1, __ATOMIC_RELEASE);
    write_wakefd(s);
}

const struct cr_handle_set_ops cr__handle_set_select_ops = {
    .name = "select",
    .open = select_set_open,
    .close = select_set_close,
    .add = select_set_add,
    .modify = select_set_modify,
    .remove = select_set_remove,
    .wait = select_set_wait,
    .wake = select_set_wake,
};
