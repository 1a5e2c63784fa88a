/*
 * model_reactive_internal.h - connections served by event handlers on one or
 * more cr_reactors: what the reactor, lf and hshr models share
 * (src/model/model_reactive.c). It accepts (one cr_acceptor per reactor and
 * listening socket: every socket, or the reactor's own group of
 * SO_REUSEPORT copies, see env->listen_groups; a connection stays on the
 * reactor that accepted it), registers
 * each connection one-shot, runs cr__conn_handle on its events and re-arms
 * it, keeps a timer per connection for its deadline, enforces
 * max_connections by pausing the acceptors, and carries out graceful and
 * immediate stops. The model only decides which threads wait in the reactors
 * (one thread, or a Leader/Followers pool) and, through the defer hook,
 * which thread handles a ready connection (hshr: a worker behind a queue).
 * Library-internal.
 *
 * Threads: handlers of different connections may run concurrently on any
 * threads that dispatch the reactors' events or call cr__reactive_handle();
 * one-shot registration keeps each connection to one thread at a time.
 */
#ifndef CABRANK_MODEL_REACTIVE_INTERNAL_H
#define CABRANK_MODEL_REACTIVE_INTERNAL_H

#include <cabrank/reactor.h>

#include "model/model_internal.h"

struct cr__reactive;
struct cr__reactive_conn;

/* Default bound of a graceful stop: busy connections still open after it
 * are closed. */
#define CR__REACTIVE_GRACE_MS 5000

struct cr__reactive_config {
    const struct cr_model_env *env;     /* borrowed */
    struct cr_reactor *const *reactors; /* borrowed; must outlive the set */
    unsigned nreactors;                 /* >= 1 */
    /* Index of the worker on the calling thread, for cr_conn_worker(); NULL:
     * always 0. Called from handlers. */
    unsigned (*worker)(void *arg);
    /*
     * A stop is complete: at once for an immediate stop; for a graceful one
     * when the last connection closed or the grace period ran out. Called
     * once, on any thread (a handler's, a timer's, or cr__reactive_stop's
     * caller), with no lock of the set held. The model then makes its
     * threads leave the reactors.
     */
    void (*stopped)(void *arg);
    /*
     * NULL: a connection's event is handled on the thread that dispatches
     * it. Else that thread calls defer(rc, events, arg) instead, with no
     * lock held, and the model hands rc and events to cr__reactive_handle()
     * once, on any thread (hshr: a worker, through its job queue). Until
     * then the event is taken: rc's handle stays disarmed, so no second
     * event of rc is dispatched, and rc stays valid. defer may block (a full
     * queue). The model may drop a deferred event only when no thread will
     * ever handle events again (an immediate stop): cr__reactive_destroy()
     * then closes rc.
     */
    void (*defer)(struct cr__reactive_conn *rc, unsigned events, void *arg);
    void *arg;
    uint64_t grace_ms; /* 0: CR__REACTIVE_GRACE_MS */
};

/*
 * Creates the set and its acceptors (accepting starts once a thread waits
 * in the reactors). With env->listen_groups > 1 reactor i accepts on group
 * i's sockets only, and nreactors must equal listen_groups. -EINVAL,
 * -ENOMEM, -errno of cr_acceptor_create. *out returns owned. Before start
 * only.
 */
CR_MUST_CHECK int cr__reactive_create(struct cr__reactive **out,
                                      const struct cr__reactive_config *cfg);

/*
 * Stops accepting. Graceful: closes idle connections now and the others as
 * they become idle, within the grace period; immediate: calls stopped() at
 * once, and the connections are closed by cr__reactive_destroy. Returns at
 * once; a second call may turn a graceful stop into an immediate one.
 * Thread-safe.
 */
void cr__reactive_stop(struct cr__reactive *rs, bool graceful);

/*
 * Handles a connection event handed to defer(): reads, feeds the service,
 * writes, then re-arms rc's handle or closes rc, as the dispatching thread
 * would have without defer. rc and events are borrowed from that defer
 * call; once this returns rc may be handled, or freed, by another thread.
 * Once per deferred event, on any thread.
 */
void cr__reactive_handle(struct cr__reactive_conn *rc, unsigned events);

/* Connections the acceptors of reactor (an index into the config's
 * reactors) accepted so far. Thread-safe. */
uint64_t cr__reactive_accepted(const struct cr__reactive *rs, unsigned reactor);

/* Connections open now. Thread-safe. */
unsigned cr__reactive_connections(const struct cr__reactive *rs);

/*
 * Destroys the acceptors, closes every connection still open (their timers
 * cancelled; among them those whose taken or deferred event never ran) and
 * frees the set; NULL-safe. No thread may be dispatching the reactors'
 * events or inside cr__reactive_handle() any more (after the model joined
 * its threads, or before it started them).
 */
void cr__reactive_destroy(struct cr__reactive *rs);

#endif /* CABRANK_MODEL_REACTIVE_INTERNAL_H */
