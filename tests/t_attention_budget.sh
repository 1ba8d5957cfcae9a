#!/usr/bin/env bash
# Attention keeps no T x T buffer (only a log-sum-exp per query row), so the
# memory of a step depends on tokens per micro-batch, not on the context:
# --plan's bytes for GPT-2 124M (configs/gpt2_124m.json, TP=1) at seq 2048 x
# micro-batch 8 exceed those at 1024 x 16 by exactly the 1024 extra
# position-embedding rows' float32 weight, gradient and two AdamW moments
# (16 bytes a parameter), in every recompute mode. (With the T x T
# probabilities stored, 2048 x 8 needed ~9 GiB more.) And selective
# recompute drops exactly L-1 layers' GELU outputs and nothing else.
# tier: check (make check: the quick tier, tests/run.sh --check)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" attention_budget
for tb in "1024 16" "2048 8"; do
    set -- $tb
    "$bin" --plan --config configs/gpt2_124m.json --devices 1 --set model.seq_len="$1" --set train.micro_batch="$2" \
        --set train.global_batch="$2" --plan-json "$tmp/plan_$1.jsonl" >"$tmp/plan_$1.out" 2>&1 ||
        not_ok "plan_$1" "$(tail -n 2 "$tmp/plan_$1.out" | tr '\n' ' ')"
done
out=$("$py" - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
def rows(T, mb):
    return {r["recompute"]: r["bytes"] for r in map(json.loads, open(f"{d}/plan_{T}.jsonl"))
            if r["tp"] == 1 and r["dp"] == 1 and r["micro_batch"] == mb and r["zero"] == 0}
short, long_ = rows(1024, 16), rows(2048, 8)
L, C, N = 12, 768, 16384
wpe_extra = 1024 * C * 16
for mode in ("none", "selective", "full"):
    diff = long_[mode] - short[mode]
    tag = "ok" if diff == wpe_extra else "not ok"
    print(f"{tag} seq2048_mb8_{mode}_same_memory_as_seq1024_mb16 (+{diff} bytes: wpe rows {wpe_extra})")
gelu = (L - 1) * N * 4 * C * 4  # float32 activations on the CPU plan
for T, r in ((1024, short), (2048, long_)):
    diff = r["none"] - r["selective"]
    tag = "ok" if diff == gelu else "not ok"
    print(f"{tag} selective_drops_only_gelu_outputs_T{T} ({diff} bytes, want {gelu})")
PY
)
echo "$out"
grep -q '^not ok' <<<"$out" && failed=1
[ "$(grep -c '^ok' <<<"$out")" = 5 ] || not_ok attention_budget_ran "$out"
exit $failed
