#!/usr/bin/env bash
# The next GPU sitting on one lent H100/H200 (issue 37), as two device commands
# of scripts/gpu_check.sh sections, prepared and rehearsed here first:
#   bash scripts/sitting.sh prepare      here: check (and where it can, make) the carried
#                                        folders, and their size against the 64 MiB a call carries
#   bash scripts/sitting.sh rehearse 1|2 here: command 1 or 2 with a stand-in nvidia-smi that
#                                        describes an H200, into runs/sitting_rehearsal/<n>
#   BENCH_COMMIT=<sha> bash scripts/sitting.sh 1|2
#                                        there: command 1 or 2, into $OUT
# The device tool's call for each (the tree travels without .git: give the commit):
#   command 1, timeout_s 420: BENCH_COMMIT=<sha> bash scripts/sitting.sh 1
#   command 2, timeout_s 300: BENCH_COMMIT=<sha> bash scripts/sitting.sh 2  (at once, while warm)
# The machine's start (a minute or more) and the transfers count against the 15 minutes too:
# before command 2 read status's budget_left_s, and where it is under 300 + 60 give command 2
# timeout_s = budget_left_s - 60 and SITTING_LIMIT_S=<that timeout_s>, so that its sections'
# budgets shrink with it (each command ends 20 s inside SITTING_LIMIT_S).
#   carry: .devdeps assets/data assets/vocab .peer/llm.c .peer/cudnn-frontend/include
# Command 1, the correctness of every kernel changed since the last sitting and
# the 124M benchmark: environment build (CUDA_SM=90a: Hopper's code only), then
# llm.c's build in the background beside kernels attention whole-model
# recompute-bitwise tp2-shm nccl budget, then sanitizer and hf, then bench-124m (33 steps, 30
# timed; --mma: train_gpt also with kernels.attention=mma, the default before auto, --dw-overlap:
# with kernels.dw_overlap=true, --lt-tune: with kernels.lt_tune=time, each a row of its own, against
# llm.c and PyTorch) with what is left.
# Command 2: scaling, then bench-1.2b (33 steps, --mma, --dw-overlap, --lt-tune, recompute rows; with the same
# torch as the last sitting, PyTorch's 1.2B rows, eager and compile, are that sitting's: reused)
# with what is left, and profile (Nsight Compute on the attention and the LayerNorm backward)
# if anything is left after that. The order is the priority: a section the budget cuts is the last one's. The
# benches come last since 2026-11-30, which timed both (results/gpu/2026-11-30_h200).
# Each gpu_check call leaves summary.md and logs.tar.gz in
# $OUT/<letter>: at most 7 files come back, also from a command killed at its
# limit. Budgets leave 20 s of the call's timeout_s for the transfers.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 2
prog=sitting
die() { echo "$prog: error: $*" >&2; exit 2; }
CARRY=(.devdeps assets/data assets/vocab .peer/llm.c .peer/cudnn-frontend/include)

# carried_ok: 0 when every carried folder holds what the commands read; says what is missing
carried_ok() {
    local bad=0 f
    for f in ".devdeps/debs/libcjson1_*.deb" "assets/data/kjv_train_*.bin" "assets/data/kjv_val_*.bin" "assets/vocab/*" \
        .peer/llm.c/train_gpt2.cu .peer/cudnn-frontend/include/cudnn_frontend.h; do
        # shellcheck disable=SC2086
        ls $f >/dev/null 2>&1 || { echo "$prog: missing $f"; bad=1; }
    done
    return $bad
}

prepare() {
    [ -d .devdeps/debs ] || bash scripts/device_deps.sh fetch || die "scripts/device_deps.sh fetch failed"
    [ -d assets/data ] || echo "$prog: no assets/data: make data"
    [ -f .peer/llm.c/train_gpt2.cu ] || echo "$prog: no .peer/llm.c: put karpathy/llm.c's source there (git archive HEAD | tar -x -C .peer/llm.c)"
    [ -f .peer/cudnn-frontend/include/cudnn_frontend.h ] ||
        echo "$prog: no .peer/cudnn-frontend/include: NVIDIA/cudnn-frontend v1.12.0's include folder (git archive v1.12.0 include | tar -x -C .peer/cudnn-frontend)"
    carried_ok || return 1
    local tracked carried
    tracked=$(git ls-files -z | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
    carried=$(du -cbL "${CARRY[@]}" | tail -n 1 | cut -f1)
    echo "$prog: tracked files $((tracked / 1024)) KiB, carried $((carried / 1024)) KiB (${CARRY[*]}): $(( (tracked + carried) / 1048576 )) MiB of 64"
    [ $((tracked + carried)) -lt $((64 << 20)) ] || { echo "$prog: over the 64 MiB a call may carry"; return 1; }
}

# command N: the sitting's command N, into $OUT
command_1() {
    local left
    scripts/gpu_check.sh --out "$OUT/a" --budget 150 environment build
    # llm.c's build (40 s on the last sitting's 16 cores) beside the checks, bounded: bench-124m waits for it
    timeout -k 5 240 bash scripts/build_llmc.sh .peer/llm.c runs/llmc_build >"$OUT/llmc_prebuild.log" 2>&1 &
    local p=$!
    local limit=$((${SITTING_LIMIT_S:-420} - 20))
    left=$((limit - SECONDS - 130))
    scripts/gpu_check.sh --out "$OUT/b" --budget $((left > 25 ? left : 25)) kernels attention whole-model recompute-bitwise \
        tp2-shm nccl budget
    wait "$p"
    left=$((limit - SECONDS))
    BENCH_ARGS="--steps 33 --mma --dw-overlap --lt-tune" scripts/gpu_check.sh --out "$OUT/c" --budget $((left > 25 ? left : 25)) \
        sanitizer hf bench-124m
}
command_2() {
    local args="--steps 33 --mma --dw-overlap --lt-tune" torch
    torch=$(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)
    if [ "$torch" = 2.11.0+cu130 ]; then # the first sitting's (results/gpu/2026-11-27_h200): its PyTorch rows stand
        args="$args --no-compile --no-eager"
        echo "$prog: torch $torch, as at the last sitting: bench-1.2b leaves PyTorch out (reuse 2026-11-27_h200's rows)"
    fi
    local limit=$((${SITTING_LIMIT_S:-300} - 20 - SECONDS))
    BENCH_ARGS="$args" scripts/gpu_check.sh --out "$OUT/d" --budget $((limit > 25 ? limit : 25)) scaling bench-1.2b \
        profile
}

run() { # N
    [ -n "${OUT:-}" ] || die "OUT is not set (the device tool sets it; rehearse sets it here)"
    if ! [[ "${SITTING_LIMIT_S:-60}" =~ ^[0-9]{2,5}$ ]] || [ "${SITTING_LIMIT_S:-60}" -lt 60 ]; then
        die "SITTING_LIMIT_S must be the call's timeout_s in seconds (60 or more), not '${SITTING_LIMIT_S}'"
    fi
    mkdir -p "$OUT" || die "cannot create OUT $OUT"
    carried_ok || echo "$prog: going on without it (its sections will say so)"
    source scripts/device_deps.sh install
    export BENCH_COMMIT="${BENCH_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}" CUDA_SM=90a
    echo "$prog: command $1, commit $BENCH_COMMIT, OUT $OUT"
    "command_$1"
    echo "$prog: command $1 done in ${SECONDS}s"
}

# rehearse N: command N here, with a stand-in nvidia-smi that describes an H200 (as the
# first sitting's showed it); the sections stop at the first real GPU call
rehearse() {
    local bin="$root/runs/sitting_rehearsal/bin"
    mkdir -p "$bin" || die "cannot create $bin"
    cat >"$bin/nvidia-smi" <<'EOF'
#!/bin/sh
# stand-in for scripts/sitting.sh rehearse: answers as an H200 does
case "$*" in
    -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
    *--query-gpu=name,driver_version,memory.total*--format=csv,noheader*) echo "NVIDIA H200, 580.159.04, 143771" ;;
    *--query-gpu=name,driver_version,memory.total*) printf 'name, driver_version, memory.total [MiB]\nNVIDIA H200, 580.159.04, 143771 MiB\n' ;;
    *--query-gpu=name,driver_version*) echo "NVIDIA H200, 580.159.04" ;;
    *--query-gpu=compute_cap*) echo "9.0" ;;
    *--query-compute-apps*) ;;
    "") echo "| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0 |"
        echo "|   0  NVIDIA H200   On | 143771MiB | (stand-in: scripts/sitting.sh rehearse, no GPU here) |" ;;
    *) echo "stand-in nvidia-smi: no answer for: $*" >&2; exit 1 ;;
esac
exit 0
EOF
    chmod +x "$bin/nvidia-smi"
    rm -rf "$root/runs/sitting_rehearsal/$1"
    PATH="$bin:$PATH" OUT="$root/runs/sitting_rehearsal/$1" run "$1"
}

case "${1:-}" in
    prepare) prepare ;;
    1|2) run "$1" ;;
    rehearse) [[ "${2:-}" =~ ^[12]$ ]] || die "usage: scripts/sitting.sh rehearse 1|2"; rehearse "$2" ;;
    *) die "usage: scripts/sitting.sh prepare | rehearse 1|2 | 1|2 (see the top of the file)" ;;
esac
