/* Shared between the files of model/gpt*: not for other modules. */
#ifndef MODEL_GPT_INTERNAL_H
#define MODEL_GPT_INTERNAL_H

#include "model/gpt.h"
#include "util/rng.h"

typedef enum { INIT_NORMAL, INIT_RESIDUAL, INIT_ZERO, INIT_ONE } init_kind;

typedef struct param_spec {
    const char *name_fmt; /* printf format taking the layer index */
    bool per_layer;
    split_kind split;
    bool decay;
    init_kind init;
} param_spec;

extern const param_spec GPT_PARAM_SPECS[P_KINDS];

/* One activation buffer: `slots` copies of `size` elements of `elem` bytes
 * (the activation type, or 4 for int32 tokens and float32 statistics);
 * per-layer buffers have L slots, or 1 when recomputation rebuilds them
 * layer by layer. */
typedef struct act_buf {
    void *base;
    size_t size, elem;
    int slots;
} act_buf;

static inline void *act_at(const act_buf *b, int layer) {
    return (char *)b->base + (size_t)(b->slots > 1 ? layer : 0) * b->size * b->elem;
}

typedef enum { ACT_KEPT, ACT_ATTENTION, ACT_LOGITS, ACT_SCRATCH, ACT_KINDS } act_kind;

/* Activation buffers of one rank (backend memory). N = B*T rows; Ns = N/tp
 * rows of the residual stream under SP, else N. */
struct gpt_acts {
    void *arena;
    size_t arena_bytes;
    act_buf tokens, targets;        /* [N] int32: gpt_forward's uploads */
    const int32_t *tokens_in, *targets_in; /* the micro-batch's: those buffers, or gpt_forward_resident's */
    act_buf resid;                  /* [L+1][Ns, C]: block inputs, then the last output */
    act_buf ln1, ln1_mean, ln1_rstd;/* [Ns, C] under SP's regather, else [N, C] (gathered under SP); [Ns] */
    act_buf qkv, atty, lse;         /* [N, 3C/t], [N, C/t], [B, NH/t, T] float32: attention keeps no T x T */
    act_buf res2;                   /* [Ns, C] residual after attention */
    act_buf ln2, ln2_mean, ln2_rstd;
    act_buf fch, fch_gelu;          /* [N, 4C/t]: pre-GELU (kept), GELU output (recomputed by selective) */
    act_buf lnf, lnf_mean, lnf_rstd;/* as ln1 */
    act_buf logits;                 /* [N, V/t], then its gradient */
    act_buf losses, rowmax, xstats; /* [N], [N], [2N] */
    act_buf proj, ln_shard;         /* forward scratch: [N, C], [Ns, C] (SP without regather) */
    act_buf ln_full;                /* [N, C] (SP's regather): a LayerNorm's rows gathered, forward and backward */
    act_buf dres, dres_full, dln_full, dln, dqkv, datty, dfc; /* backward scratch */
    act_buf ddrop;                  /* [Ns, C]: a gradient through a dropout mask */
    int B, T;                       /* shape of the last forward */
    bool grad_acc;                  /* gpt_backward's acc: parameter gradients add to g->grads (false: written) */
    comm_req *ln_gather;            /* SP: a LayerNorm's all-gather in flight, for the product that reads it */
};

/* The table both the allocation and the budget are made from. */
typedef struct act_entry {
    act_buf *buf;
    act_kind kind;
} act_entry;

/* Fills sizes, element sizes and slot counts of every buffer of a (base
 * pointers untouched), activations in type act, and lists them; returns the
 * count. */
int gpt_act_table(gpt_acts *a, const gpt_dims *d, int B, int T, tg_dtype act, act_entry *out, int max);
size_t gpt_layout_params(gpt *g);
/* Bytes of one buffer, rounded up to 64 as the arena lays it out. */
size_t gpt_act_bytes(const act_buf *b);

/* Dropout sites: masks keyed by (seed, step, layer, site, global token
 * or sequence, global feature or head), so they are the same at every
 * TP/SP/DP layout and in recomputation; the kernels add the step, from
 * backend memory (tg_dropout_stream). */

enum { SITE_EMBEDDING, SITE_ATTENTION, SITE_ATTN_RESIDUAL, SITE_MLP_RESIDUAL };

static inline uint64_t site_stream(int layer, int site) {
    return rng_stream_of("dropout") + (uint64_t)(layer + 1) * 4 + (uint64_t)site;
}

/* A residual-stream site over this rank's rows (row_start: SP's offset). */
static inline tg_dropout row_site(const gpt *g, int layer, int site, int row_start) {
    return (tg_dropout){g->drop.p, g->drop.seed, site_stream(layer, site), g->drop.token0 + (uint64_t)row_start, 0, 0,
                        &g->stats->in.step};
}

static inline tg_dropout attention_site(const gpt *g, int layer, int T) {
    return (tg_dropout){g->drop.p, g->drop.seed, site_stream(layer, SITE_ATTENTION), g->drop.token0 / (uint64_t)T,
                        g->d.tp_rank * g->d.NH_local, g->d.NH, &g->stats->in.step};
}

#endif
