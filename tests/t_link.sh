#!/usr/bin/env bash
# The link model of projected runs and --plan (parallel/comm.h, comm_link):
# build/test_link checks the nccl-tests table (interpolation in log size,
# latency floor, fallbacks, rows per group size, parser errors), comm_null's
# modeled time and each shipped table's coverage (2, 4 and 8 ranks of
# all_reduce, reduce_scatter and all_gather); the shipped tables are what
# configs/links/derive.py writes from its cited figures; then --plan end to
# end: with a one-row table of 1 GB/s every layout's comm ms is its bytes /
# 1 GB/s (the formula here, from --plan-json's own byte counts), with rows
# per group size the TP and DP groups each take their own size's, every
# shipped table plans, the H100 table gives other times than the flat
# model, and a bad interconnect.table stops the plan and a projected run
# with a message naming the key, the file and the line; the collectives per
# layer that --plan's dry step counts (per SP and recompute mode) are the
# ones docs/scaling.md's table states; a projected DP run models the
# bucketed all-reduce's (and ZeRO's reduce-scatters') overlap with the
# backward pass, and a projected TP run its collectives' overlap with the
# products beside them, labelled as modeled; --plan's TP overlap against a
# formula written here. Prints
# "ok NAME" / "not ok NAME - reason".
# cost: 20 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" link
tbin=build/test_link
mkdir -p build
if ${CC:-gcc} -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I. -o "$tbin" tests/test_link.c parallel/comm_null.c \
    parallel/comm.c util/err.c -lpthread -lrt -lm >"$tmp/build.log" 2>&1; then
    ok build_test_link
else
    not_ok build_test_link "$(head -c 300 "$tmp/build.log")"
    exit 1
fi
"$tbin" "$tmp" configs/links/*.txt || failed=1
if out=$("$py" configs/links/derive.py --check 2>&1); then ok links_tables_derived
else not_ok links_tables_derived "$out"; fi

plan() { # JSON_OUT [--set ...]: --plan of configs/tiny.json on 8 devices
    local out="$1"; shift
    "$bin" --plan --config configs/tiny.json --devices 8 --plan-json "$out" "$@" >"$out.txt" 2>&1
}
printf '# 1 GB/s at every size from 1 byte\nall_reduce 1 1\n' >"$tmp/slow.txt"
if plan "$tmp/slow.json" --set "interconnect.table=$tmp/slow.txt" && plan "$tmp/flat.json" &&
    plan "$tmp/h100.json" --set interconnect.table=configs/links/h100_sxm_nvlink4_x8.txt; then
    ok plan_runs
else
    not_ok plan_runs "$(tail -n 3 "$tmp"/*.json.txt | tr '\n' ' ' | cut -c1-300)"
fi
"$py" - "$tmp" <<'PY' || failed=1
import json, sys
d = sys.argv[1]
def rows(name):
    try:
        return [json.loads(l) for l in open(f"{d}/{name}.json") if l.strip()]
    except OSError as e:
        return []
slow, flat, h100 = rows("slow"), rows("flat"), rows("h100")
key = lambda r: (r["tp"], r["dp"], r["sp"], r["recompute"], r["micro_batch"], r["zero"])
# every collective at 1 GB/s: comm ms = bytes sent / 1e6, for every layout
bad = [(key(r), r["comm_ms"], sum(v for k, v in r.items() if k.endswith("_bytes")) / 1e6) for r in slow]
bad = [b for b in bad if abs(b[1] - b[2]) > 0.0015 + 1e-6 * b[2]]
talk = [r for r in slow if r["tp"] * r["dp"] > 1]
ok = slow and talk and not bad
print("ok plan_table_comm_time" if ok else f"not ok plan_table_comm_time - {len(slow)} rows; (layout, comm ms, bytes/1e6): {bad[:3]}")
# the H100 table against the flat 370 GB/s + 20 us: same layouts, other times
f = {key(r): r["comm_ms"] for r in flat}
diff = [k for k, v in ((key(r), r["comm_ms"]) for r in h100) if k in f and abs(v - f[k]) > 0.0015]
ok = h100 and len(h100) == len(flat) and diff
print("ok plan_h100_table_differs" if ok else f"not ok plan_h100_table_differs - {len(h100)} vs {len(flat)} rows, {len(diff)} differ")
PY
grep -q "communication from the nccl-tests table configs/links/h100_sxm_nvlink4_x8.txt" "$tmp/h100.json.txt" &&
    ok plan_names_table || not_ok plan_names_table "$(sed -n 2p "$tmp/h100.json.txt")"
for t in configs/links/*.txt; do
    n=$(basename "$t" .txt)
    if plan "$tmp/shipped_$n.json" --set "interconnect.table=$t" && grep -q "nccl-tests table $t" "$tmp/shipped_$n.json.txt"
    then ok "plan_shipped_$n"; else not_ok "plan_shipped_$n" "$(tail -n 2 "$tmp/shipped_$n.json.txt" | tr '\n' ' ')"; fi
done

# Rows per group size: all_reduce at 1, 2 and 4 GB/s for 2, 4 and 8 ranks (reduce_scatter and
# all_gather use them too): each layout's comm ms is its TP bytes at its TP size's busbw plus its
# DP bytes at its DP size's.
printf 'all_reduce 1 1 2\nall_reduce 1 2 4\nall_reduce 1 4 8\n' >"$tmp/degrees.txt"
if plan "$tmp/degrees.json" --set "interconnect.table=$tmp/degrees.txt"; then
    "$py" - "$tmp/degrees.json" <<'PY' || failed=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
gbps = {1: 1, 2: 1, 4: 2, 8: 4}  # a group of 1 sends nothing
sent = lambda r, g: sum(v for k, v in r.items() if k.startswith(g + "_") and k.endswith("_bytes"))
want = lambda r: sent(r, "tp") / gbps[r["tp"]] / 1e6 + sent(r, "dp") / gbps[r["dp"]] / 1e6
bad = [(r["tp"], r["dp"], r["comm_ms"], round(want(r), 3)) for r in rows if abs(r["comm_ms"] - want(r)) > 0.0015 + 1e-6 * want(r)]
sizes = {(r["tp"], r["dp"]) for r in rows}
ok = rows and not bad and {(1, 8), (2, 4), (4, 2)} <= sizes  # tiny.json's 4 heads allow TP up to 4
print("ok plan_table_per_group_size" if ok else
      f"not ok plan_table_per_group_size - layouts {sorted(sizes)}; (tp, dp, comm ms, want): {bad[:3]}")
PY
else not_ok plan_table_per_group_size "$(tail -n 2 "$tmp/degrees.json.txt" | tr '\n' ' ')"; fi

# Groups across nodes (interconnect.node_*): on nodes of 2 ranks at 3 GB/s a node, a group with
# ranks on two nodes goes over the network, not the link inside a node (1 GB/s here): the TP group
# when tp > 2, a DP group when tp x dp > 2, the node's 3 GB/s shared by the min(tp, 2) DP groups
# crossing it at once. Nodes as large as the world change nothing.
net=(--set "interconnect.table=$tmp/slow.txt" --set interconnect.node_gbps=3 --set interconnect.node_latency_us=0)
if plan "$tmp/nodes.json" "${net[@]}" --set interconnect.node_gpus=2 &&
    plan "$tmp/one_node.json" "${net[@]}" --set interconnect.node_gpus=8; then
    "$py" - "$tmp/nodes.json" "$tmp/one_node.json" "$tmp/slow.json" <<'PY' || failed=1
import json, sys
rows = lambda p: [json.loads(l) for l in open(p) if l.strip()]
nodes, one_node, slow = (rows(p) for p in sys.argv[1:])
sent = lambda r, g: sum(v for k, v in r.items() if k.startswith(g + "_") and k.endswith("_bytes"))
def want(r):
    tp, dp = r["tp"], r["dp"]
    tp_net, dp_net = tp > 2, dp > 1 and tp * dp > 2
    tp_gbps = 3 if tp_net else 1
    dp_gbps = min(3 / min(tp, 2), 370) if dp_net else 1
    return sent(r, "tp") / tp_gbps / 1e6 + sent(r, "dp") / dp_gbps / 1e6, tp_net, dp_net
bad = []
for r in nodes:
    ms, tp_net, dp_net = want(r)
    if abs(r["comm_ms"] - ms) > 0.0015 + 1e-6 * ms or r.get("tp_across_nodes") != tp_net or r.get("dp_across_nodes") != dp_net:
        bad.append((r["tp"], r["dp"], r["comm_ms"], round(ms, 3), r.get("tp_across_nodes"), r.get("dp_across_nodes")))
crossing = {(r["tp"], r["dp"]) for r in nodes if r.get("dp_across_nodes")}
ok = nodes and not bad and {(1, 8), (2, 4), (4, 2)} <= crossing and any(r["tp_across_nodes"] for r in nodes)
print("ok plan_groups_across_nodes" if ok else
      f"not ok plan_groups_across_nodes - {len(nodes)} rows, crossing {sorted(crossing)}; (tp, dp, comm ms, want, tp net, dp net): {bad[:3]}")
key = lambda r: (r["tp"], r["dp"], r["sp"], r["recompute"], r["micro_batch"], r["zero"])
base = {key(r): r["comm_ms"] for r in slow}
diff = [key(r) for r in one_node if base.get(key(r)) != r["comm_ms"] or r["tp_across_nodes"] or r["dp_across_nodes"]]
print("ok plan_one_node_unchanged" if one_node and len(one_node) == len(slow) and not diff else
      f"not ok plan_one_node_unchanged - {len(one_node)} vs {len(slow)} rows; differ: {diff[:3]}")
PY
    if grep -q "a group with ranks on more than one node of 2 (interconnect.node_gpus) at 3 GB/s a node" "$tmp/nodes.json.txt" &&
        grep -qE '^ +4 +2 .*\(TP across nodes\)$' "$tmp/nodes.json.txt" && ! grep -qE '^ +2 +4 .*across' "$tmp/nodes.json.txt"
    then ok plan_says_which_groups_cross_nodes
    else not_ok plan_says_which_groups_cross_nodes "$(sed -n 2p "$tmp/nodes.json.txt" | cut -c1-300)"; fi
else not_ok plan_groups_across_nodes "$(tail -n 2 "$tmp/nodes.json.txt" "$tmp/one_node.json.txt" | tr '\n' ' ')"; fi

# The collectives per layer and micro-batch, from --plan's dry step of the code: tiny.json at 1 and 2
# layers and at seq 64 and 128; the bytes each kind sends that grow with both are the layer's
# B*s*h-sized collectives (the embedding, the head and the cross-entropy do not grow with the
# layers, the parameter-sized SP gradient reductions not with the sequence). Divided by one such
# collective's ring bytes they are counts, which docs/scaling.md's table must state.
for L in 1 2; do for T in 64 128; do
    "$bin" --plan --config configs/tiny.json --devices 4 --plan-json "$tmp/count_${L}_$T.json" --set model.n_layer=$L \
        --set model.seq_len=$T --set train.global_batch=4 >"$tmp/count_${L}_$T.txt" 2>&1 || failed=1
done; done
"$py" - "$tmp" docs/scaling.md <<'PY' || failed=1
import json, re, sys
d, doc = sys.argv[1], sys.argv[2]
C, G, elem, dT = 128, 4, 4, 64  # tiny.json's width, the global batch set above, float32 on the CPU
KINDS = ("all_reduce", "reduce_scatter", "all_gather")
def rows(L, T):
    try:
        return {(r["tp"], r["sp"], r["recompute"], r["micro_batch"], r["zero"]): r
                for r in map(json.loads, open(f"{d}/count_{L}_{T}.json"))}
    except (OSError, ValueError):
        return {}
p = {(L, T): rows(L, T) for L in (1, 2) for T in (64, 128)}
derived, odd = {}, []
for key in p[(1, 64)]:
    tp, sp, rc = key[0], key[1], key[2]
    if tp == 1 or any(key not in p[k] for k in p):
        continue
    counts = []
    for kind in KINDS:
        b = lambda L, T: p[(L, T)][key][f"tp_{kind}_bytes"]
        per_layer = b(2, 128) - b(1, 128) - b(2, 64) + b(1, 64)
        rows_added = G // p[(1, 64)][key]["dp"] * dT  # this DP rank's sequences, 64 more positions each
        ring = (2 if kind == "all_reduce" else 1) * (tp - 1) / tp * rows_added * C * elem
        n = per_layer / ring
        if abs(n - round(n)) > 1e-9:
            odd.append((key, kind, n))
        counts.append(round(n))
    derived.setdefault(("on" if sp else "off", rc), set()).add(tuple(counts))
text = open(doc, encoding="utf-8").read()
at = text.find("Collectives of `B·s·h` elements per layer and micro-batch")
table = {}
for line in text[at:].split("\n")[1:] if at >= 0 else []:
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 5 and cells[0] in ("on", "off") and all(c.isdigit() for c in cells[2:]):
        table[(cells[0], cells[1])] = tuple(int(c) for c in cells[2:])
    elif table and not line.strip().startswith("|"):
        break
bad = [(mode, sorted(got), table.get(mode)) for mode, got in sorted(derived.items()) if got != {table.get(mode)}]
ok = len(derived) == 6 and len(table) == 6 and not bad and not odd
print(f"ok docs_collective_counts ({len(derived)} modes at TP 2 and 4)" if ok else
      f"not ok docs_collective_counts - {len(table)} doc rows, {len(derived)} modes; (mode, code's counts, doc's): {bad[:3]}"
      f"; not whole: {odd[:2]}")
PY

bad_table() { # NAME TABLE_TEXT EXPECTED_MESSAGE_PART MODE(plan|project)
    local name="$1" msg="$3" out rc
    printf '%b' "$2" >"$tmp/bad_$name.txt"
    if [ "$4" = plan ]; then
        out=$("$bin" --plan --config configs/tiny.json --devices 8 --set "interconnect.table=$tmp/bad_$name.txt" 2>&1); rc=$?
    else
        out=$("$bin" --config configs/tiny.json --set parallel.project=true --set parallel.tp=4 --set parallel.dp=1 \
            --set "out.dir=$tmp/proj_$name" --set "interconnect.table=$tmp/bad_$name.txt" 2>&1); rc=$?
    fi
    if [ "$rc" -ne 0 ] && grep -qF -- "$msg" <<<"$out" && [ ! -e "$tmp/proj_$name" ]; then ok "$name"
    else not_ok "$name" "status $rc, output: $(echo "$out" | tail -n 2 | tr '\n' ' ' | cut -c1-300)"; fi
}
bad_table bad_table_plan 'all_reduce 8 1\nallgather 8 1\n' "interconnect.table: $tmp/bad_bad_table_plan.txt:2: unknown collective 'allgather'" plan
bad_table bad_table_project 'all_reduce 8\n' "interconnect.table: $tmp/bad_bad_table_project.txt:1: expected" project
bad_table empty_table_project '# no rows\n' "bad_empty_table_project.txt: no all_reduce row" project
out=$("$bin" --plan --config configs/tiny.json --devices 8 --set "interconnect.table=$tmp/none.txt" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -qF "error: --set interconnect.table: $tmp/none.txt: cannot open the link table" <<<"$out"; then ok missing_table_plan
else not_ok missing_table_plan "status $rc: $out"; fi

# A projected DP run models the bucketed all-reduce hiding behind the
# backward pass (labelled "modeled"): step_ms = ms + comm_ms - hidden, with
# 0 < hidden < comm; with one reduction after the pass nothing is hidden.
random_shards "$tmp/data" 300 17 4000 800 # its own data: the KJV shards need not exist yet
proj() { # NAME BUCKET_MB [--set ...]
    local name="$1" mb="$2"; shift 2
    "$bin" --config configs/tiny.json --set model.vocab_size=300 --set "data.train=$tmp/data/train_*.bin" \
        --set data.val= --set parallel.project=true --set parallel.dp=4 --set train.micro_batch=2 \
        --set train.steps=2 --set out.eval_every=0 --set out.sample_tokens=0 --set out.save_final=false \
        --set out.resume=false --set parallel.dp_bucket_mb="$mb" --set out.dir="$tmp/$name" "$@" >"$tmp/$name.out" 2>&1
}
# overlap_py KEYS BUCKETS_LOG ONE_LOG: with buckets the hidden ms of each of KEYS (comma-separated) is
# positive, the others absent, their sum below comm_ms and step_ms = ms + comm_ms - the sum; without
# buckets no hidden key and step_ms = ms + comm_ms.
overlap_py=$(cat <<'PY'
import json, sys
keys = sys.argv[1].split(",")
every = ["dp_hidden_ms_modeled", "zero_gather_hidden_ms_modeled"]
b, o = [[json.loads(l) for l in open(p) if '"loss"' in l][-1] for p in sys.argv[2:]]
hidden = [b.get(k, 0) for k in keys]
assert all(h > 0 for h in hidden) and sum(hidden) < b["comm_ms"], (hidden, b["comm_ms"])
assert not [k for k in every if k not in keys and k in b], b
assert abs(b["step_ms"] - (b["ms"] + b["comm_ms"] - sum(hidden))) < 2e-3, b
assert not [k for k in every if k in o] and abs(o["step_ms"] - (o["ms"] + o["comm_ms"])) < 2e-3, o
print(" + ".join(f"{h:.3f}" for h in hidden) + f" of {b['comm_ms']:.3f} comm ms hidden")
PY
)
if proj buckets 1 && proj one 0 &&
    out=$("$py" -c "$overlap_py" dp_hidden_ms_modeled "$tmp/buckets/log.jsonl" "$tmp/one/log.jsonl"); then
    grep -q "hidden behind the backward pass: modeled" "$tmp/buckets.out" && ok "projection_models_dp_overlap ($out)" ||
        not_ok projection_models_dp_overlap "the progress line does not say it: $(grep -m1 '^step' "$tmp/buckets.out")"
else not_ok projection_models_dp_overlap "${out:-} $(tail -n 2 "$tmp/buckets.out" | tr '\n' ' ')"; fi
# A projected run prices its DP groups across nodes as --plan does: 4 ranks on nodes of 2 at 3 GB/s
# a node against the 1 GB/s table inside one (tp 1: only DP collectives): a third of the comm ms.
slow_net=(--set "interconnect.table=$tmp/slow.txt" --set interconnect.node_gbps=3 --set interconnect.node_latency_us=0)
if proj inside 0 "${slow_net[@]}" && proj across 0 "${slow_net[@]}" --set interconnect.node_gpus=2 &&
    out=$("$py" -c '
import json, sys
a, b = [[json.loads(l) for l in open(p) if "\"loss\"" in l][-1]["comm_ms"] for p in sys.argv[1:]]
assert a > 0 and abs(a / b - 3) < 0.01, (a, b)
print(f"{a:.3f} ms inside a node, {b:.3f} across nodes")' "$tmp/inside/log.jsonl" "$tmp/across/log.jsonl" 2>&1) &&
    grep -q "the DP groups across nodes of 2 ranks at 3 GB/s + 0 us (interconnect.node_\*)" "$tmp/across.out" &&
    ! grep -q "across nodes" "$tmp/inside.out"; then
    ok "projection_prices_dp_across_nodes ($out)"
else not_ok projection_prices_dp_across_nodes "${out:-} $(grep -m1 PROJECTION "$tmp/across.out" | cut -c1-300)"; fi
# the same for ZeRO's reduce-scatters in buckets, and its staged gather of the weights beside the
# next forward pass: part of it hidden, never the first two stages (the pass needs them at its start)
if proj zero_buckets 1 --set parallel.zero=1 && proj zero_one 0 --set parallel.zero=1 &&
    out=$("$py" -c "$overlap_py" dp_hidden_ms_modeled,zero_gather_hidden_ms_modeled "$tmp/zero_buckets/log.jsonl" \
        "$tmp/zero_one/log.jsonl"); then
    grep -q "hidden behind the backward pass and [0-9.]* behind the forward pass: modeled" "$tmp/zero_buckets.out" &&
        ok "projection_models_zero_overlap ($out)" ||
        not_ok projection_models_zero_overlap "the progress line does not say it: $(grep -m1 '^step' "$tmp/zero_buckets.out")"
else not_ok projection_models_zero_overlap "${out:-} $(tail -n 2 "$tmp/zero_buckets.out" | tr '\n' ' ')"; fi
# --plan models the same overlap from its dry step: with buckets a layout's step is its compute
# (the same as without) plus comm less what is hidden, something is hidden wherever dp > 1 (the
# gather too under ZeRO), nothing where dp = 1; without buckets nothing is hidden.
for mb in 25 0; do
    "$bin" --plan --config configs/megatron_weak_1.2b.json --devices 4 --set train.global_batch=16 \
        --set parallel.dp_bucket_mb=$mb --plan-json "$tmp/plan_mb$mb.json" >"$tmp/plan_mb$mb.txt" 2>&1 || failed=1
done
"$py" - "$tmp" <<'PY' || failed=1
import json, sys
d = sys.argv[1]
rows = lambda n: [json.loads(l) for l in open(f"{d}/plan_mb{n}.json") if l.strip()]
key = lambda r: (r["tp"], r["dp"], r["sp"], r["recompute"], r["micro_batch"], r["zero"])
try:
    b, o = {key(r): r for r in rows(25)}, {key(r): r for r in rows(0)}
except (OSError, ValueError) as e:
    b, o = {}, {e: None}
bad = []
for k, r in b.items():
    hd, hg, ht, z = r["dp_hidden_ms_modeled"], r["zero_gather_hidden_ms_modeled"], r["tp_hidden_ms_modeled"], o.get(k)
    compute = z and z["step_ms"] - z["comm_ms"] + z["tp_hidden_ms_modeled"]
    if (not z or z["dp_hidden_ms_modeled"] or z["zero_gather_hidden_ms_modeled"] or z["tp_hidden_ms_modeled"] != ht
            or abs(r["step_ms"] - (compute + r["comm_ms"] - hd - hg - ht)) > 3e-3
            or (k[1] > 1) != (hd > 0) or (k[1] > 1 and k[5] == 1) != (hg > 0) or hd + hg + ht >= r["comm_ms"] + 1e-9):
        bad.append((k, r["step_ms"], r["comm_ms"], hd, hg, z and z["step_ms"]))
ok = b and len(b) == len(o) and not bad
print("ok plan_models_overlap" if ok else f"not ok plan_models_overlap - {len(b)} vs {len(o)} rows; {bad[:3]}")
PY
grep -q "less what is modeled as hidden ('hidden ms'): TP collectives beside the products" "$tmp/plan_mb25.txt" &&
    grep -q "DP buckets behind the backward pass" "$tmp/plan_mb25.txt" &&
    grep -q "no DP overlap (parallel.dp_bucket_mb 0)" "$tmp/plan_mb0.txt" &&
    ok plan_says_overlap_modeled || not_ok plan_says_overlap_modeled "$(sed -n 2,3p "$tmp/plan_mb25.txt" "$tmp/plan_mb0.txt" | tr '\n' ' ')"

# --plan's TP overlap against a formula of its own: per micro-batch each TP collective that runs
# beside products hides the shorter of its link time and theirs (FLOPs at 50% of 989 TFLOP/s):
# without SP the backward all-reduce of each column-parallel layer's input gradient (c_fc, c_attn,
# the LM head) beside its weight gradient; under SP each LayerNorm's all-gather beside the next
# product's own rows (again under full recompute), each LayerNorm's kept rows all-gathered again
# in backward beside the input-gradient product (parallel.sp_regather), each row-parallel layer's output-gradient
# all-gather beside its own rows of the input gradient, and the column-parallel reduce-scatters
# beside the weight gradients. Nothing else: the forward's reductions, the cross-entropy's and
# the embedding's gather hide nothing.
"$py" - "$tmp/plan_mb0.json" <<'PY' || failed=1
import json, sys
L, C, T, V, mult, e, batch = 40, 1536, 1024, 51200, 128, 2, 16  # configs/megatron_weak_1.2b.json, bf16
per_flop, latency, bw = 1 / (989e12 * 0.5), 20e-6, 370e9  # the interconnect.* defaults

def expected_ms(r):
    tp, dp, mb = r["tp"], r["dp"], r["micro_batch"]
    N = mb * T
    V_local = -(-V // (mult * tp)) * mult
    rows = N * C * e  # one tensor of the residual stream over all rows, in bytes
    hide = lambda ring, flops: min(latency + ring / bw, flops * per_flop)
    if r["sp"]:
        ring = (tp - 1) / tp * rows  # all-gather and reduce-scatter
        forward = hide(ring, 2 * N / tp * C * 3 * C / tp) + hide(ring, 2 * N / tp * C * 4 * C / tp)
        layer = forward * (2 if r["recompute"] == "full" else 1)
        layer += hide(ring, 2 * N / tp * C * 4 * C / tp) + hide(ring, 2 * N / tp * C * C / tp)
        layer += hide(ring, 2 * N * C * 4 * C / tp) + hide(ring, 2 * N * C * 3 * C / tp)
        # parallel.sp_regather (the default): each LayerNorm's kept rows all-gathered again in
        # backward, beside the column-parallel layer's input-gradient product (c_attn, c_fc, LM head)
        layer += hide(ring, 2 * N * C * 4 * C / tp) + hide(ring, 2 * N * C * 3 * C / tp)
        head = hide(ring, 2 * N / tp * C * V_local) + 2 * hide(ring, 2 * N * C * V_local)
    else:
        ring = 2 * (tp - 1) / tp * rows  # all-reduce
        layer = hide(ring, 2 * N * C * 4 * C / tp) + hide(ring, 2 * N * C * 3 * C / tp)
        head = hide(ring, 2 * N * C * V_local)
    return 1e3 * (L * layer + head) * (batch // (dp * mb)) if tp > 1 else 0

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bad = [(r["tp"], r["sp"], r["recompute"], r["micro_batch"], r["tp_hidden_ms_modeled"], round(expected_ms(r), 3))
       for r in rows if abs(r["tp_hidden_ms_modeled"] - expected_ms(r)) > 1.5e-3 + 1e-6 * expected_ms(r)]
tp_rows = [r for r in rows if r["tp"] > 1]
some_sp = {r["sp"] for r in tp_rows} == {True, False}
ok = tp_rows and some_sp and not bad
print(f"ok plan_models_tp_overlap ({len(tp_rows)} layouts with TP)" if ok else
      f"not ok plan_models_tp_overlap - {len(rows)} rows, {len(tp_rows)} with TP; (tp, sp, recompute, mb, got, want): {bad[:3]}")
PY

# A projected TP run models the same: its collectives beside products hide (all of them on a CPU,
# whose products are slow), labelled; step_ms = ms + comm_ms - hidden; nothing hides at TP 1.
for sp in false true; do
    proj "tp_sp_$sp" 0 --set parallel.dp=1 --set parallel.tp=2 --set parallel.sp=$sp || failed=1
done
proj tp1 0 --set parallel.dp=2 || failed=1
if out=$("$py" - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
last = lambda n: [json.loads(l) for l in open(f"{d}/{n}/log.jsonl") if '"loss"' in l][-1]
a, b, one = last("tp_sp_false"), last("tp_sp_true"), last("tp1")
for r in (a, b):
    h = r.get("tp_hidden_ms_modeled", 0)
    assert 0 < h < r["comm_ms"] and abs(r["step_ms"] - (r["ms"] + r["comm_ms"] - h)) < 2e-3, r
assert "tp_hidden_ms_modeled" not in one, one
print(f'{a["tp_hidden_ms_modeled"]:.3f} of {a["comm_ms"]:.3f} comm ms hidden, {b["tp_hidden_ms_modeled"]:.3f} of '
      f'{b["comm_ms"]:.3f} under SP')
PY
); then
    grep -q "hidden beside the TP products: modeled" "$tmp/tp_sp_true.out" && ok "projection_models_tp_overlap ($out)" ||
        not_ok projection_models_tp_overlap "the progress line does not say it: $(grep -m1 '^step' "$tmp/tp_sp_true.out")"
else not_ok projection_models_tp_overlap "${out:-} $(tail -n 2 "$tmp/tp_sp_true.out" | tr '\n' ' ')"; fi
# all three together (TP 2 x DP 2 under ZeRO with buckets): one account on the progress line
if proj tp_zero 1 --set parallel.dp=2 --set parallel.tp=2 --set parallel.zero=1 &&
    grep -qE "\(comm [0-9.]+, of which [0-9.]+ hidden beside the TP products, [0-9.]+ behind the backward pass and [0-9.]+ behind the forward pass: modeled\)" \
        "$tmp/tp_zero.out"; then ok projection_says_all_overlaps
else not_ok projection_says_all_overlaps "$(grep -m1 '^step' "$tmp/tp_zero.out" || tail -n 2 "$tmp/tp_zero.out")"; fi
exit "$failed"
