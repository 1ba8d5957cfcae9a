#!/usr/bin/env bash
# kernels.attention = wgmma (kernels/cuda/flash_fwd_wgmma.cu: the attention
# forward on Hopper's warpgroup MMA; flash_bwd_wgmma.cu: the backward's dk,
# dv and dq on it) in the trainer on the emulated device,
# which reports compute capability 9.0: one head of 64 (head size 64), bf16,
# 2 steps; the wgmma kernels are launched (the emulation's launch log) and
# the losses and weights match the mma.sync run; the same for
# kernels.attention = wgmma_ws (flash_fwd_wgmma_ws.cu, the warp-specialized
# forward on TMA, with the same backward), and again at head size 96; bench_attention times each
# forward and the backward as rows of their own, and at head size 128 the
# backward's dq goes through its slots (the launch log), at 64 also with K
# and V read from shared memory (a row of its own); wgmma is refused,
# naming kernels.attention, with dropout, another head size, float32 and
# device = cpu; kernels.attention = auto (the default) runs at head sizes 64,
# 96 and 16 the kernels its table names, and says so; at 64, recompute, a repeat
# and a CUDA graph are bitwise, TP = 2 matches TP = 2 with mma.
# The kernel against the CPU and the mma.sync forward:
# tests/kernels/attention.c (t_cuda_emu); on a GPU: make test-gpu, bench_attention.
# cost: 40 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" attention_wgmma
export OMP_NUM_THREADS=1

if ! bash tests/emu/build.sh train >"$tmp/build.out" 2>&1; then
    not_ok emu_build "$(tail -n 5 "$tmp/build.out" | tr '\n' ' ')"
    exit 1
fi
emu_bin=build/emu/train_gpt_emu
# shellcheck source=tests/emu/trainer_fixture.sh
source tests/emu/trainer_fixture.sh
hs64=(--set device=cuda --set train.precision=bf16 --set model.n_head=1 --set train.steps=2)
if train mma "$emu_bin" "${hs64[@]}" --set kernels.attention=mma &&
    EMU_LAUNCH_LOG="$tmp/wgmma.launches" train wgmma "$emu_bin" "${hs64[@]}" --set kernels.attention=wgmma; then
    if grep -q flash_forward_wgmma_kernel "$tmp/wgmma.launches" && ! grep -q flash_forward_mma_kernel "$tmp/wgmma.launches"; then
        ok trainer_wgmma_forward_launched
    else not_ok trainer_wgmma_forward_launched "the launch log: $(cut -f3 "$tmp/wgmma.launches" | sort -u | tr '\n' ' ')"; fi
    if grep -q flash_bwd_wgmma_kernel "$tmp/wgmma.launches" && grep -q flash_dq_reduce_kernel "$tmp/wgmma.launches" &&
        ! grep -qE 'flash_(dkv|dq)_mma_kernel' "$tmp/wgmma.launches"; then
        ok trainer_wgmma_backward_launched
    else not_ok trainer_wgmma_backward_launched "the launch log: $(cut -f3 "$tmp/wgmma.launches" | sort -u | tr '\n' ' ')"; fi
    if out=$("$py" tests/parallel/compare.py "$tmp/mma" "$tmp/wgmma" 2 --rtol 2e-3 2>&1); then ok "trainer_wgmma_matches_mma ($out)"
    else not_ok trainer_wgmma_matches_mma "$out"; fi
    out=""
    # a scratch that holds one pair's dq shares (2 pairs of T = 16: 16448 bytes each, after 256 of alignment):
    # the wgmma backward with dq by its slots (not the mma.sync fallback) in two rounds, each pair's slots
    # after that round's D, the same bits
    if EMU_SCRATCH_BYTES=20000 EMU_LAUNCH_LOG="$tmp/rounds.launches" train wgmma_rounds "$emu_bin" "${hs64[@]}" \
        --set kernels.attention=wgmma && grep -q flash_dq_reduce_kernel "$tmp/rounds.launches" &&
        out=$("$py" tests/parallel/compare.py "$tmp/wgmma" "$tmp/wgmma_rounds" 2 --bitwise 2>&1); then
        ok "trainer_wgmma_backward_in_rounds_same_bits ($out)"
    else not_ok trainer_wgmma_backward_in_rounds_same_bits "${out:-} $(cut -f3 "$tmp/rounds.launches" 2>/dev/null | grep -E 'wgmma|dq' | sort -u | tr '\n' ' ')"; fi
else not_ok trainer_wgmma_runs "$(tail -n 3 "$tmp/mma.out" "$tmp/wgmma.out" | tr '\n' ' ')"; fi
# kernels.attention = wgmma_ws (flash_fwd_wgmma_ws.cu: TMA producer warp, two consumer warpgroups)
if [ -d "$tmp/mma" ] && EMU_LAUNCH_LOG="$tmp/ws.launches" train wgmma_ws "$emu_bin" "${hs64[@]}" --set kernels.attention=wgmma_ws; then
    if grep -q flash_forward_wgmma_ws_kernel "$tmp/ws.launches" && ! grep -qE 'flash_forward_(mma|wgmma)_kernel' "$tmp/ws.launches" &&
        grep -q flash_bwd_wgmma_kernel "$tmp/ws.launches"; then
        ok trainer_wgmma_ws_forward_launched
    else not_ok trainer_wgmma_ws_forward_launched "the launch log: $(cut -f3 "$tmp/ws.launches" | sort -u | tr '\n' ' ')"; fi
    if out=$("$py" tests/parallel/compare.py "$tmp/mma" "$tmp/wgmma_ws" 2 --rtol 2e-3 2>&1); then ok "trainer_wgmma_ws_matches_mma ($out)"
    else not_ok trainer_wgmma_ws_matches_mma "$out"; fi
else not_ok trainer_wgmma_ws_runs "$(tail -n 3 "$tmp/mma.out" "$tmp/wgmma_ws.out" | tr '\n' ' ')"; fi
# head size 96 (the 1.2B model's): one head of 96, the TMA forward's two column chunks
hs96=(--set device=cuda --set train.precision=bf16 --set model.n_head=1 --set model.n_embd=96 --set train.steps=2)
if train mma96 "$emu_bin" "${hs96[@]}" --set kernels.attention=mma &&
    EMU_LAUNCH_LOG="$tmp/ws96.launches" train wgmma_ws96 "$emu_bin" "${hs96[@]}" --set kernels.attention=wgmma_ws; then
    if grep -q flash_forward_wgmma_ws_kernel "$tmp/ws96.launches" && ! grep -qE 'flash_forward_(mma|wgmma)_kernel' "$tmp/ws96.launches"
    then ok trainer_wgmma_ws_head_size_96_launched
    else not_ok trainer_wgmma_ws_head_size_96_launched "the launch log: $(cut -f3 "$tmp/ws96.launches" | sort -u | tr '\n' ' ')"; fi
    # the wgmma backward at 96, dq by its slots (flash_bwd_wgmma.cu), not the mma.sync kernels
    if grep -q flash_bwd_wgmma_kernel "$tmp/ws96.launches" && grep -q flash_dq_reduce_kernel "$tmp/ws96.launches" &&
        ! grep -qE 'flash_(dkv|dq)_mma_kernel' "$tmp/ws96.launches"
    then ok trainer_wgmma_head_size_96_backward_launched
    else not_ok trainer_wgmma_head_size_96_backward_launched "the launch log: $(cut -f3 "$tmp/ws96.launches" | sort -u | tr '\n' ' ')"; fi
    if out=$("$py" tests/parallel/compare.py "$tmp/mma96" "$tmp/wgmma_ws96" 2 --rtol 2e-3 2>&1); then
        ok "trainer_wgmma_ws_head_size_96_matches_mma ($out)"
    else not_ok trainer_wgmma_ws_head_size_96_matches_mma "$out"; fi
else not_ok trainer_wgmma_ws_head_size_96_runs "$(tail -n 3 "$tmp/mma96.out" "$tmp/wgmma_ws96.out" | tr '\n' ' ')"; fi

# kernels.attention = auto, the default: at head size 64 wgmma_ws's forward and the wgmma backward (so
# wgmma_ws's run, bit for bit), at 96 the mma.sync forward and the wgmma backward (so mma's run within
# bf16's rounding), each named on the backend line; at head size 16 mma throughout, not refused
# backend_line NAME WANT: the run's backend line names WANT and kernels.attention auto
backend_line() { grep "^backend: " "$tmp/$1.out" | grep -qF "attention $2 (kernels.attention auto)"; }
# auto_case NAME REF CHOSEN LAUNCHED FORBIDDEN COMPARE LAUNCH_CHECK MATCH_CHECK [--set ...]: the default's run
# NAME launches each kernel of LAUNCHED and none matching FORBIDDEN, names CHOSEN on its backend line, and
# compares with REF's run by COMPARE (compare.py's options)
auto_case() {
    local name=$1 ref=$2 chosen=$3 launched=$4 forbidden=$5 compare=$6 launch_check=$7 match_check=$8 k all=1
    shift 8
    if ! { [ -d "$tmp/$ref" ] && EMU_LAUNCH_LOG="$tmp/$name.launches" train "$name" "$emu_bin" "$@"; }; then
        not_ok "${name}_runs" "$(tail -n 3 "$tmp/$name.out" | tr '\n' ' ')"
        return
    fi
    for k in $launched; do grep -q "$k" "$tmp/$name.launches" || all=0; done
    if [ $all = 1 ] && ! grep -qE "$forbidden" "$tmp/$name.launches" && backend_line "$name" "$chosen"; then ok "$launch_check"
    else not_ok "$launch_check" "$(grep '^backend' "$tmp/$name.out"); launches: $(cut -f3 "$tmp/$name.launches" | sort -u | tr '\n' ' ')"; fi
    # shellcheck disable=SC2086 # COMPARE is options
    if out=$("$py" tests/parallel/compare.py "$tmp/$ref" "$tmp/$name" 2 $compare 2>&1); then ok "$match_check ($out)"
    else not_ok "$match_check" "$out"; fi
}
auto_case auto wgmma_ws "forward wgmma_ws, backward wgmma" "flash_forward_wgmma_ws_kernel flash_bwd_wgmma_kernel" \
    'flash_forward_(mma|wgmma)_kernel|flash_(dkv|dq)_mma_kernel' --bitwise auto_head_size_64_runs_wgmma_ws_and_the_wgmma_backward \
    auto_head_size_64_is_wgmma_ws_bitwise "${hs64[@]}"
auto_case auto96 mma96 "forward mma, backward wgmma" "flash_forward_mma_kernel flash_bwd_wgmma_kernel" \
    'flash_forward_wgmma(_ws)?_kernel|flash_(dkv|dq)_mma_kernel' "--rtol 2e-3" auto_head_size_96_runs_mma_forward_and_the_wgmma_backward \
    auto_head_size_96_matches_mma "${hs96[@]}"
if EMU_LAUNCH_LOG="$tmp/auto16.launches" train auto16 "$emu_bin" "${hs64[@]}" --set model.n_head=4 &&
    grep -q flash_forward_mma_kernel "$tmp/auto16.launches" && ! grep -q wgmma "$tmp/auto16.launches" &&
    backend_line auto16 "forward mma, backward mma"; then
    ok auto_head_size_16_runs_mma
else not_ok auto_head_size_16_runs_mma "$(tail -n 2 "$tmp/auto16.out" | tr '\n' ' ') launches: $(cut -f3 "$tmp/auto16.launches" 2>/dev/null | sort -u | tr '\n' ' ')"; fi
# A build without sm_90a's code on a device of compute capability 9.0 (CUDA_SM=90; the emulation's
# stand-in: EMU_NO_SM90A=1), where the wgmma kernels' bodies are a trap: auto runs mma.sync throughout,
# with mma's bits, and wgmma is refused, naming what the build lacks
if [ -d "$tmp/mma" ] && EMU_NO_SM90A=1 EMU_LAUNCH_LOG="$tmp/no90a.launches" train no90a "$emu_bin" "${hs64[@]}" &&
    ! grep -q wgmma "$tmp/no90a.launches" && backend_line no90a "forward mma, backward mma" &&
    out=$("$py" tests/parallel/compare.py "$tmp/mma" "$tmp/no90a" 2 --bitwise 2>&1); then
    ok "auto_without_sm90a_code_runs_mma ($out)"
else not_ok auto_without_sm90a_code_runs_mma "${out:-} $(grep '^backend' "$tmp/no90a.out") $(tail -n 2 "$tmp/no90a.out" | tr '\n' ' ')"; fi
if EMU_NO_SM90A=1 train no90a_wgmma "$emu_bin" "${hs64[@]}" --set kernels.attention=wgmma_ws; then
    not_ok wgmma_without_sm90a_code_refused "the run went on: $(grep '^backend' "$tmp/no90a_wgmma.out")"
elif grep -q "kernels.attention.*wgmma_ws needs sm_90a machine code, which this build of train_gpt lacks" "$tmp/no90a_wgmma.out" &&
    [ ! -e "$tmp/no90a_wgmma/log.txt" ] && ! grep -qi "trap\|abort" "$tmp/no90a_wgmma.out"; then
    ok wgmma_without_sm90a_code_refused
else not_ok wgmma_without_sm90a_code_refused "$(tail -n 2 "$tmp/no90a_wgmma.out" | tr '\n' ' ')"; fi

# A CUDA build (here the emulation's) training on the CPU in bf16 (the CPU's bf16 flavour, no CUDA
# context): its backend line names no attention kernels. Asking the CUDA backend for them there read
# the CPU's context as CUDA's and crashed (every t_bf16 run, when ./train_gpt was a make GPU=1 build).
if train cpu_bf16 "$emu_bin" --set train.precision=bf16 --set model.n_head=1 --set train.steps=2 &&
    grep -q "^backend: .*bf16 activations" "$tmp/cpu_bf16.out" && ! grep -q "^backend: .*attention" "$tmp/cpu_bf16.out"; then
    ok cuda_build_trains_cpu_bf16
else not_ok cuda_build_trains_cpu_bf16 "$(grep '^backend' "$tmp/cpu_bf16.out") $(tail -n 2 "$tmp/cpu_bf16.out" | tr '\n' ' ')"; fi

# The default at head size 64 through what every run needs of it: two heads of 64 (two layers),
# recompute selective and full bitwise the plain run, the same run twice bitwise, replayed as a
# CUDA graph bitwise op by op, and TP = 2 (a head a rank, as two emulated processes) matching TP = 2
# with kernels.attention = mma (against TP = 1 the key bias, whose exact gradient is zero, takes
# bf16's layout-dependent noise, which AdamW amplifies past compare.py's bound at this lr)
two=(--set device=cuda --set train.precision=bf16 --set model.n_embd=128 --set model.n_head=2)
if EMU_LAUNCH_LOG="$tmp/two.launches" train two "$emu_bin" "${two[@]}" && grep -q flash_forward_wgmma_ws_kernel "$tmp/two.launches"; then
    recompute_bitwise two two auto_recompute "$emu_bin" "${two[@]}"
    if train two_again "$emu_bin" "${two[@]}" && out=$("$py" tests/parallel/compare.py "$tmp/two" "$tmp/two_again" 3 --bitwise 2>&1); then
        ok "auto_repeated_run_bitwise ($out)"
    else not_ok auto_repeated_run_bitwise "${out:-} $(tail -n 2 "$tmp/two_again.out" | tr '\n' ' ')"; fi
    if train two_graph "$emu_bin" "${two[@]}" "${graph[@]}" && train two_graph_off "$emu_bin" "${two[@]}" "${graph[@]}" \
        --set train.cuda_graph=false && grep -q "captured as a CUDA graph" "$tmp/two_graph.out" &&
        out=$("$py" tests/parallel/compare.py "$tmp/two_graph_off" "$tmp/two_graph" 6 --bitwise 2>&1); then
        ok "auto_cuda_graph_bitwise ($out)"
    else not_ok auto_cuda_graph_bitwise "${out:-} $(tail -n 2 "$tmp/two_graph.out" | tr '\n' ' ')"; fi
    tp2() { # NAME [--set ...]: TP = 2 as two emulated processes
        local name="$1"; shift
        timeout -k 5 300 scripts/launch.sh -n 2 --log-dir "$tmp/$name/launch" -- "$emu_bin" --config "$tmp/cfg.json" \
            --set out.dir="$tmp/$name" "${two[@]}" --set parallel.tp=2 "$@" >"$tmp/$name.out" 2>&1
    }
    if tp2 two_tp2 && tp2 two_tp2_mma --set kernels.attention=mma &&
        grep -q "attention forward wgmma_ws, backward wgmma" "$tmp/two_tp2.out" &&
        out=$("$py" tests/parallel/compare.py "$tmp/two_tp2_mma" "$tmp/two_tp2" 3 --rtol 2e-3 2>&1); then
        ok "auto_tp2_matches_mma ($out)"
    else not_ok auto_tp2_matches_mma "${out:-} $(tail -n 3 "$tmp/two_tp2.out" | tr '\n' ' ')"; fi
else not_ok auto_two_heads_runs "$(tail -n 3 "$tmp/two.out" | tr '\n' ' ')"; fi
# bench_attention: the wgmma forwards (and the persistent TMA one) as rows of their own at head
# sizes 64 and 96, checked against the tuned mma.sync shape (where a head size has no instance it
# says so: tests/kernels/attention.c checks the refusal at 80); the wgmma backward at 64 and 96 too,
# the persistent wgmma backward at 64 only, and in rounds of at most 24 MB of dq slots at both (the
# slots summed by the reduction kernel, and in the kernel), with the same bits
bench=build/emu/bench_attention_emu
"$bench" --shape 1,2,130,64 --shape 1,1,70,96 --warmup 0 --runs 1 >"$tmp/bench.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -qP '^1,2,130,64\tforward\twgmma: .*\t(same bits|err=[0-9.e-]+)$' "$tmp/bench.out" &&
    grep -qP '^1,2,130,64\tforward\twgmma_ws: .*\t(same bits|err=[0-9.e-]+)$' "$tmp/bench.out" &&
    grep -qP '^1,1,70,96\tforward\twgmma: .*\t(same bits|err=[0-9.e-]+)$' "$tmp/bench.out" &&
    grep -qP '^1,1,70,96\tforward\twgmma_ws: .*\t(same bits|err=[0-9.e-]+)$' "$tmp/bench.out" &&
    grep -qP '^1,2,130,64\tforward\twgmma_ws persistent: .*\t(same bits|err=[0-9.e-]+)$' "$tmp/bench.out" &&
    grep -qP '^1,1,70,96\tforward\twgmma_ws persistent: .*\t(same bits|err=[0-9.e-]+)$' "$tmp/bench.out" &&
    grep -qP '^1,2,130,64\tbackward\twgmma: as the slots row, persistent .*\tsame bits$' "$tmp/bench.out" &&
    ! grep -qP '^1,1,70,96\tbackward\twgmma: as the slots row, persistent' "$tmp/bench.out" &&
    grep -qP '^1,2,130,64\tbackward\twgmma: as the slots row, rounds of at most 24 MB .*\tsame bits$' "$tmp/bench.out" &&
    grep -qP '^1,1,70,96\tbackward\twgmma: as the slots row, rounds of at most 24 MB .*\tsame bits$' "$tmp/bench.out" &&
    grep -qP '^1,2,130,64\tbackward\twgmma: dq by slots summed in the kernel, rounds of at most 24 MB .*\tsame bits$' "$tmp/bench.out" &&
    grep -qP '^1,1,70,96\tbackward\twgmma: dq by slots summed in the kernel, rounds of at most 24 MB .*\tsame bits$' "$tmp/bench.out" &&
    tail -n 1 "$tmp/bench.out" | grep -q "^# every check passed"; then
    ok bench_attention_times_wgmma
else not_ok bench_attention_times_wgmma "exit $rc: $(grep -E 'wgmma|not ok' "$tmp/bench.out" | head -n 3 | tr '\n' ' ')"; fi
# the TMA forward with one exponential in 4 and in 8 by a cubic (exp2_poly) as rows of their own at 64,
# within the tolerance of the tuned mma.sync forward (not its bits); at 96 a note, no row
poly_row() { grep -qP "^1,2,130,64\tforward\twgmma_ws poly$1: .*\t(same bits|err=[0-9.e-]+)$" "$tmp/bench.out"; }
if [ $rc -eq 0 ] && poly_row 4 && poly_row 8 && ! grep -qP '^1,1,70,96\tforward\twgmma_ws poly' "$tmp/bench.out" &&
    grep -q '^# 1,1,70,96: no wgmma_ws poly4 forward here' "$tmp/bench.out"; then
    ok bench_attention_times_the_polynomial_exponentials
else not_ok bench_attention_times_the_polynomial_exponentials "exit $rc: $(grep -E 'poly' "$tmp/bench.out" | head -n 4 | tr '\n' ' ')"; fi
# and the TMA forward and the wgmma backward once more with each block's phase profile (instances of
# their own, with clock reads): '# profile' lines at 64 and 96, every block's record there (the forward's
# 128-key tiles: 3 a pair at T 130, 1 at 70; the backward's 64-row query tiles: 3 + 1 a pair at 130,
# 2 at 70), the results checked as the rows'; the backward's warpgroups have no producer line
profile_ok() { grep -qP "^# profile $1: ok \\(result (same bits|err=[0-9.e-]+); $2 tiles recorded of $2\\)$" "$3"; }
phases='the compute warpgroups \(their mean\), cycles a tile \(share of its time\):'
if [ $rc -eq 0 ] && profile_ok '1,2,130,64 wgmma_ws' 6 "$tmp/bench.out" && profile_ok '1,1,70,96 wgmma_ws' 1 "$tmp/bench.out" &&
    grep -qP "^# profile 1,2,130,64 wgmma_ws: a block's cycles = -?[0-9]+ \+ -?[0-9]+ a tile" "$tmp/bench.out" &&
    grep -qP "^# profile 1,2,130,64 wgmma_ws: $phases .*, softmax [0-9]+ \([0-9.]+%\), P V .*, store [0-9]+ \([0-9.]+%\)$" "$tmp/bench.out" &&
    grep -qP '^# profile 1,2,130,64 wgmma_ws: the producer thread, .*: start [0-9]+ .*, ring full [0-9]+ .*, issue copies [0-9]+ \([0-9.]+%\)$' "$tmp/bench.out" &&
    grep -qP '^# profile 1,2,130,64 wgmma_ws: 4 blocks \(0 without a whole record\) on [0-9]+ SMs' "$tmp/bench.out" &&
    grep -qP '^# profile 1,2,130,64 wgmma_ws: on each SM, .* a block held it [0-9.]+% of the time; median gap between blocks [0-9]+ cycles' "$tmp/bench.out"; then
    ok bench_attention_profiles_the_tma_forward
else not_ok bench_attention_profiles_the_tma_forward "exit $rc: $(grep -E '^# profile' "$tmp/bench.out" | head -n 4 | tr '\n' ' ')"; fi
if [ $rc -eq 0 ] && profile_ok '1,2,130,64 wgmma backward' 8 "$tmp/bench.out" && profile_ok '1,1,70,96 wgmma backward' 2 "$tmp/bench.out" &&
    grep -qP "^# profile 1,2,130,64 wgmma backward: $phases start [0-9]+ .*, turn .*, softmax .*, dk dv .*, dq [0-9]+ .*, store [0-9]+ \([0-9.]+%\)$" "$tmp/bench.out" &&
    grep -qP '^# profile 1,2,130,64 wgmma backward: 4 blocks \(0 without a whole record\)' "$tmp/bench.out" &&
    ! grep -q '^# profile .* wgmma backward: the producer' "$tmp/bench.out"; then
    ok bench_attention_profiles_the_wgmma_backward
else not_ok bench_attention_profiles_the_wgmma_backward "exit $rc: $(grep -E '^# profile .*backward' "$tmp/bench.out" | head -n 4 | tr '\n' ' ')"; fi
if [ $rc -eq 0 ] && grep -qP '^1,2,130,64\tbackward\twgmma: .*\t(same bits|err=[0-9.e-]+)$' "$tmp/bench.out" &&
    grep -qP '^1,1,70,96\tbackward\twgmma: .*\t(same bits|err=[0-9.e-]+)$' "$tmp/bench.out"; then
    ok bench_attention_times_wgmma_backward
else not_ok bench_attention_times_wgmma_backward "exit $rc: $(grep -E 'wgmma|not ok' "$tmp/bench.out" | head -n 4 | tr '\n' ' ')"; fi
# at head size 128 the wgmma backward takes dq through its slots too (two warpgroups a block since 1f85275;
# before, the mma.sync dq kernel ran there): the launch log has the reduction, not flash_dq_mma_kernel's wgmma fallback
EMU_LAUNCH_LOG="$tmp/bench128.launches" "$bench" --shape 1,1,70,128 --warmup 0 --runs 1 >"$tmp/bench128.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -qP '^1,1,70,128\tbackward\twgmma: .*dq by slots\t.*\t(same bits|err=[0-9.e-]+)$' "$tmp/bench128.out" &&
    grep -q 'flash_bwd_wgmma_kernel<HS, true, KVR, false, S, false>' "$tmp/bench128.launches" && grep -q flash_dq_reduce_kernel "$tmp/bench128.launches" &&
    tail -n 1 "$tmp/bench128.out" | grep -q "^# every check passed"; then
    ok wgmma_backward_head_size_128_dq_by_slots
else not_ok wgmma_backward_head_size_128_dq_by_slots "exit $rc: $(grep -E 'backward|not ok' "$tmp/bench128.out" | tail -n 2 | tr '\n' ' ') launches: $(cut -f3 "$tmp/bench128.launches" 2>/dev/null | sort -u | tr '\n' ' ')"; fi
# and a second row with dq by the mma.sync dq kernel (cuda_attention_backward_wgmma_dq), so that a GPU times
# both routes: its launches are the wgmma kernel without dq and flash_dq_mma_kernel
if [ $rc -eq 0 ] && grep -qP '^1,1,70,128\tbackward\twgmma: .*dq by the mma.sync kernel\t.*\t(same bits|err=[0-9.e-]+)$' "$tmp/bench128.out" &&
    grep -q 'flash_bwd_wgmma_kernel<HS, false, KVR, false, S, false>' "$tmp/bench128.launches" && grep -q 'flash_dq_mma_kernel' "$tmp/bench128.launches"; then
    ok wgmma_backward_dq_by_mma_row
else not_ok wgmma_backward_dq_by_mma_row "exit $rc: $(grep -E 'backward' "$tmp/bench128.out" | tail -n 2 | tr '\n' ' ') launches: $(cut -f3 "$tmp/bench128.launches" 2>/dev/null | sort -u | tr '\n' ' ')"; fi

# a row with dq's slots summed in the kernel by the last key block of each query tile
# (CUDA_WGMMA_DQ_SUMMED), its own instance; with a scratch of one pair a round (197424 bytes a
# pair at T = 200 and head size 128, two key blocks, after 256 of alignment), two rounds
# (EMU_VERBOSE's launches), each zeroing its counts first (a round whose counts start where the
# last one's ended sums nothing, and its dq stays the zeros the row starts from); the row in
# rounds of at most 24 MB has one pair a round here too: 4 launches of the summed instance
summed_row='^1,(1|2),(70|200),128\tbackward\twgmma: .*dq by slots summed in the kernel\t.*\t(same bits|err=[0-9.e-]+)$'
EMU_SCRATCH_BYTES=300000 EMU_VERBOSE=1 "$bench" --shape 1,2,200,128 --warmup 0 --runs 1 >"$tmp/summed.out" 2>"$tmp/summed.launches"
summed_rc=$?
summed_launches=$(grep -c 'flash_bwd_wgmma_kernel<HS, true, KVR, true, S, false><<<' "$tmp/summed.launches")
if [ $rc -eq 0 ] && grep -qP "$summed_row" "$tmp/bench128.out" && grep -q 'flash_bwd_wgmma_kernel<HS, true, KVR, true, S, false>' \
    "$tmp/bench128.launches" && [ $summed_rc -eq 0 ] && grep -qP "$summed_row" "$tmp/summed.out" && [ "$summed_launches" = 4 ] &&
    tail -n 1 "$tmp/summed.out" | grep -q "^# every check passed"; then
    ok wgmma_backward_dq_summed_row_in_rounds
else not_ok wgmma_backward_dq_summed_row_in_rounds "exit $rc $summed_rc, $summed_launches launches in rounds: $(grep -E 'summed|not ok' "$tmp/bench128.out" "$tmp/summed.out" | tr '\n' ' ')"; fi

# at head size 64 a third wgmma backward row, K and V read from shared memory where every run holds them
# in registers (cuda_attention_backward_wgmma_kv_shared), launched as its own instance; none at 96
EMU_LAUNCH_LOG="$tmp/bench64.launches" "$bench" --shape 1,2,130,64 --shape 1,1,70,96 --warmup 0 --runs 1 >"$tmp/bench64.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -qP '^1,2,130,64\tbackward\twgmma: as the slots row, K and V read from shared memory.*\t(same bits|err=[0-9.e-]+)$' \
    "$tmp/bench64.out" && ! grep -qP '^1,1,70,96\tbackward\twgmma: as the slots row, K and V' "$tmp/bench64.out" &&
    grep -q 'flash_bwd_wgmma_kernel<HS, true, false, false, S, false>' "$tmp/bench64.launches" &&
    grep -q 'flash_bwd_wgmma_kernel<HS, true, KVR, false, S, false>' "$tmp/bench64.launches" && tail -n 1 "$tmp/bench64.out" | grep -q "^# every check passed"; then
    ok wgmma_backward_kv_shared_row_at_64_only
else not_ok wgmma_backward_kv_shared_row_at_64_only "exit $rc: $(grep -E 'backward.*wgmma|not ok' "$tmp/bench64.out" | tr '\n' ' ')"; fi
# at head sizes 64 and 96 a row with two stages of Q and dout (cuda_attention_backward_wgmma_two_stages),
# where every run has three: its own instance (STAGES 2), beside every run's (STAGES S); none at 128,
# where every run has two (bench128.out, run above); the every-run rows name their stages
two_row='\tbackward\twgmma: as the slots row, two stages of Q and dout.*\t(same bits|err=[0-9.e-]+)$'
if [ $rc -eq 0 ] && grep -qP "^1,2,130,64$two_row" "$tmp/bench64.out" && grep -qP "^1,1,70,96$two_row" "$tmp/bench64.out" &&
    ! grep -q 'two stages of Q and dout' "$tmp/bench128.out" &&
    grep -qP '^1,2,130,64\tbackward\twgmma: 128 keys.*TMA 3 stages, dq by slots\t' "$tmp/bench64.out" &&
    grep -qP '^1,1,70,128\tbackward\twgmma: 128 keys.*TMA 2 stages, dq by slots\t' "$tmp/bench128.out" &&
    grep -q 'flash_bwd_wgmma_kernel<HS, true, KVR, false, 2, false>' "$tmp/bench64.launches" &&
    ! grep -q 'flash_bwd_wgmma_kernel<HS, true, KVR, false, 2, false>' "$tmp/bench128.launches"; then
    ok wgmma_backward_two_stages_row_at_64_and_96
else not_ok wgmma_backward_two_stages_row_at_64_and_96 "exit $rc: $(grep -E 'two stages|not ok' "$tmp/bench64.out" "$tmp/bench128.out" | tr '\n' ' ')"; fi

# [kernel=K] refused NAME PATTERN [--set ...]: the run with kernels.attention = K (wgmma unless given)
# stops before training, naming kernels.attention and PATTERN
refused() {
    local name=$1 pattern=$2
    shift 2
    if ! train "$name" "$@" --set kernels.attention="${kernel:-wgmma}" && grep -q "kernels.attention" "$tmp/$name.out" &&
        grep -q "$pattern" "$tmp/$name.out"; then
        ok "wgmma_refused_$name"
    else not_ok "wgmma_refused_$name" "$(tail -n 2 "$tmp/$name.out" | tr '\n' ' ')"; fi
}
refused dropout "without dropout" "$emu_bin" "${hs64[@]}" --set model.dropout=0.1
refused head_size_16 "head sizes 64, 96 and 128" "$emu_bin" "${hs64[@]}" --set model.n_head=4
refused fp32 "bf16 activations only" "$emu_bin" "${hs64[@]}" --set train.precision=fp32
refused cpu 'needs device = "cuda"' "$emu_bin" --set model.n_head=1 --set train.steps=2
kernel=wgmma_ws refused ws_head_size_16 "wgmma_ws has head sizes 64, 96 and 128" "$emu_bin" "${hs64[@]}" --set model.n_head=4
exit "$failed"
