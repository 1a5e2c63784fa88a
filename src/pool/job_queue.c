/*
 * job_queue.c - the bounded synchronized job queue (job_queue_internal.h): a
 * ring of fixed-size jobs allocated once (jobs are copied in and out with
 * memcpy; they are a few words), one mutex, and two condition
 * variables: not_empty for consumers, not_full for producers (the Monitor
 * Object of POSA2). Used by the hshr model between its reactor thread and its
 * workers and by the tpc model between its acceptor and its connection
 * threads; any thread may call it. Owns the ring and its synchronization
 * objects; the jobs' pointers are the callers'.
 *
 * Lock order: q->lock is a leaf; nothing else is taken while it is held.
 *
 * Wake-ups: each side counts its sleepers, so a push or pop with nobody
 * waiting makes no futex call. A push signals one consumer per job (not only
 * on the empty-to-non-empty edge): with several pushes before the first
 * consumer runs, signalling only the edge would leave jobs queued behind
 * sleeping consumers. Close broadcasts both conditions.
 */
#include "pool/job_queue_internal.h"

#include "os/sync_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct cr_job_queue {
    /* Immutable after create. */
    size_t capacity;
    size_t job_size;
    unsigned char *ring; /* capacity * job_size bytes */

    struct cr_mutex lock;
    pthread_cond_t not_empty;
    pthread_cond_t not_full;
    /* Protected by lock. */
    size_t head; /* index of the oldest job */
    unsigned consumers_waiting;
    unsigned producers_waiting;
    bool closed;
    /* Written under lock with relaxed atomic stores; read without it by
     * cr__job_queue_depth() (a statistic, orders nothing). */
    size_t len;
};

int cr__job_queue_create(struct cr_job_queue **out, size_t capacity, size_t job_size)
{
    struct cr_job_queue *q;
    int err;

    *out = NULL;
    if (capacity == 0 || job_size == 0 || capacity > SIZE_MAX / job_size)
        return -EINVAL;
    q = calloc(1, sizeof(*q));
    if (q == NULL)
        return -ENOMEM;
    q->ring = calloc(capacity, job_size);
    if (q->ring == NULL) {
        err = -ENOMEM;
        goto out_free_queue;
    }
    q->capacity = capacity;
    q->job_size = job_size;
    err = cr_mutex_init(&q->lock);
    if (err < 0)
        goto out_free_ring;
    err = cr_cond_init(&q->not_empty);
    if (err < 0)
        goto out_fini_lock;
    err = cr_cond_init(&q->not_full);
    if (err < 0)
        goto out_destroy_not_empty;
    *out = q;
    return 0;

out_destroy_not_empty:
    cr_cond_fini(&q->not_empty);
out_fini_lock:
    cr_mutex_fini(&q->lock);
out_free_ring:
    free(q->ring);
out_free_queue:
    free(q);
    return err;
}

void cr__job_queue_destroy(struct cr_job_queue *q)
{
    if (q == NULL)
        return;
    cr_cond_fini(&q->not_full);
    cr_cond_fini(&q->not_empty);
    cr_mutex_fini(&q->lock);
    free(q->ring);
    free(q);
}

/* Appends a copy of job. Caller holds q->lock; the queue is open and not
 * full. */
static void append(struct cr_job_queue *q, const void *job)
{
    size_t tail;

    cr_mutex_assert_held(&q->lock);
    assert(!q->closed && q->len < q->capacity);
    tail = q->head + q->len;
    if (tail >= q->capacity)
        tail -= q->capacity;
    memcpy(q->ring + tail * q->job_size, job, q->job_size);
    __atomic_store_n(&q->len, q->len + 1, __ATOMIC_RELAXED);
    if (q->consumers_waiting > 0)
        cr_cond_signal(&q->not_empty);
}

/* Removes the oldest job into out. Caller holds q->lock; the queue is not
 * empty. */
static void take(struct cr_job_queue *q, void *out)
{
    cr_mutex_assert_held(&q->lock);
    assert(q->len > 0);
    memcpy(out, q->ring + q->head * q->job_size, q->job_size);
    q->head = q->head + 1 == q->capacity ? 0 : q->head + 1;
    __atomic_store_n(&q->len, q->len - 1, __ATOMIC_RELAXED);
    if (q->producers_waiting > 0)
        cr_cond_signal(&q->not_full);
}

int cr__job_queue_push(struct cr_job_queue *q, const void *job)
{
    int err = 0;

    cr_mutex_lock(&q->lock);
    while (!q->closed && q->len == q->capacity) {
        q->producers_waiting++;
        cr_cond_wait(&q->not_full, &q->lock);
        q->producers_waiting--;
    }
    if (q->closed)
        err = -EPIPE;
    else
        append(q, job);
    cr_mutex_unlock(&q->lock);
    return err;
}

int cr__job_queue_try_push(struct cr_job_queue *q, const void *job)
{
    int err = 0;

    cr_mutex_lock(&q->lock);
    if (q->closed)
        err = -EPIPE;
    else if (q->len == q->capacity)
        err = -EAGAIN;
    else
        append(q, job);
    cr_mutex_unlock(&q->lock);
    return err;
}

int cr__job_queue_pop(struct cr_job_queue *q, void *out)
{
    int err = 0;

    cr_mutex_lock(&q->lock);
    while (!q->closed && q->len == 0) {
        q->consumers_waiting++;
        cr_cond_wait(&q->not_empty, &q->lock);
        q->consumers_waiting--;
    }
    /* Closed: what is left is still handed out, so no job is lost. */
    if (q->len > 0)
        take(q, out);
    else
        err = -EPIPE;
    cr_mutex_unlock(&q->lock);
    return err;
}

int cr__job_queue_try_pop(struct cr_job_queue *q, void *out)
{
    int err = 0;

    cr_mutex_lock(&q->lock);
    if (q->len > 0)
        take(q, out);
    else
        err = q->closed ? -EPIPE : -EAGAIN;
    cr_mutex_unlock(&q->lock);
    return err;
}

void cr__job_queue_close(struct cr_job_queue *q)
{
    cr_mutex_lock(&q->lock);
    if (!q->closed) {
        q->closed = true;
        cr_cond_broadcast(&q->not_empty);
        cr_cond_broadcast(&q->not_full);
    }
    cr_mutex_unlock(&q->lock);
}

bool cr__job_queue_is_closed(struct cr_job_queue *q)
{
    bool closed;

    cr_mutex_lock(&q->lock);
    closed = q->closed;
    cr_mutex_unlock(&q->lock);
    return closed;
}

size_t cr__job_queue_depth(const struct cr_job_queue *q)
{
    /* Pairs with the relaxed stores in append and take: a count, no data. */
    return __atomic_load_n(&q->len, __ATOMIC_RELAXED);
}

size_t cr__job_queue_capacity(const struct cr_job_queue *q)
{
    return q->capacity;
}
