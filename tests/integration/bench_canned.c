/*
 * bench_canned.c (integration) - cabrank-bench's canned peers (apps/bench/canned*.c). Each mode
 * is started the way the lab starts it (bench_server_spawn(): its own session, port 0 on
 * 127.0.0.1, the port read from its "listening on" line), then: a pipelined pair of requests
 * gets two answers; a head split across two writes gets one; a Connection: close request
 * (lower case, inside a list) gets the close answer, then end of stream, and the request sent
 * after it none; TERM ends it with status 0. Where io_uring is refused, canned-uring must exit
 * 3 saying "not available" rather than pass unnoticed. Then a lab run with --peers
 * canned-epoll,canned-uring and tiny loads must write their rows, with the CPU split columns
 * (or say "canned-uring not available"). wrk is a test dependency, as for bench_smoke. Exit 0
 * pass, 1 fail.
 */
#include "../../apps/bench/canned.h"
#include "../../apps/bench/driver.h"
#include "bench_lab.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char keep_alive[] =
    "HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n\r\nHello, world\n";
static const char close_answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: "
                                   "text/plain\r\nConnection: close\r\n\r\nHello, world\n";
static const char request[] = "GET /hello.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
/* Reads until end of stream, cap bytes or the deadline. Returns the bytes read (*eof set when
 * the stream ended) or -errno. */
static ssize_t read_until_eof(int fd, char *buf, size_t cap, int timeout_ms, bool *eof)
{
    uint64_t deadline = cr_test_now_ms() + (uint64_t)timeout_ms;
    size_t used = 0;

    *eof = false;
    while (used < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        uint64_t now = cr_test_now_ms();
        ssize_t n;

        if (now >= deadline)
            break;
        if (poll(&p, 1, (int)(deadline - now)) <= 0)
            continue;
        n = recv(fd, buf + used, cap - used, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == ECONNRESET ? (ssize_t)used : -errno;
        if (n == 0) {
            *eof = true;
            break;
        }
        used += (size_t)n;
    }
    return (ssize_t)used;
}

/* Reads exactly the bytes of want and compares them. */
static void expect_bytes(int fd, const char *want, size_t len, const char *what)
{
    char *got = malloc(len);
    int err;

    if (got == NULL) {
        bl_fail("%s: out of memory", what);
        return;
    }
    err = cr_test_read_exact(fd, got, len, cr_test_tmo(5000));
    if (err < 0)
        bl_fail("%s: reading %zu bytes: %s", what, len, strerror(-err));
    else if (memcmp(got, want, len) != 0)
        bl_fail("%s: the answer differs from the canned one", what);
    free(got);
}

static int connect_to(uint16_t port, const char *what)
{
    int fd = cr_test_connect(port);

    if (fd < 0)
        bl_fail("%s: connect: %s", what, strerror(-fd));
    return fd;
}

static void send_text(int fd, const char *text, const char *what)
{
    int err = cr_test_write_all(fd, text, strlen(text));

    if (err < 0)
        bl_fail("%s: write: %s", what, strerror(-err));
}

/* Two requests in one write: two answers, then the connection still serves. */
static void check_pipelined(uint16_t port, const char *mode)
{
    char two[2 * sizeof(request)];
    char answers[2 * sizeof(keep_alive)];
    int fd = connect_to(port, mode);

    if (fd < 0)
        return;
    snprintf(two, sizeof(two), "%s%s", request, request);
    snprintf(answers, sizeof(answers), "%s%s", keep_alive, keep_alive);
    send_text(fd, two, mode);
    expect_bytes(fd, answers, strlen(answers), "pipelined pair");
    /* "\r\n\r" then "\n": the terminator's match carries over from one read to the next. */
    send_text(fd, "GET /hello.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n\r", mode);
    usleep(50000);
    send_text(fd, "\n", mode);
    expect_bytes(fd, keep_alive, strlen(keep_alive), "split head");
    close(fd);
}

/* A keep-alive request, then one asking to close (lower case, in a list), then one more: the
 * keep-alive answer, the close answer, end of stream; the third request is not answered. */
static void check_close(uint16_t port, const char *mode)
{
    static const char reqs[] = "GET /hello.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                               "GET /hello.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "connection: keep-alive, CLOSE\r\n\r\n"
                               "GET /hello.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    char want[sizeof(keep_alive) + sizeof(close_answer)];
    char got[1024];
    bool eof;
    ssize_t n;
    int fd = connect_to(port, mode);

    if (fd < 0)
        return;
    snprintf(want, sizeof(want), "%s%s", keep_alive, close_answer);
    send_text(fd, reqs, mode);
    n = read_until_eof(fd, got, sizeof(got), cr_test_tmo(5000), &eof);
    if (n < 0)
        bl_fail("%s close: read: %s", mode, strerror((int)-n));
    else if (!eof)
        bl_fail("%s close: no end of stream after %zd bytes", mode, n);
    else if ((size_t)n != strlen(want) || memcmp(got, want, (size_t)n) != 0)
        bl_fail("%s close: %zd bytes, want the keep-alive then the close answer (%zu)", mode, n,
                strlen(want));
    close(fd);
}

/* Starts the mode as the lab does; false when it did not start (s->pid is then -1). */
static bool start_mode(const char *mode, const char *dir, struct bench_server *s, char *log,
                       size_t cap)
{
    char bench[PATH_MAX];
    char *argv[] = {bench, "--canned", (char *)mode, "--listen", "127.0.0.1:0", NULL};
    int err;

    cr_test_build_path("cabrank-bench", bench, sizeof(bench));
    snprintf(log, cap, "%s/canned-%s.log", dir, mode);
    err = bench_server_spawn(argv, log, cr_test_tmo(10000), s);
    if (err < 0) {
        s->pid = -1;
        return false;
    }
    return true;
}

/* TERM: the responder exits 0 within the lab's grace period. */
static void stop_mode(struct bench_server *s, const char *mode)
{
    int status;

    kill(s->pid, SIGTERM);
    if (cr_test_wait_exit(s->pid, 5000, &status) < 0)
        bl_fail("canned-%s ignored TERM for 5 s", mode);
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        bl_fail("canned-%s exit status 0x%x after TERM, want 0", mode, status);
    s->pid = -1;
    bench_server_stop(s); /* its stdout pipe */
}

static bool file_has(const char *path, const char *needle)
{
    char buf[8192];

    return cr_test_read_small(path, buf, sizeof(buf)) && strstr(buf, needle) != NULL;
}

static void check_mode(const char *mode, const char *dir, bool available)
{
    struct bench_server s;
    char log[PATH_MAX];

    if (!start_mode(mode, dir, &s, log, sizeof(log))) {
        if (available)
            bl_fail("canned-%s did not start; see %s", mode, log);
        else if (!file_has(log, "not available"))
            bl_fail("canned-%s did not start and did not say it is not available", mode);
        else
            fprintf(stderr, "canned-%s not available here, as its probe said\n", mode);
        return;
    }
    if (!available)
        bl_fail("canned-%s started though its probe said it is not available", mode);
    check_pipelined(s.port, mode);
    check_close(s.port, mode);
    stop_mode(&s, mode);
}

/* ------------------------------------------------------------ the lab run */

/* Rows per server: cabrank, canned-epoll, canned-uring. */
/* One row: of a canned peer or cabrank, on a hello.txt workload, measured. */
static void check_row(char **f, void *arg)
{
    static const char *const servers[3] = {"cabrank", "canned-epoll", "canned-uring"};
    int *rows = arg;
    int k;

    for (k = 0; k < 3 && strcmp(f[1], servers[k]) != 0; k++)
        ;
    if (k == 3) {
        bl_fail("a row of server '%s'", f[1]);
        return;
    }
    rows[k]++;
    if (strcmp(f[0], "http:hello.txt") != 0 && strcmp(f[0], "http-close:hello.txt") != 0)
        bl_fail("%s: a row of workload '%s'", f[1], f[0]);
    if (cr_test_number(f[13]) != 0 || !(cr_test_number(f[5]) > 0))
        bl_fail("%s %s: errors '%s', req/s '%s'", f[1], f[0], f[13], f[5]);
    /* Measured: CPU, and its user and system parts (tick-sampled, so 0 is possible). */
    if (!(cr_test_number(f[10]) >= 0) || !(cr_test_number(f[15]) >= 0) ||
        !(cr_test_number(f[16]) >= 0))
        bl_fail("%s %s: cpu '%s' user '%s' sys '%s'", f[1], f[0], f[10], f[15], f[16]);
}

static void check_lab(const char *dir, bool uring)
{
    char bench[PATH_MAX];
    char out[PATH_MAX];
    char err_path[PATH_MAX];
    int rows[3] = {0};
    char *argv[32];
    char *errtext;
    int n = 0;

    cr_test_build_path("cabrank-bench", bench, sizeof(bench));
    snprintf(out, sizeof(out), "%s/lab", dir);
    snprintf(err_path, sizeof(err_path), "%s/lab.stderr", dir);
    argv[n++] = bench;
    argv[n++] = "--configs";
    argv[n++] = "lf:lifo";
    argv[n++] = "--peers";
    argv[n++] = "canned-epoll,canned-uring";
    argv[n++] = "--workloads";
    argv[n++] = "http:hello.txt,http-close:hello.txt";
    argv[n++] = "--concurrency";
    argv[n++] = "4";
    argv[n++] = "--seconds";
    argv[n++] = "0.5";
    argv[n++] = "--warmup";
    argv[n++] = "0";
    argv[n++] = "--repeat"; /* the claims' repetitions are bench_smoke's */
    argv[n++] = "1";
    argv[n++] = "--out";
    argv[n++] = out;
    argv[n] = NULL;
    bl_run(argv, err_path);
    bl_check_csv(out, check_row, rows); /* rows per server: cabrank, canned-epoll, canned-uring */
    if (rows[0] != 2 || rows[1] != 2)
        bl_fail("rows: cabrank %d, canned-epoll %d; want 2 each", rows[0], rows[1]);
    errtext = cr_test_read_file(err_path, NULL);
    if (uring && rows[2] != 2)
        bl_fail("canned-uring: %d rows, want 2", rows[2]);
    if (!uring &&
        (rows[2] != 0 || errtext == NULL || strstr(errtext, "canned-uring not available") == NULL))
        bl_fail("canned-uring unavailable: %d rows, and no 'canned-uring not available' message",
                rows[2]);
    if (bl_failures > 0 && errtext != NULL)
        fprintf(stderr, "cabrank-bench's stderr:\n%s", errtext);
    free(errtext);
}

int main(void)
{
    char bench[PATH_MAX];
    char dir[] = "/tmp/cr-bench-canned-XXXXXX";
    char why[256] = "";
    bool uring;

    if (bl_setup(bench, sizeof(bench), dir) < 0)
        return 1;
    uring = bench_canned_available("canned-uring", why, sizeof(why));
    if (!uring)
        fprintf(stderr, "canned-uring is not available here: %s\n", why);
    check_mode("epoll", dir, true);
    check_mode("uring", dir, uring);
    check_lab(dir, uring);
    if (cr_test_rmtree(dir) < 0)
        fprintf(stderr, "could not remove %s\n", dir);
    if (bl_failures > 0) {
        fprintf(stderr, "bench_canned: %d bl_failures\n", bl_failures);
        return 1;
    }
    printf("bench_canned: ok%s\n", uring ? "" : " (canned-uring not available, as reported)");
    return 0;
}
