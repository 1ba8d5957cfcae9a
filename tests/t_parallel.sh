#!/usr/bin/env bash
# Tensor, sequence and data parallelism as real multi-process runs through
# scripts/launch.sh, against a single-rank run of the same config and seed:
# losses and final weights within 1e-5 relative (tests/parallel/compare.py),
# recompute modes bitwise equal to none at the same layout, SP's LayerNorm
# outputs kept as row shards (parallel.sp_regather) or gathered bitwise
# equal, a layout run twice bitwise equal, communicated bytes equal to the formula for the layout,
# activation memory falling with tp under SP, a killed rank failing the job
# cleanly, and checkpoints resuming at other layouts.
# tier: check (make check: the quick tier, tests/run.sh --check)
# cost: 100 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" parallel
export OMP_NUM_THREADS=1 # up to 4 ranks share 2 cores
L=2 C=48 NH=12 V=300 T=12 B=2 G=8 STEPS=5

random_shards "$tmp/data" "$V" 11 4000 800
# AdamW eps 1e-5 rather than 1e-8: layouts sum in different orders, so
# gradients that are zero in exact arithmetic come out as different float
# noise, and m/(sqrt(v)+eps) turns noise of ~1e-11 into full-size updates
# when eps is tiny (measured: 2e-5 relative weight difference at eps 1e-8
# against 1e-6 at 1e-5, with the losses equal to 7 digits in both).
cfg="$tmp/cfg.json"
cat >"$cfg" <<JSON
{"model": {"n_layer": $L, "n_head": $NH, "n_embd": $C, "vocab_size": $V, "seq_len": $T},
 "train": {"micro_batch": $B, "global_batch": $G, "steps": $STEPS, "lr": 3e-3, "min_lr": 3e-4, "warmup": 1, "grad_clip": 0.5,
           "eps": 1e-5},
 "data": {"train": "$tmp/data/train_*.bin", "val": "$tmp/data/val_*.bin"},
 "out": {"eval_every": 0, "eval_batches": 2, "sample_tokens": 0, "resume": false, "log_every": 1}}
JSON

# run NAME RANKS [--set ...]: one job through the launcher into $tmp/NAME
run() {
    local name="$1" n="$2"; shift 2
    rm -rf "$tmp/$name"
    timeout -k 5 120 scripts/launch.sh -n "$n" --log-dir "$tmp/$name/launch" -- \
        "$bin" --config "$cfg" --set out.dir="$tmp/$name" "$@" >"$tmp/$name.out" 2>&1
}
compare() { "$py" tests/parallel/compare.py "$@" 2>&1; }
# check_equiv NAME RANKS [--set ...]: runs and compares with the reference
check_equiv() {
    local name="$1" n="$2"; shift 2
    if ! run "$name" "$n" "$@"; then not_ok "$name" "the job failed: $(tail -n 4 "$tmp/$name.out" | tr '\n' ' ')"; return; fi
    local out
    if out=$(compare "$tmp/ref" "$tmp/$name" $STEPS); then ok "${name}_matches_tp1 ($out)"
    else not_ok "${name}_matches_tp1" "$out"; fi
}

if run ref 1; then ok reference_run; else not_ok reference_run "$(tail -n 4 "$tmp/ref.out" | tr '\n' ' ')"; fi

check_equiv tp2 2 --set parallel.tp=2
check_equiv tp2_sp 2 --set parallel.tp=2 --set parallel.sp=true
# SP keeping its LayerNorm outputs gathered (parallel.sp_regather=false)
# rather than as row shards gathered again in the backward pass: the same
# values, so the same bits as the default
check_equiv tp2_sp_keep 2 --set parallel.tp=2 --set parallel.sp=true --set parallel.sp_regather=false
if out=$(compare "$tmp/tp2_sp" "$tmp/tp2_sp_keep" $STEPS --bitwise); then ok "tp2_sp_regather_bitwise_equals_keep ($out)"
else not_ok tp2_sp_regather_bitwise_equals_keep "$out"; fi
check_equiv tp3 3 --set parallel.tp=3
check_equiv tp3_sp 3 --set parallel.tp=3 --set parallel.sp=true
check_equiv tp4 4 --set parallel.tp=4
check_equiv tp4_sp 4 --set parallel.tp=4 --set parallel.sp=true
check_equiv dp2 2
check_equiv dp2_zero 2 --set parallel.zero=1
check_equiv tp2_dp2 4 --set parallel.tp=2
check_equiv tp2_dp2_zero 4 --set parallel.tp=2 --set parallel.zero=1
check_equiv tp2_dp2_sp_zero 4 --set parallel.tp=2 --set parallel.sp=true --set parallel.zero=1
# ZeRO in buckets of one layer: shards of one chunk per layer and kind, each
# reduce-scattered during the backward pass (under SP before the TP sum)
check_equiv dp2_zero_buckets 2 --set parallel.zero=1 --set parallel.dp_bucket_mb=0.001
check_equiv tp2_dp2_sp_zero_buckets 4 --set parallel.tp=2 --set parallel.sp=true --set parallel.zero=1 --set parallel.dp_bucket_mb=0.001

# Dropout: masks keyed by global token, feature and head, so a layout sees
# the masks of one rank (recomputation included).
if run ref_drop 1 --set model.dropout=0.1; then ok reference_run_dropout; else not_ok reference_run_dropout "$(tail -n 3 "$tmp/ref_drop.out" | tr '\n' ' ')"; fi
for lay in "tp2_sp_drop 2 --set parallel.tp=2 --set parallel.sp=true --set train.recompute=full" \
           "tp2_sp_drop_keep 2 --set parallel.tp=2 --set parallel.sp=true --set train.recompute=full --set parallel.sp_regather=false" \
           "tp2_dp2_zero_drop 4 --set parallel.tp=2 --set parallel.zero=1 --set train.recompute=selective" "dp2_drop 2"; do
    # shellcheck disable=SC2086
    set -- $lay
    name="$1" n="$2" out=""; shift 2
    if run "$name" "$n" --set model.dropout=0.1 "$@" && out=$(compare "$tmp/ref_drop" "$tmp/$name" $STEPS); then ok "${name}_matches_tp1 ($out)"
    else not_ok "${name}_matches_tp1" "${out:-job failed: $(tail -n 3 "$tmp/$name.out" | tr '\n' ' ')}"; fi
done
if ! compare "$tmp/ref" "$tmp/ref_drop" $STEPS >/dev/null; then ok dropout_changes_the_run; else not_ok dropout_changes_the_run "the same losses and weights as without dropout"; fi
if out=$(compare "$tmp/tp2_sp_drop" "$tmp/tp2_sp_drop_keep" $STEPS --bitwise); then ok "tp2_sp_drop_full_regather_bitwise_equals_keep ($out)"
else not_ok tp2_sp_drop_full_regather_bitwise_equals_keep "$out"; fi

# recomputation at a parallel layout: bitwise equal to none there
for mode in selective full; do
    if run "tp2_sp_$mode" 2 --set parallel.tp=2 --set parallel.sp=true --set train.recompute=$mode &&
        out=$(compare "$tmp/tp2_sp" "$tmp/tp2_sp_$mode" $STEPS --bitwise); then ok "tp2_sp_${mode}_bitwise ($out)"
    else not_ok "tp2_sp_${mode}_bitwise" "${out:-job failed}"; fi
done
# the same layout twice: bitwise equal
if run tp2_dp2_again 4 --set parallel.tp=2 && out=$(compare "$tmp/tp2_dp2" "$tmp/tp2_dp2_again" $STEPS --bitwise); then
    ok "tp2_dp2_twice_bitwise ($out)"
else not_ok tp2_dp2_twice_bitwise "${out:-job failed}"; fi

# The DP all-reduce in buckets of one layer, started during the last
# backward pass, against one all-reduce after it: the same bits (sums are
# elementwise) and the same bytes, with and without SP's TP sum after it.
for lay in "dp2 2" "tp2_sp_dp2 4 --set parallel.tp=2 --set parallel.sp=true"; do
    # shellcheck disable=SC2086
    set -- $lay
    name="$1" n="$2"; shift 2
    if run "${name}_one_reduce" "$n" --set parallel.dp_bucket_mb=0 "$@" &&
        run "${name}_buckets" "$n" --set parallel.dp_bucket_mb=0.0001 "$@" &&
        out=$(compare "$tmp/${name}_one_reduce" "$tmp/${name}_buckets" $STEPS --bitwise) &&
        bytes=$("$py" - "$tmp/${name}_one_reduce/log.jsonl" "$tmp/${name}_buckets/log.jsonl" <<'PY'
import json, sys
last = [[json.loads(l) for l in open(p) if '"loss"' in l][-1] for p in sys.argv[1:]]
keys = [k for k in last[0] if k.endswith("_bytes") and k.startswith(("dp_", "tp_"))]
assert keys and all(last[0][k] == last[1][k] for k in keys), [(k, last[0][k], last[1].get(k)) for k in keys]
print(f"dp all-reduce {last[1]['dp_all_reduce_bytes']} bytes in both")
PY
        ); then ok "${name}_buckets_bitwise_same_bytes ($out; $bytes)"
    else not_ok "${name}_buckets_bitwise_same_bytes" "${out:-} ${bytes:-} $(tail -n 3 "$tmp/${name}_buckets.out" | tr '\n' ' ')"; fi
done
check_equiv tp2_sp_dp2_buckets 4 --set parallel.tp=2 --set parallel.sp=true --set parallel.dp_bucket_mb=0.0001

# Communicated bytes per step against the formula. Ring bytes per rank:
# all-reduce of n floats 2(p-1)(n//p)*4, reduce-scatter / all-gather of n
# floats in total (p-1)(n//p)*4. Per micro-batch (N = B*T rows, A of them a
# step): TP, no SP: all-reduces of N*C for the embedding, 2 per layer forward,
# the LM head's dX and 2 per layer backward, plus N (row max) and 2N (sum-exp,
# target logit) for the loss. SP: the N*C all-reduces become reduce-scatters
# (embedding, 2 per layer forward, LM head dX, 2 per layer backward) and
# all-gathers (2 per layer forward, final LayerNorm, 2 per layer backward,
# embedding backward), and once a step the replicated gradients are summed
# (wpe T*C, LayerNorms 4C per layer + 2C, row-parallel biases 2C per layer).
# SP's regather (the default) adds an all-gather per LayerNorm in backward.
# Once a step: the grad norm's exact sum (34 floats, kernels/exact_sumsq.h; over DP
# too under ZeRO). DP: the gradients (all-reduce, or ZeRO's reduce-scatter +
# all-gather of the padded buffer), the loss (1 float).
"$py" tests/parallel/bytes_formula.py runs "$tmp" "$L" "$C" "$V" "$T" "$B" "$G" >"$tmp/bytes.out" 2>&1
cat "$tmp/bytes.out"
grep -q '^not ok' "$tmp/bytes.out" && failed=1
grep -q '^ok' "$tmp/bytes.out" || not_ok bytes_formula "the check did not run: $(tail -n 3 "$tmp/bytes.out" | tr '\n' ' ')"

# Memory: the activation budget per rank (log.jsonl's budget line, the
# figures printed at start) falls with tp under SP.
act() { sed -nE 's/.*"activations":([0-9]+).*/\1/p' "$tmp/$1/log.jsonl" | head -n 1; }
a1=$(act ref) a2=$(act tp2_sp) a4=$(act tp4_sp) n2=$(act tp2)
if awk -v a="$a1" -v b="$a2" -v c="$a4" -v d="$n2" 'BEGIN { exit !(a > b && b > c && d > b && c > 0) }'; then
    ok "activations_fall_with_tp_under_sp (tp1 $a1, tp2 $n2, tp2+sp $a2, tp4+sp $a4 bytes)"
else not_ok activations_fall_with_tp_under_sp "tp1 $a1, tp2 $n2, tp2+sp $a2, tp4+sp $a4"; fi
# Under SP's regather a LayerNorm's output is kept as this rank's rows, not
# all rows: (2L + 1) x (N - N/tp) x C float32 fewer activation bytes than
# keeping them gathered (ln_1 and ln_2 of each layer, and ln_f).
k2=$(act tp2_sp_keep) want=$(((2 * L + 1) * (B * T - B * T / 2) * C * 4))
if [ -n "$a2" ] && [ -n "$k2" ] && [ $((k2 - a2)) -eq "$want" ]; then
    ok "sp_regather_keeps_layernorm_shards (tp2+sp $a2 bytes, gathered $k2: $want fewer)"
else not_ok sp_regather_keeps_layernorm_shards "tp2+sp ${a2:-?}, gathered ${k2:-?}: want $want fewer"; fi

# Rank 0 prints; the other ranks write their output into the run directory.
if [ -s "$tmp/tp4/logs/rank_3.out" ] && grep -q "^step" "$tmp/tp4/logs/rank_3.out" && grep -q "^step" "$tmp/tp4.out" &&
    ! grep -q "rank 3" "$tmp/tp4.out"; then ok per_rank_logs_in_run_dir
else not_ok per_rank_logs_in_run_dir "$(ls "$tmp/tp4/logs" 2>&1 | tr '\n' ' ')"; fi

# The budget is what the run allocates: the exact bytes, at every layout.
for name in ref tp2 tp3_sp tp4_sp dp2_zero tp2_dp2_sp_zero tp2_sp_selective tp2_sp_full tp2_sp_keep tp2_sp_drop_keep; do
    line=$(grep budget_bytes "$tmp/$name/log.jsonl" | head -n 1)
    total=$(sed -nE 's/.*"total":([0-9]+).*/\1/p' <<<"$line") alloc=$(sed -nE 's/.*"allocated_bytes":([0-9]+).*/\1/p' <<<"$line")
    if [ -n "$total" ] && [ "$total" = "$alloc" ]; then ok "budget_equals_allocation_$name ($total bytes)"
    else not_ok "budget_equals_allocation_$name" "budget ${total:-?} allocated ${alloc:-?}"; fi
done

# Projection: one process running rank 0's shard of a TP=t layout with the
# null communicator must have the shapes of a real TP=t rank 0: the same
# allocation and budget to the byte (the model's memory, measured from its
# allocations), the same bytes per step, and about the same compute time
# (real: step time less the time inside collectives; the fastest of steps 2..,
# which another suite's burst on a shared core slows least;
# within a factor of 2; only where the real job has no more ranks than the
# machine has cores, since time-sliced ranks wait out each other's slices
# inside the collectives). Peak resident memory is
# reported, not compared: on a model this small it is dominated by what
# projection rightly leaves out (the shared-memory communicator's 4 MiB
# slots, the checkpoint staging of the real run).
# A timing that misses by load alone (another suite's burst on a shared core) gets two reruns of
# the projected job; memory, bytes and flags are compared on every attempt.
for lay in "tp2 2 2" "tp4_sp 4 4 --set parallel.sp=true" "tp2_dp2_zero 2 4 --set parallel.dp=2 --set parallel.zero=1"; do
    # shellcheck disable=SC2086
    set -- $lay
    name="$1" t="$2" ranks="$3"; shift 3
    for attempt in 1 2 3; do
    rm -rf "$tmp/proj_$name"
    if timeout -k 5 120 "$bin" --config "$cfg" --set out.dir="$tmp/proj_$name" --set parallel.project=true \
        --set parallel.tp="$t" "$@" >"$tmp/proj_$name.out" 2>&1; then
        check_time=$([ "$ranks" -le "$(nproc --all)" ] && echo 1 || echo 0)
        if out=$("$py" - "$tmp/$name/log.jsonl" "$tmp/proj_$name/log.jsonl" "$check_time" 2>&1 <<'PY'
import json, sys
def load(p):
    lines = [json.loads(l) for l in open(p)]
    budget = next(l for l in lines if "budget_bytes_per_rank" in l)
    train = [l for l in lines if "loss" in l]
    peak = next(l for l in lines if "mem_peak_mib_by_rank" in l)["mem_peak_mib_by_rank"][0]
    return budget, train, peak
rb, rt, rp = load(sys.argv[1]); pb, pt, pp = load(sys.argv[2])
bad = []
if rb["budget_bytes_per_rank"] != pb["budget_bytes_per_rank"] or rb["allocated_bytes"] != pb["allocated_bytes"]:
    bad.append(f"memory {rb['allocated_bytes']} vs {pb['allocated_bytes']}")
keys = [k for k in rt[-1] if k.endswith("_bytes") and k != "mem_peak_bytes"]
if any(rt[-1][k] != pt[-1][k] for k in keys): bad.append("bytes per step differ")
if not pt[-1]["projected"] or rt[-1]["projected"]: bad.append("projected flags wrong")
real = min(l["ms"] - l["comm_ms"] for l in rt[1:]); proj = min(l["ms"] for l in pt[1:])
if sys.argv[3] == "1" and not (0.5 < proj / real < 2.0): bad.append(f"compute ms real {real:.2f} vs projected {proj:.2f}")
timing = f"compute ms real {real:.2f} projected {proj:.2f}" + ("" if sys.argv[3] == "1" else " (not compared: more ranks than cores)")
print("; ".join(bad) if bad else f"allocated {pb['allocated_bytes']} B, {timing}, peak {rp} vs {pp} MiB")
sys.exit(1 if bad else 0)
PY
        ); then ok "projection_matches_real_${name} ($out, attempt $attempt)"; break
        elif [ "$attempt" -lt 3 ] && [ "$out" = "${out#*;}" ] && [[ "$out" == "compute ms real"* ]]; then
            echo "# projection_matches_real_${name}: $out; the projected job runs once more"
        else not_ok "projection_matches_real_${name}" "$out"; break; fi
    else not_ok "projection_matches_real_${name}" "projected run failed: $(tail -n 3 "$tmp/proj_$name.out" | tr '\n' ' ')"; break; fi
    done
done

# A projection of a wide layout (tp 4 x dp 16) runs to the end.
if timeout -k 5 60 "$bin" --config "$cfg" --set out.dir="$tmp/proj_wide" --set parallel.project=true --set parallel.tp=4 \
    --set parallel.dp=16 --set train.global_batch=32 >"$tmp/proj_wide.out" 2>&1; then ok projection_tp4_dp16_runs
else not_ok projection_tp4_dp16_runs "exit $?: $(tail -n 3 "$tmp/proj_wide.out" | tr '\n' ' ')"; fi

# Samples under TP + SP with seq_len not a multiple of tp: the same tokens
# as one rank, the full length (the sampler pads or repeats rows).
sample() { sed -n '/^---- sample/,/^------/p' "$tmp/$1.out" | sed -n 2p; }
if run sample_tp1 1 --set model.seq_len=10 --set train.global_batch=4 --set out.sample_tokens=16 --set data.vocab_dir=assets/vocab &&
    run sample_tp4_sp 4 --set parallel.tp=4 --set parallel.sp=true --set model.seq_len=10 --set train.global_batch=4 \
        --set out.sample_tokens=16 --set data.vocab_dir=assets/vocab &&
    [ -n "$(sample sample_tp1)" ] && [ "$(sample sample_tp1)" = "$(sample sample_tp4_sp)" ]; then
    ok "sample_tp4_sp_equals_tp1 ($(sample sample_tp1 | wc -c) bytes)"
else not_ok sample_tp4_sp_equals_tp1 "'$(sample sample_tp1)' vs '$(sample sample_tp4_sp)'"; fi

# --plan predicts memory with the trainer's budget: the bytes it lists for a
# layout are exactly what that layout's real run allocated. (A CPU config has
# no time model of its own: the 4-device plan is priced from the H200's op
# table, so that it names a fastest layout.)
"$bin" --plan --config "$cfg" --devices 2 --plan-json "$tmp/plan2.jsonl" >"$tmp/plan2.out" 2>&1
"$bin" --plan --config "$cfg" --devices 4 --plan-json "$tmp/plan4.jsonl" \
    --calibrate results/gpu/2026-11-27_h200/op_times_megatron_1.2b_gb8.tsv >"$tmp/plan4.out" 2>&1
"$bin" --plan --config "$cfg" --devices 2 --set parallel.sp_regather=false --plan-json "$tmp/plan2_keep.jsonl" >"$tmp/plan2_keep.out" 2>&1
if grep -q "fastest that fits" "$tmp/plan4.out"; then ok plan_names_fastest; else not_ok plan_names_fastest "$(head -n 5 "$tmp/plan4.out" | tr '\n' ' ')"; fi
for lay in "tp2 2 2 false none 2 0" "tp2_sp_full 2 2 true full 2 0" "tp4_sp 4 4 true none 2 0" "tp2_dp2_sp_zero 4 2 true none 2 1" \
           "dp2_zero 2 1 false none 2 1" "tp2_sp_keep 2_keep 2 true none 2 0"; do
    # shellcheck disable=SC2086
    set -- $lay
    want=$("$py" - "$tmp/plan$2.jsonl" "$3" "$4" "$5" "$6" "$7" <<'PY'
import json, sys
f, tp, sp, rc, mb, zero = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "true", sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
for l in map(json.loads, open(f)):
    if (l["tp"], l["sp"], l["recompute"], l["micro_batch"], l["zero"]) == (tp, sp, rc, mb, zero): print(l["bytes"])
PY
)
    got=$(sed -nE 's/.*"allocated_bytes":([0-9]+).*/\1/p' "$tmp/$1/log.jsonl" | head -n 1)
    if [ -n "$want" ] && [ "$want" = "$got" ]; then ok "plan_memory_equals_allocation_$1 ($got bytes)"
    else not_ok "plan_memory_equals_allocation_$1" "plan ${want:-none} vs allocated ${got:-none}"; fi
done

# --plan's communication comes from a dry step through the trainer's own
# code; it must equal the formula (the oracle) for every layout it lists.
"$py" tests/parallel/bytes_formula.py plan "$tmp" "$L" "$C" "$V" "$T" "$B" "$G" >"$tmp/plan_bytes.out" 2>&1
cat "$tmp/plan_bytes.out"
grep -q '^not ok' "$tmp/plan_bytes.out" && failed=1
grep -q '^ok' "$tmp/plan_bytes.out" || not_ok plan_bytes_formula "the check did not run: $(tail -n 3 "$tmp/plan_bytes.out" | tr '\n' ' ')"

# A rank killed mid-run: the job fails fast and names it; nothing is left.
before=$(shm_list)
start=$SECONDS
timeout -k 5 90 scripts/launch.sh -n 2 --log-dir "$tmp/kill/launch" -- bash -c \
    'if [ "$RANK" = 1 ]; then ( sleep 2; kill -9 $$ ) & fi; exec "$0" "$@"' \
    "$bin" --config "$cfg" --set out.dir="$tmp/kill" --set parallel.tp=2 --set train.steps=100000 >"$tmp/kill.out" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $((SECONDS - start)) -lt 60 ]; then ok "killed_rank_fails_job (rc $rc in $((SECONDS - start)) s)"
else not_ok killed_rank_fails_job "rc $rc after $((SECONDS - start)) s"; fi
if grep -q "rank 1" "$tmp/kill.out"; then ok killed_rank_named; else not_ok killed_rank_named "$(tail -n 5 "$tmp/kill.out" | tr '\n' ' ')"; fi
check_shm killed_rank "$before"
if pgrep -f "$tmp/kill" >/dev/null; then not_ok killed_rank_nothing_running "$(pgrep -af "$tmp/kill")"; else ok killed_rank_nothing_running; fi

# Resume at another layout: save at step 3 under one layout, finish under
# another, and match the uninterrupted single-rank run.
resume_case() { # NAME RANKS_A "SETS_A" RANKS_B "SETS_B"
    local name="$1" na="$2" sa="$3" nb="$4" sb="$5"
    # shellcheck disable=SC2086
    run "${name}_a" "$na" $sa --set train.steps=$STEPS --set out.save_every=3 || { not_ok "resume_$name" "first half failed"; return; }
    mkdir -p "$tmp/${name}_b" && cp -r "$tmp/${name}_a/step_00000003" "$tmp/${name}_b/"
    grep '"step":[123],' "$tmp/${name}_a/log.jsonl" | grep '"loss"' >"$tmp/${name}_b/log.jsonl"
    # shellcheck disable=SC2086
    timeout -k 5 120 scripts/launch.sh -n "$nb" --log-dir "$tmp/${name}_b/launch" -- "$bin" --config "$cfg" \
        --set out.dir="$tmp/${name}_b" --set out.resume=true $sb >"$tmp/${name}_b.out" 2>&1 ||
        { not_ok "resume_$name" "second half failed: $(tail -n 3 "$tmp/${name}_b.out" | tr '\n' ' ')"; return; }
    local out
    if out=$(compare "$tmp/ref" "$tmp/${name}_b" $STEPS); then ok "resume_${name} ($out)"; else not_ok "resume_$name" "$out"; fi
}
resume_case tp2_to_tp4 2 "--set parallel.tp=2" 4 "--set parallel.tp=4"
resume_case tp4_to_tp1_dp2 4 "--set parallel.tp=4" 2 ""
resume_case zero_on_to_off 2 "--set parallel.zero=1" 2 "--set parallel.zero=0"
# the moments of ZeRO's bucket shards gathered into a checkpoint, and taken back at other buckets
resume_case zero_buckets_to_zero 2 "--set parallel.zero=1 --set parallel.dp_bucket_mb=0.001" 2 "--set parallel.zero=1"
exit $failed
