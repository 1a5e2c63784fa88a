/*
 * accept_loop_internal.h - the accepting thread of the thread-per-connection
 * and forking models: one thread running a cr_reactor with one cr_acceptor
 * per listening socket, the acceptors paused while the model is at its cap
 * and resumed below it. Used by model_tpc.c (the acceptor thread) and
 * model_forking.c (the manager thread, which also watches its children's
 * pidfds in the same reactor). Library-internal.
 *
 * The loop owns the reactor, the acceptors and the thread; it borrows the
 * listening sockets. What the thread does is the model's: it calls the
 * model's run callback, which waits on the reactor (cr_reactor_run, or its
 * own cr_reactor_handle_events loop) and calls cr__accept_loop_drop() when it
 * stops accepting. The model counts its connections itself and reports the
 * count with cr__accept_loop_update(), which pauses or resumes the acceptors.
 *
 * Lock order: the model's lock (held around update), then the loop's, then
 * an acceptor's, then the reactor's (acceptor.c).
 */
#ifndef CABRANK_ACCEPT_LOOP_INTERNAL_H
#define CABRANK_ACCEPT_LOOP_INTERNAL_H

#include <cabrank/common.h>

struct cr_reactor;
struct cr__accept_loop;

/* Called on the loop's thread with each accepted fd, which it takes. */
typedef void cr__accept_loop_accept_fn(struct cr__accept_loop *l, int fd, void *arg);

/* The loop thread's body; the thread ends when it returns. */
typedef void cr__accept_loop_run_fn(struct cr__accept_loop *l, void *arg);

struct cr__accept_loop_config {
    const char *backend;   /* handle set of the reactor; NULL: default */
    const int *listen_fds; /* borrowed; must outlive the loop */
    unsigned nlisten;
    unsigned cap; /* acceptors pause at this many connections (> 0) */
    cr__accept_loop_accept_fn *on_accept;
    cr__accept_loop_run_fn *run;
    void *arg; /* borrowed; passed to both callbacks */
};

/*
 * Creates the reactor and registers an acceptor per listening socket with
 * it; nothing is accepted before cr__accept_loop_start(). *out returns
 * owned. -ENOMEM, or -errno of cr_reactor_create or cr_acceptor_create.
 * Thread-safe.
 */
CR_MUST_CHECK int cr__accept_loop_create(struct cr__accept_loop **out,
                                         const struct cr__accept_loop_config *cfg);

/* Destroys the acceptors left and the reactor, and frees the loop;
 * NULL-safe. Join the thread first (or never start it). Owner thread only. */
void cr__accept_loop_destroy(struct cr__accept_loop *l);

/* The loop's reactor (owned by the loop), for the model's own handles,
 * timers, wake-ups and stop. Thread-safe. */
struct cr_reactor *cr__accept_loop_reactor(const struct cr__accept_loop *l);

/* Starts the thread, which calls cfg->run. 0 or -errno of pthread_create.
 * Owner thread only. */
CR_MUST_CHECK int cr__accept_loop_start(struct cr__accept_loop *l);

/* True when the thread was started and not yet joined. Owner thread only. */
bool cr__accept_loop_is_joinable(const struct cr__accept_loop *l);

/* Waits for the thread to end. True when this call joined it; false when it
 * was never started or joined before. Owner thread only. */
bool cr__accept_loop_join(struct cr__accept_loop *l);

/*
 * Pauses the acceptors when open >= cap and resumes them below, once they
 * have been dropped doing nothing. open is the model's count of connections
 * (or children): call with the lock that guards it held, so that updates
 * arrive in the order of the counts they carry. Thread-safe.
 */
void cr__accept_loop_update(struct cr__accept_loop *l, unsigned open);

/* No more accepts: later updates do nothing, and the acceptors are
 * destroyed. Idempotent. Loop thread only, from run (it alone runs the
 * reactor, so no acceptor callback is running). */
void cr__accept_loop_drop(struct cr__accept_loop *l);

#endif /* CABRANK_ACCEPT_LOOP_INTERNAL_H */
