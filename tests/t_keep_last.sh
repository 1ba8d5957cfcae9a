#!/usr/bin/env bash
# out.keep_last and out.keep_every: after each save the older checkpoints
# beyond the newest keep_last go, except multiples of keep_every; a
# checkpoint holding a file of the user's stays (with a warning naming it),
# a step_XXXXXXXX link is neither followed nor removed, the run resumes from
# what is left, a removal a crash cut short is finished, and under TP 2 only
# rank 0 removes (no error from rank 1).
# tier: check (make check: the quick tier, tests/run.sh --check)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" keep_last
export OMP_NUM_THREADS=1
if ! "$py" -c 'import numpy' 2>/dev/null; then not_ok prerequisites "python3-numpy is missing"; exit 1; fi
random_shards "$tmp/data" 64 4 6000 400
cfg="$tmp/cfg.json"
small_run_config "$cfg" 10
tg() { timeout -k 5 120 "$bin" --config "$cfg" "$@"; }
left() { (cd "$1" && ls -d step_* 2>/dev/null | tr '\n' ' '); }

# Saves at 2, 4, 6, 8 and 10 (final), keeping the newest 2 and multiples of 4:
# 2 goes after the save of 6, 6 after the save of 10.
tg --set out.dir="$tmp/a" --set out.keep_last=2 --set out.keep_every=4 >"$tmp/a.out" 2>&1
got=$(left "$tmp/a")
removed=$(sed -nE 's|^removed .*/(step_[0-9]+) \(out.keep_last = 2\)$|\1|p' "$tmp/a.out" | tr '\n' ' ')
if [ "$got" = "step_00000004 step_00000008 step_00000010 " ] && [ "$removed" = "step_00000002 step_00000006 " ] &&
    [ ! -e "$tmp/a/step_00000002.tmp" ]; then ok "keep_last_and_keep_every ($got)"
else not_ok keep_last_and_keep_every "left '$got', removed '$removed': $(tail -n 3 "$tmp/a.out" | tr '\n' ' ')"; fi

# keep_last 0 (the default) keeps every checkpoint.
tg --set out.dir="$tmp/all" --set train.steps=6 >"$tmp/all.out" 2>&1
got=$(left "$tmp/all")
if [ "$got" = "step_00000002 step_00000004 step_00000006 " ] && ! grep -q '^removed' "$tmp/all.out"; then
    ok keep_last_0_keeps_all
else not_ok keep_last_0_keeps_all "left '$got'"; fi

# A user's file in step 2, and a link named like a checkpoint that points at
# a checkpoint outside out.dir: resumed to step 8 with keep_last 1, only 8
# and step 2 (the user's file, named in a warning) remain; the link and its
# target are untouched; the resumed run went on from step 4. Its two saves
# (6 and 8) both prune, and the warning about step 2 comes once.
mkdir -p "$tmp/b"
tg --set out.dir="$tmp/b" --set train.steps=4 >"$tmp/b1.out" 2>&1
echo "mine" >"$tmp/b/step_00000002/notes.txt"
cp -r "$tmp/b/step_00000002" "$tmp/outside" && rm "$tmp/outside/notes.txt"
ln -s "$tmp/outside" "$tmp/b/step_00000001"
tg --set out.dir="$tmp/b" --set train.steps=8 --set out.keep_last=1 >"$tmp/b2.out" 2>&1
rc=$?
got=$(left "$tmp/b")
if [ "$rc" = 0 ] && [ "$got" = "step_00000001 step_00000002 step_00000008 " ] && [ -L "$tmp/b/step_00000001" ] &&
    [ -f "$tmp/outside/model.safetensors" ] && [ "$(cat "$tmp/b/step_00000002/notes.txt")" = mine ] &&
    [ -f "$tmp/b/step_00000002/model.safetensors" ] &&
    grep -q "step_00000002: kept (out.keep_last): it holds 'notes.txt', which train_gpt did not write" "$tmp/b2.out" &&
    grep -q "resumed from $tmp/b/step_00000004" "$tmp/b2.out" && ! grep -q "step_00000001" "$tmp/b2.out"; then
    ok user_file_and_link_kept
else not_ok user_file_and_link_kept "rc $rc, left '$got': $(grep -v '^step' "$tmp/b2.out" | head -n 6 | tr '\n' ' ')"; fi
warned=$(grep -c "step_00000002: kept (out.keep_last)" "$tmp/b2.out")
if [ "$(grep -c '^saved ' "$tmp/b2.out")" = 2 ] && [ "$warned" = 1 ]; then ok kept_checkpoint_named_once
else not_ok kept_checkpoint_named_once "$warned warning(s) about step 2 over $(grep -c '^saved ' "$tmp/b2.out") save(s)"; fi

# A removal a crash cut short (a checkpoint renamed STEP.removing, some of its
# files gone) is finished at the next save; one holding a user's file stays.
mkdir -p "$tmp/c"
cp -r "$tmp/all/step_00000002" "$tmp/c/step_00000001.removing" && rm "$tmp/c/step_00000001.removing/model.safetensors"
cp -r "$tmp/all/step_00000002" "$tmp/c/step_00000003.removing" && echo x >"$tmp/c/step_00000003.removing/mine.txt"
tg --set out.dir="$tmp/c" --set train.steps=2 --set out.keep_last=1 >"$tmp/c.out" 2>&1
rc=$?
if [ "$rc" = 0 ] && [ "$(ls "$tmp/c" | tr '\n' ' ')" = "log.jsonl step_00000002 step_00000003.removing " ] &&
    grep -q "step_00000003.removing: kept (out.keep_last): it holds 'mine.txt'" "$tmp/c.out"; then
    ok interrupted_removal_finished
else not_ok interrupted_removal_finished "rc $rc: $(ls "$tmp/c" | tr '\n' ' '): $(grep -v '^step' "$tmp/c.out" | tail -n 3 | tr '\n' ' ')"; fi

# TP 2: rank 0 removes; the job succeeds and rank 1 reports nothing.
timeout -k 5 120 scripts/launch.sh -n 2 --log-dir "$tmp/tp2_logs" -- "$bin" --config "$cfg" --set parallel.tp=2 \
    --set out.dir="$tmp/tp2" --set train.steps=6 --set out.keep_last=1 >"$tmp/tp2.out" 2>&1
rc=$?
got=$(left "$tmp/tp2")
if [ "$rc" = 0 ] && [ "$got" = "step_00000006 " ] && [ "$(grep -c '^removed' "$tmp/tp2.out")" = 2 ] &&
    ! grep -qi "warning\|error" "$tmp/tp2_logs"/* "$tmp/tp2/logs"/* 2>/dev/null; then ok tp2_rank0_removes
else not_ok tp2_rank0_removes "rc $rc, left '$got': $(tail -n 3 "$tmp/tp2.out" | tr '\n' ' ')"; fi

# A negative value is refused before anything is written.
tg --set out.dir="$tmp/bad" --set out.keep_last=-1 >"$tmp/bad.out" 2>&1
if [ $? -ne 0 ] && grep -q "out.keep_last" "$tmp/bad.out" && [ ! -e "$tmp/bad" ]; then ok bad_keep_last_refused
else not_ok bad_keep_last_refused "$(head -c 300 "$tmp/bad.out")"; fi
exit "$failed"
