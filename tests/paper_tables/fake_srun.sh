#!/usr/bin/env bash
# Test stand-in for srun: appends its arguments (one line, tab-separated) to
# FAKE_SRUN_LOG and writes the log.jsonl a real job step's train_gpt would
# into the run's out.dir, with planted figures the test knows: step_ms =
# 500 + 10 tp, comm_ms = 5 tp.
set -u
printf '%s\t' "$@" >>"${FAKE_SRUN_LOG:?}"
echo >>"$FAKE_SRUN_LOG"
dir="" tp="" dp=""
for a in "$@"; do
    case "$a" in
        out.dir=*) dir="${a#out.dir=}" ;;
        parallel.tp=*) tp="${a#parallel.tp=}" ;;
        parallel.dp=*) dp="${a#parallel.dp=}" ;;
    esac
done
[ -n "$dir" ] && [ -n "$tp" ] && [ -n "$dp" ] || { echo "fake srun: no out.dir, tp or dp" >&2; exit 2; }
mkdir -p "$dir"
{
    echo "{\"budget_bytes_per_rank\":{\"total\":1073741824},\"tp\":$tp,\"dp\":$dp}"
    for s in 1 2 3; do
        echo "{\"step\":$s,\"loss\":5,\"ms\":$((500 + 10 * tp)),\"step_ms\":$((500 + 10 * tp)),\"comm_ms\":$((5 * tp)),\"tp_all_reduce_bytes\":1000,\"dp_all_reduce_bytes\":1000}"
    done
    echo '{"mem_peak_mib_by_rank":[1024]}'
} >"$dir/log.jsonl"
