/*
 * session.c - the Session Context Manager (cabrank/session.h): contexts an
 * application keeps across requests, stored under random 64-bit ids so that
 * any worker continues any session. Called by service code on worker threads,
 * any number at once. Owns the entries and, until cr_session_remove hands one
 * back, the contexts (freed with cfg.free_ctx).
 *
 * Layout: 2^n shards picked by the id's low bits, each a mutex over a
 * cr_u64_table (cabrank/u64_table.h, growing with the shard) and an idle list of its checked-in
 * sessions in release order, oldest first, so a sweep stops at the first session not yet idle long
 * enough and costs O(expired + 1).
 *
 * Owners (cr_session_create_owned): a table of counts, one node per owner
 * holding sessions, under one lock. create reserves in it, like in live,
 * before it inserts; every path that unlinks an entry gives the slot back.
 *
 * Lock order: a shard lock, then the owners lock; the owners lock is a leaf,
 * and a thread holds at most one shard lock. It calls no
 * free_ctx under it (expired entries are unlinked onto a local list and
 * freed after the unlock, so free_ctx may call back into the manager), and
 * the amortised sweep runs before or after the caller's own operation, never
 * inside it.
 *
 * Expiry is checked twice: the sweeps (create/acquire sweep the least
 * recently swept shard once it is due, cr_session_expire all of them), and
 * acquire itself, which treats a session found idle past the timeout as
 * already expired. So a session never comes back after its timeout, however
 * late a sweep runs.
 */
#include <cabrank/clock.h>
#include <cabrank/session.h>
#include <cabrank/u64_table.h>

#include "os/sync_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <sys/random.h>

#define DEFAULT_TIMEOUT_MS  UINT64_C(60000)
#define DEFAULT_MAX         65536u
#define DEFAULT_PER_OWNER   1024u
#define DEFAULT_SHARDS      64u
#define MAX_SHARDS          65536u
#define INITIAL_BUCKET_BITS 3

struct entry {
    struct cr_u64_node node; /* key: the session id */
    void *ctx;
    uint64_t owner; /* 0: none */
    /* On the shard's idle list while checked in; once unlinked from the
     * table, idle_next chains the entries waiting to be freed. */
    struct entry *idle_prev;
    struct entry *idle_next;
    uint64_t released_ns; /* when last checked in (or created) */
    bool checked_out;
};

struct shard {
    struct cr_mutex lock;
    /* Protected by lock. */
    struct cr_u64_table table;
    struct entry *idle_head; /* released longest ago */
    struct entry *idle_tail;
    /* Atomic: read without the lock to decide whether a sweep is due; a
     * relaxed CAS elects one sweeper per period (the sweep itself takes lock,
     * which orders the table). */
    uint64_t last_sweep_ns;
} __attribute__((aligned(64)));

/* The sessions one owner holds now. */
struct owner {
    struct cr_u64_node node; /* key: the owner */
    unsigned n;
};

struct cr_session_mgr {
    /* Immutable after create. */
    uint64_t timeout_ns;
    uint64_t sweep_every_ns; /* timeout / 4 */
    unsigned max_sessions;
    unsigned max_per_owner;
    unsigned shard_bits;
    cr_session_free_fn *free_ctx;
    void *free_arg;
    struct shard *shards;

    struct cr_mutex owners_lock;
    /* Protected by owners_lock: struct owner by owner id. */
    struct cr_u64_table owners;

    /* Atomics, all relaxed: counters and gauges that order nothing (the shard
     * locks order the table). live is also the max_sessions reservation:
     * create adds before it inserts and subtracts if it fails; every path
     * that unlinks an entry subtracts under the shard lock. */
    unsigned live;
    unsigned acquired;     /* checked out now; see gauge_acquired */
    unsigned sweep_cursor; /* the shard swept least recently, mod shards */
    uint64_t created;
    uint64_t removed;
    uint64_t expired;
    uint64_t busy;
    uint64_t full;
    uint64_t owner_full;
};

static unsigned shard_count(const struct cr_session_mgr *m)
{
    return 1u << m->shard_bits;
}

static struct shard *shard_of(struct cr_session_mgr *m, uint64_t id)
{
    return &m->shards[id & (shard_count(m) - 1)];
}

static struct entry *lookup(struct shard *s, uint64_t id)
{
    struct cr_u64_node *n;

    cr_mutex_assert_held(&s->lock);
    n = cr_u64_table_find(&s->table, id);
    return n == NULL ? NULL : cr_u64_table_entry(n, struct entry, node);
}

static void idle_push(struct shard *s, struct entry *e)
{
    e->idle_next = NULL;
    e->idle_prev = s->idle_tail;
    if (s->idle_tail != NULL)
        s->idle_tail->idle_next = e;
    else
        s->idle_head = e;
    s->idle_tail = e;
}

static void idle_unlink(struct shard *s, struct entry *e)
{
    if (e->idle_prev != NULL)
        e->idle_prev->idle_next = e->idle_next;
    else
        s->idle_head = e->idle_next;
    if (e->idle_next != NULL)
        e->idle_next->idle_prev = e->idle_prev;
    else
        s->idle_tail = e->idle_prev;
    e->idle_prev = NULL;
    e->idle_next = NULL;
}

/* Reserves one of owner's max_per_owner slots: 0, -EMFILE when all are
 * taken, -ENOMEM. */
static int owner_reserve(struct cr_session_mgr *m, uint64_t owner)
{
    struct cr_u64_node *n;
    struct owner *o;
    int err = 0;

    cr_mutex_lock(&m->owners_lock);
    n = cr_u64_table_find(&m->owners, owner);
    if (n != NULL) {
        o = cr_u64_table_entry(n, struct owner, node);
    } else {
        o = malloc(sizeof(*o));
        if (o == NULL) {
            err = -ENOMEM;
            goto out_unlock;
        }
        o->node.key = owner;
        o->n = 0;
        cr_u64_table_insert(&m->owners, &o->node);
    }
    /* A new owner has no session yet, and max_per_owner >= 1. */
    if (o->n >= m->max_per_owner)
        err = -EMFILE;
    else
        o->n++;
out_unlock:
    cr_mutex_unlock(&m->owners_lock);
    return err;
}

/* Gives back a slot owner_reserve took; forgets the owner with its last. */
static void owner_unreserve(struct cr_session_mgr *m, uint64_t owner)
{
    struct cr_u64_node *n;
    struct owner *o;

    cr_mutex_lock(&m->owners_lock);
    n = cr_u64_table_find(&m->owners, owner);
    assert(n != NULL);
    o = cr_u64_table_entry(n, struct owner, node);
    if (--o->n == 0) {
        cr_u64_table_remove(&m->owners, &o->node);
        free(o);
    }
    cr_mutex_unlock(&m->owners_lock);
}

/* Takes e out of the table (not the idle list) and gives back its slots in
 * max_sessions and its owner's max_per_owner at once, so a free_ctx or
 * another thread may create again. */
static void table_unlink(struct cr_session_mgr *m, struct shard *s, struct entry *e)
{
    cr_mutex_assert_held(&s->lock);
    cr_u64_table_remove(&s->table, &e->node);
    /* Relaxed: the reservation counter orders nothing (see the struct). */
    __atomic_fetch_sub(&m->live, 1, __ATOMIC_RELAXED);
    if (e->owner != 0)
        owner_unreserve(m, e->owner);
}

/* The acquired gauge moves under the shard lock that flips checked_out, so a
 * release handed to another thread cannot run its -1 before the acquire's +1
 * and show the gauge wrapped. Relaxed: the lock orders it. */
static void gauge_acquired(struct cr_session_mgr *m, int delta)
{
    __atomic_fetch_add(&m->acquired, (unsigned)delta, __ATOMIC_RELAXED);
}

/* Idle longer than the timeout at now. released_ns may be later than a now
 * read before the lock was taken; such an entry is not idle at all. */
static bool is_expired(const struct cr_session_mgr *m, const struct entry *e, uint64_t now)
{
    return !e->checked_out && now > e->released_ns && now - e->released_ns > m->timeout_ns;
}

/* Moves every expired entry of s onto *dead (linked by idle_next); returns
 * how many. Caller holds s->lock. */
static unsigned collect_expired(struct cr_session_mgr *m, struct shard *s, uint64_t now,
                                struct entry **dead)
{
    unsigned n = 0;

    cr_mutex_assert_held(&s->lock);
    /* The idle list is in release order (released_ns is read under the lock,
     * and the monotonic clock does not go back), so the first entry not
     * expired ends the sweep. */
    while (s->idle_head != NULL && is_expired(m, s->idle_head, now)) {
        struct entry *e = s->idle_head;

        idle_unlink(s, e);
        table_unlink(m, s, e);
        e->idle_next = *dead;
        *dead = e;
        n++;
    }
    return n;
}

/* Frees what collect_expired gathered. No shard lock may be held: free_ctx
 * may call back into the manager. */
static void free_dead(struct cr_session_mgr *m, struct entry *dead)
{
    while (dead != NULL) {
        struct entry *next = dead->idle_next;

        if (m->free_ctx != NULL)
            m->free_ctx(dead->ctx, m->free_arg);
        free(dead);
        dead = next;
    }
}

static unsigned sweep_shard(struct cr_session_mgr *m, struct shard *s)
{
    struct entry *dead = NULL;
    unsigned n;

    cr_mutex_lock(&s->lock);
    n = collect_expired(m, s, cr_clock_now_ns(), &dead);
    cr_mutex_unlock(&s->lock);
    if (n > 0) {
        /* Relaxed: a statistic (see the struct). */
        __atomic_fetch_add(&m->expired, n, __ATOMIC_RELAXED);
    }
    free_dead(m, dead);
    return n;
}

/*
 * The amortised sweep of create and acquire: at most one shard per call, the
 * one at the cursor. Shards are swept in cursor order, so the cursor's shard
 * is the one swept least recently: if it is not due, none is. The CAS on its
 * last_sweep_ns elects one sweeper among threads that saw it due at once.
 */
static void sweep_one_if_due(struct cr_session_mgr *m, uint64_t now)
{
    /* Relaxed: the cursor and last_sweep_ns only spread the work; a stale
     * value costs a sweep too early or one call late, never correctness. */
    unsigned i = __atomic_load_n(&m->sweep_cursor, __ATOMIC_RELAXED) & (shard_count(m) - 1);
    struct shard *s = &m->shards[i];
    uint64_t last = __atomic_load_n(&s->last_sweep_ns, __ATOMIC_RELAXED);

    if (now < last || now - last < m->sweep_every_ns)
        return;
    if (!__atomic_compare_exchange_n(&s->last_sweep_ns, &last, now, false, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
        return;
    __atomic_fetch_add(&m->sweep_cursor, 1, __ATOMIC_RELAXED);
    sweep_shard(m, s);
}

int cr_session_mgr_create(struct cr_session_mgr **out, const struct cr_session_config *cfg)
{
    struct cr_session_config c = *cfg;
    struct cr_session_mgr *m;
    unsigned n;
    unsigned init;
    uint64_t now;
    int err;

    *out = NULL;
    if (c.idle_timeout_ms == 0)
        c.idle_timeout_ms = DEFAULT_TIMEOUT_MS;
    if (c.max_sessions == 0)
        c.max_sessions = DEFAULT_MAX;
    if (c.max_per_owner == 0)
        c.max_per_owner = DEFAULT_PER_OWNER;
    if (c.shards == 0)
        c.shards = DEFAULT_SHARDS;
    if (c.idle_timeout_ms > UINT64_MAX / CR_NSEC_PER_MSEC || c.shards > MAX_SHARDS)
        return -EINVAL;

    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return -ENOMEM;
    m->timeout_ns = c.idle_timeout_ms * CR_NSEC_PER_MSEC;
    m->sweep_every_ns = m->timeout_ns / 4;
    m->max_sessions = c.max_sessions;
    m->max_per_owner = c.max_per_owner;
    while ((1u << m->shard_bits) < c.shards)
        m->shard_bits++;
    m->free_ctx = c.free_ctx;
    m->free_arg = c.free_arg;
    err = cr_u64_table_init(&m->owners, INITIAL_BUCKET_BITS, CR_U64_TABLE_MAX_BITS);
    if (err != 0)
        goto out_free_mgr;
    err = cr_mutex_init(&m->owners_lock);
    if (err != 0)
        goto out_fini_owners;
    n = shard_count(m);
    m->shards = aligned_alloc(64, n * sizeof(*m->shards));
    if (m->shards == NULL) {
        err = -ENOMEM;
        goto out_fini_owners_lock;
    }
    now = cr_clock_now_ns();
    for (init = 0; init < n; init++) {
        struct shard *s = &m->shards[init];

        *s = (struct shard){.last_sweep_ns = now};
        err = cr_u64_table_init(&s->table, INITIAL_BUCKET_BITS, CR_U64_TABLE_MAX_BITS);
        if (err != 0)
            goto out_fini_shards;
        err = cr_mutex_init(&s->lock);
        if (err != 0) {
            cr_u64_table_fini(&s->table);
            goto out_fini_shards;
        }
    }
    *out = m;
    return 0;

out_fini_shards:
    while (init-- > 0) {
        cr_mutex_fini(&m->shards[init].lock);
        cr_u64_table_fini(&m->shards[init].table);
    }
    free(m->shards);
out_fini_owners_lock:
    cr_mutex_fini(&m->owners_lock);
out_fini_owners:
    cr_u64_table_fini(&m->owners);
out_free_mgr:
    free(m);
    return err;
}

void cr_session_mgr_destroy(struct cr_session_mgr *m)
{
    struct cr_u64_table_iter oit = {0};
    struct cr_u64_node *on;

    if (m == NULL)
        return;
    for (unsigned i = 0; i < shard_count(m); i++) {
        struct shard *s = &m->shards[i];
        struct cr_u64_table_iter it = {0};
        struct cr_u64_node *n;

        /* No other call runs (the contract), so no lock: free_ctx may not
         * call back into a manager being destroyed. The walk allows freeing
         * the node it returned. */
        while ((n = cr_u64_table_next(&s->table, &it)) != NULL) {
            struct entry *e = cr_u64_table_entry(n, struct entry, node);

            if (m->free_ctx != NULL)
                m->free_ctx(e->ctx, m->free_arg);
            free(e);
        }
        cr_u64_table_fini(&s->table);
        cr_mutex_fini(&s->lock);
    }
    free(m->shards);
    while ((on = cr_u64_table_next(&m->owners, &oit)) != NULL)
        free(cr_u64_table_entry(on, struct owner, node));
    cr_u64_table_fini(&m->owners);
    cr_mutex_fini(&m->owners_lock);
    free(m);
}

/* A random id, never 0. getrandom of 8 bytes does not return short; it can
 * be interrupted only while the kernel's pool is not yet initialised. */
static int draw_id(uint64_t *id)
{
    for (;;) {
        ssize_t n = getrandom(id, sizeof(*id), 0);

        if (n == (ssize_t)sizeof(*id)) {
            if (*id != 0)
                return 0;
            continue;
        }
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

int cr_session_create(struct cr_session_mgr *m, void *ctx, uint64_t *id)
{
    return cr_session_create_owned(m, ctx, 0, id);
}

int cr_session_create_owned(struct cr_session_mgr *m, void *ctx, uint64_t owner, uint64_t *id)
{
    struct entry *e;
    uint64_t now = 0;
    int err;

    /* Relaxed: a reservation against max_sessions; see the struct. */
    if (__atomic_fetch_add(&m->live, 1, __ATOMIC_RELAXED) >= m->max_sessions) {
        /* Relaxed: a statistic. */
        __atomic_fetch_add(&m->full, 1, __ATOMIC_RELAXED);
        err = -EAGAIN;
        goto out_unreserve;
    }
    if (owner != 0) {
        err = owner_reserve(m, owner);
        if (err == -EMFILE)
            __atomic_fetch_add(&m->owner_full, 1, __ATOMIC_RELAXED);
        if (err != 0)
            goto out_unreserve;
    }
    e = malloc(sizeof(*e));
    if (e == NULL) {
        err = -ENOMEM;
        goto out_unreserve_owner;
    }
    e->owner = owner;
    /*
     * Ids are never reused while the manager lives: the table check below
     * rules out a live id, and a dead id comes back only if 64 random bits
     * repeat one drawn before, about n^2 / 2^65 after n creates (1e-9 after
     * 190 million), which we accept as "never" rather than remember every id.
     */
    for (;;) {
        struct shard *s;

        err = draw_id(&e->node.key);
        if (err != 0)
            goto out_free_entry;
        s = shard_of(m, e->node.key);
        cr_mutex_lock(&s->lock);
        if (lookup(s, e->node.key) != NULL) {
            cr_mutex_unlock(&s->lock);
            continue;
        }
        e->ctx = ctx;
        e->checked_out = false;
        /* Read under the lock: keeps the idle list in time order. */
        now = cr_clock_now_ns();
        e->released_ns = now;
        cr_u64_table_insert(&s->table, &e->node);
        idle_push(s, e);
        *id = e->node.key;
        cr_mutex_unlock(&s->lock);
        break;
    }
    /* Relaxed: a statistic. */
    __atomic_fetch_add(&m->created, 1, __ATOMIC_RELAXED);
    sweep_one_if_due(m, now);
    return 0;

out_free_entry:
    free(e);
out_unreserve_owner:
    if (owner != 0)
        owner_unreserve(m, owner);
out_unreserve:
    __atomic_fetch_sub(&m->live, 1, __ATOMIC_RELAXED);
    return err;
}

int cr_session_acquire(struct cr_session_mgr *m, uint64_t id, void **ctx)
{
    struct shard *s = shard_of(m, id);
    struct entry *dead = NULL;
    struct entry *e;
    uint64_t now;
    int err;

    cr_mutex_lock(&s->lock);
    now = cr_clock_now_ns();
    e = lookup(s, id);
    if (e == NULL) {
        err = -ENOENT;
    } else if (e->checked_out) {
        err = -EBUSY;
    } else if (is_expired(m, e, now)) {
        /* Collect it here rather than hand out a session past its timeout
         * because no sweep has reached it yet. */
        idle_unlink(s, e);
        table_unlink(m, s, e);
        e->idle_next = NULL;
        dead = e;
        err = -ENOENT;
    } else {
        idle_unlink(s, e);
        e->checked_out = true;
        *ctx = e->ctx;
        gauge_acquired(m, 1);
        err = 0;
    }
    cr_mutex_unlock(&s->lock);

    /* Relaxed: statistics (see the struct). */
    if (err == -EBUSY)
        __atomic_fetch_add(&m->busy, 1, __ATOMIC_RELAXED);
    if (dead != NULL) {
        __atomic_fetch_add(&m->expired, 1, __ATOMIC_RELAXED);
        free_dead(m, dead);
    }
    sweep_one_if_due(m, now);
    return err;
}

void cr_session_release(struct cr_session_mgr *m, uint64_t id)
{
    struct shard *s = shard_of(m, id);
    struct entry *e;

    cr_mutex_lock(&s->lock);
    e = lookup(s, id);
    /* Releasing what the caller does not hold is a caller bug that we cannot
     * tell apart from another holder's id; leave the session as it is. */
    if (e != NULL && e->checked_out) {
        e->checked_out = false;
        e->released_ns = cr_clock_now_ns();
        idle_push(s, e);
        gauge_acquired(m, -1);
    }
    cr_mutex_unlock(&s->lock);
}

int cr_session_remove(struct cr_session_mgr *m, uint64_t id, void **ctx)
{
    struct shard *s = shard_of(m, id);
    struct entry *e;

    cr_mutex_lock(&s->lock);
    e = lookup(s, id);
    if (e == NULL) {
        cr_mutex_unlock(&s->lock);
        return -ENOENT;
    }
    /* The contract wants it checked out by the caller; a checked-in session
     * is removed too (nobody uses its context, so that is safe). */
    if (e->checked_out)
        gauge_acquired(m, -1);
    else
        idle_unlink(s, e);
    table_unlink(m, s, e);
    cr_mutex_unlock(&s->lock);

    *ctx = e->ctx;
    free(e);
    /* Relaxed: a statistic (see the struct). */
    __atomic_fetch_add(&m->removed, 1, __ATOMIC_RELAXED);
    return 0;
}

unsigned cr_session_expire(struct cr_session_mgr *m)
{
    unsigned n = 0;

    for (unsigned i = 0; i < shard_count(m); i++) {
        struct shard *s = &m->shards[i];

        /* Relaxed: tells the amortised sweep this shard is fresh. */
        __atomic_store_n(&s->last_sweep_ns, cr_clock_now_ns(), __ATOMIC_RELAXED);
        n += sweep_shard(m, s);
    }
    return n;
}

void cr_session_stats(struct cr_session_mgr *m, struct cr_session_stats *st)
{
    size_t owners;

    cr_mutex_lock(&m->owners_lock);
    owners = cr_u64_table_count(&m->owners);
    cr_mutex_unlock(&m->owners_lock);
    /* Relaxed: each value is read on its own, so a snapshot taken while
     * others run need not add up; at rest live = created - removed -
     * expired. live may count a create still in progress. */
    *st = (struct cr_session_stats){
        .live = __atomic_load_n(&m->live, __ATOMIC_RELAXED),
        .acquired = __atomic_load_n(&m->acquired, __ATOMIC_RELAXED),
        .created = __atomic_load_n(&m->created, __ATOMIC_RELAXED),
        .removed = __atomic_load_n(&m->removed, __ATOMIC_RELAXED),
        .expired = __atomic_load_n(&m->expired, __ATOMIC_RELAXED),
        .busy = __atomic_load_n(&m->busy, __ATOMIC_RELAXED),
        .full = __atomic_load_n(&m->full, __ATOMIC_RELAXED),
        .owner_full = __atomic_load_n(&m->owner_full, __ATOMIC_RELAXED),
        .owners = (unsigned)owners,
    };
}
