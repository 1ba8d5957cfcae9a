#!/usr/bin/env bash
# The GPU suite, the body of `make test-gpu` (which builds make GPU=1 first);
# tests/gpu/README.md lists every check and its tolerance.
#   tests/gpu/run_gpu.sh [SECTION]   only the sections whose name contains it:
#     kernels nccl_unit cpu_match bf16 tp2_shm nccl recompute sanitizer memory
# One line per check, "ok NAME" or "not ok NAME - why" (as tests/run.sh
# counts them), "skip NAME - why" for what this machine cannot run (never
# counted as passed), and a last line "N passed, M failed"; exits 1 if any
# check failed. Without a GPU it says so, runs nothing, prints no count and
# exits 0.
# shellcheck source=tests/lib.sh
if [ -z "${TRAIN_GPT:-}" ] && [ -x "$(dirname "$0")/../../build/gpu/train_gpt" ]; then
    export TRAIN_GPT=build/gpu/train_gpt # the GPU=1 build, whatever ./train_gpt was built as last
fi
source "$(dirname "$0")/../lib.sh" gpu
only="${1:-}"
pass=0 fail=0
good() { ok "$1"; pass=$((pass + 1)); }
bad() { not_ok "$1" "$2"; fail=$((fail + 1)); }
skip() { echo "skip $1 - $2"; }
want() { [ -z "$only" ] || [[ "$1" == *"$only"* ]]; }
last_lines() { tail -n "${2:-4}" "$1" 2>/dev/null | tr '\n' ' '; }

# ---- 1. a GPU, or nothing ----------------------------------------------------
if ! gpu_list=$(nvidia-smi -L 2>/dev/null) || ! grep -q '^GPU ' <<<"$gpu_list"; then
    echo "test-gpu: no GPU on this machine (nvidia-smi found none); nothing was run"
    exit 0
fi
n_gpus=$(grep -c '^GPU ' <<<"$gpu_list")
echo "# $n_gpus GPU(s):"
while IFS= read -r line; do echo "#   $line"; done <<<"$gpu_list"
echo "# train_gpt: $bin; scratch: $tmp"

# ---- 2. every op of the CUDA backend against the CPU backend -----------------
kbin="${KERNELS_BIN:-}"
for k in build/gpu/test_cuda_kernels build/test_cuda_kernels; do
    [ -z "$kbin" ] && [ -x "$k" ] && kbin=$k
done
# count_binary NAME LOG RC: adds a test binary's "ok"/"not ok" lines to the
# count; a binary that fails without a "not ok" line, exits with a status other
# than 0 or 1 (a crash, a timeout) or reports nothing is one more failure;
# one that only says "skip" is a skip.
count_binary() {
    local name="$1" log="$2" rc="$3" p f
    p=$(grep -c '^ok ' "$log")
    f=$(grep -c '^not ok ' "$log")
    grep -E '^(ok|not ok) ' "$log" | sed "s/^/[$name] /"
    if [ "$rc" -eq 0 ] && [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && grep -q '^skip' "$log"; then
        skip "$name" "$(grep -m1 '^skip' "$log")"
        return
    fi
    if { [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; } || [ "$rc" -gt 1 ]; then # a crash, a timeout (124)
        echo "not ok $name - exited with status $rc: $(last_lines "$log" 6)"
        f=$((f + 1))
    elif [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
        echo "not ok $name - reported no checks: $(last_lines "$log" 6)"
        f=1
    fi
    pass=$((pass + p))
    fail=$((fail + f))
}
if want kernels; then
    # Hopper's building blocks first, each on a 30 s clock (a second or two of work): if a Hopper kernel deadlocks in the
    # kernel checks below, what these say of the hardware against the emulation still comes back.
    # Hopper's bulk tensor copies, mbarriers and named barriers (tests/emu/test_tma.cu built by nvcc):
    # box loads in each swizzle against the host's reference, a producer/consumer pipeline, a store;
    # it says "skip" below compute capability 9.0
    if [ -x build/gpu/test_tma ]; then
        timeout -k 10 30 build/gpu/test_tma >"$tmp/tma.out" 2>&1
        count_binary tma "$tmp/tma.out" $?
    else
        bad tma "build/gpu/test_tma is missing: make GPU=1 build/gpu/test_tma"
    fi
    # Hopper's wgmma (tests/gpu/hopper_check.cu) against a CPU product: exact on integers, the
    # emulator's results; it says "skip" on a GPU other than compute capability 9.0
    if [ ! -x build/gpu/hopper_check ]; then
        bad hopper_check "build/gpu/hopper_check is missing: make GPU=1 build/gpu/hopper_check"
    else
        timeout -k 10 30 build/gpu/hopper_check >"$tmp/hopper.out" 2>&1
        count_binary hopper_check "$tmp/hopper.out" $?
    fi
    # each op on random inputs at odd sizes and large ones, fp32 within 1e-5, bf16 within 1e-2;
    # KERNELS_TIMEOUT_S (default 900): gpu_check.sh's kernels section gives it less than its own cap,
    # so that a hang still ends in this group's count and the log of the checks before it
    if [ -z "$kbin" ]; then
        bad kernels "build/gpu/test_cuda_kernels is missing: make GPU=1 build/gpu/test_cuda_kernels"
    else
        timeout -k 10 "${KERNELS_TIMEOUT_S:-900}" "$kbin" >"$tmp/kernels.out" 2>&1
        rc=$?
        if [ "$rc" -eq 2 ]; then # the CUDA backend cannot open a device
            # nvidia-smi sees a GPU the backend cannot open: a failure, not a pass and not "no GPU"
            echo "test-gpu: nvidia-smi lists a GPU but the CUDA backend cannot use it ($(last_lines "$tmp/kernels.out" 2)); nothing after it was run" >&2
            echo "$pass passed, $((fail + 1)) failed"
            exit 1
        fi
        count_binary kernels "$tmp/kernels.out" "$rc"
    fi
fi

# the NCCL communicator's own tests (build/gpu/test_nccl): world 1, and TP and DP groups of 2 GPUs when there are 2
if want nccl_unit; then
    nbin=""
    for k in build/gpu/test_nccl build/test_nccl; do [ -z "$nbin" ] && [ -x "$k" ] && nbin=$k; done
    if [ -z "$nbin" ]; then
        skip nccl_unit "build/gpu/test_nccl is not built"
    else
        timeout -k 10 300 "$nbin" >"$tmp/nccl_w1.out" 2>&1
        count_binary nccl_unit_w1 "$tmp/nccl_w1.out" $?
        if [ "$n_gpus" -ge 2 ]; then
            for t in 2 1; do
                timeout -k 10 300 scripts/launch.sh -n 2 --log-dir "$tmp/nccl_tp$t" -- "$nbin" "$t" >"$tmp/nccl_tp$t.out" 2>&1
                count_binary "nccl_unit_2gpu_tp$t" "$tmp/nccl_tp$t.out" $?
            done
        else
            skip nccl_unit_2gpu "one GPU: the two-rank NCCL tests need two"
        fi
    fi
fi

# ---- 3. whole-model runs ------------------------------------------------------
# Random tokens (GPT-2's vocabulary) for the equivalence runs, so they need no
# prepared data; the bf16 run trains on the KJV shards of configs/tiny.json.
python3 - "$tmp/data" <<'PY'
import os, random, struct, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
rng = random.Random(7)
for name, n in (("train_000000", 200000), ("val_000000", 40000)):
    with open(f"{d}/{name}.bin", "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack(f"<{n}H", *(rng.randrange(50257) for _ in range(n))))
PY
tiny=(--config configs/tiny.json --set out.sample_tokens=0 --set out.eval_every=0)
synthetic=(--set "data.train=$tmp/data/train_*.bin" --set "data.val=$tmp/data/val_*.bin" --set out.eval_batches=2
           --set train.micro_batch=4 --set train.global_batch=8 --set train.warmup=1)
cuda32=(--set device=cuda --set train.precision=fp32)

# train NAME RANKS ARGS...: one job into $tmp/NAME (through scripts/launch.sh when RANKS > 1)
train() {
    local name="$1" n="$2"; shift 2
    rm -rf "${tmp:?}/$name"
    if [ "$n" -eq 1 ]; then
        timeout -k 10 600 "$bin" "$@" --set out.dir="$tmp/$name" >"$tmp/$name.out" 2>&1
    else
        timeout -k 10 600 scripts/launch.sh -n "$n" --log-dir "$tmp/$name/launch" -- \
            "$bin" "$@" --set out.dir="$tmp/$name" >"$tmp/$name.out" 2>&1
    fi
}
# train_once NAME RANKS ARGS...: as train, but a run already made by this
# script is reused (the references several sections compare with)
declare -A made=()
train_once() {
    local name="$1"
    if [ -z "${made[$name]:-}" ]; then
        if train "$@"; then made[$name]=ok; else made[$name]=failed; fi
    fi
    [ "${made[$name]}" = ok ]
}
# compare REF RUN RTOL KEYS: the largest relative difference of each logged
# key (comma-separated: loss, grad_norm, val_loss) over all steps; fails when
# the logged steps differ or any difference is not below RTOL
compare() {
    python3 - "$tmp/$1/log.jsonl" "$tmp/$2/log.jsonl" "$3" "$4" <<'PY'
import json, sys
ref, run, rtol, keys = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4].split(",")
def load(path):
    out = {}
    for line in open(path):
        try:
            j = json.loads(line)
        except ValueError:
            sys.exit(f"{path}: a line that is not JSON (a NaN?): {line.strip()[:120]}")
        for k in keys:
            if k in j:
                out[(k, j["step"])] = j[k]
    return out
a, b = load(ref), load(run)
if not a or sorted(a) != sorted(b):
    sys.exit(f"logged values differ: {sorted(a)[:4]}... vs {sorted(b)[:4]}... ({len(a)} vs {len(b)})")
worst = {}
for (k, step), want in a.items():
    rel = abs(b[(k, step)] - want) / max(abs(want), 1e-30)
    if k not in worst or not rel <= worst[k][0]:
        worst[k] = (rel, step)
print(" ".join(f"max_{k}_rel={r:.3g}@{s}" for k, (r, s) in worst.items()), f"({len(a)} values)")
sys.exit(0 if all(r < rtol for r, _ in worst.values()) else 1)
PY
}
# check_match NAME REF RUN RTOL KEYS: one check line from compare
check_match() {
    local out
    if out=$(compare "$2" "$3" "$4" "$5" 2>&1); then good "$1 ($out)"; else bad "$1" "$out (tolerance $4)"; fi
}
run_failed() { bad "$1" "the run failed: $(last_lines "$tmp/$2.out" 4)"; }

# (a) CUDA fp32 reproduces the CPU: losses, gradient norms and the final val loss of 5 steps within 1e-4
if want cpu_match; then
    if ! train_once cpu_fp32 1 "${tiny[@]}" "${synthetic[@]}" --set device=cpu --set train.steps=5; then run_failed cuda_fp32_matches_cpu cpu_fp32
    elif ! train_once cuda_fp32 1 "${tiny[@]}" "${synthetic[@]}" "${cuda32[@]}" --set train.steps=5; then run_failed cuda_fp32_matches_cpu cuda_fp32
    else check_match cuda_fp32_matches_cpu cpu_fp32 cuda_fp32 1e-4 loss,grad_norm,val_loss; fi
fi

# (b) bf16 tracks fp32 over 100 steps of KJV: every loss, and the final val loss, within 2%
if want bf16; then
    if ! { ls assets/data/kjv_train_*.bin && [ -f assets/data/kjv_val_000000.bin ]; } >/dev/null 2>&1; then
        bash scripts/prepare_kjv.sh >"$tmp/prepare_kjv.out" 2>&1 # needs ./prepare and assets/ from make setup
    fi
    if ! { ls assets/data/kjv_train_*.bin && [ -f assets/data/kjv_val_000000.bin ]; } >/dev/null 2>&1; then
        bad bf16_tracks_fp32_kjv "no KJV shards in assets/data (make setup data): $(last_lines "$tmp/prepare_kjv.out" 2)"
    elif ! train kjv_fp32 1 "${tiny[@]}" "${cuda32[@]}" --set train.steps=100; then run_failed bf16_tracks_fp32_kjv kjv_fp32
    elif ! train kjv_bf16 1 "${tiny[@]}" --set device=cuda --set train.precision=bf16 --set train.steps=100; then
        run_failed bf16_tracks_fp32_kjv kjv_bf16
    else check_match bf16_tracks_fp32_kjv kjv_fp32 kjv_bf16 2e-2 loss,val_loss; fi
fi

# (c) TP=2 with SP, and DP=2 under ZeRO, as two processes on the GPU(s) through the shm communicator match TP=1 on
#     the GPU within 1e-4 (ZeRO in bf16 within 2e-3)
if want tp2_shm; then
    if ! train_once cuda_fp32 1 "${tiny[@]}" "${synthetic[@]}" "${cuda32[@]}" --set train.steps=5; then run_failed tp2_sp_shm_matches_tp1 cuda_fp32
    elif ! train tp2_sp_shm 2 "${tiny[@]}" "${synthetic[@]}" "${cuda32[@]}" --set train.steps=5 --set parallel.tp=2 \
        --set parallel.sp=true --set parallel.comm=shm; then run_failed tp2_sp_shm_matches_tp1 tp2_sp_shm
    else check_match tp2_sp_shm_matches_tp1 cuda_fp32 tp2_sp_shm 1e-4 loss,grad_norm,val_loss; fi
    # ZeRO over DP=2 in buckets of one layer: AdamW on a rank's chunk of every bucket
    if ! train_once cuda_fp32 1 "${tiny[@]}" "${synthetic[@]}" "${cuda32[@]}" --set train.steps=5; then run_failed dp2_zero_shm_matches_tp1 cuda_fp32
    elif ! train dp2_zero_shm 2 "${tiny[@]}" "${synthetic[@]}" "${cuda32[@]}" --set train.steps=5 --set parallel.zero=1 \
        --set parallel.dp_bucket_mb=0.001 --set parallel.comm=shm; then run_failed dp2_zero_shm_matches_tp1 dp2_zero_shm
    else check_match dp2_zero_shm_matches_tp1 cuda_fp32 dp2_zero_shm 1e-4 loss,grad_norm,val_loss; fi
    # the same in bf16, where a rank keeps only its chunks of the float32 master: within bf16's 2e-3 of TP=1
    # bf16 (as tests/t_bf16.sh holds the CPU's bf16 emulation)
    bf16=(--set device=cuda --set train.precision=bf16)
    if ! train cuda_bf16 1 "${tiny[@]}" "${synthetic[@]}" "${bf16[@]}" --set train.steps=5; then run_failed dp2_zero_bf16_shm_matches_tp1 cuda_bf16
    elif ! train dp2_zero_bf16_shm 2 "${tiny[@]}" "${synthetic[@]}" "${bf16[@]}" --set train.steps=5 --set parallel.zero=1 \
        --set parallel.dp_bucket_mb=0.001 --set parallel.comm=shm; then run_failed dp2_zero_bf16_shm_matches_tp1 dp2_zero_bf16_shm
    else check_match dp2_zero_bf16_shm_matches_tp1 cuda_bf16 dp2_zero_bf16_shm 2e-3 loss,val_loss; fi
fi

# (d) NCCL: at world size 1 it matches (a), its step a CUDA graph holding the collectives; with 2 GPUs, TP=2 (with and without SP), DP=2 and DP=2 under ZeRO in
#     buckets match TP=1, within 1e-4
if want nccl; then
    if ! train_once cuda_fp32 1 "${tiny[@]}" "${synthetic[@]}" "${cuda32[@]}" --set train.steps=5; then run_failed nccl_world1_matches_tp1 cuda_fp32
    else
        if train nccl_w1 1 "${tiny[@]}" "${synthetic[@]}" "${cuda32[@]}" --set train.steps=5 --set parallel.comm=nccl; then
            check_match nccl_world1_matches_tp1 cuda_fp32 nccl_w1 1e-4 loss,grad_norm,val_loss
            # the step, its NCCL collectives included, as a CUDA graph (a refused capture would only warn)
            if grep -q "^step 2: captured as a CUDA graph" "$tmp/nccl_w1.out"; then good nccl_world1_step_captured_with_collectives
            else bad nccl_world1_step_captured_with_collectives "$(grep -m2 -i 'graph\|warning' "$tmp/nccl_w1.out" | tr '\n' ' ')"; fi
        else run_failed nccl_world1_matches_tp1 nccl_w1; fi
        if [ "$n_gpus" -ge 2 ]; then
            for lay in "nccl_tp2 --set parallel.tp=2" "nccl_tp2_sp --set parallel.tp=2 --set parallel.sp=true" "nccl_dp2" \
                       "nccl_dp2_zero --set parallel.zero=1 --set parallel.dp_bucket_mb=0.001"; do
                # shellcheck disable=SC2086
                set -- $lay
                name="$1"; shift
                if train "$name" 2 "${tiny[@]}" "${synthetic[@]}" "${cuda32[@]}" --set train.steps=5 --set parallel.comm=nccl "$@"; then
                    check_match "${name}_matches_tp1" cuda_fp32 "$name" 1e-4 loss,grad_norm,val_loss
                else run_failed "${name}_matches_tp1" "$name"; fi
            done
        else
            skip nccl_2gpu_layouts "one GPU: NCCL refuses two ranks on one GPU"
        fi
    fi
fi

# (e) recompute full and selective bitwise equal to none on CUDA (4 steps), with and without dropout; a run
#     repeated is bitwise equal to itself (no floating-point atomics); the step captured as a CUDA graph at
#     step 2 and replayed at steps 3 and 4 (with dropout, each step's own masks) bitwise equal to the same run
#     op by op
strip() { grep '"loss"' "$tmp/$1/log.jsonl" | sed -E 's/.*("step":[0-9]+,"loss":[^,]*,"lr":[^,]*,"grad_norm":[^,]*).*/\1/'; }
# the val lines without their wall-clock "time" (every log line carries one since --eval/--sample came)
val_lines() { grep '"val_loss"' "$tmp/$1/log.jsonl" | sed -E 's/"time":[^,]*,//'; }
# check_bitwise NAME REF RUN: the deterministic part of every train line, the val loss and the final checkpoint
check_bitwise() {
    local name="$1" a="$2" b="$3" ck="step_00000004"
    if [ -z "$(strip "$a")" ] || [ "$(strip "$a")" != "$(strip "$b")" ]; then
        bad "$name" "train lines differ: $(diff <(strip "$a") <(strip "$b") | head -n 2 | tr '\n' ' ')"
    elif [ -z "$(val_lines "$a")" ] || [ "$(val_lines "$a")" != "$(val_lines "$b")" ]; then
        bad "$name" "val losses differ: $(diff <(val_lines "$a") <(val_lines "$b") | head -n 2 | tr '\n' ' ')"
    elif ! cmp -s "$tmp/$a/$ck/model.safetensors" "$tmp/$b/$ck/model.safetensors" ||
        ! cmp -s "$tmp/$a/$ck/optimizer.safetensors" "$tmp/$b/$ck/optimizer.safetensors"; then
        bad "$name" "final checkpoints differ (or are missing)"
    else good "$name"; fi
}
if want recompute; then
    for variant in "fp32 --set train.precision=fp32" "bf16 --set train.precision=bf16" \
                   "fp32_dropout --set train.precision=fp32 --set model.dropout=0.1" \
                   "bf16_dropout --set train.precision=bf16 --set model.dropout=0.1"; do
        # shellcheck disable=SC2086
        set -- $variant
        v="$1"; shift
        args=("${tiny[@]}" "${synthetic[@]}" --set device=cuda --set train.steps=4 "$@")
        if ! train "rc_${v}_none" 1 "${args[@]}" --set train.recompute=none; then run_failed "recompute_${v}" "rc_${v}_none"; continue; fi
        for mode in selective full; do
            if train "rc_${v}_$mode" 1 "${args[@]}" --set train.recompute=$mode; then
                check_bitwise "recompute_${v}_${mode}_bitwise_equals_none" "rc_${v}_none" "rc_${v}_$mode"
            else run_failed "recompute_${v}_${mode}_bitwise_equals_none" "rc_${v}_$mode"; fi
        done
        if [[ "$v" != *_dropout ]]; then
            if train "rc_${v}_again" 1 "${args[@]}" --set train.recompute=none; then
                check_bitwise "repeat_run_${v}_bitwise" "rc_${v}_none" "rc_${v}_again"
            else run_failed "repeat_run_${v}_bitwise" "rc_${v}_again"; fi
        fi
        # the step is a CUDA graph from step 2 (train.cuda_graph), dropout or not: the same bits op by op
        if ! grep -q "^step 2: captured as a CUDA graph" "$tmp/rc_${v}_none.out"; then
            bad "cuda_graph_${v}_captured" "no capture line: $(grep -m1 -i "graph\|warning" "$tmp/rc_${v}_none.out")"
        elif train "rc_${v}_nograph" 1 "${args[@]}" --set train.recompute=none --set train.cuda_graph=false; then
            check_bitwise "cuda_graph_${v}_bitwise_equals_op_by_op" "rc_${v}_nograph" "rc_${v}_none"
        else run_failed "cuda_graph_${v}_bitwise_equals_op_by_op" "rc_${v}_nograph"; fi
    done
    # kernels.dw_overlap: the weight gradients' products on a second stream beside the input gradients'
    # (forked and joined inside each call, captured into the step's graph from step 2): the same bits
    if train rc_bf16_dwo 1 "${tiny[@]}" "${synthetic[@]}" --set device=cuda --set train.steps=4 --set train.precision=bf16 \
        --set train.recompute=none --set kernels.dw_overlap=true; then
        check_bitwise dw_overlap_bf16_bitwise_equals_in_turn rc_bf16_none rc_bf16_dwo
    else run_failed dw_overlap_bf16_bitwise_equals_in_turn rc_bf16_dwo; fi
    # kernels.lt_tune: a run that times cuBLASLt's candidates for each product (stdout: a "cuBLASLt" line a
    # product) and records its choices, then the same run pinning that record: nothing timed, the same bits
    args=("${tiny[@]}" "${synthetic[@]}" --set device=cuda --set train.steps=4 --set train.precision=bf16)
    if ! train lt_time 1 "${args[@]}" --set kernels.lt_tune=time || [ ! -s "$tmp/lt_time/lt_algos.tsv" ] ||
        ! grep -q "^cuBLASLt .*: algorithm [0-9]* of [0-9]*" "$tmp/lt_time.out"; then
        run_failed lt_tune_pinned_bitwise_equals_timed lt_time
    elif ! train lt_pinned 1 "${args[@]}" --set kernels.lt_tune="$tmp/lt_time/lt_algos.tsv"; then
        run_failed lt_tune_pinned_bitwise_equals_timed lt_pinned
    elif grep -q "^cuBLASLt" "$tmp/lt_pinned.out"; then
        bad lt_tune_pinned_bitwise_equals_timed "the pinned run timed again: $(grep -m2 "^cuBLASLt" "$tmp/lt_pinned.out" | tr '\n' ' ')"
    else check_bitwise lt_tune_pinned_bitwise_equals_timed lt_time lt_pinned; fi
fi

# (f) compute-sanitizer memcheck: the kernel tests (small cases) and 2 training steps (bf16, dropout) report no error;
#     racecheck and synccheck over one training step report none either; on compute capability 9.0, memcheck,
#     racecheck and synccheck over one step with kernels.attention=wgmma_ws too
if want sanitizer; then
    san=$(command -v compute-sanitizer 2>/dev/null || true)
    for d in "${CUDA_HOME:-/usr/local/cuda}/bin" /usr/local/cuda/bin /usr/local/cuda/compute-sanitizer \
             "$(dirname "$(command -v nvcc 2>/dev/null || echo .)")"; do
        [ -z "$san" ] && [ -x "$d/compute-sanitizer" ] && san="$d/compute-sanitizer"
    done
    if [ -z "$san" ]; then
        skip sanitizer "compute-sanitizer not found on PATH or under /usr/local/cuda/bin (not counted as passed)"
    else
        # race_kernels FILE: the kernel of each access racecheck reported, one a line (a name with spaces,
        # as a demangled one of ours would be, gives its first word: never a library prefix)
        race_kernels() { grep -oE '(Race reported between|and) [A-Za-z]+ access at [^ +]+' "$1" | sed 's/.* access at //'; }
        # only_library_races FILE: racecheck reported hazards, every one between accesses of cuBLAS's
        # own kernels, and the run went on to its end. On an H200 (results/gpu/2026-11-27_h200) racecheck
        # reported 18 of its 19 hazards in nvjet_sm90_* kernels (Hopper's asynchronous copies and barriers,
        # which it does not follow): not ours to fix. The 19th, in our sumsq_finish_kernel, failed the check,
        # as any race in one of ours still does.
        only_library_races() {
            local k n=0
            while read -r k; do
                case "$k" in nvjet_*|sm90_xmma*|sm80_xmma*|cutlass*|cublas*) n=$((n + 1)) ;; *) return 1 ;; esac
            done < <(race_kernels "$1")
            [ "$n" -gt 0 ] && grep -q '^peak resident memory' "$1"
        }
        # sanitized NAME [--tool TOOL] [--limit SECONDS] COMMAND...: runs under memcheck (or TOOL) for at most
        # SECONDS (900); passes on exit 0 with "0 errors" (racecheck also with hazards inside cuBLAS's kernels
        # only: only_library_races); san_rc: the run's exit status (124 or 137: stopped by the clock)
        sanitized() {
            local name="$1"; shift
            local tool=memcheck limit=900
            if [ "$1" = --tool ]; then tool="$2"; shift 2; fi
            if [ "$1" = --limit ]; then limit="$2"; shift 2; fi
            timeout -k 10 "$limit" "$san" --tool "$tool" --error-exitcode 1 "$@" >"$tmp/$name.out" 2>&1
            local rc=$?
            san_rc=$rc
            # racecheck ends in its own summary line ("RACECHECK SUMMARY: N hazards displayed (N errors, ...")
            local summary='ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors'
            if [ "$rc" -eq 0 ] && grep -qE "$summary" "$tmp/$name.out"; then
                good "$name ($(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$tmp/$name.out" | sed 's/^=* *//'))"
            elif [ "$tool" = racecheck ] && [ "$rc" -le 1 ] && only_library_races "$tmp/$name.out"; then
                good "$name ($(grep -m1 'RACECHECK SUMMARY' "$tmp/$name.out" | sed 's/^=* *//'), all inside cuBLAS's own kernels: $(race_kernels "$tmp/$name.out" | sort -u | paste -sd' '))"
            else
                bad "$name" "exit $rc: $(grep -m3 -E '^========= (Invalid|Program hit|Error|ERROR SUMMARY|RACECHECK SUMMARY|Barrier|Race)' "$tmp/$name.out" | tr '\n' ' ')$(grep -m2 '^not ok' "$tmp/$name.out" | tr '\n' ' ') $(last_lines "$tmp/$name.out" 2)"
            fi
        }
        if [ -n "$kbin" ]; then sanitized sanitizer_kernels "$kbin" --quick
        else bad sanitizer_kernels "build/gpu/test_cuda_kernels is missing"; fi
        rm -rf "$tmp/san_train"
        sanitized sanitizer_train "$bin" "${tiny[@]}" "${synthetic[@]}" --set device=cuda --set train.precision=bf16 \
            --set model.dropout=0.1 --set train.steps=2 --set out.save_final=false --set out.dir="$tmp/san_train"
        # The device's own view of what the emulation only models (its race check, EMU_RACE=1, reasons
        # from barriers over fibers that never interleave between two instructions): shared-memory
        # races (racecheck) and barriers not reached by the whole block (synccheck), over one step that
        # runs every training kernel once (graph capture off: the tools replay nothing)
        for tool in racecheck synccheck; do
            rm -rf "$tmp/san_$tool"
            sanitized "sanitizer_train_$tool" --tool "$tool" "$bin" "${tiny[@]}" "${synthetic[@]}" --set device=cuda \
                --set train.precision=bf16 --set model.dropout=0.1 --set train.steps=1 --set train.cuda_graph=false \
                --set out.save_final=false --set out.dir="$tmp/san_$tool"
        done
        # The Hopper attention (kernels.attention=wgmma_ws: bulk tensor copies on mbarriers, named-barrier
        # turns, setmaxnreg; then the wgmma backward), which the emulation's race check cannot follow: one
        # step at head size 64 without dropout under each tool, on compute capability 9.0 only
        cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' ')
        if [ "$cc" != 9.0 ]; then
            skip sanitizer_train_hopper "compute capability ${cc:-unknown}, not 9.0: no Hopper attention (not counted as passed)"
        else
            # each on a 150 s clock (a tiny step; the first sitting's whole section took 53 s): a kernel that
            # deadlocks on its first GPU ends in a failure here, and the tools after it are not run
            hung=""
            for tool in memcheck racecheck synccheck; do
                if [ -n "$hung" ]; then
                    bad "sanitizer_train_hopper_$tool" "not run: $hung"
                    continue
                fi
                rm -rf "$tmp/san_hopper_$tool"
                sanitized "sanitizer_train_hopper_$tool" --tool "$tool" --limit 150 "$bin" "${tiny[@]}" "${synthetic[@]}" \
                    --set device=cuda --set train.precision=bf16 --set model.n_head=2 --set kernels.attention=wgmma_ws \
                    --set train.steps=1 --set train.cuda_graph=false --set out.save_final=false --set out.dir="$tmp/san_hopper_$tool"
                [ "$san_rc" -ne 124 ] && [ "$san_rc" -ne 137 ] || hung="the $tool run was stopped after 150 s (a hang?)"
            done
        fi
    fi
fi

# (g) the memory budget is what the device holds: GPT-2 124M, micro-batch 4 x 1024, 2 steps: the measured peak
#     (log.jsonl's mem_peak_bytes on the train lines) within 5% of the budget's total, bf16 and fp32
if want memory; then
    for prec in bf16 fp32; do
        if ! train "mem_$prec" 1 --config configs/gpt2_124m.json --set device=cuda --set train.precision=$prec \
            --set "data.train=$tmp/data/train_*.bin" --set out.eval_batches=0 --set out.sample_tokens=0 --set out.save_final=false \
            --set train.micro_batch=4 --set train.global_batch=4 --set model.seq_len=1024 --set train.steps=2; then
            run_failed "memory_budget_$prec" "mem_$prec"
            continue
        fi
        if out=$(python3 - "$tmp/mem_$prec/log.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
budget = next((l["budget_bytes_per_rank"] for l in lines if "budget_bytes_per_rank" in l), None)
peaks = [l["mem_peak_bytes"] for l in lines if "loss" in l and "mem_peak_bytes" in l]
if budget is None or not peaks:
    sys.exit("log.jsonl lacks the budget line or mem_peak_bytes on its train lines")
total, peak = budget["total"], max(peaks)
MiB = 1024 * 1024
parts = ", ".join(f"{k} {v / MiB:.0f}" for k, v in budget.items() if k != "total" and isinstance(v, (int, float)))
print(f"peak {peak / MiB:.1f} MiB vs budget {total / MiB:.1f} MiB ({100 * (peak - total) / total:+.2f}%; budget MiB: {parts})")
sys.exit(0 if total > 0 and abs(peak - total) <= 0.05 * total else 1)
PY
        ); then good "memory_budget_$prec ($out)"; else bad "memory_budget_$prec" "$out"; fi
    done
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
