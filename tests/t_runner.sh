#!/usr/bin/env bash
# tests/run.sh itself, on a made-up tree of suites: its closing count and
# exit status, a suite that exits non-zero without a failing check counted
# as one failure, and its scratch directory (about 1.3 GB a full run), which
# it removes when every check passed and it made the directory, keeps and
# names when a check failed, and leaves alone when TG_TMP was given; the quick
# tier (--check), the suites run two at a time (TG_TEST_JOBS), costliest
# first ("# cost: N"), and python3 taken past a version manager's shim. The
# inner runs' output goes to files: its copies of "not ok" lines must not
# reach the outer runner.
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" runner

# tree NAME SUITE...: a root with tests/run.sh and the named suites, each
# "good" (one passing check), "bad" (one failing check) or "crash" (exit 3
# after a passing check)
tree() {
    local d="$tmp/$1" s
    shift
    mkdir -p "$d/tests"
    cp tests/run.sh "$d/tests/run.sh"
    for s in "$@"; do
        case $s in
            good) printf 'echo "ok fine"\n' >"$d/tests/t_good.sh" ;;
            bad) printf 'echo "not ok broken - on purpose"\n' >"$d/tests/t_bad.sh" ;;
            crash) printf 'echo "ok before"\nexit 3\n' >"$d/tests/t_crash.sh" ;;
        esac
    done
}

# inner NAME [ENV...]: runs NAME's tests/run.sh with its own TMPDIR and no
# TG_TMP (unless ENV gives one); output in $tmp/NAME.out, status in $tmp/NAME.rc
inner() {
    local name=$1
    shift
    mkdir -p "$tmp/$name.scratch"
    env -u TG_TMP -u TG_ROOT TMPDIR="$tmp/$name.scratch" "$@" bash "$tmp/$name/tests/run.sh" >"$tmp/$name.out" 2>&1
    echo $? >"$tmp/$name.rc"
}
left() { find "$tmp/$1.scratch" -maxdepth 1 -name 'train_gpt_tests.*' | wc -l; }

tree pass good
inner pass
if [ "$(cat "$tmp/pass.rc")" = 0 ] && [ "$(tail -n 1 "$tmp/pass.out")" = "1 passed, 0 failed" ]; then ok counts_a_pass
else not_ok counts_a_pass "rc $(cat "$tmp/pass.rc"): $(tail -n 2 "$tmp/pass.out" | tr '\n' ' ')"; fi
if [ "$(left pass)" = 0 ]; then ok removes_its_scratch_when_all_passed
else not_ok removes_its_scratch_when_all_passed "$(left pass) scratch directories left in $tmp/pass.scratch"; fi

tree fail good bad crash
inner fail
kept=$(find "$tmp/fail.scratch" -maxdepth 1 -name 'train_gpt_tests.*' | head -n 1)
if [ "$(cat "$tmp/fail.rc")" = 1 ] && [ "$(tail -n 1 "$tmp/fail.out")" = "2 passed, 2 failed" ]; then ok counts_a_failure_and_a_crash
else not_ok counts_a_failure_and_a_crash "rc $(cat "$tmp/fail.rc"): $(tail -n 2 "$tmp/fail.out" | tr '\n' ' ')"; fi
if [ -n "$kept" ] && [ -s "$kept/t_bad.log" ] && grep -qF "stay in $kept" "$tmp/fail.out"; then ok keeps_and_names_its_scratch_after_a_failure
else not_ok keeps_and_names_its_scratch_after_a_failure "kept '$kept': $(grep -F 'stay in' "$tmp/fail.out")"; fi

tree given good
mkdir -p "$tmp/given_tmp"
inner given TG_TMP="$tmp/given_tmp"
if [ "$(cat "$tmp/given.rc")" = 0 ] && [ -s "$tmp/given_tmp/t_good.log" ]; then ok leaves_a_given_tg_tmp
else not_ok leaves_a_given_tg_tmp "rc $(cat "$tmp/given.rc"); $tmp/given_tmp: $(ls "$tmp/given_tmp" 2>&1 | tr '\n' ' ')"; fi

# --check runs only the suites marked "# tier: check".
tree tier good bad
sed -i '1i # tier: check' "$tmp/tier/tests/t_good.sh"
env -u TG_TMP -u TG_ROOT TMPDIR="$tmp" bash "$tmp/tier/tests/run.sh" --check >"$tmp/tier.out" 2>&1
rc=$?
if [ "$rc" = 0 ] && [ "$(tail -n 1 "$tmp/tier.out")" = "1 passed, 0 failed" ] && ! grep -q t_bad "$tmp/tier.out"; then
    ok check_tier_runs_only_the_marked_suites
else not_ok check_tier_runs_only_the_marked_suites "rc $rc: $(tail -n 3 "$tmp/tier.out" | tr '\n' ' ')"; fi

# The sanitizers' tier: left out of a plain run, the only one --sanitizers runs.
tree san good bad
sed -i '1i # tier: sanitizers' "$tmp/san/tests/t_bad.sh"
inner san
env -u TG_TMP -u TG_ROOT TMPDIR="$tmp" bash "$tmp/san/tests/run.sh" --sanitizers >"$tmp/san_only.out" 2>&1
rc=$?
if [ "$(cat "$tmp/san.rc")" = 0 ] && [ "$(tail -n 1 "$tmp/san.out")" = "1 passed, 0 failed" ] && ! grep -q t_bad "$tmp/san.out" &&
    [ "$rc" = 1 ] && [ "$(tail -n 1 "$tmp/san_only.out")" = "0 passed, 1 failed" ] && ! grep -q t_good "$tmp/san_only.out"; then
    ok sanitizers_tier_only_with_its_option
else not_ok sanitizers_tier_only_with_its_option "plain: $(tail -n 1 "$tmp/san.out"); --sanitizers rc $rc: $(tail -n 1 "$tmp/san_only.out")"; fi

# Two suites run at once (TG_TEST_JOBS, default 2): the two below each wait
# (10 s at most) for the other to have started, which only concurrent
# workers satisfy; a failing and a crashing suite beside them are counted
# as when run in turn.
jobs_tree() {
    tree "$1" bad crash
    local d="$tmp/$1/tests"
    printf 'touch "$TG_TMP/a_started"\nfor i in $(seq 100); do [ -e "$TG_TMP/b_started" ] && { echo "ok met"; exit 0; }; sleep 0.1; done\necho "not ok met - the other suite never started"\n' >"$d/t_a.sh"
    printf 'touch "$TG_TMP/b_started"\nfor i in $(seq 100); do [ -e "$TG_TMP/a_started" ] && { echo "ok met"; exit 0; }; sleep 0.1; done\necho "not ok met - the other suite never started"\n' >"$d/t_b.sh"
}
jobs_tree jobs
inner jobs
if [ "$(cat "$tmp/jobs.rc")" = 1 ] && [ "$(tail -n 1 "$tmp/jobs.out")" = "3 passed, 2 failed" ] &&
    grep -q '^\[t_a\] ok met' "$tmp/jobs.out" && grep -q '^\[t_b\] ok met' "$tmp/jobs.out"; then
    ok two_suites_run_at_once_and_count
else not_ok two_suites_run_at_once_and_count "rc $(cat "$tmp/jobs.rc"): $(grep -E 'met|passed' "$tmp/jobs.out" | tr '\n' ' ')"; fi
# One at a time (TG_TEST_JOBS=1): the same suites in turn, so the
# rendezvous cannot happen (this is what makes the check above able to fail).
jobs_tree one_job
inner one_job TG_TEST_JOBS=1
if [ "$(tail -n 1 "$tmp/one_job.out")" = "2 passed, 3 failed" ]; then ok one_job_runs_suites_in_turn
else not_ok one_job_runs_suites_in_turn "$(grep -E 'met|passed' "$tmp/one_job.out" | tr '\n' ' ')"; fi
# The order: "# cost: N" highest first, then by name (unmarked: 0); in turn,
# each suite's closing line comes in the order they ran.
tree order good bad crash
sed -i '1i # cost: 5' "$tmp/order/tests/t_crash.sh"
sed -i '1i # cost: 40 (seconds)' "$tmp/order/tests/t_good.sh"
inner order TG_TEST_JOBS=1
got=$(sed -nE 's/^\[(t_[a-z]+)\] [0-9]+ passed.*/\1/p' "$tmp/order.out" | tr '\n' ' ')
if [ "$got" = "t_good t_crash t_bad " ]; then ok costliest_suites_first
else not_ok costliest_suites_first "ran in the order: $got (want t_good t_crash t_bad)"; fi
# python3 on PATH a shim (as pyenv's, a script that runs the real one): the suites
# get the interpreter it resolves to, first on PATH, so the shim runs once (the
# runner's question), not at each of the suite's three calls.
tree shim good
mkdir -p "$tmp/shim_bin"
printf '#!/bin/sh\necho call >>"%s"\nexec /usr/bin/python3 "$@"\n' "$tmp/shim_calls" >"$tmp/shim_bin/python3"
chmod +x "$tmp/shim_bin/python3"
printf 'for i in 1 2 3; do python3 -c "print(1)" >/dev/null || exit 1; done
[ "$(readlink -f "$(command -v python3)")" = "$(readlink -f /usr/bin/python3)" ] && echo "ok real_python" || echo "not ok real_python - $(command -v python3)"\n' \
    >"$tmp/shim/tests/t_py.sh"
inner shim PATH="$tmp/shim_bin:$PATH"
calls=$(wc -l <"$tmp/shim_calls" 2>/dev/null || echo none)
if [ "$(tail -n 1 "$tmp/shim.out")" = "2 passed, 0 failed" ] && [ "$calls" = 1 ]; then ok suites_skip_a_python_shim
else not_ok suites_skip_a_python_shim "the shim ran $calls times (want 1): $(grep -E 'python|passed' "$tmp/shim.out" | tr '\n' ' ')"; fi
# A bad TG_TEST_JOBS: a message and exit 2, nothing run.
tree bad_jobs good
inner bad_jobs TG_TEST_JOBS=two
if [ "$(cat "$tmp/bad_jobs.rc")" = 2 ] && grep -q "TG_TEST_JOBS=two: not a positive whole number" "$tmp/bad_jobs.out" &&
    ! grep -q t_good "$tmp/bad_jobs.out" && [ "$(left bad_jobs)" = 0 ]; then ok bad_test_jobs_refused
else not_ok bad_test_jobs_refused "rc $(cat "$tmp/bad_jobs.rc"): $(head -n 2 "$tmp/bad_jobs.out" | tr '\n' ' ')"; fi

exit $failed
