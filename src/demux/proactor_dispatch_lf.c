/*
 * proactor_dispatch_lf.c - the lf completion dispatcher's Leader/Followers:
 * the proactor's threads take turns as leader on its one ring; the leader
 * waits for a completion, promotes a follower, then runs the handler as a
 * processing thread. Called by the dispatcher loop (proactor_dispatch.c) on
 * the proactor's threads. Owns nothing; uses the proactor's lf_lock, lf_cv,
 * seq_lock and seq_cv.
 *
 * Why not the L/F pool (src/pool/lf_pool.c): that leader waits in
 * cr_reactor_wait() for readiness, and one-shot handles keep two threads off
 * one handle; this one waits in an engine's wait() for completions, which
 * only one thread may take off a ring (proactor_internal.h), and there is no
 * handle to deactivate: completions of one token (a multishot accept) can
 * reach two threads, so the leader numbers them (seq_taken) and a handler
 * waits for its predecessor (seq_served). lf_pool's promotion orders, hybrid
 * waits and deferred promotion have nothing to act on here.
 */
#include "demux/proactor_dispatch_internal.h"

int cr__proactor_lf_init(struct cr_proactor *p)
{
    int err = cr_mutex_init(&p->lf_lock);

    if (err < 0)
        return err;
    err = cr_mutex_init(&p->seq_lock);
    if (err < 0)
        goto out_lf_lock;
    err = -pthread_cond_init(&p->lf_cv, NULL);
    if (err < 0)
        goto out_seq_lock;
    err = -pthread_cond_init(&p->seq_cv, NULL);
    if (err < 0)
        goto out_lf_cv;
    return 0;

out_lf_cv:
    cr_cond_fini(&p->lf_cv);
out_seq_lock:
    cr_mutex_fini(&p->seq_lock);
out_lf_lock:
    cr_mutex_fini(&p->lf_lock);
    return err;
}

void cr__proactor_lf_fini(struct cr_proactor *p)
{
    cr_cond_fini(&p->seq_cv);
    cr_cond_fini(&p->lf_cv);
    cr_mutex_fini(&p->seq_lock);
    cr_mutex_fini(&p->lf_lock);
}

int cr__proactor_lf_take(struct cr_proactor *p, struct cr__ring *r, struct cr__completion *c,
                         unsigned *ticket)
{
    int got;

    cr_mutex_lock(&p->lf_lock);
    while (p->has_leader && !cr__proactor_is_done(p))
        cr_cond_wait(&p->lf_cv, &p->lf_lock);
    if (cr__proactor_is_done(p)) {
        cr_cond_broadcast(&p->lf_cv);
        cr_mutex_unlock(&p->lf_lock);
        return -1;
    }
    p->has_leader = true;
    cr_mutex_unlock(&p->lf_lock);

    got = p->eng->wait(r, c);
    /* Numbered while still the leader: the ring's order. */
    if (got)
        *ticket = c->op->seq_taken++;

    /* Promote a follower; the caller then runs the handler. */
    cr_mutex_lock(&p->lf_lock);
    p->has_leader = false;
    cr_cond_signal(&p->lf_cv);
    cr_mutex_unlock(&p->lf_lock);
    return got;
}

void cr__proactor_lf_wake_followers(struct cr_proactor *p)
{
    cr_mutex_lock(&p->lf_lock);
    cr_cond_broadcast(&p->lf_cv);
    cr_mutex_unlock(&p->lf_lock);
}

void cr__proactor_lf_wait_turn(struct cr_proactor *p, struct cr_aop *op, unsigned ticket)
{
    /* Acquire: pairs with the release in end_turn, so the previous handler's
     * writes to the token are visible to this one. */
    if (__atomic_load_n(&op->seq_served, __ATOMIC_ACQUIRE) == ticket)
        return;
    __atomic_add_fetch(&p->seq_waiters, 1, __ATOMIC_SEQ_CST);
    cr_mutex_lock(&p->seq_lock);
    while (__atomic_load_n(&op->seq_served, __ATOMIC_ACQUIRE) != ticket)
        cr_cond_wait(&p->seq_cv, &p->seq_lock);
    cr_mutex_unlock(&p->seq_lock);
    __atomic_sub_fetch(&p->seq_waiters, 1, __ATOMIC_SEQ_CST);
}

void cr__proactor_lf_end_turn(struct cr_proactor *p, struct cr_aop *op, unsigned ticket)
{
    __atomic_store_n(&op->seq_served, ticket + 1, __ATOMIC_SEQ_CST);
    /* seq_cst against the waiter's increment of seq_waiters: either it sees
     * the new seq_served under seq_lock or we see it waiting and broadcast
     * under the lock it waits with. */
    if (__atomic_load_n(&p->seq_waiters, __ATOMIC_SEQ_CST) > 0) {
        cr_mutex_lock(&p->seq_lock);
        cr_cond_broadcast(&p->seq_cv);
        cr_mutex_unlock(&p->seq_lock);
    }
}
