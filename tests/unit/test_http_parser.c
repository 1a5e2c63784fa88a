/*
 * test_http_parser.c - cabrank-httpd's request head parser and chunked body decoder
 * (apps/httpd/http_parser.c): good requests and what the parser derives from them,
 * every strictness rule with its status, the limits at their exact boundaries,
 * incremental parsing (every prefix of an input gives -EAGAIN or the whole input's
 * result), and the chunked decoder split at every byte. Every input is placed so that
 * its last byte sits right before a PROT_NONE page (picohttpparser's test.c), so a read
 * past the end crashes the test.
 */
#include "../../apps/httpd/http_parser.h"
#include "../support/guard.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */

#define HEADERS_CAP 128

static struct http_header headers[HEADERS_CAP];

static void init_request(struct http_request *req, size_t cap)
{
    memset(req, 0, sizeof(*req));
    req->headers = headers;
    req->headers_cap = cap;
}

/* Parses data[0..len) placed against the guard page; the request points into the guard
 * mapping, valid until the next parse. */
static ssize_t parse_lim(const char *data, size_t len, struct http_request *req,
                         const struct http_limits *lim, int *status)
{
    const char *p = cr_test_guard_put(data, len);

    *status = -1;
    return http_parse_request(p, len, req, lim, status);
}

static ssize_t parse(const char *data, size_t len, struct http_request *req, int *status)
{
    init_request(req, HEADERS_CAP);
    return parse_lim(data, len, req, NULL, status);
}

static bool slice_is(const char *p, size_t len, const char *want)
{
    return p != NULL && len == strlen(want) && memcmp(p, want, len) == 0;
}

static bool value_is(const struct http_header *h, const char *want)
{
    return h != NULL && slice_is(h->value, h->value_len, want);
}

/* A string literal with its length, NUL bytes included. */
#define S(lit) lit, sizeof(lit) - 1

/* ---------------------------------------------------------------- good requests */

START_TEST(parses_get_with_headers)
{
    static const char in[] = "GET /index.html?q=1 HTTP/1.1\r\n"
                             "Host: example.com:8080\r\n"
                             "User-Agent: curl/8.0\r\n"
                             "Accept: */*\r\n"
                             "\r\n";
    struct http_request req;
    int status;

    ck_assert_int_eq(parse(S(in), &req, &status), (ssize_t)strlen(in));
    ck_assert_int_eq(status, 0);
    ck_assert(slice_is(req.method, req.method_len, "GET"));
    ck_assert_int_eq(req.method_id, HTTP_METHOD_GET);
    ck_assert(slice_is(req.target, req.target_len, "/index.html?q=1"));
    ck_assert_int_eq(req.minor_version, 1);
    ck_assert_uint_eq(req.num_headers, 3);
    ck_assert(slice_is(headers[0].name, headers[0].name_len, "Host"));
    ck_assert(slice_is(headers[0].value, headers[0].value_len, "example.com:8080"));
    ck_assert(slice_is(headers[2].name, headers[2].name_len, "Accept"));
    ck_assert(slice_is(headers[2].value, headers[2].value_len, "*/*"));
    ck_assert(slice_is(req.host, req.host_len, "example.com:8080"));
    ck_assert(value_is(req.user_agent, "curl/8.0"));
    ck_assert_int_eq(req.content_length, -1);
    ck_assert(!req.is_chunked);
    ck_assert(req.keep_alive);
    ck_assert_ptr_null(req.range);
    ck_assert_ptr_null(req.referer);
    /* Zero-copy: the pointers are into the (guarded) input. */
    {
        size_t room;
        const char *base = (const char *)cr_test_guard_base(&room);

        ck_assert_ptr_eq(req.method, base + room - strlen(in));
    }
}
END_TEST

/* The caller need not clear the request: every field but headers and headers_cap is
 * set, for a complete, an incomplete and a malformed head alike. */
START_TEST(sets_every_field_of_an_uncleared_request)
{
    static const struct {
        const char *data;
        ssize_t result;
    } cases[] = {
        {"GET /a HTTP/1.1\r\nHost: h\r\n\r\n", 28},
        {"GET /a HTTP/1.1\r\nHost: h\r\n", -EAGAIN},
        {"GET /a HTTP/1.1\r\nHost : h\r\n\r\n", -EBADMSG},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct http_request req;
        int status;

        memset(&req, 0xa5, sizeof(req));
        req.headers = headers;
        req.headers_cap = HEADERS_CAP;
        ck_assert_int_eq(parse_lim(cases[i].data, strlen(cases[i].data), &req, NULL, &status),
                         cases[i].result);
        ck_assert(req.is_chunked == false);
        ck_assert_int_le(req.num_headers, 1);
        ck_assert(req.content_length == -1);
        ck_assert_ptr_null(req.if_none_match);
        ck_assert_ptr_null(req.if_match);
        ck_assert_ptr_null(req.if_modified_since);
        ck_assert_ptr_null(req.if_unmodified_since);
        ck_assert_ptr_null(req.if_range);
        ck_assert_ptr_null(req.range);
        ck_assert_ptr_null(req.accept_encoding);
        ck_assert_ptr_null(req.user_agent);
        ck_assert_ptr_null(req.referer);
        if (cases[i].result > 0) {
            ck_assert(req.keep_alive);
            ck_assert(slice_is(req.host, req.host_len, "h"));
        } else {
            ck_assert(!req.keep_alive);
            ck_assert(req.host == NULL || slice_is(req.host, req.host_len, "h"));
        }
    }
}
END_TEST

START_TEST(recognises_methods_case_sensitively)
{
    static const struct {
        const char *name;
        enum http_method id;
    } cases[] = {
        {"GET", HTTP_METHOD_GET},           {"HEAD", HTTP_METHOD_HEAD},
        {"POST", HTTP_METHOD_POST},         {"PUT", HTTP_METHOD_PUT},
        {"DELETE", HTTP_METHOD_DELETE},     {"OPTIONS", HTTP_METHOD_OPTIONS},
        {"TRACE", HTTP_METHOD_TRACE},       {"CONNECT", HTTP_METHOD_CONNECT},
        {"PATCH", HTTP_METHOD_PATCH},       {"get", HTTP_METHOD_OTHER},
        {"GETS", HTTP_METHOD_OTHER},        {"PROPFIND", HTTP_METHOD_OTHER},
        {"X-Custom.1~", HTTP_METHOD_OTHER},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char in[128];
        struct http_request req;
        int status;
        int n = snprintf(in, sizeof(in), "%s / HTTP/1.1\r\nHost: a\r\n\r\n", cases[i].name);

        ck_assert_int_eq(parse(in, (size_t)n, &req, &status), n);
        ck_assert_int_eq(req.method_id, cases[i].id);
        ck_assert(slice_is(req.method, req.method_len, cases[i].name));
    }
}
END_TEST

START_TEST(returns_the_exact_head_length_of_the_first_pipelined_request)
{
    static const char in[] = "GET /a HTTP/1.1\r\nHost: a\r\n\r\n"
                             "HEAD /b HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n";
    const size_t first = strlen("GET /a HTTP/1.1\r\nHost: a\r\n\r\n");
    struct http_request req;
    int status;
    ssize_t n;

    n = parse(S(in), &req, &status);
    ck_assert_int_eq(n, (ssize_t)first);
    ck_assert(slice_is(req.target, req.target_len, "/a"));
    ck_assert(req.keep_alive);

    n = parse(in + first, strlen(in) - first, &req, &status);
    ck_assert_int_eq(n, (ssize_t)(strlen(in) - first));
    ck_assert_int_eq(req.method_id, HTTP_METHOD_HEAD);
    ck_assert(slice_is(req.target, req.target_len, "/b"));
    ck_assert(slice_is(req.host, req.host_len, "b"));
    ck_assert(!req.keep_alive);
}
END_TEST

START_TEST(head_length_excludes_the_body)
{
    static const char in[] = "POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
    struct http_request req;
    int status;

    ck_assert_int_eq(parse(S(in), &req, &status), (ssize_t)strlen(in) - 5);
    ck_assert_int_eq(req.method_id, HTTP_METHOD_POST);
    ck_assert_int_eq(req.content_length, 5);
}
END_TEST

static const struct keep_alive_case {
    const char *in;
    bool keep_alive;
} keep_alive_cases[] = {
    {"GET / HTTP/1.0\r\n\r\n", false},
    {"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true},
    {"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true},
    {"GET / HTTP/1.0\r\nconnection: TE, keep-alive\r\n\r\n", true},
    {"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", false},
    {"GET / HTTP/1.0\r\nConnection: keep-alived\r\n\r\n", false},
    {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", true},
    {"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false},
    {"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade , CLOSE\r\n\r\n", false},
    {"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n", false},
    {"GET / HTTP/1.1\r\nHost: a\r\nConnection: closed\r\n\r\n", true},
    {"GET / HTTP/1.1\r\nHost: a\r\nConnection: ,,\r\n\r\n", true},
};

START_TEST(keep_alive_follows_version_and_connection_tokens)
{
    const struct keep_alive_case *c = &keep_alive_cases[_i];
    struct http_request req;
    int status;

    ck_assert_int_eq(parse(c->in, strlen(c->in), &req, &status), (ssize_t)strlen(c->in));
    ck_assert_msg(req.keep_alive == c->keep_alive, "%s", c->in);
}
END_TEST

START_TEST(trims_whitespace_around_values)
{
    static const char in[] = "GET / HTTP/1.1\r\nHost:a\r\nX-A: \t inner  space \t\r\n"
                             "X-B:\r\nX-C:   \r\nX-D: \xc3\xa9t\xc3\xa9\r\n\r\n";
    struct http_request req;
    int status;

    ck_assert_int_eq(parse(S(in), &req, &status), (ssize_t)strlen(in));
    ck_assert_uint_eq(req.num_headers, 5);
    ck_assert(slice_is(req.host, req.host_len, "a"));
    ck_assert(slice_is(headers[1].value, headers[1].value_len, "inner  space"));
    ck_assert_uint_eq(headers[2].value_len, 0);
    ck_assert_ptr_nonnull(headers[2].value);
    ck_assert_uint_eq(headers[3].value_len, 0);
    ck_assert(slice_is(headers[4].value, headers[4].value_len, "\xc3\xa9t\xc3\xa9"));
}
END_TEST

START_TEST(points_at_the_conditional_and_range_fields)
{
    static const char in[] = "GET /f HTTP/1.1\r\n"
                             "host: a\r\n"
                             "IF-NONE-MATCH: \"x\"\r\n"
                             "If-Match: \"m\"\r\n"
                             "If-Modified-Since: Sat, 29 Oct 1994 19:43:31 GMT\r\n"
                             "If-Unmodified-Since: Sun, 30 Oct 1994 19:43:31 GMT\r\n"
                             "If-Range: \"r\"\r\n"
                             "Range: bytes=0-99\r\n"
                             "Accept-Encoding: gzip, br\r\n"
                             "User-Agent: ua\r\n"
                             "Referer: http://r/\r\n"
                             "If-None-Match: \"y\", \"z\"\r\n"
                             "\r\n";
    struct http_request req;
    const struct http_header *h;
    int status;

    ck_assert_int_eq(parse(S(in), &req, &status), (ssize_t)strlen(in));
    ck_assert(value_is(req.if_none_match, "\"x\""));
    ck_assert(value_is(req.if_match, "\"m\""));
    ck_assert(value_is(req.if_modified_since, "Sat, 29 Oct 1994 19:43:31 GMT"));
    ck_assert(value_is(req.if_unmodified_since, "Sun, 30 Oct 1994 19:43:31 GMT"));
    ck_assert(value_is(req.if_range, "\"r\""));
    ck_assert(value_is(req.range, "bytes=0-99"));
    ck_assert(value_is(req.accept_encoding, "gzip, br"));
    ck_assert(value_is(req.user_agent, "ua"));
    ck_assert(value_is(req.referer, "http://r/"));

    /* The generic lookup, case-insensitive, and the walk over a repeated field. */
    ck_assert_ptr_eq(http_request_header(&req, "if-none-match"), req.if_none_match);
    ck_assert_ptr_eq(http_request_header(&req, "HOST"), &headers[0]);
    ck_assert_ptr_null(http_request_header(&req, "Cookie"));
    ck_assert_ptr_null(http_request_header(&req, "Hos"));
    h = http_request_header_next(&req, req.if_none_match);
    ck_assert(value_is(h, "\"y\", \"z\""));
    ck_assert_ptr_null(http_request_header_next(&req, h));
    ck_assert(http_has_token(h->value, h->value_len, "\"z\""));
    ck_assert(!http_has_token(h->value, h->value_len, "\"q\""));
}
END_TEST

START_TEST(derives_content_length_and_chunked)
{
    static const struct {
        const char *in;
        int64_t content_length;
        bool chunked;
    } cases[] = {
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", 0, false},
        {"POST / HTTP/1.1\r\nHost: a\r\ncontent-length:  123 \r\n\r\n", 123, false},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 007\r\n\r\n", 7, false},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\n", INT64_MAX,
         false},
        {"POST / HTTP/1.0\r\nContent-Length: 10\r\n\r\n", 10, false},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", -1, true},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n", -1, true},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: , chunked ,\r\n\r\n", -1, true},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\nTransfer-Encoding: chunked\r\n\r\n",
         -1, true},
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", -1, false},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct http_request req;
        int status;
        const char *in = cases[i].in;

        ck_assert_int_eq(parse(in, strlen(in), &req, &status), (ssize_t)strlen(in));
        ck_assert_msg(req.content_length == cases[i].content_length, "%s", in);
        ck_assert_msg(req.is_chunked == cases[i].chunked, "%s", in);
    }
}
END_TEST

/* Requests that parse whole, and whose every proper prefix is -EAGAIN. */
static const struct good_case {
    const char *in;
    size_t len;
} good_cases[] = {
    {S("GET / HTTP/1.1\r\nHost: a\r\n\r\n")},
    {S("HEAD /x HTTP/1.0\r\n\r\n")},
    {S("GET / HTTP/1.0\r\nHost: \r\n\r\n")},
    {S("GET http://example.com/a?b#c HTTP/1.1\r\nHost: example.com\r\n\r\n")},
    {S("OPTIONS * HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n")},
    {S("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")},
    {S("GET /caf\xc3\xa9 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")},
    {S("GET / HTTP/1.1\r\nHost: xn--caf-dma.example%2e\r\n\r\n")},
    {S("GET / HTTP/1.1\r\nHost: [v1.fe]\r\n\r\n")},
    {S("GET / HTTP/1.1\r\nHost: a:\r\n\r\n")},
    {S("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")},
    {S("PURGE /x HTTP/1.1\r\nHost: a\r\nX-Tab:\ta\tb\t\r\n\r\n")},
    {S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")},
    {S("GET / HTTP/1.1\r\nHost: a\r\nX: \x80\xff\r\n!#$%&'*+-.^_`|~09az: v\r\n\r\n")},
    {S("GET / HTTP/1.1\r\nHost: a\r\nRange: bytes=1-\r\nIf-Range: x\r\n"
       "If-Modified-Since: d\r\nIf-Unmodified-Since: d\r\n\r\n")},
};

START_TEST(accepts_good_request_and_every_prefix_is_eagain)
{
    const struct good_case *c = &good_cases[_i];
    struct http_request req;
    int status;

    ck_assert_int_eq(parse(c->in, c->len, &req, &status), (ssize_t)c->len);
    ck_assert_int_eq(status, 0);
    for (size_t n = 0; n < c->len; n++) {
        ssize_t rc = parse(c->in, n, &req, &status);

        ck_assert_msg(rc == -EAGAIN && status == 0, "prefix %zu of case %d: %zd (status %d)", n, _i,
                      rc, status);
    }
}
END_TEST

/* ---------------------------------------------------------------- strictness */

static const struct bad_case {
    const char *what;
    const char *in;
    size_t len;
    int status;
} bad_cases[] = {
    /* Framing: the smuggling rules. */
    {"CL with TE",
     S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
       "Transfer-Encoding: chunked\r\n\r\n"),
     400},
    {"TE with CL",
     S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
       "Content-Length: 5\r\n\r\n"),
     400},
    {"CL with unknown TE",
     S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: gzip\r\n\r\n"), 400},
    {"duplicate CL, same value",
     S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"), 400},
    {"duplicate CL, other value",
     S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\ncontent-length: 6\r\n\r\n"), 400},
    {"CL list", S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n"), 400},
    {"CL empty", S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n"), 400},
    {"CL letters", S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n"), 400},
    {"CL plus", S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n"), 400},
    {"CL minus", S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n"), 400},
    {"CL inner space", S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n"), 400},
    {"CL hex", S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n"), 400},
    {"CL over INT64_MAX",
     S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775808\r\n\r\n"), 400},
    {"CL overflow",
     S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n"), 400},
    {"TE in HTTP/1.0", S("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400},
    {"TE chunked twice",
     S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"), 400},
    {"TE chunked on two lines",
     S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
       "Transfer-Encoding: chunked\r\n\r\n"),
     400},
    {"TE empty", S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \r\n\r\n"), 400},
    {"TE gzip", S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n"), 501},
    {"TE gzip, chunked",
     S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), 501},
    {"TE chunked, gzip",
     S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"), 501},
    {"TE identity", S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n"), 501},
    {"TE with parameter", S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked;q=1\r\n\r\n"),
     501},
    {"TE xchunked", S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n"), 501},
    /* Field syntax. */
    {"obs-fold SP", S("GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n c\r\n\r\n"), 400},
    {"obs-fold HTAB", S("GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n\tc\r\n\r\n"), 400},
    {"whitespace before first field", S("GET / HTTP/1.1\r\n Host: a\r\n\r\n"), 400},
    {"SP before colon", S("GET / HTTP/1.1\r\nHost : a\r\n\r\n"), 400},
    {"HTAB before colon", S("GET / HTTP/1.1\r\nHost\t: a\r\n\r\n"), 400},
    {"SP before colon, other field", S("GET / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\n"),
     400},
    {"empty field name", S("GET / HTTP/1.1\r\nHost: a\r\n: x\r\n\r\n"), 400},
    {"no colon", S("GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n"), 400},
    {"separator in name", S("GET / HTTP/1.1\r\nHost: a\r\nX@Y: z\r\n\r\n"), 400},
    {"bracket in name", S("GET / HTTP/1.1\r\nHost: a\r\nX(y): z\r\n\r\n"), 400},
    {"CTL in name", S("GET / HTTP/1.1\r\nHost: a\r\nX\x01Y: z\r\n\r\n"), 400},
    {"high byte in name", S("GET / HTTP/1.1\r\nHost: a\r\nX\x80: z\r\n\r\n"), 400},
    {"NUL in value", S("GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n"), 400},
    {"ESC in value", S("GET / HTTP/1.1\r\nHost: a\r\nX: a\x1b[0m\r\n\r\n"), 400},
    {"DEL in value", S("GET / HTTP/1.1\r\nHost: a\r\nX: a\x7f\r\n\r\n"), 400},
    {"bare CR in value", S("GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n"), 400},
    {"bare LF in value", S("GET / HTTP/1.1\r\nHost: a\r\nX: a\nY: b\r\n\r\n"), 400},
    /* Line endings: bare LF is rejected everywhere. */
    {"bare LF everywhere", S("GET / HTTP/1.1\nHost: a\n\n"), 400},
    {"bare LF after field", S("GET / HTTP/1.1\r\nHost: a\n\r\n"), 400},
    {"bare LF as end of head", S("GET / HTTP/1.1\r\nHost: a\r\n\n"), 400},
    {"bare CR after request line", S("GET / HTTP/1.1\rHost: a\r\n\r\n"), 400},
    {"CR CR LF at end of head", S("GET / HTTP/1.1\r\nHost: a\r\n\r\r\n"), 400},
    {"two empty lines first", S("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"bare LF empty line first", S("\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    /* Host. */
    {"no Host in HTTP/1.1", S("GET / HTTP/1.1\r\nAccept: */*\r\n\r\n"), 400},
    {"two Hosts", S("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), 400},
    {"two Hosts in HTTP/1.0", S("GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n"), 400},
    {"Host with space", S("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), 400},
    {"Host with slash", S("GET / HTTP/1.1\r\nHost: a/../b\r\n\r\n"), 400},
    {"Host with userinfo", S("GET / HTTP/1.1\r\nHost: u@a\r\n\r\n"), 400},
    {"Host with bad port", S("GET / HTTP/1.1\r\nHost: a:8o\r\n\r\n"), 400},
    {"Host with two ports", S("GET / HTTP/1.1\r\nHost: a:1:2\r\n\r\n"), 400},
    {"Host with bad escape", S("GET / HTTP/1.1\r\nHost: a%zz\r\n\r\n"), 400},
    {"Host with short escape", S("GET / HTTP/1.1\r\nHost: a%2\r\n\r\n"), 400},
    {"Host unclosed IPv6", S("GET / HTTP/1.1\r\nHost: [::1\r\n\r\n"), 400},
    {"Host empty IPv6", S("GET / HTTP/1.1\r\nHost: []\r\n\r\n"), 400},
    {"Host junk after IPv6", S("GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n"), 400},
    /* Singleton fields that select the response. */
    {"two Ranges", S("GET / HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1\r\nRange: bytes=5-\r\n\r\n"),
     400},
    {"two If-Ranges", S("GET / HTTP/1.1\r\nHost: a\r\nIf-Range: x\r\nif-range: y\r\n\r\n"), 400},
    {"two If-Modified-Sinces",
     S("GET / HTTP/1.1\r\nHost: a\r\nIf-Modified-Since: x\r\nIf-Modified-Since: x\r\n\r\n"), 400},
    {"two If-Unmodified-Sinces",
     S("GET / HTTP/1.1\r\nHost: a\r\nIf-Unmodified-Since: x\r\nIf-Unmodified-Since: y\r\n\r\n"),
     400},
    /* Request line. */
    {"CTL in target", S("GET /a\x01 HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"DEL in target", S("GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"HTAB in target", S("GET /a\tb HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"NUL in target", S("GET /a\0 HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"space in target", S("GET /a b HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"two spaces after method", S("GET  / HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"two spaces before version", S("GET /  HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"HTAB as separator", S("GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"empty method", S(" / HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"method not a token", S("GE(T / HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"no version (HTTP/0.9 style)", S("GET /\r\n\r\n"), 400},
    {"no target", S("GET HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"lower-case protocol", S("GET / http/1.1\r\nHost: a\r\n\r\n"), 400},
    {"HTTPS protocol", S("GET / HTTPS/1.1\r\nHost: a\r\n\r\n"), 400},
    {"version without minor", S("GET / HTTP/1\r\nHost: a\r\n\r\n"), 400},
    {"HTTP/2 written as h2 does", S("GET / HTTP/2\r\nHost: a\r\n\r\n"), 400},
    {"two-digit minor", S("GET / HTTP/1.10\r\nHost: a\r\n\r\n"), 400},
    {"two-digit major", S("GET / HTTP/11.1\r\nHost: a\r\n\r\n"), 400},
    {"space after version", S("GET / HTTP/1.1 \r\nHost: a\r\n\r\n"), 400},
    {"binary garbage", S("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"), 400},
    /* Versions. */
    {"HTTP/2.0", S("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), 505},
    {"HTTP/0.9", S("GET / HTTP/0.9\r\nHost: a\r\n\r\n"), 505},
    {"HTTP/1.2", S("GET / HTTP/1.2\r\nHost: a\r\n\r\n"), 505},
    {"HTTP/3.1", S("GET / HTTP/3.1\r\n\r\n"), 505},
    {"HTTP/9.9", S("PRI * HTTP/9.9\r\n\r\n"), 505},
    {"HTTP/2.0 preface", S("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 505},
};

/* The whole input fails with its status; every prefix is -EAGAIN or fails the same. */
START_TEST(rejects_bad_request_with_its_status)
{
    const struct bad_case *c = &bad_cases[_i];
    struct http_request req;
    int status;
    ssize_t rc;

    rc = parse(c->in, c->len, &req, &status);
    ck_assert_msg(rc == -EBADMSG && status == c->status, "%s: %zd, status %d (want %d)", c->what,
                  rc, status, c->status);
    for (size_t n = 0; n < c->len; n++) {
        rc = parse(c->in, n, &req, &status);
        ck_assert_msg((rc == -EAGAIN && status == 0) || (rc == -EBADMSG && status == c->status),
                      "%s, prefix %zu: %zd, status %d", c->what, n, rc, status);
    }
}
END_TEST

START_TEST(fails_as_soon_as_the_bad_byte_arrives)
{
    static const struct {
        const char *in;
        int status;
    } cases[] = {
        {"GET / HTTP/1.1\r\nHost : ", 400}, {"GET / HTTP/1.1\r\nX: \x01", 400}, {"GET /\x01", 400},
        {"GET / HTTP/1.1\n", 400},          {"GET / HTTP/2.0\r\n", 505},        {"GET / XTTP", 400},
        {"GET / HTTP/1.1\r\n\t", 400},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct http_request req;
        int status;

        ck_assert_int_eq(parse(cases[i].in, strlen(cases[i].in), &req, &status), -EBADMSG);
        ck_assert_int_eq(status, cases[i].status);
    }
}
END_TEST

/* What RFC 9110 allows, written apart from the parser's table. */
static bool in_token(int c)
{
    return c != 0 && ((c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
                      strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool in_field_content(int c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static bool in_target(int c)
{
    return c > 0x20 && c != 0x7f;
}

/* Parses before + a 40-byte run of 'a' with byte c at pos + after, and checks that it
 * parses whole when ok, else fails with 400. */
static void check_run(const char *what, const char *before, const char *after, int c, size_t pos,
                      bool ok)
{
    char buf[128];
    size_t nb = strlen(before);
    size_t na = strlen(after);
    struct http_request req;
    int status;
    ssize_t n;

    ck_assert_uint_le(nb + 40 + na, sizeof(buf));
    /* By hand, not snprintf: the run may hold a NUL. */
    memcpy(buf, before, nb);
    memset(buf + nb, 'a', 40);
    buf[nb + pos] = (char)c;
    memcpy(buf + nb + 40, after, na);
    n = parse(buf, nb + 40 + na, &req, &status);
    if (ok)
        ck_assert_msg(n == (ssize_t)(nb + 40 + na) && status == 0, "%s byte 0x%02x at %zu: %zd/%d",
                      what, c, pos, n, status);
    else
        ck_assert_msg(n == -EBADMSG && status == 400, "%s byte 0x%02x at %zu: %zd/%d", what, c, pos,
                      n, status);
}

/*
 * Every byte value at places in a 40-byte method, target, field name and field value:
 * where the parser takes 16 bytes at a time (SSE2), across the boundary of two such
 * blocks, and in the bytewise tail. Each is accepted exactly when RFC 9110 allows it,
 * else 400. A colon in a name ends it: that is a shorter name, unless it is empty.
 */
START_TEST(every_byte_value_is_judged_alike_anywhere_in_a_long_token_target_or_value)
{
    static const size_t at[] = {0, 3, 15, 16, 20, 31, 32, 37, 39};

    for (int c = 0; c < 256; c++) {
        for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
            size_t pos = at[k];

            check_run("method", "", " / HTTP/1.1\r\nHost: a\r\n\r\n", c, pos, in_token(c));
            check_run("target", "GET /", " HTTP/1.1\r\nHost: a\r\n\r\n", c, pos, in_target(c));
            check_run("name", "GET / HTTP/1.1\r\nHost: a\r\n", ": v\r\n\r\n", c, pos,
                      in_token(c) || (c == ':' && pos > 0));
            check_run("value", "GET / HTTP/1.1\r\nHost: a\r\nX: ", "\r\n\r\n", c, pos,
                      in_field_content(c));
        }
    }
}
END_TEST

/* ---------------------------------------------------------------- limits */

/* A request line of exactly len bytes (without CRLF): "GET /aaa...a HTTP/1.1". */
static char *request_line(size_t len)
{
    char *s = malloc(len + 1);
    size_t fill = len - strlen("GET / HTTP/1.1");

    ck_assert_ptr_nonnull(s);
    memcpy(s, "GET /", 5);
    memset(s + 5, 'a', fill);
    memcpy(s + 5 + fill, " HTTP/1.1", 10);
    return s;
}

/* A buffer: a request line, then the field lines, each of the given total bytes
 * (its CRLF included), then the blank line. The first field is "Host: a". */
static char *head_with_fields(const size_t *line_sizes, size_t n, size_t *len_out)
{
    size_t len = strlen("GET / HTTP/1.1\r\n") + 2;
    char *s;
    char *p;

    for (size_t i = 0; i < n; i++)
        len += line_sizes[i];
    s = malloc(len);
    ck_assert_ptr_nonnull(s);
    p = s;
    p += sprintf(p, "GET / HTTP/1.1\r\n");
    for (size_t i = 0; i < n; i++) {
        size_t size = line_sizes[i];

        ck_assert_uint_ge(size, 7);
        if (i == 0) {
            ck_assert_uint_eq(size, 9);
            memcpy(p, "Host: a\r\n", 9);
        } else {
            /* "Xnnnn: vvv...\r\n" */
            int k = sprintf(p, "X%zu:", i);

            ck_assert_uint_le((size_t)k + 2, size);
            memset(p + k, 'v', size - (size_t)k - 2);
            memcpy(p + size - 2, "\r\n", 2);
        }
        p += size;
    }
    memcpy(p, "\r\n", 2);
    *len_out = len;
    return s;
}

static void expect_line_limit(size_t max, const struct http_limits *lim)
{
    struct http_request req;
    int status;
    char *line;
    char *in;
    size_t len;

    for (size_t size = max - 1; size <= max + 1; size++) {
        line = request_line(size);
        len = size + strlen("\r\nHost: a\r\n\r\n");
        in = malloc(len + 1);
        ck_assert_ptr_nonnull(in);
        sprintf(in, "%s\r\nHost: a\r\n\r\n", line);
        init_request(&req, HEADERS_CAP);
        if (size <= max) {
            ck_assert_int_eq(parse_lim(in, len, &req, lim, &status), (ssize_t)len);
            ck_assert_uint_eq(req.target_len, size - strlen("GET  HTTP/1.1"));
        } else {
            ck_assert_int_eq(parse_lim(in, len, &req, lim, &status), -EBADMSG);
            ck_assert_int_eq(status, 414);
        }
        /* The line without its CRLF: at the limit it may still end; past it, 414 now. */
        ck_assert_int_eq(parse_lim(in, size, &req, lim, &status), size <= max ? -EAGAIN : -EBADMSG);
        free(in);
        free(line);
    }
}

START_TEST(request_line_at_the_limit_passes_and_one_more_is_414)
{
    struct http_limits small = {.request_line_max = 40};

    expect_line_limit(HTTP_REQUEST_LINE_MAX_DEFAULT, NULL);
    expect_line_limit(40, &small);
}
END_TEST

START_TEST(over_long_request_line_is_414_before_its_end)
{
    size_t len = 100000;
    char *in = malloc(len);
    struct http_request req;
    int status;

    ck_assert_ptr_nonnull(in);
    memcpy(in, "GET /", 5);
    memset(in + 5, 'a', len - 5);
    ck_assert_int_eq(parse(in, HTTP_REQUEST_LINE_MAX_DEFAULT, &req, &status), -EAGAIN);
    ck_assert_int_eq(parse(in, HTTP_REQUEST_LINE_MAX_DEFAULT + 1, &req, &status), -EBADMSG);
    ck_assert_int_eq(status, 414);
    ck_assert_int_eq(parse(in, len, &req, &status), -EBADMSG);
    ck_assert_int_eq(status, 414);
    /* A long method is the request line's too. */
    memset(in, 'G', len);
    ck_assert_int_eq(parse(in, len, &req, &status), -EBADMSG);
    ck_assert_int_eq(status, 414);
    free(in);
}
END_TEST

START_TEST(header_line_at_the_limit_passes_and_one_more_is_431)
{
    const size_t max = HTTP_HEADER_LINE_MAX_DEFAULT;

    for (size_t content = max - 1; content <= max + 1; content++) {
        size_t sizes[] = {9, content + 2, 20};
        size_t len;
        char *in = head_with_fields(sizes, 3, &len);
        struct http_request req;
        int status;
        ssize_t rc = parse(in, len, &req, &status);

        if (content <= max) {
            ck_assert_int_eq(rc, (ssize_t)len);
            ck_assert_uint_eq(headers[1].name_len + 1 + headers[1].value_len, content);
        } else {
            ck_assert_int_eq(rc, -EBADMSG);
            ck_assert_int_eq(status, 431);
            /* Known before the line's CRLF arrives. */
            ck_assert_int_eq(parse(in, 16 + 9 + max + 1, &req, &status), -EBADMSG);
            ck_assert_int_eq(status, 431);
        }
        free(in);
    }
}
END_TEST

START_TEST(custom_header_line_limit)
{
    static const char in[] = "GET / HTTP/1.1\r\nHost: a\r\nX: 12345\r\n\r\n";
    struct http_limits lim = {.header_line_max = 8};
    struct http_request req;
    int status;

    init_request(&req, HEADERS_CAP);
    ck_assert_int_eq(parse_lim(S(in), &req, &lim, &status), (ssize_t)strlen(in));
    lim.header_line_max = 7;
    ck_assert_int_eq(parse_lim(S(in), &req, &lim, &status), -EBADMSG);
    ck_assert_int_eq(status, 431);
}
END_TEST

START_TEST(headers_at_the_total_limit_pass_and_one_more_byte_is_431)
{
    const size_t max = HTTP_HEADERS_MAX_DEFAULT;

    /* Host (9) + three full lines (8194 each) + the rest: exactly max, then max + 1. */
    for (size_t extra = 0; extra <= 1; extra++) {
        size_t sizes[] = {9, 8194, 8194, 8194, max - 9 - 3 * 8194 + extra};
        size_t len;
        char *in = head_with_fields(sizes, 5, &len);
        struct http_request req;
        int status;
        ssize_t rc = parse(in, len, &req, &status);

        if (extra == 0) {
            ck_assert_int_eq(rc, (ssize_t)len);
            ck_assert_uint_eq(req.num_headers, 5);
        } else {
            ck_assert_int_eq(rc, -EBADMSG);
            ck_assert_int_eq(status, 431);
        }
        free(in);
    }
}
END_TEST

START_TEST(custom_headers_total_limit)
{
    static const char in[] = "GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n\r\n"; /* 9 + 6 bytes */
    struct http_limits lim = {.headers_max = 15};
    struct http_request req;
    int status;

    init_request(&req, HEADERS_CAP);
    ck_assert_int_eq(parse_lim(S(in), &req, &lim, &status), (ssize_t)strlen(in));
    lim.headers_max = 14;
    ck_assert_int_eq(parse_lim(S(in), &req, &lim, &status), -EBADMSG);
    ck_assert_int_eq(status, 431);
    lim.headers_max = 1;
    ck_assert_int_eq(parse_lim(S(in), &req, &lim, &status), -EBADMSG);
    ck_assert_int_eq(status, 431);
}
END_TEST

static void expect_fields(size_t fields, size_t cap, const struct http_limits *lim, int want)
{
    size_t sizes[HEADERS_CAP + 8];
    size_t len;
    char *in;
    struct http_request req;
    int status;
    ssize_t rc;

    ck_assert_uint_le(fields, sizeof(sizes) / sizeof(sizes[0]));
    sizes[0] = 9;
    for (size_t i = 1; i < fields; i++)
        sizes[i] = 12;
    in = head_with_fields(sizes, fields, &len);
    init_request(&req, cap);
    rc = parse_lim(in, len, &req, lim, &status);
    if (want == 0) {
        ck_assert_int_eq(rc, (ssize_t)len);
        ck_assert_uint_eq(req.num_headers, fields);
    } else {
        ck_assert_int_eq(rc, -EBADMSG);
        ck_assert_int_eq(status, want);
    }
    free(in);
}

START_TEST(hundred_fields_pass_and_the_101st_is_431)
{
    expect_fields(HTTP_FIELDS_MAX_DEFAULT, HEADERS_CAP, NULL, 0);
    expect_fields(HTTP_FIELDS_MAX_DEFAULT + 1, HEADERS_CAP, NULL, 431);
}
END_TEST

START_TEST(field_count_is_bounded_by_the_limit_and_the_array)
{
    struct http_limits lim = {.fields_max = 3};

    expect_fields(3, HEADERS_CAP, &lim, 0);
    expect_fields(4, HEADERS_CAP, &lim, 431);
    expect_fields(10, 10, NULL, 0);
    expect_fields(11, 10, NULL, 431);
}
END_TEST

/* ---------------------------------------------------------------- chunked bodies */

/* Bodies that end where "GET" starts. */
static const struct chunked_case {
    const char *in;
    size_t len;
} chunked_good[] = {
    {S("0\r\n\r\nGET")},
    {S("5\r\nhello\r\n0\r\n\r\nGET")},
    {S("A\r\n0123456789\r\na\r\n0123456789\r\n0\r\n\r\nGET")},
    {S("00005\r\nhello\r\n000\r\n\r\nGET")},
    {S("5;name=value\r\nhello\r\n0;last\r\n\r\nGET")},
    {S("5 ;a=\"q s\";b\t; c = d\r\nhel\r\n\r\n0\r\n\r\nGET")},
    {S("1\r\n\0\r\n1\r\n\xff\r\n0\r\n\r\nGET")},
    {S("3\r\nabc\r\n0\r\nX-Trailer: v\r\nChecksum:\r\nY:\tz \x80\r\n\r\nGET")},
};

static size_t body_len(const struct chunked_case *c)
{
    return c->len - 3;
}

START_TEST(chunked_reads_sizes_extensions_and_trailers)
{
    const struct chunked_case *c = &chunked_good[_i];
    struct http_chunked st = {0};
    bool done = false;
    const char *p = cr_test_guard_put(c->in, c->len);

    ck_assert_int_eq(http_chunked_consume(&st, p, c->len, &done), (ssize_t)body_len(c));
    ck_assert(done);
    /* Done stays done and consumes nothing more. */
    ck_assert_int_eq(http_chunked_consume(&st, p + body_len(c), 3, &done), 0);
    ck_assert(done);
}
END_TEST

/* Fed in two pieces split at every byte, then one byte at a time: the same end. */
START_TEST(chunked_gives_the_same_result_split_at_every_byte)
{
    const struct chunked_case *c = &chunked_good[_i];
    const size_t body = body_len(c);

    for (size_t k = 0; k <= c->len; k++) {
        struct http_chunked st = {0};
        bool done = false;
        const char *p = cr_test_guard_put(c->in, k);
        ssize_t n = http_chunked_consume(&st, p, k, &done);

        if (k < body) {
            ck_assert_int_eq(n, (ssize_t)k);
            ck_assert(!done);
            p = cr_test_guard_put(c->in + k, c->len - k);
            n = http_chunked_consume(&st, p, c->len - k, &done);
            ck_assert_int_eq(n, (ssize_t)(body - k));
        } else {
            ck_assert_int_eq(n, (ssize_t)body);
        }
        ck_assert(done);
    }

    struct http_chunked st = {0};
    bool done = false;
    size_t total = 0;

    for (size_t k = 0; k < c->len && !done; k++) {
        const char *p = cr_test_guard_put(c->in + k, 1);
        ssize_t n = http_chunked_consume(&st, p, 1, &done);

        ck_assert_int_eq(n, 1);
        total += (size_t)n;
    }
    ck_assert(done);
    ck_assert_uint_eq(total, body);
}
END_TEST

START_TEST(chunked_skips_a_large_chunk_in_pieces)
{
    const size_t size = 0x12345;
    char *in = malloc(size + 32);
    struct http_chunked st = {0};
    bool done = false;
    size_t len;
    size_t off = 0;

    ck_assert_ptr_nonnull(in);
    len = (size_t)sprintf(in, "%zx\r\n", size);
    memset(in + len, 'x', size);
    len += size;
    memcpy(in + len, "\r\n0\r\n\r\n", 7);
    len += 7;
    while (!done) {
        size_t piece = len - off < 1000 ? len - off : 1000;
        ssize_t n = http_chunked_consume(&st, cr_test_guard_put(in + off, piece), piece, &done);

        ck_assert_int_ge(n, 0);
        off += (size_t)n;
    }
    ck_assert_uint_eq(off, len);
    free(in);
}
END_TEST

static const struct chunked_bad_case {
    const char *what;
    const char *in;
    size_t len;
} chunked_bad[] = {
    {"no size", S("\r\n")},
    {"not hex", S("g\r\n")},
    {"sign", S("+5\r\nhello\r\n0\r\n\r\n")},
    {"negative", S("-5\r\n")},
    {"0x prefix", S("0x5\r\n")},
    {"bare LF after size", S("5\nhello\r\n0\r\n\r\n")},
    {"bare CR after size", S("5\rhello")},
    {"space inside size", S("1 2\r\n")},
    {"trailing whitespace", S("5 \r\nhello\r\n0\r\n\r\n")},
    {"leading whitespace", S(" 5\r\n")},
    {"CTL in extension", S("5;a\x01\r\nhello\r\n")},
    {"bare LF in extension", S("5;a\nhello\r\n")},
    {"data too long", S("5\r\nhello!\r\n0\r\n\r\n")},
    {"data with bare LF", S("5\r\nhello\n0\r\n\r\n")},
    {"over INT64_MAX", S("8000000000000000\r\n")},
    {"overflow", S("100000000000000000\r\n")},
    {"trailer obs-fold", S("0\r\nA: b\r\n c\r\n\r\n")},
    {"trailer without colon", S("0\r\nAb\r\n\r\n")},
    {"trailer space before colon", S("0\r\nA : b\r\n\r\n")},
    {"trailer bare LF", S("0\r\nA: b\n\r\n")},
    {"trailer CTL", S("0\r\nA: \x7f\r\n\r\n")},
    {"bare LF at the end", S("0\r\n\n")},
    {"CR without LF at the end", S("0\r\n\rX")},
};

START_TEST(chunked_rejects_malformed_body)
{
    const struct chunked_bad_case *c = &chunked_bad[_i];
    struct http_chunked st = {0};
    bool done = false;
    ssize_t n = http_chunked_consume(&st, cr_test_guard_put(c->in, c->len), c->len, &done);

    ck_assert_msg(n == -EBADMSG, "%s: %zd", c->what, n);
    /* Byte by byte, it fails too, never past the bad byte. */
    memset(&st, 0, sizeof(st));
    for (size_t k = 0; k < c->len; k++) {
        n = http_chunked_consume(&st, cr_test_guard_put(c->in + k, 1), 1, &done);
        if (n < 0)
            break;
        ck_assert_msg(n == 1 && !done, "%s at %zu", c->what, k);
    }
    ck_assert_msg(n == -EBADMSG, "%s byte by byte: %zd", c->what, n);
}
END_TEST

START_TEST(chunked_accepts_the_largest_size)
{
    static const char in[] = "7fffffffffffffff\r\nabc";
    struct http_chunked st = {0};
    bool done = false;

    ck_assert_int_eq(http_chunked_consume(&st, cr_test_guard_put(S(in)), strlen(in), &done),
                     (ssize_t)strlen(in));
    ck_assert(!done);
    ck_assert_uint_eq(st.remaining, (uint64_t)INT64_MAX - 3);
}
END_TEST

START_TEST(chunked_bounds_size_lines_and_trailers)
{
    static const char ext[] = "5;aaaaaaaa\r\nhello\r\n0\r\n\r\n"; /* size line: 10 bytes */
    static const char trl[] = "0\r\nX: 12\r\n\r\n";               /* trailers: 9 bytes */
    struct http_chunked st = {.line_max = 10};
    bool done = false;

    ck_assert_int_eq(http_chunked_consume(&st, cr_test_guard_put(S(ext)), strlen(ext), &done),
                     (ssize_t)strlen(ext));
    ck_assert(done);
    st = (struct http_chunked){.line_max = 9};
    ck_assert_int_eq(http_chunked_consume(&st, cr_test_guard_put(S(ext)), strlen(ext), &done),
                     -EBADMSG);

    st = (struct http_chunked){.trailers_max = 9};
    ck_assert_int_eq(http_chunked_consume(&st, cr_test_guard_put(S(trl)), strlen(trl), &done),
                     (ssize_t)strlen(trl));
    ck_assert(done);
    st = (struct http_chunked){.trailers_max = 8};
    ck_assert_int_eq(http_chunked_consume(&st, cr_test_guard_put(S(trl)), strlen(trl), &done),
                     -EBADMSG);

    /* The default line limit: endless leading zeros or extensions are cut off. */
    {
        size_t len = HTTP_CHUNK_LINE_MAX_DEFAULT + 1;
        char *in = malloc(len);

        ck_assert_ptr_nonnull(in);
        memset(in, '0', len);
        st = (struct http_chunked){0};
        ck_assert_int_eq(http_chunked_consume(&st, cr_test_guard_put(in, len - 1), len - 1, &done),
                         (ssize_t)(len - 1));
        ck_assert_int_eq(http_chunked_consume(&st, cr_test_guard_put(in, 1), 1, &done), -EBADMSG);
        free(in);
    }
}
END_TEST

static void teardown(void)
{
    cr_test_guard_release();
}

Suite *http_parser_suite(void);
Suite *http_parser_suite(void)
{
    Suite *s = suite_create("http_parser");
    TCase *tc = tcase_create("request");
    TCase *lim = tcase_create("limits");
    TCase *ck = tcase_create("chunked");

    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, parses_get_with_headers);
    tcase_add_test(tc, sets_every_field_of_an_uncleared_request);
    tcase_add_test(tc, recognises_methods_case_sensitively);
    tcase_add_test(tc, returns_the_exact_head_length_of_the_first_pipelined_request);
    tcase_add_test(tc, head_length_excludes_the_body);
    tcase_add_loop_test(tc, keep_alive_follows_version_and_connection_tokens, 0,
                        sizeof(keep_alive_cases) / sizeof(keep_alive_cases[0]));
    tcase_add_test(tc, trims_whitespace_around_values);
    tcase_add_test(tc, points_at_the_conditional_and_range_fields);
    tcase_add_test(tc, derives_content_length_and_chunked);
    tcase_add_loop_test(tc, accepts_good_request_and_every_prefix_is_eagain, 0,
                        sizeof(good_cases) / sizeof(good_cases[0]));
    tcase_add_loop_test(tc, rejects_bad_request_with_its_status, 0,
                        sizeof(bad_cases) / sizeof(bad_cases[0]));
    tcase_add_test(tc, fails_as_soon_as_the_bad_byte_arrives);
    tcase_add_test(tc, every_byte_value_is_judged_alike_anywhere_in_a_long_token_target_or_value);
    suite_add_tcase(s, tc);

    tcase_set_timeout(lim, 30);
    tcase_add_checked_fixture(lim, NULL, teardown);
    tcase_add_test(lim, request_line_at_the_limit_passes_and_one_more_is_414);
    tcase_add_test(lim, over_long_request_line_is_414_before_its_end);
    tcase_add_test(lim, header_line_at_the_limit_passes_and_one_more_is_431);
    tcase_add_test(lim, custom_header_line_limit);
    tcase_add_test(lim, headers_at_the_total_limit_pass_and_one_more_byte_is_431);
    tcase_add_test(lim, custom_headers_total_limit);
    tcase_add_test(lim, hundred_fields_pass_and_the_101st_is_431);
    tcase_add_test(lim, field_count_is_bounded_by_the_limit_and_the_array);
    suite_add_tcase(s, lim);

    tcase_add_checked_fixture(ck, NULL, teardown);
    tcase_add_loop_test(ck, chunked_reads_sizes_extensions_and_trailers, 0,
                        sizeof(chunked_good) / sizeof(chunked_good[0]));
    tcase_add_loop_test(ck, chunked_gives_the_same_result_split_at_every_byte, 0,
                        sizeof(chunked_good) / sizeof(chunked_good[0]));
    tcase_add_test(ck, chunked_skips_a_large_chunk_in_pieces);
    tcase_add_loop_test(ck, chunked_rejects_malformed_body, 0,
                        sizeof(chunked_bad) / sizeof(chunked_bad[0]));
    tcase_add_test(ck, chunked_accepts_the_largest_size);
    tcase_add_test(ck, chunked_bounds_size_lines_and_trailers);
    suite_add_tcase(s, ck);
    return s;
}
