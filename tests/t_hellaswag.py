#!/usr/bin/python3
# cost: 120 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
"""--hellaswag against PyTorch: a tiny GPT-2 trained briefly on the KJV text
scores HellaSwag-format examples made from its verses (a verse's first half
as the context, its second half and three other verses' as the endings);
tests/gpt_ref.py rebuilds the model from the checkpoint, tiktoken (under
node) tokenizes the context and " " + each ending, rows longer than
seq_len keep their last seq_len tokens, and the counts of right answers by
summed loss (acc) and by mean loss (acc_norm) must equal the binary's at
TP 1 (one and two examples a pass), TP 2, TP 2 + SP and DP 2. Examples
whose best two endings lie within 1e-4 are left out (float32 against
float64 could order them either way). 8 of them again on the CPU
emulation of CUDA, float32. --sample's greedy continuation on the same
model equals PyTorch's argmax, token after token. Then bad files and settings: each
stops with the file, line and field, and nothing is written. And
out.hellaswag: counts logged during training (DP 2, ZeRO) equal the mode's
on the checkpoint saved at the same step.

Run from the repo root by tests/run.sh (env TG_ROOT, TG_TMP).
"""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_ref import final_hidden, read_safetensors  # noqa: E402

ROOT = os.environ.get("TG_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TMP = os.path.join(os.environ.get("TG_TMP") or "/tmp", "t_hellaswag")
BIN = os.path.join(ROOT, "train_gpt")
L, NH, C, T, V = 2, 2, 32, 64, 50257
failures = 0


def check(name, cond, reason=""):
    global failures
    failures += 0 if cond else 1
    print(f"ok {name}" if cond else f"not ok {name} - {reason}", flush=True)
    return cond


def run(args, launch=0, threads=1):
    cmd = [BIN] + args
    if launch:
        cmd = ["scripts/launch.sh", "-n", str(launch), "--log-dir", os.path.join(TMP, "launch"), "--"] + cmd
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                       env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    return p.returncode, p.stdout


def verses():
    """The KJV's verses without their "Ge1:1 " labels."""
    with open(os.path.join(ROOT, "assets/kjv.txt"), encoding="utf-8") as f:
        return [line.split(" ", 1)[1].strip() for line, _ in zip(f, range(3000)) if " " in line]


def make_examples(vs):
    """48 examples: 40 of one verse's halves, 8 with two verses before the
    context's half (rows longer than seq_len); label i % 4."""
    out = []
    for i in range(48):
        v = vs[100 + 3 * i].split()
        half = len(v) // 2
        ctx = " ".join(v[:half])
        if i >= 40:
            ctx = vs[10 + i] + " " + vs[11 + i] + " " + ctx
        others = [vs[100 + 3 * i + k].split() for k in (7, 13, 29)]
        wrong = [" ".join(o[len(o) // 2:]) for o in others]
        label = i % 4
        endings = wrong[:label] + [" ".join(v[half:])] + wrong[label:]
        out.append({"ind": i, "ctx": ctx, "endings": endings, "label": label})
    return out


def tokenize(strings):
    src, dst = os.path.join(TMP, "strings.json"), os.path.join(TMP, "tokens.json")
    with open(src, "w") as f:
        json.dump(strings, f)
    subprocess.run(["node", "tests/tokenizer/oracle.js", "encode-json", src, dst], cwd=ROOT, check=True,
                   env=dict(os.environ, NODE_PATH=os.path.join(ROOT, "assets/npm/node_modules")))
    with open(dst) as f:
        return json.load(f)


def reference(P, examples):
    """Per example: (summed losses, mean losses) of its four endings, and
    whether its row was cut, from the float64 model."""
    strings = [s for x in examples for s in [x["ctx"]] + [" " + e for e in x["endings"]]]
    toks = tokenize(strings)
    res = []
    for i, x in enumerate(examples):
        ctx, ends = toks[5 * i], toks[5 * i + 1:5 * i + 5]
        rows = [(ctx + end)[-T:] for end in ends]
        width = max(len(r) for r in rows)  # padding after a row: the causal model never reads it
        with torch.no_grad():
            h = final_hidden(P, torch.tensor([r + [0] * (width - len(r)) for r in rows]), L, NH)
        sums, means = [], []
        for j, (row, end) in enumerate(zip(rows, ends)):
            n = len(end)  # positions len-n-1 .. len-2 predict the ending's tokens: only their logits
            lp = torch.log_softmax(h[j, len(row) - n - 1:len(row) - 1] @ P["wte.weight"].t(), dim=-1)
            total = -lp[torch.arange(n), torch.tensor(end)].sum().item()
            sums.append(total)
            means.append(total / n)
        res.append((sums, means, sum(len(ctx) + len(end) > T for end in ends)))
    return res


def counts(pairs):
    """PyTorch's counts over (example, reference) pairs, as the binary reports them."""
    return {"n": len(pairs), "acc": sum(int(np.argmin(r[0])) == x["label"] for x, r in pairs),
            "norm": sum(int(np.argmin(r[1])) == x["label"] for x, r in pairs), "cut": sum(r[2] for _, r in pairs)}


def clear(v):
    s = sorted(v)
    return s[1] - s[0] > 1e-4 * abs(s[0])


def parse(out):
    m = re.search(r"^hellaswag acc_norm [0-9.]+ \((\d+)/(\d+)\), acc [0-9.]+ \((\d+)/(\d+)\)"
                  r"(?:; (\d+) of (\d+) rows cut to their last (\d+) tokens)?; weights: (.*)$", out, re.M)
    if not m:
        return None
    g = m.groups()
    return {"norm": int(g[0]), "n": int(g[1]), "acc": int(g[2]), "cut": int(g[4] or 0), "weights": g[7]}


def main():
    shutil.rmtree(TMP, ignore_errors=True)
    os.makedirs(TMP)
    if not check("prerequisites", os.path.isfile(os.path.join(ROOT, "assets/kjv.txt")) and
                 os.path.isdir(os.path.join(ROOT, "assets/npm/node_modules/tiktoken")),
                 "assets/kjv.txt or tiktoken under assets/npm is missing (scripts/setup.sh installs them)"):
        return
    vs = verses()
    with open(os.path.join(TMP, "text.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vs[:2500]))
    subprocess.run(["./prepare", "--input", os.path.join(TMP, "text.txt"), "--out", os.path.join(TMP, "kjv"),
                    "--val-tokens", "2048", "--vocab-dir", "assets/vocab"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    cfg = os.path.join(TMP, "cfg.json")
    with open(cfg, "w") as f:
        json.dump({"model": {"n_layer": L, "n_head": NH, "n_embd": C, "vocab_size": V, "seq_len": T},
                   "train": {"micro_batch": 8, "global_batch": 16, "steps": 30, "lr": 3e-3, "min_lr": 3e-4,
                             "warmup": 3},
                   "data": {"train": os.path.join(TMP, "kjv_train_*.bin"), "val": "", "vocab_dir": "assets/vocab"},
                   "out": {"dir": os.path.join(TMP, "run"), "eval_batches": 0, "sample_tokens": 0,
                           "log_every": 20}}, f)
    rc, out = run(["--config", cfg, "--set", "train.global_batch=8"], threads=2)
    ckpt = os.path.join(TMP, "run", "step_00000030")
    if not check("train_tiny_model", rc == 0 and os.path.isdir(ckpt), out[-300:]):
        return

    w, err = read_safetensors(os.path.join(ckpt, "model.safetensors"))
    P = {n: torch.tensor(a, dtype=torch.float64) for n, (_, a) in w.items()}
    examples = make_examples(vs)
    ref = reference(P, examples)
    kept = [(x, r) for x, r in zip(examples, ref) if clear(r[0]) and clear(r[1])]
    want = counts(kept)
    check(f"reference_is_informative (kept {len(kept)} of 48: {want})",
          len(kept) >= 40 and 0 < want["norm"] < want["n"] and want["cut"] > 0, f"kept {len(kept)} of 48, {want}")
    path = os.path.join(TMP, "hs.jsonl")
    with open(path, "w") as f:
        for i, (x, _) in enumerate(kept):
            f.write(json.dumps(x) + ("\n\n" if i == 3 else "\n"))  # a blank line is skipped

    common = ["--hellaswag", path, "--config", cfg, "--set", f"model.init_from={ckpt}",
              "--set", f"out.dir={os.path.join(TMP, 'unused')}"]
    layouts = [("tp1", 0, []), ("tp1_one_example_a_pass", 0, ["--set", "train.micro_batch=4"]),
               ("tp2", 2, ["--set", "parallel.tp=2"]), ("tp2_sp", 2, ["--set", "parallel.tp=2", "--set", "parallel.sp=true"]),
               ("dp2", 2, ["--set", "parallel.dp=2"])]
    for name, ranks, extra in layouts:
        rc, out = run(common + extra, launch=ranks)
        got = parse(out)
        check(f"counts_{name}", rc == 0 and got and {k: got[k] for k in want} == want and got["weights"] == ckpt,
              f"rc {rc}, binary {got}, PyTorch {want}: {out[-300:]}")
    check("writes_no_out_dir", not os.path.exists(os.path.join(TMP, "unused")), "out.dir was created")
    on_emulated_cuda(kept, common)
    greedy_sample(cfg, vs)
    during_training(cfg, path, want)
    bad_inputs(cfg, kept[0][0])


def on_emulated_cuda(kept, common):
    """The CUDA backend's path (its losses copied back from the device), on
    the CPU emulation of CUDA (tests/emu; slow, so 8 examples: 3 right by
    summed loss, 2 more right by mean loss, 3 with rows cut), in float32:
    the PyTorch counts of those examples."""
    right = [k for k, (x, r) in enumerate(kept) if int(np.argmin(r[0])) == x["label"]][:3]
    norm = [k for k, (x, r) in enumerate(kept) if int(np.argmin(r[1])) == x["label"] and k not in right][:2]
    cut = [k for k, (x, r) in enumerate(kept) if r[2] and k not in right + norm][:3]
    sub = [kept[k] for k in sorted(right + norm + cut)]
    path = os.path.join(TMP, "hs8.jsonl")
    with open(path, "w") as f:
        f.write("".join(json.dumps(x) + "\n" for x, _ in sub))
    want = counts(sub)
    build = subprocess.run(["bash", "tests/emu/build.sh", "train"], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    args = [common[0], path] + common[2:] + ["--set", "device=cuda", "--set", "train.precision=fp32"]
    p = build.returncode == 0 and subprocess.run([os.path.join(ROOT, "build/emu/train_gpt_emu")] + args, cwd=ROOT,
                                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                                 timeout=600)
    got = p and parse(p.stdout)
    check(f"counts_emulated_cuda ({want})", got and {k: got[k] for k in want} == want,
          f"binary {got}: {(p.stdout if p else build.stdout)[-300:]}")


def gpt2_decoder():
    """Token id -> bytes, from assets/vocab/encoder.json: GPT-2 writes each
    byte as a printable character (printable Latin-1 as themselves, the
    other 68 as chr(256 + k) in byte order)."""
    keep = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
    char_of = {b: chr(b) for b in keep}
    char_of.update({b: chr(256 + k) for k, b in enumerate(b for b in range(256) if b not in char_of)})
    byte_of = {c: b for b, c in char_of.items()}
    with open(os.path.join(ROOT, "assets/vocab/encoder.json"), encoding="utf-8") as f:
        enc = json.load(f)
    return {i: bytes(byte_of[c] for c in s) for s, i in enc.items()}


def greedy_sample(cfg, vs):
    """--sample at temperature 0 draws PyTorch's argmax at the last position
    of the context (the last seq_len tokens once the text is longer), token
    after token: a 40-token prompt and 40 more, so the window slides. The
    binary runs the LM head at that one position only (gpt_forward_rows):
    another row's logits give other tokens. The model is freshly initialized
    (train.steps 0): the trained one above draws "," every time, whichever
    row it reads. The comparison stops before a step whose best two logits
    lie within 1e-4 (float32 against float64)."""
    out_dir = os.path.join(TMP, "init")
    rc, out = run(["--config", cfg, "--set", "train.steps=0", "--set", f"out.dir={out_dir}"])
    ckpt = os.path.join(out_dir, "step_00000000")
    if not check("greedy_sample_init_model", rc == 0 and os.path.isdir(ckpt), out[-300:]):
        return
    w, _ = read_safetensors(os.path.join(ckpt, "model.safetensors"))
    P = {n: torch.tensor(a, dtype=torch.float64) for n, (_, a) in w.items()}
    prompt_text = " ".join(vs[200:204])
    prompt = tokenize([prompt_text])[0][:40]
    dec = gpt2_decoder()
    prompt_text = b"".join(dec[t] for t in prompt).decode("utf-8")
    toks, clear_steps = list(prompt), None
    with torch.no_grad():
        for k in range(40):
            row = final_hidden(P, torch.tensor([toks[-T:]]), L, NH)[0, -1] @ P["wte.weight"][:V].t()
            top2 = torch.topk(row, 2).values
            if clear_steps is None and top2[0] - top2[1] <= 1e-4 * abs(top2[0]):
                clear_steps = k
            toks.append(int(torch.argmax(row)))
    clear_steps = 40 if clear_steps is None else clear_steps
    want = b"".join(dec[t] for t in toks[len(prompt):len(prompt) + clear_steps])
    rc, out = run(["--sample", "--config", cfg, "--set", f"model.init_from={ckpt}", "--prompt", prompt_text,
                   "--max-tokens", "40", "--temperature", "0", "--set", f"out.dir={os.path.join(TMP, 'unused')}"])
    got = out.encode("utf-8")
    at = got.find(prompt_text.encode("utf-8"))
    cont = got[at + len(prompt_text.encode("utf-8")):] if at >= 0 else b""
    check(f"greedy_sample_matches_pytorch ({clear_steps} of 40 tokens compared)",
          rc == 0 and clear_steps >= 20 and cont.startswith(want),
          f"rc {rc}, {clear_steps} clear steps; PyTorch {want[:120]!r}, binary {cont[:120]!r}")


def during_training(cfg, path, want):
    """out.hellaswag: 6 steps as DP 2 under ZeRO, scored at steps 3 and 6, at
    a constant LR of 0.05 so that each step moves the weights far; step 6's
    counts must be --hellaswag's on the checkpoint the run saves after it
    (the scoring waits for ZeRO's gather of the last update: scoring the
    stale half of the weights instead gives other counts here). The
    tokenizer it loads prints no sample: out.sample_tokens is 0. The losses
    and gradient norms of every step equal those of the run without it."""
    def zero_run(name, *sets):
        out_dir = os.path.join(TMP, name)
        rc, out = run(["--config", cfg, "--set", "train.global_batch=8", "--set", "train.micro_batch=4",
                       "--set", "parallel.dp=2", "--set", "parallel.zero=1", "--set", "train.steps=6",
                       "--set", "out.eval_every=3", "--set", f"out.dir={out_dir}", "--set", "train.lr=0.05",
                       "--set", "train.lr_schedule=constant"] + [x for s in sets for x in ("--set", s)], launch=2)
        lines = []
        if os.path.isfile(os.path.join(out_dir, "log.jsonl")):
            with open(os.path.join(out_dir, "log.jsonl")) as f:
                lines = [json.loads(x) for x in f]
        return rc, out, lines

    rc, out, lines = zero_run("run_zero", f"out.hellaswag={path}")
    out_dir = os.path.join(TMP, "run_zero")
    got = {o["step"]: (o["hellaswag_acc_norm"], o["hellaswag_acc"]) for o in lines if "hellaswag_acc" in o}
    rc2, out2 = run(["--hellaswag", path, "--config", cfg, "--set", f"model.init_from={out_dir}/step_00000006"])
    mode = parse(out2)
    expect = mode and (round(mode["norm"] / mode["n"], 6), round(mode["acc"] / mode["n"], 6))
    check("training_logs_hellaswag", rc == 0 and rc2 == 0 and sorted(got) == [3, 6] and
          tuple(round(v, 6) for v in got[6]) == expect and mode["n"] == want["n"] and "---- sample" not in out and
          re.search(r"^step 6 \| hellaswag acc_norm [0-9.]+ \(%d/%d\), acc" % (mode["norm"], mode["n"]), out, re.M),
          f"rc {rc}/{rc2}, logged {got}, --hellaswag {mode}: {out[-300:]} {out2[-200:]}")
    # Scoring leaves training as it was: the same losses and norms, bitwise,
    # as the same run without out.hellaswag.
    rc3, out3, plain = zero_run("run_zero_plain")
    def steps(ls):
        return [(o["step"], o["loss"], o["grad_norm"]) for o in ls if "loss" in o]
    check("training_unchanged_by_hellaswag", rc3 == 0 and len(steps(plain)) == 6 and steps(plain) == steps(lines),
          f"rc {rc3}: without {steps(plain)}, with {steps(lines)}")
    rc, out = run(["--config", cfg, "--set", f"out.hellaswag={path}", "--set", "train.micro_batch=2",
                   "--set", "train.global_batch=2", "--set", f"out.dir={os.path.join(TMP, 'bad_out')}"])
    check("training_refuses_micro_batch_2", rc != 0 and "out.hellaswag needs train.micro_batch (2) of at least 4" in out
          and not os.path.exists(os.path.join(TMP, "bad_out")), f"rc {rc}: {out[-300:]}")


def bad_inputs(cfg, good):
    """Each bad file or setting stops the mode naming what is wrong."""
    def case(name, lines, pattern, sets=()):
        path = os.path.join(TMP, f"bad_{name}.jsonl")
        if lines is not None:
            with open(path, "w") as f:
                f.write("".join(line + "\n" for line in lines))
        args = ["--hellaswag", path, "--config", cfg, "--set", f"out.dir={os.path.join(TMP, 'bad_out')}"]
        rc, out = run(args + [x for s in sets for x in ("--set", s)])
        check(f"bad_{name}", rc != 0 and re.search(pattern, out) and not os.path.exists(os.path.join(TMP, "bad_out")),
              f"rc {rc}: {out[-300:]}")

    g = json.dumps(good)
    unlabelled = dict(good)
    del unlabelled["label"]
    case("missing_file", None, r"bad_missing_file\.jsonl: cannot open")
    case("not_json", [g, "{oops"], r"bad_not_json\.jsonl: line 2: malformed JSON")
    case("text_after_object", [g + " x"], r"line 1: unexpected text after the JSON value")
    case("key_twice", ['{"label": 0, ' + g[1:]], r"line 1: key 'label' appears more than once")
    case("label_1e300", [json.dumps(dict(good, label=1e300))], r"line 1: \"label\"")
    case("label_1.5", [json.dumps(dict(good, label=1.5))], r"line 1: \"label\"")
    case("three_endings", [json.dumps(dict(good, endings=good["endings"][:3]))],
         r"line 1: \"endings\" must be an array of 4 strings")
    case("test_split", [g, g, json.dumps(unlabelled)], r"line 3: \"label\" must be a whole number from 0 to 3")
    case("label_4", [json.dumps(dict(good, label=4))], r"line 1: \"label\"")
    case("empty_ctx", [json.dumps(dict(good, ctx=""))], r"line 1: \"ctx\" must be a non-empty string")
    case("ending_not_string", [json.dumps(dict(good, endings=good["endings"][:3] + [7]))], r"\"endings\"\[3\] must be a string")
    case("no_examples", ["", "  "], r"no HellaSwag example")
    case("outside_vocabulary", [g], r"line 1: token \d+ is outside the model's vocabulary \(model.vocab_size = 1000\)",
         ["model.vocab_size=1000"])
    case("ending_longer_than_context", [json.dumps(dict(good, endings=good["endings"][:3] + [" ".join(["word"] * 80)]))],
         r"line 1: \"endings\"\[3\] is \d+ tokens, and model.seq_len \(64\) must exceed it")
    case("nul_escape", [json.dumps(dict(good, ctx=good["ctx"] + "\x00 and the rest"))],
         r"line 1: column \d+: \\u0000 \(a NUL character\) in a string: HellaSwag text cannot hold one")
    # an escaped backslash, then "u0000": text, not the escape, so the file loads
    path = os.path.join(TMP, "backslash_u0000.jsonl")
    with open(path, "w") as f:
        f.write(json.dumps(dict(good, ctx=good["ctx"] + " \\u0000")) + "\n")
    rc, out = run(["--hellaswag", path, "--config", cfg, "--set", f"out.dir={os.path.join(TMP, 'text_out')}"])
    got = parse(out)
    check("backslash_u0000_is_text", rc == 0 and got and got["n"] == 1, f"rc {rc}, {got}: {out[-300:]}")
    case("micro_batch_2", [g], r"--set train.micro_batch: train.micro_batch \(2\) must be at least 4 for --hellaswag",
         ["train.micro_batch=2", "train.global_batch=2"])


main()
sys.exit(1 if failures else 0)
