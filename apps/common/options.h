/*
 * options.h - The programs' command-line options, described once in a table
 * (struct opts_def) that serves parsing, --help and, in cabrank-httpd, the
 * --config file and its re-read at SIGHUP. Used by the mains of apps/: each
 * keeps its option struct, its table and what is more than a field (repeated
 * flags, enums, cross-field checks) in a callback. Runs on the caller's
 * thread; keeps no state: every function is safe to call from any thread
 * on its own arguments.
 *
 * Errors go into a struct opts_err; the program prints it as one line on
 * stderr (opts_print_error) and exits with OPTS_EXIT_USAGE.
 */
#ifndef CABRANK_APPS_COMMON_OPTIONS_H
#define CABRANK_APPS_COMMON_OPTIONS_H

#include <cabrank/log.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The exit status of a bad flag. */
#define OPTS_EXIT_USAGE 2
/* What opts_next and opts_parse return for --help (or -h) and --version. */
#define OPTS_HELP    1
#define OPTS_VERSION 2

/* How an option's value is read and where it goes (bytes [off, off + size)
 * of the caller's struct). */
enum opts_kind {
    OPTS_NUM,        /* decimal in [min, max], into a 4- or 8-byte unsigned or int */
    OPTS_SECONDS,    /* seconds, fractions allowed, into a uint64_t of milliseconds
                      (more than 0) */
    OPTS_SECONDS_US, /* the same into microseconds, 0 allowed */
    OPTS_FLAG,       /* no value, or yes/no (true/false, 1/0) after '=', into a bool */
    OPTS_STRING,     /* a non-empty value, kept as const char * (not copied) */
    OPTS_CHOICE,     /* one of choices(), kept as const char * */
    OPTS_SPECIAL,    /* given to the table's special callback */
};

/*
 * One option. name is the flag without "--" (and a --config file's key);
 * arg and help make its --help line, each '\n' in help continuing under the
 * help column. scope is the caller's own tag (cabrank-httpd: what a re-read
 * at SIGHUP may change); this component never reads it.
 */
struct opts_def {
    const char *name;
    enum opts_kind kind;
    int scope;
    size_t off;
    size_t size;
    /* OPTS_NUM: the range. OPTS_SECONDS(_US): max is the most seconds (0: a year). */
    unsigned long long min;
    unsigned long long max;
    const char *const *(*choices)(void); /* OPTS_CHOICE: NULL-terminated */
    const char *zero_word;               /* OPTS_NUM: a word that stores 0 ("auto") */
    bool help_lists;                     /* --help says the choices before help */
    const char *arg;
    const char *help;
};

/* The field f of the struct type t, for an opts_def initialiser. */
#define OPTS_FIELD(t, f) .off = offsetof(t, f), .size = sizeof(((t *)0)->f)

/*
 * The fields of one table row, into field f of struct type t, to put in
 * braces with whatever else the row sets:
 * {OPTS_DEF_NUM("threads", struct options, threads, 1, 64, "N", "..."), .scope = 1}.
 */
#define OPTS_DEF_NUM(nm, t, f, lo, hi, a, h)                                                       \
    .name = nm, .kind = OPTS_NUM, OPTS_FIELD(t, f), .min = lo, .max = hi, .arg = a, .help = h
#define OPTS_DEF_SECONDS(nm, t, f, hi, h)                                                          \
    .name = nm, .kind = OPTS_SECONDS, OPTS_FIELD(t, f), .max = hi, .arg = "SECS", .help = h
#define OPTS_DEF_SECONDS_US(nm, t, f, hi, h)                                                       \
    .name = nm, .kind = OPTS_SECONDS_US, OPTS_FIELD(t, f), .max = hi, .arg = "SECS", .help = h
#define OPTS_DEF_FLAG(nm, t, f, h) .name = nm, .kind = OPTS_FLAG, OPTS_FIELD(t, f), .help = h
#define OPTS_DEF_STRING(nm, t, f, a, h)                                                            \
    .name = nm, .kind = OPTS_STRING, OPTS_FIELD(t, f), .arg = a, .help = h
#define OPTS_DEF_CHOICE(nm, t, f, list, a, h)                                                      \
    .name = nm, .kind = OPTS_CHOICE, OPTS_FIELD(t, f), .choices = list, .arg = a, .help = h
#define OPTS_DEF_SPECIAL(nm, a, h) .name = nm, .kind = OPTS_SPECIAL, .arg = a, .help = h

/* The servers' log options: --log-level (special: opts_set_log_level) and
 * --error-log into the const char * field f. */
#define OPTS_DEF_LOG_LEVEL                                                                         \
    OPTS_DEF_SPECIAL("log-level", "LEVEL", "error, warn, info or debug (default info)")
#define OPTS_DEF_ERROR_LOG(t, f)                                                                   \
    OPTS_DEF_STRING("error-log", t, f, "FILE", "error log (default stderr)")

/* Where a parse error is described: one line, without the program's name. */
struct opts_err {
    char msg[400];
};

/*
 * An OPTS_SPECIAL option's value v (never NULL) for obj. arg is what the
 * caller gave opts_set or opts_parse. 0, or -EINVAL after opts_fail(e, ...).
 */
typedef int opts_special_fn(void *obj, const struct opts_def *d, const char *v, void *arg,
                            struct opts_err *e);

/* A program's options. */
struct opts_table {
    const struct opts_def *defs;
    size_t ndefs;
    opts_special_fn *special; /* NULL when no option is OPTS_SPECIAL */
    unsigned width;           /* --help: the flag column's width */
    bool version;             /* --version is an option (else unknown) */
    const char *prog;         /* the usage line's name */
    const char *usage;        /* --help's text before the options, or NULL */
    const char *footer;       /* --help's text after them, or NULL */
};

/* The fields of a table of the array arr, to put in braces with the rest:
 * {OPTS_TABLE(opt_defs, set_special, 24), .prog = PROG, .usage = "..."}. */
#define OPTS_TABLE(arr, fn, w)                                                                     \
    .defs = arr, .ndefs = sizeof(arr) / sizeof((arr)[0]), .special = fn, .width = w

/* Describes the error in e; returns -EINVAL. */
__attribute__((format(printf, 2, 3))) int opts_fail(struct opts_err *e, const char *fmt, ...);

/* The option named name[0..len), or NULL. */
const struct opts_def *opts_find(const struct opts_table *t, const char *name, size_t len);

/*
 * Sets option d of t in obj to v (NULL: given without a value, which only a
 * flag may be). v must live as long as obj. 0, or -EINVAL with e saying why
 * and obj's field unchanged.
 */
int opts_set(const struct opts_table *t, void *obj, const struct opts_def *d, const char *v,
             void *arg, struct opts_err *e);

/*
 * Splits argv[*i]: "--name=value", "--name value" (then *i moves past the
 * value) or a flag alone (*v = NULL). 0 with *d and *v, OPTS_HELP,
 * OPTS_VERSION (if t->version), or -EINVAL with e saying why.
 */
int opts_next(const struct opts_table *t, int argc, char **argv, int *i, const struct opts_def **d,
              const char **v, struct opts_err *e);

/* opts_next then opts_set over argv[1..argc): 0, OPTS_HELP, OPTS_VERSION
 * (at the first of them) or -EINVAL. */
int opts_parse(const struct opts_table *t, void *obj, int argc, char **argv, void *arg,
               struct opts_err *e);

/* "a, b, c" of a NULL-terminated list into buf (cut short if it does not
 * fit); returns buf. */
const char *opts_join(const char *const *list, char *buf, size_t cap);

/* --help: t->usage, the lines of t's options, one per option in table
 * order in two columns, --help's own (and --version's if t->version),
 * then t->footer. */
void opts_print_help(FILE *f, const struct opts_table *t);

/* --log-level's value v into *level. 0, or -EINVAL with e saying why. */
int opts_set_log_level(const char *v, enum cr_log_level *level, struct opts_err *e);

/* "prog: msg (see --help)" as one write to stderr. */
void opts_print_error(const char *prog, const struct opts_err *e);

/* For a main: the usage line of e (opts_print_error with t->prog), then
 * exit(OPTS_EXIT_USAGE). */
__attribute__((noreturn)) void opts_exit_usage(const struct opts_table *t,
                                               const struct opts_err *e);

/*
 * For a main without --version: opts_parse over argv; at --help prints
 * the help to stdout and exits 0, at a bad flag opts_exit_usage. Returns
 * once every option is set.
 */
void opts_parse_or_exit(const struct opts_table *t, void *obj, int argc, char **argv, void *arg);

#endif /* CABRANK_APPS_COMMON_OPTIONS_H */
