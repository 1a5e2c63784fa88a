/*
 * main.c - cabrank-httpd, the HTTP/1.1 static-file server: parses the flags,
 * opens the logs, creates the HTTP service (http_service.h) and runs it under
 * the chosen concurrency model with cr_server_run(), which turns TERM/INT
 * into a graceful stop, QUIT into an immediate one, and USR1 into a reopen of
 * the access and error logs. Runs on the main thread; the workers are the
 * model's.
 *
 * Once the model serves it prints one line per listener to stdout,
 * "listening on 127.0.0.1:PORT" (tests bind port 0 and read it), and logs
 * the same. A bad flag or an unusable root is one line on stderr and exit
 * status 2.
 */
#include <cabrank/handle_set.h>
#include <cabrank/lf_pool.h>
#include <cabrank/listener.h>
#include <cabrank/log.h>
#include <cabrank/server.h>

#include "../common/app_server.h"
#include "../common/options.h"
#include "access_log.h"
#include "http_service.h"

#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROG           "cabrank-httpd"
#define EXIT_USAGE     OPTS_EXIT_USAGE
#define DEFAULT_LISTEN "127.0.0.1:8080"
#define DEFAULT_ROOT   "./www"
#define DEFAULT_MIME   "/etc/mime.types"
/* lf's promotion delay where the order has one: a static file is answered in
 * microseconds and blocks only on a cold disk (see lf_pool.c). 5 ms, not 1: at
 * 1 ms the server spent 2.5% more CPU per small request and handed some turns
 * that were only slow to the other thread (README, "Deferred promotion"). */
#define DEFAULT_PROMOTION_DELAY_US 5000
#define UNSET_US                   UINT64_MAX
#define UNSET_LOWAT                (CR_SERVER_NOTSENT_SYSTEM - 1) /* outside the flag's range */
/* Clients of an HTTP server speak first: a connection is worth accepting
 * once its request arrives (a silent one waits in the kernel, not here). */
#define DEFAULT_DEFER_ACCEPT_S 1
#define NOPTS                  44 /* entries in opt_defs */

/* What one option changes, for a configuration re-read at SIGHUP. */
enum scope {
    SCOPE_SERVER,  /* the server's (listeners, model, pools): needs a restart */
    SCOPE_SERVICE, /* the HTTP service's: applied to new workers (process models) */
    SCOPE_LOG,     /* the logs: applied at once under every model */
    SCOPE_START,   /* read at start only (--config, --pid-file) */
};

/* Strings read from a configuration file, freed with the options. */
struct arena {
    struct arena *next;
    char s[];
};

struct options {
    struct cr_server_config server;
    struct http_service_config http;
    uint64_t promotion_delay_us; /* UNSET_US: the default for the order */
    uint64_t busy_poll_us;
    unsigned nlisten;
    bool listen_from_argv; /* the command line's --listen replace the file's */
    const char *access_log;
    enum access_log_format log_format;
    const char *error_log;
    bool has_log_level;
    enum cr_log_level log_level;
    const char *pid_file;
    const char *config;
    /* Each option's value as given ("" when unset; --listen: the last), to
     * tell what a re-read changed. Point into argv, the arena or literals. */
    const char *raw[NOPTS];
    unsigned listen_hash; /* every --listen, in order */
    struct arena *arena;
};

/* What the signal callbacks reach. Main thread only. */
struct app {
    int argc;
    char **argv;
    struct options *opts;  /* the configuration in force */
    struct options *first; /* the one the server was created with: lives to the end */
    bool process_model;
    struct http_service *http;
    struct access_log *log;
};

static const char *const *accept_locks(void)
{
    static const char *const list[] = {"pthread", "fcntl", "none", "reuseport", NULL};

    return list;
}

static const char *const *dispatchers(void)
{
    static const char *const list[] = {"single", "lf", "ring-per-thread", NULL};

    return list;
}

static const char *const *async_engines(void)
{
    static const char *const list[] = {"uring", "emulated", NULL};

    return list;
}

#define NUM(nm, sc, f, lo, hi, a, h)                                                               \
    {                                                                                              \
        OPTS_DEF_NUM(nm, struct options, f, lo, hi, a, h), .scope = sc                             \
    }
#define SECONDS(nm, sc, f, h)                                                                      \
    {                                                                                              \
        OPTS_DEF_SECONDS(nm, struct options, f, 0, h), .scope = sc                                 \
    }
#define FLAG(nm, sc, f, h)                                                                         \
    {                                                                                              \
        OPTS_DEF_FLAG(nm, struct options, f, h), .scope = sc                                       \
    }
#define STRING(nm, sc, f, a, h)                                                                    \
    {                                                                                              \
        OPTS_DEF_STRING(nm, struct options, f, a, h), .scope = sc                                  \
    }
#define CHOICE(nm, sc, f, list, a, h)                                                              \
    {                                                                                              \
        OPTS_DEF_CHOICE(nm, struct options, f, list, a, h), .scope = sc                            \
    }
#define SPECIAL(nm, sc, a, h)                                                                      \
    {                                                                                              \
        OPTS_DEF_SPECIAL(nm, a, h), .scope = sc                                                    \
    }

/*
 * One option, for every place that knows options: the command line, the
 * --config file, --help and the re-read at SIGHUP (which reads scope).
 */
static const struct opts_def opt_defs[] = {
    SPECIAL("config", SCOPE_START, "FILE",
            "read options from FILE: one \"name value\" a line,\n"
            "names as the flags' without \"--\", # comments;\n"
            "flags on the command line win (default none)"),
    SPECIAL("listen", SCOPE_SERVER, "ADDR",
            "address to serve, repeatable (default " DEFAULT_LISTEN "):\n"
            "127.0.0.1:8080, [::1]:8080, [::]:80, *:80, :80"),
    STRING("root", SCOPE_SERVICE, http.root, "DIR", "document root (default " DEFAULT_ROOT ")"),
    {OPTS_DEF_CHOICE("model", struct options, server.model, cr_server_models, "NAME",
                     "(default lf)"),
     .scope = SCOPE_SERVER, .help_lists = true},
    NUM("threads", SCOPE_SERVER, server.threads, 1, 4096, "N",
        "worker threads (default: CPUs; tpc: the cap, 1024;\n"
        "prefork: threads in each worker process, default 1)"),
    CHOICE("promotion", SCOPE_SERVER, server.promotion, cr_lf_pool_promotions, "ORDER",
           "lf: native, lifo, fifo, priority, lifo-lockfree\n(default lifo)"),
    {OPTS_DEF_SECONDS_US("promotion-delay", struct options, promotion_delay_us, 1,
                         "lf with lifo: a leader wakes no follower;\n"
                         "one takes over once a handler has run this long\n"
                         "(default 0.005; 0: wake one before every event)"),
     .scope = SCOPE_SERVER},
    {OPTS_DEF_SECONDS_US("busy-poll", struct options, busy_poll_us, 1,
                         "reactor, lf, hshr: a thread about to sleep for\n"
                         "events polls at most this long first, while idle\n"
                         "gaps are shorter: more req/s and less latency where\n"
                         "the client would wake it, more CPU (default 0)"),
     .scope = SCOPE_SERVER},
    NUM("groups", SCOPE_SERVER, server.groups, 1, 256, "N",
        "lf: handle sets, each its own L/F group (default 1)"),
    FLAG("multiple-leaders", SCOPE_SERVER, server.multiple_leaders,
         "lf with --groups > 1: one follower set, a thread leads\nany set without a leader"),
    CHOICE("backend", SCOPE_SERVER, server.backend, cr_handle_set_backends, "NAME",
           "handle set: epoll, poll or select (default epoll)"),
    NUM("defer-accept", SCOPE_SERVER, server.defer_accept_s, 0, 3600, "SECS",
        "accept a connection once its request arrives, or\n"
        "after SECS of silence (TCP_DEFER_ACCEPT); the\n"
        "accepting thread then reads it at once (default 1;\n"
        "0: accept at once)"),
    STRING("tcp-congestion", SCOPE_SERVER, server.tcp_congestion, "NAME",
           "TCP congestion control of the connections: cubic,\n"
           "reno, bbr... (default: the system's; BBR paces\n"
           "each socket with a timer where no fq qdisc does)"),
    STRING("loopback-congestion", SCOPE_SERVER, server.loopback_congestion, "NAME",
           "the same for the listeners on a loopback address\n"
           "and the connections from this host on a wildcard\n"
           "one, or \"same\" (default cubic where allowed, unless\n"
           "--tcp-congestion is given: loopback has no link\n"
           "for BBR's pacing to spare)"),
    NUM("send-budget", SCOPE_SERVER, server.send_budget, 0, SIZE_MAX, "BYTES",
        "bytes sent to a connection before the others ready\n"
        "get their turn: reactor, lf, hshr (default 262144;\n"
        "0: until its socket is full)"),
    NUM("notsent-lowat", SCOPE_SERVER, server.notsent_lowat, 0, INT_MAX, "BYTES",
        "a connection takes more of an answer only while less\n"
        "than BYTES of it wait unsent (TCP_NOTSENT_LOWAT): the\n"
        "kernel then sends large files in the server's own\n"
        "calls, and queues less ahead of a slow client\n"
        "(default 65536, prefork: the system's; 0: the\n"
        "system's)"),
    NUM("max-connections", SCOPE_SERVER, server.max_connections, 1, 10000000, "N",
        "stop accepting beyond N (default 10000)"),
    NUM("workers", SCOPE_SERVER, server.workers, 1, 65536, "N",
        "prefork: worker processes started at once, and never\nfewer (default: CPUs)"),
    NUM("min-spare", SCOPE_SERVER, server.min_spare, 1, 65536, "N",
        "prefork: idle workers kept at least (default 1)"),
    NUM("max-spare", SCOPE_SERVER, server.max_spare, 1, 65536, "N",
        "prefork: idle workers beyond are retired\n(default workers + min-spare)"),
    NUM("max-workers", SCOPE_SERVER, server.max_workers, 1, 65536, "N",
        "prefork: cap on workers; forking: cap on children\n(default 256)"),
    NUM("max-requests-per-child", SCOPE_SERVER, server.max_requests_per_child, 0, UINT64_MAX, "N",
        "prefork: retire a worker after N requests\n(default 0, never)"),
    CHOICE("accept-lock", SCOPE_SERVER, server.accept_lock, accept_locks, "KIND",
           "prefork: pthread, fcntl, none or reuseport\n(default pthread)"),
    SECONDS("busy-warn", SCOPE_SERVER, server.busy_warn_ms,
            "prefork: log a worker busy on one connection longer\n(default 60)"),
    CHOICE("dispatch", SCOPE_SERVER, server.dispatch, dispatchers, "KIND",
           "proactor: single, lf or ring-per-thread (default lf)"),
    CHOICE("async-engine", SCOPE_SERVER, server.async_engine, async_engines, "KIND",
           "proactor: uring or emulated (default uring where it\nworks)"),
    SECONDS("header-timeout", SCOPE_SERVICE, http.header_timeout_ms,
            "whole request head, from its first byte (default 20)"),
    SECONDS("body-timeout", SCOPE_SERVICE, http.body_timeout_ms,
            "between reads of a request body (default 60)"),
    SECONDS("keepalive-timeout", SCOPE_SERVICE, http.keepalive_timeout_ms,
            "idle between requests (default 5)"),
    SECONDS("send-timeout", SCOPE_SERVICE, http.send_timeout_ms, "no send progress (default 60)"),
    NUM("max-requests-per-connection", SCOPE_SERVICE, http.max_requests, 1, UINT_MAX, "N",
        "then Connection: close (default 1000)"),
    NUM("max-request-line", SCOPE_SERVICE, http.limits.request_line_max, 16, 1 << 20, "BYTES",
        "else 414 (default 8192)"),
    NUM("max-header-line", SCOPE_SERVICE, http.limits.header_line_max, 16, 1 << 20, "BYTES",
        "one header field line, else 431 (default 8192)"),
    NUM("max-headers-size", SCOPE_SERVICE, http.limits.headers_max, 16, 1 << 20, "BYTES",
        "all header field lines, else 431 (default 32768)"),
    NUM("max-header-fields", SCOPE_SERVICE, http.limits.fields_max, 1, 256, "N",
        "else 431 (default 100, at most 256)"),
    STRING("access-log", SCOPE_SERVICE, access_log, "FILE",
           "Common/Combined Log Format, buffered (default off)"),
    SPECIAL("log-format", SCOPE_SERVICE, "common|combined", "access log format (default combined)"),
    {OPTS_DEF_ERROR_LOG(struct options, error_log), .scope = SCOPE_LOG},
    {OPTS_DEF_LOG_LEVEL, .scope = SCOPE_LOG},
    STRING("pid-file", SCOPE_START, pid_file, "FILE",
           "written after binding, removed at exit (default none)"),
    SPECIAL("status-path", SCOPE_SERVICE, "PATH",
            "status page, \"off\" for none (default " HTTP_STATUS_PATH_DEFAULT ")"),
    FLAG("status-allow-remote", SCOPE_SERVICE, http.status_allow_remote,
         "status page for every client (default loopback only)"),
    FLAG("allow-outside-symlinks", SCOPE_SERVICE, http.allow_outside_symlinks,
         "follow symlinks leading out of the root (default no)"),
    STRING("mime-types", SCOPE_SERVICE, http.mime_types, "FILE",
           "extra MIME types (default " DEFAULT_MIME " if present)"),
};
_Static_assert(sizeof(opt_defs) / sizeof(opt_defs[0]) == NOPTS, "NOPTS: the entries of opt_defs");

static opts_special_fn set_special;

static const struct opts_table opt_table = {
    .defs = opt_defs,
    .ndefs = NOPTS,
    .special = set_special,
    .width = 30,
    .version = true,
    .prog = PROG,
    .usage = "usage: " PROG " [options]\n"
             "Serves the files beneath --root over HTTP/1.1 under a chosen concurrency model.\n"
             "Every option takes its value as --flag VALUE or --flag=VALUE; times are seconds\n"
             "(fractions allowed).\n"
             "\n",
    .footer =
        "\n"
        "Signals: TERM/INT stop gracefully, QUIT at once, USR1 reopens the logs. HUP re-reads\n"
        "--config: under prefork and forking, workers started after it (a new generation)\n"
        "serve with the new root, limits, timeouts, status page, MIME types and access log,\n"
        "while the old ones finish; under the thread models it reopens the logs and applies\n"
        "--log-level and --error-log; what it cannot apply is logged.\n",
};

/* Whether a promotion order takes a promotion delay (NULL: the default,
 * lifo). */
static bool defers(const char *promotion)
{
    return promotion == NULL || strcmp(promotion, "lifo") == 0;
}

static void defaults(struct options *o)
{
    memset(o, 0, sizeof(*o));
    o->http.root = DEFAULT_ROOT;
    o->promotion_delay_us = UNSET_US;
    o->server.defer_accept_s = DEFAULT_DEFER_ACCEPT_S;
    o->server.send_budget = CR_SERVER_SEND_BUDGET;
    o->server.notsent_lowat = UNSET_LOWAT;
    o->http.mime_types = access(DEFAULT_MIME, R_OK) == 0 ? DEFAULT_MIME : NULL;
    o->log_format = ACCESS_LOG_COMBINED;
    for (size_t i = 0; i < NOPTS; i++)
        o->raw[i] = "";
}

static void free_arena(struct options *o)
{
    while (o->arena != NULL) {
        struct arena *a = o->arena;

        o->arena = a->next;
        free(a);
    }
}

/* Frees options re-read at SIGHUP (heap) with their strings. */
static void free_options(struct options *o)
{
    if (o != NULL)
        free_arena(o);
    free(o);
}

/* A copy of s[0..len) that lives as long as o. NULL on ENOMEM. */
static const char *keep(struct options *o, const char *s, size_t len)
{
    struct arena *a = malloc(sizeof(*a) + len + 1);

    if (a == NULL)
        return NULL;
    memcpy(a->s, s, len);
    a->s[len] = '\0';
    a->next = o->arena;
    o->arena = a;
    return a->s;
}

/* The options that are more than a field: repeatable, mapped to an enum,
 * checked apart, or the command line's only. */
static int set_special(void *obj, const struct opts_def *d, const char *v, void *arg,
                       struct opts_err *e)
{
    struct options *o = obj;
    bool from_argv = *(const bool *)arg;
    const char *n = d->name;

    if (strcmp(n, "listen") == 0) {
        struct sockaddr_storage ss;
        socklen_t len;

        if (cr_listener_parse(v, &ss, &len) < 0)
            return opts_fail(e, "bad address '%s': numeric, with a port", v);
        if (from_argv && !o->listen_from_argv) {
            o->listen_from_argv = true; /* the command line wins over the file */
            o->nlisten = 0;
            o->listen_hash = 0;
        }
        if (o->nlisten == CR_SERVER_MAX_LISTEN)
            return opts_fail(e, "at most %d --listen", CR_SERVER_MAX_LISTEN);
        o->server.listen[o->nlisten++] = v;
        for (const char *p = v; *p != '\0'; p++)
            o->listen_hash = o->listen_hash * 31 + (unsigned char)*p;
        o->listen_hash = o->listen_hash * 31 + ',';
    } else if (strcmp(n, "log-format") == 0) {
        if (strcmp(v, "common") == 0)
            o->log_format = ACCESS_LOG_COMMON;
        else if (strcmp(v, "combined") == 0)
            o->log_format = ACCESS_LOG_COMBINED;
        else
            return opts_fail(e, "unknown log format '%s' (common, combined)", v);
    } else if (strcmp(n, "log-level") == 0) {
        if (opts_set_log_level(v, &o->log_level, e) < 0)
            return -EINVAL;
        o->has_log_level = true;
    } else if (strcmp(n, "status-path") == 0) {
        if (strcmp(v, "off") == 0)
            o->http.status_path = "";
        else if (v[0] != '/')
            return opts_fail(e, "--status-path '%s' must start with '/' (or be off)", v);
        else
            o->http.status_path = v;
    } else if (strcmp(n, "config") == 0) {
        if (!from_argv)
            return opts_fail(e, "--config is for the command line, not a configuration file");
        o->config = v;
    }
    return 0;
}

/*
 * Sets option d to v (NULL: a flag given without a value) and keeps v as
 * given for the re-read's comparison. v must live as long as o. 0, or
 * -EINVAL with e saying why.
 */
static int set_option(struct options *o, const struct opts_def *d, const char *v, bool from_argv,
                      struct opts_err *e)
{
    int err = opts_set(&opt_table, o, d, v, &from_argv, e);

    if (err < 0)
        return err;
    /* A flag's "--flag" and "--flag=yes" are the same setting. */
    if (d->kind == OPTS_FLAG)
        v = *(const bool *)(const void *)((const char *)o + d->off) ? "yes" : "no";
    o->raw[d - opt_defs] = v;
    return 0;
}

/* Applies a configuration file: "name value" lines, '#' comments. */
static int read_config(struct options *o, const char *path, struct opts_err *e)
{
    FILE *f = fopen(path, "re");
    char line[4096];
    unsigned lineno = 0;
    int err = 0;

    if (f == NULL)
        return opts_fail(e, "config '%s': %s", path, strerror(errno));
    while (err == 0 && fgets(line, sizeof(line), f) != NULL) {
        char *p = line;
        char *name;
        char *end;
        const struct opts_def *d;
        const char *v = NULL;
        struct opts_err inner;

        lineno++;
        if (strchr(line, '\n') == NULL && !feof(f)) {
            err = opts_fail(e, "%s:%u: line too long", path, lineno);
            break;
        }
        /* A '#' at the start of a word starts a comment. */
        for (char *c = p; *c != '\0'; c++) {
            if (*c == '#' && (c == p || c[-1] == ' ' || c[-1] == '\t')) {
                *c = '\0';
                break;
            }
        }
        while (*p == ' ' || *p == '\t')
            p++;
        end = p + strlen(p);
        while (end > p && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
            *--end = '\0';
        if (*p == '\0')
            continue;
        name = p;
        if (strncmp(name, "--", 2) == 0)
            name += 2;
        while (*p != '\0' && *p != ' ' && *p != '\t')
            p++;
        d = opts_find(&opt_table, name, (size_t)(p - name));
        if (d == NULL) {
            *p = '\0';
            err = opts_fail(e, "%s:%u: unknown option '%s'", path, lineno, name);
            break;
        }
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != '\0') {
            v = keep(o, p, strlen(p));
            if (v == NULL) {
                err = opts_fail(e, "%s:%u: out of memory", path, lineno);
                break;
            }
        }
        if (set_option(o, d, v, false, &inner) < 0)
            err = opts_fail(e, "%s:%u: %s", path, lineno, inner.msg);
    }
    if (err == 0 && ferror(f))
        err = opts_fail(e, "config '%s': read error", path);
    fclose(f);
    return err;
}

/* Whether the kernel lets the listeners use congestion control name: tried
 * on a socket of its own, so a bad name is a usage error, not a failure to
 * listen. */
static int check_congestion(const char *flag, const char *name, struct opts_err *e)
{
    int fd;
    int err;

    if (name == NULL)
        return 0;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0; /* no socket to try on: cr_server_create will say */
    err = cr_listener_congestion(fd, name);
    close(fd);
    if (err == -ENOENT || err == -EINVAL)
        return opts_fail(e, "--%s '%s': not in net.ipv4.tcp_available_congestion_control", flag,
                         name);
    if (err == -EPERM)
        return opts_fail(e, "--%s '%s': not in net.ipv4.tcp_allowed_congestion_control", flag,
                         name);
    if (err < 0)
        return opts_fail(e, "--%s '%s': %s", flag, name, strerror(-err));
    return 0;
}

/* The cross-field checks cr_server_create would refuse with -EINVAL. */
static int check_options(const struct options *o, struct opts_err *e)
{
    const struct cr_server_config *sc = &o->server;

    if (sc->workers != 0 && sc->max_workers != 0 && sc->workers > sc->max_workers)
        return opts_fail(e, "--workers %d is above --max-workers %d", sc->workers, sc->max_workers);
    if (sc->min_spare != 0 && sc->max_spare != 0 && sc->max_spare < sc->min_spare)
        return opts_fail(e, "--max-spare %d is below --min-spare %d", sc->max_spare, sc->min_spare);
    if (check_congestion("tcp-congestion", sc->tcp_congestion, e) < 0)
        return -EINVAL;
    if (sc->loopback_congestion != NULL &&
        strcmp(sc->loopback_congestion, CR_SERVER_CONGESTION_SAME) != 0)
        return check_congestion("loopback-congestion", sc->loopback_congestion, e);
    return 0;
}

/*
 * Builds the options: defaults, then the --config file, then the command
 * line (so its flags win; its --listen replace the file's). Exits for
 * --help and --version. 0 or -EINVAL with e saying why.
 */
static int load_options(struct options *o, int argc, char **argv, struct opts_err *e)
{
    const struct opts_def *d;
    const char *v;
    int err;

    defaults(o);
    /* The file first, wherever --config stands. */
    for (int i = 1; i < argc; i++) {
        err = opts_next(&opt_table, argc, argv, &i, &d, &v, e);
        if (err == OPTS_VERSION) {
            printf(PROG " " HTTPD_VERSION "\n");
            exit(EXIT_SUCCESS);
        }
        if (err == OPTS_HELP) {
            opts_print_help(stdout, &opt_table);
            exit(EXIT_SUCCESS);
        }
        if (err < 0)
            return err;
        if (strcmp(d->name, "config") == 0 && v != NULL)
            o->config = v;
    }
    if (o->config != NULL) {
        err = read_config(o, o->config, e);
        if (err < 0)
            return err;
    }
    for (int i = 1; i < argc; i++) {
        err = opts_next(&opt_table, argc, argv, &i, &d, &v, e);
        if (err == 0)
            err = set_option(o, d, v, true, e);
        if (err < 0)
            return err;
    }
    return check_options(o, e);
}

/* Worker slots for the service's per-worker data: at least every index
 * cr_conn_worker() can return under the model (more only wastes memory). */
static unsigned worker_slots(const struct cr_server_config *sc)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned threads = sc->threads > 0 ? (unsigned)sc->threads : (unsigned)(cpus > 0 ? cpus : 1);

    if (sc->model != NULL && strcmp(sc->model, "tpc") == 0 && sc->threads == 0)
        threads = 1024;
    return threads + 1;
}

static int write_pid_file(const char *path)
{
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err = 0;

    if (fd < 0)
        return -errno;
    if (write(fd, buf, (size_t)n) != n)
        err = errno != 0 ? -errno : -EIO;
    close(fd);
    return err;
}

/* Reopens the error log (at its path now) and the access log. */
static void reopen_logs(struct app *app)
{
    int err;

    if (app->opts->error_log != NULL) {
        err = app_open_error_log(app->opts->error_log);
        if (err < 0)
            CR_LOG(CR_LOG_ERROR, "reopening %s: %s", app->opts->error_log, strerror(-err));
    }
    if (app->log != NULL) {
        err = access_log_reopen(app->log);
        if (err < 0)
            CR_LOG(CR_LOG_ERROR, "reopening the access log: %s", strerror(-err));
    }
}

/* cr_server_run's SIGUSR1 callback, on the main thread. Under the process
 * models this reopens the master's access log, which workers forked later
 * inherit; running workers keep theirs until they are replaced (HUP). */
/* Says "listening" once the model serves: a status page asked for at once
 * then sees every first worker (prefork), and a script that waits for the
 * line finds the server ready, not just bound. */
static void on_started(struct cr_server *s, void *arg)
{
    const struct app *app = arg;
    const struct options *o = app->opts;
    struct cr_server_stats ss;
    char promotion[96] = "";

    app_say_listening(s);
    (void)cr_server_stats(s, &ss, NULL, 0);
    if (ss.promotion != NULL && o->promotion_delay_us != 0)
        snprintf(promotion, sizeof(promotion), ", promotion %s deferred %llu us", ss.promotion,
                 (unsigned long long)o->promotion_delay_us);
    else if (ss.promotion != NULL)
        snprintf(promotion, sizeof(promotion), ", promotion %s", ss.promotion);
    CR_LOG(CR_LOG_INFO, PROG " " HTTPD_VERSION ": root %s, model %s%s%s%s", o->http.root, ss.model,
           promotion, o->config != NULL ? ", config " : "", o->config != NULL ? o->config : "");
}

static void on_usr1(struct cr_server *s, void *arg)
{
    CR_UNUSED(s);
    reopen_logs(arg);
    CR_LOG(CR_LOG_INFO, "SIGUSR1: logs reopened");
}

/* Appends ", name" to a list. */
static void list_add(char *buf, size_t cap, const char *name)
{
    size_t n = strlen(buf);

    snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", name);
}

static bool same(const char *a, const char *b)
{
    return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

/* An unusable root is refused before anything changes. */
static int check_root(const char *root, struct opts_err *e)
{
    struct stat st;

    if (stat(root, &st) < 0)
        return opts_fail(e, "unusable root '%s': %s", root, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return opts_fail(e, "unusable root '%s': not a directory", root);
    return 0;
}

/*
 * Applies n (re-read at SIGHUP) to a process model: the service gets the new
 * configuration before cr_server_run calls cr_server_restart, so the new
 * generation forks with it while the old workers finish with their copy.
 * Changing the service here is safe because the master never serves: no
 * thread of this process reads the service's configuration (workers have
 * their own copy from fork), and a worker forked meanwhile by the manager
 * thread waits for http_service_reconfigure to finish the swap. 0, or -errno
 * with nothing changed.
 */
static int apply_to_service(struct app *app, struct options *n, bool log_changed,
                            struct opts_err *e)
{
    struct access_log *log = app->log;
    int err;

    if (log_changed && n->access_log != NULL) {
        struct access_log_config lc = {
            .path = n->access_log,
            .format = n->log_format,
            .buffers = app->first->http.workers,
        };

        err = access_log_open(&log, &lc);
        if (err < 0) {
            opts_fail(e, "access log '%s': %s", n->access_log, strerror(-err));
            return err;
        }
    } else if (log_changed) {
        log = NULL;
    }
    n->http.workers = app->first->http.workers;
    n->http.log = log;
    err = http_service_reconfigure(app->http, &n->http);
    if (err < 0) {
        if (log != app->log)
            access_log_close(log);
        opts_fail(e, "unusable root '%s': %s", n->http.root, strerror(-err));
        return err;
    }
    if (log != app->log) {
        /* The master never appends, so nothing is buffered in the old log;
         * running workers write through their own copy until they exit. */
        access_log_close(app->log);
        app->log = log;
    } else if (log != NULL) {
        err = access_log_reopen(log); /* after logrotate, like USR1 */
        if (err < 0)
            CR_LOG(CR_LOG_ERROR, "reopening the access log: %s", strerror(-err));
    }
    return 0;
}

/*
 * cr_server_run's SIGHUP callback, on the main thread (cr_server_restart
 * follows). Re-reads --config with the same command line; a bad file or
 * an unusable root is logged and the old configuration stays.
 */
static void on_hup(struct cr_server *s, void *arg)
{
    struct app *app = arg;
    struct options *n = calloc(1, sizeof(*n));
    struct options *o = app->opts;
    char applied[1024] = "";
    char restart[1024] = "";
    bool log_changed;
    struct opts_err e;
    int err;

    CR_UNUSED(s);
    if (n == NULL) {
        CR_LOG(CR_LOG_ERROR, "SIGHUP: out of memory; the configuration stays");
        return;
    }
    if (o->config == NULL) {
        free(n);
        reopen_logs(app);
        CR_LOG(CR_LOG_INFO, "SIGHUP: no --config to re-read; logs reopened");
        return;
    }
    err = load_options(n, app->argc, app->argv, &e);
    if (err == 0)
        err = check_root(n->http.root, &e);
    if (err < 0) {
        CR_LOG(CR_LOG_ERROR, "SIGHUP: %s; the configuration stays as it was", e.msg);
        free_options(n);
        return;
    }
    log_changed = !same(o->access_log, n->access_log) || o->log_format != n->log_format;
    if (app->process_model) {
        err = apply_to_service(app, n, log_changed, &e);
        if (err < 0) {
            CR_LOG(CR_LOG_ERROR, "SIGHUP: %s; the configuration stays as it was", e.msg);
            free_options(n);
            return;
        }
    }
    for (size_t i = 0; i < NOPTS; i++) {
        const struct opts_def *d = &opt_defs[i];
        bool changed = !same(o->raw[i], n->raw[i]);

        if (strcmp(d->name, "listen") == 0)
            changed = changed || o->listen_hash != n->listen_hash;
        if (!changed)
            continue;
        if (d->scope == SCOPE_LOG || (d->scope == SCOPE_SERVICE && app->process_model)) {
            list_add(applied, sizeof(applied), d->name);
        } else {
            list_add(restart, sizeof(restart), d->name);
            /* Serving threads read the service's configuration without
             * locks, so under the thread models it cannot change live: what
             * runs stays what the next HUP compares with. */
            n->raw[i] = o->raw[i];
            if (strcmp(d->name, "listen") == 0)
                n->listen_hash = o->listen_hash;
        }
    }
    if (n->has_log_level || o->has_log_level)
        cr_log_set_level(n->has_log_level ? n->log_level : CR_LOG_INFO);
    app->opts = n;
    if (app->process_model) {
        if (n->error_log != NULL) {
            err = app_open_error_log(n->error_log);
            if (err < 0)
                CR_LOG(CR_LOG_ERROR, "reopening %s: %s", n->error_log, strerror(-err));
        }
    } else {
        reopen_logs(app);
    }
    CR_LOG(CR_LOG_INFO, "SIGHUP: re-read %s; applied: %s; needs a restart: %s%s", n->config,
           applied[0] != '\0' ? applied : "nothing changed",
           restart[0] != '\0' ? restart : "nothing",
           !app->process_model ? "; logs reopened"
           : strcmp(app->first->server.model, "prefork") == 0
               ? "; starting a new generation of workers"
               : "; for the children forked from now on");
    if (o != app->first)
        free_options(o);
}

int main(int argc, char **argv)
{
    /* Static: the server's configuration points into it to the end, and
     * an early exit leaves it reachable rather than leaked. */
    static struct options first;
    struct options *o = &first;
    struct app app = {.argc = argc, .argv = argv};
    struct http_service *http = NULL;
    struct cr_server *srv = NULL;
    struct opts_err e;
    int status = EXIT_FAILURE;
    int err;

    if (load_options(o, argc, argv, &e) < 0) {
        opts_print_error(PROG, &e);
        return EXIT_USAGE;
    }
    if (check_root(o->http.root, &e) < 0) {
        fprintf(stderr, PROG ": %s\n", e.msg);
        return EXIT_USAGE;
    }
    if (o->has_log_level)
        cr_log_set_level(o->log_level);
    app.opts = o;
    app.first = o;
    app.process_model = o->server.model != NULL && (strcmp(o->server.model, "prefork") == 0 ||
                                                    strcmp(o->server.model, "forking") == 0);
    if (o->error_log != NULL) {
        err = app_open_error_log(o->error_log);
        if (err < 0) {
            fprintf(stderr, PROG ": error log '%s': %s\n", o->error_log, strerror(-err));
            return EXIT_USAGE;
        }
    }
    o->http.workers = worker_slots(&o->server);
    if (o->access_log != NULL) {
        struct access_log_config lc = {
            .path = o->access_log,
            .format = o->log_format,
            .buffers = o->http.workers,
        };

        err = access_log_open(&app.log, &lc);
        if (err < 0) {
            fprintf(stderr, PROG ": access log '%s': %s\n", o->access_log, strerror(-err));
            return EXIT_USAGE;
        }
        o->http.log = app.log;
    }
    err = http_service_create(&http, &o->http);
    if (err < 0) {
        fprintf(stderr, PROG ": unusable root '%s': %s\n", o->http.root, strerror(-err));
        status = EXIT_USAGE;
        goto out_log;
    }
    app.http = http;
    /* The idle timeout of a new connection is the head timeout: the service
     * sets every later wait itself. */
    o->server.idle_timeout_ms =
        o->http.header_timeout_ms != 0 ? o->http.header_timeout_ms : HTTP_HEADER_TIMEOUT_MS_DEFAULT;
    o->server.send_timeout_ms =
        o->http.send_timeout_ms != 0 ? o->http.send_timeout_ms : HTTP_SEND_TIMEOUT_MS_DEFAULT;
    if (o->promotion_delay_us == UNSET_US) {
        o->promotion_delay_us = defers(o->server.promotion) ? DEFAULT_PROMOTION_DELAY_US : 0;
    } else if (o->promotion_delay_us != 0 && !defers(o->server.promotion)) {
        fprintf(stderr, PROG ": --promotion-delay needs --promotion lifo\n");
        status = EXIT_USAGE;
        goto out_http;
    }
    o->server.promotion_delay_us = (unsigned)o->promotion_delay_us;
    o->server.busy_poll_us = (unsigned)o->busy_poll_us;
    if (o->server.send_budget == 0)
        o->server.send_budget = SIZE_MAX; /* the flag's 0; the library's is the default */
    if (o->server.notsent_lowat == 0)
        o->server.notsent_lowat = CR_SERVER_NOTSENT_SYSTEM; /* likewise */
    else if (o->server.notsent_lowat == UNSET_LOWAT)
        o->server.notsent_lowat = 0; /* the library's, which depends on the model */
    o->server.on_usr1 = on_usr1;
    o->server.on_hup = on_hup;
    o->server.on_started = on_started;
    o->server.signal_arg = &app;
    err = cr_server_create(&srv, &o->server, http_service_get(http));
    if (err < 0) {
        fprintf(stderr, PROG ": %s\n",
                err == -EINVAL ? "invalid server configuration (model, promotion, address, "
                                 "process settings)"
                               : strerror(-err));
        if (err == -EINVAL)
            status = EXIT_USAGE;
        goto out_http;
    }
    /* Bound; the pid file first, so it exists once we say we listen. */
    if (o->pid_file != NULL) {
        err = write_pid_file(o->pid_file);
        if (err < 0) {
            fprintf(stderr, PROG ": pid file '%s': %s\n", o->pid_file, strerror(-err));
            goto out_server;
        }
    }
    err = cr_server_run(srv);
    if (err < 0)
        CR_LOG(CR_LOG_ERROR, "server: %s", strerror(-err));
    else
        status = EXIT_SUCCESS;
    {
        struct cr_server_stats ss;

        (void)cr_server_stats(srv, &ss, NULL, 0);
        CR_LOG(CR_LOG_INFO, "stopped after %llu requests",
               (unsigned long long)(app.process_model ? ss.requests : http_service_requests(http)));
    }
    if (o->pid_file != NULL)
        unlink(o->pid_file);
out_server:
    cr_server_destroy(srv);
out_http:
    http_service_destroy(http);
out_log:
    access_log_close(app.log);
    if (app.opts != app.first)
        free_options(app.opts);
    free_arena(app.first);
    return status;
}
