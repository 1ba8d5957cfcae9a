#!/usr/bin/env bash
# No gradient zeroing pass: a step's first micro-batch writes every
# parameter gradient, the later ones add to it (kernels/ops.h, acc). With
# train.poison_grads every tensor's gradient is NaN before each step, so one
# element the first micro-batch leaves unwritten makes the step's norm NaN
# (the run stops) or its results differ: each layout's poisoned run must
# finish with the plain run's bits (losses, grad norms, model and optimizer
# state): one micro-batch and four, TP 2 with SP (rows of wpe no rank's rows
# are at) under full recompute with dropout, DP 2 with ZeRO in buckets
# (reduced during the last micro-batch's backward), selective recompute, and
# a TP 2 run whose tokens miss all of rank 1's vocabulary rows (the tied
# embedding's gradient comes from the LM head's product alone there). The
# step's op table has no `zero` row: neither the gradients nor the residual
# stream's gradient (ln_f's backward writes it) are zeroed. The same on the
# emulated CUDA backend is in tests/t_cuda_emu.sh.
# cost: 20 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" grad_writes
export OMP_NUM_THREADS=1

random_shards "$tmp/data" 300 17 3000 600
random_shards "$tmp/few" 13 18 3000 600 # tokens below 13 of a vocabulary of 300
cat >"$tmp/cfg.json" <<JSON
{"model": {"n_layer": 2, "n_head": 4, "n_embd": 32, "vocab_size": 300, "seq_len": 8},
 "train": {"micro_batch": 2, "global_batch": 8, "steps": 3, "lr": 3e-3, "min_lr": 3e-4, "warmup": 1, "grad_clip": 0.5,
           "eps": 1e-5},
 "data": {"train": "$tmp/data/train_*.bin", "val": "$tmp/data/val_*.bin"},
 "out": {"eval_every": 0, "eval_batches": 1, "sample_tokens": 0, "resume": false, "log_every": 1}}
JSON
run() { # NAME RANKS [--set ...]
    local name="$1" n="$2"; shift 2
    timeout -k 5 120 scripts/launch.sh -n "$n" --log-dir "$tmp/$name/launch" -- "$bin" --config "$tmp/cfg.json" \
        --set out.dir="$tmp/$name" "$@" >"$tmp/$name.out" 2>&1
}
# poisoned NAME RANKS [--set ...]: the layout plain and poisoned, the same bits
poisoned() {
    local name="$1" n="$2" out=""; shift 2
    if run "$name" "$n" "$@" && run "${name}_nan" "$n" "$@" --set train.poison_grads=true &&
        out=$("$py" tests/parallel/compare.py "$tmp/$name" "$tmp/${name}_nan" 3 --bitwise 2>&1) &&
        cmp -s "$tmp/$name/step_00000003/optimizer.safetensors" "$tmp/${name}_nan/step_00000003/optimizer.safetensors"
    then ok "poisoned_grads_change_nothing_$name ($out, optimizer state the same bytes)"
    else not_ok "poisoned_grads_change_nothing_$name" "${out:-} $(tail -n 2 "$tmp/${name}_nan.out" | tr '\n' ' ')"; fi
}
poisoned accum4 1
poisoned accum1 1 --set train.global_batch=2
# one sequence of 8 a micro-batch: each rank's 4 rows are at half of wpe's positions
poisoned tp2_sp_full_dropout 2 --set parallel.tp=2 --set parallel.sp=true --set train.recompute=full --set model.dropout=0.1 \
    --set train.micro_batch=1 --set train.global_batch=4
poisoned dp2_zero_buckets 2 --set parallel.zero=1 --set parallel.dp_bucket_mb=0.001
poisoned selective 1 --set train.recompute=selective --set train.global_batch=4
poisoned tp2_few_tokens 2 --set parallel.tp=2 --set "data.train=$tmp/few/train_*.bin" --set "data.val=$tmp/few/val_*.bin"

# The op table (out.op_times): no zeroing op in the step, the backward's
# products all there
if run timed 1 --set out.op_times=true && [ -s "$tmp/timed/op_times.tsv" ]; then
    if ! grep -qP '^zero\t' "$tmp/timed/op_times.tsv" && grep -qP '^layernorm_backward\t' "$tmp/timed/op_times.tsv"
    then ok step_has_no_zeroing_op
    else not_ok step_has_no_zeroing_op "$(grep -P '^zero\t' "$tmp/timed/op_times.tsv")"; fi
else not_ok step_has_no_zeroing_op "the timed run failed: $(tail -n 2 "$tmp/timed.out" | tr '\n' ' ')"; fi
exit $failed
