/*
 * http_service.c - the HTTP/1.1 static-file service (http_service.h). The
 * models call its open/input/drained/close on their serving threads, one
 * thread at a time per connection; the service object is shared and, apart
 * from the thread-safe status counters, access log and file cache, read-only.
 * Owns the root descriptor, the MIME table, the file cache and the status
 * counters; borrows the access log.
 *
 * A connection is in one of three phases: reading a request head (parsed
 * from its start on every call: the parser keeps no state), or discarding
 * a request body of known length, or discarding a chunked body. A complete
 * head is answered at once, before its body is read: nothing we serve takes
 * a body, so the body is read only to find the next request. One request is
 * answered per input call; the driver calls again with what is left while
 * our output stays under its high-water mark, so pipelined answers keep
 * their order and a pipelining client cannot make us queue without bound.
 *
 * Timeouts: every call that leaves the connection waiting sets the input
 * timeout for what it waits for: the time left of the head deadline (fixed
 * at the head's first byte), the body timeout, or, between requests, the
 * keep-alive timeout, re-armed from drained() once the answer is out.
 *
 * Memory: a response head (and an error's small body) is formatted in place
 * with cr_conn_reserve/commit; a file body is a cr_conn_write_file segment
 * (sendfile) holding a reference to its file-cache entry, except that a body
 * (or single range) of at most INLINE_BODY_MAX bytes is copied into the
 * head's buffer, so head and body leave in one send and one packet. It is
 * copied from the entry's content, which the cache keeps for files that
 * small, so a hot small file costs a recv and a send; it is read with pread
 * only when the entry holds no copy (the cache's content budget was spent,
 * or the file changed while the cache read it). Nothing is allocated per
 * request except for the status page and for list fields sent on several
 * lines (combined into one value, RFC 9110 5.3).
 */
#include "http_service.h"

#include <cabrank/clock.h>
#include <cabrank/log.h>
#include <cabrank/server.h>

#include "file_cache.h"
#include "http_file.h"
#include "http_path.h"
#include "mime.h"
#include "out_buf.h"
#include "status.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Header field lines a request may have at most (its array is on the stack). */
#define HEADERS_CAP 256
/* Room for a response head's fixed fields; variable ones are added. */
#define HEAD_RESERVE 768
#define ALLOW        "GET, HEAD, OPTIONS"
/* File bodies up to this are copied into the response's buffer and sent with
 * its head; larger ones go out with sendfile. Also the size up to which the
 * file cache keeps a file's content. */
#define INLINE_BODY_MAX (16 * 1024)

enum phase {
    PHASE_HEAD = 0,     /* waiting for or reading a request head */
    PHASE_BODY_LENGTH,  /* discarding body_left more bytes */
    PHASE_BODY_CHUNKED, /* discarding a chunked body */
};

struct http_service {
    /* Immutable after create, except that http_service_reconfigure replaces
     * everything but svc and status in a process that serves nothing (a
     * process model's master), under fork_lock. */
    struct cr_service svc;
    int root_fd;
    struct http_mime *mime;
    struct http_file_cache *cache;
    struct status *status;
    struct access_log *log;
    uint64_t header_timeout_ns;
    uint64_t body_timeout_ms;
    uint64_t keepalive_timeout_ms;
    uint64_t send_timeout_ms;
    unsigned max_requests;
    struct http_limits limits;
    char *status_path; /* NULL: no status page */
    size_t status_path_len;
    bool status_allow_remote;
};

/* Per connection; the serving thread only. */
struct http_conn {
    enum phase phase;
    uint64_t head_start_ns; /* first byte of the head being read; 0: none yet */
    uint64_t body_left;     /* PHASE_BODY_LENGTH */
    uint64_t body_seen;     /* PHASE_BODY_CHUNKED: bytes discarded so far */
    struct http_chunked chunked;
    unsigned requests; /* answered on this connection */
};

/* One request being answered. */
struct reply {
    const struct http_request *req; /* NULL: the head was malformed */
    int minor;                      /* HTTP/1.minor of the request (1 when unknown) */
    bool head;                      /* HEAD: no body */
    bool keep_alive;                /* decided before the head is written */
    uint64_t start_ns;
    int status;          /* for the log and the counters */
    uint64_t body_bytes; /* body bytes queued */
    /* The file-cache reference the request holds, until a body segment
     * takes it over (saves a ref/release pair on the shared entry). */
    const struct http_file *ref;
};

/* What a response head says besides the status line, Date and Server. */
struct resp {
    int status;
    struct http_entity e;
    /* e's fields formatted beforehand (http_file.ok_fields), written in its place;
     * NULL: e is written. */
    const char *fields;
    size_t fields_len;
    const char *location; /* a decoded path, percent-encoded when written */
    size_t location_len;
    const char *query; /* appended to location after '?' (raw) */
    size_t query_len;
    bool allow;
    bool no_store;
    const char *body; /* a small body copied after the head (not for HEAD) */
    size_t body_len;
    /* A small file body copied into the head's buffer: file_len bytes
     * from file_data (the entry's content, from the offset) or else read
     * from file_fd at file_off. write_head sets file_done to what it
     * copied (a file that shrank meanwhile reads short: the caller sends
     * the rest with sendfile, which then fails and closes). */
    const char *file_data;
    int file_fd;
    uint64_t file_off;
    size_t file_len;
    size_t file_done;
};

/* ------------------------------------------------------------------ formatting */

/* The calling thread's Date value, formatted once per second. */
static __thread int64_t tl_date_sec = -1;
static __thread char tl_date[HTTP_DATE_LEN + 1];

static const char *date_now(int64_t *sec)
{
    /* The second of the request's event: no clock read per answer (even the
     * coarse clock's vDSO call was 2% of a small request's user samples). */
    int64_t now = cr_clock_event_wall_sec();

    if (now != tl_date_sec) {
        if (http_date_format(tl_date, now) == 0)
            memcpy(tl_date, "Thu, 01 Jan 1970 00:00:00 GMT", HTTP_DATE_LEN + 1);
        tl_date_sec = now;
    }
    *sec = tl_date_sec;
    return tl_date;
}

/* A status line with the head's fixed start, and its reason phrase within it. */
struct status_line {
    int status;
    const char *line; /* "HTTP/1.1 <status> <reason>\r\nServer: cabrank\r\nDate: " */
    unsigned char len;
    unsigned char reason_len;
};

/* A head's start for a status: the status line, Server and "Date: ". */
#define HEAD_START(code, why) "HTTP/1.1 " #code " " why "\r\nServer: cabrank\r\nDate: "
/* Where the reason phrase begins in it: after "HTTP/1.1 ", three digits and a space. */
#define REASON_AT (sizeof("HTTP/1.1 200 ") - 1)
#define STATUS_LINE(code, why)                                                                     \
    {                                                                                              \
        code, HEAD_START(code, why), (unsigned char)(sizeof(HEAD_START(code, why)) - 1),           \
            (unsigned char)(sizeof(why) - 1)                                                       \
    }

/* Whole lines, so that a head starts with one copy of a known length (no
 * number to format, no strlen). The last entry answers for any other status. */
static const struct status_line status_lines[] = {
    STATUS_LINE(200, "OK"),
    STATUS_LINE(206, "Partial Content"),
    STATUS_LINE(301, "Moved Permanently"),
    STATUS_LINE(304, "Not Modified"),
    STATUS_LINE(400, "Bad Request"),
    STATUS_LINE(403, "Forbidden"),
    STATUS_LINE(404, "Not Found"),
    STATUS_LINE(405, "Method Not Allowed"),
    STATUS_LINE(408, "Request Timeout"),
    STATUS_LINE(412, "Precondition Failed"),
    STATUS_LINE(414, "URI Too Long"),
    STATUS_LINE(416, "Range Not Satisfiable"),
    STATUS_LINE(431, "Request Header Fields Too Large"),
    STATUS_LINE(501, "Not Implemented"),
    STATUS_LINE(503, "Service Unavailable"),
    STATUS_LINE(505, "HTTP Version Not Supported"),
    STATUS_LINE(500, "Internal Server Error"),
};

static const struct status_line *status_line(int status)
{
    size_t last = sizeof(status_lines) / sizeof(status_lines[0]) - 1;

    for (size_t i = 0; i < last; i++) {
        if (status_lines[i].status == status)
            return &status_lines[i];
    }
    return &status_lines[last];
}

/* The reason phrase of a status, and its length. */
static const char *reason(int status, size_t *len)
{
    const struct status_line *sl = status_line(status);

    *len = sl->reason_len;
    return sl->line + REASON_AT;
}

/* Writes a decoded path percent-encoded: what is not a pchar or '/'. */
static void put_path_encoded(struct httpd_out *o, const char *s, size_t n)
{
    /* write_head reserved 3 bytes per path byte, plus the NUL it writes. */
    ssize_t len = http_path_encode(s, n, o->p, (size_t)(o->end - o->p));

    if (len > 0)
        o->p += len;
}

/*
 * Queues the response head of r (and its small body, unless HEAD) with one
 * reserve/commit. Says Connection: close and asks for a close after the
 * flush unless the reply keeps the connection alive. -ENOMEM.
 */
static int write_head(struct cr_conn *c, struct reply *rp, struct resp *r)
{
    size_t need = HEAD_RESERVE + r->fields_len + r->e.ctype_len + r->e.content_range_len +
                  3 * r->location_len + r->query_len + r->body_len + r->file_len;
    char *base = cr_conn_reserve(c, need);
    struct httpd_out o;
    int64_t sec;
    const char *date = date_now(&sec);
    const struct status_line *sl = status_line(r->status);

    if (base == NULL)
        return -ENOMEM;
    /* need is sized so o never fills; should that be wrong, o cuts rather than overruns. */
    o = (struct httpd_out){.p = base, .end = base + need};
    httpd_out_put(&o, sl->line, sl->len);
    httpd_out_put(&o, date, HTTP_DATE_LEN);
    if (r->fields != NULL)
        httpd_out_put(&o, r->fields, r->fields_len);
    else
        http_entity_put(&o, &r->e);
    if (r->location != NULL) {
        HTTPD_OUT_LIT(&o, "\r\nLocation: ");
        put_path_encoded(&o, r->location, r->location_len);
        if (r->query != NULL) {
            httpd_out_put(&o, "?", 1);
            httpd_out_put(&o, r->query, r->query_len);
        }
    }
    if (r->allow)
        HTTPD_OUT_LIT(&o, "\r\nAllow: " ALLOW);
    if (r->no_store)
        HTTPD_OUT_LIT(&o, "\r\nCache-Control: no-store");
    if (!rp->keep_alive)
        HTTPD_OUT_LIT(&o, "\r\nConnection: close");
    else if (rp->minor == 0)
        HTTPD_OUT_LIT(&o, "\r\nConnection: keep-alive");
    HTTPD_OUT_LIT(&o, "\r\n\r\n");
    if (r->body_len > 0 && !rp->head) {
        httpd_out_put(&o, r->body, r->body_len);
        rp->body_bytes += r->body_len;
    }
    if (r->file_len > 0 && r->file_data != NULL) {
        char *body = o.p;

        httpd_out_put(&o, r->file_data, r->file_len);
        r->file_done = (size_t)(o.p - body);
        rp->body_bytes += r->file_done;
    } else if (r->file_len > 0) {
        ssize_t n;

        do {
            n = pread(r->file_fd, o.p, r->file_len, (off_t)r->file_off);
        } while (n < 0 && errno == EINTR);
        r->file_done = n > 0 ? (size_t)n : 0;
        o.p += r->file_done;
        rp->body_bytes += r->file_done;
    }
    cr_conn_commit(c, (size_t)(o.p - base));
    rp->status = r->status;
    if (!rp->keep_alive)
        cr_conn_close_after_flush(c);
    return 0;
}

/* An error or redirect answer with a small HTML body. */
static int write_simple(struct cr_conn *c, struct reply *rp, struct resp *r)
{
    char body[256];
    struct httpd_out o = {.p = body, .end = body + sizeof(body)};
    size_t wlen;
    const char *why = reason(r->status, &wlen);

    HTTPD_OUT_LIT(&o, "<html><head><title>");
    httpd_out_u64(&o, (uint64_t)r->status);
    httpd_out_put(&o, " ", 1);
    httpd_out_put(&o, why, wlen);
    HTTPD_OUT_LIT(&o, "</title></head><body><h1>");
    httpd_out_u64(&o, (uint64_t)r->status);
    httpd_out_put(&o, " ", 1);
    httpd_out_put(&o, why, wlen);
    HTTPD_OUT_LIT(&o, "</h1><hr>cabrank</body></html>\n");
    r->e.ctype = "text/html; charset=utf-8";
    r->e.ctype_len = strlen(r->e.ctype);
    r->body = body;
    r->body_len = (size_t)(o.p - body);
    r->e.content_length = r->body_len;
    return write_head(c, rp, r);
}

static int write_error(struct cr_conn *c, struct reply *rp, int status)
{
    struct resp r = {.status = status, .allow = status == 405};

    return write_simple(c, rp, &r);
}

/* ------------------------------------------------------------------ requests */

/* Whether the connection comes from the loopback network. */
static bool is_loopback(struct cr_conn *c)
{
    const struct cr_conn_info *ci = cr_conn_info(c);

    if (ci->peer_len == 0)
        return false;
    if (ci->peer.ss_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)&ci->peer;

        return (ntohl(sin->sin_addr.s_addr) >> 24) == 127;
    }
    if (ci->peer.ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)&ci->peer)->sin6_addr;

        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return ci->peer.ss_family == AF_UNIX;
}

/*
 * The value of a list field that may be sent on several lines (first is
 * its first line), combined with ", " into a malloc'd *owned when it is
 * (rare); else the line's own value. *val NULL when absent. -ENOMEM.
 */
static int list_field(const struct http_request *req, const struct http_header *first,
                      const char **val, size_t *len, char **owned)
{
    const struct http_header *h;
    size_t total;
    char *p;

    *owned = NULL;
    *val = NULL;
    *len = 0;
    if (first == NULL)
        return 0;
    if (http_request_header_next(req, first) == NULL) {
        *val = first->value;
        *len = first->value_len;
        return 0;
    }
    total = 0;
    for (h = first; h != NULL; h = http_request_header_next(req, h))
        total += h->value_len + 2;
    p = malloc(total);
    if (p == NULL)
        return -ENOMEM;
    total = 0;
    for (h = first; h != NULL; h = http_request_header_next(req, h)) {
        if (h->value_len == 0)
            continue;
        if (total > 0) {
            memcpy(p + total, ", ", 2);
            total += 2;
        }
        memcpy(p + total, h->value, h->value_len);
        total += h->value_len;
    }
    *owned = p;
    *val = p;
    *len = total;
    return 0;
}

static void single_field(const struct http_header *h, const char **val, size_t *len)
{
    *val = h != NULL ? h->value : NULL;
    *len = h != NULL ? h->value_len : 0;
}

/* Whether the query (raw, after '?') has the parameter format=json. */
static bool wants_json(const char *q, size_t len)
{
    static const char key[] = "format=json";
    size_t klen = sizeof(key) - 1;
    size_t i = 0;

    while (q != NULL && i < len) {
        const char *amp = memchr(q + i, '&', len - i);
        size_t end = amp != NULL ? (size_t)(amp - q) : len;

        if (end - i == klen && memcmp(q + i, key, klen) == 0)
            return true;
        i = end + 1;
    }
    return false;
}

static void release_body(void *arg)
{
    free(arg);
}

static int serve_status(struct http_service *h, struct cr_conn *c, struct reply *rp,
                        const struct http_path *np)
{
    bool json = wants_json(np->query, np->query_len);
    struct resp r = {.status = 200, .no_store = true};
    char *body;
    size_t len;
    int err;

    if (!h->status_allow_remote && !is_loopback(c))
        return write_error(c, rp, 403);
    err = status_render(h->status, cr_conn_server(c), json, &body, &len);
    if (err < 0)
        return write_error(c, rp, 500);
    r.e.ctype = json ? "application/json" : "text/html; charset=utf-8";
    r.e.ctype_len = strlen(r.e.ctype);
    r.e.content_length = len;
    err = write_head(c, rp, &r);
    if (err < 0 || rp->head) {
        free(body);
        return err;
    }
    rp->body_bytes += len;
    return cr_conn_write_ref(c, body, len, release_body, body);
}

/* The status for an error of http_file_cache_get or http_path_normalize. */
static int error_status(int err)
{
    switch (err) {
    case -EBADMSG:
        return 400;
    case -ENOENT:
    case -ENOTDIR:
    case -ELOOP:
        return 404;
    case -EACCES:
        return 403;
    case -ENAMETOOLONG:
        return 414;
    case -EMFILE:
    case -ENFILE:
    case -ENOMEM:
        return 503;
    default:
        return 500;
    }
}

/* Queues len bytes of f's variant v from off, holding a reference to f for
 * the segment: the request's own for the first segment, a new one after. */
static int queue_file(struct cr_conn *c, struct reply *rp, const struct http_file *f,
                      const struct http_file_variant *v, uint64_t off, uint64_t len)
{
    if (rp->ref == f)
        rp->ref = NULL;
    else
        http_file_cache_ref(f);
    rp->body_bytes += len;
    return cr_conn_write_file(c, v->fd, (off_t)off, (size_t)len, http_file_cache_release,
                              (void *)f);
}

/* The multipart/byteranges body of plan: each part's header, then its bytes. */
static int queue_multipart(struct cr_conn *c, struct reply *rp, const struct http_file *f,
                           const struct http_file_variant *v, const struct http_file_plan *plan)
{
    size_t cap = HTTP_MULTIPART_PART_MAX(f->mime_len);
    char *p;
    size_t n;
    int err;

    for (unsigned i = 0; i < plan->ranges.n; i++) {
        const struct http_range *rg = &plan->ranges.r[i];

        p = cr_conn_reserve(c, cap);
        if (p == NULL)
            return -ENOMEM;
        n = http_multipart_part_header(p, cap, plan->boundary, f->mime, f->mime_len, rg, v->size);
        cr_conn_commit(c, n);
        rp->body_bytes += n;
        err = queue_file(c, rp, f, v, rg->first, rg->last - rg->first + 1);
        if (err < 0)
            return err;
    }
    p = cr_conn_reserve(c, HTTP_MULTIPART_TRAILER_LEN);
    if (p == NULL)
        return -ENOMEM;
    n = http_multipart_trailer(p, HTTP_MULTIPART_TRAILER_LEN, plan->boundary);
    cr_conn_commit(c, n);
    rp->body_bytes += n;
    return 0;
}

/* Whether req has none of the fields that can change the answer for f: validators,
 * Range, and Accept-Encoding where a ".gz" exists. Then the answer is a 200 with the
 * whole identity variant (If-Range without Range is ignored), decided without the
 * plan: most requests, and gathering the fields for the plan and running it was 187
 * instructions of wrk's request (bench/httpd_instructions.sh with and without). */
static bool is_unconditional(const struct http_request *req, const struct http_file *f)
{
    return req->if_none_match == NULL && req->if_match == NULL && req->if_modified_since == NULL &&
           req->if_unmodified_since == NULL && req->range == NULL &&
           (req->accept_encoding == NULL || !f->has_gz);
}

/* Per thread: varies multipart boundaries without a shared counter. */
static __thread uint64_t tl_boundary_seq;

/* Answers a GET or HEAD for f (rp->ref, which the caller releases unless a
 * body segment took it). */
static int serve_entry(struct cr_conn *c, struct reply *rp, const struct http_file *f)
{
    const struct http_request *req = rp->req;
    struct http_file_request frq;
    char *owned[3] = {NULL, NULL, NULL};
    const char *ae;
    size_t ae_len;
    bool gzip = false;
    const struct http_file_variant *v;
    struct http_validators val;
    struct http_file_plan plan;
    struct resp r = {.e.vary = f->has_gz};
    char crange[HTTP_CONTENT_RANGE_MAX];
    char ctype[96];
    uint64_t off = 0;
    uint64_t len = 0;
    int err;

    if (is_unconditional(req, f)) {
        v = &f->identity;
        plan.status = 200;
        plan.content_length = v->size;
        plan.ranges.n = 0;
    } else {
        frq = (struct http_file_request){.method = rp->head ? HTTP_FILE_HEAD : HTTP_FILE_GET};
        err = list_field(req, req->if_none_match, &frq.if_none_match, &frq.if_none_match_len,
                         &owned[0]);
        if (err == 0)
            err = list_field(req, req->if_match, &frq.if_match, &frq.if_match_len, &owned[1]);
        if (err == 0)
            err = list_field(req, req->accept_encoding, &ae, &ae_len, &owned[2]);
        if (err < 0)
            goto out;
        single_field(req->if_modified_since, &frq.if_modified_since, &frq.if_modified_since_len);
        single_field(req->if_unmodified_since, &frq.if_unmodified_since,
                     &frq.if_unmodified_since_len);
        single_field(req->if_range, &frq.if_range, &frq.if_range_len);
        single_field(req->range, &frq.range, &frq.range_len);
        if (f->has_gz && f->gz.fd >= 0 && ae != NULL)
            gzip = http_accepts_gzip(ae, ae_len);
        v = gzip ? &f->gz : &f->identity;
        val = (struct http_validators){
            .etag = v->etag, .etag_len = v->etag_len, .mtime = v->mtime, .size = v->size};
        http_file_plan(&plan, &frq, &val, f->mime_len,
                       (uintptr_t)c ^ (++tl_boundary_seq << 32) ^ (uint64_t)tl_date_sec);
    }
    r.status = plan.status;
    switch (plan.status) {
    case 200:
    case 206:
        if (plan.status == 200 && v == &f->identity) {
            /* The whole identity variant: the fields the entry formatted for it. */
            r.fields = f->ok_fields;
            r.fields_len = f->ok_fields_len;
        } else {
            r.e.validators = v->validator_fields;
            r.e.validators_len = v->validator_fields_len;
            r.e.gzip = gzip;
            r.e.accept_ranges = true;
            r.e.content_length = plan.content_length;
            r.e.ctype = f->mime;
            r.e.ctype_len = f->mime_len;
        }
        if (plan.status == 206 && plan.ranges.n == 1) {
            r.e.content_range_len =
                http_content_range_format(crange, sizeof(crange), &plan.ranges.r[0], v->size);
            r.e.content_range = crange;
        } else if (plan.status == 206) {
            int n =
                snprintf(ctype, sizeof(ctype), "multipart/byteranges; boundary=%s", plan.boundary);

            r.e.ctype = ctype;
            r.e.ctype_len = n > 0 && (size_t)n < sizeof(ctype) ? (size_t)n : 0;
        }
        if (!rp->head && plan.ranges.n <= 1) {
            off = plan.status == 206 ? plan.ranges.r[0].first : 0;
            len = plan.status == 206 ? plan.ranges.r[0].last - off + 1 : v->size;
            /* A small body goes in the head's buffer: one send for both,
             * and one packet, instead of a send and a sendfile. The
             * entry's copy (our reference keeps it) saves the pread; its
             * bytes, length and validators are of one version. */
            if (len <= INLINE_BODY_MAX) {
                r.file_data = v->content != NULL ? v->content + off : NULL;
                r.file_fd = v->fd;
                r.file_off = off;
                r.file_len = (size_t)len;
            }
        }
        err = write_head(c, rp, &r);
        if (err < 0 || rp->head)
            break;
        if (plan.ranges.n > 1)
            err = queue_multipart(c, rp, f, v, &plan);
        else if (r.file_done < len)
            err = queue_file(c, rp, f, v, off + r.file_done, len - r.file_done);
        break;
    case 304:
        r.e.validators = v->validator_fields;
        r.e.validators_len = v->validator_fields_len;
        r.e.gzip = gzip;
        r.e.content_length = v->size;
        err = write_head(c, rp, &r);
        break;
    case 416:
        r.e.content_range_len = http_content_range_format(crange, sizeof(crange), NULL, v->size);
        r.e.content_range = crange;
        err = write_simple(c, rp, &r);
        break;
    default: /* 412 */
        err = write_simple(c, rp, &r);
        break;
    }
out:
    /* Only a conditional request owns copies: the usual one makes no call. */
    for (int i = 0; i < 3; i++) {
        if (owned[i] != NULL)
            free(owned[i]);
    }
    return err;
}

/* GET and HEAD: the status page, or a file beneath the root. */
static int serve_get(struct http_service *h, struct cr_conn *c, struct reply *rp)
{
    const struct http_request *req = rp->req;
    char path[HTTP_PATH_MAX];
    struct http_path np;
    const struct http_file *f;
    int err;

    err = http_path_normalize(req->target, req->target_len, path, sizeof(path), &np);
    if (err < 0)
        return write_error(c, rp, error_status(err));
    if (h->status_path != NULL && np.len == h->status_path_len &&
        memcmp(path, h->status_path, np.len) == 0)
        return serve_status(h, c, rp, &np);
    err = http_file_cache_get(h->cache, path, np.len, &f);
    if (err == -EISDIR) {
        struct resp r = {.status = 301, .location = path, .location_len = np.len + 1};

        if (np.len + 1 >= sizeof(path))
            return write_error(c, rp, 414);
        path[np.len] = '/';
        r.query = np.query;
        r.query_len = np.query_len;
        return write_simple(c, rp, &r);
    }
    if (err < 0) {
        if (error_status(err) >= 500)
            CR_LOG(CR_LOG_WARN, "opening %s: %s", path, strerror(-err));
        return write_error(c, rp, error_status(err));
    }
    rp->ref = f;
    err = serve_entry(c, rp, f);
    if (rp->ref != NULL)
        http_file_cache_release((void *)rp->ref);
    rp->ref = NULL;
    return err;
}

/* Counts the answered request and logs it. */
static void finish(struct http_service *h, struct cr_conn *c, const struct reply *rp,
                   const char *head, size_t head_len)
{
    unsigned worker = cr_conn_worker(c);

    cr_conn_request_done(c);
    status_record(h->status, worker, rp->status, rp->body_bytes, cr_clock_end_ns() - rp->start_ns);
    if (h->log != NULL) {
        const struct http_request *req = rp->req;
        struct access_log_entry e = {
            .peer = (const struct sockaddr *)&cr_conn_info(c)->peer,
            .version_minor = -1,
            .status = rp->status,
            .bytes = rp->body_bytes,
        };
        int64_t sec;

        (void)date_now(&sec);
        e.time_sec = sec;
        if (cr_conn_info(c)->peer_len == 0)
            e.peer = NULL;
        if (req != NULL) {
            e.method = req->method;
            e.method_len = req->method_len;
            e.target = req->target;
            e.target_len = req->target_len;
            e.version_minor = req->minor_version;
            if (req->referer != NULL) {
                e.referer = req->referer->value;
                e.referer_len = req->referer->value_len;
            }
            if (req->user_agent != NULL) {
                e.user_agent = req->user_agent->value;
                e.user_agent_len = req->user_agent->value_len;
            }
        } else if (head_len > 0) {
            /* A malformed request: log its first line as far as it is text. */
            size_t n = 0;

            while (n < head_len && n < 256 && head[n] != '\r' && head[n] != '\n')
                n++;
            e.method = head;
            e.method_len = n;
        }
        access_log_append(h->log, worker, &e);
    }
}

/* Answers one parsed request and sets up discarding its body, if any. */
static int serve(struct http_service *h, struct http_conn *hc, struct cr_conn *c,
                 const struct http_request *req, uint64_t start_ns)
{
    struct reply rp = {
        .req = req,
        .minor = req->minor_version,
        .head = req->method_id == HTTP_METHOD_HEAD,
        .keep_alive = req->keep_alive,
        .start_ns = start_ns,
    };
    bool has_body = req->is_chunked || req->content_length > 0;
    int err;

    hc->requests++;
    if (hc->requests >= h->max_requests)
        rp.keep_alive = false;
    if (has_body) {
        const struct http_header *expect = http_request_header(req, "Expect");

        /* A body we would read only to drop, too long to be worth it; or one
         * a client waits to send until we say 100 Continue, which we never
         * will: answer and close instead. */
        if (req->content_length > HTTP_BODY_DISCARD_MAX || expect != NULL)
            rp.keep_alive = false;
    }
    switch (req->method_id) {
    case HTTP_METHOD_GET:
    case HTTP_METHOD_HEAD:
        err = serve_get(h, c, &rp);
        break;
    case HTTP_METHOD_OPTIONS: {
        struct resp r = {.status = 200, .allow = true};

        err = write_head(c, &rp, &r);
        break;
    }
    default:
        err = write_error(c, &rp, 405);
        break;
    }
    if (err < 0)
        return err;
    finish(h, c, &rp, NULL, 0);
    if (rp.keep_alive && has_body) {
        if (req->is_chunked) {
            hc->phase = PHASE_BODY_CHUNKED;
            memset(&hc->chunked, 0, sizeof(hc->chunked));
            hc->body_seen = 0;
        } else {
            hc->phase = PHASE_BODY_LENGTH;
            hc->body_left = (uint64_t)req->content_length;
        }
    }
    return 0;
}

/* Sets the input timeout for what the connection waits for now, counted
 * from now (cr_clock_event_ns(): no handler here blocks for long enough to
 * matter against timeouts of seconds). */
static void arm_timeout(const struct http_service *h, const struct http_conn *hc, struct cr_conn *c,
                        uint64_t now)
{
    if (hc->phase != PHASE_HEAD) {
        cr_conn_set_input_timeout_since(c, h->body_timeout_ms, now);
    } else if (hc->head_start_ns != 0) {
        uint64_t spent = now - hc->head_start_ns;
        uint64_t left = spent < h->header_timeout_ns ? h->header_timeout_ns - spent : 0;

        cr_conn_set_input_timeout_since(c, left / CR_NSEC_PER_MSEC + 1, now);
    } else {
        cr_conn_set_input_timeout_since(c,
                                        hc->requests == 0 ? h->header_timeout_ns / CR_NSEC_PER_MSEC
                                                          : h->keepalive_timeout_ms,
                                        now);
    }
}

/* Discards body bytes of the current request. Bytes consumed or -errno. */
static ssize_t consume_body(struct http_conn *hc, struct cr_conn *c, const char *data, size_t len)
{
    if (hc->phase == PHASE_BODY_LENGTH) {
        size_t take = hc->body_left < len ? (size_t)hc->body_left : len;

        hc->body_left -= take;
        if (hc->body_left == 0)
            hc->phase = PHASE_HEAD;
        return (ssize_t)take;
    }

    bool done = false;
    ssize_t n = http_chunked_consume(&hc->chunked, data, len, &done);

    if (n < 0) {
        /* Its answer is out already; the framing is lost, so close. */
        cr_conn_close_after_flush(c);
        return -EBADMSG;
    }
    hc->body_seen += (uint64_t)n;
    if (done) {
        hc->phase = PHASE_HEAD;
    } else if (hc->body_seen > HTTP_BODY_DISCARD_MAX) {
        cr_conn_close_after_flush(c);
        return -EMSGSIZE;
    }
    return n;
}

/* ------------------------------------------------------------------ cr_service */

static int http_open(void *ctx, struct cr_conn *c, void **state)
{
    struct http_service *h = ctx;
    struct http_conn *hc = calloc(1, sizeof(*hc));

    if (hc == NULL)
        return -ENOMEM;
    cr_conn_set_send_timeout(c, h->send_timeout_ms);
    arm_timeout(h, hc, c, cr_clock_event_ns());
    *state = hc;
    return 0;
}

static ssize_t http_input(void *ctx, void *state, struct cr_conn *c, const char *data, size_t len)
{
    struct http_service *h = ctx;
    struct http_conn *hc = state;
    struct http_header headers[HEADERS_CAP];
    struct http_request req;            /* http_parse_request sets every field (no zeroing twice) */
    uint64_t now = cr_clock_event_ns(); /* the head's start and the timeouts */
    uint64_t start;
    int status = 0;
    ssize_t n;
    int err;

    if (hc->phase != PHASE_HEAD) {
        n = consume_body(hc, c, data, len);
        if (n >= 0)
            arm_timeout(h, hc, c, now);
        return n;
    }
    if (hc->head_start_ns == 0)
        hc->head_start_ns = now;
    req.headers = headers;
    req.headers_cap = HEADERS_CAP;
    n = http_parse_request(data, len, &req, &h->limits, &status);
    if (n == -EAGAIN) {
        /* The deadline is fixed; more bytes do not move it. */
        if (now - hc->head_start_ns >= h->header_timeout_ns)
            return -ETIMEDOUT;
        arm_timeout(h, hc, c, now);
        return 0;
    }
    start = hc->head_start_ns;
    hc->head_start_ns = 0;
    if (n < 0) {
        struct reply rp = {.minor = 1, .start_ns = start};

        CR_LOG(CR_LOG_DEBUG, "malformed request: %d", status);
        err = write_error(c, &rp, status != 0 ? status : 400);
        if (err < 0)
            return err;
        finish(h, c, &rp, data, len);
        return -EBADMSG; /* write_error asked for a close after the flush */
    }
    err = serve(h, hc, c, &req, start);
    if (err < 0)
        return err;
    arm_timeout(h, hc, c, now);
    return n;
}

static void http_drained(void *ctx, void *state, struct cr_conn *c)
{
    /* The answer is out: the keep-alive (or body, or head) wait starts now. */
    arm_timeout(ctx, state, c, cr_clock_event_ns());
}

static void http_close(void *ctx, void *state)
{
    CR_UNUSED(ctx);
    free(state);
}

/* A new worker process (process models): fork left the access log without
 * a flusher in this process; start one. */
static int http_process_init(void *ctx)
{
    struct http_service *h = ctx;

    return access_log_after_fork(h->log);
}

/* The worker process exits: write what its access log buffered. */
static void http_process_exit(void *ctx)
{
    struct http_service *h = ctx;

    access_log_before_exit(h->log);
}

/* ------------------------------------------------------------------ lifecycle */

/* What a configuration opens: the root, the MIME table, the file cache and
 * the status path. Built apart so a reconfiguration can fail whole. */
struct parts {
    int root_fd;
    struct http_mime *mime;
    struct http_file_cache *cache;
    char *status_path; /* NULL: no status page */
};

static void parts_free(struct parts *p)
{
    free(p->status_path);
    http_file_cache_destroy(p->cache);
    http_mime_destroy(p->mime);
    if (p->root_fd >= 0)
        close(p->root_fd);
}

static int parts_open(struct parts *p, const struct http_service_config *cfg)
{
    struct http_file_cache_config fcc = {0};
    const char *sp = cfg->status_path != NULL ? cfg->status_path : HTTP_STATUS_PATH_DEFAULT;
    int err;

    *p = (struct parts){.root_fd = -1};
    p->root_fd = open(cfg->root != NULL ? cfg->root : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (p->root_fd < 0)
        return -errno;
    err = http_mime_create(&p->mime, cfg->mime_types);
    if (err < 0)
        goto out_free;
    fcc.root_fd = p->root_fd;
    fcc.mime = p->mime;
    fcc.max_entries = (unsigned)cfg->file_cache_entries;
    fcc.gzip_static = true;
    fcc.follow_outside_symlinks = cfg->allow_outside_symlinks;
    fcc.content_max = INLINE_BODY_MAX;
    err = http_file_cache_create(&p->cache, &fcc);
    if (err < 0)
        goto out_free;
    if (sp[0] != '\0') {
        p->status_path = strdup(sp);
        if (p->status_path == NULL) {
            err = -ENOMEM;
            goto out_free;
        }
    }
    return 0;

out_free:
    parts_free(p);
    return err;
}

/* Installs p and the plain settings of cfg into h; returns the old parts in
 * *old. The caller excludes readers (create: none yet; reconfigure: the
 * process serves nothing and holds fork_lock). */
static void apply(struct http_service *h, struct parts *p, const struct http_service_config *cfg,
                  struct parts *old)
{
    *old = (struct parts){
        .root_fd = h->root_fd, .mime = h->mime, .cache = h->cache, .status_path = h->status_path};
    h->root_fd = p->root_fd;
    h->mime = p->mime;
    h->cache = p->cache;
    h->status_path = p->status_path;
    h->status_path_len = p->status_path != NULL ? strlen(p->status_path) : 0;
    h->log = cfg->log;
    h->header_timeout_ns =
        (cfg->header_timeout_ms != 0 ? cfg->header_timeout_ms : HTTP_HEADER_TIMEOUT_MS_DEFAULT) *
        CR_NSEC_PER_MSEC;
    h->body_timeout_ms =
        cfg->body_timeout_ms != 0 ? cfg->body_timeout_ms : HTTP_BODY_TIMEOUT_MS_DEFAULT;
    h->keepalive_timeout_ms = cfg->keepalive_timeout_ms != 0 ? cfg->keepalive_timeout_ms
                                                             : HTTP_KEEPALIVE_TIMEOUT_MS_DEFAULT;
    h->send_timeout_ms =
        cfg->send_timeout_ms != 0 ? cfg->send_timeout_ms : HTTP_SEND_TIMEOUT_MS_DEFAULT;
    h->max_requests = cfg->max_requests != 0 ? cfg->max_requests : HTTP_MAX_REQUESTS_DEFAULT;
    h->limits = cfg->limits;
    h->status_allow_remote = cfg->status_allow_remote;
}

/*
 * Held while a reconfiguration swaps the service's fields, and by the fork
 * handlers around every fork of the process: a worker forked by the
 * model's manager thread while the main thread reconfigures (SIGHUP) gets
 * the old configuration whole or the new one whole, never half of each.
 */
static pthread_mutex_t fork_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void)
{
    pthread_mutex_lock(&fork_lock);
}

static void fork_release(void)
{
    pthread_mutex_unlock(&fork_lock);
}

static void register_fork_handlers(void)
{
    (void)pthread_atfork(fork_prepare, fork_release, fork_release);
}

int http_service_create(struct http_service **out, const struct http_service_config *cfg)
{
    struct http_service *h;
    struct parts p;
    struct parts none;
    int err;

    *out = NULL;
    pthread_once(&fork_once, register_fork_handlers);
    h = calloc(1, sizeof(*h));
    if (h == NULL)
        return -ENOMEM;
    err = parts_open(&p, cfg);
    if (err < 0)
        goto out_free;
    err = status_create(&h->status, cfg->workers);
    if (err < 0)
        goto out_parts;
    apply(h, &p, cfg, &none);
    h->svc = (struct cr_service){
        .name = "http",
        .ctx = h,
        .open = http_open,
        .input = http_input,
        .drained = http_drained,
        .close = http_close,
        .process_init = http_process_init,
        .process_exit = http_process_exit,
    };
    *out = h;
    return 0;

out_parts:
    parts_free(&p);
out_free:
    free(h);
    return err;
}

int http_service_reconfigure(struct http_service *h, const struct http_service_config *cfg)
{
    struct parts p;
    struct parts old;
    int err;

    err = parts_open(&p, cfg);
    if (err < 0)
        return err;
    pthread_mutex_lock(&fork_lock);
    apply(h, &p, cfg, &old);
    pthread_mutex_unlock(&fork_lock);
    parts_free(&old);
    return 0;
}

void http_service_destroy(struct http_service *h)
{
    if (h == NULL)
        return;
    struct parts p = {
        .root_fd = h->root_fd, .mime = h->mime, .cache = h->cache, .status_path = h->status_path};

    status_destroy(h->status);
    parts_free(&p);
    free(h);
}

const struct cr_service *http_service_get(struct http_service *h)
{
    return &h->svc;
}

uint64_t http_service_requests(const struct http_service *h)
{
    struct status_totals t;

    status_sum(h->status, &t);
    return t.requests;
}
