/*
 * lf_echo.c - a TCP echo server on a Leader/Followers thread pool
 * (cr_lf_pool) over one raw cr_reactor, without cr_server: the pattern by
 * hand. The pool's threads take turns as leader; the leader takes one event
 * (a one-shot handle, deactivated as it is taken), promotes a follower, then
 * runs the handler itself. A connection's handler echoes until its socket
 * would block, then reactivates the handle, so one connection is served by
 * one thread at a time and needs no lock. The main thread waits for
 * SIGTERM/SIGINT, stops the pool, joins it and frees every connection.
 *
 * It prints "listening on ADDR:PORT" to stdout (tests read it); exit 0.
 *
 * Build: cc -O2 examples/lf_echo.c -o lf_echo $(pkg-config --cflags --libs cabrank)
 * Run:   lf_echo [--listen 127.0.0.1:8080] [--threads 4] [--promotion lifo]
 */
#include <cabrank/acceptor.h>
#include <cabrank/lf_pool.h>
#include <cabrank/listener.h>
#include <cabrank/reactor.h>

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PROG "lf_echo"

struct conn {
    struct conn *next; /* Protected by conns_lock. */
    struct conn *prev;
    int fd;
};

/* Every open connection, for shutdown. */
static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static struct conn *conns;

static void conn_close(struct cr_reactor *r, struct conn *c)
{
    if (cr_reactor_remove(r, c->fd) < 0)
        fprintf(stderr, PROG ": fd %d was not registered\n", c->fd);
    close(c->fd);
    pthread_mutex_lock(&conns_lock);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&conns_lock);
    free(c);
}

/* Sends all of buf; a slow reader holds this thread (L/F lets a handler
 * block: the other threads lead meanwhile). 0 or -1. */
static int send_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};

            if (poll(&p, 1, -1) < 0 && errno != EINTR)
                return -1;
            continue;
        }
        if (n < 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* A one-shot handle: this thread alone has the connection until it
 * reactivates the handle or closes it. */
static void on_conn(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct conn *c = arg;
    char buf[16384];

    CR_UNUSED(events);
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);

        if (n > 0) {
            if (send_all(fd, buf, (size_t)n) < 0)
                break;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (cr_reactor_reactivate(r, fd) == 0)
                return;
        }
        break; /* EOF, an error, or the reactor refused */
    }
    conn_close(r, c);
}

static void on_accept(struct cr_acceptor *a, int fd, void *arg)
{
    struct cr_reactor *r = arg;
    struct conn *c = calloc(1, sizeof(*c));

    CR_UNUSED(a);
    if (c == NULL) {
        close(fd);
        return;
    }
    c->fd = fd;
    pthread_mutex_lock(&conns_lock);
    c->next = conns;
    if (conns != NULL)
        conns->prev = c;
    conns = c;
    pthread_mutex_unlock(&conns_lock);
    /* Registered last: from here another thread may run on_conn. */
    if (cr_reactor_add(r, fd, CR_EV_READ, CR_REACTOR_ONESHOT, on_conn, c) < 0) {
        fprintf(stderr, PROG ": registering fd %d failed\n", fd);
        pthread_mutex_lock(&conns_lock);
        conns = c->next;
        if (conns != NULL)
            conns->prev = NULL;
        pthread_mutex_unlock(&conns_lock);
        close(fd);
        free(c);
    }
}

int main(int argc, char **argv)
{
    struct cr_listener_config lcfg = {.address = "127.0.0.1:8080"};
    struct cr_lf_pool_config pcfg = {.threads = 4, .nreactors = 1};
    struct cr_acceptor_config acfg = {0};
    struct cr_acceptor *acc = NULL;
    struct cr_lf_pool *pool = NULL;
    struct cr_reactor *r = NULL;
    sigset_t stop;
    char addr[64];
    int signo;
    int lfd = -1;
    int err;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--listen") == 0) {
            lcfg.address = argv[i + 1];
        } else if (strcmp(argv[i], "--threads") == 0) {
            pcfg.threads = (unsigned)atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--promotion") == 0) {
            pcfg.promotion = argv[i + 1];
        } else {
            fprintf(stderr, "usage: " PROG " [--listen ADDR] [--threads N] [--promotion P]\n");
            return 2;
        }
    }
    /* Blocked before any thread starts, so only sigwait below takes them. */
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);

    err = cr_reactor_create(&r, NULL);
    if (err < 0)
        goto out;
    err = cr_listener_open(&lfd, &lcfg);
    if (err < 0)
        goto out_reactor;
    acfg.listen_fd = lfd;
    err = cr_acceptor_create(&acc, r, &acfg, on_accept, r);
    if (err < 0)
        goto out_listener;
    pcfg.reactors = &r;
    err = cr_lf_pool_create(&pool, &pcfg);
    if (err < 0)
        goto out_acceptor;
    err = cr_listener_address(lfd, addr, sizeof(addr));
    if (err < 0)
        goto out_pool;
    printf("listening on %s\n", addr);
    fflush(stdout);
    err = cr_lf_pool_start(pool);
    if (err < 0)
        goto out_pool;

    sigwait(&stop, &signo);
    cr_lf_pool_stop(pool);
    err = cr_lf_pool_join_all(pool);
    while (conns != NULL)
        conn_close(r, conns);
out_pool:
    cr_lf_pool_destroy(pool);
out_acceptor:
    cr_acceptor_destroy(acc);
out_listener:
    close(lfd);
out_reactor:
    cr_reactor_destroy(r);
out:
    if (err < 0)
        fprintf(stderr, PROG ": %s\n", strerror(-err));
    return err < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
