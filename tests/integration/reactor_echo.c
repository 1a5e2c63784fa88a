/*
 * reactor_echo.c (integration) - runs examples/reactor_echo and checks it
 * end to end: 200 clients connected at once, each sending its own
 * pseudo-random payload of 4-64 KiB and reading it back byte for byte, with
 * sending and receiving interleaved by poll() over every client; a client
 * that sends without reading must be stopped by backpressure; SIGTERM, with
 * a few connections still open, must end the server with status 0 (under ASan, LSan turns a leak
 * into a nonzero status). Then 50 clients again under the poll and the select backend. Exit 0 pass,
 * 1 fail, 77 skip.
 */
#include <cabrank/handle_set.h>

#include "../support/support.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAIN_CLIENTS    200
#define BACKEND_CLIENTS 50
#define PAYLOAD_MIN     (4 * 1024)
#define PAYLOAD_MAX     (64 * 1024)
#define ROUND_MS        20000
#define IDLE_CLIENTS    5 /* left open when the server is stopped */
/* Backpressure: a client that never reads may get this much into the
 * kernel's buffers and the server's 16 KiB before its sends block. Loopback
 * buffers that are not read do not grow, so a few MiB is the real figure. */
#define FLOOD_LIMIT (64u * 1024 * 1024)

struct client {
    int fd;
    unsigned char *payload;
    size_t size;
    size_t sent;
    size_t received;
    bool shut; /* our write side is shut down: the server sees EOF */
    bool done; /* everything came back, then EOF */
};

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void fill_payload(struct client *c, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;

    c->size = PAYLOAD_MIN + (size_t)(xorshift(&s) % (PAYLOAD_MAX - PAYLOAD_MIN + 1));
    for (size_t i = 0; i < c->size; i++)
        c->payload[i] = (unsigned char)(xorshift(&s) >> 24);
}

/* One step of a client's send side. Returns 0 or -1 (failed, said why). */
static int client_send(struct client *c, int id)
{
    ssize_t n = send(c->fd, c->payload + c->sent, c->size - c->sent, MSG_NOSIGNAL);

    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return 0;
        fprintf(stderr, "client %d: send after %zu of %zu bytes: %s\n", id, c->sent, c->size,
                strerror(errno));
        return -1;
    }
    c->sent += (size_t)n;
    if (c->sent == c->size) {
        if (shutdown(c->fd, SHUT_WR) < 0) {
            fprintf(stderr, "client %d: shutdown: %s\n", id, strerror(errno));
            return -1;
        }
        c->shut = true;
    }
    return 0;
}

/* One step of a client's receive side: checks every byte against what it
 * sent. Returns 0 or -1 (failed, said why). */
static int client_recv(struct client *c, int id)
{
    unsigned char buf[16384];
    ssize_t n = recv(c->fd, buf, sizeof(buf), 0);

    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return 0;
        fprintf(stderr, "client %d: recv after %zu of %zu bytes: %s\n", id, c->received, c->size,
                strerror(errno));
        return -1;
    }
    if (n == 0) {
        if (c->received != c->size) {
            fprintf(stderr, "client %d: EOF after %zu of %zu bytes\n", id, c->received, c->size);
            return -1;
        }
        c->done = true;
        return 0;
    }
    if (c->received + (size_t)n > c->sent) {
        fprintf(stderr, "client %d: %zu bytes back, only %zu sent\n", id, c->received + (size_t)n,
                c->sent);
        return -1;
    }
    for (size_t i = 0; i < (size_t)n; i++) {
        if (buf[i] != c->payload[c->received + i]) {
            fprintf(stderr, "client %d: byte %zu is 0x%02x, sent 0x%02x\n", id, c->received + i,
                    buf[i], c->payload[c->received + i]);
            return -1;
        }
    }
    c->received += (size_t)n;
    return 0;
}

/* All clients connected at once, then interleaved send/receive until each
 * got its payload back and then EOF. Returns 0 or -1. */
static int echo_clients(uint16_t port, int nclients, uint64_t seed, const char *label)
{
    struct client *cl = calloc((size_t)nclients, sizeof(*cl));
    struct pollfd *pfd = calloc((size_t)nclients, sizeof(*pfd));
    uint64_t start = cr_test_now_ms();
    uint64_t deadline = start + ROUND_MS;
    size_t total = 0;
    int remaining = nclients;
    int rc = -1;

    if (cl == NULL || pfd == NULL) {
        fprintf(stderr, "%s: out of memory\n", label);
        goto out;
    }
    for (int i = 0; i < nclients; i++)
        cl[i].fd = -1;
    for (int i = 0; i < nclients; i++) {
        cl[i].payload = malloc(PAYLOAD_MAX);
        if (cl[i].payload == NULL) {
            fprintf(stderr, "%s: out of memory\n", label);
            goto out;
        }
        fill_payload(&cl[i], seed + (uint64_t)i);
        total += cl[i].size;
        cl[i].fd = cr_test_connect(port);
        if (cl[i].fd < 0) {
            fprintf(stderr, "%s: connect %d: %s\n", label, i, strerror(-cl[i].fd));
            goto out;
        }
        if (cr_test_set_nonblock(cl[i].fd, true) < 0) {
            fprintf(stderr, "%s: nonblock: %s\n", label, strerror(errno));
            goto out;
        }
    }
    while (remaining > 0) {
        int n = 0;
        int ready;
        uint64_t now = cr_test_now_ms();

        if (now >= deadline) {
            fprintf(stderr, "%s: %d of %d clients unfinished after %d ms\n", label, remaining,
                    nclients, ROUND_MS);
            for (int i = 0; i < nclients; i++) {
                if (!cl[i].done)
                    fprintf(stderr, "  client %d: sent %zu, received %zu of %zu\n", i, cl[i].sent,
                            cl[i].received, cl[i].size);
            }
            goto out;
        }
        for (int i = 0; i < nclients; i++) {
            if (cl[i].done)
                continue;
            pfd[n].fd = cl[i].fd;
            pfd[n].events = (short)(POLLIN | (cl[i].shut ? 0 : POLLOUT));
            pfd[n].revents = 0;
            n++;
        }
        ready = poll(pfd, (nfds_t)n, (int)(deadline - now));
        if (ready < 0 && errno != EINTR) {
            fprintf(stderr, "%s: poll: %s\n", label, strerror(errno));
            goto out;
        }
        n = 0;
        for (int i = 0; i < nclients && ready > 0; i++) {
            struct pollfd *p;

            if (cl[i].done)
                continue;
            p = &pfd[n++];
            if (p->revents == 0)
                continue;
            if ((p->revents & POLLOUT) && !cl[i].shut && client_send(&cl[i], i) < 0)
                goto out;
            if ((p->revents & (POLLIN | POLLHUP | POLLERR)) && client_recv(&cl[i], i) < 0)
                goto out;
            if (cl[i].done)
                remaining--;
        }
    }
    fprintf(stderr, "%s: %d clients echoed %zu bytes in %llu ms\n", label, nclients, total,
            (unsigned long long)(cr_test_now_ms() - start));
    rc = 0;
out:
    if (cl != NULL) {
        for (int i = 0; i < nclients; i++) {
            if (cl[i].fd >= 0)
                close(cl[i].fd);
            free(cl[i].payload);
        }
    }
    free(cl);
    free(pfd);
    return rc;
}

/*
 * A client that sends without reading: once the server's buffer and the
 * socket buffers are full, the server must stop reading, so our sends block
 * well before FLOOD_LIMIT. Then we read everything back. Returns 0 or -1.
 */
static int check_backpressure(uint16_t port)
{
    static unsigned char chunk[65536];
    unsigned char buf[65536];
    uint64_t deadline = cr_test_now_ms() + ROUND_MS;
    uint64_t stalled_since = 0;
    size_t sent = 0;
    size_t received = 0;
    int fd;
    int rc = -1;

    for (size_t i = 0; i < sizeof(chunk); i++)
        chunk[i] = (unsigned char)(i * 7 + 3);
    fd = cr_test_connect(port);
    if (fd < 0 || cr_test_set_nonblock(fd, true) < 0) {
        fprintf(stderr, "backpressure: connect: %s\n", strerror(fd < 0 ? -fd : errno));
        goto out;
    }
    /* Stalled = no send made progress for 300 ms. */
    while (sent < FLOOD_LIMIT) {
        ssize_t n = send(fd, chunk + sent % sizeof(chunk), sizeof(chunk) - sent % sizeof(chunk),
                         MSG_NOSIGNAL);

        if (n > 0) {
            sent += (size_t)n;
            stalled_since = 0;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            fprintf(stderr, "backpressure: send: %s\n", strerror(errno));
            goto out;
        }
        if (stalled_since == 0)
            stalled_since = cr_test_now_ms();
        else if (cr_test_now_ms() - stalled_since >= 300)
            break;
        usleep(1000);
    }
    if (sent >= FLOOD_LIMIT) {
        fprintf(stderr, "backpressure: sent %zu bytes without reading and never blocked\n", sent);
        goto out;
    }
    fprintf(stderr, "backpressure: sends blocked after %zu bytes unread\n", sent);
    if (shutdown(fd, SHUT_WR) < 0)
        goto out;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        uint64_t now = cr_test_now_ms();
        ssize_t n;

        if (now >= deadline) {
            fprintf(stderr, "backpressure: %zu of %zu bytes back in time\n", received, sent);
            goto out;
        }
        if (poll(&p, 1, (int)(deadline - now)) <= 0)
            continue;
        n = recv(fd, buf, sizeof(buf), 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n < 0) {
            fprintf(stderr, "backpressure: recv: %s\n", strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != chunk[(received + (size_t)i) % sizeof(chunk)]) {
                fprintf(stderr, "backpressure: byte %zu differs\n", received + (size_t)i);
                goto out;
            }
        }
        received += (size_t)n;
    }
    if (received != sent) {
        fprintf(stderr, "backpressure: EOF after %zu of %zu bytes\n", received, sent);
        goto out;
    }
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    return rc;
}

/*
 * Opens connections that stay open across the stop, each known to be
 * accepted (one byte echoed), so the server's shutdown has connections to
 * close and free. Returns 0 or -1; the fds are in idle[] (-1 if not open).
 */
static int open_idle(uint16_t port, int idle[], int n)
{
    for (int i = 0; i < n; i++) {
        char c = 0;

        idle[i] = cr_test_connect(port);
        if (idle[i] < 0) {
            fprintf(stderr, "idle %d: connect: %s\n", i, strerror(-idle[i]));
            return -1;
        }
        if (cr_test_write_all(idle[i], "i", 1) < 0 ||
            cr_test_read_exact(idle[i], &c, 1, 5000) < 0 || c != 'i') {
            fprintf(stderr, "idle %d: no echo\n", i);
            return -1;
        }
    }
    return 0;
}

static void close_idle(int idle[], int n)
{
    for (int i = 0; i < n; i++) {
        if (idle[i] >= 0)
            close(idle[i]);
    }
}

/* Stops the server with SIGTERM; it must exit 0. Returns 0 or -1. */
static int stop_server(pid_t pid, const char *label)
{
    int status = 0;

    if (kill(pid, SIGTERM) < 0) {
        fprintf(stderr, "%s: kill: %s\n", label, strerror(errno));
        return -1;
    }
    if (cr_test_wait_exit(pid, 20000, &status) < 0) {
        fprintf(stderr, "%s: server ignored SIGTERM for 20 s\n", label);
        return -1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (WIFSIGNALED(status))
            fprintf(stderr, "%s: server died of signal %d\n", label, WTERMSIG(status));
        else
            fprintf(stderr, "%s: server exited with %d\n", label, WEXITSTATUS(status));
        return -1;
    }
    return 0;
}

/* One server run: start, echo nclients, maybe flood, stop. 0, -1, or 77
 * when the backend is not built. */
static int run_round(const char *path, const char *backend, int nclients, bool flood)
{
    char *argv[] = {(char *)path, "--listen", "127.0.0.1:0", NULL, NULL, NULL};
    char label[64];
    int idle[IDLE_CLIENTS];
    uint16_t port = 0;
    pid_t pid;
    int err;
    int rc;

    for (int i = 0; i < IDLE_CLIENTS; i++)
        idle[i] = -1;
    snprintf(label, sizeof(label), "%s", backend != NULL ? backend : "default backend");
    if (backend != NULL) {
        struct cr_handle_set *hs;

        err = cr_handle_set_open(&hs, backend);
        if (err == -ENOSYS) {
            fprintf(stderr, "%s: not available here; round skipped\n", label);
            return 77;
        }
        cr_handle_set_close(hs);
        argv[3] = "--backend";
        argv[4] = (char *)backend;
    }
    err = cr_test_spawn_server(argv, &pid, &port, 20000);
    if (err < 0) {
        fprintf(stderr, "%s: starting %s: %s\n", label, path, strerror(-err));
        return -1;
    }
    rc = echo_clients(port, nclients, (uint64_t)nclients * 1000 + (uint64_t)port, label);
    if (rc == 0 && flood)
        rc = check_backpressure(port);
    if (rc == 0)
        rc = open_idle(port, idle, IDLE_CLIENTS);
    if (rc < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    } else {
        rc = stop_server(pid, label);
    }
    close_idle(idle, IDLE_CLIENTS);
    return rc;
}

int main(void)
{
    char path[4096];
    static const char *const backends[] = {"poll", "select"};
    int failed = 0;

    cr_test_build_path("examples/reactor_echo", path, sizeof(path));
    if (access(path, X_OK) < 0) {
        fprintf(stderr, "reactor_echo: %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (run_round(path, NULL, MAIN_CLIENTS, true) != 0)
        failed++;
    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
        int rc = run_round(path, backends[i], BACKEND_CLIENTS, false);

        if (rc != 0 && rc != 77)
            failed++;
    }
    if (failed != 0) {
        fprintf(stderr, "reactor_echo: %d round(s) failed\n", failed);
        return 1;
    }
    return 0;
}
