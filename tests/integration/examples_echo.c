/*
 * examples_echo.c (integration) - runs the echo examples end to end:
 * examples/server_echo under every model cr_server_models() names,
 * examples/lf_echo, examples/proactor_echo (default engine, then the
 * emulated one), each on 127.0.0.1 port 0 with a bounded exchange from
 * several clients at once, then SIGTERM, which must end it with status 0;
 * and examples/bound_pool_client, standalone and against server_echo. Exit
 * 0 pass, 1 fail.
 */
#include <cabrank/server.h>

#include "../support/support.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CLIENTS 8
#define ROUNDS  20
#define WAIT_MS 20000

/* CLIENTS connections open at once, each sending ROUNDS messages of its own
 * and reading each back. 0 or -1 (said why). */
static int echo_round(uint16_t port, const char *label)
{
    int fds[CLIENTS];
    int rc = -1;

    for (int i = 0; i < CLIENTS; i++)
        fds[i] = -1;
    for (int i = 0; i < CLIENTS; i++) {
        fds[i] = cr_test_connect(port);
        if (fds[i] < 0) {
            fprintf(stderr, "%s: connect: %s\n", label, strerror(-fds[i]));
            goto out;
        }
    }
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < CLIENTS; i++) {
            char msg[512];
            char back[512];
            int n = snprintf(msg, sizeof(msg), "client %d round %d %.*s", i, r, r * 20,
                             "................................................................"
                             "................................................................"
                             "................................................................"
                             "................................................................"
                             "................................................................"
                             "................................................................");

            if (cr_test_write_all(fds[i], msg, (size_t)n) < 0 ||
                cr_test_read_exact(fds[i], back, (size_t)n, WAIT_MS) < 0 ||
                memcmp(msg, back, (size_t)n) != 0) {
                fprintf(stderr, "%s: client %d round %d: no echo\n", label, i, r);
                goto out;
            }
        }
    }
    rc = 0;
out:
    for (int i = 0; i < CLIENTS; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
    }
    return rc;
}

/* SIGTERM; the server must exit 0. 0 or -1. */
static int stop(pid_t pid, const char *label)
{
    int status = 0;

    kill(pid, SIGTERM);
    if (cr_test_wait_exit(pid, WAIT_MS, &status) < 0) {
        fprintf(stderr, "%s: ignored SIGTERM\n", label);
        return -1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "%s: exit status 0x%x\n", label, status);
        return -1;
    }
    return 0;
}

/* Runs examples/<prog> with its options and "--listen 127.0.0.1:0", and
 * then `then` (when not NULL) against its port. 0 or -1. */
static int run_server(const char *prog, const char *opt, const char *val,
                      int (*then)(uint16_t port, const char *label))
{
    char path[4096];
    char rel[128];
    char label[128];
    char *argv[] = {path, "--listen", "127.0.0.1:0", (char *)opt, (char *)val, NULL};
    uint16_t port;
    pid_t pid;
    int err;
    int rc;

    snprintf(rel, sizeof(rel), "examples/%s", prog);
    cr_test_build_path(rel, path, sizeof(path));
    snprintf(label, sizeof(label), "%s %s %s", prog, opt ? opt : "", val ? val : "");
    err = cr_test_spawn_server(argv, &pid, &port, WAIT_MS);
    if (err < 0) {
        fprintf(stderr, "%s: start: %s\n", label, strerror(-err));
        return -1;
    }
    rc = echo_round(port, label);
    if (rc == 0 && then != NULL)
        rc = then(port, label);
    if (rc < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    rc = stop(pid, label);
    if (rc == 0)
        fprintf(stderr, "%s: ok\n", label);
    return rc;
}

/* examples/bound_pool_client, with --connect 127.0.0.1:port when port > 0. */
static int bound_pool_client(uint16_t port, const char *label)
{
    char path[4096];
    char target[64];
    char *argv[] = {path, "--threads", "4", "--calls", "50", "--connect", target, NULL};
    int status = 0;
    pid_t pid;

    cr_test_build_path("examples/bound_pool_client", path, sizeof(path));
    snprintf(target, sizeof(target), "127.0.0.1:%u", port);
    if (port == 0)
        argv[5] = NULL;
    pid = fork();
    if (pid == 0) {
        execv(path, argv);
        _exit(127);
    }
    if (pid < 0 || cr_test_wait_exit(pid, WAIT_MS, &status) < 0 || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        fprintf(stderr, "%s: bound_pool_client failed (status 0x%x)\n", label, status);
        return -1;
    }
    fprintf(stderr, "%s: bound_pool_client ok\n", label);
    return 0;
}

int main(void)
{
    int failed = 0;

    for (const char *const *m = cr_server_models(); *m != NULL; m++)
        failed += run_server("server_echo", "--model", *m, NULL) < 0;
    failed += run_server("server_echo", "--model", "lf", bound_pool_client) < 0;
    failed += bound_pool_client(0, "standalone") < 0;
    failed += run_server("lf_echo", "--threads", "3", NULL) < 0;
    failed += run_server("proactor_echo", NULL, NULL, NULL) < 0;
    failed += run_server("proactor_echo", "--engine", "emulated", NULL) < 0;
    if (failed != 0) {
        fprintf(stderr, "examples_echo: %d run(s) failed\n", failed);
        return 1;
    }
    return 0;
}
