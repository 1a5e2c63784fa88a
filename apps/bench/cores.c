/*
 * cores.c - the --cores plan and pinning of cabrank-bench (cores.h): the usable CPUs from the
 * affinity mask, the core counts that fit and those skipped with the words that say why, and
 * sched_setaffinity for this process (the load) and for each server child. Main thread, and
 * the children between fork and exec (which only read the server set); the server set is the
 * one piece of state, set by bench_cores_pin() before the children are forked.
 */
#include "cores.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The CPUs the servers started now run on; valid while pinned. */
static cpu_set_t server_set;
static bool pinned;

void bench_cores_plan_from(const cpu_set_t *usable, const unsigned *want, int nwant,
                           struct bench_cores *p)
{
    unsigned sorted[MAX_POINTS];
    int n = 0;

    memset(p, 0, sizeof(*p));
    CPU_OR(&p->usable, &p->usable, usable);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, usable))
            p->cpus[p->ncpus++] = c;
    /* Insertion sort without repeats: the list is at most MAX_POINTS long. */
    for (int i = 0; i < nwant && i < MAX_POINTS; i++) {
        int j = n;

        while (j > 0 && sorted[j - 1] > want[i])
            j--;
        if (j > 0 && sorted[j - 1] == want[i])
            continue;
        memmove(&sorted[j + 1], &sorted[j], (size_t)(n - j) * sizeof(sorted[0]));
        sorted[j] = want[i];
        n++;
    }
    for (int i = 0; i < n; i++) {
        if (sorted[i] >= 1 && sorted[i] < (unsigned)p->ncpus)
            p->run[p->nrun++] = sorted[i];
        else
            p->skipped[p->nskipped++] = sorted[i];
    }
}

int bench_cores_plan(const unsigned *want, int nwant, struct bench_cores *p)
{
    cpu_set_t set;

    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) < 0)
        return -errno;
    bench_cores_plan_from(&set, want, nwant, p);
    return 0;
}

/* Appends the list v[0..n) as "1,2,4" at out's end. */
static void put_list(char *out, size_t cap, const unsigned *v, int n)
{
    for (int i = 0; i < n; i++) {
        size_t len = strlen(out);

        if (len < cap)
            snprintf(out + len, cap - len, "%s%u", i > 0 ? "," : "", v[i]);
    }
}

void bench_cores_skip_text(const struct bench_cores *p, char *out, size_t cap)
{
    size_t len;

    if (cap == 0)
        return;
    out[0] = '\0';
    if (p->nskipped == 0)
        return;
    snprintf(out, cap, "skipped ");
    put_list(out, cap, p->skipped, p->nskipped);
    len = strlen(out);
    if (len < cap)
        snprintf(out + len, cap - len,
                 ": this machine lets cabrank-bench use %d CPU%s; each point needs k for the "
                 "server and at least one for the load",
                 p->ncpus, p->ncpus == 1 ? "" : "s");
}

void bench_cores_describe(const struct bench_cores *p, char *out, size_t cap)
{
    size_t len;

    if (cap == 0)
        return;
    snprintf(out, cap, "k = ");
    put_list(out, cap, p->run, p->nrun);
    len = strlen(out);
    if (len < cap)
        snprintf(out + len, cap - len,
                 "%s of the %d CPUs cabrank-bench may use (%d to %d): the server on the first "
                 "k, the load on the others",
                 p->nrun == 0 ? "none" : "", p->ncpus, p->ncpus > 0 ? p->cpus[0] : 0,
                 p->ncpus > 0 ? p->cpus[p->ncpus - 1] : 0);
    len = strlen(out);
    if (p->nskipped > 0 && len + 2 < cap) {
        memcpy(out + len, "; ", 3);
        bench_cores_skip_text(p, out + len + 2, cap - len - 2);
    }
}

void bench_cores_sets(const struct bench_cores *p, unsigned k, cpu_set_t *server, cpu_set_t *load)
{
    CPU_ZERO(server);
    CPU_ZERO(load);
    for (int i = 0; i < p->ncpus; i++) {
        if ((unsigned)i < k)
            CPU_SET(p->cpus[i], server);
        else
            CPU_SET(p->cpus[i], load);
    }
}

int bench_cores_pin(const struct bench_cores *p, unsigned k)
{
    cpu_set_t server;
    cpu_set_t load;

    if (k == 0 || k >= (unsigned)p->ncpus)
        return -EINVAL;
    bench_cores_sets(p, k, &server, &load);
    if (sched_setaffinity(0, sizeof(load), &load) < 0)
        return -errno;
    server_set = server;
    pinned = true;
    return 0;
}

int bench_cores_unpin(const struct bench_cores *p)
{
    pinned = false;
    return sched_setaffinity(0, sizeof(p->usable), &p->usable) < 0 ? -errno : 0;
}

int bench_cores_enter_server(void)
{
    if (!pinned)
        return 0;
    return sched_setaffinity(0, sizeof(server_set), &server_set) < 0 ? -errno : 0;
}
