/*
 * http_parser.c - the HTTP/1.1 request head parser of cabrank-httpd (contract and
 * strictness decisions in http_parser.h; the chunked body decoder is http_chunked.c,
 * the byte classes both use http_lex.h). Called by the HTTP service on the thread
 * serving a connection; owns nothing, allocates nothing, keeps no state between calls.
 *
 * The head parser is one left-to-right scan that never looks ahead: each byte is judged
 * with what precedes it only, and limits are checked on every byte. So a prefix of an
 * input either fails with the status the whole input fails with, or returns -EAGAIN
 * (the fuzz target checks this), and an error shows as soon as its byte arrives. Runs
 * of bytes that need no judgement but their class are skipped in blocks (skip_class),
 * bounded by what has arrived and by the limit, which gives the same verdicts.
 */
#include "http_parser.h"

#include <errno.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "http_lex.h"

/* Internal results: 0 (done), PARTIAL (valid so far, needs more bytes) or a status. */
#define PARTIAL 1

/* Case-insensitive equality of s[0..len) and the NUL-terminated t (ASCII only: field
 * names and tokens, never the locale's idea of case). */
static bool equals_nocase(const char *s, size_t len, const char *t)
{
    size_t i;

    for (i = 0; i < len; i++) {
        if (t[i] == '\0' || to_lower((unsigned char)s[i]) != to_lower((unsigned char)t[i]))
            return false;
    }
    return t[i] == '\0';
}

static bool equals_nocase_n(const char *s, size_t len, const char *t, size_t t_len)
{
    if (len != t_len)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (to_lower((unsigned char)s[i]) != to_lower((unsigned char)t[i]))
            return false;
    }
    return true;
}

static size_t or_default(size_t v, size_t def)
{
    return v != 0 ? v : def;
}

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Where a scan from start stops for a limit of max bytes, or len if that comes first. */
static size_t scan_end(size_t start, size_t max, size_t len)
{
    return len - start > max ? start + max : len;
}

#ifdef __SSE2__
/*
 * The 16 bytes at p as a bit mask, a bit set for each byte outside CH_FIELD (with_ws)
 * or CH_VCHAR: the control bytes (below 0x20, but HTAB for CH_FIELD), DEL, and for
 * CH_VCHAR SP and HTAB. Every byte from 0x80 is in both. A unit test puts every byte
 * value through this path and the table's and checks RFC 9110's verdict.
 */
static unsigned outside_text(const unsigned char *p, bool with_ws)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    /* Unsigned v <= lowest: min_epu8 leaves such bytes unchanged. */
    const __m128i lowest = _mm_set1_epi8(with_ws ? 0x1f : 0x20);
    __m128i out = _mm_cmpeq_epi8(_mm_min_epu8(v, lowest), v);

    if (with_ws)
        out = _mm_andnot_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\t')), out);
    out = _mm_or_si128(out, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f)));
    return (unsigned)_mm_movemask_epi8(out);
}

/* Bytes of v in [lo, hi]: subtracting lo maps the range to [0, hi - lo], unsigned. */
static __m128i in_range(__m128i v, unsigned char lo, unsigned char hi)
{
    const __m128i d = _mm_sub_epi8(v, _mm_set1_epi8((char)lo));

    return _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8((char)(hi - lo))), d);
}

/* The same for CH_TCHAR: outside it are the bytes up to SP, from DEL, and the
 * delimiters " ( ) , / : ; < = > ? @ [ \ ] { } (RFC 9110 5.6.2). */
static unsigned outside_token(const unsigned char *p)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i out = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x20)), v);

    out = _mm_or_si128(out, _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x7f)), v));
    out = _mm_or_si128(out, in_range(v, '(', ')'));
    out = _mm_or_si128(out, in_range(v, ':', '@'));
    out = _mm_or_si128(out, in_range(v, '[', ']'));
    out = _mm_or_si128(out, _mm_cmpeq_epi8(v, _mm_set1_epi8('"')));
    out = _mm_or_si128(out, _mm_cmpeq_epi8(v, _mm_set1_epi8(',')));
    out = _mm_or_si128(out, _mm_cmpeq_epi8(v, _mm_set1_epi8('/')));
    out = _mm_or_si128(out, _mm_cmpeq_epi8(v, _mm_set1_epi8('{')));
    out = _mm_or_si128(out, _mm_cmpeq_epi8(v, _mm_set1_epi8('}')));
    return (unsigned)_mm_movemask_epi8(out);
}
#endif

/*
 * The first index from i whose byte is not of class cls (CH_TCHAR, CH_VCHAR or
 * CH_FIELD), stopping at end. The loops below skip with it over the bytes they would
 * accept one by one, then judge the byte it stopped at as before; that byte decides
 * PARTIAL, an error or a limit. Where SSE2 is, 16 bytes at a time while 16 are left
 * before end (a name's block usually holds its colon).
 */
static size_t skip_class(const unsigned char *b, size_t i, size_t end, unsigned char cls)
{
#ifdef __SSE2__
    for (; end - i >= 16; i += 16) {
        unsigned out =
            cls == CH_TCHAR ? outside_token(b + i) : outside_text(b + i, cls == CH_FIELD);

        if (out != 0)
            return i + (size_t)__builtin_ctz(out);
    }
#endif
    while (i < end && (http_char_class[b[i]] & cls) != 0)
        i++;
    return i;
}

/* Whether the n bytes at m are the len bytes of lit. Byte by byte rather than
 * memcmp: with the literal's length known the compiler unrolls it into a few
 * compares, where gcc calls the library's memcmp for lengths 3, 5, 6 and 7
 * (objdump of http_parse_request). */
static inline bool is_lit(const char *m, size_t n, const char *lit, size_t len)
{
    if (n != len)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (m[i] != lit[i])
            return false;
    }
    return true;
}

#define IS_METHOD(m, n, lit) is_lit((m), (n), (lit), sizeof(lit) - 1)

/* Methods are case-sensitive (RFC 9110 9.1): "get" is an unknown method.
 * Most frequent first. */
static enum http_method method_id(const char *m, size_t n)
{
    if (IS_METHOD(m, n, "GET"))
        return HTTP_METHOD_GET;
    if (IS_METHOD(m, n, "HEAD"))
        return HTTP_METHOD_HEAD;
    if (IS_METHOD(m, n, "POST"))
        return HTTP_METHOD_POST;
    if (IS_METHOD(m, n, "PUT"))
        return HTTP_METHOD_PUT;
    if (IS_METHOD(m, n, "DELETE"))
        return HTTP_METHOD_DELETE;
    if (IS_METHOD(m, n, "OPTIONS"))
        return HTTP_METHOD_OPTIONS;
    if (IS_METHOD(m, n, "TRACE"))
        return HTTP_METHOD_TRACE;
    if (IS_METHOD(m, n, "CONNECT"))
        return HTTP_METHOD_CONNECT;
    if (IS_METHOD(m, n, "PATCH"))
        return HTTP_METHOD_PATCH;
    return HTTP_METHOD_OTHER;
}

/*
 * The request line from b[*pos], with at most one empty line before it. Every byte but
 * the CRLF counts against max: the byte at index max is 414 unless it is wrong where it
 * stands (then 400), so an over-long line fails before its end arrives.
 */
static int parse_request_line(const unsigned char *b, size_t len, size_t *pos, size_t max,
                              struct http_request *req)
{
    static const char version_shape[] = "HTTP/d.d";
    size_t i = *pos;
    size_t start;
    size_t target;

    if (i < len && b[i] == '\r') {
        if (i + 1 == len)
            return PARTIAL;
        if (b[i + 1] != '\n')
            return 400;
        i += 2;
    }
    start = i;

    for (i = skip_class(b, i, scan_end(start, max, len), CH_TCHAR);; i++) {
        if (i == len)
            return PARTIAL;
        if (!is_tchar(b[i]))
            break;
        if (i - start >= max)
            return 414;
    }
    if (b[i] != ' ' || i == start)
        return 400;
    if (i - start >= max)
        return 414;
    req->method = (const char *)b + start;
    req->method_len = i - start;
    i++;

    target = i;
    for (i = skip_class(b, i, scan_end(start, max, len), CH_VCHAR);; i++) {
        if (i == len)
            return PARTIAL;
        if (!is_vchar(b[i]))
            break;
        if (i - start >= max)
            return 414;
    }
    if (b[i] != ' ' || i == target)
        return 400;
    if (i - start >= max)
        return 414;
    req->target = (const char *)b + target;
    req->target_len = i - target;
    i++;

    /* "HTTP/1.d" at once when all of it arrived inside the limit; anything else byte by
     * byte, so that garbage is 400 as soon as it arrives. */
    if (len - i >= 8 && i + 7 - start < max && memcmp(b + i, "HTTP/1.", 7) == 0 &&
        is_digit(b[i + 7])) {
        i += sizeof(version_shape) - 1;
    } else {
        for (size_t k = 0; k < sizeof(version_shape) - 1; k++, i++) {
            if (i == len)
                return PARTIAL;
            if (version_shape[k] == 'd' ? !is_digit(b[i]) : b[i] != (unsigned char)version_shape[k])
                return 400;
            if (i - start >= max)
                return 414;
        }
    }
    if (i == len)
        return PARTIAL;
    if (b[i] != '\r')
        return 400; /* "HTTP/1.10", "HTTP/1.1 ", a bare LF */
    if (i + 1 == len)
        return PARTIAL;
    if (b[i + 1] != '\n')
        return 400;
    if (b[i - 3] != '1' || (b[i - 1] != '0' && b[i - 1] != '1'))
        return 505;
    req->minor_version = b[i - 1] - '0';
    req->method_id = method_id(req->method, req->method_len);
    *pos = i + 2;
    return 0;
}

/* What the field lines said, for the checks made once the head is complete. */
struct seen {
    unsigned hosts;
    bool content_length;
    bool transfer_encoding;
    bool unknown_coding;
    unsigned chunked; /* "chunked" elements of Transfer-Encoding */
    bool close;
    bool keep_alive;
};

/* 1*DIGIT, at most INT64_MAX. */
static bool parse_content_length(const char *s, size_t n, int64_t *out)
{
    int64_t v = 0;

    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        int d;

        if (!is_digit((unsigned char)s[i]))
            return false;
        d = s[i] - '0';
        if (v > (INT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* Host = uri-host [ ":" port ] (RFC 9110 7.2, RFC 3986 3.2.2): an IP-literal in brackets
 * or a reg-name (IPv4 addresses are reg-names too), then digits. Empty is valid. */
static bool is_valid_host(const unsigned char *s, size_t n)
{
    size_t i = 0;

    if (n > 0 && s[0] == '[') {
        /* IPv6address or IPvFuture: hex digits, ':', '.', 'v', unreserved, sub-delims. */
        for (i = 1; i < n && s[i] != ']'; i++) {
            if (s[i] != ':' && (http_char_class[s[i]] & CH_REGNAME) == 0)
                return false;
        }
        if (i == n || i == 1)
            return false;
        i++;
    } else {
        /* A run of reg-name bytes (':' is none), then a pct-encoded byte or the end. */
        for (;;) {
            while (i < n && (http_char_class[s[i]] & CH_REGNAME) != 0)
                i++;
            if (i == n || s[i] != '%')
                break;
            if (n - i < 3 || !is_hex(s[i + 1]) || !is_hex(s[i + 2]))
                return false;
            i += 3;
        }
    }
    if (i == n)
        return true;
    if (s[i] != ':')
        return false;
    for (i++; i < n; i++) {
        if (!is_digit(s[i]))
            return false;
    }
    return true;
}

/* Calls fn on each element of a comma-separated list, OWS trimmed, empty ones skipped. */
static void for_each_element(const char *v, size_t n,
                             void (*fn)(const char *e, size_t len, void *arg), void *arg)
{
    size_t i = 0;

    while (i < n) {
        size_t s;
        size_t e;

        while (i < n && (is_ows((unsigned char)v[i]) || v[i] == ','))
            i++;
        s = i;
        while (i < n && v[i] != ',')
            i++;
        e = i;
        while (e > s && is_ows((unsigned char)v[e - 1]))
            e--;
        if (e > s)
            fn(v + s, e - s, arg);
    }
}

static void note_coding(const char *e, size_t len, void *arg)
{
    struct seen *s = arg;

    if (equals_nocase(e, len, "chunked"))
        s->chunked++;
    else
        s->unknown_coding = true;
}

static void note_connection_option(const char *e, size_t len, void *arg)
{
    struct seen *s = arg;

    if (equals_nocase(e, len, "close"))
        s->close = true;
    else if (equals_nocase(e, len, "keep-alive"))
        s->keep_alive = true;
}

struct has_token_arg {
    const char *token;
    bool found;
};

static void match_token(const char *e, size_t len, void *arg)
{
    struct has_token_arg *a = arg;

    if (equals_nocase(e, len, a->token))
        a->found = true;
}

bool http_has_token(const char *value, size_t value_len, const char *token)
{
    struct has_token_arg a = {.token = token, .found = false};

    for_each_element(value, value_len, match_token, &a);
    return a.found;
}

/* A field a cache or the server selects a response by: a second line is 400. */
static int set_singleton(const struct http_header **slot, const struct http_header *h)
{
    if (*slot != NULL)
        return 400;
    *slot = h;
    return 0;
}

static void set_first(const struct http_header **slot, const struct http_header *h)
{
    if (*slot == NULL)
        *slot = h;
}

/*
 * Whether the name n, of the literal's length and all tchars, is the lowercase literal in any
 * case. Setting bit 5 lowers an ASCII capital and keeps a lowercase letter or '-'; the only
 * other byte it takes there is CR (to '-'), never a tchar; cheaper than two to_lower()
 * calls a byte (docs/design/httpd.md).
 */
static inline bool is_name(const char *n, const char *lit, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (((unsigned char)n[i] | 0x20) != (unsigned char)lit[i])
            return false;
    }
    return true;
}

/* take_field's n (of length len) against a literal; the length test folds away under
 * the case that matched it. */
#define NAME_IS(lit) (len == sizeof(lit) - 1 && is_name(n, (lit), sizeof(lit) - 1))

/* What one complete field line means. 0 or a status. */
static int take_field(struct http_request *req, const struct http_header *h, struct seen *s)
{
    const char *n = h->name;
    size_t len = h->name_len;

    switch (len) {
    case 4:
        if (NAME_IS("host")) {
            if (s->hosts++ > 0 || !is_valid_host((const unsigned char *)h->value, h->value_len))
                return 400;
            req->host = h->value;
            req->host_len = h->value_len;
        }
        break;
    case 5:
        if (NAME_IS("range"))
            return set_singleton(&req->range, h);
        break;
    case 7:
        if (NAME_IS("referer"))
            set_first(&req->referer, h);
        break;
    case 8:
        if (NAME_IS("if-match"))
            set_first(&req->if_match, h);
        else if (NAME_IS("if-range"))
            return set_singleton(&req->if_range, h);
        break;
    case 10:
        if (NAME_IS("connection"))
            for_each_element(h->value, h->value_len, note_connection_option, s);
        else if (NAME_IS("user-agent"))
            set_first(&req->user_agent, h);
        break;
    case 13:
        if (NAME_IS("if-none-match"))
            set_first(&req->if_none_match, h);
        break;
    case 14:
        if (NAME_IS("content-length")) {
            /* A second line is 400 even when it repeats the value (see the header). */
            if (s->content_length ||
                !parse_content_length(h->value, h->value_len, &req->content_length))
                return 400;
            s->content_length = true;
        }
        break;
    case 15:
        if (NAME_IS("accept-encoding"))
            set_first(&req->accept_encoding, h);
        break;
    case 17:
        if (NAME_IS("transfer-encoding")) {
            s->transfer_encoding = true;
            for_each_element(h->value, h->value_len, note_coding, s);
        } else if (NAME_IS("if-modified-since")) {
            return set_singleton(&req->if_modified_since, h);
        }
        break;
    case 19:
        if (NAME_IS("if-unmodified-since"))
            return set_singleton(&req->if_unmodified_since, h);
        break;
    default:
        break;
    }
    return 0;
}

/*
 * The field lines from b[*pos] through the blank line. A line's content bytes (all but
 * its CRLF) may number header_line_max, and the lines with their CRLFs headers_max: a
 * content byte beyond either is 431 unless it is wrong where it stands (then 400).
 */
static int parse_fields(const unsigned char *b, size_t len, size_t *pos, size_t line_max,
                        size_t section_max, size_t fields_max, struct http_request *req,
                        struct seen *s)
{
    const size_t section = *pos;
    size_t i = *pos;

    for (;;) {
        const size_t line = i;
        const size_t used = line - section;
        size_t room;
        size_t name;
        size_t name_end;
        size_t value;
        size_t value_end;
        struct http_header *h;
        int rc;

        if (i == len)
            return PARTIAL;
        if (b[i] == '\r') {
            if (i + 1 == len)
                return PARTIAL;
            if (b[i + 1] != '\n')
                return 400;
            *pos = i + 2;
            return 0;
        }
        /* obs-fold, or whitespace between the request line and the first field: RFC
         * 9112 5.2 and 2.2 let a server reject both, and they are smuggling tools. */
        if (is_ows(b[i]))
            return 400;
        if (req->num_headers == fields_max)
            return 431;
        /* used + 2 <= section_max holds: the previous line's bytes were checked. */
        room = min_size(line_max, section_max - used >= 2 ? section_max - used - 2 : 0);

        name = i;
        for (i = skip_class(b, i, scan_end(line, room, len), CH_TCHAR);; i++) {
            if (i == len)
                return PARTIAL;
            if (!is_tchar(b[i]))
                break;
            if (i - line >= room)
                return 431;
        }
        if (b[i] != ':' || i == name)
            return 400; /* whitespace before the colon, a control byte, no name */
        if (i - line >= room)
            return 431;
        name_end = i++;

        /* The value's bytes up to the CR: the byte the skip stops at is the CR, a
         * control byte or a bare LF (400), or the first byte over the limit (431). */
        value = i;
        i = skip_class(b, i, scan_end(line, room, len), CH_FIELD);
        if (i == len)
            return PARTIAL;
        if (b[i] != '\r')
            return is_field(b[i]) ? 431 : 400;
        if (i + 1 == len)
            return PARTIAL;
        if (b[i + 1] != '\n')
            return 400;
        /* Without the OWS around it. */
        value_end = i;
        while (value < value_end && is_ows(b[value]))
            value++;
        while (value_end > value && is_ows(b[value_end - 1]))
            value_end--;
        if (value == value_end)
            value = value_end = i;

        h = &req->headers[req->num_headers++];
        h->name = (const char *)b + name;
        h->name_len = name_end - name;
        h->value = (const char *)b + value;
        h->value_len = value_end - value;
        i += 2;
        rc = take_field(req, h, s);
        if (rc != 0)
            return rc;
    }
}

/* The checks that need the whole head. */
static int finish(struct http_request *req, const struct seen *s)
{
    if (s->transfer_encoding) {
        if (s->content_length || req->minor_version == 0)
            return 400;
        if (s->unknown_coding)
            return 501;
        if (s->chunked != 1)
            return 400; /* an empty list, or chunked twice */
        req->is_chunked = true;
    }
    if (req->minor_version == 1 && s->hosts == 0)
        return 400;
    if (s->close)
        req->keep_alive = false;
    else
        req->keep_alive = req->minor_version == 1 || s->keep_alive;
    return 0;
}

ssize_t http_parse_request(const char *buf, size_t len, struct http_request *req,
                           const struct http_limits *lim, int *status)
{
    const unsigned char *b = (const unsigned char *)buf;
    const struct http_limits none = {0};
    struct seen s = {0};
    size_t pos = 0;
    int rc;

    if (lim == NULL)
        lim = &none;
    req->method = NULL;
    req->method_len = 0;
    req->method_id = HTTP_METHOD_OTHER;
    req->target = NULL;
    req->target_len = 0;
    req->minor_version = 0;
    req->num_headers = 0;
    req->content_length = -1;
    req->is_chunked = false;
    req->keep_alive = false;
    req->host = NULL;
    req->host_len = 0;
    req->if_none_match = NULL;
    req->if_match = NULL;
    req->if_modified_since = NULL;
    req->if_unmodified_since = NULL;
    req->if_range = NULL;
    req->range = NULL;
    req->accept_encoding = NULL;
    req->user_agent = NULL;
    req->referer = NULL;

    rc = parse_request_line(b, len, &pos,
                            or_default(lim->request_line_max, HTTP_REQUEST_LINE_MAX_DEFAULT), req);
    if (rc == 0)
        rc = parse_fields(
            b, len, &pos, or_default(lim->header_line_max, HTTP_HEADER_LINE_MAX_DEFAULT),
            or_default(lim->headers_max, HTTP_HEADERS_MAX_DEFAULT),
            min_size(or_default(lim->fields_max, HTTP_FIELDS_MAX_DEFAULT), req->headers_cap), req,
            &s);
    if (rc == 0)
        rc = finish(req, &s);
    if (rc == 0) {
        *status = 0;
        return (ssize_t)pos;
    }
    if (rc == PARTIAL) {
        *status = 0;
        return -EAGAIN;
    }
    *status = rc;
    return -EBADMSG;
}

const struct http_header *http_request_header(const struct http_request *req, const char *name)
{
    for (size_t i = 0; i < req->num_headers; i++) {
        const struct http_header *h = &req->headers[i];

        if (equals_nocase(h->name, h->name_len, name))
            return h;
    }
    return NULL;
}

const struct http_header *http_request_header_next(const struct http_request *req,
                                                   const struct http_header *prev)
{
    for (size_t i = (size_t)(prev - req->headers) + 1; i < req->num_headers; i++) {
        const struct http_header *h = &req->headers[i];

        if (equals_nocase_n(h->name, h->name_len, prev->name, prev->name_len))
            return h;
    }
    return NULL;
}
