# The Slurm part of scripts/paper_tables.sh (sourced): 1909.08053's model + data
# parallel columns (64-way DP, 64-512 GPUs), one srun job step per layout, each
# rank a train_gpt process that reads Slurm's variables (parallel/topology.c).
# Uses the caller's out, bin, py, dry, gpn, steps, links, srun_args, die and say.
# shellcheck shell=bash disable=SC2154 # out, bin, py, dry, ... are the sourcing script's

# pt_master: the address rank 0 listens on: MASTER_ADDR, else the allocation's
# first node (scontrol), else (dry run only) the command that finds it
pt_master() {
    if [ -n "${MASTER_ADDR:-}" ]; then
        echo "$MASTER_ADDR"
    elif [ -n "${SLURM_JOB_NODELIST:-}" ] && command -v scontrol >/dev/null 2>&1; then
        scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1
    fi
}

pt_slurm() {
    local scaling="$root/scripts/scaling/scaling.py" master
    command -v srun >/dev/null 2>&1 || [ "$dry" = 1 ] || die "--slurm needs srun on PATH (run inside salloc or sbatch)"
    master=$(pt_master)
    if [ -z "$master" ] && [ "$dry" = 1 ]; then
        # shellcheck disable=SC2016 # printed for the reader to run inside the allocation
        echo 'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1) # in the allocation, before these:'
    fi
    [ -n "$master" ] || [ "$dry" = 1 ] || die "--slurm: no MASTER_ADDR and no Slurm allocation (SLURM_JOB_NODELIST with scontrol): run inside salloc/sbatch or set MASTER_ADDR"
    local dir="$out/slurm" manifest="$out/slurm/manifest.tsv" name cfg t dp gb mb nodes rc
    if [ "$dry" = 0 ]; then
        mkdir -p "$dir/runs" || die "cannot create $dir/runs"
        : >"$manifest"
        # random tokens: timing does not depend on them (scripts/weak_scaling.sh does the same)
        "$py" "$scaling" data "$dir/data" $(( (steps + 2) * 512 * 1025 )) 50257 || die "could not write the token shard"
    fi
    while IFS=$'\t' read -r name cfg t dp gb mb; do
        [ $(( t * dp % gpn )) -eq 0 ] || die "--gpus-per-node $gpn does not divide the $(( t * dp )) GPUs of $name"
        nodes=$(( t * dp / gpn ))
        local run="$dir/runs/$name"
        local pre=(srun --nodes="$nodes" --ntasks="$(( t * dp ))" --ntasks-per-node="$gpn" --gpus-per-node="$gpn"
            "${srun_args[@]}")
        local cmd=("$bin" --config "$cfg"
            --set "parallel.tp=$t" --set "parallel.dp=$dp" --set parallel.sp=false --set train.recompute=full
            --set "train.global_batch=$gb" --set "train.micro_batch=$mb" --set "train.steps=$steps"
            --set "data.train=$dir/data/train_*.bin" --set data.val= --set "out.dir=$run" --set out.resume=false
            --set out.log_every=1 --set out.eval_every=0 --set out.eval_batches=0 --set out.sample_every=0
            --set out.sample_tokens=0 --set out.save_every=0 --set out.save_final=false --set device=cuda)
        # One CUDA graph holding both the TP and the DP communicators' collectives is a mix NCCL
        # says has been seen to deadlock (docs/design.md, "CUDA graphs"): op by op there
        [ "$t" -gt 1 ] && [ "$dp" -gt 1 ] && cmd+=(--set train.cuda_graph=false)
        [ -z "$links" ] || cmd+=(--set "interconnect.table=$links")
        if [ "$dry" = 1 ]; then
            printf '%q ' "${pre[@]}"
            # shellcheck disable=SC2016 # the reader's shell expands it
            if [ -n "$master" ]; then printf '%q ' "--export=ALL,MASTER_ADDR=$master"; else printf '%s ' '--export=ALL,MASTER_ADDR="$MASTER_ADDR"'; fi
            printf '%q ' "${cmd[@]}"; echo "# real, $(( t * dp )) GPUs on $nodes nodes"
            continue
        fi
        say "srun: $name, $(( t * dp )) GPUs on $nodes nodes"
        rm -rf "$run" "$run.out"
        "${pre[@]}" --export="ALL,MASTER_ADDR=$master" "${cmd[@]}" >"$run.out" 2>&1
        rc=$?
        [ "$rc" = 0 ] || say "  $name: srun ended with status $rc (see $run.out)"
        printf '%s\t%s\t%s\t%s\tfalse\tfull\t%s\t%s\treal\t%s\t%s\t\t1\n' "$name" "$cfg" "$t" "$dp" "$gb" "$mb" "$run" "$rc" >>"$manifest"
    done < <("$py" "$helper" slurm-jobs)
    [ "$dry" = 0 ] || return 0
    printf 'peak_tflops\t%s\nterminal\tpng\ndevice_short\tSlurm job\n' "${PEAK_TFLOPS:-0}" >"$dir/info.tsv"
    "$py" "$scaling" table --kind weak --manifest "$manifest" --info "$dir/info.tsv" --out "$dir" --help-text "$help_file" ||
        say "the Slurm rows have problems: see $dir/table.md"
}
