#!/usr/bin/env bash
# plot_log.sh: one PNG of training curves (loss, val loss, learning rate,
# tokens/s; 2x2 panels, and a row of HellaSwag accuracy when a run logged it)
# from the log.jsonl of one or more run directories,
# each run a series named after its directory. Needs gnuplot (scripts/setup.sh
# installs gnuplot-nox) and python3 (to read the JSON lines).
set -u
prog=plot_log.sh
usage() {
    cat <<'EOF'
Usage: scripts/plot_log.sh [-o FILE] [--smooth N] RUN_DIR [RUN_DIR ...]

Draws train loss, validation loss, learning rate and tokens/s against the step
from each RUN_DIR/log.jsonl into one PNG (2x2 panels, 1200x900; with a third
row, 1200x1350, of HellaSwag acc_norm and acc when a run logged them: see
out.hellaswag), the runs overlaid with their directory names as the legend. Values written as null (not finite),
steps logged with "skipped":true and {"resumed":true} markers are left out.

  -o FILE     the PNG to write (default: loss.png in the first RUN_DIR)
  --smooth N  draw the train loss as a moving average: at each step, the mean
              of the last N train lines up to it (fewer at the start; values
              left out above are not counted); default 1, the raw loss
  --gp FILE   also keep the gnuplot script (its data inline), to restyle the picture
  -h, --help  this text

Exit status: 0 written; 1 a log is missing or holds no train line; 2 bad
arguments or a missing tool.
EOF
}
die() { echo "$prog: error: $1" >&2; exit "${2:-1}"; }

out=""
keep_gp=""
smooth=1
dirs=()
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        -o) [ $# -ge 2 ] || die "-o needs a file name" 2; out="$2"; shift 2 ;;
        --gp) [ $# -ge 2 ] || die "--gp needs a file name" 2; keep_gp="$2"; shift 2 ;;
        --smooth) [ $# -ge 2 ] || die "--smooth needs a number of steps" 2; smooth="$2"; shift 2 ;;
        --) shift; dirs+=("$@"); break ;;
        -*) die "unknown option '$1' (see --help)" 2 ;;
        *) dirs+=("$1"); shift ;;
    esac
done
[ ${#dirs[@]} -gt 0 ] || die "no RUN_DIR given (see --help)" 2
[[ "$smooth" =~ ^[1-9][0-9]{0,6}$ ]] || die "--smooth must be a whole number of steps from 1, got '$smooth'" 2
command -v gnuplot >/dev/null 2>&1 || die "gnuplot is missing: install Debian's gnuplot-nox (scripts/setup.sh does)" 2
py=/usr/bin/python3
[ -x "$py" ] || py=python3
command -v "$py" >/dev/null 2>&1 || die "python3 is missing" 2
[ -n "$out" ] || out="${dirs[0]%/}/loss.png"

work=$(mktemp -d) || exit 2
trap 'rm -rf "$work"' EXIT

# Each log becomes three whitespace tables gnuplot reads: train (step loss lr
# tok_per_s, NaN for a missing value), eval (step val_loss) and hs (step
# hellaswag_acc_norm hellaswag_acc). A resume rewrites the log so each step
# appears once; the last line of a step wins.
i=0
for d in "${dirs[@]}"; do
    log="${d%/}/log.jsonl"
    [ -f "$log" ] || die "$log: no such file (is $d a run directory?)"
    "$py" - "$log" "$work/train_$i.dat" "$work/eval_$i.dat" "$work/hs_$i.dat" "$smooth" <<'PY' || exit 1
import json, math, sys
log, train_out, eval_out, hs_out, smooth = *sys.argv[1:5], int(sys.argv[5])
train, evals, hs = {}, {}, {}
def val(o, k):
    v = o.get(k)
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    return f"{v:.9g}" if ok else "NaN"
with open(log) as f:
    for n, raw in enumerate(f, 1):
        raw = raw.strip()
        if not raw:
            continue
        try:
            o = json.loads(raw)
        except json.JSONDecodeError as e:
            sys.exit(f"plot_log.sh: {log}:{n}: not JSON ({e.msg})")
        if not isinstance(o, dict) or not isinstance(o.get("step"), int) or o.get("resumed") or o.get("skipped"):
            continue
        if "loss" in o:
            train[o["step"]] = " ".join([str(o["step"])] + [val(o, k) for k in ("loss", "lr", "tok_per_s")])
        elif "val_loss" in o:
            evals[o["step"]] = f"{o['step']} {val(o, 'val_loss')}"
        elif "hellaswag_acc_norm" in o:
            hs[o["step"]] = " ".join([str(o["step"])] + [val(o, k) for k in ("hellaswag_acc_norm", "hellaswag_acc")])
if not train:
    sys.exit(f"plot_log.sh: {log}: no train lines (step with loss)")
if smooth > 1:  # the loss column becomes the mean of the last `smooth` train lines' finite losses
    steps = sorted(train)
    losses = [train[k].split()[1] for k in steps]
    for n, k in enumerate(steps):
        window = [float(v) for v in losses[max(0, n - smooth + 1):n + 1] if v != "NaN"]
        cols = train[k].split()
        cols[1] = f"{sum(window) / len(window):.9g}" if window else "NaN"
        train[k] = " ".join(cols)
for path, rows in ((train_out, train), (eval_out, evals), (hs_out, hs)):
    with open(path, "w") as f:
        f.write("\n".join(rows[k] for k in sorted(rows)) + "\n")
PY
    i=$((i + 1))
done

# gnuplot strings are single-quoted: a quote in a name is doubled.
gq() { printf "'%s'" "${1//\'/\'\'}"; }
series() { # TABLE COLUMN: one series per run that has rows in TABLE (train, eval or hs)
    local j s="" name
    for j in "${!dirs[@]}"; do
        [ -s "$work/$1_$j.dat" ] && grep -q . "$work/$1_$j.dat" || continue
        name=$(basename "${dirs[$j]%/}")
        s+="${s:+, }\$$1_$j using 1:$2 with linespoints pt 7 ps 0.4 lc $((j + 1)) title $(gq "$name")"
    done
    echo "${s:-1/0 title 'no data'}"
}
rows=2 height=900
if grep -q . "$work"/hs_*.dat; then rows=3 height=1350; fi
term="pngcairo size 1200,$height noenhanced font ',10'"
gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1 || term="png size 1200,$height noenhanced"
gp="$work/plot.gp"
{
    echo "# written by scripts/plot_log.sh $(printf '%q ' "${dirs[@]}")"
    for f in "$work"/train_*.dat "$work"/eval_*.dat "$work"/hs_*.dat; do
        echo "\$$(basename "$f" .dat) << EOD"; cat "$f"; echo "EOD"
    done
    echo "set terminal $term"
    echo "set output $(gq "$out")"
    echo "set datafile missing NaN"
    echo "set grid; set key top right; set xlabel 'step'"
    names=""
    for d in "${dirs[@]}"; do names+="${names:+, }$(basename "${d%/}")"; done
    echo "set multiplot layout $rows,2 title $(gq "training curves: $names")"
    if [ "$smooth" -gt 1 ]; then echo "set title 'train loss (moving average of $smooth steps)'; set ylabel 'loss'"
    else echo "set title 'train loss'; set ylabel 'loss'"; fi
    echo "plot $(series train 2)"
    echo "set title 'validation loss'; set ylabel 'val loss'"
    echo "plot $(series eval 2)"
    echo "set title 'learning rate'; set ylabel 'lr'; set format y '%.1e'"
    echo "plot $(series train 3)"
    echo "set title 'throughput'; set ylabel 'tokens/s'; set format y '%g'; set yrange [0:*]"
    echo "plot $(series train 4)"
    if [ "$rows" = 3 ]; then
        echo "set title 'HellaSwag acc_norm'; set ylabel 'accuracy'; set format y '%.2f'; set yrange [0:1]"
        echo "plot $(series hs 2)"
        echo "set title 'HellaSwag acc'"
        echo "plot $(series hs 3)"
    fi
    echo "unset multiplot"
} >"$gp"
gnuplot "$gp" 2>"$work/gnuplot.err" || die "gnuplot failed: $(head -c 400 "$work/gnuplot.err")"
[ -s "$out" ] || die "$out was not written"
[ -z "$keep_gp" ] || cp "$gp" "$keep_gp" || die "cannot write $keep_gp"
echo "$prog: wrote $out"
