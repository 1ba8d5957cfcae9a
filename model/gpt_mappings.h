/* The tensor- and sequence-parallel mappings of a block's products and
 * LayerNorms, in Megatron's layout (model/gpt_mappings.c): every TP
 * collective of a layer, forward and backward, is in one of these; at
 * tp = 1 they are no-ops (comm_null of size 1). Rows: N = B*T tokens; the
 * residual stream holds N/tp rows under SP, else N. Shared between the
 * files of model/gpt*: not for other modules. */
#ifndef MODEL_GPT_MAPPINGS_H
#define MODEL_GPT_MAPPINGS_H

#include "model/gpt_internal.h"

/* This rank's rows of the residual stream: N / tp under SP, else N. */
static inline size_t rows_local(const gpt *g, int N) { return g->d.sp ? (size_t)N / g->d.tp : (size_t)N; }

/* This rank's first row of the residual stream in the micro-batch. */
static inline int row_start_of(const gpt *g, int N) { return g->d.sp ? g->d.tp_rank * (int)rows_local(g, N) : 0; }

/* The two mappings of parallel/mappings.h on this rank's shapes (the
 * all-gather left in flight in *req, NULL without SP). */
void *gather_rows_start(gpt *g, void *full, void *rows, int N, comm_req **req, tg_err *e);
int reduce_rows(gpt *g, void *rows, void *full, int N, tg_err *e);

/* One LayerNorm: where it writes this rank's rows, where the product
 * after it reads all rows (gathered there under SP; the same buffer
 * without SP), its statistics on this rank's rows, its weights. Under SP
 * the buffer kept for the backward pass is `rows` when gpt_dims.sp_regather
 * (`full` is then the shared acts->ln_full, gathered again in the backward
 * pass), else `full`. */
typedef struct ln_dest {
    void *rows, *full;
    float *mean, *rstd;
    param_kind w; /* the weight; the bias is the next kind */
    int layer;
} ln_dest;

/* The LayerNorm that reads residual slot l: block l's ln_1, or ln_f after
 * the last block. */
ln_dest ln_reading_resid(const gpt *g, int l);
/* Block l's ln_2. */
ln_dest ln2_of(const gpt *g, int l);

/* The input of a product over all N rows (residual-stream rows: C
 * activations each) whose rows an all-gather is still delivering (SP):
 * this rank's block (rows tp_rank*N/tp on) is already in `own`; all rows
 * are in `full` once `gather` is done. Without SP, gather is NULL and
 * own == full. */
typedef struct gathered_rows {
    const void *full, *own;
    comm_req *gather;
} gathered_rows;

/* One product's work on `rows` rows from row0 on, reading them at `in`. */
typedef struct rows_job {
    void (*run)(gpt *g, const struct rows_job *job, int row0, int rows, const void *in);
    const void *args;     /* the product's operands, as run reads them */
    double flops_per_row; /* for the projection's model of the overlap (comm_note_beside) */
} rows_job;

/* Runs job over all N rows of `in`, waiting for its gather: this rank's rows
 * first, while the gather runs (they need none of it), then once it is
 * done the other ranks' rows (before this rank's block and after). So the
 * gather runs beside a 1/tp share of the product, the overlap the
 * dependency allows without splitting the gather itself. Rows are
 * independent, so the split changes no result. One call over all rows when
 * nothing is in flight. */
int over_gathered_rows(gpt *g, const gathered_rows *in, const rows_job *job, int N, tg_err *e);
/* The same over the N rows LayerNorm ln delivered (layernorm_to_full,
 * row_parallel), taking over their all-gather. */
int over_ln_rows(gpt *g, const ln_dest *ln, const rows_job *job, int N, tg_err *e);

/* A column-parallel product over the N rows a LayerNorm delivered: a
 * linear layer (out = x w + bias) or the vocab-parallel LM head (bias
 * NULL, w the embedding). */
typedef struct col_product {
    const void *w, *bias;
    int OC;
    bool lmhead;
    size_t out_elem; /* bytes of an element of out */
} col_product;

/* p over ln's rows, over_gathered_rows while their all-gather is in flight
 * (SP): this rank's rows from the LayerNorm's own output, which the gather
 * only reads. */
int column_product(gpt *g, const col_product *p, void *out, const ln_dest *ln, int N, tg_err *e);

/* LayerNorm of the residual rows `in`, delivered as all rows for the next
 * column-parallel product. */
int layernorm_to_full(gpt *g, const ln_dest *ln, const void *in, int N, tg_err *e);

/* out = reduce(inp @ W) + bias + res: a row-parallel linear layer with its
 * residual connection (the bias added once, after the reduction), and the
 * LayerNorm ln that reads out, in the same op (out is not read back),
 * delivered as layernorm_to_full does. */
int row_parallel(gpt *g, void *out, const void *inp, param_kind w, int l, const void *res, const ln_dest *ln, int N, int K,
                 tg_err *e);

/* Backward of a column-parallel layer (weight w, and its bias when
 * has_bias; w == P_WTE: the vocab-parallel LM head, dout its logits'
 * gradient) reading LayerNorm ln of residual rows ln_in: the input gradient
 * on all rows first (under SP's regather beside the all-gather of ln's kept
 * rows, which only the weight gradient reads), then its TP reduction beside
 * the layer's weight (and bias) gradients, which leave the reduction's
 * buffers alone (on a GPU the communicator's stream runs it while the
 * products run), then the LayerNorm's backward. */
int column_parallel_backward(gpt *g, param_kind w, bool has_bias, int l, const void *dout, int OC, const ln_dest *ln,
                             const void *ln_in, int N, tg_err *e);

/* The gradient of the residual rows through a dropout site's mask (the
 * rows themselves without dropout). */
void *through_dropout(gpt *g, tg_dropout drop, int N);

/* Backward of row_parallel (weight w of layer l, input inp [N, K] on all
 * rows): the gradient through the branch's dropout, the bias gradient from
 * the residual rows, then the input gradient dinp [N, K] and the weight
 * gradient from the output gradient on all rows. When the layer reads
 * gelu(pre) (pre non-NULL: the MLP's c_proj), dinp is the gradient of pre,
 * and dpre_bias (if non-NULL) takes its column sums: c_fc's bias gradient.
 * Under SP the output gradient's all-gather runs beside the bias gradient
 * and this rank's rows of dinp (over_gathered_rows); the weight gradient
 * needs all rows. */
int row_parallel_backward(gpt *g, param_kind w, int l, void *dinp, const void *inp, const void *pre, float *dpre_bias, int N,
                          int K, tg_err *e);

#endif
