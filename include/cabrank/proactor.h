/*
 * proactor.h - the Proactor (Pyarali, Harrison, Schmidt, Jordan; docs/architecture.md):
 * the application starts asynchronous operations; an asynchronous operation
 * processor performs them; a completion dispatcher calls each operation's
 * completion handler on one of the proactor's threads.
 *
 * Engines (the asynchronous operation processor), chosen at create:
 *   "uring"     io_uring through liburing: the kernel performs the
 *               operations; multishot accept where the kernel has it, linked
 *               timeouts, cancellation by token, file bodies spliced through
 *               a pipe (no copy through user space).
 *   "emulated"  the paper's section 7.1.2: a pool of engine threads performs
 *               each operation with non-blocking system calls and waits for
 *               readiness with epoll, then queues the completion. Same API,
 *               same semantics; used where io_uring cannot be (an old kernel,
 *               kernel.io_uring_disabled, a seccomp profile) - create logs one
 *               line saying so - or when asked for.
 *
 * Completion dispatcher strategies:
 *   "single"           one thread runs every completion handler.
 *   "lf"               Leader/Followers over one completion queue: the
 *                      leader waits for completions, takes one, promotes a
 *                      follower, then runs the handler.
 *   "ring-per-thread"  each thread has its own ring (engine instance) and runs
 *                      the completions of the operations started on it.
 *
 * Asynchronous completion tokens: a struct cr_aop is embedded by the caller in
 * its own state (a connection, say) and travels with the operation (the
 * io_uring user_data is its address), so a completion reaches its handler
 * with its state and no lookup; container_of recovers the caller's struct.
 * One operation per token at a time (a multishot accept stays one operation
 * until its last completion). A token must stay valid until its handler has
 * run for the last time (flags without CR_AOP_MORE).
 *
 * Threads: operations may be started and cancelled from any thread,
 * including from handlers. Handlers run on the proactor's dispatcher threads;
 * the handlers of one token never run concurrently with each other. (An
 * operation a handler starts on its own token is submitted when the handler
 * returns, and so is one another thread starts on it meanwhile.)
 *
 * Descriptors: give non-blocking ones. The emulated engine performs accept,
 * connect and sendfile with the descriptor's own mode, so a blocking one holds
 * an engine thread.
 *
 * CABRANK_URING_DISABLE=1 in the environment makes create treat io_uring as
 * unavailable (tests use it to exercise the fallback).
 */
#ifndef CABRANK_PROACTOR_H
#define CABRANK_PROACTOR_H

#include <cabrank/common.h>
#include <sys/socket.h>
#include <sys/uio.h>

struct cr_proactor;
struct cr_aop;

/* More completions of this operation follow (multishot accept). */
#define CR_AOP_MORE 1u

/*
 * A completion: res is the operation's result (bytes transferred, an
 * accepted descriptor, 0) or -errno: -ETIMEDOUT when its timeout expired,
 * -ECANCELED when cancelled (cr_aop_cancel or proactor stop). flags: CR_AOP_*.
 */
typedef void cr_aop_fn(struct cr_aop *op, ssize_t res, unsigned flags);

/* Maximum iovec entries of one cr_aop_sendv. */
#define CR_AOP_MAX_IOV 16

/*
 * The token. Callers set nothing but through cr_aop_init; the fields after
 * `ring` are the proactor's and its engines', valid while the operation is in
 * flight (proactor_internal.h says which thread may touch which).
 */
struct cr_aop {
    cr_aop_fn *handler;
    struct cr_proactor *p;
    unsigned ring; /* the ring (engine instance) the operation runs on */
    /* Private to the proactor and its engines. */
    int kind;
    int fd;
    int fd2;
    unsigned flags;
    uint64_t deadline_ns; /* the timeout from the start, on cr_clock_now_ns; 0: none */
    void *buf;
    size_t len;
    size_t done; /* bytes transferred so far (partial sends resumed) */
    off_t off;
    struct iovec iov[CR_AOP_MAX_IOV];
    int iovcnt;
    int iovpos; /* first iovec not yet sent whole */
    struct msghdr msg;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    int state;           /* atomic: busy, cancel asked (proactor.c) */
    int estate;          /* engine bookkeeping (where the operation is) */
    ssize_t res;         /* a post's result; emulated: the completion's; uring
                          * sendfile: the file -> pipe half's */
    unsigned cflags;     /* emulated: the completion's flags; uring sendfile:
                          * the bytes the file -> pipe half asked for */
    unsigned seq_taken;  /* lf: completions taken off the ring */
    unsigned seq_served; /* atomic; lf: completions whose handler returned */
    int pipe[2];         /* uring sendfile: the pipe in use, or -1 */
    size_t inpipe;       /* uring sendfile: bytes in the pipe, not yet sent */
    size_t heap_idx;     /* emulated: place in the deadline heap */
    struct cr_aop *next; /* engine queues */
};

struct cr_proactor_config {
    const char *engine;      /* "uring" | "emulated"; NULL: uring where it works */
    const char *dispatch;    /* "single" | "lf" | "ring-per-thread"; NULL: "lf" */
    unsigned threads;        /* dispatcher threads (single: 1); 0: usable CPUs */
    unsigned entries;        /* ring size (submission queue entries); 0: 1024 */
    unsigned engine_threads; /* emulated: threads performing operations, per
                              * ring; 0: 2 (ring-per-thread: 1) */
};

/*
 * Creates a proactor: its engine (one per ring) and, not yet running, its
 * dispatcher threads. -EINVAL for an unknown engine or strategy; -ENOSYS when
 * "uring" was asked for explicitly and cannot be used. *out returns owned.
 */
CR_MUST_CHECK int cr_proactor_create(struct cr_proactor **out,
                                     const struct cr_proactor_config *cfg);

/* The engine in use ("uring" or "emulated"), the strategy, the number of
 * rings (ring-per-thread: threads; else 1) and of dispatcher threads. */
const char *cr_proactor_engine(const struct cr_proactor *p);
const char *cr_proactor_dispatch(const struct cr_proactor *p);
unsigned cr_proactor_rings(const struct cr_proactor *p);
unsigned cr_proactor_threads(const struct cr_proactor *p);

/* Starts the dispatcher threads. -errno. Owner thread. */
CR_MUST_CHECK int cr_proactor_start(struct cr_proactor *p);

/*
 * Stops: cancels every outstanding operation (each handler runs once more
 * with -ECANCELED, or with its real result if it had completed), then the
 * threads exit once no operation is left. Returns at once. Thread-safe.
 */
void cr_proactor_stop(struct cr_proactor *p);

/* Waits for the threads after stop. Owner thread. */
CR_MUST_CHECK int cr_proactor_wait(struct cr_proactor *p);

/* Frees a stopped (or never started) proactor. NULL-safe. */
void cr_proactor_destroy(struct cr_proactor *p);

/*
 * Prepares a token for operations on ring (taken modulo the number of
 * rings; ring-per-thread: an operation runs on its token's ring, and its
 * handler on that ring's thread). Call once before the first operation and
 * never while one is in flight.
 */
void cr_aop_init(struct cr_aop *op, struct cr_proactor *p, unsigned ring, cr_aop_fn *handler);

/* The ring of the calling dispatcher thread, or 0 on other threads. */
unsigned cr_proactor_current_ring(const struct cr_proactor *p);

/*
 * Operations. Each returns 0 once started, or -errno (nothing started, the
 * handler will not run): -EBUSY when the token has an operation in flight,
 * -ESHUTDOWN after stop. timeout_ms 0 means none; otherwise the operation
 * completes with -ETIMEDOUT when it has not completed in time (a linked
 * timeout under io_uring).
 */

/* Accepts on a listening socket; res is the new descriptor (SOCK_NONBLOCK |
 * SOCK_CLOEXEC). multishot: one completion per connection (CR_AOP_MORE) until
 * an error or a cancel ends it; the emulated engine and kernels without
 * multishot accept re-arm internally, so callers see the same thing. */
CR_MUST_CHECK int cr_aop_accept(struct cr_aop *op, int listen_fd, bool multishot);

/* Receives at most len bytes into buf (borrowed until completion); res 0 is
 * end of stream. */
CR_MUST_CHECK int cr_aop_recv(struct cr_aop *op, int fd, void *buf, size_t len,
                              uint64_t timeout_ms);

/* Sends all of buf[0..len) (borrowed until completion): partial sends are
 * resumed by the engine; res is len, or -errno (what was sent before an
 * error is lost to the caller: the connection is to be closed). No SIGPIPE. */
CR_MUST_CHECK int cr_aop_send(struct cr_aop *op, int fd, const void *buf, size_t len,
                              uint64_t timeout_ms);

/* Sends all of iov[0..iovcnt) (iovcnt <= CR_AOP_MAX_IOV; the array is copied,
 * the memory borrowed), resumed as cr_aop_send; res is the total. */
CR_MUST_CHECK int cr_aop_sendv(struct cr_aop *op, int fd, const struct iovec *iov, int iovcnt,
                               uint64_t timeout_ms);

/* Sends len bytes of file_fd from off to the socket without copying them
 * through user space (io_uring: splice through a pipe; emulated: sendfile),
 * resumed until all is sent; res is len. file_fd borrowed until completion. */
CR_MUST_CHECK int cr_aop_sendfile(struct cr_aop *op, int sock_fd, int file_fd, off_t off,
                                  size_t len, uint64_t timeout_ms);

/* Connects a non-blocking socket; res 0. addr is copied. */
CR_MUST_CHECK int cr_aop_connect(struct cr_aop *op, int fd, const struct sockaddr *addr,
                                 socklen_t addrlen, uint64_t timeout_ms);

/* Completes with -ETIMEDOUT after ms (a timer as an operation). */
CR_MUST_CHECK int cr_aop_timer(struct cr_aop *op, uint64_t ms);

/* Completes at once with res, on the token's ring (hands work to a ring's
 * thread; wakes a dispatcher). */
CR_MUST_CHECK int cr_aop_post(struct cr_aop *op, ssize_t res);

/*
 * Asks for the token's operation to be cancelled. Asynchronous: the handler
 * still runs once more (-ECANCELED, or the real result if it won the race).
 * 0, or -ENOENT when nothing is in flight. Thread-safe.
 */
int cr_aop_cancel(struct cr_aop *op);

/* True when the token has an operation in flight. */
bool cr_aop_is_busy(const struct cr_aop *op);

#endif /* CABRANK_PROACTOR_H */
