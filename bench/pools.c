/*
 * pools.c - the thread-pool benchmark: the line-protocol service under each
 * model and promotion order, in one run over loopback. For each
 * configuration it forks a server process, then measures
 *   - round-trip latency with one client (p50, p99), closed loop;
 *   - throughput with many clients (64 by default), each with one request
 *     outstanding, driven by one epoll thread;
 *   - the server's CPU time and context switches per request during the
 *     throughput phase, from each process's CPU clock and
 *     /proc/<pid>/task/<tid>/status, over its worker processes too under the
 *     process models (apps/bench/procstat.c, shared with cabrank-bench).
 * Models: every one cr_server_models() lists (lf under each promotion,
 * proactor under each dispatcher: proactor:single|lf|ring-per-thread, over
 * io_uring, or the emulated engine with CABRANK_URING_DISABLE=1);
 * prefork gets enough workers up front for every client at once.
 * It prints a Markdown table, the lf/hshr ratios against their targets
 * (docs/design/bench.md), and the exact command. Not a test: figures
 * vary with the machine's load, so compare configurations within one run.
 *
 * Usage: pools [--seconds S] [--clients N] [--threads N]
 *              [--only model[:promotion|:dispatcher],...]
 */
#include <cabrank/clock.h>
#include <cabrank/lf_pool.h>
#include <cabrank/log.h>
#include <cabrank/server.h>

#include "../apps/bench/procstat.h"
#include "../apps/common/samples.h"
#include "services.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_CONFIGS 16
#define MAX_CLIENTS 1024

struct config {
    char model[16];
    char promotion[16];
};

struct options {
    double seconds;
    int clients;
    int threads;
    struct config configs[MAX_CONFIGS];
    int nconfigs;
};

struct result {
    double p50_us;
    double p99_us;
    double rps;
    double cpu_us_per_req;
    double cs_per_req;
    bool ok;
};

static void die(const char *what)
{
    fprintf(stderr, "pools: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* ------------------------------------------------------------ the server */

static pid_t start_server(const struct options *o, const struct config *c, uint16_t *port)
{
    int pfd[2];
    pid_t pid;

    if (pipe(pfd) < 0)
        die("pipe");
    pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        struct cr_server_config cfg = {
            .model = c->model,
            .listen = {"127.0.0.1:0"},
            .threads = o->threads,
            .promotion = c->promotion[0] ? c->promotion : NULL,
            /* proactor: the second part is the dispatcher. */
            .dispatch = strcmp(c->model, "proactor") == 0 && c->promotion[0] ? c->promotion : NULL,
            .max_connections = 4096,
        };
        struct cr_test_svc line;
        struct cr_server *s;
        char addr[64];
        const char *colon;
        int err;

        close(pfd[0]);
        if (strcmp(c->model, "prefork") == 0) {
            /* A connection holds a worker thread while it is open: enough
             * workers of --threads threads for every client at once, started
             * up front rather than grown by the manager during the run. */
            int threads = o->threads > 0 ? o->threads : 1;

            cfg.workers = (o->clients + threads - 1) / threads + 1;
            cfg.max_workers = cfg.workers > 256 ? cfg.workers : 256;
        }
        cr_log_set_level(CR_LOG_WARN); /* the table is the output */
        err = cr_test_line_init(&line);
        if (err == 0)
            err = cr_server_create(&s, &cfg, &line.svc);
        if (err == 0)
            err = cr_server_address(s, 0, addr, sizeof(addr));
        if (err < 0) {
            fprintf(stderr, "pools: server %s: %s\n", c->model, strerror(-err));
            _exit(1);
        }
        colon = strrchr(addr, ':');
        *port = (uint16_t)atoi(colon + 1);
        if (write(pfd[1], port, sizeof(*port)) != (ssize_t)sizeof(*port))
            _exit(1);
        close(pfd[1]);
        err = cr_server_run(s);
        cr_server_destroy(s);
        cr_test_svc_fini(&line);
        _exit(err == 0 ? 0 : 1);
    }
    close(pfd[1]);
    if (read(pfd[0], port, sizeof(*port)) != (ssize_t)sizeof(*port)) {
        close(pfd[0]);
        waitpid(pid, NULL, 0);
        return -1;
    }
    close(pfd[0]);
    return pid;
}

static void stop_server(pid_t pid)
{
    int status;

    kill(pid, SIGTERM);
    for (int i = 0; i < 500; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
}

/* ------------------------------------------------------------ clients */

static int connect_to(uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        die("socket");
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        die("connect");
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
        die("setsockopt");
    return fd;
}

static int format_request(char *buf, size_t len, uint64_t id)
{
    return snprintf(buf, len, "%llu ECHO ping\n", (unsigned long long)id);
}

/* Reads until a full reply line "<id> OK ping\n"; returns false on error. */
static bool read_reply(int fd, char *buf, size_t cap, size_t *used)
{
    for (;;) {
        char *nl = memchr(buf, '\n', *used);
        ssize_t n;

        if (nl != NULL) {
            size_t line = (size_t)(nl + 1 - buf);

            memmove(buf, nl + 1, *used - line);
            *used -= line;
            return true;
        }
        n = read(fd, buf + *used, cap - *used);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            return false;
        }
        *used += (size_t)n;
    }
}

static bool measure_latency(uint16_t port, double seconds, struct result *r)
{
    struct bench_samples rtt = {0};
    struct bench_pcts p;
    char req[64];
    char buf[4096];
    size_t used = 0;
    int fd = connect_to(port);
    uint64_t end;

    /* Warm up: threads, caches, the file of the connection. */
    for (uint64_t id = 0; id < 200; id++) {
        int len = format_request(req, sizeof(req), id);

        if (write(fd, req, (size_t)len) != len || !read_reply(fd, buf, sizeof(buf), &used))
            goto fail;
    }
    end = cr_clock_now_ns() + (uint64_t)(seconds * 1e9);
    for (uint64_t id = 0; cr_clock_now_ns() < end; id++) {
        int len = format_request(req, sizeof(req), id);
        uint64_t t0 = cr_clock_now_ns();

        if (write(fd, req, (size_t)len) != len || !read_reply(fd, buf, sizeof(buf), &used))
            goto fail;
        if (bench_samples_add(&rtt, cr_clock_now_ns() - t0) < 0)
            die("malloc");
    }
    close(fd);
    p = bench_samples_pcts(&rtt);
    r->p50_us = p.p50_us;
    r->p99_us = p.p99_us;
    bench_samples_fini(&rtt);
    return !isnan(p.p50_us);
fail:
    close(fd);
    bench_samples_fini(&rtt);
    return false;
}

struct client {
    int fd;
    size_t used;
    char buf[512];
};

static bool measure_throughput(pid_t pid, uint16_t port, const struct options *o, struct result *r)
{
    static struct client cl[MAX_CLIENTS];
    struct epoll_event evs[MAX_CLIENTS];
    struct bench_usage u0;
    struct bench_usage u1;
    uint64_t done = 0;
    uint64_t t0;
    uint64_t end;
    char req[64];
    int len = format_request(req, sizeof(req), 1);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    bool ok = true;

    if (ep < 0)
        die("epoll_create1");
    for (int i = 0; i < o->clients; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};

        cl[i].fd = connect_to(port);
        cl[i].used = 0;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, cl[i].fd, &ev) < 0)
            die("epoll_ctl");
        if (write(cl[i].fd, req, (size_t)len) != len)
            die("write");
    }
    bench_usage_read(pid, &u0);
    t0 = cr_clock_now_ns();
    end = t0 + (uint64_t)(o->seconds * 1e9);
    while (ok && cr_clock_now_ns() < end) {
        int n = epoll_wait(ep, evs, MAX_CLIENTS, 100);

        for (int k = 0; k < n; k++) {
            struct client *c = &cl[evs[k].data.u32];
            ssize_t got = read(c->fd, c->buf + c->used, sizeof(c->buf) - c->used);
            char *nl;

            if (got <= 0) {
                ok = false;
                break;
            }
            c->used += (size_t)got;
            while ((nl = memchr(c->buf, '\n', c->used)) != NULL) {
                size_t line = (size_t)(nl + 1 - c->buf);

                memmove(c->buf, nl + 1, c->used - line);
                c->used -= line;
                done++;
                if (write(c->fd, req, (size_t)len) != len)
                    ok = false;
            }
        }
    }
    bench_usage_read(pid, &u1);
    r->rps = (double)done / ((double)(cr_clock_now_ns() - t0) / 1e9);
    r->cpu_us_per_req = done ? (u1.cpu_s - u0.cpu_s) * 1e6 / (double)done : 0;
    r->cs_per_req = done ? (double)(u1.ctxsw - u0.ctxsw) / (double)done : 0;
    for (int i = 0; i < o->clients; i++)
        close(cl[i].fd);
    close(ep);
    return ok && done > 0;
}

/* ------------------------------------------------------------ main */

static void add_config(struct options *o, const char *spec)
{
    struct config *c;
    const char *colon = strchr(spec, ':');

    if (o->nconfigs == MAX_CONFIGS) {
        fprintf(stderr, "pools: too many configurations\n");
        exit(2);
    }
    c = &o->configs[o->nconfigs++];
    memset(c, 0, sizeof(*c));
    if (colon != NULL) {
        snprintf(c->model, sizeof(c->model), "%.*s", (int)(colon - spec), spec);
        snprintf(c->promotion, sizeof(c->promotion), "%s", colon + 1);
    } else {
        snprintf(c->model, sizeof(c->model), "%s", spec);
    }
}

static void default_configs(struct options *o)
{
    const char *const *proms = cr_lf_pool_promotions();

    /* Every model the library implements (cr_server_models lists a model
     * once it is written), lf under every promotion order. */
    for (const char *const *m = cr_server_models(); *m != NULL; m++) {
        if (strcmp(*m, "proactor") == 0) {
            add_config(o, "proactor:single");
            add_config(o, "proactor:lf");
            add_config(o, "proactor:ring-per-thread");
            continue;
        }
        if (strcmp(*m, "lf") != 0) {
            add_config(o, *m);
            continue;
        }
        for (int i = 0; proms[i] != NULL; i++) {
            char spec[40];

            snprintf(spec, sizeof(spec), "lf:%s", proms[i]);
            add_config(o, spec);
        }
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: pools [--seconds S] [--clients N] [--threads N] "
               "[--only model[:promotion],...]\n");
}

static void parse_args(struct options *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        } else if (v != NULL && strcmp(a, "--seconds") == 0) {
            o->seconds = atof(v);
            i++;
        } else if (v != NULL && strcmp(a, "--clients") == 0) {
            o->clients = atoi(v);
            i++;
        } else if (v != NULL && strcmp(a, "--threads") == 0) {
            o->threads = atoi(v);
            i++;
        } else if (v != NULL && strcmp(a, "--only") == 0) {
            char *list = strdup(v);
            char *save = NULL;

            for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
                add_config(o, t);
            free(list);
            i++;
        } else {
            fprintf(stderr, "pools: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            exit(2);
        }
    }
    if (o->seconds <= 0 || o->clients <= 0 || o->clients > MAX_CLIENTS || o->threads < 0) {
        fprintf(stderr, "pools: --seconds > 0, --clients 1..%d, --threads >= 0\n", MAX_CLIENTS);
        exit(2);
    }
}

static const struct result *find(const struct options *o, const struct result *res,
                                 const char *model, const char *prom)
{
    for (int i = 0; i < o->nconfigs; i++) {
        if (res[i].ok && strcmp(o->configs[i].model, model) == 0 &&
            (prom == NULL || strcmp(o->configs[i].promotion, prom) == 0))
            return &res[i];
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct options o = {.seconds = 3, .clients = 64, .threads = 4};
    struct result res[MAX_CONFIGS];
    const struct result *lf;
    const struct result *hs;

    signal(SIGPIPE, SIG_IGN);
    parse_args(&o, argc, argv);
    if (o.nconfigs == 0)
        default_configs(&o);
    printf("# bench/pools:");
    for (int i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\n# line protocol over loopback; %d server threads; %.1f s per phase; %ld CPUs\n\n",
           o.threads, o.seconds, sysconf(_SC_NPROCESSORS_ONLN));
    printf("| model | promotion | 1-client p50 µs | 1-client p99 µs | %d-client req/s | "
           "server CPU µs/req | ctx switches/req |\n",
           o.clients);
    printf("|---|---|---:|---:|---:|---:|---:|\n");
    fflush(stdout);
    for (int i = 0; i < o.nconfigs; i++) {
        const struct config *c = &o.configs[i];
        uint16_t port;
        pid_t pid = start_server(&o, c, &port);

        memset(&res[i], 0, sizeof(res[i]));
        if (pid < 0) {
            printf("| %s | %s | failed to start | | | | |\n", c->model, c->promotion);
            continue;
        }
        res[i].ok =
            measure_latency(port, o.seconds, &res[i]) && measure_throughput(pid, port, &o, &res[i]);
        stop_server(pid);
        if (!res[i].ok) {
            printf("| %s | %s | failed | | | | |\n", c->model, c->promotion);
            continue;
        }
        printf("| %s | %s | %.1f | %.1f | %.0f | %.1f | %.2f |\n", c->model,
               c->promotion[0] ? c->promotion : "-", res[i].p50_us, res[i].p99_us, res[i].rps,
               res[i].cpu_us_per_req, res[i].cs_per_req);
        fflush(stdout);
    }
    lf = find(&o, res, "lf", "lifo");
    if (lf == NULL)
        lf = find(&o, res, "lf", NULL);
    hs = find(&o, res, "hshr", NULL);
    if (lf != NULL && hs != NULL) {
        double lat = lf->p50_us / hs->p50_us;
        double thr = lf->rps / hs->rps;

        printf("\nlf/hshr 1-client p50 latency: %.2fx (target <= 0.80: %s)\n", lat,
               lat <= 0.8 ? "met" : "NOT met");
        printf("lf/hshr %d-client throughput: %.2fx (target >= 1.00: %s)\n", o.clients, thr,
               thr >= 1.0 ? "met" : "NOT met");
    }
    return 0;
}
