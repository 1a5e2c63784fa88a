/*
 * support.h - helpers shared by unit and integration tests: loopback socket
 * pairs, bounded reads and waits, /proc and CSV readers. The client, the
 * server starter and the scratch-tree removal they share with tools/ live in
 * apps/common/ (included below). Everything targets 127.0.0.1 only.
 */
#ifndef CABRANK_TEST_SUPPORT_H
#define CABRANK_TEST_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../apps/common/line_client.h"
#include "../../apps/common/scratch.h"
#include "../../apps/common/server_proc.h"

/* A connected TCP pair over 127.0.0.1: fds[0] client, fds[1] server side.
 * Both blocking, close-on-exec. Returns 0 or -errno. */
int cr_test_tcp_pair(int fds[2]);

/* Sets or clears O_NONBLOCK. Returns 0 or -errno. */
int cr_test_set_nonblock(int fd, bool on);

/* Reads exactly len bytes within timeout_ms. 0, -ETIMEDOUT, -EPIPE on EOF,
 * or -errno. */
int cr_test_read_exact(int fd, void *buf, size_t len, int timeout_ms);

/* The state letter and the parent of process pid, from /proc/<pid>/stat;
 * false when there is no such process. */
bool cr_test_proc_stat(pid_t pid, char *state, pid_t *ppid);

/* Reads a file of under cap bytes (from its start, one read) into buf as a
 * string. False if it cannot be opened or is empty. */
bool cr_test_read_small(const char *path, char *buf, size_t cap);

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

/* A wait of ms that expects something, scaled by CK_TIMEOUT_MULTIPLIER
 * (tests/run.sh sets it per variant; capped at 10x) for loaded machines
 * and sanitizer builds. */
int cr_test_tmo(int ms);

/*
 * Records that what (a test, a variant) was not run here, and why: prints
 * "SKIP what: why" and appends "<pid> what: why" to the file $CR_TEST_SKIPS
 * names (the unit runner sets it and counts the lines as skipped in its
 * summary and in tests/run.sh's). Use it wherever a test or a variant would
 * otherwise be left out silently, or pass by returning early.
 */
void cr_test_skip(const char *what, const char *why);

#endif /* CABRANK_TEST_SUPPORT_H */
