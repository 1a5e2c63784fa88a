/*
 * bound_pool.h - the bound handle/thread Leader/Followers variant, client
 * side (the paper's Bound_LF_Thread_Pool): many threads share one
 * multiplexed connection to a back end, each waits for the reply to its own
 * request, and replies arrive in any order, matched by a 64-bit request id.
 *
 * A thread registers its context (cr_bound_pool_expect: request id, reply
 * buffer) BEFORE it sends the request (cr_bound_pool_send, whole requests
 * under a send lock), so a fast reply is never lost, then waits
 * (cr_bound_pool_join). cr_bound_pool_call does the three steps.
 *
 * Standalone mode (cfg.lf == NULL; client threads): the first thread to join
 * without a leader leads: it polls the connection, reads and decodes
 * replies, and hands each reply that belongs to another thread to that
 * thread alone (specific notification: one condition variable per context).
 * When its own reply arrives it promotes the longest-waiting follower (FIFO:
 * with in-order replies the new leader reads its own reply next, no
 * hand-off) and returns. Followers sleep until their reply was handed to
 * them or they were promoted.
 *
 * Hybrid mode (cfg.lf and cfg.reactor set; server threads, the paper's
 * hybrid client/server): the connection is registered one-shot in the
 * reactor of a cr_lf_pool. Whichever pool thread handles its readiness reads
 * the replies, notifies each waiter (cr_lf_pool_notify) and reactivates the
 * handle. A pool thread waiting in cr_bound_pool_join rejoins the pool
 * (cr_lf_pool_wait) and serves other events meanwhile, so the server does
 * not deadlock when every thread waits for a reply. Other threads may join
 * too (cr_lf_pool_wait refuses them); they sleep on their context's
 * condition variable.
 *
 * Replies are split off the byte stream by a user decoder; the pool owns the
 * read buffer (no allocation per reply) and copies each payload into the
 * waiter's buffer. A reply whose id nobody waits for (late after a timeout,
 * cancelled) is dropped and counted.
 *
 * Failure: EOF, a read or write error, a malformed reply or
 * cr_bound_pool_fail() ends the connection. Every registered context gets
 * the error at once; later calls fail fast until cr_bound_pool_attach() gives
 * a new connection (reconnecting is the caller's job; cfg.on_fail tells it).
 */
#ifndef CABRANK_BOUND_POOL_H
#define CABRANK_BOUND_POOL_H

#include <cabrank/common.h>
#include <cabrank/lf_pool.h>
#include <cabrank/u64_table.h>

#include <pthread.h>

struct cr_reactor;
struct cr_lf_pool;
struct cr_bound_pool;

/*
 * Decodes the reply frame at the start of buf[0..len): returns the bytes it
 * takes (> 0) and sets *id, *payload (inside buf) and *payload_len;
 * -EAGAIN if the frame is incomplete, -EBADMSG if malformed. Runs on the
 * reading thread, one call at a time; must not call into the pool.
 */
typedef ssize_t cr_bound_decode_fn(void *arg, const char *buf, size_t len, uint64_t *id,
                                   const char **payload, size_t *payload_len);

/*
 * Called once per connection failure with the error the waiters got, after
 * they got it, on the thread that detected it, with no pool lock held: it may
 * call cr_bound_pool_attach().
 */
typedef void cr_bound_fail_fn(struct cr_bound_pool *p, int err, void *arg);

struct cr_bound_pool_config {
    cr_bound_decode_fn *decode; /* required */
    void *decode_arg;           /* borrowed */
    size_t read_buffer;         /* bytes; the largest reply frame; 0 = 64 KiB */
    unsigned buckets;           /* request id table size, rounded up to 2^n; 0 = 256 */
    struct cr_lf_pool *lf;      /* borrowed; NULL: standalone mode */
    struct cr_reactor *reactor; /* borrowed; the reactor lf serves; required with lf */
    cr_bound_fail_fn *on_fail;  /* NULL: none */
    void *fail_arg;             /* borrowed */
};

/*
 * The paper's Thread_Context: what one waiting thread registers. Embedded by
 * the caller (on its stack, say), set up once with cr_bound_ctx_init and
 * reused for one request after another by one thread at a time.
 */
struct cr_bound_ctx {
    /* Private to the pool. */
    pthread_cond_t cond;
    struct cr_lf_waiter lfw;
    struct cr_u64_node hnode; /* key: the request id */
    struct cr_bound_ctx *fnext;
    struct cr_bound_ctx *fprev;
    pthread_t owner;
    void *buf;
    size_t cap;
    ssize_t result;
    int state;
    int wait_mode;
    bool queued;
    bool promoted;
};

struct cr_bound_pool_stats {
    uint64_t sent;       /* requests written whole */
    uint64_t delivered;  /* replies given to their waiter, own or handed off */
    uint64_t handed_off; /* of those, read by another thread than the waiter */
    uint64_t dropped;    /* replies nobody waited for */
    uint64_t promotions; /* standalone: followers promoted to leader */
    uint64_t timeouts;   /* joins that ended with -ETIMEDOUT */
    uint64_t failures;   /* connections ended */
    unsigned registered; /* contexts registered now */
    unsigned followers;  /* standalone: threads waiting as followers now */
    bool leading;        /* standalone: a thread leads now */
    bool connected;      /* a live connection is attached */
};

/* Sets up a context; -errno of pthread_cond_init. Owner thread only. */
CR_MUST_CHECK int cr_bound_ctx_init(struct cr_bound_ctx *c);

/* Releases a context that is not registered. Owner thread only. */
void cr_bound_ctx_fini(struct cr_bound_ctx *c);

/*
 * Creates a pool with no connection; *out is owned by the caller. -EINVAL
 * without decode, or with lf but no reactor (or the reverse); -ENOMEM;
 * -errno. Thread-safe.
 */
CR_MUST_CHECK int cr_bound_pool_create(struct cr_bound_pool **out,
                                       const struct cr_bound_pool_config *cfg);

/*
 * Closes the connection and frees the pool; NULL-safe. No thread may be in a
 * pool call or registered; in hybrid mode the lf pool must be stopped (no
 * handler of the connection may run). Owner thread only.
 */
void cr_bound_pool_destroy(struct cr_bound_pool *p);

/*
 * Gives the pool a connected stream socket (takes fd on success, which is
 * made non-blocking; the caller keeps it on error) and, in hybrid mode,
 * registers it with the reactor. -EBADF for an invalid fd, -ENOTSOCK for a
 * non-socket, -EPROTOTYPE for a datagram socket, -EBUSY while a live
 * connection is attached, -ENOMEM, errors of cr_reactor_add. Thread-safe.
 */
CR_MUST_CHECK int cr_bound_pool_attach(struct cr_bound_pool *p, int fd);

/*
 * Ends the current connection: every registered context completes with err
 * (a negative errno; 0 means -ECONNRESET), waiters wake at once, the socket is
 * shut down and closed when no thread uses it any more, and cfg.on_fail runs.
 * Does nothing without a live connection. Thread-safe.
 */
void cr_bound_pool_fail(struct cr_bound_pool *p, int err);

/* A fresh request id, never 0, unique within this pool. Thread-safe. */
uint64_t cr_bound_pool_next_id(struct cr_bound_pool *p);

/*
 * Registers c (borrowed until it completes, is joined or cancelled) as the
 * waiter of reply id; the payload will be copied into buf[0..cap) (borrowed
 * likewise; may be NULL when cap is 0). Call BEFORE sending the request.
 * -EBUSY if c is registered, -EEXIST if another context waits for id,
 * -EINVAL for buf NULL with cap > 0, -ENOTCONN before the first attach, the
 * connection's error after a failure. Thread-safe; c: owner thread only.
 */
CR_MUST_CHECK int cr_bound_pool_expect(struct cr_bound_pool *p, struct cr_bound_ctx *c, uint64_t id,
                                       void *buf, size_t cap);

/*
 * Writes one whole request (borrowed for the call) on the connection, under
 * the send lock so requests of many threads never interleave, waiting up to
 * timeout_ms (-1: no limit) for socket buffer space. A write error, or a
 * timeout after part of the request went out, fails the connection (the
 * stream is corrupt). Returns 0; -ETIMEDOUT with nothing written; the
 * connection's error; -ENOTCONN. Thread-safe.
 */
CR_MUST_CHECK int cr_bound_pool_send(struct cr_bound_pool *p, const void *req, size_t len,
                                     int timeout_ms);

/*
 * Waits up to timeout_ms (-1: no limit; 0: only a reply already at hand) for
 * the reply c expects, leading or following (standalone) or serving the lf
 * pool (hybrid, on a pool thread).
 * Returns the payload length (the payload is in c's buffer); -EMSGSIZE if it
 * did not fit; -ETIMEDOUT (c is unregistered, so a late reply is dropped);
 * -ECANCELED if the lf pool stopped; the connection's error (-ECONNRESET,
 * -EBADMSG...) if it failed; -EINVAL if c is not registered. Afterwards c is
 * free for the next request. Thread-safe; c: owner thread only.
 */
CR_MUST_CHECK ssize_t cr_bound_pool_join(struct cr_bound_pool *p, struct cr_bound_ctx *c,
                                         int timeout_ms);

/*
 * Unregisters c without waiting (the send failed, the client left); a reply
 * that arrives later is dropped. A reply already delivered is discarded.
 * -EINVAL if c is not registered. Thread-safe; c: owner thread only.
 */
CR_MUST_CHECK int cr_bound_pool_cancel(struct cr_bound_pool *p, struct cr_bound_ctx *c);

/*
 * expect + send + join, with one timeout for the whole call. Returns as
 * cr_bound_pool_join, or the error of expect or send (c is then free).
 * Thread-safe; c: owner thread only.
 */
CR_MUST_CHECK ssize_t cr_bound_pool_call(struct cr_bound_pool *p, struct cr_bound_ctx *c,
                                         uint64_t id, const void *req, size_t req_len, void *reply,
                                         size_t cap, int timeout_ms);

/* Counters and the current state. Thread-safe. */
void cr_bound_pool_stats(struct cr_bound_pool *p, struct cr_bound_pool_stats *out);

#endif /* CABRANK_BOUND_POOL_H */
