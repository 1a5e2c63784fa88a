/*
 * reactor_echo.c - a single-threaded TCP echo server on the cabrank Reactor:
 * the simplest of the concurrency models (make install puts it in place as
 * cabrank-echo, and build/cabrank-echo links to it).
 * One thread runs cr_reactor_run(); a cr_acceptor per listening address hands
 * it new connections, each with a fixed 16 KiB buffer. What a client sends
 * comes back; while a reply cannot be written the connection stops reading,
 * so a fast sender facing a slow reader is held back by TCP flow control
 * instead of growing our memory. SIGTERM or SIGINT stops the loop; every
 * connection is then closed and everything freed, and the exit status is 0.
 *
 * After binding it prints one line per listener to stdout,
 * "listening on 127.0.0.1:PORT", which tests read; all else goes to stderr.
 *
 * Build: cc -O2 examples/reactor_echo.c $(pkg-config --cflags --libs cabrank)
 * Run:   reactor_echo --listen 127.0.0.1:8080 [--listen [::1]:8080] [--backend poll]
 * Messages name the program as it was run (reactor_echo, cabrank-echo).
 */
#include <cabrank/acceptor.h>
#include <cabrank/handle_set.h>
#include <cabrank/listener.h>
#include <cabrank/log.h>
#include <cabrank/reactor.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DEFAULT_LISTEN "127.0.0.1:8080"
#define MAX_LISTENERS  16
#define CONN_BUF_SIZE  (16 * 1024)
/* Reads per event before other connections get a turn; level-triggered
 * readiness brings a busy connection straight back. */
#define READS_PER_EVENT 16
#define EXIT_USAGE      2

/* The name the program was run as, for messages. */
static const char *prog = "reactor_echo";

struct server;

struct conn {
    struct server *srv;
    struct conn *prev;
    struct conn *next;
    int fd;
    unsigned interest; /* CR_EV_READ while buf is empty, else CR_EV_WRITE */
    size_t off;        /* buf[off, len) is read but not yet echoed */
    size_t len;
    char buf[CONN_BUF_SIZE];
};

/* Everything is touched by the one thread that runs the reactor. */
struct server {
    struct cr_reactor *r;
    int nlisteners;
    int lfds[MAX_LISTENERS];
    struct cr_acceptor *acceptors[MAX_LISTENERS];
    struct conn *conns; /* every open connection, for shutdown */
    unsigned long served;
};

struct options {
    const char *listen[MAX_LISTENERS];
    int nlisten;
    const char *backend;
};

static void conn_close(struct conn *c)
{
    struct server *srv = c->srv;
    int err = cr_reactor_remove(srv->r, c->fd);

    if (err < 0)
        CR_LOG(CR_LOG_ERROR, "removing fd %d: %s", c->fd, strerror(-err));
    close(c->fd);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    free(c);
}

/* Waits for `interest` next; false if the reactor refused (then close). */
static bool want(struct conn *c, unsigned interest)
{
    int err;

    if (c->interest == interest)
        return true;
    err = cr_reactor_modify(c->srv->r, c->fd, interest);
    if (err < 0) {
        CR_LOG(CR_LOG_ERROR, "modifying fd %d: %s", c->fd, strerror(-err));
        return false;
    }
    c->interest = interest;
    return true;
}

/* Echoes: flush what is pending, then read more, until the socket would
 * block or the budget is spent. Errors and hang-ups show up as failing
 * send/recv, so `events` needs no decoding. */
static void on_conn(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct conn *c = arg;
    ssize_t n;

    CR_UNUSED(r);
    CR_UNUSED(events);
    for (int i = 0; i < READS_PER_EVENT; i++) {
        if (c->off < c->len) {
            n = send(fd, c->buf + c->off, c->len - c->off, MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    /* Stop reading until the peer takes what we owe it. */
                    if (!want(c, CR_EV_WRITE))
                        goto out_close;
                    return;
                }
                goto out_close; /* EPIPE, ECONNRESET: the peer is gone */
            }
            c->off += (size_t)n;
            if (c->off < c->len)
                continue;
            c->off = 0;
            c->len = 0;
        }
        n = recv(fd, c->buf, sizeof(c->buf), 0);
        if (n > 0) {
            c->len = (size_t)n;
            continue;
        }
        if (n == 0)
            goto out_close; /* EOF, and everything read was echoed */
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (!want(c, CR_EV_READ))
                goto out_close;
            return;
        }
        goto out_close;
    }
    if (want(c, c->off < c->len ? CR_EV_WRITE : CR_EV_READ))
        return;
out_close:
    conn_close(c);
}

static void on_accept(struct cr_acceptor *a, int fd, void *arg)
{
    struct server *srv = arg;
    struct conn *c;
    int err;

    CR_UNUSED(a);
    c = malloc(sizeof(*c));
    if (c == NULL) {
        CR_LOG(CR_LOG_WARN, "out of memory for a connection; closing it");
        close(fd);
        return;
    }
    c->srv = srv;
    c->fd = fd;
    c->interest = CR_EV_READ;
    c->off = 0;
    c->len = 0;
    err = cr_reactor_add(srv->r, fd, CR_EV_READ, 0, on_conn, c);
    if (err < 0) {
        CR_LOG(CR_LOG_ERROR, "registering fd %d: %s", fd, strerror(-err));
        close(fd);
        free(c);
        return;
    }
    c->prev = NULL;
    c->next = srv->conns;
    if (srv->conns != NULL)
        srv->conns->prev = c;
    srv->conns = c;
    srv->served++;
}

static void on_signal(struct cr_reactor *r, int signo, void *arg)
{
    CR_UNUSED(arg);
    CR_LOG(CR_LOG_INFO, "%s: stopping", strsignal(signo));
    cr_reactor_stop(r);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [--listen ADDR]... [--backend NAME] [--help]\n"
            "  --listen ADDR    address to serve, repeatable (default " DEFAULT_LISTEN "):\n"
            "                   127.0.0.1:8080, [::1]:8080, [::]:8080, *:8080, :8080\n"
            "  --backend NAME   handle set: epoll (default), poll or select\n"
            "  --help           this text\n"
            "Echoes what each client sends. SIGTERM or SIGINT stops it.\n",
            prog);
}

static bool is_backend(const char *name)
{
    for (const char *const *b = cr_handle_set_backends(); *b != NULL; b++) {
        if (strcmp(*b, name) == 0)
            return true;
    }
    return false;
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
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s: %s needs a value (see --help)\n", prog, name);
        exit(EXIT_USAGE);
    }
    return argv[++*i];
}

static void parse_options(int argc, char **argv, struct options *o)
{
    for (int i = 1; i < argc; i++) {
        const char *v;
        struct sockaddr_storage ss;
        socklen_t len;

        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            exit(EXIT_SUCCESS);
        } else if ((v = option_value(argc, argv, &i, "--listen")) != NULL) {
            if (cr_listener_parse(v, &ss, &len) < 0) {
                fprintf(stderr, "%s: bad address '%s' (numeric, with a port)\n", prog, v);
                exit(EXIT_USAGE);
            }
            if (o->nlisten == MAX_LISTENERS) {
                fprintf(stderr, "%s: at most %d --listen\n", prog, MAX_LISTENERS);
                exit(EXIT_USAGE);
            }
            o->listen[o->nlisten++] = v;
        } else if ((v = option_value(argc, argv, &i, "--backend")) != NULL) {
            if (!is_backend(v)) {
                fprintf(stderr, "%s: unknown backend '%s' (epoll, poll or select)\n", prog, v);
                exit(EXIT_USAGE);
            }
            o->backend = v;
        } else {
            fprintf(stderr, "%s: unknown option '%s' (see --help)\n", prog, argv[i]);
            exit(EXIT_USAGE);
        }
    }
    if (o->nlisten == 0)
        o->listen[o->nlisten++] = DEFAULT_LISTEN;
}

/* Opens one listener and its acceptor, and says where it listens. */
static int add_listener(struct server *srv, const char *address)
{
    struct cr_listener_config lcfg = {.address = address};
    struct cr_acceptor_config acfg = {0};
    char bound[64];
    int err;
    int fd;

    err = cr_listener_open(&fd, &lcfg);
    if (err < 0) {
        fprintf(stderr, "%s: listening on %s: %s\n", prog, address, strerror(-err));
        return err;
    }
    err = cr_listener_address(fd, bound, sizeof(bound));
    if (err < 0)
        goto out_close_fd;
    acfg.listen_fd = fd;
    err = cr_acceptor_create(&srv->acceptors[srv->nlisteners], srv->r, &acfg, on_accept, srv);
    if (err < 0)
        goto out_close_fd;
    srv->lfds[srv->nlisteners++] = fd;
    printf("listening on %s\n", bound);
    return 0;

out_close_fd:
    fprintf(stderr, "%s: %s: %s\n", prog, address, strerror(-err));
    close(fd);
    return err;
}

/* Closes every connection and listener, frees everything. */
static void server_fini(struct server *srv)
{
    while (srv->conns != NULL)
        conn_close(srv->conns);
    for (int i = 0; i < srv->nlisteners; i++) {
        cr_acceptor_destroy(srv->acceptors[i]);
        close(srv->lfds[i]);
    }
    cr_reactor_destroy(srv->r);
}

int main(int argc, char **argv)
{
    static const int stop_signals[] = {SIGTERM, SIGINT};
    struct options o = {0};
    struct server srv = {0};
    struct cr_reactor_config rcfg = {0};
    int err;

    if (argc > 0 && argv[0][0] != '\0')
        prog = strrchr(argv[0], '/') != NULL ? strrchr(argv[0], '/') + 1 : argv[0];
    parse_options(argc, argv, &o);
    /* Before anything else, so no thread, now or later, takes them the
     * default way: they arrive through the reactor's signalfd. */
    err = cr_reactor_block_signals();
    if (err < 0) {
        fprintf(stderr, "%s: blocking signals: %s\n", prog, strerror(-err));
        return EXIT_FAILURE;
    }
    rcfg.backend = o.backend;
    err = cr_reactor_create(&srv.r, &rcfg);
    if (err < 0) {
        fprintf(stderr, "%s: reactor (%s): %s\n", prog, o.backend ? o.backend : "default",
                strerror(-err));
        return EXIT_FAILURE;
    }
    for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++) {
        err = cr_reactor_signal_add(srv.r, stop_signals[i], on_signal, NULL);
        if (err < 0) {
            fprintf(stderr, "%s: %s: %s\n", prog, strsignal(stop_signals[i]), strerror(-err));
            goto out_fini;
        }
    }
    for (int i = 0; i < o.nlisten; i++) {
        err = add_listener(&srv, o.listen[i]);
        if (err < 0)
            goto out_fini;
    }
    fflush(stdout);
    CR_LOG(CR_LOG_INFO, "%s: %d listener(s), backend %s", prog, srv.nlisteners,
           cr_reactor_backend(srv.r));
    err = cr_reactor_run(srv.r);
    if (err < 0)
        fprintf(stderr, "%s: reactor: %s\n", prog, strerror(-err));
    CR_LOG(CR_LOG_INFO, "%s: served %lu connection(s)", prog, srv.served);

out_fini:
    server_fini(&srv);
    return err < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
