/* --hellaswag: each example's four endings scored by the model's loss on
 * their tokens after the context; the prediction is the ending of least
 * loss, summed (acc) or averaged over its tokens (acc_norm, the figure
 * llm.c and build-nanogpt report). A forward pass takes micro_batch / 4
 * examples, one row per ending, with the LM head run only at the rows
 * that predict an ending's tokens (gpt_forward_rows); DP ranks take
 * every dp-th pass and add up their counts; TP ranks run their DP rank's
 * passes together. */
#include <stdlib.h>
#include <string.h>

#include "train/hellaswag.h"
#include "train/runlog.h"

/* One forward pass's host rows: inputs and targets (rows x seq_len each),
 * the span of each row whose targets are its ending, and the losses there
 * (the spans' positions one after another). */
typedef struct hs_buffers {
    int32_t *in, *tgt;
    float *losses;
    gpt_rows_span *ending;
} hs_buffers;

/* Row j of example x as forward inputs and targets of T positions: the
 * context and the ending, cut to its last T tokens where longer (returns
 * whether it was), then padding whose losses are not read. *first is the
 * position whose target is the ending's first token. */
static bool fill_row(const hs_example *x, int j, int T, int32_t *in, int32_t *tgt, int *first) {
    const int n_end = x->n_end[j], n = x->n_ctx + n_end, drop = n > T ? n - T : 0, len = n - drop;
    const int32_t *end = hellaswag_ending(x, j);
    for (int t = 0; t < T; t++) {
        const int p = t + drop; /* place in the uncut row */
        in[t] = t >= len ? 0 : p < x->n_ctx ? x->tokens[p] : end[p - x->n_ctx];
        tgt[t] = t + 1 >= len ? 0 : p + 1 < x->n_ctx ? x->tokens[p + 1] : end[p + 1 - x->n_ctx];
    }
    *first = x->n_ctx - 1 - drop;
    return drop > 0;
}

/* The forward's length: its longest row, rounded up to a multiple of 16
 * (few shapes for the backend's plans) and under SP to one that B x T
 * divides over TP, at most seq_len. */
static int pass_length(const hs_set *s, int ex0, int n_ex, int rows, int pad, int seq_len) {
    int T = 1;
    for (int i = ex0; i < ex0 + n_ex; i++)
        for (int j = 0; j < HS_ENDINGS; j++)
            if (s->ex[i].n_ctx + s->ex[i].n_end[j] > T) T = s->ex[i].n_ctx + s->ex[i].n_end[j];
    T = (T + 15) / 16 * 16;
    if (T > seq_len) T = seq_len;
    while ((rows * T) % pad && T < seq_len) T++;
    return T;
}

/* The index of the least of v[0..HS_ENDINGS) (the first of equals). */
static int least(const double *v) {
    int best = 0;
    for (int j = 1; j < HS_ENDINGS; j++)
        if (v[j] < v[best]) best = j;
    return best;
}

/* Examples [ex0, ex0 + n_ex) in one forward pass, into the tally. */
static int score_pass(run *r, const hs_set *s, int ex0, int n_ex, hs_buffers *b, hs_tally *tally, tg_err *e) {
    const int rows = r->cfg.train.micro_batch / HS_ENDINGS * HS_ENDINGS, pad = r->model->d.sp ? r->model->d.tp : 1;
    const int T = pass_length(s, ex0, n_ex, rows, pad, r->cfg.model.seq_len);
    if ((rows * T) % pad)
        return tg_fail(e, "parallel.sp: %d rows of %d tokens do not divide over parallel.tp = %d", rows, T, pad);
    memset(b->in, 0, (size_t)rows * T * sizeof *b->in);
    memset(b->tgt, 0, (size_t)rows * T * sizeof *b->tgt);
    int n_rows = 0; /* the endings' rows, whose losses come back */
    for (int k = 0; k < n_ex * HS_ENDINGS; k++) {
        const hs_example *x = &s->ex[ex0 + k / HS_ENDINGS];
        int first;
        tally->cut += fill_row(x, k % HS_ENDINGS, T, b->in + (size_t)k * T, b->tgt + (size_t)k * T, &first);
        b->ending[k] = (gpt_rows_span){k * T + first, x->n_end[k % HS_ENDINGS]};
        n_rows += b->ending[k].count;
    }
    /* The LM head only where an ending is predicted: most of a row is context or padding. */
    if (gpt_forward_rows(r->model, b->in, b->tgt, rows, T, b->ending, n_ex * HS_ENDINGS, e)) return -1;
    gpt_losses_at(r->model, n_rows, b->losses);
    const float *row = b->losses;
    for (int i = 0; i < n_ex; i++) {
        const hs_example *x = &s->ex[ex0 + i];
        double sum[HS_ENDINGS], mean[HS_ENDINGS];
        for (int j = 0; j < HS_ENDINGS; row += x->n_end[j], j++) {
            sum[j] = 0.0;
            for (int t = 0; t < x->n_end[j]; t++) sum[j] += row[t];
            mean[j] = sum[j] / x->n_end[j];
        }
        tally->correct += least(sum) == x->label;
        tally->correct_norm += least(mean) == x->label;
        tally->n++;
    }
    return 0;
}

int hellaswag_score(run *r, const hs_set *s, hs_tally *tally, tg_err *e) {
    const int per_pass = r->cfg.train.micro_batch / HS_ENDINGS, T = r->cfg.model.seq_len;
    memset(tally, 0, sizeof *tally);
    const size_t n = (size_t)per_pass * HS_ENDINGS * T;
    hs_buffers b = {tg_malloc(n * sizeof(int32_t), "HellaSwag inputs"), tg_malloc(n * sizeof(int32_t), "HellaSwag targets"),
                    tg_malloc(n * sizeof(float), "HellaSwag losses"),
                    tg_malloc((size_t)per_pass * HS_ENDINGS * sizeof(gpt_rows_span), "HellaSwag endings")};
    gpt_set_dropout(r->model, 0.0f, 0, 0);
    int rc = 0;
    for (int pass = 0, ex0 = 0; !rc && ex0 < s->n; pass++, ex0 += per_pass)
        if (pass % r->dp->size == r->dp->rank)
            rc = score_pass(r, s, ex0, s->n - ex0 < per_pass ? s->n - ex0 : per_pass, &b, tally, e);
    free(b.in);
    free(b.tgt);
    free(b.losses);
    free(b.ending);
    if (rc) return -1;
    /* Each pass added its mean loss to the accumulator the next training
     * step's loss is summed in (gpt_forward): empty it. */
    r->ops->loss_finish(r->ops, r->model->stats, 1, 1.0f);
    /* Counts below 2^24 (at most 4 x HS_MAX_EXAMPLES rows) add exactly in float32. */
    float counts[4] = {(float)tally->n, (float)tally->correct, (float)tally->correct_norm, (float)tally->cut};
    if (comm_all_reduce(r->dp, counts, 4, REDUCE_SUM, e)) return -1;
    *tally = (hs_tally){(long long)counts[0], (long long)counts[1], (long long)counts[2], (long long)counts[3]};
    return 0;
}

void run_hellaswag(run *r) {
    tg_err e;
    hs_tally t;
    if ((r->opt && optim_weights_current(r->opt, r->model, &e)) || hellaswag_score(r, r->hellaswag, &t, &e)) {
        tg_wrap(&e, "out.hellaswag (%s) at step %d", r->cfg.out.hellaswag, r->state.step);
        tg_die(PROG, &e);
    }
    const double norm = (double)t.correct_norm / t.n, acc = (double)t.correct / t.n;
    if (r->log) {
        jsonl_line l = jsonl_open(r->log);
        jsonl_int(&l, "step", r->state.step);
        jsonl_num(&l, "hellaswag_acc_norm", "%.6g", norm);
        jsonl_num(&l, "hellaswag_acc", "%.6g", acc);
        report_log_close(r, &l, r->state.step);
    }
    printf("step %d | hellaswag acc_norm %.4f (%lld/%lld), acc %.4f\n", r->state.step, norm, t.correct_norm, t.n, acc);
    report_check_stdout(r, "the HellaSwag line", r->state.step);
}
