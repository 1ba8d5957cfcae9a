/* The modes that use a model without training it: --eval (validation loss
 * of some weights), --sample (a continuation of a prompt) and --hellaswag
 * (accuracy on HellaSwag). Each builds the run as training does, on the
 * same ranks and layouts, but writes nothing. */
#ifndef TRAIN_MODES_H
#define TRAIN_MODES_H

#include "train/run.h"

/* --sample's options; fields left at their "unset" values take the config's. */
typedef struct sample_opts {
    const char *prompt;   /* --prompt TEXT (UTF-8) */
    int max_tokens;       /* --max-tokens N; -1: out.sample_tokens */
    double temperature;   /* --temperature T; 0: greedy (the most likely token) */
    int top_k;            /* --top-k K; 0: the whole vocabulary */
    long long seed;       /* --seed S; -1: train.seed */
    int num_samples;      /* --num-samples N; sample i draws with sample_seed(seed, i) */
} sample_opts;

/* Unset sample options, as args_parse starts them. */
sample_opts sample_opts_default(void);

/* train/modes.c: each resolves the ranks, builds the run, does its work,
 * tears it down and returns the exit status (or exits with a message). */
int mode_eval(run *r);
int mode_sample(run *r, const sample_opts *o);
int mode_hellaswag(run *r, const char *path);

/* train/sample.c: the text of n tokens on stdout, flushed (nothing without
 * a vocabulary). */
void sample_print(const run *r, const int32_t *toks, int n);

/* The seed of sample i of --num-samples: the base seed itself for sample 0
 * (one sample is what it always was), else a hash of (seed, i) below 2^53,
 * which --seed accepts, so any one sample can be drawn again alone. */
uint64_t sample_seed(uint64_t seed, int i);

/* train/sample.c: appends n tokens to toks (len tokens so far, room for
 * len + n), each drawn from the model's next-token distribution given the
 * last seq_len tokens; the draw for the token at position p uses the
 * counter-based uniform (seed, "sample", counter_base + p), so the text is
 * a function of the seed whatever the layout. Every rank draws alike; each
 * prints the tokens' text to its stdout as they come (rank 0's is the job's). */
void sample_continue(run *r, int32_t *toks, int len, int n, const sample_opts *o, uint64_t seed,
                     uint64_t counter_base);

#endif
