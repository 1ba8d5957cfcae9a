#!/usr/bin/env python3
"""PyTorch's causal attention (F.scaled_dot_product_attention, bf16) timed alone
at the benchmark models' shapes: the reference for train_gpt's flash attention,
whose own time per call the per-op timer gives (out.op_times).

    python3 scripts/attention_reference.py [--flops]

Forward, and forward with backward, each the median of 20 calls after 5
warm-ups, with min and max, by CUDA events; TFLOP/s counts the causal half of
the products, as results/gpu/*/README.md does: forward 2 B NH T^2 HS (Q K^T and
P V), backward 2.5 times that. --flops prints the counts and stops (no GPU
needed). Without a CUDA device it says so and exits 0 (nothing timed).
"""
import statistics
import sys

SHAPES = [  # name, B, NH, T, HS: the per-op tables' shapes
    ("gpt2_124m gb16", 16, 12, 1024, 64),
    ("megatron_1.2b gb8", 8, 16, 1024, 96),
]


def forward_flops(B, NH, T, HS):
    return 2 * B * NH * T * T * HS


def time_ms(fn, warmup=5, runs=20):
    import torch
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), min(times), max(times)


def main():
    if "--flops" in sys.argv[1:]:
        for name, B, NH, T, HS in SHAPES:
            flops = forward_flops(B, NH, T, HS)
            print(f"{name}: forward {flops:.4e} FLOP a layer, backward {2.5 * flops:.4e}")
        return 0
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print(f"attention_reference: no torch for {sys.executable}; nothing timed")
        return 0
    if not torch.cuda.is_available():
        print("attention_reference: no CUDA device; nothing timed")
        return 0
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}; causal SDPA, bf16")
    print("shape | forward ms (min-max) | TFLOP/s | forward+backward ms (min-max) | TFLOP/s")
    for name, B, NH, T, HS in SHAPES:
        q, k, v = (torch.randn(B, NH, T, HS, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        dout = torch.randn(B, NH, T, HS, device="cuda", dtype=torch.bfloat16)

        def forward():
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=True)

        def both():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            out.backward(dout)

        fwd, both_t, flops = time_ms(forward), time_ms(both), forward_flops(B, NH, T, HS)
        print(f"{name} (B {B}, NH {NH}, T {T}, HS {HS}) | {fwd[0]:.3f} ({fwd[1]:.3f}-{fwd[2]:.3f}) | {flops / fwd[0] / 1e9:.0f}"
              f" | {both_t[0]:.3f} ({both_t[1]:.3f}-{both_t[2]:.3f}) | {3.5 * flops / both_t[0] / 1e9:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
