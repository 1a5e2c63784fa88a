/*
 * examples_session.c (integration) - runs examples/session_counter on
 * 127.0.0.1 port 0 under the lf and hshr models: a session begun on one
 * connection is continued on another (the counter adds up across them), an
 * ended session is unknown afterwards, a malformed id is unknown, and
 * SIGTERM ends the server with status 0. Exit 0 pass, 1 fail.
 */
#include "../support/support.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_MS 20000

/* Sends one request line on fd and reads the answer line into out (without
 * its newline). 0 or -1. */
static int ask(int fd, const char *req, char *out, size_t cap)
{
    size_t n = 0;

    if (cr_test_write_all(fd, req, strlen(req)) < 0)
        return -1;
    while (n + 1 < cap) {
        if (cr_test_read_exact(fd, out + n, 1, WAIT_MS) < 0)
            return -1;
        if (out[n] == '\n') {
            out[n] = '\0';
            return 0;
        }
        n++;
    }
    return -1;
}

/* Expects answer `want` to req on fd. 0 or -1 (said why). */
static int expect(int fd, const char *req, const char *want, const char *model)
{
    char got[64];

    if (ask(fd, req, got, sizeof(got)) < 0) {
        fprintf(stderr, "%s: %s: no answer\n", model, req);
        return -1;
    }
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "%s: %s: '%s', expected '%s'\n", model, req, got, want);
        return -1;
    }
    return 0;
}

static int run_model(const char *model)
{
    char path[4096];
    char *argv[] = {path, "--listen", "127.0.0.1:0", "--model", (char *)model, NULL};
    char id[64];
    char req[128];
    int a = -1;
    int b = -1;
    int status = 0;
    uint16_t port;
    pid_t pid;
    int rc = -1;

    cr_test_build_path("examples/session_counter", path, sizeof(path));
    if (cr_test_spawn_server(argv, &pid, &port, WAIT_MS) < 0) {
        fprintf(stderr, "%s: session_counter did not start\n", model);
        return -1;
    }
    a = cr_test_connect(port);
    b = cr_test_connect(port);
    if (a < 0 || b < 0 || ask(a, "new\n", id, sizeof(id)) < 0 || strlen(id) != 16) {
        fprintf(stderr, "%s: new: no session\n", model);
        goto out;
    }
    snprintf(req, sizeof(req), "add %s 5\n", id);
    if (expect(a, req, "5", model) < 0)
        goto out;
    snprintf(req, sizeof(req), "add %s 7\n", id);
    if (expect(b, req, "12", model) < 0)
        goto out;
    snprintf(req, sizeof(req), "end %s\n", id);
    if (expect(b, req, "12", model) < 0 || expect(a, req, "unknown", model) < 0 ||
        expect(a, "add 0 1\n", "unknown", model) < 0)
        goto out;
    rc = 0;
out:
    if (a >= 0)
        close(a);
    if (b >= 0)
        close(b);
    kill(pid, rc == 0 ? SIGTERM : SIGKILL);
    if (cr_test_wait_exit(pid, WAIT_MS, &status) < 0 ||
        (rc == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))) {
        fprintf(stderr, "%s: session_counter exit status 0x%x\n", model, status);
        rc = -1;
    }
    if (rc == 0)
        fprintf(stderr, "%s: ok\n", model);
    return rc;
}

int main(void)
{
    int failed = 0;

    failed += run_model("lf") < 0;
    failed += run_model("hshr") < 0;
    return failed == 0 ? 0 : 1;
}
