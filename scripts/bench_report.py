#!/usr/bin/env python3
"""The rows and the report of scripts/bench_gpu.sh, with the standard library
only (so that it, and its tests, run on any machine, GPU or not).

A row is one JSON object a line in the run's results.jsonl: one model at one
global batch, one implementation (train_gpt; train_gpt_hopper: the same with
kernels.attention=wgmma_ws; train_gpt_mma: with kernels.attention=mma;
train_gpt_dwo: with kernels.dw_overlap=true; train_gpt_lt: the same with kernels.lt_tune=time;
pytorch_eager, pytorch_compile, llm.c), either measured (the time of every step, the shape each program
reports, flops per token, the peak, memory) or not ("error": why). Every
median, min and max is over the steps after the warm-up (from step 4 on), the
same rule for every implementation.

  bench_report.py train-gpt DIR --key K --gb N --recompute R --warmup W [--impl I] [--command C]
      a row from train_gpt's DIR/log.jsonl and its stdout DIR.out (I: train_gpt, the default,
      train_gpt_hopper, train_gpt_mma, train_gpt_dwo or train_gpt_lt)
  bench_report.py llmc LOG --key K --gb N --warmup W [--peak P] [--build B] [--command C]
      a row from the stdout of llm.c's train_gpt2cu ("step N/M | loss ... | X ms | ...")
  bench_report.py torch JSON --key K --gb N [--command C]
      a row from scripts/bench_torch.py's --json file
  bench_report.py error --key K --gb N --impl I --recompute R [--command C] MESSAGE
  bench_report.py peak RESULTS --key K --gb N
      the peak TFLOP/s of the train_gpt row of K at batch N (0 when there is none)
  bench_report.py graph RESULTS DIR --key K --gb N --warmup W
      one line: train_gpt's row of K at batch N (its step replayed as a CUDA graph) against the same
      run op by op (train.cuda_graph=false) in DIR, and what the graph saved
  bench_report.py recompute RESULTS SELECTIVE_DIR FULL_DIR --key K --gb N --warmup W
      one line: train_gpt's row of K at batch N (recompute none) against the same run with
      train.recompute=selective and =full, and what each costs per step
  bench_report.py render RESULTS COMMANDS --points K:N,... --md FILE --json FILE
      the Markdown table and bench.json: a row for every point x implementation,
      "not measured" with the reason where results.jsonl has none (train_gpt_hopper's,
      train_gpt_mma's, train_gpt_dwo's and train_gpt_lt's rows only where results.jsonl has one:
      bench_gpu.sh --hopper, --mma, --dw-overlap, --lt-tune). The run's
      description comes from BENCH_* environment variables (see scripts/bench_gpu.sh).

bench.json: {"device", "driver", "cuda", "commit", "date", "rows": [{"model",
"impl", "global_batch", "ms_per_step" (median), "ms_min", "ms_max",
"tokens_per_s", "mfu" (a fraction of the peak), "mem_peak_gib", "command",
"note"}]}; a row that was not measured has nulls and a note saying why.
"""
import argparse
import json
import os
import re
import statistics
import sys

IMPLS = ("train_gpt", "train_gpt_hopper", "train_gpt_mma", "train_gpt_dwo", "train_gpt_lt", "pytorch_eager", "pytorch_compile",
         "llm.c")
TRAIN_GPT_IMPLS = ("train_gpt", "train_gpt_hopper", "train_gpt_mma", "train_gpt_dwo", "train_gpt_lt")
OPTIONAL_IMPLS = ("train_gpt_hopper", "train_gpt_mma", "train_gpt_dwo", "train_gpt_lt")  # rows only in a run that asked for them
IMPL_LABELS = {"train_gpt": "train_gpt bf16", "train_gpt_hopper": "train_gpt bf16, Hopper attention (wgmma_ws)",
               "train_gpt_mma": "train_gpt bf16, mma.sync attention (kernels.attention=mma)",
               "train_gpt_dwo": "train_gpt bf16, weight gradients overlapped (kernels.dw_overlap=true)",
               "train_gpt_lt": "train_gpt bf16, cuBLASLt tuned (kernels.lt_tune=time)",
               "pytorch_eager": "PyTorch eager", "pytorch_compile": "PyTorch compile", "llm.c": "llm.c train_gpt2cu"}
MODEL_LABELS = {"gpt2_124m": "GPT-2 124M", "megatron_1.2b": "Megatron 1.2B"}
LLMC_NO_CONFIG = ("not measured: llm.c has no configuration matching megatron_1.2b (its -e descriptors are "
                  "GPT-2 depths and GPT-3 widths from fixed tables, none 40 layers x 1536; a bf16 train_gpt2cu "
                  "loads only version-5 model files)")
NOT_REACHED = "not measured: not reached (the script stopped, or was stopped, before this run)"
GiB = 1024 ** 3


def fail(message):
    sys.exit(f"bench_report: {message}")


# ---- rows from each program's output ---------------------------------------------------------------
def parse_log_line(line):
    """A log.jsonl line; train_gpt writes a NaN or infinite loss as C prints it."""
    for bad, good in ((":-nan", ":NaN"), (":nan", ":NaN"), (":-inf", ":-Infinity"), (":inf", ":Infinity")):
        line = line.replace(bad, good)
    return json.loads(line)


def train_gpt_shape(out):
    """The model and batch train_gpt reports on its stdout."""
    m = re.search(r"^model: (\d+) layers, (\d+) heads, width (\d+), context \d+, vocab (\d+) \(padded (\d+)\): "
                  r"(\d+) parameters", out, re.M)
    b = re.search(r"^batch: (\d+) sequences x (\d+) tokens per step = .* micro-batches of (\d+)", out, re.M)
    if not m or not b:
        fail("train_gpt's stdout has no 'model:' or 'batch:' line")
    shape = dict(zip(("n_layer", "n_head", "n_embd", "vocab_size", "vocab_padded", "n_params"),
                     (int(x) for x in m.groups())))
    shape.update(zip(("global_batch", "seq_len", "micro_batch"), (int(x) for x in b.groups())))
    return shape


def train_gpt_row(a):
    with open(f"{a.path}/log.jsonl") as f:
        lines = [parse_log_line(l) for l in f if l.strip()]
    train = [l for l in lines if "loss" in l and "ms" in l]
    timed = [l["ms"] for l in train if l["step"] > a.warmup]
    if not timed:
        fail(f"{a.path}/log.jsonl has no train line after step {a.warmup}")
    with open(f"{a.path}.out") as f:
        shape = train_gpt_shape(f.read())
    # the peak train_gpt used, from its own mfu = flops_per_token * tok_per_s / peak (from the line of
    # largest mfu: logged to 6 decimals), to 4 significant digits
    best = max((l for l in train if l.get("mfu")), key=lambda l: l["mfu"], default=None)
    peak = float(f'{best["flops_per_token"] * best["tok_per_s"] / best["mfu"] / 1e12:.4g}') if best else 0.0
    return {**shape, "ms": [l["ms"] for l in train], "timed_ms": timed,
            "flops_per_token": train[-1]["flops_per_token"], "peak_tflops": peak,
            "mem_peak_bytes": max(l.get("mem_peak_bytes", 0) for l in train) or None}


def llmc_table(out):
    """llm.c's start-up table: '| name | value |' lines, by name."""
    return {m.group(1).strip(): m.group(2).strip() for m in re.finditer(r"^\| ([^|]+?)\s*\| (.*?)\s*\|$", out, re.M)}


def llmc_row(a):
    with open(a.path, errors="replace") as f:
        out = f.read()
    t = llmc_table(out)
    keys = ("num_layers L", "num_heads NH", "channels C", "vocab_size V", "padded_vocab_size Vp", "num_parameters",
            "micro batch size B", "sequence length T", "total batch size")
    missing = [k for k in keys if not t.get(k, "").isdigit()]
    if missing:
        fail(f"{a.path}: llm.c's table has no {', '.join(missing)}")
    L, NH, C, V, Vp, n, B, T, total = (int(t[k]) for k in keys)
    steps = [(int(s), float(ms)) for s, ms in
             re.findall(r"^step\s+(\d+)/\d+ \| loss \S+ .*?\| ([0-9.]+) ms \|", out, re.M)]
    timed = [ms for s, ms in steps if s > a.warmup]
    if not timed:
        fail(f"{a.path}: no 'step N/M | ... ms |' line after step {a.warmup}")
    n_real = n - (Vp - V) * C  # llm.c counts the padded rows of wte; train_gpt's N does not
    mem = re.search(r"^device memory usage: (\d+) MiB / \d+ MiB", out, re.M)
    note = "memory: llm.c's cudaMemGetInfo after its allocations (the whole device, CUDA context included)"
    return {"n_layer": L, "n_head": NH, "n_embd": C, "vocab_size": V, "vocab_padded": Vp, "n_params": n_real,
            "micro_batch": B, "global_batch": total // T, "seq_len": T, "ms": [ms for _, ms in steps],
            "timed_ms": timed, "flops_per_token": 6.0 * n_real + 12.0 * L * C * T, "peak_tflops": a.peak,
            "mem_peak_bytes": int(mem.group(1)) * 1024 ** 2 if mem else None,
            "note": f"built with `{a.build}`; {note}" if a.build else note}


def torch_row(a):
    with open(a.path) as f:
        r = json.load(f)
    keep = ("micro_batch", "global_batch", "seq_len", "n_layer", "n_head", "n_embd", "vocab_size", "vocab_padded",
            "n_params", "ms", "flops_per_token", "peak_tflops", "mem_peak_bytes", "first_step_s",
            "mem_reserved_bytes", "optimizer", "torch")
    row = {k: r.get(k) for k in keep}
    row["timed_ms"] = r["ms"][r["warmup"]:]
    return ("pytorch_compile" if r["impl"].endswith("compile") else "pytorch_eager"), r.get("recompute"), row


def emit(a, row):
    print(json.dumps({"key": a.key, "gb": a.gb, "impl": a.impl, "recompute": a.recompute, "command": a.command,
                      **row}))


# ---- the table and bench.json ------------------------------------------------------------------------
def timing(r):
    """(median, min, max, tokens/s, mfu) of a measured row, from the steps after the warm-up."""
    ms = r["timed_ms"]
    med = statistics.median(ms)
    tps = r["global_batch"] * r["seq_len"] / (med / 1e3)
    peak = r.get("peak_tflops") or 0
    mfu = r["flops_per_token"] * tps / (peak * 1e12) if peak > 0 else None
    return med, min(ms), max(ms), tps, mfu


def cells(results, points):
    """Every point x implementation, in order: (key, gb, impl, row or None, note if not measured)."""
    out = []
    asked = {r["impl"] for r in results}
    for key, gb in points:
        for impl in (i for i in IMPLS if i in asked or i not in OPTIONAL_IMPLS):
            mine = [r for r in results if (r["key"], r["gb"], r["impl"]) == (key, gb, impl)]
            row = mine[-1] if mine else None
            if row is None:
                note = LLMC_NO_CONFIG if impl == "llm.c" and key != "gpt2_124m" else NOT_REACHED
            else:
                note = row.get("error")
            out.append((key, gb, impl, row, note))
    return out


def json_row(key, gb, impl, row, note):
    r = {"model": key, "impl": impl, "global_batch": gb, "ms_per_step": None, "ms_min": None, "ms_max": None,
         "tokens_per_s": None, "mfu": None, "mem_peak_gib": None, "command": row.get("command") if row else None,
         "note": note}
    if row is not None and note is None:
        med, lo, hi, tps, mfu = timing(row)
        mem = row.get("mem_peak_bytes")
        r.update(ms_per_step=round(float(med), 3), ms_min=round(float(lo), 3), ms_max=round(float(hi), 3),
                 tokens_per_s=round(tps, 1),
                 mfu=round(mfu, 4) if mfu is not None else None,
                 mem_peak_gib=round(mem / GiB, 3) if mem else None, note=row.get("note"))
    return r


def bench_json(all_cells, env):
    return {"device": env.get("BENCH_DEVICE"), "driver": env.get("BENCH_DRIVER"), "cuda": env.get("BENCH_CUDA_TOOLKIT"),
            "commit": env.get("BENCH_COMMIT"), "date": env.get("BENCH_DATE_ISO"),
            "rows": [json_row(*c) for c in all_cells]}


def table_line(key, gb, impl, row, note):
    head = f"| {MODEL_LABELS[key]} | {gb} | {IMPL_LABELS[impl]} |"
    if row is None or "error" in row:
        rc = (row.get("recompute") or "") if row else ""
        return f"{head} | {rc} | {note.replace('|', '/')} | | | |"
    med, lo, hi, tps, mfu = timing(row)
    mfu_s = f"{100 * mfu:.1f}%" if mfu is not None else "n/a"
    mem = f"{row['mem_peak_bytes'] / GiB:.2f} GiB" if row.get("mem_peak_bytes") else "n/a"
    return (f"{head} {row['micro_batch']} | {row.get('recompute') or ''} | {med:.1f} ({lo:.1f}-{hi:.1f}) | "
            f"{tps:,.0f} | {mfu_s} | {mem} |")


def point_notes(key, gb, measured):
    """The per-point paragraph: shapes each program reports, parameters, ratios, per-step times."""
    parts = []
    shapes = {IMPL_LABELS[i]: f"{r['n_layer']} layers, {r['n_head']} heads, width {r['n_embd']}, vocab "
                              f"{r['vocab_size']} (padded {r['vocab_padded']}); {r['global_batch']} sequences of "
                              f"{r['seq_len']} tokens per step, micro-batch {r['micro_batch']}"
              for i, r in measured.items()}
    for shape in sorted(set(shapes.values())):
        parts.append(f"{shape} ({', '.join(i for i, v in shapes.items() if v == shape)})")
    if len(set(shapes.values())) > 1:
        parts.append("SHAPES DIFFER: the comparison is not like for like")
    n = {IMPL_LABELS[i]: r["n_params"] for i, r in measured.items()}
    if n:
        verdict = "" if len(n) < 2 else " (equal)" if len(set(n.values())) == 1 else \
            " (DIFFERENT: the comparison is not like for like)"
        parts.append(f"parameters {', '.join(f'{i} {v:,}' for i, v in n.items())}{verdict}")
    t = measured.get("train_gpt")
    if t:
        parts.append(f"flops/token {t['flops_per_token']:.4g}, peak {t['peak_tflops']:g} TFLOP/s (train_gpt's)")
    who = {"train_gpt": "train_gpt", "train_gpt_hopper": "train_gpt with the Hopper attention",
           "train_gpt_mma": "train_gpt with the mma.sync attention",
           "train_gpt_dwo": "train_gpt with the weight gradients overlapped",
           "train_gpt_lt": "train_gpt with cuBLASLt tuned"}
    for mine in TRAIN_GPT_IMPLS:
        t = measured.get(mine)
        for impl in IMPLS[IMPLS.index(mine) + 1:] if t else ():
            # each option against the plain row and the others' programs, not against the other option
            if impl in measured and not (mine in OPTIONAL_IMPLS and impl in OPTIONAL_IMPLS):
                ratio = timing(t)[0] / timing(measured[impl])[0]
                parts.append(f"{who[mine]}'s step takes {ratio:.2f}x the time of {IMPL_LABELS[impl]}'s")
    for impl, r in measured.items():
        parts.append(f"{IMPL_LABELS[impl]} per-step ms: " + " ".join(f"{x:.1f}" for x in r["ms"]))
        if impl.startswith("pytorch"):
            parts.append(f"{IMPL_LABELS[impl]}: first step {r['first_step_s']:.1f} s"
                         f"{' (compilation)' if impl.endswith('compile') else ''}, peak reserved "
                         f"{(r.get('mem_reserved_bytes') or 0) / GiB:.2f} GiB, {r.get('optimizer')}")
        if r.get("note"):
            parts.append(f"{IMPL_LABELS[impl]}: {r['note']}")
    if not parts:
        return [f"- {MODEL_LABELS[key]}, global batch {gb}: nothing measured"]
    return [f"- {MODEL_LABELS[key]}, global batch {gb}:"] + [f"  - {p}" for p in parts]


def markdown(all_cells, points, env, commands):
    E = env.get
    others = (E("BENCH_OTHERS") or "").strip(" ;") or "none"
    L = [f"# GPU training step: train_gpt vs PyTorch and llm.c ({E('BENCH_DEVICE')})", "",
         f"- Device: {E('BENCH_DEVICE')} ({int(E('BENCH_MEM_MIB') or 0) / 1024:.1f} GiB), driver {E('BENCH_DRIVER')}, "
         f"CUDA {E('BENCH_CUDA')} (driver); other processes on the GPU at the start: {others}",
         f"- Date: {E('BENCH_DATE')}; train_gpt commit {E('BENCH_GIT')}",
         f"- train_gpt: `{E('BENCH_BIN')}` (nvcc {E('BENCH_NVCC')}); {E('BENCH_BACKEND')}",
         f"- PyTorch: {E('BENCH_TORCH')} (`scripts/bench_torch.py`)",
         f"- llm.c: {E('BENCH_LLMC')}",
         f"- CUDA graph: {E('BENCH_GRAPH') or 'not measured'}",
         f"- Steps per run: {E('BENCH_STEPS')}; ms/step is the median of steps {int(E('BENCH_WARMUP') or 3) + 1}.."
         f"{E('BENCH_STEPS')} with the min and max in brackets (CUDA events around each step, in every program); "
         f"random tokens (train_gpt and llm.c: a shard of 2^20 tokens the script writes; PyTorch: torch.randint)",
         f"- Recompute (Megatron 1.2B): {E('BENCH_PLAN')}",
         f"- What recomputation costs (train_gpt, ms/step, against none): {E('BENCH_RECOMPUTE') or 'not measured'}", "",
         "| model | global batch | implementation | micro-batch | recompute | ms/step median (min-max) | tokens/s | MFU "
         "| peak memory |", "|---|---|---|---|---|---|---|---|---|"]
    L += [table_line(*c) for c in all_cells]
    L += ["", "Per model and batch:"]
    for key, gb in points:
        measured = {impl: row for k, g, impl, row, _ in all_cells
                    if (k, g) == (key, gb) and row is not None and "error" not in row}
        L += point_notes(key, gb, measured)
    L += ["", "How to read it:",
          "- tokens/s = global batch x seq_len / median ms/step; MFU = flops_per_token x tokens/s / peak, "
          "flops_per_token = 6N + 12 x n_layer x n_embd x seq_len (N over the real vocabulary, the tied wte once), "
          "the same formula and peak (train_gpt's device table) for every row.",
          "- Peak memory: train_gpt's mem_peak_bytes (device memory in use at its highest, cudaMemGetInfo, less what "
          "was in use before its first allocation); PyTorch's torch.cuda.max_memory_allocated (tensors only; the "
          "caching allocator reserves more, listed above); llm.c's own cudaMemGetInfo line after its allocations "
          "(the whole device, its CUDA context included).",
          "- Every step: forward, backward, gradient clipping by global norm, AdamW (fp32 master weights and state), "
          "bf16 matmuls with fp32 accumulation, a wait for the device at the end of the step. llm.c runs with "
          "-r 0 (no recompute, as train_gpt's GPT-2 row) and its defaults otherwise.",
          "- llm.c has a row for GPT-2 124M only: it has no configuration matching the Megatron 1.2B model.",
          "", "Commands (run from the repository root):", "", "```sh", E("BENCH_CMD") or ""]
    L += [c.rstrip() for c in commands if c.strip()]
    L += ["```", "", f"Raw runs: `{E('BENCH_RAW')}/` (the stdout and logs of each run, results.jsonl, commands.txt)."]
    return "\n".join(L) + "\n"


def write_atomically(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def parse_points(text):
    points = []
    for p in text.split(","):
        key, _, gb = p.partition(":")
        if key not in MODEL_LABELS or not gb.isdigit():
            fail(f"--points: '{p}' is not MODEL:GLOBAL_BATCH with MODEL one of {', '.join(MODEL_LABELS)}")
        points.append((key, int(gb)))
    return points


def render(a):
    with open(a.path) as f:
        results = [json.loads(l) for l in f if l.strip()]
    with open(a.commands) as f:
        commands = f.readlines()
    points = parse_points(a.points)
    all_cells = cells(results, points)
    write_atomically(a.json, json.dumps(bench_json(all_cells, os.environ), indent=1) + "\n")
    write_atomically(a.md, markdown(all_cells, points, os.environ, commands))


def measured_train_gpt_row(results, key, gb):
    """The last measured train_gpt row of key at global batch gb in the results file, or None."""
    with open(results) as f:
        rows = [json.loads(l) for l in f if l.strip()]
    return next((r for r in reversed(rows) if (r["key"], r["gb"], r["impl"]) == (key, gb, "train_gpt")
                 and "error" not in r), None)


def baseline_row(a):
    """measured_train_gpt_row of a.key, a.gb in a.results; fails when there is none."""
    row = measured_train_gpt_row(a.results, a.key, a.gb)
    if row is None:
        fail(f"{a.results} has no measured train_gpt row of {a.key} at global batch {a.gb}")
    return row


def peak(a):
    row = measured_train_gpt_row(a.path, a.key, a.gb)
    print(row["peak_tflops"] if row else 0)


def graph(a):
    """What the step's CUDA graph saved: the train_gpt row against the op-by-op run in a.path."""
    on = baseline_row(a)
    off = train_gpt_row(a)
    (m1, lo1, hi1, _, _), (m0, lo0, hi0, _, _) = timing(on), timing(off)
    print(f"{MODEL_LABELS[a.key]} at global batch {a.gb}: {m1:.2f} ms ({lo1:.2f}-{hi1:.2f}) per step with the step "
          f"replayed as one CUDA graph, {m0:.2f} ms ({lo0:.2f}-{hi0:.2f}) op by op (train.cuda_graph=false): the graph "
          f"saved {m0 - m1:.2f} ms per step ({100 * (m0 - m1) / m0:.1f}%)")


def recompute(a):
    """What recomputation costs: the train_gpt row (recompute none) against the same run with
    train.recompute=selective (in a.path) and =full (in a.full)."""
    base = baseline_row(a)
    if base["recompute"] != "none":
        fail(f"{a.results}: the train_gpt row of {a.key} at global batch {a.gb} ran with recompute {base['recompute']}, "
             "not none: no baseline")
    m0, lo0, hi0 = timing(base)[:3]
    parts = [f"{MODEL_LABELS[a.key]} at global batch {a.gb}: none {m0:.2f} ms ({lo0:.2f}-{hi0:.2f})"]
    for mode, path in (("selective", a.path), ("full", a.full)):
        a.path = path
        m, lo, hi = timing(train_gpt_row(a))[:3]
        parts.append(f"{mode} {m:.2f} ms ({lo:.2f}-{hi:.2f}), {100 * (m - m0) / m0:+.1f}%")
    print("; ".join(parts) + " per step")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    kinds = {name: sub.add_parser(name)
             for name in ("train-gpt", "llmc", "torch", "error", "peak", "render", "graph", "recompute")}
    kinds["graph"].add_argument("results")
    kinds["recompute"].add_argument("results")
    for name, p in kinds.items():
        p.add_argument("path" if name != "error" else "message")
        if name != "render":
            p.add_argument("--key", required=True, choices=sorted(MODEL_LABELS))
            p.add_argument("--gb", required=True, type=int)
        if name not in ("peak", "render", "graph", "recompute"):
            p.add_argument("--command")
    kinds["recompute"].add_argument("full")
    for name in ("train-gpt", "llmc", "graph", "recompute"):
        kinds[name].add_argument("--warmup", type=int, required=True)
    kinds["train-gpt"].add_argument("--recompute", required=True)
    kinds["train-gpt"].add_argument("--impl", default="train_gpt", choices=TRAIN_GPT_IMPLS)
    kinds["llmc"].add_argument("--peak", type=float, default=0.0)
    kinds["llmc"].add_argument("--build")
    kinds["error"].add_argument("--impl", required=True, choices=IMPLS)
    kinds["error"].add_argument("--recompute", default="")
    kinds["render"].add_argument("commands")
    for opt in ("--points", "--md", "--json"):
        kinds["render"].add_argument(opt, required=True)
    a = ap.parse_args()
    if a.what == "train-gpt":
        emit(a, train_gpt_row(a))
    elif a.what == "llmc":
        a.impl, a.recompute = "llm.c", "none"
        emit(a, llmc_row(a))
    elif a.what == "torch":
        a.impl, a.recompute, row = torch_row(a)
        emit(a, row)
    elif a.what == "error":
        emit(a, {"error": a.message})
    elif a.what == "peak":
        peak(a)
    elif a.what == "graph":
        graph(a)
    elif a.what == "recompute":
        recompute(a)
    else:
        render(a)


if __name__ == "__main__":
    main()
