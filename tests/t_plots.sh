#!/usr/bin/env bash
# scripts/plot_log.sh: from a two-run fixture (null values, a skipped step, a
# resume marker, eval lines) it writes a PNG (signature, a plausible size,
# file(1) says PNG image, 2x2 panels' size) at -o and by default in the first
# run directory; HellaSwag lines add a third row (and only they do); a missing log, a log without train lines and bad arguments
# fail with a message naming the problem, a non-zero status and no PNG.
# Prints "ok NAME" or "not ok NAME - reason" per check.
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" plots
plot=scripts/plot_log.sh

# two runs: lr 1e-3 and 3e-3; run b skipped step 4 and resumed at step 5
mkdir -p "$tmp/run_a" "$tmp/run_b" "$tmp/empty"
for s in 1 2 3 4 5 6 7 8; do
    echo "{\"step\":$s,\"loss\":$(awk -v s=$s 'BEGIN{print 6-s*0.4}'),\"lr\":1e-3,\"grad_norm\":1.5,\"ms\":10,\"tok_per_s\":$((1000 + s)),\"mfu\":null}"
    [ $((s % 4)) -eq 0 ] && echo "{\"step\":$s,\"val_loss\":$(awk -v s=$s 'BEGIN{print 6.2-s*0.3}')}"
done >"$tmp/run_a/log.jsonl"
{
    echo '{"budget_bytes_per_rank":{"total":1000},"tp":1,"dp":1}'
    echo '{"step":1,"loss":5.9,"lr":3e-3,"grad_norm":2,"ms":11,"tok_per_s":900,"mfu":null}'
    echo '{"step":2,"loss":null,"lr":3e-3,"grad_norm":null,"ms":11,"tok_per_s":900,"mfu":null}'
    echo '{"step":3,"loss":5.1,"lr":3e-3,"grad_norm":2,"ms":11,"tok_per_s":null,"mfu":null}'
    echo '{"step":4,"loss":null,"lr":3e-3,"grad_norm":null,"ms":11,"tok_per_s":910,"skipped":true}'
    echo '{"step":4,"val_loss":null}'
    echo '{"step":4,"resumed":true}'
    echo '{"step":5,"loss":4.6,"lr":3e-3,"grad_norm":2,"ms":11,"tok_per_s":905,"mfu":null}'
    echo '{"step":6,"loss":4.4,"lr":3e-3,"grad_norm":2,"ms":11,"tok_per_s":908,"mfu":null}'
    echo '{"step":8,"val_loss":4.5}'
    echo '{"mem_peak_mib_by_rank":[12.5]}'
} >"$tmp/run_b/log.jsonl"
echo '{"budget_bytes_per_rank":{"total":1000}}' >"$tmp/empty/log.jsonl"

is_png() { # FILE [HEIGHT]: PNG signature, more than 10 kB, file(1) agrees, 1200 x HEIGHT (900: 2x2 panels)
    local f="$1" height="${2:-900}" sig
    [ -f "$f" ] || { echo "$f missing"; return 1; }
    sig=$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')
    [ "$sig" = 89504e470d0a1a0a ] || { echo "signature $sig"; return 1; }
    [ "$(stat -c %s "$f")" -gt 10000 ] || { echo "only $(stat -c %s "$f") bytes"; return 1; }
    file "$f" | grep -q "PNG image data, 1200 x $height" || { echo "file says: $(file -b "$f")"; return 1; }
}

out=$("$plot" -o "$tmp/both.png" "$tmp/run_a" "$tmp/run_b" 2>&1); rc=$?
why=$(is_png "$tmp/both.png")
if [ $rc -eq 0 ] && [ -z "$why" ]; then ok plot_two_runs; else not_ok plot_two_runs "status $rc, $why: $out"; fi

out=$("$plot" "$tmp/run_b/" 2>&1); rc=$?
why=$(is_png "$tmp/run_b/loss.png")
if [ $rc -eq 0 ] && [ -z "$why" ]; then ok plot_default_output; else not_ok plot_default_output "status $rc, $why: $out"; fi

# the legend names each run by its directory, and the null, skipped and resume lines are not points
"$plot" -o "$tmp/t.png" --gp "$tmp/t.gp" "$tmp/run_a" "$tmp/run_b" >/dev/null 2>&1
if grep -q "title 'run_a'" "$tmp/t.gp" && grep -q "title 'run_b'" "$tmp/t.gp"; then ok plot_legend_names_runs
else not_ok plot_legend_names_runs "no series titled run_a and run_b in $tmp/t.gp"; fi
b_train=$(sed -n '/^\$train_1 << EOD/,/^EOD/p' "$tmp/t.gp" | sed '1d;$d' | tr '\n' ';')
want='1 5.9 0.003 900;2 NaN 0.003 900;3 5.1 0.003 NaN;5 4.6 0.003 905;6 4.4 0.003 908;'
if [ "$b_train" = "$want" ]; then ok plot_tolerates_null_skipped_resumed
else not_ok plot_tolerates_null_skipped_resumed "run_b's train table '$b_train', want '$want'"; fi

# HellaSwag lines (out.hellaswag) add a third row: acc_norm and acc per step,
# a null left out as the others; a run without them draws "no data" there.
mkdir -p "$tmp/run_h"
{
    echo '{"step":1,"loss":5.9,"lr":3e-3,"grad_norm":2,"ms":11,"tok_per_s":900,"mfu":null}'
    echo '{"step":2,"loss":5.5,"lr":3e-3,"grad_norm":2,"ms":11,"tok_per_s":900,"mfu":null}'
    echo '{"step":2,"val_loss":5.6}'
    echo '{"step":2,"hellaswag_acc_norm":0.255,"hellaswag_acc":0.25}'
    echo '{"step":4,"hellaswag_acc_norm":0.2625,"hellaswag_acc":null}'
} >"$tmp/run_h/log.jsonl"
out=$("$plot" -o "$tmp/h.png" --gp "$tmp/h.gp" "$tmp/run_h" "$tmp/run_a" 2>&1); rc=$?
why=$(is_png "$tmp/h.png" 1350)
h_table=$(sed -n '/^\$hs_0 << EOD/,/^EOD/p' "$tmp/h.gp" | sed '1d;$d' | tr '\n' ';')
if [ $rc -eq 0 ] && [ -z "$why" ] && [ "$h_table" = "2 0.255 0.25;4 0.2625 NaN;" ] &&
    grep -q "set title 'HellaSwag acc_norm'" "$tmp/h.gp" && grep -q "set multiplot layout 3,2" "$tmp/h.gp"; then
    ok plot_hellaswag_row
else not_ok plot_hellaswag_row "status $rc, $why, table '$h_table': $out"; fi
if ! grep -q "HellaSwag\|layout 3,2" "$tmp/t.gp"; then ok plot_no_hellaswag_row_without_it
else not_ok plot_no_hellaswag_row_without_it "runs without hellaswag lines drew the row"; fi

fails() { # NAME EXPECTED_MESSAGE_PART ARGS...: non-zero, the message, no PNG left behind
    local name="$1" msg="$2"; shift 2
    rm -f "$tmp/bad.png"
    out=$("$plot" -o "$tmp/bad.png" "$@" 2>&1); rc=$?
    if [ $rc -ne 0 ] && grep -qF -- "$msg" <<<"$out" && [ ! -e "$tmp/bad.png" ] && [ "$(wc -l <<<"$out")" -le 2 ]; then ok "$name"
    else not_ok "$name" "status $rc, png $([ -e "$tmp/bad.png" ] && echo written || echo absent), output: $out"; fi
}
fails missing_log "$tmp/nowhere/log.jsonl: no such file" "$tmp/run_a" "$tmp/nowhere"
fails no_train_lines "$tmp/empty/log.jsonl: no train lines" "$tmp/empty"
fails no_run_dir "no RUN_DIR given"
fails bad_option "unknown option '--x'" --x "$tmp/run_a"
exit "$failed"
