/*
 * test_accept_lock.c - the prefork accept lock (src/net/accept_lock.c) across
 * real processes: each excluding kind (pthread, fcntl) lets one process at a
 * time in, over many rounds of several forked children; a holder killed
 * with SIGKILL does not wedge it (the robust mutex recovers, the kernel
 * drops the record lock); a timed acquire behind a live holder gives up
 * after its timeout and not much later; the non-excluding kinds (none,
 * reuseport) never wait. Each kind is one loop iteration.
 */
#include "net/accept_lock_internal.h"

#include "../support/support.h"

#include <check.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILDREN 4
#define ROUNDS   300

static const enum cr__accept_lock_kind exclusive_kinds[] = {
    CR__ACCEPT_LOCK_PTHREAD,
    CR__ACCEPT_LOCK_FCNTL,
};

/* What the children of the exclusion test share. */
struct shared {
    int inside;      /* processes between acquire and release */
    int violations;  /* times a process found another inside */
    int entries;     /* rounds completed */
    int acquire_err; /* the first error of an acquire */
};

/* ms scaled for slow (sanitizer) builds, for waits that expect an event. */
static int child_rounds(struct cr__accept_lock *l, struct shared *sh)
{
    if (cr__accept_lock_child_init(l) != 0)
        return 1;
    for (int i = 0; i < ROUNDS; i++) {
        int err = cr__accept_lock_acquire(l, (uint64_t)cr_test_tmo(5000));

        if (err != 0) {
            __atomic_store_n(&sh->acquire_err, err, __ATOMIC_RELAXED);
            return 1;
        }
        if (__atomic_add_fetch(&sh->inside, 1, __ATOMIC_SEQ_CST) != 1)
            __atomic_add_fetch(&sh->violations, 1, __ATOMIC_RELAXED);
        /* Stay a moment, so another process would be caught inside. */
        if (i % 16 == 0)
            usleep(200);
        else
            sched_yield();
        __atomic_sub_fetch(&sh->inside, 1, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&sh->entries, 1, __ATOMIC_RELAXED);
        cr__accept_lock_release(l);
    }
    return 0;
}

START_TEST(excludes_across_processes)
{
    enum cr__accept_lock_kind kind = exclusive_kinds[_i];
    struct cr__accept_lock *l;
    struct shared *sh;
    pid_t pids[CHILDREN];

    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(sh, MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    ck_assert_int_eq(cr__accept_lock_create(&l, kind), 0);
    ck_assert(cr__accept_lock_is_exclusive(l));
    for (int i = 0; i < CHILDREN; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0)
            _exit(child_rounds(l, sh));
    }
    for (int i = 0; i < CHILDREN; i++) {
        int status;

        ck_assert_int_eq(cr_test_wait_exit(pids[i], cr_test_tmo(30000), &status), 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x, err %d",
                      (unsigned)status, sh->acquire_err);
    }
    ck_assert_int_eq(sh->violations, 0);
    ck_assert_int_eq(sh->entries, CHILDREN * ROUNDS);
    cr__accept_lock_destroy(l);
    munmap(sh, sizeof(*sh));
}
END_TEST

/* Forks a child that takes the lock, says so on a pipe and then waits to
 * be killed. Returns its pid. */
static pid_t fork_holder(struct cr__accept_lock *l)
{
    int p[2];
    char c;
    pid_t pid;

    ck_assert_int_eq(pipe(p), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(p[0]);
        if (cr__accept_lock_child_init(l) != 0 || cr__accept_lock_acquire(l, 10000) != 0)
            _exit(1);
        if (write(p[1], "x", 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    ck_assert_int_eq(read(p[0], &c, 1), 1);
    close(p[0]);
    return pid;
}

START_TEST(recovers_from_holder_killed)
{
    enum cr__accept_lock_kind kind = exclusive_kinds[_i];
    struct cr__accept_lock *l;
    int status;
    pid_t pid;

    ck_assert_int_eq(cr__accept_lock_create(&l, kind), 0);
    ck_assert_int_eq(cr__accept_lock_child_init(l), 0);
    pid = fork_holder(l);
    ck_assert_int_eq(cr__accept_lock_acquire(l, 0), -ETIMEDOUT);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(cr_test_wait_exit(pid, cr_test_tmo(5000), &status), 0);
    ck_assert(WIFSIGNALED(status));

    /* The dead holder's turn passes to us. */
    ck_assert_int_eq(cr__accept_lock_acquire(l, (uint64_t)cr_test_tmo(2000)), 0);
    if (kind == CR__ACCEPT_LOCK_PTHREAD)
        ck_assert_uint_eq(cr__accept_lock_recoveries(l), 1);
    cr__accept_lock_release(l);
    /* And it works as before: taken and released again, no recovery. */
    ck_assert_int_eq(cr__accept_lock_acquire(l, (uint64_t)cr_test_tmo(2000)), 0);
    cr__accept_lock_release(l);
    if (kind == CR__ACCEPT_LOCK_PTHREAD)
        ck_assert_uint_eq(cr__accept_lock_recoveries(l), 1);
    cr__accept_lock_destroy(l);
}
END_TEST

START_TEST(timed_acquire_gives_up)
{
    enum cr__accept_lock_kind kind = exclusive_kinds[_i];
    struct cr__accept_lock *l;
    uint64_t t0;
    uint64_t took;
    int status;
    pid_t pid;

    ck_assert_int_eq(cr__accept_lock_create(&l, kind), 0);
    ck_assert_int_eq(cr__accept_lock_child_init(l), 0);
    pid = fork_holder(l);
    for (int i = 0; i < 3; i++) {
        t0 = cr_test_now_ms();
        ck_assert_int_eq(cr__accept_lock_acquire(l, 100), -ETIMEDOUT);
        took = cr_test_now_ms() - t0;
        ck_assert_uint_ge(took, 99);
        ck_assert_uint_lt(took, (uint64_t)cr_test_tmo(2000));
    }
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(cr_test_wait_exit(pid, cr_test_tmo(5000), &status), 0);
    ck_assert_int_eq(cr__accept_lock_acquire(l, (uint64_t)cr_test_tmo(2000)), 0);
    cr__accept_lock_release(l);
    cr__accept_lock_destroy(l);
}
END_TEST

START_TEST(none_and_reuseport_never_wait)
{
    static const char *const names[] = {"none", "reuseport"};

    for (size_t i = 0; i < 2; i++) {
        enum cr__accept_lock_kind kind;
        struct cr__accept_lock *l;

        ck_assert_int_eq(cr__accept_lock_parse(names[i], &kind), 0);
        ck_assert_int_eq(cr__accept_lock_create(&l, kind), 0);
        ck_assert(!cr__accept_lock_is_exclusive(l));
        ck_assert_int_eq(cr__accept_lock_child_init(l), 0);
        /* Two "holders" at once: nothing excludes. */
        ck_assert_int_eq(cr__accept_lock_acquire(l, 0), 0);
        ck_assert_int_eq(cr__accept_lock_acquire(l, 0), 0);
        cr__accept_lock_release(l);
        cr__accept_lock_release(l);
        cr__accept_lock_destroy(l);
    }
}
END_TEST

START_TEST(parses_kind_names)
{
    enum cr__accept_lock_kind kind;

    ck_assert_int_eq(cr__accept_lock_parse("pthread", &kind), 0);
    ck_assert_int_eq(kind, CR__ACCEPT_LOCK_PTHREAD);
    ck_assert_int_eq(cr__accept_lock_parse("fcntl", &kind), 0);
    ck_assert_int_eq(kind, CR__ACCEPT_LOCK_FCNTL);
    ck_assert_int_eq(cr__accept_lock_parse("flock", &kind), -EINVAL);
    ck_assert_int_eq(cr__accept_lock_parse("", &kind), -EINVAL);
    ck_assert_int_eq(cr__accept_lock_parse(NULL, &kind), -EINVAL);
}
END_TEST

Suite *accept_lock_suite(void);
Suite *accept_lock_suite(void)
{
    Suite *s = suite_create("accept_lock");
    TCase *tc = tcase_create("core");
    int nkinds = (int)(sizeof(exclusive_kinds) / sizeof(exclusive_kinds[0]));

    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, excludes_across_processes, 0, nkinds);
    tcase_add_loop_test(tc, recovers_from_holder_killed, 0, nkinds);
    tcase_add_loop_test(tc, timed_acquire_gives_up, 0, nkinds);
    tcase_add_test(tc, none_and_reuseport_never_wait);
    tcase_add_test(tc, parses_kind_names);
    suite_add_tcase(s, tc);
    return s;
}
