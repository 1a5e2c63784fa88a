/*
 * httpd_options.h - cabrank-httpd's configuration: every option once
 * (httpd_opt_defs: the command line, the --config file, --help and the
 * re-read at SIGHUP), the options they fill, and loading them. Used by
 * main.c on the main thread (at start and in the SIGHUP callback); an
 * options object owns the strings read from its file.
 */
#ifndef CABRANK_HTTPD_OPTIONS_H
#define CABRANK_HTTPD_OPTIONS_H

#include <cabrank/log.h>
#include <cabrank/server.h>

#include "../common/options.h"
#include "access_log.h"
#include "http_service.h"

#include <stdbool.h>
#include <stdint.h>

#define PROG       "cabrank-httpd"
#define EXIT_USAGE OPTS_EXIT_USAGE
/* lf's promotion delay where the order has one: a static file is answered in
 * microseconds and blocks only on a cold disk (cr_lf_pool_config's
 * promotion_delay_us); why 5 ms and not 1: docs/design/httpd.md. */
#define DEFAULT_PROMOTION_DELAY_US 5000
#define UNSET_US                   UINT64_MAX
#define UNSET_LOWAT                (CR_SERVER_NOTSENT_SYSTEM - 1) /* outside the flag's range */
#define NOPTS                      45                             /* entries in httpd_opt_defs */

/* What one option changes, for a configuration re-read at SIGHUP. */
enum scope {
    SCOPE_SERVER,  /* the server's (listeners, model, pools): needs a restart */
    SCOPE_SERVICE, /* the HTTP service's: applied to new workers (process models) */
    SCOPE_LOG,     /* the logs: applied at once under every model */
    SCOPE_START,   /* read at start only (--config, --pid-file) */
};

/* Strings read from a configuration file, freed with the options. */
struct arena;

struct httpd_options {
    struct cr_server_config server;
    struct http_service_config http;
    uint64_t promotion_delay_us; /* UNSET_US: the default for the order */
    uint64_t busy_poll_us;
    unsigned timeline_events; /* 0: off */
    unsigned nlisten;
    bool listen_from_argv; /* the command line's --listen replace the file's */
    const char *access_log;
    enum access_log_format log_format;
    const char *error_log;
    bool has_log_level;
    enum cr_log_level log_level;
    const char *pid_file;
    const char *config;
    /* Each option's value as given ("" when unset; --listen: the last), to
     * tell what a re-read changed. Point into argv, the arena or literals. */
    const char *raw[NOPTS];
    unsigned listen_hash; /* every --listen, in order */
    struct arena *arena;
};

/* Every option, NOPTS of them; scope is an enum scope. */
extern const struct opts_def httpd_opt_defs[NOPTS];

/*
 * Builds the options: defaults, then the --config file, then the command
 * line (so its flags win; its --listen replace the file's). Exits for
 * --help and --version. 0 or -EINVAL with e saying why. o is the caller's
 * (zeroed here); free what it keeps with httpd_options_free (heap) or leave
 * it to the process's end.
 */
int httpd_options_load(struct httpd_options *o, int argc, char **argv, struct opts_err *e);

/* Frees the strings o keeps (its file's), not o. */
void httpd_options_fini(struct httpd_options *o);

/* Frees options re-read at SIGHUP (heap) with their strings. NULL-safe. */
void httpd_options_free(struct httpd_options *o);

/* Whether a promotion order takes a promotion delay (NULL: the default,
 * lifo). */
bool httpd_options_defers(const char *promotion);

#endif /* CABRANK_HTTPD_OPTIONS_H */
