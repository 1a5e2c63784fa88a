/*
 * proc_internal.h - worker processes for the process models (forking,
 * prefork): fork a child that runs a function and exits, watch it through a
 * pidfd (readable when it exits, so a reactor waits for children like for
 * any handle, with no process-wide SIGCHLD handling that would steal the
 * application's other children), and reap it. Library-internal; called by
 * the master's manager thread.
 *
 * Why pidfds rather than a SIGCHLD signalfd: a signalfd only sees SIGCHLD
 * when every thread of the process blocks it, which a library cannot ensure
 * (an application thread started earlier has it unblocked and swallows it);
 * and waitpid(-1) would reap children that are not ours. A pidfd is per
 * child, race-free, and needs no signal at all (Linux >= 5.3).
 */
#ifndef CABRANK_PROC_INTERNAL_H
#define CABRANK_PROC_INTERNAL_H

#include <cabrank/common.h>
#include <sys/types.h>

/* The body of a child: returns its exit status (0..255). */
typedef int cr__proc_main_fn(void *arg);

/*
 * Forks a child that runs fn(arg) and then _exit()s with its result (no
 * atexit handlers of the parent's, no stdio flush of the parent's buffers).
 * In the child, before fn: PR_SET_PDEATHSIG SIGTERM, so a
 * worker never outlives a master that died (the forking thread must live
 * until its children are reaped, which the manager thread does); SIGPIPE
 * ignored; SIGTERM and SIGQUIT unblocked with handlers that set
 * cr__proc_stop (graceful or now); SIGINT, SIGHUP and SIGUSR1 blocked (the
 * master acts on them for the whole server, e.g. Ctrl-C reaches the whole
 * process group). Returns the pid and a pidfd (O_CLOEXEC). 0 or -errno.
 */
int cr__proc_spawn(cr__proc_main_fn *fn, void *arg, pid_t *pid, int *pidfd);

/*
 * In a child: 0 while running, CR__STOP_GRACEFUL after SIGTERM,
 * CR__STOP_NOW after SIGQUIT (conn_internal.h values, so it can be
 * passed to cr__conn_serve_blocking). Written by signal handlers.
 */
extern volatile int cr__proc_stop;

/*
 * Holds off every cr__proc_spawn of the process until release: for work
 * that a child must see whole or not at all (cr_server_run holds it around
 * on_hup). Not recursive; never hold it across a spawn.
 */
void cr__proc_hold_forks(void);
void cr__proc_release_forks(void);

/* Reaps the exited child of pidfd without blocking: 0 and its wait status
 * in *status, -EAGAIN while it still runs, -errno. Does not close pidfd. */
int cr__proc_reap(int pidfd, int *status);

/* "exit 0", "killed by signal 9 (core dumped)"... into buf. Returns buf. */
const char *cr__proc_describe(int status, char *buf, size_t len);

/* Calls fn for each open descriptor of the process (from /proc/self/fd,
 * without allocating: safe in a child right after fork). fn may close it.
 * 0 or -errno (no /proc). */
int cr__proc_each_fd(void (*fn)(int fd, void *arg), void *arg);

/* Closes every descriptor >= 3 not in keep[0..nkeep) (close_range where the
 * kernel has it). For a forked child, so it holds nothing it does not use. */
void cr__proc_close_fds_except(const int *keep, unsigned nkeep);

#endif /* CABRANK_PROC_INTERNAL_H */
