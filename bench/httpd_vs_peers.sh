#!/usr/bin/env bash
# httpd_vs_peers.sh - cabrank-httpd against nginx, h2o, lighttpd and Apache in
# one run: the shared peers kit (peers.sh) starts each peer with fixed
# settings (request caps per connection raised, as for the peers) and drives it and cabrank-httpd (the candidate) with the same wrk
# load, then summarize.sh prints medians. Not a test; needs wrk and the peers
# (apt-get install -y wrk nginx-light h2o lighttpd apache2).
#
# usage: bench/httpd_vs_peers.sh [RUNS] [OUT_PREFIX]
# env:   PEERS_SH   path of peers.sh (default ../shared/bench/peers.sh beside the repo)
#        CABRANK_ARGS  extra cabrank-httpd flags (e.g. "--model hshr")
#        SERVERS, DUR, CDUR, CONNS ... are passed to peers.sh (see its header)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
peers=${PEERS_SH:-$top/../shared/bench/peers.sh}
runs=${1:-1}
prefix=${2:-/tmp/httpd-vs-peers}
if [ ! -x "$peers" ]; then
    echo "httpd_vs_peers: needs the peers kit at $peers (set PEERS_SH)" >&2
    exit 2
fi
make -C "$top" -s all >/dev/null
bin=$top/build/cabrank-httpd
export CANDIDATE="cabrank=$bin --listen 127.0.0.1:@PORT@ --root @ROOT@ --log-level warn --max-requests-per-connection 100000000 ${CABRANK_ARGS:-}"
echo "# command: $0 $*"
echo "# candidate: ${CANDIDATE#*=}"
csvs=()
for i in $(seq "$runs"); do
    "$peers" "$prefix-$i.csv" >&2
    csvs+=("$prefix-$i.csv")
done
"$(dirname "$peers")/summarize.sh" "${csvs[@]}"
