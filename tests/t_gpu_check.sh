#!/usr/bin/env bash
# scripts/gpu_check.sh, the GPU bring-up runner, on a machine without a GPU:
# its arguments, its sections' order and --from, that it goes on past a
# section it cannot run, that it leaves two files (summary, one archive), and
# that the scaling section's results land in that archive.
# cost: 100 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" gpu_check
gc=scripts/gpu_check.sh
check() { local name="$1" why="$2"; shift 2; if "$@"; then ok "$name"; else not_ok "$name" "$why"; fi; }
# count_running ARG...: how many processes run with exactly this command line (builtins only: no fork per process)
count_running() {
    local f args n=0
    for f in /proc/[0-9]*/cmdline; do
        { mapfile -d '' args <"$f"; } 2>/dev/null && [ "${args[*]}" = "$*" ] && n=$((n + 1))
    done
    echo "$n"
}
"$gc" --help >"$tmp/help" 2>&1; rc=$?
miss=""; for s in environment build kernels attention whole-model tp2-shm nccl recompute-bitwise budget sanitizer bench-124m bench-1.2b scaling hf profile \
    multi-gpu multi-gpu-scaling; do
    grep -q "^  $s " "$tmp/help" || miss="$miss $s"; done
check gpu_check_help_lists_sections "rc $rc, missing:$miss" test "$rc" = 0 -a -z "$miss"
"$gc" --out "$tmp/x" frobnicate >"$tmp/bad" 2>&1; rc=$?
check gpu_check_unknown_section "rc $rc: $(cat "$tmp/bad")" eval '[ $rc = 2 ] && grep -q "unknown section .frobnicate." "$tmp/bad"'
"$gc" --out "$tmp/x" --limit 5 kernels >"$tmp/bad2" 2>&1; rc=$?
check gpu_check_bad_limit "rc $rc: $(cat "$tmp/bad2")" eval '[ $rc = 2 ] && grep -q -- "--limit" "$tmp/bad2"'
"$gc" --out "$tmp/x" --budget 20 kernels >"$tmp/bad3" 2>&1; rc=$?
check gpu_check_bad_budget "rc $rc: $(cat "$tmp/bad3")" eval '[ $rc = 2 ] && grep -q -- "--budget must be .*at least 25" "$tmp/bad3"'
# --budget: a stand-in nvidia-smi that hangs when run bare (the environment section's first
# command) and lists no GPU, so these two run on a machine with a GPU too. The environment section
# gets at most the budget less the 15 s reserve, not --limit (less again by the second or so the
# script spends before it on a slow machine: CI saw 14 s); the section after it is not started,
# and the whole run ends within the budget. It waits out 15 s, so it runs beside the next check's
# 15 s (each has its own stand-in, and the next one counts only its own sleeps).
mkdir -p "$tmp/slowbin"
printf '#!/bin/sh\n[ $# -eq 0 ] && sleep 60\nexit 1\n' >"$tmp/slowbin/nvidia-smi" && chmod +x "$tmp/slowbin/nvidia-smi"
(
    t0=$SECONDS
    PATH="$tmp/slowbin:$PATH" "$gc" --out "$tmp/budget" --limit 60 --budget 30 environment kernels >"$tmp/budget.out" 2>&1
    echo "$? $((SECONDS - t0))" >"$tmp/budget.rc"
) &
budget_run=$!
# A timed-out section leaves nothing running: a stand-in nvidia-smi starts a run under a timeout of
# its own (in a process group of its own, as run_gpu.sh's runs are), which the section's timeout
# does not reach; gpu_check kills the section's whole session after it.
mkdir -p "$tmp/nestbin"
printf '#!/bin/sh
[ $# -eq 0 ] && timeout 100 sleep 63.25
exit 1
' >"$tmp/nestbin/nvidia-smi" && chmod +x "$tmp/nestbin/nvidia-smi"
PATH="$tmp/nestbin:$PATH" "$gc" --out "$tmp/nested" --budget 30 environment >/dev/null 2>&1
left=$(count_running sleep 63.25)
check gpu_check_kills_what_a_section_leaves "$left 'sleep 63.25' still running; $(grep '^| environment' "$tmp/nested/summary.md")" \
    eval '[ "$left" = 0 ] && grep -q "^| environment | timed out after" "$tmp/nested/summary.md"'
wait "$budget_run"
read -r rc took <"$tmp/budget.rc"
check gpu_check_budget_bounds_the_run "rc $rc, ${took}s, $(tr '\n' ' ' <"$tmp/budget/summary.md")" \
    eval '[ "$rc" = 1 ] && [ "$took" -lt 30 ] && grep -Eq "^\| environment \| timed out after 1[0-5]s \|" "$tmp/budget/summary.md" &&
          grep -q "^| kernels | not run: out of time (--budget 30) |" "$tmp/budget/summary.md"'
# Stopped from outside with TERM (to its process group, as a command past its limit is), the
# script takes the running section's session with it: nothing of it is left running.
setsid env PATH="$tmp/nestbin:$PATH" "$gc" --out "$tmp/termed" environment >/dev/null 2>&1 &
pid=$!
for _ in $(seq 50); do [ -s "$tmp/termed/logs.tar.gz" ] && break; sleep 0.1; done
sleep 2
kill -TERM -- "-$pid" 2>/dev/null; wait "$pid" 2>/dev/null
sleep 1
left=$(count_running sleep 63.25)
check gpu_check_term_kills_the_running_section "$left 'sleep 63.25' still running" eval '[ "$left" = 0 ]'
# The verdict counts check lines with a "[group] " prefix too (tests/gpu/run_gpu.sh's), and a
# prefixed "not ok" fails a section whose command exited 0: a stand-in nvidia-smi prints such
# lines and lists no GPU. The summary's command cells escape their pipes (the environment
# section's has several), so each row keeps its four cells.
mkdir -p "$tmp/okbin" "$tmp/badbin"
printf '#!/bin/sh
[ $# -eq 0 ] && printf "[kernels] ok one\n[kernels] ok two\n"
exit 0
' >"$tmp/okbin/nvidia-smi"
printf '#!/bin/sh
[ $# -eq 0 ] && printf "[kernels] ok one\n[kernels] not ok two - wrong\n"
exit 0
' >"$tmp/badbin/nvidia-smi"
chmod +x "$tmp/okbin/nvidia-smi" "$tmp/badbin/nvidia-smi"
PATH="$tmp/okbin:$PATH" "$gc" --out "$tmp/prefixed_ok" environment >/dev/null 2>&1
PATH="$tmp/badbin:$PATH" "$gc" --out "$tmp/prefixed_bad" environment >/dev/null 2>&1
row_ok=$(grep '^| environment |' "$tmp/prefixed_ok/summary.md") row_bad=$(grep '^| environment |' "$tmp/prefixed_bad/summary.md")
check gpu_check_counts_prefixed_checks "$row_ok / $row_bad" \
    eval '[[ "$row_ok" == "| environment | passed (2 ok) |"* ]] && [[ "$row_bad" == "| environment | FAILED (exit 0, 1 not ok) |"* ]]'
cells=$(sed 's/\\|//g' <<<"$row_ok" | tr -cd '|' | wc -c)
check gpu_check_summary_escapes_pipes "$cells unescaped pipes in: $row_ok" eval '[ "$cells" = 5 ] && [[ "$row_ok" == *"\\|"* ]]'
# Killed from outside in the middle of a section (as a lent machine ends a command past its
# limit): DIR already holds the summary and the archive, and no folder of loose logs.
TMPDIR="$tmp" PATH="$tmp/slowbin:$PATH" setsid "$gc" --out "$tmp/killed" environment >/dev/null 2>&1 &
pid=$!
for _ in $(seq 50); do [ -f "$tmp/killed/logs.tar.gz" ] && break; sleep 0.1; done
sleep 1
kill -KILL -- "-$pid" 2>/dev/null; wait "$pid" 2>/dev/null
check gpu_check_killed_leaves_two_files "$(ls "$tmp/killed" 2>&1 | tr '\n' ' ')" \
    eval '[ "$(ls "$tmp/killed" | tr "\n" " ")" = "logs.tar.gz summary.md " ] && tar -tzf "$tmp/killed/logs.tar.gz" >/dev/null'
# A stand-in nvidia-smi that lists one GPU, for the scaling and profile sections below.
mkdir -p "$tmp/gpubin"
printf '#!/bin/sh
case "$*" in
    -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)" ;;
    --query-gpu=*) echo "NVIDIA H100 80GB HBM3, 550.00, 81559 MiB" ;;
esac
exit 0
' >"$tmp/gpubin/nvidia-smi"
chmod +x "$tmp/gpubin/nvidia-smi"
# The scaling section (scripts/paper_tables.sh --sweeps) writes the tables and every sweep's results
# into its scratch ($TG_TMP), which the archive holds, and runs the strong sweeps even when the weak
# ones fail. Beside the stand-in nvidia-smi, a stand-in trainer answers --help and --peak-tflops as
# the real one does and fails every plan and run: each sweep then writes its table (n/a cells), the
# tables list the missing figures, and the section fails.
if [ -x "$bin" ]; then
    printf '#!/bin/sh
case "$1" in --help|--peak-tflops) exec %q "$@" ;; esac
[ -n "$TG_TMP" ] && head -c 3000000 /dev/zero >"$TG_TMP/stand_in_3mb.dat" && echo small >"$TG_TMP/stand_in_small.txt"
echo "stand-in trainer: no run" >&2; exit 1
' "$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")" >"$tmp/gpubin/fake_train_gpt"
    chmod +x "$tmp/gpubin/fake_train_gpt"
    PATH="$tmp/gpubin:$PATH" TRAIN_GPT="$tmp/gpubin/fake_train_gpt" "$gc" --out "$tmp/scaling" --limit 120 scaling >"$tmp/scaling.out" 2>&1
    row=$(grep '^| scaling |' "$tmp/scaling/summary.md")
    tar -tzf "$tmp/scaling/logs.tar.gz" >"$tmp/scaling.list" 2>&1
    check gpu_check_scaling_results_archived "$row; $(grep -c . "$tmp/scaling.list") archived, e.g. $(grep scaling "$tmp/scaling.list" | head -n 4 | tr '\n' ' ')" \
        eval '[[ "$row" == "| scaling | FAILED (exit 1, 0 not ok) |"* ]] && [[ "$row" == *"paper_tables.sh --sweeps --out \"\$TG_TMP/paper\""* ]] &&
              grep -qx "logs/scaling.scratch/paper/tables.md" "$tmp/scaling.list" &&
              grep -qx "logs/scaling.scratch/paper/sweep_weak_b8/table.md" "$tmp/scaling.list" &&
              grep -qx "logs/scaling.scratch/paper/sweep_weak_b20/chart.gp" "$tmp/scaling.list" &&
              grep -qx "logs/scaling.scratch/paper/sweep_strong_b20/table.md" "$tmp/scaling.list" &&
              grep -qx "logs/scaling.scratch/paper/sweep_strong_b8/chart.gp" "$tmp/scaling.list" &&
              ! grep -q "\.bin$" "$tmp/scaling.list"'
    # each sweep ran at its batch's micro-batch (batch 20 as 2 x 10, as the plan rows), not one micro-batch
    tar -xzf "$tmp/scaling/logs.tar.gz" -C "$tmp/scaling" logs/scaling.scratch/paper 2>/dev/null
    micro=$(cut -f7,8 "$tmp/scaling/logs/scaling.scratch/paper/sweep_weak_b20/manifest.tsv" \
        "$tmp/scaling/logs/scaling.scratch/paper/sweep_strong_b8/manifest.tsv" 2>&1 | sort -u | tr '\t\n' ': ')
    check gpu_check_scaling_sweeps_at_the_plans_micro_batch "batch:micro $micro" eval '[ "$micro" = "20:10 8:8 " ]'
    # a file over 2 MiB stays out of the archive (a lent machine returns at most 16 MiB a file), named in left_out.txt
    tar -xzf "$tmp/scaling/logs.tar.gz" -C "$tmp/scaling" logs/left_out.txt 2>/dev/null
    check gpu_check_archive_leaves_big_files_out "$(grep -c stand_in "$tmp/scaling.list") stand-in files archived; left out: $(head -c 300 "$tmp/scaling/logs/left_out.txt" 2>&1)" \
        eval 'grep -qx "logs/scaling.scratch/stand_in_small.txt" "$tmp/scaling.list" && ! grep -q "stand_in_3mb" "$tmp/scaling.list" &&
              grep -q "^3000000	logs/scaling.scratch/stand_in_3mb.dat$" "$tmp/scaling/logs/left_out.txt"'
else
    echo "skip gpu_check_scaling_results_archived - no $bin: build it with make"
fi
# An archive still over the limit keeps only the sections' logs (and left_out.txt saying so).
GPU_CHECK_ARCHIVE_MAX_BYTES=100 "$gc" --out "$tmp/tiny_archive" --limit 60 environment >/dev/null 2>&1
check gpu_check_archive_over_the_limit_keeps_the_logs "$(tar -tzf "$tmp/tiny_archive/logs.tar.gz" 2>&1 | tr '\n' ' ')" \
    eval '[ "$(tar -tzf "$tmp/tiny_archive/logs.tar.gz" | sort | tr "\n" " ")" = "logs/environment.log logs/left_out.txt " ] &&
          tar -xzOf "$tmp/tiny_archive/logs.tar.gz" logs/left_out.txt | grep -q "the archive passed 100 bytes"'
# The profile section runs ncu once per kernel (the attention's two, the LayerNorm backward at two
# widths), clocks left alone, on the GPU build's trainer, and each kernel it names is one kernels/cuda
# defines (a renamed kernel would leave ncu profiling nothing): a stand-in ncu records its
# arguments, beside the stand-in nvidia-smi.
mkdir -p "$tmp/ncubin"
printf '#!/bin/sh\necho "$*" >>%q\nexit 0\n' "$tmp/ncu_calls" >"$tmp/ncubin/ncu"
chmod +x "$tmp/ncubin/ncu"
PATH="$tmp/ncubin:$tmp/gpubin:$PATH" "$gc" --out "$tmp/profile" --limit 60 profile >"$tmp/profile.out" 2>&1; rc=$?
missing=""
while read -r k; do
    grep -qE "__global__ .*[^a-z_]$k\(|^ *$k\(" kernels/cuda/*.cu || missing="$missing $k"
done < <(sed -n 's/.*--kernel-name regex:\([a-z_]*\) .*/\1/p' "$tmp/ncu_calls" 2>/dev/null)
check gpu_check_profile_runs_ncu_per_kernel "rc $rc; calls: $(tr '\n' ';' <"$tmp/ncu_calls" 2>/dev/null | cut -c1-300); not in kernels/cuda:$missing" \
    eval '[ $rc = 0 ] && [ "$(grep -c . "$tmp/ncu_calls")" = 4 ] && [ -z "$missing" ] &&
          [ "$(grep -c -- "--clock-control none .* build/gpu/train_gpt .*--set device=cuda" "$tmp/ncu_calls")" = 4 ] &&
          [ "$(sed -n "s/.*regex:\([a-z_]*\) .*/\1/p" "$tmp/ncu_calls" | sort -u | grep -c .)" = 3 ] &&
          grep -q "regex:layernorm_backward_fused_kernel .*megatron_weak_1.2b.json" "$tmp/ncu_calls"'
# ... and then times PyTorch's causal attention alone (here, without CUDA, it says it timed nothing);
# its FLOP count is the results' convention, 2 B NH T^2 HS a layer forward: 2.5770e10 at both
# benchmark shapes (16 x 12 x 1024^2 x 64 = 8 x 16 x 1024^2 x 96).
tar -xzf "$tmp/profile/logs.tar.gz" -C "$tmp/profile" logs/profile.log 2>/dev/null
check gpu_check_profile_runs_the_reference "$(tail -n 2 "$tmp/profile/logs/profile.log" 2>/dev/null | tr '\n' ' ')" \
    grep -qE "attention_reference: no (CUDA device|torch)|causal SDPA" "$tmp/profile/logs/profile.log"
# The attention section times the tensor core by wgmma product shape (build/gpu/bench_wgmma), then
# build/gpu/bench_attention's block shapes, then PyTorch's attention alone at the same shapes, then a
# device copy's GB/s (build/gpu/bench_copy, the memory ceiling of the op table's rates); without a
# CUDA build here it fails, and its row names the four commands.
PATH="$tmp/gpubin:$PATH" "$gc" --out "$tmp/attention" --limit 60 attention >"$tmp/attention.out" 2>&1; rc=$?
row=$(grep '^| attention |' "$tmp/attention/summary.md" 2>/dev/null)
check gpu_check_attention_section "rc $rc; $row" \
    eval '[ $rc = 1 ] && [[ "$row" == "| attention | FAILED "*"| \`timeout -k 5 30 build/gpu/bench_wgmma; rc=\$?; build/gpu/bench_attention "*"; python3 scripts/attention_reference.py "*"; build/gpu/bench_copy "*" exit \$rc\`"* ]]'
flops=$(python3 scripts/attention_reference.py --flops 2>&1)
check attention_reference_flops "$flops" \
    eval '[ "$(grep -c "forward 2.5770e+10 FLOP a layer, backward 6.4425e+10" <<<"$flops")" = 2 ]'
# An nvidia-smi that lists its second GPU after the first has been read (as a slow or long listing
# does): a check that stops reading at the first line leaves it writing into a closed pipe, which
# must not make the GPU vanish. The kernels section then runs (and fails: no CUDA build here).
mkdir -p "$tmp/slowbin"
printf '#!/bin/sh\ncase "$*" in -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-0)"; sleep 0.3; echo "GPU 1: NVIDIA H200 (UUID: GPU-1)" ;; esac\nexit 0\n' \
    >"$tmp/slowbin/nvidia-smi" && chmod +x "$tmp/slowbin/nvidia-smi"
PATH="$tmp/slowbin:$PATH" "$gc" --out "$tmp/slow_list" --limit 60 kernels >/dev/null 2>&1
row=$(grep '^| kernels |' "$tmp/slow_list/summary.md" 2>/dev/null)
check gpu_check_sees_a_gpu_listed_slowly "$row" eval '[[ "$row" == "| kernels | FAILED "* ]]'
# The multi-GPU sections with one GPU (the stand-in above): they run nothing, and their rows say why.
PATH="$tmp/gpubin:$PATH" "$gc" --out "$tmp/one_gpu" --limit 60 multi-gpu multi-gpu-scaling >/dev/null 2>&1; rc=$?
rows=$(grep '^| multi-gpu' "$tmp/one_gpu/summary.md" 2>/dev/null | cut -d'|' -f2-3 | tr '\n' ';')
check gpu_check_multi_gpu_skipped_on_one_gpu "rc $rc; $rows" \
    eval '[ $rc = 0 ] && [ "$rows" = " multi-gpu | passed (0 ok); skipped: fewer than 2 GPUs ; multi-gpu-scaling | passed (0 ok); skipped: fewer than 2 GPUs ;" ]'
# The multi-gpu-scaling section rehearsed with two stand-in GPUs and this machine's CPU trainer at
# tiny scale (tests/gpu/multi_gpu.sh sweeps): both sweeps run twice, at DEVICES=2 (TP 2 real) and
# DEVICES=1 (TP 2 projected), and the archive holds each sweep's tables and the real row beside its
# projection (scripts/projection_error.py).
mkdir -p "$tmp/twobin"
printf '#!/bin/sh\ncase "$*" in -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-0)"; echo "GPU 1: NVIDIA H200 (UUID: GPU-1)" ;; esac\nexit 0\n' \
    >"$tmp/twobin/nvidia-smi" && chmod +x "$tmp/twobin/nvidia-smi"
PATH="$tmp/twobin:$PATH" SCALE=tiny MG_TP_LIST=1,2 MG_SWEEP_BIN="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")" MG_BATCHES=4 MG_SWEEP_ARGS="--steps 2 --device cpu" \
    OMP_NUM_THREADS=1 "$gc" --out "$tmp/mg_scaling" --limit 300 multi-gpu-scaling >"$tmp/mg_scaling.out" 2>&1; rc=$?
row=$(grep '^| multi-gpu-scaling |' "$tmp/mg_scaling/summary.md" 2>/dev/null)
tar -xzf "$tmp/mg_scaling/logs.tar.gz" -C "$tmp/mg_scaling" 2>/dev/null
sd="$tmp/mg_scaling/logs/multi-gpu-scaling.scratch/multi_gpu_sweeps"
pairs=$(cat "$sd"/{weak,strong}_b4_projection_error.md 2>/dev/null | grep -cE '^\| tiny-[a-z0-9]+ \| 2 \| 1 \| 4 \| [0-9.]+ \| [0-9.]+ \| [-+][0-9.]+% \|')
check gpu_check_multi_gpu_scaling_rehearsed "rc $rc; $row; $pairs real rows beside their projection" \
    eval '[ $rc = 0 ] && [[ "$row" == "| multi-gpu-scaling | passed (2 ok) |"* ]] && [ "$pairs" = 2 ] &&
          [ -f "$sd/weak_b4_real/table.md" ] && [ -f "$sd/strong_b4_projected/table.md" ]'
# At paper scale (the section's default), with the stand-in trainer that fails every run: batch 20's
# sweeps, real (DEVICES=2) and projected (DEVICES=1), ran at its plan rows' micro-batch (2 x 10, as
# the scaling section's, where a sweep's own default is one micro-batch of 20), and the failed runs
# fail the section. Batch 20 alone (about 5 s a sweep here): batch 8's micro-batch is its default.
if [ -x "$tmp/gpubin/fake_train_gpt" ]; then
    mkdir -p "$tmp/twoh100"
    printf '#!/bin/sh
case "$*" in
    -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)"; echo "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)" ;;
    --query-gpu=*) echo "NVIDIA H100 80GB HBM3, 550.00, 81559 MiB"; echo "NVIDIA H100 80GB HBM3, 550.00, 81559 MiB" ;;
esac
exit 0
' >"$tmp/twoh100/nvidia-smi" && chmod +x "$tmp/twoh100/nvidia-smi"
    PATH="$tmp/twoh100:$PATH" MG_TP_LIST=1,2 MG_BATCHES=20 MG_SWEEP_BIN="$tmp/gpubin/fake_train_gpt" MG_SWEEP_ARGS="--steps 2" \
        "$gc" --out "$tmp/mg_paper" --limit 120 multi-gpu-scaling >"$tmp/mg_paper.out" 2>&1; rc=$?
    row=$(grep '^| multi-gpu-scaling |' "$tmp/mg_paper/summary.md" 2>/dev/null)
    tar -xzf "$tmp/mg_paper/logs.tar.gz" -C "$tmp/mg_paper" 2>/dev/null
    sd="$tmp/mg_paper/logs/multi-gpu-scaling.scratch/multi_gpu_sweeps"
    micro=$(for f in weak_b20_real weak_b20_projected strong_b20_real strong_b20_projected; do
        cut -f7,8 "$sd/$f/manifest.tsv" 2>&1 | sort -u | tr '\t\n' ': '; done)
    check gpu_check_multi_gpu_scaling_at_the_plans_micro_batch "rc $rc; $row; batch:micro $micro" \
        eval '[ $rc = 1 ] && [[ "$row" == "| multi-gpu-scaling | FAILED"* ]] && [ "$micro" = "20:10 20:10 20:10 20:10 " ]'
fi
if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "skip gpu_check_no_gpu_runs - this machine has a GPU: run scripts/gpu_check.sh itself"; exit "$failed"
fi
"$gc" --out "$tmp/run" --limit 60 environment kernels >"$tmp/run.out" 2>&1; rc=$?
check gpu_check_no_gpu_fails "rc $rc (want 1: kernels could not run)" test "$rc" = 1
check gpu_check_leaves_two_files "$(ls "$tmp/run" 2>&1 | tr '\n' ' ')" test "$(ls "$tmp/run" | tr '\n' ' ')" = "logs.tar.gz summary.md "
check gpu_check_archive_holds_logs "$(tar -tzf "$tmp/run/logs.tar.gz" 2>&1 | tr '\n' ' ')" \
    eval 'tar -tzf "$tmp/run/logs.tar.gz" | grep -q "logs/environment.log" && tar -tzf "$tmp/run/logs.tar.gz" | grep -q "logs/kernels.log"'
check gpu_check_summary_rows "$(cat "$tmp/run/summary.md" | tr '\n' ' ')" \
    eval 'grep -q "^| environment |" "$tmp/run/summary.md" && grep -q "^| kernels | skipped: no GPU" "$tmp/run/summary.md"'
"$gc" --out "$tmp/from" --limit 60 --from scaling >"$tmp/from.out" 2>&1
check gpu_check_from_runs_the_rest "$(grep -c '^| ' "$tmp/from/summary.md") rows" \
    eval '[ "$(grep "^| " "$tmp/from/summary.md" | grep -v "^| section\|^|---" | cut -d"|" -f2 | tr -d " " | tr "\n" " ")" = "scaling hf profile multi-gpu multi-gpu-scaling " ]'
# bench-124m measures llm.c from LLMC_SRC (default .peer/llm.c) when that folder exists; without it the
# command has no --llmc and the summary says llm.c is not measured
mkdir -p "$tmp/llmc_src"
LLMC_SRC="$tmp/llmc_src" "$gc" --out "$tmp/with_llmc" --limit 60 bench-124m >/dev/null 2>&1
check gpu_check_bench_passes_llmc "$(grep '^| bench-124m' "$tmp/with_llmc/summary.md")" \
    eval 'grep "^| bench-124m |" "$tmp/with_llmc/summary.md" | grep -q -- "--llmc $tmp/llmc_src\`" &&
          ! grep -q "llm.c not measured" "$tmp/with_llmc/summary.md"'
# BENCH_ARGS reaches both bench sections' commands (after --quick, which they override: 30 timed steps)
BENCH_ARGS="--steps 33 --no-compile" "$gc" --out "$tmp/bench_args" --limit 60 bench-124m bench-1.2b >/dev/null 2>&1
check gpu_check_bench_args "$(grep '^| bench-' "$tmp/bench_args/summary.md" | tr '\n' ' ')" \
    eval '[ "$(grep -c "^| bench-.*scripts/bench_gpu.sh --quick --steps 33 --no-compile --models " "$tmp/bench_args/summary.md")" = 2 ]'
BENCH_ARGS='--steps 33; reboot' "$gc" --out "$tmp/bench_bad" bench-124m >"$tmp/bench_bad.out" 2>&1; rc=$?
check gpu_check_bench_args_refuses_a_command "rc $rc: $(cat "$tmp/bench_bad.out")" eval '[ $rc = 2 ] && grep -q "BENCH_ARGS may hold only" "$tmp/bench_bad.out"'
LLMC_SRC="$tmp/no_llmc_here" "$gc" --out "$tmp/without_llmc" --limit 60 bench-124m >/dev/null 2>&1
check gpu_check_bench_says_no_llmc "$(grep '^| bench-124m' "$tmp/without_llmc/summary.md")" \
    eval 'grep "^| bench-124m |" "$tmp/without_llmc/summary.md" | grep -q "llm.c not measured: no $tmp/no_llmc_here" &&
          ! grep -q -- "--llmc" "$tmp/without_llmc/summary.md"'
exit "$failed"
