/*
 * handle_set_table.c - the registration table and wait protocol shared by the
 * poll and select backends (see handle_set_table_internal.h): an fd-indexed
 * table under one mutex, the eventfd that wakes the waiter, and the wait loop
 * around the backend's hooks. Runs on any thread that calls add/modify/remove/
 * wake and on the one thread that waits. Owns the table, the eventfd and the
 * memory of the backend's struct.
 *
 * Lock order: t->lock is a leaf; nothing else is locked while it is held.
 */
#include "demux/handle_set_table_internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* First size of the registration table; it doubles from there as fds need. */
#define TABLE_MIN 64

/* One registration. Every add/modify/remove bumps gen, so a waiter can tell
 * whether the entry it waited on is still the one in the table. */
struct cr_hs_reg {
    uint32_t tag;
    uint32_t gen;
    /* gen when the waiter last put the entry in its snapshot. Written only by
     * the waiter, but under the lock like the rest. */
    uint32_t snap_gen;
    unsigned interest;
    unsigned flags;
    bool registered;
    /* False once a one-shot handle has been reported, until modify. */
    bool armed;
};

/* The entry of a registered fd, or NULL. Caller holds t->lock. */
static struct cr_hs_reg *find_reg(struct cr_hs_table *t, int fd)
{
    cr_mutex_assert_held(&t->lock);
    if ((size_t)fd >= t->cap || !t->regs[fd].registered)
        return NULL;
    return &t->regs[fd];
}

/* Locks t and returns fd's entry; NULL, with t unlocked again, if fd is not
 * registered. */
static struct cr_hs_reg *lock_registered(struct cr_hs_table *t, int fd)
{
    struct cr_hs_reg *r;

    cr_mutex_lock(&t->lock);
    r = find_reg(t, fd);
    if (r == NULL)
        cr_mutex_unlock(&t->lock);
    return r;
}

/* Makes the table hold fd. Caller holds t->lock. */
static int grow_table(struct cr_hs_table *t, int fd)
{
    size_t cap = t->cap < TABLE_MIN ? TABLE_MIN : t->cap;
    struct cr_hs_reg *regs;

    cr_mutex_assert_held(&t->lock);
    if ((size_t)fd < t->cap)
        return 0;
    while (cap <= (size_t)fd)
        cap *= 2;
    regs = realloc(t->regs, cap * sizeof(*regs));
    if (regs == NULL)
        return -ENOMEM;
    memset(regs + t->cap, 0, (cap - t->cap) * sizeof(*regs));
    t->regs = regs;
    t->cap = cap;
    return 0;
}

/* Gives r a new registration, armed. Caller holds the table's lock. */
static void arm(struct cr_hs_reg *r, unsigned interest, unsigned flags, uint32_t tag)
{
    r->tag = tag;
    r->gen++;
    r->interest = interest;
    r->flags = flags;
    r->armed = true;
}

static void write_wakefd(struct cr_hs_table *t)
{
    uint64_t one = 1;

    /* Fails only when the counter is saturated, which is a wake-up already. */
    if (write(t->wakefd, &one, sizeof(one)) < 0)
        return;
}

static void drain_wakefd(struct cr_hs_table *t)
{
    uint64_t v;

    /* EAGAIN only: the wake-up was consumed by an earlier read. */
    if (read(t->wakefd, &v, sizeof(v)) < 0)
        return;
}

/* Ends a table change: unlocks and, if a thread is waiting on a snapshot of
 * the old table, makes it rebuild. Caller holds t->lock. */
static void unlock_changed(struct cr_hs_table *t)
{
    bool waiting = t->waiting;

    cr_mutex_unlock(&t->lock);
    if (waiting)
        write_wakefd(t);
}

int cr__hs_table_open(struct cr_handle_set **out, size_t size, const struct cr_handle_set_ops *ops,
                      const struct cr_hs_table_hooks *hooks)
{
    struct cr_hs_table *t;
    int err;

    assert(size >= sizeof(*t));
    t = calloc(1, size);
    if (t == NULL)
        return -ENOMEM;
    t->base.ops = ops;
    t->hooks = hooks;
    t->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (t->wakefd < 0) {
        err = -errno;
        goto out_free;
    }
    err = cr_mutex_init(&t->lock);
    if (err < 0)
        goto out_close_wakefd;
    *out = &t->base;
    return 0;

out_close_wakefd:
    close(t->wakefd);
out_free:
    free(t);
    return err;
}

unsigned cr__hs_table_fds(const struct cr_handle_set *hs, int *fds)
{
    const struct cr_hs_table *t = (const struct cr_hs_table *)hs;

    fds[0] = t->wakefd;
    return 1;
}

void cr__hs_table_close(struct cr_handle_set *hs)
{
    struct cr_hs_table *t = (struct cr_hs_table *)hs;

    cr_mutex_fini(&t->lock);
    close(t->wakefd);
    free(t->regs);
    free(t);
}

int cr__hs_table_add(struct cr_handle_set *hs, int fd, unsigned interest, unsigned flags,
                     uint32_t tag)
{
    struct cr_hs_table *t = (struct cr_hs_table *)hs;
    struct cr_hs_reg *r;
    int err;

    if (fd == t->wakefd)
        return -EEXIST; /* ours, never the caller's */
    if (fcntl(fd, F_GETFD) < 0)
        return -EBADF; /* poll and select would only say so later */
    cr_mutex_lock(&t->lock);
    if (find_reg(t, fd) != NULL) {
        err = -EEXIST;
        goto out_unlock;
    }
    err = grow_table(t, fd);
    if (err < 0)
        goto out_unlock;
    r = &t->regs[fd];
    arm(r, interest, flags, tag);
    r->registered = true;
    t->nregistered++;
    unlock_changed(t);
    return 0;

out_unlock:
    cr_mutex_unlock(&t->lock);
    return err;
}

int cr__hs_table_modify(struct cr_handle_set *hs, int fd, unsigned interest, unsigned flags,
                        uint32_t tag)
{
    struct cr_hs_table *t = (struct cr_hs_table *)hs;
    struct cr_hs_reg *r = lock_registered(t, fd);

    if (r == NULL)
        return -ENOENT;
    arm(r, interest, flags, tag);
    unlock_changed(t);
    return 0;
}

int cr__hs_table_remove(struct cr_handle_set *hs, int fd)
{
    struct cr_hs_table *t = (struct cr_hs_table *)hs;
    struct cr_hs_reg *r = lock_registered(t, fd);

    if (r == NULL)
        return -ENOENT;
    r->gen++;
    r->registered = false;
    r->armed = false;
    t->nregistered--;
    unlock_changed(t);
    return 0;
}

int cr__hs_table_snapshot_next(struct cr_hs_table *t, int prev, unsigned *interest)
{
    cr_mutex_assert_held(&t->lock);
    for (size_t fd = (size_t)(prev + 1); fd < t->cap; fd++) {
        struct cr_hs_reg *r = &t->regs[fd];

        if (!r->registered || !r->armed)
            continue;
        r->snap_gen = r->gen;
        *interest = r->interest;
        return (int)fd;
    }
    return -1;
}

int cr__hs_table_report(struct cr_hs_table *t, int fd, unsigned events, struct cr_handle_event *ev)
{
    struct cr_hs_reg *r = find_reg(t, fd);

    cr_mutex_assert_held(&t->lock);
    if (r == NULL || r->gen != r->snap_gen || !r->armed)
        return 0;
    ev->fd = fd;
    ev->events = events;
    ev->tag = r->tag;
    if (r->flags & CR_HS_ONESHOT)
        r->armed = false;
    return 1;
}

/* Turns the wait's results into events, at most max, skipping entries that
 * were removed, changed or disarmed while the lock was free, and disarms the
 * one-shot handles it reports. Caller holds t->lock. */
static int translate(struct cr_hs_table *t, size_t nslots, struct cr_handle_event *evs, int max)
{
    size_t start = nslots > 0 ? t->rotor % nslots : 0;
    int out = 0;

    cr_mutex_assert_held(&t->lock);
    for (size_t k = 0; k < nslots && out < max; k++) {
        size_t slot = (start + k) % nslots;
        int fd;
        unsigned events = t->hooks->ready(t, slot, &fd);

        if (events != 0 && cr__hs_table_report(t, fd, events, &evs[out])) {
            out++;
            t->rotor = slot + 1;
        }
    }
    return out;
}

int cr__hs_table_wait(struct cr_handle_set *hs, struct cr_handle_event *evs, int max,
                      int timeout_ms, uint64_t since_ns)
{
    struct cr_hs_table *t = (struct cr_hs_table *)hs;
    const struct cr_hs_table_hooks *h = t->hooks;
    uint64_t deadline = cr__handle_set_deadline(timeout_ms, since_ns);
    bool again = false;

    for (;;) {
        int nslots;
        int n;
        int out = 0;
        int err;
        bool woken;
        bool wakefd_ready = false;
        bool retry;

        cr_mutex_lock(&t->lock);
        nslots = h->snapshot(t);
        if (nslots >= 0)
            t->waiting = true;
        cr_mutex_unlock(&t->lock);
        if (nslots < 0)
            return nslots;
        /* A wake-up that came before this wait: look, but do not block. Pairs
         * with the release store in cr__hs_table_wake(). */
        woken = __atomic_exchange_n(&t->wake_pending, 0, __ATOMIC_ACQUIRE);
        /* The clock is read for what is left only when the wait is retried. */
        n = h->wait(t,
                    woken   ? 0
                    : again ? cr__handle_set_remaining_ms(timeout_ms, deadline)
                            : timeout_ms,
                    &wakefd_ready);
        again = true;
        err = n < 0 ? n : 0;
        if (n > 0 && wakefd_ready) {
            drain_wakefd(t);
            /* Pairs with the release store in cr__hs_table_wake(). */
            woken |= __atomic_exchange_n(&t->wake_pending, 0, __ATOMIC_ACQUIRE);
        }
        retry = err == -EINTR;
        cr_mutex_lock(&t->lock);
        t->waiting = false;
        if (n > 0) {
            out = translate(t, (size_t)nslots, evs, max);
        } else if (err == -EBADF && h->report_closed != NULL) {
            out = h->report_closed(t, evs, max);
            retry = true;
        }
        cr_mutex_unlock(&t->lock);
        if (retry) {
            /* out: events, -EBADF, or 0 after a wake-up, which ends the wait. */
            if (out != 0 || woken)
                return out;
            continue;
        }
        if (err < 0)
            return err;
        /* n > 0 with nothing to report: a table change woke us, or every
         * result belonged to a changed registration. Wait on the new table. */
        if (out > 0 || woken || n == 0)
            return out;
    }
}

void cr__hs_table_wake(struct cr_handle_set *hs)
{
    struct cr_hs_table *t = (struct cr_hs_table *)hs;

    /* Pairs with the acquire exchanges in cr__hs_table_wait(). */
    __atomic_store_n(&t->wake_pending, 1, __ATOMIC_RELEASE);
    write_wakefd(t);
}
