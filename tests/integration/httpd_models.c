/*
 * httpd_models.c (integration) - the same cabrank-httpd under every
 * concurrency model cr_server_models() lists: reactor, lf with each
 * promotion order (and with two handle sets, with and without multiple
 * leaders), hshr, tpc, and forking, prefork and proactor once they are
 * listed. Each runs
 * a quick subset: GET, HEAD, 404, keep-alive, pipelining, a file through
 * sendfile, eight connections with pipelined batches in flight at once,
 * the status page naming the model, its timeline with a lane per thread or
 * worker process, and a graceful stop with exit status 0.
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include <cabrank/lf_pool.h>
#include <cabrank/server.h>

#include "httpd_client.h"

#define HELLO    "Hello, world\n"
#define MIDSIZE  (300u * 1024)
#define CONNS    8
#define PER_CONN 5

static unsigned char mid[MIDSIZE];

/* The lanes' names under each model. */
static const char *lane_prefix(const char *model)
{
    static const char *const names[][2] = {
        {"lf", "\"name\":\"lf "},          {"hshr", "\"name\":\"hshr "},
        {"reactor", "\"name\":\"reactor"}, {"tpc", "\"name\":\"tpc "},
        {"prefork", "\"name\":\"pid "},    {"proactor", "\"name\":\"proactor "},
        {"forking", "\"name\":\"pid "},
    };

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(model, names[i][0]) == 0)
            return names[i][1];
    }
    return NULL;
}

/* <status>/timeline: JSON naming the model, lanes named as the model's
 * threads or processes; a window that is no number is a 400. */
static void check_timeline(struct cr_test_client *cl, const char *label, const char *model)
{
    const char *lane = lane_prefix(model);
    struct hc_resp r;
    char want[128];

    CHECK(hc_request(cl, "GET /server-status/timeline?window=10000 HTTP/1.1\r\nHost: t\r\n\r\n", &r,
                     hc_tmo(5000)) == 0 &&
              r.status == 200 && r.body != NULL &&
              hc_header_is(&r, "Content-Type", "application/json"),
          "%s: timeline", label);
    snprintf(want, sizeof(want), "\"model\":\"%s\"", model);
    CHECK(r.body != NULL && strstr(r.body, want) != NULL && strstr(r.body, "\"lanes\":[") != NULL &&
              strstr(r.body, "\"window_ms\":10000") != NULL,
          "%s: timeline says %s", label, want);
    CHECK(lane == NULL || (r.body != NULL && strstr(r.body, lane) != NULL), "%s: timeline has %s",
          label, lane);
    hc_resp_free(&r);
    CHECK(hc_request(cl, "GET /server-status/timeline?window=soon HTTP/1.1\r\nHost: t\r\n\r\n", &r,
                     hc_tmo(5000)) == 0 &&
              r.status == 400,
          "%s: timeline with a bad window", label);
    hc_resp_free(&r);
}

static void run_subset(uint16_t port, const char *label, const char *model, const char *promotion)
{
    struct cr_test_client cl;
    struct cr_test_client many[CONNS];
    struct hc_resp r;
    char want[128];
    char batch[1024];
    size_t blen = 0;

    if (hc_open(&cl, port) < 0) {
        hc_failures++;
        return;
    }
    for (int i = 0; i < 5; i++) {
        CHECK(hc_request(&cl, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) ==
                      0 &&
                  r.status == 200 && r.body_len == 13 && memcmp(r.body, HELLO, 13) == 0,
              "%s: keep-alive GET %d", label, i);
        hc_resp_free(&r);
    }
    CHECK(hc_request(&cl, "HEAD /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) == 0 &&
              r.status == 200 && hc_header_is(&r, "Content-Length", "13"),
          "%s: HEAD", label);
    hc_resp_free(&r);
    CHECK(hc_request(&cl, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) == 0 &&
              r.status == 404,
          "%s: 404", label);
    hc_resp_free(&r);
    CHECK(hc_request(&cl, "GET /mid.bin HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) == 0 &&
              r.status == 200 && r.body_len == MIDSIZE && memcmp(r.body, mid, MIDSIZE) == 0,
          "%s: file via sendfile", label);
    hc_resp_free(&r);
    /* Pipelining: ten in one write, in order. */
    for (int i = 0; i < 10; i++)
        blen +=
            (size_t)snprintf(batch + blen, sizeof(batch) - blen,
                             "GET /%s HTTP/1.1\r\nHost: t\r\n\r\n", i % 2 ? "hello.txt" : "nope");
    CHECK(cr_test_write_all(cl.fd, batch, blen) == 0, "%s: pipelined write", label);
    for (int i = 0; i < 10; i++) {
        CHECK(hc_read(&cl, false, &r, hc_tmo(5000)) == 0 && r.status == (i % 2 ? 200 : 404),
              "%s: pipelined answer %d: %d", label, i, r.status);
        hc_resp_free(&r);
    }
    CHECK(hc_request(&cl, "GET /server-status?format=json HTTP/1.1\r\nHost: t\r\n\r\n", &r,
                     hc_tmo(5000)) == 0 &&
              r.status == 200 && r.body != NULL,
          "%s: status", label);
    snprintf(want, sizeof(want), "\"model\":\"%s\"", model);
    CHECK(r.body != NULL && strstr(r.body, want) != NULL, "%s: status says %s", label, want);
    if (promotion != NULL) {
        snprintf(want, sizeof(want), "\"promotion\":\"%s\"", promotion);
        CHECK(r.body != NULL && strstr(r.body, want) != NULL, "%s: status says %s", label, want);
    }
    CHECK(r.body != NULL && strstr(r.body, "\"deferred\":") != NULL &&
              strstr(r.body, "\"taken_over\":") != NULL,
          "%s: status counts deferred promotions", label);
    hc_resp_free(&r);
    check_timeline(&cl, label, model);
    cr_test_client_close(&cl);

    /* Several connections with batches in flight at once. */
    blen = 0;
    for (int i = 0; i < PER_CONN; i++)
        blen += (size_t)snprintf(batch + blen, sizeof(batch) - blen,
                                 "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    for (int c = 0; c < CONNS; c++) {
        many[c].fd = -1;
        if (hc_open(&many[c], port) < 0 || cr_test_write_all(many[c].fd, batch, blen) < 0)
            CHECK(false, "%s: connection %d", label, c);
    }
    for (int c = 0; c < CONNS; c++) {
        for (int i = 0; i < PER_CONN && many[c].fd >= 0; i++) {
            CHECK(hc_read(&many[c], false, &r, hc_tmo(5000)) == 0 && r.status == 200 &&
                      r.body_len == 13,
                  "%s: connection %d answer %d", label, c, i);
            hc_resp_free(&r);
        }
        cr_test_client_close(&many[c]);
    }
}

static void run_model(const char *root, const char *model, const char *promotion,
                      const char *groups, bool multiple)
{
    const char *args[16];
    char label[96];
    struct hc_server s;
    int n = 0;

    args[n++] = "--model";
    args[n++] = model;
    args[n++] = "--threads";
    args[n++] = "3";
    if (promotion != NULL) {
        args[n++] = "--promotion";
        args[n++] = promotion;
    }
    if (groups != NULL) {
        args[n++] = "--groups";
        args[n++] = groups;
    }
    if (multiple)
        args[n++] = "--multiple-leaders";
    args[n] = NULL;
    snprintf(label, sizeof(label), "%s%s%s%s%s%s", model, promotion ? "/" : "",
             promotion ? promotion : "", groups ? "/groups=" : "", groups ? groups : "",
             multiple ? "/multiple-leaders" : "");
    if (hc_start(&s, root, args) < 0) {
        CHECK(false, "%s: start", label);
        return;
    }
    run_subset(s.port, label, model, promotion);
    CHECK(hc_alive(&s), "%s: server died", label);
    CHECK(hc_stop(&s) == 0, "%s: graceful stop", label);
    fprintf(stderr, "%s: %s\n", label, hc_failures == 0 ? "ok" : "failures so far");
}

int main(void)
{
    char root[256];
    int rc = 1;

    /* A model that closes early fails its checks rather than killing us. */
    signal(SIGPIPE, SIG_IGN);
    hc_pattern(mid, sizeof(mid), 9);
    if (hc_mkdtemp(root, sizeof(root)) < 0 || hc_write_file(root, "hello.txt", HELLO, 13) < 0 ||
        hc_write_file(root, "mid.bin", mid, sizeof(mid)) < 0) {
        fprintf(stderr, "httpd_models: making the root: %s\n", strerror(errno));
        return 1;
    }
    for (const char *const *m = cr_server_models(); *m != NULL; m++) {
        if (strcmp(*m, "lf") != 0) {
            run_model(root, *m, NULL, NULL, false);
            continue;
        }
        for (const char *const *p = cr_lf_pool_promotions(); *p != NULL; p++)
            run_model(root, "lf", *p, NULL, false);
        run_model(root, "lf", NULL, "2", false);
        run_model(root, "lf", NULL, "2", true);
    }
    if (hc_failures == 0) {
        fprintf(stderr, "httpd_models: ok\n");
        rc = 0;
    } else {
        fprintf(stderr, "httpd_models: %d check(s) failed\n", hc_failures);
    }
    (void)cr_test_rmtree(root);
    return rc;
}
