/* The planner's per-op time model (`--plan --calibrate OP_TABLE`).
 *
 * A meter is the null backend (kernels that do nothing, no memory) that
 * also notes each kernel call's work from its arguments (kernels/op_work.h,
 * the model the op table's rate columns share): FLOPs for the products and
 * the attention core, bytes moved for everything else, one unit per call
 * for the scalar ops. The planner's dry step runs the
 * trainer's own step code over a meter, so it meters exactly the calls a
 * step makes at a layout: shard shapes, micro-batches, recomputation.
 *
 * Calibration: the dry step at the shape an op table names (its shape line)
 * gives each op's work per step; the table gives its measured device time.
 * Per op, time = calls x launch + work x seconds_per_unit, where launch is
 * the table's cheapest call (an empty kernel's cost) and seconds_per_unit
 * the rest of the op's time over its work. An op the table lacks takes its
 * class's rate (products, attention, memory-bound, scalar). A calibrated
 * meter then sums the modeled seconds of every call it sees. */
#ifndef TRAIN_PLAN_TIME_H
#define TRAIN_PLAN_TIME_H

#include <stddef.h>

#include "kernels/ops.h"
#include "train/op_table.h"

typedef struct plan_calib plan_calib;

/* A meter over the null backend of activation type act; with calib it
 * prices every call, without it only counts. ops_destroy frees it. */
tg_ops *plan_meter_create(tg_dtype act, const plan_calib *calib);
/* The calls and work (kernels/op_work.h's units) of the op named name
 * since the last reset; 0 for a name the meter does not know. */
double plan_meter_work(tg_o meter, const char *name, double *calls);
/* Modeled seconds of the calls since the last reset (0 without calib). */
double plan_meter_seconds(tg_o meter);
void plan_meter_reset(tg_o meter);

/* Fits the model to table t, given `counted`, an uncalibrated meter that
 * has just run one dry step at t's shape. Differences that do not stop the
 * fit (an op's calls per step differ from the dry step's) are appended to
 * notes (n bytes), one sentence each. NULL with e on error. */
plan_calib *plan_calib_fit(const op_table *t, tg_o counted, char *notes, size_t n, tg_err *e);
void plan_calib_free(plan_calib *c);

/* The products' seconds per FLOP (for the model of TP collectives hidden
 * beside products), and the launch cost the table gave. */
double plan_calib_seconds_per_flop(const plan_calib *c);
double plan_calib_launch_s(const plan_calib *c);

#endif
