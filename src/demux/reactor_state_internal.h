/*
 * reactor_state_internal.h - the Reactor's own state, shared by its three
 * files: reactor.c (the demultiplexing table, taking and dispatching
 * events), reactor_timers.c (the timer heap) and reactor_signals.c (the
 * signalfd). Nothing outside src/demux/reactor*.c includes it: the struct
 * is opaque to everyone else (reactor.h, reactor_internal.h).
 *
 * Lock: one mutex, r->lock, guards everything mutable except `stopped`. It
 * is never held while a handler runs or while the handle set waits, and
 * nothing else is locked while it is held (it is a leaf lock), so handlers
 * may call back into the reactor freely.
 */
#ifndef CABRANK_REACTOR_STATE_INTERNAL_H
#define CABRANK_REACTOR_STATE_INTERNAL_H

#include <cabrank/reactor.h>

#include "os/sync_internal.h"

#include <signal.h>
#include <stdint.h>

#define CR__REACTOR_NO_DEADLINE UINT64_MAX

/* cr_reactor_event.kind */
enum cr__reactor_kind {
    CR__REACTOR_KIND_FD = 1,
    CR__REACTOR_KIND_TIMER = 2,
};

struct cr__reactor_signal {
    cr_reactor_signal_fn *fn;
    void *arg;
};

struct handler_entry;   /* reactor.c */
struct ready_item;      /* reactor.c */
struct cr_handle_event; /* handle_set_internal.h */
struct timer_slot;      /* reactor_timers.c */

struct cr_reactor {
    /* Immutable after create. */
    struct cr_handle_set *hs;
    int batch;
    uint64_t busy_poll_ns; /* the poll window's ceiling */

    struct cr_lock lock;
    /* Protected by lock: the demultiplexing table (reactor.c). */
    struct handler_entry *table;
    size_t table_len;
    uint32_t next_gen;
    bool waiting;         /* a thread sleeps in the handle set wait (not a busy poll) */
    uint64_t poll_window; /* how long a wait polls now (cr__reactor_poll_window) */
    uint64_t wait_until;  /* its deadline (CR__REACTOR_NO_DEADLINE: forever) */
    bool wake_requested;  /* cr_reactor_wake() since the last return */
    /* Protected by lock: the timers (reactor_timers.c). */
    struct timer_slot *slots;
    uint32_t slots_len;
    uint32_t free_slot; /* head of the free list; none: reactor_timers.c's NO_HEAP_IDX */
    uint32_t *heap;
    uint32_t heap_len;
    /* Protected by lock: the signals (reactor_signals.c). */
    int sigfd; /* -1 until the first signal is added */
    sigset_t sigmask;
    struct cr__reactor_signal signals[NSIG];

    /* Owned by the waiting thread (one at a time); filled outside the lock,
     * read under it. */
    struct cr_handle_event *pending;
    int pending_len;
    int pending_pos;
    uint64_t pending_at; /* when the wait that filled it returned */

    /* Protected by lock: the ready list (edge), a FIFO in an array. */
    struct ready_item *ready;
    size_t ready_len;
    size_t ready_pos;
    size_t ready_cap;

    /* Atomic: set once by cr_reactor_stop (release), read by waiters (acquire). */
    int stopped;
};

/* reactor.c: registers fd as cr_reactor_add does. Caller holds r->lock. */
int cr__reactor_add_locked(struct cr_reactor *r, int fd, unsigned interest, unsigned flags,
                           cr_reactor_handler_fn *fn, void *arg);

/* reactor_timers.c: an empty heap (create), its memory freed (destroy). */
void cr__reactor_timers_init(struct cr_reactor *r);
void cr__reactor_timers_fini(struct cr_reactor *r);

/* reactor_timers.c: the earliest deadline (a cr_clock_now_ns time), or
 * CR__REACTOR_NO_DEADLINE when no timer is set. Caller holds r->lock. */
uint64_t cr__reactor_timer_first(const struct cr_reactor *r);

/* reactor_timers.c: takes the earliest timer into ev if it is due at now,
 * freeing its slot (its id no longer cancels). Caller holds r->lock. */
bool cr__reactor_timer_take(struct cr_reactor *r, uint64_t now, struct cr_reactor_event *ev);

/* reactor_signals.c: no signal yet (create), the signalfd closed (destroy). */
void cr__reactor_signals_init(struct cr_reactor *r);
void cr__reactor_signals_fini(struct cr_reactor *r);

#endif /* CABRANK_REACTOR_STATE_INTERNAL_H */
