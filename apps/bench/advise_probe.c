/*
 * advise_probe.c - the measuring half of `cabrank-bench advise`: starts the service (cabrank-httpd,
 * or the line server line_server.c forks) under one choice of model, times requests from one client
 * (the service time and how often handlers block), opens the idle keep-alive connections the
 * clients hold and reads the server's resident memory before and after (memory per connection),
 * then runs the clients' load (wrk, or the line load with its share of blocking requests) and reads
 * the server's CPU time around it. Called by advise.c on the program's thread; owns each server it
 * starts until the run returns.
 */
#include <cabrank/server.h>

#include "../common/http_client.h"
#include "../common/line_client.h"
#include "advise.h"
#include "driver.h"
#include "procstat.h"

#include <cabrank/clock.h>

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define START_TIMEOUT_MS 10000
#define REPLY_TIMEOUT_MS 5000
#define LAT_MAX_SAMPLES  5000

unsigned bench_advise_cores(void)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) < 0)
        return 1;
    return (unsigned)CPU_COUNT(&set);
}

static int start_httpd(const struct advise_load *l, const struct advise_choice *c,
                       struct bench_server *s)
{
    char flags[256];
    char *argv[32];
    int n = 0;

    bench_advise_flags(c, flags, sizeof(flags));
    argv[n++] = (char *)l->httpd;
    argv[n++] = "--root";
    argv[n++] = (char *)l->root;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--keepalive-timeout";
    argv[n++] = "60";
    argv[n++] = "--max-requests-per-connection";
    argv[n++] = "1000000000";
    argv[n++] = "--log-level";
    argv[n++] = "warn";
    for (char *save = NULL, *f = strtok_r(flags, " ", &save); f != NULL && n < 31;
         f = strtok_r(NULL, " ", &save))
        argv[n++] = f;
    argv[n] = NULL;
    return bench_server_spawn(argv, l->log, START_TIMEOUT_MS, s);
}

static int start_line(const struct advise_choice *c, struct bench_server *s)
{
    struct cr_server_config cfg = {
        .model = c->model,
        .threads = c->threads,
        .max_connections = 8192,
    };

    if (strcmp(c->model, "lf") == 0)
        cfg.groups = c->per_core ? 0 : 1;
    cfg.workers = c->workers;
    return bench_line_server_start_cfg(&cfg, s);
}

/* One request on cl, answered; the request number k picks the path or the blocking share. */
static int request(const struct advise_load *l, struct cr_test_client *cl, uint64_t k)
{
    char req[512];

    if (l->service == ADVISE_HTTPD) {
        struct hc_resp resp;
        int err;

        snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                 l->paths[k % (uint64_t)l->npaths]);
        err = hc_request(cl, req, &resp, REPLY_TIMEOUT_MS);
        hc_resp_free(&resp);
        return err < 0 ? err : resp.status == 200 ? 0 : -EPROTO;
    }
    if (bench_line_sleeps(k, l->block_share))
        snprintf(req, sizeof(req), "%llu SLEEP %u", (unsigned long long)k, l->handler_ms);
    else
        snprintf(req, sizeof(req), "%llu ECHO ping", (unsigned long long)k);
    {
        char reply[256];
        ssize_t n = cr_test_client_request(cl, req, reply, sizeof(reply), REPLY_TIMEOUT_MS);

        return n < 0 ? (int)n : strstr(reply, " OK") != NULL ? 0 : -EPROTO;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* Requests from one client, one at a time, for seconds: a blocked request is one slower than
 * ADVISE_BLOCK_MIN_US and ten times the median. */
static int time_one_client(const struct advise_load *l, uint16_t port, double seconds,
                           struct advise_latency *lat)
{
    struct cr_test_client cl;
    double *v = malloc(LAT_MAX_SAMPLES * sizeof(*v));
    uint64_t end = cr_clock_now_ns() + (uint64_t)(seconds * 1e9);
    unsigned n = 0;
    unsigned blocked = 0;
    int err;

    *lat = (struct advise_latency){NAN, NAN, NAN, 0};
    if (v == NULL)
        return -ENOMEM;
    err = cr_test_client_open(&cl, port);
    while (err == 0 && n < LAT_MAX_SAMPLES && cr_clock_now_ns() < end) {
        uint64_t t0 = cr_clock_now_ns();

        err = request(l, &cl, n);
        if (err == 0)
            v[n++] = (double)(cr_clock_now_ns() - t0) / 1e3;
    }
    cr_test_client_close(&cl); /* fd -1 when the open failed */
    lat->samples = n;
    if (n > 0) {
        double limit;

        qsort(v, n, sizeof(*v), cmp_double);
        lat->median_us = v[n / 2];
        limit = fmax(ADVISE_BLOCK_MIN_US, 10 * lat->median_us);
        while (blocked < n && v[n - 1 - blocked] > limit)
            blocked++;
        /* Too few requests to see a share of a few percent: unknown. */
        if (n >= 50)
            lat->block_share = (double)blocked / n;
        lat->block_us = blocked > 0 ? v[n - 1 - blocked / 2] : NAN;
    }
    free(v);
    return err;
}

/* Opens n connections, each answered once and then left idle. 0 or -errno. */
static int open_idle(const struct advise_load *l, uint16_t port, struct cr_test_client *idle,
                     unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        int err = cr_test_client_open(&idle[i], port);

        if (err == 0)
            err = request(l, &idle[i], 0);
        if (err < 0) {
            if (idle[i].fd >= 0)
                cr_test_client_close(&idle[i]);
            return err;
        }
    }
    return 0;
}

static int run_load(const struct advise_load *l, uint16_t port, struct bench_load_result *lr,
                    double *conns)
{
    if (l->service == ADVISE_HTTPD) {
        struct bench_http_load h = {
            .port = port,
            .path = l->paths[0],
            .connections = l->active,
            .seconds = l->seconds,
            .close = l->close,
            .script = l->script,
        };
        int err = bench_wrk_run(&h, lr);

        *conns = l->close ? (double)(lr->requests + lr->errors) : l->active;
        return err;
    }
    struct bench_line_load ll = {
        .port = port,
        .connections = l->active,
        .seconds = l->seconds,
        .sleep_share = l->block_share,
        .sleep_ms = l->handler_ms,
    };

    *conns = l->active;
    return bench_line_run(&ll, lr);
}

void bench_advise_run(const struct advise_load *l, const struct advise_choice *c,
                      struct advise_latency *lat, struct advise_result *r)
{
    struct bench_server s = {.pid = -1, .out_fd = -1};
    struct cr_test_client *idle = NULL;
    struct bench_usage u0;
    struct bench_usage u1;
    struct bench_load_result lr;
    unsigned nidle = l->idle;
    int err;

    *r = (struct advise_result){NAN, NAN, NAN, NAN, NAN, NAN, NAN, 0, 0};
    err = l->service == ADVISE_HTTPD ? start_httpd(l, c, &s) : start_line(c, &s);
    if (err < 0)
        goto out;
    if (lat != NULL) {
        err = time_one_client(l, s.port, l->seconds / 2, lat);
        if (err < 0)
            goto out;
        /* The probe measures memory per connection even for clients that hold none idle. */
        if (nidle == 0)
            nidle = 100;
    }
    if (nidle > 0) {
        idle = calloc(nidle, sizeof(*idle));
        if (idle == NULL) {
            err = -ENOMEM;
            goto out;
        }
        for (unsigned i = 0; i < nidle; i++)
            idle[i].fd = -1;
        usleep(100000); /* the server settles after its start and the probe above */
        bench_usage_read(s.pid, &u0);
        err = open_idle(l, s.port, idle, nidle);
        if (err < 0)
            goto out;
        usleep(100000);
        bench_usage_read(s.pid, &u1);
        r->mem_per_conn_kb = ((double)u1.rss_kb - (double)u0.rss_kb) / nidle;
    }
    bench_usage_read(s.pid, &u0);
    err = run_load(l, s.port, &lr, &r->conns);
    bench_usage_read(s.pid, &u1);
    if (err < 0)
        goto out;
    r->rps = lr.rps;
    r->p99_us = lr.pcts.p99_us;
    r->requests = (double)lr.requests;
    r->seconds = lr.seconds;
    r->errors = (unsigned)lr.errors;
    r->cpu_us = lr.requests > 0 ? (u1.cpu_s - u0.cpu_s) * 1e6 / (double)lr.requests : NAN;
out:
    if (idle != NULL) {
        for (unsigned i = 0; i < nidle; i++) {
            if (idle[i].fd >= 0)
                cr_test_client_close(&idle[i]);
        }
        free(idle);
    }
    bench_server_stop(&s);
    r->err = err;
}
