/*
 * lf_bound.c - Leader/Followers of the bound pool's standalone mode (POSA2
 * Leader/Followers, Variants: Bound_LF_Thread_Pool; bound_pool.h): the
 * threads that wait for replies on one multiplexed connection take turns as
 * its leader. The leader polls the connection, reads, and hands each reply
 * to the thread that waits for it; when its own reply has come it promotes
 * the oldest follower (FIFO) and returns. Runs on the callers' threads,
 * inside cr_bound_pool_join, under the pool's lock but for the poll and the
 * read. Owns nothing: the leader and the follower queue live in struct
 * cr_bound_pool (bound_pool_internal.h).
 *
 * Why not lf_pool.c: there the threads are the pool's own, loop for ever
 * over a reactor of many handles, and the leader's event goes to whichever
 * thread it promotes (unbound). Here the threads are borrowed callers, one
 * request each; every reply is bound to one waiting thread and handed to it
 * alone (specific notification, its own condition variable); a thread leads
 * only until its own reply comes; and the leader waits in poll() on one fd
 * and an eventfd, with the caller's deadline, not in cr_reactor_wait. The
 * hybrid mode needs none of this: it waits in the lf pool itself
 * (cr_lf_pool_wait, in bound_pool.c).
 *
 * Invariants, under the pool's lock: p->leader is the one thread that polls
 * and reads; a follower is queued (FIFO) only while it sleeps in join.
 * Promotion sets p->leader to the follower before waking it, so no newcomer
 * slips in between.
 */
#include "pool/bound_pool_internal.h"

#include <poll.h>
#include <unistd.h>

static void enqueue_follower(struct cr_bound_pool *p, struct cr_bound_ctx *c)
{
    cr_mutex_assert_held(&p->lock);
    assert(!c->queued);
    c->fnext = NULL;
    c->fprev = p->ftail;
    if (p->ftail != NULL)
        p->ftail->fnext = c;
    else
        p->fhead = c;
    p->ftail = c;
    c->queued = true;
    p->st.followers++;
}

void cr__lf_bound_dequeue(struct cr_bound_pool *p, struct cr_bound_ctx *c)
{
    cr_mutex_assert_held(&p->lock);
    assert(c->queued);
    if (c->fprev != NULL)
        c->fprev->fnext = c->fnext;
    else
        p->fhead = c->fnext;
    if (c->fnext != NULL)
        c->fnext->fprev = c->fprev;
    else
        p->ftail = c->fprev;
    c->fnext = NULL;
    c->fprev = NULL;
    c->queued = false;
    p->st.followers--;
}

/*
 * The leader leaves its role: the oldest follower becomes leader and is woken
 * on its own condition variable (the paper's step (c), FIFO order).
 */
static void step_down(struct cr_bound_pool *p, struct cr_bound_ctx *self)
{
    struct cr_bound_ctx *f = p->fhead;

    cr_mutex_assert_held(&p->lock);
    assert(p->leader == self);
    (void)self;
    p->leader = NULL;
    if (f == NULL)
        return;
    cr__lf_bound_dequeue(p, f);
    f->promoted = true;
    p->leader = f;
    p->st.promotions++;
    cr_cond_signal(&f->cond);
}

/*
 * One turn of the leader, outside the lock: waits up to the deadline for the
 * connection (or the wake-up) and reads what is there. 0, or the error that
 * ends the connection.
 */
static int lead_once(struct cr_bound_pool *p, struct conn *conn, uint64_t deadline)
{
    struct pollfd pfd[2] = {
        {.fd = conn->fd, .events = POLLIN},
        {.fd = p->wake_fd, .events = POLLIN},
    };
    int rc = poll(pfd, 2, bound_remaining_ms(deadline));
    int err = 0;

    if (rc < 0)
        return errno == EINTR || errno == ENOMEM ? 0 : -errno;
    if (pfd[1].revents != 0) {
        uint64_t v;

        (void)!read(p->wake_fd, &v, sizeof(v));
    }
    if (pfd[0].revents != 0)
        err = cr__bound_pool_read_input(p, conn);
    return err < 0 ? err : 0;
}

/*
 * The leader's loop (the paper's join, leader part): reads and hands off
 * replies until its own has come, its deadline passed or the connection
 * failed, then promotes a follower. Stores the error of a failure it
 * detected in *report. Caller holds lock and is p->leader.
 */
static void lead(struct cr_bound_pool *p, struct cr_bound_ctx *c, uint64_t deadline, int *report)
{
    cr_mutex_assert_held(&p->lock);
    assert(p->leader == c);
    c->promoted = false;
    while (c->state == CTX_REGISTERED) {
        struct conn *conn = p->conn;
        int err;

        assert(conn != NULL);
        conn->refs++;
        cr_mutex_unlock(&p->lock);
        /* At least one pass, even past the deadline: a zero timeout still
         * takes a reply that is already there. */
        err = lead_once(p, conn, deadline);
        cr_mutex_lock(&p->lock);
        if (err != 0 && cr__bound_pool_fail_locked(p, conn, err))
            *report = err;
        cr__bound_pool_conn_put(p, conn);
        if (c->state == CTX_REGISTERED && bound_deadline_passed(deadline))
            cr__bound_pool_expire(p, c);
    }
    step_down(p, c);
}

void cr__lf_bound_join(struct cr_bound_pool *p, struct cr_bound_ctx *c, uint64_t deadline,
                       int *report)
{
    for (;;) {
        int rc = 0;

        if (c->state == CTX_DONE) {
            /* Completed (by a failure) just as it was promoted: pass the
             * leadership on. */
            if (c->promoted) {
                c->promoted = false;
                step_down(p, c);
            }
            return;
        }
        if (c->promoted || p->leader == NULL) {
            p->leader = c;
            lead(p, c, deadline, report);
            continue;
        }
        enqueue_follower(p, c);
        c->wait_mode = WAIT_COND;
        while (c->state == CTX_REGISTERED && !c->promoted && rc != -ETIMEDOUT)
            rc = bound_cond_wait(&c->cond, &p->lock, deadline);
        c->wait_mode = WAIT_NONE;
        if (c->queued)
            cr__lf_bound_dequeue(p, c);
        if (c->state == CTX_REGISTERED && !c->promoted)
            cr__bound_pool_expire(p, c);
        /* Promoted: leads now, even past its deadline (lead() expires it and
         * promotes the next follower). */
    }
}
