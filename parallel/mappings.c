#include "parallel/mappings.h"

float *map_gather_rows(comm *tp, bool sp, float *full, float *rows, size_t rows_floats, tg_err *e) {
    if (!sp) return rows;
    return comm_all_gather(tp, full, rows, rows_floats, e) ? NULL : full;
}

int map_reduce_rows(comm *tp, bool sp, float *rows, float *full, size_t rows_floats, tg_err *e) {
    if (!sp) return comm_all_reduce(tp, full, rows_floats, REDUCE_SUM, e);
    return comm_reduce_scatter(tp, rows, full, rows_floats, e);
}
