/*
 * http_path.c - libFuzzer target for http_path_normalize() and http_path_encode()
 * (apps/httpd/http_path.c). Checks the invariants the file server's safety rests on: a
 * normalized path starts with '/', has no empty, "." or ".." segment, no NUL, control byte or
 * backslash, ends with '/' exactly when trailing_slash says so and fits the output bound;
 * normalizing it again after http_path_encode() gives it back unchanged; a smaller output
 * buffer gives the same path or -ENAMETOOLONG; and every result and error agrees with a slow
 * reference model (split on '/', decode each segment, a stack for "." and ".."). Build:
 * make BUILD=/tmp/b /tmp/b/fuzz/http_path; seeds in fuzz/corpus/http_path/, dictionary
 * fuzz/http_path.dict.
 */
#include "../apps/httpd/http_path.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_path(const char *out, const struct http_path *res, size_t cap)
{
    size_t len = res->len;

    if (len == 0 || len >= cap || out[0] != '/' || out[len] != '\0' || strlen(out) != len)
        abort();
    if (res->trailing_slash != (out[len - 1] == '/'))
        abort();
    if (len > 1 && strstr(out, "//") != NULL)
        abort();
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)out[i];

        if (c < 0x20 || c == 0x7f || c == '\\')
            abort();
    }
    /* Segment by segment: none is "." or "..". */
    for (size_t i = 1; i < len;) {
        size_t n = strcspn(out + i, "/");

        if ((n == 1 && out[i] == '.') || (n == 2 && out[i] == '.' && out[i + 1] == '.'))
            abort();
        i += n + 1;
    }
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/*
 * The reference: the same policy written the obvious way, with no output bound. Writes the
 * path into out (large enough for any input) and returns 0 or the error.
 */
static int model(const char *in, size_t size, char *out, size_t *out_len)
{
    static size_t starts[HTTP_PATH_MAX * 4];
    size_t depth = 0;
    size_t i = 0;
    size_t end;
    size_t o;
    bool dir = true;

    if (size == 0)
        return -EBADMSG;
    if (in[0] != '/') {
        size_t a;

        if (size >= 7 && strncasecmp(in, "http://", 7) == 0)
            i = 7;
        else if (size >= 8 && strncasecmp(in, "https://", 8) == 0)
            i = 8;
        else
            return -EBADMSG;
        a = i;
        while (i < size && in[i] != '/' && in[i] != '?') {
            unsigned char c = (unsigned char)in[i++];

            if (c < 0x20 || c == 0x7f || c == ' ' || c == '#' || c == '@' || c == '\\')
                return -EBADMSG;
        }
        if (i == a)
            return -EBADMSG;
    }
    end = i;
    while (end < size && in[end] != '?')
        end++;
    for (size_t q = end; q < size; q++) {
        unsigned char c = (unsigned char)in[q];

        if (c < 0x20 || c == 0x7f || c == ' ' || c == '#')
            return -EBADMSG;
    }
    o = 0;
    while (i < end) {
        char seg[HTTP_PATH_MAX * 4];
        size_t n = 0;

        if (in[i] == '/') {
            i++;
            dir = true;
            continue;
        }
        while (i < end && in[i] != '/') {
            unsigned char c = (unsigned char)in[i];

            if (c == '%') {
                if (i + 3 > end)
                    return -EBADMSG;
                if (hexval((unsigned char)in[i + 1]) < 0 || hexval((unsigned char)in[i + 2]) < 0)
                    return -EBADMSG;
                c = (unsigned char)(hexval((unsigned char)in[i + 1]) * 16 +
                                    hexval((unsigned char)in[i + 2]));
                if (c == '/')
                    return -ENOENT;
                i += 3;
            } else {
                if (c == ' ' || c == '#')
                    return -EBADMSG;
                i++;
            }
            if (c < 0x20 || c == 0x7f || c == '\\')
                return -EBADMSG;
            seg[n++] = (char)c;
        }
        if (n == 1 && seg[0] == '.') {
            dir = true;
        } else if (n == 2 && seg[0] == '.' && seg[1] == '.') {
            if (depth == 0)
                return -EBADMSG;
            o = starts[--depth];
            dir = true;
        } else {
            starts[depth++] = o;
            out[o++] = '/';
            memcpy(out + o, seg, n);
            o += n;
            dir = false;
        }
    }
    if (o == 0 || dir)
        out[o++] = '/';
    out[o] = '\0';
    *out_len = o;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char ref[HTTP_PATH_MAX * 4 + 2];
    size_t ref_len = 0;
    int ref_rc;
    static char out[HTTP_PATH_MAX];
    static char again[HTTP_PATH_MAX];
    static char small[HTTP_PATH_MAX];
    static char enc[3 * HTTP_PATH_MAX];
    const char *in = (const char *)data;
    struct http_path res;
    struct http_path res2;
    size_t cap;
    size_t elen;
    ssize_t enc_len;
    int rc = http_path_normalize(in, size, out, sizeof(out), &res);
    int rc2;

    if (rc != 0 && rc != -EBADMSG && rc != -ENOENT && rc != -ENAMETOOLONG)
        abort();
    if (size <= HTTP_PATH_MAX * 4) {
        ref_rc = model(in, size, ref, &ref_len);
        if (rc == -ENAMETOOLONG) {
            /* No state can outgrow the input by more than its leading '/'. */
            if (size < sizeof(out) - 1)
                abort();
        } else if (rc != ref_rc || (rc == 0 && (ref_len != res.len || memcmp(ref, out, ref_len)))) {
            abort();
        }
    }
    if (rc != 0)
        return 0;
    check_path(out, &res, sizeof(out));
    if (res.query != NULL &&
        (res.query < in || res.query + res.query_len != in + size || res.query[-1] != '?'))
        abort();

    /* Idempotent: the normalized path, re-encoded, normalizes to itself. */
    enc_len = http_path_encode(out, res.len, enc, sizeof(enc));
    if (enc_len < 0 || (size_t)enc_len > 3 * res.len || strlen(enc) != (size_t)enc_len)
        abort();
    elen = (size_t)enc_len;
    rc2 = http_path_normalize(enc, elen, again, sizeof(again), &res2);
    if (rc2 != 0 || res2.len != res.len || memcmp(again, out, res.len + 1) != 0 ||
        res2.query != NULL)
        abort();

    /* A smaller buffer gives the same path or -ENAMETOOLONG. */
    cap = 1 + size % (res.len + 2);
    rc2 = http_path_normalize(in, size, small, cap, &res2);
    if (rc2 == 0) {
        check_path(small, &res2, cap);
        if (res2.len != res.len || memcmp(small, out, res.len) != 0)
            abort();
    } else if (rc2 != -ENAMETOOLONG) {
        /* The bound may fail on an intermediate state longer than the result, nothing else. */
        abort();
    }
    return 0;
}
