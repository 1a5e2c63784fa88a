/*
 * http_lex.h - the lexical pieces of RFC 9110 5.5-5.6 that cabrank-httpd's parsers share:
 * byte classes (the request head parser, the chunked decoder, the field parsers of
 * http_file.c and http_range.c) and OWS trimming. Pure, any thread.
 */
#ifndef CABRANK_HTTP_LEX_H
#define CABRANK_HTTP_LEX_H

#include <stdbool.h>
#include <stddef.h>

/* Byte classes. */
#define CH_TCHAR   1 /* token (RFC 9110 5.6.2) */
#define CH_VCHAR   2 /* field-vchar: VCHAR or obs-text (>= 0x80) */
#define CH_HEX     4
#define CH_REGNAME 8  /* reg-name but '%': unreserved, sub-delims (RFC 3986 3.2.2) */
#define CH_FIELD   16 /* field-content: field-vchar, SP, HTAB (RFC 9110 5.5) */

/* A CH_* mask per byte value (http_lex.c). */
extern const unsigned char http_char_class[256];

static inline bool is_tchar(unsigned char c)
{
    return (http_char_class[c] & CH_TCHAR) != 0;
}

static inline bool is_vchar(unsigned char c)
{
    return (http_char_class[c] & CH_VCHAR) != 0;
}

static inline bool is_field(unsigned char c)
{
    return (http_char_class[c] & CH_FIELD) != 0;
}

static inline bool is_hex(unsigned char c)
{
    return (http_char_class[c] & CH_HEX) != 0;
}

static inline bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* Takes int so that both char and unsigned char callers pass their bytes as they are. */
static inline bool is_ows(int c)
{
    return c == ' ' || c == '\t';
}

static inline unsigned char to_lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + ('a' - 'A')) : c;
}

/* Trims OWS from both ends of s[0..*len). */
static inline const char *trim(const char *s, size_t *len)
{
    size_t n = *len;

    while (n > 0 && is_ows(*s)) {
        s++;
        n--;
    }
    while (n > 0 && is_ows(s[n - 1]))
        n--;
    *len = n;
    return s;
}

#endif /* CABRANK_HTTP_LEX_H */
