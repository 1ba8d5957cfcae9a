# Shared by the tests/t_*.sh scripts: the repo root, a scratch directory,
# the binaries, and the "ok NAME" / "not ok NAME - reason" lines that
# tests/run.sh counts. Usage: source "$(dirname "$0")/lib.sh" SCRATCH_NAME
set -u
root="${TG_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cd "$root" || exit 1
tmp="${TG_TMP:-$(mktemp -d)}/$1"
rm -rf "$tmp" && mkdir -p "$tmp"
bin="${TRAIN_GPT:-./train_gpt}"
# Debian's python3 has numpy and torch here; elsewhere (a GPU machine with
# PyTorch in a virtual environment) the python3 on PATH that has numpy.
py="${TG_PYTHON:-/usr/bin/python3}"
if ! "$py" -c 'import numpy' 2>/dev/null && python3 -c 'import numpy' 2>/dev/null; then py=python3; fi
# Tiny models: OpenMP threads that spin while waiting only slow things down
# when the machine is shared (results do not depend on it).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
failed=0

ok() { echo "ok $1"; }
not_ok() { echo "not ok $1 - $2"; failed=1; }

# random_shards DIR VOCAB SEED TRAIN_TOKENS VAL_TOKENS: one train and one val
# shard in llm.c's format of uniform random tokens below VOCAB.
random_shards() {
    "$py" - "$@" <<'PY'
import numpy as np, sys, os
d, vocab, seed, n_train, n_val = sys.argv[1], *map(int, sys.argv[2:6])
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(seed)
for name, n in (("train_000000", n_train), ("val_000000", n_val)):
    h = np.zeros(256, np.int32); h[:3] = (20240520, 1, n)
    with open(f"{d}/{name}.bin", "wb") as f:
        f.write(h.tobytes()); f.write(rng.integers(0, vocab, n, dtype=np.uint16).tobytes())
PY
}

# small_run_config FILE STEPS: a 1-layer, 16-wide model on $tmp/data's
# random shards (vocabulary 64, tokens 8), saving every 2 steps, with no
# evaluation and no samples: for the suites about the files around a run.
small_run_config() {
    cat >"$1" <<JSON
{"model": {"n_layer": 1, "n_head": 2, "n_embd": 16, "vocab_size": 64, "seq_len": 8},
 "train": {"micro_batch": 2, "global_batch": 2, "steps": $2, "lr": 1e-2, "warmup": 1},
 "data": {"train": "$tmp/data/train_*.bin", "val": ""},
 "out": {"eval_batches": 0, "sample_tokens": 0, "save_every": 2, "log_every": 100}}
JSON
}

# run_dir_listing DIR: every entry below DIR and every file's SHA-256, but
# the lock file, which each run rewrites with its pid and host: equal before
# and after a run that must leave out.dir as it was.
run_dir_listing() {
    (cd "$1" && find . -mindepth 1 ! -name .train_gpt.lock | sort &&
        find . -type f ! -name .train_gpt.lock -print0 | sort -z | xargs -0 -r sha256sum)
}

# sweep_fixture_start DIR: a sweep's results folder for scripts/scaling/scaling.py
# to tabulate: the tiny model's config.json and an empty manifest.tsv, into
# which a suite writes its own runs' logs and rows.
sweep_fixture_start() {
    mkdir -p "$1"
    echo '{"model": {"n_layer": 2, "n_head": 4, "n_embd": 64, "vocab_size": 512, "vocab_multiple": 128, "seq_len": 64}}' >"$1/cfg.json"
    : >"$1/manifest.tsv"
}

# sweep_fixture_table DIR KIND: scaling.py's table of DIR's manifest (peak 1
# TFLOP/s, PNG charts) into DIR: table.tsv, table.md, out.txt.
sweep_fixture_table() {
    printf 'peak_tflops\t1\nterminal\tpng\n' >"$1/info.tsv"
    : >"$1/help.txt"
    "$py" scripts/scaling/scaling.py table --kind "$2" --manifest "$1/manifest.tsv" --info "$1/info.tsv" --out "$1" \
        --help-text "$1/help.txt" >"$1/out.txt" 2>&1
}

# python_without_numpy DIR: a python3 stand-in in DIR whose numpy cannot be imported (as on a lent
# GPU machine's /usr/bin/python3); prints its path
python_without_numpy() {
    mkdir -p "$1/mods" || return 1
    printf 'raise ModuleNotFoundError("No module named numpy (stand-in)")\n' >"$1/mods/numpy.py"
    printf '#!/bin/sh\nPYTHONPATH=%q exec /usr/bin/python3 "$@"\n' "$1/mods" >"$1/python3" && chmod +x "$1/python3" &&
        echo "$1/python3"
}

# The communicators' shared-memory segments (/dev/shm/train_gpt_*), by name:
# shm_list now; shm_new SNAPSHOT, those not in a shm_list taken earlier.
shm_list() { ls /dev/shm 2>/dev/null | grep '^train_gpt_' | sort; }
shm_new() { comm -13 <(echo "$1") <(shm_list) | tr '\n' ' '; }
# check_shm NAME SNAPSHOT: ok NAME_no_segment_left when no segment is left
# that was not there at SNAPSHOT. Another job on this machine may be between
# creating and unlinking one of its own (milliseconds): only what stays counts.
check_shm() {
    local left
    left=$(shm_new "$2")
    [ -n "$left" ] && sleep 1 && left=$(shm_new "$2")
    if [ -z "$left" ]; then ok "$1_no_segment_left"; else not_ok "$1_no_segment_left" "left in /dev/shm: $left"; fi
}

# kernel_checks NAME [ENV=...] -- ARGS: the emulation's kernel checks
# (build/emu/test_cuda_kernels_emu ARGS, output in $tmp/NAME.out); their
# "ok"/"not ok" lines become ours, prefixed "NAME: ", and an exit that is not
# 0 with no "not ok" line is one.
kernel_checks() {
    local name="$1"; shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" build/emu/test_cuda_kernels_emu "$@" >"$tmp/$name.out" 2>&1
    local rc=$?
    sed -nE "s|^ok +(.*)|ok ${name}: \1|p; s|^not ok +(.*)|not ok ${name}: \1 (see $tmp/$name.out)|p" "$tmp/$name.out"
    grep -q '^not ok' "$tmp/$name.out" && failed=1
    if [ $rc -ne 0 ] && ! grep -q '^not ok' "$tmp/$name.out"; then not_ok "$name" "exit $rc: $(tail -n 3 "$tmp/$name.out" | tr '\n' ' ')"; fi
}
