/*
 * httpd_cli.c (integration) - cabrank-httpd's command line: --help lists
 * every flag with its default, --version, a bad flag, a bad value or an
 * unusable root is one line on stderr and exit status 2; then a server with
 * flags in both forms (--flag value, --flag=value): two listeners (IPv4 and,
 * where the host has it, IPv6) each printed and served, the pid file written
 * after binding and removed at exit, the error log receiving the records, a
 * configured status path; and the status page refused (403) to a client
 * that is not on the loopback network unless --status-allow-remote, tried
 * where the host has a non-loopback IPv4 address. The process-model and
 * proactor flags (--workers ... --async-engine) are listed and their bad
 * values refused the same way; --config: a file's options apply, flags on
 * the command line win, a bad line is one error naming file and line; and
 * under a thread model SIGHUP re-reads the file, logs one line saying what
 * it applied and what needs a restart, and keeps the old configuration when
 * the file turned bad. Exit 0 pass, 1 fail, 77 skip.
 */
#include "httpd_client.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>

static char prog[4096];

/* Runs prog with args; captures stdout and stderr; returns the exit status
 * (-1 if it did not exit within 10 s). */
static int run(const char *const *args, char *out, size_t out_cap, char *err, size_t err_cap)
{
    char *argv[32];
    int po[2];
    int pe[2];
    size_t no = 0;
    size_t ne = 0;
    int status = 0;
    int n = 0;
    pid_t pid;

    argv[n++] = prog;
    for (int i = 0; args[i] != NULL && n < 31; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        dup2(po[1], STDOUT_FILENO);
        dup2(pe[1], STDERR_FILENO);
        execv(prog, argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    {
        struct pollfd p[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
        char *bufs[2] = {out, err};
        size_t caps[2] = {out_cap, err_cap};
        size_t *lens[2] = {&no, &ne};
        int open_fds = 2;

        while (open_fds > 0 && poll(p, 2, 10000) > 0) {
            for (int i = 0; i < 2; i++) {
                ssize_t r;

                if (p[i].fd < 0 || p[i].revents == 0)
                    continue;
                r = read(p[i].fd, bufs[i] + *lens[i], caps[i] - 1 - *lens[i]);
                if (r > 0) {
                    *lens[i] += (size_t)r;
                    continue;
                }
                close(p[i].fd);
                p[i].fd = -1;
                open_fds--;
            }
        }
        for (int i = 0; i < 2; i++) {
            if (p[i].fd >= 0)
                close(p[i].fd);
        }
    }
    out[no] = '\0';
    err[ne] = '\0';
    if (cr_test_wait_exit(pid, 10000, &status) < 0)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_help_and_version(void)
{
    static const char *const flags[] = {
        "--listen",
        "--root",
        "--model",
        "--threads",
        "--promotion",
        "--groups",
        "--multiple-leaders",
        "--backend",
        "--max-connections",
        "--header-timeout",
        "--body-timeout",
        "--keepalive-timeout",
        "--send-timeout",
        "--max-requests-per-connection",
        "--max-request-line",
        "--max-header-line",
        "--max-headers-size",
        "--max-header-fields",
        "--access-log",
        "--log-format",
        "--error-log",
        "--log-level",
        "--pid-file",
        "--status-path",
        "--status-allow-remote",
        "--allow-outside-symlinks",
        "--config",
        "--workers",
        "--min-spare",
        "--max-spare",
        "--max-workers",
        "--max-requests-per-child",
        "--accept-lock",
        "--busy-warn",
        "--dispatch",
        "--async-engine",
        "--help",
        "--version",
    };
    static const char *const defaults[] = {"127.0.0.1:8080", "./www",          "(default lf)",
                                           "(default 20)",   "(default 5)",    "(default 60)",
                                           "(default 1000)", "(default 8192)", "(default 32768)",
                                           "(default 100",   "/server-status"};
    const char *const help[] = {"--help", NULL};
    const char *const version[] = {"--version", NULL};
    static char out[16384];
    char err[4096];

    CHECK(run(help, out, sizeof(out), err, sizeof(err)) == 0, "--help status");
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
        CHECK(strstr(out, flags[i]) != NULL, "--help does not list %s", flags[i]);
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
        CHECK(strstr(out, defaults[i]) != NULL, "--help does not say %s", defaults[i]);
    CHECK(run(version, out, sizeof(out), err, sizeof(err)) == 0 &&
              strncmp(out, "cabrank-httpd ", 14) == 0,
          "--version: %s", out);
}

static void expect_usage_error(const char *const *args, const char *what)
{
    char out[4096];
    char err[4096];
    int rc = run(args, out, sizeof(out), err, sizeof(err));
    char *nl = strchr(err, '\n');

    CHECK(rc == 2, "%s: exit status %d, want 2", what, rc);
    CHECK(nl != NULL && nl[1] == '\0' && strncmp(err, "cabrank-httpd: ", 15) == 0,
          "%s: want one line on stderr, got '%s'", what, err);
    CHECK(strstr(out, "listening") == NULL, "%s: it listened", what);
}

static void test_usage_errors(const char *root)
{
    const char *const a1[] = {"--bogus", NULL};
    const char *const a2[] = {"--threads", "many", NULL};
    const char *const a3[] = {"--root", "/nonexistent/cabrank", NULL};
    const char *const a4[] = {"--root", "/dev/null", NULL};
    const char *const a5[] = {"--listen", "localhost:80", NULL};
    const char *const a6[] = {"--header-timeout=0", NULL};
    const char *const a7[] = {"--log-format", "json", NULL};
    const char *const a8[] = {"--model=forkless", NULL};
    const char *const a9[] = {"--root", root, "--promotion", "random", NULL};
    const char *const a10[] = {"--model", NULL};
    const char *const a11[] = {"--status-path", "server-status", NULL};
    const char *const a12[] = {"--keepalive-timeout", "5s", NULL};
    const char *const a13[] = {"--log-level", "loud", NULL};
    const char *const a14[] = {"--max-header-fields", "100000", NULL};

    expect_usage_error(a1, "unknown flag");
    expect_usage_error(a2, "bad number");
    expect_usage_error(a3, "missing root");
    expect_usage_error(a4, "root not a directory");
    expect_usage_error(a5, "non-numeric address");
    expect_usage_error(a6, "zero timeout");
    expect_usage_error(a7, "bad log format");
    expect_usage_error(a8, "unknown model");
    expect_usage_error(a9, "unknown promotion");
    expect_usage_error(a10, "missing value");
    expect_usage_error(a11, "relative status path");
    expect_usage_error(a12, "timeout with a unit");
    expect_usage_error(a13, "bad log level");
    expect_usage_error(a14, "too many header fields");

    const char *const b1[] = {"--root", root, "--workers", "0", NULL};
    const char *const b2[] = {"--root", root, "--accept-lock", "flock", NULL};
    const char *const b3[] = {"--root", root, "--busy-warn", "-1", NULL};
    const char *const b4[] = {"--root", root, "--dispatch", "many", NULL};
    const char *const b5[] = {"--root", root, "--async-engine", "epoll", NULL};
    const char *const b6[] = {"--root", root, "--workers", "8", "--max-workers", "4", NULL};
    const char *const b7[] = {"--root", root, "--min-spare", "5", "--max-spare", "2", NULL};
    const char *const b8[] = {"--root", root, "--max-requests-per-child", "x", NULL};
    const char *const b9[] = {"--root", root, "--config", "/nonexistent/cabrank.conf", NULL};
    const char *const b10[] = {"--root", root, "--tcp-congestion", "no-such-algorithm", NULL};
    const char *const b11[] = {"--root", root, "--loopback-congestion", "no-such-algorithm", NULL};
    const char *const b12[] = {"--root", root, "--send-budget", "64k", NULL};
    const char *const b13[] = {"--root", root, "--busy-poll", "2", NULL};
    const char *const b14[] = {"--root", root, "--notsent-lowat", "3000000000", NULL};

    expect_usage_error(b1, "zero workers");
    expect_usage_error(b2, "unknown accept lock");
    expect_usage_error(b3, "negative busy-warn");
    expect_usage_error(b4, "unknown dispatch");
    expect_usage_error(b5, "unknown async engine");
    expect_usage_error(b6, "workers above max-workers");
    expect_usage_error(b7, "max-spare below min-spare");
    expect_usage_error(b8, "bad max-requests-per-child");
    expect_usage_error(b9, "missing config file");
    expect_usage_error(b10, "unknown congestion control");
    expect_usage_error(b11, "unknown loopback congestion control");
    expect_usage_error(b12, "bad send budget");
    expect_usage_error(b13, "busy poll over a second");
    expect_usage_error(b14, "notsent-lowat over INT_MAX");
}

static int spawn(const char *const *args, pid_t *pid, uint16_t *ports, int want, char lines[][128]);

/* Writes a configuration file dir/name. */
static void write_config(const char *dir, const char *name, const char *text)
{
    CHECK(hc_write_file(dir, name, text, strlen(text)) == 0, "writing %s", name);
}

/* Waits until the file at path contains needle (up to timeout_ms). */
static bool file_says(const char *path, const char *needle, int timeout_ms)
{
    uint64_t deadline = cr_test_now_ms() + (uint64_t)timeout_ms;
    static char buf[65536];

    do {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

        if (fd >= 0)
            close(fd);
        if (n > 0) {
            buf[n] = '\0';
            if (strstr(buf, needle) != NULL)
                return true;
        }
        usleep(20 * 1000);
    } while (cr_test_now_ms() < deadline);
    return false;
}

static void test_config_file(const char *dir, const char *root)
{
    char conf[400];
    char bad[400];
    char other[400];
    char elog[400];
    char text[2048];
    char out[4096];
    char err[4096];
    struct hc_resp r;
    pid_t pid;
    uint16_t port;
    char lines[1][128];
    int status = 0;

    snprintf(conf, sizeof(conf), "%s/httpd.conf", dir);
    snprintf(bad, sizeof(bad), "%s/bad.conf", dir);
    snprintf(other, sizeof(other), "%s/other", dir);
    snprintf(elog, sizeof(elog), "%s/error.log", dir);
    CHECK(mkdir(other, 0755) == 0 && hc_write_file(other, "a.txt", "O", 1) == 0, "other root");

    /* A bad line: one error naming the file and the line, exit 2. */
    write_config(dir, "bad.conf", "# comment\n\nkeepalive-timeout 5\nthreads many\n");
    {
        const char *const args[] = {"--root", root, "--config", bad, NULL};
        int rc = run(args, out, sizeof(out), err, sizeof(err));

        CHECK(rc == 2 && strstr(err, "bad.conf:4:") != NULL && strchr(err, '\n')[1] == '\0',
              "bad config line: %d '%s'", rc, err);
    }

    /* The file's root and status path apply; the command line's --listen
     * and --threads win over the file's. */
    snprintf(text, sizeof(text),
             "# cabrank-httpd test configuration\n"
             "root %s   # the document root\n"
             "listen 127.0.0.1:1\n"
             "--status-path /st\n"
             "threads 3\n"
             "keepalive-timeout 2\n"
             "error-log %s\n"
             "multiple-leaders\n",
             other, elog);
    write_config(dir, "httpd.conf", text);
    {
        const char *const args[] = {"--config", conf,      "--listen", "127.0.0.1:0", "--threads",
                                    "2",        "--model", "lf",       NULL};

        if (spawn(args, &pid, &port, 1, lines) < 0) {
            CHECK(false, "config server did not start");
            return;
        }
    }
    CHECK(hc_get(port, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0 && r.status == 200 &&
              r.body_len == 1 && r.body[0] == 'O',
          "root from the config file");
    hc_resp_free(&r);
    CHECK(hc_status(port, "GET /st?format=json HTTP/1.1\r\nHost: t\r\n\r\n") == 200,
          "status path from the config file");

    /* HUP under a thread model: the root cannot change live; the line says
     * so. A bad file at HUP keeps everything as it was. */
    snprintf(text, sizeof(text), "root %s\nstatus-path /st\nerror-log %s\nlog-level debug\n", root,
             elog);
    write_config(dir, "httpd.conf", text);
    kill(pid, SIGHUP);
    CHECK(file_says(elog, "SIGHUP: re-read", hc_tmo(5000)), "HUP logged what it did");
    CHECK(file_says(elog, "needs a restart: root", hc_tmo(5000)), "HUP names the root");
    CHECK(file_says(elog, "applied: log-level", hc_tmo(5000)), "HUP applied the log level");
    write_config(dir, "httpd.conf", "root\n");
    kill(pid, SIGHUP);
    CHECK(file_says(elog, "httpd.conf:1: --root needs a value; the configuration stays",
                    hc_tmo(5000)),
          "bad file at HUP logged");
    CHECK(hc_get(port, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0 && r.status == 200 &&
              r.body_len == 1 && r.body[0] == 'O',
          "still serving the old root after HUPs");
    hc_resp_free(&r);
    kill(pid, SIGTERM);
    CHECK(cr_test_wait_exit(pid, hc_tmo(20000), &status) == 0 && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0,
          "config server exit status %d", status);
}

/* Starts prog with args, reading `want` "listening on" lines from its
 * stdout; ports[] gets their ports. */
static int spawn(const char *const *args, pid_t *pid, uint16_t *ports, int want, char lines[][128])
{
    char *argv[32];
    char buf[4096];
    size_t len = 0;
    int got = 0;
    int po[2];
    int n = 0;
    uint64_t deadline = cr_test_now_ms() + (uint64_t)hc_tmo(20000);

    argv[n++] = prog;
    for (int i = 0; args[i] != NULL && n < 31; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    if (pipe2(po, O_CLOEXEC) < 0)
        return -1;
    *pid = fork();
    if (*pid == 0) {
        dup2(po[1], STDOUT_FILENO);
        execv(prog, argv);
        _exit(127);
    }
    close(po[1]);
    while (got < want && cr_test_now_ms() < deadline) {
        struct pollfd p = {.fd = po[0], .events = POLLIN};
        char *nl;
        ssize_t r;

        if (poll(&p, 1, 100) <= 0)
            continue;
        r = read(po[0], buf + len, sizeof(buf) - 1 - len);
        if (r <= 0)
            break;
        len += (size_t)r;
        buf[len] = '\0';
        while ((nl = strchr(buf, '\n')) != NULL && got < want) {
            char *colon;

            *nl = '\0';
            if (strncmp(buf, "listening on ", 13) == 0 && (colon = strrchr(buf, ':')) != NULL) {
                snprintf(lines[got], 128, "%.100s", buf + 13);
                ports[got++] = (uint16_t)atoi(colon + 1);
            }
            len -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, len + 1);
        }
    }
    /* The pipe stays open in the child; our end is closed, and the server
     * writes nothing more to stdout. */
    close(po[0]);
    return got == want ? 0 : -1;
}

static bool has_ipv6_loopback(void)
{
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;

    if (fd >= 0)
        close(fd);
    return ok;
}

static int connect6(uint16_t port)
{
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);

    sa.sin6_port = htons(port);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* The document root's big.bin: 1 MiB of a pattern. */
static char big[1024 * 1024];

static void test_server_flags(const char *dir, const char *root)
{
    char pidfile[400];
    char errlog[400];
    char pidarg[420];
    char rootarg[420];
    char lines[2][128];
    uint16_t ports[2] = {0, 0};
    bool v6 = has_ipv6_loopback();
    const char *args[24];
    struct cr_test_client cl;
    struct hc_resp r;
    char buf[256];
    pid_t pid;
    int n = 0;
    int status = -1;

    snprintf(pidfile, sizeof(pidfile), "%s/httpd.pid", dir);
    snprintf(errlog, sizeof(errlog), "%s/error.log", dir);
    snprintf(pidarg, sizeof(pidarg), "--pid-file=%s", pidfile);
    snprintf(rootarg, sizeof(rootarg), "--root=%s", root);
    args[n++] = "--listen=127.0.0.1:0";
    if (v6) {
        args[n++] = "--listen";
        args[n++] = "[::1]:0";
    }
    args[n++] = rootarg;
    args[n++] = pidarg;
    args[n++] = "--error-log";
    args[n++] = errlog;
    args[n++] = "--status-path=/st";
    args[n++] = "--status-allow-remote";
    args[n++] = "--threads=2";
    args[n++] = "--model";
    args[n++] = "lf";
    args[n++] = "--keepalive-timeout=2.5";
    args[n++] = "--log-level=debug";
    /* reno: in every kernel, and allowed to anyone. */
    args[n++] = "--loopback-congestion=reno";
    /* A large file then goes out in 256 turns. */
    args[n++] = "--send-budget=4096";
    /* And waits for the socket each time more than 2 KiB are unsent. */
    args[n++] = "--notsent-lowat=2048";
    args[n++] = "--busy-poll=0.0002";
    args[n] = NULL;
    if (spawn(args, &pid, ports, v6 ? 2 : 1, lines) < 0) {
        CHECK(false, "server did not say where it listens");
        return;
    }
    CHECK(strncmp(lines[0], "127.0.0.1:", 10) == 0, "first listener %s", lines[0]);
    {
        int fd = open(pidfile, O_RDONLY);
        ssize_t len = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

        if (fd >= 0)
            close(fd);
        buf[len > 0 ? len : 0] = '\0';
        CHECK(len > 0 && atol(buf) == (long)pid, "pid file says '%s', pid %d", buf, (int)pid);
    }
    CHECK(hc_status(ports[0], "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n") == 200, "IPv4 listener");
    cl.fd = -1;
    CHECK(cr_test_client_open(&cl, ports[0]) == 0, "connect for big.bin");
    if (cl.fd >= 0) {
        CHECK(hc_request(&cl, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) == 0 &&
                  r.status == 200 && r.body_len == sizeof(big) &&
                  memcmp(r.body, big, sizeof(big)) == 0,
              "big.bin in send-budget slices, 2 KiB unsent at most: status %d, %zu bytes", r.status,
              r.body_len);
        hc_resp_free(&r);
        cr_test_client_close(&cl);
    }
    CHECK(hc_status(ports[0], "GET /st HTTP/1.1\r\nHost: t\r\n\r\n") == 200, "status path");
    CHECK(hc_status(ports[0], "GET /server-status HTTP/1.1\r\nHost: t\r\n\r\n") == 404,
          "old status path");
    if (v6) {
        CHECK(strncmp(lines[1], "[::1]:", 6) == 0, "second listener %s", lines[1]);
        cl.fd = connect6(ports[1]);
        cl.off = cl.len = 0;
        CHECK(cl.fd >= 0, "IPv6 connect");
        if (cl.fd >= 0) {
            CHECK(hc_request(&cl, "GET /a.txt HTTP/1.1\r\nHost: [::1]\r\n\r\n", &r, hc_tmo(5000)) ==
                          0 &&
                      r.status == 200 && r.body_len == 1,
                  "IPv6 listener");
            hc_resp_free(&r);
            cr_test_client_close(&cl);
        }
    } else {
        fprintf(stderr, "no IPv6 loopback here: the IPv6 listener is not tried\n");
    }
    kill(pid, SIGTERM);
    CHECK(cr_test_wait_exit(pid, hc_tmo(20000), &status) == 0 && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0,
          "exit status %d", status);
    CHECK(access(pidfile, F_OK) < 0, "pid file left behind");
    {
        int fd = open(errlog, O_RDONLY);
        static char log[65536];
        ssize_t len = fd >= 0 ? read(fd, log, sizeof(log) - 1) : -1;

        if (fd >= 0)
            close(fd);
        log[len > 0 ? len : 0] = '\0';
        CHECK(strstr(log, "info listening on 127.0.0.1:") != NULL, "error log: '%.200s'", log);
        CHECK(strstr(log, "graceful stop") != NULL, "error log has no stop record");
        CHECK(strstr(log, ": loopback, congestion control reno") != NULL,
              "error log does not say the loopback listener's congestion control");
    }
}

/* A non-loopback IPv4 address of this host into *out; false if none. */
static bool other_ipv4(struct in_addr *out)
{
    struct ifaddrs *ifs;
    bool found = false;

    if (getifaddrs(&ifs) < 0)
        return false;
    for (struct ifaddrs *i = ifs; i != NULL && !found; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET)
            continue;
        *out = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
        found = (ntohl(out->s_addr) >> 24) != 127;
    }
    freeifaddrs(ifs);
    return found;
}

/* The status of req sent from and to addr:port, or -errno. */
static int status_via(struct in_addr addr, uint16_t port, const char *req)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr = addr};
    struct cr_test_client cl = {.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    struct hc_resp r;
    int err;

    if (cl.fd < 0 || connect(cl.fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        err = -errno;
        cr_test_client_close(&cl);
        return err;
    }
    err = hc_request(&cl, req, &r, hc_tmo(5000));
    hc_resp_free(&r);
    cr_test_client_close(&cl);
    return err < 0 ? err : r.status;
}

static void test_remote_status(const char *root)
{
    const char *const local[] = {"--listen", "*:0", "--root", root, "--threads", "2", NULL};
    const char *const remote[] = {
        "--listen", "*:0", "--root", root, "--threads", "2", "--status-allow-remote", NULL};
    const char *const *variants[] = {local, remote};
    struct in_addr addr;
    char text[INET_ADDRSTRLEN];

    if (!other_ipv4(&addr)) {
        fprintf(stderr, "no non-loopback IPv4 address here: remote status not tried\n");
        return;
    }
    inet_ntop(AF_INET, &addr, text, sizeof(text));
    for (int v = 0; v < 2; v++) {
        char lines[1][128];
        uint16_t port = 0;
        pid_t pid;
        int status = -1;
        int got;

        if (spawn(variants[v], &pid, &port, 1, lines) < 0) {
            CHECK(false, "server on *:0 did not start");
            return;
        }
        got = status_via(addr, port, "GET /server-status HTTP/1.1\r\nHost: t\r\n\r\n");
        CHECK(got == (v == 0 ? 403 : 200), "status page from %s%s: %d", text,
              v == 0 ? "" : " with --status-allow-remote", got);
        got = status_via(addr, port, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
        CHECK(got == (v == 0 ? 403 : 200), "metrics from %s%s: %d", text,
              v == 0 ? "" : " with --status-allow-remote", got);
        CHECK(status_via(addr, port, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n") == 200,
              "a file from %s", text);
        CHECK(hc_status(port, "GET /server-status HTTP/1.1\r\nHost: t\r\n\r\n") == 200,
              "status page from loopback");
        kill(pid, SIGTERM);
        CHECK(cr_test_wait_exit(pid, hc_tmo(20000), &status) == 0 && WIFEXITED(status) &&
                  WEXITSTATUS(status) == 0,
              "exit status %d", status);
    }
}

int main(void)
{
    char dir[256];
    char root[300];
    int rc = 1;

    cr_test_build_path("cabrank-httpd", prog, sizeof(prog));
    if (hc_mkdtemp(dir, sizeof(dir)) < 0)
        return 1;
    snprintf(root, sizeof(root), "%s/root", dir);
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)(i % 251);
    if (mkdir(root, 0755) < 0 || hc_write_file(root, "a.txt", "A", 1) < 0 ||
        hc_write_file(root, "big.bin", big, sizeof(big)) < 0) {
        fprintf(stderr, "httpd_cli: making the root: %s\n", strerror(errno));
        goto out;
    }
    test_help_and_version();
    test_usage_errors(root);
    test_server_flags(dir, root);
    test_remote_status(root);
    test_config_file(dir, root);
    if (hc_failures == 0) {
        fprintf(stderr, "httpd_cli: ok\n");
        rc = 0;
    } else {
        fprintf(stderr, "httpd_cli: %d check(s) failed\n", hc_failures);
    }
out:
    (void)cr_test_rmtree(dir);
    return rc;
}
