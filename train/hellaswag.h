/* --hellaswag: the accuracy of some weights on HellaSwag (data/hellaswag.h). */
#ifndef TRAIN_HELLASWAG_H
#define TRAIN_HELLASWAG_H

#include "data/hellaswag.h"
#include "train/run.h"

/* Examples scored and right by each measure; rows cut to seq_len tokens. */
typedef struct hs_tally {
    long long n, correct, correct_norm, cut;
} hs_tally;

/* Scores every example of s with the run's model, on every rank of the
 * run, and sums the counts over DP: every rank returns the same tally.
 * Needs train.micro_batch >= 4 (the caller checks). Returns 0, or -1 with
 * e filled. */
int hellaswag_score(run *r, const hs_set *s, hs_tally *tally, tg_err *e);

#endif
