/*
 * gateway_backend.c - cabrank-gateway's back-end links (gateway_internal.h):
 * a few multiplexed connections per back end and handle set, each a hybrid
 * cr_bound_pool registered in its set's reactor and served by that set's
 * threads of the gateway's cr_lf_pool; connecting them (start, then the
 * reconnect timer, on the link's set, with exponential back-off after a
 * failure), the health rounds (one per set, on its reactor: a PING on each
 * of its live links each interval, a silent link failed, a refusing back
 * end (UNAVAILABLE: its storage failed) tried last until it answers OK),
 * the epochs that end a down back end's sessions, and the routing hints
 * (the least loaded live back end and link) that gateway.c's forward uses.
 *
 * Threads: init, fini and connect on the owner thread; the timers and the
 * bound pools' on_fail on the pool threads. Owns the links and their bound
 * pools. Lock order (gateway_internal.h): backend.lock, then a bound pool's
 * locks; on_fail runs with no pool lock held and takes backend.lock.
 */
#include "gateway_internal.h"

#include <cabrank/clock.h>
#include <cabrank/listener.h>
#include <cabrank/log.h>
#include <cabrank/reactor.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONNECT_TIMEOUT_MS 1000

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

    if (gateway_is_stopping(g))
        return;
    err = cr_reactor_timer_add(l->set->r, delay_ms, on_reconnect, l, NULL);
    if (err < 0)
        CR_LOG(CR_LOG_ERROR, "backend %s: set %u: no reconnect timer: %s", l->be->addr, l->set->idx,
               strerror(-err));
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
    CR_LOG(CR_LOG_INFO, "backend %s: set %u connection %u up", be->addr, l->set->idx, l->idx);
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
    if (gateway_is_stopping(l->be->g))
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
    CR_LOG(CR_LOG_WARN, "backend %s: set %u connection %u failed: %s%s", be->addr, l->set->idx,
           l->idx, strerror(-err), down ? "; backend down" : "");
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

bool gateway_backend_is_up(const struct backend *be)
{
    return __atomic_load_n(&be->up, __ATOMIC_RELAXED) > 0;
}

void gateway_backend_note_status(struct backend *be, const uint8_t *frame, size_t len)
{
    int status = gateway_reply_status(frame, len);
    bool refusing;

    if (status == OLTP_ST_UNAVAILABLE)
        refusing = true;
    else if (status == OLTP_ST_OK)
        refusing = false;
    else
        return;
    if (__atomic_exchange_n(&be->refusing, refusing, __ATOMIC_RELAXED) == refusing)
        return;
    if (refusing)
        CR_LOG(CR_LOG_WARN,
               "backend %s refuses requests (UNAVAILABLE): tried last until it "
               "answers OK",
               be->addr);
    else
        CR_LOG(CR_LOG_INFO, "backend %s answers OK again", be->addr);
}

struct backend *gateway_pick_backend(struct oltp_gateway *g, uint64_t excluded)
{
    struct backend *best = NULL;
    unsigned best_out = 0;
    bool best_refusing = false;

    for (unsigned i = 0; i < g->nbes; i++) {
        struct backend *be = &g->bes[i];
        bool refusing;
        unsigned out;

        if ((excluded >> i & 1) != 0 || !gateway_backend_is_up(be))
            continue;
        refusing = __atomic_load_n(&be->refusing, __ATOMIC_RELAXED);
        out = __atomic_load_n(&be->outstanding, __ATOMIC_RELAXED);
        if (best == NULL || (best_refusing && !refusing) ||
            (refusing == best_refusing && out < best_out)) {
            best = be;
            best_out = out;
            best_refusing = refusing;
        }
    }
    return best;
}

struct link *gateway_pick_link(struct backend *be, const struct gw_set *set, uint64_t excluded)
{
    struct link *best = NULL;
    unsigned best_out = 0;

    for (unsigned i = 0; i < be->g->nlinks; i++) {
        struct link *l = gateway_link(be, set, i);
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

unsigned gateway_set_links_up(struct oltp_gateway *g, const struct gw_set *set)
{
    unsigned n = 0;

    for (unsigned b = 0; b < g->nbes; b++) {
        for (unsigned i = 0; i < g->nlinks; i++)
            n += __atomic_load_n(&gateway_link(&g->bes[b], set, i)->up, __ATOMIC_RELAXED) ? 1 : 0;
    }
    return n;
}

void gateway_link_account(struct link *l, int delta)
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

static void schedule_health(struct gw_set *set)
{
    struct oltp_gateway *g = set->g;
    int err;

    if (gateway_is_stopping(g))
        return;
    err = cr_reactor_timer_add(set->r, g->cfg.health_interval_ms, on_health, set, NULL);
    if (err < 0)
        CR_LOG(CR_LOG_ERROR, "set %u: no health timer: %s", set->idx, strerror(-err));
}

/*
 * One health round of a set, on one of its threads: a PING on each of its
 * live links at once, then the answers; a link silent for health_timeout_ms
 * is failed (its requests in flight fail over), and each answer's status
 * marks its back end refusing or not. The joins serve the pool
 * meanwhile. Set 0's round also sweeps the gateway's pins.
 */
static void on_health(struct cr_reactor *r, uint64_t timer_id, void *arg)
{
    struct gw_set *set = arg;
    struct oltp_gateway *g = set->g;
    uint64_t deadline = cr_clock_now_ns() + g->cfg.health_timeout_ms * 1000000ULL;
    int tmo = (int)g->cfg.health_timeout_ms;

    (void)r;
    (void)timer_id;
    if (gateway_is_stopping(g))
        return;
    for (unsigned b = 0; b < g->nbes; b++) {
        for (unsigned i = 0; i < g->nlinks; i++) {
            struct link *l = gateway_link(&g->bes[b], set, i);
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
            struct link *l = gateway_link(&g->bes[b], set, i);
            uint64_t now = cr_clock_now_ns();
            int left = now >= deadline ? 0 : (int)((deadline - now) / 1000000ULL);
            ssize_t rc;

            if (!l->hpending)
                continue;
            l->hpending = false;
            rc = cr_bound_pool_join(l->bp, &l->hctx, left);
            if (rc > 0)
                gateway_backend_note_status(&g->bes[b], l->hreply, (size_t)rc);
            if (rc == -ETIMEDOUT) {
                CR_LOG(CR_LOG_WARN, "backend %s: set %u connection %u: no PING reply in %llu ms",
                       g->bes[b].addr, set->idx, i, (unsigned long long)g->cfg.health_timeout_ms);
                cr_bound_pool_fail(l->bp, -ETIMEDOUT);
            }
        }
    }
    if (set->idx == 0)
        gateway_pins_sweep(g);
    schedule_health(set);
}

/* ------------------------------------------------------------------ lifecycle */

int gateway_backend_init(struct oltp_gateway *g, struct backend *be, unsigned idx, const char *addr)
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
    be->links = calloc((size_t)g->nsets * g->nlinks, sizeof(*be->links));
    if (be->links == NULL)
        return -ENOMEM;
    for (unsigned k = 0; k < g->nsets * g->nlinks; k++) {
        struct link *l = &be->links[k];
        struct gw_set *set = &g->sets[k / g->nlinks];
        struct cr_bound_pool_config bcfg = {
            .decode = decode_reply,
            .read_buffer = 4 * OLTP_MAX_FRAME,
            .lf = g->lf,
            .reactor = set->r,
            .on_fail = on_link_fail,
            .fail_arg = l,
        };

        l->be = be;
        l->set = set;
        l->idx = k % g->nlinks;
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

void gateway_backend_fini(struct backend *be)
{
    if (be->g == NULL)
        return;
    if (be->links != NULL) {
        for (unsigned k = 0; k < be->g->nsets * be->g->nlinks; k++) {
            cr_bound_pool_destroy(be->links[k].bp);
            cr_bound_ctx_fini(&be->links[k].hctx);
        }
        free(be->links);
    }
    pthread_mutex_destroy(&be->lock);
}

void gateway_backends_connect(struct oltp_gateway *g)
{
    for (unsigned b = 0; b < g->nbes; b++) {
        for (unsigned k = 0; k < g->nsets * g->nlinks; k++) {
            struct link *l = &g->bes[b].links[k];
            int err = bring_up(l);

            if (err < 0) {
                CR_LOG(CR_LOG_WARN, "backend %s: set %u connect: %s (retrying)", g->bes[b].addr,
                       l->set->idx, strerror(-err));
                schedule_reconnect(l, l->backoff_ms);
            }
        }
    }
    for (unsigned i = 0; i < g->nsets; i++)
        schedule_health(&g->sets[i]);
}
