/*
 * httpd_metrics.c (integration) - cabrank-httpd's Prometheus text, parsed
 * by a real parser: Python's prometheus_client (Debian's
 * python3-prometheus-client, for /usr/bin/python3; `make deps-test` installs
 * it). After a little load, /metrics under lf and /server-status?format=
 * prometheus under prefork must parse, have the usual families with their
 * types (requests by code class, response bytes, connections accepted, the
 * duration histogram with cumulative buckets ending at +Inf = _count, the
 * workers by role, start time, build info with the version; prefork: the
 * worker processes, restarts and crashes). Skips (77) only when python3 or
 * the module is missing. Exit 0 pass, 1 fail, 77 skip.
 */
#include "httpd_client.h"

#include <sys/wait.h>

#define PYTHON "/usr/bin/python3"

/* The checks, in Python: argv[1] the text, argv[2] the model. */
static const char checker[] =
    "import sys\n"
    "from prometheus_client.parser import text_string_to_metric_families\n"
    "text = open(sys.argv[1]).read()\n"
    "fams = {}\n"
    "for f in text_string_to_metric_families(text):\n"
    "    fams[f.name[:-6] if f.name.endswith('_total') else f.name] = f\n"
    "bad = []\n"
    "need = {'cabrank_http_requests': 'counter', 'cabrank_http_response_bytes': 'counter',\n"
    "        'cabrank_connections_accepted': 'counter', 'cabrank_server_requests': 'counter',\n"
    "        'cabrank_http_request_duration_seconds': 'histogram', 'cabrank_workers': 'gauge',\n"
    "        'cabrank_start_time_seconds': 'gauge', 'cabrank_build_info': 'gauge'}\n"
    "if sys.argv[2] == 'prefork':\n"
    "    need.update({'cabrank_worker_processes': 'gauge', 'cabrank_worker_restarts': 'counter',\n"
    "                 'cabrank_worker_crashes': 'counter'})\n"
    "for name, typ in need.items():\n"
    "    if name not in fams:\n"
    "        bad.append('missing ' + name)\n"
    "    elif fams[name].type != typ:\n"
    "        bad.append('%s is %s, not %s' % (name, fams[name].type, typ))\n"
    "def samples(name):\n"
    "    return fams[name].samples if name in fams else []\n"
    "c2 = [s.value for s in samples('cabrank_http_requests') if s.labels.get('code_class') == "
    "'2xx']\n"
    "if sys.argv[2] != 'prefork' and (not c2 or c2[0] <= 0):\n"
    "    bad.append('no 2xx requests counted')\n"
    "acc = [s.value for s in samples('cabrank_connections_accepted')]\n"
    "if not acc or acc[0] <= 0:\n"
    "    bad.append('no connections accepted')\n"
    "h = samples('cabrank_http_request_duration_seconds')\n"
    "buckets = [(s.labels['le'], s.value) for s in h if s.name.endswith('_bucket')]\n"
    "count = [s.value for s in h if s.name.endswith('_count')]\n"
    "total = [s.value for s in h if s.name.endswith('_sum')]\n"
    "if not buckets or buckets[-1][0] != '+Inf':\n"
    "    bad.append('histogram does not end at +Inf')\n"
    "les = [float(le) for le, v in buckets]\n"
    "if les != sorted(les):\n"
    "    bad.append('bucket bounds out of order')\n"
    "vals = [v for le, v in buckets]\n"
    "if vals != sorted(vals):\n"
    "    bad.append('buckets not cumulative')\n"
    "if not count or not buckets or count[0] != buckets[-1][1] or not total:\n"
    "    bad.append('_count/_sum do not match the +Inf bucket')\n"
    "if sys.argv[2] != 'prefork' and (not count or count[0] <= 0):\n"
    "    bad.append('empty histogram')\n"
    "info = samples('cabrank_build_info')\n"
    "if not info or not info[0].labels.get('version') or info[0].value != 1:\n"
    "    bad.append('build_info without a version')\n"
    "roles = {s.labels.get('role') for s in samples('cabrank_workers')}\n"
    "if 'leader' not in roles:\n"
    "    bad.append('no cabrank_workers{role=leader}')\n"
    "if sys.argv[2] == 'prefork' and samples('cabrank_worker_processes')[0].value < 1:\n"
    "    bad.append('no worker processes')\n"
    "st = samples('cabrank_start_time_seconds')\n"
    "if not st or st[0].value < 1.5e9:\n"
    "    bad.append('start time')\n"
    "for b in bad:\n"
    "    print('metrics: ' + b)\n"
    "print('parsed %d families' % len(fams))\n"
    "sys.exit(1 if bad else 0)\n";

static char dir[256];

/* Fetches req's metrics after some load and runs the checker on them. */
static void check(const char *root, const char *model, const char *req)
{
    const char *const args[] = {"--model", model, "--threads", "2", NULL};
    struct hc_server s;
    struct hc_resp r;
    char text[400];
    char cmd[1200];
    int st;

    if (hc_start(&s, root, args) < 0) {
        hc_failures++;
        return;
    }
    for (int i = 0; i < 20; i++)
        CHECK(hc_status(s.port, "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n") == 200, "load %d", i);
    CHECK(hc_status(s.port, "GET /missing HTTP/1.1\r\nHost: t\r\n\r\n") == 404, "404");
    CHECK(hc_get(s.port, req, &r) == 0 && r.status == 200 && r.body != NULL, "%s: metrics %d",
          model, r.status);
    snprintf(text, sizeof(text), "%s/metrics-%s.txt", dir, model);
    if (r.body != NULL && hc_write_file(dir, strrchr(text, '/') + 1, r.body, r.body_len) == 0) {
        snprintf(cmd, sizeof(cmd), PYTHON " %s/check.py %s %s >&2", dir, text, model);
        st = system(cmd);
        CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "%s: prometheus_client rejects the text (%s):\n%s", model, text, r.body);
    }
    hc_resp_free(&r);
    CHECK(hc_stop(&s) == 0, "%s: exit", model);
}

int main(void)
{
    char root[300];

    if (access(PYTHON, X_OK) < 0) {
        printf(PYTHON " not installed\n");
        return 77;
    }
    if (system(PYTHON " -c 'import prometheus_client.parser' 2>/dev/null") != 0) {
        printf("python3-prometheus-client not installed\n");
        return 77;
    }
    if (hc_mkdtemp(dir, sizeof(dir)) < 0)
        return 1;
    snprintf(root, sizeof(root), "%s/root", dir);
    if (mkdir(root, 0755) < 0 || hc_write_file(root, "hello.txt", "Hello\n", 6) < 0 ||
        hc_write_file(dir, "check.py", checker, sizeof(checker) - 1) < 0)
        return 1;
    check(root, "lf", "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
    check(root, "prefork", "GET /server-status?format=prometheus HTTP/1.1\r\nHost: t\r\n\r\n");
    if (hc_failures == 0) {
        fprintf(stderr, "httpd_metrics: ok\n");
        return 0;
    }
    fprintf(stderr, "httpd_metrics: %d check(s) failed\n", hc_failures);
    return 1;
}
