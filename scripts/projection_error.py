#!/usr/bin/env python3
"""The projection's error, measured: each real row of one scaling sweep beside
the projected row of the same layout from another.

  projection_error.py REAL_TABLE_TSV PROJECTED_TABLE_TSV

Both are the table.tsv of scripts/weak_scaling.sh or strong_scaling.sh: the
first from a sweep with DEVICES = the GPUs (layouts that fit ran for real),
the second with DEVICES=1 (the same layouts projected from one GPU's shard).
Rows are paired by model, tp, dp, SP, recompute, global batch and
micro-batch. Prints a Markdown table: step and comm time, real and
projected, and the projection's error on the step time, (projected - real)
/ real. Exits 1 when no real row has a projected twin, 2 on a bad file.
"""
import csv
import sys

KEY = ("label", "tp", "dp", "sp", "recompute", "batch", "micro")


def load(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
    except OSError as e:
        sys.exit(f"projection_error: cannot read {path}: {e.strerror}")
    if rows and any(k not in rows[0] for k in KEY + ("mode", "step_ms", "comm_ms")):
        print(f"projection_error: {path}: not a scaling sweep's table.tsv (no {', '.join(KEY)}, mode, step_ms, comm_ms columns)",
              file=sys.stderr)
        sys.exit(2)
    return rows


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    real = [r for r in load(argv[1]) if r["mode"] == "real"]
    projected = {tuple(r[k] for k in KEY): r for r in load(argv[2]) if r["mode"] == "projected"}
    lines = ["| model | tp | dp | batch | step ms real | step ms projected | error | comm ms real | comm ms projected |",
             "|---|---|---|---|---|---|---|---|---|"]
    paired = 0
    for r in real:
        p = projected.get(tuple(r[k] for k in KEY))
        if p is None:
            continue
        a, b = num(r["step_ms"]), num(p["step_ms"])
        err = f"{100 * (b - a) / a:+.1f}%" if a and b is not None else "n/a"
        lines.append(f"| {r['label']} | {r['tp']} | {r['dp']} | {r['batch']} | {r['step_ms']} | {p['step_ms']} | {err} | "
                     f"{r['comm_ms']} | {p['comm_ms']} |")
        paired += 1
    if not paired:
        print(f"projection_error: no real row of {argv[1]} has a projected twin in {argv[2]}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
