#!/usr/bin/env bash
# Training throughput on one GPU at TP=1: train_gpt (bf16) against PyTorch
# (eager and torch.compile) on the same GPU, model and batch shapes; writes
# results/gpu_bench_<date>.md. The GPU twin of scripts/bench_cpu.sh.
# --help says it all.
set -uo pipefail
prog=bench_gpu
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 2

usage() {
    cat <<'EOF'
Usage: [OUT=DIR] [TRAIN_GPT=BIN] [PYTHON=PY] scripts/bench_gpu.sh [options]

Measures training steps on one GPU (the first one CUDA_VISIBLE_DEVICES names;
GPU 0 by default) for two models:
  gpt2_124m      configs/gpt2_124m.json: micro-batch 16, global batch 16, seq 1024
  megatron_1.2b  configs/megatron_weak_1.2b.json (the Megatron-LM paper's 1.2B:
                 40 layers, width 1536, 16 heads, vocab 51200): micro-batch 8,
                 global batch 8, seq 1024; recompute none if `train_gpt --plan`
                 says it fits in this GPU's memory, else full (PyTorch then
                 checkpoints every block too)
each with three implementations:
  train_gpt bf16   the binary, device=cuda, train.precision=bf16, random tokens;
                   ms/step: the median of log.jsonl's "ms" (CUDA events around
                   the step) from step 4 on; peak memory: its mem_peak_bytes
  PyTorch eager    scripts/bench_torch.py: the same GPT-2 (tied, padded vocab,
                   pre-LN, GELU tanh, SDPA causal attention), bf16 autocast over
                   fp32 weights, fused AdamW, grad clipping; CUDA events, median
                   from step 4 on; peak memory: torch.cuda.max_memory_allocated
  PyTorch compile  the same under torch.compile, within --compile-limit seconds
                   (compilation included); "not measured" when it runs out
tokens/s = global_batch * seq_len / median step time; MFU = flops_per_token *
tokens/s / peak, with train_gpt's flops_per_token (6N + 12 L C T, N over the
real vocabulary) and the peak train_gpt used (its device table,
kernels/cuda/ops_cuda.c), for all rows.

Writes results/gpu_bench_<YYYY-mm-dd>.md (results/gpu_bench_<date>_<models>.md
with --models) and the raw runs into runs/gpu_bench_<time>/ (log.jsonl and
stdout of each run, the plan, the commands). With OUT set, both are copied
there after every measurement, so a command cut short still brings back what
it measured.

Options:
  --quick              10 steps per run (7 timed) and --compile-limit 180 by
                       default: everything in about 6-8 minutes on one H100
                       (an estimate: not yet run on a GPU)
  --steps N            steps per run (default 20; at least 5: steps 1-3 are warm-up)
  --models LIST        comma-separated, of gpt2_124m,megatron_1.2b (default both)
  --no-compile         skip torch.compile (its rows say "not measured")
  --compile-limit S    seconds one torch.compile run may take, compilation
                       included (default 420; --quick 180)
  -h, --help           this text
Environment: TRAIN_GPT (default build/gpu/train_gpt if built, else ./train_gpt),
PYTHON (with PyTorch and CUDA; default python3), OUT (a folder to copy results to).

Refuses (exit 1, nothing measured) without a GPU (nvidia-smi lists none) or
when TRAIN_GPT was built without CUDA (make GPU=1). Exit status otherwise: 0
when every train_gpt and PyTorch eager row was measured, 1 when one was not
(the table is still written, saying why); a torch.compile that runs out of
time or fails is "not measured" and does not count. 2: bad arguments.
EOF
}
die() { echo "$prog: error: $*" >&2; exit 2; }
refuse() { echo "$prog: $*; nothing was measured" >&2; exit 1; }
say() { echo "$prog: $*"; }

orig_cmd=""
for v in OUT TRAIN_GPT PYTHON CUDA_VISIBLE_DEVICES; do
    [ -n "${!v:-}" ] && orig_cmd+="$v=$(printf '%q' "${!v}") "
done
orig_cmd+="scripts/bench_gpu.sh$(printf ' %q' "$@")"

quick=0 steps="" models="gpt2_124m,megatron_1.2b" compile=1 compile_limit=""
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --quick) quick=1; shift ;;
        --no-compile) compile=0; shift ;;
        --steps|--models|--compile-limit)
            [ $# -ge 2 ] || die "$1 needs a value"
            case "$1" in --steps) steps="$2" ;; --models) models="$2" ;; --compile-limit) compile_limit="$2" ;; esac
            shift 2 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[ -n "$steps" ] || { if [ "$quick" = 1 ]; then steps=10; else steps=20; fi; }
[ -n "$compile_limit" ] || { if [ "$quick" = 1 ]; then compile_limit=180; else compile_limit=420; fi; }
{ [[ "$steps" =~ ^[0-9]+$ ]] && [ "$steps" -ge 5 ]; } || die "--steps must be an integer of at least 5 (steps 1-3 are warm-up), got '$steps'"
[[ "$compile_limit" =~ ^[1-9][0-9]*$ ]] || die "--compile-limit must be a positive integer (seconds), got '$compile_limit'"
[[ "$models" =~ ^(gpt2_124m|megatron_1\.2b)(,(gpt2_124m|megatron_1\.2b))*$ ]] ||
    die "--models must be a comma-separated list of gpt2_124m and megatron_1.2b, got '$models'"
warmup=3          # steps left out of every median: from step 4 on
run_limit=420     # seconds a train_gpt or PyTorch eager run may take

# ---- 1. a GPU, and a train_gpt that can use it ----------------------------
if ! gpu_list=$(nvidia-smi -L 2>/dev/null) || ! grep -q '^GPU ' <<<"$gpu_list"; then
    refuse "no GPU on this machine (nvidia-smi lists none)"
fi
export CUDA_DEVICE_ORDER=PCI_BUS_ID # CUDA's device numbers as nvidia-smi's
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
gpu="${CUDA_VISIBLE_DEVICES%%,*}"
IFS=, read -r gpu_name driver mem_mib < <(nvidia-smi -i "$gpu" --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader,nounits 2>/dev/null | head -n 1)
gpu_name="$(echo "${gpu_name:-}" | sed 's/^ *//; s/ *$//')"
driver="${driver// /}" mem_mib="${mem_mib// /}"
{ [ -n "$gpu_name" ] && [[ "$mem_mib" =~ ^[0-9]+$ ]]; } || refuse "nvidia-smi -i $gpu does not describe the GPU CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES names"
cuda_driver=$(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: *[0-9.]*' | head -n 1 | sed 's/.*: *//')
others=$(nvidia-smi -i "$gpu" --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>/dev/null | tr '\n' ';')

bin="${TRAIN_GPT:-}"
if [ -z "$bin" ]; then
    if [ -x build/gpu/train_gpt ]; then bin=build/gpu/train_gpt; else bin=./train_gpt; fi
fi
[ -x "$bin" ] || refuse "$bin is missing: build it with make GPU=1"
py="${PYTHON:-python3}"
command -v "$py" >/dev/null 2>&1 || refuse "no $py (set PYTHON)"

date_utc=$(date -u +%Y-%m-%d)
stamp=$(date -u +%Y%m%d_%H%M%S)
raw="runs/gpu_bench_$stamp"
suffix=""
[ "$models" = "gpt2_124m,megatron_1.2b" ] || suffix="_${models//,/_}"
md="results/gpu_bench_${date_utc}${suffix}.md"
scratch=$(mktemp -d /tmp/bench_gpu.XXXXXX) || exit 2
trap 'rm -rf "$scratch"' EXIT

# Random tokens below GPT-2's vocabulary, in llm.c's shard format (as tests/gpu/run_gpu.sh writes them)
"$py" - "$scratch/data" <<'PY' || refuse "could not write the random-token shard"
import array, os, random, struct, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
rng, n = random.Random(7), 1 << 20
tokens = array.array("H", (rng.randrange(50257) for _ in range(n)))
if sys.byteorder == "big":
    tokens.byteswap()
with open(f"{d}/train_000000.bin", "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    tokens.tofile(f)
PY
# every run: no evaluation, no samples, no checkpoints, a progress line and a log line per step
common=(--set "data.train=$scratch/data/train_*.bin" --set data.val= --set out.eval_every=0 --set out.eval_batches=0
        --set out.sample_every=0 --set out.sample_tokens=0 --set out.save_every=0 --set out.save_final=false
        --set out.resume=false --set out.log_every=1 --set parallel.tp=1 --set parallel.dp=1 --set train.steps="$steps")

# The train_gpt build: one step of configs/tiny.json on the GPU
"$bin" --config configs/tiny.json --set device=cuda --set train.precision=bf16 "${common[@]}" --set train.steps=1 \
    --set out.dir="$scratch/probe" >"$scratch/probe.out" 2>&1
probe_rc=$?
if grep -q 'built without CUDA' "$scratch/probe.out"; then
    refuse "$bin was built without CUDA: build it with make GPU=1 (or set TRAIN_GPT)"
elif [ "$probe_rc" -ne 0 ]; then
    refuse "$bin cannot train on the GPU: $(tail -n 3 "$scratch/probe.out" | tr '\n' ' ')"
fi
mkdir -p "$raw" results || refuse "cannot create $raw"
cp "$scratch/probe.out" "$raw/probe.out"
: >"$raw/results.jsonl"
: >"$raw/commands.txt"
backend_line=$(grep -m1 '^backend:' "$raw/probe.out")
if torch_info=$("$py" scripts/bench_torch.py --check 2>&1); then torch_ok=1; else torch_ok=0; fi
torch_info=$(tail -n 1 <<<"$torch_info")
nvcc_info="unknown"
nvcc_path=$(sed -n 's/^NVCC = //p' build/gpu/cuda.mk 2>/dev/null)
[ -n "$nvcc_path" ] && [ -x "$nvcc_path" ] && nvcc_info="$("$nvcc_path" --version | grep -m1 -o 'release [0-9.]*, V[0-9.]*')"
git_rev="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || git_rev+=" (with uncommitted changes)"
say "$gpu_name (driver $driver, CUDA $cuda_driver); train_gpt $bin: $backend_line; PyTorch: $torch_info"
say "raw runs in $raw; the table goes to $md"

# ---- 2. helpers -------------------------------------------------------------
# model_setup NAME: cfg, label and shape (the --set arguments both implementations take)
model_setup() {
    case "$1" in
        gpt2_124m) cfg=configs/gpt2_124m.json label="GPT-2 124M"
            shape=(--set train.micro_batch=16 --set train.global_batch=16 --set model.seq_len=1024) ;;
        megatron_1.2b) cfg=configs/megatron_weak_1.2b.json label="Megatron 1.2B"
            shape=(--set train.micro_batch=8 --set train.global_batch=8 --set model.seq_len=1024) ;;
    esac
}
# note_cmd ARGS...: the exact command, for the table's header
note_cmd() { printf '%q ' "$@" >>"$raw/commands.txt"; echo >>"$raw/commands.txt"; }
# add_result JSON: one row of the table
add_result() { echo "$1" >>"$raw/results.jsonl"; }
# error_json KEY IMPL RECOMPUTE MESSAGE
error_json() {
    "$py" -c 'import json, sys; print(json.dumps({"key": sys.argv[1], "impl": sys.argv[2], "recompute": sys.argv[3], "error": sys.argv[4]}))' \
        "$1" "$2" "$3" "$4"
}
last_lines() { tail -n "${2:-3}" "$1" 2>/dev/null | tr '\n' ' ' | sed 's/ *$//' | cut -c1-300; }

# train_gpt_result KEY RECOMPUTE DIR: the row from DIR/log.jsonl and DIR.out
train_gpt_result() {
    "$py" - "$1" "$2" "$3" "$warmup" <<'PY'
import json, re, statistics, sys
key, recompute, d, warmup = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def parse(l):  # train_gpt writes a NaN or infinite loss as C prints it
    for bad, good in ((":-nan", ":NaN"), (":nan", ":NaN"), (":-inf", ":-Infinity"), (":inf", ":Infinity")):
        l = l.replace(bad, good)
    return json.loads(l)
lines = [parse(l) for l in open(f"{d}/log.jsonl") if l.strip()]
train = [l for l in lines if "loss" in l and "ms" in l]
timed = [l for l in train if l["step"] > warmup]
if not timed:
    sys.exit(f"{d}/log.jsonl has no train line after step {warmup}")
out = open(f"{d}.out").read()
m = re.search(r"^model: (\d+) layers, (\d+) heads, width (\d+), context \d+, vocab (\d+) \(padded (\d+)\): (\d+) parameters",
              out, re.M)
shape = dict(zip(("n_layer", "n_head", "n_embd", "vocab_size", "vocab_padded", "n_params"), (int(x) for x in m.groups())))
cfg = re.search(r"^batch: (\d+) sequences x (\d+) tokens per step = .* micro-batches of (\d+)", out, re.M)
ms = statistics.median(l["ms"] for l in timed)
gb, seq, mb = (int(x) for x in cfg.groups())
fpt = train[-1]["flops_per_token"]
# the peak train_gpt used, from its own mfu = flops_per_token * tok_per_s / peak
# (from the line of largest mfu: logged to 6 decimals), to 4 significant digits
best = max((l for l in train if l.get("mfu")), key=lambda l: l["mfu"], default=None)
peak = float(f'{best["flops_per_token"] * best["tok_per_s"] / best["mfu"] / 1e12:.4g}') if best else 0.0
tps = gb * seq / (ms / 1e3)
print(json.dumps({"key": key, "impl": "train_gpt bf16", "recompute": recompute, "micro_batch": mb, "global_batch": gb,
                  "seq_len": seq, **shape, "steps": len(train), "warmup": warmup,
                  "ms": [l["ms"] for l in train], "median_ms": ms, "tok_per_s": tps, "flops_per_token": fpt,
                  "peak_tflops": peak, "mfu": fpt * tps / (peak * 1e12) if peak > 0 else None,
                  "mem_peak_bytes": max(l.get("mem_peak_bytes", 0) for l in train)}))
PY
}

# run_train_gpt KEY RECOMPUTE: one train_gpt run; its row, or an error row; 0 when measured
run_train_gpt() {
    local key="$1" rc="$2" dir="$raw/${1}_train_gpt_$2" row
    model_setup "$key"
    local cmd=("$bin" --config "$cfg" "${shape[@]}" --set device=cuda --set train.precision=bf16
               --set train.recompute="$rc" "${common[@]}" --set out.dir="$dir")
    note_cmd "${cmd[@]}"
    say "$label, train_gpt bf16, recompute $rc, $steps steps ..."
    timeout -k 10 "$run_limit" "${cmd[@]}" >"$dir.out" 2>&1
    local status=$?
    if [ "$status" -ne 0 ]; then
        row=$(error_json "$key" "train_gpt bf16" "$rc" "failed (exit $status): $(last_lines "$dir.out")")
    elif ! row=$(train_gpt_result "$key" "$rc" "$dir" 2>&1); then
        row=$(error_json "$key" "train_gpt bf16" "$rc" "no result: $row")
        status=1
    fi
    add_result "$row"
    [ "$status" -eq 0 ]
}

# run_torch KEY RECOMPUTE PEAK eager|compile LIMIT: one bench_torch.py run
run_torch() {
    local key="$1" rc="$2" peak="$3" mode="$4" limit="$5" impl="PyTorch $4"
    local name="$raw/${key}_torch_${mode}" row status
    model_setup "$key"
    if [ "$torch_ok" != 1 ]; then
        add_result "$(error_json "$key" "$impl" "$rc" "not measured: $torch_info")"
        return 1
    fi
    local cmd=("$py" scripts/bench_torch.py --config "$cfg" "${shape[@]}" --set train.recompute="$rc"
               --steps "$steps" --warmup "$warmup" --peak-tflops "$peak" --json "$name.json")
    [ "$mode" = compile ] && cmd+=(--compile)
    note_cmd timeout -k 15 "$limit" "${cmd[@]}"
    say "$label, $impl, $steps steps (at most $limit s) ..."
    rm -f "$name.json"
    timeout -k 15 "$limit" "${cmd[@]}" >"$name.out" 2>&1
    status=$?
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        row=$(error_json "$key" "$impl" "$rc" "not measured: not done within $limit s$([ "$mode" = compile ] && echo ", compilation included")")
    elif [ "$status" -ne 0 ] || [ ! -s "$name.json" ]; then
        row=$(error_json "$key" "$impl" "$rc" "not measured: failed (exit $status): $(last_lines "$name.out")")
        [ "$status" -ne 0 ] || status=1
    else
        row=$("$py" -c 'import json, sys; r = json.load(open(sys.argv[1])); r["key"] = sys.argv[2]; print(json.dumps(r))' "$name.json" "$key")
    fi
    add_result "$row"
    [ "$status" -eq 0 ]
}

# render: the Markdown table from results.jsonl (after every measurement), copied to $OUT
render() {
    BENCH_DEVICE="$gpu_name" BENCH_DRIVER="$driver" BENCH_CUDA="$cuda_driver" BENCH_MEM_MIB="$mem_mib" \
    BENCH_NVCC="$nvcc_info" BENCH_TORCH="$torch_info" BENCH_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')" \
    BENCH_CMD="$orig_cmd" BENCH_BIN="$bin" BENCH_BACKEND="$backend_line" BENCH_GIT="$git_rev" BENCH_STEPS="$steps" \
    BENCH_WARMUP="$warmup" BENCH_PLAN="$plan_note" BENCH_OTHERS="$others" BENCH_RAW="$raw" \
    "$py" - "$raw/results.jsonl" "$raw/commands.txt" "$md" <<'PY'
import json, os, sys
results_path, commands_path, md_path = sys.argv[1:4]
E = os.environ
rows = [json.loads(l) for l in open(results_path) if l.strip()]
labels = {"gpt2_124m": "GPT-2 124M", "megatron_1.2b": "Megatron 1.2B"}
order = {"train_gpt bf16": 0, "PyTorch eager": 1, "PyTorch compile": 2}
rows.sort(key=lambda r: (list(labels).index(r["key"]), order[r["impl"]]))
GiB = 1024 ** 3
others = E["BENCH_OTHERS"].strip(" ;") or "none"
L = [f"# GPU training step: train_gpt vs PyTorch ({E['BENCH_DEVICE']})", "",
     f"- Device: {E['BENCH_DEVICE']} ({int(E['BENCH_MEM_MIB']) / 1024:.1f} GiB), driver {E['BENCH_DRIVER']}, "
     f"CUDA {E['BENCH_CUDA']} (driver); other processes on the GPU at the start: {others}",
     f"- Date: {E['BENCH_DATE']}; train_gpt commit {E['BENCH_GIT']}",
     f"- train_gpt: `{E['BENCH_BIN']}` (nvcc {E['BENCH_NVCC']}); {E['BENCH_BACKEND']}",
     f"- PyTorch: {E['BENCH_TORCH']} (`scripts/bench_torch.py`)",
     f"- Steps per run: {E['BENCH_STEPS']}; ms/step is the median of steps {int(E['BENCH_WARMUP']) + 1}.."
     f"{E['BENCH_STEPS']} (CUDA events around each step, for both programs); random tokens (train_gpt: a shard of "
     f"2^20 tokens the script writes to a scratch directory; PyTorch: torch.randint on the device)",
     f"- Recompute (Megatron 1.2B): {E['BENCH_PLAN']}", "",
     "| model | implementation | micro-batch | recompute | ms/step (median) | tokens/s | MFU | peak memory |",
     "|---|---|---|---|---|---|---|---|"]
for r in rows:
    head = f"| {labels[r['key']]} | {r['impl']} |"
    if "error" in r:
        L.append(f"{head} | {r['recompute']} | {r['error'].replace('|', '/')} | | | |")
        continue
    mfu = f"{100 * r['mfu']:.1f}%" if r.get("mfu") is not None else "n/a"
    mem = f"{r['mem_peak_bytes'] / GiB:.2f} GiB" if r.get("mem_peak_bytes") else "n/a"
    L.append(f"{head} {r['micro_batch']} | {r['recompute']} | {r['median_ms']:.1f} | {r['tok_per_s']:,.0f} | {mfu} | {mem} |")
L += ["", "Per model:"]
for key, text in labels.items():
    mine = {r["impl"]: r for r in rows if r["key"] == key and "error" not in r}
    if not any(r["key"] == key for r in rows):
        continue
    parts = [text]
    # the shape each program reports (train_gpt's "model:" line, bench_torch.py's JSON)
    shapes = {impl: f"{r['n_layer']} layers, {r['n_head']} heads, width {r['n_embd']}, vocab {r['vocab_size']} "
                    f"(padded {r['vocab_padded']}); {r['global_batch']} sequences of {r['seq_len']} tokens per step, "
                    f"micro-batch {r['micro_batch']}" for impl, r in mine.items()}
    for shape in sorted(set(shapes.values())):
        who = [i for i, v in shapes.items() if v == shape]
        parts.append(f"{shape} ({', '.join(who)})")
    if len(set(shapes.values())) > 1:
        parts.append("SHAPES DIFFER: the comparison is not like for like")
    n = {impl: r["n_params"] for impl, r in mine.items()}
    if n:
        verdict = "" if len(n) < 2 else " (equal)" if len(set(n.values())) == 1 else \
            " (DIFFERENT: the comparison is not like for like)"
        parts.append(f"parameters {', '.join(f'{i} {v:,}' for i, v in n.items())}{verdict}")
    t = mine.get("train_gpt bf16")
    if t:
        parts.append(f"flops/token {t['flops_per_token']:.4g}, peak {t['peak_tflops']:g} TFLOP/s (train_gpt's)")
        for impl in ("PyTorch eager", "PyTorch compile"):
            if impl in mine:
                parts.append(f"train_gpt's step takes {t['median_ms'] / mine[impl]['median_ms']:.2f}x the time of {impl}")
    for impl, r in mine.items():
        parts.append(f"{impl} per-step ms: " + " ".join(f"{x:.1f}" for x in r["ms"]))
        if impl.startswith("PyTorch"):
            parts.append(f"{impl}: first step {r['first_step_s']:.1f} s"
                         f"{' (compilation)' if impl.endswith('compile') else ''}, "
                         f"peak reserved {(r['mem_reserved_bytes'] or 0) / GiB:.2f} GiB, {r['optimizer']}")
    L.append("- " + "; ".join(parts[:1]) + ":")
    L += [f"  - {p}" for p in parts[1:]]
L += ["", "How to read it:",
      "- tokens/s = global batch x seq_len / median ms/step; MFU = flops_per_token x tokens/s / peak, "
      "flops_per_token = 6N + 12 x n_layer x n_embd x seq_len (N over the real vocabulary, the tied wte once), "
      "the same formula and peak for every row.",
      "- Peak memory: train_gpt's mem_peak_bytes (device memory in use at its highest, cudaMemGetInfo, less what was "
      "in use before its first allocation: the cuBLASLt workspace and kernel scratch count); PyTorch's "
      "torch.cuda.max_memory_allocated (tensors only; its caching allocator reserves more, listed above).",
      "- Both steps: forward, backward, gradient clipping by global norm, AdamW (fp32 master weights and state), "
      "bf16 matmuls with fp32 accumulation, a wait for the device at the end of each step. train_gpt's attention is "
      "fused and flash-style but on CUDA cores (no tensor cores yet); PyTorch's is scaled_dot_product_attention.",
      "", "Commands (run from the repository root):", "", "```sh", E["BENCH_CMD"]]
L += [c.rstrip() for c in open(commands_path) if c.strip()]
L += ["```", "", f"Raw runs: `{E['BENCH_RAW']}/` (log.jsonl and stdout of each run, results.jsonl, commands.txt)."]
with open(md_path + ".tmp", "w") as f:
    f.write("\n".join(L) + "\n")
os.replace(md_path + ".tmp", md_path)
PY
    if [ -n "${OUT:-}" ]; then
        mkdir -p "$OUT" && cp "$md" "$OUT/" && rm -rf "${OUT:?}/$(basename "$raw")" && cp -r "$raw" "$OUT/" ||
            echo "$prog: could not copy the results to OUT=$OUT" >&2
    fi
}

# ---- 3. the measurements: train_gpt and PyTorch eager for each model, then torch.compile --------
plan_note="not run (--models)"
failed=0
declare -A recompute=() peak=()
for key in ${models//,/ }; do
    model_setup "$key"
    rc=none
    if [ "$key" = megatron_1.2b ]; then
        # recompute none when the trainer's own budget fits this GPU's memory, else full
        gib=$(awk -v m="$mem_mib" 'BEGIN {printf "%.1f", m / 1024}')
        plan_cmd=("$bin" --plan --config "$cfg" "${shape[@]}" --set device=cuda --set train.precision=bf16
                  --devices 1 --device-gib "$gib" --plan-json "$raw/plan_1.2b.jsonl")
        note_cmd "${plan_cmd[@]}"
        if "${plan_cmd[@]}" >"$raw/plan_1.2b.out" 2>&1 && plan=$("$py" - "$raw/plan_1.2b.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    p = json.loads(l)
    if (p["tp"], p["dp"], p["sp"], p["recompute"], p["micro_batch"], p["zero"]) == (1, 1, False, "none", 8, 0):
        print(("none" if p["fits"] else "full") + f" {p['bytes'] / 1024**3:.2f}")
        break
else:
    sys.exit("no tp 1, recompute none, micro-batch 8 row in the plan")
PY
        ); then
            rc=${plan%% *}
            plan_note="$rc: train_gpt --plan puts recompute none at ${plan#* } GiB against this GPU's $gib GiB"
        else
            rc=full
            plan_note="full: train_gpt --plan failed ($(last_lines "$raw/plan_1.2b.out" 2))"
        fi
    fi
    if ! run_train_gpt "$key" "$rc"; then
        if [ "$rc" = none ] && [ "$key" = megatron_1.2b ]; then
            plan_note+="; the recompute none run failed ($(last_lines "$raw/${key}_train_gpt_none.out" 2)), so full was run"
            rc=full
            run_train_gpt "$key" "$rc" || failed=1
        else
            failed=1
        fi
    fi
    recompute[$key]=$rc
    peak[$key]=$("$py" -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(next((r["peak_tflops"] for r in reversed(rows) if r["key"] == sys.argv[2] and r["impl"] == "train_gpt bf16" and "error" not in r), 0))' \
        "$raw/results.jsonl" "$key")
    render
    run_torch "$key" "$rc" "${peak[$key]}" eager "$run_limit" || failed=1
    render
done
for key in ${models//,/ }; do
    if [ "$compile" = 1 ]; then
        run_torch "$key" "${recompute[$key]}" "${peak[$key]}" compile "$compile_limit"
    else
        add_result "$(error_json "$key" "PyTorch compile" "${recompute[$key]}" "not measured (--no-compile)")"
    fi
    render
done

cat "$md"
say "wrote $md; raw runs in $raw${OUT:+; copied to $OUT}"
exit "$failed"
