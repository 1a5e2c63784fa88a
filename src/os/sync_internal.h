/*
 * sync_internal.h - struct cr_mutex, a pthread mutex that remembers its owner
 * in debug builds so code can assert the lock order it documents
 * (cr_mutex_assert_held, like sqlite3_mutex_held). Library-internal.
 */
#ifndef CABRANK_SYNC_INTERNAL_H
#define CABRANK_SYNC_INTERNAL_H

#include <assert.h>
#include <pthread.h>

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

#endif /* CABRANK_SYNC_INTERNAL_H */
