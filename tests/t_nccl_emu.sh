#!/usr/bin/env bash
# The NCCL communicator with ranks that are processes, on the emulation's NCCL
# (tests/emu/emu_nccl.cpp: each rank has its own emulated device, one of
# EMU_DEVICES, and the ranks meet in a folder under TMPDIR). A lent machine has
# one GPU and NCCL refuses two ranks on one, so this is where the multi-rank
# NCCL paths run before a cluster:
#  - tests/test_nccl.c as 2 ranks (the TP group, then the DP group) on the
#    eager device and on the lazy one (EMU_LAZY=2), and as 4 (TP 2 x DP 2) on
#    the lazy one;
#  - a rank that stays away: the others time out within parallel.timeout_s,
#    naming the group, also with deferred waits (lazy device: the collective
#    stalls its stream, as on a GPU, so the communicator's own deadline acts);
#  - the trainer at TP 2, TP 2 + SP, DP 2, DP 2 under ZeRO in buckets of one
#    layer, and TP 2 x DP 2 with SP and ZeRO (4 processes), fp32 and bf16 with
#    dropout: over NCCL bitwise equal to the same layout over shm (both sum in
#    rank order), on the eager device and at both lazy levels (at TP 2 x DP 2
#    the emulation's NCCL also checks that the two communicators were made
#    with NCCL_LAUNCH_ORDER_IMPLICIT=1: seen failing without; seen failing
#    without the collective's wait for the compute stream, comm_nccl_wait.c's
#    order_after_compute, under 1 and 2, and without the compute stream's wait
#    for a deferred collective, order_compute_after, under 2);
#  - ZeRO's gather of the updated weights, which with buckets overlaps the next
#    step's forward pass stage by stage: bitwise equal to the gather at the step's
#    end (parallel.dp_bucket_mb=0), checkpoints at steps 2 and 3 and the
#    validation losses (an evaluation and a checkpoint at step 2 must complete
#    the gather first), over shm and over NCCL on the lazy devices (seen failing
#    without the forward's waits, under lazy 1 and 2; without the evaluation's
#    or the checkpoint's, over shm too);
#  - the trainer's step as a CUDA graph over NCCL (train.cuda_graph): every run
#    above captures step 2, collectives included (the comm stream forks off the
#    captured stream and joins back at each wait), and launches the graph from
#    then on, with an evaluation and a checkpoint between launches; the bytes
#    each step sends equal shm's (seen failing without optim_graph_state after a launch: the
#    evaluation after a launch reads weights whose gather it skipped); with
#    graphs off too; and a capture refused on one rank only leaves every rank
#    op by op, warned, with the same bits;
#  - a rank stopped once the step is a graph: the other's wait for the launch
#    times out within parallel.timeout_s, naming the group, and its abort
#    returns (NCCL's abort waits until no graph holds the communicator's
#    collectives, so the graph goes first: seen failing without);
#  - two ranks on one device: refused at creation with NCCL's message;
#  - no rendezvous folder left behind by runs that ended well;
#  - the comm time of a step is the collectives' device time (CUDA events on
#    the communicator's stream, comm_nccl_time.c): test_nccl's
#    *_seconds_are_device_time, each collective made to last 2 ms
#    (EMU_NCCL_DELAY_MS), and the trainer's comm_ms of steps launched as a
#    graph above 0 (host timing counted nothing there);
#  - scripts/gpu_check.sh's multi-gpu section rehearsed: a stand-in nvidia-smi
#    lists two H200s and the emulated trainer stands in for the GPU build
#    (tests/gpu/multi_gpu.sh layouts at the tiny model above).
# cost: 380 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" nccl_emu
export OMP_NUM_THREADS=1 EMU_NCCL_TIMEOUT_S=60 EMU_STALL_S=60

if ! bash tests/emu/build.sh train >"$tmp/build.out" 2>&1; then
    not_ok emu_build "$(tail -n 5 "$tmp/build.out" | tr '\n' ' ')"
    exit 1
fi
emu_bin=build/emu/train_gpt_emu nccl_bin=build/emu/test_nccl_emu
mkdir -p "$tmp/rdv" "$tmp/rdv_failing"
export TMPDIR="$tmp/rdv"

# launch NAME N -- ARGS...: N emulated processes, each with a device of its own
launch() {
    local name=$1 n=$2
    shift 3
    EMU_DEVICES=$n timeout -k 5 300 scripts/launch.sh -n "$n" --log-dir "$tmp/$name.logs" -- "$@" >"$tmp/$name.out" 2>&1
}

# test_nccl's own ok / not ok lines, prefixed with the layout and device
# (4 ranks on the eager device left out: 25 s of CI for what 2 ranks there and 4 on the lazy one cover)
for lazy in 0 2; do
    for lay in "2 2" "2 1" "4 2"; do
        set -- $lay
        [ "$lazy$1" = 04 ] && continue
        name="test_nccl_w$1_tp$2_lazy$lazy"
        # each collective of several ranks lasts at least 2 ms: test_nccl's *_seconds_are_device_time checks
        # that the communicator's seconds hold that much per collective (CUDA events), also where the host
        # only enqueues (deferred waits on the lazy device; a launch of a graph)
        EMU_NCCL_DELAY_MS=2 EMU_LAZY=$lazy launch "$name" "$1" -- "$nccl_bin" "$2"
        rc=$?
        sed -nE "s|^(not )?ok (.*)|\1ok $name: \2|p" "$tmp/$name.out"
        grep -q '^not ok' "$tmp/$name.out" && failed=1
        if [ $rc -ne 0 ] || ! grep -q '^ok tp_nonblocking' "$tmp/$name.out"; then
            not_ok "$name" "exit $rc: $(grep -m3 'error\|ERROR' "$tmp/$name.out" "$tmp/$name.logs"/rank_*.log | tr '\n' ' ')"
        fi
    done
done

# a rank that stays away (test_nccl --hang: the survivors print their verdict). The hung rank sleeps
# 9 s and the job waits for it, so the two runs go side by side (each launch its own port and folder).
declare -A hang_pid
for defer in "" --defer; do
    name="hang${defer//-/_}"
    TMPDIR="$tmp/rdv_failing" EMU_LAZY=1 launch "$name" 2 -- "$nccl_bin" 2 --hang 1 --timeout 3 $defer &
    hang_pid[$name]=$!
done
for name in hang hang__defer; do
    wait "${hang_pid[$name]}"
    rc=$?
    if [ $rc = 0 ] && grep -q '^ok hang_detected' "$tmp/$name.out"; then ok "nccl_$name ($(grep -m1 -o 'after [0-9.]* s' "$tmp/$name.out" | head -n 1))"
    else not_ok "nccl_$name" "exit $rc: $(grep -m2 'hang_detected\|error' "$tmp/$name.out" | tr '\n' ' ')"; fi
done

# The trainer: random tokens, the tiny model of tests/t_cuda_emu.sh
random_shards "$tmp/data" 300 13 3000 600
cat >"$tmp/cfg.json" <<JSON
{"model": {"n_layer": 2, "n_head": 4, "n_embd": 64, "vocab_size": 300, "seq_len": 16, "dropout": 0.1},
 "train": {"micro_batch": 2, "global_batch": 4, "steps": 3, "lr": 3e-3, "min_lr": 3e-4, "warmup": 1, "grad_clip": 0.5, "eps": 1e-5},
 "data": {"train": "$tmp/data/train_*.bin", "val": "$tmp/data/val_*.bin"},
 "device": "cuda",
 "out": {"eval_every": 2, "save_every": 2, "eval_batches": 2, "sample_tokens": 0, "resume": false, "log_every": 1}}
JSON
# train NAME N [--set ...]: the trainer as N emulated processes
train() {
    local name=$1 n=$2
    shift 2
    launch "$name" "$n" -- "$emu_bin" --config "$tmp/cfg.json" --set out.dir="$tmp/$name" "$@"
}
# same_run REF RUN: checkpoints at steps 2 and 3 bitwise, train and validation losses equal
same_run() {
    "$py" tests/parallel/compare.py "$tmp/$1" "$tmp/$2" 2 --bitwise >/dev/null 2>&1 &&
        "$py" tests/parallel/compare.py "$tmp/$1" "$tmp/$2" 3 --bitwise 2>&1 &&
        diff <(grep -o '"val_loss":[^,}]*' "$tmp/$1/log.jsonl") <(grep -o '"val_loss":[^,}]*' "$tmp/$2/log.jsonl") >/dev/null &&
        [ "$(grep -c '"val_loss"' "$tmp/$1/log.jsonl")" = 2 ]
}
# same_bytes REF RUN LAST: the bytes sent per group and collective equal at steps 1 to LAST (a launch of
# the graph counts its own). Under ZeRO with buckets step 3 differs by design: the graph holds the gather
# of the weights, so the launch after step 2's evaluation gathers again what the evaluation gathered.
same_bytes() {
    diff <(grep '"loss"' "$tmp/$1/log.jsonl" | head -n "$3" | grep -o '"[dt]p_[a-z_]*_bytes":[0-9]*') \
        <(grep '"loss"' "$tmp/$2/log.jsonl" | head -n "$3" | grep -o '"[dt]p_[a-z_]*_bytes":[0-9]*') >/dev/null
}
layouts=("tp2 2 parallel.tp=2"
         "tp2_sp 2 parallel.tp=2 parallel.sp=true"
         "dp2 2 parallel.tp=1"
         "dp2_zero 2 parallel.zero=1 parallel.dp_bucket_mb=0.001"
         "tp2_dp2_sp_zero 4 parallel.tp=2 parallel.sp=true parallel.zero=1 parallel.dp_bucket_mb=0.001")
for prec in fp32 bf16; do
    for lay in "${layouts[@]}"; do
        set -- $lay
        lname=$1 n=$2
        shift 2
        sets=(--set train.precision=$prec)
        for kv in "$@"; do sets+=(--set "$kv"); done
        shm="shm_${lname}_$prec"
        if ! train "$shm" "$n" "${sets[@]}" --set parallel.comm=shm; then
            not_ok "trainer_nccl_${lname}_${prec}" "the shm run failed: $(tail -n 2 "$tmp/$shm.out" | tr '\n' ' ')"
            continue
        fi
        # over NCCL the step is a CUDA graph from step 2 (train.cuda_graph), collectives and all; shm runs op by op
        for lazy in 0 1 2; do
            name="nccl_${lname}_${prec}_lazy$lazy"
            if EMU_LAZY=$lazy train "$name" "$n" "${sets[@]}" --set parallel.comm=nccl &&
                grep -q "communicator nccl" "$tmp/$name.out" && grep -q "step 2: captured as a CUDA graph" "$tmp/$name.out" &&
                out=$(same_run "$shm" "$name") && same_bytes "$shm" "$name" "$([[ $lname == *zero* ]] && echo 2 || echo 3)"
            then ok "trainer_${name}_bitwise_equals_shm ($out)"
            else not_ok "trainer_${name}_bitwise_equals_shm" "${out:-} $(grep -m2 -i 'error\|captured' "$tmp/$name.out" | tr '\n' ' ')"; fi
            out=""
        done
    done
done
# ZeRO's gather at the step's end (no buckets) against the staged one of the runs above
for prec in fp32 bf16; do
    ref="shm_dp2_zero_unbucketed_$prec"
    if ! train "$ref" 2 --set train.precision=$prec --set parallel.zero=1 --set parallel.dp_bucket_mb=0 --set parallel.comm=shm; then
        not_ok "trainer_zero_gather_${prec}_overlapped_equals_unbucketed" "$(tail -n 2 "$tmp/$ref.out" | tr '\n' ' ')"
        continue
    fi
    for run in "shm_dp2_zero_$prec" "nccl_dp2_zero_${prec}_lazy1" "nccl_dp2_zero_${prec}_lazy2"; do
        if out=$(same_run "$ref" "$run"); then ok "trainer_zero_gather_${run}_equals_unbucketed ($out)"
        else not_ok "trainer_zero_gather_${run}_equals_unbucketed" "${out:-a run is missing}"; fi
        out=""
    done
done
# Without graphs, the collectives op by op; and a device that refuses the capture on one rank only
# (its end fails there): every rank then runs op by op, warned, with the same bits.
big=(--set parallel.tp=2 --set parallel.sp=true --set parallel.zero=1 --set parallel.dp_bucket_mb=0.001 --set parallel.comm=nccl)
name=nccl_tp2_dp2_sp_zero_bf16_no_graph
if EMU_LAZY=2 train "$name" 4 "${big[@]}" --set train.cuda_graph=false && ! grep -q "captured as a CUDA graph" "$tmp/$name.out" &&
    out=$(same_run shm_tp2_dp2_sp_zero_bf16 "$name"); then ok "trainer_${name}_bitwise_equals_shm ($out)"
else not_ok "trainer_${name}_bitwise_equals_shm" "${out:-} $(grep -m2 -i 'error\|captured' "$tmp/$name.out" | tr '\n' ' ')"; fi
name=nccl_tp2_dp2_sp_zero_bf16_rank1_refuses_graph
if EMU_LAZY=1 launch "$name" 4 -- bash -c 'if [ "$RANK" = 1 ]; then export EMU_CAPTURE_FAIL=end; fi; exec "$0" "$@"' \
        "$emu_bin" --config "$tmp/cfg.json" --set out.dir="$tmp/$name" "${big[@]}" &&
    grep -q "step 2: another rank's device refused the CUDA graph; steps run op by op" "$tmp/$name.out" &&
    out=$(same_run shm_tp2_dp2_sp_zero_bf16 "$name") && same_bytes shm_tp2_dp2_sp_zero_bf16 "$name" 3
then ok "trainer_${name}_runs_op_by_op_everywhere ($out)"
else not_ok "trainer_${name}_runs_op_by_op_everywhere" "${out:-} $(grep -m3 -i 'error\|refused\|captured' "$tmp/$name.out" | tr '\n' ' ')"; fi
# A step captured right after an evaluation: a run resumed at step 1 runs step 2 op by op, which ends on
# the evaluation interval, and captures step 3. The graph must hold ZeRO's gather all the same (the
# evaluation left none due), or every launch trains on the other ranks' stale chunks: step 4 and its
# validation loss then differ from the run that never stopped (seen without optim_graph_state before
# the capture).
zb=(--set parallel.zero=1 --set parallel.dp_bucket_mb=0.001 --set train.steps=4)
ref=shm_dp2_zero_steps4 name=nccl_dp2_zero_resumed_at_1
if train "$ref" 2 "${zb[@]}" --set out.save_every=1 --set parallel.comm=shm; then
    mkdir -p "$tmp/$name" && cp -r "$tmp/$ref/step_00000001" "$tmp/$name/" &&
        grep '"step":1,' "$tmp/$ref/log.jsonl" | grep '"loss"' >"$tmp/$name/log.jsonl"
    if EMU_LAZY=1 train "$name" 2 "${zb[@]}" --set out.save_every=0 --set out.resume=true --set parallel.comm=nccl &&
        grep -q "step 3: captured as a CUDA graph" "$tmp/$name.out" &&
        out=$("$py" tests/parallel/compare.py "$tmp/$ref" "$tmp/$name" 4 --bitwise 2>&1) &&
        diff <(grep -o '"val_loss":[^,}]*' "$tmp/$ref/log.jsonl") <(grep -o '"val_loss":[^,}]*' "$tmp/$name/log.jsonl") >/dev/null
    then ok "trainer_${name}_graph_holds_the_gather ($out)"
    else not_ok "trainer_${name}_graph_holds_the_gather" "${out:-} $(grep -m3 -i 'error\|captured\|val' "$tmp/$name.out" | tr '\n' ' ')"; fi
else not_ok "trainer_nccl_dp2_zero_resumed_at_1_graph_holds_the_gather" "the shm run failed: $(tail -n 2 "$tmp/$ref.out" | tr '\n' ' ')"; fi
left=$(ls "$tmp/rdv" | grep -c emu_nccl)
if [ "$left" = 0 ]; then ok nccl_rendezvous_folders_removed
else not_ok nccl_rendezvous_folders_removed "$left left in $tmp/rdv: $(ls "$tmp/rdv" | head -n 3 | tr '\n' ' ')"; fi

# two ranks on one device (EMU_DEVICES=1): NCCL's refusal, named, and a non-zero exit
TMPDIR="$tmp/rdv_failing" EMU_DEVICES=1 timeout -k 5 120 scripts/launch.sh -n 2 --log-dir "$tmp/dup.logs" -- "$emu_bin" \
    --config "$tmp/cfg.json" --set out.dir="$tmp/dup" --set parallel.tp=2 --set parallel.comm=nccl >"$tmp/dup.out" 2>&1
rc=$?
if [ $rc != 0 ] && grep -q "group tp: ncclCommInitRankConfig.*Duplicate GPU detected: rank . and rank . both on CUDA device 0" "$tmp/dup.out"
then ok nccl_two_ranks_on_one_device_refused
else not_ok nccl_two_ranks_on_one_device_refused "exit $rc: $(grep -m1 -i error "$tmp/dup.out")"; fi

# a rank stopped once the step is a graph (launched from step 3 on): rank 0 times out in 3 s, waiting for
# a launch of the graph or, when rank 1 stopped between a launch and the end of its step, in the step's
# stop-signal all-reduce; either way it aborts the communicator while the graph holds it (the emulation's
# NCCL reports an abort that would never return, "emu: ERROR", unless the graph is dropped first)
name=nccl_tp2_graph_rank_stopped
rm -rf "${tmp:?}/$name"
TMPDIR="$tmp/rdv_failing" EMU_LAZY=1 EMU_DEVICES=2 timeout -k 5 120 scripts/launch.sh -n 2 --log-dir "$tmp/$name.logs" -- \
    "$emu_bin" --config "$tmp/cfg.json" --set out.dir="$tmp/$name" --set parallel.tp=2 --set parallel.comm=nccl \
    --set train.steps=100000 --set out.eval_every=0 --set out.save_every=0 --set parallel.timeout_s=3 >"$tmp/$name.out" 2>&1 &
sub=$!
victim=""
for _ in $(seq 1200); do # until step 4 is logged, and rank 1's process is found
    lines=$(grep -c '"loss"' "$tmp/$name/log.jsonl" 2>/dev/null)
    if [ "${lines:-0}" -ge 4 ]; then
        for p in $(pgrep -f -- "out.dir=$tmp/$name"); do
            tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'RANK=1' &&
                [ "$(cat /proc/"$p"/comm 2>/dev/null)" = train_gpt_emu ] && victim=$p
        done
        [ -n "$victim" ] && break
    fi
    sleep 0.1
done
t0=$SECONDS
[ -n "$victim" ] && kill -STOP "$victim"
wait "$sub"
rc=$? dt=$((SECONDS - t0))
[ -n "$victim" ] && kill -KILL "$victim" 2>/dev/null
if [ -n "$victim" ] && [ $rc = 1 ] && [ $dt -le 10 ] && grep -q "step 2: captured as a CUDA graph" "$tmp/$name.out" &&
    grep -Eq "group tp: (the step's collectives \(a launch of the captured step\)|all_reduce\(max\) #[0-9]+ of 1 fp32): timed out after 3 s" "$tmp/$name.out" &&
    ! grep -q "emu: ERROR" "$tmp/$name.out"
then ok "nccl_graph_rank_stopped_times_out (${dt} s)"
else not_ok nccl_graph_rank_stopped_times_out "rank 1 '$victim', exit $rc after ${dt} s: $(grep -m2 'ERROR\|error' "$tmp/$name.out" | tr '\n' ' ' | cut -c1-400)"; fi

# The comm time of the steps launched as a CUDA graph (3 on, captured at step 2) over NCCL at TP 2: their
# collectives' device time, above 0 (host timing counted nothing for a launch: 0.000).
comm=$(grep '"loss"' "$tmp/nccl_tp2_fp32_lazy0/log.jsonl" 2>/dev/null | grep -o '"comm_ms":[0-9.]*' | cut -d: -f2 | tr '\n' ' ')
if [ -n "$comm" ] && awk -v c="$comm" 'BEGIN { n = split(c, v, " "); exit !(n == 3 && v[3] > 0) }'
then ok "trainer_nccl_graph_step_comm_ms_is_device_time (comm_ms of steps 1-3: $comm)"
else not_ok trainer_nccl_graph_step_comm_ms_is_device_time "comm_ms of steps 1-3: '${comm}', want step 3's (a launch) above 0"; fi

# scripts/gpu_check.sh's multi-gpu section rehearsed on the emulation: two stand-in H200s (nvidia-smi),
# the emulated trainer and NCCL for the GPU build, the tiny model above; every layout of two GPUs must
# match TP=1 and the widest run twice be bitwise equal, and the summary row say so.
mkdir -p "$tmp/twobin"
printf '#!/bin/sh\ncase "$*" in -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-0)"; echo "GPU 1: NVIDIA H200 (UUID: GPU-1)" ;; esac\nexit 0\n' \
    >"$tmp/twobin/nvidia-smi" && chmod +x "$tmp/twobin/nvidia-smi"
PATH="$tmp/twobin:$PATH" EMU_DEVICES=2 TRAIN_GPT="$emu_bin" MG_VOCAB=300 \
    MG_RUN_ARGS="--set model.n_layer=2 --set model.n_head=4 --set model.n_embd=64 --set model.vocab_size=300 --set model.seq_len=16 --set train.micro_batch=2 --set train.global_batch=4" \
    scripts/gpu_check.sh --out "$tmp/multi_gpu" --limit 300 multi-gpu >"$tmp/multi_gpu.out" 2>&1
rc=$?
row=$(grep '^| multi-gpu |' "$tmp/multi_gpu/summary.md" 2>/dev/null)
tar -xzf "$tmp/multi_gpu/logs.tar.gz" -C "$tmp/multi_gpu" logs/multi-gpu.log 2>/dev/null
got=$(grep -cE '^ok multi_gpu_nccl_(tp2|tp2_sp|dp2|dp2_zero)_matches_tp1 |^ok multi_gpu_nccl_tp2_twice_bitwise ' "$tmp/multi_gpu/logs/multi-gpu.log" 2>/dev/null)
if [ $rc = 0 ] && [[ "$row" == "| multi-gpu | passed (5 ok) |"* ]] && [ "$got" = 5 ]; then ok "gpu_check_multi_gpu_rehearsed ($row)"
else not_ok gpu_check_multi_gpu_rehearsed "exit $rc, $got of 5 layouts ok; $row $(grep -m3 '^not ok' "$tmp/multi_gpu/logs/multi-gpu.log" 2>/dev/null | tr '\n' ' ' | cut -c1-300)"; fi
exit "$failed"
