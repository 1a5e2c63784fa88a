/*
 * proactor.c - the Proactor's lifecycle: configuration, the choice of engine
 * (io_uring, or the emulated engine with one log line when io_uring cannot
 * be used), and the dispatcher threads' start, stop and join. Called by the
 * proactor model and any application, from its owner thread (stop: any
 * thread). Owns the rings (engine instances) and the threads.
 *
 * The rest of the common part: the completion dispatchers in
 * proactor_dispatch.c (single, ring-per-thread) and proactor_dispatch_lf.c
 * (lf), the completion tokens in proactor_token.c; the engines in
 * proactor_uring.c and proactor_emulated.c.
 */
#include "demux/proactor_dispatch_internal.h"

#include <cabrank/cpu.h>
#include <cabrank/log.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const dispatch_names[] = {
    [CR__DISPATCH_SINGLE] = "single",
    [CR__DISPATCH_LF] = "lf",
    [CR__DISPATCH_RING_PER_THREAD] = "ring-per-thread",
};

bool cr__proactor_is_stopping(const struct cr_proactor *p)
{
    /* Pairs with the seq_cst exchange in cr_proactor_stop. */
    return __atomic_load_n(&p->stopping, __ATOMIC_SEQ_CST) != 0;
}

static bool is_uring_disabled_by_env(void)
{
    const char *v = getenv("CABRANK_URING_DISABLE");

    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

/* Opens every ring with eng; on failure closes those opened. */
static int open_rings(struct cr_proactor *p, const struct cr__engine_ops *eng,
                      const struct cr_proactor_config *cfg, const char **why)
{
    int err = 0;
    unsigned i;

    for (i = 0; i < p->nrings; i++) {
        p->rings[i].p = p;
        p->rings[i].index = i;
        p->rings[i].engine = NULL;
        err = eng->open(&p->rings[i], cfg, why);
        if (err < 0)
            break;
    }
    if (err == 0) {
        p->eng = eng;
        return 0;
    }
    while (i-- > 0)
        eng->close(&p->rings[i]);
    return err;
}

/* Picks the engine: the one asked for, or uring where it works, else the
 * emulated engine, saying why once. */
static int open_engine(struct cr_proactor *p, const struct cr_proactor_config *cfg)
{
    const char *asked = cfg->engine;
    const char *why = NULL;
    int err;

    if (asked != NULL && strcmp(asked, "emulated") == 0)
        return open_rings(p, &cr__proactor_emulated_ops, cfg, &why);
    if (asked != NULL && strcmp(asked, "uring") != 0)
        return -EINVAL;
    if (is_uring_disabled_by_env()) {
        err = -ENOSYS;
        why = "CABRANK_URING_DISABLE is set";
    } else {
#ifdef CR_HAVE_LIBURING
        err = open_rings(p, &cr__proactor_uring_ops, cfg, &why);
        if (err == 0)
            return 0;
#else
        err = -ENOSYS;
        why = "built without liburing";
#endif
    }
    if (asked != NULL)
        return -ENOSYS;
    CR_LOG(CR_LOG_WARN, "proactor: io_uring cannot be used (%s: %s); using the emulated engine",
           why != NULL ? why : "io_uring_queue_init() failed", strerror(-err));
    return open_rings(p, &cr__proactor_emulated_ops, cfg, &why);
}

static int parse_dispatch(const char *name, enum cr__dispatch *out)
{
    if (name == NULL) {
        *out = CR__DISPATCH_LF;
        return 0;
    }
    for (size_t i = 0; i < sizeof(dispatch_names) / sizeof(dispatch_names[0]); i++) {
        if (strcmp(name, dispatch_names[i]) == 0) {
            *out = (enum cr__dispatch)i;
            return 0;
        }
    }
    return -EINVAL;
}

int cr_proactor_create(struct cr_proactor **out, const struct cr_proactor_config *cfg)
{
    static const struct cr_proactor_config defaults;
    struct cr_proactor *p;
    enum cr__dispatch d;
    unsigned threads;
    int err;

    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (cfg == NULL)
        cfg = &defaults;
    err = parse_dispatch(cfg->dispatch, &d);
    if (err < 0)
        return err;
    if (cfg->engine != NULL && strcmp(cfg->engine, "uring") != 0 &&
        strcmp(cfg->engine, "emulated") != 0)
        return -EINVAL;
    threads = cfg->threads;
    if (threads == 0)
        threads = (unsigned)cr_cpu_usable();
    if (d == CR__DISPATCH_SINGLE)
        threads = 1;
    if (threads > 1024)
        return -EINVAL;

    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    p->dispatch = d;
    p->nthreads = threads;
    p->nrings = d == CR__DISPATCH_RING_PER_THREAD ? threads : 1;
    p->rings = calloc(p->nrings, sizeof(*p->rings));
    p->workers = calloc(p->nthreads, sizeof(*p->workers));
    if (p->rings == NULL || p->workers == NULL) {
        err = -ENOMEM;
        goto out_free;
    }
    for (unsigned i = 0; i < p->nthreads; i++) {
        p->workers[i].p = p;
        p->workers[i].ring = d == CR__DISPATCH_RING_PER_THREAD ? i : 0;
    }
    err = cr__proactor_lf_init(p);
    if (err < 0)
        goto out_free;
    err = open_engine(p, cfg);
    if (err < 0)
        goto out_lf;
    *out = p;
    return 0;

out_lf:
    cr__proactor_lf_fini(p);
out_free:
    free(p->workers);
    free(p->rings);
    free(p);
    return err;
}

const char *cr_proactor_engine(const struct cr_proactor *p)
{
    return p->eng->name;
}

const char *cr_proactor_dispatch(const struct cr_proactor *p)
{
    return dispatch_names[p->dispatch];
}

unsigned cr_proactor_rings(const struct cr_proactor *p)
{
    return p->nrings;
}

unsigned cr_proactor_threads(const struct cr_proactor *p)
{
    return p->nthreads;
}

int cr_proactor_start(struct cr_proactor *p)
{
    int err;

    if (p->started != 0)
        return -EALREADY;
    for (unsigned i = 0; i < p->nthreads; i++) {
        err = -pthread_create(&p->workers[i].tid, NULL, cr__proactor_worker_main, &p->workers[i]);
        if (err < 0) {
            /* Those started exit once stopped with nothing in flight. */
            cr_proactor_stop(p);
            return err;
        }
        p->started++;
    }
    return 0;
}

void cr_proactor_stop(struct cr_proactor *p)
{
    if (__atomic_exchange_n(&p->stopping, 1, __ATOMIC_SEQ_CST) != 0)
        return;
    for (unsigned i = 0; i < p->nrings; i++)
        p->eng->cancel_all(&p->rings[i]);
    /* Pairs with op_finished (proactor_dispatch.c). */
    if (__atomic_load_n(&p->inflight, __ATOMIC_SEQ_CST) == 0)
        cr__proactor_wake_all(p);
    /* lf followers wait on lf_cv, not on the ring. */
    cr__proactor_lf_wake_followers(p);
}

int cr_proactor_wait(struct cr_proactor *p)
{
    int err = 0;

    for (unsigned i = 0; i < p->started; i++) {
        int rc = pthread_join(p->workers[i].tid, NULL);

        if (rc != 0 && err == 0)
            err = -rc;
    }
    p->started = 0;
    return err;
}

void cr_proactor_destroy(struct cr_proactor *p)
{
    if (p == NULL)
        return;
    for (unsigned i = 0; i < p->nrings; i++)
        p->eng->close(&p->rings[i]);
    cr__proactor_lf_fini(p);
    free(p->workers);
    free(p->rings);
    free(p);
}
