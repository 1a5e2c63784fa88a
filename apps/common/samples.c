/*
 * samples.c - latency samples and their percentiles (samples.h). Nearest rank on the sorted
 * samples: exact, and cheap at the counts one point produces (a few million at most).
 */
#include "samples.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLES_MAX ((size_t)64 << 20)

int bench_samples_add(struct bench_samples *s, uint64_t ns)
{
    if (s->len == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        uint64_t *v;

        if (s->len >= SAMPLES_MAX)
            return 0;
        v = realloc(s->v, cap * sizeof(*v));
        if (v == NULL)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->len++] = ns;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* The q-quantile's sample (nearest rank: the smallest with at least q of them at or below). */
static double rank_us(const struct bench_samples *s, double q)
{
    size_t k = (size_t)ceil(q * (double)s->len);

    k = k == 0 ? 0 : k - 1;
    if (k >= s->len)
        k = s->len - 1;
    return (double)s->v[k] / 1e3;
}

struct bench_pcts bench_samples_pcts(struct bench_samples *s)
{
    struct bench_pcts p = {NAN, NAN, NAN, NAN};

    if (s->len == 0)
        return p;
    qsort(s->v, s->len, sizeof(*s->v), cmp_u64);
    p.p50_us = rank_us(s, 0.50);
    p.p90_us = rank_us(s, 0.90);
    p.p99_us = rank_us(s, 0.99);
    p.p999_us = rank_us(s, 0.999);
    return p;
}

void bench_samples_fini(struct bench_samples *s)
{
    if (s == NULL)
        return;
    free(s->v);
    memset(s, 0, sizeof(*s));
}
