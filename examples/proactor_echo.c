/*
 * proactor_echo.c - a TCP echo server on the Proactor (cr_proactor): the
 * program starts asynchronous operations and reacts to their completions.
 * One multishot accept completes once per new connection; each connection
 * then alternates one receive and one send on its own completion token
 * (struct cr_aop, embedded first in struct conn, so a completion finds its
 * connection without a lookup). Handlers run on the proactor's dispatcher
 * threads; one token's handlers never run concurrently. The engine is
 * io_uring where the kernel allows it, else the emulated one.
 *
 * SIGTERM/SIGINT: cr_proactor_stop cancels every operation; each handler
 * runs once more with -ECANCELED and frees its connection. Exit 0. It prints
 * "listening on ADDR:PORT" to stdout (tests read it).
 *
 * Build: cc -O2 examples/proactor_echo.c -o proactor_echo $(pkg-config --cflags --libs cabrank)
 * Run:   proactor_echo [--listen 127.0.0.1:8080] [--engine uring|emulated]
 *                      [--dispatch single|lf|ring-per-thread]
 */
#include <cabrank/listener.h>
#include <cabrank/proactor.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "proactor_echo"

struct conn {
    struct cr_aop op; /* first: the token's address is the connection's */
    int fd;
    bool sending; /* the operation in flight is the send */
    char buf[16384];
};

static void conn_free(struct conn *c)
{
    close(c->fd);
    free(c);
}

/* Completion of the connection's one operation: a receive finished, send it
 * back; a send finished, receive again. Anything else ends the connection. */
static void on_io(struct cr_aop *op, ssize_t res, unsigned flags)
{
    struct conn *c = (struct conn *)op;
    int err;

    CR_UNUSED(flags);
    if (res <= 0) {
        conn_free(c);
        return;
    }
    c->sending = !c->sending;
    if (c->sending)
        err = cr_aop_send(op, c->fd, c->buf, (size_t)res, 0);
    else
        err = cr_aop_recv(op, c->fd, c->buf, sizeof(c->buf), 0);
    if (err < 0)
        conn_free(c);
}

static void on_accept(struct cr_aop *op, ssize_t res, unsigned flags)
{
    struct conn *c;

    CR_UNUSED(flags);
    if (res < 0)
        return; /* cancelled at stop, or the listener failed */
    c = malloc(sizeof(*c));
    if (c == NULL) {
        close((int)res);
        return;
    }
    c->fd = (int)res;
    c->sending = false;
    cr_aop_init(&c->op, op->p, c->fd, on_io);
    if (cr_aop_recv(&c->op, c->fd, c->buf, sizeof(c->buf), 0) < 0)
        conn_free(c);
}

int main(int argc, char **argv)
{
    struct cr_listener_config lcfg = {.address = "127.0.0.1:8080"};
    struct cr_proactor_config pcfg = {.threads = 2};
    struct cr_proactor *p = NULL;
    struct cr_aop accept_op;
    sigset_t stop;
    char addr[64];
    int signo;
    int lfd = -1;
    int err;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--listen") == 0) {
            lcfg.address = argv[i + 1];
        } else if (strcmp(argv[i], "--engine") == 0) {
            pcfg.engine = argv[i + 1];
        } else if (strcmp(argv[i], "--dispatch") == 0) {
            pcfg.dispatch = argv[i + 1];
        } else {
            fprintf(stderr, "usage: " PROG " [--listen ADDR] [--engine E] [--dispatch D]\n");
            return 2;
        }
    }
    /* Blocked before any thread starts, so only sigwait below takes them. */
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);

    err = cr_listener_open(&lfd, &lcfg);
    if (err < 0)
        goto out;
    err = cr_proactor_create(&p, &pcfg);
    if (err < 0)
        goto out_listener;
    err = cr_listener_address(lfd, addr, sizeof(addr));
    if (err < 0)
        goto out_proactor;
    err = cr_proactor_start(p);
    if (err < 0)
        goto out_proactor;
    cr_aop_init(&accept_op, p, 0, on_accept);
    err = cr_aop_accept(&accept_op, lfd, true);
    if (err < 0) {
        cr_proactor_stop(p);
        if (cr_proactor_wait(p) < 0)
            fprintf(stderr, PROG ": waiting for the proactor failed\n");
        goto out_proactor;
    }
    printf("listening on %s\n", addr);
    fflush(stdout);
    fprintf(stderr, PROG ": engine %s, dispatch %s\n", cr_proactor_engine(p),
            cr_proactor_dispatch(p));

    sigwait(&stop, &signo);
    cr_proactor_stop(p);
    err = cr_proactor_wait(p);
out_proactor:
    cr_proactor_destroy(p);
out_listener:
    close(lfd);
out:
    if (err < 0)
        fprintf(stderr, PROG ": %s\n", strerror(-err));
    return err < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
