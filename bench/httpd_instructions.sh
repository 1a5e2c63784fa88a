#!/usr/bin/env bash
# bench/httpd_instructions.sh - user-space instructions per request of
# cabrank-httpd, counted by callgrind, for one or more builds side by side.
# Counts do not move with this machine's noise the way req/s and CPU time do,
# so they show what a change to the request path saves in our own code, which
# the peers bench (httpd_vs_peers.sh) cannot separate from its +-5-15%. Kernel
# time, most of a small request's cost, is not counted: see docs/benchmarks.md.
# A developer bench, not a test: it needs valgrind and wrk
# (apt-get install -y valgrind wrk).
set -u -o pipefail

me=bench/httpd_instructions.sh
usage="usage: $me [--build DIR [--flags FLAGS]]... [--seconds N] [--conns N] [--browser]
       $me --help"

help() {
    cat <<EOF
$usage

Serves a 13-byte hello.txt from a scratch document root with each build's
cabrank-httpd under valgrind --tool=callgrind (collection off while it starts
and warms up), drives it for N seconds with wrk -t1 -cC (keep-alive, wrk's
47-byte request), and prints instructions per request: the whole program and
the request path's parts (inclusive). One column per build, in the order given.
A part that a build inlined into its callers everywhere has no count of its
own and shows as - (the profile-guided build/cabrank-httpd inlines several;
build/release/cabrank-httpd is the same program without the profile).

  --build DIR    a build directory holding cabrank-httpd (default build);
                 repeat to compare builds, e.g. --build /tmp/old/build --build build
  --flags FLAGS  cabrank-httpd flags for the --build before it (a column of
                 their own: the same build under two sets of flags compares
                 the flags, e.g. --build build --build build --flags
                 '--timeline off')
                 (last/first under 1: the last build runs fewer)
  --seconds N    measured seconds of load per build (default 3)
  --conns N      wrk connections (default 8)
  --browser      send a desktop browser's request fields too (User-Agent,
                 Accept, Accept-Language, Accept-Encoding, Cookie...: a
                 560-byte request instead of wrk's 47 bytes)
  --help         this text
EOF
}

die() { # exit-code message: one line on stderr
    echo "$me: $2" >&2
    exit "$1"
}

builds=()
bflags=()
seconds=3
conns=8
fields=()
while [ $# -gt 0 ]; do
    case "$1" in
    --build | --flags | --seconds | --conns)
        [ $# -ge 2 ] || die 2 "$1 needs a value ($me --help)"
        case "$1" in
        --build)
            builds+=("$2")
            bflags+=("")
            ;;
        --flags)
            [ ${#builds[@]} -gt 0 ] || die 2 "--flags follows the --build it is for ($me --help)"
            bflags[${#bflags[@]} - 1]=$2
            ;;
        --seconds) seconds=$2 ;;
        --conns) conns=$2 ;;
        esac
        shift 2
        ;;
    --browser)
        fields=(-H 'User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36'
            -H 'Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8'
            -H 'Accept-Language: en-US,en;q=0.9'
            -H 'Accept-Encoding: gzip, deflate, br, zstd'
            -H 'Cookie: session=4f1c2a9e8b7d6c5e4f3a2b1c0d9e8f7a; theme=dark'
            -H 'Sec-Fetch-Dest: document' -H 'Sec-Fetch-Mode: navigate' -H 'Sec-Fetch-Site: none'
            -H 'Upgrade-Insecure-Requests: 1' -H 'Cache-Control: max-age=0')
        shift
        ;;
    --help)
        help
        exit 0
        ;;
    *) die 2 "unknown argument '$1' ($me --help)" ;;
    esac
done
if [ ${#builds[@]} -eq 0 ]; then
    builds=(build)
    bflags=("")
fi
[[ $seconds =~ ^[1-9][0-9]*$ ]] || die 2 "--seconds wants a whole number of seconds, not '$seconds'"
[[ $conns =~ ^[1-9][0-9]*$ ]] || die 2 "--conns wants a whole number, not '$conns'"
for tool in valgrind callgrind_control callgrind_annotate wrk curl; do
    command -v "$tool" >/dev/null || die 2 "needs $tool (apt-get install -y valgrind wrk curl)"
done
for b in "${builds[@]}"; do
    [ -x "$b/cabrank-httpd" ] || die 2 "no $b/cabrank-httpd (make, or --build DIR)"
done

work=$(mktemp -d /tmp/httpd-instructions.XXXXXX) || die 1 "mktemp failed"
server=
cleanup() {
    [ -z "$server" ] || kill "$server" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/root"
printf 'Hello, world\n' >"$work/root/hello.txt"

# The request path's parts, as callgrind names them (file:function).
parts=(http_input http_parse_request http_path_normalize http_file_cache_get write_head flush)

# measure K BUILD FLAGS: leaves "TOTAL n" and "PART n" lines (instructions per request) in $work/K.txt
measure() {
    local k=$1 bin=$2/cabrank-httpd out=$work/$1.cg port="" n
    local -a extra
    read -r -a extra <<<"$3"
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" "$bin" \
        --listen 127.0.0.1:0 --root "$work/root" --max-requests-per-connection 1000000 \
        "${extra[@]}" >"$work/$k.log" 2>&1 &
    server=$!
    for _ in $(seq 150); do
        port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$work/$k.log" | head -1)
        [ -n "$port" ] && curl -fs -o /dev/null "http://127.0.0.1:$port/hello.txt" && break
        port=
        sleep 0.2
    done
    [ -n "$port" ] || die 1 "$bin did not come up under valgrind (see below)
$(tail -5 "$work/$k.log")"
    wrk -t1 -c"$conns" -d1s "${fields[@]}" "http://127.0.0.1:$port/hello.txt" >/dev/null
    callgrind_control -i on "$server" >/dev/null 2>&1 || die 1 "callgrind_control -i on failed"
    wrk -t1 -c"$conns" -d"${seconds}s" "${fields[@]}" "http://127.0.0.1:$port/hello.txt" >"$work/$k.wrk"
    callgrind_control -i off "$server" >/dev/null 2>&1 || die 1 "callgrind_control -i off failed"
    kill "$server"
    wait "$server" 2>/dev/null
    server=
    n=$(awk '/requests in/ {print $1}' "$work/$k.wrk")
    if [ -z "$n" ] || [ "$n" -eq 0 ]; then
        die 1 "wrk made no requests against $bin"
    fi
    callgrind_annotate --inclusive=yes "$out" 2>/dev/null | awk -v n="$n" -v parts="${parts[*]}" '
        BEGIN { split(parts, p, " "); for (i in p) want[p[i]] = 1 }
        /PROGRAM TOTALS/ { v = $1; gsub(",", "", v); printf "TOTAL %.0f\n", v / n }
        match($0, /%\) +[^ ]+/) {
            fn = substr($0, RSTART, RLENGTH); sub(/^.*:/, "", fn)
            if (fn in want && !(fn in seen)) {
                seen[fn] = 1; v = $1; gsub(",", "", v); printf "%s %.0f\n", fn, v / n
            }
        }' >"$work/$k.txt"
    echo "$n" >"$work/$k.n"
}

cmd="$me"
for k in "${!builds[@]}"; do
    cmd+=" --build ${builds[$k]}"
    [ -z "${bflags[$k]}" ] || cmd+=" --flags '${bflags[$k]}'"
done
cmd+=" --seconds $seconds --conns $conns"
[ ${#fields[@]} -eq 0 ] || cmd+=" --browser"
echo "# $cmd"
echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), wrk -t1 -c$conns -d${seconds}s on a 13-byte hello.txt$([ ${#fields[@]} -eq 0 ] || echo ", browser fields")"
for k in "${!builds[@]}"; do
    measure "$k" "${builds[$k]}" "${bflags[$k]}"
done

printf '\n| instructions per request |'
for k in "${!builds[@]}"; do printf ' %s |' "${builds[$k]}${bflags[$k]:+ ${bflags[$k]}}"; done
[ ${#builds[@]} -gt 1 ] && printf ' last/first |'
printf '\n|---|'
for _ in "${builds[@]}"; do printf -- '---:|'; done
[ ${#builds[@]} -gt 1 ] && printf -- '---:|'
printf '\n'
for row in TOTAL "${parts[@]}"; do
    label=$row
    [ "$row" = TOTAL ] && label="whole program"
    printf '| %s |' "$label"
    first="" last=""
    for k in "${!builds[@]}"; do
        v=$(awk -v r="$row" '$1 == r {print $2}' "$work/$k.txt")
        printf ' %s |' "${v:--}"
        [ -z "$first" ] && first=${v:-}
        last=${v:-}
    done
    if [ ${#builds[@]} -gt 1 ]; then
        if [ -n "$first" ] && [ -n "$last" ] && [ "$first" -gt 0 ]; then
            awk -v a="$first" -v b="$last" 'BEGIN { printf " %.2fx |", b / a }'
        else
            printf ' - |'
        fi
    fi
    printf '\n'
done
printf '| requests measured |'
for k in "${!builds[@]}"; do printf ' %s |' "$(cat "$work/$k.n")"; done
[ ${#builds[@]} -gt 1 ] && printf ' |'
printf '\n'
