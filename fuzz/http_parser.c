/*
 * fuzz/http_parser.c - libFuzzer target for cabrank-httpd's request parser
 * (apps/httpd/http_parser.c): one http_parse_request() over the input, then the chunked
 * decoder over what follows the head (or over the whole input when there is no head).
 * Besides crashes and sanitizer reports it checks the contract: statuses, pointers
 * inside the input, the derived fields, a prefix giving -EAGAIN or the same result as
 * the whole (the parser is stateless), and the chunked decoder giving the same result
 * whole and split in two. Seeds: fuzz/corpus/http_parser/, dictionary
 * fuzz/http_parser.dict. Build and run: make fuzz FUZZ_SECONDS=60.
 */
#include "../apps/httpd/http_parser.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FIELDS 100

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(bool ok)
{
    if (!ok)
        abort();
}

static bool is_inside(const char *p, size_t len, const char *buf, size_t size)
{
    return p >= buf && len <= size && (size_t)(p - buf) <= size - len;
}

static ssize_t parse(const char *buf, size_t len, struct http_request *req, int *status)
{
    static struct http_header headers[FIELDS];

    memset(req, 0, sizeof(*req));
    req->headers = headers;
    req->headers_cap = FIELDS;
    return http_parse_request(buf, len, req, NULL, status);
}

static void check_request(const char *buf, size_t size, ssize_t n, const struct http_request *r,
                          int status)
{
    if (n == -EAGAIN) {
        require(status == 0);
        return;
    }
    if (n == -EBADMSG) {
        require(status == 400 || status == 414 || status == 431 || status == 501 || status == 505);
        return;
    }
    require(n > 0 && (size_t)n <= size && status == 0);
    require(is_inside(r->method, r->method_len, buf, (size_t)n) && r->method_len > 0);
    require(is_inside(r->target, r->target_len, buf, (size_t)n) && r->target_len > 0);
    require(r->minor_version == 0 || r->minor_version == 1);
    require(r->num_headers <= FIELDS);
    for (size_t i = 0; i < r->num_headers; i++) {
        const struct http_header *h = &r->headers[i];

        require(is_inside(h->name, h->name_len, buf, (size_t)n) && h->name_len > 0);
        require(is_inside(h->value, h->value_len, buf, (size_t)n));
    }
    require(r->content_length >= -1);
    require(!(r->is_chunked && r->content_length != -1));
    require(!r->is_chunked || r->minor_version == 1);
    require(r->minor_version == 0 || r->host != NULL);
    require(r->host == NULL || is_inside(r->host, r->host_len, buf, (size_t)n));
}

/* The chunked decoder over buf[0..len): whole, then in two pieces split at cut. */
static void check_chunked(const char *buf, size_t len, size_t cut)
{
    struct http_chunked whole = {0};
    struct http_chunked split = {0};
    bool done_whole;
    bool done;
    ssize_t n_whole = http_chunked_consume(&whole, buf, len, &done_whole);
    ssize_t n = http_chunked_consume(&split, buf, cut, &done);

    require(n_whole == -EBADMSG || (n_whole >= 0 && (size_t)n_whole <= len));
    require(n_whole == -EBADMSG || done_whole || (size_t)n_whole == len);
    if (n >= 0 && !done) {
        ssize_t m;

        require((size_t)n == cut);
        m = http_chunked_consume(&split, buf + cut, len - cut, &done);
        n = m < 0 ? m : n + m;
    }
    require(n == n_whole && (n < 0 || done == done_whole));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    struct http_request req;
    int status;
    int status_prefix;
    ssize_t n = parse(buf, size, &req, &status);
    size_t cut = size / 2;
    char *prefix;
    ssize_t m;

    check_request(buf, size, n, &req, status);

    /* Stateless and no look-ahead: a prefix is incomplete or fails or ends the same.
     * A copy of exactly its length, so that ASan sees a read past it. */
    prefix = malloc(cut + 1);
    if (prefix == NULL)
        return 0;
    memcpy(prefix, buf, cut);
    m = parse(prefix, cut, &req, &status_prefix);
    check_request(prefix, cut, m, &req, status_prefix);
    if (n >= 0 && (size_t)n <= cut)
        require(m == n);
    else if (m != -EAGAIN)
        require(m == -EBADMSG && n == -EBADMSG && status_prefix == status);
    free(prefix);

    if (n > 0)
        check_chunked(buf + n, size - (size_t)n, (size - (size_t)n) / 2);
    else
        check_chunked(buf, size, cut);
    return 0;
}
