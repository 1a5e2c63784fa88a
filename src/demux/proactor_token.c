/*
 * proactor_token.c - the asynchronous completion tokens (struct cr_aop): a
 * token carries one operation's state from its start (cr_aop_accept, _recv,
 * _send, _sendv, _sendfile, _connect, _timer, _post) to its handler, and is
 * reused for the next. Called by the proactor model and any application, on
 * any thread; the caller owns the token and the dispatcher borrows it while
 * an operation runs.
 *
 * A start claims the token (begin_op: BUSY set by CAS, so one operation at a
 * time), fills its fields, then hands it to the dispatcher
 * (cr__proactor_submit), which starts it on the token's ring or defers it
 * while a handler of the token runs. Token state and its memory orders:
 * proactor_internal.h.
 */
#include "demux/proactor_dispatch_internal.h"

#include <cabrank/clock.h>

#include <limits.h>
#include <string.h>

void cr_aop_init(struct cr_aop *op, struct cr_proactor *p, unsigned ring, cr_aop_fn *handler)
{
    memset(op, 0, sizeof(*op));
    op->handler = handler;
    op->p = p;
    op->ring = ring % p->nrings;
    op->fd = -1;
    op->fd2 = -1;
    op->pipe[0] = -1;
    op->pipe[1] = -1;
}

bool cr_aop_is_busy(const struct cr_aop *op)
{
    return (__atomic_load_n(&op->state, __ATOMIC_ACQUIRE) & CR__AOP_BUSY) != 0;
}

bool cr__aop_advance(struct cr_aop *op, size_t n)
{
    op->done += n;
    if (op->kind == CR__AOP_SENDV) {
        while (op->iovpos < op->iovcnt) {
            struct iovec *v = &op->iov[op->iovpos];

            if (n < v->iov_len) {
                v->iov_base = (char *)v->iov_base + n;
                v->iov_len -= n;
                break;
            }
            n -= v->iov_len;
            op->iovpos++;
        }
    }
    return op->done == op->len;
}

/* Claims the token for a new operation. */
static int begin_op(struct cr_aop *op, int kind, int fd, uint64_t timeout_ms)
{
    int st = __atomic_load_n(&op->state, __ATOMIC_RELAXED);

    if (cr__proactor_is_stopping(op->p))
        return -ESHUTDOWN;
    /* A stale CR__AOP_CANCEL (a cancel that lost to the completion) is
     * dropped here; BUSY is what makes the token ours. */
    do {
        if (st & CR__AOP_BUSY)
            return -EBUSY;
    } while (!__atomic_compare_exchange_n(&op->state, &st, CR__AOP_BUSY, false, __ATOMIC_SEQ_CST,
                                          __ATOMIC_RELAXED));
    op->kind = kind;
    op->fd = fd;
    op->fd2 = -1;
    op->flags = 0;
    op->deadline_ns = timeout_ms != 0 ? cr_clock_now_ns() + timeout_ms * CR_NSEC_PER_MSEC : 0;
    op->buf = NULL;
    op->len = 0;
    op->done = 0;
    op->off = 0;
    op->iovcnt = 0;
    op->iovpos = 0;
    op->res = 0;
    op->cflags = 0;
    op->inpipe = 0;
    return 0;
}

int cr_aop_accept(struct cr_aop *op, int listen_fd, bool multishot)
{
    int err;

    if (listen_fd < 0)
        return -EBADF;
    err = begin_op(op, CR__AOP_ACCEPT, listen_fd, 0);
    if (err < 0)
        return err;
    op->flags = multishot ? CR__AOPF_MULTISHOT : 0;
    return cr__proactor_submit(op);
}

int cr_aop_recv(struct cr_aop *op, int fd, void *buf, size_t len, uint64_t timeout_ms)
{
    int err;

    if (fd < 0)
        return -EBADF;
    if (buf == NULL && len != 0)
        return -EINVAL;
    err = begin_op(op, CR__AOP_RECV, fd, timeout_ms);
    if (err < 0)
        return err;
    op->buf = buf;
    op->len = len;
    return cr__proactor_submit(op);
}

int cr_aop_send(struct cr_aop *op, int fd, const void *buf, size_t len, uint64_t timeout_ms)
{
    int err;

    if (fd < 0)
        return -EBADF;
    if ((buf == NULL && len != 0) || len > SSIZE_MAX)
        return -EINVAL;
    err = begin_op(op, CR__AOP_SEND, fd, timeout_ms);
    if (err < 0)
        return err;
    /* The engines only read through buf. */
    op->buf = (void *)(uintptr_t)buf;
    op->len = len;
    return cr__proactor_submit(op);
}

int cr_aop_sendv(struct cr_aop *op, int fd, const struct iovec *iov, int iovcnt,
                 uint64_t timeout_ms)
{
    size_t total = 0;
    int err;

    if (fd < 0)
        return -EBADF;
    if (iov == NULL || iovcnt <= 0 || iovcnt > CR_AOP_MAX_IOV)
        return -EINVAL;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len > SSIZE_MAX - total)
            return -EINVAL;
        total += iov[i].iov_len;
    }
    err = begin_op(op, CR__AOP_SENDV, fd, timeout_ms);
    if (err < 0)
        return err;
    memcpy(op->iov, iov, (size_t)iovcnt * sizeof(*iov));
    op->iovcnt = iovcnt;
    op->len = total;
    return cr__proactor_submit(op);
}

int cr_aop_sendfile(struct cr_aop *op, int sock_fd, int file_fd, off_t off, size_t len,
                    uint64_t timeout_ms)
{
    int err;

    if (sock_fd < 0 || file_fd < 0)
        return -EBADF;
    if (off < 0 || len > SSIZE_MAX)
        return -EINVAL;
    err = begin_op(op, CR__AOP_SENDFILE, sock_fd, timeout_ms);
    if (err < 0)
        return err;
    op->fd2 = file_fd;
    op->off = off;
    op->len = len;
    return cr__proactor_submit(op);
}

int cr_aop_connect(struct cr_aop *op, int fd, const struct sockaddr *addr, socklen_t addrlen,
                   uint64_t timeout_ms)
{
    int err;

    if (fd < 0)
        return -EBADF;
    if (addr == NULL || addrlen == 0 || addrlen > sizeof(op->addr))
        return -EINVAL;
    err = begin_op(op, CR__AOP_CONNECT, fd, timeout_ms);
    if (err < 0)
        return err;
    memcpy(&op->addr, addr, addrlen);
    op->addrlen = addrlen;
    return cr__proactor_submit(op);
}

int cr_aop_timer(struct cr_aop *op, uint64_t ms)
{
    int err = begin_op(op, CR__AOP_TIMER, -1, 0);

    if (err < 0)
        return err;
    op->deadline_ns = cr_clock_now_ns() + ms * CR_NSEC_PER_MSEC;
    return cr__proactor_submit(op);
}

int cr_aop_post(struct cr_aop *op, ssize_t res)
{
    int err = begin_op(op, CR__AOP_POST, -1, 0);

    if (err < 0)
        return err;
    op->res = res;
    return cr__proactor_submit(op);
}

int cr_aop_cancel(struct cr_aop *op)
{
    struct cr_proactor *p = op->p;

    if (!(__atomic_load_n(&op->state, __ATOMIC_ACQUIRE) & CR__AOP_BUSY))
        return -ENOENT;
    /* If the operation finished meanwhile, the bit is stale and the next
     * begin_op drops it. */
    __atomic_fetch_or(&op->state, CR__AOP_CANCEL, __ATOMIC_SEQ_CST);
    p->eng->cancel(&p->rings[op->ring], op);
    return 0;
}
