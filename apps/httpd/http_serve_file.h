/*
 * http_serve_file.h - answering a GET or HEAD for a file of the document
 * root (http_serve_file.c), for the service (http_service.c) on the
 * connection's serving thread. Internal to apps/httpd.
 */
#ifndef CABRANK_HTTPD_HTTP_SERVE_FILE_H
#define CABRANK_HTTPD_HTTP_SERVE_FILE_H

#include "http_response.h"

/*
 * Answers rp's request (a GET or HEAD) for f: conditionals, ranges and the
 * gzip variant decide a 200, 206, 304, 412 or 416. f is rp->ref, which the
 * caller releases unless a body segment took it over (rp->ref is then
 * NULL). 0 or -errno (-ENOMEM).
 */
int http_serve_file(struct cr_conn *c, struct reply *rp, const struct http_file *f);

#endif /* CABRANK_HTTPD_HTTP_SERVE_FILE_H */
