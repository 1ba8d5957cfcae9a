#!/usr/bin/env bash
# The Megatron papers' scaling and memory tables in one command, our rows beside
# the published ones. `scripts/paper_tables.sh --help` says it all.
set -u

prog=paper_tables
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
helper="$root/scripts/scaling/paper_tables.py"

usage() {
    cat <<'EOF'
Usage: scripts/paper_tables.sh [options]

Prints, and writes into the output directory (tables.md, tables.tsv), these
tables with our figures beside the papers' and an H100 reproduction's:
  - arXiv 1909.08053 Table 1 (weak scaling: 1.2B/2.5B/4.2B/8.3B at TP 1/2/4/8,
    each global batch of --batches), and its model + data parallel columns
    (64-way DP, 64-512 GPUs, global batch 512);
  - arXiv 1909.08053 appendix D.2 (strong scaling of 1.2B at TP 1/2/4/8);
  - arXiv 2205.05198 Table 2 (activation memory of one layer, the paper's
    formula beside the trainer's budget), Table 4 (one 22B layer's time at
    TP 8) and Table 5 per layer (22B, 175B, 530B, 1T at their TP degree; no
    pipeline parallelism here, so per layer only).
Every row of ours is labelled with where it comes from:
  calibrated projection   train_gpt --plan --calibrate TABLE (no GPU needed)
  shard run               one GPU runs rank 0's shard, communication modeled
  real                    every rank ran (as many GPUs as the layout)
(and "planner budget" for memory, "FLOPs-assumed projection" or "no time
model" when the planner has no calibration).

Options
  --calibration FILE  measured op table for --plan --calibrate (default
                      results/gpu/2026-11-27_h200/op_times_megatron_1.2b_gb8.tsv);
                      "none": the planner's own time model
  --links FILE        nccl-tests link table for every projection and run
                      (--set interconnect.table=FILE), e.g. configs/links/*.txt
  --batches LIST      global batches of the Table 1 and appendix D rows (default 8,20)
  --sweeps            also run the paper-scale sweeps (scripts/weak_scaling.sh,
                      strong_scaling.sh), one a batch at its rows' micro-batch:
                      real rows where the GPUs suffice, shard runs otherwise.
                      Default: on when nvidia-smi lists a GPU
  --no-sweeps         plan-based rows only
  --tiny              also run the tiny CPU sweeps (their own tables, not
                      comparable with the papers'), each run --repeat times
  --repeat N          runs of each sweep configuration; rows give the median
                      (default 3 on the CPU, 1 on a GPU)
  --slurm             run the 64-512 GPU columns with srun, one job step per
                      layout (inside an allocation: salloc/sbatch)
  --gpus-per-node N   GPUs (ranks) per node (default 8): --slurm's job steps, and the plans'
                      network model (interconnect.node_gpus): a group with ranks on more than
                      one node is priced at the node's network bandwidth, not the link inside it
  --node-gbps X       one node's network bandwidth in GB/s for that model, all its NICs
                      together (default: the trainer's interconnect.node_gbps, DGX H100's 400)
  --srun-arg ARG      passed to every srun (repeatable), e.g. --srun-arg=--partition=gpu
  --steps N           optimizer steps of each sweep or Slurm run (default 5)
  --out DIR           output directory (default runs/paper_tables_<YYYY-mm-dd>;
                      it is never results/ unless given here)
  --dry-run           print every command (plans, sweeps, srun) and stop
  -h, --help          this text
Also: TRAIN_GPT (the binary; default train_gpt in the repository, build/gpu/train_gpt
for --slurm when it exists), PYTHON (a Python with numpy; default the first of python3 and
/usr/bin/python3 that imports it).

Exit status: 0 every table has its figures; 1 a figure is missing (the tables
are still printed, the reasons under "Missing figures"); 2 bad arguments or a
missing tool.
EOF
}

die() { echo "$prog: error: $*" >&2; exit 2; }
say() { echo "$prog: $*" >&2; }
posint() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer, got '$2'"; }

orig_cmd="scripts/paper_tables.sh"
[ $# -eq 0 ] || orig_cmd+=$(printf ' %q' "$@") # printf with no arguments would add a '' argument
calibration="results/gpu/2026-11-27_h200/op_times_megatron_1.2b_gb8.tsv" links="" batches="8,20" sweeps="" tiny=0
repeat="" slurm=0 gpn=8 node_gbps="" steps=5 out="" dry=0 srun_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --sweeps) sweeps=1; shift ;;
        --no-sweeps) sweeps=0; shift ;;
        --tiny) tiny=1; shift ;;
        --slurm) slurm=1; shift ;;
        --dry-run) dry=1; shift ;;
        --srun-arg=*) srun_args+=("${1#--srun-arg=}"); shift ;;
        --calibration|--links|--batches|--repeat|--gpus-per-node|--node-gbps|--srun-arg|--steps|--out)
            [ $# -ge 2 ] || die "$1 needs a value"
            case "$1" in
                --calibration) calibration="$2" ;; --links) links="$2" ;; --batches) batches="$2" ;;
                --repeat) repeat="$2" ;; --gpus-per-node) gpn="$2" ;; --srun-arg) srun_args+=("$2") ;;
                --steps) steps="$2" ;; --out) out="$2" ;; --node-gbps) node_gbps="$2" ;;
            esac
            shift 2 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[[ "$batches" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--batches must be a comma-separated list of positive integers, got '$batches'"
posint --gpus-per-node "$gpn"; posint --steps "$steps"
[ -z "$node_gbps" ] || [[ "$node_gbps" =~ ^[0-9]+(\.[0-9]+)?$ && ! "$node_gbps" =~ ^0+(\.0+)?$ ]] ||
    die "--node-gbps must be a positive number of GB/s, got '$node_gbps'"
[ -z "$repeat" ] || posint --repeat "$repeat"
[ "$steps" -ge 2 ] || die "--steps must be at least 2 (one warm-up step, then the timed ones)"
cd "$root" || exit 2
# shellcheck source=scripts/scaling/python.sh
source "$root/scripts/scaling/python.sh"
py=$(numpy_python 2>&1) || die "$py"
[ "$calibration" = none ] || [ -f "$calibration" ] || die "--calibration $calibration: no such file"
[ -z "$links" ] || [ -f "$links" ] || die "--links $links: no such file"

ngpu=0
command -v nvidia-smi >/dev/null 2>&1 && ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
[ -n "$sweeps" ] || { if [ "$ngpu" -gt 0 ]; then sweeps=1; else sweeps=0; fi; }
[ -n "$repeat" ] || { if [ "$ngpu" -gt 0 ]; then repeat=1; else repeat=3; fi; }
bin="${TRAIN_GPT:-}"
if [ -z "$bin" ]; then
    bin="$root/train_gpt"
    [ "$slurm" = 0 ] || [ ! -x "$root/build/gpu/train_gpt" ] || bin="$root/build/gpu/train_gpt"
fi
[[ "$bin" != */* || "$bin" == /* ]] || bin="$PWD/$bin"
[ -x "$bin" ] || die "$bin is missing or not executable: build it with 'make train_gpt'"
[ -n "$out" ] || out="runs/paper_tables_$(date +%Y-%m-%d)"
out="$(realpath -m "$out")" || die "bad --out $out"
if [ "$dry" = 0 ]; then mkdir -p "$out/plans" || die "cannot create $out"; fi # a dry run writes nothing
scratch=$(mktemp -d) || die "cannot make a temporary directory"
trap 'rm -rf "$scratch"' EXIT
help_file="$scratch/train_gpt_help.txt"
"$bin" --help >"$help_file" 2>&1 || die "$bin --help failed"
link_sets=()
[ -z "$links" ] || link_sets=(--set "interconnect.table=$links")
# the plans' network model: groups across nodes of --gpus-per-node ranks (a binary without it: one node)
node_sets=() node_text="no network model: $bin has no interconnect.node_gpus (DP across nodes priced as inside one)"
if grep -q 'interconnect.node_gpus' "$help_file"; then
    node_sets=(--set "interconnect.node_gpus=$gpn")
    [ -z "$node_gbps" ] || node_sets+=(--set "interconnect.node_gbps=$node_gbps")
    gbps="$node_gbps"
    [ -n "$gbps" ] || gbps=$(awk '$1 == "interconnect.node_gbps" && $3 == "default" {print $4}' "$help_file")
    node_text="$gpn GPUs a node; a group with ranks on several nodes at ${gbps:-?} GB/s a node, shared by the groups crossing at once (interconnect.node_gpus, node_gbps)"
else
    say "warning: $node_text"
fi
cal_args=()
cal_text="none (the planner's own time model)" plan_label="planner projection (no calibration)"
if [ "$calibration" != none ]; then
    if grep -q -- '--calibrate' "$help_file"; then
        cal_args=(--calibrate "$calibration")
        cal_text="$calibration" plan_label="calibrated projection"
    else
        say "warning: $bin has no --calibrate: its --plan rows are FLOPs-assumed projections, labelled so"
        cal_text="$calibration requested, but $bin has no --calibrate: FLOPs-assumed"
    fi
fi

# ---- the plans: cheap, no training, no GPU -------------------------------------
jobs_file="$scratch/jobs.tsv"
"$py" "$helper" jobs --batches "$batches" >"$jobs_file" || die "could not list the plan jobs"
n_jobs=$(wc -l <"$jobs_file")
[ "$dry" = 1 ] || say "$n_jobs plans (--plan, no training)"
while IFS=$'\t' read -r name cfg devices sets; do
    args=(--plan --config "$cfg" --devices "$devices" --plan-json "$out/plans/$name.jsonl" "${cal_args[@]}" "${link_sets[@]}"
        "${node_sets[@]}")
    IFS=$'\x1f' read -r -a set_arr <<<"$sets"
    for s in "${set_arr[@]}"; do args+=(--set "$s"); done
    if [ "$dry" = 1 ]; then
        printf '%q ' "$bin" "${args[@]}"; echo "# $plan_label"
        continue
    fi
    rm -f "$out/plans/$name.jsonl"
    "$bin" "${args[@]}" >"$out/plans/$name.out" 2>&1 || say "plan $name failed: $(tail -n 1 "$out/plans/$name.out")"
done <"$jobs_file"

# ---- sweeps: shard runs and real runs ------------------------------------------
sweep_args=()
sweep() { # KIND SCALE DIR [ARGS...]: one sweep through scripts/<KIND>_scaling.sh
    local kind="$1" scale="$2" dir="$3"; shift 3
    local cmd=("scripts/${kind}_scaling.sh" --scale "$scale" --repeat "$repeat" --steps "$steps" --out "$dir" "$@")
    [ -z "$links" ] || cmd+=(--set "interconnect.table=$links")
    if [ "$dry" = 1 ]; then
        printf '%q ' "${cmd[@]}"; echo "# sweep: real where the devices suffice, shard run otherwise"
        return 0
    fi
    say "sweep: ${cmd[*]}"
    TRAIN_GPT="$bin" "${cmd[@]}" >"$dir.log" 2>&1 || say "the $kind sweep ended with status $? (see $dir.log)"
}
if [ "$sweeps" = 1 ]; then
    # One sweep a batch, at the micro-batch of that batch's plan rows (batch 20 as 2 x 10), so
    # that a sweep's row beside a plan's is the same layout (a sweep's default is one micro-batch).
    micro_file="$scratch/micro.tsv"
    "$py" "$helper" micro --batches "$batches" >"$micro_file" || die "could not list the micro-batches"
    while IFS=$'\t' read -r b mb; do
        for kind in weak strong; do
            sweep "$kind" paper "$out/sweep_${kind}_b$b" --batches "$b" --micro-batch "$mb"
            sweep_args+=(--sweep "$kind=$out/sweep_${kind}_b$b")
        done
    done <"$micro_file"
fi
if [ "$tiny" = 1 ]; then
    sweep weak tiny "$out/tiny_weak" --device cpu
    sweep strong tiny "$out/tiny_strong" --device cpu
fi

# ---- Slurm: the 64-512 GPU columns ----------------------------------------------
if [ "$slurm" = 1 ]; then
    # shellcheck source=scripts/scaling/slurm.sh
    source "$root/scripts/scaling/slurm.sh"
    pt_slurm
    [ "$dry" = 1 ] || sweep_args+=(--sweep "slurm=$out/slurm")
fi
[ "$dry" = 0 ] || exit 0
{ cp "$help_file" "$out/train_gpt_help.txt" && cp "$jobs_file" "$out/plans/jobs.tsv"; } || die "cannot write into $out"
help_file="$out/train_gpt_help.txt"

# ---- the tables ------------------------------------------------------------------
rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$root" diff --quiet HEAD -- 2>/dev/null || rev="$rev + uncommitted changes"
{
    printf 'command\t%s\n' "$orig_cmd"
    printf 'date\t%s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    printf 'binary\t%s\n' "$bin, git $rev"
    printf 'calibration\t%s\n' "$cal_text"
    printf 'links\t%s\n' "${links:-each config has its interconnect.* keys}"
    printf 'nodes\t%s\n' "$node_text"
    printf 'GPUs here\t%s\n' "$ngpu (nvidia-smi)"
} >"$out/info.tsv"
"$py" "$helper" build --plans "$out/plans" --help-text "$help_file" --info "$out/info.tsv" --out "$out" \
    --batches "$batches" "${sweep_args[@]}"
rc=$?
[ "$rc" -le 1 ] || die "the table builder failed (status $rc)"
say "wrote $out/tables.md and $out/tables.tsv"
[ "$tiny" = 0 ] || say "tiny sweeps: $out/tiny_weak/table.md, $out/tiny_strong/table.md"
exit "$rc"
