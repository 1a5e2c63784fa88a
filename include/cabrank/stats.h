/*
 * stats.h - the counters a running server reports without stopping
 * (cr_server_stats) and each worker thread's role and time per role (also
 * cr_lf_pool_stats). Plain data, filled by the library, read by the caller.
 */
#ifndef CABRANK_STATS_H
#define CABRANK_STATS_H

#include <cabrank/common.h>
#include <cabrank/role.h>

/* The most handle sets a server runs (cr_server_config.groups), each one
 * reported in cr_server_stats.group_accepted. */
#define CR_SERVER_MAX_GROUPS 256

/* Not in one group: a thread of the lf model with multiple_leaders (it leads
 * any set), or of a model without handle sets. */
#define CR_WORKER_ANY_GROUP (~0u)

struct cr_worker_stats {
    enum cr_role role;
    unsigned group;  /* lf: the handle set whose group it is in; hshr with groups > 1:
                        its set; else CR_WORKER_ANY_GROUP */
    uint64_t events; /* events or jobs handled */
    uint64_t role_ns[CR_ROLE_COUNT]; /* time spent in each role */
};

struct cr_server_stats {
    const char *model;
    const char *promotion; /* lf only, else NULL */
    unsigned workers;
    uint64_t uptime_ns;
    uint64_t accepted;
    uint64_t open_connections;
    uint64_t bytes_in;
    uint64_t bytes_out;
    uint64_t promotions; /* lf */
    uint64_t deferred;   /* lf with a promotion delay: cr_lf_pool_deferrals() */
    uint64_t taken_over;
    uint64_t queue_depth; /* hshr: the jobs queued, over every set */
    /* lf, and hshr with groups > 1: its handle sets (reactors), and the
     * connections each one accepted, in group order (0 and none for other
     * models). */
    unsigned groups;
    uint64_t group_accepted[CR_SERVER_MAX_GROUPS];
    /* Requests the service reported (cr_conn_request_done), server-wide. */
    uint64_t requests;
    /* Process models: worker processes alive, the generation, restarts,
     * workers that died other than by being told to stop. */
    unsigned processes;
    unsigned generation;
    uint64_t restarts;
    uint64_t crashes;
};

#endif /* CABRANK_STATS_H */
