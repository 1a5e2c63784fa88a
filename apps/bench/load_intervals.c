/*
 * load_intervals.c - the response-time intervals of the pattern paper
 * (request-processing-server-patterns, section 1.2), seen from the client:
 *   t_conn   from connect() until the connection is established;
 *   t_res1   from sending the first request on a new connection until its whole response;
 *   t_res2+  the same for each further request on that keep-alive connection.
 * N clients run one after another (after 20 not measured: workers started, the file
 * cached): connect, GET the file, k more GETs, close.
 *
 * On Linux the kernel completes the handshake before the server calls accept(), so t_conn
 * shows the listen queue, not the model; what a model spends to take a new connection (the
 * paper's t_1 + t_2 + t_3: accept, a fork, a handover to a worker) shows in t_res1 - t_res2+.
 * Single-threaded; one connection at a time.
 */
#include "driver.h"

#include <cabrank/clock.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define WARMUP       20 /* clients not measured */
#define IO_TIMEOUT_S 5  /* a client gives up on a silent server */
#define RESP_MAX     (2 << 20)

struct interval_samples {
    struct bench_samples conn;
    struct bench_samples res1;
    struct bench_samples res2;
};

static int connect_to(uint16_t port, uint64_t *t_conn)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    uint64_t t0;
    int err;

    if (fd < 0)
        return -errno;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
        goto out_errno;
    t0 = cr_clock_now_ns();
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        goto out_errno;
    *t_conn = cr_clock_now_ns() - t0;
    return fd;
out_errno:
    err = -errno;
    close(fd);
    return err;
}

/* Content-Length of a response head (head[0..len) ends with CRLFCRLF); -1 if none. */
static long long content_length(const char *head, size_t len)
{
    static const char name[] = "\r\ncontent-length:";
    size_t nlen = sizeof(name) - 1;

    for (size_t i = 0; i + nlen <= len; i++) {
        if (strncasecmp(head + i, name, nlen) == 0) {
            const char *p = head + i + nlen;

            while (*p == ' ' || *p == '\t')
                p++;
            return isdigit((unsigned char)*p) ? strtoll(p, NULL, 10) : -1;
        }
    }
    return -1;
}

/* Sends one GET and reads its whole response; the time it took in *t. A reason on failure,
 * NULL on success. */
static const char *get(int fd, const char *req, size_t reqlen, size_t want, char *buf, uint64_t *t)
{
    uint64_t t0 = cr_clock_now_ns();
    size_t used = 0;
    size_t head = 0;
    long long clen = -1;

    if (send(fd, req, reqlen, MSG_NOSIGNAL) != (ssize_t)reqlen)
        return "send failed";
    for (;;) {
        ssize_t n;

        if (head > 0 && used >= head + (size_t)clen)
            break;
        if (used == RESP_MAX)
            return "response too long";
        n = recv(fd, buf + used, RESP_MAX - used, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN ? "timed out" : "recv failed";
        if (n == 0)
            return "closed by the server";
        used += (size_t)n;
        if (head == 0) {
            char *end = memmem(buf, used, "\r\n\r\n", 4);

            if (end == NULL)
                continue;
            head = (size_t)(end + 4 - buf);
            if (used < 12 || memcmp(buf + 9, "200", 3) != 0)
                return "status not 200";
            clen = content_length(buf, head);
            if (clen < 0 || (size_t)clen != want)
                return "wrong Content-Length";
        }
    }
    *t = cr_clock_now_ns() - t0;
    return used == head + (size_t)clen ? NULL : "bytes beyond the response";
}

/* One client: connect, GET, k more GETs, close. Records its samples when s is not NULL. A
 * reason on failure, NULL on success. */
static const char *run_client(const struct bench_interval_load *l, const char *req, char *buf,
                              struct interval_samples *s)
{
    uint64_t t_conn = 0;
    uint64_t t1;
    uint64_t t;
    const char *why;
    int fd = connect_to(l->port, &t_conn);

    if (fd < 0)
        return "connect failed";
    why = get(fd, req, strlen(req), l->size, buf, &t1);
    for (unsigned j = 0; why == NULL && j < l->requests; j++) {
        why = get(fd, req, strlen(req), l->size, buf, &t);
        if (why == NULL && s != NULL && bench_samples_add(&s->res2, t) < 0)
            why = "out of memory";
    }
    if (why == NULL && s != NULL &&
        (bench_samples_add(&s->conn, t_conn) < 0 || bench_samples_add(&s->res1, t1) < 0))
        why = "out of memory";
    close(fd);
    return why;
}

int bench_intervals_run(const struct bench_interval_load *l, struct bench_interval_result *r)
{
    struct interval_samples s;
    char req[512];
    const char *why = NULL;
    uint64_t t0;
    uint64_t end;
    char *buf = malloc(RESP_MAX);

    memset(r, 0, sizeof(*r));
    memset(&s, 0, sizeof(s));
    if (buf == NULL)
        return -ENOMEM;
    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: bench\r\n\r\n", l->path);
    for (int i = 0; i < WARMUP && why == NULL; i++)
        why = run_client(l, req, buf, NULL);
    t0 = cr_clock_now_ns();
    end = t0 + (uint64_t)(l->seconds * 1e9);
    while (why == NULL && s.conn.len < l->clients && cr_clock_now_ns() < end)
        why = run_client(l, req, buf, &s);
    r->seconds = (double)(cr_clock_now_ns() - t0) / 1e9;
    r->clients = (unsigned)s.conn.len;
    r->errors = why != NULL;
    r->why = why;
    r->conn = bench_samples_pcts(&s.conn);
    r->res1 = bench_samples_pcts(&s.res1);
    r->res2 = bench_samples_pcts(&s.res2);
    bench_samples_fini(&s.conn);
    bench_samples_fini(&s.res1);
    bench_samples_fini(&s.res2);
    free(buf);
    return 0;
}
