/*
 * csv.c - the results CSV of cabrank-bench: writes rows as the driver measures them and reads
 * a whole file back for the report. The reader is an input parser (a results.csv may be edited
 * by hand or cut short by a crash), so every malformed line is an error naming its line, never
 * a crash; fuzz/bench_csv.c fuzzes it. Its field writers also write claims.csv
 * (report_claims.c). Single-threaded, no state between calls; owns nothing but the rows it
 * appends (freed by bench_rows_fini()).
 */
#include "report_internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The columns, in the order of BENCH_CSV_HEADER_NOISE; the first format ends at seconds, the
 * second at the CPU split, the third at cores. */
enum col {
    COL_WORKLOAD,
    COL_SERVER,
    COL_CONFIG,
    COL_CONCURRENCY,
    COL_RATE,
    COL_RPS,
    COL_P50,
    COL_P90,
    COL_P99,
    COL_P999,
    COL_CPU,
    COL_CTXSW,
    COL_RSS,
    COL_ERRORS,
    COL_SECONDS,
    COL_USER,
    COL_SYS,
    COL_CORES,
    COL_LOADAVG,
    COL_OTHER_BEFORE,
    COL_OTHER_DURING,
    COL_NOISY,
    NCOLS
};

#define NCOLS_FIRST COL_USER
#define NCOLS_SPLIT COL_CORES
#define NCOLS_CORES COL_LOADAVG

static const char *const col_names[NCOLS] = {
    "workload",
    "server",
    "config",
    "concurrency",
    "rate",
    "rps",
    "p50_us",
    "p90_us",
    "p99_us",
    "p999_us",
    "cpu_us_per_req",
    "ctxsw_per_req",
    "peak_rss_kb",
    "errors",
    "seconds",
    "srv_user_us_per_req",
    "srv_sys_us_per_req",
    "cores",
    "loadavg_before",
    "other_cpu_before",
    "other_cpu_during",
    "noisy",
};

/* Largest concurrency accepted: far above any sweep, far below overflow. */
#define CONCURRENCY_MAX 1000000u

/* Largest core count accepted (CPU_SETSIZE is 1024; room for bigger machines). */
#define CORES_MAX 65536u

void bench_row_init(struct bench_row *row)
{
    memset(row, 0, sizeof(*row));
    row->concurrency = 1;
    row->rate = 0;
    row->rps = NAN;
    row->p50_us = NAN;
    row->p90_us = NAN;
    row->p99_us = NAN;
    row->p999_us = NAN;
    row->cpu_us_per_req = NAN;
    row->ctxsw_per_req = NAN;
    row->peak_rss_kb = NAN;
    row->seconds = NAN;
    row->srv_user_us_per_req = NAN;
    row->srv_sys_us_per_req = NAN;
    row->loadavg_before = NAN;
    row->other_cpu_before = NAN;
    row->other_cpu_during = NAN;
    row->noisy = -1;
}

void bench_rows_fini(struct bench_rows *rows)
{
    if (rows == NULL)
        return;
    free(rows->v);
    rows->v = NULL;
    rows->len = 0;
    rows->cap = 0;
}

int bench_rows_add(struct bench_rows *rows, const struct bench_row *row)
{
    if (rows->len == rows->cap) {
        size_t cap = rows->cap ? rows->cap * 2 : 16;
        struct bench_row *v;

        if (cap > SIZE_MAX / sizeof(*v))
            return -ENOMEM;
        v = realloc(rows->v, cap * sizeof(*v));
        if (v == NULL)
            return -ENOMEM;
        rows->v = v;
        rows->cap = cap;
    }
    rows->v[rows->len++] = *row;
    return 0;
}

/* ------------------------------------------------------------------------------------ write */

int bench_csv_write_header(FILE *f)
{
    return fputs(BENCH_CSV_HEADER_NOISE "\n", f) == EOF ? -EIO : 0;
}

static bool is_valid_name(const char *s)
{
    size_t n = strnlen(s, BENCH_NAME_MAX + 1);

    return n > 0 && n <= BENCH_NAME_MAX;
}

int bench__csv_name(FILE *f, const char *s)
{
    if (strpbrk(s, ",\"\r\n") == NULL)
        return fputs(s, f) == EOF ? -EIO : 0;
    if (fputc('"', f) == EOF)
        return -EIO;
    for (; *s != '\0'; s++) {
        if (*s == '"' && fputc('"', f) == EOF)
            return -EIO;
        if (fputc(*s, f) == EOF)
            return -EIO;
    }
    return fputc('"', f) == EOF ? -EIO : 0;
}

static bool is_writable(double v)
{
    return isnan(v) || (v >= 0 && v <= BENCH_VALUE_MAX);
}

static bool is_share(double v)
{
    return isnan(v) || (v >= 0 && v <= 1);
}

/*
 * A number as plain decimal (never an exponent, which spreadsheets and awk scripts misread),
 * six decimals with the trailing zeros cut; not measured is the empty field.
 */
int bench__csv_number(FILE *f, double v)
{
    char buf[64];
    int n;

    if (isnan(v))
        return fputc(',', f) == EOF ? -EIO : 0;
    if (!(v >= 0 && v <= BENCH_VALUE_MAX))
        return -ERANGE;
    n = snprintf(buf, sizeof(buf), "%.6f", v);
    if (n < 0 || (size_t)n >= sizeof(buf))
        return -EIO;
    while (n > 0 && buf[n - 1] == '0')
        n--;
    if (n > 0 && buf[n - 1] == '.')
        n--;
    buf[n] = '\0';
    return fprintf(f, ",%s", buf) < 0 ? -EIO : 0;
}

int bench_csv_write_row(FILE *f, const struct bench_row *row)
{
    const double nums[] = {
        row->rps,     row->p50_us,         row->p90_us,        row->p99_us,
        row->p999_us, row->cpu_us_per_req, row->ctxsw_per_req, row->peak_rss_kb,
    };
    const double split[] = {row->srv_user_us_per_req, row->srv_sys_us_per_req};
    const double noise[] = {row->loadavg_before, row->other_cpu_before, row->other_cpu_during};
    int err;

    if (!is_valid_name(row->workload) || !is_valid_name(row->server) ||
        !is_valid_name(row->config) || row->concurrency == 0 || row->cores > CORES_MAX ||
        row->noisy < -1 || row->noisy > 1)
        return -EINVAL;
    /* Checked before writing, so a refused row leaves no half line behind. */
    for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
        if (!is_writable(nums[i]))
            return -ERANGE;
    if (!is_writable(row->rate) || !is_writable(row->seconds))
        return -ERANGE;
    if (!is_writable(split[0]) || !is_writable(split[1]))
        return -ERANGE;
    if (!is_writable(noise[0]) || !is_share(noise[1]) || !is_share(noise[2]))
        return -ERANGE;
    err = bench__csv_name(f, row->workload);
    if (err == 0 && fputc(',', f) == EOF)
        err = -EIO;
    if (err == 0)
        err = bench__csv_name(f, row->server);
    if (err == 0 && fputc(',', f) == EOF)
        err = -EIO;
    if (err == 0)
        err = bench__csv_name(f, row->config);
    if (err == 0 && fprintf(f, ",%u", row->concurrency) < 0)
        err = -EIO;
    if (err == 0)
        err = bench__csv_number(f, isnan(row->rate) ? 0 : row->rate);
    for (size_t i = 0; err == 0 && i < sizeof(nums) / sizeof(nums[0]); i++)
        err = bench__csv_number(f, nums[i]);
    if (err == 0 && fprintf(f, ",%llu", (unsigned long long)row->errors) < 0)
        err = -EIO;
    if (err == 0)
        err = bench__csv_number(f, row->seconds);
    for (size_t i = 0; err == 0 && i < sizeof(split) / sizeof(split[0]); i++)
        err = bench__csv_number(f, split[i]);
    /* Not pinned (no --cores) is the empty field. */
    if (err == 0 && (row->cores > 0 ? fprintf(f, ",%u", row->cores) < 0 : fputc(',', f) == EOF))
        err = -EIO;
    for (size_t i = 0; err == 0 && i < sizeof(noise) / sizeof(noise[0]); i++)
        err = bench__csv_number(f, noise[i]);
    /* Not measured is the empty field. */
    if (err == 0 && (row->noisy >= 0 ? fprintf(f, ",%d", row->noisy) < 0 : fputc(',', f) == EOF))
        err = -EIO;
    if (err == 0 && fputc('\n', f) == EOF)
        err = -EIO;
    return err;
}

/* ------------------------------------------------------------------------------------- read */

/* The longest field kept: a name, or a number with room to spare. */
#define FIELD_MAX BENCH_NAME_MAX

struct record {
    char field[NCOLS][FIELD_MAX + 1];
    size_t nfields; /* fields seen, may exceed NCOLS (then only counted) */
    unsigned line;  /* where the record starts */
};

struct parser {
    const char *buf;
    size_t len;
    size_t pos;
    unsigned line; /* of buf[pos] */
    size_t ncols;  /* the header's: NCOLS_FIRST, NCOLS_SPLIT, NCOLS_CORES or NCOLS */
    struct bench_csv_error *err;
};

static int fail(struct parser *p, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct parser *p, unsigned line, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (p->err == NULL)
        return -EBADMSG;
    p->err->line = line;
    n = snprintf(p->err->msg, sizeof(p->err->msg), "line %u: ", line);
    if (n < 0 || (size_t)n >= sizeof(p->err->msg))
        return -EBADMSG;
    va_start(ap, fmt);
    vsnprintf(p->err->msg + n, sizeof(p->err->msg) - (size_t)n, fmt, ap);
    va_end(ap);
    return -EBADMSG;
}

/* Keeps byte c of the current field, or says the field is too long. */
static int keep(struct parser *p, struct record *rec, size_t *flen, char c)
{
    if (rec->nfields >= NCOLS)
        return 0;
    if (*flen >= FIELD_MAX)
        return fail(p, rec->line, "field %zu (%s) longer than %d bytes", rec->nfields + 1,
                    col_names[rec->nfields], FIELD_MAX);
    if (c == '\0')
        return fail(p, p->line, "NUL byte in field %zu", rec->nfields + 1);
    rec->field[rec->nfields][(*flen)++] = c;
    return 0;
}

static void end_field(struct record *rec, size_t *flen)
{
    if (rec->nfields < NCOLS)
        rec->field[rec->nfields][*flen] = '\0';
    rec->nfields++;
    *flen = 0;
}

/*
 * Reads the record at p->pos (RFC 4180: fields split by ',', a quoted field may hold ',', '"'
 * doubled and newlines; "\r\n" ends a record as "\n" does). Returns 1 with *rec filled, 0 at
 * the end of input, -EBADMSG.
 */
static int next_record(struct parser *p, struct record *rec)
{
    size_t flen = 0;
    bool quoted = false;
    bool after_quote = false; /* a quoted field ended: only ',' or the end may follow */
    int err;

    if (p->pos >= p->len)
        return 0;
    rec->nfields = 0;
    rec->line = p->line;
    while (p->pos < p->len) {
        char c = p->buf[p->pos++];

        if (quoted) {
            if (c == '"') {
                if (p->pos < p->len && p->buf[p->pos] == '"') {
                    p->pos++;
                    err = keep(p, rec, &flen, '"');
                } else {
                    quoted = false;
                    after_quote = true;
                    err = 0;
                }
            } else {
                if (c == '\n')
                    p->line++;
                err = keep(p, rec, &flen, c);
            }
            if (err < 0)
                return err;
            continue;
        }
        if (c == '\r' && p->pos < p->len && p->buf[p->pos] == '\n')
            continue;
        if (c == '\n') {
            p->line++;
            end_field(rec, &flen);
            return 1;
        }
        if (c == ',') {
            end_field(rec, &flen);
            after_quote = false;
            continue;
        }
        if (after_quote)
            return fail(p, p->line, "text after the closing quote of field %zu", rec->nfields + 1);
        if (c == '"') {
            if (flen != 0)
                return fail(p, p->line, "quote inside unquoted field %zu", rec->nfields + 1);
            quoted = true;
            continue;
        }
        err = keep(p, rec, &flen, c);
        if (err < 0)
            return err;
    }
    if (quoted)
        return fail(p, rec->line, "quoted field %zu never closed", rec->nfields + 1);
    end_field(rec, &flen);
    return 1;
}

static bool is_blank(const struct record *rec)
{
    return rec->nfields == 1 && rec->field[0][0] == '\0';
}

/*
 * A plain non-negative decimal: digits, an optional fraction, an optional exponent. strtod
 * alone would also take "inf", "nan", hex and leading spaces.
 */
static bool is_decimal(const char *s)
{
    size_t digits = 0;

    if (*s == '+')
        s++;
    for (; *s >= '0' && *s <= '9'; s++)
        digits++;
    if (*s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++)
            digits++;
    if (digits == 0)
        return false;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (!(*s >= '0' && *s <= '9'))
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

static int parse_number(struct parser *p, const struct record *rec, enum col c, bool optional,
                        double *out)
{
    const char *s = rec->field[c];
    double v;

    if (*s == '\0') {
        if (!optional)
            return fail(p, rec->line, "%s is empty", col_names[c]);
        *out = NAN;
        return 0;
    }
    if (!is_decimal(s))
        return fail(p, rec->line, "%s is not a non-negative decimal number", col_names[c]);
    v = strtod(s, NULL);
    if (!(v <= BENCH_VALUE_MAX))
        return fail(p, rec->line, "%s is out of range", col_names[c]);
    *out = v;
    return 0;
}

static int parse_uint(struct parser *p, const struct record *rec, enum col c, uint64_t max,
                      uint64_t *out)
{
    const char *s = rec->field[c];
    uint64_t v = 0;

    if (*s == '\0')
        return fail(p, rec->line, "%s is empty", col_names[c]);
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9')
            return fail(p, rec->line, "%s is not a whole number", col_names[c]);
        /* The digit first: max - digit must not wrap (a bound below 9). */
        if ((uint64_t)(*s - '0') > max || v > (max - (uint64_t)(*s - '0')) / 10)
            return fail(p, rec->line, "%s is out of range", col_names[c]);
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

static int parse_row(struct parser *p, const struct record *rec, struct bench_row *row)
{
    struct {
        enum col col;
        double *dst;
    } nums[] = {
        {COL_RPS, &row->rps},
        {COL_P50, &row->p50_us},
        {COL_P90, &row->p90_us},
        {COL_P99, &row->p99_us},
        {COL_P999, &row->p999_us},
        {COL_CPU, &row->cpu_us_per_req},
        {COL_CTXSW, &row->ctxsw_per_req},
        {COL_RSS, &row->peak_rss_kb},
        {COL_SECONDS, &row->seconds},
        {COL_USER, &row->srv_user_us_per_req},
        {COL_SYS, &row->srv_sys_us_per_req},
        {COL_LOADAVG, &row->loadavg_before},
        {COL_OTHER_BEFORE, &row->other_cpu_before},
        {COL_OTHER_DURING, &row->other_cpu_during},
    };
    size_t nnums = sizeof(nums) / sizeof(nums[0]);
    uint64_t v;
    int err;

    if (rec->nfields != p->ncols)
        return fail(p, rec->line, "%zu fields, expected %zu", rec->nfields, p->ncols);
    bench_row_init(row);
    /* Earlier formats' rows stop at seconds (the split stays not measured) or at cores (the
     * noise does). */
    if (p->ncols < NCOLS)
        nnums -= 3;
    if (p->ncols == NCOLS_FIRST)
        nnums -= 2;
    for (enum col c = COL_WORKLOAD; c <= COL_CONFIG; c++) {
        if (rec->field[c][0] == '\0')
            return fail(p, rec->line, "%s is empty", col_names[c]);
        for (const char *s = rec->field[c]; *s != '\0'; s++)
            if ((unsigned char)*s < 0x20 || *s == 0x7f)
                return fail(p, rec->line, "control byte in %s", col_names[c]);
    }
    memcpy(row->workload, rec->field[COL_WORKLOAD], sizeof(row->workload));
    memcpy(row->server, rec->field[COL_SERVER], sizeof(row->server));
    memcpy(row->config, rec->field[COL_CONFIG], sizeof(row->config));
    err = parse_uint(p, rec, COL_CONCURRENCY, CONCURRENCY_MAX, &v);
    if (err < 0)
        return err;
    if (v == 0)
        return fail(p, rec->line, "concurrency is 0");
    row->concurrency = (unsigned)v;
    err = parse_number(p, rec, COL_RATE, true, &row->rate);
    if (err < 0)
        return err;
    if (isnan(row->rate))
        row->rate = 0;
    for (size_t i = 0; i < nnums; i++) {
        err = parse_number(p, rec, nums[i].col, true, nums[i].dst);
        if (err < 0)
            return err;
    }
    err = parse_uint(p, rec, COL_ERRORS, UINT64_MAX, &row->errors);
    if (err < 0)
        return err;
    /* Before the third format, and where the field is empty, nothing was pinned: cores 0. */
    if (p->ncols >= NCOLS_CORES && rec->field[COL_CORES][0] != '\0') {
        err = parse_uint(p, rec, COL_CORES, CORES_MAX, &v);
        if (err < 0)
            return err;
        row->cores = (unsigned)v;
    }
    if (p->ncols < NCOLS)
        return 0;
    if (row->other_cpu_before > 1 || row->other_cpu_during > 1)
        return fail(p, rec->line, "a share of the CPU above 1");
    if (rec->field[COL_NOISY][0] != '\0') {
        err = parse_uint(p, rec, COL_NOISY, 1, &v);
        if (err < 0)
            return err;
        row->noisy = (int)v;
    }
    return 0;
}

/* Any format's header; sets p->ncols. */
static int check_header(struct parser *p, const struct record *rec)
{
    if (rec->nfields != NCOLS_FIRST && rec->nfields != NCOLS_SPLIT && rec->nfields != NCOLS_CORES &&
        rec->nfields != NCOLS)
        return fail(p, rec->line,
                    "header has %zu fields, expected %d (" BENCH_CSV_HEADER ") or %d (+ the CPU "
                    "split) or %d (+ cores) or %d (+ the noise)",
                    rec->nfields, NCOLS_FIRST, NCOLS_SPLIT, NCOLS_CORES, NCOLS);
    for (size_t i = 0; i < rec->nfields; i++)
        if (strcmp(rec->field[i], col_names[i]) != 0)
            return fail(p, rec->line, "header field %zu is not %s", i + 1, col_names[i]);
    p->ncols = rec->nfields;
    return 0;
}

int bench_csv_parse(const char *buf, size_t len, struct bench_rows *rows,
                    struct bench_csv_error *err)
{
    struct parser p = {.buf = buf, .len = len, .line = 1, .err = err};
    struct record rec;
    bool have_header = false;
    int rc;

    if (err != NULL) {
        err->line = 0;
        err->msg[0] = '\0';
    }
    while ((rc = next_record(&p, &rec)) > 0) {
        struct bench_row row;

        if (is_blank(&rec))
            continue;
        if (!have_header) {
            rc = check_header(&p, &rec);
            if (rc < 0)
                return rc;
            have_header = true;
            continue;
        }
        rc = parse_row(&p, &rec, &row);
        if (rc < 0)
            return rc;
        rc = bench_rows_add(rows, &row);
        if (rc < 0)
            return rc;
    }
    if (rc < 0)
        return rc;
    if (!have_header)
        return fail(&p, p.line, "no header (" BENCH_CSV_HEADER ")");
    return 0;
}

int bench_csv_read_file(const char *path, struct bench_rows *rows, struct bench_csv_error *err)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0;
    size_t cap = 0;
    int rc = 0;

    if (f == NULL)
        return -errno;
    for (;;) {
        size_t n;

        if (cap - len < 4096) {
            char *nb;

            cap = cap ? cap * 2 : 65536;
            nb = realloc(buf, cap);
            if (nb == NULL) {
                rc = -ENOMEM;
                goto out_free;
            }
            buf = nb;
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) {
            if (ferror(f))
                rc = -EIO;
            break;
        }
    }
    if (rc == 0)
        rc = bench_csv_parse(buf, len, rows, err);
out_free:
    free(buf);
    fclose(f);
    return rc;
}
