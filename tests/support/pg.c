/*
 * pg.c - see pg.h. Runs initdb and postgres as child processes of the
 * calling thread; test code, so failures are returned (with the server's
 * log on stderr) for the caller to assert on or skip.
 */
#include "pg.h"

#include "support.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Attempts at a free port: another process may take the one we picked
 * between our probe and the server's bind. */
#define PORT_ATTEMPTS 5

/* Who initdb and postgres run as: ourselves, or 'postgres' when we are root. */
struct run_as {
    bool change;
    uid_t uid;
    gid_t gid;
};

/* Whether dir holds an initdb and a postgres we can run. */
static bool has_binaries(const char *dir)
{
    char path[512];

    snprintf(path, sizeof(path), "%s/initdb", dir);
    if (access(path, X_OK) < 0)
        return false;
    snprintf(path, sizeof(path), "%s/postgres", dir);
    return access(path, X_OK) == 0;
}

/* $CR_TEST_PG_BINDIR, else the bin directory of the highest installed
 * major version, into bin. */
static int find_bin_dir(char *bin, size_t cap)
{
    const char *env = getenv("CR_TEST_PG_BINDIR");
    glob_t g;
    long best = -1;

    if (env != NULL && env[0] != '\0') {
        snprintf(bin, cap, "%s", env);
        return has_binaries(bin) ? 0 : -ENOENT;
    }
    if (glob("/usr/lib/postgresql/*/bin/postgres", 0, NULL, &g) != 0)
        return -ENOENT;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *p = g.gl_pathv[i];
        long v = strtol(p + strlen("/usr/lib/postgresql/"), NULL, 10);
        char dir[256];

        snprintf(dir, sizeof(dir), "%.*s", (int)(strlen(p) - strlen("/postgres")), p);
        if (v > best && has_binaries(dir)) {
            best = v;
            snprintf(bin, cap, "%s", dir);
        }
    }
    globfree(&g);
    return best < 0 ? -ENOENT : 0;
}

/* Prints the end of the server's log, which says why it failed. */
static void print_log_tail(const struct cr_test_pg *pg)
{
    char path[300];
    char buf[2048];
    int fd;
    off_t end;
    ssize_t n;

    snprintf(path, sizeof(path), "%s/log", pg->dir);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    end = lseek(fd, 0, SEEK_END);
    if (end > (off_t)sizeof(buf) - 1)
        lseek(fd, end - (off_t)sizeof(buf) + 1, SEEK_SET);
    else
        lseek(fd, 0, SEEK_SET);
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n > 0) {
        buf[n] = '\0';
        fprintf(stderr, "cr_test_pg: the end of %s:\n%s\n", path, buf);
    }
}

/*
 * Forks and execs argv with stdout and stderr appended to <dir>/log. Only
 * async-signal-safe calls between fork and exec: the caller may have
 * threads. The parent-death signal is set after the identity change, which
 * would clear it.
 */
static int spawn(const struct cr_test_pg *pg, const struct run_as *as, char *const argv[],
                 pid_t *out)
{
    char path[300];
    int logfd;
    int nullfd;
    pid_t parent = getpid();
    pid_t pid;
    int err = 0;

    snprintf(path, sizeof(path), "%s/log", pg->dir);
    logfd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0)
        return -errno;
    nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nullfd < 0) {
        err = -errno;
        goto out_close_log;
    }
    pid = fork();
    if (pid < 0) {
        err = -errno;
        goto out_close_null;
    }
    if (pid == 0) {
        sigset_t none;

        if (dup2(nullfd, STDIN_FILENO) < 0 || dup2(logfd, STDOUT_FILENO) < 0 ||
            dup2(logfd, STDERR_FILENO) < 0)
            _exit(126);
        /* Our descriptors without close-on-exec (Check's pipes, a test's
         * sockets) must not stay open in a server that outlives them. */
        close_range(3, ~0U, 0);
        if (chdir(pg->dir) < 0)
            _exit(126);
        if (as->change &&
            (setgroups(1, &as->gid) < 0 || setgid(as->gid) < 0 || setuid(as->uid) < 0))
            _exit(126);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
            _exit(126);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execv(argv[0], argv);
        _exit(127);
    }
    *out = pid;
out_close_null:
    close(nullfd);
out_close_log:
    close(logfd);
    return err;
}

/* A port nobody listens on now. */
static int pick_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int fd;
    int port;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
        port = -errno;
    else
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/*
 * Whether the postmaster has written "ready" as the status line (the 8th)
 * of its postmaster.pid, as pg_ctl waits for: it then accepts connections,
 * which its listening socket alone does not promise (it is open during
 * start-up, when connections are refused).
 */
static bool is_ready(const struct cr_test_pg *pg)
{
    char path[300];
    char buf[1024];
    const char *line = buf;

    snprintf(path, sizeof(path), "%s/data/postmaster.pid", pg->dir);
    if (!cr_test_read_small(path, buf, sizeof(buf)))
        return false;
    if (atoi(buf) != pg->pid)
        return false;
    for (int i = 1; i < 8 && line != NULL; i++) {
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    return line != NULL && strncmp(line, "ready", 5) == 0;
}

/* Starts postgres on port and waits for it to be ready. -EADDRINUSE when
 * it exited before (most likely its port was taken: the caller retries). */
static int start_server(struct cr_test_pg *pg, const struct run_as *as, const char *bin, int port)
{
    char exe[300];
    char data[300];
    char portstr[16];
    /* A deadlock is looked for after deadlock_timeout of waiting (1 s by
     * default): tests that provoke deadlocks would mostly wait for that. */
    char *argv[] = {exe,
                    "-D",
                    data,
                    "-k",
                    pg->dir,
                    "-h",
                    "127.0.0.1",
                    "-p",
                    portstr,
                    "-c",
                    "deadlock_timeout=20ms",
                    NULL};
    uint64_t deadline = cr_test_now_ms() + (uint64_t)cr_test_tmo(30000);
    int err;

    snprintf(exe, sizeof(exe), "%s/postgres", bin);
    snprintf(data, sizeof(data), "%s/data", pg->dir);
    snprintf(portstr, sizeof(portstr), "%d", port);
    err = spawn(pg, as, argv, &pg->pid);
    if (err < 0)
        return err;
    pg->port = port;
    while (!is_ready(pg)) {
        int st;

        if (waitpid(pg->pid, &st, WNOHANG) == pg->pid) {
            pg->pid = 0;
            return -EADDRINUSE;
        }
        if (cr_test_now_ms() >= deadline) {
            kill(pg->pid, SIGKILL);
            waitpid(pg->pid, NULL, 0);
            pg->pid = 0;
            return -ETIMEDOUT;
        }
        usleep(5000);
    }
    return 0;
}

/* The binaries' directory and who runs them. 0 or -ENOENT. */
static int find_server(char *bin, size_t cap, struct run_as *as)
{
    int err = find_bin_dir(bin, cap);

    if (err < 0)
        return err;
    *as = (struct run_as){.change = false};
    if (geteuid() == 0) {
        /* getpwnam before any fork: it is not async-signal-safe. */
        struct passwd *pw = getpwnam("postgres");

        if (pw == NULL)
            return -ENOENT;
        *as = (struct run_as){.change = true, .uid = pw->pw_uid, .gid = pw->pw_gid};
    }
    return 0;
}

int cr_test_pg_start(struct cr_test_pg *pg)
{
    char bin[256];
    char exe[300];
    char data[300];
    char *initdb_argv[] = {exe,  "-D",   data,         "-U",        "cabrank", "--auth=trust",
                           "-E", "UTF8", "--locale=C", "--no-sync", NULL};
    struct run_as as = {.change = false};
    int st;
    int err;

    memset(pg, 0, sizeof(*pg));
    err = find_server(bin, sizeof(bin), &as);
    if (err < 0)
        return err;
    snprintf(pg->dir, sizeof(pg->dir), "/tmp/cr-pg-XXXXXX");
    if (mkdtemp(pg->dir) == NULL) {
        err = -errno;
        pg->dir[0] = '\0';
        return err;
    }
    if (as.change && chown(pg->dir, as.uid, as.gid) < 0) {
        err = -errno;
        goto out_remove;
    }

    snprintf(exe, sizeof(exe), "%s/initdb", bin);
    snprintf(data, sizeof(data), "%s/data", pg->dir);
    err = spawn(pg, &as, initdb_argv, &pg->pid);
    if (err < 0)
        goto out_remove;
    err = cr_test_wait_exit(pg->pid, cr_test_tmo(60000), &st);
    pg->pid = 0;
    if (err == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        err = -EIO;
    if (err < 0)
        goto out_log;

    err = -EADDRINUSE;
    for (int i = 0; i < PORT_ATTEMPTS && err == -EADDRINUSE; i++) {
        int port = pick_port();

        if (port < 0) {
            err = port;
            break;
        }
        err = start_server(pg, &as, bin, port);
    }
    if (err < 0)
        goto out_log;
    snprintf(pg->url, sizeof(pg->url), "postgresql://cabrank@127.0.0.1:%d/postgres", pg->port);
    return 0;

out_log:
    fprintf(stderr, "cr_test_pg_start: %s\n", strerror(-err));
    print_log_tail(pg);
out_remove:
    (void)cr_test_rmtree(pg->dir);
    pg->dir[0] = '\0';
    return err;
}

/* Up to cap pids whose parent is ppid. */
static size_t list_children(pid_t ppid, pid_t *out, size_t cap)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    size_t n = 0;

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL && n < cap) {
        pid_t pid = (pid_t)atoi(e->d_name);
        pid_t pp;
        char state;

        if (pid > 0 && cr_test_proc_stat(pid, &state, &pp) && pp == ppid)
            out[n++] = pid;
    }
    closedir(d);
    return n;
}

int cr_test_pg_kill(struct cr_test_pg *pg)
{
    pid_t kids[128];
    pid_t pid = pg->pid;
    size_t n;
    uint64_t deadline;

    if (pid <= 0)
        return -ESRCH;
    /* Stopped, the postmaster starts no process while we list its own. */
    if (kill(pid, SIGSTOP) < 0)
        return -errno;
    n = list_children(pid, kids, sizeof(kids) / sizeof(kids[0]));
    for (size_t i = 0; i < n; i++)
        kill(kids[i], SIGKILL);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    pg->pid = 0;
    /* Its back ends are no children of ours: wait for them to be gone, or
     * one could still commit what a test sends after the "crash". */
    deadline = cr_test_now_ms() + (uint64_t)cr_test_tmo(10000);
    for (size_t i = 0; i < n; i++) {
        while (!cr_test_proc_is_gone(kids[i])) {
            if (cr_test_now_ms() >= deadline)
                return -ETIMEDOUT;
            usleep(2000);
        }
    }
    return 0;
}

int cr_test_pg_restart(struct cr_test_pg *pg)
{
    char bin[256];
    struct run_as as;
    int err;

    if (pg->pid > 0 || pg->dir[0] == '\0')
        return -EINVAL;
    err = find_server(bin, sizeof(bin), &as);
    if (err == 0)
        err = start_server(pg, &as, bin, pg->port);
    if (err < 0) {
        fprintf(stderr, "cr_test_pg_restart: %s\n", strerror(-err));
        print_log_tail(pg);
    }
    return err;
}

void cr_test_pg_stop(struct cr_test_pg *pg)
{
    if (pg->pid > 0) {
        int st;

        /* SIGINT is the fast shutdown: it rolls back open transactions
         * instead of waiting for their clients. */
        kill(pg->pid, SIGINT);
        if (cr_test_wait_exit(pg->pid, cr_test_tmo(10000), &st) == -ETIMEDOUT)
            fprintf(stderr, "cr_test_pg_stop: postgres %d killed after 10 s\n", (int)pg->pid);
        pg->pid = 0;
    }
    if (pg->dir[0] != '\0') {
        (void)cr_test_rmtree(pg->dir);
        pg->dir[0] = '\0';
    }
}
