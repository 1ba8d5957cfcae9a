#!/usr/bin/env bash
# make asan-check: train_gpt and prepare built with AddressSanitizer and
# UndefinedBehaviorSanitizer (make asan, build/asan/) through each mode on a
# tiny model: ./prepare on a small text (two threads), a train with
# evaluations, samples and saves, its resume, a TP=2 train through
# scripts/launch.sh, --eval and --sample. A stage fails when it exits
# non-zero or its output holds a sanitizer report (leaks included); the
# script ends non-zero naming the stages that failed.
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 1
bin=build/asan/train_gpt
prep=build/asan/prepare
for b in "$bin" "$prep"; do [ -x "$b" ] || { echo "asan-check: $b is missing (make asan)" >&2; exit 1; }; done
tmp="$(mktemp -d "${TMPDIR:-/tmp}/asan_check.XXXXXX")"
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:exitcode=86"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=86"
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive
failed=()

# stage NAME CMD...: runs CMD with its output in $tmp/NAME.log
stage() {
    local name="$1"; shift
    local t0=$SECONDS
    "$@" >"$tmp/$name.log" 2>&1
    local rc=$?
    if [ "$rc" -ne 0 ] || grep -qE "Sanitizer|runtime error:" "$tmp/$name.log"; then
        echo "not ok $name - exit status $rc (log: $tmp/$name.log)"
        grep -m 5 -E "Sanitizer|runtime error:|error:" "$tmp/$name.log"
        failed+=("$name")
    else
        echo "ok $name ($((SECONDS - t0)) s)"
    fi
}

# a small text of KJV-like words: a few thousand tokens
words=(in the beginning god created heaven and earth was without form void darkness upon face of deep spirit moved
       waters said let there be light saw that it good divided from)
text=""
for ((i = 0; i < 3000; i++)); do text+="${words[i * 7 % ${#words[@]}]} "; [ $((i % 40)) = 39 ] && text+=$'\n'; done
printf '%s' "$text" >"$tmp/text.txt"
mkdir -p "$tmp/data"
stage prepare "$prep" --input "$tmp/text.txt" --out "$tmp/data/tiny" --val-tokens 600 --threads 2 --batch-docs 1

cat >"$tmp/cfg.json" <<JSON
{"model": {"n_layer": 2, "n_head": 4, "n_embd": 32, "vocab_size": 50257, "seq_len": 16},
 "train": {"micro_batch": 2, "global_batch": 4, "steps": 4, "lr": 3e-3, "warmup": 1},
 "data": {"train": "$tmp/data/tiny_train_*.bin", "val": "$tmp/data/tiny_val_*.bin", "vocab_dir": "assets/vocab"},
 "out": {"dir": "$tmp/run", "eval_every": 2, "eval_batches": 2, "save_every": 2, "sample_every": 2,
         "sample_tokens": 8, "log_every": 1}}
JSON
stage train "$bin" --config "$tmp/cfg.json"
stage resume "$bin" --config "$tmp/cfg.json" --set train.steps=6
stage train_tp2 scripts/launch.sh -n 2 --log-dir "$tmp/launch" -- "$bin" --config "$tmp/cfg.json" \
    --set parallel.tp=2 --set out.dir="$tmp/run_tp2" --set train.steps=2 --set out.sample_tokens=0
stage eval "$bin" --config "$tmp/cfg.json" --eval
stage sample "$bin" --config "$tmp/cfg.json" --sample --prompt "In the beginning" --max-tokens 8
if [ "${#failed[@]}" -gt 0 ]; then
    echo "asan-check: ${#failed[@]} stage(s) failed: ${failed[*]} (logs in $tmp)"
    exit 1
fi
rm -rf "$tmp"
echo "asan-check: every stage ran clean under ASan and UBSan"
