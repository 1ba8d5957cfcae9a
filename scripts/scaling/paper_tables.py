#!/usr/bin/python3
"""Helper of scripts/paper_tables.sh: the Megatron papers' tables with our rows beside them.

  paper_tables.py jobs --batches LIST
      the --plan runs the tables need, one per line: name, config, devices, and the run's
      --set overrides joined by \\x1f (tab-separated).
  paper_tables.py micro --batches LIST
      each global batch and the micro-batch its Table 1 and appendix D rows use, one pair a
      line (tab-separated): the sweeps run at it, so that a sweep's row is the plan's layout.
  paper_tables.py slurm-jobs
      the model + data parallel layouts of 1909.08053's Table 1 (64-512 GPUs), one per line:
      name, config, tp, dp, global batch, micro batch (tab-separated).
  paper_tables.py build --plans DIR --help-text FILE --info FILE --out DIR --batches LIST
                        [--sweep weak=DIR] [--sweep strong=DIR] [--sweep slurm=DIR]
      reads DIR/<name>.jsonl (each job's --plan-json) and the sweeps' table.tsv (a kind given
      more than once: one sweep a batch, their rows together), and writes
      OUT/tables.md (printed too) and OUT/tables.tsv. Every row of ours says where it comes from:
      "calibrated projection" (--plan priced from a measured op table), "FLOPs-assumed projection"
      (--plan's FLOPs at an assumed fraction of peak), "no time model", "planner budget" (memory:
      the bytes the trainer allocates), "shard run" (one GPU runs rank 0's shard, communication
      modeled) or "real" (every rank ran). Exits 1 when a figure the tables need is missing.
"""
import argparse
import csv
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import published as P  # noqa: E402
from scaling import config_value, fmt, human_params  # noqa: E402

MIB, GIB = 1024.0 ** 2, 1024.0 ** 3


def micro_for(batch):
    """The micro-batch of a Table 1 row: the whole batch up to 8 (the paper's one micro-batch),
    else the largest divisor not above 10 (the H200 calibration ran batch 20 as 2 x 10)."""
    if batch <= 8:
        return batch
    return max(m for m in range(1, 11) if batch % m == 0)


def sp_dims(model):
    name, a, h, L, t, pp, gpus, gb, mb = model
    return [f"model.n_head={a}", f"model.n_embd={h}", f"model.seq_len={P.SP_SEQ}", "model.vocab_size=51200"]


def job_list(batches):
    jobs = []
    for b in batches:
        for label, cfg, t, *_ in P.WEAK_MODELS:
            jobs.append((f"weak_b{b}_tp{t}", cfg, t, [f"train.global_batch={b}"]))
        for t in P.STRONG_SPEEDUP:
            jobs.append((f"strong_b{b}_tp{t}", P.STRONG_CONFIG, t, [f"train.global_batch={b}"]))
    for label, cfg, t, *_ in P.WEAK_MODELS:
        jobs.append((f"weakmdp_tp{t}", cfg, t * P.MDP_DP, [f"train.global_batch={P.MDP_BATCH}"]))
    for m in P.SP_MODELS:
        name, L, gb, mb = m[0], m[3], m[7], m[8]
        dims = sp_dims(m)
        if m[5] == 1:  # no pipeline: the whole model is one step here too
            jobs.append((f"sp_{name}", P.SP_CONFIG, 8, dims + [f"model.n_layer={L}", f"train.global_batch={gb}"]))
        # one and two layers, at two micro-batch sizes at least: a layer's activations by difference
        mem_batch = P.SP_MEM_BATCH[name]
        for n in (1, 2):
            jobs.append((f"spmem_{name}_L{n}", P.SP_CONFIG, 8, dims + [f"model.n_layer={n}", f"train.global_batch={mem_batch}"]))
            if name == "22B":
                jobs.append((f"spmem1_{name}_L{n}", P.SP_CONFIG, 1,
                             dims + [f"model.n_layer={n}", f"train.global_batch={mem_batch}"]))
    return jobs


def slurm_jobs():
    return [(f"slurm_tp{t}_dp{P.MDP_DP}", cfg, t, P.MDP_DP, P.MDP_BATCH, P.MDP_MICRO)
            for label, cfg, t, *_ in P.WEAK_MODELS]


# ---- reading ------------------------------------------------------------------------
def read_plan(path):
    """The --plan-json lines of one job, or [] when the file is missing."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            raw = raw.strip()
            if not raw:
                continue
            try:
                o = json.loads(raw)
            except json.JSONDecodeError as e:
                raise SystemExit(f"paper_tables.py: {path}: line {n} is not JSON ({e.msg})")
            if not isinstance(o, dict) or "tp" not in o or "bytes" not in o:
                raise SystemExit(f"paper_tables.py: {path}: line {n} has no tp or bytes field")
            out.append(o)
    return out


def pick(lines, tp, dp, sp, rc, mb, zero=0):
    for o in lines:
        if (o.get("tp"), o.get("dp"), bool(o.get("sp")), o.get("recompute"), o.get("micro_batch"), o.get("zero", 0)) == \
                (tp, dp, sp, rc, mb, zero):
            return o
    return None


def num(v):
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def plan_source(o):
    """How a plan line timed its layout: the label every row of ours carries."""
    tm = o.get("time_model") if o else None
    if tm == "calibrated":
        return "calibrated projection"
    if tm == "none":
        return "no time model"
    return "FLOPs-assumed projection"  # "flops_assumed", or a planner from before time_model


def plan_ms(o, key):
    """A time of a plan line, None when it has no time model."""
    if not o or plan_source(o) == "no time model":
        return None
    return num(o.get(key))


def read_sweep(d):
    """The rows of a sweep's table.tsv (scripts/weak_scaling.sh, strong_scaling.sh), if any."""
    path = os.path.join(d, "table.tsv")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def sweep_source(mode):
    return {"real": "real", "projected": "shard run"}.get(mode, mode)


def sweep_row(r, missing, what):
    """(source, step ms, comm ms, budget bytes, efficiency %, micro-batch) of a sweep's table.tsv
    row: its efficiency is the sweep's own (against its tp=1 row, real or shard run), its
    micro-batch the one it ran ("?" from a table without the column). A row without a step
    time (its run failed) is a missing figure, named by WHAT and the run's folder."""
    if fnum(r.get("step_ms")) is None:
        missing.append(f"{what}: the {sweep_source(r['mode'])} has no step time (see {r.get('run_dir') or 'its sweep'}.out)")
    mem = fnum(r.get("budget_mib"))
    return (sweep_source(r["mode"]), fnum(r.get("step_ms")), fnum(r.get("comm_ms")), mem * MIB if mem else None,
            fnum(r.get("eff")), r.get("micro") or "?")


def node_note(o, src):
    """How a model + data parallel row's DP groups crossed nodes: a plan says whether its
    network model (interconnect.node_*) priced them; a run's crossed them for real."""
    if src == "real":
        return ""
    if o and o.get("dp_across_nodes"):
        return "; DP groups across nodes priced by the network model (interconnect.node_gpus, node_gbps)"
    return "; DP priced on the link inside a node (no node model, or no group crossing a node)"


def fnum(s):
    try:
        v = float(s)
        return v if v == v else None
    except (TypeError, ValueError):
        return None


# ---- the model's arithmetic -----------------------------------------------------------------
def dims_of(help_text, cfg, sets):
    g = lambda k: int(config_value(help_text, cfg, k, sets))  # noqa: E731
    L, H, C, V, VM, T = (g(k) for k in ("model.n_layer", "model.n_head", "model.n_embd", "model.vocab_size",
                                         "model.vocab_multiple", "model.seq_len"))
    vp = -(-V // VM) * VM
    n = vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
    return dict(L=L, H=H, C=C, T=T, n_params=n, fpt=6.0 * n + 12.0 * L * C * T)


def tflops_per_gpu(d, batch, gpus, step_ms):
    if not step_ms:
        return None
    return d["fpt"] * batch * d["T"] / gpus / (step_ms / 1e3) / 1e12


def noise_note(eff, src):
    """What an efficiency above 100% is: no layout runs faster per device than one GPU, so in
    measured rows it is noise, and in projected ones an artifact of the model."""
    if eff is None or eff <= 100.05:
        return ""
    if src in ("real", "shard run"):
        return "NOISE: above 100% (no layout runs faster per device than one GPU)"
    return "above 100%: an artifact of the projection, not a measurement"


# ---- the tables ---------------------------------------------------------------------------
class Tables:
    def __init__(self, a):
        self.a = a
        with open(a.help_text) as f:
            self.help = f.read()
        self.missing = []
        self.md = []
        self.tsv = []
        self.sweeps = {}
        self.weak_base = {}  # source -> TFLOP/s per GPU of the 1-GPU batch-8 row
        for s in a.sweep or []:
            kind, _, d = s.partition("=")
            rows = read_sweep(d)
            if not rows:
                self.missing.append(f"{kind} sweep {d}: no table.tsv (the sweep stopped before its table)")
            self.sweeps.setdefault(kind, []).extend(rows)

    def plan(self, name):
        lines = read_plan(os.path.join(self.a.plans, name + ".jsonl"))
        if not lines:
            self.missing.append(f"{name}: no --plan output")
        return lines

    def table(self, title, header, rows, key):
        self.md += [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        for r in rows:
            self.md.append("| " + " | ".join(str(c) for c in r) + " |")
            self.tsv.append([key] + [str(c) for c in r])
        self.md.append("")

    # 1909.08053 Table 1 (weak) and its 64-512 GPU columns
    def weak(self, batches):
        head = ["model", "params", "tp", "dp", "GPUs", "global batch", "micro batch", "source", "step (ms)", "comm (ms)",
                "memory per GPU (GiB)", "TFLOP/s per GPU", "efficiency (%)", "paper efficiency (%)",
                "H100 repro step (ms)", "H100 repro efficiency (%)", "note"]
        for b in batches:
            rows, base = [], {}
            mb = micro_for(b)
            for label, cfg, t, *_ in P.WEAK_MODELS:
                d = dims_of(self.help, cfg, [f"train.global_batch={b}"])
                o = pick(self.plan(f"weak_b{b}_tp{t}"), t, 1, False, "full", mb)
                if o is None:
                    self.missing.append(f"weak batch {b} tp {t}: no layout tp {t} dp 1 sp off full mb {mb}")
                ours = [(plan_source(o), plan_ms(o, "step_ms"), plan_ms(o, "comm_ms"), num(o and o.get("bytes")), None, mb)]
                for r in self.sweeps.get("weak", []):
                    if int(r["tp"]) == t and int(r["batch"]) == b and r["dp"] == "1":
                        ours.append(sweep_row(r, self.missing, f"weak batch {b} tp {t}"))
                for src, step, comm, mem, sweep_eff, row_mb in ours:
                    tf = tflops_per_gpu(d, b, t, step)
                    if t == 1 and src not in base:
                        base[src] = tf
                        if b == 8:
                            self.weak_base[src] = tf
                    eff = sweep_eff if sweep_eff is not None else (100.0 * tf / base[src] if tf and base.get(src) else None)
                    rows.append([label, human_params(d["n_params"]), t, 1, t, b, row_mb, src, fmt(step), fmt(comm),
                                 fmt(mem / GIB if mem else None, 2), fmt(tf), fmt(eff, 1),
                                 fmt(P.WEAK_EFF.get(t) if b == 8 else None, 0), fmt(P.H100_STEP_MS.get((b, t)), 0),
                                 fmt(P.H100_EFF.get((b, t)), 0), noise_note(eff, src) or "-"])
            self.table(f"arXiv 1909.08053 Table 1, weak scaling, global batch {b}", head, rows, f"weak_b{b}")
        # the model + data parallel columns: 64-way data parallelism, global batch 512
        rows, base_tf = [], self.weak_base
        for label, cfg, t, *_ in P.WEAK_MODELS:
            d = dims_of(self.help, cfg, [f"train.global_batch={P.MDP_BATCH}"])
            gpus = t * P.MDP_DP
            o = pick(self.plan(f"weakmdp_tp{t}"), t, P.MDP_DP, False, "full", P.MDP_MICRO)
            if o is None:
                self.missing.append(f"weak model+data tp {t}: no layout tp {t} dp {P.MDP_DP} mb {P.MDP_MICRO}")
            ours = [(plan_source(o), plan_ms(o, "step_ms"), plan_ms(o, "comm_ms"), num(o and o.get("bytes")), None,
                     P.MDP_MICRO)]
            for r in self.sweeps.get("slurm", []):
                if int(r["tp"]) == t and int(r["dp"]) == P.MDP_DP:
                    ours.append(sweep_row(r, self.missing, f"weak model+data tp {t}"))
            for src, step, comm, mem, _, row_mb in ours:
                tf = tflops_per_gpu(d, P.MDP_BATCH, gpus, step)
                eff = 100.0 * tf / base_tf[src] if tf and base_tf.get(src) else None
                rows.append([label, human_params(d["n_params"]), t, P.MDP_DP, gpus, P.MDP_BATCH, row_mb, src,
                             fmt(step), fmt(comm), fmt(mem / GIB if mem else None, 2), fmt(tf), fmt(eff, 1),
                             fmt(P.WEAK_MDP_EFF[t], 0), "n/a", "n/a",
                             (noise_note(eff, src) + "; " if noise_note(eff, src) else "")
                             + "against the 1-GPU batch-8 row" + node_note(o, src)])
        self.table("arXiv 1909.08053 Table 1, model + data parallel (64-way DP, global batch 512)", head, rows, "weak_mdp")

    # 1909.08053 appendix D.2 (strong)
    def strong(self, batches):
        head = ["model", "tp", "GPUs", "global batch", "micro batch", "source", "step (ms)", "comm (ms)", "speedup",
                "efficiency (%)", "paper speedup", "paper efficiency (%, computed)", "note"]
        for b in batches:
            rows, base = [], {}
            mb = micro_for(b)
            for t in P.STRONG_SPEEDUP:
                o = pick(self.plan(f"strong_b{b}_tp{t}"), t, 1, False, "full", mb)
                if o is None:
                    self.missing.append(f"strong batch {b} tp {t}: no layout tp {t} dp 1 sp off full mb {mb}")
                ours = [(plan_source(o), plan_ms(o, "step_ms"), plan_ms(o, "comm_ms"), None, None, mb)]
                for r in self.sweeps.get("strong", []):
                    if int(r["tp"]) == t and int(r["batch"]) == b and r["dp"] == "1":
                        ours.append(sweep_row(r, self.missing, f"strong batch {b} tp {t}"))
                for src, step, comm, _, sweep_eff, row_mb in ours:
                    if t == 1 and src not in base:
                        base[src] = step
                    if sweep_eff is not None:  # the sweep's own, against its own tp=1 row
                        eff = sweep_eff
                        sp = eff * t / 100.0
                    else:
                        sp = base[src] / step if step and base.get(src) else None
                        eff = 100.0 * sp / t if sp else None
                    ps = P.STRONG_SPEEDUP[t] if b == 8 else None
                    rows.append(["1.2B", t, t, b, row_mb, src, fmt(step), fmt(comm), fmt(sp, 2), fmt(eff, 1), fmt(ps, 2),
                                 fmt(100.0 * ps / t if ps else None, 1), noise_note(eff, src) or "-"])
            self.table(f"arXiv 1909.08053 appendix D.2, strong scaling of 1.2B, global batch {b}", head, rows,
                       f"strong_b{b}")

    # 2205.05198 Table 2 (activation memory per layer)
    def layer_activations(self, name, tp, sp, rc, mb):
        """Bytes one layer keeps at micro-batch mb, from the planner's budgets of a 1- and a 2-layer
        model: the difference is a layer's parameters, gradients and optimizer state (fixed) plus
        its activations (in proportion to the micro-batch), so two micro-batch sizes separate them.
        Returns (bytes, the largest departure from proportion in bytes) or (None, why)."""
        suffix = "spmem1" if tp == 1 else "spmem"
        l1, l2 = self.plan(f"{suffix}_{name}_L1"), self.plan(f"{suffix}_{name}_L2")
        per = {}
        for o in l2:
            if (o["tp"], o["dp"], bool(o["sp"]), o["recompute"], o.get("zero", 0)) == (tp, 1, sp, rc, 0):
                o1 = pick(l1, tp, 1, sp, rc, o["micro_batch"])
                if o1:
                    per[o["micro_batch"]] = o["bytes"] - o1["bytes"]
        if 1 not in per or 2 not in per:
            return None, f"{name} tp {tp} sp {sp} {rc}: planner lines for micro-batch 1 and 2 missing"
        a = per[2] - per[1]
        worst = max(abs(per[m] - per[1] - (m - 1) * a) for m in per)
        return mb * a, worst

    def memory(self):
        head = ["model", "layout", "tp", "sp", "recompute", "micro batch", "paper formula (Table 2)", "paper (MiB)",
                "trainer budget (MiB)", "trainer / paper", "source", "note"]
        rows = []
        for m in P.SP_MODELS:
            name, a, h, L, t, pp, gpus, gb, mb = m
            for row, tp, sp, rc, text, f in P.SP_MEMORY_ROWS:
                if name != "22B" and row not in ("full recompute", "TP + SP + selective"):
                    continue
                paper = f(P.SP_SEQ, mb, h, a, tp)
                ours, worst = self.layer_activations(name, tp, sp, rc, mb)
                if ours is None:
                    self.missing.append(worst)
                notes = []
                if rc == "none" or tp == 1:
                    notes.append("flash attention keeps no attention core (the paper's 5as/h term)")
                if worst and ours is not None and worst > 0:
                    notes.append(f"not proportional to the micro-batch by {worst} bytes")
                rows.append([name, row, tp, "on" if sp else "off", rc, mb, text, fmt(paper / MIB, 1),
                             fmt(ours / MIB if ours is not None else None, 1),
                             fmt(ours / paper if ours is not None else None, 3), "planner budget",
                             "; ".join(notes) or "-"])
        self.table("arXiv 2205.05198 Table 2, activation memory of one layer (16-bit activations)", head, rows, "memory")

    # 2205.05198 Table 4 (one 22B layer)
    def layer_comm(self, name, tp, sp, rc, mb):
        """One layer's communication for one micro-batch, and the part of it not modeled as hidden
        behind compute, in ms: the difference between the plans of a 2- and a 1-layer model
        (comm_ms, less tp_hidden_ms_modeled), over the step's micro-batches."""
        l1, l2 = self.plan(f"spmem_{name}_L1"), self.plan(f"spmem_{name}_L2")
        o1, o2 = pick(l1, tp, 1, sp, rc, mb), pick(l2, tp, 1, sp, rc, mb)
        if not o1 or not o2 or num(o1.get("comm_ms")) is None or num(o2.get("comm_ms")) is None:
            return None, None
        n_micro = P.SP_MEM_BATCH[name] // mb
        comm = (o2["comm_ms"] - o1["comm_ms"]) / n_micro
        hidden = ((num(o2.get("tp_hidden_ms_modeled")) or 0.0) - (num(o1.get("tp_hidden_ms_modeled")) or 0.0)) / n_micro
        return comm, comm - hidden

    def layer_ms(self, name, o, tp, sp, rc, mb):
        """(forward, backward with recompute, layer total) of one layer and micro-batch in ms: the
        planner's compute (layer_*_ms) plus the communication it leaves exposed; None without a
        time model. Also (comm, exposed comm)."""
        fw, bw, rec = (plan_ms(o, k) for k in ("layer_forward_ms", "layer_backward_ms", "layer_recompute_ms"))
        comm, exposed = self.layer_comm(name, tp, sp, rc, mb)
        if o is not None and (fw is None or bw is None) and plan_source(o) != "no time model":
            self.missing.append(f"{name} tp {tp} sp {'on' if sp else 'off'} {rc}: the planner gives no per-layer "
                                "times (layer_forward_ms, layer_backward_ms: a planner with --calibrate)")
        back = bw + (rec or 0.0) if bw is not None else None
        total = fw + back + exposed if fw is not None and back is not None and exposed is not None else None
        return fw, back, total, comm, exposed

    def layer_time(self):
        head = ["layout", "sp", "recompute", "source", "forward compute (ms)", "backward compute incl. recompute (ms)",
                "comm (ms)", "comm exposed (ms)", "combined (ms)", "overhead (%)", "paper forward", "paper backward",
                "paper combined", "paper overhead (%)"]
        m = P.SP_MODELS[0]
        lines = self.plan("sp_22B")
        rows, base, pbase = [], None, None
        for row, sp, rc, pf, pb in P.SP_LAYER_TIME:
            o = pick(lines, 8, 1, sp, rc, m[8])
            if o is None:
                self.missing.append(f"22B tp 8 sp {'on' if sp else 'off'} {rc}: no layout")
            fw, back, comb, comm, exposed = self.layer_ms("22B", o, 8, sp, rc, m[8])
            if rc == "none" and not sp:
                base, pbase = comb, pf + pb
            over = 100.0 * (comb / base - 1) if comb and base else None
            rows.append([row, "on" if sp else "off", rc, plan_source(o), fmt(fw), fmt(back), fmt(comm), fmt(exposed),
                         fmt(comb), fmt(over, 1), fmt(pf, 1), fmt(pb, 1), fmt(pf + pb, 1),
                         fmt(100.0 * ((pf + pb) / pbase - 1), 0)])
        self.table("arXiv 2205.05198 Table 4, one 22B layer at TP 8 (micro-batch 4, s 2048)", head, rows, "layer_time")

    # 2205.05198 Table 5 (per layer, each model at its TP)
    def layer_iteration(self):
        head = ["model", "heads", "hidden", "layers", "tp", "paper pp", "micro batch", "source",
                "full recompute, per layer (ms)", "SP + selective, per layer (ms)", "throughput increase (%)",
                "our step, full / SP + selective (s)", "paper iteration, full / present (s)",
                "paper per layer, computed (ms)", "paper increase (%)", "paper MFU (%)"]
        rows = []
        for m in P.SP_MODELS:
            name, a, h, L, t, pp, gpus, gb, mb = m
            lines = self.plan(f"sp_{name}") if pp == 1 else self.plan(f"spmem_{name}_L2")
            per, step, src = [], [], "n/a"
            for sp, rc in ((False, "full"), (True, "selective")):
                o = pick(lines, t, 1, sp, rc, mb)
                if o is None:
                    self.missing.append(f"{name} tp {t} sp {'on' if sp else 'off'} {rc} mb {mb}: no layout")
                src = plan_source(o)
                per.append(self.layer_ms(name, o, t, sp, rc, mb)[2])
                step.append(plan_ms(o, "step_ms") if pp == 1 else None)
            inc = 100.0 * (per[0] / per[1] - 1) if per[0] and per[1] else None
            full_s, present_s, paper_inc, mfu = P.SP_ITERATION[name]
            # a GPU's share of an iteration: L/pp layers for gb/mb micro-batches (bubble and optimizer included)
            share = (L / pp) * (gb / mb)
            rows.append([name, a, h, L, t, pp, mb, src, fmt(per[0]), fmt(per[1]), fmt(inc, 1),
                         " / ".join(fmt(s / 1e3 if s else None, 3) for s in step) if pp == 1 else "n/a (no pipeline here)",
                         f"{full_s:.2f} / {present_s:.2f}",
                         f"{fmt(1e3 * full_s / share)} / {fmt(1e3 * present_s / share)}",
                         fmt(paper_inc, 1), fmt(mfu, 1)])
        self.table("arXiv 2205.05198 Table 5, per layer at each model's TP (Table 3's shapes)", head, rows, "iteration")


def cmd_build(argv):
    ap = argparse.ArgumentParser(prog="paper_tables.py build")
    ap.add_argument("--plans", required=True)
    ap.add_argument("--help-text", required=True)
    ap.add_argument("--info", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", default="8,20")
    ap.add_argument("--sweep", action="append")
    a = ap.parse_args(argv)
    batches = [int(x) for x in a.batches.split(",")]
    info = []
    with open(a.info) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("\t")
            info.append((k, v))
    t = Tables(a)
    t.weak(batches)
    t.strong(batches)
    t.memory()
    t.layer_time()
    t.layer_iteration()
    head = ["# The Megatron papers' tables, with ours beside them", ""]
    head += [f"- {k}: `{v}`" if k == "command" else f"- {k}: {v}" for k, v in info]
    head += ["- sources: **calibrated projection** = `train_gpt --plan --calibrate` (times priced from the measured op "
             "table above, the layout's shard shapes, micro-batch and recompute; communication from the link model); "
             "**FLOPs-assumed projection** = `--plan` without a calibration (FLOPs at an assumed fraction of peak); "
             "**no time model** = `--plan` had none (times n/a); **planner budget** = the bytes the trainer "
             "allocates, exact; **shard run** = one GPU ran rank 0's shard (`parallel.project=true`), communication "
             "modeled; **real** = every rank ran. Paper and H100 columns are published figures; "
             "*computed* ones are derived from them. See docs/paper_tables.md.", ""]
    if t.missing:
        head += ["## Missing figures", ""] + [f"- {m}" for m in t.missing] + [""]
    text = "\n".join(head + t.md)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "tables.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(a.out, "tables.tsv"), "w") as f:
        for r in t.tsv:
            f.write("\t".join(c.replace("\t", " ") for c in r) + "\n")
    print(text)
    return 1 if t.missing else 0


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) >= 2 else 2
    cmd, argv = sys.argv[1], sys.argv[2:]
    if cmd == "jobs":
        ap = argparse.ArgumentParser(prog="paper_tables.py jobs")
        ap.add_argument("--batches", default="8,20")
        a = ap.parse_args(argv)
        for name, cfg, dev, sets in job_list([int(x) for x in a.batches.split(",")]):
            print(f"{name}\t{cfg}\t{dev}\t" + "\x1f".join(sets))
        return 0
    if cmd == "micro":
        ap = argparse.ArgumentParser(prog="paper_tables.py micro")
        ap.add_argument("--batches", default="8,20")
        a = ap.parse_args(argv)
        for b in [int(x) for x in a.batches.split(",")]:
            print(f"{b}\t{micro_for(b)}")
        return 0
    if cmd == "slurm-jobs":
        for j in slurm_jobs():
            print("\t".join(str(x) for x in j))
        return 0
    if cmd == "build":
        return cmd_build(argv)
    print(f"paper_tables.py: unknown command {cmd}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
