#!/usr/bin/env bash
# scripts/attention_verdicts.py: what a sitting's bench_attention rows decide.
# On rows written here by hand (as an H200 might print them, between other
# log lines): each row against its reference (the row every run takes
# under kernels.attention=auto, or the tuned mma.sync shape for the
# mma.sync kernels' other shapes and orders), fastest first; "clear" only
# when the row's slowest call beat the reference's fastest, "likely" for a
# median at least 2% below, "no" otherwise, "failed" for a row whose check
# failed however fast; the action named for the row that wins; a shape
# with no every-run row said so; a missing file and a file without rows
# refused with the file's name.
# tier: check
# cost: 1 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" attention_verdicts
verdicts="$PWD/scripts/attention_verdicts.py"

# row SHAPE OP BLOCK ORDER MEDIAN MIN MAX CHECK
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t100.0\t0.12\t%s\n' "$@"; }
WS='wgmma_ws: 128 query rows a block (2 consumer warpgroups), 128 keys a tile, TMA 3 stages (2 at head sizes 96 and 128)'
SLOTS='wgmma: 128 keys a block (64 a warpgroup), 64-row query tiles, TMA 3 stages, dq by slots'
{
    echo "== attention"
    echo "# bench_attention on device 0: NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)"
    printf 'shape\top\tblock\torder\tms_median\tms_min\tms_max\ttflops\tof_ceiling\tcheck\n'
    row 16,12,1024,64 forward "tuned: 32 query rows a warp, 64 keys a tile, Q in registers, 2 blocks/SM" "pairs first" 0.2000 0.1980 0.2030 "same bits"
    row 16,12,1024,64 forward "tuned: 32 query rows a warp, 64 keys a tile, Q in registers, 2 blocks/SM" "tiles first" 0.1990 0.1970 0.2050 "same bits"
    row 16,12,1024,64 forward "16 query rows a warp, 64 keys a tile, Q in registers, 3 blocks/SM" "pairs first" 0.1900 0.1880 0.1960 "same bits"
    row 16,12,1024,64 forward "$WS" "pairs first" 0.1500 0.1480 0.1530 "err=0.00098"
    row 16,12,1024,64 forward "wgmma_ws poly4: as the wgmma_ws row, one exponential in 4 by a cubic on the FMA units (head size 64)" "pairs first" 0.1400 0.1390 0.1410 "err=0.00196"
    row 16,12,1024,64 forward "wgmma_ws persistent: wgmma_ws's blocks, one an SM, each over its share of the query tiles (head sizes 64 and 96)" "pairs first" 0.1450 0.1440 0.1490 "err=0.00098"
    row 16,12,1024,64 forward "wgmma_ws poly8: as the wgmma_ws row, one exponential in 8 by a cubic on the FMA units (head size 64)" "pairs first" 0.1300 0.1290 0.1310 "not ok: too far (err=0.5)"
    echo "# profile 16,12,1024,64 wgmma_ws: one call with the clock reads took 0.1600 ms"
    row 16,12,1024,64 backward "tuned: dq: 32 query rows a warp, dk dv: 16 keys a warp" "pairs first" 0.6000 0.5900 0.6100 "same bits"
    row 16,12,1024,64 backward "$SLOTS" "pairs first" 0.4000 0.3950 0.4050 "same bits"
    row 16,12,1024,64 backward "wgmma: as the slots row, two stages of Q and dout (not three)" "pairs first" 0.3960 0.3900 0.4100 "same bits"
    row 16,12,1024,64 backward "wgmma: dq by slots summed in the kernel, rounds of at most 24 MB of dq slots" "pairs first" 0.3700 0.3650 0.3800 "same bits"
    row 8,16,1024,96 forward "tuned: 16 query rows a warp, 64 keys a tile, Q in registers, 3 blocks/SM" "pairs first" 0.5800 0.5750 0.5900 "same bits"
    row 8,16,1024,96 forward "$WS" "pairs first" 0.5500 0.5450 0.5600 "err=0.00098"
    row 8,16,1024,128 backward "$SLOTS" "pairs first" 0.9000 0.8900 0.9100 "same bits"
} >"$tmp/attention.log"

out=$("$verdicts" "$tmp/attention.log" 2>&1)
rc=$?
printf '%s\n' "$out" >"$tmp/verdicts.out"
# has PATTERN: a line of the report matches (perl regex)
has() { grep -qP -- "$1" "$tmp/verdicts.out"; }
if [ $rc -eq 0 ] &&
    has '^16,12,1024,64 forward \(reference: the every-run row\)$' &&
    has '^  reference +0\.1500 ms +1\.000 of every run.s +wgmma_ws: 128 query rows' &&
    has '^  clear +0\.1400 ms +0\.933 of every run.s +wgmma_ws poly4:' &&
    has '^ +-> cuda_attention_forward_wgmma_ws launches fw3_launch<64, false, false, 4>' &&
    has '^  likely +0\.1450 ms +0\.967 of every run.s +wgmma_ws persistent:' &&
    has '^ +-> cuda_attention_forward_wgmma_ws \(kernels/cuda/flash_fwd_wgmma_ws.cu\) launches the persistent instance' &&
    has '^  failed +0\.1300 ms .*wgmma_ws poly8:' && ! grep -A1 'wgmma_ws poly8:' "$tmp/verdicts.out" | grep -q -- '->' &&
    has '^  clear +0\.1900 ms +0\.950 of tuned +16 query rows a warp, 64 keys a tile, Q in registers, 3 blocks/SM' &&
    has '^ +-> fm_tuned \(kernels/cuda/flash_fwd.cu\) takes this block shape' &&
    has '^  no +0\.1990 ms +0\.995 of tuned +tuned: .* \(tiles first\)$' &&
    has '^  no +0\.2000 ms +1\.333 of every run.s +tuned: 32 query rows a warp.* \(pairs first\)$' &&
    has '^  no +0\.3960 ms +0\.990 of every run.s +wgmma: as the slots row, two stages' &&
    has '^  clear +0\.3700 ms +0\.925 of every run.s +wgmma: dq by slots summed in the kernel, rounds' &&
    has '^ +-> .*CUDA_WGMMA_DQ_SUMMED, its rounds capped at 24 MB of slots' &&
    has '^  reference +0\.5800 ms +1\.000 of every run.s +tuned: 16 query rows' &&
    has '^  clear +0\.5500 ms +0\.948 of every run.s +wgmma_ws: ' &&
    has '^ +-> choose_measured_fastest \(kernels/cuda/ops_cuda.c\) takes wgmma_ws.s forward at this head size' &&
    has '^8,16,1024,128 backward \(reference: none\)$' && has '^  no row of the kernel every run takes here'; then
    ok verdicts_of_rows
else not_ok verdicts_of_rows "exit $rc: $(tr '\n' '|' <"$tmp/verdicts.out" | cut -c1-600)"; fi
# fastest first within a shape and op
order=$(awk '/^16,12,1024,64 forward/ { f = 1; next } /^[0-9]/ { f = 0 } f' "$tmp/verdicts.out" | grep -oP '^  \S+ +\K[0-9.]+(?= ms)' | tr '\n' ' ')
if [ "$order" = "0.1300 0.1400 0.1450 0.1500 0.1900 0.1990 0.2000 " ]; then ok verdicts_fastest_first
else not_ok verdicts_fastest_first "medians in the order: $order"; fi

out=$("$verdicts" "$tmp/missing.log" 2>&1)
rc=$?
if [ $rc -eq 2 ] && echo "$out" | grep -q "$tmp/missing.log: No such file"; then ok verdicts_missing_file_refused
else not_ok verdicts_missing_file_refused "exit $rc: $out"; fi
echo "no rows here" >"$tmp/empty.log"
out=$("$verdicts" "$tmp/empty.log" 2>&1)
rc=$?
if [ $rc -eq 2 ] && echo "$out" | grep -q "$tmp/empty.log: no bench_attention rows"; then ok verdicts_file_without_rows_refused
else not_ok verdicts_file_without_rows_refused "exit $rc: $out"; fi
exit $failed
