/*
 * report_md.c - the Markdown report of cabrank-bench (results.md): a table per workload with
 * every series' points, the winner of each workload with its ratio to the runner-up, and the
 * papers' claims (report_claims.c); for a run with --cores, a scaling table per workload and
 * the claims at each core count instead; and bench_report_write_dir(), which writes it beside
 * claims.csv and the plots (plot_svg.c). Called once by the driver at the end of a run, and by the
 * unit tests; single-threaded; allocates only temporary arrays of pointers.
 */
#include "report_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------------------------------- winners */

/* The value a workload is won on, NAN when the point did not measure it. */
static double score(const struct bench_row *r, bool lower)
{
    double v = lower ? r->p99_us : r->rps;

    /* 0 req/s served nothing, and a p99 of 0 µs is no measurement. */
    if (isnan(v) || v <= 0)
        return NAN;
    return v;
}

static bool is_better(double a, double b, bool lower)
{
    return lower ? a < b : a > b;
}

int bench_winner_find(const struct bench_rows *rows, const char *workload, struct bench_winner *out)
{
    bool lower = bench__is_interval(workload);
    const struct bench_row **v;
    const struct bench_row *best = NULL;
    const struct bench_row *second = NULL;
    unsigned top = 0;
    size_t n;
    int err;

    memset(out, 0, sizeof(*out));
    out->workload = workload;
    out->ratio = NAN;
    out->lower_is_better = lower;
    err = bench__workload_rows(rows, workload, &v, &n);
    if (err < 0)
        return err;
    for (size_t i = 0; i < n; i++)
        if (!isnan(score(v[i], lower)) && v[i]->concurrency > top)
            top = v[i]->concurrency;
    /* The rows are grouped by series: take each series' best point at the top concurrency. */
    for (size_t i = 0; i < n;) {
        const struct bench_row *pick = NULL;
        size_t j = i;

        for (; j < n && bench__same_series(v[i], v[j]); j++) {
            double s = score(v[j], lower);

            if (v[j]->concurrency != top || isnan(s))
                continue;
            if (pick == NULL || is_better(s, score(pick, lower), lower))
                pick = v[j];
        }
        i = j;
        if (pick == NULL)
            continue;
        if (best == NULL || is_better(score(pick, lower), score(best, lower), lower)) {
            second = best;
            best = pick;
        } else if (second == NULL || is_better(score(pick, lower), score(second, lower), lower)) {
            second = pick;
        }
    }
    free(v);
    if (best == NULL)
        return -ENOENT;
    out->workload = best->workload;
    out->best = best;
    out->runner_up = second;
    if (second != NULL) {
        double a = score(best, lower);
        double b = score(second, lower);

        out->ratio = lower ? b / a : a / b;
    }
    return 0;
}

/* ------------------------------------------------------------------------------- markdown */

void bench__md_text(FILE *f, const char *s)
{
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '<')
            fputs("&lt;", f);
        else if (c == '>')
            fputs("&gt;", f);
        else if (c == '&')
            fputs("&amp;", f);
        else if (c < 0x20 || c == 0x7f)
            fputc(' ', f);
        else if (strchr("\\`*[]|", c) != NULL)
            fprintf(f, "\\%c", c);
        else
            fputc(c, f);
    }
}

/* A number for a table cell: "-" when not measured, fewer decimals as it grows. */
static void put_num(FILE *f, double v, int decimals)
{
    if (isnan(v)) {
        fputs("-", f);
        return;
    }
    if (decimals > 0 && v >= 1000)
        decimals = 0;
    fprintf(f, "%.*f", decimals, v);
}

/* Whether any of the rows has the server's CPU time split into user and system time. */
static bool has_split(const struct bench_row *const *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!isnan(v[i]->srv_user_us_per_req) || !isnan(v[i]->srv_sys_us_per_req))
            return true;
    }
    return false;
}

/* Whether any of the rows has the machine's noise measured (a CSV of the fourth format). */
static bool has_noise(const struct bench_row *const *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!isnan(v[i]->loadavg_before) || !isnan(v[i]->other_cpu_before) ||
            !isnan(v[i]->other_cpu_during))
            return true;
    }
    return false;
}

/* Two rows of one point: the same series at the same concurrency and rate (repetitions). */
static bool is_same_point(const struct bench_row *a, const struct bench_row *b)
{
    return bench__same_series(a, b) && a->concurrency == b->concurrency && a->rate == b->rate;
}

/* Whether any point of v (in table order: a point's rows are adjacent) was measured again. */
static bool has_repeats(const struct bench_row *const *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        if (is_same_point(v[i - 1], v[i]))
            return true;
    }
    return false;
}

/* The spread cell of row i: the smallest and largest req/s (p99 for an interval) of its
 * point's repetitions and how many there were, "-" for a point measured once. */
static void put_spread(FILE *f, const struct bench_row *const *v, size_t n, size_t i, bool interval)
{
    size_t lo = i;
    size_t hi = i + 1;
    double min = NAN;
    double max = NAN;

    while (lo > 0 && is_same_point(v[lo - 1], v[i]))
        lo--;
    while (hi < n && is_same_point(v[hi], v[i]))
        hi++;
    for (size_t k = lo; k < hi; k++) {
        double x = interval ? v[k]->p99_us : v[k]->rps;

        if (isnan(x))
            continue;
        min = isnan(min) || x < min ? x : min;
        max = isnan(max) || x > max ? x : max;
    }
    if (hi - lo < 2 || isnan(min)) {
        fputs("-", f);
        return;
    }
    put_num(f, min, interval ? 1 : 0);
    fputs("–", f);
    put_num(f, max, interval ? 1 : 0);
    fprintf(f, " (%zu)", hi - lo);
}

/* The noise cells of a row: the load average, and the others' CPU share before / during the
 * point in percent, flagged noisy. */
static void put_noise(FILE *f, const struct bench_row *r)
{
    fputs(" | ", f);
    put_num(f, r->loadavg_before, 2);
    fputs(" | ", f);
    put_num(f, r->other_cpu_before * 100, 0);
    fputs(" / ", f);
    put_num(f, r->other_cpu_during * 100, 0);
    if (r->noisy == 1)
        fputs(" noisy", f);
}

/* The user and system columns follow CPU µs/req only in a table whose rows have them (a CSV
 * of the first format has none, and an interval's rows measure no CPU); the spread only where a
 * point was measured again (--repeat), the noise only where it was measured. */
static void put_table(FILE *f, const struct bench_row *const *v, size_t n, bool interval)
{
    bool split = has_split(v, n);
    bool noise = has_noise(v, n);
    bool spread = has_repeats(v, n);
    bool pinned = false; /* a cores column, only where a row was pinned (--cores) */

    for (size_t i = 0; i < n; i++)
        pinned = pinned || v[i]->cores > 0;
    fputs(pinned ? "| server | config | cores " : "| server | config ", f);
    fputs("| conns | rate | req/s | p50 µs | p90 µs | p99 µs | p99.9 µs | CPU µs/req ", f);
    if (split)
        fputs("| user µs/req | sys µs/req ", f);
    fputs("| ctxsw/req | peak RSS KiB | errors ", f);
    if (spread)
        fputs(interval ? "| p99 µs min–max (runs) " : "| req/s min–max (runs) ", f);
    if (noise)
        fputs("| load avg | others' CPU % before / during ", f);
    fputs("|\n", f);
    fputs(pinned ? "|---|---|---:|" : "|---|---|", f);
    fputs("---:|---:|---:|---:|---:|---:|---:|---:|", f);
    if (split)
        fputs("---:|---:|", f);
    fputs("---:|---:|---:|", f);
    if (spread)
        fputs("---:|", f);
    if (noise)
        fputs("---:|---:|", f);
    fputs("\n", f);
    for (size_t i = 0; i < n; i++) {
        const struct bench_row *r = v[i];

        fputs("| ", f);
        bench__md_text(f, r->server);
        fputs(" | ", f);
        bench__md_text(f, r->config);
        if (pinned)
            fprintf(f, " | %u", r->cores);
        /* The numeric cells in column order, each with its decimals; rate 0 is closed loop. */
        const struct {
            double v;
            int decimals;
            bool split; /* a column of the CPU split */
        } cells[] = {
            {r->rate > 0 ? r->rate : NAN, 0, false},
            {interval ? NAN : r->rps, 0, false},
            {r->p50_us, 1, false},
            {r->p90_us, 1, false},
            {r->p99_us, 1, false},
            {r->p999_us, 1, false},
            {r->cpu_us_per_req, 2, false},
            {r->srv_user_us_per_req, 2, true},
            {r->srv_sys_us_per_req, 2, true},
            {r->ctxsw_per_req, 2, false},
            {r->peak_rss_kb, 0, false},
        };

        fprintf(f, " | %u", r->concurrency);
        for (size_t c = 0; c < sizeof(cells) / sizeof(cells[0]); c++) {
            if (cells[c].split && !split)
                continue;
            fputs(" | ", f);
            put_num(f, cells[c].v, cells[c].decimals);
        }
        fprintf(f, " | %llu", (unsigned long long)r->errors);
        if (spread) {
            fputs(" | ", f);
            put_spread(f, v, n, i, interval);
        }
        if (noise)
            put_noise(f, r);
        fputs(" |\n", f);
    }
}

/* Whether r starts a point of its own: the three interval rows come from one run. */
static bool is_point(const struct bench_row *r)
{
    return !bench__is_interval(r->workload) || strcmp(r->workload, "interval:t_conn") == 0;
}

/* "Noise: k of n points ran with more than 10% ...", when any row was judged. */
static void put_noise_summary(FILE *f, const struct bench_rows *rows,
                              const struct bench_report_info *info)
{
    double max = info != NULL && info->noise_max > 0 ? info->noise_max : BENCH_NOISE_MAX_DEFAULT;
    size_t points = 0;
    size_t noisy = 0;

    for (size_t i = 0; i < rows->len; i++) {
        const struct bench_row *r = &rows->v[i];

        if (r->noisy < 0 || !is_point(r))
            continue;
        points++;
        noisy += r->noisy == 1;
    }
    if (points == 0)
        return;
    fprintf(f,
            "Noise: %zu of %zu point%s ran with more than %.0f%% of the CPU taken by other "
            "processes (before or during the point, --noise-max)%s\n\n",
            noisy, points, points == 1 ? "" : "s", max * 100,
            noisy > 0 ? "; they are marked noisy in the tables, and their figures are weaker "
                        "evidence."
                      : ".");
}

static void put_label(FILE *f, const struct bench_row *r)
{
    char label[BENCH__LABEL_MAX];

    bench__series_label(r, label, sizeof(label));
    bench__md_text(f, label);
}

static void put_winner(FILE *f, const struct bench_winner *w)
{
    const struct bench_row *b = w->best;

    fputs("| ", f);
    bench__md_text(f, w->workload);
    fputs(" | ", f);
    put_label(f, b);
    fprintf(f, " | %u | ", b->concurrency);
    if (w->lower_is_better) {
        put_num(f, b->p99_us, 1);
        fputs(" µs p99", f);
    } else {
        put_num(f, b->rps, 0);
        fputs(" req/s", f);
    }
    fputs(" | ", f);
    if (w->runner_up != NULL) {
        put_label(f, w->runner_up);
        fprintf(f, " | %.2fx |\n", w->ratio);
    } else {
        fputs("- | - |\n", f);
    }
}

/* ------------------------------------------------------------------------------- scaling */

/* One workload's scaling table: a row per server and config, and per core count its req/s,
 * its CPU per request and (after the first) its req/s over the first core count's. */
static void put_scaling_table(FILE *f, const struct bench__scaling *s)
{
    fputs("| server | config |", f);
    for (size_t c = 0; c < s->ncores; c++) {
        fprintf(f, " k=%u req/s | k=%u CPU µs/req |", s->cores[c], s->cores[c]);
        if (c > 0)
            fprintf(f, " k=%u / k=%u |", s->cores[c], s->cores[0]);
    }
    fputs("\n|---|---|", f);
    for (size_t c = 0; c < s->ncores; c++)
        fputs(c > 0 ? "---:|---:|---:|" : "---:|---:|", f);
    fputs("\n", f);
    for (size_t l = 0; l < s->nlines; l++) {
        const struct bench_row *const *at = s->lines[l].at;
        const struct bench_row *any = NULL;

        for (size_t c = 0; c < s->ncores && any == NULL; c++)
            any = at[c];
        fputs("| ", f);
        bench__md_text(f, any->server);
        fputs(" | ", f);
        bench__md_text(f, any->config);
        for (size_t c = 0; c < s->ncores; c++) {
            fputs(" | ", f);
            put_num(f, at[c] != NULL ? at[c]->rps : NAN, 0);
            fputs(" | ", f);
            put_num(f, at[c] != NULL ? at[c]->cpu_us_per_req : NAN, 2);
            if (c == 0)
                continue;
            fputs(" | ", f);
            if (at[c] != NULL && at[0] != NULL)
                fprintf(f, "%.2fx", at[c]->rps / at[0]->rps);
            else
                fputs("-", f);
        }
        fputs(" |\n", f);
    }
}

/* The scaling section of a run with --cores: a table per workload (its plot beside it). */
static int put_scaling(FILE *f, const struct bench_rows *rows, const char *const *wl, size_t nwl)
{
    fputs("## Scaling\n\n", f);
    fputs("The server pinned to the first k CPUs cabrank-bench may use, the load to the others. "
          "Each cell is the point at the workload's highest concurrency (its best req/s there); "
          "k=K / k=K0 is req/s at K over req/s at the smallest K.\n\n",
          f);
    for (size_t i = 0; i < nwl; i++) {
        struct bench__scaling s;
        char plot[160];
        int err = bench__scaling_build(rows, wl[i], &s);

        if (err == -ENOENT)
            continue;
        if (err < 0)
            return err;
        fputs("### ", f);
        bench__md_text(f, wl[i]);
        fprintf(f, ", %u conn%s\n\n", s.concurrency, s.concurrency == 1 ? "" : "s");
        put_scaling_table(f, &s);
        if (bench_scaling_filename(wl[i], plot, sizeof(plot)) == 0) {
            fputs("\n![", f);
            bench__md_text(f, wl[i]);
            fprintf(f, " scaling](%s)\n", plot);
        }
        fputs("\n", f);
        bench__scaling_fini(&s);
    }
    return 0;
}

int bench_report_markdown(FILE *f, const struct bench_rows *rows,
                          const struct bench_report_info *info)
{
    const char **wl;
    size_t nwl;
    bool any_winner = false;
    int err;

    err = bench__workloads(rows, &wl, &nwl);
    if (err < 0)
        return err;
    fputs("# ", f);
    bench__md_text(f, info != NULL && info->title != NULL ? info->title : "cabrank-bench results");
    fputs("\n\n", f);
    if (info != NULL && info->date != NULL) {
        fputs("Date: ", f);
        bench__md_text(f, info->date);
        fputs("  \n", f);
    }
    if (info != NULL && info->machine != NULL) {
        fputs("Machine: ", f);
        bench__md_text(f, info->machine);
        fputs("  \n", f);
    }
    if (info != NULL && info->command != NULL) {
        /* A code span may not hold its own backtick: a command with one is shown escaped. */
        if (strchr(info->command, '`') == NULL && strpbrk(info->command, "\r\n") == NULL) {
            fprintf(f, "Command: `%s`  \n", info->command);
        } else {
            fputs("Command: ", f);
            bench__md_text(f, info->command);
            fputs("  \n", f);
        }
    }
    if (info != NULL && info->cores != NULL) {
        fputs("Cores: ", f);
        bench__md_text(f, info->cores);
        fputs("  \n", f);
    }
    if (info != NULL && (info->date != NULL || info->machine != NULL || info->command != NULL ||
                         info->cores != NULL))
        fputs("\n", f);
    put_noise_summary(f, rows, info);
    if (nwl == 0)
        fputs("No results.\n\n", f);

    for (size_t i = 0; i < nwl; i++) {
        const struct bench_row **v;
        char plot[160];
        size_t n;

        err = bench__workload_rows(rows, wl[i], &v, &n);
        if (err < 0)
            goto out_free;
        fputs("## ", f);
        bench__md_text(f, wl[i]);
        fputs("\n\n", f);
        put_table(f, v, n, bench__is_interval(wl[i]));
        free(v);
        if (bench_plot_filename(wl[i], plot, sizeof(plot)) == 0) {
            fputs("\n![", f);
            bench__md_text(f, wl[i]);
            fprintf(f, "](%s)\n", plot);
        }
        fputs("\n", f);
    }

    fputs("## Winners\n\n", f);
    fputs("Highest req/s at the highest concurrency measured (interval workloads: lowest p99), "
          "and the ratio to the runner-up.\n\n",
          f);
    for (size_t i = 0; i < nwl; i++) {
        struct bench_winner w;

        err = bench_winner_find(rows, wl[i], &w);
        if (err == -ENOENT)
            continue;
        if (err < 0)
            goto out_free;
        if (!any_winner) {
            fputs("| workload | winner | conns | result | runner-up | ratio |\n", f);
            fputs("|---|---|---:|---:|---|---:|\n", f);
            any_winner = true;
        }
        put_winner(f, &w);
    }
    if (!any_winner)
        fputs("No workload has a measured result.\n", f);
    fputs("\n", f);
    err = 0;
    /* Pinned rows: the claims per core count, since mixing core counts compares nothing. */
    if (bench__has_cores(rows))
        err = put_scaling(f, rows, wl, nwl);
    if (err == 0)
        err = bench__put_claims(f, rows);
out_free:
    free(wl);
    if (err == 0 && (fflush(f) == EOF || ferror(f)))
        err = -EIO;
    return err;
}

/* ---------------------------------------------------------------------------- output dir */

/* Writes one file of dir through fn; the file is complete or the error is returned. */
static int write_file(const char *dir, const char *name, const struct bench_rows *rows,
                      const void *arg, int (*fn)(FILE *, const struct bench_rows *, const void *))
{
    char path[4096];
    FILE *f;
    int err;
    int n = snprintf(path, sizeof(path), "%s/%s", dir, name);

    if (n < 0 || (size_t)n >= sizeof(path))
        return -ENAMETOOLONG;
    f = fopen(path, "w");
    if (f == NULL)
        return -errno;
    err = fn(f, rows, arg);
    if (fclose(f) == EOF && err == 0)
        err = -EIO;
    return err;
}

static int md_fn(FILE *f, const struct bench_rows *rows, const void *arg)
{
    return bench_report_markdown(f, rows, arg);
}

static int claims_fn(FILE *f, const struct bench_rows *rows, const void *arg)
{
    (void)arg;
    return bench_claims_csv(f, rows);
}

static int svg_fn(FILE *f, const struct bench_rows *rows, const void *arg)
{
    int err = bench_plot_svg(f, rows, arg);

    if (err == 0 && (fflush(f) == EOF || ferror(f)))
        err = -EIO;
    return err;
}

static int scaling_fn(FILE *f, const struct bench_rows *rows, const void *arg)
{
    int err = bench_plot_scaling_svg(f, rows, arg);

    if (err == 0 && (fflush(f) == EOF || ferror(f)))
        err = -EIO;
    return err;
}

int bench_report_write_dir(const char *dir, const struct bench_rows *rows,
                           const struct bench_report_info *info)
{
    const char **wl;
    size_t nwl;
    int err;

    err = bench__workloads(rows, &wl, &nwl);
    if (err < 0)
        return err;
    for (size_t i = 0; i < nwl && err == 0; i++) {
        struct bench__scaling s;
        char name[160];

        err = bench_plot_filename(wl[i], name, sizeof(name));
        if (err == 0)
            err = write_file(dir, name, rows, wl[i], svg_fn);
        if (err < 0 || !bench__has_cores(rows))
            continue;
        /* Only the workloads the scaling section shows get a scaling plot. */
        err = bench__scaling_build(rows, wl[i], &s);
        bench__scaling_fini(&s);
        if (err == -ENOENT) {
            err = 0;
            continue;
        }
        if (err == 0)
            err = bench_scaling_filename(wl[i], name, sizeof(name));
        if (err == 0)
            err = write_file(dir, name, rows, wl[i], scaling_fn);
    }
    if (err == 0)
        err = write_file(dir, "claims.csv", rows, NULL, claims_fn);
    if (err == 0)
        err = write_file(dir, "results.md", rows, info, md_fn);
    free(wl);
    return err;
}
