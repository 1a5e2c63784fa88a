/*
 * accept_lock_internal.h - the accept lock of the prefork model: worker
 * processes take turns on the listening sockets, and the one holding the
 * lock is the leader of Leader/Followers across processes (Apache's accept
 * mutex). Created by the master before the first fork, so every worker
 * inherits it; used by the workers' threads (one thread per process at a
 * time: the model takes an in-process mutex first). Library-internal.
 *
 * Kinds (cr_server_config.accept_lock):
 *   pthread    a PTHREAD_PROCESS_SHARED, PTHREAD_MUTEX_ROBUST mutex in its
 *              own anonymous shared mapping: a holder that dies (kill -9)
 *              hands the next taker EOWNERDEAD, which recovers it.
 *   fcntl      a POSIX record lock (F_SETLKW) on an anonymous file
 *              (memfd_create): nothing on disk or in /dev/shm; the kernel
 *              releases it when its holder dies.
 *   none       no lock: every worker waits on the listeners (the model uses
 *              epoll with EPOLLEXCLUSIVE, so one waiter is woken per
 *              connection); acquire always succeeds at once.
 *   reuseport  no lock either: each worker accepts on its own SO_REUSEPORT
 *              copy of each listener and the kernel spreads connections.
 *
 * Timed acquisition (a worker told to stop must not wait forever for a lock
 * held by a leader that waits for connections): pthread uses
 * pthread_mutex_timedlock; fcntl arms a per-thread timer whose signal,
 * CR__ACCEPT_LOCK_SIGNAL, interrupts F_SETLKW (its handler does nothing and
 * is installed without SA_RESTART by cr__accept_lock_child_init).
 */
#ifndef CABRANK_ACCEPT_LOCK_INTERNAL_H
#define CABRANK_ACCEPT_LOCK_INTERNAL_H

#include <cabrank/common.h>
#include <signal.h>

/* The signal that interrupts a timed F_SETLKW, in worker processes only. */
#define CR__ACCEPT_LOCK_SIGNAL (SIGRTMIN + 3)

enum cr__accept_lock_kind {
    CR__ACCEPT_LOCK_PTHREAD = 0,
    CR__ACCEPT_LOCK_FCNTL,
    CR__ACCEPT_LOCK_NONE,
    CR__ACCEPT_LOCK_REUSEPORT,
};

struct cr__accept_lock;

/* "pthread", "fcntl", "none" or "reuseport" into *out; -EINVAL otherwise.
 * Thread-safe. */
int cr__accept_lock_parse(const char *name, enum cr__accept_lock_kind *out);

/*
 * Master, before forking workers: creates a lock of kind (the shared
 * mapping or the anonymous file). *out returns owned. -errno. Thread-safe.
 */
int cr__accept_lock_create(struct cr__accept_lock **out, enum cr__accept_lock_kind kind);

/*
 * Frees the lock: unmaps, closes. In the master once no worker uses it; a
 * worker need not call it (its copy goes with the process). NULL-safe.
 */
void cr__accept_lock_destroy(struct cr__accept_lock *l);

enum cr__accept_lock_kind cr__accept_lock_kind(const struct cr__accept_lock *l);

/* True for the kinds that exclude (pthread, fcntl). */
bool cr__accept_lock_is_exclusive(const struct cr__accept_lock *l);

/*
 * In each worker process, after fork and before the first acquire: fcntl
 * installs the handler of CR__ACCEPT_LOCK_SIGNAL (does nothing, no
 * SA_RESTART). 0 or -errno. Before the worker's threads start.
 */
int cr__accept_lock_child_init(struct cr__accept_lock *l);

/*
 * Takes the lock, waiting at most timeout_ms. 0: held (also after taking
 * it over from a holder that died); -ETIMEDOUT; -errno (-ENOTRECOVERABLE: a
 * corrupted mutex). none and reuseport: 0 at once. One thread of a process
 * at a time (the caller serialises its threads).
 */
int cr__accept_lock_acquire(struct cr__accept_lock *l, uint64_t timeout_ms);

/* Releases a lock taken by cr__accept_lock_acquire. The holder only. */
void cr__accept_lock_release(struct cr__accept_lock *l);

/* Times a taker recovered the pthread mutex from a dead holder (any
 * process; shared memory). Thread-safe. */
uint64_t cr__accept_lock_recoveries(const struct cr__accept_lock *l);

#endif /* CABRANK_ACCEPT_LOCK_INTERNAL_H */
