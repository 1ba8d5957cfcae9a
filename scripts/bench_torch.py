#!/usr/bin/env python3
"""PyTorch's side of scripts/bench_gpu.sh: times training steps of a plain
GPT-2 of the same shape as a train_gpt config, on one GPU.

The model: tied embeddings over the padded vocabulary (vocab_size rounded up
to a multiple of model.vocab_multiple, as train_gpt pads it), learned
positions, pre-LN blocks, GELU (tanh), causal attention through
torch.nn.functional.scaled_dot_product_attention, biases on every Linear but
the tied LM head. The step: bf16 autocast over fp32 master weights, the mean
cross-entropy, gradient accumulation when global_batch > micro_batch, the
gradient clipped by global norm (train.grad_clip), then fused AdamW (weight
decay on the 2-D tensors only, as train_gpt). Random tokens, made on the
device before the first step.

Timing: CUDA events around each step (data slice to optimizer step), and a
wait at the end of each step (as train_gpt, which logs every step); the
median over steps after --warmup. --compile wraps the model (forward, loss
and backward) in torch.compile; its first step pays for the compilation.
--device cpu (wall clock, no fused AdamW, and a plain softmax attention on
PyTorch without scaled_dot_product_attention) exists to check this file on
a machine without a GPU.

MFU uses train_gpt's formula: flops_per_token = 6*N + 12*n_layer*n_embd*seq_len,
N counting every parameter once over the real (unpadded) vocabulary, against
--peak-tflops (bench_gpu.sh passes the peak train_gpt used) or, without it,
the peak train_gpt reports for the device name (train_gpt --peak-tflops).

  scripts/bench_torch.py --config configs/gpt2_124m.json [--set section.key=value ...]
      [--steps 20] [--warmup 3] [--compile] [--device cuda|cpu] [--peak-tflops X] [--json FILE]
  scripts/bench_torch.py --check     # is there a device? (exit 1 with the reason if not)
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

# train_gpt's defaults (./train_gpt --help) for the keys this file reads
DEFAULTS = {
    "model": {"n_layer": 12, "n_head": 12, "n_embd": 768, "vocab_size": 50257, "vocab_multiple": 128,
              "seq_len": 1024, "dropout": 0.0},
    "train": {"micro_batch": 4, "global_batch": 4, "lr": 6e-4, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.95,
              "eps": 1e-8, "grad_clip": 1.0, "seed": 1337, "recompute": "none"},
}

def peak_of(name):
    """Dense bf16 peak TFLOP/s of a device name from train_gpt's own table
    (`train_gpt --peak-tflops NAME bf16`; the binary is $TRAIN_GPT or the
    repository's ./train_gpt); 0 when the name is unknown or there is no binary."""
    binary = os.environ.get("TRAIN_GPT") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train_gpt")
    try:
        done = subprocess.run([binary, "--peak-tflops", name, "bf16"], capture_output=True, text=True, check=True)
        return float(done.stdout)
    except (OSError, ValueError, subprocess.CalledProcessError):
        return 0.0


def load_config(path, sets):
    cfg = {sec: dict(keys) for sec, keys in DEFAULTS.items()}
    if path:
        with open(path) as f:
            user = json.load(f)
        for sec in cfg:
            cfg[sec].update({k: v for k, v in user.get(sec, {}).items() if k in cfg[sec]})
    for s in sets:
        key, sep, value = s.partition("=")
        sec, dot, name = key.partition(".")
        if not sep or not dot or sec not in cfg or name not in cfg[sec]:
            sys.exit(f"bench_torch: --set {s}: expected section.key=value with a key of {sorted(DEFAULTS)}")
        try:
            cfg[sec][name] = json.loads(value)
        except ValueError:
            cfg[sec][name] = value
    m, t = cfg["model"], cfg["train"]
    if m["n_embd"] % m["n_head"] or t["global_batch"] % t["micro_batch"]:
        sys.exit("bench_torch: n_head must divide n_embd and micro_batch must divide global_batch")
    if t["recompute"] not in ("none", "full"):
        sys.exit(f"bench_torch: train.recompute={t['recompute']}: this benchmark has none and full only")
    return cfg


class Block(nn.Module):
    def __init__(self, C, NH, dropout):
        super().__init__()
        self.n_head, self.dropout = NH, dropout
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def attention(self, q, k, v):
        p = self.dropout if self.training else 0.0
        if hasattr(F, "scaled_dot_product_attention"):
            return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        # PyTorch < 2.0 (the CPU check only): the same attention, unfused
        T = q.size(-2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
        return F.dropout(att.softmax(dim=-1), p) @ v

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (z.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = self.attention(q, k, v).transpose(1, 2).contiguous().view(B, T, C)
        y = self.c_proj(y)
        if self.dropout > 0:
            y = F.dropout(y, self.dropout, self.training)
        x = x + y
        y = self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        if self.dropout > 0:
            y = F.dropout(y, self.dropout, self.training)
        return x + y


class GPT(nn.Module):
    def __init__(self, m, recompute):
        super().__init__()
        L, C = m["n_layer"], m["n_embd"]
        self.V = m["vocab_size"]
        self.Vp = (self.V + m["vocab_multiple"] - 1) // m["vocab_multiple"] * m["vocab_multiple"]
        self.dropout, self.recompute = m["dropout"], recompute == "full"
        self.wte = nn.Embedding(self.Vp, C)
        self.wpe = nn.Embedding(m["seq_len"], C)
        self.h = nn.ModuleList(Block(C, m["n_head"], m["dropout"]) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, self.Vp, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        # GPT-2's init (as train_gpt): normal(0, 0.02), residual projections / sqrt(2L), biases 0
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        if self.dropout > 0:
            x = F.dropout(x, self.dropout, self.training)
        for block in self.h:
            if self.recompute and self.training:
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, self.Vp), targets.view(-1))


def count_params(model):
    """(N over the real vocabulary, as train_gpt counts; N with the padded rows of wte)"""
    padded = sum(p.numel() for p in model.parameters())  # parameters() yields the tied wte once
    return padded - (model.Vp - model.V) * model.wte.weight.size(1), padded


def check(device):
    info = f"torch {torch.__version__} (CUDA {torch.version.cuda})"
    if device == "cuda":
        if not torch.cuda.is_available():
            print(f"bench_torch: {info}: no CUDA device visible to PyTorch")
            return 1
        info += f", {torch.cuda.get_device_name(0)}"
    print(info)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="a train_gpt JSON config (its model and train sections)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override a key")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3, help="steps left out of the median (default 3: from step 4 on)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (forward, loss, backward)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--peak-tflops", type=float, default=0.0, help="device peak for MFU (0: by device name)")
    ap.add_argument("--json", help="write the result here")
    ap.add_argument("--check", action="store_true", help="print torch and device, exit 1 if there is no device")
    args = ap.parse_args()
    if args.check:
        sys.exit(check(args.device))
    if args.steps <= args.warmup:
        sys.exit(f"bench_torch: --steps {args.steps} leaves nothing after --warmup {args.warmup}")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_torch: no CUDA device visible to PyTorch")
    if args.compile and not hasattr(torch, "compile"):
        sys.exit(f"bench_torch: --compile needs PyTorch 2 (this is {torch.__version__})")

    cfg = load_config(args.config, args.set)
    m, t = cfg["model"], cfg["train"]
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    torch.manual_seed(t["seed"])
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    if hasattr(torch, "get_default_device"):  # PyTorch >= 2.3: make the weights on the device
        with dev:
            model = GPT(m, t["recompute"])
    else:
        model = GPT(m, t["recompute"]).to(dev)
    model.train()
    n_real, n_padded = count_params(model)
    decay = [p for p in model.parameters() if p.dim() >= 2]  # wte (= lm_head), wpe, the 4 matrices of each block
    other = [p for p in model.parameters() if p.dim() < 2]
    fused = {"fused": True} if cuda else {}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": t["weight_decay"]}, {"params": other, "weight_decay": 0.0}],
                            lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"], **fused)
    step_model = torch.compile(model) if args.compile else model

    B, GB, T = t["micro_batch"], t["global_batch"], m["seq_len"]
    accum = GB // B
    # one (inputs, targets) pair of separate tensors per micro-batch, so torch.compile sees the same kind of
    # input every time (no views at changing offsets)
    batches = []
    for _ in range(args.steps):
        tokens = torch.randint(0, m["vocab_size"], (accum, B, T + 1), device=dev)
        batches.append([(tokens[a, :, :-1].contiguous(), tokens[a, :, 1:].contiguous()) for a in range(accum)])
    del tokens
    amp = torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
    params = list(model.parameters())

    def train_step(s):
        for x, y in batches[s]:
            with amp:
                loss = step_model(x, y)
            (loss / accum).backward()
        if t["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(params, t["grad_clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    ms, losses = [], []
    first_step_s = None
    for s in range(args.steps):
        w0 = time.perf_counter()
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            loss = train_step(s)
            end.record()
            end.synchronize()
            ms.append(start.elapsed_time(end))
        else:
            loss = train_step(s)
            ms.append((time.perf_counter() - w0) * 1e3)
        if s == 0:
            first_step_s = time.perf_counter() - w0
        losses.append(loss.item())
        print(f"step {s + 1}/{args.steps} | loss {losses[-1]:.4f} | {ms[-1]:.1f} ms", flush=True)

    median_ms = statistics.median(ms[args.warmup:])
    tok_per_s = GB * T / (median_ms / 1e3)
    flops_per_token = 6.0 * n_real + 12.0 * m["n_layer"] * m["n_embd"] * T
    device_name = torch.cuda.get_device_name(0) if cuda else "cpu"
    peak = args.peak_tflops if args.peak_tflops > 0 else peak_of(device_name)
    result = {
        "impl": "PyTorch compile" if args.compile else "PyTorch eager",
        "torch": torch.__version__, "torch_cuda": torch.version.cuda, "device_name": device_name,
        "n_layer": m["n_layer"], "n_head": m["n_head"], "n_embd": m["n_embd"], "vocab_size": m["vocab_size"],
        "vocab_padded": model.Vp, "seq_len": T, "micro_batch": B, "global_batch": GB, "recompute": t["recompute"],
        "n_params": n_real, "n_params_padded": n_padded, "optimizer": "AdamW fused" if fused else "AdamW",
        "steps": args.steps, "warmup": args.warmup, "ms": ms, "losses": losses, "first_step_s": first_step_s,
        "median_ms": median_ms, "tok_per_s": tok_per_s, "flops_per_token": flops_per_token, "peak_tflops": peak,
        "mfu": flops_per_token * tok_per_s / (peak * 1e12) if peak > 0 else None,
        "mem_peak_bytes": torch.cuda.max_memory_allocated() if cuda else None,
        "mem_reserved_bytes": torch.cuda.max_memory_reserved() if cuda else None,
    }
    print(f"model: {m['n_layer']} layers, {m['n_head']} heads, width {m['n_embd']}, context {T}, "
          f"vocab {m['vocab_size']} (padded {model.Vp}): {n_real} parameters ({n_padded} with the padded vocabulary)")
    mfu = f"{100 * result['mfu']:.1f}%" if result["mfu"] is not None else "n/a"
    print(f"{result['impl']}: median {median_ms:.2f} ms/step after {args.warmup} warm-up steps, "
          f"{tok_per_s:.0f} tok/s, MFU {mfu} (peak {peak:g} TFLOP/s), first step {first_step_s:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)
            f.write("\n")


if __name__ == "__main__":
    main()
