/* Fused causal attention, backward (flash attention): the probabilities are
 * recomputed from q, k and the forward's lse, P = exp(scale q.k - lse), and
 * with keep the dropout factor and D = rowsum(dout * out) per query row:
 *   dP = (dout . v) * keep,  dS = P * (dP - D) * scale,
 *   dq = sum dS k,  dk = sum dS^T q,  dv = sum (P * keep)^T dout.
 * Deterministic, no atomics: one kernel per query tile sums dq over its key
 * tiles, another per key tile sums dk and dv over its query tiles (each
 * recomputes P); D comes first, into ctx->scratch. */
#include "kernels/cuda/flash.cuh"

namespace {

/* D[p * T + t] = dout . out over the head's HS columns, one thread per row. */
template <typename E>
__global__ void flash_rowdot_kernel(float *D, const E *dout, const E *out, int p0, int np, int T, int NH, int HS) {
    const size_t n = (size_t)np * T;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        const int j = (int)(e / T), t = (int)(e % T), p = p0 + j, b = p / NH, h = p % NH;
        const size_t row = ((size_t)b * T + t) * NH * HS + (size_t)h * HS;
        float s = 0.0f;
        for (int i = 0; i < HS; i++) s += tg_load(dout, row + i) * tg_load(out, row + i);
        D[e] = s;
    }
}

/* One query tile against one key tile, both staged: s = scale q k^T and
 * dp = dout v^T in; out: s = P * keep, dp = dS (0 where masked). lse and
 * D hold the query rows' statistics. */
static __device__ void tile_gradients(fl_square s, fl_square dp, const fl_tile q, const fl_tile k, const fl_tile g,
                                      const fl_tile v, const float *lse, const float *D, int q0, int k0, int b, int h, int T,
                                      int HS, float scale, const tg_dropout &drop) {
    fl_products(s, q, k, HS, scale);
    fl_products(dp, g, v, HS, 1.0f);
    __syncthreads();
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

template <typename E>
void flash_backward(cuda_ctx *ctx, E *dqkv, const E *dout, const E *out, const E *qkv, const float *lse, int B, int T, int NH,
                    int HS, tg_dropout drop) {
    const float scale = 1.0f / sqrtf((float)HS);
    const unsigned tiles = (unsigned)((T + FL_TILE - 1) / FL_TILE);
    /* D of as many pairs as the scratch holds per round */
    const size_t fit = ctx->scratch_bytes / ((size_t)T * sizeof(float));
    if (fit == 0) {
        tg_err e;
        tg_fail(&e, "attention_backward: T = %d needs %zu bytes of kernel scratch, there are %zu", T, (size_t)T * sizeof(float),
                ctx->scratch_bytes);
        tg_die("train_gpt", &e);
    }
    const int chunk = (int)(fit < FL_MAX_PAIRS ? fit : FL_MAX_PAIRS);
    float *D = (float *)ctx->scratch;
    for (int p0 = 0; p0 < B * NH; p0 += chunk) {
        const int np = fl_min(chunk, B * NH - p0);
        const unsigned rows_blocks = (unsigned)fl_min((int)(((size_t)np * T + 255) / 256), 4096);
        flash_rowdot_kernel<<<rows_blocks, 256, 0, ctx->stream>>>(D, dout, out, p0, np, T, NH, HS);
        CUDA_LAUNCHED("flash_rowdot_kernel");
        flash_dq_kernel<<<dim3(tiles, (unsigned)np), FL_THREADS, 0, ctx->stream>>>(dqkv, dout, qkv, lse, D, p0, T, NH, HS,
                                                                                   scale, drop);
        CUDA_LAUNCHED("flash_dq_kernel");
        flash_dkv_kernel<<<dim3(tiles, (unsigned)np), FL_THREADS, 0, ctx->stream>>>(dqkv, dout, qkv, lse, D, p0, T, NH, HS,
                                                                                    scale, drop);
        CUDA_LAUNCHED("flash_dkv_kernel");
    }
}

} // namespace

void cuda_attention_backward(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B,
                             int T, int NH, int HS, tg_dropout drop) {
    if (B <= 0 || T <= 0 || NH <= 0 || HS <= 0) return;
    fl_check_shape(HS, "attention_backward");
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (o->act == TG_BF16)
        flash_backward(ctx, (__nv_bfloat16 *)dqkv, (const __nv_bfloat16 *)dout, (const __nv_bfloat16 *)out,
                       (const __nv_bfloat16 *)qkv, lse, B, T, NH, HS, drop);
    else
        flash_backward(ctx, (float *)dqkv, (const float *)dout, (const float *)out, (const float *)qkv, lse, B, T, NH, HS,
                       drop);
}
