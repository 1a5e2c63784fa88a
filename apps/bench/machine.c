/*
 * machine.c - the machine cabrank-bench measures on (machine.h): its description for the
 * report, and per point the load average and the CPU share of the other processes, from
 * /proc/stat, the server tree's usage (procstat.h) and getrusage() of this program and its
 * reaped children. Called by main.c on the program's one thread; no state.
 */
#include "machine.h"

#include "procstat.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

void bench_machine_text(char *out, size_t cap)
{
    char line[256];
    char model[200] = "";
    struct utsname u;
    FILE *f = fopen("/proc/cpuinfo", "r");

    if (f != NULL) {
        while (fgets(line, sizeof(line), f) != NULL) {
            char *colon = strchr(line, ':');

            if (strncmp(line, "model name", 10) == 0 && colon != NULL) {
                snprintf(model, sizeof(model), "%s", colon + 2);
                model[strcspn(model, "\n")] = '\0';
                break;
            }
        }
        fclose(f);
    }
    if (uname(&u) < 0)
        memset(&u, 0, sizeof(u));
    /* A machine text cut short is still a caption. */
    if (snprintf(out, cap, "%ld x %s, %s %s", sysconf(_SC_NPROCESSORS_ONLN),
                 model[0] ? model : "CPU", u.sysname, u.release) < 0)
        out[0] = '\0';
}

int bench_cpu_times_parse(const char *stat, struct bench_cpu_times *t)
{
    unsigned long long v[8] = {0};
    const char *p = stat;

    /* The aggregate line is the first; each CPU's ("cpu0 ...") follows it. */
    while (p != NULL && strncmp(p, "cpu ", 4) != 0) {
        p = strchr(p, '\n');
        p = p != NULL ? p + 1 : NULL;
    }
    /* user nice system idle iowait irq softirq steal: older kernels stop before steal. */
    if (p == NULL || sscanf(p + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                            &v[3], &v[4], &v[5], &v[6], &v[7]) < 4)
        return -EPROTO;
    t->busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    t->total = t->busy + v[3] + v[4];
    return 0;
}

int bench_loadavg_parse(const char *text, double *out)
{
    char *end;
    double v = strtod(text, &end);

    if (end == text || !isfinite(v) || v < 0)
        return -EPROTO;
    *out = v;
    return 0;
}

double bench_other_share(const struct bench_cpu_times *a, const struct bench_cpu_times *b,
                         double ours_s, double tick)
{
    double share;

    if (b->total <= a->total || b->busy < a->busy || !(tick > 0))
        return NAN;
    share = ((double)(b->busy - a->busy) - ours_s * tick) / (double)(b->total - a->total);
    return share < 0 ? 0 : share > 1 ? 1 : share;
}

int bench_noise_judge(double before, double during, double max)
{
    if (isnan(before) && isnan(during))
        return -1;
    return (!isnan(before) && before > max) || (!isnan(during) && during > max);
}

/* ------------------------------------------------------------------------------ readings */

static bool read_times(struct bench_cpu_times *t)
{
    /* The aggregate line comes first: its start is all that is needed. */
    char buf[512];

    return bench_read_small("/proc/stat", buf, sizeof(buf)) && bench_cpu_times_parse(buf, t) == 0;
}

static double tv_s(const struct timeval *tv)
{
    return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

/* This program's CPU time (the line load) and its reaped children's (wrk, once waited for). */
static double ours_s(void)
{
    struct rusage self;
    struct rusage children;

    if (getrusage(RUSAGE_SELF, &self) < 0 || getrusage(RUSAGE_CHILDREN, &children) < 0)
        return 0;
    return tv_s(&self.ru_utime) + tv_s(&self.ru_stime) + tv_s(&children.ru_utime) +
           tv_s(&children.ru_stime);
}

static double server_s(pid_t server)
{
    struct bench_usage u;

    bench_usage_read(server, &u);
    return u.cpu_s;
}

void bench_noise_start(struct bench_noise *n, pid_t server, double sample_s)
{
    char buf[128];

    n->loadavg = NAN;
    n->before = NAN;
    if (bench_read_small("/proc/loadavg", buf, sizeof(buf)) &&
        bench_loadavg_parse(buf, &n->loadavg) < 0)
        n->loadavg = NAN;
    n->ok = read_times(&n->times);
    n->ours_s = ours_s();
    n->server_s = server_s(server);
    if (n->ok && sample_s > 0) {
        struct timespec ts = {.tv_sec = (time_t)sample_s,
                              .tv_nsec = (long)((sample_s - floor(sample_s)) * 1e9)};
        struct bench_cpu_times t;
        double ours;
        double srv;

        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
        ours = ours_s();
        srv = server_s(server);
        n->ok = read_times(&t);
        if (n->ok)
            n->before = bench_other_share(&n->times, &t, ours - n->ours_s + srv - n->server_s,
                                          (double)sysconf(_SC_CLK_TCK));
        n->times = t;
        n->ours_s = ours;
        n->server_s = srv;
    }
}

void bench_noise_end(const struct bench_noise *n, pid_t server, double max, struct bench_row *row)
{
    struct bench_cpu_times t;
    double srv = server_s(server);
    double ours = ours_s();

    row->loadavg_before = n->loadavg;
    row->other_cpu_before = n->before;
    row->other_cpu_during = NAN;
    /* A server reading that went down (a child exited and not reaped yet) counts as none of the
     * server's time rather than less than none. */
    if (n->ok && read_times(&t))
        row->other_cpu_during =
            bench_other_share(&n->times, &t, ours - n->ours_s + fmax(srv - n->server_s, 0),
                              (double)sysconf(_SC_CLK_TCK));
    row->noisy = bench_noise_judge(row->other_cpu_before, row->other_cpu_during, max);
}

/* A share as "12%", "-" when not measured. */
static const char *percent(double v, char *buf, size_t cap)
{
    if (isnan(v))
        return "-";
    snprintf(buf, cap, "%.0f%%", v * 100);
    return buf;
}

void bench_noise_warn(const struct bench_row *row, double max)
{
    char before[16];
    char during[16];

    if (row->noisy != 1)
        return;
    fprintf(stderr,
            "cabrank-bench: warning: noisy point: other processes took %s of the CPU before it "
            "and %s during it, above --noise-max %.0f%% (load average %.2f)\n",
            percent(row->other_cpu_before, before, sizeof(before)),
            percent(row->other_cpu_during, during, sizeof(during)), max * 100, row->loadavg_before);
}
