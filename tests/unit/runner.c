/*
 * runner.c - the unit test runner: every suite of tests/unit/test_<comp>.c
 * (listed in the generated suites.h), each test in its own process with its
 * own timeout (Check's fork mode). Arguments name suites to run (default all).
 * $CR_TEST_QUEUE=FILE shares the suites among runners started with the same
 * arguments and FILE: each takes the next suite nobody has taken yet, so
 * tests/run.sh can split a variant over two runners that finish together
 * (a fixed split left one with 8 minutes of suites and the other with 1).
 * Writes "passed failed" to $CR_TEST_COUNTS when set, for tests/run.sh.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define X(name) Suite *name##_suite(void);
#include "suites.h"
#undef X

struct entry {
    const char *name;
    Suite *(*make)(void);
};

static const struct entry suites[] = {
#define X(name) {#name, name##_suite},
#include "suites.h"
#undef X
};

#define NSUITES (sizeof(suites) / sizeof(suites[0]))

static int is_selected(const char *name, int argc, char **argv)
{
    if (argc < 2)
        return 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], name) == 0)
            return 1;
    }
    return 0;
}

/*
 * The next index of the shared queue (a count in the file, under flock), or
 * -errno. The file starts empty: the first taker gets 0.
 */
static long take_next(int fd)
{
    char buf[32] = "";
    long next = 0;
    ssize_t n;
    int len;
    long err = 0;

    if (flock(fd, LOCK_EX) < 0)
        return -errno;
    n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n < 0)
        err = -errno;
    else if (n > 0)
        next = strtol(buf, NULL, 10);
    len = snprintf(buf, sizeof(buf), "%ld\n", next + 1);
    if (err == 0 && pwrite(fd, buf, (size_t)len, 0) != len)
        err = -EIO;
    (void)flock(fd, LOCK_UN);
    return err < 0 ? err : next;
}

/* Runs one suite in its own runner; adds to *run and *failed. */
static void run_suite(const struct entry *e, int *run, int *failed)
{
    SRunner *sr = srunner_create(e->make());

    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    *run += srunner_ntests_run(sr);
    *failed += srunner_ntests_failed(sr);
    srunner_free(sr);
}

int main(int argc, char **argv)
{
    const char *counts = getenv("CR_TEST_COUNTS");
    const char *queue = getenv("CR_TEST_QUEUE");
    const struct entry *picked[NSUITES];
    size_t npicked = 0;
    int qfd = -1;
    int run = 0;
    int failed = 0;

    for (size_t i = 0; i < NSUITES; i++) {
        if (is_selected(suites[i].name, argc, argv))
            picked[npicked++] = &suites[i];
    }
    if (npicked == 0) {
        fprintf(stderr, "runner: no such suite\n");
        return 2;
    }
    if (queue != NULL) {
        qfd = open(queue, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (qfd < 0) {
            fprintf(stderr, "runner: CR_TEST_QUEUE %s: %s\n", queue, strerror(errno));
            return 2;
        }
    }
    for (size_t i = 0; i < npicked; i++) {
        long k = (long)i;

        if (qfd >= 0) {
            k = take_next(qfd);
            if (k < 0) {
                fprintf(stderr, "runner: CR_TEST_QUEUE %s: %s\n", queue, strerror((int)-k));
                failed++;
                break;
            }
            if ((size_t)k >= npicked)
                break; /* the others have taken the rest */
        }
        run_suite(picked[k], &run, &failed);
    }
    if (qfd >= 0)
        close(qfd);
    if (counts != NULL) {
        FILE *f = fopen(counts, "w");

        if (f != NULL) {
            fprintf(f, "%d %d\n", run - failed, failed);
            fclose(f);
        }
    }
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
