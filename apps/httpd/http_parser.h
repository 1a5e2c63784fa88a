/*
 * http_parser.h - cabrank-httpd's HTTP/1.1 request parser (RFC 9110, RFC 9112): the
 * request head (request line and header fields) and a decoder for chunked bodies, which
 * the server reads only to discard them. Called by the HTTP service on whatever thread
 * serves the connection.
 *
 * The shape of picohttpparser: stateless, zero-copy, no allocation. Each call parses
 * from the start of what has arrived; a partial head returns -EAGAIN and the caller
 * calls again, from the start, once more bytes arrived. Every pointer a parse returns
 * points into the caller's buffer, and every header goes into an array the caller
 * provides.
 *
 * Strict where laxness lets requests be smuggled or misrouted; the decisions:
 *   - Lines end in CRLF. A bare LF (accepted by some servers, RFC 9112 2.2 allows it)
 *     and a bare CR are 400: a proxy that splits lines differently would see another
 *     request than we do.
 *   - One empty line (CRLF) before the request line is skipped (RFC 9112 2.2: clients
 *     append CRLF after a body); a second one is 400.
 *   - Request line: method SP request-target SP HTTP-version, single spaces. The
 *     method is a token, case-sensitive; unknown methods parse (HTTP_METHOD_OTHER).
 *     The target is any run of visible bytes (VCHAR and bytes >= 0x80; its form is
 *     the server's business); a control byte in it is 400. "HTTP/" DIGIT "." DIGIT
 *     other than 1.0 and 1.1 is 505; anything else in its place is 400.
 *   - Field lines: the name is a token followed at once by ':' (whitespace before the
 *     colon is 400); the value is VCHAR, bytes >= 0x80, SP and HTAB (other control
 *     bytes, NUL and DEL included, are 400). A line starting with SP or HTAB (obs-fold,
 *     or whitespace before the first field) is 400.
 *   - Content-Length: 1*DIGIT up to INT64_MAX, nothing else (no sign, no inner
 *     space, no list). A second Content-Length line is 400 even with the same value:
 *     RFC 9110 8.6 lets a recipient merge identical values, but nothing legitimate
 *     sends two, and framing disagreements are how requests are smuggled.
 *   - Transfer-Encoding (all of its lines taken as one list): with Content-Length
 *     400; in an HTTP/1.0 request 400 (RFC 9112 6.1: its framing is faulty); any
 *     coding other than "chunked" 501, whatever its position ("gzip, chunked" is 501:
 *     we decode no other coding); "chunked" twice or an empty list 400. Empty list
 *     elements are skipped (RFC 9110 5.6.1).
 *   - Host: required in HTTP/1.1, at most one line in any version, and its value a
 *     uri-host [":" port] (RFC 9112 3.2), else 400. It may be empty.
 *   - Range, If-Range, If-Modified-Since and If-Unmodified-Since are singletons: a
 *     second line is 400 rather than a guess at which one a cache saw. List fields
 *     (If-None-Match, If-Match, Accept-Encoding) may repeat: the request points at the
 *     first line, http_request_header_next() finds the others.
 *
 * Limits (struct http_limits) are checked as bytes arrive, so a request line longer
 * than its limit is 414 before its CRLF arrives, and an over-long field line 431.
 */
#ifndef CABRANK_HTTPD_HTTP_PARSER_H
#define CABRANK_HTTPD_HTTP_PARSER_H

#include <cabrank/common.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Defaults of struct http_limits (a zero field means its default). */
#define HTTP_REQUEST_LINE_MAX_DEFAULT 8192
#define HTTP_HEADER_LINE_MAX_DEFAULT  8192
#define HTTP_HEADERS_MAX_DEFAULT      32768
#define HTTP_FIELDS_MAX_DEFAULT       100

/* Defaults of the limits in struct http_chunked. */
#define HTTP_CHUNK_LINE_MAX_DEFAULT 4096
#define HTTP_TRAILERS_MAX_DEFAULT   32768

enum http_method {
    HTTP_METHOD_OTHER = 0, /* a token we do not know: the server answers 501 or 405 */
    HTTP_METHOD_GET,
    HTTP_METHOD_HEAD,
    HTTP_METHOD_POST,
    HTTP_METHOD_PUT,
    HTTP_METHOD_DELETE,
    HTTP_METHOD_OPTIONS,
    HTTP_METHOD_TRACE,
    HTTP_METHOD_CONNECT,
    HTTP_METHOD_PATCH,
};

/* One field line, pointing into the parsed buffer. The value has its surrounding
 * whitespace (OWS) trimmed; it may be empty. */
struct http_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};

/* Limits on a request head; a zero field means its default. Exceeding request_line_max
 * is 414, the others 431. */
struct http_limits {
    size_t request_line_max; /* request line bytes, without its CRLF; 8192 */
    size_t header_line_max;  /* one field line's bytes, without its CRLF; 8192 */
    size_t headers_max;      /* all field lines, each with its CRLF (the request line and
                                the blank line ending the head not counted); 32768 */
    size_t fields_max;       /* field lines; 100 (also bounded by headers_cap) */
};

/* A parsed request head. The caller sets headers and headers_cap; the parser sets the
 * rest. Every pointer points into the parsed buffer (or into headers), so it is valid
 * while both are. After -EAGAIN or -EBADMSG the output fields are unspecified. */
struct http_request {
    /* In: the array field lines go into (borrowed), and its capacity. */
    struct http_header *headers;
    size_t headers_cap;

    /* Out: the request line. */
    const char *method;
    size_t method_len;
    enum http_method method_id;
    const char *target;
    size_t target_len;
    int minor_version; /* HTTP/1.<minor_version>: 0 or 1 */

    /* Out: the field lines, in order: headers[0..num_headers). */
    size_t num_headers;

    /* Out: derived from the fields. */
    int64_t content_length; /* -1: no Content-Length */
    bool is_chunked;        /* Transfer-Encoding: chunked (then content_length is -1) */
    bool keep_alive;        /* 1.1 unless "Connection: close"; 1.0 only with keep-alive */
    const char *host;       /* Host's value, or NULL when there is none (HTTP/1.0) */
    size_t host_len;

    /* Out: the first line of each of these fields, or NULL when absent. */
    const struct http_header *if_none_match;
    const struct http_header *if_match;
    const struct http_header *if_modified_since;
    const struct http_header *if_unmodified_since;
    const struct http_header *if_range;
    const struct http_header *range;
    const struct http_header *accept_encoding;
    const struct http_header *user_agent;
    const struct http_header *referer;
};

/*
 * Parses the request head at buf[0..len). req->headers and req->headers_cap must be
 * set; every other field of req it sets, whatever the result (the caller need not
 * clear req); lim may be NULL (all defaults). Returns the length of the head, through the
 * blank line that ends it (the body or the next pipelined request starts there);
 * -EAGAIN when the head is incomplete and valid so far (call again from the start with
 * more bytes); or -EBADMSG when it is malformed or over a limit, with *status set to
 * the answer: 400, 414, 431, 501 or 505. *status is 0 otherwise. Reads nothing beyond
 * buf[len - 1]. Thread-safe.
 */
ssize_t http_parse_request(const char *buf, size_t len, struct http_request *req,
                           const struct http_limits *lim, int *status);

/* The first field line named name (case-insensitive), or NULL. Thread-safe. */
const struct http_header *http_request_header(const struct http_request *req, const char *name);

/* The next field line after prev (one of req->headers) with prev's name, or NULL: walks
 * the lines of a field that may repeat. Thread-safe. */
const struct http_header *http_request_header_next(const struct http_request *req,
                                                   const struct http_header *prev);

/* Whether a token list field value (Connection, ...) holds token, case-insensitive.
 * Thread-safe. */
bool http_has_token(const char *value, size_t value_len, const char *token);

/*
 * A chunked body's decoder state, kept by the caller between calls (a body arrives in
 * pieces; unlike a head it is not re-parsed from its start). Zero-initialise it, set
 * the limits if the defaults do not fit, and do not touch the rest.
 */
struct http_chunked {
    /* Limits, zero meaning the default; set before the first call. */
    size_t line_max;     /* one chunk-size line with its extensions, without CRLF; 4096 */
    size_t trailers_max; /* the trailer section, with every CRLF; 32768 */

    /* The decoder's. */
    uint64_t remaining; /* data bytes left in this chunk, or its size being read */
    size_t line_len;
    size_t trailers_len;
    unsigned state;
};

/*
 * Reads (and discards) chunked body bytes buf[0..len): chunk sizes, extensions (skipped),
 * data, the last chunk and the trailer section (checked and skipped). Returns the bytes
 * consumed: all of len unless the body ended in it, then the bytes through the body's
 * final CRLF, with *done set (whatever follows is the next request). -EBADMSG for a
 * malformed body (a bad or overflowing chunk size, data not followed by CRLF, a bare
 * LF, a control byte, a line or the trailers over their limit); the state is then
 * unspecified and the connection must close. Owner thread only (of st).
 */
ssize_t http_chunked_consume(struct http_chunked *st, const char *buf, size_t len, bool *done);

#endif /* CABRANK_HTTPD_HTTP_PARSER_H */
