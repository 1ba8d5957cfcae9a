"""Writes the link tables in this folder from the published measurements below.

Every measured number is copied here with its source; every derived number is made by a
formula in this file, named in the table it lands in. Run from the repository root:

    python3 configs/links/derive.py          # rewrite the tables
    python3 configs/links/derive.py --check  # exit 1 if a table differs from what this derives

A table row is "collective bytes busbw_GBps ranks" (parallel/comm.h, comm_link_load): bytes is
nccl-tests' size column (the whole buffer), busbw its busbw column, ranks the group size.
"""
import os
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ("all_reduce", "reduce_scatter", "all_gather")
DEGREES = (2, 4, 8)
SIZES = [1024 << i for i in range(24)]  # 1 KiB .. 8 GiB, as nccl-tests -f 2 prints them

# ---- measured ------------------------------------------------------------------------------
# [W] waynehacking8/nccl-collectives-bench, https://github.com/waynehacking8/nccl-collectives-bench
#     results/all_reduce.txt, all_gather.txt, reduce_scatter.txt: nccl-tests 2.18.3 with NCCL 2.18.3
#     on 4x H100 80GB HBM3 SXM5 under NVSwitch, -b 8 -e 8G -f 2 -g 4, 50 iterations. Out-of-place
#     time in microseconds per size; the algorithm is NCCL's own choice (Ring for all_reduce at 4
#     GPUs, per the repository's NCCL_DEBUG attribution in results/scaling_attributed/report.md).
SWEEP4_US = {
    "all_reduce": [23.67, 23.39, 23.39, 24.73, 23.96, 25.54, 26.20, 27.49, 27.69, 28.66, 27.03, 31.27, 43.41, 62.88,
                   102.10, 176.20, 325.86, 617.77, 1181.43, 2311.72, 4511.11, 8923.11, 17735.5, 35168.9],
    "all_gather": [16.85, 16.84, 16.85, 17.22, 17.78, 18.90, 19.87, 21.18, 22.53, 21.32, 22.47, 22.58, 38.79, 57.08,
                   67.42, 109.73, 194.96, 350.27, 658.98, 1268.09, 2475.82, 4819.87, 9479.24, 18732.3],
    "reduce_scatter": [21.62, 21.43, 21.52, 21.91, 22.37, 22.15, 23.07, 24.08, 25.04, 26.12, 25.98, 25.87, 35.95, 42.89,
                       62.52, 105.75, 189.19, 347.43, 663.09, 1271.80, 2439.07, 4741.30, 9440.67, 18389.0],
}
# [W] results/scaling_attributed/g{2,4,6}_{Ring,NVLS}.log: all_reduce_perf -b 256M -e 8G -f 2, NCCL 2.29.2,
#     NCCL_ALGO pinned; busbw in GB/s at 256 MiB, 512 MiB, 1, 2, 4 and 8 GiB.
LARGE_SIZES = SIZES[-6:]
RING_AR = {2: [300.48, 314.47, 327.89, 337.86, 343.85, 347.36], 4: [338.48, 348.60, 353.57, 359.14, 362.69, 364.83],
           6: [343.11, 352.03, 359.20, 361.05, 365.74, 366.96]}
NVLS_AR = {2: [199.41, 203.55, 205.76, 206.68, 206.93, 206.99], 4: [350.98, 364.83, 371.24, 374.93, 376.11, 377.20],
           6: [402.20, 408.12, 424.18, 432.23, 438.73, 443.13]}
# [J] S. Jeaugey (NVIDIA), https://github.com/NVIDIA/nccl-tests/issues/212: on 8x H100, "450GB/s is the line
#     rate. With the protocol overhead (~20%) NCCL can get an effective NVLink bandwidth of 370GB/s, which you
#     can observe as BusBw when running non-allreduce operations, or when running with NCCL_ALGO=RING";
#     with NVLink SHARP "On 8 GPUs, you should reach a peak busBw of ~480GB/s".
H100_LINE_GBPS, H100_RING8_GBPS, H100_NVLS8_GBPS = 450.0, 370.0, 480.0
# [M] Shoeybi et al., Megatron-LM, https://arxiv.org/abs/1909.08053 section 5: DGX-2H servers, "300 GB/sec
#     bandwidth between GPUs inside a server via NVSwitch". NVLink 2 on V100: six links of 25 GB/s in each
#     direction (NVIDIA, https://www.nvidia.com/en-us/data-center/nvlink/ as it read for V100), so the 300 is
#     both directions together and a ring's wire (busbw's meaning) has 150 GB/s each way.
V100_LINE_GBPS = 150.0


def factor(kind, n):
    """nccl-tests' busbw / algbw (doc/PERFORMANCE.md)."""
    return 2.0 * (n - 1) / n if kind == "all_reduce" else (n - 1) / n


def sweep4(kind):
    """busbw of [W]'s 4-GPU sweep per size, from its time column (more digits than its busbw column)."""
    return [s / (t * 1e-6) / 1e9 * factor(kind, 4) for s, t in zip(SIZES, SWEEP4_US[kind])]


def spliced(curve, large):
    """curve below 256 MiB, the measured large-size row from there on."""
    return curve[:len(SIZES) - len(large)] + large


def ring():
    """{(kind, ranks): (busbw per size, note)} with NCCL_ALGO=Ring."""
    out = {}
    r2 = RING_AR[2][0] / RING_AR[4][0]
    for k in KINDS:
        c4 = sweep4(k)
        out[(k, 4)] = (c4, "measured [W] (4 GPUs, NCCL's choice: Ring)")
        scaled2 = [b * r2 for b in c4]
        if k == "all_reduce":
            out[(k, 2)] = (spliced(scaled2, RING_AR[2]), "256 MiB and up measured [W] (NCCL_ALGO=Ring, 2 GPUs); below: "
                           "DERIVED, the 4-GPU curve x %.4f (2-GPU / 4-GPU Ring busbw at 256 MiB, one run)" % r2)
        else:
            out[(k, 2)] = (scaled2, "DERIVED: the 4-GPU %s curve x %.4f (all_reduce's 2-GPU / 4-GPU Ring ratio at "
                           "256 MiB); no 2-GPU %s measurement was found" % (k, r2, k))
        r8 = H100_RING8_GBPS / c4[-1]
        out[(k, 8)] = ([b * r8 for b in c4], "DERIVED: the 4-GPU %s curve x %.4f, so that 8 GiB reaches the %g GB/s "
                       "Ring busbw NVIDIA states for 8 GPUs [J] (6 GPUs pinned to Ring measured %.0f GB/s at 8 GiB [W])"
                       % (k, r8, H100_RING8_GBPS, RING_AR[6][-1]))
    return out


def nvls():
    """The same with NCCL_ALGO=NVLS for all_reduce (reduce_scatter and all_gather: Ring's rows)."""
    out = {key: v for key, v in ring().items() if key[0] != "all_reduce"}
    c4 = sweep4("all_reduce")
    for n in (2, 4):
        r = NVLS_AR[n][0] / RING_AR[4][0]
        out[("all_reduce", n)] = (spliced([b * r for b in c4], NVLS_AR[n]), "256 MiB and up measured [W] "
                                  "(NCCL_ALGO=NVLS, %d GPUs); below: DERIVED, the 4-GPU curve x %.4f (NVLS %d-GPU / "
                                  "Ring 4-GPU busbw at 256 MiB)" % (n, r, n))
    s8 = H100_NVLS8_GBPS / NVLS_AR[6][-1]
    large8 = [b * s8 for b in NVLS_AR[6]]
    r = large8[0] / RING_AR[4][0]
    out[("all_reduce", 8)] = (spliced([b * r for b in c4], large8), "DERIVED: 256 MiB and up, the 6-GPU NVLS "
                              "measurement [W] x %.4f so that 8 GiB reaches NVIDIA's ~%g GB/s for 8 GPUs [J]; below, "
                              "the 4-GPU curve x %.4f (that 256 MiB value / Ring 4-GPU's)" % (s8, H100_NVLS8_GBPS, r))
    return out


def auto():
    """What NCCL picks by itself on an 8-GPU HGX H100 [W]: Ring for all_reduce at 2 and 4 GPUs, NVLS from 6."""
    out = ring()
    out[("all_reduce", 8)] = nvls()[("all_reduce", 8)]
    return out


def dgx2h_v100():
    """The Ring table's overheads with V100's slower wire: per ring byte, time = H100's + (1/v - 1/h)."""
    v = V100_LINE_GBPS * H100_RING8_GBPS / H100_LINE_GBPS
    out = {}
    for (k, n), (curve, _) in ring().items():
        h = curve[-1]
        out[(k, n)] = ([1.0 / (1.0 / b + 1.0 / v - 1.0 / h) for b in curve],
                       "DERIVED from an ASSUMPTION (no DGX-2 measurement was found): the H100 Ring rows for %d "
                       "GPUs, each ring byte's time raised by 1/%.1f - 1/%.1f ns: V100's wire ASSUMED to reach the "
                       "efficiency H100 Ring does (%g/%g of its %g GB/s) in place of H100's %.1f GB/s at 8 GiB; "
                       "latency and small-message overheads ASSUMED to be H100's" % (n, v, h, H100_RING8_GBPS, H100_LINE_GBPS,
                                                                  V100_LINE_GBPS, h))
    return out


def v100_peak():
    """V100's NVLink 2 line rate at every size: no latency, no protocol overhead."""
    return {(k, n): ([V100_LINE_GBPS] * len(SIZES), "ASSUMED: the line rate, %g GB/s each way [M]" % V100_LINE_GBPS)
            for k in KINDS for n in DEGREES}


HEADERS = {
    "h100_sxm_nvlink4_ring.txt": ("8x H100 SXM5, NVLink 4 / NVSwitch (HGX), NCCL_ALGO=Ring", ring,
                                  "[W] [J]"),
    "h100_sxm_nvlink4_nvls.txt": ("8x H100 SXM5, NVLink 4 / NVSwitch (HGX), NCCL_ALGO=NVLS for all_reduce (NVLink "
                                  "SHARP); reduce_scatter and all_gather as in the Ring table", nvls, "[W] [J]"),
    "h100_sxm_nvlink4_x8.txt": ("8x H100 SXM5, NVLink 4 / NVSwitch (HGX), NCCL's own choice: all_reduce Ring at 2 and "
                                "4 GPUs, NVLS at 8 (as [W] saw NCCL choose: Ring at 2 and 4, NVLS from 6); the rest Ring",
                                auto, "[W] [J]"),
    "dgx2h_v100_nvswitch.txt": ("DGX-2H, 16x V100 SXM3 over NVLink 2 / NVSwitch (Megatron-LM's machine [M]), inside one "
                                "server", dgx2h_v100, "[M] [J] [W]"),
    "v100_nvlink2_peak.txt": ("V100's NVLink 2 peak (6 links x 25 GB/s each way): an upper bound, not a measurement",
                              v100_peak, "[M]"),
}

SOURCES = {
    "[W]": "waynehacking8/nccl-collectives-bench, https://github.com/waynehacking8/nccl-collectives-bench: nccl-tests "
           "on 4 (and 2, 6) H100 80GB HBM3 SXM5 under NVSwitch; results/{all_reduce,all_gather,reduce_scatter}.txt "
           "(1 KiB..8 GiB, 4 GPUs, NCCL 2.18.3) and results/scaling_attributed/g{2,4,6}_{Ring,NVLS}.log (all_reduce, "
           "256 MiB..8 GiB, NCCL 2.29.2, algorithm pinned)",
    "[J]": "S. Jeaugey (NVIDIA), https://github.com/NVIDIA/nccl-tests/issues/212: H100 NVLink line rate 450 GB/s; "
           "~370 GB/s busbw with NCCL_ALGO=RING or for non-allreduce collectives; ~480 GB/s peak all_reduce busbw "
           "on 8 GPUs with NVLink SHARP (NVLS), 256 MB too small to reach it",
    "[M]": "Megatron-LM, https://arxiv.org/abs/1909.08053 section 5: DGX-2H, 300 GB/s between GPUs via NVSwitch "
           "(both directions of V100's six 25 GB/s NVLink 2 links: 150 GB/s each way)",
}


def render(name):
    title, make, cites = HEADERS[name]
    sets = make()
    wrap = lambda text, indent: textwrap.wrap(text, 110, initial_indent="# " + indent,  # noqa: E731
                                              subsequent_indent="# " + indent + "    ")
    lines = wrap("Link model: " + title + ".", "") + [
             "# Written by configs/links/derive.py (edit that, not this): python3 configs/links/derive.py",
             "# Use: --set interconnect.table=configs/links/" + name + " (parallel/comm.h, comm_link).",
             "# Row: collective bytes busbw_GBps ranks; bytes = nccl-tests' size (the whole buffer), busbw = its",
             "# busbw column, ranks = the group size. Between sizes busbw is interpolated in log(size), below the",
             "# first row the time stays the first row's (latency), above the last the busbw stays. A group of",
             "# another size uses the nearest size's rows (a tie: the smaller). broadcast has no rows: the training",
             "# step runs none; it would use all_reduce's.",
             "#",
             "# Sources:"]
    for c in cites.split():
        lines += wrap("%s %s" % (c, SOURCES[c]), "  ")
    lines += ["#", "# Where each group of rows comes from (MEASURED, DERIVED by a formula, or ASSUMED):"]
    for k in KINDS:
        for n in DEGREES:
            lines += wrap("%s at %d ranks: %s." % (k, n, sets[(k, n)][1]), "  ")
    for k in KINDS:
        for n in DEGREES:
            lines.append("")
            for s, b in zip(SIZES, sets[(k, n)][0]):
                lines.append("%-14s %10d %9.4g %d" % (k, s, b, n))
    return "\n".join(lines) + "\n"


def main():
    check = sys.argv[1:] == ["--check"]
    stale = []
    for name in HEADERS:
        path = os.path.join(HERE, name)
        text = render(name)
        if check:
            try:
                with open(path, encoding="utf-8") as f:
                    same = f.read() == text
            except OSError:
                same = False
            if not same:
                stale.append(path)
        else:
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(path + ".tmp", path)
    if stale:
        print("differs from what configs/links/derive.py writes: " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
