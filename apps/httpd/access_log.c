/*
 * access_log.c - the access log (access_log.h). Serving threads format lines
 * into per-worker buffers; a flusher thread writes them every flush interval;
 * close writes the rest. Owns the file descriptor, the buffers and the
 * flusher thread.
 *
 * Lock order: a buffer's lock, then fd_lock. fd_lock is held around each
 * write(2) and around the descriptor swap of a reopen, so a write never goes
 * to a descriptor being closed. Flushes happen per full buffer or per
 * second, never per request, so fd_lock is not contended on the request path.
 */
#include "access_log.h"

#include "out_buf.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_BUFFER_SIZE (64 * 1024)
#define DEFAULT_FLUSH_MS    1000

struct log_buf {
    pthread_mutex_t lock;
    /* Protected by lock. */
    size_t len;
    char *data;
} __attribute__((aligned(64)));

struct access_log {
    /* Immutable after open. */
    char *path;
    enum access_log_format format;
    unsigned nbufs;
    size_t buf_size;
    uint64_t flush_ns;
    struct log_buf *bufs;
    pthread_t flusher;

    pthread_mutex_t fd_lock;
    /* Protected by fd_lock. */
    int fd;

    pthread_mutex_t stop_lock;
    pthread_cond_t stop_cond;
    /* Protected by stop_lock. */
    bool stopping;
};

/* ------------------------------------------------------------------ formatting */

/* The calling thread's CLF time of the current second. */
static __thread int64_t tl_time_sec = -1;
static __thread char tl_time[40];
static __thread size_t tl_time_len;

static const char *const months[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* "10/Oct/2000:13:55:36 -0700", local time, once per second per thread. */
static const char *clf_time(int64_t sec, size_t *len)
{
    if (sec != tl_time_sec) {
        time_t t = (time_t)sec;
        struct tm tm;
        long off;
        int n;

        localtime_r(&t, &tm);
        off = tm.tm_gmtoff / 60;
        n = snprintf(tl_time, sizeof(tl_time), "%02d/%s/%04d:%02d:%02d:%02d %c%02ld%02ld",
                     tm.tm_mday, months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, off < 0 ? '-' : '+', labs(off) / 60, labs(off) % 60);
        tl_time_len = n > 0 && (size_t)n < sizeof(tl_time) ? (size_t)n : 0;
        tl_time_sec = sec;
    }
    *len = tl_time_len;
    return tl_time;
}

static void puts_(struct httpd_out *o, const char *s)
{
    httpd_out_put(o, s, strlen(s));
}

/* Request bytes, with '"', '\\', controls and non-ASCII as \xHH (nginx), so a
 * line can neither be split nor forged. NULL or empty: "-". */
static void put_escaped(struct httpd_out *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";

    if (s == NULL || n == 0) {
        httpd_out_put(o, "-", 1);
        return;
    }
    for (size_t i = 0; i < n && o->p < o->end; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\') {
            char esc[4] = {'\\', 'x', hex[ch >> 4], hex[ch & 15]};

            if (o->end - o->p < 4)
                break; /* never half an escape */
            httpd_out_put(o, esc, 4);
        } else {
            *o->p++ = (char)ch;
        }
    }
}

static void put_peer(struct httpd_out *o, const struct sockaddr *sa)
{
    char host[INET6_ADDRSTRLEN];

    if (sa != NULL && sa->sa_family == AF_INET &&
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, host, sizeof(host))) {
        puts_(o, host);
    } else if (sa != NULL && sa->sa_family == AF_INET6 &&
               inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, host,
                         sizeof(host))) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;

        /* An IPv4 client of a dual-stack socket is logged as IPv4. */
        if (IN6_IS_ADDR_V4MAPPED(a))
            (void)inet_ntop(AF_INET, &a->s6_addr[12], host, sizeof(host));
        puts_(o, host);
    } else {
        httpd_out_put(o, "-", 1);
    }
}

size_t access_log_format(char *buf, size_t cap, enum access_log_format format,
                         const struct access_log_entry *e)
{
    /* The tail ("\" 599 18446744073709551615 ..." and the newline) has a
     * reserve, so cutting a long target never loses the status. */
    struct httpd_out o = {.p = buf, .end = buf + cap - 1};
    char *req_end = buf + cap - 1 - (format == ACCESS_LOG_COMBINED ? 96 : 40);
    size_t tlen;
    const char *t = clf_time(e->time_sec, &tlen);
    int status = e->status >= 100 && e->status <= 999 ? e->status : 0;

    put_peer(&o, e->peer);
    puts_(&o, " - - [");
    httpd_out_put(&o, t, tlen);
    puts_(&o, "] \"");
    if (e->method != NULL && e->method_len > 0) {
        struct httpd_out r = {.p = o.p, .end = req_end > o.p ? req_end : o.p};

        put_escaped(&r, e->method, e->method_len);
        httpd_out_put(&r, " ", 1);
        put_escaped(&r, e->target, e->target_len);
        if (e->version_minor >= 0) {
            httpd_out_put(&r, " HTTP/1.", 8);
            httpd_out_u64(&r, (uint64_t)e->version_minor);
        }
        o.p = r.p;
    } else {
        httpd_out_put(&o, "-", 1);
    }
    puts_(&o, "\" ");
    httpd_out_u64(&o, (uint64_t)status);
    httpd_out_put(&o, " ", 1);
    if (e->bytes == 0)
        httpd_out_put(&o, "-", 1);
    else
        httpd_out_u64(&o, e->bytes);
    if (format == ACCESS_LOG_COMBINED) {
        char *half = o.p + (o.end - o.p) / 2;
        struct httpd_out r = {.p = o.p, .end = half};

        httpd_out_put(&r, " \"", 2);
        put_escaped(&r, e->referer, e->referer_len);
        o.p = r.p;
        httpd_out_put(&o, "\" \"", 3);
        r = (struct httpd_out){.p = o.p, .end = o.end - 1};
        put_escaped(&r, e->user_agent, e->user_agent_len);
        o.p = r.p;
        httpd_out_put(&o, "\"", 1);
    }
    *o.p++ = '\n'; /* o.end left one byte for it */
    return (size_t)(o.p - buf);
}

/* ------------------------------------------------------------------ writing */

/* Writes data[0..len) to the current file; a full disk loses lines, never
 * blocks the server. Takes fd_lock. */
static void write_out(struct access_log *l, const char *data, size_t len)
{
    pthread_mutex_lock(&l->fd_lock);
    while (len > 0) {
        ssize_t n = write(l->fd, data, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        data += n;
        len -= (size_t)n;
    }
    pthread_mutex_unlock(&l->fd_lock);
}

/* Caller holds b->lock. */
static void flush_buf(struct access_log *l, struct log_buf *b)
{
    if (b->len > 0) {
        write_out(l, b->data, b->len);
        b->len = 0;
    }
}

void access_log_append(struct access_log *l, unsigned worker, const struct access_log_entry *e)
{
    struct log_buf *b = &l->bufs[worker % l->nbufs];
    char line[ACCESS_LOG_LINE_MAX];
    size_t n = access_log_format(line, sizeof(line), l->format, e);

    pthread_mutex_lock(&b->lock);
    if (b->len + n > l->buf_size)
        flush_buf(l, b);
    if (n > l->buf_size) {
        write_out(l, line, n);
    } else {
        memcpy(b->data + b->len, line, n);
        b->len += n;
    }
    pthread_mutex_unlock(&b->lock);
}

void access_log_flush(struct access_log *l)
{
    for (unsigned i = 0; i < l->nbufs; i++) {
        pthread_mutex_lock(&l->bufs[i].lock);
        flush_buf(l, &l->bufs[i]);
        pthread_mutex_unlock(&l->bufs[i].lock);
    }
}

static int open_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);

    return fd < 0 ? -errno : fd;
}

int access_log_reopen(struct access_log *l)
{
    int fd;
    int old;

    access_log_flush(l);
    fd = open_file(l->path);
    if (fd < 0)
        return fd;
    pthread_mutex_lock(&l->fd_lock);
    old = l->fd;
    l->fd = fd;
    pthread_mutex_unlock(&l->fd_lock);
    close(old);
    return 0;
}

static void *flusher_main(void *arg)
{
    struct access_log *l = arg;

    pthread_mutex_lock(&l->stop_lock);
    while (!l->stopping) {
        struct timespec ts;
        uint64_t ns;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        ns = (uint64_t)ts.tv_nsec + l->flush_ns;
        ts.tv_sec += (time_t)(ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
        pthread_cond_timedwait(&l->stop_cond, &l->stop_lock, &ts);
        if (l->stopping)
            break;
        pthread_mutex_unlock(&l->stop_lock);
        access_log_flush(l);
        pthread_mutex_lock(&l->stop_lock);
    }
    pthread_mutex_unlock(&l->stop_lock);
    return NULL;
}

int access_log_open(struct access_log **out, const struct access_log_config *cfg)
{
    struct access_log *l;
    pthread_condattr_t ca;
    unsigned inited = 0;
    int err;

    *out = NULL;
    l = calloc(1, sizeof(*l));
    if (l == NULL)
        return -ENOMEM;
    l->format = cfg->format;
    l->nbufs = cfg->buffers != 0 ? cfg->buffers : 1;
    l->buf_size = cfg->buffer_size != 0 ? cfg->buffer_size : DEFAULT_BUFFER_SIZE;
    if (l->buf_size < ACCESS_LOG_LINE_MAX)
        l->buf_size = ACCESS_LOG_LINE_MAX;
    l->flush_ns = (cfg->flush_interval_ms != 0 ? cfg->flush_interval_ms : DEFAULT_FLUSH_MS) *
                  UINT64_C(1000000);
    l->path = strdup(cfg->path);
    /* Aligned: each buffer's lock on its own cache line. */
    l->bufs = aligned_alloc(_Alignof(struct log_buf), l->nbufs * sizeof(*l->bufs));
    err = -ENOMEM;
    if (l->path == NULL || l->bufs == NULL)
        goto out_free;
    memset(l->bufs, 0, l->nbufs * sizeof(*l->bufs));
    for (; inited < l->nbufs; inited++) {
        l->bufs[inited].data = malloc(l->buf_size);
        if (l->bufs[inited].data == NULL)
            goto out_free;
        pthread_mutex_init(&l->bufs[inited].lock, NULL);
    }
    l->fd = open_file(l->path);
    if (l->fd < 0) {
        err = l->fd;
        goto out_free;
    }
    pthread_mutex_init(&l->fd_lock, NULL);
    pthread_mutex_init(&l->stop_lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->stop_cond, &ca);
    pthread_condattr_destroy(&ca);
    err = -pthread_create(&l->flusher, NULL, flusher_main, l);
    if (err < 0)
        goto out_close;
    *out = l;
    return 0;

out_close:
    pthread_cond_destroy(&l->stop_cond);
    pthread_mutex_destroy(&l->stop_lock);
    pthread_mutex_destroy(&l->fd_lock);
    close(l->fd);
out_free:
    for (unsigned i = 0; i < inited; i++) {
        pthread_mutex_destroy(&l->bufs[i].lock);
        free(l->bufs[i].data);
    }
    free(l->bufs);
    free(l->path);
    free(l);
    return err;
}

void access_log_close(struct access_log *l)
{
    if (l == NULL)
        return;
    pthread_mutex_lock(&l->stop_lock);
    l->stopping = true;
    pthread_cond_signal(&l->stop_cond);
    pthread_mutex_unlock(&l->stop_lock);
    pthread_join(l->flusher, NULL);
    access_log_flush(l);
    for (unsigned i = 0; i < l->nbufs; i++) {
        pthread_mutex_destroy(&l->bufs[i].lock);
        free(l->bufs[i].data);
    }
    pthread_cond_destroy(&l->stop_cond);
    pthread_mutex_destroy(&l->stop_lock);
    pthread_mutex_destroy(&l->fd_lock);
    close(l->fd);
    free(l->bufs);
    free(l->path);
    free(l);
}
