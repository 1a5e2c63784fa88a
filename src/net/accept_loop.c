/*
 * accept_loop.c - the accepting thread shared by the thread-per-connection
 * and forking models (accept_loop_internal.h): a cr_reactor with one
 * cr_acceptor per listening socket, run by one thread. That is "poll on the
 * listening sockets with a wake-up fd": a stop wakes it through the reactor,
 * and the acceptor's EMFILE back-off and batching are reused rather than
 * written again. Owns the reactor, the acceptors and the thread; borrows the
 * listening sockets. update() comes from any thread (a connection ended, a
 * child reaped); the rest from the owner thread or the loop thread.
 *
 * Lock order: the model's lock, then l->lock, then an acceptor's lock, then
 * the reactor's (acceptor.c). l->lock is never held while a callback runs.
 */
#include <cabrank/acceptor.h>
#include <cabrank/reactor.h>

#include "net/accept_loop_internal.h"
#include "os/sync_internal.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct cr__accept_loop {
    /* Immutable after create. */
    struct cr__accept_loop_config cfg;
    struct cr_reactor *r;
    pthread_t thread;

    /* Owner thread only (start, join, destroy). */
    bool started;
    bool joined;

    /* cfg.nlisten entries. Used under lock while `accepting`; once the loop
     * thread has cleared it (under lock), that thread alone destroys them. */
    struct cr_acceptor **acceptors;

    struct cr_mutex lock;
    /* Protected by lock. */
    bool accepting; /* the acceptors may be paused or resumed */
    bool paused;    /* acceptors paused at the cap */
};

static void on_accept(struct cr_acceptor *a, int fd, void *arg)
{
    struct cr__accept_loop *l = arg;

    CR_UNUSED(a);
    l->cfg.on_accept(l, fd, l->cfg.arg);
}

static void *loop_main(void *arg)
{
    struct cr__accept_loop *l = arg;

    l->cfg.run(l, l->cfg.arg);
    return NULL;
}

int cr__accept_loop_create(struct cr__accept_loop **out, const struct cr__accept_loop_config *cfg)
{
    struct cr_reactor_config rcfg = {.backend = cfg->backend, .batch = 0};
    struct cr__accept_loop *l;
    int err;

    *out = NULL;
    assert(cfg->cap > 0 && cfg->on_accept != NULL && cfg->run != NULL);
    l = calloc(1, sizeof(*l));
    if (l == NULL)
        return -ENOMEM;
    l->cfg = *cfg;
    err = cr_mutex_init(&l->lock);
    if (err < 0) {
        free(l);
        return err;
    }
    /* From here cr__accept_loop_destroy undoes whatever was set up. */
    l->acceptors = calloc(cfg->nlisten > 0 ? cfg->nlisten : 1, sizeof(*l->acceptors));
    if (l->acceptors == NULL) {
        err = -ENOMEM;
        goto out_destroy;
    }
    err = cr_reactor_create(&l->r, &rcfg);
    if (err < 0)
        goto out_destroy;
    for (unsigned i = 0; i < cfg->nlisten; i++) {
        struct cr_acceptor_config acfg = {.listen_fd = cfg->listen_fds[i]};

        err = cr_acceptor_create(&l->acceptors[i], l->r, &acfg, on_accept, l);
        if (err < 0)
            goto out_destroy;
    }
    l->accepting = true;
    *out = l;
    return 0;

out_destroy:
    cr__accept_loop_destroy(l);
    return err;
}

void cr__accept_loop_destroy(struct cr__accept_loop *l)
{
    if (l == NULL)
        return;
    assert(!cr__accept_loop_is_joinable(l));
    /* Joined (or never started): no callback runs. */
    if (l->acceptors != NULL) {
        for (unsigned i = 0; i < l->cfg.nlisten; i++)
            cr_acceptor_destroy(l->acceptors[i]);
    }
    cr_reactor_destroy(l->r);
    free(l->acceptors);
    cr_mutex_fini(&l->lock);
    free(l);
}

struct cr_reactor *cr__accept_loop_reactor(const struct cr__accept_loop *l)
{
    return l->r;
}

int cr__accept_loop_start(struct cr__accept_loop *l)
{
    int err;

    assert(!l->started);
    err = -pthread_create(&l->thread, NULL, loop_main, l);
    if (err < 0)
        return err;
    l->started = true;
    return 0;
}

bool cr__accept_loop_is_joinable(const struct cr__accept_loop *l)
{
    return l->started && !l->joined;
}

bool cr__accept_loop_join(struct cr__accept_loop *l)
{
    if (!cr__accept_loop_is_joinable(l))
        return false;
    pthread_join(l->thread, NULL);
    l->joined = true;
    return true;
}

void cr__accept_loop_update(struct cr__accept_loop *l, unsigned open)
{
    bool full = open >= l->cfg.cap;

    cr_mutex_lock(&l->lock);
    if (l->accepting && full != l->paused) {
        l->paused = full;
        for (unsigned i = 0; i < l->cfg.nlisten; i++) {
            if (full)
                cr_acceptor_pause(l->acceptors[i]);
            else
                cr_acceptor_resume(l->acceptors[i]);
        }
    }
    cr_mutex_unlock(&l->lock);
}

void cr__accept_loop_drop(struct cr__accept_loop *l)
{
    cr_mutex_lock(&l->lock);
    /* update() no longer touches the acceptors once this is false. */
    l->accepting = false;
    cr_mutex_unlock(&l->lock);
    for (unsigned i = 0; i < l->cfg.nlisten; i++) {
        cr_acceptor_destroy(l->acceptors[i]);
        l->acceptors[i] = NULL;
    }
}
