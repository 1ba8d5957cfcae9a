#!/usr/bin/env bash
# tests/gpu/block_profile.c, the sums behind bench_attention's '# profile'
# lines (the TMA forward's phase profile: kernels/cuda/block_profile.h), on
# made-up records (tests/gpu/test_block_profile.c). The records a kernel
# writes are checked under the emulation by t_attention_wgmma.
# tier: check (make check: the quick tier, tests/run.sh --check)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" block_profile

tbin="$tmp/test_block_profile"
if ! ${CC:-gcc} -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I. -o "$tbin" tests/gpu/test_block_profile.c \
    tests/gpu/block_profile.c -lm >"$tmp/build.log" 2>&1; then
    not_ok build "$(head -n 5 "$tmp/build.log" | tr '\n' ' ')"
    exit 1
fi
"$tbin" || failed=1
exit $failed
