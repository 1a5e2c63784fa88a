/*
 * clock.h - monotonic and wall-clock time in nanoseconds, for timers, timeouts
 * and latency measurement. Thread-safe throughout.
 */
#ifndef CABRANK_CLOCK_H
#define CABRANK_CLOCK_H

#include <cabrank/common.h>

#define CR_NSEC_PER_MSEC UINT64_C(1000000)
#define CR_NSEC_PER_SEC  UINT64_C(1000000000)

/* Monotonic time in nanoseconds since an arbitrary origin. Thread-safe. */
uint64_t cr_clock_now_ns(void);

/*
 * The time the work the calling thread is doing was taken: inside a reactor's
 * dispatch, when its event left the reactor; elsewhere (no dispatch on this
 * thread) the same as cr_clock_now_ns(). Timeouts, ages and start times taken
 * from it count from the event, so a handler that sets several pays no clock
 * read for them (the reactor read the clock when it took the event). It lags
 * the true time by what the handler has run so far, which a timeout of
 * milliseconds and more does not notice; a measurement of the handler itself
 * reads cr_clock_now_ns(). Thread-safe.
 */
uint64_t cr_clock_event_ns(void);

/*
 * cr_clock_now_ns(), read where a handler's work ends (a request's latency
 * end), after which the handler does no more than non-blocking I/O and
 * returns. Inside a reactor's dispatch, the thread that dispatched takes its
 * next event at this reading instead of reading the clock again: the take's
 * timers, the next event's time and the Leader/Followers pool's role clock
 * and deferral then lag the true time by that rest of the handler (a send of
 * a few microseconds), and a small request pays one clock read fewer. A
 * handler that reads it and then blocks makes the pool's next take that much
 * late; call cr_clock_now_ns() there. Thread-safe.
 */
uint64_t cr_clock_end_ns(void);

/* Wall-clock time in nanoseconds since the Unix epoch. Thread-safe. */
uint64_t cr_clock_wall_ns(void);

/*
 * The wall-clock second (since the Unix epoch) of cr_clock_event_ns(), for
 * stamps of one-second resolution: an HTTP Date, a log line's time. Derived
 * from the event's monotonic reading by an offset the calling thread reads
 * afresh once its event time leaves the wall-clock second it was read in, so
 * a busy thread reads the wall clock once a second rather than once a stamp,
 * and a step of the wall clock shows within a second. Thread-safe.
 */
int64_t cr_clock_event_wall_sec(void);

/* CPU time consumed by the calling thread, in nanoseconds. Thread-safe. */
uint64_t cr_clock_thread_cpu_ns(void);

#endif /* CABRANK_CLOCK_H */
