#!/usr/bin/env bash
# tools/pgo-train.sh - the training step of the profile-guided cabrank-httpd
# (Makefile, "profile-guided cabrank-httpd"). Serves a scratch document root
# with the instrumented build on 127.0.0.1:0, drives it with pgo-load (the
# request mix is in tools/pgo_load.c) and stops it with TERM, so that it
# writes its profile: a .gcda beside each object in OBJ_DIR, where gcc's
# -fprofile-use looks for it when the object is built again.
#
# usage: tools/pgo-train.sh HTTPD LOAD OBJ_DIR
set -euo pipefail

me=tools/pgo-train.sh
[ $# -eq 3 ] || { echo "usage: $me HTTPD LOAD OBJ_DIR" >&2; exit 2; }
httpd=$1 load=$2 objs=$3
pid=
tmp=$(mktemp -d /tmp/cabrank-pgo.XXXXXX)
cleanup() {
    [ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
die() {
    echo "$me: $*" >&2
    [ ! -s "$tmp/httpd.log" ] || tail -5 "$tmp/httpd.log" >&2
    echo "$me: build without profile-guided optimisation with: make PGO=0" >&2
    exit 1
}

# A profile from an older build of the objects would not match them.
find "$objs" -name '*.gcda' -delete

www=$tmp/www
mkdir -p "$www/docs"
printf 'Hello, world\n' >"$www/hello.txt"
head -c 1024 /dev/urandom >"$www/1k.bin"
head -c 65536 /dev/urandom >"$www/64k.bin"
cp www/index.html "$www/index.html"
gzip -9 -k -n "$www/index.html"
cp www/models.html "$www/docs/index.html"

"$httpd" --listen 127.0.0.1:0 --root "$www" >"$tmp/httpd.log" 2>&1 &
pid=$!
port=
for _ in $(seq 200); do
    port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$tmp/httpd.log" | head -1)
    [ -z "$port" ] || break
    kill -0 "$pid" 2>/dev/null || die "the instrumented cabrank-httpd exited at start"
    sleep 0.05
done
[ -n "$port" ] || die "the instrumented cabrank-httpd did not listen within 10 s"

"$load" "$port" 5 200000 || die "the training load failed"
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=
[ "$status" -eq 0 ] || die "the instrumented cabrank-httpd exited with $status on TERM"

n=$(find "$objs" -name '*.gcda' | wc -l)
[ "$n" -gt 0 ] || die "the instrumented cabrank-httpd wrote no profile"
echo "$me: $n profiles from the training load"
