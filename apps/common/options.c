/*
 * options.c - Parsing and --help of the table-driven options of apps/ (see
 * options.h). Called by the programs' mains on their main thread, and by
 * cabrank-httpd at SIGHUP to re-read its configuration. Owns nothing: values
 * point into argv or wherever the caller keeps them.
 */
#include "options.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What OPTS_SECONDS allows when the table says no more: far beyond any
 * timeout, yet its milliseconds cannot overflow. */
#define MAX_SECONDS_DEFAULT (86400.0 * 365)

int opts_fail(struct opts_err *e, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
    return -EINVAL;
}

const struct opts_def *opts_find(const struct opts_table *t, const char *name, size_t len)
{
    for (size_t i = 0; i < t->ndefs; i++) {
        if (strlen(t->defs[i].name) == len && memcmp(t->defs[i].name, name, len) == 0)
            return &t->defs[i];
    }
    return NULL;
}

const char *opts_join(const char *const *list, char *buf, size_t cap)
{
    size_t n = 0;

    buf[0] = '\0';
    for (; *list != NULL; list++) {
        int k = snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", *list);

        if (k < 0 || (size_t)k >= cap - n) {
            buf[n] = '\0'; /* no half name */
            break;
        }
        n += (size_t)k;
    }
    return buf;
}

static bool in_list(const char *const *list, const char *name)
{
    for (; *list != NULL; list++) {
        if (strcmp(*list, name) == 0)
            return true;
    }
    return false;
}

/* strtoull alone takes "-1" (as its negation) and " 1": only digits pass. */
static int parse_num(const struct opts_def *d, const char *v, unsigned long long *out,
                     struct opts_err *e)
{
    char *end;
    unsigned long long n;

    if (v[0] < '0' || v[0] > '9')
        return opts_fail(e, "--%s wants a number, not '%s'", d->name, v);
    errno = 0;
    n = strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0' || n < d->min || n > d->max)
        return opts_fail(e, "--%s: '%s' is not a number in %llu..%llu", d->name, v, d->min, d->max);
    *out = n;
    return 0;
}

/* Seconds, fractions allowed, into units of 1/per_second. OPTS_SECONDS: at
 * least 1 ms, so a tiny value never reads as 0, which the services take for
 * their default. OPTS_SECONDS_US: 0 is a value of its own. */
static int parse_seconds(const struct opts_def *d, const char *v, uint64_t *out, struct opts_err *e)
{
    double max = d->max != 0 ? (double)d->max : MAX_SECONDS_DEFAULT;
    bool zero_ok = d->kind == OPTS_SECONDS_US;
    double per_second = zero_ok ? 1e6 : 1e3;
    char *end;
    double s;

    /* strtod alone takes " 1", "-1", "inf", "nan" and hex. */
    if (!((v[0] >= '0' && v[0] <= '9') || v[0] == '.'))
        return opts_fail(e, "--%s wants seconds, not '%s'", d->name, v);
    errno = 0;
    s = strtod(v, &end);
    if (errno != 0 || *end != '\0' || !(zero_ok ? s >= 0 : s > 0))
        return opts_fail(e, "--%s: '%s' is not a %s number of seconds", d->name, v,
                         zero_ok ? "non-negative" : "positive");
    if (s > max)
        return opts_fail(e, "--%s: '%s' is more than %g seconds", d->name, v, max);
    *out = !zero_ok && s * per_second < 1 ? 1 : (uint64_t)(s * per_second + 0.5);
    return 0;
}

static int parse_flag(const struct opts_def *d, const char *v, bool *out, struct opts_err *e)
{
    if (v == NULL || strcmp(v, "yes") == 0 || strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
        *out = true;
    else if (strcmp(v, "no") == 0 || strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
        *out = false;
    else
        return opts_fail(e, "--%s takes no value, or yes/no (got '%s')", d->name, v);
    return 0;
}

int opts_set(const struct opts_table *t, void *obj, const struct opts_def *d, const char *v,
             void *arg, struct opts_err *e)
{
    char *field = (char *)obj + d->off;
    unsigned long long u = 0;
    uint64_t ms = 0;
    bool flag = false;
    char list[256];
    int err;

    if (d->kind == OPTS_FLAG) {
        err = parse_flag(d, v, &flag, e);
        if (err < 0)
            return err;
        assert(d->size == sizeof(bool));
        memcpy(field, &flag, sizeof(flag));
        return 0;
    }
    if (v == NULL || v[0] == '\0')
        return opts_fail(e, "--%s needs a value", d->name);

    switch (d->kind) {
    case OPTS_NUM:
        err = d->zero_word != NULL && strcmp(v, d->zero_word) == 0 ? 0 : parse_num(d, v, &u, e);
        if (err < 0)
            return err;
        /* int, unsigned or uint64_t: the table's range fits the field, and
         * an int's value up to INT_MAX has the same bytes as an unsigned's. */
        if (d->size == sizeof(uint32_t)) {
            uint32_t x = (uint32_t)u;

            assert(d->max <= UINT32_MAX);
            memcpy(field, &x, sizeof(x));
        } else {
            uint64_t x = u;

            assert(d->size == sizeof(x));
            memcpy(field, &x, sizeof(x));
        }
        return 0;
    case OPTS_SECONDS:
    case OPTS_SECONDS_US:
        err = parse_seconds(d, v, &ms, e);
        if (err < 0)
            return err;
        assert(d->size == sizeof(ms));
        memcpy(field, &ms, sizeof(ms));
        return 0;
    case OPTS_CHOICE:
        if (!in_list(d->choices(), v))
            return opts_fail(e, "unknown --%s '%s' (%s)", d->name, v,
                             opts_join(d->choices(), list, sizeof(list)));
        /* fall through */
    case OPTS_STRING:
        assert(d->size == sizeof(const char *));
        memcpy(field, &v, sizeof(v));
        return 0;
    case OPTS_SPECIAL:
        assert(t->special != NULL);
        return t->special(obj, d, v, arg, e);
    case OPTS_FLAG:
        break;
    }
    return 0;
}

int opts_next(const struct opts_table *t, int argc, char **argv, int *i, const struct opts_def **d,
              const char **v, struct opts_err *e)
{
    const char *a = argv[*i];
    const char *eq;

    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
        return OPTS_HELP;
    if (t->version && strcmp(a, "--version") == 0)
        return OPTS_VERSION;
    if (strncmp(a, "--", 2) != 0)
        return opts_fail(e, "unknown option '%s'", a);
    eq = strchr(a + 2, '=');
    *d = opts_find(t, a + 2, eq != NULL ? (size_t)(eq - a - 2) : strlen(a + 2));
    if (*d == NULL)
        return opts_fail(e, "unknown option '%s'", a);
    if (eq != NULL) {
        *v = eq + 1;
    } else if ((*d)->kind == OPTS_FLAG) {
        /* A flag never takes the next word: "--flag no" would be ambiguous. */
        *v = NULL;
    } else if (*i + 1 >= argc) {
        return opts_fail(e, "--%s needs a value", (*d)->name);
    } else {
        *v = argv[++*i];
    }
    return 0;
}

int opts_parse(const struct opts_table *t, void *obj, int argc, char **argv, void *arg,
               struct opts_err *e)
{
    for (int i = 1; i < argc; i++) {
        const struct opts_def *d;
        const char *v;
        int err = opts_next(t, argc, argv, &i, &d, &v, e);

        if (err == 0)
            err = opts_set(t, obj, d, v, arg, e);
        if (err != 0)
            return err;
    }
    return 0;
}

/* Prints s, each '\n' followed by the help column's indent. */
static void put_help(FILE *f, const char *s, unsigned indent)
{
    for (; *s != '\0'; s++) {
        fputc(*s, f);
        if (*s == '\n')
            fprintf(f, "%*s", (int)indent, "");
    }
}

void opts_print_help(FILE *f, const struct opts_table *t)
{
    char list[256];

    if (t->usage != NULL)
        fputs(t->usage, f);
    for (size_t i = 0; i < t->ndefs; i++) {
        const struct opts_def *d = &t->defs[i];
        char flag[64];

        snprintf(flag, sizeof(flag), "--%s%s%s", d->name, d->arg != NULL ? " " : "",
                 d->arg != NULL ? d->arg : "");
        /* "  " + column + " ": a flag wider than its column gets a space
         * more, so the help still stands apart from it. */
        fprintf(f, "  %-*s %s", (int)t->width, flag, strlen(flag) > t->width ? " " : "");
        if (d->help_lists)
            fprintf(f, "%s%s", opts_join(d->choices(), list, sizeof(list)),
                    d->help != NULL ? " " : "");
        if (d->help != NULL)
            put_help(f, d->help, t->width + 3);
        fputc('\n', f);
    }
    fprintf(f, "  %-*s this text\n", (int)t->width, "--help");
    if (t->version)
        fprintf(f, "  %-*s the version\n", (int)t->width, "--version");
    if (t->footer != NULL)
        fputs(t->footer, f);
}

int opts_set_log_level(const char *v, enum cr_log_level *level, struct opts_err *e)
{
    if (cr_log_parse_level(v, level) < 0)
        return opts_fail(e, "unknown log level '%s' (error, warn, info, debug)", v);
    return 0;
}

void opts_print_error(const char *prog, const struct opts_err *e)
{
    char line[sizeof(e->msg) + 128];
    int n = snprintf(line, sizeof(line), "%s: %s (see --help)\n", prog, e->msg);

    if (n < 0)
        return;
    if ((size_t)n >= sizeof(line)) {
        n = (int)sizeof(line) - 1;
        line[n - 1] = '\n';
    }
    /* One write: a line from a program started by a script or a test is
     * never interleaved with another's. */
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return;
}

void opts_exit_usage(const struct opts_table *t, const struct opts_err *e)
{
    opts_print_error(t->prog, e);
    exit(OPTS_EXIT_USAGE);
}

void opts_parse_or_exit(const struct opts_table *t, void *obj, int argc, char **argv, void *arg)
{
    struct opts_err e;
    int err = opts_parse(t, obj, argc, argv, arg, &e);

    assert(!t->version);
    if (err == OPTS_HELP) {
        opts_print_help(stdout, t);
        exit(EXIT_SUCCESS);
    }
    if (err < 0)
        opts_exit_usage(t, &e);
}
