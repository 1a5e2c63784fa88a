/*
 * advise.c - `cabrank-bench advise`: the command line, then a probe of the service under lf (the
 * characteristics the pattern paper's selection guideline asks about), the rules' recommendation
 * with its reasons (advise_rules.c), and its verification: the recommendation and its runners-up
 * under the same load, the table, and a verdict that says plainly whether it won. Runs on the
 * program's one thread; owns the work directory it makes and removes.
 */
#include "advise.h"
#include "bench_options.h"
#include "driver.h"
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define MAX_CANDIDATES (1 + ADVISE_RUNNERS)

static const char usage[] =
    "usage: cabrank-bench advise [options]\n"
    "Measures a service under short probes (connection rate, requests per connection, service\n"
    "time and how often handlers block, memory per idle connection, the cores at hand),\n"
    "recommends a concurrency model and its cabrank-httpd flags after the pattern paper's\n"
    "selection guideline (docs/models.md), and runs the recommendation against its runners-up\n"
    "under the same load, printing the table and whether it won.\n"
    "\n"
    "  --service NAME      httpd (cabrank-httpd serving files), line (the line-protocol test\n"
    "                      service) or ledger (cabrank-ledger on a fresh SQLite file, transfers\n"
    "                      from cabrank-oltp-load) (default httpd)\n"
    "  --root DIR          httpd: document root (default: a temporary one with hello.txt, 1k.bin,\n"
    "                      64k.bin, 1m.bin)\n"
    "  --files LIST        httpd: the file mix, paths below the root requested round-robin\n"
    "                      (default hello.txt; at most 8)\n"
    "  --close             httpd: the clients close the connection after each request\n"
    "  --connections N     connections of the load, each with one request in flight (default 16)\n"
    "  --idle N            idle keep-alive connections the clients hold open besides (default 0)\n"
    "  --handler-ms MS     line: how long a blocking handler blocks (default 5)\n"
    "  --block-share F     line: the share of requests whose handler blocks, 0..1 (default 0)\n"
    "  --seconds S         each run of the load (default 1)\n"
    "  --runners N         runners-up verified against the recommendation, 0..3 (default 2)\n"
    "  --repeat N          rounds of the verification, order reversed each round; each\n"
    "                      configuration keeps its best round (default 1, at most 5)\n"
    "  --httpd PATH        cabrank-httpd (default: beside this program); cabrank-ledger and\n"
    "                      cabrank-oltp-load are taken from its directory\n"
    "  --help              this text\n"
    "\n"
    "The last line reads: advise: rule=RULE pick=\"FLAGS\" won=yes|tie|no (tie: it served fewer\n"
    "requests, but its best round beat the runner-up's worst: the rounds overlap)\n";

struct advise_opts {
    struct advise_load l;
    struct bench_options bo; /* for the httpd's default path */
    int runners;
    int repeat;
};

static void bad(const char *flag, const char *value)
{
    fprintf(stderr, "cabrank-bench advise: bad %s '%s' (see --help)\n", flag,
            value != NULL ? value : "");
    exit(2);
}

static double number(const char *flag, const char *v, double lo, double hi)
{
    char *end;
    double d;

    if (v == NULL)
        bad(flag, v);
    d = strtod(v, &end);
    if (end == v || *end != '\0' || !(d >= lo && d <= hi))
        bad(flag, v);
    return d;
}

static void add_paths(struct advise_load *l, char *list)
{
    for (char *save = NULL, *f = strtok_r(list, ",", &save); f != NULL;
         f = strtok_r(NULL, ",", &save)) {
        if (l->npaths == 8 || strlen(f) > 250)
            bad("--files", f);
        snprintf(l->paths[l->npaths++], sizeof(l->paths[0]), "%s%s", f[0] == '/' ? "" : "/", f);
    }
}

static void parse(struct advise_opts *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            exit(0);
        } else if (strcmp(a, "--close") == 0) {
            o->l.close = true;
            continue;
        }
        if (strcmp(a, "--service") == 0 && v != NULL && strcmp(v, "httpd") == 0)
            o->l.service = ADVISE_HTTPD;
        else if (strcmp(a, "--service") == 0 && v != NULL && strcmp(v, "line") == 0)
            o->l.service = ADVISE_LINE;
        else if (strcmp(a, "--service") == 0 && v != NULL && strcmp(v, "ledger") == 0)
            o->l.service = ADVISE_LEDGER;
        else if (strcmp(a, "--root") == 0 && v != NULL)
            o->l.root = v;
        else if (strcmp(a, "--files") == 0 && v != NULL)
            add_paths(&o->l, argv[i + 1]);
        else if (strcmp(a, "--connections") == 0)
            o->l.active = (unsigned)number(a, v, 1, 1024);
        else if (strcmp(a, "--idle") == 0)
            o->l.idle = (unsigned)number(a, v, 0, 20000);
        else if (strcmp(a, "--handler-ms") == 0)
            o->l.handler_ms = (unsigned)number(a, v, 1, 10000);
        else if (strcmp(a, "--block-share") == 0)
            o->l.block_share = number(a, v, 0, 1);
        else if (strcmp(a, "--seconds") == 0)
            o->l.seconds = number(a, v, 0.2, 60);
        else if (strcmp(a, "--runners") == 0)
            o->runners = (int)number(a, v, 0, ADVISE_RUNNERS);
        else if (strcmp(a, "--repeat") == 0)
            o->repeat = (int)number(a, v, 1, 5);
        else if (strcmp(a, "--httpd") == 0 && v != NULL)
            o->l.httpd = v;
        else
            bad(a, v);
        i++;
    }
}

/* Idle connections need descriptors: the hard cap, which the servers inherit. */
static void raise_fd_limit(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            perror("cabrank-bench advise: setrlimit");
    }
}

/* wrk's script: the report's figures, and the file mix requested round-robin. */
static int write_script(const char *dir, struct advise_load *l, char *path)
{
    FILE *f;
    int err = bench_wrk_script(dir, path);

    if (err < 0)
        return err;
    f = fopen(path, "a");
    if (f == NULL)
        return -errno;
    fputs("paths = {", f);
    for (int i = 0; i < l->npaths; i++)
        fprintf(f, "%s\"%s\"", i ? ", " : "", l->paths[i]);
    fputs("}\nlocal i = 0\nrequest = function()\n  i = i % #paths + 1\n"
          "  return wrk.format(nil, paths[i])\nend\n",
          f);
    if (fclose(f) != 0)
        return -errno;
    l->script = path;
    return 0;
}

static void describe(const struct advise_opts *o, unsigned cores)
{
    const struct advise_load *l = &o->l;

    if (l->service == ADVISE_HTTPD) {
        printf("service: cabrank-httpd on %s, files", l->root);
        for (int i = 0; i < l->npaths; i++)
            printf(" %s", l->paths[i]);
        printf("; clients: %u connections, %s, %u idle keep-alive besides\n", l->active,
               l->close ? "closed after each request" : "keep-alive", l->idle);
    } else if (l->service == ADVISE_LEDGER) {
        printf("service: cabrank-ledger on %s; clients: %u connections of cabrank-oltp-load, "
               "transfers, closed loop, %u idle besides\n",
               l->db, l->active, l->idle);
    } else {
        printf("service: line protocol, %.0f%% of handlers block %u ms; clients: %u "
               "connections, keep-alive, %u idle besides\n",
               l->block_share * 100, l->handler_ms, l->active, l->idle);
    }
    printf("cores at hand: %u; each run %.1f s\n\n", cores, l->seconds);
}

/* The program name beside the httpd (the same build directory) into out. */
static const char *beside(const char *httpd, const char *name, char *out, size_t cap)
{
    const char *slash = strrchr(httpd, '/');

    if (slash == NULL)
        snprintf(out, cap, "%s", name);
    else
        snprintf(out, cap, "%.*s/%s", (int)(slash - httpd), httpd, name);
    return out;
}

/* The probe under lf: the characteristics, printed. 0 or -errno. */
static int probe(const struct advise_opts *o, unsigned cores, struct advise_traits *t)
{
    struct advise_choice lf = {.model = "lf", .per_core = true};
    struct advise_latency lat;
    struct advise_result r;

    bench_advise_run(&o->l, &lf, &lat, &r);
    if (r.err < 0) {
        fprintf(stderr, "cabrank-bench advise: probe: %s\n", strerror(-r.err));
        return r.err;
    }
    *t = (struct advise_traits){
        .cores = cores,
        .conn_rate = r.conns / r.seconds,
        .req_per_conn = r.requests / r.conns,
        .service_us = lat.median_us,
        .cpu_us = r.cpu_us,
        .block_share = lat.block_share,
        .block_us = lat.block_us,
        .active = o->l.active,
        .idle = o->l.idle,
        .mem_per_conn_kb = r.mem_per_conn_kb,
    };
    printf("probe (lf, %.1f s at one client, then the load):\n", o->l.seconds / 2);
    printf("  connection rate          %.1f new connections/s\n", t->conn_rate);
    printf("  requests per connection  %.1f\n", t->req_per_conn);
    printf("  service time             median %.0f us at one client, of the requests that did not "
           "block (%u timed)\n",
           t->service_us, lat.samples);
    if (isnan(t->block_share))
        printf("  handlers that block      unknown (too few requests timed)\n");
    else
        printf("  handlers that block      %.1f%% of requests took over %.1f ms (1 ms, and 10 "
               "times the %.0f us of server CPU per request at one client)\n",
               t->block_share * 100, lat.limit_us / 1000, lat.cpu_us);
    if (!isnan(t->block_us))
        printf("                           median of those %.1f ms\n", t->block_us / 1000);
    printf("  server CPU per request   %.1f us (%.0f req/s under the load)\n", t->cpu_us, r.rps);
    printf("  memory per connection    %.1f KiB resident per idle keep-alive connection\n",
           t->mem_per_conn_kb);
    printf("  cores at hand            %u\n\n", cores);
    return 0;
}

static void verdict(const struct advise_rec *rec, const struct advise_result *res,
                    char flags[][128], int n)
{
    int best;
    enum advise_verdict v = bench_advise_judge(res, n, &best);

    if (n == 1)
        printf("verdict: no runner-up run (--runners 0)\n");
    else if (v == ADVISE_WON && best < 0)
        printf("verdict: the recommendation won: every runner-up failed\n");
    else if (v == ADVISE_WON && res[0].rps >= res[best].rps)
        printf("verdict: the recommendation won: %.0f req/s, %.0f%% more than the best runner-up "
               "(%s)\n",
               res[0].rps, 100 * (res[0].rps / fmax(res[best].rps, 1) - 1), flags[best]);
    else if (v == ADVISE_WON)
        printf("verdict: the recommendation won on CPU per request (%.1f us against %.1f) within "
               "%.0f%% of the best runner-up's req/s (%s)\n",
               res[0].cpu_us, res[best].cpu_us, (1 - ADVISE_CPU_TIE) * 100, flags[best]);
    else if (v == ADVISE_TIE)
        printf("verdict: a tie, NOT a win: %s served %.0f req/s, %.0f%% more, but its worst round "
               "(%.0f) fell below this one's best: this machine could not tell them apart\n",
               flags[best], res[best].rps, 100 * (res[best].rps / fmax(res[0].rps, 1) - 1),
               res[best].worst_rps);
    else if (res[0].err < 0 || res[0].errors > 0)
        printf("verdict: the recommendation did NOT win: it %s\n",
               res[0].err < 0 ? "failed" : "had errors");
    else
        printf("verdict: the recommendation did NOT win: %s served %.0f req/s at %.1f us CPU per "
               "request, against its %.0f at %.1f us\n",
               flags[best], res[best].rps, res[best].cpu_us, res[0].rps, res[0].cpu_us);
    printf("advise: rule=%s pick=\"%s\" won=%s\n", rec->rule, flags[0],
           n == 1            ? "no"
           : v == ADVISE_WON ? "yes"
           : v == ADVISE_TIE ? "tie"
                             : "no");
}

static void verify(const struct advise_opts *o, const struct advise_rec *rec)
{
    struct advise_choice c[MAX_CANDIDATES];
    struct advise_result res[MAX_CANDIDATES];
    char flags[MAX_CANDIDATES][128];
    int n = 1 + (o->runners < rec->nrunners ? o->runners : rec->nrunners);
    double others = NAN; /* the most CPU other processes took during a run */
    double load = NAN;

    c[0] = rec->pick;
    for (int i = 1; i < n; i++)
        c[i] = rec->runners[i - 1];
    for (int i = 0; i < n; i++) {
        bench_advise_flags(&c[i], flags[i], sizeof(flags[i]));
        res[i] = (struct advise_result){.rps = NAN, .err = -EAGAIN};
    }
    for (int round = 0; round < o->repeat; round++) {
        for (int k = 0; k < n; k++) {
            int i = round % 2 ? n - 1 - k : k;
            struct advise_result r;
            double worst;

            bench_advise_run(&o->l, &c[i], NULL, &r);
            worst = res[i].err == 0 ? res[i].worst_rps : INFINITY;
            if (r.err < 0)
                fprintf(stderr, "cabrank-bench advise: %s: %s\n", flags[i], strerror(-r.err));
            else
                worst = fmin(worst, r.rps);
            if (res[i].err < 0 || (r.err == 0 && r.rps > res[i].rps))
                res[i] = r;
            res[i].worst_rps = worst;
            others = fmax(others, r.other_cpu);
            load = fmax(load, r.loadavg);
        }
    }
    printf("verification: the same load, %.1f s per run, %d round%s (each keeps its best; spread: "
           "how much its worst round fell short; others: the machine's CPU other processes took "
           "during it):\n",
           o->l.seconds, o->repeat, o->repeat > 1 ? "s" : "");
    printf("  %-52s %10s %7s %10s %11s %13s %7s %7s\n", "configuration", "req/s", "spread",
           "p99 us", "CPU us/req", "KiB/idle conn", "errors", "others");
    for (int i = 0; i < n; i++) {
        if (res[i].err < 0) {
            printf("%s %-52s failed: %s\n", i ? " " : "*", flags[i], strerror(-res[i].err));
            continue;
        }
        printf("%s %-52s %10.0f %6.0f%% %10.0f %11.1f %13.1f %7u %6.0f%%\n", i ? " " : "*",
               flags[i], res[i].rps, 100 * bench_advise_spread(&res[i]), res[i].p99_us,
               res[i].cpu_us, res[i].mem_per_conn_kb, res[i].errors, 100 * res[i].other_cpu);
    }
    if (others > BENCH_NOISE_MAX_DEFAULT)
        printf("noise: other processes took up to %.0f%% of the machine's CPU during these runs "
               "(load average up to %.1f), above %.0f%%: the figures are not the service's "
               "alone\n",
               100 * others, load, 100 * BENCH_NOISE_MAX_DEFAULT);
    verdict(rec, res, flags, n);
}

/* What the servers said on stderr, for a run that failed (the directory goes with it). */
static void show_log(const char *path)
{
    char line[512];
    FILE *f = fopen(path, "r");

    if (f == NULL)
        return;
    fprintf(stderr, "cabrank-bench advise: the servers' log:\n");
    while (fgets(line, sizeof(line), f) != NULL)
        fputs(line, stderr);
    fclose(f);
}

int bench_advise_main(int argc, char **argv)
{
    struct advise_opts o = {
        .l = {.service = ADVISE_HTTPD, .active = 16, .handler_ms = 5, .seconds = 1},
        .runners = 2,
        .repeat = 1,
    };
    char dir[PATH_MAX];
    char script[PATH_MAX];
    char log[PATH_MAX + 32];
    char db[PATH_MAX + 32];
    char ledger[PATH_MAX + 32];
    char oltp_load[PATH_MAX + 32];
    char root[PATH_MAX + 8];
    char flags[128];
    struct advise_traits t;
    struct advise_rec rec;
    unsigned cores = bench_advise_cores();
    int err;

    parse(&o, argc, argv);
    if (o.l.npaths == 0)
        snprintf(o.l.paths[o.l.npaths++], sizeof(o.l.paths[0]), "/hello.txt");
    if (o.l.httpd == NULL) {
        bench_options_default_httpd(&o.bo);
        o.l.httpd = o.bo.httpd;
    }
    if (o.l.service == ADVISE_HTTPD && !bench_wrk_found()) {
        fprintf(stderr, "cabrank-bench advise: wrk not found (the HTTP load needs it)\n");
        return 1;
    }
    raise_fd_limit();
    err = bench_workdir_create(dir);
    if (err < 0) {
        fprintf(stderr, "cabrank-bench advise: work directory: %s\n", strerror(-err));
        return 1;
    }
    snprintf(log, sizeof(log), "%s/run/servers.log", dir);
    o.l.log = log;
    snprintf(db, sizeof(db), "%s/run/ledger.db", dir);
    o.l.db = db;
    o.l.ledger = beside(o.l.httpd, "cabrank-ledger", ledger, sizeof(ledger));
    o.l.oltp_load = beside(o.l.httpd, "cabrank-oltp-load", oltp_load, sizeof(oltp_load));
    if (o.l.root == NULL) {
        snprintf(root, sizeof(root), "%s/www", dir);
        o.l.root = root;
    }
    if (o.l.service == ADVISE_HTTPD)
        err = write_script(dir, &o.l, script);
    describe(&o, cores);
    fflush(stdout);
    if (err == 0)
        err = probe(&o, cores, &t);
    if (err == 0) {
        bench_advise_decide(&t, &rec);
        bench_advise_flags(&rec.pick, flags, sizeof(flags));
        printf("recommendation: %s   (rule %s)\n%s\n", flags, rec.rule, rec.reasons);
        fflush(stdout);
        verify(&o, &rec);
    }
    if (err != 0)
        show_log(log);
    bench_workdir_remove(dir);
    return err == 0 ? 0 : 1;
}
