/*
 * sync_internal.h - struct cr_mutex, a pthread mutex that remembers its owner
 * in debug builds so code can assert the lock order it documents
 * (cr_mutex_assert_held, like sqlite3_mutex_held), and the condition-variable
 * calls that keep that owner right across a wait; struct cr_lock, the same
 * for a lock no condition variable waits on, inline. Library-internal; used
 * by the pools and queues on any thread.
 */
#ifndef CABRANK_SYNC_INTERNAL_H
#define CABRANK_SYNC_INTERNAL_H

#include <cabrank/clock.h>

#include <assert.h>
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct cr_mutex {
    pthread_mutex_t m;
#ifdef CR_DEBUG
    /* Written only by the holder; read by the holder's own asserts. */
    pthread_t owner;
    int held;
#endif
};

static inline int cr_mutex_init(struct cr_mutex *mu)
{
#ifdef CR_DEBUG
    mu->held = 0;
#endif
    return -pthread_mutex_init(&mu->m, NULL);
}

static inline void cr_mutex_fini(struct cr_mutex *mu)
{
    /* Destroying a free mutex cannot fail; a held one is our bug. */
    int rc = pthread_mutex_destroy(&mu->m);
    assert(rc == 0);
    (void)rc;
}

/* The debug owner of a cr_mutex or cr_lock (same fields): set by the thread
 * that just took it, cleared by the holder before it lets go. */
#ifdef CR_DEBUG
#define CR__OWNER_TAKE(x)                                                                          \
    do {                                                                                           \
        (x)->owner = pthread_self();                                                               \
        __atomic_store_n(&(x)->held, 1, __ATOMIC_RELAXED);                                         \
    } while (0)
#define CR__OWNER_DROP(x) __atomic_store_n(&(x)->held, 0, __ATOMIC_RELAXED)
#else
#define CR__OWNER_TAKE(x) ((void)(x))
#define CR__OWNER_DROP(x) ((void)(x))
#endif

static inline void cr_mutex_lock(struct cr_mutex *mu)
{
    /* Fails only on a corrupted or uninitialised mutex. */
    int rc = pthread_mutex_lock(&mu->m);
    assert(rc == 0);
    (void)rc;
    CR__OWNER_TAKE(mu);
}

static inline void cr_mutex_unlock(struct cr_mutex *mu)
{
    CR__OWNER_DROP(mu);
    int rc = pthread_mutex_unlock(&mu->m);
    assert(rc == 0);
    (void)rc;
}

#ifdef CR_DEBUG
#define cr_mutex_assert_held(mu)                                                                   \
    assert(__atomic_load_n(&(mu)->held, __ATOMIC_RELAXED) &&                                       \
           pthread_equal((mu)->owner, pthread_self()))
#else
#define cr_mutex_assert_held(mu) ((void)(mu))
#endif

/*
 * A lock taken on every request by the reactor and the connections it
 * serves: one compare-and-swap to take, one exchange to give back, inline,
 * where pthread_mutex_lock and _unlock put the same two atomics behind calls,
 * type checks and owner bookkeeping (figures: docs/design/os.md). A futex
 * lock in the three states of Drepper's "Futexes Are Tricky" (its mutex 3,
 * given back with an exchange where his decrements): 0 free, 1 held, 2 held
 * and maybe waited for; a waiter sleeps in the kernel, never spins. No
 * condition variable can wait on it: that takes a cr_mutex.
 */
struct cr_lock {
    uint32_t word;
#ifdef CR_DEBUG
    /* As in cr_mutex. */
    pthread_t owner;
    int held;
#endif
};

/* Always 0 (nothing behind it can fail); an int as cr_mutex_init's is, so a
 * lock changes kind without its callers changing. */
static inline int cr_lock_init(struct cr_lock *l)
{
    l->word = 0;
#ifdef CR_DEBUG
    l->held = 0;
#endif
    return 0;
}

static inline void cr_lock_fini(struct cr_lock *l)
{
    /* A held lock is our bug. */
    assert(__atomic_load_n(&l->word, __ATOMIC_RELAXED) == 0);
    (void)l;
}

/* Contended: marks the lock waited for and sleeps until it is free. The
 * futex call is syscall(2), as in sys_internal.h: not a cancellation point. */
__attribute__((noinline, unused)) static void cr__lock_contended(struct cr_lock *l)
{
    while (__atomic_exchange_n(&l->word, 2, __ATOMIC_ACQUIRE) != 0)
        (void)syscall(SYS_futex, &l->word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

__attribute__((noinline, unused)) static void cr__lock_wake(struct cr_lock *l)
{
    (void)syscall(SYS_futex, &l->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static inline void cr_lock_lock(struct cr_lock *l)
{
    uint32_t free_word = 0;

    if (!__atomic_compare_exchange_n(&l->word, &free_word, 1, false, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        cr__lock_contended(l);
    CR__OWNER_TAKE(l);
}

static inline void cr_lock_unlock(struct cr_lock *l)
{
    CR__OWNER_DROP(l);
    /* 2: someone may sleep on it; wake one, who marks it 2 again in case
     * others still sleep. */
    if (__atomic_exchange_n(&l->word, 0, __ATOMIC_RELEASE) == 2)
        cr__lock_wake(l);
}

/* Its fields are cr_mutex's: the same check. */
#define cr_lock_assert_held(l) cr_mutex_assert_held(l)

/* Initialises cv for cr_cond_timedwait deadlines on CLOCK_MONOTONIC
 * (cr_clock_now_ns), immune to clock steps. 0 or -errno. */
static inline int cr_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t attr;
    int rc;

    rc = pthread_condattr_init(&attr);
    if (rc != 0)
        return -rc;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
    return -rc;
}

static inline void cr_cond_fini(pthread_cond_t *cv)
{
    /* Fails only with waiters left, which is our bug. */
    int rc = pthread_cond_destroy(cv);

    assert(rc == 0);
    (void)rc;
}

/* The debug owner is cleared before the wait and restored after it: another
 * thread holds the mutex while we sleep. */
static inline void cr_mutex_release_for_wait(struct cr_mutex *mu)
{
    cr_mutex_assert_held(mu);
    CR__OWNER_DROP(mu);
}

static inline void cr_mutex_reacquired_after_wait(struct cr_mutex *mu)
{
    CR__OWNER_TAKE(mu);
}

/* Waits on cv, which mu guards, releasing mu meanwhile; the caller re-checks
 * its condition (wake-ups may be spurious). Caller holds mu. */
static inline void cr_cond_wait(pthread_cond_t *cv, struct cr_mutex *mu)
{
    int rc;

    cr_mutex_release_for_wait(mu);
    /* Fails only on a corrupted condvar or a mutex we do not hold. */
    rc = pthread_cond_wait(cv, &mu->m);
    assert(rc == 0);
    (void)rc;
    cr_mutex_reacquired_after_wait(mu);
}

/* As cr_cond_wait, until abstime_ns at the latest (a cr_clock_now_ns time;
 * cv came from cr_cond_init). Returns 0 or -ETIMEDOUT. Caller holds mu. */
static inline int cr_cond_timedwait(pthread_cond_t *cv, struct cr_mutex *mu, uint64_t abstime_ns)
{
    struct timespec ts = {
        .tv_sec = (time_t)(abstime_ns / CR_NSEC_PER_SEC),
        .tv_nsec = (long)(abstime_ns % CR_NSEC_PER_SEC),
    };
    int rc;

    cr_mutex_release_for_wait(mu);
    rc = pthread_cond_timedwait(cv, &mu->m, &ts);
    /* Other results mean a corrupted condvar or a mutex we do not hold. */
    assert(rc == 0 || rc == ETIMEDOUT);
    cr_mutex_reacquired_after_wait(mu);
    return -rc;
}

static inline void cr_cond_signal(pthread_cond_t *cv)
{
    /* Fails only on a corrupted condvar. */
    int rc = pthread_cond_signal(cv);

    assert(rc == 0);
    (void)rc;
}

static inline void cr_cond_broadcast(pthread_cond_t *cv)
{
    /* Fails only on a corrupted condvar. */
    int rc = pthread_cond_broadcast(cv);

    assert(rc == 0);
    (void)rc;
}

#endif /* CABRANK_SYNC_INTERNAL_H */
