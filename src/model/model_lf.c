/*
 * model_lf.c - the `lf` model: a Leader/Followers thread pool (lf_pool.c)
 * over one or more cr_reactors (`groups`), serving connections with the
 * per-connection logic of model_reactive.c. The leader of a reactor takes one
 * event, promotes a follower, and handles the event itself: it reads the
 * request into its thread's buffer and answers it on the same thread, so no
 * request is handed between threads, allocated or queued.
 *
 * With groups > 1 over listeners it opened itself, cr_server opens each
 * address once per group with SO_REUSEPORT (env->listen_groups), and each
 * reactor accepts on its own copies: the kernel spreads new connections
 * over the groups, and no two leaders wake for one connection. Over
 * inherited sockets every reactor accepts on every socket.
 *
 * Owns the reactors, the pool and the reactive connection set; borrows the
 * env. Runs on the pool's threads; create, start, wait and destroy on the
 * owner thread.
 */
#include <cabrank/lf_pool.h>
#include <cabrank/log.h>
#include <cabrank/reactor.h>

#include "model/model_internal.h"
#include "model/model_reactive_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_GROUPS CR_SERVER_MAX_GROUPS

_Static_assert(MAX_GROUPS ==
                   sizeof(((struct cr_server_stats *)0)->group_accepted) / sizeof(uint64_t),
               "cr_server_stats reports every group");

struct cr_model {
    /* Immutable after create. */
    const struct cr_model_env *env;
    struct cr_reactor *reactors[MAX_GROUPS];
    unsigned nreactors;
    struct cr__reactive *rs;
    struct cr_lf_pool *pool;

    /* Owner thread. */
    bool started;
    bool joined;
};

/* Which worker the calling thread is, for cr_conn_worker(). */
static unsigned lf_worker(void *arg)
{
    const struct cr_model *m = arg;
    int self = cr_lf_pool_self(m->pool);

    return self >= 0 ? (unsigned)self : 0;
}

/* The reactive set finished its stop: let the threads leave. */
static void on_stopped(void *arg)
{
    struct cr_model *m = arg;

    cr_lf_pool_stop(m->pool);
}

static int lf_create(struct cr_model **out, const struct cr_model_env *env)
{
    const struct cr_server_config *c = env->cfg;
    struct cr__reactive_config rscfg = {.env = env, .worker = lf_worker, .stopped = on_stopped};
    struct cr_lf_pool_config pcfg = {
        .threads = (unsigned)c->threads,
        .promotion = c->promotion,
        .shared_followers = c->multiple_leaders,
        .promotion_delay_us = c->promotion_delay_us,
        .timeline = env->timeline,
    };
    struct cr_model *m;
    int err;

    *out = NULL;
    if (c->groups < 1 || c->groups > MAX_GROUPS || c->groups > c->threads)
        return -EINVAL; /* every handle set needs a thread to lead it */
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return -ENOMEM;
    m->env = env;
    for (m->nreactors = 0; m->nreactors < (unsigned)c->groups; m->nreactors++) {
        err = cr_reactor_create(&m->reactors[m->nreactors], &env->reactor);
        if (err < 0)
            goto out_destroy_reactors;
    }
    pcfg.reactors = m->reactors;
    pcfg.nreactors = m->nreactors;
    err = cr_lf_pool_create(&m->pool, &pcfg);
    if (err < 0)
        goto out_destroy_reactors;
    rscfg.reactors = m->reactors;
    rscfg.nreactors = m->nreactors;
    rscfg.arg = m;
    err = cr__reactive_create(&m->rs, &rscfg);
    if (err < 0)
        goto out_destroy_pool;
    *out = m;
    return 0;

out_destroy_pool:
    cr_lf_pool_destroy(m->pool);
out_destroy_reactors:
    while (m->nreactors > 0)
        cr_reactor_destroy(m->reactors[--m->nreactors]);
    free(m);
    return err;
}

static int lf_start(struct cr_model *m)
{
    int err = cr_lf_pool_start(m->pool);

    if (err == 0)
        m->started = true;
    return err;
}

static void lf_stop(struct cr_model *m, bool graceful)
{
    cr__reactive_stop(m->rs, graceful);
}

static int lf_wait(struct cr_model *m)
{
    if (m->started && !m->joined) {
        int err = cr_lf_pool_join_all(m->pool);

        m->joined = true;
        if (err < 0) {
            CR_LOG(CR_LOG_ERROR, "lf model: a leader's wait failed: %s", strerror(-err));
            return err;
        }
    }
    return 0;
}

static void lf_destroy(struct cr_model *m)
{
    if (m == NULL)
        return;
    if (m->started && !m->joined) {
        cr__reactive_stop(m->rs, false);
        (void)lf_wait(m);
    }
    /* No thread dispatches any more: connections and acceptors can go. */
    cr__reactive_destroy(m->rs);
    cr_lf_pool_destroy(m->pool);
    while (m->nreactors > 0)
        cr_reactor_destroy(m->reactors[--m->nreactors]);
    free(m);
}

static unsigned lf_stats(const struct cr_model *m, struct cr_server_stats *st,
                         struct cr_worker_stats *workers, unsigned max)
{
    st->groups = m->nreactors;
    for (unsigned g = 0; g < m->nreactors; g++)
        st->group_accepted[g] = cr__reactive_accepted(m->rs, g);
    cr_lf_pool_deferrals(m->pool, &st->deferred, &st->taken_over);
    return cr_lf_pool_stats(m->pool, &st->promotions, workers, max);
}

const struct cr_model_ops cr__model_lf_ops = {
    .name = "lf",
    .create = lf_create,
    .start = lf_start,
    .stop = lf_stop,
    .wait = lf_wait,
    .destroy = lf_destroy,
    .stats = lf_stats,
};
