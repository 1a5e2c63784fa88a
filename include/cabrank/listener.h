/*
 * listener.h - listening sockets: open a non-blocking, close-on-exec TCP
 * listening socket from an address string (IPv4 or IPv6; SO_REUSEADDR
 * always, SO_REUSEPORT on request), set its options and accept from it.
 * Plain functions, thread-safe. The acceptor, which accepts through a
 * cr_reactor, is acceptor.h.
 */
#ifndef CABRANK_LISTENER_H
#define CABRANK_LISTENER_H

#include <cabrank/common.h>
#include <sys/socket.h>

struct cr_listener_config {
    /* "127.0.0.1:8080", "[::1]:0", "[::]:80", "*:80" or ":80" (all IPv4),
     * "localhost:8080" is refused: numeric addresses only. Port 0 binds any
     * free port; cr_listener_address() tells which. */
    const char *address;
    int backlog;    /* 0 = 511 */
    bool reuseport; /* SO_REUSEPORT, for one listener per thread or process */
    bool v6only;    /* IPV6_V6ONLY on an IPv6 address */
    /* TCP_DEFER_ACCEPT: hand a connection to accept() once its first data
     * has arrived, or after about this many seconds of silence; 0: at once */
    unsigned defer_accept_s;
    /* TCP_CONGESTION, which accepted connections inherit ("cubic", "reno",
     * "bbr": net.ipv4.tcp_available_congestion_control); NULL: the
     * system's default. BBR without the fq qdisc paces every socket with
     * a timer, which on loopback costs CPU and makes large transfers slow
     * in some runs and not in others (figures: docs/design/server_api.md). */
    const char *congestion;
    /* TCP_NOTSENT_LOWAT, which accepted connections inherit: a connection
     * takes more data only while less than this many bytes of what it took
     * are still unsent; 0: the system's (net.ipv4.tcp_notsent_lowat,
     * unlimited by default). See cr_server_config.notsent_lowat. */
    unsigned notsent_lowat;
};

/*
 * Parses an address string as cr_listener_config.address. -EINVAL if it is
 * malformed. Thread-safe.
 */
CR_MUST_CHECK int cr_listener_parse(const char *address, struct sockaddr_storage *ss,
                                    socklen_t *len);

/*
 * Opens, binds and listens; stores the socket in *fd_out (returns owned).
 * -EINVAL for a bad address, else -errno of socket/bind/listen. Thread-safe.
 */
CR_MUST_CHECK int cr_listener_open(int *fd_out, const struct cr_listener_config *cfg);

/* Sets TCP_DEFER_ACCEPT (see cr_listener_config) on a listening socket, one
 * opened elsewhere too. 0 or -errno. Thread-safe. */
CR_MUST_CHECK int cr_listener_defer_accept(int fd, unsigned seconds);

/* Sets TCP_CONGESTION (see cr_listener_config) on a listening socket, one
 * opened elsewhere too. 0, -ENOENT for an algorithm the kernel does not
 * have, -EPERM for one not in net.ipv4.tcp_allowed_congestion_control
 * (unprivileged), or -errno. Thread-safe. */
CR_MUST_CHECK int cr_listener_congestion(int fd, const char *name);

/* Sets TCP_NOTSENT_LOWAT (see cr_listener_config; 0 restores the system's)
 * on a listening socket, one opened elsewhere too. 0 or -errno. Thread-safe. */
CR_MUST_CHECK int cr_listener_notsent_lowat(int fd, unsigned bytes);

/* Whether a socket is bound to a loopback address (127.0.0.0/8, ::1, or
 * ::ffff:127.0.0.0/104), so that only this host can reach it: 1 or 0, or
 * -errno. A wildcard address is not loopback. Thread-safe. */
CR_MUST_CHECK int cr_listener_is_loopback(int fd);

/* Whether a socket is bound to the wildcard address (0.0.0.0, ::, or
 * ::ffff:0.0.0.0), so that this host's clients may reach it over loopback
 * as well as others over the network: 1 or 0, or -errno. Thread-safe. */
CR_MUST_CHECK int cr_listener_is_wildcard(int fd);

/* Writes the bound address of a socket as "127.0.0.1:34567" or "[::1]:80".
 * -ENOSPC if buf is too small, -errno. Thread-safe. */
CR_MUST_CHECK int cr_listener_address(int fd, char *buf, size_t len);

/* The bound local port of a socket, or -errno. Thread-safe. */
CR_MUST_CHECK int cr_listener_port(int fd);

/*
 * Accepts one connection, non-blocking and close-on-exec. It inherits the
 * listener's socket options: cr_listener_open() sets TCP_NODELAY, so Nagle
 * is off (set it on a listener opened otherwise). *fd_out returns owned. -EAGAIN when none is
 * pending; -EMFILE, -ENFILE, -ENOBUFS, -ENOMEM when out of resources. Connections that failed
 * before they were accepted (-ECONNABORTED, -EPROTO, network errors) are skipped; after 256 of them
 * in one call it returns -EAGAIN, so an error that never clears cannot trap the caller.
 * Thread-safe.
 */
CR_MUST_CHECK int cr_listener_accept(int listen_fd, int *fd_out);

#endif /* CABRANK_LISTENER_H */
