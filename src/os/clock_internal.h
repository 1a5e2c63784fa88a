/*
 * clock_internal.h - the dispatchers' side of cr_clock_event_ns(): a thread
 * that runs a handler for an event enters the event's time, and leaves it
 * when the handler returns. Library-internal; per thread, so any thread.
 */
#ifndef CABRANK_CLOCK_INTERNAL_H
#define CABRANK_CLOCK_INTERNAL_H

#include <stdint.h>

/* Makes taken_ns (a cr_clock_now_ns() reading) the calling thread's event
 * time, and drops a reading lent before it; returns the time it replaces, for cr__clock_event_leave
 * (a handler may dispatch events of its own). */
uint64_t cr__clock_event_enter(uint64_t taken_ns);

/* The reading the handler of the event this thread dispatched last lent
 * with cr_clock_end_ns(), or 0 if it lent none (or waited after): for the
 * thread's next take. Clears it: each reading is lent once. */
uint64_t cr__clock_end_take(void);

/* Restores the event time cr__clock_event_enter returned. */
void cr__clock_event_leave(uint64_t outer);

/* A handler that waited (cr_lf_pool_wait) resumes: if the calling thread has
 * an event time, it becomes now (a cr_clock_now_ns() reading), so timeouts
 * the handler sets next do not count the wait; a reading lent before the
 * wait is dropped. */
void cr__clock_event_resume(uint64_t now);

#endif /* CABRANK_CLOCK_INTERNAL_H */
