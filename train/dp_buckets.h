/* The data-parallel gradient all-reduce in buckets that start during the
 * last micro-batch's backward pass, as soon as their layers' gradients are
 * final (gpt_grad_hook), so that the reduction overlaps the layers still to
 * run on devices whose collectives have their own stream (NCCL). A bucket
 * is whole layers, about parallel.dp_bucket_mb of gradients (at least one
 * layer): one all-reduce per parameter kind over the bucket's layers (a
 * kind's tensors are contiguous over the layers, gpt_kind_range); the
 * embeddings and the final LayerNorm go last. Sums are elementwise, so the
 * result is the single all-reduce's. Not used under ZeRO, whose
 * reduce-scatter runs after the backward pass. */
#ifndef TRAIN_DP_BUCKETS_H
#define TRAIN_DP_BUCKETS_H

#include <stdbool.h>

#include "model/gpt.h"

typedef struct dp_buckets {
    comm *dp;
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

/* Buckets of about bucket_mb MiB of g's gradients over dp. */
void dp_buckets_init(dp_buckets *b, comm *dp, const gpt *g, double bucket_mb);
void dp_buckets_free(dp_buckets *b);
/* The hook for the backward pass that ends the step's micro-batches (it
 * starts the buckets); resets the step's state. */
gpt_grad_hook dp_buckets_hook(dp_buckets *b, const gpt *g);
/* Whether this step started its reduction during the backward pass. */
bool dp_buckets_started(const dp_buckets *b);
/* Waits for every bucket started this step, in order. */
int dp_buckets_wait(dp_buckets *b, tg_err *e);

/* The model of the overlap for projected runs: this step's modeled DP
 * seconds hidden behind a backward pass of backward_s seconds, bucket i
 * ready at ready_at[i] * backward_s (comm_overlap_hidden_s); 0 when no
 * bucket started. */
double dp_buckets_hidden_s(const dp_buckets *b, double backward_s);

#endif
