/*
 * bench_advise.c (integration) - `cabrank-bench advise` for real, pinned to two CPUs of the test's
 * mask so the rules see the same machine anywhere, on three contrasting services: tiny static
 * files over connections closed after each request, the line service with handlers that block
 * 5 ms in 30% of requests, and 1000 idle keep-alive connections beside 8 busy ones; then on
 * cabrank-ledger under cabrank-oltp-load's transfers, whose rule and verdict turn on the disk's
 * fsync and are printed, not checked. Each run must print its probe, a recommendation with
 * reasons, the verification table (the pick and two runners-up, every run measured) and its last
 * line "advise: rule=... pick=... won=yes|tie|no"; `advise --help` prints the usage, a bad flag
 * exits 2.
 * Release build: each of the three gets the rule its characteristics call for, their picks are
 * three different models, and no pick lost its verification (three rounds of 1 s runs, each
 * configuration's best kept): won=yes, or won=tie, fewer requests but its best round above the
 * runner-up's worst (the rounds overlap), which is noted. On the shared 2-core machine the close
 * alternatives (prefork and hshr for short connections, lf and hshr for blocking handlers, reactor
 * and lf for idle connections) often tie (docs/models.md and bench/results/history.md have the
 * figures). Under ASan and TSan the programs are too slowed for their figures to say anything about
 * the service: the first service alone, shorter, and only its output is checked (a skip says
 * so), which keeps the suite's time (the line and ledger services' paths run in release). wrk is a
 * test dependency. Exit 0 pass, 1 fail.
 */
#include "../../apps/common/http_client.h"
#include "bench_lab.h"

#include <sched.h>

struct service {
    const char *what;
    const char *args[10];
    const char *rule; /* the branch its characteristics call for, on 2 cores */
};

static const struct service services[] = {
    {"tiny static files, connections closed after each request",
     {"--close", NULL},
     "short-connections"},
    {"line service, 30% of handlers block 5 ms",
     {"--service", "line", "--block-share", "0.3", "--handler-ms", "5", "--connections", "32",
      NULL},
     "blocking"},
    {"1000 idle keep-alive connections beside 8 busy ones",
     {"--idle", "1000", "--connections", "8", NULL},
     "many-connections-few-cores"},
    /* Its rule depends on the disk's fsync (blocking where it takes milliseconds): NULL. */
    {"cabrank-ledger, transfers from 16 clients", {"--service", "ledger", NULL}, NULL},
};
#define NCONTRASTING 3 /* the first ones, whose picks must differ */
#define NSERVICES    (sizeof(services) / sizeof(services[0]))

/* Pins this process (and so the program and its servers) to the first two CPUs of its mask.
 * false when it has fewer. */
static bool pin_two_cpus(void)
{
    cpu_set_t mask;
    cpu_set_t two;
    int n = 0;

    if (sched_getaffinity(0, sizeof(mask), &mask) < 0)
        return false;
    CPU_ZERO(&two);
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++) {
        if (CPU_ISSET(c, &mask)) {
            CPU_SET(c, &two);
            n++;
        }
    }
    return n == 2 && sched_setaffinity(0, sizeof(two), &two) == 0;
}

/* Runs advise on s, its stdout into dir/advise-<i>.out and its text into buf (cap bytes). */
static void run_advise(const char *bench, const char *dir, const struct service *s, bool sanitized,
                       char *buf, size_t cap)
{
    char out_path[PATH_MAX];
    char err_path[PATH_MAX];
    char *argv[32];
    int n = 0;
    int status;
    pid_t pid;
    FILE *f;
    size_t got;

    snprintf(out_path, sizeof(out_path), "%s/advise-%d.out", dir, (int)(s - services));
    snprintf(err_path, sizeof(err_path), "%s/advise-%d.err", dir, (int)(s - services));
    argv[n++] = (char *)bench;
    argv[n++] = "advise";
    for (int i = 0; s->args[i] != NULL; i++)
        argv[n++] = (char *)s->args[i];
    argv[n++] = "--seconds";
    argv[n++] = sanitized ? "0.5" : "1";
    argv[n++] = "--runners";
    argv[n++] = sanitized ? "1" : "2";
    argv[n++] = "--repeat";
    argv[n++] = sanitized ? "1" : "3";
    argv[n] = NULL;
    buf[0] = '\0';
    fflush(stdout); /* the child's freopen would write what waits here into its file */
    pid = fork();
    if (pid < 0) {
        bl_fail("fork: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        if (freopen(out_path, "w", stdout) == NULL || freopen(err_path, "w", stderr) == NULL)
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    if (cr_test_wait_exit(pid, BL_RUN_TIMEOUT_MS, &status) < 0)
        bl_fail("%s: ran longer than %d s (killed)", s->what, BL_RUN_TIMEOUT_MS / 1000);
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        bl_fail("%s: exit status 0x%x", s->what, status);
    f = fopen(out_path, "r");
    if (f == NULL) {
        bl_fail("%s: %s", out_path, strerror(errno));
        return;
    }
    got = fread(buf, 1, cap - 1, f);
    buf[got] = '\0';
    fclose(f);
    printf("---- %s\n%s", s->what, buf);
}

/* Checks one run's output; fills its rule, pick and won from the last line. */
static void check_output(const struct service *s, const char *out, int runners, char *rule,
                         char *pick, char *won)
{
    const char *last = strstr(out, "\nadvise: rule=");
    int rows = 0;

    rule[0] = pick[0] = won[0] = '\0';
    /* The runners-up's rows: "  --model ..." with figures, not "failed:". */
    for (const char *p = out; (p = strstr(p, "\n  --model ")) != NULL; p++) {
        const char *eol = strchr(p + 1, '\n');
        const char *failed = strstr(p, "failed:");

        if (failed == NULL || (eol != NULL && failed > eol))
            rows++;
    }
    if (strstr(out, "probe (lf") == NULL || strstr(out, "recommendation: --model") == NULL ||
        strstr(out, "\n* --model ") == NULL || strstr(out, "\nverdict: ") == NULL)
        bl_fail("%s: no probe, recommendation, table or verdict", s->what);
    if (rows != runners)
        bl_fail("%s: %d runners-up measured, want %d", s->what, rows, runners);
    if (last == NULL ||
        sscanf(last, "\nadvise: rule=%63s pick=\"%127[^\"]\" won=%7s", rule, pick, won) != 3) {
        bl_fail("%s: no last line 'advise: rule=... pick=\"...\" won=...'", s->what);
        return;
    }
    if (strcmp(won, "yes") != 0 && strcmp(won, "tie") != 0 && strcmp(won, "no") != 0)
        bl_fail("%s: won=%s", s->what, won);
}

/* `advise --help` prints its usage and exits 0; a bad flag exits 2. */
static void check_cli(const char *bench, const char *dir)
{
    char cmd[2 * PATH_MAX + 64];
    char out[4096];
    FILE *p;
    size_t got;
    int status;

    snprintf(cmd, sizeof(cmd), "'%s' advise --help", bench);
    p = popen(cmd, "r");
    if (p == NULL) {
        bl_fail("popen: %s", strerror(errno));
        return;
    }
    got = fread(out, 1, sizeof(out) - 1, p);
    out[got] = '\0';
    status = pclose(p);
    if (status != 0 || strncmp(out, "usage: cabrank-bench advise", 27) != 0 ||
        strstr(out, "--service NAME") == NULL)
        bl_fail("advise --help: status 0x%x, output '%.60s'", status, out);
    snprintf(cmd, sizeof(cmd), "'%s' advise --service nosuch 2>%s/bad.err", bench, dir);
    status = system(cmd);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 2)
        bl_fail("advise --service nosuch: status 0x%x, want exit 2", status);
}

int main(void)
{
    char bench[PATH_MAX];
    char dir[] = "/tmp/cr-bench-advise-XXXXXX";
    static char out[NSERVICES][16384];
    char rule[NSERVICES][64];
    char pick[NSERVICES][128];
    char won[NSERVICES][8];
    bool sanitized = hc_is_sanitized();

    if (bl_setup(bench, sizeof(bench), dir) < 0)
        return 1;
    check_cli(bench, dir);
    if (!pin_two_cpus()) {
        cr_test_skip("bench_advise", "fewer than 2 CPUs in the mask");
        return 77;
    }
    /* Sanitized: the service with a branch of its own in each part of the
     * program (wrk's load, a pick, runners-up); the rest only repeat it. */
    for (size_t i = 0; i < (sanitized ? 1 : NSERVICES); i++) {
        run_advise(bench, dir, &services[i], sanitized, out[i], sizeof(out[i]));
        check_output(&services[i], out[i], sanitized ? 1 : 2, rule[i], pick[i], won[i]);
    }
    if (sanitized) {
        cr_test_skip("bench_advise rules and verdicts",
                     "a sanitizer build's figures are the sanitizer's, not the service's");
    } else {
        for (size_t i = 0; i < NSERVICES; i++) {
            char model[3][32];

            if (services[i].rule != NULL && strcmp(rule[i], services[i].rule) != 0)
                bl_fail("%s: rule %s, want %s", services[i].what, rule[i], services[i].rule);
            if (i >= NCONTRASTING)
                printf("NOTE: %s: %s, won=%s (not checked)\n", services[i].what, pick[i], won[i]);
            else if (strcmp(won[i], "tie") == 0)
                printf("NOTE: %s: the recommendation (%s) tied: fewer requests, but its rounds "
                       "overlap the runner-up's\n",
                       services[i].what, pick[i]);
            else if (strcmp(won[i], "yes") != 0)
                bl_fail("%s: the recommendation (%s) lost its verification: its best round "
                        "below the runner-up's worst",
                        services[i].what, pick[i]);
            for (size_t j = 0; j < i && i < NCONTRASTING; j++) {
                sscanf(pick[i], "--model %31s", model[0]);
                sscanf(pick[j], "--model %31s", model[1]);
                if (strcmp(model[0], model[1]) == 0)
                    bl_fail("%s and %s: the same model %s", services[i].what, services[j].what,
                            model[0]);
            }
        }
    }
    {
        char cmd[PATH_MAX + 16];

        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    }
    if (bl_failures > 0) {
        fprintf(stderr, "%d failure(s)\n", bl_failures);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
