/* ZeRO-1's partition of the flat parameter buffers over the DP ranks. The
 * buffer is cut into regions, in flat order: a per-layer parameter kind's
 * tensors over one bucket of layers (train/dp_buckets.h), or a whole-model
 * tensor. Every region is cut into dp equal chunks, chunk r belonging to DP
 * rank r, so that a bucket's reduce-scatter can start as soon as its layers'
 * gradients are final: a rank's shard is one chunk of every region, not one
 * contiguous stretch. The model's layout makes every stride a multiple of
 * dp elements (gpt_dims.param_align), so the chunks are equal without
 * padding. A rank keeps the AdamW moments of its chunks packed, in the
 * regions' order. */
#ifndef TRAIN_ZERO_SHARDS_H
#define TRAIN_ZERO_SHARDS_H

#include "model/gpt.h"

typedef struct zero_region {
    size_t begin, len; /* floats of the flat buffer; len is a multiple of dp */
} zero_region;

typedef struct zero_shards {
    int dp, rank;
    int layers;                    /* of the model */
    int layers_per_bucket, lowest; /* the buckets' sizes (dp_bucket_layers, dp_bucket_lowest) */
    zero_region *regions;
    int n_regions;
    size_t shard_len;              /* floats of one rank's chunks: the buffer's length / dp */
    comm_req **gather_reqs;        /* n_regions: the all-gather's requests in flight (kept, not made every step) */
    int *region_stage;             /* n_regions: when the forward pass needs it (zero_shards_stage_of) */
    int n_stages;                  /* 1 (the whole-model tensors) + the buckets */
    int stages_started, stages_done; /* the staged gather's progress (zero_shards_gather_begin) */
    double *stage_modeled_s;       /* n_stages: the last begin's modeled seconds per stage (comm_null with a link) */
} zero_shards;

/* The regions of g's buffers for buckets of layers_per_bucket layers.
 * g's layout must have been made with param_align a multiple of dp. */
void zero_shards_init(zero_shards *z, const gpt *g, int dp, int rank, int layers_per_bucket);
void zero_shards_free(zero_shards *z);

/* The spans (kernels/ops.h) of this rank's chunks of the kind of tensor t
 * (its first: layer 0, or the whole-model tensor), into out: at most
 * ZERO_SPANS_PER_KIND of them; returns how many. */
#define ZERO_SPANS_PER_KIND 2
int zero_shards_kind_spans(const zero_shards *z, const gpt *g, const gpt_tensor *t, tg_span *out);

/* Every rank's chunk of every region of buf (elements of type t), in place
 * (after AdamW: the updated weights). A collective over dp: one all-gather
 * per region, all in one group (comm_group_begin), then waited for. */
int zero_shards_all_gather(zero_shards *z, comm *dp, void *buf, tg_dtype t, tg_err *e);

/* The gather in stages, in the order the forward pass reads the weights,
 * so that it can overlap that pass (as Megatron's overlap_param_gather):
 * stage 0 the whole-model tensors (embeddings, final LayerNorm), then one
 * stage per bucket, lowest layers first. begin starts every stage, each as
 * its own group, without waiting; wait_stage(s) waits for the stages up to
 * s (under deferred waits: orders the compute stream after them);
 * wait_stage(n_stages - 1) completes the gather. A collective over dp. */
int zero_shards_stage_of(const zero_shards *z, int layer); /* layer -1: the whole-model tensors */
int zero_shards_gather_begin(zero_shards *z, comm *dp, void *buf, tg_dtype t, tg_err *e);
int zero_shards_gather_wait_stage(zero_shards *z, int stage, tg_err *e);
/* The model of the overlap for projected runs: the seconds of the last
 * begun gather (its stages' modeled seconds) hidden behind a forward pass of
 * forward_s seconds, which needs stages 0 and 1 at its start and stage s > 1
 * when it reaches that bucket's lowest layer (a pass taken as even over the
 * layers): comm_prefetch_hidden_s. */
double zero_shards_gather_hidden_s(const zero_shards *z, double forward_s);
/* Whether a staged gather was begun and not yet completed. */
static inline bool zero_shards_gathering(const zero_shards *z) { return z->stages_done < z->stages_started; }

/* Optimizer state between a rank's packed chunks and the buffer's layout:
 * unpack takes every rank's packed chunks back to back (rank r's at
 * r * shard_len, as an all-gather leaves them) into full (host memory);
 * pack takes this rank's chunks out of full into mine, both in the memory
 * mem copies (COMM_HOST_MEMORY, or a backend's ops->mem). */
void zero_shards_unpack(const zero_shards *z, const float *gathered, float *full);
void zero_shards_pack(const zero_shards *z, const comm_memory *mem, const float *full, float *mine);

#endif
