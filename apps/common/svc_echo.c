/*
 * svc_echo.c - the echo service (lab_services.h): every byte received is
 * queued back with cr_conn_write. Runs on the models' serving threads (in
 * worker processes under the process models); the counters in the shared
 * struct cr_test_counts are relaxed atomics.
 */
#include "lab_services.h"

#include <stdlib.h>
#include <string.h>

struct echo_conn {
    int busy; /* atomic: a call is inside this connection */
};

static int echo_open(void *ctx, struct cr_conn *c, void **state)
{
    struct cr_test_svc *t = ctx;
    struct echo_conn *ec = calloc(1, sizeof(*ec));

    CR_UNUSED(c);
    if (ec == NULL)
        return -ENOMEM;
    __atomic_fetch_add(&t->n->opened, 1, __ATOMIC_RELAXED);
    *state = ec;
    return 0;
}

static ssize_t echo_input(void *ctx, void *state, struct cr_conn *c, const char *data, size_t len)
{
    struct cr_test_svc *t = ctx;
    struct echo_conn *ec = state;
    ssize_t ret = (ssize_t)len;
    uint64_t pending;
    uint64_t max;

    /* acq_rel exchange: pairs with the release store below on whichever
     * thread ran the previous call. */
    if (__atomic_exchange_n(&ec->busy, 1, __ATOMIC_ACQ_REL) != 0)
        __atomic_fetch_add(&t->n->overlaps, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&t->n->started, 1, __ATOMIC_RELAXED);
    if (cr_conn_write(c, data, len) < 0) {
        ret = -ENOMEM;
    } else {
        __atomic_fetch_add(&t->n->bytes, len, __ATOMIC_RELAXED);
        __atomic_fetch_add(&t->n->requests, 1, __ATOMIC_RELAXED);
        cr_conn_request_done(c);
    }
    pending = cr_conn_pending(c);
    max = __atomic_load_n(&t->n->max_pending, __ATOMIC_RELAXED);
    while (pending > max && !__atomic_compare_exchange_n(&t->n->max_pending, &max, pending, false,
                                                         __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    __atomic_store_n(&ec->busy, 0, __ATOMIC_RELEASE);
    return ret;
}

static void echo_close(void *ctx, void *state)
{
    struct cr_test_svc *t = ctx;

    __atomic_fetch_add(&t->n->closed, 1, __ATOMIC_RELAXED);
    free(state);
}

int cr_test_echo_init(struct cr_test_svc *t)
{
    int err = cr_test_svc_init_common(t);

    if (err < 0)
        return err;
    t->svc = (struct cr_service){
        .name = "echo",
        .ctx = t,
        .open = echo_open,
        .input = echo_input,
        .close = echo_close,
    };
    return 0;
}
