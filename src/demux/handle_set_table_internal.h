/*
 * handle_set_table_internal.h - the registration table that the poll and
 * select backends share (src/demux/handle_set_table.c). Neither poll nor select
 * keeps registrations in the kernel, so the table keeps them: indexed by fd,
 * grown on demand by add, under one mutex, with a generation per entry. It
 * also owns the wait protocol around the backend's system call: snapshot the
 * armed entries under the lock, wait without it, translate the results under
 * it, dropping those whose registration was removed, changed or disarmed
 * meanwhile, and disarm the one-shot handles reported. An eventfd in every
 * snapshot wakes the waiter both for cr_handle_set_wake() and after
 * add/modify/remove, so the waiter rebuilds its snapshot and a handle added
 * while it waits is watched by that wait.
 *
 * A backend's set is a struct that begins with struct cr_hs_table (which
 * begins with struct cr_handle_set), opened by cr__hs_table_open(). Its
 * cr_handle_set_ops point at the cr__hs_table_* functions below; its
 * struct cr_hs_table_hooks do what only it knows: build its wait set, make
 * the system call, read one result. Library-internal.
 *
 * Lock order: t->lock is a leaf; nothing else is locked while it is held.
 * Any thread calls add/modify/remove/wake; one thread at a time calls wait.
 */
#ifndef CABRANK_HANDLE_SET_TABLE_INTERNAL_H
#define CABRANK_HANDLE_SET_TABLE_INTERNAL_H

#include "demux/handle_set_internal.h"

#include "os/sync_internal.h"

struct cr_hs_table;
struct cr_hs_reg;

/*
 * What a backend adds to the table. The backend's state for one wait (its
 * pollfd array or fd_sets) is owned by the waiting thread: written by
 * snapshot, used by wait, read by ready and report_closed.
 */
struct cr_hs_table_hooks {
    /*
     * Builds the backend's wait set: t->wakefd for reading, plus the armed
     * entries visited with cr__hs_table_snapshot_next(). Returns the number of
     * slots ready() will be asked about, or -errno. Caller holds t->lock.
     */
    int (*snapshot)(struct cr_hs_table *t);
    /*
     * Waits on that set without the lock, up to timeout_ms (-1: forever).
     * Returns the system call's count of ready handles, wakefd included, or
     * -errno; when positive, *wakefd_ready says whether wakefd is among them.
     * Waiting thread only.
     */
    int (*wait)(struct cr_hs_table *t, int timeout_ms, bool *wakefd_ready);
    /*
     * The CR_EV_* events the wait found at slot (below the count snapshot
     * returned), 0 if none or the slot is wakefd; *fd returns the slot's
     * handle. Caller holds t->lock.
     */
    unsigned (*ready)(struct cr_hs_table *t, size_t slot, int *fd);
    /*
     * Optional. After wait failed with -EBADF: reports, through
     * cr__hs_table_report(), the registered handles of the snapshot that were
     * closed without remove. Returns the events filled, or -EBADF if the set
     * itself is broken; the wait returns that, except a 0 with no wake-up,
     * after which it rebuilds and waits again. NULL: -EBADF ends the wait as
     * any other error does. Caller holds t->lock.
     */
    int (*report_closed)(struct cr_hs_table *t, struct cr_handle_event *evs, int max);
};

struct cr_hs_table {
    struct cr_handle_set base;
    /* Immutable after open. */
    const struct cr_hs_table_hooks *hooks; /* borrowed, static */
    int wakefd;

    struct cr_mutex lock;
    /* Protected by lock. */
    struct cr_hs_reg *regs; /* indexed by fd; cap entries */
    size_t cap;
    size_t nregistered;
    /* True between building the snapshot and translating its results; a
     * change to the table then writes wakefd so the waiter rebuilds. */
    bool waiting;

    /* Set by cr_handle_set_wake() before it writes wakefd (release), taken
     * by the waiter with an acquire exchange, so a wait returns early only for
     * an explicit wake-up and simply rebuilds after a table change. */
    int wake_pending;

    /* Owned by the waiting thread. Slot where translation starts: just past
     * the last one reported, so a small max does not starve the slots after
     * it. */
    size_t rotor;
};

/*
 * Allocates size bytes (the backend's struct, which begins with struct
 * cr_hs_table), zeroed, and opens the table in them: its eventfd and lock.
 * ops and hooks are borrowed (static). *out returns owned, freed by
 * cr__hs_table_close(). -ENOMEM or -errno of eventfd/mutex init. Thread-safe.
 */
CR_MUST_CHECK int cr__hs_table_open(struct cr_handle_set **out, size_t size,
                                    const struct cr_handle_set_ops *ops,
                                    const struct cr_hs_table_hooks *hooks);

/* Closes the eventfd and frees the table and the struct around it. A backend
 * frees what it allocated itself first. No thread may be waiting. */
void cr__hs_table_close(struct cr_handle_set *hs);
unsigned cr__hs_table_fds(const struct cr_handle_set *hs, int *fds);

/*
 * The cr_handle_set_ops add/modify/remove/wait/wake of a table backend, with
 * the contract of handle_set.h; handle_set.c has checked the arguments. add
 * takes any fd the backend can hold (the backend refuses others first).
 * Thread-safe, but wait: one thread at a time.
 */
CR_MUST_CHECK int cr__hs_table_add(struct cr_handle_set *hs, int fd, unsigned interest,
                                   unsigned flags, uint32_t tag);
CR_MUST_CHECK int cr__hs_table_modify(struct cr_handle_set *hs, int fd, unsigned interest,
                                      unsigned flags, uint32_t tag);
CR_MUST_CHECK int cr__hs_table_remove(struct cr_handle_set *hs, int fd);
CR_MUST_CHECK int cr__hs_table_wait(struct cr_handle_set *hs, struct cr_handle_event *evs, int max,
                                    int timeout_ms, uint64_t since_ns);
void cr__hs_table_wake(struct cr_handle_set *hs);

/*
 * For the snapshot hook: the first armed entry above fd prev (-1 to start),
 * in fd order, or -1 when there is none; *interest returns its mask. Records
 * the entry's generation as the one this snapshot watches, which
 * cr__hs_table_report() compares. Caller holds t->lock.
 */
int cr__hs_table_snapshot_next(struct cr_hs_table *t, int prev, unsigned *interest);

/*
 * Fills *ev with fd's events and tag if fd's registration is still the one
 * the snapshot watched and is armed, and disarms it if one-shot. Returns the
 * number of events filled, 1 or 0. Caller holds t->lock.
 */
int cr__hs_table_report(struct cr_hs_table *t, int fd, unsigned events, struct cr_handle_event *ev);

#endif /* CABRANK_HANDLE_SET_TABLE_INTERNAL_H */
