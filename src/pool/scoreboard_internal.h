/*
 * scoreboard_internal.h - the scoreboard of the process models (the Worker
 * Pool Manager's view of its workers; Apache's scoreboard): a slot per worker
 * process in anonymous shared memory (mmap MAP_SHARED | MAP_ANONYMOUS made
 * before the first fork, so it disappears with the last process: nothing is
 * left in /dev/shm after a stop, whatever killed the server).
 *
 * Writers: the manager claims a slot for a worker it forks (pid, generation,
 * tag, state STARTING), sets `stop` to tell it to finish, and frees it after
 * reaping; the worker writes its own state and counters, without locks,
 * with relaxed atomic stores and adds (one writer per field, readers take a
 * snapshot that may mix two moments of a slot, which a status page tolerates).
 *
 * Capacity: CR__SCOREBOARD_SLOTS(max_workers) slots, room for the current
 * generation at its maximum and for old generations still draining, so a
 * graceful restart never waits for a slot ("scoreboard is full" cannot
 * happen while at most three old generations drain at full size). When none
 * is free even so, the manager evicts the slot of the oldest stopping worker:
 * `tag` changes, the evicted worker sees it and stops writing to the slot.
 */
#ifndef CABRANK_SCOREBOARD_INTERNAL_H
#define CABRANK_SCOREBOARD_INTERNAL_H

#include <cabrank/scoreboard.h>
#include <cabrank/stats.h>

#include "pool/timeline_internal.h"

#define CR__SCOREBOARD_SLOTS(max_workers) (4u * (unsigned)(max_workers) + 4u)

/* States a worker's timeline lane keeps (a power of two). */
#define CR__SLOT_EVENTS 128u

struct cr__slot {
    /* Written by the manager (pid by the worker too, first thing). */
    int pid;
    unsigned generation;
    uint32_t tag; /* changes at each claim: a worker's claim check */
    int stop;     /* 0, CR__STOP_GRACEFUL or CR__STOP_NOW */
    /* Written by the worker (the manager writes STARTING, DEAD, FREE). */
    int state; /* enum cr_worker_state */
    unsigned busy_threads;
    unsigned parked; /* prefork: open connections no thread serves now (between requests) */
    uint64_t connections;
    uint64_t requests;
    uint64_t bytes;
    uint64_t last_request_ns; /* CLOCK_REALTIME */
    uint64_t busy_since_ns;   /* CLOCK_MONOTONIC: start of the current connection */
    /* Written by the worker: its timeline lane (timeline_internal.h), the
     * states it went through; the worker restarts the count at its start. */
    uint64_t tl_head;
    struct cr__timeline_event tl_ev[CR__SLOT_EVENTS];
} __attribute__((aligned(64)));

/*
 * Server-wide figures of a process model, in the scoreboard's mapping so that
 * a status page served by a worker reads them as they are now, not as they
 * were when that worker was forked. The workers add the driver's bytes and
 * requests and their accepted connections; the manager writes the rest.
 * Relaxed atomics.
 */
struct cr__scoreboard_totals {
    uint64_t accepted;
    uint64_t bytes_in;
    uint64_t bytes_out;
    uint64_t requests;
    uint64_t restarts;
    uint64_t crashes;   /* workers that died without being told to stop */
    unsigned processes; /* live (unreaped) workers */
    unsigned generation;
};

struct cr__scoreboard;

/* Maps a scoreboard of nslots free slots. *out returns owned. -errno. */
int cr__scoreboard_create(struct cr__scoreboard **out, unsigned nslots);

/* Unmaps it (in the master after the last worker is reaped). NULL-safe. */
void cr__scoreboard_destroy(struct cr__scoreboard *sb);

unsigned cr__scoreboard_size(const struct cr__scoreboard *sb);
struct cr__slot *cr__scoreboard_slot(struct cr__scoreboard *sb, unsigned i);

/*
 * Manager: claims a free slot for a worker of generation gen about to be
 * forked (state STARTING, counters zero, a new tag). Returns its index, or
 * -ENOSPC when every slot is taken (the caller may evict a stopping one with
 * cr__scoreboard_evict and retry).
 */
int cr__scoreboard_claim(struct cr__scoreboard *sb, unsigned gen);

/* Manager: frees slot i (its worker is reaped). A worker whose slot was
 * evicted no longer has one: check cr__scoreboard_owns(sb, i, its tag)
 * before releasing, or the slot's new worker loses it. */
void cr__scoreboard_release(struct cr__scoreboard *sb, unsigned i);

/* Manager: frees the slot of the oldest-generation STOPPING worker (its tag
 * changes so that worker stops using it). The index, or -ENOSPC. */
int cr__scoreboard_evict(struct cr__scoreboard *sb);

/* Worker: true while slot i is still the one claimed with tag. */
bool cr__scoreboard_owns(struct cr__scoreboard *sb, unsigned i, uint32_t tag);

/* Copies the slots in use into e (at most max; busy_ns computed now);
 * returns how many are in use. Any process. */
unsigned cr__scoreboard_copy(struct cr__scoreboard *sb, struct cr_scoreboard_entry *e,
                             unsigned max);

/* The scoreboard's server-wide figures (shared like the slots). */
struct cr__scoreboard_totals *cr__scoreboard_totals(struct cr__scoreboard *sb);

/* Fills st's accepted, bytes, requests, processes, generation, restarts and
 * crashes from the totals, and open_connections as the busy threads and
 * parked connections of the slots in use: derived, so a worker killed -9 leaves no connection
 * counted (its slot is released when it is reaped). Lock-free; any process. */
void cr__scoreboard_stats(struct cr__scoreboard *sb, struct cr_server_stats *st);

/* Counts slots of generation gen in state (e.g. idle workers now). */
unsigned cr__scoreboard_count(struct cr__scoreboard *sb, unsigned gen, enum cr_worker_state st);

/* The slot's timeline lane belongs to the calling worker from now on.
 * The worker only. */
static inline void cr__slot_timeline_start(struct cr__slot *s)
{
    /* Release: a reader that sees the count restart sees none of the old
     * events as new ones. */
    __atomic_store_n(&s->tl_head, 0, __ATOMIC_RELEASE);
}

/* Records on the slot's lane that its worker went into state at now (a
 * cr_clock_now_ns() reading). The worker only. */
static inline void cr__slot_timeline_note(struct cr__slot *s, uint64_t now, int state)
{
    cr__timeline_write(&s->tl_head, s->tl_ev, CR__SLOT_EVENTS - 1, now, state, -1);
}

/* The role (role.h) a worker's state stands for in cr_server_stats: IDLE
 * a follower, LISTENING the leader, BUSY processing. Thread-safe. */
enum cr_role cr__scoreboard_role(int state);

/* Adds to v a lane "pid <pid>" per slot in use, the states its worker
 * went through from since_ns on. -ENOMEM. Thread-safe. */
int cr__scoreboard_timeline(struct cr__scoreboard *sb, struct cr_timeline_view *v,
                            uint64_t since_ns);

#endif /* CABRANK_SCOREBOARD_INTERNAL_H */
