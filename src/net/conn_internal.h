/*
 * conn_internal.h - the connection driver every model shares (src/net/conn.c;
 * its output queue in conn_output.c): reads into the calling thread's
 * buffer, feeds the service, writes what it queued (writev for memory,
 * sendfile for file ranges), applies backpressure and tracks deadlines.
 * Models only decide which thread runs a connection and how it waits; the
 * driver does the I/O. Library-internal.
 *
 * A connection is used by one thread at a time (the model guarantees it:
 * one-shot handles, job ownership, or a dedicated thread).
 *
 * Two ways to drive a connection: cr__conn_handle (readiness: the driver
 * reads and sends itself) and cr__conn_feed/next_output/sent (completion:
 * the model performs the I/O and reports it), over the same logic.
 *
 * Memory: reading goes to a thread-local buffer; only input the service did
 * not consume (a partial request) is copied to a per-connection buffer, and
 * output is kept per connection only when the socket would block. An idle
 * keep-alive connection holds no buffer.
 */
#ifndef CABRANK_CONN_INTERNAL_H
#define CABRANK_CONN_INTERNAL_H

#include <cabrank/server_options.h>
#include <cabrank/service.h>

#include <sys/uio.h>

#include "os/stop_internal.h"

struct cr_server;

/* What the connection needs next from its model. */
enum cr__conn_next {
    CR__CONN_READ = 1,  /* wait until readable */
    CR__CONN_WRITE = 2, /* output is pending: wait until writable */
    CR__CONN_CLOSE = 3, /* done: destroy it */
};

struct cr__conn_config {
    const struct cr_service *svc; /* borrowed */
    struct cr_server *server;     /* borrowed; for cr_conn_server */
    uint64_t idle_timeout_ms;
    uint64_t send_timeout_ms;
    size_t output_high_water;
    /* Bytes sent per cr__conn_handle call at most before other connections
     * get a turn; 0: CR_SERVER_SEND_BUDGET, SIZE_MAX: until the socket is
     * full (see cr_server_config.send_budget); cr__conn_serve_blocking
     * sets SIZE_MAX. */
    size_t send_budget;
    /* TCP_CONGESTION for a connection whose local address is loopback (one
     * a wildcard listener took from this host; cr_server_config's
     * loopback_congestion); NULL: it keeps what it inherited. Static. */
    const char *loopback_congestion;
    /* Server-wide counters the driver adds its bytes to (relaxed atomics, once
     * per cr__conn_handle call); NULL: none. Borrowed. */
    uint64_t *bytes_in;
    uint64_t *bytes_out;
    /* cr_conn_request_done: adds 1 to *requests (relaxed; NULL: none), then
     * calls on_request(on_request_arg) when set (process models: the
     * worker's scoreboard slot). */
    uint64_t *requests;
    void (*on_request)(void *arg);
    void *on_request_arg;
};

/*
 * Takes fd (non-blocking socket). Calls svc->open; what open queues is sent
 * at once where the socket takes it, the rest at the first cr__conn_handle.
 * The model then waits for CR__CONN_READ. -errno (fd closed; svc->close is
 * not called when open refused). Worker 0 until the first handle call.
 */
int cr__conn_create(struct cr_conn **out, int fd, const struct cr__conn_config *cfg);

/* Releases every queued segment (its release callback runs), then calls
 * svc->close and closes the fd. NULL-safe. */
void cr__conn_destroy(struct cr_conn *c);

int cr__conn_fd(const struct cr_conn *c);

/*
 * Handles readiness: reads all that is available (non-blocking), feeds the
 * service, writes its output. `events` are CR_EV_* bits from the handle set.
 * Returns what to wait for next. worker is the serving worker's index.
 */
enum cr__conn_next cr__conn_handle(struct cr_conn *c, unsigned events, unsigned worker);

/*
 * The driver without its I/O, for a model that performs the operations
 * itself (the proactor: the kernel receives into the model's buffer and
 * sends from the queue asynchronously). The same logic as cr__conn_handle,
 * which is built on it: feed the service, keep what it did not consume,
 * queue its output, call drained, track the deadlines and the counters.
 * Between calls the queue holds no thread-local memory, so what
 * cr__conn_next_output points at stays valid until cr__conn_sent or
 * cr__conn_destroy, on any thread.
 *
 * cr__conn_feed: data[0..len) arrived (len 0: end of stream); data is
 * borrowed for the call only. Returns what the connection needs next:
 * CR__CONN_WRITE (send cr__conn_next_output), CR__CONN_READ (receive, with
 * the deadline of cr__conn_deadline) or CR__CONN_CLOSE.
 */
enum cr__conn_next cr__conn_feed(struct cr_conn *c, const char *data, size_t len, unsigned worker);

/* Most memory pieces cr__conn_next_output returns at once. */
#define CR__CONN_OUT_IOV 64

/* One send: memory (iovcnt > 0) or a file range (file_fd >= 0). */
struct cr__conn_out {
    int iovcnt;
    struct iovec iov[CR__CONN_OUT_IOV]; /* borrowed from the connection's queue */
    int file_fd;                        /* borrowed; -1 for memory */
    off_t file_off;
    size_t len; /* bytes in all: the iovecs' sum, or the file range's */
    bool more;  /* a file range follows this memory (MSG_MORE) */
};

/*
 * Describes the head of the output queue as one send: its consecutive
 * memory segments (at most max_iov, up to CR__CONN_OUT_IOV) or its file
 * range, max_len bytes at most. Sending part of it is fine. 0, or -ENODATA
 * when nothing is queued. Does not change the queue.
 */
int cr__conn_next_output(struct cr_conn *c, struct cr__conn_out *out, unsigned max_iov,
                         size_t max_len);

/*
 * n bytes of the queue went out (n <= what cr__conn_next_output described):
 * advances it, releases the segments sent, calls drained once all is sent
 * and then feeds any pipelined input kept. Returns what is needed next, as
 * cr__conn_feed.
 */
enum cr__conn_next cr__conn_sent(struct cr_conn *c, size_t n, unsigned worker);

/* *stop values for cr__conn_serve_blocking: CR__STOP_GRACEFUL, CR__STOP_NOW. */

/*
 * Serves the connection to its end with blocking waits (poll with the
 * deadline; the socket stays non-blocking) on the calling thread: the tpc
 * model. Returns when it is to be closed: the peer left, the service closed
 * it, an error, a deadline passed, or *stop was set (read with relaxed
 * atomics, at least every 100 ms): CR__STOP_NOW returns at once, any
 * other nonzero value once the connection is idle (a request in flight is
 * answered first). The caller then destroys it.
 */
void cr__conn_serve_blocking(struct cr_conn *c, unsigned worker, const volatile int *stop);

/*
 * What cr__conn_serve_yielding asks of its caller: may_yield(arg) is called
 * at least every 100 ms while the connection waits (any phase; the caller
 * may do its own housekeeping there) and says whether the thread may leave
 * the connection now; while it says so and the connection is idle between
 * requests, fd becoming readable (someone else waits for this thread) makes
 * the call return.
 */
struct cr__conn_yield {
    int fd;
    bool (*may_yield)(void *arg);
    void *arg;
};

/*
 * cr__conn_serve_blocking that may give the thread up between requests:
 * returns true when it did (y above; the connection is open, idle, waiting
 * for its next request: the caller keeps it), false when the connection is
 * to be closed. y NULL: never gives up.
 */
bool cr__conn_serve_yielding(struct cr_conn *c, unsigned worker, const volatile int *stop,
                             const struct cr__conn_yield *y);

/* Absolute monotonic deadline (ns) of the current wait, 0 for none. */
uint64_t cr__conn_deadline(const struct cr_conn *c);

/* Bytes in and out so far. */
uint64_t cr__conn_bytes_in(const struct cr_conn *c);
uint64_t cr__conn_bytes_out(const struct cr_conn *c);

/* After cr__conn_handle: whether it stopped where the socket would block
 * for what it returned (so an edge-triggered handle reports the next
 * change), rather than at a budget with more to do. */
bool cr__conn_would_block(const struct cr_conn *c);

/* True when nothing is in flight: no unconsumed input and no pending output
 * (a graceful stop may close it). */
bool cr__conn_is_idle(const struct cr_conn *c);

#endif /* CABRANK_CONN_INTERNAL_H */
