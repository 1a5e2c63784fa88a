/*
 * procstat.h - what a server process tree has used, read from /proc: CPU time and context
 * switches summed over every thread of the process and of its live descendants (the process
 * models' workers), plus the CPU time of the children they have reaped, and the peak resident set
 * (VmHWM) summed over the live processes; the CPU time also split into user and system time.
 * cabrank-bench and bench/pools take a reading before and after a load and divide the difference
 * by the requests served. Reads only; any thread.
 * The current resident set (VmRSS) is summed likewise.
 */
#ifndef CABRANK_BENCH_PROCSTAT_H
#define CABRANK_BENCH_PROCSTAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct bench_usage {
    double cpu_s;       /* CPU seconds: live processes' runtime, reaped children's ticks */
    double user_s;      /* of which in user mode: utime, and reaped children's cutime */
    double sys_s;       /* of which in the kernel: stime, and reaped children's cstime */
    uint64_t ctxsw;     /* voluntary + involuntary context switches, live threads */
    uint64_t hwm_kb;    /* VmHWM summed over the live processes */
    uint64_t rss_kb;    /* VmRSS now, summed likewise */
    unsigned processes; /* processes seen */
};

/*
 * Reads the usage of root and of its descendants (up to 4 levels) into *u (zeroed first).
 * A process gone while it is read is left out; reaped children's context switches are lost
 * (the kernel keeps only their CPU time, in the parent's cutime and cstime, and only as tick
 * samples, which undercount processes that run in short bursts). user_s and sys_s are the
 * kernel's utime and stime: it samples the split at each tick and scales it to the runtime, so
 * their sum follows cpu_s while the split is as exact as the ticks that fell in the interval
 * (a process that ran between ticks shows all its time as user). Thread-safe.
 */
void bench_usage_read(pid_t root, struct bench_usage *u);

/* Reads a small /proc file whole into buf (NUL-terminated); false when it is gone or
 * empty. Thread-safe. */
bool bench_read_small(const char *path, char *buf, size_t cap);

#endif /* CABRANK_BENCH_PROCSTAT_H */
