/*
 * report_rows.c - the grouping helpers every writer of cabrank-bench's report shares
 * (report_internal.h): which rows form a series, the workloads of a run, one workload's rows
 * in table order, a workload's scaling over core counts, the rows of one core count. Called by
 * report_md.c, plot_svg.c and claims.c; single-threaded; allocates only the arrays it returns,
 * whose pointers borrow the rows (bench__rows_at_cores() copies them).
 */
#include "report_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool bench__is_interval(const char *workload)
{
    return strncmp(workload, "interval:", 9) == 0;
}

bool bench__same_line(const struct bench_row *a, const struct bench_row *b)
{
    return strcmp(a->workload, b->workload) == 0 && strcmp(a->server, b->server) == 0 &&
           strcmp(a->config, b->config) == 0;
}

bool bench__same_series(const struct bench_row *a, const struct bench_row *b)
{
    return bench__same_line(a, b) && a->cores == b->cores;
}

bool bench__has_cores(const struct bench_rows *rows)
{
    for (size_t i = 0; i < rows->len; i++)
        if (rows->v[i].cores > 0)
            return true;
    return false;
}

void bench__line_label(const struct bench_row *r, char *out, size_t cap)
{
    if (strcmp(r->config, "-") == 0 || r->config[0] == '\0')
        snprintf(out, cap, "%s", r->server);
    else
        snprintf(out, cap, "%s %s", r->server, r->config);
}

void bench__series_label(const struct bench_row *r, char *out, size_t cap)
{
    size_t n;

    bench__line_label(r, out, cap);
    n = strlen(out);
    if (r->cores > 0 && n < cap)
        snprintf(out + n, cap - n, ", %u core%s", r->cores, r->cores == 1 ? "" : "s");
}

int bench__workloads(const struct bench_rows *rows, const char ***out, size_t *n)
{
    const char **v = NULL;
    size_t len = 0;

    if (rows->len > 0) {
        v = malloc(rows->len * sizeof(*v));
        if (v == NULL)
            return -ENOMEM;
    }
    for (size_t i = 0; i < rows->len; i++) {
        size_t j = 0;

        while (j < len && strcmp(v[j], rows->v[i].workload) != 0)
            j++;
        if (j == len)
            v[len++] = rows->v[i].workload;
    }
    *out = v;
    *n = len;
    return 0;
}

/* A row of one workload with the rank of its series, for sorting. */
struct ranked {
    const struct bench_row *row;
    size_t series; /* rank of the series' first appearance */
    size_t index;  /* position in the rows: keeps the sort stable */
};

static int compare_ranked(const void *pa, const void *pb)
{
    const struct ranked *a = pa;
    const struct ranked *b = pb;

    if (a->series != b->series)
        return a->series < b->series ? -1 : 1;
    if (a->row->concurrency != b->row->concurrency)
        return a->row->concurrency < b->row->concurrency ? -1 : 1;
    if (a->row->rate != b->row->rate)
        return a->row->rate < b->row->rate ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

int bench__workload_rows(const struct bench_rows *rows, const char *workload,
                         const struct bench_row ***out, size_t *n)
{
    struct ranked *rk = NULL;
    const struct bench_row **v = NULL;
    size_t len = 0;
    size_t nseries = 0;

    if (rows->len > 0) {
        rk = malloc(rows->len * sizeof(*rk));
        v = malloc(rows->len * sizeof(*v));
        if (rk == NULL || v == NULL) {
            free(rk);
            free(v);
            return -ENOMEM;
        }
    }
    for (size_t i = 0; i < rows->len; i++) {
        const struct bench_row *r = &rows->v[i];
        size_t j = 0;

        if (strcmp(r->workload, workload) != 0)
            continue;
        while (j < len && !bench__same_series(rk[j].row, r))
            j++;
        rk[len].row = r;
        rk[len].series = j < len ? rk[j].series : nseries++;
        rk[len].index = i;
        len++;
    }
    if (len > 0)
        qsort(rk, len, sizeof(*rk), compare_ranked);
    for (size_t i = 0; i < len; i++)
        v[i] = rk[i].row;
    free(rk);
    *out = v;
    *n = len;
    return 0;
}

/* ------------------------------------------------------------------------------- scaling */

static double scaling_rps(const struct bench_row *r)
{
    return r->cores > 0 && isfinite(r->rps) && r->rps > 0 ? r->rps : NAN;
}

static void add_cores(struct bench__scaling *s, unsigned k)
{
    size_t i = 0;

    while (i < s->ncores && s->cores[i] < k)
        i++;
    if ((i < s->ncores && s->cores[i] == k) || s->ncores == BENCH__SCALING_MAX)
        return;
    memmove(&s->cores[i + 1], &s->cores[i], (s->ncores - i) * sizeof(s->cores[0]));
    s->cores[i] = k;
    s->ncores++;
}

static size_t cores_index(const struct bench__scaling *s, unsigned k)
{
    size_t i = 0;

    while (i < s->ncores && s->cores[i] != k)
        i++;
    return i;
}

int bench__scaling_build(const struct bench_rows *rows, const char *workload,
                         struct bench__scaling *s)
{
    const struct bench_row **first = NULL; /* each line's first row, for its identity */

    memset(s, 0, sizeof(*s));
    if (bench__is_interval(workload))
        return -ENOENT;
    for (size_t i = 0; i < rows->len; i++) {
        const struct bench_row *r = &rows->v[i];

        if (strcmp(r->workload, workload) == 0 && !isnan(scaling_rps(r)) &&
            r->concurrency > s->concurrency)
            s->concurrency = r->concurrency;
    }
    if (s->concurrency == 0)
        return -ENOENT;
    s->lines = calloc(rows->len, sizeof(*s->lines));
    first = malloc(rows->len * sizeof(*first));
    if (s->lines == NULL || first == NULL) {
        free(first);
        bench__scaling_fini(s);
        return -ENOMEM;
    }
    for (size_t i = 0; i < rows->len; i++) {
        const struct bench_row *r = &rows->v[i];

        if (strcmp(r->workload, workload) == 0 && r->concurrency == s->concurrency &&
            !isnan(scaling_rps(r)))
            add_cores(s, r->cores);
    }
    for (size_t i = 0; i < rows->len; i++) {
        const struct bench_row *r = &rows->v[i];
        const struct bench_row **at;
        size_t l = 0;
        size_t c;

        if (strcmp(r->workload, workload) != 0 || r->concurrency != s->concurrency ||
            isnan(scaling_rps(r)) || (c = cores_index(s, r->cores)) == s->ncores)
            continue;
        while (l < s->nlines && !bench__same_line(first[l], r))
            l++;
        if (l == s->nlines)
            first[s->nlines++] = r;
        at = &s->lines[l].at[c];
        if (*at == NULL || r->rps > (*at)->rps)
            *at = r;
    }
    free(first);
    return 0;
}

void bench__scaling_fini(struct bench__scaling *s)
{
    if (s == NULL)
        return;
    free(s->lines);
    s->lines = NULL;
    s->nlines = 0;
}

int bench__rows_at_cores(const struct bench_rows *rows, unsigned k, struct bench_rows *out)
{
    bench_rows_fini(out);
    for (size_t i = 0; i < rows->len; i++) {
        int err = rows->v[i].cores == k ? bench_rows_add(out, &rows->v[i]) : 0;

        if (err < 0) {
            bench_rows_fini(out);
            return err;
        }
    }
    return 0;
}
