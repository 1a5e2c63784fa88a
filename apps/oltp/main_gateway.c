/*
 * main_gateway.c - cabrank-gateway, the OLTP service's front end (issue #8):
 * parses the flags, opens the error log, creates the gateway (gateway.h) and
 * serves until TERM or INT, then stops gracefully (requests in progress are
 * answered first). Runs on the main thread; the pool threads are the
 * gateway's.
 *
 * The gateway is not a cr_server: it runs its own cr_lf_pool, whose reactor
 * also carries the back-end connections of its hybrid bound pools and their
 * timers, which no concurrency model of cr_server offers. So the main thread
 * waits for signals itself with sigtimedwait, as cr_server_run does.
 *
 * Once serving it prints "listening on ADDR:PORT" to stdout, the bound
 * address (tests bind 127.0.0.1 port 0 and read it). A bad flag is one line on stderr and exit
 * status 2.
 */
#include <cabrank/lf_pool.h>
#include <cabrank/listener.h>
#include <cabrank/log.h>

#include "gateway.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG           "cabrank-gateway"
#define EXIT_USAGE     2
#define DEFAULT_LISTEN "127.0.0.1:7000"
/* How long a graceful stop waits for requests in progress. */
#define DRAIN_MS 10000

struct options {
    struct oltp_gateway_config gw;
    const char *backends[OLTP_GATEWAY_MAX_BACKENDS];
    const char *error_log;
    enum cr_log_level log_level;
};

enum opt_kind {
    OPT_NUM,     /* an unsigned in [min, max] */
    OPT_SECONDS, /* seconds, fractions allowed, into a uint64_t of milliseconds */
    OPT_STRING,  /* kept as const char * */
    OPT_SPECIAL, /* set_special() */
};

/* One flag: its name without "--", how its value is read, where it goes (a
 * field of struct options at off) and its --help line. */
struct opt_def {
    const char *name;
    enum opt_kind kind;
    size_t off;
    unsigned min;
    unsigned max;
    const char *arg;
    const char *help;
};

#define FIELD(f) .off = offsetof(struct options, f)
static const struct opt_def opt_defs[] = {
    {"listen", OPT_STRING, FIELD(gw.listen), 0, 0, "ADDR",
     "address to serve (default " DEFAULT_LISTEN ")"},
    {"backend", OPT_SPECIAL, 0, 0, 0, "ADDR",
     "a cabrank-ledger to forward to, repeatable, at least one"},
    {"threads", OPT_NUM, FIELD(gw.threads), 1, 1024, "N", "pool threads (default 4)"},
    {"promotion", OPT_STRING, FIELD(gw.promotion), 0, 0, "ORDER",
     "L/F promotion: native, lifo, fifo, priority,\nlifo-lockfree (default lifo)"},
    {"connections", OPT_NUM, FIELD(gw.connections), 1, 64, "N",
     "multiplexed connections per back end (default 2)"},
    {"health-interval", OPT_SECONDS, FIELD(gw.health_interval_ms), 0, 0, "SECS",
     "PING every back-end connection this often; no reply in\n"
     "twice as long fails it (default 1)"},
    {"timeout", OPT_SECONDS, FIELD(gw.timeout_ms), 0, 0, "SECS",
     "per forwarded request (default 10)"},
    {"log-level", OPT_SPECIAL, 0, 0, 0, "LEVEL", "error, warn, info or debug (default info)"},
    {"error-log", OPT_STRING, FIELD(error_log), 0, 0, "FILE", "error log (default stderr)"},
};
#define NOPTS (sizeof(opt_defs) / sizeof(opt_defs[0]))

static void usage(FILE *f)
{
    fputs("usage: " PROG " --backend ADDR [options]\n"
          "Front end of the OLTP service: validates clients' requests and forwards them to\n"
          "cabrank-ledger back ends over multiplexed connections, balancing, health-checking\n"
          "and failing over. Values as --flag VALUE or --flag=VALUE.\n"
          "\n",
          f);
    for (size_t i = 0; i < NOPTS; i++) {
        const struct opt_def *d = &opt_defs[i];
        char flag[64];

        snprintf(flag, sizeof(flag), "--%s %s", d->name, d->arg);
        fprintf(f, "  %-24s ", flag);
        for (const char *s = d->help; *s != '\0'; s++) {
            fputc(*s, f);
            if (*s == '\n')
                fprintf(f, "%27s", "");
        }
        fputc('\n', f);
    }
    fputs("  --help                   this text\n"
          "\n"
          "Signals: TERM/INT stop gracefully.\n",
          f);
}

/* One line on stderr, exit status 2. */
__attribute__((format(printf, 1, 2), noreturn)) static void die_usage(const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, PROG ": %s (see --help)\n", msg);
    exit(EXIT_USAGE);
}

static unsigned parse_uint(const char *name, const char *v, unsigned min, unsigned max)
{
    char *end;
    unsigned long n;

    errno = 0;
    if (v[0] < '0' || v[0] > '9')
        die_usage("--%s wants a number, not '%s'", name, v);
    n = strtoul(v, &end, 10);
    if (errno != 0 || *end != '\0' || n < min || n > max)
        die_usage("--%s: '%s' is not a number in %u..%u", name, v, min, max);
    return (unsigned)n;
}

/* Seconds, fractions allowed, into milliseconds (at least 1). */
static uint64_t parse_seconds(const char *name, const char *v)
{
    char *end;
    double s;

    errno = 0;
    if (!((v[0] >= '0' && v[0] <= '9') || v[0] == '.'))
        die_usage("--%s wants seconds, not '%s'", name, v);
    s = strtod(v, &end);
    if (errno != 0 || *end != '\0' || !(s > 0) || s > 86400.0)
        die_usage("--%s: '%s' is not a positive number of seconds", name, v);
    return s * 1000 < 1 ? 1 : (uint64_t)(s * 1000 + 0.5);
}

static void check_address(const char *name, const char *v)
{
    struct sockaddr_storage ss;
    socklen_t len;

    if (cr_listener_parse(v, &ss, &len) < 0)
        die_usage("--%s: bad address '%s': numeric, with a port", name, v);
}

static void check_promotion(const char *v)
{
    for (const char *const *p = cr_lf_pool_promotions(); *p != NULL; p++) {
        if (strcmp(*p, v) == 0)
            return;
    }
    die_usage("--promotion: unknown order '%s'", v);
}

static void set_option(struct options *o, const struct opt_def *d, const char *v)
{
    char *field = (char *)o + d->off;

    switch (d->kind) {
    case OPT_NUM:
        *(unsigned *)(void *)field = parse_uint(d->name, v, d->min, d->max);
        break;
    case OPT_SECONDS:
        *(uint64_t *)(void *)field = parse_seconds(d->name, v);
        break;
    case OPT_STRING:
        if (strcmp(d->name, "listen") == 0)
            check_address(d->name, v);
        if (strcmp(d->name, "promotion") == 0)
            check_promotion(v);
        *(const char **)(void *)field = v;
        break;
    case OPT_SPECIAL:
        if (strcmp(d->name, "backend") == 0) {
            check_address(d->name, v);
            if (o->gw.nbackends == OLTP_GATEWAY_MAX_BACKENDS)
                die_usage("at most %d --backend", OLTP_GATEWAY_MAX_BACKENDS);
            o->backends[o->gw.nbackends++] = v;
        } else if (cr_log_parse_level(v, &o->log_level) < 0) {
            die_usage("unknown log level '%s' (error, warn, info, debug)", v);
        }
        break;
    }
}

static void parse_args(struct options *o, int argc, char **argv)
{
    memset(o, 0, sizeof(*o));
    o->gw.listen = DEFAULT_LISTEN;
    o->log_level = CR_LOG_INFO;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *eq;
        const char *v;
        size_t len;
        const struct opt_def *d = NULL;

        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0)
            die_usage("unexpected argument '%s'", a);
        a += 2;
        eq = strchr(a, '=');
        len = eq != NULL ? (size_t)(eq - a) : strlen(a);
        for (size_t k = 0; k < NOPTS; k++) {
            if (strlen(opt_defs[k].name) == len && memcmp(opt_defs[k].name, a, len) == 0)
                d = &opt_defs[k];
        }
        if (d == NULL)
            die_usage("unknown option '%s'", argv[i]);
        if (eq != NULL)
            v = eq + 1;
        else if (i + 1 < argc)
            v = argv[++i];
        else
            die_usage("--%s wants a value", d->name);
        set_option(o, d, v);
    }
    if (o->gw.nbackends == 0)
        die_usage("at least one --backend is needed");
    o->gw.backends = o->backends;
}

/* What the gateway did, once at exit (tests read it from --error-log). */
static void log_totals(struct oltp_gateway *g)
{
    static struct oltp_gateway_stats st;

    oltp_gateway_stats(g, &st);
    CR_LOG(CR_LOG_INFO,
           "totals: connections %llu, requests %llu, local %llu, forwarded %llu, retried %llu, "
           "in doubt %llu, unavailable %llu",
           (unsigned long long)st.accepted, (unsigned long long)st.requests,
           (unsigned long long)st.local, (unsigned long long)st.forwarded,
           (unsigned long long)st.retried, (unsigned long long)st.in_doubt,
           (unsigned long long)st.unavailable);
    for (unsigned i = 0; i < st.nbackends; i++) {
        const struct oltp_gateway_backend_stats *b = &st.backends[i];

        CR_LOG(CR_LOG_INFO,
               "backend %u: %s, forwarded %llu, connection failures %llu, reconnects %llu", i,
               b->live ? "live" : "down", (unsigned long long)b->forwarded,
               (unsigned long long)b->failures, (unsigned long long)b->reconnects);
    }
}

int main(int argc, char **argv)
{
    const struct timespec poll_ts = {.tv_sec = 0, .tv_nsec = 200 * 1000000L};
    struct options o;
    struct oltp_gateway *g;
    sigset_t set;
    int log_fd = -1;
    int err;
    int rc = 1;

    parse_args(&o, argc, argv);
    cr_log_set_level(o.log_level);
    if (o.error_log != NULL) {
        log_fd = open(o.error_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (log_fd < 0) {
            fprintf(stderr, PROG ": %s: %s\n", o.error_log, strerror(errno));
            return 1;
        }
        cr_log_set_fd(log_fd);
    }
    /* Blocked before the pool starts, so its threads inherit the mask and the
     * signals wait for sigtimedwait below (PIPE: a client gone mid-write). */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGPIPE);
    err = -pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (err < 0) {
        fprintf(stderr, PROG ": sigmask: %s\n", strerror(-err));
        goto out_log;
    }
    err = oltp_gateway_create(&g, &o.gw);
    if (err < 0) {
        fprintf(stderr, PROG ": listen on %s: %s\n", o.gw.listen, strerror(-err));
        goto out_log;
    }
    err = oltp_gateway_start(g);
    if (err < 0) {
        CR_LOG(CR_LOG_ERROR, "start: %s", strerror(-err));
        goto out_destroy;
    }
    printf("listening on %s\n", oltp_gateway_address(g));
    fflush(stdout);
    CR_LOG(CR_LOG_INFO, "listening on %s, %u back end(s)", oltp_gateway_address(g), o.gw.nbackends);
    for (;;) {
        int signo = sigtimedwait(&set, NULL, &poll_ts);

        if (signo == SIGTERM || signo == SIGINT) {
            CR_LOG(CR_LOG_INFO, "signal %d: graceful stop", signo);
            break;
        }
        /* EAGAIN (timeout), EINTR, SIGPIPE: nothing to do. */
    }
    err = oltp_gateway_stop(g, DRAIN_MS);
    if (err < 0)
        CR_LOG(CR_LOG_ERROR, "stop: %s", strerror(-err));
    else
        rc = 0;
    log_totals(g);
out_destroy:
    oltp_gateway_destroy(g);
out_log:
    if (log_fd >= 0) {
        cr_log_set_fd(-1);
        close(log_fd);
    }
    return rc;
}
