/*
 * test_bench_driver.c - the measuring half of cabrank-bench (apps/common/samples.c,
 * procstat.c, load_wrk.c, load_line.c, docroot.c, peers.c): nearest-rank percentiles; a
 * process tree's CPU time, context switches and peak RSS include a forked child; wrk's
 * figures parsed from the line our Lua hook prints; the open loop keeps requests falling due
 * while a server stalls and measures each from its due time, so the stall shows in the
 * percentiles (a closed loop would have sent one request and waited: coordinated omission);
 * the closed loop counts every reply; the work directory holds
 * peers.sh's files; a peer's configuration serves the port and root it was given; a config
 * names its deferred promotion ("lf:lifo+defer"); the repetitions measure only the claims'
 * points, the configurations in alternating order; the machine's noise (machine.c): /proc/stat's
 * and /proc/loadavg's texts parsed, the other processes' share of the CPU from two samples less
 * our own time, a point judged noisy against --noise-max, and a live reading in range.
 */
#include "../../apps/bench/driver.h"
#include "../../apps/bench/machine.h"
#include "../../apps/bench/passes.h"
#include "../../apps/bench/procstat.h"

#include "support.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

START_TEST(percentiles_are_nearest_rank)
{
    struct bench_samples s = {0};
    struct bench_pcts p;

    p = bench_samples_pcts(&s);
    ck_assert(isnan(p.p50_us) && isnan(p.p999_us));
    /* 1000 samples, 1..1000 µs, added in reverse: sorted before ranking. */
    for (int i = 1000; i >= 1; i--)
        ck_assert_int_eq(bench_samples_add(&s, (uint64_t)i * 1000), 0);
    p = bench_samples_pcts(&s);
    ck_assert_double_eq(p.p50_us, 500);
    ck_assert_double_eq(p.p90_us, 900);
    ck_assert_double_eq(p.p99_us, 990);
    ck_assert_double_eq(p.p999_us, 999);
    bench_samples_fini(&s);
    ck_assert_int_eq(bench_samples_add(&s, 7000), 0);
    p = bench_samples_pcts(&s);
    ck_assert_double_eq(p.p50_us, 7);
    ck_assert_double_eq(p.p999_us, 7);
    bench_samples_fini(&s);
    bench_samples_fini(NULL);
}
END_TEST

/* ms scaled for slow (sanitizer) builds, for waits that expect an event. */
/*
 * The child's own usage is read first, once it has touched its 8 MiB and blocked (its first
 * voluntary context switch), then the tree's: every figure but the process count only grows,
 * so the tree's is at least what the test process had before the fork plus the child's. Under
 * ASan the child's peak RSS passes 8 MiB at the fork (the parent's shadow pages), so waiting
 * for the tree's peak alone proved nothing had run or blocked yet: a test process that had
 * never slept and a child not yet blocked read 0 context switches.
 */
START_TEST(usage_sums_the_tree_with_children)
{
    struct bench_usage alone;
    struct bench_usage kid;
    struct bench_usage with;
    int ready[2];
    int go[2];
    pid_t child;
    uint64_t end;
    char c;

    bench_usage_read(getpid(), &alone);
    ck_assert_uint_ge(alone.processes, 1);
    ck_assert_uint_gt(alone.hwm_kb, 0);
    ck_assert(alone.cpu_s >= 0);
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(go), 0);
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        /* Touch 8 MiB so the child's peak RSS is visible, say so, then wait to be read. */
        /* volatile: the compiler may not drop the stores of a buffer it sees freed. */
        volatile char *big = malloc(8 << 20);

        close(ready[0]);
        close(go[1]);
        for (size_t i = 0; big != NULL && i < (8u << 20); i += 4096)
            big[i] = 1;
        if (big == NULL || write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) < 0)
            _exit(1);
        free((void *)big);
        _exit(0);
    }
    close(ready[1]);
    close(go[0]);
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    /* Until the child has blocked in its read and its RSS counters caught up. */
    end = cr_test_now_ms() + (uint64_t)cr_test_tmo(5000);
    for (;;) {
        bench_usage_read(child, &kid);
        if ((kid.ctxsw >= 1 && kid.hwm_kb >= 8192) || cr_test_now_ms() >= end)
            break;
        usleep(1000);
    }
    ck_assert_uint_eq(kid.processes, 1);
    ck_assert_uint_ge(kid.ctxsw, 1);
    ck_assert_uint_ge(kid.hwm_kb, 8192);
    bench_usage_read(getpid(), &with);
    ck_assert_uint_ge(with.processes, alone.processes + 1);
    ck_assert_uint_ge(with.hwm_kb, alone.hwm_kb + kid.hwm_kb);
    ck_assert_uint_ge(with.ctxsw, alone.ctxsw + kid.ctxsw);
    ck_assert_uint_ge(with.ctxsw, 1);
    close(go[1]);
    close(ready[0]);
    ck_assert_int_eq(waitpid(child, NULL, 0), child);
    /* A process that is gone reads as nothing. */
    bench_usage_read(child, &with);
    ck_assert_uint_eq(with.processes, 0);
}
END_TEST

START_TEST(wrk_figures_come_from_the_hook_line)
{
    static const char out[] = "Running 1s test @ http://127.0.0.1:1234/hello.txt\n"
                              "  1 threads and 8 connections\n"
                              "  Latency Distribution\n     50%   12.00us\n"
                              "cabrank-bench-wrk: 20000 2000000 1 2 3 4 5 12 30 250 1999\n";
    struct bench_load_result r;

    ck_assert_int_eq(bench__wrk_parse(out, &r), 0);
    ck_assert_uint_eq(r.requests, 20000);
    ck_assert_double_eq(r.seconds, 2);
    ck_assert_double_eq(r.rps, 10000);
    ck_assert_uint_eq(r.errors, 15);
    ck_assert_double_eq(r.pcts.p50_us, 12);
    ck_assert_double_eq(r.pcts.p90_us, 30);
    ck_assert_double_eq(r.pcts.p99_us, 250);
    ck_assert_double_eq(r.pcts.p999_us, 1999);
    ck_assert_int_eq(bench__wrk_parse("Requests/sec: 5\n", &r), -EPROTO);
    ck_assert_int_eq(bench__wrk_parse("cabrank-bench-wrk: 1 2 3\n", &r), -EPROTO);
    /* No request served: counts, no percentiles. */
    ck_assert_int_eq(bench__wrk_parse("cabrank-bench-wrk: 0 1000000 8 0 0 0 0 0 0 0 0\n", &r), 0);
    ck_assert_double_eq(r.rps, 0);
    ck_assert_uint_eq(r.errors, 8);
    ck_assert(isnan(r.pcts.p50_us));
}
END_TEST

/*
 * A line server in a child: accepts one connection, stalls stall_ms, then answers every line
 * with one line until the client closes. Returns the child; *port its port.
 */
static pid_t fake_line_server(int stall_ms, uint16_t *port)
{
    int lfd;
    pid_t pid;

    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(lfd, 0);
    {
        struct sockaddr_in sa = {.sin_family = AF_INET};
        socklen_t len = sizeof(sa);

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ck_assert_int_eq(listen(lfd, 4), 0);
        ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
        *port = ntohs(sa.sin_port);
    }
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char in[65536];
        char out[65536];
        int fd = accept(lfd, NULL, NULL);

        if (fd < 0)
            _exit(1);
        usleep((useconds_t)stall_ms * 1000);
        for (;;) {
            ssize_t n = read(fd, in, sizeof(in));
            size_t o = 0;

            if (n <= 0)
                _exit(0);
            for (ssize_t i = 0; i < n; i++) {
                if (in[i] == '\n') {
                    memcpy(out + o, "1 OK ping\n", 10);
                    o += 10;
                }
            }
            if (o > 0 && cr_test_write_all(fd, out, o) < 0)
                _exit(0);
        }
    }
    close(lfd);
    return pid;
}

START_TEST(open_loop_shows_a_server_stall_in_its_percentiles)
{
    struct bench_line_load l = {.connections = 1, .seconds = 1, .rate = 1000};
    struct bench_load_result r;
    pid_t pid = fake_line_server(400, &l.port);

    /* Requests fall due every 1 ms while the server stalls 400 ms from the start; the first
     * 100 ms warm up. Those due between 100 and 400 ms wait until ~400 ms: about 300 of some
     * 900 measured, so the slowest 1% waited at least ~250 ms, whatever the machine. */
    ck_assert_int_eq(bench_line_run(&l, &r), 0);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    ck_assert_uint_eq(r.errors, 0);
    ck_assert_uint_gt(r.requests, 500);
    ck_assert_msg(r.pcts.p99_us >= 150000, "p99 %.0f µs hides the stall", r.pcts.p99_us);
    ck_assert_msg(r.pcts.p90_us >= 50000, "p90 %.0f µs hides the stall", r.pcts.p90_us);
}
END_TEST

START_TEST(closed_loop_counts_every_reply)
{
    struct bench_line_load l = {.connections = 1, .seconds = 0.5, .rate = 0};
    struct bench_load_result r;
    pid_t pid = fake_line_server(0, &l.port);

    ck_assert_int_eq(bench_line_run(&l, &r), 0);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    ck_assert_uint_eq(r.errors, 0);
    ck_assert_uint_gt(r.requests, 0);
    ck_assert(r.rps > 0);
    ck_assert(r.pcts.p50_us > 0 && r.pcts.p50_us <= r.pcts.p99_us);
}
END_TEST

START_TEST(line_load_fails_without_a_server)
{
    struct bench_line_load l = {.connections = 2, .seconds = 0.2, .rate = 0};
    struct bench_load_result r;

    ck_assert_int_eq(bench_free_port(&l.port), 0);
    ck_assert_int_eq(bench_line_run(&l, &r), -ECONNREFUSED);
}
END_TEST

START_TEST(workdir_holds_the_peers_files)
{
    char dir[PATH_MAX];
    char path[PATH_MAX + 32];
    struct stat st;

    ck_assert_int_eq(bench_workdir_create(dir), 0);
    for (size_t i = 0; i < sizeof(bench_files) / sizeof(bench_files[0]); i++) {
        snprintf(path, sizeof(path), "%s/www/%s", dir, bench_files[i].name);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq((long long)st.st_size, (long long)bench_files[i].size);
        ck_assert_int_eq(bench_file_size(bench_files[i].name), (long long)bench_files[i].size);
    }
    ck_assert_int_eq(bench_file_size("nope.bin"), -1);
    snprintf(path, sizeof(path), "%s/run", dir);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 07777, 01777);
    bench_workdir_remove(dir);
    ck_assert_int_eq(stat(dir, &st), -1);
}
END_TEST

START_TEST(peer_configuration_serves_the_port_and_root)
{
    static const struct {
        const char *peer;
        const char *line;
    } workers[] = {
        {"nginx", "worker_processes 3;"},
        {"h2o", "num-threads: 3"},
        {"lighttpd", "server.max-worker = 3"},
        {"apache-event", "StartServers 3\nServerLimit 3\n"},
    };
    char dir[PATH_MAX];
    int tried = 0;

    ck_assert_int_eq(bench_workdir_create(dir), 0);
    for (int i = 0; bench_peer_names[i] != NULL; i++) {
        struct bench_peer_cmd cmd;
        char conf[PATH_MAX + 32];
        char root[PATH_MAX + 32];
        char *text;

        if (!bench_peer_installed(bench_peer_names[i]))
            continue;
        tried++;
        ck_assert_int_eq(bench_peer_prepare(bench_peer_names[i], dir, 18123, 0, &cmd), 0);
        ck_assert_ptr_nonnull(cmd.argv[0]);
        snprintf(conf, sizeof(conf), "%s/%s.conf", dir, bench_peer_names[i]);
        text = cr_test_read_file(conf, NULL);
        ck_assert_ptr_nonnull(text);
        snprintf(root, sizeof(root), "%s/www", dir);
        ck_assert_msg(strstr(text, "18123") != NULL, "%s: no port", conf);
        ck_assert_msg(strstr(text, root) != NULL, "%s: no root", conf);
        ck_assert_msg(strstr(text, "127.0.0.1") != NULL, "%s: not on loopback", conf);
        free(text);
        /* With --cores, the workers follow the server's cores (prefork: a process per
         * connection whatever they are). */
        ck_assert_int_eq(bench_peer_prepare(bench_peer_names[i], dir, 18123, 3, &cmd), 0);
        text = cr_test_read_file(conf, NULL);
        ck_assert_ptr_nonnull(text);
        for (size_t k = 0; k < sizeof(workers) / sizeof(workers[0]); k++)
            if (strcmp(workers[k].peer, bench_peer_names[i]) == 0)
                ck_assert_msg(strstr(text, workers[k].line) != NULL, "%s: no '%s'", conf,
                              workers[k].line);
        free(text);
    }
    {
        struct bench_peer_cmd cmd;

        ck_assert_int_eq(bench_peer_prepare("iis", dir, 18123, 0, &cmd), -ENOENT);
    }
    bench_workdir_remove(dir);
    (void)tried; /* none installed: only the refusal is checked */
}
END_TEST

START_TEST(config_names_its_deferred_promotion)
{
    static const struct {
        const char *spec;
        const char *model;
        const char *option;
        bool defer;
    } cases[] = {
        {"lf:lifo+defer", "lf", "lifo", true},
        {"lf:lifo", "lf", "lifo", false},
        {"lf:fifo", "lf", "fifo", false},
        {"hshr", "hshr", "", false},
        {"prefork:reuseport", "prefork", "reuseport", false},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct bench_config c;

        bench_config_split(cases[i].spec, &c);
        ck_assert_str_eq(c.model, cases[i].model);
        ck_assert_str_eq(c.option, cases[i].option);
        ck_assert_int_eq(c.defer, cases[i].defer);
    }
}
END_TEST

START_TEST(repetitions_alternate_over_the_claims_points)
{
    char *configs[] = {"lf:lifo", "reactor", "hshr", "lf:fifo"};
    struct bench_options o = {.nconfigs = 4, .conc = {64, 1, 8}, .nconc = 3, .nrates = 2};
    int order[4];

    memcpy(o.configs, configs, sizeof(configs));
    /* The first pass: every configuration in order, every point. */
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(bench_pass_config(&o, 0, i), i);
    ck_assert_int_eq(bench_pass_points(&o, 0, "http:64k.bin"), 3);
    ck_assert_int_eq(bench_pass_points(&o, 0, "line-open"), 2);
    /* The second pass reversed, without reactor (no claim names it); the third in order. */
    for (int i = 0; i < 4; i++)
        order[i] = bench_pass_config(&o, 1, i);
    ck_assert_int_eq(order[0], 3);
    ck_assert_int_eq(order[1], 2);
    ck_assert_int_eq(order[2], -1);
    ck_assert_int_eq(order[3], 0);
    ck_assert_int_eq(bench_pass_config(&o, 2, 0), 0);
    ck_assert_int_eq(bench_pass_config(&o, 2, 1), -1);
    /* Only the claims' workloads, at the lowest and highest concurrency. */
    ck_assert(bench_pass_measures(&o, 1, "line", 1) && bench_pass_measures(&o, 1, "line", 64));
    ck_assert(!bench_pass_measures(&o, 1, "line", 8));
    ck_assert(bench_pass_measures(&o, 1, "http:hello.txt", 0));
    ck_assert(bench_pass_measures(&o, 1, "interval", 0));
    ck_assert(!bench_pass_measures(&o, 1, "http:64k.bin", 0));
    ck_assert(!bench_pass_measures(&o, 1, "line-open", 0));
    ck_assert_int_eq(bench_pass_points(&o, 1, "line"), 2);
    ck_assert_int_eq(bench_pass_points(&o, 1, "interval"), 1);
    ck_assert_int_eq(bench_pass_points(&o, 1, "line-open"), 0);
}
END_TEST

/* ------------------------------------------------------------------------- the noise */

START_TEST(cpu_times_come_from_the_aggregate_line)
{
    struct bench_cpu_times t;

    /* user nice system idle iowait irq softirq steal guest guest_nice */
    ck_assert_int_eq(bench_cpu_times_parse("cpu  100 20 30 400 50 6 7 8 90 0\n"
                                           "cpu0 1 1 1 1 1 1 1 1 0 0\nintr 5\n",
                                           &t),
                     0);
    /* guest is inside user already: not added again. */
    ck_assert_uint_eq(t.busy, 100 + 20 + 30 + 6 + 7 + 8);
    ck_assert_uint_eq(t.total, t.busy + 400 + 50);
    /* An old kernel's line stops after iowait; the line need not be the first. */
    ck_assert_int_eq(bench_cpu_times_parse("x 1\ncpu  10 0 5 85 0\n", &t), 0);
    ck_assert_uint_eq(t.busy, 15);
    ck_assert_uint_eq(t.total, 100);
    ck_assert_int_eq(bench_cpu_times_parse("cpu0 1 2 3 4\n", &t), -EPROTO);
    ck_assert_int_eq(bench_cpu_times_parse("cpu  1 2\n", &t), -EPROTO);
    ck_assert_int_eq(bench_cpu_times_parse("", &t), -EPROTO);
}
END_TEST

START_TEST(loadavg_is_the_first_field)
{
    double v = -1;

    ck_assert_int_eq(bench_loadavg_parse("0.52 0.58 0.59 1/389 12345\n", &v), 0);
    ck_assert(v == 0.52);
    ck_assert_int_eq(bench_loadavg_parse("", &v), -EPROTO);
    ck_assert_int_eq(bench_loadavg_parse("nan 1 1", &v), -EPROTO);
    ck_assert_int_eq(bench_loadavg_parse("-1 1 1", &v), -EPROTO);
}
END_TEST

START_TEST(other_share_is_the_busy_time_not_ours)
{
    /* 2 CPUs for 1 s at 100 ticks/s: 200 ticks, 150 busy, of which 1 s (100 ticks) ours. */
    struct bench_cpu_times a = {.busy = 1000, .total = 5000};
    struct bench_cpu_times b = {.busy = 1150, .total = 5200};

    ck_assert(fabs(bench_other_share(&a, &b, 1.0, 100) - 0.25) < 1e-9);
    ck_assert(fabs(bench_other_share(&a, &b, 0, 100) - 0.75) < 1e-9);
    /* Ticks and CPU clocks disagree a little: never below 0. */
    ck_assert(bench_other_share(&a, &b, 1.6, 100) == 0);
    /* No tick passed, or samples swapped: not measured. */
    ck_assert(isnan(bench_other_share(&a, &a, 0, 100)));
    ck_assert(isnan(bench_other_share(&b, &a, 0, 100)));
}
END_TEST

START_TEST(noisy_when_either_share_is_above_the_limit)
{
    ck_assert_int_eq(bench_noise_judge(NAN, NAN, 0.1), -1);
    ck_assert_int_eq(bench_noise_judge(0.05, 0.05, 0.1), 0);
    ck_assert_int_eq(bench_noise_judge(0.05, 0.2, 0.1), 1);
    ck_assert_int_eq(bench_noise_judge(0.2, 0.05, 0.1), 1);
    ck_assert_int_eq(bench_noise_judge(0.2, NAN, 0.1), 1);
    ck_assert_int_eq(bench_noise_judge(NAN, 0.05, 0.1), 0);
    /* At the limit is not above it. */
    ck_assert_int_eq(bench_noise_judge(0.1, 0.1, 0.1), 0);
}
END_TEST

/* A live reading around a child that sleeps: every field measured and in range (the machine is
 * shared, so only the ranges are certain). */
START_TEST(noise_reading_is_in_range)
{
    struct bench_noise n;
    struct bench_row row;
    pid_t pid = fork();

    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        pause();
        _exit(0);
    }
    bench_row_init(&row);
    bench_noise_start(&n, pid, 0.05);
    usleep(50000);
    bench_noise_end(&n, pid, 0.1, &row);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ck_assert(row.loadavg_before >= 0);
    ck_assert(row.other_cpu_before >= 0 && row.other_cpu_before <= 1);
    ck_assert(row.other_cpu_during >= 0 && row.other_cpu_during <= 1);
    ck_assert_int_eq(row.noisy, bench_noise_judge(row.other_cpu_before, row.other_cpu_during, 0.1));
}
END_TEST

Suite *bench_driver_suite(void);

Suite *bench_driver_suite(void)
{
    Suite *s = suite_create("bench_driver");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, percentiles_are_nearest_rank);
    tcase_add_test(tc, usage_sums_the_tree_with_children);
    tcase_add_test(tc, wrk_figures_come_from_the_hook_line);
    tcase_add_test(tc, open_loop_shows_a_server_stall_in_its_percentiles);
    tcase_add_test(tc, closed_loop_counts_every_reply);
    tcase_add_test(tc, line_load_fails_without_a_server);
    tcase_add_test(tc, workdir_holds_the_peers_files);
    tcase_add_test(tc, peer_configuration_serves_the_port_and_root);
    tcase_add_test(tc, config_names_its_deferred_promotion);
    tcase_add_test(tc, repetitions_alternate_over_the_claims_points);
    tcase_add_test(tc, cpu_times_come_from_the_aggregate_line);
    tcase_add_test(tc, loadavg_is_the_first_field);
    tcase_add_test(tc, other_share_is_the_busy_time_not_ours);
    tcase_add_test(tc, noisy_when_either_share_is_above_the_limit);
    tcase_add_test(tc, noise_reading_is_in_range);
    suite_add_tcase(s, tc);
    return s;
}
