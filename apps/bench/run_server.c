/*
 * run_server.c - starting and stopping the servers cabrank-bench measures: cabrank-httpd
 * (which reports its port on stdout), the peers (on a port we chose, ready when they serve
 * /hello.txt) and the line-protocol server (line_server.c). Each runs in its own session so a
 * stop reaches its worker processes, on the servers' CPUs when --cores pins them (cores.h), and so
 * Apache's killpg() at shutdown never reaches us. Runs on the program's thread; owns the children
 * it starts until bench_server_stop().
 */
#include "cores.h"
#include "driver.h"

#include <cabrank/clock.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define STOP_GRACE_MS 5000

static uint64_t now_ms(void)
{
    return cr_clock_now_ns() / 1000000u;
}

/* Forks argv in a new session; stdout to out_w (or ours), stderr to log_path (or ours). */
static int start(char *const argv[], const char *log_path, int out_w, pid_t *pid)
{
    *pid = fork();
    if (*pid < 0)
        return -errno;
    if (*pid == 0) {
        int err = bench_cores_enter_server();

        if (err < 0) {
            fprintf(stderr, "cabrank-bench: pinning %s: %s\n", argv[0], strerror(-err));
            _exit(126);
        }
        setsid();
        if (out_w >= 0)
            dup2(out_w, STDOUT_FILENO);
        if (log_path != NULL) {
            int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

            if (fd >= 0)
                dup2(fd, STDERR_FILENO);
        }
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

        if (null >= 0)
            dup2(null, STDIN_FILENO);
        execvp(argv[0], argv);
        fprintf(stderr, "cabrank-bench: exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    return 0;
}

/* Reads fd until a line holding "listening on ...:<port>", within the deadline. */
static int read_port(int fd, pid_t pid, uint16_t *port, uint64_t deadline)
{
    char buf[4096];
    size_t used = 0;

    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        uint64_t t = now_ms();
        char *nl;
        ssize_t n;

        while ((nl = memchr(buf, '\n', used)) != NULL) {
            char *at;
            char *colon;

            *nl = '\0';
            at = strstr(buf, "listening on ");
            colon = at != NULL ? strrchr(at, ':') : NULL;
            if (colon != NULL && atoi(colon + 1) > 0 && atoi(colon + 1) < 65536) {
                *port = (uint16_t)atoi(colon + 1);
                return 0;
            }
            used -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, used);
        }
        if (t >= deadline)
            return -ETIMEDOUT;
        if (poll(&p, 1, (int)(deadline - t)) < 0 && errno != EINTR)
            return -errno;
        if (!(p.revents & (POLLIN | POLLHUP)))
            continue;
        n = read(fd, buf + used, sizeof(buf) - 1 - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return waitpid(pid, NULL, WNOHANG) == pid ? -ECHILD : -EPIPE;
        used += (size_t)n;
        if (used == sizeof(buf) - 1)
            used = 0; /* a line this long is no port line */
    }
}

int bench_server_spawn(char *const argv[], const char *log_path, int timeout_ms,
                       struct bench_server *s)
{
    int pfd[2];
    pid_t pid;
    int err;

    s->pid = -1;
    s->out_fd = -1;
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -errno;
    err = start(argv, log_path, pfd[1], &pid);
    close(pfd[1]);
    if (err < 0) {
        close(pfd[0]);
        return err;
    }
    s->pid = pid;
    err = read_port(pfd[0], pid, &s->port, now_ms() + (uint64_t)timeout_ms);
    s->out_fd = pfd[0];
    if (err < 0)
        bench_server_stop(s);
    return err;
}

int bench_server_spawn_http(char *const argv[], const char *log_path, uint16_t port, int timeout_ms,
                            struct bench_server *s)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    pid_t pid;
    int err;

    s->pid = -1;
    s->out_fd = -1;
    s->port = port;
    err = start(argv, log_path, -1, &pid);
    if (err < 0)
        return err;
    s->pid = pid;
    for (;;) {
        if (bench_http_check(port, "/hello.txt", NULL, 1000) == 0)
            return 0;
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            s->pid = -1;
            bench_server_stop(s);
            return -ECHILD;
        }
        if (now_ms() >= deadline) {
            bench_server_stop(s);
            return -ETIMEDOUT;
        }
        usleep(50000);
    }
}

void bench_server_adopt(struct bench_server *s, pid_t pid, uint16_t port)
{
    s->pid = pid;
    s->port = port;
    s->out_fd = -1;
}

void bench_server_stop(struct bench_server *s)
{
    if (s == NULL)
        return;
    if (s->pid > 0) {
        uint64_t deadline = now_ms() + STOP_GRACE_MS;
        bool reaped = false;

        kill(s->pid, SIGTERM);
        while (!reaped && now_ms() < deadline) {
            if (waitpid(s->pid, NULL, WNOHANG) == s->pid)
                reaped = true;
            else
                usleep(10000);
        }
        /* Workers that outlived their parent, or a parent that ignored TERM: the session's
         * process group is the pid (setsid in start()). */
        kill(-s->pid, SIGKILL);
        if (!reaped) {
            fprintf(stderr, "cabrank-bench: server %d ignored TERM for 5 s, killed\n", (int)s->pid);
            waitpid(s->pid, NULL, 0);
        }
        s->pid = -1;
    }
    if (s->out_fd >= 0) {
        close(s->out_fd);
        s->out_fd = -1;
    }
}

int bench_free_port(uint16_t *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int err = 0;

    if (fd < 0)
        return -errno;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
        err = -errno;
    else
        *port = ntohs(sa.sin_port);
    close(fd);
    return err;
}

int bench_http_check(uint16_t port, const char *path, const size_t *size, int timeout_ms)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    char req[512];
    char head[8192];
    size_t used = 0;
    size_t got = 0;
    char *end = NULL;
    int len;
    int err = 0;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -errno;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        err = -errno;
        goto out_close;
    }
    len = snprintf(req, sizeof(req),
                   "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    if (send(fd, req, (size_t)len, MSG_NOSIGNAL) != len) {
        err = -EIO;
        goto out_close;
    }
    /* Read to EOF (Connection: close), counting the body after the head. */
    for (;;) {
        char chunk[65536];
        ssize_t n = recv(fd, chunk, sizeof(chunk), 0);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err = -errno;
            goto out_close;
        }
        if (n == 0)
            break;
        if (end == NULL) {
            size_t take = (size_t)n < sizeof(head) - used ? (size_t)n : sizeof(head) - used;

            memcpy(head + used, chunk, take);
            used += take;
            end = memmem(head, used, "\r\n\r\n", 4);
            if (end != NULL)
                got = used - (size_t)(end + 4 - head) + ((size_t)n - take);
        } else {
            got += (size_t)n;
        }
    }
    if (end == NULL || used < 12 || memcmp(head + 9, "200", 3) != 0 ||
        (size != NULL && got != *size))
        err = -EPROTO;
out_close:
    close(fd);
    return err;
}
