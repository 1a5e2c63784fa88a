/*
 * proc.c - worker processes for the process models (proc_internal.h): fork a
 * child that runs a function and _exit()s, hand the parent a pidfd to wait
 * on, reap it without blocking, and put the child in the state a worker needs
 * (parent-death signal, stop flag set by TERM/QUIT, the server-wide signals
 * blocked). Called by a model's manager thread; the child side runs in the
 * new process before the model's body. Owns nothing past the call: the pidfd
 * is the caller's to close.
 *
 * fork() rather than clone3(CLONE_PIDFD): the sanitizers intercept fork()
 * (they must lock their allocators around it), not a raw clone3. The pidfd is
 * opened right after the fork; nothing can have reaped the child by then
 * (it stays a zombie until waitid on this pidfd, since the library never
 * calls waitpid(-1)), so pidfd_open() cannot miss it.
 */
#include "os/proc_internal.h"

#include "os/clock_internal.h"
#include "os/stop_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

volatile int cr__proc_stop;

/*
 * Held around every fork of cr__proc_spawn and, through
 * cr__proc_hold_forks, around work that must not be copied half done into
 * a child: an application's reconfiguration at SIGHUP (cr_server_run).
 * Process-wide, as fork is. Besides the half-applied state, it keeps a child
 * from inheriting an allocator lock that the reconfiguring thread held at
 * the fork: glibc's malloc resets its locks in the child, but the
 * sanitizers' allocators of GCC 12 do not, and such a child hung in its
 * first malloc.
 */
static pthread_mutex_t fork_lock = PTHREAD_MUTEX_INITIALIZER;

void cr__proc_hold_forks(void)
{
    pthread_mutex_lock(&fork_lock);
}

void cr__proc_release_forks(void)
{
    pthread_mutex_unlock(&fork_lock);
}

/* Signal handlers: only a flag (STYLE.md). A graceful request never undoes
 * an immediate one. */
static void on_term(int signo)
{
    CR_UNUSED(signo);
    if (cr__proc_stop == 0)
        cr__proc_stop = CR__STOP_GRACEFUL;
}

static void on_quit(int signo)
{
    CR_UNUSED(signo);
    cr__proc_stop = CR__STOP_NOW;
}

/*
 * The child's side of cr__proc_spawn, before fn. Every signal is blocked on
 * entry (the parent blocked them around fork), so no handler of the parent's
 * runs in the child before its own are in place. Returns 0 or an exit status.
 */
static int child_setup(pid_t parent)
{
    struct sigaction sa;
    sigset_t mask;

    cr__proc_stop = 0;
    /* The parent's forking thread held it; this copy is the child's own,
     * for forks of its own. */
    pthread_mutex_init(&fork_lock, NULL);
    /* A worker never outlives its master. PDEATHSIG fires when the forking
     * thread exits (the manager thread, which lives until its children are
     * reaped). If the parent died between fork and prctl, the signal will
     * never come: check by hand. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
        return 70; /* EX_SOFTWARE */
    if (getppid() != parent)
        return 0;

    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    /* No SA_RESTART: a blocking poll returns EINTR and looks at the flag. */
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_quit;
    sigaction(SIGQUIT, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);

    /* The master handles INT, HUP and USR1 for the whole server (Ctrl-C
     * reaches the whole process group); everything else is unblocked. */
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGUSR1);
    if (pthread_sigmask(SIG_SETMASK, &mask, NULL) != 0)
        return 70;
    return 0;
}

int cr__proc_spawn(cr__proc_main_fn *fn, void *arg, pid_t *pid, int *pidfd)
{
    pid_t parent = getpid();
    sigset_t all;
    sigset_t old;
    pid_t child;
    int fd;
    int err;

    sigfillset(&all);
    err = -pthread_sigmask(SIG_SETMASK, &all, &old);
    if (err < 0)
        return err;
    pthread_mutex_lock(&fork_lock);
    child = fork();
    if (child == 0) {
        int status;

        /* A fork from inside a handler (forking's accept) must not leave
         * the child timing its work from the parent's event. */
        (void)cr__clock_event_enter(0);
        status = child_setup(parent);

        if (status == 0 && getppid() == parent)
            status = fn(arg);
        /* Not exit(): the parent's atexit handlers and stdio buffers are
         * not the child's to run or flush. */
        _exit(status & 0xff);
    }
    err = child < 0 ? -errno : 0;
    pthread_mutex_unlock(&fork_lock);
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err < 0)
        return err;

    fd = pidfd_open(child, 0);
    if (fd < 0) {
        err = -errno;
        /* No way to watch it: do not leave it running unwatched. */
        kill(child, SIGKILL);
        (void)waitpid(child, NULL, 0);
        return err;
    }
    *pid = child;
    *pidfd = fd;
    return 0;
}

int cr__proc_reap(int pidfd, int *status)
{
    siginfo_t si;

    memset(&si, 0, sizeof(si));
    if (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED | WNOHANG) < 0)
        return -errno;
    if (si.si_pid == 0)
        return -EAGAIN; /* still running */
    switch (si.si_code) {
    case CLD_EXITED:
        *status = (si.si_status & 0xff) << 8;
        break;
    case CLD_DUMPED:
        *status = (si.si_status & 0x7f) | 0x80;
        break;
    default: /* CLD_KILLED */
        *status = si.si_status & 0x7f;
        break;
    }
    return 0;
}

const char *cr__proc_describe(int status, char *buf, size_t len)
{
    if (len == 0)
        return buf;
    if (WIFEXITED(status)) {
        snprintf(buf, len, "exit %d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        const char *name = sigabbrev_np(WTERMSIG(status));

        snprintf(buf, len, "killed by signal %d (SIG%s%s)", WTERMSIG(status),
                 name != NULL ? name : "?", WCOREDUMP(status) ? ", core dumped" : "");
    } else {
        snprintf(buf, len, "wait status 0x%x", (unsigned)status);
    }
    return buf;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a;
    int y = *(const int *)b;

    return (x > y) - (x < y);
}

int cr__proc_each_fd(void (*fn)(int fd, void *arg), void *arg)
{
    /* getdents64 into the stack, not opendir: a forked child calls this
     * before anything else, and opendir's buffer would be its first malloc
     * (see fork_lock). */
    char buf[4096] __attribute__((aligned(8)));
    int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (dfd < 0)
        return -errno;
    for (;;) {
        long n = syscall(SYS_getdents64, dfd, buf, sizeof(buf));

        if (n <= 0) {
            int err = n < 0 ? -errno : 0;

            close(dfd);
            return err;
        }
        for (long off = 0; off < n;) {
            const struct dirent64 *e = (const void *)(buf + off);
            int fd = atoi(e->d_name);

            off += e->d_reclen;
            /* Closing entries while listing is fine: the directory is read
             * in order of descriptor number. */
            if (e->d_name[0] != '.' && fd != dfd)
                fn(fd, arg);
        }
    }
}

struct keep_list {
    const int *keep;
    unsigned nkeep;
};

static void close_unless_kept(int fd, void *arg)
{
    const struct keep_list *k = arg;
    bool kept = fd < 3;

    for (unsigned i = 0; i < k->nkeep && !kept; i++)
        kept = k->keep[i] == fd;
    if (!kept)
        close(fd);
}

/* Without close_range (Linux < 5.9): each open descriptor of /proc/self/fd,
 * else every number up to the limit. */
static void close_fds_slow(const int *keep, unsigned nkeep)
{
    struct keep_list k = {keep, nkeep};
    long max;

    if (cr__proc_each_fd(close_unless_kept, &k) == 0)
        return;
    max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 1 << 20)
        max = 1 << 20;
    for (int fd = 3; fd < max; fd++)
        close_unless_kept(fd, &k);
}

void cr__proc_close_fds_except(const int *keep, unsigned nkeep)
{
    int sorted[64];
    unsigned n = 0;
    int from = 3;

    if (nkeep > sizeof(sorted) / sizeof(sorted[0])) {
        close_fds_slow(keep, nkeep);
        return;
    }
    for (unsigned i = 0; i < nkeep; i++) {
        if (keep[i] >= 3)
            sorted[n++] = keep[i];
    }
    qsort(sorted, n, sizeof(sorted[0]), cmp_int);
    /* Close the gaps between kept descriptors: [from, sorted[i]). */
    for (unsigned i = 0; i <= n; i++) {
        unsigned to = i < n ? (unsigned)sorted[i] - 1 : ~0u;

        if (i < n && sorted[i] < from)
            continue; /* a duplicate */
        if (to >= (unsigned)from && close_range((unsigned)from, to, 0) < 0) {
            close_fds_slow(keep, nkeep);
            return;
        }
        if (i < n)
            from = sorted[i] + 1;
    }
}
