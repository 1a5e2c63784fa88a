/*
 * bound_pool.c - the bound handle/thread Leader/Followers variant, client
 * side (POSA2 Leader/Followers, Variants: Bound_LF_Thread_Pool, and the
 * hybrid client/server). Called by threads that send requests on one
 * multiplexed connection and wait for their own replies: client threads
 * (standalone mode) or the threads of a cr_lf_pool (hybrid mode). Owns the
 * connection's socket (from attach to failure), the read buffer and the
 * request id table (a cr_u64_table); borrows the contexts, the lf pool and
 * the reactor. The standalone mode's leader and followers are in lf_bound.c,
 * which says why they are not lf_pool.c's; the hybrid mode waits in the lf
 * pool itself (join_hybrid, on_readable below).
 *
 * Locks, in order: send_lock (one whole request at a time), then lock (all
 * shared state), then whatever cr_lf_pool_notify and cr_reactor_* take
 * inside (both are leaves towards us: neither calls back into this file with
 * its lock held). lock is never held across poll, read, write, the decoder or
 * on_fail.
 *
 * Invariants, under lock:
 * - A context is in the id table exactly while its state is CTX_REGISTERED,
 *   and then p->conn is live: a failure completes every registered context,
 *   and expect refuses without a live connection. So the table always holds
 *   the waiters of the current connection, and only those.
 * - A context is completed (result set, CTX_DONE, woken) only under lock, and
 *   its waiter only leaves join under lock, so the thread that completes a
 *   context may signal its condition variable or cr_lf_pool_notify its
 *   waiter without the context vanishing underneath (the signal happens
 *   before the unlock).
 * - Standalone: one leader polls and reads; followers sleep (lf_bound.c).
 * - Hybrid: the connection is one-shot in the reactor; the handler that set
 *   p->reading is the one reader and reactivates the handle when it is done.
 *
 * The read buffer (rbuf, rlen, rgen) belongs to the reader of the moment
 * (standalone: the leader; hybrid: the handler holding `reading`); it is
 * handed from reader to reader under lock. rgen names the connection whose
 * bytes it holds, so a reader of a new connection starts empty. Each reader
 * decodes every complete frame it read before it stops reading, so the buffer
 * only ever carries over the start of one incomplete frame.
 *
 * Connections are refcounted (struct conn): the pool holds one reference while
 * the connection is current, the leader, a reading handler or a sender one
 * each while it uses the fd outside the lock. A failure shuts the socket down
 * (waking pollers and blocked senders) and drops the pool's reference; the
 * last reference closes the fd, so no thread ever polls, reads or writes a
 * closed (and maybe reused) descriptor.
 */
#include <cabrank/lf_pool.h>
#include <cabrank/reactor.h>

#include "pool/bound_pool_internal.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_READ_BUFFER (64 * 1024)
#define DEFAULT_BUCKETS     256u
#define MIN_BUCKET_BITS     4
#define MAX_BUCKET_BITS     20
/* Reads per readiness event in hybrid mode before the handle is re-armed:
 * bounds the time one pool thread spends on the connection. */
#define READS_PER_EVENT 16

/* ------------------------------------------------------------------ contexts */

int cr_bound_ctx_init(struct cr_bound_ctx *c)
{
    int err;

    memset(c, 0, sizeof(*c));
    err = cr_cond_init(&c->cond);
    c->state = CTX_IDLE;
    return err;
}

void cr_bound_ctx_fini(struct cr_bound_ctx *c)
{
    assert(c->state != CTX_REGISTERED);
    cr_cond_fini(&c->cond);
}

/* ------------------------------------------------------------------ id table */

static struct cr_bound_ctx *lookup(struct cr_bound_pool *p, uint64_t id)
{
    struct cr_u64_node *n;

    cr_mutex_assert_held(&p->lock);
    n = cr_u64_table_find(&p->ids, id);
    return n == NULL ? NULL : cr_u64_table_entry(n, struct cr_bound_ctx, hnode);
}

static void unregister(struct cr_bound_pool *p, struct cr_bound_ctx *c)
{
    cr_mutex_assert_held(&p->lock);
    assert(c->state == CTX_REGISTERED);
    cr_u64_table_remove(&p->ids, &c->hnode);
    p->st.registered--;
}

/* ------------------------------------------------------------------ completion */

/* Wakes the thread of a just-completed context wherever it sleeps. Caller
 * holds lock (see the invariants at the top). */
static void wake(struct cr_bound_pool *p, struct cr_bound_ctx *c)
{
    cr_mutex_assert_held(&p->lock);
    if (c->wait_mode == WAIT_COND)
        cr_cond_signal(&c->cond);
    else if (c->wait_mode == WAIT_LF)
        cr_lf_pool_notify(p->lf, &c->lfw);
}

static void complete(struct cr_bound_pool *p, struct cr_bound_ctx *c, ssize_t result)
{
    unregister(p, c);
    c->result = result;
    c->state = CTX_DONE;
    if (c->queued)
        cr__lf_bound_dequeue(p, c);
    wake(p, c);
}

void cr__bound_pool_expire(struct cr_bound_pool *p, struct cr_bound_ctx *c)
{
    complete(p, c, -ETIMEDOUT);
    p->st.timeouts++;
}

/* ------------------------------------------------------------------ connection */

void cr__bound_pool_conn_put(struct cr_bound_pool *p, struct conn *conn)
{
    cr_mutex_assert_held(&p->lock);
    assert(conn->refs > 0);
    if (--conn->refs > 0)
        return;
    close(conn->fd);
    free(conn);
}

bool cr__bound_pool_fail_locked(struct cr_bound_pool *p, struct conn *conn, int err)
{
    struct cr_u64_table_iter it = {0};

    cr_mutex_assert_held(&p->lock);
    if (conn == NULL || p->conn != conn)
        return false;
    p->conn = NULL;
    p->fail_err = err;
    p->st.failures++;
    if (p->lf != NULL) {
        /* Removed while the fd is still open; a handler already dispatched
         * sees p->conn changed and leaves. -ENOENT cannot happen: the
         * registration lives exactly as long as the connection is current. */
        int rc = cr_reactor_remove(p->reactor, conn->fd);

        assert(rc == 0);
        (void)rc;
    }
    /* Wakes a sender blocked in poll(POLLOUT) and a leader in poll(POLLIN). */
    (void)shutdown(conn->fd, SHUT_RDWR);
    /* complete() takes each context out of the table: the walk allows it. */
    for (struct cr_u64_node *n = cr_u64_table_next(&p->ids, &it); n != NULL;
         n = cr_u64_table_next(&p->ids, &it))
        complete(p, cr_u64_table_entry(n, struct cr_bound_ctx, hnode), err);
    if (p->wake_fd >= 0) {
        uint64_t one = 1;

        /* EAGAIN only if the counter is saturated: the leader wakes anyway. */
        (void)!write(p->wake_fd, &one, sizeof(one));
    }
    cr__bound_pool_conn_put(p, conn);
    return true;
}

static void report_failure(struct cr_bound_pool *p, int err)
{
    if (err != 0 && p->on_fail != NULL)
        p->on_fail(p, err, p->fail_arg);
}

void cr_bound_pool_fail(struct cr_bound_pool *p, int err)
{
    bool failed;

    if (err >= 0)
        err = -ECONNRESET;
    cr_mutex_lock(&p->lock);
    failed = cr__bound_pool_fail_locked(p, p->conn, err);
    cr_mutex_unlock(&p->lock);
    if (failed)
        report_failure(p, err);
}

/* ------------------------------------------------------------------ reading */

/* Hands one reply to the context waiting for it (the paper's step (b)). */
static void deliver(struct cr_bound_pool *p, struct conn *conn, uint64_t id, const char *payload,
                    size_t len)
{
    struct cr_bound_ctx *c;

    cr_mutex_lock(&p->lock);
    c = p->conn == conn ? lookup(p, id) : NULL;
    if (c == NULL) {
        p->st.dropped++;
        cr_mutex_unlock(&p->lock);
        return;
    }
    /* Copied under the lock: the waiter may time out the moment it is
     * released, taking its buffer with it. Replies are small; the lock is
     * held for one memcpy. */
    if (len > c->cap) {
        complete(p, c, -EMSGSIZE);
    } else {
        if (len > 0)
            memcpy(c->buf, payload, len);
        complete(p, c, (ssize_t)len);
    }
    p->st.delivered++;
    if (!pthread_equal(c->owner, pthread_self()))
        p->st.handed_off++;
    cr_mutex_unlock(&p->lock);
}

/*
 * Decodes and delivers every complete frame in the read buffer, keeping the
 * start of an incomplete one. 0, -EBADMSG (malformed, or a decoder that broke
 * its contract), -EMSGSIZE (a frame larger than the buffer). Reader only.
 */
static int process_input(struct cr_bound_pool *p, struct conn *conn)
{
    size_t off = 0;

    while (off < p->rlen) {
        const char *start = p->rbuf + off;
        size_t avail = p->rlen - off;
        const char *payload = NULL;
        size_t plen = 0;
        uint64_t id = 0;
        ssize_t n = p->decode(p->decode_arg, start, avail, &id, &payload, &plen);

        if (n == -EAGAIN)
            break;
        if (n <= 0 || (size_t)n > avail)
            return -EBADMSG;
        if (plen > 0 &&
            (payload < start || payload > start + n || plen > (size_t)(start + n - payload)))
            return -EBADMSG;
        deliver(p, conn, id, payload, plen);
        off += (size_t)n;
    }
    if (off > 0) {
        memmove(p->rbuf, p->rbuf + off, p->rlen - off);
        p->rlen -= off;
    }
    return p->rlen == p->rcap ? -EMSGSIZE : 0;
}

int cr__bound_pool_read_input(struct cr_bound_pool *p, struct conn *conn)
{
    ssize_t n;

    if (p->rgen != conn->gen) {
        p->rlen = 0;
        p->rgen = conn->gen;
    }
    n = read(conn->fd, p->rbuf + p->rlen, p->rcap - p->rlen);
    if (n > 0) {
        int err;

        p->rlen += (size_t)n;
        err = process_input(p, conn);
        return err != 0 ? err : 1;
    }
    if (n == 0)
        return -ECONNRESET;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return 0;
    return -errno;
}

/* ------------------------------------------------------------------ hybrid */

/*
 * join for hybrid mode: a thread that serves the lf pool (one of its threads,
 * or one inside cr_lf_pool_join) rejoins it, serving other events, until
 * notified; any other thread (cr_lf_pool_wait says -EINVAL) sleeps on its
 * condition variable. Caller holds lock; c is registered or done.
 */
static void join_hybrid(struct cr_bound_pool *p, struct cr_bound_ctx *c, uint64_t deadline)
{
    bool use_lf = true;

    while (c->state == CTX_REGISTERED) {
        int rc;

        if (bound_deadline_passed(deadline)) {
            cr__bound_pool_expire(p, c);
            break;
        }
        if (use_lf) {
            /* Initialised under lock, notified only under lock while
             * WAIT_LF: a reply between the unlock and the wait is kept in
             * the waiter and ends the wait at once. */
            cr_lf_waiter_init(&c->lfw);
            c->wait_mode = WAIT_LF;
            cr_mutex_unlock(&p->lock);
            rc = cr_lf_pool_wait(p->lf, &c->lfw, bound_remaining_ms(deadline));
            cr_mutex_lock(&p->lock);
            if (rc == -EINVAL) {
                use_lf = false;
                rc = 0;
            }
        } else {
            c->wait_mode = WAIT_COND;
            rc = bound_cond_wait(&c->cond, &p->lock, deadline);
        }
        c->wait_mode = WAIT_NONE;
        if (c->state != CTX_REGISTERED)
            break;
        if (rc == -ETIMEDOUT)
            cr__bound_pool_expire(p, c);
        else if (rc == -ECANCELED)
            complete(p, c, -ECANCELED);
        /* rc == 0 with no reply: a spurious wake-up; wait again. */
    }
}

/*
 * Readiness of the connection in hybrid mode, on whichever pool thread took
 * the event: the "leader" of the bound variant for this one event. Reads and
 * delivers what is there, then re-arms the one-shot handle.
 */
static void on_readable(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct cr_bound_pool *p = arg;
    struct conn *conn;
    bool failed = false;
    int err = 0;

    (void)r;
    (void)events;
    cr_mutex_lock(&p->lock);
    conn = p->conn;
    /* A stale event (the connection failed or was replaced) or a second
     * reader: the current reader re-arms the handle when it is done. */
    if (conn == NULL || conn->fd != fd || p->reading) {
        cr_mutex_unlock(&p->lock);
        return;
    }
    p->reading = true;
    conn->refs++;
    cr_mutex_unlock(&p->lock);

    for (int i = 0; i < READS_PER_EVENT; i++) {
        err = cr__bound_pool_read_input(p, conn);
        if (err <= 0)
            break;
    }

    cr_mutex_lock(&p->lock);
    p->reading = false;
    if (err < 0)
        failed = cr__bound_pool_fail_locked(p, conn, err);
    if (p->conn != NULL) {
        /* Level-triggered: bytes that came after our last read fire again. */
        int rc = cr_reactor_reactivate(p->reactor, p->conn->fd);

        assert(rc == 0);
        (void)rc;
    }
    cr__bound_pool_conn_put(p, conn);
    cr_mutex_unlock(&p->lock);
    if (failed)
        report_failure(p, err);
}

/* ------------------------------------------------------------------ public */

int cr_bound_pool_create(struct cr_bound_pool **out, const struct cr_bound_pool_config *cfg)
{
    struct cr_bound_pool *p;
    unsigned bits = MIN_BUCKET_BITS;
    int err;

    if (cfg == NULL || cfg->decode == NULL || (cfg->lf == NULL) != (cfg->reactor == NULL))
        return -EINVAL;
    while ((1u << bits) < (cfg->buckets ? cfg->buckets : DEFAULT_BUCKETS) && bits < MAX_BUCKET_BITS)
        bits++;
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    p->decode = cfg->decode;
    p->decode_arg = cfg->decode_arg;
    p->lf = cfg->lf;
    p->reactor = cfg->reactor;
    p->on_fail = cfg->on_fail;
    p->fail_arg = cfg->fail_arg;
    p->rcap = cfg->read_buffer ? cfg->read_buffer : DEFAULT_READ_BUFFER;
    p->fail_err = -ENOTCONN;
    p->wake_fd = -1;

    err = cr_u64_table_init(&p->ids, bits, bits);
    if (err != 0)
        goto out_free_pool;
    err = -ENOMEM;
    p->rbuf = malloc(p->rcap);
    if (p->rbuf == NULL)
        goto out_fini_ids;
    if (p->lf == NULL) {
        p->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (p->wake_fd < 0) {
            err = -errno;
            goto out_free_rbuf;
        }
    }
    err = cr_mutex_init(&p->lock);
    if (err != 0)
        goto out_close_wake;
    err = cr_mutex_init(&p->send_lock);
    if (err != 0)
        goto out_fini_lock;
    *out = p;
    return 0;

out_fini_lock:
    cr_mutex_fini(&p->lock);
out_close_wake:
    if (p->wake_fd >= 0)
        close(p->wake_fd);
out_free_rbuf:
    free(p->rbuf);
out_fini_ids:
    cr_u64_table_fini(&p->ids);
out_free_pool:
    free(p);
    return err;
}

void cr_bound_pool_destroy(struct cr_bound_pool *p)
{
    if (p == NULL)
        return;
    cr_mutex_lock(&p->lock);
    assert(p->st.registered == 0 && p->leader == NULL);
    if (p->conn != NULL) {
        struct conn *conn = p->conn;

        p->conn = NULL;
        if (p->lf != NULL) {
            /* Registered for as long as the connection is current. */
            int rc = cr_reactor_remove(p->reactor, conn->fd);

            assert(rc == 0);
            (void)rc;
        }
        cr__bound_pool_conn_put(p, conn);
    }
    cr_mutex_unlock(&p->lock);
    cr_mutex_fini(&p->send_lock);
    cr_mutex_fini(&p->lock);
    if (p->wake_fd >= 0)
        close(p->wake_fd);
    free(p->rbuf);
    cr_u64_table_fini(&p->ids);
    free(p);
}

int cr_bound_pool_attach(struct cr_bound_pool *p, int fd)
{
    struct conn *conn;
    int type;
    socklen_t len = sizeof(type);
    int fl;
    int err = 0;

    if (fd < 0)
        return -EBADF;
    fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -errno;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
        return -errno;
    if (type != SOCK_STREAM && type != SOCK_SEQPACKET)
        return -EPROTOTYPE;
    conn = calloc(1, sizeof(*conn));
    if (conn == NULL)
        return -ENOMEM;
    conn->fd = fd;
    conn->refs = 1;

    cr_mutex_lock(&p->lock);
    if (p->conn != NULL) {
        err = -EBUSY;
        goto out_unlock;
    }
    /* Only now: a refused attach leaves the caller's fd as it was. */
    if (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        err = -errno;
        goto out_unlock;
    }
    if (p->lf != NULL) {
        err = cr_reactor_add(p->reactor, fd, CR_EV_READ, CR_REACTOR_ONESHOT, on_readable, p);
        if (err != 0)
            goto out_unlock;
    }
    conn->gen = ++p->next_gen;
    p->conn = conn;
    conn = NULL;
out_unlock:
    cr_mutex_unlock(&p->lock);
    free(conn);
    return err;
}

uint64_t cr_bound_pool_next_id(struct cr_bound_pool *p)
{
    return __atomic_add_fetch(&p->next_id, 1, __ATOMIC_RELAXED);
}

int cr_bound_pool_expect(struct cr_bound_pool *p, struct cr_bound_ctx *c, uint64_t id, void *buf,
                         size_t cap)
{
    int err = 0;

    if (buf == NULL && cap > 0)
        return -EINVAL;
    cr_mutex_lock(&p->lock);
    if (c->state != CTX_IDLE) {
        err = -EBUSY;
        goto out_unlock;
    }
    if (p->conn == NULL) {
        err = p->fail_err;
        goto out_unlock;
    }
    if (lookup(p, id) != NULL) {
        err = -EEXIST;
        goto out_unlock;
    }
    c->hnode.key = id;
    c->buf = buf;
    c->cap = cap;
    c->owner = pthread_self();
    c->result = 0;
    c->wait_mode = WAIT_NONE;
    c->promoted = false;
    c->queued = false;
    c->state = CTX_REGISTERED;
    cr_u64_table_insert(&p->ids, &c->hnode);
    p->st.registered++;
out_unlock:
    cr_mutex_unlock(&p->lock);
    return err;
}

int cr_bound_pool_cancel(struct cr_bound_pool *p, struct cr_bound_ctx *c)
{
    int err = 0;

    cr_mutex_lock(&p->lock);
    if (c->state == CTX_IDLE)
        err = -EINVAL;
    else if (c->state == CTX_REGISTERED)
        unregister(p, c);
    c->state = CTX_IDLE;
    cr_mutex_unlock(&p->lock);
    return err;
}

int cr_bound_pool_send(struct cr_bound_pool *p, const void *req, size_t len, int timeout_ms)
{
    uint64_t deadline = bound_deadline_after(timeout_ms);
    const char *data = req;
    struct conn *conn;
    size_t off = 0;
    bool failed = false;
    int err = 0;

    cr_mutex_lock(&p->lock);
    conn = p->conn;
    if (conn == NULL) {
        err = p->fail_err;
        cr_mutex_unlock(&p->lock);
        return err;
    }
    conn->refs++;
    cr_mutex_unlock(&p->lock);

    cr_mutex_lock(&p->send_lock);
    while (off < len) {
        ssize_t n = send(conn->fd, data + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pfd = {.fd = conn->fd, .events = POLLOUT};
            int ms = bound_remaining_ms(deadline);

            if (ms == 0) {
                err = -ETIMEDOUT;
                break;
            }
            /* Hang-up or error shows in the next send. */
            (void)poll(&pfd, 1, ms);
            continue;
        }
        err = n < 0 ? -errno : -EIO;
        if (err == -EPIPE)
            err = -ECONNRESET;
        break;
    }
    cr_mutex_unlock(&p->send_lock);

    cr_mutex_lock(&p->lock);
    if (err == 0) {
        p->st.sent++;
    } else if (err != -ETIMEDOUT || off > 0) {
        /* Half a request went out: the stream cannot carry another one. */
        if (err == -ETIMEDOUT)
            err = -ECONNRESET;
        failed = cr__bound_pool_fail_locked(p, conn, err);
    }
    cr__bound_pool_conn_put(p, conn);
    cr_mutex_unlock(&p->lock);
    if (failed)
        report_failure(p, err);
    return err;
}

ssize_t cr_bound_pool_join(struct cr_bound_pool *p, struct cr_bound_ctx *c, int timeout_ms)
{
    uint64_t deadline = bound_deadline_after(timeout_ms);
    int report = 0;
    ssize_t result;

    cr_mutex_lock(&p->lock);
    if (c->state == CTX_IDLE) {
        cr_mutex_unlock(&p->lock);
        return -EINVAL;
    }
    if (p->lf == NULL)
        cr__lf_bound_join(p, c, deadline, &report);
    else
        join_hybrid(p, c, deadline);
    assert(c->state == CTX_DONE && !c->queued && p->leader != c);
    result = c->result;
    c->state = CTX_IDLE;
    cr_mutex_unlock(&p->lock);
    report_failure(p, report);
    return result;
}

ssize_t cr_bound_pool_call(struct cr_bound_pool *p, struct cr_bound_ctx *c, uint64_t id,
                           const void *req, size_t req_len, void *reply, size_t cap, int timeout_ms)
{
    uint64_t deadline = bound_deadline_after(timeout_ms);
    int err;

    err = cr_bound_pool_expect(p, c, id, reply, cap);
    if (err != 0)
        return err;
    err = cr_bound_pool_send(p, req, req_len, bound_remaining_ms(deadline));
    if (err != 0) {
        /* c is registered, or completed by the failure the send caused:
         * either way cancel frees it. */
        int rc = cr_bound_pool_cancel(p, c);

        assert(rc == 0);
        (void)rc;
        return err;
    }
    return cr_bound_pool_join(p, c, bound_remaining_ms(deadline));
}

void cr_bound_pool_stats(struct cr_bound_pool *p, struct cr_bound_pool_stats *out)
{
    cr_mutex_lock(&p->lock);
    *out = p->st;
    out->leading = p->leader != NULL;
    out->connected = p->conn != NULL;
    cr_mutex_unlock(&p->lock);
}
