/*
 * test_lf_pool.c - the Leader/Followers pool under every promotion order (Check
 * loop tests over cr_lf_pool_promotions()): exactly-once dispatch of one-shot
 * pipes with no handle processed by two threads at once, blocking handlers
 * not stopping the others, stats while running (at most one leader per
 * reactor, promotions, time per role) and after stop, the promotion orders
 * themselves (lifo, fifo, priority) on serialized events, a parked follower
 * taking over from a blocking handler, two reactors with split and shared
 * followers, hybrid waits (notify, nested waits that would deadlock a plain
 * pool, timeout, cancel on stop), join from an outside thread, stop in every
 * role, stress tests (lock-free stack, shared followers) and bad input.
 *
 * Determinism: order tests trigger one event at a time and first wait (by
 * polling the stats) until every thread is parked, and assert only what the
 * order decides whichever way the race between a rejoining thread and a
 * woken follower goes; then again with each handler held until the woken
 * follower leads (no race: the whole order is asserted); the other tests assert counts, invariants
 * and orderings, never durations. Handler threads record into atomics; the test thread asserts.
 */
#include <cabrank/clock.h>
#include <cabrank/lf_pool.h>
#include <cabrank/reactor.h>

#include "../support/support.h"
#include "pool/lf_pool_internal.h"

#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CHANS   32
#define MAX_LOG     64
#define WAIT_MS     5000 /* bound on every poll for a condition */
#define GATE_MS     5000 /* bound on every blocked handler */
#define MAX_WORKERS 16

enum mode {
    MODE_COUNT,      /* read one byte, count, reactivate */
    MODE_SLOW,       /* also take ctx.slow_us */
    MODE_CONCURRENT, /* also stay inside until `goal` handlers are */
    MODE_GATED,      /* also stay inside until the channel's gate opens */
    MODE_REQUEST,    /* hybrid: wait for a reply (see on_request) */
    MODE_REPLY,      /* hybrid: notify the matching request's waiter */
    MODE_WAIT_GATED, /* hybrid: wait until notified, then stay until the gate opens */
    MODE_LEND,       /* MODE_COUNT, lending the end reading (cr_clock_end_ns) */
    MODE_STEP,       /* also stay inside until the gate passes the events handled */
};

struct ctx;

struct chan {
    int fds[2];
    struct ctx *ctx;
    struct cr_reactor *r;
    int id;
    enum mode mode;
    /* Atomics written by handlers, read by the test thread. */
    int in_use;
    uint64_t handled;
    int last_self;
    int gate;
    int entered;  /* MODE_WAIT_GATED: about to wait */
    int returned; /* MODE_WAIT_GATED: the wait returned */
};

struct ctx {
    struct cr_lf_pool *p;
    struct chan chans[MAX_CHANS];
    int nchans;
    /* Atomics written by handlers. */
    uint64_t total;
    int overlaps;           /* a handle entered by two threads at once */
    int empty;              /* dispatched with nothing to read */
    uint64_t resumed_after; /* the handler's event time across a wait, ns */
    uint64_t lent_used;     /* MODE_LEND: events taken at the thread's lent reading */
    uint64_t time_back;     /* MODE_LEND: events older than the thread's last reading */
    int errors;
    int inside;
    int max_inside;
    int goal;
    unsigned slow_us;
    int log[MAX_LOG]; /* cr_lf_pool_self() of each event, in order */
    int nlog;
    /* Hybrid waits. */
    struct cr_lf_waiter waiters[MAX_CHANS];
    int wait_rc[MAX_CHANS];
    int requests_in;
    int requests_done;
    int reply_base; /* chans[reply_base + i] is request i's reply */
    int nrequests;
    int hooks_started;
    int hooks_stopped;
};

static int order_count(void)
{
    int n = 0;

    while (cr_lf_pool_promotions()[n] != NULL)
        n++;
    return n;
}

static const char *order_at(int i)
{
    return cr_lf_pool_promotions()[i];
}

static bool is_order(int i, const char *name)
{
    return strcmp(order_at(i), name) == 0;
}

static void sleep_ms(unsigned ms)
{
    usleep(ms * 1000);
}

static int load_int(const int *v)
{
    return __atomic_load_n(v, __ATOMIC_ACQUIRE);
}

static uint64_t load_u64(const uint64_t *v)
{
    return __atomic_load_n(v, __ATOMIC_ACQUIRE);
}

/* Stays inside until *flag >= goal or GATE_MS pass. */
static void hold_until(const int *flag, int goal)
{
    uint64_t end = cr_test_now_ms() + GATE_MS;

    while (load_int(flag) < goal && cr_test_now_ms() < end)
        sleep_ms(1);
}

static void open_gate(struct chan *c)
{
    __atomic_store_n(&c->gate, 1, __ATOMIC_RELEASE);
}

/* MODE_LEND: the reading this thread's last handler lent. */
static _Thread_local uint64_t tl_lent;

/* An event is never older than the reading its thread lent last (the pool
 * takes at it or later), and counts when it was taken at exactly that. */
static void check_lent(struct ctx *x)
{
    uint64_t at = cr_clock_event_ns();

    if (at == tl_lent)
        __atomic_fetch_add(&x->lent_used, 1, __ATOMIC_RELAXED);
    else if (at < tl_lent)
        __atomic_fetch_add(&x->time_back, 1, __ATOMIC_RELAXED);
}

static void on_reply(struct chan *c);
static void on_wait_gated(struct chan *c);
static void on_request(struct chan *c);

static void on_event(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct chan *c = arg;
    struct ctx *x = c->ctx;
    int zero = 0;
    int now_inside;
    int max;
    char b;

    (void)events;
    if (c->mode == MODE_LEND)
        check_lent(x);
    /* First: the test reads it once `inside` counts this handler. */
    __atomic_store_n(&c->last_self, cr_lf_pool_self(x->p), __ATOMIC_RELEASE);
    if (!__atomic_compare_exchange_n(&c->in_use, &zero, 1, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        __atomic_fetch_add(&x->overlaps, 1, __ATOMIC_RELAXED);
    now_inside = __atomic_add_fetch(&x->inside, 1, __ATOMIC_ACQ_REL);
    max = __atomic_load_n(&x->max_inside, __ATOMIC_ACQUIRE);
    while (now_inside > max && !__atomic_compare_exchange_n(&x->max_inside, &max, now_inside, false,
                                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        ;
    if (read(fd, &b, 1) != 1)
        __atomic_fetch_add(&x->empty, 1, __ATOMIC_RELAXED);
    if (c->mode == MODE_SLOW)
        usleep(x->slow_us);
    else if (c->mode == MODE_CONCURRENT)
        hold_until(&x->max_inside, x->goal);
    else if (c->mode == MODE_GATED)
        hold_until(&c->gate, 1);
    else if (c->mode == MODE_STEP)
        hold_until(&c->gate, (int)load_u64(&c->handled) + 1);
    else if (c->mode == MODE_REQUEST)
        on_request(c);
    else if (c->mode == MODE_REPLY)
        on_reply(c);
    else if (c->mode == MODE_WAIT_GATED)
        on_wait_gated(c);
    {
        int k = __atomic_fetch_add(&x->nlog, 1, __ATOMIC_ACQ_REL);

        if (k < MAX_LOG)
            __atomic_store_n(&x->log[k], cr_lf_pool_self(x->p), __ATOMIC_RELEASE);
    }
    __atomic_fetch_sub(&x->inside, 1, __ATOMIC_ACQ_REL);
    __atomic_store_n(&c->in_use, 0, __ATOMIC_RELEASE);
    __atomic_fetch_add(&c->handled, 1, __ATOMIC_ACQ_REL);
    __atomic_fetch_add(&x->total, 1, __ATOMIC_ACQ_REL);
    if (c->mode == MODE_LEND)
        tl_lent = cr_clock_end_ns();
    /* Last: once reactivated, another thread may take the handle. */
    if (cr_reactor_reactivate(r, fd) < 0)
        __atomic_fetch_add(&x->errors, 1, __ATOMIC_RELAXED);
}

/* Adds a one-shot pipe to r. */
static struct chan *add_chan(struct ctx *x, struct cr_reactor *r, enum mode mode)
{
    struct chan *c = &x->chans[x->nchans];

    ck_assert_int_lt(x->nchans, MAX_CHANS);
    c->id = x->nchans++;
    c->ctx = x;
    c->r = r;
    c->mode = mode;
    c->last_self = -2;
    ck_assert_int_eq(pipe2(c->fds, O_CLOEXEC | O_NONBLOCK), 0);
    ck_assert_int_eq(cr_reactor_add(r, c->fds[0], CR_EV_READ, CR_REACTOR_ONESHOT, on_event, c), 0);
    return c;
}

static void poke(struct chan *c)
{
    ck_assert_int_eq(write(c->fds[1], "x", 1), 1);
}

/* poke for handler threads (Check asserts belong to the test thread). */
static void poke_from_handler(struct chan *c)
{
    if (write(c->fds[1], "x", 1) != 1)
        __atomic_fetch_add(&c->ctx->errors, 1, __ATOMIC_RELAXED);
}

static void close_chans(struct ctx *x)
{
    for (int i = 0; i < x->nchans; i++) {
        ck_assert_int_eq(cr_reactor_remove(x->chans[i].r, x->chans[i].fds[0]), 0);
        close(x->chans[i].fds[0]);
        close(x->chans[i].fds[1]);
    }
}

static struct cr_reactor *make_reactor(void)
{
    struct cr_reactor *r;

    ck_assert_int_eq(cr_reactor_create(&r, NULL), 0);
    return r;
}

/* A promotion delay the deferred tests use: long against a quick handler,
 * short against WAIT_MS. */
#define DELAY_US 2000

/* The orders that take a promotion delay. */
static const char *const deferring[] = {"lifo"};

static struct cr_lf_pool *make_deferred_pool(struct cr_reactor **rs, unsigned nr, unsigned threads,
                                             const char *promotion, unsigned delay_us)
{
    struct cr_lf_pool_config cfg = {
        .threads = threads,
        .promotion = promotion,
        .reactors = rs,
        .nreactors = nr,
        .promotion_delay_us = delay_us,
    };
    struct cr_lf_pool *p;

    ck_assert_int_eq(cr_lf_pool_create(&p, &cfg), 0);
    return p;
}

static struct cr_lf_pool *make_pool(struct cr_reactor **rs, unsigned nr, unsigned threads,
                                    const char *promotion, bool shared, const int *prio)
{
    struct cr_lf_pool_config cfg = {
        .threads = threads,
        .promotion = promotion,
        .reactors = rs,
        .nreactors = nr,
        .shared_followers = shared,
        .priorities = prio,
    };
    struct cr_lf_pool *p;

    ck_assert_int_eq(cr_lf_pool_create(&p, &cfg), 0);
    return p;
}

struct census {
    unsigned role[CR_ROLE_COUNT];
    uint64_t events;
    uint64_t promotions;
};

static void census(struct cr_lf_pool *p, struct census *c)
{
    struct cr_worker_stats w[MAX_WORKERS];
    unsigned n = cr_lf_pool_stats(p, &c->promotions, w, MAX_WORKERS);

    ck_assert_uint_le(n, MAX_WORKERS);
    memset(c->role, 0, sizeof(c->role));
    c->events = 0;
    for (unsigned i = 0; i < n; i++) {
        c->role[w[i].role]++;
        c->events += w[i].events;
    }
}

/* Polls until the pool shows exactly these leaders, followers and (unless
 * events < 0) events dispatched. */
static bool wait_roles(struct cr_lf_pool *p, unsigned leaders, unsigned followers, long events)
{
    uint64_t end = cr_test_now_ms() + WAIT_MS;
    struct census c;

    do {
        census(p, &c);
        if (c.role[CR_ROLE_LEADER] == leaders && c.role[CR_ROLE_FOLLOWER] == followers &&
            (events < 0 || c.events == (uint64_t)events))
            return true;
        sleep_ms(1);
    } while (cr_test_now_ms() < end);
    return false;
}

static bool wait_count(const uint64_t *v, uint64_t want)
{
    uint64_t end = cr_test_now_ms() + WAIT_MS * 2;

    while (load_u64(v) < want) {
        if (cr_test_now_ms() >= end)
            return false;
        sleep_ms(1);
    }
    return true;
}

static bool wait_int(const int *v, int want)
{
    uint64_t end = cr_test_now_ms() + WAIT_MS;

    while (load_int(v) < want) {
        if (cr_test_now_ms() >= end)
            return false;
        sleep_ms(1);
    }
    return true;
}

static void stop_and_join(struct cr_lf_pool *p)
{
    struct cr_worker_stats w[MAX_WORKERS];
    unsigned n;

    cr_lf_pool_stop(p);
    ck_assert_int_eq(cr_lf_pool_join_all(p), 0);
    n = cr_lf_pool_stats(p, NULL, w, MAX_WORKERS);
    for (unsigned i = 0; i < n && i < MAX_WORKERS; i++)
        ck_assert_int_eq(w[i].role, CR_ROLE_STOPPED);
}

/* Frees a stopped test: pool, channels, reactor, context. */
static void destroy_all(struct ctx *x, struct cr_reactor *r)
{
    cr_lf_pool_destroy(x->p);
    close_chans(x);
    cr_reactor_destroy(r);
    free(x);
}

static void check_clean(struct ctx *x)
{
    ck_assert_int_eq(load_int(&x->overlaps), 0);
    ck_assert_int_eq(load_int(&x->empty), 0);
    ck_assert_int_eq(load_int(&x->errors), 0);
}

/* ------------------------------------------------------------------ dispatch */

static void handle_every_byte_once(const char *order, unsigned delay_us)
{
    enum { NCHANS = 8, BYTES = 2000 };
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();
    char buf[16];

    for (int i = 0; i < NCHANS; i++)
        add_chan(x, r, MODE_COUNT);
    x->p = make_deferred_pool(&r, 1, 4, order, delay_us);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    for (int i = 0; i < BYTES; i++)
        poke(&x->chans[i % NCHANS]);
    ck_assert_msg(wait_count(&x->total, BYTES), "%s: %llu of %d handled", order,
                  (unsigned long long)load_u64(&x->total), BYTES);
    stop_and_join(x->p);
    check_clean(x);
    ck_assert_uint_eq(load_u64(&x->total), BYTES);
    for (int i = 0; i < NCHANS; i++) {
        ck_assert_uint_eq(load_u64(&x->chans[i].handled), BYTES / NCHANS);
        ck_assert_int_eq(read(x->chans[i].fds[0], buf, sizeof(buf)), -1); /* nothing left */
    }
    {
        struct census c;

        census(x->p, &c);
        ck_assert_uint_eq(c.events, BYTES);
    }
    destroy_all(x, r);
}

START_TEST(every_byte_is_handled_once_and_no_handle_by_two_threads)
{
    handle_every_byte_once(order_at(_i), 0);
}
END_TEST

START_TEST(deferred_promotion_handles_every_byte_once)
{
    handle_every_byte_once(deferring[_i], DELAY_US);
}
END_TEST

enum { BATCH_CHANS = 8, BATCH_ROUNDS = 50 };

/* Rounds of BATCH_CHANS handles of `mode` made ready together on a deferring
 * pool of two threads, so most waits fetch several; returns the pool's
 * retakes, with the pool stopped and checked clean (x and r still to free). */
static uint64_t run_batches(struct ctx *x, struct cr_reactor *r, enum mode mode, const char *order)
{
    uint64_t retakes;

    for (int i = 0; i < BATCH_CHANS; i++)
        add_chan(x, r, mode);
    x->p = make_deferred_pool(&r, 1, 2, order, DELAY_US);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    for (int k = 1; k <= BATCH_ROUNDS; k++) {
        for (int i = 0; i < BATCH_CHANS; i++)
            poke(&x->chans[i]);
        ck_assert(wait_count(&x->total, (uint64_t)k * BATCH_CHANS));
    }
    retakes = cr__lf_pool_retakes(x->p);
    stop_and_join(x->p);
    check_clean(x);
    return retakes;
}

/*
 * A thread back from a deferred turn takes the rest of the batch its reactor
 * fetched without rejoining (no lead and unlead between two events), and the
 * handles are still dispatched once each, one thread at a time.
 */
START_TEST(deferred_leader_takes_the_fetched_batch_without_rejoining)
{
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();
    uint64_t retakes = run_batches(x, r, MODE_COUNT, deferring[_i]);

    for (int i = 0; i < BATCH_CHANS; i++)
        ck_assert_uint_eq(load_u64(&x->chans[i].handled), BATCH_ROUNDS);
    ck_assert_msg(retakes > 0 && retakes < (uint64_t)BATCH_ROUNDS * BATCH_CHANS, "%s: %llu retakes",
                  deferring[_i], (unsigned long long)retakes);
    destroy_all(x, r);
}
END_TEST

/*
 * A thread back from a deferred turn takes the next fetched event at the
 * reading its handler lent at its end (cr_clock_end_ns) and reads no clock:
 * some events carry exactly that time, and none is older than its thread's
 * last reading.
 */
START_TEST(deferred_leader_takes_at_the_reading_its_handler_lent)
{
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();
    uint64_t retakes = run_batches(x, r, MODE_LEND, deferring[_i]);

    ck_assert_uint_gt(retakes, 0);
    ck_assert_uint_ge(load_u64(&x->lent_used), retakes);
    ck_assert_uint_eq(load_u64(&x->time_back), 0);
    destroy_all(x, r);
}
END_TEST

/* Without a delay every turn is handed over: nothing is taken so. */
START_TEST(eager_promotion_takes_nothing_without_rejoining)
{
    enum { NCHANS = 8, ROUNDS = 10 };
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();

    for (int i = 0; i < NCHANS; i++)
        add_chan(x, r, MODE_COUNT);
    x->p = make_deferred_pool(&r, 1, 2, deferring[_i], 0);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    for (int k = 1; k <= ROUNDS; k++) {
        for (int i = 0; i < NCHANS; i++)
            poke(&x->chans[i]);
        ck_assert(wait_count(&x->total, (uint64_t)k * NCHANS));
    }
    ck_assert_uint_eq(cr__lf_pool_retakes(x->p), 0);
    stop_and_join(x->p);
    check_clean(x);
    destroy_all(x, r);
}
END_TEST

static void run_blocking_handlers_together(const char *order, unsigned delay_us)
{
    enum { THREADS = 4 };
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();
    struct census c;

    x->goal = THREADS;
    for (int i = 0; i < THREADS; i++)
        add_chan(x, r, MODE_CONCURRENT);
    x->p = make_deferred_pool(&r, 1, THREADS, order, delay_us);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    ck_assert(wait_roles(x->p, 1, THREADS - 1, 0));
    for (int i = 0; i < THREADS; i++)
        poke(&x->chans[i]);
    ck_assert(wait_count(&x->total, THREADS));
    /* Each handler stays inside until all are: only true concurrency ends it
     * early (a serialized pool would reach max 1 after GATE_MS each). */
    ck_assert_int_eq(load_int(&x->max_inside), THREADS);
    census(x->p, &c);
    ck_assert_uint_ge(c.promotions, 1);
    stop_and_join(x->p);
    check_clean(x);
    destroy_all(x, r);
}

START_TEST(blocking_handlers_do_not_stop_the_others)
{
    run_blocking_handlers_together(order_at(_i), 0);
}
END_TEST

/* Each blocked handler is seen by the watchdog and its reactor handed on. */
START_TEST(deferred_promotion_still_runs_blocking_handlers_together)
{
    run_blocking_handlers_together(deferring[_i], DELAY_US);
}
END_TEST

/*
 * The point of the delay: handlers that return at once cost no wake. One
 * event at a time, each waited for; eager promotion wakes the parked
 * follower for nearly every one, deferred promotion for about none.
 */
#define QUICK_EVENTS 200

struct quick_counts {
    uint64_t promotions;
    uint64_t deferred;
    uint64_t taken_over;
};

static struct quick_counts promotions_for_quick_events(const char *order, unsigned delay_us)
{
    enum { EVENTS = QUICK_EVENTS };
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();
    struct chan *c = add_chan(x, r, MODE_COUNT);
    struct quick_counts qc;
    struct census cs;

    x->p = make_deferred_pool(&r, 1, 2, order, delay_us);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    for (int k = 0; k < EVENTS; k++) {
        ck_assert(wait_roles(x->p, 1, 1, -1));
        poke(c);
        ck_assert(wait_count(&c->handled, (uint64_t)k + 1));
        /* Time for an eagerly woken follower to run and park again: until
         * it has, the next turn wakes nobody (it is still on its way). */
        usleep(200);
    }
    census(x->p, &cs);
    ck_assert_uint_eq(cs.events, EVENTS);
    qc.promotions = cs.promotions;
    cr_lf_pool_deferrals(x->p, &qc.deferred, &qc.taken_over);
    stop_and_join(x->p);
    check_clean(x);
    destroy_all(x, r);
    return qc;
}

/*
 * More work than one thread keeps up with: no handler runs a delay (each
 * sleeps a quarter of one), but the fetched events wait longer than a delay
 * for the one thread, so the watchdog brings the follower in.
 */
START_TEST(deferred_promotion_adds_a_thread_when_fetched_events_wait)
{
    enum { NCHANS = 20 };
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();
    struct chan *warm;

    x->slow_us = DELAY_US / 4;
    for (int i = 0; i < NCHANS; i++)
        add_chan(x, r, MODE_SLOW);
    warm = add_chan(x, r, MODE_COUNT);
    x->p = make_deferred_pool(&r, 1, 2, deferring[_i], DELAY_US);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    ck_assert(wait_roles(x->p, 1, 1, -1));
    /* A first quick turn, deferred like those that follow. */
    poke(warm);
    ck_assert(wait_count(&warm->handled, 1));
    ck_assert(wait_roles(x->p, 1, 1, -1));
    __atomic_store_n(&x->max_inside, 0, __ATOMIC_RELEASE);
    for (int i = 0; i < NCHANS; i++)
        poke(&x->chans[i]);
    ck_assert(wait_count(&x->total, NCHANS + 1));
    ck_assert_msg(load_int(&x->max_inside) == 2, "%s: at most %d inside", deferring[_i],
                  load_int(&x->max_inside));
    stop_and_join(x->p);
    check_clean(x);
    destroy_all(x, r);
}
END_TEST

START_TEST(deferred_promotion_wakes_nobody_for_quick_handlers)
{
    struct quick_counts eager = promotions_for_quick_events(deferring[_i], 0);
    struct quick_counts deferred = promotions_for_quick_events(deferring[_i], DELAY_US);

    /* The control: the same events without a delay wake for most of them
     * (all 200 here, idle or loaded, with the pause above; without it a
     * loaded machine once gave 53: a follower still on its way misses the
     * turn after). */
    ck_assert_msg(eager.promotions >= 100, "%s: %llu promotions without a delay", deferring[_i],
                  (unsigned long long)eager.promotions);
    ck_assert_uint_eq(eager.deferred, 0);
    ck_assert_uint_eq(eager.taken_over, 0);
    /* A loaded machine can hold a handler past the delay now and then. */
    ck_assert_msg(deferred.promotions <= 20, "%s: %llu promotions with a delay", deferring[_i],
                  (unsigned long long)deferred.promotions);
    /* The counters say so: every turn deferred (each given up with the
     * follower parked and its batch empty), few taken over. */
    ck_assert_msg(deferred.deferred == QUICK_EVENTS, "%s: %llu deferred", deferring[_i],
                  (unsigned long long)deferred.deferred);
    ck_assert_uint_le(deferred.taken_over, deferred.promotions);
}
END_TEST

/*
 * The watchdog sleeps while turns are quick: each deferring leader keeps its
 * reactor's timer from going off, where a watchdog that looks every delay
 * (as it once did) looks some 30 times here. A look is a gap between events
 * of half a delay or more, which a loaded machine makes now and then: the
 * test measures its own gaps (poke to poke; a stalled leader stretches them
 * too, as each poke waits for the last event) and allows a look per delay
 * of each gap of half a delay or more, beyond MAX_LOOKS. Where what it
 * allows reaches what the old watchdog did, the run cannot tell: skipped.
 */
START_TEST(deferred_promotion_watchdog_sleeps_while_turns_are_quick)
{
    enum { DELAY = 20000, RUN_MS = 600, MAX_EVENTS = 200000, MAX_LOOKS = 6 };
    const uint64_t delay_ns = (uint64_t)DELAY * 1000;
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();
    struct chan *c = add_chan(x, r, MODE_COUNT);
    uint64_t start;
    uint64_t prev;
    uint64_t now;
    uint64_t deferred;
    uint64_t looks;
    uint64_t excused = 0; /* looks the measured gaps allow */
    uint64_t k = 0;

    x->p = make_deferred_pool(&r, 1, 2, deferring[_i], DELAY);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    ck_assert(wait_roles(x->p, 1, 1, -1));
    start = cr_clock_now_ns();
    prev = start;
    for (;;) {
        now = cr_clock_now_ns();
        if (now - prev >= delay_ns / 2)
            excused += (now - prev) / delay_ns + 1;
        prev = now;
        if (k >= MAX_EVENTS || now - start >= RUN_MS * CR_NSEC_PER_MSEC)
            break;
        poke(c);
        ck_assert(wait_count(&c->handled, ++k));
    }
    looks = cr__lf_pool_looks(x->p);
    cr_lf_pool_deferrals(x->p, &deferred, NULL);
    /* The control: the turns were deferred, so the timer had work. */
    ck_assert_msg(deferred >= k / 2, "%s: %llu of %llu turns deferred", deferring[_i],
                  (unsigned long long)deferred, (unsigned long long)k);
    if (looks > MAX_LOOKS && MAX_LOOKS + excused >= RUN_MS * CR_NSEC_PER_MSEC / delay_ns)
        cr_test_skip("lf_pool: the watchdog sleeps while turns are quick",
                     "this thread stalled too often to tell");
    else
        ck_assert_msg(looks <= MAX_LOOKS + excused,
                      "%s: %llu looks in %d ms of %llu quick turns (%llu allowed by its gaps)",
                      deferring[_i], (unsigned long long)looks, RUN_MS, (unsigned long long)k,
                      (unsigned long long)excused);
    stop_and_join(x->p);
    check_clean(x);
    destroy_all(x, r);
}
END_TEST

static void hook_start(unsigned idx, void *arg)
{
    struct ctx *x = arg;

    (void)idx;
    __atomic_fetch_add(&x->hooks_started, 1, __ATOMIC_ACQ_REL);
}

static void hook_stop(unsigned idx, void *arg)
{
    struct ctx *x = arg;

    (void)idx;
    __atomic_fetch_add(&x->hooks_stopped, 1, __ATOMIC_ACQ_REL);
}

struct writer {
    struct ctx *x;
    int bytes;
    int nchans;
};

static void *write_bytes(void *arg)
{
    struct writer *wr = arg;

    for (int i = 0; i < wr->bytes; i++) {
        struct chan *c = &wr->x->chans[i % wr->nchans];

        while (write(c->fds[1], "x", 1) != 1)
            sleep_ms(1); /* pipe full */
    }
    return NULL;
}

START_TEST(stats_show_one_leader_per_reactor_while_running_and_stopped_after)
{
    enum { THREADS = 4, NCHANS = 4, BYTES = 1500 };
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();
    struct cr_lf_pool_config cfg = {
        .threads = THREADS,
        .promotion = order_at(_i),
        .reactors = &r,
        .nreactors = 1,
        .on_thread_start = hook_start,
        .on_thread_stop = hook_stop,
        .thread_arg = x,
    };
    struct writer wr = {.x = x, .bytes = (int)BYTES, .nchans = NCHANS};
    struct cr_worker_stats w[THREADS];
    uint64_t promotions;
    uint64_t leader_ns = 0;
    uint64_t follower_ns = 0;
    pthread_t t;
    int samples = 0;

    for (int i = 0; i < NCHANS; i++)
        add_chan(x, r, MODE_COUNT);
    ck_assert_int_eq(cr_lf_pool_create(&x->p, &cfg), 0);
    ck_assert_uint_eq(cr_lf_pool_stats(x->p, NULL, NULL, 0), THREADS);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    ck_assert(wait_roles(x->p, 1, THREADS - 1, 0));
    ck_assert_int_eq(load_int(&x->hooks_started), THREADS);
    ck_assert_int_eq(pthread_create(&t, NULL, write_bytes, &wr), 0);
    while (load_u64(&x->total) < BYTES && samples < 200000) {
        struct census c;

        census(x->p, &c);
        ck_assert_uint_le(c.role[CR_ROLE_LEADER], 1);
        ck_assert_uint_eq(c.role[CR_ROLE_STOPPED], 0);
        samples++;
    }
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert(wait_count(&x->total, BYTES));
    ck_assert(wait_roles(x->p, 1, THREADS - 1, BYTES));
    /* The first event found three parked followers: at least one promotion. */
    ck_assert_uint_eq(cr_lf_pool_stats(x->p, &promotions, w, THREADS), THREADS);
    ck_assert_uint_ge(promotions, 1);
    for (int i = 0; i < THREADS; i++) {
        leader_ns += w[i].role_ns[CR_ROLE_LEADER];
        follower_ns += w[i].role_ns[CR_ROLE_FOLLOWER];
    }
    ck_assert_uint_gt(leader_ns, 0);
    ck_assert_uint_gt(follower_ns, 0);
    stop_and_join(x->p);
    ck_assert_int_eq(load_int(&x->hooks_stopped), THREADS);
    check_clean(x);
    destroy_all(x, r);
}
END_TEST

/* ------------------------------------------------------------------ promotion orders */

/* Sends `events` bytes one at a time, each only once every thread is parked
 * again, and returns who handled each in x->log. */
static void serialized_events(struct ctx *x, struct chan *c, unsigned threads, int events)
{
    for (int k = 0; k < events; k++) {
        ck_assert_msg(wait_roles(x->p, 1, threads - 1, k), "not parked before event %d", k);
        poke(c);
        ck_assert(wait_count(&x->total, (uint64_t)k + 1));
    }
    ck_assert(wait_roles(x->p, 1, threads - 1, events));
}

/*
 * As serialized_events, but each handler stays inside until the follower
 * woken for its turn leads: no race, so the order alone says who handles
 * each event. Logs from x->log[from].
 */
static void stepped_events(struct ctx *x, struct chan *c, unsigned threads, int from, int events)
{
    for (int k = 0; k < events; k++) {
        ck_assert_msg(wait_roles(x->p, 1, threads - 1, from + k), "not parked before step %d", k);
        poke(c);
        /* The handler's thread processes; a follower leads in its place. */
        ck_assert_msg(wait_roles(x->p, 1, threads - 2, -1), "nobody led during step %d", k);
        __atomic_store_n(&c->gate, k + 1, __ATOMIC_RELEASE);
        ck_assert(wait_count(&x->total, (uint64_t)(from + k) + 1));
    }
    ck_assert(wait_roles(x->p, 1, threads - 1, from + events));
}

START_TEST(followers_are_promoted_in_the_configured_order)
{
    enum { THREADS = 3, EVENTS = 12 };
    static const int prio[THREADS] = {5, 20, 10};
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();
    struct chan *c = add_chan(x, r, MODE_COUNT);
    struct chan *step = add_chan(x, r, MODE_STEP);
    const int *h = x->log;
    const int *g = x->log + EVENTS;
    bool lifo = is_order(_i, "lifo") || is_order(_i, "lifo-lockfree");

    x->p = make_pool(&r, 1, THREADS, order_at(_i), false, prio);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    serialized_events(x, c, THREADS, EVENTS);
    for (int k = 0; k < EVENTS; k++)
        ck_assert_int_ge(h[k], 0);
    /*
     * Each event: the leader wakes the first follower in order for the turn
     * it gives up, then handles the event and rejoins - racing the woken
     * follower, which has not run yet. Whether the rejoining thread may take
     * the turn first is the order's to say; either way it is one of the
     * two, so only the rest of the order is deterministic.
     */
    if (lifo) {
        /* Both racers are the two most recently active threads: the one
         * parked longest, at the bottom of the stack, never leads. */
        int a = h[0];
        int b = -1;

        for (int k = 1; k < EVENTS; k++) {
            if (h[k] != a && b < 0)
                b = h[k];
            ck_assert_msg(h[k] == a || h[k] == b, "lifo: event %d by a third thread %d (%d, %d)", k,
                          h[k], a, b);
        }
    } else if (is_order(_i, "fifo")) {
        /* A woken follower keeps its turn (it waited longest) and the
         * rejoining leader queues behind the others: round robin. */
        for (int k = 1; k < EVENTS; k++)
            ck_assert_msg(h[k] != h[k - 1], "fifo: event %d by %d again", k, h[k]);
        for (int k = 3; k < EVENTS; k++)
            ck_assert_msg(h[k] == h[k - 3], "fifo: event %d by %d, expected %d", k, h[k], h[k - 3]);
    } else if (is_order(_i, "priority")) {
        for (int k = 1; k < EVENTS; k++) {
            /* Threads 1 (20) and 2 (10) outrank thread 0 (5), which never
             * leads again once both have a turn to hand over. */
            ck_assert_msg(h[k] == 1 || h[k] == 2, "priority: event %d by %d", k, h[k]);
            /* Thread 2 may not take back a turn that thread 1 was woken
             * for; thread 1 may take back one that 2 was woken for. */
            if (h[k - 1] == 2)
                ck_assert_msg(h[k] == 1, "priority: event %d by %d after 2", k, h[k]);
        }
    }
    /*
     * Then without the race: each handler stays inside until the follower
     * woken for its turn leads, so that follower is the order's choice and
     * the handler's thread rejoins after it. lifo: the follower that parked
     * last, i.e. the previous event's thread, so two threads alternate and
     * the third never leads; fifo: the one that waited longest, round robin;
     * priority: the highest parked, so threads 1 and 2 alternate.
     */
    stepped_events(x, step, THREADS, EVENTS, EVENTS);
    for (int k = 1; k < EVENTS; k++) {
        if (is_order(_i, "native"))
            break; /* whichever follower the OS wakes */
        ck_assert_msg(g[k] != g[k - 1], "%s: step %d by %d again", order_at(_i), k, g[k]);
        if (lifo && k >= 2)
            ck_assert_msg(g[k] == g[k - 2], "%s: step %d by %d, not %d, who parked last",
                          order_at(_i), k, g[k], g[k - 2]);
        else if (is_order(_i, "fifo") && k >= 3)
            ck_assert_msg(g[k] == g[k - 3], "fifo: step %d by %d, expected %d", k, g[k], g[k - 3]);
        else if (is_order(_i, "priority"))
            ck_assert_msg(g[k] == 1 || g[k] == 2, "priority: step %d by %d", k, g[k]);
    }
    stop_and_join(x->p);
    check_clean(x);
    destroy_all(x, r);
}
END_TEST

/*
 * The reason Leader/Followers promotes before processing: a handler that
 * blocks (a database commit) must not keep other handles from being served
 * while a follower is parked. Each round makes a quick event and a blocking
 * one ready together, so that the blocking one often comes to a leader that
 * took back a turn a woken follower has not claimed yet; another event must
 * then be served while the handler still blocks (its gate stays closed
 * until the test opens it).
 */
static void take_over_from_a_blocked_handler(const char *order, unsigned delay_us)
{
    enum { THREADS = 2, ROUNDS = 30 };
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();
    struct chan *quick = add_chan(x, r, MODE_COUNT);
    struct chan *gate = add_chan(x, r, MODE_GATED);
    struct chan *rec = add_chan(x, r, MODE_COUNT);
    uint64_t deferred;
    uint64_t taken_over;

    x->p = make_deferred_pool(&r, 1, THREADS, order, delay_us);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    for (int k = 0; k < ROUNDS; k++) {
        ck_assert(wait_roles(x->p, 1, 1, -1));
        poke(quick);
        poke(gate);
        ck_assert(wait_count(&quick->handled, (uint64_t)k + 1));
        ck_assert(wait_int(&gate->in_use, 1));
        poke(rec);
        ck_assert_msg(wait_count(&rec->handled, (uint64_t)k + 1), "%s: round %d: not served", order,
                      k);
        ck_assert_msg(load_int(&gate->in_use) == 1 && load_u64(&gate->handled) == (uint64_t)k,
                      "%s: round %d: served only after the blocking handler", order, k);
        open_gate(gate);
        ck_assert(wait_count(&gate->handled, (uint64_t)k + 1));
        __atomic_store_n(&gate->gate, 0, __ATOMIC_RELEASE);
    }
    cr_lf_pool_deferrals(x->p, &deferred, &taken_over);
    if (delay_us != 0) {
        /* Not every round: a blocking event may come to a follower. */
        ck_assert_msg(taken_over >= 1, "%s: %llu taken over of %llu deferred", order,
                      (unsigned long long)taken_over, (unsigned long long)deferred);
        ck_assert_uint_le(taken_over, deferred);
    } else {
        ck_assert_uint_eq(deferred + taken_over, 0);
    }
    stop_and_join(x->p);
    check_clean(x);
    destroy_all(x, r);
}
START_TEST(parked_follower_takes_over_while_a_handler_blocks)
{
    take_over_from_a_blocked_handler(order_at(_i), 0);
}
END_TEST

/* With a delay nobody is woken at the dispatch: the watchdog must see the
 * handler blocked and hand the reactor on. */
START_TEST(deferred_promotion_takes_over_from_a_blocked_handler)
{
    take_over_from_a_blocked_handler(deferring[_i], DELAY_US);
}
END_TEST

/* ------------------------------------------------------------------ several reactors */

START_TEST(split_groups_serve_each_reactor_with_its_own_threads)
{
    enum { THREADS = 3, ROUNDS = 6 };
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *rs[2] = {make_reactor(), make_reactor()};
    struct chan *c0 = add_chan(x, rs[0], MODE_COUNT);
    struct chan *c1 = add_chan(x, rs[1], MODE_COUNT);

    x->p = make_pool(rs, 2, THREADS, order_at(_i), false, NULL);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    /* Thread i serves reactor i % 2: {0, 2} lead rs[0] in turn, 1 leads rs[1]. */
    for (int k = 0; k < ROUNDS; k++) {
        ck_assert(wait_roles(x->p, 2, 1, 2 * k));
        poke(c0);
        ck_assert(wait_count(&c0->handled, (uint64_t)k + 1));
        ck_assert_int_eq(load_int(&c0->last_self) % 2, 0);
        poke(c1);
        ck_assert(wait_count(&c1->handled, (uint64_t)k + 1));
        ck_assert_int_eq(load_int(&c1->last_self), 1);
    }
    stop_and_join(x->p);
    check_clean(x);
    cr_lf_pool_destroy(x->p);
    close_chans(x);
    cr_reactor_destroy(rs[0]);
    cr_reactor_destroy(rs[1]);
    free(x);
}
END_TEST

START_TEST(shared_followers_lead_whichever_reactor_has_no_leader)
{
    enum { THREADS = 3 };
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *rs[2] = {make_reactor(), make_reactor()};
    struct cr_lf_pool_config cfg = {
        .threads = THREADS,
        .promotion = order_at(_i),
        .reactors = rs,
        .nreactors = 2,
        .shared_followers = true,
    };
    struct chan *gate0 = add_chan(x, rs[0], MODE_GATED);
    struct chan *rec0 = add_chan(x, rs[0], MODE_COUNT);
    struct chan *gate1 = add_chan(x, rs[1], MODE_GATED);
    struct chan *rec1 = add_chan(x, rs[1], MODE_COUNT);
    int tx;
    int tz;
    int ty;

    if (is_order(_i, "lifo-lockfree")) {
        /* Documented: one lock-free word per group, so no shared followers. */
        ck_assert_int_eq(cr_lf_pool_create(&x->p, &cfg), -EINVAL);
        goto out;
    }
    ck_assert_int_eq(cr_lf_pool_create(&x->p, &cfg), 0);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    ck_assert(wait_roles(x->p, 2, 1, 0));
    /* X blocks in a handler of rs[0]; the follower Z is promoted to rs[0]. */
    poke(gate0);
    ck_assert(wait_int(&x->inside, 1));
    ck_assert(wait_roles(x->p, 2, 0, -1));
    tx = load_int(&gate0->last_self);
    poke(rec0);
    ck_assert(wait_count(&rec0->handled, 1));
    tz = load_int(&rec0->last_self);
    ck_assert_int_ne(tz, tx);
    ck_assert(wait_roles(x->p, 2, 0, -1));
    /* Y, the leader of rs[1], blocks too: rs[1] is left leaderless. */
    poke(gate1);
    ck_assert(wait_int(&x->inside, 2));
    ck_assert(wait_roles(x->p, 1, 0, -1));
    ty = load_int(&gate1->last_self);
    ck_assert_int_ne(ty, tx);
    ck_assert_int_ne(ty, tz);
    /* X rejoins: the one leaderless reactor is rs[1], so X leads it. */
    __atomic_store_n(&gate0->gate, 1, __ATOMIC_RELEASE);
    ck_assert(wait_roles(x->p, 2, 0, -1));
    poke(rec1);
    ck_assert(wait_count(&rec1->handled, 1));
    ck_assert_int_eq(load_int(&rec1->last_self), tx);
    __atomic_store_n(&gate1->gate, 1, __ATOMIC_RELEASE);
    ck_assert(wait_roles(x->p, 2, 1, 4));
    stop_and_join(x->p);
    check_clean(x);
    cr_lf_pool_destroy(x->p);
out:
    close_chans(x);
    cr_reactor_destroy(rs[0]);
    cr_reactor_destroy(rs[1]);
    free(x);
}
END_TEST

/* ------------------------------------------------------------------ hybrid waits */

/*
 * Request i waits for its reply. The replies are written only once every
 * request handler is inside at the same time, which a pool of fewer threads
 * reaches only if waiting threads serve other events meanwhile.
 */
static void on_request(struct chan *c)
{
    struct ctx *x = c->ctx;
    int i = c->id;
    int in;

    cr_lf_waiter_init(&x->waiters[i]);
    in = __atomic_add_fetch(&x->requests_in, 1, __ATOMIC_ACQ_REL);
    if (in == x->nrequests) {
        for (int k = 0; k < x->nrequests; k++)
            poke_from_handler(&x->chans[x->reply_base + k]);
    }
    __atomic_store_n(&x->wait_rc[i], cr_lf_pool_wait(x->p, &x->waiters[i], GATE_MS),
                     __ATOMIC_RELEASE);
    __atomic_fetch_add(&x->requests_done, 1, __ATOMIC_ACQ_REL);
}

static void on_reply(struct chan *c)
{
    struct ctx *x = c->ctx;

    cr_lf_pool_notify(x->p, &x->waiters[c->id - x->reply_base]);
}

static void run_requests(struct ctx *x, struct cr_reactor *r, unsigned threads, int nreq,
                         int rounds, const char *promotion)
{
    x->nrequests = nreq;
    for (int i = 0; i < nreq; i++)
        add_chan(x, r, MODE_REQUEST);
    x->reply_base = x->nchans;
    for (int i = 0; i < nreq; i++)
        add_chan(x, r, MODE_REPLY);
    x->p = make_pool(&r, 1, threads, promotion, false, NULL);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    for (int round = 1; round <= rounds; round++) {
        __atomic_store_n(&x->requests_in, 0, __ATOMIC_RELEASE);
        for (int i = 0; i < nreq; i++)
            poke(&x->chans[i]);
        ck_assert_msg(wait_int(&x->requests_done, round * nreq), "%s: round %d: %d done", promotion,
                      round, load_int(&x->requests_done));
        for (int i = 0; i < nreq; i++)
            ck_assert_int_eq(load_int(&x->wait_rc[i]), 0);
        ck_assert(wait_count(&x->total, (uint64_t)(round * 2 * nreq)));
    }
    stop_and_join(x->p);
    check_clean(x);
}

START_TEST(waiting_handlers_keep_serving_so_the_pool_never_deadlocks)
{
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();

    /* 4 requests all waiting at once on 2 threads: nested waits. */
    run_requests(x, r, 2, 4, 3, order_at(_i));
    ck_assert_int_ge(load_int(&x->max_inside), 4);
    destroy_all(x, r);
}
END_TEST

START_TEST(notify_reaches_a_waiter_in_every_role_under_load)
{
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();

    /* Many rounds: waiters are notified as leaders, followers and while
     * processing, and (lock-free) leave slots behind on the idle stack. */
    run_requests(x, r, 4, 6, 60, order_at(_i));
    destroy_all(x, r);
}
END_TEST

/* A handler that waits twice: 50 ms in vain, then until stop. */
static void on_wait_twice(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct ctx *x = arg;
    struct cr_lf_waiter w;
    uint64_t taken;
    char b;

    (void)r;
    (void)events;
    if (read(fd, &b, 1) != 1)
        __atomic_fetch_add(&x->empty, 1, __ATOMIC_RELAXED);
    cr_lf_waiter_init(&w);
    taken = cr_clock_event_ns();
    __atomic_store_n(&x->wait_rc[0], cr_lf_pool_wait(x->p, &w, 50), __ATOMIC_RELEASE);
    /* Timeouts set after a wait count from its end, not from the event. */
    __atomic_store_n(&x->resumed_after, cr_clock_event_ns() - taken, __ATOMIC_RELAXED);
    cr_lf_waiter_init(&w);
    __atomic_store_n(&x->requests_in, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&x->wait_rc[1], cr_lf_pool_wait(x->p, &w, -1), __ATOMIC_RELEASE);
    __atomic_store_n(&x->requests_done, 1, __ATOMIC_RELEASE);
}

START_TEST(wait_times_out_and_is_cancelled_by_stop)
{
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();
    int p[2];

    ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    ck_assert_int_eq(cr_reactor_add(r, p[0], CR_EV_READ, CR_REACTOR_ONESHOT, on_wait_twice, x), 0);
    x->p = make_pool(&r, 1, 2, order_at(_i), false, NULL);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    ck_assert(wait_int(&x->requests_in, 1));
    ck_assert_int_eq(load_int(&x->wait_rc[0]), -ETIMEDOUT);
    ck_assert_uint_ge(__atomic_load_n(&x->resumed_after, __ATOMIC_RELAXED), 50 * CR_NSEC_PER_MSEC);
    /* The waiting thread serves as leader or follower meanwhile: both
     * threads are leader or follower now. */
    ck_assert(wait_roles(x->p, 1, 1, -1));
    cr_lf_pool_stop(x->p);
    ck_assert_int_eq(cr_lf_pool_join_all(x->p), 0);
    ck_assert_int_eq(load_int(&x->requests_done), 1);
    ck_assert_int_eq(load_int(&x->wait_rc[1]), -ECANCELED);
    ck_assert_int_eq(load_int(&x->empty), 0);
    cr_lf_pool_destroy(x->p);
    ck_assert_int_eq(cr_reactor_remove(r, p[0]), 0);
    close(p[0]);
    close(p[1]);
    cr_reactor_destroy(r);
    free(x);
}
END_TEST

static void on_wait_gated(struct chan *c)
{
    struct ctx *x = c->ctx;

    cr_lf_waiter_init(&x->waiters[c->id]);
    __atomic_store_n(&c->entered, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&x->wait_rc[c->id], cr_lf_pool_wait(x->p, &x->waiters[c->id], GATE_MS),
                     __ATOMIC_RELEASE);
    __atomic_store_n(&c->returned, 1, __ATOMIC_RELEASE);
    hold_until(&c->gate, 1);
}

static enum cr_role role_of(struct cr_lf_pool *p, int idx)
{
    struct cr_worker_stats w[MAX_WORKERS];
    unsigned n = cr_lf_pool_stats(p, NULL, w, MAX_WORKERS);

    ck_assert_int_ge(idx, 0);
    ck_assert_int_lt(idx, (int)n);
    return w[idx].role;
}

/* Sends one byte on c and waits until it is handled and the pool shows
 * these roles again. */
static void one_event(struct ctx *x, struct chan *c, unsigned leaders, unsigned followers)
{
    uint64_t before = load_u64(&c->handled);

    poke(c);
    ck_assert(wait_count(&c->handled, before + 1));
    ck_assert(wait_roles(x->p, leaders, followers, -1));
}

START_TEST(notified_waiter_leaves_its_role_properly)
{
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();
    struct chan *wa = add_chan(x, r, MODE_WAIT_GATED);
    struct chan *wb = add_chan(x, r, MODE_WAIT_GATED);
    struct chan *g1 = add_chan(x, r, MODE_GATED);
    struct chan *rec = add_chan(x, r, MODE_COUNT);
    bool blocked;
    int tb;

    /* Two threads: whoever does not wait is the leader, or blocked. */
    x->p = make_pool(&r, 1, 2, order_at(_i), false, NULL);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    ck_assert(wait_roles(x->p, 1, 1, 0));

    /* A follower notified from outside returns to its handler and stays
     * there: it must not keep (lock-free: be handed) a turn meanwhile. */
    poke(wa);
    ck_assert(wait_int(&wa->entered, 1));
    ck_assert(wait_roles(x->p, 1, 1, -1));
    cr_lf_pool_notify(x->p, &x->waiters[wa->id]);
    ck_assert(wait_int(&wa->returned, 1));
    ck_assert_int_eq(load_int(&x->wait_rc[wa->id]), 0);
    ck_assert(wait_roles(x->p, 1, 0, -1));
    for (int k = 0; k < 3; k++)
        one_event(x, rec, 1, 0);
    open_gate(wa);
    ck_assert(wait_roles(x->p, 1, 1, 4));

    /* A waiter that leads when notified gives the turn up before returning. */
    poke(wb);
    ck_assert(wait_int(&wb->entered, 1));
    ck_assert(wait_roles(x->p, 1, 1, -1));
    tb = load_int(&wb->last_self);
    /* The waiter may have taken back the turn it gave up (native, lifo,
     * priority) before the woken thread ran; otherwise the other thread
     * blocks here, and the waiter is woken for its turn. */
    blocked = role_of(x->p, tb) != CR_ROLE_LEADER;
    if (blocked) {
        poke(g1);
        ck_assert(wait_int(&x->inside, 2));
        ck_assert(wait_roles(x->p, 1, 0, -1));
    }
    ck_assert_int_eq(role_of(x->p, tb), CR_ROLE_LEADER);
    cr_lf_pool_notify(x->p, &x->waiters[wb->id]);
    ck_assert(wait_int(&wb->returned, 1));
    ck_assert_int_eq(load_int(&x->wait_rc[wb->id]), 0);
    if (blocked) {
        /* Nobody leads now; the first thread back takes the turn. */
        ck_assert(wait_roles(x->p, 0, 0, -1));
        open_gate(g1);
    }
    ck_assert(wait_roles(x->p, 1, 0, -1));
    one_event(x, rec, 1, 0);
    open_gate(wb);
    ck_assert(wait_roles(x->p, 1, 1, 6 + blocked));
    stop_and_join(x->p);
    check_clean(x);
    destroy_all(x, r);
}
END_TEST

/* ------------------------------------------------------------------ join, stop */

struct stopper {
    struct cr_lf_pool *p;
    unsigned delay_ms;
};

static void *stop_later(void *arg)
{
    struct stopper *s = arg;

    sleep_ms(s->delay_ms);
    cr_lf_pool_stop(s->p);
    return NULL;
}

START_TEST(join_lends_the_calling_thread_until_timeout_or_stop)
{
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();
    struct chan *gate = add_chan(x, r, MODE_GATED);
    struct chan *rec = add_chan(x, r, MODE_COUNT);
    struct stopper st;
    pthread_t t;

    x->p = make_pool(&r, 1, 1, order_at(_i), false, NULL);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    ck_assert(wait_roles(x->p, 1, 0, 0));
    /* The only pool thread blocks: nobody leads until we join. */
    poke(gate);
    ck_assert(wait_int(&x->inside, 1));
    poke(rec);
    ck_assert_int_eq(cr_lf_pool_join(x->p, 200), -ETIMEDOUT);
    ck_assert_uint_eq(load_u64(&rec->handled), 1);
    ck_assert_int_eq(load_int(&rec->last_self), -1); /* handled here, an outside thread */
    __atomic_store_n(&gate->gate, 1, __ATOMIC_RELEASE);
    ck_assert(wait_count(&gate->handled, 1));
    /* Joined until stop: returns 0. */
    st.p = x->p;
    st.delay_ms = 50;
    ck_assert_int_eq(pthread_create(&t, NULL, stop_later, &st), 0);
    ck_assert_int_eq(cr_lf_pool_join(x->p, -1), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(cr_lf_pool_join_all(x->p), 0);
    ck_assert_int_eq(cr_lf_pool_join(x->p, -1), 0); /* stopped: at once */
    check_clean(x);
    destroy_all(x, r);
}
END_TEST

START_TEST(stop_ends_leader_followers_and_processing_threads)
{
    enum { THREADS = 4 };
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();
    struct chan *gate = add_chan(x, r, MODE_GATED);
    struct census c;

    x->p = make_pool(&r, 1, THREADS, order_at(_i), false, NULL);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    ck_assert(wait_roles(x->p, 1, THREADS - 1, 0));
    poke(gate);
    ck_assert(wait_roles(x->p, 1, THREADS - 2, -1));
    census(x->p, &c);
    ck_assert_uint_eq(c.role[CR_ROLE_PROCESSING], 1);
    cr_lf_pool_stop(x->p);
    cr_lf_pool_stop(x->p); /* twice is harmless */
    /* The processing thread finishes its event, then leaves too. */
    __atomic_store_n(&gate->gate, 1, __ATOMIC_RELEASE);
    ck_assert_int_eq(cr_lf_pool_join_all(x->p), 0);
    census(x->p, &c);
    ck_assert_uint_eq(c.role[CR_ROLE_STOPPED], THREADS);
    ck_assert_uint_eq(c.events, 1);
    ck_assert_uint_eq(load_u64(&gate->handled), 1);
    check_clean(x);
    destroy_all(x, r);
}
END_TEST

/* ------------------------------------------------------------------ lock-free stress */

/*
 * Iteration 0: 8 threads, tiny handlers - rapid push/pop, turns taken back
 * from woken threads, which push themselves again.
 * Iteration 1: 3 threads, handlers of 200 us - the stack often runs empty,
 * so leaders clear LEADER while others finish and push (the race the Apache
 * design's "pending" listener state handles).
 */
START_TEST(lockfree_stack_survives_rapid_handoffs)
{
    enum { MAX_THREADS = 8, NCHANS = 12 };
    const int THREADS = _i == 0 ? 8 : 3;
    const uint64_t BYTES = _i == 0 ? 6000 : 2000;
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *r = make_reactor();
    struct writer wr = {.x = x, .bytes = (int)BYTES, .nchans = NCHANS};
    struct chan *gates[MAX_THREADS];
    pthread_t t;
    uint64_t end;

    x->slow_us = _i == 0 ? 0 : 200;
    for (int i = 0; i < NCHANS; i++)
        add_chan(x, r, _i == 0 ? MODE_COUNT : MODE_SLOW);
    for (int i = 0; i < THREADS; i++)
        gates[i] = add_chan(x, r, MODE_GATED);
    x->p = make_pool(&r, 1, THREADS, "lifo-lockfree", false, NULL);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, write_bytes, &wr), 0);
    /* Two leaders would also trip the pool's own assert (lead[r] CAS) and
     * make handlers overlap (two waits on one handle set). */
    end = cr_test_now_ms() + WAIT_MS * 4;
    while (load_u64(&x->total) < BYTES && cr_test_now_ms() < end) {
        struct census c;

        census(x->p, &c);
        ck_assert_uint_le(c.role[CR_ROLE_LEADER], 1);
    }
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert(wait_count(&x->total, BYTES));
    ck_assert(wait_roles(x->p, 1, THREADS - 1, BYTES));
    /* No follower was stranded on a lost stack: block the threads one by
     * one; each blocked leader must hand the turn on, down to the last. */
    for (int i = 0; i < THREADS; i++) {
        poke(gates[i]);
        ck_assert_msg(wait_int(&x->inside, i + 1), "only %d of %d threads had a turn", i, THREADS);
    }
    ck_assert(wait_roles(x->p, 0, 0, BYTES));
    for (int i = 0; i < THREADS; i++)
        open_gate(gates[i]);
    ck_assert(wait_roles(x->p, 1, THREADS - 1, BYTES + THREADS));
    stop_and_join(x->p);
    check_clean(x);
    ck_assert_uint_eq(load_u64(&x->total), BYTES + THREADS);
    destroy_all(x, r);
}
END_TEST

START_TEST(lockfree_groups_stress_over_two_reactors)
{
    enum { THREADS = 6, NCHANS = 8, BYTES = 3000 };
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *rs[2] = {make_reactor(), make_reactor()};
    struct writer wr = {.x = x, .bytes = (int)BYTES, .nchans = NCHANS};
    pthread_t t;

    for (int i = 0; i < NCHANS; i++)
        add_chan(x, rs[i % 2], MODE_COUNT);
    x->p = make_pool(rs, 2, THREADS, "lifo-lockfree", false, NULL);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, write_bytes, &wr), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert(wait_count(&x->total, BYTES));
    ck_assert(wait_roles(x->p, 2, THREADS - 2, BYTES));
    stop_and_join(x->p);
    check_clean(x);
    cr_lf_pool_destroy(x->p);
    close_chans(x);
    cr_reactor_destroy(rs[0]);
    cr_reactor_destroy(rs[1]);
    free(x);
}
END_TEST

/*
 * Shared followers under load (not lifo-lockfree, which has no shared
 * groups): turns offered to woken followers of two reactors at once, taken
 * back by rejoining threads or claimed, never lost: every byte is handled
 * once and both reactors have a leader when the load ends.
 */
START_TEST(shared_followers_survive_rapid_handoffs_over_two_reactors)
{
    enum { THREADS = 5, NCHANS = 8, BYTES = 3000 };
    struct ctx *x = calloc(1, sizeof(*x));
    struct cr_reactor *rs[2] = {make_reactor(), make_reactor()};
    struct writer wr = {.x = x, .bytes = (int)BYTES, .nchans = NCHANS};
    pthread_t t;

    if (is_order(_i, "lifo-lockfree"))
        goto out;
    for (int i = 0; i < NCHANS; i++)
        add_chan(x, rs[i % 2], MODE_COUNT);
    x->p = make_pool(rs, 2, THREADS, order_at(_i), true, NULL);
    ck_assert_int_eq(cr_lf_pool_start(x->p), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, write_bytes, &wr), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert(wait_count(&x->total, BYTES));
    ck_assert(wait_roles(x->p, 2, THREADS - 2, BYTES));
    stop_and_join(x->p);
    check_clean(x);
    for (int i = 0; i < NCHANS; i++)
        ck_assert_uint_eq(load_u64(&x->chans[i].handled), BYTES / NCHANS);
    cr_lf_pool_destroy(x->p);
    close_chans(x);
out:
    cr_reactor_destroy(rs[0]);
    cr_reactor_destroy(rs[1]);
    free(x);
}
END_TEST

/* ------------------------------------------------------------------ bad input */

START_TEST(bad_input_gets_error_codes)
{
    struct cr_reactor *rs[2] = {make_reactor(), make_reactor()};
    struct cr_reactor *none[1] = {NULL};
    struct cr_lf_pool_config cfg = {.threads = 2, .reactors = rs, .nreactors = 1};
    struct cr_lf_pool *p = (struct cr_lf_pool *)&cfg;
    struct cr_lf_waiter w;
    int n = order_count();

    ck_assert_int_eq(n, 5);
    ck_assert_ptr_null(cr_lf_pool_promotions()[n]);
    cfg.promotion = "random";
    ck_assert_int_eq(cr_lf_pool_create(&p, &cfg), -EINVAL);
    ck_assert_ptr_null(p);
    cfg.promotion = NULL;
    cfg.nreactors = 0;
    ck_assert_int_eq(cr_lf_pool_create(&p, &cfg), -EINVAL);
    cfg.nreactors = 1;
    cfg.reactors = none;
    ck_assert_int_eq(cr_lf_pool_create(&p, &cfg), -EINVAL);
    cfg.reactors = NULL;
    ck_assert_int_eq(cr_lf_pool_create(&p, &cfg), -EINVAL);
    ck_assert_int_eq(cr_lf_pool_create(&p, NULL), -EINVAL);
    /* Split groups need a thread each. */
    cfg.reactors = rs;
    cfg.nreactors = 2;
    cfg.threads = 1;
    ck_assert_int_eq(cr_lf_pool_create(&p, &cfg), -EINVAL);
    cfg.threads = 2;
    cfg.promotion = "lifo-lockfree";
    cfg.shared_followers = true;
    ck_assert_int_eq(cr_lf_pool_create(&p, &cfg), -EINVAL);
    cfg.shared_followers = false;
    /* A delay is lifo's alone. */
    cfg.promotion_delay_us = 1000;
    ck_assert_int_eq(cr_lf_pool_create(&p, &cfg), -EINVAL);
    cfg.promotion = "native";
    ck_assert_int_eq(cr_lf_pool_create(&p, &cfg), -EINVAL);
    cfg.promotion = "fifo";
    ck_assert_int_eq(cr_lf_pool_create(&p, &cfg), -EINVAL);
    cfg.promotion = "priority";
    ck_assert_int_eq(cr_lf_pool_create(&p, &cfg), -EINVAL);
    cfg.promotion = "lifo-lockfree";
    cfg.promotion_delay_us = 0;
    ck_assert_int_eq(cr_lf_pool_create(&p, &cfg), 0);
    ck_assert_int_eq(cr_lf_pool_self(p), -1);
    /* A waiter nobody waits on: notify is harmless, wait off the pool fails. */
    cr_lf_waiter_init(&w);
    cr_lf_pool_notify(p, &w);
    cr_lf_pool_notify(p, &w);
    ck_assert_int_eq(cr_lf_pool_wait(p, &w, 0), -EINVAL);
    ck_assert_int_eq(cr_lf_pool_start(p), 0);
    ck_assert_int_eq(cr_lf_pool_start(p), -EINVAL);
    cr_lf_pool_notify(p, &w);
    stop_and_join(p);
    cr_lf_pool_destroy(p);
    /* Default threads (CPUs) and order, never started. */
    cfg.threads = 0;
    cfg.promotion = NULL;
    ck_assert_int_eq(cr_lf_pool_create(&p, &cfg), 0);
    ck_assert_uint_ge(cr_lf_pool_stats(p, NULL, NULL, 0), 2);
    cr_lf_pool_destroy(p);
    cr_lf_pool_destroy(NULL);
    cr_reactor_destroy(rs[0]);
    cr_reactor_destroy(rs[1]);
}
END_TEST

Suite *lf_pool_suite(void);
Suite *lf_pool_suite(void)
{
    Suite *s = suite_create("lf_pool");
    TCase *tc = tcase_create("core");
    int n = order_count();

    /* Each test takes well under a second; the margin is for a loaded
     * 2-core machine (and x10 under TSan). */
    tcase_set_timeout(tc, 20);
    tcase_add_loop_test(tc, every_byte_is_handled_once_and_no_handle_by_two_threads, 0, n);
    tcase_add_loop_test(tc, blocking_handlers_do_not_stop_the_others, 0, n);
    tcase_add_loop_test(tc, stats_show_one_leader_per_reactor_while_running_and_stopped_after, 0,
                        n);
    tcase_add_loop_test(tc, followers_are_promoted_in_the_configured_order, 0, n);
    tcase_add_loop_test(tc, parked_follower_takes_over_while_a_handler_blocks, 0, n);
    tcase_add_loop_test(tc, split_groups_serve_each_reactor_with_its_own_threads, 0, n);
    tcase_add_loop_test(tc, shared_followers_lead_whichever_reactor_has_no_leader, 0, n);
    tcase_add_loop_test(tc, waiting_handlers_keep_serving_so_the_pool_never_deadlocks, 0, n);
    tcase_add_loop_test(tc, notify_reaches_a_waiter_in_every_role_under_load, 0, n);
    tcase_add_loop_test(tc, wait_times_out_and_is_cancelled_by_stop, 0, n);
    tcase_add_loop_test(tc, notified_waiter_leaves_its_role_properly, 0, n);
    tcase_add_loop_test(tc, join_lends_the_calling_thread_until_timeout_or_stop, 0, n);
    tcase_add_loop_test(tc, stop_ends_leader_followers_and_processing_threads, 0, n);
    tcase_add_loop_test(tc, lockfree_stack_survives_rapid_handoffs, 0, 2);
    tcase_add_test(tc, lockfree_groups_stress_over_two_reactors);
    tcase_add_loop_test(tc, shared_followers_survive_rapid_handoffs_over_two_reactors, 0, n);
    tcase_add_test(tc, bad_input_gets_error_codes);
    tcase_add_loop_test(tc, deferred_promotion_handles_every_byte_once, 0,
                        (int)(sizeof(deferring) / sizeof(deferring[0])));
    tcase_add_loop_test(tc, deferred_leader_takes_the_fetched_batch_without_rejoining, 0,
                        (int)(sizeof(deferring) / sizeof(deferring[0])));
    tcase_add_loop_test(tc, deferred_leader_takes_at_the_reading_its_handler_lent, 0,
                        (int)(sizeof(deferring) / sizeof(deferring[0])));
    tcase_add_loop_test(tc, eager_promotion_takes_nothing_without_rejoining, 0,
                        (int)(sizeof(deferring) / sizeof(deferring[0])));
    tcase_add_loop_test(tc, deferred_promotion_still_runs_blocking_handlers_together, 0,
                        (int)(sizeof(deferring) / sizeof(deferring[0])));
    tcase_add_loop_test(tc, deferred_promotion_wakes_nobody_for_quick_handlers, 0,
                        (int)(sizeof(deferring) / sizeof(deferring[0])));
    tcase_add_loop_test(tc, deferred_promotion_adds_a_thread_when_fetched_events_wait, 0,
                        (int)(sizeof(deferring) / sizeof(deferring[0])));
    tcase_add_loop_test(tc, deferred_promotion_takes_over_from_a_blocked_handler, 0,
                        (int)(sizeof(deferring) / sizeof(deferring[0])));
    tcase_add_loop_test(tc, deferred_promotion_watchdog_sleeps_while_turns_are_quick, 0,
                        (int)(sizeof(deferring) / sizeof(deferring[0])));
    suite_add_tcase(s, tc);
    return s;
}
