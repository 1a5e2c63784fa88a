/*
 * test_app_server.c - The programs' error log (apps/common/app_server.c):
 * stderr goes to the file, appended, and a path that cannot be opened leaves
 * stderr as it was. app_say_listening is checked end to end by every
 * integration test that reads "listening on" (httpd_*, oltp_*).
 */
#include "../../apps/common/app_server.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The file at path, into buf. */
static void slurp(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    ck_assert_int_ge(fd, 0);
    n = read(fd, buf, cap - 1);
    ck_assert_int_ge(n, 0);
    buf[n] = '\0';
    close(fd);
}

START_TEST(error_log_takes_stderr_and_appends)
{
    char path[] = "/tmp/cr-app-server-XXXXXX";
    int fd = mkstemp(path);
    int saved = dup(STDERR_FILENO);
    char buf[256];

    ck_assert_int_ge(fd, 0);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_eq(write(fd, "before\n", 7), 7);
    close(fd);
    ck_assert_int_eq(app_open_error_log(path), 0);
    ck_assert_int_eq(write(STDERR_FILENO, "one\n", 4), 4);
    /* Again, as a reopen after a rotation: still appended. */
    ck_assert_int_eq(app_open_error_log(path), 0);
    ck_assert_int_eq(write(STDERR_FILENO, "two\n", 4), 4);
    ck_assert_int_ge(dup2(saved, STDERR_FILENO), 0);
    close(saved);
    slurp(path, buf, sizeof(buf));
    ck_assert_str_eq(buf, "before\none\ntwo\n");
    unlink(path);
}
END_TEST

START_TEST(unopenable_error_log_leaves_stderr)
{
    char path[] = "/tmp/cr-app-server-XXXXXX";
    int fd = mkstemp(path);
    int saved = dup(STDERR_FILENO);
    char buf[64];

    ck_assert_int_ge(fd, 0);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);
    close(fd);
    ck_assert_int_eq(app_open_error_log("/nonexistent/cabrank/error.log"), -ENOENT);
    ck_assert_int_eq(write(STDERR_FILENO, "still\n", 6), 6);
    ck_assert_int_ge(dup2(saved, STDERR_FILENO), 0);
    close(saved);
    slurp(path, buf, sizeof(buf));
    ck_assert_str_eq(buf, "still\n");
    unlink(path);
}
END_TEST

Suite *app_server_suite(void);
Suite *app_server_suite(void)
{
    Suite *s = suite_create("app_server");
    TCase *tc = tcase_create("error_log");

    tcase_add_test(tc, error_log_takes_stderr_and_appends);
    tcase_add_test(tc, unopenable_error_log_leaves_stderr);
    suite_add_tcase(s, tc);
    return s;
}
