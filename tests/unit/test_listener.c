/*
 * test_listener.c - cr_listener_*: address parsing (good and bad forms),
 * opening IPv4 and IPv6 listeners with their socket options, reporting the
 * bound address, SO_REUSEPORT, and accept's flags and -EAGAIN.
 */
#include <cabrank/listener.h>

#include "../support/support.h"

#include <arpa/inet.h>
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

START_TEST(parses_ipv4_address_and_port)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
    socklen_t len = 0;

    ck_assert_int_eq(cr_listener_parse("127.0.0.1:8080", &ss, &len), 0);
    ck_assert_int_eq(len, sizeof(struct sockaddr_in));
    ck_assert_int_eq(sin->sin_family, AF_INET);
    ck_assert_uint_eq(ntohs(sin->sin_port), 8080);
    ck_assert_uint_eq(ntohl(sin->sin_addr.s_addr), INADDR_LOOPBACK);

    ck_assert_int_eq(cr_listener_parse("10.1.2.3:65535", &ss, &len), 0);
    ck_assert_uint_eq(ntohs(sin->sin_port), 65535);
    ck_assert_uint_eq(ntohl(sin->sin_addr.s_addr), 0x0a010203u);

    ck_assert_int_eq(cr_listener_parse("0.0.0.0:0", &ss, &len), 0);
    ck_assert_uint_eq(ntohs(sin->sin_port), 0);
    ck_assert_uint_eq(sin->sin_addr.s_addr, htonl(INADDR_ANY));
}
END_TEST

START_TEST(parses_wildcard_forms_as_ipv4_any)
{
    static const char *const forms[] = {"*:80", ":80"};

    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        struct sockaddr_storage ss;
        struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
        socklen_t len = 0;

        ck_assert_msg(cr_listener_parse(forms[i], &ss, &len) == 0, "%s", forms[i]);
        ck_assert_int_eq(len, sizeof(struct sockaddr_in));
        ck_assert_int_eq(sin->sin_family, AF_INET);
        ck_assert_uint_eq(ntohs(sin->sin_port), 80);
        ck_assert_uint_eq(sin->sin_addr.s_addr, htonl(INADDR_ANY));
    }
}
END_TEST

START_TEST(parses_bracketed_ipv6)
{
    struct sockaddr_storage ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
    socklen_t len = 0;

    ck_assert_int_eq(cr_listener_parse("[::1]:0", &ss, &len), 0);
    ck_assert_int_eq(len, sizeof(struct sockaddr_in6));
    ck_assert_int_eq(sin6->sin6_family, AF_INET6);
    ck_assert_uint_eq(ntohs(sin6->sin6_port), 0);
    ck_assert(IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr));

    ck_assert_int_eq(cr_listener_parse("[::]:80", &ss, &len), 0);
    ck_assert_uint_eq(ntohs(sin6->sin6_port), 80);
    ck_assert(IN6_IS_ADDR_UNSPECIFIED(&sin6->sin6_addr));

    ck_assert_int_eq(cr_listener_parse("[2001:db8::7]:443", &ss, &len), 0);
    ck_assert_uint_eq(ntohs(sin6->sin6_port), 443);
    ck_assert_uint_eq(sin6->sin6_addr.s6_addr[15], 7);
}
END_TEST

START_TEST(rejects_malformed_addresses)
{
    static const char *const bad[] = {
        "",                     /* empty */
        "127.0.0.1",            /* no port */
        "127.0.0.1:",           /* empty port */
        ":",                    /* nothing at all */
        "*",                    /* no port */
        "127.0.0.1:65536",      /* port too big */
        "127.0.0.1:4294967376", /* port wraps to 80 in 32 bits */
        "127.0.0.1:-1",         /* sign */
        "127.0.0.1:+80",        /* sign */
        "127.0.0.1: 80",        /* space */
        "127.0.0.1:80 ",        /* trailing garbage */
        "127.0.0.1:80x",        /* trailing garbage */
        "127.0.0.1:0x50",       /* not decimal */
        "localhost:8080",       /* names are refused: numeric only */
        "1.2.3:80",             /* short dotted quad */
        "1.2.3.256:80",         /* octet too big */
        " 127.0.0.1:80",        /* leading space */
        "::1:80",               /* IPv6 must be bracketed */
        "[::1]",                /* no port */
        "[::1]:",               /* empty port */
        "[::1]80",              /* no colon */
        "[::1:80",              /* unclosed bracket */
        "[]:80",                /* empty host */
        "[*]:80",               /* wildcard is IPv4 only */
        "[127.0.0.1]:80",       /* IPv4 in brackets */
        "[::1]:70000",          /* port too big */
        "[fe80::1%lo]:80",      /* scope ids are not numeric */
        "garbage",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct sockaddr_storage ss;
        socklen_t len = 0;

        ck_assert_msg(cr_listener_parse(bad[i], &ss, &len) == -EINVAL, "accepted \"%s\"", bad[i]);
    }
    {
        struct sockaddr_storage ss;
        socklen_t len = 0;

        ck_assert_int_eq(cr_listener_parse(NULL, &ss, &len), -EINVAL);
    }
}
END_TEST

static bool has_fd_flag(int fd, int flag)
{
    return (fcntl(fd, F_GETFL) & flag) != 0;
}

static bool is_cloexec(int fd)
{
    return (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
}

static int int_option(int fd, int level, int name)
{
    int v = -1;
    socklen_t len = sizeof(v);

    ck_assert_int_eq(getsockopt(fd, level, name, &v, &len), 0);
    return v;
}

START_TEST(opens_ipv4_listener_on_free_port)
{
    struct cr_listener_config cfg = {.address = "127.0.0.1:0"};
    char buf[64];
    char want[64];
    int fd = -1;
    int port;

    ck_assert_int_eq(cr_listener_open(&fd, &cfg), 0);
    ck_assert_int_ge(fd, 0);
    ck_assert(has_fd_flag(fd, O_NONBLOCK));
    ck_assert(is_cloexec(fd));
    ck_assert_int_ne(int_option(fd, SOL_SOCKET, SO_REUSEADDR), 0);
    ck_assert_int_eq(int_option(fd, SOL_SOCKET, SO_REUSEPORT), 0);
    ck_assert_int_ne(int_option(fd, SOL_SOCKET, SO_ACCEPTCONN), 0);
    port = cr_listener_port(fd);
    ck_assert_int_gt(port, 0);
    ck_assert_int_le(port, 65535);
    ck_assert_int_eq(cr_listener_address(fd, buf, sizeof(buf)), 0);
    snprintf(want, sizeof(want), "127.0.0.1:%d", port);
    ck_assert_str_eq(buf, want);
    close(fd);
}
END_TEST

/* Opens cfg, or returns false when this machine has no usable ::1. */
static bool open_ipv6_or_skip(int *fd, const struct cr_listener_config *cfg)
{
    int err = cr_listener_open(fd, cfg);

    if (err == -EADDRNOTAVAIL || err == -EAFNOSUPPORT) {
        cr_test_skip("listener: an IPv6 listener test", "no IPv6 loopback here");
        return false;
    }
    ck_assert_int_eq(err, 0);
    return true;
}

START_TEST(opens_ipv6_listener_and_reports_bracketed_address)
{
    struct cr_listener_config cfg = {.address = "[::1]:0", .v6only = true};
    char buf[64];
    char want[64];
    int fd = -1;
    int port;

    if (!open_ipv6_or_skip(&fd, &cfg))
        return;
    ck_assert(has_fd_flag(fd, O_NONBLOCK));
    ck_assert(is_cloexec(fd));
    ck_assert_int_eq(int_option(fd, IPPROTO_IPV6, IPV6_V6ONLY), 1);
    port = cr_listener_port(fd);
    ck_assert_int_gt(port, 0);
    ck_assert_int_eq(cr_listener_address(fd, buf, sizeof(buf)), 0);
    snprintf(want, sizeof(want), "[::1]:%d", port);
    ck_assert_str_eq(buf, want);
    close(fd);

    /* On the wildcard the option decides dual-stack, whatever the sysctl says.
     * (Binding a specific IPv6 address sets it in the kernel anyway.) */
    cfg.address = "[::]:0";
    if (!open_ipv6_or_skip(&fd, &cfg))
        return;
    ck_assert_int_eq(int_option(fd, IPPROTO_IPV6, IPV6_V6ONLY), 1);
    close(fd);
    cfg.v6only = false;
    if (!open_ipv6_or_skip(&fd, &cfg))
        return;
    ck_assert_int_eq(int_option(fd, IPPROTO_IPV6, IPV6_V6ONLY), 0);
    close(fd);
}
END_TEST

START_TEST(refuses_bad_config)
{
    struct cr_listener_config cfg = {.address = "localhost:0"};
    int fd = -1;

    ck_assert_int_eq(cr_listener_open(&fd, &cfg), -EINVAL);
    cfg.address = NULL;
    ck_assert_int_eq(cr_listener_open(&fd, &cfg), -EINVAL);
    cfg.address = "127.0.0.1:0";
    cfg.backlog = -1;
    ck_assert_int_eq(cr_listener_open(&fd, &cfg), -EINVAL);
    ck_assert_int_eq(cr_listener_open(&fd, NULL), -EINVAL);
    ck_assert_int_eq(fd, -1);
}
END_TEST

START_TEST(address_reports_short_buffer_and_non_sockets)
{
    struct cr_listener_config cfg = {.address = "127.0.0.1:0"};
    char buf[64];
    int p[2];
    int fd;

    ck_assert_int_eq(cr_listener_open(&fd, &cfg), 0);
    /* "127.0.0.1:" alone is 10 bytes; the port needs more. */
    ck_assert_int_eq(cr_listener_address(fd, buf, 11), -ENOSPC);
    ck_assert_int_eq(cr_listener_address(fd, buf, 0), -ENOSPC);
    close(fd);

    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(cr_listener_port(p[0]), -ENOTSOCK);
    ck_assert_int_eq(cr_listener_address(p[0], buf, sizeof(buf)), -ENOTSOCK);
    ck_assert_int_eq(cr_listener_accept(p[0], &fd), -ENOTSOCK);
    close(p[0]);
    close(p[1]);
    ck_assert_int_eq(cr_listener_port(-1), -EBADF);
}
END_TEST

START_TEST(reuseport_lets_two_listeners_share_a_port)
{
    struct cr_listener_config cfg = {.address = "127.0.0.1:0", .reuseport = true};
    char addr[64];
    int a;
    int b;
    int c;

    ck_assert_int_eq(cr_listener_open(&a, &cfg), 0);
    ck_assert_int_ne(int_option(a, SOL_SOCKET, SO_REUSEPORT), 0);
    ck_assert_int_eq(cr_listener_address(a, addr, sizeof(addr)), 0);
    cfg.address = addr;
    ck_assert_int_eq(cr_listener_open(&b, &cfg), 0);
    ck_assert_int_eq(cr_listener_port(b), cr_listener_port(a));
    /* Without the option the same bind is refused. */
    cfg.reuseport = false;
    ck_assert_int_eq(cr_listener_open(&c, &cfg), -EADDRINUSE);
    close(b);
    close(a);
}
END_TEST

START_TEST(accept_returns_eagain_when_nothing_is_pending)
{
    struct cr_listener_config cfg = {.address = "127.0.0.1:0"};
    int lfd;
    int fd = -1;

    ck_assert_int_eq(cr_listener_open(&lfd, &cfg), 0);
    ck_assert_int_eq(cr_listener_accept(lfd, &fd), -EAGAIN);
    ck_assert_int_eq(fd, -1);
    close(lfd);
}
END_TEST

/* Opens a listener as cfg says, connects to it and accepts: *lfd, the
 * client's *cfd and the accepted *fd (a loopback connect has completed by
 * the time it returns, so the accept finds it). */
static void accept_one(const struct cr_listener_config *cfg, int *lfd, int *cfd, int *fd)
{
    ck_assert_int_eq(cr_listener_open(lfd, cfg), 0);
    *cfd = cr_test_connect((uint16_t)cr_listener_port(*lfd));
    ck_assert_int_ge(*cfd, 0);
    ck_assert_int_eq(cr_listener_accept(*lfd, fd), 0);
    ck_assert_int_ge(*fd, 0);
}

START_TEST(accepted_fd_is_nonblocking_cloexec_nodelay)
{
    struct cr_listener_config cfg = {.address = "127.0.0.1:0", .backlog = 4};
    char c = 0;
    int lfd;
    int cfd;
    int fd = -1;

    accept_one(&cfg, &lfd, &cfd, &fd);
    ck_assert(has_fd_flag(fd, O_NONBLOCK));
    ck_assert(is_cloexec(fd));
    ck_assert_int_ne(int_option(fd, IPPROTO_TCP, TCP_NODELAY), 0);
    /* It is the connection we made: bytes flow both ways. */
    ck_assert_int_eq(write(cfd, "x", 1), 1);
    ck_assert_int_eq(cr_test_read_exact(fd, &c, 1, 2000), 0);
    ck_assert_int_eq(c, 'x');
    ck_assert_int_eq(write(fd, "y", 1), 1);
    ck_assert_int_eq(cr_test_read_exact(cfd, &c, 1, 2000), 0);
    ck_assert_int_eq(c, 'y');
    /* Only one was pending. */
    ck_assert_int_eq(cr_listener_accept(lfd, &fd), -EAGAIN);
    close(fd);
    close(cfd);
    close(lfd);
}
END_TEST

/* TCP_DEFER_ACCEPT: a silent connection is not accepted; one that has sent
 * is, with its data already there to read. */
START_TEST(defer_accept_hands_over_connections_with_data_only)
{
    struct cr_listener_config cfg = {.address = "127.0.0.1:0", .defer_accept_s = 5};
    char c = 0;
    int lfd;
    int silent;
    int talker;
    int fd = -1;

    ck_assert_int_eq(cr_listener_open(&lfd, &cfg), 0);
    ck_assert_int_gt(int_option(lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT), 0);
    silent = cr_test_connect((uint16_t)cr_listener_port(lfd));
    ck_assert_int_ge(silent, 0);
    usleep(100 * 1000);
    ck_assert_int_eq(cr_listener_accept(lfd, &fd), -EAGAIN);
    talker = cr_test_connect((uint16_t)cr_listener_port(lfd));
    ck_assert_int_ge(talker, 0);
    ck_assert_int_eq(write(talker, "x", 1), 1);
    for (int i = 0; i < 200 && cr_listener_accept(lfd, &fd) == -EAGAIN; i++)
        usleep(10 * 1000);
    ck_assert_int_ge(fd, 0);
    /* No wait needed: the data came before the connection did. */
    ck_assert_int_eq(read(fd, &c, 1), 1);
    ck_assert_int_eq(c, 'x');
    ck_assert_int_eq(cr_listener_accept(lfd, &fd), -EAGAIN);
    close(fd);
    close(talker);
    close(silent);
    /* Also on a socket opened elsewhere; 0 turns it off. */
    ck_assert_int_eq(cr_listener_defer_accept(lfd, 0), 0);
    ck_assert_int_eq(int_option(lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT), 0);
    ck_assert_int_eq(cr_listener_defer_accept(-1, 1), -EBADF);
    close(lfd);
}
END_TEST

/* Accepted connections inherit the listener's congestion control. */
START_TEST(congestion_control_is_inherited_by_accepted_connections)
{
    /* reno is built into every kernel and always allowed. */
    struct cr_listener_config cfg = {.address = "127.0.0.1:0", .congestion = "reno"};
    struct cr_listener_config bad = {.address = "127.0.0.1:0", .congestion = "no-such-cc"};
    char name[32] = "";
    socklen_t len = sizeof(name);
    int lfd;
    int cfd;
    int fd = -1;

    accept_one(&cfg, &lfd, &cfd, &fd);
    ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len), 0);
    ck_assert_str_eq(name, "reno");
    close(fd);
    close(cfd);
    /* Bad names fail the open (nothing left behind) and the call. */
    ck_assert_int_eq(cr_listener_open(&fd, &bad), -ENOENT);
    ck_assert_int_eq(cr_listener_congestion(lfd, "no-such-cc"), -ENOENT);
    ck_assert_int_eq(cr_listener_congestion(lfd, ""), -EINVAL);
    ck_assert_int_eq(cr_listener_congestion(-1, "reno"), -EBADF);
    close(lfd);
}
END_TEST

static int notsent_lowat_of(int fd)
{
    int v = -1;
    socklen_t len = sizeof(v);

    ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, &len), 0);
    return v;
}

/* Accepted connections inherit the listener's TCP_NOTSENT_LOWAT; 0 gives
 * the system's back (the kernel keeps 0 and then reads the sysctl). */
START_TEST(notsent_lowat_is_inherited_by_accepted_connections)
{
    struct cr_listener_config cfg = {.address = "127.0.0.1:0", .notsent_lowat = 16384};
    struct cr_listener_config plain = {.address = "127.0.0.1:0"};
    int lfd;
    int cfd;
    int fd = -1;

    accept_one(&cfg, &lfd, &cfd, &fd);
    ck_assert_int_eq(notsent_lowat_of(lfd), 16384);
    ck_assert_int_eq(notsent_lowat_of(fd), 16384);
    close(fd);
    close(cfd);
    ck_assert_int_eq(cr_listener_notsent_lowat(lfd, 0), 0);
    ck_assert_int_eq(notsent_lowat_of(lfd), 0);
    ck_assert_int_eq(cr_listener_notsent_lowat(lfd, (unsigned)INT_MAX + 1), -EINVAL);
    ck_assert_int_eq(cr_listener_notsent_lowat(-1, 4096), -EBADF);
    close(lfd);
    accept_one(&plain, &lfd, &cfd, &fd);
    ck_assert_int_eq(notsent_lowat_of(fd), 0);
    close(fd);
    close(cfd);
    close(lfd);
}
END_TEST

/* What is(fd) says of a listener on address (1 or 0); -1 when this
 * machine has no IPv6 loopback. */
static int scope_of(const char *address, int (*is)(int fd))
{
    struct cr_listener_config cfg = {.address = address};
    int fd;
    int r;

    if (address[0] == '[' && !open_ipv6_or_skip(&fd, &cfg))
        return -1;
    if (address[0] != '[')
        ck_assert_int_eq(cr_listener_open(&fd, &cfg), 0);
    r = is(fd);
    close(fd);
    return r;
}

static int loopback_of(const char *address)
{
    return scope_of(address, cr_listener_is_loopback);
}

static int wildcard_of(const char *address)
{
    return scope_of(address, cr_listener_is_wildcard);
}

START_TEST(tells_loopback_addresses_from_others)
{
    ck_assert_int_eq(loopback_of("127.0.0.1:0"), 1);
    ck_assert_int_eq(loopback_of("127.1.2.3:0"), 1);
    ck_assert_int_eq(loopback_of("0.0.0.0:0"), 0);
    if (loopback_of("[::1]:0") >= 0) {
        ck_assert_int_eq(loopback_of("[::1]:0"), 1);
        ck_assert_int_eq(loopback_of("[::]:0"), 0);
        ck_assert_int_eq(loopback_of("[::ffff:127.0.0.1]:0"), 1);
        ck_assert_int_eq(loopback_of("[::ffff:0.0.0.0]:0"), 0);
    } else {
        cr_test_skip("listener: loopback_of IPv6 addresses", "no IPv6 here");
    }
    ck_assert_int_eq(cr_listener_is_loopback(-1), -EBADF);
}
END_TEST

START_TEST(tells_wildcard_addresses_from_others)
{
    ck_assert_int_eq(wildcard_of("0.0.0.0:0"), 1);
    ck_assert_int_eq(wildcard_of("127.0.0.1:0"), 0);
    if (wildcard_of("[::]:0") >= 0) {
        ck_assert_int_eq(wildcard_of("[::]:0"), 1);
        ck_assert_int_eq(wildcard_of("[::1]:0"), 0);
        ck_assert_int_eq(wildcard_of("[::ffff:0.0.0.0]:0"), 1);
        ck_assert_int_eq(wildcard_of("[::ffff:127.0.0.1]:0"), 0);
    } else {
        cr_test_skip("listener: wildcard_of IPv6 addresses", "no IPv6 here");
    }
    ck_assert_int_eq(cr_listener_is_wildcard(-1), -EBADF);
}
END_TEST

Suite *listener_suite(void);
Suite *listener_suite(void)
{
    Suite *s = suite_create("listener");
    TCase *parse = tcase_create("parse");
    TCase *sock = tcase_create("socket");

    tcase_add_test(parse, parses_ipv4_address_and_port);
    tcase_add_test(parse, parses_wildcard_forms_as_ipv4_any);
    tcase_add_test(parse, parses_bracketed_ipv6);
    tcase_add_test(parse, rejects_malformed_addresses);
    suite_add_tcase(s, parse);

    tcase_add_test(sock, opens_ipv4_listener_on_free_port);
    tcase_add_test(sock, opens_ipv6_listener_and_reports_bracketed_address);
    tcase_add_test(sock, refuses_bad_config);
    tcase_add_test(sock, address_reports_short_buffer_and_non_sockets);
    tcase_add_test(sock, reuseport_lets_two_listeners_share_a_port);
    tcase_add_test(sock, accept_returns_eagain_when_nothing_is_pending);
    tcase_add_test(sock, accepted_fd_is_nonblocking_cloexec_nodelay);
    tcase_add_test(sock, defer_accept_hands_over_connections_with_data_only);
    tcase_add_test(sock, notsent_lowat_is_inherited_by_accepted_connections);
    tcase_add_test(sock, congestion_control_is_inherited_by_accepted_connections);
    tcase_add_test(sock, tells_loopback_addresses_from_others);
    tcase_add_test(sock, tells_wildcard_addresses_from_others);
    suite_add_tcase(s, sock);
    return s;
}
