/*
 * httpd_options.c - cabrank-httpd's options (httpd_options.h): the table of
 * every option with its help and scope, defaults, the --config file reader
 * (one "name value" a line, the command line's names), the options that are
 * more than a field, and the checks across options. Main thread only.
 */
#include "httpd_options.h"
#include "version.h"

#include <cabrank/handle_set.h>
#include <cabrank/lf_pool.h>
#include <cabrank/listener.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_LISTEN "127.0.0.1:8080"
#define DEFAULT_ROOT   "./www"
#define DEFAULT_MIME   "/etc/mime.types"
/* Clients of an HTTP server speak first: a connection is worth accepting
 * once its request arrives (a silent one waits in the kernel, not here). */
#define DEFAULT_DEFER_ACCEPT_S 1

/* Strings read from a configuration file, freed with the options. */
struct arena {
    struct arena *next;
    char s[];
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
        OPTS_DEF_NUM(nm, struct httpd_options, f, lo, hi, a, h), .scope = sc                       \
    }
#define SECONDS(nm, sc, f, h)                                                                      \
    {                                                                                              \
        OPTS_DEF_SECONDS(nm, struct httpd_options, f, 0, h), .scope = sc                           \
    }
#define FLAG(nm, sc, f, h)                                                                         \
    {                                                                                              \
        OPTS_DEF_FLAG(nm, struct httpd_options, f, h), .scope = sc                                 \
    }
#define STRING(nm, sc, f, a, h)                                                                    \
    {                                                                                              \
        OPTS_DEF_STRING(nm, struct httpd_options, f, a, h), .scope = sc                            \
    }
#define CHOICE(nm, sc, f, list, a, h)                                                              \
    {                                                                                              \
        OPTS_DEF_CHOICE(nm, struct httpd_options, f, list, a, h), .scope = sc                      \
    }
#define SPECIAL(nm, sc, a, h)                                                                      \
    {                                                                                              \
        OPTS_DEF_SPECIAL(nm, a, h), .scope = sc                                                    \
    }

/*
 * One option, for every place that knows options: the command line, the
 * --config file, --help and the re-read at SIGHUP (which reads scope).
 */
const struct opts_def httpd_opt_defs[NOPTS] = {
    SPECIAL("config", SCOPE_START, "FILE",
            "read options from FILE: one \"name value\" a line,\n"
            "names as the flags' without \"--\", # comments;\n"
            "flags on the command line win (default none)"),
    SPECIAL("listen", SCOPE_SERVER, "ADDR",
            "address to serve, repeatable (default " DEFAULT_LISTEN "):\n"
            "127.0.0.1:8080, [::1]:8080, [::]:80, *:80, :80"),
    STRING("root", SCOPE_SERVICE, http.root, "DIR", "document root (default " DEFAULT_ROOT ")"),
    {OPTS_DEF_CHOICE("model", struct httpd_options, server.model, cr_server_models, "NAME",
                     "(default lf)"),
     .scope = SCOPE_SERVER, .help_lists = true},
    NUM("threads", SCOPE_SERVER, server.threads, 1, 4096, "N",
        "worker threads (default: the CPUs it may use; lf: 2\n"
        "per handle set; tpc: the cap, 1024; prefork:\n"
        "threads in each worker process, default 1)"),
    CHOICE("promotion", SCOPE_SERVER, server.promotion, cr_lf_pool_promotions, "ORDER",
           "lf: native, lifo, fifo, priority, lifo-lockfree\n(default lifo)"),
    {OPTS_DEF_SECONDS_US("promotion-delay", struct httpd_options, promotion_delay_us, 1,
                         "lf with lifo: a leader wakes no follower;\n"
                         "one takes over once a handler has run this long\n"
                         "(default 0.005; 0: wake one before every event)"),
     .scope = SCOPE_SERVER},
    {OPTS_DEF_SECONDS_US("busy-poll", struct httpd_options, busy_poll_us, 1,
                         "reactor, lf, hshr: a thread about to sleep for\n"
                         "events polls at most this long first, while idle\n"
                         "gaps are shorter: more req/s and less latency where\n"
                         "the client would wake it, more CPU (default 0)"),
     .scope = SCOPE_SERVER},
    {OPTS_DEF_NUM("groups", struct httpd_options, server.groups, 1, CR_SERVER_MAX_GROUPS, "auto|N",
                  "lf, hshr: handle sets, each with its own listener and\n"
                  "L/F group of threads (lf) or job queue and workers\n"
                  "(hshr); auto: lf one per CPU it may use (affinity\n"
                  "mask, cgroup quota), or --threads/2; hshr 1\n"
                  "(default auto)"),
     .scope = SCOPE_SERVER, .zero_word = "auto"},
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
    {OPTS_DEF_NUM("timeline", struct httpd_options, timeline_events, 16, 65536, "off|N",
                  "role changes each thread (or worker process) keeps\n"
                  "for the status page's timeline; off: none recorded\n"
                  "(default 1024)"),
     .scope = SCOPE_SERVER, .zero_word = "off"},
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
           "proactor: single, lf or ring-per-thread (default\n"
           "ring-per-thread on 3 CPUs or more, else lf)"),
    CHOICE("async-engine", SCOPE_SERVER, server.async_engine, async_engines, "KIND",
           "proactor: uring or emulated (default uring where it\nworks)"),
    SECONDS("header-timeout", SCOPE_SERVICE, http.header_timeout_ms,
            "whole request head: the first from the connection's\narrival, later ones from their "
            "first byte (default 20)"),
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
    {OPTS_DEF_ERROR_LOG(struct httpd_options, error_log), .scope = SCOPE_LOG},
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
_Static_assert(sizeof(httpd_opt_defs) / sizeof(httpd_opt_defs[0]) == NOPTS,
               "NOPTS: the entries of httpd_opt_defs");

static opts_special_fn set_special;

static const struct opts_table opt_table = {
    .defs = httpd_opt_defs,
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

bool httpd_options_defers(const char *promotion)
{
    return promotion == NULL || strcmp(promotion, "lifo") == 0;
}

static void defaults(struct httpd_options *o)
{
    memset(o, 0, sizeof(*o));
    o->http.root = DEFAULT_ROOT;
    o->promotion_delay_us = UNSET_US;
    o->server.defer_accept_s = DEFAULT_DEFER_ACCEPT_S;
    o->server.send_budget = CR_SERVER_SEND_BUDGET;
    o->timeline_events = CR_TIMELINE_EVENTS_DEFAULT;
    o->server.notsent_lowat = UNSET_LOWAT;
    o->http.mime_types = access(DEFAULT_MIME, R_OK) == 0 ? DEFAULT_MIME : NULL;
    o->log_format = ACCESS_LOG_COMBINED;
    for (size_t i = 0; i < NOPTS; i++)
        o->raw[i] = "";
}

void httpd_options_fini(struct httpd_options *o)
{
    while (o->arena != NULL) {
        struct arena *a = o->arena;

        o->arena = a->next;
        free(a);
    }
}

void httpd_options_free(struct httpd_options *o)
{
    if (o != NULL)
        httpd_options_fini(o);
    free(o);
}

/* A copy of s[0..len) that lives as long as o. NULL on ENOMEM. */
static const char *keep(struct httpd_options *o, const char *s, size_t len)
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
    struct httpd_options *o = obj;
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
static int set_option(struct httpd_options *o, const struct opts_def *d, const char *v,
                      bool from_argv, struct opts_err *e)
{
    int err = opts_set(&opt_table, o, d, v, &from_argv, e);

    if (err < 0)
        return err;
    /* A flag's "--flag" and "--flag=yes" are the same setting. */
    if (d->kind == OPTS_FLAG)
        v = *(const bool *)(const void *)((const char *)o + d->off) ? "yes" : "no";
    o->raw[d - httpd_opt_defs] = v;
    return 0;
}

/* Applies a configuration file: "name value" lines, '#' comments. */
static int read_config(struct httpd_options *o, const char *path, struct opts_err *e)
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
static int check_options(const struct httpd_options *o, struct opts_err *e)
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

int httpd_options_load(struct httpd_options *o, int argc, char **argv, struct opts_err *e)
{
    const struct opts_def *d;
    const char *v;
    int err;

    defaults(o);
    /* The file first, wherever --config stands. */
    for (int i = 1; i < argc; i++) {
        err = opts_next(&opt_table, argc, argv, &i, &d, &v, e);
        if (err == OPTS_VERSION) {
            printf(PROG " %s\n", httpd_version());
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
