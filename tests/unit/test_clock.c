/*
 * test_clock.c - clock.h: the event time a dispatching thread enters, and the
 * wall-clock second derived from it (cr_clock_event_wall_sec), checked
 * against the wall clock read directly. Event times are entered the way a
 * reactor enters them (clock_internal.h), some of them in the past, to show
 * the second is the event's and not the moment of the call.
 */
#include <cabrank/clock.h>

#include "os/clock_internal.h"

#include <check.h>
#include <stdint.h>

#define TEST_TIMEOUT 10

/* The wall-clock second now, read directly. */
static int64_t wall_sec(void)
{
    return (int64_t)(cr_clock_wall_ns() / CR_NSEC_PER_SEC);
}

/* Outside any event the second is the current one (give or take the tick
 * between the two readings). */
START_TEST(wall_second_outside_an_event_is_now)
{
    int64_t before = wall_sec();
    int64_t got = cr_clock_event_wall_sec();
    int64_t after = wall_sec();

    ck_assert_int_ge(got, before);
    ck_assert_int_le(got, after);
}
END_TEST

/* Inside an event the second is the event's: an event taken 5 s ago is
 * stamped 5 s back, though the thread's offset was read just now. */
START_TEST(wall_second_is_the_event_time_not_the_call_time)
{
    uint64_t now = cr_clock_now_ns();
    int64_t before = wall_sec();
    uint64_t outer;
    int64_t got;
    int64_t after;

    (void)cr_clock_event_wall_sec(); /* an offset read for this second */
    outer = cr__clock_event_enter(now - 5 * CR_NSEC_PER_SEC);
    got = cr_clock_event_wall_sec();
    cr__clock_event_leave(outer);
    after = wall_sec();
    ck_assert_int_ge(got, before - 5);
    ck_assert_int_le(got, after - 5);
}
END_TEST

/* Events a second apart, either order, each stamped with its own second:
 * the offset read for one second does not stamp the next with it. */
START_TEST(events_a_second_apart_get_consecutive_seconds)
{
    uint64_t t = cr_clock_now_ns() - 3 * CR_NSEC_PER_SEC;
    int64_t at[4];
    uint64_t outer;

    outer = cr__clock_event_enter(t);
    at[0] = cr_clock_event_wall_sec();
    cr__clock_event_leave(outer);
    outer = cr__clock_event_enter(t + CR_NSEC_PER_SEC);
    at[1] = cr_clock_event_wall_sec();
    cr__clock_event_leave(outer);
    outer = cr__clock_event_enter(t);
    at[2] = cr_clock_event_wall_sec();
    cr__clock_event_leave(outer);
    outer = cr__clock_event_enter(t + 2 * CR_NSEC_PER_SEC);
    at[3] = cr_clock_event_wall_sec();
    cr__clock_event_leave(outer);
    ck_assert_int_eq(at[1], at[0] + 1);
    ck_assert_int_eq(at[2], at[0]);
    ck_assert_int_eq(at[3], at[0] + 2);
}
END_TEST

/* Many stamps in one event agree, and agree with the wall clock. */
START_TEST(stamps_within_one_event_agree)
{
    uint64_t outer = cr__clock_event_enter(cr_clock_now_ns());
    int64_t before = wall_sec();
    int64_t first = cr_clock_event_wall_sec();

    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(cr_clock_event_wall_sec(), first);
    cr__clock_event_leave(outer);
    ck_assert_int_ge(first, before - 1);
    ck_assert_int_le(first, wall_sec());
}
END_TEST

/* The event time itself: entered, read back, restored on leave. */
START_TEST(event_time_is_entered_and_restored)
{
    uint64_t outer = cr__clock_event_enter(12345);
    uint64_t inner;

    ck_assert_uint_eq(cr_clock_event_ns(), 12345);
    inner = cr__clock_event_enter(67890);
    ck_assert_uint_eq(cr_clock_event_ns(), 67890);
    cr__clock_event_leave(inner);
    ck_assert_uint_eq(cr_clock_event_ns(), 12345);
    cr__clock_event_leave(outer);
    ck_assert_uint_ne(cr_clock_event_ns(), 12345); /* a fresh reading again */
}
END_TEST

Suite *clock_suite(void);

Suite *clock_suite(void)
{
    Suite *s = suite_create("clock");
    TCase *tc = tcase_create("clock");

    tcase_set_timeout(tc, TEST_TIMEOUT);
    tcase_add_test(tc, wall_second_outside_an_event_is_now);
    tcase_add_test(tc, wall_second_is_the_event_time_not_the_call_time);
    tcase_add_test(tc, events_a_second_apart_get_consecutive_seconds);
    tcase_add_test(tc, stamps_within_one_event_agree);
    tcase_add_test(tc, event_time_is_entered_and_restored);
    suite_add_tcase(s, tc);
    return s;
}
