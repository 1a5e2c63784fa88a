/*
 * reactor_timers.c - the Reactor's timers: one-shot callbacks after a delay,
 * taken by the waiting thread before any fd event and dispatched like one
 * (reactor.c). cr_reactor_timer_add and _cancel run on any thread; the take
 * on the thread that waits. Owns the slots and the heap; borrows the
 * callbacks' arguments. Everything here runs under r->lock
 * (reactor_state_internal.h).
 *
 * A binary min-heap of slot indices ordered by deadline; each slot knows
 * its heap position, so cancel is O(log n). A timer id is
 * (slot generation << 32 | slot index): an id that fired or was cancelled
 * no longer matches its slot, so a second cancel is a clean -ENOENT.
 */
#include <cabrank/clock.h>
#include <cabrank/reactor.h>

#include "demux/handle_set_internal.h"
#include "demux/reactor_state_internal.h"

#include <stdlib.h>

#define NO_HEAP_IDX UINT32_MAX

struct timer_slot {
    uint64_t deadline;
    cr_reactor_timer_fn *fn;
    void *arg;
    uint32_t gen;
    uint32_t heap_idx; /* NO_HEAP_IDX when free */
    uint32_t next_free;
};

void cr__reactor_timers_init(struct cr_reactor *r)
{
    r->free_slot = NO_HEAP_IDX;
}

void cr__reactor_timers_fini(struct cr_reactor *r)
{
    free(r->slots);
    free(r->heap);
}

uint64_t cr__reactor_timer_first(const struct cr_reactor *r)
{
    return r->heap_len > 0 ? r->slots[r->heap[0]].deadline : CR__REACTOR_NO_DEADLINE;
}

static bool is_earlier(const struct cr_reactor *r, uint32_t a, uint32_t b)
{
    return r->slots[r->heap[a]].deadline < r->slots[r->heap[b]].deadline;
}

static void heap_swap(struct cr_reactor *r, uint32_t a, uint32_t b)
{
    uint32_t t = r->heap[a];

    r->heap[a] = r->heap[b];
    r->heap[b] = t;
    r->slots[r->heap[a]].heap_idx = a;
    r->slots[r->heap[b]].heap_idx = b;
}

static void sift_up(struct cr_reactor *r, uint32_t i)
{
    while (i > 0 && is_earlier(r, i, (i - 1) / 2)) {
        heap_swap(r, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void sift_down(struct cr_reactor *r, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1;
        uint32_t m = i;

        if (l < r->heap_len && is_earlier(r, l, m))
            m = l;
        if (l + 1 < r->heap_len && is_earlier(r, l + 1, m))
            m = l + 1;
        if (m == i)
            return;
        heap_swap(r, i, m);
        i = m;
    }
}

/* Takes slot s out of the heap and returns it to the free list. */
static void timer_release(struct cr_reactor *r, uint32_t s)
{
    uint32_t i = r->slots[s].heap_idx;

    cr_lock_assert_held(&r->lock);
    r->heap_len--;
    if (i != r->heap_len) {
        heap_swap(r, i, r->heap_len);
        sift_down(r, i);
        sift_up(r, i);
    }
    r->slots[s].heap_idx = NO_HEAP_IDX;
    r->slots[s].fn = NULL;
    r->slots[s].next_free = r->free_slot;
    r->free_slot = s;
}

static int grow_slots(struct cr_reactor *r)
{
    uint32_t len = r->slots_len ? r->slots_len * 2 : 16;
    struct timer_slot *s;
    uint32_t *h;

    if (r->slots_len >= UINT32_MAX / 4)
        return -ENOMEM;
    s = realloc(r->slots, len * sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    r->slots = s;
    h = realloc(r->heap, len * sizeof(*h));
    if (h == NULL)
        return -ENOMEM;
    r->heap = h;
    for (uint32_t i = r->slots_len; i < len; i++) {
        s[i].gen = 0;
        s[i].fn = NULL;
        s[i].heap_idx = NO_HEAP_IDX;
        s[i].next_free = i + 1 < len ? i + 1 : r->free_slot;
    }
    r->free_slot = r->slots_len;
    r->slots_len = len;
    return 0;
}

int cr_reactor_timer_add(struct cr_reactor *r, uint64_t delay_ms, cr_reactor_timer_fn *fn,
                         void *arg, uint64_t *id_out)
{
    struct timer_slot *t;
    uint32_t s;
    bool wake;
    int err;

    if (fn == NULL)
        return -EINVAL;
    if (delay_ms > UINT64_MAX / CR_NSEC_PER_MSEC / 2)
        delay_ms = UINT64_MAX / CR_NSEC_PER_MSEC / 2; /* "never", without overflow */
    cr_lock_lock(&r->lock);
    if (r->free_slot == NO_HEAP_IDX) {
        err = grow_slots(r);
        if (err < 0) {
            cr_lock_unlock(&r->lock);
            return err;
        }
    }
    s = r->free_slot;
    t = &r->slots[s];
    r->free_slot = t->next_free;
    if (++t->gen == 0)
        t->gen = 1;
    t->deadline = cr_clock_now_ns() + delay_ms * CR_NSEC_PER_MSEC;
    t->fn = fn;
    t->arg = arg;
    t->heap_idx = r->heap_len;
    r->heap[r->heap_len++] = s;
    sift_up(r, t->heap_idx);
    /* The waiter sleeps until its own deadline; tell it of an earlier one. */
    wake = r->waiting && t->heap_idx == 0 && t->deadline < r->wait_until;
    if (id_out != NULL)
        *id_out = (uint64_t)t->gen << 32 | s;
    cr_lock_unlock(&r->lock);
    if (wake)
        cr_handle_set_wake(r->hs);
    return 0;
}

int cr_reactor_timer_cancel(struct cr_reactor *r, uint64_t timer_id)
{
    uint32_t s = (uint32_t)timer_id;
    uint32_t gen = (uint32_t)(timer_id >> 32);
    int err = -ENOENT;

    cr_lock_lock(&r->lock);
    if (s < r->slots_len && gen != 0 && r->slots[s].gen == gen &&
        r->slots[s].heap_idx != NO_HEAP_IDX) {
        timer_release(r, s);
        err = 0;
    }
    cr_lock_unlock(&r->lock);
    return err;
}

bool cr__reactor_timer_take(struct cr_reactor *r, uint64_t now, struct cr_reactor_event *ev)
{
    uint32_t s;

    if (r->heap_len == 0 || r->slots[r->heap[0]].deadline > now)
        return false;
    s = r->heap[0];
    ev->kind = CR__REACTOR_KIND_TIMER;
    ev->fd = -1;
    ev->events = 0;
    ev->timer_id = (uint64_t)r->slots[s].gen << 32 | s;
    ev->handler = NULL;
    ev->timer = r->slots[s].fn;
    ev->arg = r->slots[s].arg;
    timer_release(r, s);
    return true;
}
