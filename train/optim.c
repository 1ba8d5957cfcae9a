#include "train/optim.h"

#include <math.h>
#include <stdlib.h>

/* ZeRO shards the flat buffer into dp equal parts: the padding is its own. */
static bool shards_state(int dp, bool zero) { return zero && dp > 1; }

size_t optim_buffer_len(size_t n_params, int dp, bool zero) {
    if (!shards_state(dp, zero)) return n_params;
    return (n_params + (size_t)dp - 1) / (size_t)dp * (size_t)dp;
}

gpt_budget optim_budget(const gpt_dims *d, int B, int T, int dp, bool zero, tg_dtype act, size_t workspace) {
    const size_t n_params = gpt_param_count(d), n_alloc = optim_buffer_len(n_params, dp, zero);
    gpt_budget b = gpt_budget_of(d, B, T, n_alloc, act, workspace);
    const size_t shard = shards_state(dp, zero) ? n_alloc / (size_t)dp : n_params;
    b.optim = 2 * shard * sizeof(float);
    b.total += b.optim;
    return b;
}

optim *optim_create(const tg_ops *ops, const gpt *g, comm *dp, bool zero) {
    optim *o = tg_calloc(1, sizeof *o, "optimizer");
    o->ops = ops;
    o->dp = dp;
    o->zero = shards_state(dp->size, zero);
    if (o->zero) {
        o->shard_len = g->n_alloc / (size_t)dp->size;
        o->shard_begin = (size_t)dp->rank * o->shard_len;
    } else {
        o->shard_begin = 0;
        o->shard_len = g->n_params;
    }
    o->m = ops->alloc(ops, o->shard_len * sizeof(float), "AdamW first moments");
    o->v = ops->alloc(ops, o->shard_len * sizeof(float), "AdamW second moments");
    ops->zero(ops, o->m, o->shard_len * sizeof(float));
    ops->zero(ops, o->v, o->shard_len * sizeof(float));
    return o;
}

void optim_free(optim *o) {
    if (!o) return;
    o->ops->free(o->ops, o->m);
    o->ops->free(o->ops, o->v);
    free(o);
}

size_t optim_allocated_bytes(const optim *o) { return 2 * o->shard_len * sizeof(float); }

double optim_lr(const tg_config *c, int step) {
    const int i = step - 1, warmup = c->train.warmup, steps = c->train.steps;
    const double lr = c->train.lr, min_lr = c->train.min_lr;
    if (i < warmup) return lr * (i + 1) / warmup;
    if (steps <= warmup) return min_lr;
    double progress = (double)(i - warmup) / (steps - warmup);
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + cos(M_PI * progress));
}

/* Sums the gradients over DP (all-reduce, or reduce-scatter under ZeRO). */
static int reduce_grads(optim *o, gpt *g, tg_err *e) {
    if (o->dp->size == 1) return 0;
    if (!o->zero) return comm_all_reduce(o->dp, g->grads, g->n_params, REDUCE_SUM, e);
    /* In place: this rank's shard of the summed gradients lands where its
     * own gradients of the shard were. */
    return comm_reduce_scatter(o->dp, g->grads + o->shard_begin, g->grads, o->shard_len, e);
}

/* The (reduced) gradients of this rank's shard. */
static float *shard_grads(const optim *o, const gpt *g) { return g->grads + o->shard_begin; }

/* Calls fn on the part of each tensor that falls inside this rank's shard. */
typedef void (*span_fn)(const optim *o, const gpt *g, const gpt_tensor *t, size_t begin, size_t len, void *ctx);
static void for_each_span(const optim *o, const gpt *g, span_fn fn, void *ctx) {
    const size_t lo = o->shard_begin, hi = o->shard_begin + o->shard_len;
    for (int i = 0; i < g->n_tensors; i++) {
        const gpt_tensor *t = &g->tensors[i];
        size_t b = t->offset > lo ? t->offset : lo, end = t->offset + t->numel < hi ? t->offset + t->numel : hi;
        if (b < end) fn(o, g, t, b - lo, end - b, ctx);
    }
}

static void add_sumsq(const optim *o, const gpt *g, const gpt_tensor *t, size_t begin, size_t len, void *ctx) {
    /* A replicated tensor is the same on every TP rank: count it on one. */
    if (gpt_is_replicated(t) && g->d.tp_rank != 0) return;
    *(double *)ctx += o->ops->sum_squares(o->ops, shard_grads(o, g) + begin, len);
}

/* Global gradient norm before clipping: every parameter counted once
 * across TP and DP. After reduce_grads. */
static int grad_norm(const optim *o, const gpt *g, double *norm, tg_err *e) {
    double local = 0.0;
    for_each_span(o, g, add_sumsq, &local);
    float sum = (float)local;
    if (comm_all_reduce(g->tp, &sum, 1, REDUCE_SUM, e)) return -1;
    if (o->zero && comm_all_reduce(o->dp, &sum, 1, REDUCE_SUM, e)) return -1;
    *norm = sqrt(g->tp->size == 1 && !o->zero ? local : (double)sum);
    return 0;
}

typedef struct {
    float lr, beta1, beta2, eps, weight_decay, bc1, bc2;
} adamw_args;

static void adamw_span(const optim *o, const gpt *g, const gpt_tensor *t, size_t begin, size_t len, void *ctx) {
    const adamw_args *a = ctx;
    const size_t at = o->shard_begin + begin;
    void *work = (char *)g->params + at * tg_dtype_bytes(o->ops->act);
    o->ops->adamw(o->ops, g->master + at, work, shard_grads(o, g) + begin, o->m + begin, o->v + begin, len, a->lr,
                  a->beta1, a->beta2, a->eps, t->decay ? a->weight_decay : 0.0f, a->bc1, a->bc2);
}

/* Clipping, AdamW and (ZeRO) the gather of the updated parameters. */
static int apply(optim *o, gpt *g, const tg_config *c, int step, double lr, double norm, tg_err *e) {
    const double clip = c->train.grad_clip;
    if (clip > 0.0) {
        /* torch: coef = max_norm / (norm + 1e-6), clamped to at most 1. */
        double coef = clip / (norm + 1e-6);
        if (coef < 1.0) o->ops->scale(o->ops, shard_grads(o, g), (float)coef, o->shard_len);
    }
    const double b1 = c->train.beta1, b2 = c->train.beta2;
    adamw_args a = {(float)lr, (float)b1, (float)b2, (float)c->train.eps, (float)c->train.weight_decay,
                    (float)(1.0 - pow(b1, step)), (float)(1.0 - pow(b2, step))};
    for_each_span(o, g, adamw_span, &a);
    if (!o->zero) return 0;
    /* Every DP rank gets every shard's new master weights (in place), and
     * makes its working copy from them. */
    if (comm_all_gather(o->dp, g->master, g->master + o->shard_begin, o->shard_len, e)) return -1;
    gpt_sync_working_weights(g);
    return 0;
}

int optim_update(optim *o, gpt *g, const tg_config *c, int step, float loss, optim_report *r, tg_err *e) {
    r->lr = optim_lr(c, step);
    r->applied = false;
    if (gpt_sync_replicated_grads(g, e) || reduce_grads(o, g, e) || grad_norm(o, g, &r->grad_norm, e)) return -1;
    /* Checked before AdamW touches anything; the norm is read anyway. */
    if (!isfinite(loss) || !isfinite(r->grad_norm)) return 0;
    r->applied = true;
    return apply(o, g, c, step, r->lr, r->grad_norm, e);
}

int optim_export(const optim *o, const gpt *g, float *m_host, float *v_host, tg_err *e) {
    if (!o->zero) {
        o->ops->download(o->ops, m_host, o->m, g->n_params * sizeof(float));
        o->ops->download(o->ops, v_host, o->v, g->n_params * sizeof(float));
        return 0;
    }
    float *full = o->ops->alloc(o->ops, g->n_alloc * sizeof(float), "gathered moments");
    float *both[2] = {m_host, v_host};
    const float *mine[2] = {o->m, o->v};
    int rc = 0;
    for (int i = 0; rc == 0 && i < 2; i++) {
        rc = comm_all_gather(o->dp, full, mine[i], o->shard_len, e);
        if (rc == 0) o->ops->download(o->ops, both[i], full, g->n_params * sizeof(float));
    }
    o->ops->free(o->ops, full);
    return rc;
}

void optim_import(optim *o, const gpt *g, const float *m_host, const float *v_host) {
    /* The last shard may run past n_params into the padding, which stays 0. */
    size_t n = o->shard_begin < g->n_params ? g->n_params - o->shard_begin : 0;
    n = n < o->shard_len ? n : o->shard_len;
    o->ops->zero(o->ops, o->m, o->shard_len * sizeof(float));
    o->ops->zero(o->ops, o->v, o->shard_len * sizeof(float));
    o->ops->upload(o->ops, o->m, m_host + o->shard_begin, n * sizeof(float));
    o->ops->upload(o->ops, o->v, v_host + o->shard_begin, n * sizeof(float));
}
