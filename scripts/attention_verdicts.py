#!/usr/bin/env python3
"""What a sitting's bench_attention rows decide.

    scripts/attention_verdicts.py LOG [LOG ...]

Reads bench_attention's rows from each LOG (the attention section's log of
scripts/gpu_check.sh, or bench_attention's own output: tab-separated shape,
op, block, order, ms_median, ms_min, ms_max, tflops, of_ceiling, check;
other lines are skipped) and prints, for each shape and op, every row
against its reference, fastest first: its median, its time as a fraction
of the reference's, a verdict, and for a row that beats its reference, what
to change in the code (results/gpu/README.md, "What the next GPU sitting
should run first", says why for each). A row's reference is the tuned
mma.sync shape's row (pairs first) for the mma.sync kernels' other shapes
and orders, the fused backward, and the tuned row itself; the every-run
row for every other row.

The every-run row is what kernels.attention=auto runs on compute capability
9.0 in bf16 without dropout (choose_measured_fastest in
kernels/cuda/ops_cuda.c): the forward at head size 64 is the wgmma_ws row,
elsewhere the tuned mma.sync shape in the pairs-first order; the backward at
head sizes 64 and 96 is the wgmma row with dq by slots, at 128 the tuned
mma.sync shape. Verdicts:
  clear   its slowest timed call beat the reference's fastest;
  likely  its median is at least 2% below the reference's;
  no      neither (the reference itself says "reference");
  failed  its check against the tuned shape failed: not a candidate.
Exit status 0, or 2 with a message naming the file when a file cannot be
read or holds no rows.
"""
import re
import sys

FIELDS = ("shape", "op", "block", "order", "median", "min", "max", "tflops", "of_ceiling", "check")
LIKELY = 0.98  # a median at least 2% below the every-run row's

# (op, pattern on the block name, what to change if the row beats the
# every-run one); the first pattern that matches names the action.
ACTIONS = (
    ("forward", r"^tuned:", "choose_measured_fastest (kernels/cuda/ops_cuda.c) takes the mma.sync forward at this head size"),
    ("forward", r"^\d+ query rows a warp", "fm_tuned (kernels/cuda/flash_fwd.cu) takes this block shape"),
    ("forward", r"^wgmma_ws persistent:",
     "cuda_attention_forward_wgmma_ws (kernels/cuda/flash_fwd_wgmma_ws.cu) launches the persistent instance"),
    ("forward", r"^wgmma_ws poly(\d+):",
     "cuda_attention_forward_wgmma_ws launches fw3_launch<64, false, false, {0}> (within the tolerance of the mma.sync "
     "forward then, not its bits)"),
    ("forward", r"^wgmma_ws:", "choose_measured_fastest (kernels/cuda/ops_cuda.c) takes wgmma_ws's forward at this head size"),
    ("forward", r"^wgmma:", "choose_measured_fastest (kernels/cuda/ops_cuda.c) takes the wgmma forward at this head size"),
    ("backward", r"^tuned:", "choose_measured_fastest (kernels/cuda/ops_cuda.c) leaves the wgmma backward out at this head size"),
    ("backward", r"^dq: \d+ query rows a warp",
     "fb_dq_row_tiles and fb_dkv_key_tiles (kernels/cuda/flash_bwd_mma.cuh) take this shape"),
    ("backward", r"^fused:", "the fused backward becomes every run's on devices without wgmma (flash_bwd.cu)"),
    ("backward", r"summed in the kernel, rounds of at most",
     "cuda_attention_backward_wgmma (kernels/cuda/flash_bwd.cu) asks for CUDA_WGMMA_DQ_SUMMED, its rounds capped at "
     "24 MB of slots"),
    ("backward", r"dq by slots summed in the kernel$",
     "cuda_attention_backward_wgmma (kernels/cuda/flash_bwd.cu) asks for CUDA_WGMMA_DQ_SUMMED"),
    ("backward", r"dq by the mma\.sync kernel$",
     "cuda_attention_backward_wgmma (kernels/cuda/flash_bwd.cu) asks for CUDA_WGMMA_DQ_MMA"),
    ("backward", r"K and V read from shared memory",
     "bw_kv_in_registers (kernels/cuda/flash_bwd_wgmma_tile.cuh) returns false"),
    ("backward", r"two stages of Q and dout", "bw_stages (kernels/cuda/flash_bwd_wgmma.cu) returns 2"),
    ("backward", r"rounds of at most 24 MB", "flash_backward (kernels/cuda/flash_bwd.cu) caps every run's wgmma rounds at 24 MB of slots"),
    ("backward", r"persistent", "cuda_attention_backward_wgmma takes flash_bwd_wgmma_persistent (blocks 0) at head size 64"),
    ("backward", r"^wgmma:.*dq by slots$", "choose_measured_fastest (kernels/cuda/ops_cuda.c) takes the wgmma backward at this head size"),
)


def fail(msg):
    print("attention_verdicts.py: " + msg, file=sys.stderr)
    sys.exit(2)


def parse_row(line):
    """A bench_attention row as a dict, or None for any other line."""
    parts = line.rstrip("\n").split("\t")
    if len(parts) != len(FIELDS) or not re.fullmatch(r"\d+,\d+,\d+,\d+", parts[0]):
        return None
    row = dict(zip(FIELDS, parts))
    try:
        for k in ("median", "min", "max"):
            row[k] = float(row[k])
    except ValueError:
        return None
    row["head_size"] = int(row["shape"].split(",")[3])
    return row


def read_rows(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            rows = [r for r in map(parse_row, f) if r]
    except OSError as e:
        fail("%s: %s" % (path, e.strerror))
    if not rows:
        fail("%s: no bench_attention rows (tab-separated: shape, op, block, order, ms_median, ms_min, ms_max, ...)" % path)
    return rows


def is_every_run(row):
    """Whether kernels.attention=auto runs this row's kernel (module docstring)."""
    block, hs, pairs = row["block"], row["head_size"], row["order"] == "pairs first"
    if row["op"] == "forward":
        return pairs and (block.startswith("wgmma_ws:") if hs == 64 else block.startswith("tuned:"))
    if hs in (64, 96):
        return block.startswith("wgmma:") and block.endswith("dq by slots")
    return block.startswith("tuned:")


def is_tuned(row):
    return row["block"].startswith("tuned:") and row["order"] == "pairs first"


def against_tuned(row):
    """Whether the row's reference is the tuned mma.sync row: the mma.sync
    kernels' other shapes and orders, the fused backward, and the tuned row
    itself where another row is every run's."""
    block = row["block"]
    if block.startswith("tuned:"):
        return not is_tuned(row)
    return bool(re.match(r"\d+ query rows a warp|dq: \d+ query rows a warp|fused:", block))


def action_of(row):
    if row["order"] != "pairs first":  # the tuned shape in another block order
        return ("every run's mma.sync %s takes the block order '%s' where it takes pairs first (the cuda_flash_order "
                "its launches pass)" % (row["op"], row["order"]))
    for op, pattern, text in ACTIONS:
        m = re.search(pattern, row["block"])
        if op == row["op"] and m:
            return text.format(*m.groups())
    return "no action known for this row: read results/gpu/README.md"


def checked(row):
    return row["check"] == "same bits" or row["check"].startswith("err=")


def verdict(row, base):
    if row is base:
        return "reference"
    if not checked(row):
        return "failed"
    if row["max"] < base["min"]:
        return "clear"
    if row["median"] <= LIKELY * base["median"]:
        return "likely"
    return "no"


def report(rows, out):
    groups = {}
    for r in rows:
        groups.setdefault((r["shape"], r["op"]), []).append(r)
    for (shape, op), group in groups.items():
        every = next((r for r in group if is_every_run(r)), None)
        tuned = next((r for r in group if is_tuned(r)), None)
        out.write("%s %s (reference: %s)\n" % (shape, op, "the every-run row" if every else "none"))
        if every is None:
            out.write("  no row of the kernel every run takes here (a device without wgmma?): nothing to compare\n")
            continue
        for r in sorted(group, key=lambda r: r["median"]):
            base, name = (tuned, "tuned") if against_tuned(r) and tuned else (every, "every run's")
            v = verdict(r, base)
            out.write("  %-9s %9.4f ms  %5.3f of %-11s  %s (%s)\n" %
                      (v, r["median"], r["median"] / base["median"], name, r["block"], r["order"]))
            if v in ("clear", "likely"):
                out.write("            -> %s\n" % action_of(r))


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    rows = []
    for path in argv[1:]:
        rows += read_rows(path)
    try:
        report(rows, sys.stdout)
    except BrokenPipeError:  # a pager or head that stopped reading
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
