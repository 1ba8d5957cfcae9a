#!/usr/bin/env bash
# The bf16 paths of the orchestrator without a GPU, through the CPU's bf16
# storage emulation (train.precision=bf16 on the CPU: float32 kernels on
# bf16 activations and working weights, fp32 master weights): bf16 tracks
# fp32; TP2+SP (bf16 collectives through the shm communicator) and
# TP2 x DP2 with ZeRO (the bf16 working weights gathered) match bf16 TP1;
# recompute modes stay bitwise equal; resume is bitwise, also under ZeRO in
# buckets (the checkpoint gathers the fp32 master, of which a rank keeps
# only its chunks); checkpoints hold the fp32 master weights; memory per
# parameter is 2 + 4 + 12 bytes, the 12 divided by DP under ZeRO; SP's
# activation collectives and ZeRO's gather send half the bytes.
# tier: check (make check: the quick tier, tests/run.sh --check)
# cost: 25 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" bf16
export OMP_NUM_THREADS=1
L=2 C=48 NH=12 V=300 T=12 B=2 G=8 STEPS=5

random_shards "$tmp/data" "$V" 12 4000 800
cfg="$tmp/cfg.json"
cat >"$cfg" <<JSON
{"model": {"n_layer": $L, "n_head": $NH, "n_embd": $C, "vocab_size": $V, "seq_len": $T},
 "train": {"micro_batch": $B, "global_batch": $G, "steps": $STEPS, "lr": 3e-3, "min_lr": 3e-4, "warmup": 1, "grad_clip": 0.5,
           "eps": 1e-5, "precision": "bf16"},
 "data": {"train": "$tmp/data/train_*.bin", "val": "$tmp/data/val_*.bin"},
 "out": {"eval_every": 0, "eval_batches": 2, "sample_tokens": 0, "resume": false, "log_every": 1}}
JSON

run() { # run NAME RANKS [--set ...]
    local name="$1" n="$2"; shift 2
    rm -rf "$tmp/$name"
    timeout -k 5 180 scripts/launch.sh -n "$n" --log-dir "$tmp/$name/launch" -- \
        "$bin" --config "$cfg" --set out.dir="$tmp/$name" "$@" >"$tmp/$name.out" 2>&1
}
# check NAME RANKS REF RTOL [--bitwise] -- [--set ...]
check() {
    local name="$1" n="$2" ref="$3" rtol="$4"; shift 4
    local extra=()
    while [ "$1" != "--" ]; do extra+=("$1"); shift; done
    shift
    if ! run "$name" "$n" "$@"; then not_ok "$name" "the job failed: $(tail -n 4 "$tmp/$name.out" | tr '\n' ' ')"; return; fi
    local out
    if out=$("$py" tests/parallel/compare.py "$tmp/$ref" "$tmp/$name" $STEPS --rtol "$rtol" "${extra[@]}" 2>&1); then
        ok "${name}_matches_${ref} ($out)"
    else not_ok "${name}_matches_${ref}" "$out"; fi
}

if run fp32 1 --set train.precision=fp32; then ok fp32_reference; else not_ok fp32_reference "$(tail -n 3 "$tmp/fp32.out" | tr '\n' ' ')"; fi
if run bf16 1; then ok bf16_reference; else not_ok bf16_reference "$(tail -n 3 "$tmp/bf16.out" | tr '\n' ' ')"; fi
grep -q "bf16 activations" "$tmp/bf16.out" && ok bf16_backend_named || not_ok bf16_backend_named "$(grep backend "$tmp/bf16.out")"

# Losses: 2e-2 is the issue's bound for bf16 against fp32 (measured here:
# about 5e-5). Weights are held to 1e-1 only: AdamW normalises each update,
# so bf16 rounding noise in small gradients (biases near zero) moves small
# tensors by a few percent of their norm after 5 steps (measured: up to
# 3.8e-2 on a bias, 2e-2 against fp32).
check bf16 1 fp32 2e-2 --weight-rtol 1e-1 --
# one rounding per stored output and fixed-order bf16 sums in the collectives: close to TP1, not equal
check tp2_sp 2 bf16 2e-3 --weight-rtol 1e-1 -- --set parallel.tp=2 --set parallel.sp=true
check tp2_dp2_zero 4 bf16 2e-3 --weight-rtol 1e-1 -- --set parallel.tp=2 --set parallel.dp=2 --set parallel.zero=1
check tp2_sp_full 2 tp2_sp 0 --bitwise -- --set parallel.tp=2 --set parallel.sp=true --set train.recompute=full
check tp2_sp_selective 2 tp2_sp 0 --bitwise -- --set parallel.tp=2 --set parallel.sp=true --set train.recompute=selective

# resume: the run's step-3 checkpoint (and its log up to step 3) in a fresh
# directory, resumed to step 5: bitwise equal to the uninterrupted run
if run saved 1 --set out.save_every=3; then
    mkdir -p "$tmp/resume" && cp -a "$tmp/saved/step_00000003" "$tmp/resume/"
    grep -E '"step":[0-3],' "$tmp/saved/log.jsonl" >"$tmp/resume/log.jsonl"
    if timeout -k 5 120 "$bin" --config "$cfg" --set out.dir="$tmp/resume" --set out.resume=true >"$tmp/resume2.out" 2>&1 &&
        out=$("$py" tests/parallel/compare.py "$tmp/bf16" "$tmp/resume" $STEPS --bitwise 2>&1); then ok "resume_bitwise ($out)"
    else not_ok resume_bitwise "${out:-} $(tail -n 2 "$tmp/resume2.out" | tr '\n' ' ')"; fi
else not_ok resume_bitwise "the run with save_every 3 failed: $(tail -n 3 "$tmp/saved.out" | tr '\n' ' ')"; fi

# the same under ZeRO in buckets of one layer, DP 2: the step-3 checkpoint
# must hold every rank's chunks of the master weights
if run zero_saved 2 --set parallel.zero=1 --set parallel.dp_bucket_mb=0.001 --set out.save_every=3; then
    mkdir -p "$tmp/zero_resume" && cp -a "$tmp/zero_saved/step_00000003" "$tmp/zero_resume/"
    grep -E '"step":[0-3],' "$tmp/zero_saved/log.jsonl" >"$tmp/zero_resume/log.jsonl"
    if timeout -k 5 180 scripts/launch.sh -n 2 --log-dir "$tmp/zero_resume/launch" -- "$bin" --config "$cfg" \
        --set out.dir="$tmp/zero_resume" --set out.resume=true --set parallel.zero=1 --set parallel.dp_bucket_mb=0.001 \
        >"$tmp/zero_resume2.out" 2>&1 &&
        out=$("$py" tests/parallel/compare.py "$tmp/zero_saved" "$tmp/zero_resume" $STEPS --bitwise 2>&1); then
        ok "zero_buckets_resume_bitwise ($out)"
    else not_ok zero_buckets_resume_bitwise "${out:-} $(tail -n 2 "$tmp/zero_resume2.out" | tr '\n' ' ')"; fi
else not_ok zero_buckets_resume_bitwise "the run with save_every 3 failed: $(tail -n 3 "$tmp/zero_saved.out" | tr '\n' ' ')"; fi

# the checkpoint holds the fp32 master weights, not the bf16 working copy:
# most weights use the low 16 bits of their float32 (under ZeRO, every
# rank's chunks of the sharded master, gathered)
for run_name in bf16 zero_saved; do
    "$py" - "$(ls -d "$tmp/$run_name"/step_* | tail -n 1)/model.safetensors" >"$tmp/master.out" 2>&1 <<'PY'
import json, struct, sys
import numpy as np
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]; header = json.loads(f.read(n)); data = f.read()
b, e = header["h.0.mlp.c_fc.weight"]["data_offsets"]
w = np.frombuffer(data[b:e], np.uint32)
frac = float(np.mean((w & 0xFFFF) != 0))
print(f"{frac:.3f} of h.0.mlp.c_fc.weight use the low bits")
sys.exit(0 if frac > 0.9 else 1)
PY
    if [ $? -eq 0 ]; then ok "checkpoint_has_fp32_master_$run_name ($(cat "$tmp/master.out"))"
    else not_ok "checkpoint_has_fp32_master_$run_name" "$(cat "$tmp/master.out")"; fi
done

# Memory per rank, from the bytes per parameter: bf16 working weights (2),
# float32 gradients (4), and a float32 master with two moments (12). ZeRO at
# DP 2 keeps 1/2 of those 12 (Megatron's distributed optimizer): its model
# holds no master. The run's budget must say so, and equal what it allocated.
for spec in "bf16 1 0" "zero_saved 2 1"; do
    # shellcheck disable=SC2086
    set -- $spec
    out=$("$py" - "$tmp/$1/log.jsonl" "$2" "$3" 2>&1 <<'PY'
import json, sys
dp, zero = int(sys.argv[2]), sys.argv[3] == "1"
line = next(json.loads(l) for l in open(sys.argv[1]) if "budget_bytes_per_rank" in l)
b, n = line["budget_bytes_per_rank"], line["budget_bytes_per_rank"]["grads"] // 4  # elements of the flat buffers
want_params, want_optim = (2 * n, 12 * n // dp) if zero else (6 * n, 8 * n)
bad = [f"{k} {b[k]} want {w}" for k, w in (("params", want_params), ("optim", want_optim)) if b[k] != w]
if b["total"] != line["allocated_bytes"]: bad.append(f"budget {b['total']} allocated {line['allocated_bytes']}")
print("; ".join(bad) if bad else f"params {b['params']} optim {b['optim']} of {n} elements, allocated {b['total']}")
sys.exit(1 if bad else 0)
PY
)
    if [ $? -eq 0 ]; then ok "memory_per_parameter_$1 ($out)"; else not_ok "memory_per_parameter_$1" "$out"; fi
done

# SP's reduce-scatters and all-gathers carry activations only: bf16 sends half of fp32's bytes
run tp2_sp_fp32 2 --set parallel.tp=2 --set parallel.sp=true --set train.precision=fp32
bytes() { "$py" -c 'import json,sys; l=[json.loads(x) for x in open(sys.argv[1]) if "\"loss\"" in x][-1]; print(l[sys.argv[2]])' "$tmp/$1/log.jsonl" "$2"; }
run dp2_zero_fp32 2 --set parallel.zero=1 --set train.precision=fp32
zero_h=$(bytes zero_saved dp_all_gather_bytes 2>/dev/null) zero_f=$(bytes dp2_zero_fp32 dp_all_gather_bytes 2>/dev/null)
if [ -n "$zero_h" ] && [ -n "$zero_f" ] && [ "$zero_h" -gt 0 ] && [ $((2 * zero_h)) -eq "$zero_f" ]; then
    ok "zero_all_gather_bytes_halved ($zero_h vs $zero_f)"
else not_ok zero_all_gather_bytes_halved "bf16 ${zero_h:-?} fp32 ${zero_f:-?}"; fi
for k in tp_reduce_scatter_bytes tp_all_gather_bytes; do
    h=$(bytes tp2_sp "$k" 2>/dev/null) f=$(bytes tp2_sp_fp32 "$k" 2>/dev/null)
    if [ -n "$h" ] && [ -n "$f" ] && [ "$h" -gt 0 ] && [ $((2 * h)) -eq "$f" ]; then ok "${k}_halved ($h vs $f)"
    else not_ok "${k}_halved" "bf16 ${h:-?} fp32 ${f:-?}"; fi
done
exit $failed
