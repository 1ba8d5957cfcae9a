#!/usr/bin/env bash
# Finds CUDA (nvcc, runtime), cuBLAS/cuBLASLt and NCCL for `make GPU=1` and
# prints them as make variables. Looks in $CUDA_HOME / $NCCL_HOME, the usual
# install paths, and the NVIDIA wheels a PyTorch installation carries
# (site-packages/nvidia/...). Names whatever is missing and exits 1.
set -u

site_dirs() {
    for py in python3 /usr/bin/python3 /opt/torch/.venv/bin/python3; do
        command -v "$py" >/dev/null 2>&1 || continue
        "$py" - <<'PY' 2>/dev/null
import sys, os
for p in sys.path:
    d = os.path.join(p, "nvidia")
    if os.path.isdir(d): print(d)
PY
    done | sort -u
}

cuda_roots=()
[ -n "${CUDA_HOME:-}" ] && cuda_roots+=("$CUDA_HOME")
[ -n "${CUDA_PATH:-}" ] && cuda_roots+=("$CUDA_PATH")
nvcc_path=$(command -v nvcc 2>/dev/null || true)
[ -n "$nvcc_path" ] && cuda_roots+=("$(dirname "$(dirname "$(readlink -f "$nvcc_path")")")")
cuda_roots+=(/usr/local/cuda /opt/cuda /usr/lib/cuda /usr)
nccl_roots=()
[ -n "${NCCL_HOME:-}" ] && nccl_roots+=("$NCCL_HOME")
mapfile -t wheels < <(site_dirs)

# find_one KIND NAME: the first file called NAME (a glob) under the roots.
find_in() {
    local name=$1; shift
    local d f
    for d in "$@"; do
        [ -d "$d" ] || continue
        for f in "$d"/$name; do [ -e "$f" ] && { echo "$f"; return 0; }; done
    done
    return 1
}
find_header() {
    local h=$1; shift
    local dirs=() r
    for r in "$@"; do dirs+=("$r/include" "$r/targets/x86_64-linux/include" "$r/targets/sbsa-linux/include"); done
    dirs+=(/usr/include)
    for r in "${wheels[@]}"; do while IFS= read -r d; do dirs+=("$d"); done < <(find "$r" -maxdepth 4 -type d -name include 2>/dev/null); done
    find_in "$h" "${dirs[@]}"
}
find_lib() {
    local l=$1; shift
    local dirs=() r
    for r in "$@"; do dirs+=("$r/lib64" "$r/lib" "$r/targets/x86_64-linux/lib" "$r/targets/sbsa-linux/lib"); done
    dirs+=(/usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib/aarch64-linux-gnu)
    for r in "${wheels[@]}"; do while IFS= read -r d; do dirs+=("$d"); done < <(find "$r" -maxdepth 4 -type d -name lib 2>/dev/null); done
    find_in "lib$l.so" "${dirs[@]}" || find_in "lib$l.so.[0-9]*" "${dirs[@]}"
}

missing=()
nvcc=$(find_in "bin/nvcc" "${cuda_roots[@]}") || missing+=("nvcc (the CUDA compiler: set CUDA_HOME or put nvcc on PATH)")
declare -A inc lib
for h in cuda_runtime_api.h cublasLt.h cublas_v2.h; do
    inc[$h]=$(find_header "$h" "${cuda_roots[@]}") || missing+=("$h (CUDA/cuBLAS headers: set CUDA_HOME)")
done
inc[nccl.h]=$(find_header nccl.h "${nccl_roots[@]}" "${cuda_roots[@]}") || missing+=("nccl.h (NCCL headers: set NCCL_HOME)")
for l in cudart cublas cublasLt; do
    lib[$l]=$(find_lib "$l" "${cuda_roots[@]}") || missing+=("lib$l.so (set CUDA_HOME)")
done
lib[nccl]=$(find_lib nccl "${nccl_roots[@]}" "${cuda_roots[@]}") || missing+=("libnccl.so (NCCL: set NCCL_HOME)")

if [ ${#missing[@]} -gt 0 ]; then
    echo "make GPU=1: cannot find:" >&2
    for m in "${missing[@]}"; do echo "  - $m" >&2; done
    exit 1
fi

incs=$(for h in "${!inc[@]}"; do dirname "${inc[$h]}"; done | sort -u | sed 's/^/-I/' | tr '\n' ' ')
libs="" rpaths=""
for l in cudart cublas cublasLt nccl; do
    libs+="${lib[$l]} "
    rpaths+="-Wl,-rpath,$(dirname "${lib[$l]}") "
done
echo "NVCC = $nvcc"
echo "CUDA_INCLUDES = $incs"
echo "CUDA_LIBS = $libs$(echo "$rpaths" | tr ' ' '\n' | sort -u | tr '\n' ' ')"
