/*
 * http_lex.h - the few lexical helpers of RFC 9110 5.6 that the field parsers of
 * cabrank-httpd's file semantics share (http_file.c, http_range.c). Pure, any thread.
 */
#ifndef CABRANK_HTTP_LEX_H
#define CABRANK_HTTP_LEX_H

#include <stdbool.h>
#include <stddef.h>

static inline bool is_ows(char c)
{
    return c == ' ' || c == '\t';
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
