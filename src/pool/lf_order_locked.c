/*
 * lf_order_locked.c - the Leader/Followers promotion orders that are monitors
 * (POSA2 implementation activities 3-5): native, lifo, fifo, priority. Called
 * by the loop in lf_pool.c through lf_order_internal.h, on the pool's threads
 * (follow, unlead) and on any thread (kick, wake_all); by lf_deferred.c for
 * cr__lf_offer_turn. The group lock guards the group's follower structure and
 * its reactors' leaders; nothing here is held while a handler runs.
 *
 *   native   followers wait on the group's one condition variable. Unlead =
 *            mark the reactor leaderless and signal it (counted as a
 *            promotion when a follower was parked); whichever thread gets the
 *            lock first (a woken follower or a rejoining thread) leads.
 *   lifo     followers wait on their own slot's condition variable (with the
 *   fifo     group lock), linked in a list: pushed at the head (lifo), the
 *   priority tail (fifo) or in priority order (highest first; among equal
 *            priorities the most recent first). Unlead = mark the reactor
 *            leaderless, unlink the first follower, record it as the
 *            reactor's pending follower and wake it (cr__lf_offer_turn) -
 *            unless a pending follower is on its way to that reactor already:
 *            then nobody more is woken. The woken follower leads if the
 *            reactor is still leaderless when it runs. A thread that rejoins
 *            before that takes the turn if the order would have chosen it
 *            over the pending follower had it been parked (is_ahead_of). A
 *            follower that finds its turn taken parks again: lifo and
 *            priority like a newcomer (it has just run), fifo back at the
 *            head (it still waited longest).
 *
 * So, for a turn given up while followers are parked: lifo gives it to the
 * follower that parked last, unless a thread rejoins before that follower
 * runs (the most recently active thread leads); fifo to the follower that has
 * waited longest, always; priority to the highest-priority follower, unless a
 * thread of at least its priority rejoins before it runs; native to whichever
 * thread the OS lets take the lock first. With no follower parked, the first
 * thread to rejoin leads, under every order. Letting the running, cache-warm
 * thread lead instead of handing the reactor to the woken follower saves a
 * wake and a park per event under load (docs/design/lf_pool.md); fifo keeps
 * its strict hand-off.
 *
 * Hand-over invariant: each reactor r has a leader, or a pending follower
 * (woken, so runnable, and it re-checks r when it runs), or its group has no
 * parked follower, or (with a delay, lf_deferred.c) r is deferred and r's
 * timer goes off within a delay of the deferred turn. unlead restores it
 * through cr__lf_offer_turn; a rejoining thread parks only when every
 * leaderless reactor it could lead has a pending follower; a pending follower
 * stops being one only under the group lock, leading r if r is free; and
 * nothing else makes a reactor leaderless. Hence the wake is sent before the
 * leader dispatches, and a handler that blocks never makes its reactor wait
 * for a processing thread to come back (test:
 * parked_follower_takes_over_while_a_handler_blocks).
 */
#include "pool/lf_order_internal.h"
#include "pool/lf_pool_internal.h"

#include <assert.h>

static bool is_native(const struct cr_lf_pool *p)
{
    return p->ops == &cr__lf_order_native;
}

/*
 * Links s into g's follower list by the pool's order: lifo at the head, fifo
 * at the tail, priority before the first follower it does not outrank (among
 * equals the most recent first). `again`: s was woken to lead but found its
 * turn taken; fifo puts it back at the head, where it was (the others place
 * it as a newcomer: it has just run). Caller holds g->lock.
 */
static void list_insert(struct cr_lf_pool *p, struct lf_group *g, struct lf_slot *s, bool again)
{
    uint32_t id = s->idx + 1;
    uint32_t before = 0; /* s goes before this slot; 0: at the tail */

    cr_mutex_assert_held(&g->lock);
    if (p->ops == &cr__lf_order_lifo || (p->ops == &cr__lf_order_fifo && again)) {
        before = g->head;
    } else if (p->ops == &cr__lf_order_priority) {
        /* O(followers), but followers are threads: a handful. */
        before = g->head;
        while (before != 0 && lf_slot_at(p, before)->priority > s->priority)
            before = lf_slot_at(p, before)->next;
    }
    s->next = before;
    s->prev = before != 0 ? lf_slot_at(p, before)->prev : g->tail;
    if (s->prev != 0)
        lf_slot_at(p, s->prev)->next = id;
    else
        g->head = id;
    if (before != 0)
        lf_slot_at(p, before)->prev = id;
    else
        g->tail = id;
}

/* Caller holds g->lock. */
static void list_remove(struct cr_lf_pool *p, struct lf_group *g, struct lf_slot *s)
{
    cr_mutex_assert_held(&g->lock);
    if (s->prev != 0)
        lf_slot_at(p, s->prev)->next = s->next;
    else
        g->head = s->next;
    if (s->next != 0)
        lf_slot_at(p, s->next)->prev = s->prev;
    else
        g->tail = s->prev;
    s->prev = 0;
    s->next = 0;
}

/*
 * Whether rejoining thread s may take a leaderless reactor whose turn was
 * offered to the woken follower f: when the order would have chosen s over f
 * had s been parked then. lifo: always (s ran last); priority: unless f
 * outranks s (ties: s, the more recent); fifo: never (f waited longer).
 */
static bool is_ahead_of(const struct cr_lf_pool *p, const struct lf_slot *s,
                        const struct lf_slot *f)
{
    if (p->ops == &cr__lf_order_lifo)
        return true;
    if (p->ops == &cr__lf_order_priority)
        return s->priority >= f->priority;
    return false;
}

/* A reactor of g that s may lead now, looked for from s's own, or -1: one
 * without a leader whose pending follower, if any, s is ahead of. native
 * has no pending followers. Caller holds g->lock. */
static int find_leaderless(const struct cr_lf_pool *p, const struct lf_group *g,
                           const struct lf_slot *s)
{
    cr_mutex_assert_held(&g->lock);
    for (unsigned k = 0; k < g->count; k++) {
        unsigned r = g->first + (s->idx + k) % g->count;
        int f = p->lead[r].pending;

        /* Relaxed: locked orders change lead[] only under g->lock, held. */
        if (__atomic_load_n(&p->lead[r].slot, __ATOMIC_RELAXED) == LF_NO_SLOT &&
            (f == LF_NO_SLOT || is_ahead_of(p, s, &p->slots[f])))
            return (int)r;
    }
    return -1;
}

/* Caller holds g->lock. */
static void unpark(struct cr_lf_pool *p, struct lf_group *g, struct lf_slot *s)
{
    cr_mutex_assert_held(&g->lock);
    if (!s->parked)
        return;
    s->parked = false;
    if (is_native(p))
        g->parked--;
    else
        list_remove(p, g, s);
}

/* Restores the hand-over invariant for r (see the top of the file): unlinks
 * the first follower, marks it pending for r. */
struct lf_slot *cr__lf_offer_turn(struct cr_lf_pool *p, struct lf_group *g, unsigned r)
{
    struct lf_slot *f = lf_slot_at(p, g->head);

    cr_mutex_assert_held(&g->lock);
    if (p->lead[r].pending != LF_NO_SLOT || f == NULL)
        return NULL;
    unpark(p, g, f);
    f->promoted = (int)r;
    p->lead[r].pending = (int)f->idx;
    p->lead[r].deferred = false; /* the pending follower covers r now */
    __atomic_fetch_add(&g->promotions, 1, __ATOMIC_RELAXED);
    return f;
}

/* s leads leaderless r. Caller holds the group lock. */
static void take_lead(struct cr_lf_pool *p, unsigned r, struct lf_slot *s)
{
    lf_move_lead(p, r, LF_NO_SLOT, (int)s->idx);
    p->lead[r].deferred = false;
}

int cr__lf_locked_follow(struct cr_lf_pool *p, struct lf_slot *s, const struct lf_frame *f,
                         unsigned *r_out, uint64_t *led_at)
{
    struct lf_group *g = &p->groups[s->group];
    bool again = false;
    int reason;
    int r;

    cr_mutex_lock(&g->lock);
    for (;;) {
        if (s->promoted != LF_NO_SLOT) {
            /* Woken for reactor r (already unlinked). A thread the order
             * puts ahead of us may have taken it meanwhile: then we are a
             * follower again, and park again below. */
            r = s->promoted;
            s->promoted = LF_NO_SLOT;
            assert(p->lead[r].pending == (int)s->idx);
            p->lead[r].pending = LF_NO_SLOT;
            again = true;
            /* Relaxed: lead[] changes only under g->lock, held. */
            if (__atomic_load_n(&p->lead[r].slot, __ATOMIC_RELAXED) == LF_NO_SLOT) {
                take_lead(p, (unsigned)r, s);
                break;
            }
        }
        reason = lf_leave_reason(p, f);
        if (reason != LF_STAY)
            goto out_leave;
        r = find_leaderless(p, g, s);
        if (r >= 0) {
            take_lead(p, (unsigned)r, s);
            break;
        }
        if (!s->parked) {
            s->parked = true;
            if (is_native(p))
                g->parked++;
            else
                list_insert(p, g, s, again);
            /* After parking: a FOLLOWER seen in the stats is in the structure. */
            cr__role_set(&s->clock, CR_ROLE_FOLLOWER);
        }
        lf_wait_on(is_native(p) ? &g->cv : &s->cv, &g->lock, f->deadline);
    }
    unpark(p, g, s);
    /* seq_cst: the first half of the Dekker pair with cr_lf_pool_notify. */
    __atomic_store_n(&s->leading, r, __ATOMIC_SEQ_CST);
    lf_stamp_leader(s, led_at);
    cr_mutex_unlock(&g->lock);
    *r_out = (unsigned)r;
    return LF_STAY;

out_leave:
    unpark(p, g, s);
    /* native: a signal meant as a promotion may have woken us (or been taken
     * with a timeout); pass it on so no reactor stays leaderless while others
     * sleep. The other orders never leave while pending (a pending turn is
     * resolved first, above): nothing to pass on. */
    if (is_native(p) && g->parked > 0 && find_leaderless(p, g, s) >= 0)
        cr_cond_signal(&g->cv);
    cr_mutex_unlock(&g->lock);
    return reason;
}

/* Marks r leaderless and wakes a follower to take it, unless one is on its
 * way; or, when s goes to dispatch ev and promotions are deferred, lets
 * lf_deferred.c mark r deferred instead. */
void cr__lf_locked_unlead(struct cr_lf_pool *p, struct lf_slot *s, unsigned r,
                          const struct cr_reactor_event *ev)
{
    struct lf_group *g = &p->groups[s->group];
    struct lf_slot *f = NULL;

    cr_mutex_lock(&g->lock);
    /* seq_cst: see the Dekker pair; the lock orders it against notify too. */
    __atomic_store_n(&s->leading, -1, __ATOMIC_SEQ_CST);
    lf_move_lead(p, r, (int)s->idx, LF_NO_SLOT);
    if (is_native(p)) {
        if (g->parked > 0) {
            cr_cond_signal(&g->cv);
            __atomic_fetch_add(&g->promotions, 1, __ATOMIC_RELAXED);
        }
    } else if (ev != NULL && p->delay_ns != 0) {
        f = cr__lf_defer_or_offer(p, g, r, ev);
    } else {
        f = cr__lf_offer_turn(p, g, r);
    }
    cr_mutex_unlock(&g->lock);
    cr__lf_wake_pending(f);
}

/* A pending follower needs nothing: it was woken, and checks its frame once
 * it has resolved its turn. */
void cr__lf_locked_kick(struct cr_lf_pool *p, struct lf_slot *s)
{
    struct lf_group *g = &p->groups[s->group];

    cr_mutex_lock(&g->lock);
    if (s->parked) {
        /* native: which waiter a signal wakes is the OS's choice. */
        if (is_native(p))
            cr_cond_broadcast(&g->cv);
        else
            cr_cond_signal(&s->cv);
    }
    cr_mutex_unlock(&g->lock);
}

static void wake_all(struct cr_lf_pool *p)
{
    for (unsigned i = 0; i < p->ngroups; i++) {
        struct lf_group *g = &p->groups[i];

        /* Under the lock: followers check the flag under it. */
        cr_mutex_lock(&g->lock);
        cr_cond_broadcast(&g->cv);
        for (unsigned j = i; j < p->nslots; j += p->ngroups)
            cr_cond_signal(&p->slots[j].cv);
        cr_mutex_unlock(&g->lock);
    }
}

const struct cr__lf_order_ops cr__lf_order_native = {
    .name = "native",
    .follow = cr__lf_locked_follow,
    .unlead = cr__lf_locked_unlead,
    .kick = cr__lf_locked_kick,
    .wake_all = wake_all,
};

/* Deferred promotion is lifo's alone: a thread back from its event leads
 * again, which is lifo's rule, and which fifo and priority would break. */
const struct cr__lf_order_ops cr__lf_order_lifo = {
    .name = "lifo",
    .follow = cr__lf_locked_follow,
    .unlead = cr__lf_locked_unlead,
    .kick = cr__lf_locked_kick,
    .wake_all = wake_all,
    .defers = true,
};

const struct cr__lf_order_ops cr__lf_order_fifo = {
    .name = "fifo",
    .follow = cr__lf_locked_follow,
    .unlead = cr__lf_locked_unlead,
    .kick = cr__lf_locked_kick,
    .wake_all = wake_all,
};

const struct cr__lf_order_ops cr__lf_order_priority = {
    .name = "priority",
    .follow = cr__lf_locked_follow,
    .unlead = cr__lf_locked_unlead,
    .kick = cr__lf_locked_kick,
    .wake_all = wake_all,
    .ranked = true,
};
