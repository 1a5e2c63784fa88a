#!/usr/bin/env bash
# bench/multicore_cores.sh BUNDLE OUT: the many-core figures of issue #23 in one run, on a
# machine with 16 CPUs, from a bundle made by ../shared/bench/bundle.sh (BUNDLE/multicore.sh):
#  1. 8 server cores (0-7), wrk -t8 -c256 on 8-15: the peers and cabrank-httpd's default,
#     hshr and prefork under keep-alive hello.txt, 64k.bin and Connection: close;
#  2. the same cores, hello.txt keep-alive: the papers' one handle set (--groups 1
#     --promotion-delay 0), hshr with a listener per set, proactor ring-per-thread;
#  3. one client (wrk -t1 -c1): p50 of the default, hshr, h2o and nginx;
#  4. scaling: 1, 2 and 4 server cores, hello.txt keep-alive (8 cores is part 1).
# Each part writes OUT/<part>/multicore.csv (multicore.sh's columns); OUT/all.csv joins them
# with the part and the core count. Env: DUR (default 5; parts 3 and 4 take 3 s).
set -u
B=${1:?usage: multicore_cores.sh BUNDLE OUT}; OUT=${2:?usage: multicore_cores.sh BUNDLE OUT}
export DUR=${DUR:-5}
mkdir -p "$OUT"
B=$(cd "$B" && pwd)
# multicore.sh asks curl whether a server is up; a bare machine may lack it.
if ! command -v curl >/dev/null && [ -x "$B/real/curl" ]; then
  curl() { "$B/lib/ld-linux-x86-64.so.2" --library-path "$B/lib" "$B/real/curl" "$@"; }
  export -f curl; export B
fi
{ uname -a; nproc; command -v curl taskset setsid awk; } >"$OUT/machine.txt" 2>&1
export CRFLAGS_one="--groups 1 --threads 8 --promotion-delay 0"
export CRFLAGS_hshrg="--model hshr --threads 8 --groups 8"
export CRFLAGS_hshr8="--model hshr --threads 8"
export CRFLAGS_ring="--model proactor --dispatch ring-per-thread"
export CRFLAGS_proactor=""
SERVERS="nginx h2o lighttpd cr-default cr-hshr cr-prefork" "$B/multicore.sh" "$OUT/p1"
SERVERS="cr-one cr-hshrg cr-ring" LOADS="hello.txt:ka" "$B/multicore.sh" "$OUT/p2"
SERVERS="cr-default cr-hshr h2o nginx" LOADS="hello.txt:ka" WT=1 CONNS=1 DUR=3 \
  "$B/multicore.sh" "$OUT/p3"
for k in 1 2 4; do
  SERVERS="cr-default cr-hshr h2o nginx" LOADS="hello.txt:ka" N=$k SRV_CPUS="0-$((k - 1))" DUR=3 \
    "$B/multicore.sh" "$OUT/k$k"
done
{ echo "part,cores,$(head -1 "$OUT/p1/multicore.csv")"
  for p in p1 p2 p3 k1 k2 k4; do
    c=8; [[ $p == k* ]] && c=${p#k}
    tail -n +2 "$OUT/$p/multicore.csv" | sed "s/^/$p,$c,/"
  done; } >"$OUT/all.csv"
cat "$OUT/all.csv"
