/*
 * status_timeline.h - cabrank-httpd's live timeline: <status path>/timeline
 * answers the server's timeline (cr_server_timeline) for the last moments
 * as JSON, and the status page embeds a strip chart that polls it: a lane
 * per thread or worker process, a colour per role, an arrow per leadership
 * handed on or job handed off. Pure functions of the server; any thread.
 */
#ifndef CABRANK_HTTPD_STATUS_TIMELINE_H
#define CABRANK_HTTPD_STATUS_TIMELINE_H

#include <cabrank/common.h>

struct cr_server;

/* The window a request without ?window=<ms> gets, and its bounds. */
#define STATUS_TIMELINE_WINDOW_MS     3000u
#define STATUS_TIMELINE_WINDOW_MIN_MS 10u
#define STATUS_TIMELINE_WINDOW_MAX_MS 60000u

/*
 * The timeline of srv (borrowed) over the window the query asks for
 * (query[0..query_len), "window=<ms>"; clamped to the bounds), as JSON.
 * *out returns owned (free()), *len its length. -ENOENT when the server
 * records no timeline, -EINVAL for a window that is not a number, -ENOMEM.
 * Thread-safe.
 */
CR_MUST_CHECK int status_timeline_render(struct cr_server *srv, const char *query, size_t query_len,
                                         char **out, size_t *len);

/* The status page's timeline section: HTML, CSS and the script that polls
 * the JSON and draws it. Static. Thread-safe. */
const char *status_timeline_section(void);

#endif /* CABRANK_HTTPD_STATUS_TIMELINE_H */
