/*
 * httpd_basic.c (integration) - cabrank-httpd's HTTP basics over raw
 * sockets, on a temporary document root: GET, HEAD, OPTIONS, 405 with
 * Allow (and the discarded body of such a request, by length and chunked),
 * keep-alive, 20 pipelined requests in one write answered in order, HTTP/1.0
 * against 1.1 persistence, Date/Server/Content-Length on every answer, the
 * 301 from /dir to /dir/, index.html, no listing, 404, traversal attempts
 * (never a byte of the file outside the root), the requests-per-connection
 * cap, the status page (HTML and JSON) and the access log written at exit.
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include "httpd_client.h"

/* linux/tcp.h, not netinet/tcp.h: glibc's struct tcp_info stops before
 * the segment counts (tcpi_segs_in, Linux 4.2). */
#include <linux/tcp.h>
#include <netinet/in.h>

#define SECRET "TOP-SECRET-OUTSIDE-THE-ROOT\n"
#define HELLO  "Hello, world\n"
#define INDEX  "<h1>the index</h1>\n"
#define DIRIDX "<p>dir index</p>\n"

static char base[256];
static char root[300];

static int make_root(void)
{
    char secret[300];
    char link[700];

    if (hc_mkdtemp(base, sizeof(base)) < 0)
        return -1;
    snprintf(root, sizeof(root), "%s/root", base);
    snprintf(secret, sizeof(secret), "%s/secret.txt", base);
    if (mkdir(root, 0755) < 0 || hc_write_file(base, "secret.txt", SECRET, strlen(SECRET)) < 0 ||
        hc_write_file(root, "hello.txt", HELLO, strlen(HELLO)) < 0 ||
        hc_write_file(root, "index.html", INDEX, strlen(INDEX)) < 0 ||
        hc_write_file(root, "a.txt", "A", 1) < 0 || hc_write_file(root, "b.txt", "BB", 2) < 0 ||
        hc_mkdir(root, "dir") < 0 || hc_write_file(root, "dir/index.html", DIRIDX, 17) < 0 ||
        hc_mkdir(root, "empty") < 0 || hc_write_file(root, "empty/x.txt", "x", 1) < 0)
        return -1;
    snprintf(link, sizeof(link), "%s/outside", root);
    if (symlink(secret, link) < 0)
        return -1;
    snprintf(link, sizeof(link), "%s/outside-rel", root);
    if (symlink("../secret.txt", link) < 0)
        return -1;
    return 0;
}

/* Date, Server and Content-Length, which every answer carries. */
static void check_common(const struct hc_resp *r, const char *what)
{
    char v[128];

    CHECK(hc_header(r, "Date", v, sizeof(v)) && strlen(v) == 29 && strstr(v, " GMT") != NULL,
          "%s: Date", what);
    CHECK(hc_header_is(r, "Server", "cabrank"), "%s: Server", what);
    CHECK(hc_has_header(r, "Content-Length"), "%s: Content-Length", what);
}

static void test_get_head_options(uint16_t port)
{
    struct cr_test_client cl;
    struct hc_resp r;

    if (hc_open(&cl, port) < 0) {
        hc_failures++;
        return;
    }
    CHECK(hc_request(&cl, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) == 0,
          "GET");
    CHECK(r.status == 200, "GET status %d", r.status);
    CHECK(r.body_len == 13 && memcmp(r.body, HELLO, 13) == 0, "GET body");
    CHECK(hc_header_is(&r, "Content-Length", "13"), "Content-Length");
    CHECK(hc_header_is(&r, "Content-Type", "text/plain; charset=utf-8"), "Content-Type");
    CHECK(hc_has_header(&r, "ETag") && hc_has_header(&r, "Last-Modified"), "validators");
    CHECK(!hc_has_header(&r, "Connection"), "1.1 keep-alive needs no Connection field");
    check_common(&r, "GET");
    hc_resp_free(&r);

    /* HEAD: the same fields, no body; the next answer on the connection
     * shows no stray body bytes came. */
    CHECK(hc_request(&cl, "HEAD /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) == 0,
          "HEAD");
    CHECK(r.status == 200 && hc_header_is(&r, "Content-Length", "13"), "HEAD head");
    check_common(&r, "HEAD");
    hc_resp_free(&r);
    CHECK(hc_request(&cl, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) == 0 &&
              r.status == 200 && r.body_len == 1 && r.body[0] == 'A',
          "GET after HEAD");
    hc_resp_free(&r);

    CHECK(hc_request(&cl, "OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) == 0,
          "OPTIONS *");
    CHECK(r.status == 200 && hc_header_is(&r, "Allow", "GET, HEAD, OPTIONS") &&
              hc_header_is(&r, "Content-Length", "0"),
          "OPTIONS * answer %d", r.status);
    check_common(&r, "OPTIONS");
    hc_resp_free(&r);
    CHECK(hc_request(&cl, "OPTIONS /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) ==
                  0 &&
              r.status == 200 && hc_has_header(&r, "Allow"),
          "OPTIONS /hello.txt");
    hc_resp_free(&r);

    /* Other methods: 405 with Allow; a body is read and dropped, so the
     * connection goes on with the next request. */
    CHECK(hc_request(&cl, "POST /hello.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nabcde",
                     &r, hc_tmo(5000)) == 0,
          "POST");
    CHECK(r.status == 405 && hc_header_is(&r, "Allow", "GET, HEAD, OPTIONS"), "POST: %d", r.status);
    check_common(&r, "405");
    hc_resp_free(&r);
    CHECK(hc_request(&cl,
                     "PUT /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "3\r\nabc\r\n0\r\nTrailer: x\r\n\r\n",
                     &r, hc_tmo(5000)) == 0 &&
              r.status == 405,
          "PUT chunked: %d", r.status);
    hc_resp_free(&r);
    CHECK(hc_request(&cl, "DELETE /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) == 0 &&
              r.status == 405,
          "DELETE: %d", r.status);
    hc_resp_free(&r);
    CHECK(hc_request(&cl, "BREW /pot HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) == 0 &&
              r.status == 405,
          "BREW: %d", r.status);
    hc_resp_free(&r);
    CHECK(hc_request(&cl, "GET /b.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) == 0 &&
              r.status == 200 && r.body_len == 2 && memcmp(r.body, "BB", 2) == 0,
          "GET after the bodies");
    hc_resp_free(&r);
    cr_test_client_close(&cl);
}

/* 20 requests in one write, a mix of files, HEAD and 404s, answered in
 * order; then the same with the client's write split at odd places. */
static void test_pipelining(uint16_t port)
{
    static const char *const paths[] = {"/hello.txt", "/a.txt", "/nope", "/b.txt", "/"};
    char req[8192];
    size_t len = 0;
    struct cr_test_client cl;
    struct hc_resp r;

    for (int i = 0; i < 20; i++)
        len += (size_t)snprintf(req + len, sizeof(req) - len,
                                "%s %s HTTP/1.1\r\nHost: t\r\nX-Seq: %d\r\n\r\n",
                                i % 7 == 3 ? "HEAD" : "GET", paths[i % 5], i);
    for (int round = 0; round < 2; round++) {
        if (hc_open(&cl, port) < 0) {
            hc_failures++;
            return;
        }
        if (round == 0) {
            CHECK(cr_test_write_all(cl.fd, req, len) == 0, "pipelined write");
        } else {
            /* In pieces of 7 bytes: heads split anywhere. */
            for (size_t off = 0; off < len; off += 7) {
                size_t n = len - off < 7 ? len - off : 7;

                CHECK(cr_test_write_all(cl.fd, req + off, n) == 0, "split write");
            }
        }
        for (int i = 0; i < 20; i++) {
            bool head = i % 7 == 3;
            const char *p = paths[i % 5];
            int err = hc_read(&cl, head, &r, hc_tmo(5000));

            CHECK(err == 0, "round %d: answer %d: %s", round, i, strerror(-err));
            if (err < 0)
                break;
            if (strcmp(p, "/nope") == 0) {
                CHECK(r.status == 404, "answer %d: %d", i, r.status);
            } else if (strcmp(p, "/hello.txt") == 0) {
                CHECK(r.status == 200 && hc_header_is(&r, "Content-Length", "13") &&
                          (head || (r.body_len == 13 && memcmp(r.body, HELLO, 13) == 0)),
                      "answer %d (hello)", i);
            } else if (strcmp(p, "/a.txt") == 0) {
                CHECK(r.status == 200 && hc_header_is(&r, "Content-Length", "1") &&
                          (head || r.body[0] == 'A'),
                      "answer %d (a)", i);
            } else if (strcmp(p, "/b.txt") == 0) {
                CHECK(r.status == 200 && hc_header_is(&r, "Content-Length", "2") &&
                          (head || r.body[0] == 'B'),
                      "answer %d (b)", i);
            } else {
                CHECK(r.status == 200 && (head || (r.body_len == strlen(INDEX) &&
                                                   memcmp(r.body, INDEX, r.body_len) == 0)),
                      "answer %d (index)", i);
            }
            check_common(&r, "pipelined");
            hc_resp_free(&r);
        }
        cr_test_client_close(&cl);
    }
}

static void test_persistence(uint16_t port)
{
    struct cr_test_client cl;
    struct hc_resp r;

    /* Keep-alive: many requests, one connection. */
    if (hc_open(&cl, port) < 0) {
        hc_failures++;
        return;
    }
    for (int i = 0; i < 10; i++) {
        CHECK(hc_request(&cl, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) ==
                      0 &&
                  r.status == 200,
              "keep-alive request %d", i);
        hc_resp_free(&r);
    }
    /* Connection: close in 1.1: answered, said, closed. */
    CHECK(hc_request(&cl, "GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", &r,
                     hc_tmo(5000)) == 0 &&
              r.status == 200 && hc_header_is(&r, "Connection", "close"),
          "1.1 close");
    hc_resp_free(&r);
    CHECK(hc_wait_close(&cl, hc_tmo(3000)) == 0, "1.1 close: connection stays open");
    cr_test_client_close(&cl);

    /* HTTP/1.0: closes unless asked to keep alive. */
    if (hc_open(&cl, port) < 0) {
        hc_failures++;
        return;
    }
    CHECK(hc_request(&cl, "GET /a.txt HTTP/1.0\r\n\r\n", &r, hc_tmo(5000)) == 0 &&
              r.status == 200 && hc_header_is(&r, "Connection", "close") && r.body_len == 1,
          "1.0 answer");
    check_common(&r, "1.0");
    hc_resp_free(&r);
    CHECK(hc_wait_close(&cl, hc_tmo(3000)) == 0, "1.0: connection stays open");
    cr_test_client_close(&cl);
    if (hc_open(&cl, port) < 0) {
        hc_failures++;
        return;
    }
    for (int i = 0; i < 3; i++) {
        CHECK(hc_request(&cl, "GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r,
                         hc_tmo(5000)) == 0 &&
                  r.status == 200 && hc_header_is(&r, "Connection", "keep-alive"),
              "1.0 keep-alive %d", i);
        hc_resp_free(&r);
    }
    cr_test_client_close(&cl);
}

/*
 * The FIN of a close the server asked for rides in the answer's segment:
 * the client sees the SYN-ACK, the ACK of its request and one segment with
 * the answer and the FIN; the FIN on its own would be one more segment per
 * connection, and more server CPU per request (figures: docs/design/httpd.md).
 */
static void test_close_carries_fin(uint16_t port)
{
    for (int i = 0; i < 3; i++) {
        struct cr_test_client cl;
        struct tcp_info ti;
        socklen_t len = sizeof(ti);
        struct hc_resp r;

        if (hc_open(&cl, port) < 0) {
            hc_failures++;
            return;
        }
        CHECK(hc_request(&cl, "GET /hello.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", &r,
                         hc_tmo(5000)) == 0 &&
                  r.status == 200 && r.body_len == strlen(HELLO),
              "close %d: answer", i);
        hc_resp_free(&r);
        CHECK(hc_wait_close(&cl, hc_tmo(3000)) == 0, "close %d: connection stays open", i);
        memset(&ti, 0, sizeof(ti));
        CHECK(getsockopt(cl.fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0, "close %d: TCP_INFO", i);
        CHECK(ti.tcpi_data_segs_in == 1 && ti.tcpi_segs_in - ti.tcpi_data_segs_in <= 2,
              "close %d: %u segments in, %u with data: the FIN came on its own", i, ti.tcpi_segs_in,
              ti.tcpi_data_segs_in);
        cr_test_client_close(&cl);
    }
}

static void test_paths(uint16_t port)
{
    struct hc_resp r;

    CHECK(hc_get(port, "GET /dir HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0 && r.status == 301 &&
              hc_header_is(&r, "Location", "/dir/"),
          "/dir: %d", r.status);
    check_common(&r, "301");
    hc_resp_free(&r);
    CHECK(hc_get(port, "GET /dir?x=1 HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0 && r.status == 301 &&
              hc_header_is(&r, "Location", "/dir/?x=1"),
          "/dir?x=1");
    hc_resp_free(&r);
    CHECK(hc_get(port, "GET /dir/ HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0 && r.status == 200 &&
              r.body_len == strlen(DIRIDX) && memcmp(r.body, DIRIDX, r.body_len) == 0 &&
              hc_header_is(&r, "Content-Type", "text/html; charset=utf-8"),
          "/dir/: %d", r.status);
    hc_resp_free(&r);
    CHECK(hc_get(port, "GET / HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0 && r.status == 200 &&
              r.body_len == strlen(INDEX),
          "/");
    hc_resp_free(&r);
    CHECK(hc_get(port, "GET /dir/./../dir/index.html HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0 &&
              r.status == 200 && r.body_len == strlen(DIRIDX),
          "dot segments inside the root: %d", r.status);
    hc_resp_free(&r);
    CHECK(hc_get(port, "GET /%68ello.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0 &&
              r.status == 200 && r.body_len == 13,
          "percent-decoding: %d", r.status);
    hc_resp_free(&r);
    /* No directory listing. */
    CHECK(hc_status(port, "GET /empty/ HTTP/1.1\r\nHost: t\r\n\r\n") == 404, "/empty/");
    CHECK(hc_status(port, "GET /nope.txt HTTP/1.1\r\nHost: t\r\n\r\n") == 404, "/nope.txt");
    CHECK(hc_status(port, "GET /hello.txt/ HTTP/1.1\r\nHost: t\r\n\r\n") == 404, "file/");
    CHECK(hc_get(port, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0 && r.status == 404 &&
              r.body_len > 0 && strstr(r.body, "404") != NULL,
          "404 body");
    check_common(&r, "404");
    hc_resp_free(&r);
}

/* Every way out of the root: an error status, never the secret. */
static void test_traversal(uint16_t port)
{
    static const char *const targets[] = {
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E/secret.txt",
        "/.%2e/secret.txt",
        "/..%2fsecret.txt",
        "/%2e%2e%2fsecret.txt",
        "/a/../../secret.txt",
        "/dir/../../secret.txt",
        "/dir/%2e%2e/%2e%2e/secret.txt",
        "/..%5csecret.txt",
        "/..\\secret.txt",
        "/%00/../secret.txt",
        "/hello.txt%00.html",
        "/%c0%ae%c0%ae/secret.txt",
        "/outside",
        "/outside-rel",
        "http://t/../secret.txt",
        "../secret.txt",
        "secret.txt",
        "//secret.txt",
        "/./../secret.txt",
    };

    for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
        char req[512];
        struct hc_resp r;
        int err;

        snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", targets[i]);
        err = hc_get(port, req, &r);
        CHECK(err == 0, "%s: no answer: %s", targets[i], strerror(-err));
        if (err == 0) {
            CHECK(r.status == 400 || r.status == 403 || r.status == 404, "%s: status %d",
                  targets[i], r.status);
            CHECK(r.body == NULL || strstr(r.body, "TOP-SECRET") == NULL, "%s: leaked", targets[i]);
        }
        hc_resp_free(&r);
    }
}

static void test_status_page(uint16_t port)
{
    struct hc_resp r;

    CHECK(hc_get(port, "GET /server-status HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0 &&
              r.status == 200 && r.body != NULL &&
              strstr(r.body, "http-equiv=\"refresh\"") != NULL &&
              strstr(r.body, "cabrank-httpd status") != NULL,
          "status HTML: %d", r.status);
    CHECK(hc_header_is(&r, "Content-Type", "text/html; charset=utf-8"), "status HTML type");
    CHECK(r.body != NULL && (strstr(r.body, "leader") || strstr(r.body, "processing")),
          "status HTML roles");
    hc_resp_free(&r);
    CHECK(hc_get(port, "GET /server-status?format=json HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0 &&
              r.status == 200 && r.body != NULL && r.body[0] == '{' &&
              strstr(r.body, "\"model\":\"lf\"") != NULL &&
              strstr(r.body, "\"workers\":[") != NULL && strstr(r.body, "\"latency\":") != NULL &&
              strstr(r.body, "\"requests\":") != NULL,
          "status JSON: %d %s", r.status, r.body != NULL ? r.body : "");
    CHECK(hc_header_is(&r, "Content-Type", "application/json"), "status JSON type");
    hc_resp_free(&r);
    CHECK(hc_get(port, "HEAD /server-status HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0 &&
              r.status == 200 && r.body == NULL,
          "status HEAD");
    hc_resp_free(&r);
}

/* --max-requests-per-connection 3: the third answer says close. */
static void test_request_cap(void)
{
    const char *const args[] = {"--max-requests-per-connection", "3", "--threads", "2", NULL};
    struct hc_server s;
    struct cr_test_client cl;
    struct hc_resp r;

    if (hc_start(&s, root, args) < 0) {
        hc_failures++;
        return;
    }
    if (hc_open(&cl, s.port) == 0) {
        for (int i = 0; i < 3; i++) {
            CHECK(hc_request(&cl, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) ==
                          0 &&
                      r.status == 200,
                  "capped request %d", i);
            CHECK(hc_header_is(&r, "Connection", "close") == (i == 2), "Connection on %d", i);
            hc_resp_free(&r);
        }
        CHECK(hc_wait_close(&cl, hc_tmo(3000)) == 0, "cap: not closed");
        cr_test_client_close(&cl);
    }
    CHECK(hc_stop(&s) == 0, "cap server stop");
}

/* The access log, flushed at exit: one Combined line per request. */
static void check_access_log(const char *path, int min_lines)
{
    char buf[65536];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    int lines = 0;

    if (fd >= 0)
        close(fd);
    CHECK(n > 0, "access log %s empty or missing", path);
    if (n <= 0)
        return;
    buf[n] = '\0';
    for (char *p = buf; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    CHECK(lines >= min_lines, "access log: %d lines, want >= %d", lines, min_lines);
    CHECK(strstr(buf, "127.0.0.1 - - [") != NULL, "access log: host and time");
    CHECK(strstr(buf, "\"GET /hello.txt HTTP/1.1\" 200 13 \"-\" \"-\"\n") != NULL,
          "access log: combined line for /hello.txt");
    CHECK(strstr(buf, "\"HEAD /hello.txt HTTP/1.1\" 200 - ") != NULL, "access log: HEAD");
    CHECK(strstr(buf, "\"GET /nope HTTP/1.1\" 404 ") != NULL, "access log: 404");
}

int main(void)
{
    char logpath[400];
    char *args[] = {"--threads", "4", "--access-log", logpath, NULL};
    struct hc_server s;

    if (make_root() < 0) {
        fprintf(stderr, "httpd_basic: making the root: %s\n", strerror(errno));
        return 1;
    }
    snprintf(logpath, sizeof(logpath), "%s/access.log", base);
    if (hc_start(&s, root, (const char *const *)args) < 0) {
        (void)cr_test_rmtree(base);
        return 1;
    }
    test_get_head_options(s.port);
    test_pipelining(s.port);
    test_persistence(s.port);
    test_close_carries_fin(s.port);
    test_paths(s.port);
    test_traversal(s.port);
    test_status_page(s.port);
    CHECK(hc_alive(&s), "server died");
    CHECK(hc_stop(&s) == 0, "graceful stop");
    check_access_log(logpath, 40);
    test_request_cap();
    (void)cr_test_rmtree(base);
    if (hc_failures != 0) {
        fprintf(stderr, "httpd_basic: %d check(s) failed\n", hc_failures);
        return 1;
    }
    fprintf(stderr, "httpd_basic: ok\n");
    return 0;
}
