#!/usr/bin/env bash
# Builds build/emu/test_cuda_kernels_emu: the CUDA checks of tests/kernels against
# the CUDA backend (kernels/cuda/*.cu, ops_cuda.c) executed on the CPU by the
# emulation in tests/emu (no GPU, no CUDA toolkit). Run from anywhere:
#   bash tests/emu/build.sh            # then build/emu/test_cuda_kernels_emu --quick
# Environment:
#   EMU_FMA=1    compile the .cu files with -mfma -ffp-contract=fast, as nvcc
#                contracts a*b+c into FMAs by default (__f*_rn stay unfused)
#   EMU_ASAN=1   AddressSanitizer on everything (out-of-bounds kernel accesses)
#   EMU_RACE=1   the data-race check (tests/emu/emu_race.cpp): the kernels are
#                compiled with gcc's -fsanitize=thread instrumentation, served by
#                our own runtime, which knows the emulated threads and barriers
#   OUT=dir      output directory (default build/emu, or build/emu-fma, build/emu-asan)
# A build whose inputs are unchanged since the last one into OUT is skipped
# (below); `build.sh --print-key` prints the key it compares.
# Run time (environment of the binary): EMU_REVERSE=1 runs blocks and threads
# in reverse order; EMU_GEMM_DOUBLE=1 accumulates emulated GEMMs in double;
# EMU_VERBOSE=1 logs every launch; EMU_LAUNCH_LOG=FILE appends each distinct one to FILE;
# EMU_LT_NO_EPILOGUE=1 makes cuBLASLt refuse every epilogue; EMU_LAZY=1|2 runs stream work
# only when the host waits for it (2: other streams run ahead, tests/emu/emu_lazy.cpp); EMU_SCRATCH_BYTES=N shrinks the scratch; EMU_MALLOC_FILL=N fills cudaMalloc'd memory
# with byte N (default 255: NaN).
set -euo pipefail
cd "$(dirname "$0")/../.."
suffix=""
[ "${EMU_FMA:-0}" = 1 ] && suffix="$suffix-fma"
[ "${EMU_ASAN:-0}" = 1 ] && suffix="$suffix-asan"
[ "${EMU_RACE:-0}" = 1 ] && suffix="$suffix-race"
OUT=${OUT:-build/emu$suffix}
mkdir -p "$OUT/cu" "$OUT/obj"

CC=${CC:-gcc}
CXX=${CXX:-g++}
OPT=${OPT:--O2}
# Line tables only (-g1): the race check's and AddressSanitizer's reports name
# files and lines from them, and full debug information (-g) took a quarter
# of the compile time (EMU_DEBUG=-g for a debugger).
DBG=${EMU_DEBUG:--g1}
SAN=""
[ "${EMU_ASAN:-0}" = 1 ] && SAN="-fsanitize=address -fno-omit-frame-pointer $DBG"
# The CPU side exactly as the Makefile builds it (plus -DTG_CUDA).
CFLAGS="-O3 -std=c11 -D_GNU_SOURCE -fopenmp -Wall -Wextra -I. -DTG_CUDA $SAN"
EMU_INC="-Itests/emu/include"
CUFLAGS="$OPT $DBG -std=c++17 -Wall -Wextra -Wno-unused-parameter -Wno-unknown-pragmas -I. $EMU_INC -include tests/emu/cuda_emu.h -D__CUDACC__ -DTG_CUDA $SAN"
if [ "${EMU_FMA:-0}" = 1 ]; then CUFLAGS="$CUFLAGS -mfma -ffp-contract=fast"; else CUFLAGS="$CUFLAGS -ffp-contract=off"; fi
# The race check instruments the device code only (compile, not link: the
# __tsan_* calls land in tests/emu/emu_race.cpp, not in libtsan).
RACE_OBJ=()
if [ "${EMU_RACE:-0}" = 1 ]; then
    CUFLAGS="$CUFLAGS -fsanitize=thread --param=tsan-instrument-func-entry-exit=0"
    RACE_OBJ=("$OUT/obj/emu_race.o" "$OUT/obj/emu_race_clock.o" "$OUT/obj/emu_race_atomic.o")
fi

# The build is skipped when its inputs are unchanged since the last complete
# build into $OUT: the test suites each ask for it (about a minute of CPU on
# two cores), and would otherwise compile the same sources up to six times.
# The key: every file the compilers may read (the sources, the emulation, the
# tests' headers, this script), the flags and the compilers' versions; a
# build of a mode needs the last one to have been of it or a larger one
# (checks < kernels < train). A build in progress
# holds $OUT.lock, so that two calls at once wait for one build instead of
# writing the same objects.
# Modes: `checks` builds the kernel checks alone (what the AddressSanitizer
# suite runs), `kernels` (the default) also the benchmarks and the emulator's
# own tests, `train` also the trainer and the NCCL test. The race check's
# build (EMU_RACE=1) makes only what runs under it (tests/t_cuda_emu_sanitizers.sh):
# of the benchmarks bench_wgmma, of the emulator's tests its own (test_race).
mode=kernels products=(test_cuda_kernels_emu bench_attention_emu hopper_check_emu bench_wgmma_emu)
[ "${EMU_RACE:-0}" = 1 ] && products=(test_cuda_kernels_emu bench_wgmma_emu test_emu_race)
case "${1:-}" in
    checks) mode=checks products=(test_cuda_kernels_emu) ;;
    train) mode=train products+=(train_gpt_emu test_nccl_emu) ;;
esac
mode_rank() { case "$1" in checks) echo 0 ;; kernels) echo 1 ;; train) echo 2 ;; *) echo -1 ;; esac; }
exec 9>"$OUT.lock"
flock 9
sources_key() { # what every compile may read, and the compilers
    {
        find kernels data model parallel train util tests/emu tests/kernels \
            -type f ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum
        sha256sum train_gpt.c Makefile tests/*.h tests/*.c tests/gpu/bench_attention*.[ch] tests/gpu/block_profile.[ch] tests/gpu/hopper_check.cu tests/gpu/bench_wgmma.cu
        "$CC" --version | head -n 1
        "$CXX" --version | head -n 1
    } | sha256sum | cut -d' ' -f1
}
inputs_key() { # $1: the sources' key
    printf '%s\n' "$1" "$CC" "$CXX" "$OPT" "$SAN" "$CFLAGS" "$CUFLAGS" "${EMU_RACE:-0}" | sha256sum | cut -d' ' -f1
}
src_key=$(sources_key)
key=$(inputs_key "$src_key")
[ "${1:-}" = --print-key ] && { echo "$key"; exit 0; }
stamp="$OUT/inputs.stamp"
up_to_date() {
    [ -f "$stamp" ] && grep -qx "key $key" "$stamp" || return 1
    [ "$(mode_rank "$(sed -n 's/^mode //p' "$stamp")")" -ge "$(mode_rank $mode)" ] || return 1
    local p
    for p in "${products[@]}"; do [ -x "$OUT/$p" ] || return 1; done
}
if up_to_date; then
    echo "build.sh: $OUT is up to date (its inputs are unchanged since its last build)"
    exit 0
fi
rm -f "$stamp"

objs=()
pids=()
# An object whose compile (command line, sources, compilers) is the same as
# one already made, here or in another build beside $OUT, is copied, not
# compiled: the race check's build compiles its C files and the emulator's
# runtime exactly as the plain one does (about 60 s of a core in CI, where
# the plain build comes first). OBJ.key holds the key of the compile that
# made OBJ, written once OBJ is complete; another build's objects are read
# only while no build holds its lock (shared: two builds may read at once, as
# the race check's and AddressSanitizer's do in make test-sanitizers).
object_key() { printf '%s\n' "$src_key" "$@" | sha256sum | cut -d' ' -f1; }
reuse_object() { # out key
    local out=$1 key=$2 name sib
    [ -f "$out" ] && [ -f "$out.key" ] && [ "$(<"$out.key")" = "$key" ] && kept=$((kept + 1)) && return 0
    name=$(basename "$out")
    for sib in "$(dirname "$OUT")"/emu*/; do
        sib=${sib%/}
        [ "$sib" -ef "$OUT" ] || [ ! -f "$sib/obj/$name.key" ] && continue
        (flock -s -n 8 && [ "$(<"$sib/obj/$name.key")" = "$key" ] && cp "$sib/obj/$name" "$out.part") 8<"$sib.lock" 2>/dev/null || continue
        mv "$out.part" "$out" && echo "$key" >"$out.key" && copied=$((copied + 1)) && return 0
    done
    return 1
}
copied=0 kept=0
compile() { # out cmd...
    local out=$1 key
    shift
    objs+=("$out")
    key=$(object_key "$@")
    reuse_object "$out" "$key" && return 0
    rm -f "$out.key"
    { "$@" -c -o "$out.part" && mv "$out.part" "$out" && echo "$key" >"$out.key"; } &
    pids+=($!)
}

for cu in kernels/cuda/*.cu; do
    base=$(basename "$cu" .cu)
    python3 tests/emu/prep.py "$cu" "$OUT/cu/$base.cpp"
    compile "$OUT/obj/cu_$base.o" $CXX $CUFLAGS "$OUT/cu/$base.cpp"
done
compile "$OUT/obj/emu_runtime.o" $CXX $OPT $DBG -std=c++17 -Wall -Wextra -fopenmp $EMU_INC $SAN tests/emu/emu_runtime.cpp
[ "${EMU_RACE:-0}" = 1 ] && compile "$OUT/obj/emu_race.o" $CXX $OPT $DBG -std=c++17 -Wall -Wextra $EMU_INC $SAN -Itests/emu tests/emu/emu_race.cpp
[ "${EMU_RACE:-0}" = 1 ] && compile "$OUT/obj/emu_race_clock.o" $CXX $OPT $DBG -std=c++17 -Wall -Wextra $EMU_INC $SAN -Itests/emu tests/emu/emu_race_clock.cpp
[ "${EMU_RACE:-0}" = 1 ] && compile "$OUT/obj/emu_race_atomic.o" $CXX $OPT $DBG -std=c++17 -Wall -Wextra $EMU_INC $SAN -Itests/emu tests/emu/emu_race_atomic.cpp
compile "$OUT/obj/emu_graph.o" $CXX $OPT $DBG -std=c++17 -Wall -Wextra $EMU_INC $SAN -Itests/emu tests/emu/emu_graph.cpp
compile "$OUT/obj/emu_device_memory.o" $CXX $OPT $DBG -std=c++17 -Wall -Wextra $EMU_INC $SAN -Itests/emu tests/emu/emu_device_memory.cpp
compile "$OUT/obj/emu_lazy.o" $CXX $OPT $DBG -std=c++17 -Wall -Wextra $EMU_INC $SAN -Itests/emu tests/emu/emu_lazy.cpp
compile "$OUT/obj/emu_tma.o" $CXX $OPT $DBG -std=c++17 -Wall -Wextra $EMU_INC $SAN -Itests/emu tests/emu/emu_tma.cpp
# the host side of the bulk tensor copies (tensor maps), C as in the GPU build
compile "$OUT/obj/kernels_cuda_tensor_map.o" $CC $CFLAGS $EMU_INC kernels/cuda/tensor_map.c
# the wgmma stand-ins (kernels/cuda/wgmma.cuh), which read operands through kernels/cuda/smem_layout.h
compile "$OUT/obj/emu_wgmma.o" $CXX $OPT $DBG -std=c++17 -Wall -Wextra $EMU_INC $SAN -I. -Itests/emu tests/emu/emu_wgmma.cpp
# ops_cuda.c, with one test hook: EMU_SCRATCH_BYTES (environment, at run
# time) shrinks the kernels' scratch, so that the chunked paths (attention's
# pair and row chunks, the sort chunks of the encoder) run at small sizes.
# Unset, the copy behaves as the original.
hook='x->scratch_bytes = getenv("EMU_SCRATCH_BYTES") && *getenv("EMU_SCRATCH_BYTES") ? (size_t)strtoull(getenv("EMU_SCRATCH_BYTES"), NULL, 0) : CUDA_SCRATCH_BYTES;'
sed "s|x->scratch_bytes = CUDA_SCRATCH_BYTES;|${hook//&/\\&}|" kernels/cuda/ops_cuda.c > "$OUT/cu/ops_cuda.c"
grep -q EMU_SCRATCH_BYTES "$OUT/cu/ops_cuda.c" || echo "build.sh: warning: the EMU_SCRATCH_BYTES hook did not apply" >&2
printf '#line 1 "kernels/cuda/ops_cuda.c"\n' | cat - "$OUT/cu/ops_cuda.c" > "$OUT/cu/ops_cuda.c.tmp" && mv "$OUT/cu/ops_cuda.c.tmp" "$OUT/cu/ops_cuda.c"
compile "$OUT/obj/ops_cuda.o" $CC $CFLAGS $EMU_INC "$OUT/cu/ops_cuda.c"
kernel_src=(kernels/cpu/*.c kernels/backend.c kernels/timed.c kernels/op_work.c kernels/op_rates.c util/rng.c parallel/comm.c parallel/comm_null.c util/err.c)
# TG_CUDA_EMU: the tests may also read the emulation's own counters (tests/emu/emu_hooks.h); the
# emulation's CUDA headers: they may read the backend's state (kernels/cuda/cuda_ctx.h).
for c in "${kernel_src[@]}" tests/kernels/*.c; do
    [ "$c" = tests/kernels/main_cpu.c ] && continue
    test_flags=()
    [[ $c == tests/kernels/* ]] && test_flags=(-DTG_CUDA_EMU "$EMU_INC")
    compile "$OUT/obj/$(echo "$c" | tr / _ | sed 's/\.c$/.o/')" $CC $CFLAGS "${test_flags[@]}" "$c"
done
# The CPU kernels' bf16 flavour (kernels/cpu/act.h), as the Makefile builds it.
for c in kernels/cpu/*.c; do
    [ "$c" = kernels/cpu/gemm.c ] && continue
    compile "$OUT/obj/$(echo "$c" | tr / _ | sed 's/\.c$/.bf16.o/')" $CC $CFLAGS -DTG_CPU_BF16 "$c"
done
# `build.sh train` also builds $OUT/train_gpt_emu: the whole trainer on the
# emulated CUDA backend, with the NCCL communicator over the emulated NCCL of
# communicators whose ranks are processes (tests/emu/emu_nccl.cpp), and
# $OUT/test_nccl_emu (tests/test_nccl.c on it).
kernel_objs=("${objs[@]}")
# $OUT/bench_attention_emu: tests/gpu/bench_attention.c on the emulated backend
# (tests/gpu/README.md; t_bench_attention runs it at small shapes).
bench_src=(bench_attention block_profile bench_attention_profile)
[ $mode = checks ] || [ "${EMU_RACE:-0}" = 1 ] && bench_src=()
for x in "${bench_src[@]}"; do
    $CC $CFLAGS "tests/gpu/$x.c" -c -o "$OUT/obj/$x.o" &
    pids+=($!)
done
if [ $mode = train ]; then
    # The rest of the CPU build's sources, from the Makefile's own list,
    # the NCCL communicator in place of its stub.
    nccl_src=(parallel/comm_nccl.c parallel/comm_nccl_wait.c parallel/comm_nccl_group.c parallel/comm_nccl_create.c
              parallel/comm_nccl_time.c)
    for c in $(make -s --no-print-directory print-LIB_SRC) train_gpt.c; do
        [[ " ${kernel_src[*]} " == *" $c "* ]] && continue
        [ "$c" = parallel/comm_nccl_none.c ] && continue
        compile "$OUT/obj/$(echo "$c" | tr / _ | sed 's/\.c$/.o/')" $CC $CFLAGS "$c"
    done
    for c in "${nccl_src[@]}" tests/test_nccl.c; do
        compile "$OUT/obj/$(echo "$c" | tr / _ | sed 's/\.c$/.o/')" $CC $CFLAGS $EMU_INC "$c"
    done
    for x in emu_nccl emu_nccl_ranks emu_rendezvous; do
        compile "$OUT/obj/$x.o" $CXX $OPT $DBG -std=c++17 -Wall -Wextra $EMU_INC $SAN -Itests/emu "tests/emu/$x.cpp"
    done
fi
# The emulator's own unit tests: the tensor-core product (test_mma.cu), cp.async
# and dynamic shared memory (test_async_copy.cu), CUDA graphs (test_graph.cu),
# Hopper's mbarriers, bulk tensor copies and named barriers (test_tma.cu) and
# wgmma (test_wgmma.cu), fresh device memory (test_memory.cu); and, plain C on the CPU, wgmma's descriptor and
# layout math (test_smem_layout.c).
emu_tests=(mma async_copy graph lazy tma wgmma memory)
# In the race check's build, the check's own (test_race.cu) in their place.
[ "${EMU_RACE:-0}" = 1 ] && emu_tests=(race)
# tests/gpu/hopper_check.cu, the GPU's wgmma check, as $OUT/hopper_check_emu: the
# products the GPU is compared with, on the emulator.
# tests/gpu/bench_wgmma.cu (the tensor core's rate by product shape) as
# $OUT/bench_wgmma_emu: its products and their check, on the emulator.
gpu_programs=(hopper_check bench_wgmma)
[ "${EMU_RACE:-0}" = 1 ] && gpu_programs=(bench_wgmma)
[ $mode = checks ] && emu_tests=() gpu_programs=()
if [ $mode != checks ] && [ "${EMU_RACE:-0}" != 1 ]; then
    $CC $CFLAGS tests/emu/test_smem_layout.c -o "$OUT/test_smem_layout" &
    pids+=($!)
fi
for t in "${emu_tests[@]}"; do
    python3 tests/emu/prep.py "tests/emu/test_$t.cu" "$OUT/cu/test_$t.cpp"
    $CXX $CUFLAGS "$OUT/cu/test_$t.cpp" -c -o "$OUT/obj/test_$t.o" &
    pids+=($!)
done
for x in "${gpu_programs[@]}"; do
    python3 tests/emu/prep.py "tests/gpu/$x.cu" "$OUT/cu/$x.cpp"
    $CXX $CUFLAGS "$OUT/cu/$x.cpp" -c -o "$OUT/obj/$x.o" &
    pids+=($!)
done
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
[ $fail = 0 ] || { echo "build.sh: compilation failed" >&2; exit 1; }
# tests/t_cuda_emu_sanitizers.sh reads this line
echo "build.sh: of ${#objs[@]} objects, $copied copied from builds beside $OUT and $kept kept from the last build here (each made by the same compile), $((${#objs[@]} - copied - kept)) compiled"

# g++ ignores the section attribute of cuda_emu.h's __shared__ on the static
# locals of function templates (they land in .bss, or a .bss.NAME section of
# their own), so those arrays would not be refilled with NaN before each
# block. A kernel file's only zero-initialized statics are its __shared__
# arrays (checked: function-local statics, _ZZ...), so its .bss sections
# are renamed into emu_shared.
shared_into_section() { # object file
    local obj=$1 names stray args=()
    names=$(objdump -h "$obj" | awk '$2 ~ /^\.bss(\.|$)/ {print $2}')
    [ -n "$names" ] || return 0
    stray=$(objdump -t "$obj" | awk 'NF >= 4 && $(NF-2) ~ /^\.bss/ && $(NF-3) == "O" && $NF !~ /^_ZZ/ {print $NF}')
    if [ -n "$stray" ]; then
        echo "build.sh: $obj: zero-initialized statics that are not __shared__ locals: $stray" >&2
        return 1
    fi
    for n in $names; do args+=(--rename-section "$n=emu_shared,alloc,load,data,contents"); done
    objcopy "${args[@]}" "$obj"
}
for o in "$OUT"/obj/cu_*.o; do
    shared_into_section "$o" || exit 1
done
for t in "${emu_tests[@]}"; do
    shared_into_section "$OUT/obj/test_$t.o" || exit 1
done
for x in "${gpu_programs[@]}"; do shared_into_section "$OUT/obj/$x.o" || exit 1; done
$CXX -fopenmp $SAN "${kernel_objs[@]}" -o "$OUT/test_cuda_kernels_emu" -lm
echo "built $OUT/test_cuda_kernels_emu"
if [ ${#bench_src[@]} -gt 0 ]; then
    bench_objs=()
    for o in "${kernel_objs[@]}"; do [[ $o == *tests_kernels_* ]] || bench_objs+=("$o"); done
    for x in "${bench_src[@]}"; do bench_objs+=("$OUT/obj/$x.o"); done
    $CXX -fopenmp $SAN "${bench_objs[@]}" -o "$OUT/bench_attention_emu" -lm
    echo "built $OUT/bench_attention_emu"
fi
for t in "${emu_tests[@]}"; do
    extra=()
    [ "$t" = tma ] || [ "$t" = race ] && extra=("$OUT/obj/kernels_cuda_tensor_map.o" "$OUT/obj/util_err.o")
    $CXX -fopenmp $SAN "$OUT/obj/test_$t.o" "$OUT/obj/emu_runtime.o" "$OUT/obj/emu_device_memory.o" "$OUT/obj/emu_graph.o" "$OUT/obj/emu_lazy.o" \
        "$OUT/obj/emu_tma.o" "$OUT/obj/emu_wgmma.o" "${extra[@]}" "${RACE_OBJ[@]}" -o "$OUT/test_emu_$t" -lm
    echo "built $OUT/test_emu_$t"
done
for x in "${gpu_programs[@]}"; do
    $CXX -fopenmp $SAN "$OUT/obj/$x.o" "$OUT/obj/emu_runtime.o" "$OUT/obj/emu_device_memory.o" "$OUT/obj/emu_graph.o" "$OUT/obj/emu_lazy.o" \
        "$OUT/obj/emu_tma.o" "$OUT/obj/emu_wgmma.o" "${RACE_OBJ[@]}" -o "$OUT/${x}_emu" -lm
    echo "built $OUT/${x}_emu"
done
if [ $mode = train ]; then
    train_objs=() nccl_test_objs=()
    for o in "${objs[@]}"; do
        [[ $o == *tests_kernels_* ]] && continue
        [[ $o == */tests_test_nccl.o ]] || train_objs+=("$o")
        [[ $o == */train_gpt.o ]] || nccl_test_objs+=("$o")
    done
    libs=(-lcjson -lnuma -lpcre2-8 -lxxhash -lm -lrt -lpthread)
    $CXX -fopenmp $SAN "${train_objs[@]}" -o "$OUT/train_gpt_emu" "${libs[@]}"
    echo "built $OUT/train_gpt_emu"
    $CXX -fopenmp $SAN "${nccl_test_objs[@]}" -o "$OUT/test_nccl_emu" "${libs[@]}"
    echo "built $OUT/test_nccl_emu"
fi
# The stamp only if no input changed while it compiled.
if [ "$(inputs_key "$(sources_key)")" = "$key" ]; then printf 'key %s\nmode %s\n' "$key" "$mode" >"$stamp"
else echo "build.sh: an input changed during the build; the next call builds again" >&2; fi
