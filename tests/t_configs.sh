#!/usr/bin/env bash
# The llm.c GPT-2 configs (configs/llmc_gpt2_*.json) against the flags of
# llm.c's own scripts (scripts/run_gpt2_{124M,350M,774M,1558M}.sh, 8 GPUs),
# written out below: model shape from -e dNN, micro-batch -b, tokens per
# step -d, LR -l and its final fraction -q, warm-up -u, steps -x (124M: its
# DONE_00018865), checkpoints -n, evaluation -v and -m (20 batches of
# -b x 1024 tokens on each of 8 ranks), samples -s and -g, weight decay -c,
# ZeRO -z 1, no recompute -r 0, HellaSwag -h 1; and each config's own layout
# (TP 1, DP 8, its micro-batch, ZeRO) fits 8 devices of 80 GiB by --plan.
# Every other config of configs/ loads in --plan.
# tier: check (make check: the quick tier, tests/run.sh --check)
# cost: 15 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" configs

check_llmc() { # SIZE LAYERS WIDTH HEADS -b -d -l -q -u -x -n -s -g
    local f="configs/llmc_gpt2_$1.json" out
    if out=$("$py" - "$f" "${@:2}" 2>&1 <<'PY'
import json, sys
f = sys.argv[1]
L, C, NH, b, d, l, q, u, x, n, s, g = (float(v) for v in sys.argv[2:])
c = json.load(open(f))
m, t, o, p = c["model"], c["train"], c["out"], c["parallel"]
want = {
    "shape": ((m["n_layer"], m["n_embd"], m["n_head"], m["seq_len"], m["vocab_size"]), (L, C, NH, 1024, 50257)),
    "-b": (t["micro_batch"], b), "-d tokens": (t["global_batch"] * m["seq_len"], d), "-l": (t["lr"], l),
    "-q": (t["min_lr"], l * q), "-u": (t["warmup"], u), "-x": (t["steps"], x), "-n": (o["save_every"], n),
    "-v": (o["eval_every"], 250), "-m tokens": (o["eval_batches"] * t["global_batch"], 20 * b * 8),
    "-s": (o["sample_every"], s), "-g": (o["sample_tokens"], g), "-c": (t["weight_decay"], 0.1),
    "-z": (p["zero"], 1), "-r": (t["recompute"], "none"), "-h": (bool(o["hellaswag"]), True),
    "schedule": (t["lr_schedule"], "cosine"), "device": (c["device"], "cuda"),
}
bad = []
for k, (got, exp) in want.items():
    if k == "-m tokens":  # llm.c's 20 batches a rank; ours count global batches: the nearest whole number
        ok = abs(got - exp) <= t["global_batch"] / 2
    elif isinstance(exp, float) and not isinstance(got, tuple):
        ok = abs(got - exp) <= 1e-12 * max(1.0, abs(exp))
    else:
        ok = got == exp
    if not ok:
        bad.append(f"{k}: {got} (llm.c: {exp})")
if bad:
    sys.exit("; ".join(bad))
PY
    ); then ok "llmc_gpt2_$1_matches_llmc_flags"; else not_ok "llmc_gpt2_$1_matches_llmc_flags" "$out"; fi
    # its own layout fits 8 devices of 80 GiB
    local mb plan="$tmp/plan_$1.jsonl"
    mb=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["train"]["micro_batch"])' "$f")
    if "$bin" --plan --config "$f" --devices 8 --device-gib 80 --plan-json "$plan" >"$tmp/plan_$1.out" 2>&1 &&
        out=$("$py" - "$plan" "$mb" 2>&1 <<'PY'
import json, sys
rows = [json.loads(x) for x in open(sys.argv[1])]
mine = [r for r in rows if (r["tp"], r["dp"], r["sp"], r["recompute"], r["micro_batch"], r["zero"])
        == (1, 8, False, "none", int(sys.argv[2]), 1)]
if len(mine) != 1 or not mine[0]["fits"]:
    sys.exit(f"the config's layout: {mine}")
print(f'{mine[0]["bytes"] / 2**30:.1f} GiB a device')
PY
        ); then ok "llmc_gpt2_$1_fits_8x80GiB ($out)"
    else not_ok "llmc_gpt2_$1_fits_8x80GiB" "$out $(tail -n 2 "$tmp/plan_$1.out" | tr '\n' ' ')"; fi
}
#          size   L  C    NH -b  -d      -l      -q  -u  -x     -n   -s     -g
check_llmc 124m  12 768  12 64 524288  0.0006  0.0 700 18865  5000 20000  144
check_llmc 350m  24 1024 16 64 524288  0.0003  0.0 700 60000  2000 100000 144
check_llmc 774m  36 1280 20 32 524288  0.00025 0.0 700 286102 4000 300000 144
check_llmc 1558m 48 1600 25 16 1048576 0.0006  0.1 700 32000  2000 300000 384

for f in configs/*.json; do
    case "$f" in configs/llmc_gpt2_*) continue ;; esac
    if "$bin" --plan --config "$f" --devices 8 >"$tmp/any.out" 2>&1; then ok "loads_$(basename "$f" .json)"
    else not_ok "loads_$(basename "$f" .json)" "$(tail -n 2 "$tmp/any.out" | tr '\n' ' ')"; fi
done
exit "$failed"
