#!/usr/bin/env bash
# Hugging Face interop: a checkpoint train_gpt wrote, trained in fp32 and in
# bf16, loads with transformers' GPT2LMHeadModel.from_pretrained(dir) and gives
# the binary's validation loss (./train_gpt --eval, fp32) within 1e-4 on the
# same windows. Runs wherever `transformers` is importable (CPU or GPU);
# elsewhere it says so and counts nothing. DEVICE=cuda trains on the GPU.
# CI has no transformers; it first ran on an H200 (results/gpu/2026-11-27_h200),
# where a test bug (the whole "val loss" line read as the number) failed it
# with the losses agreeing.
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh" hf_interop
if ! "$py" -c 'import transformers, torch' 2>/dev/null; then
    echo "skip hf_interop - transformers is not importable by $py"
    exit 0
fi
device="${DEVICE:-cpu}"
random_shards "$tmp/data" 500 11 40000 4096
cat >"$tmp/cfg.json" <<EOF
{"model": {"n_layer": 2, "n_head": 2, "n_embd": 64, "vocab_size": 500, "seq_len": 32},
 "train": {"micro_batch": 4, "global_batch": 4, "steps": 20, "lr": 3e-3, "warmup": 2, "seed": 3},
 "data": {"train": "$tmp/data/train_*.bin", "val": "$tmp/data/val_*.bin"},
 "out": {"eval_every": 0, "eval_batches": 4, "sample_tokens": 0}, "device": "$device"}
EOF
for prec in fp32 bf16; do
    d="$tmp/run_$prec"
    if ! "$bin" --config "$tmp/cfg.json" --set out.dir="$d" --set train.precision="$prec" >"$d.out" 2>&1; then
        not_ok "hf_${prec}_train" "$(tail -n 3 "$d.out" | tr '\n' ' ')"; continue
    fi
    ours=$("$bin" --eval --config "$tmp/cfg.json" --set model.init_from="$d/step_00000020" --set train.precision=fp32 \
           --set device=cpu 2>"$d.eval.err" | sed -n 's/^val loss \([^ ]*\).*/\1/p') # "val loss 6.245884 (4 batches ...)"
    theirs=$("$py" - "$d/step_00000020" "$tmp/data/val_000000.bin" 4 4 32 <<'PY'
import sys, numpy as np, torch
from transformers import GPT2LMHeadModel
ckpt, val, batches, G, T = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
tok = np.fromfile(val, dtype='<u2', offset=1024).astype(np.int64)
m = GPT2LMHeadModel.from_pretrained(ckpt, torch_dtype=torch.float32).eval()
total, count = 0.0, 0
with torch.no_grad():
    for b in range(batches):  # window b: tokens [b*G*T, b*G*T + G*T + 1), as train_gpt reads it
        w = torch.from_numpy(tok[b * G * T: b * G * T + G * T + 1])
        x, y = w[:-1].view(G, T), w[1:].view(G, T)
        logits = m(x).logits.double()
        total += torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1), reduction='sum').item()
        count += y.numel()
print(f"{total / count:.7f}")
PY
)
    if [ -n "$ours" ] && [ -n "$theirs" ] && "$py" -c "import sys; sys.exit(abs(float('$ours') - float('$theirs')) >= 1e-4)"; then
        ok "hf_${prec}_checkpoint_loss_matches (train_gpt $ours, transformers $theirs)"
    else
        not_ok "hf_${prec}_checkpoint_loss_matches" "train_gpt '${ours}' ($(tail -n 1 "$d.eval.err")), transformers '${theirs}'"
    fi
done
exit "$failed"
