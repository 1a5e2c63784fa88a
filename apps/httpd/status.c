/*
 * status.c - the per-worker counters, the rate samples and the page's
 * snapshot (status.h). status_record runs on the serving threads;
 * status_render on whichever thread serves a status request, which takes
 * the snapshot here and hands it to one renderer (status_page.c,
 * status_json.c, status_prometheus.c). Owns the slots, the rate ring and
 * the connection registry's shards (walked by status_conns.c); reads the
 * server's stats through cr_server_stats() and the scoreboard through
 * cr_server_scoreboard(), both safe at any time and from any process.
 *
 * Under the process models the slots are the serving process's own (the
 * service runs in worker processes), so the page's server-wide request
 * count comes from cr_server_stats, which the model keeps in shared memory;
 * the status classes and the latency histogram are this worker's, and the
 * page says so. The rates are of server-wide counters in every model.
 */
#include "status_internal.h"

#include <cabrank/clock.h>
#include <cabrank/server.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct slot {
    /* Relaxed atomics (see status.h). */
    uint64_t requests;
    uint64_t body_bytes;
    uint64_t classes[6];
    uint64_t latency[STATUS_LATENCY_BUCKETS];
    uint64_t latency_sum_ns;
} __attribute__((aligned(STATUS_CACHE_LINE)));

struct sample {
    uint64_t t_ns;
    uint64_t counts[STATUS_RATES];
};

struct status {
    /* Immutable after create. */
    unsigned nslots;
    struct slot *slots;
    struct status_shard shards[STATUS_CONN_SHARDS];
    pthread_mutex_t ring_lock;
    /* Protected by ring_lock: the samples, oldest at ring[first]. */
    struct sample ring[STATUS_SAMPLES];
    unsigned first;
    unsigned nsamples;
};

int status_create(struct status **out, unsigned slots)
{
    struct status *st;

    *out = NULL;
    st = aligned_alloc(STATUS_CACHE_LINE, sizeof(*st));
    if (st == NULL)
        return -ENOMEM;
    memset(st, 0, sizeof(*st));
    st->nslots = slots != 0 ? slots : 1;
    st->slots = aligned_alloc(STATUS_CACHE_LINE, st->nslots * sizeof(*st->slots));
    if (st->slots == NULL) {
        free(st);
        return -ENOMEM;
    }
    memset(st->slots, 0, st->nslots * sizeof(*st->slots));
    for (unsigned i = 0; i < STATUS_CONN_SHARDS; i++)
        pthread_mutex_init(&st->shards[i].lock, NULL);
    pthread_mutex_init(&st->ring_lock, NULL);
    *out = st;
    return 0;
}

void status_destroy(struct status *st)
{
    if (st == NULL)
        return;
    for (unsigned i = 0; i < STATUS_CONN_SHARDS; i++)
        pthread_mutex_destroy(&st->shards[i].lock);
    pthread_mutex_destroy(&st->ring_lock);
    free(st->slots);
    free(st);
}

struct status_shard *status_shards(struct status *st)
{
    return st->shards;
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
    add(&s->latency_sum_ns, latency_ns);
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
        t->latency_sum_ns += __atomic_load_n(&s->latency_sum_ns, __ATOMIC_RELAXED);
    }
}

/* ------------------------------------------------------------------ rates */

static const struct sample *ring_at(const struct status *st, unsigned i)
{
    return &st->ring[(st->first + i) % STATUS_SAMPLES];
}

/* Per second from a to b, each counter; a counter that went down (a process
 * model's restarted count) gives 0. */
static void per_second(const struct sample *a, const struct sample *b, double *out)
{
    double dt = (double)(b->t_ns - a->t_ns) / 1e9;

    for (unsigned k = 0; k < STATUS_RATES; k++)
        out[k] =
            dt > 0 && b->counts[k] >= a->counts[k] ? (double)(b->counts[k] - a->counts[k]) / dt : 0;
}

void status_rates_update(struct status *st, uint64_t now_ns, uint64_t start_ns,
                         const uint64_t counts[STATUS_RATES], struct status_rates *r)
{
    struct sample now = {.t_ns = now_ns};
    const struct sample *base = NULL;
    double tmp[STATUS_RATES];

    memcpy(now.counts, counts, sizeof(now.counts));
    memset(r, 0, sizeof(*r));
    pthread_mutex_lock(&st->ring_lock);
    /* Two renders may read the clock in one order and lock in the other. */
    if (st->nsamples > 0 && now_ns < ring_at(st, st->nsamples - 1)->t_ns)
        now_ns = now.t_ns = ring_at(st, st->nsamples - 1)->t_ns;
    if (st->nsamples == 0 && start_ns != 0 && start_ns < now_ns)
        st->ring[st->nsamples++] = (struct sample){.t_ns = start_ns};
    if (st->nsamples == 0 || now_ns - ring_at(st, st->nsamples - 1)->t_ns >= CR_NSEC_PER_SEC) {
        if (st->nsamples == STATUS_SAMPLES) {
            st->first = (st->first + 1) % STATUS_SAMPLES;
            st->nsamples--;
        }
        st->ring[(st->first + st->nsamples++) % STATUS_SAMPLES] = now;
    }
    /* The current rates: since the newest sample a second old or more, or
     * else the oldest. */
    for (unsigned i = st->nsamples; i-- > 0;) {
        base = ring_at(st, i);
        if (now_ns - base->t_ns >= CR_NSEC_PER_SEC)
            break;
    }
    if (base != NULL && base->t_ns < now_ns) {
        r->window_s = (double)(now_ns - base->t_ns) / 1e9;
        per_second(base, &now, r->per_s);
    }
    r->span_s = (double)(now_ns - ring_at(st, 0)->t_ns) / 1e9;
    for (unsigned i = 1; i < st->nsamples; i++) {
        const struct sample *a = ring_at(st, i - 1);
        const struct sample *b = ring_at(st, i);

        per_second(a, b, tmp);
        r->t_s[r->points] = -(double)(now_ns - b->t_ns) / 1e9;
        for (unsigned k = 0; k < STATUS_RATES; k++)
            r->series[k][r->points] = tmp[k];
        r->points++;
    }
    pthread_mutex_unlock(&st->ring_lock);
}

/* ------------------------------------------------------------------ output */

void status_sb_printf(struct sbuf *b, const char *fmt, ...)
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

void status_sb_escape(struct sbuf *b, const char *s, size_t len, bool json)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (json && (ch == '"' || ch == '\\'))
            status_sb_printf(b, "\\%c", ch);
        else if (json && (ch < 0x20 || ch >= 0x7f))
            status_sb_printf(b, "\\u%04x", ch);
        else if (!json && (ch == '<' || ch == '>' || ch == '&' || ch == '"' || ch == '\''))
            status_sb_printf(b, "&#%u;", ch);
        else if (!json && (ch < 0x20 || ch >= 0x7f))
            status_sb_printf(b, "?");
        else
            status_sb_printf(b, "%c", ch);
    }
}

uint64_t status_bucket_limit_us(unsigned b)
{
    return b + 1 < STATUS_LATENCY_BUCKETS ? UINT64_C(1) << b : 0;
}

uint64_t status_quantile_us(const struct status_totals *t, double q)
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

double status_ago_s(const struct snapshot *sn, uint64_t real_ns)
{
    if (real_ns == 0)
        return -1;
    return real_ns < sn->now_real_ns ? (double)(sn->now_real_ns - real_ns) / 1e9 : 0;
}

void status_iso8601(uint64_t real_ns, char *buf, size_t cap)
{
    time_t sec = (time_t)(real_ns / CR_NSEC_PER_SEC);
    struct tm tm;

    if (gmtime_r(&sec, &tm) == NULL || strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, cap, "?");
}

void status_render_set_threads(struct sbuf *b, const struct snapshot *sn, unsigned g,
                               const char *sep)
{
    unsigned n = 0;

    for (unsigned i = 0; i < sn->nworkers; i++) {
        unsigned wg = sn->workers[i].group;

        if (wg == g || wg == CR_WORKER_ANY_GROUP)
            status_sb_printf(b, "%s%u", n++ ? sep : "", i);
    }
}

/* ------------------------------------------------------------------ snapshot */

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

/* Reads the server (if any). -ENOMEM. */
static int take_server(struct cr_server *srv, struct snapshot *sn)
{
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
    if (take_scoreboard(srv, sn) < 0)
        return -ENOMEM;
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
    free(sn->conns);
}

/* Reads the server (if any), the slots, the connections, and takes a rate
 * sample. -ENOMEM. */
static int take_snapshot(struct status *st, struct cr_server *srv, struct snapshot *sn)
{
    uint64_t now = cr_clock_now_ns();
    uint64_t start = 0;
    uint64_t counts[STATUS_RATES];

    memset(sn, 0, sizeof(*sn));
    status_sum(st, &sn->t);
    sn->requests = sn->t.requests;
    sn->now_real_ns = cr_clock_wall_ns();
    if (srv != NULL && take_server(srv, sn) < 0)
        return -ENOMEM;
    if (srv != NULL && sn->srv.uptime_ns <= now) {
        start = now - sn->srv.uptime_ns;
        sn->start_real_ns = sn->now_real_ns - sn->srv.uptime_ns;
    }
    counts[STATUS_RATE_REQUESTS] = sn->requests;
    counts[STATUS_RATE_BYTES] = srv != NULL ? sn->srv.bytes_out : sn->t.body_bytes;
    counts[STATUS_RATE_CONNECTIONS] = sn->srv.accepted;
    status_rates_update(st, now, start, counts, &sn->rates);
    sn->conns = calloc(STATUS_CONNS_LISTED, sizeof(*sn->conns));
    if (sn->conns == NULL)
        return -ENOMEM;
    sn->nconns = status_conns_copy(st, sn->conns, STATUS_CONNS_LISTED, &sn->conns_total, now);
    return 0;
}

int status_render(struct status *st, struct cr_server *srv, enum status_format f, char **out,
                  size_t *len)
{
    struct snapshot sn;
    struct sbuf b = {0};

    *out = NULL;
    *len = 0;
    if (take_snapshot(st, srv, &sn) < 0) {
        free_snapshot(&sn);
        return -ENOMEM;
    }
    b.cap = 8192 + (size_t)sn.nworkers * 300 + (size_t)sn.nboard * 300 + (size_t)sn.nconns * 300;
    b.p = malloc(b.cap);
    if (b.p == NULL) {
        free_snapshot(&sn);
        return -ENOMEM;
    }
    if (f == STATUS_JSON)
        status_render_json(&b, &sn);
    else if (f == STATUS_PROMETHEUS)
        status_render_prometheus(&b, &sn);
    else
        status_render_html(&b, &sn);
    free_snapshot(&sn);
    if (b.oom) {
        free(b.p);
        return -ENOMEM;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}
