/*
 * http_range.c - byte ranges of a static-file response (RFC 9110 14): the Range field
 * parsed against a file's size, Content-Range, and the multipart/byteranges body's
 * boundary, part headers, trailer and length. Pure functions for cabrank-httpd's HTTP
 * service (contract in http_file.h); no state, no allocation: safe on any thread.
 */
#include "http_file.h"
#include "http_lex.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* A decimal as scan_uint() read it. */
struct decimal {
    /* Its value, or UINT64_MAX when saturated. */
    uint64_t v;
    /* Whether the value is above UINT64_MAX. */
    bool saturated;
    /* Its significant digits (no leading zeros, at least one digit), borrowed from the input. */
    const char *digits;
    size_t n;
};

/* Reads 1*DIGIT at s[*i..len) into *d; false when there is no digit. */
static bool scan_uint(const char *s, size_t len, size_t *i, struct decimal *d)
{
    size_t start = *i;

    d->v = 0;
    d->saturated = false;
    while (*i < len && s[*i] >= '0' && s[*i] <= '9') {
        unsigned c = (unsigned)(s[*i] - '0');

        if (d->saturated || d->v > (UINT64_MAX - c) / 10) {
            d->v = UINT64_MAX;
            d->saturated = true;
        } else {
            d->v = d->v * 10 + c;
        }
        (*i)++;
    }
    while (start + 1 < *i && s[start] == '0')
        start++;
    d->digits = s + start;
    d->n = *i - start;
    return d->n > 0;
}

/*
 * Whether a < b as numbers of any size (RFC 9110 14.1.1 puts no bound on them): two saturated
 * values are equal as uint64_t, so "99999999999999999999-99999999999999999998" would pass as
 * a valid spec; their digit strings decide instead.
 */
static bool decimal_less(const struct decimal *a, const struct decimal *b)
{
    if (!a->saturated && !b->saturated)
        return a->v < b->v;
    if (a->saturated != b->saturated)
        return b->saturated;
    if (a->n != b->n)
        return a->n < b->n;
    return memcmp(a->digits, b->digits, a->n) < 0;
}

int http_range_parse(const char *v, size_t len, uint64_t size, struct http_ranges *out)
{
    size_t i = 6;
    unsigned specs = 0;

    out->n = 0;
    v = trim(v, &len);
    if (len < 6 || strncasecmp(v, "bytes=", 6) != 0)
        return -EBADMSG;
    for (;;) {
        uint64_t first;
        uint64_t last;
        struct decimal a;
        struct decimal b;

        /* Empty list elements are allowed (RFC 9110 5.6.1.2). */
        while (i < len && (is_ows(v[i]) || v[i] == ','))
            i++;
        if (i == len)
            break;
        if (++specs > HTTP_RANGE_MAX)
            return -E2BIG;
        if (v[i] == '-') {
            i++;
            if (!scan_uint(v, len, &i, &b))
                return -EBADMSG;
            if (b.v == 0 || size == 0) {
                first = 1;
                last = 0; /* unsatisfiable */
            } else {
                first = b.v >= size ? 0 : size - b.v;
                last = size - 1;
            }
        } else {
            if (!scan_uint(v, len, &i, &a) || i == len || v[i] != '-')
                return -EBADMSG;
            i++;
            first = a.v;
            last = UINT64_MAX;
            if (scan_uint(v, len, &i, &b)) {
                if (decimal_less(&b, &a))
                    return -EBADMSG;
                last = b.v;
            }
            if (first >= size) {
                first = 1;
                last = 0;
            } else if (last >= size) {
                last = size - 1;
            }
        }
        while (i < len && is_ows(v[i]))
            i++;
        if (i < len && v[i] != ',')
            return -EBADMSG;
        if (first <= last) {
            out->r[out->n].first = first;
            out->r[out->n].last = last;
            out->n++;
        }
    }
    if (specs == 0)
        return -EBADMSG;
    if (out->n == 0)
        return -ERANGE;
    /* Sort (insertion sort: n <= HTTP_RANGE_MAX), then coalesce overlapping or touching. */
    for (unsigned a = 1; a < out->n; a++) {
        struct http_range r = out->r[a];
        unsigned b = a;

        while (b > 0 && out->r[b - 1].first > r.first) {
            out->r[b] = out->r[b - 1];
            b--;
        }
        out->r[b] = r;
    }
    unsigned k = 0;
    for (unsigned a = 1; a < out->n; a++) {
        /* last < size <= UINT64_MAX, so last + 1 cannot wrap. */
        if (out->r[a].first <= out->r[k].last + 1) {
            if (out->r[a].last > out->r[k].last)
                out->r[k].last = out->r[a].last;
        } else {
            out->r[++k] = out->r[a];
        }
    }
    out->n = k + 1;
    return 0;
}

size_t http_content_range_format(char *out, size_t cap, const struct http_range *r, uint64_t size)
{
    int n;

    if (r == NULL)
        n = snprintf(out, cap, "bytes */%" PRIu64, size);
    else
        n = snprintf(out, cap, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, r->first, r->last, size);
    if (n < 0 || (size_t)n >= cap) {
        if (cap > 0)
            out[0] = '\0';
        return 0;
    }
    return (size_t)n;
}

/* ---------------------------------------------------------------- multipart/byteranges */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));

    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

void http_multipart_boundary(char *out, uint64_t seed)
{
    static const char hex[] = "0123456789abcdef";
    uint64_t a = splitmix64(&seed);
    uint64_t b = splitmix64(&seed);

    for (int i = 0; i < 16; i++)
        out[i] = hex[(a >> (4 * i)) & 15];
    for (int i = 16; i < HTTP_BOUNDARY_LEN; i++)
        out[i] = hex[(b >> (4 * (i - 16))) & 15];
    out[HTTP_BOUNDARY_LEN] = '\0';
}

size_t http_multipart_part_header(char *out, size_t cap, const char *boundary, const char *ctype,
                                  size_t ctype_len, const struct http_range *r, uint64_t size)
{
    char cr[HTTP_CONTENT_RANGE_MAX];
    size_t crl = http_content_range_format(cr, sizeof(cr), r, size);
    size_t bl = strlen(boundary);
    size_t need = 4 + bl + 2 + 14 + ctype_len + 2 + 15 + crl + 4;
    char *p = out;

    if (need > cap)
        return 0;
    memcpy(p, "\r\n--", 4);
    p += 4;
    memcpy(p, boundary, bl);
    p += bl;
    memcpy(p, "\r\nContent-Type: ", 16);
    p += 16;
    memcpy(p, ctype, ctype_len);
    p += ctype_len;
    memcpy(p, "\r\nContent-Range: ", 17);
    p += 17;
    memcpy(p, cr, crl);
    p += crl;
    memcpy(p, "\r\n\r\n", 4);
    p += 4;
    return (size_t)(p - out);
}

size_t http_multipart_trailer(char *out, size_t cap, const char *boundary)
{
    size_t bl = strlen(boundary);

    if (4 + bl + 4 > cap)
        return 0;
    memcpy(out, "\r\n--", 4);
    memcpy(out + 4, boundary, bl);
    memcpy(out + 4 + bl, "--\r\n", 4);
    return 4 + bl + 4;
}

static unsigned decimal_len(uint64_t v)
{
    unsigned n = 1;

    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

uint64_t http_multipart_length(const struct http_ranges *rs, uint64_t size, size_t ctype_len)
{
    uint64_t total = HTTP_MULTIPART_TRAILER_LEN;

    for (unsigned i = 0; i < rs->n; i++) {
        const struct http_range *r = &rs->r[i];
        /* "bytes a-b/size" */
        uint64_t cr = 6 + decimal_len(r->first) + 1 + decimal_len(r->last) + 1 + decimal_len(size);
        uint64_t hdr;

        /* Only a size near UINT64_MAX (no off_t is) or an absurd ctype_len overflows; saturate
         * rather than wrap to a small, wrong Content-Length. */
        if (__builtin_add_overflow((uint64_t)ctype_len, 4 + HTTP_BOUNDARY_LEN + 2 + 14 + 2 + 15 + 4,
                                   &hdr) ||
            __builtin_add_overflow(hdr, cr, &hdr) || __builtin_add_overflow(total, hdr, &total) ||
            __builtin_add_overflow(total, r->last - r->first + 1, &total))
            return UINT64_MAX;
    }
    return total;
}
