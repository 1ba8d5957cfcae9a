#!/usr/bin/env python3
"""Rewrites the kernel launches of a .cu file for the CPU emulation (tests/emu).

    prep.py IN.cu OUT.cpp

Each  NAME<<<CONFIG>>>(ARGS)  (NAME possibly qualified and with template
arguments, CONFIG of 2 to 4 items, ARGS possibly over several lines) becomes

    ::emu::launch_at("NAME", ADDRESS, __FILE__, __LINE__, ::emu::cfg(CONFIG),
                     [](auto... emu_a) { NAME(emu_a...); }, ARGS)

on the same lines, so line numbers stay those of IN (a #line directive
names IN). The arguments are evaluated once, on the host, as in CUDA; the
generic lambda lets template kernels deduce their arguments as a real call
would. ADDRESS is (const void *)&NAME when NAME carries template arguments
(the emulator checks a dynamic shared memory opt-in against it), nullptr
otherwise: a plain name may be a template whose arguments are deduced,
which has no address before the call.

Each dynamic shared memory declaration  extern __shared__ [__align__(N)] T
name[];  becomes  T *name = (T *)::emu::dynamic_shared();  (the launch's
shmem bytes; cuda_emu.h's __shared__ cannot be extern).
Comments and strings are not parsed: launches are assumed to be code.
"""
import re
import sys


def match_back(src, end, open_ch, close_ch):
    """src[end] is close_ch: the index of its matching open_ch."""
    depth = 0
    for i in range(end, -1, -1):
        if src[i] == close_ch:
            depth += 1
        elif src[i] == open_ch:
            depth -= 1
            if depth == 0:
                return i
    raise SystemExit("prep.py: unbalanced %s%s before offset %d" % (open_ch, close_ch, end))


def match_fwd(src, start, open_ch, close_ch):
    """src[start] is open_ch: the index of its matching close_ch."""
    depth = 0
    for i in range(start, len(src)):
        if src[i] == open_ch:
            depth += 1
        elif src[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i
    raise SystemExit("prep.py: unbalanced %s%s after offset %d" % (open_ch, close_ch, start))


def rewrite(src):
    out, pos, count = [], 0, 0
    while True:
        lt = src.find("<<<", pos)
        if lt < 0:
            break
        # the kernel expression: identifier (with ::) and optional <template args>
        j = lt
        while j > 0 and src[j - 1] in " \t":
            j -= 1
        name_end = j
        if src[j - 1] == ">":
            j = match_back(src, j - 1, "<", ">")
        m = re.search(r"[A-Za-z_][A-Za-z0-9_:]*$", src[:j])
        if not m:
            raise SystemExit("prep.py: no kernel name before <<< at offset %d" % lt)
        name_start = m.start()
        name = src[name_start:name_end]
        gt = src.find(">>>", lt)
        config = src[lt + 3:gt]
        k = gt + 3
        while src[k] in " \t\n":
            k += 1
        if src[k] != "(":
            raise SystemExit("prep.py: no ( after >>> for %s" % name)
        close = match_fwd(src, k, "(", ")")
        args = src[k + 1:close]
        plain = re.sub(r"\s+", " ", name)
        address = "(const void *)&%s" % name if name.rstrip().endswith(">") else "nullptr"
        call = '::emu::launch_at("%s", %s, __FILE__, __LINE__, ::emu::cfg(%s), [](auto... emu_a) { %s(emu_a...); }' % (
            plain, address, config.strip(), name)
        call += (", " + args + ")") if args.strip() else ")"
        out.append(src[pos:name_start])
        out.append(call)
        pos = close + 1
        count += 1
    out.append(src[pos:])
    return "".join(out), count


DYNAMIC_SHARED = re.compile(r"extern\s+__shared__\s+((?:__align__\s*\(\s*\d+\s*\)\s*)?)([^;\[]*?)\s*\b([A-Za-z_]\w*)\s*\[\s*\]\s*;")


def rewrite_dynamic_shared(src):
    """extern __shared__ arrays -> pointers to the launch's dynamic shared memory."""
    def pointer(m):
        elem = m.group(2).strip()
        return "%s *%s = (%s *)::emu::dynamic_shared();" % (elem, m.group(3), elem)
    return DYNAMIC_SHARED.subn(pointer, src)


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: prep.py IN.cu OUT.cpp")
    src = open(sys.argv[1]).read()
    text, count = rewrite(src)
    text, shared = rewrite_dynamic_shared(text)
    with open(sys.argv[2], "w") as f:
        f.write('#line 1 "%s"\n' % sys.argv[1])
        f.write(text)
    sys.stderr.write("prep.py: %s: %d launches, %d dynamic shared arrays\n" % (sys.argv[1], count, shared))


if __name__ == "__main__":
    main()
