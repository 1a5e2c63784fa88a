/*
 * report.h - the reporting half of cabrank-bench: the results CSV (one row per measured point,
 * the interface between the driver that measures and the report that reads), the Markdown
 * report (a table per workload, the winners, the papers' claims, also as claims.csv) and the SVG
 * plots (p99 latency against throughput, a line per series). The driver writes rows with
 * bench_csv_write_row() as it measures them, then calls bench_report_write_dir() (or each
 * writer) once at the end; the unit tests call the same functions. Single-threaded: every
 * function runs on the caller's thread and keeps no state between calls.
 *
 * CSV header, exactly (BENCH_CSV_HEADER_NOISE, what the lab writes):
 *   workload,server,config,concurrency,rate,rps,p50_us,p90_us,p99_us,p999_us,
 *   cpu_us_per_req,ctxsw_per_req,peak_rss_kb,errors,seconds,
 *   srv_user_us_per_req,srv_sys_us_per_req,cores,
 *   loadavg_before,other_cpu_before,other_cpu_during,noisy
 * The first format (BENCH_CSV_HEADER) ends at seconds; the two columns of the server's CPU
 * time split into user and system time came later (BENCH_CSV_HEADER_SPLIT), the server's
 * core count (--cores) after them (BENCH_CSV_HEADER_CORES), and the machine's noise after that,
 * each at the end, so a reader of an earlier format that takes columns by position still finds
 * its own. The reader takes any of the four, by its header (old results stay readable); the
 * writers write the fourth.
 * workload  "http:<file>", "http-close:<file>", "line", "line-open", "interval:t_conn",
 *           "interval:t_res1", "interval:t_res2" (interval rows: the percentiles are the
 *           interval's, rps is 0)
 * server    "cabrank", "nginx", "h2o", "lighttpd", "apache-event", "apache-prefork",
 *           "canned-epoll", "canned-uring" (canned.h: the machine's floor)
 * config    cabrank's model and options ("lf:lifo", "hshr", "proactor:lf"...), "-" for peers
 * cores     the CPUs the server was pinned to (--cores); empty: not pinned (0 in bench_row)
 * loadavg_before    the 1-minute load average before the point
 * other_cpu_before  the share (0..1) of the machine's CPU time that processes other than the
 *                   server and the load took over an idle sample just before the point
 * other_cpu_during  the same over the point (machine.h)
 * noisy     1 when either share was above the run's --noise-max, 0 when not, empty: not
 *           measured (-1 in bench_row)
 * numbers   decimal; an empty field is "not measured" (NAN in struct bench_row), except
 *           concurrency and errors, which are always present.
 * A series is (workload, server, config, cores); its points vary concurrency or rate. Rows
 * with cores make the report add a scaling section: a table per workload of req/s and CPU per
 * request at each core count, the claims at each core count, and scaling-<workload>.svg.
 */
#ifndef CABRANK_BENCH_REPORT_H
#define CABRANK_BENCH_REPORT_H

#include <cabrank/common.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BENCH_CSV_HEADER                                                                           \
    "workload,server,config,concurrency,rate,rps,p50_us,p90_us,p99_us,p999_us,cpu_us_per_req,"     \
    "ctxsw_per_req,peak_rss_kb,errors,seconds"
#define BENCH_CSV_HEADER_SPLIT BENCH_CSV_HEADER ",srv_user_us_per_req,srv_sys_us_per_req"
#define BENCH_CSV_HEADER_CORES BENCH_CSV_HEADER_SPLIT ",cores"
#define BENCH_CSV_HEADER_NOISE                                                                     \
    BENCH_CSV_HEADER_CORES ",loadavg_before,other_cpu_before,other_cpu_during,noisy"

/* Longest workload, server and config names (without the NUL); longer fields are an error. */
#define BENCH_NAME_MAX 63

/* Largest number a field may hold (a reader rejects more, so a writer refuses it). */
#define BENCH_VALUE_MAX 1e15

/* One measured point. A double that was not measured is NAN (written as an empty field). */
struct bench_row {
    char workload[BENCH_NAME_MAX + 1];
    char server[BENCH_NAME_MAX + 1];
    char config[BENCH_NAME_MAX + 1];
    unsigned concurrency; /* connections, 1..1024 */
    double rate;          /* target req/s of an open loop, 0 for a closed loop */
    double rps;
    double p50_us;
    double p90_us;
    double p99_us;
    double p999_us;
    double cpu_us_per_req;
    double ctxsw_per_req;
    double peak_rss_kb;
    uint64_t errors;
    double seconds;
    double srv_user_us_per_req; /* of cpu_us_per_req, in user mode */
    double srv_sys_us_per_req;  /* of cpu_us_per_req, in the kernel */
    unsigned cores;             /* CPUs the server was pinned to; 0: not pinned */
    double loadavg_before;      /* 1-minute load average before the point */
    double other_cpu_before;    /* others' share of the CPU (0..1) just before the point */
    double other_cpu_during;    /* and over it */
    int noisy;                  /* 1: a share above --noise-max; 0: none; -1: not measured */
};

/* A growable array of rows, in the order they were added. Zero-initialised is empty. */
struct bench_rows {
    struct bench_row *v;
    size_t len;
    size_t cap;
};

/* Where a CSV was malformed: 1-based line, and what was wrong ("line 3: bad rps"). */
struct bench_csv_error {
    unsigned line;
    char msg[160];
};

/* Frees the rows' storage and empties rows; NULL-safe. */
void bench_rows_fini(struct bench_rows *rows);

/* Appends a copy of *row. Returns 0 or -ENOMEM. */
CR_MUST_CHECK int bench_rows_add(struct bench_rows *rows, const struct bench_row *row);

/* A row with every number not measured (NAN), concurrency 1, rate 0, errors 0, cores 0,
 * noisy -1. */
void bench_row_init(struct bench_row *row);

/* Writes BENCH_CSV_HEADER_NOISE and a newline. Returns 0 or -EIO. */
CR_MUST_CHECK int bench_csv_write_header(FILE *f);

/*
 * Writes one row and a newline (fflush is the caller's). Names holding ',', '"' or a newline
 * are quoted as RFC 4180; numbers are plain decimals with up to 6 decimals (so what is read
 * back is within 1e-6 of what was written). Returns 0, -EINVAL (an empty or over-long name,
 * concurrency 0, cores above 65536, noisy not -1, 0 or 1), -ERANGE (a number negative,
 * infinite or above BENCH_VALUE_MAX, a share above 1) or -EIO. All 22 columns
 * (BENCH_CSV_HEADER_NOISE).
 */
CR_MUST_CHECK int bench_csv_write_row(FILE *f, const struct bench_row *row);

/*
 * Parses a whole CSV text (buf[0..len), need not be NUL-terminated) into rows, appending. The
 * first non-empty line must be the header of any format, and every row has its columns (the
 * first format's rows have no CPU split: NAN; rows before the third have cores 0; rows before the
 * fourth have no noise: NAN, noisy -1); empty lines and
 * a final line without a newline are accepted; RFC 4180 quoting is understood. On a malformed line
 * returns -EBADMSG and, when err is not NULL, fills *err (rows then holds the rows before it);
 * -ENOMEM when out of memory.
 */
CR_MUST_CHECK int bench_csv_parse(const char *buf, size_t len, struct bench_rows *rows,
                                  struct bench_csv_error *err);

/* Reads and parses the file at path as bench_csv_parse(); -errno when it cannot be read. */
CR_MUST_CHECK int bench_csv_read_file(const char *path, struct bench_rows *rows,
                                      struct bench_csv_error *err);

/* The default of --noise-max: a point is noisy when other processes took more than this share
 * of the machine's CPU before or during it. */
#define BENCH_NOISE_MAX_DEFAULT 0.10

/* Optional context printed at the top of the Markdown; NULL fields are left out. */
struct bench_report_info {
    const char *title;   /* default "cabrank-bench results" */
    const char *date;    /* e.g. "2026-11-22 12:00 UTC" */
    const char *machine; /* e.g. "2 x Intel Xeon ..., Linux 6.1" */
    const char *command; /* the command line that produced the figures */
    const char *cores;   /* how --cores pinned the servers, and what it skipped */
    double noise_max;    /* --noise-max the rows were judged noisy with; 0: its default */
};

/* The winner of one workload (see bench_winner_find()). */
struct bench_winner {
    const char *workload; /* borrowed from the rows */
    const struct bench_row *best;
    const struct bench_row *runner_up; /* NULL when only one series competed */
    double ratio;                      /* best over runner-up (>= 1), NAN without a runner-up */
    bool lower_is_better;              /* interval workloads: p99 */
};

/*
 * The winner of workload among rows: the series with the highest req/s at the highest
 * concurrency measured in the workload (the best point of each series at that concurrency),
 * or, for "interval:*" workloads, the lowest p99. ratio is winner's req/s over the runner-up's
 * (runner-up's p99 over the winner's for intervals). Returns 0, or -ENOENT when no series has
 * a measured value there. Pointers borrow rows.
 */
CR_MUST_CHECK int bench_winner_find(const struct bench_rows *rows, const char *workload,
                                    struct bench_winner *out);

enum bench_verdict {
    BENCH_NOT_MEASURED = 0,
    BENCH_HELD,
    BENCH_NOT_HELD,
    BENCH_NOT_SEPARABLE,
};

/* Text of a verdict: "held", "not held", "not separable", "not measured". */
const char *bench_verdict_name(enum bench_verdict v);

/* Most repetitions of a point that a claim pairs (--repeat's limit). */
#define BENCH_REPEAT_MAX 20

/* Fewest repetitions from which a claim can hold or not hold. */
#define BENCH_CLAIM_MIN_REPS 3

/* One of the papers' claims, checked against the rows. */
struct bench_claim {
    const char *claim;  /* static text of the claim */
    const char *metric; /* static: the measure, a ratio, e.g. "p50 hshr / lf" (> 1: as claimed) */
    double threshold;   /* held when every repetition's ratio is above it (1.25: "at most 0.8x") */
    double ratio;       /* the repetitions' median ratio; NAN when not measured */
    double lo;          /* the smallest and largest ratio of a repetition: the spread */
    double hi;
    unsigned reps;  /* repetitions paired: the k-th row of one side with the k-th of the other */
    unsigned noisy; /* of those, the repetitions where either side's row is noisy */
    enum bench_verdict verdict;
    char where[96]; /* the workload and concurrency the ratio came from, or why not measured */
};

/*
 * Judges a claim from the ratios of its repetitions (ratios[0..n), non-finite ones skipped, at
 * most BENCH_REPEAT_MAX taken): fills out's ratio (their median), lo and hi (their range), reps
 * and verdict, and sets its threshold. BENCH_HELD when every ratio is above threshold,
 * BENCH_NOT_HELD when every one is below it, BENCH_NOT_SEPARABLE when the range reaches the
 * threshold (a tie included) or fewer than BENCH_CLAIM_MIN_REPS were measured,
 * BENCH_NOT_MEASURED with none. out's other fields are left as they are.
 */
void bench_claim_judge(const double *ratios, size_t n, double threshold, struct bench_claim *out);

/* Number of claims bench_claims_eval() fills. */
#define BENCH_CLAIMS 7

/*
 * Checks the papers' claims (L/F vs HS/HR latency at low load and throughput at high load,
 * LIFO vs FIFO promotion with neither deferred, deferred vs eager lifo promotion, forking vs
 * prefork t_conn and t_res1, proactor vs L/F) against rows (cabrank rows only); fills
 * out[0..BENCH_CLAIMS). A claim whose rows are missing is BENCH_NOT_MEASURED. The rows of a
 * series at the point compared are its repetitions, in order (bench_claim_judge()).
 */
void bench_claims_eval(const struct bench_rows *rows, struct bench_claim out[BENCH_CLAIMS]);

/* Whether a claim compares config (a cabrank configuration), or workload (as --workloads names
 * it: "interval" for the intervals): what the driver's repetitions measure again. */
bool bench_claims_use_config(const char *config);
bool bench_claims_use_workload(const char *workload);

/* Header of claims.csv; cores is empty for a run without --cores, numbers as results.csv's. */
#define BENCH_CLAIMS_CSV_HEADER                                                                    \
    "cores,claim,measure,threshold,ratio,ratio_min,ratio_max,repetitions,verdict,measured_on,"     \
    "noisy_repetitions"

/*
 * Writes claims.csv: the header, then each claim of bench_claims_eval() (a claim that did not
 * hold included), once per core count for rows with cores, else once. Returns 0, -ENOMEM or
 * -EIO.
 */
CR_MUST_CHECK int bench_claims_csv(FILE *f, const struct bench_rows *rows);

/*
 * Writes the Markdown report: the info header, one table per workload (in order of first
 * appearance; rows sorted by series, then concurrency, then rate), the winners, the claims
 * table. info may be NULL. Returns 0, -ENOMEM or -EIO.
 */
CR_MUST_CHECK int bench_report_markdown(FILE *f, const struct bench_rows *rows,
                                        const struct bench_report_info *info);

/*
 * Writes an SVG plot of workload: p99 latency (y, µs; log scale when the range is wide)
 * against req/s (x), a line with markers per series, axes with ticks and labels, title,
 * legend. Interval workloads (no req/s) plot each series' p50, p90, p99 and p99.9 as x
 * categories instead. Returns 0, -ENOENT (no row of workload), -ENOMEM or -EIO.
 */
CR_MUST_CHECK int bench_plot_svg(FILE *f, const struct bench_rows *rows, const char *workload);

/*
 * The plot's file name for workload: "plot-<workload>.svg" with every byte outside
 * [A-Za-z0-9._-] replaced by '-' ("http:hello.txt" gives "plot-http-hello.txt.svg").
 * Returns 0 or -ENAMETOOLONG when it does not fit in cap bytes.
 */
CR_MUST_CHECK int bench_plot_filename(const char *workload, char *out, size_t cap);

/*
 * Writes a scaling plot of workload from its rows with cores > 0: req/s (upper panel) and
 * server CPU µs per request (lower panel) against the core counts (x categories), a line per
 * server and config through each one's point at the workload's highest concurrency (its best
 * req/s there). Returns 0, -ENOENT (no pinned row of workload with req/s), -ENOMEM or -EIO.
 */
CR_MUST_CHECK int bench_plot_scaling_svg(FILE *f, const struct bench_rows *rows,
                                         const char *workload);

/* The scaling plot's file name: "scaling-<workload>.svg", bytes replaced as
 * bench_plot_filename() does. 0 or -ENAMETOOLONG. */
CR_MUST_CHECK int bench_scaling_filename(const char *workload, char *out, size_t cap);

/*
 * Writes dir/results.md, dir/claims.csv and dir/plot-<workload>.svg for every workload in rows, and
 * dir/scaling-<workload>.svg for every workload with req/s measured at a core count (dir must
 * exist; results.csv is the driver's). Returns 0 or the first error (-errno).
 */
CR_MUST_CHECK int bench_report_write_dir(const char *dir, const struct bench_rows *rows,
                                         const struct bench_report_info *info);

#endif /* CABRANK_BENCH_REPORT_H */
