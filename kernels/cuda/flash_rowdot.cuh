/* D = rowsum(dout * out), the attention backward's first pass
 * (flash_bwd.cu): a float a query row, before any tile kernel reads it.
 * Included by flash_bwd.cu only. */
#ifndef KERNELS_CUDA_FLASH_ROWDOT_CUH
#define KERNELS_CUDA_FLASH_ROWDOT_CUH

#include "kernels/cuda/flash.cuh"
#include "kernels/cuda/flash_bwd_mma.cuh"

namespace {

/* dout . out over HS elements from `row`, in index order. */
template <typename E>
static __device__ float rowdot(const E *dout, const E *out, size_t row, int HS) {
    float s = 0.0f;
    for (int i = 0; i < HS; i++) s += tg_load(dout, row + i) * tg_load(out, row + i);
    return s;
}
/* The same sum, by 16-byte loads where the rows allow them. */
static __device__ float rowdot(const __nv_bfloat16 *dout, const __nv_bfloat16 *out, size_t row, int HS) {
    const uintptr_t at = (uintptr_t)(dout + row) | (uintptr_t)(out + row);
    if (HS % 8 != 0 || at % 16 != 0) return rowdot<__nv_bfloat16>(dout, out, row, HS);
    float s = 0.0f;
    for (int i = 0; i < HS; i += 8) {
        float x[8], y[8];
        fb_load8(x, dout + row + i);
        fb_load8(y, out + row + i);
#pragma unroll
        for (int k = 0; k < 8; k++) s += x[k] * y[k];
    }
    return s;
}

/* D[p * T + t] = dout . out over the head's HS columns, one thread per row. */
template <typename E>
__global__ void flash_rowdot_kernel(float *D, const E *dout, const E *out, int p0, int np, int T, int NH, int HS) {
    const size_t n = (size_t)np * T;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        const int j = (int)(e / T), t = (int)(e % T), p = p0 + j, b = p / NH, h = p % NH;
        D[e] = rowdot(dout, out, ((size_t)b * T + t) * NH * HS + (size_t)h * HS, HS);
    }
}

} // namespace

#endif
