/*
 * server_options.h - the option groups of struct cr_server_config (server.h):
 * what each connection gets, and what one model or family of models reads.
 * Each group is a list of members that server.h spells into the one config
 * struct, so the members keep flat names and a designated initialiser names
 * them directly: { .model = "prefork", .workers = 4, .send_budget = 0 }.
 * A nested struct per model would change every caller to .prefork.workers;
 * C has no anonymous member of a named struct type. Zero means default in
 * every member. Include server.h, not this header, to configure a server.
 */
#ifndef CABRANK_SERVER_OPTIONS_H
#define CABRANK_SERVER_OPTIONS_H

#include <cabrank/common.h>

/* cr_server_config.send_budget's default: 256 KiB, as lighttpd's writes. */
#define CR_SERVER_SEND_BUDGET (256 * 1024)

/* cr_server_config.notsent_lowat's default: 64 KiB. */
#define CR_SERVER_NOTSENT_LOWAT (64 * 1024)
/* cr_server_config.notsent_lowat: the system's (net.ipv4.tcp_notsent_lowat). */
#define CR_SERVER_NOTSENT_SYSTEM (~0u)

/*
 * Every model: the connection driver's deadlines, backpressure and send
 * pacing.
 *
 * send_budget: bytes sent to one connection in a turn before the
 * connections ready meanwhile get theirs (a large file goes out in slices,
 * as with nginx's sendfile_max_chunk); 0: CR_SERVER_SEND_BUDGET, SIZE_MAX:
 * until its socket is full. For the reactor, lf and hshr models: where a
 * connection has a thread of its own (tpc, forking, prefork) none waits for
 * a turn, and the proactor sends as its completions come.
 *
 * notsent_lowat: TCP_NOTSENT_LOWAT on every listener, which accepted
 * connections inherit (cr_listener_notsent_lowat): a connection's socket
 * takes more of an answer only while less than this many bytes of it wait
 * unsent, so the kernel sends a large body mostly inside the server's own
 * sends rather than on each window update from the client, and the server
 * queues no more than this ahead of a slow reader (docs/design/server_api.md
 * has the figures). 0: CR_SERVER_NOTSENT_LOWAT, except under prefork, whose
 * blocking workers it slows: the system's there; CR_SERVER_NOTSENT_SYSTEM:
 * the system's.
 */
#define CR_SERVER_CONN_OPTIONS                                                                     \
    uint64_t idle_timeout_ms; /* default input timeout; 0: 60000 */                                \
    uint64_t send_timeout_ms; /* no send progress; 0: 60000 */                                     \
    size_t output_high_water; /* stop feeding input beyond; 0: 256 KiB */                          \
    size_t send_budget;                                                                            \
    unsigned notsent_lowat;

/*
 * reactor, lf, hshr: a thread about to sleep in the handle set polls it
 * first, at most busy_poll_us, as long as the idle gaps seen are shorter
 * (cr_reactor_config.busy_poll_us); 0: sleeps at once.
 */
#define CR_SERVER_REACTOR_OPTIONS unsigned busy_poll_us;

/*
 * lf (Leader/Followers, lf_pool.h). groups: handle sets (reactors), each
 * with its own listener (SO_REUSEPORT, so the kernel spreads connections
 * across sets) and its own Leader/Followers group of threads/groups threads,
 * at most CR_SERVER_MAX_GROUPS. 0: one per CPU this process may use
 * (cr_cpu_usable: its affinity mask and cgroup quota), or where threads is
 * given, threads / 2 sets (at least one, at most one per CPU), so each set
 * keeps a follower to lead it while a handler blocks; threads 0 under lf is
 * then 2 per set. promotion_delay_us: with lifo, defer promotions until a
 * handler has run this long (cr_lf_pool_config); 0: promote before every
 * dispatch. hshr reads groups too: that many independent sets, each with
 * its own listener thread, listener copies, job queue and threads/groups
 * workers; 0 there is 1 (a listener per set loses on keep-alive,
 * docs/design/hshr.md). multiple_leaders: with groups > 1, one follower set whose
 * threads lead any set without a leader (else each set has its own threads).
 */
#define CR_SERVER_LF_OPTIONS                                                                       \
    const char *promotion; /* native|lifo|fifo|priority|lifo-lockfree; NULL: lifo */               \
    int groups;            /* handle sets; 0: per usable CPU (above) */                            \
    unsigned promotion_delay_us;                                                                   \
    bool multiple_leaders;

/* hshr (Half-Sync/Half-Reactive). */
#define CR_SERVER_HSHR_OPTIONS int queue_size; /* job queue slots; 0: 1024 */

/* Process models (forking, prefork). */
#define CR_SERVER_PROCESS_OPTIONS                                                                  \
    int workers;     /* prefork: started at once, and never fewer; 0: CPUs */                      \
    int min_spare;   /* prefork: idle workers kept at least (up to max_workers); 0: 1 */           \
    int max_spare;   /* prefork: idle workers beyond this are retired (not below                   \
                        workers); 0: workers + min_spare */                                        \
    int max_workers; /* prefork: cap on workers; forking: cap on children; 0: 256 */               \
    uint64_t max_requests_per_child; /* prefork: retire a worker after; 0: never */                \
    const char *accept_lock;         /* prefork: pthread|fcntl|none|reuseport; NULL: pthread */    \
    uint64_t busy_warn_ms; /* prefork: log a worker busy on one connection longer; 0: 60000 */

/* proactor (proactor.h). */
#define CR_SERVER_PROACTOR_OPTIONS                                                                 \
    const char *dispatch;     /* single|lf|ring-per-thread; NULL: lf on 1-2 usable CPUs, else      \
                                 ring-per-thread */                                                \
    const char *async_engine; /* uring|emulated; NULL: uring where it works */

#endif /* CABRANK_SERVER_OPTIONS_H */
