#!/usr/bin/env bash
# The CUDA emulation under its two sanitizers (tests/emu: EMU_RACE=1, the
# data-race check; EMU_ASAN=1, AddressSanitizer): every quick kernel check
# and two training runs with no race found, and no kernel reading or writing
# outside its memory. Their builds are two more compiles of the kernels, so
# make test leaves this suite to CI (.ci/run: make test-sanitizers); run it
# after changing kernels/cuda or tests/emu.
# tier: sanitizers
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" cuda_emu_sanitizers
export OMP_NUM_THREADS=1

# The two builds side by side (each one compiler at a time, mostly); AddressSanitizer's
# is of the kernel checks alone (build.sh checks), all that runs under it here.
# The race check's comes after the plain build (in CI, make test's, up to date
# here), whose uninstrumented objects it copies (build.sh).
{ bash tests/emu/build.sh train && EMU_RACE=1 bash tests/emu/build.sh train; } >"$tmp/race_build.out" 2>&1 &
race_build_pid=$!
EMU_ASAN=1 bash tests/emu/build.sh checks >"$tmp/asan_build.out" 2>&1 &
asan_build_pid=$!
# shellcheck source=tests/emu/trainer_fixture.sh
source tests/emu/trainer_fixture.sh

# check_copied_objects: the race build's objects that the plain build made by
# the same compile (the same key) are byte for byte the plain build's, the
# instrumented kernels (cu_*.o) are not among them, and when the race build
# ran here it copied each of those objects rather than compiling it.
check_copied_objects() {
    local key same=0 bad="" line
    for key in build/emu-race/obj/*.o.key; do
        local obj=${key%.key} name
        name=$(basename "$obj")
        cmp -s "$key" "build/emu/obj/$name.key" || continue
        same=$((same + 1))
        [[ $name == cu_* ]] && bad="$bad $name(instrumented)"
        cmp -s "$obj" "build/emu/obj/$name" || bad="$bad $name(differs)"
    done
    if [ -z "$bad" ] && [ $same -ge 100 ]; then ok "race_build_shares_plain_objects ($same objects made by the same compile)"
    else not_ok race_build_shares_plain_objects "$same objects with the plain build's key, want 100 or more; wrong:$bad"; fi
    line=$(grep "^build.sh: of .* objects, .* copied from builds beside build/emu-race" "$tmp/race_build.out") || return 0 # up to date: built before
    local copied kept
    copied=$(sed -E 's/.*objects, ([0-9]+) copied.*/\1/' <<<"$line") kept=$(sed -E 's/.* and ([0-9]+) kept.*/\1/' <<<"$line")
    if [ $((copied + kept)) = $same ]; then ok "race_build_copies_what_it_shares ($copied copied, $kept kept)"
    else not_ok race_build_copies_what_it_shares "want $same copied or kept: $line"; fi
}

# sanitized_kernels FLAVOUR CHECK FINDING MODES [ENV=...]: the quick kernel
# checks in build/emu-FLAVOUR (a sanitizer's build), in each of MODES
# ("plain chunked" or "plain"), one line each (tests/t_cuda_emu.sh runs the
# checks themselves): all pass, and no FINDING is printed.
sanitized_kernels() {
    local flavour=$1 check=$2 finding=$3 modes=$4 mode out rc summary
    shift 4
    local -A pid
    for mode in $modes; do # side by side: each is one thread
        local envs=("$@")
        [ $mode = chunked ] && envs+=(EMU_SCRATCH_BYTES=12000)
        env "${envs[@]}" "build/emu-$flavour/test_cuda_kernels_emu" --quick >"$tmp/${flavour}_$mode.out" 2>&1 &
        pid[$mode]=$!
    done
    for mode in $modes; do
        out="$tmp/${flavour}_$mode.out"
        wait "${pid[$mode]}"
        rc=$?
        summary=$(grep -E "^[0-9]+ passed, 0 failed" "$out")
        if [ $rc = 0 ] && [ -n "$summary" ] && ! grep -q "$finding" "$out"
        then ok "${flavour}_${mode}_$check ($summary)"
        else not_ok "${flavour}_${mode}_$check" "exit $rc: $(grep -m3 "$finding\|SUMMARY\|^not ok" "$out" | tr '\n' ' ')"; fi
    done
}

# The data-race check (tests/emu/emu_race.cpp, EMU_RACE=1): its own test
# (racy kernels reported, their synchronized twins not), then every kernel
# check (the quick sizes) and training steps (bf16 with dropout at head size 64 and T = 80,
# the tensor-core attention; fp32 with the step replayed as a CUDA graph),
# with no race found.
race_kernels_pid=""
if wait $race_build_pid; then
    ok race_build
    check_copied_objects
    build/emu-race/test_emu_race >"$tmp/race_self.out" 2>&1 || failed=1
    sed -nE "s|^(not )?ok (.*)|\1ok race_check: \2|p" "$tmp/race_self.out"
    grep -q '^ok report_names_both_lines' "$tmp/race_self.out" || not_ok race_check "$(tail -n 2 "$tmp/race_self.out" | tr '\n' ' ')"
    # Not also chunked (AddressSanitizer's run below is): the chunked paths
    # launch the same kernels at other offsets, and since the check follows
    # Hopper's syncs (vector clocks) one run costs about 130 s of a core: the
    # training runs below, then AddressSanitizer's runs, take the other core
    # meanwhile (it is waited for at the end).
    (failed=0; sanitized_kernels race kernels_race_free "data race\|fence.proxy.async" plain; exit $failed) &
    race_kernels_pid=$!
    # bench_wgmma's staging (plain stores, then the tensor core's reads) and products
    build/emu-race/bench_wgmma_emu --quick >"$tmp/race_wgmma.out" 2>&1
    rc=$?
    if [ $rc = 0 ] && grep -q '^ok bench_wgmma_sums_exact' "$tmp/race_wgmma.out" && ! grep -q "data race\|fence.proxy.async" "$tmp/race_wgmma.out"
    then ok race_bench_wgmma_race_free
    else not_ok race_bench_wgmma_race_free "exit $rc: $(grep -m3 "data race\|fence.proxy\|^not ok" "$tmp/race_wgmma.out" | tr '\n' ' ')"; fi
    # race_train NAME [--set ...]: a run of the race build, which must find no race
    race_train() {
        local name="race_train_$1"; shift
        train "$name" build/emu-race/train_gpt_emu --set device=cuda --set out.eval_every=2 "$@" && ! grep -q "data race" "$tmp/$name.out"
    }
    if race_train bf16_hs64 --set train.precision=bf16 --set model.dropout=0.1 --set model.n_embd=128 --set model.n_head=2 \
        --set model.seq_len=80 --set train.recompute=selective
    then ok race_train_bf16_hs64_race_free
    else not_ok race_train_bf16_hs64_race_free "$(grep -m3 "data race\|rror" "$tmp/race_train_bf16_hs64.out" | tr '\n' ' ')"; fi
    if race_train fp32_graph --set train.precision=fp32 "${graph[@]}" && grep -q "captured as a CUDA graph" "$tmp/race_train_fp32_graph.out"
    then ok race_train_fp32_graph_race_free
    else not_ok race_train_fp32_graph_race_free "$(grep -m3 "data race\|rror\|graph" "$tmp/race_train_fp32_graph.out" | tr '\n' ' ')"; fi
else
    not_ok race_build "$(tail -n 5 "$tmp/race_build.out" | tr '\n' ' ')"
fi

# AddressSanitizer (EMU_ASAN=1): no kernel reads or writes outside its
# allocation or its shared arrays (on a GPU, an illegal address or silent
# corruption), at the quick sizes, plain and chunked.
if wait $asan_build_pid; then
    asan=(asan kernels_in_bounds AddressSanitizer)
    if [ -n "$race_kernels_pid" ]; then # one after the other while the race check's run, the longest, holds the other core
        sanitized_kernels "${asan[@]}" plain ASAN_OPTIONS=detect_leaks=0
        sanitized_kernels "${asan[@]}" chunked ASAN_OPTIONS=detect_leaks=0
    else
        sanitized_kernels "${asan[@]}" "plain chunked" ASAN_OPTIONS=detect_leaks=0
    fi
else
    not_ok asan_build "$(tail -n 5 "$tmp/asan_build.out" | tr '\n' ' ')"
fi
if [ -n "$race_kernels_pid" ]; then wait "$race_kernels_pid" || failed=1; fi

exit $failed
