"""Runs the README's shell blocks, so that what the README tells a user keeps working.

Every ```sh block of README.md must be preceded by a marker line:
  <!-- readme-test: run -->                     run every command line of the block
  <!-- readme-test: run except "A|B" env N=V append X -->  leave out lines containing A or B;
                                                 run the others with N=V in their environment;
                                                 append X to every line that starts ./train_gpt
                                                 (or launches it)
  <!-- readme-test: skip REASON -->              not run here (a GPU, a synopsis, ...); says why
An unmarked block is a failure, so a new block cannot slip by untested.

The commands run in a scratch tree that mirrors the repository with symbolic links (the
binaries, configs, scripts and assets as they are), so what they write (runs/, logs) lands in
the scratch tree. Prints "ok NAME" / "not ok NAME - reason".

usage: run_blocks.py REPO_ROOT SCRATCH_DIR
"""
import os
import re
import subprocess
import sys

root, scratch = sys.argv[1], sys.argv[2]
MARK = re.compile(r"<!--\s*readme-test:\s*(run|skip)\b(.*?)-->")


def blocks(text):
    """(line number, marker kind, marker args, command lines) of each sh block."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```sh":
            marker = None
            for j in (i - 1, i - 2):
                if j >= 0 and MARK.search(lines[j]):
                    marker = MARK.search(lines[j])
                    break
            k = i + 1
            while lines[k].strip() != "```":
                k += 1
            cmds = [l for l in lines[i + 1:k] if l.strip() and not l.lstrip().startswith("#")]
            out.append((i + 1, marker.group(1) if marker else None, marker.group(2).strip() if marker else "", cmds))
            i = k
        i += 1
    return out


def mirror(src, dst):
    """A tree of directories whose files are symbolic links to the repository's."""
    for d, dirs, files in os.walk(src):
        dirs[:] = [x for x in dirs if x not in (".git", "runs", "launch_logs")]
        rel = os.path.relpath(d, src)
        os.makedirs(os.path.join(dst, rel), exist_ok=True)
        for f in files:
            link = os.path.join(dst, rel, f)
            if not os.path.lexists(link):
                os.symlink(os.path.join(d, f), link)
        for x in list(dirs):  # (a copy: the loop removes the links it keeps as links)
            if os.path.islink(os.path.join(d, x)):  # assets may be a link: keep it one
                link = os.path.join(dst, rel, x)
                if not os.path.lexists(link):
                    os.symlink(os.path.realpath(os.path.join(d, x)), link)
                dirs.remove(x)


def parse_args(args):
    """run's arguments: except "A|B" (lines to leave out), env NAME=VALUE (set for the block's
    commands), append ARGS."""
    m = re.match(r'(?:except\s+"([^"]*)")?\s*(?:env\s+([A-Za-z_][A-Za-z0-9_]*)=(\S*))?\s*(?:append\s+(.*))?$', args)
    if not m:
        raise SystemExit(f"cannot read the marker arguments '{args}'")
    env = {m.group(2): m.group(3)} if m.group(2) else {}
    return (m.group(1).split("|") if m.group(1) else []), env, (m.group(4) or "").strip()


def run_line(cmd, append, env):
    cmd = re.sub(r"\s+#.*$", "", cmd)
    if append and "./train_gpt" in cmd and "--help" not in cmd:
        cmd = f"{cmd} {append}"
    p = subprocess.run(["bash", "-c", cmd], cwd=tree, env=env, capture_output=True, text=True, timeout=900)
    return p.returncode, (p.stdout + p.stderr).strip().split("\n")[-3:]


tree = os.path.join(scratch, "tree")
mirror(root, tree)
env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
bad = 0
for n, (line, kind, args, cmds) in enumerate(blocks(open(os.path.join(root, "README.md")).read()), 1):
    name = f"readme_block{n}_line{line}"
    if kind is None:
        print(f"not ok {name}_marked - no <!-- readme-test: run|skip --> line above the block")
        bad = 1
        continue
    if kind == "skip":
        print(f"skip {name} - {args or 'no reason given'}")  # not counted as a pass
        continue
    skip, block_env, append = parse_args(args)
    for c, cmd in enumerate(cmds, 1):
        if any(s and s in cmd for s in skip):
            continue
        rc, tail = run_line(cmd, append, dict(env, **block_env))
        if rc == 0:
            print(f"ok {name}_cmd{c} ({cmd[:70]})")
        else:
            bad = 1
            print(f"not ok {name}_cmd{c} - exit {rc}: {cmd[:90]}: {' | '.join(tail)[:300]}")
sys.exit(bad)
