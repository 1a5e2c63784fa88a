/*
 * pgo_train.c - the training run of the profile-guided cabrank-httpd (mk/pgo.mk;
 * docs/design/build.md). Starts $CR_BUILD_DIR/cabrank-httpd, the
 * instrumented build, on 127.0.0.1:0 over a scratch document root, sends it a
 * mix of the requests a static-file server sees, and stops it with TERM, so
 * that it writes its profile beside its objects. Mostly small keep-alive GETs,
 * as in the benchmarks and on real sites; also a 64 KiB file, HEAD, a 304, a
 * single range, a 404, a 301, a browser's request for a precompressed page,
 * two pipelined requests and Connection: close. Every answer's status is
 * checked, so a server that answers wrongly fails the build instead of
 * training it.
 *
 * Each round sends one request (or a pipelined pair) on each of CONNS
 * connections, then reads every answer, so the server finds several
 * connections ready at once, as under wrk. Bounded by a count of requests and
 * by time. The server, the client and the document root are the integration
 * tests' (apps/common/http_client.h).
 *
 * usage: CR_BUILD_DIR=build/pgo pgo-train [SECONDS [REQUESTS]]
 */
#include "../apps/common/http_client.h"
#include "../apps/common/scratch.h"

#define CONNS    32
#define TMO_MS   5000
#define ETAG_MAX 128
#define MIX      64 /* the request kinds repeat every MIX requests */

enum kind {
    K_SMALL,
    K_1K,
    K_64K,
    K_HEAD,
    K_304,
    K_RANGE,
    K_404,
    K_301,
    K_BROWSER,
    K_PIPE,
    K_CLOSE
};

/* What request k of every MIX is: small GETs most of the time. */
static enum kind kind_of(unsigned k)
{
    static const struct {
        enum kind kind;
        unsigned count;
    } mix[] = {{K_1K, 8},  {K_64K, 2}, {K_HEAD, 2},    {K_304, 2},  {K_RANGE, 2},
               {K_404, 1}, {K_301, 1}, {K_BROWSER, 3}, {K_PIPE, 2}, {K_CLOSE, 1}};
    unsigned at = 0;

    k %= MIX;
    for (size_t i = 0; i < sizeof(mix) / sizeof(mix[0]); i++) {
        at += mix[i].count;
        if (k < at)
            return mix[i].kind;
    }
    return K_SMALL;
}

/* One request of the mix and what must come back. */
struct plan {
    char req[1024];
    int want;   /* status of each answer */
    bool head;  /* answers without a body */
    int count;  /* answers: 2 for the pipelined pair */
    bool close; /* the server closes after the answer */
};

#define HOST "Host: 127.0.0.1\r\n"

static void plan_of(enum kind kind, const char *etag, struct plan *p)
{
    *p = (struct plan){.want = 200, .count = 1};
    switch (kind) {
    case K_SMALL:
        snprintf(p->req, sizeof(p->req), "GET /hello.txt HTTP/1.1\r\n" HOST "\r\n");
        break;
    case K_1K:
        snprintf(p->req, sizeof(p->req), "GET /1k.bin HTTP/1.1\r\n" HOST "\r\n");
        break;
    case K_64K:
        snprintf(p->req, sizeof(p->req), "GET /64k.bin HTTP/1.1\r\n" HOST "\r\n");
        break;
    case K_HEAD:
        snprintf(p->req, sizeof(p->req), "HEAD /hello.txt HTTP/1.1\r\n" HOST "\r\n");
        p->head = true;
        break;
    case K_304:
        snprintf(p->req, sizeof(p->req),
                 "GET /hello.txt HTTP/1.1\r\n" HOST "If-None-Match: %s\r\n\r\n", etag);
        p->want = 304;
        break;
    case K_RANGE:
        snprintf(p->req, sizeof(p->req),
                 "GET /1k.bin HTTP/1.1\r\n" HOST "Range: bytes=0-99\r\n\r\n");
        p->want = 206;
        break;
    case K_404:
        snprintf(p->req, sizeof(p->req), "GET /missing.html HTTP/1.1\r\n" HOST "\r\n");
        p->want = 404;
        break;
    case K_301:
        snprintf(p->req, sizeof(p->req), "GET /docs HTTP/1.1\r\n" HOST "\r\n");
        p->want = 301;
        break;
    case K_BROWSER:
        snprintf(p->req, sizeof(p->req),
                 "GET / HTTP/1.1\r\n" HOST
                 "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 "
                 "Firefox/128.0\r\n"
                 "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"
                 "Accept-Language: en-US,en;q=0.5\r\n"
                 "Accept-Encoding: gzip, deflate, br, zstd\r\n"
                 "Referer: http://127.0.0.1/docs/\r\n"
                 "Cookie: session=4f1c2a9e; theme=dark\r\n"
                 "Upgrade-Insecure-Requests: 1\r\n"
                 "Sec-Fetch-Dest: document\r\n"
                 "Sec-Fetch-Mode: navigate\r\n\r\n");
        break;
    case K_PIPE:
        snprintf(p->req, sizeof(p->req),
                 "GET /hello.txt HTTP/1.1\r\n" HOST "\r\nGET /hello.txt HTTP/1.1\r\n" HOST "\r\n");
        p->count = 2;
        break;
    case K_CLOSE:
        snprintf(p->req, sizeof(p->req),
                 "GET /hello.txt HTTP/1.1\r\n" HOST "Connection: close\r\n\r\n");
        p->close = true;
        break;
    }
}

/*
 * Reads the answers p asks for on cl; returns how many came, or -1. A server
 * that closes (as at its cap on requests a connection) leaves the rest
 * unanswered: cl is then connected anew.
 */
static int read_answers(struct cr_test_client *cl, const struct plan *p, uint16_t port)
{
    for (int i = 0; i < p->count; i++) {
        struct hc_resp r;
        int err = hc_read(cl, p->head, &r, TMO_MS);
        bool closing = err == 0 && hc_header_is(&r, "Connection", "close");

        bool failed = false;

        hc_resp_free(&r);
        if (!(err == 0 && r.status == p->want)) {
            fprintf(stderr, "pgo-train: %.*s: wanted %d, got %d (%s)\n", (int)strcspn(p->req, "\r"),
                    p->req, p->want, r.status, err < 0 ? strerror(-err) : "an answer");
            failed = true;
        }
        if (!(closing || !p->close)) {
            fprintf(stderr, "pgo-train: no Connection: close in answer to one\n");
            failed = true;
        }
        if (failed)
            return -1;
        if (closing) {
            if (hc_wait_close(cl, TMO_MS) < 0)
                return -1;
            cr_test_client_close(cl);
            return hc_open(cl, port) < 0 ? -1 : i + 1;
        }
    }
    return p->count;
}

/* The scratch document root: the files the mix asks for. */
static int make_root(char *root, size_t cap)
{
    static unsigned char data[64 * 1024];
    static const char page[] =
        "<!doctype html><title>cabrank</title><p>A page with a precompressed copy.\n";
    int err;

    hc_pattern(data, sizeof(data), 7);
    if ((err = hc_mkdtemp(root, cap)) < 0 ||
        (err = hc_write_file(root, "hello.txt", "Hello, world\n", 13)) < 0 ||
        (err = hc_write_file(root, "1k.bin", data, 1024)) < 0 ||
        (err = hc_write_file(root, "64k.bin", data, sizeof(data))) < 0 ||
        (err = hc_write_file(root, "index.html", page, sizeof(page) - 1)) < 0 ||
        /* Served as stored: the client does not decode it. */
        (err = hc_write_file(root, "index.html.gz", data, 512)) < 0 ||
        (err = hc_mkdir(root, "docs")) < 0 ||
        (err = hc_write_file(root, "docs/index.html", page, sizeof(page) - 1)) < 0)
        fprintf(stderr, "pgo-train: document root %s: %s\n", root, strerror(-err));
    return err;
}

/* Sends the mix until max requests are answered or seconds have passed. */
static int drive(uint16_t port, double seconds, unsigned long max, unsigned long *done)
{
    static struct cr_test_client conns[CONNS];
    static struct plan plans[CONNS];
    uint64_t deadline = cr_test_now_ms() + (uint64_t)(seconds * 1000);
    char etag[ETAG_MAX];
    struct hc_resp r;
    unsigned seq = 0;
    bool has_etag;
    int opened = 0;
    int ret = -1;

    for (; opened < CONNS; opened++) {
        if (hc_open(&conns[opened], port) < 0)
            goto out;
    }
    /* The validator a 304 needs, from the server itself. */
    has_etag = hc_request(&conns[0], "GET /hello.txt HTTP/1.1\r\n" HOST "\r\n", &r, TMO_MS) == 0 &&
               hc_header(&r, "ETag", etag, sizeof(etag));
    hc_resp_free(&r);
    if (!has_etag) {
        fprintf(stderr, "pgo-train: no ETag on hello.txt\n");
        goto out;
    }
    while (*done < max && cr_test_now_ms() < deadline) {
        for (int i = 0; i < CONNS; i++) {
            plan_of(kind_of(seq++), etag, &plans[i]);
            if (hc_send(&conns[i], plans[i].req) < 0)
                goto out;
        }
        for (int i = 0; i < CONNS; i++) {
            int n = read_answers(&conns[i], &plans[i], port);

            if (n < 0)
                goto out;
            *done += (unsigned long)n;
        }
    }
    ret = 0;
out:
    for (int i = 0; i < opened; i++)
        cr_test_client_close(&conns[i]);
    return ret;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? strtod(argv[1], NULL) : 5;
    unsigned long max = argc > 2 ? strtoul(argv[2], NULL, 10) : 200000;
    unsigned long done = 0;
    struct hc_server s = {0};
    char root[64];
    int failed;

    if (argc > 3 || !(seconds > 0 && seconds < 3600) || max == 0) {
        fprintf(stderr, "usage: CR_BUILD_DIR=DIR pgo-train [SECONDS [REQUESTS]]\n");
        return 2;
    }
    if (make_root(root, sizeof(root)) < 0)
        return 1;
    failed = hc_start(&s, root, NULL) < 0;
    if (!failed) {
        failed = drive(s.port, seconds, max, &done) < 0;
        /* Graceful, so that it exits and writes its profile. */
        failed |= hc_stop(&s) < 0;
    }
    (void)cr_test_rmtree(root);
    if (failed) {
        fprintf(stderr, "pgo-train: training failed; make PGO=0 builds without it\n");
        return 1;
    }
    printf("pgo-train: %lu requests\n", done);
    return 0;
}
