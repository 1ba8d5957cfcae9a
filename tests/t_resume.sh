#!/usr/bin/env bash
# Resume tests: a run stopped after step k and resumed with out.resume=true
# must match the uninterrupted run bitwise: the logged losses/lr/grad norms of
# the remaining steps (compared as printed strings), the final
# model.safetensors and optimizer.safetensors (cmp), and the run state.
# Variants: sequential data, gradient accumulation, shuffled data, and both;
# stops mid-epoch and in a later epoch. Also: a leftover step_XXXXXXXX.tmp
# (an interrupted save) is ignored on resume.
# Prints "ok NAME" or "not ok NAME - reason" per check; exits non-zero if any
# check failed. Run from the repo root by tests/run.sh (env TG_ROOT, TG_TMP).
# cost: 15 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" resume
check() { # NAME REASON COMMAND...: ok when the command succeeds
    local name="$1" why="$2"; shift 2
    if "$@"; then ok "$name"; else not_ok "$name" "$why"; fi
}
oneline() { tail -n "${2:-3}" "$1" 2>/dev/null | tr '\n' ' ' | cut -c1-300; }

# ---- prerequisites -------------------------------------------------------
if [ ! -x "$bin" ]; then not_ok prerequisites "$bin is missing (run make)"; exit 1; fi
if ! "$py" -c 'import numpy' 2>/dev/null; then not_ok prerequisites "python3-numpy is missing"; exit 1; fi
ok prerequisites

# ---- data: llm.c shards with a small vocabulary --------------------------
# Two train shards of 150 and 100 tokens: with seq_len 16 an epoch is 7
# windows at global_batch 2 and 3 windows at global_batch 4, so 10 steps
# cross epoch boundaries and the shard boundary.
mkshard() { # PATH NTOKENS SEED
    "$py" - "$@" <<'EOF'
import sys, numpy as np
path, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
h = np.zeros(256, dtype='<i4'); h[0] = 20240520; h[1] = 1; h[2] = n
t = np.random.default_rng(seed).integers(0, 500, n).astype('<u2')
open(path, 'wb').write(h.tobytes() + t.tobytes())
EOF
}
mkdir -p "$tmp/data"
mkshard "$tmp/data/tr_000000.bin" 150 1
mkshard "$tmp/data/tr_000001.bin" 100 2
mkshard "$tmp/data/va_000000.bin" 100 3

cfg="$tmp/config.json"
cat >"$cfg" <<EOF
{
  "model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "vocab_size": 500, "seq_len": 16},
  "train": {"micro_batch": 2, "global_batch": 2, "steps": 10, "lr": 1e-2, "min_lr": 1e-3, "warmup": 2,
            "weight_decay": 0.1, "grad_clip": 1.0, "seed": 1234},
  "data": {"train": "$tmp/data/tr_*.bin", "val": "$tmp/data/va_*.bin", "shuffle": false},
  "out": {"dir": "$tmp/unused", "log_every": 1, "eval_every": 5, "eval_batches": 1, "save_every": 0,
          "resume": true, "sample_tokens": 0},
  "device": "cpu"
}
EOF

train() { # LOGFILE ARGS...: runs the trainer, stdout+stderr to LOGFILE
    local log="$1"; shift
    timeout -k 5 60 "$bin" --config "$cfg" "$@" >"$log" 2>&1
}

# The deterministic fields of log.jsonl, as printed: train lines
# "train STEP LOSS LR GRAD_NORM TOKENS" and eval lines "val STEP VAL_LOSS",
# only for steps > FROM.
logfields() { # LOG.JSONL FROM
    "$py" - "$@" <<'EOF'
import sys, json
path, since = sys.argv[1], int(sys.argv[2])
for line in open(path):
    line = line.strip()
    if not line:
        continue
    o = json.loads(line, parse_float=str, parse_int=str)
    if int(o["step"]) <= since:
        continue
    if "loss" in o:
        print("train", o["step"], o["loss"], o.get("lr"), o.get("grad_norm"), o.get("tokens"))
    elif "val_loss" in o:
        print("val", o["step"], o["val_loss"])
EOF
}

# Compares the log fields of steps > K of two runs; sets $why on failure.
same_log() { # A.JSONL B.JSONL K
    local a b
    a="$(logfields "$1" "$3" 2>&1)" || { why="cannot read $1: $a"; return 1; }
    b="$(logfields "$2" "$3" 2>&1)" || { why="cannot read $2: $b"; return 1; }
    if [ -z "$a" ]; then why="no log lines after step $3 in $1"; return 1; fi
    if [ "$a" != "$b" ]; then
        why="first difference: $(diff <(echo "$a") <(echo "$b") | grep '^[<>]' | head -n 2 | tr '\n' ' ')"
        return 1
    fi
}

check_log() { # NAME A.JSONL B.JSONL K: same_log, reporting its reason
    why=""
    if same_log "$2" "$3" "$4"; then ok "$1"; else not_ok "$1" "$why"; fi
}

# state.json without the lines naming the run directory.
same_state() { # A.json B.json
    cmp -s <(grep -v '"dir"' "$1") <(grep -v '"dir"' "$2")
}

steps=10
final="step_$(printf %08d $steps)"

# One variant: run A uninterrupted; run B1 the same with save_every 4
# (checkpoints 4, 8, 10); then for K in 4 8 a fresh dir holding only B1's
# step K, resumed with A's exact config.
variant() { # NAME --set ARGS...
    local name="$1"; shift
    local d="$tmp/$name"
    mkdir -p "$d"
    if ! train "$d/A.out" --set out.dir="$d/A" "$@" || [ ! -f "$d/A/$final/model.safetensors" ]; then
        not_ok "${name}_reference_run" "uninterrupted run failed: $(oneline "$d/A.out")"
        return
    fi
    ok "${name}_reference_run"
    if ! train "$d/B1.out" --set out.dir="$d/B1" --set out.save_every=4 "$@"; then
        not_ok "${name}_save_every_run" "run with save_every 4 failed: $(oneline "$d/B1.out")"
        return
    fi
    # Saving checkpoints on the way must not change the run.
    check_log "${name}_saving_does_not_change_run" "$d/A/log.jsonl" "$d/B1/log.jsonl" 0
    local k
    for k in 4 8; do
        local ck b="$d/B_k$k"
        ck="step_$(printf %08d $k)"
        if [ ! -d "$d/B1/$ck" ]; then
            not_ok "${name}_k${k}_resume_runs" "no checkpoint $ck in $d/B1"
            continue
        fi
        mkdir -p "$b" && cp -a "$d/B1/$ck" "$b/"
        if ! train "$d/B_k$k.out" --set out.dir="$b" "$@"; then
            not_ok "${name}_k${k}_resume_runs" "resumed run failed: $(oneline "$d/B_k$k.out")"
            continue
        fi
        if ! grep -q "resumed from .*$ck" "$d/B_k$k.out"; then
            not_ok "${name}_k${k}_resume_runs" "stdout does not say 'resumed from ...$ck'"
            continue
        fi
        ok "${name}_k${k}_resume_runs"
        check_log "${name}_k${k}_losses_bitwise" "$d/A/log.jsonl" "$b/log.jsonl" "$k"
        check "${name}_k${k}_model_bitwise" "$b/$final/model.safetensors differs from $d/A/$final/model.safetensors" \
            cmp -s "$d/A/$final/model.safetensors" "$b/$final/model.safetensors"
        check "${name}_k${k}_optimizer_bitwise" "$b/$final/optimizer.safetensors differs from $d/A/$final/optimizer.safetensors" \
            cmp -s "$d/A/$final/optimizer.safetensors" "$b/$final/optimizer.safetensors"
        check "${name}_k${k}_state_equal" "$b/$final/state.json differs from $d/A/$final/state.json (besides out.dir)" \
            same_state "$d/A/$final/state.json" "$b/$final/state.json"
    done
}

variant plain
variant accum --set train.global_batch=4
variant shuffle --set data.shuffle=true
variant shuffle_accum --set data.shuffle=true --set train.global_batch=4

# ---- an interrupted save (step_XXXXXXXX.tmp) is ignored on resume --------
# Beside the complete step 4 lies step_NNNNNNNN.tmp, a copy of step 8 with
# optimizer.safetensors cut in half and model.safetensors cut to 1000 bytes
# (a save that was interrupted). Resuming must start from step 4 and match the
# reference.
# (a) tmp of step 8, a step the resumed run does not save again;
# (b) tmp of the final step, which the resumed run saves again;
# (c) as (b), with one more file in the .tmp dir (say, left by another
#     version of the trainer): still only a leftover to clear away.
leftover_case() { # NAME TMPSTEP STRAY(0/1)
    local name="$1" stray="$3"
    local d="$tmp/plain" b="$tmp/$1" t
    t="step_$(printf %08d "$2").tmp"
    if [ ! -d "$d/B1/step_00000004" ] || [ ! -d "$d/B1/step_00000008" ] || [ ! -f "$d/A/$final/model.safetensors" ]; then
        not_ok "${name}_resume_runs" "the plain variant did not produce its checkpoints"
        return
    fi
    mkdir -p "$b/$t"
    cp -a "$d/B1/step_00000004" "$b/"
    cp -a "$d/B1/step_00000008/." "$b/$t/"
    local sz
    sz=$(stat -c %s "$b/$t/optimizer.safetensors")
    truncate -s $((sz / 2)) "$b/$t/optimizer.safetensors"
    truncate -s 1000 "$b/$t/model.safetensors"
    [ "$stray" = 1 ] && echo junk >"$b/$t/notes.txt"
    if ! train "$tmp/$name.out" --set out.dir="$b"; then
        not_ok "${name}_resume_runs" "resume beside $t failed: $(oneline "$tmp/$name.out" 1)"
        return
    fi
    if ! grep -q 'resumed from .*step_00000004' "$tmp/$name.out"; then
        not_ok "${name}_resume_runs" "did not resume from step_00000004: $(grep -m1 -i 'resumed\|initiali' "$tmp/$name.out")"
        return
    fi
    ok "${name}_resume_runs"
    check_log "${name}_losses_bitwise" "$d/A/log.jsonl" "$b/log.jsonl" 4
    check "${name}_model_bitwise" "final model.safetensors differs from the reference" \
        cmp -s "$d/A/$final/model.safetensors" "$b/$final/model.safetensors"
    check "${name}_optimizer_bitwise" "final optimizer.safetensors differs from the reference" \
        cmp -s "$d/A/$final/optimizer.safetensors" "$b/$final/optimizer.safetensors"
    check "${name}_final_files" "final checkpoint holds [$(ls "$b/$final" 2>/dev/null | tr '\n' ' ')], reference [$(ls "$d/A/$final" | tr '\n' ' ')]" \
        [ "$(ls "$b/$final" 2>/dev/null)" = "$(ls "$d/A/$final")" ]
}
leftover_case leftover_tmp_ignored 8 0
leftover_case leftover_tmp_of_final_step "$steps" 0
leftover_case leftover_tmp_with_extra_file "$steps" 1

# ---- out.resume=false in a directory that already holds checkpoints ------
# A fresh run (other lr) into the plain reference's dir. Acceptable: refuse
# (non-zero exit, old checkpoint untouched, message naming the dir), or run
# and save its own final checkpoint. Wrong: exit 0 and report "saved" while
# step_NNNNNNNN still holds the old run's weights.
d="$tmp/plain" b="$tmp/no_resume"
if [ -f "$d/A/$final/model.safetensors" ]; then
    cp -a "$d/A" "$b"
    old=$(sha256sum <"$b/$final/model.safetensors")
    train "$tmp/no_resume.out" --set out.dir="$b" --set out.resume=false --set train.lr=0.02
    rc=$?
    new=$(sha256sum <"$b/$final/model.safetensors" 2>/dev/null)
    if [ $rc -ne 0 ]; then
        if [ "$new" = "$old" ] && grep -q "$b" "$tmp/no_resume.out"; then ok resume_false_over_existing_checkpoint
        else not_ok resume_false_over_existing_checkpoint "refused, but damaged $final or did not name $b: $(oneline "$tmp/no_resume.out" 1)"; fi
    elif [ "$new" = "$old" ]; then
        not_ok resume_false_over_existing_checkpoint "exit 0, but $b/$final still holds the earlier run's weights (the new run's final checkpoint was silently not written): $(grep -m1 saved "$tmp/no_resume.out")"
    else
        ok resume_false_over_existing_checkpoint
    fi
else
    not_ok resume_false_over_existing_checkpoint "the plain variant did not produce its checkpoints"
fi

exit $failed
