#!/usr/bin/python3
"""Helpers of scripts/weak_scaling.sh and scripts/strong_scaling.sh (numpy only).

  scaling.py get HELP_FILE CONFIG KEY [k=v ...]
      the effective value of a config key: the last k=v override naming it,
      else the JSON config, else the default that `train_gpt --help` prints
      (HELP_FILE holds that text). Booleans print as true/false.
  scaling.py data DIR TOKENS VOCAB
      writes DIR/train_000000.bin: an llm.c token shard of TOKENS random
      tokens below VOCAB (fixed seed).
  scaling.py table --kind weak|strong --manifest FILE --info FILE --out DIR [--help-text FILE]
      reads every run of the manifest (one tab-separated line per run:
      label config tp dp sp recompute batch micro mode run_dir rc sets [repeat],
      sets being the run's extra k=v overrides joined by \\x1f; the runs of one
      configuration repeated become one row, their medians) and its
      run_dir/log.jsonl, and writes DIR/table.md, DIR/table.tsv (the same
      figures, machine-readable) and DIR/chart.gp (a self-contained gnuplot
      script that draws DIR/chart.png when run in DIR; this draws nothing).
      INFO holds the header's "key<TAB>value" lines. Exits 1 when a run
      failed or left no figures (the table is written anyway, with n/a in
      its cells).
"""
import json
import math
import os
import re
import statistics
import sys

import numpy as np

MIB = 1024.0 * 1024.0


# ---- config -------------------------------------------------------------------
def help_defaults(help_text):
    """key -> default string, from the key table of `train_gpt --help`."""
    out = {}
    for line in help_text.splitlines():
        m = re.match(r"\s+([a-z_]+(?:\.[a-z_]+)*)\s+\S+\s+default\s+(\S*)", line)
        if m:
            d = m.group(2)
            out[m.group(1)] = "" if d == '""' else d
    return out


def config_value(help_text, config_path, key, sets):
    for kv in reversed(sets):
        k, _, v = kv.partition("=")
        if k == key:
            return v
    with open(config_path) as f:
        node = json.load(f)
    for part in key.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        else:
            node = None
            break
    if node is None:
        d = help_defaults(help_text)
        if key not in d:
            raise SystemExit(f"scaling.py: {config_path}: no value for {key} and train_gpt --help has no default for it")
        return d[key]
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def cmd_get(argv):
    help_file, config, key, *sets = argv
    with open(help_file) as f:
        print(config_value(f.read(), config, key, sets))


def cmd_data(argv):
    d, tokens, vocab = argv[0], int(argv[1]), int(argv[2])
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(20240520)
    h = np.zeros(256, np.int32)
    h[:3] = (20240520, 1, tokens)
    path = os.path.join(d, "train_000000.bin")
    with open(path + ".tmp", "wb") as f:
        f.write(h.tobytes())
        f.write(rng.integers(0, vocab, tokens, dtype=np.uint16).tobytes())
    os.replace(path + ".tmp", path)


# ---- one run ------------------------------------------------------------------
def fmt(x, digits=None):
    """A number as the table shows it, or n/a."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    if digits is not None:
        return f"{x:.{digits}f}"
    a = abs(x)
    if a == 0:
        return "0"
    if a >= 1000:
        return f"{x:.0f}"
    if a >= 100:
        return f"{x:.1f}"
    if a >= 10:
        return f"{x:.2f}"
    if a >= 0.001:
        return f"{x:.3f}"
    return f"{x:.2e}"


def human_params(n):
    if n >= 1e9:
        return f"{n / 1e9:.2f}B"
    if n >= 1e6:
        return f"{n / 1e6:.2f}M"
    return f"{n / 1e3:.0f}k"


def read_log(path):
    """(budget line, train lines sorted by step, end line) of a log.jsonl."""
    budget, train, end = None, {}, None
    with open(path) as f:
        for raw in f:
            raw = raw.strip()
            if not raw:
                continue
            try:
                o = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if "budget_bytes_per_rank" in o:
                budget = o
            elif "loss" in o and "step" in o and ("ms" in o or "step_ms" in o):
                train[o["step"]] = o  # a step logged twice (resume): the last one counts
            elif "mem_peak_mib_by_rank" in o:
                end = o
    return budget, [train[k] for k in sorted(train)], end


def num(v):
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def analyse(run, help_text, info):
    """Figures of one manifest row; missing ones are None, problems in run['why']."""
    cfg, sets = run["config"], run["sets"]
    g = lambda k: config_value(help_text, cfg, k, sets)  # noqa: E731
    L, H, C = int(g("model.n_layer")), int(g("model.n_head")), int(g("model.n_embd"))
    V, VM, T = int(g("model.vocab_size")), int(g("model.vocab_multiple")), int(g("model.seq_len"))
    vp = -(-V // VM) * VM
    n_params = vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C  # as the trainer counts (padded vocab)
    r = dict(run, n_layer=L, n_head=H, n_embd=C, seq_len=T, n_params=n_params)
    r["devices"] = run["tp"] * run["dp"]
    log = os.path.join(run["run_dir"], "log.jsonl")
    budget, train, end = read_log(log) if os.path.exists(log) else (None, [], None)
    why = []
    if run["rc"] != 0:
        why.append(f"the run exited with status {run['rc']}"
                   + (" (timed out)" if run["rc"] in (124, 137) else "") + f": see {run['run_dir']}.out")
    elif not os.path.exists(log):
        why.append("no log.jsonl")
    timed = train[1:]  # step 1 is the warm-up
    if not timed:
        why.append(f"{len(train)} train step(s) logged, need at least 2 (one warm-up)")
    step_ms = [num(o.get("step_ms", o.get("ms"))) for o in timed]
    comm_ms = [num(o.get("comm_ms")) for o in timed]
    r["step_ms"] = statistics.median(step_ms) if timed and None not in step_ms else None
    r["comm_ms"] = statistics.median(comm_ms) if timed and None not in comm_ms else None
    # what a projected step models as hidden behind compute (TP collectives beside products, DP buckets,
    # ZeRO's gather): in comm_ms, not in step_ms
    hidden_keys = ("tp_hidden_ms_modeled", "dp_hidden_ms_modeled", "zero_gather_hidden_ms_modeled")
    hidden_parts = [[num(o.get(k, 0)) for k in hidden_keys] for o in timed]
    hidden_ms = [None if None in p else sum(p) for p in hidden_parts]
    r["hidden_ms"] = statistics.median(hidden_ms) if timed and None not in hidden_ms else 0.0
    if timed and None in comm_ms:
        why.append("comm_ms missing from log.jsonl")
    proj = [o.get("projected") for o in timed]
    if timed and any(p is not None and bool(p) != (run["mode"] == "projected") for p in proj):
        why.append("log.jsonl's projected flag disagrees with the layout")
    fpt = num(timed[-1].get("flops_per_token")) if timed else None
    r["flops_per_token"] = fpt if fpt is not None else 6.0 * n_params + 12.0 * L * C * T
    speed(r, info)
    peak = info.get("peak_tflops")
    if not peak:
        why.append("no device peak (set PEAK_TFLOPS)")
    # comm bytes per step per rank, all groups and kinds (a step's figure; the last timed one)
    if timed:
        kinds = [k for k in timed[-1] if re.fullmatch(r"(tp|dp)_[a-z_]+_bytes", k)]
        r["comm_mib"] = sum(num(timed[-1][k]) or 0.0 for k in kinds) / MIB if kinds else None
        if not kinds:
            why.append("no <group>_<kind>_bytes in log.jsonl")
    else:
        r["comm_mib"] = None
    tot = budget and num(budget["budget_bytes_per_rank"].get("total"))
    r["budget_mib"] = tot / MIB if tot is not None else None
    if tot is None:
        why.append("no budget line in log.jsonl")
    peaks = [num(x) for x in (end or {}).get("mem_peak_mib_by_rank", [])]
    peaks = [p for p in peaks if p is not None]
    r["peak_mib"] = (max(peaks) if run["mode"] == "real" else peaks[0]) if peaks else None
    if not peaks:
        why.append("no mem_peak_mib_by_rank in log.jsonl")
    if budget and (budget.get("tp"), budget.get("dp")) != (run["tp"], run["dp"]):
        why.append(f"log.jsonl says tp {budget.get('tp')} dp {budget.get('dp')}")
    r["why"] = why if run["rc"] == 0 else why[:1]
    return r


def speed(r, info):
    """tokens/s, TFLOP/s per device and MFU of a row from its step time."""
    if r["step_ms"]:
        r["tok_per_s"] = r["batch"] * r["seq_len"] / (r["step_ms"] / 1000.0)
        r["tflops_per_device"] = r["flops_per_token"] * r["tok_per_s"] / r["devices"] / 1e12
    else:
        r["tok_per_s"] = r["tflops_per_device"] = None
    peak = info.get("peak_tflops")
    r["mfu"] = (100.0 * r["tflops_per_device"] / peak) if (peak and r["tflops_per_device"] is not None) else None


def merge_repeats(rows, info):
    """One row per configuration from its repeated runs (manifest field 13, the repeat): the
    median of their step, comm and hidden times, and the spread of the step times
    ((max - min) / median, %), so that a tiny sweep's noise shows instead of passing for
    scaling. A single run has spread None."""
    groups = {}
    for r in rows:
        key = (r["label"], r["tp"], r["dp"], r["sp"], r["recompute"], r["batch"], r["micro"], r["mode"])
        groups.setdefault(key, []).append(r)
    out = []
    for g in groups.values():
        m = dict(g[0])
        m["repeats"] = len(g)
        m["why"] = [w for r in g for w in r["why"]]
        good = [r for r in g if r["step_ms"]]
        for k in ("step_ms", "comm_ms", "hidden_ms"):
            vals = [r[k] for r in good if r.get(k) is not None]
            m[k] = statistics.median(vals) if vals and len(vals) == len(good) else (None if k != "hidden_ms" else 0.0)
        steps = [r["step_ms"] for r in good]
        m["spread"] = 100.0 * (max(steps) - min(steps)) / m["step_ms"] if len(steps) > 1 and m["step_ms"] else None
        speed(m, info)
        out.append(m)
    return out


def ratio(kind, r, b, time_key):
    """Efficiency (%) of row r against baseline b from the times under time_key (weak: FLOP/s per
    device; strong: speedup / device ratio), and the strong speedup (None for weak)."""
    tr, tb = r.get(time_key), b.get(time_key)
    if not tr or not tb or tr <= 0 or tb <= 0:
        return None, None
    if kind == "weak":
        per_dev = lambda x, t: x["flops_per_token"] * x["batch"] * x["seq_len"] / x["devices"] / t  # noqa: E731
        return 100.0 * per_dev(r, tr) / per_dev(b, tb), None
    speedup = tb / tr
    return 100.0 * speedup / (r["devices"] / b["devices"]), speedup


def efficiency_note(r, b):
    """Why row r's efficiency is not a like-for-like measurement, or why it exceeds 100%."""
    notes = []
    if r["mode"] == "projected" and b["mode"] == "real":
        notes.append(f"projected: compute measured, communication modeled ({fmt(r['comm_ms'])} ms), "
                     "against a measured baseline")
    if r["eff"] is not None and r["eff"] > 100.0 + 1e-9:
        # no layout runs faster per device than one device does: where both rows were measured
        # the same way, a figure above 100% is noise, and the repeats' spread says how much
        spread = [x["spread"] for x in (r, b) if x.get("spread") is not None]
        if r["mode"] == b["mode"]:
            notes.append("NOISE: above 100% where both rows were measured alike"
                         + (f" (step times spread up to {fmt(max(spread), 1)}% over {r.get('repeats', 1)} repeats)"
                            if spread else " (one run each: repeat the sweep with --repeat N)"))
        why = []
        if r["compute_eff"] is not None and r["compute_eff"] > 100.0:
            why.append(f"its compute alone is faster per device than at tp=1 (compute-only {fmt(r['compute_eff'], 1)}%)")
        share = lambda x: 100.0 * (x["comm_ms"] or 0.0) / x["step_ms"]  # noqa: E731
        if share(r) < share(b):
            kinds = "modeled vs measured" if r["mode"] != b["mode"] else r["mode"]
            why.append(f"communication is {fmt(share(r), 1)}% of its step against {fmt(share(b), 1)}% "
                       f"at tp=1 ({kinds})")
        notes.append("above 100%: " + ("; ".join(why) if why else "timing noise"))
    return "; ".join(notes)


def add_efficiency(rows, kind):
    """Scaling efficiency against the tp=1 row of the same batch and dp (the paper's figure), the same
    from compute time alone (step - comm + the comm modeled as hidden: measured in every row, so like
    for like between real and projected rows), and a note wherever the two kinds meet or a value
    exceeds 100%."""
    for r in rows:
        r["speedup"] = r["eff"] = r["compute_eff"] = None
        r["eff_note"] = ""
        r["compute_ms"] = (r["step_ms"] - r["comm_ms"] + r["hidden_ms"]) if r["step_ms"] and r["comm_ms"] is not None else None
    for r in rows:
        base = [b for b in rows if b["batch"] == r["batch"] and b["tp"] == 1 and b["dp"] == r["dp"] and b["step_ms"]]
        if not base or not r["step_ms"]:
            continue
        b = base[0]
        r["eff"], r["speedup"] = ratio(kind, r, b, "step_ms")
        r["compute_eff"], _ = ratio(kind, r, b, "compute_ms")
        r["eff_note"] = efficiency_note(r, b)


# ---- outputs ------------------------------------------------------------------
def columns(kind):
    """(header, function of a row -> cell); the figures the paper's tables have, and ours."""
    cols = [
        ("model", lambda r: r["label"]),
        ("params", lambda r: human_params(r["n_params"])),
        ("layers", lambda r: str(r["n_layer"])),
        ("hidden", lambda r: str(r["n_embd"])),
        ("heads", lambda r: str(r["n_head"])),
        ("tp", lambda r: str(r["tp"])),
        ("dp", lambda r: str(r["dp"])),
        ("devices", lambda r: str(r["devices"])),
        ("sp", lambda r: "on" if r["sp"] == "true" else "off"),
        ("recompute", lambda r: r["recompute"]),
        ("global batch", lambda r: str(r["batch"])),
        ("micro batch", lambda r: str(r["micro"])),
        ("run", lambda r: r["mode"]),
        ("repeats", lambda r: str(r.get("repeats", 1))),
        ("step time (ms)", lambda r: fmt(r["step_ms"])),
        ("step spread (%)", lambda r: fmt(r.get("spread"), 1) if r.get("spread") is not None else "-"),
        ("comm time (ms)", lambda r: fmt(r["comm_ms"])),
        ("tokens/s", lambda r: fmt(r["tok_per_s"], 0) if r["tok_per_s"] is not None else "n/a"),
        ("TFLOP/s per device", lambda r: fmt(r["tflops_per_device"])),
        ("MFU (%)", lambda r: fmt(r["mfu"], 2)),
        ("memory per rank, budget (MiB)", lambda r: fmt(r["budget_mib"], 1)),
        ("memory per rank, measured peak (MiB)", lambda r: fmt(r["peak_mib"], 1)),
        ("comm per step per rank (MiB)", lambda r: fmt(r["comm_mib"], 3)),
    ]
    if kind == "weak":
        cols.append(("weak scaling efficiency (%)", lambda r: fmt(r["eff"], 1)))
    else:
        cols.append(("speedup", lambda r: fmt(r["speedup"], 2)))
        cols.append(("strong scaling efficiency (%)", lambda r: fmt(r["eff"], 1)))
    cols.append(("compute-only efficiency (%)", lambda r: fmt(r["compute_eff"], 1)))
    cols.append(("efficiency note", lambda r: r["eff_note"] or "-"))
    return cols


def write_table(out_dir, kind, rows, info):
    cols = columns(kind)
    title = {"weak": "Weak scaling", "strong": "Strong scaling"}[kind]
    n_proj = sum(r["mode"] == "projected" for r in rows)
    lines = [f"# {title} ({info.get('scale_text', '')})", ""]
    for key, name in (("device", "device"), ("devices_text", "devices"), ("peak_text", "peak per device"),
                      ("date", "date"), ("command", "command"), ("binary", "binary"),
                      ("steps_text", "steps"), ("interconnect_text", "projection")):
        if key in info:
            v = info[key]
            lines.append(f"- {name}: `{v}`" if key == "command" else f"- {name}: {v}")
    lines.append(f"- rows: {len(rows)} ({len(rows) - n_proj} real, {n_proj} projected)")
    lines.append("")
    for batch in sorted({r["batch"] for r in rows}):
        lines.append(f"## Global batch {batch}")
        lines.append("")
        lines.append("| " + " | ".join(h for h, _ in cols) + " |")
        lines.append("|" + "|".join("---" if i < 13 else "--:" for i in range(len(cols))) + "|")
        for r in rows:
            if r["batch"] == batch:
                lines.append("| " + " | ".join(f(r) for _, f in cols) + " |")
        lines.append("")
    bad = [r for r in rows if r["why"]]
    if bad:
        lines.append("## Problems")
        lines.append("")
        for r in bad:
            lines.append(f"- batch {r['batch']} tp {r['tp']} dp {r['dp']} ({r['mode']}, {r['run_dir']}): "
                         + "; ".join(r["why"]))
        lines.append("")
    lines += [
        "## How to read it",
        "",
        "- **run**: `real` = tp x dp processes through `scripts/launch.sh`, measured; "
        "`projected` = one process running rank 0's exact shard with the null communicator, "
        "compute time measured and communication time modeled (see *projection* above). "
        "Projected figures are a model, not a measurement.",
        "- **repeats**: runs of the configuration (`--repeat N`); the row's times are their medians, and "
        "**step spread** = (slowest - fastest) / median of their step times: a scaling efficiency within it "
        "of 100% is noise. An efficiency above 100% between rows measured alike is flagged NOISE.",
        "- **step time**: median over the steps after the first (warm-up) of the logged `step_ms` "
        "(real: wall time; projected: compute + modeled communication). **comm time**: median `comm_ms` "
        "(real: time inside collectives; projected: modeled).",
        "- **tokens/s** = global batch x sequence / step time. **TFLOP/s per device** = model FLOPs per token "
        "(6 N + 12 layers x hidden x seq, recomputation not counted) x tokens/s / devices. "
        "**MFU** = that / the peak per device above.",
        "- **memory per rank**: the trainer's budget (exactly what it allocates) and the measured peak "
        "(resident set on the CPU, device memory on a GPU): the largest rank for real runs, "
        "the one process for projected runs.",
        "- **comm per step per rank**: bytes rank 0 sent in one step, all collectives of the tp and dp groups.",
    ]
    if kind == "weak":
        lines.append("- **weak scaling efficiency**: TFLOP/s per device relative to the tp=1 row of the same "
                     "global batch, as in the Megatron-LM paper (arXiv 1909.08053, Fig. 1 / Table 1: "
                     "77% at 8-way model parallelism for the 8.3B model on V100s).")
    else:
        lines.append("- **speedup** = step time at tp=1 / step time at tp, same global batch; "
                     "**strong scaling efficiency** = speedup / (devices / devices at tp=1), "
                     "as in the Megatron-LM paper's appendix D (arXiv 1909.08053).")
    lines.append("- **compute-only efficiency**: the same ratio from compute time alone (step time - comm time, "
                 "plus in a projected row the comm modeled as hidden behind compute: TP collectives beside products, "
                 "DP buckets, ZeRO's gather), "
                 "measured in real and projected rows alike, so it compares like with like (a real row's comm "
                 "time includes waiting for the slowest rank, so its compute-only figure is an upper bound). "
                 "The main efficiency "
                 "of a projected row sets a modeled communication beside the measured one of the tp=1 row; "
                 "**efficiency note** says so, and says why wherever a value exceeds 100% (compute faster per "
                 "device than at tp=1, or communication a smaller share of the step than at tp=1).")
    with open(os.path.join(out_dir, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    keys = ["label", "n_params", "tp", "dp", "devices", "sp", "recompute", "batch", "micro", "mode", "repeats", "spread", "step_ms",
            "comm_ms", "tok_per_s", "tflops_per_device", "mfu", "budget_mib", "peak_mib", "comm_mib", "speedup",
            "eff", "compute_eff", "eff_note", "run_dir"]
    with open(os.path.join(out_dir, "table.tsv"), "w") as f:
        f.write("\t".join(keys) + "\n")
        for r in rows:
            f.write("\t".join("n/a" if r.get(k) is None else str(r.get(k)) for k in keys) + "\n")


def write_chart(out_dir, kind, rows, info):
    """chart.gp: two panels, x = devices; the scaling figure and the raw speed."""
    batches = sorted({r["batch"] for r in rows})
    blocks, plots_a, plots_b = [], [], []
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    if kind == "weak":
        ya, yb = "eff", "tflops_per_device"
        ya_label, yb_label = "weak scaling efficiency (%)", "TFLOP/s per device"
    else:
        ya, yb = "speedup", "step_ms"
        ya_label, yb_label = "speedup over tp=1", "step time (ms)"
    any_points = False
    for i, batch in enumerate(batches):
        rs = sorted((r for r in rows if r["batch"] == batch), key=lambda r: r["devices"])
        col = colors[i % len(colors)]
        for panel, key, plots in (("a", ya, plots_a), ("b", yb, plots_b)):
            pts = [(r["devices"], r[key], r["mode"]) for r in rs if r.get(key) is not None]
            if not pts:
                continue
            any_points = True
            name = f"$b{batch}{panel}"
            blocks.append(f"{name} << EOD")
            blocks += [f"{x} {y:.6g} {1 if m == 'projected' else 0}" for x, y, m in pts]
            blocks.append("EOD")
            # Real and projected points are separate series (solid line and filled points against a
            # dashed line and open points), each with its legend entry: never one line through both.
            if any(m == "real" for _, _, m in pts):
                plots.append(f"{name} using 1:($3==0?$2:1/0) with linespoints dt 1 pt 7 ps 1.4 lc rgb '{col}' "
                             f"title 'batch {batch}, real (measured)'")
            if any(m == "projected" for _, _, m in pts):
                plots.append(f"{name} using 1:($3==1?$2:1/0) with linespoints dt 2 pt 6 ps 1.6 lw 2 lc rgb '{col}' "
                             f"title 'batch {batch}, projected (modeled comm)'")
    xs = sorted({r["devices"] for r in rows})
    if kind == "weak":
        ideal_a = "100 with lines lc rgb 'gray' dt 2 title 'ideal (100%)'"
    else:
        ideal_a = "x with lines lc rgb 'gray' dt 2 title 'ideal (linear)'"
    proj_note = "open points: projected (rank 0 measured, communication modeled)" \
        if any(r["mode"] == "projected" for r in rows) else "all points measured"
    title = {"weak": "Weak scaling", "strong": "Strong scaling"}[kind]
    gp = [
        "# gnuplot script written by scripts/scaling/scaling.py, its data inline; in this directory"
        " (it writes chart.png here), on any machine with gnuplot 5: gnuplot chart.gp",
        # pngcairo, or png where the gnuplot that draws this has no pngcairo (it may not be the
        # machine that ran the sweep: one without gnuplot writes this and draws nothing)
        "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size 1500,560 font ',10' noenhanced }"
        " else { set terminal png size 1500,560 noenhanced }" if info.get("terminal") != "png"
        else "set terminal png size 1500,560 noenhanced",
        "set output 'chart.png'",
        *blocks,
        "set multiplot layout 1,2 title \"" + f"{title}: {info.get('scale_text', '')} on "
        + info.get("device_short", "").replace('"', "'") + "\\n" + proj_note + "\"",
        "set logscale x 2",
        f"set xrange [{min(xs) / 1.4:.3g}:{max(xs) * 1.4:.3g}]",
        "set xtics (" + ", ".join(f"\"{x}\" {x}" for x in xs) + ")",
        "set xlabel 'devices (tp x dp)'",
        "set grid",
        # No text is placed among the points: real and projected differ by line, marker and legend
        # entry, and the legend sits right of the plot, outside it, in the margin it reserves (below,
        # it met the axis label), so no label can land on a point, a line, an axis label or
        # another label however close the series run.
        "set key outside right top vertical Left reverse box samplen 2 font ',9'",
        f"set ylabel '{ya_label}'",
        *(["set logscale y 2", "set yrange [*:*]"] if kind == "strong" else ["set yrange [0:*]"]),
        "plot " + ", \\\n     ".join([ideal_a] + plots_a) if plots_a else "plot " + ideal_a,
        f"set ylabel '{yb_label}'",
        "unset logscale y",
        "set yrange [0:*]",
        "plot " + ", \\\n     ".join(plots_b) if plots_b
        else "set label 'no data' at graph 0.5,0.5 center; set yrange [0:1]; plot -1 notitle",
        "unset multiplot",
    ]
    with open(os.path.join(out_dir, "chart.gp"), "w") as f:
        f.write("\n".join(gp) + "\n")
    return any_points


def cmd_table(argv):
    import argparse
    ap = argparse.ArgumentParser(prog="scaling.py table")
    ap.add_argument("--kind", choices=["weak", "strong"], required=True)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--info", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--help-text", required=True)
    a = ap.parse_args(argv)
    with open(a.help_text) as f:
        help_text = f.read()
    info = {}
    with open(a.info) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("\t")
            info[k] = v
    info["peak_tflops"] = float(info.get("peak_tflops") or 0) or None
    runs = []
    with open(a.manifest) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) < 11:
                continue
            runs.append(dict(label=p[0], config=p[1], tp=int(p[2]), dp=int(p[3]), sp=p[4], recompute=p[5],
                             batch=int(p[6]), micro=int(p[7]), mode=p[8], run_dir=p[9], rc=int(p[10]),
                             sets=[s for s in (p[11] if len(p) > 11 else "").split("\x1f") if s]))
    rows = merge_repeats([analyse(r, help_text, info) for r in runs], info)
    add_efficiency(rows, a.kind)
    write_table(a.out, a.kind, rows, info)
    write_chart(a.out, a.kind, rows, info)
    bad = [r for r in rows if r["why"]]
    for r in bad:
        print(f"scaling.py: batch {r['batch']} tp {r['tp']} dp {r['dp']}: " + "; ".join(r["why"]), file=sys.stderr)
    return 1 if bad else 0


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) >= 2 else 2
    cmd, argv = sys.argv[1], sys.argv[2:]
    if cmd == "get":
        cmd_get(argv)
    elif cmd == "data":
        cmd_data(argv)
    elif cmd == "table":
        return cmd_table(argv)
    else:
        print(f"scaling.py: unknown command {cmd}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
