# The trainer on the emulated device, as tests/t_cuda_emu.sh and
# tests/t_cuda_emu_sanitizers.sh run it: random tokens, a tiny model (as
# tests/t_parallel.sh), train NAME BIN [--set ...] into $tmp/NAME, and the
# settings of the CUDA-graph runs (captured at step 2, replayed from step 3,
# through an evaluation and an LR that changes every step). Sourced after
# tests/lib.sh.
random_shards "$tmp/data" 300 13 3000 600
cat >"$tmp/cfg.json" <<JSON
{"model": {"n_layer": 2, "n_head": 4, "n_embd": 64, "vocab_size": 300, "seq_len": 16},
 "train": {"micro_batch": 2, "global_batch": 4, "steps": 3, "lr": 3e-3, "min_lr": 3e-4, "warmup": 1, "grad_clip": 0.5, "eps": 1e-5},
 "data": {"train": "$tmp/data/train_*.bin", "val": "$tmp/data/val_*.bin"},
 "out": {"eval_every": 0, "eval_batches": 2, "sample_tokens": 0, "resume": false, "log_every": 1}}
JSON
train() { # NAME BIN [--set ...]
    local name="$1" b="$2"; shift 2
    timeout -k 5 300 "$b" --config "$tmp/cfg.json" --set out.dir="$tmp/$name" "$@" >"$tmp/$name.out" 2>&1
}
# recompute_bitwise REF PREFIX CHECK BIN [--set ...]: runs PREFIX_selective and PREFIX_full (REF's
# settings, given again, with train.recompute) have REF's bits at step 3: checks CHECK_selective_bitwise
# and CHECK_full_bitwise
recompute_bitwise() {
    local ref="$1" prefix="$2" check="$3" b="$4" mode out
    shift 4
    for mode in selective full; do
        if train "${prefix}_$mode" "$b" "$@" --set train.recompute=$mode &&
            out=$("$py" tests/parallel/compare.py "$tmp/$ref" "$tmp/${prefix}_$mode" 3 --bitwise 2>&1); then
            ok "${check}_${mode}_bitwise ($out)"
        else not_ok "${check}_${mode}_bitwise" "${out:-} $(tail -n 2 "$tmp/${prefix}_$mode.out" | tr '\n' ' ')"; fi
    done
}
graph=(--set train.steps=6 --set train.warmup=2 --set out.eval_every=2)
