/* `train_gpt --plan`: the layouts (tp, sp, recompute, micro_batch, zero) a
 * config could run with on G devices of M bytes, each with its memory per
 * device from the same budget code the trainer allocates with, whether it
 * fits, and a predicted step time: compute from a time model (--calibrate:
 * fitted to a measured op table, train/plan_time.h; else on CUDA FLOPs at an
 * assumed fraction of peak, labelled so; else none), plus the communication
 * of the layout over the modeled interconnect. */
#ifndef TRAIN_PLAN_H
#define TRAIN_PLAN_H

#include <stdio.h>

#include "kernels/ops.h"
#include "train/config.h"
#include "train/op_table.h"

typedef struct plan_opts {
    int devices;
    double device_bytes;
    double compute_efficiency; /* assumed fraction of peak the kernels reach (no calibration) */
    const char *calibrate;     /* --calibrate: an op table (out.op_times) to fit the time model to, or NULL */
} plan_opts;

/* Prints the table (and one JSON object per layout when json != NULL). */
int plan_print(const tg_config *c, const plan_opts *o, FILE *out, FILE *json, tg_err *e);

/* A dry step at the shape op table t's shape line names (t must have one),
 * over a new counting meter (train/plan_time.h): each op's calls and work
 * in a step at that shape. NULL with e on error; ops_destroy frees it. */
tg_ops *plan_meter_at_table_shape(const op_table *t, tg_err *e);

/* The --plan mode: the table on stdout, the JSON lines into json_path (if
 * not NULL). Returns the exit status (1 with a message on an error). */
int plan_main(const tg_config *c, const plan_opts *o, const char *json_path);

#endif
