/*
 * handle_set_poll.c - the poll(2) backend. poll keeps no registrations in the
 * kernel, so this file keeps them: a table indexed by fd (grown on demand by
 * add) under one mutex. Each wait copies the armed entries into a pollfd array
 * owned by the waiting thread, polls without the lock, then translates the
 * results under the lock, dropping any whose registration changed meanwhile.
 * An eventfd, always entry 0 of the array, wakes the waiter both for
 * cr_handle_set_wake() and after add/modify/remove, so the waiter rebuilds its
 * array and a handle added while it waits is watched by that wait.
 *
 * Reports: POLLIN/POLLPRI as CR_EV_READ, POLLOUT as CR_EV_WRITE, POLLHUP as
 * CR_EV_HUP, POLLERR and POLLNVAL (a registered fd closed without remove) as
 * CR_EV_ERR. Hang-up and error come even with an empty interest mask.
 *
 * Lock order: s->lock is a leaf; nothing else is locked while it is held.
 * Any thread calls add/modify/remove/wake; one thread at a time calls wait.
 */
#include "handle_set_internal.h"

#include "os/sync_internal.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* First size of the registration table; it doubles from there as fds need. */
#define POLL_TABLE_MIN 64

/* One registration. Every add/modify/remove bumps gen, so a waiter can tell
 * whether the entry it polled is still the one in the table. */
struct poll_reg {
    uint32_t tag;
    uint32_t gen;
    unsigned interest;
    unsigned flags;
    bool registered;
    /* False once a one-shot handle has been reported, until modify. */
    bool armed;
};

struct poll_set {
    struct cr_handle_set base;
    /* Immutable after open. */
    int wakefd;

    struct cr_mutex lock;
    /* Protected by lock. */
    struct poll_reg *regs; /* indexed by fd; cap entries */
    size_t cap;
    size_t nregistered;
    /* True between building the poll array and translating its results; a
     * change to the table then writes wakefd so the waiter rebuilds. */
    bool waiting;

    /* Set by cr_handle_set_wake() before it writes wakefd (release), taken
     * by the waiter with an acquire exchange, so a wait returns early only for
     * an explicit wake-up and simply rebuilds after a table change. */
    int wake_pending;

    /* Owned by the waiting thread (one at a time, by contract). pfds[0] is
     * wakefd; gens[i] is the gen of pfds[i].fd's entry when the array was
     * built. */
    struct pollfd *pfds;
    uint32_t *gens;
    size_t pfds_cap;
    /* Index (without wakefd) where translation starts: just past the last
     * entry reported, so a small max does not starve the entries after it. */
    size_t rotor;
};

static short to_poll(unsigned interest)
{
    short ev = 0;

    if (interest & CR_EV_READ)
        ev |= POLLIN | POLLPRI;
    if (interest & CR_EV_WRITE)
        ev |= POLLOUT;
    return ev;
}

static unsigned from_poll(short rev)
{
    unsigned out = 0;

    if (rev & (POLLIN | POLLPRI))
        out |= CR_EV_READ;
    if (rev & POLLOUT)
        out |= CR_EV_WRITE;
    if (rev & POLLHUP)
        out |= CR_EV_HUP;
    if (rev & (POLLERR | POLLNVAL))
        out |= CR_EV_ERR;
    return out;
}

/* The entry of a registered fd, or NULL. Caller holds s->lock. */
static struct poll_reg *find_reg(struct poll_set *s, int fd)
{
    cr_mutex_assert_held(&s->lock);
    if ((size_t)fd >= s->cap || !s->regs[fd].registered)
        return NULL;
    return &s->regs[fd];
}

/* Makes the table hold fd. Caller holds s->lock. */
static int grow_table(struct poll_set *s, int fd)
{
    size_t cap = s->cap < POLL_TABLE_MIN ? POLL_TABLE_MIN : s->cap;
    struct poll_reg *regs;

    cr_mutex_assert_held(&s->lock);
    if ((size_t)fd < s->cap)
        return 0;
    while (cap <= (size_t)fd)
        cap *= 2;
    regs = realloc(s->regs, cap * sizeof(*regs));
    if (regs == NULL)
        return -ENOMEM;
    memset(regs + s->cap, 0, (cap - s->cap) * sizeof(*regs));
    s->regs = regs;
    s->cap = cap;
    return 0;
}

static void write_wakefd(struct poll_set *s)
{
    uint64_t one = 1;

    /* Fails only when the counter is saturated, which is a wake-up already. */
    if (write(s->wakefd, &one, sizeof(one)) < 0)
        return;
}

static void drain_wakefd(struct poll_set *s)
{
    uint64_t v;

    /* EAGAIN only: the wake-up was consumed by an earlier read. */
    if (read(s->wakefd, &v, sizeof(v)) < 0)
        return;
}

/* Ends a table change: unlocks and, if a thread is polling an array built
 * from the old table, makes it rebuild. Caller holds s->lock. */
static void unlock_changed(struct poll_set *s)
{
    bool waiting = s->waiting;

    cr_mutex_unlock(&s->lock);
    if (waiting)
        write_wakefd(s);
}

static int poll_set_open(struct cr_handle_set **out)
{
    struct poll_set *s;
    int err;

    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->base.ops = &cr__handle_set_poll_ops;
    s->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->wakefd < 0) {
        err = -errno;
        goto out_free;
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

static void poll_set_close(struct cr_handle_set *hs)
{
    struct poll_set *s = (struct poll_set *)hs;

    cr_mutex_fini(&s->lock);
    close(s->wakefd);
    free(s->gens);
    free(s->pfds);
    free(s->regs);
    free(s);
}

static int poll_set_add(struct cr_handle_set *hs, int fd, unsigned interest, unsigned flags,
                        uint32_t tag)
{
    struct poll_set *s = (struct poll_set *)hs;
    struct poll_reg *r;
    int err;

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
    s->nregistered++;
    unlock_changed(s);
    return 0;
}

static int poll_set_modify(struct cr_handle_set *hs, int fd, unsigned interest, unsigned flags,
                           uint32_t tag)
{
    struct poll_set *s = (struct poll_set *)hs;
    struct poll_reg *r;

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

static int poll_set_remove(struct cr_handle_set *hs, int fd)
{
    struct poll_set *s = (struct poll_set *)hs;
    struct poll_reg *r;

    cr_mutex_lock(&s->lock);
    r = find_reg(s, fd);
    if (r == NULL) {
        cr_mutex_unlock(&s->lock);
        return -ENOENT;
    }
    r->gen++;
    r->registered = false;
    r->armed = false;
    s->nregistered--;
    unlock_changed(s);
    return 0;
}

/* Fills the waiter's array from the armed entries and marks the set as being
 * waited on. Returns the number of pollfds or -ENOMEM. Caller holds s->lock. */
static int build_pollfds(struct poll_set *s)
{
    size_t need = s->nregistered + 1;
    size_t n = 1;

    cr_mutex_assert_held(&s->lock);
    if (need > s->pfds_cap) {
        struct pollfd *pfds = realloc(s->pfds, need * sizeof(*pfds));
        uint32_t *gens;

        if (pfds == NULL)
            return -ENOMEM;
        s->pfds = pfds;
        gens = realloc(s->gens, need * sizeof(*gens));
        if (gens == NULL)
            return -ENOMEM;
        s->gens = gens;
        s->pfds_cap = need;
    }
    s->pfds[0] = (struct pollfd){.fd = s->wakefd, .events = POLLIN};
    s->gens[0] = 0;
    for (size_t fd = 0; fd < s->cap && n < need; fd++) {
        const struct poll_reg *r = &s->regs[fd];

        if (!r->registered || !r->armed)
            continue;
        s->pfds[n] = (struct pollfd){.fd = (int)fd, .events = to_poll(r->interest)};
        s->gens[n] = r->gen;
        n++;
    }
    s->waiting = true;
    return (int)n;
}

/* Turns poll's results into events, at most max, skipping entries that were
 * removed, changed or disarmed while the lock was free, and disarms the
 * one-shot handles it reports. Caller holds s->lock. */
static int translate(struct poll_set *s, int npfds, struct cr_handle_event *evs, int max)
{
    size_t nfds = (size_t)npfds - 1; /* without wakefd */
    size_t start = nfds > 0 ? s->rotor % nfds : 0;
    int out = 0;

    cr_mutex_assert_held(&s->lock);
    for (size_t k = 0; k < nfds && out < max; k++) {
        size_t j = (start + k) % nfds;
        size_t i = 1 + j;
        const struct pollfd *p = &s->pfds[i];
        struct poll_reg *r;

        if (p->revents == 0)
            continue;
        r = find_reg(s, p->fd);
        if (r == NULL || r->gen != s->gens[i] || !r->armed)
            continue;
        evs[out].fd = p->fd;
        evs[out].events = from_poll(p->revents);
        evs[out].tag = r->tag;
        out++;
        if (r->flags & CR_HS_ONESHOT)
            r->armed = false;
        s->rotor = j + 1;
    }
    return out;
}

static int poll_set_wait(struct cr_handle_set *hs, struct cr_handle_event *evs, int max,
                         int timeout_ms)
{
    struct poll_set *s = (struct poll_set *)hs;
    uint64_t deadline = cr__handle_set_deadline(timeout_ms);

    for (;;) {
        int npfds;
        int n;
        int out;
        int err;
        bool woken;

        cr_mutex_lock(&s->lock);
        npfds = build_pollfds(s);
        cr_mutex_unlock(&s->lock);
        if (npfds < 0)
            return npfds;
        /* A wake-up that came before this poll: look, but do not block. Pairs
         * with the release store in poll_set_wake(). */
        woken = __atomic_exchange_n(&s->wake_pending, 0, __ATOMIC_ACQUIRE);
        n = poll(s->pfds, (nfds_t)npfds,
                 woken ? 0 : cr__handle_set_remaining_ms(timeout_ms, deadline));
        err = n < 0 ? -errno : 0;
        if (n > 0 && s->pfds[0].revents != 0) {
            drain_wakefd(s);
            /* Pairs with the release store in poll_set_wake(). */
            woken |= __atomic_exchange_n(&s->wake_pending, 0, __ATOMIC_ACQUIRE);
        }
        cr_mutex_lock(&s->lock);
        s->waiting = false;
        out = n > 0 ? translate(s, npfds, evs, max) : 0;
        cr_mutex_unlock(&s->lock);
        if (err == -EINTR) {
            if (woken)
                return 0; /* the wake-up it consumed ends this wait */
            continue;
        }
        if (err < 0)
            return err;
        /* n > 0 with nothing to report: a table change woke us, or every
         * result belonged to a changed registration. Poll the new table. */
        if (out > 0 || woken || n == 0)
            return out;
    }
}

static void poll_set_wake(struct cr_handle_set *hs)
{
    struct poll_set *s = (struct poll_set *)hs;

    /* Pairs with the acquire exchanges in poll_set_wait(). */
    __atomic_store_n(&s->wake_pending, 1, __ATOMIC_RELEASE);
    write_wakefd(s);
}

const struct cr_handle_set_ops cr__handle_set_poll_ops = {
    .name = "poll",
    .open = poll_set_open,
    .close = poll_set_close,
    .add = poll_set_add,
    .modify = poll_set_modify,
    .remove = poll_set_remove,
    .wait = poll_set_wait,
    .wake = poll_set_wake,
};
