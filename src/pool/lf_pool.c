/*
 * lf_pool.c - the Leader/Followers thread pool of POSA2 (unbound handle/thread
 * association) over one or more cr_reactors. Only a reactor's leader calls
 * cr_reactor_next() on it; on an event the leader hands the leadership on
 * (promotes a follower, or marks the reactor leaderless), then dispatches the
 * event itself and rejoins. Used by the lf model, the bound pool and the
 * transaction gateway; runs on the pool's threads, on outside threads inside
 * cr_lf_pool_join() and, nested, inside handlers that call cr_lf_pool_wait().
 * Owns its threads and synchronizers; borrows the reactors.
 *
 * Slots. Every participant has a slot: the pool threads 0..threads-1, then
 * JOIN_SLOTS slots that cr_lf_pool_join() lends to outside threads (not
 * reported by cr_lf_pool_stats; -EBUSY when all are lent). A slot belongs to
 * group idx % ngroups. A group is one Leader/Followers group: one follower
 * structure and the reactors its threads lead. shared_followers false gives a
 * group per reactor (threads split evenly); true gives one group leading every
 * reactor (the "multiple leaders" variant): a rejoining thread leads any
 * leaderless reactor it may take (see below), a woken follower the reactor
 * it was woken for, or another it may take if that one was taken meanwhile.
 *
 * Promotion orders. native, lifo, fifo and priority are monitors (POSA2
 * implementation activities 3-5): the group lock guards the group's follower
 * structure and its reactors' leaders.
 *   native   followers wait on the group's one condition variable. Promote =
 *            mark the reactor leaderless and signal it (counted as a
 *            promotion when a follower was parked); whichever thread gets the
 *            lock first (a woken follower or a rejoining thread) leads.
 *   lifo     followers wait on their own slot's condition variable (with the
 *   fifo     group lock), linked in a list: pushed at the head (lifo), the
 *   priority tail (fifo) or in priority order (highest first; among equal
 *            priorities the most recent first). Promote = mark the reactor
 *            leaderless, unlink the first follower, record it as the
 *            reactor's pending follower and wake it (offer_turn) - unless a
 *            pending follower is on its way to that reactor already: then
 *            nobody more is woken. The woken follower leads if the reactor
 *            is still leaderless when it runs. A thread that rejoins before
 *            that takes the turn if the order would have chosen it over the
 *            pending follower had it been parked: lifo always (it ran last),
 *            priority unless the pending follower outranks it, fifo never
 *            (the pending follower waited longer). A follower that finds its
 *            turn taken parks again: lifo and priority like a newcomer (it
 *            has just run), fifo back at the head (it still waited longest).
 *   lifo-lockfree  the Apache leader MPM design with the lifo rule above;
 *            see below.
 * So, for the turn a leader gives up while followers are parked, each order
 * guarantees who takes it: lifo, the follower that parked last when the turn
 * is offered, unless a thread rejoins before that follower runs (then the
 * rejoining thread: the most recently active thread leads); fifo, the
 * follower that has waited longest, always (a rejoining thread queues behind
 * it); priority, the highest-priority follower when the turn is offered,
 * unless a thread of at least its priority rejoins before it runs; native,
 * whichever thread the OS lets take the lock first. With no follower parked,
 * the first thread to rejoin leads, under every order.
 *
 * Why not hand the reactor to the woken follower directly (lead[r] = it,
 * as this file did before, and as POSA2 and the Apache design do): under
 * load that costs a wake and a park on every event. The thread that has just
 * processed an event comes back, running and cache-warm, to find the reactor
 * held by a follower that is not running yet, so it parks; the next event
 * wakes a follower again. bench/pools (64 clients, 4 threads, 2 cores)
 * measured about 1 context switch per request for lifo, fifo, priority and
 * lifo-lockfree against native's 0.16-0.25, and 65-70% of native's
 * throughput. Letting the running thread lead, and waking nobody while a
 * woken follower is on its way, brings lifo, priority and lifo-lockfree to
 * 0.13-0.15 switches per request and native's throughput or more. The
 * price: a wake can be in vain (the woken follower parks again), and with
 * one client, where the leader comes back about when the follower it woke
 * would run, lifo takes its turn back about half the time: its p50 rose from
 * 8.6 us to 9.5-12.5, native's level (priority stays at 8.6: its rejoining
 * thread is often outranked). Variants tried and measured: forbidding a
 * leader to take back the turn it has just offered kept 8.6 us but doubled
 * or tripled the context switches under load; deferring to a woken follower
 * that already runs (lifo-lockfree) changed nothing, in the races lost it
 * has not run yet; taking a turn back only while another thread processes
 * was inconclusive within the noise of a shared 2-core machine.
 * fifo keeps its meaning, so its hand-off stays strict and it pays the wake
 * per event (0.8-0.9 switches per request).
 * What is not traded is promptness: the wake is sent when the leader gives
 * its turn up, before it dispatches, so a handler that blocks (a database
 * commit) never makes its reactor wait for a processing thread to come back
 * (the hand-over invariant below; I3 for lifo-lockfree).
 *
 * Deferred promotion (promotion_delay_us > 0; lifo only: a thread back from
 * its event leads again, which is lifo's rule, and which fifo and priority
 * would break).
 * Even at 0.1 wakes per event, waking a follower costs more than most
 * static-file handlers: cabrank-httpd on hello.txt (2 threads, wrk on the
 * same 2 cores) measured 119k req/s at 8.5 us CPU per request with a wake
 * per turn given up, and 178k at 5.4 us with none, as with one thread. The
 * follower is insurance against a handler that blocks, so with a delay a
 * leader that takes an event wakes nobody: it marks its reactor `deferred`
 * (turn_ns: when it took the event) and dispatches; coming back, it (or any
 * rejoining thread) leads again. A turn deferred for a delay (its handler
 * blocks), or one whose fetched batch has waited a delay (more work than one
 * thread keeps up with), is offered to a follower as usual: by the leader
 * itself when the batch is late as it takes the event, else by a watchdog
 * thread. The watchdog sleeps on one timer per reactor (a timerfd), which
 * the deferring leaders push back: a leader that defers makes sure the timer
 * goes off within a delay and no sooner than half a delay. So while turns
 * are quick the timer never goes off, and the watchdog never wakes. Looking
 * every delay instead (as this file once did) woke it 1000 times a second at
 * 1 ms; on a 2-core machine shared with the load generator any such thread
 * cost wrk about 4% of its req/s (README, "Deferred promotion"). When the
 * timer goes off, the watchdog offers a turn that is late, or sets the timer
 * for when the turn will be. So a blocking handler holds the other handles
 * for one delay (plus the wake-up) instead of not at all. Handlers that
 * block as a rule (a database commit) want no delay.
 *
 * Hand-over invariant (mutex orders): each reactor r has a leader, or a
 * pending follower (woken, so runnable, and it re-checks r when it runs),
 * or its group has no parked follower, or (with a delay) r is deferred and
 * r's timer goes off within a delay of the deferred turn: the watchdog then
 * offers the turn, or sets the timer for when it is due, unless a thread
 * leads r meanwhile. unlead_locked restores it through
 * offer_turn; a rejoining thread parks only when every leaderless reactor it
 * could lead has a pending follower; a pending follower stops being one only
 * under the group lock, leading r if r is free; and nothing else makes a
 * reactor leaderless. Hence, while followers are parked, a reactor whose
 * leader dispatches a handler that blocks is led again as soon as one woken
 * thread runs (test: parked_follower_takes_over_while_a_handler_blocks).
 *
 * The lock-free order. One 64-bit word per group, changed only by CAS:
 *
 *     bits 63..32  tag, +1 on every successful CAS
 *     bit  31      LEADER: the group's reactor has a leader (the "baton")
 *     bit  30      PENDING: a thread is on its way to the baton (the "wake
 *                  token"): a popper resolving a slot, or a woken slot
 *     bits 29..0   top of the idle stack: slot index + 1, 0 = empty
 *
 * plus, per slot, the stack link lf_next (index + 1) and a state: RUNNING (not
 * on the stack), IDLE (on the stack, its thread asleep on its own mutex and
 * condvar: the only locks on this path, each used by one thread and its
 * waker), LEFT (on the stack, but its thread went away: notified, timed out
 * or stopping) and PROMOTED (popped and woken: it holds PENDING). A rejoining
 * thread either sets LEADER on a word without it (and leads; a PENDING set
 * stays its holder's), or pushes itself on a word with it (and sleeps). A
 * leader giving up its turn clears LEADER; if PENDING is clear and the stack
 * is not empty, the same CAS pops the top slot and sets PENDING. The popper
 * resolves the popped slot with a CAS on its state: IDLE -> PROMOTED (wake
 * it; PENDING is now its) or LEFT -> RUNNING (skip it; pop the next while
 * LEADER stays clear, or drop PENDING once the stack is empty or LEADER is
 * set). A woken slot, once it runs, sets LEADER and clears PENDING (it
 * leads) or, finding LEADER set by a rejoining thread, pushes itself back on
 * top and clears PENDING, in one CAS. A thread whose slot is LEFT re-parks it
 * with LEFT -> IDLE instead of pushing it twice; exactly one of that CAS and
 * the popper's wins (it does not look for a free baton then: the stack is not
 * empty, so LEADER or PENDING is set, I2, and their holders see to it).
 *
 * Proof sketch (lock-free order):
 *  I1 At most one leader per reactor. The baton is the LEADER bit: it is set
 *     only by a CAS that saw it clear (one winner: a rejoining thread or a
 *     woken slot) and cleared only by its holder when its turn ends. Every
 *     thread that calls cr_reactor_next holds the baton (checked at run
 *     time: move_lead's CAS on lead[r] asserts).
 *  I2 LEADER and PENDING both clear => the stack is empty, in every state of
 *     the word. A push needs LEADER set and keeps it; the CASes that can
 *     leave both clear need top == 0 (a leader that finds PENDING clear and
 *     the stack not empty pops instead, setting PENDING; PENDING's holder
 *     drops it with LEADER clear only on an empty stack). So a thread
 *     finishing concurrently cannot push itself believing someone will come
 *     when nobody will: the CASes on the one word are ordered, and whichever
 *     comes second sees the other's result (the "pending" race of the
 *     Apache design, closed with no spinning).
 *  I3 No follower is stranded, and no turn waits for a processing thread.
 *     While the stack is not empty, LEADER or PENDING is set (I2). LEADER's
 *     holder gives it up after its next event, or on stop, timeout or
 *     notify, always through unlead_lockfree, which pops (taking PENDING) or
 *     leaves the stack to PENDING's holder. PENDING's holder is a running
 *     popper (pass_pending: each step wakes an IDLE slot, removes a LEFT
 *     one, or drops PENDING under a set LEADER or on an empty stack), or a
 *     PROMOTED slot whose thread was signalled after its state changed (no
 *     lost wake-up: the waker takes the sleeper's mutex, under which the
 *     sleeper checks its state) and, once running, leads or pushes itself
 *     under a set LEADER. So a turn given up while followers sleep is taken
 *     by a thread that is runnable, never one inside a handler. LEFT slots
 *     are skipped, so a follower that went away never holds a token. Stop
 *     wakes every slot and every reactor.
 *  I4 No ABA. A popper reads top and top's lf_next, then CASes. Were top
 *     popped and pushed again meanwhile (with another lf_next), each of those
 *     changes was a successful CAS that incremented the tag, so the popper's
 *     CAS fails and it retries; likewise a push or a flag change over a word
 *     that went A -> B -> A. The 32-bit tag would have to wrap exactly (2^32
 *     successful CAS) inside one load-CAS window. (Here only PENDING's holder
 *     pops - a leader pops only in the CAS that sets PENDING - so that
 *     interleaving cannot even be built today; the tag keeps the word safe
 *     without leaning on that.)
 *
 * Only one reactor per lock-free group: lifo-lockfree with several reactors
 * needs shared_followers false (one word per group); shared_followers true is
 * -EINVAL for it.
 *
 * Hybrid waits (bound variant, "hybrid client/servers"): cr_lf_pool_wait()
 * runs the same loop as a pool thread, nested on the handler's stack, in a
 * frame that also ends when its waiter is notified or its timeout passes. A
 * notifier sets w->done, then wakes the waiting thread where it is: its own
 * condvar (the group condvar, broadcast, for native) if it follows, its
 * reactor (cr_reactor_wake) if it leads; a processing thread sees done when
 * it comes back, and so does a follower already woken for a turn, once it
 * has taken or lost that turn. done (seq_cst store, then seq_cst load of
 * `leading`) and a leader's `leading` (seq_cst store, then seq_cst load of
 * done) form a Dekker pair: the leader sees done, or the notifier sees it
 * leading and wakes the reactor. A leader whose frame ends gives up its turn
 * like after an event.
 *
 * Lock order: a group lock, or (lock-free order) a slot's mutex, then a
 * reactor's lock (cr_reactor_wake and the reactor calls are leaf-locked).
 * Group locks and slot mutexes are never held together, nor two of either,
 * and none is held while a handler runs or while cr_reactor_next waits. A
 * follower woken for a turn is signalled after the lock that published the
 * turn is released, so that it does not wake only to block on that lock.
 * Callers may hold their own locks around cr_lf_pool_notify and
 * cr_lf_pool_stop (the bound pool does): ours come after theirs.
 *
 * A reactor stopped with cr_reactor_stop() returns at once from every wait,
 * so its leader would spin: the pool stops itself instead. A failed wait stops
 * the pool too; cr_lf_pool_join_all() returns its -errno.
 */
#include <cabrank/clock.h>
#include <cabrank/lf_pool.h>
#include <cabrank/log.h>
#include <cabrank/reactor.h>

#include "demux/reactor_internal.h"
#include "os/clock_internal.h"
#include "os/sync_internal.h"
#include "pool/lf_pool_internal.h"
#include "pool/role_internal.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define CACHE_LINE  64
#define JOIN_SLOTS  8
#define NO_SLOT     (-1)
#define MAX_THREADS 65536

/* The lock-free group word. */
#define LF_TOP_MASK UINT64_C(0x3fffffff)
#define LF_PENDING  (UINT64_C(1) << 30)
#define LF_LEADER   (UINT64_C(1) << 31)
#define LF_FLAGS    (LF_LEADER | LF_PENDING)
#define LF_TAG_ONE  (UINT64_C(1) << 32)

enum order {
    ORDER_NATIVE,
    ORDER_LIFO,
    ORDER_FIFO,
    ORDER_PRIORITY,
    ORDER_LOCKFREE,
};

static const char *const order_names[] = {"native",   "lifo",          "fifo",
                                          "priority", "lifo-lockfree", NULL};

/* Lock-free order: where a slot is relative to its group's idle stack. */
enum slot_state {
    SLOT_RUNNING = 0,
    SLOT_IDLE,
    SLOT_LEFT,
    SLOT_PROMOTED,
};

/* Why a frame ends; STAY: it goes on (from follow: the thread now leads). */
enum leave {
    STAY = 0,
    LEAVE_DONE,
    LEAVE_STOP,
    LEAVE_TIMEOUT,
};

/* One run of the loop: a pool thread's life, a join, or a hybrid wait. */
struct frame {
    struct cr_lf_waiter *w; /* NULL: until stop (or deadline) */
    uint64_t deadline;      /* cr_clock_now_ns() time; 0: none */
};

struct lf_slot {
    /* Immutable after create. */
    struct cr_lf_pool *pool;
    unsigned idx;
    unsigned group;
    int priority;
    /* Mutex orders: waited on with the group lock. Lock-free: with mu. */
    pthread_cond_t cv;
    /* Lock-free order: this slot's synchronizer (a leaf lock). */
    struct cr_mutex mu;

    /* Owner thread only: set by pthread_create in start, read by join_all. */
    pthread_t tid;

    /* Protected by the group lock (mutex orders). */
    uint32_t prev; /* follower list links: slot index + 1, 0 = none */
    uint32_t next;
    bool parked;  /* waiting as a follower (listed, or counted in g->parked) */
    int promoted; /* pending: woken for this reactor (unlisted), NO_SLOT: not */

    /* Atomic. The reactor this slot's thread leads, or -1: seq_cst store by
     * the thread, seq_cst load by cr_lf_pool_notify (the Dekker pair with
     * w->done, see the top of the file). */
    int leading;
    /* Atomic (lock-free order): enum slot_state. RUNNING -> IDLE by the
     * thread before its push CAS (relaxed: published by that acq_rel CAS);
     * IDLE -> PROMOTED and LEFT -> RUNNING by a popper, IDLE -> LEFT and
     * LEFT -> IDLE by the thread, all acq_rel CAS pairing with one another;
     * PROMOTED -> RUNNING by the thread (relaxed: nobody else looks at a
     * popped slot), before it leads or pushes itself again. */
    uint32_t state;
    /* Atomic (lock-free order): the slot below on the idle stack. Relaxed:
     * written before the push CAS (release), read after an acquire load of
     * the word; a stale read only makes the pop CAS fail (tag). */
    uint64_t lf_next;
    /* Atomic: a join slot lent out. Acquire CAS in join, release store when
     * it is given back (pairs with the next lender's acquire). */
    int lent;

    /* Statistics: the slot's thread's role clock (role_internal.h: written
     * by that thread, read by cr_lf_pool_stats; they order nothing). */
    struct cr__role_clock clock;
} __attribute__((aligned(CACHE_LINE)));

struct lf_group {
    /* Lock-free order: the group word (layout at the top of the file). Every
     * change is an acq_rel CAS, each pairing with the previous one; loads
     * are acquire. */
    uint64_t word;

    /* Immutable after create: the reactors this group leads. */
    unsigned first;
    unsigned count;

    struct cr_mutex lock;
    pthread_cond_t cv; /* native: all followers wait here */
    /* Protected by lock (mutex orders). */
    uint32_t head; /* follower list: slot index + 1, 0 = empty */
    uint32_t tail;
    unsigned parked; /* followers waiting */

    /* Atomic, relaxed: a statistic. Followers woken for a turn (native:
     * signals sent while followers were parked); some find it taken. */
    uint64_t promotions;
} __attribute__((aligned(CACHE_LINE)));

/* Who leads reactor r: a slot index or NO_SLOT. Changed only by move_lead's
 * acq_rel CAS (each pairs with the previous one), which asserts the change
 * starts from the expected holder: the run-time check of "at most one leader
 * per reactor". Read by cr_lf_pool_stats (relaxed). */
struct lf_lead {
    int slot;
    /* Protected by the group lock (lifo, fifo, priority): the follower woken
     * to take r that has not run yet, or NO_SLOT. */
    int pending;
    /* Protected by the group lock (deferred promotion): r's last leader
     * gave it up and woke nobody, and nobody has led r since; when that
     * turn's event was taken; when r's watch timer goes off (as last set;
     * 0: never set); how many turns were given up so; how many deferred
     * turns the watchdog offered to a follower; how many events the thread
     * back from a deferred turn took without rejoining (take_deferred). The
     * counts are also read without the lock (cr_lf_pool_deferrals, tests):
     * relaxed atomic stores under the lock, relaxed loads without it. */
    bool deferred;
    uint64_t turn_ns;
    uint64_t look_ns;
    uint64_t deferrals;
    uint64_t takeovers;
    uint64_t retakes;
    /* Immutable after create: r's watch timer (a CLOCK_MONOTONIC timerfd,
     * set only under the group lock), -1 without a delay. */
    int timer_fd;
} __attribute__((aligned(CACHE_LINE)));

struct cr_lf_pool {
    /* Immutable after create. */
    enum order order;
    unsigned nthreads;
    unsigned nslots;
    unsigned nreactors;
    unsigned ngroups;
    struct cr_reactor **reactors;
    struct lf_lead *lead;
    struct lf_group *groups;
    struct lf_slot *slots;
    void (*on_thread_start)(unsigned idx, void *arg);
    void (*on_thread_stop)(unsigned idx, void *arg);
    void *thread_arg;
    uint64_t delay_ns; /* deferred promotion; 0: promote at once */

    /* Owner thread only. */
    unsigned started;
    pthread_t wd_tid;
    bool wd_started;

    /* Deferred promotion: an eventfd that wakes the watchdog to stop, -1
     * without a delay (immutable after create); how often the watchdog
     * looked (atomic, relaxed: a statistic). */
    int wd_stop_fd;
    struct pollfd *wd_fds; /* the watchdog's: wd_stop_fd, then the timers */
    uint64_t looks;

    /* Atomic: set once by cr_lf_pool_stop (release), read by every loop
     * (acquire). */
    int stopping;
    /* Atomic: the first failed wait's -errno (relaxed CAS from 0; read by
     * join_all after pthread_join, which orders it). */
    int error;
};

/* The slot of the calling thread while it serves a pool, else NULL. */
static _Thread_local struct lf_slot *tls_slot;

/* ------------------------------------------------------------------ helpers */

static uint64_t deadline_of(int timeout_ms)
{
    uint64_t d;

    if (timeout_ms < 0)
        return 0;
    d = cr_clock_now_ns() + (uint64_t)timeout_ms * CR_NSEC_PER_MSEC;
    return d != 0 ? d : 1;
}

/* The timeout for cr_reactor_next: until the frame's deadline. */
static int next_timeout_ms(const struct frame *f)
{
    uint64_t now;
    uint64_t ms;

    if (f->deadline == 0)
        return -1;
    now = cr_clock_now_ns();
    if (now >= f->deadline)
        return 0;
    ms = (f->deadline - now + CR_NSEC_PER_MSEC - 1) / CR_NSEC_PER_MSEC;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

static int leave_reason(const struct cr_lf_pool *p, const struct frame *f)
{
    /* seq_cst: the second half of the Dekker pair with cr_lf_pool_notify. */
    if (f->w != NULL && __atomic_load_n(&f->w->done, __ATOMIC_SEQ_CST) != 0)
        return LEAVE_DONE;
    /* acquire pairs with the release store in cr_lf_pool_stop. */
    if (__atomic_load_n(&p->stopping, __ATOMIC_ACQUIRE) != 0)
        return LEAVE_STOP;
    if (f->deadline != 0 && cr_clock_now_ns() >= f->deadline)
        return LEAVE_TIMEOUT;
    return STAY;
}

/* Moves the leadership of reactor r from slot `from` to slot `to` (NO_SLOT:
 * none); aborts if r was not `from`'s (two leaders). */
static void move_lead(struct cr_lf_pool *p, unsigned r, int from, int to)
{
    int expected = from;
    /* acq_rel pairs with the previous move_lead of r. */
    bool ok = __atomic_compare_exchange_n(&p->lead[r].slot, &expected, to, false, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED);

    assert(ok && "Leader/Followers: two leaders of one reactor");
    (void)ok;
}

/* Waits on cv, which mu guards, until signalled or deadline (0: none); the
 * caller re-checks its condition. Caller holds mu. */
static void wait_on(pthread_cond_t *cv, struct cr_mutex *mu, uint64_t deadline)
{
    if (deadline == 0)
        cr_cond_wait(cv, mu);
    else
        (void)cr_cond_timedwait(cv, mu, deadline);
}

static struct lf_slot *slot_at(struct cr_lf_pool *p, uint32_t id)
{
    return id != 0 ? &p->slots[id - 1] : NULL;
}

/* Records the first failed wait and stops the pool: the reactor cannot be
 * waited on any more. */
static void fail(struct cr_lf_pool *p, const char *what, int err)
{
    int none = 0;

    if (__atomic_compare_exchange_n(&p->error, &none, err, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
        CR_LOG(CR_LOG_ERROR, "lf_pool: %s failed: %s; stopping the pool", what, strerror(-err));
    cr_lf_pool_stop(p);
}

/* ------------------------------------------------------------------ mutex orders */

/*
 * Links s into g's follower list by the pool's order: lifo at the head, fifo
 * at the tail, priority before the first follower it does not outrank (among
 * equals the most recent first). `again`: s was woken to lead but found its
 * turn taken; fifo puts it back at the head, where it was (the others place
 * it as a newcomer: it has just run). Caller holds g->lock.
 */
static void list_insert(struct cr_lf_pool *p, struct lf_group *g, struct lf_slot *s, bool again)
{
    uint32_t id = s->idx + 1;
    uint32_t before = 0; /* s goes before this slot; 0: at the tail */

    cr_mutex_assert_held(&g->lock);
    if (p->order == ORDER_LIFO || (p->order == ORDER_FIFO && again)) {
        before = g->head;
    } else if (p->order == ORDER_PRIORITY) {
        /* O(followers), but followers are threads: a handful. */
        before = g->head;
        while (before != 0 && slot_at(p, before)->priority > s->priority)
            before = slot_at(p, before)->next;
    }
    s->next = before;
    s->prev = before != 0 ? slot_at(p, before)->prev : g->tail;
    if (s->prev != 0)
        slot_at(p, s->prev)->next = id;
    else
        g->head = id;
    if (before != 0)
        slot_at(p, before)->prev = id;
    else
        g->tail = id;
}

/* Caller holds g->lock. */
static void list_remove(struct cr_lf_pool *p, struct lf_group *g, struct lf_slot *s)
{
    cr_mutex_assert_held(&g->lock);
    if (s->prev != 0)
        slot_at(p, s->prev)->next = s->next;
    else
        g->head = s->next;
    if (s->next != 0)
        slot_at(p, s->next)->prev = s->prev;
    else
        g->tail = s->prev;
    s->prev = 0;
    s->next = 0;
}

/*
 * Whether rejoining thread s may take a leaderless reactor whose turn was
 * offered to the woken follower f: when the order would have chosen s over f
 * had s been parked then. lifo: always (s ran last); priority: unless f
 * outranks s (ties: s, the more recent); fifo: never (f waited longer).
 */
static bool is_ahead_of(const struct cr_lf_pool *p, const struct lf_slot *s,
                        const struct lf_slot *f)
{
    if (p->order == ORDER_LIFO)
        return true;
    if (p->order == ORDER_PRIORITY)
        return s->priority >= f->priority;
    return false;
}

/* A reactor of g that s may lead now, looked for from s's own, or -1: one
 * without a leader whose pending follower, if any, s is ahead of. native
 * has no pending followers. Caller holds g->lock. */
static int find_leaderless(const struct cr_lf_pool *p, const struct lf_group *g,
                           const struct lf_slot *s)
{
    cr_mutex_assert_held(&g->lock);
    for (unsigned k = 0; k < g->count; k++) {
        unsigned r = g->first + (s->idx + k) % g->count;
        int f = p->lead[r].pending;

        /* Relaxed: mutex orders change lead[] only under g->lock, held. */
        if (__atomic_load_n(&p->lead[r].slot, __ATOMIC_RELAXED) == NO_SLOT &&
            (f == NO_SLOT || is_ahead_of(p, s, &p->slots[f])))
            return (int)r;
    }
    return -1;
}

/* Caller holds g->lock. */
static void unpark(struct cr_lf_pool *p, struct lf_group *g, struct lf_slot *s)
{
    cr_mutex_assert_held(&g->lock);
    if (!s->parked)
        return;
    s->parked = false;
    if (p->order == ORDER_NATIVE)
        g->parked--;
    else
        list_remove(p, g, s);
}

/*
 * Offers leaderless reactor r to the first follower in order, unless one is
 * on its way to it already: unlinks it, marks it pending for r and wakes it.
 * Restores "r has a leader, or a pending follower, or g has no parked
 * follower" (the hand-over invariant, see the top of the file). Returns the
 * slot to signal after the lock is released, or NULL. Caller holds g->lock.
 */
static struct lf_slot *offer_turn(struct cr_lf_pool *p, struct lf_group *g, unsigned r)
{
    struct lf_slot *f = slot_at(p, g->head);

    cr_mutex_assert_held(&g->lock);
    if (p->lead[r].pending != NO_SLOT || f == NULL)
        return NULL;
    unpark(p, g, f);
    f->promoted = (int)r;
    p->lead[r].pending = (int)f->idx;
    p->lead[r].deferred = false; /* the pending follower covers r now */
    __atomic_fetch_add(&g->promotions, 1, __ATOMIC_RELAXED);
    return f;
}

/* s leads leaderless r (mutex orders). Caller holds the group lock. */
static void take_lead(struct cr_lf_pool *p, unsigned r, struct lf_slot *s)
{
    move_lead(p, r, NO_SLOT, (int)s->idx);
    p->lead[r].deferred = false;
}

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

/*
 * The leader of r gives up its turn to dispatch ev (lifo, fifo, priority):
 * marks r deferred when the delay allows it (a follower is parked to cover
 * it, none is on its way, may_defer), else offers the turn to a follower.
 * Returns the slot to wake after the lock is released, or NULL. Caller holds
 * r's group lock.
 */
static struct lf_slot *defer_or_offer(struct cr_lf_pool *p, struct lf_group *g, unsigned r,
                                      const struct cr_reactor_event *ev)
{
    struct lf_lead *l = &p->lead[r];

    if (p->delay_ns != 0 && g->head != 0 && l->pending == NO_SLOT && may_defer(p, l, ev)) {
        /* Deferred: r's timer covers it (see the top of the file). */
        l->deferred = true;
        l->turn_ns = ev->taken_ns;
        __atomic_store_n(&l->deferrals, l->deferrals + 1, __ATOMIC_RELAXED);
        return NULL;
    }
    l->deferred = false; /* offered, or nobody parked to offer it to */
    return offer_turn(p, g, r);
}

/* Wakes a follower offer_turn chose. Outside the group lock, so that the
 * woken thread does not run only to block on it; safe because f re-checks
 * `promoted` under the lock before each wait. */
static void wake_pending(struct lf_slot *f)
{
    if (f != NULL)
        cr_cond_signal(&f->cv);
}

/*
 * s takes a lead: LEADER in the role clock from now, read into *led_at; but a
 * thread back from processing stays PROCESSING (*led_at 0) until lead() finds
 * it must wait. A leader that takes an event fetched already leads for the
 * moment between two events, and that moment is not worth a clock reading
 * (a vDSO clock_gettime was some 50 ns in a small request's path here, 1% of
 * its CPU): its time counts as processing.
 */
static void stamp_leader(struct lf_slot *s, uint64_t *led_at)
{
    if (cr__role_is(&s->clock, CR_ROLE_PROCESSING)) {
        *led_at = 0;
        return;
    }
    *led_at = cr_clock_now_ns();
    cr__role_set_at(&s->clock, CR_ROLE_LEADER, *led_at);
}

/*
 * Rejoins the group (implementation activity 4): leads a reactor it may take
 * at once, else waits as a follower until woken for a turn that is still
 * free, or the frame ends. STAY with *r_out when the thread now leads, else
 * why the frame ends.
 */
static int follow_locked(struct cr_lf_pool *p, struct lf_slot *s, const struct frame *f,
                         unsigned *r_out, uint64_t *led_at)
{
    struct lf_group *g = &p->groups[s->group];
    bool again = false;
    int reason;
    int r;

    cr_mutex_lock(&g->lock);
    for (;;) {
        if (s->promoted != NO_SLOT) {
            /* Woken for reactor r (already unlinked). A thread the order
             * puts ahead of us may have taken it meanwhile: then we are a
             * follower again, and park again below. */
            r = s->promoted;
            s->promoted = NO_SLOT;
            assert(p->lead[r].pending == (int)s->idx);
            p->lead[r].pending = NO_SLOT;
            again = true;
            /* Relaxed: lead[] changes only under g->lock, held. */
            if (__atomic_load_n(&p->lead[r].slot, __ATOMIC_RELAXED) == NO_SLOT) {
                take_lead(p, (unsigned)r, s);
                break;
            }
        }
        reason = leave_reason(p, f);
        if (reason != STAY)
            goto out_leave;
        r = find_leaderless(p, g, s);
        if (r >= 0) {
            take_lead(p, (unsigned)r, s);
            break;
        }
        if (!s->parked) {
            s->parked = true;
            if (p->order == ORDER_NATIVE)
                g->parked++;
            else
                list_insert(p, g, s, again);
            /* After parking: a FOLLOWER seen in the stats is in the structure. */
            cr__role_set(&s->clock, CR_ROLE_FOLLOWER);
        }
        wait_on(p->order == ORDER_NATIVE ? &g->cv : &s->cv, &g->lock, f->deadline);
    }
    unpark(p, g, s);
    /* seq_cst: the first half of the Dekker pair with cr_lf_pool_notify. */
    __atomic_store_n(&s->leading, r, __ATOMIC_SEQ_CST);
    stamp_leader(s, led_at);
    cr_mutex_unlock(&g->lock);
    *r_out = (unsigned)r;
    return STAY;

out_leave:
    unpark(p, g, s);
    /* native: a signal meant as a promotion may have woken us (or been taken
     * with a timeout); pass it on so no reactor stays leaderless while others
     * sleep. The other orders never leave while pending (a pending turn is
     * resolved first, above): nothing to pass on. */
    if (p->order == ORDER_NATIVE && g->parked > 0 && find_leaderless(p, g, s) >= 0)
        cr_cond_signal(&g->cv);
    cr_mutex_unlock(&g->lock);
    return reason;
}

/* Ends s's turn as leader of r (activity 5): marks r leaderless and wakes a
 * follower to take it, unless one is on its way (see the top of the file),
 * or, when s goes to dispatch ev (NULL: it leaves, and will not be back to
 * lead) and promotions are deferred, marks r deferred instead. */
static void unlead_locked(struct cr_lf_pool *p, struct lf_slot *s, unsigned r,
                          const struct cr_reactor_event *ev)
{
    struct lf_group *g = &p->groups[s->group];
    struct lf_slot *f = NULL;

    cr_mutex_lock(&g->lock);
    /* seq_cst: see the Dekker pair; the lock orders it against notify too. */
    __atomic_store_n(&s->leading, -1, __ATOMIC_SEQ_CST);
    move_lead(p, r, (int)s->idx, NO_SLOT);
    if (p->order == ORDER_NATIVE) {
        if (g->parked > 0) {
            cr_cond_signal(&g->cv);
            __atomic_fetch_add(&g->promotions, 1, __ATOMIC_RELAXED);
        }
    } else if (ev != NULL) {
        f = defer_or_offer(p, g, r, ev);
    } else {
        f = offer_turn(p, g, r);
    }
    cr_mutex_unlock(&g->lock);
    wake_pending(f);
}

/* Wakes s if it follows, to re-check its frame. A pending follower needs
 * nothing: it was woken, and checks its frame once it has resolved its turn. */
static void kick_locked(struct cr_lf_pool *p, struct lf_slot *s)
{
    struct lf_group *g = &p->groups[s->group];

    cr_mutex_lock(&g->lock);
    if (s->parked) {
        /* native: which waiter a signal wakes is the OS's choice. */
        if (p->order == ORDER_NATIVE)
            cr_cond_broadcast(&g->cv);
        else
            cr_cond_signal(&s->cv);
    }
    cr_mutex_unlock(&g->lock);
}

/* ------------------------------------------------------------------ lock-free order */

/* The next word after old: tag + 1, the given LEADER and PENDING bits, top. */
static uint64_t word_next(uint64_t old, uint64_t flags, uint64_t top)
{
    uint64_t tag = (old & ~(LF_TOP_MASK | LF_FLAGS)) + LF_TAG_ONE; /* wraps */

    assert(top <= LF_TOP_MASK);
    assert((flags & ~LF_FLAGS) == 0);
    return tag | flags | top;
}

static bool cas_word(struct lf_group *g, uint64_t *old, uint64_t new)
{
    /* acq_rel pairs with the previous CAS on the word (a release sequence:
     * every change is an RMW); on failure, acquire like the initial load. */
    return __atomic_compare_exchange_n(&g->word, old, new, false, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE);
}

/*
 * Takes LEADER if it is clear (true: s leads), else pushes s on the idle
 * stack (false: s must sleep). `pending`: s holds PENDING (a woken slot),
 * which either CAS gives up. Slot s is RUNNING, off the stack.
 */
static bool lead_or_push(struct lf_group *g, struct lf_slot *s, bool pending)
{
    /* acquire pairs with the last CAS on the word (see cas_word). */
    uint64_t old = __atomic_load_n(&g->word, __ATOMIC_ACQUIRE);

    for (;;) {
        uint64_t top = old & LF_TOP_MASK;
        /* What stays set besides our change: a rejoining thread leaves a
         * woken slot's PENDING alone; a woken slot drops its own. */
        uint64_t keep = pending ? 0 : (old & LF_PENDING);

        assert(!pending || (old & LF_PENDING) != 0);
        if ((old & LF_LEADER) == 0) {
            /* I2: no baton and nobody on the way => nobody on the stack. */
            assert((old & LF_PENDING) != 0 || top == 0);
            if (cas_word(g, &old, word_next(old, LF_LEADER | keep, top)))
                return true;
            continue;
        }
        /* Relaxed: published by the release half of the push CAS. */
        __atomic_store_n(&s->lf_next, top, __ATOMIC_RELAXED);
        __atomic_store_n(&s->state, SLOT_IDLE, __ATOMIC_RELAXED);
        if (cas_word(g, &old, word_next(old, LF_LEADER | keep, s->idx + 1)))
            return false;
    }
}

/* Same contract as follow_locked. */
static int follow_lockfree(struct cr_lf_pool *p, struct lf_slot *s, const struct frame *f,
                           unsigned *r_out, uint64_t *led_at)
{
    struct lf_group *g = &p->groups[s->group];
    uint32_t st = SLOT_LEFT;
    int reason;

    reason = leave_reason(p, f);
    if (reason != STAY)
        return reason;
    /* Still on the stack from a frame that ended: park there again. acq_rel
     * pairs with a popper's LEFT -> RUNNING; exactly one of the two wins. */
    if (!__atomic_compare_exchange_n(&s->state, &st, SLOT_IDLE, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        assert(st == SLOT_RUNNING);
        if (lead_or_push(g, s, false))
            goto out_lead;
    }
    cr__role_set(&s->clock, CR_ROLE_FOLLOWER);
    for (;;) {
        cr_mutex_lock(&s->mu);
        for (;;) {
            /* acquire pairs with the popper's IDLE -> PROMOTED CAS. */
            st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
            if (st == SLOT_PROMOTED)
                break;
            reason = leave_reason(p, f);
            if (reason != STAY)
                break;
            wait_on(&s->cv, &s->mu, f->deadline);
        }
        cr_mutex_unlock(&s->mu);
        if (st != SLOT_PROMOTED) {
            /* Going away, but the slot stays on the stack: mark it LEFT so a
             * popper skips it. Losing the race means we were just woken:
             * resolve the turn first (the leader loop gives it up properly). */
            st = SLOT_IDLE;
            if (__atomic_compare_exchange_n(&s->state, &st, SLOT_LEFT, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                return reason;
            assert(st == SLOT_PROMOTED);
        }
        /* Woken with PENDING: popped, so off the stack; relaxed, nobody else
         * looks at a popped slot. Lead if the baton is free, else a thread
         * ahead of us in LIFO order took it: back on the stack, on top. */
        __atomic_store_n(&s->state, SLOT_RUNNING, __ATOMIC_RELAXED);
        if (lead_or_push(g, s, true))
            break;
    }
out_lead:
    /* Relaxed: off the stack (popped, or never pushed after a failed push
     * CAS left it IDLE), nobody else looks at it. */
    __atomic_store_n(&s->state, SLOT_RUNNING, __ATOMIC_RELAXED);
    move_lead(p, g->first, NO_SLOT, (int)s->idx);
    /* seq_cst: the first half of the Dekker pair with cr_lf_pool_notify. */
    __atomic_store_n(&s->leading, (int)g->first, __ATOMIC_SEQ_CST);
    stamp_leader(s, led_at);
    *r_out = g->first;
    return STAY;
}

/* Wakes popped slot f if its thread still waits: true, and PENDING is now
 * f's. false: f's thread went away (LEFT), f is off the stack. */
static bool hand_over(struct lf_group *g, struct lf_slot *f)
{
    /* acquire pairs with f's thread's IDLE -> LEFT CAS, or with its push CAS
     * that published IDLE. */
    uint32_t st = __atomic_load_n(&f->state, __ATOMIC_ACQUIRE);

    for (;;) {
        if (st == SLOT_IDLE) {
            /* acq_rel pairs with the thread's IDLE -> LEFT and its acquire
             * load of the state. */
            if (__atomic_compare_exchange_n(&f->state, &st, SLOT_PROMOTED, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                /* Taking its mutex after the state change orders us after
                 * its check of the state (it checks under the mutex): no
                 * lost wake-up. Signalled once released, so that it does
                 * not wake only to block on the mutex. */
                cr_mutex_lock(&f->mu);
                cr_mutex_unlock(&f->mu);
                cr_cond_signal(&f->cv);
                __atomic_fetch_add(&g->promotions, 1, __ATOMIC_RELAXED);
                return true;
            }
        } else {
            assert(st == SLOT_LEFT);
            /* Off the stack now: its thread must push it again. */
            if (__atomic_compare_exchange_n(&f->state, &st, SLOT_RUNNING, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                return false;
        }
    }
}

/*
 * We hold PENDING and have popped f: wake it, passing PENDING on. If its
 * thread went away, pop the next one while the baton stays free; drop
 * PENDING once the stack is empty or a leader holds the baton (the stack is
 * its business then, I2).
 */
static void pass_pending(struct cr_lf_pool *p, struct lf_group *g, struct lf_slot *f)
{
    while (!hand_over(g, f)) {
        /* acquire (here and in each failed CAS) pairs with the last CAS. */
        uint64_t old = __atomic_load_n(&g->word, __ATOMIC_ACQUIRE);

        for (;;) {
            uint64_t top = old & LF_TOP_MASK;
            uint64_t next;

            assert((old & LF_PENDING) != 0); /* ours */
            if ((old & LF_LEADER) != 0 || top == 0) {
                if (cas_word(g, &old, word_next(old, old & LF_LEADER, top)))
                    return;
                continue;
            }
            f = slot_at(p, (uint32_t)top);
            /* Relaxed: see lf_next; a stale value fails the CAS (I4). */
            next = __atomic_load_n(&f->lf_next, __ATOMIC_RELAXED);
            if (cas_word(g, &old, word_next(old, LF_PENDING, next)))
                break;
        }
    }
}

/* Same contract as unlead_locked: clear LEADER; if nobody is on the way
 * (PENDING clear) and the stack is not empty, pop its top in the same CAS,
 * taking PENDING, and wake it. */
static void unlead_lockfree(struct cr_lf_pool *p, struct lf_slot *s, unsigned r)
{
    struct lf_group *g = &p->groups[s->group];
    struct lf_slot *f;
    uint64_t old;

    /* seq_cst: see the Dekker pair with cr_lf_pool_notify. */
    __atomic_store_n(&s->leading, -1, __ATOMIC_SEQ_CST);
    move_lead(p, r, (int)s->idx, NO_SLOT);
    /* acquire (here and in each failed CAS) pairs with the last CAS. */
    old = __atomic_load_n(&g->word, __ATOMIC_ACQUIRE);
    for (;;) {
        uint64_t top = old & LF_TOP_MASK;

        assert((old & LF_LEADER) != 0); /* we hold the baton */
        if ((old & LF_PENDING) != 0 || top == 0) {
            if (cas_word(g, &old, word_next(old, old & LF_PENDING, top)))
                return;
            continue;
        }
        f = slot_at(p, (uint32_t)top);
        /* Relaxed: see lf_next; a stale value fails the CAS (I4). */
        if (cas_word(g, &old,
                     word_next(old, LF_PENDING, __atomic_load_n(&f->lf_next, __ATOMIC_RELAXED))))
            break;
    }
    pass_pending(p, g, f);
}

static void kick_lockfree(struct lf_slot *s)
{
    /* Under its mutex: the sleeper checks its frame under it. */
    cr_mutex_lock(&s->mu);
    cr_cond_signal(&s->cv);
    cr_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------------ deferred promotion */

/* The group that leads reactor r: the one group, or r's own (see init_group). */
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
            f = offer_turn(p, g, r);
            if (f != NULL)
                __atomic_store_n(&l->takeovers, l->takeovers + 1, __ATOMIC_RELAXED);
        }
    }
    cr_mutex_unlock(&g->lock);
    wake_pending(f);
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
            fail(p, "watchdog poll", -errno);
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

/* ------------------------------------------------------------------ the loop */

/*
 * s is back from an event of reactor r whose turn it deferred: takes the next
 * event r has fetched already into *ev, the turn deferred anew or offered as
 * unlead_locked does (defer_or_offer), without leading r in between. That is the whole of a
 * lead and an unlead when no thread took r meanwhile (its turn is still
 * deferred, nobody leads it or was woken for it), at one group lock instead of
 * two and none of the hand-over's atomics: on hello.txt 119 instructions and
 * six atomic read-modify-writes fewer a request (bench/httpd_instructions.sh,
 * 3,805 to 3,686). false, with nothing taken, when r is not so, the frame
 * ends, or nothing is fetched: s rejoins (follow). Locked orders with a delay
 * only. The take runs at the reading the handler lent (cr_clock_end_ns), if
 * it lent one.
 */
static bool take_deferred(struct cr_lf_pool *p, struct lf_slot *s, const struct frame *f,
                          unsigned r, struct cr_reactor_event *ev)
{
    struct lf_group *g = &p->groups[s->group];
    struct lf_lead *l = &p->lead[r];
    struct lf_slot *w = NULL;
    uint64_t now = 0;
    bool taken = false;

    if (p->delay_ns == 0 || p->order == ORDER_LOCKFREE || p->order == ORDER_NATIVE)
        return false;
    cr_mutex_lock(&g->lock);
    /* Relaxed: lead[] changes only under g->lock, held. The reactor's lock
     * comes after the group lock (lock order, top of the file). */
    if (l->deferred && l->pending == NO_SLOT &&
        __atomic_load_n(&l->slot, __ATOMIC_RELAXED) == NO_SLOT && leave_reason(p, f) == STAY &&
        (now = cr__clock_end_take(), cr__reactor_take(p->reactors[r], 0, false, &now, ev) > 0)) {
        taken = true;
        __atomic_store_n(&l->retakes, l->retakes + 1, __ATOMIC_RELAXED);
        w = defer_or_offer(p, g, r, ev);
    }
    cr_mutex_unlock(&g->lock);
    wake_pending(w);
    return taken;
}

/* STAY: s leads *r; *led_at as stamp_leader says. */
static int follow(struct cr_lf_pool *p, struct lf_slot *s, const struct frame *f, unsigned *r,
                  uint64_t *led_at)
{
    if (p->order == ORDER_LOCKFREE)
        return follow_lockfree(p, s, f, r, led_at);
    return follow_locked(p, s, f, r, led_at);
}

/* ev: the event s goes to dispatch, NULL if it leaves. now: a
 * cr_clock_now_ns() reading, for the role clock. */
static void unlead(struct cr_lf_pool *p, struct lf_slot *s, unsigned r,
                   const struct cr_reactor_event *ev, uint64_t now)
{
    /* Stop being LEADER in the stats before anyone else can start. */
    cr__role_set_at(&s->clock, CR_ROLE_PROCESSING, now);
    if (p->order == ORDER_LOCKFREE)
        unlead_lockfree(p, s, r);
    else
        unlead_locked(p, s, r, ev);
}

/*
 * Leads reactor r: waits for one event, hands the leadership on, then
 * dispatches it here (STAY). On a wake-up or timeout re-checks the frame and
 * waits again; when the frame ends gives the leadership up and returns why.
 * led_at: when s became LEADER (a cr_clock_now_ns() reading the first take
 * reuses), or 0 for a thread still PROCESSING (stamp_leader): that one first
 * takes what is there without waiting, at the reading its last handler lent
 * (cr_clock_end_ns) if it lent one, and becomes LEADER, at the same reading,
 * only if it must wait. At most one reading per event, none when lent.
 */
static int lead(struct cr_lf_pool *p, struct lf_slot *s, const struct frame *f, unsigned r,
                uint64_t led_at)
{
    struct cr_reactor *re = p->reactors[r];
    struct cr_reactor_event ev;
    /* Still PROCESSING: the handler's lent reading serves, if there is one. */
    uint64_t now = led_at != 0 ? led_at : cr__clock_end_take();
    bool stamped = led_at != 0;
    int reason;
    int n;

    for (;;) {
        reason = leave_reason(p, f);
        if (reason != STAY) {
            unlead(p, s, r, NULL, cr_clock_now_ns());
            return reason;
        }
        if (!stamped) {
            n = cr__reactor_take(re, 0, false, &now, &ev);
            if (n > 0)
                break;
            cr__role_set_at(&s->clock, CR_ROLE_LEADER, now);
            stamped = true;
        }
        n = cr__reactor_take(re, next_timeout_ms(f), true, &now, &ev);
        now = 0; /* after a wake-up or timeout: read anew */
        if (n > 0)
            break;
        if (n < 0)
            fail(p, "reactor wait", n);
        else if (cr_reactor_is_stopped(re))
            cr_lf_pool_stop(p);
    }
    /* Promote before dispatching (activity 5); the event is ours, and it is
     * dispatched even if the pool stops meanwhile. */
    unlead(p, s, r, &ev, ev.taken_ns); /* processing since the event was taken */
    do {
        cr_reactor_dispatch(re, &ev);
        cr__role_event(&s->clock);
    } while (take_deferred(p, s, f, r, &ev));
    return STAY;
}

/* Follows, leads and processes until the frame ends; returns why. */
static int serve(struct cr_lf_pool *p, struct lf_slot *s, const struct frame *f)
{
    for (;;) {
        unsigned r = 0;
        uint64_t led_at = 0;
        int reason = follow(p, s, f, &r, &led_at);

        if (reason == STAY)
            reason = lead(p, s, f, r, led_at);
        if (reason != STAY)
            return reason;
    }
}

static void *thread_main(void *arg)
{
    struct lf_slot *s = arg;
    struct cr_lf_pool *p = s->pool;
    struct frame f = {.w = NULL, .deadline = 0};

    tls_slot = s;
    if (p->on_thread_start != NULL)
        p->on_thread_start(s->idx, p->thread_arg);
    (void)serve(p, s, &f); /* only stop ends it */
    cr__role_set(&s->clock, CR_ROLE_STOPPED);
    if (p->on_thread_stop != NULL)
        p->on_thread_stop(s->idx, p->thread_arg);
    tls_slot = NULL;
    return NULL;
}

/* ------------------------------------------------------------------ lifecycle */

const char *const *cr_lf_pool_promotions(void)
{
    return order_names;
}

static int parse_order(const char *name, enum order *out)
{
    if (name == NULL)
        name = "lifo";
    for (int i = 0; order_names[i] != NULL; i++) {
        if (strcmp(order_names[i], name) == 0) {
            *out = (enum order)i;
            return 0;
        }
    }
    return -EINVAL;
}

static void fini_groups(struct cr_lf_pool *p, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        cr_cond_fini(&p->groups[i].cv);
        cr_mutex_fini(&p->groups[i].lock);
    }
}

static void fini_slots(struct cr_lf_pool *p, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        cr_cond_fini(&p->slots[i].cv);
        cr_mutex_fini(&p->slots[i].mu);
    }
}

static int init_group(struct cr_lf_pool *p, unsigned i, bool shared)
{
    struct lf_group *g = &p->groups[i];
    int err;

    g->first = shared ? 0 : i;
    g->count = shared ? p->nreactors : 1;
    err = cr_mutex_init(&g->lock);
    if (err < 0)
        return err;
    err = cr_cond_init(&g->cv);
    if (err < 0)
        cr_mutex_fini(&g->lock);
    return err;
}

static int init_slot(struct cr_lf_pool *p, unsigned i, const int *priorities)
{
    struct lf_slot *s = &p->slots[i];
    int err;

    s->pool = p;
    s->idx = i;
    s->group = i % p->ngroups;
    if (i >= p->nthreads)
        s->priority = INT_MIN; /* outside threads come last */
    else
        s->priority = priorities != NULL ? priorities[i] : -(int)i;
    s->promoted = NO_SLOT;
    s->leading = -1;
    cr__role_set(&s->clock, CR_ROLE_IDLE); /* idle from create to start */
    err = cr_mutex_init(&s->mu);
    if (err < 0)
        return err;
    err = cr_cond_init(&s->cv);
    if (err < 0)
        cr_mutex_fini(&s->mu);
    return err;
}

static void fini_watch(struct cr_lf_pool *p)
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

/* The watchdog's timers and stop eventfd (deferred promotion only). */
static int init_watch(struct cr_lf_pool *p)
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

/* Zeroed, cache-line aligned array of n elements of size sz. */
static void *alloc_lines(size_t n, size_t sz)
{
    void *a;

    if (n > SIZE_MAX / sz)
        return NULL;
    a = aligned_alloc(CACHE_LINE, n * sz);
    if (a != NULL)
        memset(a, 0, n * sz);
    return a;
}

int cr_lf_pool_create(struct cr_lf_pool **out, const struct cr_lf_pool_config *cfg)
{
    struct cr_lf_pool *p;
    enum order order;
    unsigned groups_done = 0;
    unsigned slots_done = 0;
    int err;

    *out = NULL;
    if (cfg == NULL || cfg->nreactors == 0 || cfg->reactors == NULL || cfg->threads > MAX_THREADS ||
        cfg->nreactors > MAX_THREADS)
        return -EINVAL;
    for (unsigned i = 0; i < cfg->nreactors; i++) {
        if (cfg->reactors[i] == NULL)
            return -EINVAL;
    }
    if (parse_order(cfg->promotion, &order) < 0)
        return -EINVAL;
    if (order == ORDER_LOCKFREE && cfg->shared_followers && cfg->nreactors > 1)
        return -EINVAL; /* one word per group, one reactor per word */
    /* See "Deferred promotion" at the top of the file. */
    if (cfg->promotion_delay_us != 0 && order != ORDER_LIFO)
        return -EINVAL;
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    p->order = order;
    p->nreactors = cfg->nreactors;
    p->ngroups = cfg->shared_followers ? 1 : cfg->nreactors;
    p->nthreads = cfg->threads;
    if (p->nthreads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);

        p->nthreads = n > 0 ? (unsigned)n : 1;
        if (p->nthreads < p->ngroups)
            p->nthreads = p->ngroups;
    }
    err = -EINVAL;
    if (p->nthreads < p->ngroups)
        goto out_free; /* a group without threads would never be served */
    p->nslots = p->nthreads + JOIN_SLOTS;
    p->on_thread_start = cfg->on_thread_start;
    p->on_thread_stop = cfg->on_thread_stop;
    p->thread_arg = cfg->thread_arg;
    p->delay_ns = (uint64_t)cfg->promotion_delay_us * 1000;
    err = -ENOMEM;
    p->reactors = calloc(p->nreactors, sizeof(*p->reactors));
    if (p->reactors == NULL)
        goto out_free;
    memcpy(p->reactors, cfg->reactors, p->nreactors * sizeof(*p->reactors));
    p->lead = alloc_lines(p->nreactors, sizeof(*p->lead));
    if (p->lead == NULL)
        goto out_free_reactors;
    for (unsigned i = 0; i < p->nreactors; i++) {
        p->lead[i].slot = NO_SLOT;
        p->lead[i].pending = NO_SLOT;
        p->lead[i].timer_fd = -1;
    }
    p->wd_stop_fd = -1;
    p->groups = alloc_lines(p->ngroups, sizeof(*p->groups));
    if (p->groups == NULL)
        goto out_free_lead;
    p->slots = alloc_lines(p->nslots, sizeof(*p->slots));
    if (p->slots == NULL)
        goto out_free_groups;
    for (; groups_done < p->ngroups; groups_done++) {
        err = init_group(p, groups_done, cfg->shared_followers);
        if (err < 0)
            goto out_fini;
    }
    for (; slots_done < p->nslots; slots_done++) {
        err = init_slot(p, slots_done, order == ORDER_PRIORITY ? cfg->priorities : NULL);
        if (err < 0)
            goto out_fini;
    }
    err = init_watch(p);
    if (err < 0)
        goto out_fini;
    *out = p;
    return 0;

out_fini:
    fini_watch(p);
    fini_slots(p, slots_done);
    fini_groups(p, groups_done);
    free(p->slots);
out_free_groups:
    free(p->groups);
out_free_lead:
    free(p->lead);
out_free_reactors:
    free(p->reactors);
out_free:
    free(p);
    return err;
}

int cr_lf_pool_start(struct cr_lf_pool *p)
{
    if (p->started != 0 || p->wd_started)
        return -EINVAL;
    if (p->delay_ns != 0) {
        int rc = pthread_create(&p->wd_tid, NULL, watchdog_main, p);

        if (rc != 0)
            return -rc;
        p->wd_started = true;
    }
    for (unsigned i = 0; i < p->nthreads; i++) {
        int rc = pthread_create(&p->slots[i].tid, NULL, thread_main, &p->slots[i]);

        if (rc != 0) {
            int ignored;

            cr_lf_pool_stop(p);
            ignored = cr_lf_pool_join_all(p); /* pthread_create's error is the news */
            (void)ignored;
            return -rc;
        }
        p->started = i + 1;
    }
    return 0;
}

void cr_lf_pool_stop(struct cr_lf_pool *p)
{
    /* release pairs with the acquire load in leave_reason. */
    __atomic_store_n(&p->stopping, 1, __ATOMIC_RELEASE);
    for (unsigned i = 0; i < p->ngroups; i++) {
        struct lf_group *g = &p->groups[i];

        if (p->order == ORDER_LOCKFREE)
            continue;
        /* Under the lock: followers check the flag under it. */
        cr_mutex_lock(&g->lock);
        cr_cond_broadcast(&g->cv);
        for (unsigned j = i; j < p->nslots; j += p->ngroups)
            cr_cond_signal(&p->slots[j].cv);
        cr_mutex_unlock(&g->lock);
    }
    if (p->order == ORDER_LOCKFREE) {
        for (unsigned j = 0; j < p->nslots; j++)
            kick_lockfree(&p->slots[j]);
    }
    for (unsigned r = 0; r < p->nreactors; r++)
        cr_reactor_wake(p->reactors[r]);
    if (p->wd_stop_fd >= 0) {
        uint64_t one = 1;

        /* Only fails when the count would overflow: it is awake then. */
        (void)!write(p->wd_stop_fd, &one, sizeof(one));
    }
}

int cr_lf_pool_join_all(struct cr_lf_pool *p)
{
    int err = 0;

    for (unsigned i = 0; i < p->started; i++) {
        int rc = pthread_join(p->slots[i].tid, NULL);

        if (rc != 0 && err == 0)
            err = -rc;
    }
    p->started = 0;
    if (p->wd_started) {
        int rc = pthread_join(p->wd_tid, NULL);

        if (rc != 0 && err == 0)
            err = -rc;
        p->wd_started = false;
    }
    /* Relaxed: pthread_join ordered the threads' stores before this. */
    if (err == 0)
        err = __atomic_load_n(&p->error, __ATOMIC_RELAXED);
    return err;
}

void cr_lf_pool_destroy(struct cr_lf_pool *p)
{
    if (p == NULL)
        return;
    if (p->started != 0 || p->wd_started) {
        /* Misuse (destroy before join_all), but leave no thread behind. */
        int ignored;

        cr_lf_pool_stop(p);
        ignored = cr_lf_pool_join_all(p);
        (void)ignored;
    }
    fini_watch(p);
    fini_slots(p, p->nslots);
    fini_groups(p, p->ngroups);
    free(p->slots);
    free(p->groups);
    free(p->lead);
    free(p->reactors);
    free(p);
}

/* ------------------------------------------------------------------ join, wait, notify */

int cr_lf_pool_join(struct cr_lf_pool *p, int timeout_ms)
{
    struct frame f = {.w = NULL, .deadline = deadline_of(timeout_ms)};
    struct lf_slot *prev = tls_slot;
    struct lf_slot *s = NULL;
    int reason;

    for (unsigned i = p->nthreads; i < p->nslots && s == NULL; i++) {
        int free_slot = 0;

        /* acquire pairs with the release store that gave the slot back. */
        if (__atomic_compare_exchange_n(&p->slots[i].lent, &free_slot, 1, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            s = &p->slots[i];
    }
    if (s == NULL)
        return -EBUSY;
    tls_slot = s;
    reason = serve(p, s, &f);
    cr__role_set(&s->clock, CR_ROLE_IDLE);
    tls_slot = prev;
    /* release pairs with the next lender's acquire CAS. */
    __atomic_store_n(&s->lent, 0, __ATOMIC_RELEASE);
    return reason == LEAVE_TIMEOUT ? -ETIMEDOUT : 0;
}

void cr_lf_waiter_init(struct cr_lf_waiter *w)
{
    struct lf_slot *s = tls_slot;

    /* Relaxed: the caller publishes w (sends its request) after this, and
     * that orders these stores before any notify. */
    __atomic_store_n(&w->done, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&w->thread, s != NULL ? (int)s->idx : -1, __ATOMIC_RELAXED);
}

int cr_lf_pool_wait(struct cr_lf_pool *p, struct cr_lf_waiter *w, int timeout_ms)
{
    struct frame f = {.w = w, .deadline = deadline_of(timeout_ms)};
    struct lf_slot *s = tls_slot;
    uint64_t now;
    int reason;

    if (s == NULL || s->pool != p)
        return -EINVAL;
    /* Initialised on another thread: too late to be race-free with notify,
     * but right for every notify that comes after this. */
    if (__atomic_load_n(&w->thread, __ATOMIC_RELAXED) != (int)s->idx)
        __atomic_store_n(&w->thread, (int)s->idx, __ATOMIC_RELAXED);
    reason = serve(p, s, &f);
    now = cr_clock_now_ns();
    cr__role_set_at(&s->clock, CR_ROLE_PROCESSING, now); /* back in the handler */
    cr__clock_event_resume(now);                         /* whose timeouts count from here */
    if (reason == LEAVE_DONE)
        return 0;
    return reason == LEAVE_STOP ? -ECANCELED : -ETIMEDOUT;
}

void cr_lf_pool_notify(struct cr_lf_pool *p, struct cr_lf_waiter *w)
{
    /* Read before done is set: from then on the waiter may return and w go
     * out of scope. Relaxed: cr_lf_waiter_init's store is ordered by the
     * caller (see there). */
    int t = __atomic_load_n(&w->thread, __ATOMIC_RELAXED);
    struct lf_slot *s;
    int r;

    /* seq_cst: the first half of the Dekker pair with a leader's `leading`
     * store and leave_reason's load of done. */
    __atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
    if (t < 0 || (unsigned)t >= p->nslots)
        return; /* nobody waits on it */
    s = &p->slots[t];
    if (p->order == ORDER_LOCKFREE)
        kick_lockfree(s);
    else
        kick_locked(p, s);
    /* seq_cst: the second half of the Dekker pair. */
    r = __atomic_load_n(&s->leading, __ATOMIC_SEQ_CST);
    if (r >= 0)
        cr_reactor_wake(p->reactors[r]);
}

/* ------------------------------------------------------------------ introspection */

int cr_lf_pool_self(const struct cr_lf_pool *p)
{
    const struct lf_slot *s = tls_slot;

    return s != NULL && s->pool == p && s->idx < p->nthreads ? (int)s->idx : -1;
}

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

unsigned cr_lf_pool_stats(const struct cr_lf_pool *p, uint64_t *promotions,
                          struct cr_worker_stats *workers, unsigned max)
{
    unsigned m = max < p->nthreads ? max : p->nthreads;
    uint64_t now = cr_clock_now_ns();

    /* Every load below is relaxed: statistics (see the fields). */
    if (promotions != NULL) {
        uint64_t sum = 0;

        for (unsigned g = 0; g < p->ngroups; g++)
            sum += __atomic_load_n(&p->groups[g].promotions, __ATOMIC_RELAXED);
        *promotions = sum;
    }
    if (workers == NULL)
        return p->nthreads;
    /*
     * Roles are read one by one, so a hand-over between two reads could show
     * both leaders. Read each reactor's leader once first, and report LEADER
     * only for a thread that both says so and is one of them: never more
     * leaders than reactors. A thread that took over after that read still
     * shows as the follower it just was.
     */
    for (unsigned i = 0; i < m; i++)
        workers[i].role = CR_ROLE_COUNT; /* "not a leader seen" */
    for (unsigned r = 0; r < p->nreactors; r++) {
        /* Relaxed: a sample; see struct lf_lead. */
        int l = __atomic_load_n(&p->lead[r].slot, __ATOMIC_RELAXED);

        if (l >= 0 && (unsigned)l < m)
            workers[l].role = CR_ROLE_LEADER;
    }
    for (unsigned i = 0; i < m; i++) {
        bool seen_leading = workers[i].role == CR_ROLE_LEADER;

        cr__role_read(&p->slots[i].clock, now, &workers[i]);
        if (workers[i].role == CR_ROLE_LEADER && !seen_leading)
            workers[i].role = CR_ROLE_FOLLOWER;
    }
    return p->nthreads;
}
