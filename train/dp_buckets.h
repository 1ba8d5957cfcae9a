/* The data-parallel gradient reduction in buckets that start during the
 * last micro-batch's backward pass, as soon as their layers' gradients are
 * final (gpt_grad_hook), so that the reduction overlaps the layers still to
 * run on devices whose collectives have their own stream (NCCL). A bucket
 * is whole layers, about parallel.dp_bucket_mb of gradients (at least one
 * layer), counted from the top: [L-n, L), [L-2n, L-n), ..., the lowest
 * maybe shorter (dp_bucket_lowest). It reduces one region per parameter kind (the kind's tensors of
 * the bucket's layers, contiguous: gpt_kind_range); the embeddings and the
 * final LayerNorm go last, a region each. Without ZeRO a region is
 * all-reduced; under ZeRO it is reduce-scattered, each rank keeping its
 * 1/dp of it (train/zero_shards.h: the regions are ZeRO's shards). A
 * bucket's collectives go out as one group (comm_group_begin: one NCCL
 * launch), and dp_buckets_start_all's, every bucket at once, as one. Sums
 * are elementwise, so the result is the single all-reduce's. */
#ifndef TRAIN_DP_BUCKETS_H
#define TRAIN_DP_BUCKETS_H

#include <stdbool.h>

#include "model/gpt.h"

typedef struct dp_buckets {
    comm *dp;
    bool zero;         /* reduce-scatter the regions, else all-reduce them */
    int layers_per_bucket;
    int pending_hi;    /* layers [l, pending_hi) are final and not yet started */
    comm_req **reqs;   /* started this step, in order */
    int n_reqs, cap_reqs;
    /* This step's buckets, for the projection's model of the overlap: the
     * share of the backward pass done when each started, and its modeled
     * seconds (the communicator's modeled_seconds it added). */
    double *ready_at, *modeled_s;
    int n_buckets, cap_buckets;
    int layers;        /* of the model: a bucket starting after layer l is (L - l) / L into the pass */
} dp_buckets;

/* Layers per bucket for about bucket_mb MiB of g's gradients: at least 1,
 * at most the model's (all of them when bucket_mb is 0). */
int dp_bucket_layers(const gpt *g, double bucket_mb);
/* Layers in the lowest bucket, [0, that): L mod n, or n. */
static inline int dp_bucket_lowest(int L, int layers_per_bucket) {
    return L % layers_per_bucket ? L % layers_per_bucket : layers_per_bucket;
}

/* Buckets of layers_per_bucket layers of g's gradients over dp. */
void dp_buckets_init(dp_buckets *b, comm *dp, const gpt *g, int layers_per_bucket, bool zero);
void dp_buckets_free(dp_buckets *b);
/* The hook for the backward pass that ends the step's micro-batches (it
 * starts the buckets); resets the step's state. */
gpt_grad_hook dp_buckets_hook(dp_buckets *b, const gpt *g);
/* Starts every bucket now, in the hook's order, as one group (after the
 * backward pass). */
int dp_buckets_start_all(dp_buckets *b, gpt *g, tg_err *e);
/* Whether this step started its reduction. */
bool dp_buckets_started(const dp_buckets *b);
/* Waits for every bucket started this step, in order. */
int dp_buckets_wait(dp_buckets *b, tg_err *e);

/* The model of the overlap for projected runs: this step's modeled DP
 * seconds hidden behind a backward pass of backward_s seconds, bucket i
 * ready at ready_at[i] * backward_s (comm_overlap_hidden_s); 0 when no
 * bucket started. */
double dp_buckets_hidden_s(const dp_buckets *b, double backward_s);

#endif
