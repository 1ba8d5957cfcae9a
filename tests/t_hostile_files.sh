#!/usr/bin/env bash
# Hostile files and concurrent runs (issue 33, items 1-3): what train_gpt and
# prepare write is created new under a unique temporary name, so a link
# planted at a fixed name (out.dir/step_X.tmp, FILE.tmp of --export-llmc,
# log.jsonl.tmp) is never followed and a user's own FILE.tmp is never
# touched; leftovers are removed only when they hold nothing but checkpoint
# files. out.dir (training) and prepare's --out prefix are locked for the
# life of the process: a second run is refused at once, naming the holder's
# pid and host, and the first completes unharmed.
# tier: check (make check: the quick tier, tests/run.sh --check)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" hostile_files
export OMP_NUM_THREADS=1
prep="${PREPARE:-./prepare}"
if ! "$py" -c 'import numpy' 2>/dev/null; then not_ok prerequisites "python3-numpy is missing"; exit 1; fi
random_shards "$tmp/data" 64 4 6000 400
cfg="$tmp/cfg.json"
small_run_config "$cfg" 4
tg() { timeout -k 5 120 "$bin" --config "$cfg" "$@"; }
oneline() { tail -n "${2:-3}" "$1" | tr '\n' ' ' | cut -c1-400; }
# A folder of the user's with files in it, and its listing with checksums.
victim_dir() { mkdir -p "$1" && echo one >"$1/a.txt" && echo two >"$1/b.bin"; }
sums() { (cd "$1" && sha256sum -- * 2>/dev/null); }
host=$(hostname)

# ---- 1a. a link planted at out.dir/step_00000002.tmp --------------------
# The run goes on: it saves under a new name of its own, and leaves the link
# (with a warning naming it) and the folder it points at as they were.
victim_dir "$tmp/keep"
before=$(sums "$tmp/keep")
mkdir -p "$tmp/planted"
ln -s "$tmp/keep" "$tmp/planted/step_00000002.tmp"
tg --set out.dir="$tmp/planted" >"$tmp/planted.out" 2>&1
rc=$?
if [ "$(sums "$tmp/keep")" = "$before" ] && [ -L "$tmp/planted/step_00000002.tmp" ] && [ "$rc" = 0 ] &&
    [ -f "$tmp/planted/step_00000002/model.safetensors" ] && [ -f "$tmp/planted/step_00000004/state.json" ] &&
    grep -q "step_00000002.tmp: not removed: it is a symbolic link" "$tmp/planted.out"; then
    ok planted_tmp_link_not_followed
else
    not_ok planted_tmp_link_not_followed "rc $rc, the folder holds [$(ls "$tmp/keep" | tr '\n' ' ')]: $(oneline "$tmp/planted.out")"
fi

# ---- 1b. --export-llmc FILE: a link at FILE.tmp, a user's FILE.tmp --------
victim_dir "$tmp/exp_victim"
before=$(sums "$tmp/exp_victim")
ln -s "$tmp/exp_victim/b.bin" "$tmp/export.bin.tmp"
tg --export-llmc "$tmp/export.bin" >"$tmp/export.out" 2>&1
rc=$?
if [ "$rc" = 0 ] && [ "$(sums "$tmp/exp_victim")" = "$before" ] && [ -L "$tmp/export.bin.tmp" ] &&
    [ "$(head -c 4 "$tmp/export.bin" | od -An -tu4 | tr -d ' ')" = 20240326 ]; then
    ok export_tmp_link_not_followed
else
    not_ok export_tmp_link_not_followed "rc $rc, target $(cat "$tmp/exp_victim/b.bin" 2>&1 | head -c 40): $(oneline "$tmp/export.out")"
fi
echo "the user's own file" >"$tmp/victim.bin.tmp"
tg --export-llmc "$tmp/victim.bin" >"$tmp/victim.out" 2>&1
rc=$?
if [ "$rc" = 0 ] && [ "$(cat "$tmp/victim.bin.tmp" 2>&1)" = "the user's own file" ] && [ -s "$tmp/victim.bin" ] &&
    [ -z "$(find "$tmp" -maxdepth 1 -name 'victim.bin.tmp.*')" ]; then
    ok export_users_tmp_file_untouched
else
    not_ok export_users_tmp_file_untouched "rc $rc, victim.bin.tmp: $(head -c 40 "$tmp/victim.bin.tmp" 2>&1 | tr -d '\0'): $(oneline "$tmp/victim.out")"
fi

# ---- 1c. a link at log.jsonl.tmp when the resume rewrites log.jsonl -------
# Steps 1-4 logged; step_00000004 removed, so the resume from step 2 drops
# the lines of steps 3 and 4 from log.jsonl (rewritten beside it).
victim_dir "$tmp/log_victim"
before=$(sums "$tmp/log_victim")
tg --set out.dir="$tmp/relog" --set out.log_every=1 >"$tmp/relog1.out" 2>&1
cp "$tmp/relog/log.jsonl" "$tmp/relog_first.jsonl"
rm -rf "$tmp/relog/step_00000004"
ln -s "$tmp/log_victim/a.txt" "$tmp/relog/log.jsonl.tmp"
tg --set out.dir="$tmp/relog" --set out.log_every=1 >"$tmp/relog2.out" 2>&1
rc=$?
# The log now: the first run's lines up to step 2, then as many lines of
# steps 3 and 4 as the first run wrote (not twice as many).
kept=$(grep -c '"step":[012],' "$tmp/relog_first.jsonl")
counts() { echo "$(grep -c '"step":3,' "$1" 2>/dev/null) $(grep -c '"step":4,' "$1" 2>/dev/null)"; }
steps=$(counts "$tmp/relog/log.jsonl")
if [ "$rc" = 0 ] && [ "$(sums "$tmp/log_victim")" = "$before" ] && [ -L "$tmp/relog/log.jsonl.tmp" ] &&
    grep -q "resumed from $tmp/relog/step_00000002" "$tmp/relog2.out" && [ "$steps" = "$(counts "$tmp/relog_first.jsonl")" ] &&
    cmp -s <(head -n "$kept" "$tmp/relog_first.jsonl") <(head -n "$kept" "$tmp/relog/log.jsonl"); then
    ok log_rewrite_tmp_link_not_followed
else
    not_ok log_rewrite_tmp_link_not_followed "rc $rc, a.txt: $(head -c 60 "$tmp/log_victim/a.txt" 2>&1 | tr '\n' ' '), lines of steps 3 and 4: $steps: $(oneline "$tmp/relog2.out")"
fi

# ---- 2. two prepare runs into one --out prefix ---------------------------
# The first reads JSON Lines (a document a line) from a FIFO: given the first
# half, it has begun its val shard when the second starts; then it gets the
# rest, and must write exactly the shards a lone run writes.
"$py" - assets/kjv.txt "$tmp/docs.jsonl" <<'PY'
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()[:6000]
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for i in range(0, len(lines), 50):
        f.write(json.dumps({"text": "\n".join(lines[i:i + 50])}) + "\n")
PY
half=$(($(wc -l <"$tmp/docs.jsonl") / 2))
popts=(--jsonl-field text --val-tokens 60000 --shard-tokens 60000 --threads 1 --batch-docs 1)
mkdir -p "$tmp/prep_ref" "$tmp/prep"
"$prep" --input "$tmp/docs.jsonl" --out "$tmp/prep_ref/p" "${popts[@]}" >"$tmp/prep_ref.out" 2>&1
mkfifo "$tmp/fifo"
"$prep" --input - --out "$tmp/prep/p" "${popts[@]}" <"$tmp/fifo" >"$tmp/prep1.out" 2>&1 &
p1=$!
exec 3>"$tmp/fifo"
head -n "$half" "$tmp/docs.jsonl" >&3
for _ in $(seq 100); do [ -n "$(find "$tmp/prep" -name 'p_val_000000.bin.tmp*')" ] && break; sleep 0.05; done
t0=$(date +%s%N)
"$prep" --input "$tmp/docs.jsonl" --out "$tmp/prep/p" "${popts[@]}" >"$tmp/prep2.out" 2>&1
rc2=$?
ms=$((($(date +%s%N) - t0) / 1000000))
tail -n +"$((half + 1))" "$tmp/docs.jsonl" >&3
exec 3>&-
wait "$p1"
rc1=$?
if [ "$rc2" != 0 ] && [ "$ms" -lt 5000 ] &&
    grep -qF "p.lock: locked by pid $p1 on host $host, which is still running" "$tmp/prep2.out"; then
    ok prepare_second_run_refused
else
    not_ok prepare_second_run_refused "rc $rc2 after $ms ms: $(oneline "$tmp/prep2.out")"
fi
diffs=$(cd "$tmp/prep_ref" && for f in p_*.bin; do cmp -s "$f" "../prep/$f" || echo "$f"; done)
n_ref=$(ls "$tmp/prep_ref"/p_*.bin | wc -l)
n_got=$(ls "$tmp/prep"/p_*.bin 2>/dev/null | wc -l)
if [ "$rc1" = 0 ] && [ -z "$diffs" ] && [ "$n_ref" = "$n_got" ] && [ "$n_ref" -ge 3 ] &&
    [ -z "$(find "$tmp/prep" -name '*.tmp*')" ]; then
    ok prepare_first_run_shards_exact
else
    not_ok prepare_first_run_shards_exact "rc $rc1, $n_got shards (lone run: $n_ref), differing: ${diffs//$'\n'/ }: $(oneline "$tmp/prep1.out")"
fi

# ---- 3. two train_gpt runs into one out.dir ------------------------------
# Run 1 (400 steps) is stopped (SIGSTOP) once it has saved step 2; run 2 into
# the same out.dir must be refused at once, naming run 1's pid and host; run
# 1, continued, must end exactly as a lone run does. (60 steps took 0.1 s:
# under load run 1 could end before the test stopped it.)
long=(--set train.steps=400 --set out.save_every=2)
tg "${long[@]}" --set out.dir="$tmp/lone" >"$tmp/lone.out" 2>&1
"$bin" --config "$cfg" "${long[@]}" --set out.dir="$tmp/shared" >"$tmp/run1.out" 2>&1 &
r1=$!
for _ in $(seq 600); do [ -d "$tmp/shared/step_00000002" ] && break; sleep 0.05; done
kill -STOP "$r1"
t0=$(date +%s%N)
tg "${long[@]}" --set out.dir="$tmp/shared" >"$tmp/run2.out" 2>&1
rc2=$?
ms=$((($(date +%s%N) - t0) / 1000000))
kill -CONT "$r1"
wait "$r1"
rc1=$?
if [ "$rc2" != 0 ] && [ "$ms" -lt 5000 ] && ! grep -q "resumed from" "$tmp/run2.out" &&
    grep -qF ".train_gpt.lock: locked by pid $r1 on host $host, which is still running" "$tmp/run2.out"; then
    ok train_second_run_refused
else
    not_ok train_second_run_refused "rc $rc2 after $ms ms: $(oneline "$tmp/run2.out")"
fi
if [ "$rc1" = 0 ] && cmp -s "$tmp/lone/step_00000400/model.safetensors" "$tmp/shared/step_00000400/model.safetensors" &&
    cmp -s "$tmp/lone/step_00000400/optimizer.safetensors" "$tmp/shared/step_00000400/optimizer.safetensors" &&
    [ "$(sed "s|$tmp/lone|DIR|" "$tmp/lone/step_00000400/state.json")" = \
        "$(sed "s|$tmp/shared|DIR|" "$tmp/shared/step_00000400/state.json" 2>&1)" ]; then
    ok train_first_run_checkpoint_consistent
else
    not_ok train_first_run_checkpoint_consistent "rc $rc1, step 400 differs from a lone run's: $(oneline "$tmp/run1.out")"
fi

# ---- the lock outlives no process -----------------------------------------
# After run 1's exit its lock file (naming it) stays, unlocked: a resume
# takes it and records itself.
tg --set train.steps=402 --set out.save_every=2 --set out.dir="$tmp/shared" >"$tmp/run3.out" 2>&1
rc=$?
if [ "$rc" = 0 ] && grep -q "resumed from $tmp/shared/step_00000400" "$tmp/run3.out" &&
    [ -d "$tmp/shared/step_00000402" ] && grep -q "^[0-9]* $host\$" "$tmp/shared/.train_gpt.lock"; then
    ok lock_released_at_exit
else
    not_ok lock_released_at_exit "rc $rc, lock file: $(cat "$tmp/shared/.train_gpt.lock" 2>&1): $(oneline "$tmp/run3.out")"
fi

exit $failed
