/*
 * httpd_malformed.c (integration) - what cabrank-httpd answers to malformed,
 * smuggling-prone and oversized requests over raw sockets: each case of the
 * issue gets its status (400 for framing ambiguities, obs-fold, whitespace
 * before a colon, control bytes, a missing or repeated Host; 414; 431 for
 * an over-long line, too many bytes or too many fields; 501 for an unknown
 * transfer coding; 505 for other versions), with Date, Server,
 * Content-Length and Connection: close, and the connection then closed, so
 * nothing after the bad head is taken as a request. Then the same limits
 * set small by flags, a bad chunked body after a good head, and a check
 * that the server still serves. Exit 0 pass, 1 fail, 77 skip.
 */
#include "httpd_client.h"

struct bad {
    const char *name;
    const char *req;
    int status;
};

static const struct bad cases[] = {
    {"CL and TE",
     "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n"
     "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     400},
    {"TE and CL",
     "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
     "Content-Length: 4\r\n\r\n0\r\n\r\n",
     400},
    {"duplicate CL, same value",
     "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n"
     "Content-Length: 1\r\n\r\nx",
     400},
    {"duplicate CL, other value",
     "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n"
     "Content-Length: 2\r\n\r\nxx",
     400},
    {"CL list", "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1, 1\r\n\r\nx", 400},
    {"CL sign", "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: +1\r\n\r\nx", 400},
    {"CL negative", "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n", 400},
    {"CL letters", "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1a\r\n\r\nx", 400},
    {"CL overflow", "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999999999999999\r\n\r\n",
     400},
    {"obs-fold", "GET / HTTP/1.1\r\nHost: t\r\nX-A: a\r\n b\r\n\r\n", 400},
    {"space before colon", "GET / HTTP/1.1\r\nHost : t\r\n\r\n", 400},
    {"tab before colon", "GET / HTTP/1.1\r\nHost: t\r\nX-A\t: b\r\n\r\n", 400},
    {"control in value", "GET / HTTP/1.1\r\nHost: t\r\nX-A: a\x01z\r\n\r\n", 400},
    {"DEL in value", "GET / HTTP/1.1\r\nHost: t\r\nX-A: a\x7fz\r\n\r\n", 400},
    {"control in name",
     "GET / HTTP/1.1\r\nHost: t\r\nX\x02"
     "A: a\r\n\r\n",
     400},
    {"no Host in 1.1", "GET / HTTP/1.1\r\nX-A: a\r\n\r\n", 400},
    {"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
    {"bad Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400},
    {"bare LF", "GET / HTTP/1.1\nHost: t\n\n", 400},
    {"bare CR", "GET / HTTP/1.1\rHost: t\r\n\r\n", 400},
    {"two spaces", "GET  / HTTP/1.1\r\nHost: t\r\n\r\n", 400},
    {"control in target", "GET /a\x01 HTTP/1.1\r\nHost: t\r\n\r\n", 400},
    {"TE in 1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
    {"TE chunked twice",
     "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, chunked\r\n"
     "\r\n0\r\n\r\n",
     400},
    {"TE gzip", "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
    {"TE gzip, chunked", "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
     501},
    {"TE identity", "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: identity\r\n\r\n", 501},
    {"HTTP/2.0", "GET / HTTP/2.0\r\nHost: t\r\n\r\n", 505},
    {"HTTP/1.2", "GET / HTTP/1.2\r\nHost: t\r\n\r\n", 505},
    {"HTTP/0.9 style version", "GET / HTTP/0.9\r\nHost: t\r\n\r\n", 505},
    {"HTTP/1", "GET / HTTP/1\r\nHost: t\r\n\r\n", 400},
    {"http/1.1 lowercase", "GET / http/1.1\r\nHost: t\r\n\r\n", 400},
    {"no version", "GET /\r\nHost: t\r\n\r\n", 400},
    {"two empty lines first", "\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n", 400},
};

/* Sends raw bytes, expects an answer with status and then a close. */
static void expect(uint16_t port, const char *name, const char *req, size_t len, int status)
{
    struct cr_test_client cl;
    struct hc_resp r;
    int err;

    if (hc_open(&cl, port) < 0) {
        hc_failures++;
        return;
    }
    err = cr_test_write_all(cl.fd, req, len);
    if (err == 0)
        err = hc_read(&cl, false, &r, hc_tmo(5000));
    CHECK(err == 0, "%s: %s", name, strerror(-err));
    if (err == 0) {
        CHECK(r.status == status, "%s: status %d, want %d", name, r.status, status);
        CHECK(hc_header_is(&r, "Connection", "close"), "%s: no Connection: close", name);
        CHECK(hc_has_header(&r, "Date") && hc_has_header(&r, "Content-Length") &&
                  hc_header_is(&r, "Server", "cabrank"),
              "%s: Date, Content-Length, Server", name);
        CHECK(hc_wait_close(&cl, hc_tmo(3000)) == 0, "%s: not closed after the error", name);
        hc_resp_free(&r);
    }
    cr_test_client_close(&cl);
}

static void expect_str(uint16_t port, const char *name, const char *req, int status)
{
    expect(port, name, req, strlen(req), status);
}

/* A request with a target of target_len bytes, or n_fields fields each of
 * field_len bytes. Returns a malloc'd string. */
static char *big_request(size_t target_len, int n_fields, size_t field_len)
{
    size_t cap = target_len + (size_t)n_fields * (field_len + 16) + 128;
    char *s = malloc(cap);
    size_t len = 0;

    if (s == NULL)
        return NULL;
    /* The bytes go in the query: the path stays short and names no file. */
    len += (size_t)snprintf(s, cap, "GET /x?");
    memset(s + len, 'a', target_len);
    len += target_len;
    len += (size_t)snprintf(s + len, cap - len, " HTTP/1.1\r\nHost: t\r\n");
    for (int i = 0; i < n_fields; i++) {
        len += (size_t)snprintf(s + len, cap - len, "X-F%d: ", i);
        memset(s + len, 'v', field_len);
        len += field_len;
        memcpy(s + len, "\r\n", 2);
        len += 2;
    }
    memcpy(s + len, "\r\n", 3);
    return s;
}

static void expect_big(uint16_t port, const char *name, size_t target_len, int n_fields,
                       size_t field_len, int status)
{
    char *s = big_request(target_len, n_fields, field_len);

    if (s == NULL) {
        hc_failures++;
        return;
    }
    expect_str(port, name, s, status);
    free(s);
}

static void test_defaults(uint16_t port)
{
    char nul[] = "GET /a\0b HTTP/1.1\r\nHost: t\r\n\r\n";

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_str(port, cases[i].name, cases[i].req, cases[i].status);
    expect(port, "NUL in target", nul, sizeof(nul) - 1, 400);
    /* Limits: 8 KiB request line, 8 KiB field line, 32 KiB of fields, 100
     * fields. Within them is fine. */
    expect_big(port, "target over 8 KiB", 9000, 0, 0, 414);
    expect_big(port, "field line over 8 KiB", 10, 1, 9000, 431);
    expect_big(port, "fields over 32 KiB", 10, 50, 700, 431);
    expect_big(port, "over 100 fields", 10, 101, 4, 431);
    {
        char *s = big_request(7000, 90, 300);
        struct hc_resp r;

        CHECK(s != NULL && hc_get(port, s, &r) == 0 && r.status == 404, "within the limits: %d",
              r.status);
        hc_resp_free(&r);
        free(s);
    }
    /* The request line's limit holds before its end arrives. */
    {
        char *s = big_request(20000, 0, 0);

        if (s != NULL) {
            s[9500] = '\0';
            expect_str(port, "target over 8 KiB, unfinished", s, 414);
            free(s);
        }
    }
}

/* The limits set by flags. */
static void test_configured(const char *root)
{
    const char *const args[] = {"--max-request-line",
                                "100",
                                "--max-header-line",
                                "200",
                                "--max-headers-size",
                                "600",
                                "--max-header-fields",
                                "5",
                                "--threads",
                                "2",
                                NULL};
    struct hc_server s;

    if (hc_start(&s, root, args) < 0) {
        hc_failures++;
        return;
    }
    expect_big(s.port, "target over 100", 120, 0, 0, 414);
    expect_big(s.port, "field over 200", 10, 1, 250, 431);
    expect_big(s.port, "fields over 600", 10, 4, 190, 431);
    expect_big(s.port, "over 5 fields", 10, 5, 4, 431); /* Host + 5 */
    CHECK(hc_status(s.port, "GET /x HTTP/1.1\r\nHost: t\r\nA: b\r\n\r\n") == 404,
          "small request under small limits");
    CHECK(hc_stop(&s) == 0, "configured server stop");
}

/* A good head, then a broken chunked body: the answer, then a close. */
static void test_bad_chunked(uint16_t port)
{
    struct cr_test_client cl;
    struct hc_resp r;

    if (hc_open(&cl, port) < 0) {
        hc_failures++;
        return;
    }
    CHECK(hc_send(&cl, "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "zz\r\nGET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n") == 0,
          "send bad chunked");
    CHECK(hc_read(&cl, false, &r, hc_tmo(5000)) == 0 && r.status == 405, "bad chunked answer");
    hc_resp_free(&r);
    CHECK(hc_wait_close(&cl, hc_tmo(3000)) == 0, "bad chunked: not closed (or smuggled answer)");
    cr_test_client_close(&cl);
}

int main(void)
{
    char root[256];
    const char *const args[] = {"--threads", "3", NULL};
    struct hc_server s;
    int rc = 1;

    if (hc_mkdtemp(root, sizeof(root)) < 0 || hc_write_file(root, "a.txt", "A", 1) < 0) {
        fprintf(stderr, "httpd_malformed: making the root: %s\n", strerror(errno));
        return 1;
    }
    if (hc_start(&s, root, args) < 0)
        goto out;
    test_defaults(s.port);
    test_bad_chunked(s.port);
    CHECK(hc_status(s.port, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n") == 200, "still serving");
    CHECK(hc_stop(&s) == 0, "graceful stop");
    test_configured(root);
    if (hc_failures == 0) {
        fprintf(stderr, "httpd_malformed: ok\n");
        rc = 0;
    } else {
        fprintf(stderr, "httpd_malformed: %d check(s) failed\n", hc_failures);
    }
out:
    (void)cr_test_rmtree(root);
    return rc;
}
