#!/usr/bin/env bash
# bench/oltp.sh - the transaction service's benchmark (issue #8): durable
# transfers per second and p50/p99 latency with cabrank-oltp-load, 64 clients
# closed loop, each row on a fresh SQLite ledger (WAL, synchronous=FULL) in a
# temporary directory, every row checked afterwards (the checker's verdict is
# a column: a figure whose transfers are not all in the database is no figure):
#   (a) straight at cabrank-ledger          (b) through cabrank-gateway
#   (c) the ledger with --no-group-commit   (one fsync per transfer; ratio a/c)
#   (d) a new connection per request, through the gateway and straight at the
#       ledger, against (b)'s bound L/F on multiplexed back-end connections
# Prints a markdown table and the command that made it.
#
#   bench/oltp.sh [--build DIR] [--seconds S] [--clients N] [--threads N]
#
# --threads is the ledger's worker count: a worker waits for its commit, so
# with clients straight at the ledger it bounds how many transfers one group
# commit carries; through the gateway a worker brings a connection's
# pipelined writes (up to 64) into one commit.
set -euo pipefail

build=${BUILD:-build}
seconds=3
clients=64
threads=64
accounts=1000
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--seconds S] [--clients N] [--threads N]" >&2; exit 2 ;;
    esac
done
for p in cabrank-ledger cabrank-gateway cabrank-oltp-load; do
    [ -x "$build/$p" ] || { echo "$0: $build/$p missing (make BUILD=$build all)" >&2; exit 2; }
done

work=$(mktemp -d /tmp/cabrank-oltp-bench-XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# start NAME PROG ARGS...: runs PROG in the background and sets port from
# its "listening on 127.0.0.1:PORT" line (10 s at most). Not in a $(...):
# pids must grow in this shell, for the trap.
start() {
    local name=$1 out
    shift
    out=$work/$name.out
    "$@" >"$out" 2>"$work/$name.err" &
    pids+=($!)
    for _ in $(seq 200); do
        if grep -q 'listening on' "$out" 2>/dev/null; then
            port=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' "$out" | head -1)
            return 0
        fi
        sleep 0.05
    done
    echo "$0: $name did not start:" >&2
    cat "$work/$name.err" >&2
    return 1
}

stop_all() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
}

rows=()
rate_of=()
port=
# row LABEL VIA(ledger|gateway) LEDGER_FLAGS LOAD_FLAGS [GATEWAY_FLAGS]
row() {
    local label=$1 via=$2 lflags=$3 flags=$4 gflags=${5:-} dir lport target out
    dir=$work/row${#rows[@]}
    mkdir -p "$dir"
    # shellcheck disable=SC2086
    start ledger "$build/cabrank-ledger" --listen 127.0.0.1:0 --db "$dir/ledger.db" \
        --threads "$threads" $lflags
    lport=$port
    target=127.0.0.1:$lport
    if [ "$via" = gateway ]; then
        # shellcheck disable=SC2086
        start gateway "$build/cabrank-gateway" --listen 127.0.0.1:0 \
            --backend "127.0.0.1:$lport" $gflags
        target=127.0.0.1:$port
    fi
    "$build/cabrank-oltp-load" --target "$target" --setup --accounts "$accounts" >/dev/null
    # shellcheck disable=SC2086
    out=$("$build/cabrank-oltp-load" --target "$target" --clients "$clients" \
        --seconds "$seconds" --accounts "$accounts" --log "$dir/acked.log" \
        --check "$dir/ledger.db" $flags || true)
    stop_all
    echo "$out" >"$dir/load.out"
    local tps p50 p99 verdict
    tps=$(sed -n 's/^transfers acknowledged: .* = \([0-9]*\)\/s.*/\1/p' <<<"$out")
    p50=$(sed -n 's/^latency us: p50 \([0-9]*\) .*/\1/p' <<<"$out")
    p99=$(sed -n 's/^latency us: .* p99 \([0-9]*\) .*/\1/p' <<<"$out")
    verdict=$(tail -1 <<<"$out")
    rows+=("| $label | ${tps:-?} | ${p50:-?} | ${p99:-?} | ${verdict:-?} |")
    rate_of+=("${tps:-0}")
    echo "$label: ${tps:-?}/s, p50 ${p50:-?} us, p99 ${p99:-?} us, $verdict" >&2
}

gw="--threads 4 --connections 8"
row "(a) direct to the ledger, group commit" ledger "" ""
row "(b) through the gateway, bound L/F on 8 multiplexed connections" gateway "" "" "$gw"
row "(b) through the gateway, its defaults (2 connections)" gateway "" "" ""
row "(c) direct, --no-group-commit" ledger "--no-group-commit" ""
row "(d) through the gateway, a client connection per request" gateway "" \
    "--connect-per-request" "$gw"
row "(d) direct, a connection per request" ledger "" "--connect-per-request"

# The disk's cost of one synchronous 4 KiB write: what (c), one sync per
# transfer, pays each time. Where it is cheap, group commit gains less (its
# own rate is bound by CPU), so the ratio below is read against it.
sync_us=$(dd if=/dev/zero of="$work/sync.test" bs=4k count=500 oflag=dsync 2>&1 |
    awk '/copied/ {printf "%.0f", $(NF-3) * 1e6 / 500}')
rm -f "$work/sync.test"

echo
echo "Command: \`bench/oltp.sh --build $build --seconds $seconds --clients $clients --threads $threads\`"
echo "($clients clients closed loop, ${seconds} s a row, $accounts accounts, ledger --threads $threads," \
    "gateway $gw unless said, SQLite WAL synchronous=FULL on" \
    "$(df -P "$work" | awk 'NR==2 {print $1}'), $(nproc) CPUs)"
echo
echo "| setup | durable transfers/s | p50 µs | p99 µs | checks |"
echo "|---|---:|---:|---:|---|"
printf '%s\n' "${rows[@]}"
echo
awk -v a="${rate_of[0]}" -v b="${rate_of[1]}" -v c="${rate_of[3]}" -v d="${rate_of[4]}" -v sync="$sync_us" 'BEGIN {
    if (c > 0) printf "Group commit against one fsync per transfer: %.1fx (target >= 10x), while one synchronous 4 KiB write (dd oflag=dsync) took %s µs on this disk: the cheaper a sync, the less sharing it gains.\n", a / c, sync;
    if (d > 0) printf "Through the gateway, multiplexed against a client connection per request: %.1fx.\n", b / d;
}'
