/*
 * timeline_internal.h - the rings of a timeline (timeline.h): one per lane,
 * a power-of-two array of events and the count written, written by the
 * lane's thread alone (cr__timeline_ring_add) and copied by any reader
 * (cr__timeline_ring_copy), with no lock between them. A thread lane's ring
 * hangs off its role clock (role_internal.h) and is registered with the
 * server's timeline; a worker process's ring lives in its scoreboard slot.
 *
 * The writer stores an event's fields (relaxed) and then the count
 * (release); a reader loads the count (acquire), copies with acquire loads,
 * and loads the count again: an event the writer may have overwritten
 * meanwhile is dropped, so a copy never holds a torn or a newer event in an
 * older one's place. Library-internal.
 */
#ifndef CABRANK_TIMELINE_INTERNAL_H
#define CABRANK_TIMELINE_INTERNAL_H

#include <cabrank/timeline.h>

/* t_ns 0 never occurs (a monotonic reading); what: state | (from + 1) << 16. */
struct cr__timeline_event {
    uint64_t t_ns;
    uint64_t what;
};

struct cr__timeline_ring {
    /* Immutable after create. */
    uint32_t mask; /* capacity - 1 */
    uint32_t id;   /* the lane's number in its timeline, for "from" */
    char name[32];
    enum cr_timeline_lane_kind kind;
    /* Written by the owner (release), read by any (acquire): events written. */
    uint64_t head;
    struct cr__timeline_event *ev; /* mask + 1 entries */
};

/* Records in the ring of mask + 1 events ev, with count *head, that its
 * lane went into state at now (a monotonic reading the caller took anyway),
 * with the leadership from lane id from (-1: none). Owner thread only. */
static inline void cr__timeline_write(uint64_t *head, struct cr__timeline_event *ev, uint32_t mask,
                                      uint64_t now, int state, int from)
{
    /* Relaxed: only the owner writes head. */
    uint64_t h = __atomic_load_n(head, __ATOMIC_RELAXED);
    struct cr__timeline_event *e = &ev[h & mask];

    /* Relaxed stores, published by the release of head below. */
    __atomic_store_n(&e->t_ns, now, __ATOMIC_RELAXED);
    __atomic_store_n(&e->what, (uint64_t)(uint16_t)state | (uint64_t)(uint32_t)(from + 1) << 16,
                     __ATOMIC_RELAXED);
    __atomic_store_n(head, h + 1, __ATOMIC_RELEASE);
}

/* The same for a thread lane's ring. Owner thread only. */
static inline void cr__timeline_ring_add(struct cr__timeline_ring *r, uint64_t now, int state,
                                         int from)
{
    cr__timeline_write(&r->head, r->ev, r->mask, now, state, from);
}

/*
 * Copies r's events from since_ns on into out (cap entries; the ring's
 * capacity is enough), preceded by the state r was in at since_ns as a point
 * at since_ns when the ring still holds it. Events' from are lane ids here
 * (the caller maps them). Returns the count. Thread-safe.
 */
size_t cr__timeline_copy(const uint64_t *head, const struct cr__timeline_event *ev, uint32_t mask,
                         uint64_t since_ns, struct cr_timeline_point *out, size_t cap);

/* Appends to v a lane named name of kind, with the events of the ring
 * (head, ev, mask) from since_ns on; from stays a lane id. -ENOMEM. */
int cr__timeline_view_lane(struct cr_timeline_view *v, const char *name,
                           enum cr_timeline_lane_kind kind, const uint64_t *head,
                           const struct cr__timeline_event *ev, uint32_t mask, uint64_t since_ns);

/* A new lane of t with its ring, *out returned (owned by t until
 * cr__timeline_lane_remove). -ENOMEM. Thread-safe. */
int cr__timeline_lane_add(struct cr_timeline *t, const char *name, enum cr_timeline_lane_kind kind,
                          struct cr__timeline_ring **out);

/* Unregisters and frees r. NULL-safe (r or t). Thread-safe, but r's owner
 * must have stopped writing. */
void cr__timeline_lane_remove(struct cr_timeline *t, struct cr__timeline_ring *r);

#endif /* CABRANK_TIMELINE_INTERNAL_H */
