/*
 * server_proc.h - starting a server program under test and stopping it: the tests'
 * and tools/pgo_train's way to run a built cabrank program on 127.0.0.1 port 0 and learn its
 * port. One thread; the caller owns (reaps) the child.
 */
#ifndef CABRANK_APPS_SERVER_PROC_H
#define CABRANK_APPS_SERVER_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

#endif /* CABRANK_APPS_SERVER_PROC_H */
