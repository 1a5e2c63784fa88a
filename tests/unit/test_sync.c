/*
 * test_sync.c - struct cr_lock (sync_internal.h): mutual exclusion under
 * contention, and sleepers woken when the holder lets go. Threads, because
 * that is the contract; bounded counts, each test in its own process. TSan
 * checks the same tests for the happens-before the lock must give.
 */
#include "os/sync_internal.h"

#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define TEST_TIMEOUT 30
#define THREADS      4
#define ROUNDS       20000

struct shared {
    struct cr_lock lock;
    /* Protected by lock; plain on purpose, so a lost update shows (and TSan
     * reports a race if the lock gave no ordering). */
    uint64_t count;
    unsigned inside; /* threads between lock and unlock */
    unsigned most_inside;
};

static void *contend(void *arg)
{
    struct shared *sh = arg;

    for (int i = 0; i < ROUNDS; i++) {
        cr_lock_lock(&sh->lock);
        cr_lock_assert_held(&sh->lock);
        sh->inside++;
        if (sh->inside > sh->most_inside)
            sh->most_inside = sh->inside;
        sh->count++;
        sh->inside--;
        cr_lock_unlock(&sh->lock);
    }
    return NULL;
}

/* Four threads, twenty thousand increments each, nothing lost, never two
 * inside; the lock ends free. */
START_TEST(excludes_under_contention)
{
    struct shared sh = {0};
    pthread_t t[THREADS];

    ck_assert_int_eq(cr_lock_init(&sh.lock), 0);
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, contend, &sh), 0);
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    ck_assert_uint_eq(sh.count, (uint64_t)THREADS * ROUNDS);
    ck_assert_uint_eq(sh.most_inside, 1);
    ck_assert_uint_eq(__atomic_load_n(&sh.lock.word, __ATOMIC_RELAXED), 0);
    cr_lock_fini(&sh.lock);
}
END_TEST

static void *take_once(void *arg)
{
    struct shared *sh = arg;

    cr_lock_lock(&sh->lock);
    sh->count++;
    cr_lock_unlock(&sh->lock);
    return NULL;
}

/* Threads that find the lock held sleep on it (its word says so: 2), and
 * every one of them gets it after the holder lets go. */
START_TEST(sleepers_are_woken_when_the_holder_lets_go)
{
    struct shared sh = {0};
    pthread_t t[THREADS];
    struct timespec tick = {.tv_sec = 0, .tv_nsec = 1000000};

    ck_assert_int_eq(cr_lock_init(&sh.lock), 0);
    cr_lock_lock(&sh.lock);
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, take_once, &sh), 0);
    /* The first to block marks the word; bounded, the threads may be slow to start. */
    for (int i = 0; i < 5000 && __atomic_load_n(&sh.lock.word, __ATOMIC_RELAXED) != 2; i++)
        nanosleep(&tick, NULL);
    ck_assert_uint_eq(__atomic_load_n(&sh.lock.word, __ATOMIC_RELAXED), 2);
    ck_assert_uint_eq(sh.count, 0);
    cr_lock_unlock(&sh.lock);
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    ck_assert_uint_eq(sh.count, THREADS);
    ck_assert_uint_eq(__atomic_load_n(&sh.lock.word, __ATOMIC_RELAXED), 0);
    cr_lock_fini(&sh.lock);
}
END_TEST

Suite *sync_suite(void);

Suite *sync_suite(void)
{
    Suite *s = suite_create("sync");
    TCase *tc = tcase_create("lock");

    tcase_set_timeout(tc, TEST_TIMEOUT);
    tcase_add_test(tc, excludes_under_contention);
    tcase_add_test(tc, sleepers_are_woken_when_the_holder_lets_go);
    suite_add_tcase(s, tc);
    return s;
}
