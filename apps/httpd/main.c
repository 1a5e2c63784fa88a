/*
 * main.c - cabrank-httpd, the HTTP/1.1 static-file server: parses the flags,
 * opens the logs, creates the HTTP service (http_service.h) and runs it under
 * the chosen concurrency model with cr_server_run(), which turns TERM/INT
 * into a graceful stop, QUIT into an immediate one, and USR1 into a reopen of
 * the access and error logs. Runs on the main thread; the workers are the
 * model's.
 *
 * After binding it prints one line per listener to stdout,
 * "listening on 127.0.0.1:PORT" (tests bind port 0 and read it), and logs
 * the same. A bad flag or an unusable root is one line on stderr and exit
 * status 2.
 */
#include <cabrank/handle_set.h>
#include <cabrank/lf_pool.h>
#include <cabrank/listener.h>
#include <cabrank/log.h>
#include <cabrank/server.h>

#include "access_log.h"
#include "http_service.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROG           "cabrank-httpd"
#define EXIT_USAGE     2
#define DEFAULT_LISTEN "127.0.0.1:8080"
#define DEFAULT_ROOT   "./www"
#define DEFAULT_MIME   "/etc/mime.types"

struct options {
    struct cr_server_config server;
    struct http_service_config http;
    unsigned nlisten;
    const char *access_log;
    enum access_log_format log_format;
    const char *error_log;
    const char *pid_file;
};

/* What the signal callbacks reach. Main thread only. */
struct app {
    struct access_log *log;
    const char *error_log;
};

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: " PROG " [options]\n"
        "Serves the files beneath --root over HTTP/1.1 under a chosen concurrency model.\n"
        "Every option takes its value as --flag VALUE or --flag=VALUE; times are seconds\n"
        "(fractions allowed).\n"
        "\n"
        "  --listen ADDR                  address to serve, repeatable (default " DEFAULT_LISTEN
        "):\n"
        "                                 127.0.0.1:8080, [::1]:8080, [::]:80, *:80, :80\n"
        "  --root DIR                     document root (default " DEFAULT_ROOT ")\n"
        "  --model NAME                   reactor, lf, hshr or tpc (default lf)\n"
        "  --threads N                    worker threads (default: CPUs; tpc: the cap, 1024)\n"
        "  --promotion ORDER              lf: native, lifo, fifo, priority, lifo-lockfree\n"
        "                                 (default lifo)\n"
        "  --groups N                     lf: handle sets, each its own L/F group (default 1)\n"
        "  --multiple-leaders             lf with --groups > 1: one follower set, a thread leads\n"
        "                                 any set without a leader\n"
        "  --backend NAME                 handle set: epoll, poll or select (default epoll)\n"
        "  --max-connections N            stop accepting beyond N (default 10000)\n"
        "  --header-timeout SECS          whole request head, from its first byte (default 20)\n"
        "  --body-timeout SECS            between reads of a request body (default 60)\n"
        "  --keepalive-timeout SECS       idle between requests (default 5)\n"
        "  --send-timeout SECS            no send progress (default 60)\n"
        "  --max-requests-per-connection N  then Connection: close (default 1000)\n"
        "  --max-request-line BYTES       else 414 (default 8192)\n"
        "  --max-header-line BYTES        one header field line, else 431 (default 8192)\n"
        "  --max-headers-size BYTES       all header field lines, else 431 (default 32768)\n"
        "  --max-header-fields N          else 431 (default 100, at most 256)\n"
        "  --access-log FILE              Common/Combined Log Format, buffered (default off)\n"
        "  --log-format common|combined   access log format (default combined)\n"
        "  --error-log FILE               error log (default stderr)\n"
        "  --log-level LEVEL              error, warn, info or debug (default info)\n"
        "  --pid-file FILE                written after binding, removed at exit (default none)\n"
        "  --status-path PATH             status page, \"off\" for none "
        "(default " HTTP_STATUS_PATH_DEFAULT ")\n"
        "  --status-allow-remote          status page for every client (default loopback only)\n"
        "  --allow-outside-symlinks       follow symlinks leading out of the root (default no)\n"
        "  --mime-types FILE              extra MIME types (default " DEFAULT_MIME " if present)\n"
        "  --help                         this text\n"
        "  --version                      the version\n"
        "\n"
        "Signals: TERM/INT stop gracefully, QUIT at once, USR1 reopens the logs.\n");
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

/* The value of option `name` at argv[*i], as "--name VALUE" or "--name=VALUE";
 * NULL if argv[*i] is another option. Exits on a missing value. */
static const char *option_value(int argc, char **argv, int *i, const char *name)
{
    size_t len = strlen(name);

    if (strncmp(argv[*i], name, len) != 0)
        return NULL;
    if (argv[*i][len] == '=')
        return argv[*i] + len + 1;
    if (argv[*i][len] != '\0')
        return NULL;
    if (*i + 1 >= argc)
        die_usage("%s needs a value", name);
    return argv[++*i];
}

/* A flag without a value; "--name=yes|no|true|false|1|0" is accepted too. */
static bool option_flag(const char *arg, const char *name, bool *out)
{
    size_t len = strlen(name);
    const char *v;

    if (strncmp(arg, name, len) != 0 || (arg[len] != '\0' && arg[len] != '='))
        return false;
    if (arg[len] == '\0') {
        *out = true;
        return true;
    }
    v = arg + len + 1;
    if (strcmp(v, "yes") == 0 || strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
        *out = true;
    else if (strcmp(v, "no") == 0 || strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
        *out = false;
    else
        die_usage("%s takes no value, or yes/no (got '%s')", name, v);
    return true;
}

static unsigned long long parse_uint(const char *name, const char *v, unsigned long long min,
                                     unsigned long long max)
{
    char *end;
    unsigned long long n;

    errno = 0;
    if (v[0] < '0' || v[0] > '9')
        die_usage("%s wants a number, not '%s'", name, v);
    n = strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0' || n < min || n > max)
        die_usage("%s: '%s' is not a number in range", name, v);
    return n;
}

/* Seconds, fractions allowed, into milliseconds (at least 1). */
static uint64_t parse_seconds(const char *name, const char *v)
{
    char *end;
    double s;

    errno = 0;
    if (!((v[0] >= '0' && v[0] <= '9') || v[0] == '.'))
        die_usage("%s wants seconds, not '%s'", name, v);
    s = strtod(v, &end);
    if (errno != 0 || *end != '\0' || !(s > 0) || s > 86400.0 * 365)
        die_usage("%s: '%s' is not a positive number of seconds", name, v);
    return s * 1000 < 1 ? 1 : (uint64_t)(s * 1000 + 0.5);
}

static bool in_list(const char *const *list, const char *name)
{
    for (; *list != NULL; list++) {
        if (strcmp(*list, name) == 0)
            return true;
    }
    return false;
}

static void parse_options(int argc, char **argv, struct options *o)
{
    struct cr_server_config *sc = &o->server;
    struct http_service_config *hc = &o->http;

    hc->root = DEFAULT_ROOT;
    hc->mime_types = access(DEFAULT_MIME, R_OK) == 0 ? DEFAULT_MIME : NULL;
    o->log_format = ACCESS_LOG_COMBINED;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v;
        bool flag;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(EXIT_SUCCESS);
        } else if (strcmp(a, "--version") == 0) {
            printf(PROG " " HTTPD_VERSION "\n");
            exit(EXIT_SUCCESS);
        } else if ((v = option_value(argc, argv, &i, "--listen")) != NULL) {
            struct sockaddr_storage ss;
            socklen_t len;

            if (cr_listener_parse(v, &ss, &len) < 0)
                die_usage("bad address '%s': numeric, with a port", v);
            if (o->nlisten == CR_SERVER_MAX_LISTEN)
                die_usage("at most %d --listen", CR_SERVER_MAX_LISTEN);
            sc->listen[o->nlisten++] = v;
        } else if ((v = option_value(argc, argv, &i, "--root")) != NULL) {
            hc->root = v;
        } else if ((v = option_value(argc, argv, &i, "--model")) != NULL) {
            if (!in_list(cr_server_models(), v))
                die_usage("unknown model '%s' (reactor, lf, hshr, tpc)", v);
            sc->model = v;
        } else if ((v = option_value(argc, argv, &i, "--threads")) != NULL) {
            sc->threads = (int)parse_uint("--threads", v, 1, 4096);
        } else if ((v = option_value(argc, argv, &i, "--promotion")) != NULL) {
            if (!in_list(cr_lf_pool_promotions(), v))
                die_usage("unknown promotion order '%s'", v);
            sc->promotion = v;
        } else if ((v = option_value(argc, argv, &i, "--groups")) != NULL) {
            sc->groups = (int)parse_uint("--groups", v, 1, 256);
        } else if (option_flag(a, "--multiple-leaders", &flag)) {
            sc->multiple_leaders = flag;
        } else if ((v = option_value(argc, argv, &i, "--backend")) != NULL) {
            if (!in_list(cr_handle_set_backends(), v))
                die_usage("unknown backend '%s' (epoll, poll, select)", v);
            sc->backend = v;
        } else if ((v = option_value(argc, argv, &i, "--max-connections")) != NULL) {
            sc->max_connections = (int)parse_uint("--max-connections", v, 1, 10000000);
        } else if ((v = option_value(argc, argv, &i, "--header-timeout")) != NULL) {
            hc->header_timeout_ms = parse_seconds("--header-timeout", v);
        } else if ((v = option_value(argc, argv, &i, "--body-timeout")) != NULL) {
            hc->body_timeout_ms = parse_seconds("--body-timeout", v);
        } else if ((v = option_value(argc, argv, &i, "--keepalive-timeout")) != NULL) {
            hc->keepalive_timeout_ms = parse_seconds("--keepalive-timeout", v);
        } else if ((v = option_value(argc, argv, &i, "--send-timeout")) != NULL) {
            hc->send_timeout_ms = parse_seconds("--send-timeout", v);
        } else if ((v = option_value(argc, argv, &i, "--max-requests-per-connection")) != NULL) {
            hc->max_requests =
                (unsigned)parse_uint("--max-requests-per-connection", v, 1, UINT_MAX);
        } else if ((v = option_value(argc, argv, &i, "--max-request-line")) != NULL) {
            hc->limits.request_line_max = parse_uint("--max-request-line", v, 16, 1 << 20);
        } else if ((v = option_value(argc, argv, &i, "--max-header-line")) != NULL) {
            hc->limits.header_line_max = parse_uint("--max-header-line", v, 16, 1 << 20);
        } else if ((v = option_value(argc, argv, &i, "--max-headers-size")) != NULL) {
            hc->limits.headers_max = parse_uint("--max-headers-size", v, 16, 1 << 20);
        } else if ((v = option_value(argc, argv, &i, "--max-header-fields")) != NULL) {
            hc->limits.fields_max = parse_uint("--max-header-fields", v, 1, 256);
        } else if ((v = option_value(argc, argv, &i, "--access-log")) != NULL) {
            o->access_log = v;
        } else if ((v = option_value(argc, argv, &i, "--log-format")) != NULL) {
            if (strcmp(v, "common") == 0)
                o->log_format = ACCESS_LOG_COMMON;
            else if (strcmp(v, "combined") == 0)
                o->log_format = ACCESS_LOG_COMBINED;
            else
                die_usage("unknown log format '%s' (common, combined)", v);
        } else if ((v = option_value(argc, argv, &i, "--error-log")) != NULL) {
            o->error_log = v;
        } else if ((v = option_value(argc, argv, &i, "--log-level")) != NULL) {
            enum cr_log_level level;

            if (cr_log_parse_level(v, &level) < 0)
                die_usage("unknown log level '%s' (error, warn, info, debug)", v);
            cr_log_set_level(level);
        } else if ((v = option_value(argc, argv, &i, "--pid-file")) != NULL) {
            o->pid_file = v;
        } else if ((v = option_value(argc, argv, &i, "--status-path")) != NULL) {
            if (strcmp(v, "off") == 0)
                hc->status_path = "";
            else if (v[0] != '/')
                die_usage("--status-path '%s' must start with '/' (or be off)", v);
            else
                hc->status_path = v;
        } else if (option_flag(a, "--status-allow-remote", &flag)) {
            hc->status_allow_remote = flag;
        } else if (option_flag(a, "--allow-outside-symlinks", &flag)) {
            hc->allow_outside_symlinks = flag;
        } else if ((v = option_value(argc, argv, &i, "--mime-types")) != NULL) {
            hc->mime_types = v;
        } else {
            die_usage("unknown option '%s'", a);
        }
    }
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

/* Sends stderr (and so the error log records) to path. -errno. */
static int open_error_log(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);

    if (fd < 0)
        return -errno;
    /* dup2 swaps the file behind descriptor 2 at once: a thread writing a
     * record meanwhile writes it whole to the old file or the new one. */
    if (dup2(fd, STDERR_FILENO) < 0) {
        int err = -errno;

        close(fd);
        return err;
    }
    close(fd);
    return 0;
}

/* cr_server_run's SIGUSR1 callback, on the main thread. */
static void on_usr1(struct cr_server *s, void *arg)
{
    struct app *app = arg;
    int err;

    CR_UNUSED(s);
    if (app->error_log != NULL) {
        err = open_error_log(app->error_log);
        if (err < 0)
            CR_LOG(CR_LOG_ERROR, "reopening %s: %s", app->error_log, strerror(-err));
    }
    if (app->log != NULL) {
        err = access_log_reopen(app->log);
        if (err < 0)
            CR_LOG(CR_LOG_ERROR, "reopening the access log: %s", strerror(-err));
    }
    CR_LOG(CR_LOG_INFO, "SIGUSR1: logs reopened");
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

int main(int argc, char **argv)
{
    struct options o = {0};
    struct app app = {0};
    struct http_service *http = NULL;
    struct cr_server *srv = NULL;
    struct stat st;
    int status = EXIT_FAILURE;
    int err;

    parse_options(argc, argv, &o);
    if (stat(o.http.root, &st) < 0) {
        fprintf(stderr, PROG ": unusable root '%s': %s\n", o.http.root, strerror(errno));
        return EXIT_USAGE;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, PROG ": unusable root '%s': not a directory\n", o.http.root);
        return EXIT_USAGE;
    }
    if (o.error_log != NULL) {
        err = open_error_log(o.error_log);
        if (err < 0) {
            fprintf(stderr, PROG ": error log '%s': %s\n", o.error_log, strerror(-err));
            return EXIT_USAGE;
        }
        app.error_log = o.error_log;
    }
    o.http.workers = worker_slots(&o.server);
    if (o.access_log != NULL) {
        struct access_log_config lc = {
            .path = o.access_log,
            .format = o.log_format,
            .buffers = o.http.workers,
        };

        err = access_log_open(&app.log, &lc);
        if (err < 0) {
            fprintf(stderr, PROG ": access log '%s': %s\n", o.access_log, strerror(-err));
            return EXIT_USAGE;
        }
        o.http.log = app.log;
    }
    err = http_service_create(&http, &o.http);
    if (err < 0) {
        fprintf(stderr, PROG ": unusable root '%s': %s\n", o.http.root, strerror(-err));
        status = EXIT_USAGE;
        goto out_log;
    }
    /* The idle timeout of a new connection is the head timeout: the service
     * sets every later wait itself. */
    o.server.idle_timeout_ms =
        o.http.header_timeout_ms != 0 ? o.http.header_timeout_ms : HTTP_HEADER_TIMEOUT_MS_DEFAULT;
    o.server.send_timeout_ms =
        o.http.send_timeout_ms != 0 ? o.http.send_timeout_ms : HTTP_SEND_TIMEOUT_MS_DEFAULT;
    o.server.on_usr1 = on_usr1;
    o.server.signal_arg = &app;
    err = cr_server_create(&srv, &o.server, http_service_get(http));
    if (err < 0) {
        fprintf(stderr, PROG ": %s\n",
                err == -EINVAL ? "invalid server configuration (model, promotion, address)"
                               : strerror(-err));
        goto out_http;
    }
    /* Bound; the pid file first, so it exists once we say we listen. */
    if (o.pid_file != NULL) {
        err = write_pid_file(o.pid_file);
        if (err < 0) {
            fprintf(stderr, PROG ": pid file '%s': %s\n", o.pid_file, strerror(-err));
            goto out_server;
        }
    }
    for (unsigned i = 0; i < cr_server_listeners(srv); i++) {
        char addr[80];

        if (cr_server_address(srv, i, addr, sizeof(addr)) == 0) {
            printf("listening on %s\n", addr);
            CR_LOG(CR_LOG_INFO, "listening on %s", addr);
        }
    }
    fflush(stdout);
    {
        struct cr_server_stats ss;

        (void)cr_server_stats(srv, &ss, NULL, 0);
        CR_LOG(CR_LOG_INFO, PROG " " HTTPD_VERSION ": root %s, model %s%s%s", o.http.root, ss.model,
               ss.promotion != NULL ? ", promotion " : "",
               ss.promotion != NULL ? ss.promotion : "");
    }
    err = cr_server_run(srv);
    if (err < 0)
        CR_LOG(CR_LOG_ERROR, "server: %s", strerror(-err));
    else
        status = EXIT_SUCCESS;
    CR_LOG(CR_LOG_INFO, "stopped after %llu requests",
           (unsigned long long)http_service_requests(http));
    if (o.pid_file != NULL)
        unlink(o.pid_file);
out_server:
    cr_server_destroy(srv);
out_http:
    http_service_destroy(http);
out_log:
    access_log_close(app.log);
    return status;
}
