#!/usr/bin/env bash
# Runs every test of the suite and prints a closing line "N passed, N failed".
# Each test script (tests/t_*.sh, tests/t_*.py) and the C test binary report one
# line per check: "ok <name>" or "not ok <name> - <reason>". A script that exits
# non-zero without reporting a failure counts as one failed check, so a crash
# can never pass silently. The failed checks are listed again, with each
# failing suite's log, just before the closing line: a CI log that keeps only
# its last lines still says what failed.
#   tests/run.sh [--check | --sanitizers] [NAME]
# Without an option: every suite but those marked "# tier: sanitizers" (make
# test). --check runs only the quick tier (make check): the C test binaries
# and the suites marked "# tier: check". --sanitizers runs only the suites
# marked "# tier: sanitizers" (make test-sanitizers, which CI runs after make
# test). NAME runs the suites whose name contains it.
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export TG_ROOT="$root"
# How many suites run at once (below, before the runner makes its scratch).
jobs="${TG_TEST_JOBS:-2}"
case "$jobs" in ''|*[!0-9]*|0) echo "tests/run.sh: TG_TEST_JOBS=$jobs: not a positive whole number" >&2; exit 2 ;; esac
# The suites' scratch (about 1.3 GB a full run): removed at the end when
# every check passed and this script made it; kept, and named, when one
# failed (the failures' logs are there). A TG_TMP given is left alone.
if [ -n "${TG_TMP:-}" ]; then
    own_tmp=0
else
    own_tmp=1
    TG_TMP="$(mktemp -d "${TMPDIR:-/tmp}/train_gpt_tests.XXXXXX")"
fi
export TG_TMP
# python3 on PATH may be a version manager's shim (pyenv's is a shell script
# that runs a dozen more before Python: about 0.4 s of a core a call, against
# 0.03 s, and the suites call it often). They get the interpreter it
# resolves to, put first on PATH: the same Python, without the shim.
if py_real=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) && [ -x "$py_real" ] &&
    [ "$(command -v python3)" != "$py_real" ]; then
    mkdir -p "$TG_TMP/.python" && ln -sf "$py_real" "$TG_TMP/.python/python3"
    export PATH="$TG_TMP/.python:$PATH"
fi
tier=test
case "${1:-}" in
    --check) tier=check; shift ;;
    --sanitizers) tier=sanitizers; shift ;;
esac
only="${1:-}"
# The tier a suite is marked with ("# tier: NAME"; the C binaries, a second
# each, are in the quick tier; unmarked: test).
tier_of() {
    case "$1" in build/*) echo check; return ;; esac
    local t
    t=$(sed -nE 's/^# tier: ([a-z]+).*/\1/p' "$1" | head -n 1)
    echo "${t:-test}"
}
# Whether the chosen tier runs a suite of tier $1: make test runs all but the sanitizers'.
tier_runs() { case "$tier" in test) [ "$1" != sanitizers ] ;; *) [ "$1" = "$tier" ] ;; esac; }
# The suites run TG_TEST_JOBS at a time (default 2: CI's cores). Each
# worker takes the next suite off one list, longest first: a suite's
# "# cost: N" (about its processor seconds in a CI run; unmarked: 0, the
# C binaries too), ties in name order. So the long suites start at once and
# the short ones keep both cores busy to the end, whatever the mix (fixed
# lanes left one core idle for minutes when one lane ran long). The suites
# that run the CUDA emulation each ask tests/emu/build.sh for it, whose lock
# makes the second wait for the first's build. TG_TEST_JOBS=1: in turn.
cost_of() {
    case "$1" in build/*) echo 0; return ;; esac
    local c
    c=$(sed -nE 's/^# cost: ([0-9]+).*/\1/p' "$1" | head -n 1)
    echo "${c:-0}"
}

# run_one NAME CMD...: runs one suite into NAME.log, prints its lines and its
# closing line as one block (under a lock: two workers never interleave a
# suite's lines), and leaves its counts in NAME.result and its first failed
# checks in NAME.failed, which the summary at the end adds up.
run_one() {
    local name="$1"; shift
    local log="$TG_TMP/$name.log" report="$TG_TMP/$name.report"
    local t0=$SECONDS
    # bash's time: the processor seconds of the suite and every process it
    # waited for (user + system), which, unlike the wall clock, the other
    # worker's load barely moves: what CI's budget is made of. In a subshell
    # of its own, whose only child is the suite: the worker's shell also
    # reaps the other workers, whose seconds would count here.
    ( TIMEFORMAT='%U %S'; time "$@" >"$log" 2>&1 ) 2>"$TG_TMP/$name.cpu"
    local rc=$?
    local p f cpu
    cpu=$(awk 'NF == 2 { printf "%.0f", $1 + $2 }' "$TG_TMP/$name.cpu")
    p=$(grep -c '^ok ' "$log")
    f=$(grep -c '^not ok ' "$log")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "not ok $name - exited with status $rc" >>"$log"
        f=1
    fi
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
        echo "not ok $name - reported no checks" >>"$log"
        f=1
    fi
    {
        grep -E '^(ok|not ok) ' "$log" | sed "s/^/[$name] /"
        if [ "$f" -gt 0 ]; then
            echo "---- $name output (last 40 lines) ----"
            tail -n 40 "$log"
        fi
        echo "[$name] $p passed, $f failed in $((SECONDS - t0))s (cpu ${cpu:-?}s)"
    } >"$report"
    grep -E '^not ok ' "$log" | head -n 5 | cut -c1-300 | sed "s|^|[$name] |; s|\$| (log: $log)|" >"$TG_TMP/$name.failed"
    echo "$p $f" >"$TG_TMP/$name.result"
    { flock 9; cat "$report"; } 9>"$TG_TMP/.print.lock"
}

run_suite() {
    local t="$1" name="$2"
    case "$t" in
        *.py) run_one "$name" /usr/bin/python3 "$t" ;;
        *.sh) run_one "$name" bash "$t" ;;
        *) run_one "$name" "$t" ;;
    esac
}

names=() listed=()
for t in build/test_kernels build/test_zero_shards tests/t_*.sh tests/t_*.py; do
    [ -e "$t" ] || continue
    name="$(basename "$t")"
    name="${name%.*}"
    [ -n "$only" ] && [[ "$name" != *"$only"* ]] && continue
    tier_runs "$(tier_of "$t")" || continue
    names+=("$name")
    rm -f "$TG_TMP/$name.result" "$TG_TMP/$name.failed"
    listed+=("$(cost_of "$t") $t")
done
# The run order: cost, highest first, then the listing's order (sort -s).
queue=()
[ ${#listed[@]} -gt 0 ] && mapfile -t queue < <(printf '%s\n' "${listed[@]}" | sort -s -k1,1nr | cut -d' ' -f2-)
echo 0 >"$TG_TMP/.next"
# take: the next index into queue, under the lock every worker takes it by.
take() { { flock 8; local i; read -r i <"$TG_TMP/.next"; echo $((i + 1)) >"$TG_TMP/.next"; echo "$i"; } 8>"$TG_TMP/.next.lock"; }
worker() {
    local i n
    while i=$(take) && [ "$i" -lt ${#queue[@]} ]; do
        n="$(basename "${queue[$i]}")"
        run_suite "${queue[$i]}" "${n%.*}"
    done
}
workers=()
for ((w = 1; w < jobs; w++)); do
    worker &
    workers+=($!)
done
worker
[ ${#workers[@]} -gt 0 ] && wait "${workers[@]}"

# The totals, from each suite's counts (a suite that left none failed).
pass=0 fail=0
failed_lines=()
for name in "${names[@]}"; do
    read -r p f 2>/dev/null <"$TG_TMP/$name.result" || { p=0; f=1; echo "[$name] not ok $name - left no result" >"$TG_TMP/$name.failed"; }
    pass=$((pass + p))
    fail=$((fail + f))
    [ "$f" -gt 0 ] && mapfile -t -O "${#failed_lines[@]}" failed_lines <"$TG_TMP/$name.failed"
done
if [ "$fail" -gt 0 ]; then
    echo "---- the failed checks (5 a suite at most) ----"
    printf '%s\n' "${failed_lines[@]}"
fi
if [ "$own_tmp" = 1 ]; then
    if [ "$fail" -eq 0 ]; then rm -rf "$TG_TMP"; else echo "the suites' logs and scratch stay in $TG_TMP"; fi
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
