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
#include <cabrank/role.h>
#include <cabrank/scoreboard.h>
#include <cabrank/server_options.h>
#include <cabrank/service.h>
#include <cabrank/stats.h>
#include <cabrank/timeline.h>

struct cr_server;

#define CR_SERVER_MAX_LISTEN 16

/* cr_server_config.timeline_events: no timeline. */
#define CR_SERVER_TIMELINE_OFF (-1)

/* cr_server_config.loopback_congestion: as on the other listeners. */
#define CR_SERVER_CONGESTION_SAME "same"

/* Zero means default in every member; the per-model groups are listed in
 * server_options.h. */
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
     * each socket with a timer (docs/design/server_api.md). */
    const char *loopback_congestion;
    const char *backend; /* handle set; NULL: epoll */
    /* workers; 0: the CPUs this process may use (cpu.h), lf: 2 per handle
     * set, tpc: cap 1024 */
    int threads;
    int max_connections; /* stop accepting beyond; 0: 10000 */
    /* The timeline (timeline.h, cr_server_timeline): events each thread or
     * worker process keeps; 0: CR_TIMELINE_EVENTS_DEFAULT;
     * CR_SERVER_TIMELINE_OFF: none recorded. */
    int timeline_events;
    CR_SERVER_CONN_OPTIONS
    CR_SERVER_REACTOR_OPTIONS
    CR_SERVER_LF_OPTIONS
    CR_SERVER_HSHR_OPTIONS
    CR_SERVER_PROCESS_OPTIONS
    CR_SERVER_PROACTOR_OPTIONS
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
 * What the server's workers did from since_ns (cr_clock_now_ns() scale) on:
 * a lane per thread (every thread model) or per worker process (prefork,
 * worker), as cr_timeline_read. *out returns owned (cr_timeline_view_free).
 * -ENOENT when the timeline is off, -ENOMEM. Readable from the master and
 * from any worker process. Thread-safe.
 */
CR_MUST_CHECK int cr_server_timeline(const struct cr_server *s, uint64_t since_ns,
                                     struct cr_timeline_view **out);

/*
 * The scoreboard of a process model: copies at most max slots in use (state
 * not FREE) into entries; returns how many are in use (0 for thread models).
 * Readable from the master and from any worker process. Thread-safe.
 */
unsigned cr_server_scoreboard(const struct cr_server *s, struct cr_scoreboard_entry *entries,
                              unsigned max);

#endif /* CABRANK_SERVER_H */
