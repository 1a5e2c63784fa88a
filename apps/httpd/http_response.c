/*
 * http_response.c - cabrank-httpd's response heads (http_response.h): the
 * status line with Server and Date from a table of whole lines, the entity
 * and connection fields, a small body or small file copied after the head,
 * and the short HTML body of an error or redirect. Called by the service
 * (http_service.c) and the file server (http_serve_file.c) on the serving
 * thread of the connection; formats in place with cr_conn_reserve/commit and
 * allocates nothing. The Date value is cached per thread, once per second.
 */
#include "http_response.h"

#include <cabrank/clock.h>

#include "http_path.h"
#include "out_buf.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* Room for a response head's fixed fields; variable ones are added. */
#define HEAD_RESERVE 768
#define ALLOW        "GET, HEAD, OPTIONS"

/* The calling thread's Date value, formatted once per second. */
static __thread int64_t tl_date_sec = -1;
static __thread char tl_date[HTTP_DATE_LEN + 1];

const char *http_response_date(int64_t *sec)
{
    /* The second of the request's event: no clock read per answer. */
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
    /* http_response_head reserved 3 bytes per path byte, plus the NUL it writes. */
    ssize_t len = http_path_encode(s, n, o->p, (size_t)(o->end - o->p));

    if (len > 0)
        o->p += len;
}

/*
 * Queues the response head of r (and its small body, unless HEAD) with one
 * reserve/commit. Says Connection: close and asks for a close after the
 * flush unless the reply keeps the connection alive. -ENOMEM.
 */
int http_response_head(struct cr_conn *c, struct reply *rp, struct resp *r)
{
    size_t need = HEAD_RESERVE + r->fields_len + r->e.ctype_len + r->e.content_range_len +
                  3 * r->location_len + r->query_len + r->body_len + r->file_len;
    char *base = cr_conn_reserve(c, need);
    struct httpd_out o;
    int64_t sec;
    const char *date = http_response_date(&sec);
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
int http_response_simple(struct cr_conn *c, struct reply *rp, struct resp *r)
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
    return http_response_head(c, rp, r);
}

int http_response_error(struct cr_conn *c, struct reply *rp, int status)
{
    struct resp r = {.status = status, .allow = status == 405};

    return http_response_simple(c, rp, &r);
}
