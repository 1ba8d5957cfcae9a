#!/usr/bin/env bash
# The LR schedules (train.lr_schedule): every step's logged lr equals the
# formula of README's "What a step does", written out below, for cosine,
# linear, constant and wsd (its decay over the last wsd_decay_frac of the
# steps, pushed out of a long warm-up, or none at all); a schedule reaches
# the weights (constant and cosine train alike while their LRs agree, apart
# after); bad values stop the run naming the key, before anything is written.
# tier: check (make check: the quick tier, tests/run.sh --check)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" lr_schedule
export OMP_NUM_THREADS=1
if ! "$py" -c 'import numpy' 2>/dev/null; then not_ok prerequisites "python3-numpy is missing"; exit 1; fi
V=64 N=20 W=3
random_shards "$tmp/data" "$V" 3 6000 400
cfg="$tmp/cfg.json"
cat >"$cfg" <<JSON
{"model": {"n_layer": 1, "n_head": 2, "n_embd": 16, "vocab_size": $V, "seq_len": 8},
 "train": {"micro_batch": 2, "global_batch": 2, "steps": $N, "lr": 1e-2, "min_lr": 1e-3, "warmup": $W},
 "data": {"train": "$tmp/data/train_*.bin", "val": ""},
 "out": {"eval_batches": 0, "sample_tokens": 0, "save_final": false, "log_every": 1}}
JSON
run() { # NAME [--set ...]: a run into $tmp/NAME
    local name="$1"; shift
    timeout -k 5 120 "$bin" --config "$cfg" --set out.dir="$tmp/$name" "$@" >"$tmp/$name.out" 2>&1
}

# NAME SCHEDULE FRAC: the logged lr of every step against the formula
check_lrs() {
    local out
    if out=$("$py" - "$tmp/$1/log.jsonl" "$2" "$3" "$N" "$W" 2>&1 <<'PY'
import json, math, sys
path, schedule, frac, n, w = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
lr, min_lr = 1e-2, 1e-3
def expected(step):
    i = step - 1
    if i < w:
        return lr * (i + 1) / w
    if schedule == "constant":
        return lr
    if schedule == "wsd":
        start = max(w, n - math.floor(frac * n + 0.5))
        return lr if i < start else min_lr + (lr - min_lr) * (1 - math.sqrt((i - start) / (n - start)))
    p = (i - w) / (n - w)
    if schedule == "linear":
        return min_lr + (lr - min_lr) * (1 - p)
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * p))
logged = {o["step"]: o["lr"] for o in map(json.loads, open(path)) if "lr" in o}
assert sorted(logged) == list(range(1, n + 1)), f"steps logged: {sorted(logged)}"
bad = [(s, logged[s], expected(s)) for s in logged if abs(logged[s] - expected(s)) > 1e-6 * expected(s)]
assert not bad, f"(step, logged, expected): {bad[:4]}"
at_peak = [s for s in logged if logged[s] == lr]
print(f"steps at lr: {at_peak[0] if at_peak else '-'}..{at_peak[-1] if at_peak else '-'}, last {logged[n]:.4g}")
PY
    ); then ok "lr_${1} ($out)"; else not_ok "lr_$1" "$out $(tail -n 2 "$tmp/$1.out" | tr '\n' ' ')"; fi
}

run cosine || not_ok run_cosine "$(tail -n 3 "$tmp/cosine.out" | tr '\n' ' ')"
check_lrs cosine cosine 0
for s in linear constant; do
    run "$s" --set train.lr_schedule="$s" || not_ok "run_$s" "$(tail -n 3 "$tmp/$s.out" | tr '\n' ' ')"
    check_lrs "$s" "$s" 0
done
# wsd: the default share (0.2: the last 4 steps), a quarter (the last 5),
# 0.33 (6.6 steps: the last 7), a share that would start inside the warm-up
# (decays from step W+1 on), none
run wsd --set train.lr_schedule=wsd || not_ok run_wsd "$(tail -n 3 "$tmp/wsd.out" | tr '\n' ' ')"
check_lrs wsd wsd 0.2
for f in 0.25 0.33 0.9 0; do
    run "wsd_$f" --set train.lr_schedule=wsd --set train.wsd_decay_frac="$f" ||
        not_ok "run_wsd_$f" "$(tail -n 3 "$tmp/wsd_$f.out" | tr '\n' ' ')"
    check_lrs "wsd_$f" wsd "$f"
done

# The schedule reaches AdamW: cosine and constant share the LR of steps 1 to
# W+1 (warm-up, then progress 0), so the losses of steps 1 to W+2 are equal;
# the last step's differ.
if out=$("$py" - "$tmp/cosine/log.jsonl" "$tmp/constant/log.jsonl" "$W" "$N" 2>&1 <<'PY'
import json, sys
def losses(p): return {o["step"]: o["loss"] for o in map(json.loads, open(p)) if o.get("loss") is not None}
a, b, w, n = losses(sys.argv[1]), losses(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
same = [s for s in range(1, w + 3) if a[s] != b[s]]
assert not same, f"steps {same} differ while the LRs agree: {[(a[s], b[s]) for s in same]}"
assert a[n] != b[n], f"step {n}'s loss is {a[n]} under both"
print(f"step {n}: {a[n]} cosine, {b[n]} constant")
PY
); then ok "schedule_reaches_the_weights ($out)"; else not_ok schedule_reaches_the_weights "$out"; fi

# ---- bad values -----------------------------------------------------------
run bad_schedule --set train.lr_schedule=step
if [ $? -ne 0 ] && grep -q "train.lr_schedule" "$tmp/bad_schedule.out" && grep -q "cosine|linear|constant|wsd" "$tmp/bad_schedule.out" &&
    [ ! -e "$tmp/bad_schedule" ]; then ok bad_schedule_names_the_choices
else not_ok bad_schedule_names_the_choices "$(head -c 300 "$tmp/bad_schedule.out")"; fi
run bad_frac --set train.lr_schedule=wsd --set train.wsd_decay_frac=1.5
if [ $? -ne 0 ] && grep -q "train.wsd_decay_frac" "$tmp/bad_frac.out" && [ ! -e "$tmp/bad_frac" ]; then ok bad_wsd_decay_frac_names_the_key
else not_ok bad_wsd_decay_frac_names_the_key "$(head -c 300 "$tmp/bad_frac.out")"; fi
exit "$failed"
