/* `train_gpt --op-rates OP_TABLE [tsv|md]`: an op table's rate columns
 * (kernels/op_rates.h) re-derived from its measured device times and the
 * work per step of a dry step at the shape its shape line names, so that a
 * table written before the timer wrote rates (results/gpu/) gets them by
 * the same model. tsv: the whole table again, readable by --calibrate;
 * md: a markdown table, labelled as derived. */
#ifndef TRAIN_OP_TABLE_RATES_H
#define TRAIN_OP_TABLE_RATES_H

/* Writes the table on stdout; returns the exit status (1 with a message). */
int op_table_rates_main(const char *path, const char *format);

#endif
