/* One rank's training run: the state main builds from the command line and
 * the environment, shared by the steps, the logging, the sampler and the
 * loop. train_gpt.c parses the arguments, builds the run and loops. */
#ifndef TRAIN_RUN_H
#define TRAIN_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "data/hellaswag.h"
#include "data/shards.h"
#include "data/tokenizer.h"
#include "model/gpt.h"
#include "parallel/bootstrap.h"
#include "parallel/comm.h"
#include "parallel/topology.h"
#include "train/ckpt_prune.h"
#include "train/batch.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/optim.h"
#include "train/stop.h"
#include "util/fs.h"

#define PROG "train_gpt"
/* out.dir's lock file (fs_lock_take), held by a training run's writer. */
#define RUN_LOCK_NAME ".train_gpt.lock"

/* What the run is built for: training writes out.dir; --eval, --sample and
 * --hellaswag (train/modes.h) need no optimizer, write nothing and print
 * only their result. */
typedef enum { RUN_TRAIN, RUN_EVAL, RUN_SAMPLE, RUN_HELLASWAG } run_purpose;

typedef struct run {
    run_purpose purpose;    /* set before run_setup (zero: training) */
    tg_config cfg;
    const tg_ops *ops;
    tg_ops *timed;          /* out.op_times: the per-op timer, which is ops (else NULL) */
    topology topo;          /* this rank's place: rank, world, TP and DP groups */
    int rank, world;        /* global rank and world size */
    bootstrap *bs;          /* TCP rendezvous (NULL for a single rank) */
    comm *tp, *dp;          /* this rank's tensor- and data-parallel groups */
    gpt *model;
    optim *opt;
    shard_set *train, *val;
    tokenizer *tok;
    hs_set *hellaswag;      /* out.hellaswag's examples, scored at each evaluation (NULL: none) */
    FILE *log;
    ckpt_state state;       /* steps done and the data position after them */
    int32_t *window;        /* one global batch: global_batch*T + 1 tokens */
    int32_t *share;         /* backend memory: this rank's share of the window (batch_share_len) */
    step_graph graph;       /* the training step as a CUDA graph (train.cuda_graph) */
    double train_ms_total;
    int train_steps_timed;
    uint64_t bytes_at_step_start[2][COLL_KINDS]; /* tp, dp counters */
    double comm_s_at_step_start;                 /* measured (real) or modeled (projected) */
    double flops_per_token;                      /* 6N + 12 L C T, N counting every parameter once */
    double executed_flops_per_token;             /* with what recomputation reruns (the projection's overlap model) */
    gpt_budget budget;      /* this rank's planned bytes */
    double peak_tflops;     /* of one device, for MFU (0: unknown) */
    stop_watch *stop;       /* SIGTERM/SIGINT/SIGUSR1: save and exit after this step */
    int resumed_step;       /* the checkpoint this run resumed from, or -1 */
    int skipped_in_a_row;   /* consecutive steps dropped for non-finite values (on_nonfinite = skip) */
    ckpt_kept kept;         /* out.keep_last: checkpoints already named as kept for a file of the user's */
    fs_lock out_lock;       /* training's writer (rank 0): out.dir/RUN_LOCK_NAME, held for the run's life */
} run;

/* train/setup.c: the topology (from the environment, or one process
 * standing for rank 0 under parallel.project), then backend, ranks, data,
 * model, optimizer, state and log (the last three for training only: the
 * modes load their weights themselves); exits with a message on any error. */
void run_resolve_topology(tg_config *cfg, topology *topo);
void run_setup(run *r);
void run_teardown(run *r);

/* train/step.c */
double now_ms(void);
/* Validation loss over out.eval_batches windows. */
float run_evaluate(run *r);
/* One optimizer step: the next window, forward and backward, the update
 * (or the non-finite policy), and its log line. */
void run_train_step(run *r);

/* train/report.c: stdout, and rank 0's log.jsonl */
void report_budget(const gpt_budget *b);
void report_open_log(run *r);
/* Ends a log.jsonl line; a failed write ends the run, naming the file and
 * step (the partial line is cut back first). */
struct jsonl_line;
void report_log_close(const run *r, struct jsonl_line *l, int step);
/* Flushes stdout (rank R > 0 in training: out.dir/logs/rank_R.out); a
 * failed write ends the run, naming the output, `what` and the step. */
void report_check_stdout(const run *r, const char *what, int step);
void report_train(run *r, float loss, double lr, double norm, double ms, bool skipped);
void report_eval(run *r, float val);
/* out.op_times: the per-op table on stdout and out.dir/op_times.tsv (rank 0). */
void report_op_times(const run *r);
void report_peak_memory(run *r);
/* Seconds of communication so far: measured in a real run, modeled in a projected one. */
double report_comm_seconds(const run *r);

/* train/hellaswag.c: out.hellaswag scored with the current weights, on
 * stdout and in log.jsonl (every rank runs it; rank 0 prints) */
void run_hellaswag(run *r);

/* train/sample.c: a generated sample (every rank runs it; rank 0 prints) */
void run_sample(run *r);

/* train/loop.c: steps, evaluations, checkpoints, samples and signals until
 * train.steps; returns the exit status (or exits). A run resumed at or past
 * train.steps (run_nothing_to_train) says so, and how to go on, and returns
 * 0 having written nothing: no log line, sample or checkpoint. */
bool run_nothing_to_train(const run *r);
int run_train(run *r);

#endif
