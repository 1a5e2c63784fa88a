/*
 * conn.c - the connection driver every model shares (conn_internal.h) and the
 * cr_conn_* calls services make (service.h). A model calls cr__conn_handle()
 * when the socket is ready; the driver reads, feeds the service, sends what
 * it queued and says what to wait for next. Runs on whichever thread serves
 * the connection, one thread at a time (the model guarantees it). Owns the
 * connection's socket, its unconsumed input and its queued output; borrows
 * the service.
 *
 * Memory. Reads go to a thread-local buffer (tl_in); only what the service
 * leaves unconsumed (a partial request) is copied to a per-connection buffer
 * sized to it, which later reads append to and which is freed once it
 * empties. Memory
 * output (cr_conn_write, cr_conn_reserve) is formatted into a thread-local
 * staging buffer (tl_stage) that queued segments refer to by offset; the
 * driver sends before it returns, and only what the socket would not take is
 * copied into a heap block. So a request answered at once allocates nothing,
 * and an idle keep-alive connection holds no buffer.
 *
 * Output is an array of segments kept in order: staged memory, heap memory,
 * zero-copy references and file ranges. Consecutive memory segments go out
 * with one send(2) or sendmsg(2) (MSG_NOSIGNAL), file ranges with sendfile(2)
 * (which can raise SIGPIPE: cr_server ignores it). Every release callback runs
 * exactly once: when its segment is sent, or when the connection is destroyed
 * with it still queued.
 *
 * Two drivers share one logic. advance() does the work that needs no I/O
 * (feed kept input, decide what is needed next) and consume_output() and
 * next_output() walk the queue; the readiness driver (cr__conn_handle,
 * drive) reads and sends around them itself, while a proactor performs the
 * receives and sends asynchronously and reports them through cr__conn_feed
 * and cr__conn_sent. Those leave no staged memory in the queue (stage_leave
 * persists it), since the kernel reads it after the call returns and maybe
 * while another thread runs: that is the one copy the completion path pays
 * per answer that the readiness path, sending before it returns, does not.
 *
 * Nesting. A service call may serve other connections on the same thread (the
 * Leader/Followers hybrid client/server: a handler waiting for a reply handles
 * events meanwhile). tl_stage then belongs to the innermost connection:
 * entering one first moves the outer one's staged output to the heap; and a
 * read that finds tl_in in use reads into the connection's own buffer. So a
 * pointer from cr_conn_reserve() must be committed before the service does
 * anything that may serve other connections.
 */
#include <cabrank/clock.h>
#include <cabrank/handle_set.h>
#include <cabrank/listener.h>
#include <cabrank/log.h>

#include "net/conn_internal.h"
#include "os/sys_internal.h"

#include <assert.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define TL_IN_SIZE    (64 * 1024)
#define TL_STAGE_SIZE (64 * 1024)
/* Unconsumed input beyond this: the service is broken or the peer abusive. */
#define MAX_INPUT (1024 * 1024)
/* Free space a nested read into the per-connection buffer asks for. */
#define NESTED_READ_SPACE (16 * 1024)
/* Reads per cr__conn_handle() before other connections get a turn; the
 * level-triggered handle brings a busy connection straight back. */
#define READS_PER_CALL 16
/* Flushes per call: a service that refills its output from drained() forever
 * still lets other connections run. */
#define FLUSHES_PER_CALL 64
#define INLINE_SEGS      4
/* Linux moves at most this much per sendfile(2). */
#define MAX_SENDFILE 0x7ffff000
/* Input read and dropped before a close the service asked for, so that the
 * close sends a FIN rather than a reset ahead of its last answer. */
#define DISCARD_MAX (256 * 1024)
/* cr__conn_serve_blocking() looks at *stop at least this often. */
#define STOP_POLL_MS 100

enum seg_kind {
    SEG_STAGED = 1, /* tl_stage[pos..pos+len) of the staging connection */
    SEG_HEAP,       /* p[0..len); block, if set, is freed once it is done */
    SEG_REF,        /* p[0..len), borrowed until release(arg) */
    SEG_FILE,       /* len bytes of fd from off, borrowed until release(arg) */
};

struct seg {
    enum seg_kind kind;
    size_t len; /* left to send */
    size_t pos;
    const char *p;
    void *block;
    int fd;
    off_t off;
    cr_release_fn *release;
    void *arg;
};

struct cr_conn {
    /* Immutable after create. */
    int fd;
    const struct cr_service *svc;
    struct cr_server *server;
    uint64_t idle_timeout_ns; /* 0: none */
    uint64_t default_send_timeout_ns;
    size_t high_water;
    uint64_t *srv_bytes_in;
    uint64_t *srv_bytes_out;
    uint64_t *srv_requests;
    void (*on_request)(void *arg);
    void *on_request_arg;

    /* Everything below: the serving thread only (one at a time). */
    void *state;
    unsigned worker;

    /* Input the service left unconsumed; NULL when there is none. */
    char *in;
    size_t in_len;
    size_t in_cap;
    /* in[] may be consumable now: data was added, output drained, or
     * feeding stopped at the high-water mark. */
    bool feed_again;

    /* Output: segs[seg_head .. seg_head + seg_count), oldest first. */
    struct seg *segs;
    unsigned seg_head;
    unsigned seg_count;
    unsigned seg_cap;
    size_t pending;
    char *reserved;     /* a cr_conn_reserve() too big for tl_stage */
    size_t send_budget; /* bytes sent per readiness call at most */

    bool close_after_flush;
    bool failed;   /* close at once, dropping output */
    bool peer_eof; /* read returned 0 */
    /* The current readiness call read less than it asked for: the socket
     * had nothing more then (see drive). */
    bool drained;
    /* The current call was told of a hang-up: read on to the end of input,
     * which a short read does not show. */
    bool hup;
    /* The last readiness call stopped where the socket would block for what
     * it waits for next, not at a budget (edge-triggered re-arming). */
    bool would_block;

    /* Deadlines: of the wait the last handle call returned. */
    enum cr__conn_next waiting; /* 0 before the first call */
    bool svc_input_deadline;    /* the service set input_deadline */
    bool send_timeout_changed;
    uint64_t input_deadline;
    uint64_t send_timeout_ns;
    uint64_t send_deadline;

    uint64_t bytes_in;
    uint64_t bytes_out;
    uint64_t reported_in; /* already added to the server's counters */
    uint64_t reported_out;

    bool has_info;
    struct cr_conn_info info;

    struct seg inline_segs[INLINE_SEGS];
};

/* The calling thread's buffers; see the top of the file. */
static __thread char tl_in[TL_IN_SIZE];
static __thread bool tl_in_busy; /* a service call is reading tl_in */
static __thread char tl_stage[TL_STAGE_SIZE];
static __thread size_t tl_stage_len;
static __thread struct cr_conn *tl_stage_owner;

/* ------------------------------------------------------------------ output queue */

static struct seg *seg_at(struct cr_conn *c, unsigned i)
{
    return &c->segs[c->seg_head + i];
}

static struct seg *last_seg(struct cr_conn *c)
{
    return c->seg_count > 0 ? seg_at(c, c->seg_count - 1) : NULL;
}

/* Makes room for one more segment at the tail. -ENOMEM. */
static int reserve_seg(struct cr_conn *c)
{
    struct seg *s;
    unsigned cap;

    if (c->seg_head + c->seg_count < c->seg_cap)
        return 0;
    if (c->seg_head > 0) {
        memmove(c->segs, c->segs + c->seg_head, c->seg_count * sizeof(*s));
        c->seg_head = 0;
        return 0;
    }
    cap = c->seg_cap * 2;
    if (c->segs == c->inline_segs) {
        s = malloc(cap * sizeof(*s));
        if (s != NULL)
            memcpy(s, c->segs, c->seg_count * sizeof(*s));
    } else {
        s = realloc(c->segs, cap * sizeof(*s));
    }
    if (s == NULL)
        return -ENOMEM;
    c->segs = s;
    c->seg_cap = cap;
    return 0;
}

/* Appends a blank segment; reserve_seg() made room. */
static struct seg *push_seg(struct cr_conn *c, enum seg_kind kind, size_t len)
{
    struct seg *s = &c->segs[c->seg_head + c->seg_count++];

    assert(c->seg_head + c->seg_count <= c->seg_cap);
    memset(s, 0, sizeof(*s));
    s->kind = kind;
    s->len = len;
    s->fd = -1;
    c->pending += len;
    return s;
}

/* Takes the head segment off the queue, then frees or releases it. */
static void pop_seg(struct cr_conn *c)
{
    struct seg s = *seg_at(c, 0);

    c->seg_head++;
    if (--c->seg_count == 0) {
        c->seg_head = 0;
        if (c->segs != c->inline_segs) {
            free(c->segs);
            c->segs = c->inline_segs;
            c->seg_cap = INLINE_SEGS;
        }
        if (tl_stage_owner == c)
            tl_stage_len = 0;
    }
    /* Popped first: a release callback sees a consistent queue. */
    free(s.block);
    if (s.release != NULL)
        s.release(s.arg);
}

static const char *seg_data(const struct seg *s)
{
    return s->kind == SEG_STAGED ? tl_stage + s->pos : s->p;
}

/*
 * Copies c's staged segments into one heap block, which the last of them
 * frees: segments go out in order, so it is the last one done. On -ENOMEM
 * the output is lost and c fails. Afterwards tl_stage is free.
 */
static void persist_staged(struct cr_conn *c)
{
    struct seg *owner = NULL;
    size_t total = 0;
    char *block;
    char *p;

    for (unsigned i = 0; i < c->seg_count; i++) {
        if (seg_at(c, i)->kind == SEG_STAGED)
            total += seg_at(c, i)->len;
    }
    if (tl_stage_owner == c)
        tl_stage_len = 0;
    if (total == 0)
        return;
    block = malloc(total);
    p = block;
    for (unsigned i = 0; i < c->seg_count; i++) {
        struct seg *s = seg_at(c, i);

        if (s->kind != SEG_STAGED)
            continue;
        s->kind = SEG_HEAP;
        if (block == NULL) {
            s->p = NULL; /* never sent: c failed */
            continue;
        }
        memcpy(p, tl_stage + s->pos, s->len);
        s->p = p;
        p += s->len;
        owner = s;
    }
    if (block == NULL) {
        CR_LOG(CR_LOG_WARN, "conn: out of memory keeping %zu bytes of output", total);
        c->failed = true;
        return;
    }
    owner->block = block;
}

/* Makes the staged segments unsendable without copying them (c closes). */
static void drop_staged(struct cr_conn *c)
{
    for (unsigned i = 0; i < c->seg_count; i++) {
        struct seg *s = seg_at(c, i);

        if (s->kind == SEG_STAGED) {
            s->kind = SEG_HEAP;
            s->p = NULL;
        }
    }
    if (tl_stage_owner == c)
        tl_stage_len = 0;
}

/* Makes c the owner of tl_stage; returns the previous owner (nesting). */
static struct cr_conn *stage_enter(struct cr_conn *c)
{
    struct cr_conn *outer = tl_stage_owner;

    if (outer != NULL && outer != c)
        persist_staged(outer);
    tl_stage_owner = c;
    tl_stage_len = 0;
    return outer;
}

/* Gives tl_stage back to outer, keeping what c staged in the heap (keep) or
 * dropping it (c closes). */
static void stage_leave(struct cr_conn *c, struct cr_conn *outer, bool keep)
{
    if (keep)
        persist_staged(c);
    else
        drop_staged(c);
    tl_stage_owner = outer;
    tl_stage_len = 0;
}

/* Marks n bytes sent, finishing the segments they complete. */
static void consume_output(struct cr_conn *c, size_t n)
{
    c->bytes_out += n;
    c->pending -= n;
    while (n > 0) {
        struct seg *s = seg_at(c, 0);

        if (n < s->len) {
            s->len -= n;
            if (s->kind == SEG_STAGED)
                s->pos += n;
            else if (s->kind == SEG_FILE)
                s->off += (off_t)n;
            else
                s->p += n;
            return;
        }
        n -= s->len;
        pop_seg(c);
    }
}

/*
 * The head of the queue as one send: the consecutive memory segments there
 * (at most max_iov), or the file range there, at most max_len bytes either
 * way. Staged memory is only readable by its staging thread, so outside
 * cr__conn_handle the queue holds none (stage_leave persisted it).
 */
static int next_output(struct cr_conn *c, struct cr__conn_out *out, unsigned max_iov,
                       size_t max_len)
{
    const struct seg *s;
    size_t total = 0;

    out->iovcnt = 0;
    out->file_fd = -1;
    out->file_off = 0;
    out->len = 0;
    out->more = false;
    if (c->seg_count == 0 || max_len == 0)
        return -ENODATA;
    s = seg_at(c, 0);
    if (s->kind == SEG_FILE) {
        out->file_fd = s->fd;
        out->file_off = s->off;
        out->len = s->len < max_len ? s->len : max_len;
        return 0;
    }
    if (max_iov > CR__CONN_OUT_IOV)
        max_iov = CR__CONN_OUT_IOV;
    for (unsigned i = 0; i < c->seg_count && (unsigned)out->iovcnt < max_iov; i++) {
        const struct seg *m = seg_at(c, i);
        size_t len = m->len;

        if (m->kind == SEG_FILE) {
            /* A head before a file body: let the kernel put them in one
             * segment instead of sending the head alone. */
            out->more = true;
            break;
        }
        assert(m->kind != SEG_STAGED || tl_stage_owner == c);
        if (len > max_len - total)
            len = max_len - total;
        out->iov[out->iovcnt].iov_base = (void *)seg_data(m);
        out->iov[out->iovcnt].iov_len = len;
        out->iovcnt++;
        total += len;
        if (total == max_len)
            break;
    }
    out->len = total;
    return 0;
}

/* One send of iov[0..iovcnt). A single buffer (a small answer staged whole)
 * goes by send(2): sendmsg(2) first copies in and checks a msghdr and an iovec
 * array, some 0.1 us of kernel time a request on hello.txt (a one-off A/B of
 * system time from /proc, 5 alternating runs: 3.40 against 3.28 us). */
static ssize_t send_iov(int fd, const struct iovec *iov, int iovcnt, int flags)
{
    struct msghdr msg = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};

    if (iovcnt == 1)
        return cr__sys_send(fd, iov[0].iov_base, iov[0].iov_len, flags);
    return cr__sys_sendmsg(fd, &msg, flags);
}

/*
 * Sends queued output, at most *budget bytes, taking what it sends off
 * *budget: 0 once all is sent, -EAGAIN when the socket is full, -EBUSY when
 * the budget runs out first, or -errno.
 */
static int flush(struct cr_conn *c, size_t *budget)
{
    struct cr__conn_out out;

    while (c->seg_count > 0) {
        ssize_t n;

        if (*budget == 0)
            return -EBUSY;
        if (next_output(c, &out, CR__CONN_OUT_IOV,
                        *budget < MAX_SENDFILE ? *budget : MAX_SENDFILE) < 0)
            break;

        if (out.file_fd >= 0) {
            off_t off = out.file_off;

            n = sendfile(c->fd, out.file_fd, &off, out.len);
            if (n == 0)
                return -EIO; /* the file is shorter than what was queued */
        } else {
            /* The last bytes before a close: held back (MSG_MORE) for the
             * shutdown that follows (advance) to carry its FIN in their
             * segment, one packet fewer each way; Connection: close took
             * 11.8 to 9.1 us of server CPU per request. */
            bool last = c->close_after_flush && out.len == c->pending;
            int flags = MSG_NOSIGNAL | (out.more || last ? MSG_MORE : 0);

            n = send_iov(c->fd, out.iov, out.iovcnt, flags);
        }
        if (n < 0) {
            int err = -errno;

            if (err == -EINTR)
                continue;
            return err == -EWOULDBLOCK ? -EAGAIN : err;
        }
        consume_output(c, (size_t)n);
        *budget -= (size_t)n;
    }
    return 0;
}

/* Releases every queued segment without sending it. */
static void drop_output(struct cr_conn *c)
{
    while (c->seg_count > 0)
        pop_seg(c);
    c->pending = 0;
}

/* ------------------------------------------------------------------ input */

/* Drops the first used bytes of c->in; frees it once empty. */
static void consume_input(struct cr_conn *c, size_t used)
{
    if (used == 0)
        return;
    c->in_len -= used;
    if (c->in_len == 0) {
        free(c->in);
        c->in = NULL;
        c->in_cap = 0;
        return;
    }
    memmove(c->in, c->in + used, c->in_len);
}

/* Makes room for at least want more bytes in c->in, growing by doubling so
 * that appending piece by piece stays linear. -ENOMEM. */
static int grow_input(struct cr_conn *c, size_t want)
{
    size_t need = c->in_len + want;
    size_t cap = c->in_cap * 2;
    char *p;

    if (need <= c->in_cap)
        return 0;
    if (cap < need)
        cap = need;
    cap = (cap + 1023) & ~(size_t)1023;
    p = realloc(c->in, cap);
    if (p == NULL)
        return -ENOMEM;
    c->in = p;
    c->in_cap = cap;
    return 0;
}

/*
 * Calls svc->input over data[0..len) while it consumes, bytes remain and the
 * output stays under the high-water mark. Returns how much is used up; once
 * the connection is closing, all of it (the rest is discarded).
 */
static size_t feed(struct cr_conn *c, const char *data, size_t len)
{
    size_t used = 0;

    while (used < len) {
        ssize_t n;

        if (c->close_after_flush || c->failed)
            return len;
        if (c->pending >= c->high_water) {
            c->feed_again = true;
            return used;
        }
        n = c->svc->input(c->svc->ctx, c->state, c, data + used, len - used);
        if (n < 0) {
            if (!c->close_after_flush)
                c->failed = true;
            return len;
        }
        if (n == 0)
            return used;
        if ((size_t)n > len - used) {
            CR_LOG(CR_LOG_ERROR, "service %s consumed %zd of %zu bytes; closing",
                   c->svc->name != NULL ? c->svc->name : "?", n, len - used);
            c->failed = true;
            return len;
        }
        used += (size_t)n;
    }
    return used;
}

/* Feeds what c->in holds. */
static void feed_buffered(struct cr_conn *c)
{
    c->feed_again = false;
    consume_input(c, feed(c, c->in, c->in_len));
}

/* Feeds n fresh bytes from data (tl_in, or a proactor's receive buffer)
 * while c->in is empty; keeps what is left in c->in. */
static void feed_fresh(struct cr_conn *c, const char *data, size_t n)
{
    bool busy = tl_in_busy;
    size_t used;

    tl_in_busy = true;
    used = feed(c, data, n);
    tl_in_busy = busy;
    if (used == n)
        return;
    if (grow_input(c, n - used) < 0) {
        CR_LOG(CR_LOG_WARN, "conn: out of memory keeping %zu bytes of input", n - used);
        c->failed = true;
        return;
    }
    memcpy(c->in, data + used, n - used);
    c->in_len = n - used;
}

/*
 * Reads once into tl_in. When c already holds unconsumed input, what was
 * read is appended to it (the per-connection buffer grows by what arrives,
 * not by a whole read buffer); when tl_in is in use by an outer call on this
 * thread (nesting), it reads straight into c->in. *fresh says the data is in
 * tl_in alone. Bytes read, 0 at end of input, -EAGAIN, or -errno (-EMSGSIZE
 * once the unconsumed input reached MAX_INPUT). A read shorter than the room
 * it had sets c->drained.
 */
static ssize_t read_some(struct cr_conn *c, bool *fresh)
{
    bool direct = tl_in_busy;
    char *buf = tl_in;
    size_t cap = sizeof(tl_in);
    ssize_t n;

    *fresh = false;
    if (c->in_len >= MAX_INPUT)
        return -EMSGSIZE;
    if (direct) {
        if (grow_input(c, NESTED_READ_SPACE) < 0)
            return -ENOMEM;
        buf = c->in + c->in_len;
        cap = c->in_cap - c->in_len;
    }
    do {
        n = cr__sys_recv(c->fd, buf, cap, 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    if (n == 0)
        return 0;
    c->drained = (size_t)n < cap && !c->hup;
    c->bytes_in += (uint64_t)n;
    c->svc_input_deadline = false; /* the service sets it anew, or not */
    if (!direct && c->in_len == 0) {
        *fresh = true;
        return n;
    }
    if (!direct) {
        if (grow_input(c, (size_t)n) < 0)
            return -ENOMEM;
        memcpy(c->in + c->in_len, tl_in, (size_t)n);
    }
    c->in_len += (size_t)n;
    c->feed_again = true;
    return n;
}

/* Before a close the service asked for: ends our side with a FIN and drops
 * what the peer sent meanwhile, so that closing with unread input does not
 * reset the connection under the last answer. */
static void discard_input(struct cr_conn *c)
{
    char small[2048];
    char *buf = tl_in_busy ? small : tl_in;
    size_t cap = tl_in_busy ? sizeof(small) : sizeof(tl_in);
    size_t total = 0;

    (void)shutdown(c->fd, SHUT_WR);
    while (total < DISCARD_MAX) {
        ssize_t n = recv(c->fd, buf, cap, 0);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        total += (size_t)n;
    }
}

/* ------------------------------------------------------------------ driving */

/*
 * The work that needs no I/O: feeds kept input while the service can take
 * it, and says what the connection needs next: CR__CONN_WRITE while output
 * is queued, CR__CONN_READ for more input, CR__CONN_CLOSE when it is done.
 * Both drivers (the readiness one below, and the proactor's through
 * cr__conn_feed and cr__conn_sent) turn on it.
 */
static enum cr__conn_next advance(struct cr_conn *c)
{
    for (;;) {
        if (c->failed)
            return CR__CONN_CLOSE;
        if (c->seg_count > 0)
            return CR__CONN_WRITE;
        if (c->close_after_flush) {
            /* Just drained: nothing unread for close() to reset the
             * connection over, no recv to pay. The FIN still goes out
             * now, with the answer flush held back, before anything the
             * peer sends late can make close() a reset that drops it. */
            if (!c->peer_eof && !c->drained)
                discard_input(c);
            else
                (void)shutdown(c->fd, SHUT_WR);
            return CR__CONN_CLOSE;
        }
        if (c->in_len > 0 && c->feed_again) {
            feed_buffered(c);
            continue;
        }
        if (c->peer_eof)
            return CR__CONN_CLOSE; /* answered all it sent; a partial request stays so */
        return CR__CONN_READ;
    }
}

/* Every queued byte went out: pipelined input may go on, and the service
 * may queue more. */
static void output_drained(struct cr_conn *c)
{
    c->feed_again = true;
    if (c->svc->drained != NULL && !c->close_after_flush)
        c->svc->drained(c->svc->ctx, c->state, c);
}

/*
 * The readiness driver: advance, then send or read as it says, until the
 * socket blocks, the service is done or a budget is spent. See
 * conn_internal.h for the return value.
 *
 * The send budget: a socket with a large send buffer would otherwise take
 * a whole large file in one sendfile(2), and on loopback the rest of it
 * then goes out from the client's ACKs, in the client's time. Slices, each
 * connection's in turn, keep that work here: 1m.bin under cubic went from
 * 6.0k to 6.6k req/s (median of 5), as lighttpd's 256 KiB writes do.
 */
static enum cr__conn_next drive(struct cr_conn *c)
{
    int reads = 0;
    int flushes = 0;
    size_t budget = c->send_budget;

    for (;;) {
        enum cr__conn_next next = advance(c);

        if (next == CR__CONN_CLOSE)
            return CR__CONN_CLOSE;
        if (next == CR__CONN_WRITE) {
            int err;

            if (flushes++ == FLUSHES_PER_CALL)
                return CR__CONN_WRITE;
            err = flush(c, &budget);
            if (err == -EAGAIN) {
                c->would_block = true;
                return CR__CONN_WRITE;
            }
            if (err == -EBUSY)
                return CR__CONN_WRITE;
            if (err < 0) {
                if (err != -EPIPE && err != -ECONNRESET)
                    CR_LOG(CR_LOG_DEBUG, "conn: send failed: %s", strerror(-err));
                return CR__CONN_CLOSE;
            }
            output_drained(c);
            continue;
        }
        /* A read shorter than its buffer emptied the socket a moment ago:
         * another now would almost always be an EAGAIN, a syscall per
         * request. The handle reports whatever arrives next (one-shot and
         * level-triggered alike; under edge triggering a short TCP read is
         * the drain). */
        if (c->drained) {
            c->would_block = true;
            return CR__CONN_READ;
        }
        if (reads++ == READS_PER_CALL)
            return CR__CONN_READ;

        bool fresh;
        ssize_t n = read_some(c, &fresh);

        if (n == -EAGAIN) {
            c->would_block = true;
            return CR__CONN_READ;
        }
        if (n < 0) {
            if (n != -ECONNRESET)
                CR_LOG(CR_LOG_DEBUG, "conn: recv failed: %s", strerror((int)-n));
            return CR__CONN_CLOSE;
        }
        if (n == 0)
            c->peer_eof = true;
        else if (fresh)
            feed_fresh(c, tl_in, (size_t)n);
    }
}

/* now, not the event time: the service may have blocked since (a deadline
 * the service sets itself is its own choice). Read only when a deadline
 * moves: a service that sets its input timeouts costs none. */
static void update_deadlines(struct cr_conn *c, enum cr__conn_next next, uint64_t in0,
                             uint64_t out0)
{
    if (next == CR__CONN_WRITE) {
        /* No progress for the send timeout: a new wait, or bytes went out. */
        if (c->waiting != CR__CONN_WRITE || c->bytes_out != out0 || c->send_timeout_changed)
            c->send_deadline = c->send_timeout_ns != 0 ? cr_clock_now_ns() + c->send_timeout_ns : 0;
        c->send_timeout_changed = false;
    } else if (!c->svc_input_deadline && (c->waiting != CR__CONN_READ || c->bytes_in != in0)) {
        /* The idle timeout counts from the last input or the end of output. */
        c->input_deadline = c->idle_timeout_ns != 0 ? cr_clock_now_ns() + c->idle_timeout_ns : 0;
    }
    c->waiting = next;
}

/* Adds what moved since the last report to the server's counters. */
static void report_bytes(struct cr_conn *c)
{
    /* Relaxed: statistics, read by cr_server_stats with relaxed loads. */
    if (c->srv_bytes_in != NULL && c->bytes_in != c->reported_in)
        __atomic_fetch_add(c->srv_bytes_in, c->bytes_in - c->reported_in, __ATOMIC_RELAXED);
    if (c->srv_bytes_out != NULL && c->bytes_out != c->reported_out)
        __atomic_fetch_add(c->srv_bytes_out, c->bytes_out - c->reported_out, __ATOMIC_RELAXED);
    c->reported_in = c->bytes_in;
    c->reported_out = c->bytes_out;
}

/* Ends a driver call begun with stage_enter: keeps or drops the staged
 * output, updates the deadlines of the wait it returns and the counters. */
static enum cr__conn_next finish_call(struct cr_conn *c, struct cr_conn *outer,
                                      enum cr__conn_next next, uint64_t in0, uint64_t out0)
{
    stage_leave(c, outer, next != CR__CONN_CLOSE);
    if (next != CR__CONN_CLOSE && c->failed)
        next = CR__CONN_CLOSE; /* persisting the output ran out of memory */
    if (next != CR__CONN_CLOSE)
        update_deadlines(c, next, in0, out0);
    else
        c->waiting = CR__CONN_CLOSE;
    report_bytes(c);
    return next;
}

enum cr__conn_next cr__conn_handle(struct cr_conn *c, unsigned events, unsigned worker)
{
    uint64_t in0 = c->bytes_in;
    uint64_t out0 = c->bytes_out;
    struct cr_conn *outer;

    /* Hang-ups and errors show up as read or send results, once read for. */
    c->worker = worker;
    c->drained = false;
    c->hup = (events & (CR_EV_HUP | CR_EV_ERR)) != 0;
    c->would_block = false;
    outer = stage_enter(c);
    return finish_call(c, outer, drive(c), in0, out0);
}

enum cr__conn_next cr__conn_feed(struct cr_conn *c, const char *data, size_t len, unsigned worker)
{
    uint64_t in0 = c->bytes_in;
    uint64_t out0 = c->bytes_out;
    struct cr_conn *outer;

    c->worker = worker;
    outer = stage_enter(c);
    if (len == 0) {
        c->peer_eof = true;
    } else if (c->in_len >= MAX_INPUT) {
        c->failed = true; /* as read_some's -EMSGSIZE */
    } else {
        c->bytes_in += len;
        c->svc_input_deadline = false; /* the service sets it anew, or not */
        if (c->in_len == 0) {
            feed_fresh(c, data, len);
        } else if (grow_input(c, len) < 0) {
            c->failed = true;
        } else {
            memcpy(c->in + c->in_len, data, len);
            c->in_len += len;
            c->feed_again = true;
        }
    }
    return finish_call(c, outer, advance(c), in0, out0);
}

int cr__conn_next_output(struct cr_conn *c, struct cr__conn_out *out, unsigned max_iov,
                         size_t max_len)
{
    return next_output(c, out, max_iov, max_len);
}

enum cr__conn_next cr__conn_sent(struct cr_conn *c, size_t n, unsigned worker)
{
    uint64_t in0 = c->bytes_in;
    uint64_t out0 = c->bytes_out;
    struct cr_conn *outer;

    assert(n <= c->pending);
    c->worker = worker;
    outer = stage_enter(c);
    consume_output(c, n);
    if (c->seg_count == 0)
        output_drained(c);
    return finish_call(c, outer, advance(c), in0, out0);
}

void cr__conn_serve_blocking(struct cr_conn *c, unsigned worker, const volatile int *stop)
{
    unsigned events = CR_EV_READ;

    /* The thread is this connection's alone: no other waits for a turn,
     * and a slice would cost a poll(2) each. */
    c->send_budget = SIZE_MAX;
    for (;;) {
        enum cr__conn_next next = cr__conn_handle(c, events, worker);
        struct pollfd pfd = {.fd = c->fd};

        if (next == CR__CONN_CLOSE)
            return;
        pfd.events = next == CR__CONN_WRITE ? POLLOUT : POLLIN;
        for (;;) {
            /* Relaxed: a flag; the connection's data is ours alone. */
            int st = __atomic_load_n(stop, __ATOMIC_RELAXED);
            uint64_t deadline = cr__conn_deadline(c);
            uint64_t now = cr_clock_now_ns();
            int timeout = STOP_POLL_MS;
            int n;

            if (st == CR__CONN_STOP_NOW || (st != 0 && cr__conn_is_idle(c)))
                return;
            if (deadline != 0 && now >= deadline)
                return;
            if (deadline != 0 && deadline - now < (uint64_t)STOP_POLL_MS * CR_NSEC_PER_MSEC)
                timeout = (int)((deadline - now + CR_NSEC_PER_MSEC - 1) / CR_NSEC_PER_MSEC);
            n = poll(&pfd, 1, timeout);
            if (n < 0 && errno != EINTR)
                return;
            if (n > 0)
                break;
        }
        events = (pfd.revents & POLLIN ? CR_EV_READ : 0) |
                 (pfd.revents & POLLOUT ? CR_EV_WRITE : 0) |
                 (pfd.revents & POLLHUP ? CR_EV_HUP : 0) | (pfd.revents & POLLERR ? CR_EV_ERR : 0);
    }
}

/* ------------------------------------------------------------------ lifecycle */

/* A connection a wildcard listener took from this host gets the loopback
 * congestion control (cr__conn_config). Best effort: the name worked when
 * the server started, and a connection that keeps the inherited one is
 * served all the same. */
static void tune_loopback(int fd, const char *name)
{
    if (cr_listener_is_loopback(fd) == 1 && cr_listener_congestion(fd, name) < 0)
        CR_LOG(CR_LOG_DEBUG, "connection %d: TCP_CONGESTION %s failed", fd, name);
}

int cr__conn_create(struct cr_conn **out, int fd, const struct cr__conn_config *cfg)
{
    struct cr_conn *c;
    uint64_t now;

    *out = NULL;
    assert(cfg != NULL && cfg->svc != NULL && cfg->svc->input != NULL);
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(fd);
        return -ENOMEM;
    }
    if (cfg->loopback_congestion != NULL)
        tune_loopback(fd, cfg->loopback_congestion);
    c->fd = fd;
    c->svc = cfg->svc;
    c->server = cfg->server;
    c->idle_timeout_ns = cfg->idle_timeout_ms * CR_NSEC_PER_MSEC;
    c->default_send_timeout_ns = cfg->send_timeout_ms * CR_NSEC_PER_MSEC;
    c->send_timeout_ns = c->default_send_timeout_ns;
    c->high_water = cfg->output_high_water != 0 ? cfg->output_high_water : 256 * 1024;
    c->send_budget = cfg->send_budget != 0 ? cfg->send_budget : CR_SERVER_SEND_BUDGET;
    c->srv_bytes_in = cfg->bytes_in;
    c->srv_bytes_out = cfg->bytes_out;
    c->srv_requests = cfg->requests;
    c->on_request = cfg->on_request;
    c->on_request_arg = cfg->on_request_arg;
    c->segs = c->inline_segs;
    c->seg_cap = INLINE_SEGS;
    now = cr_clock_event_ns();
    c->waiting = CR__CONN_READ;
    c->input_deadline = c->idle_timeout_ns != 0 ? now + c->idle_timeout_ns : 0;
    if (c->svc->open != NULL) {
        struct cr_conn *outer = stage_enter(c);
        int err = c->svc->open(c->svc->ctx, c, &c->state);

        if (err >= 0 && c->seg_count > 0) {
            /* No budget: the model waits to read next, not to write. */
            size_t budget = SIZE_MAX;

            err = flush(c, &budget);
            err = err == -EAGAIN ? 0 : err;
        }
        stage_leave(c, outer, err >= 0 && !c->failed);
        if (err >= 0 && c->failed)
            err = -ENOMEM;
        if (err < 0) {
            drop_output(c);
            free(c->reserved);
            if (c->segs != c->inline_segs)
                free(c->segs);
            close(fd);
            free(c);
            return err;
        }
        report_bytes(c);
    }
    *out = c;
    return 0;
}

void cr__conn_destroy(struct cr_conn *c)
{
    if (c == NULL)
        return;
    assert(tl_stage_owner != c);
    /* Segments first: their release callbacks may use service state. */
    drop_output(c);
    if (c->svc->close != NULL)
        c->svc->close(c->svc->ctx, c->state);
    close(c->fd);
    report_bytes(c);
    free(c->reserved);
    free(c->in);
    if (c->segs != c->inline_segs)
        free(c->segs);
    free(c);
}

bool cr__conn_would_block(const struct cr_conn *c)
{
    return c->would_block;
}

int cr__conn_fd(const struct cr_conn *c)
{
    return c->fd;
}

uint64_t cr__conn_deadline(const struct cr_conn *c)
{
    if (c->waiting == CR__CONN_WRITE)
        return c->send_deadline;
    if (c->waiting == CR__CONN_READ)
        return c->input_deadline;
    return 0;
}

uint64_t cr__conn_bytes_in(const struct cr_conn *c)
{
    return c->bytes_in;
}

uint64_t cr__conn_bytes_out(const struct cr_conn *c)
{
    return c->bytes_out;
}

bool cr__conn_is_idle(const struct cr_conn *c)
{
    return c->in_len == 0 && c->seg_count == 0 && c->reserved == NULL;
}

/* ------------------------------------------------------------------ service calls */

const struct cr_conn_info *cr_conn_info(const struct cr_conn *c)
{
    /* Filled on first use by the serving thread, which alone uses c. */
    struct cr_conn *m = (struct cr_conn *)c;

    if (!m->has_info) {
        m->info.peer_len = sizeof(m->info.peer);
        m->info.local_len = sizeof(m->info.local);
        if (getpeername(m->fd, (struct sockaddr *)&m->info.peer, &m->info.peer_len) < 0)
            m->info.peer_len = 0;
        if (getsockname(m->fd, (struct sockaddr *)&m->info.local, &m->info.local_len) < 0)
            m->info.local_len = 0;
        m->has_info = true;
    }
    return &m->info;
}

char *cr_conn_reserve(struct cr_conn *c, size_t len)
{
    if (reserve_seg(c) < 0)
        return NULL;
    if (tl_stage_owner == c) {
        if (len > TL_STAGE_SIZE - tl_stage_len && len <= TL_STAGE_SIZE)
            persist_staged(c); /* frees tl_stage */
        if (c->failed)
            return NULL;
        if (len <= TL_STAGE_SIZE - tl_stage_len)
            return tl_stage + tl_stage_len;
    }
    /* Too big to stage, or called outside a service call: a heap block. */
    free(c->reserved);
    c->reserved = malloc(len != 0 ? len : 1);
    return c->reserved;
}

void cr_conn_commit(struct cr_conn *c, size_t used)
{
    struct seg *s;

    if (c->reserved != NULL) {
        char *block = c->reserved;

        c->reserved = NULL;
        if (used == 0) {
            free(block);
        } else if (reserve_seg(c) < 0) {
            free(block);
            c->failed = true;
        } else {
            s = push_seg(c, SEG_HEAP, used);
            s->p = block;
            s->block = block;
        }
        return;
    }
    if (used == 0)
        return;
    assert(tl_stage_owner == c && used <= TL_STAGE_SIZE - tl_stage_len);
    s = last_seg(c);
    if (s != NULL && s->kind == SEG_STAGED && s->pos + s->len == tl_stage_len) {
        s->len += used; /* extends the previous write */
        c->pending += used;
    } else if (reserve_seg(c) < 0) {
        c->failed = true;
        return;
    } else {
        s = push_seg(c, SEG_STAGED, used);
        s->pos = tl_stage_len;
    }
    tl_stage_len += used;
}

int cr_conn_write(struct cr_conn *c, const void *data, size_t len)
{
    char *p;

    if (len == 0)
        return 0;
    p = cr_conn_reserve(c, len);
    if (p == NULL)
        return -ENOMEM;
    memcpy(p, data, len);
    cr_conn_commit(c, len);
    return c->failed ? -ENOMEM : 0;
}

int cr_conn_write_ref(struct cr_conn *c, const void *data, size_t len, cr_release_fn *release,
                      void *arg)
{
    struct seg *s;

    if (len == 0 || reserve_seg(c) < 0) {
        if (release != NULL)
            release(arg);
        return len == 0 ? 0 : -ENOMEM;
    }
    s = push_seg(c, SEG_REF, len);
    s->p = data;
    s->release = release;
    s->arg = arg;
    return 0;
}

int cr_conn_write_file(struct cr_conn *c, int fd, off_t off, size_t len, cr_release_fn *release,
                       void *arg)
{
    struct seg *s;
    int err = 0;

    if (fd < 0 || off < 0)
        err = -EINVAL;
    else if (len != 0 && reserve_seg(c) < 0)
        err = -ENOMEM;
    if (err < 0 || len == 0) {
        if (release != NULL)
            release(arg);
        return err;
    }
    s = push_seg(c, SEG_FILE, len);
    s->fd = fd;
    s->off = off;
    s->release = release;
    s->arg = arg;
    return 0;
}

size_t cr_conn_pending(const struct cr_conn *c)
{
    return c->pending;
}

void cr_conn_close_after_flush(struct cr_conn *c)
{
    c->close_after_flush = true;
}

void cr_conn_set_input_timeout(struct cr_conn *c, uint64_t ms)
{
    cr_conn_set_input_timeout_since(c, ms, cr_clock_now_ns());
}

void cr_conn_set_input_timeout_since(struct cr_conn *c, uint64_t ms, uint64_t since)
{
    uint64_t ns = ms != 0 ? ms * CR_NSEC_PER_MSEC : c->idle_timeout_ns;

    c->input_deadline = ns != 0 ? since + ns : 0;
    c->svc_input_deadline = true;
}

void cr_conn_set_send_timeout(struct cr_conn *c, uint64_t ms)
{
    c->send_timeout_ns = ms != 0 ? ms * CR_NSEC_PER_MSEC : c->default_send_timeout_ns;
    c->send_timeout_changed = true;
}

unsigned cr_conn_worker(const struct cr_conn *c)
{
    return c->worker;
}

void cr_conn_request_done(struct cr_conn *c)
{
    /* Relaxed: a statistics counter. */
    if (c->srv_requests != NULL)
        __atomic_fetch_add(c->srv_requests, 1, __ATOMIC_RELAXED);
    if (c->on_request != NULL)
        c->on_request(c->on_request_arg);
}

struct cr_server *cr_conn_server(const struct cr_conn *c)
{
    return c->server;
}
