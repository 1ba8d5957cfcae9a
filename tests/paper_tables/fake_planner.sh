#!/usr/bin/env bash
# Test stand-in for a train_gpt whose --plan takes --calibrate (the interface
# scripts/paper_tables.sh reads): it runs the real binary (REAL_TRAIN_GPT)
# without --calibrate, then adds to each --plan-json line the fields a
# calibrated planner writes, with planted values the test knows:
#   step_ms = 1000 + 100 tp + micro_batch, layer_forward_ms = 1 + tp/10 + mb
#   (+ 0.5 under SP), layer_backward_ms = 2 x forward, layer_recompute_ms =
#   0 (none), 0.25 (selective), forward (full); and where the run sets
#   model.n_layer=N, comm_ms = 2.5 N and tp_hidden_ms_modeled = 0.5 N.
set -u
real="${REAL_TRAIN_GPT:?}"
if [ "${1:-}" = --help ]; then
    "$real" --help
    echo "  --calibrate FILE   (test stand-in)"
    exit 0
fi
args=() cal="" json="" layers=""
while [ $# -gt 0 ]; do
    case "$1" in
        --calibrate) cal="$2"; shift 2 ;;
        --plan-json) json="$2"; args+=("$1" "$2"); shift 2 ;;
        model.n_layer=*) layers="${1#model.n_layer=}"; args+=("$1"); shift ;;
        *) args+=("$1"); shift ;;
    esac
done
"$real" "${args[@]}" || exit $?
[ -n "$json" ] || exit 0
/usr/bin/python3 - "$json" "$cal" "$layers" <<'PY'
import json, sys
path, cal, layers = sys.argv[1], sys.argv[2], sys.argv[3]
out = []
for line in open(path):
    o = json.loads(line)
    tp, mb, sp, rc = o["tp"], o["micro_batch"], o["sp"], o["recompute"]
    fw = 1 + tp / 10 + mb + (0.5 if sp else 0)
    o.update(time_model="calibrated" if cal else "none", calibration=cal or None,
             step_ms=1000 + 100 * tp + mb, compute_ms=900.0, layer_forward_ms=fw, layer_backward_ms=2 * fw,
             layer_recompute_ms={"none": 0.0, "selective": 0.25, "full": fw}[rc])
    if layers:
        o.update(comm_ms=2.5 * int(layers), tp_hidden_ms_modeled=0.5 * int(layers))
    out.append(json.dumps(o))
open(path, "w").write("\n".join(out) + "\n")
PY
