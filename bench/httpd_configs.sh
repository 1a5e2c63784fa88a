#!/usr/bin/env bash
# bench/httpd_configs.sh - cabrank-httpd under several sets of flags, runs
# alternating, medians: req/s, p99, server CPU per request; and the lf pool's
# promotions and takeovers (from /server-status) summed over the runs. Alternating is what
# makes a few percent visible on a small noisy machine, where the same server
# moves by 5-15% from minute to minute. A developer bench, not a test: it
# needs wrk and curl (apt-get install -y wrk curl).
set -u -o pipefail

me=bench/httpd_configs.sh
usage="usage: $me [--runs N] [--seconds N] [--conns N] [--file F] [--build DIR] NAME=FLAGS...
       $me --help"

help() {
    cat <<EOF
$usage

Each NAME=FLAGS is a configuration: FLAGS (may be empty) are added to
  cabrank-httpd --listen 127.0.0.1:0 --root ROOT --max-requests-per-connection 1000000
FLAGS that begin with @DIR run DIR/cabrank-httpd instead of --build's, so that
builds are compared too: old=@/tmp/old/build new=
ROOT is a scratch directory with hello.txt (13 bytes) and 1k.bin. Every round
runs each configuration once, in the order given: start it, 1 s of wrk to warm
up, then wrk -t1 -cC -dNs on F, stop it. Then a markdown table of the medians
over the rounds (promotions and takeovers summed), and every run's req/s.

  --runs N       rounds (default 6)
  --seconds N    measured seconds per run (default 3)
  --conns N      wrk connections (default 64)
  --file F       hello.txt or 1k.bin (default hello.txt)
  --build DIR    the build holding cabrank-httpd (default build)
  --help         this text

Example, the promotion delay:
  $me default= 1ms='--promotion-delay 0.001' one-thread='--threads 1'
Example, two builds (a worktree of an older commit built in /tmp/old):
  $me before=@/tmp/old/build after=
EOF
}

die() { # exit-code message: one line on stderr
    echo "$me: $2" >&2
    exit "$1"
}

runs=6
seconds=3
conns=64
file=hello.txt
build=build
names=()
flags=()
while [ $# -gt 0 ]; do
    case "$1" in
    --runs | --seconds | --conns | --file | --build)
        [ $# -ge 2 ] || die 2 "$1 needs a value ($me --help)"
        case "$1" in
        --runs) runs=$2 ;;
        --seconds) seconds=$2 ;;
        --conns) conns=$2 ;;
        --file) file=$2 ;;
        --build) build=$2 ;;
        esac
        shift 2
        ;;
    --help)
        help
        exit 0
        ;;
    -*) die 2 "unknown option '$1' ($me --help)" ;;
    *=*)
        names+=("${1%%=*}")
        flags+=("${1#*=}")
        shift
        ;;
    *) die 2 "'$1' is not NAME=FLAGS ($me --help)" ;;
    esac
done
for v in "$runs" "$seconds" "$conns"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || die 2 "--runs, --seconds and --conns want a whole number, not '$v'"
done
case "$file" in hello.txt | 1k.bin) ;; *) die 2 "--file is hello.txt or 1k.bin, not '$file'" ;; esac
[ ${#names[@]} -gt 0 ] || die 2 "no configuration given ($me --help)"
for n in "${names[@]}"; do
    [[ $n =~ ^[A-Za-z0-9_.-]+$ ]] || die 2 "configuration name '$n': letters, digits, . _ - only"
done
for tool in wrk curl; do
    command -v "$tool" >/dev/null || die 2 "needs $tool (apt-get install -y wrk curl)"
done
bins=()
for k in "${!names[@]}"; do
    bins[k]=$build/cabrank-httpd
    if [[ ${flags[k]} == @* ]]; then
        read -r dir rest <<<"${flags[k]#@}"
        bins[k]=$dir/cabrank-httpd
        flags[k]=$rest
    fi
    [ -x "${bins[k]}" ] || die 2 "no ${bins[k]} (make, --build DIR or @DIR)"
done
hz=$(getconf CLK_TCK) || die 1 "getconf CLK_TCK failed"

work=$(mktemp -d /tmp/httpd-configs.XXXXXX) || die 1 "mktemp failed"
server=
cleanup() {
    [ -z "$server" ] || kill "$server" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/root"
printf 'Hello, world\n' >"$work/root/hello.txt"
head -c 1024 /dev/urandom >"$work/root/1k.bin"

# counter JSON NAME: a top-level number of the /server-status JSON, or 0
counter() {
    local v
    v=$(printf '%s' "$1" | sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p")
    echo "${v:-0}"
}

# cpu_ticks PID: the process's user + system clock ticks so far
cpu_ticks() {
    awk '{print $14 + $15}' "/proc/$1/stat"
}

# one K: a run of configuration K; appends "name rps p99_ms cpu_us promotions takeovers"
one() {
    local k=$1 port="" log=$work/server.log out=$work/wrk.txt c0 c1 s0 s1 n
    # shellcheck disable=SC2086 # FLAGS are words on purpose
    "${bins[$k]}" --listen 127.0.0.1:0 --root "$work/root" --max-requests-per-connection 1000000 \
        ${flags[$k]} >"$log" 2>&1 &
    server=$!
    for _ in $(seq 100); do
        port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$log" | head -1)
        [ -n "$port" ] && curl -fs -o /dev/null "http://127.0.0.1:$port/$file" && break
        port=""
        kill -0 "$server" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$port" ] || die 1 "${names[$k]} did not come up: $(tail -1 "$log")"
    wrk -t1 -c"$conns" -d1s "http://127.0.0.1:$port/$file" >/dev/null
    s0=$(curl -fs "http://127.0.0.1:$port/server-status?format=json")
    c0=$(cpu_ticks "$server")
    wrk -t1 -c"$conns" -d"${seconds}s" --latency "http://127.0.0.1:$port/$file" >"$out"
    c1=$(cpu_ticks "$server")
    s1=$(curl -fs "http://127.0.0.1:$port/server-status?format=json")
    kill "$server"
    wait "$server" 2>/dev/null
    server=""
    n=$(awk '/requests in/ {print $1}' "$out")
    if [ -z "$n" ] || [ "$n" -eq 0 ]; then
        die 1 "wrk made no requests against ${names[$k]}"
    fi
    awk -v name="${names[$k]}" -v n="$n" -v c0="$c0" -v c1="$c1" -v hz="$hz" \
        -v p="$(($(counter "$s1" promotions) - $(counter "$s0" promotions)))" \
        -v t="$(($(counter "$s1" taken_over) - $(counter "$s0" taken_over)))" '
        /Requests\/sec/ { rps = $2 }
        $1 == "99%" { v = $2; ms = v + 0
                      if (v ~ /us$/) ms /= 1000; else if (v ~ /[^m]s$/) ms *= 1000
                      p99 = ms }
        END { printf "%s %.0f %.3f %.2f %d %d\n", name, rps, p99, (c1 - c0) / hz * 1e6 / n, p, t }
    ' "$out" >>"$work/runs.txt"
}

cmd="$me --runs $runs --seconds $seconds --conns $conns --file $file --build $build"
for k in "${!names[@]}"; do
    at=
    [ "${bins[$k]}" = "$build/cabrank-httpd" ] || at="@${bins[$k]%/cabrank-httpd} "
    cmd+=" ${names[$k]}='$at${flags[$k]}'"
done
echo "# $cmd"
echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), $(nproc) CPUs, wrk -t1 -c$conns -d${seconds}s on $file, rounds alternating"
: >"$work/runs.txt"
for _ in $(seq "$runs"); do
    for k in "${!names[@]}"; do
        one "$k"
    done
done

echo
echo "| configuration | req/s | p99 ms | server CPU µs/req | promotions, all runs | takeovers, all runs | req/s of each run |"
echo "|---|---:|---:|---:|---:|---:|---|"
for k in "${!names[@]}"; do
    awk -v name="${names[$k]}" '
        function median(a, n,    i, j, t) {
            for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
                t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        $1 == name { n++; r[n] = $2; q[n] = $3; c[n] = $4; p += $5; t += $6
                     each = each (each == "" ? "" : " ") sprintf("%.1fk", $2 / 1000) }
        END { printf "| %s | %.1fk | %.2f | %.2f | %s | %s | %s |\n", name, median(r, n) / 1000,
                     median(q, n), median(c, n), p, t, each }
    ' "$work/runs.txt"
done
