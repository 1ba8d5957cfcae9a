#!/usr/bin/env bash
# Builds karpathy/llm.c's train_gpt2cu, for scripts/bench_gpu.sh's llm.c row, from
# a source tree the user gives (never vendored: it stays where they keep it,
# e.g. the git-ignored .peer/llm.c, and is only read) into a build folder of
# ours, with the fastest build this machine allows:
#   cuDNN   make train_gpt2cu USE_CUDNN=1 ...  (flash attention through cuDNN) when
#           cuDNN (cudnn.h, libcudnn) and the cudnn-frontend headers are found;
#           if that build fails, the plain one
#   plain   make train_gpt2cu ...              (llm.c's own attention kernels)
# both with GPU_COMPUTE_CAPABILITY set (llm.c's Makefile means to read it from
# nvidia-smi, but its test `$(which ...)` is a make variable, always empty, so
# without it nvcc builds for its default architecture), NO_MULTI_GPU=1
# NO_USE_MPI=1 (one GPU; nothing to link for NCCL or MPI), and
# NVCC_APPEND_FLAGS=-include scripts/llmc_cuda13_compat.h (llm.c does not
# compile with CUDA 13 otherwise; the header says why).
#   scripts/build_llmc.sh SRC BUILD_DIR
# BUILD_DIR gets train_gpt2cu, build.txt (key=value lines: build, make, source,
# commit, sha256, ld_library_path) and the make logs. An existing build of the
# same source with the same command is kept. Environment: NVCC (default
# build/gpu/cuda.mk's, else nvcc on PATH, else /usr/local/cuda/bin/nvcc),
# GPU_COMPUTE_CAPABILITY (default nvidia-smi's compute_cap, e.g. 90),
# CUDNN_FRONTEND_PATH (cudnn-frontend's include folder; else ~/cudnn-frontend,
# SRC/cudnn-frontend or .peer/cudnn-frontend), LLMC_CUDNN=0 (plain build only).
# Exit 0 when built, 1 when not, 2 on bad arguments.
set -uo pipefail
prog=build_llmc
root="$(cd "$(dirname "$0")/.." && pwd)"
die() { echo "$prog: error: $*" >&2; exit 2; }
fail() { echo "$prog: $*" >&2; exit 1; }
say() { echo "$prog: $*"; }

[ $# -eq 2 ] || die "usage: scripts/build_llmc.sh SRC BUILD_DIR (SRC: llm.c's source tree)"
src="$1" out="$2"
[ -d "$src" ] || die "SRC $src: no such directory (llm.c's source tree)"
for f in Makefile train_gpt2.cu llmc; do
    [ -e "$src/$f" ] || die "SRC $src has no $f: not llm.c's source tree (karpathy/llm.c)"
done
src="$(cd "$src" && pwd -P)"
out="$(realpath -m "$out")"
case "$out/" in "$src"/*) die "BUILD_DIR $out is inside SRC $src: llm.c's tree is only read" ;; esac
mkdir -p "$out" || fail "cannot create $out"

# ---- the toolchain ---------------------------------------------------------
nvcc="${NVCC:-}"
[ -n "$nvcc" ] || nvcc=$(sed -n 's/^NVCC = //p' "$root/build/gpu/cuda.mk" 2>/dev/null)
[ -n "$nvcc" ] || nvcc=$(command -v nvcc 2>/dev/null)
[ -n "$nvcc" ] || nvcc=/usr/local/cuda/bin/nvcc
[ -x "$nvcc" ] || fail "no nvcc at '$nvcc' (set NVCC)"
cuda_root="$(dirname "$(dirname "$(readlink -f "$nvcc")")")"
cc="${GPU_COMPUTE_CAPABILITY:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')}"
[[ "$cc" =~ ^[0-9]+a?$ ]] || fail "no GPU compute capability: nvidia-smi gives none; set GPU_COMPUTE_CAPABILITY (e.g. 90 for an H100)"

# The NVIDIA wheels of a PyTorch installation (site-packages/nvidia/*), where
# cuBLAS and cuDNN may live on a machine without a CUDA toolkit's copies.
wheel_dirs() {
    local py
    for py in python3 /usr/bin/python3; do
        command -v "$py" >/dev/null 2>&1 || continue
        "$py" -c 'import os, sys
for p in sys.path:
    d = os.path.join(p, "nvidia")
    if os.path.isdir(d):
        print(d)' 2>/dev/null
    done | sort -u
}
mapfile -t wheels < <(wheel_dirs)
# search_dirs KIND: include or lib folders of the toolkit, the system and the wheels
search_dirs() {
    local kind=$1 w
    if [ "$kind" = include ]; then
        echo "$cuda_root/include"; echo "$cuda_root/targets/x86_64-linux/include"; echo /usr/include
        echo /usr/include/x86_64-linux-gnu
    else
        echo "$cuda_root/lib64"; echo "$cuda_root/lib"; echo "$cuda_root/targets/x86_64-linux/lib"
        echo /usr/lib/x86_64-linux-gnu; echo /usr/lib64
    fi
    for w in "${wheels[@]}"; do find "$w" -maxdepth 2 -type d -name "$kind" 2>/dev/null; done
}
# find_file KIND GLOB...: the first file matching a GLOB in a KIND folder
find_file() {
    local kind=$1 d g f
    shift
    while IFS= read -r d; do
        for g in "$@"; do
            for f in "$d"/$g; do [ -e "$f" ] && { echo "$f"; return 0; }; done
        done
    done < <(search_dirs "$kind")
    return 1
}

# llm.c links with -lcublas -lcublasLt -lnvidia-ml (and -lcudnn): a folder of
# unversioned names for whatever versioned files this machine has.
linkdir="$out/lib"
rm -rf "$linkdir" && mkdir -p "$linkdir"
rundirs=()
link_as() { # NAME FILE: FILE answers -lNAME; its folder joins the run-time path
    ln -sf "$(readlink -f "$2")" "$linkdir/lib$1.so"
    rundirs+=("$(dirname "$2")")
}
for l in cublas cublasLt; do
    f=$(find_file lib "lib$l.so" "lib$l.so.[0-9]*") || fail "no lib$l.so (cuBLAS) under $cuda_root or the NVIDIA wheels"
    link_as "$l" "$f"
done
# NVML: only its library is needed to link (llm.c's NVML calls are compiled in
# only with nvml.h); the toolkit's stub or the driver's library, else an empty
# stand-in with the driver's soname when there is no nvml.h either.
if f=$(find_file lib libnvidia-ml.so stubs/libnvidia-ml.so libnvidia-ml.so.1) ||
   f=$(ldconfig -p 2>/dev/null | sed -n 's/^.*libnvidia-ml\.so\.1 .*=> //p' | head -n 1 | grep .); then
    ln -sf "$(readlink -f "$f")" "$linkdir/libnvidia-ml.so"
elif ! find_file include nvml.h >/dev/null; then
    echo 'void llmc_bench_nvml_stand_in(void) {}' >"$linkdir/nvml_stand_in.c"
    "${CC:-cc}" -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o "$linkdir/libnvidia-ml.so" "$linkdir/nvml_stand_in.c" ||
        fail "could not make a stand-in libnvidia-ml.so"
else
    fail "nvml.h is there but no libnvidia-ml.so (NVML) to link llm.c with"
fi

# ---- cuDNN, if everything it needs is here --------------------------------
frontend=""
for d in "${CUDNN_FRONTEND_PATH:-}" "${HOME:-/nonexistent}/cudnn-frontend/include" "$src/cudnn-frontend/include" \
         "$root/.peer/cudnn-frontend/include"; do
    [ -n "$d" ] && [ -f "$d/cudnn_frontend.h" ] && { frontend="$(cd "$d" && pwd)"; break; }
done
cudnn_why=""
if [ "${LLMC_CUDNN:-1}" = 0 ]; then cudnn_why="LLMC_CUDNN=0"
elif [ -z "$frontend" ]; then cudnn_why="no cudnn-frontend headers (CUDNN_FRONTEND_PATH, ~/cudnn-frontend/include, $src/cudnn-frontend/include, .peer/cudnn-frontend/include)"
elif ! cudnn_h=$(find_file include cudnn.h); then cudnn_why="no cudnn.h"
elif ! cudnn_so=$(find_file lib libcudnn.so libcudnn.so.[0-9]*); then cudnn_why="no libcudnn.so"
else link_as cudnn "$cudnn_so"
fi

# ---- the build ------------------------------------------------------------
identity() { # the llm.c source: its commit when a git checkout, and a hash of what the build reads
    echo "source=$src"
    # its own checkout only: a copy inside another repository (.peer/llm.c) is not one
    if [ "$(git -C "$src" rev-parse --show-toplevel 2>/dev/null)" = "$src" ]; then
        echo "commit=$(git -C "$src" rev-parse HEAD)"
    else
        echo "commit=not a git checkout"
    fi
    echo "sha256=$(cd "$src" && find Makefile train_gpt2.cu llmc -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)"
}
compat="NVCC_APPEND_FLAGS=-include $root/scripts/llmc_cuda13_compat.h${NVCC_APPEND_FLAGS:+ $NVCC_APPEND_FLAGS}"
# build KIND MAKE_ARGS...: make in a fresh copy of what the build reads; 0 when train_gpt2cu came out.
# A build that failed is not tried again with the same source and command.
build() {
    local kind=$1 work="$out/src" stamp envs
    shift
    stamp="$(identity | tail -n 2 | tr '\n' ' ')'$compat' make $*"
    if [ -x "$out/train_gpt2cu" ] && [ "$(sed -n 's/^stamp=//p' "$out/build.txt" 2>/dev/null)" = "$stamp" ]; then
        say "kept the $kind build in $out (the same source and make command)"
        return 0
    fi
    if [ "$(cat "$out/failed_$kind" 2>/dev/null)" = "$stamp" ]; then
        say "no $kind build: it failed before with the same source and command ($out/make_$kind.log)"
        return 1
    fi
    rm -rf "$work" "$out/train_gpt2cu" "$out/build.txt" && mkdir -p "$work" || return 1
    cp -r "$src/Makefile" "$src/train_gpt2.cu" "$src/llmc" "$work/" || return 1
    envs=("$compat" "LIBRARY_PATH=$linkdir${LIBRARY_PATH:+:$LIBRARY_PATH}")
    if [ "$kind" = cudnn ]; then
        # the Makefile wants ./cudnn-frontend/include (or ~/cudnn-frontend/include) to exist
        mkdir -p "$work/cudnn-frontend" && ln -s "$frontend" "$work/cudnn-frontend/include"
        envs+=("CPATH=$(dirname "$cudnn_h")${CPATH:+:$CPATH}")
    fi
    say "$kind build: '$compat' make $* (in $work; log $out/make_$kind.log)"
    if ! (cd "$work" && env "${envs[@]}" make "$@") >"$out/make_$kind.log" 2>&1 || [ ! -x "$work/train_gpt2cu" ]; then
        echo "$stamp" >"$out/failed_$kind"
        say "$kind build failed: $(grep -m 3 -i 'error' "$out/make_$kind.log" | cut -c1-200 | tr '\n' ' ')"
        return 1
    fi
    mv "$work/train_gpt2cu" "$out/train_gpt2cu" || return 1
    { echo "build=$kind"; echo "make='$compat' make $*"; identity
      echo "ld_library_path=$(printf '%s\n' "${rundirs[@]}" | awk '!seen[$0]++' | paste -sd:)"
      echo "stamp=$stamp"; } >"$out/build.txt"
}
common=(train_gpt2cu "NVCC=$nvcc" "GPU_COMPUTE_CAPABILITY=$cc" NO_MULTI_GPU=1 NO_USE_MPI=1)
if [ -z "$cudnn_why" ] && build cudnn "${common[@]}" USE_CUDNN=1 "CUDNN_FRONTEND_PATH=$frontend"; then
    :
else
    [ -n "$cudnn_why" ] && say "no cuDNN build: $cudnn_why"
    build plain "${common[@]}" || fail "llm.c did not build (log: $out/make_plain.log)"
fi
say "built $out/train_gpt2cu: $(sed -n 's/^make=//p' "$out/build.txt")"
