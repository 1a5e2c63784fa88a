/*
 * intervals.c - the response-time intervals of the pattern paper
 * (../shared/papers/request-processing-server-patterns.txt, section 1.2) for
 * cabrank-httpd under each model, seen from the client:
 *   t_conn   from connect() until the connection is established;
 *   t_res1   from sending the first request on a new connection until its
 *            whole response has arrived;
 *   t_res2+  the same for each further request on that keep-alive connection.
 * For every model it starts the server (its own process, on 127.0.0.1:0,
 * serving one small file from a temporary root), then runs N clients one
 * after another: connect, GET the file, GET it again k times, close. It
 * prints p50 and p99 of each interval per model in a Markdown table, their
 * ratios to lf, and the exact command. Not a test: the figures vary with the
 * machine, so compare models within one run.
 *
 * On Linux the kernel completes the handshake before the server calls
 * accept(), so t_conn shows the listen queue, not the model; what a model
 * spends to take a new connection (the paper's t_1 + t_2 + t_3: accept, a
 * fork, a handover to a worker) shows in t_res1 - t_res2+.
 *
 * Usage: intervals [--models a,b,...] [--clients N] [--requests K]
 *                  [--size BYTES] [--seconds S] [--threads N]
 *                  [--httpd-arg ARG]... [HTTPD]
 * HTTPD defaults to cabrank-httpd beside the bench directory of this program
 * ($(BUILD)/cabrank-httpd), else build/cabrank-httpd; the models default to
 * those its --help lists. A model the server refuses is skipped with a note.
 * Single-threaded; children: the servers (stopped with TERM, then KILL).
 */
#include <cabrank/clock.h>

#include "support.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_MODELS   16
#define MAX_ARGS     32
#define WARMUP       20 /* clients per model not measured */
#define IO_TIMEOUT_S 5  /* a client gives up on a silent server */
#define RESP_MAX     (1 << 20)

struct options {
    const char *httpd;
    char httpd_buf[PATH_MAX];
    const char *models[MAX_MODELS];
    int nmodels;
    int clients;
    int requests; /* k: requests after the first on each connection */
    size_t size;
    double seconds; /* per model, at most */
    int threads;    /* 0: the server's default */
    const char *extra[MAX_ARGS];
    int nextra;
};

struct pcts {
    double p50_us;
    double p99_us;
};

struct result {
    const char *model;
    bool ok;
    char note[160];
    int clients; /* measured */
    struct pcts conn;
    struct pcts res1;
    struct pcts res2;
};

/* Sample storage of one model's run. */
struct samples {
    uint64_t *conn;
    uint64_t *res1;
    uint64_t *res2;
    size_t nconn;
    size_t nres2;
};

static void die(const char *what)
{
    fprintf(stderr, "intervals: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* ------------------------------------------------------------ the models */

/* Runs argv, returns its stdout (up to cap - 1 bytes, NUL-terminated). */
static bool capture(char *const argv[], char *out, size_t cap)
{
    int pfd[2];
    size_t used = 0;
    pid_t pid;
    int status;

    if (pipe2(pfd, O_CLOEXEC) < 0)
        die("pipe2");
    pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        dup2(pfd[1], STDOUT_FILENO);
        execv(argv[0], argv);
        _exit(127);
    }
    close(pfd[1]);
    for (;;) {
        ssize_t n = read(pfd[0], out + used, cap - 1 - used);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        used += (size_t)n;
        if (used == cap - 1)
            break;
    }
    out[used] = '\0';
    close(pfd[0]);
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && used > 0;
}

/*
 * The models `httpd --help` lists on its --model line, e.g.
 * "  --model NAME   reactor, lf, hshr or tpc (default lf)": the words up to
 * the "(", continued on indented lines until one has it.
 */
static void models_from_help(struct options *o)
{
    static char help[65536];
    char *argv[] = {(char *)o->httpd, "--help", NULL};
    char *p;
    char *end;

    if (!capture(argv, help, sizeof(help)) || (p = strstr(help, "--model NAME")) == NULL) {
        fprintf(stderr, "intervals: %s --help lists no models\n", o->httpd);
        exit(1);
    }
    p += strlen("--model NAME");
    /* Not past the next option's line. */
    end = strstr(p, "\n  --");
    if (end != NULL)
        *end = '\0';
    while (*p != '\0' && *p != '(' && o->nmodels < MAX_MODELS) {
        char *w;

        if (!islower((unsigned char)*p)) {
            p++;
            continue;
        }
        w = p;
        while (isalnum((unsigned char)*p) || *p == '-' || *p == '_')
            p++;
        if (*p != '\0')
            *p++ = '\0';
        if (strcmp(w, "or") != 0 && strcmp(w, "and") != 0)
            o->models[o->nmodels++] = w;
    }
    if (o->nmodels == 0) {
        fprintf(stderr, "intervals: no models on the --model line of %s --help\n", o->httpd);
        exit(1);
    }
}

/* ------------------------------------------------------------ the server */

static pid_t start_server(const struct options *o, const char *model, const char *root,
                          uint16_t *port)
{
    char *argv[16 + MAX_ARGS];
    char threads[16];
    int n = 0;
    pid_t pid;
    int err;

    argv[n++] = (char *)o->httpd;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--root";
    argv[n++] = (char *)root;
    argv[n++] = "--model";
    argv[n++] = (char *)model;
    argv[n++] = "--log-level";
    argv[n++] = "warn";
    argv[n++] = "--status-path";
    argv[n++] = "off";
    if (o->threads > 0) {
        snprintf(threads, sizeof(threads), "%d", o->threads);
        argv[n++] = "--threads";
        argv[n++] = threads;
    }
    for (int i = 0; i < o->nextra; i++)
        argv[n++] = (char *)o->extra[i];
    argv[n] = NULL;
    err = cr_test_spawn_server(argv, &pid, port, 5000);
    if (err < 0)
        return -1;
    return pid;
}

static void stop_server(pid_t pid)
{
    int status;

    kill(pid, SIGTERM);
    if (cr_test_wait_exit(pid, 5000, &status) < 0)
        fprintf(stderr, "intervals: server %d killed after 5 s\n", (int)pid);
}

/* ------------------------------------------------------------ a client */

static int connect_to(uint16_t port, uint64_t *t_conn)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    uint64_t t0;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        die("socket");
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
        die("setsockopt");
    t0 = cr_clock_now_ns();
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int err = -errno;

        close(fd);
        return err;
    }
    *t_conn = cr_clock_now_ns() - t0;
    return fd;
}

/* Content-Length of a response head (head[0..len) ends with CRLFCRLF); -1 if none. */
static long long content_length(const char *head, size_t len)
{
    static const char name[] = "\r\ncontent-length:";
    size_t nlen = sizeof(name) - 1;

    for (size_t i = 0; i + nlen <= len; i++) {
        if (strncasecmp(head + i, name, nlen) == 0) {
            const char *p = head + i + nlen;

            while (*p == ' ' || *p == '\t')
                p++;
            return isdigit((unsigned char)*p) ? strtoll(p, NULL, 10) : -1;
        }
    }
    return -1;
}

/* Sends one GET and reads its whole response; the time it took in *t. A
 * reason on failure, NULL on success. */
static const char *get(int fd, const char *req, size_t reqlen, size_t want, char *buf, uint64_t *t)
{
    uint64_t t0 = cr_clock_now_ns();
    size_t used = 0;
    size_t head = 0;
    long long clen = -1;

    if (send(fd, req, reqlen, MSG_NOSIGNAL) != (ssize_t)reqlen)
        return "send failed";
    for (;;) {
        ssize_t n;

        if (head > 0 && used >= head + (size_t)clen)
            break;
        if (used == RESP_MAX)
            return "response too long";
        n = recv(fd, buf + used, RESP_MAX - used, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN ? "timed out" : "recv failed";
        if (n == 0)
            return "closed by the server";
        used += (size_t)n;
        if (head == 0) {
            char *end = memmem(buf, used, "\r\n\r\n", 4);

            if (end == NULL)
                continue;
            head = (size_t)(end + 4 - buf);
            if (used < 12 || memcmp(buf + 9, "200", 3) != 0)
                return "status not 200";
            clen = content_length(buf, head);
            if (clen < 0 || (size_t)clen != want)
                return "wrong Content-Length";
        }
    }
    *t = cr_clock_now_ns() - t0;
    return used == head + (size_t)clen ? NULL : "bytes beyond the response";
}

/* One client: connect, GET, k more GETs, close. Records its samples when s
 * is not NULL. A reason on failure, NULL on success. */
static const char *run_client(const struct options *o, uint16_t port, char *buf, struct samples *s)
{
    static const char req[] = "GET /f HTTP/1.1\r\nHost: bench\r\n\r\n";
    uint64_t t_conn = 0;
    uint64_t t;
    const char *why;
    int fd = connect_to(port, &t_conn);

    if (fd < 0)
        return "connect failed";
    why = get(fd, req, sizeof(req) - 1, o->size, buf, &t);
    if (why != NULL)
        goto out;
    if (s != NULL) {
        s->conn[s->nconn] = t_conn;
        s->res1[s->nconn] = t;
    }
    for (int j = 0; j < o->requests; j++) {
        why = get(fd, req, sizeof(req) - 1, o->size, buf, &t);
        if (why != NULL)
            goto out;
        if (s != NULL)
            s->res2[s->nres2 + (size_t)j] = t;
    }
    if (s != NULL) {
        s->nconn++;
        s->nres2 += (size_t)o->requests;
    }
out:
    close(fd);
    return why;
}

/* ------------------------------------------------------------ figures */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static struct pcts percentiles(uint64_t *v, size_t n)
{
    struct pcts r = {0};

    if (n == 0)
        return r;
    qsort(v, n, sizeof(*v), cmp_u64);
    r.p50_us = (double)v[n / 2] / 1e3;
    r.p99_us = (double)v[n * 99 / 100 < n ? n * 99 / 100 : n - 1] / 1e3;
    return r;
}

static void measure(const struct options *o, const char *model, const char *root, char *buf,
                    struct result *r)
{
    struct samples s = {0};
    uint16_t port;
    pid_t pid;
    uint64_t end;
    const char *why = NULL;

    memset(r, 0, sizeof(*r));
    r->model = model;
    pid = start_server(o, model, root, &port);
    if (pid < 0) {
        snprintf(r->note, sizeof(r->note), "skipped: the server refused it (its stderr above)");
        return;
    }
    s.conn = calloc((size_t)o->clients, sizeof(*s.conn));
    s.res1 = calloc((size_t)o->clients, sizeof(*s.res1));
    s.res2 =
        calloc((size_t)o->clients * (size_t)(o->requests > 0 ? o->requests : 1), sizeof(*s.res2));
    if (s.conn == NULL || s.res1 == NULL || s.res2 == NULL)
        die("calloc");
    /* Warm up: workers started, the file in the server's cache. */
    for (int i = 0; i < WARMUP && why == NULL; i++)
        why = run_client(o, port, buf, NULL);
    end = cr_clock_now_ns() + (uint64_t)(o->seconds * 1e9);
    while (why == NULL && s.nconn < (size_t)o->clients && cr_clock_now_ns() < end)
        why = run_client(o, port, buf, &s);
    stop_server(pid);
    if (why != NULL) {
        snprintf(r->note, sizeof(r->note), "failed after %zu clients: %s", s.nconn, why);
    } else {
        r->ok = s.nconn > 0;
        r->clients = (int)s.nconn;
        r->conn = percentiles(s.conn, s.nconn);
        r->res1 = percentiles(s.res1, s.nconn);
        r->res2 = percentiles(s.res2, s.nres2);
        if (s.nconn < (size_t)o->clients)
            snprintf(r->note, sizeof(r->note), "%zu clients within %.0f s", s.nconn, o->seconds);
    }
    free(s.conn);
    free(s.res1);
    free(s.res2);
}

/* ------------------------------------------------------------ the root */

static void make_root(char *dir, size_t size)
{
    char path[PATH_MAX];
    char *data = malloc(size > 0 ? size : 1);
    int fd;

    if (mkdtemp(dir) == NULL)
        die("mkdtemp");
    snprintf(path, sizeof(path), "%s/f", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || data == NULL)
        die("create the file");
    for (size_t i = 0; i < size; i++)
        data[i] = (char)('a' + i % 26);
    if (cr_test_write_all(fd, data, size) < 0)
        die("write the file");
    close(fd);
    free(data);
}

static void remove_root(const char *dir)
{
    char path[PATH_MAX];

    snprintf(path, sizeof(path), "%s/f", dir);
    unlink(path);
    rmdir(dir);
}

/* ------------------------------------------------------------ main */

static void usage(FILE *f)
{
    fprintf(f, "usage: intervals [--models a,b,...] [--clients N] [--requests K] [--size BYTES]\n"
               "                 [--seconds S] [--threads N] [--httpd-arg ARG]... [HTTPD]\n");
}

/* $(BUILD)/cabrank-httpd when this is $(BUILD)/bench/intervals. */
static void default_httpd(struct options *o)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    char *slash;

    o->httpd = "build/cabrank-httpd";
    if (n <= 0)
        return;
    self[n] = '\0';
    slash = strrchr(self, '/');
    if (slash == NULL)
        return;
    *slash = '\0';
    if (snprintf(o->httpd_buf, sizeof(o->httpd_buf), "%.*s/../cabrank-httpd", PATH_MAX - 32, self) <
            (int)sizeof(o->httpd_buf) &&
        access(o->httpd_buf, X_OK) == 0)
        o->httpd = o->httpd_buf;
}

static void parse_args(struct options *o, int argc, char **argv)
{
    static char models[512];

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        } else if (v != NULL && strcmp(a, "--models") == 0) {
            char *save = NULL;

            snprintf(models, sizeof(models), "%s", v);
            for (char *t = strtok_r(models, ",", &save); t && o->nmodels < MAX_MODELS;
                 t = strtok_r(NULL, ",", &save))
                o->models[o->nmodels++] = t;
            i++;
        } else if (v != NULL && strcmp(a, "--clients") == 0) {
            o->clients = atoi(v);
            i++;
        } else if (v != NULL && strcmp(a, "--requests") == 0) {
            o->requests = atoi(v);
            i++;
        } else if (v != NULL && strcmp(a, "--size") == 0) {
            o->size = (size_t)atol(v);
            i++;
        } else if (v != NULL && strcmp(a, "--seconds") == 0) {
            o->seconds = atof(v);
            i++;
        } else if (v != NULL && strcmp(a, "--threads") == 0) {
            o->threads = atoi(v);
            i++;
        } else if (v != NULL && strcmp(a, "--httpd-arg") == 0 && o->nextra < MAX_ARGS) {
            o->extra[o->nextra++] = v;
            i++;
        } else if (a[0] != '-' && o->httpd == NULL) {
            o->httpd = a;
        } else {
            fprintf(stderr, "intervals: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            exit(2);
        }
    }
    if (o->clients <= 0 || o->requests < 0 || o->seconds <= 0 || o->threads < 0 ||
        o->size > RESP_MAX / 2) {
        fprintf(stderr,
                "intervals: --clients > 0, --requests >= 0, --seconds > 0, "
                "--threads >= 0, --size <= %d\n",
                RESP_MAX / 2);
        exit(2);
    }
}

static const struct result *find_lf(const struct result *res, int n)
{
    for (int i = 0; i < n; i++) {
        if (res[i].ok && strcmp(res[i].model, "lf") == 0)
            return &res[i];
    }
    return NULL;
}

static void print_ratio(double x, double lf)
{
    if (lf > 0)
        printf(" %.2f |", x / lf);
    else
        printf(" - |");
}

int main(int argc, char **argv)
{
    struct options o = {.clients = 2000, .requests = 4, .size = 512, .seconds = 6};
    struct result res[MAX_MODELS];
    char root[] = "/tmp/cr-intervals-XXXXXX";
    const struct result *lf;
    char *buf;

    signal(SIGPIPE, SIG_IGN);
    parse_args(&o, argc, argv);
    if (o.httpd == NULL)
        default_httpd(&o);
    if (access(o.httpd, X_OK) != 0) {
        fprintf(stderr, "intervals: %s: %s (build it, or give its path)\n", o.httpd,
                strerror(errno));
        return 1;
    }
    if (o.nmodels == 0)
        models_from_help(&o);
    buf = malloc(RESP_MAX);
    if (buf == NULL)
        die("malloc");
    make_root(root, o.size);

    printf("# bench/intervals:");
    for (int i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\n# %s on 127.0.0.1, %ld CPUs; per model %d sequential clients (at most %.0f s) "
           "after %d warm-up ones, each: connect, GET a %zu-byte file, %d more GETs on the "
           "keep-alive connection, close;",
           o.httpd, sysconf(_SC_NPROCESSORS_ONLN), o.clients, o.seconds, WARMUP, o.size,
           o.requests);
    if (o.threads > 0)
        printf(" --threads %d;", o.threads);
    for (int i = 0; i < o.nextra; i++)
        printf(" %s", o.extra[i]);
    printf(" times in µs\n\n");
    fflush(stdout);

    for (int i = 0; i < o.nmodels; i++)
        measure(&o, o.models[i], root, buf, &res[i]);
    remove_root(root);
    free(buf);

    printf("| model | clients | t_conn p50 | t_conn p99 | t_res1 p50 | t_res1 p99 | "
           "t_res2+ p50 | t_res2+ p99 |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < o.nmodels; i++) {
        const struct result *r = &res[i];

        if (!r->ok) {
            printf("| %s | %s | | | | | | |\n", r->model, r->note);
            continue;
        }
        printf("| %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", r->model, r->clients,
               r->conn.p50_us, r->conn.p99_us, r->res1.p50_us, r->res1.p99_us, r->res2.p50_us,
               r->res2.p99_us);
    }
    for (int i = 0; i < o.nmodels; i++) {
        if (res[i].ok && res[i].note[0] != '\0')
            printf("\n%s: %s", res[i].model, res[i].note);
    }

    lf = find_lf(res, o.nmodels);
    if (lf == NULL) {
        printf("\n\nNo ratios: lf was not measured.\n");
        return 0;
    }
    printf("\n\nRatios to lf (1.00 = as lf; above: slower):\n\n");
    printf("| model | t_conn p50 | t_conn p99 | t_res1 p50 | t_res1 p99 | t_res2+ p50 | "
           "t_res2+ p99 |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < o.nmodels; i++) {
        const struct result *r = &res[i];

        if (!r->ok)
            continue;
        printf("| %s |", r->model);
        print_ratio(r->conn.p50_us, lf->conn.p50_us);
        print_ratio(r->conn.p99_us, lf->conn.p99_us);
        print_ratio(r->res1.p50_us, lf->res1.p50_us);
        print_ratio(r->res1.p99_us, lf->res1.p99_us);
        print_ratio(r->res2.p50_us, lf->res2.p50_us);
        print_ratio(r->res2.p99_us, lf->res2.p99_us);
        printf("\n");
    }
    printf("\n");
    return 0;
}
