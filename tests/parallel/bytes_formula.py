"""Bytes a rank sends per step, by the formula: the oracle for the bytes that
real runs log (mode "runs") and that --plan's dry step reports (mode "plan").

Ring bytes per rank: all-reduce of n floats 2(p-1)(n//p)*4, reduce-scatter /
all-gather of n floats in total (p-1)(n//p)*4. Per micro-batch (N = B*T rows,
A of them a step): TP, no SP: all-reduces of N*C for the embedding, 2 per layer
forward, the LM head's dX and 2 per layer backward, plus N (row max) and 2N
(sum-exp, target logit) for the loss. SP: the N*C all-reduces become
reduce-scatters (embedding, 2 per layer forward, LM head dX, 2 per layer
backward) and all-gathers (2 per layer forward, final LayerNorm, 2 per layer
backward, embedding backward), and once a step the replicated gradients are
summed (wpe T*C, LayerNorms 4C per layer + 2C, row-parallel biases 2C per
layer). Full recomputation reruns each layer's forward collectives up to its
MLP projection in the backward pass: without SP the attention's all-reduce,
with SP its reduce-scatter and both LayerNorms' all-gathers. SP with
parallel.sp_regather (the default) keeps LayerNorm outputs as row shards and
all-gathers them again in the backward pass: 2 more per layer and the final
LayerNorm's. Once a step: the grad norm's exact sum of squares (NORM floats,
EXACT_SUMSQ_PIECES in kernels/exact_sumsq.h). DP: the gradients
(all-reduce, or ZeRO's reduce-scatter + all-gather of the buffer, the gather in
the working weights' type: float32 here, and the grad norm's NORM floats), the
loss (1 float).

usage: bytes_formula.py runs|plan TMP L C V T B G
"""
import json
import sys

mode, tmp = sys.argv[1], sys.argv[2]
L, C, V, T, B, G = map(int, sys.argv[3:])
NORM = 4 * 64 // 8 + 2  # EXACT_SUMSQ_PIECES: 8 bits of a 256-bit sum a float, 2 flags
KEYS = ["tp_all_reduce", "tp_reduce_scatter", "tp_all_gather", "dp_all_reduce", "dp_reduce_scatter", "dp_all_gather"]


def ar(p, n):
    return 2 * (p - 1) * (n // p) * 4


def rs(p, n):
    return (p - 1) * (n // p) * 4


def n_params(tp):
    Vp = -(-V // (128 * tp)) * 128 * tp
    per_layer = 2*C + 3*C*C//tp + 3*C//tp + C*C//tp + C + 2*C + 4*C*C//tp + 4*C//tp + 4*C*C//tp + C
    return Vp // tp * C + T * C + L * per_layer + 2 * C


def expected(tp, dp, sp, zero, mb=B, recompute="none", regather=True):
    N, A = mb * T, G // (mb * dp)
    rebuilt = L if recompute == "full" else 0
    reductions, gathers = 4 * L + rebuilt, 4 * L + 2 * rebuilt + (2 * L + 1 if regather else 0)
    e = dict.fromkeys(KEYS, 0)
    if not sp:
        e["tp_all_reduce"] = A * ((2 + reductions) * ar(tp, N * C) + ar(tp, N) + ar(tp, 2 * N)) + ar(tp, NORM)
    else:
        e["tp_reduce_scatter"] = A * (2 + reductions) * rs(tp, N * C)
        e["tp_all_gather"] = A * (2 + gathers) * rs(tp, N * C)
        e["tp_all_reduce"] = A * (ar(tp, N) + ar(tp, 2 * N)) + ar(tp, T * C + 6 * C * L + 2 * C) + ar(tp, NORM)
    n = n_params(tp)
    if zero and dp > 1:
        pad = -(-n // dp) * dp
        e["dp_reduce_scatter"], e["dp_all_gather"] = rs(dp, pad), rs(dp, pad)
        e["dp_all_reduce"] = ar(dp, 1) + ar(dp, NORM)
    else:
        e["dp_all_reduce"] = ar(dp, n) + ar(dp, 1)
    return e


def check_runs():
    bad = 0
    for name, tp, dp, sp, zero, *rest in [("tp2", 2, 1, 0, 0), ("tp4_sp", 4, 1, 1, 0), ("tp2_dp2", 2, 2, 0, 0),
                                          ("dp2_zero", 1, 2, 0, 1), ("tp2_dp2_sp_zero", 2, 2, 1, 1), ("tp3_sp", 3, 1, 1, 0),
                                          ("tp2_sp_keep", 2, 1, 1, 0, "none", False),
                                          ("tp2_sp_drop_keep", 2, 1, 1, 0, "full", False)]:
        lines = [json.loads(l) for l in open(f"{tmp}/{name}/log.jsonl") if '"loss"' in l]
        want = expected(tp, dp, sp, zero, B, *rest)
        got = {k: lines[-1][k + "_bytes"] for k in want}
        if got == want:
            print(f"ok bytes_{name}_equal_formula")
        else:
            bad = 1
            print(f"not ok bytes_{name}_equal_formula - got {got} want {want}")
    return bad


def check_plan():
    plans = [(f"plan{devices}", True) for devices in (2, 4)] + [("plan2_keep", False)]
    rows = [(json.loads(l), regather) for name, regather in plans for l in open(f"{tmp}/{name}.jsonl")]
    wrong = []
    for r, regather in rows:
        want = expected(r["tp"], r["dp"], r["sp"], r["zero"], r["micro_batch"], r["recompute"], regather)
        got = {k: r[k + "_bytes"] for k in want}
        if got != want:
            wrong.append(f'{r["tp"]}x{r["dp"]} sp {r["sp"]} {r["recompute"]} mb {r["micro_batch"]} zero {r["zero"]}: '
                         f"got {got} want {want}")
    if rows and not wrong:
        print(f"ok plan_bytes_equal_formula ({len(rows)} layouts)")
        return 0
    print(f"not ok plan_bytes_equal_formula - {len(wrong)} of {len(rows)} layouts differ: {wrong[:2]}")
    return 1


sys.exit(check_runs() if mode == "runs" else check_plan())
