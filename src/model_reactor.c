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

#include "model_internal.h"
#include "model_reactive_internal.h"

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

    /* Written by the loop thread, read by stats: relaxed atomics. */
    int role;
    uint64_t events;
    uint64_t role_since;
    uint64_t role_ns[CR_ROLE_COUNT];
};

/* Moves the loop thread to role, charging the time to the previous one. */
static void set_role(struct cr_model *m, enum cr_role role)
{
    uint64_t now = cr_clock_now_ns();
    int old = __atomic_load_n(&m->role, __ATOMIC_RELAXED);
    uint64_t since = __atomic_load_n(&m->role_since, __ATOMIC_RELAXED);

    __atomic_fetch_add(&m->role_ns[old], now - since, __ATOMIC_RELAXED);
    __atomic_store_n(&m->role_since, now, __ATOMIC_RELAXED);
    __atomic_store_n(&m->role, (int)role, __ATOMIC_RELAXED);
}

static void *loop(void *arg)
{
    struct cr_model *m = arg;

    while (!cr_reactor_is_stopped(m->r)) {
        struct cr_reactor_event ev;
        int n;

        set_role(m, CR_ROLE_LISTENER);
        n = cr_reactor_next(m->r, -1, &ev);
        if (n < 0) {
            CR_LOG(CR_LOG_ERROR, "reactor model: waiting for events: %s", strerror(-n));
            break;
        }
        if (n == 0)
            continue;
        set_role(m, CR_ROLE_PROCESSING);
        __atomic_fetch_add(&m->events, 1, __ATOMIC_RELAXED);
        cr_reactor_dispatch(m->r, &ev);
    }
    set_role(m, CR_ROLE_STOPPED);
    return NULL;
}

static void on_stopped(void *arg)
{
    struct cr_model *m = arg;

    cr_reactor_stop(m->r);
}

static int reactor_create(struct cr_model **out, const struct cr_model_env *env)
{
    struct cr_reactor_config rcfg = {.backend = env->cfg->backend};
    struct cr__reactive_config cfg = {.env = env, .nreactors = 1, .stopped = on_stopped};
    struct cr_model *m;
    int err;

    *out = NULL;
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return -ENOMEM;
    m->env = env;
    m->role = CR_ROLE_IDLE;
    m->role_since = cr_clock_now_ns();
    err = cr_reactor_create(&m->r, &rcfg);
    if (err < 0)
        goto out_free;
    cfg.reactors = &m->r;
    cfg.arg = m;
    err = cr__reactive_create(&m->rs, &cfg);
    if (err < 0)
        goto out_destroy_reactor;
    *out = m;
    return 0;

out_destroy_reactor:
    cr_reactor_destroy(m->r);
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
    free(m);
}

static unsigned reactor_stats(const struct cr_model *m, struct cr_server_stats *st,
                              struct cr_worker_stats *workers, unsigned max)
{
    CR_UNUSED(st);
    if (max >= 1) {
        struct cr_worker_stats *w = &workers[0];
        int role = __atomic_load_n(&m->role, __ATOMIC_RELAXED);
        uint64_t since = __atomic_load_n(&m->role_since, __ATOMIC_RELAXED);
        uint64_t now = cr_clock_now_ns();

        memset(w, 0, sizeof(*w));
        w->role = (enum cr_role)role;
        w->events = __atomic_load_n(&m->events, __ATOMIC_RELAXED);
        for (int i = 0; i < CR_ROLE_COUNT; i++)
            w->role_ns[i] = __atomic_load_n(&m->role_ns[i], __ATOMIC_RELAXED);
        if (now > since)
            w->role_ns[role] += now - since;
    }
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
