/*
 * model_reactor.c - the `reactor` model: one thread waits in one cr_reactor
 * and runs every handler itself (accepting, serving connections, timers).
 * The per-connection work is model_reactive.c's; this file owns the reactor
 * and the thread. A handler that blocks stalls every connection: that is the
 * model's documented limit, not hidden.
 *
 * The thread's role is LISTENER while it waits for events and PROCESSING
 * while it runs a handler; stats read it from any thread.
 */
#include <cabrank/clock.h>
#include <cabrank/log.h>
#include <cabrank/reactor.h>

#include "model/model_internal.h"
#include "model/model_reactive_internal.h"
#include "pool/role_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct cr_model {
    /* Immutable after create. */
    const struct cr_model_env *env;
    struct cr_reactor *r;
    struct cr__reactive *rs;

    /* Owner thread (create, start, wait, destroy). */
    pthread_t thread;
    bool started;
    bool joined;

    /* Written by the loop thread, read by stats (role_internal.h). */
    struct cr__role_clock clock;
};

static void *loop(void *arg)
{
    struct cr_model *m = arg;

    while (!cr_reactor_is_stopped(m->r)) {
        struct cr_reactor_event ev;
        int n;

        cr__role_set(&m->clock, CR_ROLE_LISTENER);
        n = cr_reactor_next(m->r, -1, &ev);
        if (n < 0) {
            CR_LOG(CR_LOG_ERROR, "reactor model: waiting for events: %s", strerror(-n));
            break;
        }
        if (n == 0)
            continue;
        cr__role_set_at(&m->clock, CR_ROLE_PROCESSING, ev.taken_ns);
        cr__role_event(&m->clock);
        cr_reactor_dispatch(m->r, &ev);
    }
    cr__role_set(&m->clock, CR_ROLE_STOPPED);
    return NULL;
}

static void on_stopped(void *arg)
{
    struct cr_model *m = arg;

    cr_reactor_stop(m->r);
}

static int reactor_create(struct cr_model **out, const struct cr_model_env *env)
{
    struct cr__reactive_config cfg = {.env = env, .nreactors = 1, .stopped = on_stopped};
    struct cr_model *m;
    int err;

    *out = NULL;
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return -ENOMEM;
    m->env = env;
    err = cr__role_attach(&m->clock, env->timeline, "reactor");
    if (err < 0)
        goto out_free;
    cr__role_set(&m->clock, CR_ROLE_IDLE); /* idle from create to start */
    err = cr_reactor_create(&m->r, &env->reactor);
    if (err < 0)
        goto out_detach;
    cfg.reactors = &m->r;
    cfg.arg = m;
    err = cr__reactive_create(&m->rs, &cfg);
    if (err < 0)
        goto out_destroy_reactor;
    *out = m;
    return 0;

out_destroy_reactor:
    cr_reactor_destroy(m->r);
out_detach:
    cr__role_detach(&m->clock, env->timeline);
out_free:
    free(m);
    return err;
}

static int reactor_start(struct cr_model *m)
{
    int err = -pthread_create(&m->thread, NULL, loop, m);

    if (err == 0)
        m->started = true;
    return err;
}

static void reactor_stop(struct cr_model *m, bool graceful)
{
    cr__reactive_stop(m->rs, graceful);
}

static int reactor_wait(struct cr_model *m)
{
    if (m->started && !m->joined) {
        int err = -pthread_join(m->thread, NULL);

        if (err < 0)
            return err;
        m->joined = true;
    }
    return 0;
}

static void reactor_destroy(struct cr_model *m)
{
    if (m == NULL)
        return;
    if (m->started && !m->joined) {
        cr__reactive_stop(m->rs, false);
        (void)reactor_wait(m);
    }
    cr__reactive_destroy(m->rs);
    cr_reactor_destroy(m->r);
    cr__role_detach(&m->clock, m->env->timeline);
    free(m);
}

static unsigned reactor_stats(const struct cr_model *m, struct cr_server_stats *st,
                              struct cr_worker_stats *workers, unsigned max)
{
    CR_UNUSED(st);
    if (max >= 1)
        cr__role_read(&m->clock, cr_clock_now_ns(), &workers[0]);
    return 1;
}

const struct cr_model_ops cr__model_reactor_ops = {
    .name = "reactor",
    .create = reactor_create,
    .start = reactor_start,
    .stop = reactor_stop,
    .wait = reactor_wait,
    .destroy = reactor_destroy,
    .stats = reactor_stats,
};
