/*
 * conn_output.c - a connection's output-segment queue: what cr_conn_write,
 * cr_conn_reserve/commit, cr_conn_write_ref and cr_conn_write_file queue
 * (service.h), and how it leaves: the sends of the readiness driver
 * (cr__conn_flush: send/sendmsg for memory, sendfile for file ranges) or the
 * description a proactor sends from (cr__conn_next_output). Called by
 * services and by the driver (conn.c) on the thread serving the connection,
 * one thread at a time. Owns the queued segments and the heap copies of
 * staged output; borrows zero-copy references and file descriptors until
 * their release callback.
 *
 * Output is an array of segments kept in order: staged memory, heap memory,
 * zero-copy references and file ranges. Consecutive memory segments go out
 * with one send(2) or sendmsg(2) (MSG_NOSIGNAL), file ranges with sendfile(2)
 * (which can raise SIGPIPE: cr_server ignores it). Every release callback
 * runs exactly once: when its segment is sent, or when the connection is
 * destroyed with it still queued.
 *
 * Staging. Memory output is formatted into a thread-local staging buffer
 * (tl_stage) that queued segments refer to by offset; the readiness driver
 * sends before it returns, and only what the socket would not take is copied
 * into a heap block (cr__conn_stage_leave). So a request answered at once
 * allocates nothing. The completion path leaves no staged memory in the
 * queue either, since the kernel reads it after the call returns and maybe
 * while another thread runs: that is the one copy it pays per answer.
 *
 * Nesting. A service call may serve other connections on the same thread (the
 * Leader/Followers hybrid client/server: a handler waiting for a reply handles
 * events meanwhile). tl_stage then belongs to the innermost connection:
 * entering one first moves the outer one's staged output to the heap. So a
 * pointer from cr_conn_reserve() must be committed before the service does
 * anything that may serve other connections.
 */
#include "net/conn_state_internal.h"

#include <cabrank/log.h>

#include "os/sys_internal.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define TL_STAGE_SIZE (64 * 1024)
/* Linux moves at most this much per sendfile(2). */
#define MAX_SENDFILE 0x7ffff000

/* The calling thread's staging buffer and the connection whose staged
 * segments refer to it (the innermost driver call on this thread). */
static __thread char tl_stage[TL_STAGE_SIZE];
static __thread size_t tl_stage_len;
static __thread struct cr_conn *tl_stage_owner;

void cr__conn_output_init(struct cr_conn *c)
{
    c->segs = c->inline_segs;
    c->seg_cap = CR__CONN_INLINE_SEGS;
}

void cr__conn_output_fini(struct cr_conn *c)
{
    assert(tl_stage_owner != c);
    cr__conn_drop_output(c);
    free(c->reserved);
    c->reserved = NULL;
    if (c->segs != c->inline_segs)
        free(c->segs);
    c->segs = c->inline_segs;
}

static struct cr__conn_seg *seg_at(struct cr_conn *c, unsigned i)
{
    return &c->segs[c->seg_head + i];
}

static struct cr__conn_seg *last_seg(struct cr_conn *c)
{
    return c->seg_count > 0 ? seg_at(c, c->seg_count - 1) : NULL;
}

/* Makes room for one more segment at the tail. -ENOMEM. */
static int reserve_seg(struct cr_conn *c)
{
    struct cr__conn_seg *s;
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
static struct cr__conn_seg *push_seg(struct cr_conn *c, enum cr__conn_seg_kind kind, size_t len)
{
    struct cr__conn_seg *s = &c->segs[c->seg_head + c->seg_count++];

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
    struct cr__conn_seg s = *seg_at(c, 0);

    c->seg_head++;
    if (--c->seg_count == 0) {
        c->seg_head = 0;
        if (c->segs != c->inline_segs) {
            free(c->segs);
            c->segs = c->inline_segs;
            c->seg_cap = CR__CONN_INLINE_SEGS;
        }
        if (tl_stage_owner == c)
            tl_stage_len = 0;
    }
    /* Popped first: a release callback sees a consistent queue. */
    free(s.block);
    if (s.release != NULL)
        s.release(s.arg);
}

static const char *seg_data(const struct cr__conn_seg *s)
{
    return s->kind == CR__SEG_STAGED ? tl_stage + s->pos : s->p;
}

/*
 * Copies c's staged segments into one heap block, which the last of them
 * frees: segments go out in order, so it is the last one done. On -ENOMEM
 * the output is lost and c fails. Afterwards tl_stage is free.
 */
static void persist_staged(struct cr_conn *c)
{
    struct cr__conn_seg *owner = NULL;
    size_t total = 0;
    char *block;
    char *p;

    for (unsigned i = 0; i < c->seg_count; i++) {
        if (seg_at(c, i)->kind == CR__SEG_STAGED)
            total += seg_at(c, i)->len;
    }
    if (tl_stage_owner == c)
        tl_stage_len = 0;
    if (total == 0)
        return;
    block = malloc(total);
    p = block;
    for (unsigned i = 0; i < c->seg_count; i++) {
        struct cr__conn_seg *s = seg_at(c, i);

        if (s->kind != CR__SEG_STAGED)
            continue;
        s->kind = CR__SEG_HEAP;
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
        struct cr__conn_seg *s = seg_at(c, i);

        if (s->kind == CR__SEG_STAGED) {
            s->kind = CR__SEG_HEAP;
            s->p = NULL;
        }
    }
    if (tl_stage_owner == c)
        tl_stage_len = 0;
}

/* Makes c the owner of tl_stage; returns the previous owner (nesting). */
struct cr_conn *cr__conn_stage_enter(struct cr_conn *c)
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
void cr__conn_stage_leave(struct cr_conn *c, struct cr_conn *outer, bool keep)
{
    if (keep)
        persist_staged(c);
    else
        drop_staged(c);
    tl_stage_owner = outer;
    tl_stage_len = 0;
}

/* Marks n bytes sent, finishing the segments they complete. */
void cr__conn_consume_output(struct cr_conn *c, size_t n)
{
    c->bytes_out += n;
    c->pending -= n;
    while (n > 0) {
        struct cr__conn_seg *s = seg_at(c, 0);

        if (n < s->len) {
            s->len -= n;
            if (s->kind == CR__SEG_STAGED)
                s->pos += n;
            else if (s->kind == CR__SEG_FILE)
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
 * a driver call the queue holds none (cr__conn_stage_leave persisted it).
 */
int cr__conn_next_output(struct cr_conn *c, struct cr__conn_out *out, unsigned max_iov,
                         size_t max_len)
{
    const struct cr__conn_seg *s;
    size_t total = 0;

    out->iovcnt = 0;
    out->file_fd = -1;
    out->file_off = 0;
    out->len = 0;
    out->more = false;
    if (c->seg_count == 0 || max_len == 0)
        return -ENODATA;
    s = seg_at(c, 0);
    if (s->kind == CR__SEG_FILE) {
        out->file_fd = s->fd;
        out->file_off = s->off;
        out->len = s->len < max_len ? s->len : max_len;
        return 0;
    }
    if (max_iov > CR__CONN_OUT_IOV)
        max_iov = CR__CONN_OUT_IOV;
    for (unsigned i = 0; i < c->seg_count && (unsigned)out->iovcnt < max_iov; i++) {
        const struct cr__conn_seg *m = seg_at(c, i);
        size_t len = m->len;

        if (m->kind == CR__SEG_FILE) {
            /* A head before a file body: let the kernel put them in one
             * segment instead of sending the head alone. */
            out->more = true;
            break;
        }
        assert(m->kind != CR__SEG_STAGED || tl_stage_owner == c);
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
 * goes by send(2): sendmsg(2) first copies in and checks a msghdr and an
 * iovec array, kernel time per request (docs/design/conn.md). */
static ssize_t send_iov(int fd, const struct iovec *iov, int iovcnt, int flags)
{
    struct msghdr msg = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};

    if (iovcnt == 1)
        return cr__sys_send(fd, iov[0].iov_base, iov[0].iov_len, flags);
    return cr__sys_sendmsg(fd, &msg, flags);
}

int cr__conn_flush(struct cr_conn *c, size_t *budget)
{
    struct cr__conn_out out;

    while (c->seg_count > 0) {
        ssize_t n;

        if (*budget == 0)
            return -EBUSY;
        if (cr__conn_next_output(c, &out, CR__CONN_OUT_IOV,
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
             * segment, one packet fewer each way (docs/design/conn.md). */
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
        cr__conn_consume_output(c, (size_t)n);
        *budget -= (size_t)n;
    }
    return 0;
}

/* Releases every queued segment without sending it. */
void cr__conn_drop_output(struct cr_conn *c)
{
    while (c->seg_count > 0)
        pop_seg(c);
    c->pending = 0;
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
    struct cr__conn_seg *s;

    if (c->reserved != NULL) {
        char *block = c->reserved;

        c->reserved = NULL;
        if (used == 0) {
            free(block);
        } else if (reserve_seg(c) < 0) {
            free(block);
            c->failed = true;
        } else {
            s = push_seg(c, CR__SEG_HEAP, used);
            s->p = block;
            s->block = block;
        }
        return;
    }
    if (used == 0)
        return;
    assert(tl_stage_owner == c && used <= TL_STAGE_SIZE - tl_stage_len);
    s = last_seg(c);
    if (s != NULL && s->kind == CR__SEG_STAGED && s->pos + s->len == tl_stage_len) {
        s->len += used; /* extends the previous write */
        c->pending += used;
    } else if (reserve_seg(c) < 0) {
        c->failed = true;
        return;
    } else {
        s = push_seg(c, CR__SEG_STAGED, used);
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
    struct cr__conn_seg *s;

    if (len == 0 || reserve_seg(c) < 0) {
        if (release != NULL)
            release(arg);
        return len == 0 ? 0 : -ENOMEM;
    }
    s = push_seg(c, CR__SEG_REF, len);
    s->p = data;
    s->release = release;
    s->arg = arg;
    return 0;
}

int cr_conn_write_file(struct cr_conn *c, int fd, off_t off, size_t len, cr_release_fn *release,
                       void *arg)
{
    struct cr__conn_seg *s;
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
    s = push_seg(c, CR__SEG_FILE, len);
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
