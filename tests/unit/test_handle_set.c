/*
 * test_handle_set.c - the conformance suite of handle_set.h. Every test in the
 * "conformance" case runs once per backend (Check loop tests: _i indexes
 * cr_handle_set_backends()), each in its own process. Where a backend cannot
 * express what the contract asks (select sees no hang-up or error apart from
 * readability, see src/demux/handle_set_select.c), the test asserts the strongest
 * thing that holds for that backend. Threads appear only where the contract
 * is about other threads: removal, add, modify and wake-up during a wait, and
 * signals interrupting it.
 */
#include <cabrank/clock.h>
#include <cabrank/handle_set.h>

#include "../support/support.h"
#include "demux/handle_set_internal.h"

#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* How long a wait expected to report something may take on a noisy machine. */
#define READY_WAIT_MS 1000
/* How long a wait expected to report nothing is given to (wrongly) report. */
#define IDLE_WAIT_MS 20
/* Upper bound for anything that should be prompt (TSan, loaded machine). */
#define PROMPT_MS 2000
/* An fd number no fd_set can hold (FD_SETSIZE is 1024 on Linux). */
#define BIG_FD (FD_SETSIZE + 76)

static const char *backend_name(int i)
{
    return cr_handle_set_backends()[i];
}

/* select reports hang-up and error only as readability (handle_set_select.c). */
static bool has_hup_and_err(int i)
{
    return strcmp(backend_name(i), "select") != 0;
}

static bool is_select(int i)
{
    return strcmp(backend_name(i), "select") == 0;
}

static struct cr_handle_set *open_set(int i)
{
    struct cr_handle_set *hs = NULL;

    ck_assert_int_eq(cr_handle_set_open(&hs, backend_name(i)), 0);
    ck_assert_ptr_nonnull(hs);
    ck_assert_str_eq(cr_handle_set_name(hs), backend_name(i));
    return hs;
}

static void make_pipe(int p[2])
{
    ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
}

static void make_tcp_pair(int fds[2])
{
    ck_assert_int_eq(cr_test_tcp_pair(fds), 0);
}

static void close_pair(const int fds[2])
{
    close(fds[0]);
    close(fds[1]);
}

static void put_byte(int fd)
{
    ck_assert_int_eq(write(fd, "x", 1), 1);
}

static uint64_t now_ms(void)
{
    return cr_clock_now_ns() / CR_NSEC_PER_MSEC;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        continue;
}

/* Waits for exactly one event and returns it. */
static struct cr_handle_event wait_one(struct cr_handle_set *hs)
{
    struct cr_handle_event ev[4];

    ck_assert_int_eq(cr_handle_set_wait(hs, ev, 4, READY_WAIT_MS), 1);
    return ev[0];
}

static void assert_nothing_ready(struct cr_handle_set *hs, int timeout_ms)
{
    struct cr_handle_event ev[4];

    ck_assert_int_eq(cr_handle_set_wait(hs, ev, 4, timeout_ms), 0);
}

/* Raises the soft RLIMIT_NOFILE to at least want; false if the hard limit
 * does not allow it. Each test runs in its own process, so this is local. */
static bool raise_nofile(rlim_t want)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return false;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want)
        return true;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want)
        return false;
    rl.rlim_cur = want;
    return setrlimit(RLIMIT_NOFILE, &rl) == 0;
}

/* A thread blocked in cr_handle_set_wait(); results are read after join. */
struct waiter {
    pthread_t thread;
    struct cr_handle_set *hs;
    int timeout_ms;
    int n;
    uint64_t elapsed_ms;
    struct cr_handle_event ev[8];
};

static void *run_waiter(void *arg)
{
    struct waiter *w = arg;
    uint64_t start = now_ms();

    w->n = cr_handle_set_wait(w->hs, w->ev, 8, w->timeout_ms);
    w->elapsed_ms = now_ms() - start;
    return NULL;
}

static void start_waiter(struct waiter *w, struct cr_handle_set *hs, int timeout_ms)
{
    memset(w, 0, sizeof(*w));
    w->hs = hs;
    w->timeout_ms = timeout_ms;
    ck_assert_int_eq(pthread_create(&w->thread, NULL, run_waiter, w), 0);
}

static void join_waiter(struct waiter *w)
{
    ck_assert_int_eq(pthread_join(w->thread, NULL), 0);
}

/* ------------------------------------------------------------ readiness */

START_TEST(pipe_read_end_reports_readable_after_write)
{
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev;
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0, 7), 0);
    assert_nothing_ready(hs, 0);
    put_byte(p[1]);
    ev = wait_one(hs);
    ck_assert_int_eq(ev.fd, p[0]);
    ck_assert_uint_eq(ev.events, CR_EV_READ);
    ck_assert_uint_eq(ev.tag, 7);
    cr_handle_set_close(hs);
    close_pair(p);
}
END_TEST

START_TEST(pipe_write_end_reports_writable)
{
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev;
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_add(hs, p[1], CR_EV_WRITE, 0, 3), 0);
    ev = wait_one(hs);
    ck_assert_int_eq(ev.fd, p[1]);
    ck_assert_uint_eq(ev.events, CR_EV_WRITE);
    ck_assert_uint_eq(ev.tag, 3);
    cr_handle_set_close(hs);
    close_pair(p);
}
END_TEST

START_TEST(tcp_socket_reports_readable_after_peer_writes)
{
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev;
    int s[2];

    make_tcp_pair(s);
    ck_assert_int_eq(cr_handle_set_add(hs, s[1], CR_EV_READ, 0, 11), 0);
    assert_nothing_ready(hs, IDLE_WAIT_MS);
    ck_assert_int_eq(cr_test_write_all(s[0], "ping", 4), 0);
    ev = wait_one(hs);
    ck_assert_int_eq(ev.fd, s[1]);
    ck_assert_uint_eq(ev.events, CR_EV_READ);
    ck_assert_uint_eq(ev.tag, 11);
    cr_handle_set_close(hs);
    close_pair(s);
}
END_TEST

START_TEST(tcp_socket_reports_writable)
{
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev;
    int s[2];

    make_tcp_pair(s);
    ck_assert_int_eq(cr_handle_set_add(hs, s[0], CR_EV_READ | CR_EV_WRITE, 0, 12), 0);
    ev = wait_one(hs);
    ck_assert_int_eq(ev.fd, s[0]);
    ck_assert_uint_eq(ev.events, CR_EV_WRITE);
    ck_assert_uint_eq(ev.tag, 12);
    cr_handle_set_close(hs);
    close_pair(s);
}
END_TEST

START_TEST(tcp_peer_close_reports_readable_eof)
{
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev;
    char c;
    int s[2];

    make_tcp_pair(s);
    ck_assert_int_eq(cr_handle_set_add(hs, s[1], CR_EV_READ, 0, 13), 0);
    close(s[0]);
    ev = wait_one(hs);
    ck_assert_int_eq(ev.fd, s[1]);
    ck_assert_uint_ne(ev.events & CR_EV_READ, 0);
    ck_assert_int_eq(read(s[1], &c, 1), 0);
    cr_handle_set_close(hs);
    close(s[1]);
}
END_TEST

START_TEST(tcp_peer_reset_reports_error_even_without_interest)
{
    struct cr_handle_set *hs = open_set(_i);
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    struct cr_handle_event ev;
    int s[2];

    make_tcp_pair(s);
    /* select watches no handle without interest; it sees the reset as READ. */
    ck_assert_int_eq(cr_handle_set_add(hs, s[1], has_hup_and_err(_i) ? 0 : CR_EV_READ, 0, 14), 0);
    assert_nothing_ready(hs, 0);
    ck_assert_int_eq(setsockopt(s[0], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    close(s[0]); /* sends RST */
    ev = wait_one(hs);
    ck_assert_int_eq(ev.fd, s[1]);
    ck_assert_uint_eq(ev.tag, 14);
    if (has_hup_and_err(_i))
        ck_assert_uint_eq(ev.events, CR_EV_ERR | CR_EV_HUP);
    else
        ck_assert_uint_eq(ev.events, CR_EV_READ);
    cr_handle_set_close(hs);
    close(s[1]);
}
END_TEST

START_TEST(pipe_writer_close_reports_hangup)
{
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev;
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0, 15), 0);
    close(p[1]);
    ev = wait_one(hs);
    ck_assert_int_eq(ev.fd, p[0]);
    ck_assert_uint_eq(ev.tag, 15);
    /* select: a hang-up is readable (read() then returns 0). */
    ck_assert_uint_eq(ev.events, has_hup_and_err(_i) ? CR_EV_HUP : CR_EV_READ);
    cr_handle_set_close(hs);
    close(p[0]);
}
END_TEST

START_TEST(hangup_reported_with_empty_interest)
{
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev;
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], 0, 0, 16), 0);
    put_byte(p[1]); /* readable, but nobody asked */
    assert_nothing_ready(hs, IDLE_WAIT_MS);
    close(p[1]);
    if (!has_hup_and_err(_i)) {
        /* select watches no handle without interest (documented limit). */
        assert_nothing_ready(hs, IDLE_WAIT_MS);
    } else {
        ev = wait_one(hs);
        ck_assert_int_eq(ev.fd, p[0]);
        ck_assert_uint_eq(ev.events, CR_EV_HUP);
        ck_assert_uint_eq(ev.tag, 16);
    }
    cr_handle_set_close(hs);
    close(p[0]);
}
END_TEST

START_TEST(pipe_reader_close_reports_error)
{
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev;
    int p[2];

    make_pipe(p);
    /* With an empty interest where the backend can report errors so. */
    ck_assert_int_eq(cr_handle_set_add(hs, p[1], has_hup_and_err(_i) ? 0 : CR_EV_WRITE, 0, 17), 0);
    if (has_hup_and_err(_i))
        assert_nothing_ready(hs, 0);
    close(p[0]);
    ev = wait_one(hs);
    ck_assert_int_eq(ev.fd, p[1]);
    ck_assert_uint_eq(ev.tag, 17);
    /* select: a pipe nobody reads is writable (write() then fails). */
    ck_assert_uint_eq(ev.events, has_hup_and_err(_i) ? CR_EV_ERR : CR_EV_WRITE);
    cr_handle_set_close(hs);
    close(p[1]);
}
END_TEST

/* ------------------------------------------------------------ tags, modify, one-shot */

START_TEST(modify_changes_tag_and_interest)
{
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev;
    int s[2];

    make_tcp_pair(s);
    ck_assert_int_eq(cr_handle_set_add(hs, s[1], CR_EV_READ, 0, 1), 0);
    assert_nothing_ready(hs, 0);

    ck_assert_int_eq(cr_handle_set_modify(hs, s[1], CR_EV_WRITE, 0, 2), 0);
    ev = wait_one(hs);
    ck_assert_int_eq(ev.fd, s[1]);
    ck_assert_uint_eq(ev.events, CR_EV_WRITE);
    ck_assert_uint_eq(ev.tag, 2);

    ck_assert_int_eq(cr_handle_set_modify(hs, s[1], CR_EV_READ, 0, 3), 0);
    assert_nothing_ready(hs, 0);
    ck_assert_int_eq(cr_test_write_all(s[0], "x", 1), 0);
    ev = wait_one(hs);
    ck_assert_int_eq(ev.fd, s[1]);
    ck_assert_uint_eq(ev.events, CR_EV_READ);
    ck_assert_uint_eq(ev.tag, 3);
    cr_handle_set_close(hs);
    close_pair(s);
}
END_TEST

START_TEST(oneshot_reports_once_until_rearmed)
{
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev;
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, CR_HS_ONESHOT, 21), 0);
    put_byte(p[1]);
    ev = wait_one(hs);
    ck_assert_int_eq(ev.fd, p[0]);
    ck_assert_uint_eq(ev.tag, 21);
    /* Still readable (nothing read), but disarmed. */
    assert_nothing_ready(hs, IDLE_WAIT_MS);
    assert_nothing_ready(hs, 0);

    ck_assert_int_eq(cr_handle_set_modify(hs, p[0], CR_EV_READ, CR_HS_ONESHOT, 22), 0);
    ev = wait_one(hs);
    ck_assert_int_eq(ev.fd, p[0]);
    ck_assert_uint_eq(ev.events, CR_EV_READ);
    ck_assert_uint_eq(ev.tag, 22);
    assert_nothing_ready(hs, IDLE_WAIT_MS);
    cr_handle_set_close(hs);
    close_pair(p);
}
END_TEST

START_TEST(level_triggered_reports_again_while_readable)
{
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev;
    char c;
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0, 23), 0);
    put_byte(p[1]);
    for (int k = 0; k < 3; k++) {
        ev = wait_one(hs);
        ck_assert_int_eq(ev.fd, p[0]);
        ck_assert_uint_eq(ev.tag, 23);
    }
    ck_assert_int_eq(read(p[0], &c, 1), 1);
    assert_nothing_ready(hs, 0);
    cr_handle_set_close(hs);
    close_pair(p);
}
END_TEST

START_TEST(removed_handle_is_not_reported)
{
    struct cr_handle_set *hs = open_set(_i);
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0, 24), 0);
    put_byte(p[1]);
    ck_assert_int_eq(cr_handle_set_remove(hs, p[0]), 0);
    assert_nothing_ready(hs, IDLE_WAIT_MS);
    /* Registrable again after removal. */
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0, 25), 0);
    ck_assert_uint_eq(wait_one(hs).tag, 25);
    cr_handle_set_close(hs);
    close_pair(p);
}
END_TEST

/* ------------------------------------------------------------ other threads */

START_TEST(remove_and_add_while_waiting_take_effect_in_that_wait)
{
    struct cr_handle_set *hs = open_set(_i);
    struct waiter w;
    int a[2];
    int b[2];

    make_pipe(a);
    make_pipe(b);
    ck_assert_int_eq(cr_handle_set_add(hs, a[0], CR_EV_READ, 0, 31), 0);
    start_waiter(&w, hs, 3000);
    sleep_ms(50); /* let it block; the assertions hold whatever the timing */
    ck_assert_int_eq(cr_handle_set_remove(hs, a[0]), 0);
    put_byte(a[1]);
    sleep_ms(50); /* time for a wrong report of a[0] */
    put_byte(b[1]);
    ck_assert_int_eq(cr_handle_set_add(hs, b[0], CR_EV_READ, 0, 32), 0);
    join_waiter(&w);
    ck_assert_int_eq(w.n, 1);
    ck_assert_int_eq(w.ev[0].fd, b[0]);
    ck_assert_uint_eq(w.ev[0].events, CR_EV_READ);
    ck_assert_uint_eq(w.ev[0].tag, 32);
    ck_assert_uint_lt(w.elapsed_ms, PROMPT_MS);
    cr_handle_set_close(hs);
    close_pair(a);
    close_pair(b);
}
END_TEST

START_TEST(remove_then_close_while_waiting_is_harmless)
{
    struct cr_handle_set *hs = open_set(_i);
    struct waiter w;
    int a[2];
    int b[2];

    make_pipe(a);
    make_pipe(b);
    ck_assert_int_eq(cr_handle_set_add(hs, a[0], CR_EV_READ, 0, 36), 0);
    start_waiter(&w, hs, 3000);
    sleep_ms(50);
    /* As the contract asks: remove, then close, while another thread waits. */
    ck_assert_int_eq(cr_handle_set_remove(hs, a[0]), 0);
    close_pair(a);
    sleep_ms(50);
    put_byte(b[1]);
    ck_assert_int_eq(cr_handle_set_add(hs, b[0], CR_EV_READ, 0, 37), 0);
    join_waiter(&w);
    ck_assert_int_eq(w.n, 1);
    ck_assert_int_eq(w.ev[0].fd, b[0]);
    ck_assert_uint_eq(w.ev[0].tag, 37);
    cr_handle_set_close(hs);
    close_pair(b);
}
END_TEST

/* Adds, modifies and removes one ready fd over and over while the test's
 * thread waits. Tags: 2k+1 at the k-th add, 2k+2 after its modify. */
struct churner {
    pthread_t thread;
    struct cr_handle_set *hs;
    int fd;
    int rounds;
    int failures;
    int done; /* release store here pairs with the acquire load in the test */
};

static void *run_churner(void *arg)
{
    struct churner *c = arg;

    for (int k = 0; k < c->rounds; k++) {
        uint32_t tag = 2 * (uint32_t)k + 1;

        if (cr_handle_set_add(c->hs, c->fd, CR_EV_READ, k % 2 ? CR_HS_ONESHOT : 0, tag) != 0 ||
            cr_handle_set_modify(c->hs, c->fd, CR_EV_READ, 0, tag + 1) != 0 ||
            cr_handle_set_remove(c->hs, c->fd) != 0)
            c->failures++;
        if (k % 10 == 0)
            sleep_ms(1); /* spread the rounds over many waits */
    }
    __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

START_TEST(changes_racing_waits_report_only_registered_tags)
{
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev[8];
    struct churner c = {.hs = hs, .rounds = 300};
    uint64_t start = now_ms();
    int p[2];
    int waits = 0;

    make_pipe(p);
    put_byte(p[1]);
    c.fd = p[0];
    ck_assert_int_eq(pthread_create(&c.thread, NULL, run_churner, &c), 0);
    do {
        int n = cr_handle_set_wait(hs, ev, 8, 5);

        ck_assert_int_ge(n, 0);
        for (int e = 0; e < n; e++) {
            ck_assert_int_eq(ev[e].fd, p[0]);
            ck_assert_uint_ge(ev[e].tag, 1);
            ck_assert_uint_le(ev[e].tag, 2 * (uint32_t)c.rounds);
        }
        waits++;
    } while (!__atomic_load_n(&c.done, __ATOMIC_ACQUIRE) && now_ms() - start < PROMPT_MS);
    ck_assert_int_eq(pthread_join(c.thread, NULL), 0);
    ck_assert_int_eq(c.failures, 0);
    ck_assert_int_gt(waits, 1);
    /* All removed: nothing left to report. */
    assert_nothing_ready(hs, 0);
    cr_handle_set_close(hs);
    close_pair(p);
}
END_TEST

START_TEST(modify_while_waiting_rearms_oneshot_for_that_wait)
{
    struct cr_handle_set *hs = open_set(_i);
    struct waiter w;
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, CR_HS_ONESHOT, 33), 0);
    put_byte(p[1]);
    ck_assert_uint_eq(wait_one(hs).tag, 33);
    start_waiter(&w, hs, 3000);
    sleep_ms(50);
    ck_assert_int_eq(cr_handle_set_modify(hs, p[0], CR_EV_READ, CR_HS_ONESHOT, 34), 0);
    join_waiter(&w);
    ck_assert_int_eq(w.n, 1);
    ck_assert_int_eq(w.ev[0].fd, p[0]);
    ck_assert_uint_eq(w.ev[0].tag, 34);
    ck_assert_uint_lt(w.elapsed_ms, PROMPT_MS);
    cr_handle_set_close(hs);
    close_pair(p);
}
END_TEST

START_TEST(wake_ends_blocked_wait_with_zero)
{
    struct cr_handle_set *hs = open_set(_i);
    struct waiter w;
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0, 35), 0);
    start_waiter(&w, hs, 5000);
    sleep_ms(50);
    cr_handle_set_wake(hs);
    join_waiter(&w);
    ck_assert_int_eq(w.n, 0);
    ck_assert_uint_lt(w.elapsed_ms, PROMPT_MS);
    cr_handle_set_close(hs);
    close_pair(p);
}
END_TEST

START_TEST(wake_before_wait_ends_next_wait_at_once)
{
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev[4];
    uint64_t start;

    cr_handle_set_wake(hs);
    start = now_ms();
    ck_assert_int_eq(cr_handle_set_wait(hs, ev, 4, 5000), 0);
    ck_assert_uint_lt(now_ms() - start, PROMPT_MS);
    cr_handle_set_close(hs);
}
END_TEST

/* ------------------------------------------------------------ timeouts, signals */

START_TEST(wait_returns_zero_after_full_timeout)
{
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev[4];
    uint64_t start;
    uint64_t elapsed;
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0, 41), 0);
    start = cr_clock_now_ns();
    ck_assert_int_eq(cr_handle_set_wait(hs, ev, 4, 50), 0);
    elapsed = cr_clock_now_ns() - start;
    ck_assert_uint_ge(elapsed, 50 * CR_NSEC_PER_MSEC);
    ck_assert_uint_lt(elapsed, PROMPT_MS * CR_NSEC_PER_MSEC);
    cr_handle_set_close(hs);
    close_pair(p);
}
END_TEST

START_TEST(wait_zero_returns_at_once)
{
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev[4];
    uint64_t start;
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0, 42), 0);
    start = now_ms();
    ck_assert_int_eq(cr_handle_set_wait(hs, ev, 4, 0), 0);
    ck_assert_uint_lt(now_ms() - start, 500);
    cr_handle_set_close(hs);
    close_pair(p);
}
END_TEST

/* Signals delivered to the waiting thread; read by that thread only. */
static volatile sig_atomic_t sigusr1_count;

static void on_sigusr1(int sig)
{
    (void)sig;
    sigusr1_count++;
}

/* Installs on_sigusr1 without SA_RESTART, so a blocked wait fails with EINTR. */
static void install_sigusr1(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigusr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
}

/* Sends SIGUSR1 to target `kicks` times, every interval_ms, then writes a
 * byte to write_fd if it is not -1. */
struct kicker {
    pthread_t thread;
    pthread_t target;
    int kicks;
    int interval_ms;
    int write_fd;
    uint64_t first_ns; /* when the first signal was sent; read after join */
};

static void *run_kicker(void *arg)
{
    struct kicker *k = arg;

    for (int n = 0; n < k->kicks; n++) {
        sleep_ms(k->interval_ms);
        if (n == 0)
            k->first_ns = cr_clock_now_ns();
        pthread_kill(k->target, SIGUSR1);
    }
    if (k->write_fd >= 0) {
        sleep_ms(k->interval_ms);
        if (write(k->write_fd, "x", 1) != 1)
            abort(); /* Check asserts belong to the test's own thread */
    }
    return NULL;
}

static void start_kicker(struct kicker *k, int kicks, int interval_ms, int write_fd)
{
    k->target = pthread_self();
    k->kicks = kicks;
    k->interval_ms = interval_ms;
    k->write_fd = write_fd;
    k->first_ns = 0;
    ck_assert_int_eq(pthread_create(&k->thread, NULL, run_kicker, k), 0);
}

/* How long a wait of timeout_ms on backend i took while SIGUSR1 came three
 * times 40 ms apart: through cr_handle_set_wait, or, for an age, through
 * cr__handle_set_wait with a reading that old. *first_kick_ns: when the
 * first signal was sent, from the same start. */
static uint64_t kicked_wait_ns(int i, int timeout_ms, uint64_t age_ns, uint64_t *first_kick_ns)
{
    struct cr_handle_set *hs = open_set(i);
    struct cr_handle_event ev[4];
    struct kicker k;
    uint64_t start;
    uint64_t elapsed;
    int p[2];

    install_sigusr1();
    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0, 43), 0);
    /* Read before the kicker starts, so that its first signal is at least
     * 40 ms after this reading however late the wait itself begins. */
    start = cr_clock_now_ns();
    start_kicker(&k, 3, 40, -1);
    if (age_ns == 0)
        ck_assert_int_eq(cr_handle_set_wait(hs, ev, 4, timeout_ms), 0);
    else
        ck_assert_int_eq(cr__handle_set_wait(hs, ev, 4, timeout_ms, start - age_ns), 0);
    elapsed = cr_clock_now_ns() - start;
    ck_assert_int_eq(pthread_join(k.thread, NULL), 0);
    ck_assert_int_gt(sigusr1_count, 0);
    ck_assert_uint_ge(k.first_ns, start);
    *first_kick_ns = k.first_ns - start;
    cr_handle_set_close(hs);
    close_pair(p);
    return elapsed;
}

START_TEST(wait_retries_eintr_until_full_timeout)
{
    uint64_t first_kick;
    uint64_t elapsed = kicked_wait_ns(_i, 200, 0, &first_kick);

    /* A signal came during the wait, or nothing was retried. */
    ck_assert_msg(first_kick < elapsed, "the first signal came %.1f ms in, after the wait",
                  (double)first_kick / 1e6);
    ck_assert_uint_ge(elapsed, 200 * CR_NSEC_PER_MSEC);
    ck_assert_uint_lt(elapsed, PROMPT_MS * CR_NSEC_PER_MSEC);
}
END_TEST

/* A caller's reading (cr__handle_set_wait's since_ns) is what a retry
 * counts the timeout from: 1 s since a reading 990 ms old ends at the first
 * signal that makes the wait look again (about 40 ms in), not a second
 * later. "Not before" is measured from when the kicker sent that signal,
 * not from its nominal 40 ms, which a busy machine may stretch. */
START_TEST(wait_retries_eintr_until_the_callers_deadline)
{
    uint64_t first_kick;
    uint64_t elapsed = kicked_wait_ns(_i, 1000, 990 * CR_NSEC_PER_MSEC, &first_kick);

    ck_assert_msg(elapsed >= first_kick, "ended %.1f ms in, before the first signal (%.1f ms)",
                  (double)elapsed / 1e6, (double)first_kick / 1e6);
    ck_assert_uint_ge(elapsed, 40 * CR_NSEC_PER_MSEC);
    ck_assert_uint_lt(elapsed, 900 * CR_NSEC_PER_MSEC);
}
END_TEST

START_TEST(wait_reports_event_arriving_after_eintr)
{
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev[4];
    struct kicker k;
    int p[2];

    install_sigusr1();
    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0, 44), 0);
    start_kicker(&k, 2, 30, p[1]);
    ck_assert_int_eq(cr_handle_set_wait(hs, ev, 4, PROMPT_MS), 1);
    ck_assert_int_eq(pthread_join(k.thread, NULL), 0);
    ck_assert_int_gt(sigusr1_count, 0);
    ck_assert_int_eq(ev[0].fd, p[0]);
    ck_assert_uint_eq(ev[0].tag, 44);
    cr_handle_set_close(hs);
    close_pair(p);
}
END_TEST

/* ------------------------------------------------------------ bad input */

START_TEST(add_negative_fd_returns_ebadf)
{
    struct cr_handle_set *hs = open_set(_i);

    ck_assert_int_eq(cr_handle_set_add(hs, -1, CR_EV_READ, 0, 0), -EBADF);
    cr_handle_set_close(hs);
}
END_TEST

START_TEST(add_closed_fd_returns_ebadf)
{
    struct cr_handle_set *hs = open_set(_i);
    int p[2];

    make_pipe(p);
    close_pair(p);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0, 0), -EBADF);
    cr_handle_set_close(hs);
}
END_TEST

START_TEST(add_twice_returns_eexist)
{
    struct cr_handle_set *hs = open_set(_i);
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0, 1), 0);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_WRITE, 0, 2), -EEXIST);
    /* The first registration stands. */
    put_byte(p[1]);
    ck_assert_uint_eq(wait_one(hs).tag, 1);
    cr_handle_set_close(hs);
    close_pair(p);
}
END_TEST

START_TEST(modify_unknown_fd_returns_enoent)
{
    struct cr_handle_set *hs = open_set(_i);
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_modify(hs, p[0], CR_EV_READ, 0, 0), -ENOENT);
    cr_handle_set_close(hs);
    close_pair(p);
}
END_TEST

START_TEST(remove_unknown_fd_returns_enoent)
{
    struct cr_handle_set *hs = open_set(_i);
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_remove(hs, p[0]), -ENOENT);
    cr_handle_set_close(hs);
    close_pair(p);
}
END_TEST

START_TEST(remove_twice_returns_enoent)
{
    struct cr_handle_set *hs = open_set(_i);
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0, 0), 0);
    ck_assert_int_eq(cr_handle_set_remove(hs, p[0]), 0);
    ck_assert_int_eq(cr_handle_set_remove(hs, p[0]), -ENOENT);
    ck_assert_int_eq(cr_handle_set_modify(hs, p[0], CR_EV_READ, 0, 0), -ENOENT);
    cr_handle_set_close(hs);
    close_pair(p);
}
END_TEST

START_TEST(unknown_interest_or_flag_bits_return_einval)
{
    struct cr_handle_set *hs = open_set(_i);
    int p[2];

    make_pipe(p);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_HUP, 0, 0), -EINVAL);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], 0x100, 0, 0), -EINVAL);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0x100, 0), -EINVAL);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0, 0), 0);
    ck_assert_int_eq(cr_handle_set_modify(hs, p[0], CR_EV_ERR, 0, 0), -EINVAL);
    ck_assert_int_eq(cr_handle_set_modify(hs, p[0], CR_EV_READ, 0x100, 0), -EINVAL);
    cr_handle_set_close(hs);
    close_pair(p);
}
END_TEST

/* Edge triggering where the backend has it (epoll): one report per arrival,
 * none while the data just stays; elsewhere the flag is refused. */
START_TEST(edge_registration_reports_each_arrival_once)
{
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev;
    int p[2];

    make_pipe(p);
    if (!cr_handle_set_has_edge(hs)) {
        ck_assert_str_ne(backend_name(_i), "epoll");
        ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, CR_HS_EDGE, 1), -EINVAL);
        ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0, 1), 0);
        ck_assert_int_eq(cr_handle_set_modify(hs, p[0], CR_EV_READ, CR_HS_EDGE, 1), -EINVAL);
    } else {
        ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, CR_HS_EDGE, 1), 0);
        assert_nothing_ready(hs, 0);
        put_byte(p[1]);
        ev = wait_one(hs);
        ck_assert_int_eq(ev.fd, p[0]);
        ck_assert(ev.events & CR_EV_READ);
        assert_nothing_ready(hs, 50); /* still readable: no new edge */
        put_byte(p[1]);
        ev = wait_one(hs);
        ck_assert(ev.events & CR_EV_READ);
        close(p[1]);
        p[1] = -1;
        ev = wait_one(hs); /* the writer's close is an arrival too */
        ck_assert(ev.events & CR_EV_HUP);
    }
    cr_handle_set_close(hs);
    close(p[0]);
    if (p[1] >= 0)
        close(p[1]);
}
END_TEST

START_TEST(fd_at_or_above_fd_setsize_refused_by_select_only)
{
    struct cr_handle_set *hs;
    struct cr_handle_event ev;
    int p[2];
    int q[2];

    if (!raise_nofile(BIG_FD + 1)) {
        fprintf(stderr, "skipped: RLIMIT_NOFILE hard limit below %d\n", BIG_FD + 1);
        return;
    }
    hs = open_set(_i);
    make_pipe(p);
    ck_assert_int_eq(dup2(p[0], BIG_FD), BIG_FD);
    if (is_select(_i)) {
        ck_assert_int_eq(cr_handle_set_add(hs, BIG_FD, CR_EV_READ, 0, 51), -EINVAL);
        ck_assert_int_eq(cr_handle_set_modify(hs, BIG_FD, CR_EV_READ, 0, 51), -ENOENT);
        ck_assert_int_eq(cr_handle_set_remove(hs, BIG_FD), -ENOENT);
        /* The set still works. */
        make_pipe(q);
        ck_assert_int_eq(cr_handle_set_add(hs, q[0], CR_EV_READ, 0, 52), 0);
        put_byte(p[1]);
        assert_nothing_ready(hs, IDLE_WAIT_MS);
        put_byte(q[1]);
        ev = wait_one(hs);
        ck_assert_int_eq(ev.fd, q[0]);
        ck_assert_uint_eq(ev.tag, 52);
        close_pair(q);
    } else {
        ck_assert_int_eq(cr_handle_set_add(hs, BIG_FD, CR_EV_READ, 0, 51), 0);
        assert_nothing_ready(hs, 0);
        put_byte(p[1]);
        ev = wait_one(hs);
        ck_assert_int_eq(ev.fd, BIG_FD);
        ck_assert_uint_eq(ev.tag, 51);
        ck_assert_int_eq(cr_handle_set_remove(hs, BIG_FD), 0);
    }
    cr_handle_set_close(hs);
    close(BIG_FD);
    close_pair(p);
}
END_TEST

/* ------------------------------------------------------------ many handles */

START_TEST(many_handles_report_exactly_the_ready_ones)
{
    /* select: every pipe end below FD_SETSIZE, with room for the runner's. */
    int n = is_select(_i) ? 400 : 500;
    struct cr_handle_set *hs;
    struct cr_handle_event ev[64];
    int(*p)[2];
    bool *seen;
    int got;

    if (!raise_nofile((rlim_t)(2 * n + 64))) {
        fprintf(stderr, "skipped: RLIMIT_NOFILE hard limit below %d\n", 2 * n + 64);
        return;
    }
    hs = open_set(_i);
    p = calloc((size_t)n, sizeof(*p));
    seen = calloc((size_t)n, sizeof(*seen));
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(seen);
    for (int k = 0; k < n; k++) {
        make_pipe(p[k]);
        ck_assert_int_eq(cr_handle_set_add(hs, p[k][0], CR_EV_READ, 0, (uint32_t)k), 0);
    }
    assert_nothing_ready(hs, 0);
    for (int k = 0; k < n; k += 10)
        put_byte(p[k][1]);
    got = cr_handle_set_wait(hs, ev, 64, READY_WAIT_MS);
    ck_assert_int_eq(got, n / 10);
    for (int e = 0; e < got; e++) {
        uint32_t k = ev[e].tag;

        ck_assert_uint_lt(k, (uint32_t)n);
        ck_assert_uint_eq(k % 10, 0);
        ck_assert_int_eq(ev[e].fd, p[k][0]);
        ck_assert_uint_eq(ev[e].events, CR_EV_READ);
        ck_assert(!seen[k]);
        seen[k] = true;
    }
    cr_handle_set_close(hs);
    for (int k = 0; k < n; k++)
        close_pair(p[k]);
    free(seen);
    free(p);
}
END_TEST

START_TEST(small_max_is_honoured_and_later_waits_reach_the_rest)
{
    enum { N = 20, MAX = 5 };
    struct cr_handle_set *hs = open_set(_i);
    struct cr_handle_event ev[MAX + 1];
    bool seen[N] = {false};
    int p[N][2];
    int distinct = 0;

    for (int k = 0; k < N; k++) {
        make_pipe(p[k]);
        ck_assert_int_eq(cr_handle_set_add(hs, p[k][0], CR_EV_READ, 0, (uint32_t)k), 0);
        put_byte(p[k][1]);
    }
    for (int w = 0; w < N / MAX; w++) {
        ck_assert_int_eq(cr_handle_set_wait(hs, ev, MAX, READY_WAIT_MS), MAX);
        for (int e = 0; e < MAX; e++) {
            ck_assert_uint_lt(ev[e].tag, N);
            if (!seen[ev[e].tag])
                distinct++;
            seen[ev[e].tag] = true;
        }
    }
    /* Level-triggered and all still ready: fair backends rotate through them. */
    ck_assert_int_eq(distinct, N);
    cr_handle_set_close(hs);
    for (int k = 0; k < N; k++)
        close_pair(p[k]);
}
END_TEST

/* ------------------------------------------------------------ backend selection */

START_TEST(unknown_backend_returns_enoent)
{
    static char sentinel;
    struct cr_handle_set *hs = (struct cr_handle_set *)&sentinel; /* must be reset */

    ck_assert_int_eq(cr_handle_set_open(&hs, "kqueue"), -ENOENT);
    ck_assert_ptr_null(hs);
}
END_TEST

START_TEST(default_backend_is_first_listed)
{
    const char *const *names = cr_handle_set_backends();
    struct cr_handle_set *hs;

    ck_assert_ptr_nonnull(names[0]);
    ck_assert_int_eq(cr_handle_set_open(&hs, NULL), 0);
    ck_assert_str_eq(cr_handle_set_name(hs), names[0]);
    cr_handle_set_close(hs);
    ck_assert_int_eq(cr_handle_set_open(&hs, ""), 0);
    ck_assert_str_eq(cr_handle_set_name(hs), names[0]);
    cr_handle_set_close(hs);
    cr_handle_set_close(NULL);
}
END_TEST

/* Each backend cr_handle_set_backends lists opens under its name and
 * works: a pipe added is reported readable (its tag and fd) once written,
 * and nothing once removed, with its byte still unread. */
START_TEST(every_listed_backend_opens)
{
    const char *const *names = cr_handle_set_backends();
    int i;

    for (i = 0; names[i] != NULL; i++) {
        struct cr_handle_set *hs = open_set(i);
        struct cr_handle_event ev[4];
        int p[2];
        int n;

        make_pipe(p);
        ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0, 70 + (uint32_t)i), 0);
        ck_assert_int_eq(cr_handle_set_wait(hs, ev, 4, 0), 0);
        ck_assert_int_eq(write(p[1], "x", 1), 1);
        n = cr_handle_set_wait(hs, ev, 4, PROMPT_MS);
        ck_assert_msg(n == 1, "%s: %d events for a written pipe", names[i], n);
        ck_assert_int_eq(ev[0].fd, p[0]);
        ck_assert_uint_eq(ev[0].tag, 70 + (uint32_t)i);
        ck_assert_uint_ne(ev[0].events & CR_EV_READ, 0);
        ck_assert_int_eq(cr_handle_set_remove(hs, p[0]), 0);
        n = cr_handle_set_wait(hs, ev, 4, 50);
        ck_assert_msg(n == 0, "%s: %d events after the pipe was removed", names[i], n);
        cr_handle_set_close(hs);
        close_pair(p);
    }
    ck_assert_int_ge(i, 1);
}
END_TEST

Suite *handle_set_suite(void);
Suite *handle_set_suite(void)
{
    Suite *s = suite_create("handle_set");
    TCase *tc = tcase_create("conformance");
    TCase *api = tcase_create("api");
    int n = 0;

    while (cr_handle_set_backends()[n] != NULL)
        n++;
    tcase_set_timeout(tc, 10);
    tcase_add_loop_test(tc, pipe_read_end_reports_readable_after_write, 0, n);
    tcase_add_loop_test(tc, pipe_write_end_reports_writable, 0, n);
    tcase_add_loop_test(tc, tcp_socket_reports_readable_after_peer_writes, 0, n);
    tcase_add_loop_test(tc, tcp_socket_reports_writable, 0, n);
    tcase_add_loop_test(tc, tcp_peer_close_reports_readable_eof, 0, n);
    tcase_add_loop_test(tc, tcp_peer_reset_reports_error_even_without_interest, 0, n);
    tcase_add_loop_test(tc, pipe_writer_close_reports_hangup, 0, n);
    tcase_add_loop_test(tc, hangup_reported_with_empty_interest, 0, n);
    tcase_add_loop_test(tc, pipe_reader_close_reports_error, 0, n);
    tcase_add_loop_test(tc, modify_changes_tag_and_interest, 0, n);
    tcase_add_loop_test(tc, oneshot_reports_once_until_rearmed, 0, n);
    tcase_add_loop_test(tc, level_triggered_reports_again_while_readable, 0, n);
    tcase_add_loop_test(tc, removed_handle_is_not_reported, 0, n);
    tcase_add_loop_test(tc, remove_and_add_while_waiting_take_effect_in_that_wait, 0, n);
    tcase_add_loop_test(tc, remove_then_close_while_waiting_is_harmless, 0, n);
    tcase_add_loop_test(tc, changes_racing_waits_report_only_registered_tags, 0, n);
    tcase_add_loop_test(tc, modify_while_waiting_rearms_oneshot_for_that_wait, 0, n);
    tcase_add_loop_test(tc, wake_ends_blocked_wait_with_zero, 0, n);
    tcase_add_loop_test(tc, wake_before_wait_ends_next_wait_at_once, 0, n);
    tcase_add_loop_test(tc, wait_returns_zero_after_full_timeout, 0, n);
    tcase_add_loop_test(tc, wait_zero_returns_at_once, 0, n);
    tcase_add_loop_test(tc, wait_retries_eintr_until_full_timeout, 0, n);
    tcase_add_loop_test(tc, wait_retries_eintr_until_the_callers_deadline, 0, n);
    tcase_add_loop_test(tc, wait_reports_event_arriving_after_eintr, 0, n);
    tcase_add_loop_test(tc, add_negative_fd_returns_ebadf, 0, n);
    tcase_add_loop_test(tc, add_closed_fd_returns_ebadf, 0, n);
    tcase_add_loop_test(tc, add_twice_returns_eexist, 0, n);
    tcase_add_loop_test(tc, modify_unknown_fd_returns_enoent, 0, n);
    tcase_add_loop_test(tc, remove_unknown_fd_returns_enoent, 0, n);
    tcase_add_loop_test(tc, remove_twice_returns_enoent, 0, n);
    tcase_add_loop_test(tc, unknown_interest_or_flag_bits_return_einval, 0, n);
    tcase_add_loop_test(tc, fd_at_or_above_fd_setsize_refused_by_select_only, 0, n);
    tcase_add_loop_test(tc, edge_registration_reports_each_arrival_once, 0, n);
    tcase_add_loop_test(tc, many_handles_report_exactly_the_ready_ones, 0, n);
    tcase_add_loop_test(tc, small_max_is_honoured_and_later_waits_reach_the_rest, 0, n);
    suite_add_tcase(s, tc);

    tcase_add_test(api, unknown_backend_returns_enoent);
    tcase_add_test(api, default_backend_is_first_listed);
    tcase_add_test(api, every_listed_backend_opens);
    suite_add_tcase(s, api);
    return s;
}
