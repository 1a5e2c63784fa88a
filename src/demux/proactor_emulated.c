/*
 * proactor_emulated.c - the emulated asynchronous operation engine (the
 * Proactor paper's section 7.1.2): a pool of engine threads performs each
 * operation with non-blocking system calls, waits for readiness with epoll
 * (one-shot, so one thread takes an event) and queues the completion for the
 * ring's dispatcher. Used where io_uring cannot be, or when asked for. One
 * instance per ring; the dispatcher calls wait(), any thread start/cancel.
 * Owns its engine threads, the epoll and wake descriptors, the queues; borrows
 * the tokens and their descriptors.
 *
 * Where a token is (estate, under mu): queued for an engine thread (subq),
 * armed on its descriptor's read or write list, a bare timer (only in the
 * deadline heap), running on an engine thread (on no list: that thread owns
 * it), or done (on the completion queue, or handed to the dispatcher). A token
 * with a deadline is also in the heap until it completes. Cancel, timeout and
 * stop complete a token wherever it waits; a running token is checked by its
 * engine thread before it would wait again (a running operation that
 * completes keeps its real result).
 *
 * Descriptors should be non-blocking: recv and send use MSG_DONTWAIT, but
 * accept4(2), connect(2) and sendfile(2) follow the descriptor's mode and
 * would hold an engine thread.
 *
 * Lock order: mu only (the dispatcher's locks are never held when calling in).
 */
#include "demux/proactor_internal.h"

#include <cabrank/clock.h>

#include "os/sync_internal.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

enum {
    E_IDLE = 0,
    E_QUEUED,
    E_ARMED,
    E_TIMER,
    E_RUNNING,
    E_DONE,
    E_WHERE = 0xff,
    E_TIMEDOUT = 0x100, /* the deadline passed while running */
};

#define NO_HEAP        SIZE_MAX
#define MAX_EVENTS     64
#define SENDFILE_CHUNK (1u << 30)

struct fdent {
    struct cr_aop *rd; /* waiting to read (recv, accept), linked by next */
    struct cr_aop *wr; /* waiting to write (send, sendv, sendfile, connect) */
};

struct emu {
    /* Immutable after open. */
    struct cr__ring *r;
    int epfd;
    int evfd;
    unsigned nthreads;
    pthread_t *tids;
    struct cr_mutex mu;
    pthread_cond_t cq_cv;
    /* Protected by mu. */
    struct cr_aop *subq_head;
    struct cr_aop *subq_tail;
    struct cr_aop *cq_head;
    struct cr_aop *cq_tail;
    struct fdent *fds;
    size_t nfds;
    struct cr_aop **heap; /* min-heap on deadline_ns */
    size_t heap_len;
    size_t heap_cap;
    unsigned wakes;
    bool closing;
};

/* ---------------------------------------------------------------- deadline heap */

static void heap_set(struct emu *e, size_t i, struct cr_aop *op)
{
    e->heap[i] = op;
    op->heap_idx = i;
}

static void heap_up(struct emu *e, size_t i)
{
    struct cr_aop *op = e->heap[i];

    while (i > 0) {
        size_t parent = (i - 1) / 2;

        if (e->heap[parent]->deadline_ns <= op->deadline_ns)
            break;
        heap_set(e, i, e->heap[parent]);
        i = parent;
    }
    heap_set(e, i, op);
}

static void heap_down(struct emu *e, size_t i)
{
    struct cr_aop *op = e->heap[i];

    for (;;) {
        size_t c = 2 * i + 1;

        if (c >= e->heap_len)
            break;
        if (c + 1 < e->heap_len && e->heap[c + 1]->deadline_ns < e->heap[c]->deadline_ns)
            c++;
        if (op->deadline_ns <= e->heap[c]->deadline_ns)
            break;
        heap_set(e, i, e->heap[c]);
        i = c;
    }
    heap_set(e, i, op);
}

static int heap_push(struct emu *e, struct cr_aop *op)
{
    if (e->heap_len == e->heap_cap) {
        size_t cap = e->heap_cap != 0 ? 2 * e->heap_cap : 64;
        struct cr_aop **h = realloc(e->heap, cap * sizeof(*h));

        if (h == NULL)
            return -ENOMEM;
        e->heap = h;
        e->heap_cap = cap;
    }
    heap_set(e, e->heap_len++, op);
    heap_up(e, op->heap_idx);
    return 0;
}

static void heap_remove(struct emu *e, struct cr_aop *op)
{
    size_t i = op->heap_idx;

    if (i == NO_HEAP)
        return;
    op->heap_idx = NO_HEAP;
    e->heap_len--;
    if (i == e->heap_len)
        return;
    heap_set(e, i, e->heap[e->heap_len]);
    heap_down(e, i);
    heap_up(e, e->heap[i]->heap_idx);
}

/* ---------------------------------------------------------------- queues */

static void kick(struct emu *e)
{
    uint64_t one = 1;

    /* Fails only when the counter would overflow: a wake-up is pending. */
    (void)!write(e->evfd, &one, sizeof(one));
}

/* Queues op's completion for the dispatcher. Caller holds mu. */
static void complete(struct emu *e, struct cr_aop *op, ssize_t res, unsigned flags)
{
    cr_mutex_assert_held(&e->mu);
    heap_remove(e, op);
    op->res = res;
    op->cflags = flags;
    op->estate = E_DONE;
    op->next = NULL;
    if (e->cq_tail != NULL)
        e->cq_tail->next = op;
    else
        e->cq_head = op;
    e->cq_tail = op;
    cr_cond_signal(&e->cq_cv);
}

/* Caller holds mu. */
static void subq_push(struct emu *e, struct cr_aop *op)
{
    op->estate = E_QUEUED;
    op->next = NULL;
    if (e->subq_tail != NULL)
        e->subq_tail->next = op;
    else
        e->subq_head = op;
    e->subq_tail = op;
    kick(e);
}

/* Caller holds mu. */
static void subq_remove(struct emu *e, struct cr_aop *op)
{
    struct cr_aop *prev = NULL;

    for (struct cr_aop *it = e->subq_head; it != NULL; prev = it, it = it->next) {
        if (it != op)
            continue;
        if (prev != NULL)
            prev->next = op->next;
        else
            e->subq_head = op->next;
        if (e->subq_tail == op)
            e->subq_tail = prev;
        return;
    }
}

static bool is_reader(const struct cr_aop *op)
{
    return op->kind == CR__AOP_RECV || op->kind == CR__AOP_ACCEPT;
}

static void list_remove(struct cr_aop **head, struct cr_aop *op)
{
    for (struct cr_aop **it = head; *it != NULL; it = &(*it)->next) {
        if (*it == op) {
            *it = op->next;
            return;
        }
    }
}

/* Sets fd's epoll interest to its lists. Caller holds mu (so two threads
 * never apply interests out of order). 0 or -errno. */
static int update_interest(struct emu *e, int fd)
{
    struct fdent *fe = &e->fds[fd];
    struct epoll_event ev = {.data.fd = fd};

    if (fe->rd == NULL && fe->wr == NULL)
        return 0;
    ev.events = EPOLLONESHOT | (fe->rd != NULL ? EPOLLIN | EPOLLRDHUP : 0) |
                (fe->wr != NULL ? EPOLLOUT : 0);
    /* The registration outlives a closed descriptor's number (epoll drops
     * it with the file): MOD, else ADD. */
    if (epoll_ctl(e->epfd, EPOLL_CTL_MOD, fd, &ev) == 0)
        return 0;
    if (errno == ENOENT && epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) == 0)
        return 0;
    return -errno;
}

/* Puts a running op on its descriptor's list to wait. Caller holds mu. */
static void arm(struct emu *e, struct cr_aop *op)
{
    int fd = op->fd;
    struct cr_aop **head;
    int err;

    cr_mutex_assert_held(&e->mu);
    if ((size_t)fd >= e->nfds) {
        size_t n = e->nfds != 0 ? e->nfds : 64;
        struct fdent *fds;

        while (n <= (size_t)fd)
            n *= 2;
        fds = realloc(e->fds, n * sizeof(*fds));
        if (fds == NULL) {
            complete(e, op, -ENOMEM, 0);
            return;
        }
        memset(fds + e->nfds, 0, (n - e->nfds) * sizeof(*fds));
        e->fds = fds;
        e->nfds = n;
    }
    head = is_reader(op) ? &e->fds[fd].rd : &e->fds[fd].wr;
    op->next = *head;
    *head = op;
    op->estate = E_ARMED;
    err = update_interest(e, fd);
    if (err < 0) {
        list_remove(head, op);
        complete(e, op, err, 0);
    }
}

/* Completes op with res wherever it waits (cancel, timeout, stop); a running
 * op is left to its engine thread. Caller holds mu. */
static void abort_op(struct emu *e, struct cr_aop *op, ssize_t res)
{
    switch (op->estate & E_WHERE) {
    case E_QUEUED:
        subq_remove(e, op);
        break;
    case E_ARMED:
        list_remove(is_reader(op) ? &e->fds[op->fd].rd : &e->fds[op->fd].wr, op);
        break;
    case E_TIMER:
        break;
    case E_RUNNING:
        if (res == -ETIMEDOUT) {
            op->estate |= E_TIMEDOUT;
            heap_remove(e, op);
        }
        return;
    default:
        return;
    }
    complete(e, op, res, 0);
}

/* ---------------------------------------------------------------- operations */

/*
 * Performs op as far as it goes without blocking. Returns true when it
 * completed (*res, *flags), false when it must wait for readiness. Runs on
 * an engine thread that owns op (running), without mu.
 */
static bool perform(struct cr_aop *op, ssize_t *res, unsigned *flags)
{
    ssize_t n;

    *flags = 0;
    for (;;) {
        switch (op->kind) {
        case CR__AOP_ACCEPT:
            n = accept4(op->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (n >= 0 && (op->flags & CR__AOPF_MULTISHOT))
                *flags = CR_AOP_MORE;
            /* A connection reset before we took it is not ours to report. */
            if (n < 0 && errno == ECONNABORTED)
                continue;
            break;
        case CR__AOP_RECV:
            n = recv(op->fd, op->buf, op->len, MSG_DONTWAIT);
            break;
        case CR__AOP_SEND:
            if (op->done == op->len) {
                *res = (ssize_t)op->len;
                return true;
            }
            n = send(op->fd, (char *)op->buf + op->done, op->len - op->done,
                     MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n >= 0) {
                cr__aop_advance(op, (size_t)n);
                continue;
            }
            break;
        case CR__AOP_SENDV: {
            struct msghdr msg = {
                .msg_iov = &op->iov[op->iovpos],
                .msg_iovlen = (size_t)(op->iovcnt - op->iovpos),
            };

            if (op->done == op->len) {
                *res = (ssize_t)op->len;
                return true;
            }
            n = sendmsg(op->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n >= 0) {
                cr__aop_advance(op, (size_t)n);
                continue;
            }
            break;
        }
        case CR__AOP_SENDFILE: {
            off_t pos = op->off + (off_t)op->done;
            size_t left = op->len - op->done;

            if (left == 0) {
                *res = (ssize_t)op->len;
                return true;
            }
            n = sendfile(op->fd, op->fd2, &pos, left < SENDFILE_CHUNK ? left : SENDFILE_CHUNK);
            if (n > 0) {
                cr__aop_advance(op, (size_t)n);
                continue;
            }
            if (n == 0) {
                /* The file ended before len bytes. */
                *res = -EIO;
                return true;
            }
            break;
        }
        case CR__AOP_CONNECT:
            if (op->done == 0) {
                /* First step: start the connection. */
                op->done = 1;
                n = connect(op->fd, (const struct sockaddr *)&op->addr, op->addrlen);
                if (n < 0 && errno == EINPROGRESS)
                    return false;
            } else {
                int soerr = 0;
                socklen_t sl = sizeof(soerr);

                n = getsockopt(op->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
                if (n == 0 && soerr != 0) {
                    n = -1;
                    errno = soerr;
                }
            }
            break;
        default:
            n = -1;
            errno = EINVAL;
            break;
        }
        if (n >= 0) {
            *res = n;
            return true;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return false;
        *res = -errno;
        return true;
    }
}

/* Runs an op this thread owns: completes it, or arms it unless a cancel,
 * stop or deadline came meanwhile. */
static void run_op(struct emu *e, struct cr_aop *op)
{
    ssize_t res = 0;
    unsigned flags = 0;
    bool done = perform(op, &res, &flags);

    cr_mutex_lock(&e->mu);
    if (done)
        complete(e, op, res, flags);
    else if (op->estate & E_TIMEDOUT)
        complete(e, op, -ETIMEDOUT, 0);
    else if (cr__aop_is_cancelled(op))
        complete(e, op, -ECANCELED, 0);
    else
        arm(e, op);
    cr_mutex_unlock(&e->mu);
}

/* Completes what is past its deadline. Returns the epoll timeout to the next
 * one (-1: none). Caller holds mu. */
static int expire(struct emu *e)
{
    uint64_t now = cr_clock_now_ns();

    while (e->heap_len > 0) {
        struct cr_aop *op = e->heap[0];
        uint64_t ms;

        if (op->deadline_ns > now) {
            ms = (op->deadline_ns - now + CR_NSEC_PER_MSEC - 1) / CR_NSEC_PER_MSEC;
            return ms > INT32_MAX ? INT32_MAX : (int)ms;
        }
        abort_op(e, op, -ETIMEDOUT);
    }
    return -1;
}

/* The descriptor is ready: takes its waiting operations and runs them. */
static void on_ready(struct emu *e, int fd, uint32_t events)
{
    struct cr_aop *rd = NULL;
    struct cr_aop *wr = NULL;

    cr_mutex_lock(&e->mu);
    if ((size_t)fd < e->nfds) {
        if (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) {
            rd = e->fds[fd].rd;
            e->fds[fd].rd = NULL;
        }
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
            wr = e->fds[fd].wr;
            e->fds[fd].wr = NULL;
        }
        for (struct cr_aop *op = rd; op != NULL; op = op->next)
            op->estate = E_RUNNING;
        for (struct cr_aop *op = wr; op != NULL; op = op->next)
            op->estate = E_RUNNING;
        /* The other direction's waiters wait on. */
        if (update_interest(e, fd) < 0) {
            /* Cannot happen for a descriptor that was just reported. */
        }
    }
    cr_mutex_unlock(&e->mu);
    while (rd != NULL) {
        struct cr_aop *op = rd;

        rd = op->next;
        run_op(e, op);
    }
    while (wr != NULL) {
        struct cr_aop *op = wr;

        wr = op->next;
        run_op(e, op);
    }
}

static void *engine_main(void *arg)
{
    struct emu *e = arg;
    struct epoll_event evs[MAX_EVENTS];

    for (;;) {
        int timeout;
        int n;

        cr_mutex_lock(&e->mu);
        timeout = expire(e);
        cr_mutex_unlock(&e->mu);
        n = epoll_wait(e->epfd, evs, MAX_EVENTS, timeout);
        for (int i = 0; i < n; i++) {
            struct epoll_event rearm = {.events = EPOLLIN | EPOLLONESHOT, .data.fd = e->evfd};
            struct cr_aop *q;
            uint64_t cnt;
            bool closing;

            if (evs[i].data.fd != e->evfd) {
                on_ready(e, evs[i].data.fd, evs[i].events);
                continue;
            }
            cr_mutex_lock(&e->mu);
            closing = e->closing;
            if (!closing) {
                (void)!read(e->evfd, &cnt, sizeof(cnt));
                q = e->subq_head;
                e->subq_head = NULL;
                e->subq_tail = NULL;
                for (struct cr_aop *op = q; op != NULL; op = op->next)
                    op->estate = E_RUNNING;
            }
            cr_mutex_unlock(&e->mu);
            /* One-shot: one thread takes the wake-up; re-armed for the next
             * (closing: left readable, so every thread sees it). */
            (void)epoll_ctl(e->epfd, EPOLL_CTL_MOD, e->evfd, &rearm);
            if (closing)
                return NULL;
            while (q != NULL) {
                struct cr_aop *op = q;

                q = op->next;
                run_op(e, op);
            }
        }
    }
}

/* ---------------------------------------------------------------- engine ops */

static int emu_start(struct cr__ring *r, struct cr_aop *op)
{
    struct emu *e = r->engine;
    int err = 0;

    op->heap_idx = NO_HEAP;
    op->estate = E_IDLE;
    cr_mutex_lock(&e->mu);
    if (cr__aop_is_cancelled(op)) {
        complete(e, op, -ECANCELED, 0);
        goto out_unlock;
    }
    if (op->kind == CR__AOP_POST) {
        complete(e, op, op->res, 0);
        goto out_unlock;
    }
    if (op->deadline_ns != 0) {
        err = heap_push(e, op);
        if (err < 0)
            goto out_unlock;
    }
    if (op->kind == CR__AOP_TIMER) {
        op->estate = E_TIMER;
        /* An engine thread recomputes its epoll timeout. */
        kick(e);
    } else {
        subq_push(e, op);
    }
out_unlock:
    cr_mutex_unlock(&e->mu);
    return err;
}

static void emu_cancel(struct cr__ring *r, struct cr_aop *op)
{
    struct emu *e = r->engine;

    cr_mutex_lock(&e->mu);
    abort_op(e, op, -ECANCELED);
    cr_mutex_unlock(&e->mu);
}

static void emu_cancel_all(struct cr__ring *r)
{
    struct emu *e = r->engine;

    cr_mutex_lock(&e->mu);
    while (e->subq_head != NULL)
        abort_op(e, e->subq_head, -ECANCELED);
    for (size_t fd = 0; fd < e->nfds; fd++) {
        while (e->fds[fd].rd != NULL)
            abort_op(e, e->fds[fd].rd, -ECANCELED);
        while (e->fds[fd].wr != NULL)
            abort_op(e, e->fds[fd].wr, -ECANCELED);
    }
    /* Left in the heap: bare timers, and running operations, which their
     * engine threads complete (they see the stop). */
    for (size_t i = 0; i < e->heap_len;) {
        if ((e->heap[i]->estate & E_WHERE) == E_TIMER) {
            complete(e, e->heap[i], -ECANCELED, 0);
            i = 0;
        } else {
            i++;
        }
    }
    cr_mutex_unlock(&e->mu);
}

static int emu_wait(struct cr__ring *r, struct cr__completion *c)
{
    struct emu *e = r->engine;
    struct cr_aop *op;

    cr_mutex_lock(&e->mu);
    while (e->cq_head == NULL && e->wakes == 0)
        cr_cond_wait(&e->cq_cv, &e->mu);
    op = e->cq_head;
    if (op == NULL) {
        e->wakes--;
        cr_mutex_unlock(&e->mu);
        return 0;
    }
    e->cq_head = op->next;
    if (e->cq_head == NULL)
        e->cq_tail = NULL;
    c->op = op;
    c->res = op->res;
    c->flags = op->cflags;
    if (op->cflags & CR_AOP_MORE) {
        /* A multishot accept: one completion at a time on the queue (the
         * token has one link); taken, it goes back to the engine. */
        if (cr__aop_is_cancelled(op))
            complete(e, op, -ECANCELED, 0);
        else
            subq_push(e, op);
    } else {
        op->estate = E_IDLE;
    }
    cr_mutex_unlock(&e->mu);
    return 1;
}

static void emu_wake(struct cr__ring *r)
{
    struct emu *e = r->engine;

    cr_mutex_lock(&e->mu);
    e->wakes++;
    cr_cond_signal(&e->cq_cv);
    cr_mutex_unlock(&e->mu);
}

static void emu_close(struct cr__ring *r)
{
    struct emu *e = r->engine;

    if (e == NULL)
        return;
    cr_mutex_lock(&e->mu);
    e->closing = true;
    kick(e);
    cr_mutex_unlock(&e->mu);
    for (unsigned i = 0; i < e->nthreads; i++)
        pthread_join(e->tids[i], NULL);
    close(e->evfd);
    close(e->epfd);
    cr_cond_fini(&e->cq_cv);
    cr_mutex_fini(&e->mu);
    free(e->heap);
    free(e->fds);
    free(e->tids);
    free(e);
    r->engine = NULL;
}

static int emu_open(struct cr__ring *r, const struct cr_proactor_config *cfg, const char **why)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT};
    struct emu *e;
    unsigned n = cfg->engine_threads;
    int err;

    *why = NULL;
    if (n == 0)
        n = cfg->dispatch != NULL && strcmp(cfg->dispatch, "ring-per-thread") == 0 ? 1 : 2;
    if (n > 256)
        return -EINVAL;
    e = calloc(1, sizeof(*e));
    if (e == NULL)
        return -ENOMEM;
    e->r = r;
    e->tids = calloc(n, sizeof(*e->tids));
    if (e->tids == NULL) {
        err = -ENOMEM;
        goto out_free;
    }
    err = cr_mutex_init(&e->mu);
    if (err < 0)
        goto out_free;
    err = -pthread_cond_init(&e->cq_cv, NULL);
    if (err < 0)
        goto out_mutex;
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (e->epfd < 0) {
        err = -errno;
        goto out_cond;
    }
    e->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (e->evfd < 0) {
        err = -errno;
        goto out_epfd;
    }
    ev.data.fd = e->evfd;
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->evfd, &ev) < 0) {
        err = -errno;
        goto out_evfd;
    }
    r->engine = e;
    for (e->nthreads = 0; e->nthreads < n; e->nthreads++) {
        err = -pthread_create(&e->tids[e->nthreads], NULL, engine_main, e);
        if (err < 0) {
            emu_close(r);
            return err;
        }
    }
    return 0;

out_evfd:
    close(e->evfd);
out_epfd:
    close(e->epfd);
out_cond:
    cr_cond_fini(&e->cq_cv);
out_mutex:
    cr_mutex_fini(&e->mu);
out_free:
    free(e->tids);
    free(e);
    return err;
}

const struct cr__engine_ops cr__proactor_emulated_ops = {
    .name = "emulated",
    .open = emu_open,
    .close = emu_close,
    .start = emu_start,
    .cancel = emu_cancel,
    .cancel_all = emu_cancel_all,
    .wait = emu_wait,
    .wake = emu_wake,
};
