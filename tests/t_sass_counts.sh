#!/usr/bin/env bash
# scripts/sass_counts.py: each kernel's static SASS instruction count from
# an nvcc cubin (16-byte words less the closing self-branch and padding NOPs),
# against a git revision with --base. On a made-up repository: a kernel given
# more work counts more instructions than at its committed revision, a
# kernel left alone counts the same, one store counts a handful; the
# counts are whole and positive; an architecture before sm_70, an unknown
# revision and a missing source are refused with a message. --sass: the
# cubin's ELF header rewritten for older nvdisasm, refused without one, and
# a listing where a developer has one (.devtools/nvdisasm). --loads: the
# longest run of global loads with no branch between, on two made-up
# kernels, then five of the project's memory-bound kernels held to theirs.
# Then one of the project's sources counted, as a developer runs it. Needs
# nvcc (scripts/find_cuda.sh).
# cost: 15 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" sass_counts
counter="$PWD/scripts/sass_counts.py"

if ! bash scripts/find_cuda.sh >"$tmp/find_cuda.out" 2>&1; then
    echo "# SKIP: no CUDA toolkit here ($(tail -n 1 "$tmp/find_cuda.out"))"
    exit 0
fi
NVCC=$(make -s --no-print-directory GPU=1 print-NVCC)
export NVCC

# k.cu with long_kernel's loop unrolled N times
kernels() {
    cat <<CU
__global__ void short_kernel(float *x) { x[threadIdx.x] = 1.0f; }
__global__ void long_kernel(float *x, float y) {
    float a = x[threadIdx.x];
#pragma unroll
    for (int i = 0; i < $1; i++) a = a * y + (float)i;
    x[threadIdx.x] = a;
}
CU
}
repo="$tmp/repo"
mkdir -p "$repo"
kernels 4 >"$repo/k.cu"
git -C "$repo" init -q && git -C "$repo" add k.cu &&
    git -C "$repo" -c user.name=t -c user.email=t@t commit -qm base || { not_ok fixture_repo "git failed"; exit 1; }
kernels 64 >"$repo/k.cu"

# count_of NAME FILE COLUMN: the column of NAME's row
count_of() { awk -v n="$1" -v c="$3" '!/^#/ && index($0, n) { print $c; exit }' "$2"; }
if (cd "$repo" && "$py" "$counter" --base HEAD k.cu) >"$tmp/base.out" 2>&1; then
    now=$(count_of long_kernel "$tmp/base.out" 1) before=$(count_of long_kernel "$tmp/base.out" 2)
    delta=$(count_of long_kernel "$tmp/base.out" 3) short=$(count_of short_kernel "$tmp/base.out" 3)
    if [[ "$now" =~ ^[0-9]+$ && "$before" =~ ^[0-9]+$ && $before -gt 0 && $now -gt $before &&
        "$delta" = "+$((now - before))" ]]; then
        ok "longer_kernel_counts_more ($before -> $now)"
    else not_ok longer_kernel_counts_more "$(tr '\n' ' ' <"$tmp/base.out")"; fi
    if [ "$short" = "+0" ]; then ok kernel_left_alone_counts_the_same
    else not_ok kernel_left_alone_counts_the_same "$(tr '\n' ' ' <"$tmp/base.out")"; fi
    # one store: a handful of instructions (8 from nvcc 13.0), not its 24 words with the closing
    # branch to itself and the padding NOPs
    tiny=$(count_of short_kernel "$tmp/base.out" 1)
    if [[ "$tiny" =~ ^[0-9]+$ ]] && [ "$tiny" -gt 0 ] && [ "$tiny" -lt 16 ]; then ok "padding_not_counted ($tiny)"
    else not_ok padding_not_counted "short_kernel counts '$tiny'"; fi
else not_ok base_run "$(tail -n 3 "$tmp/base.out" | tr '\n' ' ')"; fi

# refused: exit non-zero, and the message names what is wrong
refused() { # NAME PATTERN ARGS...
    local name="$1" pattern="$2"; shift 2
    if (cd "$repo" && "$py" "$counter" "$@") >"$tmp/$name.out" 2>&1; then
        not_ok "$name" "exited 0: $(tr '\n' ' ' <"$tmp/$name.out")"
    elif grep -qE "$pattern" "$tmp/$name.out"; then ok "$name"
    else not_ok "$name" "no \"$pattern\" in: $(tr '\n' ' ' <"$tmp/$name.out")"; fi
}
refused arch_before_sm70_refused "sm_60: the 16-byte instruction count holds from sm_70" --arch sm_60 k.cu
refused unknown_revision_refused "git archive no-such-rev" --base no-such-rev k.cu
refused missing_source_refused "nope.cu: no such file" nope.cu
refused sass_with_base_refused "sass prints one revision's code" --sass --base HEAD k.cu
refused sass_with_loads_refused "one or the other" --sass --loads k.cu

# --loads: a stride loop under `#pragma unroll 4` with a run-time bound keeps its exit test between
# the strides' loads (a run of fewer than 4); the same strides taken 4 at a time, loads first, make
# one run of 4
cat >"$repo/loads.cu" <<'CU'
__global__ void strided_kernel(float *out, const float *x, int n) {
    float acc = 0.0f;
#pragma unroll 4
    for (int i = threadIdx.x; i < n; i += blockDim.x) acc += x[i];
    out[threadIdx.x] = acc;
}
__global__ void grouped_kernel(float *out, const float *x, int n) {
    float acc = 0.0f;
    const int step = blockDim.x;
    int i = threadIdx.x;
    for (; i + 3 * step < n; i += 4 * step) {
        float v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) v[u] = x[i + u * step];
#pragma unroll
        for (int u = 0; u < 4; u++) acc += v[u];
    }
    for (; i < n; i += step) acc += x[i];
    out[threadIdx.x] = acc;
}
CU
if (cd "$repo" && "$py" "$counter" --loads loads.cu) >"$tmp/loads.out" 2>&1; then
    strided=$(count_of strided_kernel "$tmp/loads.out" 1) grouped=$(count_of grouped_kernel "$tmp/loads.out" 1)
    if [[ "$strided" =~ ^[0-9]+$ && "$grouped" =~ ^[0-9]+$ ]] && [ "$grouped" -ge 4 ] && [ "$strided" -lt "$grouped" ]; then
        ok "load_runs_split_by_branches (strided $strided, grouped $grouped)"
    else not_ok load_runs_split_by_branches "$(tr '\n' ' ' <"$tmp/loads.out")"; fi
else not_ok load_runs_split_by_branches "$(tail -n 3 "$tmp/loads.out" | tr '\n' ' ')"; fi

# --sass: the cubin given the ELF header older nvdisasm reads (CUDA 13's OSABI 0x41 and ABI
# version 8 to 0x33 and 7, the SM moved from e_flags bits 8-15 to bits 0-7 and 16-23 beside 0x500),
# its code untouched; a cubin with the old header already, and any other file, unchanged
nvcc_out="$tmp/k.cubin"
if "$NVCC" -arch=sm_90a -cubin "$repo/k.cu" -o "$nvcc_out" >"$tmp/nvcc.out" 2>&1 &&
    out=$("$py" - "$counter" "$nvcc_out" <<'PY' 2>&1
import importlib.util, struct, sys
spec = importlib.util.spec_from_file_location("sass_counts", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
data = open(sys.argv[2], "rb").read()
new = m.legacy_header(data)
flags = struct.unpack_from("<I", new, 0x30)[0]
assert len(new) == len(data), "length"
if data[7] == 0x41:  # a CUDA 13 header: rewritten
    assert (new[7], new[8]) == (0x33, 7), (new[7], new[8])
    assert flags == 0x5A055A, hex(flags)  # sm_90: 0x5a | 0x500 | 0x5a << 16
    assert new[0x34:] == data[0x34:] and new[:7] == data[:7], "only the header's OSABI, version and flags change"
    assert m.legacy_header(new) == new, "an old header is left alone"
else:  # an older nvcc's cubin: left alone
    assert new == data
assert m.legacy_header(b"not an ELF file") == b"not an ELF file"
print("osabi 0x%x -> 0x%x, flags 0x%x" % (data[7], new[7], flags))
PY
    ); then ok "sass_legacy_header ($out)"
else not_ok sass_legacy_header "$(tail -n 3 "$tmp/nvcc.out") ${out:-}"; fi
# without an nvdisasm (none given, none on PATH, none in the made-up repo's .devtools): refused, saying where
# one comes from
plain_path="$(dirname "$NVCC"):/usr/bin:/bin"
if [ -z "$(PATH=$plain_path command -v nvdisasm)" ]; then
    if (cd "$repo" && NVDISASM=/nonexistent PATH=$plain_path "$py" "$counter" --sass k.cu) >"$tmp/nodis.out" 2>&1; then
        not_ok sass_without_nvdisasm_refused "exited 0: $(tr '\n' ' ' <"$tmp/nodis.out")"
    elif grep -q "nvdisasm not found (set NVDISASM" "$tmp/nodis.out" && grep -q "nvidia-cuda-toolkit" "$tmp/nodis.out"; then
        ok sass_without_nvdisasm_refused
    else not_ok sass_without_nvdisasm_refused "$(tr '\n' ' ' <"$tmp/nodis.out")"; fi
else echo "# SKIP: sass_without_nvdisasm_refused (an nvdisasm on $plain_path)"; fi
# with one ($NVDISASM, or this tree's .devtools/nvdisasm: a developer's; CI has none): the made-up
# kernel's code, by name, with its store and exit
dis="${NVDISASM:-$PWD/.devtools/nvdisasm}"
if [ -x "$dis" ]; then
    if (cd "$repo" && NVDISASM=$dis "$py" "$counter" --sass --match short_kernel k.cu) >"$tmp/sass.out" 2>&1 &&
        grep -q '^## short_kernel(float\*)' "$tmp/sass.out" && grep -q 'STG\.E' "$tmp/sass.out" &&
        grep -q 'EXIT' "$tmp/sass.out" && ! grep -q long_kernel "$tmp/sass.out"; then
        ok "sass_listing ($(grep -c '/\*[0-9a-f]*\*/' "$tmp/sass.out") lines of short_kernel's code, padding included)"
    else not_ok sass_listing "$(head -n 5 "$tmp/sass.out" | tr '\n' ' ')"; fi
else echo "# SKIP: sass_listing (no nvdisasm here: NVDISASM unset, no .devtools/nvdisasm)"; fi

# a project source: every GELU kernel listed, with a whole count
if "$py" "$counter" --match gelu kernels/cuda/gelu.cu >"$tmp/gelu.out" 2>&1 &&
    [ "$(grep -cE '^ +[1-9][0-9]*  void .*gelu' "$tmp/gelu.out")" -ge 2 ]; then
    ok "project_source_counted ($(grep -vc '^#' "$tmp/gelu.out") kernels)"
else not_ok project_source_counted "$(tail -n 4 "$tmp/gelu.out" | tr '\n' ' ')"; fi

# The memory-bound kernels whose loads a branch once split (one or a few in flight a thread, where
# their code meant many), held to what their code now gives on nvcc 13.0's sm_90a: the LayerNorm
# backward's held rows (3 a run before, 26 and 14 now), the gradient norm's strides (1, 8), the
# staged cross-entropy's copies (1, 8) and the bias gradient's rows (4, 8)
# min_run FILE NAME MIN
min_run() {
    local got
    got=$(count_of "$2" "$1" 1)
    if [[ "$got" =~ ^[0-9]+$ ]] && [ "$got" -ge "$3" ]; then ok "loads_in_flight: $2 ($got, at least $3)"
    else not_ok "loads_in_flight: $2" "longest run '$got', wanted at least $3"; fi
}
if "$py" "$counter" --loads kernels/cuda/layernorm.cu kernels/cuda/step_stats.cu kernels/cuda/xent.cu \
    kernels/cuda/residual.cu >"$tmp/project_loads.out" 2>&1; then
    min_run "$tmp/project_loads.out" "layernorm_backward_fused_kernel<__nv_bfloat16, 8>" 18
    min_run "$tmp/project_loads.out" "layernorm_backward_fused_kernel<__nv_bfloat16, 4>" 9
    min_run "$tmp/project_loads.out" "sumsq_partials_kernel<false>" 8
    min_run "$tmp/project_loads.out" "fused_staged_kernel<__nv_bfloat16>" 8
    min_run "$tmp/project_loads.out" "column_partials_packed_kernel<__nv_bfloat16>" 8
else not_ok loads_in_flight "$(tail -n 3 "$tmp/project_loads.out" | tr '\n' ' ')"; fi
exit $failed
