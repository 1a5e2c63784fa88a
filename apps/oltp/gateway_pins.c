/*
 * gateway_pins.c - cabrank-gateway's session pins (gateway_internal.h): a
 * session lives on the ledger that began it, so the gateway remembers, per
 * session id, that back end and the back end's epoch when the session began.
 * A pin whose back end went down since (its epoch moved on) or that was not
 * used for session_idle_ms is forgotten by the health round's sweep.
 *
 * Called by gateway.c's client handlers (add on a BEGIN's reply, find on
 * every request of a session, remove on its end) and by the health round
 * (sweep), on the pool threads; init and fini on the owner thread. Owns the
 * pins, in a cr_u64_table under gateway.lock, a leaf lock.
 */
#include "gateway_internal.h"

#include <cabrank/clock.h>
#include <cabrank/log.h>

#include <stdlib.h>

/* 2^10 buckets, fixed, as before the table was shared: pins are few. */
#define PIN_BUCKET_BITS 10

/* A session pinned to the back end that began it. */
struct pin {
    struct cr_u64_node node; /* key: the session id */
    unsigned backend;
    uint64_t epoch;
    uint64_t used_ns;
};

static struct pin *pin_of(struct cr_u64_node *n)
{
    return n == NULL ? NULL : cr_u64_table_entry(n, struct pin, node);
}

int gateway_pins_init(struct oltp_gateway *g)
{
    return cr_u64_table_init(&g->pins, PIN_BUCKET_BITS, PIN_BUCKET_BITS);
}

void gateway_pins_fini(struct oltp_gateway *g)
{
    struct cr_u64_table_iter it = {0};
    struct cr_u64_node *n;

    /* The walk allows freeing the node it returned. */
    while ((n = cr_u64_table_next(&g->pins, &it)) != NULL)
        free(pin_of(n));
    cr_u64_table_fini(&g->pins);
}

void gateway_pin_add(struct oltp_gateway *g, uint64_t session, unsigned be, uint64_t epoch)
{
    struct pin *p = malloc(sizeof(*p));

    if (p == NULL) {
        CR_LOG(CR_LOG_WARN, "session %016llx: out of memory, not pinned",
               (unsigned long long)session);
        return;
    }
    p->node.key = session;
    p->backend = be;
    p->epoch = epoch;
    p->used_ns = cr_clock_now_ns();
    pthread_mutex_lock(&g->lock);
    cr_u64_table_insert(&g->pins, &p->node);
    pthread_mutex_unlock(&g->lock);
}

bool gateway_pin_find(struct oltp_gateway *g, uint64_t session, unsigned *be, uint64_t *epoch)
{
    struct pin *p;

    pthread_mutex_lock(&g->lock);
    p = pin_of(cr_u64_table_find(&g->pins, session));
    if (p != NULL) {
        *be = p->backend;
        *epoch = p->epoch;
        p->used_ns = cr_clock_now_ns();
    }
    pthread_mutex_unlock(&g->lock);
    return p != NULL;
}

void gateway_pin_remove(struct oltp_gateway *g, uint64_t session)
{
    struct pin *p;

    pthread_mutex_lock(&g->lock);
    p = pin_of(cr_u64_table_find(&g->pins, session));
    if (p != NULL)
        cr_u64_table_remove(&g->pins, &p->node);
    pthread_mutex_unlock(&g->lock);
    free(p);
}

void gateway_pins_sweep(struct oltp_gateway *g)
{
    uint64_t now = cr_clock_now_ns();
    uint64_t idle_ns = g->cfg.session_idle_ms * 1000000ULL;
    struct cr_u64_table_iter it = {0};
    struct cr_u64_node *n;

    pthread_mutex_lock(&g->lock);
    while ((n = cr_u64_table_next(&g->pins, &it)) != NULL) {
        struct pin *p = pin_of(n);
        uint64_t epoch = __atomic_load_n(&g->bes[p->backend].epoch, __ATOMIC_RELAXED);

        if (now - p->used_ns > idle_ns || epoch != p->epoch) {
            cr_u64_table_remove(&g->pins, n);
            free(p);
        }
    }
    pthread_mutex_unlock(&g->lock);
}

unsigned gateway_pins_count(struct oltp_gateway *g)
{
    size_t n;

    pthread_mutex_lock(&g->lock);
    n = cr_u64_table_count(&g->pins);
    pthread_mutex_unlock(&g->lock);
    return (unsigned)n;
}
