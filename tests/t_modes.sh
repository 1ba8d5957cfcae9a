#!/usr/bin/env bash
# The modes that use a model without training it, the messages around the
# command line and the config, and what a run prints and logs:
# --eval prints the validation loss training logged for the same weights, at
# TP1 and TP2, and writes nothing; --sample gives the same text at TP1, TP2
# and TP2+SP for a seed (past seq_len too), greedy is temperature 0 and
# top-k 1, and it writes nothing; a run that prints no text needs no
# vocabulary; --set KEY VALUE and bad values name their origin; two modes are
# refused; an error after progress lines comes after them through a pipe;
# log.jsonl lines carry "time"; the banner's parameter counts equal the GPT-2
# formula.
# tier: check (make check: the quick tier, tests/run.sh --check)
# cost: 25 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" modes
export OMP_NUM_THREADS=1 # two ranks share two cores
if ! "$py" -c 'import numpy' 2>/dev/null; then not_ok prerequisites "python3-numpy is missing"; exit 1; fi
L=2 C=32 NH=4 V=300 T=12 B=2 G=4
random_shards "$tmp/data" "$V" 5 4000 800
cfg="$tmp/cfg.json"
cat >"$cfg" <<JSON
{"model": {"n_layer": $L, "n_head": $NH, "n_embd": $C, "vocab_size": $V, "seq_len": $T},
 "train": {"micro_batch": $B, "global_batch": $G, "steps": 3, "lr": 3e-3, "min_lr": 3e-4, "warmup": 1},
 "data": {"train": "$tmp/data/train_*.bin", "val": "$tmp/data/val_*.bin", "vocab_dir": "$tmp/no_such_vocab"},
 "out": {"dir": "$tmp/unused", "eval_every": 0, "eval_batches": 3, "sample_tokens": 0, "log_every": 1}}
JSON
tg() { timeout -k 5 120 "$bin" --config "$cfg" "$@"; }
launch2() { timeout -k 5 120 scripts/launch.sh -n 2 --log-dir "$tmp/launch_$1" -- "$bin" --config "$cfg" "${@:2}"; }
val_of() { sed -nE 's/^val loss ([0-9.]+).*/\1/p' "$1"; }
close() { "$py" -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-5 * abs(a))' "$1" "$2"; }
# the files under DIR with their hashes: "writes nothing" compares two of these
listing() { (cd "$1" && find . | sort && find . -type f -print0 | sort -z | xargs -0 -r sha256sum); }

# ---- a training run with data.vocab_dir pointing nowhere (no samples) -------
start=$(date +%s.%N)
if tg --set out.dir="$tmp/run" >"$tmp/train.out" 2>&1; then ok train_without_vocabulary
else not_ok train_without_vocabulary "$(tail -n 3 "$tmp/train.out" | tr '\n' ' ')"; fi
end=$(date +%s.%N)
trained=$(sed -nE 's/.*"val_loss":([-0-9.e]+).*/\1/p' "$tmp/run/log.jsonl")
ckpt="$tmp/run/step_00000003"

# ---- log.jsonl: every line has "time", Unix seconds with milliseconds -------
if out=$("$py" - "$tmp/run/log.jsonl" "$start" "$end" 2>&1 <<'PY'
import json, re, sys
path, start, end = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
lines = open(path).read().splitlines()
times = [json.loads(l).get("time") for l in lines]
assert len(lines) >= 5, f"{len(lines)} lines"
assert all(re.match(r'\{"time":\d+\.\d{3},', l) for l in lines), "a line does not begin with time to the millisecond"
assert all(start - 1 <= t <= end + 1 for t in times), f"times {times} outside the run [{start}, {end}]"
assert times == sorted(times), f"times go back: {times}"
print(f"{len(lines)} lines from {times[0]} to {times[-1]}")
PY
); then ok "log_lines_carry_time ($out)"; else not_ok log_lines_carry_time "$out"; fi

# ---- --eval: the loss training logged, at TP1 and TP2, writing nothing ------
v= v1= v2=
listing "$tmp/run" >"$tmp/run_before"
if tg --eval --set out.dir="$tmp/run" >"$tmp/eval_own.out" 2>&1 && v=$(val_of "$tmp/eval_own.out") && [ -n "$v" ] &&
    [ -n "$trained" ] && close "$trained" "$v"; then ok "eval_newest_checkpoint_equals_training ($v vs $trained)"
else not_ok eval_newest_checkpoint_equals_training "'$v' vs '$trained': $(tail -n 2 "$tmp/eval_own.out" | tr '\n' ' ')"; fi
listing "$tmp/run" >"$tmp/run_after"
if [ -n "$v" ] && cmp -s "$tmp/run_before" "$tmp/run_after"; then ok eval_leaves_out_dir_untouched
else not_ok eval_leaves_out_dir_untouched "$(diff "$tmp/run_before" "$tmp/run_after" | head -n 3 | tr '\n' ' ')"; fi
# sample_tokens 64 in an eval: it prints no text, so no vocabulary is read
if tg --eval --set model.init_from="$ckpt" --set out.dir="$tmp/eval_tp1" --set out.sample_tokens=64 \
    >"$tmp/eval_tp1.out" 2>&1 && v1=$(val_of "$tmp/eval_tp1.out") && close "$trained" "$v1"; then
    ok "eval_init_from_tp1 ($v1)"
else not_ok eval_init_from_tp1 "'$v1' vs '$trained': $(tail -n 2 "$tmp/eval_tp1.out" | tr '\n' ' ')"; fi
if launch2 eval --eval --set parallel.tp=2 --set model.init_from="$ckpt" --set out.dir="$tmp/eval_tp2" \
    >"$tmp/eval_tp2.out" 2>&1 && v2=$(val_of "$tmp/eval_tp2.out") && [ -n "$v1" ] && close "$v1" "$v2"; then
    ok "eval_tp2_equals_tp1 ($v2)"
else not_ok eval_tp2_equals_tp1 "'$v2' vs '$v1': $(tail -n 3 "$tmp/eval_tp2.out" | tr '\n' ' ')"; fi
if [ -n "$v1" ] && [ -n "$v2" ] && [ ! -e "$tmp/eval_tp1" ] && [ ! -e "$tmp/eval_tp2" ]; then ok eval_writes_no_out_dir
else not_ok eval_writes_no_out_dir "$(ls -d "$tmp"/eval_tp? 2>/dev/null | tr '\n' ' ')"; fi
# no validation batches: the message names the --set that said so, not the config file
tg --eval --set model.init_from="$ckpt" --set out.eval_batches=0 --set out.dir="$tmp/eval_none" >"$tmp/eval_none.out" 2>&1
rc=$?
if [ $rc != 0 ] && grep -q "^train_gpt: error: --set out.eval_batches (over $cfg): --eval needs" "$tmp/eval_none.out"; then
    ok eval_without_batches_names_the_set
else not_ok eval_without_batches_names_the_set "rc $rc: $(tail -n 2 "$tmp/eval_none.out" | tr '\n' ' ')"; fi

# ---- --sample: the same text at every layout for a seed ---------------------
# A GPT-2 vocabulary so that the prompt encodes; 20 tokens after a 4-token
# prompt run past seq_len 12 (the context slides).
sample() { # NAME RANKS [args]: the continuation into $tmp/NAME.txt
    local name="$1" n="$2"; shift 2
    local s=(--sample --set model.vocab_size=50257 --set data.vocab_dir=assets/vocab --set out.dir="$tmp/$name"
             --prompt "In the beginning God" --max-tokens 20 "$@")
    if [ "$n" = 1 ]; then tg "${s[@]}" >"$tmp/$name.txt" 2>"$tmp/$name.err"
    else launch2 "$name" "${s[@]}" >"$tmp/$name.out" 2>"$tmp/$name.err" && grep -v '^launch: ' "$tmp/$name.out" >"$tmp/$name.txt"; fi
}
same() { [ -s "$tmp/$1.txt" ] && cmp -s "$tmp/$1.txt" "$tmp/$2.txt"; }
txt() { head -c 120 "$tmp/$1.txt" | tr '\n' ' '; cat "$tmp/$1.err" 2>/dev/null | tail -n 2 | tr '\n' ' '; }
if [ -d assets/vocab ]; then
    sample s_tp1 1 --seed 7
    sample s_tp1_again 1 --seed 7
    sample s_tp2 2 --seed 7 --set parallel.tp=2
    sample s_tp2_sp 2 --seed 7 --set parallel.tp=2 --set parallel.sp=true
    sample s_seed8 1 --seed 8
    if same s_tp1 s_tp1_again && ! same s_tp1 s_seed8; then ok "sample_deterministic_for_a_seed ($(txt s_tp1))"
    else not_ok sample_deterministic_for_a_seed "'$(txt s_tp1)' / '$(txt s_tp1_again)' / seed 8: '$(txt s_seed8)'"; fi
    if same s_tp1 s_tp2; then ok sample_tp2_equals_tp1; else not_ok sample_tp2_equals_tp1 "'$(txt s_tp1)' vs '$(txt s_tp2)'"; fi
    if same s_tp1 s_tp2_sp; then ok sample_tp2_sp_equals_tp1
    else not_ok sample_tp2_sp_equals_tp1 "'$(txt s_tp1)' vs '$(txt s_tp2_sp)'"; fi
    # greedy: no seed matters, and only the top token survives top-k 1
    sample s_greedy1 1 --temperature 0 --seed 1
    sample s_greedy2 2 --temperature 0 --seed 2 --set parallel.tp=2
    sample s_top1 1 --top-k 1 --seed 3
    sample s_top5 1 --top-k 5 --seed 3
    if same s_greedy1 s_greedy2 && same s_greedy1 s_top1 && ! same s_greedy1 s_top5 && ! same s_top5 s_tp1; then
        ok "sample_greedy_and_top_k ($(txt s_greedy1))"
    else not_ok sample_greedy_and_top_k "greedy '$(txt s_greedy1)' / tp2 '$(txt s_greedy2)' / top-1 '$(txt s_top1)' / top-5 '$(txt s_top5)'"; fi
    if [ ! -s "$tmp/s_tp2.txt" ] || ls -d "$tmp"/s_* 2>/dev/null | grep -qv '\.'; then not_ok sample_writes_no_out_dir "$(ls -d "$tmp"/s_* | grep -v '\.')"
    else ok sample_writes_no_out_dir; fi
else not_ok sample_modes "assets/vocab is missing (make quickstart installs it)"; fi

# ---- messages -----------------------------------------------------------------
tg --set train.steps 5 >"$tmp/set.out" 2>&1
rc=$?
if [ "$rc" = 2 ] && grep -q "write --set train.steps=5" "$tmp/set.out"; then ok set_without_equals_names_the_spelling
else not_ok set_without_equals_names_the_spelling "rc $rc: $(head -c 200 "$tmp/set.out")"; fi
tg --set train.min_lr=1 --set out.dir="$tmp/bad_set" >"$tmp/minlr_set.out" 2>&1
if grep -q "^train_gpt: error: --set train.min_lr (over $cfg): train.min_lr (1) must not exceed" "$tmp/minlr_set.out"; then
    ok bad_set_value_names_set
else not_ok bad_set_value_names_set "$(head -c 200 "$tmp/minlr_set.out")"; fi
sed 's/"min_lr": 3e-4/"min_lr": 1/' "$cfg" >"$tmp/minlr.json"
timeout 60 "$bin" --config "$tmp/minlr.json" --set out.dir="$tmp/bad_file" >"$tmp/minlr_file.out" 2>&1
if grep -q "^train_gpt: error: $tmp/minlr.json: train.min_lr (1) must not exceed" "$tmp/minlr_file.out"; then
    ok bad_file_value_names_file
else not_ok bad_file_value_names_file "$(head -c 200 "$tmp/minlr_file.out")"; fi
tg --eval --hellaswag "$tmp/none.jsonl" >"$tmp/two_modes.out" 2>&1
rc=$?
tg --plan --export-llmc "$tmp/x.bin" >"$tmp/two_modes2.out" 2>&1
rc2=$?
if [ "$rc" = 2 ] && [ "$rc2" = 2 ] && grep -q "^train_gpt: error: --hellaswag with another mode" "$tmp/two_modes.out" &&
    grep -q "^train_gpt: error: --export-llmc with another mode" "$tmp/two_modes2.out" && [ ! -e "$tmp/x.bin" ]; then
    ok two_modes_refused
else not_ok two_modes_refused "rc $rc/$rc2: $(head -c 200 "$tmp/two_modes.out") $(head -c 200 "$tmp/two_modes2.out")"; fi
tg --prompt hi >"$tmp/prompt.out" 2>&1
rc=$?
if [ "$rc" = 2 ] && grep -q "need --sample" "$tmp/prompt.out"; then ok sample_options_need_sample
else not_ok sample_options_need_sample "rc $rc: $(head -c 200 "$tmp/prompt.out")"; fi
help=$("$bin" --help)
if grep -q -- "--eval --config" <<<"$help" && grep -q -- "--sample --config FILE .*--prompt TEXT" <<<"$help"; then
    ok help_lists_the_modes
else not_ok help_lists_the_modes "no --eval/--sample usage line"; fi

# ---- an error comes after what was printed before it, through a pipe ------
# A training shard whose token 260 (not below model.vocab_size 250) sits in the
# 4th window: steps 1-3 print, then step 4 stops with an error. And a
# validation shard with such a token: the start-up lines, then the error.
"$py" - "$tmp/late_bad" <<'PY'
import numpy as np, os, sys
os.makedirs(sys.argv[1], exist_ok=True)
for name, at in (("train", 4 * 12 * 3 + 5), ("val", 7)):
    t = np.random.default_rng(2).integers(0, 200, 3000).astype('<u2'); t[at] = 260
    h = np.zeros(256, '<i4'); h[:3] = (20240520, 1, len(t))
    open(f"{sys.argv[1]}/{name}_000000.bin", "wb").write(h.tobytes() + t.tobytes())
PY
error_is_last_after() { # NAME PATTERN: the error is the last line, after a line matching PATTERN
    local before err
    before=$(grep -n "$2" "$tmp/$1.out" | head -n 1 | cut -d: -f1)
    err=$(grep -n '^train_gpt: error: .*token 260' "$tmp/$1.out" | cut -d: -f1)
    if [ -n "$before" ] && [ -n "$err" ] && [ "$err" -gt "$before" ] && [ "$err" = "$(wc -l <"$tmp/$1.out")" ]; then
        ok "$1 (error on line $err, after line $before)"
    else not_ok "$1" "$(head -c 400 "$tmp/$1.out" | tr '\n' '|')"; fi
}
tg --set data.train="$tmp/late_bad/train_*.bin" --set data.val= --set model.vocab_size=250 --set train.steps=6 \
    --set out.dir="$tmp/late" 2>&1 | cat >"$tmp/error_after_progress_through_pipe.out"
error_is_last_after error_after_progress_through_pipe '^step 3/6'
tg --set data.val="$tmp/late_bad/val_*.bin" --set model.vocab_size=250 --set out.dir="$tmp/early" 2>&1 |
    cat >"$tmp/error_after_startup_lines_through_pipe.out"
error_is_last_after error_after_startup_lines_through_pipe '^train data:'

# ---- the banner's parameter counts --------------------------------------------
# steps 0 and no save: the start-up report only (the modes print none)
banner() { # TP
    local s=(--set train.steps=0 --set out.save_final=false --set model.vocab_size=50257 --set out.dir="$tmp/banner$1")
    if [ "$1" = 1 ]; then tg "${s[@]}"; else launch2 "banner$1" "${s[@]}" --set parallel.tp="$1"; fi 2>&1 | grep '^model:'
}
expect() { # TP: the banner's wording with the numbers of the GPT-2 formula
    "$py" - "$1" "$L" "$C" 50257 "$T" 128 <<'PY'
import sys
tp, L, C, V, T, mult = map(int, sys.argv[1:])
full = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
Vp = -(-V // (mult * tp)) * mult * tp  # padded to a multiple of vocab_multiple x tp
# each rank: its rows of wte, its columns of c_attn and c_fc (weights and
# biases), its rows of the two c_proj weights; wpe, LayerNorms, c_proj biases whole
rank = Vp // tp * C + T * C + 2 * C + L * (4 * C + 2 * C + (3 * C * C + 3 * C + C * C + 4 * C * C + 4 * C + 4 * C * C) // tp)
if tp == 1: print(f"vocab {V} (padded {Vp}): {full} parameters; the rank holds {rank} (wte padded to {Vp} rows)")
else: print(f"vocab {V} (padded {Vp}): {full} parameters; each of the {tp} TP ranks holds {rank} (its 1/{tp} of wte padded to {Vp} rows")
PY
}
for tp in 1 2; do
    want=$(expect $tp)
    got=$(banner $tp)
    if [ -n "$want" ] && [[ "$got" == *"$want"* ]]; then ok "banner_parameter_counts_tp$tp"
    else not_ok "banner_parameter_counts_tp$tp" "want '$want' in '$got'"; fi
done
exit $failed
