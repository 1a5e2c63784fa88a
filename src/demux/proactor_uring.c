/*
 * proactor_uring.c - the io_uring asynchronous operation engine (liburing):
 * the kernel performs the operations. Multishot accept where the kernel has
 * it (else re-armed here), linked timeouts, cancellation by user_data (the
 * token's address: the completion token needs no lookup), partial sends
 * resumed, file bodies spliced file -> pipe -> socket with no copy through
 * user space (a pipe per operation in flight, from a small pool per ring).
 * One instance per ring. start/cancel/wake run on any thread under sq_lock;
 * wait() runs on the ring's completion owner only (see proactor_internal.h),
 * which is also the only thread that resubmits a token's next step. Owns the
 * ring and the pipes; borrows the tokens and their descriptors and buffers.
 *
 * user_data: a token's address with a tag in its low bits (tokens are at
 * least 8-aligned): UD_MAIN for the operation's own completion, UD_AUX for
 * the file -> pipe half of a splice; small constants for completions nobody
 * waits for (linked timeouts, cancels) and for wake-ups.
 *
 * Needs Linux 5.19 (multishot accept, cancel-any at stop); older kernels get
 * the emulated engine.
 *
 * Lock order: sq_lock only.
 */
#ifdef CR_HAVE_LIBURING

#include "demux/proactor_internal.h"

#include <cabrank/clock.h>

#include "os/sync_internal.h"

#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#define UD_TAG_MASK 7u
#define UD_MAIN     0u
#define UD_AUX      1u
#define UD_IGNORE   2u /* no token: a linked timeout's or a cancel's own completion */
#define UD_WAKE     3u /* no token: wake the waiter */

/* One splice step moves at most the pipe's default capacity, so the file ->
 * pipe half never waits for the pipe. */
#define PIPE_CHUNK (64u * 1024u)
#define MAX_PIPES  16

/* struct cr_aop.estate of a send, sendv or sendfile: its next step polls
 * the socket. */
#define SEND_POLL 1

struct uring {
    struct io_uring ring;
    /* Immutable after open. */
    bool multishot_accept;
    struct cr_mutex sq_lock;
    /* Atomic: SQEs left in the ring by a failed io_uring_submit. */
    int unsubmitted;
    /* Protected by sq_lock. */
    /* The step's deadline (absolute, CLOCK_MONOTONIC), read by the kernel at
     * submission (after a failed submit, at a later one: then a later step's,
     * still a sane value). */
    struct __kernel_timespec ts;
    int (*pipes)[2];
    size_t npipes;
};

static uint64_t ud_of(struct cr_aop *op, unsigned tag)
{
    return (uint64_t)(uintptr_t)op | tag;
}

/* Submits what is queued. A failure (the kernel pushing back on a full
 * completion queue) leaves the SQEs queued: they go with the next submit, and
 * the waiter retries before it sleeps. Caller holds sq_lock. */
static void flush(struct uring *u)
{
    int rc;

    cr_mutex_assert_held(&u->sq_lock);
    do {
        rc = io_uring_submit(&u->ring);
    } while (rc == -EINTR);
    __atomic_store_n(&u->unsubmitted, rc < 0 ? 1 : 0, __ATOMIC_RELAXED);
}

/* Room for n SQEs. Caller holds sq_lock. */
static int reserve(struct uring *u, unsigned n)
{
    if (io_uring_sq_space_left(&u->ring) < n)
        flush(u);
    return io_uring_sq_space_left(&u->ring) < n ? -EBUSY : 0;
}

static struct io_uring_sqe *sqe_for(struct uring *u, uint64_t ud)
{
    /* reserve() made room. */
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

    io_uring_sqe_set_data64(sqe, ud);
    return sqe;
}

static void to_timespec(uint64_t ns, struct __kernel_timespec *ts)
{
    ts->tv_sec = (long long)(ns / CR_NSEC_PER_SEC);
    ts->tv_nsec = (long long)(ns % CR_NSEC_PER_SEC);
}

/* Links a timeout at op's deadline to sqe: absolute, on CLOCK_MONOTONIC (as
 * cr_clock_now_ns), so no step reads the clock; a deadline already past
 * fires at once. Caller holds sq_lock and reserved the SQE. */
static void link_timeout(struct uring *u, struct cr_aop *op, struct io_uring_sqe *sqe)
{
    if (op->deadline_ns == 0)
        return;
    sqe->flags |= IOSQE_IO_LINK;
    to_timespec(op->deadline_ns, &u->ts);
    io_uring_prep_link_timeout(sqe_for(u, UD_IGNORE), &u->ts, IORING_TIMEOUT_ABS);
}

/* Caller holds sq_lock. */
static int get_pipe(struct uring *u, struct cr_aop *op)
{
    if (op->pipe[0] >= 0)
        return 0;
    if (u->npipes > 0) {
        u->npipes--;
        op->pipe[0] = u->pipes[u->npipes][0];
        op->pipe[1] = u->pipes[u->npipes][1];
        return 0;
    }
    if (pipe2(op->pipe, O_CLOEXEC) < 0) {
        op->pipe[0] = -1;
        op->pipe[1] = -1;
        return -errno;
    }
    return 0;
}

/* Gives op's pipe back: to the pool when empty, else closed. */
static void put_pipe(struct uring *u, struct cr_aop *op)
{
    if (op->pipe[0] < 0)
        return;
    cr_mutex_lock(&u->sq_lock);
    if (op->inpipe == 0 && u->npipes < MAX_PIPES) {
        u->pipes[u->npipes][0] = op->pipe[0];
        u->pipes[u->npipes][1] = op->pipe[1];
        u->npipes++;
    } else {
        close(op->pipe[0]);
        close(op->pipe[1]);
    }
    cr_mutex_unlock(&u->sq_lock);
    op->pipe[0] = -1;
    op->pipe[1] = -1;
    op->inpipe = 0;
}

/* Queues op's next step (its first, or the rest of a partial send). Returns
 * 0 or -errno (nothing queued). Caller holds sq_lock. */
static int queue_step(struct uring *u, struct cr_aop *op)
{
    struct io_uring_sqe *sqe;
    int err;

    err = reserve(u, 3);
    if (err < 0)
        return err;
    if (op->estate == SEND_POLL) {
        /* A send, sendv or sendfile the socket had no room for: wait until
         * it takes more (a sendfile keeps its pipe meanwhile). */
        sqe = sqe_for(u, ud_of(op, UD_MAIN));
        io_uring_prep_poll_add(sqe, op->fd, POLLOUT);
        link_timeout(u, op, sqe);
        return 0;
    }
    switch (op->kind) {
    case CR__AOP_ACCEPT:
        sqe = sqe_for(u, ud_of(op, UD_MAIN));
        if ((op->flags & CR__AOPF_MULTISHOT) && u->multishot_accept)
            io_uring_prep_multishot_accept(sqe, op->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        else
            io_uring_prep_accept(sqe, op->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        return 0;
    case CR__AOP_RECV:
        sqe = sqe_for(u, ud_of(op, UD_MAIN));
        io_uring_prep_recv(sqe, op->fd, op->buf, op->len, 0);
        break;
    case CR__AOP_SEND:
        sqe = sqe_for(u, ud_of(op, UD_MAIN));
        io_uring_prep_send(sqe, op->fd, (char *)op->buf + op->done, op->len - op->done,
                           MSG_NOSIGNAL);
        break;
    case CR__AOP_SENDV:
        memset(&op->msg, 0, sizeof(op->msg));
        op->msg.msg_iov = &op->iov[op->iovpos];
        op->msg.msg_iovlen = (size_t)(op->iovcnt - op->iovpos);
        sqe = sqe_for(u, ud_of(op, UD_MAIN));
        io_uring_prep_sendmsg(sqe, op->fd, &op->msg, MSG_NOSIGNAL);
        break;
    case CR__AOP_SENDFILE: {
        size_t chunk;

        err = get_pipe(u, op);
        if (err < 0)
            return err;
        if (op->inpipe == 0) {
            /* File -> pipe, then (linked) pipe -> socket. A short first half
             * breaks the link: the second completes -ECANCELED and the
             * waiter sends what the pipe holds. */
            chunk = op->len - op->done < PIPE_CHUNK ? op->len - op->done : PIPE_CHUNK;
            op->cflags = (unsigned)chunk;
            op->res = 0;
            sqe = sqe_for(u, ud_of(op, UD_AUX));
            io_uring_prep_splice(sqe, op->fd2, (int64_t)(op->off + (off_t)op->done), op->pipe[1],
                                 -1, (unsigned)chunk, SPLICE_F_MOVE);
            sqe->flags |= IOSQE_IO_LINK;
        } else {
            chunk = op->inpipe;
            op->cflags = 0;
        }
        sqe = sqe_for(u, ud_of(op, UD_MAIN));
        io_uring_prep_splice(sqe, op->pipe[0], -1, op->fd, -1, (unsigned)chunk, SPLICE_F_MOVE);
        break;
    }
    case CR__AOP_CONNECT:
        sqe = sqe_for(u, ud_of(op, UD_MAIN));
        io_uring_prep_connect(sqe, op->fd, (const struct sockaddr *)&op->addr, op->addrlen);
        break;
    case CR__AOP_TIMER:
        to_timespec(op->deadline_ns, &u->ts);
        sqe = sqe_for(u, ud_of(op, UD_MAIN));
        io_uring_prep_timeout(sqe, &u->ts, 0, IORING_TIMEOUT_ABS);
        return 0;
    case CR__AOP_POST:
        sqe = sqe_for(u, ud_of(op, UD_MAIN));
        io_uring_prep_nop(sqe);
        return 0;
    default:
        return -EINVAL;
    }
    link_timeout(u, op, sqe);
    return 0;
}

static int ur_start(struct cr__ring *r, struct cr_aop *op)
{
    struct uring *u = r->engine;
    int err;

    op->estate = 0;
    cr_mutex_lock(&u->sq_lock);
    /* Decided under sq_lock, which a cancel's SQE is queued under: either we
     * see the cancel, or our SQEs precede its. */
    if (cr__aop_is_cancelled(op)) {
        op->kind = CR__AOP_POST;
        op->res = -ECANCELED;
    }
    err = queue_step(u, op);
    if (err == 0) {
        /* Our last touch of op: once submitted it may complete, and be
         * freed, on another thread. */
        cr__aop_publish(op);
        flush(u);
    }
    cr_mutex_unlock(&u->sq_lock);
    return err;
}

static void queue_cancel(struct uring *u, uint64_t ud, int flags)
{
    if (reserve(u, 1) < 0)
        return;
    io_uring_prep_cancel64(sqe_for(u, UD_IGNORE), ud, flags);
    flush(u);
}

static void ur_cancel(struct cr__ring *r, struct cr_aop *op)
{
    struct uring *u = r->engine;

    cr_mutex_lock(&u->sq_lock);
    queue_cancel(u, ud_of(op, UD_MAIN), 0);
    cr_mutex_unlock(&u->sq_lock);
}

static void ur_cancel_all(struct cr__ring *r)
{
    struct uring *u = r->engine;

    cr_mutex_lock(&u->sq_lock);
    queue_cancel(u, 0, IORING_ASYNC_CANCEL_ANY);
    cr_mutex_unlock(&u->sq_lock);
}

static void ur_wake(struct cr__ring *r)
{
    struct uring *u = r->engine;

    cr_mutex_lock(&u->sq_lock);
    if (reserve(u, 1) == 0) {
        io_uring_prep_nop(sqe_for(u, UD_WAKE));
        flush(u);
    }
    cr_mutex_unlock(&u->sq_lock);
}

/* Queues op's next step from the waiter: 0, or -errno to deliver (a cancel
 * or stop since the last step, no time left for it, or no room). */
static int resubmit(struct uring *u, struct cr_aop *op)
{
    int err;

    if (cr__aop_is_cancelled(op))
        return -ECANCELED;
    if (op->deadline_ns != 0 && cr_clock_now_ns() >= op->deadline_ns)
        return -ETIMEDOUT; /* the rest of a send, its deadline passed */
    cr_mutex_lock(&u->sq_lock);
    err = queue_step(u, op);
    if (err == 0) {
        cr__aop_publish(op);
        flush(u);
    }
    cr_mutex_unlock(&u->sq_lock);
    return err;
}

/* -ECANCELED that neither a cancel nor the stop asked for came from the
 * linked timeout. */
static ssize_t result_of(struct cr_aop *op, ssize_t res)
{
    if (res == -ECANCELED && op->deadline_ns != 0 && !cr__aop_is_cancelled(op))
        return -ETIMEDOUT;
    return res;
}

static bool deliver(struct cr__completion *c, struct cr_aop *op, ssize_t res, unsigned flags)
{
    c->op = op;
    c->res = res;
    c->flags = flags;
    return true;
}

/* A send, sendv or sendfile step moved res bytes: true when all is sent. */
static bool sent(struct cr_aop *op, ssize_t res)
{
    if (op->kind == CR__AOP_SENDFILE)
        op->inpipe -= (size_t)res;
    return cr__aop_advance(op, (size_t)res);
}

/* The operation's own completion. Returns true with *c to deliver, false
 * when the operation goes on. */
static bool on_main(struct uring *u, struct cr_aop *op, ssize_t res, unsigned cqe_flags,
                    struct cr__completion *c)
{
    int err;

    switch (op->kind) {
    case CR__AOP_ACCEPT:
        if (cqe_flags & IORING_CQE_F_MORE)
            return deliver(c, op, res, CR_AOP_MORE);
        if (!(op->flags & CR__AOPF_MULTISHOT) || res < 0)
            return deliver(c, op, res, 0);
        /* The kernel ended the multishot (or has none): re-arm, so the caller
         * sees one operation. A cancel meanwhile ends it here. */
        err = resubmit(u, op);
        if (err < 0) {
            close((int)res);
            return deliver(c, op, err, 0);
        }
        return deliver(c, op, res, CR_AOP_MORE);
    case CR__AOP_SEND:
    case CR__AOP_SENDV:
        if (op->estate == SEND_POLL) {
            op->estate = 0;
            if (res < 0)
                return deliver(c, op, result_of(op, res), 0);
            err = resubmit(u, op);
            return err < 0 ? deliver(c, op, err, 0) : false;
        }
        if (res == -EAGAIN) {
            /* The socket is non-blocking, and io_uring completes a send it
             * has no room for so instead of waiting in some states (seen: at
             * its TCP_NOTSENT_LOWAT with the peer half-closed,
             * sends_resume_past_the_notsent_mark): a poll step waits, then
             * the send resumes. */
            op->estate = SEND_POLL;
            err = resubmit(u, op);
            return err < 0 ? deliver(c, op, err, 0) : false;
        }
        if (res <= 0 && op->len > 0)
            return deliver(c, op, res < 0 ? result_of(op, res) : -EIO, 0);
        if (res < 0 || sent(op, res))
            return deliver(c, op, res < 0 ? result_of(op, res) : (ssize_t)op->len, 0);
        err = resubmit(u, op);
        return err < 0 ? deliver(c, op, err, 0) : false;
    case CR__AOP_SENDFILE:
        if (op->estate == SEND_POLL) {
            op->estate = 0;
            if (res < 0) {
                put_pipe(u, op);
                return deliver(c, op, result_of(op, res), 0);
            }
        } else if (res == -EAGAIN) {
            /* A splice into a non-blocking socket does not wait for room;
             * a poll step does. */
            op->estate = SEND_POLL;
        } else if (res > 0) {
            if (sent(op, res)) {
                put_pipe(u, op);
                return deliver(c, op, (ssize_t)op->len, 0);
            }
        } else if (res == -ECANCELED && op->cflags != 0 && op->res != (ssize_t)op->cflags &&
                   !cr__aop_is_cancelled(op)) {
            /* The file -> pipe half was short, breaking the link. */
            if (op->res < 0 || op->res == 0) {
                err = op->res < 0 ? (int)op->res : -EIO; /* 0: the file ended early */
                put_pipe(u, op);
                return deliver(c, op, err, 0);
            }
        } else if (res == 0 && op->len == 0) {
            put_pipe(u, op);
            return deliver(c, op, 0, 0);
        } else {
            put_pipe(u, op);
            return deliver(c, op, res < 0 ? result_of(op, res) : -EIO, 0);
        }
        err = resubmit(u, op);
        if (err < 0) {
            put_pipe(u, op);
            return deliver(c, op, err, 0);
        }
        return false;
    case CR__AOP_TIMER:
        return deliver(c, op, res == -ETIME ? -ETIMEDOUT : res, 0);
    case CR__AOP_POST:
        /* Also a start cut short by a cancel: drop any pipe it holds. */
        put_pipe(u, op);
        return deliver(c, op, op->res, 0);
    default:
        return deliver(c, op, result_of(op, res), 0);
    }
}

static int ur_wait(struct cr__ring *r, struct cr__completion *c)
{
    struct uring *u = r->engine;

    for (;;) {
        struct io_uring_cqe *cqe;
        struct cr_aop *op;
        uint64_t ud;
        ssize_t res;
        unsigned flags;
        int rc;

        if (__atomic_load_n(&u->unsubmitted, __ATOMIC_RELAXED)) {
            cr_mutex_lock(&u->sq_lock);
            flush(u);
            cr_mutex_unlock(&u->sq_lock);
        }
        rc = io_uring_wait_cqe(&u->ring, &cqe);
        if (rc < 0) {
            /* -EINTR; nothing else is expected of a healthy ring. */
            continue;
        }
        ud = io_uring_cqe_get_data64(cqe);
        res = cqe->res;
        flags = cqe->flags;
        io_uring_cqe_seen(&u->ring, cqe);
        op = (struct cr_aop *)(uintptr_t)(ud & ~(uint64_t)UD_TAG_MASK);
        if (op == NULL) {
            if ((ud & UD_TAG_MASK) == UD_WAKE)
                return 0;
            continue;
        }
        /* Acquire: the starter's (or the last handler's) writes to the token,
         * ordered for us by the kernel, but not visibly to TSan. */
        (void)cr__aop_state(op);
        if ((ud & UD_TAG_MASK) == UD_AUX) {
            /* The file -> pipe half of a splice step. */
            op->res = res;
            if (res > 0)
                op->inpipe += (size_t)res;
            continue;
        }
        if (on_main(u, op, res, flags, c))
            return 1;
    }
}

/* True on Linux 5.19 or later, which has IORING_ACCEPT_MULTISHOT and
 * IORING_ASYNC_CANCEL_ANY (the probe cannot tell either). */
static bool is_kernel_5_19(void)
{
    struct utsname un;
    unsigned major = 0;
    unsigned minor = 0;

    if (uname(&un) < 0 || sscanf(un.release, "%u.%u", &major, &minor) != 2)
        return false;
    return major > 5 || (major == 5 && minor >= 19);
}

static bool has_multishot_accept(void)
{
    const char *v = getenv("CABRANK_URING_NO_MULTISHOT");

    /* Tests force the re-arming that kernels without it need. */
    return v == NULL || v[0] == '\0' || strcmp(v, "0") == 0;
}

static int ur_open(struct cr__ring *r, const struct cr_proactor_config *cfg, const char **why)
{
    static const int needed[] = {
        IORING_OP_ACCEPT, IORING_OP_RECV,         IORING_OP_SEND,    IORING_OP_SENDMSG,
        IORING_OP_SPLICE, IORING_OP_CONNECT,      IORING_OP_TIMEOUT, IORING_OP_LINK_TIMEOUT,
        IORING_OP_NOP,    IORING_OP_ASYNC_CANCEL,
    };
    struct io_uring_params params;
    struct io_uring_probe *probe;
    unsigned entries = cfg->entries != 0 ? cfg->entries : 1024;
    struct uring *u;
    int err;

    *why = NULL;
    if (entries > 32768)
        return -EINVAL;
    if (!is_kernel_5_19()) {
        /* Stop cancels everything at once with IORING_ASYNC_CANCEL_ANY. */
        *why = "kernel older than 5.19";
        return -ENOSYS;
    }
    u = calloc(1, sizeof(*u));
    if (u == NULL)
        return -ENOMEM;
    u->pipes = calloc(MAX_PIPES, sizeof(*u->pipes));
    if (u->pipes == NULL) {
        err = -ENOMEM;
        goto out_free;
    }
    err = cr_mutex_init(&u->sq_lock);
    if (err < 0)
        goto out_free;
    memset(&params, 0, sizeof(params));
    /* Room for completions of many operations in flight (the kernel keeps
     * an overflow, but a roomy queue avoids it). */
    params.flags = IORING_SETUP_CQSIZE;
    params.cq_entries = entries * 4;
    err = io_uring_queue_init_params(entries, &u->ring, &params);
    if (err < 0) {
        *why = err == -EPERM ? "io_uring_queue_init() refused (kernel.io_uring_disabled or a "
                               "seccomp profile)"
                             : "io_uring_queue_init() failed";
        goto out_mutex;
    }
    probe = io_uring_get_probe_ring(&u->ring);
    if (probe == NULL) {
        *why = "io_uring cannot be probed (kernel older than 5.6)";
        err = -ENOSYS;
        goto out_ring;
    }
    for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++) {
        if (!io_uring_opcode_supported(probe, needed[i])) {
            *why = "the kernel lacks an io_uring operation we need";
            err = -ENOSYS;
            break;
        }
    }
    io_uring_free_probe(probe);
    if (err < 0)
        goto out_ring;
    if (!(params.features & IORING_FEAT_NODROP)) {
        *why = "the kernel may drop io_uring completions (no IORING_FEAT_NODROP)";
        err = -ENOSYS;
        goto out_ring;
    }
    u->multishot_accept = has_multishot_accept();
    r->engine = u;
    return 0;

out_ring:
    io_uring_queue_exit(&u->ring);
out_mutex:
    cr_mutex_fini(&u->sq_lock);
out_free:
    free(u->pipes);
    free(u);
    return err;
}

static void ur_close(struct cr__ring *r)
{
    struct uring *u = r->engine;

    if (u == NULL)
        return;
    io_uring_queue_exit(&u->ring);
    for (size_t i = 0; i < u->npipes; i++) {
        close(u->pipes[i][0]);
        close(u->pipes[i][1]);
    }
    cr_mutex_fini(&u->sq_lock);
    free(u->pipes);
    free(u);
    r->engine = NULL;
}

const struct cr__engine_ops cr__proactor_uring_ops = {
    .name = "uring",
    .open = ur_open,
    .close = ur_close,
    .start = ur_start,
    .cancel = ur_cancel,
    .cancel_all = ur_cancel_all,
    .wait = ur_wait,
    .wake = ur_wake,
};

#endif /* CR_HAVE_LIBURING */
