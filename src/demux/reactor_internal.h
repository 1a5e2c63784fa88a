/*
 * reactor_internal.h - what the process models need of a cr_reactor beyond
 * reactor.h: the descriptors it owns, so that a child forked from the
 * manager thread closes exactly them (and not by guessing from
 * /proc/self/fd) without freeing the reactor, whose locks and memory belong
 * to the parent's threads. Library-internal.
 */
#ifndef CABRANK_REACTOR_INTERNAL_H
#define CABRANK_REACTOR_INTERNAL_H

#include <cabrank/reactor.h>

/* Room cr__reactor_fds needs: the handle set's, and the signalfd. */
#define CR__REACTOR_MAX_FDS 3

/* Copies the reactor's own descriptors into fds; returns how many. Any
 * thread (they do not change after create, except the signalfd, which
 * appears with the first signal: call after the reactor is set up). */
unsigned cr__reactor_fds(const struct cr_reactor *r, int *fds);

/* When the last wait returned, if events it fetched are still untaken, else
 * 0 (a cr_clock_now_ns time). Lets the Leader/Followers watchdog see a
 * batch that waits for a thread. Any thread. */
uint64_t cr__reactor_backlog_since(struct cr_reactor *r);

/* cr_reactor_next() sharing clock readings with its caller (the
 * Leader/Followers pool): *now is a cr_clock_now_ns() time read a moment ago
 * (0: none), which the take uses for its timers and as the event's taken_ns
 * instead of reading the clock again; on return *now is the take's latest
 * reading. may_wait false: only what is due or fetched already is taken, and
 * 0 comes back at once when there is nothing. Same threads as
 * cr_reactor_next. */
CR_MUST_CHECK int cr__reactor_take(struct cr_reactor *r, int timeout_ms, bool may_wait,
                                   uint64_t *now, struct cr_reactor_event *ev);

/* The busy poll's window (ns) after an idle gap of idle ns that began with
 * this window, for a ceiling of max (cr_reactor_config.busy_poll_us). Pure;
 * exposed for its test. */
uint64_t cr__reactor_poll_window(uint64_t window, uint64_t max, uint64_t idle);

/* The busy poll's window now (ns). Any thread; for tests. */
uint64_t cr__reactor_poll_window_now(struct cr_reactor *r);

#endif /* CABRANK_REACTOR_INTERNAL_H */
