/* Tensor maps for the bulk tensor copy engine (tensor_map.h): the driver's
 * rules for cuTensorMapEncodeTiled (cuda.h's documentation of it) checked
 * with messages that name the tensor, then the driver's own call, taken
 * at run time so that the binary needs no libcuda at link time. Host C. */
#include "kernels/cuda/tensor_map.h"

#include <cuda_runtime_api.h>
#include <inttypes.h>

#define BF16_BYTES 2

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                    const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                    CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* The driver's swizzle mode for a span of `bytes`, or -1. */
static int swizzle_mode(int bytes) {
    switch (bytes) {
    case 0: return CU_TENSOR_MAP_SWIZZLE_NONE;
    case 32: return CU_TENSOR_MAP_SWIZZLE_32B;
    case 64: return CU_TENSOR_MAP_SWIZZLE_64B;
    case 128: return CU_TENSOR_MAP_SWIZZLE_128B;
    default: return -1;
    }
}

/* The box's rules: 1 to 256 elements a dimension, the inner row a multiple
 * of 16 bytes and at most the swizzle span. */
static int check_box(const tma_tensor *t, tg_err *e) {
    for (int d = 0; d < t->rank; d++)
        if (t->box[d] < 1 || t->box[d] > 256)
            return tg_fail(e, "tensor map for %s: box dimension %d is %" PRIu32 " elements; the copy engine moves 1 to 256",
                           t->name, d, t->box[d]);
    const uint32_t inner = t->box[0] * BF16_BYTES;
    if (inner % 16)
        return tg_fail(e, "tensor map for %s: the box's inner dimension is %" PRIu32 " bytes, not a multiple of 16", t->name,
                       inner);
    if (swizzle_mode(t->swizzle) < 0)
        return tg_fail(e, "tensor map for %s: swizzle %d bytes; the spans are 0 (none), 32, 64 and 128", t->name, t->swizzle);
    if (t->swizzle && inner > (uint32_t)t->swizzle)
        return tg_fail(e, "tensor map for %s: the box's inner dimension is %" PRIu32 " bytes, over the %d-byte swizzle span",
                       t->name, inner, t->swizzle);
    return 0;
}

/* The tensor's rules: address 16-byte aligned, dimensions 1 to 2^32,
 * strides multiples of 16 bytes below 2^40. */
static int check_tensor(const CUtensorMap *map, const tma_tensor *t, tg_err *e) {
    if ((uintptr_t)map % 64)
        return tg_fail(e, "tensor map for %s: the map's own address %p is not 64-byte aligned", t->name, (const void *)map);
    if (t->rank < 1 || t->rank > TMA_MAX_RANK)
        return tg_fail(e, "tensor map for %s: rank %d; 1 to %d dimensions are supported", t->name, t->rank, TMA_MAX_RANK);
    if (!t->base || (uintptr_t)t->base % 16)
        return tg_fail(e, "tensor map for %s: global address %p is not 16-byte aligned", t->name, t->base);
    for (int d = 0; d < t->rank; d++) {
        if (t->dim[d] < 1 || t->dim[d] > ((uint64_t)1 << 32))
            return tg_fail(e, "tensor map for %s: dimension %d has %" PRIu64 " elements; 1 to 2^32 are allowed", t->name, d,
                           t->dim[d]);
        if (d == 0) continue;
        if (t->stride[d] % 16)
            return tg_fail(e, "tensor map for %s: the stride of dimension %d is %" PRIu64 " bytes, not a multiple of 16",
                           t->name, d, t->stride[d]);
        if (t->stride[d] >= ((uint64_t)1 << 40))
            return tg_fail(e, "tensor map for %s: the stride of dimension %d is %" PRIu64 " bytes, not below 2^40", t->name, d,
                           t->stride[d]);
    }
    return check_box(t, e);
}

/* The driver's cuTensorMapEncodeTiled, or NULL with e saying why. */
static encode_tiled_fn driver_encode(const char *name, tg_err *e) {
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    const cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found);
#else
    const cudaError_t err = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &found);
#endif
    if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || !fn) {
        tg_fail(e, "tensor map for %s: the driver offers no cuTensorMapEncodeTiled (%s, query result %d); tensor maps need "
                   "a driver for CUDA 12.0 or later",
                name, cudaGetErrorString(err), (int)found);
        return NULL;
    }
    return (encode_tiled_fn)fn;
}

int tma_map_bf16(CUtensorMap *map, const tma_tensor *t, tg_err *e) {
    if (check_tensor(map, t, e)) return -1;
    encode_tiled_fn encode = driver_encode(t->name, e);
    if (!encode) return -1;
    cuuint64_t dim[TMA_MAX_RANK], stride[TMA_MAX_RANK];
    cuuint32_t box[TMA_MAX_RANK], unit[TMA_MAX_RANK];
    for (int d = 0; d < t->rank; d++) {
        dim[d] = t->dim[d];
        box[d] = t->box[d];
        unit[d] = 1;
        if (d) stride[d - 1] = t->stride[d]; /* the driver's array starts at dimension 1 */
    }
    const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, (cuuint32_t)t->rank, (void *)(uintptr_t)t->base, dim,
                              stride, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, (CUtensorMapSwizzle)swizzle_mode(t->swizzle),
                              CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return tg_fail(e, "tensor map for %s: cuTensorMapEncodeTiled refused it with CUresult %d", t->name, (int)r);
    return 0;
}

int tma_map_heads(CUtensorMap *map, const char *name, const void *base, int B, int T, int NH, int HS, size_t row_elems,
                  int box_rows, int box_cols, int swizzle, tg_err *e) {
    if (B < 1 || T < 1 || NH < 1 || HS < 1 || row_elems < (size_t)NH * (size_t)HS)
        return tg_fail(e, "tensor map for %s: shape B=%d T=%d NH=%d HS=%d with rows %zu elements apart is not a heads view",
                       name, B, T, NH, HS, row_elems);
    const uint64_t row = (uint64_t)row_elems * BF16_BYTES;
    const tma_tensor t = {.name = name,
                          .base = base,
                          .rank = 4,
                          .dim = {(uint64_t)HS, (uint64_t)NH, (uint64_t)T, (uint64_t)B},
                          .stride = {BF16_BYTES, (uint64_t)HS * BF16_BYTES, row, row * (uint64_t)T},
                          .box = {(uint32_t)box_cols, 1, (uint32_t)box_rows, 1},
                          .swizzle = swizzle};
    return tma_map_bf16(map, &t, e);
}
