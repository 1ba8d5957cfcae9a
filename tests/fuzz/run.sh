#!/usr/bin/env bash
# Runs the libFuzzer harnesses built by `make fuzz-build` (build/fuzz/fuzz_*).
#   tests/fuzz/run.sh replay          every committed seed once through its harness
#   tests/fuzz/run.sh fuzz [SECONDS]  each harness for SECONDS (FUZZ_SECONDS, default 60)
#                                     from a scratch copy of its seed corpus
# FUZZ_HARNESSES="config shards" limits the run; FUZZ_JOBS harnesses fuzz at
# once (default: the processors, nproc; each is one process of its own, so
# the run takes SECONDS per round of FUZZ_JOBS). Prints "ok fuzz_NAME" or
# "not ok fuzz_NAME - reason" per harness; exits 1 if any failed. A crash's
# input is kept as build/fuzz/artifacts/NAME/crash-* (add it to the corpus
# tests/fuzz/NAME/ as a regression seed once the bug is understood).
set -u
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
mode="${1:-replay}"
seconds="${2:-${FUZZ_SECONDS:-60}}"
harnesses="${FUZZ_HARNESSES:-config shards safetensors state hf_config tokenizer hellaswag}"
case "$mode" in replay|fuzz) ;; *) echo "usage: $0 replay | fuzz [SECONDS]" >&2; exit 2 ;; esac
scratch="$(mktemp -d "${TMPDIR:-/tmp}/tg_fuzz_run.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
# The harnesses' own scratch directories go in here too: a crash skips
# their cleanup.
export TMPDIR="$scratch"
# Leaks count as findings; UBSan stops at the first report (built with
# -fno-sanitize-recover), with a stack.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# The first line of a sanitizer's or the harness's report in a log.
reason_of() {
    grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|property violated' "$1"
}

# Each seed in its own process, so one crashing seed does not hide the next.
replay_one() {
    local h="$1" bin="$2" seeds="$3" n=0 bad=0 seed log="$scratch/$1.log"
    for seed in "$seeds"/*; do
        n=$((n + 1))
        if ! "$bin" -timeout=10 -rss_limit_mb=2048 "$seed" >"$log" 2>&1; then
            bad=$((bad + 1))
            echo "not ok fuzz_$h - $seed: $(reason_of "$log" || echo "exit status non-zero")"
            grep -m3 -E '^    #[0-9]+ .* in ' "$log" | sed 's/^ */      /'
        fi
    done
    [ "$bad" -eq 0 ] && echo "ok fuzz_$h (replay, $n seeds)"
    [ "$bad" -eq 0 ]
}

# libFuzzer writes new inputs into the first corpus directory: a scratch copy.
fuzz_one() {
    local h="$1" bin="$2" seeds="$3" t0=$SECONDS log="$scratch/$1.log" runs
    cp -r "$seeds" "$scratch/corpus_$h"
    if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
        -artifact_prefix="build/fuzz/artifacts/$h/" "$scratch/corpus_$h" >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
        echo "ok fuzz_$h (fuzz, $((SECONDS - t0))s${runs:+, $runs runs})"
        return 0
    fi
    echo "not ok fuzz_$h - after $((SECONDS - t0))s: $(reason_of "$log" || echo "exit status non-zero")"
    grep -E 'Test unit written to|SUMMARY:' "$log" | head -n 5 | sed 's/^/    /'
    echo "---- fuzz_$h log (last 30 lines) ----"
    tail -n 30 "$log"
    return 1
}

jobs="${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}"
case "$jobs" in ''|*[!0-9]*|0) echo "$0: FUZZ_JOBS=$jobs: not a positive whole number" >&2; exit 2 ;; esac
failed=0
running=0
fuzzed=()
for h in $harnesses; do
    bin="build/fuzz/fuzz_$h" seeds="tests/fuzz/$h"
    if [ ! -x "$bin" ] || [ ! -d "$seeds" ]; then
        echo "not ok fuzz_$h - $bin or $seeds is missing (make fuzz-build)"
        failed=1
        continue
    fi
    mkdir -p "build/fuzz/artifacts/$h"
    if [ "$mode" = replay ]; then replay_one "$h" "$bin" "$seeds" || failed=1; continue; fi
    # fuzz: in the background, its lines kept for the report in harness order below
    if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
    (fuzz_one "$h" "$bin" "$seeds" >"$scratch/$h.report" 2>&1; echo $? >"$scratch/$h.rc") &
    running=$((running + 1))
    fuzzed+=("$h")
done
wait
for h in "${fuzzed[@]}"; do
    cat "$scratch/$h.report"
    [ "$(cat "$scratch/$h.rc" 2>/dev/null)" = 0 ] || failed=1
done
exit "$failed"
