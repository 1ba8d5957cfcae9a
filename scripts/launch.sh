#!/usr/bin/env bash
# Starts N ranks of a command on this node, one process each, with the
# environment of a Megatron/torch-style distributed job. `--help` says it all.
# Needs bash >= 5.1 (wait -n -p) and setsid (util-linux).
set -u

prog="launch"
usage() {
    cat <<'EOF'
Usage: scripts/launch.sh -n N [--nnodes M --node-rank R --master HOST:PORT]
                         [--log-dir DIR] [--grace SECONDS] -- COMMAND [ARGS...]

Starts N copies of COMMAND on this node, one process per rank, for example
  scripts/launch.sh -n 2 -- ./train_gpt --config configs/tiny.json --set parallel.tp=2   # as make quickstart

Options
  -n, --nproc-per-node N  ranks on this node (a positive integer)
  --nnodes M              nodes in the job (default 1); M > 1 needs --master
  --node-rank R           this node's index, 0 <= R < M (default 0)
  --master HOST:PORT      address of global rank 0's node and a port it can
                          listen on; the same on every node. Single node default:
                          127.0.0.1 and a random free port in 20000-32767.
                          IPv6: [ADDR]:PORT
  --log-dir DIR           where the per-rank logs go (created if missing);
                          default ./launch_logs/<YYYYmmdd-HHMMSS> (with -<pid>
                          appended if that exists); train_gpt runs may pass
                          their out.dir, e.g. --log-dir runs/NAME/logs
  --grace SECONDS         on shutdown, time between SIGTERM and SIGKILL (default 60:
                          train_gpt finishes its step and saves a checkpoint on
                          SIGTERM, which takes a while for a large model)
  -h, --help              this text
  --                      ends the options; COMMAND and its arguments follow

Under Slurm, srun can start train_gpt's ranks itself (it reads SLURM_PROCID
and the rest, and finds rank 0 on the step's first node); to use this
launcher instead, start one per node, with each node's own variables:
  srun -N 2 --ntasks-per-node=1 bash -c 'scripts/launch.sh -n 4 --nnodes \
      $SLURM_NNODES --node-rank $SLURM_NODEID --master HOST:PORT -- ./train_gpt ...'

Each rank gets, on top of the launcher's environment:
  RANK              node_rank * N + local rank (global rank)
  WORLD_SIZE        N * M
  LOCAL_RANK        0 .. N-1
  LOCAL_WORLD_SIZE  N
  NODE_RANK         R
  MASTER_ADDR, MASTER_PORT  from --master, or the single-node default
  OMP_NUM_THREADS   when the launcher's environment does not set it: this
                    node's cores (nproc: those this process may run on) / N,
                    at least 1, so the ranks do not each spread over every
                    core; the launcher prints the figure, and warns when the
                    ranks outnumber the cores. A value already set is kept.

Output
  Rank 0's stdout and stderr pass through to this terminal (as stdout and
  stderr) and are also copied to DIR/rank_0.log. Every other rank writes both
  to DIR/rank_<RANK>.log only; its stdin is /dev/null. Launcher messages go to
  stderr, prefixed "launch:", and say where the logs are. Rank 0 writes into
  a pipe, not a terminal, so a program that buffers its output should flush
  it (train_gpt does).

Failure and shutdown
  If a rank exits non-zero or is killed by a signal, the launcher stops all
  other ranks (SIGTERM to each rank's process group, SIGKILL to what is left
  after the grace period), prints which rank failed, its exit status and the
  last 20 lines of its log, and exits with that rank's status (128+signal when
  it was killed by a signal). When every rank exits 0, the launcher exits 0.
  SIGINT (Ctrl-C), SIGTERM and SIGHUP to the launcher stop all ranks the same
  way, and it exits 130, 143 or 129; a second signal skips the grace period.
  This holds also when a script starts the launcher in the background
  (`scripts/launch.sh ... &`), where SIGINT would come ignored: the launcher
  restarts itself once with SIGINT at its default.
  SIGUSR1 (Slurm's --signal=USR1@N) is passed on to every rank and the
  launcher goes on watching: train_gpt saves a checkpoint and exits 138 on it.
  SIGCONT follows every SIGTERM, so a stopped (SIGSTOP) rank ends too.
  Each rank runs in its own session and process group, so whatever a rank
  started there is stopped with it, also after a successful run; no rank is
  left running when the launcher exits (unless the launcher itself is
  SIGKILLed, which no program can handle).

Exit status: 0 all ranks succeeded; the failed rank's status; 2 bad arguments;
127 COMMAND not found; 130/143/129 stopped by a signal.
EOF
}

die_usage() { echo "$prog: error: $*" >&2; echo "$prog: see scripts/launch.sh --help" >&2; exit 2; }
say_fd=2   # becomes 9 once the ranks run (see "watch them")
say() { echo "$prog: $*" >&"$say_fd"; }

if [ -z "${BASH_VERSINFO:-}" ] || [ "${BASH_VERSINFO[0]}" -lt 5 ] ||
   { [ "${BASH_VERSINFO[0]}" -eq 5 ] && [ "${BASH_VERSINFO[1]}" -lt 1 ]; }; then
    echo "$prog: error: needs bash 5.1 or newer (this is ${BASH_VERSION:-not bash})" >&2
    exit 2
fi

# A script's background job (`scripts/launch.sh ... &`) starts with SIGINT ignored, and bash can
# neither trap nor reset a signal ignored on entry: Ctrl-C would end the script and leave this
# launcher and its ranks running. Start again once with SIGINT at its default, so that the trap
# below stops the ranks. SIGHUP stays as it came: nohup ignores it on purpose.
sigint_ignored() { # from the kernel's mask of ignored signals (bit 1: SIGINT)
    local key value
    while read -r key value; do
        [ "$key" = SigIgn: ] && [[ "$value" =~ ^[0-9a-fA-F]+$ ]] && return $(( ((16#$value >> 1) & 1) == 0 ))
    done </proc/$$/status 2>/dev/null
    return 1
}
if [ -z "${TG_LAUNCH_SIGINT_RESET:-}" ] && sigint_ignored; then
    if env --default-signal=INT true 2>/dev/null; then
        exec env --default-signal=INT TG_LAUNCH_SIGINT_RESET=1 "$BASH" "${BASH_SOURCE[0]}" "$@"
    fi
    echo "$prog: warning: SIGINT is ignored (a script's background job) and this env cannot reset it; SIGTERM stops the ranks" >&2
fi
unset TG_LAUNCH_SIGINT_RESET

# ---- arguments ---------------------------------------------------------------
nproc="" nnodes=1 node_rank=0 master="" log_dir="" grace=60 seen_dashdash=0
need_value() { # OPTION REMAINING_ARGS: the option's value must be there
    [ "$2" -ge 2 ] || die_usage "$1 needs a value"
}
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --) shift; seen_dashdash=1; break ;;
        -n|--nproc-per-node) need_value "$1" $#; nproc="$2"; shift 2 ;;
        --nproc-per-node=*) nproc="${1#*=}"; shift ;;
        --nnodes) need_value "$1" $#; nnodes="$2"; shift 2 ;;
        --nnodes=*) nnodes="${1#*=}"; shift ;;
        --node-rank) need_value "$1" $#; node_rank="$2"; shift 2 ;;
        --node-rank=*) node_rank="${1#*=}"; shift ;;
        --master) need_value "$1" $#; master="$2"; shift 2 ;;
        --master=*) master="${1#*=}"; shift ;;
        --log-dir) need_value "$1" $#; log_dir="$2"; shift 2 ;;
        --log-dir=*) log_dir="${1#*=}"; shift ;;
        --grace) need_value "$1" $#; grace="$2"; shift 2 ;;
        --grace=*) grace="${1#*=}"; shift ;;
        -*) die_usage "unknown option '$1'" ;;
        *) die_usage "expected '--' before the command (got '$1'); e.g. scripts/launch.sh -n 2 -- ./train_gpt --config FILE" ;;
    esac
done
[ "$seen_dashdash" = 1 ] || die_usage "missing '--' and the command to run; e.g. scripts/launch.sh -n 2 -- ./train_gpt --config FILE"
[ $# -gt 0 ] || die_usage "no command after '--'"

is_pos_int() { [[ "$1" =~ ^[1-9][0-9]{0,5}$ ]]; }
[ -n "$nproc" ] || die_usage "-n N (ranks on this node) is required"
is_pos_int "$nproc" || die_usage "-n must be a positive integer, got '$nproc'"
is_pos_int "$nnodes" || die_usage "--nnodes must be a positive integer, got '$nnodes'"
[[ "$node_rank" =~ ^(0|[1-9][0-9]{0,5})$ ]] || die_usage "--node-rank must be a non-negative integer, got '$node_rank'"
[ "$node_rank" -lt "$nnodes" ] ||
    die_usage "--node-rank $node_rank is out of range: with --nnodes $nnodes it must be 0..$((nnodes - 1))"
[ "$nnodes" -eq 1 ] || [ -n "$master" ] ||
    die_usage "--nnodes $nnodes needs --master HOST:PORT (global rank 0's node), the same on every node"
[[ "$grace" =~ ^[0-9]{1,4}(\.[0-9]{1,6})?$ ]] || die_usage "--grace must be a number of seconds, got '$grace'"

master_addr="" master_port=""
if [ -n "$master" ]; then
    if [[ "$master" =~ ^\[([0-9A-Fa-f:.]+)\]:([0-9]+)$ ]] || [[ "$master" =~ ^([^:[:space:]]+):([0-9]+)$ ]]; then
        master_addr="${BASH_REMATCH[1]}"
        master_port="${BASH_REMATCH[2]}"
    else
        die_usage "--master must be HOST:PORT (or [IPV6]:PORT), got '$master'"
    fi
    if ! [[ "$master_port" =~ ^[1-9][0-9]{0,4}$ ]] || [ "$master_port" -gt 65535 ]; then
        die_usage "--master port must be 1..65535, got '$master_port'"
    fi
fi

if ! command -v -- "$1" >/dev/null 2>&1; then
    echo "$prog: error: command not found or not executable: $1" >&2
    exit 127
fi
command -v setsid >/dev/null 2>&1 || { echo "$prog: error: setsid (util-linux) is needed" >&2; exit 2; }

# ---- master address and port ---------------------------------------------------
port_in_use() { # PORT: true when something on this host uses it
    local out
    if out=$(ss -Htan "( sport = :$1 )" 2>/dev/null); then
        [ -n "$out" ]
    else
        timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
    fi
}
if [ -z "$master_addr" ]; then
    master_addr=127.0.0.1
    # Below Linux's default ephemeral range (32768-60999), so outgoing
    # connections do not take it in the meantime.
    for _ in $(seq 50); do
        master_port=$((20000 + (RANDOM * 32768 + RANDOM) % 12768))
        port_in_use "$master_port" || break
    done
fi

# ---- log directory ---------------------------------------------------------------
if [ -z "$log_dir" ]; then
    log_dir="launch_logs/$(date +%Y%m%d-%H%M%S)"
    [ -e "$log_dir" ] && log_dir="$log_dir-$$"
fi
mkdir -p -- "$log_dir" 2>/dev/null || { echo "$prog: error: cannot create log directory '$log_dir'" >&2; exit 2; }
[ -w "$log_dir" ] || { echo "$prog: error: log directory '$log_dir' is not writable" >&2; exit 2; }

world=$((nproc * nnodes))
rank0=$((node_rank * nproc))
say "$nproc rank(s) on node $node_rank of $nnodes (ranks $rank0..$((rank0 + nproc - 1)) of $world), master $master_addr:$master_port"
if [ "$rank0" -eq 0 ]; then
    say "rank 0 prints here; logs: $log_dir/rank_<RANK>.log"
else
    say "logs: $log_dir/rank_<RANK>.log"
fi

# ---- threads per rank ----------------------------------------------------------------
# Unset, every rank's OpenMP would start a thread per core: N ranks then
# fight over the cores (2 ranks on 2 cores: twice as slow a step).
# (nproc itself answers OMP_NUM_THREADS and OMP_THREAD_LIMIT when they are set.)
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
[[ "$cores" =~ ^[1-9][0-9]*$ ]] || cores=1
if [ -z "${OMP_NUM_THREADS:-}" ]; then
    threads=$((cores / nproc))
    [ "$threads" -ge 1 ] || threads=1
    export OMP_NUM_THREADS=$threads
    say "OMP_NUM_THREADS=$threads for each rank ($cores core(s) / $nproc rank(s); set OMP_NUM_THREADS to choose)"
else
    say "OMP_NUM_THREADS=$OMP_NUM_THREADS for each rank (as set)"
fi
[ "$nproc" -le "$cores" ] ||
    say "warning: $nproc ranks on $cores core(s): ranks share cores and every step waits for the slowest"

# ---- start the ranks ---------------------------------------------------------------
# Each rank runs under setsid: its own session and process group (id = its
# pid), so it can be stopped with everything it started, and a Ctrl-C on the
# terminal reaches only the launcher, which then stops the ranks in order.
# A rank is the launcher's background job, so bash starts it with SIGINT and SIGQUIT ignored;
# env puts them back to their defaults, as a rank started by hand (or by torchrun) has them.
rank_start=(setsid)
env --default-signal=INT,QUIT true 2>/dev/null && rank_start=(setsid env '--default-signal=INT,QUIT')
declare -a pids=()       # per local rank: pid = process group id
declare -A local_of=()   # pid -> local rank
declare -A running=()    # pid -> 1 until its status is collected
stopping=0
ticker=""
have_ps=0
ps -e -o pgid=,stat= >/dev/null 2>&1 && have_ps=1

# Bash's `wait -n` alone can miss a rank: a job killed by a signal may be
# reported ("notified") before `wait -n` looks for it. So every wake-up also
# sweeps: a rank that bash no longer lists as running has ended, and
# `wait PID` still returns its status.
ended=()
find_ended() { # sets ended=(the running ranks that have ended)
    # Not in a subshell or pipeline: those may not see this shell's jobs
    # (a command substitution of `jobs` alone does).
    local alive pid
    alive=$(jobs -rp; jobs -sp)   # running or stopped
    alive=" ${alive//$'\n'/ } "
    ended=()
    for pid in "${!running[@]}"; do
        [[ "$alive" == *" $pid "* ]] || ended+=("$pid")
    done
}
live_groups() { # our ranks' process groups that still have a live member
    # Zombies do not count: an orphan's zombie lingers until init reaps it.
    local pg
    if [ "$have_ps" = 1 ]; then
        ps -e -o pgid=,stat= 2>/dev/null |
            awk -v want=" ${pids[*]} " '$2 !~ /^Z/ && index(want, " " $1 " ") { print $1 }' | sort -u
    else
        for pg in "${pids[@]}"; do kill -0 -- "-$pg" 2>/dev/null && echo "$pg"; done
    fi
}
usecs() { # SECONDS[.FRACTION] -> microseconds
    local int="${1%%.*}" frac=""
    [[ "$1" == *.* ]] && frac="${1#*.}"
    frac="${frac}000000"
    echo $((10#$int * 1000000 + 10#${frac:0:6}))
}
now_us() { echo "${EPOCHREALTIME//[!0-9]/}"; }

stop_all() { # GRACE_SECONDS: SIGTERM every rank's group, SIGKILL after the grace
    local pg pid deadline
    # SIGCONT: a stopped rank cannot act on SIGTERM until it runs again.
    for pg in "${pids[@]}"; do kill -TERM -- "-$pg" 2>/dev/null; kill -CONT -- "-$pg" 2>/dev/null; done
    deadline=$(($(now_us) + $(usecs "$1")))
    # Until the deadline: collect the ranks as they end, and wait for what
    # they started in their groups to end too.
    while [ "$(now_us)" -lt "$deadline" ]; do
        find_ended
        for pid in "${ended[@]}"; do wait "$pid" 2>/dev/null; unset "running[$pid]"; done
        [ ${#running[@]} -eq 0 ] && [ -z "$(live_groups)" ] && break
        sleep 0.05
    done
    for pg in $(live_groups); do
        say "rank $((rank0 + local_of[$pg])) did not stop within ${1}s of SIGTERM; sending SIGKILL"
        kill -KILL -- "-$pg" 2>/dev/null
    done
    # SIGKILL cannot be refused: collect the last ones.
    [ ${#running[@]} -eq 0 ] || wait "${!running[@]}" 2>/dev/null
    running=()
}
# shellcheck disable=SC2317  # invoked by the traps below
on_signal() { # NAME STATUS
    if [ "$stopping" = 1 ]; then
        say "got SIG$1 again: killing all ranks now"
        for pg in "${pids[@]}"; do kill -KILL -- "-$pg" 2>/dev/null; done
        exit "$2"
    fi
    stopping=1
    say "got SIG$1: stopping all ranks (SIGTERM, SIGKILL after ${grace}s; signal again to kill now)"
    stop_all "$grace"
    wait_tees
    exit "$2"
}
passed_usr1=0
# shellcheck disable=SC2317  # invoked by the trap below
pass_usr1() { # Slurm's warning before the time limit: the ranks decide what to do
    passed_usr1=1
    say "got SIGUSR1: passing it on to every rank"
    for pg in "${pids[@]}"; do kill -USR1 -- "-$pg" 2>/dev/null; done
}
trap pass_usr1 USR1
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP
# Last resort on any exit path (including a bug in this script): nothing survives.
trap 'for pg in "${pids[@]}"; do kill -KILL -- "-$pg" 2>/dev/null; done
      [ -z "$ticker" ] || kill "$ticker" 2>/dev/null' EXIT

# Rank 0's stdout and stderr each go through their own tee, so the terminal
# keeps them apart. The tees belong to the launcher, not to rank 0's process
# group, and ignore the stop signals: a rank that saves a checkpoint on
# SIGTERM can still print where. They end when rank 0 closes its output;
# the launcher waits for them before it exits (wait_tees).
tee_pids=()
start_rank0_tees() { # LOG: opens fds rank0_out and rank0_err
    exec {rank0_out}> >(trap '' INT TERM HUP USR1; exec tee -a "$1")
    tee_pids+=("$!")
    exec {rank0_err}> >(trap '' INT TERM HUP USR1; exec tee -a "$1" >&2)
    tee_pids+=("$!")
}
wait_tees() { # at most 5 s: the rank's output is flushed once it has exited
    local pid i
    for pid in "${tee_pids[@]}"; do
        for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    done
}

for ((lr = 0; lr < nproc; lr++)); do
    r=$((rank0 + lr))
    log="$log_dir/rank_$r.log"
    : >"$log" || { say "error: cannot write $log"; stop_all 0; exit 1; }
    export RANK=$r WORLD_SIZE=$world LOCAL_RANK=$lr LOCAL_WORLD_SIZE=$nproc NODE_RANK=$node_rank \
           MASTER_ADDR=$master_addr MASTER_PORT=$master_port
    if [ "$r" -eq 0 ]; then
        start_rank0_tees "$log"
        "${rank_start[@]}" "$@" 1>&"$rank0_out" 2>&"$rank0_err" &
        exec {rank0_out}>&- {rank0_err}>&-
    else
        "${rank_start[@]}" "$@" </dev/null >"$log" 2>&1 &
    fi
    pid=$!
    pids+=("$pid")
    local_of[$pid]=$lr
    running[$pid]=1
done
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE NODE_RANK MASTER_ADDR MASTER_PORT

# ---- watch them -------------------------------------------------------------------
# From here on the launcher's own stderr is fd 9; fd 2 goes to /dev/null so
# that bash's job notices ("Killed ...") do not clutter the terminal.
exec 9>&2 2>/dev/null
say_fd=9

signame() { # STATUS: " (killed by signal N, SIGxxx)" when STATUS is 128+N
    local s
    if [ "$1" -gt 128 ] && s=$(kill -l "$(($1 - 128))" 2>/dev/null); then
        echo " (killed by signal $(($1 - 128)), SIG$s)"
    fi
}
failed_pid="" failed_st=0
collect() { # PID STATUS: records the first failure
    unset "running[$1]"
    if [ "$2" -ne 0 ] && [ -z "$failed_pid" ]; then failed_pid=$1 failed_st=$2; fi
}
while [ ${#running[@]} -gt 0 ] && [ -z "$failed_pid" ]; do
    # Wake on the first rank to end, or after a second to sweep.
    sleep 1 & ticker=$!
    who=""
    wait -n -p who "${!running[@]}" "$ticker"
    st=$?
    kill "$ticker" 2>/dev/null; wait "$ticker"; ticker=""
    # A trapped signal (SIGUSR1) ends `wait` early and may leave `who` unset.
    [ -n "${who:-}" ] && [ -n "${running[$who]:-}" ] && collect "$who" "$st"
    find_ended
    for pid in "${ended[@]}"; do wait "$pid"; collect "$pid" $?; done
done
stopping=1
if [ -n "$failed_pid" ]; then
    r=$((rank0 + local_of[$failed_pid]))
    if [ "$passed_usr1" = 1 ] && [ "$failed_st" = 138 ]; then
        # What train_gpt does on SIGUSR1: save, then exit 128 + 10.
        say "rank $r stopped on the SIGUSR1 passed on to it (exit status 138); waiting for the others"
        stop_all "$grace"
        wait_tees
        exit 138
    fi
    say "rank $r (pid $failed_pid) failed with exit status $failed_st$(signame "$failed_st")"
    [ ${#running[@]} -eq 0 ] || say "stopping the other ${#running[@]} rank(s) on this node"
    stop_all "$grace"
    wait_tees
    say "last 20 lines of $log_dir/rank_$r.log:"
    tail -n 20 -- "$log_dir/rank_$r.log" | sed 's/^/  | /' >&9
    say "exiting with status $failed_st (rank $r failed)"
    exit "$failed_st"
fi
# Every rank exited 0; stop anything a rank left behind in its process group.
stop_all "$grace"
wait_tees
say "all $nproc rank(s) exited 0"
exit 0
