/*
 * status.c - the per-worker counters and the status page (status.h).
 * status_record runs on the serving threads; status_render on whichever
 * thread serves a status request. Owns the slots; reads the server's stats
 * through cr_server_stats() and the scoreboard through
 * cr_server_scoreboard(), both safe at any time and from any process.
 *
 * Under the process models the slots are the serving process's own (the
 * service runs in worker processes), so the page's server-wide request
 * count comes from cr_server_stats, which the model keeps in shared memory;
 * the status classes and the latency histogram are this worker's, and the
 * page says so.
 */
#include "status.h"

#include <cabrank/role.h>
#include <cabrank/scoreboard.h>
#include <cabrank/server.h>
#include <cabrank/stats.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CACHE_LINE 64

struct slot {
    /* Relaxed atomics (see status.h). */
    uint64_t requests;
    uint64_t body_bytes;
    uint64_t classes[6];
    uint64_t latency[STATUS_LATENCY_BUCKETS];
} __attribute__((aligned(CACHE_LINE)));

struct status {
    /* Immutable after create. */
    unsigned nslots;
    struct slot *slots;
};

int status_create(struct status **out, unsigned slots)
{
    struct status *st;

    *out = NULL;
    st = calloc(1, sizeof(*st));
    if (st == NULL)
        return -ENOMEM;
    st->nslots = slots != 0 ? slots : 1;
    st->slots = aligned_alloc(CACHE_LINE, st->nslots * sizeof(*st->slots));
    if (st->slots == NULL) {
        free(st);
        return -ENOMEM;
    }
    memset(st->slots, 0, st->nslots * sizeof(*st->slots));
    *out = st;
    return 0;
}

void status_destroy(struct status *st)
{
    if (st == NULL)
        return;
    free(st->slots);
    free(st);
}

unsigned status_latency_bucket(uint64_t latency_ns)
{
    uint64_t us = latency_ns / 1000;
    unsigned b = us == 0 ? 0 : 64 - (unsigned)__builtin_clzll(us);

    return b < STATUS_LATENCY_BUCKETS ? b : STATUS_LATENCY_BUCKETS - 1;
}

/*
 * Adds to a slot's counter with a relaxed load and store, not a locked
 * read-modify-write: a slot has one writer, the thread of its worker index,
 * whenever the slots cover every index (http_service_config.workers). Should
 * an index wrap onto a busy slot, a count may be lost; the counters stay
 * atomic, so readers never see a torn value.
 */
static void add(uint64_t *counter, uint64_t v)
{
    __atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
}

void status_record(struct status *st, unsigned worker, int code, uint64_t body_bytes,
                   uint64_t latency_ns)
{
    struct slot *s = &st->slots[worker % st->nslots];
    unsigned cls = code >= 100 && code < 600 ? (unsigned)code / 100 : 0;

    /* Relaxed: statistics, summed by status_sum with relaxed loads. */
    add(&s->requests, 1);
    add(&s->body_bytes, body_bytes);
    add(&s->classes[cls], 1);
    add(&s->latency[status_latency_bucket(latency_ns)], 1);
}

void status_sum(const struct status *st, struct status_totals *t)
{
    memset(t, 0, sizeof(*t));
    for (unsigned i = 0; i < st->nslots; i++) {
        const struct slot *s = &st->slots[i];

        t->requests += __atomic_load_n(&s->requests, __ATOMIC_RELAXED);
        t->body_bytes += __atomic_load_n(&s->body_bytes, __ATOMIC_RELAXED);
        for (unsigned c = 0; c < 6; c++)
            t->classes[c] += __atomic_load_n(&s->classes[c], __ATOMIC_RELAXED);
        for (unsigned b = 0; b < STATUS_LATENCY_BUCKETS; b++)
            t->latency[b] += __atomic_load_n(&s->latency[b], __ATOMIC_RELAXED);
    }
}

/* ------------------------------------------------------------------ rendering */

/* A growing output buffer; on -ENOMEM it stops growing and says so once. */
struct sbuf {
    char *p;
    size_t len;
    size_t cap;
    bool oom;
};

__attribute__((format(printf, 2, 3))) static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->oom)
        return;
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *p = realloc(b->p, cap);

        if (p == NULL) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

/* Upper bound (exclusive) of bucket b in microseconds; 0 for the last. */
static uint64_t bucket_limit_us(unsigned b)
{
    return b + 1 < STATUS_LATENCY_BUCKETS ? UINT64_C(1) << b : 0;
}

/* The bucket limit below which a fraction q of the requests fall (an upper
 * bound of the quantile), in microseconds; 0 when none were counted. */
static uint64_t quantile_us(const struct status_totals *t, double q)
{
    uint64_t total = 0;
    uint64_t seen = 0;

    for (unsigned b = 0; b < STATUS_LATENCY_BUCKETS; b++)
        total += t->latency[b];
    if (total == 0)
        return 0;
    for (unsigned b = 0; b < STATUS_LATENCY_BUCKETS; b++) {
        seen += t->latency[b];
        if ((double)seen >= q * (double)total)
            return b + 1 < STATUS_LATENCY_BUCKETS ? UINT64_C(1) << b : UINT64_C(1) << (b - 1);
    }
    return UINT64_C(1) << (STATUS_LATENCY_BUCKETS - 2);
}

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
};

/* Copies the scoreboard; the slots in use may change between calls, so it
 * grows the copy until one call fits. -ENOMEM. */
static int take_scoreboard(struct cr_server *srv, struct snapshot *sn)
{
    unsigned cap = 64;

    for (;;) {
        struct cr_scoreboard_entry *e = calloc(cap, sizeof(*e));
        unsigned n;

        if (e == NULL)
            return -ENOMEM;
        n = cr_server_scoreboard(srv, e, cap);
        if (n <= cap) {
            sn->board = e;
            sn->nboard = n;
            return 0;
        }
        free(e);
        cap = n + 16;
    }
}

static void sum_scoreboard(struct snapshot *sn)
{
    struct cr_scoreboard_entry *t = &sn->board_total;

    for (unsigned i = 0; i < sn->nboard; i++) {
        const struct cr_scoreboard_entry *e = &sn->board[i];

        t->busy_threads += e->busy_threads;
        t->connections += e->connections;
        t->requests += e->requests;
        t->bytes += e->bytes;
        if (e->last_request_ns > t->last_request_ns)
            t->last_request_ns = e->last_request_ns;
        if ((unsigned)e->state < CR_WORKER_STATE_COUNT)
            sn->states[e->state]++;
    }
}

/* Reads the server (if any) and the slots. -ENOMEM. */
static int take_snapshot(const struct status *st, struct cr_server *srv, struct snapshot *sn)
{
    struct timespec ts;

    memset(sn, 0, sizeof(*sn));
    status_sum(st, &sn->t);
    sn->requests = sn->t.requests;
    clock_gettime(CLOCK_REALTIME, &ts);
    sn->now_real_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    if (srv == NULL)
        return 0;
    /* The worker count may grow between the calls (tpc); the second call
     * fills at most what was allocated. */
    unsigned n = cr_server_stats(srv, &sn->srv, NULL, 0);
    unsigned cap = n + 8;

    sn->workers = calloc(cap, sizeof(*sn->workers));
    if (sn->workers == NULL)
        return -ENOMEM;
    n = cr_server_stats(srv, &sn->srv, sn->workers, cap);
    sn->nworkers = n < cap ? n : cap;
    for (unsigned i = 0; i < sn->nworkers; i++) {
        if ((unsigned)sn->workers[i].role < CR_ROLE_COUNT)
            sn->roles[sn->workers[i].role]++;
    }
    if (take_scoreboard(srv, sn) < 0) {
        free(sn->workers);
        return -ENOMEM;
    }
    sum_scoreboard(sn);
    /* Server-wide, from the model: under the process models our own slots
     * count only this worker's, while the model's count (shared memory)
     * includes every worker, exited ones too, as do its process figures. */
    sn->requests = sn->srv.requests;
    return 0;
}

static void free_snapshot(struct snapshot *sn)
{
    free(sn->workers);
    free(sn->board);
}

/* Seconds since a wall-clock time; -1 for none. */
static double ago_s(const struct snapshot *sn, uint64_t real_ns)
{
    if (real_ns == 0)
        return -1;
    return real_ns < sn->now_real_ns ? (double)(sn->now_real_ns - real_ns) / 1e9 : 0;
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* ,"processes":...,"scoreboard":[...],"scoreboard_totals":{...} */
static void render_json_scoreboard(struct sbuf *b, const struct snapshot *sn)
{
    const struct cr_server_stats *s = &sn->srv;
    const struct cr_scoreboard_entry *t = &sn->board_total;

    sb_printf(b,
              ",\"processes\":%u,\"generation\":%u,\"restarts\":%llu,\"crashes\":%llu,"
              "\"this_process\":{\"pid\":%ld,\"requests\":%llu},\"scoreboard\":[",
              s->processes, s->generation, (unsigned long long)s->restarts,
              (unsigned long long)s->crashes, (long)getpid(), (unsigned long long)sn->t.requests);
    for (unsigned i = 0; i < sn->nboard; i++) {
        const struct cr_scoreboard_entry *e = &sn->board[i];
        double ago = ago_s(sn, e->last_request_ns);

        sb_printf(b,
                  "%s{\"pid\":%d,\"generation\":%u,\"state\":\"%s\",\"busy_threads\":%u,"
                  "\"connections\":%llu,\"requests\":%llu,\"bytes\":%llu,",
                  i ? "," : "", e->pid, e->generation, cr_worker_state_name(e->state),
                  e->busy_threads, (unsigned long long)e->connections,
                  (unsigned long long)e->requests, (unsigned long long)e->bytes);
        if (ago < 0)
            sb_printf(b, "\"last_request_s_ago\":null,");
        else
            sb_printf(b, "\"last_request_s_ago\":%.3f,", ago);
        sb_printf(b, "\"busy_ms\":%.3f}", ms(e->busy_ns));
    }
    sb_printf(b,
              "],\"scoreboard_totals\":{\"slots\":%u,\"busy_threads\":%u,\"connections\":%llu,"
              "\"requests\":%llu,\"bytes\":%llu,\"states\":{",
              sn->nboard, t->busy_threads, (unsigned long long)t->connections,
              (unsigned long long)t->requests, (unsigned long long)t->bytes);
    for (unsigned k = 0; k < CR_WORKER_STATE_COUNT; k++)
        sb_printf(b, "%s\"%s\":%u", k ? "," : "", cr_worker_state_name((enum cr_worker_state)k),
                  sn->states[k]);
    sb_printf(b, "}}");
}

/* The ids of the threads in handle set g's group, separated by sep; every
 * thread where one group leads every set (multiple leaders). */
static void render_set_threads(struct sbuf *b, const struct snapshot *sn, unsigned g,
                               const char *sep)
{
    unsigned n = 0;

    for (unsigned i = 0; i < sn->nworkers; i++) {
        unsigned wg = sn->workers[i].group;

        if (wg == g || wg == CR_WORKER_ANY_GROUP)
            sb_printf(b, "%s%u", n++ ? sep : "", i);
    }
}

static void render_json(struct sbuf *b, const struct snapshot *sn)
{
    const struct cr_server_stats *s = &sn->srv;

    sb_printf(b, "{\"server\":\"cabrank-httpd\",\"model\":\"%s\",", s->model ? s->model : "");
    if (s->promotion != NULL)
        sb_printf(b, "\"promotion\":\"%s\",", s->promotion);
    else
        sb_printf(b, "\"promotion\":null,");
    sb_printf(b,
              "\"uptime_s\":%.3f,\"accepted\":%llu,\"open_connections\":%llu,"
              "\"requests\":%llu,\"body_bytes\":%llu,\"bytes_in\":%llu,\"bytes_out\":%llu,"
              "\"promotions\":%llu,\"deferred\":%llu,\"taken_over\":%llu,"
              "\"queue_depth\":%llu,",
              (double)s->uptime_ns / 1e9, (unsigned long long)s->accepted,
              (unsigned long long)s->open_connections, (unsigned long long)sn->requests,
              (unsigned long long)sn->t.body_bytes, (unsigned long long)s->bytes_in,
              (unsigned long long)s->bytes_out, (unsigned long long)s->promotions,
              (unsigned long long)s->deferred, (unsigned long long)s->taken_over,
              (unsigned long long)s->queue_depth);
    sb_printf(b, "\"status\":{\"1xx\":%llu,\"2xx\":%llu,\"3xx\":%llu,\"4xx\":%llu,\"5xx\":%llu},",
              (unsigned long long)sn->t.classes[1], (unsigned long long)sn->t.classes[2],
              (unsigned long long)sn->t.classes[3], (unsigned long long)sn->t.classes[4],
              (unsigned long long)sn->t.classes[5]);
    sb_printf(b, "\"roles\":{");
    for (unsigned r = 0; r < CR_ROLE_COUNT; r++)
        sb_printf(b, "%s\"%s\":%u", r ? "," : "", cr_role_name((enum cr_role)r), sn->roles[r]);
    sb_printf(b, "},\"workers\":[");
    for (unsigned i = 0; i < sn->nworkers; i++) {
        const struct cr_worker_stats *w = &sn->workers[i];

        sb_printf(b, "%s{\"id\":%u,", i ? "," : "", i);
        if (w->group != CR_WORKER_ANY_GROUP)
            sb_printf(b, "\"set\":%u,", w->group);
        sb_printf(b, "\"role\":\"%s\",\"events\":%llu,\"role_ms\":{", cr_role_name(w->role),
                  (unsigned long long)w->events);
        for (unsigned r = 0; r < CR_ROLE_COUNT; r++)
            sb_printf(b, "%s\"%s\":%.3f", r ? "," : "", cr_role_name((enum cr_role)r),
                      ms(w->role_ns[r]));
        sb_printf(b, "}}");
    }
    sb_printf(b, "],\"sets\":[");
    for (unsigned g = 0; g < s->groups; g++) {
        sb_printf(b, "%s{\"set\":%u,\"accepted\":%llu,\"threads\":[", g ? "," : "", g,
                  (unsigned long long)s->group_accepted[g]);
        render_set_threads(b, sn, g, ",");
        sb_printf(b, "]}");
    }
    sb_printf(b, "],\"latency\":{\"unit\":\"us\",\"p50_le\":%llu,\"p99_le\":%llu,\"buckets\":[",
              (unsigned long long)quantile_us(&sn->t, 0.5),
              (unsigned long long)quantile_us(&sn->t, 0.99));
    for (unsigned k = 0; k < STATUS_LATENCY_BUCKETS; k++) {
        uint64_t lim = bucket_limit_us(k);

        if (lim != 0)
            sb_printf(b, "%s{\"lt\":%llu,\"count\":%llu}", k ? "," : "", (unsigned long long)lim,
                      (unsigned long long)sn->t.latency[k]);
        else
            sb_printf(b, ",{\"lt\":null,\"count\":%llu}", (unsigned long long)sn->t.latency[k]);
    }
    sb_printf(b, "]}");
    if (sn->nboard > 0)
        render_json_scoreboard(b, sn);
    sb_printf(b, "}\n");
}

static const char html_head[] =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<meta http-equiv=\"refresh\" content=\"2\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<title>cabrank-httpd status</title>\n<style>\n"
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222;background:#fafafa}\n"
    "h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.5em}\n"
    "table{border-collapse:collapse}td,th{padding:.2em .7em;border-bottom:1px solid #ddd;"
    "text-align:right}th{background:#eee}td.l,th.l{text-align:left}\n"
    ".role{font-weight:bold;padding:.1em .5em;border-radius:.3em}\n"
    ".leader{background:#ffd54f}.follower{background:#b3e5fc}.processing{background:#a5d6a7}\n"
    ".idle{background:#e0e0e0}.listener{background:#ce93d8}.stopped{background:#ef9a9a}\n"
    ".starting{background:#fff59d}.listening{background:#ffd54f}.busy{background:#a5d6a7}\n"
    ".stopping{background:#ffcc80}.dead{background:#ef9a9a}\n"
    ".bar{display:inline-block;height:.8em;background:#64b5f6}\n"
    "</style></head><body>\n<h1>cabrank-httpd status</h1>\n";

/* The process models' scoreboard: a row per slot in use, then the totals. */
static void render_html_scoreboard(struct sbuf *b, const struct snapshot *sn)
{
    const struct cr_server_stats *s = &sn->srv;
    const struct cr_scoreboard_entry *t = &sn->board_total;
    double ago;

    sb_printf(b,
              "<h2>Scoreboard</h2>\n<p id=\"processes\">%u worker processes, generation %u, "
              "%llu restarts, %llu crashes. This page was served by pid %ld, which answered "
              "%llu requests; the workers' table is that process's threads.</p>\n<p id=\"states\">",
              s->processes, s->generation, (unsigned long long)s->restarts,
              (unsigned long long)s->crashes, (long)getpid(), (unsigned long long)sn->t.requests);
    for (unsigned k = 0; k < CR_WORKER_STATE_COUNT; k++) {
        const char *name = cr_worker_state_name((enum cr_worker_state)k);

        if (sn->states[k] != 0)
            sb_printf(b, "<span class=\"role %s\">%s: %u</span> ", name, name, sn->states[k]);
    }
    sb_printf(b, "</p>\n<table id=\"scoreboard\">\n<tr><th>slot</th><th>pid</th><th>gen</th>"
                 "<th class=l>state</th><th>busy threads</th><th>connections</th>"
                 "<th>requests</th><th>bytes</th><th>last request</th><th>busy for</th></tr>\n");
    for (unsigned i = 0; i < sn->nboard; i++) {
        const struct cr_scoreboard_entry *e = &sn->board[i];
        const char *state = cr_worker_state_name(e->state);

        sb_printf(b,
                  "<tr><td>%u</td><td>%d</td><td>%u</td><td class=l><span class=\"role %s\">%s"
                  "</span></td><td>%u</td><td>%llu</td><td>%llu</td><td>%llu</td>",
                  i, e->pid, e->generation, state, state, e->busy_threads,
                  (unsigned long long)e->connections, (unsigned long long)e->requests,
                  (unsigned long long)e->bytes);
        ago = ago_s(sn, e->last_request_ns);
        if (ago < 0)
            sb_printf(b, "<td>-</td>");
        else
            sb_printf(b, "<td>%.1f s ago</td>", ago);
        if (e->state == CR_WORKER_BUSY)
            sb_printf(b, "<td>%.1f ms</td></tr>\n", ms(e->busy_ns));
        else
            sb_printf(b, "<td>-</td></tr>\n");
    }
    sb_printf(b,
              "<tr><th class=l colspan=4>total (%u slots)</th><th>%u</th><th>%llu</th>"
              "<th>%llu</th><th>%llu</th>",
              sn->nboard, t->busy_threads, (unsigned long long)t->connections,
              (unsigned long long)t->requests, (unsigned long long)t->bytes);
    ago = ago_s(sn, t->last_request_ns);
    if (ago < 0)
        sb_printf(b, "<th>-</th><th></th></tr>\n</table>\n");
    else
        sb_printf(b, "<th>%.1f s ago</th><th></th></tr>\n</table>\n", ago);
}

static void render_html(struct sbuf *b, const struct snapshot *sn)
{
    const struct cr_server_stats *s = &sn->srv;
    uint64_t most = 0;

    sb_printf(b, "%s", html_head);
    sb_printf(b, "<p>Model <b>%s</b>", s->model ? s->model : "?");
    if (s->promotion != NULL)
        sb_printf(b, " (promotion <b>%s</b>)", s->promotion);
    sb_printf(b,
              ", %u workers, up %.1f s. This page refreshes every 2 s; "
              "<a href=\"?format=json\">JSON</a>.</p>\n",
              sn->nworkers, (double)s->uptime_ns / 1e9);
    sb_printf(b, "<table id=\"counters\">\n");
    sb_printf(b, "<tr><td class=l>requests</td><td>%llu</td></tr>\n",
              (unsigned long long)sn->requests);
    sb_printf(b, "<tr><td class=l>connections accepted</td><td>%llu</td></tr>\n",
              (unsigned long long)s->accepted);
    sb_printf(b, "<tr><td class=l>open connections</td><td>%llu</td></tr>\n",
              (unsigned long long)s->open_connections);
    sb_printf(b, "<tr><td class=l>bytes in / out</td><td>%llu / %llu</td></tr>\n",
              (unsigned long long)s->bytes_in, (unsigned long long)s->bytes_out);
    sb_printf(b, "<tr><td class=l>promotions</td><td>%llu</td></tr>\n",
              (unsigned long long)s->promotions);
    if (s->deferred != 0)
        sb_printf(b,
                  "<tr><td class=l>promotions deferred / then taken over</td>"
                  "<td>%llu / %llu</td></tr>\n",
                  (unsigned long long)s->deferred, (unsigned long long)s->taken_over);
    if (s->queue_depth != 0)
        sb_printf(b, "<tr><td class=l>queue depth</td><td>%llu</td></tr>\n",
                  (unsigned long long)s->queue_depth);
    sb_printf(b,
              "<tr><td class=l>status 2xx / 3xx / 4xx / 5xx</td><td>%llu / %llu / %llu / "
              "%llu</td></tr>\n</table>\n",
              (unsigned long long)sn->t.classes[2], (unsigned long long)sn->t.classes[3],
              (unsigned long long)sn->t.classes[4], (unsigned long long)sn->t.classes[5]);

    sb_printf(b, "<h2>Workers</h2>\n<p id=\"roles\">");
    for (unsigned r = 0; r < CR_ROLE_COUNT; r++) {
        if (sn->roles[r] != 0)
            sb_printf(b, "<span class=\"role %s\">%s: %u</span> ", cr_role_name((enum cr_role)r),
                      cr_role_name((enum cr_role)r), sn->roles[r]);
    }
    sb_printf(b, "</p>\n");
    if (s->groups > 0) {
        sb_printf(b, "<table id=\"sets\">\n<tr><th>handle set</th><th>connections accepted</th>"
                     "<th class=l>threads</th></tr>\n");
        for (unsigned g = 0; g < s->groups; g++) {
            sb_printf(b, "<tr><td>%u</td><td>%llu</td><td class=l>", g,
                      (unsigned long long)s->group_accepted[g]);
            render_set_threads(b, sn, g, " ");
            sb_printf(b, "</td></tr>\n");
        }
        sb_printf(b, "</table>\n");
    }
    sb_printf(b,
              "<table id=\"workers\">\n<tr><th>#</th>%s<th class=l>role now</th>"
              "<th>events</th>",
              s->groups > 0 ? "<th>set</th>" : "");
    for (unsigned r = 0; r < CR_ROLE_COUNT; r++)
        sb_printf(b, "<th>%s ms</th>", cr_role_name((enum cr_role)r));
    sb_printf(b, "</tr>\n");
    for (unsigned i = 0; i < sn->nworkers; i++) {
        const struct cr_worker_stats *w = &sn->workers[i];
        const char *role = cr_role_name(w->role);

        sb_printf(b, "<tr><td>%u</td>", i);
        if (s->groups > 0 && w->group == CR_WORKER_ANY_GROUP)
            sb_printf(b, "<td>any</td>");
        else if (s->groups > 0)
            sb_printf(b, "<td>%u</td>", w->group);
        sb_printf(b, "<td class=l><span class=\"role %s\">%s</span></td><td>%llu</td>", role, role,
                  (unsigned long long)w->events);
        for (unsigned r = 0; r < CR_ROLE_COUNT; r++)
            sb_printf(b, "<td>%.1f</td>", ms(w->role_ns[r]));
        sb_printf(b, "</tr>\n");
    }
    sb_printf(b, "</table>\n");

    if (sn->nboard > 0)
        render_html_scoreboard(b, sn);
    sb_printf(b,
              "<h2>Service latency%s</h2>\n<p>From the first byte of a request to its answer "
              "queued; p50 &le; %llu us, p99 &le; %llu us.</p>\n"
              "<table id=\"latency\">\n<tr><th class=l>latency</th><th>requests</th>"
              "<th class=l></th></tr>\n",
              sn->nboard > 0 ? " (this worker process)" : "",
              (unsigned long long)quantile_us(&sn->t, 0.5),
              (unsigned long long)quantile_us(&sn->t, 0.99));
    for (unsigned k = 0; k < STATUS_LATENCY_BUCKETS; k++)
        most = sn->t.latency[k] > most ? sn->t.latency[k] : most;
    for (unsigned k = 0; k < STATUS_LATENCY_BUCKETS; k++) {
        uint64_t lim = bucket_limit_us(k);
        unsigned width = most != 0 ? (unsigned)(sn->t.latency[k] * 300 / most) : 0;

        if (sn->t.latency[k] == 0)
            continue;
        if (lim != 0)
            sb_printf(b, "<tr><td class=l>&lt; %llu us</td>", (unsigned long long)lim);
        else
            sb_printf(b, "<tr><td class=l>&ge; %llu us</td>",
                      (unsigned long long)(UINT64_C(1) << (STATUS_LATENCY_BUCKETS - 2)));
        sb_printf(b,
                  "<td>%llu</td><td class=l><span class=bar style=\"width:%upx\"></span></td>"
                  "</tr>\n",
                  (unsigned long long)sn->t.latency[k], width);
    }
    sb_printf(b, "</table>\n<p><a href=\"/\">cabrank</a></p>\n</body></html>\n");
}

int status_render(const struct status *st, struct cr_server *srv, bool json, char **out,
                  size_t *len)
{
    struct snapshot sn;
    struct sbuf b = {0};

    *out = NULL;
    *len = 0;
    if (take_snapshot(st, srv, &sn) < 0)
        return -ENOMEM;
    b.cap = 4096 + (size_t)sn.nworkers * (json ? 200 : 300) + (size_t)sn.nboard * 300;
    b.p = malloc(b.cap);
    if (b.p == NULL) {
        free_snapshot(&sn);
        return -ENOMEM;
    }
    if (json)
        render_json(&b, &sn);
    else
        render_html(&b, &sn);
    free_snapshot(&sn);
    if (b.oom) {
        free(b.p);
        return -ENOMEM;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}
