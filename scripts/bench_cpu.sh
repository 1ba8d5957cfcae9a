#!/usr/bin/env bash
# Times training steps of a GPT-2-small-shaped model (12 layers, width 768,
# seq 256, micro-batch 4) on the CPU: the shape of llm.c's CPU trainer
# comparison. Prints every step's ms and the median after two warm-up steps.
#   scripts/bench_cpu.sh [STEPS (default 8)] [extra --set arguments...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
steps="${1:-8}"
shift || true
out="$(mktemp -d /tmp/train_gpt_bench.XXXXXX)"
trap 'rm -rf "$out"' EXIT
./train_gpt --config configs/gpt2_124m.json --set model.seq_len=256 --set train.micro_batch=4 \
    --set train.global_batch=4 --set train.steps="$steps" --set out.dir="$out" --set out.resume=false \
    --set out.eval_batches=0 --set out.sample_tokens=0 --set out.save_every=0 --set train.warmup=2 "$@" \
    | grep -E '^(step|model|memory|backend)'
/usr/bin/env python3 - "$out/log.jsonl" <<'PY'
import json, statistics, sys
ms = [json.loads(l)["ms"] for l in open(sys.argv[1]) if '"loss"' in l]
print("per-step ms:", " ".join(f"{x:.0f}" for x in ms))
print(f"median ms/step after warm-up: {statistics.median(ms[2:]):.1f}")
PY
