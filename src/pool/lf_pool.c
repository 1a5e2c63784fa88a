/*
 * lf_pool.c - the Leader/Followers thread pool of POSA2 (unbound handle/thread
 * association) over one or more cr_reactors: the loop, lifecycle, hybrid
 * waits and statistics. Only a reactor's leader calls cr_reactor_next() on it;
 * on an event the leader hands the leadership on (the promotion order,
 * lf_order_internal.h), then dispatches the event itself and rejoins. Used by
 * the lf model, the bound pool and the transaction gateway; runs on the
 * pool's threads, on outside threads inside cr_lf_pool_join() and, nested,
 * inside handlers that call cr_lf_pool_wait(). Owns its threads and
 * synchronizers; borrows the reactors. Design notes: docs/design/lf_pool.md.
 *
 * Slots and groups: every participant has a slot (pool threads, then
 * JOIN_SLOTS lent by cr_lf_pool_join, -EBUSY when all are lent); slot i
 * belongs to group i % ngroups. shared_followers false gives a group per
 * reactor, true one group leading every reactor ("multiple leaders").
 *
 * Hybrid waits: cr_lf_pool_wait() runs the same loop nested on the handler's
 * stack, in a frame that also ends when its waiter is notified or its timeout
 * passes. A notifier sets w->done, then wakes the waiting thread where it is
 * (the order's kick if it follows, its reactor if it leads); a processing
 * thread sees done when it comes back, and so does a follower already woken
 * for a turn, once it has taken or lost that turn. done (seq_cst store, then
 * seq_cst load of `leading`) and a leader's `leading` (seq_cst store, then
 * seq_cst load of done) form a Dekker pair: the leader sees done, or the
 * notifier sees it leading and wakes the reactor. A leader whose frame ends
 * gives up its turn like after an event.
 *
 * Lock order: a group lock, or (lock-free order) a slot's mutex, then a
 * reactor's lock. Group locks and slot mutexes are never held together, nor
 * two of either, and none while a handler runs or cr_reactor_next waits.
 * Callers may hold their own locks around cr_lf_pool_notify and
 * cr_lf_pool_stop (the bound pool does): ours come after theirs.
 *
 * A stopped reactor returns at once from every wait, so its leader would
 * spin: the pool stops itself instead. A failed wait stops the pool too;
 * cr_lf_pool_join_all() returns its -errno.
 */
#include <cabrank/clock.h>
#include <cabrank/cpu.h>
#include <cabrank/lf_pool.h>
#include <cabrank/log.h>
#include <cabrank/reactor.h>

#include "demux/reactor_internal.h"
#include "os/clock_internal.h"
#include "os/sync_internal.h"
#include "pool/lf_order_internal.h"
#include "pool/lf_pool_internal.h"
#include "pool/role_internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define JOIN_SLOTS  8
#define MAX_THREADS 65536

/* By cr_lf_pool_config.promotion; names as cr_lf_pool_promotions lists them. */
static const struct cr__lf_order_ops *const orders[] = {
    &cr__lf_order_native,   &cr__lf_order_lifo,     &cr__lf_order_fifo,
    &cr__lf_order_priority, &cr__lf_order_lockfree,
};
static const char *const order_names[] = {"native",   "lifo",          "fifo",
                                          "priority", "lifo-lockfree", NULL};
_Static_assert(sizeof(orders) / sizeof(orders[0]) + 1 ==
                   sizeof(order_names) / sizeof(order_names[0]),
               "an order without its name, or a name without its order");

/* The slot of the calling thread while it serves a pool, else NULL. */
static _Thread_local struct lf_slot *tls_slot;

/* ------------------------------------------------------------------ helpers */

static uint64_t deadline_of(int timeout_ms)
{
    uint64_t d;

    if (timeout_ms < 0)
        return 0;
    d = cr_clock_now_ns() + (uint64_t)timeout_ms * CR_NSEC_PER_MSEC;
    return d != 0 ? d : 1;
}

/* The timeout for cr_reactor_next: until the frame's deadline. */
static int next_timeout_ms(const struct lf_frame *f)
{
    uint64_t now;
    uint64_t ms;

    if (f->deadline == 0)
        return -1;
    now = cr_clock_now_ns();
    if (now >= f->deadline)
        return 0;
    ms = (f->deadline - now + CR_NSEC_PER_MSEC - 1) / CR_NSEC_PER_MSEC;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

void cr__lf_pool_fail(struct cr_lf_pool *p, const char *what, int err)
{
    int none = 0;

    if (__atomic_compare_exchange_n(&p->error, &none, err, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
        CR_LOG(CR_LOG_ERROR, "lf_pool: %s failed: %s; stopping the pool", what, strerror(-err));
    cr_lf_pool_stop(p);
}

/* ------------------------------------------------------------------ the loop */

/*
 * The loop's calls into its promotion order. The orders this library has are
 * called directly, picked by a compare on the ops, so that the request path
 * pays no indirect call per event (and LTO may inline them); the table serves
 * any other.
 */
static int follow(struct cr_lf_pool *p, struct lf_slot *s, const struct lf_frame *f, unsigned *r,
                  uint64_t *led_at)
{
    if (p->ops->follow == cr__lf_locked_follow)
        return cr__lf_locked_follow(p, s, f, r, led_at);
    if (p->ops->follow == cr__lf_lockfree_follow)
        return cr__lf_lockfree_follow(p, s, f, r, led_at);
    return p->ops->follow(p, s, f, r, led_at);
}

/* ev: the event s goes to dispatch, NULL if it leaves. now: a
 * cr_clock_now_ns() reading, for the role clock. */
static void unlead(struct cr_lf_pool *p, struct lf_slot *s, unsigned r,
                   const struct cr_reactor_event *ev, uint64_t now)
{
    /* Stop being LEADER in the stats before anyone else can start. */
    cr__role_set_at(&s->clock, CR_ROLE_PROCESSING, now);
    if (p->ops->unlead == cr__lf_locked_unlead)
        cr__lf_locked_unlead(p, s, r, ev);
    else if (p->ops->unlead == cr__lf_lockfree_unlead)
        cr__lf_lockfree_unlead(p, s, r, ev);
    else
        p->ops->unlead(p, s, r, ev);
}

/* Per notify, on the bound pool's reply path: direct calls as above. */
static void kick(struct cr_lf_pool *p, struct lf_slot *s)
{
    if (p->ops->kick == cr__lf_locked_kick)
        cr__lf_locked_kick(p, s);
    else if (p->ops->kick == cr__lf_lockfree_kick)
        cr__lf_lockfree_kick(p, s);
    else
        p->ops->kick(p, s);
}

/*
 * Leads reactor r: waits for one event, hands the leadership on, then
 * dispatches it here (LF_STAY). On a wake-up or timeout re-checks the frame and
 * waits again; when the frame ends gives the leadership up and returns why.
 * led_at: when s became LEADER (a cr_clock_now_ns() reading the first take
 * reuses), or 0 for a thread still PROCESSING (lf_stamp_leader): that one first
 * takes what is there without waiting, at the reading its last handler lent
 * (cr_clock_end_ns) if it lent one, and becomes LEADER, at the same reading,
 * only if it must wait. At most one reading per event, none when lent.
 */
static int lead(struct cr_lf_pool *p, struct lf_slot *s, const struct lf_frame *f, unsigned r,
                uint64_t led_at)
{
    struct cr_reactor *re = p->reactors[r];
    struct cr_reactor_event ev;
    /* Still PROCESSING: the handler's lent reading serves, if there is one. */
    uint64_t now = led_at != 0 ? led_at : cr__clock_end_take();
    bool stamped = led_at != 0;
    int reason;
    int n;

    for (;;) {
        reason = lf_leave_reason(p, f);
        if (reason != LF_STAY) {
            unlead(p, s, r, NULL, cr_clock_now_ns());
            return reason;
        }
        if (!stamped) {
            n = cr__reactor_take(re, 0, false, &now, &ev);
            if (n > 0)
                break;
            cr__role_set_at(&s->clock, CR_ROLE_LEADER, now);
            stamped = true;
        }
        n = cr__reactor_take(re, next_timeout_ms(f), true, &now, &ev);
        now = 0; /* after a wake-up or timeout: read anew */
        if (n > 0)
            break;
        if (n < 0)
            cr__lf_pool_fail(p, "reactor wait", n);
        else if (cr_reactor_is_stopped(re))
            cr_lf_pool_stop(p);
    }
    /* Promote before dispatching (activity 5); the event is ours, and it is
     * dispatched even if the pool stops meanwhile. */
    unlead(p, s, r, &ev, ev.taken_ns); /* processing since the event was taken */
    do {
        cr_reactor_dispatch(re, &ev);
        cr__role_event(&s->clock);
        /* Deferred promotion may hand s r's next fetched event at once. */
    } while (p->delay_ns != 0 && cr__lf_take_deferred(p, s, f, r, &ev));
    return LF_STAY;
}

/* Follows, leads and processes until the frame ends; returns why. */
static int serve(struct cr_lf_pool *p, struct lf_slot *s, const struct lf_frame *f)
{
    for (;;) {
        unsigned r = 0;
        uint64_t led_at = 0;
        int reason = follow(p, s, f, &r, &led_at);

        if (reason == LF_STAY)
            reason = lead(p, s, f, r, led_at);
        if (reason != LF_STAY)
            return reason;
    }
}

static void *thread_main(void *arg)
{
    struct lf_slot *s = arg;
    struct cr_lf_pool *p = s->pool;
    struct lf_frame f = {.w = NULL, .deadline = 0};

    tls_slot = s;
    if (p->on_thread_start != NULL)
        p->on_thread_start(s->idx, p->thread_arg);
    (void)serve(p, s, &f); /* only stop ends it */
    cr__role_set(&s->clock, CR_ROLE_STOPPED);
    if (p->on_thread_stop != NULL)
        p->on_thread_stop(s->idx, p->thread_arg);
    tls_slot = NULL;
    return NULL;
}

/* ------------------------------------------------------------------ lifecycle */

const char *const *cr_lf_pool_promotions(void)
{
    return order_names;
}

static const struct cr__lf_order_ops *find_order(const char *name)
{
    if (name == NULL)
        name = "lifo";
    for (size_t i = 0; i < sizeof(orders) / sizeof(orders[0]); i++) {
        if (strcmp(orders[i]->name, name) == 0)
            return orders[i];
    }
    return NULL;
}

static void fini_groups(struct cr_lf_pool *p, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        cr_cond_fini(&p->groups[i].cv);
        cr_mutex_fini(&p->groups[i].lock);
    }
}

static void fini_slots(struct cr_lf_pool *p, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        cr__role_detach(&p->slots[i].clock, p->timeline);
        cr_cond_fini(&p->slots[i].cv);
        cr_mutex_fini(&p->slots[i].mu);
    }
}

static int init_group(struct cr_lf_pool *p, unsigned i, bool shared)
{
    struct lf_group *g = &p->groups[i];
    int err;

    g->first = shared ? 0 : i;
    g->count = shared ? p->nreactors : 1;
    err = cr_mutex_init(&g->lock);
    if (err < 0)
        return err;
    err = cr_cond_init(&g->cv);
    if (err < 0)
        cr_mutex_fini(&g->lock);
    return err;
}

static int init_slot(struct cr_lf_pool *p, unsigned i, const int *priorities)
{
    struct lf_slot *s = &p->slots[i];
    char name[32];
    int err;

    s->pool = p;
    s->idx = i;
    s->group = i % p->ngroups;
    if (i >= p->nthreads)
        s->priority = INT_MIN; /* outside threads come last */
    else
        s->priority = priorities != NULL ? priorities[i] : -(int)i;
    s->promoted = LF_NO_SLOT;
    s->leading = -1;
    /* A lane per pool thread; threads that join (cr_lf_pool_join) have none. */
    snprintf(name, sizeof(name), "lf %u", i);
    err = cr__role_attach(&s->clock, i < p->nthreads ? p->timeline : NULL, name);
    if (err < 0)
        return err;
    cr__role_set(&s->clock, CR_ROLE_IDLE); /* idle from create to start */
    err = cr_mutex_init(&s->mu);
    if (err < 0)
        goto out_detach;
    err = cr_cond_init(&s->cv);
    if (err < 0) {
        cr_mutex_fini(&s->mu);
        goto out_detach;
    }
    return 0;

out_detach:
    cr__role_detach(&s->clock, p->timeline);
    return err;
}

/* Zeroed, cache-line aligned array of n elements of size sz. */
static void *alloc_lines(size_t n, size_t sz)
{
    void *a;

    if (n > SIZE_MAX / sz)
        return NULL;
    a = aligned_alloc(LF_CACHE_LINE, n * sz);
    if (a != NULL)
        memset(a, 0, n * sz);
    return a;
}

int cr_lf_pool_create(struct cr_lf_pool **out, const struct cr_lf_pool_config *cfg)
{
    struct cr_lf_pool *p;
    const struct cr__lf_order_ops *ops;
    unsigned groups_done = 0;
    unsigned slots_done = 0;
    int err;

    *out = NULL;
    if (cfg == NULL || cfg->nreactors == 0 || cfg->reactors == NULL || cfg->threads > MAX_THREADS ||
        cfg->nreactors > MAX_THREADS)
        return -EINVAL;
    for (unsigned i = 0; i < cfg->nreactors; i++) {
        if (cfg->reactors[i] == NULL)
            return -EINVAL;
    }
    ops = find_order(cfg->promotion);
    if (ops == NULL)
        return -EINVAL;
    if (ops->one_reactor_group && cfg->shared_followers && cfg->nreactors > 1)
        return -EINVAL; /* one word per group, one reactor per word */
    if (cfg->promotion_delay_us != 0 && !ops->defers)
        return -EINVAL; /* see lf_deferred.c */
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    p->ops = ops;
    p->nreactors = cfg->nreactors;
    p->ngroups = cfg->shared_followers ? 1 : cfg->nreactors;
    p->nthreads = cfg->threads;
    if (p->nthreads == 0) {
        p->nthreads = (unsigned)cr_cpu_usable();
        if (p->nthreads < p->ngroups)
            p->nthreads = p->ngroups;
    }
    err = -EINVAL;
    if (p->nthreads < p->ngroups)
        goto out_free; /* a group without threads would never be served */
    p->nslots = p->nthreads + JOIN_SLOTS;
    p->on_thread_start = cfg->on_thread_start;
    p->timeline = cfg->timeline;
    p->on_thread_stop = cfg->on_thread_stop;
    p->thread_arg = cfg->thread_arg;
    p->delay_ns = (uint64_t)cfg->promotion_delay_us * 1000;
    err = -ENOMEM;
    p->reactors = calloc(p->nreactors, sizeof(*p->reactors));
    if (p->reactors == NULL)
        goto out_free;
    memcpy(p->reactors, cfg->reactors, p->nreactors * sizeof(*p->reactors));
    p->lead = alloc_lines(p->nreactors, sizeof(*p->lead));
    if (p->lead == NULL)
        goto out_free_reactors;
    for (unsigned i = 0; i < p->nreactors; i++) {
        p->lead[i].slot = LF_NO_SLOT;
        p->lead[i].pending = LF_NO_SLOT;
        p->lead[i].last_lane = -1;
        p->lead[i].timer_fd = -1;
    }
    p->wd_stop_fd = -1;
    p->groups = alloc_lines(p->ngroups, sizeof(*p->groups));
    if (p->groups == NULL)
        goto out_free_lead;
    p->slots = alloc_lines(p->nslots, sizeof(*p->slots));
    if (p->slots == NULL)
        goto out_free_groups;
    for (; groups_done < p->ngroups; groups_done++) {
        err = init_group(p, groups_done, cfg->shared_followers);
        if (err < 0)
            goto out_fini;
    }
    for (; slots_done < p->nslots; slots_done++) {
        err = init_slot(p, slots_done, ops->ranked ? cfg->priorities : NULL);
        if (err < 0)
            goto out_fini;
    }
    err = cr__lf_watch_init(p);
    if (err < 0)
        goto out_fini;
    *out = p;
    return 0;

out_fini:
    cr__lf_watch_fini(p);
    fini_slots(p, slots_done);
    fini_groups(p, groups_done);
    free(p->slots);
out_free_groups:
    free(p->groups);
out_free_lead:
    free(p->lead);
out_free_reactors:
    free(p->reactors);
out_free:
    free(p);
    return err;
}

int cr_lf_pool_start(struct cr_lf_pool *p)
{
    int err;

    if (p->started != 0 || p->wd_started)
        return -EINVAL;
    err = cr__lf_watchdog_start(p);
    if (err < 0)
        return err;
    for (unsigned i = 0; i < p->nthreads; i++) {
        int rc = pthread_create(&p->slots[i].tid, NULL, thread_main, &p->slots[i]);

        if (rc != 0) {
            int ignored;

            cr_lf_pool_stop(p);
            ignored = cr_lf_pool_join_all(p); /* pthread_create's error is the news */
            (void)ignored;
            return -rc;
        }
        p->started = i + 1;
    }
    return 0;
}

void cr_lf_pool_stop(struct cr_lf_pool *p)
{
    /* release pairs with the acquire load in lf_leave_reason. */
    __atomic_store_n(&p->stopping, 1, __ATOMIC_RELEASE);
    p->ops->wake_all(p);
    for (unsigned r = 0; r < p->nreactors; r++)
        cr_reactor_wake(p->reactors[r]);
    cr__lf_watchdog_stop(p);
}

int cr_lf_pool_join_all(struct cr_lf_pool *p)
{
    int err = 0;
    int wd_err;

    for (unsigned i = 0; i < p->started; i++) {
        int rc = pthread_join(p->slots[i].tid, NULL);

        if (rc != 0 && err == 0)
            err = -rc;
    }
    p->started = 0;
    wd_err = cr__lf_watchdog_join(p);
    if (err == 0)
        err = wd_err;
    /* Relaxed: pthread_join ordered the threads' stores before this. */
    if (err == 0)
        err = __atomic_load_n(&p->error, __ATOMIC_RELAXED);
    return err;
}

void cr_lf_pool_destroy(struct cr_lf_pool *p)
{
    if (p == NULL)
        return;
    if (p->started != 0 || p->wd_started) {
        /* Misuse (destroy before join_all), but leave no thread behind. */
        int ignored;

        cr_lf_pool_stop(p);
        ignored = cr_lf_pool_join_all(p);
        (void)ignored;
    }
    cr__lf_watch_fini(p);
    fini_slots(p, p->nslots);
    fini_groups(p, p->ngroups);
    free(p->slots);
    free(p->groups);
    free(p->lead);
    free(p->reactors);
    free(p);
}

/* ------------------------------------------------------------------ join, wait, notify */

int cr_lf_pool_join(struct cr_lf_pool *p, int timeout_ms)
{
    struct lf_frame f = {.w = NULL, .deadline = deadline_of(timeout_ms)};
    struct lf_slot *prev = tls_slot;
    struct lf_slot *s = NULL;
    int reason;

    for (unsigned i = p->nthreads; i < p->nslots && s == NULL; i++) {
        int free_slot = 0;

        /* acquire pairs with the release store that gave the slot back. */
        if (__atomic_compare_exchange_n(&p->slots[i].lent, &free_slot, 1, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            s = &p->slots[i];
    }
    if (s == NULL)
        return -EBUSY;
    tls_slot = s;
    reason = serve(p, s, &f);
    cr__role_set(&s->clock, CR_ROLE_IDLE);
    tls_slot = prev;
    /* release pairs with the next lender's acquire CAS. */
    __atomic_store_n(&s->lent, 0, __ATOMIC_RELEASE);
    return reason == LF_LEAVE_TIMEOUT ? -ETIMEDOUT : 0;
}

void cr_lf_waiter_init(struct cr_lf_waiter *w)
{
    struct lf_slot *s = tls_slot;

    /* Relaxed: the caller publishes w (sends its request) after this, and
     * that orders these stores before any notify. */
    __atomic_store_n(&w->done, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&w->thread, s != NULL ? (int)s->idx : -1, __ATOMIC_RELAXED);
}

int cr_lf_pool_wait(struct cr_lf_pool *p, struct cr_lf_waiter *w, int timeout_ms)
{
    struct lf_frame f = {.w = w, .deadline = deadline_of(timeout_ms)};
    struct lf_slot *s = tls_slot;
    uint64_t now;
    int reason;

    if (s == NULL || s->pool != p)
        return -EINVAL;
    /* Initialised on another thread: too late to be race-free with notify,
     * but right for every notify that comes after this. */
    if (__atomic_load_n(&w->thread, __ATOMIC_RELAXED) != (int)s->idx)
        __atomic_store_n(&w->thread, (int)s->idx, __ATOMIC_RELAXED);
    reason = serve(p, s, &f);
    now = cr_clock_now_ns();
    cr__role_set_at(&s->clock, CR_ROLE_PROCESSING, now); /* back in the handler */
    cr__clock_event_resume(now);                         /* whose timeouts count from here */
    if (reason == LF_LEAVE_DONE)
        return 0;
    return reason == LF_LEAVE_STOP ? -ECANCELED : -ETIMEDOUT;
}

void cr_lf_pool_notify(struct cr_lf_pool *p, struct cr_lf_waiter *w)
{
    /* Read before done is set: from then on the waiter may return and w go
     * out of scope. Relaxed: cr_lf_waiter_init's store is ordered by the
     * caller (see there). */
    int t = __atomic_load_n(&w->thread, __ATOMIC_RELAXED);
    struct lf_slot *s;
    int r;

    /* seq_cst: the first half of the Dekker pair with a leader's `leading`
     * store and leave_reason's load of done. */
    __atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
    if (t < 0 || (unsigned)t >= p->nslots)
        return; /* nobody waits on it */
    s = &p->slots[t];
    kick(p, s);
    /* seq_cst: the second half of the Dekker pair. */
    r = __atomic_load_n(&s->leading, __ATOMIC_SEQ_CST);
    if (r >= 0)
        cr_reactor_wake(p->reactors[r]);
}

/* ------------------------------------------------------------------ introspection */

int cr_lf_pool_self(const struct cr_lf_pool *p)
{
    const struct lf_slot *s = tls_slot;

    return s != NULL && s->pool == p && s->idx < p->nthreads ? (int)s->idx : -1;
}

unsigned cr_lf_pool_default_sets(unsigned threads, unsigned max)
{
    unsigned n = (unsigned)cr_cpu_usable();
    unsigned by_threads = threads / CR_LF_POOL_THREADS_PER_SET;

    if (threads > 0 && by_threads < n)
        n = by_threads > 0 ? by_threads : 1;
    return n < max ? n : max;
}

unsigned cr_lf_pool_stats(const struct cr_lf_pool *p, uint64_t *promotions,
                          struct cr_worker_stats *workers, unsigned max)
{
    unsigned m = max < p->nthreads ? max : p->nthreads;
    uint64_t now = cr_clock_now_ns();

    /* Every load below is relaxed: statistics (see the fields). */
    if (promotions != NULL) {
        uint64_t sum = 0;

        for (unsigned g = 0; g < p->ngroups; g++)
            sum += __atomic_load_n(&p->groups[g].promotions, __ATOMIC_RELAXED);
        *promotions = sum;
    }
    if (workers == NULL)
        return p->nthreads;
    /*
     * Roles are read one by one, so a hand-over between two reads could show
     * both leaders. Read each reactor's leader once first, and report LEADER
     * only for a thread that both says so and is one of them: never more
     * leaders than reactors. A thread that took over after that read still
     * shows as the follower it just was.
     */
    for (unsigned i = 0; i < m; i++)
        workers[i].role = CR_ROLE_COUNT; /* "not a leader seen" */
    for (unsigned r = 0; r < p->nreactors; r++) {
        /* Relaxed: a sample; see struct lf_lead. */
        int l = __atomic_load_n(&p->lead[r].slot, __ATOMIC_RELAXED);

        if (l >= 0 && (unsigned)l < m)
            workers[l].role = CR_ROLE_LEADER;
    }
    for (unsigned i = 0; i < m; i++) {
        bool seen_leading = workers[i].role == CR_ROLE_LEADER;

        cr__role_read(&p->slots[i].clock, now, &workers[i]);
        if (workers[i].role == CR_ROLE_LEADER && !seen_leading)
            workers[i].role = CR_ROLE_FOLLOWER;
        if (p->ngroups == p->nreactors)
            workers[i].group = p->slots[i].group; /* else one group leads every set */
    }
    return p->nthreads;
}
