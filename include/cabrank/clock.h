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

/* Wall-clock time in nanoseconds since the Unix epoch. Thread-safe. */
uint64_t cr_clock_wall_ns(void);

/* CPU time consumed by the calling thread, in nanoseconds. Thread-safe. */
uint64_t cr_clock_thread_cpu_ns(void);

#endif /* CABRANK_CLOCK_H */
