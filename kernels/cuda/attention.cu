/* Causal multi-head self-attention, as kernels/cpu/attention.c, unfused: the
 * T x T scores go through ctx->scratch.
 *
 * Work is cut into chunks of (sequence, head) pairs, p = b * NH + h, and,
 * when one pair's T x T scores do not fit the scratch, into blocks of query
 * rows [r0, r0 + nr); a row block only needs keys [0, kc = r0 + nr).
 * Per chunk:
 *   gather   copy each pair's q, k, v (and dout) [T, HS] slices out of the
 *            interleaved rows into contiguous per-pair buffers
 *   products cublasGemmStridedBatchedEx on ctx->blas, one batch entry per
 *            pair, float32 accumulation (CUBLAS_COMPUTE_32F, no TF32)
 *   softmax  one block per query row; block reductions in a fixed order
 *   scatter  copy the per-pair results back into the interleaved rows
 * Forward: scores = scale * q k^T (float32); att = causal softmax (kept,
 * zero above the diagonal, no dropout); out = (att * mask) @ v.
 * Every product reads and writes only scratch, never the caller's buffers
 * (att * mask is copied there even without dropout), so cuBLAS's choice of
 * kernel, which may depend on pointer alignment, and hence the bits, do not
 * depend on where the caller's buffers live (recompute modes move them).
 * Backward (from the CPU loop): with keep the dropout factor,
 *   datt    = (dout v^T) * keep
 *   dv      = (att * keep)^T dout
 *   dscores = att * (datt - rowsum(att * datt)) * scale
 *   dq = dscores k, dk = dscores^T q.
 * dq, dk, dv collect in float32 and are rounded once when scattered; dk
 * and dv add up over row blocks (cleared per chunk, beta = 1).
 * Dropout factors use the CPU's counter, so masks are bit-identical. */
#include <math.h>

#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/reduce.cuh"
#include "util/rng_core.h"

#define THREADS 256      /* elementwise kernels */
#define ROW_THREADS 256  /* softmax: threads per query row (a multiple of 32) */
#define MAX_BATCH 65535  /* pairs per chunk: the softmax grid's y dimension */
#define REGION_ALIGN 256 /* scratch regions start on this many bytes */

namespace {

using tg_reduce::block_reduce;
using tg_reduce::max_op;
using tg_reduce::sum_op;

template <typename E>
cudaDataType elem_type() {
    return sizeof(E) == 2 ? CUDA_R_16BF : CUDA_R_32F;
}

/* ---------------------------------------------------------------- device */

/* The dropout factor of probability (b, h, t, t2) of this rank (1 when p <= 0). */
__device__ __forceinline__ float att_drop(const tg_dropout &d, int b, int h, int t, int t2, int T) {
    if (d.p <= 0.0f) return 1.0f;
    uint64_t seq = d.row0 + (uint64_t)b, head = (uint64_t)(d.head0 + h);
    return rng_dropout_scale(d.p, d.seed, d.stream,
                             ((seq * (uint64_t)d.heads_total + head) * (uint64_t)T + (uint64_t)t) * (uint64_t)T + (uint64_t)t2);
}


/* dst[j, t, i] = src[(b * T + t) * width + offset + h * HS + i] for the
 * chunk's pairs p = p0 + j = b * NH + h: one head's [T, HS] slice made
 * contiguous. */
template <typename Es, typename Ed>
__global__ void gather_heads_kernel(Ed *dst, const Es *src, int width, int offset, int p0, int np, int T, int NH, int HS) {
    const size_t total = (size_t)np * T * HS;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const int i = (int)(e % HS), t = (int)(e / HS % T), j = (int)(e / ((size_t)HS * T));
        const int p = p0 + j, b = p / NH, h = p % NH;
        tg_store(dst, e, tg_load(src, ((size_t)b * T + t) * width + offset + (size_t)h * HS + i));
    }
}

/* The inverse of gather_heads_kernel: dst[(b * T + t) * width + offset +
 * h * HS + i] = src[j, t, i], converted to dst's type. */
template <typename Es, typename Ed>
__global__ void scatter_heads_kernel(Ed *dst, const Es *src, int width, int offset, int p0, int np, int T, int NH, int HS) {
    const size_t total = (size_t)np * T * HS;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const int i = (int)(e % HS), t = (int)(e / HS % T), j = (int)(e / ((size_t)HS * T));
        const int p = p0 + j, b = p / NH, h = p % NH;
        tg_store(dst, ((size_t)b * T + t) * width + offset + (size_t)h * HS + i, tg_load(src, e));
    }
}

/* Grid (nr, np): block (x, y) takes query row t = r0 + x of pair
 * p = p0 + y. scores holds [np, nr, T] rows (scaled, keys 0..t valid).
 * Writes the whole att row (probabilities, 0 after t) and
 * probs[y, x, t2] = att * keep for t2 < kc (0 after t), the row the
 * product with v reads. */
template <typename E>
__global__ void softmax_forward_kernel(E *att, E *probs, const float *scores, int p0, int r0, int nr, int kc, int T, int NH,
                                       tg_dropout drop) {
    const int x = blockIdx.x, y = blockIdx.y, t = r0 + x, p = p0 + y, b = p / NH, h = p % NH;
    const size_t row = (size_t)y * nr + x; /* within the chunk */
    const float *s = scores + row * T;
    E *a = att + ((size_t)p * T + t) * T;

    float maxv = -INFINITY;
    for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) maxv = fmaxf(maxv, s[t2]);
    maxv = block_reduce(maxv, max_op(), -INFINITY);
    float sum = 0.0f;
    for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) sum += expf(s[t2] - maxv);
    sum = block_reduce(sum, sum_op(), 0.0f);
    const float inv = 1.0f / sum;

    for (int t2 = threadIdx.x; t2 < T; t2 += blockDim.x) {
        const float prob = t2 <= t ? expf(s[t2] - maxv) * inv : 0.0f;
        tg_store(a, t2, prob);
        if (t2 < kc) tg_store(probs, row * T + t2, t2 <= t ? prob * att_drop(drop, b, h, t, t2, T) : 0.0f);
    }
}

/* Grid (nr, np) as the forward. dprobs holds [np, nr, T] rows of dout . v
 * (keys < kc valid). For t2 <= t, with a = att and keep the dropout factor:
 *   datt = dprobs * keep, dscores = a * (datt - sum_t2 a * datt) * scale,
 *   kept = a * keep (for dv);
 * both are 0 for t < t2 < kc (the products read keys < kc). */
template <typename E>
__global__ void softmax_backward_kernel(E *dscores, E *kept, const float *dprobs, const E *att, int p0, int r0, int nr, int kc,
                                        int T, int NH, float scale, tg_dropout drop) {
    const int x = blockIdx.x, y = blockIdx.y, t = r0 + x, p = p0 + y, b = p / NH, h = p % NH;
    const size_t row = (size_t)y * nr + x;
    const float *dp = dprobs + row * T;
    const E *a = att + ((size_t)p * T + t) * T;

    float weighted = 0.0f;
    for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) weighted += tg_load(a, t2) * (dp[t2] * att_drop(drop, b, h, t, t2, T));
    weighted = block_reduce(weighted, sum_op(), 0.0f);

    for (int t2 = threadIdx.x; t2 < kc; t2 += blockDim.x) {
        float ds = 0.0f, ak = 0.0f;
        if (t2 <= t) {
            const float keep = att_drop(drop, b, h, t, t2, T), ai = tg_load(a, t2);
            ds = ai * (dp[t2] * keep - weighted) * scale;
            ak = ai * keep;
        }
        tg_store(dscores, row * T + t2, ds);
        tg_store(kept, row * T + t2, ak);
    }
}

/* ------------------------------------------------------------------ host */

unsigned grid_for(size_t n) {
    unsigned b = tg_blocks(n, THREADS);
    return b < (1u << 20) ? b : (1u << 20); /* grid-stride loops cover the rest */
}

/* The chunk's [np, T, HS] slices of one section of rows `width` wide. */
template <typename Es, typename Ed>
void gather_heads(cudaStream_t stream, Ed *dst, const Es *src, int width, int offset, int p0, int np, int T, int NH, int HS) {
    gather_heads_kernel<<<grid_for((size_t)np * T * HS), THREADS, 0, stream>>>(dst, src, width, offset, p0, np, T, NH, HS);
    CUDA_LAUNCHED("gather_heads_kernel");
}

template <typename Es, typename Ed>
void scatter_heads(cudaStream_t stream, Ed *dst, const Es *src, int width, int offset, int p0, int np, int T, int NH, int HS) {
    scatter_heads_kernel<<<grid_for((size_t)np * T * HS), THREADS, 0, stream>>>(dst, src, width, offset, p0, np, T, NH, HS);
    CUDA_LAUNCHED("scatter_heads_kernel");
}

/* Column-major strided-batched product on ctx->blas (bound to ctx->stream),
 * float32 accumulation, host alpha/beta:
 *   C_i[m, n] = alpha * op(A_i)[m, k] @ op(B_i)[k, n] + beta * C_i,  i < batch,
 * X_i = X + i * stride_x. A and B have type ab, C type c. */
void gemm_batched(cuda_ctx *ctx, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void *A, int lda,
                  long long stride_a, const void *B, int ldb, long long stride_b, cudaDataType ab, float beta, void *C,
                  int ldc, long long stride_c, cudaDataType c, int batch) {
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx->blas, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                            m, n, k, &alpha, A, ab, lda, stride_a, B, ab, ldb, stride_b, &beta, C, c, ldc,
                                            stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* How the work is cut: `pairs` (sequence, head) pairs at a time, `rows`
 * query rows at a time (T unless one pair's rows do not fit). */
struct chunking {
    int pairs, rows;
};

/* The largest chunks whose buffers fit the scratch: `per_pair` bytes for
 * each pair plus `per_row` bytes for each of its query rows in the chunk,
 * in `regions` separately aligned regions. */
chunking plan_chunks(const cuda_ctx *ctx, size_t per_pair, size_t per_row, int regions, int T, int n_pairs, const char *what) {
    const size_t slack = (size_t)regions * REGION_ALIGN;
    const size_t budget = ctx->scratch_bytes > slack ? ctx->scratch_bytes - slack : 0;
    const size_t whole = per_pair + per_row * (size_t)T;
    chunking c;
    if (whole <= budget) {
        size_t pairs = budget / whole;
        if (pairs > (size_t)n_pairs) pairs = (size_t)n_pairs;
        if (pairs > MAX_BATCH) pairs = MAX_BATCH;
        c.pairs = (int)pairs;
        c.rows = T;
    } else {
        size_t rows = budget > per_pair ? (budget - per_pair) / per_row : 0;
        if (rows < 1) {
            tg_err e;
            tg_fail(&e, "%s: one (sequence, head) pair needs %zu bytes of scratch, more than the %zu usable of %zu (T too large)",
                    what, per_pair + per_row, budget, ctx->scratch_bytes);
            tg_die("train_gpt", &e);
        }
        c.pairs = 1;
        c.rows = (int)rows;
    }
    return c;
}

/* Hands out consecutive regions of the scratch. */
struct scratch_cursor {
    char *next, *end;
};

void *carve(scratch_cursor *cur, size_t bytes, const char *what) {
    char *p = cur->next;
    size_t padded = (bytes + REGION_ALIGN - 1) / REGION_ALIGN * REGION_ALIGN;
    if (padded > (size_t)(cur->end - p)) {
        tg_err e;
        tg_fail(&e, "%s: scratch regions overflow (internal error)", what);
        tg_die("train_gpt", &e);
    }
    cur->next = p + padded;
    return p;
}

template <typename E>
void attention_forward(cuda_ctx *ctx, E *out, E *att, const E *qkv, int B, int T, int NH, int HS, tg_dropout drop) {
    const cudaDataType et = elem_type<E>();
    const int C = NH * HS, n_pairs = B * NH;
    const size_t head = (size_t)T * HS; /* elements of one pair's [T, HS] slice */
    const long long head_ll = (long long)head;
    const float scale = 1.0f / sqrtf((float)HS);

    /* Scratch: q, k, v, y [pairs, T, HS]; scores float and probs [pairs, rows, T]. */
    const chunking ch =
        plan_chunks(ctx, 4 * head * sizeof(E), (size_t)T * (sizeof(float) + sizeof(E)), 6, T, n_pairs, "attention forward");
    scratch_cursor cur = {(char *)ctx->scratch, (char *)ctx->scratch + ctx->scratch_bytes};
    const size_t pair_rows = (size_t)ch.pairs * ch.rows * T;
    E *q = (E *)carve(&cur, ch.pairs * head * sizeof(E), "attention forward");
    E *k = (E *)carve(&cur, ch.pairs * head * sizeof(E), "attention forward");
    E *v = (E *)carve(&cur, ch.pairs * head * sizeof(E), "attention forward");
    E *y = (E *)carve(&cur, ch.pairs * head * sizeof(E), "attention forward");
    float *scores = (float *)carve(&cur, pair_rows * sizeof(float), "attention forward");
    E *probs = (E *)carve(&cur, pair_rows * sizeof(E), "attention forward");

    for (int p0 = 0; p0 < n_pairs; p0 += ch.pairs) {
        const int np = ch.pairs < n_pairs - p0 ? ch.pairs : n_pairs - p0;
        gather_heads(ctx->stream, q, qkv, 3 * C, 0, p0, np, T, NH, HS);
        gather_heads(ctx->stream, k, qkv, 3 * C, C, p0, np, T, NH, HS);
        gather_heads(ctx->stream, v, qkv, 3 * C, 2 * C, p0, np, T, NH, HS);
        for (int r0 = 0; r0 < T; r0 += ch.rows) {
            const int nr = ch.rows < T - r0 ? ch.rows : T - r0, kc = r0 + nr;
            /* scores_j[r, t2] = scale * q_j[r0 + r] . k_j[t2] for r < nr, t2 < kc; row-major [nr, kc] with
             * row stride T, pair stride nr * T. Column-major: scores_j^T [kc, nr] = k_j[0:kc] @ (q_j rows)^T:
             *   k_j     row-major [kc, HS] = column-major [HS, kc], ld HS; k itself [kc, HS]: A, op T (m = kc, k = HS)
             *   q_j[r0:] row-major [nr, HS] = column-major [HS, nr], ld HS:                    B, op N (n = nr)
             *   scores_j row-major [nr, ld T] = column-major [kc, nr], ld T:                    C (float32) */
            gemm_batched(ctx, true, false, kc, nr, HS, scale, k, HS, head_ll, q + (size_t)r0 * HS, HS, head_ll, et, 0.0f,
                         scores, T, (long long)nr * T, CUDA_R_32F, np);
            softmax_forward_kernel<<<dim3((unsigned)nr, (unsigned)np), ROW_THREADS, 0, ctx->stream>>>(
                att, probs, scores, p0, r0, nr, kc, T, NH, drop);
            CUDA_LAUNCHED("softmax_forward_kernel");
            /* y_j[r0 + r] = sum_t2 probs_j[r, t2] v_j[t2]; probs_j row-major [nr, kc] with row stride T.
             * Column-major: y_j^T [HS, nr] = v_j^T [HS, kc] @ probs_j^T [kc, nr]:
             *   v_j      row-major [kc, HS] = column-major [HS, kc], ld HS:   A, op N (m = HS, k = kc)
             *   probs_j  row-major [nr, ld T] = column-major [kc, nr], ld T:  B, op N (n = nr)
             *   y_j[r0:] row-major [nr, HS] = column-major [HS, nr], ld HS:   C */
            gemm_batched(ctx, false, false, HS, nr, kc, 1.0f, v, HS, head_ll, probs, T, (long long)nr * T, et, 0.0f,
                         y + (size_t)r0 * HS, HS, head_ll, et, np);
        }
        scatter_heads(ctx->stream, out, y, C, 0, p0, np, T, NH, HS);
    }
}

template <typename E>
void attention_backward(cuda_ctx *ctx, E *dqkv, const E *dout, const E *qkv, const E *att, int B, int T, int NH, int HS,
                        tg_dropout drop) {
    const cudaDataType et = elem_type<E>();
    const int C = NH * HS, n_pairs = B * NH;
    const size_t head = (size_t)T * HS;
    const long long head_ll = (long long)head;
    const float scale = 1.0f / sqrtf((float)HS);

    /* Scratch: q, k, v, g [pairs, T, HS]; dq, dk, dv float [pairs, T, HS]; dprobs float, dscores and
     * kept [pairs, rows, T]. */
    const chunking ch = plan_chunks(ctx, 4 * head * sizeof(E) + 3 * head * sizeof(float),
                                    (size_t)T * (sizeof(float) + 2 * sizeof(E)), 10, T, n_pairs, "attention backward");
    scratch_cursor cur = {(char *)ctx->scratch, (char *)ctx->scratch + ctx->scratch_bytes};
    const size_t pair_rows = (size_t)ch.pairs * ch.rows * T, pair_heads = (size_t)ch.pairs * head;
    E *q = (E *)carve(&cur, pair_heads * sizeof(E), "attention backward");
    E *k = (E *)carve(&cur, pair_heads * sizeof(E), "attention backward");
    E *v = (E *)carve(&cur, pair_heads * sizeof(E), "attention backward");
    E *g = (E *)carve(&cur, pair_heads * sizeof(E), "attention backward");
    float *dq = (float *)carve(&cur, pair_heads * sizeof(float), "attention backward");
    float *dk = (float *)carve(&cur, pair_heads * sizeof(float), "attention backward");
    float *dv = (float *)carve(&cur, pair_heads * sizeof(float), "attention backward");
    float *dprobs = (float *)carve(&cur, pair_rows * sizeof(float), "attention backward");
    E *dscores = (E *)carve(&cur, pair_rows * sizeof(E), "attention backward");
    E *kept = (E *)carve(&cur, pair_rows * sizeof(E), "attention backward");

    for (int p0 = 0; p0 < n_pairs; p0 += ch.pairs) {
        const int np = ch.pairs < n_pairs - p0 ? ch.pairs : n_pairs - p0;
        gather_heads(ctx->stream, q, qkv, 3 * C, 0, p0, np, T, NH, HS);
        gather_heads(ctx->stream, k, qkv, 3 * C, C, p0, np, T, NH, HS);
        gather_heads(ctx->stream, v, qkv, 3 * C, 2 * C, p0, np, T, NH, HS);
        gather_heads(ctx->stream, g, dout, C, 0, p0, np, T, NH, HS);
        /* dk and dv add up over the row blocks */
        CUDA_CHECK(cudaMemsetAsync(dk, 0, (size_t)np * head * sizeof(float), ctx->stream));
        CUDA_CHECK(cudaMemsetAsync(dv, 0, (size_t)np * head * sizeof(float), ctx->stream));
        for (int r0 = 0; r0 < T; r0 += ch.rows) {
            const int nr = ch.rows < T - r0 ? ch.rows : T - r0, kc = r0 + nr;
            /* dprobs_j[r, t2] = g_j[r0 + r] . v_j[t2] for r < nr, t2 < kc; the mapping of the forward scores
             * with g for q and v for k:
             *   v_j      row-major [kc, HS] = column-major [HS, kc], ld HS; v itself: A, op T (m = kc, k = HS)
             *   g_j[r0:] row-major [nr, HS] = column-major [HS, nr], ld HS:           B, op N (n = nr)
             *   dprobs_j row-major [nr, ld T] = column-major [kc, nr], ld T:           C (float32) */
            gemm_batched(ctx, true, false, kc, nr, HS, 1.0f, v, HS, head_ll, g + (size_t)r0 * HS, HS, head_ll, et, 0.0f,
                         dprobs, T, (long long)nr * T, CUDA_R_32F, np);
            softmax_backward_kernel<<<dim3((unsigned)nr, (unsigned)np), ROW_THREADS, 0, ctx->stream>>>(
                dscores, kept, dprobs, att, p0, r0, nr, kc, T, NH, scale, drop);
            CUDA_LAUNCHED("softmax_backward_kernel");
            /* dq_j[r0 + r] = sum_t2 dscores_j[r, t2] k_j[t2]: the mapping of the forward product with v.
             *   k_j       row-major [kc, HS] = column-major [HS, kc], ld HS: A, op N (m = HS, k = kc)
             *   dscores_j row-major [nr, ld T] = column-major [kc, nr], ld T: B, op N (n = nr)
             *   dq_j[r0:] row-major [nr, HS] float32 = column-major [HS, nr], ld HS: C, beta 0 */
            gemm_batched(ctx, false, false, HS, nr, kc, 1.0f, k, HS, head_ll, dscores, T, (long long)nr * T, et, 0.0f,
                         dq + (size_t)r0 * HS, HS, head_ll, CUDA_R_32F, np);
            /* dk_j[t2] += sum_r dscores_j[r, t2] q_j[r0 + r] for t2 < kc. Column-major:
             * dk_j^T [HS, kc] += (q_j rows)^T [HS, nr] @ dscores_j [nr, kc]:
             *   q_j[r0:]  row-major [nr, HS] = column-major [HS, nr], ld HS:                   A, op N (m = HS, k = nr)
             *   dscores_j row-major [nr, ld T] = column-major [kc, nr], ld T; dscores [nr, kc]: B, op T (n = kc)
             *   dk_j      row-major [kc, HS] float32 = column-major [HS, kc], ld HS:            C, beta 1 */
            gemm_batched(ctx, false, true, HS, kc, nr, 1.0f, q + (size_t)r0 * HS, HS, head_ll, dscores, T, (long long)nr * T,
                         et, 1.0f, dk, HS, head_ll, CUDA_R_32F, np);
            /* dv_j[t2] += sum_r kept_j[r, t2] g_j[r0 + r]: the dk mapping with g for q, kept for dscores. */
            gemm_batched(ctx, false, true, HS, kc, nr, 1.0f, g + (size_t)r0 * HS, HS, head_ll, kept, T, (long long)nr * T, et,
                         1.0f, dv, HS, head_ll, CUDA_R_32F, np);
        }
        scatter_heads(ctx->stream, dqkv, dq, 3 * C, 0, p0, np, T, NH, HS);
        scatter_heads(ctx->stream, dqkv, dk, 3 * C, C, p0, np, T, NH, HS);
        scatter_heads(ctx->stream, dqkv, dv, 3 * C, 2 * C, p0, np, T, NH, HS);
    }
}

} // namespace

void cuda_attention_forward(tg_o o, void *out, void *att, const void *qkv, int B, int T, int NH, int HS, tg_dropout drop) {
    if (B <= 0 || T <= 0 || NH <= 0 || HS <= 0) return;
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (o->act == TG_BF16)
        attention_forward(ctx, (__nv_bfloat16 *)out, (__nv_bfloat16 *)att, (const __nv_bfloat16 *)qkv, B, T, NH, HS, drop);
    else
        attention_forward(ctx, (float *)out, (float *)att, (const float *)qkv, B, T, NH, HS, drop);
}

void cuda_attention_backward(tg_o o, void *dqkv, const void *dout, const void *qkv, const void *att, int B, int T, int NH,
                             int HS, tg_dropout drop) {
    if (B <= 0 || T <= 0 || NH <= 0 || HS <= 0) return;
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (o->act == TG_BF16)
        attention_backward(ctx, (__nv_bfloat16 *)dqkv, (const __nv_bfloat16 *)dout, (const __nv_bfloat16 *)qkv,
                           (const __nv_bfloat16 *)att, B, T, NH, HS, drop);
    else
        attention_backward(ctx, (float *)dqkv, (const float *)dout, (const float *)qkv, (const float *)att, B, T, NH, HS,
                           drop);
}
