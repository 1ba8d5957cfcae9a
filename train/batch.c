#include "train/batch.h"

#include <string.h>

/* Sequences [first, first + B) of the window as inputs and shifted targets. */
static void slice_micro_batch(const batch_io *io, int first) {
    const int B = io->cfg->train.micro_batch, T = io->cfg->model.seq_len;
    for (int k = 0; k < B; k++) {
        const int32_t *src = io->window + (size_t)(first + k) * T;
        memcpy(io->inputs + (size_t)k * T, src, (size_t)T * sizeof(int32_t));
        memcpy(io->targets + (size_t)k * T, src + 1, (size_t)T * sizeof(int32_t));
    }
}

int batch_loss(const batch_io *io, int step, bool train, tg_err *e) {
    const tg_config *c = io->cfg;
    const int B = c->train.micro_batch, T = c->model.seq_len, accum = config_grad_accum(c);
    const int first = io->dp->rank * (c->train.global_batch / io->dp->size);
    const float dloss = 1.0f / ((float)c->train.global_batch * T);
    for (int m = 0; m < accum; m++) {
        slice_micro_batch(io, first + m * B);
        /* Masks keyed by the step and the micro-batch's place in the global
         * batch; no dropout when evaluating. */
        gpt_set_dropout(io->model, train ? (float)c->model.dropout : 0.0f, (uint64_t)c->train.seed, (uint64_t)step,
                        (uint64_t)(first + m * B) * (uint64_t)T);
        if (gpt_forward(io->model, io->inputs, io->targets, B, T, dloss, e)) return -1;
        /* The last micro-batch's backward starts the DP reduction as it goes. */
        const gpt_grad_hook *hook = train && m == accum - 1 ? optim_backward_hook(io->opt, io->model) : NULL;
        if (train && gpt_backward(io->model, hook, e)) return -1;
    }
    /* On the device: the mean over micro-batches, this rank's DP share, summed over DP. */
    const tg_ops *ops = io->model->ops;
    ops->loss_finish(ops, io->model->stats, accum, (float)io->dp->size);
    return comm_all_reduce(io->dp, &io->model->stats->loss, 1, REDUCE_SUM, e);
}

int batch_eval_loss(const batch_io *io, int step, float *mean, tg_err *e) {
    if (batch_loss(io, step, false, e)) return -1;
    tg_step_stats st;
    io->model->ops->download(io->model->ops, &st, io->model->stats, sizeof st);
    *mean = st.loss;
    return 0;
}

int batch_train_step(const batch_io *io, int step, optim_report *rep, tg_err *e) {
    gpt_zero_grads(io->model);
    if (batch_loss(io, step, true, e)) return -1;
    return optim_update(io->opt, io->model, io->cfg, step, rep, e);
}
