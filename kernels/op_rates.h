/* The rate columns of the per-op table (out.dir/op_times.tsv): each op's
 * work per step (kernels/op_work.h's model), the rate its device time gives
 * (TFLOP/s or GB/s), and that rate's fraction of the device's ceiling,
 * from a small table of ceilings looked up by device name: measured ones
 * where a sitting measured them (results/gpu/), else the data sheet's,
 * each labelled. The trainer's timer writes them (kernels/timed.c), and
 * `train_gpt --op-rates TABLE` re-derives them for a table written
 * before (train/plan.h). */
#ifndef KERNELS_OP_RATES_H
#define KERNELS_OP_RATES_H

#include <stdio.h>

#include "kernels/op_work.h"

/* The per-op table's header: the timer's five columns, then the rates. */
#define OP_RATES_TSV_HEADER_TIMES "op\tcalls_per_step\tdevice_ms_per_step\thost_ms_per_step\tshare"
#define OP_RATES_TSV_HEADER OP_RATES_TSV_HEADER_TIMES "\twork_per_step\twork_unit\trate\trate_unit\tceiling_fraction"
#define OP_RATES_TSV_COLUMNS 10
/* The line before the header that names the ceilings (or says there are none). */
#define OP_RATES_CEILING_PREFIX "# ceilings: "

/* A device's ceilings at an activation type; a figure <= 0 is unknown. */
typedef struct op_ceilings {
    double tflops, gbs;           /* the products' TFLOP/s, device memory's GB/s */
    const char *tflops_source, *gbs_source; /* "measured: ..." or "data sheet: ..." */
} op_ceilings;

/* 1 with c filled when device_name (a GPU's name, or text containing it)
 * is in the table, else 0 (c zeroed). */
int op_ceilings_find(const char *device_name, tg_dtype act, op_ceilings *c);

/* One op's figures per step; work < 0 when unknown. */
typedef struct op_rate_row {
    const char *name;
    double calls, device_ms, host_ms, share, work;
} op_rate_row;

typedef enum { OP_RATES_TSV, OP_RATES_TEXT, OP_RATES_MARKDOWN } op_rates_format;

/* The ceilings line, the header and one line per row, in the rows' order,
 * for the device named device_name running activation type act. */
void op_rates_write(FILE *f, const op_rate_row *rows, int n, const char *device_name, tg_dtype act, op_rates_format fmt);

#endif
