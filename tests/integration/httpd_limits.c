/*
 * httpd_limits.c (integration) - cabrank-httpd at its resource limits: with
 * --max-connections 4 under each model (prefork: a pool of 2 workers x 2
 * threads, as it caps processes), a fifth client waits unanswered
 * while four connections are open and is served once one closes; with a
 * descriptor limit (RLIMIT_NOFILE) far below the clients waiting, the
 * server keeps serving the connections it has, does not spin on EMFILE
 * (its CPU time over a second stays low), and serves new clients once
 * descriptors are free again. Exit 0 pass, 1 fail, 77 skip.
 */
#include <cabrank/server.h>

#include "httpd_client.h"

#include <poll.h>
#include <sys/resource.h>

#define MAX_CONNS  4
#define FD_LIMIT   48
#define FD_CLIENTS 80

static const char *const req = "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n";

/* Whether an answer arrives on fd within ms. */
static bool answered_within(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};

    return poll(&p, 1, ms) > 0;
}

static void test_max_connections(const char *root, const char *model)
{
    const char *const threads[] = {"--model",           model, "--threads", "8",
                                   "--max-connections", "4",   NULL};
    /* prefork caps processes, not connections: a pool of max-workers x
     * threads, each serving one connection at a time, gives the same four
     * (as in test_models). */
    const char *const prefork[] = {
        "--model",     model, "--threads",         "2", "--workers", "2", "--max-workers", "2",
        "--min-spare", "1",   "--max-connections", "4", NULL};
    const char *const *args = strcmp(model, "prefork") == 0 ? prefork : threads;
    struct cr_test_client cl[MAX_CONNS];
    struct cr_test_client extra;
    struct hc_server s;
    struct hc_resp r;

    if (hc_start(&s, root, args) < 0) {
        hc_failures++;
        return;
    }
    for (int i = 0; i < MAX_CONNS; i++) {
        cl[i].fd = -1;
        CHECK(hc_open(&cl[i], s.port) == 0 && hc_request(&cl[i], req, &r, hc_tmo(5000)) == 0 &&
                  r.status == 200,
              "%s: connection %d", model, i);
        hc_resp_free(&r);
    }
    /* The fifth: connected by the kernel, not accepted by the server. */
    CHECK(hc_open(&extra, s.port) == 0 && hc_send(&extra, req) == 0, "%s: fifth", model);
    CHECK(!answered_within(extra.fd, 500), "%s: fifth connection served beyond the cap", model);
    /* One leaves: the fifth is taken and answered. */
    cr_test_client_close(&cl[0]);
    CHECK(hc_read(&extra, false, &r, hc_tmo(5000)) == 0 && r.status == 200,
          "%s: fifth not served after a close", model);
    hc_resp_free(&r);
    for (int i = 1; i < MAX_CONNS; i++) {
        CHECK(hc_request(&cl[i], req, &r, hc_tmo(5000)) == 0 && r.status == 200,
              "%s: connection %d again", model, i);
        hc_resp_free(&r);
        cr_test_client_close(&cl[i]);
    }
    cr_test_client_close(&extra);
    CHECK(hc_stop(&s) == 0, "%s: stop", model);
}

/* utime + stime of pid in clock ticks, or -1. */
static long cpu_ticks(pid_t pid)
{
    char path[64];
    char buf[1024];
    char *p;
    long utime;
    long stime;
    int fd;
    ssize_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    p = strrchr(buf, ')');
    /* After "pid (comm)": state ppid pgrp session tty tpgid flags minflt
     * cminflt majflt cmajflt utime stime. */
    if (p == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &utime, &stime) != 2)
        return -1;
    return utime + stime;
}

static void test_emfile(const char *root)
{
    const char *const args[] = {"--threads", "2", NULL};
    struct rlimit old;
    struct rlimit low;
    struct cr_test_client cl[FD_CLIENTS];
    struct hc_server s;
    struct hc_resp r;
    long t0;
    long t1;
    long hz = sysconf(_SC_CLK_TCK);
    int spawned;

    if (getrlimit(RLIMIT_NOFILE, &old) < 0)
        return;
    low = old;
    low.rlim_cur = FD_LIMIT;
    /* The server inherits the low limit; we get ours back at once. */
    if (setrlimit(RLIMIT_NOFILE, &low) < 0) {
        CHECK(false, "setrlimit: %s", strerror(errno));
        return;
    }
    spawned = hc_start(&s, root, args);
    (void)setrlimit(RLIMIT_NOFILE, &old);
    if (spawned < 0) {
        hc_failures++;
        return;
    }
    /* Warm the file cache: at EMFILE no file could be opened (503), but a
     * cached one is still served. */
    CHECK(hc_status(s.port, req) == 200, "before EMFILE");
    for (int i = 0; i < FD_CLIENTS; i++) {
        cl[i].fd = -1;
        if (hc_open(&cl[i], s.port) < 0)
            break;
    }
    /* Some are accepted, the rest wait; the server is at EMFILE. */
    usleep(300 * 1000);
    CHECK(hc_request(&cl[0], req, &r, hc_tmo(5000)) == 0 && r.status == 200,
          "an accepted connection is not served at EMFILE");
    hc_resp_free(&r);
    t0 = cpu_ticks(s.pid);
    usleep(1000 * 1000);
    t1 = cpu_ticks(s.pid);
    fprintf(stderr, "at EMFILE: %ld ms of server CPU in 1 s\n", (t1 - t0) * 1000 / hz);
    CHECK(t0 >= 0 && t1 >= 0 && (t1 - t0) * 1000 / hz < 400,
          "server spins at EMFILE: %ld ms of CPU in 1 s", (t1 - t0) * 1000 / hz);
    for (int i = 0; i < FD_CLIENTS; i++)
        cr_test_client_close(&cl[i]);
    /* Descriptors are free again: new clients are served (after the
     * acceptor's back-off, at most a second). */
    CHECK(hc_status(s.port, req) == 200, "not serving after EMFILE");
    CHECK(hc_alive(&s), "server died at EMFILE");
    CHECK(hc_stop(&s) == 0, "stop after EMFILE");
}

int main(void)
{
    char root[256];
    int rc = 1;

    if (hc_mkdtemp(root, sizeof(root)) < 0 || hc_write_file(root, "a.txt", "A", 1) < 0) {
        fprintf(stderr, "httpd_limits: making the root: %s\n", strerror(errno));
        return 1;
    }
    for (const char *const *m = cr_server_models(); *m != NULL; m++)
        test_max_connections(root, *m);
    test_emfile(root);
    if (hc_failures == 0) {
        fprintf(stderr, "httpd_limits: ok\n");
        rc = 0;
    } else {
        fprintf(stderr, "httpd_limits: %d check(s) failed\n", hc_failures);
    }
    (void)cr_test_rmtree(root);
    return rc;
}
