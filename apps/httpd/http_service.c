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
 * Responses are formatted by http_response.c and files answered by
 * http_serve_file.c; this file routes a request (file, status page, OPTIONS,
 * other methods) and keeps the connection's phase. Nothing is allocated per
 * request except for the status page and for list fields sent on several
 * lines (http_serve_file.c).
 *
 * Each connection's row in the status page's connection view (status.h)
 * lives in its state here; it is written under a shard lock at open, close,
 * a request's start (its line), a partial head after an idle spell, and the
 * end of the answer (drained), never elsewhere on the request path; not
 * at all when the status page is off.
 */
#include "http_service.h"

#include <cabrank/clock.h>
#include <cabrank/log.h>
#include <cabrank/service.h>

#include "file_cache.h"
#include "http_file.h"
#include "http_path.h"
#include "http_response.h"
#include "http_serve_file.h"
#include "mime.h"
#include "status.h"
#include "status_timeline.h"

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
    uint64_t arrived_ns;    /* the connection's open: the first head's timeout counts from it */
    uint64_t body_left;     /* PHASE_BODY_LENGTH */
    uint64_t body_seen;     /* PHASE_BODY_CHUNKED: bytes discarded so far */
    struct http_chunked chunked;
    unsigned requests;      /* answered on this connection */
    bool listed;            /* row is in the status page's registry (the page is on) */
    struct status_conn row; /* while listed */
};

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

/* The metrics path, served (Prometheus text) wherever the status page is on. */
static const char metrics_path[] = "/metrics";

/*
 * The format of a status request: the query's format= parameter (raw,
 * after '?': html, json or prometheus; the last one given counts), html
 * without one, and prometheus for the metrics path whatever its query.
 * -1 for a format we do not know.
 */
static int status_format(const char *path, size_t path_len, const char *q, size_t len)
{
    static const char *const names[] = {
        [STATUS_HTML] = "html", [STATUS_JSON] = "json", [STATUS_PROMETHEUS] = "prometheus"};
    const char *v;
    size_t vlen;

    if (path_len == sizeof(metrics_path) - 1 && memcmp(path, metrics_path, path_len) == 0)
        return STATUS_PROMETHEUS;
    if (!http_query_param(q, len, "format", &v, &vlen))
        return STATUS_HTML;
    for (unsigned k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        if (vlen == strlen(names[k]) && memcmp(v, names[k], vlen) == 0)
            return (int)k;
    }
    return -1;
}

/* Whether path (normalized, len bytes) is the status page's or the metrics'. */
static bool is_status_path(const struct http_service *h, const char *path, size_t len)
{
    if (h->status_path == NULL)
        return false;
    return (len == h->status_path_len && memcmp(path, h->status_path, len) == 0) ||
           (len == sizeof(metrics_path) - 1 && memcmp(path, metrics_path, len) == 0);
}

static void release_body(void *arg)
{
    free(arg);
}

/* A 200 with body (taken: freed once sent), never stored by caches. */
static int send_generated(struct cr_conn *c, struct reply *rp, const char *ctype, char *body,
                          size_t len)
{
    struct resp r = {.status = 200, .no_store = true};
    int err;

    r.e.ctype = ctype;
    r.e.ctype_len = strlen(r.e.ctype);
    r.e.content_length = len;
    err = http_response_head(c, rp, &r);
    if (err < 0 || rp->head) {
        free(body);
        return err;
    }
    rp->body_bytes += len;
    return cr_conn_write_ref(c, body, len, release_body, body);
}

static int serve_status(struct http_service *h, struct cr_conn *c, struct reply *rp,
                        const char *path, const struct http_path *np)
{
    static const char *const ctypes[] = {
        [STATUS_HTML] = "text/html; charset=utf-8",
        [STATUS_JSON] = "application/json",
        [STATUS_PROMETHEUS] = "text/plain; version=0.0.4; charset=utf-8",
    };
    static const char unknown[] = "unknown format; the formats are html, json, prometheus\n";
    int f = status_format(path, np->len, np->query, np->query_len);
    char *body;
    size_t len;
    int err;

    if (!h->status_allow_remote && !is_loopback(c))
        return http_response_error(c, rp, 403);
    if (f < 0) {
        struct resp r = {.status = 400, .no_store = true};

        r.e.ctype = "text/plain; charset=utf-8";
        r.e.ctype_len = strlen(r.e.ctype);
        r.e.content_length = sizeof(unknown) - 1;
        r.body = unknown;
        r.body_len = sizeof(unknown) - 1;
        return http_response_head(c, rp, &r);
    }
    err = status_render(h->status, cr_conn_server(c), (enum status_format)f, &body, &len);
    if (err < 0)
        return http_response_error(c, rp, 500);
    return send_generated(c, rp, ctypes[f], body, len);
}

/* <status path>/timeline: the timeline's JSON (status_timeline.h). */
static int serve_timeline(struct http_service *h, struct cr_conn *c, struct reply *rp,
                          const struct http_path *np)
{
    char *body;
    size_t len;
    int err;

    if (!h->status_allow_remote && !is_loopback(c))
        return http_response_error(c, rp, 403);
    err = status_timeline_render(cr_conn_server(c), np->query, np->query_len, &body, &len);
    if (err < 0)
        return http_response_error(c, rp, err == -ENOENT ? 404 : err == -EINVAL ? 400 : 500);
    return send_generated(c, rp, "application/json", body, len);
}

/* Whether path (normalized, len bytes) is the status path's timeline. */
static bool is_timeline_path(const struct http_service *h, const char *path, size_t len)
{
    static const char suffix[] = "/timeline";
    size_t n = sizeof(suffix) - 1;

    return h->status_path != NULL && len == h->status_path_len + n &&
           memcmp(path, h->status_path, h->status_path_len) == 0 &&
           memcmp(path + h->status_path_len, suffix, n) == 0;
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
        return http_response_error(c, rp, error_status(err));
    if (is_status_path(h, path, np.len))
        return serve_status(h, c, rp, path, &np);
    if (is_timeline_path(h, path, np.len))
        return serve_timeline(h, c, rp, &np);
    err = http_file_cache_get(h->cache, path, np.len, &f);
    if (err == -EISDIR) {
        struct resp r = {.status = 301, .location = path, .location_len = np.len + 1};

        if (np.len + 1 >= sizeof(path))
            return http_response_error(c, rp, 414);
        path[np.len] = '/';
        r.query = np.query;
        r.query_len = np.query_len;
        return http_response_simple(c, rp, &r);
    }
    if (err < 0) {
        if (error_status(err) >= 500)
            CR_LOG(CR_LOG_WARN, "opening %s: %s", path, strerror(-err));
        return http_response_error(c, rp, error_status(err));
    }
    rp->ref = f;
    err = http_serve_file(c, rp, f);
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

        (void)http_response_date(&sec);
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

        err = http_response_head(c, &rp, &r);
        break;
    }
    default:
        err = http_response_error(c, &rp, 405);
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

/* Where the header timeout of the head being read counts from: the
 * connection's arrival for the first (the time it waited for a thread or a
 * process counts, as does a first byte sent late), the head's first byte
 * for later ones (the keep-alive timeout covers the wait before it). */
static uint64_t head_origin(const struct http_conn *hc)
{
    return hc->requests == 0 ? hc->arrived_ns : hc->head_start_ns;
}

/* Sets the input timeout for what the connection waits for now, counted
 * from now (cr_clock_event_ns(): no handler here blocks for long enough to
 * matter against timeouts of seconds). */
static void arm_timeout(const struct http_service *h, const struct http_conn *hc, struct cr_conn *c,
                        uint64_t now)
{
    if (hc->phase != PHASE_HEAD) {
        cr_conn_set_input_timeout_since(c, h->body_timeout_ms, now);
    } else if (hc->head_start_ns != 0 || hc->requests == 0) {
        uint64_t spent = now > head_origin(hc) ? now - head_origin(hc) : 0;
        uint64_t left = spent < h->header_timeout_ns ? h->header_timeout_ns - spent : 0;

        cr_conn_set_input_timeout_since(c, left / CR_NSEC_PER_MSEC + 1, now);
    } else {
        cr_conn_set_input_timeout_since(c, h->keepalive_timeout_ms, now);
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
    hc->arrived_ns = cr_clock_event_ns();
    /* No status page, no connection view: its cost is off too. */
    hc->listed = h->status_path != NULL;
    if (hc->listed)
        status_conn_open(h->status, &hc->row, cr_conn_worker(c),
                         (const struct sockaddr *)&cr_conn_info(c)->peer, cr_conn_info(c)->peer_len,
                         hc->arrived_ns);
    arm_timeout(h, hc, c, hc->arrived_ns);
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
        if (now - head_origin(hc) >= h->header_timeout_ns)
            return -ETIMEDOUT;
        /* The row's state is written by this thread only: read unlocked. */
        if (hc->listed && hc->row.state != STATUS_CONN_READING)
            status_conn_set(h->status, &hc->row, STATUS_CONN_READING, hc->head_start_ns);
        arm_timeout(h, hc, c, now);
        return 0;
    }
    start = hc->head_start_ns;
    hc->head_start_ns = 0;
    if (n < 0) {
        struct reply rp = {.minor = 1, .start_ns = start};

        CR_LOG(CR_LOG_DEBUG, "malformed request: %d", status);
        err = http_response_error(c, &rp, status != 0 ? status : 400);
        if (err < 0)
            return err;
        finish(h, c, &rp, data, len);
        return -EBADMSG; /* http_response_error asked for a close after the flush */
    }
    if (hc->listed)
        status_conn_request(h->status, &hc->row, req.method, req.method_len, req.target,
                            req.target_len, req.minor_version, now);
    err = serve(h, hc, c, &req, start);
    if (err < 0)
        return err;
    arm_timeout(h, hc, c, now);
    return n;
}

static void http_drained(void *ctx, void *state, struct cr_conn *c)
{
    struct http_service *h = ctx;
    struct http_conn *hc = state;
    uint64_t now = cr_clock_event_ns();

    /* The answer is out: the keep-alive (or body, or head) wait starts now. */
    if (hc->listed && hc->row.state == STATUS_CONN_WRITING)
        status_conn_set(h->status, &hc->row,
                        hc->phase == PHASE_HEAD && hc->head_start_ns == 0 ? STATUS_CONN_KEEPALIVE
                                                                          : STATUS_CONN_READING,
                        now);
    arm_timeout(h, hc, c, now);
}

static void http_close(void *ctx, void *state)
{
    struct http_service *h = ctx;
    struct http_conn *hc = state;

    if (hc->listed)
        status_conn_close(h->status, &hc->row);
    free(hc);
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
