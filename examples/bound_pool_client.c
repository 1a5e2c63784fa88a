/*
 * bound_pool_client.c - many client threads share one multiplexed
 * connection through the bound Leader/Followers pool (cr_bound_pool,
 * standalone mode). Each thread sends framed requests and waits for the reply
 * with its own id: whichever waiting thread leads reads the replies and hands
 * each to the thread that waits for it. Frames are an 8-byte id, a 4-byte
 * length and the payload; the back end returns each frame as it came, so an
 * echo server serves (server_echo), or without --connect a thread of this
 * program echoing on a socket pair.
 *
 * Prints "N replies, H handed off" and exits 0 when every reply matched its
 * request, 1 otherwise.
 *
 * Build: cc -O2 examples/bound_pool_client.c -o bound_pool_client $(pkg-config --cflags --libs
 * cabrank) Run:   bound_pool_client [--connect 127.0.0.1:8080] [--threads 8] [--calls 100]
 */
#include <cabrank/bound_pool.h>
#include <cabrank/listener.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PROG       "bound_pool_client"
#define HEAD       12 /* id (8) + payload length (4) */
#define MAX_FRAME  256
#define TIMEOUT_MS 10000

struct client {
    struct cr_bound_pool *pool;
    unsigned idx;
    unsigned calls;
    unsigned failed;
    pthread_t thread;
};

/* Splits one reply frame off buf. */
static ssize_t decode(void *arg, const char *buf, size_t len, uint64_t *id, const char **payload,
                      size_t *payload_len)
{
    uint32_t n;

    CR_UNUSED(arg);
    if (len < HEAD)
        return -EAGAIN;
    memcpy(id, buf, 8);
    memcpy(&n, buf + 8, 4);
    if (n > MAX_FRAME - HEAD)
        return -EBADMSG;
    if (len < HEAD + n)
        return -EAGAIN;
    *payload = buf + HEAD;
    *payload_len = n;
    return (ssize_t)(HEAD + n);
}

static void *client_main(void *arg)
{
    struct client *cl = arg;
    struct cr_bound_ctx ctx;
    char req[MAX_FRAME];
    char reply[MAX_FRAME];

    if (cr_bound_ctx_init(&ctx) < 0) {
        cl->failed = cl->calls;
        return NULL;
    }
    for (unsigned k = 0; k < cl->calls; k++) {
        uint64_t id = cr_bound_pool_next_id(cl->pool);
        int n = snprintf(req + HEAD, sizeof(req) - HEAD, "thread %u call %u", cl->idx, k);
        uint32_t len = (uint32_t)n;
        ssize_t got;

        memcpy(req, &id, 8);
        memcpy(req + 8, &len, 4);
        got = cr_bound_pool_call(cl->pool, &ctx, id, req, HEAD + len, reply, sizeof(reply),
                                 TIMEOUT_MS);
        if (got != (ssize_t)len || memcmp(reply, req + HEAD, len) != 0) {
            fprintf(stderr, PROG ": thread %u call %u: %s\n", cl->idx, k,
                    got < 0 ? strerror((int)-got) : "wrong reply");
            cl->failed++;
        }
    }
    cr_bound_ctx_fini(&ctx);
    return NULL;
}

/* The back end without --connect: echoes one end of a socket pair. */
static void *echo_main(void *arg)
{
    int fd = *(int *)arg;
    char buf[4096];
    ssize_t n;

    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
        for (ssize_t off = 0, w; off < n; off += w) {
            w = send(fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
            if (w < 0)
                return NULL;
        }
    }
    return NULL;
}

static int connect_to(const char *address)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int fd;
    int err = cr_listener_parse(address, &ss, &len);

    if (err < 0)
        return err;
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
        err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

int main(int argc, char **argv)
{
    struct cr_bound_pool_config cfg = {.decode = decode};
    struct cr_bound_pool_stats st;
    struct cr_bound_pool *pool;
    struct client *cl;
    const char *target = NULL;
    unsigned threads = 8;
    unsigned calls = 100;
    unsigned failed = 0;
    pthread_t echo;
    int pair[2] = {-1, -1};
    int fd;
    int err;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--connect") == 0) {
            target = argv[i + 1];
        } else if (strcmp(argv[i], "--threads") == 0) {
            threads = (unsigned)atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--calls") == 0) {
            calls = (unsigned)atoi(argv[i + 1]);
        } else {
            fprintf(stderr, "usage: " PROG " [--connect ADDR] [--threads N] [--calls N]\n");
            return 2;
        }
    }
    if (target != NULL) {
        fd = connect_to(target);
    } else if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0) {
        fd = -errno;
    } else {
        fd = pair[0];
        err = pthread_create(&echo, NULL, echo_main, &pair[1]);
        if (err != 0) {
            close(pair[0]);
            close(pair[1]);
            fd = -err;
        }
    }
    if (fd < 0) {
        fprintf(stderr, PROG ": %s: %s\n", target ? target : "socketpair", strerror(-fd));
        return EXIT_FAILURE;
    }
    cl = calloc(threads, sizeof(*cl));
    err = cl == NULL ? -ENOMEM : cr_bound_pool_create(&pool, &cfg);
    if (err == 0) {
        err = cr_bound_pool_attach(pool, fd);
        if (err < 0)
            cr_bound_pool_destroy(pool);
    }
    if (err < 0) {
        fprintf(stderr, PROG ": %s\n", strerror(-err));
        close(fd);
        failed = 1;
        goto out_echo;
    }
    for (unsigned i = 0; i < threads; i++) {
        cl[i] = (struct client){.pool = pool, .idx = i, .calls = calls};
        if (pthread_create(&cl[i].thread, NULL, client_main, &cl[i]) != 0) {
            cl[i].calls = 0;
            cl[i].failed = 1;
        }
    }
    for (unsigned i = 0; i < threads; i++) {
        if (cl[i].calls > 0)
            pthread_join(cl[i].thread, NULL);
        failed += cl[i].failed;
    }
    cr_bound_pool_stats(pool, &st);
    printf("%" PRIu64 " replies, %" PRIu64 " handed off\n", st.delivered, st.handed_off);
    cr_bound_pool_destroy(pool); /* closes fd; the echo thread sees EOF */
out_echo:
    if (pair[1] >= 0) {
        pthread_join(echo, NULL);
        close(pair[1]);
    }
    free(cl);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
