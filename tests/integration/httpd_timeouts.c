/*
 * httpd_timeouts.c (integration) - cabrank-httpd's timeouts and signals,
 * with small configured timeouts: a slowloris client trickling one byte of
 * its head every 100 ms is closed at the header timeout (a total, not reset
 * by each byte) while another client keeps being served; a connection that
 * sends nothing is closed at the header timeout; the keep-alive idle timeout
 * closes between requests; the body timeout closes a stalled request body;
 * the send timeout closes a client that stopped reading; SIGUSR1 reopens the
 * access log after it was moved away; SIGTERM finishes a large response in
 * flight, closes idle connections and exits 0; SIGQUIT stops at once.
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include "httpd_client.h"

#include <poll.h>

#define BIGSIZE (32u * 1024 * 1024)
/* The configured timeouts, in ms. */
#define HEADER_MS    1000
#define KEEPALIVE_MS 500
#define BODY_MS      1000
#define SEND_MS      1000
#define NARGS        12 /* main's arguments before the two spare slots */

static char base[256];
static char root[300];
static char logpath[400];

/* Reads and drops what arrives until EOF or a reset; returns the ms that
 * took, or -1 when the connection was still open after timeout_ms. *bytes
 * (if not NULL) counts what was read. */
static long wait_closed(int fd, int timeout_ms, size_t *bytes)
{
    uint64_t start = cr_test_now_ms();
    char buf[65536];

    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        uint64_t now = cr_test_now_ms();
        ssize_t n;

        if (now - start >= (uint64_t)timeout_ms)
            return -1;
        if (poll(&pfd, 1, (int)(start + (uint64_t)timeout_ms - now)) <= 0)
            continue;
        n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) {
            if (bytes != NULL)
                *bytes += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        return (long)(cr_test_now_ms() - start);
    }
}

/* A head trickled one byte per 100 ms must be cut at the header timeout,
 * counted from its first byte, while another client is served throughout. */
static void test_slowloris(uint16_t port)
{
    static const char head[] = "GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ";
    struct cr_test_client slow;
    struct cr_test_client other;
    uint64_t start;
    long closed_at = -1;
    int served = 0;

    if (hc_open(&slow, port) < 0 || hc_open(&other, port) < 0) {
        hc_failures++;
        return;
    }
    start = cr_test_now_ms();
    for (size_t i = 0; cr_test_now_ms() - start < (uint64_t)(HEADER_MS * 4); i++) {
        char ch = i < sizeof(head) - 1 ? head[i] : 'a';
        struct pollfd pfd = {.fd = slow.fd, .events = POLLIN};
        struct hc_resp r;

        if (poll(&pfd, 1, 0) > 0) {
            char buf[256];
            ssize_t n = recv(slow.fd, buf, sizeof(buf), MSG_DONTWAIT);

            if (n <= 0 && !(n < 0 && errno == EAGAIN)) {
                closed_at = (long)(cr_test_now_ms() - start);
                break;
            }
            CHECK(n <= 0, "slowloris got an answer");
        }
        if (send(slow.fd, &ch, 1, MSG_NOSIGNAL) < 0) {
            closed_at = (long)(cr_test_now_ms() - start);
            break;
        }
        if (hc_request(&other, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(2000)) == 0 &&
            r.status == 200)
            served++;
        else
            CHECK(false, "the other client was not served at %llu ms",
                  (unsigned long long)(cr_test_now_ms() - start));
        hc_resp_free(&r);
        usleep(100 * 1000);
    }
    fprintf(stderr, "slowloris: closed after %ld ms; the other client got %d answers meanwhile\n",
            closed_at, served);
    CHECK(closed_at >= HEADER_MS - 150 && closed_at <= HEADER_MS + hc_tmo(1000),
          "slowloris closed after %ld ms, header timeout %d ms", closed_at, HEADER_MS);
    CHECK(served >= 5, "other client served %d times", served);
    cr_test_client_close(&slow);
    cr_test_client_close(&other);
}

/* Nothing sent at all: closed at the header timeout, after up to extra_ms
 * (--defer-accept: the kernel holds a silent connection that long before
 * the server sees it). */
static void test_silent_connection(uint16_t port, long extra_ms, const char *what)
{
    struct cr_test_client cl;
    long t;

    if (hc_open(&cl, port) < 0) {
        hc_failures++;
        return;
    }
    t = wait_closed(cl.fd, HEADER_MS + extra_ms + hc_tmo(3000), NULL);
    fprintf(stderr, "silent connection (%s): closed after %ld ms\n", what, t);
    CHECK(t >= HEADER_MS - 150 && t <= HEADER_MS + extra_ms + hc_tmo(1000),
          "silent connection (%s): %ld ms", what, t);
    cr_test_client_close(&cl);
}

static void test_idle_timeouts(uint16_t port)
{
    struct cr_test_client cl;
    struct hc_resp r;
    long t;

    /* Between requests: the keep-alive timeout, from the answer on. */
    if (hc_open(&cl, port) < 0) {
        hc_failures++;
        return;
    }
    CHECK(hc_request(&cl, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(3000)) == 0 &&
              r.status == 200,
          "keep-alive request");
    hc_resp_free(&r);
    t = wait_closed(cl.fd, KEEPALIVE_MS + hc_tmo(3000), NULL);
    CHECK(t >= KEEPALIVE_MS - 150 && t <= KEEPALIVE_MS + hc_tmo(1000), "keep-alive idle: %ld ms",
          t);
    cr_test_client_close(&cl);

    /* A body that stalls: answered at once, closed at the body timeout. */
    if (hc_open(&cl, port) < 0) {
        hc_failures++;
        return;
    }
    CHECK(hc_request(&cl,
                     "POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789", &r,
                     hc_tmo(3000)) == 0 &&
              r.status == 405,
          "stalled body: answer %d", r.status);
    hc_resp_free(&r);
    t = wait_closed(cl.fd, BODY_MS + hc_tmo(3000), NULL);
    CHECK(t >= BODY_MS - 150 && t <= BODY_MS + hc_tmo(1000), "stalled body: %ld ms", t);
    cr_test_client_close(&cl);
}

/* A reader that stops: closed once sending made no progress for the send
 * timeout, well before the whole file went out. */
static void test_send_timeout(uint16_t port)
{
    struct cr_test_client cl;
    size_t got = 0;
    long t;

    if (hc_open(&cl, port) < 0) {
        hc_failures++;
        return;
    }
    CHECK(hc_send(&cl, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n") == 0, "send");
    usleep((SEND_MS + 1500) * 1000);
    t = wait_closed(cl.fd, hc_tmo(10000), &got);
    CHECK(t >= 0, "stalled reader still connected");
    CHECK(got < BIGSIZE, "stalled reader got all %zu bytes", got);
    fprintf(stderr, "send timeout: the stalled reader got %zu of %u bytes\n", got, BIGSIZE);
    cr_test_client_close(&cl);
}

static size_t file_size(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

/* SIGUSR1: the moved log keeps what was written; a new file appears. */
static void test_reopen(struct hc_server *s)
{
    char moved[450];
    uint64_t deadline;

    snprintf(moved, sizeof(moved), "%s.1", logpath);
    CHECK(hc_status(s->port, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n") == 200, "before USR1");
    CHECK(rename(logpath, moved) == 0, "rename: %s", strerror(errno));
    kill(s->pid, SIGUSR1);
    /* The reopen happens on the server's main thread; requests until the
     * new file shows one. */
    deadline = cr_test_now_ms() + (uint64_t)hc_tmo(5000);
    while (file_size(logpath) == 0 && cr_test_now_ms() < deadline) {
        CHECK(hc_status(s->port, "GET /after-usr1 HTTP/1.1\r\nHost: t\r\n\r\n") == 404,
              "after USR1");
        usleep(200 * 1000);
    }
    CHECK(file_size(logpath) > 0, "no new access log after SIGUSR1");
    CHECK(file_size(moved) > 0, "the moved log is empty");
}

/* SIGTERM with a large response in flight and an idle connection. */
static void test_graceful(void)
{
    const char *const args[] = {"--threads", "3", NULL};
    struct hc_server s;
    struct cr_test_client busy;
    struct cr_test_client idle;
    struct hc_resp r;
    char buf[65536];
    size_t got = 0;
    int status = -1;
    long t;

    if (hc_start(&s, root, args) < 0) {
        hc_failures++;
        return;
    }
    if (hc_open(&busy, s.port) < 0 || hc_open(&idle, s.port) < 0) {
        hc_failures++;
        kill(s.pid, SIGKILL);
        return;
    }
    CHECK(hc_request(&idle, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(3000)) == 0,
          "idle connection's request");
    hc_resp_free(&r);
    CHECK(hc_send(&busy, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n") == 0, "big request");
    /* The head and a first piece, so the answer is surely in flight. */
    CHECK(cr_test_client_line(&busy, buf, sizeof(buf), hc_tmo(3000)) > 0 &&
              strncmp(buf, "HTTP/1.1 200", 12) == 0,
          "big answer");
    while (cr_test_client_line(&busy, buf, sizeof(buf), hc_tmo(3000)) > 1)
        ;
    CHECK(cr_test_client_read(&busy, NULL, 65536, hc_tmo(3000)) == 0, "first piece");
    got = 65536;
    kill(s.pid, SIGTERM);
    /* The idle connection closes; the busy one goes on to the end. */
    t = wait_closed(idle.fd, hc_tmo(5000), NULL);
    CHECK(t >= 0, "idle connection kept open after SIGTERM");
    while (got < BIGSIZE) {
        size_t n = BIGSIZE - got < sizeof(buf) ? BIGSIZE - got : sizeof(buf);

        if (cr_test_client_read(&busy, buf, n, hc_tmo(10000)) < 0)
            break;
        got += n;
        if (got < 4u * 1024 * 1024)
            usleep(2000); /* a slowish reader for the first MiBs */
    }
    CHECK(got == BIGSIZE, "in-flight answer cut at %zu of %u bytes", got, BIGSIZE);
    t = wait_closed(busy.fd, hc_tmo(5000), NULL);
    CHECK(t >= 0, "busy connection not closed after its answer");
    CHECK(cr_test_wait_exit(s.pid, hc_tmo(10000), &status) == 0 && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0,
          "graceful exit status %d", status);
    cr_test_client_close(&busy);
    cr_test_client_close(&idle);
}

/* SIGQUIT: out at once, even with a reader that stalls. */
static void test_quit(void)
{
    const char *const args[] = {"--threads", "2", NULL};
    struct hc_server s;
    struct cr_test_client cl = {.fd = -1};
    uint64_t start;

    if (hc_start(&s, root, args) < 0) {
        hc_failures++;
        return;
    }
    CHECK(hc_open(&cl, s.port) == 0, "connect for the request in flight");
    if (cl.fd >= 0) {
        CHECK(hc_send(&cl, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n") == 0, "big request");
        usleep(200 * 1000);
    }
    start = cr_test_now_ms();
    CHECK(hc_stop_sig(&s, SIGQUIT, hc_tmo(5000)) == 0, "SIGQUIT exit");
    CHECK(cr_test_now_ms() - start < (uint64_t)hc_tmo(3000), "SIGQUIT took %llu ms",
          (unsigned long long)(cr_test_now_ms() - start));
    cr_test_client_close(&cl);
}

int main(void)
{
    char hms[16];
    char kms[16];
    char bms[16];
    char sms[16];
    char *args[] = {"--threads",
                    "3",
                    "--header-timeout",
                    hms,
                    "--keepalive-timeout",
                    kms,
                    "--body-timeout",
                    bms,
                    "--send-timeout",
                    sms,
                    "--access-log",
                    logpath,
                    NULL,
                    NULL,
                    NULL};
    unsigned char *big;
    struct hc_server s;
    int rc = 1;

    snprintf(hms, sizeof(hms), "%.3f", HEADER_MS / 1000.0);
    snprintf(kms, sizeof(kms), "%.3f", KEEPALIVE_MS / 1000.0);
    snprintf(bms, sizeof(bms), "%.3f", BODY_MS / 1000.0);
    snprintf(sms, sizeof(sms), "%.3f", SEND_MS / 1000.0);
    big = calloc(1, BIGSIZE);
    if (big == NULL || hc_mkdtemp(base, sizeof(base)) < 0) {
        fprintf(stderr, "httpd_timeouts: setup: %s\n", strerror(errno));
        free(big);
        return 1;
    }
    snprintf(root, sizeof(root), "%s/root", base);
    snprintf(logpath, sizeof(logpath), "%s/access.log", base);
    hc_pattern(big, BIGSIZE, 3);
    if (mkdir(root, 0755) < 0 || hc_write_file(root, "a.txt", "A", 1) < 0 ||
        hc_write_file(root, "index.html", "i\n", 2) < 0 ||
        hc_write_file(root, "big.bin", big, BIGSIZE) < 0) {
        fprintf(stderr, "httpd_timeouts: making the root: %s\n", strerror(errno));
        goto out;
    }
    if (hc_start(&s, root, (const char *const *)args) < 0)
        goto out;
    test_slowloris(s.port);
    /* The default --defer-accept 1: SYN-ACK retransmitted after 1 s, then
     * accepted on the client's ACK (a second retransmit by 3 s at worst). */
    test_silent_connection(s.port, 2000, "--defer-accept 1");
    test_idle_timeouts(s.port);
    test_send_timeout(s.port);
    test_reopen(&s);
    CHECK(hc_alive(&s), "server died");
    CHECK(hc_stop(&s) == 0, "stop");
    args[NARGS] = "--defer-accept";
    args[NARGS + 1] = "0";
    if (hc_start(&s, root, (const char *const *)args) == 0) {
        test_silent_connection(s.port, 0, "--defer-accept 0");
        CHECK(hc_stop(&s) == 0, "stop");
    } else {
        hc_failures++;
    }
    test_graceful();
    test_quit();
    if (hc_failures == 0) {
        fprintf(stderr, "httpd_timeouts: ok\n");
        rc = 0;
    } else {
        fprintf(stderr, "httpd_timeouts: %d check(s) failed\n", hc_failures);
    }
out:
    (void)cr_test_rmtree(base);
    free(big);
    return rc;
}
