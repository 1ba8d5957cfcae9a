/* One global batch on one rank: its DP share of the window, micro-batch by
 * micro-batch through forward (and backward), the loss averaged over DP,
 * and for a training step the optimizer's update. The trainer and the
 * planner's dry run (train/plan.c) both go through here, so --plan counts
 * exactly the collectives a step issues. */
#ifndef TRAIN_BATCH_H
#define TRAIN_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "model/gpt.h"
#include "train/config.h"
#include "train/optim.h"

typedef struct batch_io {
    gpt *model;
    optim *opt;
    comm *dp;
    const tg_config *cfg;
    const int32_t *window;     /* global_batch * seq_len + 1 tokens */
    int32_t *inputs, *targets; /* one micro-batch: micro_batch * seq_len each */
} batch_io;

/* Mean loss of the window for step `step` (1-based; it keys the dropout
 * masks, none unless `train`), left on the device in model->stats->loss;
 * accumulates gradients when `train` is set. Nothing waits on the device.
 * DP rank d takes sequences [d*G/dp, (d+1)*G/dp). */
int batch_loss(const batch_io *io, int step, bool train, tg_err *e);

/* batch_loss without training, and its mean read back (one wait). */
int batch_eval_loss(const batch_io *io, int step, float *mean, tg_err *e);

/* A training step on the window: zeroed gradients, batch_loss, then
 * optim_update (which applies nothing for a non-finite loss or norm, and
 * reports the loss and norm). */
int batch_train_step(const batch_io *io, int step, optim_report *rep, tg_err *e);

#endif
