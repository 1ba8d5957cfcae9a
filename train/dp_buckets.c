#include "train/dp_buckets.h"

#include <stdlib.h>

/* Bytes of gradients one layer holds (float32, alignment gaps included). */
static double layer_bytes(const gpt *g) {
    double bytes = 0;
    for (int k = 0; k < P_KINDS; k++) {
        if (!gpt_kind_per_layer((param_kind)k)) continue;
        size_t off, n;
        gpt_kind_range(g, (param_kind)k, 0, 1, &off, &n);
        bytes += (double)n * sizeof(float);
    }
    return bytes;
}

int dp_bucket_layers(const gpt *g, double bucket_mb) {
    const double per_layer = layer_bytes(g);
    const double layers = bucket_mb > 0 && per_layer > 0 ? bucket_mb * 1048576.0 / per_layer : g->d.L;
    return layers < 1 ? 1 : layers > g->d.L ? g->d.L : (int)layers;
}

void dp_buckets_init(dp_buckets *b, comm *dp, const gpt *g, int layers_per_bucket, bool zero) {
    *b = (dp_buckets){dp, zero, layers_per_bucket, 0, NULL, 0, 0, NULL, NULL, 0, 0, g->d.L};
}

void dp_buckets_free(dp_buckets *b) {
    free(b->reqs);
    free(b->ready_at);
    free(b->modeled_s);
    b->reqs = NULL;
    b->ready_at = b->modeled_s = NULL;
}

/* Notes a bucket: ready after `done` of the pass, `seconds` modeled. */
static void note_bucket(dp_buckets *b, double done, double seconds) {
    if (b->n_buckets == b->cap_buckets) {
        b->cap_buckets = b->cap_buckets ? 2 * b->cap_buckets : 16;
        b->ready_at = tg_realloc(b->ready_at, (size_t)b->cap_buckets * sizeof *b->ready_at, "gradient buckets");
        b->modeled_s = tg_realloc(b->modeled_s, (size_t)b->cap_buckets * sizeof *b->modeled_s, "gradient buckets");
    }
    b->ready_at[b->n_buckets] = done;
    b->modeled_s[b->n_buckets++] = seconds;
}

/* Starts the reduction of the region of n floats at buf. */
static int start(dp_buckets *b, float *buf, size_t n, tg_err *e) {
    if (b->n_reqs == b->cap_reqs) {
        b->cap_reqs = b->cap_reqs ? 2 * b->cap_reqs : 64;
        b->reqs = tg_realloc(b->reqs, (size_t)b->cap_reqs * sizeof *b->reqs, "gradient buckets");
    }
    comm_req *r;
    if (b->zero) { /* in place: this rank's 1/dp of the sum lands where its own part was */
        const size_t part = n / (size_t)b->dp->size;
        r = comm_reduce_scatter_start(b->dp, buf + (size_t)b->dp->rank * part, buf, part, TG_F32, e);
    } else {
        r = comm_all_reduce_start(b->dp, buf, n, TG_F32, REDUCE_SUM, e);
    }
    if (!r) return -1;
    b->reqs[b->n_reqs++] = r;
    return 0;
}

/* Starts, per kind, the reduction of layers [lo, hi) (per-layer kinds) or
 * of the whole tensor (the others, when `globals`). */
static int start_kinds(dp_buckets *b, gpt *g, int lo, int hi, bool globals, tg_err *e) {
    for (int k = 0; k < P_KINDS; k++) {
        if (gpt_kind_per_layer((param_kind)k) == globals) continue;
        size_t off, n;
        gpt_kind_range(g, (param_kind)k, lo, hi, &off, &n);
        if (start(b, g->grads + off, n, e)) return -1;
    }
    return 0;
}

/* Whether layer l's gradients (-1: the rest) complete a bucket: l is its
 * bucket's lowest layer. */
static bool completes_bucket(const dp_buckets *b, int layer) {
    return layer <= 0 || (b->layers - layer) % b->layers_per_bucket == 0;
}

/* Starts the bucket that layer l (-1: the rest) completes; `done` is the
 * share of the backward pass behind it. */
static int bucket_ready(dp_buckets *b, gpt *g, int layer, double done, tg_err *e) {
    const double modeled0 = b->dp->modeled_seconds;
    int rc;
    if (layer < 0) {
        rc = start_kinds(b, g, 0, 0, true, e);
    } else {
        const int hi = b->pending_hi;
        b->pending_hi = layer;
        rc = start_kinds(b, g, layer, hi, false, e);
    }
    note_bucket(b, done, b->dp->modeled_seconds - modeled0);
    return rc;
}

/* Starts the buckets that layers hi down to lo complete, as one group of
 * collectives (comm_group_begin: under NCCL one launch rather than one per
 * region); `done` as for bucket_ready. */
static int start_grouped(dp_buckets *b, gpt *g, int hi, int lo, double done, tg_err *e) {
    if (comm_group_begin(b->dp, e)) return -1;
    int rc = 0;
    for (int l = hi; l >= lo && rc == 0; l--)
        if (completes_bucket(b, l)) rc = bucket_ready(b, g, l, done, e);
    tg_err later; /* the group is closed after a failure too; the first failure is told */
    if (comm_group_end(b->dp, rc ? &later : e)) rc = -1;
    return rc;
}

/* gpt_grad_hook */
static int layer_ready(void *ctx, gpt *g, int layer, tg_err *e) {
    dp_buckets *b = ctx;
    if (!completes_bucket(b, layer)) return 0;
    return start_grouped(b, g, layer, layer, layer < 0 ? 1.0 : (double)(b->layers - layer) / b->layers, e);
}

static void reset_step(dp_buckets *b, const gpt *g) {
    b->pending_hi = g->d.L;
    b->n_reqs = 0;
    b->n_buckets = 0;
}

gpt_grad_hook dp_buckets_hook(dp_buckets *b, const gpt *g) {
    reset_step(b, g);
    return (gpt_grad_hook){layer_ready, b};
}

int dp_buckets_start_all(dp_buckets *b, gpt *g, tg_err *e) {
    reset_step(b, g);
    return start_grouped(b, g, g->d.L - 1, -1, 1.0, e); /* the backward pass is over: every bucket is ready at its end */
}

bool dp_buckets_started(const dp_buckets *b) { return b->n_reqs > 0; }

int dp_buckets_wait(dp_buckets *b, tg_err *e) {
    int rc = 0;
    for (int i = 0; i < b->n_reqs; i++) { /* every request is waited for (and released); the first failure is told */
        tg_err later;
        if (comm_wait(b->reqs[i], rc ? &later : e)) rc = -1;
    }
    b->n_reqs = 0;
    return rc;
}

double dp_buckets_hidden_s(const dp_buckets *b, double backward_s) {
    double ready_s[b->n_buckets > 0 ? b->n_buckets : 1];
    for (int i = 0; i < b->n_buckets; i++) ready_s[i] = b->ready_at[i] * backward_s;
    return comm_overlap_hidden_s(ready_s, b->modeled_s, b->n_buckets, backward_s);
}
