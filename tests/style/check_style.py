"""The codebase's size and layering rules, checked on the product sources.

- no product file over 600 lines, no function over 80 lines;
- every header opens with a comment saying what the module is for;
- no system(), popen() or exec*() anywhere in product code (no shell);
- folders are layers with no cycle: each includes only itself and those below
  it (util < data, parallel < kernels < model < train < train_gpt.c);
- train_gpt.c includes no kernel file.

usage: check_style.py ROOT    (prints ok / not ok lines)
"""
import os
import re
import sys

root = sys.argv[1]
PRODUCT = ["util", "data", "parallel", "kernels", "model", "train"]
# What each folder may include besides itself.
ALLOWED = {
    "util": set(),
    "data": {"util"},
    "parallel": {"util"},
    "kernels": {"util", "parallel"},
    "model": {"util", "parallel", "kernels"},
    "train": {"util", "data", "parallel", "kernels", "model"},
}
MAX_FILE, MAX_FUNC = 600, 80


def product_files():
    out = [os.path.join(root, "train_gpt.c")]
    for top in PRODUCT:
        for d, _, names in os.walk(os.path.join(root, top)):
            out += [os.path.join(d, n) for n in sorted(names) if n.endswith((".c", ".h", ".cu", ".cuh"))]
    return out


def strip_comments_and_strings(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])*'", "''", text)


def functions(text):
    """(name, first line, line count) of each function body at file scope."""
    code = strip_comments_and_strings(text)
    depth, start, head, found = 0, None, "", []
    for lineno, line in enumerate(code.split("\n"), 1):
        for ch in line:
            if ch == "{" and depth == 0 and re.search(r'\b(namespace\s*\w*|extern\s*""?)\s*$', head):
                head = ""  # a namespace or extern "C" block: its contents are at file scope
                continue
            if ch == "}" and depth == 0:
                head = ""  # the end of such a block
                continue
            if ch == "{":
                if depth == 0 and "(" in head and not re.search(r"\b(struct|enum|union)\b[^(]*$", head) \
                        and "=" not in head.split("(")[0]:
                    m = re.search(r"(\w+)\s*\([^()]*(\([^()]*\)[^()]*)*\)\s*(const\s*)?$", head.strip())
                    start = (m.group(1) if m else "?", lineno)
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0 and start:
                    found.append((start[0], start[1], lineno - start[1] + 1))
                    start = None
                if depth == 0:
                    head = ""
            elif depth == 0:
                head += ch
                if ch == ";":
                    head = ""
        if depth == 0:
            head += " "
    return found


def layer_of(path):
    rel = os.path.relpath(path, root)
    return rel.split(os.sep)[0] if os.sep in rel else "main"


bad = {"file_size": [], "function_size": [], "header_comment": [], "no_shell": [], "layers": [], "main_no_kernels": []}
for path in product_files():
    rel = os.path.relpath(path, root)
    text = open(path, encoding="utf-8", errors="replace").read()
    lines = text.count("\n")
    if lines > MAX_FILE:
        bad["file_size"].append(f"{rel} {lines} lines")
    for name, first, n in functions(text):
        if n > MAX_FUNC:
            bad["function_size"].append(f"{rel}:{first} {name} {n} lines")
    if path.endswith((".h", ".cuh")) and not text.lstrip().startswith(("/*", "//")):
        bad["header_comment"].append(rel)
    if re.search(r"\b(system|popen|execl|execlp|execle|execv|execvp|execvpe)\s*\(", strip_comments_and_strings(text)):
        bad["no_shell"].append(rel)
    layer = layer_of(path)
    for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
        top = inc.split("/")[0]
        if top not in PRODUCT or layer == "main" and top != "kernels":
            continue
        if layer == "main":
            bad["main_no_kernels"].append(f"{rel} includes {inc}")
        elif top != layer and top not in ALLOWED[layer]:
            bad["layers"].append(f"{rel} ({layer}) includes {inc}")

for name, items in bad.items():
    if items:
        print(f"not ok style_{name} - {len(items)}: {'; '.join(items[:8])}")
    else:
        print(f"ok style_{name}")
sys.exit(1 if any(bad.values()) else 0)
