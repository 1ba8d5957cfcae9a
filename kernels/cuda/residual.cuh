/* The residual connection's per-element arithmetic, shared by
 * bias_residual_add (residual.cu) and its fusion with the LayerNorm after it
 * (residual_ln.cu), so that both compute each element with the same code.
 * Dropout factors come from rng_dropout_scale with the CPU's counter
 * (row0 + n) * C + c, so masks are bit-identical; the scale is applied with
 * __fmul_rn so it is never fused with the residual add (as on the CPU). */
#ifndef KERNELS_CUDA_RESIDUAL_CUH
#define KERNELS_CUDA_RESIDUAL_CUH

#include "kernels/ops.h"
#include "util/rng_core.h"

/* The dropout factor of element (n, c) of a site with C columns. */
static __device__ __forceinline__ float dropout_scale(const tg_dropout &drop, size_t n, size_t c, int C) {
    return rng_dropout_scale(drop.p, drop.seed, tg_dropout_stream(&drop), (drop.row0 + (uint64_t)n) * (uint64_t)C + (uint64_t)c);
}

/* v times element (n, c)'s dropout factor (v itself without dropout). */
static __device__ __forceinline__ float dropped(float v, const tg_dropout &drop, size_t n, size_t c, int C) {
    return drop.p > 0.0f ? __fmul_rn(v, dropout_scale(drop, n, c, C)) : v;
}

/* out[i] = dropout(x[i] + bias[c]) + res[i] for element i = (n, c). */
static __device__ __forceinline__ float bias_residual(float x, float bias, float res, const tg_dropout &drop, size_t n,
                                                      size_t c, int C) {
    return dropped(x + bias, drop, n, c, C) + res;
}

#endif
