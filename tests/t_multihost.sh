#!/usr/bin/env bash
# Multi-host launch, on "hosts" made here: three network namespaces joined
# by veths on a bridge (10.213.7.0/24, nothing outside them reachable),
# node A = mhn07 (10.213.7.1), node B = mhn08 (10.213.7.2) and a login node
# (10.213.7.3) where an interactive srun would run. Each gets its own
# /etc/hosts (ip netns exec binds /etc/netns/NS/hosts over it).
#   - scripts/launch.sh --nnodes 2 on A and B: the TCP rendezvous crosses the
#     veths (over IPv4, and over IPv6: fd13:213::1 and ::2), ranks 0-1 run on A and 2-3 on B, and a TP=2 x DP=2 job of a few
#     steps gives the losses of the same job on one host. The namespaces share
#     the kernel (same host name and boot id), so the shm communicator, which
#     serves one machine, still carries the data: what crosses is the
#     rendezvous. With their own host names (UTS namespaces, as real hosts),
#     the CPU build refuses the DP group that spans them, on both hosts.
#   - Slurm without a launcher: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
#     SLURM_NODEID, SLURM_NNODES, SLURM_TASKS_PER_NODE, SLURM_STEP_NODELIST,
#     SLURMD_NODENAME, SLURM_JOB_ID, and SLURM_LAUNCH_NODE_IPADDR naming the
#     login node, as an interactive srun sets it: rank 0 must be found on
#     the step's first node (mhn07), and a one-node step on 127.0.0.1.
#   - Faults, each bounded by parallel.timeout_s (2 s) plus 3 s: host B
#     never comes (both sides say who is missing), host B dies (SIGKILL to
#     every process in its namespace; or only its ranks) or hangs (SIGSTOP)
#     mid-run: host A's launcher exits 1 naming the ranks.
# Needs root (ip netns, unshare): without it every check fails, saying why.
# Everything made (namespaces, /etc/netns/NS, processes) is removed on exit.
# Prints "ok NAME" or "not ok NAME - reason" per check.
# cost: 30 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" multihost
launch="$root/scripts/launch.sh"
TO=2 # parallel.timeout_s of every job here
BOUND_MS=$((TO * 1000 + 3000)) # a fault's end, from the fault (about TO + 0.5 s idle, TO + 0.6 under load)
START_MS=$((BOUND_MS + 1000))  # the same, from the launch (starting costs ~0.3 s idle)

oneline() { tail -n "${2:-4}" "$1" 2>/dev/null | tr '\n' ' ' | cut -c1-400; }
has() { grep -qF -- "$2" "$1" 2>/dev/null; }
listing() { (cd "$1" 2>/dev/null && printf '%s ' *); }
ms_now() { echo $((${EPOCHREALTIME//[!0-9]/} / 1000)); }

# ---- the hosts -------------------------------------------------------------
tag="tgmh$$"
NA="${tag}a" NB="${tag}b" NL="${tag}l"
# ipc ARGS...: ip, never hanging the suite
ipc() { timeout 10 ip "$@"; }
made_etc_netns=0
[ -d /etc/netns ] || made_etc_netns=1
# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
    local ns p
    for ns in "$NA" "$NB" "$NL"; do
        for p in $(ipc netns pids "$ns" 2>/dev/null); do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
    done
    for ns in "$NA" "$NB" "$NL"; do
        ipc netns del "$ns" 2>/dev/null
        rm -rf -- "/etc/netns/$ns"
    done
    [ "$made_etc_netns" = 1 ] && rmdir /etc/netns 2>/dev/null
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

make_hosts() {
    local n ns
    cleanup # a leftover of an earlier run killed with this pid: nothing else uses these names
    ipc netns add "$NA" && ipc netns add "$NB" && ipc netns add "$NL" || return 1
    ipc -n "$NL" link add br0 type bridge && ipc -n "$NL" addr add 10.213.7.3/24 dev br0 && ipc -n "$NL" link set br0 up || return 1
    for n in a b; do
        ns="$tag$n"
        ipc -n "$ns" link add eth0 type veth peer name "v$n" netns "$NL" || return 1
        ipc -n "$NL" link set "v$n" master br0 && ipc -n "$NL" link set "v$n" up || return 1
    done
    ipc -n "$NA" addr add 10.213.7.1/24 dev eth0 && ipc -n "$NB" addr add 10.213.7.2/24 dev eth0 || return 1
    # IPv6 too (unique local addresses; nodad: usable at once)
    ipc -n "$NA" addr add fd13:213::1/64 dev eth0 nodad && ipc -n "$NB" addr add fd13:213::2/64 dev eth0 nodad || return 1
    for ns in "$NA" "$NB" "$NL"; do
        ipc -n "$ns" link set lo up || return 1
        mkdir -p "/etc/netns/$ns" &&
            printf '127.0.0.1 localhost\n10.213.7.1 mhn07\n10.213.7.2 mhn08\n10.213.7.3 login1\n' >"/etc/netns/$ns/hosts" || return 1
    done
    ipc -n "$NA" link set eth0 up && ipc -n "$NB" link set eth0 up
}

if [ "$(id -u)" != 0 ]; then
    not_ok namespaces "needs root for ip netns and unshare (running as uid $(id -u)); CI runs as root"
    exit 1
fi
for tool in ip unshare timeout; do
    command -v "$tool" >/dev/null || { not_ok namespaces "$tool is missing"; exit 1; }
done
if ! make_hosts >"$tmp/netns.log" 2>&1; then
    not_ok namespaces "could not make the network namespaces: $(oneline "$tmp/netns.log")"
    exit 1
fi
# A reaches B over the bridge (bash's /dev/tcp: no ping needed); the
# connection is refused as nothing listens, which proves the route.
probe=$(timeout 5 ip netns exec "$NA" bash -c 'exec 3<>/dev/tcp/mhn08/9' 2>&1)
if [[ "$probe" != *"refused"* ]]; then
    not_ok namespaces "node A cannot reach node B (want 'connection refused'): $probe"
    exit 1
fi
ok namespaces
[ -x "$bin" ] || { not_ok prerequisites "$bin is missing (run make)"; exit 1; }
bin_abs="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"

random_shards "$tmp/data" 64 11 6000 600
small_run_config "$tmp/cfg.json" 3
# TP=2 x DP=2 on 4 ranks; a layer of 2 heads; no checkpoint but the last.
JOB=(--config "$tmp/cfg.json" --set parallel.tp=2 --set train.global_batch=4 --set out.save_every=0
     --set "parallel.timeout_s=$TO")
export OMP_NUM_THREADS=1

# on NS SECONDS CMD...: CMD inside namespace NS, killed after SECONDS
on() { local ns="$1" s="$2"; shift 2; timeout -k 2 "$s" ip netns exec "$ns" "$@"; }
losses() { grep -o '"step":[0-9]*,"loss":[^,]*,"lr":[^,]*,"grad_norm":[^,]*' "$1" 2>/dev/null; }

# ---- the reference: the same job on one host ---------------------------------------
on "$NA" 30 "$launch" -n 4 --log-dir "$tmp/ref/logs" -- "$bin_abs" "${JOB[@]}" --set "out.dir=$tmp/ref/run" \
    >"$tmp/ref.out" 2>"$tmp/ref.err" </dev/null
rc=$?
ref=$(losses "$tmp/ref/run/log.jsonl")
if [ "$rc" = 0 ] && [ "$(echo "$ref" | grep -c loss)" = 3 ]; then ok reference_one_host
else not_ok reference_one_host "rc $rc: $(oneline "$tmp/ref.err")"; fi

# ---- launch.sh across two hosts ----------------------------------------------------------
# cross NAME MASTER_A MASTER_B: launch.sh on A (node 0) and B (node 1), two
# ranks each, told rank 0's address as MASTER_A and MASTER_B; sets rc_a,
# rc_b; output in $tmp/NAME.{a,b}.{out,err}
cross() {
    local name="$1" d="$tmp/$1" pa
    mkdir -p "$d"
    on "$NA" 30 "$launch" -n 2 --nnodes 2 --node-rank 0 --master "$2" --log-dir "$d/logs_a" --grace 2 \
        -- "$bin_abs" "${JOB[@]}" --set "out.dir=$d/run" >"$tmp/$name.a.out" 2>"$tmp/$name.a.err" </dev/null &
    pa=$!
    on "$NB" 30 "$launch" -n 2 --nnodes 2 --node-rank 1 --master "$3" --log-dir "$d/logs_b" --grace 2 \
        -- "$bin_abs" "${JOB[@]}" --set "out.dir=$d/run" >"$tmp/$name.b.out" 2>"$tmp/$name.b.err" </dev/null
    rc_b=$?
    wait "$pa"; rc_a=$?
}
cross launch2 10.213.7.1:29411 mhn07:29411
got=$(losses "$tmp/launch2/run/log.jsonl")
if [ "$rc_a" = 0 ] && [ "$rc_b" = 0 ] && [ -n "$ref" ] && [ "$got" = "$ref" ]; then ok launch_two_hosts_job
else not_ok launch_two_hosts_job "rc A $rc_a B $rc_b; losses '${got//$'\n'/ }' want '${ref//$'\n'/ }'; A: $(oneline "$tmp/launch2.a.err") B: $(oneline "$tmp/launch2.b.err")"; fi
# Rank assignment: node B ran global ranks 2 and 3 (their logs are there,
# and not on A), rank 0 saw the 4-rank TP x DP layout from the launcher.
d="$tmp/launch2"
if [ -e "$d/logs_b/rank_2.log" ] && [ -e "$d/logs_b/rank_3.log" ] && [ ! -e "$d/logs_a/rank_2.log" ] && [ ! -e "$d/logs_b/rank_0.log" ] &&
   has "$tmp/launch2.a.out" "ranks: 4 (tp 2 x dp 2" && has "$tmp/launch2.b.err" "ranks 2..3 of 4), master mhn07:29411"; then
    ok launch_two_hosts_ranks
else
    not_ok launch_two_hosts_ranks "logs A: $(listing "$d/logs_a") B: $(listing "$d/logs_b"); $(oneline "$tmp/launch2.b.err")"
fi

# The same over IPv6 ([ADDR]:PORT, as launch.sh takes it): rank 0 must
# listen on IPv6 as well as IPv4.
cross launch2_ipv6 '[fd13:213::1]:29418' '[fd13:213::1]:29418'
got=$(losses "$tmp/launch2_ipv6/run/log.jsonl")
if [ "$rc_a" = 0 ] && [ "$rc_b" = 0 ] && [ -n "$ref" ] && [ "$got" = "$ref" ]; then ok launch_two_hosts_ipv6
else not_ok launch_two_hosts_ipv6 "rc A $rc_a B $rc_b; A: $(oneline "$tmp/launch2_ipv6.a.err" 2) B: $(oneline "$tmp/launch2_ipv6.b.err" 2)"; fi

# The same with real host names (a UTS namespace each): the CPU build's shm
# communicator serves one machine, so the DP group across A and B is refused
# on both hosts, before any step, saying which ranks and why.
uts() { # NS HOSTNAME CMD...: CMD in NS with its own host name
    local ns="$1" h="$2"; shift 2
    # shellcheck disable=SC2016  # expanded by the inner bash
    timeout -k 2 30 ip netns exec "$ns" unshare --uts bash -c 'echo "$0" >/proc/sys/kernel/hostname && exec "$@"' "$h" "$@"
}
d="$tmp/uts"; mkdir -p "$d"
t0=$(ms_now)
uts "$NA" mhn07 "$launch" -n 2 --nnodes 2 --node-rank 0 --master 10.213.7.1:29412 --log-dir "$d/logs_a" --grace 2 \
    -- "$bin_abs" "${JOB[@]}" --set "out.dir=$d/run" >"$d/a.out" 2>"$d/a.err" </dev/null &
pa=$!
uts "$NB" mhn08 "$launch" -n 2 --nnodes 2 --node-rank 1 --master mhn07:29412 --log-dir "$d/logs_b" --grace 2 \
    -- "$bin_abs" "${JOB[@]}" --set "out.dir=$d/run" >"$d/b.out" 2>"$d/b.err" </dev/null
rc_b=$?
wait "$pa"; rc_a=$?
ms=$(($(ms_now) - t0))
if [ "$rc_a" != 0 ] && [ "$rc_b" != 0 ] && has "$d/a.err" "are on different nodes" && has "$d/b.err" "are on different nodes" &&
   has "$d/a.err" "a job across nodes needs NCCL" &&
   ! grep -q '"loss"' "$d/run/log.jsonl" 2>/dev/null && [ "$ms" -lt "$START_MS" ]; then
    ok cpu_refuses_group_across_hosts
else
    not_ok cpu_refuses_group_across_hosts "rc A $rc_a B $rc_b, $ms ms (bound $START_MS); A: $(oneline "$d/a.err") B: $(oneline "$d/b.err")"
fi

# ---- Slurm, no launcher: the variables srun sets ---------------------------------------
# slurm_task NS NODE PROCID LOCALID NODEID NNODES NODELIST OUTDIR EXTRA_ENV...:
# one task as srun starts it (from the login node: SLURM_LAUNCH_NODE_IPADDR
# is login1's address), in the background
slurm_task() {
    local ns="$1" node="$2" procid="$3" localid="$4" nodeid="$5" nnodes="$6" list="$7" out="$8"; shift 8
    local tpn=2; [ "$nnodes" = 2 ] && tpn="2(x2)"
    on "$ns" 30 env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT \
        SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_PROCID="$procid" SLURM_NTASKS=$((2 * nnodes)) SLURM_STEP_NUM_TASKS=$((2 * nnodes)) \
        SLURM_LOCALID="$localid" SLURM_NODEID="$nodeid" SLURM_NNODES="$nnodes" SLURM_TASKS_PER_NODE="$tpn" \
        SLURM_STEP_NODELIST="$list" SLURM_JOB_NODELIST="$list" SLURM_NODELIST="$list" SLURMD_NODENAME="$node" \
        SLURM_LAUNCH_NODE_IPADDR=10.213.7.3 "$@" "$bin_abs" "${JOB[@]}" --set "out.dir=$out" \
        >"$out.$procid.out" 2>"$out.$procid.err" </dev/null &
}
d="$tmp/slurm2"; mkdir -p "$d"
slurm_task "$NA" mhn07 0 0 0 2 'mhn[07-08]' "$d/run"; p0=$!
slurm_task "$NA" mhn07 1 1 0 2 'mhn[07-08]' "$d/run"; p1=$!
slurm_task "$NB" mhn08 2 0 1 2 'mhn[07-08]' "$d/run"; p2=$!
slurm_task "$NB" mhn08 3 1 1 2 'mhn[07-08]' "$d/run"; p3=$!
rcs=""
for p in $p0 $p1 $p2 $p3; do wait "$p"; rcs="$rcs $?"; done
got=$(losses "$d/run/log.jsonl")
if [ "$rcs" = " 0 0 0 0" ] && [ -n "$ref" ] && [ "$got" = "$ref" ] && has "$d/run.0.out" "from slurm"; then
    ok slurm_interactive_srun_two_hosts
else
    not_ok slurm_interactive_srun_two_hosts "exit statuses$rcs; losses '${got//$'\n'/ }'; rank 0: $(oneline "$d/run.0.err" 2) rank 2: $(oneline "$d/run.2.err" 2)"
fi
# SLURM_PROCID placed the ranks: ranks 2 and 3 (on B) wrote their own logs.
if [ -s "$d/run/logs/rank_2.out" ] && [ -s "$d/run/logs/rank_3.out" ] && [ -s "$d/run/logs/rank_1.out" ]; then ok slurm_ranks_from_procid
else not_ok slurm_ranks_from_procid "out.dir/logs holds: $(listing "$d/run/logs")"; fi

# One launcher per node under srun (launch.sh --help's recipe): the srun
# task's own SLURM_PROCID (0 and 1 of 2) must give way to the launcher's RANK.
d="$tmp/slurm_launch"; mkdir -p "$d"
for k in 0 1; do
    ns="$NA"; [ "$k" = 1 ] && ns="$NB"
    # shellcheck disable=SC2016  # expanded by the inner bash, as on each node
    on "$ns" 30 env SLURM_JOB_ID=4243 SLURM_PROCID="$k" SLURM_NTASKS=2 SLURM_LOCALID=0 SLURM_NODEID="$k" SLURM_NNODES=2 \
        SLURM_TASKS_PER_NODE='1(x2)' SLURM_STEP_NODELIST='mhn[07-08]' SLURM_LAUNCH_NODE_IPADDR=10.213.7.3 \
        bash -c '"$0" -n 2 --nnodes "$SLURM_NNODES" --node-rank "$SLURM_NODEID" --master mhn07:29419 --log-dir "$1/logs" \
                 --grace 2 -- "${@:2}"' "$launch" "$d" "$bin_abs" "${JOB[@]}" --set "out.dir=$d/run" \
        >"$d/$k.out" 2>"$d/$k.err" </dev/null &
    [ "$k" = 0 ] && p0=$!
done
wait $!; r1=$?; wait "$p0"; r0=$?
got=$(losses "$d/run/log.jsonl")
if [ "$r0" = 0 ] && [ "$r1" = 0 ] && [ -n "$ref" ] && [ "$got" = "$ref" ] && has "$d/0.out" "from env"; then ok slurm_one_launcher_per_node
else not_ok slurm_one_launcher_per_node "exit statuses $r0 $r1; node 0: $(oneline "$d/0.err" 2) node 1: $(oneline "$d/1.err" 2)"; fi

# One node, two tasks, srun run from the login node: rank 0 listens on
# 127.0.0.1, not on the launch node's address (not this host's).
d="$tmp/slurm1"; mkdir -p "$d"
slurm_task "$NA" mhn07 0 0 0 1 mhn07 "$d/run"; p0=$!
slurm_task "$NA" mhn07 1 1 0 1 mhn07 "$d/run"; p1=$!
wait "$p0"; r0=$?; wait "$p1"; r1=$?
if [ "$r0" = 0 ] && [ "$r1" = 0 ] && [ "$(losses "$d/run/log.jsonl" | grep -c loss)" = 3 ]; then ok slurm_interactive_srun_one_host
else not_ok slurm_interactive_srun_one_host "exit statuses $r0 $r1; rank 0: $(oneline "$d/run.0.err" 2)"; fi

# Rank 0 placed on another node than the list's first (an arbitrary
# distribution): it says so at once instead of timing out its peers.
d="$tmp/slurm_wrong"; mkdir -p "$d"
slurm_task "$NB" mhn08 0 0 0 2 'mhn[07-08]' "$d/run"; p0=$!
wait "$p0"; r0=$?
if [ "$r0" != 0 ] && has "$d/run.0.err" "rank 0 runs on node mhn08" && has "$d/run.0.err" "MASTER_ADDR"; then ok slurm_rank0_not_first_node
else not_ok slurm_rank0_not_first_node "exit $r0: $(oneline "$d/run.0.err" 2)"; fi

# ---- faults ----------------------------------------------------------------------------
# Host B never starts: rank 0 names the ranks it waited for; alone, B's
# ranks name the address they could not reach (IPv6 in brackets, so the
# port stands apart). Both within the timeout.
d="$tmp/absent"; mkdir -p "$d"
t0=$(ms_now)
on "$NA" 20 "$launch" -n 2 --nnodes 2 --node-rank 0 --master 10.213.7.1:29413 --log-dir "$d/logs_a" --grace 2 \
    -- "$bin_abs" "${JOB[@]}" --set "out.dir=$d/run_a" >"$d/a.out" 2>"$d/a.err" </dev/null &
pa=$!
on "$NB" 20 "$launch" -n 2 --nnodes 2 --node-rank 1 --master '[fd13:213::1]:29414' --log-dir "$d/logs_b" --grace 2 \
    -- "$bin_abs" "${JOB[@]}" --set "out.dir=$d/run_b" >"$d/b.out" 2>"$d/b.err" </dev/null
rc_b=$?; ms_b=$(($(ms_now) - t0))
wait "$pa"; rc_a=$?; ms_a=$(($(ms_now) - t0))
if [ "$rc_a" != 0 ] && has "$d/a.err" "waiting for ranks 2, 3 to connect" && [ "$ms_a" -lt "$START_MS" ]; then ok rendezvous_host_absent
else not_ok rendezvous_host_absent "rc $rc_a, $ms_a ms (bound $START_MS): $(oneline "$d/a.err")"; fi
if [ "$rc_b" != 0 ] && has "$d/b.err" "could not connect to rank 0 at [fd13:213::1]:29414" && [ "$ms_b" -lt "$START_MS" ]; then ok rendezvous_master_absent
else not_ok rendezvous_master_absent "rc $rc_b, $ms_b ms (bound $START_MS): $(oneline "$d/b.err")"; fi

# host_fault NAME SIGNAL PORT [ranks]: a long cross-host job; once it has
# taken 3 steps, SIGNAL to every process of host B (its launcher and its
# ranks), or to its ranks only. Sets rc_a, rc_b and ms (from the signal to
# the end of A's launcher).
host_fault() {
    local name="$1" sig="$2" port="$3" who="${4:-all}" d="$tmp/$1" pa pb p n
    mkdir -p "$d"
    on "$NA" 30 "$launch" -n 2 --nnodes 2 --node-rank 0 --master "10.213.7.1:$port" --log-dir "$d/logs_a" --grace 2 \
        -- "$bin_abs" "${JOB[@]}" --set train.steps=1000000 --set "out.dir=$d/run" >"$d/a.out" 2>"$d/a.err" </dev/null &
    pa=$!
    on "$NB" 30 "$launch" -n 2 --nnodes 2 --node-rank 1 --master "mhn07:$port" --log-dir "$d/logs_b" --grace 2 \
        -- "$bin_abs" "${JOB[@]}" --set train.steps=1000000 --set "out.dir=$d/run" >"$d/b.out" 2>"$d/b.err" </dev/null &
    pb=$!
    for _ in $(seq 200); do n=$(grep -c '"loss"' "$d/run/log.jsonl" 2>/dev/null); [ "${n:-0}" -ge 3 ] && break; sleep 0.05; done
    t0=$(ms_now)
    for p in $(ipc netns pids "$NB"); do
        [ "$who" = ranks ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" != train_gpt ] && continue
        kill -"$sig" "$p" 2>/dev/null
    done
    wait "$pa"; rc_a=$?
    ms=$(($(ms_now) - t0))
    # B's launcher, when it was spared, ends by itself (then rc_b is its status)
    if [ "$who" = ranks ]; then wait "$pb"; rc_b=$?; fi
    for p in $(ipc netns pids "$NB"); do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
    if [ "$who" != ranks ]; then wait "$pb" 2>/dev/null; rc_b=$?; fi
}
# a_says NAME REGEX: a rank log of host A in fault NAME matches REGEX (the
# first A rank to fail names a rank of B; its A peer may then name it)
a_says() { cat "$tmp/$1"/logs_a/rank_*.log 2>/dev/null | grep -qE -- "$2"; }
# A host dies: A's ranks see their DP peers gone; A's launcher exits with
# its failed rank's status.
host_fault died KILL 29415
if [ "$rc_a" = 1 ] && [ "$ms" -lt "$BOUND_MS" ] && a_says died "rank [23] died" && has "$tmp/died/a.err" "failed with exit status 1"; then
    ok host_dies_job_ends
else
    not_ok host_dies_job_ends "rc $rc_a (want 1), $ms ms (bound $BOUND_MS): $(oneline "$tmp/died/a.err")"
fi
# Only B's ranks are killed: B's launcher reports SIGKILL (137), A's ends too.
host_fault ranks_killed KILL 29417 ranks
if [ "$rc_a" = 1 ] && [ "$rc_b" = 137 ] && [ "$ms" -lt "$BOUND_MS" ] && a_says ranks_killed "rank [23] died" &&
   has "$tmp/ranks_killed/b.err" "SIGKILL"; then
    ok host_ranks_killed_job_ends
else
    not_ok host_ranks_killed_job_ends "rc A $rc_a (want 1) B $rc_b (want 137), $ms ms (bound $BOUND_MS): A: $(oneline "$tmp/ranks_killed/a.err" 2) B: $(oneline "$tmp/ranks_killed/b.err" 2)"
fi
# A host hangs (stopped, or cut off): no one can tell it died, so A's ranks
# give up after parallel.timeout_s.
host_fault hung STOP 29416
if [ "$rc_a" = 1 ] && [ "$ms" -lt "$BOUND_MS" ] && a_says hung "timed out after $TO s \(parallel.timeout_s\); did not arrive: ranks? [23]"; then
    ok host_hangs_job_ends
else
    not_ok host_hangs_job_ends "rc $rc_a (want 1), $ms ms (bound $BOUND_MS): $(oneline "$tmp/hung/a.err")"
fi

exit "$failed"
