/*
 * plot_svg.c - the SVG plots of cabrank-bench, written by hand (no plotting library): per
 * workload, p99 latency (y) against throughput (x), one polyline with markers per series in
 * the order of its load (concurrency, then rate), so a curve bends back where a server
 * saturates. Interval workloads have no throughput: their plot has the percentiles (p50, p90,
 * p99, p99.9) as x categories and a line per series through them. A run with --cores also
 * gets a scaling plot per workload: req/s and CPU per request in two panels against the core
 * counts (x categories), a line per server and config. The y axis is
 * logarithmic when the latencies span more than WIDE_RANGE. Each point of a throughput plot is
 * labelled with its load ("c=64" connections, "r=10k" req/s of an open loop) beside its marker,
 * in the first free place of a few around it (free of markers and other labels); a label that
 * finds none is left out, and the plot says how many were. Text is XML-escaped and ASCII only
 * (other bytes become '?'), so any row gives a well-formed document. Called by
 * bench_report_write_dir() and the unit tests; single-threaded, no state.
 */
#include "report_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Canvas and plot area, in SVG user units (pixels). */
#define WIDTH    860
#define HEIGHT   500
#define LEFT     80
#define RIGHT    260 /* room for the legend */
#define TOP      50
#define BOTTOM   60
#define PLOT_W   (WIDTH - LEFT - RIGHT)
#define PLOT_H   (HEIGHT - TOP - BOTTOM)
#define LEGEND_X (WIDTH - RIGHT + 20)

/* Latencies spanning more than this factor get a logarithmic axis. */
#define WIDE_RANGE 20.0

/* Colour-blind-safe palette (Okabe-Ito, then Tableau); markers cycle at another period. */
static const char *const colors[] = {
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00",
    "#56b4e9", "#000000", "#8c564b", "#7f7f7f", "#bcbd22",
};
#define NCOLORS  (sizeof(colors) / sizeof(colors[0]))
#define NMARKERS 4

struct axis {
    double min;
    double max;
    bool log;
};

/* A plot area's vertical extent (every panel spans LEFT..LEFT + PLOT_W): the one panel of a
 * latency plot, or each of a scaling plot's two. */
struct panel {
    int top;
    int height;
};

static const struct panel main_panel = {TOP, PLOT_H};

/* Writes s as XML character data or attribute value: escaped, ASCII, no control bytes. */
static void put_xml(FILE *f, const char *s)
{
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;

        switch (c) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&apos;", f);
            break;
        default:
            fputc(c < 0x20 || c >= 0x7f ? (c < 0x20 ? ' ' : '?') : c, f);
        }
    }
}

/* The percentiles of an interval plot, its x categories. */
static const char *const pct_names[] = {"p50", "p90", "p99", "p99.9"};
#define NPCT 4

static bool is_measured(double v)
{
    return isfinite(v) && v > 0;
}

static double pct_of(const struct bench_row *r, size_t i)
{
    const double v[NPCT] = {r->p50_us, r->p90_us, r->p99_us, r->p999_us};

    return v[i];
}

/* A throughput plot's point: req/s measured (0 allowed) and a p99. */
static bool is_plottable(const struct bench_row *r)
{
    return isfinite(r->rps) && r->rps >= 0 && is_measured(r->p99_us);
}

/* A round step giving about n ticks over span (1, 2 or 5 times a power of ten). */
static double nice_step(double span, int n)
{
    double raw = span / n;
    double mag = pow(10, floor(log10(raw)));
    double norm = raw / mag;

    if (norm < 1.5)
        return mag;
    if (norm < 3)
        return 2 * mag;
    if (norm < 7)
        return 5 * mag;
    return 10 * mag;
}

/* A linear axis from 0 to a round value above max. */
static void linear_axis(struct axis *a, double max)
{
    double step;

    a->log = false;
    a->min = 0;
    if (!(max > 0))
        max = 1;
    step = nice_step(max * 1.05, 5);
    a->max = ceil(max * 1.05 / step) * step;
}

static double scale(const struct axis *a, double v, double len)
{
    if (a->log) {
        double lo = log10(a->min);
        double hi = log10(a->max);

        return (log10(v) - lo) / (hi - lo) * len;
    }
    return (v - a->min) / (a->max - a->min) * len;
}

static double px(const struct axis *a, double v)
{
    return LEFT + scale(a, v, PLOT_W);
}

static double py(const struct panel *p, const struct axis *a, double v)
{
    return p->top + p->height - scale(a, v, p->height);
}

/* A tick label: 2.5M, 150k, 40, 0.5. */
static void tick_text(char *out, size_t cap, double v)
{
    if (v >= 1e6)
        snprintf(out, cap, "%gM", v / 1e6);
    else if (v >= 1e3)
        snprintf(out, cap, "%gk", v / 1e3);
    else
        snprintf(out, cap, "%g", v);
}

static void put_tick_label(FILE *f, double v)
{
    char t[32];

    tick_text(t, sizeof(t), v);
    fputs(t, f);
}

static void put_x_tick(FILE *f, const struct panel *p, double x)
{
    int bottom = p->top + p->height;

    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e0e0e0\"/>\n"
            "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#000\"/>\n"
            "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">",
            x, p->top, x, bottom, x, bottom, x, bottom + 5, x, bottom + 20);
}

/* The x axis of an interval plot: one category per percentile, centred in its slot. */
static void put_pct_axis(FILE *f, const struct axis *a)
{
    for (size_t i = 0; i < NPCT; i++) {
        put_x_tick(f, &main_panel, px(a, (double)i));
        fprintf(f, "%s</text>\n", pct_names[i]);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">percentile</text>\n",
            LEFT + PLOT_W / 2, HEIGHT - 15);
}

static void put_x_axis(FILE *f, const struct axis *a)
{
    double step = nice_step(a->max - a->min, 6);

    for (double v = a->min; v <= a->max + step / 2; v += step) {
        put_x_tick(f, &main_panel, px(a, v));
        put_tick_label(f, v);
        fputs("</text>\n", f);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">throughput (req/s)</text>\n",
            LEFT + PLOT_W / 2, HEIGHT - 15);
}

static void put_y_tick(FILE *f, const struct panel *p, const struct axis *a, double v)
{
    double y = py(p, a, v);

    fprintf(f,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n"
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000\"/>\n"
            "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">",
            LEFT, y, LEFT + PLOT_W, y, LEFT - 5, y, LEFT, y, LEFT - 8, y + 4);
    put_tick_label(f, v);
    fputs("</text>\n", f);
}

/* The y axis of panel p, its ticks and its title "name (unit)" (markup, written as they
 * are), and the panel's frame. */
static void put_y_axis(FILE *f, const struct panel *p, const struct axis *a, const char *name,
                       const char *unit)
{
    if (a->log) {
        for (double v = a->min; v <= a->max * 1.001; v *= 10)
            put_y_tick(f, p, a, v);
    } else {
        double step = nice_step(a->max - a->min, 5);

        for (double v = a->min; v <= a->max + step / 2; v += step)
            put_y_tick(f, p, a, v);
    }
    fprintf(f,
            "<text transform=\"translate(20 %d) rotate(-90)\" text-anchor=\"middle\">%s "
            "(%s%s)</text>\n"
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
            "stroke=\"#000\"/>\n",
            p->top + p->height / 2, name, unit, a->log ? ", log scale" : "", LEFT, p->top, PLOT_W,
            p->height);
}

/* Marker k (circle, square, triangle, diamond) of colour c centred on (x, y). */
static void put_marker(FILE *f, size_t k, const char *c, double x, double y)
{
    switch (k % NMARKERS) {
    case 0:
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", x, y, c);
        break;
    case 1:
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" fill=\"%s\"/>\n", x - 4,
                y - 4, c);
        break;
    case 2:
        fprintf(f, "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\"/>\n", x, y - 5,
                x + 5, y + 4, x - 5, y + 4, c);
        break;
    default:
        fprintf(f, "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\"/>\n", x,
                y - 5, x + 5, y, x, y + 5, x - 5, y, c);
    }
}

static void begin_line(FILE *f, const char *c)
{
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", c);
}

/* Legend entry k: a swatch of colour c with the marker, then label ("(no points)" when the
 * series drew none). */
static void put_legend(FILE *f, size_t k, const char *c, size_t marker, const char *label,
                       size_t shown)
{
    double ly = TOP + 10 + (double)k * 18;

    fprintf(f,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" "
            "stroke-width=\"2\"/>\n",
            LEGEND_X, ly, LEGEND_X + 24, ly, c);
    put_marker(f, marker, c, LEGEND_X + 12, ly);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\">", LEGEND_X + 32, ly + 4);
    put_xml(f, label);
    if (shown == 0)
        fputs(" (no points)", f);
    fputs("</text>\n", f);
}

/* The canvas of a plot height units tall, with its title (title's text, then suffix). */
static void put_canvas(FILE *f, int height, const char *title, const char *suffix)
{
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
            "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n"
            "<text x=\"%d\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" "
            "font-weight=\"bold\">",
            WIDTH, height, WIDTH, height, WIDTH, height, LEFT + PLOT_W / 2);
    put_xml(f, title);
    fprintf(f, "%s</text>\n", suffix);
}

/* The canvas height for a legend of nseries entries below a plot of height units: a long
 * legend makes the canvas taller, never the plot. */
static int canvas_height(int height, size_t nseries)
{
    if (nseries > (size_t)(height - TOP - 20) / 18)
        return TOP + 20 + (int)nseries * 18;
    return height;
}

/*
 * Draws the series v[0..n) (one series, in load order) and its legend entry number k: a line
 * through its (req/s, p99) points, or for an interval one line per row through its
 * percentiles.
 */
static void put_series(FILE *f, const struct bench_row *const *v, size_t n, size_t k,
                       const struct axis *ax, const struct axis *ay, bool interval)
{
    const char *c = colors[k % NCOLORS];
    size_t marker = k + k / NCOLORS; /* a colour's second use gets another marker */
    char label[BENCH__LABEL_MAX];
    size_t shown = 0;

    fputs("<g class=\"series\">\n", f);
    if (interval) {
        for (size_t i = 0; i < n; i++) {
            size_t pts = 0;

            begin_line(f, c);
            for (size_t j = 0; j < NPCT; j++)
                if (is_measured(pct_of(v[i], j)))
                    fprintf(f, "%s%.1f,%.1f", pts++ ? " " : "", px(ax, (double)j),
                            py(&main_panel, ay, pct_of(v[i], j)));
            fputs("\"/>\n", f);
            for (size_t j = 0; j < NPCT; j++)
                if (is_measured(pct_of(v[i], j)))
                    put_marker(f, marker, c, px(ax, (double)j),
                               py(&main_panel, ay, pct_of(v[i], j)));
            shown += pts;
        }
    } else {
        begin_line(f, c);
        for (size_t i = 0; i < n; i++)
            if (is_plottable(v[i]))
                fprintf(f, "%s%.1f,%.1f", shown++ ? " " : "", px(ax, v[i]->rps),
                        py(&main_panel, ay, v[i]->p99_us));
        fputs("\"/>\n", f);
        for (size_t i = 0; i < n; i++)
            if (is_plottable(v[i]))
                put_marker(f, marker, c, px(ax, v[i]->rps), py(&main_panel, ay, v[i]->p99_us));
    }
    bench__series_label(v[0], label, sizeof(label));
    put_legend(f, k, c, marker, label, shown);
    fputs("</g>\n", f);
}

/* ------------------------------------------------------------------------- point labels */

/* A point label's size: font-size 10 sans-serif, digits and '=' about 6 units wide. */
#define LABEL_SIZE   10
#define LABEL_CHAR_W 6.2
#define LABEL_H      11.0
/* A point whose label text already stands this near, on a point of the same text (a repetition,
 * or another series at the same load), shares it. */
#define LABEL_SHARE 24.0

struct box {
    double x0, y0, x1, y1;
};

/* One label to place: beside the marker at (x, y). */
struct point_label {
    double x;
    double y;
    const char *color;
    char text[40];
};

static bool is_overlap(const struct box *a, const struct box *b)
{
    return a->x0 < b->x1 && b->x0 < a->x1 && a->y0 < b->y1 && b->y0 < a->y1;
}

/* The load of a point as its label says it: the rate of an open loop, else the connections. */
static void label_text(const struct bench_row *r, char *out, size_t cap)
{
    char t[32];

    if (r->rate > 0) {
        tick_text(t, sizeof(t), r->rate);
        snprintf(out, cap, "r=%s", t);
    } else {
        snprintf(out, cap, "c=%u", r->concurrency);
    }
}

/* The box of a label of width w whose text starts at (tx, baseline ty). */
static struct box label_box(double tx, double ty, double w)
{
    return (struct box){tx - 1, ty - LABEL_H + 2, tx + w + 1, ty + 2};
}

/*
 * Places the labels of a throughput plot: for each, the first of the places around its marker
 * that stays in the plot area and overlaps no marker and no label placed before; a label of
 * the same text within LABEL_SHARE is shared instead. Writes them; returns how many found no
 * place.
 */
static size_t put_point_labels(FILE *f, const struct point_label *pl, size_t n)
{
    /* Where a label's text starts relative to its marker, in label widths (w) and units. */
    static const struct {
        double wx; /* times the width */
        double dx;
        double dy; /* the baseline */
    } places[] = {
        {0, 7, 4},     {-1, -7, 4},  {-0.5, 0, -8},  {-0.5, 0, 16}, {0, 5, -7},
        {0, 5, 15},    {-1, -5, -7}, {-1, -5, 15},   {0, 7, -18},   {0, 7, 26},
        {-1, -7, -18}, {-1, -7, 26}, {-0.5, 0, -20}, {-0.5, 0, 28},
    };
    struct box *placed = malloc((n > 0 ? n : 1) * sizeof(*placed));
    struct point_label *at = malloc((n > 0 ? n : 1) * sizeof(*at));
    size_t nplaced = 0;
    size_t dropped = 0;

    if (placed == NULL || at == NULL) {
        free(placed);
        free(at);
        return n;
    }
    fprintf(f, "<g class=\"point-labels\" font-size=\"%d\">\n", LABEL_SIZE);
    for (size_t i = 0; i < n; i++) {
        double w = LABEL_CHAR_W * (double)strlen(pl[i].text);
        bool shared = false;
        bool done = false;

        for (size_t k = 0; k < nplaced && !shared; k++)
            shared = strcmp(at[k].text, pl[i].text) == 0 &&
                     hypot(at[k].x - pl[i].x, at[k].y - pl[i].y) < LABEL_SHARE;
        for (size_t p = 0; p < sizeof(places) / sizeof(places[0]) && !shared && !done; p++) {
            double tx = pl[i].x + places[p].wx * w + places[p].dx;
            double ty = pl[i].y + places[p].dy;
            struct box b = label_box(tx, ty, w);
            bool free_here =
                b.x0 >= LEFT && b.x1 <= LEFT + PLOT_W && b.y0 >= TOP && b.y1 <= TOP + PLOT_H;

            /* Every marker (4 to 5 units around its point) and every label placed. */
            for (size_t k = 0; k < n && free_here; k++) {
                struct box m = {pl[k].x - 5, pl[k].y - 5, pl[k].x + 5, pl[k].y + 5};

                free_here = !is_overlap(&b, &m);
            }
            for (size_t k = 0; k < nplaced && free_here; k++)
                free_here = !is_overlap(&b, &placed[k]);
            if (!free_here)
                continue;
            placed[nplaced] = b;
            at[nplaced++] = pl[i];
            fprintf(f,
                    "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\" stroke=\"#fff\" "
                    "stroke-width=\"3\" paint-order=\"stroke\">",
                    tx, ty, pl[i].color);
            put_xml(f, pl[i].text);
            fputs("</text>\n", f);
            done = true;
        }
        dropped += !shared && !done;
    }
    fputs("</g>\n", f);
    free(placed);
    free(at);
    return dropped;
}

/* The labels of the throughput plot's points v[0..n) (series in order, as put_series() draws
 * them), written once every marker is drawn. */
static void put_load_labels(FILE *f, const struct bench_row *const *v, size_t n,
                            const struct axis *ax, const struct axis *ay, int height)
{
    struct point_label *pl = malloc((n > 0 ? n : 1) * sizeof(*pl));
    size_t npl = 0;
    size_t k = 0;
    size_t dropped;

    if (pl == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && !bench__same_series(v[i - 1], v[i]))
            k++;
        if (!is_plottable(v[i]))
            continue;
        pl[npl].x = px(ax, v[i]->rps);
        pl[npl].y = py(&main_panel, ay, v[i]->p99_us);
        pl[npl].color = colors[k % NCOLORS];
        label_text(v[i], pl[npl].text, sizeof(pl[npl].text));
        npl++;
    }
    dropped = put_point_labels(f, pl, npl);
    if (dropped > 0)
        fprintf(f,
                "<text x=\"%d\" y=\"%d\" font-size=\"10\">%zu point label%s left out "
                "(no room)</text>\n",
                LEGEND_X, height - 15, dropped, dropped == 1 ? "" : "s");
    free(pl);
}

int bench_plot_svg(FILE *f, const struct bench_rows *rows, const char *workload)
{
    bool interval = bench__is_interval(workload);
    const struct bench_row **v;
    struct axis ax;
    struct axis ay;
    double xmax = 0;
    double ymin = INFINITY;
    double ymax = 0;
    size_t n;
    size_t k = 0;
    size_t nseries = 0;
    int height = HEIGHT;
    int err;

    err = bench__workload_rows(rows, workload, &v, &n);
    if (err < 0)
        return err;
    if (n == 0) {
        free(v);
        return -ENOENT;
    }
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || !bench__same_series(v[i - 1], v[i]))
            nseries++;
        if (interval) {
            for (size_t j = 0; j < NPCT; j++) {
                if (!is_measured(pct_of(v[i], j)))
                    continue;
                ymin = fmin(ymin, pct_of(v[i], j));
                ymax = fmax(ymax, pct_of(v[i], j));
            }
        } else if (is_plottable(v[i])) {
            xmax = fmax(xmax, v[i]->rps);
            ymin = fmin(ymin, v[i]->p99_us);
            ymax = fmax(ymax, v[i]->p99_us);
        }
    }
    height = canvas_height(HEIGHT, nseries);
    if (interval) {
        /* Categories 0..NPCT-1, each centred in a slot of its own. */
        ax.log = false;
        ax.min = -0.5;
        ax.max = NPCT - 0.5;
    } else {
        linear_axis(&ax, xmax);
    }
    if (ymax > 0 && ymax / ymin > WIDE_RANGE) {
        ay.log = true;
        ay.min = pow(10, floor(log10(ymin)));
        ay.max = pow(10, ceil(log10(ymax)));
        if (ay.max <= ay.min)
            ay.max = ay.min * 10;
    } else {
        linear_axis(&ay, ymax);
    }

    put_canvas(f, height, workload,
               interval ? ": latency percentiles" : ": p99 latency vs throughput");
    if (interval)
        put_pct_axis(f, &ax);
    else
        put_x_axis(f, &ax);
    put_y_axis(f, &main_panel, &ay, interval ? "latency" : "p99 latency", "&#181;s");
    for (size_t i = 0; i < n; k++) {
        size_t j = i;

        while (j < n && bench__same_series(v[i], v[j]))
            j++;
        put_series(f, v + i, j - i, k, &ax, &ay, interval);
        i = j;
    }
    if (!interval)
        put_load_labels(f, v, n, &ax, &ay, height);
    if (ymax == 0)
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">no measured points</text>\n",
                LEFT + PLOT_W / 2, TOP + PLOT_H / 2);
    fputs("</svg>\n", f);
    free(v);
    return ferror(f) ? -EIO : 0;
}

/* ------------------------------------------------------------------------- scaling plot */

/* The two panels of a scaling plot, one above the other, and the gap for the upper one's
 * x labels. */
#define SCALING_GAP 50
static const struct panel rps_panel = {TOP, PLOT_H * 3 / 4};
static const struct panel cpu_panel = {TOP + PLOT_H * 3 / 4 + SCALING_GAP, PLOT_H * 3 / 4};
#define SCALING_HEIGHT (TOP + 2 * (PLOT_H * 3 / 4) + SCALING_GAP + BOTTOM)

static double scaling_value(const struct bench_row *r, bool cpu)
{
    double v = r == NULL ? NAN : cpu ? r->cpu_us_per_req : r->rps;

    return is_measured(v) ? v : NAN;
}

/* Line l of s in panel p: req/s, or CPU per request (cpu), at each core count measured. */
static size_t put_scaling_line(FILE *f, const struct bench__scaling *s, size_t l, size_t k,
                               const struct panel *p, const struct axis *ax, const struct axis *ay,
                               bool cpu)
{
    const char *c = colors[k % NCOLORS];
    size_t marker = k + k / NCOLORS;
    size_t shown = 0;

    begin_line(f, c);
    for (size_t i = 0; i < s->ncores; i++) {
        double v = scaling_value(s->lines[l].at[i], cpu);

        if (!isnan(v))
            fprintf(f, "%s%.1f,%.1f", shown++ ? " " : "", px(ax, (double)i), py(p, ay, v));
    }
    fputs("\"/>\n", f);
    for (size_t i = 0; i < s->ncores; i++) {
        double v = scaling_value(s->lines[l].at[i], cpu);

        if (!isnan(v))
            put_marker(f, marker, c, px(ax, (double)i), py(p, ay, v));
    }
    return shown;
}

/* A panel's x axis: one category per core count. */
static void put_cores_axis(FILE *f, const struct panel *p, const struct axis *a,
                           const struct bench__scaling *s)
{
    for (size_t i = 0; i < s->ncores; i++) {
        put_x_tick(f, p, px(a, (double)i));
        fprintf(f, "%u</text>\n", s->cores[i]);
    }
}

int bench_plot_scaling_svg(FILE *f, const struct bench_rows *rows, const char *workload)
{
    struct bench__scaling s;
    struct axis ax = {.min = -0.5, .log = false};
    struct axis arps;
    struct axis acpu;
    double maxrps = 0;
    double maxcpu = 0;
    char suffix[96];
    int err = bench__scaling_build(rows, workload, &s);

    if (err < 0)
        return err;
    ax.max = (double)s.ncores - 0.5;
    for (size_t l = 0; l < s.nlines; l++)
        for (size_t i = 0; i < s.ncores; i++) {
            double r = scaling_value(s.lines[l].at[i], false);
            double c = scaling_value(s.lines[l].at[i], true);

            maxrps = isnan(r) ? maxrps : fmax(maxrps, r);
            maxcpu = isnan(c) ? maxcpu : fmax(maxcpu, c);
        }
    linear_axis(&arps, maxrps);
    linear_axis(&acpu, maxcpu);
    /* Every point of a scaling plot is at one load: the title says which. */
    snprintf(suffix, sizeof(suffix), ": req/s and CPU per request against server cores, c=%u",
             s.concurrency);
    put_canvas(f, canvas_height(SCALING_HEIGHT, s.nlines), workload, suffix);
    put_cores_axis(f, &rps_panel, &ax, &s);
    put_y_axis(f, &rps_panel, &arps, "throughput", "req/s");
    put_cores_axis(f, &cpu_panel, &ax, &s);
    put_y_axis(f, &cpu_panel, &acpu, "server CPU", "&#181;s/request");
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">server cores</text>\n",
            LEFT + PLOT_W / 2, SCALING_HEIGHT - 15);
    for (size_t l = 0; l < s.nlines; l++) {
        const struct bench_row *any = NULL;
        char label[BENCH__LABEL_MAX];
        size_t shown;

        for (size_t i = 0; i < s.ncores && any == NULL; i++)
            any = s.lines[l].at[i];
        fputs("<g class=\"series\">\n", f);
        shown = put_scaling_line(f, &s, l, l, &rps_panel, &ax, &arps, false);
        put_scaling_line(f, &s, l, l, &cpu_panel, &ax, &acpu, true);
        bench__line_label(any, label, sizeof(label));
        put_legend(f, l, colors[l % NCOLORS], l + l / NCOLORS, label, shown);
        fputs("</g>\n", f);
    }
    if (maxcpu == 0)
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">no CPU measured</text>\n",
                LEFT + PLOT_W / 2, cpu_panel.top + cpu_panel.height / 2);
    fputs("</svg>\n", f);
    bench__scaling_fini(&s);
    return ferror(f) ? -EIO : 0;
}

/* ------------------------------------------------------------------------------ file names */

/* "<prefix><workload>.svg", bytes outside [A-Za-z0-9._-] of the workload replaced by '-'. */
static int svg_filename(const char *prefix, const char *workload, char *out, size_t cap)
{
    size_t n = strlen(workload);
    size_t o = strlen(prefix);

    if (cap < o + n + sizeof(".svg"))
        return -ENAMETOOLONG;
    memcpy(out, prefix, o);
    for (size_t i = 0; i < n; i++) {
        char c = workload[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';

        out[o++] = ok ? c : '-';
    }
    memcpy(out + o, ".svg", 5);
    return 0;
}

int bench_plot_filename(const char *workload, char *out, size_t cap)
{
    return svg_filename("plot-", workload, out, cap);
}

int bench_scaling_filename(const char *workload, char *out, size_t cap)
{
    return svg_filename("scaling-", workload, out, cap);
}
