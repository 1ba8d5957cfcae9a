/* One global batch on one rank: its DP share of the window, uploaded once,
 * micro-batch by micro-batch through forward (and backward), the loss
 * averaged over DP, and for a training step the optimizer's update, its ops
 * launched one by one or replayed as one CUDA graph. The trainer and the
 * planner's dry run (train/plan.c) both go through here, so --plan counts
 * exactly the collectives a step issues. */
#ifndef TRAIN_BATCH_H
#define TRAIN_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "model/gpt.h"
#include "train/config.h"
#include "train/optim.h"

/* The training step as a CUDA graph (train.cuda_graph): the first step runs
 * its ops (building cuBLASLt plans and anything made on first use), the
 * second is captured and launched, every later one is launched again. */
typedef struct step_graph {
    bool usable;   /* batch_graph_usable */
    bool warm;     /* a step has run its ops */
    bool captured; /* the backend holds the step's graph */
} step_graph;

typedef struct batch_io {
    gpt *model;
    optim *opt;
    comm *dp;
    const tg_config *cfg;
    const int32_t *window; /* global_batch * seq_len + 1 tokens (host) */
    int32_t *share;        /* backend memory for this rank's share of it: batch_share_len int32 */
    step_graph *graph;     /* NULL: never a graph */
} batch_io;

/* Tokens of DP rank's share of a window: its global_batch / dp sequences
 * and the one target after them. */
size_t batch_share_len(const tg_config *c, int dp_size);
/* Adds the share's bytes to a rank's budget (b->tokens and b->total). */
void batch_budget_share(gpt_budget *b, const tg_config *c, int dp_size);

/* Whether training steps can be one CUDA graph: train.cuda_graph, a backend
 * with graphs (CUDA, without the per-op timer), and TP and DP communicators
 * whose collectives a graph can hold (comm_capturable: NCCL, or one
 * process; not shm, whose collectives run on the host). Dropout is no
 * obstacle: its kernels read the step from the device (tg_dropout.step), as
 * AdamW reads its learning rate. */
bool batch_graph_usable(const tg_config *c, const tg_ops *ops, const comm *tp, const comm *dp);

/* Mean loss of the window, left on the device in model->stats->loss;
 * accumulates gradients when `train` is set (with dropout, masks keyed by
 * the step in model->stats->in: optim_begin_step first). Nothing waits on
 * the device. DP rank d takes sequences [d*G/dp, (d+1)*G/dp). */
int batch_loss(const batch_io *io, bool train, tg_err *e);

/* batch_loss without training, and its mean read back (one wait). */
int batch_eval_loss(const batch_io *io, float *mean, tg_err *e);

/* A training step on the window: batch_loss (its first micro-batch writes
 * the gradients, the others add to them), then the optimizer (which applies nothing for a non-finite loss or norm, and
 * reports the loss and norm), as one graph when io->graph is usable. */
int batch_train_step(const batch_io *io, int step, optim_report *rep, tg_err *e);

#endif
