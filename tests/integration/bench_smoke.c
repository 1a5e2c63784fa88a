/*
 * bench_smoke.c (integration) - cabrank-bench end to end with tiny loads: two cabrank
 * configurations (lf:lifo, hshr), no peers, one HTTP keep-alive point through wrk, the
 * intervals, the line protocol closed and open loop, --repeat 3, into a temporary output
 * directory. Then checks what it wrote: results.csv with the exact header, one row per point
 * asked and three of each point a claim compares (not of line-open), every row with 22 fields, each
 * point measured with no error (req/s > 0 for loads, percentiles in order, CPU per request and its
 * user and system parts, cores empty: nothing pinned, the machine's load average and the other
 * processes' CPU share before and during the point as numbers, shares in [0, 1], and its noisy flag
 * 0 or 1 as --noise-max says); results.md naming each workload and the command, the noise summary
 * line counting the noisy rows, the load and noise columns, each repeated point's spread, and its
 * claims table with the measure, threshold, spread and repetitions of each claim; claims.csv with
 * its header and every claim, measured from three repetitions; a plot-<workload>.svg per workload
 * that is well-formed XML with an <svg> root, the load of each point labelled on the throughput
 * plots; the run's --noise-max 0.5 is the one the flags and the summary follow. Then, on two CPUs
 * of its mask, `--cores 1,2` with one configuration and one point: k=1 measured (cores 1), k=2
 * skipped and said in results.md, a scaling table and a well-formed scaling plot. wrk is a test
 * dependency (make test installs it). Exit 0 pass, 1 fail.
 */
#include "bench_lab.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The workloads the run writes, and the rows each gets: 2 configurations x 1 point, 3 times
 * over for the workloads the claims compare. */
static const char *const workloads[] = {
    "http:hello.txt", "interval:t_conn", "interval:t_res1", "interval:t_res2", "line", "line-open",
};
static const int want_rows[] = {6, 6, 6, 6, 6, 2};

/* The run's --noise-max. */
#define BENCH_SMOKE_NOISE_MAX 0.5

/* Counted by check_row: rows, and the points (an interval's three rows are one) and those
 * flagged noisy. */
struct tally {
    int rows[sizeof(workloads) / sizeof(workloads[0])];
    int noisy;
    int all;
};

/* The noise columns of a row: numbers in range, the flag as the shares and --noise-max say. An
 * interval point (20 sequential clients) may end within one tick of /proc/stat, on a quiet
 * machine: its share during is then not measured (empty), which only it may be. */
static void check_noise(char **f, double max)
{
    double load = cr_test_number(f[18]);
    double before = cr_test_number(f[19]);
    double during = cr_test_number(f[20]);
    bool unmeasured = f[20][0] == '\0' && strncmp(f[0], "interval", 8) == 0;

    if (unmeasured)
        during = 0;
    if (!(load >= 0) || !(before >= 0 && before <= 1) || !(during >= 0 && during <= 1))
        bl_fail("%s %s: loadavg '%s' other before '%s' during '%s'", f[0], f[2], f[18], f[19],
                f[20]);
    if (strcmp(f[21], (before > max || during > max) ? "1" : "0") != 0)
        bl_fail("%s %s: noisy '%s' with others at %s and %s of the CPU, --noise-max %g", f[0], f[2],
                f[21], f[19], f[20], max);
}

/* One row: a workload asked for, of cabrank, measured and consistent. */
static void check_row(char **f, void *arg)
{
    struct tally *t = arg;
    int *rows = t->rows;
    size_t w;

    for (w = 0; w < sizeof(workloads) / sizeof(workloads[0]); w++) {
        if (strcmp(f[0], workloads[w]) == 0)
            break;
    }
    if (w == sizeof(workloads) / sizeof(workloads[0])) {
        bl_fail("CSV row of an unasked workload '%s'", f[0]);
        return;
    }
    rows[w]++;
    if (strcmp(f[1], "cabrank") != 0 || (strcmp(f[2], "lf:lifo") != 0 && strcmp(f[2], "hshr") != 0))
        bl_fail("%s: server '%s' config '%s'", f[0], f[1], f[2]);
    if (cr_test_number(f[13]) != 0)
        bl_fail("%s %s: errors '%s'", f[0], f[2], f[13]);
    /* Percentiles measured and in order. */
    if (!(cr_test_number(f[6]) > 0 && cr_test_number(f[6]) <= cr_test_number(f[7]) &&
          cr_test_number(f[7]) <= cr_test_number(f[8]) &&
          cr_test_number(f[8]) <= cr_test_number(f[9])))
        bl_fail("%s %s: percentiles %s %s %s %s", f[0], f[2], f[6], f[7], f[8], f[9]);
    if (strncmp(f[0], "interval:", 9) == 0) {
        if (cr_test_number(f[5]) != 0)
            bl_fail("%s: rps '%s', want 0", f[0], f[5]);
    } else {
        if (!(cr_test_number(f[5]) > 0))
            bl_fail("%s %s: rps '%s'", f[0], f[2], f[5]);
        /* CPU time comes in clock ticks (10 ms): a short light point may show 0. */
        if (!(cr_test_number(f[10]) >= 0) || !(cr_test_number(f[11]) >= 0) ||
            !(cr_test_number(f[12]) > 0))
            bl_fail("%s %s: cpu '%s' ctxsw '%s' rss '%s'", f[0], f[2], f[10], f[11], f[12]);
        if (!(cr_test_number(f[15]) >= 0) || !(cr_test_number(f[16]) >= 0))
            bl_fail("%s %s: user '%s' sys '%s'", f[0], f[2], f[15], f[16]);
    }
    if (strcmp(f[0], "line-open") == 0 && cr_test_number(f[4]) != 500)
        bl_fail("line-open: rate '%s', want 500", f[4]);
    if (f[17][0] != '\0')
        bl_fail("%s %s: cores '%s' without --cores", f[0], f[2], f[17]);
    check_noise(f, BENCH_SMOKE_NOISE_MAX);
    if (strcmp(f[0], "interval:t_res1") == 0 || strcmp(f[0], "interval:t_res2") == 0)
        return;
    t->noisy += strcmp(f[21], "1") == 0;
    t->all++;
}

/* Checks the rows of the run; returns how many points were noisy, of how many (*all). */
static int check_csv(const char *dir, int *all)
{
    struct tally t = {{0}, 0, 0};

    bl_check_csv(dir, check_row, &t);
    for (size_t w = 0; w < sizeof(workloads) / sizeof(workloads[0]); w++) {
        if (t.rows[w] != want_rows[w])
            bl_fail("%s: %d rows, want %d", workloads[w], t.rows[w], want_rows[w]);
    }
    *all = t.all;
    return t.noisy;
}

/* ------------------------------------------------------------ a small XML checker */

static bool name_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == ':' || c == '.';
}

/*
 * Well-formedness of the subset an SVG writer uses: declaration, comments, elements with
 * quoted attributes, self-closing tags, text with entities; every tag closed in order, one
 * root. Returns NULL or what was wrong; *root gets the root element's name.
 */
static const char *xml_check(const char *s, char *root, size_t rootcap)
{
    char stack[64][64];
    int depth = 0;
    int roots = 0;

    while (*s) {
        if (*s == '&') {
            const char *semi = strchr(s, ';');

            if (semi == NULL || semi - s > 10 || semi == s + 1)
                return "a bare '&'";
            for (const char *p = s + 1; p < semi; p++) {
                if (!isalnum((unsigned char)*p) && *p != '#')
                    return "a bad entity";
            }
            s = semi + 1;
            continue;
        }
        if (*s != '<') {
            if (depth == 0 && !isspace((unsigned char)*s))
                return "text outside the root";
            s++;
            continue;
        }
        if (strncmp(s, "<?", 2) == 0) {
            s = strstr(s, "?>");
            if (s == NULL)
                return "an unclosed <?";
            s += 2;
        } else if (strncmp(s, "<!--", 4) == 0) {
            s = strstr(s, "-->");
            if (s == NULL)
                return "an unclosed comment";
            s += 3;
        } else if (s[1] == '/') {
            size_t n = 0;

            s += 2;
            while (name_char(s[n]))
                n++;
            if (depth == 0 || strlen(stack[depth - 1]) != n || strncmp(stack[depth - 1], s, n))
                return "a closing tag that does not match";
            depth--;
            s += n;
            while (isspace((unsigned char)*s))
                s++;
            if (*s++ != '>')
                return "a bad closing tag";
        } else {
            size_t n = 0;

            s++;
            while (name_char(s[n]))
                n++;
            if (n == 0 || n >= sizeof(stack[0]) || depth == 64)
                return "a bad tag name";
            if (depth == 0 && roots++ > 0)
                return "two roots";
            if (depth == 0)
                snprintf(root, rootcap, "%.*s", (int)n, s);
            snprintf(stack[depth], sizeof(stack[depth]), "%.*s", (int)n, s);
            s += n;
            for (;;) {
                while (isspace((unsigned char)*s))
                    s++;
                if (*s == '>') {
                    depth++;
                    s++;
                    break;
                }
                if (s[0] == '/' && s[1] == '>') {
                    s += 2;
                    break;
                }
                if (!name_char(*s))
                    return "a bad attribute";
                while (name_char(*s))
                    s++;
                while (isspace((unsigned char)*s))
                    s++;
                if (*s++ != '=')
                    return "an attribute without a value";
                while (isspace((unsigned char)*s))
                    s++;
                char q = *s++;

                if (q != '"' && q != '\'')
                    return "an unquoted attribute";
                while (*s && *s != q) {
                    if (*s == '<')
                        return "a '<' in an attribute";
                    s++;
                }
                if (*s++ != q)
                    return "an unclosed attribute";
            }
        }
    }
    if (depth != 0)
        return "unclosed elements at the end";
    return roots == 1 ? NULL : "no root";
}

static void check_svg(const char *dir, const char *prefix, const char *workload)
{
    char path[PATH_MAX];
    char name[128];
    char root[64] = "";
    const char *why;
    char *text;
    size_t k = 0;

    /* The report's file name rule: bytes outside [A-Za-z0-9._-] become '-'. */
    for (const char *p = workload; *p && k < sizeof(name) - 1; p++)
        name[k++] = isalnum((unsigned char)*p) || strchr("._-", *p) ? *p : '-';
    name[k] = '\0';
    snprintf(path, sizeof(path), "%s/%s-%s.svg", dir, prefix, name);
    text = cr_test_read_file(path, NULL);
    if (text == NULL) {
        bl_fail("no %s", path);
        return;
    }
    why = xml_check(text, root, sizeof(root));
    if (why != NULL)
        bl_fail("%s is not well-formed XML: %s", path, why);
    else if (strcmp(root, "svg") != 0)
        bl_fail("%s: root <%s>, want <svg>", path, root);
    else if (strstr(text, "lf:lifo") == NULL ||
             (strcmp(prefix, "plot") == 0 && strstr(text, "hshr") == NULL))
        bl_fail("%s: a legend without its series", path);
    /* A throughput plot labels its points' load: 4 connections, or line-open's 500 req/s. */
    else if (strcmp(prefix, "plot") == 0 && strncmp(workload, "interval", 8) != 0 &&
             strstr(text, strcmp(workload, "line-open") == 0 ? ">r=500</text>" : ">c=4</text>") ==
                 NULL)
        bl_fail("%s: its points' load is not labelled", path);
    free(text);
}

static void check_md(const char *dir, int noisy, int points)
{
    char path[PATH_MAX];
    char summary[160];
    const char *lf;
    const char *reps;
    char *text;

    snprintf(path, sizeof(path), "%s/results.md", dir);
    text = cr_test_read_file(path, NULL);
    if (text == NULL) {
        bl_fail("no %s", path);
        return;
    }
    for (size_t w = 0; w < sizeof(workloads) / sizeof(workloads[0]); w++) {
        if (strstr(text, workloads[w]) == NULL)
            bl_fail("results.md does not name %s", workloads[w]);
    }
    if (strstr(text, "--configs lf:lifo,hshr") == NULL)
        bl_fail("results.md does not show the command");
    /* The noise: the summary counts the CSV's noisy points; each table has its columns. */
    snprintf(summary, sizeof(summary),
             "\nNoise: %d of %d points ran with more than 50%% of the CPU taken by other "
             "processes",
             noisy, points);
    if (strstr(text, summary) == NULL)
        bl_fail("results.md: no line '%s'", summary + 1);
    if (strstr(text, "| load avg | others' CPU % before / during |") == NULL)
        bl_fail("results.md: no load and noise columns");
    /* line at 4 connections, three times under each configuration: each row shows the spread. */
    if (strstr(text, "| req/s min–max (runs) |") == NULL || strstr(text, " (3) | ") == NULL)
        bl_fail("results.md: no spread of the repeated points");
    /* The claims: each with its measure, threshold and spread; L/F against HS/HR measured on
     * three repetitions, whatever its verdict. */
    if (strstr(text, "| claim | measure | threshold | ratio | spread | reps | verdict | measured "
                     "on |\n") == NULL)
        bl_fail("results.md: no claims table with measure, threshold and spread");
    lf = strstr(text, "| L/F has at least HS/HR's throughput at high load | req/s lf / hshr | > "
                      "1.00 | ");
    reps = lf != NULL ? strstr(lf, " | 3 | ") : NULL;
    if (reps == NULL || reps > strchr(lf, '\n'))
        bl_fail("results.md: L/F against HS/HR not judged on 3 repetitions");
    free(text);
}

/* claims.csv: the header, every claim (held or not), L/F against HS/HR from 3 repetitions. */
static void check_claims_csv(const char *dir)
{
    char path[PATH_MAX];
    char *text;
    char *line;
    int claims = 0;

    snprintf(path, sizeof(path), "%s/claims.csv", dir);
    text = cr_test_read_file(path, NULL);
    if (text == NULL) {
        bl_fail("no %s", path);
        return;
    }
    if (strncmp(text,
                "cores,claim,measure,threshold,ratio,ratio_min,ratio_max,repetitions,"
                "verdict,measured_on,noisy_repetitions\n",
                strlen("cores,claim,measure,threshold,ratio,ratio_min,ratio_max,repetitions,"
                       "verdict,measured_on,noisy_repetitions\n")) != 0)
        bl_fail("claims.csv: header");
    for (line = strchr(text, '\n'); line != NULL && line[1] != '\0'; line = strchr(line + 1, '\n'))
        claims++;
    if (claims != 7)
        bl_fail("claims.csv: %d claims, want 7", claims);
    line = strstr(text, ",L/F has at least HS/HR's throughput at high load,req/s lf / hshr,1,");
    if (line == NULL || strstr(line, ",3,") == NULL || strstr(line, ",3,") > strchr(line + 1, '\n'))
        bl_fail("claims.csv: L/F against HS/HR not from 3 repetitions");
    free(text);
}

/* --cores 1,2 on two CPUs: the row of k=1, the words for k=2, the scaling table and plot. */
static void check_cores_row(char **f, void *arg)
{
    int *rows = arg;

    (*rows)++;
    if (strcmp(f[0], "http:hello.txt") != 0 || strcmp(f[2], "lf:lifo") != 0 ||
        strcmp(f[17], "1") != 0 || !(cr_test_number(f[5]) > 0) || cr_test_number(f[13]) != 0)
        bl_fail("--cores row: %s %s rps '%s' errors '%s' cores '%s'", f[0], f[2], f[5], f[13],
                f[17]);
}

static void run_cores(const char *bench, char *dir)
{
    cpu_set_t mask;
    cpu_set_t two;
    char path[PATH_MAX];
    char *argv[24];
    char *md;
    int rows = 0;
    int n = 0;

    CPU_ZERO(&mask);
    CPU_ZERO(&two);
    if (sched_getaffinity(0, sizeof(mask), &mask) < 0 || CPU_COUNT(&mask) < 2) {
        fprintf(stderr, "bench_smoke: fewer than 2 CPUs here: --cores not checked\n");
        return;
    }
    for (int c = 0; c < CPU_SETSIZE && CPU_COUNT(&two) < 2; c++)
        if (CPU_ISSET(c, &mask))
            CPU_SET(c, &two);
    /* This process is done with everything else: cabrank-bench inherits its two CPUs. */
    if (sched_setaffinity(0, sizeof(two), &two) < 0) {
        bl_fail("sched_setaffinity: %s", strerror(errno));
        return;
    }
    argv[n++] = (char *)bench;
    argv[n++] = "--cores";
    argv[n++] = "1,2";
    argv[n++] = "--configs";
    argv[n++] = "lf:lifo";
    argv[n++] = "--no-peers";
    argv[n++] = "--workloads";
    argv[n++] = "http:hello.txt";
    argv[n++] = "--concurrency";
    argv[n++] = "4";
    argv[n++] = "--seconds";
    argv[n++] = "0.5";
    argv[n++] = "--warmup";
    argv[n++] = "0";
    argv[n++] = "--repeat";
    argv[n++] = "1";
    argv[n++] = "--out";
    argv[n++] = dir;
    argv[n] = NULL;
    bl_run(argv, NULL);
    bl_check_csv(dir, check_cores_row, &rows);
    if (rows != 1)
        bl_fail("--cores 1,2: %d rows, want 1 (k=1)", rows);
    snprintf(path, sizeof(path), "%s/results.md", dir);
    md = cr_test_read_file(path, NULL);
    if (md == NULL) {
        bl_fail("no %s", path);
        return;
    }
    if (strstr(md, "skipped 2: this machine lets cabrank-bench use 2 CPUs; each point needs k for "
                   "the server and at least one for the load") == NULL)
        bl_fail("results.md does not say that k=2 was skipped");
    if (strstr(md, "## Scaling") == NULL || strstr(md, "| cabrank | lf:lifo | ") == NULL)
        bl_fail("results.md has no scaling table");
    if (strstr(md, "| claim | measure | threshold | 1 core |") == NULL)
        bl_fail("results.md has no claims at 1 core");
    free(md);
    check_svg(dir, "scaling", "http:hello.txt");
}

int main(void)
{
    char bench[PATH_MAX];
    char dir[] = "/tmp/cr-bench-smoke-XXXXXX";
    char cores_dir[] = "/tmp/cr-bench-cores-XXXXXX";
    char *argv[34];
    int points = 0;
    int noisy;
    int n = 0;

    if (bl_setup(bench, sizeof(bench), dir) < 0)
        return 1;
    argv[n++] = bench;
    argv[n++] = "--configs";
    argv[n++] = "lf:lifo,hshr";
    argv[n++] = "--no-peers";
    argv[n++] = "--workloads";
    argv[n++] = "http:hello.txt,interval,line,line-open";
    argv[n++] = "--concurrency";
    argv[n++] = "4";
    argv[n++] = "--rates";
    argv[n++] = "500";
    argv[n++] = "--open-connections";
    argv[n++] = "4";
    argv[n++] = "--seconds";
    argv[n++] = "0.5";
    argv[n++] = "--warmup";
    argv[n++] = "0";
    argv[n++] = "--interval-clients";
    argv[n++] = "20";
    argv[n++] = "--repeat";
    argv[n++] = "3";
    argv[n++] = "--noise-max";
    argv[n++] = "0.5";
    argv[n++] = "--threads";
    argv[n++] = "2";
    argv[n++] = "--out";
    argv[n++] = dir;
    argv[n] = NULL;
    bl_run(argv, NULL);
    noisy = check_csv(dir, &points);
    check_md(dir, noisy, points);
    check_claims_csv(dir);
    for (size_t w = 0; w < sizeof(workloads) / sizeof(workloads[0]); w++)
        check_svg(dir, "plot", workloads[w]);
    if (cr_test_rmtree(dir) < 0)
        fprintf(stderr, "could not remove %s\n", dir);
    if (mkdtemp(cores_dir) == NULL) {
        bl_fail("mkdtemp: %s", strerror(errno));
    } else {
        run_cores(bench, cores_dir);
        if (cr_test_rmtree(cores_dir) < 0)
            fprintf(stderr, "could not remove %s\n", cores_dir);
    }
    if (bl_failures > 0) {
        fprintf(stderr, "bench_smoke: %d bl_failures\n", bl_failures);
        return 1;
    }
    printf("bench_smoke: ok\n");
    return 0;
}
