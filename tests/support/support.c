/*
 * support.c - see support.h. Test code: failures are returned to the caller,
 * which asserts on them.
 */
#include "support.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

bool cr_test_read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return false;
    n = read(fd, buf, cap - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return true;
}

static int rmtree_err;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    if (remove(path) < 0 && rmtree_err == 0)
        rmtree_err = -errno;
    return 0; /* on with the rest */
}

int cr_test_rmtree(const char *dir)
{
    /* Test processes are single-threaded where they clean up; nftw has no
     * argument to carry the error in. */
    rmtree_err = 0;
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) < 0)
        return -errno;
    return rmtree_err;
}

char *cr_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    long n;

    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        }
        if (buf != NULL) {
            buf[n] = '\0';
            if (len != NULL)
                *len = (size_t)n;
        }
    }
    fclose(f);
    return buf;
}

int cr_test_split_csv(char *line, char **f, int max)
{
    int n = 0;

    f[n++] = line;
    for (char *p = line; *p; p++) {
        if (*p == ',') {
            *p = '\0';
            if (n == max)
                return max + 1;
            f[n++] = p + 1;
        }
    }
    return n;
}

double cr_test_number(const char *s)
{
    char *end;
    double v = strtod(s, &end);

    return end == s || *end != '\0' ? -1 : v;
}

int cr_test_csv_rows(const char *path, const char *header, int nfields,
                     void (*row)(char **f, void *arg), void *arg, char *why, size_t cap)
{
    char *text = cr_test_read_file(path, NULL);
    char *save = NULL;
    char *line;
    int rows = 0;

    if (text == NULL) {
        snprintf(why, cap, "cannot read %s", path);
        return -1;
    }
    line = strtok_r(text, "\n", &save);
    if (line == NULL || strcmp(line, header) != 0) {
        snprintf(why, cap, "%s: header is '%s'", path, line != NULL ? line : "");
        free(text);
        return -1;
    }
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        char *f[33];
        int n = cr_test_split_csv(line, f, nfields < 32 ? nfields : 32);

        if (n != nfields) {
            snprintf(why, cap, "%s: row %d has %d fields, want %d", path, rows + 1, n, nfields);
            free(text);
            return -1;
        }
        row(f, arg);
        rows++;
    }
    free(text);
    return rows;
}

bool cr_test_proc_stat(pid_t pid, char *state, pid_t *ppid)
{
    char path[64];
    char buf[512];
    const char *p;
    int pp;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (!cr_test_read_small(path, buf, sizeof(buf)))
        return false;
    /* The command name in parentheses may hold anything, ")" too. */
    p = strrchr(buf, ')');
    if (p == NULL || sscanf(p + 1, " %c %d", state, &pp) != 2)
        return false;
    *ppid = pp;
    return true;
}

bool cr_test_proc_is_gone(pid_t pid)
{
    pid_t pp;
    char state;

    return !cr_test_proc_stat(pid, &state, &pp) || state == 'Z' || state == 'X';
}

uint64_t cr_test_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int cr_test_tmo(int ms)
{
    const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
    int k = m != NULL ? atoi(m) : 1;

    return ms * (k > 1 ? (k < 10 ? k : 10) : 1);
}

int cr_test_set_nonblock(int fd, bool on)
{
    int fl = fcntl(fd, F_GETFL);

    if (fl < 0)
        return -errno;
    fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
    return fcntl(fd, F_SETFL, fl) < 0 ? -errno : 0;
}

int cr_test_connect(uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    int fd;
    int one = 1;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int err = -errno;

        close(fd);
        return err;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

int cr_test_tcp_pair(int fds[2])
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int lfd;
    int err = 0;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0)
        return -errno;
    if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 1) < 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &len) < 0) {
        err = -errno;
        goto out;
    }
    fds[0] = cr_test_connect(ntohs(sa.sin_port));
    if (fds[0] < 0) {
        err = fds[0];
        goto out;
    }
    fds[1] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fds[1] < 0) {
        err = -errno;
        close(fds[0]);
    }
out:
    close(lfd);
    return err;
}

int cr_test_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int cr_test_read_exact(int fd, void *buf, size_t len, int timeout_ms)
{
    char *p = buf;
    uint64_t deadline = cr_test_now_ms() + (uint64_t)timeout_ms;

    while (len > 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        uint64_t now = cr_test_now_ms();
        ssize_t n;

        if (now >= deadline)
            return -ETIMEDOUT;
        if (poll(&pfd, 1, (int)(deadline - now)) < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (pfd.revents == 0)
            continue;
        n = read(fd, p, len);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EPIPE;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

const char *cr_test_build_path(const char *rel, char *buf, size_t len)
{
    const char *dir = getenv("CR_BUILD_DIR");

    snprintf(buf, len, "%s/%s", dir != NULL && dir[0] != '\0' ? dir : "build", rel);
    return buf;
}

/* Reads the child's stdout until a "listening on ...:PORT" line. */
static int read_port(int fd, uint16_t *port, int timeout_ms)
{
    char line[512];
    size_t used = 0;
    uint64_t deadline = cr_test_now_ms() + (uint64_t)timeout_ms;

    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        uint64_t now = cr_test_now_ms();
        ssize_t n;
        char *nl;

        if (now >= deadline)
            return -ETIMEDOUT;
        if (poll(&pfd, 1, (int)(deadline - now)) <= 0)
            continue;
        n = read(fd, line + used, sizeof(line) - 1 - used);
        if (n <= 0)
            return n == 0 ? -EPIPE : -errno;
        used += (size_t)n;
        line[used] = '\0';
        while ((nl = strchr(line, '\n')) != NULL) {
            char *at;

            *nl = '\0';
            fprintf(stderr, "[server] %s\n", line);
            at = strstr(line, "listening on ");
            if (at != NULL) {
                char *colon = strrchr(at, ':');

                if (colon != NULL) {
                    *port = (uint16_t)atoi(colon + 1);
                    return 0;
                }
            }
            used -= (size_t)(nl + 1 - line);
            memmove(line, nl + 1, used + 1);
        }
        if (used == sizeof(line) - 1)
            used = 0; /* an over-long line cannot be ours */
    }
}

int cr_test_spawn_server(char *const argv[], pid_t *pid, uint16_t *port, int timeout_ms)
{
    int pfd[2];
    int err;

    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -errno;
    *pid = fork();
    if (*pid < 0) {
        err = -errno;
        close(pfd[0]);
        close(pfd[1]);
        return err;
    }
    if (*pid == 0) {
        dup2(pfd[1], STDOUT_FILENO);
        execv(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(pfd[1]);
    err = read_port(pfd[0], port, timeout_ms);
    /* Later output of the server is not read: keep the pipe open so its writes
     * never fail with EPIPE, and let it close with our process. */
    if (err < 0) {
        close(pfd[0]);
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
    }
    return err;
}

int cr_test_wait_exit(pid_t pid, int timeout_ms, int *status)
{
    uint64_t deadline = cr_test_now_ms() + (uint64_t)timeout_ms;

    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);

        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR)
            return -errno;
        if (cr_test_now_ms() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, status, 0);
            return -ETIMEDOUT;
        }
        usleep(2000);
    }
}
