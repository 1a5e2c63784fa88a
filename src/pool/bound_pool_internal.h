/*
 * bound_pool_internal.h - what the bound pool's two files share:
 * bound_pool.c (contexts, the id table, the connection, reading, the hybrid
 * mode and the public calls) and lf_bound.c (the standalone mode's
 * Leader/Followers: leader, follower queue, promotion). The struct, the
 * deadline helpers, and the few calls each makes of the other; the locks
 * and invariants are stated once, at the top of bound_pool.c.
 */
#ifndef CABRANK_POOL_BOUND_POOL_INTERNAL_H
#define CABRANK_POOL_BOUND_POOL_INTERNAL_H

#include <cabrank/bound_pool.h>
#include <cabrank/clock.h>
#include <cabrank/u64_table.h>

#include "os/sync_internal.h"

#include <limits.h>

#define NO_DEADLINE UINT64_MAX

enum ctx_state {
    CTX_IDLE = 0,
    CTX_REGISTERED = 1, /* in the id table, waiting for its reply */
    CTX_DONE = 2,       /* result set, not yet collected by join */
};

enum wait_mode {
    WAIT_NONE = 0, /* not asleep: sending, leading, or running */
    WAIT_COND = 1, /* asleep on its condition variable */
    WAIT_LF = 2,   /* in cr_lf_pool_wait */
};

struct conn {
    /* Immutable after attach. */
    int fd;
    uint64_t gen;
    /* Protected by the pool's lock. */
    unsigned refs;
};

struct cr_bound_pool {
    /* Immutable after create. */
    cr_bound_decode_fn *decode;
    void *decode_arg;
    struct cr_lf_pool *lf;
    struct cr_reactor *reactor;
    cr_bound_fail_fn *on_fail;
    void *fail_arg;
    size_t rcap;
    int wake_fd; /* standalone: eventfd that interrupts the leader's poll */

    struct cr_mutex send_lock;

    struct cr_mutex lock;
    /* Protected by lock. */
    struct cr_u64_table ids; /* registered contexts by request id; fixed size */
    struct conn *conn;       /* the live connection, NULL if none */
    int fail_err;            /* what calls get while conn is NULL */
    uint64_t next_gen;
    struct cr_bound_ctx *leader; /* standalone */
    struct cr_bound_ctx *fhead;  /* standalone: followers, oldest first */
    struct cr_bound_ctx *ftail;
    bool reading; /* hybrid: a handler reads the connection */
    struct cr_bound_pool_stats st;

    /* Owned by the reader of the moment (see the top of bound_pool.c). */
    char *rbuf;
    size_t rlen;
    uint64_t rgen;

    /* Atomic, relaxed: only uniqueness matters, no data is published. */
    uint64_t next_id;
};

/* The deadline timeout_ms from now; NO_DEADLINE for a negative timeout. */
static inline uint64_t bound_deadline_after(int timeout_ms)
{
    if (timeout_ms < 0)
        return NO_DEADLINE;
    return cr_clock_now_ns() + (uint64_t)timeout_ms * CR_NSEC_PER_MSEC;
}

/* Milliseconds left, rounded up so a poll never returns just before the
 * deadline; -1 without one, 0 once passed. */
static inline int bound_remaining_ms(uint64_t deadline)
{
    uint64_t now;
    uint64_t ms;

    if (deadline == NO_DEADLINE)
        return -1;
    now = cr_clock_now_ns();
    if (now >= deadline)
        return 0;
    ms = (deadline - now + CR_NSEC_PER_MSEC - 1) / CR_NSEC_PER_MSEC;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

static inline bool bound_deadline_passed(uint64_t deadline)
{
    return deadline != NO_DEADLINE && cr_clock_now_ns() >= deadline;
}

/* Waits on cv, which mu guards, until signalled or deadline. Returns 0 or
 * -ETIMEDOUT. Caller holds mu. */
static inline int bound_cond_wait(pthread_cond_t *cv, struct cr_mutex *mu, uint64_t deadline)
{
    if (deadline == NO_DEADLINE) {
        cr_cond_wait(cv, mu);
        return 0;
    }
    return cr_cond_timedwait(cv, mu, deadline);
}

/* ------------------------------------------------------------ bound_pool.c */

/* Drops a reference to conn; the last one closes its fd. Caller holds p->lock. */
void cr__bound_pool_conn_put(struct cr_bound_pool *p, struct conn *conn);

/*
 * Ends conn if it is still the current connection: completes every waiter
 * with err, wakes the leader and blocked senders, drops the pool's reference.
 * Returns true if it did (the caller then runs on_fail after unlocking).
 * Caller holds p->lock.
 */
bool cr__bound_pool_fail_locked(struct cr_bound_pool *p, struct conn *conn, int err);

/*
 * One non-blocking read into the buffer, then decoding and delivery. 1 if
 * something was read, 0 if nothing was available, or the error that ends the
 * connection. The reader of the moment only, without p->lock.
 */
int cr__bound_pool_read_input(struct cr_bound_pool *p, struct conn *conn);

/* Ends c's wait with -ETIMEDOUT; a reply arriving later finds no waiter.
 * Caller holds p->lock. */
void cr__bound_pool_expire(struct cr_bound_pool *p, struct cr_bound_ctx *c);

/* -------------------------------------------------------------- lf_bound.c */

/*
 * cr_bound_pool_join in standalone mode: leads or follows until c is done,
 * and passes the leadership on. Stores the error of a connection failure it
 * detected in *report (the caller runs on_fail after unlocking). Caller holds
 * p->lock; c is registered or done.
 */
void cr__lf_bound_join(struct cr_bound_pool *p, struct cr_bound_ctx *c, uint64_t deadline,
                       int *report);

/* Takes c, which is queued, off the follower queue. Caller holds p->lock. */
void cr__lf_bound_dequeue(struct cr_bound_pool *p, struct cr_bound_ctx *c);

#endif /* CABRANK_POOL_BOUND_POOL_INTERNAL_H */
