#!/usr/bin/env python3
"""The machine instructions of each CUDA kernel, counted without a disassembler.

usage: scripts/sass_counts.py [--arch sm_90a] [--base REV] [--match TEXT] SRC.cu ...
       scripts/sass_counts.py --loads [--arch sm_90a] [--base REV] [--match TEXT] SRC.cu ...
       scripts/sass_counts.py --sass [--arch sm_90a] [--match TEXT] SRC.cu ...

Compiles each source as the Makefile does (nvcc -O3 -std=c++17 -I<tree>
-DTG_CUDA) into a cubin for one architecture and prints, per kernel (and
per device function nvcc kept out of line), its static instruction count:
the code section's 16-byte words (every instruction of sm_70 and later is
16 bytes), less the closing branch to itself and the padding NOPs. With
--base REV the same sources at git revision REV (`git archive`, so the headers
are REV's too) are counted beside them, with the difference. --match keeps
the kernels whose demangled name contains TEXT.

--loads counts, in place of the instructions, each kernel's longest run of
global loads (LDG, and cp.async's LDGSTS) with no branch, exit, call,
return or block barrier between them: ptxas schedules within a basic block,
so loads that a branch separates do not issue together (a loop unrolled
with its exit test kept between the strides gives runs of 1). Loads in one
run may still wait for each other (an add between them that uses the
first); a run is what could be in flight at once, not what is.

--sass prints the kernels' machine code instead, by an nvdisasm: $NVDISASM,
else one on PATH, else <tree>/.devtools/nvdisasm. CUDA 13 writes cubins
with a new ELF header (OSABI 0x41, ABI version 8, the SM in e_flags bits
8-15), which older nvdisasm refuses ("does not contain Cuda architecture
information"), so the cubin is given the old header first (OSABI 0x33,
version 7, e_flags SM | 0x500 | SM << 16: what CUDA 11.8's ptxas writes);
the code is the same bytes. CUDA 11.8's nvdisasm (Debian bookworm's
non-free nvidia-cuda-toolkit: `apt-get download nvidia-cuda-toolkit` with
non-free in the sources, then `dpkg-deb -x` it) reads sm_90a code so.

Why: this machine has nvcc and ptxas but neither cuobjdump nor nvdisasm, so
a kernel change's effect on the instruction stream (issue 36's "instruction
counts") is otherwise unseen until a GPU sitting. A static count is not a
dynamic one: instructions in loops count once, and nothing here is timed.
"""
import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile

INSTRUCTION_BYTES = 16  # SASS of sm_70 and later
# The low 12 bits of an sm_70+ instruction word: its opcode. A kernel's code
# ends in a branch to itself and NOPs up to a 128-byte boundary, which are
# not counted (seen in nvcc 13.0's sm_90a cubins).
OPCODE_NOP, OPCODE_BRA = 0x918, 0x947
# --loads: global loads, and what ends a basic block (nvcc 13.0's sm_90a encodings, read beside
# CUDA 11.8's nvdisasm -hex: LDG 0x981, LDGSTS 0xfae; BRA, EXIT 0x94d, CALL 0x944, RET 0x950,
# BAR 0xb1d)
OPCODES_GLOBAL_LOAD = {0x981, 0xFAE}
OPCODES_BLOCK_END = {OPCODE_BRA, 0x94D, 0x944, 0x950, 0xB1D}


def fail(msg):
    sys.exit("sass_counts.py: " + msg)


def nvcc_path():
    for cand in (os.environ.get("NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    fail("nvcc not found (set NVCC, or put CUDA's bin on PATH)")


CUDA_OSABI_13, CUDA_OSABI_OLD = 0x41, 0x33  # e_ident[EI_OSABI]: CUDA 13's cubins, CUDA 12's and before
EF_CUDA_UNIFIED_64BIT = 0x500  # EF_CUDA_TEXMODE_UNIFIED | EF_CUDA_64BIT_ADDRESS in the old e_flags


def legacy_header(data):
    """A CUDA 13 cubin (bytes) with the ELF header of CUDA 12 and before,
    which older nvdisasm reads; any other cubin unchanged."""
    if data[:4] != b"\x7fELF" or data[7] != CUDA_OSABI_13:
        return data
    sm = (struct.unpack_from("<I", data, 0x30)[0] >> 8) & 0xFF
    out = bytearray(data)
    out[7], out[8] = CUDA_OSABI_OLD, 7
    struct.pack_into("<I", out, 0x30, sm | EF_CUDA_UNIFIED_64BIT | sm << 16)
    return bytes(out)


def nvdisasm_path(tree):
    for cand in (os.environ.get("NVDISASM"), shutil.which("nvdisasm"), os.path.join(tree, ".devtools", "nvdisasm")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    fail("--sass: nvdisasm not found (set NVDISASM, or put it on PATH or at .devtools/nvdisasm; CUDA 11.8's, from "
         "Debian bookworm's non-free nvidia-cuda-toolkit package, reads sm_90a code: see --help)")


def opcodes(code):
    """The opcodes (low 12 bits) of one function's code, less the closing
    branch to itself and the NOPs that pad it."""
    words = [int.from_bytes(code[i:i + INSTRUCTION_BYTES], "little") & 0xFFF
             for i in range(0, len(code) - INSTRUCTION_BYTES + 1, INSTRUCTION_BYTES)]
    while words and words[-1] == OPCODE_NOP:
        words.pop()
    if words and words[-1] == OPCODE_BRA:
        words.pop()
    return words


def instructions(code):
    """The instructions of one function's code."""
    return len(opcodes(code))


def load_run(code):
    """The longest run of global loads in one function's code with nothing
    that ends a basic block between them (--loads)."""
    best = run = 0
    for op in opcodes(code):
        if op in OPCODES_GLOBAL_LOAD:
            run += 1
            best = max(best, run)
        elif op in OPCODES_BLOCK_END:
            run = 0
    return best


def code_sections(cubin, measure=instructions):
    """{mangled function name: measure(its code)} of an ELF64 cubin."""
    data = open(cubin, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        fail("%s: not a 64-bit ELF cubin" % cubin)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    sizes = {}
    for h in headers:
        end = data.index(b"\0", names_at + h[0])
        name = data[names_at + h[0]:end].decode()
        if name.startswith(".text."):
            sizes[name[len(".text."):]] = measure(data[h[4]:h[4] + h[5]])
    return sizes


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        fail("c++filt (binutils) is needed to read the kernels' names: %s" % e)
    return [line.replace("(anonymous namespace)::", "") for line in out.split("\n")[:len(names)]]


def build(tree, src, arch, scratch, label):
    """The cubin of tree/src built for arch (label: now or base), as the Makefile compiles it."""
    path = os.path.join(tree, src)
    if not os.path.isfile(path):
        fail("%s: no such file" % path)
    cubin = os.path.join(scratch, "%s.%s.cubin" % (src.replace("/", "_"), label))
    cmd = [nvcc_path(), "-O3", "-std=c++17", "-I" + tree, "-arch=" + arch, "-DTG_CUDA", "-cubin", path, "-o", cubin]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        fail("nvcc failed on %s:\n%s" % (path, run.stderr[-2000:]))
    return cubin


def sass(tree, src, arch, scratch, match):
    """Prints the machine code of tree/src's kernels whose demangled name contains match."""
    cubin = build(tree, src, arch, scratch, "now")
    legacy = cubin + ".legacy"
    with open(cubin, "rb") as f, open(legacy, "wb") as g:
        g.write(legacy_header(f.read()))
    run = subprocess.run([nvdisasm_path(tree), "-c", legacy], capture_output=True, text=True)
    if run.returncode != 0:
        fail("nvdisasm failed on %s's cubin: %s" % (src, run.stderr.strip()[-2000:]))
    # one section a function: ".text.<mangled>:" opens it, the next "//----" line closes it
    sections, name = [], None
    for line in run.stdout.split("\n"):
        if line.startswith(".text.") and line.endswith(":"):
            name = line[len(".text."):-1]
            sections.append((name, []))
        elif line.startswith("//---"):
            name = None
        elif name is not None:
            sections[-1][1].append(line)
    demangled = demangle([n for n, _ in sections])
    print("# %s, %s: machine code by nvdisasm" % (src, arch))
    for (_, lines), d in zip(sections, demangled):
        if match in d:
            print("## %s" % d)
            print("\n".join(lines))


def count(tree, src, arch, scratch, label, measure=instructions):
    """{demangled kernel: measure} of tree/src built for arch (label: the cubin's, now or base)."""
    counts = code_sections(build(tree, src, arch, scratch, label), measure)
    names = sorted(counts)
    return {d: counts[m] for m, d in zip(names, demangle(names))}


def archive(rev, scratch):
    """The tree at git revision rev, unpacked under scratch."""
    dest = os.path.join(scratch, "base")
    os.makedirs(dest)
    git = subprocess.run(["git", "archive", rev], capture_output=True)
    if git.returncode != 0:
        fail("git archive %s: %s" % (rev, git.stderr.decode().strip()))
    subprocess.run(["tar", "-x", "-C", dest], input=git.stdout, check=True)
    return dest


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sources", nargs="+", metavar="SRC.cu", help="paths from the repository's root")
    ap.add_argument("--arch", default="sm_90a", help="nvcc -arch (default sm_90a)")
    ap.add_argument("--base", metavar="REV", help="also count the sources at this git revision")
    ap.add_argument("--match", default="", metavar="TEXT", help="only kernels whose name contains TEXT")
    ap.add_argument("--sass", action="store_true", help="print the kernels' machine code (nvdisasm) instead of counts")
    ap.add_argument("--loads", action="store_true", help="count each kernel's longest run of global loads with no "
                    "branch between them, in place of its instructions")
    a = ap.parse_args()
    if a.sass and a.base:
        fail("--sass prints one revision's code: drop --base")
    if a.sass and a.loads:
        fail("--sass prints the code, --loads counts in it: one or the other")
    digits = a.arch.split("_")[-1].rstrip("af")
    if not digits.isdigit() or int(digits) < 70:
        fail("--arch %s: the 16-byte instruction count holds from sm_70 on" % a.arch)
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if top.returncode != 0:
        fail("not inside a git checkout (the sources are paths from its root): %s" % top.stderr.strip())
    tree = top.stdout.strip()
    with tempfile.TemporaryDirectory(prefix="sass_counts.") as scratch:
        if a.sass:
            for src in a.sources:
                sass(tree, src, a.arch, scratch, a.match)
            return
        base_tree = archive(a.base, scratch) if a.base else None
        measure = load_run if a.loads else instructions
        for src in a.sources:
            now = count(tree, src, a.arch, scratch, "now", measure)
            before = count(base_tree, src, a.arch, scratch, "base", measure) if base_tree else {}
            print("# %s, %s%s%s" % (src, a.arch, ", against " + a.base if a.base else "",
                                    ": longest runs of global loads with no branch between" if a.loads else ""))
            print("#  now    base  delta  kernel" if base_tree else "#  now  kernel")
            for name in sorted(set(now) | set(before)):
                if a.match not in name:
                    continue
                if not base_tree:
                    print("%7d  %s" % (now[name], name))
                    continue
                n, b = now.get(name), before.get(name)
                delta = "%+d" % (n - b) if n is not None and b is not None else ("new" if b is None else "gone")
                print("%7s %7s %6s  %s" % ("-" if n is None else n, "-" if b is None else b, delta, name))


if __name__ == "__main__":
    main()
