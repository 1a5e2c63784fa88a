/*
 * reactor_signals.c - the Reactor's signals: a signalfd registered with the
 * reactor like any handle, whose handler calls the callback added for each
 * signal read from it, on the thread that dispatches the event. Add and
 * remove run on any thread (they block the signal in the calling thread;
 * cr_reactor_block_signals blocks the usual ones before threads start).
 * Owns the signalfd, created with the first signal added; borrows the
 * callbacks' arguments. State under r->lock (reactor_state_internal.h).
 */
#include <cabrank/log.h>
#include <cabrank/reactor.h>

#include "demux/reactor_state_internal.h"

#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

void cr__reactor_signals_init(struct cr_reactor *r)
{
    r->sigfd = -1;
    sigemptyset(&r->sigmask);
}

void cr__reactor_signals_fini(struct cr_reactor *r)
{
    if (r->sigfd >= 0)
        close(r->sigfd);
}

/* The signalfd's handler: one-shot, so one thread at a time reads it. */
static void on_signalfd(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    struct signalfd_siginfo si;

    CR_UNUSED(events);
    CR_UNUSED(arg);
    /* Drain everything queued; a handler may stop the reactor meanwhile. */
    while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        struct cr__reactor_signal se = {0};

        cr_lock_lock(&r->lock);
        if (si.ssi_signo < NSIG)
            se = r->signals[si.ssi_signo];
        cr_lock_unlock(&r->lock);
        if (se.fn != NULL)
            se.fn(r, (int)si.ssi_signo, se.arg);
    }
    if (cr_reactor_reactivate(r, fd) < 0)
        CR_LOG(CR_LOG_ERROR, "signalfd reactivation failed; signals are no longer delivered");
}

int cr_reactor_block_signals(void)
{
    static const int sigs[] = {SIGTERM, SIGINT,  SIGHUP,  SIGQUIT,
                               SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE};
    sigset_t set;

    sigemptyset(&set);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaddset(&set, sigs[i]);
    return -pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int cr_reactor_signal_add(struct cr_reactor *r, int signo, cr_reactor_signal_fn *fn, void *arg)
{
    sigset_t one;
    sigset_t mask;
    int err;

    if (signo <= 0 || signo >= NSIG || signo == SIGKILL || signo == SIGSTOP || fn == NULL)
        return -EINVAL;
    sigemptyset(&one);
    sigaddset(&one, signo);
    err = -pthread_sigmask(SIG_BLOCK, &one, NULL);
    if (err < 0)
        return err;
    cr_lock_lock(&r->lock);
    if (r->signals[signo].fn != NULL) {
        err = -EEXIST;
        goto out_unlock;
    }
    mask = r->sigmask;
    sigaddset(&mask, signo);
    if (r->sigfd < 0) {
        int fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);

        if (fd < 0) {
            err = -errno;
            goto out_unlock;
        }
        err = cr__reactor_add_locked(r, fd, CR_EV_READ, CR_REACTOR_ONESHOT, on_signalfd, NULL);
        if (err < 0) {
            close(fd);
            goto out_unlock;
        }
        r->sigfd = fd;
    } else if (signalfd(r->sigfd, &mask, 0) < 0) {
        err = -errno;
        goto out_unlock;
    }
    r->sigmask = mask;
    r->signals[signo].fn = fn;
    r->signals[signo].arg = arg;
out_unlock:
    cr_lock_unlock(&r->lock);
    return err;
}

int cr_reactor_signal_remove(struct cr_reactor *r, int signo)
{
    sigset_t mask;
    int err = -ENOENT;

    if (signo <= 0 || signo >= NSIG)
        return -EINVAL;
    cr_lock_lock(&r->lock);
    if (r->signals[signo].fn != NULL) {
        mask = r->sigmask;
        sigdelset(&mask, signo);
        if (signalfd(r->sigfd, &mask, 0) < 0) {
            err = -errno;
        } else {
            r->sigmask = mask;
            r->signals[signo].fn = NULL;
            r->signals[signo].arg = NULL;
            err = 0;
        }
    }
    cr_lock_unlock(&r->lock);
    return err;
}
