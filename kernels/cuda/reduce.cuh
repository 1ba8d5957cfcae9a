/* The CUDA kernels' reductions within a block, and the row groups of the
 * column sums, in one place. Each combines its values in a fixed order, so
 * results are reproducible run to run. */
#ifndef KERNELS_CUDA_REDUCE_CUH
#define KERNELS_CUDA_REDUCE_CUH

#include <math.h>
#include <stddef.h>

#include "kernels/cuda/cuda_ctx.h"

/* The column sums' blocks (bias gradients, residual.cu; LayerNorm's dw and
 * db, layernorm.cu): COL_TILE columns (or packs of columns) x COL_ROWS
 * thread rows, each thread row summing every COL_ROWS-th row of a group. */
#define COL_TILE 32
#define COL_ROWS 8
#define GROUP_ROWS_MIN 64 /* rows a group has, unless few rows ask for more groups (row_groups_of) */
#define GROUPS_MAX 1024

namespace tg_reduce {

/* Rows cut into groups for a column sum without atomics: each group's sums
 * go to a partial in the context's scratch, then the groups are added in
 * order. GROUP_ROWS_MIN rows a group, or fewer, down to min_rows, where
 * that leaves under `fill` groups (a kernel with a block per group needs
 * enough blocks; 0: never); at most GROUPS_MAX groups, and at most `fit`,
 * the partials the scratch holds (none: `what` fails). Depends on its
 * arguments only, so the sums' order does not depend on the device. */
struct row_groups {
    int rows_per_group, n_groups;
};
static inline row_groups row_groups_of(size_t N, size_t fit, size_t min_rows, size_t fill, const char *what) {
    if (fit < 1) cuda_fail(cudaErrorMemoryAllocation, what, __FILE__, __LINE__);
    size_t groups = (N + GROUP_ROWS_MIN - 1) / GROUP_ROWS_MIN;
    const size_t few = (N + min_rows - 1) / min_rows, want = few < fill ? few : fill;
    if (groups < want) groups = want;
    if (groups > GROUPS_MAX) groups = GROUPS_MAX;
    if (groups > fit) groups = fit;
    const int rows_per_group = (int)((N + groups - 1) / groups);
    return {rows_per_group, (int)((N + rows_per_group - 1) / rows_per_group)};
}

struct sum_op {
    __device__ float operator()(float a, float b) const { return a + b; }
};
struct max_op {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/* Reduction over the 32 lanes of a warp by a butterfly, returned to every lane. */
template <typename Op>
__device__ __forceinline__ float warp_reduce(float v, Op op) {
    for (int off = 16; off > 0; off /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

/* Reduction over the block (blockDim.x a multiple of 32), returned to every
 * thread: a butterfly within each warp, then every warp combines the warp
 * results the same way. */
template <typename Op>
__device__ float block_reduce(float v, Op op, float identity) {
    __shared__ float warp_vals[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = warp_reduce(v, op);
    __syncthreads(); /* a previous call may still be reading warp_vals */
    if (lane == 0) warp_vals[warp] = v;
    __syncthreads();
    v = lane < warps ? warp_vals[lane] : identity;
    return warp_reduce(v, op);
}

/* Sum of the block's THREADS values vals[threadIdx.x] in a fixed tree; the
 * result is in vals[0] after the call (all threads must call it). */
template <int THREADS, typename V>
__device__ void block_tree_sum(V *vals) {
    for (int stride = THREADS / 2; stride > 0; stride /= 2) {
        __syncthreads();
        if ((int)threadIdx.x < stride) vals[threadIdx.x] += vals[threadIdx.x + stride];
    }
    __syncthreads();
}

/* Column threadIdx.x of a [ROWS][COLS] shared tile of per-thread-row partial
 * sums, added in row order (after a __syncthreads). */
template <int ROWS, int COLS>
__device__ __forceinline__ float tile_column_sum(const float (&part)[ROWS][COLS]) {
    float s = 0.0f;
    for (int k = 0; k < ROWS; k++) s += part[k][threadIdx.x];
    return s;
}

/* The finish of a column sum over row groups, block-wide (every thread of
 * a block of STAGE_THREADS calls it; block b owns columns [STAGE_COLS b,
 * + STAGE_COLS)): dst[c] (+)= (acc: adds, else writes) the sum over g = 0 .. groups - 1 of
 * partial[g * C + c], added in g's order (a plain loop's bits), for the
 * block's columns below C. STAGE_GROUPS groups of its columns at a time are
 * staged in `stage`, every thread loading STAGE_LOADS of them at once; a
 * thread per column then adds its staged values. Where a thread per column
 * loaded its own groups (16 at a time), each sum waited a memory latency
 * per 16 groups, on only C threads. */
#define STAGE_COLS 32
#define STAGE_GROUPS 256
#define STAGE_THREADS 256
#define STAGE_LOADS (STAGE_GROUPS * STAGE_COLS / STAGE_THREADS)
typedef float staged_groups[STAGE_GROUPS][STAGE_COLS]; /* 32 KiB */

__device__ __forceinline__ void add_staged_groups_sum(staged_groups stage, float *dst, const float *partial, int groups, int C,
                                                      bool acc) {
    const int t = (int)threadIdx.x, col = t % STAGE_COLS, c = (int)blockIdx.x * STAGE_COLS + col, row = t / STAGE_COLS;
    float sum = 0.0f;
    for (int g0 = 0; g0 < groups; g0 += STAGE_GROUPS) {
        const int n = groups - g0 < STAGE_GROUPS ? groups - g0 : STAGE_GROUPS;
        float v[STAGE_LOADS];
#pragma unroll
        for (int i = 0; i < STAGE_LOADS; i++) { /* staged row k: group g0 + k */
            const int k = row + i * (STAGE_THREADS / STAGE_COLS);
            v[i] = k < n && c < C ? partial[(size_t)(g0 + k) * C + c] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < STAGE_LOADS; i++) stage[row + i * (STAGE_THREADS / STAGE_COLS)][col] = v[i];
        __syncthreads();
        if (t < STAGE_COLS)
            for (int k = 0; k < n; k++) sum += stage[k][col];
        __syncthreads(); /* the stage is free again, for the next round or the next call */
    }
    if (t < STAGE_COLS && c < C) dst[c] = (acc ? dst[c] : 0.0f) + sum;
}

} // namespace tg_reduce

#endif
