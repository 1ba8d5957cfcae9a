/* Building a run: backend, ranks and their communicators, data, model,
 * optimizer, initial state and the log; and taking it down. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gemm.h"
#include "kernels/timed.h"
#include "parallel/numa_bind.h"
#include "train/model_files.h"
#include "train/run.h"
#include "train/runlog.h"
#include "util/fs.h"

/* The start-up report on stdout: training's; the modes print only their result. */
static void say(const run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const run *r, const char *fmt, ...) {
    if (r->purpose != RUN_TRAIN) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

/* The topology: from the launcher's environment, or, under
 * parallel.project, one process standing for rank 0 of tp x dp. Resolves
 * parallel.dp and validates the config against the world size. */
void run_resolve_topology(tg_config *cfg, topology *topo) {
    tg_err e;
    if (cfg->parallel.project) { /* one real process standing for rank 0 of tp x dp */
        const bool launched = topology_from_env(topo, 1, &e) || topo->world != 1;
        topology_free(topo); /* topology_init starts from a zeroed struct */
        if (launched || topology_init(topo, 0, 1, 0, 1, 1, &e)) {
            tg_fail(&e, "%s: parallel.project runs as one process: start it without a launcher", cfg->source);
            tg_die(PROG, &e);
        }
        int virtual_world = cfg->parallel.tp * (cfg->parallel.dp > 0 ? cfg->parallel.dp : 1);
        config_resolve_layout(cfg, virtual_world);
        if (config_validate(cfg, virtual_world, &e)) tg_die(PROG, &e);
        return;
    }
    if (topology_from_env(topo, cfg->parallel.tp, &e)) {
        char where[CFG_PATH_MAX + 64];
        tg_wrap(&e, "%s", config_origin(cfg, "parallel.tp", where, sizeof where));
        tg_die(PROG, &e);
    }
    config_resolve_layout(cfg, topo->world);
    if (config_validate(cfg, topo->world, &e)) tg_die(PROG, &e);
}

/* The compute backend of this rank: the CPU, or the CUDA device of its
 * local rank (ranks beyond the device count share devices round-robin). */
static const tg_ops *open_backend(const tg_config *c, int local_rank) {
    const tg_dtype act = config_act_dtype(c);
    tg_err e;
    if (strcmp(c->device, "cuda") != 0) {
        if (act == TG_F32) return ops_cpu();
        tg_ops *o = ops_cpu_bf16_create(&e);
        if (!o) tg_die(PROG, &e);
        return o;
    }
    tg_ops *o = ops_cuda_create(local_rank, act, &e);
    if (!o) {
        tg_wrap(&e, "%s: device = \"cuda\"", c->source);
        tg_die(PROG, &e);
    }
    return o;
}

/* kernels.lt_tune on the CUDA backend: its choices recorded in
 * out.dir/lt_algos.tsv by a training run's rank 0 (every rank reads the
 * record there under "time", so that a resumed run pins what it chose). */
static void tune_products(const run *r) {
    const tg_config *c = &r->cfg;
    if (strcmp(c->device, "cuda") != 0) return;
    char record[CFG_PATH_MAX + 32];
    snprintf(record, sizeof record, "%s/lt_algos.tsv", c->out.dir);
    tg_err e;
    if (ops_cuda_lt_tune(r->ops, c->kernels.lt_tune, record, r->rank == 0 && r->purpose == RUN_TRAIN, &e)) {
        tg_wrap(&e, "%s: kernels.lt_tune", c->source);
        tg_die(PROG, &e);
    }
}

/* kernels.attention on the CUDA backend: wgmma and wgmma_ws are refused,
 * naming the key, where the device or the model has no wgmma kernels; auto
 * chooses (describe_model prints what). */
static void choose_attention(const run *r) {
    const tg_config *c = &r->cfg;
    if (strcmp(c->device, "cuda") != 0) return; /* config_validate refused wgmma there */
    tg_err e;
    if (ops_cuda_attention(r->ops, c->kernels.attention, c->model.n_embd / c->model.n_head, c->model.dropout, &e)) {
        tg_wrap(&e, "%s: kernels.attention = \"%s\"", c->source, c->kernels.attention);
        tg_die(PROG, &e);
    }
}

/* kernels.dw_overlap on the CUDA backend. */
static void overlap_weight_gradients(const run *r) {
    const tg_config *c = &r->cfg;
    if (strcmp(c->device, "cuda") != 0) return;
    tg_err e;
    if (ops_cuda_dw_overlap(r->ops, c->kernels.dw_overlap, &e)) {
        tg_wrap(&e, "%s: kernels.dw_overlap", c->source);
        tg_die(PROG, &e);
    }
}

/* parallel.comm = auto: NCCL on CUDA when every rank of the node has its
 * own GPU (NCCL refuses two ranks on one), else the shm communicator. */
static bool use_nccl(const tg_config *c, const topology *t) {
    if (strcmp(c->parallel.comm, "nccl") == 0) return true;
    if (strcmp(c->parallel.comm, "shm") == 0 || strcmp(c->device, "cuda") != 0) return false;
    return t->local_world <= ops_cuda_device_count();
}


static comm *connect_group(run *r, bool nccl, const char *name, const int *ranks, int size, int index) {
    tg_err e;
    const double timeout = r->cfg.parallel.timeout_s;
    /* parallel.comm = nccl named outright: NCCL even for a group of one */
    const bool always = strcmp(r->cfg.parallel.comm, "nccl") == 0;
    comm *g = !nccl  ? comm_shm_create(r->bs, name, ranks, size, index, timeout, &e)
              : always ? comm_nccl_create_at_size_1(r->bs, name, ranks, size, index, &r->ops->mem, timeout, &e)
                       : comm_nccl_create(r->bs, name, ranks, size, index, &r->ops->mem, timeout, &e);
    if (!g) tg_die(PROG, &e);
    if (!nccl) comm_use_memory(g, &r->ops->mem);
    return g;
}

/* Reads the evaluation windows once at start, so a bad token in them stops
 * a training run now rather than at its first evaluation (--eval reads them
 * right after setup anyway). */
static void check_val_tokens(run *r) {
    const long long win = (long long)r->cfg.train.global_batch * r->cfg.model.seq_len + 1;
    int32_t *buf = tg_malloc((size_t)win * sizeof(int32_t), "validation check");
    const long long n = config_eval_windows(&r->cfg, shards_windows_per_epoch(r->val));
    data_pos pos = {0, 0};
    tg_err e;
    for (long long i = 0; i < n; i++)
        if (shards_next(r->val, &pos, r->cfg.model.vocab_size, buf, &e)) tg_die(PROG, &e);
    free(buf);
}

/* Dies of e, a failure to read what `key` names, naming the key and where
 * its value came from (the config file or --set), then `hint` (or nothing). */
static void die_about_key(const tg_config *c, const char *key, const char *hint, tg_err *e) {
    char where[CFG_PATH_MAX + 128];
    tg_wrap(e, "%s", config_key_named(c, key, where, sizeof where));
    const size_t len = strlen(e->msg);
    if (hint) snprintf(e->msg + len, sizeof e->msg - len, "%s", hint);
    tg_die(PROG, e);
}

/* What the purpose reads: training's shards (when it takes steps), the
 * validation shards (training, --eval), and the vocabulary only where text
 * is printed or read (training's samples, --sample, --hellaswag), so
 * nothing else demands it. */
static void open_data(run *r) {
    const tg_config *c = &r->cfg;
    const long long advance = (long long)c->train.global_batch * c->model.seq_len;
    const bool training = r->purpose == RUN_TRAIN;
    tg_err e;
    if (training && c->train.steps > 0) {
        r->train = shards_open(c->data.train, advance + 1, advance, c->data.shuffle, (uint64_t)c->train.seed, &e);
        if (!r->train) die_about_key(c, "data.train", NULL, &e);
        say(r, "train data: %d shard(s), %lld tokens, %lld batches per epoch\n", shards_count(r->train),
            shards_total_tokens(r->train), shards_windows_per_epoch(r->train));
    }
    if ((training || r->purpose == RUN_EVAL) && c->data.val[0] && c->out.eval_batches != 0) {
        r->val = shards_open(c->data.val, advance + 1, advance, false, 0, &e);
        if (!r->val) die_about_key(c, "data.val", " (data.val \"\" trains without validation; ./prepare --val-tokens N sets the validation shard's size)", &e);
        if (training) check_val_tokens(r);
        const long long windows = shards_windows_per_epoch(r->val);
        say(r, "val data: %d shard(s), %lld tokens, %lld batches (eval uses %lld)\n", shards_count(r->val),
            shards_total_tokens(r->val), windows, config_eval_windows(c, windows));
    }
    const bool hellaswag = training && c->out.hellaswag[0] && !c->parallel.project; /* a projection scores nothing */
    if ((training && c->out.sample_tokens > 0) || hellaswag || r->purpose == RUN_SAMPLE || r->purpose == RUN_HELLASWAG) {
        r->tok = tokenizer_load(c->data.vocab_dir, &e);
        if (!r->tok) die_about_key(c, "data.vocab_dir", NULL, &e);
    }
    if (hellaswag) {
        r->hellaswag = hellaswag_load(c->out.hellaswag, r->tok, c->model.vocab_size, c->model.seq_len, &e);
        if (!r->hellaswag) die_about_key(c, "out.hellaswag", NULL, &e);
        say(r, "hellaswag: %d examples from %s, scored at each evaluation\n", r->hellaswag->n, c->out.hellaswag);
    }
}

/* Weights and optimizer state: resumed, loaded from init_from, or fresh. */
static void init_state(run *r) {
    const tg_config *c = &r->cfg;
    tg_err e;
    char dir[1100];
    r->state.step = 0;
    r->state.pos = (data_pos){0, 0};
    r->state.train = r->train; /* fingerprinted into each save, compared on resume */
    r->resumed_step = -1;
    int last = ckpt_latest(c->out.dir, dir, sizeof dir);
    if (last >= 0 && !c->out.resume) {
        tg_fail(&e, "out.dir '%s' already holds checkpoints (newest: step %d) and out.resume is false: "
                    "choose another out.dir, or set out.resume=true to continue", c->out.dir, last);
        tg_die(PROG, &e);
    }
    if (last >= 0) {
        /* A damaged newest checkpoint stops the run rather than quietly
         * going back: the user decides to give up the steps since the
         * previous one. */
        if (ckpt_load_model(dir, r->model, &e) || ckpt_load_optim(dir, r->model, r->opt, &e)) {
            tg_wrap(&e, "cannot resume from %s, the newest checkpoint (to resume from the one before it, move %s out "
                        "of out.dir and rerun)", dir, dir);
            tg_die(PROG, &e);
        }
        if (ckpt_load_state(dir, c, &r->state, &e)) tg_die(PROG, &e);
        say(r, "resumed from %s (step %d)\n", dir, r->state.step);
        if (r->state.changed[0]) say(r, "changed since that checkpoint: %s\n", r->state.changed);
        r->resumed_step = r->state.step;
    } else if (c->model.init_from[0]) {
        if (ckpt_load_model(c->model.init_from, r->model, &e)) tg_die(PROG, &e);
        say(r, "initialised weights from %s\n", c->model.init_from);
    } else {
        gpt_init_weights(r->model, (uint64_t)c->train.seed);
    }
    optim_take_weights(r->opt, r->model); /* ZeRO: this rank's chunks of the float32 master */
}

/* How a projected run models its groups' collectives (link[0] the TP group's, link[1] a DP
 * group's), for its PROJECTION line. */
static void describe_projected_links(const tg_config *c, const comm_link *link, char *out, size_t n) {
    if (c->interconnect.table[0]) snprintf(out, n, "from the nccl-tests table %s", c->interconnect.table);
    else snprintf(out, n, "at %g GB/s bus bandwidth + %g us per collective", c->interconnect.bus_gbps,
                  c->interconnect.latency_us);
    for (int g = 0; g < 2; g++) /* a group the network carries has its own model */
        if (config_group_crosses_nodes(c, g == 1, c->parallel.tp, c->parallel.dp))
            snprintf(out + strlen(out), n - strlen(out), "; the %s across nodes of %d ranks at %g GB/s + %g us (interconnect.node_*)",
                     g ? "DP groups" : "TP group", c->interconnect.node_gpus, link[g].bus_bytes_per_s / 1e9,
                     c->interconnect.node_latency_us);
}

/* Rank 0 speaks for the job on stdout; every other rank writes its own
 * output to out.dir/logs/rank_R.out (whatever launched it), keeping stderr
 * for errors, which the launcher reports. */
static void redirect_rank_output(const run *r) {
    char dir[CFG_PATH_MAX + 16], path[CFG_PATH_MAX + 48];
    tg_err e;
    snprintf(dir, sizeof dir, "%s/logs", r->cfg.out.dir);
    snprintf(path, sizeof path, "%s/rank_%d.out", dir, r->rank);
    if (fs_mkdir_p(dir, &e)) {
        tg_wrap(&e, "out.dir: cannot create the directory of rank %d's log", r->rank);
        tg_die(PROG, &e);
    }
    if (!freopen(path, "a", stdout)) {
        tg_fail(&e, "%s: cannot open rank %d's log", path, r->rank);
        tg_die(PROG, &e);
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* as main set it for the terminal's stdout: lines in order with stderr's */
}


static void connect_ranks(run *r) {
    const tg_config *c = &r->cfg;
    tg_err e;
    r->rank = r->topo.rank;
    r->world = r->topo.world;
    if (r->rank != 0 && r->purpose == RUN_TRAIN) redirect_rank_output(r);
    else if (r->rank != 0 && !freopen("/dev/null", "w", stdout)) { /* the modes write nothing; rank 0 prints */
        tg_fail(&e, "/dev/null: cannot open for rank %d's output", r->rank);
        tg_die(PROG, &e);
    }
    char msg[256];
    numa_bind_rank(c->parallel.numa, r->topo.local_rank, msg, sizeof msg);
    if (c->parallel.project) {
        comm_link *link = tg_malloc(2 * sizeof *link, "link model"); /* the TP group's, a DP group's */
        if (config_group_link(c, false, c->parallel.tp, c->parallel.dp, &link[0], &e) ||
            config_group_link(c, true, c->parallel.tp, c->parallel.dp, &link[1], &e))
            tg_die(PROG, &e);
        r->tp = comm_null_create_modeled("tp", 0, c->parallel.tp, link[0]);
        r->dp = comm_null_create_modeled("dp", 0, c->parallel.dp, link[1]);
        comm_use_memory(r->tp, &r->ops->mem);
        comm_use_memory(r->dp, &r->ops->mem);
        char model[CFG_PATH_MAX + 256];
        describe_projected_links(c, link, model, sizeof model);
        say(r, "PROJECTION: this process runs rank 0's shard of tp %d x dp %d with a null communicator; communication is "
               "modeled %s; losses are not meaningful and nothing is saved\n", c->parallel.tp, c->parallel.dp, model);
        free(link);
    } else if (r->world == 1 && strcmp(c->parallel.comm, "nccl") != 0) {
        r->tp = comm_null_create("tp", 0, 1);
        r->dp = comm_null_create("dp", 0, 1);
        comm_use_memory(r->tp, &r->ops->mem);
        comm_use_memory(r->dp, &r->ops->mem);
    } else {
        const bool nccl = use_nccl(c, &r->topo);
        r->bs = bootstrap_create(&r->topo, c->parallel.timeout_s, &e);
        if (!r->bs) tg_die(PROG, &e);
        r->tp = connect_group(r, nccl, "tp", r->topo.tp_ranks, r->topo.tp, r->topo.tp_rank);
        r->dp = connect_group(r, nccl, "dp", r->topo.dp_ranks, r->topo.dp, r->topo.dp_rank);
        snprintf(msg + strlen(msg), sizeof msg - strlen(msg), "; communicator %s", nccl ? "nccl" : "shm");
    }
    say(r, "ranks: %d (tp %d x dp %d, sp %s, zero %d, recompute %s, from %s); %s\n", r->world, r->tp->size, r->dp->size,
           c->parallel.sp ? "on" : "off", c->parallel.zero, c->train.recompute, r->topo.source, msg);
}


/* The banner's parameter counts: the model's (each tensor once, unpadded:
 * what a checkpoint holds, and N of 6N flops per token) and what one TP rank
 * holds (its shard of the split tensors, with wte padded to Vp rows so every
 * rank gets Vp/tp, plus full copies of the replicated ones). */
static void describe_model(run *r, const gpt_dims *d) {
    const tg_config *c = &r->cfg;
    size_t full_params = 0, local_params = 0;
    for (int i = 0; i < r->model->n_tensors; i++) {
        full_params += (size_t)r->model->tensors[i].full_rows * r->model->tensors[i].full_cols;
        local_params += r->model->tensors[i].numel;
    }
    /* scripts/bench_gpu.sh reads this line up to "parameters" */
    say(r, "model: %d layers, %d heads, width %d, context %d, vocab %d (padded %d): %zu parameters; ", d->L, d->NH, d->C,
        d->T, d->V, d->Vp, full_params);
    if (d->tp == 1)
        say(r, "the rank holds %zu (wte padded to %d rows)\n", local_params, d->Vp);
    else
        say(r, "each of the %d TP ranks holds %zu (its 1/%d of wte padded to %d rows, of the attention heads and of the "
               "MLP, and full copies of wpe, the LayerNorms and the output-projection biases)\n",
            d->tp, local_params, d->tp, d->Vp);
    r->flops_per_token = gpt_model_flops_per_token(d, (double)full_params);
    r->executed_flops_per_token = gpt_executed_flops_per_token(d, (double)full_params);
    say(r, "batch: %d sequences x %d tokens per step = dp %d x %d micro-batches of %d (gradient accumulation %d)\n",
        c->train.global_batch, d->T, r->dp->size, config_grad_accum(c), c->train.micro_batch, config_grad_accum(c));
    const tg_ops *backend = r->timed ? ops_timed_inner(r->timed) : r->ops;
    if (backend == ops_cpu()) {
        say(r, "backend: cpu (matmul kernel %s)", cpu_gemm_kernel_name());
    } else if (strcmp(c->device, "cuda") != 0) { /* the CPU's bf16 flavour: no CUDA context to ask */
        say(r, "backend: %s, %s, %s activations", backend->name, backend->device, tg_dtype_name(backend->act));
    } else {
        char attention[64];
        ops_cuda_attention_describe(backend, attention, sizeof attention);
        say(r, "backend: %s, %s, %s activations; attention %s (kernels.attention %s)%s", backend->name, backend->device,
            tg_dtype_name(backend->act), attention, c->kernels.attention,
            c->kernels.dw_overlap ? "; weight gradients on a second stream (kernels.dw_overlap)" : "");
    }
    say(r, "%s\n", r->timed ? "; every op timed (out.op_times)" : "");
}

/* The writer takes out.dir's lock before it looks for checkpoints, and
 * keeps it to the end: a second run into the same folder is refused at once
 * (it would resume from this run's steps, or the two would overwrite each
 * other's saves). With the lock held, what interrupted saves left is ours
 * to clear. */
static void lock_out_dir(run *r) {
    const tg_config *c = &r->cfg;
    char path[CFG_PATH_MAX + 32];
    tg_err e;
    if (fs_mkdir_p(c->out.dir, &e)) {
        tg_wrap(&e, "out.dir: cannot create the run directory");
        tg_die(PROG, &e);
    }
    snprintf(path, sizeof path, "%s/" RUN_LOCK_NAME, c->out.dir);
    const int rc = fs_lock_take(path, &r->out_lock, &e);
    if (rc == 1) tg_wrap(&e, "out.dir is in use by another run (wait for it to end, or choose another out.dir)");
    if (rc != 0) tg_die(PROG, &e);
    ckpt_clear_leftovers(c->out.dir);
}

/* Training's own part: the optimizer, the budget, the starting state,
 * out.dir and the log. */
static void setup_training(run *r) {
    tg_config *c = &r->cfg;
    r->opt = optim_create(r->ops, r->model, r->dp, c->parallel.zero == 1, c->parallel.dp_bucket_mb);
    if (r->opt->overlap)
        say(r, "data-parallel gradients: %s in buckets of %d layer(s) during the last backward pass of a step "
               "(parallel.dp_bucket_mb %g)\n",
            r->opt->zero ? "reduce-scattered (ZeRO)" : "all-reduced", r->opt->buckets.layers_per_bucket,
            c->parallel.dp_bucket_mb);
    report_budget(&r->budget);
    if (r->rank == 0) lock_out_dir(r);
    init_state(r);
    if (run_nothing_to_train(r)) return; /* run_train says so; out.dir and its log stay as they are */
    if (r->rank == 0) report_open_log(r);
}

void run_setup(run *r) {
    tg_config *c = &r->cfg;
    tg_err e;
    /* After the config's own checks (run_resolve_topology), before anything is built or the budget printed. */
    if (model_files_check_shape(c, r->purpose != RUN_TRAIN, &e)) tg_die(PROG, &e);
    r->ops = open_backend(c, r->topo.local_rank);
    tune_products(r);
    choose_attention(r);
    overlap_weight_gradients(r);
    if (c->out.op_times && r->purpose == RUN_TRAIN) {
        if (!(r->timed = ops_timed_create(r->ops, &e))) tg_die(PROG, &e);
        r->ops = r->timed;
    }
    connect_ranks(r);
    open_data(r);
    gpt_dims d;
    if (gpt_dims_from_config(&d, c, r->tp->size, r->tp->rank, &e)) tg_die(PROG, &e);
    const bool zero = c->parallel.zero == 1, training = r->purpose == RUN_TRAIN;
    if (training) optim_shape_dims(&d, r->dp->size, zero); /* the modes have no optimizer to shape the layout */
    const size_t n_alloc = gpt_param_count(&d);
    r->budget = optim_budget(&d, c->train.micro_batch, c->model.seq_len, r->dp->size, zero, r->ops->act,
                             r->ops->workspace_bytes);
    batch_budget_share(&r->budget, c, r->dp->size);
    r->model = gpt_create(r->ops, r->tp, &d, c->train.micro_batch, c->model.seq_len, n_alloc);
    describe_model(r, &d);
    const size_t win = (size_t)c->train.global_batch * d.T + 1;
    r->window = tg_malloc(win * sizeof(int32_t), "batch window"); /* training's steps and evaluation */
    r->share = r->ops->alloc(r->ops, r->budget.tokens, "the step's tokens");
    r->graph = (step_graph){batch_graph_usable(c, r->ops, r->tp, r->dp), false, false};
    r->peak_tflops = c->device_peak_tflops > 0 ? c->device_peak_tflops : r->ops->peak_tflops(r->ops);
    if (training) setup_training(r);
}

void run_teardown(run *r) {
    if (r->log) fclose(r->log);
    free(r->window);
    if (r->share) r->ops->free(r->ops, r->share);
    tokenizer_free(r->tok);
    hellaswag_free(r->hellaswag);
    shards_close(r->train);
    shards_close(r->val);
    optim_free(r->opt);
    gpt_free(r->model);
    if (r->ops->graph_release) r->ops->graph_release(r->ops); /* before the communicators it holds */
    comm_destroy(r->tp);
    comm_destroy(r->dp);
    bootstrap_destroy(r->bs);
    ops_destroy(r->ops);
    topology_free(&r->topo);
    stop_watch_end(r->stop);
    ckpt_kept_free(&r->kept);
    fs_unlock(&r->out_lock);
}
