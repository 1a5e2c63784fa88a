/*
 * model_proactor.c - the `proactor` model: connections served over
 * asynchronous operations (proactor.h). The model starts an operation (a
 * multishot accept on each listener, then per connection a receive or a
 * send with a linked timeout); the proactor's engine performs it and its
 * completion dispatcher (single, lf or ring-per-thread) runs the completion
 * handler, which feeds the connection driver without I/O (cr__conn_feed,
 * cr__conn_next_output, cr__conn_sent in conn_internal.h) and starts the
 * next operation. cr_server (src/server.c) drives it through
 * cr__model_proactor_ops. Owns the proactor, the accept tokens, every
 * connection and its receive buffer; borrows the listening sockets and the
 * service. Handlers run on the proactor's dispatcher threads; create,
 * start, wait and destroy on the owner thread, stop and stats on any.
 *
 * A connection has one operation in flight at a time: a receive while it
 * waits for input, a send while output is queued (the readiness driver's
 * READ or WRITE wait). Both go through one token, each started by the
 * handler of the one before, so the proactor runs them one after another
 * (a start from a token's own handler is submitted once it returns) and no
 * two handlers of a connection ever overlap. The connection's lock is held
 * by its handler and by the stop walk (below), nobody else.
 *
 * Receive buffer: the kernel writes it asynchronously, so it is the
 * connection's own, not the thread's. An idle connection receives into a
 * small buffer inside its struct (RX_SMALL, enough for a request head); a
 * receive that fills it switches the connection to a heap buffer (RX_BIG)
 * until it is idle again, when the heap buffer is freed.
 *
 * Timeouts are linked to the operations: a receive carries the time left of
 * the input deadline (the idle timeout or the service's), a send the send
 * timeout. A send moves at most SEND_CHUNK bytes, so a large body in
 * progress is a series of sends, each one progress that restarts the send
 * timeout (the readiness driver's "no progress for send_timeout").
 *
 * Accepting: under ring-per-thread every ring runs a multishot accept on
 * every (shared) listener, and the accepting thread hands each new
 * connection to the next ring in turn, where it stays: the kernel may give
 * every connection of a shared listener to one ring's accept, and staying
 * there would make ring-per-thread a single thread (docs/design/proactor.md).
 * Round robin spreads them evenly without SO_REUSEPORT copies (which
 * cr_server opens only for lf groups, and which spread by hash, unevenly for
 * few connections). Beyond max_connections the accepts are cancelled; a
 * connection accepted in the meantime is parked unserved (its socket waits,
 * as in the listen backlog) and served first once a connection closes.
 *
 * Stop: graceful cancels the accepts and posts the stop walk to a
 * dispatcher thread (so the caller never waits for a handler): under each
 * connection's lock it cancels the receive of every idle connection, never
 * a send or the receive of a request in flight. A connection closes
 * instead of starting an idle receive once stopping is set; the stop sets
 * it before the walk and a handler reads it under the connection's lock, so
 * every idle receive is either cancelled by the walk or never started.
 * Once the last connection and accept are gone the proactor is stopped and
 * its threads leave. Immediate
 * stops the proactor at once: every operation completes with -ECANCELED
 * (or -ESHUTDOWN when started afterwards), and each connection closes in
 * its handler. Either way every token's last handler has run when
 * cr_proactor_wait returns.
 *
 * Lock order: m->lock, then a connection's lock (the stop walk), then the
 * proactor's own; a handler never takes m->lock holding its connection's
 * lock.
 */
#include <cabrank/clock.h>
#include <cabrank/log.h>
#include <cabrank/proactor.h>

#include "model/model_internal.h"
#include "os/sync_internal.h"
#include "pool/role_internal.h"

#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RX_SMALL 2048
#define RX_BIG   (64 * 1024)
/* Most bytes one send operation moves (see the top of the file). */
#define SEND_CHUNK (1024 * 1024)
/* After an accept error that ends the multishot (EMFILE): retry this late,
 * rather than spin. */
#define ACCEPT_RETRY_MS 100

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

struct pconn {
    /* Immutable after start_conn. */
    struct cr_model *m;
    struct cr_conn *c;
    int fd;

    /* Held by its handler over its body, and by the stop walk. */
    struct cr_mutex lock;
    /* Protected by lock. */
    struct cr_aop io;
    bool sending;   /* the operation in flight is a send, else a receive */
    bool idle_recv; /* ... a receive on an idle connection */
    bool closed;
    char *big;    /* RX_BIG bytes, or NULL */
    bool use_big; /* the last receive filled its buffer */
    char small[RX_SMALL];

    /* Protected by m->lock. */
    struct pconn *prev;
    struct pconn *next;
};

/* One listener on one ring. */
struct pacceptor {
    /* Immutable after create. */
    struct cr_model *m;
    int fd;
    /* Protected by m->lock. */
    struct cr_aop op;
    struct cr_aop retry; /* the timer after an accept error */
    bool armed;          /* op in flight */
    bool retrying;       /* retry in flight */
};

/* A dispatcher thread: its role clock, written by that thread only. */
struct pslot {
    struct cr__role_clock clock;
};

struct cr_model {
    /* Immutable after create. */
    struct cr_model_env env;
    struct cr_proactor *p;
    struct pacceptor *acceptors; /* nacceptors = nlisten * rings */
    unsigned nacceptors;
    struct pslot *slots; /* nslots = dispatcher threads */
    unsigned nslots;
    unsigned max_conns;
    unsigned nrings;
    bool is_lf;

    /* Owner thread only. */
    bool started;
    bool waited;

    /* The stop walk; in flight while stop_walking (under lock). */
    struct cr_aop stopper;

    struct cr_mutex lock;
    /* Protected by lock. */
    struct pconn *conns;
    unsigned nconns; /* served or being started (a slot reserved) */
    int *parked;     /* accepted beyond max_connections, not served yet */
    unsigned nparked;
    unsigned parked_cap;
    bool paused;   /* accepts cancelled at max_connections */
    bool finished; /* cr_proactor_stop called */
    bool stop_walking;

    /* Written under lock, read anywhere (seq_cst: a flag ordering nothing
     * else; the stop walk's post and locks order it for arm_recv). */
    int stopping;
    int immediate;
    /* Next slot for a thread's first handler (lf, single). Relaxed. */
    unsigned next_slot;
    /* The ring of the next connection (ring-per-thread). Relaxed. */
    unsigned next_ring;
};

static void counter_add(uint64_t *counter, int64_t delta)
{
    /* Relaxed: server-wide statistics (model_internal.h). */
    __atomic_fetch_add(counter, (uint64_t)delta, __ATOMIC_RELAXED);
}

static bool is_stopping(const struct cr_model *m)
{
    return __atomic_load_n(&m->stopping, __ATOMIC_SEQ_CST) != 0;
}

/* ------------------------------------------------------------- workers */

/* The calling dispatcher thread's model, and its slot there. */
static __thread const struct cr_model *tl_model;
static __thread unsigned tl_slot;

/* The calling thread's slot, assigned at its first handler: under
 * ring-per-thread its ring (one thread per ring), else the next free one. */
static unsigned self_slot(struct cr_model *m)
{
    if (tl_model != m) {
        unsigned i;

        if (strcmp(cr_proactor_dispatch(m->p), "ring-per-thread") == 0)
            i = cr_proactor_current_ring(m->p);
        else
            i = __atomic_fetch_add(&m->next_slot, 1, __ATOMIC_RELAXED);
        tl_model = m;
        tl_slot = i % m->nslots;
    }
    return tl_slot;
}

/* A handler begins: the thread is processing. Returns its worker index. */
static unsigned handler_enter(struct cr_model *m)
{
    unsigned w = self_slot(m);

    cr__role_set(&m->slots[w].clock, CR_ROLE_PROCESSING);
    cr__role_event(&m->slots[w].clock);
    return w;
}

/* A handler ends: the thread goes back to waiting for completions. Under lf
 * dispatch it rejoins the pool, where it leads or follows (the proactor
 * does not say which: counted as follower); otherwise it waits on its
 * completion queue itself, the leader's role. */
static void handler_leave(struct cr_model *m, unsigned w)
{
    cr__role_set(&m->slots[w].clock, m->is_lf ? CR_ROLE_FOLLOWER : CR_ROLE_LEADER);
}

/* ----------------------------------------------------------- accepting */

/* Starts a's multishot accept when accepting. Caller holds m->lock. */
static void arm_acceptor(struct cr_model *m, struct pacceptor *a)
{
    int err;

    cr_mutex_assert_held(&m->lock);
    if (a->armed || a->retrying || m->paused || is_stopping(m))
        return;
    err = cr_aop_accept(&a->op, a->fd, true);
    if (err == 0) {
        a->armed = true;
        return;
    }
    if (err == -ESHUTDOWN)
        return;
    CR_LOG(CR_LOG_ERROR, "proactor: starting accept failed: %s", strerror(-err));
    if (cr_aop_timer(&a->retry, ACCEPT_RETRY_MS) == 0)
        a->retrying = true;
}

/* Cancels every accept in flight. Caller holds m->lock. */
static void cancel_acceptors(struct cr_model *m, bool retries)
{
    for (unsigned i = 0; i < m->nacceptors; i++) {
        if (m->acceptors[i].armed)
            (void)cr_aop_cancel(&m->acceptors[i].op);
        if (retries && m->acceptors[i].retrying)
            (void)cr_aop_cancel(&m->acceptors[i].retry);
    }
}

/* Stopping and nothing left in flight: let the proactor's threads leave.
 * Caller holds m->lock. */
static void maybe_finish(struct cr_model *m)
{
    if (!is_stopping(m) || m->finished || m->nconns > 0 || m->stop_walking)
        return;
    for (unsigned i = 0; i < m->nacceptors; i++) {
        if (m->acceptors[i].armed || m->acceptors[i].retrying)
            return;
    }
    m->finished = true;
    cr_proactor_stop(m->p);
}

static void close_parked(struct cr_model *m)
{
    for (unsigned i = 0; i < m->nparked; i++)
        close(m->parked[i]);
    m->nparked = 0;
}

static void start_conn(struct cr_model *m, int fd, unsigned ring);

/*
 * A connection slot is free again: serve a parked connection, or accept
 * again below the limit; or finish a stop. Returns a parked socket for the
 * caller to start (the slot stays reserved for it), or -1. Caller holds
 * m->lock.
 */
static int slot_freed(struct cr_model *m)
{
    assert(m->nconns > 0);
    m->nconns--;
    if (!is_stopping(m) && m->nparked > 0) {
        int fd = m->parked[0];

        memmove(m->parked, m->parked + 1, --m->nparked * sizeof(*m->parked));
        m->nconns++;
        return fd;
    }
    if (m->paused && m->nconns < m->max_conns && !is_stopping(m)) {
        m->paused = false;
        for (unsigned i = 0; i < m->nacceptors; i++)
            arm_acceptor(m, &m->acceptors[i]);
    }
    maybe_finish(m);
    return -1;
}

/* Keeps fd unserved until a slot frees. -ENOMEM. Caller holds m->lock. */
static int park(struct cr_model *m, int fd)
{
    if (m->nparked == m->parked_cap) {
        unsigned cap = m->parked_cap != 0 ? m->parked_cap * 2 : 8;
        int *p = realloc(m->parked, cap * sizeof(*p));

        if (p == NULL)
            return -ENOMEM;
        m->parked = p;
        m->parked_cap = cap;
    }
    m->parked[m->nparked++] = fd;
    return 0;
}

static bool is_resource_error(ssize_t res)
{
    return res == -EMFILE || res == -ENFILE || res == -ENOBUFS || res == -ENOMEM;
}

static void on_accept(struct cr_aop *op, ssize_t res, unsigned flags)
{
    struct pacceptor *a = container_of(op, struct pacceptor, op);
    struct cr_model *m = a->m;
    unsigned ring = op->ring;
    int start = -1;

    if (m->nrings > 1) /* relaxed: any spread will do */
        ring = __atomic_fetch_add(&m->next_ring, 1, __ATOMIC_RELAXED) % m->nrings;

    cr_mutex_lock(&m->lock);
    if (!(flags & CR_AOP_MORE))
        a->armed = false;
    if (res >= 0) {
        int fd = (int)res;

        counter_add(m->env.accepted, 1);
        if (is_stopping(m)) {
            close(fd);
        } else if (m->nconns >= m->max_conns) {
            if (park(m, fd) < 0)
                close(fd);
            if (!m->paused) {
                m->paused = true;
                cancel_acceptors(m, false);
            }
        } else {
            m->nconns++;
            start = fd;
        }
    } else if (res != -ECANCELED && !is_stopping(m)) {
        /* Rate: at most one per ACCEPT_RETRY_MS per listener and ring. */
        CR_LOG(CR_LOG_WARN, "proactor: accept failed: %s", strerror((int)-res));
        if (!a->armed && is_resource_error(res) && cr_aop_timer(&a->retry, ACCEPT_RETRY_MS) == 0)
            a->retrying = true;
    }
    arm_acceptor(m, a);
    maybe_finish(m);
    cr_mutex_unlock(&m->lock);
    if (start >= 0)
        start_conn(m, start, ring);
}

static void on_accept_retry(struct cr_aop *op, ssize_t res, unsigned flags)
{
    struct pacceptor *a = container_of(op, struct pacceptor, retry);
    struct cr_model *m = a->m;

    CR_UNUSED(res);
    CR_UNUSED(flags);
    cr_mutex_lock(&m->lock);
    a->retrying = false;
    arm_acceptor(m, a);
    maybe_finish(m);
    cr_mutex_unlock(&m->lock);
}

/* --------------------------------------------------------- connections */

/* Milliseconds left until the connection's deadline, rounded up; 0 for
 * none (the operation then has no timeout). */
static uint64_t timeout_ms(const struct cr_conn *c)
{
    uint64_t deadline = cr__conn_deadline(c);
    uint64_t now;

    if (deadline == 0)
        return 0;
    now = cr_clock_now_ns();
    if (deadline <= now)
        return 1;
    return (deadline - now + CR_NSEC_PER_MSEC - 1) / CR_NSEC_PER_MSEC;
}

/* Closes pc, whose lock the caller holds and which has no operation in
 * flight; unlocks and frees it, then serves a parked connection if its slot
 * goes to one. */
static void close_conn(struct pconn *pc)
{
    struct cr_model *m = pc->m;
    unsigned ring = pc->io.ring;
    int next;

    cr__conn_destroy(pc->c);
    counter_add(m->env.open_connections, -1);
    free(pc->big);
    pc->big = NULL;
    pc->closed = true; /* for a stop walk waiting for the lock */
    cr_mutex_unlock(&pc->lock);

    cr_mutex_lock(&m->lock);
    if (pc->prev != NULL)
        pc->prev->next = pc->next;
    else
        m->conns = pc->next;
    if (pc->next != NULL)
        pc->next->prev = pc->prev;
    next = slot_freed(m);
    cr_mutex_unlock(&m->lock);
    /* No operation is in flight and the stop walk no longer sees pc (it
     * holds m->lock throughout): ours alone. */
    cr_mutex_fini(&pc->lock);
    free(pc);
    if (next >= 0)
        start_conn(m, next, ring);
}

/*
 * Starts the receive of a connection waiting for input, or closes it when a
 * graceful stop finds it idle. Caller holds pc->lock; unlocks it.
 */
static void arm_recv(struct pconn *pc)
{
    struct cr_model *m = pc->m;
    bool idle = cr__conn_is_idle(pc->c);
    char *buf = pc->small;
    size_t cap = sizeof(pc->small);
    int err;

    if (idle && is_stopping(m)) {
        close_conn(pc);
        return;
    }
    if (pc->use_big && pc->big == NULL)
        pc->big = malloc(RX_BIG); /* NULL: the small buffer will do */
    if (pc->use_big && pc->big != NULL) {
        buf = pc->big;
        cap = RX_BIG;
    } else if (idle && pc->big != NULL) {
        free(pc->big); /* an idle connection holds no big buffer */
        pc->big = NULL;
    }
    /* Set first: the stop walk reads them once we unlock. */
    pc->sending = false;
    pc->idle_recv = idle;
    err = cr_aop_recv(&pc->io, pc->fd, buf, cap, timeout_ms(pc->c));
    if (err < 0) {
        if (err != -ESHUTDOWN)
            CR_LOG(CR_LOG_WARN, "proactor: starting a receive failed: %s", strerror(-err));
        pc->idle_recv = false;
        close_conn(pc);
        return;
    }
    cr_mutex_unlock(&pc->lock);
}

/* Starts what the driver asked for. Caller holds pc->lock; unlocks it (or
 * frees pc). */
static void proceed(struct pconn *pc, enum cr__conn_next next)
{
    struct cr__conn_out out;
    int err;

    if (next == CR__CONN_CLOSE) {
        close_conn(pc);
        return;
    }
    if (next == CR__CONN_READ) {
        arm_recv(pc);
        return;
    }
    err = cr__conn_next_output(pc->c, &out, CR_AOP_MAX_IOV, SEND_CHUNK);
    assert(err == 0);
    pc->sending = true;
    if (out.file_fd >= 0)
        err =
            cr_aop_sendfile(&pc->io, pc->fd, out.file_fd, out.file_off, out.len, timeout_ms(pc->c));
    else
        err = cr_aop_sendv(&pc->io, pc->fd, out.iov, out.iovcnt, timeout_ms(pc->c));
    if (err < 0) {
        if (err != -ESHUTDOWN)
            CR_LOG(CR_LOG_WARN, "proactor: starting a send failed: %s", strerror(-err));
        close_conn(pc);
        return;
    }
    cr_mutex_unlock(&pc->lock);
}

/* A receive completed. Caller holds pc->lock; this unlocks it. */
static void received(struct pconn *pc, ssize_t res, unsigned w)
{
    const char *buf = pc->use_big && pc->big != NULL ? pc->big : pc->small;
    size_t cap = buf == pc->big ? RX_BIG : sizeof(pc->small);

    if (res < 0) {
        /* -ECANCELED: a stop (the walk cancels idle receives only). */
        if (res != -ECANCELED && res != -ETIMEDOUT && res != -ECONNRESET)
            CR_LOG(CR_LOG_DEBUG, "proactor: receive failed: %s", strerror((int)-res));
        close_conn(pc);
        return;
    }
    pc->use_big = (size_t)res == cap;
    proceed(pc, cr__conn_feed(pc->c, buf, (size_t)res, w));
}

/* A send completed (all of it, or an error). Caller holds pc->lock; this
 * unlocks it. */
static void sent(struct pconn *pc, ssize_t res, unsigned w)
{
    if (res < 0) {
        if (res != -ECANCELED && res != -ETIMEDOUT && res != -EPIPE && res != -ECONNRESET)
            CR_LOG(CR_LOG_DEBUG, "proactor: send failed: %s", strerror((int)-res));
        close_conn(pc);
        return;
    }
    proceed(pc, cr__conn_sent(pc->c, (size_t)res, w));
}

static void on_io(struct cr_aop *op, ssize_t res, unsigned flags)
{
    struct pconn *pc = container_of(op, struct pconn, io);
    struct cr_model *m = pc->m;
    unsigned w = handler_enter(m);

    CR_UNUSED(flags);
    cr_mutex_lock(&pc->lock);
    pc->idle_recv = false;
    if (pc->sending)
        sent(pc, res, w);
    else
        received(pc, res, w);
    handler_leave(m, w);
}

/* The stop walk (see the top of the file). */
static void on_stop_walk(struct cr_aop *op, ssize_t res, unsigned flags)
{
    struct cr_model *m = container_of(op, struct cr_model, stopper);

    CR_UNUSED(res);
    CR_UNUSED(flags);
    cr_mutex_lock(&m->lock);
    for (struct pconn *pc = m->conns; pc != NULL; pc = pc->next) {
        cr_mutex_lock(&pc->lock);
        if (pc->idle_recv && !pc->closed)
            (void)cr_aop_cancel(&pc->io);
        cr_mutex_unlock(&pc->lock);
    }
    m->stop_walking = false;
    maybe_finish(m);
    cr_mutex_unlock(&m->lock);
}

/*
 * Serves fd, for which a connection slot is reserved (m->nconns): creates
 * the connection (the service's open), then sends what open queued or
 * starts receiving. Any thread.
 */
static void start_conn(struct cr_model *m, int fd, unsigned ring)
{
    struct cr__conn_out out;
    struct pconn *pc;
    int err;

    pc = calloc(1, sizeof(*pc));
    if (pc == NULL) {
        err = -ENOMEM;
        close(fd);
        goto out_free_slot;
    }
    err = cr_mutex_init(&pc->lock);
    if (err < 0) {
        close(fd);
        goto out_free_pc;
    }
    err = cr__conn_create(&pc->c, fd, &m->env.conn);
    if (err < 0)
        goto out_fini; /* fd is closed */
    counter_add(m->env.open_connections, 1);
    pc->m = m;
    pc->fd = fd;
    cr_aop_init(&pc->io, m->p, ring, on_io);

    cr_mutex_lock(&m->lock);
    pc->next = m->conns;
    if (m->conns != NULL)
        m->conns->prev = pc;
    m->conns = pc;
    cr_mutex_unlock(&m->lock);

    cr_mutex_lock(&pc->lock);
    proceed(pc, cr__conn_next_output(pc->c, &out, 1, 1) == 0 ? CR__CONN_WRITE : CR__CONN_READ);
    return;

out_fini:
    cr_mutex_fini(&pc->lock);
out_free_pc:
    free(pc);
out_free_slot:
    CR_LOG(CR_LOG_DEBUG, "proactor: connection refused: %s", strerror(-err));
    cr_mutex_lock(&m->lock);
    fd = slot_freed(m);
    cr_mutex_unlock(&m->lock);
    if (fd >= 0)
        start_conn(m, fd, ring);
}

/* ------------------------------------------------------------ model ops */

static void proactor_stop(struct cr_model *m, bool graceful);
static int proactor_wait(struct cr_model *m);
static void proactor_destroy(struct cr_model *m);

static int proactor_create(struct cr_model **out, const struct cr_model_env *env)
{
    struct cr_proactor_config pcfg = {
        .engine = env->cfg->async_engine,
        .dispatch = env->cfg->dispatch,
        .threads = env->cfg->threads > 0 ? (unsigned)env->cfg->threads : 0,
    };
    struct cr_model *m;
    unsigned rings;
    int err;

    *out = NULL;
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return -ENOMEM;
    m->env = *env;
    m->max_conns = env->cfg->max_connections > 0 ? (unsigned)env->cfg->max_connections : 1;
    err = cr_mutex_init(&m->lock);
    if (err < 0) {
        free(m);
        return err;
    }
    /* From here proactor_destroy undoes whatever was set up. */
    err = cr_proactor_create(&m->p, &pcfg);
    if (err < 0) {
        CR_LOG(CR_LOG_ERROR, "proactor: cr_proactor_create: %s", strerror(-err));
        goto out_destroy;
    }
    m->is_lf = strcmp(cr_proactor_dispatch(m->p), "lf") == 0;
    cr_aop_init(&m->stopper, m->p, 0, on_stop_walk);
    m->nslots = cr_proactor_threads(m->p);
    if (m->nslots == 0)
        m->nslots = 1;
    rings = cr_proactor_rings(m->p);
    m->nrings = rings;
    m->slots = calloc(m->nslots, sizeof(*m->slots));
    m->nacceptors = env->nlisten * rings;
    m->acceptors = calloc(m->nacceptors > 0 ? m->nacceptors : 1, sizeof(*m->acceptors));
    if (m->slots == NULL || m->acceptors == NULL) {
        err = -ENOMEM;
        goto out_destroy;
    }
    for (unsigned i = 0; i < m->nslots; i++) {
        char name[32];

        snprintf(name, sizeof(name), "proactor %u", i);
        err = cr__role_attach(&m->slots[i].clock, env->timeline, name);
        if (err < 0)
            goto out_destroy;
    }
    for (unsigned r = 0; r < rings; r++) {
        for (unsigned i = 0; i < env->nlisten; i++) {
            struct pacceptor *a = &m->acceptors[r * env->nlisten + i];

            a->m = m;
            a->fd = env->listen_fds[i]; /* listen_groups is 1 for this model */
            cr_aop_init(&a->op, m->p, r, on_accept);
            cr_aop_init(&a->retry, m->p, r, on_accept_retry);
        }
    }
    *out = m;
    return 0;

out_destroy:
    proactor_destroy(m);
    return err;
}

static int proactor_start(struct cr_model *m)
{
    int err;

    err = cr_proactor_start(m->p);
    if (err < 0)
        return err;
    m->started = true;
    cr_mutex_lock(&m->lock);
    for (unsigned i = 0; i < m->nacceptors; i++)
        arm_acceptor(m, &m->acceptors[i]);
    cr_mutex_unlock(&m->lock);
    return 0;
}

static void proactor_stop(struct cr_model *m, bool graceful)
{
    cr_mutex_lock(&m->lock);
    __atomic_store_n(&m->stopping, 1, __ATOMIC_SEQ_CST);
    if (!graceful)
        __atomic_store_n(&m->immediate, 1, __ATOMIC_SEQ_CST);
    close_parked(m);
    if (graceful && !m->finished) {
        cancel_acceptors(m, true);
        if (m->conns != NULL && !m->stop_walking && cr_aop_post(&m->stopper, 0) == 0)
            m->stop_walking = true;
        maybe_finish(m);
    } else if (!m->finished) {
        m->finished = true;
        cr_proactor_stop(m->p);
    }
    cr_mutex_unlock(&m->lock);
}

static int proactor_wait(struct cr_model *m)
{
    int err;

    if (!m->started || m->waited)
        return 0;
    err = cr_proactor_wait(m->p);
    if (err < 0)
        return err;
    m->waited = true;
    return 0;
}

static void proactor_destroy(struct cr_model *m)
{
    if (m == NULL)
        return;
    if (m->started && !m->waited) {
        proactor_stop(m, false);
        (void)proactor_wait(m);
    }
    /* Every handler has run its last time: no connection is left. */
    assert(m->conns == NULL);
    close_parked(m);
    cr_proactor_destroy(m->p);
    free(m->parked);
    free(m->acceptors);
    for (unsigned i = 0; m->slots != NULL && i < m->nslots; i++)
        cr__role_detach(&m->slots[i].clock, m->env.timeline);
    free(m->slots);
    cr_mutex_fini(&m->lock);
    free(m);
}

static unsigned proactor_stats(const struct cr_model *m, struct cr_server_stats *st,
                               struct cr_worker_stats *workers, unsigned max)
{
    uint64_t now = cr_clock_now_ns();

    CR_UNUSED(st);
    for (unsigned i = 0; i < m->nslots && i < max; i++)
        cr__role_read(&m->slots[i].clock, now, &workers[i]);
    return m->nslots;
}

const struct cr_model_ops cr__model_proactor_ops = {
    .name = "proactor",
    .create = proactor_create,
    .start = proactor_start,
    .stop = proactor_stop,
    .wait = proactor_wait,
    .destroy = proactor_destroy,
    .stats = proactor_stats,
};
