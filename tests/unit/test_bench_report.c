/*
 * test_bench_report.c - the report half of cabrank-bench (apps/bench/csv.c, report_md.c,
 * claims.c, plot_svg.c): rows written and read back unchanged; every kind of malformed CSV
 * rejected with its line number (and every prefix of a valid file parsed or rejected, never a
 * crash); a known CSV gives a known Markdown text; the winner of a workload and its ratio;
 * each claim held, not held or not measured; an SVG that a well-formedness checker in this file
 * (and xmllint, where installed) accepts, with hostile names escaped, a line per series and a
 * log axis only for a wide latency range; the output directory's files; for a --cores run, the
 * scaling table, the claims per core count and the scaling plot, from synthetic rows; the
 * machine's noise: each row's load average and the others' CPU share, a noisy point flagged and
 * counted at the top of results.md, a claim drawn from noisy repetitions saying so (results.md
 * and claims.csv); a repeated point's spread on each of its rows; each point of a plot labelled
 * with its load, no two labels overlapping.
 */
#include "../../apps/bench/report.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define HEADER BENCH_CSV_HEADER "\n"

static void parse_ok(const char *csv, struct bench_rows *rows)
{
    struct bench_csv_error e;
    int rc = bench_csv_parse(csv, strlen(csv), rows, &e);

    ck_assert_msg(rc == 0, "parse failed (%d): %s", rc, e.msg);
}

/* Everything f received, NUL-terminated; the caller frees. */
static char *render(int (*fn)(FILE *, const struct bench_rows *, const void *),
                    const struct bench_rows *rows, const void *arg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fn(f, rows, arg), 0);
    ck_assert_int_eq(fclose(f), 0);
    return buf;
}

static int md_fn(FILE *f, const struct bench_rows *rows, const void *arg)
{
    return bench_report_markdown(f, rows, arg);
}

static int svg_fn(FILE *f, const struct bench_rows *rows, const void *arg)
{
    return bench_plot_svg(f, rows, arg);
}

static int claims_csv_fn(FILE *f, const struct bench_rows *rows, const void *arg)
{
    (void)arg;
    return bench_claims_csv(f, rows);
}

static int scaling_fn(FILE *f, const struct bench_rows *rows, const void *arg)
{
    return bench_plot_scaling_svg(f, rows, arg);
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;

    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* ------------------------------------------------------------------------------------ CSV */

START_TEST(csv_rows_round_trip)
{
    struct bench_rows rows = {0};
    struct bench_rows back = {0};
    struct bench_row r;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    ck_assert_ptr_nonnull(f);
    bench_row_init(&r);
    strcpy(r.workload, "http:hello.txt");
    strcpy(r.server, "cabrank");
    strcpy(r.config, "lf:lifo");
    r.concurrency = 64;
    r.rps = 123456.75;
    r.p50_us = 80.5;
    r.p99_us = 1200;
    r.errors = 3;
    r.seconds = 2;
    ck_assert_int_eq(bench_rows_add(&rows, &r), 0);
    /* A name with a comma and a quote is quoted; an open loop has a rate. */
    strcpy(r.workload, "line-open");
    strcpy(r.server, "odd,\"name\"");
    strcpy(r.config, "-");
    r.concurrency = 16;
    r.rate = 50000;
    r.cpu_us_per_req = 0.000125;
    r.srv_user_us_per_req = 0.000025;
    r.srv_sys_us_per_req = 0.0001;
    r.peak_rss_kb = 10240;
    r.cores = 4;
    r.loadavg_before = 1.5;
    r.other_cpu_before = 0.25;
    r.other_cpu_during = 0.125;
    r.noisy = 1;
    ck_assert_int_eq(bench_rows_add(&rows, &r), 0);
    ck_assert_int_eq(bench_csv_write_header(f), 0);
    for (size_t i = 0; i < rows.len; i++)
        ck_assert_int_eq(bench_csv_write_row(f, &rows.v[i]), 0);
    ck_assert_int_eq(fclose(f), 0);

    /* cores: empty when not pinned; the noise empty when not measured. */
    ck_assert_str_eq(buf, BENCH_CSV_HEADER_NOISE
                     "\nhttp:hello.txt,cabrank,lf:lifo,64,0,123456.75,80.5,,1200,,,,,3,2,,,,,,,\n"
                     "line-open,\"odd,\"\"name\"\"\",-,16,50000,123456.75,80.5,,1200,,"
                     "0.000125,,10240,3,2,0.000025,0.0001,4,1.5,0.25,0.125,1\n");
    parse_ok(buf, &back);
    ck_assert_uint_eq(back.len, 2);
    for (size_t i = 0; i < 2; i++) {
        const struct bench_row *a = &rows.v[i];
        const struct bench_row *b = &back.v[i];

        ck_assert_str_eq(a->workload, b->workload);
        ck_assert_str_eq(a->server, b->server);
        ck_assert_str_eq(a->config, b->config);
        ck_assert_uint_eq(a->concurrency, b->concurrency);
        ck_assert(a->rate == b->rate && a->rps == b->rps && a->p50_us == b->p50_us &&
                  a->p99_us == b->p99_us && a->seconds == b->seconds);
        ck_assert(isnan(b->p90_us) && isnan(b->p999_us) && isnan(b->ctxsw_per_req));
        ck_assert(i == 0 ? isnan(b->cpu_us_per_req) : b->cpu_us_per_req == 0.000125);
        ck_assert(i == 0 ? isnan(b->srv_user_us_per_req) && isnan(b->srv_sys_us_per_req)
                         : b->srv_user_us_per_req == 0.000025 && b->srv_sys_us_per_req == 0.0001);
        ck_assert_uint_eq(a->errors, b->errors);
        ck_assert_uint_eq(a->cores, b->cores);
        ck_assert(i == 0 ? isnan(b->loadavg_before) && isnan(b->other_cpu_before) &&
                               isnan(b->other_cpu_during) && b->noisy == -1
                         : b->loadavg_before == 1.5 && b->other_cpu_before == 0.25 &&
                               b->other_cpu_during == 0.125 && b->noisy == 1);
    }
    free(buf);
    bench_rows_fini(&rows);
    bench_rows_fini(&back);
}
END_TEST

START_TEST(csv_accepts_crlf_blank_lines_and_no_final_newline)
{
    struct bench_rows rows = {0};

    parse_ok("\r\n" BENCH_CSV_HEADER "\r\n\r\nline,cabrank,hshr,1,,10,1,2,3,4,,,,0,1\r\n\n"
             "line,cabrank,hshr,2,0,20,1,2,3,4,,,,0,1e0",
             &rows);
    ck_assert_uint_eq(rows.len, 2);
    ck_assert(rows.v[0].rate == 0 && rows.v[1].seconds == 1);
    bench_rows_fini(&rows);
}
END_TEST

START_TEST(csv_reads_every_format_and_cores)
{
    struct bench_rows rows = {0};

    /* The second format has no cores (0); the third's empty field is 0 too. */
    parse_ok(BENCH_CSV_HEADER_SPLIT "\nline,cabrank,lf,1,0,10,1,2,3,4,,,,0,1,0.5,1.5\n", &rows);
    parse_ok(BENCH_CSV_HEADER_CORES "\nline,cabrank,lf,1,0,10,1,2,3,4,,,,0,1,0.5,1.5,8\n"
                                    "line,cabrank,lf,1,0,10,1,2,3,4,,,,0,1,,,\n",
             &rows);
    ck_assert_uint_eq(rows.len, 3);
    ck_assert_uint_eq(rows.v[0].cores, 0);
    ck_assert(rows.v[0].srv_sys_us_per_req == 1.5);
    ck_assert_uint_eq(rows.v[1].cores, 8);
    ck_assert(rows.v[1].srv_user_us_per_req == 0.5);
    ck_assert_uint_eq(rows.v[2].cores, 0);
    /* Before the fourth format, no noise was measured. */
    ck_assert(isnan(rows.v[1].other_cpu_during) && rows.v[1].noisy == -1);
    parse_ok(BENCH_CSV_HEADER_NOISE "\nline,cabrank,lf,1,0,10,1,2,3,4,,,,0,1,,,,2.5,0.5,0.05,1\n"
                                    "line,cabrank,lf,1,0,10,1,2,3,4,,,,0,1,,,,0.1,0,0.02,0\n"
                                    "line,cabrank,lf,1,0,10,1,2,3,4,,,,0,1,,,,,,,\n",
             &rows);
    ck_assert_uint_eq(rows.len, 6);
    ck_assert(rows.v[3].loadavg_before == 2.5 && rows.v[3].other_cpu_before == 0.5 &&
              rows.v[3].other_cpu_during == 0.05 && rows.v[3].noisy == 1);
    ck_assert(rows.v[4].other_cpu_before == 0 && rows.v[4].noisy == 0);
    ck_assert(isnan(rows.v[5].loadavg_before) && rows.v[5].noisy == -1);
    bench_rows_fini(&rows);
}
END_TEST

static const struct {
    const char *csv;
    unsigned line;
    const char *what; /* part of the message */
} bad_cases[] = {
    {"", 1, "no header"},
    {"\n\n", 3, "no header"},
    {"workload,server\n", 1, "header has 2 fields"},
    {"workload,server,config,concurrency,rate,rps,p50_us,p90_us,p99_us,p999_us,cpu_us_per_req,"
     "ctxsw_per_req,peak_rss_kb,errors,secs\n",
     1, "header field 15"},
    {HEADER "line,cabrank,lf,1,0,1,1,1,1,1,,,,0\n", 2, "14 fields"},
    {HEADER "line,cabrank,lf,1,0,1,1,1,1,1,,,,0,1,extra\n", 2, "16 fields"},
    {HEADER "\nline,cabrank,lf,1,0,abc,1,1,1,1,,,,0,1\n", 3, "rps is not"},
    {HEADER "line,cabrank,lf,1,0,-5,1,1,1,1,,,,0,1\n", 2, "rps is not"},
    {HEADER "line,cabrank,lf,1,0,inf,1,1,1,1,,,,0,1\n", 2, "rps is not"},
    {HEADER "line,cabrank,lf,1,0,nan,1,1,1,1,,,,0,1\n", 2, "rps is not"},
    {HEADER "line,cabrank,lf,1,0, 5,1,1,1,1,,,,0,1\n", 2, "rps is not"},
    {HEADER "line,cabrank,lf,1,0,0x10,1,1,1,1,,,,0,1\n", 2, "rps is not"},
    {HEADER "line,cabrank,lf,1,0,1e999,1,1,1,1,,,,0,1\n", 2, "rps is out of range"},
    {HEADER "line,cabrank,lf,1,0,1e,1,1,1,1,,,,0,1\n", 2, "rps is not"},
    {HEADER "line,cabrank,lf,0,0,1,1,1,1,1,,,,0,1\n", 2, "concurrency is 0"},
    {HEADER "line,cabrank,lf,,0,1,1,1,1,1,,,,0,1\n", 2, "concurrency is empty"},
    {HEADER "line,cabrank,lf,1.5,0,1,1,1,1,1,,,,0,1\n", 2, "concurrency is not"},
    {HEADER "line,cabrank,lf,99999999999,0,1,1,1,1,1,,,,0,1\n", 2, "concurrency is out"},
    {HEADER "line,cabrank,lf,1,0,1,1,1,1,1,,,,,1\n", 2, "errors is empty"},
    {HEADER "line,cabrank,lf,1,0,1,1,1,1,1,,,,99999999999999999999,1\n", 2, "errors is out"},
    {HEADER "line,,lf,1,0,1,1,1,1,1,,,,0,1\n", 2, "server is empty"},
    {HEADER "line,\"cab\trank\",lf,1,0,1,1,1,1,1,,,,0,1\n", 2, "control byte in server"},
    {HEADER "line,\"cab\nrank\",lf,1,0,1,1,1,1,1,,,,0,1\n", 2, "control byte in server"},
    {HEADER "line,\"cabrank,lf,1,0,1,1,1,1,1,,,,0,1\n", 2, "never closed"},
    {HEADER "line,\"cab\"rank,lf,1,0,1,1,1,1,1,,,,0,1\n", 2, "after the closing quote"},
    {HEADER "line,cab\"rank\",lf,1,0,1,1,1,1,1,,,,0,1\n", 2, "quote inside"},
    {HEADER "line,cabrank,lf,1,0,1,1,1,1,1,,,,0,1\n"
            "line,cabrank,lf,1,0,1,1,1,1,1,,,,0,1\n"
            "line,cabrank,lf,1,0,1,1,1,1,1,,,,0\n",
     4, "14 fields"},
    {HEADER "line,cabrank,"
            "a234567890123456789012345678901234567890123456789012345678901234,1,0,1,1,1,1,1,,,,"
            "0,1\n",
     2, "longer than 63"},
    {BENCH_CSV_HEADER_CORES "\nline,cabrank,lf,1,0,1,1,1,1,1,,,,0,1,,\n", 2, "17 fields"},
    {BENCH_CSV_HEADER_CORES "\nline,cabrank,lf,1,0,1,1,1,1,1,,,,0,1,,,x\n", 2, "cores is not"},
    {BENCH_CSV_HEADER_CORES "\nline,cabrank,lf,1,0,1,1,1,1,1,,,,0,1,,,70000\n", 2, "cores is out"},
    {BENCH_CSV_HEADER_SPLIT ",core\n", 1, "header field 18"},
    {BENCH_CSV_HEADER_NOISE "\nline,cabrank,lf,1,0,1,1,1,1,1,,,,0,1,,,,,,\n", 2, "21 fields"},
    {BENCH_CSV_HEADER_NOISE "\nline,cabrank,lf,1,0,1,1,1,1,1,,,,0,1,,,,1,0.5,0.5,2\n", 2,
     "noisy is out"},
    {BENCH_CSV_HEADER_NOISE "\nline,cabrank,lf,1,0,1,1,1,1,1,,,,0,1,,,,1,0.5,0.5,yes\n", 2,
     "noisy is not"},
    {BENCH_CSV_HEADER_NOISE "\nline,cabrank,lf,1,0,1,1,1,1,1,,,,0,1,,,,1,1.5,0.5,1\n", 2,
     "above 1"},
    {BENCH_CSV_HEADER_NOISE "\nline,cabrank,lf,1,0,1,1,1,1,1,,,,0,1,,,,-1,0.5,0.5,1\n", 2,
     "loadavg_before is not"},
    {BENCH_CSV_HEADER_CORES ",loadavg\n", 1, "header has 19 fields"},
};

START_TEST(csv_rejects_malformed_input_with_line)
{
    const char *csv = bad_cases[_i].csv;
    struct bench_rows rows = {0};
    struct bench_csv_error e;
    char want[32];
    int rc = bench_csv_parse(csv, strlen(csv), &rows, &e);

    ck_assert_msg(rc == -EBADMSG, "case %d: rc %d", _i, rc);
    ck_assert_msg(e.line == bad_cases[_i].line, "case %d: line %u, want %u (%s)", _i, e.line,
                  bad_cases[_i].line, e.msg);
    snprintf(want, sizeof(want), "line %u: ", bad_cases[_i].line);
    ck_assert_msg(strncmp(e.msg, want, strlen(want)) == 0, "case %d: %s", _i, e.msg);
    ck_assert_msg(strstr(e.msg, bad_cases[_i].what) != NULL, "case %d: %s", _i, e.msg);
    /* No error structure: the same answer. */
    ck_assert_int_eq(bench_csv_parse(csv, strlen(csv), &rows, NULL), -EBADMSG);
    bench_rows_fini(&rows);
}
END_TEST

START_TEST(csv_rejects_nul_byte)
{
    static const char csv[] = HEADER "line,cab\0rank,lf,1,0,1,1,1,1,1,,,,0,1\n";
    struct bench_rows rows = {0};
    struct bench_csv_error e;

    ck_assert_int_eq(bench_csv_parse(csv, sizeof(csv) - 1, &rows, &e), -EBADMSG);
    ck_assert_uint_eq(e.line, 2);
    ck_assert_ptr_nonnull(strstr(e.msg, "NUL"));
    bench_rows_fini(&rows);
}
END_TEST

/* Each prefix of a valid file, copied to its own heap block so ASan sees any over-read. */
START_TEST(csv_every_prefix_parses_or_fails_cleanly)
{
    static const char csv[] =
        HEADER "http:hello.txt,\"a,\"\"b\",lf:lifo,64,0,1.5,2,3,4,5,6,7,8,9,10\n"
               "line,cabrank,hshr,1,,,,,,,,,,0,\n";
    size_t len = sizeof(csv) - 1;

    for (size_t n = 0; n <= len; n++) {
        struct bench_rows rows = {0};
        struct bench_csv_error e;
        char *copy = malloc(n ? n : 1);
        int rc;

        ck_assert_ptr_nonnull(copy);
        memcpy(copy, csv, n);
        rc = bench_csv_parse(copy, n, &rows, &e);
        ck_assert_msg(rc == 0 || rc == -EBADMSG, "prefix %zu: %d", n, rc);
        if (rc == -EBADMSG)
            ck_assert(e.line >= 1 && e.line <= 3);
        if (n == len)
            ck_assert(rc == 0 && rows.len == 2);
        free(copy);
        bench_rows_fini(&rows);
    }
}
END_TEST

START_TEST(csv_read_file_and_missing_file)
{
    char path[] = "/tmp/bench-report-XXXXXX";
    int fd = mkstemp(path);
    static const char csv[] = HEADER "line,cabrank,lf:lifo,1,0,10,1,2,3,4,,,,0,1\n";
    struct bench_rows rows = {0};
    struct bench_csv_error e;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, csv, sizeof(csv) - 1), (ssize_t)(sizeof(csv) - 1));
    close(fd);
    ck_assert_int_eq(bench_csv_read_file(path, &rows, &e), 0);
    ck_assert_uint_eq(rows.len, 1);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(bench_csv_read_file(path, &rows, &e), -ENOENT);
    bench_rows_fini(&rows);
}
END_TEST

START_TEST(csv_write_rejects_bad_names_and_numbers)
{
    struct bench_row r;
    FILE *f = tmpfile();

    ck_assert_ptr_nonnull(f);
    bench_row_init(&r);
    strcpy(r.workload, "line");
    strcpy(r.server, "cabrank");
    ck_assert_int_eq(bench_csv_write_row(f, &r), -EINVAL); /* empty config */
    strcpy(r.config, "lf");
    r.concurrency = 0;
    ck_assert_int_eq(bench_csv_write_row(f, &r), -EINVAL);
    r.concurrency = 1;
    ck_assert_int_eq(bench_csv_write_row(f, &r), 0);
    /* Numbers the reader would refuse are refused, before any byte is written. */
    r.rps = -1;
    ck_assert_int_eq(bench_csv_write_row(f, &r), -ERANGE);
    r.rps = INFINITY;
    ck_assert_int_eq(bench_csv_write_row(f, &r), -ERANGE);
    r.rps = 2 * BENCH_VALUE_MAX;
    ck_assert_int_eq(bench_csv_write_row(f, &r), -ERANGE);
    r.rps = NAN;
    r.seconds = -0.5;
    ck_assert_int_eq(bench_csv_write_row(f, &r), -ERANGE);
    r.seconds = NAN;
    r.srv_sys_us_per_req = -1;
    ck_assert_int_eq(bench_csv_write_row(f, &r), -ERANGE);
    r.srv_sys_us_per_req = NAN;
    r.cores = 65537;
    ck_assert_int_eq(bench_csv_write_row(f, &r), -EINVAL);
    r.cores = 0;
    /* A share of the machine's CPU is at most 1; noisy is -1, 0 or 1. */
    r.other_cpu_during = 1.5;
    ck_assert_int_eq(bench_csv_write_row(f, &r), -ERANGE);
    r.other_cpu_during = NAN;
    r.other_cpu_before = -0.1;
    ck_assert_int_eq(bench_csv_write_row(f, &r), -ERANGE);
    r.other_cpu_before = NAN;
    r.noisy = 2;
    ck_assert_int_eq(bench_csv_write_row(f, &r), -EINVAL);
    ck_assert_int_eq(ftell(f), 0 + (long)strlen("line,cabrank,lf,1,0,,,,,,,,,0,,,,,,,,\n"));
    fclose(f);
}
END_TEST

/* ------------------------------------------------------------------------------- Markdown */

START_TEST(markdown_of_known_csv)
{
    static const char csv[] =
        HEADER "http:hello.txt,nginx,-,64,0,90000,500,800,1200,2000,,,5120,0,2\n"
               "http:hello.txt,cabrank,lf:lifo,64,0,120000.4,400,700,1000,1500.25,6.5,0.08,8192,"
               "0,2\n"
               "http:hello.txt,cabrank,lf:lifo,1,0,15000,60,70,90,120,7,0.1,8000,2,2\n"
               "line-open,cabrank,a|b*,1,5000,4990,12.25,,,,,,,0,2\n";
    static const char want[] =
        "# lab\n"
        "\n"
        "Date: 2026-11-22  \n"
        "Command: `cabrank-bench --quick`  \n"
        "\n"
        "## http:hello.txt\n"
        "\n"
        "| server | config | conns | rate | req/s | p50 µs | p90 µs | p99 µs | p99.9 µs | CPU "
        "µs/req "
        "| ctxsw/req | peak RSS KiB | errors |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        "| nginx | - | 64 | - | 90000 | 500.0 | 800.0 | 1200 | 2000 | - | - | 5120 | 0 |\n"
        "| cabrank | lf:lifo | 1 | - | 15000 | 60.0 | 70.0 | 90.0 | 120.0 | 7.00 | 0.10 | 8000 "
        "| 2 |\n"
        "| cabrank | lf:lifo | 64 | - | 120000 | 400.0 | 700.0 | 1000 | 1500 | 6.50 | 0.08 | 8192 "
        "| 0 |\n"
        "\n"
        "![http:hello.txt](plot-http-hello.txt.svg)\n"
        "\n"
        "## line-open\n"
        "\n"
        "| server | config | conns | rate | req/s | p50 µs | p90 µs | p99 µs | p99.9 µs | CPU "
        "µs/req "
        "| ctxsw/req | peak RSS KiB | errors |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        "| cabrank | a\\|b\\* | 1 | 5000 | 4990 | 12.2 | - | - | - | - | - | - | 0 |\n"
        "\n"
        "![line-open](plot-line-open.svg)\n"
        "\n"
        "## Winners\n"
        "\n"
        "Highest req/s at the highest concurrency measured (interval workloads: lowest p99), and "
        "the ratio to the runner-up.\n"
        "\n"
        "| workload | winner | conns | result | runner-up | ratio |\n"
        "|---|---|---:|---:|---|---:|\n"
        "| http:hello.txt | cabrank lf:lifo | 64 | 120000 req/s | nginx | 1.33x |\n"
        "| line-open | cabrank a\\|b\\* | 1 | 4990 req/s | - | - |\n"
        "\n"
        "## The papers' claims\n"
        "\n"
        "Each measure is a ratio, above 1 in the claim's direction, taken once per repetition: the "
        "k-th run of one side against the k-th of the other (--repeat runs the claims' points "
        "again, the configurations in alternating order). The ratio shown is the median, the "
        "spread the smallest and largest. Held: every repetition's ratio is above the threshold; "
        "not held: every one is below it; not separable: the spread reaches the threshold (a tie "
        "included), or fewer than 3 repetitions were measured.\n"
        "\n"
        "| claim | measure | threshold | ratio | spread | reps | verdict | measured on |\n"
        "|---|---|---:|---:|---:|---:|---|---|\n"
        "| L/F has lower latency than HS/HR at low load (no hand-off between threads) | p50 hshr / "
        "lf | > 1.25 | - | - | 0 | not measured | no rows of both sides |\n"
        "| L/F has at least HS/HR's throughput at high load | req/s lf / hshr | > 1.00 | - | - | 0 "
        "| not measured | no rows of both sides |\n"
        "| LIFO promotion beats FIFO (the warm thread leads again; neither deferred) | req/s "
        "lf:lifo / lf:fifo | > 1.00 | - | - | 0 | not measured | no rows of both sides |\n"
        "| Deferring promotion (lifo) beats promoting before every event | req/s lf:lifo+defer / "
        "lf:lifo | > 1.00 | - | - | 0 | not measured | no rows of both sides |\n"
        "| A prefork pool connects faster than forking a process per connection (t_conn) | t_conn "
        "p50 forking / prefork | > 1.00 | - | - | 0 | not measured | no rows of both sides |\n"
        "| A prefork pool answers the first request faster than forking (t_res1) | t_res1 p50 "
        "forking / prefork | > 1.00 | - | - | 0 | not measured | no rows of both sides |\n"
        "| The Proactor serves at least L/F's throughput | req/s proactor / lf:lifo | > 1.00 | - | "
        "- | 0 | not measured | no rows of both sides |\n"
        "\n";
    struct bench_report_info info = {
        .title = "lab", .date = "2026-11-22", .command = "cabrank-bench --quick"};
    struct bench_rows rows = {0};
    char *md;

    parse_ok(csv, &rows);
    md = render(md_fn, &rows, &info);
    ck_assert_str_eq(md, want);
    free(md);
    bench_rows_fini(&rows);
}
END_TEST

START_TEST(markdown_of_no_rows)
{
    struct bench_rows rows = {0};
    char *md = render(md_fn, &rows, NULL);

    ck_assert_ptr_nonnull(strstr(md, "# cabrank-bench results\n\nNo results.\n"));
    ck_assert_ptr_nonnull(strstr(md, "No workload has a measured result.\n"));
    ck_assert_uint_eq(count(md, "| not measured |"), BENCH_CLAIMS);
    free(md);
}
END_TEST

/* -------------------------------------------------------------------------------- winners */

START_TEST(winner_is_best_at_highest_concurrency)
{
    /* hshr has the most req/s overall but not at 256, the highest concurrency measured. */
    static const char csv[] = HEADER "line,cabrank,hshr,64,0,200000,,,,,,,,0,1\n"
                                     "line,cabrank,hshr,256,0,90000,,,,,,,,0,1\n"
                                     "line,cabrank,lf:lifo,64,0,150000,,,,,,,,0,1\n"
                                     "line,cabrank,lf:lifo,256,0,120000,,,,,,,,0,1\n"
                                     "line,cabrank,tpc,256,0,100000,,,,,,,,0,1\n"
                                     "line,cabrank,tpc,256,0,80000,,,,,,,,0,1\n"
                                     "line,nginx,-,64,0,300000,,,,,,,,0,1\n"
                                     "line,h2o,-,256,0,,,,,,,,,0,1\n"
                                     "interval:t_res1,cabrank,forking,1,0,0,,,900,,,,,0,1\n"
                                     "interval:t_res1,cabrank,prefork,1,0,0,,,300,,,,,0,1\n"
                                     "interval:t_res1,cabrank,lf:lifo,1,0,0,,,200,,,,,0,1\n"
                                     "interval:t_res1,cabrank,tpc,1,0,0,,,0,,,,,0,1\n"
                                     "line-open,cabrank,lf:lifo,8,1000,,,,,,,,,0,1\n";
    struct bench_rows rows = {0};
    struct bench_winner w;

    parse_ok(csv, &rows);
    ck_assert_int_eq(bench_winner_find(&rows, "line", &w), 0);
    ck_assert_str_eq(w.workload, "line");
    ck_assert_str_eq(w.best->config, "lf:lifo");
    ck_assert_uint_eq(w.best->concurrency, 256);
    /* tpc's better point at 256 (100000) is its entry; h2o measured nothing. */
    ck_assert_str_eq(w.runner_up->config, "tpc");
    ck_assert_double_eq_tol(w.ratio, 1.2, 1e-9);
    ck_assert(!w.lower_is_better);

    ck_assert_int_eq(bench_winner_find(&rows, "interval:t_res1", &w), 0);
    ck_assert(w.lower_is_better);
    ck_assert_str_eq(w.best->config, "lf:lifo");
    /* tpc's p99 of 0 µs is no measurement, not a win. */
    ck_assert_str_eq(w.runner_up->config, "prefork");
    ck_assert_double_eq_tol(w.ratio, 1.5, 1e-9);

    ck_assert_int_eq(bench_winner_find(&rows, "line-open", &w), -ENOENT);
    ck_assert_int_eq(bench_winner_find(&rows, "http:1m.bin", &w), -ENOENT);
    bench_rows_fini(&rows);
}
END_TEST

/* --------------------------------------------------------------------------------- claims */

static const struct bench_claim *claim_about(const struct bench_claim *c, const char *metric)
{
    for (size_t i = 0; i < BENCH_CLAIMS; i++)
        if (strcmp(c[i].metric, metric) == 0)
            return &c[i];
    ck_abort_msg("no claim on %s", metric);
    return NULL;
}

/* Parses csv into rows three times over: each point measured in three repetitions. */
static void parse_thrice(const char *csv, struct bench_rows *rows)
{
    for (int k = 0; k < BENCH_CLAIM_MIN_REPS; k++)
        parse_ok(csv, rows);
}

START_TEST(claims_held_not_held_not_measured)
{
    /*
     * Every point three times, alike (no spread). line: lf:lifo p50 10 vs hshr 20 at 1 (held,
     * 2x); at 64 lf:lifo 100k vs hshr 125k (not held, 0.8x); fifo only at 1, so LIFO vs FIFO
     * compares at 1 (the highest both have). proactor:lf and proactor:single: the best
     * (single, 110k) against lf:lifo at 64. Intervals: forking t_conn 3x prefork (held); t_res1
     * cheaper forking (not held). A peer's rows never count; no deferred rows.
     */
    static const char csv[] = HEADER "line,cabrank,lf:lifo,1,0,9000,10,,,,,,,0,1\n"
                                     "line,cabrank,lf:lifo,64,0,100000,50,,,,,,,0,1\n"
                                     "line,cabrank,hshr,1,0,8000,20,,,,,,,0,1\n"
                                     "line,cabrank,hshr,64,0,125000,40,,,,,,,0,1\n"
                                     "line,cabrank,lf:fifo,1,0,6000,30,,,,,,,0,1\n"
                                     "line,cabrank,proactor:lf,64,0,90000,,,,,,,,0,1\n"
                                     "line,cabrank,proactor:single,64,0,110000,,,,,,,,0,1\n"
                                     "line,nginx,hshr,64,0,999999,1,,,,,,,0,1\n"
                                     "interval:t_conn,cabrank,forking,1,0,0,300,,,,,,,0,1\n"
                                     "interval:t_conn,cabrank,prefork,1,0,0,100,,,,,,,0,1\n"
                                     "interval:t_res1,cabrank,forking,1,0,0,100,,,,,,,0,1\n"
                                     "interval:t_res1,cabrank,prefork,1,0,0,125,,,,,,,0,1\n";
    struct bench_rows rows = {0};
    struct bench_claim c[BENCH_CLAIMS];
    const struct bench_claim *x;

    parse_thrice(csv, &rows);
    bench_claims_eval(&rows, c);

    x = claim_about(c, "p50 hshr / lf");
    ck_assert_int_eq(x->verdict, BENCH_HELD);
    ck_assert_double_eq_tol(x->ratio, 2.0, 1e-9);
    ck_assert_uint_eq(x->reps, 3);
    ck_assert_double_eq_tol(x->threshold, 1.25, 1e-9);
    ck_assert_str_eq(x->where, "line, 1 conn, lf:lifo vs hshr");

    x = claim_about(c, "req/s lf / hshr");
    ck_assert_int_eq(x->verdict, BENCH_NOT_HELD);
    ck_assert_double_eq_tol(x->ratio, 0.8, 1e-9);
    ck_assert_str_eq(x->where, "line, 64 conns, lf:lifo vs hshr");

    x = claim_about(c, "req/s lf:lifo / lf:fifo");
    ck_assert_int_eq(x->verdict, BENCH_HELD);
    ck_assert_double_eq_tol(x->ratio, 1.5, 1e-9);
    ck_assert_str_eq(x->where, "line, 1 conn, lf:lifo vs lf:fifo");

    x = claim_about(c, "req/s proactor / lf:lifo");
    ck_assert_int_eq(x->verdict, BENCH_HELD);
    ck_assert_double_eq_tol(x->ratio, 1.1, 1e-9);
    ck_assert_str_eq(x->where, "line, 64 conns, proactor:single vs lf:lifo");

    x = claim_about(c, "t_conn p50 forking / prefork");
    ck_assert_int_eq(x->verdict, BENCH_HELD);
    ck_assert_double_eq_tol(x->ratio, 3.0, 1e-9);

    x = claim_about(c, "t_res1 p50 forking / prefork");
    ck_assert_int_eq(x->verdict, BENCH_NOT_HELD);
    ck_assert_double_eq_tol(x->ratio, 0.8, 1e-9);

    ck_assert_int_eq(claim_about(c, "req/s lf:lifo+defer / lf:lifo")->verdict, BENCH_NOT_MEASURED);
    bench_rows_fini(&rows);

    /* One repetition: no spread, so nothing can be told apart, however large the ratio. */
    parse_ok(csv, &rows);
    bench_claims_eval(&rows, c);
    x = claim_about(c, "t_conn p50 forking / prefork");
    ck_assert_int_eq(x->verdict, BENCH_NOT_SEPARABLE);
    ck_assert_uint_eq(x->reps, 1);
    ck_assert_double_eq_tol(x->ratio, 3.0, 1e-9);
    bench_rows_fini(&rows);

    /* Only one side of each: nothing measured. */
    parse_ok(HEADER "line,cabrank,lf:lifo,1,0,9000,10,,,,,,,0,1\n"
                    "interval:t_conn,cabrank,forking,1,0,0,300,,,,,,,0,1\n",
             &rows);
    bench_claims_eval(&rows, c);
    for (size_t i = 0; i < BENCH_CLAIMS; i++) {
        ck_assert_int_eq(c[i].verdict, BENCH_NOT_MEASURED);
        ck_assert(isnan(c[i].ratio));
        ck_assert_uint_eq(c[i].reps, 0);
        ck_assert_str_eq(bench_verdict_name(c[i].verdict), "not measured");
    }
    ck_assert_str_eq(bench_verdict_name(BENCH_HELD), "held");
    ck_assert_str_eq(bench_verdict_name(BENCH_NOT_HELD), "not held");
    ck_assert_str_eq(bench_verdict_name(BENCH_NOT_SEPARABLE), "not separable");
    bench_rows_fini(&rows);
}
END_TEST

/* The judge on synthetic repetitions: the whole spread must be past the threshold. */
START_TEST(judge_needs_the_whole_spread_past_the_threshold)
{
    static const struct {
        double r[4];
        size_t n;
        double threshold;
        enum bench_verdict want;
        double median;
        double lo;
        double hi;
    } cases[] = {
        /* A tie: the old rule (ratio >= threshold) called it held. */
        {{1.0, 1.0, 1.0}, 3, 1.0, BENCH_NOT_SEPARABLE, 1.0, 1.0, 1.0},
        {{1.30, 1.25, 1.40}, 3, 1.0, BENCH_HELD, 1.30, 1.25, 1.40},
        {{0.70, 0.80, 0.75}, 3, 1.0, BENCH_NOT_HELD, 0.75, 0.70, 0.80},
        /* The spread reaches over the threshold: a median above it is no win. */
        {{0.95, 1.10, 1.20}, 3, 1.0, BENCH_NOT_SEPARABLE, 1.10, 0.95, 1.20},
        {{1.01, 1.02, 1.00, 1.03}, 4, 1.0, BENCH_NOT_SEPARABLE, 1.015, 1.00, 1.03},
        /* Above 1 but not above the threshold of 1.25. */
        {{1.20, 1.10, 1.15}, 3, 1.25, BENCH_NOT_HELD, 1.15, 1.10, 1.20},
        {{1.30, 1.20, 1.40}, 3, 1.25, BENCH_NOT_SEPARABLE, 1.30, 1.20, 1.40},
        /* Too few repetitions to know the spread, however clear they look. */
        {{5.0, 5.0}, 2, 1.0, BENCH_NOT_SEPARABLE, 5.0, 5.0, 5.0},
        /* A repetition not measured is left out. */
        {{2.0, NAN, 2.2, 2.1}, 4, 1.0, BENCH_HELD, 2.1, 2.0, 2.2},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct bench_claim c;

        memset(&c, 0, sizeof(c));
        bench_claim_judge(cases[i].r, cases[i].n, cases[i].threshold, &c);
        ck_assert_msg(c.verdict == cases[i].want, "case %zu: %s, want %s", i,
                      bench_verdict_name(c.verdict), bench_verdict_name(cases[i].want));
        ck_assert_double_eq_tol(c.ratio, cases[i].median, 1e-9);
        ck_assert_double_eq_tol(c.lo, cases[i].lo, 1e-9);
        ck_assert_double_eq_tol(c.hi, cases[i].hi, 1e-9);
        ck_assert_double_eq_tol(c.threshold, cases[i].threshold, 1e-9);
    }
    {
        struct bench_claim c;

        bench_claim_judge(NULL, 0, 1.0, &c);
        ck_assert_int_eq(c.verdict, BENCH_NOT_MEASURED);
        ck_assert(isnan(c.ratio) && isnan(c.lo) && isnan(c.hi));
        ck_assert_uint_eq(c.reps, 0);
    }
}
END_TEST

/*
 * Repetitions read from rows, paired in run order: a t_conn tie is not separable (the old
 * single-ratio rule held it), LIFO against FIFO compares the undeferred lifo (whose best run
 * edges FIFO's best, which the old rule held) and the deferral is judged on its own.
 */
START_TEST(claims_pair_repetitions_and_keep_the_deferral_apart)
{
    static const char csv[] = HEADER "interval:t_conn,cabrank,prefork,1,0,0,100,,,,,,,0,1\n"
                                     "interval:t_conn,cabrank,forking,1,0,0,101,,,,,,,0,1\n"
                                     "interval:t_conn,cabrank,forking,1,0,0,99,,,,,,,0,1\n"
                                     "interval:t_conn,cabrank,prefork,1,0,0,100,,,,,,,0,1\n"
                                     "interval:t_conn,cabrank,prefork,1,0,0,100,,,,,,,0,1\n"
                                     "interval:t_conn,cabrank,forking,1,0,0,100,,,,,,,0,1\n"
                                     "http:hello.txt,cabrank,lf:lifo+defer,64,0,130000,,,,,,,,0,1\n"
                                     "http:hello.txt,cabrank,lf:lifo,64,0,100000,,,,,,,,0,1\n"
                                     "http:hello.txt,cabrank,lf:fifo,64,0,101000,,,,,,,,0,1\n"
                                     "http:hello.txt,cabrank,lf:fifo,64,0,99000,,,,,,,,0,1\n"
                                     "http:hello.txt,cabrank,lf:lifo,64,0,102000,,,,,,,,0,1\n"
                                     "http:hello.txt,cabrank,lf:lifo+defer,64,0,131000,,,,,,,,0,1\n"
                                     "http:hello.txt,cabrank,lf:lifo+defer,64,0,129000,,,,,,,,0,1\n"
                                     "http:hello.txt,cabrank,lf:lifo,64,0,98000,,,,,,,,0,1\n"
                                     "http:hello.txt,cabrank,lf:fifo,64,0,100000,,,,,,,,0,1\n"
                                     "http:hello.txt,cabrank,hshr,64,0,90000,,,,,,,,0,1\n"
                                     "http:hello.txt,cabrank,hshr,64,0,112000,,,,,,,,0,1\n"
                                     "http:hello.txt,cabrank,hshr,64,0,91000,,,,,,,,0,1\n";
    struct bench_rows rows = {0};
    struct bench_claim c[BENCH_CLAIMS];
    const struct bench_claim *x;

    parse_ok(csv, &rows);
    bench_claims_eval(&rows, c);

    x = claim_about(c, "t_conn p50 forking / prefork");
    ck_assert_int_eq(x->verdict, BENCH_NOT_SEPARABLE);
    ck_assert_uint_eq(x->reps, 3);
    ck_assert_double_eq_tol(x->lo, 0.99, 1e-9);
    ck_assert_double_eq_tol(x->hi, 1.01, 1e-9);

    /* 100/101, 102/99, 98/100: the orders alike, nothing deferred. */
    x = claim_about(c, "req/s lf:lifo / lf:fifo");
    ck_assert_int_eq(x->verdict, BENCH_NOT_SEPARABLE);
    ck_assert_str_eq(x->where, "http:hello.txt, 64 conns, lf:lifo vs lf:fifo");
    ck_assert_double_eq_tol(x->lo, 0.98, 1e-9);

    x = claim_about(c, "req/s lf:lifo+defer / lf:lifo");
    ck_assert_int_eq(x->verdict, BENCH_HELD);
    ck_assert_str_eq(x->where, "http:hello.txt, 64 conns, lf:lifo+defer vs lf:lifo");
    ck_assert_double_eq_tol(x->ratio, 1.3, 1e-9);
    ck_assert_double_eq_tol(x->lo, 131.0 / 102, 1e-9);
    ck_assert_double_eq_tol(x->hi, 129.0 / 98, 1e-9);

    /* L/F is the undeferred lifo; one run of hshr's beats it: not separable. */
    x = claim_about(c, "req/s lf / hshr");
    ck_assert_int_eq(x->verdict, BENCH_NOT_SEPARABLE);
    ck_assert_str_eq(x->where, "http:hello.txt, 64 conns, lf:lifo vs hshr");
    bench_rows_fini(&rows);
}
END_TEST

/* claims.csv: every claim, a claim that did not hold too, with its measure, threshold and spread;
 * once per core count for pinned rows. */
START_TEST(claims_csv_has_every_claim_with_its_spread)
{
    static const char csv[] = HEADER "line,cabrank,lf:lifo,64,0,100000,50,,,,,,,0,1\n"
                                     "line,cabrank,hshr,64,0,125000,40,,,,,,,0,1\n";
    static const char pinned[] =
        BENCH_CSV_HEADER_CORES "\n"
                               "line,cabrank,lf:lifo,64,0,100000,50,,,,,,,0,1,,,2\n"
                               "line,cabrank,hshr,64,0,80000,40,,,,,,,0,1,,,2\n"
                               "line,cabrank,lf:lifo,64,0,100000,50,,,,,,,0,1,,,1\n";
    struct bench_rows rows = {0};
    char *out;

    parse_thrice(csv, &rows);
    out = render(claims_csv_fn, &rows, NULL);
    ck_assert_msg(strncmp(out,
                          "cores,claim,measure,threshold,ratio,ratio_min,ratio_max,repetitions,"
                          "verdict,measured_on,noisy_repetitions\n",
                          strlen(BENCH_CLAIMS_CSV_HEADER) + 1) == 0,
                  "%s", out);
    ck_assert_uint_eq(count(out, "\n"), 1 + BENCH_CLAIMS);
    ck_assert_msg(strstr(out, ",L/F has at least HS/HR's throughput at high load,req/s lf / hshr,"
                              "1,0.8,0.8,0.8,3,not held,\"line, 64 conns, lf:lifo vs hshr\",0\n") !=
                      NULL,
                  "%s", out);
    ck_assert_ptr_nonnull(strstr(out, ",p50 hshr / lf,1.25,0.8,0.8,0.8,3,not held,"));
    ck_assert_ptr_nonnull(strstr(out, ",t_conn p50 forking / prefork,1,,,,0,not measured,"
                                      "no rows of both sides,0\n"));
    free(out);
    bench_rows_fini(&rows);

    parse_thrice(pinned, &rows);
    out = render(claims_csv_fn, &rows, NULL);
    ck_assert_uint_eq(count(out, "\n"), 1 + 2 * BENCH_CLAIMS);
    ck_assert_ptr_nonnull(strstr(out, "\n1,L/F has at least HS/HR's throughput at high load,"
                                      "req/s lf / hshr,1,,,,0,not measured,"));
    ck_assert_ptr_nonnull(strstr(out, "\n2,L/F has at least HS/HR's throughput at high load,"
                                      "req/s lf / hshr,1,1.25,1.25,1.25,3,held,"));
    free(out);
    bench_rows_fini(&rows);
}
END_TEST

START_TEST(claims_fall_back_to_http_hello)
{
    static const char csv[] = HEADER "http:hello.txt,cabrank,lf:lifo,4,0,1000,10,,,,,,,0,1\n"
                                     "http:hello.txt,cabrank,hshr,4,0,500,25,,,,,,,0,1\n";
    struct bench_rows rows = {0};
    struct bench_claim c[BENCH_CLAIMS];

    parse_thrice(csv, &rows);
    bench_claims_eval(&rows, c);
    ck_assert_int_eq(claim_about(c, "p50 hshr / lf")->verdict, BENCH_HELD);
    ck_assert_str_eq(claim_about(c, "p50 hshr / lf")->where,
                     "http:hello.txt, 4 conns, lf:lifo vs hshr");
    ck_assert_int_eq(claim_about(c, "req/s lf / hshr")->verdict, BENCH_HELD);
    bench_rows_fini(&rows);
}
END_TEST

/* ------------------------------------------------------------------------------------ SVG */

/*
 * A small XML well-formedness checker: one optional <?xml?> declaration, comments, exactly one
 * root element, properly nested start/end tags with matching names, attributes quoted and
 * unique, '<' never in text or attribute values, '&' only as a known entity or a character
 * reference, only printable ASCII and whitespace (our SVG promises ASCII). Returns NULL or the
 * first problem.
 */
static const char *xml_check(const char *s, char *root, size_t root_cap)
{
    char stack[64][64];
    size_t depth = 0;
    int roots = 0;
    const char *p = s;

    for (const char *q = s; *q != '\0'; q++)
        if (((unsigned char)*q < 0x20 && *q != '\n' && *q != '\t' && *q != '\r') ||
            (unsigned char)*q >= 0x7f)
            return "byte outside printable ASCII";
    if (strncmp(p, "<?xml ", 6) == 0) {
        p = strstr(p, "?>");
        if (p == NULL)
            return "unterminated declaration";
        p += 2;
    }
    while (*p != '\0') {
        if (*p == '&') {
            static const char *const ents[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
            bool ok = false;

            for (size_t i = 0; i < 5 && !ok; i++)
                ok = strncmp(p, ents[i], strlen(ents[i])) == 0;
            if (!ok && p[1] == '#') {
                const char *q = p + 2;

                while (*q >= '0' && *q <= '9')
                    q++;
                ok = q > p + 2 && *q == ';';
            }
            if (!ok)
                return "bad entity in text";
            p++;
            continue;
        }
        if (*p != '<') {
            if (depth == 0 && *p != ' ' && *p != '\n' && *p != '\t' && *p != '\r')
                return "text outside the root";
            p++;
            continue;
        }
        if (strncmp(p, "<!--", 4) == 0) {
            p = strstr(p + 4, "-->");
            if (p == NULL)
                return "unterminated comment";
            p += 3;
            continue;
        }
        if (p[1] == '/') {
            size_t n = strcspn(p + 2, ">");

            if (p[2 + n] != '>')
                return "unterminated end tag";
            if (depth == 0 || strlen(stack[depth - 1]) != n || strncmp(stack[depth - 1], p + 2, n))
                return "end tag does not match";
            depth--;
            p += 3 + n;
            continue;
        }
        /* A start tag: name, attributes, '>' or '/>'. */
        {
            char names[32][64];
            size_t nattr = 0;
            size_t n;

            p++;
            n = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:.");
            if (n == 0 || n >= 64 || (*p >= '0' && *p <= '9'))
                return "bad element name";
            if (depth == 0) {
                if (roots++ > 0)
                    return "second root element";
                snprintf(root, root_cap, "%.*s", (int)n, p);
            }
            if (depth == 64)
                return "too deep";
            memcpy(stack[depth], p, n);
            stack[depth][n] = '\0';
            p += n;
            for (;;) {
                size_t an;
                char quote;

                while (*p == ' ' || *p == '\n' || *p == '\t')
                    p++;
                if (*p == '>') {
                    depth++;
                    p++;
                    break;
                }
                if (p[0] == '/' && p[1] == '>') {
                    p += 2;
                    break;
                }
                an =
                    strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:.");
                if (an == 0 || an >= 64 || p[an] != '=' || (p[an + 1] != '"' && p[an + 1] != '\''))
                    return "bad attribute";
                for (size_t i = 0; i < nattr; i++)
                    if (strlen(names[i]) == an && strncmp(names[i], p, an) == 0)
                        return "duplicate attribute";
                if (nattr == 32)
                    return "too many attributes";
                memcpy(names[nattr], p, an);
                names[nattr++][an] = '\0';
                quote = p[an + 1];
                p += an + 2;
                while (*p != quote) {
                    if (*p == '\0' || *p == '<')
                        return "bad attribute value";
                    if (*p == '&' && strncmp(p, "&amp;", 5) && strncmp(p, "&lt;", 4) &&
                        strncmp(p, "&gt;", 4) && strncmp(p, "&quot;", 6) && strncmp(p, "&apos;", 6))
                        return "bad entity in attribute";
                    p++;
                }
                p++;
                if (*p != ' ' && *p != '\n' && *p != '>' && *p != '/')
                    return "no space after attribute";
            }
        }
    }
    if (depth != 0)
        return "unclosed element";
    if (roots != 1)
        return "no root element";
    return NULL;
}

START_TEST(xml_checker_rejects_broken_documents)
{
    static const char *const bad[] = {
        "<a><b></a></b>", "<a>x &y; </a>", "<a x=\"1\" x=\"2\"/>", "<a x=1/>", "<a/><b/>", "<a>",
        "text<a/>",       "<a x=\"<\"/>",  "<a>\x80</a>",          "",
    };
    char root[64];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(xml_check(bad[i], root, sizeof(root)) != NULL, "accepted %s", bad[i]);
    ck_assert_ptr_null(
        xml_check("<?xml version=\"1.0\"?>\n<a x='1'><b/>&amp;&#181;</a>\n", root, sizeof(root)));
    ck_assert_str_eq(root, "a");
}
END_TEST

/* Runs xmllint --noout on svg when installed: 1 valid, 0 invalid, -1 not installed. */
static int xmllint(const char *svg)
{
    char path[] = "/tmp/bench-report-svg-XXXXXX";
    int fd;
    int status;
    pid_t pid;

    if (access("/usr/bin/xmllint", X_OK) != 0)
        return -1;
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, svg, strlen(svg)), (ssize_t)strlen(svg));
    close(fd);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl("/usr/bin/xmllint", "xmllint", "--noout", "--nonet", path, (char *)NULL);
        _exit(127);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    unlink(path);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void check_svg(const char *svg)
{
    char root[64];
    const char *problem = xml_check(svg, root, sizeof(root));

    ck_assert_msg(problem == NULL, "SVG not well-formed: %s", problem);
    ck_assert_str_eq(root, "svg");
    ck_assert_ptr_nonnull(strstr(svg, "xmlns=\"http://www.w3.org/2000/svg\""));
    ck_assert_int_ne(xmllint(svg), 0);
}

START_TEST(svg_is_well_formed_with_a_line_per_series)
{
    static const char csv[] =
        HEADER "http:hello.txt,cabrank,lf:lifo,1,0,20000,,,50,,,,,0,1\n"
               "http:hello.txt,cabrank,lf:lifo,64,0,140000,,,2000,,,,,0,1\n"
               "http:hello.txt,cabrank,hshr,1,0,15000,,,80,,,,,0,1\n"
               "http:hello.txt,cabrank,hshr,64,0,100000,,,3000,,,,,0,1\n"
               "http:hello.txt,\"<ng&inx \"\"x\"\" 'y'>\",-,64,0,120000,,,2500,,,,,0,1\n"
               "http:hello.txt,h2o,-,64,0,,,,,,,,,0,1\n"
               "line,cabrank,lf:lifo,1,0,20000,,,50,,,,,0,1\n"
               "line,cabrank,lf:lifo,64,0,140000,,,60,,,,,0,1\n";
    struct bench_rows rows = {0};
    char *svg;

    parse_ok(csv, &rows);
    svg = render(svg_fn, &rows, "http:hello.txt");
    check_svg(svg);
    /* Four series: four lines and four legend entries; 5 points have markers (+4 in legend). */
    ck_assert_uint_eq(count(svg, "<polyline"), 4);
    ck_assert_uint_eq(count(svg, "<g class=\"series\">"), 4);
    ck_assert_ptr_nonnull(strstr(svg, ">cabrank lf:lifo</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">&lt;ng&amp;inx &quot;x&quot; &apos;y&apos;&gt;</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">h2o (no points)</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">http:hello.txt: p99 latency vs throughput</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">throughput (req/s)</text>"));
    /* p99 from 50 to 3000 µs: wider than 20x, so a log axis with decade ticks. */
    ck_assert_ptr_nonnull(strstr(svg, "p99 latency (&#181;s, log scale)"));
    ck_assert_ptr_nonnull(strstr(svg, ">10</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">10k</text>"));
    free(svg);

    /* line: 50..60 µs, a linear axis. */
    svg = render(svg_fn, &rows, "line");
    check_svg(svg);
    ck_assert_ptr_null(strstr(svg, "log scale"));
    ck_assert_ptr_nonnull(strstr(svg, "p99 latency (&#181;s)"));
    free(svg);
    bench_rows_fini(&rows);
}
END_TEST

START_TEST(svg_of_intervals_and_empty_workloads)
{
    static const char csv[] = HEADER "interval:t_conn,cabrank,forking,1,0,0,150,,400,900,,,,0,1\n"
                                     "interval:t_conn,cabrank,prefork,1,0,0,20,30,80,,,,,0,1\n"
                                     "line,cabrank,lf,1,0,,,,,,,,,0,1\n"
                                     "odd\xff,cabrank,lf,1,0,1,,,1,,,,,0,1\n";
    struct bench_rows rows = {0};
    FILE *f = fopen("/dev/null", "w");
    char *svg;

    parse_ok(csv, &rows);
    svg = render(svg_fn, &rows, "interval:t_conn");
    check_svg(svg);
    /* The percentiles are the x categories; a line per series through those measured. */
    ck_assert_ptr_nonnull(strstr(svg, ">percentile</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">p99.9</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">interval:t_conn: latency percentiles</text>"));
    ck_assert_ptr_nonnull(strstr(svg, "latency (&#181;s, log scale)"));
    ck_assert_uint_eq(count(svg, "<polyline"), 2);
    ck_assert_uint_eq(count(svg, "<circle"), 3 + 1);      /* forking's 3 points and its legend */
    ck_assert_uint_eq(count(svg, "<rect x="), 3 + 1 + 1); /* prefork's, legend, plot frame */
    free(svg);
    svg = render(svg_fn, &rows, "line");
    check_svg(svg);
    ck_assert_ptr_nonnull(strstr(svg, ">no measured points</text>"));
    free(svg);
    svg = render(svg_fn, &rows, "odd\xff");
    check_svg(svg);
    free(svg);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(bench_plot_svg(f, &rows, "http:1m.bin"), -ENOENT);
    fclose(f);
    bench_rows_fini(&rows);
}
END_TEST

START_TEST(svg_legend_grows_the_canvas)
{
    struct bench_rows rows = {0};
    struct bench_row r;
    char *svg;

    bench_row_init(&r);
    strcpy(r.workload, "line");
    strcpy(r.server, "cabrank");
    for (int i = 0; i < 40; i++) {
        snprintf(r.config, sizeof(r.config), "cfg%d", i);
        r.rps = 1000 * (i + 1);
        r.p99_us = 100 + i;
        ck_assert_int_eq(bench_rows_add(&rows, &r), 0);
    }
    svg = render(svg_fn, &rows, "line");
    check_svg(svg);
    ck_assert_uint_eq(count(svg, "<polyline"), 40);
    ck_assert_ptr_null(strstr(svg, "height=\"500\""));
    free(svg);
    bench_rows_fini(&rows);
}
END_TEST

START_TEST(plot_filename_is_safe)
{
    char name[64];

    ck_assert_int_eq(bench_plot_filename("http:hello.txt", name, sizeof(name)), 0);
    ck_assert_str_eq(name, "plot-http-hello.txt.svg");
    ck_assert_int_eq(bench_plot_filename("../a b/c", name, sizeof(name)), 0);
    ck_assert_str_eq(name, "plot-..-a-b-c.svg");
    ck_assert_int_eq(bench_plot_filename("line", name, 13), -ENAMETOOLONG);
    ck_assert_int_eq(bench_plot_filename("line", name, 14), 0);
    ck_assert_str_eq(name, "plot-line.svg");
}
END_TEST

/* ------------------------------------------------------------------------------- scaling */

/*
 * A --cores run: lf:lifo, hshr and nginx at 1, 2 and 4 cores (nginx not at 2), 1 and 64
 * connections (lf:lifo twice at 1 core and 64: the scaling takes the better); an unpinned row,
 * which the scaling leaves out; an interval at 1 core.
 */
#define CORES_CSV                                                                                  \
    BENCH_CSV_HEADER_CORES                                                                         \
    "\n"                                                                                           \
    "http:hello.txt,cabrank,lf:lifo,64,0,999999,,,,,1,,,0,1,,,\n"                                  \
    "http:hello.txt,cabrank,lf:lifo,1,0,10000,50,,90,,,,,0,1,,,1\n"                                \
    "http:hello.txt,cabrank,lf:lifo,64,0,20000,400,,900,,20,,,0,1,,,1\n"                           \
    "http:hello.txt,cabrank,lf:lifo,64,0,40000,400,,900,,10,,,0,1,,,1\n"                           \
    "http:hello.txt,cabrank,hshr,1,0,8000,80,,120,,,,,0,1,,,1\n"                                   \
    "http:hello.txt,cabrank,hshr,64,0,30000,500,,1200,,12,,,0,1,,,1\n"                             \
    "http:hello.txt,nginx,-,64,0,50000,300,,800,,7,,,0,1,,,1\n"                                    \
    "interval:t_conn,cabrank,forking,1,0,0,150,,400,900,,,,0,1,,,1\n"                              \
    "http:hello.txt,cabrank,lf:lifo,1,0,10000,50,,90,,,,,0,1,,,2\n"                                \
    "http:hello.txt,cabrank,lf:lifo,64,0,80000,400,,900,,9,,,0,1,,,2\n"                            \
    "http:hello.txt,cabrank,hshr,1,0,8000,80,,120,,,,,0,1,,,2\n"                                   \
    "http:hello.txt,cabrank,hshr,64,0,70000,500,,1200,,11,,,0,1,,,2\n"                             \
    "http:hello.txt,cabrank,lf:lifo,1,0,10000,50,,90,,,,,0,1,,,4\n"                                \
    "http:hello.txt,cabrank,lf:lifo,64,0,120000,400,,900,,8.5,,,0,1,,,4\n"                         \
    "http:hello.txt,cabrank,hshr,1,0,8000,80,,120,,,,,0,1,,,4\n"                                   \
    "http:hello.txt,cabrank,hshr,64,0,160000,500,,1200,,10,,,0,1,,,4\n"                            \
    "http:hello.txt,nginx,-,64,0,150000,300,,800,,6,,,0,1,,,4\n"

START_TEST(markdown_scaling_table_and_claims_per_core_count)
{
    static const struct bench_report_info info = {
        .title = "lab",
        .cores = "k = 1,2,4 of the 5 CPUs; skipped 8: this machine lets cabrank-bench use 5 CPUs",
    };
    static const char table[] =
        "### http:hello.txt, 64 conns\n"
        "\n"
        "| server | config | k=1 req/s | k=1 CPU µs/req | k=2 req/s | k=2 CPU µs/req | k=2 / k=1 "
        "| k=4 req/s | k=4 CPU µs/req | k=4 / k=1 |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        "| cabrank | lf:lifo | 40000 | 10.00 | 80000 | 9.00 | 2.00x | 120000 | 8.50 | 3.00x |\n"
        "| cabrank | hshr | 30000 | 12.00 | 70000 | 11.00 | 2.33x | 160000 | 10.00 | 5.33x |\n"
        "| nginx | - | 50000 | 7.00 | - | - | - | 150000 | 6.00 | 3.00x |\n"
        "\n"
        "![http:hello.txt scaling](scaling-http-hello.txt.svg)\n";
    struct bench_rows rows = {0};
    char *md;

    parse_ok(CORES_CSV, &rows);
    md = render(md_fn, &rows, &info);
    ck_assert_msg(strstr(md, table) != NULL, "no scaling table in:\n%s", md);
    ck_assert_ptr_nonnull(strstr(md, "Cores: k = 1,2,4 of the 5 CPUs; skipped 8: this machine "
                                     "lets cabrank-bench use 5 CPUs  \n"));
    /* The workload tables show the cores; the intervals get no scaling table. */
    ck_assert_ptr_nonnull(strstr(md, "| server | config | cores | conns |"));
    ck_assert_ptr_nonnull(strstr(md, "| cabrank | hshr | 4 | 64 | - | 160000 |"));
    ck_assert_ptr_null(strstr(md, "### interval"));
    /* The claims once per core count, each cell with its spread: one repetition of each point
     * tells nothing apart, however large the ratio. */
    ck_assert_ptr_nonnull(strstr(md, "| claim | measure | threshold | 1 core | 2 cores | 4 cores "
                                     "|\n"));
    ck_assert_ptr_nonnull(strstr(md, "| L/F has at least HS/HR's throughput at high load | req/s "
                                     "lf / hshr | > 1.00 | 0.67x (0.67-0.67, 1 rep) not "
                                     "separable | 1.14x (1.14-1.14, 1 rep) not separable | 0.75x "
                                     "(0.75-0.75, 1 rep) not separable |\n"));
    ck_assert_ptr_nonnull(strstr(md, "| t_conn p50 forking / prefork | > 1.00 | not measured | not "
                                     "measured | not measured |\n"));
    bench_rows_fini(&rows);
    free(md);
    /* Three repetitions alike: L/F's throughput holds at 2 cores, not at 4; at 1 core lf:lifo
     * has two rows at 64 against hshr's one, paired in run order they disagree. */
    for (int k = 0; k < BENCH_CLAIM_MIN_REPS; k++)
        parse_ok(CORES_CSV, &rows);
    md = render(md_fn, &rows, &info);
    ck_assert_ptr_nonnull(
        strstr(md, "| req/s lf / hshr | > 1.00 | 0.67x (0.67-1.33, 3 reps) not separable "
                   "| 1.14x (1.14-1.14, 3 reps) held | 0.75x (0.75-0.75, 3 reps) "
                   "not held |\n"));
    ck_assert_ptr_nonnull(strstr(md, "| p50 hshr / lf | > 1.25 | 1.60x (1.60-1.60, 3 reps) held | "
                                     "1.60x (1.60-1.60, 3 reps) held | 1.60x (1.60-1.60, 3 reps) "
                                     "held |\n"));
    /* The claims over every core count at once would compare nothing: not written. */
    ck_assert_ptr_null(strstr(md, "## The papers' claims\n"));
    /* The winners name their core count (the unpinned row none). */
    ck_assert_ptr_nonnull(strstr(md, "| http:hello.txt | cabrank lf:lifo | 64 | 999999 req/s | "
                                     "cabrank hshr, 4 cores | 6.25x |"));
    free(md);
    bench_rows_fini(&rows);
}
END_TEST

/* The i-th point "x,y" of the first polyline after from. */
static void polyline_point(const char *from, int i, double *x, double *y)
{
    const char *p = strstr(from, "<polyline");

    ck_assert_ptr_nonnull(p);
    p = strstr(p, "points=\"");
    ck_assert_ptr_nonnull(p);
    p += strlen("points=\"");
    for (int k = 0; k < i; k++) {
        p = strchr(p, ' ');
        ck_assert_ptr_nonnull(p);
        p++;
    }
    ck_assert_int_eq(sscanf(p, "%lf,%lf", x, y), 2);
}

START_TEST(svg_scaling_plot_has_two_panels_and_a_line_per_model)
{
    struct bench_rows rows = {0};
    struct bench_rows plain = {0};
    double x[3];
    double y[3];
    double cx;
    double cy;
    char *svg;
    FILE *f = tmpfile();

    parse_ok(CORES_CSV, &rows);
    svg = render(scaling_fn, &rows, "http:hello.txt");
    check_svg(svg);
    /* Three lines (lf:lifo, hshr, nginx), each in both panels, one legend entry each. */
    ck_assert_uint_eq(count(svg, "<g class=\"series\">"), 3);
    ck_assert_uint_eq(count(svg, "<polyline"), 6);
    ck_assert_ptr_nonnull(strstr(svg, ">cabrank lf:lifo</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">cabrank hshr</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">nginx</text>"));
    ck_assert_ptr_null(strstr(svg, "core</text>"));
    ck_assert_ptr_nonnull(strstr(
        svg, ">http:hello.txt: req/s and CPU per request against server cores, c=64</text>"));
    ck_assert_ptr_nonnull(strstr(svg, "throughput (req/s)"));
    ck_assert_ptr_nonnull(strstr(svg, "server CPU (&#181;s/request)"));
    ck_assert_ptr_nonnull(strstr(svg, ">server cores</text>"));
    /* The x categories, under each panel (the y ticks' labels are anchored at their end). */
    ck_assert_uint_eq(count(svg, "text-anchor=\"middle\">1</text>"), 2);
    ck_assert_uint_eq(count(svg, "text-anchor=\"middle\">4</text>"), 2);
    /* lf:lifo's req/s rises left to right (y shrinks); its CPU line below, falling. */
    for (int i = 0; i < 3; i++)
        polyline_point(svg, i, &x[i], &y[i]);
    ck_assert(x[0] < x[1] && x[1] < x[2]);
    ck_assert(y[0] > y[1] && y[1] > y[2]);
    polyline_point(strstr(svg, "<polyline") + 1, 0, &cx, &cy);
    ck_assert(cx == x[0] && cy > y[0]);
    polyline_point(strstr(svg, "<polyline") + 1, 2, &cx, &y[2]);
    ck_assert(y[2] > cy);
    free(svg);
    /* No pinned row with req/s: nothing to plot, nothing written. */
    ck_assert_int_eq(bench_plot_scaling_svg(f, &rows, "interval:t_conn"), -ENOENT);
    parse_ok(HEADER "http:hello.txt,cabrank,lf:lifo,64,0,40000,,,900,,,,,0,1\n", &plain);
    ck_assert_int_eq(bench_plot_scaling_svg(f, &plain, "http:hello.txt"), -ENOENT);
    ck_assert_int_eq(ftell(f), 0);
    fclose(f);
    /* The latency plot: a series per server, config and core count (9), each labelled. */
    svg = render(svg_fn, &rows, "http:hello.txt");
    check_svg(svg);
    ck_assert_uint_eq(count(svg, "<g class=\"series\">"), 9);
    ck_assert_ptr_nonnull(strstr(svg, ">cabrank lf:lifo (no points)</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">cabrank lf:lifo, 1 core</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">nginx, 4 cores</text>"));
    free(svg);
    bench_rows_fini(&plain);
    bench_rows_fini(&rows);
}
END_TEST

START_TEST(write_dir_writes_scaling_plots)
{
    char dir[] = "/tmp/bench-report-scaling-XXXXXX";
    const char *const files[] = {"results.md", "claims.csv", "plot-http-hello.txt.svg",
                                 "plot-interval-t_conn.svg", "scaling-http-hello.txt.svg"};
    struct bench_rows rows = {0};
    char path[128];
    struct stat st;

    parse_ok(CORES_CSV, &rows);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(bench_report_write_dir(dir, &rows, NULL), 0);
    snprintf(path, sizeof(path), "%s/scaling-interval-t_conn.svg", dir);
    ck_assert_int_eq(stat(path, &st), -1);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        ck_assert_msg(stat(path, &st) == 0 && st.st_size > 100, "%s", path);
        ck_assert_int_eq(unlink(path), 0);
    }
    ck_assert_int_eq(rmdir(dir), 0);
    bench_rows_fini(&rows);
}
END_TEST

START_TEST(write_dir_writes_markdown_and_plots)
{
    static const char csv[] = HEADER "http:hello.txt,cabrank,lf:lifo,1,0,20000,,,50,,,,,0,1\n"
                                     "interval:t_res2,cabrank,prefork,1,0,0,,,80,,,,,0,1\n";
    char dir[] = "/tmp/bench-report-dir-XXXXXX";
    const char *const files[] = {"results.md", "claims.csv", "plot-http-hello.txt.svg",
                                 "plot-interval-t_res2.svg"};
    struct bench_rows rows = {0};
    char path[128];
    struct stat st;

    parse_ok(csv, &rows);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(bench_report_write_dir(dir, &rows, NULL), 0);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        ck_assert_msg(stat(path, &st) == 0 && st.st_size > 100, "%s", path);
        ck_assert_int_eq(unlink(path), 0);
    }
    ck_assert_int_eq(rmdir(dir), 0);
    ck_assert_int_eq(bench_report_write_dir(dir, &rows, NULL), -ENOENT);
    bench_rows_fini(&rows);
}
END_TEST

/* ---------------------------------------------------------------------------------- noise */

#define NOISE_HEADER BENCH_CSV_HEADER_NOISE "\n"

START_TEST(markdown_marks_noisy_points_and_counts_them)
{
    /* Three points: one noisy (50% before), one clean, the intervals' one run (three rows)
     * noisy during it; a row of no noise measured is not counted. */
    static const char csv[] =
        NOISE_HEADER "line,cabrank,lf:lifo,1,0,9000,10,,20,,,,,0,1,,,,2.5,0.5,0.05,1\n"
                     "line,cabrank,lf:lifo,64,0,90000,10,,20,,,,,0,1,,,,0.25,0.02,0.04,0\n"
                     "line,cabrank,hshr,64,0,80000,10,,20,,,,,0,1,,,,,,,\n"
                     "interval:t_conn,cabrank,hshr,1,0,0,10,,20,,,,,0,1,,,,1,0,0.3,1\n"
                     "interval:t_res1,cabrank,hshr,1,0,0,10,,20,,,,,0,1,,,,1,0,0.3,1\n"
                     "interval:t_res2,cabrank,hshr,1,0,0,10,,20,,,,,0,1,,,,1,0,0.3,1\n";
    static const struct bench_report_info info = {.noise_max = 0.2};
    struct bench_rows rows = {0};
    char *md;

    parse_ok(csv, &rows);
    md = render(md_fn, &rows, &info);
    ck_assert_msg(strstr(md, "Noise: 2 of 3 points ran with more than 20% of the CPU taken by "
                             "other processes") != NULL,
                  "%.2000s", md);
    ck_assert_ptr_nonnull(strstr(md, "| load avg | others' CPU % before / during |\n"));
    ck_assert_msg(strstr(md, "| 0 | 2.50 | 50 / 5 noisy |\n") != NULL, "%.2000s", md);
    ck_assert_ptr_nonnull(strstr(md, "| 0 | 0.25 | 2 / 4 |\n"));
    ck_assert_ptr_nonnull(strstr(md, "| 0 | - | - / - |\n"));
    ck_assert_uint_eq(count(md, " noisy |\n"), 4);
    free(md);

    /* No info: the default limit in the text. */
    md = render(md_fn, &rows, NULL);
    ck_assert_ptr_nonnull(strstr(md, "Noise: 2 of 3 points ran with more than 10% of the CPU"));
    free(md);
    bench_rows_fini(&rows);

    /* Rows of an earlier format: no noise summary and no noise columns. */
    parse_ok(HEADER "line,cabrank,lf:lifo,1,0,9000,10,,20,,,,,0,1\n", &rows);
    md = render(md_fn, &rows, NULL);
    ck_assert_ptr_null(strstr(md, "Noise:"));
    ck_assert_ptr_null(strstr(md, "load avg"));
    free(md);
    bench_rows_fini(&rows);
}
END_TEST

START_TEST(markdown_shows_the_spread_of_each_repeated_point)
{
    /* lf:lifo at 64 three times, at 1 once; an interval twice (its spread is of p99). */
    static const char csv[] = HEADER "line,cabrank,lf:lifo,64,0,100000,10,,20,,,,,0,1\n"
                                     "line,cabrank,lf:lifo,1,0,9000,10,,20,,,,,0,1\n"
                                     "line,cabrank,lf:lifo,64,0,120000,10,,20,,,,,0,1\n"
                                     "line,cabrank,hshr,64,0,95000,10,,20,,,,,0,1\n"
                                     "line,cabrank,lf:lifo,64,0,110000,10,,20,,,,,0,1\n"
                                     "interval:t_conn,cabrank,hshr,1,0,0,10,,20,,,,,0,1\n"
                                     "interval:t_conn,cabrank,hshr,1,0,0,10,,35.5,,,,,0,1\n";
    struct bench_rows rows = {0};
    char *md;

    parse_ok(csv, &rows);
    md = render(md_fn, &rows, NULL);
    ck_assert_ptr_nonnull(strstr(md, "| errors | req/s min–max (runs) |\n"));
    ck_assert_uint_eq(count(md, "| 0 | 100000–120000 (3) |\n"), 3);
    /* The points measured once: no spread. */
    ck_assert_ptr_nonnull(strstr(md, "| cabrank | lf:lifo | 1 | - | 9000 |"));
    ck_assert_uint_eq(count(md, "| 0 | - |\n"), 2);
    ck_assert_ptr_nonnull(strstr(md, "| errors | p99 µs min–max (runs) |\n"));
    ck_assert_uint_eq(count(md, "| 0 | 20.0–35.5 (2) |\n"), 2);
    free(md);
    bench_rows_fini(&rows);

    /* Nothing repeated: no spread column. */
    parse_ok(HEADER "line,cabrank,lf:lifo,64,0,100000,10,,20,,,,,0,1\n", &rows);
    md = render(md_fn, &rows, NULL);
    ck_assert_ptr_null(strstr(md, "min–max"));
    free(md);
    bench_rows_fini(&rows);
}
END_TEST

START_TEST(claims_say_when_measured_on_a_noisy_machine)
{
    /* L/F against HS/HR at 64, three repetitions: hshr's row noisy in each one; at 1 clean. */
    static const char csv[] =
        NOISE_HEADER "line,cabrank,lf:lifo,64,0,125000,50,,,,,,,0,1,,,,1,0,0.05,0\n"
                     "line,cabrank,hshr,64,0,100000,40,,,,,,,0,1,,,,1,0.4,0.05,1\n"
                     "line,cabrank,lf:lifo,1,0,9000,10,,,,,,,0,1,,,,1,0,0.05,0\n"
                     "line,cabrank,hshr,1,0,8000,20,,,,,,,0,1,,,,1,0,0.05,0\n";
    struct bench_rows rows = {0};
    struct bench_claim c[BENCH_CLAIMS];
    char *out;

    parse_thrice(csv, &rows);
    bench_claims_eval(&rows, c);
    ck_assert_int_eq(claim_about(c, "req/s lf / hshr")->verdict, BENCH_HELD);
    ck_assert_uint_eq(claim_about(c, "req/s lf / hshr")->noisy, 3);
    ck_assert_uint_eq(claim_about(c, "p50 hshr / lf")->noisy, 0);
    out = render(md_fn, &rows, NULL);
    ck_assert_msg(strstr(out, "| 3 | held, measured on a noisy machine (3 of 3 reps) | line, 64 "
                              "conns, lf:lifo vs hshr |\n") != NULL,
                  "%.2000s", out);
    ck_assert_ptr_nonnull(strstr(out, "| 3 | held | line, 1 conn, lf:lifo vs hshr |\n"));
    free(out);
    out = render(claims_csv_fn, &rows, NULL);
    ck_assert_msg(strstr(out, ",3,held,\"line, 64 conns, lf:lifo vs hshr\",3\n") != NULL, "%.2000s",
                  out);
    ck_assert_ptr_nonnull(strstr(out, ",3,held,\"line, 1 conn, lf:lifo vs hshr\",0\n"));
    free(out);
    bench_rows_fini(&rows);
}
END_TEST

/* The x, y and text of each point label of an SVG (the <text> elements in the point-labels
 * group), at most cap. */
struct svg_label {
    double x;
    double y;
    char text[32];
};

static size_t svg_labels(const char *svg, struct svg_label *out, size_t cap)
{
    const char *p = strstr(svg, "<g class=\"point-labels\"");
    const char *end = p != NULL ? strstr(p, "</g>") : NULL;
    size_t n = 0;

    while (p != NULL && (p = strstr(p + 1, "<text x=\"")) != NULL && p < end && n < cap) {
        const char *gt = strchr(p, '>');

        ck_assert_int_eq(sscanf(p, "<text x=\"%lf\" y=\"%lf\"", &out[n].x, &out[n].y), 2);
        ck_assert_int_eq(sscanf(gt + 1, "%31[^<]", out[n].text), 1);
        n++;
    }
    return n;
}

static bool has_label(const struct svg_label *l, size_t n, const char *text)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(l[i].text, text) == 0)
            return true;
    return false;
}

START_TEST(svg_labels_each_point_with_its_load)
{
    static const char csv[] = HEADER "http:hello.txt,cabrank,lf:lifo,1,0,20000,,,50,,,,,0,1\n"
                                     "http:hello.txt,cabrank,lf:lifo,8,0,80000,,,400,,,,,0,1\n"
                                     "http:hello.txt,cabrank,lf:lifo,64,0,140000,,,2000,,,,,0,1\n"
                                     "http:hello.txt,cabrank,hshr,1024,0,60000,,,9000,,,,,0,1\n"
                                     "line-open,cabrank,lf:lifo,16,1000,1000,,,50,,,,,0,1\n"
                                     "line-open,cabrank,lf:lifo,16,10000,10000,,,70,,,,,0,1\n"
                                     "interval:t_conn,cabrank,hshr,1,0,0,10,,20,,,,,0,1\n";
    struct bench_rows rows = {0};
    struct svg_label l[16];
    size_t n;
    char *svg;

    parse_ok(csv, &rows);
    svg = render(svg_fn, &rows, "http:hello.txt");
    check_svg(svg);
    n = svg_labels(svg, l, 16);
    ck_assert_uint_eq(n, 4);
    ck_assert(has_label(l, n, "c=1") && has_label(l, n, "c=8") && has_label(l, n, "c=64") &&
              has_label(l, n, "c=1024"));
    ck_assert_ptr_null(strstr(svg, "left out"));
    free(svg);
    /* An open loop's points differ by rate. */
    svg = render(svg_fn, &rows, "line-open");
    n = svg_labels(svg, l, 16);
    ck_assert(n == 2 && has_label(l, n, "r=1k") && has_label(l, n, "r=10k"));
    free(svg);
    /* An interval plot's x axis is the percentiles: no load to label. */
    svg = render(svg_fn, &rows, "interval:t_conn");
    ck_assert_ptr_null(strstr(svg, "point-labels"));
    free(svg);
    bench_rows_fini(&rows);
}
END_TEST

/* No two labels' boxes overlap, as the text occupies them at font-size 10: about 6 units a
 * character, 10 high. */
static void check_apart(const struct svg_label *l, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++) {
            double wi = 6.0 * (double)strlen(l[i].text);
            double wj = 6.0 * (double)strlen(l[j].text);
            bool apart = l[i].x + wi <= l[j].x || l[j].x + wj <= l[i].x || l[i].y <= l[j].y - 10 ||
                         l[j].y <= l[i].y - 10;

            ck_assert_msg(apart, "labels %s (%.1f,%.1f) and %s (%.1f,%.1f) overlap", l[i].text,
                          l[i].x, l[i].y, l[j].text, l[j].x, l[j].y);
        }
    }
}

/* The default sweep's shape: 14 series at 5 concurrencies, crowded, points of different loads
 * side by side; the labels never overlap, and every load is labelled somewhere. */
START_TEST(svg_point_labels_never_overlap)
{
    static const unsigned conc[] = {1, 8, 64, 256, 1024};
    struct bench_rows rows = {0};
    struct svg_label l[128];
    size_t n;
    char *svg;

    for (int s = 0; s < 14; s++) {
        for (int c = 0; c < 5; c++) {
            struct bench_row r;

            bench_row_init(&r);
            snprintf(r.workload, sizeof(r.workload), "http:hello.txt");
            snprintf(r.server, sizeof(r.server), "cabrank");
            snprintf(r.config, sizeof(r.config), "model%d", s);
            r.concurrency = conc[c];
            /* Each series shifted along the others: one's c=64 lies among another's c=256. */
            r.rps = 10000 + c * 25000 + s * 6000;
            r.p99_us = 100 * pow(3, c + s * 0.35);
            ck_assert_int_eq(bench_rows_add(&rows, &r), 0);
        }
    }
    svg = render(svg_fn, &rows, "http:hello.txt");
    check_svg(svg);
    n = svg_labels(svg, l, 128);
    ck_assert_uint_gt(n, 10);
    for (size_t c = 0; c < 5; c++) {
        char t[16];

        snprintf(t, sizeof(t), "c=%u", conc[c]);
        ck_assert_msg(has_label(l, n, t), "no label %s", t);
    }
    check_apart(l, n);
    free(svg);
    bench_rows_fini(&rows);

    /* Two loads a few units apart, one above the other: their labels both shown, apart. */
    parse_ok(HEADER "http:hello.txt,cabrank,lf:lifo,8,0,100000,,,1000,,,,,0,1\n"
                    "http:hello.txt,cabrank,hshr,64,0,100000,,,1020,,,,,0,1\n",
             &rows);
    svg = render(svg_fn, &rows, "http:hello.txt");
    n = svg_labels(svg, l, 128);
    ck_assert(n == 2 && has_label(l, n, "c=8") && has_label(l, n, "c=64"));
    check_apart(l, n);
    free(svg);
    bench_rows_fini(&rows);
}
END_TEST

Suite *bench_report_suite(void);

Suite *bench_report_suite(void)
{
    Suite *s = suite_create("bench_report");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, csv_rows_round_trip);
    tcase_add_test(tc, csv_accepts_crlf_blank_lines_and_no_final_newline);
    tcase_add_test(tc, csv_reads_every_format_and_cores);
    tcase_add_loop_test(tc, csv_rejects_malformed_input_with_line, 0,
                        (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
    tcase_add_test(tc, csv_rejects_nul_byte);
    tcase_add_test(tc, csv_every_prefix_parses_or_fails_cleanly);
    tcase_add_test(tc, csv_read_file_and_missing_file);
    tcase_add_test(tc, csv_write_rejects_bad_names_and_numbers);
    tcase_add_test(tc, markdown_of_known_csv);
    tcase_add_test(tc, markdown_of_no_rows);
    tcase_add_test(tc, winner_is_best_at_highest_concurrency);
    tcase_add_test(tc, claims_held_not_held_not_measured);
    tcase_add_test(tc, claims_fall_back_to_http_hello);
    tcase_add_test(tc, judge_needs_the_whole_spread_past_the_threshold);
    tcase_add_test(tc, claims_pair_repetitions_and_keep_the_deferral_apart);
    tcase_add_test(tc, claims_csv_has_every_claim_with_its_spread);
    tcase_add_test(tc, xml_checker_rejects_broken_documents);
    tcase_add_test(tc, svg_is_well_formed_with_a_line_per_series);
    tcase_add_test(tc, svg_of_intervals_and_empty_workloads);
    tcase_add_test(tc, svg_legend_grows_the_canvas);
    tcase_add_test(tc, plot_filename_is_safe);
    tcase_add_test(tc, write_dir_writes_markdown_and_plots);
    tcase_add_test(tc, markdown_scaling_table_and_claims_per_core_count);
    tcase_add_test(tc, svg_scaling_plot_has_two_panels_and_a_line_per_model);
    tcase_add_test(tc, write_dir_writes_scaling_plots);
    tcase_add_test(tc, markdown_marks_noisy_points_and_counts_them);
    tcase_add_test(tc, markdown_shows_the_spread_of_each_repeated_point);
    tcase_add_test(tc, claims_say_when_measured_on_a_noisy_machine);
    tcase_add_test(tc, svg_labels_each_point_with_its_load);
    tcase_add_test(tc, svg_point_labels_never_overlap);
    suite_add_tcase(s, tc);
    return s;
}
