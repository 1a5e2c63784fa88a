/*
 * handle_set_poll.c - the poll(2) backend. poll keeps no registrations in the
 * kernel, so the shared table (handle_set_table.c) keeps them and runs the
 * wait; this file turns a snapshot of the armed entries into a pollfd array
 * owned by the waiting thread, polls it, and reads its revents. The table's
 * eventfd is always entry 0 of the array.
 *
 * Reports: POLLIN/POLLPRI as CR_EV_READ, POLLOUT as CR_EV_WRITE, POLLHUP as
 * CR_EV_HUP, POLLERR and POLLNVAL (a registered fd closed without remove) as
 * CR_EV_ERR. Hang-up and error come even with an empty interest mask.
 *
 * Lock order: the table's lock is a leaf; nothing else is locked while it is
 * held. Any thread calls add/modify/remove/wake; one thread at a time calls
 * wait.
 */
#include "demux/handle_set_table_internal.h"

#include <poll.h>
#include <stdlib.h>

struct poll_set {
    struct cr_hs_table table;
    /* Owned by the waiting thread (one at a time, by contract). pfds[0] is
     * wakefd; pfds[1 + slot] is the table's slot. */
    struct pollfd *pfds;
    size_t pfds_cap;
    size_t npfds;
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

/* Snapshot hook: fills the waiter's array from the armed entries. Returns the
 * number of slots (pollfds without wakefd) or -ENOMEM. Caller holds the table
 * lock. */
static int build_pollfds(struct cr_hs_table *t)
{
    struct poll_set *s = (struct poll_set *)t;
    size_t need = t->nregistered + 1;
    size_t n = 1;
    unsigned interest;

    cr_mutex_assert_held(&t->lock);
    if (need > s->pfds_cap) {
        struct pollfd *pfds = realloc(s->pfds, need * sizeof(*pfds));

        if (pfds == NULL)
            return -ENOMEM;
        s->pfds = pfds;
        s->pfds_cap = need;
    }
    s->pfds[0] = (struct pollfd){.fd = t->wakefd, .events = POLLIN};
    for (int fd = -1; (fd = cr__hs_table_snapshot_next(t, fd, &interest)) >= 0;) {
        /* Armed entries are registered ones, so they fit. */
        assert(n < need);
        s->pfds[n++] = (struct pollfd){.fd = fd, .events = to_poll(interest)};
    }
    s->npfds = n;
    return (int)(n - 1);
}

static int poll_pfds(struct cr_hs_table *t, int timeout_ms, bool *wakefd_ready)
{
    struct poll_set *s = (struct poll_set *)t;
    int n = poll(s->pfds, (nfds_t)s->npfds, timeout_ms);

    if (n < 0)
        return -errno;
    *wakefd_ready = s->pfds[0].revents != 0;
    return n;
}

static unsigned read_revents(struct cr_hs_table *t, size_t slot, int *fd)
{
    const struct pollfd *p = &((struct poll_set *)t)->pfds[1 + slot];

    *fd = p->fd;
    return from_poll(p->revents);
}

static const struct cr_hs_table_hooks poll_hooks = {
    .snapshot = build_pollfds,
    .wait = poll_pfds,
    .ready = read_revents,
};

static int poll_set_open(struct cr_handle_set **out)
{
    return cr__hs_table_open(out, sizeof(struct poll_set), &cr__handle_set_poll_ops, &poll_hooks);
}

static void poll_set_close(struct cr_handle_set *hs)
{
    free(((struct poll_set *)hs)->pfds);
    cr__hs_table_close(hs);
}

const struct cr_handle_set_ops cr__handle_set_poll_ops = {
    .name = "poll",
    .open = poll_set_open,
    .close = poll_set_close,
    .add = cr__hs_table_add,
    .modify = cr__hs_table_modify,
    .remove = cr__hs_table_remove,
    .wait = cr__hs_table_wait,
    .wake = cr__hs_table_wake,
    .fds = cr__hs_table_fds,
};
