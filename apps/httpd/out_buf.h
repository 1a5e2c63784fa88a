/*
 * out_buf.h - a bounded output cursor for formatting into a caller's buffer:
 * every put cuts at end rather than overrun, so a too-small buffer truncates
 * the text instead of corrupting memory. Used by the access log and the HTTP
 * service to format lines and response heads on any serving thread; holds no
 * state of its own and owns nothing (the buffer is the caller's).
 */
#ifndef HTTPD_OUT_BUF_H
#define HTTPD_OUT_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Writes go to [p, end); p never passes end. */
struct httpd_out {
    char *p;
    char *end;
};

/* The cut: the first room bytes of s, filling the buffer. Out of line because it is
 * rare, and because inlined into a caller whose s is a small array, gcc -O1 cannot see
 * that room < n keeps the copy inside it and warns (-Warray-bounds). */
__attribute__((noinline, unused)) static void httpd_out_cut(struct httpd_out *o, const char *s,
                                                            size_t room)
{
    memcpy(o->p, s, room);
    o->p = o->end;
}

/* Appends the n bytes at s, or as many as fit. The whole copy is written apart from
 * the cut so that a literal's constant n reaches memcpy, which then compiles to a few
 * moves instead of a copy loop for any length. */
static inline void httpd_out_put(struct httpd_out *o, const char *s, size_t n)
{
    size_t room = (size_t)(o->end - o->p);

    if (n <= room) {
        memcpy(o->p, s, n);
        o->p += n;
    } else {
        httpd_out_cut(o, s, room);
    }
}

/* Appends a string literal, without its NUL. */
#define HTTPD_OUT_LIT(o, lit) httpd_out_put((o), (lit), sizeof(lit) - 1)

/* Appends v in decimal, or as many of its leading digits as fit. */
static inline void httpd_out_u64(struct httpd_out *o, uint64_t v)
{
    char tmp[24];
    size_t n = 0;

    do {
        tmp[sizeof(tmp) - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    httpd_out_put(o, tmp + sizeof(tmp) - n, n);
}

#endif /* HTTPD_OUT_BUF_H */
