#include "train/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ZeRO shards the flat buffer over dp ranks: with one rank it is plain DP. */
static bool shards_state(int dp, bool zero) { return zero && dp > 1; }

void optim_shape_dims(gpt_dims *d, int dp, bool zero) {
    d->param_align = shards_state(dp, zero) ? dp : 0;
    d->master_in_optim = shards_state(dp, zero);
}

gpt_budget optim_budget(const gpt_dims *d, int B, int T, int dp, bool zero, tg_dtype act, size_t workspace) {
    gpt_dims shaped = *d;
    optim_shape_dims(&shaped, dp, zero);
    const size_t n_alloc = gpt_param_count(&shaped);
    gpt_budget b = gpt_budget_of(&shaped, B, T, n_alloc, act, workspace);
    const size_t shard = shards_state(dp, zero) ? n_alloc / (size_t)dp : n_alloc;
    const bool keeps_master = shaped.master_in_optim && act != TG_F32; /* float32: the working weights are the master */
    b.optim = (keeps_master ? 3 : 2) * shard * sizeof(float);
    b.total += b.optim;
    return b;
}

/* One span per parameter kind (its tensors over the layers, as stored), or
 * under ZeRO those of this rank's chunks of the kind. For the norm
 * (`counted`), a replicated tensor is the same on every TP rank and counts
 * on rank 0 only. */
static void build_spans(const optim *o, const gpt *g, bool counted, tg_spans *s) {
    s->n = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        const gpt_tensor *t = &g->tensors[i];
        if (t->layer > 0) continue; /* the kind's first tensor describes the span */
        if (counted && gpt_is_replicated(t) && g->d.tp_rank != 0) continue;
        if (o->zero) {
            s->n += zero_shards_kind_spans(&o->shards, g, t, &s->span[s->n]);
        } else {
            const int count = t->layer < 0 ? 1 : g->d.L;
            s->span[s->n++] = (tg_span){t->offset, g->kind_size[t->kind], t->numel, count, t->decay, tg_window_whole()};
        }
    }
}

optim *optim_create(const tg_ops *ops, const gpt *g, comm *dp, bool zero, double dp_bucket_mb) {
    _Static_assert(P_KINDS * ZERO_SPANS_PER_KIND <= TG_MAX_SPANS, "the spans of ZeRO's chunks fit a tg_spans");
    optim *o = tg_calloc(1, sizeof *o, "optimizer");
    o->ops = ops;
    o->dp = dp;
    o->zero = shards_state(dp->size, zero);
    o->overlap = dp->size > 1 && dp_bucket_mb > 0;
    const int layers = dp_bucket_layers(g, o->overlap ? dp_bucket_mb : 0);
    dp_buckets_init(&o->buckets, dp, g, layers, o->zero);
    if (o->zero) zero_shards_init(&o->shards, g, dp->size, dp->rank, layers);
    o->defer_gather = o->zero && o->overlap && !comm_is_null(dp);
    o->moments_len = o->zero ? o->shards.shard_len : g->n_params;
    build_spans(o, g, false, &o->all);
    build_spans(o, g, true, &o->counted);
    o->m = ops->alloc(ops, o->moments_len * sizeof(float), "AdamW first moments");
    o->v = ops->alloc(ops, o->moments_len * sizeof(float), "AdamW second moments");
    ops->zero(ops, o->m, o->moments_len * sizeof(float));
    ops->zero(ops, o->v, o->moments_len * sizeof(float));
    /* optim_export gathers every rank's chunks into the gradient buffer. */
    const bool fits = !o->zero || o->moments_len * (size_t)dp->size <= g->n_alloc;
    if (!fits || (!g->master && !o->zero)) { /* optim_shape_dims was skipped */
        fprintf(stderr, "internal error: the model's buffers are not shaped for this optimizer (optim_shape_dims)\n");
        abort();
    }
    if (!g->master) {
        o->master = ops->alloc(ops, o->moments_len * sizeof(float), "parameters (float32 master, this rank's chunks)");
        ops->zero(ops, o->master, o->moments_len * sizeof(float));
    }
    return o;
}

void optim_free(optim *o) {
    if (!o) return;
    dp_buckets_free(&o->buckets);
    if (o->zero) zero_shards_free(&o->shards);
    o->ops->free(o->ops, o->m);
    o->ops->free(o->ops, o->v);
    if (o->master) o->ops->free(o->ops, o->master);
    free(o);
}

size_t optim_allocated_bytes(const optim *o) { return (o->master ? 3 : 2) * o->moments_len * sizeof(float); }

/* The first step index of wsd's decay: round(wsd_decay_frac x steps) steps
 * before the end, and never inside the warm-up. */
static int wsd_decay_start(const tg_config *c) {
    const int steps = c->train.steps, decay = (int)floor(c->train.wsd_decay_frac * steps + 0.5);
    return steps - decay > c->train.warmup ? steps - decay : c->train.warmup;
}

double optim_lr(const tg_config *c, int step) {
    const int i = step - 1, warmup = c->train.warmup, steps = c->train.steps;
    const double lr = c->train.lr, min_lr = c->train.min_lr;
    const char *schedule = c->train.lr_schedule;
    if (i < warmup) return lr * (i + 1) / warmup;
    if (strcmp(schedule, "constant") == 0) return lr;
    if (strcmp(schedule, "wsd") == 0) {
        const int start = wsd_decay_start(c);
        if (i < start || start >= steps) return lr;
        return min_lr + (lr - min_lr) * (1.0 - sqrt((double)(i - start) / (steps - start)));
    }
    if (steps <= warmup) return min_lr;
    const double progress = (double)(i - warmup) / (steps - warmup);
    if (strcmp(schedule, "linear") == 0) return min_lr + (lr - min_lr) * (1.0 - progress);
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + cos(M_PI * progress));
}

const gpt_grad_hook *optim_backward_hook(optim *o, const gpt *g) {
    if (!o->overlap) return NULL;
    o->hook = dp_buckets_hook(&o->buckets, g);
    return &o->hook;
}

/* Sums the gradients over DP: the buckets started during the backward pass,
 * else one all-reduce, or ZeRO's reduce-scatters now. */
static int reduce_grads(optim *o, gpt *g, tg_err *e) {
    if (o->dp->size == 1) return 0;
    if (!dp_buckets_started(&o->buckets)) {
        if (!o->zero) return comm_all_reduce(o->dp, g->grads, g->n_params, REDUCE_SUM, e);
        if (dp_buckets_start_all(&o->buckets, g, e)) return -1;
    }
    return dp_buckets_wait(&o->buckets, e);
}

/* The global gradient norm before clipping, every parameter counted once
 * across TP and DP, and from it the clip factor: all on the device, into
 * g->stats. After reduce_grads. */
static int grad_norm(const optim *o, const gpt *g, double max_norm, tg_err *e) {
    const tg_ops *ops = o->ops;
    tg_step_stats *st = g->stats;
    /* One rank holding every gradient keeps its double sum; split among
     * ranks, the sum is exact (kernels/exact_sumsq.h): its pieces are float
     * sums of small integers, exact in any order, so the norm does not
     * depend on which rank holds which gradients (ZeRO's shards follow the
     * buckets). */
    const int reduced = g->tp->size > 1 || o->zero;
    ops->grad_sumsq(ops, st, g->grads, &o->counted, reduced);
    if (reduced && comm_all_reduce(g->tp, st->sumsq_pieces, EXACT_SUMSQ_PIECES, REDUCE_SUM, e)) return -1;
    if (o->zero && comm_all_reduce(o->dp, st->sumsq_pieces, EXACT_SUMSQ_PIECES, REDUCE_SUM, e)) return -1;
    ops->grad_clip_factor(ops, st, reduced, max_norm);
    return 0;
}

/* AdamW (which applies nothing unless loss and norm were finite) and, under
 * ZeRO, the gather of the updated parameters. */
static int apply(optim *o, gpt *g, const tg_config *c, tg_err *e) {
    const tg_adamw_args a = {(float)c->train.beta1, (float)c->train.beta2, (float)c->train.eps, (float)c->train.weight_decay};
    /* AdamW writes this rank's chunks, which a gather under way still reads */
    if (zero_shards_gathering(&o->shards) && optim_weights_current(o, g, e)) return -1;
    o->ops->adamw(o->ops, o->master ? o->master : g->master, g->params, g->grads, o->m, o->v, &o->all, &a, g->stats);
    if (!o->zero) return 0;
    if (o->defer_gather) {
        o->gather_due = true;
        return 0;
    }
    /* Every DP rank gets every rank's chunks of the working weights, in
     * their own type (bf16 halves the bytes of float32, as Megatron's
     * distributed optimizer gathers its bf16 parameters; in float32 they are
     * the master weights). */
    if (!o->overlap) return zero_shards_all_gather(&o->shards, o->dp, g->params, g->ops->act, e);
    /* A comm_null standing in for DP (a projection): the staged gather a
     * real group runs beside the next forward pass, now, so that the stages'
     * modeled seconds are known (optim_hidden_modeled). */
    o->gather_due = true;
    return optim_weights_current(o, g, e);
}

optim_hidden optim_hidden_modeled(const optim *o, double micro_batch_s, bool full_recompute) {
    if (!o->overlap) return (optim_hidden){0, 0};
    const double backward_s = micro_batch_s * (full_recompute ? 0.75 : 2.0 / 3.0);
    return (optim_hidden){dp_buckets_hidden_s(&o->buckets, backward_s),
                          o->zero ? zero_shards_gather_hidden_s(&o->shards, micro_batch_s - backward_s) : 0};
}

void optim_take_weights(optim *o, const gpt *g) {
    o->gather_due = false; /* the weights were set whole */
    if (o->master) zero_shards_pack(&o->shards, &o->ops->mem, g->grads, o->master);
}

/* The forward hook: the gather's stages up to the one holding `layer`. */
static int weights_needed(void *ctx, int layer, tg_err *e) {
    optim *o = ctx;
    return zero_shards_gather_wait_stage(&o->shards, zero_shards_stage_of(&o->shards, layer), e);
}

int optim_weights_begin(optim *o, gpt *g, tg_err *e) {
    if (!o->gather_due) return 0;
    o->gather_due = false;
    o->weight_hook = (gpt_weight_hook){weights_needed, o};
    return zero_shards_gather_begin(&o->shards, o->dp, g->params, g->ops->act, e);
}

void optim_graph_state(optim *o) { o->gather_due = o->defer_gather; }

const gpt_weight_hook *optim_forward_hook(optim *o) {
    return o->zero && zero_shards_gathering(&o->shards) ? &o->weight_hook : NULL;
}

int optim_weights_current(optim *o, gpt *g, tg_err *e) {
    if (optim_weights_begin(o, g, e)) return -1;
    return o->zero ? zero_shards_gather_wait_stage(&o->shards, o->shards.n_stages - 1, e) : 0;
}

void optim_begin_step(optim *o, gpt *g, const tg_config *c, int step) {
    const double b1 = c->train.beta1, b2 = c->train.beta2;
    const tg_step_inputs in = {(float)optim_lr(c, step), (float)(1.0 - pow(b1, step)), (float)(1.0 - pow(b2, step)),
                               (uint64_t)step};
    o->ops->upload(o->ops, &g->stats->in, &in, sizeof in);
}

int optim_enqueue(optim *o, gpt *g, const tg_config *c, tg_err *e) {
    /* DP first, so that the TP sum never touches gradients a bucket's
     * reduction may still be using. Under ZeRO the TP sum then adds up the
     * ranks' reduced chunks (every TP rank of a DP rank holds the same
     * chunks), and garbage elsewhere, which nothing reads. */
    const int reduced = reduce_grads(o, g, e) || gpt_sync_replicated_grads(g, e);
    return reduced || grad_norm(o, g, c->train.grad_clip, e) || apply(o, g, c, e) ? -1 : 0;
}

void optim_read(optim *o, gpt *g, const tg_config *c, int step, optim_report *r) {
    /* The step's one wait: its scalars, once everything is queued. */
    tg_step_stats st;
    o->ops->download(o->ops, &st, g->stats, sizeof st);
    r->lr = optim_lr(c, step);
    r->loss = st.loss;
    r->grad_norm = st.norm;
    r->applied = st.finite != 0;
}

/* A packed state (m, v or the master) of every rank, gathered over DP into
 * g->grads (free between steps), then into host in the parameter layout. */
static int export_packed(const optim *o, gpt *g, const float *mine, float *host, tg_err *e) {
    const size_t all = o->moments_len * (size_t)o->dp->size;
    if (comm_all_gather(o->dp, g->grads, mine, o->moments_len, e)) return -1;
    float *gathered = tg_malloc(all * sizeof(float), "gathered optimizer state");
    o->ops->download(o->ops, gathered, g->grads, all * sizeof(float));
    zero_shards_unpack(&o->shards, gathered, host);
    free(gathered);
    return 0;
}

int optim_export(const optim *o, gpt *g, float *m_host, float *v_host, tg_err *e) {
    if (!o->zero) {
        o->ops->download(o->ops, m_host, o->m, g->n_params * sizeof(float));
        o->ops->download(o->ops, v_host, o->v, g->n_params * sizeof(float));
        return 0;
    }
    return export_packed(o, g, o->m, m_host, e) || export_packed(o, g, o->v, v_host, e) ? -1 : 0;
}

int optim_export_master(const optim *o, gpt *g, float *host, tg_err *e) { return export_packed(o, g, o->master, host, e); }

void optim_import(optim *o, const gpt *g, const float *m_host, const float *v_host) {
    if (!o->zero) {
        o->ops->upload(o->ops, o->m, m_host, g->n_params * sizeof(float));
        o->ops->upload(o->ops, o->v, v_host, g->n_params * sizeof(float));
        return;
    }
    float *mine = tg_malloc(o->moments_len * sizeof(float), "moments of this rank");
    zero_shards_pack(&o->shards, &COMM_HOST_MEMORY, m_host, mine);
    o->ops->upload(o->ops, o->m, mine, o->moments_len * sizeof(float));
    zero_shards_pack(&o->shards, &COMM_HOST_MEMORY, v_host, mine);
    o->ops->upload(o->ops, o->v, mine, o->moments_len * sizeof(float));
    free(mine);
}
