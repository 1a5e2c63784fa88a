/*
 * proactor_dispatch.c - the completion dispatcher: the loop each of the
 * proactor's threads runs (take a completion from its ring, run the token's
 * handler, submit what the handler started), for all three strategies. They
 * share this loop and differ only in who takes completions: single is one
 * thread on one ring, ring-per-thread is each thread alone on its own ring
 * (cr_proactor_create sets the numbers), lf is threads taking turns as leader
 * on one ring (proactor_dispatch_lf.c). Also the submission of a token's
 * operation, which depends on whether a handler of the token runs now.
 * Runs on the proactor's threads and, for submit, any thread. Owns nothing;
 * borrows the tokens.
 *
 * Handlers of one token never run concurrently. Three things could make them:
 * (1) under lf, completions of one multishot accept taken by two threads; so
 * the leader numbers each token's completions as it takes them (seq_taken)
 * and a handler runs only when the previous one returned (seq_served); (2) a
 * handler starting its token's next operation, which could complete on
 * another thread before the handler returns; so such a start is deferred
 * (struct cr__worker.deferred) and submitted when the handler has returned;
 * (3) another thread starting the token's next operation while its final
 * handler still runs (the token is no longer busy then, so that the handler
 * can restart it: a connection's receive handler starting its send, say); so
 * such a start looks for the token in the workers' running slots and hands
 * the operation to that worker (struct cr__worker.handoff), which submits it
 * when the handler has returned. The dispatcher never touches a token after
 * its final handler returns: the handler may have freed it.
 */
#include "demux/proactor_dispatch_internal.h"

/* The dispatcher thread running on this thread, if any. */
static __thread struct cr__worker *self;

unsigned cr_proactor_current_ring(const struct cr_proactor *p)
{
    return self != NULL && self->p == p ? self->ring : 0;
}

bool cr__proactor_is_done(struct cr_proactor *p)
{
    return cr__proactor_is_stopping(p) && __atomic_load_n(&p->inflight, __ATOMIC_SEQ_CST) == 0;
}

void cr__proactor_wake_all(struct cr_proactor *p)
{
    for (unsigned i = 0; i < p->nrings; i++)
        p->eng->wake(&p->rings[i]);
}

/* An operation finished (its final handler returned, or it never started). */
static void op_finished(struct cr_proactor *p)
{
    /* seq_cst: pairs with stop's store of stopping and load of inflight, so
     * one of the two sees the other and wakes the threads. */
    if (__atomic_sub_fetch(&p->inflight, 1, __ATOMIC_SEQ_CST) == 0 && cr__proactor_is_stopping(p))
        cr__proactor_wake_all(p);
}

static void run_handler(struct cr__worker *w, struct cr_aop *op, ssize_t res, unsigned flags)
{
    /* Seq_cst store, then (final) the seq_cst clear of BUSY: a starter whose
     * CAS sees BUSY clear then sees op here (cr__proactor_submit). */
    __atomic_store_n(&w->running, op, __ATOMIC_SEQ_CST);
    if (!(flags & CR_AOP_MORE))
        __atomic_fetch_and(&op->state, ~(CR__AOP_BUSY | CR__AOP_CANCEL), __ATOMIC_SEQ_CST);
    op->handler(op, res, flags);
    /* Seq_cst against hand_off's CAS of handoff then load of running:
     * either it sees op gone, or we see what it handed us. */
    __atomic_store_n(&w->running, NULL, __ATOMIC_SEQ_CST);
}

/* Runs the final handler of op, then submits the operations it deferred. */
static void run_final(struct cr__worker *w, struct cr_aop *op, ssize_t res)
{
    struct cr_proactor *p = w->p;

    for (;;) {
        struct cr_aop *next;
        int err;

        run_handler(w, op, res, 0);
        next = w->deferred;
        w->deferred = NULL;
        if (next == NULL)
            next = __atomic_exchange_n(&w->handoff, NULL, __ATOMIC_SEQ_CST);
        op_finished(p);
        if (next == NULL)
            return;
        err = p->eng->start(&p->rings[next->ring], next);
        if (err == 0)
            return;
        /* The start was accepted: its failure is its completion. */
        op = next;
        res = err;
    }
}

static void dispatch_one(struct cr__worker *w, const struct cr__completion *c, unsigned ticket)
{
    struct cr_proactor *p = w->p;
    struct cr_aop *op = c->op;
    bool ordered = p->dispatch == CR__DISPATCH_LF;

    if (ordered)
        cr__proactor_lf_wait_turn(p, op, ticket);
    if (c->flags & CR_AOP_MORE) {
        /* The operation stays in flight: the token outlives the handler. */
        run_handler(w, op, c->res, c->flags);
        if (ordered)
            cr__proactor_lf_end_turn(p, op, ticket);
        return;
    }
    /* Final: the turn passes before the handler, which may free the token;
     * the token's next operation cannot complete before it returns (a start
     * from the handler is deferred). */
    if (ordered)
        cr__proactor_lf_end_turn(p, op, ticket);
    run_final(w, op, c->res);
}

void *cr__proactor_worker_main(void *arg)
{
    struct cr__worker *w = arg;
    struct cr_proactor *p = w->p;
    struct cr__ring *r = &p->rings[w->ring];

    self = w;
    for (;;) {
        struct cr__completion c;
        unsigned ticket = 0;
        int got;

        if (p->dispatch == CR__DISPATCH_LF) {
            got = cr__proactor_lf_take(p, r, &c, &ticket);
            if (got < 0)
                break;
        } else {
            /* single, ring-per-thread: the ring is this thread's alone. */
            if (cr__proactor_is_done(p))
                break;
            got = p->eng->wait(r, &c);
        }
        if (got)
            dispatch_one(w, &c, ticket);
    }
    self = NULL;
    return NULL;
}

/* The worker, other than the calling thread, that runs op's handler. */
static struct cr__worker *running_elsewhere(struct cr_proactor *p, struct cr_aop *op)
{
    for (unsigned i = 0; i < p->nthreads; i++) {
        struct cr__worker *w = &p->workers[i];

        if (w != self && __atomic_load_n(&w->running, __ATOMIC_SEQ_CST) == op)
            return w;
    }
    return NULL;
}

/* Hands op to w, whose handler of op still runs: true when w will submit
 * it once the handler returns; false when the handler returned meanwhile
 * and op is the caller's to submit. */
static bool hand_off(struct cr__worker *w, struct cr_aop *op)
{
    struct cr_aop *expected = NULL;

    /* One handler per worker, and op is busy: the slot is free. */
    if (!__atomic_compare_exchange_n(&w->handoff, &expected, op, false, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST))
        return false;
    if (__atomic_load_n(&w->running, __ATOMIC_SEQ_CST) == op)
        return true;
    /* The handler returned: take op back, unless w took it already. */
    expected = op;
    return !__atomic_compare_exchange_n(&w->handoff, &expected, NULL, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST);
}

int cr__proactor_submit(struct cr_aop *op)
{
    struct cr_proactor *p = op->p;
    struct cr__worker *w;
    int err;

    __atomic_add_fetch(&p->inflight, 1, __ATOMIC_SEQ_CST);
    cr__aop_publish(op);
    if (self != NULL && self->p == p && __atomic_load_n(&self->running, __ATOMIC_RELAXED) == op) {
        self->deferred = op;
        return 0;
    }
    w = running_elsewhere(p, op);
    if (w != NULL && hand_off(w, op))
        return 0;
    err = p->eng->start(&p->rings[op->ring], op);
    if (err < 0) {
        __atomic_fetch_and(&op->state, ~(CR__AOP_BUSY | CR__AOP_CANCEL), __ATOMIC_RELEASE);
        op_finished(p);
    }
    return err;
}
