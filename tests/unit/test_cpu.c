/*
 * test_cpu.c - the CPUs a process may use (cpu.h): the affinity count
 * follows sched_setaffinity (each Check test runs in a forked process, so
 * the mask it sets dies with it), and the cgroup quota is read from a tree
 * of files built in a temporary directory the way cgroup v2, v1 and the
 * hybrid layout lay them out: the smallest quota of the group and its
 * parents, rounded up to whole CPUs, none where "max" or -1, and a group the
 * mount does not show counted from the mount's root.
 */
#include <cabrank/cpu.h>

#include "../support/support.h"

#include <check.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TEST_TIMEOUT 10

static char root[PATH_MAX];
static char proc[PATH_MAX + 16];

/* A fresh tree: root/ for the mounts, proc for /proc/self/cgroup. */
static void tree(const char *proc_cgroup)
{
    FILE *f;

    snprintf(root, sizeof(root), "/tmp/cr-cpu-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(proc, sizeof(proc), "%s/cgroup", root);
    f = fopen(proc, "w");
    ck_assert_ptr_nonnull(f);
    fputs(proc_cgroup, f);
    fclose(f);
}

/* Writes text into root/rel, creating its directories. */
static void put(const char *rel, const char *text)
{
    char path[PATH_MAX * 2];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        ck_assert(mkdir(path, 0755) == 0 || errno == EEXIST);
        *p = '/';
    }
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static int quota(void)
{
    int n = cr_cpu_quota_count_at(proc, root);

    ck_assert_int_eq(cr_test_rmtree(root), 0);
    return n;
}

START_TEST(affinity_count_follows_the_mask)
{
    cpu_set_t all;
    cpu_set_t one;
    int first = -1;

    ck_assert_int_eq(sched_getaffinity(0, sizeof(all), &all), 0);
    ck_assert_int_eq(cr_cpu_affinity_count(), CPU_COUNT(&all));
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++) {
        if (CPU_ISSET(c, &all))
            first = c;
    }
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ck_assert_int_eq(sched_setaffinity(0, sizeof(one), &one), 0);
    ck_assert_int_eq(cr_cpu_affinity_count(), 1);
    ck_assert_int_eq(cr_cpu_usable(), 1);
    if (CPU_COUNT(&all) >= 2) {
        int second = -1;

        for (int c = first + 1; c < CPU_SETSIZE && second < 0; c++) {
            if (CPU_ISSET(c, &all))
                second = c;
        }
        CPU_SET(second, &one);
        ck_assert_int_eq(sched_setaffinity(0, sizeof(one), &one), 0);
        ck_assert_int_eq(cr_cpu_affinity_count(), 2);
    }
}
END_TEST

START_TEST(usable_is_the_smaller_of_mask_and_quota)
{
    int quota_now = cr_cpu_quota_count();
    int mask = cr_cpu_affinity_count();
    int want = quota_now > 0 && quota_now < mask ? quota_now : mask;

    ck_assert_int_ge(cr_cpu_usable(), 1);
    ck_assert_int_eq(cr_cpu_usable(), want);
}
END_TEST

START_TEST(v2_quota_rounds_up)
{
    tree("0::/a/b\n");
    put("cgroup.controllers", "cpu io memory\n");
    put("a/cpu.max", "max 100000\n");
    put("a/b/cpu.max", "150000 100000\n");
    ck_assert_int_eq(quota(), 2);
}
END_TEST

START_TEST(v2_parent_quota_bounds_the_child)
{
    tree("0::/a/b\n");
    put("cgroup.controllers", "cpu\n");
    put("cpu.max", "max 100000\n");
    put("a/cpu.max", "100000 100000\n");
    put("a/b/cpu.max", "400000 100000\n");
    ck_assert_int_eq(quota(), 1);
}
END_TEST

START_TEST(v2_max_everywhere_is_no_quota)
{
    tree("0::/a\n");
    put("cgroup.controllers", "cpu\n");
    put("a/cpu.max", "max 100000\n");
    ck_assert_int_eq(quota(), 0);
}
END_TEST

/* A container's namespace shows its own group as the mount's root while
 * /proc/self/cgroup may still name the host's path. */
START_TEST(v2_group_missing_under_the_mount_counts_from_its_root)
{
    tree("0::/system.slice/docker-1.scope\n");
    put("cgroup.controllers", "cpu\n");
    put("cpu.max", "250000 100000\n");
    ck_assert_int_eq(quota(), 3);
}
END_TEST

START_TEST(hybrid_reads_v2_under_unified_and_v1_cpu)
{
    tree("1:cpu,cpuacct:/job\n0::/job\n");
    put("unified/cgroup.controllers", "\n");
    put("unified/job/cpu.max", "max 100000\n");
    put("cpu,cpuacct/job/cpu.cfs_quota_us", "300000\n");
    put("cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
    ck_assert_int_eq(quota(), 3);
}
END_TEST

START_TEST(v1_unlimited_and_unrelated_controllers_are_no_quota)
{
    tree("4:memory:/job\n2:cpuacct:/job\n1:cpu:/job\n");
    put("cpu/job/cpu.cfs_quota_us", "-1\n");
    put("cpu/job/cpu.cfs_period_us", "100000\n");
    put("cpuacct/job/cpu.cfs_quota_us", "100000\n"); /* not the cpu controller */
    put("cpuacct/job/cpu.cfs_period_us", "100000\n");
    ck_assert_int_eq(quota(), 0);
}
END_TEST

START_TEST(garbage_and_missing_files_are_no_quota)
{
    tree("not a cgroup line\n0::relative\n0::/x\n");
    put("cgroup.controllers", "cpu\n");
    put("x/cpu.max", "lots\n");
    ck_assert_int_eq(quota(), 0);
    ck_assert_int_eq(cr_cpu_quota_count_at("/nonexistent/cgroup", "/nonexistent"), 0);
}
END_TEST

Suite *cpu_suite(void);

Suite *cpu_suite(void)
{
    Suite *s = suite_create("cpu");
    TCase *tc = tcase_create("cpu");

    tcase_set_timeout(tc, TEST_TIMEOUT);
    tcase_add_test(tc, affinity_count_follows_the_mask);
    tcase_add_test(tc, usable_is_the_smaller_of_mask_and_quota);
    tcase_add_test(tc, v2_quota_rounds_up);
    tcase_add_test(tc, v2_parent_quota_bounds_the_child);
    tcase_add_test(tc, v2_max_everywhere_is_no_quota);
    tcase_add_test(tc, v2_group_missing_under_the_mount_counts_from_its_root);
    tcase_add_test(tc, hybrid_reads_v2_under_unified_and_v1_cpu);
    tcase_add_test(tc, v1_unlimited_and_unrelated_controllers_are_no_quota);
    tcase_add_test(tc, garbage_and_missing_files_are_no_quota);
    suite_add_tcase(s, tc);
    return s;
}
