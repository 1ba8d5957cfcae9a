/* The attention backward's CUDA-core kernels (flash_bwd.cu's flavour for
 * float32 activations and head sizes without a tensor-core instance):
 * float32 tiles of FL_TILE rows (flash.cuh), the CPU twin's arithmetic in
 * a fixed order; one block per query tile for dq over its key tiles, one
 * per key tile for dk and dv over its query tiles (each recomputes P).
 * Their launches are flash_bwd.cu's (the emulation finds launches in .cu
 * files). */
#ifndef KERNELS_CUDA_FLASH_BWD_CORE_CUH
#define KERNELS_CUDA_FLASH_BWD_CORE_CUH

#include "kernels/cuda/flash.cuh"

namespace {

/* One query tile against one key tile, both staged: s = scale q k^T and
 * dp = dout v^T in; out: s = P * keep, dp = dS (0 where masked). lse and
 * D hold the query rows' statistics. */
static __device__ void tile_gradients(fl_square s, fl_square dp, const fl_tile q, const fl_tile k, const fl_tile g,
                                      const fl_tile v, const float *lse, const float *D, int q0, int k0, int b, int h, int T,
                                      int HS, float scale, const tg_dropout &drop) {
    fl_products(s, q, k, HS, scale);
    fl_products(dp, g, v, HS, 1.0f);
    /* no barrier: each thread reads back only the elements it wrote (the same e) */
    for (int e = threadIdx.x; e < FL_TILE * FL_TILE; e += blockDim.x) {
        const int r = e / FL_TILE, c = e % FL_TILE;
        float kept = 0.0f, ds = 0.0f;
        if (fl_visible(q0, r, k0, c, T)) {
            const float prob = expf(s[r][c] - lse[r]), keep = fl_drop(drop, b, h, q0 + r, k0 + c, T);
            kept = prob * keep;
            ds = prob * (dp[r][c] * keep - D[r]) * scale;
        }
        s[r][c] = kept;
        dp[r][c] = ds;
    }
    __syncthreads();
}

/* The statistics of query rows [q0, q0 + FL_TILE) of pair j of the chunk. */
static __device__ void load_row_stats(float *lse_t, float *D_t, const float *lse, const float *D, int p, int j, int q0, int T) {
    if (threadIdx.x >= FL_TILE) return;
    const int t = q0 + threadIdx.x;
    lse_t[threadIdx.x] = t < T ? lse[(size_t)p * T + t] : 0.0f;
    D_t[threadIdx.x] = t < T ? D[(size_t)j * T + t] : 0.0f;
}

/* dq of one query tile: key tiles up to the diagonal. */
template <typename E>
__global__ void __launch_bounds__(FL_THREADS)
    flash_dq_kernel(E *dqkv, const E *dout, const E *qkv, const float *lse, const float *D, int p0, int T, int NH, int HS,
                    float scale, tg_dropout drop) {
    drop = tg_dropout_read_step(drop);
    __shared__ fl_tile q, g, k, v;
    __shared__ fl_square s, dp;
    __shared__ float lse_t[FL_TILE], D_t[FL_TILE];
    const int q0 = blockIdx.x * FL_TILE, j = blockIdx.y, p = p0 + j, b = p / NH, h = p % NH, C = NH * HS;
    fl_load_tile(q, qkv, 3 * C, h * HS, b, q0, T, HS);
    fl_load_tile(g, dout, C, h * HS, b, q0, T, HS);
    load_row_stats(lse_t, D_t, lse, D, p, j, q0, T);
    float acc[FL_COLS];
#pragma unroll
    for (int c = 0; c < FL_COLS; c++) acc[c] = 0.0f;
    const int k_end = fl_min(q0 + FL_TILE, T);
    for (int k0 = 0; k0 < k_end; k0 += FL_TILE) {
        __syncthreads();
        fl_load_tile(k, qkv, 3 * C, C + h * HS, b, k0, T, HS);
        fl_load_tile(v, qkv, 3 * C, 2 * C + h * HS, b, k0, T, HS);
        __syncthreads();
        tile_gradients(s, dp, q, k, g, v, lse_t, D_t, q0, k0, b, h, T, HS, scale, drop);
        fl_accumulate(acc, dp, k, HS, false);
    }
    fl_store_row(dqkv, acc, 3 * C, h * HS, b, q0, T, HS, 1.0f);
}

/* dk and dv of one key tile: query tiles from the diagonal to T. */
template <typename E>
__global__ void __launch_bounds__(FL_THREADS)
    flash_dkv_kernel(E *dqkv, const E *dout, const E *qkv, const float *lse, const float *D, int p0, int T, int NH, int HS,
                     float scale, tg_dropout drop) {
    drop = tg_dropout_read_step(drop);
    __shared__ fl_tile q, g, k, v;
    __shared__ fl_square s, dp;
    __shared__ float lse_t[FL_TILE], D_t[FL_TILE];
    const int k0 = blockIdx.x * FL_TILE, j = blockIdx.y, p = p0 + j, b = p / NH, h = p % NH, C = NH * HS;
    fl_load_tile(k, qkv, 3 * C, C + h * HS, b, k0, T, HS);
    fl_load_tile(v, qkv, 3 * C, 2 * C + h * HS, b, k0, T, HS);
    float dk[FL_COLS], dv[FL_COLS];
#pragma unroll
    for (int c = 0; c < FL_COLS; c++) dk[c] = dv[c] = 0.0f;
    for (int q0 = k0; q0 < T; q0 += FL_TILE) { /* k0 is tile-aligned: the diagonal tile starts at k0 */
        __syncthreads();
        fl_load_tile(q, qkv, 3 * C, h * HS, b, q0, T, HS);
        fl_load_tile(g, dout, C, h * HS, b, q0, T, HS);
        load_row_stats(lse_t, D_t, lse, D, p, j, q0, T);
        __syncthreads();
        tile_gradients(s, dp, q, k, g, v, lse_t, D_t, q0, k0, b, h, T, HS, scale, drop);
        fl_accumulate(dv, s, g, HS, true);
        fl_accumulate(dk, dp, q, HS, true);
    }
    fl_store_row(dqkv, dk, 3 * C, C + h * HS, b, k0, T, HS, 1.0f);
    fl_store_row(dqkv, dv, 3 * C, 2 * C + h * HS, b, k0, T, HS, 1.0f);
}

} // namespace

#endif
