/*
 * main.c - cabrank-httpd, the HTTP/1.1 static-file server: loads the options
 * (httpd_options.c), applies a re-read of them at SIGHUP,
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
#include "httpd_options.h"
#include "version.h"

#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* What the signal callbacks reach. Main thread only. */
struct app {
    int argc;
    char **argv;
    struct httpd_options *opts;  /* the configuration in force */
    struct httpd_options *first; /* the one the server was created with: lives to the end */
    bool process_model;
    struct http_service *http;
    struct access_log *log;
};

/* Worker slots for the service's per-worker data: at least every index
 * cr_conn_worker() can return under the model (more only wastes memory):
 * the threads server.h's defaults give, lf's two per handle set at most. */
static unsigned worker_slots(const struct cr_server_config *sc)
{
    unsigned sets =
        sc->groups > 0 ? (unsigned)sc->groups : cr_lf_pool_default_sets(0, CR_SERVER_MAX_GROUPS);
    unsigned threads = sc->threads > 0 ? (unsigned)sc->threads : CR_LF_POOL_THREADS_PER_SET * sets;

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

/* Says "listening" once the model serves: a status page asked for at once
 * then sees every first worker (prefork), and a script that waits for the
 * line finds the server ready, not just bound. */
static void on_started(struct cr_server *s, void *arg)
{
    const struct app *app = arg;
    const struct httpd_options *o = app->opts;
    struct cr_server_stats ss;
    char promotion[96] = "";
    char sets[64] = "";

    app_say_listening(s);
    (void)cr_server_stats(s, &ss, NULL, 0);
    if (ss.groups > 0)
        snprintf(sets, sizeof(sets), ", %u handle set%s, %u threads", ss.groups,
                 ss.groups == 1 ? "" : "s", ss.workers);
    if (ss.promotion != NULL && o->promotion_delay_us != 0)
        snprintf(promotion, sizeof(promotion), ", promotion %s deferred %llu us", ss.promotion,
                 (unsigned long long)o->promotion_delay_us);
    else if (ss.promotion != NULL)
        snprintf(promotion, sizeof(promotion), ", promotion %s", ss.promotion);
    CR_LOG(CR_LOG_INFO, PROG " %s: root %s, model %s%s%s%s%s", httpd_version(), o->http.root,
           ss.model, sets, promotion, o->config != NULL ? ", config " : "",
           o->config != NULL ? o->config : "");
}

/* cr_server_run's SIGUSR1 callback, on the main thread. Under the process
 * models this reopens the master's access log, which workers forked later
 * inherit; running workers keep theirs until they are replaced (HUP). */
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
static int apply_to_service(struct app *app, struct httpd_options *n, bool log_changed,
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
    struct httpd_options *n = calloc(1, sizeof(*n));
    struct httpd_options *o = app->opts;
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
    err = httpd_options_load(n, app->argc, app->argv, &e);
    if (err == 0)
        err = check_root(n->http.root, &e);
    if (err < 0) {
        CR_LOG(CR_LOG_ERROR, "SIGHUP: %s; the configuration stays as it was", e.msg);
        httpd_options_free(n);
        return;
    }
    log_changed = !same(o->access_log, n->access_log) || o->log_format != n->log_format;
    if (app->process_model) {
        err = apply_to_service(app, n, log_changed, &e);
        if (err < 0) {
            CR_LOG(CR_LOG_ERROR, "SIGHUP: %s; the configuration stays as it was", e.msg);
            httpd_options_free(n);
            return;
        }
    }
    for (size_t i = 0; i < NOPTS; i++) {
        const struct opts_def *d = &httpd_opt_defs[i];
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
        httpd_options_free(o);
}

int main(int argc, char **argv)
{
    /* Static: the server's configuration points into it to the end, and
     * an early exit leaves it reachable rather than leaked. */
    static struct httpd_options first;
    struct httpd_options *o = &first;
    struct app app = {.argc = argc, .argv = argv};
    struct http_service *http = NULL;
    struct cr_server *srv = NULL;
    struct opts_err e;
    int status = EXIT_FAILURE;
    int err;

    if (httpd_options_load(o, argc, argv, &e) < 0) {
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
        o->promotion_delay_us =
            httpd_options_defers(o->server.promotion) ? DEFAULT_PROMOTION_DELAY_US : 0;
    } else if (o->promotion_delay_us != 0 && !httpd_options_defers(o->server.promotion)) {
        fprintf(stderr, PROG ": --promotion-delay needs --promotion lifo\n");
        status = EXIT_USAGE;
        goto out_http;
    }
    o->server.promotion_delay_us = (unsigned)o->promotion_delay_us;
    o->server.busy_poll_us = (unsigned)o->busy_poll_us;
    o->server.timeline_events =
        o->timeline_events != 0 ? (int)o->timeline_events : CR_SERVER_TIMELINE_OFF;
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
        httpd_options_free(app.opts);
    httpd_options_fini(app.first);
    return status;
}
