/*
 * lf_deferred.c - deferred promotion for the Leader/Followers pool
 * (promotion_delay_us > 0, lifo only) and its watchdog thread. Called by
 * lf_order_locked.c (cr__lf_defer_or_offer, from a leader's unlead) and by
 * lf_pool.c (the retake after a handler, lifecycle, statistics); the
 * watchdog runs on a thread of its own. Owns the watch timers, the stop
 * eventfd and the watchdog thread; state lives in struct lf_lead under the
 * group lock (lf_pool_internal.h).
 *
 * Waking a follower costs more than most small handlers, and the follower is
 * only insurance against a handler that blocks. So with a delay a leader that
 * takes an event wakes nobody: it marks its reactor `deferred` (turn_ns: when
 * it took the event) and dispatches; coming back, it (or any rejoining
 * thread) leads again, or takes the next fetched event at once
 * (cr__lf_take_deferred). A turn deferred for a delay (its handler blocks),
 * or one whose fetched batch has waited a delay (more work than one thread
 * keeps up with), is offered to a follower as usual: by the leader itself
 * when the batch is late as it takes the event, else by the watchdog.
 *
 * The watchdog sleeps on one timer per reactor (a timerfd), which deferring
 * leaders push back: a leader that defers makes sure the timer goes off
 * within a delay and no sooner than half a delay. So while turns are quick
 * the timer never goes off and the watchdog never wakes (a periodic look
 * would cost a shared machine's load generator measurably; see
 * docs/design/lf_pool.md). When the timer goes off, the watchdog offers a
 * turn that is late, or sets the timer for when it will be. Invariant (the
 * deferred clause of the hand-over invariant in lf_order_locked.c): a
 * deferred reactor's timer goes off within a delay of its deferred turn. So
 * a blocking handler holds the other handles for one delay (plus the
 * wake-up); handlers that block as a rule want no delay.
 *
 * Lock order: a group lock, then a reactor's lock (cr__reactor_take);
 * timerfd_settime only under the group lock.
 */
#include <cabrank/clock.h>
#include <cabrank/lf_pool.h>

#include "demux/reactor_internal.h"
#include "os/clock_internal.h"
#include "pool/lf_order_internal.h"
#include "pool/lf_pool_internal.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* Sets r's watch timer to go off at `at` (a cr_clock_now_ns() time, not 0).
 * Caller holds r's group lock. 0 or -errno. */
static int set_look(struct lf_lead *l, uint64_t at)
{
    struct itimerspec its = {
        .it_value = {.tv_sec = (time_t)(at / CR_NSEC_PER_SEC),
                     .tv_nsec = (long)(at % CR_NSEC_PER_SEC)},
    };

    if (timerfd_settime(l->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
        return -errno;
    l->look_ns = at;
    return 0;
}

/*
 * Whether the leader of r may defer the turn of an event taken at ev's time:
 * its batch has not waited a delay, and r's watch timer goes off within a
 * delay (set for a delay from now unless it goes off half a delay from now
 * or later: pushed back at most twice a delay). Caller holds r's group lock.
 */
static bool may_defer(struct cr_lf_pool *p, struct lf_lead *l, const struct cr_reactor_event *ev)
{
    uint64_t now = ev->taken_ns;

    if (ev->backlog_ns != 0 && now - ev->backlog_ns >= p->delay_ns)
        return false;
    if (l->look_ns >= now + p->delay_ns / 2)
        return true;
    /* A timer we cannot set would leave the turn unwatched: promote. */
    return set_look(l, now + p->delay_ns) == 0;
}

/* Marks r deferred when a follower is parked to cover it, none is on its way
 * and may_defer allows it; else offers the turn to a follower. */
struct lf_slot *cr__lf_defer_or_offer(struct cr_lf_pool *p, struct lf_group *g, unsigned r,
                                      const struct cr_reactor_event *ev)
{
    struct lf_lead *l = &p->lead[r];

    if (p->delay_ns != 0 && g->head != 0 && l->pending == LF_NO_SLOT && may_defer(p, l, ev)) {
        /* Deferred: r's timer covers it (see the top of the file). */
        l->deferred = true;
        l->turn_ns = ev->taken_ns;
        __atomic_store_n(&l->deferrals, l->deferrals + 1, __ATOMIC_RELAXED);
        return NULL;
    }
    l->deferred = false; /* offered, or nobody parked to offer it to */
    return cr__lf_offer_turn(p, g, r);
}

/*
 * Takes the next event r has fetched already, the turn deferred anew or
 * offered as unlead does (cr__lf_defer_or_offer), without leading r in
 * between: the whole of a lead and an unlead when no thread took r meanwhile
 * (its turn is still deferred, nobody leads it or was woken for it), at one
 * group lock instead of two and none of the hand-over's atomics. false, with
 * nothing taken, when r is not so, the frame ends, or nothing is fetched. The
 * take runs at the reading the handler lent (cr_clock_end_ns), if it lent one.
 */
bool cr__lf_take_deferred(struct cr_lf_pool *p, struct lf_slot *s, const struct lf_frame *f,
                          unsigned r, struct cr_reactor_event *ev)
{
    struct lf_group *g = &p->groups[s->group];
    struct lf_lead *l = &p->lead[r];
    struct lf_slot *w = NULL;
    uint64_t now = 0;
    bool taken = false;

    if (p->delay_ns == 0 || !p->ops->defers)
        return false;
    cr_mutex_lock(&g->lock);
    /* Relaxed: lead[] changes only under g->lock, held. The reactor's lock
     * comes after the group lock (lock order, top of the file). */
    if (l->deferred && l->pending == LF_NO_SLOT &&
        __atomic_load_n(&l->slot, __ATOMIC_RELAXED) == LF_NO_SLOT &&
        lf_leave_reason(p, f) == LF_STAY &&
        (now = cr__clock_end_take(), cr__reactor_take(p->reactors[r], 0, false, &now, ev) > 0)) {
        taken = true;
        __atomic_store_n(&l->retakes, l->retakes + 1, __ATOMIC_RELAXED);
        w = cr__lf_defer_or_offer(p, g, r, ev);
    }
    cr_mutex_unlock(&g->lock);
    cr__lf_wake_pending(w);
    return taken;
}

/* The group that leads reactor r: the one group, or r's own (see
 * init_group in lf_pool.c). */
static struct lf_group *group_of(struct cr_lf_pool *p, unsigned r)
{
    return &p->groups[p->ngroups == 1 ? 0 : r];
}

/*
 * r's watch timer went off: offers r's turn to a follower if it is deferred
 * and late (taken a delay ago, or its fetched batch has waited as long),
 * else sets the timer for when it will be. Not deferred: the timer stays
 * unset until a leader defers again.
 */
static void look(struct cr_lf_pool *p, unsigned r)
{
    struct lf_lead *l = &p->lead[r];
    struct lf_group *g = group_of(p, r);
    struct lf_slot *f = NULL;
    uint64_t now = cr_clock_now_ns();

    __atomic_fetch_add(&p->looks, 1, __ATOMIC_RELAXED);
    cr_mutex_lock(&g->lock);
    if (l->deferred) {
        uint64_t due = l->turn_ns + p->delay_ns;
        uint64_t since = cr__reactor_backlog_since(p->reactors[r]);

        if (since != 0 && since + p->delay_ns < due)
            due = since + p->delay_ns;
        /* A timer we cannot set would leave the turn unwatched: offer it. */
        if (now >= due || set_look(l, due) < 0) {
            f = cr__lf_offer_turn(p, g, r);
            if (f != NULL)
                __atomic_store_n(&l->takeovers, l->takeovers + 1, __ATOMIC_RELAXED);
        }
    }
    cr_mutex_unlock(&g->lock);
    cr__lf_wake_pending(f);
}

static bool is_stopping(const struct cr_lf_pool *p)
{
    /* acquire pairs with the release store in cr_lf_pool_stop. */
    return __atomic_load_n(&p->stopping, __ATOMIC_ACQUIRE) != 0;
}

static void *watchdog_main(void *arg)
{
    struct cr_lf_pool *p = arg;
    struct pollfd *fds = p->wd_fds;

    while (!is_stopping(p)) {
        if (poll(fds, p->nreactors + 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            cr__lf_pool_fail(p, "watchdog poll", -errno);
            break;
        }
        for (unsigned r = 0; r < p->nreactors; r++) {
            uint64_t expirations;

            if (fds[r + 1].revents == 0)
                continue;
            /* EAGAIN: a leader set the timer again since it went off;
             * it will go off then. */
            if (read(fds[r + 1].fd, &expirations, sizeof(expirations)) > 0)
                look(p, r);
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------ lifecycle */

void cr__lf_watch_fini(struct cr_lf_pool *p)
{
    for (unsigned r = 0; r < p->nreactors; r++) {
        if (p->lead[r].timer_fd >= 0)
            (void)close(p->lead[r].timer_fd);
        p->lead[r].timer_fd = -1;
    }
    if (p->wd_stop_fd >= 0)
        (void)close(p->wd_stop_fd);
    p->wd_stop_fd = -1;
    free(p->wd_fds);
    p->wd_fds = NULL;
}

int cr__lf_watch_init(struct cr_lf_pool *p)
{
    if (p->delay_ns == 0)
        return 0;
    p->wd_fds = calloc(p->nreactors + 1, sizeof(*p->wd_fds));
    if (p->wd_fds == NULL)
        return -ENOMEM;
    p->wd_stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (p->wd_stop_fd < 0)
        return -errno;
    p->wd_fds[0] = (struct pollfd){.fd = p->wd_stop_fd, .events = POLLIN};
    for (unsigned r = 0; r < p->nreactors; r++) {
        int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);

        if (fd < 0)
            return -errno;
        p->lead[r].timer_fd = fd;
        p->wd_fds[r + 1] = (struct pollfd){.fd = fd, .events = POLLIN};
    }
    return 0;
}

int cr__lf_watchdog_start(struct cr_lf_pool *p)
{
    int rc;

    if (p->delay_ns == 0)
        return 0;
    rc = pthread_create(&p->wd_tid, NULL, watchdog_main, p);
    if (rc != 0)
        return -rc;
    p->wd_started = true;
    return 0;
}

void cr__lf_watchdog_stop(struct cr_lf_pool *p)
{
    if (p->wd_stop_fd >= 0) {
        uint64_t one = 1;

        /* Only fails when the count would overflow: it is awake then. */
        (void)!write(p->wd_stop_fd, &one, sizeof(one));
    }
}

int cr__lf_watchdog_join(struct cr_lf_pool *p)
{
    int rc;

    if (!p->wd_started)
        return 0;
    rc = pthread_join(p->wd_tid, NULL);
    p->wd_started = false;
    return -rc;
}

/* ------------------------------------------------------------------ statistics */

uint64_t cr__lf_pool_looks(const struct cr_lf_pool *p)
{
    /* Relaxed: a statistic. */
    return __atomic_load_n(&p->looks, __ATOMIC_RELAXED);
}

uint64_t cr__lf_pool_retakes(const struct cr_lf_pool *p)
{
    uint64_t sum = 0;

    /* Relaxed: statistics, stored under the group lock (struct lf_lead). */
    for (unsigned r = 0; r < p->nreactors; r++)
        sum += __atomic_load_n(&p->lead[r].retakes, __ATOMIC_RELAXED);
    return sum;
}

void cr_lf_pool_deferrals(const struct cr_lf_pool *p, uint64_t *deferred, uint64_t *taken_over)
{
    uint64_t d = 0;
    uint64_t t = 0;

    /* Relaxed: statistics (see struct lf_lead). */
    for (unsigned r = 0; r < p->nreactors; r++) {
        d += __atomic_load_n(&p->lead[r].deferrals, __ATOMIC_RELAXED);
        t += __atomic_load_n(&p->lead[r].takeovers, __ATOMIC_RELAXED);
    }
    if (deferred != NULL)
        *deferred = d;
    if (taken_over != NULL)
        *taken_over = t;
}
