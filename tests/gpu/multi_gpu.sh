#!/usr/bin/env bash
# The checks that need several GPUs, for scripts/gpu_check.sh's multi-gpu and
# multi-gpu-scaling sections (a lent machine of 2, 4 or 8 GPUs):
#   tests/gpu/multi_gpu.sh layouts   every NCCL layout the GPUs allow against
#       TP=1 on one of them (same model, data and steps): TP 2, 4 and 8, TP 2
#       and the widest TP with SP, DP 2, DP 2 under ZeRO in buckets of one
#       layer, and with 4 GPUs TP 2 x DP 2 with SP and ZeRO; losses, gradient
#       norms and the validation loss within rel 1e-4 of TP=1 (fp32), and the
#       widest TP layout run twice bitwise equal (no atomics in the
#       collectives' order).
#   tests/gpu/multi_gpu.sh sweeps    the weak and strong sweeps twice: with
#       DEVICES = the GPUs (layouts that fit run for real, wider ones are
#       projected), and with DEVICES=1 over the degrees that fit (projected
#       from one GPU); scripts/projection_error.py then sets each real row
#       beside its projection: the projection's error, measured. One sweep a
#       global batch, at the micro-batch of scripts/paper_tables.sh's rows for
#       it (batch 20 as 2 x 10), so that these rows are the layouts of the
#       scaling section's tables.
# One line per check (ok / not ok / skip), then "N passed, M failed"; exits 1
# if a check failed. With fewer than 2 GPUs it prints one skip line and exits 0.
# Environment: MG_GPUS (default: the GPUs nvidia-smi -L lists), TRAIN_GPT
# (layouts; default build/gpu/train_gpt), MG_RUN_ARGS (more arguments for
# every layout run, word-split: a smaller model), MG_VOCAB (token range of the
# random shards, default 50257), SCALE (sweeps, default paper), MG_TP_LIST
# (sweeps' degrees, default 1,2,4,8), MG_BATCHES (the sweeps' global batches,
# default 8,20), MG_SWEEP_ARGS (more sweep options, word-split, e.g. --steps 5;
# not --batches or --micro-batch), MG_SWEEP_BIN (the sweeps' TRAIN_GPT; default
# theirs, ./train_gpt). The rehearsal without GPUs (tests/t_nccl_emu.sh) runs
# it on the CUDA emulation's trainer and NCCL, with a stand-in nvidia-smi.
# shellcheck source=tests/lib.sh
if [ -z "${TRAIN_GPT:-}" ] && [ -x "$(dirname "$0")/../../build/gpu/train_gpt" ]; then
    export TRAIN_GPT=build/gpu/train_gpt
fi
what="${1:-}"
case "$what" in layouts|sweeps) ;; *) echo "usage: tests/gpu/multi_gpu.sh layouts|sweeps" >&2; exit 2 ;; esac
source "$(dirname "$0")/../lib.sh" "multi_gpu_$what"
pass=0 fail=0
good() { ok "$1"; pass=$((pass + 1)); }
bad() { not_ok "$1" "$2"; fail=$((fail + 1)); }
finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }

n="${MG_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}"
if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 2 ]; then
    echo "skip multi_gpu_$what - ${n:-0} GPU(s): the multi-GPU checks need at least 2"
    exit 0
fi
echo "# $n GPUs; scratch $tmp"

# ---- layouts -------------------------------------------------------------------
layouts() {
    random_shards "$tmp/data" "${MG_VOCAB:-50257}" 7 200000 40000
    # shellcheck disable=SC2206
    local extra=(${MG_RUN_ARGS:-})
    # n_head 8, so that TP 8 divides the heads
    local base=(--config configs/tiny.json --set model.n_head=8 --set out.sample_tokens=0 --set out.eval_every=0
        --set "data.train=$tmp/data/train_*.bin" --set "data.val=$tmp/data/val_*.bin" --set out.eval_batches=2
        --set train.micro_batch=4 --set train.global_batch=8 --set train.warmup=1 --set train.steps=5
        --set device=cuda --set train.precision=fp32 "${extra[@]}")
    run() { # NAME RANKS ARGS...
        local name=$1 r=$2
        shift 2
        if [ "$r" -eq 1 ]; then
            timeout -k 10 600 "$bin" "${base[@]}" "$@" --set out.dir="$tmp/$name" >"$tmp/$name.out" 2>&1
        else
            timeout -k 10 600 scripts/launch.sh -n "$r" --log-dir "$tmp/$name.launch" -- \
                "$bin" "${base[@]}" "$@" --set out.dir="$tmp/$name" >"$tmp/$name.out" 2>&1
        fi
    }
    # values NAME: step, loss, grad norm and val loss of each logged line, as logged
    values() { grep -o '"step":[0-9]*\|"loss":[^,}]*\|"grad_norm":[^,}]*\|"val_loss":[^,}]*' "$tmp/$1/log.jsonl" 2>/dev/null; }
    # matches NAME: within rel 1e-4 of tp1 (loss, grad_norm, val_loss at every logged step)
    matches() {
        "$py" - "$tmp/tp1/log.jsonl" "$tmp/$1/log.jsonl" <<'PY'
import json, sys
def load(p):
    out = {}
    for line in open(p):
        j = json.loads(line)
        for k in ("loss", "grad_norm", "val_loss"):
            if k in j:
                out[(k, j["step"])] = j[k]
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
if not a or sorted(a) != sorted(b):
    sys.exit(f"logged values differ: {len(a)} against {len(b)}")
worst = max((abs(b[k] - v) / max(abs(v), 1e-30), k) for k, v in a.items())
print(f"max rel {worst[0]:.3g} ({worst[1][0]} at step {worst[1][1]}), {len(a)} values")
sys.exit(0 if worst[0] < 1e-4 else 1)
PY
    }
    if ! run tp1 1; then
        bad multi_gpu_tp1_reference "exit $?: $(tail -n 3 "$tmp/tp1.out" | tr '\n' ' ')"
        return
    fi
    local lays=() t widest=2
    for t in 2 4 8; do [ "$t" -le "$n" ] && lays+=("tp$t $t --set parallel.tp=$t") && widest=$t; done
    lays+=("tp2_sp 2 --set parallel.tp=2 --set parallel.sp=true")
    [ "$widest" -gt 2 ] && lays+=("tp${widest}_sp $widest --set parallel.tp=$widest --set parallel.sp=true")
    lays+=("dp2 2 --set parallel.tp=1" "dp2_zero 2 --set parallel.tp=1 --set parallel.zero=1 --set parallel.dp_bucket_mb=0.001")
    [ "$n" -ge 4 ] && lays+=("tp2_dp2_sp_zero 4 --set parallel.tp=2 --set parallel.sp=true --set parallel.zero=1 --set parallel.dp_bucket_mb=0.001")
    lays+=("tp${widest}_again $widest --set parallel.tp=$widest")
    local lay name r out
    for lay in "${lays[@]}"; do
        # shellcheck disable=SC2086
        set -- $lay
        name=$1 r=$2
        shift 2
        if ! run "$name" "$r" --set parallel.comm=nccl "$@" || ! grep -q "communicator nccl" "$tmp/$name.out"; then
            bad "multi_gpu_nccl_${name}" "exit or no NCCL communicator: $(grep -m2 -i 'error' "$tmp/$name.out" | tr '\n' ' ' | cut -c1-300)"
        elif [[ "$name" == *_again ]]; then
            if [ -n "$(values "tp$widest")" ] && diff <(values "tp$widest") <(values "$name") >/dev/null
            then good "multi_gpu_nccl_tp${widest}_twice_bitwise ($(values "$name" | wc -l) values)"
            else bad "multi_gpu_nccl_tp${widest}_twice_bitwise" "$(diff <(values "tp$widest") <(values "$name") | head -n 4 | tr '\n' ' ')"; fi
        elif out=$(matches "$name" 2>&1); then good "multi_gpu_nccl_${name}_matches_tp1 ($out)"
        else bad "multi_gpu_nccl_${name}_matches_tp1" "$out"; fi
    done
}

# ---- sweeps --------------------------------------------------------------------
sweeps() {
    local all="${MG_TP_LIST:-1,2,4,8}" fit="" t kind b mb
    for t in ${all//,/ }; do [ "$t" -le "$n" ] && fit="${fit:+$fit,}$t"; done
    # shellcheck disable=SC2206
    local extra=(${MG_SWEEP_ARGS:-})
    for t in "${extra[@]}"; do
        case "$t" in --batches|--micro-batch)
            bad multi_gpu_sweeps "MG_SWEEP_ARGS has $t: set MG_BATCHES (each batch runs at its plan rows' micro-batch)"
            return ;;
        esac
    done
    local env=(SCALE="${SCALE:-paper}")
    [ -n "${MG_SWEEP_BIN:-}" ] && env+=(TRAIN_GPT="$MG_SWEEP_BIN")
    if ! "$py" scripts/scaling/paper_tables.py micro --batches "${MG_BATCHES:-8,20}" >"$tmp/micro.tsv" 2>"$tmp/micro.err"; then
        bad multi_gpu_sweeps "MG_BATCHES '${MG_BATCHES:-}': $(tr '\n' ' ' <"$tmp/micro.err" | cut -c1-300)"
        return
    fi
    while IFS=$'\t' read -r b mb; do
        for kind in weak strong; do
            sweep_pair "$kind" "$b" "$mb" "$all" "$fit" "${env[@]}" -- "${extra[@]}"
        done
    done <"$tmp/micro.tsv"
}
sweep_pair() { # KIND BATCH MICRO TP_ALL TP_FIT ENV... -- SWEEP_ARGS...: real and projected, then their error
    local kind=$1 b=$2 mb=$3 all=$4 fit=$5 env=() name="${1}_b${2}"
    shift 5
    while [ "$1" != -- ]; do env+=("$1"); shift; done
    shift
    local args=(--batches "$b" --micro-batch "$mb" "$@")
    env "${env[@]}" DEVICES="$n" "scripts/${kind}_scaling.sh" --tp "$all" --out "$tmp/${name}_real" "${args[@]}" \
        >"$tmp/${name}_real.log" 2>&1
    local a=$?
    env "${env[@]}" DEVICES=1 "scripts/${kind}_scaling.sh" --tp "$fit" --out "$tmp/${name}_projected" "${args[@]}" \
        >"$tmp/${name}_projected.log" 2>&1
    local p=$?
    if [ $a -ne 0 ] || [ $p -ne 0 ]; then
        bad "multi_gpu_${name}_sweeps" "exit $a (DEVICES=$n) and $p (DEVICES=1): $(tail -n 2 "$tmp/${name}_real.log" "$tmp/${name}_projected.log" | tr '\n' ' ' | cut -c1-300)"
        return
    fi
    if "$py" scripts/projection_error.py "$tmp/${name}_real/table.tsv" "$tmp/${name}_projected/table.tsv" \
        >"$tmp/${name}_projection_error.md" 2>"$tmp/${name}_projection_error.err"
    then
        good "multi_gpu_${name}_projection_error ($(($(grep -c '^| ' "$tmp/${name}_projection_error.md") - 1)) real rows beside their projection, micro-batch $mb)"
        cat "$tmp/${name}_projection_error.md"
    else bad "multi_gpu_${name}_projection_error" "$(tr '\n' ' ' <"$tmp/${name}_projection_error.err")"; fi
}

"$what"
finish
