/* test_handle_set.c - placeholder smoke test until the conformance suite lands. */
#include <cabrank/handle_set.h>

#include <check.h>
#include <unistd.h>

START_TEST(epoll_reports_readable_pipe)
{
    struct cr_handle_set *hs;
    struct cr_handle_event ev[4];
    int p[2];

    ck_assert_int_eq(cr_handle_set_open(&hs, "epoll"), 0);
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(cr_handle_set_add(hs, p[0], CR_EV_READ, 0, 7), 0);
    ck_assert_int_eq(cr_handle_set_wait(hs, ev, 4, 0), 0);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    ck_assert_int_eq(cr_handle_set_wait(hs, ev, 4, 1000), 1);
    ck_assert_int_eq(ev[0].fd, p[0]);
    ck_assert_uint_eq(ev[0].tag, 7);
    cr_handle_set_close(hs);
    close(p[0]);
    close(p[1]);
}
END_TEST

Suite *handle_set_suite(void);
Suite *handle_set_suite(void)
{
    Suite *s = suite_create("handle_set");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, epoll_reports_readable_pipe);
    suite_add_tcase(s, tc);
    return s;
}
