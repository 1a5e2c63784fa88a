/*
 * canned.c - the canned responders' shared half (canned.h): the hidden mode's entry
 * (cabrank-bench --canned MODE --listen ADDR), the listening socket, the TERM/INT signalfd,
 * the request scanner and the answer bytes, and the lab's availability check. The backends
 * (canned_epoll.c, canned_uring.c) serve the connections. Runs on the responder process's one
 * thread, or on the lab's for bench_canned_available(); the answers are static constants.
 */
#include "canned.h"

#include <cabrank/listener.h>

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_FDS 65536

/* The answer to every request, and the one that ends a connection that asked to close. */
#define KEEP_ALIVE                                                                                 \
    "HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n\r\nHello, world\n"
#define CLOSE                                                                                      \
    "HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\nConnection: "            \
    "close\r\n\r\nHello, world\n"
#define KEEP_ALIVE_LEN (sizeof(KEEP_ALIVE) - 1)
#define CLOSE_LEN      (sizeof(CLOSE) - 1)

/* 64 keep-alive answers back to back, built by the compiler: a pipelined burst of requests is
 * answered by one send from any offset in the answer. */
#define TIMES4(s) s s s s
static const char burst[] = TIMES4(TIMES4(TIMES4(KEEP_ALIVE)));
static const char close_answer[] = CLOSE;
#define BURST_LEN (sizeof(burst) - 1)

const char *const bench_canned_names[] = {"canned-epoll", "canned-uring", NULL};

/* ------------------------------------------------------------ scanner and answers */

static const char conn_name[] = "\nconnection:";
#define NAME_LEN  (sizeof(conn_name) - 1)
#define CLOSE_TOK "close"

unsigned bench__canned_scan(struct bench_canned_scan *s, const char *buf, size_t len, bool *close)
{
    unsigned heads = 0;
    unsigned term = s->term;
    unsigned name = s->name;
    unsigned value = s->value;
    bool asked = s->close;

    *close = false;
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        /* Lower case for letters. '\n' is matched before this is used, and ':' has the bit
         * already (so 0x1a passes for it too: harmless for a floor). */
        char lc = (char)(c | 0x20);

        /* A stray '\r' inside "\r\n\r\n" starts the match again rather than ending it. */
        if (c == "\r\n\r\n"[term]) {
            if (++term == 4) {
                heads++;
                term = 0;
                name = 0;
                value = 0;
                if (asked) {
                    *close = true;
                    break;
                }
                continue;
            }
        } else {
            term = c == '\r';
        }
        /* A header line starts after '\n'; a request line never matches "connection:". */
        if (c == '\n') {
            name = 1;
            value = 0;
            continue;
        }
        if (name < NAME_LEN) {
            name = lc == conn_name[name] ? name + 1 : 0;
            continue;
        }
        /* "close" has no prefix that is also its suffix: a mismatch restarts at 'c' or 0. */
        if (value < sizeof(CLOSE_TOK) - 1) {
            value = lc == CLOSE_TOK[value] ? value + 1 : lc == 'c';
            asked = asked || value == sizeof(CLOSE_TOK) - 1;
        }
    }
    s->term = (uint8_t)term;
    s->name = (uint8_t)name;
    s->value = (uint8_t)value;
    s->close = asked && !*close;
    return heads;
}

void bench__canned_owe(struct bench_canned_out *o, unsigned answers, bool close)
{
    /* After a close answer the scanner looks at nothing more: bench__canned_next() relies on
     * owed not growing under a close answer in flight. */
    assert(o->close_left == 0);
    if (answers == 0)
        return;
    if (close) {
        answers--;
        o->close_left = CLOSE_LEN;
    }
    o->owed += (uint64_t)answers * KEEP_ALIVE_LEN;
}

size_t bench__canned_next(const struct bench_canned_out *o, const void **buf)
{
    if (o->owed > 0) {
        size_t n = BURST_LEN - o->pos;

        if (n > o->owed)
            n = (size_t)o->owed;
        *buf = burst + o->pos;
        return n;
    }
    if (o->close_left > 0) {
        *buf = close_answer + (CLOSE_LEN - o->close_left);
        return o->close_left;
    }
    *buf = NULL;
    return 0;
}

void bench__canned_sent(struct bench_canned_out *o, size_t n)
{
    /* owed only grows between next and sent, so a keep-alive chunk still finds it non-zero. */
    if (o->owed > 0) {
        assert(n <= o->owed);
        o->owed -= n;
        o->pos = (o->pos + n) % KEEP_ALIVE_LEN;
        return;
    }
    assert(n <= o->close_left);
    o->close_left -= n;
}

size_t bench__canned_max_fds(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > MAX_FDS)
        return MAX_FDS;
    return (size_t)rl.rlim_cur;
}

/* ------------------------------------------------------------ the lab's side */

static const struct bench_canned_ops *ops_of(const char *mode)
{
    if (strcmp(mode, "epoll") == 0)
        return &bench__canned_epoll_ops;
#ifdef CR_HAVE_LIBURING
    if (strcmp(mode, "uring") == 0)
        return &bench__canned_uring_ops;
#endif /* CR_HAVE_LIBURING */
    return NULL;
}

/* Whether mode names a backend, built in or not. */
static bool is_mode(const char *mode)
{
    return strcmp(mode, "epoll") == 0 || strcmp(mode, "uring") == 0;
}

bool bench_is_canned(const char *name)
{
    for (int i = 0; bench_canned_names[i] != NULL; i++) {
        if (strcmp(bench_canned_names[i], name) == 0)
            return true;
    }
    return false;
}

/* The backend's probe; false with why filled when the mode cannot run here. */
static bool probe_mode(const char *mode, char *why, size_t cap)
{
    const struct bench_canned_ops *ops = ops_of(mode);

    if (ops == NULL) {
        snprintf(why, cap, "cabrank-bench was built without liburing");
        return false;
    }
    return ops->probe(why, cap) == 0;
}

bool bench_canned_available(const char *name, char *why, size_t cap)
{
    if (!bench_is_canned(name)) {
        snprintf(why, cap, "no such canned peer");
        return false;
    }
    return probe_mode(name + strlen("canned-"), why, cap);
}

/* ------------------------------------------------------------ the hidden mode */

/* A canned responder answers anything, so it listens on IPv4 loopback only. */
static bool is_loopback(const char *addr)
{
    struct sockaddr_storage ss;
    socklen_t len;

    if (cr_listener_parse(addr, &ss, &len) < 0 || ss.ss_family != AF_INET)
        return false;
    return ntohl(((const struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24 == 127;
}

/*
 * The library's listener (non-blocking, TCP_NODELAY inherited by accepted sockets, which
 * saves a setsockopt per connection) with TCP_DEFER_ACCEPT: accept completes only once the
 * request is there, so a Connection: close request costs accept, read, write, close.
 * Keep-alive connections pay it once.
 */
static int open_listener(const char *addr, int *fd)
{
    struct cr_listener_config lc = {.address = addr, .backlog = 4096, .defer_accept_s = 1};

    return cr_listener_open(fd, &lc);
}

/* TERM and INT, blocked and read from a descriptor the backends wait on with everything else:
 * no handler, so no window between checking a flag and going to sleep. */
static int open_signalfd(void)
{
    sigset_t set;
    int fd;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -errno;
    fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

static int usage(void)
{
    fprintf(stderr, "usage: cabrank-bench --canned epoll|uring --listen 127.0.0.1:PORT\n");
    return 2;
}

int bench_canned_main(int argc, char **argv)
{
    const struct bench_canned_ops *ops;
    const char *mode = NULL;
    const char *addr = NULL;
    char bound[64];
    char why[256];
    int lfd = -1;
    int sfd;
    int err;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--canned") == 0)
            mode = argv[i + 1];
        else if (strcmp(argv[i], "--listen") == 0)
            addr = argv[i + 1];
        else
            return usage();
    }
    if (argc % 2 == 0 || mode == NULL || addr == NULL || !is_mode(mode) || !is_loopback(addr))
        return usage();
    if (!probe_mode(mode, why, sizeof(why))) {
        fprintf(stderr, "cabrank-bench: canned-%s: not available: %s\n", mode, why);
        return 3;
    }
    ops = ops_of(mode);
    signal(SIGPIPE, SIG_IGN);
    sfd = open_signalfd();
    if (sfd < 0) {
        fprintf(stderr, "cabrank-bench: canned-%s: signalfd: %s\n", mode, strerror(-sfd));
        return 1;
    }
    err = open_listener(addr, &lfd);
    if (err == 0)
        err = cr_listener_address(lfd, bound, sizeof(bound));
    if (err < 0) {
        fprintf(stderr, "cabrank-bench: canned-%s: listen on %s: %s\n", mode, addr, strerror(-err));
        if (lfd >= 0)
            close(lfd);
        close(sfd);
        return 1;
    }
    /* The lab's readiness line (run_server.c reads "listening on <addr>:<port>"). */
    printf("canned-%s listening on %s\n", mode, bound);
    fflush(stdout);
    err = ops->serve(lfd, sfd);
    if (err < 0)
        fprintf(stderr, "cabrank-bench: canned-%s: %s\n", mode, strerror(-err));
    close(lfd);
    close(sfd);
    return err < 0 ? 1 : 0;
}
