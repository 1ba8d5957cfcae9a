"""Checks that the docs say what the code does, so that they cannot drift apart unseen.

- docs/flags.md maps every llm.c flag (tests/readme/llmc_flags.txt) and every Megatron-LM flag
  (tests/readme/megatron_flags.txt) in a row that mentions what the flag is about, names only
  config keys that exist, and describes a key's choices as --help does;
- the README's key table has one row per config key with --help's default, and nothing else;
- every field the trainer writes to log.jsonl is in the README's log.jsonl list;
- every option in the usage of train_gpt and of prepare (their --help) is in the README, and the
  README's multi-node and scaling commands say what they need and what runs without a GPU.

Each failure names the key, flag or field, and the file to add its row to.
Prints "ok NAME" / "not ok NAME - reason".

usage: check_docs.py ROOT TRAIN_GPT_HELP PREPARE_HELP
"""
import os
import re
import sys

root, train_help_path, prepare_help_path = sys.argv[1:4]
failed = False
SECTIONS = ("model", "train", "data", "out", "parallel", "interconnect")


def report(name, problems):
    global failed
    if problems:
        failed = True
        print(f"not ok {name} - " + "; ".join(problems))
    else:
        print(f"ok {name}")


def read(rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return f.read()


def schema(help_text):
    """{key: (default text, help text)} from --help's "Config keys" list."""
    keys = {}
    body = help_text.split("Config keys", 1)[1].split("\n")[1:]
    for line in body:
        m = re.match(r"  (\S+)\s+(\S+)\s+default (\S+)\s+(.*)$", line)
        if m:
            keys[m.group(1)] = (m.group(3), m.group(4))
    return keys


def split_row(line):
    """Cells of a Markdown row; '|' inside backticks stays in its cell."""
    cells, cur, code = [], "", False
    for ch in line.strip().strip("|"):
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            cells.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return cells + [cur.strip()]


def table_after(text, title, header_start):
    """Rows of the first table with that header after the line holding title."""
    lines = text.split("\n")
    start = next(i for i, l in enumerate(lines) if title in l)
    rows, seen = [], False
    for line in lines[start:]:
        if line.startswith("|"):
            cells = split_row(line)
            if not seen:
                if cells[0] != header_start:
                    continue
                seen = True
            elif not re.fullmatch(r"[-: ]+", cells[0]):
                rows.append(cells)
        elif seen:
            break
    return rows


def has_flag(cell, flag):
    """Whether a backticked segment of cell starts with flag as a whole word."""
    for seg in re.findall(r"`([^`]*)`", cell):
        for m in re.finditer(re.escape(flag), seg):
            before = seg[m.start() - 1] if m.start() else " "
            after = seg[m.end()] if m.end() < len(seg) else " "
            if not re.match(r"[\w-]", before) and not re.match(r"[\w-]", after):
                return True
    return False


def fixture(rel):
    return [l.rstrip("\n").split("\t") for l in open(os.path.join(root, rel), encoding="utf-8")
            if l.strip() and not l.startswith("#")]


def check_flag_table(name, rows, flags, keys):
    """Every flag of the fixture has a row that mentions its word; every key a row names exists."""
    problems = []
    for entry in flags:
        flag, word = entry[0], entry[1] if len(entry) > 1 else "-"
        mine = [r for r in rows if has_flag(r[0], flag)]
        if not mine:
            problems.append(f"{flag} has no row in docs/flags.md")
        elif word != "-" and not any(word.lower() in " ".join(r).lower() for r in mine):
            problems.append(f"the row of {flag} does not mention {word} (llm.c: {entry[2]})")
    for r in rows:
        for tok in config_tokens(" ".join(r[1:])):
            if tok not in keys:
                problems.append(f"the row of {r[0]} names {tok}, which is not a config key (--help)")
    report(name, problems)


def config_tokens(cell):
    """section.key names in a cell's backticked segments (file names left out)."""
    out = []
    for seg in re.findall(r"`([^`]*)`", cell):
        for tok in re.findall(r"[a-z_]+\.[a-z_0-9]+", seg):
            sec, leaf = tok.split(".", 1)
            if sec in SECTIONS and leaf not in ("safetensors", "json", "bin", "md", "txt", "sh"):
                out.append(tok)
    return out


def check_flag_choices(rows, keys):
    """A choice described in parentheses, as `selective` (...), reads as --help has it."""
    problems = []
    for key, (_, text) in keys.items():
        described = dict(re.findall(r"(\w+) \(([^()]*)\)", text))
        for r in rows:
            if key not in " ".join(r[1:]):
                continue
            for choice, said in re.findall(r"`(\w+)` \(([^()]*)\)", " ".join(r[1:])):
                if choice in described and said != described[choice]:
                    problems.append(f"the row of {r[0]} says {key} {choice} is ({said}); --help: ({described[choice]})")
    report("flags_md_choices_as_help", problems)


def check_key_table(readme, keys):
    rows = table_after(readme, "## Training", "key")
    problems = []
    seen = {}
    for r in rows:
        m = re.fullmatch(r"`([^`]+)`", r[0])
        if not m or len(r) < 3:
            problems.append(f"README key table row '{r[0]}' is not | `key` | `default` | meaning |")
            continue
        k, d = m.group(1), re.fullmatch(r"`([^`]*)`", r[1])
        seen[k] = d.group(1) if d else r[1]
    for k, (default, _) in keys.items():
        if k not in seen:
            problems.append(f"config key {k} (default {default}) has no row in README.md's key table")
        elif seen[k] != default:
            problems.append(f"README.md's key table gives {k} the default {seen[k]}; --help: {default}")
    for k in seen:
        if k not in keys:
            problems.append(f"README.md's key table has a row for {k}, which --help does not list")
    report("readme_key_table_is_the_schema", problems)


# Calls whose key is not a string literal, with the README's spelling of the names they write.
DYNAMIC_FIELDS = {("train/report.c", "key"): "<group>_<collective>_bytes"}


def log_fields():
    """(field, where) of every jsonl_*(line, "field", ...) call in the product sources."""
    out = []
    for top in ("train_gpt.c", "util", "data", "parallel", "kernels", "model", "train"):
        path = os.path.join(root, top)
        files = [path] if os.path.isfile(path) else [os.path.join(d, n) for d, _, ns in os.walk(path)
                                                     for n in sorted(ns) if n.endswith((".c", ".cu"))]
        for f in files:
            rel = os.path.relpath(f, root)
            for m in re.finditer(r"\bjsonl_(?:num|int|uint|bool|str|raw)\(\s*[^,]+,\s*([^,]+),", read(rel)):
                if "jsonl_line" in m.group(0):  # the functions' own definitions (train/runlog.c)
                    continue
                arg = m.group(1).strip()
                lit = re.fullmatch(r'"([^"]+)"', arg)
                out.append((lit.group(1) if lit else DYNAMIC_FIELDS.get((rel, arg), f"?{arg}"), rel))
    return out


def check_log_fields(readme):
    lines = readme.split("\n")
    start = next((i for i, l in enumerate(lines) if l.startswith("- `log.jsonl`")), None)
    problems = []
    if start is None:
        report("readme_log_fields", ["README.md has no '- `log.jsonl`' list of fields"])
        return
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines))
    listed = "\n".join(lines[start:end])
    for field, where in sorted(set(log_fields())):
        if field.startswith("?"):
            problems.append(f"{where} writes a log.jsonl field named by {field[1:]}: add its spelling to "
                            "DYNAMIC_FIELDS in tests/readme/check_docs.py")
        elif f'"{field}"' not in listed and f"`{field}`" not in listed:
            problems.append(f"log.jsonl field {field} ({where}) is missing from README.md's '- `log.jsonl`' list")
    report("readme_log_fields", problems)


def usage_flags(help_text):
    usage = help_text.split("Config keys", 1)[0]
    return sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", usage)))


def mentions(text, flag):
    return re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", text) is not None


def section(text, title):
    """The README's text from the heading title to the next heading of its level or above."""
    lines = text.split("\n")
    i = next(k for k, l in enumerate(lines) if l.strip() == title)
    level = len(title) - len(title.lstrip("#"))
    j = next((k for k in range(i + 1, len(lines))
              if re.match(r"#{1,%d} " % level, lines[k])), len(lines))
    return "\n".join(lines[i:j])


def check_cli(readme, train_help, prepare_help):
    named = "\n".join(l for l in readme.split("\n") if "train_gpt" in l)
    problems = [f"train_gpt {f} (--help) is on no line of README.md that names train_gpt" for f in usage_flags(train_help)
                if not mentions(named, f)]
    report("readme_train_gpt_options", problems)
    data = section(readme, "## Data")
    problems = [f"prepare {f} (--help) is not in README.md's Data section" for f in usage_flags(prepare_help)
                if not mentions(data, f)]
    report("readme_prepare_options", problems)


def check_commands(readme):
    """The multi-node line names the CUDA build (the shm communicator serves one node); each
    scaling command run without SCALE= says what it runs without a GPU (the tiny sweep)."""
    nnodes = [l for l in readme.split("\n") if "--nnodes" in l and l.startswith("scripts/launch.sh")]
    problems = [f"README.md's line '{l[:60]}...' does not say it needs the CUDA build (make GPU=1)"
                for l in nnodes if "GPU=1" not in l]
    if not nnodes:
        problems.append("README.md shows no scripts/launch.sh --nnodes line")
    report("readme_nnodes_needs_cuda", problems)
    sweep = section(readme, "### Scaling sweeps (the Megatron paper's tables)")
    runs = [l for l in sweep.split("\n") if re.match(r"scripts/(weak|strong)_scaling\.sh", l)]
    problems = [f"README.md's '{l.split('#')[0].strip()}' does not say that without a GPU it runs the tiny sweep"
                for l in runs if not re.search(r"without a GPU.*tiny|tiny.*without a GPU", l)]
    if not runs:
        problems.append("README.md's scaling section runs no script without SCALE=")
    report("readme_scaling_default", problems)


def main():
    train_help = open(train_help_path, encoding="utf-8").read()
    prepare_help = open(prepare_help_path, encoding="utf-8").read()
    keys = schema(train_help)
    if len(keys) < 10:
        report("help_lists_keys", [f"--help listed {len(keys)} config keys"])
        return
    flags_md, readme = read("docs/flags.md"), read("README.md")
    llmc = table_after(flags_md, "## llm.c", "llm.c")
    megatron = table_after(flags_md, "## Megatron-LM", "Megatron-LM")
    check_flag_table("flags_md_covers_llmc", llmc, fixture("tests/readme/llmc_flags.txt"), keys)
    check_flag_table("flags_md_covers_megatron", megatron, fixture("tests/readme/megatron_flags.txt"), keys)
    check_flag_choices(llmc + megatron, keys)
    check_key_table(readme, keys)
    check_log_fields(readme)
    check_cli(readme, train_help, prepare_help)
    check_commands(readme)


main()
sys.exit(1 if failed else 0)
