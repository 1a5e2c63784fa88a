/*
 * conn.c - the connection driver every model shares (conn_internal.h): input,
 * the two drivers, deadlines, counters and lifecycle, and the cr_conn_* calls
 * services make that are not output (service.h; output is conn_output.c). A
 * model calls cr__conn_handle() when the socket is ready; the driver reads,
 * feeds the service, sends what it queued and says what to wait for next.
 * Runs on whichever thread serves the connection, one thread at a time (the
 * model guarantees it). Owns the connection's socket and its unconsumed
 * input; borrows the service.
 *
 * Memory. Reads go to a thread-local buffer (tl_in); only what the service
 * leaves unconsumed (a partial request) is copied to a per-connection buffer
 * sized to it, which later reads append to and which is freed once it
 * empties. Output is staged thread-locally too (conn_output.c). So a request
 * answered at once allocates nothing, and an idle keep-alive connection
 * holds no buffer.
 *
 * Two drivers share one logic. advance() does the work that needs no I/O
 * (feed kept input, decide what is needed next); the readiness driver
 * (cr__conn_handle, drive) reads and sends around it itself, while a
 * proactor performs the receives and sends asynchronously and reports them
 * through cr__conn_feed and cr__conn_sent. Every driver call is bracketed by
 * cr__conn_stage_enter and cr__conn_stage_leave (finish_call).
 *
 * Nesting. A service call may serve other connections on the same thread (the
 * Leader/Followers hybrid client/server). A read that finds tl_in in use by
 * an outer call reads into the connection's own buffer; conn_output.c says
 * what nesting does to staged output.
 */
#include <cabrank/clock.h>
#include <cabrank/handle_set.h>
#include <cabrank/listener.h>
#include <cabrank/log.h>

#include "net/conn_state_internal.h"
#include "os/sys_internal.h"

#include <assert.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TL_IN_SIZE (64 * 1024)
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
/* Input read and dropped before a close the service asked for, so that the
 * close sends a FIN rather than a reset ahead of its last answer. */
#define DISCARD_MAX (256 * 1024)
/* cr__conn_serve_blocking() looks at *stop at least this often. */
#define STOP_POLL_MS 100

/* The calling thread's buffers; see the top of the file. */
static __thread char tl_in[TL_IN_SIZE];
static __thread bool tl_in_busy; /* a service call is reading tl_in */

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
 * connection's in turn, keep that work here, as lighttpd's 256 KiB writes
 * do (docs/design/conn.md).
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
            err = cr__conn_flush(c, &budget);
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

/* Ends a driver call begun with cr__conn_stage_enter: keeps or drops the staged
 * output, updates the deadlines of the wait it returns and the counters. */
static enum cr__conn_next finish_call(struct cr_conn *c, struct cr_conn *outer,
                                      enum cr__conn_next next, uint64_t in0, uint64_t out0)
{
    cr__conn_stage_leave(c, outer, next != CR__CONN_CLOSE);
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
    outer = cr__conn_stage_enter(c);
    return finish_call(c, outer, drive(c), in0, out0);
}

enum cr__conn_next cr__conn_feed(struct cr_conn *c, const char *data, size_t len, unsigned worker)
{
    uint64_t in0 = c->bytes_in;
    uint64_t out0 = c->bytes_out;
    struct cr_conn *outer;

    c->worker = worker;
    outer = cr__conn_stage_enter(c);
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

enum cr__conn_next cr__conn_sent(struct cr_conn *c, size_t n, unsigned worker)
{
    uint64_t in0 = c->bytes_in;
    uint64_t out0 = c->bytes_out;
    struct cr_conn *outer;

    assert(n <= c->pending);
    c->worker = worker;
    outer = cr__conn_stage_enter(c);
    cr__conn_consume_output(c, n);
    if (c->seg_count == 0)
        output_drained(c);
    return finish_call(c, outer, advance(c), in0, out0);
}

bool cr__conn_serve_yielding(struct cr_conn *c, unsigned worker, const volatile int *stop,
                             const struct cr__conn_yield *y)
{
    unsigned events = CR_EV_READ;

    /* The thread is this connection's alone: no other waits for a turn,
     * and a slice would cost a poll(2) each. */
    c->send_budget = SIZE_MAX;
    for (;;) {
        enum cr__conn_next next = cr__conn_handle(c, events, worker);
        struct pollfd pfd[2] = {{.fd = c->fd}, {.fd = y != NULL ? y->fd : -1, .events = POLLIN}};

        if (next == CR__CONN_CLOSE)
            return false;
        pfd[0].events = next == CR__CONN_WRITE ? POLLOUT : POLLIN;
        for (;;) {
            /* Relaxed: a flag; the connection's data is ours alone. */
            int st = __atomic_load_n(stop, __ATOMIC_RELAXED);
            uint64_t deadline = cr__conn_deadline(c);
            uint64_t now = cr_clock_now_ns();
            int timeout = STOP_POLL_MS;
            /* Between requests only: never with a request half served. */
            bool idle = next == CR__CONN_READ && cr__conn_is_idle(c);
            bool may = y != NULL && y->may_yield(y->arg) && idle;
            int n;

            if (st == CR__STOP_NOW || (st != 0 && cr__conn_is_idle(c)))
                return false;
            if (deadline != 0 && now >= deadline)
                return false;
            if (deadline != 0 && deadline - now < (uint64_t)STOP_POLL_MS * CR_NSEC_PER_MSEC)
                timeout = (int)((deadline - now + CR_NSEC_PER_MSEC - 1) / CR_NSEC_PER_MSEC);
            n = poll(pfd, may ? 2 : 1, timeout);
            if (n < 0 && errno != EINTR)
                return false;
            if (n > 0 && (pfd[0].revents != 0 || !may))
                break;
            if (n > 0)
                return true; /* another connection waits for this thread */
        }
        events = (pfd[0].revents & POLLIN ? CR_EV_READ : 0) |
                 (pfd[0].revents & POLLOUT ? CR_EV_WRITE : 0) |
                 (pfd[0].revents & POLLHUP ? CR_EV_HUP : 0) |
                 (pfd[0].revents & POLLERR ? CR_EV_ERR : 0);
    }
}

void cr__conn_serve_blocking(struct cr_conn *c, unsigned worker, const volatile int *stop)
{
    (void)cr__conn_serve_yielding(c, worker, stop, NULL);
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
    cr__conn_output_init(c);
    now = cr_clock_event_ns();
    c->waiting = CR__CONN_READ;
    c->input_deadline = c->idle_timeout_ns != 0 ? now + c->idle_timeout_ns : 0;
    if (c->svc->open != NULL) {
        struct cr_conn *outer = cr__conn_stage_enter(c);
        int err = c->svc->open(c->svc->ctx, c, &c->state);

        if (err >= 0 && c->seg_count > 0) {
            /* No budget: the model waits to read next, not to write. */
            size_t budget = SIZE_MAX;

            err = cr__conn_flush(c, &budget);
            err = err == -EAGAIN ? 0 : err;
        }
        cr__conn_stage_leave(c, outer, err >= 0 && !c->failed);
        if (err >= 0 && c->failed)
            err = -ENOMEM;
        if (err < 0) {
            cr__conn_output_fini(c);
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
    /* Segments first: their release callbacks may use service state. */
    cr__conn_output_fini(c);
    if (c->svc->close != NULL)
        c->svc->close(c->svc->ctx, c->state);
    close(c->fd);
    report_bytes(c);
    free(c->in);
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
