/*
 * log.c - the one logging module (STYLE.md, "Logging"). Formats a record into
 * a stack buffer and writes it with one write(2), so records of concurrent
 * threads and processes never interleave. Called from any thread; never from
 * a signal handler (vsnprintf is not async-signal-safe).
 */
#include <cabrank/clock.h>
#include <cabrank/log.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int cr_log_threshold = CR_LOG_INFO;
static int log_fd = -1; /* -1: stderr. Relaxed atomics: a record may go to the old fd. */

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void cr_log_set_level(enum cr_log_level level)
{
    __atomic_store_n(&cr_log_threshold, (int)level, __ATOMIC_RELAXED);
}

int cr_log_parse_level(const char *name, enum cr_log_level *out)
{
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
        if (strcasecmp(name, level_names[i]) == 0) {
            *out = (enum cr_log_level)i;
            return 0;
        }
    }
    return -EINVAL;
}

void cr_log_set_fd(int fd)
{
    __atomic_store_n(&log_fd, fd, __ATOMIC_RELAXED);
}

void cr_log_write(enum cr_log_level level, const char *fmt, ...)
{
    char buf[1024];
    uint64_t now = cr_clock_wall_ns();
    time_t secs = (time_t)(now / CR_NSEC_PER_SEC);
    struct tm tm;
    size_t len;
    int n;
    va_list ap;
    int fd;

    gmtime_r(&secs, &tm);
    len = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    n = snprintf(buf + len, sizeof(buf) - len, ".%03uZ %d %ld %s ",
                 (unsigned)(now % CR_NSEC_PER_SEC / CR_NSEC_PER_MSEC), (int)getpid(),
                 (long)syscall(SYS_gettid), level_names[(unsigned)level < 4 ? (unsigned)level : 3]);
    if (n > 0)
        len += (size_t)n;
    va_start(ap, fmt);
    n = vsnprintf(buf + len, sizeof(buf) - len, fmt, ap);
    va_end(ap);
    if (n > 0)
        len += (size_t)n;
    if (len > sizeof(buf) - 2)
        len = sizeof(buf) - 2; /* truncated record: keep the newline */
    buf[len++] = '\n';
    fd = __atomic_load_n(&log_fd, __ATOMIC_RELAXED);
    /* Logging must never fail the caller; a lost record is all we can do. */
    if (write(fd < 0 ? STDERR_FILENO : fd, buf, len) < 0)
        return;
}
