/* Forward and backward passes of one rank's shard, one kernel per line, in
 * Megatron's tensor- and sequence-parallel mapping. Rows: N = B*T tokens;
 * the residual stream holds Ns rows (N/tp under SP, else N). Every TP
 * collective of a block sits in one of the mappings of
 * model/gpt_mappings.h; at tp = 1 they are no-ops (comm_null of size 1). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt.h"
#include "model/gpt_mappings.h"

/* Element offset of layer `layer`'s tensor of kind k in the flat buffers. */
static size_t param_offset(const gpt *g, param_kind k, int layer) {
    return g->kind_offset[k] + (layer > 0 ? (size_t)layer * g->kind_size[k] : 0);
}

void *gpt_param(const gpt *g, param_kind k, int layer) {
    return (char *)g->params + param_offset(g, k, layer) * tg_dtype_bytes(g->ops->act);
}

float *gpt_grad(const gpt *g, param_kind k, int layer) { return g->grads + param_offset(g, k, layer); }

static bool has_separate_master(const gpt *g) { return g->master && (void *)g->master != g->params; }

size_t gpt_allocated_bytes(const gpt *g) {
    size_t weights = g->n_alloc * (tg_dtype_bytes(g->ops->act) + (has_separate_master(g) ? sizeof(float) : 0));
    return weights + g->n_alloc * sizeof(float) + g->acts->arena_bytes + g->ops->workspace_bytes;
}

bool gpt_is_replicated(const gpt_tensor *t) { return t->split == SPLIT_NONE; }

/* Carves every activation buffer out of one allocation. */
static gpt_acts *acts_create(const tg_ops *ops, const gpt_dims *d, int B, int T) {
    gpt_acts *a = tg_calloc(1, sizeof *a, "activation table");
    act_entry table[64];
    int n = gpt_act_table(a, d, B, T, ops->act, table, 64);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += gpt_act_bytes(table[i].buf);
    a->arena = ops->alloc(ops, total, "activations");
    a->arena_bytes = total;
    char *p = a->arena;
    for (int i = 0; i < n; i++) {
        table[i].buf->base = p;
        p += gpt_act_bytes(table[i].buf);
    }
    return a;
}

gpt *gpt_create(const tg_ops *ops, comm *tp, const gpt_dims *d, int B, int T, size_t n_alloc) {
    gpt *g = tg_calloc(1, sizeof *g, "model");
    g->ops = ops;
    g->tp = tp;
    g->d = *d;
    g->B = B;
    g->T = T;
    g->n_params = gpt_layout_params(g);
    g->n_alloc = n_alloc > g->n_params ? n_alloc : g->n_params;
    g->params = ops->alloc(ops, g->n_alloc * tg_dtype_bytes(ops->act), "parameters (working copy)");
    if (ops->act == TG_F32) g->master = g->params; /* the working weights are the master */
    else if (!d->master_in_optim) g->master = ops->alloc(ops, g->n_alloc * sizeof(float), "parameters (float32 master)");
    g->grads = ops->alloc(ops, g->n_alloc * sizeof(float), "gradients");
    if (has_separate_master(g)) ops->zero(ops, g->master, g->n_alloc * sizeof(float));
    ops->zero(ops, g->params, g->n_alloc * tg_dtype_bytes(ops->act));
    /* Once: no backward pass writes the alignment gaps between tensors or
     * the elements past n_params, but DP's reductions sum them (buckets and
     * ZeRO's chunks span them), so they must hold numbers. Each step's first
     * micro-batch writes every tensor's gradient (gpt_backward, acc false). */
    ops->zero(ops, g->grads, g->n_alloc * sizeof(float));
    g->acts = acts_create(ops, d, B, T);
    g->stats = ops->alloc(ops, sizeof *g->stats, "step scalars");
    ops->zero(ops, g->stats, sizeof *g->stats);
    return g;
}

void gpt_free(gpt *g) {
    if (!g) return;
    g->ops->free(g->ops, g->acts->arena);
    free(g->acts);
    if (has_separate_master(g)) g->ops->free(g->ops, g->master);
    g->ops->free(g->ops, g->params);
    g->ops->free(g->ops, g->grads);
    g->ops->free(g->ops, g->stats);
    free(g->tensors);
    free(g);
}

void gpt_init_weights(gpt *g, uint64_t seed) {
    const float std = 0.02f, resid_std = 0.02f / sqrtf(2.0f * g->d.L);
    float *host = tg_calloc(g->n_params, sizeof(float), "initial weights"); /* the alignment gaps stay 0 */
    for (int i = 0; i < g->n_tensors; i++) {
        const gpt_tensor *t = &g->tensors[i];
        const init_kind init = GPT_PARAM_SPECS[t->kind].init;
        const uint64_t stream = rng_stream_of(t->name);
        float *dst = host + t->offset;
#pragma omp parallel for schedule(static)
        for (size_t j = 0; j < t->numel; j++) {
            long long full = gpt_full_index(g, t, j);
            if (init == INIT_ZERO || full < 0) dst[j] = 0.0f;
            else if (init == INIT_ONE) dst[j] = 1.0f;
            else dst[j] = (init == INIT_RESIDUAL ? resid_std : std) * rng_normal(seed, stream, (uint64_t)full);
        }
    }
    gpt_set_weights(g, host);
    free(host);
}

void gpt_set_weights(gpt *g, const float *host) {
    /* Without a master, the gradient buffer (float32, the same layout, not
     * in use between steps) stages them for the cast. */
    float *full = g->master ? g->master : g->grads;
    g->ops->upload(g->ops, full, host, g->n_params * sizeof(float));
    g->ops->cast_params(g->ops, g->params, full, g->n_params);
}

void gpt_poison_grads(gpt *g) {
    size_t most = 0;
    for (int i = 0; i < g->n_tensors; i++) most = g->tensors[i].numel > most ? g->tensors[i].numel : most;
    float *nan = tg_malloc(most * sizeof(float), "NaN gradients");
    for (size_t j = 0; j < most; j++) nan[j] = NAN;
    for (int i = 0; i < g->n_tensors; i++)
        g->ops->upload(g->ops, g->grads + g->tensors[i].offset, nan, g->tensors[i].numel * sizeof(float));
    free(nan);
}

void gpt_set_dropout(gpt *g, float p, uint64_t seed, uint64_t token0) {
    g->drop = (gpt_dropout){p, seed, token0};
}

/* ---- forward ---- */

/* Block l. In the forward pass (in_forward) its ln_1 is already done (by
 * the block before, fused with that block's residual add, or after the
 * embedding), and its last residual add computes the LayerNorm after it,
 * the next block's ln_1 or ln_f. Recomputation (full) starts from the
 * block's input alone, so it computes its ln_1 itself, and stops before the
 * last residual add (see its end): the next block's ln_1 buffer may be this
 * block's (one slot for all layers), still needed by this block's backward.
 * Both ways give the same bits (the fused op is bitwise the two ops). */
static int block_forward(gpt *g, int l, int B, int T, bool in_forward, tg_err *e) {
    const tg_ops *o = g->ops;
    gpt_acts *a = g->acts;
    const gpt_dims *d = &g->d;
    const int N = B * T, C = d->C, t = d->tp;
    const void *in = act_at(&a->resid, l);
    void *qkv = act_at(&a->qkv, l), *atty = act_at(&a->atty, l), *res2 = act_at(&a->res2, l), *fch = act_at(&a->fch, l);
    void *fch_gelu = act_at(&a->fch_gelu, l);
    const ln_dest ln1 = ln_reading_resid(g, l), ln2 = ln2_of(g, l), next = ln_reading_resid(g, l + 1);

    if (!in_forward && layernorm_to_full(g, &ln1, in, N, e)) return -1;
    const col_product c_attn = {gpt_param(g, P_QKV_W, l), gpt_param(g, P_QKV_B, l), 3 * C / t, false, a->qkv.elem};
    if (column_product(g, &c_attn, qkv, &ln1, N, e)) return -1;
    o->attention_forward(o, atty, act_at(&a->lse, l), qkv, B, T, d->NH_local, d->HS, attention_site(g, l, T));
    if (row_parallel(g, res2, atty, P_ATTPROJ_W, l, in, &ln2, N, C / t, e)) return -1;

    /* The GELU stays our own kernel here, not the backend's
     * matmul_forward_gelu (cuBLASLt's GELU_AUX_BIAS): its GELU differs from
     * gelu_forward's in the last bits, so selective recompute would have to
     * rerun c_fc's product to stay bitwise equal to the other modes (more
     * than the selective budget at 1.2B), and the committed op tables
     * (results/gpu) count gelu_forward calls; see commit 5aa416f for the
     * wiring, bitwise equal across the modes on the emulated device. */
    const col_product c_fc = {gpt_param(g, P_FC_W, l), gpt_param(g, P_FC_B, l), 4 * C / t, false, a->fch.elem};
    if (column_product(g, &c_fc, fch, &ln2, N, e)) return -1;
    o->gelu_forward(o, fch_gelu, fch, (size_t)N * 4 * C / t);
    /* A full-recompute rebuild stops here: backward needs the MLP
     * projection's input, not its output (resid[l + 1], kept, and already
     * used by the block above): a third of the block's matmul work and a TP
     * reduction per layer saved. */
    if (!in_forward) return 0;
    return row_parallel(g, act_at(&a->resid, l + 1), fch_gelu, P_FCPROJ_W, l, res2, &next, N, 4 * C / t, e);
}

/* The cross-entropy: at TP = 1 one fused op; else the vocab-parallel
 * passes with the TP reductions of Megatron between them (max, then
 * sum-exp and target logit together): two reads of the logits, the first
 * for every statistic (each sum relative to the rank's own max, rescaled
 * to the group's between the reductions), the second for the gradient. */
static int cross_entropy(gpt *g, int N, float dloss, tg_err *e) {
    const tg_ops *o = g->ops;
    gpt_acts *a = g->acts;
    const gpt_dims *d = &g->d;
    int n_real = d->V - d->vocab_start;
    n_real = n_real < 0 ? 0 : (n_real > d->V_local ? d->V_local : n_real);
    const int32_t *targets = a->targets_in;
    if (g->tp->size == 1) {
        o->xent_fused(o, a->losses.base, a->logits.base, targets, N, d->V_local, n_real, dloss);
    } else {
        /* The losses are free until xent_finish: they hold each row's local max meanwhile. */
        float *local_max = a->losses.base;
        o->xent_partial(o, a->rowmax.base, local_max, a->xstats.base, a->logits.base, targets, N, d->V_local, n_real,
                        d->vocab_start);
        if (comm_all_reduce(g->tp, a->rowmax.base, (size_t)N, REDUCE_MAX, e)) return -1;
        o->xent_rescale(o, a->xstats.base, local_max, a->rowmax.base, N);
        if (comm_all_reduce(g->tp, a->xstats.base, 2 * (size_t)N, REDUCE_SUM, e)) return -1;
        o->xent_finish(o, a->losses.base, a->logits.base, a->rowmax.base, a->xstats.base, targets, N, d->V_local, n_real,
                       d->vocab_start, dloss);
    }
    o->loss_accumulate(o, g->stats, a->losses.base, N); /* on the device: no wait for the loss here */
    return 0;
}

static int check_batch_shape(const gpt *g, int B, int T, tg_err *e) {
    if (B > g->B || T > g->T) return tg_fail(e, "forward of %dx%d exceeds the %dx%d buffers", B, T, g->B, g->T);
    if (g->d.sp && B * T % g->d.tp)
        return tg_fail(e, "sequence parallelism needs B*T (%d) divisible by tp (%d)", B * T, g->d.tp);
    return 0;
}

int gpt_forward(gpt *g, const int32_t *tokens, const int32_t *targets, int B, int T, float dloss, tg_err *e) {
    const tg_ops *o = g->ops;
    gpt_acts *a = g->acts;
    if (check_batch_shape(g, B, T, e)) return -1;
    const size_t bytes = (size_t)B * T * sizeof(int32_t);
    o->upload(o, a->tokens.base, tokens, bytes);
    if (targets) o->upload(o, a->targets.base, targets, bytes);
    return gpt_forward_resident(g, NULL, a->tokens.base, targets ? a->targets.base : NULL, B, T, dloss, e);
}

static int weights_needed(const gpt_weight_hook *hook, int layer, tg_err *e) {
    return hook ? hook->needed(hook->ctx, layer, e) : 0;
}

/* The forward pass up to ln_f, whose rows it leaves delivered (under SP
 * their all-gather in flight) for the LM head. */
static int forward_trunk(gpt *g, const gpt_weight_hook *hook, const int32_t *tokens, int B, int T, tg_err *e) {
    const tg_ops *o = g->ops;
    gpt_acts *a = g->acts;
    const gpt_dims *d = &g->d;
    const int N = B * T, C = d->C;
    if (check_batch_shape(g, B, T, e)) return -1;
    a->B = B;
    a->T = T;
    a->tokens_in = tokens;

    /* Embedding: vocab-parallel lookup summed over TP, then the replicated
     * position embedding on this rank's rows. */
    if (weights_needed(hook, -1, e)) return -1;
    void *emb = d->sp ? a->proj.base : act_at(&a->resid, 0);
    o->encoder_forward(o, emb, tokens, gpt_param(g, P_WTE, 0), NULL, B, T, C, d->vocab_start, d->V_local);
    if (reduce_rows(g, act_at(&a->resid, 0), emb, N, e)) return -1;
    const int row_start = row_start_of(g, N);
    o->position_forward(o, act_at(&a->resid, 0), gpt_param(g, P_WPE, 0), row_start, (int)rows_local(g, N), T, C);
    if (g->drop.p > 0)
        o->dropout(o, act_at(&a->resid, 0), act_at(&a->resid, 0), (int)rows_local(g, N), C, row_site(g, -1, SITE_EMBEDDING, row_start));

    /* The first block's ln_1; every later LayerNorm, ln_f included, comes
     * with the residual add before it (block_forward). */
    const ln_dest ln1_first = ln_reading_resid(g, 0);
    if (weights_needed(hook, 0, e) || layernorm_to_full(g, &ln1_first, act_at(&a->resid, 0), N, e)) return -1;
    for (int l = 0; l < d->L; l++) /* block l ends with the next layer's ln_1 (or ln_f, whole-model) */
        if ((l + 1 < d->L && weights_needed(hook, l + 1, e)) || block_forward(g, l, B, T, true, e)) return -1;
    return 0;
}

int gpt_forward_resident(gpt *g, const gpt_weight_hook *hook, const int32_t *tokens, const int32_t *targets, int B, int T,
                         float dloss, tg_err *e) {
    gpt_acts *a = g->acts;
    const gpt_dims *d = &g->d;
    const int N = B * T;
    if (forward_trunk(g, hook, tokens, B, T, e)) return -1;
    a->targets_in = targets;
    const ln_dest lnf = ln_reading_resid(g, d->L);
    const col_product lm_head = {gpt_param(g, P_WTE, 0), NULL, d->V_local, true, a->logits.elem};
    if (column_product(g, &lm_head, a->logits.base, &lnf, N, e)) return -1;
    if (!targets) return 0;
    return cross_entropy(g, N, dloss, e);
}

/* ---- a forward pass with the LM head at some rows ---- */

typedef struct picked_rows {
    const gpt_rows_span *spans;
    int n_spans;
} picked_rows;

/* The LM head on the rows of [row0, row0 + rows) that a span picks, each
 * to its place among the picked rows' logits (the spans' rows in order). */
static void lmhead_picked_rows(gpt *g, const rows_job *job, int row0, int rows, const void *x) {
    const picked_rows *p = job->args;
    const size_t in_row = (size_t)g->d.C * tg_dtype_bytes(g->ops->act);
    const size_t out_row = (size_t)g->d.V_local * g->acts->logits.elem;
    for (int k = 0, at = 0; k < p->n_spans; at += p->spans[k].count, k++) {
        const int first = p->spans[k].first, end = first + p->spans[k].count;
        const int a = first > row0 ? first : row0, z = end < row0 + rows ? end : row0 + rows;
        if (a < z)
            g->ops->lmhead_forward(g->ops, (char *)g->acts->logits.base + (size_t)(at + a - first) * out_row,
                                   (const char *)x + (size_t)(a - row0) * in_row, gpt_param(g, P_WTE, 0), z - a, g->d.C,
                                   g->d.V_local);
    }
}

int gpt_forward_rows(gpt *g, const int32_t *tokens, const int32_t *targets, int B, int T, const gpt_rows_span *spans,
                     int n_spans, tg_err *e) {
    const tg_ops *o = g->ops;
    gpt_acts *a = g->acts;
    const int N = B * T;
    if (check_batch_shape(g, B, T, e)) return -1;
    int n = 0;
    for (int k = 0; k < n_spans; k++) {
        if (spans[k].count < 1 || spans[k].first < 0 || spans[k].first > N - spans[k].count || n > N - spans[k].count)
            return tg_fail(e, "picked span %d (rows %d, +%d) is outside the %d rows of the pass", k, spans[k].first,
                           spans[k].count, N);
        n += spans[k].count;
    }
    o->upload(o, a->tokens.base, tokens, (size_t)N * sizeof(int32_t));
    if (targets) { /* the picked rows' targets, packed as their logits will be */
        int32_t *picked = tg_malloc((size_t)(n > 0 ? n : 1) * sizeof *picked, "picked targets");
        for (int k = 0, at = 0; k < n_spans; at += spans[k].count, k++)
            memcpy(picked + at, targets + spans[k].first, (size_t)spans[k].count * sizeof *picked);
        o->upload(o, a->targets.base, picked, (size_t)n * sizeof(int32_t));
        free(picked);
    }
    if (forward_trunk(g, NULL, a->tokens.base, B, T, e)) return -1;
    a->targets_in = targets ? a->targets.base : NULL;
    const ln_dest lnf = ln_reading_resid(g, g->d.L);
    const picked_rows args = {spans, n_spans};
    const rows_job job = {lmhead_picked_rows, &args, 2.0 * g->d.C * g->d.V_local};
    if (over_ln_rows(g, &lnf, &job, N, e)) return -1;
    return targets && n > 0 ? cross_entropy(g, n, 0.0f, e) : 0;
}

/* ---- backward ---- */

/* Rebuilds what the recompute mode dropped from layer l's activations. */
static int recompute_layer(gpt *g, int l, int B, int T, tg_err *e) {
    const gpt_dims *d = &g->d;
    gpt_acts *a = g->acts;
    if (d->recompute == RECOMPUTE_FULL) return block_forward(g, l, B, T, false, e);
    if (d->recompute == RECOMPUTE_SELECTIVE) {
        /* Only the GELU output: attention keeps its lse (no T x T to
         * rebuild) and the MLP its pre-GELU input. */
        const int N = B * T, C = d->C, t = d->tp;
        g->ops->gelu_forward(g->ops, act_at(&a->fch_gelu, l), act_at(&a->fch, l), (size_t)N * 4 * C / t);
    }
    return 0;
}

static int block_backward(gpt *g, int l, int B, int T, tg_err *e) {
    const tg_ops *o = g->ops;
    gpt_acts *a = g->acts;
    const gpt_dims *d = &g->d;
    const int N = B * T, C = d->C, t = d->tp;
    if (recompute_layer(g, l, B, T, e)) return -1;
    void *fch = act_at(&a->fch, l), *qkv = act_at(&a->qkv, l);
    const ln_dest ln1 = ln_reading_resid(g, l), ln2 = ln2_of(g, l);

    /* MLP: dres is the gradient of the block's output rows. c_proj's
     * backward and the GELU's come together; c_fc's bias gradient comes
     * with c_fc's weight gradient, whose product reads the same rows of
     * dfc (CUDA: the BGRADA epilogue, a float32 sum in bf16 too): c_fc's
     * rows are this rank's columns of all N rows, and its bias is split by
     * column as they are. */
    if (row_parallel_backward(g, P_FCPROJ_W, l, a->dfc.base, act_at(&a->fch_gelu, l), fch, NULL, N, 4 * C / t, e) ||
        column_parallel_backward(g, P_FC_W, true, l, a->dfc.base, 4 * C / t, &ln2, act_at(&a->res2, l), N, e))
        return -1;

    /* Attention */
    if (row_parallel_backward(g, P_ATTPROJ_W, l, a->datty.base, act_at(&a->atty, l), NULL, NULL, N, C / t, e)) return -1;
    o->attention_backward(o, a->dqkv.base, a->datty.base, act_at(&a->atty, l), qkv, act_at(&a->lse, l), B, T, d->NH_local,
                          d->HS, attention_site(g, l, T));
    return column_parallel_backward(g, P_QKV_W, true, l, a->dqkv.base, 3 * C / t, &ln1, act_at(&a->resid, l), N, e);
}

bool gpt_kind_per_layer(param_kind k) { return GPT_PARAM_SPECS[k].per_layer; }

void gpt_kind_range(const gpt *g, param_kind k, int lo, int hi, size_t *offset, size_t *n) {
    if (!gpt_kind_per_layer(k)) lo = 0, hi = 1;
    *offset = param_offset(g, k, lo);
    *n = (size_t)(hi - lo) * g->kind_size[k];
}

static int grads_ready(const gpt_grad_hook *hook, gpt *g, int layer, tg_err *e) {
    return hook ? hook->ready(hook->ctx, g, layer, e) : 0;
}

int gpt_backward(gpt *g, const gpt_grad_hook *hook, bool acc, tg_err *e) {
    const tg_ops *o = g->ops;
    gpt_acts *a = g->acts;
    const gpt_dims *d = &g->d;
    const int B = a->B, T = a->T, N = B * T, C = d->C, Ns = (int)rows_local(g, N);
    a->grad_acc = acc;

    /* ln_f's backward writes dres, the residual stream's gradient; the blocks add to it */
    const ln_dest lnf = ln_reading_resid(g, d->L);
    if (column_parallel_backward(g, P_WTE, false, 0, a->logits.base, d->V_local, &lnf, act_at(&a->resid, d->L), N, e))
        return -1;

    /* a->dres is the gradient of the residual stream, updated in place
     * through each block from the top down. The LM head's product wrote
     * (or added) every row of dwte first; the embedding's scatter adds the
     * rows its tokens hit at the end. */
    for (int l = d->L - 1; l >= 0; l--)
        if (block_backward(g, l, B, T, e) || grads_ready(hook, g, l, e)) return -1;

    const int row_start = row_start_of(g, N);
    void *demb = through_dropout(g, row_site(g, -1, SITE_EMBEDDING, row_start), N);
    comm_req *gather;
    const void *dx = gather_rows_start(g, a->dres_full.base, demb, N, &gather, e);
    if (!dx) return -1;
    float *dwpe = gpt_grad(g, P_WPE, 0);
    o->position_backward(o, dwpe, demb, row_start, Ns, T, C, acc); /* beside the gather: both read demb */
    if (!acc && T < d->T) o->zero(o, dwpe + (size_t)T * C, (size_t)(d->T - T) * C * sizeof(float)); /* positions past T */
    if (gather && comm_wait(gather, e)) return -1;
    o->encoder_backward(o, gpt_grad(g, P_WTE, 0), NULL, dx, a->tokens_in, B, T, C, d->vocab_start, d->V_local); /* adds */
    return grads_ready(hook, g, -1, e);
}

int gpt_sync_replicated_grads(gpt *g, tg_err *e) {
    if (!g->d.sp) return 0;
    for (int k = 0; k < P_KINDS; k++) {
        if (GPT_PARAM_SPECS[k].split != SPLIT_NONE) continue;
        size_t n = g->kind_size[k] * (GPT_PARAM_SPECS[k].per_layer ? (size_t)g->d.L : 1);
        if (comm_all_reduce(g->tp, g->grads + g->kind_offset[k], n, REDUCE_SUM, e)) return -1;
    }
    return 0;
}

void gpt_losses_at(const gpt *g, int n, float *host_out) {
    g->ops->download(g->ops, host_out, g->acts->losses.base, (size_t)n * sizeof(float));
}

void gpt_logits_at(const gpt *g, int row, float *host_out) {
    const act_buf *l = &g->acts->logits;
    const char *at = (const char *)l->base + (size_t)row * g->d.V_local * l->elem;
    g->ops->download_floats(g->ops, host_out, at, (size_t)g->d.V_local);
}
