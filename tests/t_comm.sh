#!/usr/bin/env bash
# Communicator tests: topology from launcher variables, the TCP bootstrap and
# the shm communicator, as real multi-process jobs on 127.0.0.1 (a random
# free port in 20000-32767 per job). Every rank runs build/test_comm, which
# this script (re)builds when it is missing or older than its sources.
# Checks: every collective bitwise against the fixed-order result at world
# 1-4 (tp x dp = 2 x 2 with both groups at once), bytes_sent against the ring
# formula, two jobs at once; and faults: a rank killed mid-collective (also
# one left unreaped, a zombie), a hung rank, a rank that quits, mismatched
# collectives, a missing rank 0, a rank that never connects, a busy port, bad
# variables. Faults must end every surviving rank non-zero, quickly, with a
# message naming the group and the rank, and leave no segment in /dev/shm.
# Prints "ok NAME" or "not ok NAME - reason" per check; exits non-zero if any
# check failed. Run from the repo root by tests/run.sh (env TG_ROOT, TG_TMP).
# tier: check (make check: the quick tier, tests/run.sh --check)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" comm
tbin=build/test_comm
srcs=(tests/test_comm.c parallel/bootstrap.c parallel/bootstrap_io.c parallel/comm.c parallel/comm_null.c parallel/group.c parallel/comm_shm.c
      parallel/comm_shm_sync.c parallel/comm_shm_segment.c parallel/topology.c util/err.c)
hdrs=(parallel/bootstrap.h parallel/bootstrap_io.h parallel/comm.h parallel/comm_shm_impl.h parallel/group.h parallel/topology.h util/err.h tests/tap.h)

# ---- build ---------------------------------------------------------------
stale=0
[ -x "$tbin" ] || stale=1
for f in "${srcs[@]}" "${hdrs[@]}"; do [ "$f" -nt "$tbin" ] && stale=1; done
if [ "$stale" = 1 ]; then
    mkdir -p build
    if ! ${CC:-gcc} -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -I. -o "$tbin" "${srcs[@]}" -lpthread -lrt -lm >"$tmp/build.log" 2>&1; then
        not_ok build_test_comm "$(head -c 300 "$tmp/build.log")"
        exit 1
    fi
fi
ok build_test_comm

# ---- helpers -------------------------------------------------------------
# A port below Linux's ephemeral range (32768-60999), as scripts/launch.sh
# picks one: there, a client socket of an earlier job that sits in TIME_WAIT
# (60 s) keeps rank 0 from listening (EADDRINUSE, even with SO_REUSEADDR)
# while nothing listens on it, so a probe by connecting calls it free; the
# job then fails before its first check. ss sees every socket on the port.
port_in_use() {
    local out
    if out=$(ss -Htan "( sport = :$1 )" 2>/dev/null); then [ -n "$out" ]
    else (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; fi
}
free_port() {
    local p
    while :; do
        p=$((20000 + (RANDOM * 32768 + RANDOM) % 12768))
        port_in_use "$p" || break
    done
    echo "$p"
}
first_line() { head -n 1 "$1" 2>/dev/null | cut -c1-250; }

# start_rank JOB WORLD RANK PORT ARGS...: one rank in the background (pid in $!),
# stdout/stderr to $tmp/JOB.RANK.{out,err}
start_rank() {
    local job=$1 world=$2 r=$3 port=$4
    shift 4
    RANK=$r WORLD_SIZE=$world LOCAL_RANK=$r LOCAL_WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        timeout -k 2 60 "$tbin" run "$@" >"$tmp/$job.$r.out" 2>"$tmp/$job.$r.err" &
}

# A healthy job: every rank exits 0; rank 0's check lines are passed on.
job_ok() { # TAG WORLD TP
    local tag=$1 world=$2 tp=$3 port pids=() r rc bad=""
    port=$(free_port)
    for ((r = 0; r < world; r++)); do
        start_rank "$tag" "$world" "$r" "$port" "$tag" "$tp"
        pids[r]=$!
    done
    for ((r = 0; r < world; r++)); do
        wait "${pids[r]}"
        rc=$?
        [ "$rc" -ne 0 ] && [ -z "$bad" ] && bad="rank $r exited with $rc: $(first_line "$tmp/$tag.$r.err")"
    done
    grep -E '^(ok|not ok) ' "$tmp/$tag.0.out"
    if grep -q '^not ok ' "$tmp/$tag.0.out"; then failed=1; fi
    if [ -n "$bad" ]; then not_ok "${tag}_exit" "$bad"; else ok "${tag}_exit"; fi
}

# expect_fail NAME RANKS PATTERN...: every rank in RANKS exited 3 and its
# stderr matches every PATTERN (grep -E).
expect_fail() {
    local name=$1 ranks=$2 r pat why=""
    shift 2
    for r in $ranks; do
        local rc=${rcs[r]}
        if [ "$rc" != 3 ]; then
            why="rank $r exited with $rc (expected 3): $(first_line "$tmp/$name.$r.err")"
            break
        fi
        for pat in "$@"; do
            if ! grep -Eq "$pat" "$tmp/$name.$r.err"; then
                why="rank $r: message lacks /$pat/: $(first_line "$tmp/$name.$r.err")"
                break 2
            fi
        done
    done
    if [ -z "$why" ]; then ok "$name"; else not_ok "$name" "$why"; fi
}

check_time() { # NAME SECONDS LIMIT
    if [ "$2" -le "$3" ]; then ok "$1_quick"; else not_ok "$1_quick" "took $2 s (limit $3 s)"; fi
}

# ---- topology from the environment ----------------------------------------
"$tbin" topo || failed=1

# ---- healthy jobs ----------------------------------------------------------
before=$(shm_list)
# world 1 with no launcher variables at all
env -u RANK -u WORLD_SIZE -u SLURM_PROCID -u OMPI_COMM_WORLD_RANK timeout -k 2 60 "$tbin" run w1 1 >"$tmp/w1.0.out" 2>"$tmp/w1.0.err"
rc=$?
grep -E '^(ok|not ok) ' "$tmp/w1.0.out"
if grep -q '^not ok ' "$tmp/w1.0.out"; then failed=1; fi
if [ "$rc" -eq 0 ]; then ok w1_exit; else not_ok w1_exit "exited with $rc: $(first_line "$tmp/w1.0.err")"; fi
job_ok w2 2 2
job_ok w3 3 3
job_ok w3dp 3 1
job_ok w4 4 4
job_ok w4tp2 4 2
# two jobs at once on one machine: distinct sessions, distinct segments
job_ok c1 2 2 >"$tmp/c1.lines" &
c1=$!
job_ok c2 2 2 >"$tmp/c2.lines"
wait "$c1"
cat "$tmp/c1.lines" "$tmp/c2.lines"
if grep -q '^not ok ' "$tmp/c1.lines" "$tmp/c2.lines"; then failed=1; fi
check_shm healthy "$before"

# ---- a rank killed mid-collective ------------------------------------------
# kill TAG WRAP: rank 1 kills itself (SIGKILL) during a long series of
# all_reduces; with WRAP=zombie its parent never reaps it.
kill_test() {
    local name=$1 wrap=$2 port r t0 before
    declare -ga rcs=()
    before=$(shm_list)
    port=$(free_port)
    t0=$SECONDS
    local pids=()
    for r in 0 1 2; do
        if [ "$r" = 1 ] && [ "$wrap" = zombie ]; then
            # the dying rank's parent is `sleep`, which never waits for it
            RANK=1 WORLD_SIZE=3 LOCAL_RANK=1 LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
                bash -c '"$0" run "$1" 3 --die 1 --timeout 60 >"$2" 2>"$3" & exec sleep 30' \
                "$tbin" "$name" "$tmp/$name.1.out" "$tmp/$name.1.err" &
        else
            start_rank "$name" 3 "$r" "$port" "$name" 3 --die 1 --timeout 60
        fi
        pids[r]=$!
    done
    wait "${pids[0]}"; rcs[0]=$?
    wait "${pids[2]}"; rcs[2]=$?
    local dt=$((SECONDS - t0))
    if [ "$wrap" = zombie ]; then
        kill "${pids[1]}" 2>/dev/null
        wait "${pids[1]}" 2>/dev/null
    else
        wait "${pids[1]}"; rcs[1]=$?
    fi
    expect_fail "$name" "0 2" "group tp_small" "rank 1 died" "did not arrive: rank 1"
    check_time "$name" "$dt" 5
    if [ "$wrap" != zombie ]; then
        if [ "${rcs[1]}" = 137 ]; then ok "${name}_rank_killed"; else not_ok "${name}_rank_killed" "rank 1 exited with ${rcs[1]}"; fi
    fi
    check_shm "$name" "$before"
}
kill_test kill plain 2>/dev/null # (no "Killed" notice from bash)
kill_test kill_zombie zombie 2>/dev/null

# ---- a hung rank with a 2 s timeout ----------------------------------------
before=$(shm_list)
port=$(free_port)
rcs=()
t0=$SECONDS
for r in 0 1 2; do
    start_rank hang 3 "$r" "$port" hang 3 --hang 2 --timeout 2
    pids[r]=$!
done
wait "${pids[0]}"; rcs[0]=$?
wait "${pids[1]}"; rcs[1]=$?
dt=$((SECONDS - t0))
during=$(shm_new "$before") # rank 2 still maps its segments: they must have no name any more
[ -n "$during" ] && sleep 0.5 && during=$(shm_new "$before") # (not another job's, in passing)
kill "${pids[2]}" 2>/dev/null
wait "${pids[2]}" 2>/dev/null
expect_fail hang "0 1" "group tp_small" "timed out after 2 s" "did not arrive: rank 2"
check_time hang "$dt" 6
if [ -z "$during" ]; then ok hang_segments_unlinked_while_mapped; else not_ok hang_segments_unlinked_while_mapped "visible: $during"; fi
check_shm hang "$before"

# ---- a rank that quits after the bootstrap ---------------------------------
port=$(free_port)
rcs=()
for r in 0 1 2; do
    start_rank quit 3 "$r" "$port" quit 3 --quit 2 --timeout 30
    pids[r]=$!
done
t0=$SECONDS
for r in 0 1 2; do wait "${pids[r]}"; rcs[r]=$?; done
expect_fail quit "0 1" "rank 2 closed its bootstrap connection"
check_time quit $((SECONDS - t0)) 5

# a rank that quits between the creation of two communicators: the TP
# segments it mapped (never destroyed) and the DP ones must not stay behind
before=$(shm_list)
port=$(free_port)
rcs=()
for r in 0 1 2 3; do
    start_rank quit_create 4 "$r" "$port" quit_create 2 --quit 2 --quit-stage 1 --timeout 30
    pids[r]=$!
done
t0=$SECONDS
for r in 0 1 2 3; do wait "${pids[r]}"; rcs[r]=$?; done
expect_fail quit_create "0 1 3" "creating communicator dp" "rank 2 closed its bootstrap connection"
check_time quit_create $((SECONDS - t0)) 5
check_shm quit_create "$before"

# ---- ranks calling different collectives -----------------------------------
before=$(shm_list)
port=$(free_port)
rcs=()
for r in 0 1 2; do
    start_rank mismatch 3 "$r" "$port" mismatch 3 --mismatch --timeout 30
    pids[r]=$!
done
t0=$SECONDS
for r in 0 1 2; do wait "${pids[r]}"; rcs[r]=$?; done
expect_fail mismatch "0 1 2" "group tp" "called different collectives" "all_gather"
check_time mismatch $((SECONDS - t0)) 5
check_shm mismatch "$before"

# ---- rendezvous failures -----------------------------------------------------
port=$(free_port)
rcs=()
t0=$SECONDS
start_rank no_rank0 2 1 "$port" no_rank0 2 --timeout 2
wait $!; rcs[1]=$?
expect_fail no_rank0 "1" "could not connect to rank 0 at 127.0.0.1:$port within 2 s"
check_time no_rank0 $((SECONDS - t0)) 6

port=$(free_port)
rcs=()
t0=$SECONDS
for r in 0 1; do
    start_rank missing 3 "$r" "$port" missing 3 --timeout 2
    pids[r]=$!
done
for r in 0 1; do wait "${pids[r]}"; rcs[r]=$?; done
expect_fail missing "0 1" "waiting for rank 2 to connect"
check_time missing $((SECONDS - t0)) 6

# a second rank 0 on a port already served
port=$(free_port)
rcs=()
start_rank busy_first 2 0 "$port" busy 2 --timeout 3
first=$!
for _ in $(seq 60); do port_in_use "$port" && break; sleep 0.05; done # the first rank 0 listens (0.3 s slept under load was short)
start_rank busy 2 0 "$port" busy 2 --timeout 3
wait $!; rcs[0]=$?
expect_fail busy "0" "cannot listen on 127.0.0.1:$port" "MASTER_PORT"
kill "$first" 2>/dev/null
wait "$first" 2>/dev/null

# bad launcher variables end a real run with a message naming them
RANK=2 WORLD_SIZE=2 timeout -k 2 20 "$tbin" run badenv 1 >"$tmp/badenv.0.out" 2>"$tmp/badenv.0.err"
rc=$?
rcs=("$rc")
expect_fail badenv "0" "RANK=2 is not below WORLD_SIZE=2"
WORLD_SIZE=4 RANK=1 timeout -k 2 20 "$tbin" run badtp 3 >"$tmp/badtp.0.out" 2>"$tmp/badtp.0.err"
rc=$?
rcs=("$rc")
expect_fail badtp "0" "WORLD_SIZE=4 is not divisible by parallel.tp \\(3\\)"

exit "$failed"
