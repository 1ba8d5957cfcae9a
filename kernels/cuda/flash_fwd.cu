/* Fused causal attention, forward (flash attention): one block per tile of
 * FL_TILE query rows of one pair, key/value tiles streamed through shared
 * memory up to the diagonal, an online softmax (running max and sum per
 * row), dropout on the probabilities, out = sum P * keep * v / sum P, and
 * lse = max + log(sum) kept for the backward. No T x T buffer. */
#include "kernels/cuda/flash.cuh"

namespace {

/* Rows of the score tile s become P * keep with the running statistics
 * updated: one thread per row (FL_TILE threads), so sums run in key order. */
static __device__ void online_softmax(fl_square s, float *row_max, float *row_sum, float *row_corr, int q0, int k0, int b,
                                      int h, int T, const tg_dropout &drop) {
    const int r = threadIdx.x;
    if (r >= FL_TILE) return;
    const float m_old = row_max[r];
    float m_new = m_old;
    for (int c = 0; c < FL_TILE; c++)
        if (fl_visible(q0, r, k0, c, T)) m_new = fmaxf(m_new, s[r][c]);
    if (m_new == -INFINITY) { /* a padding row past T: contributes nothing */
        for (int c = 0; c < FL_TILE; c++) s[r][c] = 0.0f;
        row_corr[r] = 1.0f;
        return;
    }
    float sum = 0.0f;
    for (int c = 0; c < FL_TILE; c++) {
        const float p = fl_visible(q0, r, k0, c, T) ? expf(s[r][c] - m_new) : 0.0f;
        sum += p;
        s[r][c] = p > 0.0f ? p * fl_drop(drop, b, h, q0 + r, k0 + c, T) : 0.0f;
    }
    row_corr[r] = expf(m_old - m_new);
    row_sum[r] = row_sum[r] * row_corr[r] + sum;
    row_max[r] = m_new;
}

template <typename E>
__global__ void __launch_bounds__(FL_THREADS)
    flash_forward_kernel(E *out, float *lse, const E *qkv, int p0, int T, int NH, int HS, float scale, tg_dropout drop) {
    __shared__ fl_tile q, k, v;
    __shared__ fl_square s;
    __shared__ float row_max[FL_TILE], row_sum[FL_TILE], row_corr[FL_TILE];
    const int q0 = blockIdx.x * FL_TILE, p = p0 + blockIdx.y, b = p / NH, h = p % NH, C = NH * HS;
    fl_load_tile(q, qkv, 3 * C, h * HS, b, q0, T, HS);
    if (threadIdx.x < FL_TILE) {
        row_max[threadIdx.x] = -INFINITY;
        row_sum[threadIdx.x] = 0.0f;
    }
    float acc[FL_COLS];
#pragma unroll
    for (int j = 0; j < FL_COLS; j++) acc[j] = 0.0f;
    const int r = threadIdx.x >> 3, c8 = threadIdx.x & 7;
    const int k_end = fl_min(q0 + FL_TILE, T); /* tiles above the diagonal are skipped */
    for (int k0 = 0; k0 < k_end; k0 += FL_TILE) {
        __syncthreads(); /* the previous tile's readers are done */
        fl_load_tile(k, qkv, 3 * C, C + h * HS, b, k0, T, HS);
        fl_load_tile(v, qkv, 3 * C, 2 * C + h * HS, b, k0, T, HS);
        __syncthreads();
        fl_products(s, q, k, HS, scale);
        __syncthreads();
        online_softmax(s, row_max, row_sum, row_corr, q0, k0, b, h, T, drop);
        __syncthreads();
        const float corr = row_corr[r];
#pragma unroll
        for (int j = 0; j < FL_COLS; j++) acc[j] *= corr;
        fl_accumulate(acc, s, v, HS, false);
    }
    if (q0 + r >= T) return;
    fl_store_row(out, acc, C, h * HS, b, q0, T, HS, 1.0f / row_sum[r]);
    if (c8 == 0) lse[(size_t)p * T + q0 + r] = row_max[r] + logf(row_sum[r]);
}

template <typename E>
void flash_forward(cuda_ctx *ctx, E *out, float *lse, const E *qkv, int B, int T, int NH, int HS, tg_dropout drop) {
    const float scale = 1.0f / sqrtf((float)HS);
    const unsigned q_tiles = (unsigned)((T + FL_TILE - 1) / FL_TILE);
    for (int p0 = 0; p0 < B * NH; p0 += FL_MAX_PAIRS) {
        const int np = fl_min(FL_MAX_PAIRS, B * NH - p0);
        flash_forward_kernel<<<dim3(q_tiles, (unsigned)np), FL_THREADS, 0, ctx->stream>>>(out, lse, qkv, p0, T, NH, HS, scale,
                                                                                         drop);
        CUDA_LAUNCHED("flash_forward_kernel");
    }
}

} // namespace

void cuda_attention_forward(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, tg_dropout drop) {
    if (B <= 0 || T <= 0 || NH <= 0 || HS <= 0) return;
    fl_check_shape(HS, "attention_forward");
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (o->act == TG_BF16)
        flash_forward(ctx, (__nv_bfloat16 *)out, lse, (const __nv_bfloat16 *)qkv, B, T, NH, HS, drop);
    else
        flash_forward(ctx, (float *)out, lse, (const float *)qkv, B, T, NH, HS, drop);
}
