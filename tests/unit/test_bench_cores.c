/*
 * test_bench_cores.c - cabrank-bench's --cores plan and pinning (apps/bench/cores.c): which
 * core counts run and which are skipped over a synthetic CPU set (the server on the first k
 * usable CPUs, the load on the others, holes in the mask kept); the skip text, word for word;
 * a child pinned to one CPU plans nothing and says so; pinning moves this process to the
 * load's CPUs and a server child to the server's, and unpinning undoes both. The affinity
 * tests run in forked children, so the test process keeps its mask.
 */
#include "../../apps/bench/cores.h"

#include <check.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static cpu_set_t set_of(const int *cpus, int n)
{
    cpu_set_t s;

    CPU_ZERO(&s);
    for (int i = 0; i < n; i++)
        CPU_SET(cpus[i], &s);
    return s;
}

START_TEST(plan_runs_what_fits_and_skips_the_rest)
{
    static const int cpus[] = {0, 2, 5, 7};
    static const unsigned want[] = {8, 2, 1, 4, 2, 3};
    cpu_set_t usable = set_of(cpus, 4);
    cpu_set_t server;
    cpu_set_t load;
    struct bench_cores p;
    char text[256];

    bench_cores_plan_from(&usable, want, 6, &p);
    ck_assert_int_eq(p.ncpus, 4);
    /* Sorted, repeats dropped; 4 and 8 leave no CPU for the load. */
    ck_assert_int_eq(p.nrun, 3);
    ck_assert_uint_eq(p.run[0], 1);
    ck_assert_uint_eq(p.run[1], 2);
    ck_assert_uint_eq(p.run[2], 3);
    ck_assert_int_eq(p.nskipped, 2);
    ck_assert_uint_eq(p.skipped[0], 4);
    ck_assert_uint_eq(p.skipped[1], 8);
    bench_cores_skip_text(&p, text, sizeof(text));
    ck_assert_str_eq(text, "skipped 4,8: this machine lets cabrank-bench use 4 CPUs; each point "
                           "needs k for the server and at least one for the load");
    /* k = 2: the first two usable CPUs (0 and 2) serve, the others (5 and 7) load. */
    bench_cores_sets(&p, 2, &server, &load);
    ck_assert_int_eq(CPU_COUNT(&server), 2);
    ck_assert(CPU_ISSET(0, &server) && CPU_ISSET(2, &server));
    ck_assert_int_eq(CPU_COUNT(&load), 2);
    ck_assert(CPU_ISSET(5, &load) && CPU_ISSET(7, &load));
    bench_cores_describe(&p, text, sizeof(text));
    ck_assert_msg(strncmp(text, "k = 1,2,3 of the 4 CPUs cabrank-bench may use", 45) == 0, "%s",
                  text);
    ck_assert_ptr_nonnull(strstr(text, "; skipped 4,8: "));
    /* Everything fits: no skip text. */
    bench_cores_plan_from(&usable, want + 2, 1, &p);
    bench_cores_skip_text(&p, text, sizeof(text));
    ck_assert_str_eq(text, "");
    ck_assert_ptr_null(strstr((bench_cores_describe(&p, text, sizeof(text)), text), "skipped"));
}
END_TEST

/* Runs fn in a forked child, which exits 0 when every check passed. */
static void in_child(void (*fn)(void))
{
    pid_t pid = fork();
    int status;

    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        fn();
        _exit(0);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);
}

#define CHILD_CHECK(cond)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond);                             \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

/* The first CPU of this process's mask. */
static int first_cpu(void)
{
    cpu_set_t s;

    CPU_ZERO(&s);
    if (sched_getaffinity(0, sizeof(s), &s) < 0)
        return -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &s))
            return c;
    return -1;
}

static void one_cpu_skips_everything(void)
{
    static const unsigned want[] = {1, 2};
    int cpu = first_cpu();
    cpu_set_t one;
    struct bench_cores p;
    char text[256];

    CHILD_CHECK(cpu >= 0);
    one = set_of(&cpu, 1);
    CHILD_CHECK(sched_setaffinity(0, sizeof(one), &one) == 0);
    CHILD_CHECK(bench_cores_plan(want, 2, &p) == 0);
    CHILD_CHECK(p.ncpus == 1 && p.nrun == 0 && p.nskipped == 2);
    bench_cores_skip_text(&p, text, sizeof(text));
    CHILD_CHECK(strcmp(text, "skipped 1,2: this machine lets cabrank-bench use 1 CPU; each point "
                             "needs k for the server and at least one for the load") == 0);
    CHILD_CHECK(bench_cores_pin(&p, 1) == -EINVAL);
}

START_TEST(one_usable_cpu_runs_nothing_and_says_so)
{
    in_child(one_cpu_skips_everything);
}
END_TEST

/* The mask of pid (0: this process) as a set. */
static cpu_set_t mask_of(pid_t pid)
{
    cpu_set_t s;

    CPU_ZERO(&s);
    if (sched_getaffinity(pid, sizeof(s), &s) < 0)
        _exit(2);
    return s;
}

static void pin_moves_load_and_servers(void)
{
    static const unsigned want[] = {1};
    struct bench_cores p;
    cpu_set_t server;
    cpu_set_t load;
    cpu_set_t now;
    int fds[2];
    pid_t pid;
    int status;

    CHILD_CHECK(bench_cores_plan(want, 1, &p) == 0);
    CHILD_CHECK(p.nrun == 1);
    bench_cores_sets(&p, 1, &server, &load);
    /* Not pinned: a server child keeps the whole mask. */
    CHILD_CHECK(bench_cores_enter_server() == 0);
    now = mask_of(0);
    CHILD_CHECK(CPU_EQUAL(&now, &p.usable));
    CHILD_CHECK(bench_cores_pin(&p, 1) == 0);
    now = mask_of(0);
    CHILD_CHECK(CPU_EQUAL(&now, &load));
    /* A server child moves to the server's CPU, and what it forks stays there. */
    CHILD_CHECK(pipe(fds) == 0);
    pid = fork();
    CHILD_CHECK(pid >= 0);
    if (pid == 0) {
        cpu_set_t mine;
        char ok;

        if (bench_cores_enter_server() < 0)
            _exit(3);
        mine = mask_of(0);
        ok = CPU_EQUAL(&mine, &server) ? 'y' : 'n';
        if (write(fds[1], &ok, 1) != 1)
            _exit(4);
        _exit(0);
    }
    {
        char ok = 0;

        CHILD_CHECK(read(fds[0], &ok, 1) == 1 && ok == 'y');
    }
    CHILD_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHILD_CHECK(bench_cores_unpin(&p) == 0);
    now = mask_of(0);
    CHILD_CHECK(CPU_EQUAL(&now, &p.usable));
    CHILD_CHECK(bench_cores_enter_server() == 0);
    now = mask_of(0);
    CHILD_CHECK(CPU_EQUAL(&now, &p.usable));
}

START_TEST(pin_moves_the_load_and_the_servers)
{
    cpu_set_t s;

    CPU_ZERO(&s);
    ck_assert_int_eq(sched_getaffinity(0, sizeof(s), &s), 0);
    if (CPU_COUNT(&s) < 2) {
        fprintf(stderr, "pin_moves_the_load_and_the_servers: one CPU here, not checked\n");
        return;
    }
    in_child(pin_moves_load_and_servers);
}
END_TEST

Suite *bench_cores_suite(void);

Suite *bench_cores_suite(void)
{
    Suite *s = suite_create("bench_cores");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, plan_runs_what_fits_and_skips_the_rest);
    tcase_add_test(tc, one_usable_cpu_runs_nothing_and_says_so);
    tcase_add_test(tc, pin_moves_the_load_and_the_servers);
    suite_add_tcase(s, tc);
    return s;
}
