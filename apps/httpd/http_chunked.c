/*
 * http_chunked.c - the decoder of chunked request bodies (RFC 9112 7.1) of
 * cabrank-httpd, contract in http_parser.h. It reads and discards: sizes, extensions
 * (skipped), data and trailers, byte by byte with the head parser's byte classes and
 * limits on every byte; its state lives in the caller's struct http_chunked, so a body
 * may arrive in any number of pieces.
 */
#include "http_parser.h"

#include <errno.h>

#include "http_lex.h"

/* Chunked decoder states (RFC 9112 7.1). */
enum {
    CK_SIZE_FIRST = 0, /* the first hex digit of a chunk size */
    CK_SIZE,           /* more hex digits, then BWS, ';' or CR */
    CK_EXT_BWS,        /* whitespace after the size: only ';' may follow */
    CK_EXT,            /* chunk extensions, skipped up to CR */
    CK_SIZE_LF,
    CK_DATA,
    CK_DATA_CR,
    CK_DATA_LF,
    CK_TRAILER_START, /* a trailer field line, or the CR of the final CRLF */
    CK_TRAILER_NAME,
    CK_TRAILER_VALUE,
    CK_TRAILER_LF,
    CK_FINAL_LF,
    CK_DONE,
};

static unsigned hex_value(unsigned char c)
{
    if (is_digit(c))
        return c - '0';
    return to_lower(c) - 'a' + 10;
}

ssize_t http_chunked_consume(struct http_chunked *st, const char *buf, size_t len, bool *done)
{
    const unsigned char *b = (const unsigned char *)buf;
    const size_t line_max = st->line_max != 0 ? st->line_max : HTTP_CHUNK_LINE_MAX_DEFAULT;
    const size_t trailers_max =
        st->trailers_max != 0 ? st->trailers_max : HTTP_TRAILERS_MAX_DEFAULT;
    size_t i = 0;

    *done = false;
    while (i < len) {
        unsigned char c = b[i];

        switch (st->state) {
        case CK_DATA: {
            size_t n = len - i;

            if (n > st->remaining)
                n = (size_t)st->remaining;
            i += n;
            st->remaining -= n;
            if (st->remaining == 0)
                st->state = CK_DATA_CR;
            continue;
        }
        case CK_SIZE_FIRST:
        case CK_SIZE:
            if (is_hex(c)) {
                unsigned d = hex_value(c);

                /* Bounded by INT64_MAX so that callers may count in off_t. */
                if (st->remaining > ((uint64_t)INT64_MAX - d) / 16)
                    return -EBADMSG;
                st->remaining = st->remaining * 16 + d;
                st->state = CK_SIZE;
            } else if (st->state == CK_SIZE_FIRST) {
                return -EBADMSG;
            } else if (c == '\r') {
                st->state = CK_SIZE_LF;
            } else if (c == ';') {
                st->state = CK_EXT;
            } else if (is_ows(c)) {
                st->state = CK_EXT_BWS;
            } else {
                return -EBADMSG;
            }
            break;
        case CK_EXT_BWS:
            if (c == ';')
                st->state = CK_EXT;
            else if (!is_ows(c))
                return -EBADMSG; /* "5 \r\n", "1 2\r\n" */
            break;
        case CK_EXT:
            /* Names, values and quoted strings alike: no control byte but HTAB. */
            if (c == '\r')
                st->state = CK_SIZE_LF;
            else if (!is_field(c))
                return -EBADMSG;
            break;
        case CK_SIZE_LF:
            if (c != '\n')
                return -EBADMSG;
            st->line_len = 0;
            st->state = st->remaining == 0 ? CK_TRAILER_START : CK_DATA;
            i++;
            continue;
        case CK_DATA_CR:
            if (c != '\r')
                return -EBADMSG;
            st->state = CK_DATA_LF;
            i++;
            continue;
        case CK_DATA_LF:
            if (c != '\n')
                return -EBADMSG;
            st->state = CK_SIZE_FIRST;
            i++;
            continue;
        case CK_TRAILER_START:
            if (c == '\r')
                st->state = CK_FINAL_LF;
            else if (is_tchar(c))
                st->state = CK_TRAILER_NAME;
            else
                return -EBADMSG; /* obs-fold, a control byte, a bare LF */
            break;
        case CK_TRAILER_NAME:
            if (c == ':')
                st->state = CK_TRAILER_VALUE;
            else if (!is_tchar(c))
                return -EBADMSG;
            break;
        case CK_TRAILER_VALUE:
            if (c == '\r')
                st->state = CK_TRAILER_LF;
            else if (!is_field(c))
                return -EBADMSG;
            break;
        case CK_TRAILER_LF:
            if (c != '\n')
                return -EBADMSG;
            st->state = CK_TRAILER_START;
            break;
        case CK_FINAL_LF:
            if (c != '\n' || ++st->trailers_len > trailers_max)
                return -EBADMSG;
            st->state = CK_DONE;
            *done = true;
            return (ssize_t)(i + 1);
        case CK_DONE:
            *done = true;
            return (ssize_t)i;
        default:
            return -EBADMSG; /* a state the caller scribbled over */
        }
        /* The byte belongs to a size line or to the trailers: count it. */
        if (st->state >= CK_TRAILER_START) {
            if (++st->trailers_len > trailers_max)
                return -EBADMSG;
        } else if (c != '\r' && ++st->line_len > line_max) {
            return -EBADMSG;
        }
        i++;
    }
    *done = st->state == CK_DONE;
    return (ssize_t)i;
}
