/*
 * httpd_files.c (integration) - cabrank-httpd's file semantics over raw
 * sockets: validators, conditional requests (304 from If-None-Match and
 * If-Modified-Since, 412 from If-Match and If-Unmodified-Since; dates
 * against the server's clock: a future If-Modified-Since ignored, an If-Range
 * date only once its second is over), ranges
 * (single 206, suffix and open ranges, multipart/byteranges with its exact
 * Content-Length, 416 with "bytes * /size", If-Range with a matching and a
 * stale validator, ranges ignored for HEAD), the precompressed .gz variant
 * (Content-Encoding, its own ETag, Vary on both variants, q=0 refusal), and a
 * large file sent with sendfile arriving byte-exact, whole and as a range.
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include "httpd_client.h"

#include <time.h>

#define FSIZE   1000
#define BIGSIZE (8u * 1024 * 1024 + 123)
#define GZDATA  "\x1f\x8b this stands for gzip bytes"

static char root[256];
static unsigned char fdata[FSIZE];
static unsigned char *bigdata;

/* A day's seconds; the mtimes of past.txt (an hour ago) and ahead.txt (a day ahead). */
#define DAY 86400
static time_t past_mtime;
static time_t ahead_mtime;

/* Writes name with its mtime set to t. */
static int write_dated(const char *name, time_t t)
{
    char path[512];
    struct timespec ts[2] = {{.tv_sec = t}, {.tv_sec = t}};

    snprintf(path, sizeof(path), "%s/%s", root, name);
    if (hc_write_file(root, name, "dated\n", 6) < 0)
        return -1;
    return utimensat(AT_FDCWD, path, ts, 0);
}

/* t as an IMF-fixdate in out (30 bytes). */
static void imf_date(char *out, size_t cap, time_t t)
{
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(out, cap, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static int make_root(void)
{
    if (hc_mkdtemp(root, sizeof(root)) < 0)
        return -1;
    hc_pattern(fdata, sizeof(fdata), 1);
    bigdata = malloc(BIGSIZE);
    if (bigdata == NULL)
        return -1;
    hc_pattern(bigdata, BIGSIZE, 5);
    if (hc_write_file(root, "f.txt", fdata, sizeof(fdata)) < 0 ||
        hc_write_file(root, "big.bin", bigdata, BIGSIZE) < 0 ||
        hc_write_file(root, "g.txt", "plain text of g\n", 16) < 0 ||
        hc_write_file(root, "g.txt.gz", GZDATA, sizeof(GZDATA) - 1) < 0)
        return -1;
    past_mtime = time(NULL) - 3600;
    ahead_mtime = time(NULL) + DAY;
    if (write_dated("past.txt", past_mtime) < 0 || write_dated("ahead.txt", ahead_mtime) < 0)
        return -1;
    return 0;
}

/* One request on a kept connection; the response in r (caller frees). */
static int req(struct cr_test_client *cl, struct hc_resp *r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int req(struct cr_test_client *cl, struct hc_resp *r, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    int err;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    err = hc_request(cl, buf, r, hc_tmo(10000));
    if (err < 0)
        fprintf(stderr, "request '%.40s...': %s\n", buf, strerror(-err));
    return err;
}

static void test_conditionals(struct cr_test_client *cl)
{
    struct hc_resp r;
    char etag[128] = "";
    char lm[64] = "";

    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\n\r\n") == 0 && r.status == 200 &&
              r.body_len == FSIZE && memcmp(r.body, fdata, FSIZE) == 0,
          "GET f.txt");
    CHECK(hc_header(&r, "ETag", etag, sizeof(etag)) && etag[0] == '"', "ETag '%s'", etag);
    CHECK(hc_header(&r, "Last-Modified", lm, sizeof(lm)) && strlen(lm) == 29, "Last-Modified");
    CHECK(hc_header_is(&r, "Accept-Ranges", "bytes"), "Accept-Ranges");
    CHECK(!hc_has_header(&r, "Vary"), "no Vary without a .gz");
    hc_resp_free(&r);

    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: %s\r\n\r\n", etag) == 0 &&
              r.status == 304 && r.body == NULL && hc_header_is(&r, "ETag", etag),
          "If-None-Match: 304 (got %d)", r.status);
    CHECK(hc_has_header(&r, "Date") && hc_header_is(&r, "Server", "cabrank"), "304 fields");
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"x\", W/%s\r\n\r\n",
              etag) == 0 &&
              r.status == 304,
          "If-None-Match weak in a list: %d", r.status);
    hc_resp_free(&r);
    CHECK(req(cl, &r,
              "GET /f.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"x\"\r\n"
              "If-None-Match: %s\r\n\r\n",
              etag) == 0 &&
              r.status == 304,
          "If-None-Match on two lines: %d", r.status);
    hc_resp_free(&r);
    CHECK(req(cl, &r, "HEAD /f.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: *\r\n\r\n") == 0 &&
              r.status == 304,
          "If-None-Match * on HEAD: %d", r.status);
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"other\"\r\n\r\n") == 0 &&
              r.status == 200 && r.body_len == FSIZE,
          "If-None-Match other: %d", r.status);
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: %s\r\n\r\n", lm) == 0 &&
              r.status == 304,
          "If-Modified-Since = Last-Modified: %d", r.status);
    hc_resp_free(&r);
    CHECK(req(cl, &r,
              "GET /f.txt HTTP/1.1\r\nHost: t\r\n"
              "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n") == 0 &&
              r.status == 200,
          "If-Modified-Since long ago: %d", r.status);
    hc_resp_free(&r);
    /* If-None-Match wins over If-Modified-Since (RFC 9110 13.2.2). */
    CHECK(req(cl, &r,
              "GET /f.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"other\"\r\n"
              "If-Modified-Since: %s\r\n\r\n",
              lm) == 0 &&
              r.status == 200,
          "If-None-Match before If-Modified-Since: %d", r.status);
    hc_resp_free(&r);

    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\nIf-Match: \"nope\"\r\n\r\n") == 0 &&
              r.status == 412,
          "If-Match other: %d", r.status);
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\nIf-Match: %s\r\n\r\n", etag) == 0 &&
              r.status == 200,
          "If-Match same: %d", r.status);
    hc_resp_free(&r);
    CHECK(req(cl, &r,
              "GET /f.txt HTTP/1.1\r\nHost: t\r\n"
              "If-Unmodified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n") == 0 &&
              r.status == 412,
          "If-Unmodified-Since long ago: %d", r.status);
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\nIf-Unmodified-Since: %s\r\n\r\n", lm) ==
                  0 &&
              r.status == 200,
          "If-Unmodified-Since = Last-Modified: %d", r.status);
    hc_resp_free(&r);
}

/* If-Modified-Since and If-Range dates against the server's clock (RFC 9110 13.1.3, 8.8.2.2). */
static void test_dates(struct cr_test_client *cl)
{
    struct hc_resp r;
    char d[64];
    char lm[64] = "";
    char date[64] = "";

    CHECK(req(cl, &r, "GET /past.txt HTTP/1.1\r\nHost: t\r\n\r\n") == 0 && r.status == 200 &&
              hc_header(&r, "Last-Modified", lm, sizeof(lm)) &&
              hc_header(&r, "Date", date, sizeof(date)),
          "GET past.txt: %d", r.status);
    hc_resp_free(&r);
    imf_date(d, sizeof(d), past_mtime);
    CHECK(strcmp(lm, d) == 0, "past.txt Last-Modified '%s', want '%s'", lm, d);

    /* A day ahead of the clock: invalid, ignored. */
    imf_date(d, sizeof(d), time(NULL) + DAY);
    CHECK(req(cl, &r, "GET /past.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: %s\r\n\r\n", d) ==
                  0 &&
              r.status == 200 && r.body_len == 6,
          "If-Modified-Since a day ahead (%s): %d", d, r.status);
    hc_resp_free(&r);
    CHECK(req(cl, &r,
              "GET /f.txt HTTP/1.1\r\nHost: t\r\n"
              "If-Modified-Since: Thu, 01 Jan 2099 00:00:00 GMT\r\n\r\n") == 0 &&
              r.status == 200 && r.body_len == FSIZE,
          "If-Modified-Since 2099: %d", r.status);
    hc_resp_free(&r);
    /* Equal to Last-Modified, and the current second (a Date the server sent): 304. */
    CHECK(req(cl, &r, "GET /past.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: %s\r\n\r\n", lm) ==
                  0 &&
              r.status == 304,
          "If-Modified-Since = Last-Modified: %d", r.status);
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /past.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: %s\r\n\r\n", date) ==
                  0 &&
              r.status == 304,
          "If-Modified-Since = Date (%s): %d", date, r.status);
    hc_resp_free(&r);
    /* A second before the file changed: 200. */
    imf_date(d, sizeof(d), past_mtime - 1);
    CHECK(req(cl, &r, "GET /past.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: %s\r\n\r\n", d) ==
                  0 &&
              r.status == 200,
          "If-Modified-Since before the mtime: %d", r.status);
    hc_resp_free(&r);

    /* A file whose mtime is ahead of the clock: its own Last-Modified gives no 304 ... */
    CHECK(req(cl, &r, "GET /ahead.txt HTTP/1.1\r\nHost: t\r\n\r\n") == 0 && r.status == 200 &&
              hc_header(&r, "Last-Modified", lm, sizeof(lm)),
          "GET ahead.txt: %d", r.status);
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /ahead.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: %s\r\n\r\n", lm) ==
                  0 &&
              r.status == 200,
          "If-Modified-Since = a future Last-Modified: %d", r.status);
    hc_resp_free(&r);
    /* ... nor a range by date (a second not over is a weak validator), */
    CHECK(req(cl, &r,
              "GET /ahead.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-1\r\nIf-Range: %s\r\n\r\n",
              lm) == 0 &&
              r.status == 200 && r.body_len == 6,
          "If-Range with a future date: %d", r.status);
    hc_resp_free(&r);
    /* while a date of a second long over does. */
    imf_date(d, sizeof(d), past_mtime);
    CHECK(req(cl, &r,
              "GET /past.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-1\r\nIf-Range: %s\r\n\r\n",
              d) == 0 &&
              r.status == 206 && r.body_len == 2,
          "If-Range with Last-Modified: %d", r.status);
    hc_resp_free(&r);
}

/* s in p[0..end), or NULL: the body is binary, so no strstr. */
static const char *find(const char *p, const char *end, const char *s)
{
    return p < end ? memmem(p, (size_t)(end - p), s, strlen(s)) : NULL;
}

/* Checks the multipart body of r against the ranges (first, last) given. */
static void check_multipart(const struct hc_resp *r, const unsigned long (*rg)[2], int n)
{
    char ctype[256];
    char *boundary;
    char delim[128];
    const char *p = r->body;
    const char *end = r->body + r->body_len;

    CHECK(hc_header(r, "Content-Type", ctype, sizeof(ctype)) &&
              strncmp(ctype, "multipart/byteranges; boundary=", 31) == 0,
          "multipart Content-Type '%s'", ctype);
    boundary = strstr(ctype, "boundary=");
    if (boundary == NULL || p == NULL)
        return;
    snprintf(delim, sizeof(delim), "--%s\r\n", boundary + 9);
    for (int i = 0; i < n; i++) {
        char want[128];
        const char *part = find(p, end, delim);
        const char *data;
        const char *cr;

        CHECK(part != NULL, "part %d missing", i);
        if (part == NULL)
            return;
        snprintf(want, sizeof(want), "Content-Range: bytes %lu-%lu/%u\r\n", rg[i][0], rg[i][1],
                 FSIZE);
        data = find(part, end, "\r\n\r\n");
        cr = find(part, end, want);
        CHECK(data != NULL && cr != NULL && cr < data, "part %d: %s", i, want);
        cr = find(part, end, "Content-Type: text/plain");
        CHECK(data != NULL && cr != NULL && cr < data, "part %d type", i);
        if (data == NULL)
            return;
        data += 4;
        CHECK(data + (rg[i][1] - rg[i][0] + 1) <= end &&
                  memcmp(data, fdata + rg[i][0], rg[i][1] - rg[i][0] + 1) == 0,
              "part %d bytes", i);
        p = data + (rg[i][1] - rg[i][0] + 1);
    }
    snprintf(delim, sizeof(delim), "\r\n--%s--\r\n", boundary + 9);
    CHECK((size_t)(end - p) == strlen(delim) && memcmp(p, delim, strlen(delim)) == 0,
          "multipart trailer");
}

static void test_ranges(struct cr_test_client *cl)
{
    static const unsigned long two[2][2] = {{0, 1}, {10, 11}};
    static const unsigned long three[3][2] = {{0, 4}, {500, 509}, {990, 999}};
    struct hc_resp r;
    char etag[128] = "";

    CHECK(req(cl, &r, "HEAD /f.txt HTTP/1.1\r\nHost: t\r\n\r\n") == 0 &&
              hc_header(&r, "ETag", etag, sizeof(etag)),
          "HEAD for the ETag");
    hc_resp_free(&r);

    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-9\r\n\r\n") == 0 &&
              r.status == 206 && r.body_len == 10 && memcmp(r.body, fdata, 10) == 0,
          "bytes=0-9: %d", r.status);
    CHECK(hc_header_is(&r, "Content-Range", "bytes 0-9/1000") &&
              hc_header_is(&r, "Content-Length", "10") && hc_header_is(&r, "ETag", etag),
          "206 fields");
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=-10\r\n\r\n") == 0 &&
              r.status == 206 && r.body_len == 10 && memcmp(r.body, fdata + 990, 10) == 0 &&
              hc_header_is(&r, "Content-Range", "bytes 990-999/1000"),
          "bytes=-10");
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=995-\r\n\r\n") == 0 &&
              r.status == 206 && r.body_len == 5 && memcmp(r.body, fdata + 995, 5) == 0,
          "bytes=995-");
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=990-5000\r\n\r\n") == 0 &&
              r.status == 206 && r.body_len == 10 &&
              hc_header_is(&r, "Content-Range", "bytes 990-999/1000"),
          "end clamped");
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=1000-\r\n\r\n") == 0 &&
              r.status == 416 && hc_header_is(&r, "Content-Range", "bytes */1000"),
          "416: %d", r.status);
    CHECK(hc_has_header(&r, "Content-Length") && hc_has_header(&r, "Date"), "416 fields");
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=5-1\r\n\r\n") == 0 &&
              r.status == 200 && r.body_len == FSIZE,
          "invalid Range ignored: %d", r.status);
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\nRange: lines=1-2\r\n\r\n") == 0 &&
              r.status == 200,
          "other unit ignored: %d", r.status);
    hc_resp_free(&r);

    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-1,10-11\r\n\r\n") == 0 &&
              r.status == 206,
          "two ranges: %d", r.status);
    check_multipart(&r, two, 2);
    hc_resp_free(&r);
    CHECK(req(cl, &r,
              "GET /f.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=990-999, 0-4, 500-509\r\n\r\n") ==
                  0 &&
              r.status == 206,
          "three ranges: %d", r.status);
    check_multipart(&r, three, 3);
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-5,3-9\r\n\r\n") == 0 &&
              r.status == 206 && hc_header_is(&r, "Content-Range", "bytes 0-9/1000") &&
              r.body_len == 10,
          "overlapping ranges coalesced");
    hc_resp_free(&r);

    CHECK(req(cl, &r, "GET /f.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-9\r\nIf-Range: %s\r\n\r\n",
              etag) == 0 &&
              r.status == 206 && r.body_len == 10,
          "If-Range matching: %d", r.status);
    hc_resp_free(&r);
    CHECK(
        req(cl, &r,
            "GET /f.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-9\r\nIf-Range: \"stale\"\r\n\r\n") ==
                0 &&
            r.status == 200 && r.body_len == FSIZE,
        "If-Range stale: %d", r.status);
    hc_resp_free(&r);
    CHECK(req(cl, &r,
              "GET /f.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-9\r\n"
              "If-Range: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n") == 0 &&
              r.status == 200,
          "If-Range old date: %d", r.status);
    hc_resp_free(&r);
    CHECK(req(cl, &r, "HEAD /f.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-9\r\n\r\n") == 0 &&
              r.status == 200 && hc_header_is(&r, "Content-Length", "1000") && r.body == NULL,
          "HEAD ignores Range: %d", r.status);
    hc_resp_free(&r);
}

static void test_gzip(struct cr_test_client *cl)
{
    struct hc_resp r;
    char etag_plain[128] = "";
    char etag_gz[128] = "";

    CHECK(req(cl, &r, "GET /g.txt HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip, br\r\n\r\n") == 0 &&
              r.status == 200 && r.body_len == sizeof(GZDATA) - 1 &&
              memcmp(r.body, GZDATA, r.body_len) == 0,
          "gz variant: %d", r.status);
    CHECK(hc_header_is(&r, "Content-Encoding", "gzip") &&
              hc_header_is(&r, "Vary", "Accept-Encoding") &&
              hc_header_is(&r, "Content-Type", "text/plain; charset=utf-8") &&
              hc_header(&r, "ETag", etag_gz, sizeof(etag_gz)),
          "gz fields");
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /g.txt HTTP/1.1\r\nHost: t\r\n\r\n") == 0 && r.status == 200 &&
              r.body_len == 16 && memcmp(r.body, "plain text of g\n", 16) == 0,
          "plain variant");
    CHECK(!hc_has_header(&r, "Content-Encoding") && hc_header_is(&r, "Vary", "Accept-Encoding") &&
              hc_header(&r, "ETag", etag_plain, sizeof(etag_plain)),
          "plain variant fields");
    CHECK(strcmp(etag_plain, etag_gz) != 0, "variants share an ETag %s", etag_gz);
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /g.txt HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip;q=0, *\r\n\r\n") ==
                  0 &&
              r.status == 200 && r.body_len == 16 && !hc_has_header(&r, "Content-Encoding"),
          "gzip;q=0 refused");
    hc_resp_free(&r);
    CHECK(req(cl, &r,
              "GET /g.txt HTTP/1.1\r\nHost: t\r\nAccept-Encoding: identity\r\n"
              "Accept-Encoding: gzip\r\n\r\n") == 0 &&
              hc_header_is(&r, "Content-Encoding", "gzip"),
          "Accept-Encoding on two lines");
    hc_resp_free(&r);
    CHECK(
        req(cl, &r,
            "GET /g.txt HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\nIf-None-Match: %s\r\n\r\n",
            etag_gz) == 0 &&
            r.status == 304 && hc_header_is(&r, "Vary", "Accept-Encoding"),
        "304 of the gz variant: %d", r.status);
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /g.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: %s\r\n\r\n", etag_gz) ==
                  0 &&
              r.status == 200,
          "gz ETag does not validate the plain variant: %d", r.status);
    hc_resp_free(&r);
    CHECK(req(cl, &r, "GET /g.txt.gz HTTP/1.1\r\nHost: t\r\n\r\n") == 0 && r.status == 200 &&
              !hc_has_header(&r, "Content-Encoding"),
          "the .gz itself");
    hc_resp_free(&r);
}

/* The big file through sendfile: whole and a range, byte for byte. */
static void test_big(uint16_t port)
{
    struct cr_test_client cl;
    struct hc_resp r;
    char want[64];

    if (hc_open(&cl, port) < 0) {
        hc_failures++;
        return;
    }
    CHECK(req(&cl, &r, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n") == 0 && r.status == 200 &&
              r.body_len == BIGSIZE && memcmp(r.body, bigdata, BIGSIZE) == 0,
          "big file byte-exact (%zu bytes)", r.body_len);
    CHECK(hc_header_is(&r, "Content-Type", "application/octet-stream"), "big type");
    hc_resp_free(&r);
    CHECK(req(&cl, &r,
              "GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=1000000-3999999\r\n\r\n") == 0 &&
              r.status == 206 && r.body_len == 3000000 &&
              memcmp(r.body, bigdata + 1000000, 3000000) == 0,
          "big range");
    snprintf(want, sizeof(want), "bytes 1000000-3999999/%u", BIGSIZE);
    CHECK(hc_header_is(&r, "Content-Range", want), "big Content-Range");
    hc_resp_free(&r);
    /* And once more, pipelined behind a small one. */
    CHECK(hc_send(&cl, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /g.txt HTTP/1.1\r\nHost: "
                       "t\r\n\r\n") == 0,
          "pipelined big");
    CHECK(hc_read(&cl, false, &r, hc_tmo(10000)) == 0 && r.body_len == BIGSIZE &&
              memcmp(r.body, bigdata, BIGSIZE) == 0,
          "pipelined big body");
    hc_resp_free(&r);
    CHECK(hc_read(&cl, false, &r, hc_tmo(10000)) == 0 && r.body_len == 16, "after big");
    hc_resp_free(&r);
    cr_test_client_close(&cl);
}

int main(void)
{
    const char *const args[] = {"--threads", "3", NULL};
    struct hc_server s;
    struct cr_test_client cl;
    int rc = 1;

    if (make_root() < 0) {
        fprintf(stderr, "httpd_files: making the root: %s\n", strerror(errno));
        goto out;
    }
    if (hc_start(&s, root, args) < 0)
        goto out;
    if (hc_open(&cl, s.port) == 0) {
        test_conditionals(&cl);
        test_dates(&cl);
        test_ranges(&cl);
        test_gzip(&cl);
        cr_test_client_close(&cl);
    } else {
        hc_failures++;
    }
    test_big(s.port);
    CHECK(hc_stop(&s) == 0, "graceful stop");
    if (hc_failures == 0) {
        fprintf(stderr, "httpd_files: ok\n");
        rc = 0;
    } else {
        fprintf(stderr, "httpd_files: %d check(s) failed\n", hc_failures);
    }
out:
    if (root[0] != '\0')
        (void)cr_test_rmtree(root);
    free(bigdata);
    return rc;
}
