#!/usr/bin/env bash
# run-oltp.sh - `make run-oltp`: the transaction service on this machine, once.
# Starts a cabrank-ledger on SQLite in a temporary directory, a cabrank-gateway in
# front of it on ADDR, and a short checked load through the gateway
# (cabrank-oltp-load --setup ... --check). On exit the gateway stops, then the
# ledger, and the directory is removed; the exit status is the checker's.
#
# usage: scripts/run-oltp.sh BUILD ADDR SECONDS CLIENTS
set -u
if [ $# -ne 4 ]; then
    echo "usage: $0 BUILD ADDR SECONDS CLIENTS" >&2
    exit 2
fi
build=$1 addr=$2 seconds=$3 clients=$4

dir=$(mktemp -d /tmp/cabrank-oltp-XXXXXX) || exit 1
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; wait $p 2>/dev/null; done; rm -rf "$dir"' EXIT

# Waits until the server writing to $1 (pid $2, named $3) says it listens.
listening() {
    for _ in $(seq 200); do
        grep -q 'listening on' "$1" && return 0
        kill -0 "$2" 2>/dev/null || break
        sleep 0.05
    done
    echo "$3 did not start" >&2
    return 1
}

"$build/cabrank-ledger" --listen 127.0.0.1:0 --db "$dir/ledger.db" >"$dir/ledger.out" &
pids="$!"
listening "$dir/ledger.out" $! cabrank-ledger || exit 1
ledger=$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$dir/ledger.out" | head -1)

"$build/cabrank-gateway" --listen "$addr" --backend "$ledger" >"$dir/gateway.out" &
pids="$! $pids"
listening "$dir/gateway.out" $! cabrank-gateway || exit 1

echo "cabrank-ledger on $ledger (SQLite $dir/ledger.db), cabrank-gateway on $addr"
echo "$build/cabrank-oltp-load --target $addr --setup --clients $clients" \
    "--seconds $seconds --log $dir/acked.log --check $dir/ledger.db"
"$build/cabrank-oltp-load" --target "$addr" --setup --clients "$clients" \
    --seconds "$seconds" --log "$dir/acked.log" --check "$dir/ledger.db"
