/*
 * test_reactor.c - the Reactor against every handle set backend: dispatch,
 * one-shot and (de)activation, one-event mode with a kept batch, stale events,
 * timers, signals, wake-up and registration from other threads, bad input.
 */
#include <cabrank/clock.h>
#include <cabrank/reactor.h>

#include "../support/support.h"
#include "demux/reactor_internal.h"
#include "os/clock_internal.h"

#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

static struct cr_reactor *open_reactor(int backend_idx)
{
    struct cr_reactor_config cfg = {.backend = cr_handle_set_backends()[backend_idx]};
    struct cr_reactor *r;

    ck_assert_int_eq(cr_reactor_create(&r, &cfg), 0);
    ck_assert_str_eq(cr_reactor_backend(r), cfg.backend);
    return r;
}

static int backend_count(void)
{
    int n = 0;

    while (cr_handle_set_backends()[n] != NULL)
        n++;
    return n;
}

/* busy_poll_us: a reactor of backend idx that polls up to us before sleeping. */
static struct cr_reactor *open_polling_reactor(int backend_idx, unsigned us)
{
    struct cr_reactor_config cfg = {.backend = cr_handle_set_backends()[backend_idx],
                                    .busy_poll_us = us};
    struct cr_reactor *r;

    ck_assert_int_eq(cr_reactor_create(&r, &cfg), 0);
    return r;
}

/* For the tests that run both ways, _i in [0, 2 * backends): the backend,
 * sleeping in the wait, then busy polling for 10 s, longer than any of
 * their waits, so that what they see must come through the poll. */
static struct cr_reactor *open_either(int i)
{
    int n = backend_count();

    return open_polling_reactor(i % n, i < n ? 0 : 10000000u);
}

struct counter {
    int calls;
    int fd;
    unsigned events;
};

static void count_handler(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct counter *c = arg;

    (void)r;
    c->calls++;
    c->fd = fd;
    c->events = events;
}

static void make_pipe(int p[2])
{
    ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
}

static void close_pipe(int p[2])
{
    close(p[0]);
    close(p[1]);
}

START_TEST(dispatches_readable_handle_to_its_handler)
{
    struct cr_reactor *r = open_reactor(_i);
    struct counter c = {0};
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_reactor_add(r, p[0], CR_EV_READ, 0, count_handler, &c), 0);
    ck_assert_int_eq(cr_reactor_handle_events(r, 0, 0), 0);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, 0), 1);
    ck_assert_int_eq(c.calls, 1);
    ck_assert_int_eq(c.fd, p[0]);
    ck_assert(c.events & CR_EV_READ);
    ck_assert_int_eq(cr_reactor_remove(r, p[0]), 0);
    cr_reactor_destroy(r);
    close_pipe(p);
}
END_TEST

START_TEST(oneshot_handle_is_dispatched_once_until_reactivated)
{
    struct cr_reactor *r = open_reactor(_i);
    struct counter c = {0};
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_reactor_add(r, p[0], CR_EV_READ, CR_REACTOR_ONESHOT, count_handler, &c), 0);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, 0), 1);
    /* Still readable, but deactivated by the dispatch. */
    ck_assert_int_eq(cr_reactor_handle_events(r, 30, 0), 0);
    ck_assert_int_eq(c.calls, 1);
    ck_assert_int_eq(cr_reactor_reactivate(r, p[0]), 0);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, 0), 1);
    ck_assert_int_eq(c.calls, 2);
    cr_reactor_destroy(r);
    close_pipe(p);
}
END_TEST

/*
 * CR_REACTOR_EDGE: one-shot as above, with what the handle set reports while
 * the handle is disarmed kept for its re-arm; a handler that leaves data
 * unread says so (maybe_ready) or is not called again until more comes.
 * Without edge triggering (poll, select) it is plain one-shot.
 */
START_TEST(edge_oneshot_keeps_what_comes_while_disarmed)
{
    struct cr_reactor *r = open_reactor(_i);
    struct counter c = {0};
    bool edge = strcmp(cr_reactor_backend(r), "epoll") == 0;
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_reactor_add(r, p[0], CR_EV_READ, CR_REACTOR_EDGE, count_handler, &c),
                     -EINVAL); /* edge is a kind of one-shot */
    ck_assert_int_eq(cr_reactor_add(r, p[0], CR_EV_READ, CR_REACTOR_ONESHOT | CR_REACTOR_EDGE,
                                    count_handler, &c),
                     0);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, 0), 1);
    ck_assert_int_eq(c.calls, 1);
    /* Disarmed by the dispatch: a new arrival now is kept, not lost. */
    ck_assert_int_eq(write(p[1], "y", 1), 1);
    ck_assert_int_eq(cr_reactor_handle_events(r, 30, 0), 0);
    ck_assert_int_eq(cr_reactor_reactivate(r, p[0]), 0);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, 0), 1);
    ck_assert_int_eq(c.calls, 2);
    ck_assert(c.events & CR_EV_READ);
    /* Nothing read, nothing new: no edge, so only maybe_ready brings it
     * back (level-triggered backends bring it back regardless). */
    ck_assert_int_eq(cr_reactor_rearm(r, p[0], CR_EV_READ, false), 0);
    ck_assert_int_eq(cr_reactor_handle_events(r, 30, 0), edge ? 0 : 1);
    ck_assert_int_eq(cr_reactor_rearm(r, p[0], CR_EV_READ, true), 0);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, 0), 1);
    ck_assert_int_eq(c.calls, edge ? 3 : 4);
    /* Queued for dispatch, then removed: never dispatched. */
    ck_assert_int_eq(cr_reactor_rearm(r, p[0], CR_EV_READ, true), 0);
    ck_assert_int_eq(cr_reactor_remove(r, p[0]), 0);
    ck_assert_int_eq(cr_reactor_handle_events(r, 30, 0), 0);
    ck_assert_int_eq(c.calls, edge ? 3 : 4);
    /* Deactivated: what comes waits for the reactivation. */
    ck_assert_int_eq(cr_reactor_add(r, p[0], CR_EV_READ, CR_REACTOR_ONESHOT | CR_REACTOR_EDGE,
                                    count_handler, &c),
                     0);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, 0), 1); /* the unread bytes */
    ck_assert_int_eq(cr_reactor_deactivate(r, p[0]), 0);
    close(p[1]);
    ck_assert_int_eq(cr_reactor_handle_events(r, 30, 0), 0);
    ck_assert_int_eq(cr_reactor_reactivate(r, p[0]), 0);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, 0), 1);
    ck_assert(c.events & (CR_EV_HUP | CR_EV_READ));
    cr_reactor_destroy(r);
    close(p[0]);
}
END_TEST

/* An edge handle re-armed for WRITE after a send would block gets the
 * edge of the space freed while it was busy. */
START_TEST(edge_write_interest_gets_space_freed_while_busy)
{
    struct cr_reactor *r = open_reactor(_i);
    struct counter c = {0};
    char buf[4096];
    int p[2];

    memset(buf, 'z', sizeof(buf));
    make_pipe(p);
    ck_assert_int_eq(cr_reactor_add(r, p[1], CR_EV_WRITE, CR_REACTOR_ONESHOT | CR_REACTOR_EDGE,
                                    count_handler, &c),
                     0);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, 0), 1); /* writable at once */
    while (write(p[1], buf, sizeof(buf)) > 0)
        ; /* until it would block */
    /* Space frees while the handle is still disarmed. */
    while (read(p[0], buf, sizeof(buf)) > 0)
        ;
    ck_assert_int_eq(cr_reactor_rearm(r, p[1], CR_EV_WRITE, false), 0);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, 0), 1);
    ck_assert_int_eq(c.calls, 2);
    ck_assert(c.events & CR_EV_WRITE);
    ck_assert_int_eq(cr_reactor_remove(r, p[1]), 0);
    cr_reactor_destroy(r);
    close_pipe(p);
}
END_TEST

START_TEST(deactivated_handle_is_not_dispatched_until_reactivated)
{
    struct cr_reactor *r = open_reactor(_i);
    struct counter c = {0};
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_reactor_add(r, p[0], CR_EV_READ, 0, count_handler, &c), 0);
    ck_assert_int_eq(cr_reactor_deactivate(r, p[0]), 0);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    close(p[1]); /* a hang-up too: still nothing while deactivated */
    ck_assert_int_eq(cr_reactor_handle_events(r, 30, 0), 0);
    ck_assert_int_eq(cr_reactor_handle_events(r, 30, 0), 0);
    ck_assert_int_eq(c.calls, 0);
    ck_assert_int_eq(cr_reactor_reactivate(r, p[0]), 0);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, 0), 1);
    ck_assert_int_eq(c.calls, 1);
    cr_reactor_destroy(r);
    close(p[0]);
}
END_TEST

START_TEST(modify_switches_interest_to_write)
{
    struct cr_reactor *r = open_reactor(_i);
    struct counter c = {0};
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_reactor_add(r, p[1], 0, 0, count_handler, &c), 0);
    ck_assert_int_eq(cr_reactor_handle_events(r, 20, 0), 0);
    ck_assert_int_eq(cr_reactor_modify(r, p[1], CR_EV_WRITE), 0);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, 0), 1);
    ck_assert(c.events & CR_EV_WRITE);
    cr_reactor_destroy(r);
    close_pipe(p);
}
END_TEST

#define NPIPES 5

struct batch_ctx {
    struct cr_reactor *r;
    int pipes[NPIPES][2];
    int calls[NPIPES];
    bool remove_others;
};

static void batch_handler(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct batch_ctx *b = arg;

    (void)events;
    for (int i = 0; i < NPIPES; i++) {
        if (b->pipes[i][0] != fd)
            continue;
        b->calls[i]++;
        if (b->remove_others) {
            for (int j = 0; j < NPIPES; j++) {
                if (j != i)
                    ck_assert_int_eq(cr_reactor_remove(r, b->pipes[j][0]), 0);
            }
            b->remove_others = false;
        }
    }
}

START_TEST(one_event_mode_dispatches_one_and_keeps_the_batch)
{
    struct batch_ctx b = {.r = open_reactor(_i)};

    for (int i = 0; i < NPIPES; i++) {
        make_pipe(b.pipes[i]);
        ck_assert_int_eq(
            cr_reactor_add(b.r, b.pipes[i][0], CR_EV_READ, CR_REACTOR_ONESHOT, batch_handler, &b),
            0);
        ck_assert_int_eq(write(b.pipes[i][1], "x", 1), 1);
    }
    for (int n = 0; n < NPIPES; n++)
        ck_assert_int_eq(cr_reactor_handle_events(b.r, 1000, CR_REACTOR_ONE), 1);
    /* Every handle exactly once: one-shot plus the kept batch. */
    ck_assert_int_eq(cr_reactor_handle_events(b.r, 30, CR_REACTOR_ONE), 0);
    for (int i = 0; i < NPIPES; i++) {
        ck_assert_int_eq(b.calls[i], 1);
        close_pipe(b.pipes[i]);
    }
    cr_reactor_destroy(b.r);
}
END_TEST

START_TEST(removed_handle_in_kept_batch_is_not_dispatched)
{
    struct batch_ctx b = {.r = open_reactor(_i), .remove_others = true};
    int total = 0;

    for (int i = 0; i < NPIPES; i++) {
        make_pipe(b.pipes[i]);
        ck_assert_int_eq(
            cr_reactor_add(b.r, b.pipes[i][0], CR_EV_READ, CR_REACTOR_ONESHOT, batch_handler, &b),
            0);
        ck_assert_int_eq(write(b.pipes[i][1], "x", 1), 1);
    }
    ck_assert_int_eq(cr_reactor_handle_events(b.r, 1000, CR_REACTOR_ONE), 1);
    ck_assert_int_eq(cr_reactor_handle_events(b.r, 30, CR_REACTOR_ONE), 0);
    for (int i = 0; i < NPIPES; i++) {
        total += b.calls[i];
        close_pipe(b.pipes[i]);
    }
    ck_assert_int_eq(total, 1);
    cr_reactor_destroy(b.r);
}
END_TEST

/* The first handler closes the other pipe and registers a new one, which the
 * kernel gives the same fd number: the old batched event must not reach it. */
struct stale_ctx {
    int a[2];
    int b[2];
    struct counter old_b;
    struct counter new_b;
    int first;
};

static void stale_first(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct stale_ctx *s = arg;
    int *other = fd == s->a[0] ? s->b : s->a;
    int old_fd = other[0];

    (void)events;
    s->first = fd;
    ck_assert_int_eq(cr_reactor_remove(r, other[0]), 0);
    close_pipe(other);
    make_pipe(other);
    if (other[0] != old_fd) {
        ck_assert_int_eq(dup2(other[0], old_fd), old_fd);
        close(other[0]);
        other[0] = old_fd;
    }
    ck_assert_int_eq(cr_reactor_add(r, other[0], CR_EV_READ, 0, count_handler, &s->new_b), 0);
}

START_TEST(stale_event_of_replaced_registration_is_dropped)
{
    struct cr_reactor *r = open_reactor(_i);
    struct stale_ctx s = {0};

    make_pipe(s.a);
    make_pipe(s.b);
    ck_assert_int_eq(cr_reactor_add(r, s.a[0], CR_EV_READ, CR_REACTOR_ONESHOT, stale_first, &s), 0);
    ck_assert_int_eq(cr_reactor_add(r, s.b[0], CR_EV_READ, CR_REACTOR_ONESHOT, stale_first, &s), 0);
    ck_assert_int_eq(write(s.a[1], "x", 1), 1);
    ck_assert_int_eq(write(s.b[1], "x", 1), 1);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, CR_REACTOR_ONE), 1);
    /* The new pipe is empty: nothing may be dispatched to its handler. */
    ck_assert_int_eq(cr_reactor_handle_events(r, 30, 0), 0);
    ck_assert_int_eq(s.new_b.calls, 0);
    cr_reactor_destroy(r);
    close_pipe(s.a);
    close_pipe(s.b);
}
END_TEST

START_TEST(table_grows_for_high_fd)
{
    struct cr_reactor *r = open_reactor(_i);
    struct rlimit rl;
    struct counter c = {0};
    int p[2];
    int high = 3000;

    if (strcmp(cr_reactor_backend(r), "select") == 0) {
        cr_reactor_destroy(r); /* select cannot hold it; its own test says so */
        return;
    }
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max <= (rlim_t)high) {
        cr_reactor_destroy(r);
        return;
    }
    rl.rlim_cur = (rlim_t)high + 10;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    make_pipe(p);
    ck_assert_int_eq(dup2(p[0], high), high);
    ck_assert_int_eq(cr_reactor_add(r, high, CR_EV_READ, 0, count_handler, &c), 0);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, 0), 1);
    ck_assert_int_eq(c.fd, high);
    cr_reactor_destroy(r);
    close(high);
    close_pipe(p);
}
END_TEST

START_TEST(bad_input_gets_error_codes)
{
    struct cr_reactor *r = open_reactor(_i);
    struct counter c = {0};
    uint64_t id;
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_reactor_add(r, -1, CR_EV_READ, 0, count_handler, &c), -EBADF);
    ck_assert_int_eq(cr_reactor_add(r, 9999, CR_EV_READ, 0, count_handler, &c), -EBADF);
    ck_assert_int_eq(cr_reactor_add(r, p[0], CR_EV_READ, 0, NULL, &c), -EINVAL);
    ck_assert_int_eq(cr_reactor_add(r, p[0], CR_EV_READ, 0x80, count_handler, &c), -EINVAL);
    ck_assert_int_eq(cr_reactor_remove(r, p[0]), -ENOENT);
    ck_assert_int_eq(cr_reactor_remove(r, -5), -ENOENT);
    ck_assert_int_eq(cr_reactor_remove(r, 123456), -ENOENT);
    ck_assert_int_eq(cr_reactor_modify(r, p[0], CR_EV_READ), -ENOENT);
    ck_assert_int_eq(cr_reactor_deactivate(r, p[0]), -ENOENT);
    ck_assert_int_eq(cr_reactor_reactivate(r, p[0]), -ENOENT);
    ck_assert_int_eq(cr_reactor_add(r, p[0], CR_EV_READ, 0, count_handler, &c), 0);
    ck_assert_int_eq(cr_reactor_add(r, p[0], CR_EV_READ, 0, count_handler, &c), -EEXIST);
    ck_assert_int_eq(cr_reactor_remove(r, p[0]), 0);
    ck_assert_int_eq(cr_reactor_remove(r, p[0]), -ENOENT); /* double remove */
    ck_assert_int_eq(cr_reactor_timer_cancel(r, 0), -ENOENT);
    ck_assert_int_eq(cr_reactor_timer_cancel(r, UINT64_MAX), -ENOENT);
    ck_assert_int_eq(cr_reactor_timer_add(r, 1000, NULL, NULL, &id), -EINVAL);
    ck_assert_int_eq(cr_reactor_timer_add(r, 1000, (cr_reactor_timer_fn *)NULL, NULL, NULL),
                     -EINVAL);
    ck_assert_int_eq(cr_reactor_signal_add(r, SIGKILL, NULL, NULL), -EINVAL);
    ck_assert_int_eq(cr_reactor_signal_add(r, 0, NULL, NULL), -EINVAL);
    ck_assert_int_eq(cr_reactor_signal_remove(r, SIGUSR2), -ENOENT);
    cr_reactor_destroy(r);
    close_pipe(p);
}
END_TEST

struct timer_log {
    uint64_t ids[64];
    void *args[64];
    int n;
};

static void log_timer(struct cr_reactor *r, uint64_t id, void *arg)
{
    struct timer_log *l = *(struct timer_log **)arg;

    (void)r;
    l->ids[l->n] = id;
    l->args[l->n] = arg;
    l->n++;
}

START_TEST(timers_fire_in_deadline_order_and_cancel_twice_fails)
{
    struct cr_reactor *r = open_reactor(_i);
    struct timer_log log = {0};
    struct timer_log *lp[4] = {&log, &log, &log, &log};
    uint64_t id[4];
    uint64_t start = cr_clock_now_ns();

    ck_assert_int_eq(cr_reactor_timer_add(r, 40, log_timer, &lp[0], &id[0]), 0);
    ck_assert_int_eq(cr_reactor_timer_add(r, 10, log_timer, &lp[1], &id[1]), 0);
    ck_assert_int_eq(cr_reactor_timer_add(r, 25, log_timer, &lp[2], &id[2]), 0);
    ck_assert_int_eq(cr_reactor_timer_add(r, 30, log_timer, &lp[3], &id[3]), 0);
    ck_assert_int_eq(cr_reactor_timer_cancel(r, id[3]), 0);
    ck_assert_int_eq(cr_reactor_timer_cancel(r, id[3]), -ENOENT);
    while (log.n < 3 && cr_clock_now_ns() - start < 2 * CR_NSEC_PER_SEC)
        ck_assert_int_ge(cr_reactor_handle_events(r, -1, 0), 0);
    ck_assert_int_eq(log.n, 3);
    ck_assert_ptr_eq(log.args[0], &lp[1]);
    ck_assert_ptr_eq(log.args[1], &lp[2]);
    ck_assert_ptr_eq(log.args[2], &lp[0]);
    ck_assert_uint_eq(log.ids[0], id[1]);
    ck_assert_uint_ge(cr_clock_now_ns() - start, 40 * CR_NSEC_PER_MSEC);
    /* A fired timer cannot be cancelled. */
    ck_assert_int_eq(cr_reactor_timer_cancel(r, id[1]), -ENOENT);
    cr_reactor_destroy(r);
}
END_TEST

static void order_timer(struct cr_reactor *r, uint64_t id, void *arg)
{
    uint64_t *last = arg;
    uint64_t now = cr_clock_now_ns();

    (void)r;
    (void)id;
    ck_assert_uint_ge(now, last[0]);
    last[1]++;
}

START_TEST(many_timers_with_random_cancels_keep_heap_order)
{
    struct cr_reactor *r = open_reactor(_i);
    enum { N = 2000 };
    static uint64_t ids[N];
    static uint64_t due[N][2];
    int cancelled = 0;
    uint64_t fired = 0;

    srand(42);
    for (int i = 0; i < N; i++) {
        uint64_t delay = (uint64_t)(rand() % 60);

        due[i][0] = cr_clock_now_ns() + delay * CR_NSEC_PER_MSEC;
        due[i][1] = 0;
        ck_assert_int_eq(cr_reactor_timer_add(r, delay, order_timer, due[i], &ids[i]), 0);
    }
    for (int i = 0; i < N; i += 2) {
        ck_assert_int_eq(cr_reactor_timer_cancel(r, ids[i]), 0);
        cancelled++;
    }
    for (uint64_t start = cr_clock_now_ns(); cr_clock_now_ns() - start < 2 * CR_NSEC_PER_SEC;) {
        fired = 0;
        for (int i = 0; i < N; i++)
            fired += due[i][1];
        if (fired == (uint64_t)(N - cancelled))
            break;
        ck_assert_int_ge(cr_reactor_handle_events(r, 100, 0), 0);
    }
    ck_assert_uint_eq(fired, N - cancelled);
    for (int i = 0; i < N; i += 2)
        ck_assert_uint_eq(due[i][1], 0);
    cr_reactor_destroy(r);
}
END_TEST

START_TEST(wait_times_out_after_its_timeout)
{
    struct cr_reactor *r = open_either(_i);
    uint64_t start = cr_clock_now_ns();

    ck_assert_int_eq(cr_reactor_handle_events(r, 50, 0), 0);
    ck_assert_uint_ge(cr_clock_now_ns() - start, 50 * CR_NSEC_PER_MSEC);
    ck_assert_uint_lt(cr_clock_now_ns() - start, 2 * CR_NSEC_PER_SEC);
    cr_reactor_destroy(r);
}
END_TEST

/* ------------------------------------------------------------------ threads */

struct waiter {
    struct cr_reactor *r;
    int dispatched;
    int result;
};

static void *run_reactor(void *arg)
{
    struct waiter *w = arg;

    w->result = cr_reactor_run(w->r);
    return NULL;
}

static void stop_on_event(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct counter *c = arg;

    (void)fd;
    (void)events;
    c->calls++;
    cr_reactor_stop(r);
}

static void stop_on_timer(struct cr_reactor *r, uint64_t id, void *arg)
{
    (void)id;
    *(int *)arg = 1;
    cr_reactor_stop(r);
}

START_TEST(handle_added_from_another_thread_is_watched_by_the_waiter)
{
    struct waiter w = {.r = open_reactor(_i)};
    struct counter c = {0};
    pthread_t t;
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(pthread_create(&t, NULL, run_reactor, &w), 0);
    usleep(20000); /* let it block in the wait */
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    ck_assert_int_eq(cr_reactor_add(w.r, p[0], CR_EV_READ, CR_REACTOR_ONESHOT, stop_on_event, &c),
                     0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(w.result, 0);
    ck_assert_int_eq(c.calls, 1);
    cr_reactor_destroy(w.r);
    close_pipe(p);
}
END_TEST

START_TEST(earlier_timer_from_another_thread_shortens_the_wait)
{
    struct waiter w = {.r = open_either(_i)};
    int fired = 0;
    uint64_t start;
    pthread_t t;

    ck_assert_int_eq(pthread_create(&t, NULL, run_reactor, &w), 0);
    usleep(20000);
    start = cr_clock_now_ns();
    ck_assert_int_eq(cr_reactor_timer_add(w.r, 10, stop_on_timer, &fired, NULL), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(fired, 1);
    ck_assert_uint_lt(cr_clock_now_ns() - start, 2 * CR_NSEC_PER_SEC);
    cr_reactor_destroy(w.r);
}
END_TEST

START_TEST(stop_from_another_thread_ends_run)
{
    struct waiter w = {.r = open_either(_i)};
    pthread_t t;

    ck_assert_int_eq(pthread_create(&t, NULL, run_reactor, &w), 0);
    usleep(20000);
    cr_reactor_stop(w.r);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(w.result, 0);
    ck_assert(cr_reactor_is_stopped(w.r));
    cr_reactor_destroy(w.r);
}
END_TEST

static void *wait_once(void *arg)
{
    struct waiter *w = arg;

    w->result = cr_reactor_handle_events(w->r, 5000, 0);
    return NULL;
}

START_TEST(wake_returns_a_blocked_wait_early)
{
    struct waiter w = {.r = open_either(_i)};
    uint64_t start = cr_clock_now_ns();
    pthread_t t;

    ck_assert_int_eq(pthread_create(&t, NULL, wait_once, &w), 0);
    usleep(20000);
    cr_reactor_wake(w.r);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(w.result, 0);
    ck_assert_uint_lt(cr_clock_now_ns() - start, 3 * CR_NSEC_PER_SEC);
    cr_reactor_destroy(w.r);
}
END_TEST

struct polled_wait {
    struct cr_reactor *r;
    int result;
    long sleeps; /* voluntary context switches of the waiting thread */
};

static void *polled_wait_once(void *arg)
{
    struct polled_wait *w = arg;
    struct rusage a;
    struct rusage b;

    ck_assert_int_eq(getrusage(RUSAGE_THREAD, &a), 0);
    w->result = cr_reactor_handle_events(w->r, 5000, 0);
    ck_assert_int_eq(getrusage(RUSAGE_THREAD, &b), 0);
    w->sleeps = b.ru_nvcsw - a.ru_nvcsw;
    return NULL;
}

/* A thread waits 5 s for a pipe that main writes 50 ms later: it sleeps in
 * the handle set without busy_poll_us, and not at all with it. */
START_TEST(busy_poll_takes_the_event_without_sleeping)
{
    for (int polling = 0; polling <= 1; polling++) {
        struct polled_wait w = {.r = open_polling_reactor(_i, polling ? 10000000u : 0)};
        struct counter c = {0};
        pthread_t t;
        int p[2];

        make_pipe(p);
        ck_assert_int_eq(cr_reactor_add(w.r, p[0], CR_EV_READ, 0, count_handler, &c), 0);
        ck_assert_int_eq(pthread_create(&t, NULL, polled_wait_once, &w), 0);
        usleep(50000);
        ck_assert_int_eq(write(p[1], "x", 1), 1);
        ck_assert_int_eq(pthread_join(t, NULL), 0);
        ck_assert_int_eq(w.result, 1);
        ck_assert_int_eq(c.calls, 1);
        if (polling)
            ck_assert_int_eq(w.sleeps, 0);
        else
            ck_assert_int_ge(w.sleeps, 1);
        ck_assert_int_eq(cr_reactor_remove(w.r, p[0]), 0);
        cr_reactor_destroy(w.r);
        close_pipe(p);
    }
}
END_TEST

/* The window rules, in ns with a 400 ceiling (windows start at 100): a
 * gap the window covered keeps it; a gap a longer poll would have covered
 * widens it (from nothing to the start, else twice, at most the ceiling);
 * a gap beyond the ceiling halves it, and below the start closes it. */
START_TEST(poll_window_adapts_to_the_idle_gaps)
{
    static const struct {
        uint64_t window, idle, next;
    } cases[] = {
        {400, 0, 400},    {400, 400, 400}, {100, 60, 100},  {0, 1, 100},
        {100, 150, 200},  {200, 399, 400}, {300, 350, 400}, {400, 401, 200},
        {200, 5000, 100}, {100, 5000, 0},  {0, 5000, 0},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(cr__reactor_poll_window(cases[i].window, 400, cases[i].idle) == cases[i].next,
                      "case %zu", i);
    /* No ceiling, no window. */
    ck_assert_uint_eq(cr__reactor_poll_window(0, 0, 10), 0);
}
END_TEST

static void count_timer(struct cr_reactor *r, uint64_t id, void *arg)
{
    (void)r;
    (void)id;
    (*(int *)arg)++;
}

/*
 * Whether window got can follow prev after a wait whose idle time the
 * reactor measured inside a call that took took_ns: the idle lies in
 * (0, took_ns], and cr__reactor_poll_window is constant over (0, prev],
 * (prev, max] and (max, inf), so its value at each end and edge in that
 * range covers every outcome.
 */
static bool is_window_after(uint64_t got, uint64_t prev, uint64_t max, uint64_t took_ns)
{
    const uint64_t at[] = {1, prev, prev + 1, max, max + 1, took_ns};

    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
        if (at[i] >= 1 && at[i] <= took_ns && cr__reactor_poll_window(prev, max, at[i]) == got)
            return true;
    }
    return false;
}

/* A reactor whose waits time out past the ceiling (100 ms) stops polling;
 * a gap shorter than the ceiling (a 5 ms timer) opens the window to its
 * start again, and one the window covers keeps it. (That a window spares
 * the sleep is busy_poll_takes_the_event_without_sleeping's part.) The
 * timer's waits are timed: on a busy machine one may take longer than the
 * window, and then the window the measured time allows is expected. */
START_TEST(busy_poll_window_closes_after_long_gaps_and_reopens_after_short_ones)
{
    const uint64_t ms = CR_NSEC_PER_MSEC;
    struct cr_reactor *r = open_polling_reactor(0, 100000u);
    uint64_t expect[3] = {50 * ms, 25 * ms, 0};
    uint64_t prev = 0;
    uint64_t id;
    int fired = 0;

    ck_assert_uint_eq(cr__reactor_poll_window_now(r), 100 * ms);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(cr_reactor_handle_events(r, 120, 0), 0);
        ck_assert_uint_eq(cr__reactor_poll_window_now(r), expect[i]);
    }
    for (int i = 1; i <= 2; i++) {
        uint64_t t0;
        uint64_t took;
        uint64_t got;

        ck_assert_int_eq(cr_reactor_timer_add(r, 5, count_timer, &fired, &id), 0);
        t0 = cr_clock_now_ns();
        ck_assert_int_eq(cr_reactor_handle_events(r, 5000, 0), 1);
        took = cr_clock_now_ns() - t0;
        ck_assert_int_eq(fired, i);
        got = cr__reactor_poll_window_now(r);
        if (took <= 25 * ms)
            ck_assert_uint_eq(got, 25 * ms);
        else
            ck_assert_msg(is_window_after(got, prev, 100 * ms, took),
                          "window %llu ms after %llu ms, from %llu ms",
                          (unsigned long long)(got / ms), (unsigned long long)(took / ms),
                          (unsigned long long)(prev / ms));
        prev = got;
    }
    cr_reactor_destroy(r);
}
END_TEST

/* Registration churn from several threads while one thread dispatches: under
 * TSan this is the race test of the demux table and the timer heap. */
struct churn {
    struct cr_reactor *r;
    int pipes[8][2];
    int dispatched;
};

static void churn_handler(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    char buf[64];

    (void)r;
    (void)events;
    (void)arg;
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
}

static void churn_timer(struct cr_reactor *r, uint64_t id, void *arg)
{
    (void)r;
    (void)id;
    (void)arg;
}

static void *churn_thread(void *arg)
{
    struct churn *c = arg;

    for (int round = 0; round < 300; round++) {
        int *p = c->pipes[round % 8];
        uint64_t id;

        if (cr_reactor_add(c->r, p[0], CR_EV_READ, CR_REACTOR_ONESHOT, churn_handler, c) == 0) {
            ck_assert_int_eq(write(p[1], "x", 1), 1);
            ck_assert_int_eq(cr_reactor_reactivate(c->r, p[0]), 0);
            ck_assert_int_eq(cr_reactor_remove(c->r, p[0]), 0);
        }
        ck_assert_int_eq(cr_reactor_timer_add(c->r, (uint64_t)(round % 5), churn_timer, c, &id), 0);
        if (round % 2) {
            int rc = cr_reactor_timer_cancel(c->r, id);

            ck_assert(rc == 0 || rc == -ENOENT); /* it may have fired already */
        }
    }
    return NULL;
}

START_TEST(registration_from_other_threads_while_one_waits_is_safe)
{
    struct churn c = {.r = open_reactor(_i)};
    struct waiter w = {.r = c.r};
    pthread_t waiter;
    pthread_t churner;

    for (int i = 0; i < 8; i++)
        make_pipe(c.pipes[i]);
    ck_assert_int_eq(pthread_create(&waiter, NULL, run_reactor, &w), 0);
    ck_assert_int_eq(pthread_create(&churner, NULL, churn_thread, &c), 0);
    ck_assert_int_eq(pthread_join(churner, NULL), 0);
    cr_reactor_stop(c.r);
    ck_assert_int_eq(pthread_join(waiter, NULL), 0);
    ck_assert_int_eq(w.result, 0);
    cr_reactor_destroy(c.r);
    for (int i = 0; i < 8; i++)
        close_pipe(c.pipes[i]);
}
END_TEST

/* ------------------------------------------------------------------ signals */

static void count_signal(struct cr_reactor *r, int signo, void *arg)
{
    (void)r;
    ck_assert_int_eq(signo, SIGUSR1);
    (*(int *)arg)++;
}

START_TEST(signal_arrives_as_reactor_event)
{
    struct cr_reactor *r = open_reactor(_i);
    int got = 0;

    ck_assert_int_eq(cr_reactor_block_signals(), 0);
    ck_assert_int_eq(cr_reactor_signal_add(r, SIGUSR1, count_signal, &got), 0);
    ck_assert_int_eq(cr_reactor_signal_add(r, SIGUSR1, count_signal, &got), -EEXIST);
    ck_assert_int_eq(kill(getpid(), SIGUSR1), 0);
    for (int i = 0; i < 50 && got == 0; i++)
        ck_assert_int_ge(cr_reactor_handle_events(r, 100, 0), 0);
    ck_assert_int_eq(got, 1);
    /* Reactivated after delivery: a second one arrives too. */
    ck_assert_int_eq(kill(getpid(), SIGUSR1), 0);
    for (int i = 0; i < 50 && got == 1; i++)
        ck_assert_int_ge(cr_reactor_handle_events(r, 100, 0), 0);
    ck_assert_int_eq(got, 2);
    ck_assert_int_eq(cr_reactor_signal_remove(r, SIGUSR1), 0);
    ck_assert_int_eq(cr_reactor_signal_remove(r, SIGUSR1), -ENOENT);
    cr_reactor_destroy(r);
}
END_TEST

/* What a handler saw of the event time, and the clock around its call. */
struct event_time {
    struct cr_reactor *r;
    uint64_t first;  /* cr_clock_event_ns() on entry */
    uint64_t second; /* again, after 20 ms of work */
    uint64_t nested; /* in a handler dispatched from inside this one */
    uint64_t after;  /* back here after the nested dispatch */
    int pipe2[2];
};

static void inner_handler(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct event_time *t = arg;

    (void)r;
    (void)fd;
    (void)events;
    t->nested = cr_clock_event_ns();
}

static void timing_handler(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct event_time *t = arg;
    char c;

    (void)events;
    ck_assert_int_eq(read(fd, &c, 1), 1);
    t->first = cr_clock_event_ns();
    usleep(20 * 1000);
    t->second = cr_clock_event_ns();
    /* An event dispatched from inside the handler has its own time, and
     * ours is back once it returns. */
    ck_assert_int_eq(
        cr_reactor_add(r, t->pipe2[0], CR_EV_READ, CR_REACTOR_ONESHOT, inner_handler, t), 0);
    ck_assert_int_eq(write(t->pipe2[1], "y", 1), 1);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, CR_REACTOR_ONE), 1);
    t->after = cr_clock_event_ns();
}

START_TEST(handler_sees_the_time_its_event_was_taken)
{
    struct cr_reactor *r = open_reactor(_i);
    struct event_time t = {.r = r};
    uint64_t before;
    uint64_t returned;
    int p[2];

    make_pipe(p);
    make_pipe(t.pipe2);
    ck_assert_int_eq(cr_reactor_add(r, p[0], CR_EV_READ, 0, timing_handler, &t), 0);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    before = cr_clock_now_ns();
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, CR_REACTOR_ONE), 1);
    returned = cr_clock_now_ns();
    /* Taken after `before`, and fixed for the whole call. */
    ck_assert_uint_ge(t.first, before);
    ck_assert_uint_eq(t.second, t.first);
    ck_assert_uint_ge(t.nested, t.first + 20 * CR_NSEC_PER_MSEC);
    ck_assert_uint_eq(t.after, t.first);
    /* Outside any dispatch it is the clock again. */
    ck_assert_uint_ge(cr_clock_event_ns(), returned);
    ck_assert_int_eq(cr_reactor_remove(r, p[0]), 0);
    ck_assert_int_eq(cr_reactor_remove(r, t.pipe2[0]), 0);
    close_pipe(p);
    close_pipe(t.pipe2);
    cr_reactor_destroy(r);
}
END_TEST

/* What lending handlers lent, and what a nested one saw. */
struct lend {
    struct cr_reactor *r;
    int nested_pipe[2];
    uint64_t lent;   /* cr_clock_end_ns() in the handler */
    bool nest_after; /* dispatch a nested event after lending */
};

static void lend_handler(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct lend *l = arg;
    struct event_time nested = {.r = r}; /* lives until the nested dispatch is done */
    char c;

    (void)events;
    ck_assert_int_eq(read(fd, &c, 1), 1);
    l->lent = cr_clock_end_ns();
    ck_assert_uint_ne(l->lent, 0);
    if (l->nest_after) {
        ck_assert_int_eq(cr_reactor_add(r, l->nested_pipe[0], CR_EV_READ, CR_REACTOR_ONESHOT,
                                        inner_handler, &nested),
                         0);
        ck_assert_int_eq(write(l->nested_pipe[1], "y", 1), 1);
        ck_assert_int_eq(cr_reactor_handle_events(r, 1000, CR_REACTOR_ONE), 1);
    }
}

static void quiet_handler(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    char c;

    (void)r;
    (void)events;
    (void)arg;
    ck_assert_int_eq(read(fd, &c, 1), 1);
}

/* One lent reading serves one take, from the event whose handler lent it: it
 * is taken once, a new dispatch drops it, and outside a dispatch nothing is
 * lent (the Leader/Followers pool takes its next event at it). */
START_TEST(a_handler_lends_its_end_reading_to_one_take)
{
    struct cr_reactor *r = open_reactor(_i);
    struct lend l = {.r = r};
    int lender[2];
    int quiet[2];

    make_pipe(lender);
    make_pipe(quiet);
    make_pipe(l.nested_pipe);
    ck_assert_uint_ne(cr_clock_end_ns(), 0);
    ck_assert_uint_eq(cr__clock_end_take(), 0);
    ck_assert_int_eq(cr_reactor_add(r, lender[0], CR_EV_READ, 0, lend_handler, &l), 0);
    ck_assert_int_eq(cr_reactor_add(r, quiet[0], CR_EV_READ, 0, quiet_handler, NULL), 0);

    ck_assert_int_eq(write(lender[1], "x", 1), 1);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, CR_REACTOR_ONE), 1);
    ck_assert_uint_eq(cr__clock_end_take(), l.lent);
    ck_assert_uint_eq(cr__clock_end_take(), 0);

    /* Lent and not taken: the next dispatch drops it. */
    ck_assert_int_eq(write(lender[1], "x", 1), 1);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, CR_REACTOR_ONE), 1);
    ck_assert_int_eq(write(quiet[1], "x", 1), 1);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, CR_REACTOR_ONE), 1);
    ck_assert_uint_eq(cr__clock_end_take(), 0);

    /* A nested dispatch after the lending drops it too: it is no longer the
     * end of the handler's work. */
    l.nest_after = true;
    ck_assert_int_eq(write(lender[1], "x", 1), 1);
    ck_assert_int_eq(cr_reactor_handle_events(r, 1000, CR_REACTOR_ONE), 1);
    ck_assert_uint_eq(cr__clock_end_take(), 0);

    ck_assert_int_eq(cr_reactor_remove(r, lender[0]), 0);
    ck_assert_int_eq(cr_reactor_remove(r, quiet[0]), 0);
    ck_assert_int_eq(cr_reactor_remove(r, l.nested_pipe[0]), 0);
    close_pipe(lender);
    close_pipe(quiet);
    close_pipe(l.nested_pipe);
    cr_reactor_destroy(r);
}
END_TEST

Suite *reactor_suite(void);
Suite *reactor_suite(void)
{
    Suite *s = suite_create("reactor");
    TCase *tc = tcase_create("core");
    int n = backend_count();

    tcase_set_timeout(tc, 10);
    tcase_add_loop_test(tc, dispatches_readable_handle_to_its_handler, 0, n);
    tcase_add_loop_test(tc, oneshot_handle_is_dispatched_once_until_reactivated, 0, n);
    tcase_add_loop_test(tc, deactivated_handle_is_not_dispatched_until_reactivated, 0, n);
    tcase_add_loop_test(tc, edge_oneshot_keeps_what_comes_while_disarmed, 0, n);
    tcase_add_loop_test(tc, edge_write_interest_gets_space_freed_while_busy, 0, n);
    tcase_add_loop_test(tc, modify_switches_interest_to_write, 0, n);
    tcase_add_loop_test(tc, one_event_mode_dispatches_one_and_keeps_the_batch, 0, n);
    tcase_add_loop_test(tc, removed_handle_in_kept_batch_is_not_dispatched, 0, n);
    tcase_add_loop_test(tc, stale_event_of_replaced_registration_is_dropped, 0, n);
    tcase_add_loop_test(tc, table_grows_for_high_fd, 0, n);
    tcase_add_loop_test(tc, bad_input_gets_error_codes, 0, n);
    tcase_add_loop_test(tc, timers_fire_in_deadline_order_and_cancel_twice_fails, 0, n);
    tcase_add_loop_test(tc, many_timers_with_random_cancels_keep_heap_order, 0, n);
    tcase_add_loop_test(tc, wait_times_out_after_its_timeout, 0, 2 * n);
    tcase_add_loop_test(tc, handle_added_from_another_thread_is_watched_by_the_waiter, 0, n);
    tcase_add_loop_test(tc, earlier_timer_from_another_thread_shortens_the_wait, 0, 2 * n);
    tcase_add_loop_test(tc, stop_from_another_thread_ends_run, 0, 2 * n);
    tcase_add_loop_test(tc, wake_returns_a_blocked_wait_early, 0, 2 * n);
    tcase_add_loop_test(tc, busy_poll_takes_the_event_without_sleeping, 0, n);
    tcase_add_test(tc, poll_window_adapts_to_the_idle_gaps);
    tcase_add_test(tc, busy_poll_window_closes_after_long_gaps_and_reopens_after_short_ones);
    tcase_add_loop_test(tc, registration_from_other_threads_while_one_waits_is_safe, 0, n);
    tcase_add_loop_test(tc, signal_arrives_as_reactor_event, 0, n);
    tcase_add_loop_test(tc, handler_sees_the_time_its_event_was_taken, 0, n);
    tcase_add_loop_test(tc, a_handler_lends_its_end_reading_to_one_take, 0, n);
    suite_add_tcase(s, tc);
    return s;
}
