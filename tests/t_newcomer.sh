#!/usr/bin/env bash
# What a newcomer trips on (issue 34, items 1, 2, 3, 8, 9; issue 33's resume
# past train.steps): rerunning a finished run says there is nothing left to
# train, how to go on (with the LR a raised train.steps gives, and the flags that
# keep the LR the run ended at), exits 0 and writes nothing; a resume names the
# optimizer keys changed since its checkpoint; scripts/launch.sh gives
# each rank its share of the cores; --sample prints the prompt first and
# --num-samples N separates and seeds its samples; a mistyped key names the
# nearest one; a shape that does not fit out.dir's checkpoint is refused
# before the budget; out.eval_batches -1 is the whole validation set;
# plot_log.sh --smooth N; MFU on the progress line when the peak is known;
# Hugging Face's GPT-2 layouts and llm.c's file load through model.init_from;
# the README shows a next command that trains and how to start from GPT-2.
# tier: check (make check: the quick tier, tests/run.sh --check)
# cost: 25 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" newcomer
export OMP_NUM_THREADS=1
if ! "$py" -c 'import numpy' 2>/dev/null; then not_ok prerequisites "python3-numpy is missing"; exit 1; fi
if [ ! -f assets/vocab/encoder.json ]; then not_ok prerequisites "assets/vocab is missing (make quickstart)"; exit 1; fi
V=50257 T=16
random_shards "$tmp/data" "$V" 11 3000 600
cfg="$tmp/cfg.json"
cat >"$cfg" <<JSON
{"model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "vocab_size": $V, "seq_len": $T},
 "train": {"micro_batch": 2, "global_batch": 2, "steps": 2, "lr": 3e-3, "min_lr": 3e-4, "warmup": 1},
 "data": {"train": "$tmp/data/train_*.bin", "val": "$tmp/data/val_*.bin", "vocab_dir": "assets/vocab"},
 "out": {"dir": "$tmp/run", "eval_every": 0, "eval_batches": 2, "sample_tokens": 4, "log_every": 1}}
JSON
tg() { timeout -k 5 120 "$bin" --config "$cfg" "$@"; }
short() { tail -n "${2:-3}" "$1" | tr '\n' ' ' | head -c 300; }
val_of() { sed -nE 's/^val loss ([0-9.]+).*/\1/p' "$1"; }

# ---- item 1 / issue 33: a finished run, rerun --------------------------------
tg >"$tmp/train.out" 2>&1 || { not_ok prerequisites "training failed: $(short "$tmp/train.out")"; exit 1; }
if grep -A1 -- '^---- sample at step 2 ----$' "$tmp/train.out" | sed -n 2p | grep -q '^<|endoftext|>'; then
    ok training_sample_prints_its_prompt_first
else not_ok training_sample_prints_its_prompt_first "$(grep -A1 -- '---- sample' "$tmp/train.out" | tr '\n' ' ')"; fi
run_dir_listing "$tmp/run" >"$tmp/before"
tg >"$tmp/again.out" 2>&1
rc=$?
run_dir_listing "$tmp/run" >"$tmp/after"
if [ "$rc" = 0 ] && grep -q '^nothing left to train: .*step_00000002 has done 2 steps, all of train.steps (2)' "$tmp/again.out" &&
    grep -q -- '--set train.steps=4' "$tmp/again.out" && grep -q 'new out.dir' "$tmp/again.out" &&
    ! grep -q -e '---- sample' -e 'already holds' -e '^saved' -e '^step ' "$tmp/again.out" && cmp -s "$tmp/before" "$tmp/after"; then
    ok rerun_of_a_finished_run_trains_nothing_and_says_how_to_go_on
else not_ok rerun_of_a_finished_run_trains_nothing_and_says_how_to_go_on "rc $rc, files $(cmp -s "$tmp/before" "$tmp/after" && echo same || echo changed): $(short "$tmp/again.out" 4)"; fi
# raising train.steps stretches the LR schedule: the hint says to what, and its flags for going on at
# the LR the run ended at do that (a copy of the run, one step more, at that LR)
ended=$(sed -nE 's/.* where step 2 ended at ([0-9.e+-]+); to go on at .*/\1/p' "$tmp/again.out")
read -r -a keep_lr <<<"$(sed -nE 's/.*, add (--set train\.lr_schedule=constant --set [^)]*)\).*/\1/p' "$tmp/again.out")"
cp -a "$tmp/run" "$tmp/run_const"
if [ -n "$ended" ] && grep -q "so step 3 trains at lr [0-9.e+-]* where step 2 ended at" "$tmp/again.out" && [ ${#keep_lr[@]} = 6 ] &&
    tg --set out.dir="$tmp/run_const" --set train.steps=3 "${keep_lr[@]}" >"$tmp/const.out" 2>&1 &&
    "$py" - "$tmp/run_const/log.jsonl" "$ended" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
lr3 = [l["lr"] for l in lines if l.get("step") == 3 and "lr" in l]
want = float(sys.argv[2])
sys.exit(0 if lr3 and abs(lr3[0] - want) <= 5e-3 * want else 1)
PY
then ok "rerun_hint_gives_the_lr_and_how_to_keep_it (step 3 at $ended)"
else not_ok rerun_hint_gives_the_lr_and_how_to_keep_it "ended '$ended', flags '${keep_lr[*]}': $(short "$tmp/const.out" 2)"; fi
tg --set train.steps=1 >"$tmp/past.out" 2>&1
rc=$?
run_dir_listing "$tmp/run" >"$tmp/after_past"
if [ "$rc" = 0 ] && grep -q 'has done 2 steps, past train.steps (1)' "$tmp/past.out" && cmp -s "$tmp/before" "$tmp/after_past"; then
    ok resume_past_train_steps_says_so
else not_ok resume_past_train_steps_says_so "rc $rc: $(short "$tmp/past.out")"; fi
if tg --set train.steps=3 >"$tmp/more.out" 2>&1 && [ -d "$tmp/run/step_00000003" ] && grep -q '^step 3/3' "$tmp/more.out"; then
    ok raised_train_steps_trains_on
else not_ok raised_train_steps_trains_on "$(short "$tmp/more.out")"; fi
# a resume names the optimizer's keys that differ from the checkpoint's run, and only those
if grep -qx 'changed since that checkpoint: train.steps 2 -> 3' "$tmp/more.out" && ! grep -q 'changed since' "$tmp/again.out" &&
    grep -q '^changed since that checkpoint: train.steps 2 -> 3, train.min_lr .*train.lr_schedule "cosine" -> "constant"' "$tmp/const.out"; then
    ok resume_names_the_changed_optimizer_keys
else not_ok resume_names_the_changed_optimizer_keys "$(grep -h 'changed since' "$tmp/more.out" "$tmp/again.out" "$tmp/const.out" | tr '\n' ' ')"; fi

# ---- item 8: a shape that does not fit out.dir's checkpoint, mistyped keys ---
tg --set model.n_layer=1 >"$tmp/shape.out" 2>&1
rc=$?
if [ "$rc" = 1 ] && grep -q "^train_gpt: error: --set model.n_layer: model.n_layer = 1 does not fit .*step_00000003/config.json, whose n_layer is 2: .*new out.dir" "$tmp/shape.out" &&
    ! grep -q -e 'memory per rank' -e '^model:' "$tmp/shape.out"; then
    ok shape_misfit_refused_before_the_budget_with_advice
else not_ok shape_misfit_refused_before_the_budget_with_advice "rc $rc: $(short "$tmp/shape.out")"; fi
tg --plan --set train.warmpu=5 >"$tmp/typo_set.out" 2>&1
rc=$?
sed 's/"warmup": 1/"warmpu": 1/' "$cfg" >"$tmp/typo.json"
timeout 60 "$bin" --plan --config "$tmp/typo.json" >"$tmp/typo_file.out" 2>&1
rc2=$?
tg --plan --set warmup=5 >"$tmp/leaf.out" 2>&1
tg --plan --set no_such.key=5 >"$tmp/far.out" 2>&1
if [ "$rc" = 1 ] && [ "$rc2" = 1 ] &&
    grep -q "^train_gpt: error: --set: unknown key 'train.warmpu': did you mean train.warmup?" "$tmp/typo_set.out" &&
    grep -q "^train_gpt: error: $tmp/typo.json: unknown key 'train.warmpu': did you mean train.warmup?" "$tmp/typo_file.out" &&
    grep -q "unknown key 'warmup': did you mean train.warmup?" "$tmp/leaf.out" &&
    grep -q "unknown key 'no_such.key' (see --help" "$tmp/far.out"; then
    ok unknown_key_names_the_nearest
else not_ok unknown_key_names_the_nearest "$(cat "$tmp/typo_set.out" "$tmp/typo_file.out" "$tmp/leaf.out" "$tmp/far.out" | head -c 500)"; fi

# ---- item 3: --sample prints the prompt, --num-samples -----------------------
prompt="In the beginning God"
smp() { tg --sample --prompt "$prompt" --max-tokens 6 "$@"; }
smp --seed 7 >"$tmp/one.txt" 2>"$tmp/one.err"
if [ -s "$tmp/one.txt" ] && [ "$(head -c ${#prompt} "$tmp/one.txt")" = "$prompt" ] && [ "$(wc -l <"$tmp/one.txt")" = 1 ] &&
    [ "$(wc -c <"$tmp/one.txt")" -gt $((${#prompt} + 1)) ]; then
    ok "sample_prints_the_prompt_then_the_continuation ($(head -c 80 "$tmp/one.txt"))"
else not_ok sample_prints_the_prompt_then_the_continuation "'$(head -c 120 "$tmp/one.txt")' $(short "$tmp/one.err" 2)"; fi
# Streaming: the prompt arrives while the tokens are still being drawn (a
# long sample; without a flush per token, line-buffered stdout holds it all
# until the closing newline; greedy drawing here gives no newline token).
# The FIFO stays open until the check is done.
mkfifo "$tmp/stream"
timeout -k 5 120 "$bin" --config "$cfg" --sample --prompt "$prompt" --max-tokens 400 --temperature 0 >"$tmp/stream" 2>/dev/null &
pid=$!
exec 3<"$tmp/stream"
first="" alive=no
IFS= read -r -N "${#prompt}" -t 60 first <&3 && kill -0 "$pid" 2>/dev/null && alive=yes
kill "$pid" 2>/dev/null
exec 3<&-
wait "$pid" 2>/dev/null
tg --sample --prompt "$prompt" --max-tokens 400 --temperature 0 >"$tmp/greedy.txt" 2>/dev/null
if [ "$first" = "$prompt" ] && [ "$alive" = yes ] && [ "$(wc -l <"$tmp/greedy.txt")" = 1 ]; then ok sample_streams_while_it_draws
else not_ok sample_streams_while_it_draws "first bytes '$first', still drawing: $alive"; fi
smp --seed 7 --num-samples 3 >"$tmp/three.txt" 2>"$tmp/three.err"
body() { awk -v i="$2" '/^---- sample [0-9]+ of [0-9]+ \(--seed [0-9]+\) ----$/ { n++; next } n == i' "$1"; }
seed2=$(sed -nE 's/^---- sample 2 of 3 \(--seed ([0-9]+)\) ----$/\1/p' "$tmp/three.txt")
[ -n "$seed2" ] && smp --seed "$seed2" >"$tmp/alone2.txt" 2>/dev/null
if [ "$(grep -c '^---- sample [123] of 3 (--seed [0-9]*) ----$' "$tmp/three.txt")" = 3 ] &&
    grep -qx -- '---- sample 1 of 3 (--seed 7) ----' "$tmp/three.txt" &&
    [ "$(body "$tmp/three.txt" 1)" = "$(cat "$tmp/one.txt")" ] && [ "$(body "$tmp/three.txt" 2)" != "$(body "$tmp/three.txt" 1)" ] &&
    [ "$(body "$tmp/three.txt" 3)" != "$(body "$tmp/three.txt" 2)" ] && [ -n "$seed2" ] &&
    [ "$(body "$tmp/three.txt" 2)" = "$(cat "$tmp/alone2.txt")" ] && "$bin" --help | grep -q -- '--num-samples N'; then
    ok "num_samples_separated_each_with_its_seed (sample 2: --seed $seed2)"
else not_ok num_samples_separated_each_with_its_seed "$(head -c 400 "$tmp/three.txt") $(short "$tmp/three.err" 2)"; fi

# ---- item 9: out.eval_batches -1, MFU, plot --smooth ------------------------
tg --eval --set out.eval_batches=-1 >"$tmp/eval_all.out" 2>&1
tg --eval --set out.eval_batches=1000 >"$tmp/eval_1000.out" 2>&1
windows=$(( (600 - 1) / (2 * T) ))
a=$(val_of "$tmp/eval_all.out") b=$(val_of "$tmp/eval_1000.out")
if [ -n "$a" ] && [ "$a" = "$b" ] && grep -q "($windows batches of 2 x $T tokens" "$tmp/eval_all.out" &&
    "$bin" --help | grep -q 'out.eval_batches .*-1: the whole validation set'; then
    ok "eval_batches_minus_one_is_the_whole_validation_set ($windows batches, $a)"
else not_ok eval_batches_minus_one_is_the_whole_validation_set "$(short "$tmp/eval_all.out" 2) vs $(short "$tmp/eval_1000.out" 2)"; fi
tg --set out.dir="$tmp/mfu" --set train.steps=1 --set out.sample_tokens=0 --set device_peak_tflops=0.001 >"$tmp/mfu.out" 2>&1
tg --set out.dir="$tmp/nomfu" --set train.steps=1 --set out.sample_tokens=0 >"$tmp/nomfu.out" 2>&1
if grep -q '^step 1/1 | .* | MFU [0-9.]*% | ' "$tmp/mfu.out" && grep -q '^step 1/1 ' "$tmp/nomfu.out" && ! grep -q 'MFU' "$tmp/nomfu.out"; then
    ok progress_line_shows_mfu_when_the_peak_is_known
else not_ok progress_line_shows_mfu_when_the_peak_is_known "$(grep '^step 1' "$tmp/mfu.out" "$tmp/nomfu.out" | tr '\n' ' ')"; fi
mkdir -p "$tmp/plot"
for s in 1 2 3 4 5 6; do echo "{\"step\":$s,\"loss\":$((s * s)),\"lr\":1e-3,\"tok_per_s\":100}"; done >"$tmp/plot/log.jsonl"
echo '{"step":6,"val_loss":3}' >>"$tmp/plot/log.jsonl"
scripts/plot_log.sh --smooth 3 --gp "$tmp/smooth.gp" -o "$tmp/smooth.png" "$tmp/plot" >"$tmp/plot.out" 2>&1
scripts/plot_log.sh --smooth 0 "$tmp/plot" >"$tmp/plot0.out" 2>&1
rc0=$?
# trailing means of 1 4 9 16 25 36 over 3 lines: 1 2.5 4.667 9.667 16.667 25.667
got=$(sed -n '/^\$train_0 << EOD$/,/^EOD$/p' "$tmp/smooth.gp" 2>/dev/null | awk 'NF == 4 { printf "%.3f ", $2 }')
if [ "$got" = "1.000 2.500 4.667 9.667 16.667 25.667 " ] && [ -s "$tmp/smooth.png" ] && grep -q 'moving average of 3 steps' "$tmp/smooth.gp" &&
    [ "$rc0" = 2 ] && grep -q "^plot_log.sh: error: --smooth must be a whole number of steps from 1, got '0'$" "$tmp/plot0.out"; then
    ok plot_smooth_is_a_moving_average
else not_ok plot_smooth_is_a_moving_average "losses '$got', rc $rc0: $(short "$tmp/plot.out" 2) $(short "$tmp/plot0.out" 2)"; fi

# ---- item 9: GPT-2 weights in Hugging Face's layouts and llm.c's file ---------
# OpenAI's weights cannot be fetched here: the checkpoint, rewritten as the
# openai-community/gpt2 file is laid out (no prefix; h.N.attn.bias and
# h.N.attn.masked_bias buffers; wpe longer than seq_len) and as
# GPT2LMHeadModel.save_pretrained writes it ("transformer." names, the tied
# lm_head.weight), must give the checkpoint's own validation loss.
ck="$tmp/run/step_00000003"
if "$py" - "$ck" "$tmp/hf_hub" "$tmp/hf_saved" <<'PY' 2>"$tmp/hf.err"; then
import json, os, struct, sys
import numpy as np
src, hub, saved = sys.argv[1:4]
with open(f"{src}/model.safetensors", "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    head = json.loads(f.read(n))
    data = f.read()
t = {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], np.float32).reshape(v["shape"])
     for k, v in head.items() if k != "__metadata__"}
cfg = json.load(open(f"{src}/config.json"))
L, T = cfg["n_layer"], cfg["n_positions"]
def write(d, tensors, n_positions):
    os.makedirs(d)
    hdr, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for k, a in tensors.items():
        b = np.ascontiguousarray(a, np.float32).tobytes()
        hdr[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b); blobs.append(b)
    h = json.dumps(hdr).encode(); h += b" " * (-len(h) % 8)
    with open(f"{d}/model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(h))); f.write(h); f.write(b"".join(blobs))
    json.dump(dict(cfg, n_positions=n_positions, n_ctx=n_positions), open(f"{d}/config.json", "w"))
rng = np.random.default_rng(0)
hub_t = dict(t, **{"wpe.weight": np.concatenate([t["wpe.weight"], rng.normal(0, 0.02, t["wpe.weight"].shape)])})
for i in range(L):
    hub_t[f"h.{i}.attn.bias"] = np.tril(np.ones((2 * T, 2 * T), np.float32))[None, None]
    hub_t[f"h.{i}.attn.masked_bias"] = np.array(-1e4, np.float32)
write(hub, hub_t, 2 * T)
saved_t = {f"transformer.{k}": a for k, a in t.items()}
saved_t["lm_head.weight"] = t["wte.weight"]
write(saved, saved_t, T)
PY
    tg --eval --set out.dir="$tmp/none" --set model.init_from="$ck" >"$tmp/ev_ck.out" 2>&1
    tg --eval --set out.dir="$tmp/none" --set model.init_from="$tmp/hf_hub" >"$tmp/ev_hub.out" 2>&1
    tg --eval --set out.dir="$tmp/none" --set model.init_from="$tmp/hf_saved" >"$tmp/ev_saved.out" 2>&1
    c=$(val_of "$tmp/ev_ck.out") h=$(val_of "$tmp/ev_hub.out") s=$(val_of "$tmp/ev_saved.out")
    if [ -n "$c" ] && [ "$c" = "$h" ] && [ "$c" = "$s" ]; then ok "hugging_face_gpt2_layouts_load_through_init_from ($c)"
    else not_ok hugging_face_gpt2_layouts_load_through_init_from "checkpoint '$c', hub layout '$h' ($(short "$tmp/ev_hub.out" 1)), save_pretrained '$s' ($(short "$tmp/ev_saved.out" 1))"; fi
else not_ok hugging_face_gpt2_layouts_load_through_init_from "writing the files: $(short "$tmp/hf.err")"; fi
tg --export-llmc "$tmp/gpt2_test.bin" --set model.init_from="$ck" >"$tmp/export.out" 2>&1
tg --eval --set out.dir="$tmp/none" --set model.init_from="$tmp/gpt2_test.bin" >"$tmp/ev_llmc.out" 2>&1
l=$(val_of "$tmp/ev_llmc.out")
if [ -n "$l" ] && [ "$l" = "$(val_of "$tmp/ev_ck.out")" ]; then ok "llmc_gpt2_file_loads_through_init_from ($l)"
else not_ok llmc_gpt2_file_loads_through_init_from "'$l': $(short "$tmp/export.out" 1) $(short "$tmp/ev_llmc.out" 1)"; fi

# ---- item 2: threads per rank under scripts/launch.sh -----------------------
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
want=$((cores / 2)); [ "$want" -ge 1 ] || want=1
env -u OMP_NUM_THREADS scripts/launch.sh -n 2 --log-dir "$tmp/l2" -- bash -c 'echo "threads=${OMP_NUM_THREADS:-unset}"' \
    >"$tmp/l2.out" 2>"$tmp/l2.err"
if grep -qx "threads=$want" "$tmp/l2.out" && grep -qx "threads=$want" "$tmp/l2/rank_1.log" &&
    grep -q "^launch: OMP_NUM_THREADS=$want for each rank ($cores core(s) / 2 rank(s)" "$tmp/l2.err"; then
    ok "launch_gives_each_rank_its_share_of_the_cores ($want of $cores)"
else not_ok launch_gives_each_rank_its_share_of_the_cores "$(cat "$tmp/l2.out" "$tmp/l2/rank_1.log" 2>/dev/null | tr '\n' ' ') $(short "$tmp/l2.err")"; fi
over=$((cores + 1))
OMP_NUM_THREADS=3 scripts/launch.sh -n "$over" --log-dir "$tmp/lo" -- bash -c 'echo "threads=${OMP_NUM_THREADS:-unset}"' \
    >"$tmp/lo.out" 2>"$tmp/lo.err"
if grep -qx "threads=3" "$tmp/lo.out" && grep -q "^launch: warning: $over ranks on $cores core(s)" "$tmp/lo.err"; then
    ok launch_keeps_a_set_thread_count_and_warns_when_ranks_outnumber_cores
else not_ok launch_keeps_a_set_thread_count_and_warns_when_ranks_outnumber_cores "$(cat "$tmp/lo.out" | tr '\n' ' ') $(short "$tmp/lo.err")"; fi
if ! grep -A3 '^quickstart:' Makefile | grep -q 'OMP_NUM_THREADS'; then ok quickstart_leaves_the_threads_to_the_launcher
else not_ok quickstart_leaves_the_threads_to_the_launcher "the Makefile's quickstart still sets OMP_NUM_THREADS"; fi

# ---- the README: a next command that trains, GPT-2's weights -----------------
next=$(awk '/^## Training/ { t = 1 } t && /^```sh$/ { getline; print; exit }' README.md)
if [[ "$next" == "./train_gpt --config configs/tiny.json --set train.steps="* ]] &&
    grep -q '^### Starting from OpenAI.s GPT-2 weights' README.md && grep -q 'model.init_from=gpt2_124M.bin' README.md &&
    grep -q 'model.init_from=gpt2 ' README.md && grep -q 'has not been measured here' README.md; then
    ok readme_shows_a_next_command_that_trains_and_gpt2_weights
else not_ok readme_shows_a_next_command_that_trains_and_gpt2_weights "first Training command: '$next'"; fi
exit "$failed"
