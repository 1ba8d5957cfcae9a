/* LayerNorm over the last dim (eps 1e-5, biased variance), as
 * kernels/cpu/layernorm.c.
 * Forward: one warp per row; two-pass mean then variance of the centred
 * values, warp reductions by butterfly shuffles (kernels/cuda/layernorm.cuh,
 * shared with the fused residual + LayerNorm); mean and 1/std saved in
 * float32.
 * Backward (dinp added to, or written: dacc; dw and db added to, or written
 * on a step's first micro-batch: acc, in the finish), without atomics, in one pass
 * over the rows: the rows are cut into fixed groups, one block of 8 warps
 * each; a warp takes every 8th row of its group, reduces the row's two sums
 * of the dinp formula in the warp, adds each column's gradient to dinp and
 * its terms of dw and db to the warp's column sums in shared memory; the
 * block adds its warps' sums (in warp order) into a per-group partial in ctx
 * scratch, and a second kernel adds the groups' partials column by column in
 * group order. 16-byte loads and stores where every pointer is aligned and
 * rows hold whole packs. Rows too wide for the shared memory take three
 * kernels (dinp; partials by blocks of 32 columns x 8 thread rows; the sum),
 * which add dw and db in the same order, so the two paths give the same dw
 * and db bits.
 * The grouping depends only on N, C and the scratch size. */
#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/layernorm.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/vec.cuh"

#define ROW_THREADS 256 /* 8 warps: 8 rows per block */
#define LN_WARPS COL_ROWS /* the fused kernel's warp y adds the rows thread row y does: the same partials */
#define LN_SUMS_BATCH 4 /* elements whose dw and db sums are read at once (ln_pack_grad); 8 spilled at MAXP 4 */
#define GROUPS_FILL 256 /* blocks the backward wants at least, rows allowing: two for each SM of a 128-SM GPU */

namespace {

__device__ __forceinline__ float warp_sum(float v) { return tg_reduce::warp_reduce(v, tg_reduce::sum_op()); }

template <typename T>
__global__ void layernorm_forward_kernel(T *out, float *mean, float *rstd, const T *inp, const T *w, const T *b, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N) return; /* the whole warp leaves together */
    const T *x = inp + (size_t)row * C;
    float m, s;
    ln_row_stats(x, lane, C, &m, &s);
    T *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) tg_store(o, c, ln_value(tg_load(x, c), m, s, tg_load(w, c), tg_load(b, c)));
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

/* Where warp y keeps column c's running sums in the fused backward's shared
 * memory (each warp has its own `stride` floats for dw, and as many for db).
 * Element by element, lane l owns columns l, l + 32, ..., stored at c. In
 * packs of P, lane l owns columns [P (l + 32 i), + P), and element j of its
 * pack i is stored at 32 (P i + j) + l, so that the 32 lanes' updates of
 * one element hit 32 consecutive floats (32 banks, no conflict). */
struct ln_acc_layout {
    int P; /* 1: element by element; else the pack's elements */
    __device__ __forceinline__ int index(int c) const {
        if (P == 1) return c;
        const int pack = c / P, j = c % P, i = pack / 32, lane = pack % 32;
        return 32 * (P * i + j) + lane;
    }
};

/* The two row sums of the dinp formula, over the whole row, in every lane. */
struct ln_row_sums {
    float dn, dn_xhat; /* mean of w * dout, and of w * dout * xhat */
};

/* dinp of one row (d, g, x: the row's), element by element: lane l takes
 * columns l, l + 32, ...; added to d (dacc) or written there. With ACC,
 * also each column's terms of dw and db added to acc_w[c] and acc_b[c] (the
 * fused kernel); without, the row alone (layernorm_backward_dinp_kernel,
 * for rows too wide for the fused one). */
template <typename T, bool ACC>
__device__ __forceinline__ void ln_backward_row(T *d, float *acc_w, float *acc_b, const T *g, const T *x, const T *w, float m,
                                                float s, int C, int lane, bool dacc) {
    float sum_dn = 0.0f, sum_dn_xhat = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float xhat = (tg_load(x, c) - m) * s, dn = tg_load(w, c) * tg_load(g, c);
        sum_dn += dn;
        sum_dn_xhat += dn * xhat;
    }
    const ln_row_sums r = {warp_sum(sum_dn) / C, warp_sum(sum_dn_xhat) / C};
    for (int c = lane; c < C; c += 32) {
        const float gv = tg_load(g, c), xhat = (tg_load(x, c) - m) * s, dn = tg_load(w, c) * gv;
        tg_store(d, c, (dacc ? tg_load(d, c) : 0.0f) + (dn - r.dn - xhat * r.dn_xhat) * s);
        if (ACC) {
            acc_w[c] += xhat * gv;
            acc_b[c] += gv;
        }
    }
}

/* The pack of dinp its gradient is added to: d's (dacc), or zeros (written:
 * 0 + the gradient, the bits of an add onto a zeroed dinp). */
template <typename T>
__device__ __forceinline__ vec_pack<T> ln_dinp_pack(const T *d, bool dacc) {
    if (dacc) return vec_load(d);
    vec_pack<T> z;
#pragma unroll
    for (int j = 0; j < vec_pack<T>::N; j++) tg_store(z.e, j, 0.0f);
    return z;
}

/* One pack's terms of the two row sums (ln_row_sums before the mean). */
template <typename T>
__device__ __forceinline__ void ln_pack_sums(float &sum_dn, float &sum_dn_xhat, const vec_pack<T> &xv, const vec_pack<T> &gv,
                                             const vec_pack<T> &wv, float m, float s) {
#pragma unroll
    for (int j = 0; j < vec_pack<T>::N; j++) {
        const float xhat = (tg_load(xv.e, j) - m) * s, dn = tg_load(wv.e, j) * tg_load(gv.e, j);
        sum_dn += dn;
        sum_dn_xhat += dn * xhat;
    }
}

/* One pack's dinp (dv plus its gradient, returned) and its terms of dw and
 * db added to acc_w and acc_b at `at` (ln_acc_layout's index of the pack's
 * first element; element j at at + 32 j). The running sums of
 * LN_SUMS_BATCH elements are read before any of them is written back:
 * acc_w and acc_b lie in one array at a run-time distance, so the compiler
 * cannot tell them apart, and element by element each read waited for the
 * write before it (16 shared-memory latencies in turn a bf16 pack, where
 * this waits 2). The same adds. */
template <typename T>
__device__ __forceinline__ vec_pack<T> ln_pack_grad(float *acc_w, float *acc_b, int at, const vec_pack<T> &dv,
                                                    const vec_pack<T> &xv, const vec_pack<T> &gv, const vec_pack<T> &wv,
                                                    float m, float s, const ln_row_sums &r) {
    constexpr int P = vec_pack<T>::N, B = LN_SUMS_BATCH < P ? LN_SUMS_BATCH : P;
    static_assert(P % B == 0, "whole batches a pack");
    vec_pack<T> y;
#pragma unroll
    for (int j0 = 0; j0 < P; j0 += B) {
        float sum_w[B], sum_b[B];
#pragma unroll
        for (int j = 0; j < B; j++) sum_w[j] = acc_w[at + 32 * (j0 + j)], sum_b[j] = acc_b[at + 32 * (j0 + j)];
#pragma unroll
        for (int j = 0; j < B; j++) {
            const int e = j0 + j;
            const float ge = tg_load(gv.e, e), xhat = (tg_load(xv.e, e) - m) * s, dn = tg_load(wv.e, e) * ge;
            tg_store(y.e, e, tg_load(dv.e, e) + (dn - r.dn - xhat * r.dn_xhat) * s);
            sum_w[j] += xhat * ge;
            sum_b[j] += ge;
        }
#pragma unroll
        for (int j = 0; j < B; j++) acc_w[at + 32 * (j0 + j)] = sum_w[j], acc_b[at + 32 * (j0 + j)] = sum_b[j];
    }
    return y;
}

/* The same row in 16-byte packs (every pointer aligned, C a multiple of the
 * pack): lane l takes packs l, l + 32, ... The row sums add in another
 * order than element by element, so dinp may differ from that path in its
 * last bits; dw and db do not (each column adds its rows in the same order). */
template <typename T>
__device__ __forceinline__ void ln_backward_row_packed(T *d, float *acc_w, float *acc_b, const T *g, const T *x, const T *w,
                                                       float m, float s, int C, int lane, bool dacc) {
    constexpr int P = vec_pack<T>::N;
    float sum_dn = 0.0f, sum_dn_xhat = 0.0f;
    for (int c = lane * P; c < C; c += 32 * P)
        ln_pack_sums<T>(sum_dn, sum_dn_xhat, vec_load(x + c), vec_load(g + c), vec_load(w + c), m, s);
    const ln_row_sums r = {warp_sum(sum_dn) / C, warp_sum(sum_dn_xhat) / C};
    for (int c = lane * P, at = lane; c < C; c += 32 * P, at += 32 * P) {
        const vec_pack<T> dv = ln_dinp_pack(d + c, dacc), xv = vec_load(x + c), gv = vec_load(g + c), wv = vec_load(w + c);
        vec_store(d + c, ln_pack_grad<T>(acc_w, acc_b, at, dv, xv, gv, wv, m, s, r));
    }
}

/* The same row with its packs held in registers, for rows of at most MAXP
 * packs a lane (C <= 32 P MAXP): the loads of x, dout and dinp are all
 * issued before the arithmetic that waits for them, where the loop above
 * (its count known only at run time, so not unrolled: one pack's three
 * loads an iteration in the PTX) waits for each pack's loads in turn, a
 * memory latency per pack and pass. w, the same for every row, is read
 * pack by pack from the block's copy in shared memory. The same per-pack
 * arithmetic in the same order as the loop above (ln_pack_sums,
 * ln_pack_grad), so the same bits. Registers on sm_90a, bf16: MAXP 4 120
 * (held to 128: 2 blocks an SM; see layernorm_backward_fused_kernel), 8 203
 * (1 block; held to 128 it spills 244 bytes: the compiler unpacks each
 * bf16 into a register of its own as it arrives). */
template <typename T, int MAXP>
__device__ __forceinline__ void ln_backward_row_held(T *d, float *acc_w, float *acc_b, const T *g, const T *x, const T *w,
                                                     float m, float s, int C, int lane, bool dacc) {
    constexpr int P = vec_pack<T>::N;
    vec_pack<T> xv[MAXP], gv[MAXP], dv[MAXP];
#pragma unroll
    for (int i = 0; i < MAXP; i++) {
        /* Packs past the row's end load too, unused (the passes below skip
         * them): the row's first pack of x and dout, and of x for dinp,
         * which another lane writes. Behind `if (c < C)` ptxas gave each
         * pack's loads a basic block of their own, ending in the unpacking
         * of its bf16 pairs (PRMT), so a pack's loads issued only once the
         * pack before had arrived: a memory latency per pack (6 a row at
         * the 1.2B model's width). Without a branch, all of a row's loads
         * issue before the first use. */
        const int c = (lane + 32 * i) * P, at = c < C ? c : 0;
        xv[i] = vec_load(x + at), gv[i] = vec_load(g + at), dv[i] = ln_dinp_pack(c < C ? d + at : x + at, dacc);
    }
    float sum_dn = 0.0f, sum_dn_xhat = 0.0f;
#pragma unroll
    for (int i = 0; i < MAXP; i++) {
        const int c = (lane + 32 * i) * P;
        if (c >= C) break;
        ln_pack_sums<T>(sum_dn, sum_dn_xhat, xv[i], gv[i], vec_load(w + c), m, s);
    }
    const ln_row_sums r = {warp_sum(sum_dn) / C, warp_sum(sum_dn_xhat) / C};
#pragma unroll
    for (int i = 0; i < MAXP; i++) {
        const int c = (lane + 32 * i) * P;
        if (c >= C) break;
        vec_store(d + c, ln_pack_grad<T>(acc_w, acc_b, lane + 32 * P * i, dv[i], xv[i], gv[i], vec_load(w + c), m, s, r));
    }
}

/* The lane's packs of a row that ln_backward_row_held reads (x, dout, and
 * dinp where it accumulates) asked of L2 ahead (vec_prefetch_l2): a warp
 * takes its rows one after another, each row's loads issued only once the
 * row before is done, so that without this every row waited a device-memory
 * latency with nothing else of its warp's in flight. */
template <typename T, int MAXP>
__device__ __forceinline__ void ln_prefetch_row(const T *d, const T *g, const T *x, int C, int lane, bool dacc) {
    constexpr int P = vec_pack<T>::N;
#pragma unroll
    for (int i = 0; i < MAXP; i++) {
        const int c = (lane + 32 * i) * P;
        if (c >= C) break;
        vec_prefetch_l2(x + c);
        vec_prefetch_l2(g + c);
        if (dacc) vec_prefetch_l2(d + c);
    }
}

/* dst[0, C) = src[0, C) in 16-byte packs (C a multiple of the pack), by
 * the block: a pack a thread for rows of up to 256 packs. */
template <typename T>
__device__ __forceinline__ void ln_copy_packed_row(T *dst, const T *src, int C) {
    constexpr int P = vec_pack<T>::N;
    for (int c = (int)threadIdx.x * P; c < C; c += (int)blockDim.x * P) vec_store(dst + c, vec_load(src + c));
}

/* The whole backward of one row group in one pass (grid: the groups; block:
 * LN_WARPS warps). Warp y takes the group's rows y, y + LN_WARPS, ... in
 * order: dinp of each row, and its terms of dw and db summed into the warp's
 * own columns in shared memory (LN_WARPS x 2 x stride floats, dynamic;
 * with MAXP > 0, then a copy of w: every row reads all of it, and from
 * global memory each of its reads in the gradient pass waited for the dinp
 * store before it, which might have been to w as far as the compiler
 * knows; the looping instance, for rows near the shared memory's limit,
 * reads w from global memory); then the block adds the warps' sums column
 * by column in warp order, into
 * partial_dw/db[group * C + c]. That is the order layernorm_param_partials_kernel
 * adds them in (its thread row y is warp y here), so the partials are the
 * same bits; the finish kernel then adds the groups. MAXP > 0: each row's
 * packs held in registers (ln_backward_row_held); else each lane reads x
 * and dout of its columns twice (the second time from cache): once for the
 * row sums, once for the gradients. MAXP 4 is held to 128 registers, so
 * that two blocks share an SM (asked for 2 blocks, MAXP 6 spilled 120
 * bytes at 128, so rows of 5 to 8 packs a lane take MAXP 8, a block an SM). */
template <typename T, int MAXP>
__global__ void __launch_bounds__(LN_WARPS * 32, MAXP == 4 ? 2 : 1)
    layernorm_backward_fused_kernel(T *dinp, float *partial_dw, float *partial_db, const T *dout, const T *inp, const T *w,
                                    const float *mean, const float *rstd, int N, int C, int rows_per_group, int stride,
                                    bool packs, bool dacc) {
    extern __shared__ __align__(16) float ln_acc[]; /* [LN_WARPS][2][stride], then (MAXP > 0) w_shared[C] */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = blockIdx.x;
    float *acc_w = ln_acc + (size_t)warp * 2 * stride, *acc_b = acc_w + stride;
    T *w_shared = (T *)(ln_acc + (size_t)LN_WARPS * 2 * stride); /* 16-byte aligned: stride whole rounds of packs */
    if constexpr (MAXP > 0) ln_copy_packed_row(w_shared, w, C); /* first: its loads' latency under the zeroing */
    for (int i = threadIdx.x; i < LN_WARPS * 2 * stride; i += blockDim.x) ln_acc[i] = 0.0f;
    __syncthreads();
    const long long r_end = (long long)(group + 1) * rows_per_group;
    const int row_end = r_end < N ? (int)r_end : N;
    for (int r = group * rows_per_group + warp; r < row_end; r += LN_WARPS) {
        const size_t base = (size_t)r * C;
        if constexpr (MAXP > 0) {
            if (r + LN_WARPS < row_end) /* the warp's next row, while this one is worked */
                ln_prefetch_row<T, MAXP>(dinp + base + (size_t)LN_WARPS * C, dout + base + (size_t)LN_WARPS * C,
                                         inp + base + (size_t)LN_WARPS * C, C, lane, dacc);
            ln_backward_row_held<T, MAXP>(dinp + base, acc_w, acc_b, dout + base, inp + base, w_shared, mean[r], rstd[r], C,
                                          lane, dacc);
        } else if (packs)
            ln_backward_row_packed(dinp + base, acc_w, acc_b, dout + base, inp + base, w, mean[r], rstd[r], C, lane, dacc);
        else
            ln_backward_row<T, true>(dinp + base, acc_w, acc_b, dout + base, inp + base, w, mean[r], rstd[r], C, lane, dacc);
    }
    __syncthreads();
    const ln_acc_layout at = {packs ? vec_pack<T>::N : 1};
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const int i = at.index(c);
        float sw = 0.0f, sb = 0.0f;
        for (int y = 0; y < LN_WARPS; y++) {
            sw += ln_acc[(size_t)y * 2 * stride + i];
            sb += ln_acc[(size_t)y * 2 * stride + stride + i];
        }
        partial_dw[(size_t)group * C + c] = sw;
        partial_db[(size_t)group * C + c] = sb;
    }
}

/* dinp alone, one warp per row: the first of the three kernels that do what
 * the fused one does, for rows whose sums do not fit its shared memory. */
template <typename T>
__global__ void layernorm_backward_dinp_kernel(T *dinp, const T *dout, const T *inp, const T *w, const float *mean,
                                               const float *rstd, int N, int C, bool dacc) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return; /* the whole warp leaves together */
    const size_t base = (size_t)row * C;
    ln_backward_row<T, false>(dinp + base, NULL, NULL, dout + base, inp + base, w, mean[row], rstd[row], C, lane, dacc);
}

/* Grid (column tiles, groups), block (COL_TILE, COL_ROWS): the block sums
 * rows [group * rows_per_group, +rows_per_group) of its columns;
 * partial_dw/db[group * C + c]. */
template <typename T>
__global__ void layernorm_param_partials_kernel(float *partial_dw, float *partial_db, const T *dout, const T *inp,
                                                const float *mean, const float *rstd, int N, int C, int rows_per_group) {
    __shared__ float part_w[COL_ROWS][COL_TILE], part_b[COL_ROWS][COL_TILE];
    int c = blockIdx.x * COL_TILE + threadIdx.x;
    int group = blockIdx.y;
    long long r_end = (long long)(group + 1) * rows_per_group;
    int row_end = r_end < N ? (int)r_end : N;
    float acc_w = 0.0f, acc_b = 0.0f;
    if (c < C) {
        for (int r = group * rows_per_group + threadIdx.y; r < row_end; r += COL_ROWS) {
            size_t i = (size_t)r * C + c;
            float g = tg_load(dout, i);
            float xhat = (tg_load(inp, i) - mean[r]) * rstd[r];
            acc_w += xhat * g;
            acc_b += g;
        }
    }
    part_w[threadIdx.y][threadIdx.x] = acc_w;
    part_b[threadIdx.y][threadIdx.x] = acc_b;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        partial_dw[(size_t)group * C + c] = tg_reduce::tile_column_sum(part_w);
        partial_db[(size_t)group * C + c] = tg_reduce::tile_column_sum(part_b);
    }
}

/* dw[c] (+)= sum over groups (in order) of partial_dw[group * C + c] (acc:
 * adds, else writes); same for db: a block per STAGE_COLS columns
 * (tg_reduce::add_staged_groups_sum), dw's blocks at blockIdx.y 0 and db's
 * at 1, so that the two sums' memory latencies overlap. */
__global__ void __launch_bounds__(STAGE_THREADS) layernorm_param_finish_kernel(float *dw, float *db, const float *partial_dw,
                                                                               const float *partial_db, int groups, int C,
                                                                               bool acc) {
    __shared__ tg_reduce::staged_groups stage;
    if (blockIdx.y == 0) tg_reduce::add_staged_groups_sum(stage, dw, partial_dw, groups, C, acc);
    else tg_reduce::add_staged_groups_sum(stage, db, partial_db, groups, C, acc);
}

template <typename T>
void layernorm_forward(cudaStream_t stream, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b,
                       int N, int C) {
    unsigned blocks = tg_blocks((size_t)N, ROW_THREADS / 32);
    layernorm_forward_kernel<T><<<blocks, ROW_THREADS, 0, stream>>>((T *)out, mean, rstd, (const T *)inp, (const T *)w,
                                                                     (const T *)b, N, C);
    CUDA_LAUNCHED("layernorm_forward_kernel");
}

/* Row groups of the backward's column sums: fewer rows than GROUP_ROWS_MIN
 * (down to one row for each of a block's warps) where that leaves under
 * GROUPS_FILL groups, since each group is one block of the fused kernel (N =
 * 1024 would make 16); partials of two floats per group and column. Both
 * paths group alike. */
static tg_reduce::row_groups ln_groups_of(const cuda_ctx *ctx, int N, int C) {
    return tg_reduce::row_groups_of((size_t)N, ctx->scratch_bytes / (2 * (size_t)C * sizeof(float)), LN_WARPS, GROUPS_FILL,
                                    "layernorm backward: scratch for one row of partials");
}

/* Floats of one warp's column sums of dw (as many again for db) in the fused
 * kernel: C, or in packs whole rounds of 32 packs (ln_acc_layout). */
template <typename T>
static int ln_acc_stride(int C, bool packs) {
    const int round = 32 * vec_pack<T>::N;
    return packs ? (C + round - 1) / round * round : C;
}

/* The fused kernel's launch (shared: its bytes of dynamic shared memory). */
template <typename T, int MAXP>
void layernorm_backward_fused(cuda_ctx *ctx, tg_reduce::row_groups gr, size_t shared, T *dinp, float *partial_dw,
                              float *partial_db, const T *dout, const T *inp, const T *w, const float *mean, const float *rstd,
                              int N, int C, int stride, bool packs, bool dacc) {
    if (shared > (48u << 10)) /* over the default: opt in */
        CUDA_CHECK(cudaFuncSetAttribute((const void *)layernorm_backward_fused_kernel<T, MAXP>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shared));
    layernorm_backward_fused_kernel<T, MAXP><<<(unsigned)gr.n_groups, LN_WARPS * 32, shared, ctx->stream>>>(
        dinp, partial_dw, partial_db, dout, inp, w, mean, rstd, N, C, gr.rows_per_group, stride, packs, dacc);
    CUDA_LAUNCHED("layernorm_backward_fused_kernel");
}

/* dinp, then the partials (their sum follows): for rows too wide for the
 * fused kernel's shared memory. */
template <typename T>
void layernorm_backward_unfused(cuda_ctx *ctx, T *dinp, const T *dout, const T *inp, const T *w, const float *mean,
                                const float *rstd, int N, int C, tg_reduce::row_groups gr, float *partial_dw,
                                float *partial_db, bool dacc) {
    layernorm_backward_dinp_kernel<T><<<tg_blocks((size_t)N, ROW_THREADS / 32), ROW_THREADS, 0, ctx->stream>>>(
        dinp, dout, inp, w, mean, rstd, N, C, dacc);
    CUDA_LAUNCHED("layernorm_backward_dinp_kernel");
    dim3 grid(tg_blocks((size_t)C, COL_TILE), (unsigned)gr.n_groups), block(COL_TILE, COL_ROWS);
    layernorm_param_partials_kernel<T><<<grid, block, 0, ctx->stream>>>(partial_dw, partial_db, dout, inp, mean, rstd, N, C,
                                                                         gr.rows_per_group);
    CUDA_LAUNCHED("layernorm_param_partials_kernel");
}

template <typename T>
void layernorm_backward(cuda_ctx *ctx, T *dinp, float *dw, float *db, const T *dout, const T *inp, const T *w, const float *mean,
                        const float *rstd, int N, int C, bool dacc, bool acc) {
    const tg_reduce::row_groups gr = ln_groups_of(ctx, N, C);
    float *partial_dw = (float *)ctx->scratch;
    float *partial_db = partial_dw + (size_t)gr.n_groups * C;
    const bool packs = vec_rows<T>(C, dinp, dout, inp, w);
    const int stride = ln_acc_stride<T>(C, packs), held = vec_held_packs<T>(C, packs);
    const size_t shared = (size_t)LN_WARPS * 2 * stride * sizeof(float) + (held ? (size_t)C * sizeof(T) : 0); /* sums, w */
    if (shared <= (size_t)ctx->shared_optin) {
        const auto fused = held == 4 ? layernorm_backward_fused<T, 4> : held == 8 ? layernorm_backward_fused<T, 8>
                                                                                   : layernorm_backward_fused<T, 0>;
        fused(ctx, gr, shared, dinp, partial_dw, partial_db, dout, inp, w, mean, rstd, N, C, stride, packs, dacc);
    } else {
        layernorm_backward_unfused(ctx, dinp, dout, inp, w, mean, rstd, N, C, gr, partial_dw, partial_db, dacc);
    }
    const dim3 finish_blocks(tg_blocks((size_t)C, STAGE_COLS), 2); /* dw, db */
    layernorm_param_finish_kernel<<<finish_blocks, STAGE_THREADS, 0, ctx->stream>>>(dw, db, partial_dw, partial_db,
                                                                                     gr.n_groups, C, acc);
    CUDA_LAUNCHED("layernorm_param_finish_kernel");
}

} // namespace

void cuda_layernorm_forward(tg_o o, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b, int N,
                            int C) {
    if (N <= 0 || C <= 0) return;
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (o->act == TG_BF16) layernorm_forward<__nv_bfloat16>(stream, out, mean, rstd, inp, w, b, N, C);
    else layernorm_forward<float>(stream, out, mean, rstd, inp, w, b, N, C);
}

void cuda_layernorm_backward(tg_o o, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w,
                             const float *mean, const float *rstd, int N, int C, bool dacc, bool acc) {
    if (C <= 0) return;
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (N <= 0) { /* no rows: empty sums */
        if (!acc) CUDA_CHECK(cudaMemsetAsync(dw, 0, (size_t)C * sizeof(float), ctx->stream));
        if (!acc) CUDA_CHECK(cudaMemsetAsync(db, 0, (size_t)C * sizeof(float), ctx->stream));
        return;
    }
    if (o->act == TG_BF16)
        layernorm_backward(ctx, (__nv_bfloat16 *)dinp, dw, db, (const __nv_bfloat16 *)dout, (const __nv_bfloat16 *)inp,
                           (const __nv_bfloat16 *)w, mean, rstd, N, C, dacc, acc);
    else
        layernorm_backward(ctx, (float *)dinp, dw, db, (const float *)dout, (const float *)inp, (const float *)w, mean, rstd, N, C,
                           dacc, acc);
}
