/* AdamW with torch semantics, global-norm clipping, the LR schedule, and the
 * data-parallel gradient reduction: all-reduce, or ZeRO-1 (reduce-scatter,
 * AdamW on this rank's shard of the flat parameter buffer, one chunk of
 * every bucket region (train/zero_shards.h), then all-gather of the
 * parameters). */
#ifndef TRAIN_OPTIM_H
#define TRAIN_OPTIM_H

#include "train/config.h"
#include "model/gpt.h"
#include "train/dp_buckets.h"
#include "train/zero_shards.h"

typedef struct optim {
    const tg_ops *ops;
    comm *dp;              /* data-parallel group (size 1: no-op) */
    bool zero;
    zero_shards shards;    /* under ZeRO: this rank's chunks */
    size_t moments_len;    /* floats of each of m and v: the shard under ZeRO, else the whole buffer */
    float *m, *v;          /* AdamW moments (backend memory): packed chunks under ZeRO */
    float *master;         /* the float32 master weights when the optimizer keeps them (ZeRO with working
                            * weights of another type: this rank's chunks, packed as the moments); else NULL,
                            * and AdamW updates the model's g->master */
    tg_spans all;          /* every parameter kind within the shard (AdamW) */
    tg_spans counted;      /* those this rank counts in the global norm */
    bool overlap;          /* the DP reduction starts in buckets during the last backward pass */
    dp_buckets buckets;    /* the DP reduction's regions (not used for one all-reduce after the pass) */
    gpt_grad_hook hook;
    /* ZeRO with buckets over a real communicator: the gather of the
     * updated weights waits for the next step, whose forward pass it
     * overlaps (optim_weights_begin), or for whatever reads the weights
     * first (optim_weights_current). A comm_null standing in for a group
     * (--plan, projections) keeps it in the step, which they measure. */
    bool defer_gather, gather_due;
    gpt_weight_hook weight_hook;
} optim;

/* Shapes the model for this optimizer, before gpt_param_count and
 * gpt_create: under ZeRO d->param_align is the DP size (so that every bucket
 * region divides evenly) and d->master_in_optim is set (the float32 master
 * weights are sharded with the moments, as Megatron's distributed optimizer
 * shards them). */
void optim_shape_dims(gpt_dims *d, int dp, bool zero);

/* The bytes one rank needs: the model's buffers (their layout as
 * optim_shape_dims makes it) plus the AdamW moments of the whole model, or
 * under ZeRO this rank's 1/dp of the moments and of a separate float32
 * master. */
gpt_budget optim_budget(const gpt_dims *d, int B, int T, int dp, bool zero, tg_dtype act, size_t workspace);

/* g's dims must have been through optim_shape_dims(..., dp->size, zero).
 * dp_bucket_mb > 0 (and DP): the DP reduction runs in buckets of about that
 * many MiB during the last backward pass (0: after it; under ZeRO still
 * region by region, in one bucket of all layers). */
optim *optim_create(const tg_ops *ops, const gpt *g, comm *dp, bool zero, double dp_bucket_mb);
/* The hook for the backward pass of a step's last micro-batch (NULL when
 * the reduction waits for the whole pass). */
const gpt_grad_hook *optim_backward_hook(optim *o, const gpt *g);
void optim_free(optim *o);

/* Bytes the optimizer allocated (the moments). */
size_t optim_allocated_bytes(const optim *o);

/* LR of 1-based step s: linear warm-up, then train.lr_schedule (cosine,
 * linear, constant or wsd) down to min_lr. */
double optim_lr(const tg_config *c, int step);

/* What a step did (optim_read). */
typedef struct optim_report {
    double lr, grad_norm; /* grad_norm before clipping: every parameter counted once across TP and DP */
    float loss;           /* the step's mean loss over the global batch */
    bool applied;         /* false: the loss or the norm was not finite and nothing changed */
} optim_report;

/* Everything after the backward passes of step `step` (1-based), in three
 * parts, in order:
 * the DP reduction (the wait for its buckets, or one all-reduce; under ZeRO
 * the buckets' reduce-scatters), then under SP the TP sum of the replicated
 * tensors' gradients (under ZeRO only this rank's chunks of that sum are
 * right, and only they are read); the global gradient
 * norm; then, only when the loss (g->stats->loss, from batch_loss) and the
 * norm are finite, clipping to train.grad_clip (as
 * torch.nn.utils.clip_grad_norm_) and AdamW on the fp32 master weights; under
 * ZeRO the all-gather of the working weights (with buckets: left due, see
 * optim_weights_begin). The decision and the clip factor
 * stay on the device; the host waits once, at the end, to read the loss and
 * norm into r. A collective over the TP and DP groups.
 * optim_begin_step uploads the step's learning rate, bias corrections and
 * number (the dropout masks' key) into g->stats->in (before any of the
 * step's work, so that the work is the same every step); optim_enqueue enqueues the reductions, the
 * norm and AdamW (and the ZeRO gather), without waiting on the device except
 * inside the collectives of multi-process groups; optim_read waits for the
 * step's end and reports. */
void optim_begin_step(optim *o, gpt *g, const tg_config *c, int step);
int optim_enqueue(optim *o, gpt *g, const tg_config *c, tg_err *e);
void optim_read(optim *o, gpt *g, const tg_config *c, int step, optim_report *r);
/* Under ZeRO with buckets (o->defer_gather) the step's AdamW leaves the gather
 * of the updated weights due instead of running it. optim_weights_begin
 * starts it in stages (train/zero_shards.h), at the start of the next
 * step, and optim_forward_hook (NULL when none is under way) waits for each
 * stage where that step's first forward pass needs it, so the gather of
 * later layers runs beside the forward of the earlier ones, as Megatron's
 * overlap_param_gather. optim_weights_current completes it now: before
 * anything else reads the weights (evaluation, samples, checkpoints). Both
 * are collectives over DP, and do nothing when no gather is due. */
int optim_weights_begin(optim *o, gpt *g, tg_err *e);
const gpt_weight_hook *optim_forward_hook(optim *o);
int optim_weights_current(optim *o, gpt *g, tg_err *e);
/* The host state a step captured as a CUDA graph (train/batch.c) starts
 * from, set before the capture and again after each launch (which runs the
 * step's work but none of its host code): under defer_gather the gather of
 * the weights is due, so that the graph holds it whatever an evaluation,
 * sample or checkpoint gathered since the last step (then gathering again
 * what is already there), and each launch leaves it due. */
void optim_graph_state(optim *o);
/* Projected runs and --plan (a comm_null with a link standing in for DP):
 * the modeled DP seconds of the last step that a real group hides behind
 * compute, given a micro-batch's compute of micro_batch_s seconds: the
 * buckets' reduction behind the last backward pass (dp_buckets_hidden_s)
 * and ZeRO's staged gather behind the next step's first forward pass
 * (zero_shards_gather_hidden_s). The passes' lengths are themselves
 * modeled: a backward pass does twice a forward's matrix work, so a
 * micro-batch is 1/3 forward and 2/3 backward (1/4 and 3/4 when full
 * recompute reruns the forward in the backward). Zeros without buckets. */
typedef struct optim_hidden {
    double dp_s, gather_s;
} optim_hidden;
optim_hidden optim_hidden_modeled(const optim *o, double micro_batch_s, bool full_recompute);
/* After the model's weights were set (gpt_set_weights: initialised or
 * loaded), takes the optimizer's master weights from them: this rank's
 * chunks of the float32 weights the model left in g->grads, when the
 * optimizer keeps the master (o->master); nothing otherwise. Before the
 * first step. */
void optim_take_weights(optim *o, const gpt *g);
/* The full moments in the parameter layout (gathered over DP under ZeRO),
 * into host buffers of g->n_params floats, for checkpoints. Under ZeRO g's
 * gradient buffer holds the gathered chunks (it is free between steps, and
 * then no extra buffer of the model's size is needed). */
int optim_export(const optim *o, gpt *g, float *m_host, float *v_host, tg_err *e);
/* The same for the float32 master weights the optimizer keeps (o->master
 * not NULL), gathered over DP. */
int optim_export_master(const optim *o, gpt *g, float *host, tg_err *e);
/* The reverse of optim_export: takes this rank's shard of full-layout host
 * moments. */
void optim_import(optim *o, const gpt *g, const float *m_host, const float *v_host);

#endif
