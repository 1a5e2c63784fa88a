/*
 * report_internal.h - helpers shared by the report's writers (report_md.c, plot_svg.c,
 * claims.c): the workloads and series of a set of rows, and one workload's rows in table order.
 * Defined in report_rows.c. Single-threaded; the results borrow the rows.
 */
#ifndef CABRANK_BENCH_REPORT_INTERNAL_H
#define CABRANK_BENCH_REPORT_INTERNAL_H

#include "report.h"

/* True for the pattern paper's intervals ("interval:..."): lower p99 wins, rps is 0. */
bool bench__is_interval(const char *workload);

/* True when a and b belong to the same series (workload, server, config). */
bool bench__same_series(const struct bench_row *a, const struct bench_row *b);

/*
 * The distinct workloads of rows in order of first appearance: *out returns owned (free()),
 * borrowing the names from rows. Returns 0 or -ENOMEM.
 */
CR_MUST_CHECK int bench__workloads(const struct bench_rows *rows, const char ***out, size_t *n);

/*
 * The rows of workload, sorted by series (in order of the series' first appearance), then
 * concurrency, then rate: *out returns owned (free()), borrowing the rows. *n may be 0.
 * Returns 0 or -ENOMEM.
 */
CR_MUST_CHECK int bench__workload_rows(const struct bench_rows *rows, const char *workload,
                                       const struct bench_row ***out, size_t *n);

/* "server config" of a series for legends and text ("cabrank lf:lifo", "nginx"). */
void bench__series_label(const struct bench_row *r, char *out, size_t cap);

#endif /* CABRANK_BENCH_REPORT_INTERNAL_H */
