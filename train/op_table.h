/* The per-op table a run with out.op_times writes (out.dir/op_times.tsv),
 * read back for the planner's calibration (train/plan_time.h). Its first
 * line names the shape the run had:
 *   # shape: {"model.n_layer":40,...,"train.micro_batch":8,...,"device":"cuda","device_name":"..."}
 * (config keys and their values, plus the device's own name), then the
 * ceilings line and the header of kernels/op_rates.h (the timer's five
 * columns "op calls_per_step device_ms_per_step host_ms_per_step share",
 * then the rate columns) and one row per op. Other lines starting with '#'
 * are comments. Tables without the shape line or the rate columns are read
 * too (older runs); the calibration needs the shape line. */
#ifndef TRAIN_OP_TABLE_H
#define TRAIN_OP_TABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "train/config.h"

#define OP_TABLE_ROWS 64
#define OP_TABLE_SHAPE_PREFIX "# shape: "

typedef struct op_row {
    char name[48];
    double calls, device_ms, host_ms, share; /* per step */
    int line;
} op_row;

typedef struct op_table {
    char path[CFG_PATH_MAX];
    op_row rows[OP_TABLE_ROWS];
    int n;
    int columns;            /* of the header: 5 (older tables) or OP_RATES_TSV_COLUMNS */
    bool has_shape;
    int shape_line;
    tg_config shape;        /* defaults with the shape line's keys applied */
    char device_name[320];  /* the shape line's device_name ("" if none) */
} op_table;

/* Reads path into t. Errors name the file, the line and the field. */
int op_table_read(const char *path, op_table *t, tg_err *e);

/* The shape line for a run of config c on the device named device_name
 * (malloc'ed, with its newline). */
char *op_table_shape_line(const tg_config *c, const char *device_name);

#endif
