#include "train/config.h"
#include "data/hellaswag.h"
#include "kernels/ops.h"
#include "util/json.h"
#include "util/spell.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum { K_INT, K_INT64, K_FLOAT, K_BOOL, K_STRING, K_ENUM } key_type;

typedef struct {
    const char *path;     /* "section.key", or "key" at top level */
    key_type type;
    size_t offset;        /* into tg_config */
    size_t size;          /* for strings */
    const char *def;      /* default, as text */
    double min, max;      /* numeric range, inclusive */
    const char *choices;  /* K_ENUM: '|'-separated */
    const char *help;
} key_spec;

#define OFF(field) offsetof(tg_config, field), sizeof(((tg_config *)0)->field)
#define BIG 1e18
/* The shape keys a checkpoint can supply: left out of the config and --set,
 * they come from the checkpoint the run starts from (train/model_files.c). */
#define SHAPE_NOTE "; left out: from the checkpoint the run starts from (out.dir's newest, else model.init_from), else this default"

static const key_spec SCHEMA[] = {
    {"model.n_layer", K_INT, OFF(model.n_layer), "12", 1, 1024, NULL, "number of transformer blocks" SHAPE_NOTE},
    {"model.n_head", K_INT, OFF(model.n_head), "12", 1, 1024, NULL, "attention heads (must divide n_embd)" SHAPE_NOTE},
    {"model.n_embd", K_INT, OFF(model.n_embd), "768", 1, 65536, NULL, "hidden width C" SHAPE_NOTE},
    {"model.vocab_size", K_INT, OFF(model.vocab_size), "50257", 1, 65536, NULL, "real vocabulary size (token ids must be below it)" SHAPE_NOTE},
    {"model.vocab_multiple", K_INT, OFF(model.vocab_multiple), "128", 1, 65536, NULL, "the padded vocabulary is the next multiple of this"},
    {"model.seq_len", K_INT, OFF(model.seq_len), "1024", 1, 1 << 20, NULL, "context length T (also the rows of wpe)" SHAPE_NOTE},
    {"model.dropout", K_FLOAT, OFF(model.dropout), "0", 0, 0.999, NULL, "dropout probability after the embedding, on attention probabilities and on each residual branch (GPT-2 uses 0.1)"},
    {"model.init_from", K_STRING, OFF(model.init_from), "", 0, 0, NULL, "start from this checkpoint dir, Hugging Face GPT-2 dir (model.safetensors + config.json) or llm.c gpt2_*.bin (version 3 fp32 or 5 bf16); empty: random init"},
    {"train.micro_batch", K_INT, OFF(train.micro_batch), "4", 1, 1 << 20, NULL, "sequences per forward/backward on each data-parallel rank"},
    {"train.global_batch", K_INT, OFF(train.global_batch), "4", 1, 1 << 24, NULL, "sequences per optimizer step (gradient accumulation makes up the rest)"},
    {"train.steps", K_INT, OFF(train.steps), "1000", 0, 1 << 30, NULL, "optimizer steps to run (0: just write the initial checkpoint)"},
    {"train.lr", K_FLOAT, OFF(train.lr), "6e-4", 0, 10, NULL, "peak learning rate"},
    {"train.min_lr", K_FLOAT, OFF(train.min_lr), "6e-5", 0, 10, NULL, "learning rate at the end of the decay (cosine, linear, wsd)"},
    {"train.warmup", K_INT, OFF(train.warmup), "100", 0, 1 << 30, NULL, "linear warm-up steps"},
    {"train.lr_schedule", K_ENUM, OFF(train.lr_schedule), "cosine", 0, 0, "cosine|linear|constant|wsd", "after the warm-up, the LR falls from lr to min_lr over the remaining steps as a half cosine (cosine) or a line (linear), stays at lr (constant), or stays at lr and then falls as 1 - sqrt over the last train.wsd_decay_frac of the steps (wsd: warm-up, stable, decay)"},
    {"train.wsd_decay_frac", K_FLOAT, OFF(train.wsd_decay_frac), "0.2", 0, 1, NULL, "lr_schedule wsd: the share of train.steps, at the end, over which the LR decays (the last round(this x steps) steps, none of them inside the warm-up)"},
    {"train.weight_decay", K_FLOAT, OFF(train.weight_decay), "0.1", 0, 10, NULL, "AdamW decoupled weight decay (2-D tensors only)"},
    {"train.beta1", K_FLOAT, OFF(train.beta1), "0.9", 0, 0.999999, NULL, "AdamW beta1"},
    {"train.beta2", K_FLOAT, OFF(train.beta2), "0.95", 0, 0.999999, NULL, "AdamW beta2"},
    {"train.eps", K_FLOAT, OFF(train.eps), "1e-8", 0, 1, NULL, "AdamW epsilon (outside the square root)"},
    {"train.grad_clip", K_FLOAT, OFF(train.grad_clip), "1.0", 0, BIG, NULL, "clip the global gradient norm to this (0: no clipping)"},
    {"train.seed", K_INT64, OFF(train.seed), "1337", 0, 9007199254740991.0, NULL, "seed of every random number (init, shuffling, sampling)"},
    {"train.recompute", K_ENUM, OFF(train.recompute), "none", 0, 0, "none|selective|full", "activation recomputation: none, selective (the GELU output, rebuilt from its input), full (whole blocks)"},
    {"train.precision", K_ENUM, OFF(train.precision), "auto", 0, 0, "auto|fp32|bf16", "activations and working weights: bf16 (fp32 master weights, AdamW state and loss) or fp32; auto: bf16 on cuda, fp32 on the CPU (where bf16 is an emulation for tests: float32 kernels on bf16 storage, slow)"},
    {"train.on_nonfinite", K_ENUM, OFF(train.on_nonfinite), "stop", 0, 0, "stop|skip", "a step whose loss or gradient norm is not finite: stop (exit non-zero, save nothing of that state) or skip (drop its update, log it, go on)"},
    {"train.max_skipped", K_INT, OFF(train.max_skipped), "5", 1, 1 << 20, NULL, "on_nonfinite = skip: stop once this many steps in a row were skipped"},
    {"train.cuda_graph", K_BOOL, OFF(train.cuda_graph), "true", 0, 0, NULL, "on a GPU, capture the training step as one CUDA graph at the second step and replay it from the third (one process, or any layout over parallel.comm=nccl, whose collectives the graph holds; out.op_times off; otherwise each op is launched on its own)"},
    {"train.poison_grads", K_BOOL, OFF(train.poison_grads), "false", 0, 0, NULL, "test: fill every parameter gradient with NaN before each step, so that one the step's first micro-batch does not write (it writes them, the later micro-batches add to them: no zeroing pass) makes the step's gradient norm non-finite; the results are otherwise bitwise those without it (one extra write of the gradients a step)"},
    {"kernels.lt_tune", K_STRING, OFF(kernels.lt_tune), "off", 0, 0, NULL, "on a GPU, which cuBLASLt algorithm each product runs: off (the heuristic's first), time (the fastest of the heuristic's top 8, timed once on the product's first call; a run's choices are written to out.dir/lt_algos.tsv and, when that file is there already, pinned from it), or the path of such a file, whose choices are pinned (bitwise the same run to run; another algorithm may round differently)"},
    {"kernels.attention", K_ENUM, OFF(kernels.attention), "auto", 0, 0, "auto|mma|wgmma|wgmma_ws", "on a GPU, the attention kernels: auto (where wgmma can run, per head size the forward and the backward an H200 measured faster a step, results/gpu/2026-11-30_h200: head size 64 forward wgmma_ws and backward wgmma, head size 96 forward mma and backward wgmma, head size 128 (not timed yet) mma; mma elsewhere; the run prints its choice), mma (mma.sync, every device), wgmma (Hopper's warpgroup MMA: compute capability 9.0 and a build with sm_90a code, bf16, head sizes 64, 96 and 128, no dropout; the forward, and the backward with dq summed in a fixed order) or wgmma_ws (the same backward; the forward warp-specialized: a TMA producer warp and two consumer warpgroups on mbarriers); on an H200, wgmma_ws took 3 to 5% less time a step than mma at GPT-2 124M and the 1.2B model, with the same losses"},
    {"kernels.dw_overlap", K_BOOL, OFF(kernels.dw_overlap), "false", 0, 0, NULL, "on a GPU, each linear layer's weight-gradient product on a second stream, beside its input-gradient product, so that each fills the SMs the other leaves idle (the same products: the same bits; not timed yet, so off)"},
    {"data.train", K_STRING, OFF(data.train), "assets/data/kjv_train_*.bin", 0, 0, NULL, "glob of training shards, read in sorted order"},
    {"data.val", K_STRING, OFF(data.val), "assets/data/kjv_val_*.bin", 0, 0, NULL, "glob of validation shards (empty: no evaluation)"},
    {"data.shuffle", K_BOOL, OFF(data.shuffle), "false", 0, 0, NULL, "visit training windows in a seeded random order each epoch"},
    {"data.allow_changed", K_BOOL, OFF(data.allow_changed), "false", 0, 0, NULL, "resume although the train shards differ from those the checkpoint was saved with (added, removed or resized: the saved data position then reads other tokens), with a warning saying what changed; false: refuse"},
    {"data.vocab_dir", K_STRING, OFF(data.vocab_dir), "assets/vocab", 0, 0, NULL, "directory holding encoder.json and vocab.bpe (for samples)"},
    {"out.dir", K_STRING, OFF(out.dir), "runs/default", 0, 0, NULL, "run directory: log.jsonl and step_XXXXXXXX/ checkpoints; a training run holds its lock, .train_gpt.lock (a second run into it is refused, naming the holder's pid and host)"},
    {"out.log_every", K_INT, OFF(out.log_every), "1", 1, 1 << 30, NULL, "print a progress line every this many steps"},
    {"out.eval_every", K_INT, OFF(out.eval_every), "100", 0, 1 << 30, NULL, "validation loss every this many steps, and at the end (0: only at the end)"},
    {"out.eval_batches", K_INT, OFF(out.eval_batches), "4", -1, 1 << 30, NULL, "validation batches (of global_batch sequences) per evaluation, the first ones of data.val (0: no evaluation; -1: the whole validation set)"},
    {"out.save_every", K_INT, OFF(out.save_every), "0", 0, 1 << 30, NULL, "checkpoint every this many steps (0: only at the end)"},
    {"out.keep_last", K_INT, OFF(out.keep_last), "0", 0, 1 << 30, NULL, "after each checkpoint, remove out.dir's older checkpoints beyond the newest this many (0: keep all); one holding a file train_gpt did not write is kept, with a warning"},
    {"out.keep_every", K_INT, OFF(out.keep_every), "0", 0, 1 << 30, NULL, "with out.keep_last: never remove the checkpoints of steps that are multiples of this (0: none)"},
    {"out.save_final", K_BOOL, OFF(out.save_final), "true", 0, 0, NULL, "save a checkpoint at the end of the run (sweeps turn it off)"},
    {"out.resume", K_BOOL, OFF(out.resume), "true", 0, 0, NULL, "continue from the newest complete checkpoint in out.dir"},
    {"out.sample_every", K_INT, OFF(out.sample_every), "0", 0, 1 << 30, NULL, "print a generated sample every this many steps (0: only at the end)"},
    {"out.op_times", K_BOOL, OFF(out.op_times), "false", 0, 0, NULL, "time every kernel op (CUDA events around each on a GPU, the wall clock on the CPU) from step 2 on; prints a table at the end and writes out.dir/op_times.tsv"},
    {"out.hellaswag", K_STRING, OFF(out.hellaswag), "", 0, 0, NULL, "HellaSwag JSONL file (the dataset's hellaswag_val.jsonl; see --hellaswag) scored at every evaluation (out.eval_every and the end), logged as hellaswag_acc_norm and hellaswag_acc; needs train.micro_batch >= 4 and data.vocab_dir (empty: none)"},
    {"out.sample_tokens", K_INT, OFF(out.sample_tokens), "64", 0, 1 << 20, NULL, "tokens per generated sample (0: no samples)"},
    {"parallel.tp", K_INT, OFF(parallel.tp), "1", 1, 1024, NULL, "tensor-parallel degree (must divide model.n_head)"},
    {"parallel.dp", K_INT, OFF(parallel.dp), "0", 0, 1 << 20, NULL, "data-parallel degree (0: world size / tp)"},
    {"parallel.sp", K_BOOL, OFF(parallel.sp), "false", 0, 0, NULL, "sequence parallelism over the TP group"},
    {"parallel.sp_regather", K_BOOL, OFF(parallel.sp_regather), "true", 0, 0, NULL, "under parallel.sp, keep each LayerNorm's output for the backward pass as this rank's 1/tp of the rows and all-gather it again there (Megatron's way: activations within 2205.05198's 34sbh/t a layer, one more all-gather per LayerNorm); false: keep all rows as gathered in the forward pass (tp times that memory, no extra all-gather); the results are bitwise the same"},
    {"parallel.zero", K_INT, OFF(parallel.zero), "0", 0, 1, NULL, "1: ZeRO-1, AdamW state sharded over DP"},
    {"parallel.dp_bucket_mb", K_FLOAT, OFF(parallel.dp_bucket_mb), "25", 0, 1e6, NULL, "the data-parallel gradient all-reduce starts during the last micro-batch's backward pass, in buckets of whole layers of about this many MiB, overlapping the layers still to run (0: one all-reduce after the backward pass); under ZeRO the same buckets are reduce-scattered, each rank's shard is its 1/dp of every bucket, and the updated weights are all-gathered bucket by bucket beside the next step's forward pass"},
    {"parallel.timeout_s", K_FLOAT, OFF(parallel.timeout_s), "300", 0.1, 1e6, NULL, "seconds a rank waits for its peers before it gives up"},
    {"parallel.save_timeout_s", K_FLOAT, OFF(parallel.save_timeout_s), "3600", 0.1, 1e6, NULL, "seconds the other ranks wait for rank 0 to write a checkpoint (in place of parallel.timeout_s: a large model's checkpoint may take longer to write; a rank that exits still ends the wait at once)"},
    {"parallel.numa", K_ENUM, OFF(parallel.numa), "auto", 0, 0, "auto|off", "bind each rank's threads and memory to a NUMA node"},
    {"parallel.comm", K_ENUM, OFF(parallel.comm), "auto", 0, 0, "auto|shm|nccl", "communicator between ranks: shm (one node, host memory; device buffers staged), nccl (cuda builds, one GPU per rank); auto: nccl on cuda when every rank of the node has its own GPU, else shm"},
    {"parallel.project", K_BOOL, OFF(parallel.project), "false", 0, 0, NULL, "one process runs rank 0's exact shard of the tp x dp layout with a null communicator and models the communication (projection)"},
    /* Sources of the defaults: docs/scaling.md, "The link tables" (bus_gbps and latency_us), and
     * NVIDIA's DGX H100 data sheet (node_gbps: eight ConnectX-7 at 400 Gb/s each). */
    {"interconnect.bus_gbps", K_FLOAT, OFF(interconnect.bus_gbps), "370", 0.001, 1e6, NULL, "projection: bus bandwidth in GB/s (NCCL busbw; default H100 NVLink-4's with Ring, configs/links)"},
    {"interconnect.latency_us", K_FLOAT, OFF(interconnect.latency_us), "20", 0, 1e6, NULL, "projection: fixed time per collective in microseconds (default: 4xH100's measured 17-24, configs/links)"},
    {"interconnect.table", K_STRING, OFF(interconnect.table), "", 0, 0, NULL, "projection: an nccl-tests table (\"collective bytes busbw_GBps [ranks]\" lines, e.g. configs/links/h100_sxm_nvlink4_ring.txt) used instead of bus_gbps and latency_us; empty: those two"},
    {"interconnect.node_gpus", K_INT, OFF(interconnect.node_gpus), "0", 0, 1 << 20, NULL, "projection: ranks (GPUs) per node, ranks numbered node by node with each TP group's ranks adjacent; a TP or DP group with ranks on more than one node is modeled over the network (node_gbps, node_latency_us), not the link above (0: every rank on one node)"},
    {"interconnect.node_gbps", K_FLOAT, OFF(interconnect.node_gbps), "400", 0.001, 1e6, NULL, "projection: one node's network bandwidth in GB/s, all its NICs together (default: DGX H100's 8 x 400 Gb/s); a group across nodes gets it divided by the groups that cross at once (tp for a DP group, at most node_gpus), at most interconnect.bus_gbps"},
    {"interconnect.node_latency_us", K_FLOAT, OFF(interconnect.node_latency_us), "20", 0, 1e6, NULL, "projection: fixed time per collective across nodes in microseconds (default: latency_us's, an assumption: not measured across nodes)"},
    {"device_peak_tflops", K_FLOAT, OFF(device_peak_tflops), "0", 0, 1e6, NULL, "peak dense TFLOP/s of one device for MFU (0: the CUDA device's own from a table of GPUs, bf16 or fp32 as trained; unknown on the CPU: no MFU)"},
    {"device", K_ENUM, OFF(device), "cpu", 0, 0, "cpu|cuda", "compute backend (cuda: a build made with make GPU=1)"},
};
#define N_KEYS (sizeof SCHEMA / sizeof SCHEMA[0])
_Static_assert(N_KEYS <= CFG_KEYS_MAX, "tg_config.from_set must have room for every key");

static const key_spec *find_key(const char *path) {
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(SCHEMA[i].path, path) == 0) return &SCHEMA[i];
    return NULL;
}

/* The known name nearest to an unknown key, for "did you mean": a key whose
 * last part is the word given without its section ("warmup" for
 * train.warmup), else the key or section within a few typing slips; NULL
 * when none is near. `sections` holds room for the section names. */
static const char *suggest_key(const char *path, char sections[][CFG_WORD_MAX]) {
    if (!strchr(path, '.'))
        for (size_t i = 0; i < N_KEYS; i++) {
            const char *dot = strchr(SCHEMA[i].path, '.');
            if (dot && strcasecmp(dot + 1, path) == 0) return SCHEMA[i].path;
        }
    const char *names[2 * N_KEYS];
    size_t n = 0, n_sections = 0;
    for (size_t i = 0; i < N_KEYS; i++) {
        names[n++] = SCHEMA[i].path;
        const char *dot = strchr(SCHEMA[i].path, '.');
        if (!dot) continue;
        const int len = (int)(dot - SCHEMA[i].path);
        if (n_sections > 0 && strncmp(sections[n_sections - 1], SCHEMA[i].path, (size_t)len) == 0 &&
            sections[n_sections - 1][len] == '\0')
            continue; /* the schema lists a section's keys together */
        snprintf(sections[n_sections], CFG_WORD_MAX, "%.*s", len, SCHEMA[i].path);
        names[n++] = sections[n_sections++];
    }
    return spell_nearest(path, names, n);
}

/* The message for an unknown key, with the nearest known one if any. */
static int fail_unknown_key(const char *src, const char *path, tg_err *e) {
    char sections[N_KEYS][CFG_WORD_MAX];
    const char *near = suggest_key(path, sections);
    if (near) return tg_fail(e, "%s: unknown key '%s': did you mean %s? (see --help for the keys)", src, path, near);
    return tg_fail(e, "%s: unknown key '%s' (see --help for the keys)", src, path);
}

static const char *const SHAPE_PATHS[SHAPE_KEYS] = {"model.n_layer", "model.n_head", "model.n_embd",
                                                    "model.vocab_size", "model.seq_len"};

/* Remembers that the file or --set gave a shape key, so that a checkpoint
 * does not override it. */
static void note_given(tg_config *c, const key_spec *k) {
    for (int i = 0; i < SHAPE_KEYS; i++)
        if (strcmp(k->path, SHAPE_PATHS[i]) == 0) c->model.shape_given |= 1u << i;
}

static const char *type_name(key_type t) {
    switch (t) {
    case K_INT: case K_INT64: return "integer";
    case K_FLOAT: return "number";
    case K_BOOL: return "boolean";
    case K_STRING: return "string";
    case K_ENUM: return "string";
    }
    return "?";
}

static bool enum_allows(const key_spec *k, const char *v) {
    size_t n = strlen(v);
    for (const char *p = k->choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0) return true;
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

/* Stores a numeric value after range and integrality checks. */
static int store_number(tg_config *c, const key_spec *k, double v, const char *src, tg_err *e) {
    void *dst = (char *)c + k->offset;
    if (!isfinite(v)) return tg_fail(e, "%s: key '%s' must be a finite number", src, k->path);
    if ((k->type == K_INT || k->type == K_INT64) && v != floor(v))
        return tg_fail(e, "%s: key '%s' must be an integer, got %g", src, k->path, v);
    if (v < k->min || v > k->max)
        return tg_fail(e, "%s: key '%s' = %.15g is out of range [%.15g, %.15g]", src, k->path, v, k->min, k->max);
    if (k->type == K_INT) *(int *)dst = (int)v;
    else if (k->type == K_INT64) *(long long *)dst = (long long)v;
    else *(double *)dst = v;
    return 0;
}

static int store_text(tg_config *c, const key_spec *k, const char *v, const char *src, tg_err *e) {
    if (k->type == K_ENUM && !enum_allows(k, v))
        return tg_fail(e, "%s: key '%s' = \"%s\" is not one of %s", src, k->path, v, k->choices);
    if (strlen(v) >= k->size)
        return tg_fail(e, "%s: key '%s' is too long (%zu characters, at most %zu)", src, k->path, strlen(v), k->size - 1);
    strcpy((char *)c + k->offset, v);
    return 0;
}

/* Parses text as the key's type (defaults and --set values). */
static int store_from_text(tg_config *c, const key_spec *k, const char *v, const char *src, tg_err *e) {
    switch (k->type) {
    case K_INT: case K_INT64: case K_FLOAT: {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        if (*v == '\0' || *end != '\0' || errno)
            return tg_fail(e, "%s: key '%s' must be %s %s, got \"%s\"", src, k->path,
                           k->type == K_FLOAT ? "a" : "an", type_name(k->type), v);
        return store_number(c, k, d, src, e);
    }
    case K_BOOL:
        if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0) *(bool *)((char *)c + k->offset) = true;
        else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0) *(bool *)((char *)c + k->offset) = false;
        else return tg_fail(e, "%s: key '%s' must be true or false, got \"%s\"", src, k->path, v);
        return 0;
    case K_STRING: case K_ENUM:
        return store_text(c, k, v, src, e);
    }
    return 0;
}

/* The JSON value `item` as the file wrote it, cut to fit buf: for a
 * message that says what was found where something else was wanted. */
static const char *json_shown(const cJSON *item, char *buf, size_t n) {
    char *text = cJSON_PrintUnformatted(item);
    snprintf(buf, n, "%s", text ? text : "?");
    if (text && strlen(text) >= n && n > 4) strcpy(buf + n - 4, "...");
    cJSON_free(text);
    return buf;
}

static int store_from_json(tg_config *c, const key_spec *k, const cJSON *item, const char *src, tg_err *e) {
    char got[48];
    switch (k->type) {
    case K_INT: case K_INT64: case K_FLOAT:
        if (!cJSON_IsNumber(item))
            return tg_fail(e, "%s: key '%s' must be %s %s, got %s", src, k->path, k->type == K_FLOAT ? "a" : "an",
                           type_name(k->type), json_shown(item, got, sizeof got));
        return store_number(c, k, item->valuedouble, src, e);
    case K_BOOL:
        if (!cJSON_IsBool(item))
            return tg_fail(e, "%s: key '%s' must be true or false, got %s", src, k->path, json_shown(item, got, sizeof got));
        *(bool *)((char *)c + k->offset) = cJSON_IsTrue(item);
        return 0;
    case K_STRING: case K_ENUM:
        if (!cJSON_IsString(item))
            return tg_fail(e, "%s: key '%s' must be a string, got %s", src, k->path, json_shown(item, got, sizeof got));
        return store_text(c, k, item->valuestring, src, e);
    }
    return 0;
}

void config_defaults(tg_config *c) {
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < N_KEYS; i++) {
        tg_err e;
        if (store_from_text(c, &SCHEMA[i], SCHEMA[i].def, "schema default", &e) != 0) {
            fprintf(stderr, "internal error: %s\n", e.msg);
            abort();
        }
    }
}

static char *read_text_file(const char *path, size_t *len, tg_err *e) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        tg_fail(e, "%s: cannot open config file: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = tg_malloc(cap, "config text");
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); tg_fail(e, "%s: out of memory", path); return NULL; }
            buf = nb;
        }
    }
    const int read_errno = ferror(f) ? errno : 0;
    fclose(f);
    if (read_errno) {
        free(buf);
        tg_fail(e, "%s: cannot read config file: %s", path, strerror(read_errno));
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

const char *config_number_text(double x, char *buf, size_t n) {
    snprintf(buf, n, x == floor(x) && fabs(x) < 1e30 ? "%.0f" : "%g", x);
    return buf;
}

int config_parse_number(const char *what, const char *text, bool integral, double min, double max, double *out,
                        tg_err *e) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    /* strtod alone takes "3x" as 3, "nan", "inf", hex and leading spaces. */
    bool ok = text[0] && !isspace((unsigned char)text[0]) && *end == '\0' && errno == 0 && isfinite(v) &&
              strpbrk(text, "xXpP") == NULL;
    if (!ok || (integral && v != floor(v)) || v < min || v > max)
        return tg_fail(e, "%s: '%s' is not %s from %.15g to %.15g", what, text, integral ? "a whole number" : "a number",
                       min, max);
    *out = v;
    return 0;
}

static int apply_member(tg_config *c, const char *prefix, const cJSON *item, const char *src, tg_err *e) {
    char path[256];
    if (prefix) snprintf(path, sizeof path, "%s.%s", prefix, item->string);
    else snprintf(path, sizeof path, "%s", item->string);
    const key_spec *k = find_key(path);
    if (k) {
        if (store_from_json(c, k, item, src, e)) return -1;
        note_given(c, k);
        return 0;
    }
    if (!prefix) {
        bool is_section = false;
        size_t n = strlen(path);
        for (size_t i = 0; i < N_KEYS; i++)
            if (strncmp(SCHEMA[i].path, path, n) == 0 && SCHEMA[i].path[n] == '.') is_section = true;
        if (is_section && !cJSON_IsObject(item))
            return tg_fail(e, "%s: '%s' must be an object holding the %s.* keys", src, path, path);
        if (is_section) {
            for (const cJSON *m = item->child; m; m = m->next)
                if (apply_member(c, path, m, src, e) != 0) return -1;
            return 0;
        }
    }
    return fail_unknown_key(src, path, e);
}

int config_load_file(tg_config *c, const char *path, tg_err *e) {
    size_t len;
    char *text = read_text_file(path, &len, e);
    if (!text) return -1;
    cJSON *root = json_parse_exact(text, len, path, e);
    free(text);
    if (!root) return -1;
    snprintf(c->source, sizeof c->source, "%s", path);
    int rc = 0;
    if (!cJSON_IsObject(root)) rc = tg_fail(e, "%s: the config must be a JSON object", path);
    for (const cJSON *m = root->child; rc == 0 && m; m = m->next) rc = apply_member(c, NULL, m, path, e);
    cJSON_Delete(root);
    return rc;
}

int config_set(tg_config *c, const char *assignment, tg_err *e) {
    const char *eq = strchr(assignment, '=');
    if (!eq) return tg_fail(e, "--set %s: write --set %s=VALUE (one argument, with '=')", assignment, assignment);
    char path[256];
    size_t n = (size_t)(eq - assignment);
    if (n >= sizeof path) return tg_fail(e, "--set %s: key too long", assignment);
    memcpy(path, assignment, n);
    path[n] = '\0';
    const key_spec *k = find_key(path);
    if (!k) return fail_unknown_key("--set", path, e);
    if (store_from_text(c, k, eq + 1, "--set", e)) return -1;
    c->from_set[k - SCHEMA] = true;
    note_given(c, k);
    return 0;
}

bool config_shape_complete(const tg_config *c) { return c->model.shape_given == (1u << SHAPE_KEYS) - 1; }

int config_take_shape(tg_config *c, const long long shape[SHAPE_KEYS], const char *src, tg_err *e) {
    for (int i = 0; i < SHAPE_KEYS; i++)
        if (!(c->model.shape_given & (1u << i)) && store_number(c, find_key(SHAPE_PATHS[i]), (double)shape[i], src, e))
            return -1;
    return 0;
}

int config_padded_vocab(const tg_config *c) {
    int m = c->model.vocab_multiple;
    return (c->model.vocab_size + m - 1) / m * m;
}

void config_resolve_layout(tg_config *c, int world_size) {
    if (c->parallel.dp != 0) return;
    c->parallel.dp = c->parallel.tp > 0 && world_size % c->parallel.tp == 0 ? world_size / c->parallel.tp : 1;
    c->parallel.dp_from_world = true;
}

int config_grad_accum(const tg_config *c) {
    return c->train.global_batch / (c->train.micro_batch * c->parallel.dp);
}

long long config_eval_windows(const tg_config *c, long long available) {
    return c->out.eval_batches < 0 || c->out.eval_batches > available ? available : c->out.eval_batches;
}

double config_tokens_per_device(const tg_config *c, int tp, int dp) {
    return (double)c->train.global_batch * c->model.seq_len / ((double)tp * dp);
}

/* Where the values a message is about came from: the config file (which
 * includes the defaults it left alone), or each key of `keys` (space-separated)
 * that a --set gave, so a bad override is not blamed on the file. */
const char *config_origin(const tg_config *c, const char *keys, char *buf, size_t n) {
    const char *file = c->source[0] ? c->source : "config";
    size_t len = 0;
    int listed = 0, overridden = 0;
    for (const char *p = keys; *p; listed++) {
        const size_t k = strcspn(p, " ");
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)k, p);
        const key_spec *spec = find_key(key);
        if (spec && c->from_set[spec - SCHEMA] && len < n)
            len += (size_t)snprintf(buf + len, n - len, "%s--set %s", overridden++ ? ", " : "", key);
        p += k + strspn(p + k, " ");
    }
    if (!overridden) snprintf(buf, n, "%s", file);
    else if (overridden < listed && len < n) snprintf(buf + len, n - len, " (over %s)", file);
    return buf;
}

const char *config_key_named(const tg_config *c, const char *key, char *buf, size_t n) {
    config_origin(c, key, buf, n);
    const size_t len = strlen(buf);
    if (strncmp(buf, "--set ", 6) != 0 && len < n) snprintf(buf + len, n - len, ": %s", key); /* "--set KEY" names it */
    return buf;
}

int config_check_shape(const tg_config *c, const long long shape[SHAPE_KEYS], const char *const names[SHAPE_KEYS],
                       const char *src, const char *advice, tg_err *e) {
    const int given[SHAPE_KEYS] = {c->model.n_layer, c->model.n_head, c->model.n_embd, c->model.vocab_size,
                                   c->model.seq_len};
    char where[CFG_PATH_MAX + 512];
    for (int i = 0; i < SHAPE_KEYS; i++) {
        const bool fits = i == SHAPE_SEQ_LEN ? given[i] <= shape[i] : given[i] == shape[i];
        if (fits || !(c->model.shape_given & (1u << i))) continue;
        return tg_fail(e, "%s: %s = %d does not fit %s, whose %s is %lld: %s", config_origin(c, SHAPE_PATHS[i], where, sizeof where),
                       SHAPE_PATHS[i], given[i], src, names[i], shape[i], advice);
    }
    return 0;
}

int config_validate(const tg_config *c, int world_size, tg_err *e) {
    char where[CFG_PATH_MAX + 512];
#define FROM(keys) config_origin(c, keys, where, sizeof where)
    const int tp = c->parallel.tp, dp = c->parallel.dp, B = c->train.micro_batch, T = c->model.seq_len;
    if (c->model.n_embd % c->model.n_head != 0)
        return tg_fail(e, "%s: model.n_embd (%d) must be divisible by model.n_head (%d)",
                       FROM("model.n_embd model.n_head"), c->model.n_embd, c->model.n_head);
    if (c->train.min_lr > c->train.lr)
        return tg_fail(e, "%s: train.min_lr (%g) must not exceed train.lr (%g)", FROM("train.min_lr train.lr"),
                       c->train.min_lr, c->train.lr);
    if (c->model.n_head % tp != 0)
        return tg_fail(e, "%s: model.n_head (%d) must be divisible by parallel.tp (%d): each TP rank takes n_head/tp heads",
                       FROM("model.n_head parallel.tp"), c->model.n_head, tp);
    /* Products in long long: each factor fits an int, their product may not. */
    const long long layout = (long long)tp * dp, rows = (long long)B * T, per_step = (long long)B * dp;
    if (world_size != layout)
        return tg_fail(e, "%s: the world size (%d ranks) must equal parallel.tp (%d) x parallel.dp (%d) = %lld",
                       FROM("parallel.tp parallel.dp"), world_size, tp, dp, layout);
    if (rows > INT_MAX) /* the passes count a micro-batch's rows in an int */
        return tg_fail(e, "%s: train.micro_batch x model.seq_len = %d x %d = %lld rows exceeds %d",
                       FROM("train.micro_batch model.seq_len"), B, T, rows, INT_MAX);
    if (c->parallel.sp && rows % tp != 0)
        return tg_fail(e, "%s: parallel.sp splits the micro-batch's train.micro_batch x model.seq_len = %d x %d = %lld "
                          "rows over parallel.tp = %d ranks, which does not divide them",
                       FROM("parallel.sp parallel.tp train.micro_batch model.seq_len"), B, T, rows, tp);
    if (c->train.global_batch % per_step != 0) {
        char dp_why[96] = ""; /* a dp nobody gave is the launcher's doing: say so */
        if (c->parallel.dp_from_world)
            snprintf(dp_why, sizeof dp_why, ", from the world size: %d ranks / parallel.tp %d", world_size, tp);
        return tg_fail(e, "%s: train.global_batch (%d) must be a multiple of train.micro_batch (%d) x parallel.dp (%d%s) = %lld",
                       FROM(c->parallel.dp_from_world ? "train.global_batch train.micro_batch"
                                                      : "train.global_batch train.micro_batch parallel.dp"),
                       c->train.global_batch, B, dp, dp_why, per_step);
    }
    if (strcmp(c->device, "cuda") == 0 && !ops_cuda_compiled())
        return tg_fail(e, "%s: device = \"cuda\": this train_gpt was built without CUDA (rebuild with make GPU=1)",
                       FROM("device"));
    if (strcmp(c->parallel.comm, "nccl") == 0 && strcmp(c->device, "cuda") != 0)
        return tg_fail(e, "%s: parallel.comm = \"nccl\" needs device = \"cuda\"", FROM("parallel.comm device"));
    if (c->out.dir[0] == '\0') return tg_fail(e, "%s: out.dir must not be empty", FROM("out.dir"));
    if (c->kernels.lt_tune[0] == '\0')
        return tg_fail(e, "%s: kernels.lt_tune must be off, time or the path of a cuBLASLt algorithm record",
                       FROM("kernels.lt_tune"));
    if (strcmp(c->kernels.attention, "mma") != 0 && strcmp(c->kernels.attention, "auto") != 0 && strcmp(c->device, "cuda") != 0)
        return tg_fail(e, "%s: kernels.attention = \"%s\" needs device = \"cuda\"", FROM("kernels.attention device"),
                       c->kernels.attention);
    if (c->out.hellaswag[0] && B < HS_ENDINGS)
        return tg_fail(e, "%s: out.hellaswag needs train.micro_batch (%d) of at least %d: a forward pass holds whole "
                          "examples, one row per ending", FROM("out.hellaswag train.micro_batch"), B, HS_ENDINGS);
    if (c->interconnect.table[0]) {
        comm_link *l = malloc(sizeof *l);
        if (!l) return tg_fail(e, "%s: out of memory reading interconnect.table", FROM("interconnect.table"));
        const int rc = config_link(c, l, e);
        free(l);
        if (rc) return rc;
    }
    if (c->data.train[0] == '\0' && c->train.steps > 0)
        return tg_fail(e, "%s: data.train must name training shards", FROM("data.train train.steps"));
    return 0;
#undef FROM
}

void config_print_help(FILE *f) {
    fprintf(f, "Config keys (JSON sections, or --set section.key=value):\n");
    for (size_t i = 0; i < N_KEYS; i++) {
        const key_spec *k = &SCHEMA[i];
        char type[96];
        if (k->type == K_ENUM) snprintf(type, sizeof type, "%s", k->choices);
        else snprintf(type, sizeof type, "%s", type_name(k->type));
        fprintf(f, "  %-22s %-20s default %-28s %s\n", k->path, type,
                k->def[0] ? k->def : "\"\"", k->help);
    }
}

static cJSON *section_object(cJSON *root, const char *path, const char **leaf) {
    const char *dot = strchr(path, '.');
    if (!dot) { *leaf = path; return root; }
    char sec[64];
    snprintf(sec, sizeof sec, "%.*s", (int)(dot - path), path);
    cJSON *obj = cJSON_GetObjectItemCaseSensitive(root, sec);
    if (!obj) obj = cJSON_AddObjectToObject(root, sec);
    *leaf = dot + 1;
    return obj;
}

char *config_to_json(const tg_config *c) {
    cJSON *root = cJSON_CreateObject();
    for (size_t i = 0; i < N_KEYS; i++) {
        const key_spec *k = &SCHEMA[i];
        const char *leaf;
        cJSON *obj = section_object(root, k->path, &leaf);
        const void *src = (const char *)c + k->offset;
        switch (k->type) {
        case K_INT: cJSON_AddNumberToObject(obj, leaf, *(const int *)src); break;
        case K_INT64: cJSON_AddNumberToObject(obj, leaf, (double)*(const long long *)src); break;
        case K_FLOAT: cJSON_AddNumberToObject(obj, leaf, *(const double *)src); break;
        case K_BOOL: cJSON_AddBoolToObject(obj, leaf, *(const bool *)src); break;
        case K_STRING: case K_ENUM: cJSON_AddStringToObject(obj, leaf, (const char *)src); break;
        }
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

tg_dtype config_act_dtype(const tg_config *c) {
    if (strcmp(c->train.precision, "bf16") == 0) return TG_BF16;
    if (strcmp(c->train.precision, "fp32") == 0) return TG_F32;
    return strcmp(c->device, "cuda") == 0 ? TG_BF16 : TG_F32;
}

int gpt_dims_from_config(gpt_dims *d, const tg_config *c, int tp, int tp_rank, tg_err *e) {
    const recompute_mode rc = strcmp(c->train.recompute, "full") == 0        ? RECOMPUTE_FULL
                              : strcmp(c->train.recompute, "selective") == 0 ? RECOMPUTE_SELECTIVE
                                                                              : RECOMPUTE_NONE;
    const gpt_shape s = {c->model.n_layer, c->model.n_head, c->model.n_embd, c->model.seq_len, c->model.vocab_size,
                         c->model.vocab_multiple, c->parallel.sp, rc, (float)c->model.dropout, c->parallel.sp_regather};
    return gpt_dims_of(d, &s, tp, tp_rank, e);
}
