"""Compares two runs of train_gpt: the train losses of log.jsonl and the
final model.safetensors, tensor by tensor.

  compare.py REF_DIR RUN_DIR STEP [--rtol 1e-5] [--weight-rtol R] [--bitwise]

Prints one line "max_loss_rel=... max_weight_rel=... worst=NAME" and exits 1
when a difference exceeds the tolerance (--weight-rtol: a separate one for
the weights; default the same). Weights: the relative L2 difference
of each tensor, ||a - b|| / ||b||. One slice is held to an absolute bound
instead: the key part of the attention bias, whose exact gradient is zero
(softmax ignores a constant added to every score of a row), so float
rounding noise, which differs between layouts, is all AdamW ever sees there;
its drift is bounded by steps * lr * noise / eps, far below the bound used.
"""
import json
import struct
import sys

import numpy as np


def losses(run_dir):
    out = {}
    with open(f"{run_dir}/log.jsonl") as f:
        for line in f:
            j = json.loads(line)
            if "loss" in j:
                out[j["step"]] = j["loss"]
    return out


def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        b, e = meta["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype=np.float32).reshape(meta["shape"]).astype(np.float64)
    return out


def main():
    args = sys.argv[1:]
    bitwise = "--bitwise" in args
    rtol = float(args[args.index("--rtol") + 1]) if "--rtol" in args else 1e-5
    wrtol = float(args[args.index("--weight-rtol") + 1]) if "--weight-rtol" in args else rtol
    ref, run, step = args[0], args[1], int(args[2])
    la, lb = losses(ref), losses(run)
    if sorted(la) != sorted(lb) or not la:
        print(f"steps differ: {sorted(la)} vs {sorted(lb)}")
        return 1
    loss_rel = max(abs(la[s] - lb[s]) / abs(la[s]) for s in la)
    ta = tensors(f"{ref}/step_{step:08d}/model.safetensors")
    tb = tensors(f"{run}/step_{step:08d}/model.safetensors")
    if sorted(ta) != sorted(tb):
        print("tensor names differ")
        return 1
    worst, worst_name = 0.0, ""
    for name in ta:
        a, b = ta[name], tb[name]
        if bitwise:
            rel = 0.0 if np.array_equal(a, b) else np.inf
        elif name.endswith("attn.c_attn.bias"):
            C = a.shape[0] // 3
            k_abs = float(np.max(np.abs(a[C:2 * C] - b[C:2 * C])))
            qv = np.concatenate([a[:C] - b[:C], a[2 * C:] - b[2 * C:]])
            qv_ref = np.concatenate([b[:C], b[2 * C:]])
            rel = float(np.linalg.norm(qv) / max(np.linalg.norm(qv_ref), 1e-30))
            if k_abs > 1e-4:
                rel = np.inf
        else:
            rel = float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))
        if rel > worst:
            worst, worst_name = rel, name
    if bitwise and loss_rel != 0.0:
        loss_rel = np.inf
    print(f"max_loss_rel={loss_rel:.3g} max_weight_rel={worst:.3g} worst={worst_name or '-'}")
    return 0 if loss_rel <= rtol and worst <= wrtol else 1


if __name__ == "__main__":
    sys.exit(main())
