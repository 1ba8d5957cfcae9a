/* Tensor maps for the bulk tensor copy engine (TMA, sm_90): the descriptor
 * a kernel's cp.async.bulk.tensor reads (kernels/cuda/tma.cuh), made on the
 * host for a bf16 tensor of 1 to 4 dimensions, with its box (the block of
 * elements one copy moves) and the shared-memory swizzle. The driver's
 * cuTensorMapEncodeTiled is taken from cudaGetDriverEntryPointByVersion, so
 * the binary does not link libcuda. Its rules are checked here first, so
 * that a refusal names the tensor and the rule broken. A map is passed to
 * a kernel by value as `const __grid_constant__ CUtensorMap`. Host C. */
#ifndef KERNELS_CUDA_TENSOR_MAP_H
#define KERNELS_CUDA_TENSOR_MAP_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TMA_MAX_RANK 4

typedef struct tma_tensor {
    const char *name;              /* named in every message, e.g. "qkv (keys)" */
    const void *base;              /* device address of element (0, ..., 0): 16-byte aligned */
    int rank;                      /* 1 to TMA_MAX_RANK */
    uint64_t dim[TMA_MAX_RANK];    /* elements per dimension, innermost first */
    uint64_t stride[TMA_MAX_RANK]; /* bytes from index i to i + 1 of dimension d >= 1 (stride[0] is unused: elements
                                      are contiguous); multiples of 16 */
    uint32_t box[TMA_MAX_RANK];    /* elements one copy moves per dimension, 1 to 256; box[0] * 2 a multiple of 16 */
    int swizzle;                   /* 0 (none), 32, 64 or 128: the span in bytes; box[0] * 2 at most the span */
} tma_tensor;

/* Fills *map (64-byte aligned) for the bf16 tensor t: 0, or -1 with e
 * naming t->name and the rule broken (or the driver's refusal). */
int tma_map_bf16(CUtensorMap *map, const tma_tensor *t, tg_err *e);

/* The heads view [B, T, NH, HS] of a bf16 activation whose token rows lie
 * row_elems elements apart (NH * HS for out and dout; 3 * NH * HS for one
 * of q, k, v inside qkv [B, T, 3, NH, HS], base then pointing at its
 * first element): dimensions (HS, NH, T, B), a box of box_rows tokens by
 * box_cols head elements of one head of one sequence; a copy's
 * coordinates are (column, head, token, batch). */
int tma_map_heads(CUtensorMap *map, const char *name, const void *base, int B, int T, int NH, int HS, size_t row_elems,
                  int box_rows, int box_cols, int swizzle, tg_err *e);

#ifdef __cplusplus
}
#endif
#endif
