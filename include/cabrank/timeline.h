/*
 * timeline.h - what each worker of a server did over the last moments: the
 * roles its threads took (the papers' leader, follower, processing,
 * listener), the leadership passed from thread to thread, and the states of
 * a process pool's workers; the papers' sequence diagrams, recorded live.
 *
 * A timeline holds one lane per thread (or worker process), each a ring of
 * the last events it recorded, written by that thread alone with no lock, no
 * allocation and no clock reading of its own (it stamps a change with the
 * reading the model took for it). cr_server_timeline reads a server's;
 * cr_server_config.timeline turns it off or sizes the rings.
 */
#ifndef CABRANK_TIMELINE_H
#define CABRANK_TIMELINE_H

#include <cabrank/common.h>

struct cr_timeline;

/* Events a lane keeps by default. */
#define CR_TIMELINE_EVENTS_DEFAULT 1024u

/* What a lane's states are. */
enum cr_timeline_lane_kind {
    CR_TIMELINE_THREAD = 0, /* a thread: states are enum cr_role (role.h) */
    CR_TIMELINE_PROCESS,    /* a worker process: enum cr_worker_state (scoreboard.h) */
};

/* One change of a lane's state. */
struct cr_timeline_point {
    uint64_t t_ns; /* cr_clock_now_ns() */
    int state;     /* the lane kind's enum */
    /* A leadership handed on: the lane (index in the view) of the thread
     * that gave it up, which this one now holds; -1: none. */
    int from;
};

struct cr_timeline_lane {
    char name[32]; /* "lf 3", "hshr listener", "pid 1234" */
    enum cr_timeline_lane_kind kind;
    size_t npoints;
    struct cr_timeline_point *points; /* oldest first */
};

/* A copy of a timeline: every lane's events since a time. */
struct cr_timeline_view {
    uint64_t now_ns; /* cr_clock_now_ns() when read */
    unsigned nlanes;
    struct cr_timeline_lane *lanes;
};

/* A timeline whose lanes keep events_per_lane events each (0: the
 * default; rounded up to a power of two, at most 65536). *out returns
 * owned. -ENOMEM, -EINVAL. Thread-safe. */
CR_MUST_CHECK int cr_timeline_create(struct cr_timeline **out, unsigned events_per_lane);

/* NULL-safe. Every lane must be gone (its pool or model destroyed). */
void cr_timeline_destroy(struct cr_timeline *t);

/* Copies every lane's events from since_ns (cr_clock_now_ns() scale) on,
 * and the state each was in at since_ns as a first point at since_ns.
 * *out returns owned (cr_timeline_view_free). -ENOMEM. Thread-safe. */
CR_MUST_CHECK int cr_timeline_read(const struct cr_timeline *t, uint64_t since_ns,
                                   struct cr_timeline_view **out);

/* NULL-safe. */
void cr_timeline_view_free(struct cr_timeline_view *v);

#endif /* CABRANK_TIMELINE_H */
