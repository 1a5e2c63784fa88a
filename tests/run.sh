#!/usr/bin/env bash
# run.sh - the whole test suite, run by `make test` after everything is built:
# format check, the layout rules (tests/layout.sh), the installed library
# through pkg-config (tests/install.sh), unit tests (plain, ASan+UBSan, TSan),
# every integration
# program under each variant, each under a timeout, then each fuzz target over
# its corpus fuzz/corpus/<target>/ (one pass per target). Ends with a
# `failed:` line for each failing test (a unit test by file:line, tcase and
# name) with the log to read, then one line `tests: N passed, N failed[,
# N skipped]` over everything, and fails if anything failed. Skipped counts
# what could not run here (io_uring refused, a backend missing: the unit
# runner's cr_test_skip list; an integration program exiting 77).
# `tests/run.sh unit` (make test-unit) runs the unit tests only.
set -u
cd "$(dirname "$0")/.."
B=${BUILD:-build}
only=${1:-all}

passed=0
failed=0
skipped=0
failures=()

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# die_after_fork=0: the process models (forking, prefork) fork from a
# multithreaded master, and a child that starts threads of its own (a
# service's process_init, a worker's thread pool) would otherwise make TSan
# exit; the child runs only the forking thread's copy until then.
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:die_after_fork=0:suppressions=$PWD/tests/tsan.supp"

# TSan's shadow layout does not fit every ASLR setting of recent kernels;
# without randomization it always does.
NORAND=()
if setarch "$(uname -m)" -R true 2>/dev/null; then
    NORAND=(setarch "$(uname -m)" -R)
fi

# The three unit variants run at once, each into its own log, printed in
# order when all are done: most of their time is spent waiting (sockets,
# sleeps, child processes), so on 2 cores this takes the slowest variant's
# time rather than the sum. Every test tolerates a loaded machine (waits that
# expect an event scale with CK_TIMEOUT_MULTIPLIER).
# A test without a timeout of its own gets CK_DEFAULT_TIMEOUT times the
# runner's multiplier: Check's default 4 s (12 s under ASan) was too short
# for a pure-compute test's fork, run and LeakSanitizer exit at load 16-18
# on 2 cores. The timeout is there to catch a hang, which a longer one
# catches too.
export CK_DEFAULT_TIMEOUT=15
# A runner's log and counts: $dir/unit-tests.<label, letters and digits>.*
unit_file() { # label dir suffix
    local tag=${1//[^a-z0-9]/-}
    echo "$2/unit-tests.$tag.$3"
}

unit_start() { # label variant dir [env...]
    local label=$1 variant=$2 dir=$3
    shift 3
    local wrap=() counts
    counts=$(unit_file "$label" "$dir" counts)
    [ "$variant" = tsan ] && wrap=("${NORAND[@]}")
    : >"$counts"
    env "$@" CR_TEST_COUNTS="$counts" "${wrap[@]}" "$dir/unit-tests" \
        >"$(unit_file "$label" "$dir" log)" 2>&1 &
    unit_pids+=($!)
}

# Each failing unit test by name, from Check's failure lines in the log
# (file:line:F|E:tcase:test:iteration: message), and the log to read.
unit_failures() { # label log
    local label=$1 log=$2 line n=0
    while IFS= read -r line; do
        failures+=("unit test ($label) ${line%%: *}: ${line#*: } (log: $log)")
        n=$((n + 1))
    done < <(grep -E '^[^ :]+:[0-9]+:[EF]:[^:]+:[^:]+:[0-9]+: ' "$log" | cut -c 1-300)
    [ "$n" -eq 0 ] && failures+=("unit tests ($label): the runner failed (log: $log)")
}

unit_finish() { # label dir pid
    local label=$1 dir=$2 pid=$3 rc p f s log
    wait "$pid"
    rc=$?
    log=$(unit_file "$label" "$dir" log)
    echo
    echo "== unit tests ($label)"
    cat "$log"
    if read -r p f s <"$(unit_file "$label" "$dir" counts)" 2>/dev/null; then :; else p=0 f=1 s=0; fi
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + ${s:-0}))
    [ "$f" -ne 0 ] && unit_failures "$label" "$log"
}

integration() { # variant dir
    local variant=$1 dir=$2 prog name rc start
    echo
    echo "== integration ($variant)"
    for prog in "$dir"/integration/*; do
        [ -x "$prog" ] || continue
        name=${prog##*/}
        start=${EPOCHREALTIME/./}
        local wrap=() limit=60
        [ "$variant" = tsan ] && wrap=("${NORAND[@]}") && limit=120
        CR_BUILD_DIR=$dir "${wrap[@]}" timeout -k 5 $limit "$prog" >"$dir/integration/$name.log" 2>&1
        rc=$?
        local secs=$(((${EPOCHREALTIME/./} - start) / 100000))
        secs="$((secs / 10)).$((secs % 10))"
        case $rc in
        0) passed=$((passed + 1)); echo "PASS $name (${secs}s)" ;;
        77) skipped=$((skipped + 1)); echo "SKIP $name: $(tail -n 1 "$dir/integration/$name.log")" ;;
        *)
            failed=$((failed + 1))
            failures+=("$name ($variant) (log: $dir/integration/$name.log)")
            echo "FAIL $name (exit $rc, ${secs}s); its log:"
            tail -n 40 "$dir/integration/$name.log" | sed 's/^/    /'
            ;;
        esac
    done
}

# Each built fuzz target ($B/fuzz/<target>, libFuzzer + ASan + UBSan) runs every
# file of fuzz/corpus/<target>/ once: libFuzzer runs files given as arguments
# once and exits (a directory would start fuzzing). Batches keep the argument
# list short; a crash, sanitizer report or timeout fails the target.
fuzz_replay() { # dir
    local dir=$1 bin name corpus log rc n start secs
    echo
    echo "== fuzz corpus replay"
    for bin in "$dir"/fuzz/*; do
        [ -f "$bin" ] && [ -x "$bin" ] || continue
        name=${bin##*/}
        corpus=fuzz/corpus/$name
        log=$dir/fuzz/$name.replay.log
        if [ ! -d "$corpus" ]; then
            failed=$((failed + 1))
            failures+=("fuzz replay $name: no $corpus/")
            echo "FAIL $name: no $corpus/"
            continue
        fi
        n=$(find "$corpus" -maxdepth 1 -type f | wc -l)
        start=${EPOCHREALTIME/./}
        find "$corpus" -maxdepth 1 -type f -print0 | sort -z |
            xargs -0 -n 500 timeout -k 5 120 "$bin" -artifact_prefix="$dir/fuzz/$name-" >"$log" 2>&1
        rc=$?
        secs=$(((${EPOCHREALTIME/./} - start) / 100000))
        secs="$((secs / 10)).$((secs % 10))"
        if [ "$rc" -eq 0 ]; then
            passed=$((passed + 1))
            echo "PASS $name ($n inputs, ${secs}s)"
        else
            failed=$((failed + 1))
            failures+=("fuzz replay $name (log: $log)")
            # The input it failed on (the last one started), then the report.
            echo "FAIL $name (exit $rc, ${secs}s): $(grep '^Running: ' "$log" | tail -n 1)"
            sed -n '/^Running: /h; /^Running: /!H; ${x; p}' "$log" | grep -v '^Running: ' |
                grep -v '^Executed ' | head -n 40 | sed 's/^/    /'
        fi
    done
}

if [ "$only" = all ]; then
echo "== format check"
if make -s --no-print-directory BUILD="$B" format-check; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    failures+=("format check (run: make format)")
fi

# The peers bench needs ../shared and the peers; its report, from CSVs, does not.
echo
echo "== bench report (bench/httpd_vs_peers.sh --report)"
hvp=tests/data/httpd_vs_peers
if bench/httpd_vs_peers.sh --report "$hvp/run-1.csv" "$hvp/run-2.csv" | diff -u "$hvp/expected.md" -; then
    passed=$((passed + 1))
    echo "PASS httpd_vs_peers report"
else
    failed=$((failed + 1))
    failures+=("bench/httpd_vs_peers.sh --report (expected: $hvp/expected.md)")
fi

# The structure rules: layers, no test code shipped, file length, the map.
echo
echo "== layout (tests/layout.sh)"
if tests/layout.sh; then
    passed=$((passed + 1))
    echo "PASS layout"
else
    failed=$((failed + 1))
    failures+=("layout (tests/layout.sh)")
fi

# `make install` into a scratch DESTDIR, and an example built and run against it.
echo
echo "== install (tests/install.sh)"
if BUILD=$B tests/install.sh >"$B/install.log" 2>&1; then
    passed=$((passed + 1))
    echo "PASS $(tail -n 1 "$B/install.log")"
else
    failed=$((failed + 1))
    failures+=("install (tests/install.sh; log: $B/install.log)")
    echo "FAIL install; its log ($B/install.log):"
    tail -n 40 "$B/install.log" | sed 's/^/    /'
fi
fi

# ASan's runner is the longest (timings: docs/design/tests.md), so two
# runners share its suites through a queue file (CR_TEST_QUEUE, runner.c),
# each taking the next suite as it gets free:
# the machine is half idle while the runners wait.
asan_queue=$(unit_file asan "$B/asan" queue)
: >"$asan_queue"
unit_pids=()
unit_start release release "$B" CK_TIMEOUT_MULTIPLIER=2
unit_start "asan 1/2" asan "$B/asan" CK_TIMEOUT_MULTIPLIER=3 CR_TEST_QUEUE="$asan_queue"
unit_start "asan 2/2" asan "$B/asan" CK_TIMEOUT_MULTIPLIER=3 CR_TEST_QUEUE="$asan_queue"
unit_start tsan tsan "$B/tsan" CK_TIMEOUT_MULTIPLIER=10
unit_finish release "$B" "${unit_pids[0]}"
unit_finish "asan 1/2" "$B/asan" "${unit_pids[1]}"
unit_finish "asan 2/2" "$B/asan" "${unit_pids[2]}"
unit_finish tsan "$B/tsan" "${unit_pids[3]}"
if [ "$only" = all ]; then
    integration release "$B"
    integration asan "$B/asan"
    integration tsan "$B/tsan"
    fuzz_replay "$B"
fi

echo
for f in "${failures[@]}"; do echo "failed: $f"; done
if [ "$skipped" -gt 0 ]; then
    echo "tests: $passed passed, $failed failed, $skipped skipped"
else
    echo "tests: $passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
