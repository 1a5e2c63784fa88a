/*
 * driver.h - the measuring half of cabrank-bench, shared by its files: starting and stopping
 * servers (run_server.c, line_server.c), the peers' configurations (peers.c), the document root
 * (docroot.c), the loads (load_wrk.c: HTTP through wrk; load_line.c: the line protocol, closed and
 * open loop; load_intervals.c: the pattern paper's t_conn, t_res1, t_res2+). main.c orchestrates.
 * Everything runs on the program's one thread; the children are the servers and wrk.
 */
#ifndef CABRANK_BENCH_DRIVER_H
#define CABRANK_BENCH_DRIVER_H

#include <cabrank/common.h>

#include "../common/samples.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ------------------------------------------------------------ servers (run_server.c) */

/* A server we started: its own session (process group = pid), so a stop reaches workers. */
struct bench_server {
    pid_t pid;
    uint16_t port;
    int out_fd; /* read end of its stdout, kept open so its writes never fail; -1: none */
};

/*
 * Starts argv (argv[0] a path, or a name looked up in PATH) in a new session with stdout
 * piped to us and stderr to log_path (NULL: ours), and waits up to timeout_ms for a stdout
 * line "listening on <addr>:<port>". Returns 0 (s filled) or -errno (-ETIMEDOUT; the child
 * is then killed and reaped).
 */
CR_MUST_CHECK int bench_server_spawn(char *const argv[], const char *log_path, int timeout_ms,
                                     struct bench_server *s);

/*
 * Starts argv as bench_server_spawn() but for a server listening on a port we chose
 * (s->port): ready when GET /hello.txt answers 200, within timeout_ms. Returns 0 or -errno
 * (-ETIMEDOUT, -ECHILD when it exited).
 */
CR_MUST_CHECK int bench_server_spawn_http(char *const argv[], const char *log_path, uint16_t port,
                                          int timeout_ms, struct bench_server *s);

/* Adopts an already forked child (its own session) as a server on port. */
void bench_server_adopt(struct bench_server *s, pid_t pid, uint16_t port);

struct bench_options;
struct bench_config;

/*
 * Forks the line-protocol server under c's model with o's threads and pool sizes
 * (line_server.c), on the servers' CPUs when pinned (cores.h). 0 (s filled) or -errno.
 */
CR_MUST_CHECK int bench_line_server_start(const struct bench_options *o,
                                          const struct bench_config *c, struct bench_server *s);

struct cr_server_config;

/* The same under a configuration of the caller's (its listen address and log level are
 * replaced: 127.0.0.1:0, warnings). 0 (s filled) or -errno. */
CR_MUST_CHECK int bench_line_server_start_cfg(const struct cr_server_config *cfg,
                                              struct bench_server *s);

/* TERM, up to 5 s, then KILL to its whole process group; reaps it. NULL-safe, idempotent. */
void bench_server_stop(struct bench_server *s);

/* A port free on 127.0.0.1 now (bound to port 0, then closed). 0 or -errno. */
CR_MUST_CHECK int bench_free_port(uint16_t *port);

/* GET path over a fresh connection: 0 when the status is 200 and the body *size bytes
 * (size NULL: any), -EPROTO for another answer, -errno when it cannot connect. */
CR_MUST_CHECK int bench_http_check(uint16_t port, const char *path, const size_t *size,
                                   int timeout_ms);

/* ------------------------------------------------------------ document root (docroot.c) */

/* The files peers.sh serves, in order: hello.txt (13 B), 1k.bin, 64k.bin, 1m.bin. */
struct bench_file {
    const char *name;
    size_t size;
};
extern const struct bench_file bench_files[4];

/* Size of a file of bench_files; -1 when the name is none of them. */
long long bench_file_size(const char *name);

/*
 * Makes a work directory under tmp ("<tmp>/cabrank-bench.XXXXXX", mode 755 so servers that
 * drop privileges reach it) with www/ holding bench_files and run/ (mode 1777) for logs.
 * dir receives its path (PATH_MAX bytes). 0 or -errno.
 */
CR_MUST_CHECK int bench_workdir_create(char *dir);

/* Removes the work directory and everything in it. */
void bench_workdir_remove(const char *dir);

/* ------------------------------------------------------------ peers (peers.c) */

#define BENCH_PEER_ARGS 8

/* The peers cabrank-bench knows, in order: nginx, h2o, lighttpd, apache-event,
 * apache-prefork. NULL-terminated. */
extern const char *const bench_peer_names[];

/* Whether the peer's program is installed (in PATH, or /usr/sbin). */
bool bench_peer_installed(const char *name);

/* A peer's command line, with storage for its strings. */
struct bench_peer_cmd {
    char *argv[BENCH_PEER_ARGS];
    char strs[BENCH_PEER_ARGS][PATH_MAX];
    char log[PATH_MAX];
};

/*
 * Writes the peer's configuration (peers.sh's settings: access logs off, sendfile, 2
 * workers or threads, keep-alive without a request limit) into dir, serving dir/www on
 * 127.0.0.1:port, and fills cmd. cores > 0 (--cores): the peer's workers or threads follow
 * it (nginx worker_processes, h2o num-threads, lighttpd server.max-worker, Apache event's
 * processes). Returns 0, -ENOENT (unknown peer) or -errno.
 */
CR_MUST_CHECK int bench_peer_prepare(const char *name, const char *dir, uint16_t port,
                                     unsigned cores, struct bench_peer_cmd *cmd);

/*
 * A canned peer's command line (canned.h): this program re-executed as "--canned MODE --listen
 * 127.0.0.1:0", logging into dir/run/<name>.log; it reports its port as cabrank-httpd does
 * (bench_server_spawn()). Returns 0, -ENOENT (not a canned peer) or -errno.
 */
CR_MUST_CHECK int bench_canned_prepare(const char *name, const char *dir,
                                       struct bench_peer_cmd *cmd);

/* ------------------------------------------------------------ loads */

/* What a load measured. NAN: not measured. */
struct bench_load_result {
    double rps;
    struct bench_pcts pcts;
    uint64_t requests;
    uint64_t errors;
    double seconds; /* measured time */
};

/* An HTTP load through wrk (load_wrk.c). */
struct bench_http_load {
    uint16_t port;
    const char *path;     /* "/hello.txt" */
    unsigned connections; /* 1..1024 */
    double seconds;       /* rounded up to whole seconds (wrk's unit) */
    bool close;           /* Connection: close on every request */
    const char *script;   /* the Lua file of bench_wrk_script() */
    unsigned threads;     /* wrk threads; 0: 1 */
};

/* Writes the Lua script that makes wrk print its exact percentiles and counts into
 * dir/report.lua; path receives it (PATH_MAX bytes). 0 or -errno. */
CR_MUST_CHECK int bench_wrk_script(const char *dir, char *path);

/* Whether wrk is in PATH. */
bool bench_wrk_found(void);

/* Parses the line the script makes wrk print out of its whole output (NUL-terminated) into
 * *r (requests, seconds, req/s, errors, percentiles in µs). 0 or -EPROTO. For the tests. */
CR_MUST_CHECK int bench__wrk_parse(const char *out, struct bench_load_result *r);

/* Runs wrk once. 0 (r filled), -ENOENT (no wrk), -EPROTO (no figures in its output), or
 * -errno. A point with no request served is still 0 with rps 0 and errors counted. */
CR_MUST_CHECK int bench_wrk_run(const struct bench_http_load *l, struct bench_load_result *r);

/* The line protocol's load (load_line.c): "<id> ECHO ping\n" answered by one line. */
struct bench_line_load {
    uint16_t port;
    unsigned connections; /* 1..1024 */
    double seconds;
    double rate; /* open loop: requests per second over all connections; 0: closed loop */
    /* A share of requests (0..1, spread evenly) is "SLEEP <sleep_ms>" instead of ECHO: a
     * handler that blocks. 0: none. */
    double sleep_share;
    unsigned sleep_ms;
};

/*
 * Closed loop: every connection keeps one request outstanding; latency is from its send.
 * Open loop: request k is due at t0 + k / rate on connection k mod N whatever is
 * outstanding (pipelined), and its latency runs from that intended time, so a server
 * falling behind shows in the percentiles (no coordinated omission). Requests not answered
 * within 2 s after the end, and error replies, are errors. The first tenth (at most 0.5 s)
 * warms up and is not counted. 0 or -errno (cannot connect).
 */
CR_MUST_CHECK int bench_line_run(const struct bench_line_load *l, struct bench_load_result *r);

/* Whether request number id of a load is a SLEEP, for a sleep_share of share. */
bool bench_line_sleeps(uint64_t id, double share);

/* The intervals of the pattern paper (load_intervals.c). */
struct bench_interval_load {
    uint16_t port;
    const char *path; /* a file of size bytes */
    size_t size;
    unsigned clients;  /* sequential clients measured (after 20 not measured) */
    unsigned requests; /* requests after the first on each connection */
    double seconds;    /* at most */
};

struct bench_interval_result {
    struct bench_pcts conn; /* t_conn: connect() until established */
    struct bench_pcts res1; /* t_res1: first request until its whole response */
    struct bench_pcts res2; /* t_res2+: each further request on the connection */
    unsigned clients;       /* measured */
    uint64_t errors;        /* 1 when a client failed (the run stops there) */
    const char *why;        /* static: why it stopped early; NULL */
    double seconds;
};

/* Runs the sequential clients: connect, GET, requests more GETs, close. 0 or -errno. */
CR_MUST_CHECK int bench_intervals_run(const struct bench_interval_load *l,
                                      struct bench_interval_result *r);

#endif /* CABRANK_BENCH_DRIVER_H */
