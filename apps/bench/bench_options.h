/*
 * bench_options.h - what cabrank-bench is asked to run (bench_options.c): servers,
 * configurations, peers, workloads and the sweep's points, from the command line. Filled
 * on the main thread before the sweep, read-only during it.
 */
#ifndef CABRANK_BENCH_OPTIONS_H
#define CABRANK_BENCH_OPTIONS_H

#include <limits.h>
#include <stdbool.h>

#define MAX_CONFIGS   32
#define MAX_WORKLOADS 16
#define MAX_POINTS    16
#define MAX_CONNS     1024

struct bench_options {
    const char *httpd;
    char httpd_buf[PATH_MAX];
    char *configs[MAX_CONFIGS];
    int nconfigs;
    char *peers[8];
    int npeers;
    bool peers_given;
    char *workloads[MAX_WORKLOADS];
    int nworkloads;
    unsigned conc[MAX_POINTS];
    int nconc;
    double rates[MAX_POINTS];
    int nrates;
    unsigned open_connections;
    double seconds;
    double warmup;
    const char *out_dir;
    int threads;
    unsigned interval_clients;
    unsigned wrk_threads;       /* 0: 1, or with --cores the load's CPUs */
    unsigned cores[MAX_POINTS]; /* --cores: server core counts; none: nothing pinned */
    int ncores;
    int repeat;          /* --repeat: passes over the claims' points (1..BENCH_REPEAT_MAX) */
    double noise_max;    /* --noise-max: a point is noisy above this share of others' CPU */
    double noise_sample; /* --noise-sample: seconds of the idle sample before each point */
    char *command;       /* the command line, for the report */
};

/* The default of --noise-sample: the idle sample before each point, in seconds (machine.h). */
#define BENCH_NOISE_SAMPLE_DEFAULT 0.25

/* The promotion delay of a "+defer" lf config ("lf:lifo+defer"): cabrank-httpd's default. */
#define BENCH_DEFER_US 5000

/* Parses argv into o (whose defaults the caller set), checking every value; --help
 * prints the usage and exits 0, a bad flag says why and exits 2. */
void bench_options_parse(struct bench_options *o, int argc, char **argv);

/* The command line, shell-quoted where needed, for the report's header: returns owned
 * (free()), NULL on ENOMEM. */
char *bench_options_command(int argc, char **argv);

/* o->httpd: cabrank-httpd beside this program, else build/cabrank-httpd. */
void bench_options_default_httpd(struct bench_options *o);

/* o->configs: every model o->httpd's --help lists, lf under lifo (deferred and not) and
 * fifo, proactor under each dispatcher (strdup'd: the caller frees them). Exits 1 when it lists
 * none. */
void bench_options_default_configs(struct bench_options *o);

/* The parts of a config "model[:option]"; under lf the option may end in "+defer". */
struct bench_config {
    char model[32];
    char option[32];
    bool defer; /* lf: promotion deferred BENCH_DEFER_US ("+defer"), else promoted at once */
};

/* Splits a config "model[:option[+defer]]" into c. */
void bench_config_split(const char *spec, struct bench_config *c);

/* The flag a config's option sets, by model; NULL when the model takes none. */
const char *bench_config_flag(const char *model);

/* The most connections any point opens. */
unsigned bench_options_max_conc(const struct bench_options *o);

/* Prefork's workers: enough for the largest concurrency (at most 1100). */
int bench_options_prefork_workers(const struct bench_options *o);

#endif /* CABRANK_BENCH_OPTIONS_H */
