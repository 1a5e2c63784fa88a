/*
 * handle_set_internal.h - the backend interface behind handle_set.h. Each
 * backend file defines one const struct cr_handle_set_ops and a struct that
 * begins with struct cr_handle_set; handle_set.c picks the ops by name and
 * forwards to them. Library-internal.
 */
#ifndef CABRANK_HANDLE_SET_INTERNAL_H
#define CABRANK_HANDLE_SET_INTERNAL_H

#include <cabrank/handle_set.h>

struct cr_handle_set_ops {
    const char *name;
    bool edge; /* takes CR_HS_EDGE */
    int (*open)(struct cr_handle_set **out);
    void (*close)(struct cr_handle_set *hs);
    int (*add)(struct cr_handle_set *hs, int fd, unsigned interest, unsigned flags, uint32_t tag);
    int (*modify)(struct cr_handle_set *hs, int fd, unsigned interest, unsigned flags,
                  uint32_t tag);
    int (*remove)(struct cr_handle_set *hs, int fd);
    /* Returns events filled, 0 on timeout or wake-up, -errno. EINTR retried,
     * for what is left of timeout_ms since since_ns (cr__handle_set_wait). */
    int (*wait)(struct cr_handle_set *hs, struct cr_handle_event *evs, int max, int timeout_ms,
                uint64_t since_ns);
    void (*wake)(struct cr_handle_set *hs);
    /* The descriptors the set itself owns (epoll instance, wake-up eventfd)
     * into fds (room for CR__HANDLE_SET_MAX_FDS); returns how many. */
    unsigned (*fds)(const struct cr_handle_set *hs, int *fds);
};

#define CR__HANDLE_SET_MAX_FDS 2

/* cr_handle_set's own descriptors (ops->fds), for a forked child of a
 * process model to close what it inherited and does not use. */
unsigned cr__handle_set_fds(const struct cr_handle_set *hs, int *fds);

/* Every backend's set starts with this. */
struct cr_handle_set {
    const struct cr_handle_set_ops *ops;
};

extern const struct cr_handle_set_ops cr__handle_set_epoll_ops;
extern const struct cr_handle_set_ops cr__handle_set_poll_ops;
extern const struct cr_handle_set_ops cr__handle_set_select_ops;

/*
 * cr_handle_set_wait() for a caller that has read the clock a moment ago:
 * since_ns, that cr_clock_now_ns() reading, is when timeout_ms counts from
 * (0: now). A wait the clock is read for only when a signal interrupts it,
 * not before: the reactor's take pays one clock reading a wait, its own
 * after it. Same threads as cr_handle_set_wait.
 */
CR_MUST_CHECK int cr__handle_set_wait(struct cr_handle_set *hs, struct cr_handle_event *evs,
                                      int max, int timeout_ms, uint64_t since_ns);

/*
 * Milliseconds left until deadline_ns (monotonic), for retrying a wait after
 * EINTR; -1 stays -1 (forever). Shared by the backends.
 */
int cr__handle_set_remaining_ms(int timeout_ms, uint64_t deadline_ns);

/* Deadline for a wait of timeout_ms from since_ns (a cr_clock_now_ns()
 * reading; 0: now, which reads the clock only for a positive timeout);
 * unused when timeout_ms <= 0. */
uint64_t cr__handle_set_deadline(int timeout_ms, uint64_t since_ns);

#endif /* CABRANK_HANDLE_SET_INTERNAL_H */
