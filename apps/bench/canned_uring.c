/*
 * canned_uring.c - the canned-uring peer's backend (canned.h): one thread, one io_uring
 * (IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN), a multishot accept, a multishot
 * recv per connection into a provided-buffer ring, and the answers' sends submitted together
 * with the next wait (io_uring_submit_and_wait): a batch of requests costs one system call.
 * Built only with CR_HAVE_LIBURING; needs Linux 6.1 (DEFER_TASKRUN), and io_uring allowed.
 *
 * Sends post their completions (no IOSQE_CQE_SKIP_SUCCESS): a skipped success hides a short
 * count, and hides when the send ended, so a second send on the socket could start while the
 * first waits for buffer space and overtake it, interleaving two answers. A connection has at
 * most one send in flight; what the next requests owe waits for its completion, and a short
 * send is followed by the rest. The cost is one more CQE per request, read from memory.
 *
 * A connection ends with a shutdown linked to a close (both skipping their success CQE): its
 * multishot recv holds the socket, so a close alone would not send the FIN a Connection: close
 * client waits for. Completions carry (tag, generation, descriptor); a descriptor's generation
 * changes when it closes, so a completion for a closed connection whose descriptor came back
 * at accept is recognised as stale (its buffer still goes back to the ring).
 *
 * Runs on the responder process's thread; owns the ring, the buffers, the connection table
 * and the connections.
 */
#ifdef CR_HAVE_LIBURING

#include "canned.h"

#include <assert.h>
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define SQ_ENTRIES 1024
#define CQ_ENTRIES 8192
#define NBUFS      1024 /* a power of two, as the ring needs; the lab's most connections */
#define BUF_SIZE   2048
#define BGID       0
/* SQEs one completion may need (a send and a re-arm, or a shutdown and a close). */
#define SQES_PER_CQE 4
#define GEN_MASK     0xffffffu

enum tag {
    TAG_ACCEPT = 1,
    TAG_RECV,
    TAG_SEND,
    TAG_CLOSE,
    TAG_SIGNAL,
};

/* A connection, indexed by its descriptor. */
struct conn {
    struct bench_canned_scan scan;
    struct bench_canned_out out;
    uint32_t gen;      /* changes at accept and at close; low 24 bits go in user_data */
    uint32_t inflight; /* bytes of the send in flight; 0: none */
    bool open;
    bool closing; /* its Connection: close answer is owed: close after it */
};

struct server {
    struct io_uring ring;
    struct io_uring_buf_ring *br;
    char *bufs;
    struct conn *conns;
    size_t nconns;
    int lfd;
    int sfd;
    int err; /* a ring that stopped taking submissions: serve() returns it */
    bool stop;
};

static uint64_t udata(enum tag t, uint32_t gen, int fd)
{
    return (uint64_t)t << 56 | (uint64_t)(gen & GEN_MASK) << 32 | (uint32_t)fd;
}

/* ------------------------------------------------------------ ring */

/* The ring and its provided buffers; why (cap bytes) says what failed. 0 or -errno. */
static int ring_open(struct server *s, char *why, size_t cap)
{
    struct io_uring_params p = {
        .flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE,
        .cq_entries = CQ_ENTRIES,
    };
    struct io_uring_buf_reg reg = {.ring_entries = NBUFS, .bgid = BGID};
    void *mem;
    int err;

    /* One fixed setup, no fallback: the floor is measured with the same ring everywhere. */
    err = io_uring_queue_init_params(SQ_ENTRIES, &s->ring, &p);
    if (err < 0) {
        snprintf(why, cap, "io_uring_queue_init: %s%s", strerror(-err),
                 err == -EINVAL ? " (IORING_SETUP_DEFER_TASKRUN needs Linux 6.1)" : "");
        return err;
    }
    err = -posix_memalign(&mem, (size_t)sysconf(_SC_PAGESIZE), NBUFS * sizeof(struct io_uring_buf));
    if (err < 0) {
        snprintf(why, cap, "out of memory");
        goto out_exit;
    }
    s->br = mem;
    s->bufs = malloc((size_t)NBUFS * BUF_SIZE);
    if (s->bufs == NULL) {
        err = -ENOMEM;
        snprintf(why, cap, "out of memory");
        goto out_free_br;
    }
    io_uring_buf_ring_init(s->br);
    reg.ring_addr = (unsigned long)s->br;
    err = io_uring_register_buf_ring(&s->ring, &reg, 0);
    if (err < 0) {
        snprintf(why, cap, "io_uring_register_buf_ring: %s", strerror(-err));
        goto out_free_bufs;
    }
    for (unsigned i = 0; i < NBUFS; i++)
        io_uring_buf_ring_add(s->br, s->bufs + (size_t)i * BUF_SIZE, BUF_SIZE, (unsigned short)i,
                              io_uring_buf_ring_mask(NBUFS), (int)i);
    io_uring_buf_ring_advance(s->br, NBUFS);
    return 0;

out_free_bufs:
    free(s->bufs);
out_free_br:
    free(s->br);
out_exit:
    io_uring_queue_exit(&s->ring);
    return err;
}

/* Tears the ring down (which unregisters the buffers), then frees them. */
static void ring_close(struct server *s)
{
    io_uring_queue_exit(&s->ring);
    free(s->bufs);
    free(s->br);
}

static int probe(char *why, size_t cap)
{
    struct server s;
    int err;

    memset(&s, 0, sizeof(s));
    err = ring_open(&s, why, cap);
    if (err == 0)
        ring_close(&s);
    return err;
}

/* Makes room for one completion's SQEs, submitting what is queued when the SQ is nearly full. */
static void make_room(struct server *s)
{
    int err;

    if (io_uring_sq_space_left(&s->ring) >= SQES_PER_CQE)
        return;
    err = io_uring_submit(&s->ring);
    if (err < 0 && err != -EINTR)
        s->err = err;
}

/* An SQE, or NULL with s->err set when the ring takes none (after make_room(), never). */
static struct io_uring_sqe *sqe_get(struct server *s)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);

    if (sqe == NULL && s->err == 0)
        s->err = -EBUSY;
    return sqe;
}

static void recycle(struct server *s, unsigned bid)
{
    assert(bid < NBUFS);
    io_uring_buf_ring_add(s->br, s->bufs + (size_t)bid * BUF_SIZE, BUF_SIZE, (unsigned short)bid,
                          io_uring_buf_ring_mask(NBUFS), 0);
    io_uring_buf_ring_advance(s->br, 1);
}

/* ------------------------------------------------------------ requests */

static void arm_accept(struct server *s)
{
    struct io_uring_sqe *sqe = sqe_get(s);

    if (sqe == NULL)
        return;
    io_uring_prep_multishot_accept(sqe, s->lfd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, udata(TAG_ACCEPT, 0, s->lfd));
}

static void arm_signal(struct server *s)
{
    struct io_uring_sqe *sqe = sqe_get(s);

    if (sqe == NULL)
        return;
    io_uring_prep_poll_add(sqe, s->sfd, POLLIN);
    io_uring_sqe_set_data64(sqe, udata(TAG_SIGNAL, 0, s->sfd));
}

static void arm_recv(struct server *s, struct conn *c, int fd)
{
    struct io_uring_sqe *sqe = sqe_get(s);

    if (sqe == NULL)
        return;
    io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = BGID;
    io_uring_sqe_set_data64(sqe, udata(TAG_RECV, c->gen, fd));
}

/* Shutdown, then close (hard-linked: the close runs whatever the shutdown returned). */
static void close_conn(struct server *s, struct conn *c, int fd)
{
    struct io_uring_sqe *sqe;

    c->open = false;
    c->gen++;
    if (io_uring_sq_space_left(&s->ring) < 2) {
        s->err = -EBUSY;
        return;
    }
    sqe = io_uring_get_sqe(&s->ring);
    io_uring_prep_shutdown(sqe, fd, SHUT_RDWR);
    sqe->flags |= IOSQE_IO_HARDLINK | IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(sqe, udata(TAG_CLOSE, c->gen, fd));
    sqe = io_uring_get_sqe(&s->ring);
    io_uring_prep_close(sqe, fd);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(sqe, udata(TAG_CLOSE, c->gen, fd));
}

/* Starts the next send unless one is in flight; closes after the close answer. */
static void send_next(struct server *s, struct conn *c, int fd)
{
    struct io_uring_sqe *sqe;
    const void *p;
    size_t len;

    if (c->inflight != 0)
        return;
    len = bench__canned_next(&c->out, &p);
    if (len == 0) {
        if (c->closing)
            close_conn(s, c, fd);
        return;
    }
    sqe = sqe_get(s);
    if (sqe == NULL)
        return;
    io_uring_prep_send(sqe, fd, p, len, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, udata(TAG_SEND, c->gen, fd));
    c->inflight = (uint32_t)len;
}

/* ------------------------------------------------------------ completions */

static bool is_current(const struct conn *c, uint32_t gen)
{
    return c->open && (c->gen & GEN_MASK) == gen;
}

static void on_accept(struct server *s, const struct io_uring_cqe *cqe)
{
    int fd = cqe->res;

    if (fd >= 0 && (size_t)fd >= s->nconns) {
        close(fd);
    } else if (fd >= 0) {
        struct conn *c = &s->conns[fd];
        uint32_t gen = c->gen + 1;

        memset(c, 0, sizeof(*c));
        c->gen = gen;
        c->open = true;
        arm_recv(s, c, fd);
    }
    /* A multishot that ended (an error such as EMFILE included) is armed again. */
    if (!(cqe->flags & IORING_CQE_F_MORE))
        arm_accept(s);
}

static void on_recv(struct server *s, const struct io_uring_cqe *cqe, int fd, uint32_t gen)
{
    struct conn *c = &s->conns[fd];
    bool current = is_current(c, gen);

    if (cqe->flags & IORING_CQE_F_BUFFER) {
        unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;

        if (current && !c->closing && cqe->res > 0) {
            bool close;
            unsigned heads = bench__canned_scan(&c->scan, s->bufs + (size_t)bid * BUF_SIZE,
                                                (size_t)cqe->res, &close);

            bench__canned_owe(&c->out, heads, close);
            c->closing = close;
        }
        recycle(s, bid);
    }
    if (!current)
        return;
    if (cqe->res > 0 || cqe->res == -ENOBUFS) {
        /* -ENOBUFS: the buffers ran out and the multishot ended; they are back by now. */
        if (!(cqe->flags & IORING_CQE_F_MORE) && !c->closing)
            arm_recv(s, c, fd);
        send_next(s, c, fd);
        return;
    }
    close_conn(s, c, fd); /* end of stream, or an error */
}

static void on_send(struct server *s, const struct io_uring_cqe *cqe, int fd, uint32_t gen)
{
    struct conn *c = &s->conns[fd];

    if (!is_current(c, gen))
        return;
    if (cqe->res <= 0) {
        close_conn(s, c, fd);
        return;
    }
    assert((uint32_t)cqe->res <= c->inflight);
    c->inflight = 0;
    bench__canned_sent(&c->out, (size_t)cqe->res);
    send_next(s, c, fd);
}

static void on_cqe(struct server *s, const struct io_uring_cqe *cqe)
{
    uint64_t ud = io_uring_cqe_get_data64(cqe);
    enum tag tag = (enum tag)(ud >> 56);
    uint32_t gen = (uint32_t)(ud >> 32) & GEN_MASK;
    int fd = (int)(uint32_t)ud;

    make_room(s);
    switch (tag) {
    case TAG_ACCEPT:
        on_accept(s, cqe);
        break;
    case TAG_RECV:
        on_recv(s, cqe, fd, gen);
        break;
    case TAG_SEND:
        on_send(s, cqe, fd, gen);
        break;
    case TAG_SIGNAL:
        s->stop = true;
        break;
    case TAG_CLOSE:
        /* A shutdown or close that failed: the connection is gone either way. */
        break;
    }
}

static int serve(int lfd, int sfd)
{
    struct server *s;
    char why[256];
    int err;

    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->lfd = lfd;
    s->sfd = sfd;
    s->nconns = bench__canned_max_fds();
    s->conns = calloc(s->nconns, sizeof(*s->conns));
    if (s->conns == NULL) {
        err = -ENOMEM;
        goto out_free;
    }
    err = ring_open(s, why, sizeof(why));
    if (err < 0) {
        fprintf(stderr, "cabrank-bench: canned-uring: %s\n", why);
        goto out_free_conns;
    }
    arm_accept(s);
    arm_signal(s);
    while (!s->stop && s->err == 0) {
        struct io_uring_cqe *cqe;
        unsigned head;

        err = io_uring_submit_and_wait(&s->ring, 1);
        if (err < 0 && err != -EINTR) {
            s->err = err;
            break;
        }
        /* Each CQE is released as soon as it is handled, so a submission that make_room()
         * makes in the middle of a batch never meets a full completion queue. */
        io_uring_for_each_cqe(&s->ring, head, cqe)
        {
            on_cqe(s, cqe);
            io_uring_cqe_seen(&s->ring, cqe);
        }
    }
    err = s->err;
    for (size_t fd = 0; fd < s->nconns; fd++) {
        if (s->conns[fd].open)
            close((int)fd);
    }
    ring_close(s);
out_free_conns:
    free(s->conns);
out_free:
    free(s);
    return err;
}

const struct bench_canned_ops bench__canned_uring_ops = {
    .name = "uring",
    .probe = probe,
    .serve = serve,
};

#endif /* CR_HAVE_LIBURING */
