/*
 * scoreboard.h - a worker process's slot in the scoreboard of the process
 * models (prefork, forking; Apache's scoreboard), as cr_server_scoreboard
 * copies it out for status pages. Plain data.
 */
#ifndef CABRANK_SCOREBOARD_H
#define CABRANK_SCOREBOARD_H

#include <cabrank/common.h>

/* A worker process's state in the scoreboard (prefork, forking). */
enum cr_worker_state {
    CR_WORKER_FREE = 0,  /* the slot is unused */
    CR_WORKER_STARTING,  /* forked, not yet serving */
    CR_WORKER_IDLE,      /* waiting for its turn to accept (a follower) */
    CR_WORKER_LISTENING, /* holds the accept lock, waits on the listeners (the leader) */
    CR_WORKER_BUSY,      /* serving a connection */
    CR_WORKER_STOPPING,  /* told to stop: finishing what is in flight */
    CR_WORKER_DEAD,      /* exited; the manager reaps it and frees the slot */
    CR_WORKER_STATE_COUNT
};

/* Name of a state ("idle", ...); "unknown" out of range. Thread-safe. */
const char *cr_worker_state_name(enum cr_worker_state state);

/* One scoreboard slot, as cr_server_scoreboard copies it out. */
struct cr_scoreboard_entry {
    int pid;             /* 0 while STARTING, until the new process runs */
    unsigned generation; /* bumped by each graceful restart */
    enum cr_worker_state state;
    unsigned busy_threads;    /* threads serving a connection now */
    uint64_t connections;     /* connections served */
    uint64_t requests;        /* requests served (cr_conn_request_done) */
    uint64_t bytes;           /* bytes sent */
    uint64_t last_request_ns; /* wall clock (CLOCK_REALTIME) of the last request; 0: none */
    uint64_t busy_ns;         /* BUSY: how long on the current connection */
};

#endif /* CABRANK_SCOREBOARD_H */
