/*
 * report_rows.c - the grouping helpers every writer of cabrank-bench's report shares
 * (report_internal.h): which rows form a series, the workloads of a run, one workload's rows
 * in table order. Called by report_md.c, plot_svg.c and claims.c; single-threaded; allocates
 * only the arrays of pointers it returns, which borrow the rows.
 */
#include "report_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool bench__is_interval(const char *workload)
{
    return strncmp(workload, "interval:", 9) == 0;
}

bool bench__same_series(const struct bench_row *a, const struct bench_row *b)
{
    return strcmp(a->workload, b->workload) == 0 && strcmp(a->server, b->server) == 0 &&
           strcmp(a->config, b->config) == 0;
}

void bench__series_label(const struct bench_row *r, char *out, size_t cap)
{
    if (strcmp(r->config, "-") == 0 || r->config[0] == '\0')
        snprintf(out, cap, "%s", r->server);
    else
        snprintf(out, cap, "%s %s", r->server, r->config);
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
