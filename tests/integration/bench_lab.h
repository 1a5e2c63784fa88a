/*
 * bench_lab.h (integration) - what the cabrank-bench tests share: the
 * results.csv header they expect (spelled out here, not taken from the
 * program under test), a failure count, finding the program and wrk, one
 * run of the program to its end, and the walk over the results.csv it wrote.
 * Header-only, for test programs of one file each; single-threaded.
 */
#ifndef CABRANK_TESTS_BENCH_LAB_H
#define CABRANK_TESTS_BENCH_LAB_H

#include "support.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BL_CSV_HEADER                                                                              \
    "workload,server,config,concurrency,rate,rps,p50_us,p90_us,p99_us,p999_us,cpu_us_per_req,"     \
    "ctxsw_per_req,peak_rss_kb,errors,seconds,srv_user_us_per_req,srv_sys_us_per_req,cores,"       \
    "loadavg_before,other_cpu_before,other_cpu_during,noisy"
#define BL_CSV_FIELDS     22
#define BL_RUN_TIMEOUT_MS 50000

static int bl_failures;

static void bl_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bl_fail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    bl_failures++;
}

/* Finds cabrank-bench (its path into bench, cap bytes) and wrk, and makes
 * the temporary directory of template dir. 0, or -1 said on stderr. */
static inline int bl_setup(char *bench, size_t cap, char *dir)
{
    signal(SIGPIPE, SIG_IGN);
    cr_test_build_path("cabrank-bench", bench, cap);
    if (access(bench, X_OK) != 0) {
        fprintf(stderr, "FAIL: %s: %s\n", bench, strerror(errno));
        return -1;
    }
    if (system("command -v wrk >/dev/null 2>&1") != 0) {
        fprintf(stderr, "FAIL: wrk is missing (make deps-test installs it)\n");
        return -1;
    }
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return -1;
    }
    return 0;
}

/* Runs argv (argv[0]: the program) to its end, at most BL_RUN_TIMEOUT_MS,
 * its stderr into err_path (NULL: ours); a failure unless it exits 0. */
static inline void bl_run(char *const argv[], const char *err_path)
{
    pid_t pid = fork();
    int status;

    if (pid < 0) {
        bl_fail("fork: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        if (err_path != NULL && freopen(err_path, "w", stderr) == NULL)
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    if (cr_test_wait_exit(pid, BL_RUN_TIMEOUT_MS, &status) < 0)
        bl_fail("cabrank-bench ran longer than %d s (killed)", BL_RUN_TIMEOUT_MS / 1000);
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        bl_fail("cabrank-bench exit status 0x%x", status);
}

/* Hands each row of dir/results.csv to row(fields, arg); a failure when the
 * file is unreadable, has another header or field count, or no rows. */
static inline void bl_check_csv(const char *dir, void (*row)(char **f, void *arg), void *arg)
{
    char path[PATH_MAX + 16];
    char why[PATH_MAX + 64];
    int n;

    snprintf(path, sizeof(path), "%s/results.csv", dir);
    n = cr_test_csv_rows(path, BL_CSV_HEADER, BL_CSV_FIELDS, row, arg, why, sizeof(why));
    if (n < 0)
        bl_fail("%s", why);
    else if (n == 0)
        bl_fail("results.csv is empty");
}

#endif /* CABRANK_TESTS_BENCH_LAB_H */
