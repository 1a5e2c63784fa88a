/*
 * runner.c - the unit test runner: every suite of tests/unit/test_<comp>.c
 * (listed in the generated suites.h), each test in its own process with its
 * own timeout (Check's fork mode). Arguments name suites to run (default all).
 * $CR_TEST_QUEUE=FILE shares the suites among runners started with the same
 * arguments and FILE: each takes the next suite nobody has taken yet, so
 * tests/run.sh can split a variant over two runners that finish together
 * (a fixed split left one with 8 minutes of suites and the other with 1).
 * Tests and variants that cannot run here are recorded by cr_test_skip
 * (tests/support) in the file $CR_TEST_SKIPS (a file of the runner's own
 * when unset): the summary counts them as skipped, never as passed (a test
 * that skipped and returned is taken off the passed count). Writes
 * "passed failed skipped" to $CR_TEST_COUNTS when set, for tests/run.sh,
 * which names each failing test from Check's failure lines in the log.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/types.h>
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

/*
 * The skip list: $CR_TEST_SKIPS, or a new file of ours (its path in own, to
 * remove at the end, and exported for the tests). 0 or -errno.
 */
static int open_skips(char *own, size_t cap)
{
    const char *dir = getenv("TMPDIR");
    int fd;

    own[0] = '\0';
    if (getenv("CR_TEST_SKIPS") != NULL)
        return 0;
    snprintf(own, cap, "%s/cr-test-skips.XXXXXX", dir != NULL ? dir : "/tmp");
    fd = mkstemp(own);
    if (fd < 0) {
        own[0] = '\0';
        return -errno;
    }
    close(fd);
    return setenv("CR_TEST_SKIPS", own, 1) < 0 ? -errno : 0;
}

/*
 * Prints the skip list and returns its length; *in_tests counts the skips a
 * test process recorded (that test then returned and counts as run), the
 * others were variants the suites left out.
 */
static int report_skips(int *in_tests)
{
    const char *path = getenv("CR_TEST_SKIPS");
    FILE *f = path != NULL ? fopen(path, "r") : NULL;
    char line[512];
    int n = 0;

    *in_tests = 0;
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *what = strchr(line, ' ');

        if (what == NULL)
            continue;
        *what++ = '\0';
        if (strtol(line, NULL, 10) != (long)getpid())
            (*in_tests)++;
        printf("SKIPPED %s", what);
        n++;
    }
    fclose(f);
    return n;
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
    char own_skips[256];
    int qfd = -1;
    int run = 0;
    int failed = 0;
    int skipped;
    int skipped_in_tests;
    int passed;
    int err;

    for (size_t i = 0; i < NSUITES; i++) {
        if (is_selected(suites[i].name, argc, argv))
            picked[npicked++] = &suites[i];
    }
    if (npicked == 0) {
        fprintf(stderr, "runner: no such suite\n");
        return 2;
    }
    err = open_skips(own_skips, sizeof(own_skips));
    if (err < 0) {
        fprintf(stderr, "runner: skip list: %s\n", strerror(-err));
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
    fflush(stdout);
    skipped = report_skips(&skipped_in_tests);
    if (own_skips[0] != '\0')
        unlink(own_skips);
    passed = run - failed - skipped_in_tests;
    if (passed < 0)
        passed = 0;
    printf("runner: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
    if (counts != NULL) {
        FILE *f = fopen(counts, "w");

        if (f != NULL) {
            fprintf(f, "%d %d %d\n", passed, failed, skipped);
            fclose(f);
        }
    }
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
