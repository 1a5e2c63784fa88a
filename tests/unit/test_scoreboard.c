/*
 * test_scoreboard.c - the process models' scoreboard (src/pool/scoreboard.c):
 * claim hands out distinct free slots in state STARTING with zeroed counters
 * and a new tag, -ENOSPC when full; release frees; evict frees the oldest
 * generation's stopping worker and changes its tag (owns fails for it);
 * copy returns the slots in use (at most max, the count in any case) with
 * busy_ns; count filters by generation and state; what a forked child writes
 * the parent reads (shared memory); the capacity formula.
 */
#include "pool/scoreboard_internal.h"

#include <cabrank/clock.h>

#include <check.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TEST_TIMEOUT 10

static struct cr__scoreboard *new_board(unsigned n)
{
    struct cr__scoreboard *sb = NULL;

    ck_assert_int_eq(cr__scoreboard_create(&sb, n), 0);
    ck_assert_ptr_nonnull(sb);
    ck_assert_uint_eq(cr__scoreboard_size(sb), n);
    return sb;
}

START_TEST(capacity_formula_leaves_room_for_draining_generations)
{
    struct cr__scoreboard *sb = (void *)1;

    ck_assert_uint_eq(CR__SCOREBOARD_SLOTS(1), 8);
    ck_assert_uint_eq(CR__SCOREBOARD_SLOTS(256), 1028);
    ck_assert_int_eq(cr__scoreboard_create(&sb, 0), -EINVAL);
    ck_assert_ptr_null(sb);
    sb = new_board(CR__SCOREBOARD_SLOTS(3));
    ck_assert_uint_eq(cr__scoreboard_size(sb), 16);
    /* A fresh board is all free. */
    ck_assert_uint_eq(cr__scoreboard_copy(sb, NULL, 0), 0);
    /* Four full generations of 3 fit, with room to spare. */
    for (unsigned gen = 1; gen <= 4; gen++) {
        for (int w = 0; w < 3; w++)
            ck_assert_int_ge(cr__scoreboard_claim(sb, gen), 0);
    }
    ck_assert_uint_eq(cr__scoreboard_copy(sb, NULL, 0), 12);
    cr__scoreboard_destroy(sb);
    cr__scoreboard_destroy(NULL);
}
END_TEST

START_TEST(claim_hands_out_each_free_slot_once_then_enospc)
{
    struct cr__scoreboard *sb = new_board(4);
    uint32_t tags[4];
    bool seen[4] = {false};

    for (int k = 0; k < 4; k++) {
        int i = cr__scoreboard_claim(sb, 1);
        struct cr__slot *s;

        ck_assert_int_ge(i, 0);
        ck_assert_int_lt(i, 4);
        ck_assert(!seen[i]);
        seen[i] = true;
        s = cr__scoreboard_slot(sb, (unsigned)i);
        ck_assert_int_eq(s->state, CR_WORKER_STARTING);
        ck_assert_uint_eq(s->generation, 1);
        ck_assert_int_eq(s->stop, 0);
        tags[i] = s->tag;
        ck_assert_uint_ne(tags[i], 0);
        ck_assert(cr__scoreboard_owns(sb, (unsigned)i, tags[i]));
    }
    ck_assert_int_eq(cr__scoreboard_claim(sb, 1), -ENOSPC);

    /* A dirty slot, released and claimed again: zeroed, new tag. */
    cr__scoreboard_slot(sb, 2)->requests = 99;
    cr__scoreboard_slot(sb, 2)->stop = 1;
    cr__scoreboard_release(sb, 2);
    ck_assert_int_eq(cr__scoreboard_slot(sb, 2)->state, CR_WORKER_FREE);
    ck_assert_int_eq(cr__scoreboard_claim(sb, 5), 2);
    ck_assert_uint_eq(cr__scoreboard_slot(sb, 2)->requests, 0);
    ck_assert_int_eq(cr__scoreboard_slot(sb, 2)->stop, 0);
    ck_assert_uint_eq(cr__scoreboard_slot(sb, 2)->generation, 5);
    ck_assert(!cr__scoreboard_owns(sb, 2, tags[2]));
    ck_assert(cr__scoreboard_owns(sb, 2, cr__scoreboard_slot(sb, 2)->tag));
    ck_assert(!cr__scoreboard_owns(sb, 4, tags[0]));
    cr__scoreboard_destroy(sb);
}
END_TEST

START_TEST(evict_frees_oldest_stopping_worker)
{
    struct cr__scoreboard *sb = new_board(4);
    unsigned gens[4] = {3, 2, 2, 4};
    uint32_t tag1;

    for (unsigned k = 0; k < 4; k++)
        ck_assert_int_eq(cr__scoreboard_claim(sb, gens[k]), (int)k);
    /* Nothing stopping: nothing to evict. */
    ck_assert_int_eq(cr__scoreboard_evict(sb), -ENOSPC);
    cr__scoreboard_slot(sb, 0)->state = CR_WORKER_STOPPING; /* gen 3 */
    cr__scoreboard_slot(sb, 1)->state = CR_WORKER_BUSY;     /* gen 2, not stopping */
    cr__scoreboard_slot(sb, 2)->state = CR_WORKER_STOPPING; /* gen 2 */
    tag1 = cr__scoreboard_slot(sb, 2)->tag;
    ck_assert(cr__scoreboard_owns(sb, 2, tag1));
    ck_assert_int_eq(cr__scoreboard_evict(sb), 2);
    ck_assert(!cr__scoreboard_owns(sb, 2, tag1));
    ck_assert_int_eq(cr__scoreboard_slot(sb, 2)->state, CR_WORKER_FREE);
    ck_assert_int_eq(cr__scoreboard_claim(sb, 5), 2);
    ck_assert_int_eq(cr__scoreboard_evict(sb), 0);
    ck_assert_int_eq(cr__scoreboard_evict(sb), -ENOSPC);
    cr__scoreboard_destroy(sb);
}
END_TEST

START_TEST(copy_returns_slots_in_use_and_count_filters)
{
    struct cr__scoreboard *sb = new_board(8);
    struct cr_scoreboard_entry e[8];
    struct cr__slot *s;

    for (unsigned k = 0; k < 5; k++)
        ck_assert_int_eq(cr__scoreboard_claim(sb, k < 3 ? 1 : 2), (int)k);
    cr__scoreboard_release(sb, 1);
    s = cr__scoreboard_slot(sb, 3);
    s->pid = 4242;
    s->state = CR_WORKER_BUSY;
    s->busy_threads = 1;
    s->connections = 3;
    s->requests = 7;
    s->bytes = 1000;
    s->last_request_ns = 123;
    s->busy_since_ns = cr_clock_now_ns() - 5000000;
    cr__scoreboard_slot(sb, 4)->state = CR_WORKER_IDLE;
    cr__scoreboard_slot(sb, 0)->state = CR_WORKER_IDLE;

    /* In use: 0, 2, 3, 4, in slot order. */
    ck_assert_uint_eq(cr__scoreboard_copy(sb, e, 8), 4);
    ck_assert_int_eq(e[0].state, CR_WORKER_IDLE);
    ck_assert_int_eq(e[1].state, CR_WORKER_STARTING);
    ck_assert_uint_eq(e[1].busy_ns, 0);
    ck_assert_int_eq(e[2].pid, 4242);
    ck_assert_uint_eq(e[2].generation, 2);
    ck_assert_int_eq(e[2].state, CR_WORKER_BUSY);
    ck_assert_uint_eq(e[2].busy_threads, 1);
    ck_assert_uint_eq(e[2].connections, 3);
    ck_assert_uint_eq(e[2].requests, 7);
    ck_assert_uint_eq(e[2].bytes, 1000);
    ck_assert_uint_eq(e[2].last_request_ns, 123);
    ck_assert_uint_ge(e[2].busy_ns, 5000000);
    ck_assert_uint_lt(e[2].busy_ns, 60000000000ull);
    /* max bounds the copy, not the count. */
    e[1].pid = -1;
    ck_assert_uint_eq(cr__scoreboard_copy(sb, e, 1), 4);
    ck_assert_int_eq(e[1].pid, -1);

    ck_assert_uint_eq(cr__scoreboard_count(sb, 1, CR_WORKER_IDLE), 1);
    ck_assert_uint_eq(cr__scoreboard_count(sb, 2, CR_WORKER_IDLE), 1);
    ck_assert_uint_eq(cr__scoreboard_count(sb, 1, CR_WORKER_STARTING), 1);
    ck_assert_uint_eq(cr__scoreboard_count(sb, 2, CR_WORKER_BUSY), 1);
    ck_assert_uint_eq(cr__scoreboard_count(sb, 3, CR_WORKER_IDLE), 0);
    cr__scoreboard_destroy(sb);
}
END_TEST

START_TEST(child_writes_are_seen_by_parent)
{
    struct cr__scoreboard *sb = new_board(4);
    struct cr_scoreboard_entry e[4];
    int i = cr__scoreboard_claim(sb, 1);
    pid_t pid;
    int status;

    ck_assert_int_ge(i, 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct cr__slot *s = cr__scoreboard_slot(sb, (unsigned)i);

        __atomic_store_n(&s->pid, (int)getpid(), __ATOMIC_RELAXED);
        __atomic_store_n(&s->state, (int)CR_WORKER_IDLE, __ATOMIC_RELAXED);
        __atomic_fetch_add(&s->requests, 11, __ATOMIC_RELAXED);
        /* A claim in the child is visible too (any process may copy). */
        _exit(cr__scoreboard_claim(sb, 9) >= 0 ? 0 : 1);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_uint_eq(cr__scoreboard_copy(sb, e, 4), 2);
    ck_assert_int_eq(e[0].pid, pid);
    ck_assert_int_eq(e[0].state, CR_WORKER_IDLE);
    ck_assert_uint_eq(e[0].requests, 11);
    ck_assert_uint_eq(e[1].generation, 9);
    cr__scoreboard_destroy(sb);
}
END_TEST

START_TEST(stats_read_totals_and_count_busy_threads_of_slots_in_use)
{
    struct cr__scoreboard *sb = new_board(4);
    struct cr__scoreboard_totals *t = cr__scoreboard_totals(sb);
    struct cr_server_stats st;
    int a = cr__scoreboard_claim(sb, 1);
    int b = cr__scoreboard_claim(sb, 1);
    pid_t pid;
    int status;

    ck_assert_int_ge(a, 0);
    ck_assert_int_ge(b, 0);
    t->generation = 2;
    t->processes = 2;
    t->restarts = 1;
    __atomic_store_n(&cr__scoreboard_slot(sb, (unsigned)a)->busy_threads, 3u, __ATOMIC_RELAXED);
    __atomic_store_n(&cr__scoreboard_slot(sb, (unsigned)b)->busy_threads, 1u, __ATOMIC_RELAXED);
    /* The totals are shared like the slots. */
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        __atomic_fetch_add(&t->accepted, 5, __ATOMIC_RELAXED);
        __atomic_fetch_add(&t->requests, 7, __ATOMIC_RELAXED);
        _exit(0);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    memset(&st, 0, sizeof(st));
    cr__scoreboard_stats(sb, &st);
    ck_assert_uint_eq(st.accepted, 5);
    ck_assert_uint_eq(st.requests, 7);
    ck_assert_uint_eq(st.open_connections, 4);
    ck_assert_uint_eq(st.processes, 2);
    ck_assert_uint_eq(st.generation, 2);
    ck_assert_uint_eq(st.restarts, 1);
    /* A released slot (its worker reaped, even one killed -9 mid-connection)
     * counts no open connection. */
    cr__scoreboard_release(sb, (unsigned)a);
    cr__scoreboard_stats(sb, &st);
    ck_assert_uint_eq(st.open_connections, 1);
    cr__scoreboard_destroy(sb);
}
END_TEST

Suite *scoreboard_suite(void);

Suite *scoreboard_suite(void)
{
    Suite *s = suite_create("scoreboard");
    TCase *tc = tcase_create("scoreboard");

    tcase_set_timeout(tc, TEST_TIMEOUT);
    tcase_add_test(tc, capacity_formula_leaves_room_for_draining_generations);
    tcase_add_test(tc, claim_hands_out_each_free_slot_once_then_enospc);
    tcase_add_test(tc, evict_frees_oldest_stopping_worker);
    tcase_add_test(tc, copy_returns_slots_in_use_and_count_filters);
    tcase_add_test(tc, child_writes_are_seen_by_parent);
    tcase_add_test(tc, stats_read_totals_and_count_busy_threads_of_slots_in_use);
    suite_add_tcase(s, tc);
    return s;
}
