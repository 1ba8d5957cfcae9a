#!/usr/bin/env bash
# Writes that fail end the run with a message, never silently:
# log.jsonl past the file-size limit (ulimit -f: writes fail with EFBIG once
# SIGXFSZ is ignored) ends the run non-zero naming log.jsonl and the step,
# and leaves only whole lines; stdout on /dev/full ends training and --eval
# non-zero naming stdout, and rank 1's logs/rank_1.out on /dev/full ends a
# TP=2 run naming that file; a checkpoint save past the limit names its file and
# leaves the earlier checkpoint as it was; ./prepare past the limit names its
# shard. And the clear endings: --hellaswag DIR, --export-llmc "", and JSON
# nested deeper than cJSON's limit (a config, a checkpoint's state.json).
# tier: check (make check: the quick tier, tests/run.sh --check)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" log_writes
export OMP_NUM_THREADS=1
prep="${PREPARE:-./prepare}"
if ! "$py" -c 'import numpy' 2>/dev/null; then not_ok prerequisites "python3-numpy is missing"; exit 1; fi
random_shards "$tmp/data" 300 7 4000 800
cfg="$tmp/cfg.json"
cat >"$cfg" <<JSON
{"model": {"n_layer": 1, "n_head": 4, "n_embd": 32, "vocab_size": 300, "seq_len": 12},
 "train": {"micro_batch": 2, "global_batch": 4, "steps": 2, "lr": 3e-3, "warmup": 1},
 "data": {"train": "$tmp/data/train_*.bin", "val": "$tmp/data/val_*.bin", "vocab_dir": "$tmp/no_such_vocab"},
 "out": {"dir": "$tmp/unused", "eval_every": 0, "eval_batches": 2, "sample_tokens": 0, "log_every": 1}}
JSON
tg() { timeout -k 5 120 "$bin" --config "$cfg" "$@"; }
oneline() { tail -n 3 "$1" 2>/dev/null | tr '\n' ' ' | cut -c1-300; }
# whole_lines FILE: every line of FILE is a JSON object and the file ends in a newline
whole_lines() {
    "$py" - "$1" <<'PY'
import json, sys
data = open(sys.argv[1], "rb").read()
assert data.endswith(b"\n"), f"ends in {data[-40:]!r}"
for i, line in enumerate(data.splitlines(), 1):
    assert isinstance(json.loads(line), dict), f"line {i}"
print(len(data.splitlines()))
PY
}
listing() { (cd "$1" && find . | sort && find . -type f -print0 | sort -z | xargs -0 -r sha256sum); }

# ---- log.jsonl past the file-size limit --------------------------------------
# 4 KiB hold the budget line and a few train lines; stdout goes to a device
# (no size limit) so that log.jsonl is the file that fills.
d="$tmp/log_full"
(ulimit -f 4; tg --set out.dir="$d" --set train.steps=60 --set out.save_final=false >/dev/null 2>"$d.err")
rc=$?
if [ "$rc" = 1 ]; then ok "log_full_exits_1"; else not_ok log_full_exits_1 "exit status $rc: $(oneline "$d.err")"; fi
if grep -qE "log\.jsonl: step [0-9]+: cannot write a line: File too large" "$d.err"; then
    ok "log_full_names_log_and_step ($(grep -oE 'step [0-9]+' "$d.err" | head -n 1))"
else not_ok log_full_names_log_and_step "stderr: $(oneline "$d.err")"; fi
if n=$(whole_lines "$d/log.jsonl" 2>&1); then ok "log_full_leaves_whole_lines ($n lines, $(stat -c %s "$d/log.jsonl") bytes)"
else not_ok log_full_leaves_whole_lines "$(echo "$n" | tail -n 1)"; fi
# the run stopped at the first line it could not write: no later step is logged
last=$(grep -oE '"step":[0-9]+' "$d/log.jsonl" | tail -n 1 | grep -oE '[0-9]+$')
failed_step=$(grep -oE 'step [0-9]+' "$d.err" | head -n 1 | grep -oE '[0-9]+$')
if [ -n "$failed_step" ] && [ -n "$last" ] && [ "$last" -lt "$failed_step" ] && [ "$failed_step" -lt 60 ]; then
    ok "log_full_stops_at_the_failed_step (last logged $last, failed $failed_step)"
else not_ok log_full_stops_at_the_failed_step "last logged '$last', failed '$failed_step'"; fi

# ---- stdout on a full device -------------------------------------------------
d="$tmp/stdout_full"
tg --set out.dir="$d" >/dev/full 2>"$d.err"
rc=$?
if [ "$rc" = 1 ] && grep -q "stdout: cannot write" "$d.err"; then ok stdout_full_ends_training
else not_ok stdout_full_ends_training "exit status $rc: $(oneline "$d.err")"; fi
tg --set out.dir="$d" --eval >/dev/full 2>"$d.eval.err"
rc=$?
if [ "$rc" = 1 ] && grep -q "stdout: cannot write" "$d.eval.err"; then ok stdout_full_ends_eval
else not_ok stdout_full_ends_eval "exit status $rc: $(oneline "$d.eval.err")"; fi

# rank 1 of a TP=2 run writes its output to out.dir/logs/rank_1.out: here a
# link to /dev/full (the launcher prints the last lines of a failed rank's log)
d="$tmp/rank_full"
mkdir -p "$d/logs" && ln -s /dev/full "$d/logs/rank_1.out"
timeout -k 5 120 scripts/launch.sh -n 2 --log-dir "$tmp/rank_full_launch" -- "$bin" --config "$cfg" \
    --set parallel.tp=2 --set out.dir="$d" >"$d.out" 2>&1
rc=$?
if [ "$rc" = 1 ] && grep -q "$d/logs/rank_1.out: cannot write" "$d.out"; then ok rank_log_full_ends_the_run
else not_ok rank_log_full_ends_the_run "exit status $rc: $(oneline "$d.out")"; fi

# ---- a checkpoint save past the file-size limit ------------------------------
# step 2 is saved without a limit; the resumed run's save of step 4 cannot
# hold its model (about 90 KiB) in 40 KiB.
d="$tmp/ckpt_full"
tg --set out.dir="$d" >"$d.out" 2>&1
listing "$d/step_00000002" >"$tmp/ckpt_before" 2>&1
(ulimit -f 40; tg --set out.dir="$d" --set train.steps=4 >"$d.out2" 2>"$d.err")
rc=$?
listing "$d/step_00000002" >"$tmp/ckpt_after" 2>&1
if [ "$rc" = 1 ] && grep -qE "$d/step_00000004[^ ]*/[a-z_.]+.*File too large" "$d.err"; then
    ok "ckpt_full_names_the_file ($(grep -oE 'step_00000004[^ :]*/[a-z_.]+' "$d.err" | head -n 1))"
else not_ok ckpt_full_names_the_file "exit status $rc: $(oneline "$d.err")"; fi
# the message above, and the checkpoint before it as it was (no step 4)
if grep -q "File too large" "$d.err" && [ -s "$tmp/ckpt_before" ] && grep -q model.safetensors "$tmp/ckpt_before" &&
    cmp -s "$tmp/ckpt_before" "$tmp/ckpt_after" && [ ! -e "$d/step_00000004" ]; then
    ok ckpt_full_ends_cleanly_earlier_checkpoint_intact
else not_ok ckpt_full_ends_cleanly_earlier_checkpoint_intact "$(oneline "$d.out"; diff "$tmp/ckpt_before" "$tmp/ckpt_after" | head -n 2 | tr '\n' ' '; ls "$d" | tr '\n' ' ')"; fi

# ---- ./prepare past the file-size limit --------------------------------------
"$py" -c '
import random, sys
r = random.Random(3); w = ["the", "lord", "said", "unto", "moses", "and", "it", "came", "to", "pass"]
sys.stdout.write(" ".join(r.choice(w) for _ in range(40000)))' >"$tmp/text.txt"
mkdir -p "$tmp/prep"
(ulimit -f 16; timeout -k 5 120 "$prep" --input "$tmp/text.txt" --out "$tmp/prep/kjv" --val-tokens 1000 --threads 1 \
    >"$tmp/prep.out" 2>"$tmp/prep.err")
rc=$?
if [ "$rc" = 1 ] && grep -qE "$tmp/prep/kjv_train_000000\.bin[^ ]*: File too large" "$tmp/prep.err"; then
    ok prepare_full_names_the_shard
else not_ok prepare_full_names_the_shard "exit status $rc: $(oneline "$tmp/prep.err")"; fi

# ---- clear endings -----------------------------------------------------------
hs=(--set model.vocab_size=50257 --set data.vocab_dir=assets/vocab --set train.micro_batch=4 --set out.dir="$tmp/hs")
tg --hellaswag "$tmp/data" "${hs[@]}" >"$tmp/hs.out" 2>&1
rc=$?
if [ "$rc" != 0 ] && grep -q "$tmp/data: is a directory, not a HellaSwag JSONL file" "$tmp/hs.out"; then
    ok hellaswag_directory_says_so
else not_ok hellaswag_directory_says_so "exit status $rc: $(oneline "$tmp/hs.out")"; fi
tg --export-llmc "" >"$tmp/export.out" 2>&1
rc=$?
if [ "$rc" != 0 ] && grep -q "export-llmc: the path is empty" "$tmp/export.out"; then ok export_llmc_empty_path
else not_ok export_llmc_empty_path "exit status $rc: $(oneline "$tmp/export.out")"; fi
# an object holding 1000 nested arrays: 1001 levels, one more than cJSON's
# CJSON_NESTING_LIMIT; one array less is at the limit
deep=$("$py" -c 'print("[" * 1000 + "]" * 1000)')
echo "{\"model\": $deep}" >"$tmp/deep.json"
timeout 60 "$bin" --config "$tmp/deep.json" >"$tmp/deep.out" 2>&1
rc=$?
echo "{\"model\": ${deep:1:-1}}" >"$tmp/deep_ok.json" # at the limit: read, then refused as a value
timeout 60 "$bin" --config "$tmp/deep_ok.json" >"$tmp/deep_ok.out" 2>&1
if [ "$rc" != 0 ] && grep -q "$tmp/deep.json: JSON nested deeper than 1000 levels" "$tmp/deep.out" &&
    ! grep -q "nested deeper" "$tmp/deep_ok.out" && grep -q "deep_ok.json: 'model'" "$tmp/deep_ok.out"; then
    ok config_too_deep_and_not_at_the_limit
else not_ok config_too_deep_and_not_at_the_limit "exit status $rc: $(oneline "$tmp/deep.out") | $(oneline "$tmp/deep_ok.out")"; fi
d="$tmp/deep_state"
mkdir -p "$d" && cp -r "$tmp/ckpt_full/step_00000002" "$d/" && echo "{\"step\": $deep}" >"$d/step_00000002/state.json"
tg --set out.dir="$d" --set train.steps=4 >"$d.out" 2>&1
rc=$?
if [ "$rc" != 0 ] && grep -q "step_00000002/state.json: JSON nested deeper than 1000 levels" "$d.out"; then
    ok state_json_too_deep
else not_ok state_json_too_deep "exit status $rc: $(oneline "$d.out")"; fi
exit "$failed"
