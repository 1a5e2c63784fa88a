/*
 * http_service.h - cabrank-httpd's HTTP/1.1 static-file service: a struct
 * cr_service (service.h) that any model runs. It parses requests
 * (http_parser.h), maps targets to files beneath the document root
 * (http_path.h, file_cache.h), answers GET and HEAD with the file semantics of
 * http_file.h (conditionals, ranges, precompressed .gz), OPTIONS with Allow,
 * other methods with 405, and serves the status page (status.h). Bodies go
 * out with cr_conn_write_file (sendfile where the model can); response heads
 * are formatted in place with cr_conn_reserve/commit, so a request answered
 * at once allocates nothing.
 *
 * Per connection: keep-alive (1.1 by default, 1.0 on request), pipelined
 * requests answered in order, a cap on requests per connection, a request
 * head timeout counted as a total from the head's first byte (a trickling
 * client cannot extend it), a keep-alive idle timeout between requests, a
 * body timeout while a request body is read and discarded, and a send
 * timeout.
 *
 * Threads: the service object is shared by every serving thread and is
 * read-only after create apart from its counters (status.h) and the access
 * log (access_log.h), which are thread-safe.
 *
 * Process models (forking, prefork): the service runs in worker processes.
 * Its process_init hook starts the access log's flusher in each new worker
 * and process_exit writes what the worker's log buffered; each answer is
 * reported with cr_conn_request_done, so the scoreboard counts it. The
 * master serves nothing, so it may change the configuration
 * (http_service_reconfigure) for the workers it forks next.
 */
#ifndef CABRANK_HTTPD_HTTP_SERVICE_H
#define CABRANK_HTTPD_HTTP_SERVICE_H

#include <cabrank/service.h>

#include "access_log.h"
#include "http_parser.h"

/* Defaults of struct http_service_config (a zero field means its default). */
#define HTTP_HEADER_TIMEOUT_MS_DEFAULT    20000
#define HTTP_BODY_TIMEOUT_MS_DEFAULT      60000
#define HTTP_KEEPALIVE_TIMEOUT_MS_DEFAULT 5000
#define HTTP_SEND_TIMEOUT_MS_DEFAULT      60000
#define HTTP_MAX_REQUESTS_DEFAULT         1000
#define HTTP_STATUS_PATH_DEFAULT          "/server-status"
/* Request bodies are read and discarded up to this; a longer one is
 * answered, then the connection closes instead of reading it. */
#define HTTP_BODY_DISCARD_MAX (1024 * 1024)

struct http_service;

struct http_service_config {
    const char *root;              /* document root directory; copied */
    bool allow_outside_symlinks;   /* follow symlinks leading out of the root */
    const char *mime_types;        /* mime.types file; NULL: built-in table only */
    uint64_t header_timeout_ms;    /* whole request head: the first from the connection's
                                      arrival, later ones from their first byte */
    uint64_t body_timeout_ms;      /* between reads of a request body */
    uint64_t keepalive_timeout_ms; /* idle between requests */
    uint64_t send_timeout_ms;      /* no send progress */
    unsigned max_requests;         /* per connection, then Connection: close */
    struct http_limits limits;     /* parser limits; zero fields: defaults */
    const char *status_path;       /* NULL: default; "" : no status page; copied */
    bool status_allow_remote;      /* else loopback clients only */
    unsigned workers;              /* worker slots for per-worker data; 0: 1 */
    struct access_log *log;        /* NULL: none; borrowed, must outlive */
    size_t file_cache_entries;     /* 0: the file cache's default */
};

/*
 * Opens the root (-ENOENT, -ENOTDIR, -EACCES...), builds the MIME table and
 * the file cache. *out returns owned. Before start only.
 */
CR_MUST_CHECK int http_service_create(struct http_service **out,
                                      const struct http_service_config *cfg);

/* Frees; NULL-safe. Only after the server using it is destroyed. */
void http_service_destroy(struct http_service *h);

/* The service to pass to cr_server_create (lives as long as h). Thread-safe. */
const struct cr_service *http_service_get(struct http_service *h);

/*
 * Replaces the configuration (root, MIME types, limits, timeouts, status
 * page, access log) with cfg's, opening the new root and tables first: on
 * an error (-ENOENT, -ENOTDIR, -ENOMEM...) the old configuration stays
 * whole. Only where no thread serves with h: a process model's master,
 * between generations (processes forked later get the new configuration;
 * a fork racing with the swap waits for it). Old workers keep their copy.
 * Owner thread only, in a process that does not serve.
 */
CR_MUST_CHECK int http_service_reconfigure(struct http_service *h,
                                           const struct http_service_config *cfg);

/* Requests answered so far (by this process). Thread-safe. */
uint64_t http_service_requests(const struct http_service *h);

#endif /* CABRANK_HTTPD_HTTP_SERVICE_H */
