/*
 * role_internal.h - a thread's role clock: the role (enum cr_role) it is in,
 * since when, the events it handled and the time it spent in each role, for
 * cr_server_stats(). Embedded per thread by the reactor, hshr and tpc models
 * and the Leader/Followers pool (src/pool/role.c; lf_pool.c adds the leader check
 * its stats need). Library-internal.
 *
 * Threads: one thread, the clock's owner, writes it (cr__role_set,
 * cr__role_event); any thread reads it (cr__role_read) at any time. With a
 * single writer every field is a relaxed atomic load and store, no
 * read-modify-write: statistics, ordering nothing. A reader sees each field
 * whole, but role and since may be one change apart, so the time it adds
 * for the current role is off by at most that one change.
 */
#ifndef CABRANK_ROLE_INTERNAL_H
#define CABRANK_ROLE_INTERNAL_H

#include <cabrank/role.h>
#include <cabrank/stats.h>

#include "pool/timeline_internal.h"

/* Zeroed: IDLE, never entered (no time counted until the first set). */
struct cr__role_clock {
    /* Written by the owner thread, read by any: relaxed atomics. */
    int role;       /* enum cr_role */
    uint64_t since; /* when role began (monotonic ns); 0: never set */
    uint64_t events;
    uint64_t role_ns[CR_ROLE_COUNT]; /* time in each role, the current one
                                        counted up to since */
    /* Owner thread only, but ring and lane are set before the thread runs
     * (cr__role_attach): the timeline lane each change is written to (NULL:
     * none), and the lane that handed this thread the leadership, for the
     * next change (-1: none; see lf_move_lead). */
    struct cr__timeline_ring *ring;
    int from;
};

/* Gives c a lane named name in timeline t (NULL: none, nothing done), to
 * which each change is written from now on. -ENOMEM. Before the owner
 * thread runs. */
int cr__role_attach(struct cr__role_clock *c, struct cr_timeline *t, const char *name);

/* Removes c's lane from t, if it has one. After the owner thread ended. */
void cr__role_detach(struct cr__role_clock *c, struct cr_timeline *t);

/* The lane id of c's timeline lane, or -1. Thread-safe once attached. */
static inline int cr__role_lane(const struct cr__role_clock *c)
{
    return c->ring != NULL ? (int)c->ring->id : -1;
}

/* Moves the owner thread to role, charging the time since the last change
 * to the previous role; nothing when role is the current one. Owner thread
 * only. */
void cr__role_set(struct cr__role_clock *c, enum cr_role role);

/* As cr__role_set, with the change at now: a cr_clock_now_ns() reading the
 * owner took since its last change, such as the time its event was taken.
 * Owner thread only. */
void cr__role_set_at(struct cr__role_clock *c, enum cr_role role, uint64_t now);

/* Whether the owner thread is in role now. Owner thread only. */
static inline bool cr__role_is(const struct cr__role_clock *c, enum cr_role role)
{
    /* Relaxed: the owner's own field. */
    return __atomic_load_n(&c->role, __ATOMIC_RELAXED) == (int)role;
}

/* Counts one event (or job, or connection) handled. Owner thread only. */
static inline void cr__role_event(struct cr__role_clock *c)
{
    /* Relaxed load and store: only the owner writes it; cr__role_read
     * loads it relaxed. */
    __atomic_store_n(&c->events, __atomic_load_n(&c->events, __ATOMIC_RELAXED) + 1,
                     __ATOMIC_RELAXED);
}

/* Fills out (role, events, role_ns) from c, adding the time in the current
 * role up to now (cr_clock_now_ns(), read once by the caller for all its
 * threads). Thread-safe. */
void cr__role_read(const struct cr__role_clock *c, uint64_t now, struct cr_worker_stats *out);

#endif /* CABRANK_ROLE_INTERNAL_H */
