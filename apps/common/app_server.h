/*
 * app_server.h - What the programs that run a cr_server (cabrank-httpd,
 * cabrank-ledger) do alike around it: say where they listen once the model
 * serves, and send stderr (the log) to an error log file. Main thread only.
 */
#ifndef CABRANK_APPS_COMMON_APP_SERVER_H
#define CABRANK_APPS_COMMON_APP_SERVER_H

#include <cabrank/common.h>

struct cr_server;

/*
 * Prints "listening on ADDR" to stdout for each of s's listeners, logs the
 * same, and flushes stdout: tests and scripts bind port 0 and read the
 * line. For an on_started callback. Main thread only.
 */
void app_say_listening(struct cr_server *s);

/*
 * Sends stderr, and so the log records, to the file at path (appended,
 * created 0644). Again at SIGUSR1/SIGHUP reopens it after a rotation.
 * 0 or -errno, stderr unchanged. Main thread only.
 */
CR_MUST_CHECK int app_open_error_log(const char *path);

#endif /* CABRANK_APPS_COMMON_APP_SERVER_H */
