/*
 * cores.h - cabrank-bench's --cores (cores.c): the CPUs it may use (its affinity mask when the
 * sweep is planned), which core counts of the list fit (k CPUs for the server and at least one
 * left for the load) and which are skipped, and the pinning of each core count: the servers it
 * starts on the first k of those CPUs, itself (so wrk, which it forks, and its own line and
 * interval loads) on the others. Main thread; the server's CPU set is applied by the children
 * it forks (bench_cores_enter_server(), between fork and exec, so a server's whole process
 * tree inherits it).
 */
#ifndef CABRANK_BENCH_CORES_H
#define CABRANK_BENCH_CORES_H

#include <cabrank/common.h>

#include "bench_options.h"

#include <sched.h>
#include <stddef.h>

struct bench_cores {
    cpu_set_t usable;      /* the CPUs cabrank-bench may use */
    int cpus[CPU_SETSIZE]; /* their numbers, ascending */
    int ncpus;
    unsigned run[MAX_POINTS]; /* the core counts measured, ascending */
    int nrun;
    unsigned skipped[MAX_POINTS]; /* the core counts that leave no CPU for the load */
    int nskipped;
};

/* Plans want[0..nwant) (any order, repeats dropped) over the CPUs of usable. */
void bench_cores_plan_from(const cpu_set_t *usable, const unsigned *want, int nwant,
                           struct bench_cores *p);

/* Plans want over this process's affinity mask (sched_getaffinity). 0 or -errno. */
CR_MUST_CHECK int bench_cores_plan(const unsigned *want, int nwant, struct bench_cores *p);

/*
 * What the plan skipped, for stderr and the report: "skipped 2,4,8: this machine lets
 * cabrank-bench use 2 CPUs; each point needs k for the server and at least one for the load";
 * "" when nothing is skipped. Cut to cap bytes.
 */
void bench_cores_skip_text(const struct bench_cores *p, char *out, size_t cap);

/* The plan for the report's header: the core counts, the CPUs, and the skip text. */
void bench_cores_describe(const struct bench_cores *p, char *out, size_t cap);

/* The server's CPUs at k (the first k usable) and the load's (the others). */
void bench_cores_sets(const struct bench_cores *p, unsigned k, cpu_set_t *server, cpu_set_t *load);

/* Pins for core count k (one of p->run): this process to the load's CPUs, the servers started
 * from now on to the server's. 0 or -errno. */
CR_MUST_CHECK int bench_cores_pin(const struct bench_cores *p, unsigned k);

/* Undoes bench_cores_pin(): this process back on every usable CPU, servers unpinned. 0 or
 * -errno. */
CR_MUST_CHECK int bench_cores_unpin(const struct bench_cores *p);

/* In a server child just forked: moves it to the server's CPUs when a core count is pinned,
 * else does nothing. 0 or -errno. */
CR_MUST_CHECK int bench_cores_enter_server(void);

#endif /* CABRANK_BENCH_CORES_H */
