/*
 * test_proactor.c - the Proactor over each engine (uring where io_uring works
 * here, emulated) and each completion dispatcher (single, lf,
 * ring-per-thread), as Check loop tests over cases[]: multishot accept of
 * several connections on one token (and re-armed, forced, as on kernels
 * without it), echo over many connections at once (handlers starting their
 * token's next operation), partial sends resumed to a slow reader (send,
 * sendv, sendfile past the pipe's size) and timed out against one that never
 * reads, connect to a listener and to a closed port, per-operation timeouts
 * and timers, cancel (and cancels racing completions: one final call each),
 * posts from other threads (also while the token's last handler still runs:
 * handed to its thread, no overlap), stop with operations outstanding (every handler
 * once, tokens freed in their handlers: LSan) and during traffic, EBUSY and
 * ESHUTDOWN; then the forced fallback to the emulated engine (one log line)
 * and bad configurations.
 *
 * Handlers record into atomics; the test thread polls them with a bound and
 * asserts. No duration is asserted. Where io_uring is refused here, the
 * uring cases are not added and each is reported as skipped (cr_test_skip).
 */
#include <cabrank/log.h>
#include <cabrank/proactor.h>

#include "../support/support.h"

#include <arpa/inet.h>
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define WAIT_MS 10000 /* bound on every poll for a condition */

struct pcase {
    const char *engine;
    const char *dispatch;
    unsigned threads;
};

static const struct pcase cases[] = {
    {"emulated", "single", 1}, {"emulated", "lf", 3}, {"emulated", "ring-per-thread", 2},
    {"uring", "single", 1},    {"uring", "lf", 3},    {"uring", "ring-per-thread", 2},
};
#define NCASES      ((int)(sizeof(cases) / sizeof(cases[0])))
#define FIRST_URING 3 /* cases[FIRST_URING..] use io_uring */

/* Creates and starts the case's proactor (proactor_suite adds only the
 * cases whose engine works here). */
static struct cr_proactor *open_case(int i)
{
    struct cr_proactor_config cfg = {
        .engine = cases[i].engine,
        .dispatch = cases[i].dispatch,
        .threads = cases[i].threads,
    };
    struct cr_proactor *p;
    int err = cr_proactor_create(&p, &cfg);

    ck_assert_msg(err == 0, "%s/%s: %s", cases[i].engine, cases[i].dispatch, strerror(-err));
    ck_assert_str_eq(cr_proactor_engine(p), cases[i].engine);
    ck_assert_str_eq(cr_proactor_dispatch(p), cases[i].dispatch);
    ck_assert_uint_eq(cr_proactor_threads(p), cases[i].threads);
    ck_assert_uint_eq(cr_proactor_rings(p),
                      strcmp(cases[i].dispatch, "ring-per-thread") == 0 ? cases[i].threads : 1);
    ck_assert_int_eq(cr_proactor_start(p), 0);
    return p;
}

static void close_case(struct cr_proactor *p)
{
    cr_proactor_stop(p);
    ck_assert_int_eq(cr_proactor_wait(p), 0);
    cr_proactor_destroy(p);
}

static int load_int(const int *v)
{
    return __atomic_load_n(v, __ATOMIC_ACQUIRE);
}

static void add_int(int *v, int n)
{
    __atomic_add_fetch(v, n, __ATOMIC_ACQ_REL);
}

/* Polls until *v >= goal, bounded. */
static void wait_count(const int *v, int goal)
{
    uint64_t end = cr_test_now_ms() + WAIT_MS;

    while (load_int(v) < goal) {
        ck_assert_msg(cr_test_now_ms() < end, "waited for %d, have %d", goal, load_int(v));
        usleep(1000);
    }
}

static int make_listener(uint16_t *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    ck_assert_int_ge(fd, 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(fd, 64), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

/* A pair whose server side (fds[1]) is non-blocking, as accepted ones are. */
static void make_pair(int fds[2])
{
    ck_assert_int_eq(cr_test_tcp_pair(fds), 0);
    ck_assert_int_eq(cr_test_set_nonblock(fds[1], true), 0);
}

/* ---------------------------------------------------------------- accept */

struct acc {
    struct cr_aop op;
    int accepted;
    int finals;
    int final_res;
    int inside;
    int overlaps;
    int fds[16];
};

static void on_accept(struct cr_aop *op, ssize_t res, unsigned flags)
{
    struct acc *a = (struct acc *)op;

    if (__atomic_exchange_n(&a->inside, 1, __ATOMIC_ACQ_REL) != 0)
        add_int(&a->overlaps, 1);
    if (flags & CR_AOP_MORE) {
        int n = load_int(&a->accepted);

        ck_assert_int_ge(res, 0);
        if (n < 16)
            a->fds[n] = (int)res;
        else
            close((int)res);
        /* Give another thread the chance to run the next one inside us. */
        usleep(500);
        __atomic_store_n(&a->inside, 0, __ATOMIC_RELEASE);
        add_int(&a->accepted, 1);
        return;
    }
    __atomic_store_n(&a->inside, 0, __ATOMIC_RELEASE);
    a->final_res = (int)res;
    add_int(&a->finals, 1);
}

static void accept_several(int ci)
{
    struct cr_proactor *p = open_case(ci);
    struct acc a = {0};
    int clients[8];
    uint16_t port;
    int lfd;

    lfd = make_listener(&port);
    cr_aop_init(&a.op, p, 1, on_accept);
    ck_assert_int_eq(cr_aop_accept(&a.op, lfd, true), 0);
    ck_assert(cr_aop_is_busy(&a.op));
    for (int i = 0; i < 8; i++) {
        clients[i] = cr_test_connect(port);
        ck_assert_int_ge(clients[i], 0);
    }
    wait_count(&a.accepted, 8);
    ck_assert_int_eq(load_int(&a.finals), 0);
    ck_assert_int_eq(cr_aop_cancel(&a.op), 0);
    wait_count(&a.finals, 1);
    ck_assert_int_eq(a.final_res, -ECANCELED);
    ck_assert_int_eq(load_int(&a.overlaps), 0);
    ck_assert(!cr_aop_is_busy(&a.op));
    ck_assert_int_eq(cr_aop_cancel(&a.op), -ENOENT);
    /* Single-shot, once more on the same token. */
    ck_assert_int_eq(cr_aop_accept(&a.op, lfd, false), 0);
    {
        int c = cr_test_connect(port);

        ck_assert_int_ge(c, 0);
        wait_count(&a.finals, 2);
        ck_assert_int_ge(a.final_res, 0);
        close(a.final_res);
        close(c);
    }
    close_case(p);
    for (int i = 0; i < 8; i++) {
        close(clients[i]);
        close(a.fds[i]);
    }
    close(lfd);
}

START_TEST(multishot_accept_takes_several_connections_on_one_token)
{
    accept_several(_i);
}
END_TEST

/* Uring cases only: the re-arming that kernels without multishot accept get. */
START_TEST(multishot_accept_is_rearmed_where_the_kernel_has_none)
{
    ck_assert_int_eq(setenv("CABRANK_URING_NO_MULTISHOT", "1", 1), 0);
    accept_several(_i);
}
END_TEST

/* ---------------------------------------------------------------- echo */

#define ECHO_CONNS  16
#define ECHO_ROUNDS 50

struct echo_conn {
    struct cr_aop op;
    int fd;
    bool sending;
    int inside;
    char buf[512];
};

static int echo_done;
static int echo_errors;
static int echo_overlaps;

static void on_echo(struct cr_aop *op, ssize_t res, unsigned flags)
{
    struct echo_conn *c = (struct echo_conn *)op;
    int err;

    (void)flags;
    if (__atomic_exchange_n(&c->inside, 1, __ATOMIC_ACQ_REL) != 0)
        add_int(&echo_overlaps, 1);
    if (res <= 0) {
        if (res < 0 && res != -ECANCELED)
            add_int(&echo_errors, 1);
        __atomic_store_n(&c->inside, 0, __ATOMIC_RELEASE);
        add_int(&echo_done, 1);
        return;
    }
    if (c->sending) {
        c->sending = false;
        err = cr_aop_recv(op, c->fd, c->buf, sizeof(c->buf), 0);
    } else {
        c->sending = true;
        err = cr_aop_send(op, c->fd, c->buf, (size_t)res, 0);
    }
    if (err < 0) {
        /* Not restarted: this was the token's last handler. */
        if (err != -ESHUTDOWN)
            add_int(&echo_errors, 1);
        __atomic_store_n(&c->inside, 0, __ATOMIC_RELEASE);
        add_int(&echo_done, 1);
        return;
    }
    __atomic_store_n(&c->inside, 0, __ATOMIC_RELEASE);
}

START_TEST(echo_over_many_connections_at_once)
{
    struct cr_proactor *p = open_case(_i);
    struct echo_conn conns[ECHO_CONNS];
    int client[ECHO_CONNS];

    for (int i = 0; i < ECHO_CONNS; i++) {
        int fds[2];

        make_pair(fds);
        client[i] = fds[0];
        memset(&conns[i], 0, sizeof(conns[i]));
        cr_aop_init(&conns[i].op, p, (unsigned)i, on_echo);
        conns[i].fd = fds[1];
        ck_assert_int_eq(cr_aop_recv(&conns[i].op, fds[1], conns[i].buf, sizeof(conns[i].buf), 0),
                         0);
    }
    for (int r = 0; r < ECHO_ROUNDS; r++) {
        char msg[64];
        char got[64];
        int n = snprintf(msg, sizeof(msg), "round %d of the echo test", r);

        for (int i = 0; i < ECHO_CONNS; i++)
            ck_assert_int_eq(cr_test_write_all(client[i], msg, (size_t)n), 0);
        for (int i = 0; i < ECHO_CONNS; i++) {
            ck_assert_int_eq(cr_test_read_exact(client[i], got, (size_t)n, WAIT_MS), 0);
            ck_assert(memcmp(got, msg, (size_t)n) == 0);
        }
    }
    for (int i = 0; i < ECHO_CONNS; i++)
        shutdown(client[i], SHUT_WR);
    wait_count(&echo_done, ECHO_CONNS);
    ck_assert_int_eq(load_int(&echo_errors), 0);
    ck_assert_int_eq(load_int(&echo_overlaps), 0);
    close_case(p);
    for (int i = 0; i < ECHO_CONNS; i++) {
        close(client[i]);
        close(conns[i].fd);
    }
}
END_TEST

/* ---------------------------------------------------------------- big sends */

struct one {
    struct cr_aop op;
    int calls;
    ssize_t res;
    unsigned flags;
};

static void on_one(struct cr_aop *op, ssize_t res, unsigned flags)
{
    struct one *o = (struct one *)op;

    o->res = res;
    o->flags = flags;
    add_int(&o->calls, 1);
}

struct reader {
    int fd;
    size_t len;
    unsigned char *got;
    int err;
};

/* Reads len bytes slowly at first, so the sender's buffer fills. */
static void *slow_reader(void *arg)
{
    struct reader *rd = arg;

    usleep(100 * 1000);
    rd->err = cr_test_read_exact(rd->fd, rd->got, rd->len, WAIT_MS);
    return NULL;
}

static unsigned char *pattern(size_t len, unsigned seed)
{
    unsigned char *b = malloc(len);

    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < len; i++)
        b[i] = (unsigned char)((i * 31 + seed) ^ (i >> 9));
    return b;
}

/* A small send buffer, so a big send goes out in many parts. (A small
 * receive buffer too would crawl: silly-window avoidance and delayed ACKs.) */
static void small_buffers(int fds[2])
{
    int small = 16384;

    ck_assert_int_eq(setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
}

enum big_kind { BIG_SEND, BIG_SENDV, BIG_SENDFILE };

/* Sends len bytes from the sender of a pair, with TCP_NOTSENT_LOWAT lowat on
 * it unless 0, to a reader that starts late (and, half_closed, has shut its
 * sending side down first, as a client that sent all its requests may);
 * checks every byte arrived. */
static void big_send_lowat(int i, enum big_kind kind, int lowat, bool half_closed)
{
    struct cr_proactor *p = open_case(i);
    const size_t len = (2u << 20) + 4321; /* past any socket and pipe buffer */
    unsigned char *data;
    struct reader rd = {0};
    struct one o = {0};
    pthread_t t;
    int fds[2];
    int file = -1;
    off_t off = 0;

    make_pair(fds);
    small_buffers(fds);
    if (lowat != 0)
        ck_assert_int_eq(setsockopt(fds[1], IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof(lowat)),
                         0);
    if (half_closed)
        ck_assert_int_eq(shutdown(fds[0], SHUT_WR), 0);
    data = pattern(len + 777, (unsigned)kind);
    rd.fd = fds[0];
    rd.len = len;
    rd.got = malloc(len);
    ck_assert_ptr_nonnull(rd.got);
    cr_aop_init(&o.op, p, 0, on_one);
    ck_assert_int_eq(pthread_create(&t, NULL, slow_reader, &rd), 0);
    if (kind == BIG_SEND) {
        ck_assert_int_eq(cr_aop_send(&o.op, fds[1], data, len, 0), 0);
    } else if (kind == BIG_SENDV) {
        struct iovec iov[CR_AOP_MAX_IOV];
        size_t at = 0;

        /* Uneven pieces, one empty. */
        for (int k = 0; k < CR_AOP_MAX_IOV; k++) {
            size_t piece = k == CR_AOP_MAX_IOV - 1 ? len - at : (k == 3 ? 0 : len / 40 + 17u * k);

            iov[k].iov_base = data + at;
            iov[k].iov_len = piece;
            at += piece;
        }
        ck_assert_int_eq(cr_aop_sendv(&o.op, fds[1], iov, CR_AOP_MAX_IOV, 0), 0);
    } else {
        char path[] = "/tmp/cabrank-proactor-XXXXXX";

        file = mkstemp(path);
        ck_assert_int_ge(file, 0);
        unlink(path);
        ck_assert_int_eq(cr_test_write_all(file, data, len + 777), 0);
        off = 777;
        ck_assert_int_eq(cr_aop_sendfile(&o.op, fds[1], file, off, len, 0), 0);
    }
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(rd.err, 0);
    ck_assert(memcmp(rd.got, data + off, len) == 0);
    wait_count(&o.calls, 1);
    ck_assert_int_eq(o.res, (ssize_t)len);
    ck_assert_uint_eq(o.flags, 0);
    close_case(p);
    ck_assert_int_eq(load_int(&o.calls), 1);
    if (file >= 0)
        close(file);
    close(fds[0]);
    close(fds[1]);
    free(rd.got);
    free(data);
}

static void big_send(int i, enum big_kind kind)
{
    big_send_lowat(i, kind, 0, false);
}

START_TEST(partial_send_is_resumed_to_a_slow_reader)
{
    big_send(_i, BIG_SEND);
}
END_TEST

/* A non-blocking socket whose peer has shut its side down, holding its
 * TCP_NOTSENT_LOWAT unsent, has io_uring complete a send with -EAGAIN
 * instead of waiting for room (cabrank-httpd's sockets carry the mark, and
 * a client may half-close after its last request): each kind of send polls
 * for room and resumes. Without the mark, and without the half-close, the
 * kernel waits. */
START_TEST(sends_resume_past_the_notsent_mark)
{
    big_send_lowat(_i, BIG_SEND, 8192, true);
    big_send_lowat(_i, BIG_SENDV, 8192, true);
    big_send_lowat(_i, BIG_SENDFILE, 8192, true);
    big_send_lowat(_i, BIG_SEND, 8192, false);
}
END_TEST

START_TEST(sendv_sends_every_iovec_resumed)
{
    big_send(_i, BIG_SENDV);
}
END_TEST

START_TEST(sendfile_sends_a_file_bigger_than_the_pipe)
{
    big_send(_i, BIG_SENDFILE);
}
END_TEST

/* ---------------------------------------------------------------- connect */

START_TEST(connect_reaches_a_listener_and_is_refused_by_a_closed_port)
{
    struct cr_proactor *p = open_case(_i);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    struct one o = {0};
    uint16_t port;
    int lfd;
    int fd;
    int acc = -1;

    lfd = make_listener(&port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(port);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    cr_aop_init(&o.op, p, 0, on_one);
    ck_assert_int_eq(cr_aop_connect(&o.op, fd, (struct sockaddr *)&sa, sizeof(sa), 5000), 0);
    wait_count(&o.calls, 1);
    ck_assert_int_eq(o.res, 0);
    for (int k = 0; k < 1000 && acc < 0; k++) {
        acc = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (acc < 0)
            usleep(1000);
    }
    ck_assert_int_ge(acc, 0);
    close(acc);
    close(fd);
    close(lfd);

    /* The listener is gone: nothing listens on the port now. */
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(cr_aop_connect(&o.op, fd, (struct sockaddr *)&sa, sizeof(sa), 0), 0);
    wait_count(&o.calls, 2);
    ck_assert_int_eq(o.res, -ECONNREFUSED);
    close(fd);
    close_case(p);
}
END_TEST

/* ---------------------------------------------------------------- timeouts */

START_TEST(recv_with_nothing_arriving_times_out_and_timers_expire)
{
    struct cr_proactor *p = open_case(_i);
    struct one o = {0};
    struct one t = {0};
    char buf[16];
    int fds[2];

    make_pair(fds);
    cr_aop_init(&o.op, p, 0, on_one);
    cr_aop_init(&t.op, p, 1, on_one);
    ck_assert_int_eq(cr_aop_recv(&o.op, fds[1], buf, sizeof(buf), 50), 0);
    ck_assert_int_eq(cr_aop_timer(&t.op, 30), 0);
    wait_count(&o.calls, 1);
    wait_count(&t.calls, 1);
    ck_assert_int_eq(o.res, -ETIMEDOUT);
    ck_assert_int_eq(t.res, -ETIMEDOUT);
    /* A timeout that does not expire: the data wins. */
    ck_assert_int_eq(cr_aop_recv(&o.op, fds[1], buf, sizeof(buf), 5000), 0);
    ck_assert_int_eq(cr_test_write_all(fds[0], "hi", 2), 0);
    wait_count(&o.calls, 2);
    ck_assert_int_eq(o.res, 2);
    close_case(p);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

/* ---------------------------------------------------------------- cancel */

START_TEST(cancel_completes_with_ecanceled_once_even_racing_a_completion)
{
    struct cr_proactor *p = open_case(_i);
    struct one o = {0};
    char buf[16];
    int fds[2];
    int raced = 0;

    make_pair(fds);
    cr_aop_init(&o.op, p, 0, on_one);
    ck_assert_int_eq(cr_aop_cancel(&o.op), -ENOENT);
    ck_assert_int_eq(cr_aop_recv(&o.op, fds[1], buf, sizeof(buf), 0), 0);
    ck_assert_int_eq(cr_aop_cancel(&o.op), 0);
    wait_count(&o.calls, 1);
    ck_assert_int_eq(o.res, -ECANCELED);

    /* Data and cancel at once: exactly one final call, with either. */
    for (int k = 0; k < 200; k++) {
        int before = load_int(&o.calls);

        ck_assert_int_eq(cr_aop_recv(&o.op, fds[1], buf, sizeof(buf), 0), 0);
        ck_assert_int_eq(cr_test_write_all(fds[0], "x", 1), 0);
        (void)cr_aop_cancel(&o.op);
        wait_count(&o.calls, before + 1);
        ck_assert_msg(o.res == 1 || o.res == -ECANCELED, "res %zd", o.res);
        if (o.res == -ECANCELED) {
            /* The byte is still there: take it, so the next round starts
             * clean. */
            ck_assert_int_eq(cr_test_read_exact(fds[1], buf, 1, WAIT_MS), 0);
            raced++;
        }
        usleep(200);
        ck_assert_int_eq(load_int(&o.calls), before + 1);
        ck_assert(!cr_aop_is_busy(&o.op));
    }
    fprintf(stderr, "%s/%s: %d of 200 cancels won\n", cases[_i].engine, cases[_i].dispatch, raced);
    close_case(p);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

/* ---------------------------------------------------------------- post */

#define POSTERS 4
#define POSTS   500

struct poster {
    struct cr_aop op;
    struct cr_proactor *p;
    int calls;
    long sum;
    int wrong_ring;
    pthread_t t;
};

static void on_post(struct cr_aop *op, ssize_t res, unsigned flags)
{
    struct poster *ps = (struct poster *)op;

    (void)flags;
    if (cr_proactor_current_ring(ps->p) != op->ring)
        ps->wrong_ring++;
    ps->sum += res;
    add_int(&ps->calls, 1);
}

static void *post_loop(void *arg)
{
    struct poster *ps = arg;

    for (int k = 1; k <= POSTS; k++) {
        int err;

        while ((err = cr_aop_post(&ps->op, k)) == -EBUSY)
            sched_yield();
        ck_assert_int_eq(err, 0);
    }
    return NULL;
}

START_TEST(posts_from_other_threads_reach_their_ring)
{
    struct cr_proactor *p = open_case(_i);
    struct poster ps[POSTERS];

    memset(ps, 0, sizeof(ps));
    for (int k = 0; k < POSTERS; k++) {
        cr_aop_init(&ps[k].op, p, (unsigned)k, on_post);
        ps[k].p = p;
        ck_assert_int_eq(pthread_create(&ps[k].t, NULL, post_loop, &ps[k]), 0);
    }
    for (int k = 0; k < POSTERS; k++) {
        ck_assert_int_eq(pthread_join(ps[k].t, NULL), 0);
        wait_count(&ps[k].calls, POSTS);
    }
    close_case(p);
    for (int k = 0; k < POSTERS; k++) {
        ck_assert_int_eq(ps[k].calls, POSTS);
        ck_assert_int_eq(ps[k].sum, (long)POSTS * (POSTS + 1) / 2);
        ck_assert_int_eq(ps[k].wrong_ring, 0);
    }
}
END_TEST

/* ---------------------------------------------------------------- hand-off */

struct slow {
    struct cr_aop op;
    int entered;
    int calls;
    int inside;
    int overlaps;
    int gate;
};

static void on_slow(struct cr_aop *op, ssize_t res, unsigned flags)
{
    struct slow *sl = (struct slow *)op;

    (void)flags;
    if (__atomic_exchange_n(&sl->inside, 1, __ATOMIC_ACQ_REL) != 0)
        add_int(&sl->overlaps, 1);
    add_int(&sl->entered, 1);
    /* The first call stays until the test opens the gate, so the test starts
     * the next operation while it runs. */
    if (res == 1) {
        uint64_t end = cr_test_now_ms() + WAIT_MS;

        while (!load_int(&sl->gate) && cr_test_now_ms() < end)
            usleep(1000);
    }
    __atomic_store_n(&sl->inside, 0, __ATOMIC_RELEASE);
    add_int(&sl->calls, 1);
}

START_TEST(a_start_while_the_last_handler_runs_waits_for_it)
{
    struct cr_proactor *p = open_case(_i);
    struct slow sl = {0};

    cr_aop_init(&sl.op, p, 0, on_slow);
    ck_assert_int_eq(cr_aop_post(&sl.op, 1), 0);
    wait_count(&sl.entered, 1);
    /* The token is free (its handler may restart it) but its handler runs:
     * the post is taken now and dispatched after that handler returns. */
    ck_assert(!cr_aop_is_busy(&sl.op));
    ck_assert_int_eq(cr_aop_post(&sl.op, 2), 0);
    ck_assert(cr_aop_is_busy(&sl.op));
    ck_assert_int_eq(cr_aop_post(&sl.op, 3), -EBUSY);
    usleep(20 * 1000);
    ck_assert_int_eq(load_int(&sl.entered), 1);
    __atomic_store_n(&sl.gate, 1, __ATOMIC_RELEASE);
    wait_count(&sl.calls, 2);
    ck_assert_int_eq(load_int(&sl.overlaps), 0);
    close_case(p);
    ck_assert_int_eq(sl.calls, 2);
}
END_TEST

/* ---------------------------------------------------------------- stop */

struct heap_tok {
    struct cr_aop op;
    int *finals;
    int *wrong;
    char buf[64];
};

static void on_heap_tok(struct cr_aop *op, ssize_t res, unsigned flags)
{
    struct heap_tok *h = (struct heap_tok *)op;

    if (flags & CR_AOP_MORE) {
        close((int)res);
        return;
    }
    if (res != -ECANCELED)
        add_int(h->wrong, 1);
    add_int(h->finals, 1);
    free(h);
}

START_TEST(stop_runs_every_outstanding_handler_once)
{
    struct cr_proactor *p = open_case(_i);
    int finals = 0;
    int wrong = 0;
    int fds[24][2];
    int n = 0;
    uint16_t port;
    int lfd;

    lfd = make_listener(&port);
    for (int k = 0; k < 24; k++) {
        struct heap_tok *h = calloc(1, sizeof(*h));

        ck_assert_ptr_nonnull(h);
        h->finals = &finals;
        h->wrong = &wrong;
        make_pair(fds[k]);
        cr_aop_init(&h->op, p, (unsigned)k, on_heap_tok);
        ck_assert_int_eq(cr_aop_recv(&h->op, fds[k][1], h->buf, sizeof(h->buf), k % 2 ? 60000 : 0),
                         0);
        n++;
    }
    for (int k = 0; k < 8; k++) {
        struct heap_tok *h = calloc(1, sizeof(*h));

        ck_assert_ptr_nonnull(h);
        h->finals = &finals;
        h->wrong = &wrong;
        cr_aop_init(&h->op, p, (unsigned)k, on_heap_tok);
        if (k == 0)
            ck_assert_int_eq(cr_aop_accept(&h->op, lfd, true), 0);
        else
            ck_assert_int_eq(cr_aop_timer(&h->op, 60000), 0);
        n++;
    }
    /* Let every operation reach its engine. */
    usleep(20 * 1000);
    cr_proactor_stop(p);
    ck_assert_int_eq(cr_proactor_wait(p), 0);
    ck_assert_int_eq(load_int(&finals), n);
    ck_assert_int_eq(load_int(&wrong), 0);
    {
        struct cr_aop late;
        char b[4];

        cr_aop_init(&late, p, 0, on_one);
        ck_assert_int_eq(cr_aop_recv(&late, fds[0][1], b, sizeof(b), 0), -ESHUTDOWN);
        ck_assert_int_eq(cr_aop_post(&late, 1), -ESHUTDOWN);
    }
    cr_proactor_destroy(p);
    for (int k = 0; k < 24; k++) {
        close(fds[k][0]);
        close(fds[k][1]);
    }
    close(lfd);
}
END_TEST

/* Sends to a peer that never reads: the timeout ends them. */
START_TEST(sends_to_a_reader_that_never_reads_time_out)
{
    struct cr_proactor *p = open_case(_i);
    const size_t len = 8u << 20;
    unsigned char *data;
    char path[] = "/tmp/cabrank-proactor-XXXXXX";
    struct one o = {0};
    int fds[2];
    int file;

    data = pattern(len, 7);
    file = mkstemp(path);
    ck_assert_int_ge(file, 0);
    unlink(path);
    ck_assert_int_eq(cr_test_write_all(file, data, len), 0);
    cr_aop_init(&o.op, p, 0, on_one);

    make_pair(fds);
    small_buffers(fds);
    ck_assert_int_eq(cr_aop_send(&o.op, fds[1], data, len, 100), 0);
    wait_count(&o.calls, 1);
    ck_assert_int_eq(o.res, -ETIMEDOUT);
    close(fds[0]);
    close(fds[1]);

    make_pair(fds);
    small_buffers(fds);
    ck_assert_int_eq(cr_aop_sendfile(&o.op, fds[1], file, 0, len, 100), 0);
    wait_count(&o.calls, 2);
    ck_assert_int_eq(o.res, -ETIMEDOUT);
    close(fds[0]);
    close(fds[1]);

    close_case(p);
    close(file);
    free(data);
}
END_TEST

/* Echo connections keep restarting their tokens while stop comes: every
 * token's last handler runs once, and the threads end. */
START_TEST(stop_during_traffic_ends_every_token_once)
{
    struct cr_proactor *p = open_case(_i);
    struct echo_conn conns[ECHO_CONNS];
    int client[ECHO_CONNS];

    for (int i = 0; i < ECHO_CONNS; i++) {
        int fds[2];

        make_pair(fds);
        client[i] = fds[0];
        memset(&conns[i], 0, sizeof(conns[i]));
        cr_aop_init(&conns[i].op, p, (unsigned)i, on_echo);
        conns[i].fd = fds[1];
        ck_assert_int_eq(cr_aop_recv(&conns[i].op, fds[1], conns[i].buf, sizeof(conns[i].buf), 0),
                         0);
    }
    /* Fill the pipes both ways; nobody reads the echoes, so sends stall
     * too. */
    for (int r = 0; r < 20; r++) {
        for (int i = 0; i < ECHO_CONNS; i++)
            ck_assert_int_eq(cr_test_write_all(client[i], "0123456789abcdef", 16), 0);
    }
    cr_proactor_stop(p);
    ck_assert_int_eq(cr_proactor_wait(p), 0);
    ck_assert_int_eq(load_int(&echo_done), ECHO_CONNS);
    ck_assert_int_eq(load_int(&echo_overlaps), 0);
    ck_assert_int_eq(load_int(&echo_errors), 0);
    for (int i = 0; i < ECHO_CONNS; i++)
        ck_assert(!cr_aop_is_busy(&conns[i].op));
    cr_proactor_destroy(p);
    for (int i = 0; i < ECHO_CONNS; i++) {
        close(client[i]);
        close(conns[i].fd);
    }
}
END_TEST

/* ---------------------------------------------------------------- busy */

START_TEST(a_busy_token_refuses_a_second_operation)
{
    struct cr_proactor *p = open_case(_i);
    struct one o = {0};
    char buf[8];
    int fds[2];

    make_pair(fds);
    cr_aop_init(&o.op, p, 0, on_one);
    ck_assert(!cr_aop_is_busy(&o.op));
    ck_assert_int_eq(cr_aop_recv(&o.op, fds[1], buf, sizeof(buf), 0), 0);
    ck_assert(cr_aop_is_busy(&o.op));
    ck_assert_int_eq(cr_aop_recv(&o.op, fds[1], buf, sizeof(buf), 0), -EBUSY);
    ck_assert_int_eq(cr_aop_send(&o.op, fds[1], "x", 1, 0), -EBUSY);
    ck_assert_int_eq(cr_aop_post(&o.op, 0), -EBUSY);
    ck_assert_int_eq(cr_aop_timer(&o.op, 1), -EBUSY);
    ck_assert_int_eq(cr_test_write_all(fds[0], "abc", 3), 0);
    wait_count(&o.calls, 1);
    ck_assert_int_eq(o.res, 3);
    ck_assert_int_eq(load_int(&o.calls), 1);
    ck_assert(!cr_aop_is_busy(&o.op));
    /* Bad arguments start nothing. */
    ck_assert_int_eq(cr_aop_recv(&o.op, -1, buf, sizeof(buf), 0), -EBADF);
    ck_assert_int_eq(cr_aop_sendv(&o.op, fds[1], NULL, 1, 0), -EINVAL);
    ck_assert_int_eq(cr_aop_sendv(&o.op, fds[1], (struct iovec *)buf, CR_AOP_MAX_IOV + 1, 0),
                     -EINVAL);
    ck_assert(!cr_aop_is_busy(&o.op));
    close_case(p);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

/* ---------------------------------------------------------------- fallback */

START_TEST(forced_fallback_logs_one_line_and_works)
{
    struct cr_proactor_config cfg = {.dispatch = "ring-per-thread", .threads = 2};
    struct cr_proactor *p;
    struct one o = {0};
    char log[4096];
    int logp[2];
    ssize_t n;
    int lines = 0;

    ck_assert_int_eq(setenv("CABRANK_URING_DISABLE", "1", 1), 0);
    ck_assert_int_eq(pipe2(logp, O_NONBLOCK | O_CLOEXEC), 0);
    cr_log_set_fd(logp[1]);
    ck_assert_int_eq(cr_proactor_create(&p, &cfg), 0);
    cr_log_set_fd(-1);
    ck_assert_str_eq(cr_proactor_engine(p), "emulated");
    n = read(logp[0], log, sizeof(log) - 1);
    ck_assert_int_gt(n, 0);
    log[n] = '\0';
    for (char *s = log; *s != '\0'; s++)
        lines += *s == '\n';
    ck_assert_int_eq(lines, 1);
    ck_assert_ptr_nonnull(strstr(log, "emulated"));
    ck_assert_ptr_nonnull(strstr(log, "CABRANK_URING_DISABLE"));
    ck_assert_int_eq(cr_proactor_start(p), 0);
    cr_aop_init(&o.op, p, 1, on_one);
    ck_assert_int_eq(cr_aop_post(&o.op, 42), 0);
    wait_count(&o.calls, 1);
    ck_assert_int_eq(o.res, 42);
    close_case(p);

    /* Asked for by name, uring is not replaced. */
    cfg.engine = "uring";
    ck_assert_int_eq(cr_proactor_create(&p, &cfg), -ENOSYS);
    close(logp[0]);
    close(logp[1]);
}
END_TEST

START_TEST(bad_configurations_are_refused)
{
    struct cr_proactor_config cfg = {.engine = "aio"};
    struct cr_proactor *p = NULL;

    ck_assert_int_eq(cr_proactor_create(&p, &cfg), -EINVAL);
    ck_assert_ptr_null(p);
    cfg.engine = "emulated";
    cfg.dispatch = "round-robin";
    ck_assert_int_eq(cr_proactor_create(&p, &cfg), -EINVAL);
    cfg.dispatch = "single";
    cfg.threads = 8;
    ck_assert_int_eq(cr_proactor_create(&p, &cfg), 0);
    ck_assert_uint_eq(cr_proactor_threads(p), 1);
    /* Never started: stop and wait return at once. */
    cr_proactor_stop(p);
    ck_assert_int_eq(cr_proactor_wait(p), 0);
    cr_proactor_destroy(p);
    cr_proactor_destroy(NULL);
}
END_TEST

/* Why io_uring cannot be used here (the engine's -ENOSYS: no kernel
 * support, refused by a filter), or NULL where it can, or where it fails
 * otherwise: then each uring case fails, saying why. */
static const char *uring_refused(void)
{
    struct cr_proactor_config cfg = {.engine = "uring", .threads = 1};
    struct cr_proactor *p;
    int err = cr_proactor_create(&p, &cfg);

    if (err == 0)
        cr_proactor_destroy(p);
    return err == -ENOSYS ? "io_uring is refused here" : NULL;
}

/* Adds test over cases[from..NCASES), less the uring cases where io_uring
 * is refused (refused != NULL): each of those is reported as skipped. */
static void add_cases(TCase *tc, const TTest *test, int from, const char *refused)
{
    char what[160];
    int end = refused != NULL ? FIRST_URING : NCASES;

    tcase_add_loop_test(tc, test, from, end > from ? end : from);
    for (int i = from > FIRST_URING ? from : FIRST_URING; refused != NULL && i < NCASES; i++) {
        snprintf(what, sizeof(what), "proactor/%s %s/%s", test->name, cases[i].engine,
                 cases[i].dispatch);
        cr_test_skip(what, refused);
    }
}

Suite *proactor_suite(void);
Suite *proactor_suite(void)
{
    Suite *s = suite_create("proactor");
    TCase *tc = tcase_create("core");
    const char *refused = uring_refused();

    /* Each test takes well under a second; the margin is for a loaded
     * 2-core machine (and x10 under TSan). */
    tcase_set_timeout(tc, 30);
    add_cases(tc, multishot_accept_takes_several_connections_on_one_token, 0, refused);
    add_cases(tc, multishot_accept_is_rearmed_where_the_kernel_has_none, FIRST_URING, refused);
    add_cases(tc, echo_over_many_connections_at_once, 0, refused);
    add_cases(tc, partial_send_is_resumed_to_a_slow_reader, 0, refused);
    add_cases(tc, sendv_sends_every_iovec_resumed, 0, refused);
    add_cases(tc, sendfile_sends_a_file_bigger_than_the_pipe, 0, refused);
    add_cases(tc, sends_resume_past_the_notsent_mark, 0, refused);
    add_cases(tc, connect_reaches_a_listener_and_is_refused_by_a_closed_port, 0, refused);
    add_cases(tc, recv_with_nothing_arriving_times_out_and_timers_expire, 0, refused);
    add_cases(tc, cancel_completes_with_ecanceled_once_even_racing_a_completion, 0, refused);
    add_cases(tc, posts_from_other_threads_reach_their_ring, 0, refused);
    add_cases(tc, a_start_while_the_last_handler_runs_waits_for_it, 0, refused);
    add_cases(tc, stop_runs_every_outstanding_handler_once, 0, refused);
    add_cases(tc, sends_to_a_reader_that_never_reads_time_out, 0, refused);
    add_cases(tc, stop_during_traffic_ends_every_token_once, 0, refused);
    add_cases(tc, a_busy_token_refuses_a_second_operation, 0, refused);
    tcase_add_test(tc, forced_fallback_logs_one_line_and_works);
    tcase_add_test(tc, bad_configurations_are_refused);
    suite_add_tcase(s, tc);
    return s;
}
