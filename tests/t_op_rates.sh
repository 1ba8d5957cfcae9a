#!/usr/bin/env bash
# The per-op table's rate columns (kernels/op_work.h, kernels/op_rates.h,
# docs/op_tables.md). A CPU run's table: ten columns, each rate its work over
# its time, the work of known ops equal to FLOPs and bytes computed here by
# hand at the tiny config, the host CPU an unknown device (a '# ceilings:'
# line saying so, every fraction NA); `--op-rates` on that table gives back
# the live work exactly. On the committed H200 tables: the fractions against
# the H200's ceilings, attention's FLOPs as issue 36 defines them, an
# unknown device name; the committed op_rates.md is what
# scripts/op_rates_md.sh writes today; bad uses of --op-rates, and a short
# row in a table with the rate columns.
# tier: check (make check: the quick tier, tests/run.sh --check)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" op_rates
export OMP_NUM_THREADS=1
h200=results/gpu/2026-11-27_h200

random_shards "$tmp/data" 300 7 3000 600
cat >"$tmp/cfg.json" <<JSON
{"model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "vocab_size": 300, "vocab_multiple": 128, "seq_len": 16},
 "train": {"micro_batch": 2, "global_batch": 4, "steps": 3, "lr": 3e-3, "warmup": 1},
 "data": {"train": "$tmp/data/train_*.bin", "val": ""},
 "out": {"dir": "$tmp/run", "eval_every": 0, "sample_tokens": 0, "save_every": 0, "save_final": false, "resume": false}}
JSON
tsv="$tmp/run/op_times.tsv"
if timeout -k 5 120 "$bin" --config "$tmp/cfg.json" --set out.op_times=true >"$tmp/run.out" 2>&1 && [ -s "$tsv" ]; then
    "$py" - "$tsv" <<'PY' || failed=1
import sys
lines = open(sys.argv[1]).read().splitlines()
head = ["op", "calls_per_step", "device_ms_per_step", "host_ms_per_step", "share",
        "work_per_step", "work_unit", "rate", "rate_unit", "ceiling_fraction"]
hi = next((i for i, l in enumerate(lines) if l.startswith("op\t")), None)
split = [l.split("\t") for l in lines[hi + 1:]] if hi is not None else []
width = {r[0]: len(r) for r in split}
rows = {r[0]: r + ["NA"] * (10 - len(r)) for r in split}  # a short row fails every_row_has_every_column
bad = 0
def check(name, cond, why):
    global bad
    print(f"ok {name}" if cond else f"not ok {name} - {why}")
    bad += not cond

check("rate_columns_in_header", hi is not None and lines[hi].split("\t") == head, lines[hi] if hi is not None else lines[:3])
check("every_row_has_every_column", width and all(n == 10 for n in width.values()),
      [op for op, n in width.items() if n != 10][:4])
# rate = work / device time (TFLOP/s for FLOP, GB/s for bytes); the table rounds the time to
# 1e-4 ms, so only rows of 0.01 ms and up, within that rounding
wrong, checked = [], 0
for op, r in rows.items():
    if r[5] == "NA" or float(r[2]) < 0.01:
        continue
    scale = {"FLOP": ("TFLOP/s", 1e12), "byte": ("GB/s", 1e9)}.get(r[6])
    want = scale and float(r[5]) / (float(r[2]) * 1e-3) / scale[1]
    checked += 1
    if not scale or r[8] != scale[0] or abs(float(r[7]) / want - 1) > 5e-5 / float(r[2]) + 1e-3:
        wrong.append((op, r[5:]))
check(f"rate_is_work_over_time ({checked} rows)", checked >= 10 and not wrong, wrong[:3])
units = {"matmul_forward": "FLOP", "matmul_backward": "FLOP", "lmhead_forward": "FLOP", "attention_forward": "FLOP",
         "attention_backward": "FLOP", "adamw": "byte", "layernorm_forward": "byte", "gelu_forward": "byte",
         "upload": "byte", "loss_finish": "NA", "grad_clip_factor": "NA"}
got = {op: rows.get(op, [None] * 10)[6] for op in units}
check("op_units", got == units, {op: (got[op], u) for op, u in units.items() if got[op] != u})
scalar = [rows[op][5:] for op in ("loss_finish", "grad_clip_factor") if width.get(op) == 10]
check("scalar_ops_all_na", len(scalar) == 2 and all(set(r) == {"NA"} for r in scalar), scalar)

# hand-computed at the tiny config: B 2, T 16, C 32, 2 layers, 2 micro-batches a step, vocab 300
# padded to 384, float32 (4 bytes)
B, T, C, L, M, Vp = 2, 16, 32, 2, 2, 384
N = B * T
per_layer_products = 2 * N * C * (3 * C) + 2 * N * C * C + 2 * N * C * (4 * C) + 2 * N * (4 * C) * C
params = Vp * C + T * C + L * (2 * C + (C * 3 * C + 3 * C) + (C * C + C) + 2 * C + (C * 4 * C + 4 * C) + (4 * C * C + C)) + 2 * C
want = {"matmul_forward": M * L * per_layer_products,
        "attention_forward": M * L * 2 * B * T * T * C,           # issue 36: 2 B T^2 C a layer
        "attention_backward": M * L * 5 * B * T * T * C,          # 2.5 times the forward
        "lmhead_forward": M * 2 * N * C * Vp,
        "layernorm_forward": M * 2 * N * C * 4,                   # only the first block's ln_1: read x, write y
        "adamw": params * (7 * 4 + 4)}                            # read g, p, m, v; write p, m, v (fp32) and the working copy
got = {op: float(rows[op][5]) if op in rows and rows[op][5] != "NA" else None for op in want}
check("known_work_hand_computed (" + ", ".join(f"{op} {w:.0f}" for op, w in want.items()) + ")",
      got == {op: float(w) for op, w in want.items()}, {op: (got[op], w) for op, w in want.items() if got[op] != w})
ceil = [l for l in lines[:hi or 0] if l.startswith("# ceilings: ")]
check("unknown_device_said_and_no_fraction", len(ceil) == 1 and "none: device 'host CPU, float32' is not in the table" in ceil[0]
      and rows and all(r[9] == "NA" for r in rows.values()), ceil)
sys.exit(1 if bad else 0)
PY
    if "$bin" --op-rates "$tsv" >"$tmp/rederived.tsv" 2>"$tmp/rederived.err" &&
        out=$("$py" - "$tsv" "$tmp/rederived.tsv" <<'PY' 2>&1
import sys
def work(p):
    return {r[0]: r[5:7] for r in (l.split("\t") for l in open(p).read().splitlines() if l and not l.startswith("#"))}
live, again = work(sys.argv[1]), work(sys.argv[2])
assert live == again and len(live) > 20, [(k, live.get(k), again.get(k)) for k in live if live.get(k) != again.get(k)][:3]
print(len(live), "rows")
PY
        ); then ok "rederived_work_equals_live ($out)"
    else not_ok rederived_work_equals_live "${out:-} $(head -c 300 "$tmp/rederived.err")"; fi
    grep -q "^ceilings: none: device 'host CPU, float32'" "$tmp/run.out" && grep -q "^op  *calls/step.*rate  *of ceiling" "$tmp/run.out" &&
        ok rates_printed || not_ok rates_printed "$(sed -n '/time per step by op/,+2p' "$tmp/run.out" | tr '\n' ' ')"
else not_ok cpu_run "$(tail -n 3 "$tmp/run.out" | tr '\n' ' ')"; fi

# The committed H200 tables: FLOP ops against 845 TFLOP/s, byte ops against 4148 GB/s (both measured), the
# host link's ops NA; the 124M attention's FLOPs as issue 36 counts them
if "$bin" --op-rates "$h200/op_times_gpt2_124m_gb16.tsv" >"$tmp/h200.tsv" 2>"$tmp/h200.err" &&
    out=$("$py" - "$tmp/h200.tsv" <<'PY' 2>&1
import sys
lines = open(sys.argv[1]).read().splitlines()
rows = {r[0]: r for r in (l.split("\t") for l in lines if l and not l.startswith("#"))}
ceil = [l for l in lines if l.startswith("# ceilings: ")]
assert len(ceil) == 1 and "NVIDIA H200, bf16: products 845 TFLOP/s (measured" in ceil[0] and "4148 GB/s (measured" in ceil[0], ceil
for op, r in rows.items():
    if op == "op": continue
    ceiling = {"FLOP": 845, "byte": 4148}.get(r[6])
    if op in ("upload", "download", "download_floats") or r[7] == "NA": ceiling = None
    want = ceiling and float(r[7]) / ceiling
    assert (r[9] == "NA") if want is None else abs(float(r[9]) - want) <= 1e-4 + 1e-3 * want, (op, r, want)
B, T, C, L = 16, 1024, 768, 12
assert float(rows["attention_forward"][5]) == 2 * B * T * T * C * L, rows["attention_forward"]
assert float(rows["attention_backward"][5]) == 2.5 * 2 * B * T * T * C * L, rows["attention_backward"]
f, b = float(rows["attention_forward"][7]), float(rows["attention_backward"][7])
assert 50 < f < 60 and 85 < b < 95, (f, b)  # issue 36: 57 forward, 89 backward
print(f"attention {f} and {b} TFLOP/s, {len(rows) - 1} ops")
PY
    ); then ok "h200_fractions_of_ceiling ($out)"
else not_ok h200_fractions_of_ceiling "${out:-} $(head -c 300 "$tmp/h200.err")"; fi

# an unknown device name: the fractions go, the rates stay
sed '1s/"device_name":"NVIDIA H200"/"device_name":"NVIDIA X1"/' "$h200/op_times_gpt2_124m_gb16.tsv" >"$tmp/x1.tsv"
if "$bin" --op-rates "$tmp/x1.tsv" >"$tmp/x1.out" 2>&1 && grep -q "^# ceilings: none: device 'NVIDIA X1' is not in the table" "$tmp/x1.out" &&
    [ "$(awk -F'\t' '$1 !~ /^#/ && $1 != "op" && $10 != "NA"' "$tmp/x1.out" | wc -l)" -eq 0 ] &&
    grep -qP '^matmul_forward\t.*\tFLOP\t669.8\tTFLOP/s\tNA$' "$tmp/x1.out"; then ok unknown_device_name_no_fraction
else not_ok unknown_device_name_no_fraction "$(grep -m3 "ceilings\|^matmul_forward" "$tmp/x1.out" | tr '\n' ' ')"; fi

# a control character in the shape line's device name stays off the table's lines
sed '1s/"device_name":"NVIDIA H200"/"device_name":"NVIDIA\\nX1"/' "$h200/op_times_gpt2_124m_gb16.tsv" >"$tmp/nl.tsv"
if "$bin" --op-rates "$tmp/nl.tsv" >"$tmp/nl.out" 2>&1 && grep -q "^# ceilings: none: device 'NVIDIA?X1' is not" "$tmp/nl.out" &&
    [ "$(wc -l <"$tmp/nl.out")" -eq "$(($(wc -l <"$tmp/nl.tsv") + 1))" ]; then ok device_name_control_char_one_line
else not_ok device_name_control_char_one_line "$(head -n 3 "$tmp/nl.out" | cut -c1-120 | tr '\n' ' ')"; fi

# the committed, derived markdown is what the script writes now
if TRAIN_GPT="$bin" bash scripts/op_rates_md.sh "$h200" "$tmp/op_rates.md" >"$tmp/md.out" 2>&1 &&
    cmp -s "$tmp/op_rates.md" "$h200/op_rates.md" && grep -q "^# Per-op rates (derived)" "$h200/op_rates.md"; then
    ok committed_op_rates_md_current
else not_ok committed_op_rates_md_current "$(tail -n 2 "$tmp/md.out" | tr '\n' ' ') $(diff "$tmp/op_rates.md" "$h200/op_rates.md" 2>&1 | head -n 4 | tr '\n' ' ')"; fi

# bad uses: one clear error each
head -n 1 "$h200/op_times_gpt2_124m_gb16.tsv" >"$tmp/no_rows.tsv"
sed -n '2,$p' "$h200/op_times_gpt2_124m_gb16.tsv" >"$tmp/no_shape.tsv"
bad() { # NAME STATUS TEXT ARGS...
    local name="$1" want_rc="$2" want="$3" out rc
    shift 3
    out=$("$bin" --op-rates "$@" 2>&1); rc=$?
    if [ "$rc" -eq "$want_rc" ] && grep -qF -- "$want" <<<"$out"; then ok "op_rates_bad_$name"
    else not_ok "op_rates_bad_$name" "status $rc, want $want_rc and '$want': $(tail -c 300 <<<"$out")"; fi
}
bad format 2 "usage: --op-rates OP_TABLE [tsv|md]" "$h200/op_times_gpt2_124m_gb16.tsv" html
bad missing 1 "$tmp/none.tsv: cannot open the op table" "$tmp/none.tsv"
bad no_shape 1 "$tmp/no_shape.tsv: no shape line" "$tmp/no_shape.tsv"
bad no_rows 1 "$tmp/no_rows.tsv: no header line" "$tmp/no_rows.tsv"
# a table with the rate columns: a row short of one is refused by its line
if [ -s "$tsv" ]; then
    awk -F'\t' -v OFS='\t' 'NR == 5 { NF = 9 } 1' "$tsv" >"$tmp/short.tsv"
    bad short_row 1 "$tmp/short.tsv:5: 9 tab-separated fields, want 10" "$tmp/short.tsv"
else not_ok op_rates_bad_short_row "no table from the CPU run"; fi
exit "$failed"
