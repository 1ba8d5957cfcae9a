#!/usr/bin/env bash
# Bad-input tests: every user-facing parser (config file, --set, command line,
# token shards, checkpoints for model.init_from and for resuming, ./prepare)
# given malformed input must exit non-zero without hanging or crashing, print
# on stderr a message naming the file and the key/field/tensor/offset
# concerned, and leave what is already in out.dir untouched (same sha256 of
# every file but log.jsonl, no new step_ directory).
# Prints "ok NAME" or "not ok NAME - reason" per case; exits non-zero if any
# case failed. Run from the repo root by tests/run.sh (env TG_ROOT, TG_TMP).
# tier: check (make check: the quick tier, tests/run.sh --check)
# cost: 110 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" bad_input
prep="${PREPARE:-./prepare}"
oneline() { tr '\n' ' ' <"$1" | cut -c1-"${2:-240}"; }

# ---- prerequisites -------------------------------------------------------
for need in "$bin" "$prep"; do
    if [ ! -x "$need" ]; then not_ok prerequisites "$need is missing (run make)"; exit 1; fi
done
if ! "$py" -c 'import numpy' 2>/dev/null; then not_ok prerequisites "python3-numpy is missing"; exit 1; fi

# ---- fixture maker (shards, configs, edited safetensors) -----------------
cat >"$tmp/fx.py" <<'EOF'
import sys, json, struct, shutil

def shard(path, n, seed, magic=20240520, version=1, count=None, body=None, sets=()):
    """n tokens below 500; header count `count` (default n); `body` tokens
    actually written (default n); sets: (index, value) overrides."""
    import numpy as np  # here only: its import is most of a call's time, and only the shards need it
    h = np.zeros(256, dtype='<i4'); h[0] = magic; h[1] = version; h[2] = n if count is None else count
    t = np.random.default_rng(seed).integers(0, 500, n).astype('<u2')
    for i, v in sets: t[i] = v
    t = t[: (n if body is None else body)]
    open(path, 'wb').write(h.tobytes() + t.tobytes())

def cfg(base, out, *edits):
    """edits: 'a.b=JSON' sets a key, 'a.b=DELETE' removes it."""
    c = json.load(open(base))
    for e in edits:
        k, v = e.split('=', 1)
        *sec, last = k.split('.')
        d = c
        for s in sec: d = d.setdefault(s, {})
        if v == 'DELETE': d.pop(last, None)
        else: d[last] = json.loads(v)
    json.dump(c, open(out, 'w'), indent=1)

def st_read(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]

def st_write(path, hdr, data, text=None):
    h = (text if text is not None else json.dumps(hdr)).encode()
    h += b' ' * (-len(h) % 8)
    open(path, 'wb').write(struct.pack('<Q', len(h)) + h + data)

def st_edit(src, dst, op, name=None, arg=None):
    hdr, data = st_read(src)
    text = None
    if op == 'drop':  # the entry and its bytes (the others moved down: the data stays tiled)
        s, e = hdr.pop(name)['data_offsets']
        data = data[:s] + data[e:]
        for k, v in hdr.items():
            if k != '__metadata__' and v['data_offsets'][0] >= e:
                v['data_offsets'] = [v['data_offsets'][0] - (e - s), v['data_offsets'][1] - (e - s)]
    elif op == 'shape': hdr[name]['shape'] = json.loads(arg)
    elif op == 'dtype': hdr[name]['dtype'] = arg
    elif op == 'offsets':  # raw JSON text (1e999 has no Python spelling)
        hdr[name]['data_offsets'] = '@RAW@'
        text = json.dumps(hdr).replace('"@RAW@"', arg)
    elif op == 'trail': text = json.dumps(hdr) + arg  # text after the header's JSON
    elif op == 'dup':  # the entry of `name` twice, the copy first
        body = json.dumps(hdr)
        text = '{' + json.dumps(name) + ': ' + json.dumps(hdr[name]) + ', ' + body[1:]
    elif op == 'value':  # arg "INDEX:VALUE": one float32 element of tensor `name`
        i, v = arg.split(':')
        off = hdr[name]['data_offsets'][0] + 4 * int(i)
        data = data[:off] + struct.pack('<f', float(v)) + data[off + 4:]
    elif op == 'hdrlen':  # a header length far beyond the file
        open(dst, 'wb').write(struct.pack('<Q', 1 << 40) + open(src, 'rb').read()[8:]); return
    st_write(dst, hdr, data, text)

if __name__ == '__main__':
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == 'shard':
        kw = {}
        for a in args[3:]:
            k, v = a.split('=', 1)
            if k == 'set': kw.setdefault('sets', []).append(tuple(int(x) for x in v.split(':')))
            else: kw[k] = int(v)
        shard(args[0], int(args[1]), int(args[2]), **kw)
    elif cmd == 'cfg': cfg(*args)
    elif cmd == 'st': st_edit(*args)
    elif cmd == 'unverify':  # state.json as version 1 wrote it: no checksums, so edits reach the parsers
        j = json.load(open(args[0])); j['version'] = 1; j.pop('files', None); j.pop('train_data', None)
        json.dump(j, open(args[0], 'w'), indent=2)
    else: sys.exit('fx.py: unknown command ' + cmd)
EOF
fx() { "$py" "$tmp/fx.py" "$@"; }

D="$tmp/data"
mkdir -p "$D"
fx shard "$D/good_000000.bin" 2000 1
fx shard "$D/val_000000.bin" 300 2

run="$tmp/run"  # the run directory every bad run points at
base="$tmp/base.json"
cat >"$base" <<EOF
{
  "model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "vocab_size": 500, "seq_len": 16},
  "train": {"micro_batch": 2, "global_batch": 4, "steps": 4, "lr": 1e-3, "min_lr": 1e-4, "warmup": 1},
  "data": {"train": "$D/good_*.bin", "val": "$D/val_*.bin", "shuffle": false, "vocab_dir": "$tmp/no_vocab"},
  "out": {"dir": "$run", "log_every": 1, "eval_every": 0, "eval_batches": 1, "save_every": 0,
          "resume": true, "sample_tokens": 0},
  "device": "cpu"
}
EOF
C="$tmp/cfg"
mkdir -p "$C"

# ---- a good run first: its checkpoints must survive every bad run -------
# steps 2 with save_every 1 (step 1 and 2); the bad runs ask for 4 steps, so a
# bad run that is not refused shows up as a new step_ directory.
if ! timeout -k 5 60 "$bin" --config "$base" --set train.steps=2 --set out.save_every=1 >"$tmp/good.out" 2>&1 ||
    [ ! -f "$run/step_00000002/model.safetensors" ]; then
    not_ok prerequisites "the good run failed: $(tail -n 3 "$tmp/good.out" | tr '\n' ' ')"
    exit 1
fi
cp -a "$run" "$tmp/run.pristine"
ok prerequisites
good_ckpt="$run/step_00000002"

# Not the lock files (out.dir/.train_gpt.lock, prepare's PREFIX.lock): every
# run takes them, leaves them and records its pid there, by design.
snapshot() { # DIR: sha256 of every file but log.jsonl and the lock files, and the list of the others
    (cd "$1" 2>/dev/null && find . -mindepth 1 ! -name log.jsonl ! -name '*.lock' | sort &&
        find . -type f ! -name log.jsonl ! -name '*.lock' -print0 | sort -z |
        xargs -0 -r sha256sum)
}

# expect_fail NAME [-d DIR]... [-p PATTERN]... -- COMMAND...
# Runs COMMAND (timeout 60 s). Passes when it exits non-zero (not by a signal
# nor the timeout), stderr matches every PATTERN (extended regex, ignoring
# case), and every DIR (default: the run dir) is unchanged.
expect_fail() {
    local name="$1"; shift
    local dirs=() pats=()
    while [ "$1" != "--" ]; do
        case "$1" in
            -d) dirs+=("$2"); shift 2 ;;
            -p) pats+=("$2"); shift 2 ;;
            *) echo "expect_fail: bad option $1" >&2; exit 2 ;;
        esac
    done
    shift
    [ ${#dirs[@]} -eq 0 ] && dirs=("$run")
    local d i before=()
    for i in "${!dirs[@]}"; do before[$i]="$(snapshot "${dirs[$i]}")"; done
    local out="$tmp/$name.stdout" err="$tmp/$name.stderr"
    # through bash so that COMMAND may be one of the exported helpers below
    timeout -k 5 60 bash -c '"$@"' _ "$@" >"$out" 2>"$err" </dev/null
    local rc=$? why=()
    if [ $rc -eq 0 ]; then why+=("exited 0")
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then why+=("hung (killed after 60 s)")
    elif [ $rc -gt 128 ]; then why+=("crashed (status $rc, signal $((rc - 128)))")
    fi
    if [ ! -s "$err" ]; then why+=("nothing on stderr")
    else
        local p
        for p in "${pats[@]}"; do
            grep -Eqi -- "$p" "$err" || why+=("stderr lacks /$p/")
        done
    fi
    for i in "${!dirs[@]}"; do
        d="${dirs[$i]}"
        if [ "$(snapshot "$d")" != "${before[$i]}" ]; then
            why+=("$d changed: $(diff <(echo "${before[$i]}") <(snapshot "$d") | grep '^[<>]' | head -n 3 | tr '\n' ' ')")
            if [ "$d" = "$run" ]; then rm -rf "$run" && cp -a "$tmp/run.pristine" "$run"; fi
        fi
    done
    if [ ${#why[@]} -eq 0 ]; then ok "$name"
    else
        local IFS=';'
        not_ok "$name" "${why[*]} | stderr: $(oneline "$err")"
    fi
}
tg() { "$bin" "$@"; }
export bin base prep tmp  # tmp: the helpers below run in child shells
export -f tg

# ---- config file ---------------------------------------------------------
# malformed JSON: a missing comma on line 3
cat >"$C/syntax.json" <<EOF
{
  "model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "vocab_size": 500, "seq_len": 16},
  "train": {"micro_batch": 2 "global_batch": 4, "steps": 4},
  "out": {"dir": "$run"}
}
EOF
expect_fail config_malformed_json -p 'syntax\.json' -p 'line 3' -- tg --config "$C/syntax.json"
# a truncated file (unterminated object)
head -c 60 "$base" >"$C/cut.json"
expect_fail config_truncated_json -p 'cut\.json' -- tg --config "$C/cut.json"
printf '' >"$C/empty.json"
expect_fail config_empty_file -p 'empty\.json' -- tg --config "$C/empty.json"
echo '[1, 2]' >"$C/array.json"
expect_fail config_not_an_object -p 'array\.json' -- tg --config "$C/array.json"
fx cfg "$base" "$C/unknown_key.json" 'model.n_layers=2'
expect_fail config_unknown_key -p 'unknown_key\.json' -p 'model\.n_layers' -- tg --config "$C/unknown_key.json"
fx cfg "$base" "$C/unknown_section.json" 'optim.lr=0.1'
expect_fail config_unknown_section -p 'unknown_section\.json' -p 'optim' -- tg --config "$C/unknown_section.json"
fx cfg "$base" "$C/str_for_num.json" 'train.lr="fast"'
expect_fail config_string_for_number -p 'str_for_num\.json' -p 'train\.lr' -p 'got "fast"' -- tg --config "$C/str_for_num.json"
fx cfg "$base" "$C/float_for_int.json" 'model.n_layer=2.5'
expect_fail config_float_for_integer -p 'float_for_int\.json' -p 'model\.n_layer' -- tg --config "$C/float_for_int.json"
fx cfg "$base" "$C/str_for_bool.json" 'data.shuffle="yes"'
expect_fail config_string_for_bool -p 'str_for_bool\.json' -p 'data\.shuffle' -- tg --config "$C/str_for_bool.json"
fx cfg "$base" "$C/num_for_bool.json" 'out.resume=1'
expect_fail config_number_for_bool -p 'num_for_bool\.json' -p 'out\.resume' -- tg --config "$C/num_for_bool.json"
fx cfg "$base" "$C/bool_for_num.json" 'train.steps=true'
expect_fail config_bool_for_number -p 'bool_for_num\.json' -p 'train\.steps' -p 'got true' -- tg --config "$C/bool_for_num.json"
fx cfg "$base" "$C/num_for_str.json" 'data.train=5'
expect_fail config_number_for_string -p 'num_for_str\.json' -p 'data\.train' -p 'got 5' -- tg --config "$C/num_for_str.json"
fx cfg "$base" "$C/num_model.json" 'model=3'
expect_fail config_number_for_section -p 'num_model\.json' -p 'model' -p 'object|section' -- tg --config "$C/num_model.json"
fx cfg "$base" "$C/bad_choice.json" 'train.recompute="sometimes"'
expect_fail config_bad_choice -p 'bad_choice\.json' -p 'train\.recompute' -- tg --config "$C/bad_choice.json"
# CUDA in a build without it (or on a machine without a GPU), NCCL on the CPU
fx cfg "$base" "$C/cuda.json" 'device="cuda"'
expect_fail config_cuda_unavailable -p 'cuda\.json' -p 'device' -p 'without CUDA|no CUDA device' -- tg --config "$C/cuda.json"
fx cfg "$base" "$C/nccl_cpu.json" 'parallel.comm="nccl"'
expect_fail config_nccl_on_cpu -p 'nccl_cpu\.json' -p 'parallel\.comm' -- tg --config "$C/nccl_cpu.json"
fx cfg "$base" "$C/heads.json" 'model.n_head=3'
expect_fail config_embd_not_divisible_by_heads -p 'heads\.json' -p 'model\.n_embd' -p 'model\.n_head' -- tg --config "$C/heads.json"
fx cfg "$base" "$C/accum.json" 'train.global_batch=5'
expect_fail config_global_not_multiple_of_micro -p 'accum\.json' -p 'train\.global_batch' -p 'train\.micro_batch' -- tg --config "$C/accum.json"
fx cfg "$base" "$C/neg_lr.json" 'train.lr=-0.001' 'train.min_lr=-0.01'
expect_fail config_negative_lr -p 'neg_lr\.json' -p 'train\.lr' -- tg --config "$C/neg_lr.json"
fx cfg "$base" "$C/tp2.json" 'parallel.tp=2'
expect_fail config_tp2_with_one_rank -p 'tp2\.json' -p 'parallel\.tp' -- tg --config "$C/tp2.json"
# a parallel.dp nobody gave comes from the launcher's world size: the message says so
expect_fail config_global_batch_vs_dp_from_world -p 'train\.global_batch \(2\) must be a multiple of .*parallel\.dp \(2, from the world size: 2 ranks / parallel\.tp 1\)' -- scripts/launch.sh -n 2 --log-dir "$tmp/launch_dp" -- "$bin" --config "$base" --set train.global_batch=2
# the same from --set: the message names the --set, not the file that never gave the key
expect_fail config_tp2_with_one_rank_from_set -p '^train_gpt: error: --set parallel\.tp: parallel\.tp is 2' -- tg --config "$base" --set parallel.tp=2
fx cfg "$base" "$C/zero_seq.json" 'model.seq_len=0'
expect_fail config_zero_seq_len -p 'zero_seq\.json' -p 'model\.seq_len' -- tg --config "$C/zero_seq.json"
fx cfg "$base" "$C/neg_steps.json" 'train.steps=-3'
expect_fail config_negative_steps -p 'neg_steps\.json' -p 'train\.steps' -- tg --config "$C/neg_steps.json"
# strict JSON: a key twice (cJSON keeps both; lookups took one), a NUL byte
# and text after the value (cJSON stops reading at the NUL)
sed 's/"steps": 4,/"steps": 4, "steps": 9,/' "$base" >"$C/dup_key.json"
expect_fail config_duplicate_key -p 'dup_key\.json' -p 'train\.steps' -p 'more than once' -- tg --config "$C/dup_key.json"
{ cat "$base"; printf '\0{"train": {"steps": 9}}\n'; } >"$C/nul_tail.json"
expect_fail config_nul_then_garbage -p 'nul_tail\.json' -p 'NUL' -- tg --config "$C/nul_tail.json"
# products of in-range keys that overflow an int: rows of a micro-batch (the
# SP check), micro_batch x dp (a division by zero once wrapped). Projected
# runs (one process stands for the layout); memory capped in case one is not
# refused before allocating.
capped() { ulimit -v 4000000; "$bin" "$@"; }
export -f capped
# an integer key's range in whole numbers, not %g's 1.07374e+09
expect_fail config_integer_range_in_whole_numbers -p "key 'train\.warmup' = -5 is out of range \[0, 1073741824\]" -- tg --config "$base" --set train.warmup=-5
expect_fail config_rows_overflow -p 'train\.micro_batch' -p 'model\.seq_len' -p '4294967296' -- capped --config "$base" --set parallel.project=true --set parallel.tp=2 --set parallel.sp=true --set train.micro_batch=65536 --set model.seq_len=65536 --set train.global_batch=65536
expect_fail config_micro_times_dp_overflow -p 'train\.global_batch' -p '1099511627776' -- capped --config "$base" --set parallel.project=true --set parallel.dp=1048576 --set train.micro_batch=1048576 --set train.global_batch=1048576

# ---- --set ---------------------------------------------------------------
expect_fail set_unknown_key -p 'train\.stepz' -- tg --config "$base" --set train.stepz=3
expect_fail set_unknown_section -p 'optim\.lr' -- tg --config "$base" --set optim.lr=0.1
expect_fail set_string_for_number -p 'train\.lr' -- tg --config "$base" --set train.lr=fast
expect_fail set_float_for_integer -p 'model\.n_head' -- tg --config "$base" --set model.n_head=1.5
expect_fail set_bad_bool -p 'data\.shuffle' -- tg --config "$base" --set data.shuffle=maybe
expect_fail set_trailing_garbage -p 'train\.steps' -- tg --config "$base" --set train.steps=4x
expect_fail set_empty_number -p 'train\.steps' -- tg --config "$base" --set train.steps=
expect_fail set_no_equals -p 'train\.steps' -- tg --config "$base" --set train.steps
expect_fail set_without_value -p '--set' -- tg --config "$base" --set
expect_fail set_impossible_value -p 'train\.global_batch' -- tg --config "$base" --set train.global_batch=3

# ---- command line --------------------------------------------------------
expect_fail cli_unknown_flag -p '--frobnicate' -- tg --config "$base" --frobnicate
expect_fail cli_stray_argument -p 'stray' -- tg --config "$base" stray
expect_fail cli_missing_config_flag -p '--config' -- tg
expect_fail cli_config_without_value -p '--config' -- tg --config
expect_fail cli_missing_config_file -p "$tmp/nonexistent\\.json" -- tg --config "$tmp/nonexistent.json"
expect_fail cli_config_twice -p '--config' -p 'twice' -- tg --config "$base" --config "$base"
expect_fail cli_devices_trailing_garbage -p '--devices' -p '3x' -- tg --config "$base" --plan --devices 3x
expect_fail cli_device_gib_nan -p '--device-gib' -p 'nan' -- tg --config "$base" --plan --device-gib nan
expect_fail cli_device_gib_empty -p '--device-gib' -- tg --config "$base" --plan --device-gib ''
# rank variables (parallel/topology.c): whole decimal numbers only
expect_fail env_rank_trailing_garbage -p 'RANK' -p '1x' -- env RANK=1x WORLD_SIZE=2 "$bin" --config "$base"
expect_fail env_world_size_exponent -p 'WORLD_SIZE' -- env RANK=0 WORLD_SIZE=1e99 "$bin" --config "$base"

# ---- token shards --------------------------------------------------------
fx shard "$D/badhdr1_000000.bin" 2000 1 magic=12345
expect_fail shard_wrong_magic -p 'badhdr1_000000\.bin' -p 'magic' -- tg --config "$base" --set data.train="$D/badhdr1_*.bin"
fx shard "$D/badhdr2_000000.bin" 2000 1 version=7
expect_fail shard_wrong_version -p 'badhdr2_000000\.bin' -p 'version' -- tg --config "$base" --set data.train="$D/badhdr2_*.bin"
fx shard "$D/trunc_000000.bin" 2000 1 body=1500
expect_fail shard_truncated_body -p 'trunc_000000\.bin' -p '\b2000\b' -- tg --config "$base" --set data.train="$D/trunc_*.bin"
fx shard "$D/count_000000.bin" 2000 1 count=1000
expect_fail shard_count_disagrees_with_size -p 'count_000000\.bin' -p '\b1000\b' -- tg --config "$base" --set data.train="$D/count_*.bin"
fx shard "$D/oddsize_000000.bin" 2000 1
printf 'x' >>"$D/oddsize_000000.bin"
expect_fail shard_odd_byte_count -p 'oddsize_000000\.bin' -- tg --config "$base" --set data.train="$D/oddsize_*.bin"
head -c 100 "$D/good_000000.bin" >"$D/short_000000.bin"
expect_fail shard_shorter_than_header -p 'short_000000\.bin' -p 'header' -- tg --config "$base" --set data.train="$D/short_*.bin"
fx shard "$D/tiny_000000.bin" 20 1
expect_fail shard_too_small_for_a_batch -p 'tiny_' -- tg --config "$base" --set data.train="$D/tiny_*.bin"
# token ids: 505 lies between vocab_size (500) and the padded vocab (512);
# 60000 beyond both. The bad runs resume from step 2 of the good run, so the
# tokens sit in windows they read: window 2 = tokens [128, 192] (step 3),
# window 3 = [192, 256] (step 4). The message must name the position.
# (data.allow_changed: the shards differ from the saved run's on purpose.)
fx shard "$D/tok505_000000.bin" 2000 1 set=140:505
expect_fail shard_token_in_padding -p 'tok505_000000\.bin' -p '\b505\b' -p '\b140\b' -p 'vocab' -- tg --config "$base" --set data.train="$D/tok505_*.bin" --set data.allow_changed=true
fx shard "$D/tok60k_000000.bin" 2000 1 set=200:60000
expect_fail shard_token_beyond_padding -p 'tok60k_000000\.bin' -p '\b60000\b' -p '\b200\b' -- tg --config "$base" --set data.train="$D/tok60k_*.bin" --set data.allow_changed=true
# the same from scratch (no resume), bad token in the very first batch
fx shard "$D/tok0_000000.bin" 2000 1 set=3:777
expect_fail shard_token_in_first_batch -d "$tmp/fresh_tok" -p 'tok0_000000\.bin' -p '\b777\b' -- tg --config "$base" --set out.dir="$tmp/fresh_tok" --set data.train="$D/tok0_*.bin"
fx shard "$D/valtok_000000.bin" 300 2 set=5:9999
expect_fail val_shard_token_beyond_vocab -p 'valtok_000000\.bin' -p '\b9999\b' -- tg --config "$base" --set data.val="$D/valtok_*.bin"
expect_fail val_shard_wrong_magic -p 'badhdr1_000000\.bin' -- tg --config "$base" --set data.val="$D/badhdr1_*.bin"
expect_fail shard_glob_matches_nothing -p '--set data\.train: .*nothing_here_\*\.bin' -- tg --config "$base" --set data.train="$D/nothing_here_*.bin"
fx cfg "$base" "$C/no_val.json" "data.val=\"$D/no_val_*.bin\""
expect_fail shard_val_glob_matches_nothing_names_key -p 'no_val\.json: data\.val: .*no_val_\*\.bin' -p 'data\.val "" trains without validation' -- tg --config "$C/no_val.json"
expect_fail val_glob_matches_nothing -p 'no_val_\*\.bin' -- tg --config "$base" --set data.val="$D/no_val_*.bin"
# one good and one bad shard: the bad one must be found before training
expect_fail shard_second_of_two_bad -p 'count_000000\.bin' -- tg --config "$base" --set data.train="$D/[gc]o*_000000.bin"
# a glob matching a FIFO (opening it would block forever) or a directory
mkfifo "$D/fifo_000000.bin"
expect_fail shard_glob_matches_fifo -p 'fifo_000000\.bin' -p 'FIFO' -- tg --config "$base" --set data.train="$D/fifo_*.bin"
mkdir -p "$D/dir_000000.bin"
expect_fail shard_glob_matches_directory -p 'dir_000000\.bin' -p 'directory' -- tg --config "$base" --set data.train="$D/dir_*.bin"

# ---- vocabulary (needed for samples) --------------------------------------
expect_fail vocab_dir_missing -p "$(basename "$base"): data\.vocab_dir: .*$tmp/no_vocab" -- tg --config "$base" --set out.sample_tokens=8
mkdir -p "$tmp/bad_vocab"
echo '{"a": 1,' >"$tmp/bad_vocab/encoder.json"
printf '#version: 0.2\n' >"$tmp/bad_vocab/vocab.bpe"
expect_fail vocab_malformed_encoder_json -p 'encoder\.json' -- tg --config "$base" --set out.sample_tokens=8 --set data.vocab_dir="$tmp/bad_vocab"

# ---- checkpoints for model.init_from --------------------------------------
# Edited copies of the good checkpoint, loaded into a run with its own fresh
# out.dir (a fresh run over existing checkpoints is refused before init_from
# is read); the good run must not change, and the fresh dir must get no
# checkpoint.
mkck() { # NAME: a copy of the good checkpoint in $tmp/ck/NAME, its checksums left out (t_ckpt_integrity tests them)
    rm -rf "$tmp/ck/$1" && mkdir -p "$tmp/ck" && cp -a "$good_ckpt" "$tmp/ck/$1" && fx unverify "$tmp/ck/$1/state.json"
}
init_from() { tg --config "$base" --set out.resume=false --set out.dir="$tmp/init_run" --set model.init_from="$1"; }
export -f init_from
mkck missing_tensor
fx st "$good_ckpt/model.safetensors" "$tmp/ck/missing_tensor/model.safetensors" drop h.1.mlp.c_fc.bias
expect_fail init_from_missing_tensor -d "$run" -d "$tmp/ck/missing_tensor" -p 'missing_tensor/model\.safetensors' -p 'h\.1\.mlp\.c_fc\.bias' -- init_from "$tmp/ck/missing_tensor"
mkck wrong_shape
fx st "$good_ckpt/model.safetensors" "$tmp/ck/wrong_shape/model.safetensors" shape h.0.attn.c_attn.weight '[96, 32]'
expect_fail init_from_wrong_shape -d "$run" -p 'wrong_shape/model\.safetensors' -p 'h\.0\.attn\.c_attn\.weight' -- init_from "$tmp/ck/wrong_shape"
mkck wrong_dtype
fx st "$good_ckpt/model.safetensors" "$tmp/ck/wrong_dtype/model.safetensors" dtype ln_f.weight I64
expect_fail init_from_wrong_dtype -p 'wrong_dtype/model\.safetensors' -p 'ln_f\.weight' -- init_from "$tmp/ck/wrong_dtype"
mkck truncated
sz=$(stat -c %s "$good_ckpt/model.safetensors")
truncate -s $((sz / 2)) "$tmp/ck/truncated/model.safetensors"
expect_fail init_from_truncated_model -p 'truncated/model\.safetensors' -- init_from "$tmp/ck/truncated"
mkck hdrlen
fx st "$good_ckpt/model.safetensors" "$tmp/ck/hdrlen/model.safetensors" hdrlen
expect_fail init_from_bad_header_length -p 'hdrlen/model\.safetensors' -p 'header' -- init_from "$tmp/ck/hdrlen"
mkck garbage
head -c 4000 /dev/urandom >"$tmp/ck/garbage/model.safetensors"
expect_fail init_from_garbage_file -p 'garbage/model\.safetensors' -- init_from "$tmp/ck/garbage"
mkck no_model
rm "$tmp/ck/no_model/model.safetensors"
expect_fail init_from_dir_without_model -p 'no_model' -p 'model\.safetensors' -- init_from "$tmp/ck/no_model"
expect_fail init_from_nonexistent_dir -p "$tmp/ck/does_not_exist" -- init_from "$tmp/ck/does_not_exist"
# a checkpoint of a wider model (n_embd 48): config.json or the shapes disagree
timeout -k 5 60 "$bin" --config "$base" --set train.steps=0 --set model.n_embd=48 --set out.dir="$tmp/wide" >"$tmp/wide.out" 2>&1
expect_fail init_from_other_model_size -p 'wide/step_00000000' -p 'n_embd|wte|shape' -- init_from "$tmp/wide/step_00000000"
# numbers in safetensors headers and config.json: checked before conversion,
# quoted as written (not as a wrapped cast)
mkck shape_1e20
fx st "$good_ckpt/model.safetensors" "$tmp/ck/shape_1e20/model.safetensors" shape ln_f.weight '[1e20]'
expect_fail init_from_shape_1e20 -p 'shape_1e20/model\.safetensors' -p 'ln_f\.weight' -p '100000000000000000000' -- init_from "$tmp/ck/shape_1e20"
mkck shape_2p62
fx st "$good_ckpt/model.safetensors" "$tmp/ck/shape_2p62/model.safetensors" shape h.0.attn.c_attn.weight '[4611686018427387904, 8]'
expect_fail init_from_shape_2p62 -p 'h\.0\.attn\.c_attn\.weight' -p '4611686018427387904' -- init_from "$tmp/ck/shape_2p62"
mkck shape_2p50
fx st "$good_ckpt/model.safetensors" "$tmp/ck/shape_2p50/model.safetensors" shape ln_f.weight '[1125899906842624, 8192]'
expect_fail init_from_shape_product_overflow -p 'ln_f\.weight' -p 'more elements' -- init_from "$tmp/ck/shape_2p50"
mkck offsets_inf
fx st "$good_ckpt/model.safetensors" "$tmp/ck/offsets_inf/model.safetensors" offsets ln_f.bias '[0, 1e999]'
expect_fail init_from_offsets_1e999 -p 'ln_f\.bias' -p 'data_offsets' -p 'inf' -- init_from "$tmp/ck/offsets_inf"
mkck offsets_frac
fx st "$good_ckpt/model.safetensors" "$tmp/ck/offsets_frac/model.safetensors" offsets ln_f.bias '[0.5, 128.5]'
expect_fail init_from_offsets_fraction -p 'ln_f\.bias' -p 'data_offsets' -p '0\.5' -- init_from "$tmp/ck/offsets_frac"
mkck st_trail
fx st "$good_ckpt/model.safetensors" "$tmp/ck/st_trail/model.safetensors" trail x '{"more": 1}'
expect_fail init_from_header_trailing_text -p 'st_trail/model\.safetensors' -p 'after the JSON' -- init_from "$tmp/ck/st_trail"
mkck st_dup
fx st "$good_ckpt/model.safetensors" "$tmp/ck/st_dup/model.safetensors" dup wpe.weight
expect_fail init_from_header_duplicate_tensor -p 'st_dup/model\.safetensors' -p 'wpe\.weight' -p 'more than once' -- init_from "$tmp/ck/st_dup"
mkck nan_weight
fx st "$good_ckpt/model.safetensors" "$tmp/ck/nan_weight/model.safetensors" value h.1.attn.c_proj.weight 37:nan
expect_fail init_from_nan_weight -p 'nan_weight/model\.safetensors' -p 'h\.1\.attn\.c_proj\.weight' -p 'element 37\b' -- init_from "$tmp/ck/nan_weight"
mkck inf_weight
fx st "$good_ckpt/model.safetensors" "$tmp/ck/inf_weight/model.safetensors" value wte.weight 5:-inf
expect_fail init_from_inf_weight -p 'inf_weight/model\.safetensors' -p 'wte\.weight' -p 'element 5\b' -- init_from "$tmp/ck/inf_weight"
mkck hf_1e20
sed 's/"n_layer":[[:space:]]*2,/"n_layer": 1e20,/' "$good_ckpt/config.json" >"$tmp/ck/hf_1e20/config.json"
expect_fail init_from_config_n_layer_1e20 -p 'hf_1e20/config\.json' -p 'n_layer' -p '100000000000000000000' -- init_from "$tmp/ck/hf_1e20"
mkck hf_trail
echo '{}' >>"$tmp/ck/hf_trail/config.json"
expect_fail init_from_config_trailing_text -p 'hf_trail/config\.json' -p 'after the JSON' -- init_from "$tmp/ck/hf_trail"
mkck hf_dup
sed 's/"n_layer":[[:space:]]*2,/"n_layer": 2, "n_layer": 3,/' "$good_ckpt/config.json" >"$tmp/ck/hf_dup/config.json"
expect_fail init_from_config_duplicate_key -p 'hf_dup/config\.json' -p 'n_layer' -p 'more than once' -- init_from "$tmp/ck/hf_dup"
mkck hf_array
echo '[1, 2]' >"$tmp/ck/hf_array/config.json"
expect_fail init_from_config_not_object -p 'hf_array/config\.json' -p 'JSON object' -- init_from "$tmp/ck/hf_array"
if ls -d "$tmp/init_run"/step_* >/dev/null 2>&1; then not_ok init_from_failures_wrote_no_checkpoint "$(ls "$tmp/init_run")"; else ok init_from_failures_wrote_no_checkpoint; fi
expect_fail fresh_run_over_checkpoints -p "$run" -p "out\.resume" -- tg --config "$base" --set out.resume=false

# ---- resuming with a config that moves the data position ------------------
for kv in train.global_batch=8 model.seq_len=8 train.seed=7 data.shuffle=true; do
    expect_fail "resume_changed_${kv%%=*}" -p 'state\.json' -p "${kv%%=*}" -- tg --config "$base" --set "$kv" --set train.steps=4
done

# ---- a corrupted newest checkpoint in out.dir when resuming --------------
# A copy of the good run (steps 1 and 2) whose step 2 is damaged. Resuming
# must stop with an error naming the damaged file; it must not restart from
# scratch or from step 1 silently, and must change nothing in the dir.
mkrun() { # NAME: a copy of the good run in $tmp/resume_NAME, step 2's checksums left out (as mkck)
    rm -rf "$tmp/resume_$1" && cp -a "$tmp/run.pristine" "$tmp/resume_$1" && fx unverify "$tmp/resume_$1/step_00000002/state.json"
}
resume_in() { tg --config "$base" --set out.dir="$1"; }
export -f resume_in
mkrun trunc_model
truncate -s $((sz / 2)) "$tmp/resume_trunc_model/step_00000002/model.safetensors"
expect_fail resume_truncated_model -d "$tmp/resume_trunc_model" -p 'step_00000002/model\.safetensors' -- resume_in "$tmp/resume_trunc_model"
mkrun trunc_optim
osz=$(stat -c %s "$good_ckpt/optimizer.safetensors")
truncate -s $((osz / 2)) "$tmp/resume_trunc_optim/step_00000002/optimizer.safetensors"
expect_fail resume_truncated_optimizer -d "$tmp/resume_trunc_optim" -p 'step_00000002/optimizer\.safetensors' -- resume_in "$tmp/resume_trunc_optim"
mkrun no_optim
rm "$tmp/resume_no_optim/step_00000002/optimizer.safetensors"
expect_fail resume_missing_optimizer -d "$tmp/resume_no_optim" -p 'step_00000002/optimizer\.safetensors' -- resume_in "$tmp/resume_no_optim"
mkrun bad_state
echo '{"step": 2, "data_' >"$tmp/resume_bad_state/step_00000002/state.json"
expect_fail resume_malformed_state -d "$tmp/resume_bad_state" -p 'step_00000002/state\.json' -- resume_in "$tmp/resume_bad_state"
mkrun no_state
rm "$tmp/resume_no_state/step_00000002/state.json"
expect_fail resume_missing_state -d "$tmp/resume_no_state" -p 'step_00000002' -p 'state\.json' -- resume_in "$tmp/resume_no_state"
mkrun missing_tensor
fx st "$good_ckpt/model.safetensors" "$tmp/resume_missing_tensor/step_00000002/model.safetensors" drop wpe.weight
expect_fail resume_missing_tensor -d "$tmp/resume_missing_tensor" -p 'step_00000002/model\.safetensors' -p 'wpe\.weight' -- resume_in "$tmp/resume_missing_tensor"
# resuming with a different model shape than the checkpoint holds
mkrun wider
expect_fail resume_with_other_model_size -d "$tmp/resume_wider" -p 'step_00000002' -p 'n_embd|wte|shape' -- tg --config "$base" --set out.dir="$tmp/resume_wider" --set model.n_embd=48
# state.json numbers: whole, in range, checked before conversion; strict JSON
for case in 'step:1e10' 'step:1e19' 'step:2.9' 'data_epoch:-1' 'data_index:1e19' 'data_index:0.5' 'version:1.5'; do
    key="${case%%:*}" val="${case#*:}"
    mkrun "state_$key"
    sed -i "s/\"$key\":[[:space:]]*[0-9.e+-]*/\"$key\": $val/" "$tmp/resume_state_$key/step_00000002/state.json"
    expect_fail "resume_state_${key}_$val" -d "$tmp/resume_state_$key" -p 'step_00000002/state\.json' -p "'$key'" -- resume_in "$tmp/resume_state_$key"
done
mkrun state_dup
sed -i 's/"step":[[:space:]]*2,/"step": 2, "step": 1,/' "$tmp/resume_state_dup/step_00000002/state.json"
expect_fail resume_state_duplicate_key -d "$tmp/resume_state_dup" -p 'state\.json' -p "step" -p 'more than once' -- resume_in "$tmp/resume_state_dup"
mkrun state_trail
echo 'garbage' >>"$tmp/resume_state_trail/step_00000002/state.json"
expect_fail resume_state_trailing_text -d "$tmp/resume_state_trail" -p 'state\.json' -p 'after the JSON' -- resume_in "$tmp/resume_state_trail"
# optimizer moments: finite, and exp_avg_sq not negative
mkrun neg_v
fx st "$good_ckpt/optimizer.safetensors" "$tmp/resume_neg_v/step_00000002/optimizer.safetensors" value exp_avg_sq.h.0.mlp.c_fc.weight 11:-0.5
expect_fail resume_negative_exp_avg_sq -d "$tmp/resume_neg_v" -p 'optimizer\.safetensors' -p 'exp_avg_sq\.h\.0\.mlp\.c_fc\.weight' -p 'element 11\b' -- resume_in "$tmp/resume_neg_v"
mkrun nan_m
fx st "$good_ckpt/optimizer.safetensors" "$tmp/resume_nan_m/step_00000002/optimizer.safetensors" value exp_avg.ln_f.bias 3:nan
expect_fail resume_nan_exp_avg -d "$tmp/resume_nan_m" -p 'optimizer\.safetensors' -p 'exp_avg\.ln_f\.bias' -p 'element 3\b' -- resume_in "$tmp/resume_nan_m"
# a file where the next save goes: an error, not a silently skipped save
mkrun file_ckpt
: >"$tmp/resume_file_ckpt/step_00000003"
expect_fail save_over_a_regular_file -d "$tmp/resume_file_ckpt" -p 'step_00000003' -p 'not a checkpoint directory' -- tg --config "$base" --set out.dir="$tmp/resume_file_ckpt" --set train.steps=3
# stray names are not checkpoints: the resume still starts from step 2
mkrun stray
mkdir "$tmp/resume_stray/step_5" "$tmp/resume_stray/step_00000009x" "$tmp/resume_stray/step_00000008.tmp"
: >"$tmp/resume_stray/step_00000007"
if timeout -k 5 60 "$bin" --config "$base" --set out.dir="$tmp/resume_stray" --set train.steps=3 >"$tmp/stray.out" 2>&1 &&
    grep -q 'resumed from .*step_00000002 (step 2)' "$tmp/stray.out" && [ -d "$tmp/resume_stray/step_00000003" ]; then
    ok resume_ignores_stray_step_names
else
    not_ok resume_ignores_stray_step_names "$(oneline "$tmp/stray.out")"
fi

# ---- ./prepare -----------------------------------------------------------
P="$tmp/prep"
mkdir -p "$P/out"
printf 'In the beginning God created the heaven and the earth.\n' >"$P/good.txt"
if ! timeout -k 5 60 "$prep" --input "$P/good.txt" --out "$P/out/x" --val-tokens 4 --vocab-dir assets/vocab >"$P/good.out" 2>&1; then
    not_ok prepare_prerequisites "prepare of a good text failed (assets/vocab missing? run scripts/setup.sh): $(oneline "$P/good.out")"
else
    ok prepare_prerequisites
fi
pp() { "$prep" --vocab-dir assets/vocab --out "$P/out/x" --val-tokens 4 "$@"; }
export P
export -f pp
expect_fail prepare_missing_input -d "$P/out" -p "$P/missing\\.txt" -- pp --input "$P/missing.txt"
expect_fail prepare_out_folder_missing -p "x\.lock: cannot open the lock file: the folder $P/nodir does not exist" -- "$prep" --vocab-dir assets/vocab --input "$P/good.txt" --out "$P/nodir/x"
expect_fail prepare_second_input_missing -d "$P/out" -p "$P/missing\\.txt" -- pp --input "$P/good.txt" --input "$P/missing.txt"
printf 'hello world\xff and more text\n' >"$P/bad_ff.txt"  # 0xff at byte 11
expect_fail prepare_invalid_utf8 -d "$P/out" -p 'bad_ff\.txt' -p 'offset 11\b' -- pp --input "$P/bad_ff.txt"
printf 'abc\xc0\xafdef\n' >"$P/overlong.txt"  # overlong "/" at byte 3
expect_fail prepare_overlong_utf8 -d "$P/out" -p 'overlong\.txt' -p 'offset 3\b' -- pp --input "$P/overlong.txt"
printf 'emoji at the end \xf0\x9f\x98' >"$P/cut.txt"  # cut 4-byte sequence at byte 17
expect_fail prepare_truncated_utf8_at_eof -d "$P/out" -p 'cut\.txt' -p 'offset 17\b' -- pp --input "$P/cut.txt"
printf 'surrogate \xed\xa0\x80 here\n' >"$P/surrogate.txt"  # UTF-16 surrogate at byte 10
expect_fail prepare_surrogate_utf8 -d "$P/out" -p 'surrogate\.txt' -p 'offset 10\b' -- pp --input "$P/surrogate.txt"
expect_fail prepare_unknown_flag -d "$P/out" -p '--frobnicate' -- pp --input "$P/good.txt" --frobnicate
expect_fail prepare_missing_out -d "$P/out" -p '--out' -- "$prep" --input "$P/good.txt"
expect_fail prepare_bad_number -d "$P/out" -p '--val-tokens' -- pp --input "$P/good.txt" --val-tokens lots
expect_fail prepare_missing_vocab -d "$P/out" -p "$tmp/no_vocab" -- "$prep" --input "$P/good.txt" --out "$P/out/x" --vocab-dir "$tmp/no_vocab"
expect_fail prepare_decode_bad_shard -d "$P/out" -p 'badhdr1_000000\.bin' -- "$prep" --decode "$D/badhdr1_000000.bin" --vocab-dir assets/vocab

mkdir -p "$P/cwd"
vocab_abs="$PWD/assets/vocab"
expect_fail prepare_empty_out -d "$P/cwd" -p '--out' -- bash -c 'cd "$1" && "$2" --input "$3" --out "" --vocab-dir "$4"' _ "$P/cwd" "$(realpath "$prep")" "$P/good.txt" "$vocab_abs"
expect_fail prepare_out_is_a_directory_path -d "$P/out" -p '--out' -- pp --input "$P/good.txt" --out "$P/out/"
expect_fail prepare_input_directory -d "$P/out" -p "$P\\b" -p 'directory' -- pp --input "$P"
expect_fail prepare_count_with_space -d "$P/out" -p '--shard-tokens' -- pp --input "$P/good.txt" --shard-tokens ' 7'
# a text too short for its --val-tokens: all of it goes to the val shard, a warning (exit 0) that says
# which option to lower
mkdir -p "$P/allval"
if timeout -k 5 60 "$prep" --input "$P/good.txt" --out "$P/allval/x" --val-tokens 1000 --vocab-dir assets/vocab >"$P/allval.out" 2>&1 &&
    grep -q 'warning: all [0-9]* tokens went to the val shard (--val-tokens 1000); .*give a smaller --val-tokens' "$P/allval.out"; then
    ok prepare_all_to_val_names_val_tokens
else not_ok prepare_all_to_val_names_val_tokens "$(oneline "$P/allval.out")"; fi

exit $failed
