#!/usr/bin/env bash
# Training throughput on one GPU at TP=1: train_gpt (bf16) against PyTorch
# (eager and torch.compile) and llm.c's train_gpt2cu on the same GPU, model and
# batch shapes; writes results/gpu_bench_<date>.md and .json (bench.json). The
# GPU twin of scripts/bench_cpu.sh. --help says it all.
set -uo pipefail
prog=bench_gpu
root="$(cd "$(dirname "$0")/.." && pwd)"
caller_dir="$PWD" # a relative --llmc DIR is the caller's
cd "$root" || exit 2

usage() {
    cat <<'EOF'
Usage: [OUT=DIR] [TRAIN_GPT=BIN] [PYTHON=PY] [LLMC_SRC=DIR] scripts/bench_gpu.sh [options]

Measures training steps on one GPU (the first one CUDA_VISIBLE_DEVICES names;
GPU 0 by default) for two models:
  gpt2_124m      configs/gpt2_124m.json: micro-batch 16, global batch 16, seq 1024
  megatron_1.2b  configs/megatron_weak_1.2b.json (the Megatron-LM paper's 1.2B:
                 40 layers, width 1536, 16 heads, vocab 51200), seq 1024, at
                 global batch 8 (the paper's; micro-batch 8) and 20 (the
                 sweeps' second set, docs/scaling.md; micro-batch 10, 2
                 accumulated: --plan puts recompute none at 40.6 GiB, 60.7 at
                 micro-batch 20, which leaves PyTorch little room on 80 GB);
                 recompute none if `train_gpt --plan` says it fits in this
                 GPU's memory, else full (PyTorch then checkpoints every block)
each with four implementations:
  train_gpt bf16   the binary, device=cuda, train.precision=bf16, random tokens;
                   its log.jsonl's "ms" (CUDA events around the step); peak
                   memory: its mem_peak_bytes
  PyTorch eager    scripts/bench_torch.py: the same GPT-2 (tied, padded vocab,
                   pre-LN, GELU tanh, SDPA causal attention), bf16 autocast over
                   fp32 weights, fused AdamW, grad clipping; CUDA events; peak
                   memory: torch.cuda.max_memory_allocated
  PyTorch compile  the same under torch.compile, within --compile-limit seconds
                   (compilation included); "not measured" when it runs out
  llm.c            karpathy/llm.c's train_gpt2cu (gpt2_124m only: llm.c has no
                   configuration matching megatron_1.2b), built here from the
                   source --llmc DIR names by scripts/build_llmc.sh into
                   runs/llmc_build/ (never inside DIR): `make train_gpt2cu
                   USE_CUDNN=1` when cuDNN and the cudnn-frontend headers are
                   found, else the plain build; the make command goes into the
                   results. Run as `train_gpt2cu -e d12 -b 16 -t 1024 -d 16384
                   -r 0 -x STEPS` (a fresh GPT-2 124M, bf16, no recompute) on the
                   same random-token shard, with no sampling and no checkpoints
                   (its validation pass runs outside the timed steps); ms from
                   its "step N/M | ... | X ms |" lines (CUDA events); build and
                   run within --llmc-limit seconds. Without --llmc: "not measured"
ms/step: the median of the steps from step 4 on (steps 1-3 are warm-up), with
their min and max, for every row. tokens/s = global_batch * seq_len / median;
MFU = flops_per_token * tokens/s / peak, with train_gpt's flops_per_token
(6N + 12 L C T, N over the real vocabulary) and the peak train_gpt used (its
device table, kernels/cuda/ops_cuda.c), for all rows.
Two lines beside the table compare train_gpt with itself: what replaying the
GPT-2 step as one CUDA graph saves (the same run with train.cuda_graph=false),
and what recomputation costs at 1.2B, global batch 8 (the same run with
train.recompute=selective and =full, against none).

Writes results/gpu_bench_<YYYY-mm-dd>.md (results/gpu_bench_<date>_<models>.md
with --models), the same rows as JSON beside it (bench.json: the same name
with .json: {"device", "driver", "cuda", "commit", "date", "rows": [{"model",
"impl", "global_batch", "ms_per_step", "ms_min", "ms_max", "tokens_per_s",
"mfu", "mem_peak_gib", "command", "note"}]}, a row for every model x
implementation x global batch; one not measured has nulls and a note saying
why), and the raw runs into runs/gpu_bench_<time>/ (each run's stdout and
logs, the plan, the commands; after each measured train_gpt run, a 6-step run of
the same command with out.op_times=true, whose per-op table is <run>.op_times.tsv
there). With OUT set, all are copied there after every measurement, so a command
cut short still brings back what it measured.

Options:
  --quick              13 steps per run (10 timed: a median of 10 at least), --compile-limit 180 and
                       --llmc-limit 240 by default (on an H200, torch.compile's first step took 32 s
                       at GPT-2 124M and 76 s at 1.2B, and llm.c's cuDNN build about a minute)
  --steps N            steps per run (default 20; at least 5: steps 1-3 are warm-up)
  --models LIST        comma-separated, of gpt2_124m,megatron_1.2b (default both)
  --no-compile         skip torch.compile (its rows say "not measured")
  --no-eager           skip PyTorch eager (its rows say "not measured" and do not count in the exit
                       status): for a sitting that reuses an earlier one's PyTorch rows
  --hopper             also train_gpt with kernels.attention=wgmma_ws (the Hopper attention: TMA and
                       wgmma, compute capability 9.0) at every point, as rows of their own
                       (train_gpt_hopper), each with its per-op table; such a row that is not
                       measured (another GPU: train_gpt refuses) does not count in the exit status
  --mma                also train_gpt with kernels.attention=mma (the mma.sync attention, the default
                       before auto) at every point, as rows of their own (train_gpt_mma), each with
                       its per-op table: what the default's choice gains; such a row that is not
                       measured does not count in the exit status
  --dw-overlap         also train_gpt with kernels.dw_overlap=true (each weight-gradient product on a
                       second stream beside its input-gradient product; the same bits) at every point,
                       as rows of their own (train_gpt_dwo), each with its per-op table; such a row
                       that is not measured does not count in the exit status
  --lt-tune            also train_gpt with kernels.lt_tune=time (each product's cuBLASLt algorithm the
                       fastest of the heuristic's top 8, timed in step 1) at every point, as rows of
                       their own (train_gpt_lt); the record it writes (lt_algos.tsv, in its run's
                       folder) is pinned in the run for its per-op table, so that table's products
                       are the tuned ones and a record that does not pin shows there; such a row that
                       is not measured does not count in the exit status
  --compile-limit S    seconds one torch.compile run may take, compilation
                       included (default 420; --quick 180)
  --llmc DIR           llm.c's source tree (karpathy/llm.c: train_gpt2.cu,
                       Makefile, llmc/), e.g. .peer/llm.c; or LLMC_SRC=DIR
  --llmc-limit S       seconds llm.c's build and run may take together
                       (default 420; --quick 240)
  -h, --help           this text
Environment: TRAIN_GPT (default build/gpu/train_gpt if built, else ./train_gpt),
PYTHON (with PyTorch and CUDA; default python3), OUT (a folder to copy results to),
LLMC_SRC (as --llmc), BENCH_COMMIT (bench.json's commit where the tree is not
a git checkout and the binary says "unknown"), and scripts/build_llmc.sh's
(NVCC, CUDNN_FRONTEND_PATH, LLMC_CUDNN=0).

Refuses (exit 1, nothing measured) without a GPU (nvidia-smi lists none) or
when TRAIN_GPT was built without CUDA (make GPU=1). Exit status otherwise: 0
when every train_gpt and PyTorch eager row was measured (eager's unless --no-eager), 1 when one
was not (the table is still written, saying why); a torch.compile, llm.c, train_gpt_hopper, train_gpt_mma,
train_gpt_dwo or train_gpt_lt row that is not measured does not count. 2: bad arguments (a --llmc DIR that is not llm.c's
source included).
EOF
}
die() { echo "$prog: error: $*" >&2; exit 2; }
refuse() { echo "$prog: $*; nothing was measured" >&2; exit 1; }
say() { echo "$prog: $*"; }

orig_cmd=""
for v in OUT TRAIN_GPT PYTHON CUDA_VISIBLE_DEVICES LLMC_SRC; do
    [ -n "${!v:-}" ] && orig_cmd+="$v=$(printf '%q' "${!v}") "
done
orig_cmd+="scripts/bench_gpu.sh"
[ $# -eq 0 ] || orig_cmd+=$(printf ' %q' "$@") # printf with no arguments would add a '' argument

quick=0 steps="" models="gpt2_124m,megatron_1.2b" compile=1 eager=1 compile_limit="" llmc_limit="" hopper=0 mma=0 dw_overlap=0 lt_tune=0
llmc="${LLMC_SRC:-}" llmc_from="LLMC_SRC"
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --quick) quick=1; shift ;;
        --no-compile) compile=0; shift ;;
        --no-eager) eager=0; shift ;;
        --hopper) hopper=1; shift ;;
        --mma) mma=1; shift ;;
        --dw-overlap) dw_overlap=1; shift ;;
        --lt-tune) lt_tune=1; shift ;;
        --steps|--models|--compile-limit|--llmc|--llmc-limit)
            [ $# -ge 2 ] || die "$1 needs a value"
            case "$1" in
                --steps) steps="$2" ;; --models) models="$2" ;; --compile-limit) compile_limit="$2" ;;
                --llmc) llmc="$2" llmc_from="--llmc" ;; --llmc-limit) llmc_limit="$2" ;;
            esac
            shift 2 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[ -n "$steps" ] || { if [ "$quick" = 1 ]; then steps=13; else steps=20; fi; } # 10 timed at least
[ -n "$compile_limit" ] || { if [ "$quick" = 1 ]; then compile_limit=180; else compile_limit=420; fi; }
[ -n "$llmc_limit" ] || { if [ "$quick" = 1 ]; then llmc_limit=240; else llmc_limit=420; fi; }
{ [[ "$steps" =~ ^[0-9]+$ ]] && [ "$steps" -ge 5 ]; } || die "--steps must be an integer of at least 5 (steps 1-3 are warm-up), got '$steps'"
[[ "$compile_limit" =~ ^[1-9][0-9]*$ ]] || die "--compile-limit must be a positive integer (seconds), got '$compile_limit'"
[[ "$llmc_limit" =~ ^[1-9][0-9]*$ ]] || die "--llmc-limit must be a positive integer (seconds), got '$llmc_limit'"
[[ "$models" =~ ^(gpt2_124m|megatron_1\.2b)(,(gpt2_124m|megatron_1\.2b))*$ ]] ||
    die "--models must be a comma-separated list of gpt2_124m and megatron_1.2b, got '$models'"
if [ -n "$llmc" ]; then
    llmc_given="$llmc"
    [[ "$llmc" == /* ]] || llmc="$caller_dir/$llmc"
    [ -d "$llmc" ] || die "$llmc_from $llmc_given: no such directory (llm.c's source tree, e.g. .peer/llm.c)"
    for f in train_gpt2.cu Makefile llmc; do
        [ -e "$llmc/$f" ] || die "$llmc_from $llmc_given has no $f: not llm.c's source tree (karpathy/llm.c)"
    done
    llmc="$(cd "$llmc" && pwd)"
fi
warmup=3          # steps left out of every median: from step 4 on
run_limit=420     # seconds a train_gpt or PyTorch eager run may take
declare -A plain_wall=() # KEY:GB: the plain train_gpt run's seconds, which bound the option rows' (option_limit)
option_slack="${BENCH_OPTION_SLACK_S:-60}" # option_limit's minute (t_bench_gpu_dry shortens it)
[[ "$option_slack" =~ ^(0|[1-9][0-9]*)$ ]] || die "BENCH_OPTION_SLACK_S must be a whole number of seconds, got '$option_slack'"
# the measured points, MODEL:GLOBAL_BATCH
points=()
for key in ${models//,/ }; do
    case "$key" in gpt2_124m) points+=(gpt2_124m:16) ;; megatron_1.2b) points+=(megatron_1.2b:8 megatron_1.2b:20) ;; esac
done

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
report() { python3 scripts/bench_report.py "$@"; } # standard library only: any python3
command -v python3 >/dev/null 2>&1 || report() { "$py" scripts/bench_report.py "$@"; }

date_utc=$(date -u +%Y-%m-%d)
stamp=$(date -u +%Y%m%d_%H%M%S)
raw="runs/gpu_bench_$stamp"
suffix=""
[ "$models" = "gpt2_124m,megatron_1.2b" ] || suffix="_${models//,/_}"
md="results/gpu_bench_${date_utc}${suffix}.md"
json="${md%.md}.json"
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
# bench.json's "cuda": the toolkit that built train_gpt (nvcc), else the one PyTorch was built with
cuda_toolkit=$(grep -o 'release [0-9.]*' <<<"$nvcc_info" | sed 's/release //')
[ -n "$cuda_toolkit" ] || cuda_toolkit=$(sed -n 's/.*(CUDA \([0-9.]*\)).*/\1/p' <<<"$torch_info")
# the report's commit line: BENCH_COMMIT where given (a lent machine's tree may carry a stale .git)
if [ -n "${BENCH_COMMIT:-}" ]; then
    git_rev="$BENCH_COMMIT"
else
    git_rev="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || git_rev+=" (with uncommitted changes)"
fi
# bench.json's "commit": BENCH_COMMIT, else git's, else the one the binary was built from (--version)
commit="${BENCH_COMMIT:-}"
if [ -z "$commit" ] && commit=$(git rev-parse HEAD 2>/dev/null); then
    git diff --quiet HEAD 2>/dev/null || commit+="-modified"
fi
[ -n "$commit" ] || commit=$("$bin" --version 2>/dev/null | sed -n '1s/^train_gpt //p')
[ -n "$commit" ] || commit=unknown
say "$gpu_name (driver $driver, CUDA $cuda_driver); train_gpt $bin: $backend_line; PyTorch: $torch_info"
say "raw runs in $raw; the table goes to $md, bench.json to $json"

# ---- 2. helpers -------------------------------------------------------------
# model_setup KEY GB: cfg, label, mb and shape (the --set arguments both train_gpt and PyTorch take)
model_setup() {
    case "$1" in
        gpt2_124m) cfg=configs/gpt2_124m.json label="GPT-2 124M" mb=16 ;;
        megatron_1.2b) cfg=configs/megatron_weak_1.2b.json label="Megatron 1.2B"
            if [ "$2" = 20 ]; then mb=10; else mb=8; fi ;;
    esac
    label+=" (global batch $2)"
    shape=(--set train.micro_batch="$mb" --set train.global_batch="$2" --set model.seq_len=1024)
}
# note_cmd ARGS...: the exact command, for the table's header
note_cmd() { printf '%q ' "$@" >>"$raw/commands.txt"; echo >>"$raw/commands.txt"; }
quoted() { printf '%q ' "$@" | sed 's/ $//'; }
# add_result JSON: one row of the table
add_result() { echo "$1" >>"$raw/results.jsonl"; }
# not_measured KEY GB IMPL RECOMPUTE COMMAND MESSAGE: a row that says why
not_measured() {
    add_result "$(report error --key "$1" --gb "$2" --impl "$3" --recompute "$4" ${5:+--command "$5"} "$6")"
}
last_lines() { tail -n "${2:-3}" "$1" 2>/dev/null | tr '\n' ' ' | sed 's/ *$//' | cut -c1-300; }

# option_limit KEY GB: the seconds an option row's runs (Hopper attention, cuBLASLt tuned) may
# take at a point: three times the plain run's there, plus a minute for step 1's tuning, within
# run_limit. Their kernels may meet a GPU for the first time here, and a deadlock held the rest of
# the section (PyTorch's and llm.c's rows, then the sections after it) for run_limit.
option_limit() {
    local wall="${plain_wall[$1:$2]:-}"
    if [ -z "$wall" ]; then echo "$run_limit"; return; fi
    local cap=$((3 * wall + option_slack))
    echo $((cap < run_limit ? cap : run_limit))
}

# run_train_gpt KEY GB RECOMPUTE [IMPL]: one train_gpt run (IMPL train_gpt_hopper: with
# kernels.attention=wgmma_ws; train_gpt_mma: with kernels.attention=mma; train_gpt_dwo: with
# kernels.dw_overlap=true; train_gpt_lt: with
# kernels.lt_tune=time, its per-op run pinning
# the record the timed run wrote); its row, or a row saying why not; 0 when measured
run_train_gpt() {
    local key="$1" gb="$2" rc="$3" impl="${4:-train_gpt}" dir row
    dir="$raw/${key}_gb${gb}_${impl}_$rc"
    # the option rows' runs (this one and op_times') on option_limit's clock
    local run_limit="$run_limit"
    [ "$impl" = train_gpt ] || run_limit=$(option_limit "$key" "$gb")
    model_setup "$key" "$gb"
    local cmd=("$bin" --config "$cfg" "${shape[@]}" --set device=cuda --set train.precision=bf16
               --set train.recompute="$rc" "${common[@]}" --set out.dir="$dir")
    local what=""
    case "$impl" in
        train_gpt_hopper) cmd+=(--set kernels.attention=wgmma_ws) what=", Hopper attention" ;;
        train_gpt_mma) cmd+=(--set kernels.attention=mma) what=", mma.sync attention" ;;
        train_gpt_dwo) cmd+=(--set kernels.dw_overlap=true) what=", weight gradients overlapped" ;;
        train_gpt_lt) cmd+=(--set kernels.lt_tune=time) what=", cuBLASLt tuned" ;;
    esac
    note_cmd "${cmd[@]}"
    say "$label, train_gpt bf16$what, recompute $rc, $steps steps (at most ${run_limit}s) ..."
    local t0=$SECONDS
    timeout -k 10 "$run_limit" "${cmd[@]}" >"$dir.out" 2>&1
    local status=$?
    [ "$impl" != train_gpt ] || [ "$status" -ne 0 ] || plain_wall[$key:$gb]=$((SECONDS - t0 + 1))
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        not_measured "$key" "$gb" "$impl" "$rc" "$(quoted "${cmd[@]}")" \
            "not measured: stopped after ${run_limit}s (timeout; a hang?): $(last_lines "$dir.out")"
    elif [ "$status" -ne 0 ]; then
        not_measured "$key" "$gb" "$impl" "$rc" "$(quoted "${cmd[@]}")" "not measured: failed (exit $status): $(last_lines "$dir.out")"
    elif ! row=$(report train-gpt "$dir" --key "$key" --gb "$gb" --recompute "$rc" --warmup "$warmup" --impl "$impl" \
                     --command "$(quoted "${cmd[@]}")" 2>&1); then
        not_measured "$key" "$gb" "$impl" "$rc" "$(quoted "${cmd[@]}")" "not measured: no result: $row"
        status=1
    else
        add_result "$row"
        if [ "$impl" = train_gpt_lt ]; then op_times "$dir" "${cmd[@]}" --set kernels.lt_tune="$dir/lt_algos.tsv"
        else op_times "$dir" "${cmd[@]}"; fi
        if [ "$impl" = train_gpt ]; then
            [ "$key" = gpt2_124m ] && graph_saving "$dir" "$key" "$gb" "${cmd[@]}"
            [ "$key:$gb" = megatron_1.2b:8 ] && recompute_cost "$dir" "$key" "$gb" "$rc" "${cmd[@]}"
        fi
    fi
    [ "$status" -eq 0 ]
}

# graph_saving DIR KEY GB CMD...: after the measured GPT-2 run, the same
# command with every op launched on its own (train.cuda_graph=false), for
# what replaying the step as one CUDA graph saved (the table's "CUDA graph" line)
graph_note="not measured"
graph_saving() {
    local dir="$1" key="$2" gb="$3"
    shift 3
    local cmd=("$@" --set train.cuda_graph=false --set out.dir="$dir.nograph")
    if ! grep -q "captured as a CUDA graph" "$dir.out"; then
        graph_note="not measured: the run did not replay its step as a CUDA graph ($(grep -m1 -i "graph" "$dir.out" || echo "no capture line"))"
        return
    fi
    note_cmd "${cmd[@]}"
    say "$label, train_gpt op by op (train.cuda_graph=false) ..."
    if timeout -k 10 "$run_limit" "${cmd[@]}" >"$dir.nograph.out" 2>&1 &&
        note=$(report graph "$raw/results.jsonl" "$dir.nograph" --key "$key" --gb "$gb" --warmup "$warmup" 2>&1); then
        graph_note="$note"
    else
        graph_note="not measured: the op-by-op run failed: $(last_lines "$dir.nograph.out")"
    fi
    say "CUDA graph: $graph_note"
}

# recompute_cost DIR KEY GB RECOMPUTE CMD...: after the measured 1.2B run at global batch 8 with
# recompute none, the same command with train.recompute=selective and =full, for what each
# costs per step (the table's "What recomputation costs" line)
recompute_note="not measured"
recompute_cost() {
    local dir="$1" key="$2" gb="$3" rc="$4" mode note
    shift 4
    if [ "$rc" != none ]; then
        recompute_note="not measured: global batch $gb ran with recompute $rc, not none (see the Recompute line), so there is no baseline"
        return
    fi
    for mode in selective full; do
        local cmd=("$@" --set train.recompute="$mode" --set out.dir="$dir.$mode")
        note_cmd "${cmd[@]}"
        say "$label, train_gpt bf16, recompute $mode, $steps steps ..."
        if ! timeout -k 10 "$run_limit" "${cmd[@]}" >"$dir.$mode.out" 2>&1; then
            recompute_note="not measured: the recompute $mode run failed: $(last_lines "$dir.$mode.out")"
            return
        fi
    done
    if note=$(report recompute "$raw/results.jsonl" "$dir.selective" "$dir.full" --key "$key" --gb "$gb" \
                  --warmup "$warmup" 2>&1); then
        recompute_note="$note"
    else
        recompute_note="not measured: $note"
    fi
    say "recompute: $recompute_note"
}

# op_times DIR CMD...: after a measured run, the same command for 6 steps
# with every op timed (out.op_times: events around each op change the step
# time a little, so it is a run of its own); its table lands in DIR.op_times.tsv
op_times() {
    local dir="$1"
    shift
    local cmd=("$@" --set train.steps=6 --set out.op_times=true --set out.dir="$dir.timed")
    note_cmd "${cmd[@]}"
    if timeout -k 10 "$run_limit" "${cmd[@]}" >"$dir.timed.out" 2>&1 && [ -s "$dir.timed/op_times.tsv" ]; then
        cp "$dir.timed/op_times.tsv" "$dir.op_times.tsv"
        say "per-op times: $dir.op_times.tsv"
    else
        say "per-op times not measured: $(last_lines "$dir.timed.out")"
    fi
}

# run_torch KEY GB RECOMPUTE PEAK eager|compile LIMIT: one bench_torch.py run
run_torch() {
    local key="$1" gb="$2" rc="$3" peak="$4" mode="$5" limit="$6" impl="pytorch_$5"
    local name="$raw/${key}_gb${gb}_torch_${mode}" status
    model_setup "$key" "$gb"
    if [ "$torch_ok" != 1 ]; then
        not_measured "$key" "$gb" "$impl" "$rc" "" "not measured: $torch_info"
        return 1
    fi
    local cmd=("$py" scripts/bench_torch.py --config "$cfg" "${shape[@]}" --set train.recompute="$rc"
               --steps "$steps" --warmup "$warmup" --peak-tflops "$peak" --json "$name.json")
    [ "$mode" = compile ] && cmd+=(--compile)
    note_cmd timeout -k 15 "$limit" "${cmd[@]}"
    say "$label, PyTorch $mode, $steps steps (at most $limit s) ..."
    rm -f "$name.json"
    timeout -k 15 "$limit" "${cmd[@]}" >"$name.out" 2>&1
    status=$?
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        not_measured "$key" "$gb" "$impl" "$rc" "$(quoted "${cmd[@]}")" \
            "not measured: not done within $limit s$([ "$mode" = compile ] && echo ", compilation included")"
    elif [ "$status" -ne 0 ] || [ ! -s "$name.json" ]; then
        not_measured "$key" "$gb" "$impl" "$rc" "$(quoted "${cmd[@]}")" \
            "not measured: failed (exit $status): $(last_lines "$name.out")"
        [ "$status" -ne 0 ] || status=1
    else
        add_result "$(report torch "$name.json" --key "$key" --gb "$gb" --command "$(quoted "${cmd[@]}")")"
    fi
    [ "$status" -eq 0 ]
}

# run_llmc PEAK: llm.c's train_gpt2cu for gpt2_124m, built from $llmc within $llmc_limit seconds
llmc_note="not given (--llmc DIR or LLMC_SRC=DIR)"
run_llmc() {
    local peak="$1" build=runs/llmc_build t0=$SECONDS left make_cmd ld status shown row
    model_setup gpt2_124m 16
    if [ -z "$llmc" ]; then
        not_measured gpt2_124m 16 llm.c none "" "not measured: no llm.c source given (--llmc DIR or LLMC_SRC=DIR)"
        return
    fi
    note_cmd timeout -k 10 "$llmc_limit" scripts/build_llmc.sh "$llmc" "$build"
    say "llm.c: building train_gpt2cu from $llmc into $build (at most $llmc_limit s with its run) ..."
    timeout -k 10 "$llmc_limit" bash scripts/build_llmc.sh "$llmc" "$build" >"$raw/llmc_build.out" 2>&1
    status=$?
    cp "$build"/make_*.log "$raw/" 2>/dev/null
    if [ "$status" -ne 0 ] || [ ! -x "$build/train_gpt2cu" ]; then
        llmc_note="\`$llmc\`: the build failed: $(last_lines "$raw/llmc_build.out" 2)"
        not_measured gpt2_124m 16 llm.c none "" "not measured: llm.c did not build$([ "$status" -ge 124 ] &&
            echo " within $llmc_limit s") ($(last_lines "$raw/llmc_build.out" 1))"
        return
    fi
    make_cmd=$(sed -n 's/^make=//p' "$build/build.txt")
    ld=$(sed -n 's/^ld_library_path=//p' "$build/build.txt")
    llmc_note="\`$llmc\` (commit $(sed -n 's/^commit=//p' "$build/build.txt"), sha256 of its Makefile, \
train_gpt2.cu and llmc/ $(sed -n 's/^sha256=//p' "$build/build.txt")), the $(sed -n 's/^build=//p' "$build/build.txt") \
build: \`$make_cmd\` (scripts/build_llmc.sh, in $build/)"
    left=$((llmc_limit - (SECONDS - t0)))
    local cmd=(./train_gpt2cu -i "$scratch/data/train_*.bin" -j "$scratch/data/train_*.bin" -e d12 -b 16 -t 1024
               -d 16384 -r 0 -x "$steps" -v 100000 -m 1 -s 0 -n 0 -h 0)
    shown="(cd $build && LD_LIBRARY_PATH=$ld:\$LD_LIBRARY_PATH $(quoted "${cmd[@]}"))"
    echo "$shown" >>"$raw/commands.txt"
    if [ "$left" -lt 20 ]; then
        not_measured gpt2_124m 16 llm.c none "$shown" "not measured: its build took $((SECONDS - t0)) s of the $llmc_limit s limit"
        return
    fi
    say "$label, llm.c train_gpt2cu, $steps steps (at most $left s) ..."
    (cd "$build" && LD_LIBRARY_PATH="$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout -k 10 "$left" "${cmd[@]}") \
        >"$raw/gpt2_124m_gb16_llmc.out" 2>&1
    status=$?
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        not_measured gpt2_124m 16 llm.c none "$shown" "not measured: not done within $llmc_limit s, its build included"
    elif [ "$status" -ne 0 ]; then
        not_measured gpt2_124m 16 llm.c none "$shown" "not measured: failed (exit $status): $(last_lines "$raw/gpt2_124m_gb16_llmc.out")"
    elif ! row=$(report llmc "$raw/gpt2_124m_gb16_llmc.out" --key gpt2_124m --gb 16 --warmup "$warmup" --peak "$peak" \
                     --build "$make_cmd" --command "$shown" 2>&1); then
        not_measured gpt2_124m 16 llm.c none "$shown" "not measured: no result: $row"
    else
        add_result "$row"
    fi
}

# render: the Markdown table and bench.json from results.jsonl (after every measurement), copied to $OUT
render() {
    BENCH_DEVICE="$gpu_name" BENCH_DRIVER="$driver" BENCH_CUDA="$cuda_driver" BENCH_MEM_MIB="$mem_mib" \
    BENCH_NVCC="$nvcc_info" BENCH_TORCH="$torch_info" BENCH_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')" \
    BENCH_DATE_ISO="$(date -u '+%Y-%m-%dT%H:%M:%SZ')" BENCH_CUDA_TOOLKIT="$cuda_toolkit" BENCH_COMMIT="$commit" \
    BENCH_CMD="$orig_cmd" BENCH_BIN="$bin" BENCH_BACKEND="$backend_line" BENCH_GIT="$git_rev" BENCH_STEPS="$steps" \
    BENCH_WARMUP="$warmup" BENCH_PLAN="$plan_note" BENCH_OTHERS="$others" BENCH_RAW="$raw" BENCH_LLMC="$llmc_note" BENCH_GRAPH="$graph_note" BENCH_RECOMPUTE="$recompute_note" \
    report render "$raw/results.jsonl" "$raw/commands.txt" --points "$(IFS=,; echo "${points[*]}")" --md "$md" \
        --json "$json" || echo "$prog: could not write $md and $json" >&2
    if [ -n "${OUT:-}" ]; then
        mkdir -p "$OUT" && cp "$md" "$json" "$OUT/" && rm -rf "${OUT:?}/$(basename "$raw")" && cp -r "$raw" "$OUT/" ||
            echo "$prog: could not copy the results to OUT=$OUT" >&2
    fi
}

# plan_recompute KEY GB: none when the trainer's own budget fits this GPU's memory at the point's
# micro-batch, else full; appends the reason to plan_note
plan_recompute() {
    local key="$1" gb="$2" gib plan
    model_setup "$key" "$gb"
    gib=$(awk -v m="$mem_mib" 'BEGIN {printf "%.1f", m / 1024}')
    local plan_cmd=("$bin" --plan --config "$cfg" "${shape[@]}" --set device=cuda --set train.precision=bf16
                    --devices 1 --device-gib "$gib" --plan-json "$raw/plan_${key}_gb$gb.jsonl")
    note_cmd "${plan_cmd[@]}"
    if "${plan_cmd[@]}" >"$raw/plan_${key}_gb$gb.out" 2>&1 && plan=$("$py" - "$raw/plan_${key}_gb$gb.jsonl" "$mb" <<'PY'
import json, sys
mb = int(sys.argv[2])
for l in open(sys.argv[1]):
    p = json.loads(l)
    if (p["tp"], p["dp"], p["sp"], p["recompute"], p["micro_batch"], p["zero"]) == (1, 1, False, "none", mb, 0):
        print(("none" if p["fits"] else "full") + f" {p['bytes'] / 1024**3:.2f}")
        break
else:
    sys.exit(f"no tp 1, recompute none, micro-batch {mb} row in the plan")
PY
    ); then
        recompute_of="${plan%% *}"
        plan_note+="global batch $gb (micro-batch $mb): $recompute_of, train_gpt --plan puts recompute none at ${plan#* } GiB against this GPU's $gib GiB; "
    else
        recompute_of=full
        plan_note+="global batch $gb (micro-batch $mb): full, train_gpt --plan failed ($(last_lines "$raw/plan_${key}_gb$gb.out" 2)); "
    fi
}

# ---- 3. the measurements: train_gpt and PyTorch eager at each point, llm.c, then torch.compile --------
plan_note=""
[[ "$models" == *megatron_1.2b* ]] || plan_note="not run (--models)"
failed=0
declare -A recompute=() peak=()
peak_dev=$("$bin" --peak-tflops "$gpu_name" bf16 2>/dev/null || echo 0)
for point in "${points[@]}"; do
    key=${point%%:*} gb=${point#*:}
    rc=none
    if [ "$key" = megatron_1.2b ]; then plan_recompute "$key" "$gb"; rc=$recompute_of; fi
    if ! run_train_gpt "$key" "$gb" "$rc"; then
        if [ "$rc" = none ] && [ "$key" = megatron_1.2b ]; then
            plan_note+="(the recompute none run failed ($(last_lines "$raw/${key}_gb${gb}_train_gpt_none.out" 2)), so full was run) "
            rc=full
            run_train_gpt "$key" "$gb" "$rc" || failed=1
        else
            failed=1
        fi
    fi
    recompute[$point]=$rc
    peak[$point]=$(report peak "$raw/results.jsonl" --key "$key" --gb "$gb")
    [ "${peak[$point]}" != 0 ] || peak[$point]=$peak_dev # train_gpt's table, when its row is missing
    render
    if [ "$hopper" = 1 ]; then
        run_train_gpt "$key" "$gb" "$rc" train_gpt_hopper # its failure is its row's note, not the exit status
        render
    fi
    if [ "$mma" = 1 ]; then
        run_train_gpt "$key" "$gb" "$rc" train_gpt_mma # as the Hopper row's
        render
    fi
    if [ "$dw_overlap" = 1 ]; then
        run_train_gpt "$key" "$gb" "$rc" train_gpt_dwo # as the Hopper row's
        render
    fi
    if [ "$lt_tune" = 1 ]; then
        run_train_gpt "$key" "$gb" "$rc" train_gpt_lt # as the Hopper row's
        render
    fi
    if [ "$eager" = 1 ]; then run_torch "$key" "$gb" "$rc" "${peak[$point]}" eager "$run_limit" || failed=1
    else not_measured "$key" "$gb" pytorch_eager "$rc" "" "not measured (--no-eager)"; fi
    render
done
if [[ " ${points[*]} " == *" gpt2_124m:16 "* ]]; then
    run_llmc "${peak[gpt2_124m:16]}"
    render
fi
for point in "${points[@]}"; do
    key=${point%%:*} gb=${point#*:}
    if [ "$compile" = 1 ]; then
        run_torch "$key" "$gb" "${recompute[$point]}" "${peak[$point]}" compile "$compile_limit"
    else
        not_measured "$key" "$gb" pytorch_compile "${recompute[$point]}" "" "not measured (--no-compile)"
    fi
    render
done

cat "$md"
say "wrote $md and $json; raw runs in $raw${OUT:+; copied to $OUT}"
exit "$failed"
