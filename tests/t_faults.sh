#!/usr/bin/env bash
# Faults a long run meets: hostile paths (no shell anywhere), non-finite
# values (train.on_nonfinite stop and skip), signals (SIGTERM, SIGINT,
# SIGUSR1 save a checkpoint and exit; a second signal exits at once; a
# resume after it equals the uninterrupted run bitwise), a clean log.jsonl
# after a resume, and a stopped rank under the launcher.
# Prints "ok NAME" or "not ok NAME - reason" per check.
# tier: check (make check: the quick tier, tests/run.sh --check)
# cost: 50 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" faults
launch="$root/scripts/launch.sh"
check() { # NAME REASON COMMAND...: ok when the command succeeds
    local name="$1" why="$2"; shift 2
    if "$@"; then ok "$name"; else not_ok "$name" "$why"; fi
}
oneline() { tail -n "${2:-3}" "$1" 2>/dev/null | tr '\n' ' ' | cut -c1-300; }
ms_now() { echo $((${EPOCHREALTIME//[!0-9]/} / 1000)); }
# The program `timeout` runs (signals go to it, not to timeout, which would
# pass them on twice or die of SIGUSR1 itself).
child_of() { local c; for i in $(seq 100); do c=$(pgrep -P "$1" | head -n 1); [ -n "$c" ] && break; sleep 0.05; done; echo "$c"; }
# wait_lines FILE N: until FILE holds N train lines (at most 120 s)
wait_lines() {
    local n
    for i in $(seq 2400); do n=$(grep -c '"loss"' "$1" 2>/dev/null); [ "${n:-0}" -ge "$2" ] && return; sleep 0.05; done
}

if [ ! -x "$bin" ]; then not_ok prerequisites "$bin is missing (run make)"; exit 1; fi
if ! "$py" -c 'import numpy' 2>/dev/null; then not_ok prerequisites "python3-numpy is missing"; exit 1; fi
ok prerequisites
random_shards "$tmp/data" 500 7 20000 2000

config() { # PATH LAYERS WIDTH SEQ MICRO_BATCH: a small model on the random shards
    cat >"$1" <<EOF
{"model": {"n_layer": $2, "n_head": 2, "n_embd": $3, "vocab_size": 500, "seq_len": $4},
 "train": {"micro_batch": $5, "global_batch": $5, "steps": 12, "lr": 1e-2, "min_lr": 1e-3, "warmup": 2, "seed": 5},
 "data": {"train": "$tmp/data/train_*.bin", "val": "$tmp/data/val_*.bin"},
 "out": {"dir": "$tmp/unused", "log_every": 1, "eval_every": 4, "eval_batches": 1, "save_every": 0, "sample_tokens": 0},
 "device": "cpu"}
EOF
}
cfg="$tmp/small.json"
config "$cfg" 2 32 16 4

# Every line of a log.jsonl is strict JSON (no NaN/Infinity tokens).
strict_json() { # FILE
    "$py" - "$1" <<'PY'
import json, sys
def bad(c): raise ValueError("non-JSON constant " + c)
for i, line in enumerate(open(sys.argv[1]), 1):
    try: json.loads(line, parse_constant=bad)
    except ValueError as e: print(f"line {i}: {e}: {line[:120]}"); sys.exit(1)
PY
}

# Every tensor of a safetensors file is finite.
all_finite() { # FILE
    "$py" - "$1" <<'PY'
import json, struct, sys, numpy as np
b = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
for k, v in h.items():
    if k == '__metadata__': continue
    a = np.frombuffer(b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]], np.float32)
    if not np.isfinite(a).all(): print(k, 'is not finite'); sys.exit(1)
PY
}

# ---- 1. no shell: out.dir with quotes, spaces, $(), backticks, a newline --------
evil="$tmp/we ird'; touch $tmp/PWNED1; echo '\$(touch $tmp/PWNED2)\`touch $tmp/PWNED3\`"$'\n'"line2"
timeout -k 5 120 "$launch" -n 2 --log-dir "$tmp/evil_launch" -- "$bin" --config "$cfg" --set parallel.tp=2 \
    --set train.steps=1 --set "out.dir=$evil" >"$tmp/evil.out" 2>&1
rc=$?
check hostile_out_dir_no_shell "rc $rc; PWNED files: $(ls "$tmp" | grep -c PWNED): $(oneline "$tmp/evil.out")" \
    test "$rc" = 0 -a ! -e "$tmp/PWNED1" -a ! -e "$tmp/PWNED2" -a ! -e "$tmp/PWNED3"
check hostile_out_dir_exact_name "the run directory or rank 1's log is not under the exact name" \
    test -s "$evil/log.jsonl" -a -s "$evil/logs/rank_1.out" -a -d "$evil/step_00000001"

# ---- 2. non-finite values ------------------------------------------------------
# The review's diverging run: lr 10, eps 0, beta2 0, no clipping.
diverge=(--set train.lr=10 --set train.min_lr=0 --set train.warmup=0 --set train.eps=0 --set train.beta2=0
         --set train.grad_clip=0 --set train.steps=30 --set out.save_every=1 --set out.eval_every=0)
timeout -k 5 120 "$bin" --config "$cfg" "${diverge[@]}" --set out.dir="$tmp/div" >"$tmp/div.out" 2>&1
rc=$?
step=$(grep -o 'error: step [0-9]*' "$tmp/div.out" | grep -o '[0-9]*$')
check nonfinite_stop_exits_nonzero "rc $rc: $(oneline "$tmp/div.out")" test "$rc" != 0 -a -n "$step"
check nonfinite_stop_names_step_and_values "$(oneline "$tmp/div.out" 1)" \
    grep -q "step $step: the loss is .* and the gradient norm is .*train.on_nonfinite = stop" "$tmp/div.out"
bad=""
for d in "$tmp"/div/step_*; do
    [ -d "$d" ] || continue
    s=$((10#${d##*step_}))
    [ "$s" -ge "$step" ] && bad="$bad step_$s saved at or after the non-finite step $step;"
    all_finite "$d/model.safetensors" >/dev/null || bad="$bad step_$s holds non-finite weights;"
done
check nonfinite_no_checkpoint_of_that_state "${bad:-none}" test -z "$bad"
check log_strict_json_after_nonfinite "$(strict_json "$tmp/div/log.jsonl")" strict_json "$tmp/div/log.jsonl"

# Edited checkpoints below drop their checksums (state.json as version 1
# wrote it), so that the edit reaches the run rather than the verification.
unverify() {
    "$py" -c 'import json, sys; j = json.load(open(sys.argv[1])); j["version"] = 1; j.pop("files", None); j.pop("train_data", None); json.dump(j, open(sys.argv[1], "w"))' "$1"
}
# A finite checkpoint whose forward overflows: ln_f.weight at 3e38 makes
# the logits infinite, so the loss is not finite while every weight is.
timeout -k 5 60 "$bin" --config "$cfg" --set train.steps=0 --set out.dir="$tmp/init" >"$tmp/init.out" 2>&1
"$py" - "$tmp/init/step_00000000/model.safetensors" <<'PY'
import json, struct, sys, numpy as np
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); n = struct.unpack('<Q', b[:8])[0]
o = json.loads(b[8:8 + n])['ln_f.weight']['data_offsets']
b[8 + n + o[0]:8 + n + o[1]] = np.full((o[1] - o[0]) // 4, 3e38, np.float32).tobytes()
open(p, 'wb').write(b)
PY
unverify "$tmp/init/step_00000000/state.json"
huge=(--set "model.init_from=$tmp/init/step_00000000" --set out.save_every=1 --set out.eval_every=0)
timeout -k 5 60 "$bin" --config "$cfg" "${huge[@]}" --set out.dir="$tmp/huge_stop" >"$tmp/huge_stop.out" 2>&1
rc=$?
check nonfinite_forward_stops "rc $rc, checkpoints: $(ls "$tmp/huge_stop" | grep -c step_): $(oneline "$tmp/huge_stop.out")" \
    test "$rc" != 0 -a "$(ls "$tmp/huge_stop" | grep -c step_)" = 0
timeout -k 5 60 "$bin" --config "$cfg" "${huge[@]}" --set train.on_nonfinite=skip --set train.max_skipped=3 \
    --set out.dir="$tmp/huge_skip" >"$tmp/huge_skip.out" 2>&1
rc=$?
skips=$(grep -c '"skipped":true' "$tmp/huge_skip/log.jsonl" 2>/dev/null)
check nonfinite_skip_stops_after_max "rc $rc, $skips skipped lines (want 3): $(oneline "$tmp/huge_skip.out" 1)" \
    test "$rc" != 0 -a "$skips" = 3
check nonfinite_skip_message "$(oneline "$tmp/huge_skip.out" 1)" grep -q 'train.max_skipped = 3' "$tmp/huge_skip.out"
same=$("$py" - "$tmp/init/step_00000000/model.safetensors" "$tmp/huge_skip/step_00000002/model.safetensors" <<'PY'
import json, struct, sys, numpy as np
def load(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]] for k, v in h.items() if k != '__metadata__'}
a, b = load(sys.argv[1]), load(sys.argv[2])
print('same' if a.keys() == b.keys() and all(a[k] == b[k] for k in a) else 'differ')
PY
)
check nonfinite_skip_drops_update "weights after 2 skipped steps: ${same:-missing} (want same)" test "$same" = same
check log_strict_json_after_skip "$(strict_json "$tmp/huge_skip/log.jsonl")" strict_json "$tmp/huge_skip/log.jsonl"

# AdamW moments that blow a weight up to infinity while the step's loss and
# norm (computed before the update) are finite: the save refuses the state.
timeout -k 5 60 "$bin" --config "$cfg" --set train.steps=2 --set out.dir="$tmp/blow" >"$tmp/blow1.out" 2>&1
"$py" - "$tmp/blow/step_00000002/optimizer.safetensors" <<'PY'
import json, struct, sys, numpy as np
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
for name, value in (('exp_avg.h.0.mlp.c_fc.bias', 3e38), ('exp_avg_sq.h.0.mlp.c_fc.bias', 1e-30)):
    o = h[name]['data_offsets']
    b[8 + n + o[0]:8 + n + o[1]] = np.full((o[1] - o[0]) // 4, value, np.float32).tobytes()
open(p, 'wb').write(b)
PY
unverify "$tmp/blow/step_00000002/state.json"
timeout -k 5 60 "$bin" --config "$cfg" --set train.steps=3 --set out.dir="$tmp/blow" >"$tmp/blow2.out" 2>&1
rc=$?
check nonfinite_weights_not_saved "rc $rc, step_00000003 $([ -e "$tmp/blow/step_00000003" ] && echo exists || echo absent): $(oneline "$tmp/blow2.out" 1)" \
    eval '[ $rc != 0 ] && [ ! -e "$tmp/blow/step_00000003" ] && grep -q "not saving this state: tensor .h.0.mlp.c_fc.bias." "$tmp/blow2.out"'

# ---- 3. signals ----------------------------------------------------------------
# The reference: 12 uninterrupted steps.
timeout -k 5 120 "$bin" --config "$cfg" --set out.dir="$tmp/ref" >"$tmp/ref.out" 2>&1 || not_ok ref_run "$(oneline "$tmp/ref.out")"
# train_log FILE: the train lines' step and loss, as written
train_log() { grep '"loss"' "$1" | grep -o '"step":[0-9]*,"loss":[^,]*'; }

# A run of a wider model gets SIG after its 3rd step is logged, then resumes; the result equals
# the reference bitwise. The run is stopped (SIGSTOP) before the signal and continued after it:
# under CI's load the test took long enough to find the process that the run's last steps
# could pass first, and a run that ends on its own prints no "stopped on".
slow="$tmp/slow.json"
config "$slow" 2 128 64 8
timeout -k 5 200 "$bin" --config "$slow" --set out.dir="$tmp/slow_ref" >"$tmp/slow_ref.out" 2>&1 ||
    not_ok slow_ref_run "$(oneline "$tmp/slow_ref.out")"
for sig in TERM INT USR1; do
    d="$tmp/sig_$sig"
    timeout -k 5 200 "$bin" --config "$slow" --set out.dir="$d" >"$d.out" 2>&1 &
    pid=$!
    c=$(child_of "$pid")
    wait_lines "$d/log.jsonl" 3
    kill -STOP "$c"; kill -"$sig" "$c"; kill -CONT "$c"
    wait "$pid"; rc=$?
    want=$((128 + $(kill -l "$sig")))
    k=$(grep -o "stopped on SIG$sig after step [0-9]*" "$d.out" | grep -o '[0-9]*$')
    check "sig${sig}_saves_and_exits" "rc $rc (want $want), step '${k}': $(oneline "$d.out")" \
        test "$rc" = "$want" -a -n "$k" -a -f "$d/step_$(printf %08d "${k:-0}")/state.json"
    timeout -k 5 200 "$bin" --config "$slow" --set out.dir="$d" >"$d.resume.out" 2>&1
    rc=$?
    check "sig${sig}_resume_bitwise" "rc $rc; final weights or losses differ from the uninterrupted run" \
        eval 'test $rc = 0 && cmp -s "$d/step_00000012/model.safetensors" "$tmp/slow_ref/step_00000012/model.safetensors" &&
              cmp -s "$d/step_00000012/optimizer.safetensors" "$tmp/slow_ref/step_00000012/optimizer.safetensors" &&
              [ "$(train_log "$d/log.jsonl")" = "$(train_log "$tmp/slow_ref/log.jsonl")" ]'
    if [ "$sig" = TERM ]; then
        dup=$(grep -o '"step":[0-9]*,"loss"' "$d/log.jsonl" | sort | uniq -d | tr '\n' ' ')
        marks=$(grep -c '"resumed":true' "$d/log.jsonl")
        check resume_log_each_step_once "duplicated: '${dup}', resume marks $marks (want 1)" \
            test -z "$dup" -a "$marks" = 1
    fi
done

# A signal during an evaluation stops after the evaluation, not after one more step: the loop agreed
# on a stop only straight after a step, so a signal that came during the evaluation, checkpoint or
# sample after step K trained step K+1 first (found by a review: 38 s of evaluation, then a step).
# Here step 2's evaluation reads 390 validation batches (about 4 s); the signal comes once step 2
# is logged, the run stopped and continued around it as above.
random_shards "$tmp/evdata" 500 7 20000 200000
ev="$tmp/ev.json"
config "$ev" 2 128 64 8
d="$tmp/sig_in_eval"
timeout -k 5 200 "$bin" --config "$ev" --set out.dir="$d" --set "data.val=$tmp/evdata/val_*.bin" \
    --set out.eval_every=2 --set out.eval_batches=-1 >"$d.out" 2>&1 &
pid=$!
c=$(child_of "$pid")
wait_lines "$d/log.jsonl" 2
kill -STOP "$c"; kill -INT "$c"; kill -CONT "$c"
wait "$pid"; rc=$?
k=$(grep -o "stopped on SIGINT after step [0-9]*" "$d.out" | grep -o '[0-9]*$')
check sigINT_during_evaluation_stops_after_it "rc $rc (want 130), stopped after step '${k}' (want 2), train lines $(grep -c '"loss"' "$d/log.jsonl"): $(oneline "$d.out")" \
    eval 'test "$rc" = 130 -a "$k" = 2 -a -f "$d/step_00000002/state.json" && [ "$(grep -c "\"loss\"" "$d/log.jsonl")" = 2 ]'

# A second signal stops at once, without saving: a step of the big model
# takes a second or more; the exit follows the second signal within a
# third of a step (the first signal alone would finish the step and save).
big="$tmp/big.json"
config "$big" 4 512 256 4
d="$tmp/twice"
timeout -k 5 300 "$bin" --config "$big" --set out.dir="$d" --set out.eval_every=0 >"$d.out" 2>&1 &
pid=$!
wait_lines "$d/log.jsonl" 1
step_ms=$(grep -o '"ms":[0-9.]*' "$d/log.jsonl" | head -n 1 | grep -o '[0-9]*' | head -n 1)
c=$(child_of "$pid")
kill -TERM "$c"; sleep 0.2; t0=$(ms_now); kill -TERM "$c"
wait "$pid"; rc=$?
dt=$(($(ms_now) - t0))
check second_signal_stops_at_once "rc $rc (want 143), exit ${dt} ms after the 2nd signal, a step takes ${step_ms} ms" \
    test "$rc" = 143 -a "$dt" -lt 1000 -a "$((dt * 3))" -lt "${step_ms:-0}"
check second_signal_saves_nothing "$(ls "$d")" test "$(ls "$d" | grep -c step_)" = 0

# Under the launcher, TP=2: SIGTERM to the launcher stops both ranks after
# the same step with one checkpoint; resuming gives the uninterrupted run.
# The ranks (each its own process group) are stopped before the launcher's
# signal, as above: the launcher continues them after SIGTERM, the test after
# the launcher says it passed SIGUSR1 on.
ranks_of() { # LAUNCHER_PID: the ranks' pids, once both run
    local r
    for i in $(seq 200); do r=$(pgrep -P "$1" -x train_gpt | tr '\n' ' '); [ "$(wc -w <<<"$r")" = 2 ] && break; sleep 0.05; done
    echo "$r"
}
timeout -k 5 200 "$launch" -n 2 --log-dir "$tmp/tp_ref_l" -- "$bin" --config "$slow" --set parallel.tp=2 \
    --set out.dir="$tmp/tp_ref" >"$tmp/tp_ref.out" 2>&1 || not_ok tp_ref_run "$(oneline "$tmp/tp_ref.out")"
for sig in TERM USR1; do
    d="$tmp/tp_$sig"
    set -m
    timeout -k 5 200 "$launch" -n 2 --log-dir "$d.l" -- "$bin" --config "$slow" --set parallel.tp=2 --set out.dir="$d" \
        >"$d.out" 2>&1 &
    sub=$!
    set +m
    lp=$(child_of "$sub") # the launcher
    ranks=$(ranks_of "$lp")
    wait_lines "$d/log.jsonl" 3
    for r in $ranks; do kill -STOP -- "-$r"; done
    kill -"$sig" "$lp"
    if [ "$sig" = USR1 ]; then
        for i in $(seq 200); do grep -q 'got SIGUSR1: passing it on' "$d.out" && break; sleep 0.05; done
        for r in $ranks; do kill -CONT -- "-$r"; done
    fi
    wait "$sub"; rc=$?
    k0=$(grep -o "stopped on SIG$sig after step [0-9]*" "$d.out" | head -n 1 | grep -o '[0-9]*$')
    k1=$(grep -o "stopped on SIG$sig after step [0-9]*" "$d/logs/rank_1.out" 2>/dev/null | grep -o '[0-9]*$')
    check "launcher_${sig}_ranks_save_same_step" "rc $rc, rank 0 step '$k0', rank 1 step '$k1': $(oneline "$d.out")" \
        test "$rc" != 0 -a -n "$k0" -a "$k0" = "$k1" -a -f "$d/step_$(printf %08d "${k0:-0}")/state.json"
    timeout -k 5 200 "$launch" -n 2 --log-dir "$d.l2" -- "$bin" --config "$slow" --set parallel.tp=2 --set out.dir="$d" \
        >"$d.resume.out" 2>&1
    rc=$?
    check "launcher_${sig}_resume_bitwise" "rc $rc: $(oneline "$d.resume.out")" \
        eval 'test $rc = 0 && cmp -s "$d/step_00000012/model.safetensors" "$tmp/tp_ref/step_00000012/model.safetensors" &&
              [ "$(train_log "$d/log.jsonl")" = "$(train_log "$tmp/tp_ref/log.jsonl")" ]'
done

# ---- 4. a stopped rank ends the job within parallel.timeout_s (+ 1.5 s) ---------
d="$tmp/stopped"
timeout -k 5 120 "$launch" -n 2 --log-dir "$d.l" -- "$bin" --config "$slow" --set parallel.tp=2 --set train.steps=100000 \
    --set parallel.timeout_s=2 --set out.dir="$d" >"$d.out" 2>&1 &
sub=$!
wait_lines "$d/log.jsonl" 2
victim=""
for p in $(pgrep -f -- "out.dir=$d"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'RANK=1' && [ "$(cat /proc/"$p"/comm)" = train_gpt ] && victim=$p
done
t0=$(ms_now)
kill -STOP "$victim"
wait "$sub"; rc=$?
dt=$(($(ms_now) - t0))
check stopped_rank_ends_job "rc $rc, ended ${dt} ms after SIGSTOP (timeout_s 2; want < 5000): $(oneline "$d.out" 2)" \
    test -n "$victim" -a "$rc" != 0 -a "$dt" -lt 5000
pgrep -f -- "out.dir=$d" >/dev/null && { not_ok stopped_rank_reaped "a rank is still running"; pkill -KILL -f -- "out.dir=$d"; }

# ---- 5. a checkpoint that takes longer to write than parallel.timeout_s ---------
# Data parallel over 2 ranks: rank 0 writes step 2's checkpoint, rank 1 waits for it up to
# parallel.save_timeout_s (it timed out in step 3's all-reduce after parallel.timeout_s before),
# and a save_timeout_s shorter than the write ends the job naming that key. The write of
# GPT-2's vocabulary at width 512 (26M parameters) takes over 3 s here, twice the 1.5 s
# timeout; a shorter timeout failed the rendezvous itself under CI's load (the check says how
# long the write took).
random_shards "$tmp/v50k" 50257 9 20000 2000
cat >"$tmp/wide_vocab.json" <<EOF
{"model": {"n_layer": 1, "n_head": 2, "n_embd": 512, "vocab_size": 50257, "seq_len": 16},
 "train": {"micro_batch": 2, "global_batch": 4, "steps": 3, "lr": 1e-3, "min_lr": 1e-4, "warmup": 1},
 "data": {"train": "$tmp/v50k/train_*.bin", "val": "$tmp/v50k/val_*.bin"},
 "out": {"log_every": 1, "eval_every": 0, "save_every": 2, "save_final": false, "sample_tokens": 0}, "device": "cpu"}
EOF
save_run() { # NAME [--set ...]: the wide-vocabulary config as 2 data-parallel ranks, parallel.timeout_s 1.5
    local name="$1"; shift
    timeout -k 5 120 "$launch" -n 2 --log-dir "$tmp/$name.l" -- "$bin" --config "$tmp/wide_vocab.json" \
        --set parallel.timeout_s=1.5 --set out.dir="$tmp/$name" "$@" >"$tmp/$name.out" 2>&1
}
save_run slow_save; rc=$?
took=$(grep -o 'saved .*step_00000002 ([0-9]* ms)' "$tmp/slow_save.out" | grep -o '[0-9]*' | tail -n 1)
check "rank_waits_for_a_checkpoint_longer_than_timeout_s (the write took ${took:-?} ms)" "rc $rc: $(oneline "$tmp/slow_save.out" 4)" \
    eval 'test "$rc" = 0 -a -f "$tmp/slow_save/step_00000002/state.json" -a "${took:-0}" -gt 1500 && grep -q "^step 3/3 " "$tmp/slow_save.out"'
rm -rf "$tmp/slow_save"
save_run short_save --set parallel.save_timeout_s=0.2 --set model.n_embd=128; rc=$? # a write of about 1 s is long enough here
check save_timeout_s_ends_the_wait_naming_it "rc $rc: $(oneline "$tmp/short_save.out" 4)" \
    eval 'test "$rc" != 0 && grep -q "waiting for rank 0 to write .*step_00000002: .*timed out after 0.2 s (parallel.save_timeout_s)" "$tmp/short_save.out"'
rm -rf "$tmp/short_save"

exit "$failed"
