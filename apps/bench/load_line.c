/*
 * load_line.c - cabrank-bench's own load generator for the line protocol (tests/support's
 * line service): N connections on one epoll loop, "<id> ECHO ping\n" answered by one line.
 * Closed loop: one request outstanding per connection, the next sent when the reply comes.
 * Open loop: requests fall due at a fixed rate, round-robin over the connections, and go
 * out when due whatever is outstanding (pipelined); each latency runs from the intended
 * time, not the send, so a server that falls behind cannot hide it by slowing the client
 * (coordinated omission). Waits use epoll_pwait2()'s nanosecond timeout so the generator
 * sleeps between sends rather than spinning on the cores the server needs.
 * Single-threaded; owns its connections for one run.
 * A share of the requests may be "<id> SLEEP <ms>\n" instead: handlers that block.
 */
#include "driver.h"

#include <cabrank/clock.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RING       1024 /* requests outstanding on a connection, at most */
#define OUT_CAP    8192 /* bytes waiting to be sent on a connection */
#define IN_CAP     4096
#define DRAIN_NS   2000000000u
#define MAX_WARM   500000000u
#define MAX_EVENTS 256

struct line_conn {
    int fd;
    bool want_out; /* EPOLLOUT is armed */
    size_t in_used;
    size_t out_used;
    unsigned head; /* oldest outstanding request in due[] */
    unsigned count;
    uint64_t due[RING]; /* intended (open) or actual (closed) send times, ns */
    char in[IN_CAP];
    char out[OUT_CAP];
};

struct run {
    const struct bench_line_load *l;
    struct line_conn *c;
    int ep;
    uint64_t next_id;
    uint64_t t_measure; /* samples and counts from here */
    uint64_t done;      /* replies counted */
    uint64_t errors;
    struct bench_samples s;
    int err;
};

static int connect_one(uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int err;

    if (fd < 0)
        return -errno;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
        fcntl(fd, F_SETFL, O_NONBLOCK) < 0) {
        err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

/* Arms or disarms EPOLLOUT to match whether output waits. */
static void update_interest(struct run *r, struct line_conn *c, unsigned idx)
{
    bool want = c->out_used > 0;
    struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.u32 = idx};

    if (want == c->want_out)
        return;
    if (epoll_ctl(r->ep, EPOLL_CTL_MOD, c->fd, &ev) == 0)
        c->want_out = want;
}

/* Sends what waits; a connection the server closed counts its outstanding requests as
 * errors once, when its replies stop (read side). */
static void flush(struct run *r, struct line_conn *c, unsigned idx)
{
    while (c->out_used > 0) {
        ssize_t n = send(c->fd, c->out, c->out_used, MSG_NOSIGNAL);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        memmove(c->out, c->out + n, c->out_used - (size_t)n);
        c->out_used -= (size_t)n;
    }
    update_interest(r, c, idx);
}

bool bench_line_sleeps(uint64_t id, double share)
{
    /* When the running count of sleepers, id * share, steps up: evenly spread. */
    return share > 0 && (uint64_t)((double)(id + 1) * share) > (uint64_t)((double)id * share);
}

/* Queues one request due at due; false (an error counted) when the connection is full. */
static bool queue_request(struct run *r, struct line_conn *c, unsigned idx, uint64_t due)
{
    char req[48];
    uint64_t id = r->next_id++;
    bool sleeps = bench_line_sleeps(id, r->l->sleep_share);
    int len = sleeps ? snprintf(req, sizeof(req), "%llu SLEEP %u\n", (unsigned long long)id,
                                r->l->sleep_ms)
                     : snprintf(req, sizeof(req), "%llu ECHO ping\n", (unsigned long long)id);

    if (c->fd < 0 || c->count == RING || c->out_used + (size_t)len > OUT_CAP) {
        if (due >= r->t_measure)
            r->errors++;
        return false;
    }
    memcpy(c->out + c->out_used, req, (size_t)len);
    c->out_used += (size_t)len;
    c->due[(c->head + c->count) % RING] = due;
    c->count++;
    flush(r, c, idx);
    return true;
}

static void close_conn(struct run *r, struct line_conn *c)
{
    for (unsigned k = 0; k < c->count; k++) {
        if (c->due[(c->head + k) % RING] >= r->t_measure)
            r->errors++;
    }
    c->count = 0;
    c->out_used = 0;
    epoll_ctl(r->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
}

/* Reads replies; in a closed loop sends the next request for each while sending is on. */
static void on_input(struct run *r, struct line_conn *c, unsigned idx, bool sending)
{
    for (;;) {
        ssize_t n = recv(c->fd, c->in + c->in_used, IN_CAP - c->in_used, 0);
        uint64_t now;
        char *nl;

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            close_conn(r, c);
            return;
        }
        c->in_used += (size_t)n;
        now = cr_clock_now_ns();
        while ((nl = memchr(c->in, '\n', c->in_used)) != NULL) {
            size_t len = (size_t)(nl + 1 - c->in);
            bool bad = memmem(c->in, len, " ERR", 4) != NULL;

            if (c->count > 0) {
                uint64_t due = c->due[c->head];

                c->head = (c->head + 1) % RING;
                c->count--;
                if (due >= r->t_measure) {
                    if (bad) {
                        r->errors++;
                    } else {
                        r->done++;
                        if (bench_samples_add(&r->s, now - due) < 0)
                            r->err = -ENOMEM;
                    }
                }
            } else {
                r->errors++; /* a reply to nothing */
            }
            memmove(c->in, nl + 1, c->in_used - len);
            c->in_used -= len;
            if (sending && r->l->rate <= 0)
                queue_request(r, c, idx, now);
        }
        if (c->in_used == IN_CAP)
            c->in_used = 0; /* no line is this long: drop it */
    }
}

static void poll_once(struct run *r, uint64_t until, bool sending)
{
    struct epoll_event evs[MAX_EVENTS];
    uint64_t now = cr_clock_now_ns();
    uint64_t wait = until > now ? until - now : 0;
    struct timespec ts = {.tv_sec = (time_t)(wait / 1000000000u),
                          .tv_nsec = (long)(wait % 1000000000u)};
    int n = epoll_pwait2(r->ep, evs, MAX_EVENTS, &ts, NULL);

    for (int k = 0; k < n; k++) {
        unsigned idx = evs[k].data.u32;
        struct line_conn *c = &r->c[idx];

        if (c->fd < 0)
            continue;
        if (evs[k].events & EPOLLOUT)
            flush(r, c, idx);
        if (c->fd >= 0 && (evs[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
            on_input(r, c, idx, sending);
    }
}

static uint64_t outstanding(const struct run *r)
{
    uint64_t n = 0;

    for (unsigned i = 0; i < r->l->connections; i++)
        n += r->c[i].count;
    return n;
}

int bench_line_run(const struct bench_line_load *l, struct bench_load_result *res)
{
    struct run r = {.l = l, .err = 0};
    uint64_t t0;
    uint64_t end;
    uint64_t warm;
    uint64_t interval = l->rate > 0 ? (uint64_t)(1e9 / l->rate) : 0;
    uint64_t next_due;
    uint64_t k = 0;
    int err = 0;

    memset(res, 0, sizeof(*res));
    res->rps = NAN;
    res->pcts = (struct bench_pcts){NAN, NAN, NAN, NAN};
    if (l->connections == 0 || (l->rate > 0 && interval == 0))
        return -EINVAL;
    r.c = calloc(l->connections, sizeof(*r.c));
    if (r.c == NULL)
        return -ENOMEM;
    r.ep = epoll_create1(EPOLL_CLOEXEC);
    if (r.ep < 0) {
        err = -errno;
        goto out_free;
    }
    for (unsigned i = 0; i < l->connections; i++)
        r.c[i].fd = -1;
    for (unsigned i = 0; i < l->connections; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};

        r.c[i].fd = connect_one(l->port);
        if (r.c[i].fd < 0) {
            err = r.c[i].fd;
            goto out_close;
        }
        if (epoll_ctl(r.ep, EPOLL_CTL_ADD, r.c[i].fd, &ev) < 0) {
            err = -errno;
            goto out_close;
        }
    }
    t0 = cr_clock_now_ns();
    warm = (uint64_t)(l->seconds * 1e9 / 10);
    if (warm > MAX_WARM)
        warm = MAX_WARM;
    r.t_measure = t0 + warm;
    end = t0 + (uint64_t)(l->seconds * 1e9);
    next_due = t0;
    if (interval == 0) {
        for (unsigned i = 0; i < l->connections; i++)
            queue_request(&r, &r.c[i], i, t0);
    }
    while (r.err == 0 && cr_clock_now_ns() < end) {
        uint64_t until = end;

        if (interval > 0) {
            uint64_t now = cr_clock_now_ns();

            /* Everything due by now goes out, late or not: its latency counts from due. */
            while (next_due <= now && next_due < end) {
                unsigned idx = (unsigned)(k++ % l->connections);

                queue_request(&r, &r.c[idx], idx, next_due);
                next_due = t0 + k * interval;
            }
            until = next_due < end ? next_due : end;
        }
        poll_once(&r, until, true);
    }
    res->seconds = (double)(cr_clock_now_ns() - r.t_measure) / 1e9;
    res->rps = (double)r.done / res->seconds;
    if (interval > 0) {
        /* Late replies still count toward latency (that is the point of the open loop); what
         * never comes within DRAIN_NS is an error. */
        uint64_t drain_end = cr_clock_now_ns() + DRAIN_NS;

        while (r.err == 0 && outstanding(&r) > 0 && cr_clock_now_ns() < drain_end)
            poll_once(&r, drain_end, false);
        for (unsigned i = 0; i < l->connections; i++) {
            for (unsigned j = 0; j < r.c[i].count; j++) {
                if (r.c[i].due[(r.c[i].head + j) % RING] >= r.t_measure)
                    r.errors++;
            }
        }
    }
    res->requests = r.done;
    res->errors = r.errors;
    res->pcts = bench_samples_pcts(&r.s);
    err = r.err;
out_close:
    for (unsigned i = 0; i < l->connections; i++) {
        if (r.c[i].fd >= 0)
            close(r.c[i].fd);
    }
    close(r.ep);
out_free:
    bench_samples_fini(&r.s);
    free(r.c);
    return err;
}
