/*
 * gateway.h - cabrank-gateway's core, the front-end communication server of
 * the Leader/Followers paper's OLTP example: accepts client
 * connections speaking apps/oltp/proto.h, answers invalid requests itself and
 * forwards valid ones to back ends (cabrank-ledger) over a few multiplexed
 * connections per back end, each a hybrid cr_bound_pool served by the
 * gateway's own cr_lf_pool. A thread that forwards a request waits for its
 * reply by serving other events meanwhile (new clients, other replies), so
 * the gateway never deadlocks when every thread waits.
 *
 * Handle sets: by default one per usable CPU, each with its own SO_REUSEPORT
 * copy of the listener, its own connections to every back end and its own
 * group of threads (two by default, so a follower covers a handler that
 * blocks); the kernel spreads client connections over the sets, and a
 * request is forwarded and answered on its set's connections.
 *
 * Routing: a new request goes to the live back end with the fewest
 * outstanding requests; a request of a session goes to the back end that
 * began the session. Health: a PING on every connection each health interval
 * (no answer within twice the interval fails the connection); a failed
 * connection is reconnected with exponential back-off. Failover: when a
 * connection fails, the requests in flight on it are sent again to another
 * live back end if they are idempotent (oltp_req_is_idempotent), and
 * answered OLTP_ST_IN_DOUBT otherwise; with no live back end a request gets
 * OLTP_ST_UNAVAILABLE at once. A request unanswered after timeout_ms (the
 * back end lives but is slow) is not sent again: it is answered
 * OLTP_ST_UNAVAILABLE if idempotent (the client may send it again),
 * OLTP_ST_IN_DOUBT otherwise. A client's PING is answered by the gateway.
 *
 * Used by main_gateway.c and the tests; the object is driven by one owner
 * thread (create, start, stop, destroy), the rest runs on the pool threads.
 */
#ifndef CABRANK_OLTP_GATEWAY_H
#define CABRANK_OLTP_GATEWAY_H

#include <cabrank/common.h>

/* Back ends one gateway forwards to, at most. */
#define OLTP_GATEWAY_MAX_BACKENDS 64
/* Handle sets, at most (an automatic count is capped there). */
#define OLTP_GATEWAY_MAX_SETS 256

struct oltp_gateway;

struct oltp_gateway_config {
    const char *listen;          /* numeric address; NULL = "127.0.0.1:7000" */
    const char *const *backends; /* borrowed: "127.0.0.1:7100"... (numeric) */
    unsigned nbackends;          /* 1..OLTP_GATEWAY_MAX_BACKENDS */
    /* Handle sets; 0 = auto: threads / 2 (at least 1) when threads is set,
     * else one per usable CPU (the affinity mask's). */
    unsigned groups;
    unsigned threads;            /* pool threads, split over the sets; 0 = 2 per set */
    const char *promotion;       /* the pool's promotion order; NULL = lifo */
    unsigned connections;        /* per back end and handle set; 0 = 2 */
    uint64_t health_interval_ms; /* 0 = 1000 */
    uint64_t health_timeout_ms;  /* a PING unanswered this long fails; 0 = 2 x interval */
    uint64_t timeout_ms;         /* per forwarded request; 0 = 10000 */
    unsigned backoff_min_ms;     /* first reconnect delay; 0 = 100 */
    unsigned backoff_max_ms;     /* cap of the doubling; 0 = 5000 */
    uint64_t session_idle_ms;    /* forget a pinned session unused so long; 0 = 600000 */
};

struct oltp_gateway_backend_stats {
    bool live;            /* at least one connection is up */
    bool refusing;        /* answers UNAVAILABLE (its storage failed): passed over */
    unsigned connections; /* connections up now, every set's */
    unsigned outstanding; /* requests in flight now */
    uint64_t forwarded;   /* requests sent to it (retries included) */
    uint64_t failures;    /* connections that failed */
    uint64_t reconnects;  /* connections made again after a failure */
    uint64_t epoch;       /* times it went down (all connections lost) */
};

struct oltp_gateway_set_stats {
    unsigned threads;  /* pool threads serving the set */
    unsigned links_up; /* its connections to back ends up now */
    uint64_t accepted; /* client connections it accepted */
    uint64_t requests; /* client requests it read */
};

struct oltp_gateway_stats {
    uint64_t accepted;    /* client connections */
    uint64_t requests;    /* client requests read */
    uint64_t local;       /* answered by the gateway (invalid, PING, NO_SESSION) */
    uint64_t forwarded;   /* answered with a back end's reply */
    uint64_t retried;     /* sends again after a back end failed under the request */
    uint64_t in_doubt;    /* OLTP_ST_IN_DOUBT answers */
    uint64_t unavailable; /* OLTP_ST_UNAVAILABLE answers */
    unsigned sessions;    /* sessions pinned now */
    unsigned threads;     /* pool threads, every set's */
    unsigned nsets;
    struct oltp_gateway_set_stats sets[OLTP_GATEWAY_MAX_SETS];
    unsigned nbackends;
    struct oltp_gateway_backend_stats backends[OLTP_GATEWAY_MAX_BACKENDS];
};

/*
 * Creates a gateway: opens the listening sockets (one per handle set) and the
 * pool, nothing runs yet. *out returns owned. -EINVAL for a bad configuration
 * (threads fewer than groups, groups over OLTP_GATEWAY_MAX_SETS) or address,
 * -ENOMEM, -errno of socket/bind/listen. Owner thread only.
 */
CR_MUST_CHECK int oltp_gateway_create(struct oltp_gateway **out,
                                      const struct oltp_gateway_config *cfg);

/*
 * Connects to the back ends (one that is down is retried in the background)
 * and starts serving. -errno of the pool start. Owner thread only.
 */
CR_MUST_CHECK int oltp_gateway_start(struct oltp_gateway *g);

/* The bound port, for a listen address with port 0. Thread-safe. */
int oltp_gateway_port(const struct oltp_gateway *g);

/* The bound address, "127.0.0.1:34567" or "[::1]:7000". Thread-safe. */
const char *oltp_gateway_address(const struct oltp_gateway *g);

/*
 * Stops: no new connection is accepted, requests in progress are given up to
 * drain_ms to be answered, then the threads stop and every client connection
 * is closed. Returns 0 or -errno of the pool join. Owner thread only.
 */
CR_MUST_CHECK int oltp_gateway_stop(struct oltp_gateway *g, int drain_ms);

/* Frees a stopped (or never started) gateway; NULL-safe. Owner thread only. */
void oltp_gateway_destroy(struct oltp_gateway *g);

/* Counters and the back ends' state now. Thread-safe. */
void oltp_gateway_stats(struct oltp_gateway *g, struct oltp_gateway_stats *out);

#endif /* CABRANK_OLTP_GATEWAY_H */
