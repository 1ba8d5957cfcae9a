#!/usr/bin/env bash
# Model files: llm.c's gpt2_*.bin read by model.init_from (version 3 float32,
# version 5 bf16) and written by --export-llmc (version 3), checked against a
# numpy writer of llm.c's layout (its train_gpt2.py write_model: header of
# 256 int32, wte padded to a multiple of 128 with zero rows, linear weights
# [out, in]); the round trip ours -> llm.c -> ours bitwise; the model shape
# taken from the checkpoint when the config leaves it out; a model.init_from
# of no known format named as such; the tokenizer files of a checkpoint.
# transformers is not installed here: the tokenizer files are checked for
# presence and content; AutoTokenizer runs only where transformers exists.
# tier: check (make check: the quick tier, tests/run.sh --check)
# cost: 15 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" model_files
if [ ! -x "$bin" ]; then not_ok prerequisites "$bin is missing (run make)"; exit 1; fi
random_shards "$tmp/d" 500 7 3000 600
shape='"n_layer": 2, "n_head": 2, "n_embd": 32, "vocab_size": 500, "seq_len": 16'
common='"train": {"micro_batch": 2, "global_batch": 2, "steps": 0, "warmup": 1},
 "data": {"train": "'$tmp'/d/train_*.bin", "val": "", "vocab_dir": "assets/vocab"},
 "out": {"eval_batches": 0, "sample_tokens": 0}'
echo "{\"model\": {$shape}, $common}" >"$tmp/shaped.json"
echo "{$common}" >"$tmp/shapeless.json" # every shape key left out
tg() { timeout -k 5 120 "$bin" "$@"; }
A="$tmp/a/step_00000000"
tg --config "$tmp/shaped.json" --set out.dir="$tmp/a" >"$tmp/a.out" 2>&1 || { not_ok prerequisites "$(tail -3 "$tmp/a.out")"; exit 1; }

cat >"$tmp/llmc.py" <<'EOF'
"""llm.c's model file, written and read independently of train_gpt."""
import json, struct, sys
import numpy as np

ORDER = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
         "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
         "mlp.c_proj.weight", "mlp.c_proj.bias"]

def st_read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__": continue
        s, e = v["data_offsets"]
        out[k] = np.frombuffer(b[8 + n + s:8 + n + e], "<f4").reshape(v["shape"])
    return out

def tensors(t, L, Vp, maxT, pad_value, extra_wpe):
    """The parameters in llm.c's order and layouts, from HF-named tensors."""
    V, C = t["wte.weight"].shape
    wte = np.full((Vp, C), pad_value, np.float32); wte[:V] = t["wte.weight"]
    wpe = np.concatenate([t["wpe.weight"], extra_wpe]) if extra_wpe is not None else t["wpe.weight"]
    out = [wte, wpe[:maxT]]
    for name in ORDER:
        for l in range(L):
            x = t[f"h.{l}.{name}"]
            out.append(x.T if x.ndim == 2 else x)  # Conv1D [in, out] -> llm.c [out, in]
    return out + [t["ln_f.weight"], t["ln_f.bias"]]

def bf16(x):  # round to nearest even, as torch's .to(torch.bfloat16)
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)

def write(path, t, version, L, NH, Vp, maxT, pad_value=0.0, extra_wpe=None):
    V, C = t["wte.weight"].shape
    h = np.zeros(256, "<i4"); h[:8] = [20240326, version, maxT, V, L, NH, C, Vp]
    with open(path, "wb") as f:
        f.write(h.tobytes())
        for x in tensors(t, L, Vp, maxT, pad_value, extra_wpe):
            f.write(np.ascontiguousarray(x, "<f4").tobytes() if version == 3 else bf16(x).tobytes())

def expect_bf16(t):  # what a version 5 file of t holds, widened back to float32
    return {k: (bf16(v).astype(np.uint32) << 16).view(np.float32).reshape(v.shape) for k, v in t.items()}

if __name__ == "__main__":
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "write3":  # write3 SAFETENSORS OUT: llm.c's export of a 2 x 2 x 32 model, vocab 500 -> 512
        write(a[1], st_read(a[0]), 3, 2, 2, 512, 16)
    elif cmd == "write5":  # write5 SAFETENSORS OUT: bf16; padding rows hold 7 (ignored by readers)
        write(a[1], st_read(a[0]), 5, 2, 2, 512, 16, pad_value=7.0)
    elif cmd == "same_bf16":  # same_bf16 SAFETENSORS_SRC SAFETENSORS_LOADED
        want, got = expect_bf16(st_read(a[0])), st_read(a[1])
        bad = [k for k in want if not np.array_equal(want[k], got[k])]
        sys.exit("differ: " + ", ".join(bad[:5]) if bad else 0)
    elif cmd == "wpe_prefix":  # wpe_prefix LONG SHORT: SHORT's wpe is LONG's first rows, all else equal
        lo, sh = st_read(a[0]), st_read(a[1])
        ok = np.array_equal(sh["wpe.weight"], lo["wpe.weight"][:len(sh["wpe.weight"])])
        ok = ok and all(np.array_equal(lo[k], sh[k]) for k in lo if k != "wpe.weight")
        sys.exit(0 if ok else "wpe is not the prefix")
    elif cmd == "patch":  # patch FILE OFFSET_INT32 VALUE: one int32 of the header
        b = bytearray(open(a[0], "rb").read()); b[4 * int(a[1]):4 * int(a[1]) + 4] = struct.pack("<i", int(a[2]))
        open(a[0], "wb").write(b)
    elif cmd == "nan":  # nan FILE: the first lnfb element (the file's last tensor) becomes NaN
        b = bytearray(open(a[0], "rb").read()); b[-4 * 32:-4 * 31] = struct.pack("<f", float("nan"))
        open(a[0], "wb").write(b)
EOF
llmc() { "$py" "$tmp/llmc.py" "$@"; }
# expect_fail NAME PATTERN... -- CMD: non-zero exit, every pattern on stderr
expect_fail() {
    local name="$1"; shift
    local pats=()
    while [ "$1" != "--" ]; do pats+=("$1"); shift; done
    shift
    "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    local rc=$?
    [ "$rc" -ne 0 ] || { not_ok "$name" "exit 0"; return; }
    for p in "${pats[@]}"; do
        grep -qE -- "$p" "$tmp/$name.err" || { not_ok "$name" "no /$p/ in: $(head -c 300 "$tmp/$name.err")"; return; }
    done
    ok "$name"
}

# ---- --export-llmc: llm.c's layout, byte for byte ---------------------------
if tg --config "$tmp/shaped.json" --export-llmc "$tmp/ours.bin" --set model.init_from="$A" >"$tmp/export.out" 2>&1 &&
    llmc write3 "$A/model.safetensors" "$tmp/want.bin" && cmp -s "$tmp/ours.bin" "$tmp/want.bin"; then
    ok export_llmc_layout
else
    not_ok export_llmc_layout "$(tail -2 "$tmp/export.out") $(cmp "$tmp/ours.bin" "$tmp/want.bin" 2>&1)"
fi
# the header: magic, version 3, maxT, V, L, NH, C, Vp
hdr=$(od -An -t d4 -N 32 "$tmp/ours.bin" 2>/dev/null | tr -s ' ' | sed 's/^ //' | tr '\n' ' ')
[ "$hdr" = "20240326 3 16 500 2 2 32 512 " ] && ok export_llmc_header || not_ok export_llmc_header "header: $hdr"

# Under the launcher (a TP=2 config is refused as one process in training, so users start the export
# the same way), every rank runs it: rank 0 writes the file, rank 1 says so, the job exits 0 (each rank
# wrote it, and the second failed on the file the first had put in place).
timeout -k 5 120 scripts/launch.sh -n 2 --log-dir "$tmp/export_launch" -- "$bin" --config "$tmp/shaped.json" \
    --export-llmc "$tmp/launched.bin" --set model.init_from="$A" --set parallel.tp=2 >"$tmp/export_launch.out" 2>&1
rc=$?
if [ $rc = 0 ] && cmp -s "$tmp/launched.bin" "$tmp/ours.bin" &&
    grep -q "^--export-llmc: rank 1 of 2 leaves the file to rank 0$" "$tmp/export_launch/rank_1.log" &&
    [ "$(cat "$tmp/export_launch.out" "$tmp/export_launch/rank_1.log" | grep -c '^wrote ')" = 1 ]; then
    ok export_llmc_under_the_launcher_rank_0_writes
else not_ok export_llmc_under_the_launcher_rank_0_writes "rc $rc: $(tail -n 3 "$tmp/export_launch.out" | tr '\n' ' ')"; fi

# ---- round trip: ours -> llm.c -> ours, shape from the llm.c header ---------
if tg --config "$tmp/shapeless.json" --set model.init_from="$tmp/ours.bin" --set out.dir="$tmp/b" >"$tmp/b.out" 2>&1 &&
    cmp -s "$A/model.safetensors" "$tmp/b/step_00000000/model.safetensors"; then
    ok round_trip_llmc_bitwise
else
    not_ok round_trip_llmc_bitwise "$(tail -2 "$tmp/b.out")"
fi
grep -q 'model: 2 layers, 2 heads, width 32, context 16, vocab 500' "$tmp/b.out" && ok shape_from_llmc_header ||
    not_ok shape_from_llmc_header "$(grep '^model:' "$tmp/b.out")"

# ---- version 5 (bf16) ----------------------------------------------------
llmc write5 "$A/model.safetensors" "$tmp/bf16.bin"
if tg --config "$tmp/shapeless.json" --set model.init_from="$tmp/bf16.bin" --set out.dir="$tmp/c" >"$tmp/c.out" 2>&1 &&
    llmc same_bf16 "$A/model.safetensors" "$tmp/c/step_00000000/model.safetensors" >"$tmp/c.cmp" 2>&1; then
    ok read_llmc_bf16
else
    not_ok read_llmc_bf16 "$(tail -2 "$tmp/c.out") $(cat "$tmp/c.cmp" 2>/dev/null)"
fi

# ---- a longer max_seq_len: wpe's first rows (as with a Hugging Face wpe) ---
if tg --config "$tmp/shapeless.json" --set model.init_from="$tmp/ours.bin" --set model.seq_len=8 --set out.dir="$tmp/e" \
    >"$tmp/e.out" 2>&1 && llmc wpe_prefix "$A/model.safetensors" "$tmp/e/step_00000000/model.safetensors"; then
    ok llmc_longer_context
else
    not_ok llmc_longer_context "$(tail -2 "$tmp/e.out")"
fi

# ---- the shape from a checkpoint directory's config.json ---------------------
if tg --config "$tmp/shapeless.json" --set model.init_from="$A" --set out.dir="$tmp/f" >"$tmp/f.out" 2>&1 &&
    cmp -s "$A/model.safetensors" "$tmp/f/step_00000000/model.safetensors"; then
    ok shape_from_config_json
else
    not_ok shape_from_config_json "$(tail -2 "$tmp/f.out")"
fi
# a shape key given in the config still rules: a mismatch is refused
expect_fail given_shape_key_checked 'n_embd' -- tg --config "$tmp/shapeless.json" --set model.init_from="$tmp/ours.bin" \
    --set model.n_embd=48 --set out.dir="$tmp/g"
# without init_from, the defaults (GPT-2 small) of --help
tg --config "$tmp/shapeless.json" --plan --devices 1 >"$tmp/plan.out" 2>&1
grep -q 'plan: 12 layers x 768 wide, 12 heads, context 1024' "$tmp/plan.out" && ok shape_defaults_without_checkpoint ||
    not_ok shape_defaults_without_checkpoint "$(head -3 "$tmp/plan.out")"

# ---- a model.init_from of no known format ------------------------------------
echo '{}' >"$tmp/not_a_model.json"
mkdir -p "$tmp/empty_dir"
fmts='model\.safetensors.*llm\.c'
expect_fail init_from_unknown_file "$tmp/not_a_model.json" "$fmts" -- tg --config "$tmp/shaped.json" --set model.init_from="$tmp/not_a_model.json" --set out.dir="$tmp/x"
expect_fail init_from_empty_dir "$tmp/empty_dir" "$fmts" -- tg --config "$tmp/shaped.json" --set model.init_from="$tmp/empty_dir" --set out.dir="$tmp/x"
expect_fail init_from_missing_path "$tmp/nowhere" "$fmts" -- tg --config "$tmp/shaped.json" --set model.init_from="$tmp/nowhere" --set out.dir="$tmp/x"

# ---- damaged llm.c files: the file and the field named -----------------------
cp "$tmp/ours.bin" "$tmp/v4.bin" && llmc patch "$tmp/v4.bin" 1 4
expect_fail llmc_bad_version 'v4\.bin' 'version' -- tg --config "$tmp/shapeless.json" --set model.init_from="$tmp/v4.bin" --set out.dir="$tmp/x"
head -c 100000 "$tmp/ours.bin" >"$tmp/short.bin"
expect_fail llmc_truncated 'short\.bin' 'bytes' -- tg --config "$tmp/shapeless.json" --set model.init_from="$tmp/short.bin" --set out.dir="$tmp/x"
cp "$tmp/ours.bin" "$tmp/vp.bin" && llmc patch "$tmp/vp.bin" 7 400
expect_fail llmc_padded_below_vocab 'vp\.bin' 'padded_vocab_size' -- tg --config "$tmp/shapeless.json" --set model.init_from="$tmp/vp.bin" --set out.dir="$tmp/x"
expect_fail llmc_other_shape 'ours\.bin' 'num_layers' -- tg --config "$tmp/shaped.json" --set model.init_from="$tmp/ours.bin" --set model.n_layer=3 --set out.dir="$tmp/x"
cp "$tmp/ours.bin" "$tmp/nan.bin" && llmc nan "$tmp/nan.bin"
expect_fail llmc_nan_weight 'nan\.bin' 'lnfb' 'finite' -- tg --config "$tmp/shapeless.json" --set model.init_from="$tmp/nan.bin" --set out.dir="$tmp/x"
ls -d "$tmp/x"/step_* >/dev/null 2>&1 && not_ok bad_init_from_wrote_nothing "$(ls "$tmp/x")" || ok bad_init_from_wrote_nothing
# --export-llmc never replaces a file
echo keep >"$tmp/existing.bin"
expect_fail export_llmc_keeps_existing_file 'existing\.bin' 'exists' -- tg --config "$tmp/shaped.json" --export-llmc "$tmp/existing.bin" --set model.init_from="$A"
[ "$(cat "$tmp/existing.bin")" = keep ] && ok export_llmc_existing_unchanged || not_ok export_llmc_existing_unchanged "replaced"

# ---- the tokenizer files of a checkpoint directory ---------------------------
if cmp -s assets/vocab/encoder.json "$A/vocab.json" && cmp -s assets/vocab/vocab.bpe "$A/merges.txt"; then
    ok checkpoint_vocab_and_merges
else
    not_ok checkpoint_vocab_and_merges "vocab.json / merges.txt missing or not data.vocab_dir's encoder.json / vocab.bpe"
fi
if "$py" - "$A" <<'EOF'
import json, sys
d = sys.argv[1]
tc = json.load(open(f"{d}/tokenizer_config.json"))
sm = json.load(open(f"{d}/special_tokens_map.json"))
eot = "<|endoftext|>"
assert tc["tokenizer_class"] == "GPT2Tokenizer" and tc["model_max_length"] == 16, tc
assert tc["eos_token"] == tc["bos_token"] == tc["unk_token"] == eot and tc["add_prefix_space"] is False, tc
assert sm == {"bos_token": eot, "eos_token": eot, "unk_token": eot}, sm
assert json.load(open(f"{d}/vocab.json"))[eot] == 50256
assert open(f"{d}/merges.txt").readline() == "#version: 0.2\n"
EOF
then ok checkpoint_tokenizer_config; else not_ok checkpoint_tokenizer_config "see the assertion above"; fi
# Where transformers exists (not on this machine), the real readers.
if "$py" -c 'import transformers' 2>/dev/null; then
    tg --config "$tmp/shaped.json" --set model.vocab_size=50257 --set out.dir="$tmp/hf" >"$tmp/hf_run.out" 2>&1
    if "$py" -c 'import sys; from transformers import AutoTokenizer, pipeline
t = AutoTokenizer.from_pretrained(sys.argv[1]); assert t.encode("Hello world") == [15496, 995], t.encode("Hello world")
pipeline("text-generation", sys.argv[1])("In the beginning", max_new_tokens=4)' "$tmp/hf/step_00000000" >"$tmp/hf.out" 2>&1; then
        ok transformers_loads_checkpoint
    else
        not_ok transformers_loads_checkpoint "$(tail -2 "$tmp/hf.out")"
    fi
fi
# --help documents the export and the shape keys left out
tg --help >"$tmp/help.out" 2>&1
grep -q -- '--export-llmc' "$tmp/help.out" && grep -q 'left out' "$tmp/help.out" && ok help_documents_model_files ||
    not_ok help_documents_model_files "no --export-llmc / 'left out' in --help"
exit "$failed"
