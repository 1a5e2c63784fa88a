/*
 * lab_services.h - two small cr_service implementations that cabrank-bench
 * and the tests run under every model (svc_echo.c, svc_line.c); a client
 * speaks their protocol with line_client.h.
 *
 * echo: sends back every byte it receives (cr_conn_write).
 *
 * line: one request per line, "<id> <op> [arg]\n", answered with the id
 * carried back verbatim so that clients can match replies:
 *   <id> ECHO <text>   "<id> OK <text>\n"
 *   <id> SLEEP <ms>    blocks the handler ms (at most 10 s), then "<id> OK\n"
 *   <id> BIG <n>       "<id> OK <n>\n", n bytes 'x', "\n" (n at most 16 MiB),
 *                      queued in 64 KiB zero-copy pieces from drained(), so a
 *                      slow reader holds at most a piece or two
 *   <id> FILE <n>      "<id> OK <n>\n", n bytes 'y' sent from a file with
 *                      cr_conn_write_file, "\n" (n at most 1 MiB)
 *   <id> CLOSE         "<id> BYE\n", then close after flush
 *   anything else      "<id> ERR <reason>\n" ("- ERR ..." when no id)
 * A line longer than 64 KiB gets "- ERR too long\n" and the connection is
 * closed after it.
 *
 * Both count what they serve in struct cr_test_counts (relaxed atomics, read
 * with cr_test_svc_get), so tests can check that nothing was lost, and
 * count `overlaps`: a call that found its connection already inside another
 * call (two threads on one connection at once), which must stay 0. The
 * counts live in one MAP_SHARED anonymous page mapped by init: under the
 * process models (forking, prefork) the service runs in children forked
 * after init, and their counts reach the test through it. Both call
 * cr_conn_request_done once per answer (line: a line; echo: an input call
 * that echoed bytes), so the server's statistics and scoreboard see them.
 */
#ifndef CABRANK_APPS_LAB_SERVICES_H
#define CABRANK_APPS_LAB_SERVICES_H

#include <cabrank/service.h>

#define CR_TEST_LINE_MAX  (64 * 1024)
#define CR_TEST_BIG_MAX   (16 * 1024 * 1024)
#define CR_TEST_FILE_MAX  (1024 * 1024)
#define CR_TEST_SLEEP_MAX 10000

/* Shared with every process forked after init (MAP_SHARED). */
struct cr_test_counts {
    /* Relaxed atomics: */
    uint64_t requests;    /* requests answered (lines; echo: input calls) */
    uint64_t started;     /* requests begun (a SLEEP counts before it sleeps) */
    uint64_t opened;      /* connections opened */
    uint64_t closed;      /* connections closed */
    uint64_t bytes;       /* echo: bytes echoed */
    uint64_t overlaps;    /* a connection entered by two threads at once */
    uint64_t max_pending; /* most output a connection had queued */
    uint64_t releases;    /* outstanding zero-copy and file segments */
};

struct cr_test_svc {
    struct cr_service svc;    /* pass &svc to cr_server_create */
    struct cr_test_counts *n; /* the shared counts; owned (init maps, fini unmaps) */
    /* Private; inherited by forked children, read-only after init. */
    int file_fd; /* line: CR_TEST_FILE_MAX bytes of 'y' */
    char *xs;    /* line: a 64 KiB piece of 'x' */
};

/* Sets up the echo or the line service; maps t->n. 0 or -errno (nothing
 * left to free). */
int cr_test_echo_init(struct cr_test_svc *t);
int cr_test_line_init(struct cr_test_svc *t);

/* Frees what init allocated, the shared counts too (read them before).
 * NULL-safe on a t whose init failed. */
void cr_test_svc_fini(struct cr_test_svc *t);

/* Reads a counter of t (e.g. &t->n->requests). Thread-safe, and sees what
 * any process counted. */
uint64_t cr_test_svc_get(const uint64_t *counter);

/* For the services' init: clears t, maps its zeroed shared counts. 0 or
 * -errno. */
int cr_test_svc_init_common(struct cr_test_svc *t);

/* Segments queued and not yet released (sent or dropped): 0 once every
 * connection is gone. */
uint64_t cr_test_svc_outstanding(const struct cr_test_svc *t);

#endif /* CABRANK_APPS_LAB_SERVICES_H */
