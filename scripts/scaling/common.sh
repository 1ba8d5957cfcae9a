# Shared body of scripts/weak_scaling.sh and scripts/strong_scaling.sh
# (sourced; they call sc_main weak|strong "$@"). See sc_usage for what it does.
# shellcheck shell=bash

sc_usage() {
    local kind="$1" s="scripts/${1}_scaling.sh"
    cat <<EOF
Usage: [SCALE=paper|tiny] [DEVICES=N] [PEAK_TFLOPS=X] $s [options]

Runs the Megatron-LM ${kind} scaling sweep with train_gpt and writes, into the
results directory, table.md (Markdown, the paper's columns), chart.png
(gnuplot), table.tsv, chart.gp, and the raw runs (runs/<name>/log.jsonl,
runs/<name>.out). Without gnuplot the sweep still runs and writes all but
chart.png, and says so at its start and end; chart.gp (its data inline) draws
the chart later on any machine with gnuplot: cd DIR && gnuplot chart.gp, DIR
being the results directory (--out).
EOF
    if [ "$kind" = weak ]; then cat <<'EOF'
Weak scaling: the model grows with the tensor-parallel degree, as in the paper
(arXiv 1909.08053, Table 1): paper scale runs configs/megatron_weak_1.2b.json
at tp 1, _2.5b at tp 2, _4.2b at tp 4 and _8.3b at tp 8; efficiency is the
FLOP/s per device relative to the tp=1 row of the same global batch.
EOF
    else cat <<'EOF'
Strong scaling: one model at every tensor-parallel degree (paper scale:
configs/megatron_strong_1.2b.json, as the paper's appendix D); speedup is
step time at tp=1 / step time at tp, efficiency = speedup / tp.
EOF
    fi
    cat <<'EOF'

A layout with tp x dp <= DEVICES runs for real: tp x dp processes through
scripts/launch.sh. A larger one is projected: one process runs rank 0's exact
shard (--set parallel.project=true) and the trainer adds a modeled
communication time (interconnect.* keys). Projected rows say "projected" in
the table and the chart.

Options (environment variables in brackets):
  --scale paper|tiny   [SCALE] paper: the paper's models (configs/megatron_*);
                       tiny: small CPU models made in the results directory,
                       seconds per run. Default: paper when nvidia-smi lists a
                       GPU, tiny otherwise.
  --batches LIST       global batch sizes, comma-separated; one row set each
                       (default 8,20)
  --tp LIST            tensor-parallel degrees (default: paper 1,2,4,8; tiny 1,2,4)
  --dp N               data-parallel degree of every row (default 1)
  --sp true|false      sequence parallelism (default: the config's parallel.sp)
  --recompute MODE     none|selective|full (default: the config's train.recompute)
  --micro-batch N      sequences per micro-batch (default: global batch / dp,
                       one micro-batch per step as in the paper)
  --steps N            optimizer steps per configuration, the first being the
                       warm-up; the step time is the median of the others
                       (default: paper 5, tiny 4)
  --repeat N           runs of each configuration (default: tiny 3, paper 1); the
                       table gives the median of their step times and their
                       spread, and flags an efficiency above 100% as noise
  --devices N          [DEVICES] devices available for real runs (default: the
                       GPUs nvidia-smi -L lists; on the CPU 2 for tiny, 1 for
                       paper; on CUDA at most the GPUs listed, but a dry run
                       may plan for more). On the CPU a device is
                       OMP_NUM_THREADS cores (default: cores / DEVICES), also
                       in projected runs.
  --device cpu|cuda    [DEVICE] backend (default: cuda for paper scale when a
                       GPU is there, cpu otherwise)
  --peak-tflops X      [PEAK_TFLOPS] peak dense TFLOP/s of one device, for MFU
                       (default: the config's device_peak_tflops if set; a table
                       of GPU names (bf16 dense); on the CPU an estimate from
                       lscpu: cores x clock x FLOP/cycle of the vector unit)
  --set KEY=VALUE      passed to every run (repeatable), e.g.
                       --set interconnect.bus_gbps=300, or
                       --set interconnect.table=configs/links/h100_sxm_nvlink4_x8.txt
  --timeout S          seconds one run may take (default: paper 1800, tiny 120)
  --out DIR            results directory (default: in the repository,
                       runs/<weak|strong>_scaling_<scale>_<YYYY-mm-dd>, which
                       git ignores; name results/... to keep a table);
                       runs already there are replaced
  --dry-run            print each configuration's command line (real or
                       projected; once, however many repeats) and stop;
                       writes only the tiny configs into --out
  -h, --help           this text
Also: TRAIN_GPT (the binary, default train_gpt in the repository), KEEP_CHECKPOINTS=1 (keep
the checkpoint the trainer writes at the end of each run; removed by default), PYTHON (a Python
with numpy for scripts/scaling/scaling.py; default the first of python3 and /usr/bin/python3
that imports numpy).

Exit status: 0 every row has its figures; 1 a run failed or a figure is
missing (the table and chart are still written, with n/a, and the reasons
under "Problems"); 2 bad arguments or a missing tool (gnuplot excepted).
EOF
}

sc_die() { echo "$sc_prog: error: $*" >&2; exit 2; }

# sc_python: numpy_python (scripts/scaling/python.sh), or the sweep stops (exit 2)
# shellcheck source=scripts/scaling/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/python.sh"
sc_python() {
    local p
    p=$(numpy_python 2>&1) || sc_die "$p"
    echo "$p"
}
sc_say() { echo "$sc_prog: $*" >&2; }

# sc_list NAME VALUE: a comma-separated list of positive integers, or die
sc_list() {
    [[ "$2" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || sc_die "$1 must be a comma-separated list of positive integers, got '$2'"
}
sc_posint() {
    [[ "$2" =~ ^[1-9][0-9]*$ ]] || sc_die "$1 must be a positive integer, got '$2'"
}

# sc_gpu_count: GPUs nvidia-smi lists (0 without nvidia-smi)
sc_gpu_count() {
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true
    else
        echo 0
    fi
}

# sc_cpu_peak THREADS: sets sc_peak and sc_peak_text (an estimate)
sc_cpu_peak() {
    local threads="$1" mhz flops isa
    mhz=$(lscpu 2>/dev/null | awk -F: '/^CPU max MHz/ {gsub(/ /,"",$2); print $2; exit}')
    [ -n "$mhz" ] && [ "${mhz%%.*}" -gt 0 ] 2>/dev/null || mhz=$(awk -F: '/^cpu MHz/ {gsub(/ /,"",$2); print $2; exit}' /proc/cpuinfo)
    [ -n "$mhz" ] || mhz=2000
    if grep -qw avx512f /proc/cpuinfo; then flops=64 isa="AVX-512, 2 FMA units"
    elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then flops=32 isa="AVX2, 2 FMA units"
    else flops=8 isa="SSE"
    fi
    sc_peak=$(awk -v t="$threads" -v m="$mhz" -v f="$flops" 'BEGIN {printf "%.4g", t * m * 1e6 * f / 1e12}')
    sc_peak_text="$sc_peak TFLOP/s fp32, estimated: $threads core(s) x ${mhz%.*} MHz x $flops FLOP/cycle ($isa); MFU is against it"
}

# sc_gpu_peak NAME BIN: bf16 dense tensor-core peak of a GPU name from the
# trainer's own table (BIN --peak-tflops), or nothing when it is unknown
sc_gpu_peak() {
    local p; p=$("$2" --peak-tflops "$1" bf16 2>/dev/null) || return 0
    awk -v p="$p" 'BEGIN {exit !(p > 0)}' && echo "$p"
    return 0
}

sc_main() {
    sc_kind="$1"; shift
    sc_prog="${sc_kind}_scaling"
    local root; root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    local py helper="$root/scripts/scaling/scaling.py"
    py=$(sc_python) || exit 2
    local orig_cmd env_part="" v
    for v in SCALE DEVICES DEVICE PEAK_TFLOPS OMP_NUM_THREADS TRAIN_GPT PYTHON; do
        [ -n "${!v:-}" ] && env_part+="$v=$(printf '%q' "${!v}") "
    done
    orig_cmd="${env_part}scripts/${sc_kind}_scaling.sh"
    [ $# -eq 0 ] || orig_cmd+=$(printf ' %q' "$@") # printf with no arguments would add a '' argument

    local scale="${SCALE:-}" batches="8,20" tps="" dp=1 sp="" recompute="" micro="" steps="" devices="${DEVICES:-}"
    local device="${DEVICE:-}" peak="${PEAK_TFLOPS:-}" timeout_s="" out="" extra=() dry_run=0 repeat=""
    while [ $# -gt 0 ]; do
        case "$1" in
            -h|--help) sc_usage "$sc_kind"; exit 0 ;;
            --dry-run) dry_run=1; shift ;;
            --scale|--batches|--tp|--dp|--sp|--recompute|--micro-batch|--steps|--repeat|--devices|--device|--peak-tflops|--set|--timeout|--out)
                [ $# -ge 2 ] || sc_die "$1 needs a value"
                case "$1" in
                    --scale) scale="$2" ;; --batches) batches="$2" ;; --tp) tps="$2" ;; --dp) dp="$2" ;;
                    --sp) sp="$2" ;; --recompute) recompute="$2" ;; --micro-batch) micro="$2" ;;
                    --steps) steps="$2" ;; --repeat) repeat="$2" ;; --devices) devices="$2" ;; --device) device="$2" ;;
                    --peak-tflops) peak="$2" ;; --timeout) timeout_s="$2" ;; --out) out="$2" ;;
                    --set) [[ "$2" == *=* ]] || sc_die "--set needs KEY=VALUE, got '$2'"; extra+=("$2") ;;
                esac
                shift 2 ;;
            *) sc_die "unknown argument '$1' (see --help)" ;;
        esac
    done

    local ngpu; ngpu=$(sc_gpu_count)
    if [ -z "$scale" ]; then
        if [ "$ngpu" -gt 0 ]; then scale=paper; else scale=tiny; fi
        sc_say "SCALE not given: $scale ($ngpu GPU(s) listed by nvidia-smi)"
    fi
    case "$scale" in paper|tiny) ;; *) sc_die "--scale/SCALE must be paper or tiny, got '$scale'" ;; esac
    [ -n "$tps" ] || { if [ "$scale" = paper ]; then tps=1,2,4,8; else tps=1,2,4; fi; }
    [ -n "$steps" ] || { if [ "$scale" = paper ]; then steps=5; else steps=4; fi; }
    [ -n "$timeout_s" ] || { if [ "$scale" = paper ]; then timeout_s=1800; else timeout_s=120; fi; }
    [ -n "$repeat" ] || { if [ "$scale" = paper ]; then repeat=1; else repeat=3; fi; }
    if [ -z "$device" ]; then
        if [ "$scale" = paper ] && [ "$ngpu" -gt 0 ]; then device=cuda; else device=cpu; fi
    fi
    case "$device" in cpu|cuda) ;; *) sc_die "--device/DEVICE must be cpu or cuda, got '$device'" ;; esac
    if [ -z "$devices" ]; then
        if [ "$device" = cuda ]; then devices=$ngpu; elif [ "$scale" = tiny ]; then devices=2; else devices=1; fi
        [ "$devices" -ge 1 ] || devices=1
    fi
    sc_list --batches "$batches"; sc_list --tp "$tps"; sc_posint --dp "$dp"; sc_posint --devices "$devices"
    # ranks beyond the GPUs would share them (parallel.comm auto turns to shm): rows timed so measure
    # nothing the paper's layouts do. A dry run may plan for a larger node than this one.
    if [ "$device" = cuda ] && [ "$dry_run" = 0 ] && [ "$ngpu" -gt 0 ] && [ "$devices" -gt "$ngpu" ]; then
        sc_die "--devices/DEVICES is $devices, but nvidia-smi -L lists $ngpu GPU(s) on this node: real runs of more ranks than GPUs would share them; pass --devices $ngpu (wider layouts are then projected)"
    fi
    sc_posint --steps "$steps"; sc_posint --timeout "$timeout_s"; sc_posint --repeat "$repeat"
    [ "$steps" -ge 2 ] || sc_die "--steps must be at least 2 (one warm-up step, then the timed ones)"
    [ -z "$micro" ] || sc_posint --micro-batch "$micro"
    [ -z "$sp" ] || [[ "$sp" =~ ^(true|false)$ ]] || sc_die "--sp must be true or false, got '$sp'"
    [ -z "$recompute" ] || [[ "$recompute" =~ ^(none|selective|full)$ ]] || sc_die "--recompute must be none, selective or full, got '$recompute'"
    [ -z "$peak" ] || [[ "$peak" =~ ^[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$ ]] || sc_die "--peak-tflops/PEAK_TFLOPS must be a number, got '$peak'"
    # gnuplot draws chart.png only: without it the sweep still runs and writes everything else
    local have_gnuplot=1
    command -v gnuplot >/dev/null 2>&1 || have_gnuplot=0

    [ -n "$out" ] || out="$root/runs/${sc_kind}_scaling_${scale}_$(date +%Y-%m-%d)"
    local bin="${TRAIN_GPT:-$root/train_gpt}"
    [[ "$bin" != */* || "$bin" == /* ]] || bin="$PWD/$bin"
    mkdir -p "$out" || sc_die "cannot create $out"
    out="$(cd "$out" && pwd)"
    local draw_later
    draw_later="(cd $(printf '%q' "$out") && gnuplot chart.gp)"
    [ "$dry_run" = 1 ] || [ "$have_gnuplot" = 1 ] || sc_say "warning: gnuplot is missing (Debian's gnuplot-nox; scripts/setup.sh installs it):" \
        "the sweep runs and writes table.md, table.tsv and chart.gp, but no chart.png; draw it later with: $draw_later"
    cd "$root" || exit 2
    [ -x "$bin" ] || sc_die "$bin is missing or not executable: build it with 'make train_gpt'"
    sc_help_tmp=$(mktemp) || exit 2
    trap 'rm -f "$sc_help_tmp"' EXIT
    local help="$sc_help_tmp"
    "$bin" --help >"$help" 2>&1 || sc_die "$bin --help failed"
    grep -q 'parallel.project' "$help" || sc_die "$bin has no parallel.project key: rebuild it"

    local bb
    for bb in ${batches//,/ }; do
        [ $(( bb % (dp * ${micro:-$(( bb / dp > 0 ? bb / dp : 1 ))}) )) -eq 0 ] ||
            sc_die "global batch $bb is not a multiple of dp x micro-batch = $dp x ${micro:-$(( bb / dp ))}"
    done

    # ---- the models: "tp label config" lines -------------------------------
    local models=() t cfg label
    IFS=, read -r -a tp_arr <<<"$tps"
    IFS=, read -r -a batch_arr <<<"$batches"
    if [ "$scale" = paper ]; then
        for t in "${tp_arr[@]}"; do
            if [ "$sc_kind" = weak ]; then
                case "$t" in 1) label=1.2b ;; 2) label=2.5b ;; 4) label=4.2b ;; 8) label=8.3b ;;
                    *) sc_die "the paper's weak scaling has models for tp 1, 2, 4 and 8 only, not $t" ;; esac
                cfg="configs/megatron_weak_$label.json"
            else
                label=1.2b cfg="configs/megatron_strong_1.2b.json"
            fi
            [ -f "$cfg" ] || sc_die "$cfg is missing"
            models+=("$t ${label^^} $cfg")
        done
    else
        mkdir -p "$out/configs"
        # tiny: head size 16 (12 at tp 8); weak grows width, heads like the
        # paper (params about 1x, 2x, 3.4x, 7x); strong keeps the tp=4 model.
        local L C H
        for t in "${tp_arr[@]}"; do
            if [ "$sc_kind" = weak ]; then
                case "$t" in 1) L=2 C=64 H=4 ;; 2) L=2 C=96 H=6 ;; 4) L=2 C=128 H=8 ;; 8) L=2 C=192 H=16 ;;
                    *) sc_die "tiny weak scaling has models for tp 1, 2, 4 and 8 only, not $t" ;; esac
                label="tiny-w$C"
            else
                L=2 C=128 H=8 label="tiny-s128"
                [ $((H % t)) -eq 0 ] || sc_die "tiny strong scaling's model has $H heads: tp $t does not divide them"
            fi
            cfg="$out/configs/$label.json"
            cat >"$cfg" <<JSON
{"model": {"n_layer": $L, "n_head": $H, "n_embd": $C, "vocab_size": 512, "seq_len": 64},
 "train": {"micro_batch": 8, "global_batch": 8, "steps": $steps, "lr": 1e-3, "min_lr": 1e-4, "warmup": 1, "recompute": "none"},
 "data": {"train": "", "val": ""},
 "out": {"log_every": 1, "eval_every": 0, "eval_batches": 0, "sample_tokens": 0, "resume": false}}
JSON
            models+=("$t $label $cfg")
        done
    fi

    # ---- settings shared by every run -----------------------------------
    local first_cfg="${models[0]#* }"; first_cfg="${first_cfg#* }"
    cget() { "$py" "$helper" get "$help" "$1" "$2" "${extra[@]}"; }
    if [ "$device" = cpu ] && [ -z "${OMP_NUM_THREADS:-}" ]; then
        local ncpu; ncpu=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
        export OMP_NUM_THREADS=$(( ncpu / devices > 0 ? ncpu / devices : 1 ))
    fi
    local device_text device_short
    if [ "$device" = cuda ]; then
        local q; q=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
        [ -n "$q" ] || sc_die "--device cuda but nvidia-smi reports no GPU"
        device_text="GPU $(echo "$q" | cut -d, -f1 | sed 's/^ *//') (driver $(echo "$q" | cut -d, -f2 | tr -d ' '), $(echo "$q" | cut -d, -f3 | sed 's/^ *//')); $ngpu on this machine"
        device_short="$(echo "$q" | cut -d, -f1)"
        if [ -z "$peak" ]; then
            peak=$(cget "$first_cfg" device_peak_tflops)
            if [ -n "$peak" ] && awk -v p="$peak" 'BEGIN {exit !(p > 0)}'; then
                sc_peak_text="$peak TFLOP/s (device_peak_tflops of the config); MFU is against it"
            else
                peak=$(sc_gpu_peak "$device_short" "$bin")
                [ -n "$peak" ] || sc_die "unknown peak TFLOP/s for '$device_short': set PEAK_TFLOPS"
                sc_peak_text="$peak TFLOP/s, bf16 dense tensor-core peak of the $device_short data sheet; MFU is against it"
            fi
        else
            sc_peak_text="$peak TFLOP/s (PEAK_TFLOPS); MFU is against it"
        fi
    else
        local cpu_name; cpu_name=$(lscpu 2>/dev/null | awk -F: '/^Model name/ {sub(/^ +/,"",$2); print $2; exit}')
        device_text="CPU ${cpu_name:-unknown}, $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) core(s); one device = one rank of $OMP_NUM_THREADS OpenMP thread(s)"
        device_short="CPU ${cpu_name:-unknown}"
        if [ -z "$peak" ]; then
            sc_cpu_peak "$OMP_NUM_THREADS"; peak="$sc_peak"
        else
            sc_peak_text="$peak TFLOP/s (PEAK_TFLOPS); MFU is against it"
        fi
    fi
    [ -n "$sp" ] || sp=$(cget "$first_cfg" parallel.sp)
    [ -n "$recompute" ] || recompute=$(cget "$first_cfg" train.recompute)

    # random-token training shard, enough for the largest batch
    local max_b=0 b min_vocab=1000000000 seq_max=0 m_cfg
    for b in "${batch_arr[@]}"; do [ "$b" -gt "$max_b" ] && max_b=$b; done
    for m in "${models[@]}"; do
        m_cfg="${m#* }"; m_cfg="${m_cfg#* }"
        v=$(cget "$m_cfg" model.vocab_size); [ "$v" -lt "$min_vocab" ] && min_vocab=$v
        v=$(cget "$m_cfg" model.seq_len); [ "$v" -gt "$seq_max" ] && seq_max=$v
    done
    local ntok=$(( (steps + 2) * max_b * (seq_max + 1) * 2 ))
    [ "$dry_run" = 1 ] || "$py" "$helper" data "$out/data" "$ntok" "$(( min_vocab < 65536 ? min_vocab : 65536 ))" || sc_die "could not write the token shard"

    local keep_final=()
    grep -q 'out.save_final' "$help" && keep_final=(--set out.save_final=false)
    local peak_set=()
    grep -q 'device_peak_tflops' "$help" && peak_set=(--set "device_peak_tflops=$peak")

    # ---- the sweep -------------------------------------------------------
    [ "$dry_run" = 1 ] || mkdir -p "$out/runs"
    [ "$dry_run" = 1 ] || cp "$help" "$out/train_gpt_help.txt"
    local manifest="$out/manifest.tsv"
    [ "$dry_run" = 1 ] || : >"$manifest"
    local total=$(( ${#batch_arr[@]} * ${#models[@]} )) n=0 mode name dir rc t0 mb sets_joined
    sets_joined=$(IFS=$'\x1f'; echo "${extra[*]:-}")
    for b in "${batch_arr[@]}"; do
        for m in "${models[@]}"; do
            read -r t label cfg <<<"$m"
            n=$((n + 1))
            mb="${micro:-$(( b / dp ))}"
            if [ $(( b % (dp * mb) )) -ne 0 ]; then
                sc_die "global batch $b is not a multiple of dp x micro-batch = $dp x $mb"
            fi
            if [ $(( t * dp )) -le "$devices" ]; then mode=real; else mode=projected; fi
            local rep
            for (( rep = 1; rep <= repeat; rep++ )); do
                name="b${b}_tp${t}_dp${dp}_${label}"
                [ "$repeat" = 1 ] || name="${name}_r$rep"
                dir="$out/runs/$name"
                rm -rf "$dir" "$dir.out"
                local args=(--config "$cfg" --set "parallel.tp=$t" --set "parallel.dp=$dp" --set "parallel.sp=$sp"
                    --set "train.recompute=$recompute" --set "train.global_batch=$b" --set "train.micro_batch=$mb"
                    --set "train.steps=$steps" --set "data.train=$out/data/train_*.bin" --set "data.val="
                    --set "out.dir=$dir" --set out.resume=false --set out.log_every=1 --set out.eval_every=0
                    --set out.eval_batches=0 --set out.sample_every=0 --set out.sample_tokens=0 --set "device=$device"
                    "${peak_set[@]}" "${keep_final[@]}")
                for v in "${extra[@]}"; do args+=(--set "$v"); done
                if [ "$dry_run" = 1 ]; then
                    if [ "$mode" = real ]; then
                        printf '%q ' timeout --foreground -k 10 "$timeout_s" scripts/launch.sh -n $(( t * dp )) --log-dir "$dir/launch" -- "$bin" "${args[@]}"
                    else
                        printf '%q ' timeout --foreground -k 10 "$timeout_s" "$bin" "${args[@]}" --set parallel.project=true
                    fi
                    echo "# $mode"
                    break # one line per configuration, however many repeats
                fi
                sc_say "[$n/$total] batch $b, tp $t, dp $dp, $label: $mode$([ "$repeat" = 1 ] || echo ", run $rep of $repeat")"
                t0=$SECONDS
                if [ "$mode" = real ]; then
                    timeout --foreground -k 10 "$timeout_s" scripts/launch.sh -n $(( t * dp )) --log-dir "$dir/launch" -- \
                        "$bin" "${args[@]}" >"$dir.out" 2>&1
                else
                    timeout --foreground -k 10 "$timeout_s" "$bin" "${args[@]}" --set parallel.project=true >"$dir.out" 2>&1
                fi
                rc=$?
                if [ "$rc" -ne 0 ]; then
                    sc_say "  failed (status $rc$([ "$rc" -eq 124 ] && echo ", timed out after ${timeout_s}s")); last lines of $dir.out:"
                    tail -n 5 "$dir.out" | sed 's/^/    /' >&2
                else
                    sc_say "  done in $((SECONDS - t0))s"
                fi
                [ "${KEEP_CHECKPOINTS:-0}" = 1 ] || rm -rf "$dir"/step_[0-9]*
                printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$cfg" "$t" "$dp" "$sp" "$recompute" \
                    "$b" "$mb" "$mode" "$dir" "$rc" "$sets_joined" "$rep" >>"$manifest"
            done
        done
    done

    [ "$dry_run" = 0 ] || return 0
    # ---- table and chart -------------------------------------------------
    # pngcairo unless this gnuplot lacks it; without gnuplot pngcairo too (chart.gp falls back
    # to png itself where the gnuplot that draws it has no pngcairo)
    local gp_term=pngcairo
    [ "$have_gnuplot" = 0 ] || gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1 || gp_term=png
    local bus lat rev link_table link_text
    bus=$(cget "$first_cfg" interconnect.bus_gbps 2>/dev/null || echo "?")
    lat=$(cget "$first_cfg" interconnect.latency_us 2>/dev/null || echo "?")
    link_table=$(cget "$first_cfg" interconnect.table 2>/dev/null || true)
    if [ -n "$link_table" ]; then
        link_text="time per collective = bytes / busbw interpolated from the nccl-tests table interconnect.table = $link_table"
    else
        link_text="communication time = bytes / bus bandwidth + latency per collective, interconnect.bus_gbps = $bus GB/s, interconnect.latency_us = $lat us"
    fi
    rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
    git -C "$root" diff --quiet HEAD -- 2>/dev/null || rev="$rev + uncommitted changes"
    {
        printf 'scale_text\t%s\n' "$([ "$scale" = paper ] && echo "the paper's models, SCALE=paper" || echo "tiny CPU models, SCALE=tiny")"
        printf 'device\t%s\n' "$device_text"
        printf 'device_short\t%s\n' "$device_short"
        printf 'devices_text\t%s\n' "$devices for real runs (DEVICES); layouts with tp x dp > $devices are projected"
        printf 'peak_tflops\t%s\n' "$peak"
        printf 'peak_text\t%s\n' "$sc_peak_text"
        printf 'date\t%s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
        printf 'command\t%s\n' "$orig_cmd"
        printf 'binary\t%s\n' "$bin, git $rev, device=$device, precision $(cget "$first_cfg" train.precision 2>/dev/null || echo '?')"
        printf 'steps_text\t%s\n' "$steps per configuration, run $repeat time(s); step time = median of steps 2..$steps (step 1 is the warm-up), then the median over the runs"
        printf 'interconnect_text\t%s\n' "one process runs rank 0's shard with comm_null; $link_text"
        printf 'terminal\t%s\n' "$gp_term"
    } >"$out/info.tsv"
    local table_rc=0
    "$py" "$helper" table --kind "$sc_kind" --manifest "$manifest" --info "$out/info.tsv" --out "$out" \
        --help-text "$out/train_gpt_help.txt" || table_rc=$?
    [ "$table_rc" -le 1 ] || sc_die "the table builder failed (status $table_rc)"
    if [ "$have_gnuplot" = 1 ]; then
        (cd "$out" && gnuplot chart.gp) >"$out/gnuplot.log" 2>&1 || { sc_say "gnuplot failed:"; cat "$out/gnuplot.log" >&2; exit 1; }
        sc_say "wrote $out/table.md and $out/chart.png"
    else
        rm -f "$out/chart.png" "$out/gnuplot.log" # an earlier sweep's, not this one's
        sc_say "wrote $out/table.md, $out/table.tsv and $out/chart.gp"
        sc_say "warning: no chart: gnuplot is missing, so chart.png was not drawn; draw it with: $draw_later"
    fi
    return "$table_rc"
}
