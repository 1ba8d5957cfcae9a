#!/usr/bin/env bash
# cuBLASLt algorithms chosen per product (kernels.lt_tune, kernels/cuda/lt_tune.h)
# on the emulated device, whose heuristic offers 5 algorithms (same math) of
# which EMU_LT_FASTEST=shape makes number (m + n + k) mod 5 the fastest on the
# events' clock (tests/emu/emu_runtime.cpp): "time" times every candidate and
# keeps that one for every product, prints it once per product and records it
# in out.dir/lt_algos.tsv, the step still captured as a CUDA graph; the record
# given back as kernels.lt_tune pins the same algorithms with nothing timed
# (bitwise the same run), and so does a record found in out.dir under "time"
# (a resumed run); a bad record stops the run before training, naming the
# file, the line and the field. The speed itself needs a GPU (make test-gpu).
# cost: 15 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" lt_tune
export OMP_NUM_THREADS=1

if ! bash tests/emu/build.sh train >"$tmp/build.out" 2>&1; then
    not_ok emu_build "$(tail -n 5 "$tmp/build.out" | tr '\n' ' ')"
    exit 1
fi
emu_bin=build/emu/train_gpt_emu
# shellcheck source=tests/emu/trainer_fixture.sh
source tests/emu/trainer_fixture.sh
export EMU_LT_FASTEST=shape
# A vocabulary of 300 (no padding) and 2 x 20 rows a micro-batch: the products'
# m + n + k fall in 4 classes mod 5, one of which makes the last candidate (4)
# the fastest, so that finding it shows every candidate was timed.
base=(--set device=cuda --set train.precision=bf16 "${graph[@]}" --set model.vocab_multiple=1 --set model.seq_len=20)
# key_algo FILE: each record line's key and algorithm (the fields a pin reads), sorted
key_algo() { grep -v '^#' "$1" | tail -n +2 | cut -f1-13 | sort; }

if train tuned "$emu_bin" "${base[@]}" --set kernels.lt_tune=time; then
    rec="$tmp/tuned/lt_algos.tsv"
    # every line: chosen = (m + n + k) mod 5 among of=5 candidates
    bad=$(awk -F'\t' 'NR > 1 && !/^#/ { split($0, f, "\t"); for (i in f) { split(f[i], kv, "="); v[kv[1]] = kv[2] }
            if (v["chosen"] != (v["m"] + v["n"] + v["k"]) % 5 || v["of"] != 5) print v["m"] "x" v["n"] "x" v["k"] ": " v["chosen"] }' "$rec")
    lines=$(grep -v '^#' "$rec" | tail -n +2 | grep -c .)
    distinct=$(grep -o 'chosen=[0-9]*' "$rec" | sort -u | wc -l)
    printed=$(grep -c "^cuBLASLt .*: algorithm [0-4] of 5, " "$tmp/tuned.out")
    unique=$(grep "^cuBLASLt .*: algorithm" "$tmp/tuned.out" | sort -u | wc -l)
    if [ -z "$bad" ] && [ "$lines" -ge 10 ] && [ "$distinct" -ge 4 ] && grep -q 'chosen=4' "$rec"; then
        ok "lt_tune_times_every_candidate_and_keeps_the_fastest ($lines products, $distinct different choices)"
    else not_ok lt_tune_times_every_candidate_and_keeps_the_fastest "$lines lines, $distinct choices, wrong: $bad"; fi
    if [ "$printed" = "$lines" ] && [ "$unique" = "$lines" ]; then ok "lt_tune_prints_each_choice_once ($printed lines)"
    else not_ok lt_tune_prints_each_choice_once "$printed printed ($unique distinct) for $lines recorded"; fi
    # the step still a CUDA graph; untuned (off, the default): the same bits, so timing the candidates
    # left the outputs as they were (the weight gradients, which accumulate,
    # added to once)
    if grep -q "^step 2: captured as a CUDA graph" "$tmp/tuned.out" &&
        train untuned "$emu_bin" "${base[@]}" && [ ! -e "$tmp/untuned/lt_algos.tsv" ] &&
        out=$("$py" tests/parallel/compare.py "$tmp/untuned" "$tmp/tuned" 6 --bitwise 2>&1); then
        ok "lt_tune_time_keeps_the_graph_capture ($out)"
    else not_ok lt_tune_time_keeps_the_graph_capture "${out:-} $(grep -m2 -i "graph\|error" "$tmp/tuned.out" | tr '\n' ' ')"; fi

    # on the lazy device (stream work runs when the host waits for it): the
    # events still time each candidate, the same choices and bits
    if EMU_LAZY=2 train lazy "$emu_bin" "${base[@]}" --set kernels.lt_tune=time &&
        [ "$(key_algo "$rec")" = "$(key_algo "$tmp/lazy/lt_algos.tsv")" ] &&
        out=$("$py" tests/parallel/compare.py "$tmp/tuned" "$tmp/lazy" 6 --bitwise 2>&1); then
        ok "lt_tune_time_on_the_lazy_device ($out)"
    else not_ok lt_tune_time_on_the_lazy_device "${out:-} $(grep -m2 "rror" "$tmp/lazy.out" | tr '\n' ' ')"; fi

    # the record given back: the same algorithms, nothing timed, the same bits
    if train pinned "$emu_bin" "${base[@]}" --set kernels.lt_tune="$rec" &&
        [ "$(key_algo "$rec")" = "$(key_algo "$tmp/pinned/lt_algos.tsv")" ] && ! grep -q "^cuBLASLt" "$tmp/pinned.out" &&
        out=$("$py" tests/parallel/compare.py "$tmp/tuned" "$tmp/pinned" 6 --bitwise 2>&1); then
        ok "lt_tune_record_pins_the_same_algorithms ($out)"
    else not_ok lt_tune_record_pins_the_same_algorithms "${out:-} $(diff <(key_algo "$rec") <(key_algo "$tmp/pinned/lt_algos.tsv" 2>/dev/null) | head -n 2 | tr '\n' ' ') $(grep -m2 "rror\|^cuBLASLt" "$tmp/pinned.out" | tr '\n' ' ')"; fi
    # "time" over an out.dir that holds a record (a resumed run): pinned from it
    mkdir -p "$tmp/again" && cp "$rec" "$tmp/again/"
    if train again "$emu_bin" "${base[@]}" --set kernels.lt_tune=time && ! grep -q "^cuBLASLt" "$tmp/again.out" &&
        [ "$(key_algo "$rec")" = "$(key_algo "$tmp/again/lt_algos.tsv")" ]; then
        ok lt_tune_time_pins_the_record_already_in_out_dir
    else not_ok lt_tune_time_pins_the_record_already_in_out_dir "$(grep -m2 "rror\|^cuBLASLt" "$tmp/again.out" | tr '\n' ' ')"; fi

    # bad records: NAME, how the good one is spoiled (sed), the message expected
    first=$(grep -n '^ta=' "$rec" | head -n 1 | cut -d: -f1)
    while IFS='|' read -r name spoil want; do
        sed "$spoil" "$rec" >"$tmp/$name.tsv"
        rm -rf "${tmp:?}/$name"
        train "$name" "$emu_bin" "${base[@]}" --set kernels.lt_tune="$tmp/$name.tsv"
        rc=$?
        if [ $rc = 1 ] && grep -qF -- "$want" "$tmp/$name.out" && ! grep -qs '"loss"' "$tmp/$name/log.jsonl"; then ok "lt_tune_refuses_$name"
        else not_ok "lt_tune_refuses_$name" "exit $rc: $(grep -m2 "rror" "$tmp/$name.out" | tr '\n' ' ')"; fi
    done <<EOF
bad_magic|1s/.*/train_gpt_lt_algos	2/|$tmp/bad_magic.tsv:1: not a cuBLASLt algorithm record
bad_algo|${first}s/algo=[0-9a-f]*/algo=12z/|$tmp/bad_algo.tsv:$first: field algo: '12z': want 128 lowercase hex digits
bad_type|${first}s/ab=bf16/ab=fp16/|$tmp/bad_type.tsv:$first: field ab: 'fp16': want bf16 or fp32
missing_field|${first}s/	ldd=[0-9]*//|$tmp/missing_field.tsv:$first: field ldd is missing
unknown_field|${first}s/^/speed=9	/|$tmp/unknown_field.tsv:$first: field speed: '9': unknown field
twice|${first}p|$tmp/twice.tsv:$((first + 1)): the product of line $first again
not_offered|${first}s/algo=\\([0-9a-f]\\{127\\}\\)./algo=\\19/|$tmp/not_offered.tsv:$first: field algo: the algorithm recorded for
EOF
    # "time" over an out.dir whose record another GPU or cuBLAS wrote (an
    # algorithm not offered here): a warning, that product timed afresh
    mkdir -p "$tmp/stale" && cp "$tmp/not_offered.tsv" "$tmp/stale/lt_algos.tsv"
    if train stale "$emu_bin" "${base[@]}" --set kernels.lt_tune=time &&
        grep -q "warning: $tmp/stale/lt_algos.tsv:$first: the algorithm recorded for .* timed afresh" "$tmp/stale.out" &&
        [ "$(grep -c "^cuBLASLt" "$tmp/stale.out")" = 1 ] && [ "$(key_algo "$rec")" = "$(key_algo "$tmp/stale/lt_algos.tsv")" ]
    then ok lt_tune_time_retimes_a_stale_record_in_out_dir
    else not_ok lt_tune_time_retimes_a_stale_record_in_out_dir "$(grep -m2 "rror\|warning" "$tmp/stale.out" | tr '\n' ' ')"; fi
    if train missing_file "$emu_bin" "${base[@]}" --set kernels.lt_tune="$tmp/none.tsv"; then rc=0; else rc=$?; fi
    if [ $rc = 1 ] && grep -q "kernels.lt_tune: $tmp/none.tsv: cannot open the cuBLASLt algorithm record: .* (kernels.lt_tune is off, time or such a file)" "$tmp/missing_file.out"
    then ok lt_tune_refuses_a_missing_record
    else not_ok lt_tune_refuses_a_missing_record "exit $rc: $(grep -m2 "rror" "$tmp/missing_file.out" | tr '\n' ' ')"; fi
else not_ok lt_tune_time "$(tail -n 3 "$tmp/tuned.out" | tr '\n' ' ')"; fi
exit "$failed"
