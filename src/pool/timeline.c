/*
 * timeline.c - a server's timeline (timeline.h): the registry of its lanes,
 * each a ring of timeline_internal.h, and the copy a status page reads.
 * Lanes are added and removed by the models as they create and destroy
 * their threads; events are written by each lane's thread with no lock
 * (cr__timeline_ring_add); the registry's lock is taken only to add, remove
 * and read lanes, never on the request path. Owns the rings.
 */
#include <cabrank/clock.h>

#include "os/sync_internal.h"
#include "pool/timeline_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVENTS_MAX 65536u

struct cr_timeline {
    /* Immutable after create. */
    uint32_t capacity;
    struct cr_mutex lock;
    /* Protected by lock. */
    struct cr__timeline_ring **rings;
    unsigned nrings;
    unsigned cap_rings;
    uint32_t next_id;
};

int cr_timeline_create(struct cr_timeline **out, unsigned events_per_lane)
{
    struct cr_timeline *t;
    uint32_t cap = 1;
    int err;

    *out = NULL;
    if (events_per_lane == 0)
        events_per_lane = CR_TIMELINE_EVENTS_DEFAULT;
    if (events_per_lane > EVENTS_MAX)
        return -EINVAL;
    while (cap < events_per_lane)
        cap <<= 1;
    t = calloc(1, sizeof(*t));
    if (t == NULL)
        return -ENOMEM;
    t->capacity = cap;
    err = cr_mutex_init(&t->lock);
    if (err < 0) {
        free(t);
        return err;
    }
    *out = t;
    return 0;
}

void cr_timeline_destroy(struct cr_timeline *t)
{
    if (t == NULL)
        return;
    /* Lanes left over belong to a model that failed half-way: free them. */
    for (unsigned i = 0; i < t->nrings; i++) {
        free(t->rings[i]->ev);
        free(t->rings[i]);
    }
    free(t->rings);
    cr_mutex_fini(&t->lock);
    free(t);
}

int cr__timeline_lane_add(struct cr_timeline *t, const char *name, enum cr_timeline_lane_kind kind,
                          struct cr__timeline_ring **out)
{
    struct cr__timeline_ring *r = calloc(1, sizeof(*r));
    int err = 0;

    *out = NULL;
    if (r == NULL)
        return -ENOMEM;
    r->ev = calloc(t->capacity, sizeof(*r->ev));
    if (r->ev == NULL) {
        free(r);
        return -ENOMEM;
    }
    r->mask = t->capacity - 1;
    r->kind = kind;
    snprintf(r->name, sizeof(r->name), "%s", name);
    cr_mutex_lock(&t->lock);
    if (t->nrings == t->cap_rings) {
        unsigned ncap = t->cap_rings != 0 ? 2 * t->cap_rings : 16;
        struct cr__timeline_ring **nr = realloc(t->rings, ncap * sizeof(*nr));

        if (nr == NULL) {
            err = -ENOMEM;
        } else {
            t->rings = nr;
            t->cap_rings = ncap;
        }
    }
    if (err == 0) {
        r->id = t->next_id++;
        t->rings[t->nrings++] = r;
    }
    cr_mutex_unlock(&t->lock);
    if (err < 0) {
        free(r->ev);
        free(r);
        return err;
    }
    *out = r;
    return 0;
}

void cr__timeline_lane_remove(struct cr_timeline *t, struct cr__timeline_ring *r)
{
    if (t == NULL || r == NULL)
        return;
    cr_mutex_lock(&t->lock);
    for (unsigned i = 0; i < t->nrings; i++) {
        if (t->rings[i] == r) {
            t->rings[i] = t->rings[--t->nrings];
            break;
        }
    }
    cr_mutex_unlock(&t->lock);
    free(r->ev);
    free(r);
}

size_t cr__timeline_copy(const uint64_t *head, const struct cr__timeline_event *ev, uint32_t mask,
                         uint64_t since_ns, struct cr_timeline_point *out, size_t cap)
{
    uint64_t cap_ev = (uint64_t)mask + 1;
    /* Acquire: pairs with the writer's release of head. */
    uint64_t h1 = __atomic_load_n(head, __ATOMIC_ACQUIRE);
    uint64_t first = h1 > cap_ev ? h1 - cap_ev : 0;
    uint64_t h2;
    size_t n = 0;
    size_t keep = 0;

    if (h1 - first > cap)
        first = h1 - cap;
    for (uint64_t i = first; i < h1; i++) {
        const struct cr__timeline_event *e = &ev[i & mask];
        /* Acquire, where a seqlock reader would fence: the load of head
         * below cannot pass them (TSan has no fences; on x86 they cost
         * nothing). */
        uint64_t what = __atomic_load_n(&e->what, __ATOMIC_ACQUIRE);

        out[n].t_ns = __atomic_load_n(&e->t_ns, __ATOMIC_ACQUIRE);
        out[n].state = (int)(what & 0xffff);
        out[n].from = (int)(uint32_t)(what >> 16) - 1;
        n++;
    }
    /* The events the writer may have begun to overwrite since h1 was read:
     * index i's slot is rewritten by event i + cap_ev, whose fields are
     * stored before head passes it. */
    h2 = __atomic_load_n(head, __ATOMIC_RELAXED);
    if (h2 + 1 > first + cap_ev) {
        uint64_t drop = h2 + 1 - (first + cap_ev);

        if (drop > n)
            drop = n;
        memmove(out, out + drop, (n - drop) * sizeof(*out));
        n -= drop;
    }
    /* From since on, after the last state entered before it, shown at since. */
    while (keep < n && out[keep].t_ns < since_ns)
        keep++;
    if (keep > 0) {
        keep--;
        out[keep].t_ns = since_ns;
        out[keep].from = -1;
    }
    memmove(out, out + keep, (n - keep) * sizeof(*out));
    return n - keep;
}

int cr__timeline_view_lane(struct cr_timeline_view *v, const char *name,
                           enum cr_timeline_lane_kind kind, const uint64_t *head,
                           const struct cr__timeline_event *ev, uint32_t mask, uint64_t since_ns)
{
    struct cr_timeline_lane *lanes = realloc(v->lanes, (v->nlanes + 1) * sizeof(*lanes));
    struct cr_timeline_lane *l;
    size_t cap = (size_t)mask + 1;

    if (lanes == NULL)
        return -ENOMEM;
    v->lanes = lanes;
    l = &lanes[v->nlanes];
    memset(l, 0, sizeof(*l));
    snprintf(l->name, sizeof(l->name), "%s", name);
    l->kind = kind;
    l->points = malloc(cap * sizeof(*l->points));
    if (l->points == NULL)
        return -ENOMEM;
    v->nlanes++;
    l->npoints = cr__timeline_copy(head, ev, mask, since_ns, l->points, cap);
    return 0;
}

/* The index of the ring with id in rings[0..n), which is its lane's in
 * the view, or -1. */
static int lane_of(struct cr__timeline_ring *const *rings, unsigned n, int id)
{
    for (unsigned i = 0; i < n && id >= 0; i++) {
        if (rings[i]->id == (uint32_t)id)
            return (int)i;
    }
    return -1;
}

int cr_timeline_read(const struct cr_timeline *t, uint64_t since_ns, struct cr_timeline_view **out)
{
    struct cr_timeline_view *v = calloc(1, sizeof(*v));
    struct cr_timeline *mt = (struct cr_timeline *)t; /* the lock only */
    int err = 0;

    *out = NULL;
    if (v == NULL)
        return -ENOMEM;
    v->now_ns = cr_clock_now_ns();
    cr_mutex_lock(&mt->lock);
    for (unsigned i = 0; i < mt->nrings && err == 0; i++) {
        const struct cr__timeline_ring *r = mt->rings[i];

        err = cr__timeline_view_lane(v, r->name, r->kind, &r->head, r->ev, r->mask, since_ns);
    }
    for (unsigned i = 0; i < v->nlanes; i++) {
        struct cr_timeline_lane *l = &v->lanes[i];

        for (size_t k = 0; k < l->npoints; k++)
            l->points[k].from = lane_of(mt->rings, mt->nrings, l->points[k].from);
    }
    cr_mutex_unlock(&mt->lock);
    if (err < 0) {
        cr_timeline_view_free(v);
        return err;
    }
    *out = v;
    return 0;
}

void cr_timeline_view_free(struct cr_timeline_view *v)
{
    if (v == NULL)
        return;
    for (unsigned i = 0; i < v->nlanes; i++)
        free(v->lanes[i].points);
    free(v->lanes);
    free(v);
}
