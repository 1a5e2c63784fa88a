/*
 * server_proc.c - starting a server program under test and stopping it (server_proc.h): the
 * program's path in the build, fork and exec with its stdout piped back until it says where
 * it listens, and a bounded wait for its exit. Called by the tests and tools/pgo_train from
 * their one thread; the caller owns the child it returns.
 */
#include "server_proc.h"
#include "line_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

const char *cr_test_build_path(const char *rel, char *buf, size_t len)
{
    const char *dir = getenv("CR_BUILD_DIR");

    snprintf(buf, len, "%s/%s", dir != NULL && dir[0] != '\0' ? dir : "build", rel);
    return buf;
}

/* Reads the child's stdout until a "listening on ...:PORT" line. */
static int read_port(int fd, uint16_t *port, int timeout_ms)
{
    char line[512];
    size_t used = 0;
    uint64_t deadline = cr_test_now_ms() + (uint64_t)timeout_ms;

    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        uint64_t now = cr_test_now_ms();
        ssize_t n;
        char *nl;

        if (now >= deadline)
            return -ETIMEDOUT;
        if (poll(&pfd, 1, (int)(deadline - now)) <= 0)
            continue;
        n = read(fd, line + used, sizeof(line) - 1 - used);
        if (n <= 0)
            return n == 0 ? -EPIPE : -errno;
        used += (size_t)n;
        line[used] = '\0';
        while ((nl = strchr(line, '\n')) != NULL) {
            char *at;

            *nl = '\0';
            fprintf(stderr, "[server] %s\n", line);
            at = strstr(line, "listening on ");
            if (at != NULL) {
                char *colon = strrchr(at, ':');

                if (colon != NULL) {
                    *port = (uint16_t)atoi(colon + 1);
                    return 0;
                }
            }
            used -= (size_t)(nl + 1 - line);
            memmove(line, nl + 1, used + 1);
        }
        if (used == sizeof(line) - 1)
            used = 0; /* an over-long line cannot be ours */
    }
}

int cr_test_spawn_server(char *const argv[], pid_t *pid, uint16_t *port, int timeout_ms)
{
    int pfd[2];
    int err;

    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -errno;
    *pid = fork();
    if (*pid < 0) {
        err = -errno;
        close(pfd[0]);
        close(pfd[1]);
        return err;
    }
    if (*pid == 0) {
        dup2(pfd[1], STDOUT_FILENO);
        execv(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(pfd[1]);
    err = read_port(pfd[0], port, timeout_ms);
    /* Later output of the server is not read: keep the pipe open so its writes
     * never fail with EPIPE, and let it close with our process. */
    if (err < 0) {
        close(pfd[0]);
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
    }
    return err;
}

int cr_test_wait_exit(pid_t pid, int timeout_ms, int *status)
{
    uint64_t deadline = cr_test_now_ms() + (uint64_t)timeout_ms;

    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);

        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR)
            return -errno;
        if (cr_test_now_ms() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, status, 0);
            return -ETIMEDOUT;
        }
        usleep(2000);
    }
}
