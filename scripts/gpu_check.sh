#!/usr/bin/env bash
# The GPU bring-up in sections, for a lent GPU machine with 10-minute commands:
#   scripts/gpu_check.sh [--out DIR] [--from SECTION] [SECTION...]
# Runs the named sections (default: all, in order), each under its own time
# limit (and within --budget for the whole run), goes on past a failing one,
# and leaves in DIR two files, rewritten after every section so that a
# command killed from outside still brings them back: a summary (summary.md,
# one line a section) and one archive of every log (logs.tar.gz, the
# benchmark's tables and runs included). --help says it all.
set -uo pipefail
prog=gpu_check
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 2

SECTIONS=(environment build kernels attention whole-model tp2-shm nccl recompute-bitwise budget sanitizer bench-124m bench-1.2b scaling hf profile
          multi-gpu multi-gpu-scaling)

usage() {
    cat <<EOF
Usage: scripts/gpu_check.sh [--out DIR] [--from SECTION] [--limit SECONDS] [--budget SECONDS] [SECTION...]

Sections, in order (each ends within --limit seconds, default 540, and its own
cap: environment 60, build 300, kernels 180, whole-model 240, so that a hang
costs its section only):
  environment        nvidia-smi, driver, scripts/find_cuda.sh (what the build will use; fails the section when
                     the toolkit is not found), nvcc, gcc, make, nccl.h, compute-sanitizer, python/torch/transformers
  build              make GPU=1 all build/gpu/test_cuda_kernels build/gpu/test_nccl build/gpu/bench_attention
                     build/gpu/bench_copy build/gpu/test_tma build/gpu/hopper_check build/gpu/bench_wgmma
                     (first: scripts/device_deps.sh install; CUDA_SM=90a in the environment builds machine
                     code for that architecture only, the Makefile's shorter build for the GPU at hand),
                     then the registers, spills and shared memory of every kernel as this nvcc compiled them
  kernels            tests/gpu/run_gpu.sh kernels: every CUDA op against its CPU twin (on compute capability
                     9.0 the wgmma attention forwards too, wgmma and wgmma_ws, and the wgmma backward, each
                     against the mma.sync kernels); build/gpu/test_tma:
                     Hopper's bulk tensor copies and mbarriers against the host's reference (sm_90); and
                     build/gpu/hopper_check: Hopper's wgmma against a CPU product (the emulator's answers)
  attention          build/gpu/bench_wgmma (30 s at most): the tensor core's rate by wgmma product shape
                     (N 64, 128, 256; A from shared memory or registers; 1, 4 or 16 products a wait, or a
                     round kept queued; 1 to 3 warpgroups an SM), about a second; then
                     build/gpu/bench_attention: the fused attention alone at the benchmark shapes, the
                     forward and the backward in every block shape built for the head size (the tuned one
                     first; each checked against it; on compute capability 9.0 the wgmma forwards and backward as well),
                     medians of 20 calls by CUDA events; then
                     scripts/attention_reference.py, PyTorch's causal attention at the same shapes; then
                     build/gpu/bench_copy: a 1 GiB device-to-device copy's GB/s (read + write), the measured
                     memory ceiling of the op table's rates (kernels/op_rates.c)
  whole-model        run_gpu.sh cpu_match and bf16: CUDA fp32 against the CPU, bf16 against fp32
  tp2-shm            run_gpu.sh tp2_shm: TP=2+SP, and DP=2 under ZeRO, through the shm communicator on one GPU
  nccl               run_gpu.sh nccl_unit and nccl
  recompute-bitwise  run_gpu.sh recompute
  budget             run_gpu.sh memory: the budget against the measured memory
  sanitizer          run_gpu.sh sanitizer: compute-sanitizer memcheck, racecheck and synccheck (on compute
                     capability 9.0 also over a step with kernels.attention=wgmma_ws)
  bench-124m         scripts/bench_gpu.sh --quick --models gpt2_124m --llmc LLMC_SRC (llm.c's
                     source, default .peer/llm.c; without it the llm.c row is not measured
                     and the summary says so)
  bench-1.2b         scripts/bench_gpu.sh --quick --models megatron_1.2b
  scaling            scripts/paper_tables.sh --sweeps with DEVICES=1: the papers' weak and strong scaling
                     tables, this GPU's sweep rows (SCALE=paper, each global batch at its plan rows'
                     micro-batch; TP above 1 projected) beside the published figures and the calibrated
                     plans; in the archive under logs/scaling.scratch/paper (tables.md, sweep_*/, plans/)
  hf                 DEVICE=cuda tests/gpu/hf_interop.sh: checkpoints trained on the GPU load in transformers
                     with the binary's val loss
  profile            ncu (Nsight Compute, --set detailed, clocks left alone) on what a GPT-2 124M step
                     runs by default on Hopper (micro-batch 16 x 1024, bf16; the first launch of each):
                     the attention's TMA forward and wgmma backward, why they reach a fifth of the
                     tensor cores' rate, and the LayerNorm backward, also at the 1.2B model's width
                     (micro-batch 8), which ran at 1.2 to 2 TB/s of 4.1;
                     then scripts/attention_reference.py, PyTorch's causal attention timed alone at the
                     benchmark shapes (the reference for the per-op timer's attention rows)
  multi-gpu          with 2 GPUs or more, tests/gpu/multi_gpu.sh layouts: over NCCL, TP 2/4/8 (as many as
                     there are GPUs), TP+SP, DP 2, DP 2 + ZeRO (and TP 2 x DP 2 with 4) against TP=1 on one
                     of them (rel < 1e-4), the widest TP twice bitwise; with one GPU it says so ("skipped")
  multi-gpu-scaling  with 2 GPUs or more, tests/gpu/multi_gpu.sh sweeps: SCALE=paper weak and strong sweeps,
                     one a batch (8, 20) at its paper_tables rows' micro-batch (20 as 2 x 10),
                     with DEVICES = the GPUs (real rows) and DEVICES=1 (the same layouts projected), and
                     each real row beside its projection (scripts/projection_error.py): the projection's
                     error; tables, charts and runs in the archive
--from SECTION starts there and runs the rest; named SECTIONs run just those.
--budget SECONDS bounds the whole run (a lent machine's command limit): a
section gets at most what is left less ${reserve}s (for the archive), and one
with less than ${min_start}s left is not started ("not run: out of time").
DIR (default runs/gpu_check_<time>) gets two files, summary.md and logs.tar.gz
(every section's log and scratch, the benchmark's tables, bench.json and raw
runs; no checkpoints or token shards): few
enough to bring back from a lent machine. Both are rewritten after every
section (the logs grow in a temporary folder, not in DIR), so a run killed
from outside still leaves the sections it finished. Each section runs in a
session of its own, and whatever it leaves running when it ends or times out
is killed before the next one starts. The exit status is 0 when every
section run passed. BENCH_COMMIT=SHA gives bench.json its commit where the
tree is not a git checkout (and the summary's commit line too).
BENCH_ARGS="--steps 33" adds options to both bench sections' scripts/bench_gpu.sh
(after --quick, so they win: 33 steps, 30 of them timed); CUDA_SM=90a makes the
build section build for that architecture only (Makefile).
Without a GPU, every section after 'environment' reports "skip" and the exit status is 1.
EOF
}

die() { echo "$prog: error: $*" >&2; exit 2; }
out="" from="" limit=540 budget="" chosen=()
reserve=15 min_start=10 # seconds kept for a timed-out section's kill (timeout -k 10) and the archive; the least a section may start with
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --out|--from|--limit|--budget)
            [ $# -ge 2 ] || die "$1 needs a value"
            case "$1" in --out) out="$2" ;; --from) from="$2" ;; --limit) limit="$2" ;; --budget) budget="$2" ;; esac
            shift 2 ;;
        -*) die "unknown option '$1' (see --help)" ;;
        *) chosen+=("$1"); shift ;;
    esac
done
[[ "$limit" =~ ^[0-9]+$ ]] && [ "$limit" -ge 10 ] || die "--limit must be a whole number of seconds (at least 10), got '$limit'"
[ -z "$budget" ] || { [[ "$budget" =~ ^[0-9]+$ ]] && [ "$budget" -ge $((reserve + min_start)) ]; } ||
    die "--budget must be a whole number of seconds (at least $((reserve + min_start))), got '$budget'"
known() { local s; for s in "${SECTIONS[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
for s in "${chosen[@]}" ${from:+"$from"}; do known "$s" || die "unknown section '$s' (sections: ${SECTIONS[*]})"; done
[ ${#chosen[@]} -gt 0 ] && [ -n "$from" ] && die "give --from or section names, not both"
if [ ${#chosen[@]} -eq 0 ]; then
    started=$([ -z "$from" ] && echo 1 || echo 0)
    for s in "${SECTIONS[@]}"; do
        [ "$s" = "$from" ] && started=1
        [ "$started" = 1 ] && chosen+=("$s")
    done
fi
out="${out:-runs/gpu_check_$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out" || die "cannot create $out"
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX") || die "cannot create a temporary folder"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/logs"
started_at=$SECONDS

# The GPUs nvidia-smi lists. grep -c reads the whole list: grep -q would stop at the first GPU,
# and nvidia-smi, writing the next line into the closed pipe, die of SIGPIPE, which pipefail
# makes "no GPU" (seen in CI).
gpu_count() { nvidia-smi -L 2>/dev/null | grep -c '^GPU '; }
have_gpu() { [ "$(gpu_count)" -gt 0 ]; }
llmc_src="${LLMC_SRC:-.peer/llm.c}" # llm.c's source for bench-124m's llm.c row (git-ignored, never committed)
# BENCH_ARGS: more options of scripts/bench_gpu.sh for the bench sections (e.g. --steps 33: 30 timed steps);
# options only (letters, digits, '-', '.', ',', spaces), as they go into a command line
bench_args="${BENCH_ARGS:-}"
[[ "$bench_args" =~ ^[-A-Za-z0-9.,\ ]*$ ]] || die "BENCH_ARGS may hold only options of scripts/bench_gpu.sh (letters, digits, '-', '.', ',', spaces), got '$bench_args'"

# section_cmd NAME: the command of a section (run with bash -c).
section_cmd() {
    case "$1" in
        environment) echo 'nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv;
            bash scripts/find_cuda.sh; found=$?; nvcc --version; gcc --version | head -n 1; make --version | head -n 1;
            for h in ${CUDA_HOME:-/usr/local/cuda}/include/nccl.h $(python3 -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))" 2>/dev/null)/include/nccl.h; do [ -f "$h" ] && echo "nccl.h: $h"; done;
            command -v compute-sanitizer || echo "compute-sanitizer: not found";
            python3 -c "import torch; print(\"torch\", torch.__version__, torch.version.cuda)";
            python3 -c "import transformers; print(\"transformers\", transformers.__version__)" || echo "transformers: not importable";
            exit $found' ;; # what the build will use; it fails the section when the toolkit is not found
        build) echo '{ [ -d .devdeps ] && source scripts/device_deps.sh install; true; } && make -j16 GPU=1 all build/gpu/test_cuda_kernels build/gpu/test_nccl build/gpu/bench_attention build/gpu/bench_copy build/gpu/test_tma build/gpu/hopper_check build/gpu/bench_wgmma &&
            python3 scripts/kernel_resources.py --build build/gpu --launches /dev/null' ;; # this nvcc's registers, spills, shared memory
        kernels) echo 'KERNELS_TIMEOUT_S=100 bash tests/gpu/run_gpu.sh kernels' ;; # a hang: the binary's log so far, not the section's cap
        attention) echo 'timeout -k 5 30 build/gpu/bench_wgmma; rc=$?; build/gpu/bench_attention || rc=1; python3 scripts/attention_reference.py || rc=1; build/gpu/bench_copy || rc=1; exit $rc' ;;
        whole-model) echo 'TG_TMP=$TG_TMP/cpu_match bash tests/gpu/run_gpu.sh cpu_match; a=$?;
            TG_TMP=$TG_TMP/bf16 bash tests/gpu/run_gpu.sh bf16; exit $((a | $?))' ;; # both run, each its own scratch
        tp2-shm) echo 'bash tests/gpu/run_gpu.sh tp2_shm' ;;
        nccl) echo 'bash tests/gpu/run_gpu.sh nccl' ;;
        recompute-bitwise) echo 'bash tests/gpu/run_gpu.sh recompute' ;;
        budget) echo 'bash tests/gpu/run_gpu.sh memory' ;;
        sanitizer) echo 'bash tests/gpu/run_gpu.sh sanitizer' ;;
        bench-124m)
            if [ -d "$llmc_src" ]; then echo "OUT=$work/logs/bench scripts/bench_gpu.sh --quick${bench_args:+ $bench_args} --models gpt2_124m --llmc $(printf '%q' "$llmc_src")"
            else echo "LLMC_SRC= OUT=$work/logs/bench scripts/bench_gpu.sh --quick${bench_args:+ $bench_args} --models gpt2_124m"; fi ;;
        bench-1.2b) echo "OUT=$work/logs/bench scripts/bench_gpu.sh --quick${bench_args:+ $bench_args} --models megatron_1.2b" ;;
        scaling) echo 'DEVICES=1 scripts/paper_tables.sh --sweeps --out "$TG_TMP/paper"' ;; # its tables, sweeps and plans in the archive
        hf) echo 'DEVICE=cuda bash tests/gpu/hf_interop.sh' ;;
        multi-gpu) echo 'bash tests/gpu/multi_gpu.sh layouts' ;;
        multi-gpu-scaling) echo 'bash tests/gpu/multi_gpu.sh sweeps' ;;
        profile) echo 'ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)
            [ -n "$ncu" ] || { echo "ncu (Nsight Compute) not found"; exit 1; }; rc=0
            profiled() { # KERNEL CONFIG MICRO_BATCH: ncu on the first launch of KERNEL in one step of CONFIG, bf16
                echo "== ncu: $1 ($2, micro-batch $3)"
                "$ncu" --clock-control none --set detailed --kernel-name regex:"$1" --launch-count 1 \
                    build/gpu/train_gpt --config "$2" --set device=cuda --set train.precision=bf16 \
                    --set train.micro_batch="$3" --set train.global_batch="$3" --set train.steps=1 --set train.cuda_graph=false \
                    --set out.eval_every=0 --set out.eval_batches=0 --set out.sample_every=0 --set out.sample_tokens=0 \
                    --set out.save_final=false --set out.dir="$TG_TMP/run_$1_$3" || rc=1
            }
            for k in flash_forward_wgmma_ws_kernel flash_bwd_wgmma_kernel layernorm_backward_fused_kernel; do
                profiled "$k" configs/gpt2_124m.json 16
            done
            profiled layernorm_backward_fused_kernel configs/megatron_weak_1.2b.json 8
            python3 scripts/attention_reference.py || rc=1; exit $rc' ;; # the first launch of each kernel a step runs by default; then the PyTorch reference
    esac
}

# section_cap NAME: the most seconds a section may take, whatever --limit
# and --budget leave, so that a hang (a first run on a GPU may deadlock a
# kernel) costs its section, not every later one. Generous against what
# each does on 16 cores (the build about 20 s; the kernels 16 s on the
# H200, inside which its three programs' own clocks fit; the whole-model
# runs a few tiny trainings; attention a few seconds of timed calls and
# PyTorch's import and reference, estimated: it has not run on a GPU); the
# rest keep --limit. attention runs the Hopper kernels first after kernels:
# a deadlock there took the rest of the command's budget before its cap.
section_cap() {
    case "$1" in
        environment) echo 60 ;;
        build) echo 300 ;;
        kernels) echo 200 ;; # test_tma 30 + hopper_check 30 + the checks' binary 100, each + 10 to kill
        attention) echo 120 ;;
        whole-model) echo 240 ;;
        *) echo "$limit" ;;
    esac
}

# section_note NAME: what the summary should say besides the verdict
section_note() {
    if [ "$1" = bench-124m ] && [ ! -d "$llmc_src" ]; then
        echo "; llm.c not measured: no $llmc_src (llm.c's source: LLMC_SRC, default .peer/llm.c)"
    fi
    if [[ "$1" == multi-gpu* ]] && [ "$(gpu_count)" -lt 2 ]; then
        echo "; skipped: fewer than 2 GPUs"
    fi
}

# A section's verdict from its log and status: a log that says "not ok"
# fails even when the command exited 0. Check lines may carry a "[group] "
# prefix (tests/gpu/run_gpu.sh names the binary a line came from).
verdict() { # RC LOG LIMIT
    local bad good
    bad=$(grep -cE '^(\[[^]]*\] )?not ok ' "$2") good=$(grep -cE '^(\[[^]]*\] )?ok ' "$2")
    if [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; then echo "timed out after ${3}s"
    elif [ "$1" -ne 0 ] || [ "$bad" -gt 0 ]; then echo "FAILED (exit $1, $bad not ok)"
    else echo "passed ($good ok)"; fi
}
# kill_session SID: kills every process of session SID. A timed-out
# section's inner timeouts (run_gpu.sh's, bench_gpu.sh's) put their runs in
# process groups of their own, which the section's timeout does not reach:
# left alone, a hung kernel test would keep the GPU busy through the next
# sections. Reads /proc, so that it needs no procps, with the shell's own
# builtins: it runs after every section, and a sed and a cut for each of a
# few hundred processes took seconds of a core each time.
kill_session() {
    local p stat sid
    for p in /proc/[0-9]*; do
        { read -r stat <"$p/stat"; } 2>/dev/null || continue
        read -r _ _ _ sid _ <<<"${stat##*) }" # after "pid (comm) ": state ppid pgrp session ...
        [ "$sid" = "$1" ] && kill -KILL "${p#/proc/}" 2>/dev/null
    done
    return 0
}

# table_cell TEXT: TEXT on one line, with its pipes escaped for a Markdown table
table_cell() { printf '%s' "$1" | tr -s '\n ' ' ' | cut -c1-200 | sed 's/|/\\|/g'; }

summary="$out/summary.md"
{
    echo "# GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo
    echo "commit ${BENCH_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1 || echo 'no GPU')"
    echo
    echo "| section | result | seconds | command |"
    echo "|---|---|---|---|"
} >"$summary"
# The archive as it stands, replaced whole (never left half written). A lent machine brings back
# files of up to 16 MiB: the sections' scratch files that are checkpoints, token shards or over
# 2 MiB stay out, listed in logs/left_out.txt; should the rest still pass 15 MiB, only the
# sections' own logs go in (the 2026-11-30 sitting lost a command's logs to an archive too large).
archive_max_bytes=${GPU_CHECK_ARCHIVE_MAX_BYTES:-$((15 << 20))} # t_gpu_check lowers it to take the fallback
archive() {
    local part="$out/logs.tar.gz.part"
    local big=(-path 'logs/*.scratch/*' \( -size +2M -o -name '*.safetensors' -o -name '*.bin' -o -name '*.pt' \))
    (cd "$work" && find logs -type f "${big[@]}" -printf '%s\t%p\n' >logs/left_out.txt &&
        find logs -type f ! \( "${big[@]}" \) -print0 | tar -czf "$part" --null -T -) || return 1
    if [ "$(stat -c %s "$part")" -gt "$archive_max_bytes" ]; then
        echo "every scratch file: the archive passed $archive_max_bytes bytes" >>"$work/logs/left_out.txt"
        (cd "$work" && tar -czf "$part" logs/*.log logs/left_out.txt) || return 1
    fi
    mv -f "$part" "$out/logs.tar.gz"
}
# seconds_left: what --budget leaves for sections (the reserve kept back); the limit without one.
seconds_left() { if [ -n "$budget" ]; then echo $((budget - reserve - (SECONDS - started_at))); else echo "$limit"; fi; }
archive
# stop_section: ends the running section, if any: its timeout and its whole session.
stop_section() {
    [ -n "${section_pid:-}" ] && kill -KILL "$section_pid" 2>/dev/null
    [ -s "$work/session" ] && kill_session "$(cat "$work/session")"
    return 0
}
# Stopped from outside (a lent machine's command past its limit is sent TERM first): the running
# section goes too (timeout and setsid put it outside this script's process group), and the
# archive keeps what was done.
trap 'stop_section; archive; exit 143' TERM INT HUP
status=0
for s in "${chosen[@]}"; do
    log="$work/logs/$s.log" cmd=$(section_cmd "$s") t0=$SECONDS
    left=$(seconds_left) section_limit=$(section_cap "$s")
    [ "$limit" -lt "$section_limit" ] && section_limit=$limit
    [ "$left" -lt "$section_limit" ] && section_limit=$left
    if [ "$left" -lt "$min_start" ]; then
        echo "skip $s - out of time: ${left}s of --budget $budget left" | tee "$log"
        echo "| $s | not run: out of time (--budget $budget) | 0 | \`$(table_cell "$cmd")\` |" >>"$summary"
        status=1
        continue
    fi
    if [ "$s" != environment ] && ! have_gpu; then
        echo "skip $s - no GPU on this machine" | tee "$log"
        echo "| $s | skipped: no GPU$(section_note "$s") | 0 | \`$(table_cell "$cmd")\` |" >>"$summary"
        status=1
        continue
    fi
    echo "== $s: $cmd"
    # each section's scratch (tests/lib.sh's TG_TMP) inside the logs, so that a failing run's whole output comes back;
    # the section in a session of its own, and whatever it leaves running then killed (below)
    rm -f "$work/session"
    TG_TMP="$work/logs/$s.scratch" timeout -k 10 "$section_limit" \
        setsid bash -c 'echo $$ >"$1"; eval "$2"' section "$work/session" "$cmd" >"$log" 2>&1 &
    section_pid=$! # waited for in the background, so that a TERM's trap runs at once
    wait "$section_pid"
    rc=$?
    section_pid="" # reaped by the wait: its number may be another process's now
    stop_section   # what the section left running in its session
    v=$(verdict "$rc" "$log" "$section_limit")
    [[ "$v" == passed* ]] || status=1
    echo "== $s: $v in $((SECONDS - t0))s"
    tail -n 3 "$log" | sed 's/^/   | /'
    echo "| $s | $v$(section_note "$s") | $((SECONDS - t0)) | \`$(table_cell "$cmd")\` |" >>"$summary"
    archive
done
archive
echo "$prog: summary in $summary, logs in $out/logs.tar.gz"
exit "$status"
