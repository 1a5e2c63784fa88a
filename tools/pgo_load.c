/*
 * pgo_load.c - the training load of the profile-guided build (tools/pgo-train.sh):
 * a mix of the requests a static-file server sees, sent to cabrank-httpd on
 * 127.0.0.1:PORT so that the instrumented build records which branches and calls
 * are hot. Mostly small keep-alive GETs, as in the benchmarks and on real sites;
 * also a 64 KiB file, HEAD, a 304, a single range, a 404, a 301, a browser's
 * request for a precompressed page, two pipelined requests and Connection: close.
 * Every answer's status is checked, so a server that serves wrongly fails the
 * build instead of training it.
 *
 * Single-threaded and blocking: each round sends one request (or a pipelined
 * pair) on each of CONNS connections, then reads every answer, so the server
 * finds several connections ready at once, as under wrk. Bounded by a count of
 * requests and by time; a silent server fails it after IO_TIMEOUT_S.
 *
 * usage: pgo-load PORT [SECONDS [REQUESTS]]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define CONNS        32
#define IO_TIMEOUT_S 5
#define BUF_SIZE     (16 * 1024)
#define ETAG_MAX     128
#define MIX          64 /* the request kinds repeat every MIX requests */

struct conn {
    int fd;
    size_t len;
    char buf[BUF_SIZE];
};

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

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int fail(const char *what)
{
    fprintf(stderr, "pgo-load: %s\n", what);
    return -1;
}

static int open_conn(struct conn *c, uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
    int one = 1;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->len = 0;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return fail(strerror(errno));
    if (setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
        setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
        setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
        connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return fail(strerror(errno));
    return 0;
}

static int send_all(const struct conn *c, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(c->fd, p, n, MSG_NOSIGNAL);

        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return fail(k < 0 ? strerror(errno) : "send wrote nothing");
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Reads more into c->buf; 0 at the peer's end. */
static ssize_t fill(struct conn *c)
{
    ssize_t n;

    if (c->len == sizeof(c->buf))
        return fail("an answer's head is longer than the buffer");
    do {
        n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return fail(errno == EAGAIN ? "the server went silent" : strerror(errno));
    c->len += (size_t)n;
    return n;
}

static void drop(struct conn *c, size_t n)
{
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
}

/* The value of field name (with its colon) in head, or NULL; *len its length. */
static const char *field(const char *head, size_t head_len, const char *name, size_t *len)
{
    size_t nl = strlen(name);
    const char *end = head + head_len;

    for (const char *p = head; p < end;) {
        const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);

        if (eol == NULL)
            break;
        if ((size_t)(eol - p) > nl && strncasecmp(p, name, nl) == 0) {
            p += nl;
            while (p < eol && *p == ' ')
                p++;
            *len = (size_t)(eol - p);
            return p;
        }
        p = eol + 2;
    }
    return NULL;
}

/*
 * Reads one answer, which must have status want; a HEAD's or a 304's has no
 * body. etag, when not NULL, receives the ETag field. Returns 1 when the
 * answer says Connection: close (as at the cap on requests a connection), 0
 * when it does not, -1 on an error.
 */
static int read_answer(struct conn *c, int want, bool head, char *etag)
{
    const char *end;
    const char *v;
    size_t head_len;
    size_t vlen;
    unsigned long long body = 0;
    bool closing;
    int status;

    while ((end = memmem(c->buf, c->len, "\r\n\r\n", 4)) == NULL) {
        ssize_t n = fill(c);

        if (n <= 0)
            return n == 0 ? fail("the server closed before an answer") : -1;
    }
    head_len = (size_t)(end + 4 - c->buf);
    if (sscanf(c->buf, "HTTP/1.1 %3d ", &status) != 1 || status != want) {
        fprintf(stderr, "pgo-load: wanted %d, got: %.*s\n", want, (int)strcspn(c->buf, "\r"),
                c->buf);
        return -1;
    }
    if (!head && status != 304) {
        v = field(c->buf, head_len, "content-length:", &vlen);
        if (v == NULL)
            return fail("an answer without Content-Length");
        body = strtoull(v, NULL, 10);
    }
    if (etag != NULL) {
        v = field(c->buf, head_len, "etag:", &vlen);
        if (v == NULL || vlen >= ETAG_MAX)
            return fail("no usable ETag");
        memcpy(etag, v, vlen);
        etag[vlen] = '\0';
    }
    v = field(c->buf, head_len, "connection:", &vlen);
    closing = v != NULL && vlen == 5 && strncasecmp(v, "close", 5) == 0;
    drop(c, head_len);
    while (body > 0) {
        size_t take;

        if (c->len == 0) {
            ssize_t n = fill(c);

            if (n <= 0)
                return n == 0 ? fail("the server closed within a body") : -1;
        }
        take = c->len < body ? c->len : (size_t)body;
        drop(c, take);
        body -= take;
    }
    return closing;
}

/* After an answer to Connection: close, the server must close. */
static int expect_close(struct conn *c, uint16_t port)
{
    ssize_t n = c->len > 0 ? 1 : fill(c);

    if (n != 0)
        return n < 0 ? -1 : fail("the server kept a connection it was told to close");
    close(c->fd);
    return open_conn(c, port);
}

/* One request of the mix and what must come back. */
struct plan {
    char req[1024];
    size_t len;
    int want;   /* status of each answer */
    bool head;  /* answers without a body */
    int count;  /* answers: 2 for the pipelined pair */
    bool close; /* the server closes after the answer */
};

static int plan_of(enum kind kind, const char *etag, struct plan *p)
{
    static const char host[] = "Host: 127.0.0.1\r\n";
    int n = 0;

    *p = (struct plan){.want = 200, .count = 1};
    switch (kind) {
    case K_SMALL:
        n = snprintf(p->req, sizeof(p->req), "GET /hello.txt HTTP/1.1\r\n%s\r\n", host);
        break;
    case K_1K:
        n = snprintf(p->req, sizeof(p->req), "GET /1k.bin HTTP/1.1\r\n%s\r\n", host);
        break;
    case K_64K:
        n = snprintf(p->req, sizeof(p->req), "GET /64k.bin HTTP/1.1\r\n%s\r\n", host);
        break;
    case K_HEAD:
        n = snprintf(p->req, sizeof(p->req), "HEAD /hello.txt HTTP/1.1\r\n%s\r\n", host);
        p->head = true;
        break;
    case K_304:
        n = snprintf(p->req, sizeof(p->req),
                     "GET /hello.txt HTTP/1.1\r\n%sIf-None-Match: %s\r\n\r\n", host, etag);
        p->want = 304;
        break;
    case K_RANGE:
        n = snprintf(p->req, sizeof(p->req), "GET /1k.bin HTTP/1.1\r\n%sRange: bytes=0-99\r\n\r\n",
                     host);
        p->want = 206;
        break;
    case K_404:
        n = snprintf(p->req, sizeof(p->req), "GET /missing.html HTTP/1.1\r\n%s\r\n", host);
        p->want = 404;
        break;
    case K_301:
        n = snprintf(p->req, sizeof(p->req), "GET /docs HTTP/1.1\r\n%s\r\n", host);
        p->want = 301;
        break;
    case K_BROWSER:
        n = snprintf(p->req, sizeof(p->req),
                     "GET / HTTP/1.1\r\n%s"
                     "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 "
                     "Firefox/128.0\r\n"
                     "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"
                     "Accept-Language: en-US,en;q=0.5\r\n"
                     "Accept-Encoding: gzip, deflate, br, zstd\r\n"
                     "Referer: http://127.0.0.1/docs/\r\n"
                     "Cookie: session=4f1c2a9e; theme=dark\r\n"
                     "Upgrade-Insecure-Requests: 1\r\n"
                     "Sec-Fetch-Dest: document\r\n"
                     "Sec-Fetch-Mode: navigate\r\n\r\n",
                     host);
        break;
    case K_PIPE:
        n = snprintf(p->req, sizeof(p->req),
                     "GET /hello.txt HTTP/1.1\r\n%s\r\nGET /hello.txt HTTP/1.1\r\n%s\r\n", host,
                     host);
        p->count = 2;
        break;
    case K_CLOSE:
        n = snprintf(p->req, sizeof(p->req),
                     "GET /hello.txt HTTP/1.1\r\n%sConnection: close\r\n\r\n", host);
        p->close = true;
        break;
    }
    if (n <= 0 || (size_t)n >= sizeof(p->req))
        return fail("a request did not fit");
    p->len = (size_t)n;
    return 0;
}

/* Reads the answers p asks for on c; returns how many came, or -1. A server
 * that closes (its cap on requests a connection) leaves the rest unanswered. */
static int read_answers(struct conn *c, const struct plan *p, uint16_t port)
{
    for (int i = 0; i < p->count; i++) {
        int closing = read_answer(c, p->want, p->head, NULL);

        if (closing < 0)
            return -1;
        if (closing > 0)
            return expect_close(c, port) < 0 ? -1 : i + 1;
    }
    if (p->close)
        return fail("the server did not say it closes");
    return p->count;
}

int main(int argc, char **argv)
{
    static const char first[] = "GET /hello.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    static struct conn conns[CONNS];
    static struct plan plans[CONNS];
    char etag[ETAG_MAX];
    unsigned long port = argc > 1 ? strtoul(argv[1], NULL, 10) : 0;
    double seconds = argc > 2 ? strtod(argv[2], NULL) : 5;
    unsigned long max = argc > 3 ? strtoul(argv[3], NULL, 10) : 200000;
    uint64_t deadline = now_ms() + (uint64_t)(seconds * 1000);
    unsigned long done = 0;
    unsigned seq = 0;

    if (argc < 2 || argc > 4 || port == 0 || port > 65535 || !(seconds > 0 && seconds < 3600)) {
        fprintf(stderr, "usage: pgo-load PORT [SECONDS [REQUESTS]]\n");
        return 2;
    }
    for (int i = 0; i < CONNS; i++) {
        if (open_conn(&conns[i], (uint16_t)port) < 0)
            return 1;
    }
    /* The validator a 304 needs, from the server itself. */
    if (send_all(&conns[0], first, sizeof(first) - 1) < 0 ||
        read_answer(&conns[0], 200, false, etag) < 0)
        return 1;
    while (done < max && now_ms() < deadline) {
        for (int i = 0; i < CONNS; i++) {
            if (plan_of(kind_of(seq++), etag, &plans[i]) < 0 ||
                send_all(&conns[i], plans[i].req, plans[i].len) < 0)
                return 1;
        }
        for (int i = 0; i < CONNS; i++) {
            int n = read_answers(&conns[i], &plans[i], (uint16_t)port);

            if (n < 0) {
                fprintf(stderr, "pgo-load: in answer to: %.*s\n", (int)strcspn(plans[i].req, "\r"),
                        plans[i].req);
                return 1;
            }
            done += (unsigned long)n;
        }
    }
    for (int i = 0; i < CONNS; i++)
        close(conns[i].fd);
    printf("pgo-load: %lu requests\n", done);
    return 0;
}
