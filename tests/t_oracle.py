#!/usr/bin/python3
"""Oracle test: PyTorch (float64) reproduces a short train_gpt run.

The binary dumps its initial weights (train.steps=0), then trains 6 steps.
Starting from the same initial weights, a GPT-2 written here in PyTorch
reads the same batches from the same shard and, for every step, checks the
binary's logged loss, pre-clip gradient norm and learning rate; it then
clips and steps torch.optim.AdamW exactly as the issue specifies.  At the
end the final weights, the AdamW moments, the validation loss, config.json
and the checkpoint's tensor names/shapes are compared.

Run from the repo root by tests/run.sh (env TG_ROOT, TG_TMP). Prints one
line per check, "ok NAME" or "not ok NAME - REASON"; exits 1 on any failure.
"""
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_ref import logits, read_safetensors  # noqa: E402

ROOT = os.environ.get("TG_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TMP = os.path.join(os.environ.get("TG_TMP") or "/tmp", "t_oracle")
BIN = os.path.join(ROOT, "train_gpt")

failures = 0


def check(name, cond, reason=""):
    global failures
    if cond:
        print(f"ok {name}", flush=True)
    else:
        failures += 1
        print(f"not ok {name} - {reason}", flush=True)
    return cond


def finish():
    sys.exit(1 if failures else 0)


# ---------------------------------------------------------------- setup ---
V, L, NH, C, T = 1000, 2, 4, 64, 32   # vocab 1000: padded to 1024, padding exercised
MB, GB = 2, 4                          # gradient accumulation of 2 micro-batches
STEPS, WARMUP = 6, 2
LR, MIN_LR, WD = 1e-2, 1e-3, 0.1
BETA1, BETA2, EPS = 0.9, 0.95, 1e-8
# With the binary's seed-1337 init the pre-clip gradient norm on this data
# is ~1.6 at step 1, ~1.1 at step 2, then ~0.8: 0.95 clips the first steps
# and leaves the later ones alone, so both branches of clip_grad_norm_ run
# (the test asserts that, from the reference's own norms).
CLIP = 0.95
EVAL_BATCHES = 2
SEED = 1337

N_TRAIN = STEPS * GB * T + 1 + 100     # one pass, no wrap-around
N_VAL = EVAL_BATCHES * GB * T + 1 + 50


def write_shard(path, tokens):
    hdr = np.zeros(256, dtype="<i4")
    hdr[0], hdr[1], hdr[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(hdr.tobytes())
        f.write(np.asarray(tokens, dtype="<u2").tobytes())


def run_binary(cfg_path, out_dir, *sets):
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    cmd = [BIN, "--config", cfg_path, "--set", f"out.dir={out_dir}"] + \
          [x for s in sets for x in ("--set", s)]
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=300)
    return p.returncode, p.stdout


if os.path.isdir(TMP):
    shutil.rmtree(TMP)
os.makedirs(TMP)
rng = np.random.default_rng(20240520)
train_tokens = rng.integers(0, V, size=N_TRAIN, dtype=np.int64)
val_tokens = rng.integers(0, V, size=N_VAL, dtype=np.int64)
train_tokens[0], val_tokens[0] = V - 1, V - 1   # the highest real id is used
write_shard(os.path.join(TMP, "orc_train_000000.bin"), train_tokens)
write_shard(os.path.join(TMP, "orc_val_000000.bin"), val_tokens)

cfg = {
    "model": {"n_layer": L, "n_head": NH, "n_embd": C, "vocab_size": V, "seq_len": T},
    "train": {"micro_batch": MB, "global_batch": GB, "steps": STEPS, "lr": LR, "min_lr": MIN_LR,
              "warmup": WARMUP, "weight_decay": WD, "beta1": BETA1, "beta2": BETA2, "eps": EPS,
              "grad_clip": CLIP, "seed": SEED},
    "data": {"train": os.path.join(TMP, "orc_train_*.bin"),
             "val": os.path.join(TMP, "orc_val_*.bin"), "shuffle": False},
    "out": {"log_every": 1, "eval_every": 0, "eval_batches": EVAL_BATCHES, "save_every": 0,
            "resume": False, "sample_every": 0, "sample_tokens": 0},
    "device": "cpu",
}
cfg_path = os.path.join(TMP, "oracle.json")
with open(cfg_path, "w") as f:
    json.dump(cfg, f, indent=1)

if not check("binary_exists", os.access(BIN, os.X_OK), f"{BIN} missing; run make train_gpt"):
    finish()

dir0 = os.path.join(TMP, "run0")
dir6 = os.path.join(TMP, "run6")
rc0, out0 = run_binary(cfg_path, dir0, "train.steps=0")
if not check("run_steps0", rc0 == 0, f"exit {rc0}: {out0[-500:]!r}"):
    finish()
rc6, out6 = run_binary(cfg_path, dir6)
if not check("run_steps6", rc6 == 0, f"exit {rc6}: {out6[-500:]!r}"):
    finish()

ck0 = os.path.join(dir0, "step_00000000")
ck6 = os.path.join(dir6, "step_%08d" % STEPS)
if not check("checkpoints_exist",
             os.path.isfile(os.path.join(ck0, "model.safetensors"))
             and os.path.isfile(os.path.join(ck6, "model.safetensors"))
             and os.path.isfile(os.path.join(ck6, "optimizer.safetensors")),
             f"missing {ck0}/model.safetensors or {ck6}/{{model,optimizer}}.safetensors"):
    finish()

# ---------------------------------------------- names, shapes, config.json ---
expected_shapes = {"wte.weight": [V, C], "wpe.weight": [T, C],
                   "ln_f.weight": [C], "ln_f.bias": [C]}
for i in range(L):
    p = f"h.{i}."
    expected_shapes.update({
        p + "ln_1.weight": [C], p + "ln_1.bias": [C],
        p + "attn.c_attn.weight": [C, 3 * C], p + "attn.c_attn.bias": [3 * C],
        p + "attn.c_proj.weight": [C, C], p + "attn.c_proj.bias": [C],
        p + "ln_2.weight": [C], p + "ln_2.bias": [C],
        p + "mlp.c_fc.weight": [C, 4 * C], p + "mlp.c_fc.bias": [4 * C],
        p + "mlp.c_proj.weight": [4 * C, C], p + "mlp.c_proj.bias": [C],
    })

w0, e0 = read_safetensors(os.path.join(ck0, "model.safetensors"))
w6, e6 = read_safetensors(os.path.join(ck6, "model.safetensors"))
opt6, eo = read_safetensors(os.path.join(ck6, "optimizer.safetensors"))
check("safetensors_layout", not (e0 or e6 or eo),
      f"step0 model: {e0 or 'ok'}; step6 model: {e6 or 'ok'}; optimizer: {eo or 'ok'}")


def names_shapes_ok(tensors, expected):
    got = {k: list(v[0]) for k, v in tensors.items()}
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    wrong = sorted(k for k in expected if k in got and got[k] != expected[k])
    return (not missing and not extra and not wrong,
            f"missing {missing[:4]} extra {extra[:4]} wrong shape "
            f"{[(k, got[k], expected[k]) for k in wrong[:4]]}")


ok, why = names_shapes_ok(w0, expected_shapes)
check("model_tensors_step0", ok, why)
ok, why = names_shapes_ok(w6, expected_shapes)
if not check("model_tensors_step6", ok, why):
    finish()
opt_expected = {}
for k, s in expected_shapes.items():
    opt_expected["exp_avg." + k] = s
    opt_expected["exp_avg_sq." + k] = s
ok, why = names_shapes_ok(opt6, opt_expected)
opt_ok = check("optimizer_tensors", ok, why)

try:
    with open(os.path.join(ck6, "config.json")) as f:
        hf = json.load(f)
except (OSError, ValueError) as e:
    hf = None
    check("config_json", False, f"unreadable: {e}")
if hf is not None:
    want = {"model_type": "gpt2", "vocab_size": V, "n_positions": T, "n_embd": C,
            "n_layer": L, "n_head": NH, "layer_norm_epsilon": 1e-5,
            "activation_function": "gelu_new", "tie_word_embeddings": True}
    bad = [(k, hf.get(k, "<missing>"), v) for k, v in want.items()
           if k not in hf or hf[k] != v or type(hf[k]) is not type(v)]
    arch = hf.get("architectures")
    if arch != ["GPT2LMHeadModel"]:
        bad.append(("architectures", arch, ["GPT2LMHeadModel"]))
    # n_inner null or 4C both mean a 4x MLP; anything else would be wrong.
    if hf.get("n_inner") not in (None, 4 * C):
        bad.append(("n_inner", hf.get("n_inner"), None))
    # No <|endoftext|> in a vocabulary of V < 50257: the ids must be null, not left to
    # transformers' default of 50256 (past the vocabulary: it warns, and generate() would use it).
    for k in ("bos_token_id", "eos_token_id"):
        if k not in hf or hf[k] is not None:
            bad.append((k, hf.get(k, "<missing>"), None))
    # Dropout is 0 in this trainer; a non-zero value would change HF's training behaviour.
    for k in ("resid_pdrop", "embd_pdrop", "attn_pdrop"):
        if k in hf and hf[k] != 0:
            bad.append((k, hf[k], 0))
    check("config_json", not bad, f"(key, got, want): {bad}")

try:
    with open(os.path.join(ck6, "state.json")) as f:
        state = json.load(f)
    check("state_json_step", state.get("step") == STEPS, f"step {state.get('step')!r}, want {STEPS}")
except (OSError, ValueError) as e:
    check("state_json_step", False, f"unreadable state.json: {e}")

# ------------------------------------------------------------ log.jsonl ---
train_log, eval_log = {}, {}
with open(os.path.join(dir6, "log.jsonl")) as f:
    for line in f:
        if not line.strip():
            continue
        o = json.loads(line)
        if "loss" in o:
            train_log[o["step"]] = o
        elif "val_loss" in o:
            eval_log[o["step"]] = o
check("log_train_lines", sorted(train_log) == list(range(1, STEPS + 1))
      and all(all(k in o for k in ("loss", "lr", "grad_norm", "ms", "tok_per_s"))
              for o in train_log.values()),
      f"train steps logged: {sorted(train_log)}")

# ---------------------------------------------------- PyTorch reference ---
torch.set_num_threads(2)
dt = torch.float64


def forward(P, idx, tgt, drop=None):
    """Mean cross-entropy of GPT-2 over idx [B,T] -> tgt [B,T] (wte holds the
    real vocabulary only); drop as gpt_ref.logits takes it."""
    return torch.nn.functional.cross_entropy(logits(P, idx, L, NH, drop).reshape(-1, V), tgt.reshape(-1))


def batch(tokens, i):
    """Global batch i (shuffle off): window [i*G*T, i*G*T + G*T] -> GB sequences."""
    w = torch.from_numpy(tokens[i * GB * T: i * GB * T + GB * T + 1].astype(np.int64))
    x = torch.stack([w[k * T: k * T + T] for k in range(GB)])
    y = torch.stack([w[k * T + 1: k * T + T + 1] for k in range(GB)])
    return x, y


def lr_at(step):
    i = step - 1
    if i < WARMUP:
        return LR * (i + 1) / WARMUP
    return MIN_LR + 0.5 * (LR - MIN_LR) * (1 + math.cos(math.pi * (i - WARMUP) / (STEPS - WARMUP)))


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


names = list(expected_shapes)
P = {n: torch.tensor(w0[n][1], dtype=dt, requires_grad=True) for n in names}
decay = [P[n] for n in names if len(expected_shapes[n]) >= 2]
no_decay = [P[n] for n in names if len(expected_shapes[n]) < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                         {"params": no_decay, "weight_decay": 0.0}],
                        lr=LR, betas=(BETA1, BETA2), eps=EPS)

worst = {"loss": 0.0, "grad_norm": 0.0, "lr": 0.0}
bad = {"loss": [], "grad_norm": [], "lr": []}
clipped_steps = []
for step in range(1, STEPS + 1):
    x, y = batch(train_tokens, step - 1)
    opt.zero_grad(set_to_none=True)
    total = 0.0
    for m in range(GB // MB):          # accumulation: mean over the global batch
        lm = forward(P, x[m * MB:(m + 1) * MB], y[m * MB:(m + 1) * MB]) * (MB / GB)
        lm.backward()
        total += lm.item()
    gnorm = torch.nn.utils.clip_grad_norm_(list(P.values()), CLIP).item()
    if gnorm > CLIP:
        clipped_steps.append(step)
    lr = lr_at(step)
    for g in opt.param_groups:
        g["lr"] = lr
    opt.step()
    o = train_log.get(step)
    if o is None:
        continue
    for key, ref in (("loss", total), ("grad_norm", gnorm), ("lr", lr)):
        r = rel(float(o[key]), ref)
        worst[key] = max(worst[key], r)
        # loss and grad_norm: float32 vs float64, 1e-4 relative (the bound);
        # lr is a closed formula: only printing precision separates the two.
        if r >= (1e-4 if key != "lr" else 1e-6):
            bad[key].append((step, float(o[key]), ref))

check("step_losses", not bad["loss"] and len(train_log) == STEPS,
      f"(step, binary, torch): {bad['loss']}")
check("grad_norms", not bad["grad_norm"], f"(step, binary, torch): {bad['grad_norm']}")
check("lr_schedule", not bad["lr"], f"(step, binary, torch): {bad['lr']}")
check("clipping_exercised", 0 < len(clipped_steps) < STEPS,
      f"clipped steps {clipped_steps} of 1..{STEPS}: want some clipped and some not; adjust CLIP")
print(f"# max rel diff: loss {worst['loss']:.2e}, grad_norm {worst['grad_norm']:.2e}, "
      f"lr {worst['lr']:.2e}; clipped steps {clipped_steps}")

# -------------------------------------------------------- final weights ---
# A single AdamW update moves an element by up to ~lr (m/sqrt(v) is O(1)):
# six steps move weights by up to ~4e-2. The binary's float32 arithmetic
# changes gradients by ~1e-6 relative (see grad_norms), which moves the
# final weights by ~2e-6 at most (observed). 2e-5 leaves a 10x margin for
# other summation orders in the kernels and is still ~500x below one step,
# so a wrong lr, decay group, bias correction, eps placement or clipping
# is caught.
#
# Exception: the key part of each attn.c_attn.bias, elements [C, 2C). Its
# exact gradient is zero (adding b_k adds q.b_k to every score of a row,
# which the softmax cancels), so the float64 reference leaves it at its
# initial value while the binary sees float32 rounding noise (~1e-11) that
# Adam normalises to m/(sqrt(v)+eps) ~ 1e-3: the binary moves it by ~2e-5
# (observed), an amount set by rounding, not by the algorithm. It is held
# to 1e-3 (a tenth of one peak-lr step), which still fails if that gradient
# is really non-zero.
W_TOL, KB_TOL = 2e-5, 1e-3
wmax, wname, kbmax = 0.0, "", 0.0
moved = 0.0
for n in names:
    d = np.abs(P[n].detach().numpy() - w6[n][1].astype(np.float64))
    moved = max(moved, np.abs(w6[n][1].astype(np.float64) - w0[n][1]).max())
    if n.endswith("attn.c_attn.bias"):
        kbmax = max(kbmax, d[C:2 * C].max())
        d = np.concatenate([d[:C], d[2 * C:]])
    if d.max() > wmax:
        wmax, wname = d.max(), n
check("weights_moved", moved > 100 * W_TOL, f"max |w6-w0| = {moved:.3g}: training did not move weights")
check("final_weights", wmax < W_TOL, f"max |diff| {wmax:.3g} in {wname} (tol {W_TOL})")
check("final_weights_key_bias", kbmax < KB_TOL, f"max |diff| {kbmax:.3g} (tol {KB_TOL})")
print(f"# final weights: max |torch - binary| = {wmax:.3e} ({wname}), key-bias {kbmax:.3e}; "
      f"max movement {moved:.3e}")

# ------------------------------------------------------- AdamW moments ---
# Compared per tensor, relative to the tensor's largest reference value.
# The binary's gradients carry ~1e-9 absolute float32 error everywhere; for
# small-gradient tensors (LayerNorm biases, scale ~1e-4) that is ~5e-5 of
# the tensor's scale (observed). 5e-4 keeps a 10x margin; a missed clip,
# wrong beta or missing accumulation scale is off by 1e-2 or more.
M_TOL = 5e-4
if opt_ok:
    st = opt.state
    m_worst, v_worst, m_name, v_name = 0.0, 0.0, "", ""
    for n in names:
        s = st[P[n]]
        for kind, ref in (("exp_avg", s["exp_avg"]), ("exp_avg_sq", s["exp_avg_sq"])):
            ref = ref.numpy()
            got = opt6[f"{kind}.{n}"][1].astype(np.float64)
            scale = max(np.abs(ref).max(), 1e-30)
            r = np.abs(got - ref).max() / scale
            if kind == "exp_avg" and r > m_worst:
                m_worst, m_name = r, n
            if kind == "exp_avg_sq" and r > v_worst:
                v_worst, v_name = r, n
    check("adam_exp_avg", m_worst < M_TOL, f"max diff/scale {m_worst:.3g} in {m_name}")
    check("adam_exp_avg_sq", v_worst < M_TOL, f"max diff/scale {v_worst:.3g} in {v_name}")
    print(f"# exp_avg max diff/scale {m_worst:.3e} ({m_name}); "
          f"exp_avg_sq max diff/scale {v_worst:.3e} ({v_name})")

# ----------------------------------------------------- validation loss ---
# Evaluation at the end (eval_every 0) over eval_batches global batches read
# from the start of the val shard, as llm.c does; the weights are the final ones.
with torch.no_grad():
    vl = 0.0
    for i in range(EVAL_BATCHES):
        x, y = batch(val_tokens, i)
        vl += forward(P, x, y).item() / EVAL_BATCHES
if STEPS in eval_log:
    r = rel(float(eval_log[STEPS]["val_loss"]), vl)
    check("val_loss", r < 1e-4, f"binary {eval_log[STEPS]['val_loss']} torch {vl} (rel {r:.2e})")
    print(f"# val_loss rel diff {r:.2e}")
else:
    check("val_loss", False, f"no eval line for step {STEPS} in log.jsonl (eval lines: {sorted(eval_log)})")

# ------------------------------------------------------------- dropout ---
# model.dropout = 0.2: the binary's masks are a pure function of (seed,
# step, layer, site, global token / sequence, feature / head) through its
# counter-based generator (util/rng.c), which numpy reproduces here, so
# PyTorch can replay the same 6 steps with the same masks: after the
# embedding, on the attention probabilities, and on each residual branch
# (GPT-2's embd_pdrop, attn_pdrop, resid_pdrop places).
P_DROP = 0.2
U64 = np.uint64


def mix64(z):
    with np.errstate(over="ignore"):
        z = (z ^ (z >> U64(30))) * U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> U64(27))) * U64(0x94D049BB133111EB)
        return z ^ (z >> U64(31))


def rng_uniform(seed, stream, index):
    M = (1 << 64) - 1
    with np.errstate(over="ignore"):
        h = mix64(np.array((seed + 0x9E3779B97F4A7C15) & M, dtype=U64))
        h = mix64(h ^ U64((stream + 0x632BE59BD9B4E019) & M))
        bits = mix64(h ^ (index.astype(U64) * U64(0x9E3779B97F4A7C15) + U64(0x85EBCA6B)))
    return (bits >> U64(40)).astype(np.float64) / 16777216.0


def fnv1a(text):
    h = 0xCBF29CE484222325
    for ch in text.encode():
        h = ((h ^ ch) * 0x100000001B3) & ((1 << 64) - 1)
    return h


def dropout_masks(step, token0):
    """The binary's factors for one micro-batch: 0 or 1/(1-p) in float32."""
    p32 = np.float32(P_DROP)
    scale = float(np.float32(1.0) / (np.float32(1.0) - p32))

    def factors(layer, site, shape):
        stream = (fnv1a("dropout") + (step << 24) + (layer + 1) * 4 + site) & ((1 << 64) - 1)
        if site == 1:   # attention: ((sequence * NH + head) * T + t) * T + t2
            b, h, t, u = np.indices(shape, dtype=np.uint64)
            index = (((U64(token0 // T) + b) * U64(NH) + h) * U64(shape[2]) + t) * U64(shape[3]) + u
        else:           # residual stream: (token * C + feature), tokens counted in the global batch
            b, t, c = np.indices(shape, dtype=np.uint64)
            index = (U64(token0) + b * U64(shape[1]) + t) * U64(C) + c
        keep = rng_uniform(SEED, stream, index) >= float(p32)
        return torch.from_numpy(np.where(keep, scale, 0.0))
    return factors


dird = os.path.join(TMP, "run_dropout")
rcd, outd = run_binary(cfg_path, dird, f"model.dropout={P_DROP}")
if check("run_dropout", rcd == 0, f"exit {rcd}: {outd[-500:]!r}"):
    logd = {}
    with open(os.path.join(dird, "log.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if "loss" in j:
                logd[j["step"]] = j
    wd6, _ = read_safetensors(os.path.join(dird, "step_%08d" % STEPS, "model.safetensors"))
    Pd = {n: torch.tensor(w0[n][1], dtype=dt, requires_grad=True) for n in names}
    optd = torch.optim.AdamW([{"params": [Pd[n] for n in names if len(expected_shapes[n]) >= 2], "weight_decay": WD},
                              {"params": [Pd[n] for n in names if len(expected_shapes[n]) < 2], "weight_decay": 0.0}],
                             lr=LR, betas=(BETA1, BETA2), eps=EPS)
    worst_d, bad_d, plain_gap = 0.0, [], 0.0
    for step in range(1, STEPS + 1):
        x, y = batch(train_tokens, step - 1)
        optd.zero_grad(set_to_none=True)
        total = 0.0
        for m in range(GB // MB):
            lm = forward(Pd, x[m * MB:(m + 1) * MB], y[m * MB:(m + 1) * MB],
                         dropout_masks(step, m * MB * T)) * (MB / GB)
            lm.backward()
            total += lm.item()
        torch.nn.utils.clip_grad_norm_(list(Pd.values()), CLIP)
        for g in optd.param_groups:
            g["lr"] = lr_at(step)
        optd.step()
        r = rel(float(logd.get(step, {}).get("loss", float("nan"))), total)
        worst_d = max(worst_d, r) if r == r else float("inf")
        if not r < 1e-4:
            bad_d.append((step, logd.get(step, {}).get("loss"), total))
        plain_gap = max(plain_gap, rel(float(logd[step]["loss"]), float(train_log[step]["loss"])) if step in logd else 0)
    check("dropout_step_losses", not bad_d, f"(step, binary, torch): {bad_d}")
    check("dropout_changes_losses", plain_gap > 1e-3, f"losses with dropout within {plain_gap:.2e} of those without")
    dmax, dname = 0.0, ""
    for n in names:
        d = np.abs(Pd[n].detach().numpy() - wd6[n][1].astype(np.float64))
        if n.endswith("attn.c_attn.bias"):
            d = np.concatenate([d[:C], d[2 * C:]])
        if d.max() > dmax:
            dmax, dname = d.max(), n
    # Dropped units leave more elements with near-zero gradients, whose float32
    # noise AdamW normalises into real movement (observed 5e-5, against 2.7e-6
    # without dropout). 2e-4 is still ~1/50 of one lr=1e-2 step; a wrong mask
    # moves weights by ~lr and fails dropout_step_losses first anyway.
    DW_TOL = 2e-4
    check("dropout_final_weights", dmax < DW_TOL, f"max |diff| {dmax:.3g} in {dname} (tol {DW_TOL})")
    print(f"# dropout: max rel loss diff {worst_d:.2e}, max weight diff {dmax:.3e} ({dname}); "
          f"losses differ from no-dropout by up to {plain_gap:.2e}")

finish()
