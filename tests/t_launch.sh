#!/usr/bin/env bash
# shellcheck disable=SC2016,SC2034,SC2317
# (checks are strings evaluated later, single-quoted on purpose)
# Tests of scripts/launch.sh with small bash ranks (no trainer needed):
# the rank environment (single node, multi-node arithmetic, -n 1), where
# output goes (rank 0 on the terminal and in rank_0.log, the others in their
# logs only), exit statuses, a failing rank (exit 3), a rank killed by
# SIGKILL, a rank that ignores SIGTERM, SIGTERM/SIGINT to the launcher (also
# as a script's background job, where SIGINT comes ignored), and
# bad arguments. After every failure path, no rank (nor anything a rank
# started) may still be running: ranks write their pids to files and the test
# checks each one is gone.
# Prints "ok NAME" or "not ok NAME - reason" per check; exits non-zero if any
# check failed. Run from the repo root by tests/run.sh (env TG_ROOT, TG_TMP).
# tier: check (make check: the quick tier, tests/run.sh --check)
# cost: 10 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" launch
launch="${TG_LAUNCH:-$root/scripts/launch.sh}"   # TG_LAUNCH: test another copy

# check NAME REASON CONDITION: both are strings to evaluate (single-quote
# them); the reason only when the condition fails, so it sees what the
# condition left behind.
check() {
    local name="$1" why="$2" cond="$3"
    if eval "$cond"; then ok "$name"; else not_ok "$name" "$(eval "echo \"$why\"")"; fi
}
has() { grep -qF -- "$2" "$1"; }       # FILE STRING
lacks() { ! grep -qF -- "$2" "$1"; }   # FILE STRING
oneline() { tr '\n' ' ' <"$1" 2>/dev/null | cut -c1-300; }

# run CASE [launch args...]: runs the launcher in $tmp/CASE with D=$tmp/CASE
# exported for the ranks; sets rc and ms (elapsed milliseconds); stdout and
# stderr in $tmp/CASE/out and $tmp/CASE/err.
run() {
    local case="$1"; shift
    D="$tmp/$case"
    mkdir -p "$D"
    local t0=${EPOCHREALTIME//[!0-9]/}
    (cd "$D" && D="$D" timeout -k 5 15 "$launch" "$@" >"$D/out" 2>"$D/err" </dev/null)
    rc=$?
    ms=$(((${EPOCHREALTIME//[!0-9]/} - t0) / 1000))
}
# alive PID: the process exists and is not a zombie
alive() {
    local st
    st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [ -n "$st" ] && [[ "$st" != Z* ]]
}
# all_gone DIR: every pid in DIR/pid_* has ended (waits up to 2 s for the
# kernel to finish delivering the signals); prints the survivors otherwise
all_gone() {
    local f p left i
    for ((i = 0; i < 40; i++)); do
        left=""
        for f in "$1"/pid_*; do
            [ -e "$f" ] || continue
            p=$(cat "$f")
            alive "$p" && left="$left ${f##*/}=$p"
        done
        [ -z "$left" ] && return 0
        sleep 0.05
    done
    echo "still running:$left" >"$1/survivors"
    for f in "$1"/pid_*; do kill -KILL "$(cat "$f")" 2>/dev/null; done   # do not leak them
    return 1
}
npids() { find "$1" -maxdepth 1 -name 'pid_*' | wc -l; }

# Rank snippets. SLEEPER writes its pid and that of a child it starts (so the
# whole process group must be stopped), then waits. WAIT_FOR_PEERS waits
# (at most 5 s) until the sleepers of the other ranks have written theirs.
SLEEPER='echo $$ >"$D/pid_r$RANK"; sleep 300 & echo $! >"$D/pid_c$RANK"; wait'
WAIT_FOR_PEERS='for i in $(seq 100); do [ $(ls "$D" | grep -c "^pid_") -ge $(((WORLD_SIZE - 1) * 2)) ] && break; sleep 0.05; done'

# ---- help ------------------------------------------------------------------------
run help --help
miss=""
for w in -n --nnodes --node-rank --master --log-dir --grace RANK WORLD_SIZE LOCAL_RANK \
         LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT rank_0.log SIGTERM SIGKILL; do
    has "$D/out" "$w" || miss="$miss $w"
done
check help 'exit $rc, usage lacks:$miss' '[ "$rc" = 0 ] && [ -z "$miss" ]'

# ---- environment -------------------------------------------------------------------
ENV_LINE='echo "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT" >"$D/env_$RANK"'
run env3 -n 3 --log-dir logs -- bash -c "$ENV_LINE"
port=$(cut -d' ' -f6 "$D/env_0" 2>/dev/null)
bad=""
for r in 0 1 2; do
    [ "$(cat "$D/env_$r" 2>/dev/null)" = "$r 3 $r 3 127.0.0.1 $port" ] || bad="$bad [rank $r: $(cat "$D/env_$r" 2>/dev/null)]"
done
[[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -ge 1024 ] && [ "$port" -le 65535 ] || bad="$bad [port '$port']"
check env_single_node 'rc $rc;$bad' '[ "$rc" = 0 ] && [ -z "$bad" ]'

run env2x2 -n 2 --nnodes 2 --node-rank 1 --master node0.example:29411 --log-dir logs -- bash -c "$ENV_LINE"
bad=""
for lr in 0 1; do
    r=$((2 + lr))
    [ "$(cat "$D/env_$r" 2>/dev/null)" = "$r 4 $lr 2 node0.example 29411" ] || bad="$bad [rank $r: $(cat "$D/env_$r" 2>/dev/null)]"
done
ls "$D"/env_0 "$D"/env_1 >/dev/null 2>&1 && bad="$bad [ranks 0/1 ran on node 1]"
[ -f "$D/logs/rank_2.log" ] && [ -f "$D/logs/rank_3.log" ] || bad="$bad [no logs/rank_2.log, rank_3.log]"
check env_multi_node 'rc $rc;$bad' '[ "$rc" = 0 ] && [ -z "$bad" ]'

run env1 -n 1 --log-dir logs -- bash -c "$ENV_LINE"
got=$(cat "$D/env_0" 2>/dev/null)
check env_n1 "rc \$rc, env '\$got'" '[ "$rc" = 0 ] && [[ "$got" =~ ^0\ 1\ 0\ 1\ 127\.0\.0\.1\ [0-9]+$ ]]'

run exit1 -n 1 --log-dir logs -- bash -c 'exit 5'
check n1_exit_status 'rc $rc, want 5' '[ "$rc" = 5 ]'

# ---- output ------------------------------------------------------------------------
run out3 -n 3 --log-dir logs -- bash -c 'echo "out-from-$RANK"; echo "err-from-$RANK" >&2'
check success_exit_0 'rc $rc: $(oneline "$D/err")' '[ "$rc" = 0 ]'
check rank0_on_terminal "stdout '\$(oneline \$D/out)' stderr '\$(oneline \$D/err)'" \
    'has "$D/out" out-from-0 && has "$D/err" err-from-0 && lacks "$D/out" err-from-0 && lacks "$D/err" out-from-0'
check others_not_on_terminal "stdout '\$(oneline \$D/out)' stderr '\$(oneline \$D/err)'" \
    'lacks "$D/out" -from-1 && lacks "$D/out" -from-2 && lacks "$D/err" -from-1 && lacks "$D/err" -from-2'
check others_in_log_files "rank_1.log '\$(oneline \$D/logs/rank_1.log)' rank_2.log '\$(oneline \$D/logs/rank_2.log)'" \
    'for r in 1 2; do has "$D/logs/rank_$r.log" "out-from-$r" && has "$D/logs/rank_$r.log" "err-from-$r" &&
         lacks "$D/logs/rank_$r.log" from-0 || false; done'
check rank0_log_file "rank_0.log '\$(oneline \$D/logs/rank_0.log)'" \
    'has "$D/logs/rank_0.log" out-from-0 && has "$D/logs/rank_0.log" err-from-0'
check names_log_dir 'stderr: $(oneline "$D/err")' 'has "$D/err" "logs/rank_"'

run deflog -n 2 -- bash -c 'echo "out-from-$RANK"'
logf=$(find "$D/launch_logs" -name rank_1.log 2>/dev/null | head -n 1)
check default_log_dir 'rc $rc, log "$logf"; stderr: $(oneline "$D/err")' \
    '[ "$rc" = 0 ] && [ -n "$logf" ] && has "$logf" out-from-1 && has "$D/err" "launch_logs/"'

# ---- a failing rank ------------------------------------------------------------------
FAIL3="if [ \$RANK = 2 ]; then $WAIT_FOR_PEERS; for i in \$(seq 30); do echo tail-\$i-mark; done; exit 3; fi; $SLEEPER"
run fail3 -n 4 --log-dir logs -- bash -c "$FAIL3"
check fail_exit_status 'rc $rc, want 3: $(oneline "$D/err")' '[ "$rc" = 3 ]'
check fail_quick 'took $ms ms (want < 4000)' '[ "$ms" -lt 4000 ]'
check fail_names_rank 'stderr: $(oneline "$D/err")' 'has "$D/err" "rank 2" && has "$D/err" "exit status 3"'
check fail_last_lines 'want tail-11..30, not tail-10: $(oneline "$D/err")' \
    'has "$D/err" tail-11-mark && has "$D/err" tail-30-mark && lacks "$D/err" tail-10-mark'
check fail_others_stopped '$(cat "$D/survivors" 2>/dev/null) ($(npids "$D") pid files, want 6)' \
    'all_gone "$D" && [ "$(npids "$D")" = 6 ]'

run kill9 -n 3 --log-dir logs -- bash -c "if [ \$RANK = 1 ]; then $WAIT_FOR_PEERS; echo dying; kill -KILL \$\$; fi; $SLEEPER"
check sigkill_exit_status 'rc $rc, want 137: $(oneline "$D/err")' '[ "$rc" = 137 ]'
check sigkill_quick 'took $ms ms (want < 4000)' '[ "$ms" -lt 4000 ]'
check sigkill_names_rank 'stderr: $(oneline "$D/err")' 'has "$D/err" "rank 1" && has "$D/err" SIGKILL && has "$D/err" dying'
check sigkill_others_stopped '$(cat "$D/survivors" 2>/dev/null) ($(npids "$D") pid files, want 4)' \
    'all_gone "$D" && [ "$(npids "$D")" = 4 ]'

# A failure after the launcher has been watching for a while (several of its
# periodic sweeps), while the other ranks keep running.
run late -n 3 --log-dir logs -- bash -c "if [ \$RANK = 2 ]; then $WAIT_FOR_PEERS; sleep 2.5; kill -KILL \$\$; fi; $SLEEPER"
check late_failure 'rc $rc (want 137), $ms ms (want 2500..5000), $(cat "$D/survivors" 2>/dev/null): $(oneline "$D/err")' \
    '[ "$rc" = 137 ] && [ "$ms" -ge 2500 ] && [ "$ms" -lt 5000 ] && has "$D/err" "rank 2" && all_gone "$D" && [ "$(npids "$D")" = 4 ]'

run fail0 -n 3 --log-dir logs -- bash -c "if [ \$RANK = 0 ]; then $WAIT_FOR_PEERS; echo rank0-bye; exit 7; fi; $SLEEPER"
check rank0_fails 'rc $rc (want 7), $(cat "$D/survivors" 2>/dev/null), stderr: $(oneline "$D/err")' \
    '[ "$rc" = 7 ] && has "$D/err" "rank 0" && has "$D/out" rank0-bye && all_gone "$D" && [ "$(npids "$D")" = 4 ]'

# Ranks that ignore SIGTERM get SIGKILL after the grace period.
STUBBORN='trap "" TERM; echo $$ >"$D/pid_r$RANK"; while :; do sleep 0.1; done'
run stubborn -n 3 --grace 1 --log-dir logs -- bash -c "if [ \$RANK = 1 ]; then for i in \$(seq 100); do [ -e \"\$D/pid_r0\" -a -e \"\$D/pid_r2\" ] && break; sleep 0.05; done; exit 1; fi; $STUBBORN"
check term_ignored_killed 'rc $rc (want 1), $ms ms (want 1000..4000), $(cat "$D/survivors" 2>/dev/null): $(oneline "$D/err")' \
    '[ "$rc" = 1 ] && [ "$ms" -ge 1000 ] && [ "$ms" -lt 4000 ] && has "$D/err" SIGKILL && all_gone "$D" && [ "$(npids "$D")" = 2 ]'

# Success also stops what a rank left running in its process group.
run leftover -n 2 --grace 1 --log-dir logs -- bash -c 'sleep 300 </dev/null >/dev/null 2>&1 & echo $! >"$D/pid_c$RANK"; exit 0'
check success_stops_leftovers 'rc $rc, $(cat "$D/survivors" 2>/dev/null)' \
    '[ "$rc" = 0 ] && all_gone "$D" && [ "$(npids "$D")" = 2 ]'

# ---- signals to the launcher -------------------------------------------------------
for sig in TERM INT; do
    D="$tmp/sig$sig"; mkdir -p "$D"
    # Job control gives the launcher its own process group with SIGINT not
    # ignored (a plain background job would start with SIGINT ignored).
    set -m
    (cd "$D" && D="$D" exec timeout -k 5 15 "$launch" -n 3 --log-dir logs -- bash -c "$SLEEPER" >"$D/out" 2>"$D/err" </dev/null) &
    sub=$!
    set +m
    for i in $(seq 100); do [ "$(npids "$D")" -ge 6 ] && break; sleep 0.05; done
    lp=$(ps -o pid= --ppid "$sub" 2>/dev/null | tr -d ' ' | head -n 1)   # timeout's child
    t0=${EPOCHREALTIME//[!0-9]/}
    kill -"$sig" "${lp:-$sub}" 2>/dev/null
    wait "$sub"; rc=$?
    ms=$(((${EPOCHREALTIME//[!0-9]/} - t0) / 1000))
    want=143; [ "$sig" = INT ] && want=130
    check "launcher_sig$sig" 'rc $rc (want $want), $ms ms, $(cat "$D/survivors" 2>/dev/null) ($(npids "$D") pid files): $(oneline "$D/err")' \
        '[ "$rc" = "$want" ] && [ "$ms" -lt 4000 ] && [ "$(npids "$D")" = 6 ] && all_gone "$D"'
done

# A plain background job of a script (no job control) starts with SIGINT ignored, which bash
# can neither trap nor reset: the launcher restarts itself with SIGINT at its default, so SIGINT
# still stops the ranks; the ranks start with SIGINT and SIGQUIT at their defaults too.
D="$tmp/sigINT_background"; mkdir -p "$D"
# No timeout(1) in between (it would give the launcher SIGINT back): a watchdog sends SIGTERM,
# which the launcher takes either way, if SIGINT has not ended it within 10 s.
# A simple command, as a user's script would write it: bash leaves a subshell's SIGINT alone.
# shellcheck disable=SC2097,SC2098  # D is the shell's already; the assignment exports it
D="$D" "$launch" -n 2 --grace 1 --log-dir "$D/logs" -- \
    bash -c 'grep "^SigIgn:" /proc/self/status >"$D/sigign_$RANK"; '"$SLEEPER" >"$D/out" 2>"$D/err" </dev/null &
sub=$!
for i in $(seq 100); do [ "$(npids "$D")" -ge 4 ] && break; sleep 0.05; done
ign=$(sed -n 's/^SigIgn:[[:space:]]*//p' "/proc/$sub/status" 2>/dev/null)
(sleep 10; kill -TERM "$sub") 2>/dev/null &
watchdog=$!
t0=${EPOCHREALTIME//[!0-9]/}
kill -INT "$sub" 2>/dev/null
wait "$sub"; rc=$?
kill "$watchdog" 2>/dev/null; wait "$watchdog" 2>/dev/null
ms=$(((${EPOCHREALTIME//[!0-9]/} - t0) / 1000))
rank_ign=$(cat "$D"/sigign_0 "$D"/sigign_1 2>/dev/null | tr -s ' \t\n' ' ')
# bits 1 and 2 of each mask (SIGINT, SIGQUIT); others may come ignored from the caller (CI: SIGHUP)
int_quit=$(for m in $(sed -n 's/^SigIgn:[[:space:]]*//p' "$D"/sigign_0 "$D"/sigign_1 2>/dev/null); do
    [[ "$m" =~ ^[0-9a-fA-F]+$ ]] && echo $(( (16#$m >> 1) & 3 )); done | tr '\n' ' ')
check launcher_sigINT_as_background_job 'rc $rc (want 130), $ms ms, launcher SigIgn ${ign:-?}, $(cat "$D/survivors" 2>/dev/null) ($(npids "$D") pid files): $(oneline "$D/err")' \
    '[ "$rc" = 130 ] && [ "$ms" -lt 4000 ] && [ -n "$ign" ] && (( (16#$ign & 2) == 0 )) && [ "$(npids "$D")" = 4 ] && all_gone "$D"'
check ranks_start_with_sigint_and_sigquit_default 'ranks: ${rank_ign:-no files}' '[ "$int_quit" = "0 0 " ]'

# ---- bad arguments -------------------------------------------------------------------
bad_args() { # NAME EXPECTED_MESSAGE ARGS...: exit 2 and the message on stderr
    local name="$1"; msg="$2"; shift 2
    run "bad_$name" "$@"
    check "bad_args_$name" "rc \$rc (want 2), stderr '\$(oneline \$D/err)' lacks '\$msg'" \
        '[ "$rc" = 2 ] && has "$D/err" "$msg"'
}
bad_args no_dashdash "expected '--'" -n 2 true
bad_args no_command "missing '--'" -n 2
bad_args empty_command "no command after" -n 2 --
bad_args no_n "-n N" -- true
bad_args n_zero "positive integer" -n 0 -- true
bad_args n_text "positive integer" -n two -- true
bad_args node_rank_range "out of range" -n 2 --nnodes 2 --node-rank 2 --master h:1 -- true
bad_args nnodes_no_master "needs --master" -n 2 --nnodes 2 --node-rank 1 -- true
bad_args master_format "HOST:PORT" -n 2 --master justahost -- true
bad_args unknown_option "unknown option" -n 2 --frobnicate -- true
run bad_cmd -n 2 -- ./no-such-command-here
check bad_args_command_not_found "rc \$rc (want 127), stderr '\$(oneline \$D/err)'" \
    '[ "$rc" = 127 ] && has "$D/err" "not found"'

exit "$failed"
