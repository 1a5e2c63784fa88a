/*
 * lf_pool.h - the Leader/Followers thread pool (unbound handle/thread
 * association) over one or more cr_reactors.
 *
 * Threads take turns: one leader per reactor waits for an event
 * (cr_reactor_next, which deactivates a one-shot handle), promotes a follower
 * to leader, then processes the event itself (cr_reactor_dispatch) and
 * rejoins. Handlers reactivate their handles when done. No event is handed
 * from one thread to another.
 *
 * Promotion orders: "native" (all followers wait on one condition variable,
 * the OS picks), "lifo" (stack of per-thread synchronizers: the follower that
 * parked last is woken; a thread that rejoins before it runs leads instead,
 * being the most recently active of all, and the woken one parks again on
 * top), "fifo" (queue of per-thread synchronizers, strictly the longest
 * waiter: every turn costs a wake), "priority" (the highest-priority follower,
 * unless a rejoining thread of at least its priority comes first) and
 * "lifo-lockfree" (lifo's rule with the Apache leader-MPM design: a
 * listener/pending/idle-stack word changed by compare-and-swap, no mutex on
 * the path). Under every order the wake is sent before the event is
 * processed, so a handler that blocks never leaves its handle set without a
 * leader while followers are parked.
 *
 * Multiple handle sets: with several reactors, `shared_followers` false gives
 * each reactor its own group of threads and its own leader (threads are split
 * evenly); true gives one follower set whose threads lead whichever reactor
 * has no leader (the "multiple leaders" variant).
 */
#ifndef CABRANK_LF_POOL_H
#define CABRANK_LF_POOL_H

#include <cabrank/common.h>
#include <cabrank/stats.h>

struct cr_reactor;
struct cr_lf_pool;
struct cr_timeline;

struct cr_lf_pool_config {
    unsigned threads;             /* 0: the CPUs it may use (cpu.h) */
    const char *promotion;        /* NULL: "lifo" */
    struct cr_reactor **reactors; /* borrowed; must outlive the pool */
    unsigned nreactors;           /* >= 1 */
    bool shared_followers;        /* multiple leaders over one follower set */
    const int *priorities;        /* "priority": one per thread; NULL: thread i has -i */
    /* 0: a leader promotes a follower before it dispatches (POSA2). Else a
     * leader wakes nobody, and a watchdog thread offers the turn once a
     * handler has run this long or fetched events waited this long (see
     * lf_deferred.c); lifo only, -EINVAL for the other orders. */
    unsigned promotion_delay_us;
    /* Run on each pool thread at start and exit (thread-local set-up). */
    void (*on_thread_start)(unsigned idx, void *arg);
    void (*on_thread_stop)(unsigned idx, void *arg);
    void *thread_arg;
    /* Borrowed, must outlive the pool; NULL: none. Each thread records its
     * roles and the leaderships handed to it on a lane "lf <i>". */
    struct cr_timeline *timeline;
};

/* A thread that waits inside a handler for something another thread
 * delivers (a reply), serving events meanwhile; see cr_lf_pool_wait. */
struct cr_lf_waiter {
    /* Private to the pool. */
    int done;
    int thread;
};

/* Names of the promotion orders, NULL-terminated. Thread-safe. */
const char *const *cr_lf_pool_promotions(void);

/* A leader and a follower that leads while the leader's handler blocks. */
#define CR_LF_POOL_THREADS_PER_SET 2

/*
 * The reactors (handle sets) a pool gets by default: one per CPU this
 * process may use (cpu.h), or with threads given (> 0), threads /
 * CR_LF_POOL_THREADS_PER_SET where that is fewer, so each set keeps a
 * follower; at least 1, at most max. The threads then default to
 * CR_LF_POOL_THREADS_PER_SET per set. Thread-safe.
 */
unsigned cr_lf_pool_default_sets(unsigned threads, unsigned max);

/* Creates a pool; threads start with cr_lf_pool_start. -EINVAL for an unknown
 * promotion or no reactor, -ENOMEM. Thread-safe. */
CR_MUST_CHECK int cr_lf_pool_create(struct cr_lf_pool **out, const struct cr_lf_pool_config *cfg);

/* Starts the threads. -errno of pthread_create (none is left running).
 * Owner thread only. */
CR_MUST_CHECK int cr_lf_pool_start(struct cr_lf_pool *p);

/*
 * Makes every thread leave after the event it is processing: wakes the
 * leaders (cr_reactor_wake) and every follower. Events already taken by
 * cr_reactor_next are dispatched before their thread leaves. Thread-safe.
 */
void cr_lf_pool_stop(struct cr_lf_pool *p);

/* Joins every thread after cr_lf_pool_stop. 0, -errno of pthread_join, or the
 * -errno of a failed reactor wait (which stops the pool). Owner thread only. */
CR_MUST_CHECK int cr_lf_pool_join_all(struct cr_lf_pool *p);

/* Frees a stopped and joined pool; NULL-safe. Owner thread only. */
void cr_lf_pool_destroy(struct cr_lf_pool *p);

/*
 * The paper's join(): the calling thread (not one of the pool's) takes part
 * as leader or follower until the pool stops or timeout_ms passes (-1: no
 * limit). Returns 0, or -ETIMEDOUT, or -EBUSY when 8 outside threads are
 * joined already. Outside threads are not in cr_lf_pool_stats and
 * cr_lf_pool_self is -1 on them. Thread-safe.
 */
CR_MUST_CHECK int cr_lf_pool_join(struct cr_lf_pool *p, int timeout_ms);

/*
 * From inside a handler on a pool thread: rejoins the pool, leading or
 * following and processing other events meanwhile, until another thread
 * calls cr_lf_pool_notify(w) (the hybrid client/server of the paper: a thread
 * waiting for its reply still serves new requests, so the pool never
 * deadlocks when every thread waits). Returns 0, -ETIMEDOUT, -ECANCELED
 * when the pool stops, or -EINVAL on a thread that is not the pool's.
 * Initialise w with cr_lf_waiter_init first, on the waiting thread, before
 * anything can notify it. Thread: a pool thread.
 */
void cr_lf_waiter_init(struct cr_lf_waiter *w);
CR_MUST_CHECK int cr_lf_pool_wait(struct cr_lf_pool *p, struct cr_lf_waiter *w, int timeout_ms);

/* Ends the cr_lf_pool_wait of w, whatever role its thread has. Thread-safe. */
void cr_lf_pool_notify(struct cr_lf_pool *p, struct cr_lf_waiter *w);

/* Index of the calling pool thread, or -1 for another thread. Thread-safe. */
int cr_lf_pool_self(const struct cr_lf_pool *p);

/*
 * Counters without stopping the pool: promotions, and for each thread its
 * role now, events dispatched and time per role. Fills at most max; returns
 * the pool's thread count. Thread-safe.
 */
unsigned cr_lf_pool_stats(const struct cr_lf_pool *p, uint64_t *promotions,
                          struct cr_worker_stats *workers, unsigned max);

/*
 * Deferred promotion's counters (both 0 without promotion_delay_us): turns
 * a leader gave up to dispatch without waking a follower, and those of them
 * the watchdog then offered to a follower (a handler ran a delay or more, or
 * fetched events waited as long). Many takeovers against deferrals say the
 * handlers block, and an eager pool (no delay) would serve them better.
 * Either pointer may be NULL. Thread-safe.
 */
void cr_lf_pool_deferrals(const struct cr_lf_pool *p, uint64_t *deferred, uint64_t *taken_over);

#endif /* CABRANK_LF_POOL_H */
