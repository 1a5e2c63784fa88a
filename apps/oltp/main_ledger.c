/*
 * main_ledger.c - cabrank-ledger, the back-end transaction server of issue
 * #8: parses the flags, opens the ledger service (ledger.h: the database,
 * the session table) and runs it under the chosen concurrency model with
 * cr_server_run(), which turns TERM/INT into a graceful stop and QUIT into
 * an immediate one. Runs on the main thread; the workers are the model's.
 *
 * Once the model serves it prints "listening on 127.0.0.1:PORT" to stdout
 * for each listener (tests bind port 0 and read it), and logs the same. At
 * exit it logs one line of totals. A bad flag is one line on stderr and
 * exit status 2; so is a database that cannot be opened.
 */
#include <cabrank/listener.h>
#include <cabrank/log.h>
#include <cabrank/server.h>

#include "ledger.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG           "cabrank-ledger"
#define EXIT_USAGE     2
#define DEFAULT_LISTEN "127.0.0.1:7070"
#define DEFAULT_DB     "./ledger.db"
/* Writes block their thread until durable: more threads than CPUs are what
 * lets group commit gather them into one fsync. */
#define DEFAULT_THREADS 16

struct options {
    struct cr_server_config server;
    struct ledger_config ledger;
    unsigned nlisten;
    bool no_group_commit;
    bool has_log_level;
    enum cr_log_level log_level;
    const char *log_level_name;
    const char *error_log;
};

enum opt_kind {
    OPT_NUM,     /* an integer in [min, max], into an int or unsigned */
    OPT_SECONDS, /* seconds, fractions allowed, into a uint64_t of milliseconds */
    OPT_FLAG,    /* no value, into a bool */
    OPT_STRING,  /* any value, kept as const char * */
    OPT_SPECIAL, /* set_special() */
};

/* One option: its flag without "--", where its value goes (a field of
 * struct options at off), and its --help line. */
struct opt_def {
    const char *name;
    enum opt_kind kind;
    size_t off;
    unsigned long long min;
    unsigned long long max;
    const char *arg;
    const char *help;
};

#define FIELD(f) .off = offsetof(struct options, f)

static const struct opt_def opt_defs[] = {
    {.name = "listen",
     .kind = OPT_SPECIAL,
     .arg = "ADDR",
     .help = "address to serve, repeatable (default " DEFAULT_LISTEN ")"},
    {.name = "db",
     .kind = OPT_STRING,
     FIELD(ledger.db_url),
     .arg = "URL",
     .help = "SQLite file, or postgresql://... (default " DEFAULT_DB ")"},
    {.name = "model", .kind = OPT_SPECIAL, .arg = "NAME", .help = NULL /* lists the models */},
    {.name = "threads",
     .kind = OPT_NUM,
     FIELD(server.threads),
     .min = 1,
     .max = 4096,
     .arg = "N",
     .help = "worker threads (default 16; tpc: the cap on\n"
             "                           connections, 1024; prefork: per process, 1)"},
    {.name = "workers",
     .kind = OPT_NUM,
     FIELD(server.workers),
     .min = 1,
     .max = 1024,
     .arg = "N",
     .help = "prefork: worker processes (default: CPUs)"},
    {.name = "no-group-commit",
     .kind = OPT_FLAG,
     FIELD(no_group_commit),
     .help = "one fsync per transaction (default: group commit)"},
    {.name = "session-timeout",
     .kind = OPT_SECONDS,
     FIELD(ledger.session_timeout_ms),
     .arg = "SECS",
     .help = "idle sessions expire after (default 60)"},
    {.name = "max-sessions",
     .kind = OPT_NUM,
     FIELD(ledger.max_sessions),
     .min = 1,
     .max = 1u << 24,
     .arg = "N",
     .help = "BEGIN refused beyond (default 65536)"},
    {.name = "idle-timeout",
     .kind = OPT_SECONDS,
     FIELD(ledger.idle_timeout_ms),
     .arg = "SECS",
     .help = "close connections idle this long (default 300)"},
    {.name = "max-connections",
     .kind = OPT_NUM,
     FIELD(server.max_connections),
     .min = 1,
     .max = 10000000,
     .arg = "N",
     .help = "stop accepting beyond N (default 10000)"},
    {.name = "log-level",
     .kind = OPT_SPECIAL,
     .arg = "LEVEL",
     .help = "error, warn, info or debug (default info)"},
    {.name = "error-log",
     .kind = OPT_STRING,
     FIELD(error_log),
     .arg = "FILE",
     .help = "error log (default stderr)"},
};
#define NOPTS (sizeof(opt_defs) / sizeof(opt_defs[0]))

static void usage(FILE *f)
{
    fputs("usage: " PROG " [options]\n"
          "The ledger's transaction server (issue #8): accounts, transfers with idempotency\n"
          "keys and multi-request sessions over the OLTP protocol, each write acknowledged\n"
          "only once durable. Options take --flag VALUE or --flag=VALUE; times are seconds\n"
          "(fractions allowed).\n"
          "\n",
          f);
    for (size_t i = 0; i < NOPTS; i++) {
        const struct opt_def *d = &opt_defs[i];
        char flag[64];

        snprintf(flag, sizeof(flag), "--%s%s%s", d->name, d->arg != NULL ? " " : "",
                 d->arg != NULL ? d->arg : "");
        fprintf(f, "  %-24s ", flag);
        if (d->help != NULL) {
            fprintf(f, "%s\n", d->help);
            continue;
        }
        for (const char *const *m = cr_server_models(); *m != NULL; m++)
            fprintf(f, "%s%s", m == cr_server_models() ? "" : ", ", *m);
        fputs(" (default lf)\n", f);
    }
    fputs("  --help                   this text\n"
          "\n"
          "Signals: TERM/INT stop gracefully (requests in flight finish), QUIT at once.\n"
          "Under prefork and forking each worker process opens its own database\n"
          "connections, and sessions live in the process that began them.\n",
          f);
}

/* One line on stderr (one write), exit status 2. */
__attribute__((format(printf, 1, 2), noreturn)) static void die_usage(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    int n = snprintf(line, sizeof(line), PROG ": ");

    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    fwrite(line, 1, (size_t)n, stderr);
    exit(EXIT_USAGE);
}

static const struct opt_def *find_opt(const char *name, size_t len)
{
    for (size_t i = 0; i < NOPTS; i++) {
        if (strlen(opt_defs[i].name) == len && memcmp(opt_defs[i].name, name, len) == 0)
            return &opt_defs[i];
    }
    return NULL;
}

static void set_special(struct options *o, const struct opt_def *d, const char *v)
{
    if (strcmp(d->name, "listen") == 0) {
        struct sockaddr_storage ss;
        socklen_t len;

        if (cr_listener_parse(v, &ss, &len) < 0)
            die_usage("bad address '%s': numeric, with a port", v);
        if (o->nlisten == CR_SERVER_MAX_LISTEN)
            die_usage("at most %d --listen", CR_SERVER_MAX_LISTEN);
        o->server.listen[o->nlisten++] = v;
    } else if (strcmp(d->name, "model") == 0) {
        const char *const *m = cr_server_models();

        while (*m != NULL && strcmp(*m, v) != 0)
            m++;
        if (*m == NULL)
            die_usage("unknown --model '%s' (see --help)", v);
        o->server.model = v;
    } else if (strcmp(d->name, "log-level") == 0) {
        if (cr_log_parse_level(v, &o->log_level) < 0)
            die_usage("unknown log level '%s' (error, warn, info, debug)", v);
        o->has_log_level = true;
    }
}

/* Sets option d to v (NULL for a flag); exits on a bad value. */
static void set_option(struct options *o, const struct opt_def *d, const char *v)
{
    char *field = (char *)o + d->off;
    char *end;

    switch (d->kind) {
    case OPT_NUM: {
        unsigned long long n;

        errno = 0;
        n = (v[0] >= '0' && v[0] <= '9') ? strtoull(v, &end, 10) : 0;
        if (v[0] < '0' || v[0] > '9' || errno != 0 || *end != '\0' || n < d->min || n > d->max)
            die_usage("--%s: '%s' is not a number in %llu..%llu", d->name, v, d->min, d->max);
        /* int and unsigned fields both take any value up to max. */
        if (d->off == offsetof(struct options, ledger.max_sessions))
            *(unsigned *)(void *)field = (unsigned)n;
        else
            *(int *)(void *)field = (int)n;
        return;
    }
    case OPT_SECONDS: {
        double s;

        errno = 0;
        s = strtod(v, &end);
        if (!((v[0] >= '0' && v[0] <= '9') || v[0] == '.') || errno != 0 || *end != '\0' ||
            !(s > 0) || s > 86400.0 * 365)
            die_usage("--%s: '%s' is not a positive number of seconds", d->name, v);
        *(uint64_t *)(void *)field = s * 1000 < 1 ? 1 : (uint64_t)(s * 1000 + 0.5);
        return;
    }
    case OPT_FLAG:
        *(bool *)(void *)field = true;
        return;
    case OPT_STRING:
        if (v[0] == '\0')
            die_usage("--%s needs a value", d->name);
        *(const char **)(void *)field = v;
        return;
    case OPT_SPECIAL:
        set_special(o, d, v);
        return;
    }
}

static void parse_args(struct options *o, int argc, char **argv)
{
    memset(o, 0, sizeof(*o));
    o->ledger.db_url = DEFAULT_DB;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *eq;
        const char *v = NULL;
        const struct opt_def *d;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(EXIT_SUCCESS);
        }
        if (strncmp(a, "--", 2) != 0)
            die_usage("unknown option '%s' (see --help)", a);
        eq = strchr(a + 2, '=');
        d = find_opt(a + 2, eq != NULL ? (size_t)(eq - a - 2) : strlen(a + 2));
        if (d == NULL)
            die_usage("unknown option '%s' (see --help)", a);
        if (d->kind == OPT_FLAG) {
            if (eq != NULL)
                die_usage("--%s takes no value", d->name);
        } else if (eq != NULL) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            die_usage("--%s needs a value", d->name);
        }
        set_option(o, d, v);
    }
    if (o->nlisten == 0)
        o->server.listen[o->nlisten++] = DEFAULT_LISTEN;
    o->ledger.group_commit = !o->no_group_commit;
}

static bool is_process_model(const char *model)
{
    return model != NULL && (strcmp(model, "prefork") == 0 || strcmp(model, "forking") == 0);
}

static void on_started(struct cr_server *s, void *arg)
{
    const struct options *o = arg;
    struct cr_server_stats ss;

    for (unsigned i = 0; i < cr_server_listeners(s); i++) {
        char addr[80];

        if (cr_server_address(s, i, addr, sizeof(addr)) == 0) {
            printf("listening on %s\n", addr);
            CR_LOG(CR_LOG_INFO, "listening on %s", addr);
        }
    }
    fflush(stdout);
    (void)cr_server_stats(s, &ss, NULL, 0);
    CR_LOG(CR_LOG_INFO, PROG ": db %s, model %s, %u workers, group commit %s", o->ledger.db_url,
           ss.model, ss.workers, o->ledger.group_commit ? "on" : "off");
}

/* Sends stderr (and so the log records) to path. -errno. */
static int open_error_log(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    int err = 0;

    if (fd < 0)
        return -errno;
    if (dup2(fd, STDERR_FILENO) < 0)
        err = -errno;
    close(fd);
    return err;
}

int main(int argc, char **argv)
{
    /* Static: the server's configuration points into it to the end. */
    static struct options opts;
    struct options *o = &opts;
    struct ledger *l = NULL;
    struct cr_server *srv = NULL;
    struct ledger_stats st;
    struct cr_server_stats ss;
    int status = EXIT_FAILURE;
    int err;

    parse_args(o, argc, argv);
    if (o->has_log_level)
        cr_log_set_level(o->log_level);
    if (o->error_log != NULL) {
        err = open_error_log(o->error_log);
        if (err < 0) {
            fprintf(stderr, PROG ": error log '%s': %s\n", o->error_log, strerror(-err));
            return EXIT_USAGE;
        }
    }
    o->ledger.process_model = is_process_model(o->server.model);
    /* tpc reads threads as its cap on connections: its default stays. */
    if (o->server.threads == 0 && !o->ledger.process_model &&
        (o->server.model == NULL || strcmp(o->server.model, "tpc") != 0))
        o->server.threads = DEFAULT_THREADS;
    err = ledger_create(&l, &o->ledger);
    if (err < 0) {
        fprintf(stderr, PROG ": database '%s': %s\n", o->ledger.db_url,
                err == -ENOSYS ? "PostgreSQL support is not built in" : strerror(-err));
        return EXIT_USAGE;
    }
    o->server.idle_timeout_ms =
        o->ledger.idle_timeout_ms != 0 ? o->ledger.idle_timeout_ms : LEDGER_IDLE_TIMEOUT_MS_DEFAULT;
    o->server.on_started = on_started;
    o->server.signal_arg = o;
    err = cr_server_create(&srv, &o->server, ledger_service(l));
    if (err < 0) {
        fprintf(stderr, PROG ": %s: %s\n", o->server.listen[0],
                err == -EINVAL ? "invalid server configuration" : strerror(-err));
        status = err == -EINVAL ? EXIT_USAGE : EXIT_FAILURE;
        goto out_ledger;
    }
    err = cr_server_run(srv);
    if (err < 0)
        CR_LOG(CR_LOG_ERROR, "server: %s", strerror(-err));
    else
        status = EXIT_SUCCESS;
    ledger_stats(l, &st);
    (void)cr_server_stats(srv, &ss, NULL, 0);
    if (is_process_model(o->server.model))
        CR_LOG(CR_LOG_INFO, "stopped after %llu requests (counted per worker process)",
               (unsigned long long)ss.requests);
    else
        CR_LOG(CR_LOG_INFO,
               "stopped after %llu requests: %llu units in %llu commits (at most %llu a "
               "commit), %llu sessions (%llu committed, %llu aborted, %llu expired)",
               (unsigned long long)st.requests, (unsigned long long)st.units,
               (unsigned long long)st.commits, (unsigned long long)st.max_batch,
               (unsigned long long)st.sessions, (unsigned long long)st.session_commits,
               (unsigned long long)st.session_aborts, (unsigned long long)st.expired);
    cr_server_destroy(srv);
out_ledger:
    ledger_destroy(l);
    return status;
}
