/* The run configuration: one JSON file plus --set overrides, checked against
 * a schema that also generates --help. */
#ifndef TRAIN_CONFIG_H
#define TRAIN_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model/gpt.h"
#include "parallel/comm.h"
#include "util/dtype.h"
#include "util/err.h"

#define CFG_PATH_MAX 1024
#define CFG_WORD_MAX 32
#define CFG_KEYS_MAX 80 /* at least the schema's key count (config.c checks) */

/* The model shape keys a checkpoint can supply (model.n_layer, n_head,
 * n_embd, vocab_size, seq_len), in this order. */
typedef enum { SHAPE_N_LAYER, SHAPE_N_HEAD, SHAPE_N_EMBD, SHAPE_VOCAB_SIZE, SHAPE_SEQ_LEN, SHAPE_KEYS } shape_key;

typedef struct tg_config {
    struct {
        int n_layer, n_head, n_embd;
        int vocab_size;     /* real vocabulary */
        int vocab_multiple; /* padded vocabulary is the next multiple of this */
        int seq_len;
        double dropout;
        char init_from[CFG_PATH_MAX];
        unsigned shape_given; /* bit k: shape_key k was given by the file or --set (not a key) */
    } model;
    struct {
        int micro_batch, global_batch, steps;
        double lr, min_lr;
        int warmup;
        char lr_schedule[CFG_WORD_MAX]; /* cosine | linear | constant | wsd */
        double wsd_decay_frac;          /* wsd: the share of the steps, at the end, that decays */
        double weight_decay, beta1, beta2, eps, grad_clip;
        long long seed;
        char recompute[CFG_WORD_MAX];
        char precision[CFG_WORD_MAX];
        char on_nonfinite[CFG_WORD_MAX]; /* stop | skip */
        int max_skipped;                  /* skip: stop after this many in a row */
        bool cuda_graph;                  /* replay the step as a CUDA graph where it can */
        bool poison_grads;                /* test: NaN in every gradient before each step (gpt_poison_grads) */
    } train;
    struct {
        char train[CFG_PATH_MAX], val[CFG_PATH_MAX];
        bool shuffle;
        bool allow_changed; /* resume over a changed training set: warn instead of refusing */
        char vocab_dir[CFG_PATH_MAX];
    } data;
    struct {
        char dir[CFG_PATH_MAX];
        int log_every, eval_every, eval_batches, save_every;
        int keep_last, keep_every; /* checkpoints kept after a save (0: all); steps never removed */
        bool resume, save_final, op_times;
        int sample_every, sample_tokens;
        char hellaswag[CFG_PATH_MAX]; /* HellaSwag file scored at each evaluation; empty: none */
    } out;
    struct {
        int tp, dp;
        bool dp_from_world; /* dp was not given: config_resolve_layout took it from the world size */
        bool sp;
        bool sp_regather; /* SP: LayerNorm outputs kept as row shards, all-gathered again in backward */
        int zero;
        double dp_bucket_mb;
        double timeout_s;
        double save_timeout_s; /* the other ranks' wait for rank 0's checkpoint write */
        char numa[CFG_WORD_MAX];
        char comm[CFG_WORD_MAX];
        bool project;
    } parallel;
    struct {
        double bus_gbps, latency_us;
        char table[CFG_PATH_MAX]; /* nccl-tests table file; empty: the flat bus_gbps + latency_us model */
        int node_gpus;            /* ranks per node; 0: one node */
        double node_gbps, node_latency_us; /* a node's network, for groups across nodes */
    } interconnect;
    struct {
        char lt_tune[CFG_PATH_MAX]; /* off | time | a record file of cuBLASLt algorithms to pin */
        char attention[CFG_WORD_MAX]; /* mma | wgmma: which attention forward runs on CUDA */
        bool dw_overlap; /* CUDA: weight-gradient products on a second stream beside the input gradients' */
    } kernels;
    double device_peak_tflops;
    char device[CFG_WORD_MAX];
    char source[CFG_PATH_MAX]; /* the config file, for messages (not a key) */
    bool from_set[CFG_KEYS_MAX]; /* keys (schema order) a --set gave, so messages name --set, not the file */
} tg_config;

/* The modeled link of projected runs and --plan: interconnect.table's rows
 * when it names a file, else the flat bus_gbps + latency_us model. */
int config_link(const tg_config *c, comm_link *l, tg_err *e);
/* Whether the TP group (dp_group false) or a DP group of a tp x dp layout
 * has ranks on more than one node of interconnect.node_gpus ranks. */
bool config_group_crosses_nodes(const tg_config *c, bool dp_group, int tp, int dp);
/* The modeled link of that group: config_link's inside a node; across
 * nodes the flat network model (node_gbps shared by the groups crossing at
 * once, at most bus_gbps; node_latency_us). */
int config_group_link(const tg_config *c, bool dp_group, int tp, int dp, comm_link *l, tg_err *e);

/* Fills every key with its schema default. */
void config_defaults(tg_config *c);

/* Reads a JSON file over the defaults. Unknown keys, wrong types and
 * malformed JSON are errors naming the file and the key. */
int config_load_file(tg_config *c, const char *path, tg_err *e);

/* Applies one "key.path=value" override (from --set). */
int config_set(tg_config *c, const char *assignment, tg_err *e);

/* True when the file and --set gave every shape key. */
bool config_shape_complete(const tg_config *c);

/* Sets each shape key the file and --set left out to shape[k] (a
 * checkpoint's value), range-checked like a given value; errors name src. */
int config_take_shape(tg_config *c, const long long shape[SHAPE_KEYS], const char *src, tg_err *e);

/* Checks each shape key the file or --set gave against shape[k] (the
 * checkpoint's, described by src, where it is called names[k]): equal, or
 * for seq_len at most it (the first rows of a longer wpe serve). A mismatch
 * is refused naming the key, where it came from, both values and `advice`. */
int config_check_shape(const tg_config *c, const long long shape[SHAPE_KEYS], const char *const names[SHAPE_KEYS],
                       const char *src, const char *advice, tg_err *e);

/* Fills parallel.dp when it is 0 (world size / tp). */
void config_resolve_layout(tg_config *c, int world_size);

/* Where the value of keys (space-separated) came from, for a message:
 * the config file, "--set KEY" or both; written into buf. */
const char *config_origin(const tg_config *c, const char *keys, char *buf, size_t n);
/* One key and where its value came from, for a message about what it
 * names: "--set KEY", or "FILE: KEY" (the config file, or its defaults). */
const char *config_key_named(const tg_config *c, const char *key, char *buf, size_t n);

/* Checks ranges and cross-key constraints; world_size is the number of
 * ranks the run was started with. */
int config_validate(const tg_config *c, int world_size, tg_err *e);


/* A number from the command line or the environment: the whole text, no
 * spaces, hex, inf or nan, an integer when integral, within [min, max];
 * errors name `what`. */
int config_parse_number(const char *what, const char *text, bool integral, double min, double max, double *out,
                        tg_err *e);

/* A number for messages: whole numbers in full (1e20 as
 * 100000000000000000000, not a wrapped cast), others as %g. */
const char *config_number_text(double x, char *buf, size_t n);

/* Prints every key with its type, default and meaning. */
void config_print_help(FILE *f);

/* Writes the configuration as one JSON object (for logs and checkpoints). */
char *config_to_json(const tg_config *c);

/* The activation type train.precision selects on the configured device. */
tg_dtype config_act_dtype(const tg_config *c);

/* TP rank tp_rank's model dimensions under this config (model/gpt.h). */
int gpt_dims_from_config(gpt_dims *d, const tg_config *c, int tp, int tp_rank, tg_err *e);

/* Derived quantities. */
int config_padded_vocab(const tg_config *c);
int config_grad_accum(const tg_config *c);
/* The validation windows an evaluation reads of the `available` ones:
 * out.eval_batches, at most all of them (-1: all). */
long long config_eval_windows(const tg_config *c, long long available);
/* One device's share of a step's tokens under tp x dp devices (a TP rank
 * runs 1/tp of its DP group's work): times FLOPs per token, the FLOPs one
 * device runs in a step. */
double config_tokens_per_device(const tg_config *c, int tp, int dp);

#endif
