/*
 * httpd_cores.c (integration) - cabrank-httpd uses the CPUs it may run on
 * by default: with no model flags it opens one handle set per CPU of its
 * affinity mask (the status page lists them, two threads each), and under a
 * keep-alive load from several clients at least two of its threads do a
 * real share of the work (per-thread CPU from /proc/PID/task/N/stat). Pinned
 * to one CPU, --groups auto and the default give one set; --groups N gives
 * N, whatever the CPUs; a bad --groups is refused. Exit 0 pass, 1 fail, 77
 * skip (the whole program where this process may use one CPU only).
 */
#include "httpd_client.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>

#define CLIENTS          8
#define REQUESTS_EACH    40000
#define LOAD_SECONDS_MAX 3
#define PER_CONNECTION   500
/* A thread "does work" with at least this share of the server's CPU time:
 * a follower that only takes over now and then stays below it. */
#define WORK_SHARE 0.15

static const char *const req = "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n";

static int usable_cpus(void)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) < 0)
        return 1;
    return CPU_COUNT(&set);
}

/* Pins this process to its first allowed CPU; *saved gets the mask to
 * restore. */
static int pin_to_one_cpu(cpu_set_t *saved)
{
    cpu_set_t one;

    if (sched_getaffinity(0, sizeof(*saved), saved) < 0)
        return -errno;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (CPU_ISSET(c, saved)) {
            CPU_SET(c, &one);
            break;
        }
    }
    return sched_setaffinity(0, sizeof(one), &one) < 0 ? -errno : 0;
}

/* The handle sets the status page lists, and the threads; -1 on error. */
static int status_sets(uint16_t port, int *threads)
{
    struct hc_resp r;
    const char *p;
    int sets = 0;

    *threads = 0;
    if (hc_get(port, "GET /server-status?format=json HTTP/1.1\r\nHost: t\r\n\r\n", &r) < 0 ||
        r.status != 200 || r.body == NULL) {
        hc_resp_free(&r);
        return -1;
    }
    for (p = strstr(r.body, "\"workers\":["); p != NULL && (p = strstr(p, "{\"id\":")) != NULL; p++)
        ++*threads;
    p = strstr(r.body, "\"sets\":[");
    while (p != NULL && (p = strstr(p, "{\"set\":")) != NULL) {
        sets++;
        p++;
    }
    hc_resp_free(&r);
    return sets;
}

struct load {
    uint16_t port;
    int answered;
};

/* One keep-alive client: REQUESTS_EACH requests or LOAD_SECONDS_MAX, on a
 * new connection every PER_CONNECTION (the server closes at 1000). */
static void *client_main(void *arg)
{
    struct load *l = arg;
    struct cr_test_client cl = {.fd = -1};
    struct hc_resp r = {0};
    struct timespec t0;
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < REQUESTS_EACH; i++) {
        if (i % PER_CONNECTION == 0) {
            cr_test_client_close(&cl);
            if (hc_open(&cl, l->port) < 0)
                break;
        }
        if (hc_request(&cl, req, &r, hc_tmo(5000)) < 0 || r.status != 200)
            break;
        hc_resp_free(&r);
        l->answered++;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec >= LOAD_SECONDS_MAX)
            break;
    }
    hc_resp_free(&r);
    cr_test_client_close(&cl);
    return NULL;
}

/* utime + stime of every thread of pid, into ticks[]; the count. */
static int thread_ticks(pid_t pid, long *ticks, int max)
{
    char path[64];
    DIR *d;
    struct dirent *e;
    int n = 0;

    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    d = opendir(path);
    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL && n < max) {
        char stat[512];
        char file[sizeof(path) + 300];
        FILE *f;
        unsigned long ut;
        unsigned long st;
        char *rp;

        if (e->d_name[0] == '.')
            continue;
        snprintf(file, sizeof(file), "%s/%s/stat", path, e->d_name);
        f = fopen(file, "r");
        if (f == NULL)
            continue;
        if (fgets(stat, sizeof(stat), f) != NULL && (rp = strrchr(stat, ')')) != NULL &&
            sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
            ticks[n++] = (long)(ut + st);
        fclose(f);
    }
    closedir(d);
    return n;
}

static void test_default_uses_every_cpu(const char *root, int cpus)
{
    struct load loads[CLIENTS] = {{0}};
    pthread_t th[CLIENTS];
    long before[256];
    long after[256];
    struct hc_server s;
    int threads;
    int nb;
    int na;
    long total = 0;
    int working = 0;
    int answered = 0;

    if (hc_start(&s, root, NULL) < 0) {
        hc_failures++;
        return;
    }
    CHECK(status_sets(s.port, &threads) == cpus, "default: not one handle set per CPU (%d)", cpus);
    CHECK(threads == 2 * cpus, "default: %d threads, not two per set", threads);
    nb = thread_ticks(s.pid, before, 256);
    for (int i = 0; i < CLIENTS; i++) {
        loads[i].port = s.port;
        CHECK(pthread_create(&th[i], NULL, client_main, &loads[i]) == 0, "client thread");
    }
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(th[i], NULL);
        answered += loads[i].answered;
    }
    na = thread_ticks(s.pid, after, 256);
    CHECK(answered > CLIENTS * 10, "only %d requests answered", answered);
    /* Threads neither start nor end under lf: the lists match by position. */
    CHECK(na == nb, "thread count changed: %d -> %d", nb, na);
    for (int i = 0; i < na && i < nb; i++)
        total += after[i] - before[i];
    for (int i = 0; i < na && i < nb; i++) {
        if (total > 0 && (double)(after[i] - before[i]) >= WORK_SHARE * (double)total)
            working++;
    }
    fprintf(stderr, "default: %d requests, %ld ticks, %d threads with >= %.0f%% of them\n",
            answered, total, working, WORK_SHARE * 100);
    CHECK(total >= 20, "the server used %ld ticks of CPU time, too few to tell", total);
    CHECK(working >= 2, "%d thread(s) did the work of %d CPUs", working, cpus);
    CHECK(hc_stop(&s) == 0, "default: stop");
}

/* Pinned to one CPU: the default and --groups auto give one set, --groups 3
 * gives three (an explicit count is the user's). */
static void test_one_cpu(const char *root)
{
    const char *const autog[] = {"--groups", "auto", NULL};
    const char *const three[] = {"--groups", "3", NULL};
    const char *const *const cases[] = {NULL, autog, three};
    const int want[] = {1, 1, 3};
    cpu_set_t saved;

    if (pin_to_one_cpu(&saved) < 0) {
        CHECK(0, "sched_setaffinity failed");
        return;
    }
    for (size_t c = 0; c < sizeof(want) / sizeof(want[0]); c++) {
        struct hc_server s;
        int threads;
        int sets;

        if (hc_start(&s, root, cases[c]) < 0) {
            hc_failures++;
            continue;
        }
        sets = status_sets(s.port, &threads);
        CHECK(sets == want[c], "one CPU, case %zu: %d sets, want %d", c, sets, want[c]);
        CHECK(threads == 2 * want[c], "one CPU, case %zu: %d threads", c, threads);
        CHECK(hc_stop(&s) == 0, "one CPU, case %zu: stop", c);
    }
    CHECK(sched_setaffinity(0, sizeof(saved), &saved) == 0, "restoring the mask");
}

/* A bad --groups is a usage error (status 2), naming the flag. */
static void test_bad_groups(const char *root)
{
    const char *const bad[] = {"autox", "0", "-1", "257"};
    char path[4096];

    cr_test_build_path("cabrank-httpd", path, sizeof(path));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        pid_t pid = fork();
        int st = 0;

        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);

            dup2(null, 2);
            execl(path, path, "--listen", "127.0.0.1:0", "--root", root, "--groups", bad[i],
                  (char *)NULL);
            _exit(127);
        }
        CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 2,
              "--groups %s: status %d, not 2", bad[i], WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
}

int main(void)
{
    char root[128];
    int cpus = usable_cpus();

    if (hc_mkdtemp(root, sizeof(root)) < 0 || hc_write_file(root, "a.txt", "hello\n", 6) < 0)
        return 1;
    test_one_cpu(root);
    test_bad_groups(root);
    if (cpus >= 2)
        test_default_uses_every_cpu(root, cpus);
    else
        fprintf(stderr, "httpd_cores: one CPU here; the load part needs two\n");
    (void)cr_test_rmtree(root);
    if (hc_failures > 0)
        return 1;
    return cpus >= 2 ? 0 : 77;
}
