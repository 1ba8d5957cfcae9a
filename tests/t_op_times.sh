#!/usr/bin/env bash
# The per-op timer (out.op_times, kernels/timed.c) on the CPU: it changes no
# result (losses and weights bitwise equal to an untimed run), writes
# out.dir/op_times.tsv with one well-formed line per op that ran, counts
# each op's calls per step as the model issues them, and the ops' times fit
# inside the step's. Without the key nothing is written. The same on the
# emulated CUDA backend (events) is in tests/t_cuda_emu.sh. Under TP 2 with
# SP the counts show each product that reads rows an all-gather delivers
# split in two around the gather's wait (this rank's rows first, then the
# other rank's).
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" op_times
export OMP_NUM_THREADS=1

random_shards "$tmp/data" 300 13 3000 600
cat >"$tmp/cfg.json" <<JSON
{"model": {"n_layer": 3, "n_head": 2, "n_embd": 32, "vocab_size": 300, "seq_len": 16},
 "train": {"micro_batch": 2, "global_batch": 4, "steps": 4, "lr": 3e-3, "warmup": 1, "grad_clip": 0.5},
 "data": {"train": "$tmp/data/train_*.bin", "val": "$tmp/data/val_*.bin"},
 "out": {"eval_every": 2, "eval_batches": 1, "sample_tokens": 0, "resume": false}}
JSON
run() { # NAME [--set ...]
    local name="$1"; shift
    timeout -k 5 120 "$bin" --config "$tmp/cfg.json" --set out.dir="$tmp/$name" "$@" >"$tmp/$name.out" 2>&1
}

if run plain && run timed --set out.op_times=true; then
    if out=$("$py" tests/parallel/compare.py "$tmp/plain" "$tmp/timed" 4 --bitwise 2>&1); then ok "timer_changes_nothing ($out)"
    else not_ok timer_changes_nothing "$out"; fi
    [ ! -e "$tmp/plain/op_times.tsv" ] && ok untimed_run_writes_no_table || not_ok untimed_run_writes_no_table "op_times.tsv exists"
    grep -q "every op timed" "$tmp/timed.out" && ok timer_announced || not_ok timer_announced "$(grep backend "$tmp/timed.out")"
    tsv="$tmp/timed/op_times.tsv"
    if [ -s "$tsv" ] && out=$("$py" - "$tsv" "$tmp/timed/log.jsonl" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
# the first line names the run's shape (what --plan --calibrate fits to)
assert lines[0].startswith("# shape: "), lines[0]
shape = json.loads(lines[0][len("# shape: "):])
want_shape = {"model.n_layer": 3, "model.n_embd": 32, "train.micro_batch": 2, "train.global_batch": 4, "parallel.tp": 1,
              "parallel.dp": 1, "train.recompute": "none", "device": "cpu"}
assert {k: shape.get(k) for k in want_shape} == want_shape, shape
# then the ceilings line (the rate columns' own checks: tests/t_op_rates.sh)
assert lines[1].startswith("# ceilings: "), lines[1]
rows = [l.split("\t") for l in lines[2:]]
assert rows[0][:5] == ["op", "calls_per_step", "device_ms_per_step", "host_ms_per_step", "share"], rows[0]
ops = {}
for r in rows[1:]:
    assert len(r) == len(rows[0]), r
    ops[r[0]] = [float(x) for x in r[1:5]]
    assert all(x >= 0 for x in ops[r[0]]), r
# per step: 2 micro-batches x 3 layers x 4 linear layers (c_proj's backward with the GELU's:
# matmul_backward_dgelu; c_attn's and c_fc's in two calls each, the input gradient, then the
# weight's (with the bias's) beside the input gradient's TP reduction); one AdamW over every tensor; two uploads (the rank's tokens of the step,
# read in place by both micro-batches, and the step's learning rate and bias corrections); every
# residual add fused with the LayerNorm after it (2 per layer), so only the first block's ln_1 is
# a LayerNorm alone
want = {"matmul_forward": 24, "matmul_backward": 30, "matmul_backward_dgelu": 6, "attention_forward": 6, "lmhead_forward": 2, "adamw": 1,
        "loss_accumulate": 2, "loss_finish": 1, "grad_sumsq": 1, "upload": 2, "bias_residual_layernorm": 12,
        "layernorm_forward": 2}
for op, n in want.items():
    assert op in ops and ops[op][0] == n, (op, ops.get(op), n)
assert "bias_residual_add" not in ops, ("unfused residual adds", ops["bias_residual_add"])
assert abs(sum(v[3] for v in ops.values()) - 1) < 1e-3, "shares do not add up to 1"
# steps 2-4 are counted: their ms (wall clock) bound the ops' total
ms = [json.loads(l)["ms"] for l in open(sys.argv[2]) if '"ms"' in l and json.loads(l).get("step", 0) > 1]
step = sum(ms) / len(ms)
total = sum(v[1] for v in ops.values())
assert 0 < total <= step * 1.05, (total, step)
print(f"{len(ops)} ops, {total:.2f} of {step:.2f} ms per step")
PY
    ); then ok "op_table_well_formed ($out)"
    else not_ok op_table_well_formed "$out"; fi
    grep -q "^matmul_forward" <(sed -n '/time per step by op/,/wrote/p' "$tmp/timed.out" | awk '{print $1}') &&
        ok op_table_printed || not_ok op_table_printed "no table on stdout"
else not_ok timed_runs "$(tail -n 3 "$tmp/plain.out" "$tmp/timed.out" | tr '\n' ' ')"; fi

# TP 2 with SP, rank 0's table (rank 0's own rows come first, then the one
# block after them: two calls where the product is split). Per layer and
# micro-batch: forward, c_attn and c_fc split (2 + 2) plus the row-parallel
# c_proj's (1 + 1): 6 matmul_forward; backward, c_proj of the MLP splits its
# input gradient (2 matmul_backward_dgelu) and adds the weight gradient (1
# matmul_backward), c_fc's input and weight gradients (2), the attention's
# c_proj split (2 + 1) and c_attn's (2): 8 matmul_backward; bias gradients of
# both c_projs: 2 (c_fc's comes with its weight gradient, as without SP). The LM
# head's forward is split too (2 per micro-batch), and its backward makes the
# input gradient, then the weight gradient beside that gradient's
# reduce-scatter (2). 2 micro-batches x 3 layers.
if timeout -k 5 120 scripts/launch.sh -n 2 --log-dir "$tmp/sp/launch" -- "$bin" --config "$tmp/cfg.json" --set out.dir="$tmp/sp" \
    --set parallel.tp=2 --set parallel.sp=true --set out.op_times=true >"$tmp/sp.out" 2>&1 &&
    out=$("$py" - "$tmp/sp/op_times.tsv" 2>&1 <<'PY'
import sys
calls = {r[0]: float(r[1]) for r in (l.split("\t") for l in list(open(sys.argv[1]))[3:])}
want = {"matmul_forward": 36, "matmul_backward": 48, "matmul_backward_dgelu": 12, "bias_backward": 12, "lmhead_forward": 4,
        "lmhead_backward": 4}
bad = {op: (calls.get(op), n) for op, n in want.items() if calls.get(op) != n}
assert not bad, f"calls per step (got, want): {bad}"
print(", ".join(f"{op} {n}" for op, n in want.items()))
PY
    ); then ok "sp_products_split_around_gathers ($out)"
else not_ok sp_products_split_around_gathers "${out:-} $(tail -n 3 "$tmp/sp.out" | tr '\n' ' ')"; fi
exit $failed
