/*
 * access_log.h - cabrank-httpd's access log: one line per answered request in
 * the Common or the Combined Log Format (Apache's, as nginx writes it too).
 * Off unless --access-log is given.
 *
 * Lines are formatted by the serving thread into a per-worker buffer (indexed
 * by cr_conn_worker(), so threads do not contend) and written with one
 * write(2) per buffer when it fills, every second (a flusher thread), and at
 * close. Reopening (SIGUSR1, after logrotate moved the file) opens the path
 * anew and swaps the descriptor between two flushes, so no line is lost or
 * split.
 *
 * Process models: fork is safe at any time (pthread_atfork handlers: no log
 * lock stays held in the child, and lines buffered at the fork are written
 * once, by the parent). A child process calls access_log_after_fork to get
 * a flusher of its own and access_log_before_exit before it exits; it
 * appends into its own copy of the buffers, writing to the shared file
 * (O_APPEND, one write(2) per buffer, so lines of processes never mix).
 */
#ifndef CABRANK_HTTPD_ACCESS_LOG_H
#define CABRANK_HTTPD_ACCESS_LOG_H

#include <cabrank/common.h>
#include <sys/socket.h>

struct access_log;

enum access_log_format {
    ACCESS_LOG_COMMON = 0, /* host ident user [time] "request" status bytes */
    ACCESS_LOG_COMBINED,   /* ... "referer" "user-agent" */
};

struct access_log_config {
    const char *path;              /* borrowed during open; copied */
    enum access_log_format format; /* 0: common */
    unsigned buffers;              /* per-worker buffers; 0: 1 */
    size_t buffer_size;            /* bytes per buffer; 0: 64 KiB */
    uint64_t flush_interval_ms;    /* 0: 1000 */
};

/* What one line says. Strings are raw request bytes (not NUL-terminated),
 * escaped when written; a NULL string is written as "-". */
struct access_log_entry {
    const struct sockaddr *peer; /* NULL or an AF_INET/AF_INET6/AF_UNIX address */
    int64_t time_sec;            /* wall clock, seconds since the epoch */
    const char *method;
    size_t method_len;
    const char *target;
    size_t target_len;
    int version_minor; /* HTTP/1.x; < 0: no version (a malformed request) */
    int status;
    uint64_t bytes; /* body bytes sent (Apache's %b: "-" when 0) */
    const char *referer;
    size_t referer_len;
    const char *user_agent;
    size_t user_agent_len;
};

/* Longest line access_log_format writes (longer fields are cut). */
#define ACCESS_LOG_LINE_MAX 4096

/*
 * Formats one line, with its '\n', into buf[0..cap) (cap >= 128; fields are
 * cut to fit, the line always ends with '\n'). Returns its length. The time
 * is local time with its offset, cached per thread for the current second.
 * Pure apart from that cache. Thread-safe.
 */
size_t access_log_format(char *buf, size_t cap, enum access_log_format format,
                         const struct access_log_entry *e);

/*
 * Opens (appends to, creates 0644) cfg->path and starts the flusher thread.
 * *out returns owned. -errno of open or pthread_create. Thread-safe.
 */
CR_MUST_CHECK int access_log_open(struct access_log **out, const struct access_log_config *cfg);

/* Writes what is buffered, stops the flusher, closes the file, frees.
 * NULL-safe. No append may run concurrently or later. Owner thread only. */
void access_log_close(struct access_log *l);

/* Formats e into worker's buffer (worker taken modulo the buffer count);
 * writes the buffer first if e does not fit. Thread-safe. */
void access_log_append(struct access_log *l, unsigned worker, const struct access_log_entry *e);

/*
 * In a child process right after fork: starts the child's flusher (fork
 * copied only the forking thread). 0 if it runs already; NULL-safe. -errno
 * of pthread_create. Owner thread only.
 */
CR_MUST_CHECK int access_log_after_fork(struct access_log *l);

/* In a process about to exit without access_log_close (a worker): stops its
 * flusher and writes what is buffered. Appends after it are written at the
 * next flush or close only. NULL-safe. Owner thread only. */
void access_log_before_exit(struct access_log *l);

/* Writes every buffer now. Thread-safe. */
void access_log_flush(struct access_log *l);

/*
 * Flushes, then opens the path anew (after it was moved away) and switches
 * to it. On failure the old file stays in use and -errno is returned.
 * Thread-safe (not async-signal-safe: call it from cr_server's on_usr1).
 */
CR_MUST_CHECK int access_log_reopen(struct access_log *l);

#endif /* CABRANK_HTTPD_ACCESS_LOG_H */
