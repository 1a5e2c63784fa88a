/*
 * server.h - runs one service on one or more listening sockets under a
 * concurrency model chosen by name at run time:
 *
 *   reactor   one thread, one Reactor
 *   lf        Leader/Followers thread pool over one or more Reactors (groups)
 *   hshr      Half-Sync/Half-Reactive: a reactor thread queues jobs to workers
 *   tpc       a thread per connection, blocking I/O, capped
 *   forking   a process per connection: the master accepts and forks a child
 *             that serves the connection to its end and exits (capped)
 *   prefork   a Worker Pool Manager (the master) keeps a pool of worker
 *             processes that take turns on the listening sockets (an accept
 *             lock: Leader/Followers across processes), each optionally
 *             running several threads; a scoreboard in shared memory
 *   proactor  asynchronous operations (io_uring, or an emulated engine) and
 *             a completion dispatcher (proactor.h)
 *
 * Process models run the service in child processes: the service's open,
 * input, drained and close calls happen there, never in the master, so what
 * the service counts in its own memory is per process (counters meant for
 * the whole server belong in shared memory, or in cr_server_stats and the
 * scoreboard, which the models keep in shared memory). See service.h for
 * the process_init/process_exit hooks.
 *
 * Lifecycle: create (binds the listeners), start (threads run), then stop and
 * wait from any thread, or cr_server_run() which starts, turns TERM/INT into
 * a graceful stop and QUIT into an immediate one, and waits. destroy frees.
 */
#ifndef CABRANK_SERVER_H
#define CABRANK_SERVER_H

#include <cabrank/common.h>
#include <cabrank/service.h>

struct cr_server;

#define CR_SERVER_MAX_LISTEN 16

/* cr_server_config.loopback_congestion: as on the other listeners. */
#define CR_SERVER_CONGESTION_SAME "same"

/* cr_server_config.send_budget's default: 256 KiB, as lighttpd's writes. */
#define CR_SERVER_SEND_BUDGET (256 * 1024)

/* cr_server_config.notsent_lowat's default: 64 KiB. */
#define CR_SERVER_NOTSENT_LOWAT (64 * 1024)
/* cr_server_config.notsent_lowat: the system's (net.ipv4.tcp_notsent_lowat). */
#define CR_SERVER_NOTSENT_SYSTEM (~0u)

struct cr_server_config {
    const char *model;                        /* NULL: "lf" */
    const char *listen[CR_SERVER_MAX_LISTEN]; /* addresses; none: "127.0.0.1:8080" */
    int listen_fds[CR_SERVER_MAX_LISTEN];     /* or inherited listening sockets (> 0) */
    int backlog;                              /* 0: 511 */
    /* TCP_DEFER_ACCEPT on every listener (cr_listener_config); the reactor
     * and lf models then read a new connection's request at once */
    unsigned defer_accept_s;
    /* TCP_CONGESTION on every listener, which accepted connections inherit
     * (cr_listener_congestion; loopback ones: loopback_congestion); NULL:
     * the system's */
    const char *tcp_congestion;
    /* TCP_CONGESTION on the listeners bound to a loopback address
     * (cr_listener_is_loopback), whose connections come from this host,
     * and after accept on each connection a wildcard listener takes from
     * this host (its local address on loopback):
     * NULL: "cubic" where the kernel allows it, unless tcp_congestion is
     * set; "same": what the other listeners get; a name: that one, or
     * cr_server_create fails. Loopback has no bottleneck for BBR to probe
     * and no queue for pacing to spare, yet BBR without the fq qdisc paces
     * each socket with a timer: 1 MiB answers ran at 2.2k-6.8k req/s from
     * run to run where cubic made a steady 6.5k-7.2k at half the server
     * CPU (README). */
    const char *loopback_congestion;
    const char *backend;   /* handle set; NULL: epoll */
    int threads;           /* workers; 0: number of CPUs (tpc: cap 1024) */
    const char *promotion; /* lf: native|lifo|fifo|priority|lifo-lockfree */
    int groups;            /* lf: handle sets (reactors); 0: 1 */
    /* lf with lifo: defer promotions until a handler has run this long
     * (cr_lf_pool_config); 0: promote before every dispatch */
    unsigned promotion_delay_us;
    /* reactor, lf, hshr: a thread about to sleep in the handle set polls it
     * first, at most this long, as long as the idle gaps seen are shorter
     * (cr_reactor_config.busy_poll_us); 0: sleeps at once */
    unsigned busy_poll_us;
    bool multiple_leaders;    /* lf, groups > 1: one follower set; a thread leads any set
                                 without a leader (else each set has its own threads) */
    int queue_size;           /* hshr: job queue slots; 0: 1024 */
    int max_connections;      /* stop accepting beyond; 0: 10000 */
    uint64_t idle_timeout_ms; /* default input timeout; 0: 60000 */
    uint64_t send_timeout_ms; /* no send progress; 0: 60000 */
    size_t output_high_water; /* stop feeding input beyond; 0: 256 KiB */
    /* Bytes sent to one connection in a turn before the connections ready
     * meanwhile get theirs (a large file goes out in slices, as with
     * nginx's sendfile_max_chunk); 0: CR_SERVER_SEND_BUDGET, SIZE_MAX:
     * until its socket is full. For the reactor, lf and hshr models: where
     * a connection has a thread of its own (tpc, forking, prefork) none
     * waits for a turn, and the proactor sends as its completions come. */
    size_t send_budget;
    /* TCP_NOTSENT_LOWAT on every listener, which accepted connections
     * inherit (cr_listener_notsent_lowat): a connection's socket takes more
     * of an answer only while less than this many bytes of it wait unsent.
     * The kernel then sends a large body mostly inside the server's own
     * sends. With all of it queued, each window update from the client
     * would send the next part on the client's time. And the server queues
     * no more than this ahead of a slow reader. 1 MiB answers on
     * loopback: 5.0k-5.2k req/s at 64 KiB, 4.6k-4.8k with the system's
     * unlimited queue, for more server CPU (README). 0:
     * CR_SERVER_NOTSENT_LOWAT, except under prefork, whose blocking
     * workers made 1m.bin 12% slower with it: the system's there;
     * CR_SERVER_NOTSENT_SYSTEM: the system's. */
    unsigned notsent_lowat;
    /* Process models (forking, prefork). */
    int workers;     /* prefork: started at once, and never fewer; 0: CPUs */
    int min_spare;   /* prefork: idle workers kept at least (up to max_workers); 0: 1 */
    int max_spare;   /* prefork: idle workers beyond this are retired (not below
                        workers); 0: workers + min_spare */
    int max_workers; /* prefork: cap on workers; forking: cap on children; 0: 256 */
    uint64_t max_requests_per_child; /* prefork: retire a worker after; 0: never */
    const char *accept_lock;         /* prefork: pthread|fcntl|none|reuseport; NULL: pthread */
    uint64_t busy_warn_ms; /* prefork: log a worker busy on one connection longer; 0: 60000 */
    /* proactor (proactor.h). */
    const char *dispatch;     /* single|lf|ring-per-thread; NULL: lf */
    const char *async_engine; /* uring|emulated; NULL: uring where it works */
    /*
     * cr_server_run: SIGHUP calls on_hup (re-read the configuration), then
     * cr_server_restart (prefork: a new generation of workers). No process
     * model forks a child while on_hup runs, so a child copies the
     * configuration whole, old or new; on_hup must not start one itself.
     */
    void (*on_hup)(struct cr_server *s, void *arg);
    void (*on_usr1)(struct cr_server *s, void *arg); /* cr_server_run: SIGUSR1 */
    /* cr_server_run: once the model serves (prefork: the first workers
     * run), before the first signal; the place to say "ready". */
    void (*on_started)(struct cr_server *s, void *arg);
    void *signal_arg;
};

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

/* Name of a state ("idle", ...). */
const char *cr_worker_state_name(enum cr_worker_state state);

/* One scoreboard slot, as cr_server_scoreboard copies it out. */
struct cr_scoreboard_entry {
    int pid;
    unsigned generation; /* bumped by each graceful restart */
    enum cr_worker_state state;
    unsigned busy_threads;    /* threads serving a connection now */
    uint64_t connections;     /* connections served */
    uint64_t requests;        /* requests served (cr_conn_request_done) */
    uint64_t bytes;           /* bytes sent */
    uint64_t last_request_ns; /* wall clock (CLOCK_REALTIME) of the last request; 0: none */
    uint64_t busy_ns;         /* BUSY: how long on the current connection */
};

/* Name of a role ("leader", ...). */
const char *cr_role_name(enum cr_role role);

struct cr_worker_stats {
    enum cr_role role;
    uint64_t events;                 /* events or jobs handled */
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
    uint64_t queue_depth; /* hshr */
    /* lf: its handle sets (reactors), and the connections each one accepted,
     * in group order (the first 64 groups; 0 and none for other models). */
    unsigned groups;
    uint64_t group_accepted[64];
    /* Requests the service reported (cr_conn_request_done), server-wide. */
    uint64_t requests;
    /* Process models: worker processes alive, the generation, restarts,
     * workers that died other than by being told to stop. */
    unsigned processes;
    unsigned generation;
    uint64_t restarts;
    uint64_t crashes;
};

/*
 * Creates a server for svc (borrowed; must outlive the server) and binds its
 * listeners. -EINVAL for an unknown model, promotion or bad address;
 * -errno of bind. *out returns owned. Thread-safe.
 */
CR_MUST_CHECK int cr_server_create(struct cr_server **out, const struct cr_server_config *cfg,
                                   const struct cr_service *svc);

/* Names of the models, NULL-terminated. Thread-safe. */
const char *const *cr_server_models(void);

/* Starts the workers; returns once they run. -errno. Owner thread only. */
CR_MUST_CHECK int cr_server_start(struct cr_server *s);

/*
 * Stops: graceful stops accepting, lets in-flight requests finish and closes
 * idle connections; otherwise closes everything at once. Returns at once;
 * cr_server_wait() waits. Thread-safe; async-signal-unsafe.
 */
void cr_server_stop(struct cr_server *s, bool graceful);

/*
 * Graceful restart: prefork starts a new generation of workers (forked now,
 * so they see whatever configuration the application changed) and lets the
 * old ones finish their in-flight requests and exit; the listening sockets
 * stay open throughout. Other models have no workers to replace: 0, nothing
 * done. Thread-safe.
 */
CR_MUST_CHECK int cr_server_restart(struct cr_server *s);

/* Waits until every worker has exited after a stop. 0 or -errno. Owner
 * thread only. */
CR_MUST_CHECK int cr_server_wait(struct cr_server *s);

/*
 * start + signals (TERM/INT graceful, QUIT immediate, HUP/USR1 callbacks) +
 * wait. Blocks those signals in the calling thread before starting workers.
 * Owner thread only.
 */
CR_MUST_CHECK int cr_server_run(struct cr_server *s);

/* Frees a stopped (or never started) server; NULL-safe. */
void cr_server_destroy(struct cr_server *s);

/* Number of listeners, and the bound address of listener i ("127.0.0.1:8080").
 * Thread-safe. */
unsigned cr_server_listeners(const struct cr_server *s);
CR_MUST_CHECK int cr_server_address(const struct cr_server *s, unsigned i, char *buf, size_t len);

/*
 * Counters and each worker's role, readable at any time without stopping the
 * server. Fills at most max workers; returns how many the server has.
 * Thread-safe.
 */
unsigned cr_server_stats(const struct cr_server *s, struct cr_server_stats *st,
                         struct cr_worker_stats *workers, unsigned max);

/*
 * The scoreboard of a process model: copies at most max slots in use (state
 * not FREE) into entries; returns how many are in use (0 for thread models).
 * Readable from the master and from any worker process. Thread-safe.
 */
unsigned cr_server_scoreboard(const struct cr_server *s, struct cr_scoreboard_entry *entries,
                              unsigned max);

#endif /* CABRANK_SERVER_H */
