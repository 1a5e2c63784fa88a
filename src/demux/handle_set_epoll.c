/*
 * handle_set_epoll.c - the epoll backend (the default). epoll is itself
 * thread-safe and lets another thread change the set while one waits, so this
 * file holds no lock: the kernel keeps the registrations. The epoll data word
 * carries (tag << 32 | fd), so events come back with their tag and no table
 * lookup. An eventfd registered in the set is the wake-up.
 */
#include "demux/handle_set_internal.h"
#include "os/sys_internal.h"

#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* epoll_event is small; a bigger batch only costs stack. */
#define EPOLL_BATCH_MAX 256

struct epoll_set {
    struct cr_handle_set base;
    /* Immutable after open. */
    int epfd;
    int wakefd;
};

static uint32_t to_epoll(unsigned interest, unsigned flags)
{
    uint32_t ev = 0;

    if (interest & CR_EV_READ)
        ev |= EPOLLIN | EPOLLPRI;
    if (interest & CR_EV_WRITE)
        ev |= EPOLLOUT;
    if (flags & CR_HS_ONESHOT)
        ev |= EPOLLONESHOT;
    /* Edge: a peer's FIN that came with the last data brings no edge of its
     * own later, so the report says so (as HUP) for the reader to read on. */
    if (flags & CR_HS_EDGE)
        ev |= EPOLLET | EPOLLRDHUP;
    return ev;
}

static unsigned from_epoll(uint32_t ev)
{
    unsigned out = 0;

    if (ev & (EPOLLIN | EPOLLPRI))
        out |= CR_EV_READ;
    if (ev & EPOLLOUT)
        out |= CR_EV_WRITE;
    if (ev & (EPOLLHUP | EPOLLRDHUP))
        out |= CR_EV_HUP;
    if (ev & EPOLLERR)
        out |= CR_EV_ERR;
    return out;
}

static int ctl(struct epoll_set *s, int op, int fd, unsigned interest, unsigned flags, uint32_t tag)
{
    struct epoll_event ev = {
        .events = to_epoll(interest, flags),
        .data.u64 = (uint64_t)tag << 32 | (uint32_t)fd,
    };

    if (fd == s->wakefd)
        return op == EPOLL_CTL_ADD ? -EEXIST : -ENOENT; /* ours, never the caller's */
    if (epoll_ctl(s->epfd, op, fd, &ev) < 0)
        return -errno;
    return 0;
}

static int epoll_set_open(struct cr_handle_set **out)
{
    struct epoll_set *s;
    struct epoll_event ev = {.events = EPOLLIN};
    int err;

    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->base.ops = &cr__handle_set_epoll_ops;
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s->epfd < 0) {
        err = -errno;
        goto out_free;
    }
    s->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->wakefd < 0) {
        err = -errno;
        goto out_close_epfd;
    }
    ev.data.u64 = (uint32_t)s->wakefd;
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->wakefd, &ev) < 0) {
        err = -errno;
        goto out_close_wakefd;
    }
    *out = &s->base;
    return 0;

out_close_wakefd:
    close(s->wakefd);
out_close_epfd:
    close(s->epfd);
out_free:
    free(s);
    return err;
}

static void epoll_set_close(struct cr_handle_set *hs)
{
    struct epoll_set *s = (struct epoll_set *)hs;

    close(s->wakefd);
    close(s->epfd);
    free(s);
}

static int epoll_set_add(struct cr_handle_set *hs, int fd, unsigned interest, unsigned flags,
                         uint32_t tag)
{
    return ctl((struct epoll_set *)hs, EPOLL_CTL_ADD, fd, interest, flags, tag);
}

static int epoll_set_modify(struct cr_handle_set *hs, int fd, unsigned interest, unsigned flags,
                            uint32_t tag)
{
    return ctl((struct epoll_set *)hs, EPOLL_CTL_MOD, fd, interest, flags, tag);
}

static int epoll_set_remove(struct cr_handle_set *hs, int fd)
{
    struct epoll_set *s = (struct epoll_set *)hs;

    if (fd == s->wakefd)
        return -ENOENT;
    /* A closed fd has already left the set; say so as for any unknown fd. */
    if (epoll_ctl(s->epfd, EPOLL_CTL_DEL, fd, NULL) < 0)
        return errno == EBADF ? -ENOENT : -errno;
    return 0;
}

static void drain_wakefd(struct epoll_set *s)
{
    uint64_t v;

    /* EAGAIN only: another waiter (there is none by contract) or a spurious wake. */
    if (read(s->wakefd, &v, sizeof(v)) < 0)
        return;
}

static int epoll_set_wait(struct cr_handle_set *hs, struct cr_handle_event *evs, int max,
                          int timeout_ms, uint64_t since_ns)
{
    struct epoll_set *s = (struct epoll_set *)hs;
    struct epoll_event kev[EPOLL_BATCH_MAX];
    uint64_t deadline = cr__handle_set_deadline(timeout_ms, since_ns);
    int ms = timeout_ms;
    int n;
    int out = 0;

    if (max > EPOLL_BATCH_MAX)
        max = EPOLL_BATCH_MAX;
    for (;;) {
        n = cr__sys_epoll_wait(s->epfd, kev, max, ms);
        if (n >= 0)
            break;
        if (errno != EINTR)
            return -errno;
        ms = cr__handle_set_remaining_ms(timeout_ms, deadline);
    }
    for (int i = 0; i < n; i++) {
        int fd = (int)(uint32_t)kev[i].data.u64;

        if (fd == s->wakefd) {
            drain_wakefd(s);
            continue;
        }
        evs[out].fd = fd;
        evs[out].tag = (uint32_t)(kev[i].data.u64 >> 32);
        evs[out].events = from_epoll(kev[i].events);
        out++;
    }
    return out;
}

static void epoll_set_wake(struct cr_handle_set *hs)
{
    struct epoll_set *s = (struct epoll_set *)hs;
    uint64_t one = 1;

    /* Fails only when the counter is saturated, which is a wake-up already. */
    if (write(s->wakefd, &one, sizeof(one)) < 0)
        return;
}

static unsigned epoll_set_fds(const struct cr_handle_set *hs, int *fds)
{
    const struct epoll_set *s = (const struct epoll_set *)hs;

    fds[0] = s->epfd;
    fds[1] = s->wakefd;
    return 2;
}

const struct cr_handle_set_ops cr__handle_set_epoll_ops = {
    .name = "epoll",
    .edge = true,
    .open = epoll_set_open,
    .close = epoll_set_close,
    .add = epoll_set_add,
    .modify = epoll_set_modify,
    .remove = epoll_set_remove,
    .wait = epoll_set_wait,
    .wake = epoll_set_wake,
    .fds = epoll_set_fds,
};
