/*
 * test_forking.c - the forking model (src/model/model_forking.c) under cr_server
 * with the line and echo services (tests/support/services.h) on 127.0.0.1:0:
 * concurrent clients are each served by a child process of their own (the
 * scoreboard shows one BUSY slot per open connection, with its pid,
 * connection and request counts); the cap (max_workers) holds a further
 * connection in the backlog until a child exits, and then it is served;
 * children are reaped (no zombie, no child left after the connections
 * close); a child holds only 0, 1, 2, its connection and what the process
 * had before the server (the service's own file included), not the
 * listener, the manager's reactor or other connections; a graceful stop
 * answers the request in flight; an immediate stop ends idle connections
 * at once; counters (accepted, requests through cr_conn_request_done,
 * processes, crashes for a child killed -9); process_init and process_exit
 * run once in each child, and a child reads the server's stats and
 * scoreboard (as a status page does) with the server-wide values; a child
 * whose master is killed -9 ends its idle connection and exits (no
 * orphan).
 *
 * Checks are on what the client sees, cr_server_stats and the scoreboard.
 * Waits that expect something scale with CK_TIMEOUT_MULTIPLIER; waits that
 * expect nothing do not.
 */
#include <cabrank/server.h>

#include "../support/services.h"
#include "../support/support.h"

#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define TEST_TIMEOUT 20 /* seconds, times CK_TIMEOUT_MULTIPLIER */
#define MAX_FDS      256

struct fixture {
    struct cr_test_svc t;
    struct cr_server *s;
    uint16_t port;
};

/* The service alone (its descriptors open), no server yet. */
static void fx_init(struct fixture *f, bool echo)
{
    int err;

    memset(f, 0, sizeof(*f));
    err = echo ? cr_test_echo_init(&f->t) : cr_test_line_init(&f->t);
    ck_assert_int_eq(err, 0);
}

static void fx_serve(struct fixture *f, int max_workers)
{
    struct cr_server_config cfg = {
        .model = "forking",
        .listen = {"127.0.0.1:0"},
        .max_workers = max_workers,
    };
    char addr[64];
    int err;

    err = cr_server_create(&f->s, &cfg, &f->t.svc);
    ck_assert_msg(err == 0, "cr_server_create: %s", strerror(-err));
    ck_assert_int_eq(cr_server_address(f->s, 0, addr, sizeof(addr)), 0);
    f->port = (uint16_t)atoi(strrchr(addr, ':') + 1);
    ck_assert_int_ne(f->port, 0);
    ck_assert_int_eq(cr_server_start(f->s), 0);
}

static void fx_start(struct fixture *f, bool echo, int max_workers)
{
    fx_init(f, echo);
    fx_serve(f, max_workers);
}

static void fx_finish(struct fixture *f, bool graceful)
{
    cr_server_stop(f->s, graceful);
    ck_assert_int_eq(cr_server_wait(f->s), 0);
    cr_server_destroy(f->s);
    f->s = NULL;
    cr_test_svc_fini(&f->t);
}

static void open_client(struct fixture *f, struct cr_test_client *cl)
{
    int err = cr_test_client_open(cl, f->port);

    ck_assert_msg(err == 0, "connect: %s", strerror(-err));
}

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

static struct cr_server_stats stats_of(struct fixture *f)
{
    struct cr_server_stats st;
    struct cr_worker_stats w[64];

    (void)cr_server_stats(f->s, &st, w, 64);
    return st;
}

/* Waits until the server has n child processes. */
static bool wait_processes(struct fixture *f, unsigned n, int timeout_ms)
{
    uint64_t deadline = cr_test_now_ms() + (uint64_t)timeout_ms;

    while (stats_of(f).processes != n) {
        if (cr_test_now_ms() >= deadline)
            return false;
        usleep(1000);
    }
    return true;
}

/* Waits until the scoreboard shows n slots, all with a pid; copies them. */
static bool wait_scoreboard(struct fixture *f, unsigned n, struct cr_scoreboard_entry *e,
                            int timeout_ms)
{
    uint64_t deadline = cr_test_now_ms() + (uint64_t)timeout_ms;

    for (;;) {
        unsigned got = cr_server_scoreboard(f->s, e, 64);
        bool pids = got == n;

        for (unsigned i = 0; i < got && i < 64 && pids; i++)
            pids = e[i].pid > 0;
        if (pids)
            return true;
        if (cr_test_now_ms() >= deadline)
            return false;
        usleep(1000);
    }
}

/* Children of this process, and how many of them are zombies. */
static unsigned count_children(unsigned *zombies)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    unsigned n = 0;

    *zombies = 0;
    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL) {
        char path[300];
        char buf[512];
        FILE *fp;
        char *rp;
        char state;
        int ppid;

        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        fp = fopen(path, "r");
        if (fp == NULL)
            continue;
        if (fgets(buf, sizeof(buf), fp) != NULL && (rp = strrchr(buf, ')')) != NULL &&
            sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == getpid()) {
            n++;
            if (state == 'Z')
                (*zombies)++;
        }
        fclose(fp);
    }
    closedir(d);
    return n;
}

/* Open descriptors of process pid (0: this one), sorted by readdir order. */
static unsigned list_fds(pid_t pid, int *fds, unsigned max)
{
    char path[64];
    DIR *d;
    struct dirent *e;
    unsigned n = 0;

    if (pid == 0)
        snprintf(path, sizeof(path), "/proc/self/fd");
    else
        snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    d = opendir(path);
    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL && n < max) {
        int fd = atoi(e->d_name);

        if (e->d_name[0] != '.' && (pid != 0 || fd != dirfd(d)))
            fds[n++] = fd;
    }
    closedir(d);
    return n;
}

static bool is_in(const int *fds, unsigned n, int fd)
{
    for (unsigned i = 0; i < n; i++) {
        if (fds[i] == fd)
            return true;
    }
    return false;
}

START_TEST(serves_concurrent_clients_each_in_its_own_child)
{
    struct fixture f;
    struct cr_test_client cl[6];
    struct cr_scoreboard_entry e[64];
    struct cr_server_stats st;
    struct cr_worker_stats w[64];
    unsigned n;

    fx_start(&f, false, 8);
    for (int i = 0; i < 6; i++) {
        open_client(&f, &cl[i]);
        expect_reply(&cl[i], "c1 ECHO first", "c1 OK first");
    }
    /* Every connection still open is a live child, each with its own pid. */
    for (int i = 0; i < 6; i++)
        expect_reply(&cl[i], "c2 ECHO again", "c2 OK again");
    ck_assert(wait_scoreboard(&f, 6, e, cr_test_tmo(3000)));
    for (unsigned i = 0; i < 6; i++) {
        ck_assert_int_ne(e[i].pid, getpid());
        for (unsigned j = 0; j < i; j++)
            ck_assert_int_ne(e[i].pid, e[j].pid);
        ck_assert_int_eq(e[i].state, CR_WORKER_BUSY);
        ck_assert_uint_eq(e[i].generation, 1);
        ck_assert_uint_eq(e[i].busy_threads, 1);
        ck_assert_uint_eq(e[i].connections, 1);
        ck_assert_uint_eq(e[i].requests, 2);
        ck_assert_uint_ge(e[i].bytes, 2 * strlen("c1 OK first\n"));
        ck_assert_uint_gt(e[i].last_request_ns, 0);
        ck_assert(kill(e[i].pid, 0) == 0);
    }
    /* The driver adds its bytes after it answered: wait until complete. */
    {
        uint64_t deadline = cr_test_now_ms() + (uint64_t)cr_test_tmo(3000);
        size_t in = 6 * (strlen("c1 ECHO first\n") + strlen("c2 ECHO again\n"));
        size_t out = 6 * (strlen("c1 OK first\n") + strlen("c2 OK again\n"));

        do {
            n = cr_server_stats(f.s, &st, w, 64);
        } while ((st.bytes_in < in || st.bytes_out < out) && cr_test_now_ms() < deadline);
    }
    ck_assert_str_eq(st.model, "forking");
    ck_assert_uint_eq(n, 6);
    ck_assert_uint_eq(st.workers, 6);
    ck_assert_uint_eq(st.processes, 6);
    ck_assert_uint_eq(st.generation, 1);
    ck_assert_uint_eq(st.accepted, 6);
    ck_assert_uint_eq(st.open_connections, 6);
    ck_assert_uint_eq(st.requests, 12);
    ck_assert_uint_eq(st.crashes, 0);
    ck_assert_uint_ge(st.bytes_in, 6 * (strlen("c1 ECHO first\n") + strlen("c2 ECHO again\n")));
    ck_assert_uint_ge(st.bytes_out, 6 * (strlen("c1 OK first\n") + strlen("c2 OK again\n")));
    for (unsigned i = 0; i < n; i++)
        ck_assert_int_eq(w[i].role, CR_ROLE_PROCESSING);
    ck_assert_int_eq(cr_server_restart(f.s), 0); /* nothing to restart */

    for (int i = 0; i < 6; i++)
        cr_test_client_close(&cl[i]);
    ck_assert(wait_processes(&f, 0, cr_test_tmo(3000)));
    ck_assert_uint_eq(cr_server_scoreboard(f.s, e, 64), 0);
    st = stats_of(&f);
    ck_assert_uint_eq(st.open_connections, 0);
    ck_assert_uint_eq(st.requests, 12);
    fx_finish(&f, true);
}
END_TEST

START_TEST(echo_service_runs_in_children)
{
    struct fixture f;
    struct cr_test_client cl[3];
    char buf[32];

    fx_start(&f, true, 4);
    for (int i = 0; i < 3; i++)
        open_client(&f, &cl[i]);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 3; i++) {
            snprintf(buf, sizeof(buf), "r%d-c%d;", round, i);
            ck_assert_int_eq(cr_test_client_send(&cl[i], buf), 0);
        }
        for (int i = 0; i < 3; i++) {
            char got[32] = {0};

            snprintf(buf, sizeof(buf), "r%d-c%d;", round, i);
            ck_assert_int_eq(cr_test_client_read(&cl[i], got, strlen(buf), cr_test_tmo(3000)), 0);
            ck_assert_str_eq(got, buf);
        }
    }
    ck_assert_uint_eq(stats_of(&f).processes, 3);
    for (int i = 0; i < 3; i++)
        cr_test_client_close(&cl[i]);
    fx_finish(&f, true);
}
END_TEST

START_TEST(cap_holds_connections_in_backlog_until_a_child_exits)
{
    struct fixture f;
    struct cr_test_client a;
    struct cr_test_client b;
    struct cr_test_client c;
    char line[64];

    fx_start(&f, false, 2);
    open_client(&f, &a);
    open_client(&f, &b);
    expect_reply(&a, "a1 ECHO in", "a1 OK in");
    expect_reply(&b, "b1 ECHO in", "b1 OK in");
    /* The third connects (the backlog takes it) but no child serves it. */
    open_client(&f, &c);
    ck_assert_int_eq(cr_test_client_send(&c, "c1 ECHO waiting\n"), 0);
    ck_assert_int_eq(cr_test_client_line(&c, line, sizeof(line), 300), -ETIMEDOUT);
    ck_assert_uint_eq(stats_of(&f).processes, 2);
    ck_assert_uint_eq(stats_of(&f).accepted, 2);
    /* One leaves: the third is accepted and answered. */
    cr_test_client_close(&a);
    expect_line(&c, "c1 OK waiting");
    expect_reply(&b, "b2 ECHO still", "b2 OK still");
    ck_assert_uint_le(stats_of(&f).processes, 2);
    ck_assert_uint_eq(stats_of(&f).accepted, 3);
    cr_test_client_close(&b);
    cr_test_client_close(&c);
    ck_assert(wait_processes(&f, 0, cr_test_tmo(3000)));
    fx_finish(&f, true);
}
END_TEST

START_TEST(children_are_reaped_no_zombie_left)
{
    struct fixture f;
    struct cr_test_client cl;
    unsigned zombies;
    unsigned n;

    int fds[MAX_FDS];
    unsigned nfds;

    fx_start(&f, false, 4);
    nfds = list_fds(0, fds, MAX_FDS);
    for (int i = 0; i < 10; i++) {
        open_client(&f, &cl);
        expect_reply(&cl, "z1 ECHO once", "z1 OK once");
        cr_test_client_close(&cl);
    }
    ck_assert(wait_processes(&f, 0, cr_test_tmo(3000)));
    n = count_children(&zombies);
    ck_assert_uint_eq(zombies, 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_uint_eq(stats_of(&f).accepted, 10);
    ck_assert_uint_eq(stats_of(&f).requests, 10);
    ck_assert_uint_eq(stats_of(&f).crashes, 0);
    /* The master keeps nothing of a finished child (pidfd, connection). */
    ck_assert_uint_eq(list_fds(0, fds, MAX_FDS), nfds);
    fx_finish(&f, true);
    n = count_children(&zombies);
    ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(child_holds_only_its_connection_and_what_came_before)
{
    struct fixture f;
    struct cr_test_client a;
    struct cr_test_client b;
    struct cr_scoreboard_entry e[64];
    int before[MAX_FDS];
    int child[MAX_FDS];
    unsigned nbefore;
    unsigned nchild;
    pid_t pid = 0;
    int extra = -1;
    bool has_service_file = false;

    /* Before: what the process holds with the service set up (its file
     * among them), and no server yet. */
    fx_init(&f, false);
    nbefore = list_fds(0, before, MAX_FDS);
    ck_assert(is_in(before, nbefore, f.t.file_fd));
    fx_serve(&f, 4);
    /* Two connections: the second child must not hold the first's socket
     * (nor the test's client ends of either). */
    open_client(&f, &a);
    expect_reply(&a, "f1 ECHO one", "f1 OK one");
    open_client(&f, &b);
    expect_reply(&b, "f2 ECHO two", "f2 OK two");
    ck_assert(wait_scoreboard(&f, 2, e, cr_test_tmo(3000)));
    for (unsigned i = 0; i < 2; i++) {
        if (e[i].pid > pid)
            pid = e[i].pid; /* the later fork: more to leak */
    }
    nchild = list_fds(pid, child, MAX_FDS);
    for (unsigned i = 0; i < nchild; i++) {
        char path[64];
        char target[128];
        ssize_t len;

        if (child[i] == f.t.file_fd)
            has_service_file = true;
        if (child[i] <= 2 || is_in(before, nbefore, child[i]))
            continue;
        /* Beyond what came before, only its connection: one socket. */
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, child[i]);
        len = readlink(path, target, sizeof(target) - 1);
        ck_assert_int_gt(len, 0);
        target[len] = '\0';
        ck_assert_msg(extra < 0, "child %d holds fd %d (%s) and fd %d", (int)pid, child[i], target,
                      extra);
        ck_assert_msg(strncmp(target, "socket:", 7) == 0, "child holds fd %d: %s", child[i],
                      target);
        extra = child[i];
    }
    ck_assert_int_ge(extra, 3);
    ck_assert(has_service_file);
    cr_test_client_close(&a);
    cr_test_client_close(&b);
    fx_finish(&f, true);
}
END_TEST

START_TEST(graceful_stop_answers_the_request_in_flight)
{
    struct fixture f;
    struct cr_test_client busy;
    struct cr_test_client idle;
    unsigned zombies;

    fx_start(&f, false, 4);
    open_client(&f, &idle);
    expect_reply(&idle, "i1 ECHO here", "i1 OK here");
    open_client(&f, &busy);
    ck_assert_int_eq(cr_test_client_send(&busy, "g1 SLEEP 500\n"), 0);
    {
        uint64_t deadline = cr_test_now_ms() + (uint64_t)cr_test_tmo(3000);

        while (cr_test_svc_get(&f.t.n->started) < 2 && cr_test_now_ms() < deadline)
            usleep(1000);
        ck_assert_uint_ge(cr_test_svc_get(&f.t.n->started), 2);
    }
    cr_server_stop(f.s, true);
    /* The sleeper is answered, then closed; the idle one just closed. */
    expect_line(&busy, "g1 OK");
    ck_assert_int_eq(cr_test_client_eof(&busy, cr_test_tmo(3000)), 0);
    ck_assert_int_eq(cr_test_client_eof(&idle, cr_test_tmo(3000)), 0);
    ck_assert_int_eq(cr_server_wait(f.s), 0);
    ck_assert_uint_eq(stats_of(&f).processes, 0);
    ck_assert_uint_eq(stats_of(&f).crashes, 0);
    ck_assert_uint_eq(count_children(&zombies), 0);
    cr_test_client_close(&busy);
    cr_test_client_close(&idle);
    cr_server_destroy(f.s);
    cr_test_svc_fini(&f.t);
}
END_TEST

START_TEST(immediate_stop_ends_every_child)
{
    struct fixture f;
    struct cr_test_client cl[3];
    unsigned zombies;

    fx_start(&f, false, 4);
    for (int i = 0; i < 3; i++) {
        open_client(&f, &cl[i]);
        expect_reply(&cl[i], "n1 ECHO up", "n1 OK up");
    }
    ck_assert(wait_processes(&f, 3, cr_test_tmo(3000)));
    cr_server_stop(f.s, false);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(cr_test_client_eof(&cl[i], cr_test_tmo(3000)), 0);
    ck_assert_int_eq(cr_server_wait(f.s), 0);
    ck_assert_uint_eq(stats_of(&f).processes, 0);
    ck_assert_uint_eq(stats_of(&f).crashes, 0);
    ck_assert_uint_eq(count_children(&zombies), 0);
    /* A new connection is no longer served (the listener is still bound:
     * it is the server's until destroy). */
    for (int i = 0; i < 3; i++)
        cr_test_client_close(&cl[i]);
    cr_server_destroy(f.s);
    cr_test_svc_fini(&f.t);
}
END_TEST

START_TEST(immediate_stop_kills_a_child_stuck_in_its_handler)
{
    struct fixture f;
    struct cr_test_client cl;
    uint64_t deadline;

    fx_start(&f, false, 4);
    open_client(&f, &cl);
    /* The handler sleeps through signals (nanosleep restarted): QUIT only
     * sets the flag, so the master escalates to SIGKILL. */
    ck_assert_int_eq(cr_test_client_send(&cl, "q1 SLEEP 10000\n"), 0);
    deadline = cr_test_now_ms() + (uint64_t)cr_test_tmo(3000);
    while (cr_test_svc_get(&f.t.n->started) < 1 && cr_test_now_ms() < deadline)
        usleep(1000);
    ck_assert_uint_eq(cr_test_svc_get(&f.t.n->started), 1);
    cr_server_stop(f.s, false);
    ck_assert_int_eq(cr_server_wait(f.s), 0);
    ck_assert_int_eq(cr_test_client_eof(&cl, cr_test_tmo(3000)), 0);
    ck_assert_uint_eq(stats_of(&f).processes, 0);
    /* Told to stop: not a crash. */
    ck_assert_uint_eq(stats_of(&f).crashes, 0);
    cr_test_client_close(&cl);
    cr_server_destroy(f.s);
    cr_test_svc_fini(&f.t);
}
END_TEST

START_TEST(child_killed_is_counted_as_crash_and_reaped)
{
    struct fixture f;
    struct cr_test_client victim;
    struct cr_test_client other;
    struct cr_scoreboard_entry e[64];
    uint64_t deadline;

    fx_start(&f, false, 4);
    open_client(&f, &victim);
    expect_reply(&victim, "k1 ECHO doomed", "k1 OK doomed");
    ck_assert(wait_scoreboard(&f, 1, e, cr_test_tmo(3000)));
    open_client(&f, &other);
    expect_reply(&other, "k2 ECHO fine", "k2 OK fine");
    ck_assert_int_eq(kill(e[0].pid, SIGKILL), 0);
    ck_assert_int_eq(cr_test_client_eof(&victim, cr_test_tmo(3000)), 0);
    deadline = cr_test_now_ms() + (uint64_t)cr_test_tmo(3000);
    while (stats_of(&f).crashes == 0 && cr_test_now_ms() < deadline)
        usleep(1000);
    ck_assert_uint_eq(stats_of(&f).crashes, 1);
    ck_assert(wait_processes(&f, 1, cr_test_tmo(3000)));
    /* Only the connection it owned failed. */
    expect_reply(&other, "k3 ECHO alive", "k3 OK alive");
    cr_test_client_close(&victim);
    cr_test_client_close(&other);
    fx_finish(&f, true);
}
END_TEST

START_TEST(children_stop_when_the_master_is_killed)
{
    struct cr_test_client cl;
    uint64_t deadline;
    uint16_t port = 0;
    pid_t master;
    pid_t pid;
    int p[2];
    int status;
    int reaped = 0;

    /* Orphans come back to this process, which reaps them. */
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    ck_assert_int_eq(pipe(p), 0);
    master = fork();
    ck_assert_int_ge(master, 0);
    if (master == 0) {
        struct fixture f;

        close(p[0]);
        fx_start(&f, false, 4);
        if (write(p[1], &f.port, sizeof(f.port)) != sizeof(f.port))
            _exit(1);
        for (;;)
            pause(); /* until SIGKILL */
    }
    close(p[1]);
    ck_assert_int_eq(cr_test_read_exact(p[0], &port, sizeof(port), cr_test_tmo(5000)), 0);
    close(p[0]);
    ck_assert_int_eq(cr_test_client_open(&cl, port), 0);
    expect_reply(&cl, "o1 ECHO parent", "o1 OK parent");
    ck_assert_int_eq(kill(master, SIGKILL), 0);
    ck_assert_int_eq(waitpid(master, &status, 0), master);
    /* The child got SIGTERM (PR_SET_PDEATHSIG): its idle connection ends
     * and it exits, and is reaped here. */
    ck_assert_int_eq(cr_test_client_eof(&cl, cr_test_tmo(3000)), 0);
    deadline = cr_test_now_ms() + (uint64_t)cr_test_tmo(3000);
    while (reaped == 0 && cr_test_now_ms() < deadline) {
        pid = waitpid(-1, &status, WNOHANG);
        if (pid > 0) {
            ck_assert(WIFEXITED(status));
            ck_assert_int_eq(WEXITSTATUS(status), 0);
            reaped++;
        } else {
            usleep(1000);
        }
    }
    ck_assert_int_eq(reaped, 1);
    cr_test_client_close(&cl);
}
END_TEST

/* What the wrapped service's children saw, in shared memory. */
struct hook_report {
    uint64_t inits;
    uint64_t exits;
    uint64_t accepted_seen; /* cr_server_stats().accepted read in a child */
    uint64_t processes_seen;
    uint64_t slots_seen; /* cr_server_scoreboard() in a child */
    int pid_seen;        /* pid of the first slot, read in a child */
};

static struct hook_report *hooks;
static const struct cr_service *inner;

static int hook_init(void *ctx)
{
    CR_UNUSED(ctx);
    __atomic_fetch_add(&hooks->inits, 1, __ATOMIC_RELAXED);
    return 0;
}

static void hook_exit(void *ctx)
{
    CR_UNUSED(ctx);
    __atomic_fetch_add(&hooks->exits, 1, __ATOMIC_RELAXED);
}

/* The line service, reading the server's stats and scoreboard from the
 * child first, as a status page does. */
static ssize_t hook_input(void *ctx, void *state, struct cr_conn *c, const char *data, size_t len)
{
    struct cr_server_stats st;
    struct cr_worker_stats w[8];
    struct cr_scoreboard_entry e[8];
    unsigned n;

    (void)cr_server_stats(cr_conn_server(c), &st, w, 8);
    n = cr_server_scoreboard(cr_conn_server(c), e, 8);
    __atomic_store_n(&hooks->accepted_seen, st.accepted, __ATOMIC_RELAXED);
    __atomic_store_n(&hooks->processes_seen, (uint64_t)st.processes, __ATOMIC_RELAXED);
    __atomic_store_n(&hooks->slots_seen, (uint64_t)n, __ATOMIC_RELAXED);
    if (n > 0)
        __atomic_store_n(&hooks->pid_seen, e[0].pid, __ATOMIC_RELAXED);
    return inner->input(ctx, state, c, data, len);
}

START_TEST(process_hooks_run_in_each_child_and_stats_read_there)
{
    struct fixture f;
    struct cr_service svc;
    struct cr_server_config cfg = {
        .model = "forking",
        .listen = {"127.0.0.1:0"},
        .max_workers = 4,
    };
    struct cr_test_client cl[3];
    char addr[64];
    uint64_t deadline;

    hooks = mmap(NULL, sizeof(*hooks), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(hooks != MAP_FAILED);
    fx_init(&f, false);
    inner = &f.t.svc;
    svc = f.t.svc;
    svc.process_init = hook_init;
    svc.process_exit = hook_exit;
    svc.input = hook_input;
    ck_assert_int_eq(cr_server_create(&f.s, &cfg, &svc), 0);
    ck_assert_int_eq(cr_server_address(f.s, 0, addr, sizeof(addr)), 0);
    f.port = (uint16_t)atoi(strrchr(addr, ':') + 1);
    ck_assert_int_eq(cr_server_start(f.s), 0);
    for (int i = 0; i < 3; i++) {
        open_client(&f, &cl[i]);
        expect_reply(&cl[i], "h1 ECHO hooked", "h1 OK hooked");
    }
    /* Never in the master, once in each child. */
    ck_assert_uint_eq(__atomic_load_n(&hooks->inits, __ATOMIC_RELAXED), 3);
    /* The last child saw the server's counters, not its fork-time copy
     * of the master's memory alone: 3 accepted, 3 children, 3 slots. */
    ck_assert_uint_eq(__atomic_load_n(&hooks->accepted_seen, __ATOMIC_RELAXED), 3);
    ck_assert_uint_eq(__atomic_load_n(&hooks->processes_seen, __ATOMIC_RELAXED), 3);
    ck_assert_uint_eq(__atomic_load_n(&hooks->slots_seen, __ATOMIC_RELAXED), 3);
    ck_assert_int_gt(__atomic_load_n(&hooks->pid_seen, __ATOMIC_RELAXED), 0);
    for (int i = 0; i < 3; i++)
        cr_test_client_close(&cl[i]);
    deadline = cr_test_now_ms() + (uint64_t)cr_test_tmo(3000);
    while (__atomic_load_n(&hooks->exits, __ATOMIC_RELAXED) < 3 && cr_test_now_ms() < deadline)
        usleep(1000);
    ck_assert_uint_eq(__atomic_load_n(&hooks->exits, __ATOMIC_RELAXED), 3);
    fx_finish(&f, true);
    munmap(hooks, sizeof(*hooks));
}
END_TEST

Suite *forking_suite(void);

Suite *forking_suite(void)
{
    Suite *s = suite_create("forking");
    TCase *tc = tcase_create("forking");

    tcase_set_timeout(tc, TEST_TIMEOUT);
    tcase_add_test(tc, serves_concurrent_clients_each_in_its_own_child);
    tcase_add_test(tc, echo_service_runs_in_children);
    tcase_add_test(tc, cap_holds_connections_in_backlog_until_a_child_exits);
    tcase_add_test(tc, children_are_reaped_no_zombie_left);
    tcase_add_test(tc, child_holds_only_its_connection_and_what_came_before);
    tcase_add_test(tc, graceful_stop_answers_the_request_in_flight);
    tcase_add_test(tc, immediate_stop_ends_every_child);
    tcase_add_test(tc, immediate_stop_kills_a_child_stuck_in_its_handler);
    tcase_add_test(tc, child_killed_is_counted_as_crash_and_reaped);
    tcase_add_test(tc, process_hooks_run_in_each_child_and_stats_read_there);
    tcase_add_test(tc, children_stop_when_the_master_is_killed);
    suite_add_tcase(s, tc);
    return s;
}
