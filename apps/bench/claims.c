/*
 * claims.c - the papers' claims that cabrank-bench checks: what the Leader/Followers,
 * Half-Sync/Half-Reactive, Proactor and pattern papers (and cabrank's own deferred promotion)
 * say about which architecture wins when, as ratios of cabrank rows (peers' rows are ignored),
 * and the judge that turns a claim's repeated ratios into a verdict. Each claim compares two
 * series of one workload at one concurrency: the lowest both measured for "at low load"
 * claims, the highest both measured for throughput ones. The k-th row of a series at that
 * point is its k-th repetition (the driver repeats the sweep, alternating the order of the
 * configurations), paired with the other side's k-th. Called by report_claims.c, main.c and
 * the unit tests; single-threaded, no state.
 */
#include "report_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *bench_verdict_name(enum bench_verdict v)
{
    switch (v) {
    case BENCH_HELD:
        return "held";
    case BENCH_NOT_HELD:
        return "not held";
    case BENCH_NOT_SEPARABLE:
        return "not separable";
    case BENCH_NOT_MEASURED:
        break;
    }
    return "not measured";
}

static int compare_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa;
    double b = *(const double *)pb;

    return a < b ? -1 : a > b;
}

/* The median of v[0..n) (sorted in place); NAN when n is 0. */
static double median(double *v, size_t n)
{
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof(v[0]), compare_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void bench_claim_judge(const double *ratios, size_t n, double threshold, struct bench_claim *out)
{
    double v[BENCH_REPEAT_MAX];

    out->threshold = threshold;
    out->reps = 0;
    out->ratio = out->lo = out->hi = NAN;
    out->verdict = BENCH_NOT_MEASURED;
    for (size_t i = 0; i < n && out->reps < BENCH_REPEAT_MAX; i++) {
        if (isfinite(ratios[i]))
            v[out->reps++] = ratios[i];
    }
    if (out->reps == 0)
        return;
    out->ratio = median(v, out->reps);
    out->lo = v[0];
    out->hi = v[out->reps - 1];
    /* The whole spread past the threshold, each way; a tie is on neither side. */
    if (out->reps < BENCH_CLAIM_MIN_REPS)
        out->verdict = BENCH_NOT_SEPARABLE;
    else if (out->lo > threshold)
        out->verdict = BENCH_HELD;
    else if (out->hi < threshold)
        out->verdict = BENCH_NOT_HELD;
    else
        out->verdict = BENCH_NOT_SEPARABLE;
}

/* Which end of the concurrency range a claim is about. */
enum load {
    LOW_LOAD,
    HIGH_LOAD,
};

/* The metric a claim compares. */
enum metric {
    RPS, /* req/s: higher is better */
    P50, /* p50 latency: lower is better */
};

/* A config pattern: "lf:lifo" matches exactly, "proactor:*" any config with that prefix. */
static bool config_matches(const char *config, const char *pattern)
{
    size_t n = strlen(pattern);

    if (n > 0 && pattern[n - 1] == '*')
        return strncmp(config, pattern, n - 1) == 0;
    return strcmp(config, pattern) == 0;
}

/* The value of r for metric m, NAN when not measured (or 0 req/s, nothing served). */
static double value(const struct bench_row *r, enum metric m)
{
    double v = m == RPS ? r->rps : r->p50_us;

    return isnan(v) || v <= 0 ? NAN : v;
}

/* One side of a claim at a point: its config and its repetitions' values in run order, and
 * which of them ran on a noisy machine. */
struct side {
    const char *config;
    double v[BENCH_REPEAT_MAX];
    bool noisy[BENCH_REPEAT_MAX];
    size_t n;
};

/* The repetitions of cabrank's config on workload at concurrency c, in run order. */
static void repetitions(const struct bench_rows *rows, const char *workload, const char *config,
                        unsigned c, enum metric m, struct side *s)
{
    s->config = config;
    s->n = 0;
    for (size_t i = 0; i < rows->len && s->n < BENCH_REPEAT_MAX; i++) {
        const struct bench_row *r = &rows->v[i];
        double v = value(r, m);

        if (r->concurrency == c && !isnan(v) && strcmp(r->server, "cabrank") == 0 &&
            strcmp(r->workload, workload) == 0 && strcmp(r->config, config) == 0) {
            s->noisy[s->n] = r->noisy == 1;
            s->v[s->n++] = v;
        }
    }
}

/* The median of s's values, oriented so that larger is better. */
static double merit(const struct side *s, enum metric m)
{
    double v[BENCH_REPEAT_MAX];
    double med;

    memcpy(v, s->v, s->n * sizeof(v[0]));
    med = median(v, s->n);
    return m == RPS ? med : -med;
}

/*
 * The side of patterns (tried in order: the first pattern with a row at concurrency c wins) on
 * workload at c: of the configs matching it, the one with the best median. False when none.
 */
static bool side_at(const struct bench_rows *rows, const char *workload,
                    const char *const *patterns, unsigned c, enum metric m, struct side *out)
{
    for (const char *const *p = patterns; *p != NULL; p++) {
        bool found = false;

        for (size_t i = 0; i < rows->len; i++) {
            const struct bench_row *r = &rows->v[i];
            struct side s;

            if (r->concurrency != c || isnan(value(r, m)) || strcmp(r->server, "cabrank") != 0 ||
                strcmp(r->workload, workload) != 0 || !config_matches(r->config, *p) ||
                (found && strcmp(r->config, out->config) == 0))
                continue;
            repetitions(rows, workload, r->config, c, m, &s);
            if (!found || merit(&s, m) > merit(out, m))
                *out = s;
            found = true;
        }
        if (found)
            return true;
    }
    return false;
}

struct claim_def {
    const char *claim;
    const char *metric;
    double threshold;
    const char *const *workloads; /* tried in order: the first where both sides exist */
    const char *const *a;         /* the side the claim favours */
    const char *const *b;
    enum metric m;
    enum load load;
};

static const char *const wl_load[] = {"line", "http:hello.txt", NULL};
static const char *const wl_t_conn[] = {"interval:t_conn", NULL};
static const char *const wl_t_res1[] = {"interval:t_res1", NULL};
static const char *const cfg_lf[] = {"lf:lifo", "lf", "lf:lifo+defer", NULL};
static const char *const cfg_hshr[] = {"hshr", "hshr:*", NULL};
static const char *const cfg_lifo[] = {"lf:lifo", NULL};
static const char *const cfg_fifo[] = {"lf:fifo", NULL};
static const char *const cfg_defer[] = {"lf:lifo+defer", NULL};
static const char *const cfg_forking[] = {"forking", "forking:*", NULL};
static const char *const cfg_prefork[] = {"prefork", "prefork:*", NULL};
static const char *const cfg_proactor[] = {"proactor:*", "proactor", NULL};

/*
 * For an interval, the favoured side is the cheaper one, so the ratio is b over a and "held"
 * means a costs less: forking's claim is stated as prefork being cheaper. LIFO against FIFO
 * compares the orders with nothing else changed (neither defers promotion); the deferral is its
 * own claim, on the same order.
 */
static const struct claim_def defs[BENCH_CLAIMS] = {
    {"L/F has lower latency than HS/HR at low load (no hand-off between threads)", "p50 hshr / lf",
     1.25, wl_load, cfg_lf, cfg_hshr, P50, LOW_LOAD},
    {"L/F has at least HS/HR's throughput at high load", "req/s lf / hshr", 1.0, wl_load, cfg_lf,
     cfg_hshr, RPS, HIGH_LOAD},
    {"LIFO promotion beats FIFO (the warm thread leads again; neither deferred)",
     "req/s lf:lifo / lf:fifo", 1.0, wl_load, cfg_lifo, cfg_fifo, RPS, HIGH_LOAD},
    {"Deferring promotion (lifo) beats promoting before every event",
     "req/s lf:lifo+defer / lf:lifo", 1.0, wl_load, cfg_defer, cfg_lifo, RPS, HIGH_LOAD},
    {"A prefork pool connects faster than forking a process per connection (t_conn)",
     "t_conn p50 forking / prefork", 1.0, wl_t_conn, cfg_prefork, cfg_forking, P50, LOW_LOAD},
    {"A prefork pool answers the first request faster than forking (t_res1)",
     "t_res1 p50 forking / prefork", 1.0, wl_t_res1, cfg_prefork, cfg_forking, P50, LOW_LOAD},
    {"The Proactor serves at least L/F's throughput", "req/s proactor / lf:lifo", 1.0, wl_load,
     cfg_proactor, cfg_lifo, RPS, HIGH_LOAD},
};

/*
 * The concurrency to compare at: the lowest (LOW_LOAD) or highest (HIGH_LOAD) at which both
 * sides have a measured value in workload. 0 when there is none.
 */
static unsigned common_concurrency(const struct bench_rows *rows, const char *workload,
                                   const struct claim_def *d)
{
    unsigned pick = 0;

    for (size_t i = 0; i < rows->len; i++) {
        unsigned c = rows->v[i].concurrency;
        struct side a;
        struct side b;

        if (strcmp(rows->v[i].workload, workload) != 0 || c == pick)
            continue;
        if (pick != 0 && (d->load == LOW_LOAD ? c > pick : c < pick))
            continue;
        if (side_at(rows, workload, d->a, c, d->m, &a) &&
            side_at(rows, workload, d->b, c, d->m, &b))
            pick = c;
    }
    return pick;
}

static void eval_one(const struct bench_rows *rows, const struct claim_def *d,
                     struct bench_claim *out)
{
    memset(out, 0, sizeof(*out));
    out->claim = d->claim;
    out->metric = d->metric;
    bench_claim_judge(NULL, 0, d->threshold, out);
    snprintf(out->where, sizeof(out->where), "no rows of both sides");
    for (const char *const *w = d->workloads; *w != NULL; w++) {
        unsigned c = common_concurrency(rows, *w, d);
        double ratios[BENCH_REPEAT_MAX];
        struct side a;
        struct side b;
        size_t n;

        if (c == 0 || !side_at(rows, *w, d->a, c, d->m, &a) ||
            !side_at(rows, *w, d->b, c, d->m, &b))
            continue;
        n = a.n < b.n ? a.n : b.n;
        for (size_t k = 0; k < n; k++)
            ratios[k] = d->m == RPS ? a.v[k] / b.v[k] : b.v[k] / a.v[k];
        bench_claim_judge(ratios, n, d->threshold, out);
        /* A noisy repetition is weaker evidence: the report says how many there were. */
        for (size_t k = 0; k < n; k++)
            out->noisy += isfinite(ratios[k]) && (a.noisy[k] || b.noisy[k]);
        snprintf(out->where, sizeof(out->where), "%s, %u conn%s, %s vs %s", *w, c,
                 c == 1 ? "" : "s", a.config, b.config);
        return;
    }
}

void bench_claims_eval(const struct bench_rows *rows, struct bench_claim out[BENCH_CLAIMS])
{
    for (size_t i = 0; i < BENCH_CLAIMS; i++)
        eval_one(rows, &defs[i], &out[i]);
}

bool bench_claims_use_config(const char *config)
{
    for (size_t i = 0; i < BENCH_CLAIMS; i++) {
        for (const char *const *p = defs[i].a; *p != NULL; p++)
            if (config_matches(config, *p))
                return true;
        for (const char *const *p = defs[i].b; *p != NULL; p++)
            if (config_matches(config, *p))
                return true;
    }
    return false;
}

bool bench_claims_use_workload(const char *workload)
{
    size_t len = strlen(workload);

    for (size_t i = 0; i < BENCH_CLAIMS; i++) {
        for (const char *const *w = defs[i].workloads; *w != NULL; w++)
            if (strncmp(*w, workload, len) == 0 && ((*w)[len] == '\0' || (*w)[len] == ':'))
                return true;
    }
    return false;
}
