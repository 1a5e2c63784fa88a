/*
 * status_internal.h - what the status page's files share: the output
 * buffer, the snapshot a render works from (status.c takes it), and the
 * renderers, one file per format (status_page.c HTML, status_json.c JSON,
 * status_prometheus.c Prometheus text). The connection registry is
 * status_conns.c. Whichever thread serves a status request runs these.
 */
#ifndef CABRANK_HTTPD_STATUS_INTERNAL_H
#define CABRANK_HTTPD_STATUS_INTERNAL_H

#include "status.h"
#include "version.h"

#include <cabrank/role.h>
#include <cabrank/scoreboard.h>
#include <cabrank/stats.h>

#include <pthread.h>

/* Connections a page lists at most; it says how many more there are. */
#define STATUS_CONNS_LISTED 200

/* Registry shards (status_conns.c). */
#define STATUS_CONN_SHARDS 16

#define STATUS_CACHE_LINE 64

struct status_shard {
    pthread_mutex_t lock;
    /* Protected by lock. */
    struct status_conn *head;
    unsigned count;
} __attribute__((aligned(STATUS_CACHE_LINE)));

/* A growing output buffer; on -ENOMEM it stops growing and says so once. */
struct sbuf {
    char *p;
    size_t len;
    size_t cap;
    bool oom;
};

__attribute__((format(printf, 2, 3))) void status_sb_printf(struct sbuf *b, const char *fmt, ...);

/* Appends s[0..len) escaped for HTML text and attributes, or for a JSON
 * string (without the quotes). */
void status_sb_escape(struct sbuf *b, const char *s, size_t len, bool json);

/* A connection's row as the page shows it. */
struct status_conn_row {
    union status_peer addr;
    char peer[INET6_ADDRSTRLEN + 8]; /* "addr:port", "[addr]:port", "unix", "-" */
    enum status_conn_state state;
    double in_state_s;
    uint64_t requests;
    size_t line_len;
    char line[STATUS_CONN_LINE_MAX];
};

struct snapshot {
    struct cr_server_stats srv;
    struct cr_worker_stats *workers;
    unsigned nworkers;
    unsigned roles[CR_ROLE_COUNT];
    struct status_totals t; /* this process's slots */
    uint64_t requests;      /* server-wide */
    /* Process models: the slots in use (none under thread models). */
    struct cr_scoreboard_entry *board;
    unsigned nboard;
    struct cr_scoreboard_entry board_total; /* sums; pid is the count */
    unsigned states[CR_WORKER_STATE_COUNT];
    uint64_t now_real_ns;
    uint64_t start_real_ns; /* the server's start, wall clock; 0: unknown */
    struct status_rates rates;
    /* This process's connections: the first nconns of conns_total. */
    struct status_conn_row *conns;
    unsigned nconns;
    unsigned conns_total;
};

/* Copies up to cap rows of st's connections into rows (oldest state
 * first is not promised), *total the number registered. Thread-safe. */
unsigned status_conns_copy(struct status *st, struct status_conn_row *rows, unsigned cap,
                           unsigned *total, uint64_t now_ns);

/* The shards of st (status.c owns them; status_conns.c uses them). */
struct status_shard *status_shards(struct status *st);

const char *status_conn_state_name(enum status_conn_state s);

/* Upper bound (exclusive) of bucket b in microseconds; 0 for the last. */
uint64_t status_bucket_limit_us(unsigned b);

/* The bucket limit below which a fraction q of the requests fall, in
 * microseconds; 0 when none were counted. */
uint64_t status_quantile_us(const struct status_totals *t, double q);

/* Seconds since a wall-clock time; -1 for none. */
double status_ago_s(const struct snapshot *sn, uint64_t real_ns);

/* The ids of the threads in handle set g's group, separated by sep. */
void status_render_set_threads(struct sbuf *b, const struct snapshot *sn, unsigned g,
                               const char *sep);

/* "YYYY-MM-DDThh:mm:ssZ" (UTC) of a wall-clock time, into buf (>= 24 bytes). */
void status_iso8601(uint64_t real_ns, char *buf, size_t cap);

/* The renderers. */
void status_render_html(struct sbuf *b, const struct snapshot *sn);
void status_render_json(struct sbuf *b, const struct snapshot *sn);
void status_render_prometheus(struct sbuf *b, const struct snapshot *sn);

#endif /* CABRANK_HTTPD_STATUS_INTERNAL_H */
