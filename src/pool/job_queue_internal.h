/*
 * job_queue_internal.h - the Job Queue (Gröne & Tabeling) / the synchronized
 * queue of Half-Sync/Half-Reactive (POSA2): a bounded, blocking FIFO of small
 * fixed-size jobs between producer and consumer threads. Used by the hshr
 * model (reactor thread -> workers) and the tpc model (acceptor -> cached
 * connection threads). Library-internal.
 *
 * A job is a small fixed-size value (its size given at create: a connection
 * pointer for tpc, a {connection, events} pair for hshr) copied into a ring
 * allocated once at create: pushing and popping never allocate. What a job
 * refers to is the caller's business; the queue only moves ownership of it
 * from the pusher to the popper.
 *
 * Closing is one-way: pushes fail from then on and wake every blocked
 * producer; pops first drain what is left, then fail, and wake every blocked
 * consumer. So a closed queue never loses a job silently: whoever closes it
 * can drain it with cr__job_queue_try_pop() once its consumers are gone.
 */
#ifndef CABRANK_JOB_QUEUE_INTERNAL_H
#define CABRANK_JOB_QUEUE_INTERNAL_H

#include <cabrank/common.h>

struct cr_job_queue;

/*
 * Creates a queue of capacity jobs (> 0) of job_size bytes each (> 0). *out
 * returns owned. -EINVAL for a zero or overflowing size, -ENOMEM, or -errno
 * of the mutex/condvar init. Thread-safe.
 */
CR_MUST_CHECK int cr__job_queue_create(struct cr_job_queue **out, size_t capacity, size_t job_size);

/* Frees the queue; NULL-safe. Jobs still in it are dropped (their pointers
 * are the caller's). No thread may be inside a queue call. */
void cr__job_queue_destroy(struct cr_job_queue *q);

/*
 * Appends a copy of job_size bytes at job (borrowed), blocking while the
 * queue is full. 0, or -EPIPE if the queue is closed (before or while
 * waiting); the job was then not queued and stays the caller's. Thread-safe.
 */
CR_MUST_CHECK int cr__job_queue_push(struct cr_job_queue *q, const void *job);

/* As cr__job_queue_push() but never blocks: -EAGAIN when full. Thread-safe. */
CR_MUST_CHECK int cr__job_queue_try_push(struct cr_job_queue *q, const void *job);

/*
 * Removes the oldest job into out (job_size bytes), blocking while the queue
 * is empty and open. 0, or -EPIPE once the queue is closed and empty.
 * Thread-safe.
 */
CR_MUST_CHECK int cr__job_queue_pop(struct cr_job_queue *q, void *out);

/* As cr__job_queue_pop() but never blocks: -EAGAIN when empty and open.
 * Thread-safe. */
CR_MUST_CHECK int cr__job_queue_try_pop(struct cr_job_queue *q, void *out);

/* Closes the queue and wakes every blocked producer and consumer. Idempotent.
 * Thread-safe. */
void cr__job_queue_close(struct cr_job_queue *q);

/* True once cr__job_queue_close() was called. Thread-safe. */
bool cr__job_queue_is_closed(struct cr_job_queue *q);

/* Jobs queued now; a snapshot that may be stale when it returns. Thread-safe. */
size_t cr__job_queue_depth(const struct cr_job_queue *q);

/* The capacity given at create. Thread-safe. */
size_t cr__job_queue_capacity(const struct cr_job_queue *q);

#endif /* CABRANK_JOB_QUEUE_INTERNAL_H */
