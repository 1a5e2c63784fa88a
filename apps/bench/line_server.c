/*
 * line_server.c - the line-protocol server cabrank-bench measures (tests/support's line
 * service) under a configuration's model: forked, not exec'd, in its own session, on the
 * servers' CPUs when --cores pins them; the child reports its port through a pipe. Called by
 * main.c on the program's thread; the child owns the server, the caller the child
 * (bench_server_stop()).
 */
#include <cabrank/log.h>
#include <cabrank/server.h>

#include "../common/lab_services.h"
#include "bench_options.h"
#include "cores.h"
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Forks the line server under cfg (listen and the log level set here); 0 or -errno. */
int bench_line_server_start_cfg(const struct cr_server_config *cfg_in, struct bench_server *s)
{
    uint16_t port;
    int pfd[2];
    pid_t pid;

    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -errno;
    pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return -errno;
    }
    if (pid == 0) {
        struct cr_server_config cfg = *cfg_in;
        struct cr_test_svc line;
        struct cr_server *srv;
        char addr[64];
        const char *colon;
        int err;

        cfg.listen[0] = "127.0.0.1:0";
        setsid();
        close(pfd[0]);
        err = bench_cores_enter_server();
        if (err < 0) {
            fprintf(stderr, "cabrank-bench: line server: pinning: %s\n", strerror(-err));
            _exit(1);
        }
        cr_log_set_level(CR_LOG_WARN);
        err = cr_test_line_init(&line);
        if (err == 0) {
            err = cr_server_create(&srv, &cfg, &line.svc);
            if (err == 0) {
                err = cr_server_address(srv, 0, addr, sizeof(addr));
                if (err < 0)
                    cr_server_destroy(srv);
            }
            if (err < 0)
                cr_test_svc_fini(&line);
        }
        if (err < 0) {
            fprintf(stderr, "cabrank-bench: line server %s: %s\n", cfg.model, strerror(-err));
            _exit(1);
        }
        colon = strrchr(addr, ':');
        port = (uint16_t)atoi(colon + 1);
        if (write(pfd[1], &port, sizeof(port)) != (ssize_t)sizeof(port))
            _exit(1);
        close(pfd[1]);
        err = cr_server_run(srv);
        cr_server_destroy(srv);
        cr_test_svc_fini(&line);
        _exit(err == 0 ? 0 : 1);
    }
    close(pfd[1]);
    bench_server_adopt(s, pid, 0);
    if (read(pfd[0], &port, sizeof(port)) != (ssize_t)sizeof(port)) {
        close(pfd[0]);
        bench_server_stop(s);
        return -ECHILD;
    }
    close(pfd[0]);
    s->port = port;
    return 0;
}

int bench_line_server_start(const struct bench_options *o, const struct bench_config *c,
                            struct bench_server *s)
{
    struct cr_server_config cfg = {
        .model = c->model,
        .threads = o->threads,
        .max_connections = 4096,
    };

    if (strcmp(c->model, "lf") == 0 && c->option[0])
        cfg.promotion = c->option;
    if (strcmp(c->model, "lf") == 0 && c->defer)
        cfg.promotion_delay_us = BENCH_DEFER_US;
    if (strcmp(c->model, "proactor") == 0 && c->option[0])
        cfg.dispatch = c->option;
    if (strcmp(c->model, "prefork") == 0) {
        cfg.workers = bench_options_prefork_workers(o);
        cfg.max_workers = cfg.workers;
        cfg.max_spare = cfg.workers;
        if (c->option[0])
            cfg.accept_lock = c->option;
    }
    if (strcmp(c->model, "forking") == 0)
        cfg.max_workers = (int)bench_options_max_conc(o) + 8;
    return bench_line_server_start_cfg(&cfg, s);
}
