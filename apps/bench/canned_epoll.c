/*
 * canned_epoll.c - the canned-epoll peer's backend (canned.h): one thread, level-triggered
 * epoll, per request one read and one write (as the peers kit's limit.c, docs/benchmarks.md).
 * A connection is read until a short read, answered at once, and watched for EPOLLOUT only while a
 * write would block. Accepted connections are read before they join the set: with TCP_DEFER_ACCEPT
 * their request is already there, so a Connection: close request costs accept4, read, write, close.
 * Runs on the responder process's thread; owns the epoll set, the connection table and the
 * connections.
 */
#include "canned.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_EVENTS 256
#define READ_SIZE  16384

/* A connection, indexed by its descriptor (unique in this one-thread process). */
struct conn {
    struct bench_canned_scan scan;
    struct bench_canned_out out;
    uint32_t events; /* what epoll watches for it; 0: not in the set */
    bool closing;    /* its Connection: close answer is owed: read no more, close after it */
};

struct server {
    int ep;
    int lfd;
    int sfd;
    struct conn *conns;
    size_t nconns;
    char buf[READ_SIZE];
};

static int probe(char *why, size_t cap)
{
    (void)why;
    (void)cap;
    return 0;
}

/* Closing the descriptor also takes it out of the epoll set: it is never duplicated. */
static void drop(struct conn *c, int fd)
{
    close(fd);
    c->events = 0;
}

static int watch(struct server *s, struct conn *c, int fd, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.fd = fd};

    if (c->events == events)
        return 0;
    if (epoll_ctl(s->ep, c->events == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev) < 0)
        return -errno;
    c->events = events;
    return 0;
}

/* Reads what is there (until a short read: level-triggered epoll reports the rest) and counts
 * the answers owed. 0, or -errno / -ECONNRESET at the peer's end: then the connection goes,
 * unanswered requests included (the load's clients never half-close). */
static int read_requests(struct server *s, struct conn *c, int fd)
{
    for (;;) {
        ssize_t n = read(fd, s->buf, sizeof(s->buf));
        unsigned heads;
        bool close;

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN ? 0 : -errno;
        if (n == 0)
            return -ECONNRESET;
        heads = bench__canned_scan(&c->scan, s->buf, (size_t)n, &close);
        bench__canned_owe(&c->out, heads, close);
        if (close) {
            c->closing = true;
            return 0;
        }
        if ((size_t)n < sizeof(s->buf))
            return 0;
    }
}

/* Writes what is owed. 0 while the connection stays, -errno when it must go (an error, or its
 * close answer sent: -ESHUTDOWN). */
static int flush(struct server *s, struct conn *c, int fd)
{
    const void *p;
    size_t len;

    while ((len = bench__canned_next(&c->out, &p)) > 0) {
        ssize_t n = write(fd, p, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return watch(s, c, fd, c->closing ? EPOLLOUT : EPOLLIN | EPOLLOUT);
        if (n < 0)
            return -errno;
        bench__canned_sent(&c->out, (size_t)n);
    }
    if (c->closing)
        return -ESHUTDOWN;
    return watch(s, c, fd, EPOLLIN);
}

static void on_event(struct server *s, int fd, uint32_t events)
{
    struct conn *c = &s->conns[fd];
    int err = 0;

    if (!c->closing && (events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
        err = read_requests(s, c, fd);
    if (err == 0)
        err = flush(s, c, fd);
    if (err < 0)
        drop(c, fd);
}

/*
 * Accepts every waiting connection and serves it at once. A failing accept4 other than EAGAIN
 * (EMFILE) leaves the listener readable, so the loop comes back to it: the lab opens at most
 * 1024 connections under a raised descriptor limit.
 */
static void accept_all(struct server *s)
{
    for (;;) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
            continue;
        if (fd < 0)
            return;
        if ((size_t)fd >= s->nconns) {
            close(fd);
            continue;
        }
        memset(&s->conns[fd], 0, sizeof(s->conns[fd]));
        on_event(s, fd, EPOLLIN);
    }
}

static int add_fd(int ep, int fd)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};

    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

static int serve(int lfd, int sfd)
{
    struct epoll_event evs[MAX_EVENTS];
    struct server *s;
    int err;

    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->lfd = lfd;
    s->sfd = sfd;
    s->nconns = bench__canned_max_fds();
    s->conns = calloc(s->nconns, sizeof(*s->conns));
    if (s->conns == NULL) {
        err = -ENOMEM;
        goto out_free;
    }
    s->ep = epoll_create1(EPOLL_CLOEXEC);
    if (s->ep < 0) {
        err = -errno;
        goto out_free_conns;
    }
    err = add_fd(s->ep, lfd);
    if (err == 0)
        err = add_fd(s->ep, sfd);
    while (err == 0) {
        int n = epoll_wait(s->ep, evs, MAX_EVENTS, -1);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err = -errno;
            break;
        }
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;

            if (fd == sfd)
                goto out_close_conns;
            if (fd == lfd)
                accept_all(s);
            else
                on_event(s, fd, evs[i].events);
        }
    }
out_close_conns:
    for (size_t fd = 0; fd < s->nconns; fd++) {
        if (s->conns[fd].events != 0)
            close((int)fd);
    }
    close(s->ep);
out_free_conns:
    free(s->conns);
out_free:
    free(s);
    return err;
}

const struct bench_canned_ops bench__canned_epoll_ops = {
    .name = "epoll",
    .probe = probe,
    .serve = serve,
};
