/*
 * report_claims.c - the papers' claims as cabrank-bench reports them (claims.c judges them):
 * the claims section of results.md, with each claim's measure, threshold, median ratio, spread
 * over the repetitions and verdict (per core count in a --cores run), and claims.csv, the same
 * as rows. Called by report_md.c (results.md, bench_report_write_dir()) and the unit tests;
 * single-threaded; allocates only temporary arrays.
 */
#include "report_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t bench__cores_list(const struct bench_rows *rows, unsigned *cores, size_t cap)
{
    size_t n = 0;

    for (size_t i = 0; i < rows->len; i++) {
        unsigned k = rows->v[i].cores;
        size_t j = 0;

        while (j < n && cores[j] < k)
            j++;
        if (k == 0 || (j < n && cores[j] == k) || n == cap)
            continue;
        memmove(&cores[j + 1], &cores[j], (n - j) * sizeof(cores[0]));
        cores[j] = k;
        n++;
    }
    return n;
}

/* The claims of rows at each of cores[0..n) (the rows with that core count), or of all rows
 * when n is 0: returns owned (free()), max(n, 1) arrays of BENCH_CLAIMS; NULL on ENOMEM. */
static struct bench_claim (*claims_at(const struct bench_rows *rows, const unsigned *cores,
                                      size_t n))[BENCH_CLAIMS]
{
    struct bench_claim(*claims)[BENCH_CLAIMS] = calloc(n > 0 ? n : 1, sizeof(*claims));
    struct bench_rows at = {0};

    if (claims == NULL)
        return NULL;
    if (n == 0)
        bench_claims_eval(rows, claims[0]);
    for (size_t c = 0; c < n; c++) {
        if (bench__rows_at_cores(rows, cores[c], &at) < 0) {
            free(claims);
            return NULL;
        }
        bench_claims_eval(&at, claims[c]);
    }
    bench_rows_fini(&at);
    return claims;
}

static const char how_judged[] =
    "Each measure is a ratio, above 1 in the claim's direction, taken once per repetition: the "
    "k-th run of one side against the k-th of the other (--repeat runs the claims' points again, "
    "the configurations in alternating order). The ratio shown is the median, the spread the "
    "smallest and largest. Held: every repetition's ratio is above the threshold; not held: "
    "every one is below it; not separable: the spread reaches the threshold (a tie included), or "
    "fewer than 3 repetitions were measured.\n\n";

/* The verdict, and "measured on a noisy machine (2 of 3 reps)" when noisy rows went into it. */
static void put_verdict(FILE *f, const struct bench_claim *c)
{
    fputs(bench_verdict_name(c->verdict), f);
    if (c->noisy > 0)
        fprintf(f, ", measured on a noisy machine (%u of %u rep%s)", c->noisy, c->reps,
                c->reps == 1 ? "" : "s");
}

/* "1.33x (1.20-1.40, 3 reps) held", or the verdict alone when not measured. */
static void put_cell(FILE *f, const struct bench_claim *c)
{
    if (c->reps > 0)
        fprintf(f, "%.2fx (%.2f-%.2f, %u rep%s) ", c->ratio, c->lo, c->hi, c->reps,
                c->reps == 1 ? "" : "s");
    put_verdict(f, c);
}

int bench__put_claims(FILE *f, const struct bench_rows *rows)
{
    struct bench_claim(*claims)[BENCH_CLAIMS];
    unsigned cores[BENCH__SCALING_MAX];
    size_t ncores = bench__cores_list(rows, cores, BENCH__SCALING_MAX);

    claims = claims_at(rows, cores, ncores);
    if (claims == NULL)
        return -ENOMEM;
    if (ncores > 0) {
        fputs("## The papers' claims at each core count\n\n", f);
        fputs("Each claim checked on the rows of one core count; a cell is the median ratio, its "
              "spread and repetitions, and the verdict. ",
              f);
    } else {
        fputs("## The papers' claims\n\n", f);
    }
    fputs(how_judged, f);
    fputs(ncores > 0 ? "| claim | measure | threshold |"
                     : "| claim | measure | threshold | ratio | spread | reps | verdict | "
                       "measured on |",
          f);
    for (size_t c = 0; c < ncores; c++)
        fprintf(f, " %u core%s |", cores[c], cores[c] == 1 ? "" : "s");
    fputs(ncores > 0 ? "\n|---|---|---:|" : "\n|---|---|---:|---:|---:|---:|---|---|", f);
    for (size_t c = 0; c < ncores; c++)
        fputs("---|", f);
    fputs("\n", f);
    for (size_t i = 0; i < BENCH_CLAIMS; i++) {
        const struct bench_claim *c = &claims[0][i];

        fputs("| ", f);
        bench__md_text(f, c->claim);
        fputs(" | ", f);
        bench__md_text(f, c->metric);
        fprintf(f, " | > %.2f |", c->threshold);
        for (size_t k = 0; k < ncores; k++) {
            fputs(" ", f);
            put_cell(f, &claims[k][i]);
            fputs(" |", f);
        }
        if (ncores == 0 && c->reps == 0)
            fprintf(f, " - | - | 0 | %s | ", bench_verdict_name(c->verdict));
        else if (ncores == 0)
            fprintf(f, " %.2fx | %.2f-%.2f | %u | ", c->ratio, c->lo, c->hi, c->reps);
        if (ncores == 0 && c->reps > 0) {
            put_verdict(f, c);
            fputs(" | ", f);
        }
        if (ncores == 0) {
            bench__md_text(f, c->where);
            fputs(" |", f);
        }
        fputs("\n", f);
    }
    fputs("\n", f);
    free(claims);
    return 0;
}

int bench_claims_csv(FILE *f, const struct bench_rows *rows)
{
    struct bench_claim(*claims)[BENCH_CLAIMS];
    unsigned cores[BENCH__SCALING_MAX];
    size_t ncores = bench__cores_list(rows, cores, BENCH__SCALING_MAX);
    int err = fputs(BENCH_CLAIMS_CSV_HEADER "\n", f) == EOF ? -EIO : 0;

    claims = claims_at(rows, cores, ncores);
    if (claims == NULL)
        return -ENOMEM;
    for (size_t k = 0; k < (ncores > 0 ? ncores : 1) && err == 0; k++) {
        for (size_t i = 0; i < BENCH_CLAIMS && err == 0; i++) {
            const struct bench_claim *c = &claims[k][i];

            if (ncores > 0 && fprintf(f, "%u", cores[k]) < 0)
                err = -EIO;
            if (err == 0 && fputc(',', f) == EOF)
                err = -EIO;
            if (err == 0)
                err = bench__csv_name(f, c->claim);
            if (err == 0 && fputc(',', f) == EOF)
                err = -EIO;
            if (err == 0)
                err = bench__csv_name(f, c->metric);
            if (err == 0)
                err = bench__csv_number(f, c->threshold);
            if (err == 0)
                err = bench__csv_number(f, c->ratio);
            if (err == 0)
                err = bench__csv_number(f, c->lo);
            if (err == 0)
                err = bench__csv_number(f, c->hi);
            if (err == 0 && fprintf(f, ",%u,%s,", c->reps, bench_verdict_name(c->verdict)) < 0)
                err = -EIO;
            if (err == 0)
                err = bench__csv_name(f, c->where);
            if (err == 0 && fprintf(f, ",%u\n", c->noisy) < 0)
                err = -EIO;
        }
    }
    free(claims);
    if (err == 0 && (fflush(f) == EOF || ferror(f)))
        err = -EIO;
    return err;
}
