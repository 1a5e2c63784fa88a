/*
 * gateway.c - cabrank-gateway's core (gateway.h): the front-end
 * communication server of the Leader/Followers paper's OLTP example, built as
 * the paper's hybrid client/server. One reactor holds the listener, every
 * client connection (one-shot) and every back-end connection (one-shot,
 * registered by its hybrid cr_bound_pool); one cr_lf_pool serves it. A
 * client handler forwards a request and waits in cr_bound_pool_join, which
 * rejoins the L/F pool: while it waits, the thread leads or follows and
 * serves other clients and other replies, so no number of waiting requests
 * can starve the pool (the hybrid deadlock test).
 *
 * Threads: everything after start runs on the pool threads (client events,
 * back-end replies, the health and reconnect timers); create, start, stop and
 * destroy on the owner thread. A client is served by one thread at a time
 * (its handle is one-shot and reactivated at the end of the handler), so its
 * buffers and its bound-pool context need no lock.
 *
 * Nested waits: a thread waiting for reply A that takes a new client's
 * request B waits for B on top of A, so A's reply, once it is in, is passed
 * on only when B's wait ends (B's reply, a failure, or --timeout): each
 * thread has one stack. The failover unit test orders its steps for it.
 *
 * Lock order: backend.lock, then a bound pool's own locks (attach runs under
 * backend.lock; the pool's on_fail callback runs with no pool lock held and
 * takes backend.lock). gateway.lock (clients, sessions) is a leaf. No lock is
 * held across a join.
 */
#include "gateway.h"

#include <cabrank/bound_pool.h>
#include <cabrank/clock.h>
#include <cabrank/lf_pool.h>
#include <cabrank/listener.h>
#include <cabrank/log.h>
#include <cabrank/reactor.h>

#include "proto.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DEFAULT_LISTEN     "127.0.0.1:7000"
#define DEFAULT_THREADS    4
#define DEFAULT_CONNS      2
#define MAX_CONNS          64
#define CONNECT_TIMEOUT_MS 1000
/* Client input: many pipelined requests (a request frame is at most 64 bytes). */
#define CLIENT_IN_CAP 8192
/* Reads of one client per event, so a client that never pauses cannot hold a
 * thread for ever (the handle fires again at once, level-triggered). */
#define CLIENT_READS    16
#define SESSION_BUCKETS 1024
/* The largest request frame: a TRANSFER, 24 + 40 bytes. */
#define REQ_FRAME_CAP 128
/* Where a reply's status sits: the first two bytes of its body. */
#define OFF_ID     8
#define OFF_STATUS OLTP_HEADER_SIZE

struct backend;

/* One multiplexed connection to a back end. */
struct link {
    struct backend *be;
    unsigned idx;
    struct cr_bound_pool *bp;
    /* Written under be->lock; read relaxed as a routing hint (the pool
     * itself refuses a dead connection with an error). */
    bool up;
    /* Protected by be->lock. */
    bool ever_up;
    /* The reconnect timer's: one attempt pending at a time. */
    unsigned backoff_ms;
    /* Atomic, relaxed: requests in flight, a load-balancing hint. */
    unsigned outstanding;
    /* The health round's (one round at a time). */
    struct cr_bound_ctx hctx;
    bool hpending;
    uint8_t hreply[OLTP_MAX_FRAME];
};

struct backend {
    struct oltp_gateway *g;
    unsigned idx;
    /* Immutable after create. */
    char addr[64];
    struct sockaddr_storage ss;
    socklen_t sslen;
    struct link *links;
    pthread_mutex_t lock;
    /* Protected by lock; read relaxed by the router. */
    unsigned up;    /* links up */
    uint64_t epoch; /* bumped each time up falls to 0: sessions of before are gone */
    /* Atomic, relaxed: counters and the load-balancing figure. */
    unsigned outstanding;
    uint64_t forwarded;
    uint64_t failures;
    uint64_t reconnects;
};

struct client {
    struct oltp_gateway *g;
    int fd;
    /* Protected by g->lock. */
    struct client *prev;
    struct client *next;
    /* Owned by the thread serving the client's event. */
    struct cr_bound_ctx ctx;
    size_t in_len;
    uint8_t in[CLIENT_IN_CAP];
    uint8_t out[OLTP_MAX_FRAME];
};

/* A session pinned to the back end that began it. */
struct pin {
    struct pin *next;
    uint64_t session;
    unsigned backend;
    uint64_t epoch;
    uint64_t used_ns;
};

struct oltp_gateway {
    /* Immutable after create. */
    struct oltp_gateway_config cfg;
    int listen_fd;
    int port;
    char address[64];
    struct cr_reactor *r;
    struct cr_lf_pool *lf;
    struct cr_acceptor *acc;
    struct backend *bes;
    unsigned nbes;
    unsigned nlinks; /* per back end */
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t idle;
    /* Protected by lock. */
    struct client *clients;
    struct pin *pins[SESSION_BUCKETS];
    unsigned npins;
    /* Atomic: stopping is set once by stop (release) and read by handlers
     * (acquire); busy counts client handlers running, its drop to 0 is
     * signalled on idle under lock. */
    int stopping;
    int busy;
    /* Atomic, relaxed: counters. */
    uint64_t accepted;
    uint64_t requests;
    uint64_t local;
    uint64_t forwarded;
    uint64_t retried;
    uint64_t in_doubt;
    uint64_t unavailable;
};

static void count(uint64_t *c)
{
    __atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
}

static bool is_stopping(struct oltp_gateway *g)
{
    /* Pairs with the release store in oltp_gateway_stop. */
    return __atomic_load_n(&g->stopping, __ATOMIC_ACQUIRE) != 0;
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* ------------------------------------------------------------------ sessions */

static unsigned pin_bucket(uint64_t session)
{
    /* Ledger session ids are random; the multiply spreads test ids too. */
    return (unsigned)((session * 0x9E3779B97F4A7C15ULL) >> 54) % SESSION_BUCKETS;
}

/* Remembers that session lives on back end be (which had epoch at the
 * request's send). A full table drops the pin: the session's requests then
 * get NO_SESSION, as if it had expired. */
static void pin_session(struct oltp_gateway *g, uint64_t session, unsigned be, uint64_t epoch)
{
    struct pin *p = malloc(sizeof(*p));
    unsigned b = pin_bucket(session);

    if (p == NULL) {
        CR_LOG(CR_LOG_WARN, "session %016llx: out of memory, not pinned",
               (unsigned long long)session);
        return;
    }
    p->session = session;
    p->backend = be;
    p->epoch = epoch;
    p->used_ns = cr_clock_now_ns();
    pthread_mutex_lock(&g->lock);
    p->next = g->pins[b];
    g->pins[b] = p;
    g->npins++;
    pthread_mutex_unlock(&g->lock);
}

/* The back end of session and its epoch; false if it is not pinned. */
static bool find_session(struct oltp_gateway *g, uint64_t session, unsigned *be, uint64_t *epoch)
{
    bool found = false;

    pthread_mutex_lock(&g->lock);
    for (struct pin *p = g->pins[pin_bucket(session)]; p != NULL; p = p->next) {
        if (p->session == session) {
            *be = p->backend;
            *epoch = p->epoch;
            p->used_ns = cr_clock_now_ns();
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&g->lock);
    return found;
}

static void unpin_session(struct oltp_gateway *g, uint64_t session)
{
    pthread_mutex_lock(&g->lock);
    for (struct pin **pp = &g->pins[pin_bucket(session)]; *pp != NULL; pp = &(*pp)->next) {
        struct pin *p = *pp;

        if (p->session == session) {
            *pp = p->next;
            g->npins--;
            free(p);
            break;
        }
    }
    pthread_mutex_unlock(&g->lock);
}

/* Forgets pins idle longer than session_idle_ms (the ledger expired them
 * long ago) and pins of back ends that went down since. */
static void sweep_sessions(struct oltp_gateway *g)
{
    uint64_t now = cr_clock_now_ns();
    uint64_t idle_ns = g->cfg.session_idle_ms * 1000000ULL;

    pthread_mutex_lock(&g->lock);
    for (unsigned b = 0; b < SESSION_BUCKETS; b++) {
        struct pin **pp = &g->pins[b];

        while (*pp != NULL) {
            struct pin *p = *pp;
            uint64_t epoch = __atomic_load_n(&g->bes[p->backend].epoch, __ATOMIC_RELAXED);

            if (now - p->used_ns > idle_ns || epoch != p->epoch) {
                *pp = p->next;
                g->npins--;
                free(p);
            } else {
                pp = &p->next;
            }
        }
    }
    pthread_mutex_unlock(&g->lock);
}

/* ------------------------------------------------------------------ back ends */

static void on_reconnect(struct cr_reactor *r, uint64_t timer_id, void *arg);

/* Connects to be within CONNECT_TIMEOUT_MS. The fd (returns owned) or -errno. */
static int connect_backend(const struct backend *be)
{
    struct pollfd pfd;
    int one = 1;
    int soerr = 0;
    socklen_t len = sizeof(soerr);
    int fd;
    int err;

    fd = socket(be->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (const struct sockaddr *)&be->ss, be->sslen) < 0) {
        if (errno != EINPROGRESS) {
            err = -errno;
            goto out_close;
        }
        pfd.fd = fd;
        pfd.events = POLLOUT;
        pfd.revents = 0;
        err = poll(&pfd, 1, CONNECT_TIMEOUT_MS);
        if (err == 0) {
            err = -ETIMEDOUT;
            goto out_close;
        }
        if (err < 0) {
            err = -errno;
            goto out_close;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0) {
            err = -errno;
            goto out_close;
        }
        if (soerr != 0) {
            err = -soerr;
            goto out_close;
        }
    }
    /* Small frames, many in flight: no Nagle delay on either side. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
out_close:
    close(fd);
    return err;
}

static void schedule_reconnect(struct link *l, unsigned delay_ms)
{
    struct oltp_gateway *g = l->be->g;
    int err;

    if (is_stopping(g))
        return;
    err = cr_reactor_timer_add(g->r, delay_ms, on_reconnect, l, NULL);
    if (err < 0)
        CR_LOG(CR_LOG_ERROR, "backend %s: no reconnect timer: %s", l->be->addr, strerror(-err));
}

/* Connects link l and attaches it; 0 or -errno (l stays down). */
static int bring_up(struct link *l)
{
    struct backend *be = l->be;
    int fd = connect_backend(be);
    int err;

    if (fd < 0)
        return fd;
    pthread_mutex_lock(&be->lock);
    err = cr_bound_pool_attach(l->bp, fd);
    if (err == 0) {
        if (l->ever_up)
            __atomic_add_fetch(&be->reconnects, 1, __ATOMIC_RELAXED);
        l->ever_up = true;
        __atomic_store_n(&l->up, true, __ATOMIC_RELAXED);
        __atomic_store_n(&be->up, be->up + 1, __ATOMIC_RELAXED);
        l->backoff_ms = be->g->cfg.backoff_min_ms;
    }
    pthread_mutex_unlock(&be->lock);
    if (err < 0) {
        close(fd);
        return err;
    }
    CR_LOG(CR_LOG_INFO, "backend %s: connection %u up", be->addr, l->idx);
    return 0;
}

/* A reconnect attempt, on a pool thread; on failure the next one comes after
 * twice the delay, up to backoff_max_ms. */
static void on_reconnect(struct cr_reactor *r, uint64_t timer_id, void *arg)
{
    struct link *l = arg;
    const struct oltp_gateway_config *cfg = &l->be->g->cfg;
    unsigned next;
    int err;

    (void)r;
    (void)timer_id;
    if (is_stopping(l->be->g))
        return;
    err = bring_up(l);
    if (err == 0)
        return;
    CR_LOG(CR_LOG_DEBUG, "backend %s: connect: %s", l->be->addr, strerror(-err));
    next = l->backoff_ms * 2;
    l->backoff_ms = next > cfg->backoff_max_ms ? cfg->backoff_max_ms : next;
    schedule_reconnect(l, l->backoff_ms);
}

/*
 * The bound pool's on_fail: the connection ended (EOF, error, a health
 * timeout), its waiters already have the error. Marks the link down (the
 * back end down with its last link, which ends its sessions) and starts the
 * reconnect back-off.
 */
static void on_link_fail(struct cr_bound_pool *p, int err, void *arg)
{
    struct link *l = arg;
    struct backend *be = l->be;
    bool down = false;

    (void)p;
    pthread_mutex_lock(&be->lock);
    if (l->up) {
        __atomic_store_n(&l->up, false, __ATOMIC_RELAXED);
        __atomic_store_n(&be->up, be->up - 1, __ATOMIC_RELAXED);
        if (be->up == 0) {
            __atomic_store_n(&be->epoch, be->epoch + 1, __ATOMIC_RELAXED);
            down = true;
        }
    }
    l->backoff_ms = be->g->cfg.backoff_min_ms;
    pthread_mutex_unlock(&be->lock);
    __atomic_add_fetch(&be->failures, 1, __ATOMIC_RELAXED);
    CR_LOG(CR_LOG_WARN, "backend %s: connection %u failed: %s%s", be->addr, l->idx, strerror(-err),
           down ? "; backend down" : "");
    schedule_reconnect(l, l->backoff_ms);
}

/* Splits reply frames off a back-end connection; the payload handed to the
 * waiter is the whole frame, forwarded as it is but for the id. */
static ssize_t decode_reply(void *arg, const char *buf, size_t len, uint64_t *id,
                            const char **payload, size_t *payload_len)
{
    ssize_t n = oltp_frame_peek(buf, len, true, id, NULL, NULL);

    (void)arg;
    if (n > 0) {
        *payload = buf;
        *payload_len = (size_t)n;
    }
    return n;
}

static bool is_up(const struct backend *be)
{
    return __atomic_load_n(&be->up, __ATOMIC_RELAXED) > 0;
}

/* The live back end outside excluded with the fewest requests in flight
 * (the lowest index on a tie), or NULL. */
static struct backend *pick_backend(struct oltp_gateway *g, uint64_t excluded)
{
    struct backend *best = NULL;
    unsigned best_out = 0;

    for (unsigned i = 0; i < g->nbes; i++) {
        struct backend *be = &g->bes[i];
        unsigned out;

        if ((excluded >> i & 1) != 0 || !is_up(be))
            continue;
        out = __atomic_load_n(&be->outstanding, __ATOMIC_RELAXED);
        if (best == NULL || out < best_out) {
            best = be;
            best_out = out;
        }
    }
    return best;
}

/* be's live link outside excluded with the fewest requests in flight. */
static struct link *pick_link(struct backend *be, uint64_t excluded)
{
    struct link *best = NULL;
    unsigned best_out = 0;

    for (unsigned i = 0; i < be->g->nlinks; i++) {
        struct link *l = &be->links[i];
        unsigned out;

        if ((excluded >> i & 1) != 0 || !__atomic_load_n(&l->up, __ATOMIC_RELAXED))
            continue;
        out = __atomic_load_n(&l->outstanding, __ATOMIC_RELAXED);
        if (best == NULL || out < best_out) {
            best = l;
            best_out = out;
        }
    }
    return best;
}

static void account(struct link *l, int delta)
{
    if (delta > 0) {
        __atomic_add_fetch(&l->outstanding, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&l->be->outstanding, 1, __ATOMIC_RELAXED);
    } else {
        __atomic_sub_fetch(&l->outstanding, 1, __ATOMIC_RELAXED);
        __atomic_sub_fetch(&l->be->outstanding, 1, __ATOMIC_RELAXED);
    }
}

/* ------------------------------------------------------------------ health */

static void on_health(struct cr_reactor *r, uint64_t timer_id, void *arg);

static void schedule_health(struct oltp_gateway *g)
{
    int err;

    if (is_stopping(g))
        return;
    err = cr_reactor_timer_add(g->r, g->cfg.health_interval_ms, on_health, g, NULL);
    if (err < 0)
        CR_LOG(CR_LOG_ERROR, "no health timer: %s", strerror(-err));
}

/*
 * One health round, on a pool thread: a PING on every live link at once,
 * then the answers; a link silent for health_timeout_ms is failed (its
 * requests in flight fail over). The joins serve the pool meanwhile.
 */
static void on_health(struct cr_reactor *r, uint64_t timer_id, void *arg)
{
    struct oltp_gateway *g = arg;
    uint64_t deadline = cr_clock_now_ns() + g->cfg.health_timeout_ms * 1000000ULL;
    int tmo = (int)g->cfg.health_timeout_ms;

    (void)r;
    (void)timer_id;
    if (is_stopping(g))
        return;
    for (unsigned b = 0; b < g->nbes; b++) {
        for (unsigned i = 0; i < g->nlinks; i++) {
            struct link *l = &g->bes[b].links[i];
            struct oltp_req ping = {.op = OLTP_OP_PING};
            uint8_t frame[OLTP_HEADER_SIZE];
            size_t n;

            l->hpending = false;
            if (!__atomic_load_n(&l->up, __ATOMIC_RELAXED))
                continue;
            ping.id = cr_bound_pool_next_id(l->bp);
            n = oltp_req_encode(&ping, frame, sizeof(frame));
            if (cr_bound_pool_expect(l->bp, &l->hctx, ping.id, l->hreply, sizeof(l->hreply)) < 0)
                continue;
            if (cr_bound_pool_send(l->bp, frame, n, tmo) < 0) {
                (void)!cr_bound_pool_cancel(l->bp, &l->hctx);
                continue;
            }
            l->hpending = true;
        }
    }
    for (unsigned b = 0; b < g->nbes; b++) {
        for (unsigned i = 0; i < g->nlinks; i++) {
            struct link *l = &g->bes[b].links[i];
            uint64_t now = cr_clock_now_ns();
            int left = now >= deadline ? 0 : (int)((deadline - now) / 1000000ULL);
            ssize_t rc;

            if (!l->hpending)
                continue;
            l->hpending = false;
            rc = cr_bound_pool_join(l->bp, &l->hctx, left);
            if (rc == -ETIMEDOUT) {
                CR_LOG(CR_LOG_WARN, "backend %s: connection %u: no PING reply in %llu ms",
                       g->bes[b].addr, i, (unsigned long long)g->cfg.health_timeout_ms);
                cr_bound_pool_fail(l->bp, -ETIMEDOUT);
            }
        }
    }
    sweep_sessions(g);
    schedule_health(g);
}

/* ------------------------------------------------------------------ clients */

static void close_client(struct client *c)
{
    struct oltp_gateway *g = c->g;

    /* -ENOENT only for a client whose registration failed. */
    (void)!cr_reactor_remove(g->r, c->fd);
    pthread_mutex_lock(&g->lock);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        g->clients = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&g->lock);
    close(c->fd);
    cr_bound_ctx_fini(&c->ctx);
    free(c);
}

/* Writes all of buf to the client's non-blocking socket, waiting for room up
 * to the request timeout (a client that reads nothing is dropped). */
static int write_client(struct client *c, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    size_t off = 0;

    while (off < len) {
        ssize_t n = send(c->fd, p + off, len - off, MSG_NOSIGNAL);
        struct pollfd pfd;

        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN)
            return -errno;
        pfd.fd = c->fd;
        pfd.events = POLLOUT;
        pfd.revents = 0;
        n = poll(&pfd, 1, (int)c->g->cfg.timeout_ms);
        if (n == 0)
            return -ETIMEDOUT;
        if (n < 0 && errno != EINTR)
            return -errno;
    }
    return 0;
}

/* Answers req with status alone. */
static int answer_local(struct client *c, const struct oltp_req *req, uint16_t status)
{
    struct oltp_reply rep;
    size_t n;

    memset(&rep, 0, offsetof(struct oltp_reply, hist));
    rep.op = req->op;
    rep.id = req->id;
    rep.session = req->session;
    rep.status = status;
    n = oltp_reply_encode(&rep, c->out, sizeof(c->out));
    if (status == OLTP_ST_IN_DOUBT)
        count(&c->g->in_doubt);
    else if (status == OLTP_ST_UNAVAILABLE)
        count(&c->g->unavailable);
    else
        count(&c->g->local);
    if (n == 0)
        return -EINVAL; /* cannot happen: every status of every kind encodes */
    return write_client(c, c->out, n);
}

/*
 * The back end's reply (len bytes in c->out) to req, sent on a link of be
 * whose epoch was epoch: keeps the session pins in step, gives the reply the
 * client's id and sends it on.
 */
static int answer_forwarded(struct client *c, const struct oltp_req *req, struct backend *be,
                            uint64_t epoch, size_t len)
{
    struct oltp_gateway *g = c->g;
    uint16_t status;

    if (len < OLTP_HEADER_SIZE + 2 || c->out[2] != (OLTP_REPLY | req->op)) {
        CR_LOG(CR_LOG_WARN, "backend %s: reply of kind %u to %s", be->addr, c->out[2],
               oltp_op_name(req->op));
        return answer_local(c, req, OLTP_ST_INTERNAL);
    }
    status = (uint16_t)(c->out[OFF_STATUS] << 8 | c->out[OFF_STATUS + 1]);
    if (req->op == OLTP_OP_BEGIN && status == OLTP_ST_OK)
        pin_session(g, get_u64(c->out + 16), be->idx, epoch);
    else if (req->session != 0 && (status == OLTP_ST_NO_SESSION ||
                                   ((req->op == OLTP_OP_COMMIT || req->op == OLTP_OP_ABORT) &&
                                    status != OLTP_ST_SESSION_BUSY)))
        unpin_session(g, req->session);
    put_u64(c->out + OFF_ID, req->id);
    count(&g->forwarded);
    return write_client(c, c->out, len);
}

/*
 * Forwards a valid request and answers the client. A request of a session
 * goes to its back end only; another to the least loaded live one, and again
 * to another when its back end fails under it and it is idempotent. Nothing
 * was delivered when expect or send fails, so those try another link.
 */
static int forward(struct client *c, const struct oltp_req *req)
{
    struct oltp_gateway *g = c->g;
    bool idempotent = oltp_req_is_idempotent(req);
    int tmo = (int)g->cfg.timeout_ms;
    uint64_t be_excluded = 0;
    uint64_t link_excluded[OLTP_GATEWAY_MAX_BACKENDS] = {0};
    struct backend *pinned = NULL;
    uint64_t pin_epoch = 0;

    if (req->session != 0) {
        unsigned b;

        if (!find_session(g, req->session, &b, &pin_epoch))
            return answer_local(c, req, OLTP_ST_NO_SESSION);
        pinned = &g->bes[b];
    }
    for (unsigned attempt = 0; attempt < g->nbes * g->nlinks + g->nbes; attempt++) {
        struct backend *be = pinned != NULL ? pinned : pick_backend(g, be_excluded);
        struct oltp_req fwd = *req;
        uint8_t frame[REQ_FRAME_CAP];
        struct link *l;
        uint64_t epoch;
        size_t n;
        ssize_t got;

        if (be == NULL)
            break;
        epoch = __atomic_load_n(&be->epoch, __ATOMIC_RELAXED);
        if (pinned != NULL && (epoch != pin_epoch || !is_up(be))) {
            unpin_session(g, req->session);
            return answer_local(c, req, OLTP_ST_NO_SESSION);
        }
        l = pick_link(be, link_excluded[be->idx]);
        if (l == NULL) {
            if (pinned != NULL)
                break;
            be_excluded |= 1ULL << be->idx;
            continue;
        }
        fwd.id = cr_bound_pool_next_id(l->bp);
        n = oltp_req_encode(&fwd, frame, sizeof(frame));
        account(l, +1);
        if (cr_bound_pool_expect(l->bp, &c->ctx, fwd.id, c->out, sizeof(c->out)) < 0) {
            account(l, -1);
            link_excluded[be->idx] |= 1ULL << l->idx;
            continue;
        }
        if (cr_bound_pool_send(l->bp, frame, n, tmo) < 0) {
            /* Registered just now by this thread: cannot be -EINVAL. */
            (void)!cr_bound_pool_cancel(l->bp, &c->ctx);
            account(l, -1);
            link_excluded[be->idx] |= 1ULL << l->idx;
            continue;
        }
        __atomic_add_fetch(&be->forwarded, 1, __ATOMIC_RELAXED);
        got = cr_bound_pool_join(l->bp, &c->ctx, tmo);
        account(l, -1);
        if (got > 0)
            return answer_forwarded(c, req, be, epoch, (size_t)got);
        if (got == -ETIMEDOUT || got == -ECANCELED || got == -EMSGSIZE || !idempotent) {
            /* It may have been applied: only a request that is safe to send
             * twice may be told to try again. */
            CR_LOG(CR_LOG_DEBUG, "backend %s: %s: %s", be->addr, oltp_op_name(req->op),
                   strerror((int)-got));
            return answer_local(c, req, idempotent ? OLTP_ST_UNAVAILABLE : OLTP_ST_IN_DOUBT);
        }
        /* The connection failed under an idempotent request: elsewhere. */
        if (pinned != NULL)
            break;
        count(&g->retried);
        be_excluded |= 1ULL << be->idx;
    }
    if (pinned != NULL)
        return answer_local(c, req, OLTP_ST_NO_SESSION);
    return answer_local(c, req, OLTP_ST_UNAVAILABLE);
}

/* One request frame of c->in: answered locally, or forwarded. 0, or -errno
 * when the client must be closed. */
static int serve_frame(struct client *c, const uint8_t *buf, size_t len, size_t *used)
{
    struct oltp_req req;
    uint16_t status;
    ssize_t n = oltp_req_decode(buf, len, &req, &status);

    if (n == -EAGAIN) {
        *used = 0;
        return 0;
    }
    if (n < 0)
        return (int)n;
    *used = (size_t)n;
    count(&c->g->requests);
    if (status == OLTP_ST_OK)
        status = oltp_req_check(&req);
    if (status != OLTP_ST_OK)
        return answer_local(c, &req, status);
    /* The gateway's own liveness: a client's PING is not a back end's. */
    if (req.op == OLTP_OP_PING)
        return answer_local(c, &req, OLTP_ST_OK);
    return forward(c, &req);
}

/*
 * A client's readiness, on a pool thread. Its requests are served one after
 * the other (each may wait for a back end, serving the pool meanwhile); the
 * handle is reactivated at the end, so no other thread serves this client
 * meanwhile.
 */
static void on_client(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct client *c = arg;
    struct oltp_gateway *g = c->g;
    bool done = false;
    int err = 0;

    (void)events;
    __atomic_add_fetch(&g->busy, 1, __ATOMIC_RELAXED);
    if (is_stopping(g))
        done = true;
    for (int i = 0; i < CLIENT_READS && !done; i++) {
        size_t room = sizeof(c->in) - c->in_len;
        ssize_t n = read(fd, c->in + c->in_len, room);
        size_t off = 0;

        if (n == 0) {
            done = true;
            break;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                done = true;
            break;
        }
        c->in_len += (size_t)n;
        while (off < c->in_len) {
            size_t used = 0;

            err = serve_frame(c, c->in + off, c->in_len - off, &used);
            if (err < 0 || used == 0)
                break;
            off += used;
        }
        if (err < 0) {
            CR_LOG(CR_LOG_DEBUG, "client fd %d: %s", fd, strerror(-err));
            done = true;
            break;
        }
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
        if ((size_t)n < room)
            break; /* drained for now */
    }
    if (done)
        close_client(c);
    else if (cr_reactor_reactivate(r, fd) < 0)
        close_client(c);
    pthread_mutex_lock(&g->lock);
    if (__atomic_sub_fetch(&g->busy, 1, __ATOMIC_RELAXED) == 0)
        pthread_cond_broadcast(&g->idle);
    pthread_mutex_unlock(&g->lock);
}

static void on_accept(struct cr_acceptor *a, int fd, void *arg)
{
    struct oltp_gateway *g = arg;
    struct client *c = malloc(sizeof(*c));
    int err;

    (void)a;
    if (c == NULL) {
        close(fd);
        return;
    }
    c->g = g;
    c->fd = fd;
    c->in_len = 0;
    c->prev = NULL;
    err = cr_bound_ctx_init(&c->ctx);
    if (err < 0) {
        free(c);
        close(fd);
        return;
    }
    pthread_mutex_lock(&g->lock);
    c->next = g->clients;
    if (c->next != NULL)
        c->next->prev = c;
    g->clients = c;
    pthread_mutex_unlock(&g->lock);
    count(&g->accepted);
    err = cr_reactor_add(g->r, fd, CR_EV_READ, CR_REACTOR_ONESHOT, on_client, c);
    if (err < 0) {
        CR_LOG(CR_LOG_ERROR, "client fd %d: %s", fd, strerror(-err));
        close_client(c);
    }
}

/* ------------------------------------------------------------------ public */

static int init_backend(struct oltp_gateway *g, struct backend *be, unsigned idx, const char *addr)
{
    int err;

    be->g = g;
    be->idx = idx;
    if (strlen(addr) >= sizeof(be->addr))
        return -EINVAL;
    strcpy(be->addr, addr);
    err = cr_listener_parse(addr, &be->ss, &be->sslen);
    if (err < 0)
        return err;
    err = -pthread_mutex_init(&be->lock, NULL);
    if (err < 0)
        return err;
    be->links = calloc(g->nlinks, sizeof(*be->links));
    if (be->links == NULL)
        return -ENOMEM;
    for (unsigned i = 0; i < g->nlinks; i++) {
        struct link *l = &be->links[i];
        struct cr_bound_pool_config bcfg = {
            .decode = decode_reply,
            .read_buffer = 4 * OLTP_MAX_FRAME,
            .lf = g->lf,
            .reactor = g->r,
            .on_fail = on_link_fail,
            .fail_arg = l,
        };

        l->be = be;
        l->idx = i;
        l->backoff_ms = g->cfg.backoff_min_ms;
        err = cr_bound_ctx_init(&l->hctx);
        if (err < 0)
            return err;
        err = cr_bound_pool_create(&l->bp, &bcfg);
        if (err < 0)
            return err;
    }
    return 0;
}

static void fini_backend(struct backend *be)
{
    if (be->g == NULL)
        return;
    if (be->links != NULL) {
        for (unsigned i = 0; i < be->g->nlinks; i++) {
            cr_bound_pool_destroy(be->links[i].bp);
            cr_bound_ctx_fini(&be->links[i].hctx);
        }
        free(be->links);
    }
    pthread_mutex_destroy(&be->lock);
}

int oltp_gateway_create(struct oltp_gateway **out, const struct oltp_gateway_config *cfg)
{
    struct oltp_gateway *g;
    struct cr_listener_config lcfg = {0};
    struct cr_lf_pool_config pcfg = {.nreactors = 1};
    struct cr_acceptor_config acfg = {0};
    int err;

    if (cfg->nbackends == 0 || cfg->nbackends > OLTP_GATEWAY_MAX_BACKENDS ||
        cfg->backends == NULL || cfg->connections > MAX_CONNS)
        return -EINVAL;
    g = calloc(1, sizeof(*g));
    if (g == NULL)
        return -ENOMEM;
    g->listen_fd = -1;
    g->cfg = *cfg;
    if (g->cfg.listen == NULL)
        g->cfg.listen = DEFAULT_LISTEN;
    if (g->cfg.threads == 0)
        g->cfg.threads = DEFAULT_THREADS;
    if (g->cfg.connections == 0)
        g->cfg.connections = DEFAULT_CONNS;
    if (g->cfg.health_interval_ms == 0)
        g->cfg.health_interval_ms = 1000;
    if (g->cfg.health_timeout_ms == 0)
        g->cfg.health_timeout_ms = 2 * g->cfg.health_interval_ms;
    if (g->cfg.timeout_ms == 0)
        g->cfg.timeout_ms = 10000;
    if (g->cfg.backoff_min_ms == 0)
        g->cfg.backoff_min_ms = 100;
    if (g->cfg.backoff_max_ms == 0)
        g->cfg.backoff_max_ms = 5000;
    if (g->cfg.backoff_max_ms < g->cfg.backoff_min_ms)
        g->cfg.backoff_max_ms = g->cfg.backoff_min_ms;
    if (g->cfg.session_idle_ms == 0)
        g->cfg.session_idle_ms = 600000;
    g->cfg.backends = NULL; /* borrowed only during create */
    g->nbes = cfg->nbackends;
    g->nlinks = g->cfg.connections;
    err = -pthread_mutex_init(&g->lock, NULL);
    if (err < 0)
        goto out_free;
    err = -pthread_cond_init(&g->idle, NULL);
    if (err < 0)
        goto out_mutex;

    lcfg.address = g->cfg.listen;
    err = cr_listener_open(&g->listen_fd, &lcfg);
    if (err < 0)
        goto out_cond;
    g->port = cr_listener_port(g->listen_fd);
    if (g->port < 0) {
        err = g->port;
        goto out_listen;
    }
    err = cr_listener_address(g->listen_fd, g->address, sizeof(g->address));
    if (err < 0)
        goto out_listen;
    err = cr_reactor_create(&g->r, NULL);
    if (err < 0)
        goto out_listen;
    pcfg.threads = g->cfg.threads;
    /* NULL: the pool's default, lifo. fifo would hand new clients to the
     * longest-idle thread rather than to one waiting for a reply (fewer
     * nested waits), but measured no better: see the README. */
    pcfg.promotion = g->cfg.promotion;
    pcfg.reactors = &g->r;
    err = cr_lf_pool_create(&g->lf, &pcfg);
    if (err < 0)
        goto out_reactor;
    g->bes = calloc(g->nbes, sizeof(*g->bes));
    if (g->bes == NULL) {
        err = -ENOMEM;
        goto out_pool;
    }
    for (unsigned i = 0; i < g->nbes; i++) {
        err = init_backend(g, &g->bes[i], i, cfg->backends[i]);
        if (err < 0)
            goto out_backends;
    }
    acfg.listen_fd = g->listen_fd;
    err = cr_acceptor_create(&g->acc, g->r, &acfg, on_accept, g);
    if (err < 0)
        goto out_backends;
    /* Nothing is served before start. */
    cr_acceptor_pause(g->acc);
    *out = g;
    return 0;

out_backends:
    for (unsigned i = 0; i < g->nbes; i++)
        fini_backend(&g->bes[i]);
    free(g->bes);
out_pool:
    cr_lf_pool_destroy(g->lf);
out_reactor:
    cr_reactor_destroy(g->r);
out_listen:
    close(g->listen_fd);
out_cond:
    pthread_cond_destroy(&g->idle);
out_mutex:
    pthread_mutex_destroy(&g->lock);
out_free:
    free(g);
    return err;
}

int oltp_gateway_start(struct oltp_gateway *g)
{
    int err;

    for (unsigned b = 0; b < g->nbes; b++) {
        for (unsigned i = 0; i < g->nlinks; i++) {
            struct link *l = &g->bes[b].links[i];

            err = bring_up(l);
            if (err < 0) {
                CR_LOG(CR_LOG_WARN, "backend %s: connect: %s (retrying)", g->bes[b].addr,
                       strerror(-err));
                schedule_reconnect(l, l->backoff_ms);
            }
        }
    }
    schedule_health(g);
    err = cr_lf_pool_start(g->lf);
    if (err < 0)
        return err;
    g->started = true;
    cr_acceptor_resume(g->acc);
    return 0;
}

int oltp_gateway_port(const struct oltp_gateway *g)
{
    return g->port;
}

const char *oltp_gateway_address(const struct oltp_gateway *g)
{
    return g->address;
}

int oltp_gateway_stop(struct oltp_gateway *g, int drain_ms)
{
    struct timespec until;
    int err;

    if (!g->started)
        return 0;
    cr_acceptor_pause(g->acc);
    /* Pairs with is_stopping: handlers that start from now on close their
     * client, timers stop re-arming. */
    __atomic_store_n(&g->stopping, 1, __ATOMIC_RELEASE);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += drain_ms / 1000;
    until.tv_nsec += (long)(drain_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&g->lock);
    while (__atomic_load_n(&g->busy, __ATOMIC_RELAXED) > 0) {
        if (pthread_cond_timedwait(&g->idle, &g->lock, &until) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&g->lock);
    cr_lf_pool_stop(g->lf);
    err = cr_lf_pool_join_all(g->lf);
    g->started = false;
    return err;
}

void oltp_gateway_destroy(struct oltp_gateway *g)
{
    if (g == NULL)
        return;
    cr_acceptor_destroy(g->acc);
    while (g->clients != NULL)
        close_client(g->clients);
    for (unsigned i = 0; i < g->nbes; i++)
        fini_backend(&g->bes[i]);
    free(g->bes);
    for (unsigned b = 0; b < SESSION_BUCKETS; b++) {
        while (g->pins[b] != NULL) {
            struct pin *p = g->pins[b];

            g->pins[b] = p->next;
            free(p);
        }
    }
    cr_lf_pool_destroy(g->lf);
    cr_reactor_destroy(g->r);
    close(g->listen_fd);
    pthread_cond_destroy(&g->idle);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

void oltp_gateway_stats(struct oltp_gateway *g, struct oltp_gateway_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->accepted = __atomic_load_n(&g->accepted, __ATOMIC_RELAXED);
    out->requests = __atomic_load_n(&g->requests, __ATOMIC_RELAXED);
    out->local = __atomic_load_n(&g->local, __ATOMIC_RELAXED);
    out->forwarded = __atomic_load_n(&g->forwarded, __ATOMIC_RELAXED);
    out->retried = __atomic_load_n(&g->retried, __ATOMIC_RELAXED);
    out->in_doubt = __atomic_load_n(&g->in_doubt, __ATOMIC_RELAXED);
    out->unavailable = __atomic_load_n(&g->unavailable, __ATOMIC_RELAXED);
    pthread_mutex_lock(&g->lock);
    out->sessions = g->npins;
    pthread_mutex_unlock(&g->lock);
    out->nbackends = g->nbes;
    for (unsigned i = 0; i < g->nbes; i++) {
        struct backend *be = &g->bes[i];
        struct oltp_gateway_backend_stats *s = &out->backends[i];

        pthread_mutex_lock(&be->lock);
        s->connections = be->up;
        s->epoch = be->epoch;
        pthread_mutex_unlock(&be->lock);
        s->live = s->connections > 0;
        s->outstanding = __atomic_load_n(&be->outstanding, __ATOMIC_RELAXED);
        s->forwarded = __atomic_load_n(&be->forwarded, __ATOMIC_RELAXED);
        s->failures = __atomic_load_n(&be->failures, __ATOMIC_RELAXED);
        s->reconnects = __atomic_load_n(&be->reconnects, __ATOMIC_RELAXED);
    }
}
