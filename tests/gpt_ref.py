"""GPT-2 in PyTorch for the tests that check the binary against it
(tests/t_oracle.py, tests/t_hellaswag.py): a checkpoint's model.safetensors
read with numpy, and the forward pass written out from GPT-2's definition,
in the dtype of the tensors it is given."""
import json
import math
import struct

import numpy as np
import torch


def read_safetensors(path):
    """Returns ({name: (shape, float32 array)}, layout_error or "")."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    header.pop("__metadata__", None)
    base = 8 + n
    out, spans, err = {}, [], ""
    for name, info in header.items():
        a, b = info["data_offsets"]
        spans.append((a, b, name))
        if info["dtype"] != "F32":
            err = err or f"{name}: dtype {info['dtype']}, want F32"
            continue
        if b - a != 4 * int(np.prod(info["shape"])) or base + b > len(raw):
            err = err or f"{name}: data_offsets {a}..{b} do not fit shape {info['shape']}/file"
            continue
        arr = np.frombuffer(raw[base + a:base + b], dtype="<f4").reshape(info["shape"])
        out[name] = (info["shape"], arr.copy())
    # The format requires the data to be packed: no holes, no overlaps, nothing after.
    pos = 0
    for a, b, name in sorted(spans):
        if a != pos:
            err = err or f"{name}: starts at {a}, previous tensor ended at {pos}"
        pos = b
    if base + pos != len(raw):
        err = err or f"data ends at {base + pos} but the file has {len(raw)} bytes"
    return out, err


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def logits(P, idx, n_layer, n_head, drop=None):
    """GPT-2's logits [B, T, rows of wte] over idx [B, T]; drop, when given,
    is a function (layer, site, shape) -> the dropout factors (layer -1 is
    the embedding; sites 0 embedding, 1 attention, 2 and 3 the branches)."""
    return final_hidden(P, idx, n_layer, n_head, drop) @ P["wte.weight"].t()  # tied head


def final_hidden(P, idx, n_layer, n_head, drop=None):
    """The final LayerNorm's output [B, T, C] that logits() multiplies by wte:
    a caller that needs a few positions' logits takes those rows first (the
    head is most of a small model's work)."""
    B, Tn = idx.shape
    C = P["wte.weight"].shape[1]
    hd = C // n_head
    x = P["wte.weight"][idx] + P["wpe.weight"][:Tn]
    if drop:
        x = x * drop(-1, 0, (B, Tn, C))
    mask = torch.ones(Tn, Tn, dtype=torch.bool).tril()
    for i in range(n_layer):
        p = f"h.{i}."
        h = torch.nn.functional.layer_norm(x, (C,), P[p + "ln_1.weight"], P[p + "ln_1.bias"], 1e-5)
        qkv = h @ P[p + "attn.c_attn.weight"] + P[p + "attn.c_attn.bias"]
        q, k, v = (t.view(B, Tn, n_head, hd).transpose(1, 2) for t in qkv.split(C, dim=-1))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        if drop:
            att = att * drop(i, 1, (B, n_head, Tn, Tn))
        y = (att @ v).transpose(1, 2).reshape(B, Tn, C)
        branch = y @ P[p + "attn.c_proj.weight"] + P[p + "attn.c_proj.bias"]
        x = x + (branch * drop(i, 2, (B, Tn, C)) if drop else branch)
        h = torch.nn.functional.layer_norm(x, (C,), P[p + "ln_2.weight"], P[p + "ln_2.bias"], 1e-5)
        h = gelu_tanh(h @ P[p + "mlp.c_fc.weight"] + P[p + "mlp.c_fc.bias"])
        branch = h @ P[p + "mlp.c_proj.weight"] + P[p + "mlp.c_proj.bias"]
        x = x + (branch * drop(i, 3, (B, Tn, C)) if drop else branch)
    return torch.nn.functional.layer_norm(x, (C,), P["ln_f.weight"], P["ln_f.bias"], 1e-5)
