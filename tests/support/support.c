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

int cr_test_tmo(int ms)
{
    const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
    int k = m != NULL ? atoi(m) : 1;

    return ms * (k > 1 ? (k < 10 ? k : 10) : 1);
}

void cr_test_skip(const char *what, const char *why)
{
    const char *path = getenv("CR_TEST_SKIPS");
    char line[512];
    int len;
    int fd;

    fprintf(stderr, "SKIP %s: %s\n", what, why);
    if (path == NULL)
        return;
    len = snprintf(line, sizeof(line), "%ld %s: %s\n", (long)getpid(), what, why);
    if (len < 0)
        return;
    if ((size_t)len >= sizeof(line)) { /* cut short: still one line */
        len = (int)sizeof(line) - 1;
        line[len - 1] = '\n';
    }
    fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0 || write(fd, line, (size_t)len) != len)
        fprintf(stderr, "cr_test_skip: %s: %s\n", path, strerror(errno));
    if (fd >= 0)
        close(fd);
}

int cr_test_set_nonblock(int fd, bool on)
{
    int fl = fcntl(fd, F_GETFL);

    if (fl < 0)
        return -errno;
    fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
    return fcntl(fd, F_SETFL, fl) < 0 ? -errno : 0;
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
