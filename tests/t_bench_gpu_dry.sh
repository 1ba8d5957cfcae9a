#!/usr/bin/env bash
# scripts/bench_gpu.sh end to end on a machine without a GPU, with stand-ins
# for what needs one: nvidia-smi, train_gpt, PyTorch (a PYTHON that answers
# for scripts/bench_torch.py) and an llm.c source tree whose Makefile makes a
# train_gpt2cu that prints llm.c's lines. It runs in a copy of scripts/ and
# configs/ (no git there), so that results/ and runs/ stay untouched. Checks
# the orchestration: every row of bench.json measured or saying why, the
# points and shapes, llm.c's build (scripts/build_llmc.sh) and flags, the
# commit from the binary, the copy into OUT. Seconds.
# cost: 95 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" bench_gpu_dry
check() { local name="$1" why="$2"; shift 2; if "$@"; then ok "$name"; else not_ok "$name" "$why"; fi; }
repo="$tmp/repo" fake="$tmp/fake"
mkdir -p "$repo/scripts" "$fake/bin" "$fake/cuda/bin" "$fake/cuda/lib64" "$tmp/llmc/llmc"
cp scripts/bench_gpu.sh scripts/bench_report.py scripts/build_llmc.sh scripts/llmc_cuda13_compat.h "$repo/scripts/"
cp -r configs "$repo/"

# nvidia-smi: one H100
cat >"$fake/bin/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
case "$*" in
    -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)" ;;
    *compute_cap*) echo "9.0" ;;
    *name,driver_version,memory.total*) echo "NVIDIA H100 80GB HBM3, 570.86.15, 81559" ;;
    *query-compute-apps*) ;;
    "") echo "| NVIDIA-SMI 570.86.15   Driver Version: 570.86.15   CUDA Version: 12.8 |" ;;
esac
EOF
# train_gpt: --version, --peak-tflops, --plan (every micro-batch fits), and training runs that write
# log.jsonl with step times 100 + step (timed median: 100 + the middle step)
cat >"$fake/train_gpt" <<'EOF'
#!/usr/bin/env python3
import json, os, sys
a = sys.argv[1:]
if a[:1] == ["--version"]:
    sys.exit(print("train_gpt fake123\nbackends: cpu, cuda"))
if a[:1] == ["--peak-tflops"]:
    sys.exit(print(989))
sets = dict(a[i + 1].split("=", 1) for i in range(len(a) - 1) if a[i] == "--set")
cfg = json.load(open(a[a.index("--config") + 1]))
m, t = cfg["model"], cfg["train"]
mb, gb = int(sets.get("train.micro_batch", t["micro_batch"])), int(sets.get("train.global_batch", t["global_batch"]))
if "--plan" in a:
    with open(a[a.index("--plan-json") + 1], "w") as f:
        for rc in ("none", "full"):
            for b in (d for d in range(gb, 0, -1) if gb % d == 0):
                f.write(json.dumps({"tp": 1, "dp": 1, "sp": False, "recompute": rc, "micro_batch": b, "zero": 0,
                                    "bytes": 2**34, "fits": True}) + "\n")
    sys.exit(0)
steps, out, T = int(sets["train.steps"]), sets["out.dir"], int(sets.get("model.seq_len", m["seq_len"]))
L, C, V = m["n_layer"], m["n_embd"], m["vocab_size"]
n = 12 * L * C * C + 13 * L * C + 2 * C + V * C + T * C
print(f"model: {L} layers, {m['n_head']} heads, width {C}, context {T}, vocab {V} (padded {V}): {n} parameters")
print(f"batch: {gb} sequences x {T} tokens per step = dp 1 x {gb // mb} micro-batches of {mb} (gradient accumulation {gb // mb})")
print("backend: cuda (bf16; fake)")
hopper = sets.get("kernels.attention") == "wgmma_ws"
if hopper and os.environ.get("FAKE_HOPPER_HANGS"):
    import time
    time.sleep(600)  # a deadlocked kernel: the option row's clock must end it
if hopper and os.environ.get("FAKE_NOT_HOPPER"):
    print("train_gpt: kernels.attention: wgmma_ws needs a device of compute capability 9.0 (H100, H200)")
    sys.exit(1)
lt = sets.get("kernels.lt_tune", "off")  # time: 5 ms faster, a record written; a path: pinned from it
if lt not in ("off", "time") and (not os.path.isfile(lt) or os.environ.get("FAKE_LT_UNPINNABLE")):
    print(f"train_gpt: error: {lt}: line 2: algorithm 3 is not among the heuristic's 8 for this product")
    sys.exit(1)
graph = sets.get("train.cuda_graph", "true") == "true" and sets.get("out.op_times") != "true"
if graph:
    print("step 2: captured as a CUDA graph; every later step replays it (train.cuda_graph)")
os.makedirs(out, exist_ok=True)
if lt == "time":
    open(f"{out}/lt_algos.tsv", "w").write("# the fake's record\n")
fpt = 6 * n + 12 * L * C * T
with open(f"{out}/log.jsonl", "w") as f:
    for s in range(1, steps + 1):
        # op by op: 10 ms slower; recompute selective 2 ms, full 30 ms slower than none; the Hopper attention 30 ms
        # faster, the mma.sync one 4 ms slower
        ms = 100.0 + s + (0 if graph else 10) + {"none": 0, "selective": 2, "full": 30}[sets.get("train.recompute", "none")]
        ms -= (30 if hopper else 0) + (5 if lt != "off" else 0) - (4 if sets.get("kernels.attention") == "mma" else 0)
        ms -= 3 if sets.get("kernels.dw_overlap") == "true" else 0  # the weight gradients overlapped: 3 ms faster
        tps = gb * T / (ms / 1e3)
        f.write(json.dumps({"step": s, "loss": 10.9, "ms": ms, "tok_per_s": tps, "flops_per_token": fpt,
                            "mfu": round(fpt * tps / 989e12, 6), "mem_peak_bytes": 2**31}) + "\n")
if sets.get("out.op_times") == "true":
    with open(f"{out}/op_times.tsv", "w") as f:
        f.write("op\tcalls_per_step\tdevice_ms_per_step\thost_ms_per_step\tshare\nmatmul_forward\t48.00\t40.0\t0.1\t1.0\n")
EOF
# PYTHON: answers for scripts/bench_torch.py (step times 200 + step; compile 150 + step), else python3
cat >"$fake/python" <<'EOF'
#!/usr/bin/env bash
[ "${1:-}" = scripts/bench_torch.py ] || exec python3 "$@"
shift
exec python3 - "$@" <<'PY'
import json, sys
a = sys.argv[1:]
if "--check" in a:
    sys.exit(print("torch 2.5.1 (CUDA 12.4), NVIDIA H100 80GB HBM3"))
sets = dict(a[i + 1].split("=", 1) for i in range(len(a) - 1) if a[i] == "--set")
cfg = json.load(open(a[a.index("--config") + 1]))
m = cfg["model"]
steps, comp = int(a[a.index("--steps") + 1]), "--compile" in a
mb, gb, T = int(sets["train.micro_batch"]), int(sets["train.global_batch"]), int(sets["model.seq_len"])
L, C, V = m["n_layer"], m["n_embd"], m["vocab_size"]
n = 12 * L * C * C + 13 * L * C + 2 * C + V * C + T * C
json.dump({"impl": "PyTorch compile" if comp else "PyTorch eager", "n_layer": L, "n_head": m["n_head"], "n_embd": C,
           "vocab_size": V, "vocab_padded": V, "seq_len": T, "micro_batch": mb, "global_batch": gb,
           "recompute": sets["train.recompute"], "n_params": n, "optimizer": "AdamW fused", "warmup": 3,
           "ms": [(150.0 if comp else 200.0) + s for s in range(1, steps + 1)], "first_step_s": 1.0,
           "flops_per_token": 6 * n + 12 * L * C * T, "peak_tflops": float(a[a.index("--peak-tflops") + 1]),
           "mem_peak_bytes": 2**32, "mem_reserved_bytes": 2**33}, open(a[a.index("--json") + 1], "w"))
PY
EOF
# an llm.c source tree: its Makefile makes a train_gpt2cu that prints llm.c's table and step lines
# (step times 80 + step), and records its arguments
cat >"$tmp/llmc/Makefile" <<'EOF'
train_gpt2cu:
	cp llmc/fake.sh train_gpt2cu && chmod +x train_gpt2cu && echo "make $(MAKEFLAGS) $(MAKEOVERRIDES)"
EOF
echo "// the real one is llm.c's" >"$tmp/llmc/train_gpt2.cu"
cat >"$tmp/llmc/llmc/fake.sh" <<'EOF'
#!/usr/bin/env bash
echo "$*" >args.txt
while [ $# -gt 1 ]; do case "$1" in -x) steps=$2 ;; esac; shift 2; done
for kv in "micro batch size B:16" "sequence length T:1024" "total batch size:16384" "vocab_size V:50257" \
          "padded_vocab_size Vp:50304" "num_layers L:12" "num_heads NH:12" "channels C:768" "num_parameters:124475904"; do
    printf '| %-21s | %-50s |\n' "${kv%%:*}" "${kv#*:}"
done
printf 'device memory usage: %d MiB / %d MiB\n' 9000 81559
for i in $(seq 1 "$steps"); do
    printf 'step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s\n' \
        "$i" "$steps" 10.9 0 1.5 0 0.0003 "$((80 + i))" 16.0 180000
done
EOF
printf '#!/bin/sh\nexit 0\n' >"$fake/cuda/bin/nvcc"
chmod +x "$fake/bin/nvidia-smi" "$fake/train_gpt" "$fake/python" "$fake/cuda/bin/nvcc"
touch "$fake/cuda/lib64/libcublas.so" "$fake/cuda/lib64/libcublasLt.so"

(cd "$repo" && PATH="$fake/bin:$PATH" TRAIN_GPT="$fake/train_gpt" PYTHON="$fake/python" NVCC="$fake/cuda/bin/nvcc" \
    LLMC_CUDNN=0 OUT="$tmp/out" timeout 120 scripts/bench_gpu.sh --quick --llmc "$tmp/llmc") >"$tmp/bench.out" 2>&1
rc=$?
check bench_dry_exit_0 "rc $rc: $(tail -n 5 "$tmp/bench.out")" test "$rc" = 0
json=$(ls "$repo"/results/gpu_bench_*.json 2>/dev/null | head -n 1)
got=$(python3 - "$json" <<'PY' 2>&1
import json, sys
j = json.load(open(sys.argv[1]))
# --quick: 13 steps, the median of steps 4..13 of base + step = base + 8.5; each implementation its own base
base = {"train_gpt": 100, "pytorch_eager": 200, "pytorch_compile": 150, "llm.c": 80}
bad = []
for r in j["rows"]:
    if r["impl"] == "llm.c" and r["model"] == "megatron_1.2b":
        ok = r["ms_per_step"] is None and "no configuration matching" in r["note"]
    else:
        b = base[r["impl"]]
        ok = (r["ms_per_step"], r["ms_min"], r["ms_max"]) == (b + 8.5, b + 4.0, b + 13.0) and r["mfu"] > 0
    if not ok:
        bad.append(r)
points = [(r["model"], r["global_batch"]) for r in j["rows"][::4]]
if points != [("gpt2_124m", 16), ("megatron_1.2b", 8), ("megatron_1.2b", 20)] or len(j["rows"]) != 12:
    bad.append(f"points {points}, {len(j['rows'])} rows")
if (j["device"], j["driver"], j["cuda"], j["commit"]) != ("NVIDIA H100 80GB HBM3", "570.86.15", "12.4", "fake123"):
    bad.append([j[k] for k in ("device", "driver", "cuda", "commit")])
print("same" if not bad else bad[:2])
PY
)
check bench_dry_json_rows "$got" test "$got" = same
args=$(cat "$repo/runs/llmc_build/args.txt" 2>/dev/null)
check bench_dry_llmc_flags "$args" eval '[[ "$args" == "-i "*"/data/train_*.bin -j "*"/data/train_*.bin -e d12 -b 16 -t 1024 -d 16384 -r 0 -x 13 -v 100000 -m 1 -s 0 -n 0 -h 0" ]]'
md=${json%.json}.md
check bench_dry_llmc_build_recorded "$(grep '^- llm.c' "$md")" \
    eval 'grep "^- llm.c: \`$tmp/llmc\`" "$md" | grep -q "the plain build: \`.NVCC_APPEND_FLAGS=-include .*llmc_cuda13_compat.h. make train_gpt2cu NVCC=$fake/cuda/bin/nvcc GPU_COMPUTE_CAPABILITY=90 NO_MULTI_GPU=1 NO_USE_MPI=1\`"'
check bench_dry_megatron_shapes "$(grep -c 'micro-batch 10' "$md")" \
    eval 'grep -q "20 sequences of 1024 tokens per step, micro-batch 10 (train_gpt bf16, PyTorch eager, PyTorch compile)" "$md" &&
          grep -q "8 sequences of 1024 tokens per step, micro-batch 8 (train_gpt bf16, PyTorch eager, PyTorch compile)" "$md"'
check bench_dry_copied_to_out "$(ls "$tmp/out" 2>&1 | tr '\n' ' ')" \
    eval '[ -s "$tmp/out/$(basename "$json")" ] && [ -s "$tmp/out/$(basename "$md")" ] && ls -d "$tmp"/out/gpu_bench_*/ >/dev/null'
check bench_dry_cuda_graph_saving "$(grep "^- CUDA graph" "$md")" \
    grep -q "^- CUDA graph: GPT-2 124M at global batch 16: .* per step with the step replayed as one CUDA graph, .* op by op (train.cuda_graph=false): the graph saved 10.00 ms per step" "$md"
check bench_dry_recompute_cost "$(grep "^- What recomputation costs" "$md")" \
    grep -q "^- What recomputation costs (train_gpt, ms/step, against none): Megatron 1.2B at global batch 8: none 108.50 ms (104.00-113.00); selective 110.50 ms (106.00-115.00), +1.8%; full 138.50 ms (134.00-143.00), +27.6% per step$" "$md"
check bench_dry_op_times_brought_back "$(ls "$tmp"/out/gpu_bench_*/ 2>&1 | tr '\n' ' ')" \
    eval 'ls "$tmp"/out/gpu_bench_*/gpt2_124m_gb16_train_gpt_none.op_times.tsv >/dev/null 2>&1 &&
          grep -q "^matmul_forward" "$tmp"/out/gpu_bench_*/megatron_1.2b_gb8_train_gpt_*.op_times.tsv'
check bench_dry_source_untouched "$(ls "$tmp/llmc" | tr '\n' ' ')" test "$(ls "$tmp/llmc" | tr '\n' ' ')" = "Makefile llmc train_gpt2.cu "
# a second run keeps llm.c's build (the same source and command); with --hopper, train_gpt with
# kernels.attention=wgmma_ws is a row of its own (the fake's steps 30 ms faster), with its op table;
# with --lt-tune, so is train_gpt with kernels.lt_tune=time (5 ms faster), its op table's run
# pinning the record the timed run wrote
sleep 1 # a raw folder of its own (runs/gpu_bench_<second>)
(cd "$repo" && PATH="$fake/bin:$PATH" TRAIN_GPT="$fake/train_gpt" PYTHON="$fake/python" NVCC="$fake/cuda/bin/nvcc" \
    LLMC_CUDNN=0 OUT="$tmp/out2" timeout 120 scripts/bench_gpu.sh --quick --models gpt2_124m --no-compile --hopper \
    --lt-tune --llmc "$tmp/llmc") >"$tmp/bench2.out" 2>&1
rc=$?
check bench_dry_keeps_llmc_build "rc $rc: $(grep -h 'build' "$repo"/runs/gpu_bench_*/llmc_build.out | tr '\n' ' ')" \
    eval '[ $rc = 0 ] && grep -q "kept the plain build" "$(ls -td "$repo"/runs/gpu_bench_*/ | head -n 1)/llmc_build.out"'
# hopper_rows JSON [NOTE]: "same" when the rows are train_gpt, train_gpt_hopper (measured, or not with
# NOTE), train_gpt_lt (measured), eager, compile (--no-compile), llm.c
hopper_rows() {
    python3 - "$1" "${2:-}" <<'PY' 2>&1
import json, sys
j, note = json.load(open(sys.argv[1])), sys.argv[2]
impls = [r["impl"] for r in j["rows"]]
h = next((r for r in j["rows"] if r["impl"] == "train_gpt_hopper"), None)
lt = next((r for r in j["rows"] if r["impl"] == "train_gpt_lt"), None)
bad = [] if impls == ["train_gpt", "train_gpt_hopper", "train_gpt_lt", "pytorch_eager", "pytorch_compile", "llm.c"] else [impls]
if not lt or (lt["ms_per_step"], lt["ms_min"], lt["ms_max"]) != (103.5, 99.0, 108.0) or "kernels.lt_tune=time" not in lt["command"]:
    bad.append(lt)
if h and note:
    bad += [] if h["ms_per_step"] is None and note in (h["note"] or "") else [h]
elif h:
    good = (h["ms_per_step"], h["ms_min"], h["ms_max"]) == (78.5, 74.0, 83.0) and "kernels.attention=wgmma_ws" in h["command"]
    bad += [] if good else [h]
print("same" if not bad else bad[:2])
PY
}
json2=$(ls "$tmp"/out2/gpu_bench_*.json 2>/dev/null | head -n 1)
got=$(hopper_rows "$json2")
check bench_dry_hopper_row "$got" test "$got" = same
check bench_dry_hopper_ratio_and_op_times "$(grep "Hopper attention's step" "${json2%.json}.md")" \
    eval 'grep -q "train_gpt with the Hopper attention.s step takes 0.38x the time of PyTorch eager.s" "${json2%.json}.md" &&
          grep -q "^matmul_forward" "$tmp"/out2/gpu_bench_*/gpt2_124m_gb16_train_gpt_hopper_none.op_times.tsv'
lt_dir=$(ls -d "$tmp"/out2/gpu_bench_*/ | head -n 1)gpt2_124m_gb16_train_gpt_lt_none
check bench_dry_lt_ratio_and_pinned_op_times "$(grep -c "kernels.lt_tune=" "$tmp"/out2/gpu_bench_*/commands.txt) commands" \
    eval 'grep -q "train_gpt.s step takes 1.05x the time of train_gpt bf16, cuBLASLt tuned (kernels.lt_tune=time).s" "${json2%.json}.md" &&
          grep -q "^matmul_forward" "$lt_dir.op_times.tsv" && [ -s "$lt_dir/lt_algos.tsv" ] &&
          grep -q "kernels.lt_tune=[^ ]*/gpt2_124m_gb16_train_gpt_lt_none/lt_algos.tsv .*out.op_times=true" "$tmp"/out2/gpu_bench_*/commands.txt'
# on a device that is not compute capability 9.0 train_gpt refuses the Hopper attention: its row says
# why, and the exit status stays 0; a record that does not pin leaves the tuned row without its op
# table, and says why; --no-eager: PyTorch eager's row says so, nothing run
sleep 1
(cd "$repo" && PATH="$fake/bin:$PATH" TRAIN_GPT="$fake/train_gpt" PYTHON="$fake/python" FAKE_NOT_HOPPER=1 FAKE_LT_UNPINNABLE=1 \
    BENCH_COMMIT=feedc0de OUT="$tmp/out3" timeout 120 scripts/bench_gpu.sh --quick --models gpt2_124m --no-compile --no-eager --hopper --lt-tune) >"$tmp/bench3.out" 2>&1
rc=$?
got=$(hopper_rows "$(ls "$tmp"/out3/gpu_bench_*.json 2>/dev/null | head -n 1)" "needs a device of compute capability 9.0")
check bench_dry_hopper_refused_not_counted "rc $rc: $got" eval '[ $rc = 0 ] && [ "$got" = same ]'
check bench_dry_lt_record_not_pinned_said "$(grep "per-op times" "$tmp/bench3.out" | tr '\n' ' ')" \
    eval '! ls "$tmp"/out3/gpu_bench_*/gpt2_124m_gb16_train_gpt_lt_none.op_times.tsv >/dev/null 2>&1 &&
          grep -q "per-op times not measured: .*algorithm 3 is not among" "$tmp/bench3.out"'
check bench_dry_report_names_bench_commit "$(grep -h "train_gpt commit" "$tmp"/out3/gpu_bench_*.md | head -n 1)" \
    eval 'grep -q "; train_gpt commit feedc0de$" "$tmp"/out3/gpu_bench_*.md && grep -q "\"commit\": \"feedc0de\"" "$tmp"/out3/gpu_bench_*.json'
check bench_dry_no_eager "$(grep "PyTorch eager" "$tmp"/out3/gpu_bench_*.md | head -n 2 | tr '\n' ' ')" \
    eval 'grep -q "| GPT-2 124M | 16 | PyTorch eager | | none | not measured (--no-eager) |" "$tmp"/out3/gpu_bench_*.md &&
          ! grep -q "bench_torch.py" "$tmp"/out3/gpu_bench_*/commands.txt'
# a Hopper run that hangs is stopped on option_limit's clock (three times the plain run's seconds
# plus BENCH_OPTION_SLACK_S), not run_limit's 420 s: its row says so, the mma.sync (--mma) and tuned
# rows after it are measured
sleep 1
t0=$SECONDS
(cd "$repo" && PATH="$fake/bin:$PATH" TRAIN_GPT="$fake/train_gpt" PYTHON="$fake/python" FAKE_HOPPER_HANGS=1 BENCH_OPTION_SLACK_S=3 \
    OUT="$tmp/out4" timeout 120 scripts/bench_gpu.sh --quick --models gpt2_124m --no-compile --no-eager --hopper --mma --dw-overlap \
    --lt-tune) >"$tmp/bench4.out" 2>&1
rc=$? took=$((SECONDS - t0))
got=$("$py" - "$(ls "$tmp"/out4/gpu_bench_*.json 2>/dev/null | head -n 1)" <<'PY'
import json, sys
rows = {r["impl"]: r for r in json.load(open(sys.argv[1]))["rows"]}
h, lt = rows.get("train_gpt_hopper", {}), rows.get("train_gpt_lt", {})
ok = "stopped after" in h.get("note", "") and "a hang?" in h.get("note", "") and lt.get("ms_per_step") is not None
print("same" if ok else f"hopper {h.get('note')!r}, lt {lt.get('ms_per_step')!r}")
PY
)
check bench_dry_hung_hopper_row_stopped_early "rc $rc in ${took}s: $got" eval '[ $rc = 0 ] && [ $took -lt 60 ] && [ "$got" = same ]'
# --mma: train_gpt with kernels.attention=mma as a row of its own, after the Hopper one, with its op table,
# and the default's step against it; --dw-overlap likewise with kernels.dw_overlap=true, after it
json4=$(ls "$tmp"/out4/gpu_bench_*.json 2>/dev/null | head -n 1)
got=$("$py" - "$json4" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
impls, m = [r["impl"] for r in rows], next((r for r in rows if r["impl"] == "train_gpt_mma"), {})
d = next((r for r in rows if r["impl"] == "train_gpt_dwo"), {})
ok = impls[:5] == ["train_gpt", "train_gpt_hopper", "train_gpt_mma", "train_gpt_dwo", "train_gpt_lt"] and \
    (m.get("ms_per_step"), m.get("ms_min"), m.get("ms_max")) == (112.5, 108.0, 117.0) and "kernels.attention=mma" in m.get("command", "") and \
    (d.get("ms_per_step"), d.get("ms_min"), d.get("ms_max")) == (105.5, 101.0, 110.0) and "kernels.dw_overlap=true" in d.get("command", "")
print("same" if ok else f"{impls} {m} {d}")
PY
)
check bench_dry_mma_and_dwo_rows "$got" eval '[ "$got" = same ] && grep -q "^matmul_forward" "$tmp"/out4/gpu_bench_*/gpt2_124m_gb16_train_gpt_mma_none.op_times.tsv &&
    grep -q "train_gpt.s step takes 0.96x the time of train_gpt bf16, mma.sync attention (kernels.attention=mma).s" "${json4%.json}.md" &&
    grep -q "^matmul_forward" "$tmp"/out4/gpu_bench_*/gpt2_124m_gb16_train_gpt_dwo_none.op_times.tsv &&
    grep -q "train_gpt.s step takes 1.03x the time of train_gpt bf16, weight gradients overlapped (kernels.dw_overlap=true).s" "${json4%.json}.md"'
exit "$failed"
