/*
 * httpd_curl.c (integration) - cabrank-httpd against a real client, curl:
 * GET, HEAD, a byte range, conditional requests (If-None-Match with the
 * ETag curl saw, If-Modified-Since with its Last-Modified), a real gzip
 * file decoded by curl --compressed, HTTP/1.0, several URLs over one reused
 * connection, and the status page. Skips (77) when curl is not installed.
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include "httpd_client.h"

#define HELLO "Hello, world\n"
#define TEXT                                                                                       \
    "cabrank serves this text plain or gzip-compressed, whichever the client accepts.\n"           \
    "cabrank serves this text plain or gzip-compressed, whichever the client accepts.\n"

static char dir[256];
static char root[300];

/* Runs argv (argv[0] found in PATH) with stdout into out[0..cap) (NUL-
 * terminated). Returns its exit status, or -1. */
static int run(char *const argv[], char *out, size_t cap)
{
    int pfd[2];
    size_t len = 0;
    int status = 0;
    pid_t pid;

    out[0] = '\0';
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(pfd[1], STDOUT_FILENO);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(pfd[1]);
    for (;;) {
        ssize_t n = read(pfd[0], out + len, cap - 1 - len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == cap - 1)
            break;
    }
    out[len] = '\0';
    close(pfd[0]);
    if (waitpid(pid, &status, 0) < 0)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static bool have(const char *prog)
{
    char out[64];
    char *argv[] = {(char *)prog, "--version", NULL};

    return run(argv, out, sizeof(out)) == 0;
}

/* Reads a whole small file into buf; its length or -1. */
static ssize_t slurp(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return -1;
    n = read(fd, buf, cap - 1);
    close(fd);
    if (n >= 0)
        buf[n] = '\0';
    return n;
}

/* A header's value from a curl -D dump (the last response in it). */
static bool dumped_header(const char *dump, const char *name, char *out, size_t cap)
{
    const char *last = dump;
    const char *p;
    struct hc_resp r;

    /* Keep the last response's head only. */
    while ((p = strstr(last + 1, "HTTP/1.")) != NULL)
        last = p;
    snprintf(r.head, sizeof(r.head), "%s", last);
    return hc_header(&r, name, out, cap);
}

int main(void)
{
    char url[128];
    char url2[128];
    char body[400];
    char hdrs[400];
    char out[8192];
    char dump[8192];
    char etag[128] = "";
    char lm[64] = "";
    char cond[256];
    const char *const args[] = {"--threads", "2", NULL};
    struct hc_server s;
    int rc = 1;

    if (!have("curl")) {
        printf("curl not installed\n");
        fprintf(stderr, "httpd_curl: curl not installed; skipped\n");
        return 77;
    }
    if (hc_mkdtemp(dir, sizeof(dir)) < 0)
        return 1;
    snprintf(root, sizeof(root), "%s/root", dir);
    snprintf(body, sizeof(body), "%s/body", dir);
    snprintf(hdrs, sizeof(hdrs), "%s/headers", dir);
    if (mkdir(root, 0755) < 0 || hc_write_file(root, "hello.txt", HELLO, 13) < 0 ||
        hc_write_file(root, "text.txt", TEXT, strlen(TEXT)) < 0) {
        fprintf(stderr, "httpd_curl: making the root: %s\n", strerror(errno));
        goto out_rm;
    }
    if (have("gzip")) {
        char path[400];
        char *gz[] = {"gzip", "-k", "-9", path, NULL};

        snprintf(path, sizeof(path), "%s/text.txt", root);
        CHECK(run(gz, out, sizeof(out)) == 0, "gzip -k");
    }
    if (hc_start(&s, root, args) < 0)
        goto out_rm;
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/hello.txt", s.port);

    {
        char *argv[] = {"curl", "-sS", "--max-time", "10",           "-o", body,
                        "-D",   hdrs,  "-w",         "%{http_code}", url,  NULL};

        CHECK(run(argv, out, sizeof(out)) == 0 && strcmp(out, "200") == 0, "GET: %s", out);
        CHECK(slurp(body, out, sizeof(out)) == 13 && strcmp(out, HELLO) == 0, "GET body");
        CHECK(slurp(hdrs, dump, sizeof(dump)) > 0 &&
                  dumped_header(dump, "ETag", etag, sizeof(etag)) &&
                  dumped_header(dump, "Last-Modified", lm, sizeof(lm)),
              "GET validators");
    }
    {
        char *argv[] = {"curl", "-sS", "--max-time", "10", "-I", url, NULL};
        char v[64];

        CHECK(run(argv, dump, sizeof(dump)) == 0 && strncmp(dump, "HTTP/1.1 200", 12) == 0,
              "HEAD: %.40s", dump);
        CHECK(dumped_header(dump, "Content-Length", v, sizeof(v)) && strcmp(v, "13") == 0,
              "HEAD Content-Length");
        CHECK(dumped_header(dump, "Server", v, sizeof(v)) && strcmp(v, "cabrank") == 0,
              "HEAD Server");
    }
    {
        char *argv[] = {"curl", "-sS", "--max-time", "10",           "-r", "0-4",
                        "-o",   body,  "-w",         "%{http_code}", url,  NULL};

        CHECK(run(argv, out, sizeof(out)) == 0 && strcmp(out, "206") == 0, "range: %s", out);
        CHECK(slurp(body, out, sizeof(out)) == 5 && strcmp(out, "Hello") == 0, "range body");
    }
    {
        char *argv[] = {"curl", "-sS", "--max-time", "10",           "-H", cond,
                        "-o",   body,  "-w",         "%{http_code}", url,  NULL};

        snprintf(cond, sizeof(cond), "If-None-Match: %s", etag);
        CHECK(run(argv, out, sizeof(out)) == 0 && strcmp(out, "304") == 0, "If-None-Match: %s",
              out);
        snprintf(cond, sizeof(cond), "If-Modified-Since: %s", lm);
        CHECK(run(argv, out, sizeof(out)) == 0 && strcmp(out, "304") == 0, "If-Modified-Since: %s",
              out);
        snprintf(cond, sizeof(cond), "If-Match: \"not-it\"");
        CHECK(run(argv, out, sizeof(out)) == 0 && strcmp(out, "412") == 0, "If-Match: %s", out);
    }
    if (have("gzip")) {
        char *argv[] = {"curl", "-sS", "--max-time", "10",           "--compressed", "-o", body,
                        "-D",   hdrs,  "-w",         "%{http_code}", url2,           NULL};
        char v[64];

        snprintf(url2, sizeof(url2), "http://127.0.0.1:%u/text.txt", s.port);
        CHECK(run(argv, out, sizeof(out)) == 0 && strcmp(out, "200") == 0, "compressed: %s", out);
        CHECK(slurp(body, out, sizeof(out)) == (ssize_t)strlen(TEXT) && strcmp(out, TEXT) == 0,
              "compressed body decoded");
        CHECK(slurp(hdrs, dump, sizeof(dump)) > 0 &&
                  dumped_header(dump, "Content-Encoding", v, sizeof(v)) && strcmp(v, "gzip") == 0,
              "Content-Encoding: gzip");
        CHECK(dumped_header(dump, "Vary", v, sizeof(v)) && strcmp(v, "Accept-Encoding") == 0,
              "Vary");
    }
    {
        char *argv[] = {"curl", "-sS", "--max-time",
                        "10",   "-0",  "-o",
                        body,   "-w",  "%{http_code} %{http_version}",
                        url,    NULL};

        CHECK(run(argv, out, sizeof(out)) == 0 && strcmp(out, "200 1.1") == 0, "HTTP/1.0: %s", out);
    }
    {
        /* Three URLs, one connection: curl reports how many it opened. */
        char *argv[] = {"curl", "-sS",       "--max-time", "10",
                        "-o",   "/dev/null", "-o",         "/dev/null",
                        "-o",   "/dev/null", "-w",         "%{http_code} %{num_connects}\n",
                        url,    url,         url,          NULL};

        CHECK(run(argv, out, sizeof(out)) == 0 && strcmp(out, "200 1\n200 0\n200 0\n") == 0,
              "connection reuse: %s", out);
    }
    {
        char *argv[] = {"curl", "-sS", "--max-time",   "10", "-o",
                        body,   "-w",  "%{http_code}", url2, NULL};

        snprintf(url2, sizeof(url2), "http://127.0.0.1:%u/server-status?format=json", s.port);
        CHECK(run(argv, out, sizeof(out)) == 0 && strcmp(out, "200") == 0, "status: %s", out);
        CHECK(slurp(body, dump, sizeof(dump)) > 0 && strstr(dump, "\"workers\"") != NULL,
              "status JSON");
        snprintf(url2, sizeof(url2), "http://127.0.0.1:%u/nope", s.port);
        CHECK(run(argv, out, sizeof(out)) == 0 && strcmp(out, "404") == 0, "404: %s", out);
    }
    CHECK(hc_stop(&s) == 0, "graceful stop");
    if (hc_failures == 0) {
        fprintf(stderr, "httpd_curl: ok\n");
        rc = 0;
    } else {
        fprintf(stderr, "httpd_curl: %d check(s) failed\n", hc_failures);
    }
out_rm:
    (void)cr_test_rmtree(dir);
    return rc;
}
