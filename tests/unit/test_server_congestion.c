/*
 * test_server_congestion.c - cr_server_config.loopback_congestion: by
 * default a listener bound to loopback gets cubic (where the kernel allows
 * it) and a wildcard one keeps the system's; tcp_congestion, when set, goes
 * to both instead; "same" adds nothing; a chosen name goes to loopback
 * listeners only, and one the kernel lacks fails cr_server_create. Checked
 * on inherited listeners, which the test can read the option back from; the
 * server tunes its own the same way (open_listeners).
 */
#include <cabrank/listener.h>
#include <cabrank/server.h>

#include "../support/services.h"
#include "../support/support.h"

#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <unistd.h>

struct pair {
    int loopback; /* 127.0.0.1:0 */
    int wildcard; /* 0.0.0.0:0 */
};

static void open_pair(struct pair *p)
{
    struct cr_listener_config lo = {.address = "127.0.0.1:0"};
    struct cr_listener_config any = {.address = "0.0.0.0:0"};

    ck_assert_int_eq(cr_listener_open(&p->loopback, &lo), 0);
    ck_assert_int_eq(cr_listener_open(&p->wildcard, &any), 0);
}

static void close_pair(struct pair *p)
{
    close(p->loopback);
    close(p->wildcard);
}

static void congestion_of(int fd, char *name, socklen_t size)
{
    ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &size), 0);
}

/* Creates a server with loopback_congestion lc and tcp_congestion tc over
 * the pair, destroys it, and leaves each listener's congestion control in
 * lo and any. Returns cr_server_create's result. */
static int tune_pair(const char *lc, const char *tc, char *lo, char *any)
{
    struct cr_server_config cfg = {
        .model = "reactor",
        .loopback_congestion = lc,
        .tcp_congestion = tc,
    };
    struct cr_test_svc t;
    struct cr_server *s = NULL;
    struct pair p;
    int err;

    open_pair(&p);
    cfg.listen_fds[0] = p.loopback;
    cfg.listen_fds[1] = p.wildcard;
    ck_assert_int_eq(cr_test_line_init(&t), 0);
    err = cr_server_create(&s, &cfg, &t.svc);
    cr_server_destroy(s);
    cr_test_svc_fini(&t);
    congestion_of(p.loopback, lo, 32);
    congestion_of(p.wildcard, any, 32);
    close_pair(&p);
    return err;
}

/* What a new socket gets without asking: the system's default. */
static void system_default(char *name)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    ck_assert_int_ge(fd, 0);
    congestion_of(fd, name, 32);
    close(fd);
}

/* Whether this process may choose cubic (allowed list, or privileges). */
static bool cubic_allowed(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    bool ok;

    ck_assert_int_ge(fd, 0);
    ok = cr_listener_congestion(fd, "cubic") == 0;
    close(fd);
    return ok;
}

START_TEST(loopback_listeners_get_cubic_by_default)
{
    char lo[32];
    char any[32];
    char sys[32];

    system_default(sys);
    ck_assert_int_eq(tune_pair(NULL, NULL, lo, any), 0);
    ck_assert_str_eq(lo, cubic_allowed() ? "cubic" : sys);
    ck_assert_str_eq(any, sys);
}
END_TEST

/* reno is built into every kernel and always allowed. */
START_TEST(tcp_congestion_goes_to_loopback_listeners_too)
{
    char lo[32];
    char any[32];

    ck_assert_int_eq(tune_pair(NULL, "reno", lo, any), 0);
    ck_assert_str_eq(lo, "reno");
    ck_assert_str_eq(any, "reno");
}
END_TEST

START_TEST(same_adds_nothing_for_loopback)
{
    char lo[32];
    char any[32];
    char sys[32];

    system_default(sys);
    ck_assert_int_eq(tune_pair(CR_SERVER_CONGESTION_SAME, NULL, lo, any), 0);
    ck_assert_str_eq(lo, sys);
    ck_assert_str_eq(any, sys);
}
END_TEST

START_TEST(a_chosen_name_goes_to_loopback_listeners_only)
{
    char lo[32];
    char any[32];
    char sys[32];

    system_default(sys);
    ck_assert_int_eq(tune_pair("reno", NULL, lo, any), 0);
    ck_assert_str_eq(lo, "reno");
    ck_assert_str_eq(any, sys);
    /* Over an explicit tcp_congestion as well. */
    if (cubic_allowed()) {
        ck_assert_int_eq(tune_pair("reno", "cubic", lo, any), 0);
        ck_assert_str_eq(lo, "reno");
        ck_assert_str_eq(any, "cubic");
    }
}
END_TEST

START_TEST(a_chosen_name_the_kernel_lacks_fails_create)
{
    char lo[32];
    char any[32];

    ck_assert_int_eq(tune_pair("no-such-cc", NULL, lo, any), -ENOENT);
}
END_TEST

Suite *server_congestion_suite(void);
Suite *server_congestion_suite(void)
{
    Suite *s = suite_create("server_congestion");
    TCase *tc = tcase_create("loopback");

    tcase_add_test(tc, loopback_listeners_get_cubic_by_default);
    tcase_add_test(tc, tcp_congestion_goes_to_loopback_listeners_too);
    tcase_add_test(tc, same_adds_nothing_for_loopback);
    tcase_add_test(tc, a_chosen_name_goes_to_loopback_listeners_only);
    tcase_add_test(tc, a_chosen_name_the_kernel_lacks_fails_create);
    suite_add_tcase(s, tc);
    return s;
}
