/* One step of training, and the evaluation that shares its window loop:
 * a global batch split over DP and micro-batches, forward, backward, the
 * optimizer's update, and what a non-finite loss or norm makes of it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/timed.h"
#include "train/batch.h"
#include "train/run.h"
#include "train/runlog.h"


double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static batch_io io_of(run *r) {
    return (batch_io){r->model, r->opt, r->dp, &r->cfg, r->window, r->share, &r->graph};
}

/* Mean loss over the window in r->window, without dropout or gradients. */
static float eval_window(run *r) {
    const batch_io io = io_of(r);
    float mean;
    tg_err e;
    if (batch_eval_loss(&io, &mean, &e)) tg_die(PROG, &e);
    return mean;
}

float run_evaluate(run *r) {
    data_pos pos = {0, 0};
    const long long n = config_eval_windows(&r->cfg, shards_windows_per_epoch(r->val));
    tg_err e;
    double sum = 0.0;
    for (long long i = 0; i < n; i++) {
        if (shards_next(r->val, &pos, r->cfg.model.vocab_size, r->window, &e)) tg_die(PROG, &e);
        sum += eval_window(r);
    }
    return (float)(sum / n);
}

/* What a step does with its update after the finiteness check. */
typedef enum { UPDATE_APPLY, UPDATE_SKIP, UPDATE_SKIP_AND_STOP } update_action;

/* A step whose loss or global gradient norm was not finite (the optimizer
 * applied nothing): with train.on_nonfinite = stop the run ends here,
 * non-zero and without saving this state; with skip the step stays dropped,
 * and the run stops once max_skipped steps in a row were. Every rank holds
 * the same loss and norm (both reduced), so all decide alike without talking. */
static update_action nonfinite_action(run *r, int step, float loss, double norm) {
    const tg_config *c = &r->cfg;
    if (strcmp(c->train.on_nonfinite, "skip") == 0) {
        tg_warn(PROG, "step %d: the loss is %g and the gradient norm is %g: update dropped "
                      "(train.on_nonfinite = skip; %d in a row, train.max_skipped = %d)",
                step, loss, norm, r->skipped_in_a_row + 1, c->train.max_skipped);
        return ++r->skipped_in_a_row >= c->train.max_skipped ? UPDATE_SKIP_AND_STOP : UPDATE_SKIP;
    }
    if (r->log) {
        jsonl_line l = jsonl_open(r->log);
        jsonl_int(&l, "step", step);
        jsonl_num(&l, "loss", "%.7g", loss);
        jsonl_num(&l, "grad_norm", "%.7g", norm);
        jsonl_str(&l, "stopped", "non-finite");
        report_log_close(r, &l, step);
    }
    tg_err e;
    tg_fail(&e, "step %d: the loss is %g and the gradient norm is %g (train.on_nonfinite = stop): stopping without "
                "saving this state; lower train.lr or set train.grad_clip, and resume from the newest checkpoint in %s",
            step, loss, norm, c->out.dir);
    tg_die(PROG, &e);
}


static void stop_after_skips(const run *r) {
    tg_err e;
    tg_fail(&e, "step %d: %d steps in a row had a non-finite loss or gradient norm (train.max_skipped = %d): stopping",
            r->state.step, r->skipped_in_a_row, r->cfg.train.max_skipped);
    tg_die(PROG, &e);
}


void run_train_step(run *r) {
    const tg_config *c = &r->cfg;
    tg_err e;
    double t0 = now_ms();
    if (r->timed) ops_timed_end_step(r->timed, false); /* what ran since the last step is not this step's */
    r->ops->timer_begin(r->ops);
    memcpy(r->bytes_at_step_start[0], r->tp->bytes_sent, sizeof r->bytes_at_step_start[0]);
    memcpy(r->bytes_at_step_start[1], r->dp->bytes_sent, sizeof r->bytes_at_step_start[1]);
    r->comm_s_at_step_start = report_comm_seconds(r);
    comm_beside_clear(r->tp); /* the projection's overlap records: this step's only */
    if (shards_next(r->train, &r->state.pos, c->model.vocab_size, r->window, &e)) tg_die(PROG, &e);
    const int s = r->state.step + 1;
    const batch_io io = io_of(r);
    optim_report rep;
    if (batch_train_step(&io, s, &rep, &e)) tg_die(PROG, &e);
    const float loss = rep.loss;
    const update_action act = rep.applied ? UPDATE_APPLY : nonfinite_action(r, s, loss, rep.grad_norm);
    const double lr = rep.lr, norm = rep.grad_norm;
    r->state.step = s;
    /* The device's own clock where there is one (CUDA events around the
     * step), else the wall clock. */
    const double device_ms = r->ops->timer_end_ms(r->ops);
    double ms = device_ms >= 0 ? device_ms : now_ms() - t0;
    const bool warm = s > 1 || c->train.steps == 1; /* the first step pays for page faults */
    if (warm) {
        r->train_ms_total += ms;
        r->train_steps_timed++;
    } else {
        r->train_ms_total = ms;
        r->train_steps_timed = 1;
    }
    if (r->timed) ops_timed_end_step(r->timed, warm);
    if (act == UPDATE_APPLY) r->skipped_in_a_row = 0;
    report_train(r, loss, lr, norm, ms, act != UPDATE_APPLY);
    if (act == UPDATE_SKIP_AND_STOP) stop_after_skips(r);
}
