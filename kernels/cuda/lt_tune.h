/* Which of cuBLASLt's algorithms a product's plan runs (kernels.lt_tune),
 * and the record of those choices (C++ only; lt_plan.cu, lt_tune.cu).
 *
 * off:   the heuristic's first algorithm, as cuBLASLt ranks them.
 * time:  the heuristic's top LT_TUNE_CANDIDATES, each timed once on the
 *        plan's first (eager) call, the fastest kept; the choices are
 *        recorded, and a record already in out.dir (a resumed run) pins
 *        its choices instead of timing again.
 * FILE:  the choices recorded in FILE, pinned; a product FILE does not name
 *        takes the heuristic's first.
 * A pinned algorithm gives bitwise the same result run to run; another
 * algorithm may round differently (another split of k), so timing is not
 * reproducible by itself: its record is what makes a rerun the same.
 *
 * The record is a text file, one product a line, tab-separated name=value
 * fields; its first line is "train_gpt_lt_algos<TAB>1":
 *   ta tb m n k lda ldb ldd ab d epilogue align   the plan's key (lt_key)
 *   algo    the chosen cublasLtMatmulAlgo_t, 128 hex digits (its 8 words)
 *   chosen, of, ms, first_ms, what                 informational
 * An algorithm is pinned only if the heuristic offers exactly those bytes
 * among its candidates for the key (another cuBLAS or GPU offers others,
 * and the run stops saying so). */
#ifndef KERNELS_CUDA_LT_TUNE_H
#define KERNELS_CUDA_LT_TUNE_H

#include <stdint.h>

#include "kernels/cuda/cuda_ctx.h"
#include "util/err.h"

#define LT_TUNE_CANDIDATES 8 /* the heuristic's top this many are timed */

/* Everything the heuristic's choice depends on; equal keys get the same
 * algorithm, hence bitwise the same result. 4-byte fields only, so two keys
 * compare with memcmp (no padding). An absent epilogue pointer has
 * alignment 0. */
struct lt_key {
    int32_t trans_a, trans_b, m, n, k, lda, ldb, ldd;
    int32_t ab, d, epilogue;
    uint32_t align_a, align_b, align_d, align_bias, align_aux;
};

enum lt_tune_mode { LT_TUNE_OFF, LT_TUNE_TIME, LT_TUNE_FILE };

/* One product's choice: from a record file (line > 0) or made in this run. */
struct lt_choice {
    lt_key key;
    cublasLtMatmulAlgo_t algo;
    int chosen, of;          /* the heuristic's rank of the algorithm (0 = first), among `of` */
    float ms, first_ms;      /* timed: the chosen one's and the heuristic's first's, ms a call; < 0 untimed */
    int line;                /* its line in `source`, 0 if made in this run */
    bool recorded;           /* written to this run's record */
    char what[64];
};

struct lt_tuner {
    lt_tune_mode mode;
    char source[4096]; /* the record pinned from ("" none) */
    char record[4096]; /* where this run's choices are written ("" nowhere) */
    lt_choice *choices;
    int count, capacity;
    cudaEvent_t start, stop; /* created at the first timing */
};

/* The choice the tuner holds for key, or NULL. */
const lt_choice *lt_tuner_find(const lt_tuner *t, const lt_key &key);
/* Keeps c (replacing a choice for the same key) and rewrites the record
 * (marking c recorded); stops the program when it cannot be written. */
void lt_tuner_keep(lt_tuner *t, const lt_choice &c);
/* The timing events, created on first use. */
void lt_tuner_events(lt_tuner *t, cudaEvent_t *start, cudaEvent_t *stop);
void lt_tuner_release(lt_tuner *t);

/* The tuner of a context's plan table (lt_plan.cu). */
lt_tuner *lt_plans_tuner(struct cuda_lt_plans *plans);

#endif
