#include "train/op_table_rates.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/op_rates.h"
#include "train/op_table.h"
#include "train/plan.h"
#include "train/plan_time.h"

/* Each row's work per step: the dry step's work of its op, for the table's
 * calls (as the calibration scales it); unknown (-1) where the dry step
 * made no call of the op. */
static void table_rows(const op_table *t, tg_o counted, op_rate_row *rows) {
    for (int i = 0; i < t->n; i++) {
        const op_row *r = &t->rows[i];
        double calls;
        const double work = plan_meter_work(counted, r->name, &calls);
        rows[i] = (op_rate_row){r->name, r->calls, r->device_ms, r->host_ms, r->share, calls > 0 ? work * r->calls / calls : -1};
    }
}

static int write_rates(const op_table *t, bool markdown, FILE *out, tg_err *e) {
    if (!t->has_shape)
        return tg_fail(e, "%s: no shape line ('%s{...}' before the header): the work per step comes from a dry step at "
                          "the shape the table was measured at",
                       t->path, OP_TABLE_SHAPE_PREFIX);
    tg_ops *counted = plan_meter_at_table_shape(t, e);
    if (!counted) return -1;
    op_rate_row rows[OP_TABLE_ROWS];
    table_rows(t, counted, rows);
    ops_destroy(counted);
    const char *device = t->device_name[0] ? t->device_name : t->shape.device;
    if (markdown) {
        fprintf(out, "Derived from `%s` (its measured device times) by `train_gpt --op-rates`: the work per step is the "
                     "trainer's own dry step at the table's shape (kernels/op_work.h), the rate that work over the "
                     "measured time.\n\n", t->path);
    } else {
        char *shape = op_table_shape_line(&t->shape, t->device_name);
        if (!shape) return tg_fail(e, "%s: cannot write its shape line again (out of memory)", t->path);
        fputs(shape, out);
        free(shape);
    }
    op_rates_write(out, rows, t->n, device, config_act_dtype(&t->shape), markdown ? OP_RATES_MARKDOWN : OP_RATES_TSV);
    if (fflush(out) != 0 || ferror(out)) return tg_fail(e, "%s: cannot write its rates to the standard output", t->path);
    return 0;
}

int op_table_rates_main(const char *path, const char *format) {
    tg_err e;
    op_table *t = tg_malloc(sizeof *t, "op table");
    const int rc = op_table_read(path, t, &e) || write_rates(t, strcmp(format, "md") == 0, stdout, &e);
    free(t);
    if (rc) fprintf(stderr, "train_gpt: error: %s\n", e.msg);
    return rc ? 1 : 0;
}
