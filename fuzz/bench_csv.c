/*
 * bench_csv.c - libFuzzer target for cabrank-bench's results reader, bench_csv_parse()
 * (apps/bench/csv.c), and what the report does with what it accepts. Checks: the parser
 * returns 0 or -EBADMSG, and on -EBADMSG names a line within the input and says "line N: ";
 * every accepted row has non-empty names without control bytes, concurrency >= 1 and numbers
 * in [0, BENCH_VALUE_MAX] or not measured, the CPU shares at most 1 and noisy -1, 0 or 1; writing
 * the rows and reading them back gives the same rows (numbers within the writer's 6 decimals); the
 * Markdown report, the winners, the claims, an SVG plot of every workload and its scaling plot (or
 * -ENOENT, writing nothing) are produced without error, and each SVG is printable ASCII with
 * balanced angle brackets. Build: make BUILD=/tmp/b /tmp/b/fuzz/bench_csv; seeds in
 * fuzz/corpus/bench_csv/, dictionary fuzz/bench_csv.dict.
 */
#include "../apps/bench/report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_row(const struct bench_row *r)
{
    const double nums[] = {r->rate,
                           r->rps,
                           r->p50_us,
                           r->p90_us,
                           r->p99_us,
                           r->p999_us,
                           r->cpu_us_per_req,
                           r->ctxsw_per_req,
                           r->peak_rss_kb,
                           r->seconds,
                           r->srv_user_us_per_req,
                           r->srv_sys_us_per_req,
                           r->loadavg_before,
                           r->other_cpu_before,
                           r->other_cpu_during};
    const char *names[] = {r->workload, r->server, r->config};

    for (size_t i = 0; i < 3; i++) {
        size_t n = strnlen(names[i], BENCH_NAME_MAX + 1);

        if (n == 0 || n > BENCH_NAME_MAX)
            abort();
        for (size_t j = 0; j < n; j++)
            if ((unsigned char)names[i][j] < 0x20 || names[i][j] == 0x7f)
                abort();
    }
    if (r->concurrency == 0 || isnan(r->rate))
        abort();
    for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
        if (!isnan(nums[i]) && !(nums[i] >= 0 && nums[i] <= BENCH_VALUE_MAX))
            abort();
    /* The noise: shares of the machine's CPU, and a flag. */
    if (r->other_cpu_before > 1 || r->other_cpu_during > 1 || r->noisy < -1 || r->noisy > 1)
        abort();
}

static bool close_enough(double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return fabs(a - b) <= 1e-6 + fabs(a) * 1e-15;
}

static void check_round_trip(const struct bench_rows *rows)
{
    struct bench_rows back = {0};
    struct bench_csv_error e;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    if (f == NULL)
        abort();
    if (bench_csv_write_header(f) != 0)
        abort();
    for (size_t i = 0; i < rows->len; i++)
        if (bench_csv_write_row(f, &rows->v[i]) != 0)
            abort();
    if (fclose(f) != 0)
        abort();
    if (bench_csv_parse(buf, len, &back, &e) != 0 || back.len != rows->len)
        abort();
    for (size_t i = 0; i < rows->len; i++) {
        const struct bench_row *a = &rows->v[i];
        const struct bench_row *b = &back.v[i];

        if (strcmp(a->workload, b->workload) || strcmp(a->server, b->server) ||
            strcmp(a->config, b->config) || a->concurrency != b->concurrency ||
            a->errors != b->errors || a->cores != b->cores || a->noisy != b->noisy)
            abort();
        if (!close_enough(a->rate, b->rate) || !close_enough(a->rps, b->rps) ||
            !close_enough(a->p50_us, b->p50_us) || !close_enough(a->p90_us, b->p90_us) ||
            !close_enough(a->p99_us, b->p99_us) || !close_enough(a->p999_us, b->p999_us) ||
            !close_enough(a->cpu_us_per_req, b->cpu_us_per_req) ||
            !close_enough(a->ctxsw_per_req, b->ctxsw_per_req) ||
            !close_enough(a->peak_rss_kb, b->peak_rss_kb) ||
            !close_enough(a->seconds, b->seconds) ||
            !close_enough(a->srv_user_us_per_req, b->srv_user_us_per_req) ||
            !close_enough(a->srv_sys_us_per_req, b->srv_sys_us_per_req) ||
            !close_enough(a->loadavg_before, b->loadavg_before) ||
            !close_enough(a->other_cpu_before, b->other_cpu_before) ||
            !close_enough(a->other_cpu_during, b->other_cpu_during))
            abort();
    }
    free(buf);
    bench_rows_fini(&back);
}

static void check_svg(const char *svg, size_t len)
{
    long depth = 0;

    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)svg[i];

        if ((c < 0x20 && c != '\n') || c >= 0x7f)
            abort();
        depth += c == '<';
        depth -= c == '>';
        if (depth < 0 || depth > 1)
            abort();
    }
    if (depth != 0)
        abort();
}

static void check_report(const struct bench_rows *rows)
{
    struct bench_claim claims[BENCH_CLAIMS];
    char *buf = NULL;
    size_t len = 0;
    int rc;
    FILE *f = open_memstream(&buf, &len);

    if (f == NULL)
        abort();
    if (bench_report_markdown(f, rows, NULL) != 0)
        abort();
    for (size_t i = 0; i < rows->len; i++) {
        struct bench_winner w;
        int found = bench_winner_find(rows, rows->v[i].workload, &w);

        if (found == 0 && (w.best == NULL || (w.runner_up != NULL && !(w.ratio >= 1))))
            abort();
        if (found != 0 && found != -ENOENT)
            abort();
    }
    bench_claims_eval(rows, claims);
    for (size_t i = 0; i < BENCH_CLAIMS; i++)
        if ((claims[i].verdict == BENCH_NOT_MEASURED) != isnan(claims[i].ratio))
            abort();
    if (fclose(f) != 0)
        abort();
    free(buf);

    /* A plot of each workload (the first row of each is enough to name them all). */
    for (size_t i = 0; i < rows->len; i++) {
        bool seen = false;

        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(rows->v[j].workload, rows->v[i].workload) == 0;
        if (seen)
            continue;
        buf = NULL;
        len = 0;
        f = open_memstream(&buf, &len);
        if (f == NULL)
            abort();
        if (bench_plot_svg(f, rows, rows->v[i].workload) != 0)
            abort();
        if (fclose(f) != 0)
            abort();
        check_svg(buf, len);
        free(buf);
        /* The scaling plot: written whole, or nothing when no pinned row has req/s. */
        buf = NULL;
        len = 0;
        f = open_memstream(&buf, &len);
        if (f == NULL)
            abort();
        rc = bench_plot_scaling_svg(f, rows, rows->v[i].workload);
        if (rc != 0 && rc != -ENOENT)
            abort();
        if (fclose(f) != 0 || (rc == -ENOENT && len != 0))
            abort();
        if (rc == 0)
            check_svg(buf, len);
        free(buf);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct bench_rows rows = {0};
    struct bench_csv_error e;
    unsigned lines = 1;
    char want[24];
    int rc;

    /* Big inputs only slow the quadratic grouping down; the parser is linear. */
    if (size > 16384)
        return 0;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    rc = bench_csv_parse((const char *)data, size, &rows, &e);
    if (rc == -EBADMSG) {
        snprintf(want, sizeof(want), "line %u: ", e.line);
        if (e.line < 1 || e.line > lines || strncmp(e.msg, want, strlen(want)) != 0)
            abort();
    } else if (rc != 0) {
        abort();
    } else {
        for (size_t i = 0; i < rows.len; i++)
            check_row(&rows.v[i]);
        check_round_trip(&rows);
        check_report(&rows);
    }
    bench_rows_fini(&rows);
    return 0;
}
