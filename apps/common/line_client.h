/*
 * line_client.h - a blocking client of a server on 127.0.0.1 with deadlines: connect, send
 * all, a buffered reader of lines and counted bytes. The tests, the lab services' protocol
 * (lab_services.h) and tools/pgo_train's HTTP client (http_client.h) speak through it. One
 * thread per client.
 */
#ifndef CABRANK_APPS_LINE_CLIENT_H
#define CABRANK_APPS_LINE_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Monotonic milliseconds. */
uint64_t cr_test_now_ms(void);

/* Connects to 127.0.0.1:port (blocking). Returns the fd or -errno. */
int cr_test_connect(uint16_t port);

/* Writes all of buf (blocking fd). Returns 0 or -errno. */
int cr_test_write_all(int fd, const void *buf, size_t len);

/* A buffered reader of a client socket (blocking fd). */
struct cr_test_client {
    int fd;
    size_t off;
    size_t len;
    char buf[8192];
};

/* Connects to 127.0.0.1:port. 0 or -errno. */
int cr_test_client_open(struct cr_test_client *cl, uint16_t port);

/* Closes the socket (NULL-safe on fd -1). */
void cr_test_client_close(struct cr_test_client *cl);

/* Sends all of s. 0 or -errno. */
int cr_test_client_send(struct cr_test_client *cl, const char *s);

/* Reads one line into line[0..max) without its '\n', NUL-terminated, within
 * timeout_ms. Its length, -ETIMEDOUT, -EPIPE at EOF, -ENOSPC when longer
 * than max - 1, or -errno. */
ssize_t cr_test_client_line(struct cr_test_client *cl, char *line, size_t max, int timeout_ms);

/* Reads exactly len bytes (buf may be NULL to skip them). 0, -ETIMEDOUT,
 * -EPIPE at EOF, or -errno. */
int cr_test_client_read(struct cr_test_client *cl, char *buf, size_t len, int timeout_ms);

/* Waits for end of stream (a reset counts). 0, -ETIMEDOUT, or -EPROTO when
 * data arrives instead. */
int cr_test_client_eof(struct cr_test_client *cl, int timeout_ms);

/* Sends line (adding '\n') and reads the reply line. Length or -errno. */
ssize_t cr_test_client_request(struct cr_test_client *cl, const char *line, char *reply, size_t max,
                               int timeout_ms);

#endif /* CABRANK_APPS_LINE_CLIENT_H */
