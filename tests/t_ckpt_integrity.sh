#!/usr/bin/env bash
# Checkpoint integrity: every file's checksum in state.json, verified on
# load (resume, model.init_from, --eval, --export-llmc); safetensors
# data_offsets that tile the data section; state.json's step equal to its
# folder's; tensors the model lacks refused by name (with or without
# config.json, llm.c files too); the training set fingerprinted and a
# changed one refused on resume (a warning under data.allow_changed); a
# damaged newest checkpoint stops the run, and moving it away resumes from
# the one before. Each refusal: non-zero exit, stderr naming the file and
# the tensor/key, out.dir unchanged. Run by tests/run.sh.
# tier: check (make check: the quick tier, tests/run.sh --check)
# cost: 35 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" ckpt_integrity
oneline() { tr '\n' ' ' <"$1" | cut -c1-300; }
if ! "$py" -c 'import numpy' 2>/dev/null; then not_ok prerequisites "python3-numpy is missing"; exit 1; fi

cat >"$tmp/fx.py" <<'PY'
import sys, json, struct
import numpy as np

def shard(path, n, seed):
    h = np.zeros(256, dtype='<i4'); h[:3] = (20240520, 1, n)
    t = np.random.default_rng(seed).integers(0, 500, n).astype('<u2')
    open(path, 'wb').write(h.tobytes() + t.tobytes())

def st_read(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]

def st_write(path, hdr, data):
    h = json.dumps(hdr).encode()
    h += b' ' * (-len(h) % 8)
    open(path, 'wb').write(struct.pack('<Q', len(h)) + h + data)

def flip(path, where):
    """Flips the lowest bit of a byte: in a tensor's first element
    (TENSOR: its float stays finite) or at a text's first occurrence."""
    b = bytearray(open(path, 'rb').read())
    if where.startswith('text:'):
        i = b.index(where[5:].encode())
    else:
        hdr, _ = st_read(path)
        i = 8 + struct.unpack('<Q', b[:8])[0] + hdr[where]['data_offsets'][0]
    b[i] ^= 1
    open(path, 'wb').write(bytes(b))

def st_edit(path, op, a=None, b=None):
    hdr, data = st_read(path)
    if op == 'overlap':  # a's bytes claimed by b too (same size): b's own bytes unused
        hdr[b]['data_offsets'] = list(hdr[a]['data_offsets'])
    elif op == 'swap':  # two tensors of one size trade places
        hdr[a]['data_offsets'], hdr[b]['data_offsets'] = hdr[b]['data_offsets'], hdr[a]['data_offsets']
    elif op == 'gap':  # 4 unused bytes before the last tensor
        last = max((k for k in hdr if k != '__metadata__'), key=lambda k: hdr[k]['data_offsets'][0])
        s, e = hdr[last]['data_offsets']
        data = data[:s] + b'\0' * 4 + data[s:]
        hdr[last]['data_offsets'] = [s + 4, e + 4]
    elif op == 'tail':  # 8 bytes after the last tensor that no tensor covers
        data = data + b'\0' * 8
    elif op == 'add':  # a tensor named a, a copy of b's values
        s, e = hdr[b]['data_offsets']
        hdr[a] = dict(hdr[b], data_offsets=[len(data), len(data) + e - s])
        data = data + data[s:e]
    elif op == 'drop':  # tensor a removed, its bytes too
        s, e = hdr.pop(a)['data_offsets']
        data = data[:s] + data[e:]
        for k, v in hdr.items():
            if k != '__metadata__' and v['data_offsets'][0] >= e:
                v['data_offsets'] = [v['data_offsets'][0] - (e - s), v['data_offsets'][1] - (e - s)]
    elif op == 'prefix':  # every name under "transformer." (save_pretrained's names)
        hdr = {('transformer.' + k if k != '__metadata__' else k): v for k, v in hdr.items()}
    st_write(path, hdr, data)

def state(path, op, val=None):
    j = json.load(open(path))
    if op == 'unverify':  # as version 1 wrote it: no checksums, no training set
        j['version'] = 1; j.pop('files', None); j.pop('train_data', None)
    elif op == 'step':
        j['step'] = int(val)
    json.dump(j, open(path, 'w'), indent=2)

if __name__ == '__main__':
    cmd, args = sys.argv[1], sys.argv[2:]
    {'shard': lambda: shard(args[0], int(args[1]), int(args[2])), 'flip': lambda: flip(*args),
     'st': lambda: st_edit(*args), 'state': lambda: state(*args)}[cmd]()
PY
fx() { "$py" "$tmp/fx.py" "$@"; }

D="$tmp/data"
mkdir -p "$D"
fx shard "$D/a_000000.bin" 2000 1
fx shard "$D/val_000000.bin" 300 2
base="$tmp/base.json"
cat >"$base" <<EOF
{
  "model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "vocab_size": 500, "seq_len": 16},
  "train": {"micro_batch": 2, "global_batch": 4, "steps": 4, "lr": 1e-3, "min_lr": 1e-4, "warmup": 1},
  "data": {"train": "$D/a_*.bin", "val": "$D/val_*.bin", "shuffle": false, "vocab_dir": "$tmp/no_vocab"},
  "out": {"dir": "$tmp/run", "log_every": 1, "eval_every": 0, "eval_batches": 1, "save_every": 1,
          "resume": true, "sample_tokens": 0},
  "device": "cpu"
}
EOF
# A good run: step_00000001 and step_00000002; every case works on a copy.
if ! timeout -k 5 60 "$bin" --config "$base" --set train.steps=2 >"$tmp/good.out" 2>&1 ||
    [ ! -f "$tmp/run/step_00000002/state.json" ]; then
    not_ok prerequisites "the good run failed: $(oneline "$tmp/good.out")"
    exit 1
fi
ok prerequisites
pristine="$tmp/run"

mkrun() { rm -rf "$tmp/r_$1" && cp -a "$pristine" "$tmp/r_$1" && echo "$tmp/r_$1"; }
# A Hugging Face-style copy of step 2 (no state.json, so no checksums):
# model.safetensors and, unless told otherwise, config.json.
mkhf() { rm -rf "$tmp/hf_$1" && mkdir -p "$tmp/hf_$1" && cp "$pristine/step_00000002/model.safetensors" "$tmp/hf_$1/" &&
    { [ "${2:-}" = noconfig ] || cp "$pristine/step_00000002/config.json" "$tmp/hf_$1/"; } && echo "$tmp/hf_$1"; }

# expect_fail NAME DIR PATTERN... -- ARGS...: train_gpt --config base ARGS exits non-zero (not by a signal
# or the timeout), stderr matching every PATTERN, DIR unchanged.
expect_fail() {
    local name="$1" dir="$2"; shift 2
    local pats=()
    while [ "$1" != "--" ]; do pats+=("$1"); shift; done
    shift
    local before why=() err="$tmp/$name.err"
    before="$(run_dir_listing "$dir")"
    timeout -k 5 60 "$bin" --config "$base" "$@" >"$tmp/$name.out" 2>"$err" </dev/null
    local rc=$? p
    if [ $rc -eq 0 ]; then why+=("exited 0"); elif [ $rc -gt 123 ]; then why+=("killed or crashed (status $rc)"); fi
    for p in "${pats[@]}"; do grep -Eqi -- "$p" "$err" || why+=("stderr lacks /$p/"); done
    [ "$(run_dir_listing "$dir")" = "$before" ] || why+=("$dir changed")
    if [ ${#why[@]} -eq 0 ]; then ok "$name"; else local IFS=';'; not_ok "$name" "${why[*]} | stderr: $(oneline "$err")"; fi
}
fresh="$tmp/fresh"  # fresh/CASE: out.dir of a run that starts from model.init_from

# ---- single-bit flips: refused naming the file ------------------------------
d=$(mkrun flip_model); fx flip "$d/step_00000002/model.safetensors" h.1.mlp.c_fc.weight
expect_fail bitflip_model_safetensors "$d" 'step_00000002/model\.safetensors' 'damaged' 'checksum' -- --set out.dir="$d"
d=$(mkrun flip_optim); fx flip "$d/step_00000002/optimizer.safetensors" exp_avg_sq.h.0.attn.c_proj.weight
expect_fail bitflip_optimizer_safetensors "$d" 'step_00000002/optimizer\.safetensors' 'damaged' -- --set out.dir="$d"
d=$(mkrun flip_config); fx flip "$d/step_00000002/config.json" 'text:0.02'  # initializer_range, which nothing reads
expect_fail bitflip_config_json "$d" 'step_00000002/config\.json' 'damaged' -- --set out.dir="$d"
# the same flip through model.init_from, --eval and --export-llmc of a checkpoint dir
d=$(mkrun flip_init); fx flip "$d/step_00000002/model.safetensors" wte.weight
expect_fail bitflip_init_from "$d" 'step_00000002/model\.safetensors' 'damaged' -- --set out.dir="$fresh/bitflip_init_from" --set model.init_from="$d/step_00000002"
expect_fail bitflip_eval "$d" 'step_00000002/model\.safetensors' 'damaged' -- --set out.dir="$d" --eval
expect_fail bitflip_export_llmc "$d" 'step_00000002/model\.safetensors' 'damaged' -- --set out.dir="$d" --export-llmc "$tmp/flip.bin"
if [ -e "$tmp/flip.bin" ]; then not_ok bitflip_export_wrote_nothing "$tmp/flip.bin exists"; else ok bitflip_export_wrote_nothing; fi
# data_offsets of two same-size tensors swapped: legal safetensors, caught by the checksum
d=$(mkrun swap); fx st "$d/step_00000002/model.safetensors" swap ln_f.weight ln_f.bias
expect_fail swapped_offsets_checksum "$d" 'step_00000002/model\.safetensors' 'damaged' -- --set out.dir="$d"

# ---- the corrupted newest checkpoint: the run stops; moved away, the previous one resumes
d=$(mkrun newest); fx flip "$d/step_00000002/model.safetensors" h.0.ln_1.weight
expect_fail corrupted_newest_stops "$d" 'step_00000002/model\.safetensors' 'move .*step_00000002' -- --set out.dir="$d"
mv "$d/step_00000002" "$tmp/newest_moved"
if timeout -k 5 60 "$bin" --config "$base" --set out.dir="$d" >"$tmp/fallback.out" 2>&1 &&
    grep -q 'resumed from .*step_00000001 (step 1)' "$tmp/fallback.out" && [ -d "$d/step_00000004" ] &&
    cmp -s "$d/step_00000002/model.safetensors" "$pristine/step_00000002/model.safetensors"; then
    ok corrupted_newest_fallback_after_move
else
    not_ok corrupted_newest_fallback_after_move "$(grep -m1 -i 'resumed\|error' "$tmp/fallback.out"); step 2 retrained bitwise: $(cmp -s "$d/step_00000002/model.safetensors" "$pristine/step_00000002/model.safetensors" && echo yes || echo no)"
fi

# ---- an older checkpoint without checksums: loaded, with a warning ----------
d=$(mkrun v1); fx state "$d/step_00000002/state.json" unverify
if timeout -k 5 60 "$bin" --config "$base" --set out.dir="$d" >"$tmp/v1.out" 2>"$tmp/v1.err" &&
    grep -q 'resumed from .*step_00000002' "$tmp/v1.out" && grep -qi 'step_00000002.*version-1.*unverified' "$tmp/v1.err"; then
    ok version1_loads_with_unverified_warning
else
    not_ok version1_loads_with_unverified_warning "$(oneline "$tmp/v1.err")"
fi

# ---- state.json's step against its folder -----------------------------------
for s in 7 0 2147483647; do
    d=$(mkrun "step_$s"); fx state "$d/step_00000002/state.json" step "$s"
    expect_fail "state_step_${s}_in_step_2" "$d" 'step_00000002/state\.json' "'step' = $s" -- --set out.dir="$d"
done

# ---- data_offsets must tile the data section ---------------------------------
h=$(mkhf overlap); fx st "$h/model.safetensors" overlap ln_f.weight ln_f.bias
expect_fail offsets_overlap "$h" 'overlap/model\.safetensors' 'ln_f\.bias' 'ln_f\.weight' 'overlap' -- --set out.dir="$fresh/offsets_overlap" --set model.init_from="$h"
h=$(mkhf gap); fx st "$h/model.safetensors" gap
expect_fail offsets_gap "$h" 'gap/model\.safetensors' 'unused' -- --set out.dir="$fresh/offsets_gap" --set model.init_from="$h"
h=$(mkhf tail); fx st "$h/model.safetensors" tail
expect_fail offsets_unused_tail "$h" 'tail/model\.safetensors' 'unused' -- --set out.dir="$fresh/offsets_unused_tail" --set model.init_from="$h"

# ---- tensors the model lacks, or lacking one it has ---------------------------
h=$(mkhf layers2); expect_fail two_layers_into_one_with_config "$h" 'layers2/config\.json' 'n_layer' -- --set out.dir="$fresh/two_layers_into_one_with_config" --set model.init_from="$h" --set model.n_layer=1
h=$(mkhf layers2_nocfg noconfig); expect_fail two_layers_into_one_without_config "$h" 'layers2_nocfg/model\.safetensors' "'h\.1\." 'not part of this model' -- --set out.dir="$fresh/two_layers_into_one_without_config" --set model.init_from="$h" --set model.n_layer=1
d=$(mkrun llmc); timeout -k 5 60 "$bin" --config "$base" --set out.dir="$d" --export-llmc "$tmp/two.bin" >/dev/null 2>&1
expect_fail two_layers_into_one_llmc "$d" 'two\.bin' 'num_layers' -- --set out.dir="$fresh/two_layers_into_one_llmc" --set model.init_from="$tmp/two.bin" --set model.n_layer=1
h=$(mkhf unknown); fx st "$h/model.safetensors" add h.0.mlp.c_gate.weight h.0.mlp.c_fc.weight
expect_fail unknown_tensor_model "$h" 'unknown/model\.safetensors' 'h\.0\.mlp\.c_gate\.weight' -- --set out.dir="$fresh/unknown_tensor_model" --set model.init_from="$h"
h=$(mkhf missing); fx st "$h/model.safetensors" drop h.1.attn.c_proj.bias
expect_fail missing_tensor_model "$h" 'missing/model\.safetensors' 'h\.1\.attn\.c_proj\.bias' -- --set out.dir="$fresh/missing_tensor_model" --set model.init_from="$h"
# the optimizer's file (read on resume; version 1, so the edit meets no checksum)
d=$(mkrun opt_unknown); fx state "$d/step_00000002/state.json" unverify
fx st "$d/step_00000002/optimizer.safetensors" add exp_avg.h.2.ln_1.weight exp_avg.h.0.ln_1.weight
expect_fail unknown_tensor_optimizer "$d" 'optimizer\.safetensors' 'exp_avg\.h\.2\.ln_1\.weight' -- --set out.dir="$d"
d=$(mkrun opt_missing); fx state "$d/step_00000002/state.json" unverify
fx st "$d/step_00000002/optimizer.safetensors" drop exp_avg_sq.wpe.weight
expect_fail missing_tensor_optimizer "$d" 'optimizer\.safetensors' 'exp_avg_sq\.wpe\.weight' -- --set out.dir="$d"
# Hugging Face's own extras are no parameters: accepted by name, with or without "transformer."
h=$(mkhf hf_extras)
fx st "$h/model.safetensors" add h.0.attn.bias ln_f.weight
fx st "$h/model.safetensors" add h.1.attn.masked_bias ln_f.weight
fx st "$h/model.safetensors" add lm_head.weight wte.weight
fx st "$h/model.safetensors" prefix
if timeout -k 5 60 "$bin" --config "$base" --set out.dir="$fresh.extras" --set model.init_from="$h" --eval >"$tmp/extras.out" 2>&1; then
    ok hf_extras_accepted
else
    not_ok hf_extras_accepted "$(oneline "$tmp/extras.out")"
fi

# ---- the training set: refused when changed, a warning under data.allow_changed
d=$(mkrun added)
fx shard "$D/a_000001.bin" 1500 3
expect_fail shard_added_refused "$d" 'step_00000002/state\.json' 'added shard .*a_000001\.bin' 'data\.allow_changed' -- --set out.dir="$d"
if timeout -k 5 60 "$bin" --config "$base" --set out.dir="$d" --set data.allow_changed=true >"$tmp/allow.out" 2>"$tmp/allow.err" &&
    grep -qi 'warning.*added shard .*a_000001\.bin' "$tmp/allow.err" && [ -d "$d/step_00000004" ]; then
    ok shard_added_allowed_with_warning
else
    not_ok shard_added_allowed_with_warning "$(oneline "$tmp/allow.err")"
fi
rm -f "$D/a_000001.bin"
d=$(mkrun resized)
fx shard "$D/a_000000.bin" 2100 1
expect_fail shard_resized_refused "$d" "resized shard 'a_000000\.bin' \(2000 tokens" -- --set out.dir="$d"
fx shard "$D/a_000000.bin" 2000 1

exit $failed
