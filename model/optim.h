/* AdamW with torch semantics, global-norm clipping and the LR schedule. */
#ifndef MODEL_OPTIM_H
#define MODEL_OPTIM_H

#include "model/config.h"
#include "model/gpt.h"

typedef struct optim {
    const tg_ops *ops;
    size_t n;        /* floats, the same layout as the model's parameters */
    float *m, *v;    /* backend memory */
} optim;

optim *optim_create(const tg_ops *ops, size_t n);
void optim_free(optim *o);

/* LR of 1-based step s: linear warm-up, then cosine decay to min_lr. */
double optim_lr(const tg_config *c, int step);

/* Global gradient norm (before clipping), over every parameter once. */
double optim_grad_norm(const gpt *g);

/* Clips the gradients to c->train.grad_clip as torch.nn.utils.clip_grad_norm_
 * does, then applies AdamW step `step` (1-based) at rate lr. */
void optim_step(optim *o, gpt *g, const tg_config *c, int step, double lr, double grad_norm);

#endif
