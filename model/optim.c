#include "model/optim.h"

#include <math.h>
#include <stdlib.h>

optim *optim_create(const tg_ops *ops, size_t n) {
    optim *o = tg_calloc(1, sizeof *o, "optimizer");
    o->ops = ops;
    o->n = n;
    o->m = ops->alloc(n * sizeof(float), "AdamW first moments");
    o->v = ops->alloc(n * sizeof(float), "AdamW second moments");
    ops->zero(o->m, n * sizeof(float));
    ops->zero(o->v, n * sizeof(float));
    return o;
}

void optim_free(optim *o) {
    if (!o) return;
    o->ops->free(o->m);
    o->ops->free(o->v);
    free(o);
}

double optim_lr(const tg_config *c, int step) {
    const int i = step - 1, warmup = c->train.warmup, steps = c->train.steps;
    const double lr = c->train.lr, min_lr = c->train.min_lr;
    if (i < warmup) return lr * (i + 1) / warmup;
    if (steps <= warmup) return min_lr;
    double progress = (double)(i - warmup) / (steps - warmup);
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + cos(M_PI * progress));
}

double optim_grad_norm(const gpt *g) {
    return sqrt(g->ops->sum_squares(g->grads, g->n_params));
}

void optim_step(optim *o, gpt *g, const tg_config *c, int step, double lr, double grad_norm) {
    const double clip = c->train.grad_clip;
    if (clip > 0.0) {
        /* torch: coef = max_norm / (norm + 1e-6), clamped to at most 1. */
        double coef = clip / (grad_norm + 1e-6);
        if (coef < 1.0) g->ops->scale(g->grads, (float)coef, g->n_params);
    }
    const double b1 = c->train.beta1, b2 = c->train.beta2;
    const float bc1 = (float)(1.0 - pow(b1, step)), bc2 = (float)(1.0 - pow(b2, step));
    for (int i = 0; i < g->n_tensors; i++) {
        const gpt_tensor *t = &g->tensors[i];
        float wd = t->decay ? (float)c->train.weight_decay : 0.0f;
        g->ops->adamw(g->params + t->offset, g->grads + t->offset, o->m + t->offset, o->v + t->offset, t->numel, (float)lr,
                      (float)b1, (float)b2, (float)c->train.eps, wd, bc1, bc2);
    }
}
