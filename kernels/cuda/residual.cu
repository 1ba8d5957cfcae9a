/* Residual-stream vector ops: bias + dropout + residual, dropout, and
 * the bias gradient (column sums), as kernels/cpu/vector.c and matmul.c.
 * Elementwise ops: grid-stride loops over 16-byte packs where the buffers
 * are aligned and rows hold whole packs (kernels/cuda/vec.cuh), then element
 * by element; each thread reads its elements' inputs before writing them,
 * so out may alias an input.
 * Dropout masks and the per-element arithmetic: kernels/cuda/residual.cuh.
 * Bias gradient: blocks of 32 columns (or 32 packs of columns, by 16-byte
 * loads, where dout is aligned and rows hold whole packs; the same bits) x
 * 8 thread rows each sum one fixed group of rows into a per-group partial
 * in ctx scratch (thread rows combined in a fixed order); a second kernel
 * adds the groups' partials column by column in group order, then to dbias.
 * No atomics. */
#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/residual.cuh"
#include "kernels/cuda/strided_loads.cuh"
#include "kernels/cuda/vec.cuh"

#define COL_LOADS 8 /* 16-byte loads in flight a thread in the column partials: a group of GROUP_ROWS_MIN rows gives each 8 */

namespace {

/* Packs [0, packs) (a pack never straddles two rows: C is a multiple of
 * its size when packs > 0), then elements [packs * P, total). */
template <typename T, typename I>
__global__ void bias_residual_add_kernel(T *out, const T *x, const T *bias, const T *res, int C, I total, I packs,
                                         tg_dropout drop) {
    drop = tg_dropout_read_step(drop);
    constexpr int P = vec_pack<T>::N;
    const I first = (I)blockIdx.x * blockDim.x + threadIdx.x, stride = (I)gridDim.x * blockDim.x;
    for (I k = first; k < packs; k += stride) {
        const I i = k * P, n = i / (I)C, c = i - n * (I)C;
        const vec_pack<T> xv = vec_load(x + i), bv = vec_load(bias + c), rv = vec_load(res + i);
        vec_pack<T> y;
#pragma unroll
        for (int j = 0; j < P; j++)
            tg_store(y.e, j, bias_residual(tg_load(xv.e, j), tg_load(bv.e, j), tg_load(rv.e, j), drop, n, c + j, C));
        vec_store(out + i, y);
    }
    for (I i = packs * P + first; i < total; i += stride) {
        const I n = i / (I)C, c = i - n * (I)C;
        tg_store(out, i, bias_residual(tg_load(x, i), tg_load(bias, c), tg_load(res, i), drop, n, c, C));
    }
}

template <typename T, typename I>
__global__ void dropout_kernel(T *out, const T *in, int C, I total, I packs, tg_dropout drop) {
    drop = tg_dropout_read_step(drop);
    constexpr int P = vec_pack<T>::N;
    const I first = (I)blockIdx.x * blockDim.x + threadIdx.x, stride = (I)gridDim.x * blockDim.x;
    for (I k = first; k < packs; k += stride) {
        const I i = k * P, n = i / (I)C, c = i - n * (I)C;
        const vec_pack<T> v = vec_load(in + i);
        vec_pack<T> y;
#pragma unroll
        for (int j = 0; j < P; j++) tg_store(y.e, j, dropped(tg_load(v.e, j), drop, n, c + j, C));
        vec_store(out + i, y);
    }
    for (I i = packs * P + first; i < total; i += stride) {
        const I n = i / (I)C, c = i - n * (I)C;
        tg_store(out, i, dropped(tg_load(in, i), drop, n, c, C));
    }
}

/* Packs of a [N, C] elementwise op: all of them when the pointers are
 * aligned and rows hold whole packs, else none. */
template <typename T>
size_t row_packs(size_t total, int C, const void *a, const void *b, const void *c, const void *d) {
    return vec_rows<T>(C, a, b, c, d) ? total / vec_pack<T>::N : 0;
}

/* Grid (column tiles, groups), block (COL_TILE, COL_ROWS): the block sums
 * rows [group * rows_per_group, +rows_per_group) of its columns into
 * partial[group * C + c]. */
template <typename T>
__global__ void column_partials_kernel(float *partial, const T *dout, int N, int C, int rows_per_group) {
    __shared__ float part[COL_ROWS][COL_TILE];
    int c = blockIdx.x * COL_TILE + threadIdx.x;
    int group = blockIdx.y;
    long long r_end = (long long)(group + 1) * rows_per_group;
    int row_end = r_end < N ? (int)r_end : N;
    float acc = 0.0f;
    if (c < C)
        for (int r = group * rows_per_group + threadIdx.y; r < row_end; r += COL_ROWS) acc += tg_load(dout, (size_t)r * C + c);
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) partial[(size_t)group * C + c] = tg_reduce::tile_column_sum(part);
}

/* The same sums with 16-byte loads (dout aligned, C a multiple of the pack):
 * thread x of a block takes the pack of columns [P x, + P) of the block's
 * COL_TILE packs, on the same rows as column_partials_kernel's thread row,
 * and the thread rows are added in the same order, so each partial has the
 * same bits; each warp load moves 512 bytes where one of scalars moves 32
 * elements. */
template <typename T>
__global__ void column_partials_packed_kernel(float *partial, const T *dout, int N, int C, int rows_per_group) {
    constexpr int P = vec_pack<T>::N, COLS = COL_TILE * P;
    __shared__ float part[COL_ROWS][COLS];
    const int c0 = blockIdx.x * COLS + threadIdx.x * P, group = blockIdx.y;
    const long long r_end = (long long)(group + 1) * rows_per_group;
    const int row_end = r_end < N ? (int)r_end : N;
    float acc[P];
#pragma unroll
    for (int j = 0; j < P; j++) acc[j] = 0.0f;
    /* The thread's rows in order, COL_LOADS loads in flight (strided_loads_first;
     * under `#pragma unroll 4` ptxas issued two, then the adds of the first) */
    if (c0 < C)
        strided_loads_first<COL_LOADS>(
            group * rows_per_group + (int)threadIdx.y, row_end, COL_ROWS,
            [&](int r) { return vec_load(dout + (size_t)r * C + c0); },
            [&](const vec_pack<T> &v) {
#pragma unroll
                for (int j = 0; j < P; j++) acc[j] += tg_load(v.e, j);
            });
#pragma unroll
    for (int j = 0; j < P; j++) part[threadIdx.y][threadIdx.x * P + j] = acc[j];
    __syncthreads();
    /* a column per thread: COLS is 256 in bf16 (every thread), 128 in fp32 */
    static_assert(COLS <= COL_TILE * COL_ROWS, "a thread for each of the block's columns");
    const int t = threadIdx.y * COL_TILE + threadIdx.x, c = blockIdx.x * COLS + t;
    if (t < COLS && c < C) {
        float sum = 0.0f;
        for (int k = 0; k < COL_ROWS; k++) sum += part[k][t];
        partial[(size_t)group * C + c] = sum;
    }
}

/* dbias[c] (+)= the sum over groups (in order) of partial[group * C + c]:
 * a block per STAGE_COLS columns (tg_reduce::add_staged_groups_sum). */
__global__ void __launch_bounds__(STAGE_THREADS)
    column_finish_kernel(float *dbias, const float *partial, int groups, int C, bool acc) {
    __shared__ tg_reduce::staged_groups stage;
    tg_reduce::add_staged_groups_sum(stage, dbias, partial, groups, C, acc);
}

template <typename T>
void bias_residual_add(cudaStream_t stream, void *out, const void *x, const void *bias, const void *res, int N, int C,
                       tg_dropout drop) {
    const size_t total = (size_t)N * C, packs = row_packs<T>(total, C, out, x, bias, res);
    const unsigned grid = vec_grid(total, vec_pack<T>::N);
    if (vec_index32(total, (size_t)grid * VEC_THREADS))
        bias_residual_add_kernel<T, uint32_t><<<grid, VEC_THREADS, 0, stream>>>((T *)out, (const T *)x, (const T *)bias,
                                                                                 (const T *)res, C, (uint32_t)total,
                                                                                 (uint32_t)packs, drop);
    else
        bias_residual_add_kernel<T, size_t><<<grid, VEC_THREADS, 0, stream>>>((T *)out, (const T *)x, (const T *)bias,
                                                                               (const T *)res, C, total, packs, drop);
    CUDA_LAUNCHED("bias_residual_add_kernel");
}

template <typename T>
void dropout(cudaStream_t stream, void *out, const void *in, int N, int C, tg_dropout drop) {
    const size_t total = (size_t)N * C, packs = row_packs<T>(total, C, out, in, NULL, NULL);
    const unsigned grid = vec_grid(total, vec_pack<T>::N);
    if (vec_index32(total, (size_t)grid * VEC_THREADS))
        dropout_kernel<T, uint32_t><<<grid, VEC_THREADS, 0, stream>>>((T *)out, (const T *)in, C, (uint32_t)total,
                                                                       (uint32_t)packs, drop);
    else dropout_kernel<T, size_t><<<grid, VEC_THREADS, 0, stream>>>((T *)out, (const T *)in, C, total, packs, drop);
    CUDA_LAUNCHED("dropout_kernel");
}

/* Row groups of GROUP_ROWS_MIN rows (a grid of column tiles x groups has
 * blocks enough), partials of one float per group and column. */
tg_reduce::row_groups bias_groups(const cuda_ctx *ctx, int N, int C) {
    return tg_reduce::row_groups_of((size_t)N, ctx->scratch_bytes / ((size_t)C * sizeof(float)), 1, 0,
                                    "bias backward: scratch for one row of partials");
}

template <typename T>
void bias_backward(cuda_ctx *ctx, float *dbias, const void *dout, int N, int C, bool acc) {
    const tg_reduce::row_groups gr = bias_groups(ctx, N, C);
    const int rows_per_group = gr.rows_per_group, n_groups = gr.n_groups;

    float *partial = (float *)ctx->scratch;
    constexpr int P = vec_pack<T>::N;
    const dim3 block(COL_TILE, COL_ROWS);
    if (vec_rows<T>(C, dout)) {
        const dim3 grid(tg_blocks((size_t)C, COL_TILE * P), (unsigned)n_groups);
        column_partials_packed_kernel<T><<<grid, block, 0, ctx->stream>>>(partial, (const T *)dout, N, C, rows_per_group);
        CUDA_LAUNCHED("column_partials_packed_kernel");
    } else {
        const dim3 grid(tg_blocks((size_t)C, COL_TILE), (unsigned)n_groups);
        column_partials_kernel<T><<<grid, block, 0, ctx->stream>>>(partial, (const T *)dout, N, C, rows_per_group);
        CUDA_LAUNCHED("column_partials_kernel");
    }
    const unsigned finish_blocks = tg_blocks((size_t)C, STAGE_COLS);
    column_finish_kernel<<<finish_blocks, STAGE_THREADS, 0, ctx->stream>>>(dbias, partial, n_groups, C, acc);
    CUDA_LAUNCHED("column_finish_kernel");
}

} // namespace

void cuda_bias_residual_add(tg_o o, void *out, const void *x, const void *bias, const void *res, int N, int C,
                            tg_dropout drop) {
    if (N <= 0 || C <= 0) return;
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (o->act == TG_BF16) bias_residual_add<__nv_bfloat16>(stream, out, x, bias, res, N, C, drop);
    else bias_residual_add<float>(stream, out, x, bias, res, N, C, drop);
}

void cuda_dropout(tg_o o, void *out, const void *in, int N, int C, tg_dropout drop) {
    if (N <= 0 || C <= 0) return;
    if (!(drop.p > 0.0f) && out == in) return; /* no dropout in place: nothing to do */
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (o->act == TG_BF16) dropout<__nv_bfloat16>(stream, out, in, N, C, drop);
    else dropout<float>(stream, out, in, N, C, drop);
}

size_t cuda_bias_backward_scratch(tg_o o, int N, int C) {
    if (N <= 0 || C <= 0) return 0;
    return (size_t)bias_groups(cuda_ctx_of(o), N, C).n_groups * (size_t)C * sizeof(float);
}

void cuda_bias_backward(tg_o o, float *dbias, const void *dout, int N, int C, bool acc) {
    if (C <= 0) return;
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (N <= 0) { /* no rows: an empty sum */
        if (!acc) CUDA_CHECK(cudaMemsetAsync(dbias, 0, (size_t)C * sizeof(float), ctx->stream));
        return;
    }
    if (o->act == TG_BF16) bias_backward<__nv_bfloat16>(ctx, dbias, dout, N, C, acc);
    else bias_backward<float>(ctx, dbias, dout, N, C, acc);
}
