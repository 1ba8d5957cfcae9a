#!/usr/bin/env python3
"""What each CUDA kernel asks of the GPU, checked where no GPU is: ptxas's
registers, spills and static shared memory (from `make GPU=1`, which keeps
nvcc's --resource-usage report beside each object as X.o.ptxas) set beside
the block sizes and dynamic shared memory that the kernels are launched with
under the CPU emulation (EMU_LAUNCH_LOG, tests/emu). The emulation runs every
launch, but cannot see registers: a block that needs more than the 65,536 of
an SM fails on the GPU with "too many resources requested for launch".

  kernel_resources.py --build DIR --launches LOG [--check]

Without --check: a table per architecture (registers, threads, shared memory,
resident blocks per SM). With --check, one line per check as tests/run.sh
counts them ("ok NAME" / "not ok NAME - why"), and exit status 1 on any
failure. For every kernel of every architecture ptxas compiled:
  - it was launched under the emulation (else its launch size is unknown);
  - registers (allocated per warp in steps of 256) times its largest block
    fit in the SM's register file;
  - static plus its largest dynamic shared memory fit in a block's limit;
  - on sm_90 (the GPU the project is tuned for) nothing spills to local
    memory: a spill in a hot kernel costs more than it saves (on sm_80 a
    spill is printed, not failed);
  - on sm_90 ptxas gives no advisory about it ("(C7511) Potential
    Performance Loss: wgmma.mma_async instructions are serialized ...",
    "(C7517) warpgroup.wait is injected ...", "(C7508) ... 'setmaxnreg'
    ignored ...", which names no function and so counts against every
    kernel of its object): each is a wgmma pipeline or a register split
    that the source asked for and the machine code does not keep;
and every launched kernel is one ptxas compiled (else names went astray),
and every architecture of LIMITS was compiled for (a build for one, with
CUDA_SM, would leave the other's limits unchecked).
Kernels of the libraries (cub::, thrust::) are theirs and not checked.

A kernel is named by its source file and its name without template
arguments: instantiations of one template count as one, with the most
registers and shared memory of any instantiation and the largest block and
dynamic shared memory of any launch. Standard library only; c++filt
(binutils) demangles.
"""
import argparse
import collections
import os
import re
import subprocess
import sys

# Per-architecture limits (CUDA C++ Programming Guide, compute capabilities).
LIMITS = {
    "sm_80": {"regs_sm": 65536, "regs_block": 65536, "smem_block": 163 << 10, "smem_sm": 164 << 10,
              "threads_sm": 2048, "blocks_sm": 32},
    "sm_90": {"regs_sm": 65536, "regs_block": 65536, "smem_block": 227 << 10, "smem_sm": 228 << 10,
              "threads_sm": 2048, "blocks_sm": 32},
}
SMEM_RESERVED = 1 << 10      # per resident block, taken by the system from the SM's shared memory (sm_80+)
STRICT_SPILLS = {"sm_90"}    # where a spill fails the check
LIBRARY_PREFIXES = ("cub::", "thrust::", "cuda::")

Kernel = collections.namedtuple("Kernel", "source name qualified arch regs smem stack spill_st spill_ld advisories")
# ptxas's advisory: "ptxas info    : (C7511) Potential Performance Loss: ... in the function 'NAME'", or one that
# names no function ("(C7508) ... 'setmaxnreg' ignored; ...", printed before the object's first entry)
ADVISORY = re.compile(r"\((C\d{4})\) (.*?)(?:\s+in (?:the )?function '([^']+)')?\.?$")


def arch_family(arch):
    """sm_90a -> sm_90: the limits and rules of the family."""
    m = re.match(r"(sm_\d+)", arch)
    return m.group(1) if m else arch


def base_name(text):
    """`void (anonymous namespace)::k<128>(float*)` or `ns::k<T, int>` -> (k, qualified prefix + k)."""
    text = text.replace("(anonymous namespace)::", "")
    text = re.sub(r"^void\s+", "", text.strip())
    cut = min([i for i in (text.find("<"), text.find("(")) if i >= 0] or [len(text)])
    qualified = text[:cut].strip()
    return qualified.split("::")[-1], qualified


def demangle(names):
    """Itanium names -> readable ones (c++filt); a name it cannot read stays as it is."""
    if not names:
        return {}
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("kernel_resources.py: c++filt (binutils) is needed to read ptxas's kernel names: %s" % e)
    return dict(zip(names, out.splitlines()))


def parse_ptxas(text, source):
    """ptxas's --resource-usage report of one object -> [Kernel] (entry functions only)."""
    entries, cur, prev = [], None, ""
    # mangled name -> ["(C7511) Potential Performance Loss: ...", ...]; None: those naming no function, which
    # count against every entry of the object
    advisories = collections.defaultdict(list)
    for line in text.splitlines():
        m = ADVISORY.search(line)
        if m and line.startswith("ptxas"):
            note = "(%s) %s" % (m.group(1), re.sub(r" (?:in )?around line \d+", "", m.group(2)))
            if m.group(3) is None:
                note += " (naming no function: said of this object)"
            if note not in advisories[m.group(3)]:
                advisories[m.group(3)].append(note)
            continue
        m = re.search(r"Compiling entry function '([^']+)' for '([^']+)'", line)
        if m:
            cur = {"mangled": m.group(1), "arch": m.group(2), "regs": None, "smem": 0, "stack": 0, "st": 0, "ld": 0}
            entries.append(cur)
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and "Function properties for %s" % cur["mangled"] in prev:
            cur["stack"], cur["st"], cur["ld"] = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", line)
        if m and cur["regs"] is None:
            cur["regs"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            cur["smem"] = int(s.group(1)) if s else 0
        prev = line
    for e in entries:
        if e["regs"] is None:
            raise ValueError("%s: ptxas names entry %s for %s but no registers" % (source, e["mangled"], e["arch"]))
    readable = demangle(sorted({e["mangled"] for e in entries}))
    kernels = []
    for e in entries:
        name, qualified = base_name(readable.get(e["mangled"], e["mangled"]))
        kernels.append(Kernel(source, name, qualified, arch_family(e["arch"]), e["regs"], e["smem"], e["stack"], e["st"],
                              e["ld"], tuple(advisories.get(e["mangled"], []) + advisories.get(None, []))))
    return kernels


def parse_launches(text, where):
    """EMU_LAUNCH_LOG lines `file<TAB>line<TAB>kernel<TAB>threads<TAB>dynamic bytes` -> {(source, name): [...]}."""
    launches = collections.defaultdict(list)
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        f = line.split("\t")
        if len(f) != 5 or not f[3].isdigit() or not f[4].isdigit():
            raise ValueError("%s:%d: not a launch line (file, line, kernel, threads, bytes): %r" % (where, i, line))
        name, _ = base_name(f[2])
        launches[(os.path.normpath(f[0]), name)].append((int(f[3]), int(f[4]), "%s:%s" % (f[0], f[1])))
    return launches


def block_registers(regs, threads):
    """Registers a block takes: per warp, regs rounded up to 8 a thread (256 a warp)."""
    warps = (threads + 31) // 32
    return warps * 32 * ((regs + 7) // 8 * 8)


def resident_blocks(lim, regs, threads, smem):
    """Blocks of this kind one SM holds at once (0: none fits)."""
    by_regs = lim["regs_sm"] // block_registers(regs, threads) if regs else lim["blocks_sm"]
    by_threads = lim["threads_sm"] // threads
    by_smem = lim["smem_sm"] // (smem + SMEM_RESERVED)
    return min(lim["blocks_sm"], by_regs, by_threads, by_smem)


def merge(kernels):
    """Our kernels (not the libraries'), instantiations of one (source, name,
    arch) merged -> the most of each resource."""
    merged = {}
    for k in kernels:
        if k.qualified.startswith(LIBRARY_PREFIXES):
            continue
        key = (k.source, k.name, k.arch)
        m = merged.get(key)
        merged[key] = k if m is None else m._replace(regs=max(m.regs, k.regs), smem=max(m.smem, k.smem),
                                                     stack=max(m.stack, k.stack), spill_st=max(m.spill_st, k.spill_st),
                                                     spill_ld=max(m.spill_ld, k.spill_ld),
                                                     advisories=m.advisories + tuple(a for a in k.advisories
                                                                                     if a not in m.advisories))
    return merged


def check(kernels, launches):
    """[(ok, name, why)] over every kernel and launch."""
    results = []
    merged = merge(kernels)
    compiled = {(s, n) for (s, n, _) in merged}
    built = {a for (_, _, a) in merged}
    for arch in sorted(LIMITS):
        results.append((arch in built, "%s compiled for" % arch,
                        "ptxas compiled no kernel for %s (only %s): make GPU=1 without CUDA_SM builds sm_80 and sm_90a" %
                        (arch, ", ".join(sorted(built)) or "none")))
    for (source, name, arch), k in sorted(merged.items()):
        tag = "%s %s %s" % (arch, os.path.basename(source), name)
        lim = LIMITS.get(arch)
        if lim is None:
            results.append((False, tag, "no limits known for %s (add them to LIMITS)" % arch))
            continue
        runs = launches.get((source, name))
        if not runs:
            results.append((False, tag + " launched", "never launched under the emulation: its block size is unknown"))
            continue
        threads = max(t for t, _, _ in runs)
        dyn = max(b for _, b, _ in runs)
        at = next(w for t, _, w in runs if t == threads)
        need = block_registers(k.regs, threads)
        results.append((need <= lim["regs_block"], tag + " registers",
                        "%d registers x %d threads (%s) = %d, over the %d of an SM: too many resources requested for "
                        "launch" % (k.regs, threads, at, need, lim["regs_block"])))
        smem = k.smem + dyn
        results.append((smem <= lim["smem_block"], tag + " shared memory",
                        "%d static + %d dynamic bytes, over %s's %d a block" % (k.smem, dyn, arch, lim["smem_block"])))
        spilled = k.spill_st + k.spill_ld + k.stack
        if arch in STRICT_SPILLS:
            results.append((spilled == 0, tag + " no spills",
                            "%d bytes stack frame, %d bytes spill stores, %d bytes spill loads" %
                            (k.stack, k.spill_st, k.spill_ld)))
            results.append((not k.advisories, tag + " no ptxas advisories",
                            "; ".join(k.advisories[:3]) + (" (and %d more)" % (len(k.advisories) - 3)
                                                           if len(k.advisories) > 3 else "")))
    for (source, name), runs in sorted(launches.items()):
        if (source, name) not in compiled:
            results.append((False, "%s %s compiled" % (os.path.basename(source), name),
                            "launched at %s but ptxas compiled no kernel of that name in %s" % (runs[0][2], source)))
    return results


def table(kernels, launches):
    """The resource table, a line per kernel of ours and architecture."""
    lines = ["%-7s %-34s %4s %5s %7s %7s %6s %s" % ("arch", "kernel", "regs", "thr", "smem", "dyn", "blk/SM", "spill")]
    for (source, name, arch), k in sorted(merge(kernels).items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        runs = launches.get((source, name), [])
        threads = max((t for t, _, _ in runs), default=0)
        dyn = max((b for _, b, _ in runs), default=0)
        lim = LIMITS.get(arch)
        blocks = resident_blocks(lim, k.regs, threads, k.smem + dyn) if lim and threads else "-"
        spill = "%d/%d" % (k.spill_st, k.spill_ld) if k.spill_st or k.spill_ld else ""
        lines.append("%-7s %-34s %4d %5s %7d %7d %6s %s" % (arch, name, k.regs, threads or "-", k.smem, dyn, blocks, spill))
    return "\n".join(lines)


def load(build, launch_log):
    kernels = []
    for dirpath, _, files in os.walk(build):
        for f in sorted(files):
            if not f.endswith(".o.ptxas"):
                continue
            path = os.path.join(dirpath, f)
            source = os.path.normpath(os.path.relpath(path, build))[: -len(".o.ptxas")] + ".cu"
            with open(path) as fh:
                kernels += parse_ptxas(fh.read(), source)
    if not kernels:
        raise ValueError("no ptxas report (*.o.ptxas) under %s: build the CUDA objects with make GPU=1 first" % build)
    with open(launch_log) as fh:
        launches = parse_launches(fh.read(), launch_log)
    return kernels, launches


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="the CUDA object directory (build/gpu)")
    ap.add_argument("--launches", required=True, help="an EMU_LAUNCH_LOG file")
    ap.add_argument("--check", action="store_true", help="checks as ok / not ok lines; exit 1 on a failure")
    a = ap.parse_args()
    try:
        kernels, launches = load(a.build, a.launches)
    except (OSError, ValueError) as e:
        sys.exit("kernel_resources.py: %s" % e)
    if not a.check:
        print(table(kernels, launches))
        return 0
    failed = 0
    for ok, name, why in check(kernels, launches):
        print("ok %s" % name if ok else "not ok %s - %s" % (name, why))
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
