#!/usr/bin/env bash
# What each CUDA kernel asks of the GPU (scripts/kernel_resources.py): ptxas's
# registers, spills and shared memory from make GPU=1, beside the block sizes
# and dynamic shared memory the emulation launches them with. First the
# checker itself, on made-up ptxas reports and launch logs (a block over the
# register file, over the shared memory of an sm_80, a spill on sm_90, a
# kernel never launched, a launch of a kernel never compiled); then, where
# nvcc is found, the project's kernels, with the launches of two quick runs
# of the kernel checks under the emulation (on the chunked paths and without
# cuBLASLt's epilogues, in reverse block order; their checks count here, and
# run without nvcc too): every one launched under the
# emulation, none over a limit, none spilling on sm_90; and the wgmma
# wrappers' check program (tests/gpu/hopper_check.cu) compiled for sm_90a.
# cost: 380 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" kernel_resources
export OMP_NUM_THREADS=1
checker=scripts/kernel_resources.py

# ptxas_entry MANGLED ARCH REGS SMEM STACK SPILL: one entry as nvcc --resource-usage reports it
ptxas_entry() {
    echo "ptxas info    : Compiling entry function '$1' for '$2'"
    echo "ptxas info    : Function properties for $1"
    echo "    $5 bytes stack frame, $6 bytes spill stores, $6 bytes spill loads"
    local smem=""
    [ "$4" -gt 0 ] && smem=", $4 bytes smem"
    echo "ptxas info    : Used $3 registers, used 1 barriers$smem, 380 bytes cmem[0]"
}
GOOD=_ZN12_GLOBAL__N_111good_kernelEPf      # (anonymous namespace)::good_kernel(float*)
T64=_ZN12_GLOBAL__N_17tkernelILi64EEEvPf    # void (anonymous namespace)::tkernel<64>(float*)
T128=_ZN12_GLOBAL__N_17tkernelILi128EEEvPf  # ... tkernel<128>
LIB=_ZN3cub6detail9LibKernelILi1EEEvi       # void cub::detail::LibKernel<1>(int): a library's, never checked
SPILL=_Z12spill_kernelPfi                   # spill_kernel(float*, int)

# fixture NAME: a build directory with kernels/cuda/k.o.ptxas (both architectures) and a launch log
fixture() {
    local d="$tmp/$1"
    mkdir -p "$d/build/kernels/cuda"
    {
        # ptxas's advisory that names no function (printed before the object's first entry)
        [ "${ADVISE:-}" = object ] &&
            echo "ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register count at entry."
        echo "ptxas info    : 0 bytes gmem"
        for arch in ${ARCHES:-sm_80 sm_90a}; do
            ptxas_entry $GOOD $arch 32 1024 0 0
            ptxas_entry $T64 $arch 100 0 0 0
            ptxas_entry $T128 $arch "${T128_REGS:-200}" 1024 0 0
            ptxas_entry $LIB $arch 40 0 0 0
            if [ $arch = sm_80 ]; then ptxas_entry $SPILL $arch 255 0 "${SPILL_80:-0}" "${SPILL_80:-0}"
            else ptxas_entry $SPILL $arch 255 0 "${SPILL_90:-0}" "${SPILL_90:-0}"; fi
        done
        # ptxas's advisories, as nvcc 13.0 words them (a kernel that touches its accumulators while its
        # wgmma products are in flight)
        if [ "${ADVISE:-}" = function ]; then
            echo "ptxas info    : (C7519) warpgroup.arrive is injected in around line 137 by compiler to allow use of registers in GMMA in function '$T128'"
            echo "ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient register resources for the wgmma pipeline in the function '$T128'"
        fi
    } >"$d/build/kernels/cuda/k.o.ptxas"
    printf 'kernels/cuda/k.cu\t10\tgood_kernel\t256\t0\n' >"$d/launches"
    printf 'kernels/cuda/k.cu\t20\ttkernel<HS>\t%s\t%s\n' "${T_THREADS:-128}" "${T_DYN:-65536}" >>"$d/launches"
    printf 'kernels/cuda/k.cu\t21\ttkernel<HS>\t64\t0\n' >>"$d/launches"
    [ -n "${NO_SPILL_LAUNCH:-}" ] || printf 'kernels/cuda/k.cu\t30\tspill_kernel\t64\t0\n' >>"$d/launches"
    [ -z "${EXTRA_LAUNCH:-}" ] || printf '%s\n' "$EXTRA_LAUNCH" >>"$d/launches"
}
# expect NAME RC PATTERN [NOT_PATTERN]: the checker on fixture NAME exits RC,
# prints a line matching PATTERN and none matching NOT_PATTERN
expect() {
    local name=$1 want_rc=$2 pattern=$3 not=${4:-} rc
    "$py" "$checker" --build "$tmp/$name/build" --launches "$tmp/$name/launches" --check >"$tmp/$name.out" 2>&1
    rc=$?
    if [ $rc = "$want_rc" ] && grep -qE "$pattern" "$tmp/$name.out" && { [ -z "$not" ] || ! grep -qE "$not" "$tmp/$name.out"; }
    then ok "checker_$name"
    else not_ok "checker_$name" "exit $rc (want $want_rc): $(grep -v '^ok' "$tmp/$name.out" | head -n 3 | tr '\n' ' ')"; fi
}

# Everything fits: 200 registers x 128 threads, 1 KiB static + 64 KiB dynamic;
# the library's kernel was never launched, and that is not ours to check.
fixture fits
expect fits 0 "^ok sm_90 k.cu tkernel registers" "^not ok"
n=$(grep -c '^ok ' "$tmp/fits.out")
[ "$n" = 20 ] && ok "checker_fits_counts_every_check" ||
    not_ok checker_fits_counts_every_check "$n ok lines, want 20 (both arches compiled for, registers and shared memory of 3 kernels x 2 arches, spills and ptxas advisories of 3 on sm_90, none for the library's)"
# 200 registers x 512 threads: over 65,536 (the launch's line is named)
T_THREADS=512 fixture regs
expect regs 1 "^not ok sm_90 k.cu tkernel registers - 200 registers x 512 threads \(kernels/cuda/k.cu:20\) = 102400"
# 129 registers x 500 threads is 64,500, but a block takes whole warps (16)
# of 136 registers a thread: 69,632
T128_REGS=129 T_THREADS=500 fixture rounding
expect rounding 1 "^not ok sm_80 k.cu tkernel registers - 129 registers x 500 threads .* = 69632"
# 1 KiB static + 163 KiB dynamic: over an sm_80 block's 163 KiB, not an sm_90's 227 KiB
T_DYN=$((163 * 1024)) fixture smem
expect smem 1 "^not ok sm_80 k.cu tkernel shared memory - 1024 static \+ 166912 dynamic" "^not ok sm_90"
# a spill fails on sm_90 and is only counted on sm_80
SPILL_90=8 fixture spill90
expect spill90 1 "^not ok sm_90 k.cu spill_kernel no spills - 8 bytes stack frame, 8 bytes spill stores"
SPILL_80=8 fixture spill80
expect spill80 0 "^ok sm_90 k.cu spill_kernel no spills" "^not ok"
# a wgmma pipeline ptxas serialized (and a sync it injected) fails on sm_90, naming both
ADVISE=function fixture advised
expect advised 1 "^not ok sm_90 k.cu tkernel no ptxas advisories - \(C7519\) warpgroup.arrive is injected by compiler .*; \(C7511\) Potential Performance Loss: wgmma.mma_async instructions are serialized" "^not ok sm_90 k.cu (good_kernel|spill_kernel)"
# objects built for sm_90a alone (CUDA_SM=90a): sm_80's limits unchecked, which fails
ARCHES=sm_90a fixture one_arch
expect one_arch 1 "^not ok sm_80 compiled for - ptxas compiled no kernel for sm_80 \(only sm_90\)" "^not ok sm_90"
# one naming no function counts against every kernel of its object
ADVISE=object fixture advised_object
expect advised_object 1 "^not ok sm_90 k.cu good_kernel no ptxas advisories - \(C7508\) Potential Performance Loss: 'setmaxnreg' ignored; .* \(naming no function: said of this object\)" "^ok sm_90 k.cu (tkernel|spill_kernel) no ptxas"
# a kernel the emulation never launched, and a launch of a kernel ptxas never compiled
NO_SPILL_LAUNCH=1 fixture unlaunched
expect unlaunched 1 "^not ok sm_90 k.cu spill_kernel launched - never launched"
EXTRA_LAUNCH=$(printf 'kernels/cuda/k.cu\t40\trenamed_kernel<T>\t256\t0') fixture uncompiled
expect uncompiled 1 "^not ok k.cu renamed_kernel compiled - launched at kernels/cuda/k.cu:40 but ptxas compiled no kernel"
# a malformed launch log, and a build directory without reports: a message, exit 1
EXTRA_LAUNCH="kernels/cuda/k.cu 40 torn" fixture torn
expect torn 1 "launches:5: not a launch line"
mkdir -p "$tmp/empty/build" && : >"$tmp/empty/launches"
expect empty 1 "no ptxas report \(\*.o.ptxas\) under .*make GPU=1"

# The launches: two quick runs of the kernel checks, whose own checks count here too (tests/t_cuda_emu.sh
# runs the plain and full ones): dq's slots chunked (a small scratch), and the matmuls without cuBLASLt's
# epilogues (the unfused fallbacks: bias rows, then the product onto them; the GELU backward kernel),
# both with blocks and threads in reverse order. The second has the whole scratch (the first has no room
# for the wgmma backward's dq slots), so the first key block of a pair, not the diagonal one, is the
# last to count its arrival and sums every query tile's slots (CUDA_WGMMA_DQ_SUMMED). Together they
# launch every kernel configuration a plain quick run does and more (on 2026-12-01: 112 distinct
# launches, the plain run's 107 all among them). They run after the CUDA build (in CI, other suites
# build the emulation meanwhile), or alone where there is no CUDA toolkit.
log="$tmp/launches.tsv"
launch_log_runs() {
    # train: the build the other suites ask for (a kernels-only build first would be built again whole for them)
    if ! bash tests/emu/build.sh train >"$tmp/emu_build.out" 2>&1; then
        not_ok emu_build "$(tail -n 5 "$tmp/emu_build.out" | tr '\n' ' ')"
        exit 1
    fi
    kernel_checks chunked EMU_LAUNCH_LOG="$log" EMU_SCRATCH_BYTES=12000 EMU_REVERSE=1 -- --quick
    kernel_checks no_epilogue EMU_LAUNCH_LOG="$log" EMU_LT_NO_EPILOGUE=1 EMU_REVERSE=1 -- --quick
}

# The project's kernels. The CUDA objects keep ptxas's report (make GPU=1);
# the launches are those of launch_log_runs' two runs.
if ! bash scripts/find_cuda.sh >"$tmp/find_cuda.out" 2>&1; then
    echo "# SKIP the project's kernels: no CUDA toolkit here ($(tail -n 1 "$tmp/find_cuda.out"))"
    launch_log_runs
    exit $failed
fi
if ! make -s GPU=1 -j2 cuda-objects >"$tmp/make.out" 2>&1; then
    not_ok cuda_objects "$(tail -n 5 "$tmp/make.out" | tr '\n' ' ')"
    exit 1
fi
# Every program gpu_check.sh's build section makes on a lent GPU (its C files
# too, compiled with -DTG_CUDA as nowhere else here): a test file that only
# the emulation's build compiled once cost the GPU build its kernel checks.
gpu_programs=(all build/gpu/test_cuda_kernels build/gpu/test_nccl build/gpu/bench_attention build/gpu/bench_copy
    build/gpu/test_tma build/gpu/hopper_check build/gpu/bench_wgmma)
if make -s GPU=1 -j2 "${gpu_programs[@]}" >"$tmp/programs.out" 2>&1; then ok gpu_check_build_programs_build
else not_ok gpu_check_build_programs_build "$(grep -m3 -E "error|Error" "$tmp/programs.out" | tr '\n' ' ')"; fi
# Hopper's wrappers (kernels/cuda/mbarrier.cuh, tma.cuh) in tests/emu/test_tma.cu's kernels, as ptxas
# takes them for sm_90a: every one compiles, setmaxnreg is honoured (ptxas ignores it, C7508, in a
# kernel whose registers at entry it cannot fix: __launch_bounds__(threads, 1)), nothing spills
nvcc_bin=$(make -s --no-print-directory GPU=1 print-NVCC)
if "$nvcc_bin" -std=c++17 -O3 -I. -gencode arch=compute_90a,code=sm_90a --resource-usage -c tests/emu/test_tma.cu \
    -o "$tmp/test_tma.o" >"$tmp/tma_ptxas.out" 2>&1 && grep -q "bytes smem" "$tmp/tma_ptxas.out" &&
    ! grep -q "setmaxnreg' ignored" "$tmp/tma_ptxas.out" && ! grep -qE "[1-9][0-9]* bytes spill" "$tmp/tma_ptxas.out"; then
    ok hopper_wrappers_compile_for_sm_90a
else not_ok hopper_wrappers_compile_for_sm_90a "$(grep -m3 -iE "error|ignored|[1-9][0-9]* bytes spill" "$tmp/tma_ptxas.out" | tr '\n' ' ')"; fi
# Hopper's wgmma wrappers (kernels/cuda/wgmma.cuh), every N and form, as
# ptxas compiles them for sm_90a (tests/gpu/hopper_check.cu; the GPU runs it)
if make -s GPU=1 build/gpu/hopper_check >"$tmp/hopper.out" 2>&1 &&
    grep -q "Compiling entry function '_Z13shapes_kernelILi16E.*for 'sm_90a'" build/gpu/hopper_check.ptxas &&
    grep -q "Compiling entry function '_Z14product_kernelILi256E.*for 'sm_90a'" build/gpu/hopper_check.ptxas &&
    ! grep -qE "[1-9][0-9]* bytes spill" build/gpu/hopper_check.ptxas
then ok hopper_check_wgmma_compiles_for_sm_90a
else not_ok hopper_check_wgmma_compiles_for_sm_90a "$(tail -n 5 "$tmp/hopper.out" | tr '\n' ' ')"; fi
# bench_wgmma's rate kernels (tests/gpu/bench_wgmma.cu): all 22 shapes compile for sm_90a, nothing
# spills, and ptxas serializes no product for want of registers (C7512: the rates would be of that)
if make -s GPU=1 build/gpu/bench_wgmma >"$tmp/bench_wgmma.out" 2>&1 &&
    [ "$(grep -c "Compiling entry function '_Z11rate_kernelILi.*for 'sm_90a'" build/gpu/bench_wgmma.ptxas)" = 22 ] &&
    ! grep -qE "[1-9][0-9]* bytes spill|C7512" build/gpu/bench_wgmma.ptxas
then ok bench_wgmma_compiles_for_sm_90a_unserialized
else not_ok bench_wgmma_compiles_for_sm_90a_unserialized "$(grep -m3 -E "error|spill|C75" "$tmp/bench_wgmma.out" build/gpu/bench_wgmma.ptxas | tr '\n' ' ')"; fi
launch_log_runs
"$py" "$checker" --build build/gpu --launches "$log" --check || failed=1
"$py" "$checker" --build build/gpu --launches "$log" >"$tmp/table.txt" 2>&1 && sed 's/^/# /' "$tmp/table.txt"
exit $failed
