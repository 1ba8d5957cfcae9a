#!/usr/bin/env bash
# Writes DIR/op_rates.md: every DIR/op_times_*.tsv (a sitting's per-op tables)
# with its rate columns re-derived by `train_gpt --op-rates TABLE md` (work
# per step from the trainer's dry step at the table's shape, the measured
# device times, the device's ceilings). The file is derived: run this again
# after the model of work (kernels/op_work.h) or the ceilings
# (kernels/op_rates.c) change; tests/t_op_rates.sh checks it is current.
#   scripts/op_rates_md.sh DIR [OUT]   (OUT: default DIR/op_rates.md)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
dir="${1:?usage: scripts/op_rates_md.sh DIR [OUT]}"
out="${2:-$dir/op_rates.md}"
bin="${TRAIN_GPT:-./train_gpt}"
tables=("$dir"/op_times_*.tsv)
[ -e "${tables[0]}" ] || { echo "op_rates_md: no $dir/op_times_*.tsv" >&2; exit 2; }
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
{
    echo "# Per-op rates (derived)"
    echo
    echo "Derived, not measured here: each table below is one of this folder's op tables (\`op_times_*.tsv\`, the"
    echo "measured device times per step), with the work per step, the rate and the fraction of the card's ceiling"
    echo "that \`train_gpt --op-rates\` derives from it. Written by \`scripts/op_rates_md.sh $dir\`; docs/op_tables.md"
    echo "says what each column means."
    for t in "${tables[@]}"; do
        echo
        echo "## $(basename "$t" .tsv)"
        echo
        "$bin" --op-rates "$t" md
    done
} >"$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "wrote $out"
