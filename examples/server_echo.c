/*
 * server_echo.c - a TCP echo service run by cr_server under any concurrency
 * model, chosen by name: the smallest complete cr_service. The service is
 * sans-I/O: input() gets the bytes received, queues them back with
 * cr_conn_write and says it consumed them; the model does all the I/O, on
 * its own threads or worker processes. The same service object runs unchanged
 * under every model.
 *
 * It prints "listening on ADDR:PORT" for each listener to stdout (tests read
 * it); all else goes to stderr. SIGTERM or SIGINT stops it gracefully, exit 0.
 *
 * Build: cc -O2 examples/server_echo.c -o server_echo $(pkg-config --cflags --libs cabrank)
 * Run:   server_echo --model lf|hshr|tpc|reactor|forking|prefork|proactor
 *                    [--listen 127.0.0.1:8080] [--threads N]
 */
#include <cabrank/server.h>
#include <cabrank/service.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "server_echo"

/* Called for each read; no per-connection state, so no open or close. */
static ssize_t echo_input(void *ctx, void *state, struct cr_conn *c, const char *data, size_t len)
{
    CR_UNUSED(ctx);
    CR_UNUSED(state);
    if (cr_conn_write(c, data, len) < 0)
        return -ENOMEM;
    cr_conn_request_done(c);
    return (ssize_t)len;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: " PROG " [--model NAME] [--listen ADDR] [--threads N]\n"
               "  --model NAME    one of:");
    for (const char *const *m = cr_server_models(); *m != NULL; m++)
        fprintf(f, " %s", *m);
    fprintf(f, " (default lf)\n"
               "  --listen ADDR   address to serve (default 127.0.0.1:8080; port 0: any)\n"
               "  --threads N     worker threads (default: one per CPU)\n");
}

int main(int argc, char **argv)
{
    struct cr_service svc = {.name = "echo", .input = echo_input};
    struct cr_server_config cfg = {.listen = {"127.0.0.1:8080"}};
    struct cr_server *s;
    char addr[64];
    int err;

    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return EXIT_SUCCESS;
        } else if (strcmp(argv[i], "--model") == 0 && v != NULL) {
            cfg.model = v;
        } else if (strcmp(argv[i], "--listen") == 0 && v != NULL) {
            cfg.listen[0] = v;
        } else if (strcmp(argv[i], "--threads") == 0 && v != NULL) {
            cfg.threads = atoi(v);
        } else {
            usage(stderr);
            return 2;
        }
        i++;
    }
    err = cr_server_create(&s, &cfg, &svc);
    if (err < 0) {
        fprintf(stderr, PROG ": %s on %s: %s\n", cfg.model ? cfg.model : "lf", cfg.listen[0],
                strerror(-err));
        return EXIT_FAILURE;
    }
    for (unsigned i = 0; i < cr_server_listeners(s); i++) {
        if (cr_server_address(s, i, addr, sizeof(addr)) == 0)
            printf("listening on %s\n", addr);
    }
    /* Before the process models fork, so no child repeats the line. */
    fflush(stdout);
    err = cr_server_run(s);
    if (err < 0)
        fprintf(stderr, PROG ": %s\n", strerror(-err));
    cr_server_destroy(s);
    return err < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
