/*
 * http_client.h - driving a cabrank-httpd from outside, for the integration
 * programs (tests/integration/httpd_client.h adds their CHECK) and the
 * profile-guided build's training run (tools/pgo_train.c): a temporary
 * document root, starting and stopping the server, a raw-socket HTTP/1.1
 * client that reads one response at a time (so pipelined answers can be
 * checked in order). Header-only (static inline): each user is one .c file.
 * One thread per client.
 */
#ifndef CABRANK_APPS_HTTP_CLIENT_H
#define CABRANK_APPS_HTTP_CLIENT_H

#include "line_client.h"
#include "server_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Timeouts for waits that expect something, scaled for sanitizer builds. */
static inline int hc_tmo(int ms)
{
    const char *b = getenv("CR_BUILD_DIR");
    size_t n = b != NULL ? strlen(b) : 0;

    if (n >= 5 && strcmp(b + n - 5, "/tsan") == 0)
        return ms * 5;
    if (n >= 5 && strcmp(b + n - 5, "/asan") == 0)
        return ms * 2;
    return ms;
}

/* Whether this is a sanitizer build (by its build directory). */
static inline bool hc_is_sanitized(void)
{
    return hc_tmo(1) != 1;
}

/* ------------------------------------------------------------------ files */

/* Creates a fresh directory /tmp/cr-httpd-XXXXXX into dir (>= 64 bytes). */
static inline int hc_mkdtemp(char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/cr-httpd-XXXXXX");
    return mkdtemp(dir) != NULL ? 0 : -errno;
}

/* Writes dir/rel with data[0..len), creating it (not its directories). */
static inline int hc_write_file(const char *dir, const char *rel, const void *data, size_t len)
{
    char path[1024];
    int fd;
    int err = 0;

    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    if (cr_test_write_all(fd, data, len) < 0)
        err = -EIO;
    close(fd);
    return err;
}

static inline int hc_mkdir(const char *dir, const char *rel)
{
    char path[1024];

    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    return mkdir(path, 0755) < 0 ? -errno : 0;
}

/* Fills buf with a pattern that differs at every offset mod 251. */
static inline void hc_pattern(unsigned char *buf, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (unsigned char)((i * 7 + seed + i / 251) % 251);
}

/* ------------------------------------------------------------------ the server */

struct hc_server {
    pid_t pid;
    uint16_t port;
};

/*
 * Starts $CR_BUILD_DIR/cabrank-httpd on 127.0.0.1:0 with --root root, then
 * the NULL-terminated extra arguments. 0 or -errno.
 */
static inline int hc_start(struct hc_server *s, const char *root, const char *const *extra)
{
    char path[4096];
    char *argv[64];
    int n = 0;
    int err;

    cr_test_build_path("cabrank-httpd", path, sizeof(path));
    argv[n++] = path;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--root";
    argv[n++] = (char *)root;
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 62; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    err = cr_test_spawn_server(argv, &s->pid, &s->port, hc_tmo(20000));
    if (err < 0)
        fprintf(stderr, "starting %s: %s\n", path, strerror(-err));
    return err;
}

/* Sends sig and waits for the exit; 0 when it exited with status 0. */
static inline int hc_stop_sig(struct hc_server *s, int sig, int timeout_ms)
{
    int status = 0;

    if (s->pid <= 0)
        return 0;
    kill(s->pid, sig);
    if (cr_test_wait_exit(s->pid, timeout_ms, &status) < 0) {
        fprintf(stderr, "server %d: no exit %d ms after signal %d\n", (int)s->pid, timeout_ms, sig);
        s->pid = 0;
        return -1;
    }
    s->pid = 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFSIGNALED(status))
        fprintf(stderr, "server died of signal %d\n", WTERMSIG(status));
    else
        fprintf(stderr, "server exited with %d\n", WEXITSTATUS(status));
    return -1;
}

/* Graceful stop (SIGTERM); 0 when it exited with status 0. */
static inline int hc_stop(struct hc_server *s)
{
    return hc_stop_sig(s, SIGTERM, hc_tmo(20000));
}

/* Whether the server process still runs (not exited, not a zombie). */
static inline bool hc_alive(struct hc_server *s)
{
    int status;

    return s->pid > 0 && waitpid(s->pid, &status, WNOHANG) == 0;
}

/* ------------------------------------------------------------------ the client */

#define HC_HEAD_MAX 16384

struct hc_resp {
    int status;
    int minor;
    char head[HC_HEAD_MAX]; /* status line and fields, NUL-terminated, CRLFs kept */
    size_t head_len;
    char *body; /* malloc'd (NUL-terminated), NULL when empty */
    size_t body_len;
};

static inline void hc_resp_free(struct hc_resp *r)
{
    free(r->body);
    r->body = NULL;
    r->body_len = 0;
}

static inline int hc_open(struct cr_test_client *cl, uint16_t port)
{
    int err = cr_test_client_open(cl, port);

    if (err < 0)
        fprintf(stderr, "connect to %u: %s\n", port, strerror(-err));
    return err;
}

static inline int hc_send(struct cr_test_client *cl, const char *s)
{
    return cr_test_write_all(cl->fd, s, strlen(s));
}

/*
 * The value of field name in r (first line, case-insensitive name) into
 * out[0..cap), NUL-terminated; false when absent.
 */
static inline bool hc_header(const struct hc_resp *r, const char *name, char *out, size_t cap)
{
    size_t nlen = strlen(name);
    const char *p = strstr(r->head, "\r\n");

    while (p != NULL && p[2] != '\0') {
        const char *line = p + 2;
        const char *eol = strstr(line, "\r\n");
        size_t llen = eol != NULL ? (size_t)(eol - line) : strlen(line);

        if (llen > nlen && line[nlen] == ':' && strncasecmp(line, name, nlen) == 0) {
            const char *v = line + nlen + 1;
            size_t vlen = llen - nlen - 1;

            while (vlen > 0 && (*v == ' ' || *v == '\t')) {
                v++;
                vlen--;
            }
            while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
                vlen--;
            if (vlen >= cap)
                vlen = cap - 1;
            memcpy(out, v, vlen);
            out[vlen] = '\0';
            return true;
        }
        p = eol;
    }
    return false;
}

static inline bool hc_has_header(const struct hc_resp *r, const char *name)
{
    char v[8];

    return hc_header(r, name, v, sizeof(v));
}

/* Whether field name has exactly value (case-sensitive value). */
static inline bool hc_header_is(const struct hc_resp *r, const char *name, const char *value)
{
    char v[1024];

    return hc_header(r, name, v, sizeof(v)) && strcmp(v, value) == 0;
}

/*
 * Reads one response; head_request: it answers a HEAD (no body whatever
 * Content-Length says). The body is read by Content-Length (every response
 * of ours has one); 304 has none. 0, or -errno (-EPIPE: closed before a
 * whole response, -ETIMEDOUT, -EPROTO: malformed).
 */
static inline int hc_read(struct cr_test_client *cl, bool head_request, struct hc_resp *r,
                          int timeout_ms)
{
    char line[HC_HEAD_MAX];
    char cl_val[32];
    unsigned long long clen = 0;
    ssize_t n;
    int err;

    memset(r, 0, sizeof(*r));
    n = cr_test_client_line(cl, line, sizeof(line), timeout_ms);
    if (n < 0)
        return (int)n;
    if (sscanf(line, "HTTP/1.%d %d", &r->minor, &r->status) != 2)
        return -EPROTO;
    for (;;) {
        size_t len = strlen(line);

        if (r->head_len + len + 3 > sizeof(r->head))
            return -EPROTO;
        memcpy(r->head + r->head_len, line, len);
        r->head_len += len;
        if (len > 0 && r->head[r->head_len - 1] == '\r')
            r->head_len--;
        memcpy(r->head + r->head_len, "\r\n", 3);
        r->head_len += 2;
        if (len == 0 || (len == 1 && line[0] == '\r'))
            break;
        n = cr_test_client_line(cl, line, sizeof(line), timeout_ms);
        if (n < 0)
            return (int)n;
    }
    if (hc_header(r, "Content-Length", cl_val, sizeof(cl_val)))
        clen = strtoull(cl_val, NULL, 10);
    if (head_request || r->status == 304 || r->status == 204 || r->status < 200)
        return 0;
    if (clen > 0) {
        r->body = malloc(clen + 1);
        if (r->body == NULL)
            return -ENOMEM;
        err = cr_test_client_read(cl, r->body, clen, timeout_ms);
        if (err < 0) {
            hc_resp_free(r);
            return err;
        }
        r->body[clen] = '\0';
        r->body_len = clen;
    }
    return 0;
}

/* Sends req and reads its response. */
static inline int hc_request(struct cr_test_client *cl, const char *req, struct hc_resp *r,
                             int timeout_ms)
{
    int err;

    memset(r, 0, sizeof(*r));
    err = hc_send(cl, req);
    if (err < 0)
        return err;
    return hc_read(cl, strncmp(req, "HEAD ", 5) == 0, r, timeout_ms);
}

/* One request on a new connection (closed after); 0 or -errno. */
static inline int hc_get(uint16_t port, const char *req, struct hc_resp *r)
{
    struct cr_test_client cl;
    int err;

    memset(r, 0, sizeof(*r));
    err = hc_open(&cl, port);
    if (err < 0)
        return err;
    err = hc_request(&cl, req, r, hc_tmo(5000));
    cr_test_client_close(&cl);
    return err;
}

/* The status of one request on a new connection, or -errno. */
static inline int hc_status(uint16_t port, const char *req)
{
    struct hc_resp r;
    int err = hc_get(port, req, &r);

    hc_resp_free(&r);
    return err < 0 ? err : r.status;
}

/* Waits until the server closes cl (EOF or reset): 0, or -ETIMEDOUT, or
 * -EPROTO when data arrives instead. */
static inline int hc_wait_close(struct cr_test_client *cl, int timeout_ms)
{
    return cr_test_client_eof(cl, timeout_ms);
}

#endif /* CABRANK_APPS_HTTP_CLIENT_H */
