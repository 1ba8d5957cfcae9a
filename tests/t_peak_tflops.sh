#!/usr/bin/env bash
# The one peak-TFLOP/s table (kernels/backend.c): `train_gpt --peak-tflops`
# answers from it, with data-sheet values, and the benchmark
# (scripts/bench_torch.py) and the sweeps (scripts/scaling/common.sh) get
# their peaks from the binary rather than from copies of the table.
# Prints "ok NAME" or "not ok NAME - reason" per check.
# cost: 10 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
source "$(dirname "$0")/lib.sh" peak_tflops

# expect NAME WANT ARGS...: train_gpt --peak-tflops ARGS prints WANT, exit 0
expect() {
    local name="$1" want="$2" got rc
    shift 2
    got=$("$bin" --peak-tflops "$@" 2>&1); rc=$?
    if [ $rc -eq 0 ] && [ "$got" = "$want" ]; then ok "$name"; else not_ok "$name" "got '$got' (exit $rc), want '$want'"; fi
}
expect h100_sxm_bf16 989 "NVIDIA H100 80GB HBM3"
expect h100_pcie_bf16 756 "NVIDIA H100 PCIe" bf16
expect h100_sxm_fp32 67 "NVIDIA H100 80GB HBM3" fp32
expect a100_bf16 312 "NVIDIA A100-SXM4-80GB"
expect a10g_bf16 70 "NVIDIA A10G"
expect a10_bf16 125 "NVIDIA A10"
expect unknown_is_zero 0 "Some Other GPU"

for bad in "" "fp16"; do
    args=(--peak-tflops "NVIDIA A100")
    [ -n "$bad" ] && args+=("$bad") || args=(--peak-tflops)
    err=$("$bin" "${args[@]}" 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 2 ] && [[ "$err" == *"--peak-tflops"* ]]; then ok "bad_args_${bad:-missing_name}"
    else not_ok "bad_args_${bad:-missing_name}" "exit $rc, '$err'"; fi
done

# The sweeps' sc_gpu_peak asks the binary (empty when unknown).
source scripts/scaling/common.sh
got=$(sc_gpu_peak "NVIDIA A10G" "$bin")/$(sc_gpu_peak "Some Other GPU" "$bin")
[ "$got" = "70/" ] && ok scaling_peak_from_binary || not_ok scaling_peak_from_binary "got '$got', want '70/'"

# bench_torch.py's peak_of asks the binary (without torch, a stand-in
# package with what the module's top level touches).
if ! "$py" -c 'import torch' 2>/dev/null; then
    mkdir -p "$tmp/stub/torch/nn" "$tmp/stub/torch/utils"
    touch "$tmp/stub/torch/__init__.py" "$tmp/stub/torch/nn/functional.py" "$tmp/stub/torch/utils/__init__.py" \
          "$tmp/stub/torch/utils/checkpoint.py"
    echo 'class Module: pass' >"$tmp/stub/torch/nn/__init__.py"
fi
got=$(TRAIN_GPT="$bin" PYTHONPATH="$tmp/stub" "$py" -c '
import importlib.util, sys
spec = importlib.util.spec_from_file_location("bench_torch", "scripts/bench_torch.py")
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
print(m.peak_of("NVIDIA A10G"), m.peak_of("Some Other GPU"), hasattr(m, "PEAK_BF16"))' 2>&1)
[ "$got" = "70.0 0.0 False" ] && ok bench_torch_peak_from_binary || not_ok bench_torch_peak_from_binary "got '$got'"
exit $failed
