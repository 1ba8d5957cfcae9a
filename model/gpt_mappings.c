/* The TP/SP mappings of model/gpt_mappings.h: where a layer's collectives
 * start, what runs beside them, and where they are waited for. */
#include "model/gpt_mappings.h"

#include <stdio.h>
#include <stdlib.h>

#include "parallel/mappings.h"

void *gather_rows_start(gpt *g, void *full, void *rows, int N, comm_req **req, tg_err *e) {
    return map_gather_rows_start(g->tp, g->d.sp, full, rows, rows_local(g, N) * g->d.C, g->ops->act, req, e);
}

int reduce_rows(gpt *g, void *rows, void *full, int N, tg_err *e) {
    return map_reduce_rows(g->tp, g->d.sp, rows, full, rows_local(g, N) * g->d.C, g->ops->act, e);
}

/* LayerNorm (weight w of layer `layer`) whose output slot `slot` of out
 * is kept: as this rank's rows under SP's regather, else as all rows (under
 * SP written as rows to ln_shard and gathered into it). */
static ln_dest ln_at(const gpt *g, const act_buf *out, const act_buf *mean, const act_buf *rstd, int slot, param_kind w,
                     int layer) {
    const gpt_acts *a = g->acts;
    void *kept = act_at(out, slot), *rows = kept, *full = kept;
    if (g->d.sp_regather) full = a->ln_full.base;
    else if (g->d.sp) rows = a->ln_shard.base;
    return (ln_dest){rows, full, act_at(mean, slot), act_at(rstd, slot), w, layer};
}

ln_dest ln_reading_resid(const gpt *g, int l) {
    const gpt_acts *a = g->acts;
    if (l == g->d.L) return ln_at(g, &a->lnf, &a->lnf_mean, &a->lnf_rstd, 0, P_LNF_W, 0);
    return ln_at(g, &a->ln1, &a->ln1_mean, &a->ln1_rstd, l, P_LN1_W, l);
}

ln_dest ln2_of(const gpt *g, int l) {
    const gpt_acts *a = g->acts;
    return ln_at(g, &a->ln2, &a->ln2_mean, &a->ln2_rstd, l, P_LN2_W, l);
}

/* Delivers a LayerNorm's rows as all rows: under SP starts their
 * all-gather and leaves it in flight (acts->ln_gather) for the
 * column-parallel product that reads them (column_product), which is the
 * next thing to read ln->full. */
static int deliver_rows(gpt *g, const ln_dest *ln, void *rows, int N, tg_err *e) {
    if (g->acts->ln_gather) { /* a product skipped its gather: the model's own bug */
        fprintf(stderr, "internal error: a LayerNorm's all-gather was started before the last one was used\n");
        abort();
    }
    comm_req *req = NULL;
    if (!gather_rows_start(g, ln->full, rows, N, &req, e)) return -1;
    g->acts->ln_gather = req;
    return 0;
}

int over_gathered_rows(gpt *g, const gathered_rows *in, const rows_job *job, int N, tg_err *e) {
    if (!in->gather) {
        job->run(g, job, 0, N, in->full);
        return 0;
    }
    const int n = (int)rows_local(g, N), r = g->d.tp_rank, rest = g->d.tp - 1 - r;
    const size_t row_bytes = (size_t)g->d.C * tg_dtype_bytes(g->ops->act);
    job->run(g, job, r * n, n, in->own);
    comm_note_beside(g->tp, in->gather, job->flops_per_row * n);
    if (comm_wait(in->gather, e)) return -1;
    if (r > 0) job->run(g, job, 0, r * n, in->full);
    if (rest > 0) job->run(g, job, (r + 1) * n, rest * n, (const char *)in->full + (size_t)(r + 1) * n * row_bytes);
    return 0;
}

typedef struct col_product_rows {
    const col_product *p;
    void *out;
} col_product_rows;

static void product_rows(gpt *g, const rows_job *job, int row0, int rows, const void *x) {
    const col_product_rows *a = job->args;
    const col_product *p = a->p;
    void *out = (char *)a->out + (size_t)row0 * p->OC * p->out_elem;
    if (p->lmhead) g->ops->lmhead_forward(g->ops, out, x, p->w, rows, g->d.C, p->OC);
    else g->ops->matmul_forward(g->ops, out, x, p->w, p->bias, rows, g->d.C, p->OC);
}

int over_ln_rows(gpt *g, const ln_dest *ln, const rows_job *job, int N, tg_err *e) {
    const gathered_rows in = {ln->full, ln->rows, g->acts->ln_gather};
    g->acts->ln_gather = NULL;
    return over_gathered_rows(g, &in, job, N, e);
}

int column_product(gpt *g, const col_product *p, void *out, const ln_dest *ln, int N, tg_err *e) {
    const col_product_rows args = {p, out};
    const rows_job job = {product_rows, &args, 2.0 * g->d.C * p->OC};
    return over_ln_rows(g, ln, &job, N, e);
}

int layernorm_to_full(gpt *g, const ln_dest *ln, const void *in, int N, tg_err *e) {
    void *out = ln->rows;
    g->ops->layernorm_forward(g->ops, out, ln->mean, ln->rstd, in, gpt_param(g, ln->w, ln->layer),
                              gpt_param(g, (param_kind)(ln->w + 1), ln->layer), (int)rows_local(g, N), g->d.C);
    return deliver_rows(g, ln, out, N, e);
}

int row_parallel(gpt *g, void *out, const void *inp, param_kind w, int l, const void *res, const ln_dest *ln, int N, int K,
                 tg_err *e) {
    const tg_ops *o = g->ops;
    void *partial = g->acts->proj.base;
    o->matmul_forward(o, partial, inp, gpt_param(g, w, l), NULL, N, K, g->d.C);
    void *sum = g->d.sp ? out : partial;
    if (reduce_rows(g, sum, partial, N, e)) return -1;
    const void *bias = gpt_param(g, (param_kind)(w + 1), l);
    const int rows = (int)rows_local(g, N), site = w == P_ATTPROJ_W ? SITE_ATTN_RESIDUAL : SITE_MLP_RESIDUAL;
    const tg_dropout drop = row_site(g, l, site, row_start_of(g, N));
    void *ln_out = ln->rows;
    o->bias_residual_layernorm(o, out, ln_out, ln->mean, ln->rstd, sum, bias, res, gpt_param(g, ln->w, ln->layer),
                               gpt_param(g, (param_kind)(ln->w + 1), ln->layer), rows, g->d.C, drop);
    return deliver_rows(g, ln, ln_out, N, e);
}

/* The backward of LayerNorm ln of this rank's residual rows ln_in, from
 * dln (their gradient, summed over TP); dres accumulates, except from ln_f,
 * the backward pass's first, which writes it (no zeroing before). */
static void layernorm_backward_of(gpt *g, const ln_dest *ln, const void *ln_in, const void *dln, int N) {
    const bool dres_acc = ln->w != P_LNF_W;
    g->ops->layernorm_backward(g->ops, g->acts->dres.base, gpt_grad(g, ln->w, ln->layer),
                               gpt_grad(g, (param_kind)(ln->w + 1), ln->layer), dln, ln_in, gpt_param(g, ln->w, ln->layer),
                               ln->mean, ln->rstd, (int)rows_local(g, N), g->d.C, dres_acc, g->acts->grad_acc);
}

/* This rank's rows of dln_full (all rows' partial gradient), summed over TP. */
static void *dln_rows(const gpt *g) { return g->d.sp ? g->acts->dln.base : g->acts->dln_full.base; }

/* Part of a column-parallel layer's backward: the input gradient into dinp
 * (if not NULL) and, when weight_grads, the weight (and bias) gradients,
 * the only part that reads the layer's input (ln's rows, all of them).
 * The LM head (w == P_WTE) is the tied embedding, read transposed. */
static void column_grads(gpt *g, param_kind w, int l, void *dinp, bool weight_grads, bool has_bias, const void *dout,
                         const ln_dest *ln, int N, int OC) {
    const tg_ops *o = g->ops;
    const void *weight = gpt_param(g, w, l), *inp = weight_grads ? ln->full : NULL;
    float *dw = weight_grads ? gpt_grad(g, w, l) : NULL;
    float *dbias = weight_grads && has_bias ? gpt_grad(g, (param_kind)(w + 1), l) : NULL;
    const bool acc = g->acts->grad_acc;
    if (w == P_WTE) o->lmhead_backward(o, dinp, dw, dout, inp, weight, N, g->d.C, OC, acc);
    else o->matmul_backward(o, dinp, dw, dbias, dout, inp, weight, N, g->d.C, OC, acc);
}

/* Under SP's regather: all rows of LayerNorm ln again, gathered from the
 * rows it kept into ln->full (which later LayerNorms' gathers overwrote),
 * left in flight in *req; *req NULL otherwise (ln->full holds them). */
static int regather_start(gpt *g, const ln_dest *ln, int N, comm_req **req, tg_err *e) {
    *req = NULL;
    if (!g->d.sp_regather) return 0;
    return gather_rows_start(g, ln->full, ln->rows, N, req, e) ? 0 : -1;
}

int column_parallel_backward(gpt *g, param_kind w, bool has_bias, int l, const void *dout, int OC, const ln_dest *ln,
                             const void *ln_in, int N, tg_err *e) {
    const tg_ops *o = g->ops;
    gpt_acts *a = g->acts;
    const int C = g->d.C;
    comm_req *gather;
    if (regather_start(g, ln, N, &gather, e)) return -1;
    column_grads(g, w, l, a->dln_full.base, false, has_bias, dout, ln, N, OC);
    if (gather) {
        comm_note_beside(g->tp, gather, 2.0 * N * C * OC);
        if (comm_wait(gather, e)) return -1;
    }
    comm_req *r = map_reduce_rows_start(g->tp, g->d.sp, dln_rows(g), a->dln_full.base, rows_local(g, N) * C, o->act, e);
    if (!r) return -1;
    column_grads(g, w, l, NULL, true, has_bias, dout, ln, N, OC);
    comm_note_beside(g->tp, r, 2.0 * N * C * OC);
    if (comm_wait(r, e)) return -1;
    layernorm_backward_of(g, ln, ln_in, dln_rows(g), N);
    return 0;
}

void *through_dropout(gpt *g, tg_dropout drop, int N) {
    gpt_acts *a = g->acts;
    if (drop.p <= 0) return a->dres.base;
    g->ops->dropout(g->ops, a->ddrop.base, a->dres.base, (int)rows_local(g, N), g->d.C, drop);
    return a->ddrop.base;
}

static int row_parallel_dout(gpt *g, param_kind w, int l, int N, gathered_rows *dout, tg_err *e) {
    const int site = w == P_ATTPROJ_W ? SITE_ATTN_RESIDUAL : SITE_MLP_RESIDUAL;
    void *dbranch = through_dropout(g, row_site(g, l, site, row_start_of(g, N)), N);
    comm_req *gather;
    void *full = gather_rows_start(g, g->acts->dres_full.base, dbranch, N, &gather, e);
    if (!full) return -1;
    *dout = (gathered_rows){full, dbranch, gather};
    g->ops->bias_backward(g->ops, gpt_grad(g, (param_kind)(w + 1), l), dbranch, (int)rows_local(g, N), g->d.C,
                          g->acts->grad_acc);
    return 0;
}

/* A row-parallel layer's input gradient on some rows (rows_job args). */
typedef struct input_grad_rows {
    void *dinp;
    const void *w, *pre; /* pre: the GELU's input when the layer reads gelu(pre), else NULL */
    int K;               /* the layer's input width */
} input_grad_rows;

static void input_grad_of_rows(gpt *g, const rows_job *job, int row0, int rows, const void *dout) {
    const input_grad_rows *a = job->args;
    const size_t offset = (size_t)row0 * a->K * tg_dtype_bytes(g->ops->act);
    void *dinp = (char *)a->dinp + offset;
    if (a->pre)
        g->ops->matmul_backward_dgelu(g->ops, dinp, NULL, NULL, dout, NULL, a->w, (const char *)a->pre + offset, rows, a->K,
                                      g->d.C, false);
    else g->ops->matmul_backward(g->ops, dinp, NULL, NULL, dout, NULL, a->w, rows, a->K, g->d.C, false); /* no parameter */
}

int row_parallel_backward(gpt *g, param_kind w, int l, void *dinp, const void *inp, const void *pre, float *dpre_bias, int N,
                          int K, tg_err *e) {
    const tg_ops *o = g->ops;
    const void *weight = gpt_param(g, w, l);
    float *dw = gpt_grad(g, w, l);
    const bool acc = g->acts->grad_acc;
    gathered_rows dout;
    if (row_parallel_dout(g, w, l, N, &dout, e)) return -1;
    if (!dout.gather) { /* all rows here: one op (cuBLASLt fuses the GELU's backward and, in fp32, its bias gradient) */
        if (pre) o->matmul_backward_dgelu(o, dinp, dpre_bias, dw, dout.full, inp, weight, pre, N, K, g->d.C, acc);
        else o->matmul_backward(o, dinp, dw, NULL, dout.full, inp, weight, N, K, g->d.C, acc);
        return 0;
    }
    const input_grad_rows args = {dinp, weight, pre, K};
    const rows_job job = {input_grad_of_rows, &args, 2.0 * g->d.C * K};
    if (over_gathered_rows(g, &dout, &job, N, e)) return -1;
    if (pre && dpre_bias) o->bias_backward(o, dpre_bias, dinp, N, K, acc);
    o->matmul_backward(o, NULL, dw, NULL, dout.full, inp, weight, N, K, g->d.C, acc);
    return 0;
}
