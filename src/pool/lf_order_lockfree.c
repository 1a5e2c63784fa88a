/*
 * lf_order_lockfree.c - the lock-free Leader/Followers promotion order,
 * "lifo-lockfree", after the Apache leader MPM (a CAS'd word and an idle
 * stack, ABA-safe). Called by the loop in lf_pool.c through
 * lf_order_internal.h, on the pool's threads (follow, unlead) and on any
 * thread (kick, wake_all). One reactor per group: shared_followers over
 * several reactors is -EINVAL with this order. The only locks are each
 * slot's own mutex, used by its thread and that thread's waker, and never
 * held while a handler runs. A thread back from its event leads again if the
 * baton is free (lifo's rule, as in lf_order_locked.c).
 *
 * One 64-bit word per group, changed only by CAS:
 *
 *     bits 63..32  tag, +1 on every successful CAS
 *     bit  31      LEADER: the group's reactor has a leader (the "baton")
 *     bit  30      PENDING: a thread is on its way to the baton (the "wake
 *                  token"): a popper resolving a slot, or a woken slot
 *     bits 29..0   top of the idle stack: slot index + 1, 0 = empty
 *
 * plus, per slot, the stack link lf_next (index + 1) and a state (enum
 * slot_state). A rejoining thread either sets LEADER on a word without it
 * (and leads; a PENDING set stays its holder's), or pushes itself on a word
 * with it (and sleeps). A leader giving up its turn clears LEADER; if PENDING
 * is clear and the stack is not empty, the same CAS pops the top slot and
 * sets PENDING. The popper resolves the popped slot with a CAS on its state:
 * IDLE -> PROMOTED (wake it; PENDING is now its) or LEFT -> RUNNING (skip it;
 * pop the next while LEADER stays clear, or drop PENDING once the stack is
 * empty or LEADER is set). A woken slot, once it runs, sets LEADER and clears
 * PENDING (it leads) or, finding LEADER set by a rejoining thread, pushes
 * itself back on top and clears PENDING, in one CAS. A thread whose slot is
 * LEFT re-parks it with LEFT -> IDLE instead of pushing it twice; exactly one
 * of that CAS and the popper's wins (it does not look for a free baton then:
 * the stack is not empty, so LEADER or PENDING is set, I2, and their holders
 * see to it).
 *
 * Proof sketch:
 *  I1 At most one leader per reactor. The baton is the LEADER bit: it is set
 *     only by a CAS that saw it clear (one winner: a rejoining thread or a
 *     woken slot) and cleared only by its holder when its turn ends. Every
 *     thread that calls cr_reactor_next holds the baton (checked at run
 *     time: lf_move_lead's CAS on lead[r] asserts).
 *  I2 LEADER and PENDING both clear => the stack is empty, in every state of
 *     the word. A push needs LEADER set and keeps it; the CASes that can
 *     leave both clear need top == 0 (a leader that finds PENDING clear and
 *     the stack not empty pops instead, setting PENDING; PENDING's holder
 *     drops it with LEADER clear only on an empty stack). So a thread
 *     finishing concurrently cannot push itself believing someone will come
 *     when nobody will: the CASes on the one word are ordered, and whichever
 *     comes second sees the other's result (the "pending" race of the
 *     Apache design, closed with no spinning).
 *  I3 No follower is stranded, and no turn waits for a processing thread.
 *     While the stack is not empty, LEADER or PENDING is set (I2). LEADER's
 *     holder gives it up after its next event, or on stop, timeout or
 *     notify, always through unlead, which pops (taking PENDING) or leaves
 *     the stack to PENDING's holder. PENDING's holder is a running popper
 *     (pass_pending: each step wakes an IDLE slot, removes a LEFT one, or
 *     drops PENDING under a set LEADER or on an empty stack), or a PROMOTED
 *     slot whose thread was signalled after its state changed (no lost
 *     wake-up: the waker takes the sleeper's mutex, under which the sleeper
 *     checks its state) and, once running, leads or pushes itself under a
 *     set LEADER. So a turn given up while followers sleep is taken by a
 *     thread that is runnable, never one inside a handler. LEFT slots are
 *     skipped, so a follower that went away never holds a token. Stop wakes
 *     every slot and every reactor.
 *  I4 No ABA. A popper reads top and top's lf_next, then CASes. Were top
 *     popped and pushed again meanwhile (with another lf_next), each of those
 *     changes was a successful CAS that incremented the tag, so the popper's
 *     CAS fails and it retries; likewise a push or a flag change over a word
 *     that went A -> B -> A. The 32-bit tag would have to wrap exactly (2^32
 *     successful CAS) inside one load-CAS window. (Here only PENDING's holder
 *     pops - a leader pops only in the CAS that sets PENDING - so that
 *     interleaving cannot even be built today; the tag keeps the word safe
 *     without leaning on that.)
 */
#include "pool/lf_order_internal.h"
#include "pool/lf_pool_internal.h"

#include <assert.h>

/* The group word. */
#define LF_TOP_MASK UINT64_C(0x3fffffff)
#define LF_PENDING  (UINT64_C(1) << 30)
#define LF_LEADER   (UINT64_C(1) << 31)
#define LF_FLAGS    (LF_LEADER | LF_PENDING)
#define LF_TAG_ONE  (UINT64_C(1) << 32)

/*
 * Where a slot is relative to its group's idle stack (lf_slot.state).
 * RUNNING -> IDLE by the thread before its push CAS (relaxed: published by
 * that acq_rel CAS); IDLE -> PROMOTED and LEFT -> RUNNING by a popper,
 * IDLE -> LEFT and LEFT -> IDLE by the thread, all acq_rel CAS pairing with
 * one another; PROMOTED -> RUNNING by the thread (relaxed: nobody else looks
 * at a popped slot), before it leads or pushes itself again.
 */
enum slot_state {
    SLOT_RUNNING = 0, /* not on the stack (calloc'd slots start here) */
    SLOT_IDLE,        /* on the stack, its thread asleep on its mutex and cv */
    SLOT_LEFT,        /* on the stack, but its thread went away (notified,
                         timed out or stopping) */
    SLOT_PROMOTED,    /* popped and woken: it holds PENDING */
};

/* The next word after old: tag + 1, the given LEADER and PENDING bits, top. */
static uint64_t word_next(uint64_t old, uint64_t flags, uint64_t top)
{
    uint64_t tag = (old & ~(LF_TOP_MASK | LF_FLAGS)) + LF_TAG_ONE; /* wraps */

    assert(top <= LF_TOP_MASK);
    assert((flags & ~LF_FLAGS) == 0);
    return tag | flags | top;
}

static bool cas_word(struct lf_group *g, uint64_t *old, uint64_t new)
{
    /* acq_rel pairs with the previous CAS on the word (a release sequence:
     * every change is an RMW); on failure, acquire like the initial load. */
    return __atomic_compare_exchange_n(&g->word, old, new, false, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE);
}

/*
 * Takes LEADER if it is clear (true: s leads), else pushes s on the idle
 * stack (false: s must sleep). `pending`: s holds PENDING (a woken slot),
 * which either CAS gives up. Slot s is RUNNING, off the stack.
 */
static bool lead_or_push(struct lf_group *g, struct lf_slot *s, bool pending)
{
    /* acquire pairs with the last CAS on the word (see cas_word). */
    uint64_t old = __atomic_load_n(&g->word, __ATOMIC_ACQUIRE);

    for (;;) {
        uint64_t top = old & LF_TOP_MASK;
        /* What stays set besides our change: a rejoining thread leaves a
         * woken slot's PENDING alone; a woken slot drops its own. */
        uint64_t keep = pending ? 0 : (old & LF_PENDING);

        assert(!pending || (old & LF_PENDING) != 0);
        if ((old & LF_LEADER) == 0) {
            /* I2: no baton and nobody on the way => nobody on the stack. */
            assert((old & LF_PENDING) != 0 || top == 0);
            if (cas_word(g, &old, word_next(old, LF_LEADER | keep, top)))
                return true;
            continue;
        }
        /* Relaxed: published by the release half of the push CAS. */
        __atomic_store_n(&s->lf_next, top, __ATOMIC_RELAXED);
        __atomic_store_n(&s->state, SLOT_IDLE, __ATOMIC_RELAXED);
        if (cas_word(g, &old, word_next(old, LF_LEADER | keep, s->idx + 1)))
            return false;
    }
}

int cr__lf_lockfree_follow(struct cr_lf_pool *p, struct lf_slot *s, const struct lf_frame *f,
                           unsigned *r_out, uint64_t *led_at)
{
    struct lf_group *g = &p->groups[s->group];
    uint32_t st = SLOT_LEFT;
    int reason;

    reason = lf_leave_reason(p, f);
    if (reason != LF_STAY)
        return reason;
    /* Still on the stack from a frame that ended: park there again. acq_rel
     * pairs with a popper's LEFT -> RUNNING; exactly one of the two wins. */
    if (!__atomic_compare_exchange_n(&s->state, &st, SLOT_IDLE, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        assert(st == SLOT_RUNNING);
        if (lead_or_push(g, s, false))
            goto out_lead;
    }
    cr__role_set(&s->clock, CR_ROLE_FOLLOWER);
    for (;;) {
        cr_mutex_lock(&s->mu);
        for (;;) {
            /* acquire pairs with the popper's IDLE -> PROMOTED CAS. */
            st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
            if (st == SLOT_PROMOTED)
                break;
            reason = lf_leave_reason(p, f);
            if (reason != LF_STAY)
                break;
            lf_wait_on(&s->cv, &s->mu, f->deadline);
        }
        cr_mutex_unlock(&s->mu);
        if (st != SLOT_PROMOTED) {
            /* Going away, but the slot stays on the stack: mark it LEFT so a
             * popper skips it. Losing the race means we were just woken:
             * resolve the turn first (the leader loop gives it up properly). */
            st = SLOT_IDLE;
            if (__atomic_compare_exchange_n(&s->state, &st, SLOT_LEFT, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                return reason;
            assert(st == SLOT_PROMOTED);
        }
        /* Woken with PENDING: popped, so off the stack; relaxed, nobody else
         * looks at a popped slot. Lead if the baton is free, else a thread
         * ahead of us in LIFO order took it: back on the stack, on top. */
        __atomic_store_n(&s->state, SLOT_RUNNING, __ATOMIC_RELAXED);
        if (lead_or_push(g, s, true))
            break;
    }
out_lead:
    /* Relaxed: off the stack (popped, or never pushed after a failed push
     * CAS left it IDLE), nobody else looks at it. */
    __atomic_store_n(&s->state, SLOT_RUNNING, __ATOMIC_RELAXED);
    lf_move_lead(p, g->first, LF_NO_SLOT, (int)s->idx);
    /* seq_cst: the first half of the Dekker pair with cr_lf_pool_notify. */
    __atomic_store_n(&s->leading, (int)g->first, __ATOMIC_SEQ_CST);
    lf_stamp_leader(s, led_at);
    *r_out = g->first;
    return LF_STAY;
}

/* Wakes popped slot f if its thread still waits: true, and PENDING is now
 * f's. false: f's thread went away (LEFT), f is off the stack. */
static bool hand_over(struct lf_group *g, struct lf_slot *f)
{
    /* acquire pairs with f's thread's IDLE -> LEFT CAS, or with its push CAS
     * that published IDLE. */
    uint32_t st = __atomic_load_n(&f->state, __ATOMIC_ACQUIRE);

    for (;;) {
        if (st == SLOT_IDLE) {
            /* acq_rel pairs with the thread's IDLE -> LEFT and its acquire
             * load of the state. */
            if (__atomic_compare_exchange_n(&f->state, &st, SLOT_PROMOTED, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                /* Taking its mutex after the state change orders us after
                 * its check of the state (it checks under the mutex): no
                 * lost wake-up. Signalled once released, so that it does
                 * not wake only to block on the mutex. */
                cr_mutex_lock(&f->mu);
                cr_mutex_unlock(&f->mu);
                cr_cond_signal(&f->cv);
                __atomic_fetch_add(&g->promotions, 1, __ATOMIC_RELAXED);
                return true;
            }
        } else {
            assert(st == SLOT_LEFT);
            /* Off the stack now: its thread must push it again. */
            if (__atomic_compare_exchange_n(&f->state, &st, SLOT_RUNNING, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                return false;
        }
    }
}

/*
 * We hold PENDING and have popped f: wake it, passing PENDING on. If its
 * thread went away, pop the next one while the baton stays free; drop
 * PENDING once the stack is empty or a leader holds the baton (the stack is
 * its business then, I2).
 */
static void pass_pending(struct cr_lf_pool *p, struct lf_group *g, struct lf_slot *f)
{
    while (!hand_over(g, f)) {
        /* acquire (here and in each failed CAS) pairs with the last CAS. */
        uint64_t old = __atomic_load_n(&g->word, __ATOMIC_ACQUIRE);

        for (;;) {
            uint64_t top = old & LF_TOP_MASK;
            uint64_t next;

            assert((old & LF_PENDING) != 0); /* ours */
            if ((old & LF_LEADER) != 0 || top == 0) {
                if (cas_word(g, &old, word_next(old, old & LF_LEADER, top)))
                    return;
                continue;
            }
            f = lf_slot_at(p, (uint32_t)top);
            /* Relaxed: see lf_next; a stale value fails the CAS (I4). */
            next = __atomic_load_n(&f->lf_next, __ATOMIC_RELAXED);
            if (cas_word(g, &old, word_next(old, LF_PENDING, next)))
                break;
        }
    }
}

/* Clears LEADER; if nobody is on the way (PENDING clear) and the stack is not
 * empty, pops its top in the same CAS, taking PENDING, and wakes it. ev plays
 * no part: there is no deferred promotion with this order. */
void cr__lf_lockfree_unlead(struct cr_lf_pool *p, struct lf_slot *s, unsigned r,
                            const struct cr_reactor_event *ev)
{
    struct lf_group *g = &p->groups[s->group];
    struct lf_slot *f;
    uint64_t old;

    (void)ev;
    /* seq_cst: see the Dekker pair with cr_lf_pool_notify. */
    __atomic_store_n(&s->leading, -1, __ATOMIC_SEQ_CST);
    lf_move_lead(p, r, (int)s->idx, LF_NO_SLOT);
    /* acquire (here and in each failed CAS) pairs with the last CAS. */
    old = __atomic_load_n(&g->word, __ATOMIC_ACQUIRE);
    for (;;) {
        uint64_t top = old & LF_TOP_MASK;

        assert((old & LF_LEADER) != 0); /* we hold the baton */
        if ((old & LF_PENDING) != 0 || top == 0) {
            if (cas_word(g, &old, word_next(old, old & LF_PENDING, top)))
                return;
            continue;
        }
        f = lf_slot_at(p, (uint32_t)top);
        /* Relaxed: see lf_next; a stale value fails the CAS (I4). */
        if (cas_word(g, &old,
                     word_next(old, LF_PENDING, __atomic_load_n(&f->lf_next, __ATOMIC_RELAXED))))
            break;
    }
    pass_pending(p, g, f);
}

void cr__lf_lockfree_kick(struct cr_lf_pool *p, struct lf_slot *s)
{
    (void)p;
    /* Under its mutex: the sleeper checks its frame under it. */
    cr_mutex_lock(&s->mu);
    cr_cond_signal(&s->cv);
    cr_mutex_unlock(&s->mu);
}

static void wake_all(struct cr_lf_pool *p)
{
    for (unsigned j = 0; j < p->nslots; j++)
        cr__lf_lockfree_kick(p, &p->slots[j]);
}

const struct cr__lf_order_ops cr__lf_order_lockfree = {
    .name = "lifo-lockfree",
    .follow = cr__lf_lockfree_follow,
    .unlead = cr__lf_lockfree_unlead,
    .kick = cr__lf_lockfree_kick,
    .wake_all = wake_all,
    .one_reactor_group = true,
};
