/*
 * gateway_internal.h - what the three files of cabrank-gateway's core share:
 * gateway.c (the client side: the handle sets, accept, read, forward,
 * answer; create, start, stop, destroy, stats), gateway_backend.c (the
 * back-end links: connect, health, reconnect, and the routing that picks a
 * live link) and gateway_pins.c (sessions pinned to the back end that began
 * them).
 *
 * Handle sets: the gateway serves `nsets` sets, each a reactor with its own
 * SO_REUSEPORT copy of the client listener, its acceptor, its own links to
 * every back end (`nlinks` each) and its group of the pool's threads. A
 * request is forwarded on the links of its client's set; another set's links
 * are tried only when its own set has none live to a usable back end.
 * Pins, back ends' epochs and counters are the gateway's, across sets.
 *
 * Threads: create, start, stop and destroy run on the owner thread; the
 * rest on the gateway's pool threads. Lock order: backend.lock, then a bound
 * pool's own locks (attach runs under backend.lock; the pool's on_fail
 * callback runs with no pool lock held and takes backend.lock).
 * gateway.lock (clients, pins) is a leaf. No lock is held across a join.
 */
#ifndef CABRANK_OLTP_GATEWAY_INTERNAL_H
#define CABRANK_OLTP_GATEWAY_INTERNAL_H

#include "gateway.h"
#include "proto.h"

#include <cabrank/acceptor.h>
#include <cabrank/bound_pool.h>
#include <cabrank/u64_table.h>

#include <pthread.h>
#include <sys/socket.h>

struct backend;
struct client;
struct oltp_gateway;

/* One handle set: its reactor, listener copy and acceptor (gateway.c). */
struct gw_set {
    struct oltp_gateway *g;
    unsigned idx;
    /* Immutable after create. */
    int listen_fd;
    struct cr_reactor *r;
    struct cr_acceptor *acc;
    /* Atomic, relaxed: counters. */
    uint64_t accepted;
    uint64_t requests;
};

/* One multiplexed connection of a set to a back end. */
struct link {
    struct backend *be;
    struct gw_set *set;
    unsigned idx; /* within its set: 0..nlinks-1 */
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
    struct link *links; /* nsets * nlinks, set-major: gateway_link(be, set, i) */
    pthread_mutex_t lock;
    /* Protected by lock; read relaxed by the router. */
    unsigned up;    /* links up, every set's */
    uint64_t epoch; /* bumped each time up falls to 0: sessions of before are gone */
    /* Atomic, relaxed: it answered UNAVAILABLE (it takes nothing, its
     * storage failed) and has not answered a PING with OK since; the router
     * tries it only when no other back end is up. */
    bool refusing;
    /* Atomic, relaxed: counters and the load-balancing figure. */
    unsigned outstanding;
    uint64_t forwarded;
    uint64_t failures;
    uint64_t reconnects;
};

struct oltp_gateway {
    /* Immutable after create. */
    struct oltp_gateway_config cfg;
    int port;
    char address[64];
    struct gw_set *sets;
    struct cr_reactor **reactors; /* the sets', for the pool */
    unsigned nsets;
    struct cr_lf_pool *lf;
    struct backend *bes;
    unsigned nbes;
    unsigned nlinks; /* per back end and set */
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t idle;
    /* Protected by lock. */
    struct client *clients;
    struct cr_u64_table pins; /* struct pin (gateway_pins.c) by session id */
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

/* Link i of set within be. */
static inline struct link *gateway_link(struct backend *be, const struct gw_set *set, unsigned i)
{
    return &be->links[set->idx * be->g->nlinks + i];
}

static inline bool gateway_is_stopping(struct oltp_gateway *g)
{
    /* Pairs with the release store in oltp_gateway_stop. */
    return __atomic_load_n(&g->stopping, __ATOMIC_ACQUIRE) != 0;
}

/* ------------------------------------------------------- gateway_backend.c */

/* Sets up back end idx at addr ("host:port", numeric) and the bound pools
 * of its links, nlinks per set, nothing connected. 0, -EINVAL or -errno; fini_backend undoes a
 * partial one. Owner thread only, before start. */
int gateway_backend_init(struct oltp_gateway *g, struct backend *be, unsigned idx,
                         const char *addr);

/* Frees what gateway_backend_init made; safe on a zeroed backend. Owner
 * thread only, after stop. */
void gateway_backend_fini(struct backend *be);

/* Connects every link of every set (one that fails retries in the
 * background) and starts each set's health rounds. Owner thread only, at
 * start. */
void gateway_backends_connect(struct oltp_gateway *g);

/* Whether be has a link up (a relaxed read: a routing hint). Thread-safe. */
bool gateway_backend_is_up(const struct backend *be);

/* The live back end outside the bit set excluded with the fewest requests in
 * flight (the lowest index on a tie), one that refuses only when no other is
 * live, or NULL. Thread-safe. */
struct backend *gateway_pick_backend(struct oltp_gateway *g, uint64_t excluded);

/* be's live link of set outside excluded (bits: link indexes within the
 * set) with the fewest requests in flight, or NULL. Thread-safe. */
/* The status of a reply frame of len bytes (the first two bytes of its
 * body), or -1 when it is too short to carry one. */
static inline int gateway_reply_status(const uint8_t *frame, size_t len)
{
    return len < OLTP_HEADER_SIZE + 2 ? -1
                                      : frame[OLTP_HEADER_SIZE] << 8 | frame[OLTP_HEADER_SIZE + 1];
}

/* Records what a reply of be (len bytes of frame) says of its health: an
 * UNAVAILABLE marks it refusing, an OK clears that. Thread-safe. */
void gateway_backend_note_status(struct backend *be, const uint8_t *frame, size_t len);

struct link *gateway_pick_link(struct backend *be, const struct gw_set *set, uint64_t excluded);

/* Links of set up now, to every back end (a relaxed count). Thread-safe. */
unsigned gateway_set_links_up(struct oltp_gateway *g, const struct gw_set *set);

/* Counts a request into (delta +1) or out of (-1) l and its back end. Thread-safe. */
void gateway_link_account(struct link *l, int delta);

/* --------------------------------------------------------- gateway_pins.c */

/* Sets up the empty pin table. 0 or -ENOMEM. Owner thread only. */
int gateway_pins_init(struct oltp_gateway *g);

/* Frees every pin and the table. Owner thread only. */
void gateway_pins_fini(struct oltp_gateway *g);

/* Remembers that session lives on back end be (which had epoch at the
 * request's send). Out of memory, the pin is dropped: the session's requests
 * then get NO_SESSION, as if it had expired. Takes g->lock. */
void gateway_pin_add(struct oltp_gateway *g, uint64_t session, unsigned be, uint64_t epoch);

/* The back end of session and its epoch; false if it is not pinned. Takes g->lock. */
bool gateway_pin_find(struct oltp_gateway *g, uint64_t session, unsigned *be, uint64_t *epoch);

/* Forgets session's pin, if any. Takes g->lock. */
void gateway_pin_remove(struct oltp_gateway *g, uint64_t session);

/* Forgets pins idle longer than session_idle_ms (the ledger expired them
 * long ago) and pins of back ends that went down since. Takes g->lock. */
void gateway_pins_sweep(struct oltp_gateway *g);

/* Sessions pinned now. Takes g->lock. */
unsigned gateway_pins_count(struct oltp_gateway *g);

#endif /* CABRANK_OLTP_GATEWAY_INTERNAL_H */
