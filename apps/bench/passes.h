/*
 * passes.h - which points each pass of cabrank-bench's sweep measures (passes.c): the first
 * pass every point asked, the --repeat - 1 repetitions only the configurations, workloads and
 * concurrencies the claims compare (claims.c), the configurations in reverse order every other
 * pass. Called by main.c on the program's thread; no state.
 */
#ifndef CABRANK_BENCH_PASSES_H
#define CABRANK_BENCH_PASSES_H

#include "bench_options.h"

#include <stdbool.h>

/* Whether pass measures workload w (as --workloads names it) at concurrency c (0: at any). */
bool bench_pass_measures(const struct bench_options *o, int pass, const char *w, unsigned c);

/* The index in o->configs of the i-th configuration pass runs, -1 when it runs none there. */
int bench_pass_config(const struct bench_options *o, int pass, int i);

/* The points pass measures of workload w on one server. */
int bench_pass_points(const struct bench_options *o, int pass, const char *w);

#endif /* CABRANK_BENCH_PASSES_H */
