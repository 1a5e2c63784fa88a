/*
 * bench_options.c - cabrank-bench's command line (bench_options.h): the flags with their
 * checks and help, the command line quoted for the report, and the defaults that need a
 * look around (cabrank-httpd beside this program, the models its --help lists). Main
 * thread, before the sweep; exits with status 2 on a bad flag, 1 when the server lists no
 * models.
 */
#include "bench_options.h"

#include "canned.h"
#include "driver.h"
#include "report.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const default_workloads =
    "http:hello.txt,http:64k.bin,http-close:hello.txt,line,line-open,interval";

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: cabrank-bench [options]\n"
        "Runs cabrank-httpd under each model, and the peers installed, under the same loads;\n"
        "writes results.csv, results.md and plot-<workload>.svg into the output directory.\n"
        "\n"
        "  --configs LIST     cabrank configurations, model[:option] (lf:lifo, lf:fifo, hshr,\n"
        "                     reactor, tpc, forking, prefork, proactor:single, proactor:lf,\n"
        "                     proactor:ring-per-thread...; default: every model the server's\n"
        "                     --help lists, lf under lifo and fifo, proactor under each dispatch)\n"
        "                     lf promotes at once; lf:lifo+defer defers promotion 5 ms\n"
        "                     (cabrank-httpd's default) in both servers\n"
        "  --peers LIST       nginx, h2o, lighttpd, apache-event, apache-prefork\n"
        "                     (default: those installed); canned-epoll, canned-uring: this\n"
        "                     machine's floor, a canned answer to every request (only when\n"
        "                     named; hello.txt workloads only)\n"
        "  --no-peers         cabrank only\n"
        "  --workloads LIST   http:<file>, http-close:<file> (files hello.txt, 1k.bin, 64k.bin,\n"
        "                     1m.bin), line, line-open, interval (default\n"
        "                     %s)\n"
        "  --concurrency LIST connections per point, 1..1024 (default 1,8,64,256,1024)\n"
        "  --rates LIST       line-open: requests/s per point (default 1000,10000,50000)\n"
        "  --open-connections N  line-open: connections (default 16)\n"
        "  --seconds S        per point (default 3; wrk rounds up to whole seconds)\n"
        "  --warmup S         wrk warm-up per HTTP server, not recorded (default 1, 0: none)\n"
        "  --repeat N         passes over the points the claims compare, configurations in\n"
        "                     alternating order, for the spread of each claim (default 3,\n"
        "                     at most %d; the first pass measures every point)\n"
        "  --noise-max F      warn, and mark the point noisy, when other processes took more\n"
        "                     than this share of the machine's CPU before or during it\n"
        "                     (default %.2f)\n"
        "  --noise-sample S   seconds of the idle sample of the others' CPU before each point\n"
        "                     (default %.2f; 0: none)\n"
        "  --threads N        server threads (cabrank-httpd --threads; default its own)\n"
        "  --interval-clients N  interval: sequential clients measured (default 500)\n"
        "  --wrk-threads N    wrk threads (default 1; with --cores, one per load CPU)\n"
        "  --cores LIST       server core counts, e.g. 1,2,4,8: for each k every server runs\n"
        "                     on the first k CPUs this program may use and the load on the\n"
        "                     others (a k that leaves none is skipped, and said); adds a\n"
        "                     scaling table per workload, the claims per k and\n"
        "                     scaling-<workload>.svg (default: nothing pinned)\n"
        "  --httpd PATH       cabrank-httpd (default: beside this program)\n"
        "  --out DIR          output directory (default bench/results)\n"
        "  --help             this text\n",
        default_workloads, BENCH_REPEAT_MAX, BENCH_NOISE_MAX_DEFAULT, BENCH_NOISE_SAMPLE_DEFAULT);
}

static void bad(const char *what)
{
    fprintf(stderr, "cabrank-bench: %s\n", what);
    usage(stderr);
    exit(2);
}

/* Splits a comma list (modified in place) into out[0..max). */
static int split(char *list, char **out, int max, const char *flag)
{
    char *save = NULL;
    int n = 0;

    for (char *t = strtok_r(list, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        if (n == max) {
            fprintf(stderr, "cabrank-bench: too many values for %s (at most %d)\n", flag, max);
            exit(2);
        }
        out[n++] = t;
    }
    return n;
}

static double parse_num(const char *flag, const char *v, double lo, double hi)
{
    char *end;
    double x = strtod(v, &end);

    if (end == v || *end != '\0' || !(x >= lo && x <= hi)) {
        fprintf(stderr, "cabrank-bench: %s %s: want a number in [%g, %g]\n", flag, v, lo, hi);
        exit(2);
    }
    return x;
}

static bool is_known_workload(const char *w)
{
    const char *file = NULL;

    if (strcmp(w, "line") == 0 || strcmp(w, "line-open") == 0 || strcmp(w, "interval") == 0)
        return true;
    if (strncmp(w, "http:", 5) == 0)
        file = w + 5;
    else if (strncmp(w, "http-close:", 11) == 0)
        file = w + 11;
    return file != NULL && bench_file_size(file) >= 0;
}

/* The command line, shell-quoted where needed, for the report's header. */
char *bench_options_command(int argc, char **argv)
{
    size_t cap = 1;
    char *s;

    for (int i = 0; i < argc; i++)
        cap += strlen(argv[i]) * 4 + 3;
    s = calloc(1, cap);
    if (s == NULL)
        return NULL;
    for (int i = 0; i < argc; i++) {
        bool plain = argv[i][0] != '\0';

        for (const char *p = argv[i]; *p; p++)
            plain = plain && (isalnum((unsigned char)*p) || strchr("-_./:,=+@", *p) != NULL);
        if (i > 0)
            strcat(s, " ");
        if (plain) {
            strcat(s, argv[i]);
            continue;
        }
        strcat(s, "'");
        for (const char *p = argv[i]; *p; p++) {
            if (*p == '\'')
                strcat(s, "'\\''");
            else
                strncat(s, p, 1);
        }
        strcat(s, "'");
    }
    return s;
}

void bench_options_parse(struct bench_options *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *eq = strchr(a, '=');

        if (strncmp(a, "--", 2) == 0 && eq != NULL) {
            *eq = '\0';
            v = eq + 1;
            i--; /* the value is not a separate argument */
        }
        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--no-peers") == 0) {
            o->peers_given = true;
            o->npeers = 0;
            i += eq != NULL;
            continue;
        } else if (v == NULL) {
            fprintf(stderr, "cabrank-bench: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            exit(2);
        }
        i++;
        if (strcmp(a, "--configs") == 0) {
            o->nconfigs = split(v, o->configs, MAX_CONFIGS, a);
            for (int k = 0; k < o->nconfigs; k++) {
                o->configs[k] = strdup(o->configs[k]);
                if (o->configs[k] == NULL)
                    bad("out of memory");
            }
        } else if (strcmp(a, "--peers") == 0) {
            o->peers_given = true;
            o->npeers = split(v, o->peers, 7, a);
        } else if (strcmp(a, "--workloads") == 0) {
            o->nworkloads = split(v, o->workloads, MAX_WORKLOADS, a);
        } else if (strcmp(a, "--concurrency") == 0) {
            char *vals[MAX_POINTS];

            o->nconc = split(v, vals, MAX_POINTS, a);
            for (int k = 0; k < o->nconc; k++)
                o->conc[k] = (unsigned)parse_num(a, vals[k], 1, MAX_CONNS);
        } else if (strcmp(a, "--rates") == 0) {
            char *vals[MAX_POINTS];

            o->nrates = split(v, vals, MAX_POINTS, a);
            for (int k = 0; k < o->nrates; k++)
                o->rates[k] = parse_num(a, vals[k], 1, 1e7);
        } else if (strcmp(a, "--open-connections") == 0) {
            o->open_connections = (unsigned)parse_num(a, v, 1, MAX_CONNS);
        } else if (strcmp(a, "--seconds") == 0) {
            o->seconds = parse_num(a, v, 0.1, 3600);
        } else if (strcmp(a, "--warmup") == 0) {
            o->warmup = parse_num(a, v, 0, 600);
        } else if (strcmp(a, "--repeat") == 0) {
            o->repeat = (int)parse_num(a, v, 1, BENCH_REPEAT_MAX);
        } else if (strcmp(a, "--noise-max") == 0) {
            o->noise_max = parse_num(a, v, 0, 1);
        } else if (strcmp(a, "--noise-sample") == 0) {
            o->noise_sample = parse_num(a, v, 0, 10);
        } else if (strcmp(a, "--threads") == 0) {
            o->threads = (int)parse_num(a, v, 1, 4096);
        } else if (strcmp(a, "--interval-clients") == 0) {
            o->interval_clients = (unsigned)parse_num(a, v, 1, 1000000);
        } else if (strcmp(a, "--wrk-threads") == 0) {
            o->wrk_threads = (unsigned)parse_num(a, v, 1, 64);
        } else if (strcmp(a, "--cores") == 0) {
            char *vals[MAX_POINTS];

            o->ncores = split(v, vals, MAX_POINTS, a);
            for (int k = 0; k < o->ncores; k++)
                o->cores[k] = (unsigned)parse_num(a, vals[k], 1, 4096);
            if (o->ncores == 0)
                bad("--cores: a list of core counts, e.g. 1,2,4,8");
        } else if (strcmp(a, "--httpd") == 0) {
            o->httpd = v;
        } else if (strcmp(a, "--out") == 0) {
            o->out_dir = v;
        } else {
            fprintf(stderr, "cabrank-bench: unknown option '%s'\n", a);
            usage(stderr);
            exit(2);
        }
    }
    if (o->nworkloads == 0) {
        static char defaults[256];

        snprintf(defaults, sizeof(defaults), "%s", default_workloads);
        o->nworkloads = split(defaults, o->workloads, MAX_WORKLOADS, "--workloads");
    }
    for (int i = 0; i < o->nworkloads; i++) {
        if (!is_known_workload(o->workloads[i])) {
            fprintf(stderr, "cabrank-bench: unknown workload '%s'\n", o->workloads[i]);
            bad("--workloads: http:<file>, http-close:<file>, line, line-open, interval");
        }
    }
    for (int i = 0; i < o->npeers; i++) {
        bool known = false;

        for (int k = 0; bench_peer_names[k] != NULL; k++)
            known = known || strcmp(bench_peer_names[k], o->peers[i]) == 0;
        if (!known && !bench_is_canned(o->peers[i]))
            bad("--peers: nginx, h2o, lighttpd, apache-event, apache-prefork, canned-epoll, "
                "canned-uring");
    }
}

/* cabrank-httpd beside this program, else build/cabrank-httpd. */
void bench_options_default_httpd(struct bench_options *o)
{
    ssize_t n = readlink("/proc/self/exe", o->httpd_buf, sizeof(o->httpd_buf) - 1);
    char *slash;

    o->httpd = "build/cabrank-httpd";
    if (n <= 0)
        return;
    o->httpd_buf[n] = '\0';
    slash = strrchr(o->httpd_buf, '/');
    if (slash == NULL ||
        (size_t)(slash - o->httpd_buf) + sizeof("/cabrank-httpd") > sizeof(o->httpd_buf))
        return;
    strcpy(slash, "/cabrank-httpd");
    if (access(o->httpd_buf, X_OK) == 0)
        o->httpd = o->httpd_buf;
}

/* Runs argv, returns its stdout (up to cap - 1 bytes, NUL-terminated). */
static bool capture(char *const argv[], char *out, size_t cap)
{
    int pfd[2];
    size_t used = 0;
    pid_t pid;
    int status;

    if (pipe2(pfd, O_CLOEXEC) < 0)
        return false;
    pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return false;
    }
    if (pid == 0) {
        dup2(pfd[1], STDOUT_FILENO);
        execv(argv[0], argv);
        _exit(127);
    }
    close(pfd[1]);
    for (;;) {
        ssize_t n = read(pfd[0], out + used, cap - 1 - used);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || (used += (size_t)n) == cap - 1)
            break;
    }
    out[used] = '\0';
    close(pfd[0]);
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && used > 0;
}

static void add_config(struct bench_options *o, const char *spec)
{
    if (o->nconfigs < MAX_CONFIGS)
        o->configs[o->nconfigs++] = strdup(spec);
}

/*
 * The models `httpd --help` lists on its --model line ("  --model NAME   reactor, lf, hshr,
 * tpc (default lf)": the words up to the "("), lf under lifo and fifo, proactor under each
 * dispatcher.
 */
void bench_options_default_configs(struct bench_options *o)
{
    static char help[65536];
    char *argv[] = {(char *)o->httpd, "--help", NULL};
    char *p;
    char *end;

    if (!capture(argv, help, sizeof(help)) || (p = strstr(help, "--model NAME")) == NULL) {
        fprintf(stderr, "cabrank-bench: %s --help lists no models\n", o->httpd);
        exit(1);
    }
    p += strlen("--model NAME");
    end = strstr(p, "\n  --");
    if (end != NULL)
        *end = '\0';
    while (*p != '\0' && *p != '(') {
        char *w;

        if (!islower((unsigned char)*p)) {
            p++;
            continue;
        }
        w = p;
        while (isalnum((unsigned char)*p) || *p == '-' || *p == '_')
            p++;
        if (*p != '\0')
            *p++ = '\0';
        if (strcmp(w, "or") == 0 || strcmp(w, "and") == 0)
            continue;
        if (strcmp(w, "lf") == 0) {
            add_config(o, "lf:lifo+defer");
            add_config(o, "lf:lifo");
            add_config(o, "lf:fifo");
        } else if (strcmp(w, "proactor") == 0) {
            add_config(o, "proactor:single");
            add_config(o, "proactor:lf");
            add_config(o, "proactor:ring-per-thread");
        } else {
            add_config(o, w);
        }
    }
    if (o->nconfigs == 0) {
        fprintf(stderr, "cabrank-bench: no models on the --model line of %s --help\n", o->httpd);
        exit(1);
    }
}

void bench_config_split(const char *spec, struct bench_config *c)
{
    static const char defer[] = "+defer";
    const char *colon = strchr(spec, ':');
    size_t n;

    memset(c, 0, sizeof(*c));
    if (colon == NULL) {
        snprintf(c->model, sizeof(c->model), "%s", spec);
        return;
    }
    snprintf(c->model, sizeof(c->model), "%.*s", (int)(colon - spec), spec);
    snprintf(c->option, sizeof(c->option), "%s", colon + 1);
    n = strlen(c->option);
    if (n >= sizeof(defer) - 1 && strcmp(c->option + n - (sizeof(defer) - 1), defer) == 0) {
        c->option[n - (sizeof(defer) - 1)] = '\0';
        c->defer = true;
    }
}

/* The flag a config's option sets, by model. */
const char *bench_config_flag(const char *model)
{
    if (strcmp(model, "lf") == 0)
        return "--promotion";
    if (strcmp(model, "proactor") == 0)
        return "--dispatch";
    if (strcmp(model, "prefork") == 0)
        return "--accept-lock";
    return NULL;
}

unsigned bench_options_max_conc(const struct bench_options *o)
{
    unsigned m = o->open_connections;

    for (int i = 0; i < o->nconc; i++)
        m = o->conc[i] > m ? o->conc[i] : m;
    return m;
}

/* Prefork holds a worker thread per open connection: enough workers for the largest
 * concurrency, started up front rather than grown by the manager during a point. */
int bench_options_prefork_workers(const struct bench_options *o)
{
    int threads = o->threads > 0 ? o->threads : 1;
    int w = (int)(bench_options_max_conc(o) + (unsigned)threads - 1) / threads + 1;

    return w > 1100 ? 1100 : w;
}
