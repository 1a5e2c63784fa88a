#!/usr/bin/env bash
# bench/httpd_vs_peers.sh - cabrank-httpd against nginx, h2o, lighttpd and
# Apache in the same run (issue #4): runs the shared peers kit
# (../shared/bench/peers.sh beside the repo) with cabrank-httpd as its
# candidate, so every server serves the same files under the same wrk load,
# N times, then prints the medians over the runs against the issue's targets:
#   req/s at least the best peer's            (every file and mode)
#   p99 latency at most the best peer's       (every file and mode)
#   CPU per request at most 0.8x the most frugal peer's (hello.txt and 1k.bin,
#                                                        keep-alive)
# Peers are nginx, h2o, lighttpd, apache-event and apache-prefork; peers.sh's
# canned responders (limit, limit-1t) are this machine's ceiling, shown for
# reference only. A developer bench, not a test: it needs the peers kit, wrk
# and the peers (apt-get install -y wrk nginx-light h2o lighttpd apache2);
# nothing in the build or the tests needs ../shared. `--report` only reads
# CSVs, and tests/run.sh checks it on tests/data/httpd_vs_peers/.
set -u -o pipefail

me=bench/httpd_vs_peers.sh
usage="usage: $me [--runs N] [--out DIR] [--build DIR] [--peers PATH] [-- cabrank-httpd flags...]
       $me --report CSV...
       $me --help"

help() {
    cat <<EOF
$usage

Runs the peers kit's peers.sh N times with cabrank-httpd as its candidate
(name "cabrank", on 127.0.0.1:18090, the peers on 18081-18089), each run into
DIR/run-K.csv (its output in DIR/run-K.log, wrk's in DIR/run-K-raw/), then
prints a markdown report of the medians over the runs, also kept as
DIR/report.md: cabrank against the best peer for each file and mode, a verdict
per issue #4 target on each row, and a last line "targets: N met, N not met".
Before the verdicts, each run against the peers of the same run: the lowest
and highest ratio over the runs, and in how many runs the target held, which
shows a row that sits on its line (a median just met or missed) as such.

  --runs N       runs of peers.sh (default 3)
  --out DIR      where the CSVs and logs go (default /tmp/httpd-vs-peers-<date>)
  --build DIR    the build holding cabrank-httpd (default build)
  --peers PATH   peers.sh (default \$PEERS, else ../shared/bench/peers.sh beside
                 the repo)
  -- FLAGS...    added to the candidate's command line, e.g. -- --groups 2
  --report CSV...  print the report of existing peers.sh CSVs (no server is
                 started; the date, kernel and CPU lines are left out)
  --help         this text

The candidate is
  cabrank-httpd --listen 127.0.0.1:@PORT@ --root @ROOT@ --max-requests-per-connection 1000000
with cabrank's defaults otherwise (model lf): peers.sh raises every peer's
per-connection request cap so that wrk never reconnects, and so does this.
peers.sh reads DUR, CDUR, CONNS, WARM, SERVERS, WRK_CPUS, QUIET_PCT and
QUIET_WAIT from the environment (see its header); they pass through unchanged.
CANDIDATE is set here. Example, short and with two peers:
  DUR=2 CDUR=2 QUIET_WAIT=0 SERVERS="lighttpd h2o limit-1t" $me --runs 1
EOF
}

die() { # exit-code message: one line on stderr
    echo "$me: $2" >&2
    exit "$1"
}

# quote WORD: WORD as the shell would need it typed, for the command lines
# printed and for the candidate's, which peers.sh runs through bash -c.
quote() {
    if [[ $1 =~ ^[A-Za-z0-9_./:@%+=,-]+$ ]]; then
        printf '%s' "$1"
    else
        printf "'%s'" "${1//\'/\'\\\'\'}"
    fi
}

# report SHOW_ENV COMMAND CSV...: the medians and the verdicts, on stdout.
report() {
    local show_env=$1 cmd=$2
    shift 2
    local f
    for f in "$@"; do
        if [ ! -f "$f" ] || [ ! -r "$f" ]; then
            die 2 "no such CSV: $f"
        fi
    done
    echo "# cabrank-httpd against its peers (issue #4)"
    echo
    echo "command: $cmd"
    if [ "$show_env" = 1 ]; then
        echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
        echo "system: $(uname -srm), $(nproc) CPUs"
        echo "candidate: ${CANDIDATE#*=}"
        echo "peers kit: $peers; CSVs: $*; versions and settings in each run's <run>-raw/env.txt"
    fi
    LC_ALL=C awk -v prog="$me" -v cand=cabrank -v q="'" '
        BEGIN {
            FS = ","
            header = "server,file,mode,req_s,mib_s,p50_ms,p99_ms,errors,other_cpu_pct,srv_cpu_us_per_req"
            npeer = split("nginx h2o lighttpd apache-event apache-prefork", peer, " ")
            nref = split("limit limit-1t", ref, " ")
            nrow = split("hello.txt:keepalive 1k.bin:keepalive 64k.bin:keepalive 1m.bin:keepalive hello.txt:close", row, " ")
            other = -1
        }
        { sub(/\r$/, "") }
        FNR == 1 {
            if ($0 != header) {
                printf "%s: %s is not a peers.sh CSV (first line is not %s)\n", prog, FILENAME, header > "/dev/stderr"
                bad = 1
                exit 2
            }
            nfile++
            next
        }
        NF == 0 { next }
        {
            k = $1 SUBSEP $2 SUBSEP $3
            if ($1 == cand) has_cand = 1
            if (!($1 in listed)) { listed[$1] = 1; srv[++nsrv] = $1 }
            keep(k, "rps", $4)
            keep(k, "p99", $7)
            keep(k, "cpu", $10)
            if (is_num($4)) run_val[k, "rps", nfile] = $4 + 0
            if (is_num($7)) run_val[k, "p99", nfile] = $7 + 0
            if (is_num($10)) run_val[k, "cpu", nfile] = $10 + 0
            if (is_num($8)) errs[k] += $8
            if (is_num($9) && $9 + 0 > other) other = $9 + 0
        }
        function is_num(x) { return x ~ /^[0-9]+(\.[0-9]*)?$/ }
        # Values of one figure over the runs, NA and empty cells left out.
        function keep(k, what, x) { if (is_num(x)) vals[k, what] = vals[k, what] " " x }
        # The median of the runs that have the figure, "" when none has it.
        function median(k, what,   a, n, i, j, x) {
            n = split(vals[k, what], a, " ")
            nvals = n
            if (n == 0) return ""
            for (i = 2; i <= n; i++) {
                x = a[i] + 0
                for (j = i - 1; j >= 1 && a[j] + 0 > x; j--) a[j + 1] = a[j]
                a[j + 1] = x
            }
            return n % 2 ? a[(n + 1) / 2] + 0 : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        # Each run against the peers of the same run: the range of cabrank/best over the runs
        # that have both, and in how many the target held (ratio >= 1 for req/s, <= lim for
        # p99 and CPU). best: the highest peer for req/s, else the lowest. "" without data.
        function per_run(f, m, what, lim,   r, i, c, b, x, lo, hi, n, ok) {
            n = 0; ok = 0
            for (r = 1; r <= nfile; r++) {
                c = cand SUBSEP f SUBSEP m
                if (!((c, what, r) in run_val)) continue
                b = ""
                for (i = 1; i <= npeer; i++) {
                    k = peer[i] SUBSEP f SUBSEP m
                    if (!((k, what, r) in run_val)) continue
                    x = run_val[k, what, r]
                    if (b == "" || (what == "rps" ? x > b : x < b)) b = x
                }
                if (b == "" || b == 0) continue
                x = run_val[c, what, r] / b
                if (n == 0 || x < lo) lo = x
                if (n == 0 || x > hi) hi = x
                n++
                if (what == "rps" ? x >= 1 : x <= lim) ok++
            }
            if (n == 0) return ""
            if (n == 1) return sprintf("%.3fx, met in %d of 1", lo, ok)
            return sprintf("%.3fx-%.3fx, met in %d of %d", lo, hi, ok, n)
        }
        function label(f, m) { return f (m == "close" ? " Connection: close" : " keep-alive") }
        function rate(x) { return x == "" ? "-" : x >= 1000 ? sprintf("%.1fk", x / 1000) : sprintf("%.0f", x) }
        function ms(x) { return x == "" ? "-" : sprintf("%.2f", x) }
        function us(x) { return x == "" ? "-" : sprintf("%.1f", x) }
        function named(s, n) { return s == "-" ? s : s " (" n ")" }
        function ratio(a, b) { return a == "" || b == "" || b == 0 ? "-" : sprintf("%.2fx", a / b) }
        # One target on one row: counted, listed under its target, returned for the table.
        function verdict(t, ok, have, where) {
            if (!have) { nodata[t]++; nodata_at[t] = nodata_at[t] ", " where; return "no data" }
            if (ok) { met[t]++; return "met" }
            notmet[t]++
            notmet_at[t] = notmet_at[t] ", " where
            return "not met"
        }
        function summary(t, text, rows) {
            printf "- %s: %s (met on %d of %d rows", text,
                notmet[t] ? "not met" : nodata[t] ? "not shown" : "met", met[t], rows
            if (notmet[t]) printf "; not met on %s", substr(notmet_at[t], 3)
            if (nodata[t]) printf "; no data for %s", substr(nodata_at[t], 3)
            print ")"
        }
        END {
            if (bad) exit 2
            for (i = 1; i <= npeer; i++)
                if (peer[i] in listed) present = present ", " peer[i]
            printf "medians of %d run%s; peers measured: %s\n\n", nfile, nfile == 1 ? "" : "s",
                present == "" ? "none" : substr(present, 3)
            print "| file, mode | cabrank req/s | best peer req/s | ratio | cabrank p99 ms | best peer p99 ms | cabrank CPU µs/req | most frugal peer CPU µs/req | ratio | req/s >= best | p99 <= best | CPU <= 0.8x |"
            print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"
            ncpu_rows = 0
            for (r = 1; r <= nrow; r++) {
                split(row[r], fm, ":")
                f = fm[1]
                m = fm[2]
                where = label(f, m)
                c = cand SUBSEP f SUBSEP m
                crps = median(c, "rps")
                if (crps != "" && nvals < nfile) short = short sprintf("; %s from %d", where, nvals)
                cp99 = median(c, "p99")
                ccpu = median(c, "cpu")
                brps = ""; lp99 = ""; fcpu = ""
                for (i = 1; i <= npeer; i++) {
                    p = peer[i] SUBSEP f SUBSEP m
                    x = median(p, "rps")
                    if (x != "" && (brps == "" || x > brps)) { brps = x; brps_n = peer[i] }
                    x = median(p, "p99")
                    if (x != "" && (lp99 == "" || x < lp99)) { lp99 = x; lp99_n = peer[i] }
                    x = median(p, "cpu")
                    if (x != "" && (fcpu == "" || x < fcpu)) { fcpu = x; fcpu_n = peer[i] }
                }
                vr = verdict("rps", crps != "" && brps != "" && crps >= brps, crps != "" && brps != "", where)
                vp = verdict("p99", cp99 != "" && lp99 != "" && cp99 <= lp99, cp99 != "" && lp99 != "", where)
                vc = "-"
                if (m == "keepalive" && (f == "hello.txt" || f == "1k.bin")) {
                    ncpu_rows++
                    vc = verdict("cpu", ccpu != "" && fcpu != "" && ccpu <= 0.8 * fcpu, ccpu != "" && fcpu != "", where)
                }
                printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", where,
                    rate(crps), named(rate(brps), brps_n), ratio(crps, brps),
                    ms(cp99), named(ms(lp99), lp99_n),
                    us(ccpu), named(us(fcpu), fcpu_n), ratio(ccpu, fcpu), vr, vp, vc
                for (i = 1; i <= nref; i++) {
                    p = ref[i] SUBSEP f SUBSEP m
                    x = median(p, "rps")
                    if (x == "") continue
                    refs[i] = refs[i] sprintf("; %s %s req/s, %s µs/req", where, rate(x), us(median(p, "cpu")))
                }
            }
            print ""
            for (i = 1; i <= nref; i++)
                if (refs[i] != "")
                    printf "reference, not a peer: %s (canned answer, no parsing): %s\n", ref[i], substr(refs[i], 3)
            if (short != "") printf "cabrank req/s from fewer runs (NA in the others): %s of %d\n", substr(short, 3), nfile
            if (!has_cand) print "no cabrank rows in these CSVs: the candidate did not start or was not measured (see the runs" q " logs)"
            for (r = 1; r <= nrow; r++) {
                split(row[r], fm, ":")
                for (i = 1; i <= nsrv; i++) {
                    k = srv[i] SUBSEP fm[1] SUBSEP fm[2]
                    if (errs[k] > 0)
                        errlist = errlist sprintf("; %s %s %d", srv[i], label(fm[1], fm[2]), errs[k])
                }
            }
            print "wrk errors, summed over the runs: " (errlist == "" ? "none" : substr(errlist, 3))
            if (other >= 0)
                printf "other processes during the tests: up to %d%% of one core (other_cpu_pct; a busy machine makes every figure noisier)\n", other
            print ""
            print "each run against the peers of that run (cabrank/best peer, lowest-highest, and the runs where the target held):"
            for (r = 1; r <= nrow; r++) {
                split(row[r], fm, ":")
                line = ""
                x = per_run(fm[1], fm[2], "rps", 1)
                if (x != "") line = line "; req/s " x
                x = per_run(fm[1], fm[2], "p99", 1)
                if (x != "") line = line "; p99 " x
                if (fm[2] == "keepalive" && (fm[1] == "hello.txt" || fm[1] == "1k.bin")) {
                    x = per_run(fm[1], fm[2], "cpu", 0.8)
                    if (x != "") line = line "; CPU " x
                }
                printf "- %s: %s\n", label(fm[1], fm[2]), line == "" ? "no run with data" : substr(line, 3)
            }
            print ""
            print "issue #4 targets:"
            summary("rps", "req/s at least the best peer" q "s, every row", nrow)
            summary("p99", "p99 at most the best peer" q "s, every row", nrow)
            summary("cpu", "CPU per request at most 0.8x the most frugal peer" q "s, hello.txt and 1k.bin keep-alive", ncpu_rows)
            print ""
            y = met["rps"] + met["p99"] + met["cpu"]
            n = notmet["rps"] + notmet["p99"] + notmet["cpu"]
            d = nodata["rps"] + nodata["p99"] + nodata["cpu"]
            printf "targets: %d met, %d not met%s\n", y, n, d ? sprintf(", %d without data", d) : ""
        }' "$@"
}

runs=3
out=/tmp/httpd-vs-peers-$(date +%Y%m%d-%H%M%S)
build=
peers=${PEERS:-}
extra=()
report_csvs=()
report_mode=0
given=("$@")

need() { # flag remaining-arg-count
    [ "$2" -ge 2 ] || die 2 "$1 needs a value ($me --help)"
}
while [ $# -gt 0 ]; do
    case $1 in
    --help | -h) help; exit 0 ;;
    --runs) need "$1" $#; runs=$2; shift 2 ;;
    --runs=*) runs=${1#*=}; shift ;;
    --out) need "$1" $#; out=$2; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    --build) need "$1" $#; build=$2; shift 2 ;;
    --build=*) build=${1#*=}; shift ;;
    --peers) need "$1" $#; peers=$2; shift 2 ;;
    --peers=*) peers=${1#*=}; shift ;;
    --report)
        shift
        [ $# -gt 0 ] || die 2 "--report needs at least one CSV ($me --help)"
        report_mode=1
        report_csvs=("$@")
        break
        ;;
    --) shift; extra=("$@"); break ;;
    *) die 2 "unknown argument '$1' ($me --help)" ;;
    esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || die 2 "--runs wants a positive whole number, not '$runs'"

# The command as given; for a run, preceded by the variables peers.sh reads
# that are set (in this fixed order: the shell does not keep the typed one).
cmd=
if [ "$report_mode" = 0 ]; then
    for v in PEERS DUR CDUR CONNS WARM SERVERS WRK_CPUS QUIET_PCT QUIET_WAIT CC; do
        [ -n "${!v+x}" ] && cmd+="$v=$(quote "${!v}") "
    done
fi
cmd+=$(quote "$0")
for a in "${given[@]}"; do
    cmd+=" $(quote "$a")"
done

if [ "$report_mode" = 1 ]; then
    report 0 "$cmd" "${report_csvs[@]}"
    exit
fi

top=$(cd "$(dirname "$0")/.." && pwd)
[ -n "$peers" ] || peers=$(cd "$top/.." && pwd)/shared/bench/peers.sh
[ -f "$peers" ] ||
    die 2 "no peers kit at $peers: this bench needs ../shared/bench/peers.sh beside the repo (or --peers PATH / PEERS=PATH)"
[ -n "$build" ] || build=$top/build
bin=$(cd "$build" 2>/dev/null && pwd)/cabrank-httpd
[ -x "$bin" ] || die 2 "no cabrank-httpd in $build (make BUILD=$build)"
command -v wrk >/dev/null || die 2 "wrk is not installed (apt-get install -y wrk)"

mkdir -p "$out" || die 2 "cannot create $out"
candidate="cabrank=$(quote "$bin") --listen 127.0.0.1:@PORT@ --root @ROOT@ --max-requests-per-connection 1000000"
for a in "${extra[@]}"; do
    candidate+=" $(quote "$a")"
done
export CANDIDATE=$candidate

# peers.sh stops its servers itself when interrupted, then exits 130; stop
# here too rather than start the next run.
trap 'exit 130' INT TERM HUP

csvs=()
failed_runs=0
for ((k = 1; k <= runs; k++)); do
    echo "== run $k of $runs: $peers $out/run-$k.csv (log: $out/run-$k.log)" >&2
    rm -f "$out/run-$k.csv"
    bash "$peers" "$out/run-$k.csv" 2>&1 | tee "$out/run-$k.log" >&2
    rc=$?
    if [ "$rc" -ne 0 ] || [ ! -s "$out/run-$k.csv" ]; then
        echo "$me: run $k failed (exit $rc): see $out/run-$k.log" >&2
        failed_runs=$((failed_runs + 1))
        continue
    fi
    grep -q '^cabrank,' "$out/run-$k.csv" ||
        echo "$me: run $k has no cabrank rows: see 'FAIL cabrank' in $out/run-$k.log" >&2
    csvs+=("$out/run-$k.csv")
done
[ ${#csvs[@]} -gt 0 ] || die 1 "no run completed: see $out/run-*.log"

report 1 "$cmd" "${csvs[@]}" | tee "$out/report.md"
[ "$failed_runs" -eq 0 ]
