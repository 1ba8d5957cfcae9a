#!/usr/bin/env bash
# Runs every test of the suite and prints a closing line "N passed, N failed".
# Each test script (tests/t_*.sh, tests/t_*.py) and the C test binary report one
# line per check: "ok <name>" or "not ok <name> - <reason>". A script that exits
# non-zero without reporting a failure counts as one failed check, so a crash
# can never pass silently.
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export TG_ROOT="$root"
export TG_TMP="${TG_TMP:-$(mktemp -d /tmp/train_gpt_tests.XXXXXX)}"
pass=0
fail=0
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
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
