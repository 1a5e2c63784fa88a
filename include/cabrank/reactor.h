/*
 * reactor.h - the Reactor: a demultiplexing table indexed by fd over a handle
 * set, timers, signals (through signalfd) and a wake-up, with the handle
 * deactivation/reactivation protocol that Leader/Followers needs.
 *
 * Threads: one thread at a time waits in the reactor (cr_reactor_next,
 * cr_reactor_handle_events, cr_reactor_run): the leader. Every other function
 * may be called from any thread while it waits; a change that affects the wait
 * (a new handle, an earlier timer, stop) wakes it.
 *
 * Dispatch is split in two for Leader/Followers: cr_reactor_next() takes one
 * ready event (deactivating a one-shot handle), the leader promotes a follower,
 * then cr_reactor_dispatch() runs the handler. cr_reactor_handle_events() does
 * both for single-threaded use. One wait may fetch a batch of ready events;
 * the rest stay in the reactor for the next calls, no handle is dispatched
 * twice, and an event of a handle removed, deactivated or replaced meanwhile is
 * dropped.
 */
#ifndef CABRANK_REACTOR_H
#define CABRANK_REACTOR_H

#include <cabrank/common.h>
#include <cabrank/handle_set.h>

struct cr_reactor;

/* Called with the ready events (CR_EV_*) of fd. */
typedef void cr_reactor_handler_fn(struct cr_reactor *r, int fd, unsigned events, void *arg);
/* Called once when a timer expires; the id is no longer valid afterwards. */
typedef void cr_reactor_timer_fn(struct cr_reactor *r, uint64_t timer_id, void *arg);
/* Called for each delivery of signo. */
typedef void cr_reactor_signal_fn(struct cr_reactor *r, int signo, void *arg);

struct cr_reactor_config {
    const char *backend; /* handle set backend name; NULL = default (epoll) */
    int batch;           /* events fetched per wait; 0 = 64 */
    /* Before a wait would sleep, keep polling the handle set (and the
     * timers, the ready list, wake-ups) for a while; 0: sleep at once. A
     * sleeping waiter costs whoever makes it ready a cross-CPU wake-up;
     * polling spends this thread's CPU to spare that (docs/httpd.md, tuning). The window
     * adapts to the idle gaps seen, between none and this ceiling, as KVM's
     * halt polling does: it widens while gaps a longer poll would have
     * covered come, and closes when gaps outlast the ceiling, so an idle
     * reactor soon sleeps at once. It starts at the ceiling. */
    unsigned busy_poll_us;
};

/* Registration flag: deactivate the handle when an event is taken, until
 * cr_reactor_reactivate() (the Leader/Followers protocol). */
#define CR_REACTOR_ONESHOT 0x01u
/* With CR_REACTOR_ONESHOT: the same, but where the handle set is edge-
 * triggered (epoll) re-arming costs no system call. The handler then re-arms
 * only once the fd would block for what it waits for (read to EAGAIN or a
 * short read, written to EAGAIN), or says it may not (cr_reactor_rearm). */
#define CR_REACTOR_EDGE 0x02u

/* cr_reactor_handle_events() mode: dispatch exactly one event. */
#define CR_REACTOR_ONE 0x01u

/* What cr_reactor_next() took; pass it to cr_reactor_dispatch() once. */
struct cr_reactor_event {
    /* Private to the reactor. */
    int kind;
    int fd;
    unsigned events;
    uint64_t timer_id;
    cr_reactor_handler_fn *handler;
    cr_reactor_timer_fn *timer;
    void *arg;
    uint64_t taken_ns;   /* cr_clock_now_ns() when taken: the handler's event time */
    uint64_t backlog_ns; /* when the events still waiting after it were fetched; 0: none */
};

/*
 * Creates a reactor; cfg may be NULL. *out is owned by the caller. Errors as
 * cr_handle_set_open(), or -ENOMEM. Thread-safe.
 */
CR_MUST_CHECK int cr_reactor_create(struct cr_reactor **out, const struct cr_reactor_config *cfg);

/* Frees the reactor and its timers; closes no user fd; NULL-safe. No thread
 * may be waiting in it. Restores no signal mask. */
void cr_reactor_destroy(struct cr_reactor *r);

/* The handle set backend's name. Thread-safe. */
const char *cr_reactor_backend(const struct cr_reactor *r);

/*
 * Registers fn(arg) for events on fd: interest is CR_EV_READ and/or
 * CR_EV_WRITE; flags may hold CR_REACTOR_ONESHOT. arg is borrowed until the
 * handle is removed. -EBADF for an invalid fd, -EEXIST if fd is registered,
 * -EINVAL if the backend cannot hold fd. Thread-safe.
 */
CR_MUST_CHECK int cr_reactor_add(struct cr_reactor *r, int fd, unsigned interest, unsigned flags,
                                 cr_reactor_handler_fn *fn, void *arg);

/* Changes the interest of a registered fd and (re)activates it. -ENOENT if
 * fd is not registered. Thread-safe. */
CR_MUST_CHECK int cr_reactor_modify(struct cr_reactor *r, int fd, unsigned interest);

/* cr_reactor_modify; maybe_ready: the handler stopped before the fd would
 * block (CR_REACTOR_EDGE), so it is dispatched again without a new edge.
 * -ENOMEM if the ready list cannot grow. Thread-safe. */
CR_MUST_CHECK int cr_reactor_rearm(struct cr_reactor *r, int fd, unsigned interest,
                                   bool maybe_ready);

/* Unregisters fd; an event of it already taken by cr_reactor_next() is still
 * dispatched, none later. -ENOENT if fd is not registered (a double remove).
 * Thread-safe. */
CR_MUST_CHECK int cr_reactor_remove(struct cr_reactor *r, int fd);

/* Excludes fd from the wait until reactivated. -ENOENT if not registered.
 * Thread-safe. */
CR_MUST_CHECK int cr_reactor_deactivate(struct cr_reactor *r, int fd);

/* Includes fd in the wait again with its current interest. -ENOENT if not
 * registered. Thread-safe. */
CR_MUST_CHECK int cr_reactor_reactivate(struct cr_reactor *r, int fd);

/*
 * Calls fn(arg) once, delay_ms from now, on the thread that waits. Stores a
 * nonzero id in *id_out (may be NULL). O(log n). -ENOMEM. Thread-safe.
 */
CR_MUST_CHECK int cr_reactor_timer_add(struct cr_reactor *r, uint64_t delay_ms,
                                       cr_reactor_timer_fn *fn, void *arg, uint64_t *id_out);

/* Cancels a pending timer. O(log n). -ENOENT if it fired, was cancelled or
 * never existed. Thread-safe. */
CR_MUST_CHECK int cr_reactor_timer_cancel(struct cr_reactor *r, uint64_t timer_id);

/*
 * Delivers signo as an event through signalfd. Blocks signo in the calling
 * thread; block it in every thread (create the reactor and add signals before
 * starting threads, or use cr_reactor_block_signals()) or it may be delivered
 * the default way. -EINVAL for a signal signalfd cannot take, -EEXIST if
 * registered. Thread-safe.
 */
CR_MUST_CHECK int cr_reactor_signal_add(struct cr_reactor *r, int signo, cr_reactor_signal_fn *fn,
                                        void *arg);

/* Stops delivering signo (it stays blocked). -ENOENT if not registered.
 * Thread-safe. */
CR_MUST_CHECK int cr_reactor_signal_remove(struct cr_reactor *r, int signo);

/* Blocks TERM, INT, HUP, QUIT, USR1, USR2, CHLD and PIPE in the calling thread,
 * so threads started afterwards inherit the mask. -errno. Thread-safe. */
CR_MUST_CHECK int cr_reactor_block_signals(void);

/* Makes the waiting thread return from its wait. Thread-safe. */
void cr_reactor_wake(struct cr_reactor *r);

/* Makes cr_reactor_run() return and wakes the waiter. Thread-safe. */
void cr_reactor_stop(struct cr_reactor *r);

/* True once cr_reactor_stop() was called. Thread-safe. */
bool cr_reactor_is_stopped(const struct cr_reactor *r);

/*
 * Takes one ready event, waiting up to timeout_ms (-1: until one arrives or a
 * wake-up). Returns 1 with *ev filled, 0 on timeout or wake-up, or -errno.
 * A one-shot handle is deactivated before this returns; a due timer is
 * removed. One thread at a time.
 */
CR_MUST_CHECK int cr_reactor_next(struct cr_reactor *r, int timeout_ms,
                                  struct cr_reactor_event *ev);

/* Runs the handler of an event taken by cr_reactor_next(). Any thread. */
void cr_reactor_dispatch(struct cr_reactor *r, const struct cr_reactor_event *ev);

/*
 * Dispatches ready events and due timers, waiting up to timeout_ms for the
 * first. mode CR_REACTOR_ONE dispatches at most one and keeps the rest of the
 * batch. Returns the number dispatched (0 on timeout or wake-up) or -errno.
 * One thread at a time.
 */
CR_MUST_CHECK int cr_reactor_handle_events(struct cr_reactor *r, int timeout_ms, unsigned mode);

/* Handles events until cr_reactor_stop(). 0, or -errno of a failed wait. One
 * thread at a time. */
CR_MUST_CHECK int cr_reactor_run(struct cr_reactor *r);

#endif /* CABRANK_REACTOR_H */
