/*
 * service.h - the sans-I/O service interface (docs/architecture.md). A service is
 * protocol logic with no I/O and no threads of its own: a model hands it the
 * bytes that arrived on a connection; it consumes what it can, queues its
 * answer on the connection as output segments (memory or file ranges), and
 * says what it wants next (more input within a time limit, or close). The
 * same service object runs unchanged under every model.
 *
 * Threads: a connection is served by one thread at a time, but successive
 * calls for one connection may come from different threads (Leader/Followers,
 * job queue). Calls for different connections run concurrently, so whatever
 * the service shares between connections (ctx) must be thread-safe.
 *
 * A handler may block (a database commit): that is what thread pools are for.
 * Under the single-threaded `reactor` model a blocking handler stalls every
 * connection.
 */
#ifndef CABRANK_SERVICE_H
#define CABRANK_SERVICE_H

#include <cabrank/common.h>
#include <sys/socket.h>

/* A connection as a service sees it: where output goes and what it wants
 * next. Owned by the model; valid only during a service call. */
struct cr_conn;

/* Releases a zero-copy segment once it is sent or dropped. */
typedef void cr_release_fn(void *arg);

struct cr_conn_info {
    struct sockaddr_storage peer;
    socklen_t peer_len;
    struct sockaddr_storage local;
    socklen_t local_len;
};

struct cr_service {
    const char *name;
    void *ctx; /* the service object, passed to every call; borrowed */

    /*
     * A new connection. May store per-connection state in *state (returns
     * owned, freed in close). 0, or -errno to refuse (the model closes it).
     * Optional.
     */
    int (*open)(void *ctx, struct cr_conn *c, void **state);

    /*
     * Bytes arrived: data[0..len) is everything received and not yet
     * consumed. Returns how many leading bytes it consumed (0: needs more),
     * or -errno to close at once (-EBADMSG for malformed input, after queuing
     * an error answer and calling cr_conn_close_after_flush() if it wants one
     * sent). The model calls again with the rest while the service consumes
     * and its output stays under the model's high-water mark (pipelining).
     */
    ssize_t (*input)(void *ctx, void *state, struct cr_conn *c, const char *data, size_t len);

    /*
     * Every queued byte was sent. The service may queue more (a long body in
     * pieces). Optional.
     */
    void (*drained)(void *ctx, void *state, struct cr_conn *c);

    /* The connection is gone (closed by either side, timed out or shut
     * down). Frees state. Optional. */
    void (*close)(void *ctx, void *state);

    /*
     * Process models (forking, prefork): process_init runs in each new
     * worker process right after fork, before it serves anything: a service
     * with threads of its own (a log flusher) starts them again there, since
     * fork copies only the forking thread. 0, or -errno (the worker exits
     * and the manager logs it). process_exit runs in the worker before it
     * exits (flush buffers). Never called under thread models. Optional.
     */
    int (*process_init)(void *ctx);
    void (*process_exit)(void *ctx);
};

/* The peer and local addresses. Thread: the serving thread. */
const struct cr_conn_info *cr_conn_info(const struct cr_conn *c);

/* Queues a copy of data[0..len). -ENOMEM. Thread: the serving thread. */
CR_MUST_CHECK int cr_conn_write(struct cr_conn *c, const void *data, size_t len);

/*
 * Reserves len writable bytes at the end of the output, to format into
 * without a copy; commit with cr_conn_commit(c, used). NULL on -ENOMEM.
 * Thread: the serving thread.
 */
char *cr_conn_reserve(struct cr_conn *c, size_t len);
void cr_conn_commit(struct cr_conn *c, size_t used);

/* Queues data[0..len) without copying; release(arg) runs once it is sent or
 * dropped (even on error). -ENOMEM (release has then run). Thread: the
 * serving thread. */
CR_MUST_CHECK int cr_conn_write_ref(struct cr_conn *c, const void *data, size_t len,
                                    cr_release_fn *release, void *arg);

/*
 * Queues len bytes of file fd from offset off, sent with sendfile where the
 * model can; fd is borrowed until release(arg) runs (once, sent or dropped).
 * -ENOMEM (release has then run). Thread: the serving thread.
 */
CR_MUST_CHECK int cr_conn_write_file(struct cr_conn *c, int fd, off_t off, size_t len,
                                     cr_release_fn *release, void *arg);

/* Bytes queued and not yet sent. Thread: the serving thread. */
size_t cr_conn_pending(const struct cr_conn *c);

/* Close once everything queued is sent (e.g. Connection: close); further
 * input is discarded. Thread: the serving thread. */
void cr_conn_close_after_flush(struct cr_conn *c);

/*
 * Close unless input arrives within ms from now (0: the model's default
 * idle timeout). The service sets it on every call where it waits: a header
 * timeout that counts the whole request head sets the time left of it, so a
 * trickling client cannot extend it. Thread: the serving thread.
 */
void cr_conn_set_input_timeout(struct cr_conn *c, uint64_t ms);

/*
 * As cr_conn_set_input_timeout, counting from since (a cr_clock_now_ns() or
 * cr_clock_event_ns() reading) instead of from now: a service that has the
 * time already spares a clock read. Thread: the serving thread.
 */
void cr_conn_set_input_timeout_since(struct cr_conn *c, uint64_t ms, uint64_t since);

/* Close if sending makes no progress for ms (0: the model's default).
 * Thread: the serving thread. */
void cr_conn_set_send_timeout(struct cr_conn *c, uint64_t ms);

/*
 * A request was answered: counts it in the server's statistics and, under
 * the process models, in the worker's scoreboard slot (requests, time of the
 * last request, max_requests_per_child). Services with a notion of requests
 * call it once per answer. Thread: the serving thread.
 */
void cr_conn_request_done(struct cr_conn *c);

/* Index of the worker (thread or process) serving now, for status pages and
 * per-worker data; < the server's worker count. Under the process models it
 * is the thread's index inside its process (< threads, or 1). Thread: the
 * serving thread. */
unsigned cr_conn_worker(const struct cr_conn *c);

/* The server this connection belongs to (for its stats). */
struct cr_server *cr_conn_server(const struct cr_conn *c);

#endif /* CABRANK_SERVICE_H */
