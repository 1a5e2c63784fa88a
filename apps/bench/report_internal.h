/*
 * report_internal.h - helpers shared by the report's writers (report_md.c, report_claims.c,
 * plot_svg.c, claims.c): the workloads and series of a set of rows, and one workload's rows in
 * table order (report_rows.c); a Markdown cell's text (report_md.c); a CSV field (csv.c); the
 * claims section (report_claims.c). Single-threaded; the results borrow the rows.
 */
#ifndef CABRANK_BENCH_REPORT_INTERNAL_H
#define CABRANK_BENCH_REPORT_INTERNAL_H

#include "report.h"

/* True for the pattern paper's intervals ("interval:..."): lower p99 wins, rps is 0. */
bool bench__is_interval(const char *workload);

/* True when a and b belong to the same series (workload, server, config, cores). */
bool bench__same_series(const struct bench_row *a, const struct bench_row *b);

/* True when a and b are the same server and config on the same workload, at any cores: one
 * line of a scaling table or plot. */
bool bench__same_line(const struct bench_row *a, const struct bench_row *b);

/* Whether any row was measured on a server pinned to a core count (cores > 0). */
bool bench__has_cores(const struct bench_rows *rows);

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

/* Room for a label of bench__series_label() or bench__line_label(). */
#define BENCH__LABEL_MAX (2 * BENCH_NAME_MAX + 24)

/* "server config" of a series for legends and text ("cabrank lf:lifo", "nginx"), with its
 * cores when pinned ("nginx, 4 cores"). */
void bench__series_label(const struct bench_row *r, char *out, size_t cap);

/* "server config" without the cores: a scaling line's label. */
void bench__line_label(const struct bench_row *r, char *out, size_t cap);

/* Most core counts a scaling table or plot shows (the --cores list's length). */
#define BENCH__SCALING_MAX 16

/* One server and config of a scaling table: its point at each core count. */
struct bench__scaling_line {
    const struct bench_row *at[BENCH__SCALING_MAX]; /* NULL: not measured at cores[i] */
};

/* A workload's scaling: the lines (in order of first appearance) at each core count. */
struct bench__scaling {
    unsigned cores[BENCH__SCALING_MAX]; /* ascending */
    size_t ncores;
    unsigned concurrency;              /* the points taken: the highest concurrency with req/s */
    struct bench__scaling_line *lines; /* owned (bench__scaling_fini()) */
    size_t nlines;
};

/*
 * The scaling of workload: of its rows with cores > 0 and req/s measured (> 0), those at the
 * highest concurrency; per line and core count the point with the best req/s. Borrows rows.
 * Returns 0, -ENOENT (no such row, or an interval workload) or -ENOMEM.
 */
CR_MUST_CHECK int bench__scaling_build(const struct bench_rows *rows, const char *workload,
                                       struct bench__scaling *s);

/* Frees s's lines; NULL-safe. */
void bench__scaling_fini(struct bench__scaling *s);

/* The rows with cores == k, copied into *out (empty first). 0 or -ENOMEM. */
CR_MUST_CHECK int bench__rows_at_cores(const struct bench_rows *rows, unsigned k,
                                       struct bench_rows *out);

/* The distinct core counts of rows (cores > 0), ascending, at most cap into cores; how many. */
size_t bench__cores_list(const struct bench_rows *rows, unsigned *cores, size_t cap);

/* Writes s escaped for a Markdown table cell (no HTML, no emphasis, no cell break). */
void bench__md_text(FILE *f, const char *s);

/* Writes s as a CSV field, quoted as RFC 4180 where needed. 0 or -EIO. */
CR_MUST_CHECK int bench__csv_name(FILE *f, const char *s);

/* Writes ",v" as results.csv writes numbers (an empty field for NAN). 0, -ERANGE or -EIO. */
CR_MUST_CHECK int bench__csv_number(FILE *f, double v);

/* The claims section of results.md: one table, or with pinned rows one column per core count.
 * 0 or -ENOMEM. */
CR_MUST_CHECK int bench__put_claims(FILE *f, const struct bench_rows *rows);

#endif /* CABRANK_BENCH_REPORT_INTERNAL_H */
