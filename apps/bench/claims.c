/*
 * claims.c - the papers' claims that cabrank-bench checks: what the Leader/Followers,
 * Half-Sync/Half-Reactive, Proactor and pattern papers say about which architecture wins when,
 * as ratios of cabrank rows (peers' rows are ignored). Each claim compares two series of one
 * workload at one concurrency: the lowest both measured for "at low load" claims, the highest
 * both measured for throughput ones. Called by report_md.c and the unit tests; single-threaded,
 * no state.
 */
#include "report_internal.h"

#include <math.h>
#include <string.h>

const char *bench_verdict_name(enum bench_verdict v)
{
    switch (v) {
    case BENCH_HELD:
        return "held";
    case BENCH_NOT_HELD:
        return "did not hold";
    case BENCH_NOT_MEASURED:
        break;
    }
    return "not measured";
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

static bool is_better(double a, double b, enum metric m)
{
    return m == RPS ? a > b : a < b;
}

/*
 * The best value among cabrank rows of workload matching any of the patterns (tried in order:
 * the first pattern with a row at concurrency c wins) at concurrency c; *config returns its
 * config. NAN when none.
 */
static double best_at(const struct bench_rows *rows, const char *workload,
                      const char *const *patterns, unsigned c, enum metric m, const char **config)
{
    for (const char *const *p = patterns; *p != NULL; p++) {
        double best = NAN;

        for (size_t i = 0; i < rows->len; i++) {
            const struct bench_row *r = &rows->v[i];
            double v = value(r, m);

            if (r->concurrency != c || isnan(v) || strcmp(r->server, "cabrank") != 0 ||
                strcmp(r->workload, workload) != 0 || !config_matches(r->config, *p))
                continue;
            if (isnan(best) || is_better(v, best, m)) {
                best = v;
                *config = r->config;
            }
        }
        if (!isnan(best))
            return best;
    }
    return NAN;
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
static const char *const cfg_lf[] = {"lf:lifo", "lf", NULL};
static const char *const cfg_hshr[] = {"hshr", "hshr:*", NULL};
static const char *const cfg_lifo[] = {"lf:lifo", NULL};
static const char *const cfg_fifo[] = {"lf:fifo", NULL};
static const char *const cfg_forking[] = {"forking", "forking:*", NULL};
static const char *const cfg_prefork[] = {"prefork", "prefork:*", NULL};
static const char *const cfg_proactor[] = {"proactor:*", "proactor", NULL};

/*
 * For an interval, the favoured side is the cheaper one, so the ratio is b over a and "held"
 * means a costs less: forking's claim is stated as prefork being cheaper.
 */
static const struct claim_def defs[BENCH_CLAIMS] = {
    {"L/F has lower latency than HS/HR at low load (no hand-off between threads)", "p50 hshr / lf",
     1.25, wl_load, cfg_lf, cfg_hshr, P50, LOW_LOAD},
    {"L/F has at least HS/HR's throughput at high load", "req/s lf / hshr", 1.0, wl_load, cfg_lf,
     cfg_hshr, RPS, HIGH_LOAD},
    {"LIFO promotion beats FIFO (the warm thread leads again)", "req/s lf:lifo / lf:fifo", 1.0,
     wl_load, cfg_lifo, cfg_fifo, RPS, HIGH_LOAD},
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
        const char *ca;
        const char *cb;

        if (strcmp(rows->v[i].workload, workload) != 0 || c == pick)
            continue;
        if (pick != 0 && (d->load == LOW_LOAD ? c > pick : c < pick))
            continue;
        if (!isnan(best_at(rows, workload, d->a, c, d->m, &ca)) &&
            !isnan(best_at(rows, workload, d->b, c, d->m, &cb)))
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
    out->threshold = d->threshold;
    out->ratio = NAN;
    out->verdict = BENCH_NOT_MEASURED;
    snprintf(out->where, sizeof(out->where), "no rows of both sides");
    for (const char *const *w = d->workloads; *w != NULL; w++) {
        unsigned c = common_concurrency(rows, *w, d);
        const char *ca = "";
        const char *cb = "";
        double a;
        double b;

        if (c == 0)
            continue;
        a = best_at(rows, *w, d->a, c, d->m, &ca);
        b = best_at(rows, *w, d->b, c, d->m, &cb);
        out->ratio = d->m == RPS ? a / b : b / a;
        out->verdict = out->ratio >= d->threshold ? BENCH_HELD : BENCH_NOT_HELD;
        snprintf(out->where, sizeof(out->where), "%s, %u conn%s, %s vs %s", *w, c,
                 c == 1 ? "" : "s", ca, cb);
        return;
    }
}

void bench_claims_eval(const struct bench_rows *rows, struct bench_claim out[BENCH_CLAIMS])
{
    for (size_t i = 0; i < BENCH_CLAIMS; i++)
        eval_one(rows, &defs[i], &out[i]);
}
