/* LayerNorm over the last dim (eps 1e-5, biased variance), as
 * kernels/cpu/layernorm.c.
 * Forward: one warp per row; two-pass mean then variance of the centred
 * values, warp reductions by butterfly shuffles (kernels/cuda/layernorm.cuh,
 * shared with the fused residual + LayerNorm); mean and 1/std saved in
 * float32.
 * Backward, dinp (ACCUMULATES): one warp per row, the two row sums reduced
 * in the warp, then each lane adds its columns' gradient to dinp.
 * Backward, dw and db (accumulate): column sums without atomics. Blocks of
 * 32 columns x 8 thread rows each sum one fixed group of rows into a
 * per-group partial in ctx scratch (thread rows combined in a fixed order);
 * a second kernel adds the groups' partials column by column in group order.
 * The grouping depends only on N, C and the scratch size. */
#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/layernorm.cuh"
#include "kernels/cuda/reduce.cuh"

#define ROW_THREADS 256 /* 8 warps: 8 rows per block */
#define COL_TILE 32     /* columns per block of the column sums */
#define COL_ROWS 8      /* thread rows per block of the column sums */
#define GROUP_ROWS_MIN 64
#define GROUPS_MAX 1024

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

template <typename T>
__global__ void layernorm_backward_dinp_kernel(T *dinp, const T *dout, const T *inp, const T *w, const float *mean,
                                               const float *rstd, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N) return; /* the whole warp leaves together */
    const T *x = inp + (size_t)row * C, *g = dout + (size_t)row * C;
    float m = mean[row], s = rstd[row];
    float sum_dn = 0.0f, sum_dn_xhat = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float xhat = (tg_load(x, c) - m) * s;
        float dn = tg_load(w, c) * tg_load(g, c);
        sum_dn += dn;
        sum_dn_xhat += dn * xhat;
    }
    sum_dn = warp_sum(sum_dn) / C;
    sum_dn_xhat = warp_sum(sum_dn_xhat) / C;
    T *d = dinp + (size_t)row * C;
    for (int c = lane; c < C; c += 32) {
        float xhat = (tg_load(x, c) - m) * s;
        float dn = tg_load(w, c) * tg_load(g, c);
        tg_store(d, c, tg_load(d, c) + (dn - sum_dn - xhat * sum_dn_xhat) * s);
    }
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

/* dw[c] += sum over groups (in order) of partial_dw[group * C + c]; same for db. */
__global__ void layernorm_param_finish_kernel(float *dw, float *db, const float *partial_dw, const float *partial_db, int groups,
                                              int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float sw = 0.0f, sb = 0.0f;
    for (int g = 0; g < groups; g++) {
        sw += partial_dw[(size_t)g * C + c];
        sb += partial_db[(size_t)g * C + c];
    }
    dw[c] += sw;
    db[c] += sb;
}

template <typename T>
void layernorm_forward(cudaStream_t stream, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b,
                       int N, int C) {
    unsigned blocks = tg_blocks((size_t)N, ROW_THREADS / 32);
    layernorm_forward_kernel<T><<<blocks, ROW_THREADS, 0, stream>>>((T *)out, mean, rstd, (const T *)inp, (const T *)w,
                                                                     (const T *)b, N, C);
    CUDA_LAUNCHED("layernorm_forward_kernel");
}

template <typename T>
void layernorm_backward(cuda_ctx *ctx, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w,
                        const float *mean, const float *rstd, int N, int C) {
    cudaStream_t stream = ctx->stream;
    unsigned row_blocks = tg_blocks((size_t)N, ROW_THREADS / 32);
    layernorm_backward_dinp_kernel<T><<<row_blocks, ROW_THREADS, 0, stream>>>((T *)dinp, (const T *)dout, (const T *)inp,
                                                                               (const T *)w, mean, rstd, N, C);
    CUDA_LAUNCHED("layernorm_backward_dinp_kernel");

    /* Row groups: at least GROUP_ROWS_MIN rows each, at most GROUPS_MAX of
     * them, and partials (two floats per group and column) within scratch. */
    size_t fit = ctx->scratch_bytes / (2 * (size_t)C * sizeof(float));
    if (fit < 1) cuda_fail(cudaErrorMemoryAllocation, "layernorm backward: scratch for one row of partials", __FILE__, __LINE__);
    size_t groups = ((size_t)N + GROUP_ROWS_MIN - 1) / GROUP_ROWS_MIN;
    if (groups > GROUPS_MAX) groups = GROUPS_MAX;
    if (groups > fit) groups = fit;
    int rows_per_group = (int)(((size_t)N + groups - 1) / groups);
    int n_groups = (int)(((size_t)N + rows_per_group - 1) / rows_per_group);

    float *partial_dw = (float *)ctx->scratch;
    float *partial_db = partial_dw + (size_t)n_groups * C;
    dim3 grid(tg_blocks((size_t)C, COL_TILE), (unsigned)n_groups), block(COL_TILE, COL_ROWS);
    layernorm_param_partials_kernel<T><<<grid, block, 0, stream>>>(partial_dw, partial_db, (const T *)dout, (const T *)inp,
                                                                    mean, rstd, N, C, rows_per_group);
    CUDA_LAUNCHED("layernorm_param_partials_kernel");
    layernorm_param_finish_kernel<<<tg_blocks((size_t)C, 256), 256, 0, stream>>>(dw, db, partial_dw, partial_db, n_groups, C);
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
                             const float *mean, const float *rstd, int N, int C) {
    if (N <= 0 || C <= 0) return;
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (o->act == TG_BF16) layernorm_backward<__nv_bfloat16>(ctx, dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    else layernorm_backward<float>(ctx, dinp, dw, db, dout, inp, w, mean, rstd, N, C);
}
