/*
 * main_gateway.c - cabrank-gateway, the OLTP service's front end:
 * parses the flags, opens the error log, creates the gateway (gateway.h) and
 * serves until TERM or INT, then stops gracefully (requests in progress are
 * answered first). Runs on the main thread; the pool threads are the
 * gateway's.
 *
 * The gateway is not a cr_server: it runs its own cr_lf_pool, whose reactors
 * (one per handle set, --groups) also carry the back-end connections of its
 * hybrid bound pools and their timers, which no concurrency model of
 * cr_server offers. So the main thread waits for signals itself with
 * sigtimedwait, as cr_server_run does.
 *
 * Once serving it prints "listening on ADDR:PORT" to stdout, the bound
 * address (tests bind 127.0.0.1 port 0 and read it), and logs "serving with
 * N handle sets, M threads". A bad flag is one line on stderr and exit
 * status 2.
 */
#include <cabrank/lf_pool.h>
#include <cabrank/listener.h>
#include <cabrank/log.h>

#include "../common/app_server.h"
#include "../common/options.h"
#include "gateway.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG           "cabrank-gateway"
#define DEFAULT_LISTEN "127.0.0.1:7000"
/* How long a graceful stop waits for requests in progress. */
#define DRAIN_MS 10000

struct options {
    struct oltp_gateway_config gw;
    const char *backends[OLTP_GATEWAY_MAX_BACKENDS];
    const char *error_log;
    enum cr_log_level log_level;
};

static opts_special_fn set_special;

/* One flag: its name without "--", how its value is read, where it goes (a
 * field of struct options) and its --help line. A timeout beyond a day
 * (86400 s) is a mistake. */
static const struct opts_def opt_defs[] = {
    {OPTS_DEF_SPECIAL("listen", "ADDR", "address to serve (default " DEFAULT_LISTEN ")")},
    {OPTS_DEF_SPECIAL("backend", "ADDR",
                      "a cabrank-ledger to forward to, repeatable, at least one")},
    {OPTS_DEF_NUM("groups", struct options, gw.groups, 1, OLTP_GATEWAY_MAX_SETS, "auto|N",
                  "handle sets, each with its listener copy (SO_REUSEPORT),\n"
                  "back-end connections and threads (default auto: one per\n"
                  "CPU it may use, at most --threads / 2)"),
     .zero_word = "auto"},
    {OPTS_DEF_NUM("threads", struct options, gw.threads, 1, 1024, "N",
                  "pool threads, split over the sets (default 2 per set)")},
    {OPTS_DEF_CHOICE("promotion", struct options, gw.promotion, cr_lf_pool_promotions, "ORDER",
                     "L/F promotion: native, lifo, fifo, priority,\nlifo-lockfree (default lifo)")},
    {OPTS_DEF_NUM("connections", struct options, gw.connections, 1, 64, "N",
                  "multiplexed connections per back end and set (default 2)")},
    {OPTS_DEF_SECONDS("health-interval", struct options, gw.health_interval_ms, 86400,
                      "PING every back-end connection this often; no reply in\n"
                      "twice as long fails it (default 1)")},
    {OPTS_DEF_SECONDS("timeout", struct options, gw.timeout_ms, 86400,
                      "per forwarded request (default 10)")},
    {OPTS_DEF_LOG_LEVEL},
    {OPTS_DEF_ERROR_LOG(struct options, error_log)},
};

static const struct opts_table opt_table = {
    OPTS_TABLE(opt_defs, set_special, 24),
    .prog = PROG,
    .usage = "usage: " PROG " --backend ADDR [options]\n"
             "Front end of the OLTP service: validates clients' requests and forwards them to\n"
             "cabrank-ledger back ends over multiplexed connections, balancing, health-checking\n"
             "and failing over. Values as --flag VALUE or --flag=VALUE.\n"
             "\n",
    .footer = "\n"
              "Signals: TERM/INT stop gracefully.\n",
};

/* The options that are more than a field: addresses, checked here so a
 * typo is a usage error rather than a failed start, and the log level. */
static int set_special(void *obj, const struct opts_def *d, const char *v, void *arg,
                       struct opts_err *e)
{
    struct options *o = obj;
    struct sockaddr_storage ss;
    socklen_t len;

    CR_UNUSED(arg);
    if (strcmp(d->name, "log-level") == 0)
        return opts_set_log_level(v, &o->log_level, e);
    if (cr_listener_parse(v, &ss, &len) < 0)
        return opts_fail(e, "--%s: bad address '%s': numeric, with a port", d->name, v);
    if (strcmp(d->name, "listen") == 0) {
        o->gw.listen = v;
    } else {
        if (o->gw.nbackends == OLTP_GATEWAY_MAX_BACKENDS)
            return opts_fail(e, "at most %d --backend", OLTP_GATEWAY_MAX_BACKENDS);
        o->backends[o->gw.nbackends++] = v;
    }
    return 0;
}

/* The options from argv; exits for --help and for a bad flag. */
static void parse_args(struct options *o, int argc, char **argv)
{
    struct opts_err e;

    memset(o, 0, sizeof(*o));
    o->gw.listen = DEFAULT_LISTEN;
    o->log_level = CR_LOG_INFO;
    opts_parse_or_exit(&opt_table, o, argc, argv, NULL);
    if (o->gw.nbackends == 0) {
        opts_fail(&e, "at least one --backend is needed");
        opts_exit_usage(&opt_table, &e);
    }
    if (o->gw.groups != 0 && o->gw.threads != 0 && o->gw.threads < o->gw.groups) {
        opts_fail(&e, "--threads %u is fewer than --groups %u: a set needs a thread", o->gw.threads,
                  o->gw.groups);
        opts_exit_usage(&opt_table, &e);
    }
    o->gw.backends = o->backends;
}

/* The handle sets the gateway serves with (tests read the first line). */
static void log_sets(struct oltp_gateway *g)
{
    static struct oltp_gateway_stats st;

    oltp_gateway_stats(g, &st);
    CR_LOG(CR_LOG_INFO, "serving with %u handle set%s, %u threads", st.nsets,
           st.nsets == 1 ? "" : "s", st.threads);
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
    for (unsigned i = 0; i < st.nsets; i++)
        CR_LOG(CR_LOG_INFO, "set %u: %u threads, connections %llu, requests %llu", i,
               st.sets[i].threads, (unsigned long long)st.sets[i].accepted,
               (unsigned long long)st.sets[i].requests);
    for (unsigned i = 0; i < st.nbackends; i++) {
        const struct oltp_gateway_backend_stats *b = &st.backends[i];

        CR_LOG(CR_LOG_INFO,
               "backend %u: %s, forwarded %llu, connection failures %llu, reconnects %llu", i,
               !b->live      ? "down"
               : b->refusing ? "live, refusing"
                             : "live",
               (unsigned long long)b->forwarded, (unsigned long long)b->failures,
               (unsigned long long)b->reconnects);
    }
}

int main(int argc, char **argv)
{
    const struct timespec poll_ts = {.tv_sec = 0, .tv_nsec = 200 * 1000000L};
    struct options o;
    struct oltp_gateway *g;
    sigset_t set;
    int err;
    int rc = 1;

    parse_args(&o, argc, argv);
    cr_log_set_level(o.log_level);
    if (o.error_log != NULL) {
        err = app_open_error_log(o.error_log);
        if (err < 0) {
            fprintf(stderr, PROG ": %s: %s\n", o.error_log, strerror(-err));
            return 1;
        }
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
    /* Before stdout's line, which tells the tests the log has it. */
    log_sets(g);
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
    return rc;
}
