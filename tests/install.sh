#!/usr/bin/env bash
# install.sh - the installed library as a C developer first meets it; run by
# tests/run.sh on the tree `make test` built, with its make variables (alone:
# `BUILD=build tests/install.sh` after `make`). Two `make install`s into scratch
# DESTDIRs (PREFIX=/opt/cabrank-first, then PREFIX=/opt/cabrank-test with
# LIBDIR=.../lib64) must each compile nothing and install a cabrank.pc naming its
# own PREFIX, not the DESTDIR. Against the second, examples/proactor_echo (it
# needs liburing) is built with pkg-config (PKG_CONFIG_SYSROOT_DIR for the
# DESTDIR), linked to the installed libcabrank.so, then fully static with
# `pkg-config --static`; each must echo one line on 127.0.0.1:0 and exit 0 on
# SIGTERM. Also: `make run` must not need clang-format. Prints one line per
# failure, then "install: ok" or nothing; exit 0 pass, 1 fail.
set -u
cd "$(dirname "$0")/.." || exit 1
B=${BUILD:-build}
PREFIX=/opt/cabrank-test
WAIT_S=20
CC=${CC:-cc}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cabrank-install.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
bad=0
fail() {
    echo "install: $*"
    bad=1
}

# `make run` serves: clang-format is needed only by `make test` and `make format*`.
if make -n --no-print-directory BUILD="$B" run 2>&1 | grep -q clang-format; then
    fail "'make -n run' names clang-format; only the format targets need it"
fi
make -n --no-print-directory BUILD="$B" format-check 2>&1 | grep -q clang-format ||
    fail "'make -n format-check' does not name clang-format"

# Two installs from the built tree, as a packager might run them one after the
# other: each is copies and links only, no compilation, and each cabrank.pc names
# its own PREFIX. The second puts the libraries in lib64, to see that LIBDIR counts.
install_to() { # destdir prefix [make variables...]
    local dest=$1 prefix=$2 pc
    shift 2
    if ! make --no-print-directory BUILD="$B" DESTDIR="$dest" PREFIX="$prefix" "$@" install \
        >"$tmp/make.log" 2>&1; then
        fail "make install PREFIX=$prefix failed:"
        sed 's/^/    /' "$tmp/make.log"
        exit 1
    fi
    if grep -E -- '(^| )-c( |$).*\.c( |$)' "$tmp/make.log" | head -n 3 | grep .; then
        fail "make install compiled sources; it should install what is built"
    fi
    pc=$(find "$dest" -name cabrank.pc)
    if [ -z "$pc" ]; then
        fail "make install PREFIX=$prefix: no cabrank.pc under DESTDIR"
        exit 1
    fi
    grep -qx "prefix=$prefix" "$pc" || fail "$pc: not prefix=$prefix: $(head -n 1 "$pc")"
    ! grep -qF "$tmp" "$pc" || fail "$pc names the DESTDIR $dest"
}
install_to "$tmp/first" /opt/cabrank-first
install_to "$root" "$PREFIX" LIBDIR="$PREFIX/lib64"
pcdir=$root$PREFIX/lib64/pkgconfig

export PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$root
if ! flags=$(pkg-config --cflags --libs cabrank) ||
    ! static_flags=$(pkg-config --static --cflags --libs cabrank); then
    fail "pkg-config cannot read the installed cabrank.pc"
    exit 1
fi

# Starts PROG on 127.0.0.1:0, sends one line, expects it back, then SIGTERM and
# exit status 0. LABEL names the build in messages.
run_echo() { # label prog [env...]
    local label=$1 prog=$2 out=$tmp/$1.out pid port="" line="" rc
    shift 2
    env "$@" timeout -k 5 60 "$prog" --listen 127.0.0.1:0 >"$out" 2>"$tmp/$label.err" &
    pid=$!
    for _ in $(seq $((WAIT_S * 10))); do
        port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$out")
        [ -n "$port" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ -z "$port" ]; then
        fail "$label: no 'listening on' line: $(cat "$tmp/$label.err")"
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        return
    fi
    if exec 3<>"/dev/tcp/127.0.0.1/$port"; then
        printf 'installed %s\n' "$label" >&3
        read -r -t "$WAIT_S" line <&3
        exec 3<&-
    fi
    [ "$line" = "installed $label" ] || fail "$label: sent 'installed $label', got '$line'"
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    [ "$rc" -eq 0 ] || fail "$label: exit $rc after SIGTERM: $(cat "$tmp/$label.err")"
}

# shellcheck disable=SC2086 # pkg-config's output is a list of flags
if $CC -O1 -o "$tmp/echo-shared" examples/proactor_echo.c $flags 2>"$tmp/cc-shared.log"; then
    libs=$(LD_LIBRARY_PATH=$root$PREFIX/lib64 ldd "$tmp/echo-shared")
    grep -q "libcabrank.so.* => $root$PREFIX/lib64/" <<<"$libs" ||
        fail "shared: not linked to the installed libcabrank.so: $libs"
    run_echo shared "$tmp/echo-shared" LD_LIBRARY_PATH="$root$PREFIX/lib64"
else
    fail "shared: cc examples/proactor_echo.c $flags:"
    sed 's/^/    /' "$tmp/cc-shared.log"
fi

# shellcheck disable=SC2086
if $CC -O1 -static -o "$tmp/echo-static" examples/proactor_echo.c $static_flags \
    2>"$tmp/cc-static.log"; then
    run_echo static "$tmp/echo-static"
else
    fail "static: cc -static examples/proactor_echo.c $static_flags:"
    grep -v 'statically linked applications requires at runtime' "$tmp/cc-static.log" |
        head -n 20 | sed 's/^/    /'
fi

[ "$bad" -eq 0 ] && echo "install: ok ($PREFIX through pkg-config, shared and static)"
exit "$bad"
