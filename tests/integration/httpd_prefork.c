/*
 * httpd_prefork.c (integration) - cabrank-httpd under the process models,
 * prefork and forking, each started from a --config file: files served;
 * the status page's JSON is valid and shows the scoreboard (pids of our own
 * children; prefork: the generation); SIGHUP every second for 10 s,
 * while a client thread sends Connection: close requests: none fails, the
 * generation advances (prefork) and the old generations drain; a document
 * root changed in the file is served after a SIGHUP; every request the
 * client made is in the access log exactly once (workers write their lines
 * through the service's process hooks, across forks and restarts); a worker
 * killed with SIGKILL is replaced (prefork) or costs only its connection
 * (forking); SIGTERM: exit 0 and no worker process left. Each model runs
 * once cr_server_models() lists it; exit 77 (skip) while neither is.
 * Exit 0 pass, 1 fail.
 */
#include <cabrank/server.h>

#include "httpd_client.h"

#include <ctype.h>
#include <pthread.h>

#define HELLO       "Hello, world\n"
#define MIDSIZE     (200u * 1024)
#define HUPS        10
#define HUP_GAP_MS  1000
#define LOAD_MAX    200000 /* requests the load thread sends at most */
#define MAX_PIDS    512
#define STATUS_JSON "GET /server-status?format=json HTTP/1.1\r\nHost: t\r\n\r\n"

static unsigned char mid[MIDSIZE];
static char dir[256];
static char root_a[300];
static char root_b[300];
static char conf[300];
static char access_log[300];

/* ------------------------------------------------------------------ JSON */

/* A small validating JSON parser (RFC 8259 grammar), enough to say the
 * status page's JSON is well-formed. */
struct js {
    const char *p;
    int depth;
};

static void js_ws(struct js *j)
{
    while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')
        j->p++;
}

static bool js_value(struct js *j);

static bool js_string(struct js *j)
{
    if (*j->p != '"')
        return false;
    for (j->p++; *j->p != '"'; j->p++) {
        if ((unsigned char)*j->p < 0x20)
            return false;
        if (*j->p == '\\') {
            j->p++;
            if (*j->p == 'u') {
                for (int i = 0; i < 4; i++) {
                    if (!isxdigit((unsigned char)*++j->p))
                        return false;
                }
            } else if (strchr("\"\\/bfnrt", *j->p) == NULL || *j->p == '\0') {
                return false;
            }
        }
    }
    j->p++;
    return true;
}

static bool js_number(struct js *j)
{
    const char *s = j->p;

    if (*j->p == '-')
        j->p++;
    if (*j->p == '0') {
        j->p++;
    } else if (*j->p >= '1' && *j->p <= '9') {
        while (isdigit((unsigned char)*j->p))
            j->p++;
    } else {
        return false;
    }
    if (*j->p == '.') {
        j->p++;
        if (!isdigit((unsigned char)*j->p))
            return false;
        while (isdigit((unsigned char)*j->p))
            j->p++;
    }
    if (*j->p == 'e' || *j->p == 'E') {
        j->p++;
        if (*j->p == '+' || *j->p == '-')
            j->p++;
        if (!isdigit((unsigned char)*j->p))
            return false;
        while (isdigit((unsigned char)*j->p))
            j->p++;
    }
    return j->p > s;
}

static bool js_seq(struct js *j, char close, bool object)
{
    j->p++;
    js_ws(j);
    if (*j->p == close) {
        j->p++;
        return true;
    }
    for (;;) {
        js_ws(j);
        if (object) {
            if (!js_string(j))
                return false;
            js_ws(j);
            if (*j->p++ != ':')
                return false;
        }
        if (!js_value(j))
            return false;
        js_ws(j);
        if (*j->p == close) {
            j->p++;
            return true;
        }
        if (*j->p++ != ',')
            return false;
    }
}

static bool js_value(struct js *j)
{
    bool ok;

    js_ws(j);
    if (++j->depth > 64)
        return false;
    switch (*j->p) {
    case '{':
        ok = js_seq(j, '}', true);
        break;
    case '[':
        ok = js_seq(j, ']', false);
        break;
    case '"':
        ok = js_string(j);
        break;
    case 't':
        ok = strncmp(j->p, "true", 4) == 0 && (j->p += 4);
        break;
    case 'f':
        ok = strncmp(j->p, "false", 5) == 0 && (j->p += 5);
        break;
    case 'n':
        ok = strncmp(j->p, "null", 4) == 0 && (j->p += 4);
        break;
    default:
        ok = js_number(j);
        break;
    }
    j->depth--;
    return ok;
}

static bool json_valid(const char *s)
{
    struct js j = {.p = s};

    if (!js_value(&j))
        return false;
    js_ws(&j);
    return *j.p == '\0';
}

/* The number after "key": at or after from; -1 when absent. */
static long long json_num(const char *from, const char *key)
{
    char k[64];
    const char *p;

    snprintf(k, sizeof(k), "\"%s\":", key);
    p = from != NULL ? strstr(from, k) : NULL;
    return p != NULL ? strtoll(p + strlen(k), NULL, 10) : -1;
}

/* ------------------------------------------------------------------ status */

struct board {
    int pids[64];
    unsigned gens[64];
    unsigned n;
    long long generation;
    long long processes;
    long long restarts;
    long long crashes;
    long long requests;
};

/* Reads the status JSON into b. 0, or -1 (not 200, not valid JSON, no
 * scoreboard). */
static int read_board(uint16_t port, struct board *b, bool quiet)
{
    struct hc_resp r;
    const char *sb;
    const char *end;
    int err = hc_get(port, STATUS_JSON, &r);

    memset(b, 0, sizeof(*b));
    if (err < 0 || r.status != 200 || r.body == NULL) {
        if (!quiet)
            fprintf(stderr, "status: %d %d\n", err, r.status);
        hc_resp_free(&r);
        return -1;
    }
    if (!json_valid(r.body)) {
        fprintf(stderr, "status JSON not valid: %s\n", r.body);
        hc_resp_free(&r);
        return -1;
    }
    sb = strstr(r.body, "\"scoreboard\":[");
    end = sb != NULL ? strstr(sb, "]") : NULL;
    if (sb == NULL || end == NULL) {
        if (!quiet)
            fprintf(stderr, "status without a scoreboard: %s\n", r.body);
        hc_resp_free(&r);
        return -1;
    }
    b->generation = json_num(r.body, "generation");
    b->processes = json_num(r.body, "processes");
    b->restarts = json_num(r.body, "restarts");
    b->crashes = json_num(r.body, "crashes");
    b->requests = json_num(r.body, "requests");
    for (const char *p = strstr(sb, "{\"pid\":"); p != NULL && p < end && b->n < 64;
         p = strstr(p + 1, "{\"pid\":")) {
        b->pids[b->n] = (int)json_num(p, "pid");
        b->gens[b->n] = (unsigned)json_num(p, "generation");
        b->n++;
    }
    hc_resp_free(&r);
    return 0;
}

/* Every pid a scoreboard showed, to check none is left at the end. */
static int seen_pids[MAX_PIDS];
static unsigned nseen;

static void remember(const struct board *b)
{
    for (unsigned i = 0; i < b->n; i++) {
        bool known = false;

        for (unsigned k = 0; k < nseen; k++)
            known = known || seen_pids[k] == b->pids[i];
        if (!known && nseen < MAX_PIDS)
            seen_pids[nseen++] = b->pids[i];
    }
}

/* The parent pid of pid from /proc; -1 when it is gone. */
static int parent_of(int pid)
{
    char state;
    pid_t ppid;

    return cr_test_proc_stat(pid, &state, &ppid) ? (int)ppid : -1;
}

/* ------------------------------------------------------------------ load */

/* A client thread: Connection: close requests of /hello.txt?i=N, N from 0,
 * until told to stop. Counts; never CHECKs (hc_failures is the main
 * thread's). */
struct load {
    uint16_t port;
    int stop; /* relaxed atomic, set by the main thread */
    unsigned sent;
    unsigned ok;
    unsigned failed;
    char first_error[160];
};

static void *load_main(void *arg)
{
    struct load *l = arg;
    char req[128];

    while (!__atomic_load_n(&l->stop, __ATOMIC_RELAXED) && l->sent < LOAD_MAX) {
        struct hc_resp r;
        int err;

        snprintf(req, sizeof(req),
                 "GET /hello.txt?i=%u HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", l->sent);
        l->sent++;
        err = hc_get(l->port, req, &r);
        if (err == 0 && r.status == 200 && r.body_len == strlen(HELLO) &&
            memcmp(r.body, HELLO, r.body_len) == 0) {
            l->ok++;
        } else {
            if (l->failed++ == 0)
                snprintf(l->first_error, sizeof(l->first_error), "request %u: err %d status %d",
                         l->sent - 1, err, r.status);
        }
        hc_resp_free(&r);
    }
    return NULL;
}

/* ------------------------------------------------------------------ steps */

static void write_conf(const char *root)
{
    char text[1024];
    int n = snprintf(text, sizeof(text),
                     "# httpd_prefork test configuration\n"
                     "root %s\n"
                     "workers 2   # started at once\n"
                     "max-workers 16\n"
                     "access-log %s\n"
                     "log-format common\n",
                     root, access_log);

    CHECK(hc_write_file(dir, "httpd.conf", text, (size_t)n) == 0, "writing the configuration");
}

/* GET /which.txt on a new connection: 'A', 'B' or 0. */
static char which(uint16_t port)
{
    struct hc_resp r;
    char c = 0;

    if (hc_get(port, "GET /which.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0 && r.status == 200 &&
        r.body_len == 1)
        c = r.body[0];
    hc_resp_free(&r);
    return c;
}

static void serves_files(uint16_t port, const char *model)
{
    struct cr_test_client cl;
    struct hc_resp r;

    if (hc_open(&cl, port) < 0) {
        hc_failures++;
        return;
    }
    for (int i = 0; i < 3; i++) {
        CHECK(hc_request(&cl, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) ==
                      0 &&
                  r.status == 200 && r.body_len == strlen(HELLO) &&
                  memcmp(r.body, HELLO, r.body_len) == 0,
              "%s: keep-alive GET %d", model, i);
        hc_resp_free(&r);
    }
    CHECK(hc_request(&cl, "GET /mid.bin HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) == 0 &&
              r.status == 200 && r.body_len == MIDSIZE && memcmp(r.body, mid, MIDSIZE) == 0,
          "%s: a file through sendfile", model);
    hc_resp_free(&r);
    CHECK(hc_request(&cl, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) == 0 &&
              r.status == 404,
          "%s: 404", model);
    hc_resp_free(&r);
    cr_test_client_close(&cl);
    CHECK(which(port) == 'A', "%s: the root from the configuration file", model);
}

static void shows_the_scoreboard(uint16_t port, pid_t server, const char *model, bool prefork)
{
    struct board b;
    struct hc_resp r;

    CHECK(read_board(port, &b, false) == 0, "%s: status JSON with a scoreboard", model);
    remember(&b);
    CHECK(b.n >= 1, "%s: scoreboard has %u slots", model, b.n);
    /* Under forking a slot's child exits once its connection closes (the one
     * that served this very page among them), so a pid may be gone by now:
     * gone is fine, alive under another parent is not. Prefork's workers
     * stay. */
    for (unsigned i = 0; i < b.n; i++) {
        int pp = b.pids[i] > 0 ? parent_of(b.pids[i]) : 0;

        CHECK(b.pids[i] > 0 && (pp == (int)server || (!prefork && pp == -1)),
              "%s: scoreboard pid %d is not a child of the server %d", model, b.pids[i],
              (int)server);
    }
    if (prefork) {
        CHECK(b.generation == 1, "%s: generation %lld, want 1", model, b.generation);
        CHECK(b.n >= 2 && b.processes >= 2, "%s: %u slots, %lld processes for --workers 2", model,
              b.n, b.processes);
    }
    CHECK(hc_get(port, "GET /server-status HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0 &&
              r.status == 200 && r.body != NULL && strstr(r.body, "id=\"scoreboard\"") != NULL &&
              strstr(r.body, "http-equiv=\"refresh\"") != NULL,
          "%s: the HTML page shows the scoreboard and refreshes itself", model);
    hc_resp_free(&r);
}

/* Ten HUPs under Connection: close load; returns how many requests the
 * load sent (its request numbers are 0..sent-1). */
static unsigned hups_under_load(uint16_t port, pid_t server, const char *model, bool prefork)
{
    struct load l = {.port = port};
    pthread_t th;
    struct board b;
    uint64_t deadline;
    bool drained = false;

    if (pthread_create(&th, NULL, load_main, &l) != 0) {
        CHECK(false, "%s: load thread", model);
        return 0;
    }
    for (int i = 0; i < HUPS; i++) {
        usleep(HUP_GAP_MS * 1000);
        kill(server, SIGHUP);
        if (read_board(port, &b, true) == 0)
            remember(&b);
    }
    usleep(HUP_GAP_MS * 1000);
    __atomic_store_n(&l.stop, 1, __ATOMIC_RELAXED);
    pthread_join(th, NULL);
    fprintf(stderr, "%s: %u requests under %d HUPs, %u failed\n", model, l.sent, HUPS, l.failed);
    CHECK(l.ok > 0, "%s: no request succeeded under HUPs", model);
    CHECK(l.failed == 0, "%s: %u of %u requests failed under HUPs (%s)", model, l.failed, l.sent,
          l.first_error);

    /* Old generations drain: soon every slot is of the newest one. */
    deadline = cr_test_now_ms() + (uint64_t)hc_tmo(10000);
    do {
        if (read_board(port, &b, true) == 0) {
            remember(&b);
            drained = true;
            for (unsigned i = 0; i < b.n; i++)
                drained = drained && (!prefork || (long long)b.gens[i] == b.generation);
        }
        if (!drained)
            usleep(50 * 1000);
    } while (!drained && cr_test_now_ms() < deadline);
    CHECK(drained, "%s: old generations did not drain", model);
    if (prefork) {
        /* Signals sent close together may merge into one: at least one
         * restart, and every restart a generation. */
        CHECK(b.generation >= 2 && b.restarts == b.generation - 1,
              "%s: generation %lld after %lld restarts", model, b.generation, b.restarts);
    }
    return l.sent;
}

static void root_change_after_hup(uint16_t port, pid_t server, const char *model)
{
    uint64_t deadline;
    char c = 0;

    write_conf(root_b);
    kill(server, SIGHUP);
    deadline = cr_test_now_ms() + (uint64_t)hc_tmo(10000);
    while ((c = which(port)) != 'B' && cr_test_now_ms() < deadline)
        usleep(50 * 1000);
    CHECK(c == 'B', "%s: the new root not served after SIGHUP (got '%c')", model, c ? c : '0');
    /* Same file in both roots: the load's requests see no difference. */
}

/* Every load request (numbers below sent) is in the access log once. */
static void access_log_has_each_once(unsigned sent, const char *model)
{
    unsigned char *seen = calloc(sent + 1, 1);
    uint64_t deadline = cr_test_now_ms() + (uint64_t)hc_tmo(10000);
    unsigned missing = 0;
    unsigned twice = 0;

    if (seen == NULL || sent == 0) {
        free(seen);
        return;
    }
    /* Workers write every second and at exit; wait until all arrived. */
    do {
        FILE *f = fopen(access_log, "re");
        char line[4096];

        memset(seen, 0, sent + 1);
        missing = 0;
        twice = 0;
        while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
            const char *q = strstr(line, "\"GET /hello.txt?i=");
            unsigned i;

            if (q != NULL && sscanf(q, "\"GET /hello.txt?i=%u ", &i) == 1 && i < sent)
                twice += seen[i]++ == 1;
        }
        if (f != NULL)
            fclose(f);
        for (unsigned i = 0; i < sent; i++)
            missing += seen[i] == 0;
        if (missing > 0 && twice == 0)
            usleep(100 * 1000);
    } while (missing > 0 && twice == 0 && cr_test_now_ms() < deadline);
    CHECK(missing == 0 && twice == 0,
          "%s: access log: %u of %u requests missing, %u written more than once", model, missing,
          sent, twice);
    free(seen);
}

static void prefork_replaces_a_killed_worker(uint16_t port, const char *model)
{
    struct board b;
    int victim;
    uint64_t deadline;
    bool replaced = false;

    if (read_board(port, &b, false) < 0 || b.n == 0) {
        CHECK(false, "%s: no scoreboard before the kill", model);
        return;
    }
    /* A worker of the current generation: right after the HUPs an older one
     * may be stopping already, and killing it is neither a crash nor
     * something to replace. */
    victim = b.pids[0];
    for (unsigned i = 0; i < b.n; i++) {
        if ((long long)b.gens[i] == b.generation) {
            victim = b.pids[i];
            break;
        }
    }
    kill(victim, SIGKILL);
    deadline = cr_test_now_ms() + (uint64_t)hc_tmo(5000);
    do {
        usleep(50 * 1000);
        if (read_board(port, &b, true) < 0)
            continue;
        remember(&b);
        replaced = b.n >= 2 && b.crashes >= 1;
        for (unsigned i = 0; i < b.n; i++)
            replaced = replaced && b.pids[i] != victim;
    } while (!replaced && cr_test_now_ms() < deadline);
    CHECK(replaced, "%s: killed worker %d not replaced (%u slots, %lld crashes)", model, victim,
          b.n, b.crashes);
    CHECK(which(port) == 'B', "%s: serving after the kill", model);
}

static void forking_survives_a_killed_child(uint16_t port, const char *model)
{
    struct cr_test_client cl;
    struct hc_resp r;
    long long pid;

    if (hc_open(&cl, port) < 0) {
        hc_failures++;
        return;
    }
    /* The child serving this connection says its pid. */
    CHECK(hc_request(&cl, STATUS_JSON, &r, hc_tmo(5000)) == 0 && r.status == 200,
          "%s: status on a kept connection", model);
    pid = json_num(r.body != NULL ? strstr(r.body, "\"this_process\"") : NULL, "pid");
    hc_resp_free(&r);
    CHECK(pid > 0, "%s: the status names its process", model);
    if (pid > 0) {
        if (nseen < MAX_PIDS)
            seen_pids[nseen++] = (int)pid;
        kill((pid_t)pid, SIGKILL);
        CHECK(hc_wait_close(&cl, hc_tmo(5000)) == 0, "%s: the killed child's connection closes",
              model);
    }
    cr_test_client_close(&cl);
    CHECK(which(port) == 'B', "%s: serving after the kill", model);
}

static void run_model(const char *model)
{
    char prog[4096];
    char *argv[16];
    int n = 0;
    struct hc_server s = {0};
    bool prefork = strcmp(model, "prefork") == 0;
    unsigned sent;
    uint64_t deadline;
    unsigned left;
    int status = 0;

    nseen = 0;
    unlink(access_log);
    write_conf(root_a);
    cr_test_build_path("cabrank-httpd", prog, sizeof(prog));
    argv[n++] = prog;
    argv[n++] = "--config";
    argv[n++] = conf;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--model";
    argv[n++] = (char *)model;
    argv[n] = NULL;
    if (cr_test_spawn_server(argv, &s.pid, &s.port, hc_tmo(20000)) < 0) {
        CHECK(false, "%s: the server did not start", model);
        return;
    }
    serves_files(s.port, model);
    shows_the_scoreboard(s.port, s.pid, model, prefork);
    sent = hups_under_load(s.port, s.pid, model, prefork);
    root_change_after_hup(s.port, s.pid, model);
    access_log_has_each_once(sent, model);
    if (prefork)
        prefork_replaces_a_killed_worker(s.port, model);
    else
        forking_survives_a_killed_child(s.port, model);

    kill(s.pid, SIGTERM);
    CHECK(cr_test_wait_exit(s.pid, hc_tmo(20000), &status) == 0 && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0,
          "%s: SIGTERM exit status %#x", model, status);
    /* No worker left: each one the scoreboards showed is gone (a zombie
     * reparented to init is reaped by it; give that a moment). */
    deadline = cr_test_now_ms() + (uint64_t)hc_tmo(5000);
    do {
        left = 0;
        for (unsigned i = 0; i < nseen; i++)
            left += !cr_test_proc_is_gone(seen_pids[i]);
        if (left > 0)
            usleep(50 * 1000);
    } while (left > 0 && cr_test_now_ms() < deadline);
    CHECK(left == 0, "%s: %u of %u worker processes still run after the stop", model, left, nseen);
    fprintf(stderr, "%s: %u worker pids seen\n", model, nseen);
}

int main(void)
{
    const char *const models[] = {"prefork", "forking"};
    int rc = 1;

    signal(SIGPIPE, SIG_IGN);
    hc_pattern(mid, MIDSIZE, 5);
    if (hc_mkdtemp(dir, sizeof(dir)) < 0)
        return 1;
    snprintf(root_a, sizeof(root_a), "%s/a", dir);
    snprintf(root_b, sizeof(root_b), "%s/b", dir);
    snprintf(conf, sizeof(conf), "%s/httpd.conf", dir);
    snprintf(access_log, sizeof(access_log), "%s/access.log", dir);
    if (mkdir(root_a, 0755) < 0 || mkdir(root_b, 0755) < 0 ||
        hc_write_file(root_a, "hello.txt", HELLO, strlen(HELLO)) < 0 ||
        hc_write_file(root_b, "hello.txt", HELLO, strlen(HELLO)) < 0 ||
        hc_write_file(root_a, "which.txt", "A", 1) < 0 ||
        hc_write_file(root_b, "which.txt", "B", 1) < 0 ||
        hc_write_file(root_a, "mid.bin", mid, MIDSIZE) < 0) {
        fprintf(stderr, "httpd_prefork: making the roots: %s\n", strerror(errno));
        goto out;
    }
    for (unsigned i = 0; i < 2; i++)
        run_model(models[i]);
    if (hc_failures == 0) {
        fprintf(stderr, "httpd_prefork: ok\n");
        rc = 0;
    } else {
        fprintf(stderr, "httpd_prefork: %d check(s) failed\n", hc_failures);
    }
out:
    (void)cr_test_rmtree(dir);
    return rc;
}
