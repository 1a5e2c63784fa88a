/*
 * load_wrk.c - HTTP load through wrk (https://github.com/wg/wrk): one run per point, with a
 * Lua done() hook that prints the exact counts and latency percentiles (p50, p90, p99,
 * p99.9, in µs, from wrk's own histogram) on one line we parse, so nothing depends on the
 * rounding of wrk's human-readable report. wrk is a child process; it is killed when it
 * outlives its duration by 30 s. Single-threaded.
 */
#include "driver.h"

#include <cabrank/clock.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WRK_MARK    "cabrank-bench-wrk:"
#define WRK_OUT_MAX 65536

static const char report_lua[] =
    "-- cabrank-bench: exact figures from wrk's histogram, one line.\n"
    "done = function(summary, latency, requests)\n"
    "  local e = summary.errors\n"
    "  io.write(string.format(\"" WRK_MARK " %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f "
    "%.0f %.0f\\n\",\n"
    "    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,\n"
    "    latency:percentile(50), latency:percentile(90), latency:percentile(99),\n"
    "    latency:percentile(99.9)))\n"
    "end\n";

int bench_wrk_script(const char *dir, char *path)
{
    FILE *f;
    int err = 0;

    snprintf(path, PATH_MAX, "%s/report.lua", dir);
    f = fopen(path, "w");
    if (f == NULL)
        return -errno;
    if (fputs(report_lua, f) < 0)
        err = -EIO;
    if (fclose(f) != 0 && err == 0)
        err = -errno;
    return err;
}

bool bench_wrk_found(void)
{
    const char *env = getenv("PATH");
    char path[4096];
    char *save = NULL;

    snprintf(path, sizeof(path), "%s", env != NULL ? env : "/usr/bin:/bin");
    for (char *d = strtok_r(path, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
        char file[PATH_MAX];

        if (snprintf(file, sizeof(file), "%s/wrk", d) < (int)sizeof(file) &&
            access(file, X_OK) == 0)
            return true;
    }
    return false;
}

int bench__wrk_parse(const char *out, struct bench_load_result *r)
{
    const char *p = strstr(out, WRK_MARK);
    double v[11];

    memset(r, 0, sizeof(*r));
    r->rps = NAN;
    r->pcts = (struct bench_pcts){NAN, NAN, NAN, NAN};
    if (p == NULL ||
        sscanf(p + strlen(WRK_MARK), "%lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf", &v[0], &v[1],
               &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10]) != 11)
        return -EPROTO;
    r->requests = (uint64_t)v[0];
    r->seconds = v[1] / 1e6;
    r->rps = r->seconds > 0 ? v[0] / r->seconds : 0;
    r->errors = (uint64_t)(v[2] + v[3] + v[4] + v[5] + v[6]);
    if (r->requests > 0) {
        r->pcts.p50_us = v[7];
        r->pcts.p90_us = v[8];
        r->pcts.p99_us = v[9];
        r->pcts.p999_us = v[10];
    }
    return 0;
}

int bench_wrk_run(const struct bench_http_load *l, struct bench_load_result *r)
{
    char threads[16];
    char conns[16];
    char dur[32];
    char url[512];
    char *argv[20];
    int n = 0;
    int pfd[2];
    char *out;
    size_t used = 0;
    pid_t pid;
    int status = 0;
    int err = 0;
    unsigned t = l->threads ? l->threads : 1;
    uint64_t deadline;

    memset(r, 0, sizeof(*r));
    r->rps = NAN;
    r->pcts = (struct bench_pcts){NAN, NAN, NAN, NAN};
    if (t > l->connections)
        t = l->connections;
    snprintf(threads, sizeof(threads), "-t%u", t);
    snprintf(conns, sizeof(conns), "-c%u", l->connections);
    snprintf(dur, sizeof(dur), "-d%.0fs", ceil(l->seconds < 1 ? 1 : l->seconds));
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", (unsigned)l->port, l->path);
    argv[n++] = "wrk";
    argv[n++] = threads;
    argv[n++] = conns;
    argv[n++] = dur;
    argv[n++] = "--timeout";
    argv[n++] = "5s";
    argv[n++] = "--latency";
    argv[n++] = "-s";
    argv[n++] = (char *)l->script;
    if (l->close) {
        argv[n++] = "-H";
        argv[n++] = "Connection: close";
    }
    argv[n++] = url;
    argv[n] = NULL;

    out = malloc(WRK_OUT_MAX);
    if (out == NULL)
        return -ENOMEM;
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        err = -errno;
        goto out_free;
    }
    pid = fork();
    if (pid < 0) {
        err = -errno;
        close(pfd[0]);
        close(pfd[1]);
        goto out_free;
    }
    if (pid == 0) {
        dup2(pfd[1], STDOUT_FILENO);
        dup2(pfd[1], STDERR_FILENO);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(pfd[1]);
    deadline = cr_clock_now_ns() + (uint64_t)((ceil(l->seconds) + 30) * 1e9);
    for (;;) {
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        ssize_t got;

        if (cr_clock_now_ns() > deadline) {
            kill(pid, SIGKILL);
            break;
        }
        if (poll(&p, 1, 1000) <= 0)
            continue;
        got = read(pfd[0], out + used, WRK_OUT_MAX - 1 - used);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        used += (size_t)got;
        if (used == WRK_OUT_MAX - 1)
            break;
    }
    out[used] = '\0';
    close(pfd[0]);
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        err = -ENOENT;
    else
        err = bench__wrk_parse(out, r);
    if (err == -EPROTO)
        fprintf(stderr, "cabrank-bench: wrk gave no figures:\n%s\n", out);
out_free:
    free(out);
    return err;
}
