/*
 * test_server_groups.c - the lf and hshr models with groups > 1 over
 * listeners the server opens itself: each configured address is opened once
 * per group with SO_REUSEPORT (the copies on the first one's port, so port 0
 * works), and each group's reactor accepts only on its own copy. Checks the
 * sockets the kernel lists (/proc/net/tcp), that clients are served and
 * spread over the groups (cr_server_stats' group_accepted), under lf with one
 * follower set per group and with a shared one (multiple_leaders) and under
 * hshr (a listener, a job queue and workers per set); that inherited
 * sockets, groups = 1 and the other models keep one socket per address; that
 * impossible groups are refused without leaving a socket open; for hshr's
 * sets, graceful and immediate stops with every set busy, and that a set
 * whose workers are all blocked leaves the other set's clients served; and
 * that groups left at 0 give lf one set per CPU of the affinity mask (pinned
 * in the forked test process), fewer where threads are given, and one on one
 * CPU.
 */
#include <cabrank/cpu.h>
#include <cabrank/listener.h>
#include <cabrank/server.h>

#include "../support/services.h"
#include "../support/support.h"

#include <check.h>
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TEST_TIMEOUT 10 /* seconds per test, times CK_TIMEOUT_MULTIPLIER */
#define CLIENTS      64
#define THREADS      4

/* ms scaled for slow (sanitizer) builds: for waits that expect an event. */
/* Listening TCP sockets on 127.0.0.1:port, from /proc/net/tcp (every
 * SO_REUSEPORT copy is a line of its own); -1 when it cannot be read. */
static int count_listening(uint16_t port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    char line[512];
    int n = 0;

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned addr;
        unsigned lport;
        unsigned st;

        /* "  0: 0100007F:1F90 00000000:0000 0A ..." */
        if (sscanf(line, " %*d: %8X:%4X %*8X:%*4X %2X", &addr, &lport, &st) != 3)
            continue; /* the header */
        if (addr == 0x0100007Fu && lport == port && st == 0x0A)
            n++;
    }
    fclose(f);
    return n;
}

/* Descriptors open in this process now. */
static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.')
            n++;
    }
    closedir(d);
    return n - 1; /* the directory's own */
}

static uint16_t server_port(struct cr_server *s, unsigned i)
{
    char addr[64];
    char *colon;

    ck_assert_int_eq(cr_server_address(s, i, addr, sizeof(addr)), 0);
    colon = strrchr(addr, ':');
    ck_assert_ptr_nonnull(colon);
    ck_assert_int_ne(atoi(colon + 1), 0);
    return (uint16_t)atoi(colon + 1);
}

/* Sets up the line service in t and creates a server on it with cfg, whose
 * every address must have `copies` listening sockets. */
static struct cr_server *create_server(const struct cr_server_config *cfg, struct cr_test_svc *t,
                                       int copies)
{
    struct cr_server *s;

    ck_assert_int_eq(cr_test_line_init(t), 0);
    ck_assert_int_eq(cr_server_create(&s, cfg, &t->svc), 0);
    for (unsigned i = 0; i < cr_server_listeners(s); i++) {
        int listening = count_listening(server_port(s, i));

        if (listening >= 0) /* else no /proc: the other checks stand */
            ck_assert_int_eq(listening, copies);
        else
            cr_test_skip("server_groups: the listening copies' count", "no /proc/net/tcp here");
    }
    return s;
}

/* Client i's request `op` answered with `want` within timeout_ms. */
static void expect_answer(struct cr_test_client *cl, int i, const char *op, const char *want,
                          int timeout_ms)
{
    char req[64];
    char got[256];
    ssize_t len;

    snprintf(req, sizeof(req), "c%d %s", i, op);
    len = cr_test_client_request(cl, req, got, sizeof(got), timeout_ms);
    ck_assert_msg(len >= 0, "client %d, %s: %s", i, op, strerror((int)-len));
    ck_assert_str_eq(got, want);
}

/* Client i's ECHO answered. */
static void expect_echo(struct cr_test_client *cl, int i)
{
    char op[32];
    char want[64];

    snprintf(op, sizeof(op), "ECHO %d", i);
    snprintf(want, sizeof(want), "c%d OK %d", i, i);
    expect_answer(cl, i, op, want, cr_test_tmo(3000));
}

/* Opens n clients to port at once, then has each answered: n connections
 * accepted and open. */
static struct cr_test_client *open_clients(uint16_t port, int n)
{
    struct cr_test_client *cl = calloc((size_t)n, sizeof(*cl));

    ck_assert_ptr_nonnull(cl);
    for (int i = 0; i < n; i++) {
        int err = cr_test_client_open(&cl[i], port);

        ck_assert_msg(err == 0, "client %d: connect: %s", i, strerror(-err));
    }
    for (int i = 0; i < n; i++)
        expect_echo(&cl[i], i);
    return cl;
}

static void close_clients(struct cr_test_client *cl, int n)
{
    for (int i = 0; i < n; i++)
        cr_test_client_close(&cl[i]);
    free(cl);
}

/* Opens n clients, has each answered, closes them. */
static void serve_clients(uint16_t port, int n)
{
    close_clients(open_clients(port, n), n);
}

/* Stops (gracefully), waits, destroys, and checks the service's books. */
static void finish(struct cr_server *s, struct cr_test_svc *t)
{
    cr_server_stop(s, true);
    ck_assert_int_eq(cr_server_wait(s), 0);
    cr_server_destroy(s);
    ck_assert_uint_eq(cr_test_svc_get(&t->n->overlaps), 0);
    ck_assert_uint_eq(cr_test_svc_get(&t->n->opened), cr_test_svc_get(&t->n->closed));
    ck_assert_uint_eq(cr_test_svc_outstanding(t), 0);
    cr_test_svc_fini(t);
}

/* The models with sets: _i 0 = lf, 1 = hshr. */
static const char *const grouped[] = {"lf", "hshr"};

/* _i: 0 = lf with a follower set per group, 1 = hshr, 2 = lf with one
 * shared follower set (multiple_leaders). */
START_TEST(groups_accept_on_their_own_reuseport_copies)
{
    struct cr_server_config cfg = {
        .model = grouped[_i % 2],
        .listen = {"127.0.0.1:0"},
        .threads = THREADS,
        .groups = 2,
        .multiple_leaders = _i == 2,
    };
    struct cr_server_stats st;
    struct cr_test_svc t;
    struct cr_server *s = create_server(&cfg, &t, 2);
    uint16_t port;

    ck_assert_uint_eq(cr_server_listeners(s), 1);
    port = server_port(s, 0);
    ck_assert_int_eq(cr_server_start(s), 0);
    serve_clients(port, CLIENTS);
    cr_server_stats(s, &st, NULL, 0);
    ck_assert_uint_eq(st.accepted, CLIENTS);
    ck_assert_uint_eq(st.groups, 2);
    ck_assert_uint_eq(st.group_accepted[0] + st.group_accepted[1], CLIENTS);
    /* The kernel hashes each connection to one copy: that all 64 land on
     * one has odds of 2^-63. */
    ck_assert_uint_gt(st.group_accepted[0], 0);
    ck_assert_uint_gt(st.group_accepted[1], 0);
    ck_assert_uint_eq(cr_test_svc_get(&t.n->requests), CLIENTS);
    finish(s, &t);
}
END_TEST

START_TEST(every_address_gets_a_copy_per_group)
{
    struct cr_server_config cfg = {
        .model = grouped[_i],
        .listen = {"127.0.0.1:0", "127.0.0.1:0"},
        .threads = THREADS,
        .groups = 2,
    };
    struct cr_server_stats st;
    struct cr_test_svc t;
    struct cr_server *s = create_server(&cfg, &t, 2);
    uint16_t port[2];

    ck_assert_uint_eq(cr_server_listeners(s), 2);
    port[0] = server_port(s, 0);
    port[1] = server_port(s, 1);
    ck_assert_int_ne(port[0], port[1]);
    ck_assert_int_eq(cr_server_start(s), 0);
    serve_clients(port[0], CLIENTS / 2);
    serve_clients(port[1], CLIENTS / 2);
    cr_server_stats(s, &st, NULL, 0);
    ck_assert_uint_eq(st.accepted, CLIENTS);
    ck_assert_uint_eq(st.groups, 2);
    ck_assert_uint_eq(st.group_accepted[0] + st.group_accepted[1], CLIENTS);
    finish(s, &t);
}
END_TEST

/* An inherited socket is the caller's: every group accepts on it. */
START_TEST(groups_share_an_inherited_listener)
{
    struct cr_listener_config lc = {.address = "127.0.0.1:0"};
    struct cr_server_config cfg = {
        .model = grouped[_i],
        .threads = THREADS,
        .groups = 2,
    };
    struct cr_server_stats st;
    struct cr_test_svc t;
    struct cr_server *s;
    uint16_t port;
    int fd;

    ck_assert_int_eq(cr_listener_open(&fd, &lc), 0);
    cfg.listen_fds[0] = fd;
    s = create_server(&cfg, &t, 1);
    ck_assert_uint_eq(cr_server_listeners(s), 1);
    port = server_port(s, 0);
    ck_assert_int_eq(port, cr_listener_port(fd));
    ck_assert_int_eq(cr_server_start(s), 0);
    serve_clients(port, CLIENTS / 4);
    cr_server_stats(s, &st, NULL, 0);
    ck_assert_uint_eq(st.groups, 2);
    ck_assert_uint_eq(st.group_accepted[0] + st.group_accepted[1], CLIENTS / 4);
    finish(s, &t);
    /* Still open: the server closes only what it opened. */
    ck_assert_int_eq(cr_listener_port(fd), port);
    close(fd);
}
END_TEST

/* _i: 0 = lf with groups 1, 1 = hshr with groups 1, 2 = reactor, a model
 * without sets, with groups 2. */
START_TEST(one_socket_per_address_otherwise)
{
    static const char *const models[] = {"lf", "hshr", "reactor"};
    struct cr_server_config cfg = {
        .model = models[_i],
        .listen = {"127.0.0.1:0"},
        .threads = THREADS,
        .groups = _i == 2 ? 2 : 1,
    };
    struct cr_test_svc t;
    struct cr_server *s = create_server(&cfg, &t, 1);

    ck_assert_int_eq(cr_server_start(s), 0);
    serve_clients(server_port(s, 0), CLIENTS / 4);
    finish(s, &t);
}
END_TEST

/* _i % 2: 0 = more groups than threads (refused before any copy is
 * opened), 1 = more than CR_SERVER_MAX_GROUPS (refused by the model, after
 * the copies); _i / 2: lf, hshr. */
START_TEST(refuses_impossible_groups_and_closes_the_copies)
{
    struct cr_server_config cfg = {
        .model = grouped[_i / 2],
        .listen = {"127.0.0.1:0", "127.0.0.1:0"},
        .threads = _i % 2 == 0 ? 2 : CR_SERVER_MAX_GROUPS + 1,
        .groups = _i % 2 == 0 ? 3 : CR_SERVER_MAX_GROUPS + 1,
    };
    struct cr_test_svc t;
    struct cr_server *s = NULL;
    int fds;

    ck_assert_int_eq(cr_test_line_init(&t), 0);
    fds = count_fds();
    ck_assert_int_eq(cr_server_create(&s, &cfg, &t.svc), -EINVAL);
    ck_assert_ptr_null(s);
    /* Every copy it opened is closed again. */
    ck_assert_int_eq(count_fds(), fds);
    cr_test_svc_fini(&t);
}
END_TEST

/* Restricts this (forked) test process to the first n CPUs of the mask it
 * started with; false where that has fewer. */
static bool pin_to_cpus(int n)
{
    static cpu_set_t all;
    static bool have_all;
    cpu_set_t some;
    int k = 0;

    if (!have_all)
        ck_assert_int_eq(sched_getaffinity(0, sizeof(all), &all), 0);
    have_all = true;
    CPU_ZERO(&some);
    for (int c = 0; c < CPU_SETSIZE && k < n; c++) {
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &some);
            k++;
        }
    }
    if (k < n)
        return false;
    ck_assert_int_eq(sched_setaffinity(0, sizeof(some), &some), 0);
    return true;
}

/* The sets and threads lf gets from its defaults on `cpus` CPUs with
 * `threads` given (0: none): the server's stats and listening copies. */
static void check_auto_groups(int cpus, int threads, unsigned want_groups, unsigned want_threads)
{
    struct cr_server_config cfg = {
        .listen = {"127.0.0.1:0"},
        .threads = threads,
    };
    struct cr_server_stats st;
    struct cr_test_svc t;
    struct cr_server *s;
    unsigned workers;

    ck_assert_msg(pin_to_cpus(cpus), "fewer than %d CPUs", cpus);
    s = create_server(&cfg, &t, (int)want_groups);
    ck_assert_int_eq(cr_server_start(s), 0);
    workers = cr_server_stats(s, &st, NULL, 0);
    ck_assert_str_eq(st.model, "lf");
    ck_assert_uint_eq(st.groups, want_groups);
    ck_assert_uint_eq(workers, want_threads);
    serve_clients(server_port(s, 0), CLIENTS / 4);
    finish(s, &t);
}

/* _i + 1 CPUs: the default is a set per CPU, two threads each. */
START_TEST(default_groups_follow_the_affinity_mask)
{
    int cpus = _i + 1;

    check_auto_groups(cpus, 0, (unsigned)cpus, 2u * (unsigned)cpus);
}
END_TEST

START_TEST(one_cpu_gives_one_set)
{
    check_auto_groups(1, 0, 1, 2);
}
END_TEST

/* With threads given, groups is threads / 2, at least 1, at most the CPUs. */
START_TEST(given_threads_bound_the_default_groups)
{
    check_auto_groups(1, 8, 1, 8);
    if (cr_cpu_usable() >= 2) {
        check_auto_groups(2, 1, 1, 1);
        check_auto_groups(2, 3, 1, 3);
        check_auto_groups(2, 4, 2, 4);
        check_auto_groups(2, 9, 2, 9);
    }
}
END_TEST

/* Other models keep their worker count at the usable CPUs and have no sets. */
START_TEST(other_models_default_to_the_usable_cpus)
{
    struct cr_server_config cfg = {.model = "hshr", .listen = {"127.0.0.1:0"}};
    struct cr_server_stats st;
    struct cr_test_svc t;
    struct cr_server *s;

    ck_assert(pin_to_cpus(1));
    s = create_server(&cfg, &t, 1);
    ck_assert_int_eq(cr_server_start(s), 0);
    /* The half-reactive thread, and one worker per CPU. */
    ck_assert_uint_eq(cr_server_stats(s, &st, NULL, 0), 2);
    ck_assert_uint_eq(st.groups, 0);
    finish(s, &t);
}
END_TEST

/* ------------------------------------------------------------------ hshr's sets */

/* An hshr server of `threads` (even, at most THREADS) workers in two sets on
 * 127.0.0.1:0, started, with CLIENTS clients open and answered, spread over
 * both sets. */
static struct cr_server *start_hshr(int threads, struct cr_test_svc *t, struct cr_test_client **cl)
{
    struct cr_server_config cfg = {
        .model = "hshr",
        .listen = {"127.0.0.1:0"},
        .threads = threads,
        .groups = 2,
    };
    struct cr_worker_stats w[THREADS + 2];
    struct cr_server_stats st;
    struct cr_server *s = create_server(&cfg, t, 2);

    ck_assert_int_eq(cr_server_start(s), 0);
    *cl = open_clients(server_port(s, 0), CLIENTS);
    /* The workers set by set, half each, then the two listeners. */
    ck_assert_uint_eq(cr_server_stats(s, &st, w, THREADS + 2), (unsigned)threads + 2);
    for (int i = 0; i < threads; i++)
        ck_assert_uint_eq(w[i].group, (unsigned)(i / (threads / 2)));
    ck_assert_uint_eq(w[threads].group, 0);
    ck_assert_uint_eq(w[threads + 1].group, 1);
    ck_assert_uint_eq(st.groups, 2);
    ck_assert_uint_gt(st.group_accepted[0], 0);
    ck_assert_uint_gt(st.group_accepted[1], 0);
    return s;
}

/* Waits up to timeout_ms for *counter to reach want. */
static bool wait_counter(const uint64_t *counter, uint64_t want, int timeout_ms)
{
    uint64_t end = cr_test_now_ms() + (uint64_t)timeout_ms;

    while (cr_test_svc_get(counter) < want) {
        if (cr_test_now_ms() > end)
            return false;
        usleep(2000);
    }
    return true;
}

/* The set of the worker that answers client i's next request, of nworkers
 * (cr_worker_stats.group). */
static unsigned client_set(struct cr_server *s, struct cr_test_client *cl, int i, unsigned nworkers)
{
    struct cr_worker_stats before[THREADS + 2];
    struct cr_worker_stats after[THREADS + 2];
    struct cr_server_stats st;
    unsigned worker = nworkers;

    /* The workers, then a listener per set. */
    ck_assert_uint_eq(cr_server_stats(s, &st, before, THREADS + 2), nworkers + 2);
    expect_echo(cl, i);
    cr_server_stats(s, &st, after, THREADS + 2);
    for (unsigned w = 0; w < nworkers; w++) {
        if (after[w].events != before[w].events) {
            ck_assert_uint_eq(worker, nworkers); /* one job, one worker */
            worker = w;
        }
    }
    ck_assert_uint_lt(worker, nworkers);
    ck_assert_uint_lt(after[worker].group, 2);
    return after[worker].group;
}

/* Two clients of each set: of[set][k], client indices. Each client answers
 * one more request (2 * CLIENTS started in all). */
static void two_per_set(struct cr_server *s, struct cr_test_client *cl, unsigned nworkers,
                        int of[2][2])
{
    for (int k = 0; k < 4; k++)
        of[k / 2][k % 2] = -1;
    for (int i = 0; i < CLIENTS; i++) {
        unsigned set = client_set(s, &cl[i], i, nworkers);

        if (of[set][0] < 0)
            of[set][0] = i;
        else if (of[set][1] < 0)
            of[set][1] = i;
    }
    for (int k = 0; k < 4; k++)
        ck_assert_int_ge(of[k / 2][k % 2], 0);
}

static void expect_line(struct cr_test_client *cl, const char *want)
{
    char line[64];

    ck_assert_int_ge(cr_test_client_line(cl, line, sizeof(line), cr_test_tmo(3000)), 0);
    ck_assert_str_eq(line, want);
}

/* A request in flight in each set: a graceful stop answers both, closes
 * every connection and returns well within the grace period. */
START_TEST(hshr_graceful_stop_finishes_requests_in_every_set)
{
    struct cr_test_svc t;
    struct cr_test_client *cl;
    struct cr_server *s = start_hshr(THREADS, &t, &cl);
    int of[2][2];
    uint64_t t0;

    two_per_set(s, cl, THREADS, of);
    ck_assert_int_eq(cr_test_client_send(&cl[of[0][0]], "a SLEEP 300\n"), 0);
    ck_assert_int_eq(cr_test_client_send(&cl[of[1][0]], "b SLEEP 300\n"), 0);
    ck_assert(wait_counter(&t.n->started, 2 * CLIENTS + 2, cr_test_tmo(3000)));
    t0 = cr_test_now_ms();
    cr_server_stop(s, true);
    expect_line(&cl[of[0][0]], "a OK");
    expect_line(&cl[of[1][0]], "b OK");
    for (int i = 0; i < CLIENTS; i++)
        ck_assert_int_eq(cr_test_client_eof(&cl[i], cr_test_tmo(3000)), 0);
    ck_assert_int_eq(cr_server_wait(s), 0);
    ck_assert_uint_lt(cr_test_now_ms() - t0, (uint64_t)cr_test_tmo(3000));
    close_clients(cl, CLIENTS);
    finish(s, &t);
}
END_TEST

/* An immediate stop with a request in flight in one set and half a request
 * in the other: every connection of both sets closed, the books balanced. */
START_TEST(hshr_immediate_stop_closes_every_set)
{
    struct cr_test_svc t;
    struct cr_test_client *cl;
    struct cr_server *s = start_hshr(THREADS, &t, &cl);
    int of[2][2];

    two_per_set(s, cl, THREADS, of);
    ck_assert_int_eq(cr_test_client_send(&cl[of[0][0]], "a SLEEP 200\n"), 0);
    ck_assert_int_eq(cr_test_client_send(&cl[of[1][0]], "b ECHO hal"), 0);
    ck_assert(wait_counter(&t.n->started, 2 * CLIENTS + 1, cr_test_tmo(3000)));
    cr_server_stop(s, false);
    ck_assert_int_eq(cr_server_wait(s), 0);
    cr_server_destroy(s);
    for (int i = 0; i < CLIENTS; i++) {
        if (i != of[0][0]) /* may have its answer first */
            ck_assert_int_eq(cr_test_client_eof(&cl[i], cr_test_tmo(3000)), 0);
    }
    close_clients(cl, CLIENTS);
    ck_assert_uint_eq(cr_test_svc_get(&t.n->overlaps), 0);
    ck_assert_uint_eq(cr_test_svc_get(&t.n->opened), cr_test_svc_get(&t.n->closed));
    ck_assert_uint_eq(cr_test_svc_outstanding(&t), 0);
    cr_test_svc_fini(&t);
}
END_TEST

/* Two sets of one worker each: while set 0's worker sleeps in a handler, a
 * client of set 1 is answered at once. (Set 0's other clients wait for the
 * sleeper: a connection stays in its set.) */
START_TEST(hshr_blocked_set_leaves_the_other_served)
{
    struct cr_test_svc t;
    struct cr_test_client *cl;
    struct cr_server *s = start_hshr(2, &t, &cl);
    int of[2][2];
    uint64_t t0;
    uint64_t took;

    two_per_set(s, cl, 2, of);
    ck_assert_int_eq(cr_test_client_send(&cl[of[0][0]], "a SLEEP 800\n"), 0);
    ck_assert(wait_counter(&t.n->started, 2 * CLIENTS + 1, cr_test_tmo(3000)));
    t0 = cr_test_now_ms();
    expect_echo(&cl[of[1][0]], of[1][0]);
    expect_echo(&cl[of[1][1]], of[1][1]);
    took = cr_test_now_ms() - t0;
    ck_assert_msg(took < 600, "the other set's clients waited %llu ms", (unsigned long long)took);
    expect_echo(&cl[of[0][1]], of[0][1]);
    expect_line(&cl[of[0][0]], "a OK");
    close_clients(cl, CLIENTS);
    finish(s, &t);
}
END_TEST

Suite *server_groups_suite(void);

Suite *server_groups_suite(void)
{
    Suite *s = suite_create("server_groups");
    TCase *tc = tcase_create("reuseport");

    tcase_set_timeout(tc, TEST_TIMEOUT);
    tcase_add_loop_test(tc, groups_accept_on_their_own_reuseport_copies, 0, 3);
    tcase_add_loop_test(tc, every_address_gets_a_copy_per_group, 0, 2);
    tcase_add_loop_test(tc, groups_share_an_inherited_listener, 0, 2);
    tcase_add_loop_test(tc, one_socket_per_address_otherwise, 0, 3);
    tcase_add_loop_test(tc, refuses_impossible_groups_and_closes_the_copies, 0, 4);
    suite_add_tcase(s, tc);
    tc = tcase_create("hshr_sets");
    tcase_set_timeout(tc, TEST_TIMEOUT);
    tcase_add_test(tc, hshr_graceful_stop_finishes_requests_in_every_set);
    tcase_add_test(tc, hshr_immediate_stop_closes_every_set);
    tcase_add_test(tc, hshr_blocked_set_leaves_the_other_served);
    suite_add_tcase(s, tc);
    tc = tcase_create("auto");
    tcase_set_timeout(tc, TEST_TIMEOUT);
    tcase_add_loop_test(tc, default_groups_follow_the_affinity_mask, 0,
                        cr_cpu_usable() < 4 ? cr_cpu_usable() : 4);
    tcase_add_test(tc, one_cpu_gives_one_set);
    tcase_add_test(tc, given_threads_bound_the_default_groups);
    tcase_add_test(tc, other_models_default_to_the_usable_cpus);
    suite_add_tcase(s, tc);
    return s;
}
