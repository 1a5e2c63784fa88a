/*
 * handle_set_select.c - the select(2) backend, for comparison with poll and
 * epoll and for systems that have nothing better. Like the poll backend it
 * leaves the registrations and the wait to the shared table
 * (handle_set_table.c); this file turns a snapshot of the armed entries into
 * fd_sets owned by the waiting thread, selects on them, and reads the results
 * with FD_ISSET. The table's eventfd is in the read set.
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
 * Lock order: the table's lock is a leaf; nothing else is locked while it is
 * held. Any thread calls add/modify/remove/wake; one thread at a time calls
 * wait.
 */
#include "demux/handle_set_table_internal.h"

#include <fcntl.h>
#include <sys/select.h>

struct select_set {
    struct cr_hs_table table; /* its wakefd is below FD_SETSIZE */
    /* Owned by the waiting thread (one at a time, by contract). A slot is an
     * fd; nfds is select's first argument and the number of slots. want_rd
     * and want_wr keep what was asked, which select overwrites. */
    fd_set rd;
    fd_set wr;
    fd_set ex;
    fd_set want_rd;
    fd_set want_wr;
    int nfds;
};

/* Snapshot hook: fills the waiter's fd_sets from the armed entries. Returns
 * the number of slots, nfds. Caller holds the table lock. */
static int build_fd_sets(struct cr_hs_table *t)
{
    struct select_set *s = (struct select_set *)t;
    unsigned interest;

    cr_mutex_assert_held(&t->lock);
    FD_ZERO(&s->rd);
    FD_ZERO(&s->wr);
    FD_ZERO(&s->ex);
    FD_SET(t->wakefd, &s->rd);
    s->nfds = t->wakefd + 1;
    for (int fd = -1; (fd = cr__hs_table_snapshot_next(t, fd, &interest)) >= 0;) {
        /* add refused every fd >= FD_SETSIZE, so every fd here fits an fd_set. */
        assert(fd < FD_SETSIZE);
        if (interest == 0)
            continue;
        if (interest & CR_EV_READ) {
            FD_SET(fd, &s->rd);
            FD_SET(fd, &s->ex);
        }
        if (interest & CR_EV_WRITE)
            FD_SET(fd, &s->wr);
        if (fd >= s->nfds)
            s->nfds = fd + 1;
    }
    return s->nfds;
}

static int select_fd_sets(struct cr_hs_table *t, int timeout_ms, bool *wakefd_ready)
{
    struct select_set *s = (struct select_set *)t;
    struct timeval tv;
    struct timeval *tvp = NULL;
    int n;

    /* select clears what is not ready; keep what was asked for EBADF. */
    s->want_rd = s->rd;
    s->want_wr = s->wr;
    if (timeout_ms >= 0) {
        tv.tv_sec = timeout_ms / 1000;
        tv.tv_usec = (timeout_ms % 1000) * 1000;
        tvp = &tv;
    }
    n = select(s->nfds, &s->rd, &s->wr, &s->ex, tvp);
    if (n < 0)
        return -errno;
    *wakefd_ready = FD_ISSET(t->wakefd, &s->rd);
    return n;
}

static unsigned read_fd_sets(struct cr_hs_table *t, size_t slot, int *fd)
{
    struct select_set *s = (struct select_set *)t;
    unsigned events = 0;

    *fd = (int)slot;
    if (*fd == t->wakefd)
        return 0;
    if (FD_ISSET(*fd, &s->rd) || FD_ISSET(*fd, &s->ex))
        events |= CR_EV_READ;
    if (FD_ISSET(*fd, &s->wr))
        events |= CR_EV_WRITE;
    return events;
}

/*
 * After select failed with EBADF: a registered fd was closed. If it was
 * removed first (remove, then close, while we waited), rebuilding drops it and
 * this reports nothing. If it is still registered, the caller closed it without
 * remove; it is reported as CR_EV_ERR on every wait, like POLLNVAL, until
 * removed. Returns the events filled, or -EBADF if our own eventfd is gone.
 * Caller holds the table lock.
 */
static int report_closed(struct cr_hs_table *t, struct cr_handle_event *evs, int max)
{
    struct select_set *s = (struct select_set *)t;
    int out = 0;

    cr_mutex_assert_held(&t->lock);
    if (fcntl(t->wakefd, F_GETFD) < 0)
        return -EBADF;
    for (int fd = 0; fd < s->nfds && out < max; fd++) {
        if (fd == t->wakefd || (!FD_ISSET(fd, &s->want_rd) && !FD_ISSET(fd, &s->want_wr)))
            continue;
        if (fcntl(fd, F_GETFD) < 0)
            out += cr__hs_table_report(t, fd, CR_EV_ERR, &evs[out]);
    }
    return out;
}

static const struct cr_hs_table_hooks select_hooks = {
    .snapshot = build_fd_sets,
    .wait = select_fd_sets,
    .ready = read_fd_sets,
    .report_closed = report_closed,
};

static int select_set_open(struct cr_handle_set **out)
{
    struct cr_handle_set *hs;
    int err;

    err = cr__hs_table_open(&hs, sizeof(struct select_set), &cr__handle_set_select_ops,
                            &select_hooks);
    if (err < 0)
        return err;
    /* The lowest free fd is already this high: no fd_set can hold it. */
    if (((struct cr_hs_table *)hs)->wakefd >= FD_SETSIZE) {
        cr__hs_table_close(hs);
        return -EMFILE;
    }
    *out = hs;
    return 0;
}

static int select_set_add(struct cr_handle_set *hs, int fd, unsigned interest, unsigned flags,
                          uint32_t tag)
{
    /* A closed fd is -EBADF on every backend, whatever its number. */
    if (fd >= FD_SETSIZE)
        return fcntl(fd, F_GETFD) < 0 ? -EBADF : -EINVAL;
    return cr__hs_table_add(hs, fd, interest, flags, tag);
}

const struct cr_handle_set_ops cr__handle_set_select_ops = {
    .name = "select",
    .open = select_set_open,
    .close = cr__hs_table_close,
    .add = select_set_add,
    .modify = cr__hs_table_modify,
    .remove = cr__hs_table_remove,
    .wait = cr__hs_table_wait,
    .wake = cr__hs_table_wake,
    .fds = cr__hs_table_fds,
};
