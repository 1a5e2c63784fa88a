/*
 * sync_internal.h - struct cr_mutex, a pthread mutex that remembers its owner
 * in debug builds so code can assert the lock order it documents
 * (cr_mutex_assert_held, like sqlite3_mutex_held), and the condition-variable
 * calls that keep that owner right across a wait. Library-internal; used by
 * the pools and queues on any thread.
 */
#ifndef CABRANK_SYNC_INTERNAL_H
#define CABRANK_SYNC_INTERNAL_H

#include <cabrank/clock.h>

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

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

static inline void cr_mutex_lock(struct cr_mutex *mu)
{
    /* Fails only on a corrupted or uninitialised mutex. */
    int rc = pthread_mutex_lock(&mu->m);
    assert(rc == 0);
    (void)rc;
#ifdef CR_DEBUG
    mu->owner = pthread_self();
    __atomic_store_n(&mu->held, 1, __ATOMIC_RELAXED);
#endif
}

static inline void cr_mutex_unlock(struct cr_mutex *mu)
{
#ifdef CR_DEBUG
    __atomic_store_n(&mu->held, 0, __ATOMIC_RELAXED);
#endif
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
#ifdef CR_DEBUG
    __atomic_store_n(&mu->held, 0, __ATOMIC_RELAXED);
#else
    (void)mu;
#endif
}

static inline void cr_mutex_reacquired_after_wait(struct cr_mutex *mu)
{
#ifdef CR_DEBUG
    mu->owner = pthread_self();
    __atomic_store_n(&mu->held, 1, __ATOMIC_RELAXED);
#else
    (void)mu;
#endif
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
