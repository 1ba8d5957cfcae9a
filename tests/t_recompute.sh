#!/usr/bin/env bash
# Activation recomputation: train.recompute none / selective / full must give
# bitwise-identical losses, gradient norms and final weights, and the
# activation budget (log.jsonl, as printed at start) must fall from none to
# selective to full.
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" recompute
random_shards "$tmp/data" 300 5 6000 1000
cfg="$tmp/cfg.json"
cat >"$cfg" <<JSON
{"model": {"n_layer": 3, "n_head": 4, "n_embd": 32, "vocab_size": 300, "seq_len": 24},
 "train": {"micro_batch": 2, "global_batch": 4, "steps": 5, "lr": 1e-2, "warmup": 1, "min_lr": 1e-3},
 "data": {"train": "$tmp/data/train_*.bin", "val": "$tmp/data/val_*.bin"},
 "out": {"eval_every": 0, "eval_batches": 2, "sample_tokens": 0, "resume": false}}
JSON
for mode in none selective full; do
    if timeout 120 "$bin" --config "$cfg" --set train.recompute=$mode --set out.dir="$tmp/$mode" >"$tmp/$mode.out" 2>&1; then
        ok "run_$mode"
    else
        not_ok "run_$mode" "exit $?: $(tail -n 3 "$tmp/$mode.out" | tr '\n' ' ')"
    fi
done
# the deterministic part of each train line (timings differ run to run)
strip() { grep '"loss"' "$1/log.jsonl" | sed -E 's/.*("step":[0-9]+,"loss":[^,]*,"lr":[^,]*,"grad_norm":[^,]*).*/\1/'; }
budget() { sed -nE 's/.*"activations":([0-9]+).*/\1/p' "$tmp/$1/log.jsonl" | head -n 1; }
for mode in selective full; do
    if [ -n "$(strip "$tmp/none")" ] && [ "$(strip "$tmp/none")" = "$(strip "$tmp/$mode")" ]; then ok "${mode}_losses_bitwise"
    else not_ok "${mode}_losses_bitwise" "$(diff <(strip "$tmp/none") <(strip "$tmp/$mode") | head -n 2 | tr '\n' ' ')"; fi
    if cmp -s "$tmp/none/step_00000005/model.safetensors" "$tmp/$mode/step_00000005/model.safetensors" &&
       cmp -s "$tmp/none/step_00000005/optimizer.safetensors" "$tmp/$mode/step_00000005/optimizer.safetensors"; then
        ok "${mode}_final_state_bitwise"
    else not_ok "${mode}_final_state_bitwise" "checkpoints differ"; fi
    val() { grep -o '"step":.*"val_loss":[^,}]*' "$1/log.jsonl"; } # without the line's wall-clock "time"
    v1=$(val "$tmp/none"); v2=$(val "$tmp/$mode")
    if [ -n "$v1" ] && [ "$v1" = "$v2" ]; then ok "${mode}_val_loss_bitwise"; else not_ok "${mode}_val_loss_bitwise" "$v1 vs $v2"; fi
done
# with dropout: every mode draws the same masks
for mode in none selective full; do
    timeout 120 "$bin" --config "$cfg" --set train.recompute=$mode --set model.dropout=0.2 --set out.dir="$tmp/drop_$mode" >"$tmp/drop_$mode.out" 2>&1 ||
        not_ok "dropout_run_$mode" "$(tail -n 3 "$tmp/drop_$mode.out" | tr '\n' ' ')"
done
for mode in selective full; do
    if [ -n "$(strip "$tmp/drop_none")" ] && [ "$(strip "$tmp/drop_none")" = "$(strip "$tmp/drop_$mode")" ] &&
        cmp -s "$tmp/drop_none/step_00000005/model.safetensors" "$tmp/drop_$mode/step_00000005/model.safetensors"; then
        ok "dropout_${mode}_bitwise"
    else not_ok "dropout_${mode}_bitwise" "$(diff <(strip "$tmp/drop_none") <(strip "$tmp/drop_$mode") | head -n 2 | tr '\n' ' ')"; fi
done
if [ "$(strip "$tmp/none")" != "$(strip "$tmp/drop_none")" ]; then ok dropout_changes_losses; else not_ok dropout_changes_losses "identical"; fi

a=$(budget none); b=$(budget selective); c=$(budget full)
if awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN { exit !(a > b && b > c && c > 0) }'; then ok "budget_falls_none_${a}_selective_${b}_full_${c}"
else not_ok budget_falls "activation MiB none=$a selective=$b full=$c"; fi
exit $failed
