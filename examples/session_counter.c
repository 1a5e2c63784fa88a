/*
 * session_counter.c - a counter kept across connections with the Session
 * Context Manager (cr_session): a line protocol served by cr_server under a
 * thread model (the manager lives in the server's memory, so not under the
 * process models). Any worker, on any connection, continues a session another
 * began: a request checks the session's context out (acquire), changes it
 * and checks it back in (release); sessions idle for --idle-ms expire.
 *
 *   new            -> "<id>"      a session with a counter at 0
 *   add <id> <n>   -> "<total>"   adds n to the session's counter
 *   end <id>       -> "<total>"   ends the session
 *   (unknown id: "unknown"; the session in use by another request: "busy")
 *
 * Ids are 16 hex digits. It prints "listening on ADDR:PORT" to stdout (tests
 * read it). SIGTERM or SIGINT stops it, exit 0.
 *
 * Build: cc -O2 examples/session_counter.c -o session_counter $(pkg-config --cflags --libs cabrank)
 * Run:   session_counter [--model lf|hshr|tpc|reactor] [--listen 127.0.0.1:8080]
 *                        [--idle-ms 60000]
 */
#include <cabrank/server.h>
#include <cabrank/service.h>
#include <cabrank/session.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG     "session_counter"
#define MAX_LINE 128

static void free_counter(void *ctx, void *arg)
{
    CR_UNUSED(arg);
    free(ctx);
}

/* Answers one request line; writes the answer into out. */
static void answer(struct cr_session_mgr *m, const char *line, char *out, size_t cap)
{
    uint64_t id = 0;
    int64_t n = 0;
    int64_t *count;
    void *ctx;
    int err;

    if (strcmp(line, "new") == 0) {
        count = calloc(1, sizeof(*count));
        if (count == NULL || (err = cr_session_create(m, count, &id)) < 0) {
            free(count);
            snprintf(out, cap, "error");
            return;
        }
        snprintf(out, cap, "%016" PRIx64, id);
        return;
    }
    if (sscanf(line, "add %" SCNx64 " %" SCNd64, &id, &n) != 2 &&
        sscanf(line, "end %" SCNx64, &id) != 1) {
        snprintf(out, cap, "bad request");
        return;
    }
    err = cr_session_acquire(m, id, &ctx);
    if (err < 0) {
        snprintf(out, cap, "%s", err == -EBUSY ? "busy" : "unknown");
        return;
    }
    count = ctx;
    *count += n;
    snprintf(out, cap, "%" PRId64, *count);
    if (line[0] == 'e' && cr_session_remove(m, id, &ctx) == 0)
        free(ctx);
    else
        cr_session_release(m, id);
}

/* One line per call; the model calls again with the rest of the input. */
static ssize_t counter_input(void *ctx, void *state, struct cr_conn *c, const char *data,
                             size_t len)
{
    const char *nl = memchr(data, '\n', len < MAX_LINE ? len : MAX_LINE);
    char line[MAX_LINE];
    char out[64];
    size_t n;

    CR_UNUSED(state);
    if (nl == NULL)
        return len < MAX_LINE ? 0 : -EBADMSG;
    n = (size_t)(nl - data);
    memcpy(line, data, n);
    line[n > 0 && line[n - 1] == '\r' ? n - 1 : n] = '\0';
    answer(ctx, line, out, sizeof(out) - 1);
    strcat(out, "\n");
    if (cr_conn_write(c, out, strlen(out)) < 0)
        return -ENOMEM;
    cr_conn_request_done(c);
    return (ssize_t)(n + 1);
}

int main(int argc, char **argv)
{
    struct cr_session_config scfg = {.free_ctx = free_counter};
    struct cr_server_config cfg = {.listen = {"127.0.0.1:8080"}};
    struct cr_service svc = {.name = "counter", .input = counter_input};
    struct cr_session_mgr *m;
    struct cr_server *s;
    char addr[64];
    int err;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--model") == 0) {
            cfg.model = argv[i + 1];
        } else if (strcmp(argv[i], "--listen") == 0) {
            cfg.listen[0] = argv[i + 1];
        } else if (strcmp(argv[i], "--idle-ms") == 0) {
            scfg.idle_timeout_ms = strtoull(argv[i + 1], NULL, 10);
        } else {
            fprintf(stderr, "usage: " PROG " [--model M] [--listen ADDR] [--idle-ms MS]\n");
            return 2;
        }
    }
    if (cfg.model != NULL &&
        (strcmp(cfg.model, "forking") == 0 || strcmp(cfg.model, "prefork") == 0)) {
        fprintf(stderr, PROG ": sessions live in one process: a thread model, please\n");
        return 2;
    }
    err = cr_session_mgr_create(&m, &scfg);
    if (err < 0) {
        fprintf(stderr, PROG ": session manager: %s\n", strerror(-err));
        return EXIT_FAILURE;
    }
    svc.ctx = m;
    err = cr_server_create(&s, &cfg, &svc);
    if (err < 0) {
        fprintf(stderr, PROG ": %s: %s\n", cfg.listen[0], strerror(-err));
        cr_session_mgr_destroy(m);
        return EXIT_FAILURE;
    }
    if (cr_server_address(s, 0, addr, sizeof(addr)) == 0)
        printf("listening on %s\n", addr);
    fflush(stdout);
    err = cr_server_run(s);
    if (err < 0)
        fprintf(stderr, PROG ": %s\n", strerror(-err));
    cr_server_destroy(s);
    cr_session_mgr_destroy(m);
    return err < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
