/*
 * peers.c - the peers cabrank-bench measures beside cabrank-httpd, with the settings of the
 * project's peers.sh (kept in the program: users' clones have no ../shared): nginx (2
 * worker processes, sendfile), h2o (2 threads), lighttpd (sendfile backend), Apache with
 * the event MPM (2 x 64 threads) and the prefork MPM (72 processes up front); with --cores
 * the worker count follows the server's cores (nginx's processes, h2o's threads, lighttpd's
 * worker processes, Apache event's processes; prefork keeps a process per connection); access logs
 * off, keep-alive without a request limit, everything on 127.0.0.1. Configurations are
 * written into the run's work directory; started as root, the servers drop to nobody.
 * The canned peers (canned.h) are this program itself, in its hidden mode. Single-threaded;
 * owns nothing once it returns.
 */
#include "canned.h"
#include "driver.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define APACHE_MODS "/usr/lib/apache2/modules"

const char *const bench_peer_names[] = {
    "nginx", "h2o", "lighttpd", "apache-event", "apache-prefork", NULL,
};

static const char *program_of(const char *name)
{
    if (strcmp(name, "nginx") == 0 || strcmp(name, "h2o") == 0 || strcmp(name, "lighttpd") == 0)
        return name;
    if (strcmp(name, "apache-event") == 0 || strcmp(name, "apache-prefork") == 0)
        return "apache2";
    return NULL;
}

/* Finds prog in PATH, then /usr/sbin and /sbin (not in a user's PATH on Debian). */
static bool find_program(const char *prog, char *out, size_t cap)
{
    const char *env = getenv("PATH");
    char path[4096];
    char *save = NULL;
    static const char *const extra[] = {"/usr/sbin", "/sbin", "/usr/local/sbin"};

    snprintf(path, sizeof(path), "%s", env != NULL ? env : "/usr/bin:/bin");
    for (char *d = strtok_r(path, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
        if (snprintf(out, cap, "%s/%s", d, prog) < (int)cap && access(out, X_OK) == 0)
            return true;
    }
    for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
        if (snprintf(out, cap, "%s/%s", extra[i], prog) < (int)cap && access(out, X_OK) == 0)
            return true;
    }
    return false;
}

bool bench_peer_installed(const char *name)
{
    const char *prog = program_of(name);
    char path[PATH_MAX];

    if (prog == NULL || !find_program(prog, path, sizeof(path)))
        return false;
    if (strncmp(name, "apache-", 7) == 0) {
        char mod[PATH_MAX];

        snprintf(mod, sizeof(mod), APACHE_MODS "/mod_mpm_%s.so", name + 7);
        return access(mod, R_OK) == 0;
    }
    return true;
}

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    int err = 0;

    if (f == NULL)
        return -errno;
    if (fputs(text, f) < 0)
        err = -EIO;
    if (fclose(f) != 0 && err == 0)
        err = -errno;
    return err;
}

static void set_argv(struct bench_peer_cmd *cmd, int n, const char *s)
{
    snprintf(cmd->strs[n], sizeof(cmd->strs[n]), "%s", s);
    cmd->argv[n] = cmd->strs[n];
    cmd->argv[n + 1] = NULL;
}

static int nginx_conf(const char *dir, uint16_t port, bool root, unsigned workers, char *text,
                      size_t cap)
{
    int n;
    char tmp[PATH_MAX];

    /* nginx opens <prefix>/logs/error.log before it reads the configuration. */
    snprintf(tmp, sizeof(tmp), "%s/logs", dir);
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
        return -errno;
    snprintf(tmp, sizeof(tmp), "%s/nginx-tmp", dir);
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
        return -errno;
    n = snprintf(text, cap,
                 "daemon off;\n"
                 "master_process on;\n"
                 "%s"
                 "worker_processes %u;\n"
                 "pid %s/run/nginx.pid;\n"
                 "error_log %s/run/nginx.err warn;\n"
                 "events { worker_connections 4096; }\n"
                 "http {\n"
                 "  access_log off;\n"
                 "  sendfile on;\n"
                 "  keepalive_requests 1000000;\n"
                 "  client_body_temp_path %s/body; proxy_temp_path %s/proxy;\n"
                 "  fastcgi_temp_path %s/fcgi; uwsgi_temp_path %s/uwsgi; scgi_temp_path %s/scgi;\n"
                 "  types { text/plain txt; application/octet-stream bin; }\n"
                 "  server { listen 127.0.0.1:%u; root %s/www; }\n"
                 "}\n",
                 root ? "user nobody nogroup;\n" : "", workers, dir, dir, tmp, tmp, tmp, tmp, tmp,
                 (unsigned)port, dir);
    return n < (int)cap ? 0 : -ENAMETOOLONG;
}

/* h2o 2.2 has no sendfile switch (it pread()s files into its buffers); no access-log: none. */
static int h2o_conf(const char *dir, uint16_t port, bool root, unsigned workers, char *text,
                    size_t cap)
{
    int n;
    n = snprintf(text, cap,
                 "%s"
                 "error-log: %s/run/h2o.err\n"
                 "num-threads: %u\n"
                 "listen:\n"
                 "  host: 127.0.0.1\n"
                 "  port: %u\n"
                 "hosts:\n"
                 "  default:\n"
                 "    paths:\n"
                 "      /:\n"
                 "        file.dir: %s/www\n",
                 root ? "user: nobody\n" : "", dir, workers, (unsigned)port, dir);
    return n < (int)cap ? 0 : -ENAMETOOLONG;
}

/* lighttpd: one process (max-worker 0), or with --cores a worker process per core. */
static int lighttpd_conf(const char *dir, uint16_t port, bool root, unsigned cores, char *text,
                         size_t cap)
{
    int n;
    n = snprintf(text, cap,
                 "server.document-root = \"%s/www\"\n"
                 "server.bind = \"127.0.0.1\"\n"
                 "server.port = %u\n"
                 "%s"
                 "server.errorlog = \"%s/run/lighttpd.err\"\n"
                 "server.max-worker = %u\n"
                 "server.network-backend = \"sendfile\"\n"
                 "server.max-keep-alive-requests = 1000000\n"
                 "mimetype.assign = (\".txt\" => \"text/plain\", \".bin\" => "
                 "\"application/octet-stream\")\n",
                 dir, (unsigned)port,
                 root ? "server.username = \"nobody\"\nserver.groupname = \"nogroup\"\n" : "", dir,
                 cores > 1 ? cores : 0);
    return n < (int)cap ? 0 : -ENAMETOOLONG;
}

/* Apache event: a process of 64 threads per core (2 without --cores); prefork: a process per
 * connection whatever the cores. */
static int apache_conf(const char *dir, const char *mpm, uint16_t port, bool root, unsigned cores,
                       char *text, size_t cap)
{
    int n;
    char rundir[PATH_MAX];
    char event[256];
    unsigned procs = cores > 0 ? cores : 2;

    snprintf(event, sizeof(event),
             "StartServers %u\nServerLimit %u\nThreadLimit 64\nThreadsPerChild 64\n"
             "MaxRequestWorkers %u\nMinSpareThreads 64\nMaxSpareThreads %u\n",
             procs, procs, procs * 64, procs * 64);

    snprintf(rundir, sizeof(rundir), "%s/apache-%s-run", dir, mpm);
    if (mkdir(rundir, 0755) < 0 && errno != EEXIST)
        return -errno;
    n = snprintf(text, cap,
                 "ServerRoot \"%s\"\n"
                 "ServerName 127.0.0.1\n"
                 "Listen 127.0.0.1:%u\n"
                 "PidFile %s/run/apache-%s.pid\n"
                 "DefaultRuntimeDir %s\n"
                 "ErrorLog %s/run/apache-%s.err\n"
                 "LogLevel warn\n"
                 "%s"
                 "LoadModule mpm_%s_module " APACHE_MODS "/mod_mpm_%s.so\n"
                 "LoadModule authz_core_module " APACHE_MODS "/mod_authz_core.so\n"
                 "LoadModule mime_module " APACHE_MODS "/mod_mime.so\n"
                 "TypesConfig /dev/null\n"
                 "AddType text/plain .txt\n"
                 "AddType application/octet-stream .bin\n"
                 "DocumentRoot \"%s/www\"\n"
                 "<Directory \"%s/www\">\n"
                 "  Options None\n"
                 "  AllowOverride None\n"
                 "  Require all granted\n"
                 "</Directory>\n"
                 "KeepAlive On\n"
                 "MaxKeepAliveRequests 0\n"
                 "KeepAliveTimeout 5\n"
                 "EnableSendfile On\n"
                 "EnableMMAP On\n"
                 "%s",
                 dir, (unsigned)port, dir, mpm, rundir, dir, mpm,
                 root ? "User nobody\nGroup nogroup\n" : "", mpm, mpm, dir, dir,
                 strcmp(mpm, "event") == 0
                     ? event
                     /* prefork: a process per connection, so they are started up front. */
                     : "StartServers 72\nServerLimit 128\nMaxRequestWorkers 128\n"
                       "MinSpareServers 8\nMaxSpareServers 128\n");
    return n < (int)cap ? 0 : -ENAMETOOLONG;
}

int bench_peer_prepare(const char *name, const char *dir, uint16_t port, unsigned cores,
                       struct bench_peer_cmd *cmd)
{
    unsigned workers = cores > 0 ? cores : 2;
    static char text[8192];
    char conf[PATH_MAX];
    bool root = geteuid() == 0;
    const char *prog = program_of(name);
    int err = 0;

    if (prog == NULL || !find_program(prog, cmd->strs[0], sizeof(cmd->strs[0])))
        return -ENOENT;
    cmd->argv[0] = cmd->strs[0];
    snprintf(conf, sizeof(conf), "%s/%s.conf", dir, name);
    snprintf(cmd->log, sizeof(cmd->log), "%s/run/%s.log", dir, name);
    if (strcmp(name, "nginx") == 0) {
        char prefix[PATH_MAX];

        err = nginx_conf(dir, port, root, workers, text, sizeof(text));
        snprintf(prefix, sizeof(prefix), "%s/", dir);
        set_argv(cmd, 1, "-p");
        set_argv(cmd, 2, prefix);
        set_argv(cmd, 3, "-c");
        set_argv(cmd, 4, conf);
    } else if (strcmp(name, "h2o") == 0) {
        err = h2o_conf(dir, port, root, workers, text, sizeof(text));
        set_argv(cmd, 1, "-c");
        set_argv(cmd, 2, conf);
    } else if (strcmp(name, "lighttpd") == 0) {
        err = lighttpd_conf(dir, port, root, cores, text, sizeof(text));
        set_argv(cmd, 1, "-D");
        set_argv(cmd, 2, "-f");
        set_argv(cmd, 3, conf);
    } else {
        err = apache_conf(dir, name + strlen("apache-"), port, root, cores, text, sizeof(text));
        set_argv(cmd, 1, "-DFOREGROUND");
        set_argv(cmd, 2, "-f");
        set_argv(cmd, 3, conf);
    }
    if (err == 0)
        err = write_text(conf, text);
    return err;
}

int bench_canned_prepare(const char *name, const char *dir, struct bench_peer_cmd *cmd)
{
    ssize_t n;

    if (!bench_is_canned(name))
        return -ENOENT;
    /* The log first: the caller names it when anything after fails. */
    if (snprintf(cmd->log, sizeof(cmd->log), "%s/run/%s.log", dir, name) >= (int)sizeof(cmd->log))
        return -ENAMETOOLONG;
    n = readlink("/proc/self/exe", cmd->strs[0], sizeof(cmd->strs[0]) - 1);
    if (n < 0)
        return -errno;
    if ((size_t)n >= sizeof(cmd->strs[0]) - 1)
        return -ENAMETOOLONG;
    cmd->strs[0][n] = '\0';
    cmd->argv[0] = cmd->strs[0];
    set_argv(cmd, 1, "--canned");
    set_argv(cmd, 2, name + strlen("canned-"));
    set_argv(cmd, 3, "--listen");
    set_argv(cmd, 4, "127.0.0.1:0");
    return 0;
}
