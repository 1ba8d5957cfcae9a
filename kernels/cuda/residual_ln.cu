/* bias + dropout + residual fused with the LayerNorm that reads its output
 * (bias_residual_layernorm), bitwise what bias_residual_add (residual.cu)
 * then layernorm_forward (layernorm.cu) give: both kernels' per-element and
 * per-row arithmetic is shared code (residual.cuh, layernorm.cuh).
 * One warp per row, up to 8 rows per block:
 *   1. the residual row: inputs read once, each element rounded to the
 *      activation type, stored to out and to the warp's row in shared memory;
 *   2. mean and 1/std from the shared row, in layernorm_forward's order
 *      (lane l sums columns l, l + 32, ...): the order of the lanes' partial
 *      sums is what makes the bits equal, so the row is staged in shared
 *      memory rather than kept in the registers of the lanes that loaded it;
 *   3. the normalized row, from the shared row, to ln_out.
 * So out is written once and never read back. Global accesses in 16-byte
 * packs (vec.cuh) where every pointer is aligned and rows hold whole packs,
 * else element by element. Each lane reads its elements of x and res before
 * writing them to out, so out may alias either.
 * Shared memory: ROW_SMEM_BYTES per block (static: the emulation has no
 * dynamic shared memory), 24 KiB: 8 such blocks of 8 warps, a full SM,
 * fit in Hopper's 228 KiB (6 in an A100's 164), so shared memory is not
 * what limits occupancy there. Rows per block: what fits of C (8 up to
 * C = 768 in float32, 1536 in bf16). A row over 24 KiB (C > 6144 in
 * float32, 12288 in bf16) runs the two unfused kernels instead. */
#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/layernorm.cuh"
#include "kernels/cuda/residual.cuh"
#include "kernels/cuda/vec.cuh"

#define ROWS_MAX 8                     /* warps (rows) per block */
#define ROW_SMEM_BYTES (24u << 10)     /* shared memory for the block's rows */

namespace {

/* Elements between two rows in shared memory: whole 16-byte packs, so that
 * every row starts aligned. */
template <typename T>
size_t row_stride(int C) {
    constexpr size_t P = vec_pack<T>::N;
    return ((size_t)C + P - 1) / P * P;
}

/* One pack of step 1: columns [c, c + P) of row n. */
template <typename T>
__device__ __forceinline__ vec_pack<T> residual_pack(const vec_pack<T> &xv, const vec_pack<T> &bv, const vec_pack<T> &rv,
                                                     const tg_dropout &drop, int n, int c, int C) {
    vec_pack<T> y;
#pragma unroll
    for (int j = 0; j < vec_pack<T>::N; j++)
        tg_store(y.e, j, bias_residual(tg_load(xv.e, j), tg_load(bv.e, j), tg_load(rv.e, j), drop, n, c + j, C));
    return y;
}

/* Step 1 for row n of C columns at element `base`: out and the shared row. */
template <typename T>
__device__ __forceinline__ void residual_row(T *out, T *row, const T *x, const T *bias, const T *res, size_t base, int n,
                                             int C, int lane, bool packs, const tg_dropout &drop) {
    constexpr int P = vec_pack<T>::N;
    if (packs) {
        for (int c = lane * P; c < C; c += 32 * P) {
            const vec_pack<T> xv = vec_load(x + base + c), bv = vec_load(bias + c), rv = vec_load(res + base + c);
            const vec_pack<T> y = residual_pack(xv, bv, rv, drop, n, c, C);
            vec_store(out + base + c, y);
            vec_store(row + c, y);
        }
        return;
    }
    for (int c = lane; c < C; c += 32) {
        const float v = bias_residual(tg_load(x, base + c), tg_load(bias, c), tg_load(res, base + c), drop, n, c, C);
        tg_store(out, base + c, v);
        tg_store(row, c, v);
    }
}

/* Step 1 in packs without dropout, for rows of at most MAXP packs a lane
 * (C <= 32 P MAXP): the lane's packs of x and res all loaded before any is
 * used. In residual_row's loop each pack's loads came after the last
 * pack's store to out (which may be x or res), a memory latency per pack,
 * with one pack of loads in flight per warp. bias, every row's, still
 * comes pack by pack from cache (held too, it cost the 8-pack instance a
 * spill at 128 registers). Still every element read before the lane
 * writes it, and bias_residual's arithmetic: the same bits. Runs with
 * dropout keep residual_row (the draws unrolled over the held packs cost
 * registers: 126 against 112 at 4 packs in bf16, both unbounded). */
template <typename T, int MAXP>
__device__ __forceinline__ void residual_row_held(T *out, T *row, const T *x, const T *bias, const T *res, size_t base, int n,
                                                  int C, int lane) {
    constexpr int P = vec_pack<T>::N;
    const tg_dropout none = {}; /* p 0: bias_residual's dropout folds away */
    vec_pack<T> xv[MAXP], rv[MAXP];
#pragma unroll
    for (int i = 0; i < MAXP; i++) {
        const int c = (lane + 32 * i) * P;
        if (c < C) xv[i] = vec_load(x + base + c), rv[i] = vec_load(res + base + c);
    }
#pragma unroll
    for (int i = 0; i < MAXP; i++) {
        const int c = (lane + 32 * i) * P;
        if (c >= C) break;
        const vec_pack<T> y = residual_pack(xv[i], vec_load(bias + c), rv[i], none, n, c, C);
        vec_store(out + base + c, y);
        vec_store(row + c, y);
    }
}

/* Step 3: ln_out[base + c] from the shared row. */
template <typename T>
__device__ __forceinline__ void normalized_row(T *ln_out, const T *row, const T *w, const T *b, size_t base, int C, int lane,
                                               bool packs, float m, float s) {
    constexpr int P = vec_pack<T>::N;
    if (packs) {
        for (int c = lane * P; c < C; c += 32 * P) {
            const vec_pack<T> v = vec_load(row + c), wv = vec_load(w + c), bv = vec_load(b + c);
            vec_pack<T> y;
#pragma unroll
            for (int j = 0; j < P; j++)
                tg_store(y.e, j, ln_value(tg_load(v.e, j), m, s, tg_load(wv.e, j), tg_load(bv.e, j)));
            vec_store(ln_out + base + c, y);
        }
        return;
    }
    for (int c = lane; c < C; c += 32)
        tg_store(ln_out, base + c, ln_value(tg_load(row, c), m, s, tg_load(w, c), tg_load(b, c)));
}

/* Block: blockDim.x / 32 rows, one per warp, each at `stride` elements
 * from the last in shared memory. MAXP > 0: rows in packs without
 * dropout, step 1 by residual_row_held. Bounded to 3 blocks an SM at 4
 * packs (80 registers in bf16 on sm_90a), 2 at 8 (100), 6 for the loop
 * (40), by ptxas without spills (4 and 3 spilled). */
template <typename T, int MAXP>
__global__ void __launch_bounds__(ROWS_MAX * 32, MAXP == 4 ? 3 : MAXP == 8 ? 2 : 6)
    bias_residual_layernorm_kernel(T *out, T *ln_out, float *mean, float *rstd, const T *x, const T *bias, const T *res,
                                   const T *w, const T *b, int N, int C, int stride, bool packs, tg_dropout drop) {
    drop = tg_dropout_read_step(drop);
    __shared__ __align__(16) T rows[ROW_SMEM_BYTES / sizeof(T)];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int n = blockIdx.x * (blockDim.x / 32) + warp;
    if (n >= N) return; /* the whole warp leaves together; no block-wide barrier follows */
    T *row = rows + (size_t)warp * stride;
    const size_t base = (size_t)n * C;
    if constexpr (MAXP > 0) residual_row_held<T, MAXP>(out, row, x, bias, res, base, n, C, lane);
    else residual_row(out, row, x, bias, res, base, n, C, lane, packs, drop);
    __syncwarp(); /* the lanes read each other's elements of the row from here on */
    float m, s;
    ln_row_stats(row, lane, C, &m, &s);
    normalized_row(ln_out, row, w, b, base, C, lane, packs, m, s);
    if (lane == 0) {
        mean[n] = m;
        rstd[n] = s;
    }
}

/* Rows per block of width C: 0 when one row does not fit. */
template <typename T>
int rows_per_block(int C) {
    const size_t fit = ROW_SMEM_BYTES / (row_stride<T>(C) * sizeof(T));
    return fit < ROWS_MAX ? (int)fit : ROWS_MAX;
}

/* The launch of the MAXP instance. */
template <typename T, int MAXP>
void bias_residual_layernorm_launch(cudaStream_t stream, int rows, T *out, T *ln_out, float *mean, float *rstd, const T *x,
                                    const T *bias, const T *res, const T *w, const T *b, int N, int C, bool packs,
                                    tg_dropout drop) {
    bias_residual_layernorm_kernel<T, MAXP><<<tg_blocks((size_t)N, (unsigned)rows), 32 * rows, 0, stream>>>(
        out, ln_out, mean, rstd, x, bias, res, w, b, N, C, (int)row_stride<T>(C), packs, drop);
    CUDA_LAUNCHED("bias_residual_layernorm_kernel");
}

template <typename T>
void bias_residual_layernorm(cudaStream_t stream, void *out, void *ln_out, float *mean, float *rstd, const void *x,
                             const void *bias, const void *res, const void *w, const void *b, int N, int C, tg_dropout drop) {
    const int rows = rows_per_block<T>(C);
    const bool packs = vec_rows<T>(C, out, x, res, ln_out) && vec_aligned(bias, w, b);
    const int held = drop.p > 0.0f ? 0 : vec_held_packs<T>(C, packs); /* with dropout: the loop */
    const auto launch = held == 4   ? bias_residual_layernorm_launch<T, 4>
                        : held == 8 ? bias_residual_layernorm_launch<T, 8>
                                    : bias_residual_layernorm_launch<T, 0>;
    launch(stream, rows, (T *)out, (T *)ln_out, mean, rstd, (const T *)x, (const T *)bias, (const T *)res, (const T *)w,
           (const T *)b, N, C, packs, drop);
}

} // namespace

void cuda_bias_residual_layernorm(tg_o o, void *out, void *ln_out, float *mean, float *rstd, const void *x, const void *bias,
                                  const void *res, const void *w, const void *b, int N, int C, tg_dropout drop) {
    if (N <= 0 || C <= 0) return;
    const bool bf16 = o->act == TG_BF16;
    if ((bf16 ? rows_per_block<__nv_bfloat16>(C) : rows_per_block<float>(C)) == 0) {
        /* a row too wide for shared memory: the same result in two passes */
        cuda_bias_residual_add(o, out, x, bias, res, N, C, drop);
        cuda_layernorm_forward(o, ln_out, mean, rstd, out, w, b, N, C);
        return;
    }
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (bf16) bias_residual_layernorm<__nv_bfloat16>(stream, out, ln_out, mean, rstd, x, bias, res, w, b, N, C, drop);
    else bias_residual_layernorm<float>(stream, out, ln_out, mean, rstd, x, bias, res, w, b, N, C, drop);
}
