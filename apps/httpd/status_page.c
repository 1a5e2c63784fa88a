/*
 * status_page.c - the status page as HTML: the snapshot status.c took, in
 * human units (KiB, ms, "3 h 12 min"), the rates with a sparkline each
 * (inline SVG), the workers, the connections, the scoreboard under the
 * process models and the latency histogram, under the timeline's strip
 * chart (status_timeline.c). A script refreshes all but the chart every
 * 2 s in place, so the chart keeps running (without scripts, the whole page
 * reloads). Runs on the thread that serves the status request; owns
 * nothing.
 */
#include "status_internal.h"
#include "status_timeline.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char html_head[] =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<noscript><meta http-equiv=\"refresh\" content=\"2\"></noscript>\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<title>cabrank-httpd status</title>\n<style>\n"
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222;background:#fafafa}\n"
    "h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.5em}\n"
    "table{border-collapse:collapse}td,th{padding:.2em .7em;border-bottom:1px solid #ddd;"
    "text-align:right}th{background:#eee}td.l,th.l{text-align:left}\n"
    ".role{font-weight:bold;padding:.1em .5em;border-radius:.3em}\n"
    ".leader{background:#ffd54f}.follower{background:#b3e5fc}.processing{background:#a5d6a7}\n"
    ".idle{background:#e0e0e0}.listener{background:#ce93d8}.stopped{background:#ef9a9a}\n"
    ".starting{background:#fff59d}.listening{background:#ffd54f}.busy{background:#a5d6a7}\n"
    ".stopping{background:#ffcc80}.dead{background:#ef9a9a}\n"
    ".reading{background:#b3e5fc}.writing{background:#a5d6a7}.keep-alive{background:#e0e0e0}\n"
    ".bar{display:inline-block;height:.8em;background:#64b5f6}\n"
    "svg.spark{vertical-align:middle}svg.spark polyline{fill:none;stroke:#1976d2;"
    "stroke-width:1.5}\ncode{font-size:.9em}\n"
    "</style></head><body>\n<h1>cabrank-httpd status</h1>\n";

/* ------------------------------------------------------------------ units */

/* 512 B, 1.5 KiB, 3.2 MiB, ... */
static void bytes(struct sbuf *b, double v)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    unsigned u = 0;

    while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        status_sb_printf(b, "%.0f B", v);
    else
        status_sb_printf(b, "%.1f %s", v, units[u]);
}

/* 12 us, 3.4 ms, 2.5 s, 4 min 12 s, 3 h 12 min, 2 d 5 h. */
static void duration(struct sbuf *b, double s)
{
    unsigned long long whole = (unsigned long long)s;

    if (s <= 0)
        status_sb_printf(b, "0");
    else if (s < 0.001)
        status_sb_printf(b, "%.0f us", s * 1e6);
    else if (s < 1)
        status_sb_printf(b, "%.1f ms", s * 1e3);
    else if (s < 60)
        status_sb_printf(b, "%.1f s", s);
    else if (s < 3600)
        status_sb_printf(b, "%llu min %llu s", whole / 60, whole % 60);
    else if (s < 86400)
        status_sb_printf(b, "%llu h %llu min", whole / 3600, whole / 60 % 60);
    else
        status_sb_printf(b, "%llu d %llu h", whole / 86400, whole / 3600 % 24);
}

/* 1.2 k, 3.4 M: counts too long to read at a glance. */
static void count(struct sbuf *b, uint64_t v)
{
    if (v < 10000)
        status_sb_printf(b, "%llu", (unsigned long long)v);
    else if (v < 10000000)
        status_sb_printf(b, "%.1f k", (double)v / 1e3);
    else if (v < UINT64_C(10000000000))
        status_sb_printf(b, "%.1f M", (double)v / 1e6);
    else
        status_sb_printf(b, "%.1f G", (double)v / 1e9);
}

/* ------------------------------------------------------------------ sections */

/* A sparkline of series k: a step per interval between samples, over the
 * time they span, scaled to the largest. */
static void sparkline(struct sbuf *b, const struct status_rates *r, unsigned k)
{
    const double w = 160;
    const double h = 28;
    double span = r->span_s > 1 ? r->span_s : 1;
    double most = 0;
    double x0 = 0;

    for (unsigned i = 0; i < r->points; i++)
        most = r->series[k][i] > most ? r->series[k][i] : most;
    status_sb_printf(b,
                     "<svg class=spark width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">"
                     "<title>last %.0f s, peak ",
                     w, h, w, h + 2, span);
    if (k == STATUS_RATE_BYTES)
        bytes(b, most);
    else
        status_sb_printf(b, "%.1f", most);
    status_sb_printf(b, "/s</title><polyline points=\"");
    for (unsigned i = 0; i < r->points; i++) {
        double x = (span + r->t_s[i]) / span * w;
        double y = most > 0 ? h + 1 - r->series[k][i] / most * h : h + 1;

        x = x < 0 ? 0 : x;
        status_sb_printf(b, "%s%.1f,%.1f %.1f,%.1f", i ? " " : "", x0, y, x, y);
        x0 = x;
    }
    status_sb_printf(b, "\"/></svg>");
}

static void render_rates(struct sbuf *b, const struct snapshot *sn)
{
    const struct status_rates *r = &sn->rates;

    status_sb_printf(b,
                     "<h2>Rates</h2>\n<table id=\"rates\">\n<tr><th class=l></th><th>now</th>"
                     "<th class=l>last %.0f s</th></tr>\n",
                     r->span_s);
    status_sb_printf(b, "<tr><td class=l>requests</td><td>%.1f/s</td><td class=l>",
                     r->per_s[STATUS_RATE_REQUESTS]);
    sparkline(b, r, STATUS_RATE_REQUESTS);
    status_sb_printf(b, "</td></tr>\n<tr><td class=l>bytes sent</td><td>");
    bytes(b, r->per_s[STATUS_RATE_BYTES]);
    status_sb_printf(b, "/s</td><td class=l>");
    sparkline(b, r, STATUS_RATE_BYTES);
    status_sb_printf(b, "</td></tr>\n<tr><td class=l>connections</td><td>%.1f/s</td><td class=l>",
                     r->per_s[STATUS_RATE_CONNECTIONS]);
    sparkline(b, r, STATUS_RATE_CONNECTIONS);
    status_sb_printf(b,
                     "</td></tr>\n</table>\n<p>Now: over the last %.1f s. Sampled when this "
                     "page or its JSON or metrics are read, at most once a second.</p>\n",
                     r->window_s);
}

static void render_counters(struct sbuf *b, const struct snapshot *sn)
{
    const struct cr_server_stats *s = &sn->srv;

    status_sb_printf(b, "<table id=\"counters\">\n<tr><td class=l>requests</td><td>");
    count(b, sn->requests);
    status_sb_printf(b, "</td></tr>\n<tr><td class=l>connections accepted</td><td>");
    count(b, s->accepted);
    status_sb_printf(b, "</td></tr>\n<tr><td class=l>open connections</td><td>%llu</td></tr>\n",
                     (unsigned long long)s->open_connections);
    status_sb_printf(b, "<tr><td class=l>bytes in / out</td><td>");
    bytes(b, (double)s->bytes_in);
    status_sb_printf(b, " / ");
    bytes(b, (double)s->bytes_out);
    status_sb_printf(b, "</td></tr>\n<tr><td class=l>promotions</td><td>");
    count(b, s->promotions);
    status_sb_printf(b, "</td></tr>\n");
    if (s->deferred != 0)
        status_sb_printf(b,
                         "<tr><td class=l>promotions deferred / then taken over</td>"
                         "<td>%llu / %llu</td></tr>\n",
                         (unsigned long long)s->deferred, (unsigned long long)s->taken_over);
    if (s->queue_depth != 0)
        status_sb_printf(b, "<tr><td class=l>queue depth</td><td>%llu</td></tr>\n",
                         (unsigned long long)s->queue_depth);
    status_sb_printf(b,
                     "<tr><td class=l>status 2xx / 3xx / 4xx / 5xx</td><td>%llu / %llu / %llu / "
                     "%llu</td></tr>\n</table>\n",
                     (unsigned long long)sn->t.classes[2], (unsigned long long)sn->t.classes[3],
                     (unsigned long long)sn->t.classes[4], (unsigned long long)sn->t.classes[5]);
}

static void render_workers(struct sbuf *b, const struct snapshot *sn)
{
    const struct cr_server_stats *s = &sn->srv;

    status_sb_printf(b, "<h2>Workers</h2>\n<p id=\"roles\">");
    for (unsigned r = 0; r < CR_ROLE_COUNT; r++) {
        if (sn->roles[r] != 0)
            status_sb_printf(b, "<span class=\"role %s\">%s: %u</span> ",
                             cr_role_name((enum cr_role)r), cr_role_name((enum cr_role)r),
                             sn->roles[r]);
    }
    status_sb_printf(b, "</p>\n");
    if (s->groups > 0) {
        status_sb_printf(b, "<table id=\"sets\">\n<tr><th>handle set</th>"
                            "<th>connections accepted</th><th class=l>threads</th></tr>\n");
        for (unsigned g = 0; g < s->groups; g++) {
            status_sb_printf(b, "<tr><td>%u</td><td>%llu</td><td class=l>", g,
                             (unsigned long long)s->group_accepted[g]);
            status_render_set_threads(b, sn, g, " ");
            status_sb_printf(b, "</td></tr>\n");
        }
        status_sb_printf(b, "</table>\n");
    }
    status_sb_printf(b,
                     "<table id=\"workers\">\n<tr><th>#</th>%s<th class=l>role now</th>"
                     "<th>events</th>",
                     s->groups > 0 ? "<th>set</th>" : "");
    for (unsigned r = 0; r < CR_ROLE_COUNT; r++)
        status_sb_printf(b, "<th>%s</th>", cr_role_name((enum cr_role)r));
    status_sb_printf(b, "</tr>\n");
    for (unsigned i = 0; i < sn->nworkers; i++) {
        const struct cr_worker_stats *w = &sn->workers[i];
        const char *role = cr_role_name(w->role);

        status_sb_printf(b, "<tr><td>%u</td>", i);
        if (s->groups > 0 && w->group == CR_WORKER_ANY_GROUP)
            status_sb_printf(b, "<td>any</td>");
        else if (s->groups > 0)
            status_sb_printf(b, "<td>%u</td>", w->group);
        status_sb_printf(b, "<td class=l><span class=\"role %s\">%s</span></td><td>", role, role);
        count(b, w->events);
        status_sb_printf(b, "</td>");
        for (unsigned r = 0; r < CR_ROLE_COUNT; r++) {
            status_sb_printf(b, "<td>");
            duration(b, (double)w->role_ns[r] / 1e9);
            status_sb_printf(b, "</td>");
        }
        status_sb_printf(b, "</tr>\n");
    }
    status_sb_printf(b, "</table>\n");
}

/* The connections of this process, as mod_status lists them. */
static void render_conns(struct sbuf *b, const struct snapshot *sn)
{
    status_sb_printf(b, "<h2>Connections</h2>\n<p>%u open%s", sn->conns_total,
                     sn->nboard > 0 ? " in this worker process (pid " : "");
    if (sn->nboard > 0)
        status_sb_printf(b, "%ld; the scoreboard counts every process's)", (long)getpid());
    status_sb_printf(b, ".</p>\n<table id=\"connections\">\n<tr><th class=l>client</th>"
                        "<th class=l>state</th><th>for</th><th>requests</th>"
                        "<th class=l>request</th></tr>\n");
    for (unsigned i = 0; i < sn->nconns; i++) {
        const struct status_conn_row *c = &sn->conns[i];
        const char *state = status_conn_state_name(c->state);

        status_sb_printf(b, "<tr><td class=l>");
        status_sb_escape(b, c->peer, strlen(c->peer), false);
        status_sb_printf(b, "</td><td class=l><span class=\"role %s\">%s</span></td><td>", state,
                         state);
        duration(b, c->in_state_s);
        status_sb_printf(b, "</td><td>%llu</td><td class=l><code>",
                         (unsigned long long)c->requests);
        status_sb_escape(b, c->line, c->line_len, false);
        status_sb_printf(b, "</code></td></tr>\n");
    }
    status_sb_printf(b, "</table>\n");
    if (sn->conns_total > sn->nconns)
        status_sb_printf(b, "<p id=\"conns-more\">%u more</p>\n", sn->conns_total - sn->nconns);
}

/* The process models' scoreboard: a row per slot in use, then the totals. */
static void render_scoreboard(struct sbuf *b, const struct snapshot *sn)
{
    const struct cr_server_stats *s = &sn->srv;
    const struct cr_scoreboard_entry *t = &sn->board_total;
    double ago;

    status_sb_printf(b,
                     "<h2>Scoreboard</h2>\n<p id=\"processes\">%u worker processes, generation "
                     "%u, %llu restarts, %llu crashes. This page was served by pid %ld, which "
                     "answered %llu requests; the workers' table is that process's threads.</p>\n"
                     "<p id=\"states\">",
                     s->processes, s->generation, (unsigned long long)s->restarts,
                     (unsigned long long)s->crashes, (long)getpid(),
                     (unsigned long long)sn->t.requests);
    for (unsigned k = 0; k < CR_WORKER_STATE_COUNT; k++) {
        const char *name = cr_worker_state_name((enum cr_worker_state)k);

        if (sn->states[k] != 0)
            status_sb_printf(b, "<span class=\"role %s\">%s: %u</span> ", name, name,
                             sn->states[k]);
    }
    status_sb_printf(b, "</p>\n<table id=\"scoreboard\">\n<tr><th>slot</th><th>pid</th>"
                        "<th>gen</th><th class=l>state</th><th>busy threads</th>"
                        "<th>connections</th><th>requests</th><th>bytes</th><th>last request</th>"
                        "<th>busy for</th></tr>\n");
    for (unsigned i = 0; i < sn->nboard; i++) {
        const struct cr_scoreboard_entry *e = &sn->board[i];
        const char *state = cr_worker_state_name(e->state);

        status_sb_printf(b,
                         "<tr><td>%u</td><td>%d</td><td>%u</td><td class=l><span class=\"role "
                         "%s\">%s</span></td><td>%u</td><td>%llu</td><td>%llu</td><td>",
                         i, e->pid, e->generation, state, state, e->busy_threads,
                         (unsigned long long)e->connections, (unsigned long long)e->requests);
        bytes(b, (double)e->bytes);
        status_sb_printf(b, "</td><td>");
        ago = status_ago_s(sn, e->last_request_ns);
        if (ago < 0) {
            status_sb_printf(b, "-");
        } else {
            duration(b, ago);
            status_sb_printf(b, " ago");
        }
        status_sb_printf(b, "</td><td>");
        if (e->state == CR_WORKER_BUSY)
            duration(b, (double)e->busy_ns / 1e9);
        else
            status_sb_printf(b, "-");
        status_sb_printf(b, "</td></tr>\n");
    }
    status_sb_printf(b,
                     "<tr><th class=l colspan=4>total (%u slots)</th><th>%u</th><th>%llu</th>"
                     "<th>%llu</th><th>",
                     sn->nboard, t->busy_threads, (unsigned long long)t->connections,
                     (unsigned long long)t->requests);
    bytes(b, (double)t->bytes);
    status_sb_printf(b, "</th><th>");
    ago = status_ago_s(sn, t->last_request_ns);
    if (ago < 0) {
        status_sb_printf(b, "-");
    } else {
        duration(b, ago);
        status_sb_printf(b, " ago");
    }
    status_sb_printf(b, "</th><th></th></tr>\n</table>\n");
}

static void render_latency(struct sbuf *b, const struct snapshot *sn)
{
    uint64_t most = 0;

    status_sb_printf(b,
                     "<h2>Service latency%s</h2>\n<p>From the first byte of a request to its "
                     "answer queued; p50 &le; ",
                     sn->nboard > 0 ? " (this worker process)" : "");
    duration(b, (double)status_quantile_us(&sn->t, 0.5) / 1e6);
    status_sb_printf(b, ", p99 &le; ");
    duration(b, (double)status_quantile_us(&sn->t, 0.99) / 1e6);
    status_sb_printf(b, ".</p>\n<table id=\"latency\">\n<tr><th class=l>latency</th>"
                        "<th>requests</th><th class=l></th></tr>\n");
    for (unsigned k = 0; k < STATUS_LATENCY_BUCKETS; k++)
        most = sn->t.latency[k] > most ? sn->t.latency[k] : most;
    for (unsigned k = 0; k < STATUS_LATENCY_BUCKETS; k++) {
        uint64_t lim = status_bucket_limit_us(k);
        unsigned width = most != 0 ? (unsigned)(sn->t.latency[k] * 300 / most) : 0;

        if (sn->t.latency[k] == 0)
            continue;
        if (lim != 0) {
            status_sb_printf(b, "<tr><td class=l>&lt; ");
            duration(b, (double)lim / 1e6);
        } else {
            status_sb_printf(b, "<tr><td class=l>&ge; ");
            duration(b, (double)(UINT64_C(1) << (STATUS_LATENCY_BUCKETS - 2)) / 1e6);
        }
        status_sb_printf(b,
                         "</td><td>%llu</td><td class=l><span class=bar style=\"width:%upx\">"
                         "</span></td></tr>\n",
                         (unsigned long long)sn->t.latency[k], width);
    }
    status_sb_printf(b, "</table>\n");
}

/* Every 2 s: the page anew, whose server line and live sections replace
 * these, so the timeline above them is never reloaded. */
static const char refresh_script[] =
    "<script>setInterval(function(){fetch(location.href,{cache:'no-store'}).then(function(r){"
    "return r.text();}).then(function(t){var d=new DOMParser().parseFromString(t,'text/html');"
    "['server','live'].forEach(function(id){var n=d.getElementById(id),o=document."
    "getElementById(id);if(n&&o)o.innerHTML=n.innerHTML;});}).catch(function(){});},2000);"
    "</script>\n";

void status_render_html(struct sbuf *b, const struct snapshot *sn)
{
    const struct cr_server_stats *s = &sn->srv;
    char start[32];

    status_sb_printf(b, "%s<p id=\"server\">Model <b>%s</b>", html_head, s->model ? s->model : "?");
    if (s->promotion != NULL)
        status_sb_printf(b, " (promotion <b>%s</b>)", s->promotion);
    status_sb_printf(b, ", %u workers; cabrank-httpd <b id=\"version\">%s</b>", sn->nworkers,
                     httpd_version());
    if (sn->start_real_ns != 0) {
        status_iso8601(sn->start_real_ns, start, sizeof(start));
        status_sb_printf(b, ", started <time id=\"start\" datetime=\"%s\">%s</time>", start, start);
    }
    status_sb_printf(b, ", up <span id=\"uptime\">");
    duration(b, (double)s->uptime_ns / 1e9);
    status_sb_printf(b,
                     "</span>. This page refreshes every 2 s; <a href=\"?format=json\">JSON</a>, "
                     "<a href=\"?format=prometheus\">Prometheus</a>.</p>\n");
    status_sb_printf(b, "%s<div id=\"live\">\n", status_timeline_section());
    render_rates(b, sn);
    render_counters(b, sn);
    render_workers(b, sn);
    render_conns(b, sn);
    if (sn->nboard > 0)
        render_scoreboard(b, sn);
    render_latency(b, sn);
    status_sb_printf(b, "</div>\n%s<p><a href=\"/\">cabrank</a></p>\n</body></html>\n",
                     refresh_script);
}
