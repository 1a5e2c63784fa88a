/*
 * gateway.c - cabrank-gateway's core (gateway.h), its client side: the
 * front-end communication server of the Leader/Followers paper's OLTP
 * example, built as the paper's hybrid client/server, in handle sets: each
 * set's reactor holds its copy of the listener (SO_REUSEPORT), its client
 * connections (one-shot) and its back-end connections (one-shot, registered
 * by their hybrid cr_bound_pools: gateway_backend.c); one cr_lf_pool serves
 * the reactors, a group of threads each. A client handler forwards a request
 * on its set's links and waits in
 * cr_bound_pool_join, which rejoins the L/F pool: while it waits, the thread
 * leads or follows and serves other clients and other replies, so no number
 * of waiting requests can starve the pool (the hybrid deadlock test).
 * Sessions stay on the back end that began them (gateway_pins.c).
 *
 * Threads: everything after start runs on the pool threads (client events,
 * back-end replies, the health and reconnect timers); create, start, stop and
 * destroy on the owner thread. A client is served by one thread at a time
 * (its handle is one-shot and reactivated at the end of the handler), so its
 * buffers and its bound-pool context need no lock. Owns the clients, the
 * sets (listeners, reactors, acceptors) and the pool.
 *
 * Nested waits: a thread waiting for reply A that takes a new client's
 * request B waits for B on top of A, so A's reply, once it is in, is passed
 * on only when B's wait ends (B's reply, a failure, or --timeout): each
 * thread has one stack. The failover unit test orders its steps for it.
 *
 * Lock order: as gateway_internal.h says; gateway.lock (clients, pins) is a
 * leaf, and no lock is held across a join.
 */
#include "gateway_internal.h"

#include <cabrank/lf_pool.h>
#include <cabrank/listener.h>
#include <cabrank/log.h>
#include <cabrank/reactor.h>

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_LISTEN "127.0.0.1:7000"
#define DEFAULT_CONNS  2
#define MAX_CONNS      64
/* Client input: many pipelined requests (a request frame is at most 64 bytes). */
#define CLIENT_IN_CAP 8192
/* Reads of one client per event, so a client that never pauses cannot hold a
 * thread for ever (the handle fires again at once, level-triggered). */
#define CLIENT_READS 16
/* The largest request frame: a TRANSFER, 24 + 40 bytes. */
#define REQ_FRAME_CAP 128
/* Where a reply's status sits: the first two bytes of its body. */
#define OFF_ID     8
#define OFF_STATUS OLTP_HEADER_SIZE

struct client {
    struct oltp_gateway *g;
    struct gw_set *set;
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

static void count(uint64_t *c)
{
    __atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
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

/* ------------------------------------------------------------------ clients */

static void close_client(struct client *c)
{
    struct oltp_gateway *g = c->g;

    /* -ENOENT only for a client whose registration failed. */
    (void)!cr_reactor_remove(c->set->r, c->fd);
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
        gateway_pin_add(g, get_u64(c->out + 16), be->idx, epoch);
    else if (req->session != 0 && (status == OLTP_ST_NO_SESSION ||
                                   ((req->op == OLTP_OP_COMMIT || req->op == OLTP_OP_ABORT) &&
                                    status != OLTP_ST_SESSION_BUSY)))
        gateway_pin_remove(g, req->session);
    put_u64(c->out + OFF_ID, req->id);
    count(&g->forwarded);
    return write_client(c, c->out, len);
}

/* Whether req changes nothing: a read or a PING. */
static bool is_read(const struct oltp_req *req)
{
    return req->op == OLTP_OP_BALANCE || req->op == OLTP_OP_HISTORY || req->op == OLTP_OP_PING;
}

/* Whether a back end's reply (len bytes of out) is UNAVAILABLE: a ledger
 * that refuses every request, having applied none. */
static bool is_refused(const uint8_t *out, size_t len)
{
    return gateway_reply_status(out, len) == OLTP_ST_UNAVAILABLE;
}

/* forward_in_set's answer when nothing was delivered: try another set. */
#define TRY_ELSEWHERE 1

/*
 * forward's attempts on the links of set: 0 or -errno once the client is
 * answered, TRY_ELSEWHERE when set has no usable link. pinned: the session's
 * back end (with pin_epoch), or NULL. *failed: back ends that failed under
 * this request, excluded in every set.
 */
static int forward_in_set(struct client *c, const struct oltp_req *req, struct gw_set *set,
                          struct backend *pinned, uint64_t pin_epoch, uint64_t *failed)
{
    struct oltp_gateway *g = c->g;
    bool idempotent = oltp_req_is_idempotent(req);
    int tmo = (int)g->cfg.timeout_ms;
    uint64_t be_excluded = *failed;
    uint64_t link_excluded[OLTP_GATEWAY_MAX_BACKENDS] = {0};

    for (unsigned attempt = 0; attempt < g->nbes * g->nlinks + g->nbes; attempt++) {
        struct backend *be = pinned != NULL ? pinned : gateway_pick_backend(g, be_excluded);
        struct oltp_req fwd = *req;
        uint8_t frame[REQ_FRAME_CAP];
        struct link *l;
        uint64_t epoch;
        size_t n;
        ssize_t got;

        if (be == NULL)
            break;
        epoch = __atomic_load_n(&be->epoch, __ATOMIC_RELAXED);
        if (pinned != NULL && (epoch != pin_epoch || !gateway_backend_is_up(be))) {
            gateway_pin_remove(g, req->session);
            return answer_local(c, req, OLTP_ST_NO_SESSION);
        }
        l = gateway_pick_link(be, set, link_excluded[be->idx]);
        if (l == NULL) {
            if (pinned != NULL)
                break;
            be_excluded |= 1ULL << be->idx;
            continue;
        }
        fwd.id = cr_bound_pool_next_id(l->bp);
        n = oltp_req_encode(&fwd, frame, sizeof(frame));
        gateway_link_account(l, +1);
        if (cr_bound_pool_expect(l->bp, &c->ctx, fwd.id, c->out, sizeof(c->out)) < 0) {
            gateway_link_account(l, -1);
            link_excluded[be->idx] |= 1ULL << l->idx;
            continue;
        }
        if (cr_bound_pool_send(l->bp, frame, n, tmo) < 0) {
            /* Registered just now by this thread: cannot be -EINVAL. */
            (void)!cr_bound_pool_cancel(l->bp, &c->ctx);
            gateway_link_account(l, -1);
            link_excluded[be->idx] |= 1ULL << l->idx;
            continue;
        }
        __atomic_add_fetch(&be->forwarded, 1, __ATOMIC_RELAXED);
        got = cr_bound_pool_join(l->bp, &c->ctx, tmo);
        gateway_link_account(l, -1);
        if (got > 0)
            gateway_backend_note_status(be, c->out, (size_t)got);
        if (got > 0 && pinned == NULL && is_refused(c->out, (size_t)got)) {
            /* The ledger applied nothing and takes nothing (its storage
             * failed): another may take the request, whatever it is. */
            count(&g->retried);
            be_excluded |= 1ULL << be->idx;
            *failed |= 1ULL << be->idx;
            continue;
        }
        if (got > 0)
            return answer_forwarded(c, req, be, epoch, (size_t)got);
        if (got == -ETIMEDOUT || got == -ECANCELED || got == -EMSGSIZE || !idempotent) {
            /* A write may have been applied, key or not: IN_DOUBT (its key
             * makes sending it again safe, not its outcome known). Only
             * what changes nothing is UNAVAILABLE, "not applied". */
            CR_LOG(CR_LOG_DEBUG, "backend %s: %s: %s", be->addr, oltp_op_name(req->op),
                   strerror((int)-got));
            return answer_local(c, req, is_read(req) ? OLTP_ST_UNAVAILABLE : OLTP_ST_IN_DOUBT);
        }
        /* The connection failed under an idempotent request: elsewhere, but
         * a session's back end has lost it. */
        if (pinned != NULL)
            return answer_local(c, req, OLTP_ST_NO_SESSION);
        count(&g->retried);
        be_excluded |= 1ULL << be->idx;
        *failed |= 1ULL << be->idx;
    }
    return TRY_ELSEWHERE;
}

/*
 * Forwards a valid request and answers the client. A request of a session
 * goes to its back end only; another to the least loaded live one, and again
 * to another when its back end fails under it and it is idempotent. Nothing
 * was delivered when expect or send fails, so those try another link. The
 * client's own set's links first; another set's only when its own set has no
 * live link to a back end that could take the request (links of one set
 * reconnect on their own, so a session's back end may be up elsewhere).
 */
static int forward(struct client *c, const struct oltp_req *req)
{
    struct oltp_gateway *g = c->g;
    struct backend *pinned = NULL;
    uint64_t pin_epoch = 0;
    uint64_t failed = 0;

    if (req->session != 0) {
        unsigned b;

        if (!gateway_pin_find(g, req->session, &b, &pin_epoch))
            return answer_local(c, req, OLTP_ST_NO_SESSION);
        pinned = &g->bes[b];
    }
    for (unsigned k = 0; k < g->nsets; k++) {
        struct gw_set *set = &g->sets[(c->set->idx + k) % g->nsets];
        int rc = forward_in_set(c, req, set, pinned, pin_epoch, &failed);

        if (rc != TRY_ELSEWHERE)
            return rc;
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
    count(&c->set->requests);
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
    if (gateway_is_stopping(g))
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
    struct gw_set *set = arg;
    struct oltp_gateway *g = set->g;
    struct client *c = malloc(sizeof(*c));
    int err;

    (void)a;
    if (c == NULL) {
        close(fd);
        return;
    }
    c->g = g;
    c->set = set;
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
    count(&set->accepted);
    err = cr_reactor_add(set->r, fd, CR_EV_READ, CR_REACTOR_ONESHOT, on_client, c);
    if (err < 0) {
        CR_LOG(CR_LOG_ERROR, "client fd %d: %s", fd, strerror(-err));
        close_client(c);
    }
}

/* ------------------------------------------------------------------ sets */

/*
 * Resolves cfg's handle sets and threads (0: auto, gateway.h) in place.
 * -EINVAL for more sets than OLTP_GATEWAY_MAX_SETS or fewer threads than
 * sets (a set without a thread would never be served).
 */
static int size_sets(struct oltp_gateway_config *cfg)
{
    unsigned n = cfg->groups;

    if (n == 0)
        n = cr_lf_pool_default_sets(cfg->threads, OLTP_GATEWAY_MAX_SETS);
    if (n > OLTP_GATEWAY_MAX_SETS)
        return -EINVAL;
    if (cfg->threads == 0)
        cfg->threads = n * CR_LF_POOL_THREADS_PER_SET;
    if (cfg->threads < n)
        return -EINVAL;
    cfg->groups = n;
    return 0;
}

/*
 * Opens set 0's listener on the configured address (SO_REUSEPORT when more
 * sets follow) and the other sets' copies on the address it got, so that
 * port 0 works (as src/server.c's open_group_copies does).
 */
static int open_listeners(struct oltp_gateway *g)
{
    struct cr_listener_config lcfg = {.address = g->cfg.listen, .reuseport = g->nsets > 1};
    int err = cr_listener_open(&g->sets[0].listen_fd, &lcfg);

    if (err < 0)
        return err;
    g->port = cr_listener_port(g->sets[0].listen_fd);
    if (g->port < 0)
        return g->port;
    err = cr_listener_address(g->sets[0].listen_fd, g->address, sizeof(g->address));
    lcfg.address = g->address;
    for (unsigned i = 1; i < g->nsets && err == 0; i++)
        err = cr_listener_open(&g->sets[i].listen_fd, &lcfg);
    return err;
}

/* Each set's listener, reactor and (paused) acceptor, the pool over the
 * reactors, and the back ends' links. */
static int open_sets(struct oltp_gateway *g, const char *const *backends)
{
    struct cr_lf_pool_config pcfg = {0};
    int err;

    g->sets = calloc(g->nsets, sizeof(*g->sets));
    g->reactors = calloc(g->nsets, sizeof(*g->reactors));
    if (g->sets == NULL || g->reactors == NULL)
        return -ENOMEM;
    for (unsigned i = 0; i < g->nsets; i++) {
        g->sets[i].g = g;
        g->sets[i].idx = i;
        g->sets[i].listen_fd = -1;
    }
    err = open_listeners(g);
    for (unsigned i = 0; i < g->nsets && err == 0; i++) {
        err = cr_reactor_create(&g->sets[i].r, NULL);
        g->reactors[i] = g->sets[i].r;
    }
    if (err < 0)
        return err;
    pcfg.threads = g->cfg.threads;
    /* NULL: the pool's default, lifo (docs/design/oltp.md says why not
     * fifo, though fifo would mean fewer nested waits). Threads are split
     * evenly over the reactors, a group each. */
    pcfg.promotion = g->cfg.promotion;
    pcfg.reactors = g->reactors;
    pcfg.nreactors = g->nsets;
    err = cr_lf_pool_create(&g->lf, &pcfg);
    if (err < 0)
        return err;
    g->bes = calloc(g->nbes, sizeof(*g->bes));
    if (g->bes == NULL)
        return -ENOMEM;
    for (unsigned i = 0; i < g->nbes && err == 0; i++)
        err = gateway_backend_init(g, &g->bes[i], i, backends[i]);
    for (unsigned i = 0; i < g->nsets && err == 0; i++) {
        struct cr_acceptor_config acfg = {.listen_fd = g->sets[i].listen_fd};

        err = cr_acceptor_create(&g->sets[i].acc, g->sets[i].r, &acfg, on_accept, &g->sets[i]);
        /* Nothing is served before start. */
        if (err == 0)
            cr_acceptor_pause(g->sets[i].acc);
    }
    return err;
}

/* Frees what open_sets made, as far as it got. */
static void close_sets(struct oltp_gateway *g)
{
    for (unsigned i = 0; g->sets != NULL && i < g->nsets; i++)
        cr_acceptor_destroy(g->sets[i].acc);
    while (g->clients != NULL)
        close_client(g->clients);
    for (unsigned i = 0; g->bes != NULL && i < g->nbes; i++)
        gateway_backend_fini(&g->bes[i]);
    free(g->bes);
    cr_lf_pool_destroy(g->lf);
    for (unsigned i = 0; g->sets != NULL && i < g->nsets; i++) {
        cr_reactor_destroy(g->sets[i].r);
        if (g->sets[i].listen_fd >= 0)
            close(g->sets[i].listen_fd);
    }
    free(g->reactors);
    free(g->sets);
}

/* ------------------------------------------------------------------ public */

int oltp_gateway_create(struct oltp_gateway **out, const struct oltp_gateway_config *cfg)
{
    struct oltp_gateway *g;
    int err;

    if (cfg->nbackends == 0 || cfg->nbackends > OLTP_GATEWAY_MAX_BACKENDS ||
        cfg->backends == NULL || cfg->connections > MAX_CONNS)
        return -EINVAL;
    g = calloc(1, sizeof(*g));
    if (g == NULL)
        return -ENOMEM;
    g->cfg = *cfg;
    err = size_sets(&g->cfg);
    if (err < 0)
        goto out_free;
    if (g->cfg.listen == NULL)
        g->cfg.listen = DEFAULT_LISTEN;
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
    g->nsets = g->cfg.groups;
    g->nbes = cfg->nbackends;
    g->nlinks = g->cfg.connections;
    err = -pthread_mutex_init(&g->lock, NULL);
    if (err < 0)
        goto out_free;
    err = -pthread_cond_init(&g->idle, NULL);
    if (err < 0)
        goto out_mutex;
    err = gateway_pins_init(g);
    if (err < 0)
        goto out_cond;
    err = open_sets(g, cfg->backends);
    if (err < 0)
        goto out_sets;
    *out = g;
    return 0;

out_sets:
    close_sets(g);
    gateway_pins_fini(g);
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

    gateway_backends_connect(g);
    err = cr_lf_pool_start(g->lf);
    if (err < 0)
        return err;
    g->started = true;
    for (unsigned i = 0; i < g->nsets; i++)
        cr_acceptor_resume(g->sets[i].acc);
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
    for (unsigned i = 0; i < g->nsets; i++)
        cr_acceptor_pause(g->sets[i].acc);
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
    close_sets(g);
    gateway_pins_fini(g);
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
    out->sessions = gateway_pins_count(g);
    out->threads = g->cfg.threads;
    out->nsets = g->nsets;
    for (unsigned i = 0; i < g->nsets; i++) {
        const struct gw_set *set = &g->sets[i];
        struct oltp_gateway_set_stats *s = &out->sets[i];

        /* The pool's split: thread slot t is in group t % nsets. */
        s->threads = g->cfg.threads / g->nsets + (i < g->cfg.threads % g->nsets ? 1 : 0);
        s->links_up = gateway_set_links_up(g, set);
        s->accepted = __atomic_load_n(&set->accepted, __ATOMIC_RELAXED);
        s->requests = __atomic_load_n(&set->requests, __ATOMIC_RELAXED);
    }
    out->nbackends = g->nbes;
    for (unsigned i = 0; i < g->nbes; i++) {
        struct backend *be = &g->bes[i];
        struct oltp_gateway_backend_stats *s = &out->backends[i];

        pthread_mutex_lock(&be->lock);
        s->connections = be->up;
        s->epoch = be->epoch;
        pthread_mutex_unlock(&be->lock);
        s->live = s->connections > 0;
        s->refusing = __atomic_load_n(&be->refusing, __ATOMIC_RELAXED);
        s->outstanding = __atomic_load_n(&be->outstanding, __ATOMIC_RELAXED);
        s->forwarded = __atomic_load_n(&be->forwarded, __ATOMIC_RELAXED);
        s->failures = __atomic_load_n(&be->failures, __ATOMIC_RELAXED);
        s->reconnects = __atomic_load_n(&be->reconnects, __ATOMIC_RELAXED);
    }
}
