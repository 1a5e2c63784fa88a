/*
 * advise.h - `cabrank-bench advise`: which concurrency model fits a service, after the pattern
 * paper's selection guideline (docs/models.md, "Choosing a model"). The rules
 * (advise_rules.c) are a pure function from measured characteristics to a recommendation; the
 * probes (advise_probe.c) start the service under a model and measure; advise.c parses the
 * command line, probes, decides, verifies the pick against its runners-up and prints the
 * table. Everything runs on the program's one thread; the servers are children.
 */
#ifndef CABRANK_BENCH_ADVISE_H
#define CABRANK_BENCH_ADVISE_H

#include <stdbool.h>
#include <stddef.h>

/* Thresholds of the rules (docs/models.md says why each is where it is). */
#define ADVISE_BLOCK_SHARE_MIN 0.02   /* a share of requests this large blocking matters */
#define ADVISE_BLOCK_MIN_US    1000.0 /* a request this slow at one client has blocked */
#define ADVISE_SHORT_CONN_REQS 2.0    /* requests per connection: a connection is one exchange */
#define ADVISE_TASK_CONNS_MAX  64     /* open connections a task each can hold */
#define ADVISE_REACTOR_CORES   2      /* one thread keeps up on this many cores or fewer */
#define ADVISE_THREADS_MAX     512
#define ADVISE_CPU_TIE         0.97 /* req/s within 3%: less CPU per request decides */

/* What the probes measured of a service; NAN where unknown. */
struct advise_traits {
    unsigned cores;      /* CPUs this program may use (sched_getaffinity) */
    double conn_rate;    /* new connections per second the clients made */
    double req_per_conn; /* requests per connection */
    double service_us;   /* median response at one client of the requests that did not block, µs */
    double cpu_us;       /* server CPU per request under load, µs */
    double block_share;  /* share of requests that blocked (0..1); NAN: unknown */
    double block_us;     /* median time of a blocked request, µs */
    unsigned active;     /* connections with a request in flight (the clients' load) */
    unsigned idle;       /* idle keep-alive connections the clients hold besides */
    double mem_per_conn_kb; /* resident memory per idle connection under the probe's model */
};

/* One configuration of cabrank-httpd (and of the line server): a model and its flags. */
struct advise_choice {
    char model[16]; /* reactor, lf, hshr, prefork, forking */
    int threads;    /* lf, hshr: --threads; 0: the server's default */
    bool per_core;  /* lf: --groups auto (a handle set per CPU) */
    bool eager;     /* lf: --promotion-delay 0 (promote before every event) */
    int workers;    /* prefork: --workers (and the cap) */
};

#define ADVISE_RUNNERS 3

struct advise_rec {
    struct advise_choice pick;
    struct advise_choice runners[ADVISE_RUNNERS]; /* what the guideline would pick otherwise */
    int nrunners;
    const char *rule;   /* static: the branch taken, e.g. "blocking" */
    char reasons[1024]; /* in the papers' terms, one sentence a line */
};

/* The guideline: t in, r out. Pure; any thread. */
void bench_advise_decide(const struct advise_traits *t, struct advise_rec *r);

/* The choice's cabrank-httpd flags ("--model lf --groups auto") into buf. */
void bench_advise_flags(const struct advise_choice *c, char *buf, size_t cap);

/* ------------------------------------------------------------ probes (advise_probe.c) */

enum advise_service { ADVISE_HTTPD, ADVISE_LINE, ADVISE_LEDGER };

/* The service and its clients, from the command line. */
struct advise_load {
    enum advise_service service;
    const char *httpd;     /* cabrank-httpd */
    const char *ledger;    /* ledger: cabrank-ledger */
    const char *oltp_load; /* ledger: cabrank-oltp-load, its load */
    const char *db;        /* ledger: the SQLite file all runs share */
    const char *root;      /* httpd: document root */
    char paths[8][256];
    int npaths;          /* httpd: the file mix, URL paths requested round-robin */
    const char *script;  /* httpd: wrk's Lua (report and the mix) */
    bool close;          /* httpd: Connection: close on every request */
    unsigned active;     /* connections of the load */
    unsigned idle;       /* idle keep-alive connections held open besides */
    double seconds;      /* per run */
    unsigned handler_ms; /* line: a blocking handler's time */
    double block_share;  /* line: share of requests that block */
    const char *log;     /* servers' stderr; NULL: ours */
};

/* One run of the load against a choice (the best of its rounds). NAN where not measured. */
struct advise_result {
    double rps;
    double worst_rps; /* its worst round's */
    double p99_us;
    double cpu_us;          /* server CPU per request */
    double mem_per_conn_kb; /* resident memory per idle connection (idle > 0) */
    double conns;           /* connections the load opened */
    double requests;
    double seconds;
    double loadavg;   /* the 1-minute load average before the load */
    double other_cpu; /* the machine's CPU share (0..1) other processes took during it */
    unsigned errors;
    int err; /* 0, or -errno: the run failed (nothing else valid) */
};

/* The sequential probe at one client: median time, share of blocked requests (slower than
 * ADVISE_BLOCK_MIN_US and ten times the server's CPU per request) and their median time. */
struct advise_latency {
    double median_us; /* of the requests that did not block */
    double block_share;
    double block_us;
    double limit_us; /* a request slower than this blocked */
    double cpu_us;   /* the server's CPU per request at one client */
    unsigned samples;
};

enum advise_verdict { ADVISE_WON, ADVISE_TIE, ADVISE_LOST };

/* How far a configuration's worst round fell short of its best: 1 - worst / best req/s. */
double bench_advise_spread(const struct advise_result *r);

/*
 * Judges res[0], the pick, against the runners-up res[1..n): *best is the runner-up that served
 * the most (-1: none measured). Won: the pick served at least as many requests, or over
 * ADVISE_CPU_TIE of them with less CPU per request (a runner-up that failed is beaten). Tie: it
 * served fewer, but its best round reached the runner-up's worst, so the rounds overlap and this
 * machine cannot tell the two apart. Lost otherwise, or when the pick failed or had errors. Pure;
 * any thread.
 */
enum advise_verdict bench_advise_judge(const struct advise_result *res, int n, int *best);

/* Starts the service under c, holds the idle connections, runs the load, stops it. With lat
 * non-NULL, first times requests from one client for seconds / 2 (lat filled). */
void bench_advise_run(const struct advise_load *l, const struct advise_choice *c,
                      struct advise_latency *lat, struct advise_result *r);

/* CPUs this program may use. */
unsigned bench_advise_cores(void);

/* Entry: `cabrank-bench advise ARGS` (argv[0] is "advise"). Exit status. */
int bench_advise_main(int argc, char **argv);

#endif /* CABRANK_BENCH_ADVISE_H */
