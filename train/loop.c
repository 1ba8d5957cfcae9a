/* The training loop: steps until train.steps, with evaluations, checkpoints
 * and samples at their intervals, and a stop on SIGTERM, SIGINT or SIGUSR1
 * that every rank agrees on. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "train/ckpt_prune.h"
#include "train/run.h"


/* Saves the step. The other ranks then wait for rank 0 to have written and
 * renamed it, bounded by parallel.save_timeout_s: left to the next step's
 * collectives, their wait was bounded by parallel.timeout_s, and a large
 * checkpoint could take longer to write than that. Nobody exits before the
 * checkpoint is in place either (a launcher stops the others when the first
 * rank ends). */
static void save(run *r) {
    tg_err e;
    if (optim_weights_current(r->opt, r->model, &e)) tg_die(PROG, &e); /* ZeRO: the last update's gather */
    double t0 = now_ms();
    int rc = ckpt_save(r->cfg.out.dir, r->model, r->opt, &r->cfg, &r->state, r->rank == 0, &e);
    if (rc < 0) tg_die(PROG, &e);
    if (rc == 1) printf("%s/step_%08d already holds this state\n", r->cfg.out.dir, r->state.step);
    else printf("saved %s/step_%08d (%.0f ms)\n", r->cfg.out.dir, r->state.step, now_ms() - t0);
    report_check_stdout(r, "the checkpoint line", r->state.step);
    if (r->rank == 0) ckpt_prune(r->cfg.out.dir, r->cfg.out.keep_last, r->cfg.out.keep_every, &r->kept);
    if (r->bs && bootstrap_barrier_within(r->bs, r->cfg.parallel.save_timeout_s, "parallel.save_timeout_s", &e)) {
        tg_wrap(&e, "waiting for rank 0 to write %s/step_%08d", r->cfg.out.dir, r->state.step);
        tg_die(PROG, &e);
    }
}


static bool every(int step, int n) { return n > 0 && step % n == 0; }

/* The signal asking the job to stop (0: none), agreed by every rank (the
 * largest any rank got), so that all of them stop after the same step. */
static int agreed_stop_signal(run *r) {
    float sig = (float)stop_watch_signal(r->stop);
    if (r->cfg.parallel.project || r->tp->size * r->dp->size == 1) return (int)sig;
    tg_err e;
    if (comm_all_reduce(r->tp, &sig, 1, REDUCE_MAX, &e) || comm_all_reduce(r->dp, &sig, 1, REDUCE_MAX, &e))
        tg_die(PROG, &e);
    return (int)sig;
}

/* SIGTERM, SIGINT or SIGUSR1 arrived: the step in flight has finished;
 * save it (atomically, as every save; not again when its step's save is
 * what the signal came during) and exit as a signalled program. */
static void stop_on_signal(run *r, int sig, bool saved) {
    const bool keep = !r->cfg.parallel.project, has_step = keep && r->state.step > 0;
    if (has_step && !saved) save(r); /* which every rank leaves only once the checkpoint is in place */
    printf("stopped on SIG%s after step %d%s\n", sigabbrev_np(sig), r->state.step,
           has_step ? "; run the same command to resume from that checkpoint" : "");
    fflush(stdout);
    if (r->log) fclose(r->log);
    exit(128 + sig);
}

bool run_nothing_to_train(const run *r) {
    return r->resumed_step >= 0 && r->state.step >= r->cfg.train.steps;
}

/* A resume at or past train.steps: what to do instead, since rerunning the
 * quickstart's own command is the first thing a newcomer tries. Raising
 * train.steps stretches the LR schedule, which sends the LR back up: the
 * hint says by how much, and how to go on at the LR the run ended at. */
static void say_nothing_to_train(const run *r) {
    const tg_config *c = &r->cfg;
    const int s = r->state.step, more = s > 0 ? 2 * s : 100;
    char lr_note[320] = "";
    if (s > 0) {
        tg_config longer = *c;
        longer.train.steps = more;
        const double ended = optim_lr(c, s), next = optim_lr(&longer, s + 1);
        snprintf(lr_note, sizeof lr_note,
                 ": the LR schedule stretches to the new length, so step %d trains at lr %.3g where step %d ended at "
                 "%.3g; to go on at %.3g, add --set train.lr_schedule=constant --set train.lr=%.3g --set train.min_lr=%.3g",
                 s + 1, next, s, ended, ended, ended, ended);
    }
    printf("nothing left to train: %s/step_%08d has done %d steps, %s train.steps (%d); no step, sample, "
           "checkpoint or log line was written.\n"
           "To go on: raise train.steps to continue this run (e.g. --set train.steps=%d%s), or start another run in a "
           "new out.dir (e.g. --set out.dir=%s_2; out.resume=false alone is refused where checkpoints exist, so that "
           "none is overwritten).\n",
           c->out.dir, s, s, s == c->train.steps ? "all of" : "past", c->train.steps, more, lr_note, c->out.dir);
    fflush(stdout);
}

int run_train(run *r) {
    const tg_config *c = &r->cfg;
    if (run_nothing_to_train(r)) { /* no step, evaluation, sample or save: the checkpoint already holds it all */
        say_nothing_to_train(r);
        return 0;
    }
    const bool keep = !c->parallel.project; /* a projection's numbers are not a model */
    const bool can_eval = keep && r->val != NULL, can_sample = keep && c->out.sample_tokens > 0 && r->tok != NULL;
    int sig = agreed_stop_signal(r);
    bool saved = false; /* the step's own save is done */
    while (!sig && r->state.step < c->train.steps) {
        run_train_step(r);
        saved = false;
        if ((sig = agreed_stop_signal(r)) != 0) break;
        const int s = r->state.step;
        const bool last = s == c->train.steps;
        const bool evaluation = every(s, c->out.eval_every) || last;
        const bool eval_now = can_eval && evaluation, hellaswag_now = r->hellaswag && evaluation;
        const bool save_now = keep && every(s, c->out.save_every) && !last;
        const bool sample_now = can_sample && every(s, c->out.sample_every) && !last;
        if (eval_now) report_eval(r, run_evaluate(r));
        if (hellaswag_now) run_hellaswag(r);
        if (save_now) save(r);
        saved = save_now;
        if (sample_now) run_sample(r);
        /* A signal during them stops here, not after one more step (an evaluation can take a while);
         * steps with none of them agree once, as before. */
        if (eval_now || hellaswag_now || save_now || sample_now) sig = agreed_stop_signal(r);
    }
    if (sig) stop_on_signal(r, sig, saved);
    if (keep && c->out.save_final) save(r);
    if (can_sample) run_sample(r);
    report_op_times(r);
    report_peak_memory(r);
    return 0;
}
