/*
 * procstat.c - a server tree's CPU time, context switches and peak RSS from /proc (see
 * procstat.h). Walks /proc/<pid>/task/<tid>/{stat,status,children}; no state, no threads.
 */
#include "procstat.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAX_DEPTH 4 /* server -> manager -> worker -> helper, with room */

/* Reads a small /proc file whole into buf (NUL-terminated); false when it is gone. */
static bool read_small(const char *path, char *buf, size_t cap)
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

/* The numeric fields of a stat line after the parenthesised command (which may hold spaces
 * and parentheses, hence the last ')'): field 3 (state) is skip[0]. */
static bool stat_fields(const char *buf, unsigned long *utime, unsigned long *stime, long *cutime,
                        long *cstime)
{
    const char *p = strrchr(buf, ')');

    return p != NULL && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %ld %ld",
                               utime, stime, cutime, cstime) == 4;
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

        if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) {
            u->hwm_kb += kb;
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
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    {
        char buf[1024];
        unsigned long ut;
        unsigned long st;
        long cut;
        long cst;

        if (read_small(path, buf, sizeof(buf)) && stat_fields(buf, &ut, &st, &cut, &cst))
            u->cpu_s += (double)(ut + st) / tick;
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
    double tick = (double)sysconf(_SC_CLK_TCK);
    char path[64];
    char buf[1024];
    unsigned long ut;
    unsigned long st;
    long cut;
    long cst;

    memset(u, 0, sizeof(*u));
    add_process(root, u, 0, tick);
    /* The children the root reaped (forking's finished connections) keep their CPU time in
     * the root's cutime and cstime, not in any live task. */
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)root);
    if (read_small(path, buf, sizeof(buf)) && stat_fields(buf, &ut, &st, &cut, &cst))
        u->cpu_s += (double)(cut + cst) / tick;
}
