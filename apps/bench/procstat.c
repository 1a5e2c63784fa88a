/*
 * procstat.c - a server tree's CPU time, context switches and peak RSS from /proc (see
 * procstat.h). Walks /proc/<pid>/task/<tid>/{status,children}, reads each process's CPU clock,
 * and its user and system time and its reaped children's from /proc/<pid>/stat; no state, no
 * threads.
 */
#include "procstat.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_DEPTH 4 /* server -> manager -> worker -> helper, with room */

bool bench_read_small(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    size_t n;

    if (f == NULL)
        return false;
    n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n > 0;
}

/* Clock ticks of a stat line: fields 14 to 17 (utime, stime, cutime, cstime). */
struct stat_times {
    unsigned long utime;
    unsigned long stime;
    long cutime;
    long cstime;
};

/* The fields are counted after the parenthesised command (which may hold spaces and
 * parentheses, hence the last ')'). */
static bool stat_times(const char *buf, struct stat_times *t)
{
    const char *p = strrchr(buf, ')');

    return p != NULL && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %ld %ld",
                               &t->utime, &t->stime, &t->cutime, &t->cstime) == 4;
}

/*
 * The CPU time of a whole process, threads that exited included, from its CPU clock: the
 * scheduler's runtime in nanoseconds. Not utime + stime from /proc/<pid>/stat: on a kernel
 * without their scaling to the runtime they are tick samples, and a process that runs in short
 * bursts between sleeps is seldom the one a tick lands on, so they undercount by a wide margin
 * (figures: docs/design/bench.md).
 */
static double process_cpu_s(pid_t pid)
{
    clockid_t clk;
    struct timespec ts;

    if (clock_getcpuclockid(pid, &clk) != 0 || clock_gettime(clk, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void add_switches(const char *path, struct bench_usage *u)
{
    char line[256];
    FILE *f = fopen(path, "r");

    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long long v;

        if (sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1 ||
            sscanf(line, "nonvoluntary_ctxt_switches: %llu", &v) == 1)
            u->ctxsw += v;
    }
    fclose(f);
}

static void add_hwm(pid_t pid, struct bench_usage *u)
{
    char path[64];
    char line[256];
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long long kb;

        if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
            u->hwm_kb += kb;
        if (sscanf(line, "VmRSS: %llu kB", &kb) == 1) {
            u->rss_kb += kb;
            break;
        }
    }
    fclose(f);
}

static void add_process(pid_t pid, struct bench_usage *u, int depth, double tick)
{
    char path[320];
    DIR *d;
    struct dirent *e;

    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    d = opendir(path);
    if (d == NULL)
        return;
    u->processes++;
    add_hwm(pid, u);
    /* CPU time of the whole process, not a sum over its live tasks: a thread that
     * exited (tpc's, a proactor's) keeps its time in the process's figures only. */
    u->cpu_s += process_cpu_s(pid);
    /* The children this process reaped (forking's finished connections, a manager's
     * retired workers) keep their CPU time in its cutime and cstime, not in any live task;
     * a live process is in no one's, so nothing is counted twice. Tick samples, as the
     * kernel passed them up: the only record of an exited process. utime and stime are the
     * whole process's too, exited threads included, like its CPU clock. */
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    {
        char buf[1024];
        struct stat_times t;

        if (bench_read_small(path, buf, sizeof(buf)) && stat_times(buf, &t)) {
            u->cpu_s += (double)(t.cutime + t.cstime) / tick;
            u->user_s += (double)t.utime / tick + (double)t.cutime / tick;
            u->sys_s += (double)t.stime / tick + (double)t.cstime / tick;
        }
    }
    while ((e = readdir(d)) != NULL) {
        FILE *f;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%s/status", (int)pid, e->d_name);
        add_switches(path, u);
        if (depth >= MAX_DEPTH)
            continue;
        /* children lists the children this thread forked: the process models fork from a
         * manager thread, not always the main one. */
        snprintf(path, sizeof(path), "/proc/%d/task/%s/children", (int)pid, e->d_name);
        f = fopen(path, "r");
        if (f != NULL) {
            int child;

            while (fscanf(f, "%d", &child) == 1)
                add_process(child, u, depth + 1, tick);
            fclose(f);
        }
    }
    closedir(d);
}

void bench_usage_read(pid_t root, struct bench_usage *u)
{
    memset(u, 0, sizeof(*u));
    add_process(root, u, 0, (double)sysconf(_SC_CLK_TCK));
}
