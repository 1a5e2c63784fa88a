/*
 * acceptor.c - accepts connections on a listening socket registered one-shot
 * with a cr_reactor and hands each new fd to the owner's callback (libuv's
 * uv__server_io, nginx's ngx_event_accept). Used by every reactive model and
 * the examples. The accept handler and the back-off timer run on whichever
 * thread handles the reactor's events; pause and resume come from any thread
 * (a connection limit reached or left by a worker). Borrows the reactor and
 * the listening socket; owns only itself and its back-off timer.
 *
 * The listener is registered with CR_REACTOR_ONESHOT, so the reactor disarms
 * it when it hands out its event and only the handler re-arms it: under
 * Leader/Followers at most one thread accepts at a time. `running` makes that
 * hold even when pause, resume or the timer re-arm the listener while a taken
 * event still waits for dispatch (a second dispatch then does nothing).
 *
 * Running out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM)
 * leaves the connection in the kernel's queue, so the listener stays readable:
 * re-arming at once would spin. The handler instead leaves it disarmed and
 * sets a timer, doubling from backoff_min_ms to backoff_max_ms while accept
 * keeps failing; the timer re-arms it (nginx disables accept events for
 * 500 ms in the same case).
 *
 * Lock order: a->lock, then the reactor's lock (a leaf lock the reactor never
 * holds while it runs our handler or timer), so reactor calls are made with
 * a->lock held and the arming state cannot change between decision and call.
 * a->lock is never held while the owner's callback runs: it may call pause.
 */
#include <cabrank/acceptor.h>
#include <cabrank/clock.h>
#include <cabrank/listener.h>
#include <cabrank/log.h>
#include <cabrank/reactor.h>

#include "os/sync_internal.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_BATCH          64
#define DEFAULT_BACKOFF_MIN_MS 10u
#define DEFAULT_BACKOFF_MAX_MS 1000u
/* At most one warning per this long while accepts keep failing. */
#define WARN_INTERVAL_NS CR_NSEC_PER_SEC

struct cr_acceptor {
    /* Immutable after create. */
    struct cr_reactor *r;
    int fd;
    int batch;
    unsigned backoff_min_ms;
    unsigned backoff_max_ms;
    cr_acceptor_fn *fn;
    void *arg;

    /* Only the thread inside on_listener (one at a time, see `running`). */
    unsigned backoff_ms; /* the next back-off */
    uint64_t last_warn_ns;
    unsigned warn_suppressed;

    struct cr_mutex lock;
    /* Protected by lock. */
    bool paused;      /* by cr_acceptor_pause() */
    bool backing_off; /* a back-off timer is pending */
    bool armed;       /* the listener is included in the reactor's wait */
    bool running;     /* a thread is inside on_listener */
    uint64_t timer_id;

    /* Statistics: relaxed atomics, read by the getters, order nothing. */
    uint64_t accepted;
    uint64_t backoffs;
};

static bool is_out_of_resources(int err)
{
    return err == -EMFILE || err == -ENFILE || err == -ENOBUFS || err == -ENOMEM;
}

/* Re-arms the listener. Caller holds a->lock. */
static void arm(struct cr_acceptor *a)
{
    int err;

    cr_mutex_assert_held(&a->lock);
    err = cr_reactor_reactivate(a->r, a->fd);
    if (err < 0) {
        /* -ENOENT: the fd was removed behind our back; nothing to re-arm. */
        CR_LOG(CR_LOG_ERROR, "acceptor: reactivating listener fd %d: %s", a->fd, strerror(-err));
        return;
    }
    a->armed = true;
}

/* Disarms the listener. Caller holds a->lock. */
static void disarm(struct cr_acceptor *a)
{
    int err;

    cr_mutex_assert_held(&a->lock);
    err = cr_reactor_deactivate(a->r, a->fd);
    if (err < 0)
        CR_LOG(CR_LOG_ERROR, "acceptor: deactivating listener fd %d: %s", a->fd, strerror(-err));
    a->armed = false;
}

static bool is_paused(struct cr_acceptor *a)
{
    bool paused;

    cr_mutex_lock(&a->lock);
    paused = a->paused;
    cr_mutex_unlock(&a->lock);
    return paused;
}

static void on_backoff_timer(struct cr_reactor *r, uint64_t timer_id, void *arg)
{
    struct cr_acceptor *a = arg;

    CR_UNUSED(r);
    cr_mutex_lock(&a->lock);
    /* A cancelled timer can still be dispatched once it was taken; the id
     * tells it from the current one. */
    if (a->backing_off && a->timer_id == timer_id) {
        a->backing_off = false;
        a->timer_id = 0;
        if (!a->paused && !a->running)
            arm(a);
    }
    cr_mutex_unlock(&a->lock);
}

/* Logs a failed accept at most once per WARN_INTERVAL_NS. On the handler's
 * thread only. */
static void warn_accept_failed(struct cr_acceptor *a, int err, unsigned pause_ms)
{
    uint64_t now = cr_clock_now_ns();

    if (a->last_warn_ns != 0 && now - a->last_warn_ns < WARN_INTERVAL_NS) {
        a->warn_suppressed++;
        return;
    }
    CR_LOG(is_out_of_resources(err) ? CR_LOG_WARN : CR_LOG_ERROR,
           "accept4() failed: %s; pausing accepts for %u ms (%u more failures not logged)",
           strerror(-err), pause_ms, a->warn_suppressed);
    a->last_warn_ns = now;
    a->warn_suppressed = 0;
}

/*
 * Leaves the listener disarmed and sets the back-off timer. Any error but
 * -EAGAIN gets here: the listener stays readable, so re-arming it at once
 * would spin. Caller holds a->lock.
 */
static void back_off(struct cr_acceptor *a, int accept_err)
{
    unsigned delay = a->backoff_ms;
    int err;

    cr_mutex_assert_held(&a->lock);
    if (is_out_of_resources(accept_err))
        __atomic_fetch_add(&a->backoffs, 1, __ATOMIC_RELAXED);
    warn_accept_failed(a, accept_err, delay);
    a->backoff_ms = delay >= a->backoff_max_ms / 2 ? a->backoff_max_ms : delay * 2;
    err = cr_reactor_timer_add(a->r, delay, on_backoff_timer, a, &a->timer_id);
    if (err < 0) {
        /* No timer, no way back but re-arming: better spinning than deaf. */
        CR_LOG(CR_LOG_ERROR, "acceptor: back-off timer: %s; accepting again at once",
               strerror(-err));
        if (!a->paused)
            arm(a);
        return;
    }
    a->backing_off = true;
}

static void on_listener(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct cr_acceptor *a = arg;
    int err = -EAGAIN;

    CR_UNUSED(r);
    CR_UNUSED(fd);
    CR_UNUSED(events);
    cr_mutex_lock(&a->lock);
    /* The reactor disarmed the one-shot listener when it took this event. */
    a->armed = false;
    if (a->running || a->backing_off) {
        /* A stale event: the running handler, or the timer, re-arms it. */
        cr_mutex_unlock(&a->lock);
        return;
    }
    a->running = true;
    cr_mutex_unlock(&a->lock);

    for (int i = 0; i < a->batch; i++) {
        int cfd;

        /* The callback may have paused us at a connection limit. */
        if (is_paused(a))
            break;
        err = cr_listener_accept(a->fd, &cfd);
        if (err < 0)
            break;
        a->backoff_ms = a->backoff_min_ms;
        __atomic_fetch_add(&a->accepted, 1, __ATOMIC_RELAXED);
        a->fn(a, cfd, a->arg);
    }

    cr_mutex_lock(&a->lock);
    a->running = false;
    if (err < 0 && err != -EAGAIN)
        back_off(a, err);
    else if (!a->paused)
        arm(a); /* level-triggered: a full batch comes back at once */
    cr_mutex_unlock(&a->lock);
}

int cr_acceptor_create(struct cr_acceptor **out, struct cr_reactor *r,
                       const struct cr_acceptor_config *cfg, cr_acceptor_fn *fn, void *arg)
{
    struct cr_acceptor *a;
    int err;

    *out = NULL;
    if (r == NULL || cfg == NULL || fn == NULL || cfg->batch < 0)
        return -EINVAL;
    a = calloc(1, sizeof(*a));
    if (a == NULL)
        return -ENOMEM;
    err = cr_mutex_init(&a->lock);
    if (err < 0)
        goto out_free;
    a->r = r;
    a->fd = cfg->listen_fd;
    a->batch = cfg->batch == 0 ? DEFAULT_BATCH : cfg->batch;
    a->backoff_min_ms = cfg->backoff_min_ms == 0 ? DEFAULT_BACKOFF_MIN_MS : cfg->backoff_min_ms;
    a->backoff_max_ms = cfg->backoff_max_ms == 0 ? DEFAULT_BACKOFF_MAX_MS : cfg->backoff_max_ms;
    if (a->backoff_max_ms < a->backoff_min_ms)
        a->backoff_max_ms = a->backoff_min_ms;
    a->backoff_ms = a->backoff_min_ms;
    a->fn = fn;
    a->arg = arg;
    /* Armed from the add on: another thread may run on_listener before we
     * return, so everything it reads is set above. */
    a->armed = true;
    err = cr_reactor_add(r, a->fd, CR_EV_READ, CR_REACTOR_ONESHOT, on_listener, a);
    if (err < 0)
        goto out_fini_lock;
    *out = a;
    return 0;

out_fini_lock:
    cr_mutex_fini(&a->lock);
out_free:
    free(a);
    return err;
}

void cr_acceptor_destroy(struct cr_acceptor *a)
{
    int err;

    if (a == NULL)
        return;
    cr_mutex_lock(&a->lock);
    /* -ENOENT: it was taken for dispatch; by contract no thread still runs
     * the reactor's events, so it never will be. */
    if (a->backing_off && cr_reactor_timer_cancel(a->r, a->timer_id) < 0)
        CR_LOG(CR_LOG_DEBUG, "acceptor: back-off timer already taken");
    a->backing_off = false;
    err = cr_reactor_remove(a->r, a->fd);
    if (err < 0)
        CR_LOG(CR_LOG_ERROR, "acceptor: removing listener fd %d: %s", a->fd, strerror(-err));
    cr_mutex_unlock(&a->lock);
    cr_mutex_fini(&a->lock);
    free(a);
}

void cr_acceptor_pause(struct cr_acceptor *a)
{
    cr_mutex_lock(&a->lock);
    if (!a->paused) {
        a->paused = true;
        if (a->armed)
            disarm(a);
    }
    cr_mutex_unlock(&a->lock);
}

void cr_acceptor_resume(struct cr_acceptor *a)
{
    cr_mutex_lock(&a->lock);
    if (a->paused) {
        a->paused = false;
        /* A running handler re-arms on its way out; a pending back-off on
         * its timer. */
        if (!a->armed && !a->running && !a->backing_off)
            arm(a);
    }
    cr_mutex_unlock(&a->lock);
}

uint64_t cr_acceptor_accepted(const struct cr_acceptor *a)
{
    /* Pairs with the relaxed increment in on_listener: a count, no data. */
    return __atomic_load_n(&a->accepted, __ATOMIC_RELAXED);
}

uint64_t cr_acceptor_backoffs(const struct cr_acceptor *a)
{
    /* Pairs with the relaxed increment in back_off. */
    return __atomic_load_n(&a->backoffs, __ATOMIC_RELAXED);
}
