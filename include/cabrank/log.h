/*
 * log.h - the one logging module. CR_LOG tests the level before evaluating its
 * arguments; each record is one write(2) of "time pid tid level message\n" to
 * the log descriptor (stderr by default). Never call it from a signal handler.
 */
#ifndef CABRANK_LOG_H
#define CABRANK_LOG_H

#include <cabrank/common.h>

enum cr_log_level {
    CR_LOG_ERROR = 0,
    CR_LOG_WARN = 1,
    CR_LOG_INFO = 2,
    CR_LOG_DEBUG = 3,
};

/* Current threshold; records above it are dropped unevaluated. Relaxed reads. */
extern int cr_log_threshold;

#define CR_LOG(level, ...)                                                                         \
    do {                                                                                           \
        if ((int)(level) <= __atomic_load_n(&cr_log_threshold, __ATOMIC_RELAXED))                  \
            cr_log_write((level), __VA_ARGS__);                                                    \
    } while (0)

/* Writes one record unconditionally. Prefer CR_LOG. Thread-safe. */
void cr_log_write(enum cr_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Sets the threshold. Thread-safe. */
void cr_log_set_level(enum cr_log_level level);

/* Parses "error", "warn", "info" or "debug"; -EINVAL otherwise. Thread-safe. */
CR_MUST_CHECK int cr_log_parse_level(const char *name, enum cr_log_level *out);

/*
 * Sends records to fd (borrowed; the caller keeps it open until it sets
 * another). -1 restores stderr. Thread-safe.
 */
void cr_log_set_fd(int fd);

#endif /* CABRANK_LOG_H */
