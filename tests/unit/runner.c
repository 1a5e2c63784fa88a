/*
 * runner.c - the unit test runner: every suite of tests/unit/test_<comp>.c
 * (listed in the generated suites.h), each test in its own process with its
 * own timeout (Check's fork mode). Arguments name suites to run (default all).
 * $CR_TEST_SHARD=k/n runs every n-th of those from the k-th (0-based), so
 * tests/run.sh can split a variant over two runners. Writes "passed failed"
 * to $CR_TEST_COUNTS when set, for tests/run.sh.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* CR_TEST_SHARD "k/n" into *k, *n: 0 and 1 when unset; -1 if malformed. */
static int parse_shard(unsigned *k, unsigned *n)
{
    const char *s = getenv("CR_TEST_SHARD");

    *k = 0;
    *n = 1;
    if (s == NULL)
        return 0;
    if (sscanf(s, "%u/%u", k, n) != 2 || *n == 0 || *k >= *n)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    SRunner *sr = NULL;
    const char *counts = getenv("CR_TEST_COUNTS");
    unsigned shard;
    unsigned shards;
    unsigned selected = 0;
    int run;
    int failed;

    if (parse_shard(&shard, &shards) < 0) {
        fprintf(stderr, "runner: CR_TEST_SHARD must be k/n with k < n\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof(suites) / sizeof(suites[0]); i++) {
        if (!is_selected(suites[i].name, argc, argv))
            continue;
        if (selected++ % shards != shard)
            continue;
        if (sr == NULL)
            sr = srunner_create(suites[i].make());
        else
            srunner_add_suite(sr, suites[i].make());
    }
    if (sr == NULL) {
        fprintf(stderr, "runner: no such suite\n");
        return 2;
    }
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    run = srunner_ntests_run(sr);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (counts != NULL) {
        FILE *f = fopen(counts, "w");

        if (f != NULL) {
            fprintf(f, "%d %d\n", run - failed, failed);
            fclose(f);
        }
    }
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
