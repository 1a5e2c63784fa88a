/*
 * accept_lock.c - the prefork model's accept lock (accept_lock_internal.h):
 * a robust process-shared pthread mutex in anonymous shared memory, a POSIX
 * record lock on an anonymous file, or nothing. Created by the master's
 * manager before it forks; taken and released by the workers' threads, one
 * per process at a time. Owns the mapping and the file descriptor.
 *
 * Why a robust mutex: a worker killed (kill -9, a crash) while it leads
 * would otherwise leave the mutex locked for ever and the whole pool stuck
 * behind it. With PTHREAD_MUTEX_ROBUST the next taker gets EOWNERDEAD, marks
 * it consistent and leads; nothing the mutex protects needs repair (it
 * guards the right to wait on the listeners, not data).
 *
 * Why memfd_create for fcntl: the record lock needs a file, and an
 * anonymous one cannot be left behind on disk or in /dev/shm whatever kills
 * the server. Classic (process-owned) locks, not OFD locks: every worker
 * inherits the same open file description, which OFD locks would treat as
 * one owner; process-owned locks are per worker, and the threads of a
 * worker are serialised by the model before they get here. The kernel drops
 * a dead process's locks.
 *
 * Why a timer signal: F_SETLKW has no timeout, and a follower waiting
 * behind a leader that waits for connections on an idle server would never
 * look at its stop flag. A POSIX timer aimed at the waiting thread
 * (SIGEV_THREAD_ID), repeating every timeout until deleted, interrupts the
 * wait with EINTR; a tick that fires before F_SETLKW is entered is covered
 * by the next one. The timer exists only while the lock is contended (a
 * free lock is taken with F_SETLK first). A tick pending when the timer is
 * deleted is delivered on the way out of timer_delete, still inside this
 * file, to a handler that does nothing.
 */
#include "net/accept_lock_internal.h"

#include <cabrank/clock.h>

#include <assert.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifdef CR_TSAN
#include <sanitizer/tsan_interface.h>
#endif

struct shared_mutex {
    pthread_mutex_t mutex;
    /* Relaxed atomic: recoveries from a dead holder, any process. */
    uint64_t recoveries;
};

struct cr__accept_lock {
    /* Immutable after create. */
    enum cr__accept_lock_kind kind;
    struct shared_mutex *shm; /* pthread: its own MAP_SHARED mapping */
    int fd;                   /* fcntl: the anonymous file */
};

static const char *const kind_names[] = {
    [CR__ACCEPT_LOCK_PTHREAD] = "pthread",
    [CR__ACCEPT_LOCK_FCNTL] = "fcntl",
    [CR__ACCEPT_LOCK_NONE] = "none",
    [CR__ACCEPT_LOCK_REUSEPORT] = "reuseport",
};

int cr__accept_lock_parse(const char *name, enum cr__accept_lock_kind *out)
{
    for (size_t i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++) {
        if (name != NULL && strcmp(name, kind_names[i]) == 0) {
            *out = (enum cr__accept_lock_kind)i;
            return 0;
        }
    }
    return -EINVAL;
}

static int shared_mutex_create(struct shared_mutex **out)
{
    pthread_mutexattr_t attr;
    struct shared_mutex *shm;
    int err;

    shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED)
        return -errno;
    err = -pthread_mutexattr_init(&attr);
    if (err < 0)
        goto out_unmap;
    err = -pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    if (err == 0)
        err = -pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    if (err == 0)
        err = -pthread_mutex_init(&shm->mutex, &attr);
    pthread_mutexattr_destroy(&attr);
    if (err < 0)
        goto out_unmap;
    *out = shm;
    return 0;

out_unmap:
    munmap(shm, sizeof(*shm));
    return err;
}

int cr__accept_lock_create(struct cr__accept_lock **out, enum cr__accept_lock_kind kind)
{
    struct cr__accept_lock *l;
    int err;

    *out = NULL;
    l = calloc(1, sizeof(*l));
    if (l == NULL)
        return -ENOMEM;
    l->kind = kind;
    l->fd = -1;
    switch (kind) {
    case CR__ACCEPT_LOCK_PTHREAD:
        err = shared_mutex_create(&l->shm);
        if (err < 0)
            goto out_free;
        break;
    case CR__ACCEPT_LOCK_FCNTL:
        l->fd = memfd_create("cabrank-accept-lock", MFD_CLOEXEC);
        if (l->fd < 0) {
            err = -errno;
            goto out_free;
        }
        break;
    case CR__ACCEPT_LOCK_NONE:
    case CR__ACCEPT_LOCK_REUSEPORT:
        break;
    default:
        err = -EINVAL;
        goto out_free;
    }
    *out = l;
    return 0;

out_free:
    free(l);
    return err;
}

void cr__accept_lock_destroy(struct cr__accept_lock *l)
{
    if (l == NULL)
        return;
    if (l->shm != NULL) {
        /* No worker is left: nobody holds it. */
        pthread_mutex_destroy(&l->shm->mutex);
        munmap(l->shm, sizeof(*l->shm));
    }
    if (l->fd >= 0)
        close(l->fd);
    free(l);
}

enum cr__accept_lock_kind cr__accept_lock_kind(const struct cr__accept_lock *l)
{
    return l->kind;
}

bool cr__accept_lock_is_exclusive(const struct cr__accept_lock *l)
{
    return l->kind == CR__ACCEPT_LOCK_PTHREAD || l->kind == CR__ACCEPT_LOCK_FCNTL;
}

/* Only interrupts F_SETLKW (no SA_RESTART). */
static void on_lock_timer(int signo)
{
    CR_UNUSED(signo);
}

int cr__accept_lock_child_init(struct cr__accept_lock *l)
{
    struct sigaction sa;

    if (l->kind != CR__ACCEPT_LOCK_FCNTL)
        return 0;
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_lock_timer;
    if (sigaction(CR__ACCEPT_LOCK_SIGNAL, &sa, NULL) < 0)
        return -errno;
    return 0;
}

static int mutex_acquire(struct cr__accept_lock *l, uint64_t timeout_ms)
{
    int rc;

    if (timeout_ms == 0) {
        rc = pthread_mutex_trylock(&l->shm->mutex);
        if (rc == EBUSY)
            rc = ETIMEDOUT;
    } else {
        /* CLOCK_REALTIME, as timedlock wants: a clock step only lengthens
         * or shortens one bounded wait, after which the caller comes back.
         * (pthread_mutex_clocklock would take CLOCK_MONOTONIC, but the
         * sanitizers do not intercept it, and TSan must see this lock.) */
        struct timespec ts;
        uint64_t abs_ns;

        clock_gettime(CLOCK_REALTIME, &ts);
        abs_ns = (uint64_t)ts.tv_sec * CR_NSEC_PER_SEC + (uint64_t)ts.tv_nsec +
                 timeout_ms * CR_NSEC_PER_MSEC;
        ts.tv_sec = (time_t)(abs_ns / CR_NSEC_PER_SEC);
        ts.tv_nsec = (long)(abs_ns % CR_NSEC_PER_SEC);
        rc = pthread_mutex_timedlock(&l->shm->mutex, &ts);
    }
    if (rc == EOWNERDEAD) {
        /* The holder died while it led: we hold the mutex now. */
        rc = pthread_mutex_consistent(&l->shm->mutex);
        if (rc != 0) {
            pthread_mutex_unlock(&l->shm->mutex);
            return -rc;
        }
#ifdef CR_TSAN
        /* TSan's timedlock interceptor records only a return of 0 as a
         * lock (its pthread_mutex_lock one repairs EOWNERDEAD): tell it. */
        if (timeout_ms != 0) {
            __tsan_mutex_pre_lock(&l->shm->mutex, __tsan_mutex_try_lock);
            __tsan_mutex_post_lock(&l->shm->mutex, __tsan_mutex_try_lock, 0);
        }
#endif
        /* Relaxed: a statistics counter. */
        __atomic_fetch_add(&l->shm->recoveries, 1, __ATOMIC_RELAXED);
    }
    return -rc;
}

static int record_lock(int fd, short type, int cmd)
{
    struct flock fl = {
        .l_type = type,
        .l_whence = SEEK_SET,
        .l_start = 0,
        .l_len = 1,
    };

    return fcntl(fd, cmd, &fl) == 0 ? 0 : -errno;
}

static int file_acquire(struct cr__accept_lock *l, uint64_t timeout_ms)
{
    struct sigevent sev;
    struct itimerspec its;
    timer_t timer;
    uint64_t deadline;
    int err;

    err = record_lock(l->fd, F_WRLCK, F_SETLK);
    if (err != -EAGAIN && err != -EACCES)
        return err; /* taken, or a real error */
    if (timeout_ms == 0)
        return -ETIMEDOUT;

    memset(&sev, 0, sizeof(sev));
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = CR__ACCEPT_LOCK_SIGNAL;
    sev._sigev_un._tid = gettid();
    if (timer_create(CLOCK_MONOTONIC, &sev, &timer) < 0)
        return -errno;
    memset(&its, 0, sizeof(its));
    its.it_value.tv_sec = (time_t)(timeout_ms / 1000);
    its.it_value.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
    its.it_interval = its.it_value;
    deadline = cr_clock_now_ns() + timeout_ms * CR_NSEC_PER_MSEC;
    if (timer_settime(timer, 0, &its, NULL) < 0) {
        err = -errno;
        goto out_delete;
    }
    for (;;) {
        err = record_lock(l->fd, F_WRLCK, F_SETLKW);
        if (err != -EINTR)
            break;
        /* Our tick, or another signal (a stop): go round until the
         * deadline, which the ticks guarantee to notice. */
        if (cr_clock_now_ns() >= deadline) {
            err = -ETIMEDOUT;
            break;
        }
    }
out_delete:
    timer_delete(timer);
    return err;
}

int cr__accept_lock_acquire(struct cr__accept_lock *l, uint64_t timeout_ms)
{
    switch (l->kind) {
    case CR__ACCEPT_LOCK_PTHREAD:
        return mutex_acquire(l, timeout_ms);
    case CR__ACCEPT_LOCK_FCNTL:
        return file_acquire(l, timeout_ms);
    default:
        return 0;
    }
}

void cr__accept_lock_release(struct cr__accept_lock *l)
{
    int rc = 0;

    switch (l->kind) {
    case CR__ACCEPT_LOCK_PTHREAD:
        rc = pthread_mutex_unlock(&l->shm->mutex);
        break;
    case CR__ACCEPT_LOCK_FCNTL:
        rc = -record_lock(l->fd, F_UNLCK, F_SETLK);
        break;
    default:
        break;
    }
    /* Fails only when the caller does not hold it: our bug. */
    assert(rc == 0);
    CR_UNUSED(rc);
}

uint64_t cr__accept_lock_recoveries(const struct cr__accept_lock *l)
{
    if (l->shm == NULL)
        return 0;
    /* Relaxed: a statistics counter. */
    return __atomic_load_n(&l->shm->recoveries, __ATOMIC_RELAXED);
}
