/*
 * session.h - the Session Context Manager (the pattern paper's "type 6"
 * architecture: Leader/Followers with a Session Context Manager). A session
 * is a context the application keeps across requests, stored under a random
 * 64-bit id and retrieved by it, so that any worker thread, on any
 * connection, continues a session another began: the context is checked out
 * by one request at a time (acquire/release), and sessions idle longer than
 * the timeout are collected.
 *
 * The manager owns the contexts it holds: it frees them with cfg.free_ctx
 * when a session expires or the manager is destroyed; cr_session_remove
 * hands one back to the caller instead. Sharded: the table is split by id
 * into shards with a lock each, so workers on different sessions do not
 * contend. Expiry is amortised: create and acquire sweep one shard whose
 * last sweep is older than the timeout / 4, so no thread of its own is
 * needed; cr_session_expire sweeps all shards at once (for a timer).
 *
 * Ids are random (getrandom), never 0, and never reused while the manager
 * lives, so a stale id finds nothing rather than another client's session.
 *
 * Limits: at most max_sessions live at once, and at most max_per_owner of
 * those created under one owner (cr_session_create_owned: an id the caller
 * picks for whoever asks, a connection say), so that one client flooding
 * creates cannot take every session, nor the memory of max_sessions
 * contexts, from the others. A session counts against its owner until it
 * ends (remove, expiry), whichever connection continues it.
 */
#ifndef CABRANK_SESSION_H
#define CABRANK_SESSION_H

#include <cabrank/common.h>

struct cr_session_mgr;

/* Frees a context the manager drops (expiry, destroy). */
typedef void cr_session_free_fn(void *ctx, void *arg);

struct cr_session_config {
    uint64_t idle_timeout_ms;     /* sessions unused this long expire; 0 = 60000 */
    unsigned max_sessions;        /* create fails with -EAGAIN beyond; 0 = 65536 */
    unsigned max_per_owner;       /* create_owned fails with -EMFILE beyond; 0 = 1024 */
    unsigned shards;              /* rounded up to 2^n; 0 = 64 */
    cr_session_free_fn *free_ctx; /* NULL: contexts are not freed by the manager */
    void *free_arg;               /* borrowed */
};

struct cr_session_stats {
    unsigned live;     /* sessions held now (and creates in progress) */
    unsigned acquired; /* of those, checked out now */
    uint64_t created;
    uint64_t removed; /* by cr_session_remove */
    uint64_t expired;
    uint64_t busy;       /* acquires refused with -EBUSY */
    uint64_t full;       /* creates refused at max_sessions (-EAGAIN) */
    uint64_t owner_full; /* creates refused at max_per_owner (-EMFILE) */
    unsigned owners;     /* owners holding sessions now */
};

/* 0, -EINVAL, -ENOMEM. *out returns owned. Thread-safe. */
CR_MUST_CHECK int cr_session_mgr_create(struct cr_session_mgr **out,
                                        const struct cr_session_config *cfg);

/* Frees every context still held (free_ctx) and the manager. No other call
 * may run or follow. NULL-safe. Owner thread only. */
void cr_session_mgr_destroy(struct cr_session_mgr *m);

/*
 * Stores ctx (takes it) under a new id, returned in *id, checked in. 0,
 * -EAGAIN at max_sessions (ctx stays the caller's), -ENOMEM, or the error of
 * getrandom(2) (ctx stays the caller's on every error). Thread-safe.
 */
CR_MUST_CHECK int cr_session_create(struct cr_session_mgr *m, void *ctx, uint64_t *id);

/*
 * cr_session_create for owner (0: none, as cr_session_create): also -EMFILE
 * when owner holds max_per_owner sessions already (ctx stays the caller's).
 * The manager keeps a count per owner holding sessions, and forgets the
 * owner with its last session. Thread-safe.
 */
CR_MUST_CHECK int cr_session_create_owned(struct cr_session_mgr *m, void *ctx, uint64_t owner,
                                          uint64_t *id);

/*
 * Checks session id out for the caller: *ctx returns it (borrowed until
 * release or remove) and the idle clock stops. -ENOENT if there is no such
 * session (never was, expired, removed), -EBUSY if another caller has it
 * checked out. Thread-safe.
 */
CR_MUST_CHECK int cr_session_acquire(struct cr_session_mgr *m, uint64_t id, void **ctx);

/* Checks session id back in (acquired by the caller); its idle clock starts
 * again from now. An id not checked out is ignored. Thread-safe. */
void cr_session_release(struct cr_session_mgr *m, uint64_t id);

/*
 * Ends session id, checked out by the caller, and returns its context in
 * *ctx (returns owned; the manager does not free it). 0 or -ENOENT. A
 * session not checked out is removed too (nobody is using its context).
 * Thread-safe.
 */
CR_MUST_CHECK int cr_session_remove(struct cr_session_mgr *m, uint64_t id, void **ctx);

/* Collects every checked-in session idle longer than the timeout now,
 * freeing its context; returns how many. Thread-safe. */
unsigned cr_session_expire(struct cr_session_mgr *m);

/* Counters and gauges. Thread-safe. */
void cr_session_stats(struct cr_session_mgr *m, struct cr_session_stats *st);

#endif /* CABRANK_SESSION_H */
