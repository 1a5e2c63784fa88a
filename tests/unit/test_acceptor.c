/*
 * test_acceptor.c - cr_acceptor over a real cr_reactor: accepting through
 * each backend in batches, pause/resume (from the callback and from another
 * thread, with several threads taking events Leader/Followers style), the
 * EMFILE back-off (RLIMIT_NOFILE lowered and the table filled: the listener
 * must not spin and must recover once descriptors are free), and destroy with
 * a pending back-off timer.
 */
#include <cabrank/acceptor.h>
#include <cabrank/clock.h>
#include <cabrank/listener.h>
#include <cabrank/log.h>
#include <cabrank/reactor.h>

#include "../support/support.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CLIENTS 64

struct fixture {
    int lfd;
    uint16_t port;
    struct cr_reactor *r;
    struct cr_acceptor *a;
    /* Written by the callback (one thread at a time, see the L/F test). */
    int accepted;
    int pause_at; /* pause in the callback when accepted reaches it; 0: never */
    int overlap;  /* callbacks found running concurrently */
    int inside;
    /* Clients and accepted fds, closed by fixture_fini. */
    int clients[MAX_CLIENTS];
    int nclients;
    int served[MAX_CLIENTS];
    int nserved;
};

static void on_accept(struct cr_acceptor *a, int fd, void *arg)
{
    struct fixture *f = arg;

    if (__atomic_fetch_add(&f->inside, 1, __ATOMIC_ACQ_REL) != 0)
        __atomic_store_n(&f->overlap, 1, __ATOMIC_RELAXED);
    if (f->nserved < MAX_CLIENTS)
        f->served[f->nserved++] = fd;
    else
        close(fd);
    __atomic_store_n(&f->accepted, f->accepted + 1, __ATOMIC_RELEASE);
    if (f->pause_at != 0 && f->accepted == f->pause_at)
        cr_acceptor_pause(a);
    __atomic_fetch_sub(&f->inside, 1, __ATOMIC_ACQ_REL);
}

static int accepted(struct fixture *f)
{
    return __atomic_load_n(&f->accepted, __ATOMIC_ACQUIRE);
}

/* Sets up listener, reactor and acceptor; false (reported as skipped) if
 * the backend is missing. */
static bool fixture_init(struct fixture *f, const char *backend,
                         const struct cr_acceptor_config *acfg)
{
    struct cr_listener_config lcfg = {.address = "127.0.0.1:0"};
    struct cr_reactor_config rcfg = {.backend = backend};
    struct cr_acceptor_config cfg = acfg != NULL ? *acfg : (struct cr_acceptor_config){0};
    int err;

    memset(f, 0, sizeof(*f));
    err = cr_reactor_create(&f->r, &rcfg);
    if (err == -ENOSYS) {
        char what[96];

        snprintf(what, sizeof(what), "acceptor: backend %s", backend);
        cr_test_skip(what, "not built here");
        return false;
    }
    ck_assert_int_eq(err, 0);
    ck_assert_int_eq(cr_listener_open(&f->lfd, &lcfg), 0);
    f->port = (uint16_t)cr_listener_port(f->lfd);
    cfg.listen_fd = f->lfd;
    ck_assert_int_eq(cr_acceptor_create(&f->a, f->r, &cfg, on_accept, f), 0);
    return true;
}

static void fixture_fini(struct fixture *f)
{
    cr_acceptor_destroy(f->a);
    cr_reactor_destroy(f->r);
    close(f->lfd);
    for (int i = 0; i < f->nclients; i++)
        close(f->clients[i]);
    for (int i = 0; i < f->nserved; i++)
        close(f->served[i]);
}

static void connect_clients(struct fixture *f, int n)
{
    for (int i = 0; i < n; i++) {
        int fd = cr_test_connect(f->port);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_lt(f->nclients, MAX_CLIENTS);
        f->clients[f->nclients++] = fd;
    }
}

/* Runs the reactor for up to ms, or until `want` connections were accepted
 * (want < 0: the whole time). Returns the events dispatched. */
static int run_reactor(struct fixture *f, int ms, int want)
{
    uint64_t deadline = cr_test_now_ms() + (uint64_t)ms;
    int dispatched = 0;

    while (cr_test_now_ms() < deadline && (want < 0 || accepted(f) < want)) {
        int n = cr_reactor_handle_events(f->r, 10, 0);

        ck_assert_int_ge(n, 0);
        dispatched += n;
    }
    return dispatched;
}

static const char *const backends[] = {"epoll", "poll", "select"};

START_TEST(accepts_connections_in_batches_on_each_backend)
{
    struct cr_acceptor_config cfg = {.batch = 4};
    struct fixture f;

    if (!fixture_init(&f, backends[_i], &cfg))
        return;
    connect_clients(&f, 20);
    run_reactor(&f, 3000, 20);
    ck_assert_int_eq(accepted(&f), 20);
    ck_assert_uint_eq(cr_acceptor_accepted(f.a), 20);
    ck_assert_uint_eq(cr_acceptor_backoffs(f.a), 0);
    /* The accepted fds are the clients' peers, non-blocking: a byte from
     * each client reaches exactly one of them. */
    for (int i = 0; i < f.nclients; i++)
        ck_assert_int_eq(write(f.clients[i], "z", 1), 1);
    for (int i = 0; i < f.nserved; i++) {
        char c = 0;

        ck_assert_int_ne(fcntl(f.served[i], F_GETFL) & O_NONBLOCK, 0);
        ck_assert_int_eq(cr_test_read_exact(f.served[i], &c, 1, 2000), 0);
        ck_assert_int_eq(c, 'z');
    }
    fixture_fini(&f);
}
END_TEST

START_TEST(pause_leaves_connections_in_backlog_until_resume)
{
    struct fixture f;

    ck_assert(fixture_init(&f, NULL, NULL));
    cr_acceptor_pause(f.a);
    cr_acceptor_pause(f.a); /* idempotent */
    connect_clients(&f, 5);
    run_reactor(&f, 200, -1);
    ck_assert_int_eq(accepted(&f), 0);
    cr_acceptor_resume(f.a);
    run_reactor(&f, 3000, 5);
    ck_assert_int_eq(accepted(&f), 5);
    cr_acceptor_resume(f.a); /* idempotent */
    connect_clients(&f, 2);
    run_reactor(&f, 3000, 7);
    ck_assert_int_eq(accepted(&f), 7);
    fixture_fini(&f);
}
END_TEST

START_TEST(pause_from_callback_stops_within_a_batch)
{
    struct fixture f;

    ck_assert(fixture_init(&f, NULL, NULL));
    f.pause_at = 3;
    connect_clients(&f, 6);
    run_reactor(&f, 300, -1);
    /* One batch would take all six; the pause in the callback cuts it. */
    ck_assert_int_eq(accepted(&f), 3);
    f.pause_at = 0;
    cr_acceptor_resume(f.a);
    run_reactor(&f, 3000, 6);
    ck_assert_int_eq(accepted(&f), 6);
    fixture_fini(&f);
}
END_TEST

/* Leader/Followers in miniature: threads take turns (a mutex elects the
 * leader) to take one event, then dispatch it outside the turn. */
struct lf_ctx {
    struct fixture *f;
    pthread_mutex_t leader;
    int stop;
};

static void *lf_thread(void *arg)
{
    struct lf_ctx *c = arg;

    while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
        struct cr_reactor_event ev;
        int n;

        pthread_mutex_lock(&c->leader);
        n = cr_reactor_next(c->f->r, 5, &ev);
        pthread_mutex_unlock(&c->leader);
        if (n > 0)
            cr_reactor_dispatch(c->f->r, &ev);
    }
    return NULL;
}

START_TEST(pause_resume_race_with_threads_taking_events)
{
    struct fixture f;
    struct lf_ctx c = {.f = &f};
    pthread_t th[3];
    uint64_t deadline;

    ck_assert(fixture_init(&f, NULL, &(struct cr_acceptor_config){.batch = 2}));
    pthread_mutex_init(&c.leader, NULL);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, lf_thread, &c), 0);
    /* Connections arrive while the listener is paused and resumed under the
     * handlers' feet. */
    for (int i = 0; i < 40; i++) {
        if (i % 2 == 0)
            connect_clients(&f, 1);
        cr_acceptor_pause(f.a);
        if (i % 3 == 0)
            sched_yield();
        cr_acceptor_resume(f.a);
        if (i % 5 == 0)
            usleep(500);
    }
    deadline = cr_test_now_ms() + 5000;
    while (accepted(&f) < 20 && cr_test_now_ms() < deadline)
        usleep(1000);
    __atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    pthread_mutex_destroy(&c.leader);
    ck_assert_int_eq(accepted(&f), 20);
    ck_assert_int_eq(__atomic_load_n(&f.overlap, __ATOMIC_RELAXED), 0);
    fixture_fini(&f);
}
END_TEST

/* Holds every free descriptor below a lowered RLIMIT_NOFILE. */
struct fd_hog {
    struct rlimit saved;
    int fds[1024];
    int n;
};

static int highest_open_fd(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int self;
    int max = -1;

    ck_assert_ptr_nonnull(d);
    self = dirfd(d);
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);

        if (e->d_name[0] != '.' && fd != self && fd > max)
            max = fd;
    }
    closedir(d);
    return max;
}

/* Lowers the soft limit to just above the open descriptors and takes what is
 * left, so the next accept4() fails with EMFILE. */
static void hog_fds(struct fd_hog *h)
{
    struct rlimit lim;
    int fd;

    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &h->saved), 0);
    lim = h->saved;
    lim.rlim_cur = (rlim_t)highest_open_fd() + 1 + 4;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
    h->n = 0;
    while ((fd = dup(STDERR_FILENO)) >= 0) {
        ck_assert_int_lt(h->n, 1024);
        h->fds[h->n++] = fd;
    }
    ck_assert_int_eq(errno, EMFILE);
}

static void release_fds(struct fd_hog *h)
{
    for (int i = 0; i < h->n; i++)
        close(h->fds[i]);
    h->n = 0;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &h->saved), 0);
}

/* Makes client sockets now and connects them later, when no descriptor is
 * left: connect() needs none. */
static void make_client_sockets(struct fixture *f, int n)
{
    for (int i = 0; i < n; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_ge(fd, 0);
        f->clients[f->nclients++] = fd;
    }
}

static void connect_client_sockets(struct fixture *f)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(f->port)};

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < f->nclients; i++)
        ck_assert_int_eq(connect(f->clients[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
}

static int count_lines_with(int fd, const char *needle)
{
    char buf[8192];
    ssize_t n;
    int count = 0;

    ck_assert_int_eq(cr_test_set_nonblock(fd, true), 0);
    n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    for (char *p = buf; (p = strstr(p, needle)) != NULL; p++)
        count++;
    return count;
}

START_TEST(emfile_backs_off_without_spinning_and_recovers)
{
    struct fixture f;
    struct fd_hog h;
    int logp[2];
    int dispatched;
    int warnings;
    uint64_t backoffs;
    uint64_t cpu_ns;
    uint64_t t0;
    uint64_t recovered_ms;

    ck_assert(fixture_init(&f, NULL, NULL));
    ck_assert_int_eq(pipe2(logp, O_CLOEXEC), 0);
    cr_log_set_fd(logp[1]);
    make_client_sockets(&f, 3);
    hog_fds(&h);
    connect_client_sockets(&f);

    /* The listener is readable the whole time, and every accept fails. */
    cpu_ns = cr_clock_thread_cpu_ns();
    dispatched = run_reactor(&f, 300, -1);
    cpu_ns = cr_clock_thread_cpu_ns() - cpu_ns;
    backoffs = cr_acceptor_backoffs(f.a);
    ck_assert_int_eq(accepted(&f), 0);

    /* Descriptors come back: the pending connections are accepted by the
     * next back-off timer, with no help. */
    release_fds(&h);
    t0 = cr_test_now_ms();
    run_reactor(&f, 2000, 3);
    recovered_ms = cr_test_now_ms() - t0;
    cr_log_set_fd(-1);
    warnings = count_lines_with(logp[0], "accept4() failed: Too many open files");
    close(logp[0]);
    close(logp[1]);
    fprintf(stderr,
            "test_acceptor: EMFILE for 300 ms: %d events, %llu back-offs, %llu us CPU, "
            "%d warnings; recovered in %llu ms\n",
            dispatched, (unsigned long long)backoffs, (unsigned long long)(cpu_ns / 1000), warnings,
            (unsigned long long)recovered_ms);

    /* 10, 20, 40, 80, 160 ms: five back-offs fit in 300 ms; a spin makes
     * thousands, each one a timer event plus a listener event. */
    ck_assert_uint_ge(backoffs, 3);
    ck_assert_uint_le(backoffs, 10);
    ck_assert_int_le(dispatched, 2 * 10 + 2);
    ck_assert_uint_lt(cpu_ns, 100 * CR_NSEC_PER_MSEC);
    ck_assert_int_eq(warnings, 1); /* rate-limited to one a second */
    ck_assert_int_eq(accepted(&f), 3);
    ck_assert_uint_eq(cr_acceptor_accepted(f.a), 3);
    fixture_fini(&f);
}
END_TEST

static void never_called(struct cr_reactor *r, int fd, unsigned events, void *arg)
{
    CR_UNUSED(r);
    CR_UNUSED(fd);
    CR_UNUSED(events);
    CR_UNUSED(arg);
    ck_abort_msg("listener event after the acceptor was destroyed");
}

START_TEST(destroy_cancels_backoff_timer_and_unregisters_listener)
{
    struct fixture f;
    struct fd_hog h;
    struct cr_acceptor_config cfg = {.backoff_min_ms = 50};

    ck_assert(fixture_init(&f, NULL, &cfg));
    cr_log_set_level(CR_LOG_ERROR);
    make_client_sockets(&f, 1);
    hog_fds(&h);
    connect_client_sockets(&f);
    while (cr_acceptor_backoffs(f.a) == 0)
        ck_assert_int_ge(cr_reactor_handle_events(f.r, 100, 0), 0);
    release_fds(&h);

    /* The timer is pending; destroy must cancel it (ASan would see it fire
     * on freed memory, LSan would see a leak). */
    cr_acceptor_destroy(f.a);
    f.a = NULL;
    ck_assert_int_eq(fcntl(f.lfd, F_GETFD) >= 0, 1); /* still open */
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(cr_reactor_handle_events(f.r, 10, 0), 0);
    /* Unregistered, so it can be registered again. */
    ck_assert_int_eq(cr_reactor_add(f.r, f.lfd, CR_EV_READ, 0, never_called, NULL), 0);
    ck_assert_int_eq(cr_reactor_remove(f.r, f.lfd), 0);
    ck_assert_int_eq(accepted(&f), 0);
    cr_acceptor_destroy(NULL);
    fixture_fini(&f);
}
END_TEST

START_TEST(create_refuses_bad_arguments)
{
    struct cr_reactor *r;
    struct cr_acceptor *a = (struct cr_acceptor *)1;
    struct cr_acceptor_config cfg = {.listen_fd = -1};
    int fd;

    ck_assert_int_eq(cr_reactor_create(&r, NULL), 0);
    ck_assert_int_eq(cr_acceptor_create(&a, r, &cfg, on_accept, NULL), -EBADF);
    ck_assert_ptr_null(a);
    ck_assert_int_eq(cr_listener_open(&fd, &(struct cr_listener_config){.address = ":0"}), 0);
    cfg.listen_fd = fd;
    cfg.batch = -1;
    ck_assert_int_eq(cr_acceptor_create(&a, r, &cfg, on_accept, NULL), -EINVAL);
    cfg.batch = 0;
    ck_assert_int_eq(cr_acceptor_create(&a, r, &cfg, NULL, NULL), -EINVAL);
    /* The fd is taken by another handler. */
    ck_assert_int_eq(cr_reactor_add(r, fd, CR_EV_READ, 0, never_called, NULL), 0);
    ck_assert_int_eq(cr_acceptor_create(&a, r, &cfg, on_accept, NULL), -EEXIST);
    ck_assert_int_eq(cr_reactor_remove(r, fd), 0);
    cr_reactor_destroy(r);
    close(fd);
}
END_TEST

Suite *acceptor_suite(void);
Suite *acceptor_suite(void)
{
    Suite *s = suite_create("acceptor");
    TCase *tc = tcase_create("core");
    TCase *emfile = tcase_create("emfile");

    tcase_set_timeout(tc, 15);
    tcase_add_loop_test(tc, accepts_connections_in_batches_on_each_backend, 0,
                        (int)(sizeof(backends) / sizeof(backends[0])));
    tcase_add_test(tc, pause_leaves_connections_in_backlog_until_resume);
    tcase_add_test(tc, pause_from_callback_stops_within_a_batch);
    tcase_add_test(tc, pause_resume_race_with_threads_taking_events);
    tcase_add_test(tc, create_refuses_bad_arguments);
    suite_add_tcase(s, tc);

    tcase_set_timeout(emfile, 15);
    tcase_add_test(emfile, emfile_backs_off_without_spinning_and_recovers);
    tcase_add_test(emfile, destroy_cancels_backoff_timer_and_unregisters_listener);
    suite_add_tcase(s, emfile);
    return s;
}
