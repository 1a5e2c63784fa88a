/*
 * lf_pool_internal.h - the Leader/Followers pool's state, shared by its files:
 * lf_pool.c (the loop, lifecycle, hybrid waits, stats), lf_order_locked.c and
 * lf_order_lockfree.c (the promotion orders, behind lf_order_internal.h) and
 * lf_deferred.c (deferred promotion and its watchdog); and what tests need of
 * a cr_lf_pool beyond lf_pool.h. Library-internal.
 */
#ifndef CABRANK_LF_POOL_INTERNAL_H
#define CABRANK_LF_POOL_INTERNAL_H

#include <cabrank/clock.h>
#include <cabrank/lf_pool.h>
#include <cabrank/reactor.h>

#include "os/sync_internal.h"
#include "pool/role_internal.h"

#include <assert.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define LF_CACHE_LINE 64
#define LF_NO_SLOT    (-1)

struct cr__lf_order_ops;

/* Why a frame ends; LF_STAY: it goes on (from follow: the thread now leads). */
enum lf_leave {
    LF_STAY = 0,
    LF_LEAVE_DONE,
    LF_LEAVE_STOP,
    LF_LEAVE_TIMEOUT,
};

/* One run of the loop: a pool thread's life, a join, or a hybrid wait. */
struct lf_frame {
    struct cr_lf_waiter *w; /* NULL: until stop (or deadline) */
    uint64_t deadline;      /* cr_clock_now_ns() time; 0: none */
};

/*
 * A participant: pool threads 0..threads-1, then the slots cr_lf_pool_join()
 * lends to outside threads. Slot idx belongs to group idx % ngroups.
 */
struct lf_slot {
    /* Immutable after create. */
    struct cr_lf_pool *pool;
    unsigned idx;
    unsigned group;
    int priority;
    /* Locked orders: waited on with the group lock. Lock-free: with mu. */
    pthread_cond_t cv;
    /* Lock-free order: this slot's synchronizer (a leaf lock). */
    struct cr_mutex mu;

    /* Owner thread only: set by pthread_create in start, read by join_all. */
    pthread_t tid;

    /* Protected by the group lock (locked orders). */
    uint32_t prev; /* follower list links: slot index + 1, 0 = none */
    uint32_t next;
    bool parked;  /* waiting as a follower (listed, or counted in g->parked) */
    int promoted; /* pending: woken for this reactor (unlisted), LF_NO_SLOT: not */

    /* Atomic. The reactor this slot's thread leads, or -1: seq_cst store by
     * the thread, seq_cst load by cr_lf_pool_notify (the Dekker pair with
     * w->done, see lf_pool.c). */
    int leading;
    /* Atomic (lock-free order): enum slot_state of lf_order_lockfree.c, which
     * states who changes it with which order. */
    uint32_t state;
    /* Atomic (lock-free order): the slot below on the idle stack. Relaxed:
     * written before the push CAS (release), read after an acquire load of
     * the word; a stale read only makes the pop CAS fail (tag). */
    uint64_t lf_next;
    /* Atomic: a join slot lent out. Acquire CAS in join, release store when
     * it is given back (pairs with the next lender's acquire). */
    int lent;

    /* Statistics: the slot's thread's role clock (role_internal.h: written
     * by that thread, read by cr_lf_pool_stats; they order nothing). */
    struct cr__role_clock clock;
} __attribute__((aligned(LF_CACHE_LINE)));

/* One Leader/Followers group: one follower structure and the reactors its
 * threads lead. */
struct lf_group {
    /* Lock-free order: the group word (layout in lf_order_lockfree.c). Every
     * change is an acq_rel CAS, each pairing with the previous one; loads
     * are acquire. */
    uint64_t word;

    /* Immutable after create: the reactors this group leads. */
    unsigned first;
    unsigned count;

    struct cr_mutex lock;
    pthread_cond_t cv; /* native: all followers wait here */
    /* Protected by lock (locked orders). */
    uint32_t head; /* follower list: slot index + 1, 0 = empty */
    uint32_t tail;
    unsigned parked; /* followers waiting */

    /* Atomic, relaxed: a statistic. Followers woken for a turn (native:
     * signals sent while followers were parked); some find it taken. */
    uint64_t promotions;
} __attribute__((aligned(LF_CACHE_LINE)));

/* Who leads reactor r: a slot index or LF_NO_SLOT. Changed only by
 * lf_move_lead's acq_rel CAS (each pairs with the previous one), which asserts
 * the change starts from the expected holder: the run-time check of "at most
 * one leader per reactor". Read by cr_lf_pool_stats (relaxed). */
struct lf_lead {
    int slot;
    /* Atomic (relaxed; ordered by slot's CAS): the timeline lane of the
     * thread that last gave r up, -1: none (lf_move_lead). */
    int last_lane;
    /* Protected by the group lock (lifo, fifo, priority): the follower woken
     * to take r that has not run yet, or LF_NO_SLOT. */
    int pending;
    /* Protected by the group lock (deferred promotion): r's last leader
     * gave it up and woke nobody, and nobody has led r since; when that
     * turn's event was taken; when r's watch timer goes off (as last set;
     * 0: never set); how many turns were given up so; how many deferred
     * turns the watchdog offered to a follower; how many events the thread
     * back from a deferred turn took without rejoining (cr__lf_take_deferred).
     * The counts are also read without the lock (cr_lf_pool_deferrals,
     * tests): relaxed atomic stores under the lock, relaxed loads without it. */
    bool deferred;
    uint64_t turn_ns;
    uint64_t look_ns;
    uint64_t deferrals;
    uint64_t takeovers;
    uint64_t retakes;
    /* Immutable after create: r's watch timer (a CLOCK_MONOTONIC timerfd,
     * set only under the group lock), -1 without a delay. */
    int timer_fd;
} __attribute__((aligned(LF_CACHE_LINE)));

struct cr_lf_pool {
    /* Immutable after create. */
    const struct cr__lf_order_ops *ops; /* the promotion order */
    unsigned nthreads;
    unsigned nslots;
    unsigned nreactors;
    unsigned ngroups;
    struct cr_reactor **reactors;
    struct lf_lead *lead;
    struct lf_group *groups;
    struct lf_slot *slots;
    void (*on_thread_start)(unsigned idx, void *arg);
    void (*on_thread_stop)(unsigned idx, void *arg);
    struct cr_timeline *timeline; /* borrowed; NULL: no lanes */
    void *thread_arg;
    uint64_t delay_ns; /* deferred promotion; 0: promote at once */

    /* Owner thread only. */
    unsigned started;
    pthread_t wd_tid;
    bool wd_started;

    /* Deferred promotion: an eventfd that wakes the watchdog to stop, -1
     * without a delay (immutable after create); how often the watchdog
     * looked (atomic, relaxed: a statistic). */
    int wd_stop_fd;
    struct pollfd *wd_fds; /* the watchdog's: wd_stop_fd, then the timers */
    uint64_t looks;

    /* Atomic: set once by cr_lf_pool_stop (release), read by every loop
     * (acquire). */
    int stopping;
    /* Atomic: the first failed wait's -errno (relaxed CAS from 0; read by
     * join_all after pthread_join, which orders it). */
    int error;
};

/* ------------------------------------------------------------------ helpers */

/* Why frame f ends now, or LF_STAY. Any pool thread, for its own frame. */
static inline int lf_leave_reason(const struct cr_lf_pool *p, const struct lf_frame *f)
{
    /* seq_cst: the second half of the Dekker pair with cr_lf_pool_notify. */
    if (f->w != NULL && __atomic_load_n(&f->w->done, __ATOMIC_SEQ_CST) != 0)
        return LF_LEAVE_DONE;
    /* acquire pairs with the release store in cr_lf_pool_stop. */
    if (__atomic_load_n(&p->stopping, __ATOMIC_ACQUIRE) != 0)
        return LF_LEAVE_STOP;
    if (f->deadline != 0 && cr_clock_now_ns() >= f->deadline)
        return LF_LEAVE_TIMEOUT;
    return LF_STAY;
}

/* Moves the leadership of reactor r from slot `from` to slot `to`
 * (LF_NO_SLOT: none); aborts if r was not `from`'s (two leaders). */
static inline void lf_move_lead(struct cr_lf_pool *p, unsigned r, int from, int to)
{
    int expected = from;
    bool ok;

    /* The timeline's promotion arrow: who gave r up, for whoever takes it
     * next (to is the calling thread then). Relaxed: the CAS orders them. */
    if (from != LF_NO_SLOT)
        __atomic_store_n(&p->lead[r].last_lane, cr__role_lane(&p->slots[from].clock),
                         __ATOMIC_RELAXED);
    /* acq_rel pairs with the previous lf_move_lead of r. */
    ok = __atomic_compare_exchange_n(&p->lead[r].slot, &expected, to, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED);
    assert(ok && "Leader/Followers: two leaders of one reactor");
    (void)ok;
    if (from == LF_NO_SLOT && to != LF_NO_SLOT && p->slots[to].clock.ring != NULL) {
        int last = __atomic_load_n(&p->lead[r].last_lane, __ATOMIC_RELAXED);

        /* Its own leadership taken back is no hand-off. */
        p->slots[to].clock.from = last != cr__role_lane(&p->slots[to].clock) ? last : -1;
    }
}

/* Waits on cv, which mu guards, until signalled or deadline (0: none); the
 * caller re-checks its condition. Caller holds mu. */
static inline void lf_wait_on(pthread_cond_t *cv, struct cr_mutex *mu, uint64_t deadline)
{
    if (deadline == 0)
        cr_cond_wait(cv, mu);
    else
        (void)cr_cond_timedwait(cv, mu, deadline);
}

/* The slot with index id - 1, or NULL for 0 (list and stack links). */
static inline struct lf_slot *lf_slot_at(struct cr_lf_pool *p, uint32_t id)
{
    return id != 0 ? &p->slots[id - 1] : NULL;
}

/*
 * s takes a lead: LEADER in the role clock from now, read into *led_at; but a
 * thread back from processing stays PROCESSING (*led_at 0) until the loop
 * finds it must wait. A leader that takes an event fetched already leads for
 * the moment between two events, and that moment is not worth a clock
 * reading in a small request's path: its time counts as processing.
 */
static inline void lf_stamp_leader(struct lf_slot *s, uint64_t *led_at)
{
    if (cr__role_is(&s->clock, CR_ROLE_PROCESSING)) {
        *led_at = 0;
        return;
    }
    *led_at = cr_clock_now_ns();
    cr__role_set_at(&s->clock, CR_ROLE_LEADER, *led_at);
}

/* lf_pool.c: records the first failed wait (err: -errno) and stops the pool. */
void cr__lf_pool_fail(struct cr_lf_pool *p, const char *what, int err);

/* ------------------------------------------------------------------ lf_deferred.c */

/* The watchdog's timers and stop eventfd; nothing without a delay. Before
 * start only. 0 or -errno; cr__lf_watch_fini undoes a partial init. */
int cr__lf_watch_init(struct cr_lf_pool *p);
void cr__lf_watch_fini(struct cr_lf_pool *p);
/* Starts the watchdog thread when there is a delay. 0 or -errno. Owner thread. */
int cr__lf_watchdog_start(struct cr_lf_pool *p);
/* Wakes the watchdog to see the pool stopping. Thread-safe. */
void cr__lf_watchdog_stop(struct cr_lf_pool *p);
/* Joins the watchdog if started: 0 or -errno. Owner thread. */
int cr__lf_watchdog_join(struct cr_lf_pool *p);

/* The leader of r gives up its turn to dispatch ev (lifo with a delay):
 * defers it or offers it to a follower. Returns the slot to wake after the
 * lock is released (cr__lf_wake_pending), or NULL. Caller holds r's group lock. */
struct lf_slot *cr__lf_defer_or_offer(struct cr_lf_pool *p, struct lf_group *g, unsigned r,
                                      const struct cr_reactor_event *ev);
/* s is back from an event of r whose turn it deferred: takes r's next fetched
 * event into *ev without rejoining, or returns false (s rejoins). Pool thread
 * s, with a delay only. */
bool cr__lf_take_deferred(struct cr_lf_pool *p, struct lf_slot *s, const struct lf_frame *f,
                          unsigned r, struct cr_reactor_event *ev);

/* How often the deferred-promotion watchdog has looked at a reactor (woken
 * by its timer). Any thread; for tests. */
uint64_t cr__lf_pool_looks(const struct cr_lf_pool *p);

/* How many events threads back from a deferred turn took from their
 * reactor's fetched batch without rejoining the group
 * (cr__lf_take_deferred). Any thread; for tests. */
uint64_t cr__lf_pool_retakes(const struct cr_lf_pool *p);

#endif /* CABRANK_LF_POOL_INTERNAL_H */
