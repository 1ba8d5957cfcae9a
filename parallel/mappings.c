#include "parallel/mappings.h"

void *map_gather_rows_start(comm *tp, bool sp, void *full, void *rows, size_t n, tg_dtype t, comm_req **req, tg_err *e) {
    *req = NULL;
    if (!sp) return rows;
    *req = comm_all_gather_start(tp, full, rows, n, t, e);
    return *req ? full : NULL;
}

comm_req *map_reduce_rows_start(comm *tp, bool sp, void *rows, void *full, size_t n, tg_dtype t, tg_err *e) {
    if (!sp) return comm_all_reduce_start(tp, full, n, t, REDUCE_SUM, e);
    return comm_reduce_scatter_start(tp, rows, full, n, t, e);
}

int map_reduce_rows(comm *tp, bool sp, void *rows, void *full, size_t n, tg_dtype t, tg_err *e) {
    return comm_wait(map_reduce_rows_start(tp, sp, rows, full, n, t, e), e);
}
