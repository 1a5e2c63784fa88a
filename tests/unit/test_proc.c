/*
 * test_proc.c - worker processes (src/os/proc.c): a spawned child runs its
 * function and its result is the exit status reaped through the pidfd, which
 * becomes readable when the child exits (and not before); reap says -EAGAIN
 * while it runs; TERM and QUIT set the child's stop flag (graceful, now) and
 * the server-wide signals are blocked in it; a child whose parent dies gets
 * SIGTERM (PR_SET_PDEATHSIG); describe formats statuses; close_fds_except
 * keeps exactly what it is told to.
 */
#include "net/conn_internal.h"
#include "os/proc_internal.h"

#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define TEST_TIMEOUT 10 /* seconds, times CK_TIMEOUT_MULTIPLIER */

static int timeout_ms(int ms)
{
    const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
    int k = m != NULL ? atoi(m) : 1;

    return ms * (k > 0 ? k : 1);
}

static bool is_readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};

    return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* Waits for the child of pidfd to exit and returns its wait status. */
static int reap_blocking(int pidfd)
{
    int status = -1;

    ck_assert(is_readable(pidfd, timeout_ms(5000)));
    ck_assert_int_eq(cr__proc_reap(pidfd, &status), 0);
    return status;
}

static int child_returns(void *arg)
{
    return (int)(intptr_t)arg;
}

START_TEST(spawned_child_exit_status_is_reaped_through_pidfd)
{
    char buf[64];
    pid_t pid = 0;
    int pidfd = -1;
    int status;

    ck_assert_int_eq(cr__proc_spawn(child_returns, (void *)(intptr_t)7, &pid, &pidfd), 0);
    ck_assert_int_gt(pid, 0);
    ck_assert_int_ge(pidfd, 0);
    ck_assert(fcntl(pidfd, F_GETFD) & FD_CLOEXEC);
    status = reap_blocking(pidfd);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 7);
    ck_assert_str_eq(cr__proc_describe(status, buf, sizeof(buf)), "exit 7");
    /* Reaped: no such child any more. */
    ck_assert_int_eq(waitpid(pid, NULL, WNOHANG), -1);
    ck_assert_int_eq(errno, ECHILD);
    close(pidfd);
}
END_TEST

/* Says it is ready on the pipe arg (its handlers are in place once it
 * runs), waits for the stop flag and returns it as the exit status; 100 when
 * the signal mask or SIGPIPE are not what the contract says. */
static int child_waits_for_stop(void *arg)
{
    int fd = (int)(intptr_t)arg;
    sigset_t cur;

    pthread_sigmask(SIG_SETMASK, NULL, &cur);
    if (!sigismember(&cur, SIGINT) || !sigismember(&cur, SIGHUP) || !sigismember(&cur, SIGUSR1) ||
        sigismember(&cur, SIGTERM) || sigismember(&cur, SIGQUIT))
        return 100;
    if (signal(SIGPIPE, SIG_IGN) != SIG_IGN)
        return 101;
    if (write(fd, "r", 1) != 1)
        return 102;
    for (int i = 0; i < 1000 && cr__proc_stop == 0; i++)
        usleep(10000);
    return cr__proc_stop;
}

/* Spawns child_waits_for_stop and waits until it is ready. */
static void spawn_waiter(pid_t *pid, int *pidfd)
{
    int p[2];
    char c;

    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(cr__proc_spawn(child_waits_for_stop, (void *)(intptr_t)p[1], pid, pidfd), 0);
    ck_assert(is_readable(p[0], timeout_ms(5000)));
    ck_assert_int_eq(read(p[0], &c, 1), 1);
    close(p[0]);
    close(p[1]);
}

static void check_stop_signal(int signo, int expect)
{
    pid_t pid;
    int pidfd;
    int status;

    spawn_waiter(&pid, &pidfd);
    ck_assert(!is_readable(pidfd, 50));
    ck_assert_int_eq(cr__proc_reap(pidfd, &status), -EAGAIN);
    ck_assert_int_eq(kill(pid, signo), 0);
    status = reap_blocking(pidfd);
    ck_assert_msg(WIFEXITED(status), "status 0x%x", (unsigned)status);
    ck_assert_int_eq(WEXITSTATUS(status), expect);
    close(pidfd);
}

START_TEST(term_sets_graceful_stop_in_child)
{
    check_stop_signal(SIGTERM, CR__STOP_GRACEFUL);
}
END_TEST

START_TEST(quit_sets_immediate_stop_in_child)
{
    check_stop_signal(SIGQUIT, CR__STOP_NOW);
}
END_TEST

START_TEST(interrupt_does_not_reach_child)
{
    pid_t pid;
    int pidfd;
    int status;

    spawn_waiter(&pid, &pidfd);
    /* Blocked in the child: stays pending, the child keeps running. */
    ck_assert_int_eq(kill(pid, SIGINT), 0);
    ck_assert_int_eq(kill(pid, SIGHUP), 0);
    ck_assert(!is_readable(pidfd, 100));
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    status = reap_blocking(pidfd);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), CR__STOP_GRACEFUL);
    close(pidfd);
}
END_TEST

static int child_kills_itself(void *arg)
{
    CR_UNUSED(arg);
    kill(getpid(), SIGKILL);
    return 0;
}

START_TEST(killed_child_is_described_with_its_signal)
{
    char buf[64];
    pid_t pid;
    int pidfd;
    int status;

    ck_assert_int_eq(cr__proc_spawn(child_kills_itself, NULL, &pid, &pidfd), 0);
    status = reap_blocking(pidfd);
    ck_assert(WIFSIGNALED(status));
    ck_assert_int_eq(WTERMSIG(status), SIGKILL);
    ck_assert_str_eq(cr__proc_describe(status, buf, sizeof(buf)), "killed by signal 9 (SIGKILL)");
    ck_assert_str_eq(cr__proc_describe(SIGSEGV | 0x80, buf, sizeof(buf)),
                     "killed by signal 11 (SIGSEGV, core dumped)");
    ck_assert_str_eq(cr__proc_describe(0, buf, 3), "ex");
    close(pidfd);
}
END_TEST

/* The grandchild of the PDEATHSIG test: says it is ready, then reports
 * the stop flag, on the pipe arg. */
static int grandchild_main(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char c = 'r';

    if (write(fd, &c, 1) != 1)
        return 1;
    for (int i = 0; i < 1000 && cr__proc_stop == 0; i++)
        usleep(10000);
    c = (char)('0' + cr__proc_stop);
    return write(fd, &c, 1) == 1 ? 0 : 1;
}

START_TEST(child_gets_term_when_its_parent_dies)
{
    int p[2];
    pid_t mid;
    int ready[2];
    pid_t grandchild = 0;
    char c = 0;
    int status;

    /* Orphans come back to this process, which reaps them. */
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(pipe(ready), 0);
    mid = fork();
    ck_assert_int_ge(mid, 0);
    if (mid == 0) {
        pid_t pid;
        int pidfd;

        if (cr__proc_spawn(grandchild_main, (void *)(intptr_t)ready[1], &pid, &pidfd) < 0)
            _exit(1);
        /* Dies once the grandchild is set up, without reaping it. */
        if (read(ready[0], &c, 1) != 1)
            _exit(1);
        if (write(p[1], &pid, sizeof(pid)) != sizeof(pid))
            _exit(1);
        _exit(0);
    }
    close(ready[1]);
    close(p[1]);
    ck_assert_int_eq(read(p[0], &grandchild, sizeof(grandchild)), (ssize_t)sizeof(grandchild));
    close(p[0]);
    ck_assert_int_eq(waitpid(mid, &status, 0), mid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* Its parent is gone: TERM came. */
    ck_assert(is_readable(ready[0], timeout_ms(5000)));
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    ck_assert_int_eq(c, '0' + CR__STOP_GRACEFUL);
    ck_assert_int_eq(waitpid(grandchild, &status, 0), grandchild);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(ready[0]);
}
END_TEST

/* Bit i of the result: fds[i] is open after close_fds_except(keep). */
struct fd_case {
    int fds[8];
    int keep[8];
    unsigned nkeep;
};

static int child_closes(void *arg)
{
    struct fd_case *fc = arg;
    int open_mask = 0;

    cr__proc_close_fds_except(fc->keep, fc->nkeep);
    for (int i = 0; i < 8; i++) {
        if (fcntl(fc->fds[i], F_GETFD) >= 0)
            open_mask |= 1 << i;
    }
    /* 0, 1 and 2 are never closed. */
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF)
            return 255;
    }
    return open_mask;
}

START_TEST(close_fds_except_keeps_exactly_the_listed_descriptors)
{
    struct fd_case fc;
    pid_t pid;
    int pidfd;
    int status;

    for (int i = 0; i < 8; i++) {
        fc.fds[i] = open("/dev/null", O_RDONLY);
        ck_assert_int_ge(fc.fds[i], 3);
    }
    /* Unsorted, with a duplicate and a standard descriptor. */
    fc.keep[0] = fc.fds[5];
    fc.keep[1] = fc.fds[1];
    fc.keep[2] = 1;
    fc.keep[3] = fc.fds[5];
    fc.keep[4] = fc.fds[2];
    fc.nkeep = 5;
    ck_assert_int_eq(cr__proc_spawn(child_closes, &fc, &pid, &pidfd), 0);
    status = reap_blocking(pidfd);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), (1 << 1) | (1 << 2) | (1 << 5));
    close(pidfd);

    /* Nothing kept: all of them go. */
    fc.nkeep = 0;
    ck_assert_int_eq(cr__proc_spawn(child_closes, &fc, &pid, &pidfd), 0);
    status = reap_blocking(pidfd);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    close(pidfd);
    /* The parent's copies are untouched. */
    for (int i = 0; i < 8; i++) {
        ck_assert_int_ge(fcntl(fc.fds[i], F_GETFD), 0);
        close(fc.fds[i]);
    }
}
END_TEST

Suite *proc_suite(void);

Suite *proc_suite(void)
{
    Suite *s = suite_create("proc");
    TCase *tc = tcase_create("proc");

    tcase_set_timeout(tc, TEST_TIMEOUT);
    tcase_add_test(tc, spawned_child_exit_status_is_reaped_through_pidfd);
    tcase_add_test(tc, term_sets_graceful_stop_in_child);
    tcase_add_test(tc, quit_sets_immediate_stop_in_child);
    tcase_add_test(tc, interrupt_does_not_reach_child);
    tcase_add_test(tc, killed_child_is_described_with_its_signal);
    tcase_add_test(tc, child_gets_term_when_its_parent_dies);
    tcase_add_test(tc, close_fds_except_keeps_exactly_the_listed_descriptors);
    suite_add_tcase(s, tc);
    return s;
}
