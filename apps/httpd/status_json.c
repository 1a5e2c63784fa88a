/*
 * status_json.c - the status page as JSON (?format=json): the snapshot
 * status.c took, written out whole. Runs on the thread that serves the
 * status request; owns nothing.
 */
#include "status_internal.h"

#include <string.h>
#include <unistd.h>

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* ,"processes":...,"scoreboard":[...],"scoreboard_totals":{...} */
static void render_scoreboard(struct sbuf *b, const struct snapshot *sn)
{
    const struct cr_server_stats *s = &sn->srv;
    const struct cr_scoreboard_entry *t = &sn->board_total;

    status_sb_printf(b,
                     ",\"processes\":%u,\"generation\":%u,\"restarts\":%llu,\"crashes\":%llu,"
                     "\"this_process\":{\"pid\":%ld,\"requests\":%llu},\"scoreboard\":[",
                     s->processes, s->generation, (unsigned long long)s->restarts,
                     (unsigned long long)s->crashes, (long)getpid(),
                     (unsigned long long)sn->t.requests);
    for (unsigned i = 0; i < sn->nboard; i++) {
        const struct cr_scoreboard_entry *e = &sn->board[i];
        double ago = status_ago_s(sn, e->last_request_ns);

        status_sb_printf(b,
                         "%s{\"pid\":%d,\"generation\":%u,\"state\":\"%s\",\"busy_threads\":%u,"
                         "\"connections\":%llu,\"requests\":%llu,\"bytes\":%llu,",
                         i ? "," : "", e->pid, e->generation, cr_worker_state_name(e->state),
                         e->busy_threads, (unsigned long long)e->connections,
                         (unsigned long long)e->requests, (unsigned long long)e->bytes);
        if (ago < 0)
            status_sb_printf(b, "\"last_request_s_ago\":null,");
        else
            status_sb_printf(b, "\"last_request_s_ago\":%.3f,", ago);
        status_sb_printf(b, "\"busy_ms\":%.3f}", ms(e->busy_ns));
    }
    status_sb_printf(b,
                     "],\"scoreboard_totals\":{\"slots\":%u,\"busy_threads\":%u,"
                     "\"connections\":%llu,\"requests\":%llu,\"bytes\":%llu,\"states\":{",
                     sn->nboard, t->busy_threads, (unsigned long long)t->connections,
                     (unsigned long long)t->requests, (unsigned long long)t->bytes);
    for (unsigned k = 0; k < CR_WORKER_STATE_COUNT; k++)
        status_sb_printf(b, "%s\"%s\":%u", k ? "," : "",
                         cr_worker_state_name((enum cr_worker_state)k), sn->states[k]);
    status_sb_printf(b, "}}");
}

static const char *const rate_names[STATUS_RATES] = {"requests_per_s", "bytes_per_s",
                                                     "connections_per_s"};

/* ,"rates":{...},"series":{...} */
static void render_rates(struct sbuf *b, const struct snapshot *sn)
{
    const struct status_rates *r = &sn->rates;

    status_sb_printf(b, ",\"rates\":{\"window_s\":%.3f", r->window_s);
    for (unsigned k = 0; k < STATUS_RATES; k++)
        status_sb_printf(b, ",\"%s\":%.3f", rate_names[k], r->per_s[k]);
    status_sb_printf(b, "},\"series\":{\"span_s\":%.3f,\"t_s\":[", r->span_s);
    for (unsigned i = 0; i < r->points; i++)
        status_sb_printf(b, "%s%.3f", i ? "," : "", r->t_s[i]);
    status_sb_printf(b, "]");
    for (unsigned k = 0; k < STATUS_RATES; k++) {
        status_sb_printf(b, ",\"%s\":[", rate_names[k]);
        for (unsigned i = 0; i < r->points; i++)
            status_sb_printf(b, "%s%.3f", i ? "," : "", r->series[k][i]);
        status_sb_printf(b, "]");
    }
    status_sb_printf(b, "}");
}

/* ,"connections":{"total":N,"listed":M,"list":[...]} */
static void render_conns(struct sbuf *b, const struct snapshot *sn)
{
    status_sb_printf(b, ",\"connections\":{\"total\":%u,\"listed\":%u,\"list\":[", sn->conns_total,
                     sn->nconns);
    for (unsigned i = 0; i < sn->nconns; i++) {
        const struct status_conn_row *c = &sn->conns[i];

        status_sb_printf(b, "%s{\"client\":\"", i ? "," : "");
        status_sb_escape(b, c->peer, strlen(c->peer), true);
        status_sb_printf(
            b, "\",\"state\":\"%s\",\"in_state_s\":%.3f,\"requests\":%llu,\"request\":\"",
            status_conn_state_name(c->state), c->in_state_s, (unsigned long long)c->requests);
        status_sb_escape(b, c->line, c->line_len, true);
        status_sb_printf(b, "\"}");
    }
    status_sb_printf(b, "]}");
}

void status_render_json(struct sbuf *b, const struct snapshot *sn)
{
    const struct cr_server_stats *s = &sn->srv;
    char start[32];

    status_sb_printf(b, "{\"server\":\"cabrank-httpd\",\"version\":\"%s\",\"model\":\"%s\",",
                     httpd_version(), s->model ? s->model : "");
    if (sn->start_real_ns != 0) {
        status_iso8601(sn->start_real_ns, start, sizeof(start));
        status_sb_printf(b, "\"start_time\":\"%s\",\"start_time_s\":%.3f,", start,
                         (double)sn->start_real_ns / 1e9);
    } else {
        status_sb_printf(b, "\"start_time\":null,");
    }
    if (s->promotion != NULL)
        status_sb_printf(b, "\"promotion\":\"%s\",", s->promotion);
    else
        status_sb_printf(b, "\"promotion\":null,");
    status_sb_printf(b,
                     "\"uptime_s\":%.3f,\"accepted\":%llu,\"open_connections\":%llu,"
                     "\"requests\":%llu,\"body_bytes\":%llu,\"bytes_in\":%llu,\"bytes_out\":%llu,"
                     "\"promotions\":%llu,\"deferred\":%llu,\"taken_over\":%llu,"
                     "\"queue_depth\":%llu,",
                     (double)s->uptime_ns / 1e9, (unsigned long long)s->accepted,
                     (unsigned long long)s->open_connections, (unsigned long long)sn->requests,
                     (unsigned long long)sn->t.body_bytes, (unsigned long long)s->bytes_in,
                     (unsigned long long)s->bytes_out, (unsigned long long)s->promotions,
                     (unsigned long long)s->deferred, (unsigned long long)s->taken_over,
                     (unsigned long long)s->queue_depth);
    status_sb_printf(
        b, "\"status\":{\"1xx\":%llu,\"2xx\":%llu,\"3xx\":%llu,\"4xx\":%llu,\"5xx\":%llu},",
        (unsigned long long)sn->t.classes[1], (unsigned long long)sn->t.classes[2],
        (unsigned long long)sn->t.classes[3], (unsigned long long)sn->t.classes[4],
        (unsigned long long)sn->t.classes[5]);
    status_sb_printf(b, "\"roles\":{");
    for (unsigned r = 0; r < CR_ROLE_COUNT; r++)
        status_sb_printf(b, "%s\"%s\":%u", r ? "," : "", cr_role_name((enum cr_role)r),
                         sn->roles[r]);
    status_sb_printf(b, "},\"workers\":[");
    for (unsigned i = 0; i < sn->nworkers; i++) {
        const struct cr_worker_stats *w = &sn->workers[i];

        status_sb_printf(b, "%s{\"id\":%u,", i ? "," : "", i);
        if (w->group != CR_WORKER_ANY_GROUP)
            status_sb_printf(b, "\"set\":%u,", w->group);
        status_sb_printf(b, "\"role\":\"%s\",\"events\":%llu,\"role_ms\":{", cr_role_name(w->role),
                         (unsigned long long)w->events);
        for (unsigned r = 0; r < CR_ROLE_COUNT; r++)
            status_sb_printf(b, "%s\"%s\":%.3f", r ? "," : "", cr_role_name((enum cr_role)r),
                             ms(w->role_ns[r]));
        status_sb_printf(b, "}}");
    }
    status_sb_printf(b, "],\"sets\":[");
    for (unsigned g = 0; g < s->groups; g++) {
        status_sb_printf(b, "%s{\"set\":%u,\"accepted\":%llu,\"threads\":[", g ? "," : "", g,
                         (unsigned long long)s->group_accepted[g]);
        status_render_set_threads(b, sn, g, ",");
        status_sb_printf(b, "]}");
    }
    status_sb_printf(b,
                     "],\"latency\":{\"unit\":\"us\",\"p50_le\":%llu,\"p99_le\":%llu,"
                     "\"sum_s\":%.6f,\"buckets\":[",
                     (unsigned long long)status_quantile_us(&sn->t, 0.5),
                     (unsigned long long)status_quantile_us(&sn->t, 0.99),
                     (double)sn->t.latency_sum_ns / 1e9);
    for (unsigned k = 0; k < STATUS_LATENCY_BUCKETS; k++) {
        uint64_t lim = status_bucket_limit_us(k);

        if (lim != 0)
            status_sb_printf(b, "%s{\"lt\":%llu,\"count\":%llu}", k ? "," : "",
                             (unsigned long long)lim, (unsigned long long)sn->t.latency[k]);
        else
            status_sb_printf(b, ",{\"lt\":null,\"count\":%llu}",
                             (unsigned long long)sn->t.latency[k]);
    }
    status_sb_printf(b, "]}");
    render_rates(b, sn);
    render_conns(b, sn);
    if (sn->nboard > 0)
        render_scoreboard(b, sn);
    status_sb_printf(b, "}\n");
}
