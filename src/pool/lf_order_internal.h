/*
 * lf_order_internal.h - the promotion-order interface of the Leader/Followers
 * pool: how followers wait and how a leader hands its turn on. One const
 * struct cr__lf_order_ops per order, defined by the file that implements it
 * (lf_order_locked.c: native, lifo, fifo, priority; lf_order_lockfree.c:
 * lifo-lockfree); cr_lf_pool_create picks one by name, as handle_set.c picks
 * a backend. Only lf_pool.c calls through it, by the wrappers there.
 * Library-internal.
 */
#ifndef CABRANK_LF_ORDER_INTERNAL_H
#define CABRANK_LF_ORDER_INTERNAL_H

#include "pool/lf_pool_internal.h"

struct cr__lf_order_ops {
    const char *name; /* as cr_lf_pool_config.promotion names it */
    /* Rejoin the group (POSA2 implementation activity 4): lead a reactor s
     * may take at once, else wait as a follower until woken for a turn that
     * is still free, or the frame ends. LF_STAY with *r and *led_at
     * (lf_stamp_leader) when s now leads, else why the frame ends. Pool
     * thread s. */
    int (*follow)(struct cr_lf_pool *p, struct lf_slot *s, const struct lf_frame *f, unsigned *r,
                  uint64_t *led_at);
    /* End s's turn as leader of r (activity 5), before s dispatches ev
     * (NULL: s leaves, and will not be back to lead): a follower, or the
     * next thread to rejoin, takes r. Pool thread s, leader of r. */
    void (*unlead)(struct cr_lf_pool *p, struct lf_slot *s, unsigned r,
                   const struct cr_reactor_event *ev);
    /* Wake s if it follows, to re-check its frame (cr_lf_pool_notify).
     * Thread-safe. */
    void (*kick)(struct cr_lf_pool *p, struct lf_slot *s);
    /* Wake every follower to see the pool stopping. Thread-safe. */
    void (*wake_all)(struct cr_lf_pool *p);

    /* What cr_lf_pool_create accepts with this order. */
    bool defers;            /* promotion_delay_us (lf_deferred.c) */
    bool ranked;            /* cr_lf_pool_config.priorities */
    bool one_reactor_group; /* no shared_followers over several reactors */
};

extern const struct cr__lf_order_ops cr__lf_order_native;
extern const struct cr__lf_order_ops cr__lf_order_lifo;
extern const struct cr__lf_order_ops cr__lf_order_fifo;
extern const struct cr__lf_order_ops cr__lf_order_priority;
extern const struct cr__lf_order_ops cr__lf_order_lockfree;

/* The operations behind the tables, named so that lf_pool.c can call them
 * directly on the request path (see its wrappers). */
int cr__lf_locked_follow(struct cr_lf_pool *p, struct lf_slot *s, const struct lf_frame *f,
                         unsigned *r, uint64_t *led_at);
void cr__lf_locked_unlead(struct cr_lf_pool *p, struct lf_slot *s, unsigned r,
                          const struct cr_reactor_event *ev);
void cr__lf_locked_kick(struct cr_lf_pool *p, struct lf_slot *s);
int cr__lf_lockfree_follow(struct cr_lf_pool *p, struct lf_slot *s, const struct lf_frame *f,
                           unsigned *r, uint64_t *led_at);
void cr__lf_lockfree_unlead(struct cr_lf_pool *p, struct lf_slot *s, unsigned r,
                            const struct cr_reactor_event *ev);
void cr__lf_lockfree_kick(struct cr_lf_pool *p, struct lf_slot *s);

/* Locked orders, for lf_deferred.c: offers leaderless reactor r of group g
 * to its first follower unless one is on its way; returns the slot to wake
 * once g's lock is released, or NULL. Caller holds g->lock. */
struct lf_slot *cr__lf_offer_turn(struct cr_lf_pool *p, struct lf_group *g, unsigned r);

/* Wakes a follower cr__lf_offer_turn chose (NULL: nobody). Outside the group
 * lock, so that the woken thread does not run only to block on it; safe
 * because the follower re-checks `promoted` under the lock before each wait. */
static inline void cr__lf_wake_pending(struct lf_slot *f)
{
    if (f != NULL)
        cr_cond_signal(&f->cv);
}

#endif /* CABRANK_LF_ORDER_INTERNAL_H */
