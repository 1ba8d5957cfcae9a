#include "train/batch.h"

#include <stdio.h>
#include <string.h>


size_t batch_share_len(const tg_config *c, int dp_size) {
    return (size_t)(c->train.global_batch / dp_size) * (size_t)c->model.seq_len + 1;
}

void batch_budget_share(gpt_budget *b, const tg_config *c, int dp_size) {
    b->tokens = batch_share_len(c, dp_size) * sizeof(int32_t);
    b->total += b->tokens;
}

bool batch_graph_usable(const tg_config *c, const tg_ops *ops, const comm *tp, const comm *dp) {
    return c->train.cuda_graph && ops->graph_capture_begin && ops->graph_capture_end && ops->graph_launch &&
           comm_capturable(tp) && comm_capturable(dp);
}

/* This rank's first sequence of the window (DP rank d takes [d*G/dp, (d+1)*G/dp)). */
static int share_first(const batch_io *io) { return io->dp->rank * (io->cfg->train.global_batch / io->dp->size); }

/* This rank's sequences of the window into io->share: micro-batch m's
 * inputs are share[m*N, (m+1)*N) and its targets the same shifted by one
 * (sequences are consecutive in the window, each followed by the next). */
static void upload_share(const batch_io *io) {
    const tg_config *c = io->cfg;
    const tg_ops *ops = io->model->ops;
    ops->upload(ops, io->share, io->window + (size_t)share_first(io) * (size_t)c->model.seq_len,
                batch_share_len(c, io->dp->size) * sizeof(int32_t));
}

/* The micro-batches' forward (and backward) passes over the uploaded share,
 * and the step's mean loss on the device. */
static int micro_batches(const batch_io *io, bool train, tg_err *e) {
    const tg_config *c = io->cfg;
    const int B = c->train.micro_batch, T = c->model.seq_len, accum = config_grad_accum(c);
    const int first = share_first(io);
    const float dloss = 1.0f / ((float)c->train.global_batch * T);
    /* Under ZeRO with buckets the last step's weights may still be gathered:
     * a training step's first forward pass waits for each stage where it
     * needs it; an evaluation waits for all first. */
    if (io->opt && (train ? optim_weights_begin(io->opt, io->model, e) : optim_weights_current(io->opt, io->model, e)))
        return -1;
    for (int m = 0; m < accum; m++) {
        /* Masks keyed by the micro-batch's place in the global batch and by
         * the step the kernels read from the device; none when evaluating. */
        gpt_set_dropout(io->model, train ? (float)c->model.dropout : 0.0f, (uint64_t)c->train.seed,
                        (uint64_t)(first + m * B) * (uint64_t)T);
        const int32_t *inputs = io->share + (size_t)m * B * T;
        const gpt_weight_hook *weights = io->opt && m == 0 ? optim_forward_hook(io->opt) : NULL;
        if (gpt_forward_resident(io->model, weights, inputs, inputs + 1, B, T, dloss, e)) return -1;
        /* The first micro-batch's backward writes every gradient (no
         * zeroing pass before it), the later ones add to them; the last one
         * starts the DP reduction as it goes. */
        const gpt_grad_hook *hook = train && m == accum - 1 ? optim_backward_hook(io->opt, io->model) : NULL;
        if (train && gpt_backward(io->model, hook, m > 0, e)) return -1;
    }
    /* On the device: the mean over micro-batches, this rank's DP share, summed over DP. */
    const tg_ops *ops = io->model->ops;
    ops->loss_finish(ops, io->model->stats, accum, (float)io->dp->size);
    return comm_all_reduce(io->dp, &io->model->stats->loss, 1, REDUCE_SUM, e);
}

int batch_loss(const batch_io *io, bool train, tg_err *e) {
    upload_share(io);
    return micro_batches(io, train, e);
}

int batch_eval_loss(const batch_io *io, float *mean, tg_err *e) {
    if (batch_loss(io, false, e)) return -1;
    tg_step_stats st;
    io->model->ops->download(io->model->ops, &st, io->model->stats, sizeof st);
    *mean = st.loss;
    return 0;
}

/* A training step's work after its uploads: the same ops every step. */
static int step_work(const batch_io *io, tg_err *e) {
    if (micro_batches(io, true, e)) return -1;
    return optim_enqueue(io->opt, io->model, io->cfg, e);
}

/* Whether every rank of the TP and DP groups captured its step: an
 * all-reduce of the refusals, outside the capture (NCCL's rule: all ranks
 * launch graphs that hold the same collectives, or none does). Its few
 * bytes are not the step's. */
static int every_rank_captured(const batch_io *io, bool *all, tg_err *e) {
    comm *groups[2] = {io->model->tp, io->dp};
    float refused = *all ? 0.0f : 1.0f;
    for (int g = 0; g < 2; g++) {
        uint64_t bytes[COLL_KINDS];
        memcpy(bytes, groups[g]->bytes_sent, sizeof bytes);
        if (comm_all_reduce(groups[g], &refused, 1, REDUCE_MAX, e)) return -1;
        memcpy(groups[g]->bytes_sent, bytes, sizeof bytes);
    }
    *all = refused == 0.0f;
    return 0;
}

/* The step's work recorded as the backend's graph, the communicators'
 * collectives with it. A capture the device refuses when it begins or ends
 * (or an instantiation it refuses), on this rank or any other, leaves graphs
 * off for the run, with a warning: nothing recorded has run anywhere, so
 * every rank runs the step's ops instead. An op the device refuses in the
 * middle of a capture stops the run with CUDA's message, as any failing op
 * does (none does in the configurations batch_graph_usable admits). */
static int capture(const batch_io *io, int step, tg_err *e) {
    const tg_ops *ops = io->model->ops;
    comm *tp = io->model->tp, *dp = io->dp;
    tg_err why = {{0}};
    bool captured = ops->graph_capture_begin(ops, &why) == 0;
    if (captured) {
        optim_graph_state(io->opt);
        comm_capture_begin(tp);
        comm_capture_begin(dp);
        const int rc = step_work(io, e);
        captured = ops->graph_capture_end(ops, &why) == 0;
        comm_capture_end(tp);
        comm_capture_end(dp);
        if (rc) return -1;
    }
    const bool mine = captured;
    if (every_rank_captured(io, &captured, e)) return -1;
    if (captured) {
        io->graph->captured = true;
        printf("step %d: captured as a CUDA graph; every later step replays it (train.cuda_graph)\n", step);
        return 0;
    }
    tg_warn("train_gpt", "step %d: %s; steps run op by op from here (train.cuda_graph)", step,
            mine ? "another rank's device refused the CUDA graph" : why.msg);
    if (ops->graph_release) ops->graph_release(ops); /* this rank's, never to be launched */
    io->graph->usable = false;
    return step_work(io, e);
}

/* The step's work: its ops one by one, or its graph. */
static int enqueue_step(const batch_io *io, int step, tg_err *e) {
    step_graph *gr = io->graph;
    if (!gr || !gr->usable || !gr->warm) {
        if (gr) gr->warm = true;
        return step_work(io, e);
    }
    if (!gr->captured && capture(io, step, e)) return -1;
    if (!gr->captured) return 0; /* refused: the ops ran */
    const tg_ops *ops = io->model->ops;
    if (ops->graph_launch(ops, e)) return -1;
    comm_replayed(io->model->tp);
    comm_replayed(io->dp);
    optim_graph_state(io->opt);
    return 0;
}

/* The host does not wait for a collective inside the step: their waits
 * only order the device's work (comm_defer_waits), and the host settles
 * them once, after everything is enqueued, before it reads the step's end. */
static int enqueue_step_deferred(const batch_io *io, int step, tg_err *e) {
    comm *tp = io->model->tp, *dp = io->dp;
    comm_defer_waits(tp, 1);
    comm_defer_waits(dp, 1);
    int rc = enqueue_step(io, step, e);
    comm_defer_waits(tp, 0);
    comm_defer_waits(dp, 0);
    tg_err later; /* a failure after the first is its consequence */
    if (comm_settle(tp, rc ? &later : e)) rc = -1;
    if (comm_settle(dp, rc ? &later : e)) rc = -1;
    return rc;
}

int batch_train_step(const batch_io *io, int step, optim_report *rep, tg_err *e) {
    upload_share(io);
    if (io->cfg->train.poison_grads) gpt_poison_grads(io->model); /* the step must write every gradient */
    optim_begin_step(io->opt, io->model, io->cfg, step);
    if (enqueue_step_deferred(io, step, e)) return -1;
    optim_read(io->opt, io->model, io->cfg, step, rep);
    return 0;
}
