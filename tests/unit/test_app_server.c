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

/* A file holding "before\n", and the test's stderr kept to put back. */
static char path[32];
static int saved_stderr = -1;

static void setup(void)
{
    int fd;

    snprintf(path, sizeof(path), "/tmp/cr-app-server-XXXXXX");
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "before\n", 7), 7);
    close(fd);
    saved_stderr = dup(STDERR_FILENO);
    ck_assert_int_ge(saved_stderr, 0);
}

static void teardown(void)
{
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    unlink(path);
}

/* Puts stderr back, then returns the file's text in buf. */
static const char *file_text(char *buf, size_t cap)
{
    int fd;
    ssize_t n;

    ck_assert_int_ge(dup2(saved_stderr, STDERR_FILENO), 0);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    n = read(fd, buf, cap - 1);
    ck_assert_int_ge(n, 0);
    buf[n] = '\0';
    close(fd);
    return buf;
}

START_TEST(error_log_takes_stderr_and_appends)
{
    char buf[256];

    ck_assert_int_eq(app_open_error_log(path), 0);
    ck_assert_int_eq(write(STDERR_FILENO, "one\n", 4), 4);
    /* Again, as a reopen after a rotation: still appended. */
    ck_assert_int_eq(app_open_error_log(path), 0);
    ck_assert_int_eq(write(STDERR_FILENO, "two\n", 4), 4);
    ck_assert_str_eq(file_text(buf, sizeof(buf)), "before\none\ntwo\n");
}
END_TEST

START_TEST(unopenable_error_log_leaves_stderr)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    char buf[256];

    ck_assert_int_ge(fd, 0);
    ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);
    close(fd);
    ck_assert_int_eq(app_open_error_log("/nonexistent/cabrank/error.log"), -ENOENT);
    ck_assert_int_eq(write(STDERR_FILENO, "still\n", 6), 6);
    ck_assert_str_eq(file_text(buf, sizeof(buf)), "before\nstill\n");
}
END_TEST

Suite *app_server_suite(void);
Suite *app_server_suite(void)
{
    Suite *s = suite_create("app_server");
    TCase *tc = tcase_create("error_log");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, error_log_takes_stderr_and_appends);
    tcase_add_test(tc, unopenable_error_log_leaves_stderr);
    suite_add_tcase(s, tc);
    return s;
}
