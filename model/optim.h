/* AdamW with torch semantics, global-norm clipping, the LR schedule, and the
 * data-parallel gradient reduction: all-reduce, or ZeRO-1 (reduce-scatter,
 * AdamW on this rank's contiguous shard of the flat parameter buffer, then
 * all-gather of the parameters). */
#ifndef MODEL_OPTIM_H
#define MODEL_OPTIM_H

#include "model/config.h"
#include "model/gpt.h"

typedef struct optim {
    const tg_ops *ops;
    comm *dp;              /* data-parallel group (size 1: no-op) */
    bool zero;
    size_t shard_begin, shard_len; /* floats of the flat buffer this rank updates */
    float *m, *v;          /* AdamW moments of the shard (backend memory) */
} optim;

/* g must have been created with its buffers padded to a multiple of dp. */
optim *optim_create(const tg_ops *ops, const gpt *g, comm *dp, bool zero);
void optim_free(optim *o);

/* Bytes the optimizer allocated (moments, and ZeRO's staging). */
size_t optim_allocated_bytes(const optim *o);

/* LR of 1-based step s: linear warm-up, then cosine decay to min_lr. */
double optim_lr(const tg_config *c, int step);

/* Sums the gradients over DP (all-reduce, or reduce-scatter under ZeRO). */
int optim_reduce_grads(optim *o, gpt *g, tg_err *e);

/* Global gradient norm before clipping: every parameter counted once across
 * TP and DP. Call after optim_reduce_grads. */
int optim_grad_norm(const optim *o, const gpt *g, double *norm, tg_err *e);

/* Clips to c->train.grad_clip as torch.nn.utils.clip_grad_norm_ does, applies
 * AdamW step `step` (1-based) at rate lr, and under ZeRO gathers the updated
 * parameters back to every DP rank. */
int optim_step(optim *o, gpt *g, const tg_config *c, int step, double lr, double grad_norm, tg_err *e);

/* The full moments in the parameter layout (gathered over DP under ZeRO),
 * into host buffers of g->n_params floats, for checkpoints. */
int optim_export(const optim *o, const gpt *g, float *m_host, float *v_host, tg_err *e);
/* The reverse: takes this rank's shard of full-layout host moments. */
void optim_import(optim *o, const gpt *g, const float *m_host, const float *v_host);

#endif
