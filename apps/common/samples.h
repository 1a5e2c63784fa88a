/*
 * samples.h - latency samples of one measured point and their percentiles, shared by the
 * programs that measure: cabrank-bench (the line protocol load and the intervals) and
 * cabrank-oltp-load. One owner thread.
 */
#ifndef CABRANK_APPS_SAMPLES_H
#define CABRANK_APPS_SAMPLES_H

#include <cabrank/common.h>

#include <stddef.h>
#include <stdint.h>

/* Growable array of nanosecond samples; zero-initialised is empty. */
struct bench_samples {
    uint64_t *v;
    size_t len;
    size_t cap;
};

/* Percentiles in microseconds; NAN when there was no sample. */
struct bench_pcts {
    double p50_us;
    double p90_us;
    double p99_us;
    double p999_us;
};

/* Appends ns; beyond 64 Mi samples the rest are dropped (a bounded memory). 0 or -ENOMEM. */
CR_MUST_CHECK int bench_samples_add(struct bench_samples *s, uint64_t ns);

/* Sorts the samples and returns their percentiles (nearest rank). */
struct bench_pcts bench_samples_pcts(struct bench_samples *s);

/* Frees and empties s; NULL-safe. */
void bench_samples_fini(struct bench_samples *s);

#endif /* CABRANK_APPS_SAMPLES_H */
