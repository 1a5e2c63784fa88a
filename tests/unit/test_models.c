/*
 * test_models.c - the service conformance tests: the line and echo services
 * (tests/support/services.h) run in-process under cr_server on 127.0.0.1:0,
 * once for every variant models_suite() lists: every model of
 * cr_server_models(); for lf, every promotion order of
 * cr_lf_pool_promotions(), deferred promotion, two handle sets (groups, a
 * follower set each or one shared: multiple_leaders) and the poll and select
 * backends; reactor and hshr over poll; hshr with two sets (groups); the
 * proactor's dispatchers over its engines. Each variant is one loop
 * iteration. Covers concurrent clients,
 * every handle set accepting and serving, pipelining across memory, zero-copy
 * and file output, half-closed and vanishing clients, a slow reader, a
 * blocking handler, the idle timeout, max_connections, graceful stop with a
 * request in flight, immediate stop, protocol errors, counters, signals
 * through cr_server_run, and that no connection is ever served by two
 * threads at once.
 *
 * Every test ends by stopping the server and checking that each connection
 * was closed, every zero-copy segment released and no call overlapped; under
 * ASan, LSan then finds any leak.
 *
 * The process models (forking, prefork) run the service in worker processes
 * forked by cr_server_start: the services' counts sit in shared memory
 * (services.h), so every check above holds for them too, and "no call
 * overlapped" still means no connection was served by two threads at once
 * (nor by two processes). What legitimately differs is named where it
 * matters by is_process_model(): the process caps (cfg.max_workers, and
 * prefork's threads per worker) and graceful restarts. Waits that expect something scale with
 * CK_TIMEOUT_MULTIPLIER (TSan); waits that expect nothing do not.
 */
#include <cabrank/handle_set.h>
#include <cabrank/lf_pool.h>
#include <cabrank/proactor.h>
#include <cabrank/server.h>

#include "../support/services.h"
#include "../support/support.h"

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_VARIANTS 32
/* Seconds per test, times CK_TIMEOUT_MULTIPLIER: a bound on a hang, well
 * past what a test's own waits (each bounded) add up to under ASan on a
 * starved 2-core machine (10 was exceeded there, at load 15-18). */
#define TEST_TIMEOUT 20
#define THREADS      4

struct variant {
    const char *model;
    const char *promotion; /* lf only */
    unsigned delay_us;     /* lf only: promotion delay */
    int groups;            /* lf, hshr: handle sets (lf: always named; 0 elsewhere) */
    bool multiple_leaders; /* lf only, with groups > 1 */
    unsigned busy_poll_us; /* reactor, lf, hshr */
    const char *backend;   /* reactor, lf, hshr: handle set; NULL: the default */
    const char *dispatch;  /* proactor only */
    const char *engine;    /* proactor only */
};

/* Filled by models_suite() before Check forks the tests; skipped: the
 * variants that cannot run here, each test of each reported as skipped. */
static struct variant variants[MAX_VARIANTS];
static int nvariants;
static struct variant skipped[MAX_VARIANTS];
static int nskipped;

struct fixture {
    const struct variant *v;
    struct cr_test_svc t;
    struct cr_server *s;
    uint16_t port;
    bool stopped;
};

/* ms scaled for slow (sanitizer) builds: for waits that expect an event. */
/* A blocking handler leaves other connections served. Not under reactor,
 * nor under a proactor whose connection may share the blocked thread: one
 * dispatcher (single), or the ring its connection was accepted on. */
static bool is_threaded(const struct fixture *f)
{
    if (f->v->dispatch != NULL && strcmp(f->v->dispatch, "lf") != 0)
        return false;
    return strcmp(f->v->model, "reactor") != 0;
}

/* The service runs in forked worker processes, not in the test's. */
static bool is_process_model(const struct variant *v)
{
    return strcmp(v->model, "forking") == 0 || strcmp(v->model, "prefork") == 0;
}

static bool is_prefork(const struct variant *v)
{
    return strcmp(v->model, "prefork") == 0;
}

/* The variant in words, for failure messages: "lf/lifo groups=2 shared". */
static const char *describe(const struct variant *v, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s%s", v->model, v->promotion != NULL ? "/" : "",
             v->promotion != NULL ? v->promotion : "");
    if (v->delay_us != 0)
        snprintf(buf + strlen(buf), size - strlen(buf), " delay=%u", v->delay_us);
    if (v->busy_poll_us != 0)
        snprintf(buf + strlen(buf), size - strlen(buf), " busy_poll=%u", v->busy_poll_us);
    if (v->groups != 0)
        snprintf(buf + strlen(buf), size - strlen(buf), " groups=%d%s", v->groups,
                 v->multiple_leaders ? " shared" : "");
    if (v->backend != NULL)
        snprintf(buf + strlen(buf), size - strlen(buf), " %s", v->backend);
    if (v->dispatch != NULL)
        snprintf(buf + strlen(buf), size - strlen(buf), " %s/%s", v->dispatch, v->engine);
    return buf;
}

/*
 * Fills in what a test left 0. Prefork: a connection holds a worker thread
 * while it is open, so two workers of two threads serve four connections at
 * once and the manager adds workers (min_spare idle ones kept, up to
 * max_workers) for the tests that keep more open; forking: a child per
 * connection, under the default cap.
 */
static void set_defaults(const struct variant *v, struct cr_server_config *cfg)
{
    cfg->model = v->model;
    cfg->promotion = v->promotion;
    cfg->promotion_delay_us = v->delay_us;
    cfg->groups = v->groups;
    cfg->multiple_leaders = v->multiple_leaders;
    cfg->busy_poll_us = v->busy_poll_us;
    cfg->backend = v->backend;
    cfg->dispatch = v->dispatch;
    cfg->async_engine = v->engine;
    cfg->listen[0] = "127.0.0.1:0";
    if (is_prefork(v)) {
        if (cfg->threads == 0)
            cfg->threads = 2;
        if (cfg->workers == 0)
            cfg->workers = 2;
        if (cfg->min_spare == 0)
            cfg->min_spare = 2;
        if (cfg->max_workers == 0)
            cfg->max_workers = 64;
    }
    if (cfg->threads == 0)
        cfg->threads = THREADS;
}

static void fx_start_cfg(struct fixture *f, int i, bool echo, struct cr_server_config cfg)
{
    char name[128];
    char addr[64];
    char *colon;
    int err;

    memset(f, 0, sizeof(*f));
    f->v = &variants[i];
    err = echo ? cr_test_echo_init(&f->t) : cr_test_line_init(&f->t);
    ck_assert_int_eq(err, 0);
    set_defaults(f->v, &cfg);
    err = cr_server_create(&f->s, &cfg, &f->t.svc);
    ck_assert_msg(err == 0, "%s: cr_server_create: %s", describe(f->v, name, sizeof(name)),
                  strerror(-err));
    ck_assert_int_eq(cr_server_listeners(f->s), 1);
    ck_assert_int_eq(cr_server_address(f->s, 0, addr, sizeof(addr)), 0);
    colon = strrchr(addr, ':');
    ck_assert_ptr_nonnull(colon);
    f->port = (uint16_t)atoi(colon + 1);
    ck_assert_int_ne(f->port, 0);
    ck_assert_int_eq(cr_server_start(f->s), 0);
}

static void fx_start(struct fixture *f, int i, bool echo)
{
    fx_start_cfg(f, i, echo, (struct cr_server_config){0});
}

/* Stops (gracefully), waits, destroys, and checks the service's books. */
static void fx_finish(struct fixture *f)
{
    if (!f->stopped) {
        cr_server_stop(f->s, true);
        ck_assert_int_eq(cr_server_wait(f->s), 0);
    }
    cr_server_destroy(f->s);
    f->s = NULL;
    ck_assert_uint_eq(cr_test_svc_get(&f->t.n->overlaps), 0);
    ck_assert_uint_eq(cr_test_svc_get(&f->t.n->opened), cr_test_svc_get(&f->t.n->closed));
    ck_assert_uint_eq(cr_test_svc_outstanding(&f->t), 0);
    cr_test_svc_fini(&f->t);
}

static void open_client(struct fixture *f, struct cr_test_client *cl)
{
    int err = cr_test_client_open(cl, f->port);

    ck_assert_msg(err == 0, "connect: %s", strerror(-err));
}

/* Sends one request and checks the reply line. */
static void expect_reply(struct cr_test_client *cl, const char *req, const char *want)
{
    char line[256];
    ssize_t n = cr_test_client_request(cl, req, line, sizeof(line), cr_test_tmo(3000));

    ck_assert_msg(n >= 0, "%s: %s", req, strerror((int)-n));
    ck_assert_str_eq(line, want);
}

static void expect_line(struct cr_test_client *cl, const char *want)
{
    char line[256];
    ssize_t n = cr_test_client_line(cl, line, sizeof(line), cr_test_tmo(3000));

    ck_assert_msg(n >= 0, "waiting for \"%s\": %s", want, strerror((int)-n));
    ck_assert_str_eq(line, want);
}

/* Reads n bytes that must all be ch, then "\n". */
static void expect_body(struct cr_test_client *cl, size_t n, char ch)
{
    char buf[4096];

    while (n > 0) {
        size_t take = n < sizeof(buf) ? n : sizeof(buf);
        int err = cr_test_client_read(cl, buf, take, cr_test_tmo(3000));

        ck_assert_msg(err == 0, "body: %s", strerror(-err));
        for (size_t i = 0; i < take; i++)
            ck_assert_int_eq(buf[i], ch);
        n -= take;
    }
    ck_assert_int_eq(cr_test_client_read(cl, buf, 1, cr_test_tmo(3000)), 0);
    ck_assert_int_eq(buf[0], '\n');
}

static void expect_eof(struct cr_test_client *cl, int timeout_ms)
{
    int err = cr_test_client_eof(cl, timeout_ms);

    ck_assert_msg(err == 0, "expected the server to close: %s", strerror(-err));
}

/* True when nothing is readable on fd within ms. */
static bool is_quiet(int fd, int ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};

    return poll(&pfd, 1, ms) == 0;
}

static bool wait_counter(const uint64_t *counter, uint64_t at_least, int timeout_ms)
{
    uint64_t deadline = cr_test_now_ms() + (uint64_t)timeout_ms;

    while (cr_test_svc_get(counter) < at_least) {
        if (cr_test_now_ms() >= deadline)
            return false;
        usleep(1000);
    }
    return true;
}

/* ------------------------------------------------------------------ concurrency */

#define CLIENTS  32
#define REQUESTS 50

struct client_job {
    uint16_t port;
    int idx;
    int rounds;
    int failures;
    char error[400];
};

static void *run_echo_client(void *arg)
{
    struct client_job *job = arg;
    struct cr_test_client cl;
    char req[256];
    char want[256];
    char got[256];

    if (cr_test_client_open(&cl, job->port) < 0) {
        job->failures++;
        snprintf(job->error, sizeof(job->error), "client %d: connect failed", job->idx);
        return NULL;
    }
    for (int j = 0; j < REQUESTS; j++) {
        /* Lengths vary so replies straddle reads differently. */
        int pad = (job->idx * 7 + j * 13) % 120;
        ssize_t n;

        snprintf(req, sizeof(req), "c%d-%d ECHO %d:%d:%.*s", job->idx, j, job->idx, j, pad,
                 "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz"
                 "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz");
        snprintf(want, sizeof(want), "c%d-%d OK %s", job->idx, j, strstr(req, "ECHO ") + 5);
        n = cr_test_client_request(&cl, req, got, sizeof(got), cr_test_tmo(5000));
        if (n < 0 || strcmp(got, want) != 0) {
            job->failures++;
            snprintf(job->error, sizeof(job->error), "client %d request %d: %s", job->idx, j,
                     n < 0 ? strerror((int)-n) : got);
            break;
        }
    }
    cr_test_client_close(&cl);
    return NULL;
}

START_TEST(serves_many_concurrent_clients)
{
    struct fixture f;
    pthread_t th[CLIENTS];
    struct client_job jobs[CLIENTS];

    fx_start(&f, _i, false);
    for (int i = 0; i < CLIENTS; i++) {
        jobs[i] = (struct client_job){.port = f.port, .idx = i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, run_echo_client, &jobs[i]), 0);
    }
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < CLIENTS; i++)
        ck_assert_msg(jobs[i].failures == 0, "%s", jobs[i].error);
    ck_assert_uint_eq(cr_test_svc_get(&f.t.n->requests), CLIENTS * REQUESTS);
    fx_finish(&f);
}
END_TEST

/* ------------------------------------------------------------------ pipelining */

START_TEST(answers_pipelined_requests_in_order)
{
    struct fixture f;
    struct cr_test_client cl;
    char *batch = malloc(100 * 64);
    size_t len = 0;
    char want[64];

    ck_assert_ptr_nonnull(batch);
    fx_start(&f, _i, false);
    open_client(&f, &cl);
    for (int i = 0; i < 100; i++) {
        if (i == 40)
            len += (size_t)sprintf(batch + len, "p%d BIG 300000\n", i);
        else if (i == 70)
            len += (size_t)sprintf(batch + len, "p%d FILE 200000\n", i);
        else
            len += (size_t)sprintf(batch + len, "p%d ECHO %d\n", i, i * i);
    }
    ck_assert_int_eq(cr_test_write_all(cl.fd, batch, len), 0);
    for (int i = 0; i < 100; i++) {
        if (i == 40) {
            snprintf(want, sizeof(want), "p%d OK 300000", i);
            expect_line(&cl, want);
            expect_body(&cl, 300000, 'x');
        } else if (i == 70) {
            snprintf(want, sizeof(want), "p%d OK 200000", i);
            expect_line(&cl, want);
            expect_body(&cl, 200000, 'y');
        } else {
            snprintf(want, sizeof(want), "p%d OK %d", i, i * i);
            expect_line(&cl, want);
        }
    }
    ck_assert_uint_eq(cr_test_svc_get(&f.t.n->requests), 100);
    cr_test_client_close(&cl);
    free(batch);
    fx_finish(&f);
}
END_TEST

START_TEST(answers_half_closed_client_then_closes)
{
    struct fixture f;
    struct cr_test_client cl;

    fx_start(&f, _i, false);
    open_client(&f, &cl);
    ck_assert_int_eq(
        cr_test_client_send(&cl, "h1 ECHO a\nh2 BIG 400000\nh3 FILE 5000\nh4 ECHO z\nh5 ECHO "), 0);
    ck_assert_int_eq(shutdown(cl.fd, SHUT_WR), 0);
    expect_line(&cl, "h1 OK a");
    expect_line(&cl, "h2 OK 400000");
    expect_body(&cl, 400000, 'x');
    expect_line(&cl, "h3 OK 5000");
    expect_body(&cl, 5000, 'y');
    expect_line(&cl, "h4 OK z");
    /* "h5 ECHO " never ended: nothing for it, and the server closes. */
    expect_eof(&cl, cr_test_tmo(3000));
    cr_test_client_close(&cl);
    fx_finish(&f);
}
END_TEST

/* ------------------------------------------------------------------ misbehaving clients */

START_TEST(survives_clients_vanishing_mid_request)
{
    struct fixture f;
    struct cr_test_client a;
    struct cr_test_client b;
    struct cr_test_client c;
    struct cr_test_client d;
    struct linger lg = {.l_onoff = 1, .l_linger = 0};

    fx_start(&f, _i, false);
    /* Half a line, then a clean close. */
    open_client(&f, &a);
    ck_assert_int_eq(cr_test_client_send(&a, "v1 ECHO hal"), 0);
    cr_test_client_close(&a);
    /* Half a line, then a reset. */
    open_client(&f, &b);
    ck_assert_int_eq(cr_test_client_send(&b, "v2 ECHO hal"), 0);
    ck_assert_int_eq(setsockopt(b.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    cr_test_client_close(&b);
    /* Gone while a big answer is queued: its segments must be released. */
    open_client(&f, &c);
    expect_reply(&c, "v3 BIG 8000000", "v3 OK 8000000");
    ck_assert_int_eq(cr_test_client_read(&c, NULL, 1000, cr_test_tmo(3000)), 0);
    ck_assert_int_eq(setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    cr_test_client_close(&c);
    /* The server is unaffected. */
    open_client(&f, &d);
    for (int i = 0; i < 10; i++)
        expect_reply(&d, "v4 ECHO fine", "v4 OK fine");
    cr_test_client_close(&d);
    /* Every connection is closed by the server in its own time. */
    ck_assert(wait_counter(&f.t.n->closed, 4, cr_test_tmo(3000)));
    fx_finish(&f);
}
END_TEST

START_TEST(keeps_serving_while_a_client_reads_slowly)
{
    struct fixture f;
    struct cr_test_client slow;
    struct cr_test_client other;
    char ch;

    fx_start(&f, _i, false);
    open_client(&f, &slow);
    open_client(&f, &other);
    expect_reply(&slow, "s1 BIG 16000000", "s1 OK 16000000");
    for (int i = 0; i < 40; i++) {
        ck_assert_int_eq(cr_test_client_read(&slow, &ch, 1, cr_test_tmo(3000)), 0);
        ck_assert_int_eq(ch, 'x');
        expect_reply(&other, "s2 ECHO busy", "s2 OK busy");
        usleep(3000);
    }
    /* The slow reader's answer waits in the socket, not in our memory: the
     * service refills from drained(), the driver holds no more. */
    ck_assert_uint_le(cr_test_svc_get(&f.t.n->max_pending), 512 * 1024);
    cr_test_client_close(&slow);
    cr_test_client_close(&other);
    fx_finish(&f);
}
END_TEST

START_TEST(answers_protocol_errors)
{
    struct fixture f;
    struct cr_test_client cl;
    struct cr_test_client lng;
    char *big = malloc(CR_TEST_LINE_MAX + 4096);

    ck_assert_ptr_nonnull(big);
    fx_start(&f, _i, false);
    open_client(&f, &cl);
    expect_reply(&cl, "e1 FROB x", "e1 ERR unknown op");
    expect_reply(&cl, " ECHO x", "- ERR malformed");
    expect_reply(&cl, "e2", "e2 ERR malformed");
    expect_reply(&cl, "e3 SLEEP soon", "e3 ERR bad argument");
    expect_reply(&cl, "e4 ECHO still here", "e4 OK still here");
    expect_reply(&cl, "e5 CLOSE", "e5 BYE");
    expect_eof(&cl, cr_test_tmo(3000));
    cr_test_client_close(&cl);

    open_client(&f, &lng);
    memset(big, 'a', CR_TEST_LINE_MAX + 4096);
    ck_assert_int_eq(cr_test_write_all(lng.fd, big, CR_TEST_LINE_MAX + 4096), 0);
    expect_line(&lng, "- ERR too long");
    expect_eof(&lng, cr_test_tmo(3000));
    cr_test_client_close(&lng);
    free(big);
    fx_finish(&f);
}
END_TEST

/* ------------------------------------------------------------------ blocking and time */

/*
 * The handle set (lf group) that accepted a connection just answered, from
 * what cr_server_stats' group_accepted gained since *before (taken before it
 * connected; nothing else connects meanwhile); 0 for a model without sets.
 */
static unsigned accepting_set(struct fixture *f, const struct cr_server_stats *before)
{
    struct cr_server_stats st;

    cr_server_stats(f->s, &st, NULL, 0);
    ck_assert_uint_eq(st.groups, before->groups);
    for (unsigned g = 0; g < st.groups && g < 64; g++) {
        if (st.group_accepted[g] > before->group_accepted[g])
            return g;
    }
    ck_assert_msg(st.groups == 0, "no handle set counts the connection");
    return 0;
}

#define MAX_SETS       4  /* handle sets a variant may name */
#define MAX_PAIR_TRIES 32 /* clients opened to find two in each set */

/*
 * Opens clients, each answered once, until every handle set accepted two
 * (pair[set][0] and [1]; a model without sets counts as one), closing the
 * ones a set has no use for; returns the number of sets. 32 clients over two
 * sets leave one with fewer than two at odds of 33 in 2^31.
 */
static unsigned open_pairs(struct fixture *f, struct cr_test_client pair[MAX_SETS][2])
{
    struct cr_server_stats st;
    unsigned have[MAX_SETS] = {0};
    unsigned nsets;
    unsigned done = 0;

    cr_server_stats(f->s, &st, NULL, 0);
    nsets = st.groups > 0 ? st.groups : 1;
    ck_assert_uint_le(nsets, MAX_SETS);
    for (int i = 0; done < nsets; i++) {
        struct cr_test_client cl;
        unsigned set;

        ck_assert_msg(i < MAX_PAIR_TRIES, "%d clients, and a handle set accepted fewer than two",
                      MAX_PAIR_TRIES);
        cr_server_stats(f->s, &st, NULL, 0);
        open_client(f, &cl);
        expect_reply(&cl, "b0 ECHO warm", "b0 OK warm");
        set = accepting_set(f, &st);
        if (have[set] == 2) {
            cr_test_client_close(&cl);
            continue;
        }
        pair[set][have[set]++] = cl;
        if (have[set] == 2)
            done++;
    }
    return nsets;
}

/*
 * Waits until each of the n fds is readable (reads nothing), setting at[i]
 * to when it was first seen so (cr_test_now_ms, to the loop's turn); false
 * if one is not within timeout_ms.
 */
static bool wait_readable(const int *fds, uint64_t *at, unsigned n, int timeout_ms)
{
    uint64_t deadline = cr_test_now_ms() + (uint64_t)timeout_ms;
    unsigned left = n;

    for (unsigned i = 0; i < n; i++)
        at[i] = 0;
    while (left > 0) {
        struct pollfd pfd[2 * MAX_SETS];
        unsigned idx[2 * MAX_SETS];
        unsigned k = 0;
        uint64_t now = cr_test_now_ms();

        if (now >= deadline)
            return false;
        for (unsigned i = 0; i < n && k < 2 * MAX_SETS; i++) {
            if (at[i] == 0) {
                pfd[k] = (struct pollfd){.fd = fds[i], .events = POLLIN};
                idx[k++] = i;
            }
        }
        if (poll(pfd, k, (int)(deadline - now)) < 0)
            return false;
        now = cr_test_now_ms();
        for (unsigned j = 0; j < k; j++) {
            if (pfd[j].revents != 0) {
                at[idx[j]] = now;
                left--;
            }
        }
    }
    return true;
}

#define BLOCK_MS 800 /* the sleepers' handler time */

/*
 * A sleeper in every handle set at once. A model with threads to spare
 * answers each set's other connection meanwhile, by the followers of its
 * own set (or, with multiple_leaders, the shared ones). A model whose
 * connections share one thread cannot (reactor; the proactor's single
 * dispatcher, and ring-per-thread when both connections are on one ring):
 * what it promises instead is that the stall lasts no longer than the
 * handler, so the other connection is answered as soon as its sleeper is,
 * within a margin that grows with how long the sleep was seen to take.
 */
START_TEST(blocking_handler_does_not_stall_other_clients)
{
    struct fixture f;
    struct cr_test_client pair[MAX_SETS][2];
    char name[128];
    char req[32];
    unsigned nsets;
    uint64_t started;
    uint64_t t0;
    uint64_t took;

    fx_start(&f, _i, false);
    nsets = open_pairs(&f, pair);
    started = cr_test_svc_get(&f.t.n->started);
    snprintf(req, sizeof(req), "b1 SLEEP %d\n", BLOCK_MS);
    for (unsigned g = 0; g < nsets; g++)
        ck_assert_int_eq(cr_test_client_send(&pair[g][0], req), 0);
    ck_assert(wait_counter(&f.t.n->started, started + nsets, cr_test_tmo(3000)));
    t0 = cr_test_now_ms();
    if (is_threaded(&f)) {
        for (unsigned g = 0; g < nsets; g++)
            expect_reply(&pair[g][1], "b2 ECHO meanwhile", "b2 OK meanwhile");
        took = cr_test_now_ms() - t0;
        /* Answered while the sleepers still sleep. */
        ck_assert_msg(took < 600, "%s: the other clients waited %llu ms",
                      describe(f.v, name, sizeof(name)), (unsigned long long)took);
        for (unsigned g = 0; g < nsets; g++)
            ck_assert(is_quiet(pair[g][0].fd, 0));
    } else {
        int fds[2 * MAX_SETS];
        uint64_t at[2 * MAX_SETS];

        for (unsigned g = 0; g < nsets; g++) {
            ck_assert_int_eq(cr_test_client_send(&pair[g][1], "b2 ECHO meanwhile\n"), 0);
            fds[g] = pair[g][0].fd;
            fds[nsets + g] = pair[g][1].fd;
        }
        ck_assert(wait_readable(fds, at, 2 * nsets, cr_test_tmo(3000) + BLOCK_MS));
        for (unsigned g = 0; g < nsets; g++) {
            uint64_t slept = at[g] - t0;
            uint64_t margin =
                slept / 2 > (uint64_t)cr_test_tmo(200) ? slept / 2 : (uint64_t)cr_test_tmo(200);

            ck_assert_msg(at[nsets + g] <= at[g] + margin,
                          "%s: set %u: answered %llu ms after its sleeper, which was seen "
                          "to sleep %llu ms",
                          describe(f.v, name, sizeof(name)), g,
                          (unsigned long long)(at[nsets + g] - at[g]), (unsigned long long)slept);
            expect_line(&pair[g][1], "b2 OK meanwhile");
        }
    }
    for (unsigned g = 0; g < nsets; g++) {
        expect_line(&pair[g][0], "b1 OK");
        cr_test_client_close(&pair[g][0]);
        cr_test_client_close(&pair[g][1]);
    }
    fx_finish(&f);
}
END_TEST

#define STEADY_TRIES 3

/*
 * Activity restarts the idle timeout: a client sending a request every
 * 40 ms under a timeout_ms (300 ms) timeout stays open, on *steady. Each gap
 * is measured from one request's sending to the next's: the server's idle
 * time at a request is at most that gap. A busy machine may stall this
 * thread for longer than half the timeout between two requests; a close is
 * then explained by the gap measured, and the round runs again on a new
 * connection, STEADY_TRIES times at most. A close after gaps all shorter
 * fails. Returns the rounds run again (connections the server closed).
 */
static int keep_open_by_activity(struct fixture *f, struct cr_test_client *steady, int timeout_ms)
{
    char line[256];

    for (int round = 0;; round++) {
        uint64_t last;
        uint64_t max_gap = 0;
        ssize_t n = 0;
        int i;

        open_client(f, steady);
        last = cr_test_now_ms();
        for (i = 0; i < 10; i++) {
            uint64_t now;

            usleep(40 * 1000);
            now = cr_test_now_ms();
            if (now - last > max_gap)
                max_gap = now - last;
            last = now;
            n = cr_test_client_request(steady, "i4 ECHO alive", line, sizeof(line),
                                       cr_test_tmo(3000));
            if (n < 0 || strcmp(line, "i4 OK alive") != 0)
                break;
        }
        if (i == 10)
            return round;
        ck_assert_msg(max_gap >= (uint64_t)timeout_ms / 2 && round + 1 < STEADY_TRIES,
                      "i4 ECHO alive (round %d, request %d): %s, after gaps of at most %llu ms "
                      "under a %d ms idle timeout",
                      round, i, n < 0 ? strerror((int)-n) : line, (unsigned long long)max_gap,
                      timeout_ms);
        fprintf(stderr, "i4: closed after a %llu ms gap (a stalled test thread); again\n",
                (unsigned long long)max_gap);
        cr_test_client_close(steady);
    }
}

START_TEST(closes_idle_and_stuck_connections_after_timeouts)
{
    struct fixture f;
    struct cr_test_client idle;
    struct cr_test_client partial;
    struct cr_test_client busy;
    struct cr_test_client steady;
    struct cr_test_client late;
    struct cr_test_client stuck;
    uint64_t t0;
    uint64_t took;
    int retries;

    fx_start_cfg(&f, _i, false,
                 (struct cr_server_config){.idle_timeout_ms = 300, .send_timeout_ms = 300});
    open_client(&f, &idle);
    open_client(&f, &partial);
    open_client(&f, &busy);
    expect_reply(&idle, "i1 ECHO x", "i1 OK x");
    ck_assert_int_eq(cr_test_client_send(&partial, "i2 ECHO never ends"), 0);
    /* A handler running longer than the idle timeout is not cut off. */
    expect_reply(&busy, "i3 SLEEP 450", "i3 OK");
    retries = keep_open_by_activity(&f, &steady, 300);
    expect_eof(&idle, cr_test_tmo(3000));
    expect_eof(&partial, cr_test_tmo(3000));
    expect_eof(&busy, cr_test_tmo(3000));
    expect_eof(&steady, cr_test_tmo(3000));
    /* Closed when the timeout is up, not before: the server's idle time
     * starts after it read the request, so at least 300 ms after the
     * reading taken before sending it (less a little for the timer). */
    open_client(&f, &late);
    t0 = cr_test_now_ms();
    expect_reply(&late, "i5 ECHO last", "i5 OK last");
    expect_eof(&late, cr_test_tmo(3000));
    took = cr_test_now_ms() - t0;
    ck_assert_msg(took >= 290, "closed %llu ms after the request was sent",
                  (unsigned long long)took);
    /* A reader that stops reading is dropped once sending stalls for the
     * send timeout. */
    open_client(&f, &stuck);
    expect_reply(&stuck, "i6 BIG 16000000", "i6 OK 16000000");
    ck_assert(wait_counter(&f.t.n->closed, 6 + (uint64_t)retries, cr_test_tmo(3000)));
    cr_test_client_close(&idle);
    cr_test_client_close(&partial);
    cr_test_client_close(&busy);
    cr_test_client_close(&steady);
    cr_test_client_close(&late);
    cr_test_client_close(&stuck);
    fx_finish(&f);
}
END_TEST

START_TEST(honours_max_connections)
{
    struct fixture f;
    struct cr_test_client first[4];
    struct cr_test_client extra[2];
    struct cr_server_stats st;

    struct cr_server_config cfg = {.max_connections = 4};

    /* The process models cap processes: forking a child per connection
     * (max_workers), prefork a pool of max_workers x threads; both give four
     * connections at once here, as max_connections does the others. */
    if (is_prefork(&variants[_i])) {
        cfg.workers = 2;
        cfg.threads = 2;
        cfg.max_workers = 2;
        cfg.min_spare = 1;
    } else if (is_process_model(&variants[_i])) {
        cfg.max_workers = 4;
    }
    fx_start_cfg(&f, _i, false, cfg);
    for (int i = 0; i < 4; i++) {
        open_client(&f, &first[i]);
        expect_reply(&first[i], "m1 ECHO in", "m1 OK in");
    }
    /* Beyond the limit: connected by the kernel, not served. */
    for (int i = 0; i < 2; i++) {
        open_client(&f, &extra[i]);
        ck_assert_int_eq(cr_test_client_send(&extra[i], "m2 ECHO waiting\n"), 0);
    }
    ck_assert(is_quiet(extra[0].fd, 300));
    ck_assert(is_quiet(extra[1].fd, 0));
    cr_server_stats(f.s, &st, NULL, 0);
    ck_assert_uint_le(st.open_connections, 4);
    cr_test_client_close(&first[0]);
    cr_test_client_close(&first[1]);
    expect_line(&extra[0], "m2 OK waiting");
    expect_line(&extra[1], "m2 OK waiting");
    for (int i = 2; i < 4; i++)
        cr_test_client_close(&first[i]);
    cr_test_client_close(&extra[0]);
    cr_test_client_close(&extra[1]);
    fx_finish(&f);
}
END_TEST

START_TEST(graceful_stop_finishes_request_in_flight)
{
    struct fixture f;
    struct cr_test_client working;
    struct cr_test_client idle;
    uint64_t t0;

    fx_start(&f, _i, false);
    open_client(&f, &working);
    open_client(&f, &idle);
    expect_reply(&idle, "g0 ECHO idle", "g0 OK idle");
    ck_assert_int_eq(cr_test_client_send(&working, "g1 SLEEP 300\n"), 0);
    ck_assert(wait_counter(&f.t.n->started, 2, cr_test_tmo(3000)));
    t0 = cr_test_now_ms();
    cr_server_stop(f.s, true);
    expect_line(&working, "g1 OK");
    expect_eof(&working, cr_test_tmo(3000));
    expect_eof(&idle, cr_test_tmo(3000));
    ck_assert_int_eq(cr_server_wait(f.s), 0);
    f.stopped = true;
    /* Well within the grace period: nothing was left to wait for. */
    ck_assert_uint_lt(cr_test_now_ms() - t0, (uint64_t)cr_test_tmo(3000));
    cr_test_client_close(&working);
    cr_test_client_close(&idle);
    fx_finish(&f);
}
END_TEST

START_TEST(immediate_stop_closes_everything)
{
    struct fixture f;
    struct cr_test_client cl[3];

    fx_start(&f, _i, false);
    for (int i = 0; i < 3; i++) {
        open_client(&f, &cl[i]);
        expect_reply(&cl[i], "q1 ECHO x", "q1 OK x");
    }
    /* One with a big answer half sent, one with half a request. */
    expect_reply(&cl[1], "q2 BIG 8000000", "q2 OK 8000000");
    ck_assert_int_eq(cr_test_client_send(&cl[2], "q3 ECHO hal"), 0);
    cr_server_stop(f.s, false);
    ck_assert_int_eq(cr_server_wait(f.s), 0);
    f.stopped = true;
    cr_server_destroy(f.s);
    f.s = NULL;
    expect_eof(&cl[0], cr_test_tmo(3000));
    expect_eof(&cl[2], cr_test_tmo(3000));
    for (int i = 0; i < 3; i++)
        cr_test_client_close(&cl[i]);
    ck_assert_uint_eq(cr_test_svc_get(&f.t.n->overlaps), 0);
    ck_assert_uint_eq(cr_test_svc_get(&f.t.n->opened), cr_test_svc_get(&f.t.n->closed));
    ck_assert_uint_eq(cr_test_svc_outstanding(&f.t), 0);
    cr_test_svc_fini(&f.t);
}
END_TEST

/* ------------------------------------------------------------------ echo, stats */

struct echo_job {
    uint16_t port;
    size_t size;
    unsigned seed;
    int failures;
    char error[160];
};

/* Sends size pseudo-random bytes while reading the echo back. */
static void *run_echo_roundtrip(void *arg)
{
    struct echo_job *job = arg;
    int fd = cr_test_connect(job->port);
    char *out = malloc(job->size);
    char *in = malloc(job->size);
    size_t sent = 0;
    size_t got = 0;
    uint64_t deadline = cr_test_now_ms() + (uint64_t)cr_test_tmo(5000);
    unsigned x = job->seed;

    if (fd < 0 || out == NULL || in == NULL || cr_test_set_nonblock(fd, true) < 0) {
        job->failures++;
        snprintf(job->error, sizeof(job->error), "set-up failed");
        goto out;
    }
    for (size_t i = 0; i < job->size; i++) {
        x = x * 1103515245u + 12345u;
        out[i] = (char)(x >> 16);
    }
    while (got < job->size) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN | (sent < job->size ? POLLOUT : 0)};
        ssize_t n;

        if (cr_test_now_ms() >= deadline) {
            job->failures++;
            snprintf(job->error, sizeof(job->error), "timed out: sent %zu, got %zu", sent, got);
            goto out;
        }
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        if ((pfd.revents & POLLOUT) && sent < job->size) {
            size_t chunk = job->size - sent < 7000 ? job->size - sent : 7000;

            n = send(fd, out + sent, chunk, MSG_NOSIGNAL);
            if (n > 0)
                sent += (size_t)n;
        }
        if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
            n = recv(fd, in + got, job->size - got, 0);
            if (n == 0 || (n < 0 && errno != EAGAIN)) {
                job->failures++;
                snprintf(job->error, sizeof(job->error), "closed after %zu bytes", got);
                goto out;
            }
            if (n > 0)
                got += (size_t)n;
        }
    }
    if (memcmp(in, out, job->size) != 0) {
        job->failures++;
        snprintf(job->error, sizeof(job->error), "echo differs");
    }
out:
    if (fd >= 0)
        close(fd);
    free(out);
    free(in);
    return NULL;
}

START_TEST(echo_service_echoes_every_byte)
{
    struct fixture f;
    pthread_t th[4];
    struct echo_job jobs[4];

    fx_start(&f, _i, true);
    for (int i = 0; i < 4; i++) {
        jobs[i] = (struct echo_job){.port = f.port, .size = 512 * 1024, .seed = (unsigned)i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, run_echo_roundtrip, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(jobs[i].failures == 0, "%s", jobs[i].error);
    ck_assert_uint_eq(cr_test_svc_get(&f.t.n->bytes), 4 * 512 * 1024);
    fx_finish(&f);
}
END_TEST

static uint64_t open_connections(struct cr_server *s)
{
    struct cr_server_stats st;

    cr_server_stats(s, &st, NULL, 0);
    return st.open_connections;
}

/*
 * Process models: the worker processes are in the scoreboard, and the ones
 * serving the open connections counted their requests in their slots
 * (nothing retired a worker, so the slots in use hold every request).
 */
static void check_scoreboard(struct fixture *f, uint64_t requests)
{
    struct cr_scoreboard_entry e[64];
    struct cr_server_stats st;
    uint64_t deadline = cr_test_now_ms() + (uint64_t)cr_test_tmo(3000);
    uint64_t sum;
    unsigned n;

    do {
        n = cr_server_scoreboard(f->s, e, 64);
        sum = 0;
        for (unsigned i = 0; i < n && i < 64; i++)
            sum += e[i].requests;
    } while (sum < requests && cr_test_now_ms() < deadline);
    ck_assert_uint_ge(n, 1);
    ck_assert_uint_le(n, 64);
    for (unsigned i = 0; i < n; i++) {
        ck_assert_int_gt(e[i].pid, 0);
        ck_assert_int_ne(e[i].pid, getpid());
        ck_assert_str_ne(cr_worker_state_name(e[i].state), "unknown");
        ck_assert_int_ne(e[i].state, CR_WORKER_FREE);
    }
    ck_assert_msg(sum == requests, "%s: the scoreboard counts %llu requests, want %llu",
                  f->v->model, (unsigned long long)sum, (unsigned long long)requests);
    cr_server_stats(f->s, &st, NULL, 0);
    ck_assert_uint_ge(st.processes, 1);
}

/*
 * The handle sets cr_server_stats reports: as many as an lf variant names,
 * and together they accepted every connection (a model without sets
 * reports none).
 */
static void check_sets(const struct fixture *f, const struct cr_server_stats *st)
{
    uint64_t sum = 0;

    if (f->v->groups != 0)
        ck_assert_uint_eq(st->groups, (unsigned)f->v->groups);
    ck_assert_uint_le(st->groups, 64);
    if (st->groups == 0)
        return;
    for (unsigned g = 0; g < st->groups; g++)
        sum += st->group_accepted[g];
    ck_assert_uint_eq(sum, st->accepted);
}

START_TEST(stats_count_connections_and_bytes)
{
    struct fixture f;
    struct cr_test_client cl[3];
    struct cr_server_stats st;
    struct cr_worker_stats w[64];
    unsigned n;
    uint64_t deadline;

    fx_start(&f, _i, false);
    for (int i = 0; i < 3; i++) {
        open_client(&f, &cl[i]);
        expect_reply(&cl[i], "t1 ECHO counted", "t1 OK counted");
    }
    /* The driver adds its bytes after it answered, in and then out, and the
     * counters are read one by one: wait until both are complete. */
    deadline = cr_test_now_ms() + (uint64_t)cr_test_tmo(3000);
    do {
        n = cr_server_stats(f.s, &st, w, 64);
    } while ((st.bytes_in < 3 * strlen("t1 ECHO counted\n") ||
              st.bytes_out < 3 * strlen("t1 OK counted\n") || st.requests < 3) &&
             cr_test_now_ms() < deadline);
    ck_assert_str_eq(st.model, f.v->model);
    if (f.v->promotion != NULL)
        ck_assert_str_eq(st.promotion, f.v->promotion);
    ck_assert_uint_ge(n, 1);
    ck_assert_uint_eq(st.workers, n);
    ck_assert_uint_eq(st.accepted, 3);
    check_sets(&f, &st);
    ck_assert_uint_eq(st.open_connections, 3);
    ck_assert_uint_ge(st.bytes_in, 3 * strlen("t1 ECHO counted\n"));
    ck_assert_uint_ge(st.bytes_out, 3 * strlen("t1 OK counted\n"));
    ck_assert_uint_gt(st.uptime_ns, 0);
    /* The line service calls cr_conn_request_done once per answered line. */
    ck_assert_uint_eq(st.requests, 3);
    if (is_process_model(f.v))
        check_scoreboard(&f, 3);
    else
        ck_assert_uint_eq(cr_server_scoreboard(f.s, NULL, 0), 0);
    for (unsigned i = 0; i < n && i < 64; i++)
        ck_assert_str_ne(cr_role_name(w[i].role), "unknown");
    ck_assert_str_eq(cr_role_name(CR_ROLE_LEADER), "leader");
    for (int i = 0; i < 3; i++)
        cr_test_client_close(&cl[i]);
    deadline = cr_test_now_ms() + (uint64_t)cr_test_tmo(3000);
    while (open_connections(f.s) != 0 && cr_test_now_ms() < deadline)
        usleep(1000);
    ck_assert_uint_eq(open_connections(f.s), 0);
    fx_finish(&f);
}
END_TEST

/* ------------------------------------------------------------------ handle sets */

#define SPREAD_CLIENTS 64
#define SPREAD_BATCH   THREADS /* tpc serves this many connections at once */

/*
 * Connections arriving in batches are each served, and the handle sets
 * account for all of them: with several, the kernel spreads them by
 * 4-tuple hash over the sets' SO_REUSEPORT copies, so each set accepts some
 * (all 64 on one of two sets has odds of 2^-63) and serves them.
 */
START_TEST(every_handle_set_accepts_and_serves)
{
    struct fixture f;
    struct cr_test_client cl[SPREAD_BATCH];
    struct cr_server_stats st;
    char name[128];
    char req[64];
    char want[64];

    fx_start(&f, _i, false);
    for (int i = 0; i < SPREAD_CLIENTS; i += SPREAD_BATCH) {
        for (int k = 0; k < SPREAD_BATCH; k++)
            open_client(&f, &cl[k]);
        for (int k = 0; k < SPREAD_BATCH; k++) {
            snprintf(req, sizeof(req), "a%d ECHO %d", i + k, i + k);
            snprintf(want, sizeof(want), "a%d OK %d", i + k, i + k);
            expect_reply(&cl[k], req, want);
        }
        for (int k = 0; k < SPREAD_BATCH; k++)
            cr_test_client_close(&cl[k]);
    }
    ck_assert_uint_eq(cr_test_svc_get(&f.t.n->requests), SPREAD_CLIENTS);
    cr_server_stats(f.s, &st, NULL, 0);
    ck_assert_uint_eq(st.accepted, SPREAD_CLIENTS);
    check_sets(&f, &st);
    for (unsigned g = 0; g < st.groups && st.groups > 1; g++)
        ck_assert_msg(st.group_accepted[g] > 0, "%s: handle set %u of %u accepted none",
                      describe(f.v, name, sizeof(name)), g, st.groups);
    fx_finish(&f);
}
END_TEST

/* ------------------------------------------------------------------ stress */

#define STRESS_CLIENTS 12
#define STRESS_ROUNDS  8
#define STRESS_BATCH   16

static void *run_stress_client(void *arg)
{
    struct client_job *job = arg;
    struct cr_test_client cl;
    char batch[STRESS_BATCH * 48];
    char want[64];
    char got[256];

    if (cr_test_client_open(&cl, job->port) < 0) {
        job->failures++;
        snprintf(job->error, sizeof(job->error), "client %d: connect failed", job->idx);
        return NULL;
    }
    for (int r = 0; r < STRESS_ROUNDS && job->failures == 0; r++) {
        size_t len = 0;

        for (int k = 0; k < STRESS_BATCH; k++) {
            if (k == 5)
                len += (size_t)sprintf(batch + len, "%d.%d BIG %d\n", r, k, 70000 + job->idx);
            else if (k == 9)
                len += (size_t)sprintf(batch + len, "%d.%d FILE %d\n", r, k, 3000 + job->idx);
            else
                len += (size_t)sprintf(batch + len, "%d.%d ECHO %d\n", r, k, job->idx);
        }
        if (cr_test_write_all(cl.fd, batch, len) < 0) {
            job->failures++;
            break;
        }
        for (int k = 0; k < STRESS_BATCH; k++) {
            ssize_t n = cr_test_client_line(&cl, got, sizeof(got), cr_test_tmo(5000));
            size_t body = 0;

            if (k == 5)
                body = 70000 + (size_t)job->idx;
            else if (k == 9)
                body = 3000 + (size_t)job->idx;
            if (k == 5 || k == 9)
                snprintf(want, sizeof(want), "%d.%d OK %zu", r, k, body);
            else
                snprintf(want, sizeof(want), "%d.%d OK %d", r, k, job->idx);
            if (n < 0 || strcmp(got, want) != 0 ||
                (body > 0 && cr_test_client_read(&cl, NULL, body + 1, cr_test_tmo(5000)) < 0)) {
                job->failures++;
                snprintf(job->error, sizeof(job->error), "client %d: want \"%s\", got \"%s\"",
                         job->idx, want, n < 0 ? strerror((int)-n) : got);
                break;
            }
        }
    }
    cr_test_client_close(&cl);
    return NULL;
}

START_TEST(never_serves_a_connection_on_two_threads)
{
    struct fixture f;
    pthread_t th[STRESS_CLIENTS];
    struct client_job jobs[STRESS_CLIENTS];

    fx_start(&f, _i, false);
    for (int i = 0; i < STRESS_CLIENTS; i++) {
        jobs[i] = (struct client_job){.port = f.port, .idx = i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, run_stress_client, &jobs[i]), 0);
    }
    for (int i = 0; i < STRESS_CLIENTS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < STRESS_CLIENTS; i++)
        ck_assert_msg(jobs[i].failures == 0, "%s", jobs[i].error);
    ck_assert_uint_eq(cr_test_svc_get(&f.t.n->overlaps), 0);
    ck_assert_uint_eq(cr_test_svc_get(&f.t.n->requests),
                      STRESS_CLIENTS * STRESS_ROUNDS * STRESS_BATCH);
    fx_finish(&f);
}
END_TEST

/* ------------------------------------------------------------------ cr_server_run */

struct run_job {
    struct cr_server *s;
    int rc;
    int hups; /* atomic */
};

static void on_hup(struct cr_server *s, void *arg)
{
    struct run_job *job = arg;

    CR_UNUSED(s);
    __atomic_fetch_add(&job->hups, 1, __ATOMIC_RELAXED);
}

static void *run_server(void *arg)
{
    struct run_job *job = arg;

    job->rc = cr_server_run(job->s);
    return NULL;
}

START_TEST(run_turns_signals_into_callbacks_and_stop)
{
    struct fixture f;
    struct run_job job = {.rc = -1};
    struct cr_test_client cl;
    struct cr_test_client fresh = {.fd = -1};
    struct cr_server_config cfg = {.on_hup = on_hup, .signal_arg = &job};
    pthread_t th;
    char name[128];
    char addr[64];
    uint64_t deadline;
    int err;

    memset(&f, 0, sizeof(f));
    f.v = &variants[_i];
    ck_assert_int_eq(cr_test_line_init(&f.t), 0);
    set_defaults(f.v, &cfg);
    err = cr_server_create(&f.s, &cfg, &f.t.svc);
    ck_assert_msg(err == 0, "%s: cr_server_create: %s", describe(f.v, name, sizeof(name)),
                  strerror(-err));
    ck_assert_int_eq(cr_server_address(f.s, 0, addr, sizeof(addr)), 0);
    f.port = (uint16_t)atoi(strrchr(addr, ':') + 1);
    job.s = f.s;
    ck_assert_int_eq(pthread_create(&th, NULL, run_server, &job), 0);
    /* Served means started, and run blocks the signals before it starts. */
    deadline = cr_test_now_ms() + (uint64_t)cr_test_tmo(3000);
    while (cr_test_client_open(&cl, f.port) < 0 && cr_test_now_ms() < deadline)
        usleep(1000);
    expect_reply(&cl, "r1 ECHO up", "r1 OK up");
    /* Thread-directed, so only run's sigtimedwait can take them. */
    ck_assert_int_eq(pthread_kill(th, SIGHUP), 0);
    deadline = cr_test_now_ms() + (uint64_t)cr_test_tmo(3000);
    while (__atomic_load_n(&job.hups, __ATOMIC_RELAXED) == 0 && cr_test_now_ms() < deadline)
        usleep(1000);
    ck_assert_int_eq(__atomic_load_n(&job.hups, __ATOMIC_RELAXED), 1);
    if (is_prefork(f.v)) {
        /* HUP also restarts: a new generation of workers serves new
         * connections; an old worker finishes what is in flight, and may
         * close an idle keep-alive connection as it goes, as Apache's
         * graceful restart does, so cl is answered or closed. */
        char line[64];
        ssize_t n =
            cr_test_client_request(&cl, "r2 ECHO old", line, sizeof(line), cr_test_tmo(3000));

        ck_assert_msg((n >= 0 && strcmp(line, "r2 OK old") == 0) || n == -EPIPE || n == -ECONNRESET,
                      "old connection after a restart: %s", n >= 0 ? line : strerror((int)-n));
        if (n < 0)
            cr_test_client_close(&cl);
        open_client(&f, &fresh);
        expect_reply(&fresh, "r3 ECHO new generation", "r3 OK new generation");
    } else {
        expect_reply(&cl, "r2 ECHO still up", "r2 OK still up");
    }
    ck_assert_int_eq(pthread_kill(th, SIGTERM), 0);
    if (cl.fd >= 0)
        expect_eof(&cl, cr_test_tmo(3000));
    if (fresh.fd >= 0)
        expect_eof(&fresh, cr_test_tmo(3000));
    pthread_join(th, NULL);
    ck_assert_int_eq(job.rc, 0);
    f.stopped = true;
    cr_test_client_close(&cl);
    cr_test_client_close(&fresh);
    fx_finish(&f);
}
END_TEST

/* ------------------------------------------------------------------ suite */

static void add_variant(struct variant v)
{
    if (nvariants >= MAX_VARIANTS) {
        fprintf(stderr, "test_models: more than %d variants\n", MAX_VARIANTS);
        abort();
    }
    variants[nvariants++] = v;
}

/*
 * lf: every promotion order, deferred promotion (cabrank-httpd's, with a
 * delay short against the tests' waits) with and without a busy poll, all
 * over one handle set; then two sets (each with its own SO_REUSEPORT copy
 * of the listener and THREADS / 2 followers) under deferred promotion, under
 * lifo-lockfree (an idle word per set), and with one follower set leading
 * both (multiple_leaders); then one set over each other backend. Groups are
 * always named, as cr_server's default for 0 is not this suite's concern.
 */
static void add_lf_variants(const char *model)
{
    for (const char *const *p = cr_lf_pool_promotions(); *p != NULL; p++)
        add_variant((struct variant){.model = model, .promotion = *p, .groups = 1});
    add_variant(
        (struct variant){.model = model, .promotion = "lifo", .delay_us = 1000, .groups = 1});
    add_variant((struct variant){
        .model = model, .promotion = "lifo", .delay_us = 1000, .busy_poll_us = 200, .groups = 1});
    add_variant(
        (struct variant){.model = model, .promotion = "lifo", .delay_us = 1000, .groups = 2});
    add_variant((struct variant){.model = model, .promotion = "lifo-lockfree", .groups = 2});
    add_variant((struct variant){
        .model = model, .promotion = "lifo", .groups = 2, .multiple_leaders = true});
    for (const char *const *b = cr_handle_set_backends() + 1; *b != NULL; b++)
        add_variant(
            (struct variant){.model = model, .promotion = "lifo", .groups = 1, .backend = *b});
}

/* Whether the handle set backend exists here. */
static bool has_backend(const char *name)
{
    for (const char *const *b = cr_handle_set_backends(); *b != NULL; b++) {
        if (strcmp(*b, name) == 0)
            return true;
    }
    return false;
}

/* proactor: every dispatcher over every engine. io_uring may be refused
 * here (no kernel support, a seccomp filter): its variants are then
 * reported as skipped (cr_test_skip), never left out silently; the emulated
 * engine must always work. */
static void add_proactor_variants(const char *model)
{
    static const char *const dispatchers[] = {"single", "lf", "ring-per-thread"};
    static const char *const engines[] = {"uring", "emulated"};

    for (size_t e = 0; e < sizeof(engines) / sizeof(engines[0]); e++) {
        struct cr_proactor_config pc = {.engine = engines[e], .threads = 1};
        struct cr_proactor *p;
        int err = cr_proactor_create(&p, &pc);

        if (err == -ENOSYS && strcmp(engines[e], "uring") == 0) {
            for (size_t d = 0; d < sizeof(dispatchers) / sizeof(dispatchers[0]); d++) {
                skipped[nskipped++] = (struct variant){
                    .model = model, .dispatch = dispatchers[d], .engine = engines[e]};
            }
            continue;
        }
        if (err < 0) {
            fprintf(stderr, "test_models: proactor engine %s: %s\n", engines[e], strerror(-err));
            abort();
        }
        cr_proactor_destroy(p);
        for (size_t d = 0; d < sizeof(dispatchers) / sizeof(dispatchers[0]); d++) {
            add_variant(
                (struct variant){.model = model, .dispatch = dispatchers[d], .engine = engines[e]});
        }
    }
}

static void add_loop(Suite *s, const char *name, const TTest *test)
{
    TCase *tc = tcase_create(name);
    char what[192];
    char v[128];
    const char *only = getenv("CK_RUN_CASE"); /* Check runs that tcase alone */

    for (int i = 0; i < nskipped && (only == NULL || strcmp(only, name) == 0); i++) {
        snprintf(what, sizeof(what), "models/%s %s", name, describe(&skipped[i], v, sizeof(v)));
        cr_test_skip(what, "io_uring is refused here");
    }

    tcase_set_timeout(tc, TEST_TIMEOUT);
    tcase_add_loop_test(tc, test, 0, nvariants);
    suite_add_tcase(s, tc);
}

Suite *models_suite(void);

Suite *models_suite(void)
{
    Suite *s = suite_create("models");

    nvariants = 0;
    nskipped = 0;
    for (const char *const *m = cr_server_models(); *m != NULL; m++) {
        if (strcmp(*m, "lf") == 0) {
            add_lf_variants(*m);
        } else if (strcmp(*m, "proactor") == 0) {
            add_proactor_variants(*m);
        } else {
            add_variant((struct variant){.model = *m});
            /* The single-threaded loop and hshr's reactor over poll too. */
            if ((strcmp(*m, "reactor") == 0 || strcmp(*m, "hshr") == 0) && has_backend("poll"))
                add_variant((struct variant){.model = *m, .backend = "poll"});
            /* hshr with two sets: a listener, a queue and THREADS / 2
             * workers each, on their own SO_REUSEPORT copies. */
            if (strcmp(*m, "hshr") == 0)
                add_variant((struct variant){.model = *m, .groups = 2});
        }
    }
    add_loop(s, "concurrent", serves_many_concurrent_clients);
    add_loop(s, "pipelined", answers_pipelined_requests_in_order);
    add_loop(s, "half_closed", answers_half_closed_client_then_closes);
    add_loop(s, "vanishing", survives_clients_vanishing_mid_request);
    add_loop(s, "slow_reader", keeps_serving_while_a_client_reads_slowly);
    add_loop(s, "errors", answers_protocol_errors);
    add_loop(s, "blocking", blocking_handler_does_not_stall_other_clients);
    add_loop(s, "timeouts", closes_idle_and_stuck_connections_after_timeouts);
    add_loop(s, "max_connections", honours_max_connections);
    add_loop(s, "graceful_stop", graceful_stop_finishes_request_in_flight);
    add_loop(s, "immediate_stop", immediate_stop_closes_everything);
    add_loop(s, "echo", echo_service_echoes_every_byte);
    add_loop(s, "stats", stats_count_connections_and_bytes);
    add_loop(s, "handle_sets", every_handle_set_accepts_and_serves);
    add_loop(s, "stress", never_serves_a_connection_on_two_threads);
    add_loop(s, "run", run_turns_signals_into_callbacks_and_stop);
    return s;
}
