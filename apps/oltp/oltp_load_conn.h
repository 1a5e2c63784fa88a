/*
 * oltp_load_conn.h - the load generator's client connection: the target's
 * address, a connect, a whole send and a reply read, each bounded by a
 * deadline in oltp_load_now_ns() time. Used by oltp_load.c (its clients and
 * its setup). Thread-safe: each call works on the caller's socket and
 * buffers only.
 */
#ifndef CABRANK_OLTP_LOAD_CONN_H
#define CABRANK_OLTP_LOAD_CONN_H

#include "proto.h"

#include <cabrank/common.h>

#include <sys/socket.h>

/* The read buffer oltp_load_read_reply needs: two frames. */
#define OLTP_LOAD_RBUF (2 * OLTP_MAX_FRAME)

/* The monotonic clock, in ns, that every deadline here counts in. */
uint64_t oltp_load_now_ns(void);

/* Resolves "HOST:PORT" into *addr and *len. 0 or -EINVAL. */
CR_MUST_CHECK int oltp_load_resolve(const char *target, struct sockaddr_storage *addr,
                                    socklen_t *len);

/*
 * A non-blocking TCP connection to addr (TCP_NODELAY; linger0: closed by a
 * reset, so a connection per request leaves no TIME_WAIT), made by deadline.
 * The fd (returns owned), -ETIMEDOUT or -errno.
 */
CR_MUST_CHECK int oltp_load_connect(const struct sockaddr_storage *addr, socklen_t len,
                                    bool linger0, uint64_t deadline);

/* Sends all of buf by deadline. 0, -ETIMEDOUT or -errno. */
CR_MUST_CHECK int oltp_load_send_all(int fd, const void *buf, size_t len, uint64_t deadline);

/*
 * Reads the next reply frame from fd through rbuf (OLTP_LOAD_RBUF bytes, of
 * which *rlen are kept from the last call) into *rep by deadline: 0,
 * -ETIMEDOUT, -EPIPE (closed), -EPROTO (undecodable) or -errno.
 */
CR_MUST_CHECK int oltp_load_read_reply(int fd, unsigned char *rbuf, size_t *rlen,
                                       struct oltp_reply *rep, uint64_t deadline);

#endif /* CABRANK_OLTP_LOAD_CONN_H */
