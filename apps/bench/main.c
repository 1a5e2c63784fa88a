/*
 * main.c - cabrank-bench, the architecture lab: runs cabrank-httpd under each model and
 * option set asked for (and the line-protocol service in a forked server of the same
 * model), and the peers installed (nginx, h2o, lighttpd, Apache event and prefork), drives
 * them with wrk (HTTP, keep-alive and Connection: close), its own line-protocol load
 * (closed and open loop) and the pattern paper's intervals, sweeping connections and rates,
 * and measures per point req/s, latency percentiles, the server's CPU time per request (and its
 * user and system parts) and context switches per request and its peak RSS (procstat.h). Asked
 * with --peers, it also measures the canned responders (canned.h), the machine's floor of CPU
 * per request, which this same program serves when started with --canned. With --cores the
 * whole sweep runs once per core count k, the servers pinned to k CPUs and the load to the
 * others (cores.h). After the sweep, --repeat - 1 more passes measure again the points the
 * papers' claims compare (passes.h), for each claim's spread. Rows go to <out>/results.csv as
 * they are measured; at the end the report side (report.h) writes results.md, claims.csv and
 * the SVG plots. A progress line per point goes to stderr. Each row records the machine's load
 * before and during its point, and a point where other processes took more than --noise-max of
 * the CPU is flagged noisy, and said at once (machine.h).
 *
 * Single-threaded. Children: the server under test (its own session, stopped by TERM then
 * KILL of its group), wrk. INT/TERM stop the sweep after the current point; the rows
 * measured so far are still reported.
 */

#include "advise.h"
#include "bench_options.h"
#include "canned.h"
#include "cores.h"
#include "driver.h"
#include "machine.h"
#include "passes.h"
#include "procstat.h"
#include "report.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SPAWN_MS 10000

struct ctx {
    const struct bench_options *o;
    char workdir[PATH_MAX];
    char script[PATH_MAX];
    FILE *csv;
    struct bench_rows rows;
    int point;
    int total;
    bool wrk;
    int pass;           /* 0: every point; then the repetitions of the claims' points */
    unsigned cores;     /* the server's core count now (--cores); 0: not pinned */
    unsigned load_cpus; /* the load's CPUs then */
};

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

/* ------------------------------------------------------------ rows */

static bool workload_is(const char *w, const char *prefix)
{
    return strncmp(w, prefix, strlen(prefix)) == 0;
}

static bool is_http(const char *w)
{
    return workload_is(w, "http:") || workload_is(w, "http-close:") || strcmp(w, "interval") == 0;
}

static bool is_line(const char *w)
{
    return strcmp(w, "line") == 0 || strcmp(w, "line-open") == 0;
}

/* What a canned peer answers right: its one answer is hello.txt's (the intervals fetch it). */
static bool is_canned_workload(const char *w)
{
    return strcmp(w, "http:hello.txt") == 0 || strcmp(w, "http-close:hello.txt") == 0 ||
           strcmp(w, "interval") == 0;
}

static bool serves(const char *server, const char *w)
{
    return !bench_is_canned(server) || is_canned_workload(w);
}

static void emit(struct ctx *x, const struct bench_row *row)
{
    int err = bench_csv_write_row(x->csv, row);

    if (err == 0)
        err = fflush(x->csv) == 0 ? 0 : -EIO;
    if (err == 0)
        err = bench_rows_add(&x->rows, row);
    if (err < 0)
        fprintf(stderr, "cabrank-bench: a row of %s: %s\n", row->workload, strerror(-err));
}

static void fill_usage(struct bench_row *row, const struct bench_usage *u0,
                       const struct bench_usage *u1, uint64_t requests)
{
    /* forking's children take their context switches with them when they exit (the kernel
     * keeps only their CPU time): a count that would be mostly missing is not reported. */
    bool switches = strncmp(row->config, "forking", 7) != 0;

    if (u1->processes == 0)
        return;
    row->peak_rss_kb = (double)u1->hwm_kb;
    if (requests == 0)
        return;
    /* A child that exited but is not reaped yet has left the live tree and not yet reached
     * the parent's cutime, and reaped children's context switches are lost for good (the
     * forking model): a reading that went down is not measured rather than negative. */
    if (u1->cpu_s >= u0->cpu_s)
        row->cpu_us_per_req = (u1->cpu_s - u0->cpu_s) * 1e6 / (double)requests;
    if (u1->user_s >= u0->user_s && u1->sys_s >= u0->sys_s) {
        row->srv_user_us_per_req = (u1->user_s - u0->user_s) * 1e6 / (double)requests;
        row->srv_sys_us_per_req = (u1->sys_s - u0->sys_s) * 1e6 / (double)requests;
    }
    if (switches && u1->ctxsw >= u0->ctxsw)
        row->ctxsw_per_req = (double)(u1->ctxsw - u0->ctxsw) / (double)requests;
}

/* The second usage reading of a point. Under forking, the children of the point's
 * connections exit when the load closes them; once the manager reaps them their CPU time is in
 * its cutime, before that it is nowhere: give it a moment. */
static void read_usage_after(pid_t pid, const char *config, struct bench_usage *u)
{
    if (strncmp(config, "forking", 7) == 0)
        usleep(200000);
    bench_usage_read(pid, u);
}

static void progress_start(struct ctx *x, const char *server, const char *config, const char *w,
                           const char *point)
{
    x->point++;
    fprintf(stderr, "[%d/%d] %s %s %s", x->point, x->total,
            strcmp(server, "cabrank") == 0 ? config : server, w, point);
    if (x->cores > 0)
        fprintf(stderr, " k=%u", x->cores);
    fputs(" ... ", stderr);
    fflush(stderr);
}

static void progress_end(const struct bench_row *row)
{
    if (isnan(row->rps) || row->rps == 0)
        fprintf(stderr, "p50 %.0f p99 %.0f µs, %llu errors\n", row->p50_us, row->p99_us,
                (unsigned long long)row->errors);
    else
        fprintf(stderr, "%.0f req/s, p99 %.0f µs, %llu errors\n", row->rps, row->p99_us,
                (unsigned long long)row->errors);
}

static void start_row(const struct ctx *x, struct bench_row *row, const char *w, const char *server,
                      const char *config)
{
    bench_row_init(row);
    row->cores = x->cores;
    snprintf(row->workload, sizeof(row->workload), "%s", w);
    snprintf(row->server, sizeof(row->server), "%s", server);
    snprintf(row->config, sizeof(row->config), "%s", config);
}

static void fill_load(struct bench_row *row, const struct bench_load_result *r)
{
    row->rps = r->rps;
    row->p50_us = r->pcts.p50_us;
    row->p90_us = r->pcts.p90_us;
    row->p99_us = r->pcts.p99_us;
    row->p999_us = r->pcts.p999_us;
    row->errors = r->errors;
    row->seconds = r->seconds;
}

/* ------------------------------------------------------------ HTTP points */

static void http_points(struct ctx *x, const struct bench_server *s, const char *server,
                        const char *config, const char *w)
{
    const struct bench_options *o = x->o;
    bool close_mode = workload_is(w, "http-close:");
    char path[128];

    snprintf(path, sizeof(path), "/%s", strchr(w, ':') + 1);
    for (int i = 0; i < o->nconc && !stopping; i++) {
        if (!bench_pass_measures(x->o, x->pass, w, o->conc[i]))
            continue;
        struct bench_http_load l = {
            .port = s->port,
            .path = path,
            .connections = o->conc[i],
            .seconds = o->seconds,
            .close = close_mode,
            .script = x->script,
            /* With --cores and no --wrk-threads, a wrk thread per CPU of the load. */
            .threads = o->wrk_threads ? o->wrk_threads
                       : x->load_cpus ? x->load_cpus
                                      : 1,
        };
        struct bench_load_result r;
        struct bench_noise noise;
        struct bench_usage u0;
        struct bench_usage u1;
        struct bench_row row;
        char pt[32];
        int err;

        snprintf(pt, sizeof(pt), "c=%u", o->conc[i]);
        progress_start(x, server, config, w, pt);
        start_row(x, &row, w, server, config);
        row.concurrency = o->conc[i];
        bench_noise_start(&noise, s->pid, o->noise_sample);
        bench_usage_read(s->pid, &u0);
        err = bench_wrk_run(&l, &r);
        read_usage_after(s->pid, config, &u1);
        bench_noise_end(&noise, s->pid, o->noise_max, &row);
        if (err < 0) {
            fprintf(stderr, "wrk failed: %s\n", strerror(-err));
            continue;
        }
        fill_load(&row, &r);
        fill_usage(&row, &u0, &u1, r.requests);
        emit(x, &row);
        progress_end(&row);
        bench_noise_warn(&row, o->noise_max);
    }
}

static void interval_points(struct ctx *x, const struct bench_server *s, const char *server,
                            const char *config)
{
    static const char *const names[3] = {"interval:t_conn", "interval:t_res1", "interval:t_res2"};
    struct bench_interval_load l = {
        .port = s->port,
        .path = "/hello.txt",
        .size = 13,
        .clients = x->o->interval_clients,
        .requests = 4,
        .seconds = x->o->seconds * 2 > 5 ? x->o->seconds * 2 : 5,
    };
    struct bench_interval_result r;
    struct bench_noise noise;
    struct bench_row measured; /* the noise, shared by the three rows */
    char pt[32];

    if (stopping)
        return;
    snprintf(pt, sizeof(pt), "%u clients", l.clients);
    progress_start(x, server, config, "interval", pt);
    bench_noise_start(&noise, s->pid, x->o->noise_sample);
    if (bench_intervals_run(&l, &r) < 0) {
        fprintf(stderr, "failed\n");
        return;
    }
    bench_noise_end(&noise, s->pid, x->o->noise_max, &measured);
    for (int k = 0; k < 3; k++) {
        const struct bench_pcts *p = k == 0 ? &r.conn : k == 1 ? &r.res1 : &r.res2;
        struct bench_row row;

        start_row(x, &row, names[k], server, config);
        row.concurrency = 1;
        row.rps = 0;
        row.p50_us = p->p50_us;
        row.p90_us = p->p90_us;
        row.p99_us = p->p99_us;
        row.p999_us = p->p999_us;
        row.errors = r.errors;
        row.seconds = r.seconds;
        row.loadavg_before = measured.loadavg_before;
        row.other_cpu_before = measured.other_cpu_before;
        row.other_cpu_during = measured.other_cpu_during;
        row.noisy = measured.noisy;
        emit(x, &row);
    }
    fprintf(stderr, "%u clients: t_conn p50 %.0f, t_res1 p50 %.0f, t_res2+ p50 %.0f µs%s%s\n",
            r.clients, r.conn.p50_us, r.res1.p50_us, r.res2.p50_us, r.why ? "; stopped: " : "",
            r.why ? r.why : "");
    bench_noise_warn(&measured, x->o->noise_max);
}

/* Every HTTP workload against one running server. */
static void http_workloads(struct ctx *x, const struct bench_server *s, const char *server,
                           const char *config)
{
    const struct bench_options *o = x->o;

    if (o->warmup > 0) {
        struct bench_http_load l = {.port = s->port,
                                    .path = "/hello.txt",
                                    .connections = 8,
                                    .seconds = o->warmup,
                                    .script = x->script};
        struct bench_load_result r;

        if (bench_wrk_run(&l, &r) < 0)
            fprintf(stderr, "cabrank-bench: warm-up of %s %s failed\n", server, config);
    }
    for (int i = 0; i < o->nworkloads && !stopping; i++) {
        const char *w = o->workloads[i];

        if (!bench_pass_measures(x->o, x->pass, w, 0))
            continue;
        if (!serves(server, w)) {
            fprintf(stderr, "cabrank-bench: %s answers hello.txt only: %s skipped\n", server, w);
            continue;
        }
        if (strcmp(w, "interval") == 0)
            interval_points(x, s, server, config);
        else if (is_http(w))
            http_points(x, s, server, config, w);
    }
}

/* ------------------------------------------------------------ line points */

static void line_workloads(struct ctx *x, const struct bench_server *s, const char *config)
{
    const struct bench_options *o = x->o;

    for (int i = 0; i < o->nworkloads && !stopping; i++) {
        const char *w = o->workloads[i];
        bool open = strcmp(w, "line-open") == 0;

        if (!is_line(w))
            continue;
        for (int k = 0; k < (open ? o->nrates : o->nconc) && !stopping; k++) {
            struct bench_line_load l = {
                .port = s->port,
                .connections = open ? o->open_connections : o->conc[k],
                .seconds = o->seconds,
                .rate = open ? o->rates[k] : 0,
            };
            struct bench_load_result r;
            struct bench_noise noise;
            struct bench_usage u0;
            struct bench_usage u1;
            struct bench_row row;
            char pt[48];
            int err;

            if (!bench_pass_measures(x->o, x->pass, w, l.connections))
                continue;
            if (open)
                snprintf(pt, sizeof(pt), "c=%u rate=%.0f", l.connections, l.rate);
            else
                snprintf(pt, sizeof(pt), "c=%u", l.connections);
            progress_start(x, "cabrank", config, w, pt);
            start_row(x, &row, w, "cabrank", config);
            row.concurrency = l.connections;
            row.rate = l.rate;
            bench_noise_start(&noise, s->pid, o->noise_sample);
            bench_usage_read(s->pid, &u0);
            err = bench_line_run(&l, &r);
            read_usage_after(s->pid, config, &u1);
            bench_noise_end(&noise, s->pid, o->noise_max, &row);
            if (err < 0) {
                fprintf(stderr, "failed: %s\n", strerror(-err));
                continue;
            }
            fill_load(&row, &r);
            fill_usage(&row, &u0, &u1, r.requests);
            emit(x, &row);
            progress_end(&row);
            bench_noise_warn(&row, o->noise_max);
        }
    }
}

/* ------------------------------------------------------------ servers */

static int start_httpd(struct ctx *x, const struct bench_config *c, struct bench_server *s)
{
    const struct bench_options *o = x->o;
    char root[PATH_MAX];
    char log[PATH_MAX];
    char threads[16];
    char workers[16];
    char maxw[16];
    char delay[16];
    char *argv[40];
    const char *flag = bench_config_flag(c->model);
    int n = 0;

    if (snprintf(root, sizeof(root), "%s/www", x->workdir) >= (int)sizeof(root) ||
        snprintf(log, sizeof(log), "%s/run/cabrank-httpd.log", x->workdir) >= (int)sizeof(log))
        return -ENAMETOOLONG;
    argv[n++] = (char *)o->httpd;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--root";
    argv[n++] = root;
    argv[n++] = "--model";
    argv[n++] = (char *)c->model;
    argv[n++] = "--log-level";
    argv[n++] = "warn";
    argv[n++] = "--status-path";
    argv[n++] = "off";
    /* As the peers' keep-alive: no Connection: close after 1000 requests. */
    argv[n++] = "--max-requests-per-connection";
    argv[n++] = "1000000";
    if (c->option[0] != '\0' && flag != NULL) {
        argv[n++] = (char *)flag;
        argv[n++] = (char *)c->option;
    }
    /* lf's promotion as its config says, not cabrank-httpd's default. */
    if (strcmp(c->model, "lf") == 0) {
        snprintf(delay, sizeof(delay), "%.6f", c->defer ? BENCH_DEFER_US / 1e6 : 0.0);
        argv[n++] = "--promotion-delay";
        argv[n++] = delay;
    }
    if (o->threads > 0) {
        snprintf(threads, sizeof(threads), "%d", o->threads);
        argv[n++] = "--threads";
        argv[n++] = threads;
    }
    if (strcmp(c->model, "prefork") == 0) {
        snprintf(workers, sizeof(workers), "%d", bench_options_prefork_workers(o));
        argv[n++] = "--workers";
        argv[n++] = workers;
        argv[n++] = "--max-workers";
        argv[n++] = workers;
        argv[n++] = "--max-spare";
        argv[n++] = workers;
    }
    if (strcmp(c->model, "forking") == 0) {
        snprintf(maxw, sizeof(maxw), "%u", bench_options_max_conc(o) + 8);
        argv[n++] = "--max-workers";
        argv[n++] = maxw;
    }
    argv[n] = NULL;
    return bench_server_spawn(argv, log, SPAWN_MS, s);
}

/* Whether this pass measures a workload of kind pred. */
static bool any_workload(const struct ctx *x, bool (*pred)(const char *))
{
    for (int i = 0; i < x->o->nworkloads; i++) {
        if (pred(x->o->workloads[i]) && bench_pass_measures(x->o, x->pass, x->o->workloads[i], 0))
            return true;
    }
    return false;
}

static void run_cabrank(struct ctx *x, const char *spec)
{
    struct bench_config c;
    struct bench_server s;
    int err;

    bench_config_split(spec, &c);
    if (any_workload(x, is_http) && x->wrk && !stopping) {
        err = start_httpd(x, &c, &s);
        if (err < 0) {
            fprintf(stderr,
                    "cabrank-bench: cabrank-httpd under %s did not start (%s): skipped; "
                    "see %s/run/cabrank-httpd.log\n",
                    spec, strerror(-err), x->workdir);
        } else {
            http_workloads(x, &s, "cabrank", spec);
            bench_server_stop(&s);
        }
    }
    if (any_workload(x, is_line) && !stopping) {
        err = bench_line_server_start(x->o, &c, &s);
        if (err < 0) {
            fprintf(stderr, "cabrank-bench: line server under %s did not start: skipped\n", spec);
        } else {
            line_workloads(x, &s, spec);
            bench_server_stop(&s);
        }
    }
}

/* A canned peer: checked to run here, started on port 0 as cabrank-httpd is, checked to answer
 * hello.txt whole. */
static void run_canned(struct ctx *x, const char *name)
{
    static const size_t hello = 13;
    struct bench_peer_cmd cmd = {.log = "its log"};
    struct bench_server s;
    char why[256];
    int err;

    if (!bench_canned_available(name, why, sizeof(why))) {
        fprintf(stderr, "cabrank-bench: %s not available (%s): skipped\n", name, why);
        return;
    }
    err = bench_canned_prepare(name, x->workdir, &cmd);
    if (err == 0)
        err = bench_server_spawn(cmd.argv, cmd.log, SPAWN_MS, &s);
    if (err < 0) {
        fprintf(stderr, "cabrank-bench: %s did not start (%s): skipped; see %s\n", name,
                strerror(-err), cmd.log);
        return;
    }
    if (bench_http_check(s.port, "/hello.txt", &hello, 5000) < 0) {
        fprintf(stderr, "cabrank-bench: %s serves /hello.txt wrong: skipped\n", name);
        bench_server_stop(&s);
        return;
    }
    http_workloads(x, &s, name, "-");
    bench_server_stop(&s);
}

static void run_peer(struct ctx *x, const char *name)
{
    struct bench_peer_cmd cmd;
    struct bench_server s;
    uint16_t port;
    int err;

    if (!any_workload(x, is_http) || !x->wrk || stopping || x->pass > 0)
        return;
    if (bench_is_canned(name)) {
        run_canned(x, name);
        return;
    }
    err = bench_free_port(&port);
    if (err == 0)
        err = bench_peer_prepare(name, x->workdir, port, x->cores, &cmd);
    if (err == 0)
        err = bench_server_spawn_http(cmd.argv, cmd.log, port, SPAWN_MS, &s);
    if (err < 0) {
        fprintf(stderr, "cabrank-bench: %s did not start (%s): skipped; see %s/run/\n", name,
                strerror(-err), x->workdir);
        return;
    }
    /* As peers.sh: every file must come back whole before it is measured. */
    for (size_t i = 0; i < sizeof(bench_files) / sizeof(bench_files[0]); i++) {
        char path[64];

        snprintf(path, sizeof(path), "/%s", bench_files[i].name);
        if (bench_http_check(port, path, &bench_files[i].size, 5000) < 0) {
            fprintf(stderr, "cabrank-bench: %s serves %s wrong: skipped\n", name, path);
            bench_server_stop(&s);
            return;
        }
    }
    http_workloads(x, &s, name, "-");
    bench_server_stop(&s);
}

/* ------------------------------------------------------------ main */

/* Every configuration, then every peer, at the pinning in force; then --repeat - 1 passes
 * over the claims' configurations and points. */
static void sweep(struct ctx *x)
{
    for (x->pass = 0; x->pass < x->o->repeat && !stopping; x->pass++) {
        for (int i = 0; i < x->o->nconfigs && !stopping; i++) {
            int k = bench_pass_config(x->o, x->pass, i);

            if (k >= 0)
                run_cabrank(x, x->o->configs[k]);
        }
        for (int i = 0; i < x->o->npeers && !stopping; i++)
            run_peer(x, x->o->peers[i]);
    }
    x->pass = 0;
}

/* The points of a sweep (for the progress lines). */
static int sweep_points(struct ctx *x)
{
    int total = 0;

    for (x->pass = 0; x->pass < x->o->repeat; x->pass++) {
        for (int i = 0; i < x->o->nworkloads; i++) {
            const char *w = x->o->workloads[i];

            if (!is_line(w) && !x->wrk)
                continue;
            for (int k = 0; k < x->o->nconfigs; k++)
                total += bench_pass_config(x->o, x->pass, k) >= 0
                             ? bench_pass_points(x->o, x->pass, w)
                             : 0;
            for (int k = 0; k < x->o->npeers && !is_line(w) && x->pass == 0; k++)
                total += serves(x->o->peers[k], w) ? bench_pass_points(x->o, x->pass, w) : 0;
        }
    }
    x->pass = 0;
    return total;
}

/* The sweep once per core count of the plan that fits, pinned; says what it skipped. */
static void sweep_cores(struct ctx *x, const struct bench_cores *plan)
{
    for (int i = 0; i < plan->nrun && !stopping; i++) {
        int err = bench_cores_pin(plan, plan->run[i]);

        if (err < 0) {
            fprintf(stderr, "cabrank-bench: pinning to %u cores: %s: skipped\n", plan->run[i],
                    strerror(-err));
            continue;
        }
        x->cores = plan->run[i];
        x->load_cpus = (unsigned)plan->ncpus - plan->run[i];
        fprintf(stderr, "cabrank-bench: k=%u: the servers on %u CPU%s, the load on %u\n", x->cores,
                x->cores, x->cores == 1 ? "" : "s", x->load_cpus);
        sweep(x);
        err = bench_cores_unpin(plan);
        if (err < 0) {
            fprintf(stderr, "cabrank-bench: unpinning: %s\n", strerror(-err));
            break;
        }
    }
    x->cores = 0;
    x->load_cpus = 0;
}

static int mkdirs(const char *dir)
{
    char p[PATH_MAX];

    snprintf(p, sizeof(p), "%s", dir);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    if (mkdir(p, 0755) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* Lifts the descriptor limit to its hard cap: 1024 client connections plus the servers'
 * (which inherit it). */
static void raise_nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int main(int argc, char **argv)
{
    struct bench_options o = {
        .seconds = 3,
        .warmup = 1,
        .out_dir = "bench/results",
        .interval_clients = 500,
        .open_connections = 16,
        .repeat = 3,
        .noise_max = BENCH_NOISE_MAX_DEFAULT,
        .noise_sample = BENCH_NOISE_SAMPLE_DEFAULT,
    };
    struct ctx x = {.o = &o};
    struct sigaction sa = {.sa_handler = on_signal};
    struct bench_report_info info = {0};
    struct bench_cores plan;
    char cores_text[1024];
    char path[PATH_MAX];
    char date[64];
    char machine[320];
    time_t now = time(NULL);
    int err;

    /* The hidden mode the lab starts its canned peers in (canned.h). */
    if (argc > 1 && strcmp(argv[1], "--canned") == 0)
        return bench_canned_main(argc, argv);
    if (argc > 1 && strcmp(argv[1], "advise") == 0)
        return bench_advise_main(argc - 1, argv + 1);
    o.command = bench_options_command(argc, argv);
    bench_options_parse(&o, argc, argv);
    if (o.nconc == 0) {
        static const unsigned def[] = {1, 8, 64, 256, 1024};

        memcpy(o.conc, def, sizeof(def));
        o.nconc = 5;
    }
    if (o.nrates == 0) {
        o.rates[0] = 1000;
        o.rates[1] = 10000;
        o.rates[2] = 50000;
        o.nrates = 3;
    }
    if (o.httpd == NULL)
        bench_options_default_httpd(&o);
    if (access(o.httpd, X_OK) != 0) {
        fprintf(stderr, "cabrank-bench: %s: %s (build it, or give --httpd PATH)\n", o.httpd,
                strerror(errno));
        return 1;
    }
    if (o.nconfigs == 0)
        bench_options_default_configs(&o);
    if (!o.peers_given) {
        for (int i = 0; bench_peer_names[i] != NULL; i++) {
            if (bench_peer_installed(bench_peer_names[i]))
                o.peers[o.npeers++] = (char *)bench_peer_names[i];
        }
    }
    x.wrk = bench_wrk_found();
    if (!x.wrk && any_workload(&x, is_http))
        fprintf(stderr, "cabrank-bench: wrk not found: the HTTP workloads are skipped\n");

    signal(SIGPIPE, SIG_IGN);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    raise_nofile();

    err = mkdirs(o.out_dir);
    if (err < 0) {
        fprintf(stderr, "cabrank-bench: %s: %s\n", o.out_dir, strerror(-err));
        return 1;
    }
    snprintf(path, sizeof(path), "%s/results.csv", o.out_dir);
    x.csv = fopen(path, "w");
    if (x.csv == NULL || bench_csv_write_header(x.csv) < 0) {
        fprintf(stderr, "cabrank-bench: %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (o.ncores > 0) {
        err = bench_cores_plan(o.cores, o.ncores, &plan);
        if (err < 0) {
            fprintf(stderr, "cabrank-bench: --cores: the CPUs this program may use: %s\n",
                    strerror(-err));
            return 1;
        }
        bench_cores_skip_text(&plan, cores_text, sizeof(cores_text));
        if (cores_text[0] != '\0')
            fprintf(stderr, "cabrank-bench: --cores: %s\n", cores_text);
        bench_cores_describe(&plan, cores_text, sizeof(cores_text));
        info.cores = cores_text;
    }
    err = bench_workdir_create(x.workdir);
    if (err == 0)
        err = bench_wrk_script(x.workdir, x.script);
    if (err < 0) {
        fprintf(stderr, "cabrank-bench: work directory: %s\n", strerror(-err));
        return 1;
    }

    x.total = sweep_points(&x);
    if (o.ncores > 0)
        x.total *= plan.nrun;
    fprintf(stderr, "cabrank-bench: %d configurations, %d peers, %d points of %.1f s\n", o.nconfigs,
            o.npeers, x.total, o.seconds);
    if (o.ncores > 0)
        sweep_cores(&x, &plan);
    else
        sweep(&x);
    if (stopping)
        fprintf(stderr, "cabrank-bench: interrupted; reporting the points measured\n");
    fclose(x.csv);
    bench_workdir_remove(x.workdir);

    strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
    bench_machine_text(machine, sizeof(machine));
    info.date = date;
    info.machine = machine;
    info.command = o.command;
    info.noise_max = o.noise_max;
    err = bench_report_write_dir(o.out_dir, &x.rows, &info);
    if (err < 0)
        fprintf(stderr, "cabrank-bench: report: %s\n", strerror(-err));
    else
        fprintf(stderr,
                "cabrank-bench: %zu rows; %s/results.csv, results.md, claims.csv, plot-*.svg%s\n",
                x.rows.len, o.out_dir, o.ncores > 0 ? ", scaling-*.svg" : "");
    bench_rows_fini(&x.rows);
    for (int i = 0; i < o.nconfigs; i++)
        free(o.configs[i]);
    free(o.command);
    return err < 0 ? 1 : 0;
}
