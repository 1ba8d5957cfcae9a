#!/usr/bin/env bash
# scripts/bench_gpu.sh without a GPU: its report (scripts/bench_report.py) on
# fixture outputs of each program in their real formats (train_gpt's stdout and
# log.jsonl, bench_torch.py's JSON, llm.c's start-up table and "step N/M | ... |
# X ms |" lines printed with train_gpt2.cu's own format strings) gives exactly
# the expected bench.json rows (medians, min and max from step 4 on; nulls and
# a note where a run is missing or failed); --llmc errors and --help; and
# scripts/build_llmc.sh's argument errors. Seconds, no GPU, no build.
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" bench_gpu
rep=scripts/bench_report.py
fx="$tmp/fx"
mkdir -p "$fx/gpt2_gb16_train_gpt_none"
check() { local name="$1" why="$2"; shift 2; if "$@"; then ok "$name"; else not_ok "$name" "$why"; fi; }

# ---- fixtures -------------------------------------------------------------------------------
# train_gpt: GPT-2 124M, micro-batch 16; step ms 900 120 101 | 100 104 98 102 99 103 97 (timed: median 100,
# min 97, max 104); mfu logged against a 989 TFLOP/s peak; mem_peak_bytes 3 GiB
cat >"$fx/gpt2_gb16_train_gpt_none.out" <<'EOF'
ranks: 1 (tp 1 x dp 1, sp off, zero 0, recompute none, from single); numa: one NUMA node; binding is a no-op
model: 12 layers, 12 heads, width 768, context 1024, vocab 50257 (padded 50304): 124439808 parameters; the rank holds 124475904 (wte padded to 50304 rows)
batch: 16 sequences x 1024 tokens per step = dp 1 x 1 micro-batches of 16 (gradient accumulation 1)
backend: cuda (bf16)
EOF
"$py" - "$fx/gpt2_gb16_train_gpt_none/log.jsonl" <<'PY'
import json, sys
fpt = 6 * 124439808 + 12 * 12 * 768 * 1024
with open(sys.argv[1], "w") as f:
    f.write('{"time":1.0,"step":0,"budget_bytes_per_rank":{"total":3000000000},"allocated_bytes":3000000000,"tp":1,"dp":1}\n')
    for step, ms in enumerate((900, 120, 101, 100, 104, 98, 102, 99, 103, 97), 1):
        tps = 16384 / (ms / 1e3)
        f.write(json.dumps({"time": 1.0 + step, "step": step, "loss": 10.9, "lr": 6e-4, "grad_norm": 1.2, "ms": ms,
                            "comm_ms": 0.0, "step_ms": ms, "projected": False, "tok_per_s": round(tps, 1),
                            "tokens": 16384 * step, "flops_per_token": fpt, "mfu": round(fpt * tps / 989e12, 6),
                            "mem_peak_bytes": 3 * 1024 ** 3}, separators=(",", ":")) + "\n")
    f.write('{"time":12.0,"step":10,"mem_peak_mib_by_rank":[3072.0]}\n')
PY
# bench_torch.py --json: timed 125 127 126 128 124 129 131 (median 127, min 124, max 131), 4 GiB
cat >"$fx/eager.json" <<'EOF'
{"impl": "PyTorch eager", "torch": "2.5.1", "torch_cuda": "12.4", "device_name": "NVIDIA H100 80GB HBM3", "n_layer": 12, "n_head": 12, "n_embd": 768, "vocab_size": 50257, "vocab_padded": 50304, "seq_len": 1024, "micro_batch": 16, "global_batch": 16, "recompute": "none", "n_params": 124439808, "n_params_padded": 124475904, "optimizer": "AdamW fused", "steps": 10, "warmup": 3, "ms": [2000.0, 150.0, 130.0, 125.0, 127.0, 126.0, 128.0, 124.0, 129.0, 131.0], "losses": [10.9, 10.9, 10.9, 10.9, 10.9, 10.9, 10.9, 10.9, 10.9, 10.9], "first_step_s": 2.1, "median_ms": 127.0, "tok_per_s": 129007.87, "flops_per_token": 859885056.0, "peak_tflops": 989.0, "mfu": 0.1122, "mem_peak_bytes": 4294967296, "mem_reserved_bytes": 5368709120}
EOF
# llm.c's train_gpt2cu stdout (its printf formats, train_gpt2.cu): d12, B 16, T 1024, total 16384;
# step ms 5000.12 95.50 90.25 | 88.00 87.50 89.00 86.75 88.25 87.00 90.00 (median 88, min 86.75, max 90); 10 GiB
{
    printf '+-----------------------+----------------------------------------------------+\n'
    printf '| Parameter             | Value                                              |\n'
    printf '| train data pattern    | %-50s |\n' "/tmp/x/train_*.bin"
    printf '| micro batch size B    | %-50d |\n' 16
    printf '| sequence length T     | %-50d |\n' 1024
    printf '| total batch size      | %-50d |\n' 16384
    printf '| precision             | %-50s |\n' BF16
    printf '| weight init method    | %-50s |\n' d12
    printf '| max_sequence_length T | %-50d |\n' 1024
    printf '| vocab_size V          | %-50d |\n' 50257
    printf '| padded_vocab_size Vp  | %-50d |\n' 50304
    printf '| num_layers L          | %-50d |\n' 12
    printf '| num_heads NH          | %-50d |\n' 12
    printf '| channels C            | %-50d |\n' 768
    printf '| num_parameters        | %-50d |\n' 124475904
    printf 'device memory usage: %d MiB / %d MiB\n' 10240 81559
    printf 'val loss %f\n' 10.98
    i=0
    for ms in 5000.12 95.50 90.25 88.00 87.50 89.00 86.75 88.25 87.00 90.00; do
        i=$((i + 1))
        printf 'step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s\n' \
            "$i" 10 10.95 0 1.5 0 0.0003 "$ms" 16.2 186181
    done
    printf 'val loss %f\n' 10.9
    printf 'total average iteration time: %f ms\n' 89.1
} >"$fx/llmc.out"
# results.jsonl as bench_gpu.sh builds it: gpt2 measured three ways, compile timed out, megatron at
# batch 8 failed, megatron at batch 20 never reached
mk="make train_gpt2cu NVCC=/usr/local/cuda/bin/nvcc GPU_COMPUTE_CAPABILITY=90 NO_MULTI_GPU=1 NO_USE_MPI=1"
{
    "$py" "$rep" train-gpt "$fx/gpt2_gb16_train_gpt_none" --key gpt2_124m --gb 16 --recompute none --warmup 3 --command "TG" &&
    "$py" "$rep" torch "$fx/eager.json" --key gpt2_124m --gb 16 --command "PT" &&
    "$py" "$rep" llmc "$fx/llmc.out" --key gpt2_124m --gb 16 --warmup 3 --peak 989 --build "$mk" --command "LC" &&
    "$py" "$rep" error --key gpt2_124m --gb 16 --impl pytorch_compile --recompute none --command "PC" \
        "not measured: not done within 180 s, compilation included" &&
    "$py" "$rep" error --key megatron_1.2b --gb 8 --impl train_gpt --recompute none "not measured: failed (exit 1): out of memory"
} >"$fx/results.jsonl" 2>"$fx/rows.err"
check bench_report_rows "$(cat "$fx/rows.err")" test -s "$fx/results.jsonl" -a ! -s "$fx/rows.err"
echo "cmd" >"$fx/commands.txt"
BENCH_DEVICE="NVIDIA H100 80GB HBM3" BENCH_DRIVER=570.86.15 BENCH_CUDA_TOOLKIT=12.8 BENCH_COMMIT=abc123 \
BENCH_DATE_ISO=2025-01-02T03:04:05Z BENCH_MEM_MIB=81559 BENCH_STEPS=10 BENCH_WARMUP=3 \
    "$py" "$rep" render "$fx/results.jsonl" "$fx/commands.txt" --points gpt2_124m:16,megatron_1.2b:8,megatron_1.2b:20 \
    --md "$fx/bench.md" --json "$fx/bench.json" >"$fx/render.out" 2>&1
check bench_report_render "$(cat "$fx/render.out")" test -s "$fx/bench.json" -a -s "$fx/bench.md"
check bench_json_is_json "$(python3 -m json.tool "$fx/bench.json" 2>&1 | tail -n 1)" \
    eval 'python3 -m json.tool "$fx/bench.json" >/dev/null'

# ---- bench.json: exactly these rows ---------------------------------------------------------
got=$("$py" - "$fx/bench.json" "$mk" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))
mem = "memory: llm.c's cudaMemGetInfo after its allocations (the whole device, CUDA context included)"
reached = "not measured: not reached (the script stopped, or was stopped, before this run)"
def row(model, impl, gb, timing=None, mem_gib=None, command=None, note=None):
    med, lo, hi, tps, mfu = timing or (None,) * 5
    return {"model": model, "impl": impl, "global_batch": gb, "ms_per_step": med, "ms_min": lo, "ms_max": hi,
            "tokens_per_s": tps, "mfu": mfu, "mem_peak_gib": mem_gib, "command": command, "note": note}
want_rows = [
    row("gpt2_124m", "train_gpt", 16, (100.0, 97.0, 104.0, 163840.0, 0.1425), 3.0, "TG"),
    row("gpt2_124m", "pytorch_eager", 16, (127.0, 124.0, 131.0, 129007.9, 0.1122), 4.0, "PT"),
    row("gpt2_124m", "pytorch_compile", 16, command="PC", note="not measured: not done within 180 s, compilation included"),
    row("gpt2_124m", "llm.c", 16, (88.0, 86.75, 90.0, 186181.8, 0.1619), 10.0, "LC", f"built with `{sys.argv[2]}`; {mem}"),
    row("megatron_1.2b", "train_gpt", 8, note="not measured: failed (exit 1): out of memory"),
]
want_rows += [row("megatron_1.2b", impl, 8, note=reached) for impl in ("pytorch_eager", "pytorch_compile")]
no_llmc = got["rows"][7]["note"] or ""
want_rows.append(row("megatron_1.2b", "llm.c", 8, note=no_llmc if no_llmc.startswith("not measured: llm.c has no configuration matching megatron_1.2b") else "(a note that llm.c has no matching configuration)"))
want_rows += [row("megatron_1.2b", impl, 20, note=reached) for impl in ("train_gpt", "pytorch_eager", "pytorch_compile")]
want_rows.append(dict(want_rows[7], global_batch=20))
want = {"device": "NVIDIA H100 80GB HBM3", "driver": "570.86.15", "cuda": "12.8", "commit": "abc123",
        "date": "2025-01-02T03:04:05Z", "rows": want_rows}
if list(got) != list(want):
    print(f"top-level keys {list(got)}, want {list(want)}")
elif got != want:
    diff = [(i, g, w) for i, (g, w) in enumerate(zip(got["rows"], want_rows)) if g != w]
    print(f"{len(got['rows'])} rows (want {len(want_rows)}); " + "; ".join(
        f"row {i}: got {g}, want {w}" for i, g, w in diff[:2]) if diff else f"header {[(k, got[k]) for k in want if k != 'rows']}")
else:
    print("same")
PY
)
check bench_json_exact_rows "$got" test "$got" = same
# the table says the same, and where llm.c has no row
check bench_md_rows "$(grep -c '^| ' "$fx/bench.md") table lines" eval '[ "$(grep -c "^| " "$fx/bench.md")" = 13 ] &&
    grep -q "^| GPT-2 124M | 16 | llm.c train_gpt2cu | 16 | none | 88.0 (86.8-90.0) | 186,182 | 16.2% | 10.00 GiB |" "$fx/bench.md" &&
    grep -q "^| Megatron 1.2B | 20 | llm.c train_gpt2cu | |  | not measured: llm.c has no configuration" "$fx/bench.md" &&
    grep -q "^| GPT-2 124M | 16 | train_gpt bf16 | 16 | none | 100.0 (97.0-104.0) |" "$fx/bench.md"'
check bench_md_same_params "$(grep parameters "$fx/bench.md")" \
    grep -q "parameters train_gpt bf16 124,439,808, PyTorch eager 124,439,808, llm.c train_gpt2cu 124,439,808 (equal)" "$fx/bench.md"
# a row whose program printed no timed step says so instead of inventing one
head -n 20 "$fx/llmc.out" >"$fx/llmc_short.out"
"$py" "$rep" llmc "$fx/llmc_short.out" --key gpt2_124m --gb 16 --warmup 3 >"$fx/short.out" 2>&1; rc=$?
check bench_report_llmc_too_few_steps "rc $rc: $(cat "$fx/short.out")" \
    eval '[ $rc -ne 0 ] && grep -q "no .step N/M" "$fx/short.out"'
# what the CUDA graph saved: the GPT-2 row (median 100, 97-104) against the same run op by op,
# steps 110 114 108 112 109 113 107 after the warm-up (median 110, 107-114)
mkdir -p "$fx/nograph"
cp "$fx/gpt2_gb16_train_gpt_none.out" "$fx/nograph.out"
sed -e 's/"ms":100,/"ms":110,/; s/"ms":104,/"ms":114,/; s/"ms":98,/"ms":108,/; s/"ms":102,/"ms":112,/' \
    -e 's/"ms":99,/"ms":109,/; s/"ms":103,/"ms":113,/; s/"ms":97,/"ms":107,/' \
    "$fx/gpt2_gb16_train_gpt_none/log.jsonl" >"$fx/nograph/log.jsonl"
got=$("$py" "$rep" graph "$fx/results.jsonl" "$fx/nograph" --key gpt2_124m --gb 16 --warmup 3 2>&1)
want="GPT-2 124M at global batch 16: 100.00 ms (97.00-104.00) per step with the step replayed as one CUDA graph, 110.00 ms (107.00-114.00) op by op (train.cuda_graph=false): the graph saved 10.00 ms per step (9.1%)"
check bench_report_graph_saving "got: $got" test "$got" = "$want"
got=$("$py" "$rep" graph "$fx/results.jsonl" "$fx/nograph" --key megatron_1.2b --gb 8 --warmup 3 2>&1); rc=$?
check bench_report_graph_needs_a_measured_row "rc $rc: $got" eval '[ $rc -ne 0 ] && [[ "$got" == *"no measured train_gpt row"* ]]'
# what recomputation costs: the GPT-2 row (recompute none, median 100) against two runs of the
# same shape, 10 ms (the op-by-op log above) and 30 ms slower
mkdir -p "$fx/full"
cp "$fx/gpt2_gb16_train_gpt_none.out" "$fx/full.out"
"$py" - "$fx/gpt2_gb16_train_gpt_none/log.jsonl" "$fx/full/log.jsonl" <<'PY'
import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        if "ms" in r:
            r["ms"] += 30
        out.write(json.dumps(r) + "\n")
PY
got=$("$py" "$rep" recompute "$fx/results.jsonl" "$fx/nograph" "$fx/full" --key gpt2_124m --gb 16 --warmup 3 2>&1)
want="GPT-2 124M at global batch 16: none 100.00 ms (97.00-104.00); selective 110.00 ms (107.00-114.00), +10.0%; full 130.00 ms (127.00-134.00), +30.0% per step"
check bench_report_recompute_cost "got: $got" test "$got" = "$want"
sed 's/"recompute": "none"/"recompute": "full"/' "$fx/results.jsonl" >"$fx/results_full.jsonl"
got=$("$py" "$rep" recompute "$fx/results_full.jsonl" "$fx/nograph" "$fx/full" --key gpt2_124m --gb 16 --warmup 3 2>&1); rc=$?
check bench_report_recompute_needs_none "rc $rc: $got" eval '[ $rc -ne 0 ] && [[ "$got" == *"ran with recompute full, not none: no baseline"* ]]'
got=$("$py" "$rep" peak "$fx/results.jsonl" --key gpt2_124m --gb 16)/$("$py" "$rep" peak "$fx/results.jsonl" --key megatron_1.2b --gb 8)
check bench_report_peak "got $got, want 989.0/0" test "$got" = "989.0/0"

# ---- bench_gpu.sh's arguments (checked before it looks for a GPU) ----------------------------
scripts/bench_gpu.sh --help >"$tmp/help" 2>&1; rc=$?
check bench_gpu_help "rc $rc" eval '[ $rc = 0 ] && grep -q -- "--llmc DIR" "$tmp/help" && grep -q "LLMC_SRC" "$tmp/help" &&
    grep -q "bench.json" "$tmp/help" && grep -q -- "--llmc-limit" "$tmp/help" && grep -q "USE_CUDNN=1" "$tmp/help"'
scripts/bench_gpu.sh --llmc "$tmp/no_such_dir" >"$tmp/e1" 2>&1; rc=$?
check bench_gpu_llmc_missing_dir "rc $rc: $(cat "$tmp/e1")" \
    eval '[ $rc = 2 ] && grep -q -- "--llmc $tmp/no_such_dir: no such directory" "$tmp/e1"'
LLMC_SRC="$tmp/no_such_dir" scripts/bench_gpu.sh >"$tmp/e2" 2>&1; rc=$?
check bench_gpu_llmc_src_missing_dir "rc $rc: $(cat "$tmp/e2")" eval '[ $rc = 2 ] && grep -q "LLMC_SRC $tmp/no_such_dir" "$tmp/e2"'
mkdir -p "$tmp/not_llmc"
scripts/bench_gpu.sh --llmc "$tmp/not_llmc" >"$tmp/e3" 2>&1; rc=$?
check bench_gpu_llmc_not_llmc "rc $rc: $(cat "$tmp/e3")" eval '[ $rc = 2 ] && grep -q "has no train_gpt2.cu" "$tmp/e3"'
scripts/bench_gpu.sh --llmc-limit 0 >"$tmp/e4" 2>&1; rc=$?
check bench_gpu_bad_llmc_limit "rc $rc: $(cat "$tmp/e4")" eval '[ $rc = 2 ] && grep -q -- "--llmc-limit" "$tmp/e4"'
bash scripts/build_llmc.sh "$tmp/no_such_dir" "$tmp/b" >"$tmp/e5" 2>&1; rc=$?
check build_llmc_missing_src "rc $rc: $(cat "$tmp/e5")" eval '[ $rc = 2 ] && grep -q "no such directory" "$tmp/e5"'
mkdir -p "$tmp/llmc_src/llmc" && touch "$tmp/llmc_src/Makefile" "$tmp/llmc_src/train_gpt2.cu"
bash scripts/build_llmc.sh "$tmp/llmc_src" "$tmp/llmc_src/build" >"$tmp/e7" 2>&1; rc=$?
check build_llmc_never_builds_inside_src "rc $rc: $(cat "$tmp/e7")" \
    eval '[ $rc = 2 ] && grep -q "inside SRC" "$tmp/e7" && [ ! -e "$tmp/llmc_src/build" ]'
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    scripts/bench_gpu.sh --quick >"$tmp/e6" 2>&1; rc=$?
    check bench_gpu_refuses_without_gpu "rc $rc: $(cat "$tmp/e6")" eval '[ $rc = 1 ] && grep -q "no GPU" "$tmp/e6"'
fi
exit "$failed"
