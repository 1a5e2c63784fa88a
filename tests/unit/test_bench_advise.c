/*
 * test_bench_advise.c - the selection guideline of `cabrank-bench advise`
 * (apps/bench/advise_rules.c) over synthetic characteristics: tiny static files fetched over short
 * connections, handlers that block 5 ms in 30% of requests, and many idle keep-alive connections
 * get three different models with the flags and reasons each branch gives; one core, unknown
 * blocking, many cores, the thresholds' edges and the pool's cap; the runners-up are never the
 * pick; the flags as cabrank-httpd spells them; the verification's verdicts (won, a tie when the
 * rounds overlap, lost).
 */
#include "../../apps/bench/advise.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Characteristics as the probes measured them on the 2-core machine (docs/models.md). */
static struct advise_traits tiny_static(void)
{
    return (struct advise_traits){.cores = 2,
                                  .conn_rate = 17000,
                                  .req_per_conn = 1,
                                  .service_us = 20,
                                  .cpu_us = 16,
                                  .block_share = 0,
                                  .block_us = NAN,
                                  .active = 16,
                                  .idle = 0,
                                  .mem_per_conn_kb = 1.2};
}

static struct advise_traits blocking(void)
{
    return (struct advise_traits){.cores = 2,
                                  .conn_rate = 32,
                                  .req_per_conn = 70,
                                  .service_us = 63,
                                  .cpu_us = 25,
                                  .block_share = 0.3,
                                  .block_us = 5200,
                                  .active = 32,
                                  .idle = 0,
                                  .mem_per_conn_kb = 1.2};
}

static struct advise_traits idle_many(void)
{
    return (struct advise_traits){.cores = 2,
                                  .conn_rate = 8,
                                  .req_per_conn = 9000,
                                  .service_us = 16,
                                  .cpu_us = 8,
                                  .block_share = 0.004,
                                  .block_us = 2700,
                                  .active = 8,
                                  .idle = 1000,
                                  .mem_per_conn_kb = 1.2};
}

static const char *flags_of(const struct advise_choice *c)
{
    static char buf[256];

    bench_advise_flags(c, buf, sizeof(buf));
    return buf;
}

static void check_runners(const struct advise_rec *r)
{
    char pick[256];

    snprintf(pick, sizeof(pick), "%s", flags_of(&r->pick));
    ck_assert_int_ge(r->nrunners, 2);
    for (int i = 0; i < r->nrunners; i++)
        ck_assert_str_ne(flags_of(&r->runners[i]), pick);
}

START_TEST(tiny_static_files_over_short_connections_get_prefork_per_core)
{
    struct advise_traits t = tiny_static();
    struct advise_rec r;

    bench_advise_decide(&t, &r);
    ck_assert_str_eq(r.rule, "short-connections");
    ck_assert_str_eq(flags_of(&r.pick), "--model prefork --workers 2");
    ck_assert_ptr_nonnull(strstr(r.reasons, "Leader/Followers with processes"));
    ck_assert_ptr_nonnull(strstr(r.reasons, "many connections per second (17000/s"));
    /* The alternatives of the guideline's steps: a Job Queue, a Forking Server. */
    ck_assert_str_eq(flags_of(&r.runners[0]), "--model hshr");
    ck_assert_str_eq(flags_of(&r.runners[1]), "--model forking");
    check_runners(&r);
}
END_TEST

START_TEST(handlers_that_block_get_a_pool_sized_for_them_with_eager_promotion)
{
    struct advise_traits t = blocking();
    struct advise_rec r;

    bench_advise_decide(&t, &r);
    ck_assert_str_eq(r.rule, "blocking");
    /* 32 in flight, nearly all of the service time blocked: 32 + one per core. */
    ck_assert_str_eq(flags_of(&r.pick), "--model lf --threads 34 --groups 1 --promotion-delay 0");
    ck_assert_ptr_nonnull(strstr(r.reasons, "30% of requests took 5.2 ms"));
    ck_assert_ptr_nonnull(strstr(r.reasons, "Little's law"));
    ck_assert_ptr_nonnull(strstr(r.reasons, "Half-Sync/Half-Reactive"));
    ck_assert_str_eq(flags_of(&r.runners[0]), "--model hshr --threads 34");
    check_runners(&r);
}
END_TEST

START_TEST(many_idle_keepalive_connections_on_two_cores_get_the_reactor)
{
    struct advise_traits t = idle_many();
    struct advise_rec r;

    bench_advise_decide(&t, &r);
    ck_assert_str_eq(r.rule, "many-connections-few-cores");
    ck_assert_str_eq(flags_of(&r.pick), "--model reactor");
    ck_assert_ptr_nonnull(strstr(r.reasons, "1008 connections open (1000 of them idle)"));
    ck_assert_ptr_nonnull(strstr(r.reasons, "one Reactor thread"));
    check_runners(&r);
}
END_TEST

START_TEST(the_three_services_get_three_models)
{
    struct advise_traits t[3] = {tiny_static(), blocking(), idle_many()};
    struct advise_rec r[3];

    for (int i = 0; i < 3; i++)
        bench_advise_decide(&t[i], &r[i]);
    ck_assert_str_ne(r[0].pick.model, r[1].pick.model);
    ck_assert_str_ne(r[0].pick.model, r[2].pick.model);
    ck_assert_str_ne(r[1].pick.model, r[2].pick.model);
}
END_TEST

START_TEST(one_core_gets_the_reactor_unless_handlers_block)
{
    struct advise_traits t = tiny_static();
    struct advise_rec r;

    t.cores = 1;
    bench_advise_decide(&t, &r);
    ck_assert_str_eq(r.rule, "one-core");
    ck_assert_str_eq(flags_of(&r.pick), "--model reactor");
    check_runners(&r);
    /* A blocked handler still needs its own thread on one core. */
    t = blocking();
    t.cores = 1;
    bench_advise_decide(&t, &r);
    ck_assert_str_eq(r.rule, "blocking");
    ck_assert_str_eq(flags_of(&r.pick), "--model lf --threads 33 --groups 1 --promotion-delay 0");
    /* No cores reported counts as one. */
    t = idle_many();
    t.cores = 0;
    bench_advise_decide(&t, &r);
    ck_assert_str_eq(r.rule, "one-core");
}
END_TEST

START_TEST(unknown_blocking_is_taken_as_blocking)
{
    struct advise_traits t = tiny_static();
    struct advise_rec r;

    t.block_share = NAN;
    t.active = 4;
    bench_advise_decide(&t, &r);
    ck_assert_str_eq(r.rule, "blocking-unknown");
    /* The whole service time counted blocked, and at least 4 threads per core. */
    ck_assert_str_eq(flags_of(&r.pick), "--model lf --threads 8 --groups 1 --promotion-delay 0");
    ck_assert_ptr_nonnull(strstr(r.reasons, "unknown"));
    check_runners(&r);
}
END_TEST

START_TEST(many_cores_get_leader_followers_per_core)
{
    struct advise_traits t = idle_many();
    struct advise_rec r;

    t.cores = 8;
    bench_advise_decide(&t, &r);
    ck_assert_str_eq(r.rule, "many-connections");
    ck_assert_str_eq(flags_of(&r.pick), "--model lf --groups auto");
    ck_assert_str_eq(flags_of(&r.runners[0]), "--model reactor");
    /* Long keep-alive connections, few of them: still kept in the handle set. */
    t.idle = 0;
    bench_advise_decide(&t, &r);
    ck_assert_str_eq(r.rule, "many-connections");
    ck_assert_ptr_nonnull(strstr(r.reasons, "Connections live long"));
    /* Short connections on 8 cores: a worker process per core. */
    t = tiny_static();
    t.cores = 8;
    bench_advise_decide(&t, &r);
    ck_assert_str_eq(flags_of(&r.pick), "--model prefork --workers 8");
}
END_TEST

START_TEST(thresholds_edges)
{
    struct advise_traits t = blocking();
    struct advise_rec r;

    /* Below the share, or blocked for less than a millisecond: short handlers. */
    t.block_share = ADVISE_BLOCK_SHARE_MIN / 2;
    bench_advise_decide(&t, &r);
    ck_assert_str_eq(r.rule, "many-connections-few-cores");
    t.block_share = ADVISE_BLOCK_SHARE_MIN;
    bench_advise_decide(&t, &r);
    ck_assert_str_eq(r.rule, "blocking");
    t.block_us = ADVISE_BLOCK_MIN_US / 2;
    bench_advise_decide(&t, &r);
    ck_assert_str_ne(r.rule, "blocking");
    /* Short connections, but more open than a task each can hold: the handle set. */
    t = tiny_static();
    t.req_per_conn = ADVISE_SHORT_CONN_REQS;
    bench_advise_decide(&t, &r);
    ck_assert_str_eq(r.rule, "short-connections");
    t.req_per_conn = ADVISE_SHORT_CONN_REQS + 0.5;
    bench_advise_decide(&t, &r);
    ck_assert_str_eq(r.rule, "many-connections-few-cores");
    t = tiny_static();
    t.idle = ADVISE_TASK_CONNS_MAX;
    bench_advise_decide(&t, &r);
    ck_assert_str_eq(r.rule, "many-connections-few-cores");
    /* The pool is capped. */
    t = blocking();
    t.active = 1024;
    bench_advise_decide(&t, &r);
    ck_assert_int_eq(r.pick.threads, ADVISE_THREADS_MAX);
}
END_TEST

START_TEST(flags_as_the_server_spells_them)
{
    struct advise_choice c = {.model = "lf", .per_core = true};

    ck_assert_str_eq(flags_of(&c), "--model lf --groups auto");
    c = (struct advise_choice){.model = "hshr", .threads = 12};
    ck_assert_str_eq(flags_of(&c), "--model hshr --threads 12");
    c = (struct advise_choice){.model = "prefork", .workers = 3};
    ck_assert_str_eq(flags_of(&c), "--model prefork --workers 3");
    c = (struct advise_choice){.model = "reactor"};
    ck_assert_str_eq(flags_of(&c), "--model reactor");
}
END_TEST

static struct advise_result result(double rps, double worst, double cpu)
{
    return (struct advise_result){.rps = rps, .worst_rps = worst, .cpu_us = cpu, .p99_us = 100};
}

START_TEST(verdicts_won_tie_lost)
{
    struct advise_result res[3];
    int best;

    /* The most requests wins, whatever the CPU. */
    res[0] = result(1000, 1000, 50);
    res[1] = result(900, 900, 10);
    res[2] = result(990, 990, 10);
    ck_assert_int_eq(bench_advise_judge(res, 3, &best), ADVISE_WON);
    ck_assert_int_eq(best, 2);
    /* Within 3%: less CPU per request decides. */
    res[0] = result(980, 980, 9);
    ck_assert_int_eq(bench_advise_judge(res, 3, &best), ADVISE_WON);
    res[0] = result(980, 980, 11);
    ck_assert_int_eq(bench_advise_judge(res, 3, &best), ADVISE_LOST);
    /* Fewer, but its best round reached the runner-up's worst: a tie, not a win; below, a loss. */
    res[0] = result(900, 850, 11);
    res[2] = result(990, 792, 10);
    ck_assert_int_eq(bench_advise_judge(res, 3, &best), ADVISE_TIE);
    res[0] = result(792, 700, 11);
    ck_assert_int_eq(bench_advise_judge(res, 3, &best), ADVISE_TIE);
    res[0] = result(791, 790, 11);
    ck_assert_int_eq(bench_advise_judge(res, 3, &best), ADVISE_LOST);
    ck_assert(fabs(bench_advise_spread(&res[2]) - 0.2) < 1e-9);
    /* A pick that failed or had errors never wins; runners-up that failed are beaten. */
    res[0] = result(2000, 2000, 1);
    res[0].errors = 3;
    ck_assert_int_eq(bench_advise_judge(res, 3, &best), ADVISE_LOST);
    res[0].errors = 0;
    res[0].err = -ETIMEDOUT;
    ck_assert_int_eq(bench_advise_judge(res, 3, &best), ADVISE_LOST);
    res[0].err = 0;
    res[1].err = res[2].err = -ECHILD;
    res[0] = result(10, 10, 1);
    ck_assert_int_eq(bench_advise_judge(res, 3, &best), ADVISE_WON);
    ck_assert_int_eq(best, -1);
}
END_TEST

Suite *bench_advise_suite(void);
Suite *bench_advise_suite(void)
{
    Suite *s = suite_create("bench_advise");
    TCase *tc = tcase_create("rules");

    tcase_add_test(tc, tiny_static_files_over_short_connections_get_prefork_per_core);
    tcase_add_test(tc, handlers_that_block_get_a_pool_sized_for_them_with_eager_promotion);
    tcase_add_test(tc, many_idle_keepalive_connections_on_two_cores_get_the_reactor);
    tcase_add_test(tc, the_three_services_get_three_models);
    tcase_add_test(tc, one_core_gets_the_reactor_unless_handlers_block);
    tcase_add_test(tc, unknown_blocking_is_taken_as_blocking);
    tcase_add_test(tc, many_cores_get_leader_followers_per_core);
    tcase_add_test(tc, thresholds_edges);
    tcase_add_test(tc, flags_as_the_server_spells_them);
    tcase_add_test(tc, verdicts_won_tie_lost);
    suite_add_tcase(s, tc);
    return s;
}
