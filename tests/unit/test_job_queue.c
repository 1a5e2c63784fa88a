/*
 * test_job_queue.c - the bounded synchronized job queue (src/pool/job_queue.c):
 * FIFO order across the ring's wrap, the capacity bound (try-push fails, push
 * blocks until a pop), close waking blocked producers and consumers and
 * draining what is left, and many producers against many consumers with
 * every job delivered exactly once (run under TSan by `make test`).
 */
#include "pool/job_queue_internal.h"

#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Long enough for a thread to reach its blocking wait on a loaded machine. */
#define SETTLE_US 100000

/* The shape of the models' jobs: a pointer and event bits. */
struct job {
    void *ptr;
    unsigned events;
};

static struct job job_of(uintptr_t v)
{
    struct job j = {.ptr = (void *)v, .events = (unsigned)(v & 0xf)};

    return j;
}

static struct cr_job_queue *new_queue(size_t capacity)
{
    struct cr_job_queue *q;

    ck_assert_int_eq(cr__job_queue_create(&q, capacity, sizeof(struct job)), 0);
    ck_assert_ptr_nonnull(q);
    ck_assert_uint_eq(cr__job_queue_capacity(q), capacity);
    return q;
}

START_TEST(create_rejects_zero_and_overflowing_sizes)
{
    struct cr_job_queue *q = (void *)1;

    ck_assert_int_eq(cr__job_queue_create(&q, 0, sizeof(struct job)), -EINVAL);
    ck_assert_ptr_null(q);
    ck_assert_int_eq(cr__job_queue_create(&q, 4, 0), -EINVAL);
    ck_assert_int_eq(cr__job_queue_create(&q, SIZE_MAX / 2, 4), -EINVAL);
    ck_assert_ptr_null(q);
    cr__job_queue_destroy(NULL);
}
END_TEST

START_TEST(copies_jobs_of_any_size_whole)
{
    /* Odd sizes: nothing may assume alignment or a pointer-sized job. */
    static const size_t sizes[] = {1, 3, 56, 200};

    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t size = sizes[k];
        struct cr_job_queue *q;
        unsigned char in[200];
        unsigned char out[201];

        ck_assert_int_eq(cr__job_queue_create(&q, 3, size), 0);
        /* Push one, then pop two every other round: the ring wraps. */
        for (int round = 0; round < 8; round++) {
            memset(in, 'a' + round, size);
            in[0] = (unsigned char)round;
            ck_assert_int_eq(cr__job_queue_push(q, in), 0);
            if (round % 2 == 0)
                continue;
            for (int back = round - 1; back <= round; back++) {
                memset(out, 0xee, sizeof(out));
                ck_assert_int_eq(cr__job_queue_pop(q, out), 0);
                ck_assert_uint_eq(out[0], (unsigned)back);
                for (size_t i = 1; i < size; i++)
                    ck_assert_uint_eq(out[i], (unsigned)('a' + back));
                ck_assert_uint_eq(out[size], 0xee); /* not one byte more */
            }
        }
        cr__job_queue_destroy(q);
    }
}
END_TEST

START_TEST(hands_out_jobs_in_fifo_order_across_the_wrap)
{
    struct cr_job_queue *q = new_queue(4);
    struct job j;
    uintptr_t next_in = 1;
    uintptr_t next_out = 1;

    /* Push 3, pop 2, repeatedly: head and tail wrap around many times. */
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 3 && cr__job_queue_depth(q) < 4; i++) {
            j = job_of(next_in++);
            ck_assert_int_eq(cr__job_queue_try_push(q, &j), 0);
        }
        for (int i = 0; i < 2; i++) {
            ck_assert_int_eq(cr__job_queue_pop(q, &j), 0);
            ck_assert_uint_eq((uintptr_t)j.ptr, next_out);
            ck_assert_uint_eq(j.events, next_out & 0xf);
            next_out++;
        }
    }
    while (cr__job_queue_try_pop(q, &j) == 0) {
        ck_assert_uint_eq((uintptr_t)j.ptr, next_out);
        next_out++;
    }
    ck_assert_uint_eq(next_out, next_in);
    ck_assert_uint_eq(cr__job_queue_depth(q), 0);
    cr__job_queue_destroy(q);
}
END_TEST

START_TEST(try_push_fails_when_full_and_try_pop_when_empty)
{
    struct cr_job_queue *q = new_queue(2);
    struct job j = job_of(7);

    ck_assert_int_eq(cr__job_queue_try_pop(q, &j), -EAGAIN);
    ck_assert_int_eq(cr__job_queue_try_push(q, &j), 0);
    ck_assert_int_eq(cr__job_queue_push(q, &j), 0);
    ck_assert_uint_eq(cr__job_queue_depth(q), 2);
    ck_assert_int_eq(cr__job_queue_try_push(q, &j), -EAGAIN);
    ck_assert_uint_eq(cr__job_queue_depth(q), 2);
    ck_assert_int_eq(cr__job_queue_try_pop(q, &j), 0);
    ck_assert_int_eq(cr__job_queue_try_push(q, &j), 0);
    cr__job_queue_destroy(q);
}
END_TEST

struct blocked_call {
    struct cr_job_queue *q;
    struct job job;
    int rc;
    int done; /* atomic: release by the thread, acquire by the test */
};

static void *push_thread(void *arg)
{
    struct blocked_call *b = arg;

    b->rc = cr__job_queue_push(b->q, &b->job);
    __atomic_store_n(&b->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *pop_thread(void *arg)
{
    struct blocked_call *b = arg;

    b->rc = cr__job_queue_pop(b->q, &b->job);
    __atomic_store_n(&b->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static bool is_done(struct blocked_call *b)
{
    return __atomic_load_n(&b->done, __ATOMIC_ACQUIRE) != 0;
}

START_TEST(push_blocks_when_full_until_a_pop)
{
    struct cr_job_queue *q = new_queue(1);
    struct blocked_call b = {.q = q, .job = job_of(2)};
    struct job j = job_of(1);
    pthread_t t;

    ck_assert_int_eq(cr__job_queue_push(q, &j), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, push_thread, &b), 0);
    usleep(SETTLE_US);
    ck_assert_msg(!is_done(&b), "push returned on a full queue");
    ck_assert_int_eq(cr__job_queue_pop(q, &j), 0);
    ck_assert_uint_eq((uintptr_t)j.ptr, 1);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert(is_done(&b));
    ck_assert_int_eq(b.rc, 0);
    ck_assert_int_eq(cr__job_queue_pop(q, &j), 0);
    ck_assert_uint_eq((uintptr_t)j.ptr, 2);
    cr__job_queue_destroy(q);
}
END_TEST

START_TEST(pop_blocks_when_empty_until_a_push)
{
    struct cr_job_queue *q = new_queue(3);
    struct blocked_call b = {.q = q};
    struct job j = job_of(9);
    pthread_t t;

    ck_assert_int_eq(pthread_create(&t, NULL, pop_thread, &b), 0);
    usleep(SETTLE_US);
    ck_assert_msg(!is_done(&b), "pop returned on an empty queue");
    ck_assert_int_eq(cr__job_queue_push(q, &j), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(b.rc, 0);
    ck_assert_uint_eq((uintptr_t)b.job.ptr, 9);
    cr__job_queue_destroy(q);
}
END_TEST

START_TEST(close_wakes_blocked_consumers)
{
    enum { N = 4 };
    struct cr_job_queue *q = new_queue(8);
    struct blocked_call b[N];
    pthread_t t[N];

    for (int i = 0; i < N; i++) {
        b[i] = (struct blocked_call){.q = q};
        ck_assert_int_eq(pthread_create(&t[i], NULL, pop_thread, &b[i]), 0);
    }
    usleep(SETTLE_US);
    for (int i = 0; i < N; i++)
        ck_assert(!is_done(&b[i]));
    ck_assert(!cr__job_queue_is_closed(q));
    cr__job_queue_close(q);
    ck_assert(cr__job_queue_is_closed(q));
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_int_eq(b[i].rc, -EPIPE);
    }
    cr__job_queue_destroy(q);
}
END_TEST

START_TEST(close_wakes_blocked_producers_and_their_jobs_stay_theirs)
{
    enum { N = 3 };
    struct cr_job_queue *q = new_queue(1);
    struct blocked_call b[N];
    pthread_t t[N];
    struct job j = job_of(100);

    ck_assert_int_eq(cr__job_queue_push(q, &j), 0);
    for (int i = 0; i < N; i++) {
        b[i] = (struct blocked_call){.q = q, .job = job_of(200 + (uintptr_t)i)};
        ck_assert_int_eq(pthread_create(&t[i], NULL, push_thread, &b[i]), 0);
    }
    usleep(SETTLE_US);
    cr__job_queue_close(q);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_int_eq(b[i].rc, -EPIPE);
    }
    /* Only the job queued before the close is in it. */
    ck_assert_uint_eq(cr__job_queue_depth(q), 1);
    cr__job_queue_destroy(q);
}
END_TEST

START_TEST(closed_queue_hands_out_what_is_left_then_fails)
{
    struct cr_job_queue *q = new_queue(4);
    struct job j;

    for (uintptr_t v = 1; v <= 3; v++) {
        j = job_of(v);
        ck_assert_int_eq(cr__job_queue_push(q, &j), 0);
    }
    cr__job_queue_close(q);
    cr__job_queue_close(q); /* idempotent */
    ck_assert_int_eq(cr__job_queue_push(q, &j), -EPIPE);
    ck_assert_int_eq(cr__job_queue_try_push(q, &j), -EPIPE);
    ck_assert_int_eq(cr__job_queue_pop(q, &j), 0);
    ck_assert_uint_eq((uintptr_t)j.ptr, 1);
    ck_assert_int_eq(cr__job_queue_try_pop(q, &j), 0);
    ck_assert_uint_eq((uintptr_t)j.ptr, 2);
    ck_assert_int_eq(cr__job_queue_pop(q, &j), 0);
    ck_assert_uint_eq((uintptr_t)j.ptr, 3);
    ck_assert_int_eq(cr__job_queue_pop(q, &j), -EPIPE);
    ck_assert_int_eq(cr__job_queue_try_pop(q, &j), -EPIPE);
    cr__job_queue_destroy(q);
}
END_TEST

/*
 * Stress: P producers each push ITEMS jobs (producer id, sequence) through a
 * queue far smaller than the load, so both sides block often; C consumers
 * pop until close. Every job must arrive exactly once, and each consumer
 * must see each producer's jobs in increasing order (FIFO per producer).
 */
enum { P = 4, C = 4, ITEMS = 20000, STRESS_CAPACITY = 8 };

struct stress {
    struct cr_job_queue *q;
    unsigned char seen[P][ITEMS]; /* atomic increments */
    int bad_order;                /* atomic */
};

struct producer_arg {
    struct stress *s;
    uintptr_t id;
};

static void *stress_producer(void *arg)
{
    struct producer_arg *pa = arg;

    for (uintptr_t i = 0; i < ITEMS; i++) {
        struct job j = {.ptr = (void *)(pa->id * ITEMS + i), .events = (unsigned)pa->id};
        int rc;

        /* Mix both push flavours; try_push falls back to the blocking one. */
        if ((i & 3) == 0 && cr__job_queue_try_push(pa->s->q, &j) == 0)
            continue;
        rc = cr__job_queue_push(pa->s->q, &j);
        if (rc != 0)
            abort(); /* the queue is closed only after every producer ended */
    }
    return NULL;
}

static void *stress_consumer(void *arg)
{
    struct stress *s = arg;
    long last[P];
    struct job j;

    for (int p = 0; p < P; p++)
        last[p] = -1;
    while (cr__job_queue_pop(s->q, &j) == 0) {
        uintptr_t v = (uintptr_t)j.ptr;
        uintptr_t p = v / ITEMS;
        long i = (long)(v % ITEMS);

        if (p >= P || j.events != p || i <= last[p]) {
            __atomic_store_n(&s->bad_order, 1, __ATOMIC_RELAXED);
            continue;
        }
        last[p] = i;
        __atomic_fetch_add(&s->seen[p][i], 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

START_TEST(many_producers_and_consumers_deliver_every_job_exactly_once)
{
    struct stress *s = calloc(1, sizeof(*s));
    struct producer_arg pa[P];
    pthread_t prod[P];
    pthread_t cons[C];

    ck_assert_ptr_nonnull(s);
    s->q = new_queue(STRESS_CAPACITY);
    for (int c = 0; c < C; c++)
        ck_assert_int_eq(pthread_create(&cons[c], NULL, stress_consumer, s), 0);
    for (int p = 0; p < P; p++) {
        pa[p] = (struct producer_arg){.s = s, .id = (uintptr_t)p};
        ck_assert_int_eq(pthread_create(&prod[p], NULL, stress_producer, &pa[p]), 0);
    }
    for (int p = 0; p < P; p++)
        ck_assert_int_eq(pthread_join(prod[p], NULL), 0);
    /* Consumers drain what is left after the close, then see -EPIPE. */
    cr__job_queue_close(s->q);
    for (int c = 0; c < C; c++)
        ck_assert_int_eq(pthread_join(cons[c], NULL), 0);
    ck_assert_int_eq(s->bad_order, 0);
    for (int p = 0; p < P; p++) {
        for (int i = 0; i < ITEMS; i++)
            ck_assert_msg(s->seen[p][i] == 1, "job %d/%d delivered %d times", p, i, s->seen[p][i]);
    }
    ck_assert_uint_eq(cr__job_queue_depth(s->q), 0);
    cr__job_queue_destroy(s->q);
    free(s);
}
END_TEST

Suite *job_queue_suite(void);
Suite *job_queue_suite(void)
{
    Suite *s = suite_create("job_queue");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, create_rejects_zero_and_overflowing_sizes);
    tcase_add_test(tc, copies_jobs_of_any_size_whole);
    tcase_add_test(tc, hands_out_jobs_in_fifo_order_across_the_wrap);
    tcase_add_test(tc, try_push_fails_when_full_and_try_pop_when_empty);
    tcase_add_test(tc, push_blocks_when_full_until_a_pop);
    tcase_add_test(tc, pop_blocks_when_empty_until_a_push);
    tcase_add_test(tc, close_wakes_blocked_consumers);
    tcase_add_test(tc, close_wakes_blocked_producers_and_their_jobs_stay_theirs);
    tcase_add_test(tc, closed_queue_hands_out_what_is_left_then_fails);
    tcase_add_test(tc, many_producers_and_consumers_deliver_every_job_exactly_once);
    suite_add_tcase(s, tc);
    return s;
}
