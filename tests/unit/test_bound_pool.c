/*
 * test_bound_pool.c - the bound handle/thread Leader/Followers pool. A fake
 * back end on the other end of a socket pair speaks "<id> <payload>\n" and
 * answers out of order. Standalone: replies reach their own threads, hand-off
 * and promotion happen exactly when the paper says, a dying back end or
 * cr_bound_pool_fail wakes every waiter with an error, timeouts drop late
 * replies, bad input gets error codes. Hybrid: a server on a cr_lf_pool whose
 * handler calls the back end through the pool, with more concurrent requests
 * than threads and a back end that answers only once it holds several
 * requests, serves every client (a naive design deadlocks).
 */
#include <cabrank/bound_pool.h>
#include <cabrank/lf_pool.h>
#include <cabrank/reactor.h>

#include "../support/support.h"

#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Generous: a loaded 2-core machine under TSan; nothing waits this long
 * unless it is broken. */
#define LONG_MS 20000

/* ------------------------------------------------------------------ protocol */

/* "<decimal id> <payload>\n". */
static ssize_t decode_line(void *arg, const char *buf, size_t len, uint64_t *id,
                           const char **payload, size_t *payload_len)
{
    const char *nl = memchr(buf, '\n', len);
    const char *s = buf;
    uint64_t v = 0;

    (void)arg;
    if (nl == NULL)
        return -EAGAIN;
    if (s == nl || *s < '0' || *s > '9')
        return -EBADMSG;
    while (s < nl && *s >= '0' && *s <= '9')
        v = v * 10 + (uint64_t)(*s++ - '0');
    if (s == nl || *s != ' ')
        return -EBADMSG;
    s++;
    *id = v;
    *payload = s;
    *payload_len = (size_t)(nl - s);
    return nl + 1 - buf;
}

static void make_pair(int sv[2])
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

struct fail_log {
    int calls;
    int err;
};

/* on_fail runs on a pool user's thread; the test reads it after joining. */
static void record_failure(struct cr_bound_pool *p, int err, void *arg)
{
    struct fail_log *f = arg;

    (void)p;
    __atomic_add_fetch(&f->calls, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&f->err, err, __ATOMIC_RELAXED);
}

static struct cr_bound_pool *open_pool(struct fail_log *fl, size_t read_buffer)
{
    struct cr_bound_pool_config cfg = {
        .decode = decode_line,
        .read_buffer = read_buffer,
        .on_fail = fl ? record_failure : NULL,
        .fail_arg = fl,
    };
    struct cr_bound_pool *p;

    ck_assert_int_eq(cr_bound_pool_create(&p, &cfg), 0);
    return p;
}

static struct cr_bound_pool_stats stats_of(struct cr_bound_pool *p)
{
    struct cr_bound_pool_stats st;

    cr_bound_pool_stats(p, &st);
    return st;
}

/* Polls the pool's state until pred holds; fails the test after LONG_MS. */
static void wait_for(struct cr_bound_pool *p, bool (*pred)(const struct cr_bound_pool_stats *, int),
                     int arg)
{
    uint64_t end = cr_test_now_ms() + LONG_MS;

    for (;;) {
        struct cr_bound_pool_stats st = stats_of(p);

        if (pred(&st, arg))
            return;
        ck_assert_msg(cr_test_now_ms() < end, "pool never reached the expected state");
        usleep(1000);
    }
}

static bool is_leading_with(const struct cr_bound_pool_stats *st, int followers)
{
    return st->leading && st->followers == (unsigned)followers;
}

static bool has_dropped(const struct cr_bound_pool_stats *st, int n)
{
    return st->dropped >= (uint64_t)n;
}

static bool is_following_or_timed_out(const struct cr_bound_pool_stats *st, int followers)
{
    return is_leading_with(st, followers) || st->timeouts > 0;
}

/* Reads one '\n'-terminated line from a blocking fd into buf (NUL-ended,
 * newline dropped). */
static void read_line(int fd, char *buf, size_t cap)
{
    size_t n = 0;

    for (;;) {
        ck_assert_uint_lt(n, cap - 1);
        ck_assert_int_eq(cr_test_read_exact(fd, buf + n, 1, LONG_MS), 0);
        if (buf[n] == '\n')
            break;
        n++;
    }
    buf[n] = '\0';
}

static void write_str(int fd, const char *s)
{
    ck_assert_int_eq(cr_test_write_all(fd, s, strlen(s)), 0);
}

/* ------------------------------------------------------------------ callers */

/* One request in its own thread: call(id, payload) with its own context. */
struct caller {
    struct cr_bound_pool *p;
    uint64_t id;
    char payload[32];
    int timeout_ms;
    ssize_t rc;
    char reply[64];
    pthread_t th;
};

static void *caller_main(void *arg)
{
    struct caller *c = arg;
    struct cr_bound_ctx ctx;
    char req[64];
    int len = snprintf(req, sizeof(req), "%" PRIu64 " %s\n", c->id, c->payload);

    ck_assert_int_eq(cr_bound_ctx_init(&ctx), 0);
    c->rc = cr_bound_pool_call(c->p, &ctx, c->id, req, (size_t)len, c->reply, sizeof(c->reply) - 1,
                               c->timeout_ms);
    if (c->rc >= 0)
        c->reply[c->rc] = '\0';
    cr_bound_ctx_fini(&ctx);
    return NULL;
}

static void start_caller(struct caller *c, struct cr_bound_pool *p, uint64_t id,
                         const char *payload, int timeout_ms)
{
    c->p = p;
    c->id = id;
    snprintf(c->payload, sizeof(c->payload), "%s", payload);
    c->timeout_ms = timeout_ms;
    c->rc = -1;
    ck_assert_int_eq(pthread_create(&c->th, NULL, caller_main, c), 0);
}

static void join_caller(struct caller *c)
{
    ck_assert_int_eq(pthread_join(c->th, NULL), 0);
}

/* ------------------------------------------------------------------ back end */

#define BACKEND_MAX_PENDING 64

/*
 * A fake back end thread: collects requests and answers them in reverse
 * order once it holds `batch` of them, or after idle_ms without a new one
 * (so it never stalls a test), each answer "<id> r<payload>\n", all of a
 * batch in one write.
 */
struct backend {
    int fd;
    int batch;
    int idle_ms;
    pthread_t th;
    /* Written by the back end thread, read after pthread_join. */
    int received;
    int answered;
};

static void backend_flush(struct backend *b, char (*pending)[80], int *npending)
{
    char out[BACKEND_MAX_PENDING * 84];
    size_t len = 0;

    for (int i = *npending - 1; i >= 0; i--) {
        char *sp = strchr(pending[i], ' ');

        ck_assert_ptr_nonnull(sp);
        len += (size_t)snprintf(out + len, sizeof(out) - len, "%.*s r%s\n", (int)(sp - pending[i]),
                                pending[i], sp + 1);
    }
    b->answered += *npending;
    *npending = 0;
    if (len > 0)
        (void)cr_test_write_all(b->fd, out, len);
}

static void *backend_main(void *arg)
{
    struct backend *b = arg;
    char pending[BACKEND_MAX_PENDING][80];
    int npending = 0;
    char in[4096];
    size_t inlen = 0;

    for (;;) {
        struct pollfd pfd = {.fd = b->fd, .events = POLLIN};
        int rc = poll(&pfd, 1, npending > 0 ? b->idle_ms : 1000);
        ssize_t n;
        char *nl;

        if (rc == 0) {
            backend_flush(b, pending, &npending);
            continue;
        }
        n = read(b->fd, in + inlen, sizeof(in) - inlen);
        if (n <= 0)
            break;
        inlen += (size_t)n;
        while ((nl = memchr(in, '\n', inlen)) != NULL) {
            size_t l = (size_t)(nl - in);

            ck_assert_int_lt(npending, BACKEND_MAX_PENDING);
            ck_assert_uint_lt(l, sizeof(pending[0]));
            memcpy(pending[npending], in, l);
            pending[npending][l] = '\0';
            npending++;
            b->received++;
            memmove(in, nl + 1, inlen - l - 1);
            inlen -= l + 1;
        }
        if (npending >= b->batch)
            backend_flush(b, pending, &npending);
    }
    return NULL;
}

static void start_backend(struct backend *b, int fd, int batch, int idle_ms)
{
    memset(b, 0, sizeof(*b));
    b->fd = fd;
    b->batch = batch;
    b->idle_ms = idle_ms;
    ck_assert_int_eq(pthread_create(&b->th, NULL, backend_main, b), 0);
}

/* The back end leaves when the pool's end closes. */
static void join_backend(struct backend *b)
{
    ck_assert_int_eq(pthread_join(b->th, NULL), 0);
    close(b->fd);
}

/* ------------------------------------------------------------------ standalone */

#define NTHREADS 4
#define NREQS    50

struct client {
    struct cr_bound_pool *p;
    int idx;
    int ok;
    pthread_t th;
};

/* M requests in a row, each with a unique payload, checked against its reply. */
static void *client_main(void *arg)
{
    struct client *cl = arg;
    struct cr_bound_ctx ctx;

    ck_assert_int_eq(cr_bound_ctx_init(&ctx), 0);
    for (int i = 0; i < NREQS; i++) {
        uint64_t id = cr_bound_pool_next_id(cl->p);
        char req[64];
        char want[64];
        char reply[64];
        int len = snprintf(req, sizeof(req), "%" PRIu64 " t%d-%d\n", id, cl->idx, i);
        ssize_t rc;

        snprintf(want, sizeof(want), "rt%d-%d", cl->idx, i);
        rc = cr_bound_pool_call(cl->p, &ctx, id, req, (size_t)len, reply, sizeof(reply), LONG_MS);
        ck_assert_int_eq(rc, (ssize_t)strlen(want));
        ck_assert(memcmp(reply, want, (size_t)rc) == 0);
        cl->ok++;
    }
    cr_bound_ctx_fini(&ctx);
    return NULL;
}

START_TEST(out_of_order_replies_reach_their_own_threads)
{
    struct cr_bound_pool *p = open_pool(NULL, 0);
    struct client cl[NTHREADS];
    struct backend be;
    struct cr_bound_pool_stats st;
    int sv[2];

    make_pair(sv);
    ck_assert_int_eq(cr_bound_pool_attach(p, sv[0]), 0);
    start_backend(&be, sv[1], NTHREADS, 20);
    for (int i = 0; i < NTHREADS; i++) {
        cl[i] = (struct client){.p = p, .idx = i};
        ck_assert_int_eq(pthread_create(&cl[i].th, NULL, client_main, &cl[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) {
        ck_assert_int_eq(pthread_join(cl[i].th, NULL), 0);
        ck_assert_int_eq(cl[i].ok, NREQS);
    }
    st = stats_of(p);
    ck_assert_uint_eq(st.sent, NTHREADS * NREQS);
    ck_assert_uint_eq(st.delivered, NTHREADS * NREQS);
    ck_assert_uint_eq(st.dropped, 0);
    ck_assert_uint_eq(st.failures, 0);
    ck_assert_uint_eq(st.registered, 0);
    ck_assert_uint_eq(st.followers, 0);
    ck_assert(!st.leading);
    /* Only a leader reads, and whole reversed batches arrive in one write:
     * most replies are handed to a thread other than their reader. */
    ck_assert_uint_gt(st.handed_off, 0);
    ck_assert_uint_le(st.handed_off, st.delivered);
    cr_bound_pool_destroy(p);
    join_backend(&be);
    ck_assert_int_eq(be.received, NTHREADS * NREQS);
}
END_TEST

/*
 * A leads, B follows; the reply for A comes first: A takes it itself (no
 * hand-off) and promotes B, who then reads its own reply.
 */
START_TEST(leader_takes_own_reply_and_promotes_follower)
{
    struct cr_bound_pool *p = open_pool(NULL, 0);
    struct caller a;
    struct caller b;
    struct cr_bound_pool_stats st;
    char line[80];
    int sv[2];

    make_pair(sv);
    ck_assert_int_eq(cr_bound_pool_attach(p, sv[0]), 0);
    start_caller(&a, p, 1, "a", LONG_MS);
    wait_for(p, is_leading_with, 0);
    start_caller(&b, p, 2, "b", LONG_MS);
    wait_for(p, is_leading_with, 1);
    read_line(sv[1], line, sizeof(line));
    ck_assert_str_eq(line, "1 a");
    read_line(sv[1], line, sizeof(line));
    ck_assert_str_eq(line, "2 b");

    write_str(sv[1], "1 ra\n");
    join_caller(&a);
    ck_assert_int_eq(a.rc, 2);
    ck_assert_str_eq(a.reply, "ra");
    st = stats_of(p);
    ck_assert_uint_eq(st.promotions, 1);
    ck_assert_uint_eq(st.handed_off, 0);
    ck_assert(st.leading); /* B now */
    ck_assert_uint_eq(st.followers, 0);

    write_str(sv[1], "2 rb\n");
    join_caller(&b);
    ck_assert_int_eq(b.rc, 2);
    ck_assert_str_eq(b.reply, "rb");
    st = stats_of(p);
    ck_assert_uint_eq(st.delivered, 2);
    ck_assert_uint_eq(st.handed_off, 0);
    ck_assert_uint_eq(st.promotions, 1);
    ck_assert(!st.leading);
    cr_bound_pool_destroy(p);
    close(sv[1]);
}
END_TEST

/*
 * A leads, B and C follow; replies come C, B, A: the leader hands C's and
 * B's replies to exactly those threads (specific notification) and keeps
 * leading until its own arrives; nobody is promoted.
 */
START_TEST(leader_hands_off_replies_of_followers)
{
    struct cr_bound_pool *p = open_pool(NULL, 0);
    struct caller c[3];
    struct cr_bound_pool_stats st;
    char line[80];
    int sv[2];

    make_pair(sv);
    ck_assert_int_eq(cr_bound_pool_attach(p, sv[0]), 0);
    for (int i = 0; i < 3; i++) {
        char payload[16];

        snprintf(payload, sizeof(payload), "p%d", i);
        start_caller(&c[i], p, (uint64_t)(i + 1), payload, LONG_MS);
        wait_for(p, is_leading_with, i);
        read_line(sv[1], line, sizeof(line));
    }

    write_str(sv[1], "3 rp2\n");
    join_caller(&c[2]);
    ck_assert_str_eq(c[2].reply, "rp2");
    st = stats_of(p);
    ck_assert_uint_eq(st.handed_off, 1);
    ck_assert(st.leading);
    ck_assert_uint_eq(st.followers, 1);

    write_str(sv[1], "2 rp1\n");
    join_caller(&c[1]);
    ck_assert_str_eq(c[1].reply, "rp1");
    ck_assert_uint_eq(stats_of(p).handed_off, 2);

    write_str(sv[1], "1 rp0\n");
    join_caller(&c[0]);
    ck_assert_str_eq(c[0].reply, "rp0");
    st = stats_of(p);
    ck_assert_uint_eq(st.delivered, 3);
    ck_assert_uint_eq(st.handed_off, 2);
    ck_assert_uint_eq(st.promotions, 0);
    ck_assert(!st.leading);
    cr_bound_pool_destroy(p);
    close(sv[1]);
}
END_TEST

/* _i = 0: the back end dies (EOF); _i = 1: cr_bound_pool_fail. */
START_TEST(connection_failure_wakes_every_waiter_with_an_error)
{
    struct fail_log fl = {0};
    struct cr_bound_pool *p = open_pool(&fl, 0);
    struct caller c[NTHREADS];
    struct cr_bound_ctx ctx;
    struct backend be;
    char line[80];
    char reply[64];
    int want = _i == 0 ? -ECONNRESET : -ECONNABORTED;
    uint64_t t0;
    int sv[2];

    make_pair(sv);
    ck_assert_int_eq(cr_bound_pool_attach(p, sv[0]), 0);
    for (int i = 0; i < NTHREADS; i++) {
        start_caller(&c[i], p, (uint64_t)(i + 1), "x", LONG_MS);
        wait_for(p, is_leading_with, i);
        read_line(sv[1], line, sizeof(line));
    }
    t0 = cr_test_now_ms();
    if (_i == 0)
        close(sv[1]);
    else
        cr_bound_pool_fail(p, -ECONNABORTED);
    for (int i = 0; i < NTHREADS; i++) {
        join_caller(&c[i]);
        ck_assert_int_eq(c[i].rc, want);
    }
    /* Promptly: woken, not timed out (LONG_MS). */
    ck_assert_uint_lt(cr_test_now_ms() - t0, LONG_MS / 4);
    ck_assert_int_eq(__atomic_load_n(&fl.calls, __ATOMIC_RELAXED), 1);
    ck_assert_int_eq(__atomic_load_n(&fl.err, __ATOMIC_RELAXED), want);
    ck_assert(!stats_of(p).connected);
    ck_assert_uint_eq(stats_of(p).failures, 1);
    ck_assert_uint_eq(stats_of(p).registered, 0);
    ck_assert(!stats_of(p).leading);

    /* Later calls fail fast until a new connection is attached. */
    ck_assert_int_eq(cr_bound_ctx_init(&ctx), 0);
    ck_assert_int_eq(cr_bound_pool_expect(p, &ctx, 9, reply, sizeof(reply)), want);
    ck_assert_int_eq(cr_bound_pool_send(p, "9 x\n", 4, LONG_MS), want);
    ck_assert_int_eq(cr_bound_pool_join(p, &ctx, 0), -EINVAL);
    cr_bound_pool_fail(p, -EIO); /* no connection: nothing happens */
    ck_assert_int_eq(__atomic_load_n(&fl.calls, __ATOMIC_RELAXED), 1);

    if (_i == 1)
        close(sv[1]);
    make_pair(sv);
    ck_assert_int_eq(cr_bound_pool_attach(p, sv[0]), 0);
    start_backend(&be, sv[1], 1, 20);
    ck_assert_int_eq(cr_bound_pool_call(p, &ctx, 9, "9 again\n", 8, reply, sizeof(reply), LONG_MS),
                     6);
    ck_assert(memcmp(reply, "ragain", 6) == 0);
    cr_bound_ctx_fini(&ctx);
    cr_bound_pool_destroy(p);
    join_backend(&be);
}
END_TEST

/*
 * A times out (as leader for _i = 0, as follower for _i = 1) while B keeps
 * waiting; A's late reply arrives before B's and is dropped and counted.
 */
START_TEST(timeout_unregisters_and_late_reply_is_dropped)
{
    struct cr_bound_pool *p = open_pool(NULL, 0);
    struct caller a;
    struct caller b;
    struct cr_bound_pool_stats st;
    char line[80];
    int sv[2];

    make_pair(sv);
    ck_assert_int_eq(cr_bound_pool_attach(p, sv[0]), 0);
    if (_i == 0) {
        start_caller(&a, p, 1, "a", 500);
        wait_for(p, is_leading_with, 0);
        start_caller(&b, p, 2, "b", LONG_MS);
        /* Normally B follows before A times out; on a starved machine A may
         * time out first, which changes roles, not outcomes. */
        wait_for(p, is_following_or_timed_out, 1);
    } else {
        start_caller(&b, p, 2, "b", LONG_MS);
        wait_for(p, is_leading_with, 0);
        start_caller(&a, p, 1, "a", 500);
    }
    read_line(sv[1], line, sizeof(line));
    read_line(sv[1], line, sizeof(line));
    join_caller(&a);
    ck_assert_int_eq(a.rc, -ETIMEDOUT);
    /* B leads: promoted, still leading, or joined after A left. */
    wait_for(p, is_leading_with, 0);
    st = stats_of(p);
    ck_assert_uint_eq(st.timeouts, 1);
    ck_assert_uint_eq(st.registered, 1);

    write_str(sv[1], "1 late\n2 rb\n");
    join_caller(&b);
    ck_assert_int_eq(b.rc, 2);
    ck_assert_str_eq(b.reply, "rb");
    st = stats_of(p);
    ck_assert_uint_eq(st.dropped, 1);
    ck_assert_uint_eq(st.delivered, 1);
    ck_assert_uint_eq(st.failures, 0);
    ck_assert(st.connected);
    cr_bound_pool_destroy(p);
    close(sv[1]);
}
END_TEST

START_TEST(every_waiter_times_out_when_the_back_end_is_silent)
{
    struct cr_bound_pool *p = open_pool(NULL, 0);
    struct caller c[3];
    struct cr_bound_pool_stats st;
    int sv[2];

    make_pair(sv);
    ck_assert_int_eq(cr_bound_pool_attach(p, sv[0]), 0);
    for (int i = 0; i < 3; i++)
        start_caller(&c[i], p, (uint64_t)(i + 1), "s", 100);
    for (int i = 0; i < 3; i++) {
        join_caller(&c[i]);
        ck_assert_int_eq(c[i].rc, -ETIMEDOUT);
    }
    st = stats_of(p);
    ck_assert_uint_eq(st.timeouts, 3);
    ck_assert_uint_eq(st.registered, 0);
    ck_assert_uint_eq(st.followers, 0);
    ck_assert(!st.leading);
    ck_assert(st.connected);
    cr_bound_pool_destroy(p);
    close(sv[1]);
}
END_TEST

/* ------------------------------------------------------------------ bad input */

START_TEST(bad_configuration_is_refused)
{
    struct cr_bound_pool_config cfg = {0};
    struct cr_reactor *r;
    struct cr_bound_pool *p;

    ck_assert_int_eq(cr_bound_pool_create(&p, NULL), -EINVAL);
    ck_assert_int_eq(cr_bound_pool_create(&p, &cfg), -EINVAL);
    ck_assert_int_eq(cr_reactor_create(&r, NULL), 0);
    cfg.decode = decode_line;
    cfg.reactor = r;
    ck_assert_int_eq(cr_bound_pool_create(&p, &cfg), -EINVAL);
    cr_reactor_destroy(r);
    cr_bound_pool_destroy(NULL);
}
END_TEST

START_TEST(bad_attach_is_refused_and_leaves_the_fd_to_the_caller)
{
    struct cr_bound_pool *p = open_pool(NULL, 0);
    int pfd[2];
    int sv[2];
    int sv2[2];
    int udp;

    ck_assert_int_eq(cr_bound_pool_attach(p, -1), -EBADF);
    ck_assert_int_eq(pipe(pfd), 0);
    ck_assert_int_eq(cr_bound_pool_attach(p, pfd[0]), -ENOTSOCK);
    close(pfd[0]);
    close(pfd[1]);
    ck_assert_int_eq(cr_bound_pool_attach(p, pfd[0]), -EBADF);
    udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(udp, 0);
    ck_assert_int_eq(cr_bound_pool_attach(p, udp), -EPROTOTYPE);
    close(udp);
    ck_assert(!stats_of(p).connected);

    make_pair(sv);
    make_pair(sv2);
    ck_assert_int_eq(cr_bound_pool_attach(p, sv[0]), 0);
    ck_assert_int_eq(cr_bound_pool_attach(p, sv2[0]), -EBUSY);
    /* Still the caller's, still blocking. */
    ck_assert_int_eq(fcntl(sv2[0], F_GETFL) & O_NONBLOCK, 0);
    close(sv2[0]);
    close(sv2[1]);
    ck_assert(stats_of(p).connected);
    cr_bound_pool_destroy(p);
    close(sv[1]);
}
END_TEST

START_TEST(misuse_of_contexts_gets_error_codes)
{
    struct cr_bound_pool *p = open_pool(NULL, 0);
    struct cr_bound_ctx c1;
    struct cr_bound_ctx c2;
    char buf[16];
    int sv[2];

    ck_assert_int_eq(cr_bound_ctx_init(&c1), 0);
    ck_assert_int_eq(cr_bound_ctx_init(&c2), 0);
    ck_assert_int_eq(cr_bound_pool_expect(p, &c1, 1, buf, sizeof(buf)), -ENOTCONN);
    ck_assert_int_eq(cr_bound_pool_send(p, "1 x\n", 4, 0), -ENOTCONN);
    ck_assert_int_eq(cr_bound_pool_join(p, &c1, 0), -EINVAL);
    ck_assert_int_eq(cr_bound_pool_cancel(p, &c1), -EINVAL);

    make_pair(sv);
    ck_assert_int_eq(cr_bound_pool_attach(p, sv[0]), 0);
    ck_assert_int_eq(cr_bound_pool_expect(p, &c1, 1, NULL, 4), -EINVAL);
    ck_assert_int_eq(cr_bound_pool_expect(p, &c1, 1, buf, sizeof(buf)), 0);
    ck_assert_int_eq(cr_bound_pool_expect(p, &c1, 2, buf, sizeof(buf)), -EBUSY);
    ck_assert_int_eq(cr_bound_pool_expect(p, &c2, 1, buf, sizeof(buf)), -EEXIST);
    ck_assert_uint_eq(stats_of(p).registered, 1);
    ck_assert_int_eq(cr_bound_pool_cancel(p, &c1), 0);
    ck_assert_int_eq(cr_bound_pool_cancel(p, &c1), -EINVAL);
    ck_assert_uint_eq(stats_of(p).registered, 0);

    /* A reply registered before its request is sent is not lost; joining a
     * second time is refused. */
    ck_assert_int_eq(cr_bound_pool_expect(p, &c2, 1, buf, sizeof(buf)), 0);
    write_str(sv[1], "1 early\n");
    ck_assert_int_eq(cr_bound_pool_join(p, &c2, LONG_MS), 5);
    ck_assert(memcmp(buf, "early", 5) == 0);
    ck_assert_int_eq(cr_bound_pool_join(p, &c2, 0), -EINVAL);

    /* Nothing comes: a zero timeout expires at once. */
    ck_assert_int_eq(cr_bound_pool_expect(p, &c2, 3, buf, sizeof(buf)), 0);
    ck_assert_int_eq(cr_bound_pool_join(p, &c2, 0), -ETIMEDOUT);

    cr_bound_ctx_fini(&c1);
    cr_bound_ctx_fini(&c2);
    cr_bound_pool_destroy(p);
    close(sv[1]);
}
END_TEST

START_TEST(unknown_and_oversized_replies_do_not_disturb_others)
{
    struct cr_bound_pool *p = open_pool(NULL, 0);
    struct cr_bound_ctx c;
    char small[4];
    char buf[16];
    struct cr_bound_pool_stats st;
    int sv[2];

    ck_assert_int_eq(cr_bound_ctx_init(&c), 0);
    make_pair(sv);
    ck_assert_int_eq(cr_bound_pool_attach(p, sv[0]), 0);

    ck_assert_int_eq(cr_bound_pool_expect(p, &c, 7, small, sizeof(small)), 0);
    write_str(sv[1], "99 nobody\n7 far-too-long\n");
    ck_assert_int_eq(cr_bound_pool_join(p, &c, LONG_MS), -EMSGSIZE);

    ck_assert_int_eq(cr_bound_pool_expect(p, &c, 8, buf, sizeof(buf)), 0);
    write_str(sv[1], "8 fine\n");
    ck_assert_int_eq(cr_bound_pool_join(p, &c, LONG_MS), 4);
    st = stats_of(p);
    ck_assert_uint_eq(st.dropped, 1);
    ck_assert_uint_eq(st.delivered, 2);
    ck_assert_uint_eq(st.failures, 0);
    ck_assert(st.connected);
    cr_bound_ctx_fini(&c);
    cr_bound_pool_destroy(p);
    close(sv[1]);
}
END_TEST

/* _i = 0: a malformed reply; _i = 1: a frame larger than the read buffer. */
START_TEST(undecodable_stream_fails_the_connection)
{
    struct fail_log fl = {0};
    struct cr_bound_pool *p = open_pool(&fl, 32);
    struct cr_bound_ctx c;
    char buf[64];
    int want = _i == 0 ? -EBADMSG : -EMSGSIZE;
    int sv[2];

    ck_assert_int_eq(cr_bound_ctx_init(&c), 0);
    make_pair(sv);
    ck_assert_int_eq(cr_bound_pool_attach(p, sv[0]), 0);
    ck_assert_int_eq(cr_bound_pool_expect(p, &c, 1, buf, sizeof(buf)), 0);
    if (_i == 0)
        write_str(sv[1], "x1 what\n");
    else
        write_str(sv[1], "1 0123456789012345678901234567890123456789\n");
    ck_assert_int_eq(cr_bound_pool_join(p, &c, LONG_MS), want);
    ck_assert_int_eq(fl.calls, 1);
    ck_assert_int_eq(fl.err, want);
    ck_assert(!stats_of(p).connected);
    ck_assert_int_eq(cr_bound_pool_expect(p, &c, 2, buf, sizeof(buf)), want);
    cr_bound_ctx_fini(&c);
    cr_bound_pool_destroy(p);
    close(sv[1]);
}
END_TEST

/* ------------------------------------------------------------------ hybrid */

#define HY_THREADS 2
#define HY_CLIENTS 8
/* The back end answers only once it holds this many requests: more than the
 * server has threads, so each thread must wait for several replies at once. */
#define HY_BATCH HY_CLIENTS

struct hybrid_server {
    struct cr_reactor *r;
    struct cr_lf_pool *lf;
    struct cr_bound_pool *bp;
    /* Atomic, relaxed: counters read after the pool stopped. */
    int served;
    int max_in_flight;
    int in_flight;
};

/*
 * A client request on fd ("<n>\n"): forwards "<id> c<n>\n" to the back end
 * through the bound pool (waiting, in hybrid mode, by serving other events)
 * and writes the back end's payload back to the client.
 */
static void serve_client(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct hybrid_server *s = arg;
    struct cr_bound_ctx ctx;
    char in[32];
    char req[64];
    char reply[64];
    ssize_t n = read(fd, in, sizeof(in) - 1);
    uint64_t id;
    int len;
    int now;
    ssize_t rc;

    (void)events;
    ck_assert_int_eq(cr_reactor_remove(r, fd), 0);
    ck_assert_int_gt(n, 1);
    in[n - 1] = '\0';
    ck_assert_int_eq(cr_bound_ctx_init(&ctx), 0);
    id = cr_bound_pool_next_id(s->bp);
    len = snprintf(req, sizeof(req), "%" PRIu64 " c%s\n", id, in);
    now = __atomic_add_fetch(&s->in_flight, 1, __ATOMIC_RELAXED);
    if (now > __atomic_load_n(&s->max_in_flight, __ATOMIC_RELAXED))
        __atomic_store_n(&s->max_in_flight, now, __ATOMIC_RELAXED);
    rc = cr_bound_pool_call(s->bp, &ctx, id, req, (size_t)len, reply, sizeof(reply) - 1, LONG_MS);
    __atomic_sub_fetch(&s->in_flight, 1, __ATOMIC_RELAXED);
    if (rc < 0)
        rc = snprintf(reply, sizeof(reply), "E%d", (int)-rc);
    ck_assert_int_gt(rc, 0);
    reply[rc] = '\n';
    ck_assert_int_eq(cr_test_write_all(fd, reply, (size_t)rc + 1), 0);
    cr_bound_ctx_fini(&ctx);
    __atomic_add_fetch(&s->served, 1, __ATOMIC_RELAXED);
}

/* A reactor, an lf pool of `threads` over it and a hybrid bound pool on a new
 * socket pair whose back-end end goes to *backend_fd. */
static void open_hybrid(struct hybrid_server *s, unsigned threads, int *backend_fd)
{
    struct cr_lf_pool_config lcfg = {.threads = threads, .nreactors = 1};
    struct cr_bound_pool_config bcfg = {.decode = decode_line};
    int sv[2];

    memset(s, 0, sizeof(*s));
    ck_assert_int_eq(cr_reactor_create(&s->r, NULL), 0);
    lcfg.reactors = &s->r;
    ck_assert_int_eq(cr_lf_pool_create(&s->lf, &lcfg), 0);
    bcfg.lf = s->lf;
    bcfg.reactor = s->r;
    ck_assert_int_eq(cr_bound_pool_create(&s->bp, &bcfg), 0);
    make_pair(sv);
    ck_assert_int_eq(cr_bound_pool_attach(s->bp, sv[0]), 0);
    *backend_fd = sv[1];
}

static void close_hybrid(struct hybrid_server *s)
{
    cr_lf_pool_stop(s->lf);
    ck_assert_int_eq(cr_lf_pool_join_all(s->lf), 0);
    cr_bound_pool_destroy(s->bp);
    cr_lf_pool_destroy(s->lf);
    cr_reactor_destroy(s->r);
}

/* Client i sends "<i>\n" on a socket pair whose server end is registered
 * one-shot with serve_client. */
static void open_clients(struct hybrid_server *s, int (*client)[2], int n)
{
    for (int i = 0; i < n; i++) {
        char msg[16];
        int len = snprintf(msg, sizeof(msg), "%d\n", i);

        make_pair(client[i]);
        ck_assert_int_eq(cr_test_set_nonblock(client[i][1], true), 0);
        ck_assert_int_eq(
            cr_reactor_add(s->r, client[i][1], CR_EV_READ, CR_REACTOR_ONESHOT, serve_client, s), 0);
        ck_assert_int_eq(cr_test_write_all(client[i][0], msg, (size_t)len), 0);
    }
}

static void expect_client_reply(int fd, const char *want)
{
    char got[32];
    size_t len = strlen(want);

    ck_assert_uint_lt(len, sizeof(got));
    ck_assert_int_eq(cr_test_read_exact(fd, got, len, LONG_MS), 0);
    got[len] = '\0';
    ck_assert_str_eq(got, want);
}

static void close_clients(int (*client)[2], int n)
{
    for (int i = 0; i < n; i++) {
        close(client[i][0]);
        close(client[i][1]);
    }
}

START_TEST(hybrid_server_serves_more_requests_than_threads_while_all_wait)
{
    struct hybrid_server s;
    struct backend be;
    struct cr_bound_pool_stats st;
    int client[HY_CLIENTS][2];
    int befd;

    open_hybrid(&s, HY_THREADS, &befd);
    /* Answers reversed, and only once it holds HY_BATCH requests (the idle
     * flush is far longer than the test needs: only a guard against hangs). */
    start_backend(&be, befd, HY_BATCH, LONG_MS / 2);
    ck_assert_int_eq(cr_lf_pool_start(s.lf), 0);
    open_clients(&s, client, HY_CLIENTS);
    for (int i = 0; i < HY_CLIENTS; i++) {
        char want[16];

        snprintf(want, sizeof(want), "rc%d\n", i);
        expect_client_reply(client[i][0], want);
    }
    cr_lf_pool_stop(s.lf);
    ck_assert_int_eq(cr_lf_pool_join_all(s.lf), 0);
    st = stats_of(s.bp);
    ck_assert_uint_eq(st.sent, HY_CLIENTS);
    ck_assert_uint_eq(st.delivered, HY_CLIENTS);
    ck_assert_uint_eq(st.dropped, 0);
    ck_assert_uint_eq(st.timeouts, 0);
    ck_assert_uint_eq(st.registered, 0);
    ck_assert_int_eq(__atomic_load_n(&s.served, __ATOMIC_RELAXED), HY_CLIENTS);
    /* More requests waited for the back end at once than there are threads:
     * the threads kept serving clients while they waited. */
    ck_assert_int_ge(__atomic_load_n(&s.max_in_flight, __ATOMIC_RELAXED), HY_BATCH);
    close_hybrid(&s);
    join_backend(&be);
    ck_assert_int_eq(be.received, HY_CLIENTS);
    close_clients(client, HY_CLIENTS);
}
END_TEST

/* The back end dies while every handler (more than threads) waits: each gets
 * the error at once and answers its client. */
START_TEST(hybrid_back_end_death_fails_every_waiting_handler)
{
    struct hybrid_server s;
    int client[4][2];
    char line[80];
    int befd;

    open_hybrid(&s, HY_THREADS, &befd);
    ck_assert_int_eq(cr_lf_pool_start(s.lf), 0);
    open_clients(&s, client, 4);
    for (int i = 0; i < 4; i++)
        read_line(befd, line, sizeof(line));
    close(befd);
    for (int i = 0; i < 4; i++) {
        char want[16];

        snprintf(want, sizeof(want), "E%d\n", ECONNRESET);
        expect_client_reply(client[i][0], want);
    }
    ck_assert_uint_eq(stats_of(s.bp).failures, 1);
    ck_assert(!stats_of(s.bp).connected);
    ck_assert_uint_eq(stats_of(s.bp).registered, 0);
    close_hybrid(&s);
    ck_assert_int_eq(__atomic_load_n(&s.served, __ATOMIC_RELAXED), 4);
    close_clients(client, 4);
}
END_TEST

/*
 * A thread that is not the lf pool's joins in hybrid mode: it sleeps on its
 * condition variable while a pool thread reads and hands its reply over; a
 * request of such a thread times out and its late reply is dropped.
 */
START_TEST(hybrid_outside_thread_waits_on_its_context)
{
    struct hybrid_server s;
    struct caller a;
    struct caller b;
    struct cr_bound_pool_stats st;
    char line[80];
    int befd;

    open_hybrid(&s, 1, &befd);
    ck_assert_int_eq(cr_lf_pool_start(s.lf), 0);

    start_caller(&a, s.bp, 1, "a", 200);
    read_line(befd, line, sizeof(line));
    join_caller(&a);
    ck_assert_int_eq(a.rc, -ETIMEDOUT);
    write_str(befd, "1 late\n");
    wait_for(s.bp, has_dropped, 1);

    start_caller(&b, s.bp, 2, "b", LONG_MS);
    read_line(befd, line, sizeof(line));
    ck_assert_str_eq(line, "2 b");
    write_str(befd, "2 rb\n");
    join_caller(&b);
    ck_assert_int_eq(b.rc, 2);
    ck_assert_str_eq(b.reply, "rb");
    st = stats_of(s.bp);
    ck_assert_uint_eq(st.timeouts, 1);
    ck_assert_uint_eq(st.dropped, 1);
    ck_assert_uint_eq(st.delivered, 1);
    ck_assert_uint_eq(st.handed_off, 1);
    close_hybrid(&s);
    close(befd);
}
END_TEST

Suite *bound_pool_suite(void);

Suite *bound_pool_suite(void)
{
    Suite *s = suite_create("bound_pool");
    TCase *tc = tcase_create("standalone");
    TCase *th = tcase_create("hybrid");
    TCase *tb = tcase_create("bad_input");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, out_of_order_replies_reach_their_own_threads);
    tcase_add_test(tc, leader_takes_own_reply_and_promotes_follower);
    tcase_add_test(tc, leader_hands_off_replies_of_followers);
    tcase_add_loop_test(tc, connection_failure_wakes_every_waiter_with_an_error, 0, 2);
    tcase_add_loop_test(tc, timeout_unregisters_and_late_reply_is_dropped, 0, 2);
    tcase_add_test(tc, every_waiter_times_out_when_the_back_end_is_silent);
    suite_add_tcase(s, tc);

    tcase_set_timeout(th, 60);
    tcase_add_test(th, hybrid_server_serves_more_requests_than_threads_while_all_wait);
    tcase_add_test(th, hybrid_back_end_death_fails_every_waiting_handler);
    tcase_add_test(th, hybrid_outside_thread_waits_on_its_context);
    suite_add_tcase(s, th);

    tcase_set_timeout(tb, 30);
    tcase_add_test(tb, bad_configuration_is_refused);
    tcase_add_test(tb, bad_attach_is_refused_and_leaves_the_fd_to_the_caller);
    tcase_add_test(tb, misuse_of_contexts_gets_error_codes);
    tcase_add_test(tb, unknown_and_oversized_replies_do_not_disturb_others);
    tcase_add_loop_test(tb, undecodable_stream_fails_the_connection, 0, 2);
    suite_add_tcase(s, tb);
    return s;
}
