/*
 * oltp_load_conn.c - the load generator's client connection
 * (oltp_load_conn.h): resolve the target, connect, send a whole buffer and
 * read one reply frame, each bounded by a deadline on the monotonic clock
 * (non-blocking socket and poll, so a silent server never overruns a bound).
 * Called by oltp_load.c's clients and its setup, each on its own thread and
 * its own socket; no shared state.
 */
#include "oltp_load_conn.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

uint64_t oltp_load_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

int oltp_load_resolve(const char *target, struct sockaddr_storage *addr, socklen_t *len)
{
    char host[256];
    const char *colon = strrchr(target, ':');
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai;
    size_t hlen;

    if (colon == NULL || colon == target || colon[1] == '\0')
        return -EINVAL;
    hlen = (size_t)(colon - target);
    if (hlen >= sizeof(host))
        return -EINVAL;
    memcpy(host, target, hlen);
    host[hlen] = '\0';
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
        return -EINVAL;
    memcpy(addr, ai->ai_addr, ai->ai_addrlen);
    *len = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

/* Waits for ev on fd until deadline: 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short ev, uint64_t deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = ev};
        uint64_t now = oltp_load_now_ns();
        int ms;
        int n;

        if (now >= deadline)
            return -ETIMEDOUT;
        ms = (int)((deadline - now + 999999) / 1000000);
        n = poll(&p, 1, ms);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

int oltp_load_connect(const struct sockaddr_storage *addr, socklen_t len, bool linger0,
                      uint64_t deadline)
{
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    int err;
    socklen_t elen = sizeof(err);

    if (fd < 0)
        return -errno;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (linger0) {
        /* A connection per request closes after its reply: without this
         * every one would sit in TIME_WAIT and the run would exhaust the
         * ephemeral ports. */
        struct linger lg = {.l_onoff = 1, .l_linger = 0};

        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    if (connect(fd, (const struct sockaddr *)addr, len) == 0)
        return fd;
    err = -errno;
    if (err != -EINPROGRESS)
        goto out_close;
    err = wait_fd(fd, POLLOUT, deadline);
    if (err < 0)
        goto out_close;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0) {
        err = -errno;
        goto out_close;
    }
    if (err != 0) {
        err = -err;
        goto out_close;
    }
    return fd;
out_close:
    close(fd);
    return err;
}

int oltp_load_send_all(int fd, const void *buf, size_t len, uint64_t deadline)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN)
            return -errno;
        int err = wait_fd(fd, POLLOUT, deadline);

        if (err < 0)
            return err;
    }
    return 0;
}

int oltp_load_read_reply(int fd, unsigned char *rbuf, size_t *rlen, struct oltp_reply *rep,
                         uint64_t deadline)
{
    for (;;) {
        ssize_t n;

        if (*rlen > 0) {
            n = oltp_reply_decode(rbuf, *rlen, rep);
            if (n > 0) {
                memmove(rbuf, rbuf + n, *rlen - (size_t)n);
                *rlen -= (size_t)n;
                return 0;
            }
            if (n != -EAGAIN)
                return -EPROTO;
        }
        n = recv(fd, rbuf + *rlen, OLTP_LOAD_RBUF - *rlen, 0);
        if (n > 0) {
            *rlen += (size_t)n;
            continue;
        }
        if (n == 0)
            return -EPIPE;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN)
            return -errno;
        int err = wait_fd(fd, POLLIN, deadline);

        if (err < 0)
            return err;
    }
}
