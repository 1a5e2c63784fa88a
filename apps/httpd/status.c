/*
 * status.c - the per-worker counters and the status page (status.h).
 * status_record runs on the serving threads; status_render on whichever
 * thread serves a status request. Owns the slots; reads the server's stats
 * through cr_server_stats(), which is safe at any time.
 */
#include "status.h"

#include <cabrank/server.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    struct status_totals t;
};

/* Reads the server (if any) and the slots. -ENOMEM. */
static int take_snapshot(const struct status *st, struct cr_server *srv, struct snapshot *sn)
{
    memset(sn, 0, sizeof(*sn));
    status_sum(st, &sn->t);
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
    return 0;
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
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
              "\"promotions\":%llu,\"queue_depth\":%llu,",
              (double)s->uptime_ns / 1e9, (unsigned long long)s->accepted,
              (unsigned long long)s->open_connections, (unsigned long long)sn->t.requests,
              (unsigned long long)sn->t.body_bytes, (unsigned long long)s->bytes_in,
              (unsigned long long)s->bytes_out, (unsigned long long)s->promotions,
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

        sb_printf(b, "%s{\"id\":%u,\"role\":\"%s\",\"events\":%llu,\"role_ms\":{", i ? "," : "", i,
                  cr_role_name(w->role), (unsigned long long)w->events);
        for (unsigned r = 0; r < CR_ROLE_COUNT; r++)
            sb_printf(b, "%s\"%s\":%.3f", r ? "," : "", cr_role_name((enum cr_role)r),
                      ms(w->role_ns[r]));
        sb_printf(b, "}}");
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
    sb_printf(b, "]}}\n");
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
    ".bar{display:inline-block;height:.8em;background:#64b5f6}\n"
    "</style></head><body>\n<h1>cabrank-httpd status</h1>\n";

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
              (unsigned long long)sn->t.requests);
    sb_printf(b, "<tr><td class=l>connections accepted</td><td>%llu</td></tr>\n",
              (unsigned long long)s->accepted);
    sb_printf(b, "<tr><td class=l>open connections</td><td>%llu</td></tr>\n",
              (unsigned long long)s->open_connections);
    sb_printf(b, "<tr><td class=l>bytes in / out</td><td>%llu / %llu</td></tr>\n",
              (unsigned long long)s->bytes_in, (unsigned long long)s->bytes_out);
    sb_printf(b, "<tr><td class=l>promotions</td><td>%llu</td></tr>\n",
              (unsigned long long)s->promotions);
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
    sb_printf(b, "</p>\n<table id=\"workers\">\n<tr><th>#</th><th class=l>role now</th>"
                 "<th>events</th>");
    for (unsigned r = 0; r < CR_ROLE_COUNT; r++)
        sb_printf(b, "<th>%s ms</th>", cr_role_name((enum cr_role)r));
    sb_printf(b, "</tr>\n");
    for (unsigned i = 0; i < sn->nworkers; i++) {
        const struct cr_worker_stats *w = &sn->workers[i];
        const char *role = cr_role_name(w->role);

        sb_printf(b,
                  "<tr><td>%u</td><td class=l><span class=\"role %s\">%s</span></td><td>%llu</td>",
                  i, role, role, (unsigned long long)w->events);
        for (unsigned r = 0; r < CR_ROLE_COUNT; r++)
            sb_printf(b, "<td>%.1f</td>", ms(w->role_ns[r]));
        sb_printf(b, "</tr>\n");
    }
    sb_printf(b, "</table>\n");

    sb_printf(b,
              "<h2>Service latency</h2>\n<p>From the first byte of a request to its answer "
              "queued; p50 &le; %llu us, p99 &le; %llu us.</p>\n"
              "<table id=\"latency\">\n<tr><th class=l>latency</th><th>requests</th>"
              "<th class=l></th></tr>\n",
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
    b.cap = 4096 + (size_t)sn.nworkers * (json ? 200 : 300);
    b.p = malloc(b.cap);
    if (b.p == NULL) {
        free(sn.workers);
        return -ENOMEM;
    }
    if (json)
        render_json(&b, &sn);
    else
        render_html(&b, &sn);
    free(sn.workers);
    if (b.oom) {
        free(b.p);
        return -ENOMEM;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}
