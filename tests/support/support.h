/*
 * support.h - helpers shared by unit and integration tests: loopback socket
 * pairs, starting a server program and reading the port it reports, bounded
 * waits. Everything targets 127.0.0.1 only.
 */
#ifndef CABRANK_TEST_SUPPORT_H
#define CABRANK_TEST_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A connected TCP pair over 127.0.0.1: fds[0] client, fds[1] server side.
 * Both blocking, close-on-exec. Returns 0 or -errno. */
int cr_test_tcp_pair(int fds[2]);

/* Sets or clears O_NONBLOCK. Returns 0 or -errno. */
int cr_test_set_nonblock(int fd, bool on);

/* Connects to 127.0.0.1:port (blocking). Returns the fd or -errno. */
int cr_test_connect(uint16_t port);

/* Writes all of buf (blocking fd). Returns 0 or -errno. */
int cr_test_write_all(int fd, const void *buf, size_t len);

/* Reads exactly len bytes within timeout_ms. 0, -ETIMEDOUT, -EPIPE on EOF,
 * or -errno. */
int cr_test_read_exact(int fd, void *buf, size_t len, int timeout_ms);

/* Path of a built program: $CR_BUILD_DIR/<rel> (default build/<rel>). */
const char *cr_test_build_path(const char *rel, char *buf, size_t len);

/*
 * Starts argv[0] with argv, its stdout piped back, and waits up to timeout_ms
 * for a line containing "listening on <addr>:<port>"; returns the port in
 * *port and the child in *pid. Other output goes through to our stderr.
 * Returns 0 or -errno (-ETIMEDOUT if the server never said it).
 */
int cr_test_spawn_server(char *const argv[], pid_t *pid, uint16_t *port, int timeout_ms);

/* Waits up to timeout_ms for pid to exit; stores its wait status. 0, or
 * -ETIMEDOUT (the child is then killed with SIGKILL and reaped). */
int cr_test_wait_exit(pid_t pid, int timeout_ms, int *status);

/* The state letter and the parent of process pid, from /proc/<pid>/stat;
 * false when there is no such process. */
bool cr_test_proc_stat(pid_t pid, char *state, pid_t *ppid);

/* Reads a file of under cap bytes (from its start, one read) into buf as a
 * string. False if it cannot be opened or is empty. */
bool cr_test_read_small(const char *path, char *buf, size_t cap);

/* Removes the tree at dir, not following symlinks. 0, or -errno of the
 * first entry that could not be removed (the rest are still tried). */
int cr_test_rmtree(const char *dir);

/* The whole file at path, NUL-terminated, its length in *len (may be NULL);
 * the caller frees it. NULL if it cannot be read. */
char *cr_test_read_file(const char *path, size_t *len);

/* Splits a CSV line without quotes into f[] (in place); returns the field
 * count, or max + 1 when there are more than max. */
int cr_test_split_csv(char *line, char **f, int max);

/* A whole-field decimal number, or -1 for anything else (empty too). */
double cr_test_number(const char *s);

/*
 * Reads the CSV file at path (no quoted fields): its first line must be
 * header, every later non-empty line nfields fields (at most 32), each
 * handed to row(f, arg) in order. Returns the rows handed over, or -1 with
 * why (cap bytes) filled: unreadable, no or another header, a row with
 * another field count (the rows before it were handed over).
 */
int cr_test_csv_rows(const char *path, const char *header, int nfields,
                     void (*row)(char **f, void *arg), void *arg, char *why, size_t cap);

/* Whether pid has ended: gone, or a zombie (which holds no socket, lock or
 * file any more). */
bool cr_test_proc_is_gone(pid_t pid);

/* Monotonic milliseconds. */
uint64_t cr_test_now_ms(void);

/* A wait of ms that expects something, scaled by CK_TIMEOUT_MULTIPLIER
 * (tests/run.sh sets it per variant; capped at 10x) for loaded machines
 * and sanitizer builds. */
int cr_test_tmo(int ms);

#endif /* CABRANK_TEST_SUPPORT_H */
