/*
 * machine.h - what cabrank-bench records about the machine it measures on (machine.c): its CPUs
 * and kernel for the report's header, and per point the load average and the noise, the share of
 * the machine's CPU time taken by processes other than the server under test and the load: from
 * /proc/stat over a short idle sample before the point and over the point itself, less the
 * server tree's CPU time (procstat.h) and this program's own and its reaped children's (the line
 * load runs here, wrk is a child reaped at the end of its run). The parsers and the share are pure
 * functions, for the tests. Called by main.c on the program's one thread; no state.
 */
#ifndef CABRANK_BENCH_MACHINE_H
#define CABRANK_BENCH_MACHINE_H

#include "report.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The aggregate "cpu" line of /proc/stat, in clock ticks summed over every CPU. */
struct bench_cpu_times {
    uint64_t busy;  /* user, nice, system, irq, softirq, steal (guest is inside user) */
    uint64_t total; /* busy plus idle and iowait */
};

/* "N x <model name>, <sysname> <release>" of this machine into out (cut to cap). */
void bench_machine_text(char *out, size_t cap);

/* Parses the "cpu " line of a /proc/stat text (NUL-terminated). 0 or -EPROTO. */
CR_MUST_CHECK int bench_cpu_times_parse(const char *stat, struct bench_cpu_times *t);

/* Parses the 1-minute load average of a /proc/loadavg text. 0 or -EPROTO. */
CR_MUST_CHECK int bench_loadavg_parse(const char *text, double *out);

/*
 * The share of the machine's CPU time (0..1) between samples a and b that was not ours_s
 * seconds of ours (the server's and the load's): (busy ticks - ours_s * tick) / total ticks,
 * clamped to [0, 1] (ticks and the CPU clocks disagree by a tick or so). NAN when no tick passed
 * or b is older than a. tick: clock ticks per second.
 */
double bench_other_share(const struct bench_cpu_times *a, const struct bench_cpu_times *b,
                         double ours_s, double tick);

/* 1 when before or during is above max, 0 when the measured ones are not, -1 when neither
 * was measured (NAN). */
int bench_noise_judge(double before, double during, double max);

/* A point's noise measurement in progress (bench_noise_start() to bench_noise_end()). */
struct bench_noise {
    double loadavg;               /* before the point; NAN: not read */
    double before;                /* others' share over the idle sample; NAN: none */
    struct bench_cpu_times times; /* /proc/stat when the point began */
    double ours_s;                /* this program's and its reaped children's CPU then */
    double server_s;              /* the server tree's CPU then */
    bool ok;                      /* times was read */
};

/*
 * Before a point against the server at pid: reads the load average, measures the others' share
 * over an idle sample of sample_s seconds (0: none), then starts the point's window.
 */
void bench_noise_start(struct bench_noise *n, pid_t server, double sample_s);

/*
 * After the point: fills row's loadavg_before, other_cpu_before, other_cpu_during and noisy
 * (bench_noise_judge() against max).
 */
void bench_noise_end(const struct bench_noise *n, pid_t server, double max, struct bench_row *row);

/* Says on stderr, when row is noisy, how much of the CPU others took. */
void bench_noise_warn(const struct bench_row *row, double max);

#endif /* CABRANK_BENCH_MACHINE_H */
