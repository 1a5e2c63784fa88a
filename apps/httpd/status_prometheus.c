/*
 * status_prometheus.c - the status page as Prometheus text exposition
 * (format 0.0.4: /metrics and ?format=prometheus). Counters end in _total,
 * times are in seconds, sizes in bytes; each metric has HELP and TYPE. Runs
 * on the thread that serves the status request; owns nothing.
 *
 * Under the process models the per-class request counts, the body bytes
 * and the latency histogram are the serving process's (as on the HTML
 * page); every other figure is server-wide.
 */
#include "status_internal.h"

#include <stdio.h>

/* HELP and TYPE lines of a metric. */
static void meta(struct sbuf *b, const char *name, const char *type, const char *help)
{
    status_sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(struct sbuf *b, const char *name, const char *help, uint64_t v)
{
    meta(b, name, "counter", help);
    status_sb_printf(b, "%s %llu\n", name, (unsigned long long)v);
}

static void gauge(struct sbuf *b, const char *name, const char *help, double v)
{
    meta(b, name, "gauge", help);
    status_sb_printf(b, "%s %.15g\n", name, v);
}

/* cabrank_http_request_duration_seconds: cumulative buckets at each bucket's
 * upper limit, then +Inf, _sum and _count. */
static void histogram(struct sbuf *b, const struct status_totals *t)
{
    static const char name[] = "cabrank_http_request_duration_seconds";
    uint64_t seen = 0;

    meta(b, name, "histogram", "Service time from a request's first byte to its answer queued.");
    for (unsigned k = 0; k < STATUS_LATENCY_BUCKETS; k++) {
        uint64_t lim = status_bucket_limit_us(k);

        seen += t->latency[k];
        if (lim != 0)
            status_sb_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, (double)lim / 1e6,
                             (unsigned long long)seen);
    }
    status_sb_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9f\n%s_count %llu\n", name,
                     (unsigned long long)seen, name, (double)t->latency_sum_ns / 1e9, name,
                     (unsigned long long)seen);
}

static void process_metrics(struct sbuf *b, const struct snapshot *sn)
{
    const struct cr_server_stats *s = &sn->srv;

    gauge(b, "cabrank_worker_processes", "Worker processes alive.", s->processes);
    gauge(b, "cabrank_worker_generation", "The worker processes' generation.", s->generation);
    counter(b, "cabrank_worker_restarts_total", "Worker processes started again.", s->restarts);
    counter(b, "cabrank_worker_crashes_total",
            "Worker processes that died other than by being told to stop.", s->crashes);
    meta(b, "cabrank_worker_process_states", "gauge", "Scoreboard slots in each state.");
    for (unsigned k = 0; k < CR_WORKER_STATE_COUNT; k++)
        status_sb_printf(b, "cabrank_worker_process_states{state=\"%s\"} %u\n",
                         cr_worker_state_name((enum cr_worker_state)k), sn->states[k]);
}

void status_render_prometheus(struct sbuf *b, const struct snapshot *sn)
{
    const struct cr_server_stats *s = &sn->srv;
    static const char *const classes[6] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};

    meta(b, "cabrank_build_info", "gauge", "The server's version and model; always 1.");
    status_sb_printf(b, "cabrank_build_info{version=\"%s\",model=\"%s\"} 1\n", httpd_version(),
                     s->model != NULL ? s->model : "");
    gauge(b, "cabrank_start_time_seconds", "The server's start, in seconds since the epoch.",
          (double)sn->start_real_ns / 1e9);
    gauge(b, "cabrank_uptime_seconds", "Seconds since the server started.",
          (double)s->uptime_ns / 1e9);
    counter(b, "cabrank_server_requests_total", "Requests answered, server-wide.", sn->requests);
    meta(b, "cabrank_http_requests_total", "counter",
         "Requests answered by status class (under process models: this worker process's).");
    for (unsigned c = 0; c < 6; c++)
        status_sb_printf(b, "cabrank_http_requests_total{code_class=\"%s\"} %llu\n", classes[c],
                         (unsigned long long)sn->t.classes[c]);
    counter(b, "cabrank_http_response_bytes_total",
            "Response body bytes queued (under process models: this worker process's).",
            sn->t.body_bytes);
    histogram(b, &sn->t);
    counter(b, "cabrank_connections_accepted_total", "Connections accepted.", s->accepted);
    gauge(b, "cabrank_connections_open", "Connections open now.", (double)s->open_connections);
    counter(b, "cabrank_received_bytes_total", "Bytes read from clients.", s->bytes_in);
    counter(b, "cabrank_sent_bytes_total", "Bytes sent to clients.", s->bytes_out);
    counter(b, "cabrank_promotions_total", "Leader promotions (lf).", s->promotions);
    gauge(b, "cabrank_queue_depth", "Jobs queued (hshr).", (double)s->queue_depth);
    meta(b, "cabrank_workers", "gauge", "Worker threads in each role now.");
    for (unsigned r = 0; r < CR_ROLE_COUNT; r++)
        status_sb_printf(b, "cabrank_workers{role=\"%s\"} %u\n", cr_role_name((enum cr_role)r),
                         sn->roles[r]);
    if (sn->nboard > 0)
        process_metrics(b, sn);
}
