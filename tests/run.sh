#!/usr/bin/env bash
# Runs every test of the suite and prints a closing line "N passed, N failed".
# Each test script (tests/t_*.sh, tests/t_*.py) and the C test binary report one
# line per check: "ok <name>" or "not ok <name> - <reason>". A script that exits
# non-zero without reporting a failure counts as one failed check, so a crash
# can never pass silently. The failed checks are listed again, with each
# failing suite's log, just before the closing line: a CI log that keeps only
# its last lines still says what failed.
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export TG_ROOT="$root"
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
pass=0
fail=0
failed_lines=()
only="${1:-}"

run_one() {
    local name="$1"; shift
    local log="$TG_TMP/$name.log"
    local t0=$SECONDS
    "$@" >"$log" 2>&1
    local rc=$?
    local p f
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
    grep -E '^(ok|not ok) ' "$log" | sed "s/^/[$name] /"
    if [ "$f" -gt 0 ]; then
        echo "---- $name output (last 40 lines) ----"
        tail -n 40 "$log"
        local line
        while IFS= read -r line; do failed_lines+=("[$name] ${line:0:300} (log: $log)"); done \
            < <(grep -E '^not ok ' "$log" | head -n 5)
    fi
    echo "[$name] $p passed, $f failed in $((SECONDS - t0))s"
    pass=$((pass + p))
    fail=$((fail + f))
}

for t in build/test_kernels build/test_zero_shards tests/t_*.sh tests/t_*.py; do
    [ -e "$t" ] || continue
    name="$(basename "$t")"
    name="${name%.*}"
    [ -n "$only" ] && [[ "$name" != *"$only"* ]] && continue
    case "$t" in
        *.py) run_one "$name" /usr/bin/python3 "$t" ;;
        *.sh) run_one "$name" bash "$t" ;;
        *) run_one "$name" "$t" ;;
    esac
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
