/*
 * role.c - the role clock of role_internal.h: which role a model's thread is
 * in and how long it spent in each, written by that thread and read by
 * cr_server_stats() on any thread, and each change on the thread's timeline
 * lane when it has one. Used by the reactor, hshr and tpc models.
 * Also the roles' names (cr_role_name, role.h). Owns nothing; the clock is
 * embedded in the model's per-thread struct.
 */
#include <cabrank/clock.h>

#include "pool/role_internal.h"

#include <string.h>

static const char *const role_names[CR_ROLE_COUNT] = {
    [CR_ROLE_IDLE] = "idle",         [CR_ROLE_LEADER] = "leader",
    [CR_ROLE_FOLLOWER] = "follower", [CR_ROLE_PROCESSING] = "processing",
    [CR_ROLE_LISTENER] = "listener", [CR_ROLE_STOPPED] = "stopped",
};

const char *cr_role_name(enum cr_role role)
{
    if ((unsigned)role >= CR_ROLE_COUNT)
        return "unknown";
    return role_names[role];
}

void cr__role_set_at(struct cr__role_clock *c, enum cr_role role, uint64_t now)
{
    /* Relaxed loads of our own fields: only this thread writes them. */
    int old = __atomic_load_n(&c->role, __ATOMIC_RELAXED);
    uint64_t since = __atomic_load_n(&c->since, __ATOMIC_RELAXED);

    if (old == (int)role && since != 0)
        return;
    /* Relaxed stores: statistics read by cr__role_read, ordering nothing.
     * since == 0: never entered a role, so no time to charge. */
    if (since != 0)
        __atomic_store_n(&c->role_ns[old],
                         __atomic_load_n(&c->role_ns[old], __ATOMIC_RELAXED) + (now - since),
                         __ATOMIC_RELAXED);
    __atomic_store_n(&c->since, now, __ATOMIC_RELAXED);
    __atomic_store_n(&c->role, (int)role, __ATOMIC_RELAXED);
    if (c->ring != NULL) {
        cr__timeline_ring_add(c->ring, now, (int)role, c->from);
        c->from = -1;
    }
}

int cr__role_attach(struct cr__role_clock *c, struct cr_timeline *t, const char *name)
{
    c->from = -1;
    if (t == NULL)
        return 0;
    return cr__timeline_lane_add(t, name, CR_TIMELINE_THREAD, &c->ring);
}

void cr__role_detach(struct cr__role_clock *c, struct cr_timeline *t)
{
    cr__timeline_lane_remove(t, c->ring);
    c->ring = NULL;
}

void cr__role_set(struct cr__role_clock *c, enum cr_role role)
{
    /* Relaxed: our own fields. A loop that stays put reads no clock. */
    if (__atomic_load_n(&c->role, __ATOMIC_RELAXED) == (int)role &&
        __atomic_load_n(&c->since, __ATOMIC_RELAXED) != 0)
        return;
    cr__role_set_at(c, role, cr_clock_now_ns());
}

void cr__role_read(const struct cr__role_clock *c, uint64_t now, struct cr_worker_stats *out)
{
    /* Relaxed: pairs with nothing; see role_internal.h on role and since. */
    int role = __atomic_load_n(&c->role, __ATOMIC_RELAXED);
    uint64_t since = __atomic_load_n(&c->since, __ATOMIC_RELAXED);

    memset(out, 0, sizeof(*out));
    out->role = (enum cr_role)role;
    out->group = CR_WORKER_ANY_GROUP;
    out->events = __atomic_load_n(&c->events, __ATOMIC_RELAXED);
    for (int i = 0; i < CR_ROLE_COUNT; i++)
        out->role_ns[i] = __atomic_load_n(&c->role_ns[i], __ATOMIC_RELAXED);
    if (since != 0 && now > since && (unsigned)role < CR_ROLE_COUNT)
        out->role_ns[role] += now - since;
}
