/*
 * clock.c - time sources for timers, timeouts and latency figures. Plain
 * clock_gettime() wrappers, and the calling thread's event time (see
 * clock_internal.h). The event time exists because a clock read by every
 * layer is a visible share of a small request's CPU, even through the vDSO
 * (figures: docs/design/os.md). Thread-safe.
 */
#include <cabrank/clock.h>

#include "os/clock_internal.h"

#include <time.h>

/* 0: the thread handles no event (a clock reading is never 0 after boot). */
static _Thread_local uint64_t tl_event_ns;
/* 0: the handler running lent no reading (cr_clock_end_ns). */
static _Thread_local uint64_t tl_end_ns;

static uint64_t read_clock(clockid_t id)
{
    struct timespec ts;

    /* The clocks used here cannot fail on Linux with a valid timespec. */
    (void)clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * CR_NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

uint64_t cr_clock_now_ns(void)
{
    return read_clock(CLOCK_MONOTONIC);
}

uint64_t cr_clock_event_ns(void)
{
    return tl_event_ns != 0 ? tl_event_ns : cr_clock_now_ns();
}

uint64_t cr_clock_end_ns(void)
{
    uint64_t now = cr_clock_now_ns();

    if (tl_event_ns != 0)
        tl_end_ns = now;
    return now;
}

uint64_t cr__clock_end_take(void)
{
    uint64_t end = tl_end_ns;

    tl_end_ns = 0;
    return end;
}

uint64_t cr__clock_event_enter(uint64_t taken_ns)
{
    uint64_t outer = tl_event_ns;

    tl_event_ns = taken_ns;
    tl_end_ns = 0;
    return outer;
}

void cr__clock_event_leave(uint64_t outer)
{
    tl_event_ns = outer;
}

void cr__clock_event_resume(uint64_t now)
{
    tl_end_ns = 0;
    if (tl_event_ns != 0)
        tl_event_ns = now;
}

uint64_t cr_clock_wall_ns(void)
{
    return read_clock(CLOCK_REALTIME);
}

/* The calling thread's wall-clock offset (wall minus monotonic, ns), and the
 * monotonic span [from, until) of the wall-clock second it was read in. */
static _Thread_local int64_t tl_wall_offset;
static _Thread_local uint64_t tl_wall_from;
static _Thread_local uint64_t tl_wall_until;

int64_t cr_clock_event_wall_sec(void)
{
    uint64_t at = cr_clock_event_ns();

    if (at < tl_wall_from || at >= tl_wall_until) {
        uint64_t mono = cr_clock_now_ns();
        uint64_t wall = cr_clock_wall_ns();
        uint64_t into = wall % CR_NSEC_PER_SEC;

        tl_wall_offset = (int64_t)(wall - mono);
        tl_wall_from = mono > into ? mono - into : 0;
        tl_wall_until = mono + (CR_NSEC_PER_SEC - into);
    }
    return ((int64_t)at + tl_wall_offset) / (int64_t)CR_NSEC_PER_SEC;
}

uint64_t cr_clock_thread_cpu_ns(void)
{
    return read_clock(CLOCK_THREAD_CPUTIME_ID);
}
