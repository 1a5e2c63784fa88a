/*
 * test_status.c - the status page's parts (apps/httpd/status*.c) without a
 * server: the rate ring (current rates over the newest sample a second
 * old, the series between samples, the ring's bound), the connection
 * registry (rows listed with client, state, request line and time in
 * state, escaped, the list capped with "N more", rows gone at close, and
 * rows written by several threads while pages are rendered), and the
 * Prometheus text (HELP/TYPE, cumulative histogram buckets, +Inf, _sum,
 * _count) and the JSON's version and rates.
 */
#include "../../apps/httpd/status.h"

#include <arpa/inet.h>
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEC UINT64_C(1000000000)

static char *render(struct status *st, enum status_format f)
{
    char *page;
    size_t len;

    ck_assert_int_eq(status_render(st, NULL, f, &page, &len), 0);
    ck_assert_uint_eq(strlen(page), len);
    return page;
}

START_TEST(rates_are_over_the_newest_sample_a_second_old)
{
    struct status *st;
    struct status_rates r;
    uint64_t c[STATUS_RATES] = {100, 1000, 10};

    ck_assert_int_eq(status_create(&st, 1), 0);
    /* The first sample has the start (every counter 0) as its base. */
    status_rates_update(st, 10 * SEC, 5 * SEC, c, &r);
    ck_assert_double_eq_tol(r.window_s, 5, 1e-9);
    ck_assert_double_eq_tol(r.per_s[STATUS_RATE_REQUESTS], 20, 1e-9);
    ck_assert_double_eq_tol(r.per_s[STATUS_RATE_BYTES], 200, 1e-9);
    ck_assert_double_eq_tol(r.per_s[STATUS_RATE_CONNECTIONS], 2, 1e-9);
    ck_assert_uint_eq(r.points, 1);
    ck_assert_double_eq_tol(r.series[STATUS_RATE_REQUESTS][0], 20, 1e-9);
    /* Half a second later: no new sample; the base is still the start. */
    c[0] = 110;
    status_rates_update(st, 10 * SEC + SEC / 2, 5 * SEC, c, &r);
    ck_assert_uint_eq(r.points, 1);
    ck_assert_double_eq_tol(r.window_s, 5.5, 1e-9);
    ck_assert_double_eq_tol(r.per_s[STATUS_RATE_REQUESTS], 20, 1e-9);
    /* Two seconds after the 10 s sample: over those two seconds. */
    c[0] = 300;
    status_rates_update(st, 12 * SEC, 5 * SEC, c, &r);
    ck_assert_double_eq_tol(r.window_s, 2, 1e-9);
    ck_assert_double_eq_tol(r.per_s[STATUS_RATE_REQUESTS], 100, 1e-9);
    ck_assert_uint_eq(r.points, 2);
    ck_assert_double_eq_tol(r.t_s[0], -2, 1e-9);
    ck_assert_double_eq_tol(r.span_s, 7, 1e-9);
    ck_assert_double_eq_tol(r.t_s[1], 0, 1e-9);
    ck_assert_double_eq_tol(r.series[STATUS_RATE_REQUESTS][1], 100, 1e-9);
    /* A counter that went down (a restarted count) reads 0, not a wrap. */
    c[0] = 5;
    status_rates_update(st, 13 * SEC, 5 * SEC, c, &r);
    ck_assert_double_eq_tol(r.per_s[STATUS_RATE_REQUESTS], 0, 1e-9);
    /* A render that read the clock before the previous one sampled. */
    status_rates_update(st, 12 * SEC + SEC / 2, 5 * SEC, c, &r);
    ck_assert_double_eq_tol(r.window_s, 1, 1e-9);
    for (unsigned i = 0; i < r.points; i++)
        ck_assert(r.t_s[i] <= 0 && r.t_s[i] > -10);
    /* The ring keeps STATUS_SAMPLES samples. */
    for (unsigned i = 0; i < 3 * STATUS_SAMPLES; i++) {
        c[0] += 7;
        status_rates_update(st, (14 + i) * SEC, 5 * SEC, c, &r);
    }
    ck_assert_uint_eq(r.points, STATUS_SAMPLES - 1);
    ck_assert_double_eq_tol(r.t_s[0], -(double)(STATUS_SAMPLES - 2), 1e-9);
    ck_assert_double_eq_tol(r.per_s[STATUS_RATE_REQUESTS], 7, 1e-9);
    status_destroy(st);
}
END_TEST

static void open_v4(struct status *st, struct status_conn *sc, unsigned worker, uint16_t port,
                    uint64_t now)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};

    sin.sin_addr.s_addr = htonl(0x7f000001);
    status_conn_open(st, sc, worker, (const struct sockaddr *)&sin, sizeof(sin), now);
}

START_TEST(connections_are_listed_with_state_and_request)
{
    struct status *st;
    struct status_conn a;
    struct status_conn b;
    char *page;

    ck_assert_int_eq(status_create(&st, 2), 0);
    open_v4(st, &a, 0, 4242, 1);
    open_v4(st, &b, 1, 4343, 1);
    status_conn_request(st, &b, "GET", 3, "/x?a=<b>&c=\"d\"", sizeof("/x?a=<b>&c=\"d\"") - 1, 1, 2);
    page = render(st, STATUS_JSON);
    ck_assert_ptr_nonnull(strstr(page, "\"connections\":{\"total\":2,\"listed\":2,"));
    ck_assert_ptr_nonnull(strstr(page, "{\"client\":\"127.0.0.1:4242\",\"state\":\"reading\""));
    ck_assert_ptr_nonnull(strstr(page, "{\"client\":\"127.0.0.1:4343\",\"state\":\"writing\""));
    ck_assert_ptr_nonnull(strstr(page, "\"request\":\"GET /x?a=<b>&c=\\\"d\\\" HTTP/1.1\""));
    free(page);
    page = render(st, STATUS_HTML);
    ck_assert_ptr_nonnull(strstr(page, "<td class=l>127.0.0.1:4242</td>"));
    ck_assert_ptr_nonnull(strstr(page, ">reading<"));
    ck_assert_ptr_nonnull(strstr(page, "<code>GET /x?a=&#60;b&#62;&#38;c=&#34;d&#34; HTTP/1.1"));
    ck_assert_ptr_null(strstr(page, "a=<b>"));
    free(page);
    /* Answered: keep-alive, one request; then gone. */
    status_conn_set(st, &b, STATUS_CONN_KEEPALIVE, 3);
    page = render(st, STATUS_JSON);
    ck_assert_ptr_nonnull(strstr(page, "\"state\":\"keep-alive\",\"in_state_s\":"));
    ck_assert_ptr_nonnull(strstr(page, "\"requests\":1,"));
    free(page);
    status_conn_close(st, &a);
    status_conn_close(st, &b);
    page = render(st, STATUS_JSON);
    ck_assert_ptr_nonnull(strstr(page, "\"connections\":{\"total\":0,\"listed\":0,\"list\":[]}"));
    free(page);
    status_destroy(st);
}
END_TEST

START_TEST(long_request_lines_are_cut_and_long_lists_say_how_many_more)
{
    enum { N = 230 };
    struct status *st;
    struct status_conn *sc = calloc(N, sizeof(*sc));
    char target[400];
    char *page;

    ck_assert_ptr_nonnull(sc);
    memset(target, 'a', sizeof(target));
    target[0] = '/';
    ck_assert_int_eq(status_create(&st, 4), 0);
    for (unsigned i = 0; i < N; i++)
        open_v4(st, &sc[i], i, (uint16_t)(1000 + i), 1);
    status_conn_request(st, &sc[7], "GET", 3, target, sizeof(target), 1, 1);
    ck_assert_uint_eq(sc[7].line_len, STATUS_CONN_LINE_MAX - 1);
    page = render(st, STATUS_HTML);
    ck_assert_ptr_nonnull(strstr(page, "<p>230 open.</p>"));
    ck_assert_ptr_nonnull(strstr(page, "<p id=\"conns-more\">30 more</p>"));
    free(page);
    page = render(st, STATUS_JSON);
    ck_assert_ptr_nonnull(strstr(page, "\"connections\":{\"total\":230,\"listed\":200,"));
    free(page);
    for (unsigned i = 0; i < N; i++)
        status_conn_close(st, &sc[i]);
    status_destroy(st);
    free(sc);
}
END_TEST

struct churn {
    struct status *st;
    unsigned worker;
    int rounds;
};

/* Opens, requests, answers and closes connections as fast as it can. */
static void *churn_conns(void *arg)
{
    struct churn *c = arg;
    struct status_conn sc[4];

    for (int r = 0; r < c->rounds; r++) {
        for (unsigned i = 0; i < 4; i++)
            open_v4(c->st, &sc[i], c->worker + i, 80, (uint64_t)r);
        for (unsigned i = 0; i < 4; i++) {
            status_conn_request(c->st, &sc[i], "GET", 3, "/churn", 6, 1, (uint64_t)r);
            status_conn_set(c->st, &sc[i], STATUS_CONN_KEEPALIVE, (uint64_t)r);
        }
        for (unsigned i = 0; i < 4; i++)
            status_conn_close(c->st, &sc[i]);
    }
    return NULL;
}

/* Run under TSan: rows written while pages copy them. */
START_TEST(rows_are_copied_whole_while_threads_write_them)
{
    struct status *st;
    struct churn c[3];
    pthread_t t[3];

    ck_assert_int_eq(status_create(&st, 4), 0);
    for (unsigned i = 0; i < 3; i++) {
        c[i] = (struct churn){.st = st, .worker = i, .rounds = 2000};
        ck_assert_int_eq(pthread_create(&t[i], NULL, churn_conns, &c[i]), 0);
    }
    for (int i = 0; i < 50; i++) {
        char *page = render(st, STATUS_JSON);

        /* Every row's request line is empty or whole. */
        for (const char *p = strstr(page, "\"request\":\""); p != NULL;
             p = strstr(p + 1, "\"request\":\"")) {
            const char *v = p + strlen("\"request\":\"");

            ck_assert(v[0] == '"' || strncmp(v, "GET /churn HTTP/1.1\"", 20) == 0);
        }
        free(page);
    }
    for (unsigned i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    status_destroy(st);
}
END_TEST

START_TEST(prometheus_text_has_help_type_and_a_cumulative_histogram)
{
    struct status *st;
    char *page;

    ck_assert_int_eq(status_create(&st, 2), 0);
    status_record(st, 0, 200, 10, 500);    /* < 1 us */
    status_record(st, 1, 404, 5, 1500);    /* [1, 2) us */
    status_record(st, 0, 200, 7, 3000000); /* [2048, 4096) us */
    page = render(st, STATUS_PROMETHEUS);
    ck_assert_ptr_nonnull(strstr(page, "# HELP cabrank_http_requests_total "));
    ck_assert_ptr_nonnull(strstr(page, "# TYPE cabrank_http_requests_total counter\n"));
    ck_assert_ptr_nonnull(strstr(page, "cabrank_http_requests_total{code_class=\"2xx\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(page, "cabrank_http_requests_total{code_class=\"4xx\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(page, "cabrank_http_response_bytes_total 22\n"));
    ck_assert_ptr_nonnull(strstr(page, "# TYPE cabrank_http_request_duration_seconds histogram\n"));
    ck_assert_ptr_nonnull(
        strstr(page, "cabrank_http_request_duration_seconds_bucket{le=\"1e-06\"} 1\n"));
    ck_assert_ptr_nonnull(
        strstr(page, "cabrank_http_request_duration_seconds_bucket{le=\"2e-06\"} 2\n"));
    ck_assert_ptr_nonnull(
        strstr(page, "cabrank_http_request_duration_seconds_bucket{le=\"0.002048\"} 2\n"));
    ck_assert_ptr_nonnull(
        strstr(page, "cabrank_http_request_duration_seconds_bucket{le=\"0.004096\"} 3\n"));
    ck_assert_ptr_nonnull(
        strstr(page, "cabrank_http_request_duration_seconds_bucket{le=\"+Inf\"} 3\n"));
    ck_assert_ptr_nonnull(strstr(page, "cabrank_http_request_duration_seconds_sum 0.003002"));
    ck_assert_ptr_nonnull(strstr(page, "cabrank_http_request_duration_seconds_count 3\n"));
    ck_assert_ptr_nonnull(strstr(page, "cabrank_build_info{version=\""));
    ck_assert_ptr_nonnull(strstr(page, "# TYPE cabrank_workers gauge\ncabrank_workers{role=\""));
    free(page);
    page = render(st, STATUS_JSON);
    ck_assert_ptr_nonnull(strstr(page, "\"version\":\""));
    ck_assert_ptr_nonnull(strstr(page, "\"rates\":{\"window_s\":"));
    ck_assert_ptr_nonnull(strstr(page, "\"series\":{\"span_s\":"));
    free(page);
    page = render(st, STATUS_HTML);
    ck_assert_ptr_nonnull(strstr(page, "id=\"rates\""));
    ck_assert_ptr_nonnull(strstr(page, "<svg class=spark"));
    ck_assert_ptr_nonnull(strstr(page, "id=\"version\""));
    ck_assert_ptr_nonnull(strstr(page, "p99 &le; 4.1 ms"));
    free(page);
    status_destroy(st);
}
END_TEST

Suite *status_suite(void);
Suite *status_suite(void)
{
    Suite *s = suite_create("status");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, rates_are_over_the_newest_sample_a_second_old);
    tcase_add_test(tc, connections_are_listed_with_state_and_request);
    tcase_add_test(tc, long_request_lines_are_cut_and_long_lists_say_how_many_more);
    tcase_add_test(tc, rows_are_copied_whole_while_threads_write_them);
    tcase_add_test(tc, prometheus_text_has_help_type_and_a_cumulative_histogram);
    suite_add_tcase(s, tc);
    return s;
}
