/*
 * httpd_status.c (integration) - what an operator reads on cabrank-httpd's
 * status page, from a running server: the rates become > 0 under a short
 * bounded load (JSON and HTML), with a series of samples; the version and
 * the start time (ISO 8601); the connection view lists a client that sent
 * a request and then half of another head as reading, one between requests
 * as keep-alive with its last request line, and the status request itself
 * as writing; an
 * unknown ?format= is a 400 naming the formats; ?format=json still works;
 * /metrics and ?format=prometheus answer text/plain; version=0.0.4 (their
 * parsing is httpd_metrics.c). Under prefork, the serving process's
 * connections. Exit 0 pass, 1 fail, 77 skip.
 */
#include "httpd_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#define STATUS_JSON "GET /server-status?format=json HTTP/1.1\r\nHost: t\r\n\r\n"

/* The number after "key": in body, or -1. */
static double json_number(const char *body, const char *key)
{
    char pat[64];
    const char *p;

    snprintf(pat, sizeof(pat), "\"%s\":", key);
    p = body != NULL ? strstr(body, pat) : NULL;
    return p != NULL ? strtod(p + strlen(pat), NULL) : -1;
}

static uint16_t local_port(const struct cr_test_client *cl)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);

    if (getsockname(cl->fd, (struct sockaddr *)&sin, &len) < 0)
        return 0;
    return ntohs(sin.sin_port);
}

/* The row of the client on port in a JSON page's connection list, copied
 * into row (up to its closing brace); false when not listed. */
static bool conn_row(const char *body, uint16_t port, char *row, size_t cap)
{
    char pat[64];
    const char *p;
    const char *end;

    snprintf(pat, sizeof(pat), "{\"client\":\"127.0.0.1:%u\"", port);
    p = body != NULL ? strstr(body, pat) : NULL;
    if (p == NULL)
        return false;
    end = strchr(p, '}');
    snprintf(row, cap, "%.*s", end != NULL ? (int)(end - p + 1) : 0, p);
    return true;
}

/* Rates > 0 after a bounded load: 200 requests on one connection and 20
 * connections, at most 5 s; then a second read at least a second after the
 * first. */
static void check_rates(uint16_t port)
{
    struct cr_test_client cl;
    struct hc_resp r;
    uint64_t t0 = cr_test_now_ms();

    CHECK(hc_get(port, STATUS_JSON, &r) == 0 && r.status == 200, "status JSON");
    hc_resp_free(&r);
    if (hc_open(&cl, port) == 0) {
        for (int i = 0; i < 200 && cr_test_now_ms() - t0 < 5000; i++) {
            CHECK(hc_request(&cl, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) ==
                          0 &&
                      r.status == 200,
                  "load request %d", i);
            hc_resp_free(&r);
        }
        cr_test_client_close(&cl);
    }
    for (int i = 0; i < 20; i++)
        CHECK(hc_status(port, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n") == 200, "conn %d", i);
    while (cr_test_now_ms() - t0 < 1200)
        usleep(20000);
    CHECK(hc_get(port, STATUS_JSON, &r) == 0 && r.status == 200, "status JSON after load");
    CHECK(json_number(r.body, "requests_per_s") > 0, "requests_per_s: %s", r.body);
    CHECK(json_number(r.body, "bytes_per_s") > 0, "bytes_per_s");
    CHECK(json_number(r.body, "connections_per_s") > 0, "connections_per_s");
    CHECK(json_number(r.body, "window_s") >= 1, "window_s %.3f", json_number(r.body, "window_s"));
    CHECK(r.body != NULL && strstr(r.body, "\"series\":{\"span_s\":") != NULL &&
              strstr(r.body, "\"t_s\":[]") == NULL,
          "series with points");
    CHECK(r.body != NULL && strstr(r.body, "\"version\":\"") != NULL, "version");
    CHECK(r.body != NULL && strstr(r.body, "\"start_time\":\"20") != NULL &&
              strstr(r.body, "Z\",\"start_time_s\":") != NULL,
          "start_time (ISO 8601, UTC)");
    hc_resp_free(&r);
    CHECK(hc_get(port, "GET /server-status HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0 &&
              r.status == 200 && r.body != NULL,
          "status HTML");
    if (r.body != NULL) {
        const char *rates = strstr(r.body, "id=\"rates\"");

        CHECK(rates != NULL && strstr(rates, "<polyline points=\"") != NULL, "sparklines");
        CHECK(rates != NULL && strstr(rates, "<tr><td class=l>requests</td><td>0.0/s</td>") == NULL,
              "requests rate in HTML");
        CHECK(strstr(r.body, "id=\"version\"") != NULL &&
                  strstr(r.body, "<time id=\"start\" datetime=\"20") != NULL,
              "version and start time in HTML");
        /* Human units: bytes in KiB or B, uptime in s. */
        CHECK(strstr(r.body, "bytes in / out</td><td>") != NULL &&
                  (strstr(r.body, " KiB") != NULL || strstr(r.body, " B /") != NULL),
              "human byte units");
    }
    hc_resp_free(&r);
}

/* A client that sent half a head is shown reading; one between requests
 * keep-alive with its last request; the status request itself writing. */
static void check_connections(uint16_t port, bool same_process)
{
    struct cr_test_client half;
    struct cr_test_client idle;
    struct hc_resp r;
    char row[512];
    bool found = false;

    if (hc_open(&half, port) < 0) {
        hc_failures++;
        return;
    }
    if (hc_open(&idle, port) < 0) {
        cr_test_client_close(&half);
        hc_failures++;
        return;
    }
    CHECK(hc_request(&idle, "GET /hello.txt?idle HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) ==
                  0 &&
              r.status == 200,
          "idle client's request");
    hc_resp_free(&r);
    /* A whole request first: the half head then moves it from keep-alive
     * back to reading. */
    CHECK(hc_request(&half, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r, hc_tmo(5000)) == 0 &&
              r.status == 200,
          "half client's first request");
    hc_resp_free(&r);
    CHECK(hc_send(&half, "GET /half-a-head HTTP/1.1\r\nHost: t\r\n") == 0, "half a head");
    /* The server reads it when it reads it: look for up to 5 s. */
    for (int i = 0; i < 250 && !found; i++) {
        usleep(20000);
        if (hc_get(port, STATUS_JSON, &r) == 0 &&
            conn_row(r.body, local_port(&half), row, sizeof(row)))
            found = strstr(row, "\"state\":\"reading\"") != NULL;
        if (found) {
            CHECK(strstr(r.body, "\"request\":\"GET /server-status?format=json HTTP/1.1\"") != NULL,
                  "the status request itself");
            CHECK(strstr(r.body, "\"state\":\"writing\"") != NULL, "status request writing");
            if (same_process)
                CHECK(conn_row(r.body, local_port(&idle), row, sizeof(row)) &&
                          strstr(row, "\"state\":\"keep-alive\"") != NULL &&
                          strstr(row, "\"request\":\"GET /hello.txt?idle HTTP/1.1\"") != NULL &&
                          strstr(row, "\"requests\":1,") != NULL,
                      "idle client: %s", row);
        }
        hc_resp_free(&r);
        if (!same_process && !found && i > 50)
            break; /* prefork: the half head may sit in another process */
    }
    if (same_process)
        CHECK(found, "no connection of port %u shown reading", local_port(&half));
    if (same_process && hc_get(port, "GET /server-status HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0) {
        char cell[128];

        snprintf(cell, sizeof(cell), "127.0.0.1:%u</td><td class=l><span class=\"role reading\">",
                 local_port(&half));
        CHECK(r.body != NULL && strstr(r.body, cell) != NULL, "HTML row reading");
        CHECK(r.body != NULL && strstr(r.body, "id=\"connections\"") != NULL, "HTML table");
        hc_resp_free(&r);
    }
    cr_test_client_close(&half);
    cr_test_client_close(&idle);
}

static void check_formats(uint16_t port)
{
    static const char *const metrics[] = {
        "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /server-status?format=prometheus HTTP/1.1\r\nHost: t\r\n\r\n",
    };
    struct hc_resp r;

    CHECK(hc_get(port, "GET /server-status?format=xml HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0 &&
              r.status == 400 && r.body != NULL && strstr(r.body, "html") != NULL &&
              strstr(r.body, "json") != NULL && strstr(r.body, "prometheus") != NULL,
          "?format=xml: %d %s", r.status, r.body != NULL ? r.body : "");
    hc_resp_free(&r);
    CHECK(hc_status(port, "GET /server-status?format= HTTP/1.1\r\nHost: t\r\n\r\n") == 400,
          "empty format");
    CHECK(hc_get(port, "GET /server-status?format=html HTTP/1.1\r\nHost: t\r\n\r\n", &r) == 0 &&
              r.status == 200 && hc_header_is(&r, "Content-Type", "text/html; charset=utf-8"),
          "?format=html");
    hc_resp_free(&r);
    CHECK(hc_get(port, STATUS_JSON, &r) == 0 && r.status == 200 &&
              hc_header_is(&r, "Content-Type", "application/json") && r.body != NULL &&
              r.body[0] == '{',
          "?format=json");
    hc_resp_free(&r);
    for (int i = 0; i < 2; i++) {
        CHECK(hc_get(port, metrics[i], &r) == 0 && r.status == 200 &&
                  hc_header_is(&r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8") &&
                  r.body != NULL &&
                  strstr(r.body, "# TYPE cabrank_http_requests_total counter\n") != NULL,
              "prometheus %d: %d", i, r.status);
        hc_resp_free(&r);
    }
}

static void run(const char *root, const char *model)
{
    const char *const args[] = {"--model", model, "--threads", "3", "--workers", "2", NULL};
    struct hc_server s;
    bool prefork = strcmp(model, "prefork") == 0;

    if (hc_start(&s, root, args) < 0) {
        hc_failures++;
        return;
    }
    check_formats(s.port);
    check_rates(s.port);
    check_connections(s.port, !prefork);
    CHECK(hc_stop(&s) == 0, "%s: exit", model);
}

int main(void)
{
    char dir[256];
    char root[300];

    if (hc_mkdtemp(dir, sizeof(dir)) < 0)
        return 1;
    snprintf(root, sizeof(root), "%s/root", dir);
    if (mkdir(root, 0755) < 0 || hc_write_file(root, "hello.txt", "Hello\n", 6) < 0)
        return 1;
    run(root, "lf");
    run(root, "reactor");
    run(root, "prefork");
    if (hc_failures == 0) {
        fprintf(stderr, "httpd_status: ok\n");
        return 0;
    }
    fprintf(stderr, "httpd_status: %d check(s) failed\n", hc_failures);
    return 1;
}
