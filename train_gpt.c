/* train_gpt: pretrains a GPT-2 model from token shards.
 *   ./train_gpt --config FILE [--set key.path=value ...]
 * config -> data -> model shard -> train loop -> eval, samples, checkpoints. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "data/shard_format.h"
#include "data/shards.h"
#include "data/tokenizer.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/cpu/gemm.h"
#include "model/gpt.h"
#include "model/optim.h"
#include "model/plan.h"
#include "model/rng.h"
#include "parallel/bootstrap.h"
#include "parallel/comm.h"
#include "parallel/numa_bind.h"
#include "parallel/topology.h"

#define PROG "train_gpt"

typedef struct run {
    tg_config cfg;
    const tg_ops *ops;
    topology topo;          /* this rank's place: rank, world, TP and DP groups */
    int rank, world;        /* global rank and world size */
    bootstrap *bs;          /* TCP rendezvous (NULL for a single rank) */
    comm *tp, *dp;          /* this rank's tensor- and data-parallel groups */
    gpt *model;
    optim *opt;
    shard_set *train, *val;
    tokenizer *tok;
    FILE *log;
    ckpt_state state;       /* steps done and the data position after them */
    int32_t *window;        /* one global batch: global_batch*T + 1 tokens */
    int32_t *inputs, *targets; /* one micro-batch */
    double train_ms_total;
    int train_steps_timed;
    uint64_t bytes_at_step_start[2][COLL_KINDS]; /* tp, dp counters */
    double comm_s_at_step_start;                 /* measured (real) or modeled (projected) */
    double flops_per_token;                      /* 6N + 12 L C T, N counting every parameter once */
    gpt_budget budget;      /* this rank's planned bytes */
    double peak_tflops;     /* of one device, for MFU (0: unknown) */
} run;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static void usage(FILE *f) {
    fprintf(f, "usage: %s --config FILE [--set key.path=value ...]\n"
               "       %s --plan --config FILE [--set ...] [--devices N] [--device-gib GIB] [--plan-json FILE]\n"
               "       %s --peak-tflops \"DEVICE NAME\" [bf16|fp32]   (dense peak TFLOP/s; 0: unknown)\n"
               "       %s --help\n\n"
               "Trains GPT-2 on token shards made by ./prepare. Every key below may be set in the JSON\n"
               "config (as {\"section\": {\"key\": value}}) or overridden with --set section.key=value.\n\n"
               "--plan lists the layouts (tp, sp, recompute, micro-batch, zero) the config could run with on N devices\n"
               "(default 8) of GIB GiB each (default 80): memory per device from the trainer's own budget, whether it\n"
               "fits, and a predicted step time; --plan-json also writes one JSON object per layout to FILE.\n\n",
            PROG, PROG, PROG, PROG);
    config_print_help(f);
}

/* --plan: prints the layouts and exits. */
static void run_plan(const tg_config *cfg, const plan_opts *o, const char *json_path) {
    tg_err e;
    FILE *json = NULL;
    if (json_path && !(json = fopen(json_path, "w"))) {
        tg_fail(&e, "%s: cannot create the plan's JSON file", json_path);
        tg_die(PROG, &e);
    }
    if (plan_print(cfg, o, stdout, json, &e)) tg_die(PROG, &e);
    if (json) fclose(json);
    exit(0);
}

/* --peak-tflops NAME [bf16|fp32]: prints the table's dense peak of a GPU
 * name (0 when unknown; default bf16) for scripts, and exits. */
static void print_peak_tflops(int argc, char **argv, int i) {
    const char *prec = i + 2 < argc ? argv[i + 2] : "bf16";
    if (i + 1 >= argc || (strcmp(prec, "bf16") != 0 && strcmp(prec, "fp32") != 0) || i + 3 < argc) {
        fprintf(stderr, "%s: error: usage: --peak-tflops \"DEVICE NAME\" [bf16|fp32]\n", PROG);
        exit(2);
    }
    printf("%g\n", ops_peak_tflops(argv[i + 1], strcmp(prec, "fp32") == 0 ? TG_F32 : TG_BF16));
    exit(0);
}

/* Fills cfg and the topology from the command line and the environment;
 * exits on --help and on errors. */
static void parse_args(int argc, char **argv, tg_config *cfg, topology *topo) {
    config_defaults(cfg);
    const char *config_path = NULL, *plan_json = NULL;
    bool plan = false;
    plan_opts popts = {8, 80.0 * 1024 * 1024 * 1024, 0.5};
    tg_err e;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(argv[i], "--peak-tflops") == 0) {
            print_peak_tflops(argc, argv, i);
        } else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            config_path = argv[++i];
        } else if (strcmp(argv[i], "--set") == 0 && i + 1 < argc) {
            i++;
        } else if (strcmp(argv[i], "--plan") == 0) {
            plan = true;
        } else if (strcmp(argv[i], "--devices") == 0 && i + 1 < argc) {
            popts.devices = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--device-gib") == 0 && i + 1 < argc) {
            popts.device_bytes = atof(argv[++i]) * 1024 * 1024 * 1024;
        } else if (strcmp(argv[i], "--plan-json") == 0 && i + 1 < argc) {
            plan_json = argv[++i];
        } else {
            fprintf(stderr, "%s: error: unknown or incomplete argument '%s' (see --help)\n", PROG, argv[i]);
            exit(2);
        }
    }
    if (plan && (popts.devices < 1 || popts.device_bytes <= 0)) {
        fprintf(stderr, "%s: error: --devices must be a positive integer and --device-gib a positive number\n", PROG);
        exit(2);
    }
    if (!config_path) {
        fprintf(stderr, "%s: error: --config FILE is required (see --help; configs/tiny.json is the default model)\n", PROG);
        exit(2);
    }
    if (config_load_file(cfg, config_path, &e)) tg_die(PROG, &e);
    for (int i = 1; i < argc; i++) /* overrides apply after the file, in order */
        if (strcmp(argv[i], "--set") == 0 && config_set(cfg, argv[++i], &e)) tg_die(PROG, &e);
    if (plan) run_plan(cfg, &popts, plan_json);
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
        tg_wrap(&e, "%s", cfg->source);
        tg_die(PROG, &e);
    }
    config_resolve_layout(cfg, topo->world);
    if (config_validate(cfg, topo->world, &e)) tg_die(PROG, &e);
}

static void print_budget(const gpt_budget *b) {
    const double MiB = 1024.0 * 1024.0;
    printf("memory per rank (MiB): params %.1f | grads %.1f | AdamW state %.1f | activations %.1f (attention %.1f)"
           " | logits %.1f | backward scratch %.1f | backend workspace %.1f | total %.1f\n",
           b->params / MiB, b->grads / MiB, b->optim / MiB, b->acts_kept / MiB, b->acts_attention / MiB, b->logits / MiB,
           b->scratch / MiB, b->workspace / MiB, b->total / MiB);
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
 * the run now rather than at the first evaluation. */
static void check_val_tokens(run *r) {
    const long long win = (long long)r->cfg.train.global_batch * r->cfg.model.seq_len + 1;
    int32_t *buf = tg_malloc((size_t)win * sizeof(int32_t), "validation check");
    long long n = shards_windows_per_epoch(r->val);
    if (n > r->cfg.out.eval_batches) n = r->cfg.out.eval_batches;
    data_pos pos = {0, 0};
    tg_err e;
    for (long long i = 0; i < n; i++)
        if (shards_next(r->val, &pos, r->cfg.model.vocab_size, buf, &e)) tg_die(PROG, &e);
    free(buf);
}

static void open_data(run *r) {
    const tg_config *c = &r->cfg;
    const long long advance = (long long)c->train.global_batch * c->model.seq_len;
    tg_err e;
    if (c->train.steps > 0) {
        r->train = shards_open(c->data.train, advance + 1, advance, c->data.shuffle, (uint64_t)c->train.seed, &e);
        if (!r->train) tg_die(PROG, &e);
        printf("train data: %d shard(s), %lld tokens, %lld batches per epoch\n", shards_count(r->train),
               shards_total_tokens(r->train), shards_windows_per_epoch(r->train));
    }
    if (c->data.val[0] && c->out.eval_batches > 0) {
        r->val = shards_open(c->data.val, advance + 1, advance, false, 0, &e);
        if (!r->val) tg_die(PROG, &e);
        check_val_tokens(r);
        printf("val data: %d shard(s), %lld tokens, %lld batches (eval uses %lld)\n", shards_count(r->val),
               shards_total_tokens(r->val), shards_windows_per_epoch(r->val),
               shards_windows_per_epoch(r->val) < c->out.eval_batches ? shards_windows_per_epoch(r->val)
                                                                       : (long long)c->out.eval_batches);
    }
    if (c->out.sample_tokens > 0) {
        r->tok = tokenizer_load(c->data.vocab_dir, &e);
        if (!r->tok) tg_die(PROG, &e);
    }
}

/* Weights and optimizer state: resumed, loaded from init_from, or fresh. */
static void init_state(run *r) {
    const tg_config *c = &r->cfg;
    tg_err e;
    char dir[1100];
    r->state.step = 0;
    r->state.pos = (data_pos){0, 0};
    int last = ckpt_latest(c->out.dir, dir, sizeof dir);
    if (last >= 0 && !c->out.resume) {
        tg_fail(&e, "out.dir '%s' already holds checkpoints (newest: step %d) and out.resume is false: "
                    "choose another out.dir, or set out.resume=true to continue", c->out.dir, last);
        tg_die(PROG, &e);
    }
    if (last >= 0) {
        if (ckpt_load_model(dir, r->model, &e) || ckpt_load_optim(dir, r->model, r->opt, &e) ||
            ckpt_load_state(dir, c, &r->state, &e))
            tg_die(PROG, &e);
        printf("resumed from %s (step %d)\n", dir, r->state.step);
    } else if (c->model.init_from[0]) {
        if (ckpt_load_model(c->model.init_from, r->model, &e)) tg_die(PROG, &e);
        printf("initialised weights from %s\n", c->model.init_from);
    } else {
        gpt_init_weights(r->model, (uint64_t)c->train.seed);
    }
}

/* Rank 0 speaks for the job on stdout; every other rank writes its own
 * output to out.dir/logs/rank_R.out (whatever launched it), keeping stderr
 * for errors, which the launcher reports. */
static void redirect_rank_output(const run *r) {
    char dir[CFG_PATH_MAX + 16], path[CFG_PATH_MAX + 48], cmd[CFG_PATH_MAX + 64];
    tg_err e;
    snprintf(dir, sizeof dir, "%s/logs", r->cfg.out.dir);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    snprintf(path, sizeof path, "%s/rank_%d.out", dir, r->rank);
    if (system(cmd) != 0 || !freopen(path, "a", stdout)) {
        tg_fail(&e, "%s: cannot open rank %d's log", path, r->rank);
        tg_die(PROG, &e);
    }
}

static void connect_ranks(run *r) {
    const tg_config *c = &r->cfg;
    tg_err e;
    r->rank = r->topo.rank;
    r->world = r->topo.world;
    if (r->rank != 0) redirect_rank_output(r);
    char msg[256];
    numa_bind_rank(c->parallel.numa, r->topo.local_rank, msg, sizeof msg);
    if (c->parallel.project) {
        comm_link link = {c->interconnect.bus_gbps * 1e9, c->interconnect.latency_us * 1e-6};
        r->tp = comm_null_create_modeled("tp", 0, c->parallel.tp, link);
        r->dp = comm_null_create_modeled("dp", 0, c->parallel.dp, link);
        comm_use_memory(r->tp, &r->ops->mem);
        comm_use_memory(r->dp, &r->ops->mem);
        printf("PROJECTION: this process runs rank 0's shard of tp %d x dp %d with a null communicator; communication is "
               "modeled at %g GB/s bus bandwidth + %g us per collective; losses are not meaningful and nothing is saved\n",
               c->parallel.tp, c->parallel.dp, c->interconnect.bus_gbps, c->interconnect.latency_us);
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
    printf("ranks: %d (tp %d x dp %d, sp %s, zero %d, recompute %s, from %s); %s\n", r->world, r->tp->size, r->dp->size,
           c->parallel.sp ? "on" : "off", c->parallel.zero, c->train.recompute, r->topo.source, msg);
}

static void setup(run *r) {
    tg_config *c = &r->cfg;
    tg_err e;
    r->ops = open_backend(c, r->topo.local_rank);
    connect_ranks(r);
    open_data(r);
    gpt_dims d;
    if (gpt_dims_from_config(&d, c, r->tp->size, r->tp->rank, &e)) tg_die(PROG, &e);
    gpt_budget b = gpt_budget_of(&d, c->train.micro_batch, c->model.seq_len, r->dp->size, c->parallel.zero == 1, r->ops->act,
                                 r->ops->workspace_bytes);
    r->budget = b;
    r->model = gpt_create(r->ops, r->tp, &d, c->train.micro_batch, c->model.seq_len, r->dp->size);
    r->opt = optim_create(r->ops, r->model, r->dp, c->parallel.zero == 1);
    size_t full_params = 0, local_params = 0;
    for (int i = 0; i < r->model->n_tensors; i++) {
        full_params += (size_t)r->model->tensors[i].full_rows * r->model->tensors[i].full_cols;
        local_params += r->model->tensors[i].numel;
    }
    printf("model: %d layers, %d heads, width %d, context %d, vocab %d (padded %d): %zu parameters (%zu on each TP rank)\n",
           d.L, d.NH, d.C, d.T, d.V, d.Vp, full_params, local_params);
    r->flops_per_token = 6.0 * (double)full_params + 12.0 * d.L * d.C * d.T;
    printf("batch: %d sequences x %d tokens per step = dp %d x %d micro-batches of %d (gradient accumulation %d)\n",
           c->train.global_batch, d.T, r->dp->size, config_grad_accum(c), c->train.micro_batch, config_grad_accum(c));
    if (r->ops == ops_cpu()) printf("backend: cpu (matmul kernel %s)\n", cpu_gemm_kernel_name());
    else printf("backend: %s, %s, %s activations\n", r->ops->name, r->ops->device, tg_dtype_name(r->ops->act));
    r->peak_tflops = c->device_peak_tflops > 0 ? c->device_peak_tflops : r->ops->peak_tflops(r->ops);
    print_budget(&b);
    init_state(r);
    const size_t win = (size_t)c->train.global_batch * d.T + 1, micro = (size_t)c->train.micro_batch * d.T;
    r->window = tg_malloc(win * sizeof(int32_t), "batch window");
    r->inputs = tg_malloc(micro * sizeof(int32_t), "micro-batch inputs");
    r->targets = tg_malloc(micro * sizeof(int32_t), "micro-batch targets");
    struct stat st;
    if (r->rank == 0 && stat(c->out.dir, &st) != 0) {
        char cmd[CFG_PATH_MAX + 32];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", c->out.dir);
        if (system(cmd) != 0) {
            tg_fail(&e, "out.dir '%s': cannot create the run directory", c->out.dir);
            tg_die(PROG, &e);
        }
    }
    if (r->rank != 0) return; /* rank 0 writes the run's log */
    char path[CFG_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/log.jsonl", c->out.dir);
    r->log = fopen(path, "a");
    if (!r->log) {
        tg_fail(&e, "%s: cannot open the log for appending", path);
        tg_die(PROG, &e);
    }
    const gpt_budget *bud = &r->budget;
    fprintf(r->log, "{\"step\":%d,\"budget_bytes_per_rank\":{\"params\":%zu,\"grads\":%zu,\"optim\":%zu,\"activations\":%zu,"
                    "\"attention\":%zu,\"logits\":%zu,\"scratch\":%zu,\"total\":%zu},\"allocated_bytes\":%zu,\"tp\":%d,\"dp\":%d}\n",
            r->state.step, bud->params, bud->grads, bud->optim, bud->acts_kept, bud->acts_attention, bud->logits, bud->scratch,
            bud->total, gpt_allocated_bytes(r->model) + optim_allocated_bytes(r->opt), r->tp->size, r->dp->size);
    fflush(r->log);
}

/* Sequences [first, first + B) of the window as inputs and shifted targets. */
static void slice_micro_batch(run *r, int first) {
    const int B = r->cfg.train.micro_batch, T = r->cfg.model.seq_len;
    for (int k = 0; k < B; k++) {
        const int32_t *src = r->window + (size_t)(first + k) * T;
        memcpy(r->inputs + (size_t)k * T, src, (size_t)T * sizeof(int32_t));
        memcpy(r->targets + (size_t)k * T, src + 1, (size_t)T * sizeof(int32_t));
    }
}

/* Mean loss over one window (a global batch); accumulates gradients when
 * `train` is set. DP rank d takes sequences [d*G/dp, (d+1)*G/dp) of the
 * window, micro-batch by micro-batch; the loss is averaged over DP. */
static float run_window(run *r, bool train) {
    const tg_config *c = &r->cfg;
    const int B = c->train.micro_batch, T = c->model.seq_len, accum = config_grad_accum(c);
    const int first = r->dp->rank * (c->train.global_batch / r->dp->size);
    const float dloss = 1.0f / ((float)c->train.global_batch * T);
    tg_err e;
    double sum = 0.0;
    for (int m = 0; m < accum; m++) {
        slice_micro_batch(r, first + m * B);
        /* Masks keyed by the step and the micro-batch's place in the global
         * batch; no dropout when evaluating. */
        gpt_set_dropout(r->model, train ? (float)c->model.dropout : 0.0f, (uint64_t)c->train.seed,
                        (uint64_t)r->state.step + 1, (uint64_t)(first + m * B) * (uint64_t)T);
        float loss;
        if (gpt_forward(r->model, r->inputs, r->targets, B, T, dloss, &loss, &e)) tg_die(PROG, &e);
        if (train && gpt_backward(r->model, &e)) tg_die(PROG, &e);
        sum += loss;
    }
    float mean = (float)(sum / accum) / (float)r->dp->size;
    if (comm_all_reduce(r->dp, &mean, 1, REDUCE_SUM, &e)) tg_die(PROG, &e);
    return mean;
}

static float evaluate(run *r) {
    data_pos pos = {0, 0};
    long long n = shards_windows_per_epoch(r->val);
    if (n > r->cfg.out.eval_batches) n = r->cfg.out.eval_batches;
    tg_err e;
    double sum = 0.0;
    for (long long i = 0; i < n; i++) {
        if (shards_next(r->val, &pos, r->cfg.model.vocab_size, r->window, &e)) tg_die(PROG, &e);
        sum += run_window(r, false);
    }
    return (float)(sum / n);
}

/* Draws from the softmax over the real vocabulary with a counter-based
 * uniform, so a sample is a pure function of (seed, step, position). */
static int sample_token(const float *logits, int V, float u) {
    float maxv = -INFINITY;
    for (int v = 0; v < V; v++) maxv = logits[v] > maxv ? logits[v] : maxv;
    double sum = 0.0;
    for (int v = 0; v < V; v++) sum += exp(logits[v] - maxv);
    double target = u * sum, acc = 0.0;
    for (int v = 0; v < V; v++) {
        acc += exp(logits[v] - maxv);
        if (acc > target) return v;
    }
    return V - 1;
}

/* Rows and length of the forward that exposes position t-1: the first t
 * tokens, padded under SP to a multiple of tp; past seq_len, the full
 * sequence repeated over enough rows that B*T divides by tp (rows agree, as
 * the model is causal and rows independent). */
static void sample_shape(const tg_config *c, int pad, int t, int *B, int *T) {
    int len = (t + pad - 1) / pad * pad, rows = 1;
    if (len > c->model.seq_len) {
        len = c->model.seq_len;
        while ((rows * len) % pad) rows++;
    }
    *B = rows;
    *T = len;
}

/* Every rank runs the same forwards and draws the same tokens (the gathered
 * logits and the generator agree bitwise); rank 0 prints. */
static void print_sample(run *r) {
    const tg_config *c = &r->cfg;
    const gpt_dims *d = &r->model->d;
    const int n = c->out.sample_tokens < c->model.seq_len - 1 ? c->out.sample_tokens : c->model.seq_len - 1;
    const int pad = d->sp ? d->tp : 1; /* SP splits the rows over TP */
    const int32_t start = c->model.vocab_size > GPT2_EOT_TOKEN ? GPT2_EOT_TOKEN : 0; /* <|endoftext|> starts a document */
    int32_t *toks = tg_malloc((size_t)pad * c->model.seq_len * sizeof(int32_t), "sample");
    float *local = tg_malloc((size_t)d->V_local * sizeof(float), "sample logits");
    float *logits = tg_malloc((size_t)d->Vp * sizeof(float), "sample logits");
    tg_err e;
    for (int i = 0; i < pad * c->model.seq_len; i++) toks[i] = start;
    gpt_set_dropout(r->model, 0.0f, 0, 0, 0); /* sampling runs the model without dropout */
    printf("---- sample at step %d ----\n", r->state.step);
    for (int t = 1; t <= n; t++) {
        int B, T;
        sample_shape(c, pad, t, &B, &T);
        for (int b = 1; b < B; b++) memcpy(toks + (size_t)b * T, toks, (size_t)T * sizeof(int32_t));
        if (gpt_forward(r->model, toks, NULL, B, T, 0.0f, NULL, &e)) tg_die(PROG, &e);
        gpt_logits_at(r->model, 0, t - 1, T, local);
        if (comm_all_gather(r->tp, logits, local, (size_t)d->V_local, &e)) tg_die(PROG, &e);
        float u = rng_uniform((uint64_t)c->train.seed, rng_stream_of("sample"), ((uint64_t)r->state.step << 20) | t);
        toks[t] = sample_token(logits, c->model.vocab_size, u);
        size_t bytes;
        const char *text = tokenizer_decode(r->tok, toks[t], &bytes);
        if (text) fwrite(text, 1, bytes, stdout);
    }
    printf("\n---------------------------\n");
    fflush(stdout);
    free(logits);
    free(local);
    free(toks);
}

/* Seconds of communication so far: measured inside the collectives of a
 * real run, modeled for a projected one. */
static double comm_seconds(const run *r) {
    if (r->cfg.parallel.project) return r->tp->modeled_seconds + r->dp->modeled_seconds;
    return r->tp->seconds + r->dp->seconds;
}

/* Bytes this rank sent during the step, per group and collective kind. */
static void write_comm_bytes(run *r) {
    const comm *groups[2] = {r->tp, r->dp};
    for (int g = 0; g < 2; g++)
        for (int k = 0; k < COLL_KINDS; k++)
            fprintf(r->log, ",\"%s_%s_bytes\":%llu", groups[g]->name, comm_kind_name((coll_kind)k),
                    (unsigned long long)(groups[g]->bytes_sent[k] - r->bytes_at_step_start[g][k]));
}

/* This rank's peak memory so far: the device's, measured by the backend,
 * or the process's peak resident set on the CPU. */
static size_t mem_peak_bytes(const run *r) {
    size_t device = r->ops->mem_peak(r->ops);
    if (device > 0) return device;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (size_t)ru.ru_maxrss * 1024; /* ru_maxrss is in KiB */
}

static void log_train(run *r, float loss, double lr, double norm, double ms) {
    const tg_config *c = &r->cfg;
    const int s = r->state.step;
    const bool projected = c->parallel.project;
    const double comm_ms = (comm_seconds(r) - r->comm_s_at_step_start) * 1e3, step_ms = projected ? ms + comm_ms : ms;
    /* A step too short for the clock has no rate (JSON has no inf). */
    const double tokens = (double)c->train.global_batch * c->model.seq_len, tps = step_ms > 0 ? tokens / (step_ms / 1e3) : 0;
    const int devices = r->tp->size * r->dp->size;
    const double mfu = r->peak_tflops > 0 && tps > 0 ? r->flops_per_token * tps / (devices * r->peak_tflops * 1e12) : -1;
    if (r->log) {
        fprintf(r->log, "{\"step\":%d,\"loss\":%.7g,\"lr\":%.7g,\"grad_norm\":%.7g,\"ms\":%.3f,\"comm_ms\":%.3f,\"step_ms\":%.3f,"
                        "\"projected\":%s,\"tok_per_s\":%.1f,\"tokens\":%.0f,\"flops_per_token\":%.0f",
                s, loss, lr, norm, ms, comm_ms, step_ms, projected ? "true" : "false", tps, tokens * s, r->flops_per_token);
        if (mfu >= 0) fprintf(r->log, ",\"mfu\":%.6f", mfu);
        else fprintf(r->log, ",\"mfu\":null");
        fprintf(r->log, ",\"mem_peak_bytes\":%zu", mem_peak_bytes(r));
        write_comm_bytes(r);
        fprintf(r->log, "}\n");
        fflush(r->log);
    }
    if (s % c->out.log_every != 0 && s != c->train.steps) return;
    double avg = r->train_ms_total / r->train_steps_timed, eta = avg * (c->train.steps - s) / 1e3;
    char extra[96] = ""; /* communication when there is any, MFU when the peak is known */
    if (devices > 1) snprintf(extra, sizeof extra, " (comm %.1f)", comm_ms);
    if (mfu >= 0) snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " | MFU %.1f%%", 100 * mfu);
    printf("step %*d/%d | loss %.4f | lr %.3e | grad norm %.4f | %.1f ms%s%s | %.0f tok/s | ETA %dm%02ds\n",
           (int)log10(c->train.steps) + 1, s, c->train.steps, loss, lr, norm, step_ms, projected ? " projected" : "",
           extra, tps, (int)eta / 60, (int)eta % 60);
    fflush(stdout);
}

static void log_eval(run *r, float val) {
    if (r->log) {
        fprintf(r->log, "{\"step\":%d,\"val_loss\":%.7g}\n", r->state.step, val);
        fflush(r->log);
    }
    printf("step %d | val loss %.4f\n", r->state.step, val);
    fflush(stdout);
}

static void save(run *r) {
    tg_err e;
    double t0 = now_ms();
    int rc = ckpt_save(r->cfg.out.dir, r->model, r->opt, &r->cfg, &r->state, r->rank == 0, &e);
    if (rc < 0) tg_die(PROG, &e);
    if (rc == 1) printf("%s/step_%08d already holds this state\n", r->cfg.out.dir, r->state.step);
    else printf("saved %s/step_%08d (%.0f ms)\n", r->cfg.out.dir, r->state.step, now_ms() - t0);
}

static void train_step(run *r) {
    const tg_config *c = &r->cfg;
    tg_err e;
    double t0 = now_ms();
    r->ops->timer_begin(r->ops);
    memcpy(r->bytes_at_step_start[0], r->tp->bytes_sent, sizeof r->bytes_at_step_start[0]);
    memcpy(r->bytes_at_step_start[1], r->dp->bytes_sent, sizeof r->bytes_at_step_start[1]);
    r->comm_s_at_step_start = comm_seconds(r);
    if (shards_next(r->train, &r->state.pos, c->model.vocab_size, r->window, &e)) tg_die(PROG, &e);
    gpt_zero_grads(r->model);
    float loss = run_window(r, true);
    int s = r->state.step + 1;
    double norm, lr = optim_lr(c, s);
    if (gpt_sync_replicated_grads(r->model, &e) || optim_reduce_grads(r->opt, r->model, &e) ||
        optim_grad_norm(r->opt, r->model, &norm, &e) || optim_step(r->opt, r->model, c, s, lr, norm, &e))
        tg_die(PROG, &e);
    r->state.step = s;
    /* The device's own clock where there is one (CUDA events around the
     * step), else the wall clock. */
    const double device_ms = r->ops->timer_end_ms(r->ops);
    double ms = device_ms >= 0 ? device_ms : now_ms() - t0;
    if (s > 1 || c->train.steps == 1) { /* the first step pays for page faults */
        r->train_ms_total += ms;
        r->train_steps_timed++;
    } else {
        r->train_ms_total = ms;
        r->train_steps_timed = 1;
    }
    log_train(r, loss, lr, norm, ms);
}

static bool every(int step, int n) { return n > 0 && step % n == 0; }

/* Every rank's peak resident memory (MiB, global rank order: the TP group
 * gathered, then the DP groups), logged by rank 0. A collective. */
static void log_peak_memory(run *r) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    float mine = (float)(ru.ru_maxrss / 1024.0); /* ru_maxrss is in KiB */
    const int n = r->cfg.parallel.project ? 1 : r->tp->size * r->dp->size; /* a projection is one process */
    float *tp_peaks = tg_malloc((size_t)r->tp->size * sizeof(float), "peaks");
    float *all = tg_malloc((size_t)r->tp->size * r->dp->size * sizeof(float), "peaks");
    tg_err e;
    if (comm_all_gather(r->tp, tp_peaks, &mine, 1, &e) ||
        comm_all_gather(r->dp, all, tp_peaks, (size_t)r->tp->size, &e))
        tg_die(PROG, &e);
    if (r->log) {
        fprintf(r->log, "{\"step\":%d,\"mem_peak_mib_by_rank\":[", r->state.step);
        for (int i = 0; i < n; i++) fprintf(r->log, "%s%.1f", i ? "," : "", all[i]);
        fprintf(r->log, "]}\n");
        fflush(r->log);
    }
    printf("peak resident memory per rank (MiB):");
    for (int i = 0; i < n; i++) printf(" %.1f", all[i]);
    printf("\n");
    free(tp_peaks);
    free(all);
}

int main(int argc, char **argv) {
    run r;
    memset(&r, 0, sizeof r);
    parse_args(argc, argv, &r.cfg, &r.topo);
    setup(&r);
    const tg_config *c = &r.cfg;
    const bool keep = !c->parallel.project; /* a projection's numbers are not a model */
    const bool can_eval = keep && r.val != NULL, can_sample = keep && r.tok != NULL;
    while (r.state.step < c->train.steps) {
        train_step(&r);
        const int s = r.state.step;
        const bool last = s == c->train.steps;
        if (can_eval && (every(s, c->out.eval_every) || last)) log_eval(&r, evaluate(&r));
        if (keep && every(s, c->out.save_every) && !last) save(&r);
        if (can_sample && every(s, c->out.sample_every) && !last) print_sample(&r);
    }
    if (keep && c->out.save_final) save(&r);
    if (can_sample) print_sample(&r);
    log_peak_memory(&r);
    if (r.log) fclose(r.log);
    free(r.window);
    free(r.inputs);
    free(r.targets);
    tokenizer_free(r.tok);
    shards_close(r.train);
    shards_close(r.val);
    optim_free(r.opt);
    gpt_free(r.model);
    comm_destroy(r.tp);
    comm_destroy(r.dp);
    bootstrap_destroy(r.bs);
    ops_destroy(r.ops);
    topology_free(&r.topo);
    return 0;
}
