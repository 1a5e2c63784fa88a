/*
 * advise_probe.c - the measuring half of `cabrank-bench advise`: starts the service (cabrank-httpd,
 * or the line server line_server.c forks) under one choice of model, times requests from one client
 * (the service time and how often handlers block), opens the idle keep-alive connections the
 * clients hold and reads the server's resident memory before and after (memory per connection),
 * then runs the clients' load (wrk, the line load with its share of blocking requests, or
 * cabrank-oltp-load) and reads the server's CPU time around it, and the share of the machine's CPU
 * other processes took meanwhile (machine.h). Called by advise.c on the program's thread; owns each
 * server it starts until the run returns.
 */
#include <cabrank/server.h>

#include "../common/http_client.h"
#include "../common/line_client.h"
#include "../oltp/proto.h"
#include "advise.h"
#include "driver.h"
#include "machine.h"
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
#define LEDGER_ACCOUNTS  "100"

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

/* cabrank-ledger under c (its lf promotes at once: it has no --promotion-delay), its accounts
 * opened and funded by cabrank-oltp-load --setup. */
static int start_ledger(const struct advise_load *l, const struct advise_choice *c,
                        struct bench_server *s)
{
    char flags[256];
    char cmd[3 * PATH_MAX];
    char *argv[32];
    int n = 0;
    int err;

    bench_advise_flags(c, flags, sizeof(flags));
    argv[n++] = (char *)l->ledger;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--db";
    argv[n++] = (char *)l->db;
    argv[n++] = "--log-level";
    argv[n++] = "warn";
    for (char *save = NULL, *f = strtok_r(flags, " ", &save); f != NULL && n < 31;
         f = strtok_r(NULL, " ", &save)) {
        if (strcmp(f, "--promotion-delay") == 0)
            f = strtok_r(NULL, " ", &save); /* and its value */
        else
            argv[n++] = f;
    }
    argv[n] = NULL;
    err = bench_server_spawn(argv, l->log, START_TIMEOUT_MS, s);
    if (err < 0)
        return err;
    snprintf(cmd, sizeof(cmd),
             "'%s' --target 127.0.0.1:%u --setup --accounts " LEDGER_ACCOUNTS " >/dev/null 2>&1",
             l->oltp_load, (unsigned)s->port);
    if (system(cmd) != 0) {
        bench_server_stop(s);
        return -EPROTO;
    }
    return 0;
}

/* A TRANSFER of 1 between two of the accounts, under a key of its own; its reply's status. */
static int ledger_request(struct cr_test_client *cl, uint64_t k)
{
    static uint64_t serial;
    struct oltp_req q = {.op = OLTP_OP_TRANSFER, .id = k + 1, .amount = 1};
    struct oltp_reply rep;
    unsigned char frame[OLTP_MAX_FRAME];
    uint64_t tag = ((uint64_t)getpid() << 32) ^ cr_clock_now_ns();
    size_t len;
    uint32_t body;
    int err;

    q.account = 1 + k % 100;
    q.to = 1 + (k + 1) % 100;
    serial++;
    memcpy(q.key, &tag, sizeof(tag));
    memcpy(q.key + sizeof(tag), &serial, sizeof(serial));
    len = oltp_req_encode(&q, frame, sizeof(frame));
    if (len == 0)
        return -EINVAL;
    err = cr_test_write_all(cl->fd, frame, len);
    if (err == 0)
        err = cr_test_client_read(cl, (char *)frame, OLTP_HEADER_SIZE, REPLY_TIMEOUT_MS);
    if (err < 0)
        return err;
    body = (uint32_t)frame[4] << 24 | (uint32_t)frame[5] << 16 | (uint32_t)frame[6] << 8 | frame[7];
    if (body > OLTP_MAX_BODY)
        return -EPROTO;
    err = cr_test_client_read(cl, (char *)frame + OLTP_HEADER_SIZE, body, REPLY_TIMEOUT_MS);
    if (err < 0)
        return err;
    if (oltp_reply_decode(frame, OLTP_HEADER_SIZE + body, &rep) <= 0 || rep.status != OLTP_ST_OK)
        return -EPROTO;
    return 0;
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
    if (l->service == ADVISE_LEDGER)
        return ledger_request(cl, k);
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

/* Requests from one client, one at a time, for seconds, with the server's CPU time around them:
 * a blocked request is one slower than ADVISE_BLOCK_MIN_US and ten times the CPU the server spent
 * per request (the median when that is unknown), so its time went waiting off the CPU. */
static int time_one_client(const struct advise_load *l, const struct bench_server *srv,
                           double seconds, struct advise_latency *lat)
{
    struct cr_test_client cl;
    struct bench_usage u0;
    struct bench_usage u1;
    double *v = malloc(LAT_MAX_SAMPLES * sizeof(*v));
    uint64_t end = cr_clock_now_ns() + (uint64_t)(seconds * 1e9);
    unsigned n = 0;
    unsigned blocked = 0;
    int err;

    *lat = (struct advise_latency){NAN, NAN, NAN, NAN, NAN, 0};
    if (v == NULL)
        return -ENOMEM;
    bench_usage_read(srv->pid, &u0);
    err = cr_test_client_open(&cl, srv->port);
    while (err == 0 && n < LAT_MAX_SAMPLES && cr_clock_now_ns() < end) {
        uint64_t t0 = cr_clock_now_ns();

        err = request(l, &cl, n);
        if (err == 0)
            v[n++] = (double)(cr_clock_now_ns() - t0) / 1e3;
    }
    cr_test_client_close(&cl); /* fd -1 when the open failed */
    bench_usage_read(srv->pid, &u1);
    lat->samples = n;
    if (n > 0) {
        double limit;

        lat->cpu_us = (u1.cpu_s - u0.cpu_s) * 1e6 / n;
        qsort(v, n, sizeof(*v), cmp_double);
        limit = fmax(ADVISE_BLOCK_MIN_US, 10 * (lat->cpu_us > 0 ? lat->cpu_us : v[n / 2]));
        while (blocked < n && v[n - 1 - blocked] > limit)
            blocked++;
        lat->median_us = blocked < n ? v[(n - blocked) / 2] : NAN;
        /* Too few requests to see a share of a few percent: unknown. */
        if (n >= 50)
            lat->block_share = (double)blocked / n;
        lat->block_us = blocked > 0 ? v[n - 1 - blocked / 2] : NAN;
        lat->limit_us = limit;
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

/* cabrank-oltp-load's closed loop of transfers; its report's figures into lr. */
static int run_ledger_load(const struct advise_load *l, uint16_t port, struct bench_load_result *lr)
{
    char cmd[2 * PATH_MAX];
    char line[512];
    FILE *p;
    int found = 0;

    memset(lr, 0, sizeof(*lr));
    lr->rps = NAN;
    lr->pcts = (struct bench_pcts){NAN, NAN, NAN, NAN};
    snprintf(cmd, sizeof(cmd),
             "'%s' --target 127.0.0.1:%u --clients %u --seconds %.2f --accounts " LEDGER_ACCOUNTS
             " 2>&1",
             l->oltp_load, (unsigned)port, l->active, l->seconds);
    p = popen(cmd, "r");
    if (p == NULL)
        return -errno;
    while (fgets(line, sizeof(line), p) != NULL) {
        unsigned long long n;
        unsigned long long e[5];
        double secs;
        double rps;

        if (sscanf(line, "transfers acknowledged: %llu in %lf s = %lf/s", &n, &secs, &rps) == 3) {
            lr->requests = n;
            lr->seconds = secs;
            lr->rps = rps;
            found++;
        } else if (sscanf(line, "latency us: p50 %lf p90 %lf p99 %lf p99.9 %lf", &lr->pcts.p50_us,
                          &lr->pcts.p90_us, &lr->pcts.p99_us, &lr->pcts.p999_us) == 4) {
            found++;
        } else if (sscanf(line,
                          "errors: connection %llu, protocol %llu, retries %*u, answered in doubt "
                          "%llu, outcome unknown %llu, unexpected %llu",
                          &e[0], &e[1], &e[2], &e[3], &e[4]) == 5) {
            lr->errors = e[0] + e[1] + e[2] + e[3] + e[4];
        }
    }
    if (pclose(p) == -1)
        return -errno;
    return found == 2 ? 0 : -EPROTO;
}

static int run_load(const struct advise_load *l, uint16_t port, struct bench_load_result *lr,
                    double *conns)
{
    if (l->service == ADVISE_LEDGER) {
        *conns = l->active;
        return run_ledger_load(l, port, lr);
    }
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
    struct bench_noise noise;
    struct bench_row row = {0};
    unsigned nidle = l->idle;
    int err;

    *r = (struct advise_result){NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, 0, 0};
    err = l->service == ADVISE_HTTPD    ? start_httpd(l, c, &s)
          : l->service == ADVISE_LEDGER ? start_ledger(l, c, &s)
                                        : start_line(c, &s);
    if (err < 0)
        goto out;
    if (lat != NULL) {
        err = time_one_client(l, &s, l->seconds / 2, lat);
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
    bench_noise_start(&noise, s.pid, 0);
    err = run_load(l, s.port, &lr, &r->conns);
    bench_noise_end(&noise, s.pid, BENCH_NOISE_MAX_DEFAULT, &row);
    bench_usage_read(s.pid, &u1);
    r->loadavg = row.loadavg_before;
    r->other_cpu = row.other_cpu_during;
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
