/* Linear layers and the tied LM head on cuBLASLt, as kernels/cpu/matmul.c.
 *
 * cuBLASLt is column-major and our matrices are row-major. Everything here
 * rests on one identity: a row-major [R, K] matrix (row stride K) is, byte
 * for byte, the column-major [K, R] matrix with leading dimension K, i.e.
 * its transpose. So the row-major product Y = X @ W is computed as the
 * column-major Y^T = W^T @ X^T, each operand read in place; every launcher
 * spells out its mapping above its call.
 *
 * One helper (lt_product) builds the descriptors, asks the heuristic for an
 * algorithm (with the operands' real alignment), runs cublasLtMatmul and
 * destroys the descriptors. Products accumulate in float32
 * (CUBLAS_COMPUTE_32F: no TF32, so the fp32 path matches the CPU); bf16
 * operands use the tensor cores. Weight gradients are float32 and
 * accumulate (beta = 1): bf16 A/B with float32 C/D. The bias gradient is
 * cuda_bias_backward's deterministic column sum (residual.cu), as the CPU
 * twin calls cpu_bias_backward. */
#include <stdint.h>

#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernels.h"

namespace {

cudaDataType act_type(tg_o o) { return o->act == TG_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

const char *type_name(cudaDataType t) { return t == CUDA_R_16BF ? "bf16" : t == CUDA_R_32F ? "fp32" : "?"; }

/* The largest power of two, at most 16, that divides the address: what the
 * heuristic may assume of the pointer. Capped at 16 (the most cuBLASLt's
 * vectorised loads need) so that every buffer aligned to 16 bytes or more
 * gets the same algorithm, hence bitwise the same result, wherever it
 * lives (recompute modes move activations between buffers). */
uint32_t ptr_alignment(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t align = 16;
    while (align > 1 && a % align != 0) align /= 2;
    return align;
}

template <typename V>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, V value) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof value));
}

template <typename V>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, V value) {
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof value));
}

/* One column-major product, accumulated in float32:
 *   D[m, n] = op(A)[m, k] @ op(B)[k, n] + beta * D   (+ bias[m] on every column)
 * A is stored [m, k] (trans_a false) or [k, m] (trans_a true), column-major
 * with leading dimension lda; B likewise [k, n] or [n, k] with ldb. A and B
 * have type ab; D has type d, leading dimension ldd, and is also the C
 * operand (read when beta = 1). bias, when non-NULL, has type d and m
 * entries. Returns false, having run nothing, only when bias is given and
 * no algorithm supports the bias epilogue; any other failure is fatal. */
bool lt_product(cuda_ctx *ctx, const char *what, bool trans_a, bool trans_b, int m, int n, int k, const void *A, int lda,
                const void *B, int ldb, cudaDataType ab, void *D, int ldd, cudaDataType d, float beta, const void *bias) {
    if (m == 0 || n == 0 || (k == 0 && beta == 1.0f)) return true; /* nothing changes */

    cublasLtMatmulDesc_t desc;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSA, (int32_t)(trans_a ? CUBLAS_OP_T : CUBLAS_OP_N));
    set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSB, (int32_t)(trans_b ? CUBLAS_OP_T : CUBLAS_OP_N));
    if (bias) {
        set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, (uint32_t)CUBLASLT_EPILOGUE_BIAS);
        set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
        set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, (int32_t)d);
    }

    /* Layouts take the matrices as stored: rows, columns, leading dimension. */
    cublasLtMatrixLayout_t a_layout, b_layout, d_layout;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_layout, ab, trans_a ? k : m, trans_a ? m : k, lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_layout, ab, trans_b ? n : k, trans_b ? k : n, ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d_layout, d, m, n, ldd));

    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint32_t align_a = ptr_alignment(A), align_b = ptr_alignment(B), align_d = ptr_alignment(D);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, (uint64_t)ctx->lt_workspace_bytes);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d);

    cublasLtMatmulHeuristicResult_t heuristic;
    int found = 0;
    cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(ctx->lt, desc, a_layout, b_layout, d_layout, d_layout, pref, 1, &heuristic, &found);
    const bool ok = st == CUBLAS_STATUS_SUCCESS && found > 0;
    if (!ok && !bias) {
        tg_err e;
        tg_fail(&e,
                "cuBLASLt has no algorithm for %s: m=%d n=%d k=%d, op(A)=%c op(B)=%c, A/B %s, D %s, lda=%d ldb=%d ldd=%d, "
                "alignment A %u B %u D %u bytes (heuristic status %d, %d found)",
                what, m, n, k, trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', type_name(ab), type_name(d), lda, ldb, ldd, align_a,
                align_b, align_d, (int)st, found);
        tg_die("train_gpt", &e);
    }
    if (ok) {
        const float alpha = 1.0f;
        CUBLAS_CHECK(cublasLtMatmul(ctx->lt, desc, &alpha, A, a_layout, B, b_layout, &beta, D, d_layout, D, d_layout,
                                    &heuristic.algo, ctx->lt_workspace, ctx->lt_workspace_bytes, ctx->stream));
    }

    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(d_layout));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(b_layout));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(a_layout));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc));
    return ok;
}

/* lt_product without a bias: it always runs (or the program stops). */
void lt_gemm(cuda_ctx *ctx, const char *what, bool trans_a, bool trans_b, int m, int n, int k, const void *A, int lda,
             const void *B, int ldb, cudaDataType ab, void *D, int ldd, cudaDataType d, float beta) {
    lt_product(ctx, what, trans_a, trans_b, m, n, k, A, lda, B, ldb, ab, D, ldd, d, beta, NULL);
}

/* out[r, c] = bias[c] for r < N, c < OC: the start of a product that
 * accumulates onto the bias when the epilogue is not available. */
template <typename E>
__global__ void broadcast_rows_kernel(E *out, const E *bias, int N, int OC) {
    size_t total = (size_t)N * OC;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        out[i] = bias[i % (size_t)OC];
}

void broadcast_rows(tg_o o, void *out, const void *bias, int N, int OC) {
    const unsigned threads = 256, max_blocks = 1u << 20;
    unsigned blocks = tg_blocks((size_t)N * OC, threads);
    if (blocks > max_blocks) blocks = max_blocks;
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (o->act == TG_BF16)
        broadcast_rows_kernel<<<blocks, threads, 0, stream>>>((__nv_bfloat16 *)out, (const __nv_bfloat16 *)bias, N, OC);
    else
        broadcast_rows_kernel<<<blocks, threads, 0, stream>>>((float *)out, (const float *)bias, N, OC);
    CUDA_LAUNCHED("broadcast_rows_kernel");
}

} // namespace

void cuda_matmul_forward(tg_o o, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    if (N <= 0 || OC <= 0) return;
    cuda_ctx *ctx = cuda_ctx_of(o);
    const cudaDataType t = act_type(o);
    /* out[N, OC] = inp[N, C] @ w[C, OC]. Column-major: out^T [OC, N] = w^T [OC, C] @ inp^T [C, N]:
     *   w   row-major [C, OC] = column-major [OC, C], ld OC: A, op N   (m = OC, k = C)
     *   inp row-major [N, C]  = column-major [C, N],  ld C:  B, op N   (n = N)
     *   out row-major [N, OC] = column-major [OC, N], ld OC: D, beta 0
     * bias[OC] runs along D's OC rows, broadcast over its N columns: the BIAS epilogue. */
    if (lt_product(ctx, "matmul forward", false, false, OC, N, C, w, OC, inp, C, t, out, OC, t, 0.0f, bias)) return;
    /* No algorithm with the bias epilogue: write the bias into every row and add the product to it. */
    broadcast_rows(o, out, bias, N, OC);
    lt_gemm(ctx, "matmul forward (onto the bias)", false, false, OC, N, C, w, OC, inp, C, t, out, OC, t, 1.0f);
}

void cuda_matmul_backward(tg_o o, void *dinp, float *dw, float *dbias, const void *dout, const void *inp, const void *w, int N,
                          int C, int OC) {
    if (N <= 0) return; /* no rows: no gradient to add */
    cuda_ctx *ctx = cuda_ctx_of(o);
    const cudaDataType t = act_type(o);
    /* dinp[N, C] = dout[N, OC] @ w^T. Column-major: dinp^T [C, N] = w [C, OC] @ dout^T [OC, N]:
     *   w    row-major [C, OC] = column-major [OC, C], ld OC; w itself [C, OC]: A, op T   (m = C, k = OC)
     *   dout row-major [N, OC] = column-major [OC, N], ld OC:                  B, op N   (n = N)
     *   dinp row-major [N, C]  = column-major [C, N],  ld C:                   D, beta 0 */
    if (dinp) lt_gemm(ctx, "matmul backward (dinp)", true, false, C, N, OC, w, OC, dout, OC, t, dinp, C, t, 0.0f);
    /* dw[C, OC] += inp^T [C, N] @ dout [N, OC]. Column-major: dw^T [OC, C] = dout^T [OC, N] @ inp [N, C]:
     *   dout row-major [N, OC] = column-major [OC, N], ld OC:          A, op N   (m = OC, k = N)
     *   inp  row-major [N, C]  = column-major [C, N], ld C; inp [N, C]: B, op T   (n = C)
     *   dw   row-major [C, OC] float32 = column-major [OC, C], ld OC:   D, beta 1 */
    lt_gemm(ctx, "matmul backward (dw)", false, true, OC, C, N, dout, OC, inp, C, t, dw, OC, CUDA_R_32F, 1.0f);
    if (dbias) cuda_bias_backward(o, dbias, dout, N, OC);
}

void cuda_lmhead_forward(tg_o o, void *logits, const void *x, const void *wte, int N, int C, int V) {
    if (N <= 0 || V <= 0) return;
    cuda_ctx *ctx = cuda_ctx_of(o);
    const cudaDataType t = act_type(o);
    /* logits[N, V] = x[N, C] @ wte[V, C]^T. Column-major: logits^T [V, N] = wte [V, C] @ x^T [C, N]:
     *   wte    row-major [V, C] = column-major [C, V], ld C; wte itself [V, C]: A, op T   (m = V, k = C)
     *   x      row-major [N, C] = column-major [C, N], ld C:                    B, op N   (n = N)
     *   logits row-major [N, V] = column-major [V, N], ld V:                    D, beta 0 */
    lt_gemm(ctx, "lm head forward", true, false, V, N, C, wte, C, x, C, t, logits, V, t, 0.0f);
}

void cuda_lmhead_backward(tg_o o, void *dx, float *dwte, const void *dlogits, const void *x, const void *wte, int N, int C,
                          int V) {
    if (N <= 0) return;
    cuda_ctx *ctx = cuda_ctx_of(o);
    const cudaDataType t = act_type(o);
    /* dx[N, C] = dlogits[N, V] @ wte[V, C]. Column-major: dx^T [C, N] = wte^T [C, V] @ dlogits^T [V, N]:
     *   wte     row-major [V, C] = column-major [C, V], ld C: A, op N   (m = C, k = V)
     *   dlogits row-major [N, V] = column-major [V, N], ld V: B, op N   (n = N)
     *   dx      row-major [N, C] = column-major [C, N], ld C: D, beta 0 */
    lt_gemm(ctx, "lm head backward (dx)", false, false, C, N, V, wte, C, dlogits, V, t, dx, C, t, 0.0f);
    /* dwte[V, C] += dlogits^T [V, N] @ x [N, C]. Column-major: dwte^T [C, V] = x^T [C, N] @ dlogits [N, V]:
     *   x       row-major [N, C] = column-major [C, N], ld C:                  A, op N   (m = C, k = N)
     *   dlogits row-major [N, V] = column-major [V, N], ld V; dlogits [N, V]: B, op T   (n = V)
     *   dwte    row-major [V, C] float32 = column-major [C, V], ld C:          D, beta 1 */
    lt_gemm(ctx, "lm head backward (dwte)", false, true, C, V, N, x, C, dlogits, V, t, dwte, C, CUDA_R_32F, 1.0f);
}
