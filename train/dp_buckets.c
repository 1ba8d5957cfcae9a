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

void dp_buckets_init(dp_buckets *b, comm *dp, const gpt *g, double bucket_mb) {
    *b = (dp_buckets){dp, 0, 0, NULL, 0, 0};
    const double per_layer = layer_bytes(g);
    const double layers = per_layer > 0 ? bucket_mb * 1048576.0 / per_layer : 0;
    b->layers_per_bucket = layers < 1 ? 1 : layers > g->d.L ? g->d.L : (int)layers;
}

void dp_buckets_free(dp_buckets *b) {
    free(b->reqs);
    b->reqs = NULL;
}

static int start(dp_buckets *b, float *buf, size_t n, tg_err *e) {
    if (b->n_reqs == b->cap_reqs) {
        b->cap_reqs = b->cap_reqs ? 2 * b->cap_reqs : 64;
        b->reqs = tg_realloc(b->reqs, (size_t)b->cap_reqs * sizeof *b->reqs, "gradient buckets");
    }
    comm_req *r = comm_all_reduce_start(b->dp, buf, n, TG_F32, REDUCE_SUM, e);
    if (!r) return -1;
    b->reqs[b->n_reqs++] = r;
    return 0;
}

/* Starts, per kind, the all-reduce of layers [lo, hi) (per-layer kinds) or
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

/* gpt_grad_hook: layer l's gradients are final (-1: the rest). */
static int layer_ready(void *ctx, gpt *g, int layer, tg_err *e) {
    dp_buckets *b = ctx;
    if (layer < 0) return start_kinds(b, g, 0, 0, true, e);
    if (b->pending_hi - layer < b->layers_per_bucket && layer > 0) return 0;
    const int hi = b->pending_hi;
    b->pending_hi = layer;
    return start_kinds(b, g, layer, hi, false, e);
}

gpt_grad_hook dp_buckets_hook(dp_buckets *b, const gpt *g) {
    b->pending_hi = g->d.L;
    b->n_reqs = 0;
    return (gpt_grad_hook){layer_ready, b};
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
