/*
 * httpd_slowheads.c (integration) - slow request heads against
 * cabrank-httpd under the process and thread-per-connection models
 * (issue 26): prefork, forking and tpc, each with --header-timeout 1 and
 * --defer-accept 0 (so that the server sees a silent connection at once).
 *
 * For each model: SLOW connections that send "GET /a.txt HTTP/1.1\r\n" and
 * wait, more than the default workers (prefork runs with --max-workers 4,
 * below SLOW, so that a worker per slow head could not be the answer); then
 * a new client must be answered within a margin of what a request took
 * before them; each slow one must be closed one header timeout after it
 * connected, give or take a margin (not later by the time it waited for a
 * worker); and a connection whose first byte comes LATE_MS after it
 * connected must be closed at the timeout from its arrival, not from that
 * byte. Exit 0 pass, 1 fail, 77 skip.
 */
#include "httpd_client.h"

#include <poll.h>

#define SLOW      20
#define HEADER_MS 1000
#define LATE_MS   700

static char base[256];
static char root[300];

/* ms since t0 at which the server closed fd (EOF or reset), or -1 when it
 * was still open timeout_ms after t0. */
static long closed_after(int fd, uint64_t t0, int timeout_ms)
{
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        uint64_t now = cr_test_now_ms();
        char buf[512];
        ssize_t n;

        if (now - t0 >= (uint64_t)timeout_ms)
            return -1;
        if (poll(&pfd, 1, (int)(t0 + (uint64_t)timeout_ms - now)) <= 0)
            continue;
        n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
            continue;
        return (long)(cr_test_now_ms() - t0);
    }
}

/* ms one request on a new connection took, or -1. */
static long timed_get(uint16_t port, int timeout_ms)
{
    struct cr_test_client cl;
    struct hc_resp r;
    uint64_t t0 = cr_test_now_ms();
    int err;

    if (hc_open(&cl, port) < 0)
        return -1;
    err = hc_request(&cl, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r, timeout_ms);
    cr_test_client_close(&cl);
    hc_resp_free(&r);
    return err == 0 && r.status == 200 ? (long)(cr_test_now_ms() - t0) : -1;
}

static void check_model(const char *model, const char *const *extra)
{
    const char *args[16] = {"--model", model, "--header-timeout", "1", "--defer-accept", "0"};
    struct cr_test_client slow[SLOW];
    struct cr_test_client late;
    uint64_t at[SLOW];
    uint64_t late_at;
    struct hc_server s;
    long normal = -1;
    long took;
    long worst = 0;
    long first = -1;
    int n = 6;

    for (int i = 0; extra != NULL && extra[i] != NULL && n < 15; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    if (hc_start(&s, root, args) < 0) {
        hc_failures++;
        return;
    }
    /* What a request takes here and now, before any slow head. */
    for (int i = 0; i < 3; i++) {
        long t = timed_get(s.port, hc_tmo(5000));

        if (t >= 0 && (normal < 0 || t < normal))
            normal = t;
    }
    CHECK(normal >= 0, "%s: no answer before the slow heads", model);
    for (int i = 0; i < SLOW; i++) {
        CHECK(hc_open(&slow[i], s.port) == 0, "%s: connect %d", model, i);
        at[i] = cr_test_now_ms();
        CHECK(hc_send(&slow[i], "GET /a.txt HTTP/1.1\r\n") == 0, "%s: slow head %d", model, i);
    }
    CHECK(hc_open(&late, s.port) == 0, "%s: connect late", model);
    late_at = cr_test_now_ms();
    usleep(200 * 1000);
    took = timed_get(s.port, hc_tmo(1000) + (int)normal * 20);
    fprintf(stderr, "%s: a new client behind %d slow heads: %ld ms (%ld ms before them)\n", model,
            SLOW, took, normal);
    CHECK(took >= 0 && took <= hc_tmo(1000) + normal * 20,
          "%s: a new client behind %d slow heads took %ld ms (%ld ms before them)", model, SLOW,
          took, normal);
    /* The late one's first byte, LATE_MS after it connected. */
    while (cr_test_now_ms() - late_at < LATE_MS)
        usleep(10 * 1000);
    CHECK(hc_send(&late, "GET /a.txt HTTP/1.1\r\n") == 0, "%s: late byte", model);
    for (int i = 0; i < SLOW; i++) {
        long t = closed_after(slow[i].fd, at[i], HEADER_MS + hc_tmo(5000));

        if (first < 0 || (t >= 0 && t < first))
            first = t;
        if (t < 0 || t > worst)
            worst = t < 0 ? 1000000 : t;
        cr_test_client_close(&slow[i]);
    }
    fprintf(stderr, "%s: slow heads closed %ld-%ld ms after they connected (timeout %d ms)\n",
            model, first, worst, HEADER_MS);
    CHECK(first >= HEADER_MS - 150 && worst <= HEADER_MS + hc_tmo(500),
          "%s: slow heads closed %ld-%ld ms after they connected, timeout %d ms", model, first,
          worst, HEADER_MS);
    took = closed_after(late.fd, late_at, HEADER_MS + LATE_MS + hc_tmo(5000));
    fprintf(stderr, "%s: a first byte %d ms late: closed %ld ms after connecting\n", model, LATE_MS,
            took);
    CHECK(took >= HEADER_MS - 150 && took <= HEADER_MS + hc_tmo(500),
          "%s: a first byte %d ms late: closed %ld ms after connecting, timeout %d ms", model,
          LATE_MS, took, HEADER_MS);
    cr_test_client_close(&late);
    CHECK(hc_alive(&s), "%s: server died", model);
    CHECK(hc_stop(&s) == 0, "%s: stop", model);
}

int main(void)
{
    const char *const prefork[] = {"--max-workers", "4", NULL};
    int rc = 1;

    if (hc_mkdtemp(base, sizeof(base)) < 0) {
        fprintf(stderr, "httpd_slowheads: setup: %s\n", strerror(errno));
        return 1;
    }
    snprintf(root, sizeof(root), "%s/root", base);
    if (mkdir(root, 0755) < 0 || hc_write_file(root, "a.txt", "A", 1) < 0) {
        fprintf(stderr, "httpd_slowheads: making the root: %s\n", strerror(errno));
        goto out;
    }
    check_model("prefork", prefork);
    check_model("forking", NULL);
    check_model("tpc", NULL);
    if (hc_failures == 0) {
        fprintf(stderr, "httpd_slowheads: ok\n");
        rc = 0;
    } else {
        fprintf(stderr, "httpd_slowheads: %d check(s) failed\n", hc_failures);
    }
out:
    (void)cr_test_rmtree(base);
    return rc;
}
