/*
 * handle_set.h - a set of OS handles (file descriptors) to wait on for
 * readiness: the "handle set" of the Leader/Followers paper. One interface,
 * one backend per file (src/demux/handle_set_epoll.c, _poll.c, _select.c), chosen at
 * run time by name. The Reactor builds on it; tests and tools may use it alone.
 *
 * Semantics every backend keeps (tests/unit/test_handle_set.c checks each):
 * - Readiness is level-triggered; with CR_HS_ONESHOT a handle is reported once
 *   and then stays disarmed (still registered) until cr_handle_set_modify()
 *   re-arms it.
 * - Hang-up and error are always reported (CR_EV_HUP, CR_EV_ERR), even with an
 *   empty interest mask, as epoll does - except by select, which cannot see
 *   them apart from readiness: it reports a hang-up or error as READ (or
 *   WRITE) on a handle that has that interest, and nothing on a handle with
 *   an empty interest.
 * - add/modify/remove may be called from any thread while another thread waits;
 *   after remove returns, no later wait reports that handle, and a handle added
 *   while a thread waits is watched by that wait.
 * - wait retries EINTR with the remaining timeout.
 * - Remove a handle before closing it. epoll forgets a closed fd by itself;
 *   poll and select keep the registration and report CR_EV_ERR for it.
 */
#ifndef CABRANK_HANDLE_SET_H
#define CABRANK_HANDLE_SET_H

#include <cabrank/common.h>

/* Event bits: interest masks use READ and WRITE; results may add HUP and ERR. */
#define CR_EV_READ  0x01u
#define CR_EV_WRITE 0x02u
#define CR_EV_HUP   0x04u
#define CR_EV_ERR   0x08u

/* Registration flags. CR_HS_EDGE: reported when it becomes ready (each new
 * arrival, each freeing of send space), not while it stays ready, with HUP
 * as soon as the peer has shut its side down (it may have come with the
 * data); only where cr_handle_set_has_edge() says so (epoll), -EINVAL
 * elsewhere. */
#define CR_HS_ONESHOT 0x01u
#define CR_HS_EDGE    0x02u

struct cr_handle_set;

struct cr_handle_event {
    int fd;
    unsigned events; /* CR_EV_* */
    uint32_t tag;    /* the value given at add/modify */
};

/*
 * Opens a handle set with the backend named "epoll", "poll" or "select"; NULL
 * or "" picks the default (epoll). -ENOENT for an unknown name; -errno when the
 * OS refuses. *out is owned by the caller (cr_handle_set_close). Thread-safe.
 */
CR_MUST_CHECK int cr_handle_set_open(struct cr_handle_set **out, const char *backend);

/* Closes the set and frees it; NULL-safe. No thread may be waiting. */
void cr_handle_set_close(struct cr_handle_set *hs);

/* The backend's name ("epoll", ...). Thread-safe. */
const char *cr_handle_set_name(const struct cr_handle_set *hs);

/* NULL-terminated list of backend names, default first. Thread-safe. */
const char *const *cr_handle_set_backends(void);

/*
 * Registers fd with an interest mask (CR_EV_READ | CR_EV_WRITE, may be 0) and
 * flags (CR_HS_ONESHOT); tag comes back with its events (the Reactor keeps a
 * generation there to recognise events of a since-replaced registration). -EBADF for a
 * negative or closed fd, -EEXIST if already registered, -EINVAL for a handle
 * the backend cannot hold (select: fd >= FD_SETSIZE). Thread-safe.
 */
CR_MUST_CHECK int cr_handle_set_add(struct cr_handle_set *hs, int fd, unsigned interest,
                                    unsigned flags, uint32_t tag);

/* Replaces interest, flags and tag of a registered fd, re-arming a one-shot
 * handle. -ENOENT if fd is not registered. Thread-safe. */
CR_MUST_CHECK int cr_handle_set_modify(struct cr_handle_set *hs, int fd, unsigned interest,
                                       unsigned flags, uint32_t tag);

/* Unregisters fd (call before closing it). -ENOENT if not registered.
 * Thread-safe. */
CR_MUST_CHECK int cr_handle_set_remove(struct cr_handle_set *hs, int fd);

/*
 * Waits up to timeout_ms (-1: forever, 0: poll) for ready handles and fills at
 * most max events. Returns the number filled (0 on timeout) or -errno.
 * Interrupted by cr_handle_set_wake() with 0 before the timeout. One thread
 * at a time.
 */
CR_MUST_CHECK int cr_handle_set_wait(struct cr_handle_set *hs, struct cr_handle_event *evs, int max,
                                     int timeout_ms);

/* Whether the backend takes CR_HS_EDGE. Thread-safe. */
bool cr_handle_set_has_edge(const struct cr_handle_set *hs);

/* Makes a current or the next cr_handle_set_wait() return early. Thread-safe. */
void cr_handle_set_wake(struct cr_handle_set *hs);

#endif /* CABRANK_HANDLE_SET_H */
