/* Forward and backward passes of one rank's shard, one kernel per line, in
 * Megatron's tensor-parallel mapping (the TP collectives are no-ops at tp=1). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt.h"
#include "model/gpt_internal.h"
#include "model/rng.h"

float *gpt_param(const gpt *g, param_kind k, int layer) {
    return g->params + g->kind_offset[k] + (layer > 0 ? (size_t)layer * g->kind_size[k] : 0);
}

float *gpt_grad(const gpt *g, param_kind k, int layer) {
    return g->grads + g->kind_offset[k] + (layer > 0 ? (size_t)layer * g->kind_size[k] : 0);
}

/* Carves every activation buffer out of one allocation. */
static gpt_acts *acts_create(const tg_ops *ops, const gpt_dims *d, int B, int T) {
    gpt_acts *a = tg_calloc(1, sizeof *a, "activation table");
    const size_t BT = (size_t)B * T, C = (size_t)d->C, t = (size_t)d->tp, L = (size_t)d->L;
    struct { float **dst; size_t n; } slots[] = {
        {&a->encoded, BT * C},
        {&a->ln1, L * BT * C}, {&a->ln1_mean, L * BT}, {&a->ln1_rstd, L * BT},
        {&a->qkv, L * BT * 3 * C / t}, {&a->atty, L * BT * C / t},
        {&a->att, L * BT * (size_t)d->NH_local * T},
        {&a->res2, L * BT * C},
        {&a->ln2, L * BT * C}, {&a->ln2_mean, L * BT}, {&a->ln2_rstd, L * BT},
        {&a->fch, L * BT * 4 * C / t}, {&a->fch_gelu, L * BT * 4 * C / t},
        {&a->res3, L * BT * C},
        {&a->lnf, BT * C}, {&a->lnf_mean, BT}, {&a->lnf_rstd, BT},
        {&a->logits, BT * (size_t)d->V_local},
        {&a->losses, BT}, {&a->rowmax, BT}, {&a->xstats, 2 * BT},
        {&a->dres, BT * C}, {&a->dln, BT * C}, {&a->dqkv, BT * 3 * C / t}, {&a->datty, BT * C / t},
        {&a->dfc, BT * 4 * C / t},
        {(float **)&a->tokens, BT}, {(float **)&a->targets, BT}, /* int32, same size as float */
    };
    const size_t n_slots = sizeof slots / sizeof slots[0];
    size_t total = 0;
    for (size_t i = 0; i < n_slots; i++) total += (slots[i].n + 15) / 16 * 16; /* 64-byte aligned slices */
    a->arena = ops->alloc(total * sizeof(float), "activations");
    float *p = a->arena;
    for (size_t i = 0; i < n_slots; i++) {
        *slots[i].dst = p;
        p += (slots[i].n + 15) / 16 * 16;
    }
    return a;
}

gpt *gpt_create(const tg_ops *ops, comm *tp, const gpt_dims *d, int B, int T) {
    gpt *g = tg_calloc(1, sizeof *g, "model");
    g->ops = ops;
    g->tp = tp;
    g->d = *d;
    g->B = B;
    g->T = T;
    g->n_params = gpt_layout_params(g);
    g->params = ops->alloc(g->n_params * sizeof(float), "parameters");
    g->grads = ops->alloc(g->n_params * sizeof(float), "gradients");
    ops->zero(g->params, g->n_params * sizeof(float));
    ops->zero(g->grads, g->n_params * sizeof(float));
    g->acts = acts_create(ops, d, B, T);
    return g;
}

void gpt_free(gpt *g) {
    if (!g) return;
    g->ops->free(g->acts->arena);
    free(g->acts);
    g->ops->free(g->params);
    g->ops->free(g->grads);
    free(g->tensors);
    free(g);
}

void gpt_init_weights(gpt *g, uint64_t seed) {
    const float std = 0.02f, resid_std = 0.02f / sqrtf(2.0f * g->d.L);
    float *host = tg_malloc(g->n_params * sizeof(float), "initial weights");
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
    g->ops->upload(g->params, host, g->n_params * sizeof(float));
    free(host);
}

void gpt_zero_grads(gpt *g) { g->ops->zero(g->grads, g->n_params * sizeof(float)); }

/* Per-layer activation slices. */
#define ACT(a, field, l, per_layer) ((a)->field + (size_t)(l) * (per_layer))

/* The vocab-parallel cross-entropy: local passes with the TP reductions of
 * Megatron between them (max, then sum-exp and target logit together). */
static int cross_entropy(gpt *g, int N, float dloss, float *mean_loss, tg_err *e) {
    const tg_ops *o = g->ops;
    gpt_acts *a = g->acts;
    const gpt_dims *d = &g->d;
    int n_real = d->V - d->vocab_start;
    n_real = n_real < 0 ? 0 : (n_real > d->V_local ? d->V_local : n_real);
    o->xent_rowmax(a->rowmax, a->logits, N, d->V_local, n_real);
    if (g->tp->vt->all_reduce(g->tp, a->rowmax, (size_t)N, REDUCE_MAX, e)) return -1;
    o->xent_stats(a->xstats, a->logits, a->rowmax, a->targets, N, d->V_local, n_real, d->vocab_start);
    if (g->tp->vt->all_reduce(g->tp, a->xstats, 2 * (size_t)N, REDUCE_SUM, e)) return -1;
    o->xent_finish(a->losses, a->logits, a->rowmax, a->xstats, a->targets, N, d->V_local, n_real, d->vocab_start, dloss);
    float *host = tg_malloc((size_t)N * sizeof(float), "losses");
    o->download(host, a->losses, (size_t)N * sizeof(float));
    double sum = 0.0;
    for (int i = 0; i < N; i++) sum += host[i];
    free(host);
    *mean_loss = (float)(sum / N);
    return 0;
}

int gpt_forward(gpt *g, const int32_t *tokens, const int32_t *targets, int B, int T, float dloss, float *mean_loss,
                tg_err *e) {
    const tg_ops *o = g->ops;
    gpt_acts *a = g->acts;
    const gpt_dims *d = &g->d;
    const int N = B * T, C = d->C, t = d->tp, NHl = d->NH_local, HS = d->HS;
    const size_t BTmax = (size_t)g->B * g->T, attmax = BTmax * (size_t)NHl * g->T;
    if (B > g->B || T > g->T) return tg_fail(e, "forward of %dx%d exceeds the %dx%d buffers", B, T, g->B, g->T);
    a->B = B;
    a->T = T;
    o->upload(a->tokens, tokens, (size_t)N * sizeof(int32_t));
    if (targets) o->upload(a->targets, targets, (size_t)N * sizeof(int32_t));

    /* Embedding: vocab-parallel lookup, summed over the TP group. */
    o->encoder_forward(a->encoded, a->tokens, gpt_param(g, P_WTE, 0), d->tp_rank == 0 ? gpt_param(g, P_WPE, 0) : NULL, B, T,
                       C, d->vocab_start, d->V_local);
    if (g->tp->vt->all_reduce(g->tp, a->encoded, (size_t)N * C, REDUCE_SUM, e)) return -1;

    const float *res = a->encoded;
    for (int l = 0; l < d->L; l++) {
        float *ln1 = ACT(a, ln1, l, BTmax * C), *qkv = ACT(a, qkv, l, BTmax * 3 * C / t);
        float *atty = ACT(a, atty, l, BTmax * C / t), *att = ACT(a, att, l, attmax);
        float *res2 = ACT(a, res2, l, BTmax * C), *ln2 = ACT(a, ln2, l, BTmax * C);
        float *fch = ACT(a, fch, l, BTmax * 4 * C / t), *fch_gelu = ACT(a, fch_gelu, l, BTmax * 4 * C / t);
        float *res3 = ACT(a, res3, l, BTmax * C);

        o->layernorm_forward(ln1, ACT(a, ln1_mean, l, BTmax), ACT(a, ln1_rstd, l, BTmax), res, gpt_param(g, P_LN1_W, l),
                             gpt_param(g, P_LN1_B, l), N, C);
        o->matmul_forward(qkv, ln1, gpt_param(g, P_QKV_W, l), gpt_param(g, P_QKV_B, l), N, C, 3 * C / t);
        o->attention_forward(atty, att, qkv, B, T, NHl, HS);
        /* Row-parallel projection: partial sums reduced over TP. The
         * replicated bias (like wpe above) enters on TP rank 0 only, so the
         * sum counts it once; its gradient lands on rank 0 and is summed over
         * TP before the update, keeping the replicas equal. */
        o->matmul_forward(res2, atty, gpt_param(g, P_ATTPROJ_W, l), d->tp_rank == 0 ? gpt_param(g, P_ATTPROJ_B, l) : NULL, N,
                          C / t, C);
        if (g->tp->vt->all_reduce(g->tp, res2, (size_t)N * C, REDUCE_SUM, e)) return -1;
        o->add(res2, res2, res, (size_t)N * C);

        o->layernorm_forward(ln2, ACT(a, ln2_mean, l, BTmax), ACT(a, ln2_rstd, l, BTmax), res2, gpt_param(g, P_LN2_W, l),
                             gpt_param(g, P_LN2_B, l), N, C);
        o->matmul_forward(fch, ln2, gpt_param(g, P_FC_W, l), gpt_param(g, P_FC_B, l), N, C, 4 * C / t);
        o->gelu_forward(fch_gelu, fch, (size_t)N * 4 * C / t);
        o->matmul_forward(res3, fch_gelu, gpt_param(g, P_FCPROJ_W, l), d->tp_rank == 0 ? gpt_param(g, P_FCPROJ_B, l) : NULL,
                          N, 4 * C / t, C);
        if (g->tp->vt->all_reduce(g->tp, res3, (size_t)N * C, REDUCE_SUM, e)) return -1;
        o->add(res3, res3, res2, (size_t)N * C);
        res = res3;
    }
    o->layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, res, gpt_param(g, P_LNF_W, 0), gpt_param(g, P_LNF_B, 0), N, C);
    o->lmhead_forward(a->logits, a->lnf, gpt_param(g, P_WTE, 0), N, C, d->V_local);
    if (!targets) {
        if (mean_loss) *mean_loss = 0.0f;
        return 0;
    }
    return cross_entropy(g, N, dloss, mean_loss, e);
}

int gpt_backward(gpt *g, tg_err *e) {
    const tg_ops *o = g->ops;
    gpt_acts *a = g->acts;
    const gpt_dims *d = &g->d;
    const int B = a->B, T = a->T, N = B * T, C = d->C, t = d->tp, NHl = d->NH_local, HS = d->HS;
    const size_t BTmax = (size_t)g->B * g->T, attmax = BTmax * (size_t)NHl * g->T;

    /* LM head (its input was copied to every TP rank: all-reduce dX). */
    o->lmhead_backward(a->dln, gpt_grad(g, P_WTE, 0), a->logits, a->lnf, gpt_param(g, P_WTE, 0), N, C, d->V_local);
    if (g->tp->vt->all_reduce(g->tp, a->dln, (size_t)N * C, REDUCE_SUM, e)) return -1;
    o->zero(a->dres, (size_t)N * C * sizeof(float));
    const float *last = d->L > 0 ? ACT(a, res3, d->L - 1, BTmax * C) : a->encoded;
    o->layernorm_backward(a->dres, gpt_grad(g, P_LNF_W, 0), gpt_grad(g, P_LNF_B, 0), a->dln, last, gpt_param(g, P_LNF_W, 0),
                          a->lnf_mean, a->lnf_rstd, N, C);

    /* a->dres is the gradient of the residual stream, updated in place
     * through each block from the top down. */
    for (int l = d->L - 1; l >= 0; l--) {
        const float *res = l == 0 ? a->encoded : ACT(a, res3, l - 1, BTmax * C);
        float *ln1 = ACT(a, ln1, l, BTmax * C), *qkv = ACT(a, qkv, l, BTmax * 3 * C / t);
        float *atty = ACT(a, atty, l, BTmax * C / t), *att = ACT(a, att, l, attmax);
        float *res2 = ACT(a, res2, l, BTmax * C), *ln2 = ACT(a, ln2, l, BTmax * C);
        float *fch = ACT(a, fch, l, BTmax * 4 * C / t), *fch_gelu = ACT(a, fch_gelu, l, BTmax * 4 * C / t);

        /* MLP */
        o->matmul_backward(a->dfc, gpt_grad(g, P_FCPROJ_W, l), d->tp_rank == 0 ? gpt_grad(g, P_FCPROJ_B, l) : NULL, a->dres,
                           fch_gelu, gpt_param(g, P_FCPROJ_W, l), N, 4 * C / t, C);
        o->gelu_backward(a->dfc, fch, a->dfc, (size_t)N * 4 * C / t);
        o->matmul_backward(a->dln, gpt_grad(g, P_FC_W, l), gpt_grad(g, P_FC_B, l), a->dfc, ln2, gpt_param(g, P_FC_W, l), N,
                           C, 4 * C / t);
        if (g->tp->vt->all_reduce(g->tp, a->dln, (size_t)N * C, REDUCE_SUM, e)) return -1;
        o->layernorm_backward(a->dres, gpt_grad(g, P_LN2_W, l), gpt_grad(g, P_LN2_B, l), a->dln, res2,
                              gpt_param(g, P_LN2_W, l), ACT(a, ln2_mean, l, BTmax), ACT(a, ln2_rstd, l, BTmax), N, C);

        /* Attention */
        o->matmul_backward(a->datty, gpt_grad(g, P_ATTPROJ_W, l), d->tp_rank == 0 ? gpt_grad(g, P_ATTPROJ_B, l) : NULL,
                           a->dres, atty, gpt_param(g, P_ATTPROJ_W, l), N, C / t, C);
        o->attention_backward(a->dqkv, a->datty, qkv, att, B, T, NHl, HS);
        o->matmul_backward(a->dln, gpt_grad(g, P_QKV_W, l), gpt_grad(g, P_QKV_B, l), a->dqkv, ln1, gpt_param(g, P_QKV_W, l),
                           N, C, 3 * C / t);
        if (g->tp->vt->all_reduce(g->tp, a->dln, (size_t)N * C, REDUCE_SUM, e)) return -1;
        o->layernorm_backward(a->dres, gpt_grad(g, P_LN1_W, l), gpt_grad(g, P_LN1_B, l), a->dln, res,
                              gpt_param(g, P_LN1_W, l), ACT(a, ln1_mean, l, BTmax), ACT(a, ln1_rstd, l, BTmax), N, C);
    }
    o->encoder_backward(gpt_grad(g, P_WTE, 0), d->tp_rank == 0 ? gpt_grad(g, P_WPE, 0) : NULL, a->dres, a->tokens, B, T, C,
                        d->vocab_start, d->V_local);
    return 0;
}

void gpt_logits_at(const gpt *g, int b, int t, int T, float *host_out) {
    const size_t row = (size_t)b * T + t;
    g->ops->download(host_out, g->acts->logits + row * g->d.V_local, (size_t)g->d.V_local * sizeof(float));
}
