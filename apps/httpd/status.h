/*
 * status.h - cabrank-httpd's /server-status: the service's own counters
 * (requests, body bytes, status classes, a latency histogram) kept per
 * worker, the registry of its open connections, the rates sampled when the
 * page is read, and the page that shows them with the server's: model,
 * version, start time, uptime, connections, each worker's role right now
 * and time per role, promotions; as HTML, JSON or Prometheus text.
 *
 * Counting: the serving thread adds to the slot of its worker index
 * (cr_conn_worker()), so threads do not share cache lines; the page sums the
 * slots when it is read. A slot has one writer when the slots cover every
 * worker index, so it is updated with relaxed atomic loads and stores rather
 * than locked read-modify-writes; an index beyond the slot count wraps
 * around, and a count may then be lost, never torn.
 *
 * Connections: each connection's struct status_conn (in the service's
 * per-connection state) sits in one of a few mutex-protected lists (shards,
 * by worker index), written at open, close and the request's start and end
 * only; the page copies the rows under each shard's lock.
 *
 * Rates: a ring of samples of the server-wide counters, at most one a
 * second, taken when the page is rendered (never on the request path); the
 * current rates are over the interval since the newest sample at least a
 * second old, the series are the intervals between the samples.
 *
 * Process models (forking, prefork): the slots, the connections and the
 * ring are per process (each worker counts what it serves). The page then
 * takes the server-wide request count and the process figures from
 * cr_server_stats (shared memory; the count includes exited workers) and
 * shows the scoreboard: a row per worker process (pid, generation,
 * state, busy threads, connections, requests, bytes, last request, busy
 * for), the totals, processes, generation, restarts and crashes.
 */
#ifndef CABRANK_HTTPD_STATUS_H
#define CABRANK_HTTPD_STATUS_H

#include <cabrank/common.h>

#include <netinet/in.h>
#include <sys/socket.h>

struct cr_server;
struct status;

/* Latency buckets: bucket 0 counts < 1 us, bucket i (1..) [2^(i-1), 2^i) us,
 * the last one everything from 2^(N-2) us (about 17 s) up. */
#define STATUS_LATENCY_BUCKETS 26

/* The sums over every worker slot. */
struct status_totals {
    uint64_t requests;
    uint64_t body_bytes;
    uint64_t classes[6]; /* [1] 1xx ... [5] 5xx; [0] other */
    uint64_t latency[STATUS_LATENCY_BUCKETS];
    uint64_t latency_sum_ns;
};

/* What the page is rendered as. */
enum status_format {
    STATUS_HTML = 0,
    STATUS_JSON,
    STATUS_PROMETHEUS,
};

/* ---------------------------------------------------------------- counters */

/* One slot per worker index (slots >= 1). *out returns owned. -ENOMEM.
 * Thread-safe. */
CR_MUST_CHECK int status_create(struct status **out, unsigned slots);

/* NULL-safe. No record, connection call or render may run concurrently or
 * later; every connection must have been closed. */
void status_destroy(struct status *st);

/* Bucket index of a latency. Thread-safe. */
unsigned status_latency_bucket(uint64_t latency_ns);

/* Counts one answered request: its status code, body bytes and service
 * latency. Thread-safe; exact when worker's slot has no other writer. */
void status_record(struct status *st, unsigned worker, int code, uint64_t body_bytes,
                   uint64_t latency_ns);

/* Sums the slots. Thread-safe. */
void status_sum(const struct status *st, struct status_totals *t);

/* ---------------------------------------------------------------- connections */

enum status_conn_state {
    STATUS_CONN_READING = 0, /* waiting for or reading a request (head or body) */
    STATUS_CONN_WRITING,     /* answering: the answer is not all sent */
    STATUS_CONN_KEEPALIVE,   /* answered; idle until the next request */
    STATUS_CONN_STATES
};

/* Request lines are kept up to this many bytes. */
#define STATUS_CONN_LINE_MAX 120

/* A client's address. */
union status_peer {
    struct sockaddr sa; /* sa_family AF_UNSPEC: unknown */
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
};

/* A connection's row; embedded in the service's per-connection state.
 * Fields are the registry's: read and written under its shard's lock. */
struct status_conn {
    struct status_conn *prev;
    struct status_conn *next;
    unsigned shard;
    enum status_conn_state state;
    uint64_t since_ns; /* cr_clock_event_ns() time the state began */
    uint64_t requests; /* answered so far */
    union status_peer peer;
    size_t line_len;
    char line[STATUS_CONN_LINE_MAX];
};

/* Registers sc (borrowed until status_conn_close) in state READING since
 * now; peer (peer_len bytes, 0 for none) is copied. worker picks the shard.
 * Thread-safe. */
void status_conn_open(struct status *st, struct status_conn *sc, unsigned worker,
                      const struct sockaddr *peer, socklen_t peer_len, uint64_t now_ns);

/* A new state since now_ns. Thread-safe; one thread at a time per sc. */
void status_conn_set(struct status *st, struct status_conn *sc, enum status_conn_state state,
                     uint64_t now_ns);

/* A request started being answered: WRITING since now_ns, with its request
 * line (kept up to STATUS_CONN_LINE_MAX bytes). Thread-safe; one thread at
 * a time per sc. */
void status_conn_request(struct status *st, struct status_conn *sc, const char *method,
                         size_t method_len, const char *target, size_t target_len, int minor,
                         uint64_t now_ns);

/* Unregisters sc. Thread-safe; one thread at a time per sc. */
void status_conn_close(struct status *st, struct status_conn *sc);

/* ---------------------------------------------------------------- rates */

/* The counters the rates are taken of. */
enum status_rate {
    STATUS_RATE_REQUESTS = 0,
    STATUS_RATE_BYTES,       /* bytes sent */
    STATUS_RATE_CONNECTIONS, /* connections accepted */
    STATUS_RATES
};

/* Samples kept: the series has one point fewer. */
#define STATUS_SAMPLES 61

struct status_rates {
    double window_s;            /* what per_s is over; 0: no interval yet */
    double per_s[STATUS_RATES]; /* current rates */
    double span_s;              /* from the oldest sample to now: the series' width */
    unsigned points;            /* series points, oldest first */
    double t_s[STATUS_SAMPLES]; /* each point's end, in seconds before now (<= 0) */
    double series[STATUS_RATES][STATUS_SAMPLES];
};

/*
 * Takes a sample of counts[] at now_ns (monotonic) unless the newest is
 * under a second old, and returns the rates in *r. start_ns, when not 0, is
 * when every counter was 0 (the server's start): the ring's first sample
 * then has it as its base. Thread-safe (the ring has a lock of its own).
 */
void status_rates_update(struct status *st, uint64_t now_ns, uint64_t start_ns,
                         const uint64_t counts[STATUS_RATES], struct status_rates *r);

/* ---------------------------------------------------------------- the page */

/*
 * Renders the page for srv (borrowed; may be NULL in tests) in format f:
 * HTML that refreshes itself every 2 s, JSON (with "scoreboard": [...]
 * under a process model) or Prometheus text. Takes a rate sample. *out
 * returns owned (free()), *len its length. -ENOMEM. Thread-safe.
 */
CR_MUST_CHECK int status_render(struct status *st, struct cr_server *srv, enum status_format f,
                                char **out, size_t *len);

#endif /* CABRANK_HTTPD_STATUS_H */
