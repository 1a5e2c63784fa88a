/*
 * http_file.h - the HTTP semantics of a static-file response for cabrank-httpd, as pure
 * functions of the file's validators and the request's field values (RFC 9110): ETag and
 * Last-Modified (IMF-fixdate) generation, HTTP-date parsing, the precondition order of
 * section 13.2.2, Range / If-Range (section 14), the multipart/byteranges layout (with its
 * exact length computed up front) and the Accept-Encoding test for a precompressed ".gz".
 * Called by the HTTP service on any serving thread; stateless, allocation-free (results go
 * into caller buffers and result structs), thread-safe throughout.
 *
 * Decisions:
 *   - ETag: strong, "<mtime-sec hex>.<mtime-nsec hex>-<size hex>" with "-gz" appended for the
 *     precompressed variant (a different representation needs a different strong validator).
 *     No inode: servers holding copies of one tree (rsync -t) then agree, as nginx's do; the
 *     nanoseconds tell apart same-size rewrites within one second, which nginx's
 *     "<sec>-<size>" cannot.
 *   - If-None-Match uses the weak comparison, If-Match and If-Range the strong one; a
 *     Last-Modified date in If-Range matches only when exactly equal.
 *   - Range: only for GET, unit "bytes" (any case). A syntactically invalid Range field, another
 *     unit, or more than HTTP_RANGE_MAX range-specs is IGNORED (200 with the whole file), as
 *     RFC 9110 14.2 allows and nginx and Apache do; a valid field none of whose ranges is
 *     satisfiable gives 416 with "Content-Range: bytes * /size" (no space). Satisfiable ranges
 *     are sorted and those that overlap or touch are coalesced (14.2 allows it, and it bounds
 *     the body by the file size whatever the request), so 206 multipart parts are ascending
 *     and disjoint; one range left means a single-part 206.
 *   - Vary: the service sends "Vary: Accept-Encoding" on every response (200, 206, 304) for a
 *     file that has a ".gz" sibling, whichever variant it serves.
 *
 * The service builds headers from struct http_file_plan:
 *   200: Content-Length = size, ETag, Last-Modified, Content-Type, Accept-Ranges: bytes.
 *   206, ranges.n == 1: Content-Range (http_content_range_format()), Content-Length = the
 *        range's length, the same validators and Content-Type.
 *   206, ranges.n > 1: Content-Type: multipart/byteranges; boundary=<plan.boundary>,
 *        Content-Length = plan.content_length; the body is, for each part, its
 *        http_multipart_part_header() then the file bytes, then http_multipart_trailer().
 *   304: ETag, Last-Modified (and Vary), no body. 412: no validators needed.
 *   416: Content-Range: bytes * /size (http_content_range_format(..., NULL, size)).
 */
#ifndef CABRANK_HTTPD_HTTP_FILE_H
#define CABRANK_HTTPD_HTTP_FILE_H

#include <cabrank/common.h>
#include <sys/stat.h>

#include "out_buf.h"

/* An ETag as http_etag_format() writes it, with quotes and NUL, fits in this. */
#define HTTP_ETAG_MAX 64
/* An IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") without its NUL. */
#define HTTP_DATE_LEN 29
/* Most range-specs honoured in one Range field; more and the field is ignored. */
#define HTTP_RANGE_MAX 16
/* A multipart boundary from http_multipart_boundary(), without its NUL. */
#define HTTP_BOUNDARY_LEN 20
/* "bytes <first>-<last>/<size>" with NUL fits in this. */
#define HTTP_CONTENT_RANGE_MAX 72

/* ---------------------------------------------------------------- validators */

/*
 * Writes the strong ETag of a file with st's mtime and size (gzip: of the ".gz" variant) into
 * out[0..cap) with its quotes, NUL-terminated. Returns its length, or 0 if cap is too small
 * (HTTP_ETAG_MAX always suffices). Thread-safe.
 */
size_t http_etag_format(char *out, size_t cap, const struct stat *st, bool gzip);

/*
 * Writes t (seconds since the epoch, 0001..9999 CE) as an IMF-fixdate into out, which has room
 * for HTTP_DATE_LEN + 1 bytes, NUL-terminated. Returns HTTP_DATE_LEN, or 0 for a year outside
 * 1..9999. Thread-safe (no libc time functions, no locale).
 */
size_t http_date_format(char *out, int64_t t);

/*
 * Parses an HTTP-date s[0..len) (surrounding whitespace allowed): IMF-fixdate, and the obsolete
 * RFC 850 ("Sunday, 06-Nov-94 08:49:37 GMT"; a two-digit year more than 50 years in the future
 * is taken as in the past) and asctime ("Sun Nov  6 08:49:37 1994") formats recipients must
 * accept (RFC 9110 5.6.7). The weekday name must be a valid name but is not cross-checked.
 * The result is within the range of http_date_format(): a leap second on 9999-12-31 is
 * refused. Returns 0 with *t set, or -EBADMSG. Thread-safe.
 */
CR_MUST_CHECK int http_date_parse(const char *s, size_t len, int64_t *t);

/*
 * Whether the If-Match / If-None-Match field value list[0..len) ("*" or a comma-separated
 * list of entity-tags) matches etag[0..etag_len) (a quoted entity-tag, possibly W/-prefixed):
 * strong comparison when !weak (both must be strong and equal), weak otherwise (opaque-tags
 * equal). "*" matches any etag. A malformed list matches nothing. Thread-safe.
 */
bool http_etag_match(const char *list, size_t len, const char *etag, size_t etag_len, bool weak);

/* ---------------------------------------------------------------- preconditions */

/* What a selected representation is validated by. */
struct http_validators {
    /* The strong ETag with quotes (http_etag_format()); borrowed. */
    const char *etag;
    size_t etag_len;
    /* Last-Modified, seconds since the epoch. */
    int64_t mtime;
    /* Representation length in bytes. */
    uint64_t size;
    /* The server's clock, seconds since the epoch: the second the answer is dated (its Date
     * field). A date later than it in If-Modified-Since is invalid (RFC 9110 13.1.3), and a
     * Last-Modified second that is not over yet is only a weak validator (8.8.2.2). */
    int64_t now;
};

enum http_file_method {
    HTTP_FILE_GET,
    HTTP_FILE_HEAD,
    /* Any other method: conditionals fail with 412 rather than 304, Range is ignored. */
    HTTP_FILE_OTHER,
};

/* The request fields that shape a file response. Each value is borrowed and NULL when the field
 * is absent; a field sent on several lines is passed combined with ", " (RFC 9110 5.3). */
struct http_file_request {
    enum http_file_method method;
    const char *if_match;
    size_t if_match_len;
    const char *if_none_match;
    size_t if_none_match_len;
    const char *if_modified_since;
    size_t if_modified_since_len;
    const char *if_unmodified_since;
    size_t if_unmodified_since_len;
    const char *if_range;
    size_t if_range_len;
    const char *range;
    size_t range_len;
};

/*
 * Evaluates the preconditions in the order of RFC 9110 13.2.2: If-Match (strong; fails ->
 * 412), else If-Unmodified-Since (an invalid date is ignored; modified later -> 412); then
 * If-None-Match (weak; matches -> 304 for GET/HEAD, 412 otherwise), else If-Modified-Since
 * (GET/HEAD only; an invalid date, or one later than v->now, is ignored; not modified since ->
 * 304). Returns 200 (go on), 304 or 412. Thread-safe.
 */
int http_file_preconditions(const struct http_file_request *rq, const struct http_validators *v);

/*
 * Whether the If-Range field value (an entity-tag or an HTTP-date) lets a Range apply to v:
 * strong equality with the ETag, or exact equality with Last-Modified when that second is over
 * (v->mtime < v->now; before, the file may still change within it, so the date is weak). A
 * weak entity-tag or a malformed value never matches. Thread-safe.
 */
bool http_if_range_matches(const char *val, size_t len, const struct http_validators *v);

/* ---------------------------------------------------------------- ranges */

/* An inclusive byte range of a representation: first <= last < size. */
struct http_range {
    uint64_t first;
    uint64_t last;
};

struct http_ranges {
    unsigned n;
    struct http_range r[HTTP_RANGE_MAX];
};

/*
 * Parses the Range field value v[0..len) for a representation of size bytes: "bytes=" then
 * range-specs ("a-b", "a-", "-n") separated by commas (empty elements and OWS allowed). An
 * end past the file is clamped, a suffix longer than the file means the whole file; a spec is
 * unsatisfiable when its first byte is at or past size or it is "-0". The satisfiable ranges
 * are sorted and overlapping or adjacent ones coalesced into out. Returns 0 (out->n >= 1:
 * answer 206); -ERANGE (valid, none satisfiable: answer 416); -EBADMSG (syntax, "b < a" with a
 * and b compared at any length, or a unit other than bytes) or -E2BIG (more than HTTP_RANGE_MAX
 * specs): ignore the field and answer 200. Allocation-free. Thread-safe.
 */
CR_MUST_CHECK int http_range_parse(const char *v, size_t len, uint64_t size,
                                   struct http_ranges *out);

/*
 * Writes the Content-Range value "bytes <first>-<last>/<size>", or "bytes * /size" (no space)
 * when r is NULL, into out[0..cap), NUL-terminated. Returns its length, or 0 if cap is too
 * small (HTTP_CONTENT_RANGE_MAX suffices). Thread-safe.
 */
size_t http_content_range_format(char *out, size_t cap, const struct http_range *r, uint64_t size);

/* ---------------------------------------------------------------- multipart/byteranges */

/*
 * Writes a boundary of HTTP_BOUNDARY_LEN hex digits derived from seed (e.g. a per-connection
 * counter mixed with the time) into out (HTTP_BOUNDARY_LEN + 1 bytes), NUL-terminated. Any
 * seed gives a valid boundary; a file containing "\r\n--<boundary>" would only confuse the
 * client, as with every server. Thread-safe.
 */
void http_multipart_boundary(char *out, uint64_t seed);

/*
 * Writes the header of one part: "\r\n--<boundary>\r\nContent-Type: <ctype>\r\nContent-Range:
 * bytes <first>-<last>/<size>\r\n\r\n" into out[0..cap). Returns its length, or 0 if cap is too
 * small (HTTP_MULTIPART_PART_MAX(ctype_len) suffices). Not NUL-terminated. Thread-safe.
 */
size_t http_multipart_part_header(char *out, size_t cap, const char *boundary, const char *ctype,
                                  size_t ctype_len, const struct http_range *r, uint64_t size);
#define HTTP_MULTIPART_PART_MAX(ctype_len)                                                         \
    (4 + HTTP_BOUNDARY_LEN + 2 + 14 + (ctype_len) + 2 + 15 + HTTP_CONTENT_RANGE_MAX + 4)

/* Writes the closing delimiter "\r\n--<boundary>--\r\n" into out[0..cap). Returns its length
 * (HTTP_MULTIPART_TRAILER_LEN), or 0 if cap is too small. Thread-safe. */
size_t http_multipart_trailer(char *out, size_t cap, const char *boundary);
#define HTTP_MULTIPART_TRAILER_LEN (4 + HTTP_BOUNDARY_LEN + 4)

/* The exact multipart/byteranges body length for rs: every part header, every range and the
 * trailer; what Content-Length must say. UINT64_MAX when that does not fit in 64 bits (a size
 * near UINT64_MAX, which no off_t is, or an absurd ctype_len). Thread-safe. */
uint64_t http_multipart_length(const struct http_ranges *rs, uint64_t size, size_t ctype_len);

/* ---------------------------------------------------------------- the whole decision */

struct http_file_plan {
    /* 200, 206, 304, 412 or 416. */
    int status;
    /* 206: the parts, ascending and disjoint; n == 1 is a single-part response. */
    struct http_ranges ranges;
    /* Body bytes for 200 and 206 (for multipart, http_multipart_length()); 0 otherwise. HEAD
     * gets the same plan as GET would without Range (Range is ignored for HEAD). */
    uint64_t content_length;
    /* The multipart boundary (ranges.n > 1), NUL-terminated; empty otherwise. */
    char boundary[HTTP_BOUNDARY_LEN + 1];
};

/*
 * Decides the response for the representation v of media type ctype (its length, for the
 * multipart layout): http_file_preconditions(), then for a GET with a Range field that
 * If-Range (if present) allows, http_range_parse(). A multipart body whose length
 * http_multipart_length() cannot give ignores the Range (200). boundary_seed feeds
 * http_multipart_boundary(). Thread-safe.
 */
void http_file_plan(struct http_file_plan *p, const struct http_file_request *rq,
                    const struct http_validators *v, size_t ctype_len, uint64_t boundary_seed);

/* ---------------------------------------------------------------- content coding */

/*
 * Whether the Accept-Encoding field value v[0..len) accepts gzip: "gzip" or "x-gzip" with a
 * q-value above 0, or, when neither is listed, "*" with a q-value above 0 ("gzip;q=0" refuses
 * even with "*"). Coding names are case-insensitive. An absent field (v NULL) or a malformed
 * one means no: identity is always safe. Thread-safe.
 */
bool http_accepts_gzip(const char *v, size_t len);

/* The representation fields of a response head, written after Date. */
struct http_entity {
    const char *ctype; /* Content-Type; NULL: none */
    size_t ctype_len;
    uint64_t content_length;
    /* "\r\nLast-Modified: ...\r\nETag: ..." as formatted beforehand (the file cache's
     * validator_fields); NULL: none. */
    const char *validators;
    size_t validators_len;
    bool accept_ranges;
    const char *content_range; /* its value; NULL: none */
    size_t content_range_len;
    bool gzip; /* Content-Encoding: gzip */
    bool vary; /* Vary: Accept-Encoding */
};

/*
 * Appends e's fields to o, each as "\r\n<name>: <value>", in this order: Content-Type,
 * Content-Length (always), the validators, Accept-Ranges, Content-Range, Content-Encoding,
 * Vary. The one writer of these fields, for a head and for the file cache's preformatted
 * 200 (http_file.ok_fields), so the two cannot differ. Cuts at o's end. Thread-safe.
 */
void http_entity_put(struct httpd_out *o, const struct http_entity *e);

#endif /* CABRANK_HTTPD_HTTP_FILE_H */
