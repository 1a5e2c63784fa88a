/*
 * clock.c - time sources for timers, timeouts and latency figures. Plain
 * clock_gettime() wrappers; CLOCK_MONOTONIC is vDSO-fast, so callers may read
 * it per event. Thread-safe.
 */
#include <cabrank/clock.h>

#include <time.h>

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

uint64_t cr_clock_wall_ns(void)
{
    return read_clock(CLOCK_REALTIME);
}

uint64_t cr_clock_thread_cpu_ns(void)
{
    return read_clock(CLOCK_THREAD_CPUTIME_ID);
}
