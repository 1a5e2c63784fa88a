/*
 * role.h - the roles a worker thread takes in the thread models (the papers'
 * leader, follower, processing; the hshr listener), as cr_server_stats and
 * cr_lf_pool_stats report them (stats.h).
 */
#ifndef CABRANK_ROLE_H
#define CABRANK_ROLE_H

#include <cabrank/common.h>

/* What a worker is doing now, for status pages. */
enum cr_role {
    CR_ROLE_IDLE = 0,   /* not started, or between jobs (tpc, hshr worker) */
    CR_ROLE_LEADER,     /* waiting for events on the handle set */
    CR_ROLE_FOLLOWER,   /* waiting to become leader */
    CR_ROLE_PROCESSING, /* running a handler */
    CR_ROLE_LISTENER,   /* hshr: the reactor thread */
    CR_ROLE_STOPPED,
    CR_ROLE_COUNT
};

/* Name of a role ("leader", ...); "unknown" out of range. Thread-safe. */
const char *cr_role_name(enum cr_role role);

#endif /* CABRANK_ROLE_H */
