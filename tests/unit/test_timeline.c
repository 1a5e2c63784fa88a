/*
 * test_timeline.c - the timeline (timeline.h): a lane's ring keeps the last
 * events in order, drops what the writer overwrites, and shows the state at
 * the start of the window; a server's timeline under each model has the
 * lanes and shapes the papers describe: under lf with eager promotion the
 * leadership passes from thread to thread (promotions with a from lane),
 * under hshr a listener lane hands work to worker lanes, under prefork one
 * lane per worker process, under forking one per child, under the proactor
 * completions dispatched; and a
 * timeline turned off records nothing.
 */
#include <cabrank/clock.h>
#include <cabrank/server.h>
#include <cabrank/timeline.h>

#include "pool/role_internal.h"
#include "pool/timeline_internal.h"
#include "services.h"
#include "support.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------- the ring */

START_TEST(ring_keeps_the_last_events_in_order)
{
    struct cr_timeline *t;
    struct cr__timeline_ring *r;
    struct cr_timeline_view *v;

    ck_assert_int_eq(cr_timeline_create(&t, 5), 0); /* rounded up to 8 */
    ck_assert_int_eq(cr__timeline_lane_add(t, "a", CR_TIMELINE_THREAD, &r), 0);
    for (int i = 1; i <= 20; i++)
        cr__timeline_ring_add(r, (uint64_t)i * 100, i % CR_ROLE_COUNT, i == 20 ? 0 : -1);
    ck_assert_int_eq(cr_timeline_read(t, 0, &v), 0);
    ck_assert_uint_eq(v->nlanes, 1);
    ck_assert_str_eq(v->lanes[0].name, "a");
    /* 8 slots, the oldest dropped as the one a writer may be rewriting. */
    ck_assert_uint_eq(v->lanes[0].npoints, 7);
    for (size_t k = 0; k < 7; k++) {
        ck_assert_uint_eq(v->lanes[0].points[k].t_ns, (14 + k) * 100);
        ck_assert_int_eq(v->lanes[0].points[k].state, (int)((14 + k) % CR_ROLE_COUNT));
    }
    /* from is a lane id, mapped to the lane's index in the view. */
    ck_assert_int_eq(v->lanes[0].points[6].from, 0);
    ck_assert_int_eq(v->lanes[0].points[5].from, -1);
    cr_timeline_view_free(v);

    /* A window from 1650: the state entered at 1600 shows at 1650. */
    ck_assert_int_eq(cr_timeline_read(t, 1650, &v), 0);
    ck_assert_uint_eq(v->lanes[0].npoints, 5);
    ck_assert_uint_eq(v->lanes[0].points[0].t_ns, 1650);
    ck_assert_int_eq(v->lanes[0].points[0].state, 16 % CR_ROLE_COUNT);
    ck_assert_uint_eq(v->lanes[0].points[1].t_ns, 1700);
    cr_timeline_view_free(v);

    cr__timeline_lane_remove(t, r);
    ck_assert_int_eq(cr_timeline_read(t, 0, &v), 0);
    ck_assert_uint_eq(v->nlanes, 0);
    cr_timeline_view_free(v);
    cr_timeline_destroy(t);
    ck_assert_int_eq(cr_timeline_create(&t, 1u << 20), -EINVAL);
}
END_TEST

struct writer {
    struct cr__timeline_ring *r;
    int stop;
};

static void *write_fast(void *arg)
{
    struct writer *w = arg;
    uint64_t i = 1;

    /* t_ns and state both i: a reader can tell a torn or misplaced event. */
    while (!__atomic_load_n(&w->stop, __ATOMIC_RELAXED)) {
        cr__timeline_ring_add(w->r, i, (int)(i & 0xff), -1);
        i++;
    }
    return NULL;
}

/* A reader racing a writer gets only whole events, in order, consecutive. */
START_TEST(a_reader_racing_the_writer_never_sees_a_torn_event)
{
    struct cr_timeline *t;
    struct writer w = {0};
    pthread_t th;
    uint64_t end = cr_test_now_ms() + 500;
    unsigned reads = 0;

    ck_assert_int_eq(cr_timeline_create(&t, 64), 0);
    ck_assert_int_eq(cr__timeline_lane_add(t, "w", CR_TIMELINE_THREAD, &w.r), 0);
    ck_assert_int_eq(pthread_create(&th, NULL, write_fast, &w), 0);
    while (cr_test_now_ms() < end || reads < 100) {
        struct cr_timeline_view *v;

        ck_assert_int_eq(cr_timeline_read(t, 0, &v), 0);
        for (size_t k = 0; k < v->lanes[0].npoints; k++) {
            const struct cr_timeline_point *p = &v->lanes[0].points[k];

            ck_assert_int_eq(p->state, (int)(p->t_ns & 0xff));
            if (k > 0)
                ck_assert_uint_eq(p->t_ns, v->lanes[0].points[k - 1].t_ns + 1);
        }
        cr_timeline_view_free(v);
        reads++;
    }
    __atomic_store_n(&w.stop, 1, __ATOMIC_RELAXED);
    pthread_join(th, NULL);
    cr__timeline_lane_remove(t, w.r);
    cr_timeline_destroy(t);
}
END_TEST

/* ------------------------------------------------------------- servers */

struct run {
    struct cr_test_svc svc;
    struct cr_server *s;
    uint16_t port;
    uint64_t t0;
};

static void run_start(struct run *x, struct cr_server_config cfg)
{
    char addr[64];

    ck_assert_int_eq(cr_test_line_init(&x->svc), 0);
    cfg.listen[0] = "127.0.0.1:0";
    ck_assert_int_eq(cr_server_create(&x->s, &cfg, &x->svc.svc), 0);
    ck_assert_int_eq(cr_server_address(x->s, 0, addr, sizeof(addr)), 0);
    x->port = (uint16_t)atoi(strrchr(addr, ':') + 1);
    x->t0 = cr_clock_now_ns();
    ck_assert_int_eq(cr_server_start(x->s), 0);
}

/* Bursts of requests from clients clients, each on its own connection,
 * and a few new connections, within a bounded time. */
static void run_load(struct run *x, unsigned clients, unsigned requests, const char *req)
{
    struct cr_test_client cl[8];
    char reply[256];

    ck_assert_uint_le(clients, 8);
    for (unsigned i = 0; i < clients; i++)
        ck_assert_int_eq(cr_test_client_open(&cl[i], x->port), 0);
    for (unsigned r = 0; r < requests; r++) {
        for (unsigned i = 0; i < clients; i++)
            ck_assert_int_eq(cr_test_client_send(&cl[i], req), 0);
        for (unsigned i = 0; i < clients; i++)
            ck_assert_int_gt(cr_test_client_line(&cl[i], reply, sizeof(reply), cr_test_tmo(5000)),
                             0);
    }
    for (unsigned i = 0; i < clients; i++)
        cr_test_client_close(&cl[i]);
}

static void run_stop(struct run *x)
{
    cr_server_stop(x->s, true);
    ck_assert_int_eq(cr_server_wait(x->s), 0);
    cr_server_destroy(x->s);
    cr_test_svc_fini(&x->svc);
}

static struct cr_timeline_view *read_view(struct run *x)
{
    struct cr_timeline_view *v;

    ck_assert_int_eq(cr_server_timeline(x->s, getenv("CR_TEST_ALL") ? 0 : x->t0, &v), 0);
    if (getenv("CR_TEST_DUMP") != NULL) {
        for (unsigned i = 0; i < v->nlanes; i++) {
            fprintf(stderr, "lane %u %s:", i, v->lanes[i].name);
            for (size_t k = 0; k < v->lanes[i].npoints; k++)
                fprintf(stderr, " %d@%.3f<%d", v->lanes[i].points[k].state,
                        (double)(v->lanes[i].points[k].t_ns - x->t0) / 1e6,
                        v->lanes[i].points[k].from);
            fprintf(stderr, "\n");
        }
    }
    return v;
}

/* Points in lane l in state st, and those of them handed on from a lane. */
static unsigned count_state(const struct cr_timeline_lane *l, int st, unsigned *with_from)
{
    unsigned n = 0;

    for (size_t k = 0; k < l->npoints; k++) {
        if (l->points[k].state != st)
            continue;
        n++;
        if (with_from != NULL && l->points[k].from >= 0)
            (*with_from)++;
    }
    return n;
}

static bool has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

/* Eager promotion: each event the leader takes, it hands the leadership to
 * a follower first; the new leader's lane says whose it was. */
START_TEST(lf_promotes_a_follower_for_every_burst)
{
    struct cr_server_config cfg = {.model = "lf", .threads = 3, .groups = 1};
    struct run x;
    struct cr_timeline_view *v;
    unsigned promotions = 0;
    unsigned leaders = 0;

    run_start(&x, cfg);
    run_load(&x, 2, 20, "1 SLEEP 2\n");
    v = read_view(&x);
    ck_assert_uint_eq(v->nlanes, 3);
    for (unsigned i = 0; i < v->nlanes; i++) {
        unsigned from = 0;
        unsigned lead = count_state(&v->lanes[i], CR_ROLE_LEADER, NULL);

        ck_assert_msg(has_prefix(v->lanes[i].name, "lf "), "%s", v->lanes[i].name);
        ck_assert_int_eq(v->lanes[i].kind, CR_TIMELINE_THREAD);
        for (size_t k = 0; k < v->lanes[i].npoints; k++) {
            const struct cr_timeline_point *p = &v->lanes[i].points[k];

            if (p->from >= 0) {
                from++;
                ck_assert_int_lt(p->from, (int)v->nlanes);
                ck_assert_int_ne(p->from, (int)i); /* a hand-off goes to another thread */
            }
            if (k > 0)
                ck_assert_uint_ge(p->t_ns, v->lanes[i].points[k - 1].t_ns);
        }
        promotions += from;
        leaders += lead > 0;
    }
    /* 40 requests in 20 bursts, each handler 2 ms: at least one promotion
     * per burst (the leader that takes the first event promotes a
     * follower, which leads while it sleeps). A handler of microseconds
     * may take the leadership back before the woken follower runs: no
     * hand-off then, and none is drawn. */
    ck_assert_uint_ge(promotions, 20);
    ck_assert_uint_ge(leaders, 2);
    cr_timeline_view_free(v);
    run_stop(&x);
}
END_TEST

/* Half-Sync/Half-Reactive: the listener lane stays the listener; worker
 * lanes process what it queued, each job an arrow from the listener. */
START_TEST(hshr_shows_the_listener_handing_jobs_to_workers)
{
    struct cr_server_config cfg = {.model = "hshr", .threads = 2};
    struct run x;
    struct cr_timeline_view *v;
    int listener = -1;
    unsigned jobs = 0;

    run_start(&x, cfg);
    run_load(&x, 3, 10, "1 ECHO hi\n");
    v = read_view(&x);
    ck_assert_uint_eq(v->nlanes, 3);
    for (unsigned i = 0; i < v->nlanes; i++) {
        if (strcmp(v->lanes[i].name, "hshr listener 0") == 0)
            listener = (int)i;
    }
    ck_assert_int_ge(listener, 0);
    ck_assert_uint_ge(count_state(&v->lanes[listener], CR_ROLE_LISTENER, NULL), 1);
    ck_assert_uint_eq(count_state(&v->lanes[listener], CR_ROLE_PROCESSING, NULL), 0);
    for (unsigned i = 0; i < v->nlanes; i++) {
        if ((int)i == listener)
            continue;
        ck_assert(has_prefix(v->lanes[i].name, "hshr worker "));
        for (size_t k = 0; k < v->lanes[i].npoints; k++) {
            const struct cr_timeline_point *p = &v->lanes[i].points[k];

            if (p->state == CR_ROLE_PROCESSING && p->t_ns > x.t0) {
                ck_assert_int_eq(p->from, listener);
                jobs++;
            }
        }
    }
    ck_assert_uint_ge(jobs, 30);
    cr_timeline_view_free(v);
    run_stop(&x);
}
END_TEST

/* Prefork: one lane per worker process, named by its pid, in the
 * scoreboard's states; the one that served was listening, then busy. */
START_TEST(prefork_has_a_lane_per_worker_process)
{
    struct cr_server_config cfg = {.model = "prefork", .workers = 3, .max_workers = 3};
    struct run x;
    struct cr_timeline_view *v;
    uint64_t end;
    unsigned busy = 0;
    unsigned listening = 0;

    run_start(&x, cfg);
    /* The workers start in their own time. */
    end = cr_test_now_ms() + (uint64_t)cr_test_tmo(5000);
    while (cr_server_scoreboard(x.s, NULL, 0) < 3 && cr_test_now_ms() < end)
        usleep(10000);
    run_load(&x, 2, 10, "1 ECHO hi\n");
    v = read_view(&x);
    ck_assert_uint_eq(v->nlanes, 3);
    for (unsigned i = 0; i < v->nlanes; i++) {
        ck_assert_msg(has_prefix(v->lanes[i].name, "pid "), "%s", v->lanes[i].name);
        ck_assert_int_eq(v->lanes[i].kind, CR_TIMELINE_PROCESS);
        busy += count_state(&v->lanes[i], CR_WORKER_BUSY, NULL);
        listening += count_state(&v->lanes[i], CR_WORKER_LISTENING, NULL);
    }
    ck_assert_uint_ge(busy, 2);
    ck_assert_uint_ge(listening, 2);
    cr_timeline_view_free(v);
    run_stop(&x);
}
END_TEST

/* Forking: a lane per child, busy while it serves its one connection. */
START_TEST(forking_has_a_lane_per_child)
{
    struct cr_server_config cfg = {.model = "forking"};
    struct cr_test_client cl[2];
    char reply[64];
    struct run x;
    struct cr_timeline_view *v;
    unsigned busy = 0;

    run_start(&x, cfg);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(cr_test_client_open(&cl[i], x.port), 0);
        ck_assert_int_gt(
            cr_test_client_request(&cl[i], "1 ECHO hi", reply, sizeof(reply), cr_test_tmo(5000)),
            0);
    }
    v = read_view(&x);
    ck_assert_uint_eq(v->nlanes, 2);
    for (unsigned i = 0; i < v->nlanes; i++) {
        ck_assert_msg(has_prefix(v->lanes[i].name, "pid "), "%s", v->lanes[i].name);
        ck_assert_int_eq(v->lanes[i].kind, CR_TIMELINE_PROCESS);
        busy += count_state(&v->lanes[i], CR_WORKER_BUSY, NULL);
    }
    ck_assert_uint_eq(busy, 2);
    cr_timeline_view_free(v);
    for (int i = 0; i < 2; i++)
        cr_test_client_close(&cl[i]);
    run_stop(&x);
}
END_TEST

/* The Proactor: each completion dispatched is a PROCESSING point. */
START_TEST(proactor_shows_completions_dispatched)
{
    struct cr_server_config cfg = {.model = "proactor", .threads = 2};
    struct run x;
    struct cr_timeline_view *v;
    unsigned done = 0;

    run_start(&x, cfg);
    run_load(&x, 2, 10, "1 ECHO hi\n");
    v = read_view(&x);
    ck_assert_uint_ge(v->nlanes, 1);
    for (unsigned i = 0; i < v->nlanes; i++) {
        ck_assert(has_prefix(v->lanes[i].name, "proactor "));
        done += count_state(&v->lanes[i], CR_ROLE_PROCESSING, NULL);
    }
    ck_assert_uint_ge(done, 20);
    cr_timeline_view_free(v);
    run_stop(&x);
}
END_TEST

/* reactor and tpc: a lane per thread. */
START_TEST(reactor_and_tpc_have_their_lanes)
{
    static const char *const models[] = {"reactor", "tpc"};
    static const char *const prefix[] = {"reactor", "tpc "};

    for (int m = 0; m < 2; m++) {
        struct cr_server_config cfg = {.model = models[m], .threads = 2};
        struct run x;
        struct cr_timeline_view *v;
        unsigned done = 0;

        run_start(&x, cfg);
        run_load(&x, 2, 5, "1 ECHO hi\n");
        v = read_view(&x);
        ck_assert_uint_ge(v->nlanes, 1);
        for (unsigned i = 0; i < v->nlanes; i++) {
            ck_assert_msg(has_prefix(v->lanes[i].name, prefix[m]), "%s", v->lanes[i].name);
            done += count_state(&v->lanes[i], CR_ROLE_PROCESSING, NULL);
        }
        ck_assert_uint_ge(done, 2);
        cr_timeline_view_free(v);
        run_stop(&x);
    }
}
END_TEST

START_TEST(a_timeline_turned_off_records_nothing)
{
    struct cr_server_config cfg = {
        .model = "lf", .threads = 2, .timeline_events = CR_SERVER_TIMELINE_OFF};
    struct run x;
    struct cr_timeline_view *v = NULL;

    run_start(&x, cfg);
    run_load(&x, 1, 3, "1 ECHO hi\n");
    ck_assert_int_eq(cr_server_timeline(x.s, 0, &v), -ENOENT);
    ck_assert_ptr_null(v);
    run_stop(&x);
}
END_TEST

Suite *timeline_suite(void);
Suite *timeline_suite(void)
{
    Suite *s = suite_create("timeline");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, ring_keeps_the_last_events_in_order);
    tcase_add_test(tc, a_reader_racing_the_writer_never_sees_a_torn_event);
    tcase_add_test(tc, lf_promotes_a_follower_for_every_burst);
    tcase_add_test(tc, hshr_shows_the_listener_handing_jobs_to_workers);
    tcase_add_test(tc, prefork_has_a_lane_per_worker_process);
    tcase_add_test(tc, forking_has_a_lane_per_child);
    tcase_add_test(tc, proactor_shows_completions_dispatched);
    tcase_add_test(tc, reactor_and_tpc_have_their_lanes);
    tcase_add_test(tc, a_timeline_turned_off_records_nothing);
    suite_add_tcase(s, tc);
    return s;
}
