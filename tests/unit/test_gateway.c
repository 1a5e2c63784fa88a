/*
 * test_gateway.c - cabrank-gateway's core (apps/oltp/gateway.h) in process,
 * in front of fake back ends: threads that speak proto.h on a loopback
 * listener, count what they receive, and answer at once, hold every reply
 * until told (or until they hold a batch, then answer in reverse order), go
 * silent on PING, die (every connection and the listener closed) and come
 * back on the same port. Clients are blocking sockets of the test thread.
 *
 * Shown: the request id is rewritten on the way in and restored on the way
 * out; out-of-order replies reach their clients; invalid requests never
 * reach a back end; least-outstanding balancing; failover (idempotent
 * requests retried elsewhere, others IN_DOUBT); a timed-out write IN_DOUBT
 * even with a key; a back end that refuses (UNAVAILABLE) passed over;
 * UNAVAILABLE with no back end; reconnection after a back end comes back; a silent
 * back end failed by the health check; the hybrid deadlock test; session pinning; handle sets: two
 * sets each accept and answer on their own back-end connections, and the automatic count follows
 * the affinity mask (one CPU, one set).
 */
#include "../../apps/oltp/gateway.h"
#include "../../apps/oltp/proto.h"

#include <cabrank/cpu.h>
#include <cabrank/listener.h>

#include "../support/oltp_client.h"
#include "../support/support.h"

#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* Generous: a loaded 2-core machine under TSan; nothing waits this long
 * unless it is broken. */
#define LONG_MS 20000

/* The sanitizer builds' slowdown, as the runner's CK_TIMEOUT_MULTIPLIER says. */
static int scale(void)
{
    const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
    int n = m != NULL ? atoi(m) : 1;

    return n >= 1 ? n : 1;
}

/* ------------------------------------------------------------------ fake back end */

#define FAKE_CONNS 16
#define FAKE_HELD  64
#define FAKE_IDS   64
/* A fake's balances are tag * FAKE_TAG + account: the client tells who answered. */
#define FAKE_TAG 1000000

enum fake_cmd { CMD_NONE, CMD_KILL, CMD_REVIVE, CMD_QUIT, CMD_FLUSH };

struct held {
    int conn;
    size_t len;
    uint8_t frame[64];
};

struct fake {
    pthread_t thread;
    uint16_t port;
    int tag;
    int lfd;
    int wake[2];
    int conns[FAKE_CONNS];
    size_t in_len[FAKE_CONNS];
    uint8_t in[FAKE_CONNS][1024];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* Protected by mu. */
    bool hold;       /* keep replies until released */
    unsigned batch;  /* > 0: keep replies until this many, then answer reversed */
    bool mute_ping;  /* never answer PING */
    uint16_t refuse; /* not OK: answer every request, PING too, with it */
    enum fake_cmd cmd;
    unsigned received;             /* requests other than PING */
    unsigned per_conn[FAKE_CONNS]; /* of those, by connection slot */
    unsigned pings;
    uint64_t ids[FAKE_IDS];
    uint64_t sessions[FAKE_IDS];
    unsigned nheld;
    struct held held[FAKE_HELD];
    uint64_t next_session;
};

static void fake_close_conn(struct fake *f, int i)
{
    close(f->conns[i]);
    f->conns[i] = -1;
    f->in_len[i] = 0;
}

/* Caller holds mu. Sends the held replies, last first. */
static void fake_flush(struct fake *f)
{
    while (f->nheld > 0) {
        struct held *h = &f->held[--f->nheld];

        if (f->conns[h->conn] >= 0)
            (void)!cr_test_write_all(f->conns[h->conn], h->frame, h->len);
    }
}

/* The fake's answer to one request (caller holds mu). */
static size_t fake_reply(struct fake *f, const struct oltp_req *q, uint8_t *out, size_t cap)
{
    struct oltp_reply *r = calloc(1, sizeof(*r));
    size_t n;

    ck_assert_ptr_nonnull(r);
    r->op = q->op;
    r->id = q->id;
    r->session = q->session;
    r->status = OLTP_ST_OK;
    if (q->op == OLTP_OP_BEGIN)
        r->session = (uint64_t)f->tag << 56 | ++f->next_session;
    else if (q->session != 0 && q->op != OLTP_OP_COMMIT && q->op != OLTP_OP_ABORT)
        r->status = OLTP_ST_QUEUED;
    r->balance = (int64_t)f->tag * FAKE_TAG + (int64_t)q->account;
    if (f->refuse != OLTP_ST_OK)
        r->status = f->refuse;
    n = oltp_reply_encode(r, out, cap);
    free(r);
    ck_assert_uint_gt(n, 0);
    return n;
}

static void fake_serve(struct fake *f, int i)
{
    ssize_t n = read(f->conns[i], f->in[i] + f->in_len[i], sizeof(f->in[i]) - f->in_len[i]);
    size_t off = 0;

    if (n <= 0) {
        fake_close_conn(f, i);
        return;
    }
    f->in_len[i] += (size_t)n;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        struct oltp_req q;
        uint16_t st;
        ssize_t used = oltp_req_decode(f->in[i] + off, f->in_len[i] - off, &q, &st);
        uint8_t out[64];
        size_t len;

        if (used == -EAGAIN)
            break;
        ck_assert_int_gt(used, 0); /* the gateway forwards only whole, valid frames */
        ck_assert_uint_eq(st, OLTP_ST_OK);
        off += (size_t)used;
        if (q.op == OLTP_OP_PING) {
            f->pings++;
            if (!f->mute_ping) {
                len = fake_reply(f, &q, out, sizeof(out));
                (void)!cr_test_write_all(f->conns[i], out, len);
            }
            continue;
        }
        if (f->received < FAKE_IDS) {
            f->ids[f->received] = q.id;
            f->sessions[f->received] = q.session;
        }
        f->received++;
        f->per_conn[i]++;
        len = fake_reply(f, &q, out, sizeof(out));
        if (f->hold || f->batch > 0) {
            ck_assert_uint_lt(f->nheld, FAKE_HELD);
            f->held[f->nheld].conn = i;
            f->held[f->nheld].len = len;
            memcpy(f->held[f->nheld].frame, out, len);
            f->nheld++;
            if (f->batch > 0 && f->nheld >= f->batch)
                fake_flush(f);
        } else {
            (void)!cr_test_write_all(f->conns[i], out, len);
        }
    }
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    memmove(f->in[i], f->in[i] + off, f->in_len[i] - off);
    f->in_len[i] -= off;
}

static int fake_listen(uint16_t port)
{
    char addr[32];
    struct cr_listener_config cfg = {.address = addr};
    int fd;

    snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
    ck_assert_int_eq(cr_listener_open(&fd, &cfg), 0);
    return fd;
}

/* Runs the command the test posted; false to quit. */
static bool fake_command(struct fake *f)
{
    enum fake_cmd cmd;
    char b[16];

    (void)!read(f->wake[0], b, sizeof(b));
    pthread_mutex_lock(&f->mu);
    cmd = f->cmd;
    if (cmd == CMD_KILL || cmd == CMD_QUIT) {
        f->nheld = 0;
        for (int i = 0; i < FAKE_CONNS; i++) {
            if (f->conns[i] >= 0)
                fake_close_conn(f, i);
        }
        if (f->lfd >= 0)
            close(f->lfd);
        f->lfd = -1;
    } else if (cmd == CMD_REVIVE) {
        f->lfd = fake_listen(f->port);
    } else if (cmd == CMD_FLUSH) {
        fake_flush(f);
    }
    f->cmd = CMD_NONE;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return cmd != CMD_QUIT;
}

static void *fake_main(void *arg)
{
    struct fake *f = arg;

    for (;;) {
        struct pollfd p[FAKE_CONNS + 2];
        int n = 0;

        p[n++] = (struct pollfd){.fd = f->wake[0], .events = POLLIN};
        p[n++] = (struct pollfd){.fd = f->lfd, .events = POLLIN};
        for (int i = 0; i < FAKE_CONNS; i++)
            p[n++] = (struct pollfd){.fd = f->conns[i], .events = POLLIN};
        ck_assert_int_ge(poll(p, (nfds_t)n, -1), 0);
        if (p[0].revents != 0 && !fake_command(f))
            return NULL;
        if (p[0].revents != 0)
            continue; /* the fds may have changed */
        if (p[1].revents != 0) {
            int fd;

            if (cr_listener_accept(f->lfd, &fd) == 0) {
                int slot = -1;

                ck_assert_int_eq(cr_test_set_nonblock(fd, false), 0);
                for (int i = 0; i < FAKE_CONNS && slot < 0; i++) {
                    if (f->conns[i] < 0)
                        slot = i;
                }
                ck_assert_int_ge(slot, 0);
                f->conns[slot] = fd;
            }
        }
        for (int i = 0; i < FAKE_CONNS; i++) {
            if (p[i + 2].revents != 0 && f->conns[i] >= 0)
                fake_serve(f, i);
        }
    }
}

static void fake_start(struct fake *f, int tag)
{
    /* The fake answers links the gateway may have failed and closed (a
     * timed-out request): a write there is EPIPE, not the test's death. */
    ck_assert(signal(SIGPIPE, SIG_IGN) != SIG_ERR);
    memset(f, 0, sizeof(*f));
    f->tag = tag;
    for (int i = 0; i < FAKE_CONNS; i++)
        f->conns[i] = -1;
    f->lfd = fake_listen(0);
    f->port = (uint16_t)cr_listener_port(f->lfd);
    ck_assert_int_eq(pipe(f->wake), 0);
    ck_assert_int_eq(pthread_mutex_init(&f->mu, NULL), 0);
    ck_assert_int_eq(pthread_cond_init(&f->cv, NULL), 0);
    ck_assert_int_eq(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

/* Posts cmd and waits until the fake ran it. */
static void fake_do(struct fake *f, enum fake_cmd cmd)
{
    pthread_mutex_lock(&f->mu);
    f->cmd = cmd;
    ck_assert_int_eq(write(f->wake[1], "x", 1), 1);
    while (f->cmd != CMD_NONE)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

static void fake_stop(struct fake *f)
{
    fake_do(f, CMD_QUIT);
    ck_assert_int_eq(pthread_join(f->thread, NULL), 0);
    close(f->wake[0]);
    close(f->wake[1]);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
}

static void fake_set(struct fake *f, bool hold, unsigned batch, bool mute_ping)
{
    pthread_mutex_lock(&f->mu);
    f->hold = hold;
    f->batch = batch;
    f->mute_ping = mute_ping;
    pthread_mutex_unlock(&f->mu);
}

static void fake_refuse(struct fake *f, uint16_t status)
{
    pthread_mutex_lock(&f->mu);
    f->refuse = status;
    pthread_mutex_unlock(&f->mu);
}

/* Stops holding and sends what was held. */
static void fake_release(struct fake *f)
{
    fake_set(f, false, 0, false);
    fake_do(f, CMD_FLUSH);
}

static unsigned fake_received(struct fake *f)
{
    unsigned n;

    pthread_mutex_lock(&f->mu);
    n = f->received;
    pthread_mutex_unlock(&f->mu);
    return n;
}

/* Waits until a and b (may be NULL) received total requests together. */
static void wait_received(struct fake *a, struct fake *b, unsigned total)
{
    uint64_t end = cr_test_now_ms() + LONG_MS;

    while (fake_received(a) + (b != NULL ? fake_received(b) : 0) < total) {
        ck_assert_uint_lt(cr_test_now_ms(), end);
        usleep(1000);
    }
    ck_assert_uint_eq(fake_received(a) + (b != NULL ? fake_received(b) : 0), total);
}

/* ------------------------------------------------------------------ gateway, clients */

struct gw_opts {
    unsigned groups;
    unsigned threads;
    unsigned connections;
    uint64_t health_ms;
    uint64_t health_timeout_ms;
    uint64_t timeout_ms;
};

static struct oltp_gateway *gw_start(const uint16_t *ports, unsigned n, const struct gw_opts *o)
{
    static char addrs[4][32];
    const char *list[4];
    struct oltp_gateway_config cfg = {
        .listen = "127.0.0.1:0",
        .backends = list,
        .nbackends = n,
        .groups = o != NULL ? o->groups : 0,
        .threads = o != NULL ? o->threads : 4,
        .connections = o != NULL ? o->connections : 2,
        .health_interval_ms = o != NULL ? o->health_ms : 0,
        .health_timeout_ms = o != NULL ? o->health_timeout_ms : 0,
        .timeout_ms = o != NULL && o->timeout_ms != 0 ? o->timeout_ms : LONG_MS,
        .backoff_min_ms = 10,
        .backoff_max_ms = 100,
    };
    struct oltp_gateway *g;

    for (unsigned i = 0; i < n; i++) {
        snprintf(addrs[i], sizeof(addrs[i]), "127.0.0.1:%u", ports[i]);
        list[i] = addrs[i];
    }
    ck_assert_int_eq(oltp_gateway_create(&g, &cfg), 0);
    ck_assert_int_eq(oltp_gateway_start(g), 0);
    return g;
}

static void gw_stop(struct oltp_gateway *g)
{
    ck_assert_int_eq(oltp_gateway_stop(g, LONG_MS), 0);
    oltp_gateway_destroy(g);
}

static struct oltp_gateway_stats *gw_stats(struct oltp_gateway *g)
{
    static struct oltp_gateway_stats st;

    oltp_gateway_stats(g, &st);
    return &st;
}

/* Waits until back end i has `conns` connections up. */
static void wait_conns(struct oltp_gateway *g, unsigned i, unsigned conns)
{
    uint64_t end = cr_test_now_ms() + LONG_MS;

    while (gw_stats(g)->backends[i].connections != conns) {
        ck_assert_uint_lt(cr_test_now_ms(), end);
        usleep(1000);
    }
}

static int cl_open(struct oltp_gateway *g)
{
    int fd = cr_test_connect((uint16_t)oltp_gateway_port(g));

    ck_assert_int_ge(fd, 0);
    return fd;
}

static void cl_send(int fd, const struct oltp_req *q)
{
    ck_assert_int_eq(cr_test_oltp_send(fd, q), 0);
}

/* One whole reply frame within LONG_MS (-EBADMSG: oversized or malformed). */
static void cl_recv(int fd, struct oltp_reply *r)
{
    ck_assert_int_eq(cr_test_oltp_recv(fd, r, LONG_MS), 0);
}

static struct oltp_req req_of(uint8_t op, uint64_t id, uint64_t account)
{
    struct oltp_req q;

    memset(&q, 0, sizeof(q));
    q.op = op;
    q.id = id;
    q.account = account;
    return q;
}

static struct oltp_req keyed(uint8_t op, uint64_t id, uint64_t account, int64_t amount)
{
    struct oltp_req q = req_of(op, id, account);

    q.amount = amount;
    q.key[0] = 'k';
    memcpy(q.key + 8, &id, sizeof(id));
    return q;
}

static struct oltp_reply *call(int fd, const struct oltp_req *q)
{
    static struct oltp_reply r;

    cl_send(fd, q);
    cl_recv(fd, &r);
    ck_assert_uint_eq(r.id, q->id);
    ck_assert_uint_eq(r.op, q->op);
    return &r;
}

/* ------------------------------------------------------------------ tests */

START_TEST(forwards_with_a_pool_id_and_restores_the_clients)
{
    struct fake a;
    struct oltp_gateway *g;
    struct oltp_reply *r;
    struct oltp_req q;
    int fd;

    fake_start(&a, 1);
    g = gw_start(&a.port, 1, NULL);
    fd = cl_open(g);
    q = req_of(OLTP_OP_BALANCE, 0xDEADBEEF00000001ULL, 42);
    r = call(fd, &q);
    ck_assert_uint_eq(r->status, OLTP_ST_OK);
    ck_assert_int_eq(r->balance, 1 * FAKE_TAG + 42);
    q = keyed(OLTP_OP_DEPOSIT, 0xDEADBEEF00000001ULL, 43, 5);
    r = call(fd, &q);
    ck_assert_uint_eq(r->status, OLTP_ST_OK);
    ck_assert_int_eq(r->balance, 1 * FAKE_TAG + 43);
    /* The back end saw the gateway's own ids, two different ones for the
     * client's one id. */
    ck_assert_uint_eq(fake_received(&a), 2);
    pthread_mutex_lock(&a.mu);
    ck_assert_uint_ne(a.ids[0], q.id);
    ck_assert_uint_ne(a.ids[1], q.id);
    ck_assert_uint_ne(a.ids[0], a.ids[1]);
    pthread_mutex_unlock(&a.mu);
    ck_assert_uint_eq(gw_stats(g)->forwarded, 2);
    close(fd);
    gw_stop(g);
    fake_stop(&a);
}
END_TEST

/* Requests pipelined in one write are answered one after the other, in
 * order, each with its own id. */
START_TEST(pipelined_requests_are_answered_in_order)
{
    struct fake a;
    struct oltp_gateway *g;
    uint8_t buf[3 * 64];
    size_t len = 0;
    int fd;

    fake_start(&a, 4);
    g = gw_start(&a.port, 1, NULL);
    fd = cl_open(g);
    for (uint64_t i = 0; i < 3; i++) {
        struct oltp_req q = req_of(OLTP_OP_BALANCE, 900 + i, 20 + i);

        len += oltp_req_encode(&q, buf + len, sizeof(buf) - len);
    }
    ck_assert_int_eq(cr_test_write_all(fd, buf, len), 0);
    for (uint64_t i = 0; i < 3; i++) {
        struct oltp_reply r;

        cl_recv(fd, &r);
        ck_assert_uint_eq(r.id, 900 + i);
        ck_assert_uint_eq(r.status, OLTP_ST_OK);
        ck_assert_int_eq(r.balance, 4 * FAKE_TAG + 20 + (int64_t)i);
    }
    ck_assert_uint_eq(fake_received(&a), 3);
    close(fd);
    gw_stop(g);
    fake_stop(&a);
}
END_TEST

/* One multiplexed connection, a back end that answers four requests in
 * reverse order: each client gets its own reply. */
START_TEST(replies_out_of_order_reach_their_clients)
{
    struct fake a;
    struct gw_opts o = {.threads = 4, .connections = 1};
    struct oltp_gateway *g;
    int fd[4];

    fake_start(&a, 2);
    fake_set(&a, false, 4, false);
    g = gw_start(&a.port, 1, &o);
    for (int i = 0; i < 4; i++) {
        struct oltp_req q = req_of(OLTP_OP_BALANCE, 100 + (uint64_t)i, 10 + (uint64_t)i);

        fd[i] = cl_open(g);
        cl_send(fd[i], &q);
    }
    for (int i = 0; i < 4; i++) {
        struct oltp_reply r;

        cl_recv(fd[i], &r);
        ck_assert_uint_eq(r.id, 100 + (uint64_t)i);
        ck_assert_uint_eq(r.status, OLTP_ST_OK);
        ck_assert_int_eq(r.balance, 2 * FAKE_TAG + 10 + i);
        close(fd[i]);
    }
    gw_stop(g);
    fake_stop(&a);
}
END_TEST

START_TEST(invalid_requests_are_answered_by_the_gateway)
{
    /* A BALANCE whose body is 4 bytes short, and a kind that is no op. */
    static const uint8_t short_body[] = {0xCB, 1, OLTP_OP_BALANCE,
                                         0,    0, 0,
                                         0,    4, 0,
                                         0,    0, 0,
                                         0,    0, 0,
                                         7,    0, 0,
                                         0,    0, 0,
                                         0,    0, 0,
                                         0,    0, 0,
                                         1};
    static const uint8_t unknown_op[] = {0xCB, 1, 99, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                         0,    0, 0,  8, 0, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t bad_magic[OLTP_HEADER_SIZE] = {0xCB, 2, OLTP_OP_PING};
    struct fake a;
    struct oltp_gateway *g;
    struct oltp_reply r;
    struct oltp_req q;
    char eof;
    int fd;

    fake_start(&a, 1);
    g = gw_start(&a.port, 1, NULL);
    fd = cl_open(g);
    q = req_of(OLTP_OP_BALANCE, 1, 0);
    ck_assert_uint_eq(call(fd, &q)->status, OLTP_ST_BAD_ACCOUNT);
    q = req_of(OLTP_OP_BALANCE, 2, OLTP_MAX_ACCOUNT + 1);
    ck_assert_uint_eq(call(fd, &q)->status, OLTP_ST_BAD_ACCOUNT);
    q = keyed(OLTP_OP_DEPOSIT, 3, 5, 0);
    ck_assert_uint_eq(call(fd, &q)->status, OLTP_ST_BAD_AMOUNT);
    q = keyed(OLTP_OP_WITHDRAW, 4, 5, OLTP_MAX_AMOUNT + 1);
    ck_assert_uint_eq(call(fd, &q)->status, OLTP_ST_BAD_AMOUNT);
    q = keyed(OLTP_OP_TRANSFER, 5, 5, 10);
    q.to = 5;
    ck_assert_uint_eq(call(fd, &q)->status, OLTP_ST_BAD_ACCOUNT);
    q = req_of(OLTP_OP_TRANSFER, 6, 5);
    q.to = 6;
    q.amount = 10;
    ck_assert_uint_eq(call(fd, &q)->status, OLTP_ST_NEED_KEY);
    q = req_of(OLTP_OP_HISTORY, 7, 5);
    ck_assert_uint_eq(call(fd, &q)->status, OLTP_ST_MALFORMED);
    q = req_of(OLTP_OP_PING, 8, 0);
    ck_assert_uint_eq(call(fd, &q)->status, OLTP_ST_OK);
    ck_assert_int_eq(cr_test_write_all(fd, short_body, sizeof(short_body)), 0);
    cl_recv(fd, &r);
    ck_assert_uint_eq(r.id, 7);
    ck_assert_uint_eq(r.status, OLTP_ST_MALFORMED);
    ck_assert_int_eq(cr_test_write_all(fd, unknown_op, sizeof(unknown_op)), 0);
    cl_recv(fd, &r);
    ck_assert_uint_eq(r.id, 8);
    ck_assert_uint_eq(r.status, OLTP_ST_UNKNOWN_OP);
    /* None reached the back end; a valid one does. */
    ck_assert_uint_eq(fake_received(&a), 0);
    q = req_of(OLTP_OP_BALANCE, 9, 5);
    ck_assert_uint_eq(call(fd, &q)->status, OLTP_ST_OK);
    ck_assert_uint_eq(fake_received(&a), 1);
    ck_assert_uint_eq(gw_stats(g)->local, 10);
    /* An unusable stream is closed. */
    ck_assert_int_eq(cr_test_write_all(fd, bad_magic, sizeof(bad_magic)), 0);
    ck_assert_int_eq(cr_test_read_exact(fd, &eof, 1, LONG_MS), -EPIPE);
    close(fd);
    gw_stop(g);
    fake_stop(&a);
}
END_TEST

/* Two back ends that hold every reply: requests sent one by one alternate,
 * each going to the back end with fewer in flight. */
START_TEST(balances_by_fewest_outstanding_requests)
{
    struct fake a;
    struct fake b;
    struct oltp_gateway *g;
    uint16_t ports[2];
    int fd[6];

    fake_start(&a, 1);
    fake_start(&b, 2);
    fake_set(&a, true, 0, false);
    fake_set(&b, true, 0, false);
    ports[0] = a.port;
    ports[1] = b.port;
    g = gw_start(ports, 2, NULL);
    for (unsigned i = 0; i < 6; i++) {
        struct oltp_req q = req_of(OLTP_OP_BALANCE, i + 1, 1);

        fd[i] = cl_open(g);
        cl_send(fd[i], &q);
        wait_received(&a, &b, i + 1);
    }
    ck_assert_uint_eq(fake_received(&a), 3);
    ck_assert_uint_eq(fake_received(&b), 3);
    ck_assert_uint_eq(gw_stats(g)->backends[0].outstanding, 3);
    ck_assert_uint_eq(gw_stats(g)->backends[1].outstanding, 3);
    fake_release(&a);
    fake_release(&b);
    for (unsigned i = 0; i < 6; i++) {
        struct oltp_reply r;

        cl_recv(fd[i], &r);
        ck_assert_uint_eq(r.status, OLTP_ST_OK);
        ck_assert_uint_eq(r.id, i + 1);
        close(fd[i]);
    }
    gw_stop(g);
    fake_stop(&a);
    fake_stop(&b);
}
END_TEST

/*
 * A back end dies with two requests in flight: the keyed DEPOSIT is sent
 * again to the other one and succeeds; the DEPOSIT without a key may have
 * been applied and is answered IN_DOUBT. New requests go to the survivor.
 */
START_TEST(failover_retries_idempotent_requests_and_doubts_the_others)
{
    struct fake a;
    struct fake b;
    struct oltp_gateway *g;
    struct oltp_req q[4];
    struct oltp_reply r;
    uint16_t ports[2];
    int fd[4];

    fake_start(&a, 1);
    fake_start(&b, 2);
    fake_set(&a, true, 0, false);
    fake_set(&b, true, 0, false);
    ports[0] = a.port;
    ports[1] = b.port;
    g = gw_start(ports, 2, NULL);
    q[0] = keyed(OLTP_OP_DEPOSIT, 11, 7, 100); /* to a */
    q[1] = req_of(OLTP_OP_BALANCE, 12, 7);     /* to b */
    q[2] = req_of(OLTP_OP_DEPOSIT, 13, 8);     /* to a: no key */
    q[2].amount = 100;
    q[3] = req_of(OLTP_OP_BALANCE, 14, 8); /* to b */
    for (unsigned i = 0; i < 4; i++) {
        fd[i] = cl_open(g);
        cl_send(fd[i], &q[i]);
        wait_received(&a, &b, i + 1);
    }
    ck_assert_uint_eq(fake_received(&a), 2);
    ck_assert_uint_eq(fake_received(&b), 2);
    /* A wait nested on a thread above another ends first (the hybrid
     * pool's stack discipline): whichever of a's and b's requests a thread
     * took on top of the other, every wait can end once a died and b
     * answers. */
    fake_do(&a, CMD_KILL);
    fake_release(&b);
    cl_recv(fd[2], &r);
    ck_assert_uint_eq(r.id, 13);
    ck_assert_uint_eq(r.status, OLTP_ST_IN_DOUBT);
    cl_recv(fd[0], &r);
    ck_assert_uint_eq(r.id, 11);
    ck_assert_uint_eq(r.status, OLTP_ST_OK);
    ck_assert_int_eq(r.balance, 2 * FAKE_TAG + 7); /* b applied it */
    cl_recv(fd[1], &r);
    ck_assert_uint_eq(r.status, OLTP_ST_OK);
    cl_recv(fd[3], &r);
    ck_assert_uint_eq(r.status, OLTP_ST_OK);
    ck_assert_uint_eq(fake_received(&b), 3); /* the keyed DEPOSIT, sent again */
    ck_assert_uint_eq(gw_stats(g)->retried, 1);
    ck_assert_uint_eq(gw_stats(g)->in_doubt, 1);

    wait_conns(g, 0, 0);
    ck_assert(!gw_stats(g)->backends[0].live);
    q[1].id = 15;
    ck_assert_uint_eq(call(fd[1], &q[1])->status, OLTP_ST_OK);
    ck_assert_uint_eq(fake_received(&b), 4);
    ck_assert_uint_eq(fake_received(&a), 2);
    for (int i = 0; i < 4; i++)
        close(fd[i]);
    gw_stop(g);
    fake_stop(&a);
    fake_stop(&b);
}
END_TEST

/* A back end that holds its replies past the gateway's timeout: a write
 * may have been applied there, so even a keyed one is IN_DOUBT (its key makes
 * a resend safe, not its outcome known); a read is UNAVAILABLE. */
START_TEST(a_write_timed_out_is_in_doubt_even_with_a_key)
{
    struct gw_opts o = {.threads = 2, .connections = 1, .timeout_ms = 300 * (uint64_t)scale()};
    struct oltp_req dep = keyed(OLTP_OP_DEPOSIT, 21, 7, 100);
    struct oltp_req bal = req_of(OLTP_OP_BALANCE, 22, 7);
    struct oltp_gateway *g;
    struct fake a;
    int fd;

    fake_start(&a, 1);
    fake_set(&a, true, 0, true);
    g = gw_start(&a.port, 1, &o);
    wait_conns(g, 0, 1);
    fd = cl_open(g);
    ck_assert_uint_eq(call(fd, &dep)->status, OLTP_ST_IN_DOUBT);
    ck_assert_uint_eq(call(fd, &bal)->status, OLTP_ST_UNAVAILABLE);
    ck_assert_uint_eq(gw_stats(g)->in_doubt, 1);
    close(fd);
    fake_release(&a);
    gw_stop(g);
    fake_stop(&a);
}
END_TEST

/* Two fake ledgers, a (tag 1) refusing with UNAVAILABLE and b (tag 2), and
 * a gateway with options o in front of them, every connection up. */
static struct oltp_gateway *gw_start_a_refusing(struct fake *a, struct fake *b,
                                                const struct gw_opts *o)
{
    struct oltp_gateway *g;
    uint16_t ports[2];

    fake_start(a, 1);
    fake_start(b, 2);
    fake_refuse(a, OLTP_ST_UNAVAILABLE);
    ports[0] = a->port;
    ports[1] = b->port;
    g = gw_start(ports, 2, o);
    wait_conns(g, 0, o->connections);
    wait_conns(g, 1, o->connections);
    return g;
}

/* A ledger whose storage failed answers UNAVAILABLE (nothing applied) to
 * everything: the gateway sends the request to another ledger, any
 * request, keyed or not, and answers UNAVAILABLE only when none takes it. */
START_TEST(a_ledger_that_refuses_is_passed_over)
{
    struct gw_opts o = {.groups = 1, .threads = 2, .connections = 2};
    struct fake a;
    struct fake b;
    struct oltp_gateway *g = gw_start_a_refusing(&a, &b, &o);
    int fd;

    fd = cl_open(g);
    for (uint64_t i = 0; i < 8; i++) {
        struct oltp_req q = req_of(OLTP_OP_DEPOSIT, 30 + i, 7);
        struct oltp_reply *r;

        q.amount = 5;
        r = call(fd, &q);
        ck_assert_uint_eq(r->status, OLTP_ST_OK);
        ck_assert_int_eq(r->balance, 2 * FAKE_TAG + 7);
    }
    ck_assert_uint_eq(fake_received(&b), 8);
    fake_refuse(&b, OLTP_ST_UNAVAILABLE);
    ck_assert_uint_eq(
        call(fd, &(struct oltp_req){.op = OLTP_OP_BALANCE, .id = 40, .account = 7})->status,
        OLTP_ST_UNAVAILABLE);
    close(fd);
    gw_stop(g);
    fake_stop(&a);
    fake_stop(&b);
}
END_TEST

/* Waits until the gateway sees back end i refusing (or not). */
static void wait_refusing(struct oltp_gateway *g, unsigned i, bool refusing)
{
    uint64_t end = cr_test_now_ms() + LONG_MS;

    while (gw_stats(g)->backends[i].refusing != refusing) {
        ck_assert_uint_lt(cr_test_now_ms(), end);
        usleep(1000);
    }
}

/* A ledger that answers its health PING with UNAVAILABLE is not tried while
 * another is live (no request waits for its refusal), and is tried again
 * once a PING is answered OK. Without the mark the router's tie goes to the
 * lowest index, the refusing ledger. */
START_TEST(a_refusing_ledger_is_tried_last_until_it_answers_ok)
{
    struct gw_opts o = {.groups = 1, .threads = 2, .connections = 1, .health_ms = 20};
    struct fake a;
    struct fake b;
    struct oltp_gateway *g = gw_start_a_refusing(&a, &b, &o);
    int fd;

    wait_refusing(g, 0, true);
    ck_assert(!gw_stats(g)->backends[1].refusing);
    fd = cl_open(g);
    for (uint64_t i = 0; i < 8; i++) {
        struct oltp_req q = req_of(OLTP_OP_DEPOSIT, 50 + i, 7);

        q.amount = 5;
        ck_assert_uint_eq(call(fd, &q)->status, OLTP_ST_OK);
    }
    ck_assert_uint_eq(fake_received(&a), 0);
    ck_assert_uint_eq(fake_received(&b), 8);
    fake_refuse(&a, OLTP_ST_OK);
    wait_refusing(g, 0, false);
    for (uint64_t i = 0; i < 8; i++) {
        struct oltp_req q = req_of(OLTP_OP_DEPOSIT, 60 + i, 7);

        q.amount = 5;
        ck_assert_uint_eq(call(fd, &q)->status, OLTP_ST_OK);
    }
    ck_assert_uint_gt(fake_received(&a), 0);
    close(fd);
    gw_stop(g);
    fake_stop(&a);
    fake_stop(&b);
}
END_TEST

START_TEST(no_live_back_end_answers_unavailable_at_once)
{
    struct fake a;
    struct oltp_gateway *g;
    struct oltp_req q = req_of(OLTP_OP_BALANCE, 1, 1);
    struct gw_opts o = {.threads = 2, .connections = 2, .timeout_ms = 60000};
    uint64_t t0;
    int fd;

    fake_start(&a, 1);
    fake_do(&a, CMD_KILL); /* nothing listens on its port now */
    g = gw_start(&a.port, 1, &o);
    fd = cl_open(g);
    t0 = cr_test_now_ms();
    ck_assert_uint_eq(call(fd, &q)->status, OLTP_ST_UNAVAILABLE);
    /* At once: far below the request timeout. */
    ck_assert_uint_lt(cr_test_now_ms() - t0, 30000);
    ck_assert_uint_eq(gw_stats(g)->unavailable, 1);
    ck_assert_uint_eq(fake_received(&a), 0);
    close(fd);
    gw_stop(g);
    fake_stop(&a);
}
END_TEST

/* The back end dies and comes back on its port: the back-off reconnects
 * every connection and requests flow again. */
START_TEST(reconnects_when_the_back_end_comes_back)
{
    struct fake a;
    struct gw_opts o = {.threads = 2, .connections = 2, .health_ms = 50};
    struct oltp_gateway *g;
    struct oltp_req q = req_of(OLTP_OP_BALANCE, 1, 3);
    int fd;

    fake_start(&a, 1);
    g = gw_start(&a.port, 1, &o);
    fd = cl_open(g);
    ck_assert_uint_eq(call(fd, &q)->status, OLTP_ST_OK);
    fake_do(&a, CMD_KILL);
    wait_conns(g, 0, 0);
    q.id = 2;
    ck_assert_uint_eq(call(fd, &q)->status, OLTP_ST_UNAVAILABLE);
    fake_do(&a, CMD_REVIVE);
    wait_conns(g, 0, 2);
    q.id = 3;
    ck_assert_uint_eq(call(fd, &q)->status, OLTP_ST_OK);
    ck_assert_uint_eq(gw_stats(g)->backends[0].reconnects, 2);
    ck_assert_uint_ge(gw_stats(g)->backends[0].failures, 2);
    ck_assert_uint_eq(gw_stats(g)->backends[0].epoch, 1);
    close(fd);
    gw_stop(g);
    fake_stop(&a);
}
END_TEST

/* A back end that keeps its connections but never answers PING is failed
 * by the health check; the one that answers is not. */
START_TEST(health_check_fails_a_silent_back_end)
{
    struct fake a;
    struct fake b;
    /* The healthy one must answer within the timeout on a loaded machine
     * under TSan too. */
    struct gw_opts o = {.threads = 2,
                        .connections = 1,
                        .health_ms = 20,
                        .health_timeout_ms = 300 * (uint64_t)scale()};
    struct oltp_gateway *g;
    uint16_t ports[2];
    uint64_t end;

    fake_start(&a, 1);
    fake_start(&b, 2);
    fake_set(&a, false, 0, true);
    ports[0] = a.port;
    ports[1] = b.port;
    g = gw_start(ports, 2, &o);
    end = cr_test_now_ms() + LONG_MS;
    while (gw_stats(g)->backends[0].failures == 0) {
        ck_assert_uint_lt(cr_test_now_ms(), end);
        usleep(1000);
    }
    ck_assert_uint_ge(gw_stats(g)->backends[0].epoch, 1);
    ck_assert_uint_eq(gw_stats(g)->backends[1].failures, 0);
    pthread_mutex_lock(&b.mu);
    ck_assert_uint_gt(b.pings, 0);
    pthread_mutex_unlock(&b.mu);
    gw_stop(g);
    fake_stop(&a);
    fake_stop(&b);
}
END_TEST

#define HY_CLIENTS 8

/*
 * The hybrid deadlock test: two threads, eight clients with one request
 * each, and a back end that answers only once it holds all eight. Each
 * thread must wait for several replies at once while still reading new
 * clients, which only the hybrid pool allows.
 */
START_TEST(two_threads_serve_eight_waiting_clients)
{
    struct fake a;
    struct gw_opts o = {.threads = 2, .connections = 1};
    struct oltp_gateway *g;
    int fd[HY_CLIENTS];

    fake_start(&a, 3);
    fake_set(&a, false, HY_CLIENTS, false);
    g = gw_start(&a.port, 1, &o);
    for (int i = 0; i < HY_CLIENTS; i++) {
        struct oltp_req q = req_of(OLTP_OP_BALANCE, 1000 + (uint64_t)i, 1 + (uint64_t)i);

        fd[i] = cl_open(g);
        cl_send(fd[i], &q);
    }
    for (int i = 0; i < HY_CLIENTS; i++) {
        struct oltp_reply r;

        cl_recv(fd[i], &r);
        ck_assert_uint_eq(r.id, 1000 + (uint64_t)i);
        ck_assert_uint_eq(r.status, OLTP_ST_OK);
        ck_assert_int_eq(r.balance, 3 * FAKE_TAG + 1 + i);
        close(fd[i]);
    }
    ck_assert_uint_eq(fake_received(&a), HY_CLIENTS);
    gw_stop(g);
    fake_stop(&a);
}
END_TEST

/*
 * A session stays on the back end that began it even when the other one is
 * less loaded; it ends with COMMIT; a session whose back end died is gone.
 */
START_TEST(sessions_are_pinned_to_their_back_end)
{
    struct fake a;
    struct fake b;
    struct oltp_gateway *g;
    struct oltp_reply r;
    struct oltp_reply *rp;
    struct oltp_req q;
    uint16_t ports[2];
    uint64_t sid;
    int x;
    int y;

    fake_start(&a, 1);
    fake_start(&b, 2);
    fake_set(&a, true, 0, false);
    ports[0] = a.port;
    ports[1] = b.port;
    g = gw_start(ports, 2, NULL);
    x = cl_open(g);
    y = cl_open(g);
    /* a holds x's request, so y's BEGIN goes to b. */
    q = req_of(OLTP_OP_BALANCE, 1, 1);
    cl_send(x, &q);
    wait_received(&a, NULL, 1);
    q = req_of(OLTP_OP_BEGIN, 2, 0);
    rp = call(y, &q);
    ck_assert_uint_eq(rp->status, OLTP_ST_OK);
    sid = rp->session;
    ck_assert_uint_eq(sid >> 56, 2);
    ck_assert_uint_eq(gw_stats(g)->sessions, 1);
    fake_release(&a);
    cl_recv(x, &r);
    ck_assert_uint_eq(r.status, OLTP_ST_OK);

    /* Both idle now: balancing alone would pick a. */
    for (uint64_t i = 0; i < 3; i++) {
        q = keyed(OLTP_OP_DEPOSIT, 10 + i, 4, 1);
        q.session = sid;
        rp = call(y, &q);
        ck_assert_uint_eq(rp->status, OLTP_ST_QUEUED);
        ck_assert_uint_eq(rp->session, sid);
    }
    q = req_of(OLTP_OP_COMMIT, 20, 0);
    q.session = sid;
    ck_assert_uint_eq(call(y, &q)->status, OLTP_ST_OK);
    ck_assert_uint_eq(fake_received(&b), 5);
    ck_assert_uint_eq(fake_received(&a), 1);
    pthread_mutex_lock(&b.mu);
    for (unsigned i = 0; i < 5; i++)
        ck_assert_uint_eq(b.sessions[i], i == 0 ? 0 : sid);
    pthread_mutex_unlock(&b.mu);
    /* Committed: the gateway forgot it; so for an id it never saw. */
    ck_assert_uint_eq(gw_stats(g)->sessions, 0);
    q = keyed(OLTP_OP_DEPOSIT, 21, 4, 1);
    q.session = sid;
    ck_assert_uint_eq(call(y, &q)->status, OLTP_ST_NO_SESSION);
    q.session = 12345;
    ck_assert_uint_eq(call(y, &q)->status, OLTP_ST_NO_SESSION);
    ck_assert_uint_eq(fake_received(&b), 5);

    /* A session on a, whose back end dies. */
    q = req_of(OLTP_OP_BEGIN, 30, 0);
    rp = call(x, &q);
    ck_assert_uint_eq(rp->status, OLTP_ST_OK);
    sid = rp->session;
    ck_assert_uint_eq(sid >> 56, 1);
    fake_do(&a, CMD_KILL);
    wait_conns(g, 0, 0);
    q = keyed(OLTP_OP_DEPOSIT, 31, 4, 1);
    q.session = sid;
    ck_assert_uint_eq(call(x, &q)->status, OLTP_ST_NO_SESSION);
    ck_assert_uint_eq(fake_received(&b), 5);
    close(x);
    close(y);
    gw_stop(g);
    fake_stop(&a);
    fake_stop(&b);
}
END_TEST

#define SET_CLIENTS 64

/*
 * --groups 2: 64 clients, a keyed TRANSFER each, every one answered right;
 * the kernel spread them over both sets' listener copies, each set read
 * requests, and each set's own connection to the back end carried exactly
 * its set's requests (nothing crosses sets).
 */
START_TEST(two_sets_each_accept_and_answer)
{
    struct fake a;
    struct gw_opts o = {.groups = 2, .threads = 4, .connections = 1};
    struct oltp_gateway *g;
    struct oltp_gateway_stats *st;
    int fd[SET_CLIENTS];
    unsigned got[2] = {0, 0};
    unsigned n = 0;

    fake_start(&a, 4);
    g = gw_start(&a.port, 1, &o);
    wait_conns(g, 0, 2);
    for (int i = 0; i < SET_CLIENTS; i++) {
        struct oltp_req q = keyed(OLTP_OP_TRANSFER, 500 + (uint64_t)i, 1 + (uint64_t)i, 7);

        q.to = 100 + (uint64_t)i;
        fd[i] = cl_open(g);
        cl_send(fd[i], &q);
    }
    for (int i = 0; i < SET_CLIENTS; i++) {
        struct oltp_reply r;

        cl_recv(fd[i], &r);
        ck_assert_uint_eq(r.op, OLTP_OP_TRANSFER);
        ck_assert_uint_eq(r.id, 500 + (uint64_t)i);
        ck_assert_uint_eq(r.status, OLTP_ST_OK);
        ck_assert_int_eq(r.balance, 4 * FAKE_TAG + 1 + i);
        close(fd[i]);
    }
    st = gw_stats(g);
    ck_assert_uint_eq(st->nsets, 2);
    ck_assert_uint_eq(st->threads, 4);
    ck_assert_uint_eq(st->forwarded, SET_CLIENTS);
    ck_assert_uint_eq(st->sets[0].accepted + st->sets[1].accepted, SET_CLIENTS);
    for (unsigned i = 0; i < 2; i++) {
        ck_assert_uint_eq(st->sets[i].threads, 2);
        ck_assert_uint_eq(st->sets[i].links_up, 1);
        ck_assert_uint_gt(st->sets[i].accepted, 0);
        ck_assert_uint_eq(st->sets[i].requests, st->sets[i].accepted);
    }
    pthread_mutex_lock(&a.mu);
    for (int i = 0; i < FAKE_CONNS; i++) {
        if (a.per_conn[i] > 0 && n < 2)
            got[n] = a.per_conn[i];
        n += a.per_conn[i] > 0 ? 1 : 0;
    }
    pthread_mutex_unlock(&a.mu);
    ck_assert_uint_eq(n, 2);
    ck_assert((got[0] == st->sets[0].requests && got[1] == st->sets[1].requests) ||
              (got[0] == st->sets[1].requests && got[1] == st->sets[0].requests));
    gw_stop(g);
    fake_stop(&a);
}
END_TEST

/* The sets and threads a gateway in front of port would serve with. */
static int sets_of(uint16_t port, unsigned groups, unsigned threads, struct oltp_gateway_stats *st)
{
    char addr[32];
    const char *list[1] = {addr};
    struct oltp_gateway_config cfg = {
        .listen = "127.0.0.1:0",
        .backends = list,
        .nbackends = 1,
        .groups = groups,
        .threads = threads,
    };
    struct oltp_gateway *g;
    int err;

    snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
    err = oltp_gateway_create(&g, &cfg);
    if (err < 0)
        return err;
    oltp_gateway_stats(g, st);
    oltp_gateway_destroy(g);
    return 0;
}

/*
 * groups 0 (auto): one set per usable CPU and two threads each; threads
 * alone give threads / 2 sets; in a child pinned to one CPU, one set of two
 * threads; fewer threads than sets is refused.
 */
START_TEST(auto_sets_follow_the_affinity_mask)
{
    static struct oltp_gateway_stats st;
    unsigned cpus;
    int status = 0;
    cpu_set_t mask;
    pid_t pid;

    ck_assert_int_eq(sched_getaffinity(0, sizeof(mask), &mask), 0);
    cpus = (unsigned)cr_cpu_usable();
    ck_assert_uint_le(cpus, (unsigned)CPU_COUNT(&mask));

    ck_assert_int_eq(sets_of(1, 0, 0, &st), 0);
    ck_assert_uint_eq(st.nsets, cpus < OLTP_GATEWAY_MAX_SETS ? cpus : OLTP_GATEWAY_MAX_SETS);
    ck_assert_uint_eq(st.threads, 2 * st.nsets);
    /* threads 7: 3 sets where 3 CPUs may be used, else one per CPU. */
    ck_assert_int_eq(sets_of(1, 0, 7, &st), 0);
    ck_assert_uint_eq(st.nsets, cpus < 3 ? cpus : 3);
    ck_assert_uint_eq(st.threads, 7);
    if (cpus >= 3) {
        ck_assert_uint_eq(st.sets[0].threads, 3);
        ck_assert_uint_eq(st.sets[2].threads, 2);
    } else {
        cr_test_skip("gateway: 7 threads over 3 sets", "fewer than 3 CPUs here");
    }
    /* An explicit count is the user's, whatever the CPUs. */
    ck_assert_int_eq(sets_of(1, 3, 7, &st), 0);
    ck_assert_uint_eq(st.nsets, 3);
    ck_assert_uint_eq(st.sets[0].threads, 3);
    ck_assert_uint_eq(st.sets[2].threads, 2);
    ck_assert_int_eq(sets_of(1, 0, 1, &st), 0);
    ck_assert_uint_eq(st.nsets, 1);
    ck_assert_int_eq(sets_of(1, 3, 2, &st), -EINVAL);
    ck_assert_int_eq(sets_of(1, OLTP_GATEWAY_MAX_SETS + 1, 0, &st), -EINVAL);

    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        cpu_set_t set;
        int first = -1;

        if (sched_getaffinity(0, sizeof(set), &set) < 0)
            _exit(10);
        for (int c = 0; c < CPU_SETSIZE && first < 0; c++) {
            if (CPU_ISSET(c, &set))
                first = c;
        }
        CPU_ZERO(&set);
        CPU_SET(first, &set);
        if (sched_setaffinity(0, sizeof(set), &set) < 0)
            _exit(11);
        if (sets_of(1, 0, 0, &st) < 0)
            _exit(12);
        _exit(st.nsets == 1 && st.threads == 2 && st.sets[0].threads == 2 ? 0 : 13);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

Suite *gateway_suite(void);

Suite *gateway_suite(void)
{
    Suite *s = suite_create("gateway");
    TCase *tc = tcase_create("forwarding");
    TCase *tf = tcase_create("failover");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, forwards_with_a_pool_id_and_restores_the_clients);
    tcase_add_test(tc, pipelined_requests_are_answered_in_order);
    tcase_add_test(tc, replies_out_of_order_reach_their_clients);
    tcase_add_test(tc, invalid_requests_are_answered_by_the_gateway);
    tcase_add_test(tc, balances_by_fewest_outstanding_requests);
    tcase_add_test(tc, two_threads_serve_eight_waiting_clients);
    tcase_add_test(tc, sessions_are_pinned_to_their_back_end);
    tcase_add_test(tc, two_sets_each_accept_and_answer);
    tcase_add_test(tc, auto_sets_follow_the_affinity_mask);
    suite_add_tcase(s, tc);

    tcase_set_timeout(tf, 60);
    tcase_add_test(tf, failover_retries_idempotent_requests_and_doubts_the_others);
    tcase_add_test(tf, a_write_timed_out_is_in_doubt_even_with_a_key);
    tcase_add_test(tf, a_ledger_that_refuses_is_passed_over);
    tcase_add_test(tf, a_refusing_ledger_is_tried_last_until_it_answers_ok);
    tcase_add_test(tf, no_live_back_end_answers_unavailable_at_once);
    tcase_add_test(tf, reconnects_when_the_back_end_comes_back);
    tcase_add_test(tf, health_check_fails_a_silent_back_end);
    suite_add_tcase(s, tf);
    return s;
}
