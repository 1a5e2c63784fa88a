/*
 * main_ledger.c - cabrank-ledger, the back-end transaction server of the
 * OLTP example: parses the flags, opens the ledger service (ledger.h: the database,
 * the session table) and runs it under the chosen concurrency model with
 * cr_server_run(), which turns TERM/INT into a graceful stop and QUIT into
 * an immediate one. Runs on the main thread; the workers are the model's.
 *
 * Once the model serves it prints "listening on 127.0.0.1:PORT" to stdout
 * for each listener (tests bind port 0 and read it), and logs the same. At
 * exit it logs one line of totals. A bad flag is one line on stderr and
 * exit status 2; so is a database that cannot be opened.
 */
#include <cabrank/cpu.h>
#include <cabrank/listener.h>
#include <cabrank/log.h>
#include <cabrank/server.h>

#include "../common/app_server.h"
#include "../common/options.h"
#include "ledger.h"

#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG           "cabrank-ledger"
#define EXIT_USAGE     OPTS_EXIT_USAGE
#define DEFAULT_LISTEN "127.0.0.1:7070"
#define DEFAULT_DB     "./ledger.db"
/* Writes block their thread until durable: more threads than CPUs are what
 * lets group commit gather them into one fsync. At least this many, and
 * THREADS_PER_CPU for each CPU it may use (one handle set each). */
#define DEFAULT_THREADS 16
#define THREADS_PER_CPU 4

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

static opts_special_fn set_special;

/* One option: its flag without "--", where its value goes (a field of
 * struct options), and its --help line. */
static const struct opts_def opt_defs[] = {
    {OPTS_DEF_SPECIAL("listen", "ADDR",
                      "address to serve, repeatable (default " DEFAULT_LISTEN ")")},
    {OPTS_DEF_STRING("db", struct options, ledger.db_url, "URL",
                     "SQLite file, or postgresql://... (default " DEFAULT_DB ")")},
    {OPTS_DEF_CHOICE("model", struct options, server.model, cr_server_models, "NAME",
                     "(default lf)"),
     .help_lists = true},
    {OPTS_DEF_NUM("threads", struct options, server.threads, 1, 4096, "N",
                  "worker threads (default 16, or 4 per CPU it may\n"
                  "use where more; tpc: the cap on connections, 1024;\n"
                  "prefork: per process, 1)")},
    {OPTS_DEF_NUM("groups", struct options, server.groups, 1, CR_SERVER_MAX_GROUPS, "auto|N",
                  "lf: handle sets, each with its own listener and\n"
                  "L/F group of threads; auto: one per CPU it may\n"
                  "use, at most --threads/2 (default auto)"),
     .zero_word = "auto"},
    {OPTS_DEF_NUM("workers", struct options, server.workers, 1, 1024, "N",
                  "prefork: worker processes (default: CPUs)")},
    {OPTS_DEF_FLAG("no-group-commit", struct options, no_group_commit,
                   "one fsync per transaction (default: group commit)")},
    {OPTS_DEF_SECONDS("session-timeout", struct options, ledger.session_timeout_ms, 0,
                      "idle sessions expire after (default 60)")},
    {OPTS_DEF_NUM("max-sessions", struct options, ledger.max_sessions, 1, 1u << 24, "N",
                  "open sessions in all: BEGIN refused beyond\n"
                  "(default 16384)")},
    {OPTS_DEF_NUM("max-sessions-per-conn", struct options, ledger.max_sessions_per_conn, 1,
                  1u << 24, "N",
                  "open sessions begun on one connection: BEGIN\n"
                  "refused beyond (default 1024)")},
    {OPTS_DEF_SECONDS("idle-timeout", struct options, ledger.idle_timeout_ms, 0,
                      "close connections idle this long (default 300)")},
    {OPTS_DEF_NUM("max-connections", struct options, server.max_connections, 1, 10000000, "N",
                  "stop accepting beyond N (default 10000)")},
    {OPTS_DEF_LOG_LEVEL},
    {OPTS_DEF_ERROR_LOG(struct options, error_log)},
};

static const struct opts_table opt_table = {
    OPTS_TABLE(opt_defs, set_special, 27),
    .prog = PROG,
    .usage = "usage: " PROG " [options]\n"
             "The ledger's transaction server: accounts, transfers with idempotency\n"
             "keys and multi-request sessions over the OLTP protocol, each write acknowledged\n"
             "only once durable. Options take --flag VALUE or --flag=VALUE; times are seconds\n"
             "(fractions allowed).\n"
             "\n",
    .footer = "\n"
              "Signals: TERM/INT stop gracefully (requests in flight finish), QUIT at once.\n"
              "Under prefork and forking each worker process opens its own database\n"
              "connections, and sessions live in the process that began them (the session\n"
              "limits count per process). A BEGIN over a limit answers TOO_MANY_SESSIONS.\n",
};

/* The options that are more than a field: repeatable or mapped to an enum. */
static int set_special(void *obj, const struct opts_def *d, const char *v, void *arg,
                       struct opts_err *e)
{
    struct options *o = obj;

    CR_UNUSED(arg);
    if (strcmp(d->name, "listen") == 0) {
        struct sockaddr_storage ss;
        socklen_t len;

        if (cr_listener_parse(v, &ss, &len) < 0)
            return opts_fail(e, "bad address '%s': numeric, with a port", v);
        if (o->nlisten == CR_SERVER_MAX_LISTEN)
            return opts_fail(e, "at most %d --listen", CR_SERVER_MAX_LISTEN);
        o->server.listen[o->nlisten++] = v;
    } else if (strcmp(d->name, "log-level") == 0) {
        if (opts_set_log_level(v, &o->log_level, e) < 0)
            return -EINVAL;
        o->has_log_level = true;
    }
    return 0;
}

/* The options from argv; exits for --help and for a bad flag. */
static void parse_args(struct options *o, int argc, char **argv)
{
    memset(o, 0, sizeof(*o));
    o->ledger.db_url = DEFAULT_DB;
    opts_parse_or_exit(&opt_table, o, argc, argv, NULL);
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

    app_say_listening(s);
    (void)cr_server_stats(s, &ss, NULL, 0);
    CR_LOG(CR_LOG_INFO, PROG ": db %s, model %s, %u workers, group commit %s", o->ledger.db_url,
           ss.model, ss.workers, o->ledger.group_commit ? "on" : "off");
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
        err = app_open_error_log(o->error_log);
        if (err < 0) {
            fprintf(stderr, PROG ": error log '%s': %s\n", o->error_log, strerror(-err));
            return EXIT_USAGE;
        }
    }
    o->ledger.process_model = is_process_model(o->server.model);
    /* tpc reads threads as its cap on connections: its default stays. */
    if (o->server.threads == 0 && !o->ledger.process_model &&
        (o->server.model == NULL || strcmp(o->server.model, "tpc") != 0)) {
        int per_cpu = THREADS_PER_CPU * cr_cpu_usable();

        o->server.threads = per_cpu > DEFAULT_THREADS ? per_cpu : DEFAULT_THREADS;
    }
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
               "commit), %llu sessions (%llu committed, %llu aborted, %llu expired, %llu "
               "refused)",
               (unsigned long long)st.requests, (unsigned long long)st.units,
               (unsigned long long)st.commits, (unsigned long long)st.max_batch,
               (unsigned long long)st.sessions, (unsigned long long)st.session_commits,
               (unsigned long long)st.session_aborts, (unsigned long long)st.expired,
               (unsigned long long)st.begins_refused);
    cr_server_destroy(srv);
out_ledger:
    ledger_destroy(l);
    return status;
}
