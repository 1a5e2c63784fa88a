/*
 * test_server_congestion.c - cr_server_config.loopback_congestion: by
 * default a listener bound to loopback gets cubic (where the kernel allows
 * it) and a wildcard one keeps the system's; tcp_congestion, when set, goes
 * to both instead; "same" adds nothing; a chosen name goes to loopback
 * listeners only, and one the kernel lacks fails cr_server_create. Checked
 * on inherited listeners, which the test can read the option back from; the
 * server tunes its own the same way (open_listeners). A wildcard listener's
 * connections from this host get the loopback choice after accept: checked
 * on the server's end of a connection by the service that opens it. (The
 * wildcard listener is served to a client on 127.0.0.1 only.) And
 * cr_server_config.notsent_lowat, the other TCP option the server sets on
 * its listeners for their connections.
 */
#include <cabrank/listener.h>
#include <cabrank/log.h>
#include <cabrank/server.h>

#include "../support/services.h"
#include "../support/support.h"
#include "net/conn_internal.h"

#include <check.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pair {
    int loopback; /* 127.0.0.1:0 */
    int wildcard; /* 0.0.0.0:0 */
};

/* A wildcard listener (0.0.0.0:0). */
static int open_wildcard(void)
{
    struct cr_listener_config any = {.address = "0.0.0.0:0"};
    int fd;

    ck_assert_int_eq(cr_listener_open(&fd, &any), 0);
    return fd;
}

static void open_pair(struct pair *p)
{
    struct cr_listener_config lo = {.address = "127.0.0.1:0"};

    ck_assert_int_eq(cr_listener_open(&p->loopback, &lo), 0);
    p->wildcard = open_wildcard();
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
/* Opens p and creates (then destroys) a server of cfg over it, which tunes
 * the pair's sockets for their connections; create's result. The caller
 * reads the options back and closes p. */
static int create_over_pair(struct cr_server_config *cfg, struct pair *p)
{
    struct cr_test_svc t;
    struct cr_server *s = NULL;
    int err;

    open_pair(p);
    cfg->listen_fds[0] = p->loopback;
    cfg->listen_fds[1] = p->wildcard;
    ck_assert_int_eq(cr_test_line_init(&t), 0);
    err = cr_server_create(&s, cfg, &t.svc);
    cr_server_destroy(s);
    cr_test_svc_fini(&t);
    return err;
}

static int tune_pair(const char *lc, const char *tc, char *lo, char *any)
{
    struct cr_server_config cfg = {
        .model = "reactor",
        .loopback_congestion = lc,
        .tcp_congestion = tc,
    };
    struct pair p;
    int err = create_over_pair(&cfg, &p);

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
    } else {
        cr_test_skip("server_congestion: reno over an explicit cubic", "cubic is not allowed here");
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

/* The line service, noting the congestion control of each connection it
 * opens, as the server's end of it has it then (under mu: the server's
 * thread writes, the test's reads). */
struct noting_svc {
    struct cr_service svc;
    const struct cr_service *inner;
    pthread_mutex_t mu;
    char cc[32];
};

static int noting_open(void *ctx, struct cr_conn *c, void **state)
{
    struct noting_svc *n = ctx;
    char cc[32] = "";
    socklen_t len = sizeof(cc);

    if (getsockopt(cr__conn_fd(c), IPPROTO_TCP, TCP_CONGESTION, cc, &len) < 0)
        return -errno;
    pthread_mutex_lock(&n->mu);
    memcpy(n->cc, cc, sizeof(cc));
    pthread_mutex_unlock(&n->mu);
    return n->inner->open != NULL ? n->inner->open(n->inner->ctx, c, state) : 0;
}

static ssize_t noting_input(void *ctx, void *state, struct cr_conn *c, const char *data, size_t len)
{
    struct noting_svc *n = ctx;

    return n->inner->input(n->inner->ctx, state, c, data, len);
}

static void noting_drained(void *ctx, void *state, struct cr_conn *c)
{
    struct noting_svc *n = ctx;

    n->inner->drained(n->inner->ctx, state, c);
}

static void noting_close(void *ctx, void *state)
{
    struct noting_svc *n = ctx;

    if (n->inner->close != NULL)
        n->inner->close(n->inner->ctx, state);
}

static void noting_init(struct noting_svc *n, const struct cr_service *inner)
{
    memset(n, 0, sizeof(*n));
    n->inner = inner;
    n->svc = *inner;
    n->svc.ctx = n;
    n->svc.open = noting_open;
    n->svc.input = noting_input;
    n->svc.drained = inner->drained != NULL ? noting_drained : NULL;
    n->svc.close = noting_close;
    ck_assert_int_eq(pthread_mutex_init(&n->mu, NULL), 0);
}

/* Serves one client over the wildcard listener under loopback_congestion
 * lc (tcp_congestion tc) and leaves in cc what the server's end of that
 * connection from 127.0.0.1 uses. */
static void serve_on_wildcard(const char *lc, const char *tc, char *cc)
{
    struct cr_server_config cfg = {
        .model = "reactor",
        .loopback_congestion = lc,
        .tcp_congestion = tc,
    };
    struct cr_test_svc t;
    struct noting_svc n;
    struct cr_test_client cl;
    struct cr_server *s = NULL;
    int wildcard;
    char line[64];
    int lport;

    wildcard = open_wildcard();
    lport = cr_listener_port(wildcard);
    ck_assert_int_gt(lport, 0);
    cfg.listen_fds[0] = wildcard;
    ck_assert_int_eq(cr_test_line_init(&t), 0);
    noting_init(&n, &t.svc);
    ck_assert_int_eq(cr_server_create(&s, &cfg, &n.svc), 0);
    ck_assert_int_eq(cr_server_start(s), 0);
    ck_assert_int_eq(cr_test_client_open(&cl, (uint16_t)lport), 0);
    /* Answered: the connection was opened. */
    ck_assert_int_eq(cr_test_client_send(&cl, "hello\n"), 0);
    ck_assert_int_gt(cr_test_client_line(&cl, line, sizeof(line), cr_test_tmo(5000)), 0);
    pthread_mutex_lock(&n.mu);
    memcpy(cc, n.cc, sizeof(n.cc));
    pthread_mutex_unlock(&n.mu);
    cr_test_client_close(&cl);
    cr_server_stop(s, true);
    ck_assert_int_eq(cr_server_wait(s), 0);
    cr_server_destroy(s);
    pthread_mutex_destroy(&n.mu);
    cr_test_svc_fini(&t);
    close(wildcard);
}

START_TEST(wildcard_connections_from_this_host_get_the_loopback_choice)
{
    char cc[32];
    char sys[32];

    system_default(sys);
    serve_on_wildcard(NULL, NULL, cc);
    ck_assert_str_eq(cc, cubic_allowed() ? "cubic" : sys);
    serve_on_wildcard("reno", NULL, cc);
    ck_assert_str_eq(cc, "reno");
    serve_on_wildcard(CR_SERVER_CONGESTION_SAME, NULL, cc);
    ck_assert_str_eq(cc, sys);
    /* tcp_congestion reaches them through the listener. */
    serve_on_wildcard(NULL, "reno", cc);
    ck_assert_str_eq(cc, "reno");
}
END_TEST

START_TEST(a_chosen_name_the_kernel_lacks_fails_create_over_a_wildcard_listener)
{
    struct cr_server_config cfg = {.model = "reactor", .loopback_congestion = "no-such-cc"};
    struct cr_test_svc t;
    struct cr_server *s = NULL;
    int wildcard;

    wildcard = open_wildcard();
    cfg.listen_fds[0] = wildcard;
    ck_assert_int_eq(cr_test_line_init(&t), 0);
    ck_assert_int_eq(cr_server_create(&s, &cfg, &t.svc), -ENOENT);
    cr_test_svc_fini(&t);
    close(wildcard);
}
END_TEST

/* Creates a server over a wildcard listener whose congestion control is
 * preset (NULL: the system's) with loopback_congestion lc, and returns
 * whether it logged that connections from this host get a choice of their
 * own, which is when it checks each connection. */
static bool checks_each_connection(const char *preset, const char *lc)
{
    struct cr_server_config cfg = {.model = "reactor", .loopback_congestion = lc};
    char path[] = "/tmp/cr-congestion-log-XXXXXX";
    struct cr_test_svc t;
    struct cr_server *s = NULL;
    int wildcard;
    char *log;
    bool said;
    int level;
    int fd = mkstemp(path);

    ck_assert_int_ge(fd, 0);
    wildcard = open_wildcard();
    if (preset != NULL)
        ck_assert_int_eq(cr_listener_congestion(wildcard, preset), 0);
    cfg.listen_fds[0] = wildcard;
    ck_assert_int_eq(cr_test_line_init(&t), 0);
    level = __atomic_load_n(&cr_log_threshold, __ATOMIC_RELAXED);
    cr_log_set_level(CR_LOG_INFO);
    cr_log_set_fd(fd);
    ck_assert_int_eq(cr_server_create(&s, &cfg, &t.svc), 0);
    cr_log_set_fd(-1);
    cr_log_set_level((enum cr_log_level)level);
    cr_server_destroy(s);
    cr_test_svc_fini(&t);
    close(wildcard);
    close(fd);
    log = cr_test_read_file(path, NULL);
    ck_assert_ptr_nonnull(log);
    said = strstr(log, "connections from this host, congestion control") != NULL;
    free(log);
    unlink(path);
    return said;
}

/* Where the listener's connections inherit the choice anyway (a host whose
 * default it is), none is checked. */
START_TEST(wildcard_connections_that_inherit_the_choice_are_not_checked)
{
    char sys[32];
    const char *other;

    system_default(sys);
    other = strcmp(sys, "reno") != 0 ? "reno" : "cubic";
    ck_assert(checks_each_connection(NULL, other));
    ck_assert(!checks_each_connection(other, other));
}
END_TEST

/* The TCP_NOTSENT_LOWAT a server with notsent_lowat `want` leaves on the
 * listening sockets it is given (its connections inherit it), in lo and
 * any; create's result. */
static int lowat_pair(const char *model, unsigned want, int *lo, int *any)
{
    struct cr_server_config cfg = {.model = model, .notsent_lowat = want};
    struct pair p;
    socklen_t len = sizeof(int);
    int err = create_over_pair(&cfg, &p);

    ck_assert_int_eq(getsockopt(p.loopback, IPPROTO_TCP, TCP_NOTSENT_LOWAT, lo, &len), 0);
    ck_assert_int_eq(getsockopt(p.wildcard, IPPROTO_TCP, TCP_NOTSENT_LOWAT, any, &len), 0);
    close_pair(&p);
    return err;
}

/* 64 KiB unless told (prefork: the system's); the system's on request; no
 * value beyond an int. */
START_TEST(listeners_get_the_notsent_lowat)
{
    int lo = -1;
    int any = -1;

    ck_assert_int_eq(lowat_pair("reactor", 0, &lo, &any), 0);
    ck_assert_int_eq(lo, CR_SERVER_NOTSENT_LOWAT);
    ck_assert_int_eq(any, CR_SERVER_NOTSENT_LOWAT);
    ck_assert_int_eq(lowat_pair("reactor", 4096, &lo, &any), 0);
    ck_assert_int_eq(lo, 4096);
    ck_assert_int_eq(any, 4096);
    ck_assert_int_eq(lowat_pair("reactor", CR_SERVER_NOTSENT_SYSTEM, &lo, &any), 0);
    ck_assert_int_eq(lo, 0);
    ck_assert_int_eq(any, 0);
    ck_assert_int_eq(lowat_pair("reactor", (unsigned)INT_MAX + 1, &lo, &any), -EINVAL);
    ck_assert_int_eq(lo, 0);
    /* prefork keeps the system's unless told. */
    ck_assert_int_eq(lowat_pair("prefork", 0, &lo, &any), 0);
    ck_assert_int_eq(lo, 0);
    ck_assert_int_eq(any, 0);
    ck_assert_int_eq(lowat_pair("prefork", 8192, &lo, &any), 0);
    ck_assert_int_eq(lo, 8192);
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
    tcase_add_test(tc, wildcard_connections_from_this_host_get_the_loopback_choice);
    tcase_add_test(tc, wildcard_connections_that_inherit_the_choice_are_not_checked);
    tcase_add_test(tc, a_chosen_name_the_kernel_lacks_fails_create_over_a_wildcard_listener);
    tcase_add_test(tc, listeners_get_the_notsent_lowat);
    suite_add_tcase(s, tc);
    return s;
}
