/*
 * httpd_status_chromium.c (integration) - loads cabrank-httpd's status page
 * in headless Chromium (Debian's chromium package) under load, under the lf
 * model, and checks the DOM Chromium rendered after its scripts ran a few
 * seconds: the title, the workers table with one row per worker, and the
 * roles (leader, follower, processing) shown in it, and the timeline's
 * canvas drawn with a lane per thread and redrawn as its polls came back;
 * then under prefork: the scoreboard table with a row per worker process,
 * the one serving Chromium shown busy and another waiting (listening or
 * idle), and a timeline lane per worker process. A screenshot of each page
 * is left beside the test's log, httpd_status_chromium-<model>.png, for a
 * human to look at.
 * Heavy, so it runs only in the release variant: it skips (77) under the
 * sanitizer builds (CR_BUILD_DIR ending in /asan or /tsan) and when
 * /usr/bin/chromium is missing. Exit 0 pass, 1 fail, 77 skip.
 */
#include <cabrank/server.h>

#include "httpd_client.h"

#include <limits.h>
#include <poll.h>

#define CHROMIUM    "/usr/bin/chromium"
#define DOM_MAX     (1024 * 1024)
#define CHROMIUM_MS 60000
#define VIRTUAL_MS  "4000"
#define LOAD_MS     90000 /* the load's cap, should the test not stop it */
#define LOAD_GAP_US 5000

/* Runs Chromium on url for what (--dump-dom, --screenshot=FILE) after its
 * scripts ran VIRTUAL_MS of virtual time; its stdout (the DOM) into dom.
 * 0 or -1. */
static int run_chromium(const char *url, const char *profile, const char *what, char *dom,
                        size_t cap)
{
    char datadir[400];
    char *argv[] = {CHROMIUM,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--window-size=1280,1100",
                    "--hide-scrollbars",
                    "--virtual-time-budget=" VIRTUAL_MS,
                    datadir,
                    (char *)what,
                    (char *)url,
                    NULL};
    uint64_t deadline = cr_test_now_ms() + CHROMIUM_MS;
    size_t len = 0;
    int pfd[2];
    int status = 0;
    pid_t pid;

    snprintf(datadir, sizeof(datadir), "--user-data-dir=%s", profile);
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);

        dup2(pfd[1], STDOUT_FILENO);
        if (devnull >= 0)
            dup2(devnull, STDERR_FILENO); /* its chatter about D-Bus and GPUs */
        setenv("HOME", profile, 1);
        execv(argv[0], argv);
        _exit(127);
    }
    close(pfd[1]);
    while (len < cap - 1) {
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        uint64_t now = cr_test_now_ms();
        ssize_t n;

        if (now >= deadline) {
            fprintf(stderr, "chromium: no DOM after %d ms\n", CHROMIUM_MS);
            kill(pid, SIGKILL);
            break;
        }
        if (poll(&p, 1, (int)(deadline - now)) <= 0)
            continue;
        n = read(pfd[0], dom + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    dom[len] = '\0';
    close(pfd[0]);
    if (cr_test_wait_exit(pid, 10000, &status) < 0 || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        fprintf(stderr, "chromium: exit status %d\n", status);
    return len > 0 || strncmp(what, "--screenshot", 12) == 0 ? 0 : -1;
}

/* A child that asks for a file on a new connection every LOAD_GAP_US until
 * killed (at most LOAD_MS): the page is rendered under load, light enough
 * that some prefork worker is seen waiting. */
static pid_t start_load(uint16_t port)
{
    pid_t pid = fork();

    if (pid == 0) {
        uint64_t end = cr_test_now_ms() + LOAD_MS;

        while (cr_test_now_ms() < end) {
            (void)hc_status(port, "GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n");
            usleep(LOAD_GAP_US);
        }
        _exit(0);
    }
    return pid;
}

/* The value of the attribute attr="N" in s, or -1. */
static long attr_num(const char *s, const char *attr)
{
    const char *p = s != NULL ? strstr(s, attr) : NULL;

    return p != NULL ? strtol(p + strlen(attr), NULL, 10) : -1;
}

/* The timeline's canvas: drawn with lanes lanes, redrawn at least twice. */
static void check_timeline(const char *dom, const char *model, long lanes)
{
    const char *tl = strstr(dom, "id=\"tl\"");
    long drawn = attr_num(tl, "data-lanes=\"");
    long updates = attr_num(tl, "data-updates=\"");

    CHECK(tl != NULL, "%s: no timeline canvas", model);
    CHECK(drawn == lanes, "%s: timeline drew %ld lanes, not %ld", model, drawn, lanes);
    CHECK(updates >= 2, "%s: timeline drawn %ld times", model, updates);
    CHECK(strstr(dom, "leadership handed on") != NULL, "%s: no timeline legend", model);
}

/* The PNG Chromium left at path, checked for its signature. */
static void check_png(const char *path, const char *model)
{
    unsigned char sig[8] = {0};
    FILE *f = fopen(path, "rb");
    bool ok = f != NULL && fread(sig, 1, sizeof(sig), f) == sizeof(sig) &&
              memcmp(sig, "\x89PNG\r\n\x1a\n", 8) == 0;

    if (f != NULL)
        fclose(f);
    CHECK(ok, "%s: no screenshot at %s", model, path);
    if (ok)
        fprintf(stderr, "%s: screenshot %s\n", model, path);
}

static int count(const char *hay, const char *needle)
{
    int n = 0;

    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* Serves root under args, loads the status page in Chromium into dom.
 * 0, or -1 after a failed CHECK. */
static int render(const char *root, const char *profile, const char *const *args, char *dom)
{
    const char *build = getenv("CR_BUILD_DIR");
    struct hc_server s;
    char url[128];
    char shot[PATH_MAX];
    char out[4096]; /* what Chromium prints while it takes the screenshot */
    pid_t load;
    int err = 0;

    if (hc_start(&s, root, args) < 0) {
        CHECK(false, "%s: start", args[1]);
        return -1;
    }
    /* Some traffic first, so counters and the histogram have something. */
    for (int i = 0; i < 20; i++)
        (void)hc_status(s.port, "GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n");
    load = start_load(s.port);
    CHECK(load > 0, "%s: load", args[1]);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/server-status", s.port);
    if (run_chromium(url, profile, "--dump-dom", dom, DOM_MAX) < 0) {
        CHECK(false, "%s: chromium gave no DOM", args[1]);
        err = -1;
    }
    snprintf(shot, sizeof(shot), "--screenshot=%s/integration/httpd_status_chromium-%s.png",
             build != NULL ? build : "build", args[1]);
    (void)unlink(shot + strlen("--screenshot="));
    if (run_chromium(url, profile, shot, out, sizeof(out)) == 0)
        check_png(shot + strlen("--screenshot="), args[1]);
    if (load > 0) {
        int st;

        kill(load, SIGKILL);
        (void)cr_test_wait_exit(load, 10000, &st);
    }
    CHECK(hc_stop(&s) == 0, "%s: graceful stop", args[1]);
    return err;
}

static void check_lf(const char *root, const char *profile, char *dom)
{
    const char *const args[] = {"--model", "lf", "--threads", "4", NULL};
    int rows;

    if (render(root, profile, args, dom) < 0)
        return;
    rows = count(dom, "<tr><td>");
    CHECK(strstr(dom, "<title>cabrank-httpd status</title>") != NULL, "title");
    CHECK(strstr(dom, "id=\"workers\"") != NULL, "workers table");
    CHECK(count(dom, "class=\"role ") >= 4, "role cells");
    /* Chromium's own request is being processed while the other
     * workers lead or follow. */
    CHECK(strstr(dom, ">processing<") != NULL, "no worker shown processing");
    CHECK(strstr(dom, ">leader<") != NULL || strstr(dom, ">follower<") != NULL,
          "no worker shown leading or following");
    CHECK(strstr(dom, "Model <b>lf</b>") != NULL, "model");
    CHECK(rows >= 4, "%d rows", rows);
    check_timeline(dom, "lf", 4);
}

static void check_prefork(const char *root, const char *profile, char *dom)
{
    const char *const args[] = {"--model", "prefork", "--workers", "3", NULL};
    const char *table;

    if (render(root, profile, args, dom) < 0)
        return;
    check_timeline(dom, "prefork", 3);
    table = strstr(dom, "id=\"scoreboard\"");
    CHECK(strstr(dom, "Model <b>prefork</b>") != NULL, "prefork: model");
    CHECK(table != NULL, "prefork: no scoreboard table");
    if (table == NULL)
        return;
    /* A row per worker process, then the totals. */
    CHECK(count(table, "<tr><td>") >= 3, "prefork: %d scoreboard rows", count(table, "<tr><td>"));
    CHECK(strstr(table, ">busy<") != NULL, "prefork: the worker serving Chromium not shown busy");
    CHECK(strstr(table, ">listening<") != NULL || strstr(table, ">idle<") != NULL,
          "prefork: no worker shown waiting");
    CHECK(strstr(table, "total (") != NULL, "prefork: no totals row");
}

int main(void)
{
    const char *build = getenv("CR_BUILD_DIR");
    char dir[256];
    char root[300];
    char profile[300];
    char *dom;
    int rc = 1;

    if (hc_is_sanitized()) {
        printf("release variant only (%s)\n", build);
        return 77;
    }
    if (access(CHROMIUM, X_OK) < 0) {
        printf("%s not installed\n", CHROMIUM);
        return 77;
    }
    dom = malloc(DOM_MAX);
    if (dom == NULL || hc_mkdtemp(dir, sizeof(dir)) < 0) {
        free(dom);
        return 1;
    }
    snprintf(root, sizeof(root), "%s/root", dir);
    snprintf(profile, sizeof(profile), "%s/profile", dir);
    if (mkdir(root, 0755) < 0 || mkdir(profile, 0700) < 0 ||
        hc_write_file(root, "index.html", "i\n", 2) < 0)
        goto out;
    check_lf(root, profile, dom);
    check_prefork(root, profile, dom);
    if (hc_failures != 0)
        fprintf(stderr, "the DOM:\n%.6000s\n", dom);
    if (hc_failures == 0) {
        fprintf(stderr, "httpd_status_chromium: ok\n");
        rc = 0;
    } else {
        fprintf(stderr, "httpd_status_chromium: %d check(s) failed\n", hc_failures);
    }
out:
    (void)cr_test_rmtree(dir);
    free(dom);
    return rc;
}
