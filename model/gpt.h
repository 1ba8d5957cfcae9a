/* One rank's shard of GPT-2: parameter and activation layout, init, forward,
 * backward and the memory budget. Tensor parallel degree tp splits heads,
 * MLP columns and vocabulary rows; at tp = 1 the shard is the whole model. */
#ifndef MODEL_GPT_H
#define MODEL_GPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"
#include "parallel/comm.h"

/* Parameter kinds, in storage order. Per-layer kinds are stored as [L, ...]
 * so layer l's tensor is base + l * size. A weight's bias (and a LayerNorm
 * weight's bias) is the next kind: the passes rely on it. */
typedef enum {
    P_WTE, P_WPE,
    P_LN1_W, P_LN1_B, P_QKV_W, P_QKV_B, P_ATTPROJ_W, P_ATTPROJ_B,
    P_LN2_W, P_LN2_B, P_FC_W, P_FC_B, P_FCPROJ_W, P_FCPROJ_B,
    P_LNF_W, P_LNF_B,
    P_KINDS
} param_kind;

/* How a full tensor is divided among the TP ranks. */
typedef enum {
    SPLIT_NONE,      /* replicated */
    SPLIT_VOCAB,     /* rows of the padded vocabulary */
    SPLIT_COLS,      /* output features (column-parallel) */
    SPLIT_QKV_COLS,  /* this rank's heads from each of Q, K and V */
    SPLIT_ROWS,      /* input features (row-parallel) */
} split_kind;

typedef enum { RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL } recompute_mode;

typedef struct gpt_dims {
    int L, NH, C, HS, T;
    int V, Vp;             /* real and padded vocabulary */
    int tp, tp_rank;
    int NH_local, V_local; /* heads and padded vocab rows of this rank */
    int vocab_start;       /* first vocabulary row of this rank */
    bool sp;               /* sequence parallel: the residual stream is split by rows over TP */
    bool sp_regather;      /* SP: LayerNorm outputs kept as this rank's rows and all-gathered again in the backward
                            * pass (Megatron's way); false: kept as all rows, tp times the memory, one all-gather
                            * less per LayerNorm */
    recompute_mode recompute;
    float dropout;         /* model.dropout: sizes the backward's mask scratch */
    int param_align;       /* every tensor's stride in the flat buffers is also a multiple of this (0: no demand;
                            * ZeRO asks for its DP size, so that every bucket divides evenly among the ranks) */
    bool master_in_optim;  /* the optimizer keeps the float32 master weights (ZeRO: only this rank's chunks of
                            * them), so the model allocates none beside working weights of another type */
} gpt_dims;

/* What the dropout masks of one forward are keyed by (kernels/ops.h),
 * besides the step, which the kernels read from stats->in.step. */
typedef struct gpt_dropout {
    float p;               /* 0: off (evaluation, sampling) */
    uint64_t seed;
    uint64_t token0;       /* global index of the micro-batch's first token within the global batch */
} gpt_dropout;

/* One parameter tensor as this rank holds it (1-D tensors have rows = 1). */
typedef struct gpt_tensor {
    param_kind kind;
    int layer;             /* -1 for whole-model tensors */
    char name[64];         /* Hugging Face GPT-2 name, e.g. h.3.attn.c_attn.weight */
    int full_rows, full_cols; /* unpadded, unsharded shape (checkpoint shape) */
    int rows, cols;        /* this rank's shape */
    split_kind split;
    bool decay;            /* AdamW weight decay applies (2-D tensors) */
    bool is_1d;
    size_t offset;         /* into the parameter buffer, in floats */
    size_t numel;          /* rows * cols */
} gpt_tensor;

/* Byte counts of one rank's memory, computed before anything is allocated. */
typedef struct gpt_budget {
    size_t params;         /* working weights, and float32 master weights when those differ */
    size_t grads, optim;
    size_t acts_kept;      /* activations kept for the backward pass */
    size_t acts_attention; /* of which: attention's log-sum-exp rows (B*NH*T floats per layer; no T x T) */
    size_t logits;         /* logits and their gradient (in place) */
    size_t scratch;        /* backward-pass gradient buffers */
    size_t workspace;      /* the backend's fixed buffers (cuBLASLt workspace, kernel scratch) */
    size_t tokens;         /* the step's token ids, a rank's share of the window (train/batch.h; 0 here) */
    size_t total;
} gpt_budget;

typedef struct gpt_acts gpt_acts;

typedef struct gpt {
    const tg_ops *ops;
    comm *tp;              /* tensor-parallel group (size 1: no-op) */
    gpt_dims d;
    int B, T;              /* largest micro-batch the buffers hold */
    int n_tensors;
    gpt_tensor *tensors;
    size_t n_params;       /* elements of this rank's parameter buffer: its tensors, each aligned (gpt_layout.c) */
    size_t n_alloc;        /* elements of the flat buffers: n_params, or what the caller asked if more */
    size_t kind_offset[P_KINDS], kind_size[P_KINDS]; /* per-layer stride for per-layer kinds (numel, aligned up) */
    /* Backend memory, n_alloc elements each: the working weights the
     * kernels read (activation type), the float32 master weights AdamW
     * updates and checkpoints hold (the same buffer when the activation type
     * is float32; NULL when the optimizer keeps them, d.master_in_optim),
     * and the float32 gradients. */
    void *params;
    float *master, *grads;
    gpt_acts *acts;
    /* The step's scalars (backend memory): forward adds each micro-batch's
     * mean loss to loss_acc; the optimizer's norm and clip factor follow. */
    tg_step_stats *stats;
    gpt_dropout drop;      /* of the next forward, and of its backward */
} gpt;

/* The model's hyper-parameters (the trainer's config gives them). */
typedef struct gpt_shape {
    int n_layer, n_head, n_embd, seq_len;
    int vocab_size, vocab_multiple; /* the padded vocabulary: a multiple of vocab_multiple x tp */
    bool sp;
    recompute_mode recompute;
    float dropout;
    bool sp_regather;      /* under sp: gpt_dims.sp_regather */
} gpt_shape;

/* TP rank tp_rank's dimensions of the model of shape s. */
int gpt_dims_of(gpt_dims *d, const gpt_shape *s, int tp, int tp_rank, tg_err *e);
/* Elements of one rank's flat parameter buffer: its tensors, each aligned. */
size_t gpt_param_count(const gpt_dims *d);
/* Training FLOPs per token of the whole model, forward and backward, as MFU
 * counts them: 6 per parameter (full_params: each tensor once, unpadded)
 * and 12 L C T for attention's scores and weighted values (the masked half
 * counted, as Megatron-LM and llm.c count it). */
double gpt_model_flops_per_token(const gpt_dims *d, double full_params);
/* The same plus what d->recompute runs again before each block's backward:
 * under full recompute the block's forward but its MLP projection
 * (2 x 8 C^2 + 4 T C per layer); under selective only the GELU, no
 * product. A device runs 1/tp of it per token. */
double gpt_executed_flops_per_token(const gpt_dims *d, double full_params);
/* The bytes the model allocates on one rank: parameter and gradient buffers
 * of n_alloc elements, activations of type act, and the backend's fixed
 * workspace (optim is left 0: the optimizer adds its own, optim_budget). */
gpt_budget gpt_budget_of(const gpt_dims *d, int B, int T, size_t n_alloc, tg_dtype act, size_t workspace);

/* Lays out and allocates this rank's shard for micro-batches up to B x T,
 * with parameter and gradient buffers of n_alloc >= gpt_param_count(d)
 * elements (the layout follows d, param_align included: the optimizer
 * shapes it, optim_shape_dims). */
gpt *gpt_create(const tg_ops *ops, comm *tp, const gpt_dims *d, int B, int T, size_t n_alloc);
void gpt_free(gpt *g);

/* Index of a local element in the full, unpadded tensor; -1 for padding
 * (vocabulary rows beyond the real vocabulary). */
long long gpt_full_index(const gpt *g, const gpt_tensor *t, size_t local);
/* The same for the tensor as TP rank tp_rank holds it. */
long long gpt_full_index_at(const gpt *g, const gpt_tensor *t, size_t local, int tp_rank);

/* GPT-2 initialisation, keyed by full-tensor element index (TP-invariant),
 * through gpt_set_weights. */
void gpt_init_weights(gpt *g, uint64_t seed);
/* Sets the weights from host memory (n_params float32 in this rank's
 * layout): the master weights and their working copy. Without a master
 * (d.master_in_optim) the float32 weights stay in g->grads, until the next
 * backward pass writes its gradients there, for the optimizer to take its
 * master from (optim_take_weights). */
void gpt_set_weights(gpt *g, const float *host);

/* Told during gpt_forward_resident before a layer's weights are first
 * read, so that their gather (ZeRO's, of the last step's update) may still
 * be under way when the pass starts: needed(ctx, l, e) before layer l's
 * weights are read (l = -1: the whole-model tensors, before the
 * embeddings). Non-zero stops the pass. */
typedef struct gpt_weight_hook {
    int (*needed)(void *ctx, int layer, tg_err *e);
    void *ctx;
} gpt_weight_hook;

/* Forward pass over tokens [B, T] (host memory; the host may reuse it at
 * once). With targets it also computes the per-token losses, adds their
 * mean to g->stats->loss_acc on the device (nothing waits for it), and
 * leaves d(loss)/d(logits) scaled by dloss in place of the logits, ready for
 * gpt_backward. Without targets it keeps the logits. */
int gpt_forward(gpt *g, const int32_t *tokens, const int32_t *targets, int B, int T, float dloss, tg_err *e);
/* The same over tokens and targets already in backend memory (B*T int32
 * each, targets may be NULL), read in place until gpt_backward is done: a
 * step's micro-batches straight from its uploaded window, with no upload
 * among the step's ops (a captured step cannot hold one). */
int gpt_forward_resident(gpt *g, const gpt_weight_hook *hook, const int32_t *tokens, const int32_t *targets, int B, int T,
                         float dloss, tg_err *e);
/* A run of `count` consecutive rows of a pass's B*T, from row `first`
 * (row b*T + t: sequence b, position t). */
typedef struct gpt_rows_span {
    int first, count;
} gpt_rows_span;
/* A forward pass over tokens [B, T] (host memory) with the LM head only at
 * the rows of spans, packed in the spans' order (an evaluation or a sampler
 * that needs a few positions skips the rest of the head's work). With
 * targets ([B, T] as gpt_forward's, read at the spans' rows) it computes
 * those rows' losses (gpt_losses_at) and adds their mean to
 * g->stats->loss_acc as gpt_forward does; without, it keeps their logits
 * (gpt_logits_at). */
int gpt_forward_rows(gpt *g, const int32_t *tokens, const int32_t *targets, int B, int T, const gpt_rows_span *spans,
                     int n_spans, tg_err *e);
/* Told during gpt_backward as gradients become final, so that their
 * reduction can start while the pass goes on: ready(ctx, g, l, e) after
 * block l's backward (l from L-1 down to 0), then ready(ctx, g, -1, e) when
 * the rest (embeddings, final LayerNorm) is done. Non-zero stops the pass. */
typedef struct gpt_grad_hook {
    int (*ready)(void *ctx, gpt *g, int layer, tg_err *e);
    void *ctx;
} gpt_grad_hook;

/* This micro-batch's gradients into g->grads: acc false (a step's first
 * micro-batch) writes every parameter's gradient, whatever the buffer held;
 * true adds them to it (kernels/ops.h's convention, and its audit of which
 * op writes what). hook may be NULL. */
int gpt_backward(gpt *g, const gpt_grad_hook *hook, bool acc, tg_err *e);
/* The gradients of parameter kind k in one contiguous range of g->grads:
 * for a per-layer kind, its tensors of layers [lo, hi) (alignment gaps
 * included); for the others, the tensor itself (lo and hi ignored). */
void gpt_kind_range(const gpt *g, param_kind k, int lo, int hi, size_t *offset, size_t *n);
/* Whether kind k has one tensor per layer. */
bool gpt_kind_per_layer(param_kind k);
/* Under SP, replicated tensors (LayerNorms, row-parallel biases, wpe) saw
 * only this rank's rows: sums their gradients over TP. Once per step. */
int gpt_sync_replicated_grads(gpt *g, tg_err *e);
/* True for tensors every TP rank holds whole (counted once in norms). */
bool gpt_is_replicated(const gpt_tensor *t);
/* Fills the gradient of every tensor with NaN (the alignment gaps between
 * them keep their zeros): a test that the next backward pass with acc
 * false writes every element (train.poison_grads). Uploads, outside any
 * captured step. */
void gpt_poison_grads(gpt *g);
/* Keys the dropout masks of the next forward (and its backward). Their step
 * is g->stats->in.step, read by the kernels when they run: uploaded before
 * the step's work is enqueued (optim_begin_step), so the same work (a CUDA
 * graph's replay) draws each step's own masks. */
void gpt_set_dropout(gpt *g, float p, uint64_t seed, uint64_t token0);

/* Copies the per-token losses of the last forward with targets to host
 * memory, its first n rows (every rank all of them): row-major B x T after
 * gpt_forward, the picked rows after gpt_forward_rows. */
void gpt_losses_at(const gpt *g, int n, float *host_out);
/* Copies this rank's logits of row `row` of the last forward without
 * targets to host memory (V_local floats): row b*T + t after gpt_forward,
 * the row-th picked row after gpt_forward_rows. */
void gpt_logits_at(const gpt *g, int row, float *host_out);

/* Bytes this shard actually allocated (parameters, gradients, activations,
 * and the backend's workspace). */
size_t gpt_allocated_bytes(const gpt *g);

/* Layer `layer`'s tensor of kind k: working weights, gradient. */
void *gpt_param(const gpt *g, param_kind k, int layer);
float *gpt_grad(const gpt *g, param_kind k, int layer);

#endif
