/*
 * status.h - cabrank-httpd's /server-status: the service's own counters
 * (requests, body bytes, status classes, a latency histogram) kept per
 * worker, and the page that shows them with the server's: model, uptime,
 * connections, each worker's role right now and time per role, promotions.
 *
 * Counting: the serving thread adds to the slot of its worker index
 * (cr_conn_worker()), so threads do not share cache lines; the page sums the
 * slots when it is read. A slot has one writer when the slots cover every
 * worker index, so it is updated with relaxed atomic loads and stores rather
 * than locked read-modify-writes; an index beyond the slot count wraps
 * around, and a count may then be lost, never torn.
 *
 * Process models (forking, prefork): the slots are per process (each worker
 * counts what it serves). The page then takes the server-wide request count
 * and the process figures from cr_server_stats (shared memory; the count
 * includes exited workers) and shows the scoreboard: a row per worker
 * process (pid, generation,
 * state, busy threads, connections, requests, bytes, last request, busy
 * for), the totals, processes, generation, restarts and crashes.
 */
#ifndef CABRANK_HTTPD_STATUS_H
#define CABRANK_HTTPD_STATUS_H

#include <cabrank/common.h>

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
};

/* One slot per worker index (slots >= 1). *out returns owned. -ENOMEM.
 * Thread-safe. */
CR_MUST_CHECK int status_create(struct status **out, unsigned slots);

/* NULL-safe. No record or render may run concurrently or later. */
void status_destroy(struct status *st);

/* Bucket index of a latency. Thread-safe. */
unsigned status_latency_bucket(uint64_t latency_ns);

/* Counts one answered request: its status code, body bytes and service
 * latency. Thread-safe; exact when worker's slot has no other writer. */
void status_record(struct status *st, unsigned worker, int code, uint64_t body_bytes,
                   uint64_t latency_ns);

/* Sums the slots. Thread-safe. */
void status_sum(const struct status *st, struct status_totals *t);

/*
 * Renders the page for srv (borrowed; may be NULL in tests): HTML that
 * refreshes itself every 2 s, or JSON (with "scoreboard": [...] under a
 * process model). *out returns owned (free()), *len its
 * length. -ENOMEM. Thread-safe.
 */
CR_MUST_CHECK int status_render(const struct status *st, struct cr_server *srv, bool json,
                                char **out, size_t *len);

#endif /* CABRANK_HTTPD_STATUS_H */
