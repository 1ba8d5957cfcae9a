/* The LayerNorm forward's row arithmetic, shared by layernorm_forward
 * (layernorm.cu) and its fusion with the residual add before it
 * (residual_ln.cu), so that both give the same bits: one warp per row, lane
 * l sums columns l, l + 32, ... in order, the warp combines the lanes by a
 * butterfly; two passes (mean, then the variance of the centred values,
 * biased), eps 1e-5. */
#ifndef KERNELS_CUDA_LAYERNORM_CUH
#define KERNELS_CUDA_LAYERNORM_CUH

#include "kernels/cuda/kernels.h"
#include "kernels/cuda/reduce.cuh"

#define LN_EPS 1e-5f

/* The mean *m and 1/std *s of row x[0, C), in every lane of the warp. */
template <typename T>
static __device__ __forceinline__ void ln_row_stats(const T *x, int lane, int C, float *m, float *s) {
    const tg_reduce::sum_op add;
    float sum = 0.0f;
    for (int c = lane; c < C; c += 32) sum += tg_load(x, c);
    const float mean = tg_reduce::warp_reduce(sum, add) / C;
    float var = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = tg_load(x, c) - mean;
        var += d * d;
    }
    *m = mean;
    *s = 1.0f / sqrtf(tg_reduce::warp_reduce(var, add) / C + LN_EPS);
}

/* One normalized element: x of a row with mean m and 1/std s, weight w, bias b. */
static __device__ __forceinline__ float ln_value(float x, float m, float s, float w, float b) { return (x - m) * s * w + b; }

#endif
