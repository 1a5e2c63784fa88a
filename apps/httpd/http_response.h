/*
 * http_response.h - formatting cabrank-httpd's responses in place, for the
 * service (http_service.c) and the file server (http_serve_file.c): a reply
 * (the request being answered and what it has sent) and a resp (what one
 * head says). Every function runs on the connection's serving thread and
 * queues on that connection only. Internal to apps/httpd.
 */
#ifndef CABRANK_HTTPD_HTTP_RESPONSE_H
#define CABRANK_HTTPD_HTTP_RESPONSE_H

#include <cabrank/service.h>

#include "http_file.h"
#include "http_parser.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* File bodies up to this are copied into the response's buffer and sent with
 * its head; larger ones go out with sendfile. Also the size up to which the
 * file cache keeps a file's content. */
#define INLINE_BODY_MAX (16 * 1024)

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

/* The calling thread's Date value (HTTP_DATE_LEN bytes, not NUL-terminated
 * for the head's use, though it is), formatted once per second; its second
 * in *sec. */
const char *http_response_date(int64_t *sec);

/*
 * Queues the response head of r (and its small body, unless HEAD) with one
 * reserve/commit. Says Connection: close and asks for a close after the
 * flush unless the reply keeps the connection alive. Sets rp->status and
 * adds the body bytes it copied to rp->body_bytes. 0 or -ENOMEM.
 */
int http_response_head(struct cr_conn *c, struct reply *rp, struct resp *r);

/* An error or redirect answer of r->status with a small HTML body. 0 or -ENOMEM. */
int http_response_simple(struct cr_conn *c, struct reply *rp, struct resp *r);

/* The error answer of status (Allow too for a 405). 0 or -ENOMEM. */
int http_response_error(struct cr_conn *c, struct reply *rp, int status);

#endif /* CABRANK_HTTPD_HTTP_RESPONSE_H */
