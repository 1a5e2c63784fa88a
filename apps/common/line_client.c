/*
 * line_client.c - a blocking client of a server on 127.0.0.1 (line_client.h): connect, send
 * all, read lines and counted bytes with a deadline. Used by the tests, the lab's services'
 * clients and tools/pgo_train; one thread per client. Owns only the client's socket.
 */
#include "line_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

uint64_t cr_test_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int cr_test_connect(uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    int fd;
    int one = 1;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int err = -errno;

        close(fd);
        return err;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

int cr_test_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int cr_test_client_open(struct cr_test_client *cl, uint16_t port)
{
    cl->off = 0;
    cl->len = 0;
    cl->fd = cr_test_connect(port);
    return cl->fd < 0 ? cl->fd : 0;
}

void cr_test_client_close(struct cr_test_client *cl)
{
    if (cl->fd >= 0)
        close(cl->fd);
    cl->fd = -1;
}

int cr_test_client_send(struct cr_test_client *cl, const char *s)
{
    return cr_test_write_all(cl->fd, s, strlen(s));
}

/* Refills the buffer, waiting until deadline (ms). */
static int fill(struct cr_test_client *cl, uint64_t deadline)
{
    for (;;) {
        struct pollfd pfd = {.fd = cl->fd, .events = POLLIN};
        uint64_t now = cr_test_now_ms();
        ssize_t n;

        if (now >= deadline)
            return -ETIMEDOUT;
        if (poll(&pfd, 1, (int)(deadline - now)) <= 0)
            continue;
        n = recv(cl->fd, cl->buf, sizeof(cl->buf), MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EPIPE;
        cl->off = 0;
        cl->len = (size_t)n;
        return 0;
    }
}

ssize_t cr_test_client_line(struct cr_test_client *cl, char *line, size_t max, int timeout_ms)
{
    uint64_t deadline = cr_test_now_ms() + (uint64_t)timeout_ms;
    size_t n = 0;

    for (;;) {
        int err;

        while (cl->off < cl->len) {
            char ch = cl->buf[cl->off++];

            if (ch == '\n') {
                line[n] = '\0';
                return (ssize_t)n;
            }
            if (n + 1 >= max)
                return -ENOSPC;
            line[n++] = ch;
        }
        err = fill(cl, deadline);
        if (err < 0)
            return err;
    }
}

int cr_test_client_read(struct cr_test_client *cl, char *buf, size_t len, int timeout_ms)
{
    uint64_t deadline = cr_test_now_ms() + (uint64_t)timeout_ms;

    while (len > 0) {
        size_t take = cl->len - cl->off < len ? cl->len - cl->off : len;
        int err;

        if (take > 0) {
            if (buf != NULL) {
                memcpy(buf, cl->buf + cl->off, take);
                buf += take;
            }
            cl->off += take;
            len -= take;
            continue;
        }
        err = fill(cl, deadline);
        if (err < 0)
            return err;
    }
    return 0;
}

int cr_test_client_eof(struct cr_test_client *cl, int timeout_ms)
{
    int err;

    if (cl->off < cl->len)
        return -EPROTO;
    err = fill(cl, cr_test_now_ms() + (uint64_t)timeout_ms);
    if (err == -EPIPE || err == -ECONNRESET)
        return 0;
    return err == 0 ? -EPROTO : err;
}

ssize_t cr_test_client_request(struct cr_test_client *cl, const char *line, char *reply_buf,
                               size_t max, int timeout_ms)
{
    size_t len = strlen(line);
    char *msg = malloc(len + 1);
    int err;

    if (msg == NULL)
        return -ENOMEM;
    memcpy(msg, line, len);
    msg[len] = '\n';
    err = cr_test_write_all(cl->fd, msg, len + 1);
    free(msg);
    if (err < 0)
        return err;
    return cr_test_client_line(cl, reply_buf, max, timeout_ms);
}
