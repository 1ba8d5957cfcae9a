/* The conjugate collectives of Megatron's tensor/sequence parallelism, as
 * the model uses them. The residual stream holds "rows": all B*T rows, or
 * under sequence parallelism (sp) this rank's 1/tp of them; column-parallel
 * layers need all rows. Each function's backward is the other one:
 *   map_gather_rows_start  forward: identity (sp: all-gather)  backward: map_reduce_rows
 *   map_reduce_rows        forward: all-reduce (sp: reduce-scatter)  backward: map_gather_rows_start
 * (Megatron's copy_to / reduce_from pair, and its sequence-parallel pair
 * gather_from_sequence_parallel / reduce_scatter_to_sequence_parallel.) */
#ifndef PARALLEL_MAPPINGS_H
#define PARALLEL_MAPPINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "parallel/comm.h"

/* All rows from this rank's rows (n elements of type t): returns `rows`
 * itself without sp (*req NULL: nothing to wait for), else `full`, which
 * holds them once comm_wait(*req) has succeeded (the all-gather in flight);
 * NULL with e set on failure. Work that only reads `rows` may run in
 * between. */
void *map_gather_rows_start(comm *tp, bool sp, void *full, void *rows, size_t n, tg_dtype t, comm_req **req, tg_err *e);

/* Sums partial results over all rows across TP into this rank's rows:
 * all-reduce in place in `full` (then rows == full) without sp, else
 * reduce-scatter of `full` into `rows`. */
int map_reduce_rows(comm *tp, bool sp, void *rows, void *full, size_t n, tg_dtype t, tg_err *e);
/* Its start (comm_wait completes it; NULL with e set on failure), so that
 * work that leaves both buffers alone can run beside the reduction. */
comm_req *map_reduce_rows_start(comm *tp, bool sp, void *rows, void *full, size_t n, tg_dtype t, tg_err *e);

#endif
