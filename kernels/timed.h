/* The opt-in per-op timer (out.op_times): a backend that forwards every call
 * to the backend it wraps and times the kernel and memory ops. Per op it
 * keeps the device time (events recorded around the call where the wrapped
 * backend has them, as CUDA does; else the call's wall time, which on the
 * synchronous CPU is the same) and the host time inside the call (a call
 * that blocks on the device shows there: an op with host time close to its
 * device time is a host wait). Results depend only on the wrapped backend:
 * the timer adds events, never synchronizations, except at a step's end. */
#ifndef KERNELS_TIMED_H
#define KERNELS_TIMED_H

#include <stdbool.h>
#include <stdio.h>

#include "kernels/ops.h"

/* Takes ownership of inner (ops_destroy of the result destroys both). */
tg_ops *ops_timed_create(const tg_ops *inner, tg_err *e);
/* The wrapped backend. */
const tg_ops *ops_timed_inner(tg_o timed);
/* Ends a step, after its final wait: with `count`, the times of the calls
 * since the last end are added to the totals (one more step counted);
 * without, they are dropped (warm-up, evaluation, samples). */
void ops_timed_end_step(tg_o timed, bool count);
/* One line per op that ran in a counted step, slowest first: calls, device
 * and host milliseconds per step, the share of the ops' device time, and
 * the rate columns (work per step, rate, fraction of the device's ceiling:
 * kernels/op_rates.h), after a line naming the ceilings; as tab-separated
 * text (tsv, OP_RATES_TSV_HEADER) or an aligned table. Nothing when no step
 * was counted. (out.dir/op_times.tsv has a line naming the run's shape
 * before it, which the trainer writes: train/op_table.h.) */
void ops_timed_write(tg_o timed, FILE *f, bool tsv);
/* Steps counted so far. */
int ops_timed_steps(tg_o timed);

#endif
