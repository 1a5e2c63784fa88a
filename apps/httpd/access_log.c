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
 * stop_lock is never held with another log lock. The fork handlers take
 * registry_lock, then every log's buffer locks in index order, fd_lock and
 * stop_lock: registry_lock comes first and is otherwise held alone.
 *
 * fork: a child gets a copy of the forking thread only, and of every lock
 * as it was, so a lock held by the flusher or a serving thread at that
 * moment would stay locked in the child forever, and lines buffered then
 * would be written twice (by the parent, and by the child at its flush).
 * The pthread_atfork handlers make fork a point where no log lock is held
 * (prepare takes them all; both sides release them), and the child drops
 * the buffered lines (the parent writes them) and knows it has no flusher.
 * access_log_after_fork starts the child's own; access_log_before_exit
 * stops it and writes the rest. Open logs are found through a registry.
 */
#include "access_log.h"

#include "out_buf.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
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
    /* The flusher thread of this process runs (joined by whoever clears it):
     * false in a child until access_log_after_fork. Written by the owner
     * thread before serving threads exist (a child's) or after they are gone,
     * and by the fork handler (the child's only thread). */
    bool flusher_running;

    /* Protected by registry_lock. */
    struct access_log *next;
};

/* Every open log, for the fork handlers. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct access_log *registry;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

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

/*
 * Starts the flusher with every signal blocked: a process-directed signal
 * (SIGHUP, SIGUSR1, SIGTERM) is delivered to any thread that does not block
 * it, and the flusher must never be that thread, or the signal's default
 * action (terminate) would end the server while its main thread, busy with
 * the previous signal, is not waiting for it.
 */
static int start_flusher(struct access_log *l, const pthread_attr_t *attr)
{
    sigset_t all;
    sigset_t old;
    int err;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = -pthread_create(&l->flusher, attr, flusher_main, l);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err;
}

/* ------------------------------------------------------------------ fork */

/* Before fork: no log lock may be held by another thread at the fork. */
static void atfork_prepare(void)
{
    pthread_mutex_lock(&registry_lock);
    for (struct access_log *l = registry; l != NULL; l = l->next) {
        for (unsigned i = 0; i < l->nbufs; i++)
            pthread_mutex_lock(&l->bufs[i].lock);
        pthread_mutex_lock(&l->fd_lock);
        pthread_mutex_lock(&l->stop_lock);
    }
}

static void unlock_all(void)
{
    for (struct access_log *l = registry; l != NULL; l = l->next) {
        pthread_mutex_unlock(&l->stop_lock);
        pthread_mutex_unlock(&l->fd_lock);
        for (unsigned i = l->nbufs; i-- > 0;)
            pthread_mutex_unlock(&l->bufs[i].lock);
    }
    pthread_mutex_unlock(&registry_lock);
}

static void atfork_parent(void)
{
    unlock_all();
}

/*
 * In the child, the only thread. The buffered lines are the parent's (it
 * writes them); the flusher is not here. The condition variable may have
 * had the parent's flusher waiting on it, a waiter that does not exist in
 * the child, so it is made anew rather than trusted (glibc's destroy would
 * wait for that waiter forever).
 */
static void atfork_child(void)
{
    for (struct access_log *l = registry; l != NULL; l = l->next) {
        pthread_condattr_t ca;

        for (unsigned i = 0; i < l->nbufs; i++)
            l->bufs[i].len = 0;
        l->flusher_running = false;
        l->stopping = false;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&l->stop_cond, &ca);
        pthread_condattr_destroy(&ca);
    }
    unlock_all();
}

static void register_atfork(void)
{
    /* Cannot fail but for ENOMEM at start; without the handlers a fork
     * could only duplicate lines or leave a lock held, as before. */
    (void)pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static void registry_add(struct access_log *l)
{
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&registry_lock);
    l->next = registry;
    registry = l;
    pthread_mutex_unlock(&registry_lock);
}

static void registry_remove(struct access_log *l)
{
    pthread_mutex_lock(&registry_lock);
    for (struct access_log **pp = &registry; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == l) {
            *pp = l->next;
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
}

/* Stops and joins this process's flusher, if it runs. */
static void stop_flusher(struct access_log *l)
{
    if (!l->flusher_running)
        return;
    pthread_mutex_lock(&l->stop_lock);
    l->stopping = true;
    pthread_cond_signal(&l->stop_cond);
    pthread_mutex_unlock(&l->stop_lock);
    pthread_join(l->flusher, NULL);
    l->flusher_running = false;
    l->stopping = false;
}

int access_log_after_fork(struct access_log *l)
{
    pthread_attr_t attr;
    int err;

    if (l == NULL || l->flusher_running)
        return 0;
    err = -pthread_attr_init(&attr);
    if (err < 0)
        return err;
#ifdef CR_TSAN
    /* After fork glibc hands the parent's cached thread stacks to new
     * threads, so the flusher would get the pthread_t of a parent thread
     * TSan still counts as running ("dup thread with used id"). A size no
     * cached stack has makes glibc map a fresh one (the prefork model does
     * the same for its worker threads, with another size). */
    (void)pthread_attr_setstacksize(&attr, (9u << 20) + (64u << 10));
#endif
    err = start_flusher(l, &attr);
    pthread_attr_destroy(&attr);
    if (err < 0)
        return err;
    l->flusher_running = true;
    return 0;
}

void access_log_before_exit(struct access_log *l)
{
    if (l == NULL)
        return;
    stop_flusher(l);
    access_log_flush(l);
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
    err = start_flusher(l, NULL);
    if (err < 0)
        goto out_close;
    l->flusher_running = true;
    registry_add(l);
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
    registry_remove(l);
    stop_flusher(l);
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
