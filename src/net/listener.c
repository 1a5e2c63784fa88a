/*
 * listener.c - listening sockets: parse a numeric address, open a non-blocking
 * close-on-exec TCP listener on it, report what it is bound to, and accept from
 * it (anet.c's role in Redis). Called by the acceptor, the models and the apps,
 * from any thread; every function is a plain system-call wrapper holding no
 * state, so all are thread-safe. Owns nothing: descriptors are returned owned.
 */
#include <cabrank/listener.h>

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_BACKLOG 511

/*
 * Connections that failed between the handshake and accept() (aborted, refused
 * by a firewall, or a network error that Linux passes through accept(), see
 * accept(2) NOTES) cost one accept() call each and leave the queue. One call
 * skips at most this many, so an error that does not consume a connection (an
 * LSM denying accept() with EPERM) cannot loop here forever: the caller gets
 * -EAGAIN, and a level-triggered reactor calls it again after other handles.
 */
#define ACCEPT_SKIP_MAX 256

/* Parses a decimal port, "0" to "65535", no sign or spaces. */
static int parse_port(const char *s, uint16_t *port)
{
    unsigned long v = 0;

    if (*s == '\0')
        return -EINVAL;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9')
            return -EINVAL;
        v = v * 10 + (unsigned long)(*s - '0');
        if (v > 65535)
            return -EINVAL;
    }
    *port = (uint16_t)v;
    return 0;
}

/* "[v6]:port": host is the text between the brackets. */
static int parse_v6(const char *address, struct sockaddr_storage *ss, socklen_t *len)
{
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
    const char *close = strchr(address, ']');
    char host[INET6_ADDRSTRLEN];
    size_t hlen;
    uint16_t port;

    if (close == NULL || close[1] != ':')
        return -EINVAL;
    hlen = (size_t)(close - (address + 1));
    if (hlen == 0 || hlen >= sizeof(host))
        return -EINVAL;
    memcpy(host, address + 1, hlen);
    host[hlen] = '\0';
    if (parse_port(close + 2, &port) < 0)
        return -EINVAL;
    if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1)
        return -EINVAL;
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    *len = sizeof(*sin6);
    return 0;
}

/* "a.b.c.d:port", "*:port" or ":port". An IPv6 address must be bracketed. */
static int parse_v4(const char *address, struct sockaddr_storage *ss, socklen_t *len)
{
    struct sockaddr_in *sin = (struct sockaddr_in *)ss;
    const char *colon = strchr(address, ':');
    char host[INET_ADDRSTRLEN];
    size_t hlen;
    uint16_t port;

    if (colon == NULL)
        return -EINVAL;
    hlen = (size_t)(colon - address);
    if (hlen >= sizeof(host))
        return -EINVAL;
    memcpy(host, address, hlen);
    host[hlen] = '\0';
    /* Digits only: a second colon (an unbracketed IPv6 address) fails here. */
    if (parse_port(colon + 1, &port) < 0)
        return -EINVAL;
    if (hlen == 0 || strcmp(host, "*") == 0)
        sin->sin_addr.s_addr = htonl(INADDR_ANY);
    else if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
        return -EINVAL;
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    *len = sizeof(*sin);
    return 0;
}

int cr_listener_parse(const char *address, struct sockaddr_storage *ss, socklen_t *len)
{
    int err;

    if (address == NULL || address[0] == '\0')
        return -EINVAL;
    memset(ss, 0, sizeof(*ss));
    if (address[0] == '[')
        err = parse_v6(address, ss, len);
    else
        err = parse_v4(address, ss, len);
    if (err < 0)
        memset(ss, 0, sizeof(*ss));
    return err;
}

static int set_int_option(int fd, int level, int name, int value)
{
    if (setsockopt(fd, level, name, &value, sizeof(value)) < 0)
        return -errno;
    return 0;
}

int cr_listener_defer_accept(int fd, unsigned seconds)
{
    if (seconds > INT_MAX)
        return -EINVAL;
    return set_int_option(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, (int)seconds);
}

int cr_listener_congestion(int fd, const char *name)
{
    if (name == NULL || name[0] == '\0')
        return -EINVAL;
    if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)strlen(name)) < 0)
        return -errno;
    return 0;
}

int cr_listener_notsent_lowat(int fd, unsigned bytes)
{
    if (bytes > INT_MAX)
        return -EINVAL;
    return set_int_option(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, (int)bytes);
}

int cr_listener_open(int *fd_out, const struct cr_listener_config *cfg)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int backlog;
    int fd;
    int err;

    if (cfg == NULL || cfg->backlog < 0)
        return -EINVAL;
    err = cr_listener_parse(cfg->address, &ss, &len);
    if (err < 0)
        return err;
    backlog = cfg->backlog == 0 ? DEFAULT_BACKLOG : cfg->backlog;
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /* A restarted server must rebind while old connections sit in TIME_WAIT. */
    err = set_int_option(fd, SOL_SOCKET, SO_REUSEADDR, 1);
    if (err < 0)
        goto out_close_fd;
    if (cfg->reuseport) {
        err = set_int_option(fd, SOL_SOCKET, SO_REUSEPORT, 1);
        if (err < 0)
            goto out_close_fd;
    }
    /* Set both ways so the result does not depend on net.ipv6.bindv6only. */
    if (ss.ss_family == AF_INET6) {
        err = set_int_option(fd, IPPROTO_IPV6, IPV6_V6ONLY, cfg->v6only ? 1 : 0);
        if (err < 0)
            goto out_close_fd;
    }
    /* Accepted sockets inherit it (Linux), which spares cr_listener_accept
     * a setsockopt per connection. */
    err = set_int_option(fd, IPPROTO_TCP, TCP_NODELAY, 1);
    if (err < 0)
        goto out_close_fd;
    if (cfg->defer_accept_s != 0) {
        err = cr_listener_defer_accept(fd, cfg->defer_accept_s);
        if (err < 0)
            goto out_close_fd;
    }
    if (cfg->congestion != NULL) {
        err = cr_listener_congestion(fd, cfg->congestion);
        if (err < 0)
            goto out_close_fd;
    }
    if (cfg->notsent_lowat != 0) {
        err = cr_listener_notsent_lowat(fd, cfg->notsent_lowat);
        if (err < 0)
            goto out_close_fd;
    }
    if (bind(fd, (struct sockaddr *)&ss, len) < 0) {
        err = -errno;
        goto out_close_fd;
    }
    if (listen(fd, backlog) < 0) {
        err = -errno;
        goto out_close_fd;
    }
    *fd_out = fd;
    return 0;

out_close_fd:
    close(fd);
    return err;
}

static int local_address(int fd, struct sockaddr_storage *ss)
{
    socklen_t len = sizeof(*ss);

    if (getsockname(fd, (struct sockaddr *)ss, &len) < 0)
        return -errno;
    if (ss->ss_family != AF_INET && ss->ss_family != AF_INET6)
        return -EAFNOSUPPORT;
    return 0;
}

enum address_scope {
    SCOPE_OTHER = 0,
    SCOPE_LOOPBACK,
    SCOPE_WILDCARD,
};

/* Where socket fd is bound: loopback, the wildcard, or elsewhere; an IPv4
 * address mapped into IPv6 counts as its IPv4 self. Or -errno. */
static int address_scope(int fd)
{
    struct sockaddr_storage ss;
    const struct in6_addr *a6;
    uint32_t v4;
    int err;

    err = local_address(fd, &ss);
    if (err < 0)
        return err;
    if (ss.ss_family == AF_INET) {
        v4 = ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr);
    } else {
        a6 = &((struct sockaddr_in6 *)&ss)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a6))
            return SCOPE_LOOPBACK;
        if (IN6_IS_ADDR_UNSPECIFIED(a6))
            return SCOPE_WILDCARD;
        if (!IN6_IS_ADDR_V4MAPPED(a6))
            return SCOPE_OTHER;
        v4 = ntohl(a6->s6_addr32[3]);
    }
    if ((v4 >> 24) == IN_LOOPBACKNET)
        return SCOPE_LOOPBACK;
    return v4 == INADDR_ANY ? SCOPE_WILDCARD : SCOPE_OTHER;
}

int cr_listener_is_loopback(int fd)
{
    int scope = address_scope(fd);

    return scope < 0 ? scope : scope == SCOPE_LOOPBACK;
}

int cr_listener_is_wildcard(int fd)
{
    int scope = address_scope(fd);

    return scope < 0 ? scope : scope == SCOPE_WILDCARD;
}

int cr_listener_address(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    char host[INET6_ADDRSTRLEN];
    int n;
    int err;

    err = local_address(fd, &ss);
    if (err < 0)
        return err;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

        if (inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host)) == NULL)
            return -errno;
        n = snprintf(buf, len, "%s:%u", host, (unsigned)ntohs(sin->sin_port));
    } else {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

        if (inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host)) == NULL)
            return -errno;
        n = snprintf(buf, len, "[%s]:%u", host, (unsigned)ntohs(sin6->sin6_port));
    }
    if (n < 0 || (size_t)n >= len)
        return -ENOSPC;
    return 0;
}

int cr_listener_port(int fd)
{
    struct sockaddr_storage ss;
    int err;

    err = local_address(fd, &ss);
    if (err < 0)
        return err;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

/* Errors that end one pending connection, not the listener (accept(2) NOTES). */
static bool is_connection_error(int err)
{
    switch (err) {
    case ECONNABORTED:
    case EPROTO:
    case EPERM:
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
        return true;
    default:
        return false;
    }
}

int cr_listener_accept(int listen_fd, int *fd_out)
{
    int skipped = 0;
    int fd;
    int err;

    for (;;) {
        fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0)
            break;
        err = errno;
        if (err == EINTR)
            continue;
        if (is_connection_error(err) && ++skipped < ACCEPT_SKIP_MAX)
            continue;
        if (err == EWOULDBLOCK || err == EAGAIN || is_connection_error(err))
            return -EAGAIN;
        return -err;
    }
    *fd_out = fd;
    return 0;
}
