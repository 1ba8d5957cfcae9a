/* Linear layers and the tied LM head on cuBLASLt, as kernels/cpu/matmul.c.
 *
 * cuBLASLt is column-major and our matrices are row-major. Everything here
 * rests on one identity: a row-major [R, K] matrix (row stride K) is, byte
 * for byte, the column-major [K, R] matrix with leading dimension K, i.e.
 * its transpose. So the row-major product Y = X @ W is computed as the
 * column-major Y^T = W^T @ X^T, each operand read in place; every launcher
 * spells out its mapping above its call.
 *
 * Every product goes through lt_product (lt_plan.cu), which builds a
 * product's plan (descriptors, layouts, the heuristic's algorithm for the
 * operands' real alignment) once per shape and keeps it in the context.
 * Products accumulate in float32 (CUBLAS_COMPUTE_32F: no TF32, so the fp32
 * path matches the CPU); bf16 operands use the tensor cores. Weight
 * gradients are float32, bf16 A/B with float32 C/D, written on a step's
 * first micro-batch (beta = 0) and accumulated on the others (beta = 1):
 * acc, kernels/ops.h. Both run the same plan (beta is not in its key). A
 * bias gradient beside a weight gradient comes from the weight gradient's
 * product (the BGRADA epilogue, dw_product); alone, or where cuBLASLt
 * refuses the epilogue, it is cuda_bias_backward's deterministic column sum
 * (residual.cu), as the CPU twin calls cpu_bias_backward.
 *
 * Epilogues: the forward's bias is cuBLASLt's BIAS epilogue, and the MLP's
 * c_fc adds its GELU too (GELU_AUX_BIAS, cuda_matmul_forward_gelu). The MLP's
 * backward (matmul_backward_dgelu) folds the GELU derivative into the
 * projection's input-gradient product with the DGELU epilogue (aux = the
 * GELU's input), and in fp32 its fc bias gradient too (DGELU_BGRAD). Each
 * falls back to the unfused kernels when cuBLASLt offers no algorithm. */

#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/lt_plan.h"

namespace {

cudaDataType act_type(tg_o o) { return o->act == TG_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

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

/* dst[i] (+)= src[i] for i < n (float32): added (acc), else written. */
__global__ void accumulate_kernel(float *dst, const float *src, int n, bool acc) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        dst[i] = (acc ? dst[i] : 0.0f) + src[i];
}

void accumulate(cudaStream_t stream, float *dst, const float *src, int n, bool acc) {
    const unsigned threads = 256;
    accumulate_kernel<<<tg_blocks((size_t)n, threads), threads, 0, stream>>>(dst, src, n, acc);
    CUDA_LAUNCHED("accumulate_kernel");
}

/* kernels.dw_overlap: a call's weight-gradient product on the side stream
 * while its input-gradient product runs on the compute stream. Both read
 * the same inputs and write apart; the call joins them before it returns.
 * The side's cuBLASLt workspace is the top lt_workspace_bytes of the kernel
 * scratch, which no other user touches meanwhile: the call's other users
 * (an epilogue's bias gradient) stay within its first `low` bytes, and a
 * column sum (cuda_bias_backward) runs beside it only where its partials
 * stay below it too, else after the join. False, for the two products in
 * turn on the compute stream, when the option is off or the scratch has no
 * such room (a small one, as the kernel checks' chunked runs give). The
 * same plans on either lane (lt_lane), so the same bits. */
bool side_lane(const cuda_ctx *ctx, size_t low, lt_lane *side) {
    if (!ctx->dw_overlap || ctx->scratch_bytes < ctx->lt_workspace_bytes + low) return false;
    *side = lt_lane{ctx->side_stream, (char *)ctx->scratch + (ctx->scratch_bytes - ctx->lt_workspace_bytes)};
    return true;
}

/* The side stream's later work waits for all the compute stream has queued. */
void fork_side(cuda_ctx *ctx) {
    CUDA_CHECK(cudaEventRecord(ctx->side_fork, ctx->stream));
    CUDA_CHECK(cudaStreamWaitEvent(ctx->side_stream, ctx->side_fork, 0));
}

/* The compute stream's later work waits for all the side stream has queued
 * (in a captured graph this also joins the side stream back into it). */
void join_side(cuda_ctx *ctx) {
    CUDA_CHECK(cudaEventRecord(ctx->side_join, ctx->side_stream));
    CUDA_CHECK(cudaStreamWaitEvent(ctx->stream, ctx->side_join, 0));
}

const lt_epilogue NO_EPILOGUE = {CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL};

/* dinp[N, C] = dout[N, OC] @ w^T, with epilogue ep. Column-major: dinp^T [C, N] = w [C, OC] @ dout^T [OC, N]:
 *   w    row-major [C, OC] = column-major [OC, C], ld OC; w itself [C, OC]: A, op T   (m = C, k = OC)
 *   dout row-major [N, OC] = column-major [OC, N], ld OC:                  B, op N   (n = N)
 *   dinp row-major [N, C]  = column-major [C, N],  ld C:                   D, beta 0
 * False, having run nothing, when cuBLASLt has no algorithm with the epilogue. */
bool dinp_product(cuda_ctx *ctx, cudaDataType t, void *dinp, const void *dout, const void *w, int N, int C, int OC,
                  lt_epilogue ep) {
    return lt_product(ctx, lt_main_lane(ctx), "matmul backward (dinp)", true, false, C, N, OC, w, OC, dout, OC, t, dinp, C, t,
                      0.0f, ep);
}

/* dw[C, OC] (+)= inp^T [C, N] @ dout [N, OC]. Column-major: dw^T [OC, C] = dout^T [OC, N] @ inp [N, C]:
 *   dout row-major [N, OC] = column-major [OC, N], ld OC:          A, op N   (m = OC, k = N)
 *   inp  row-major [N, C]  = column-major [C, N], ld C; inp [N, C]: B, op T   (n = C)
 *   dw   row-major [C, OC] float32 = column-major [OC, C], ld OC:   D, beta 1 (acc) or 0
 * and, if dbias is not NULL, dbias[OC] (+)= column sums of dout (acc): A's sums over
 * the product's k (N), one per row of D, which is cuBLASLt's BGRADA epilogue
 * (BGRADB would sum B = inp). Its output has D's type, float32 here in bf16
 * too, so no rounding is added; it overwrites, so it goes to the scratch
 * and is added to dbias, or copied there when acc is false (OC floats read
 * twice and written once, where the unfused column sum reads all N * OC of
 * dout), on the lane's stream. True when that took care of dbias (or it is
 * NULL); false where cuBLASLt refuses the epilogue: the plain product ran,
 * and the caller adds cuda_bias_backward's column sum. */
bool dw_product(cuda_ctx *ctx, const lt_lane &lane, cudaDataType t, float *dw, float *dbias, const void *dout, const void *inp,
                int N, int C, int OC, bool acc) {
    const char *what = "matmul backward (dw)";
    const bool bgrad = dbias && (size_t)OC * sizeof(float) <= ctx->scratch_bytes;
    const lt_epilogue ep = {bgrad ? CUBLASLT_EPILOGUE_BGRADA : CUBLASLT_EPILOGUE_DEFAULT, bgrad ? ctx->scratch : NULL, NULL};
    if (lt_product(ctx, lane, what, false, true, OC, C, N, dout, OC, inp, C, t, dw, OC, CUDA_R_32F, acc ? 1.0f : 0.0f, ep)) {
        if (bgrad) accumulate(lane.stream, dbias, (const float *)ctx->scratch, OC, acc);
        return bgrad || !dbias;
    }
    lt_gemm(ctx, lane, what, false, true, OC, C, N, dout, OC, inp, C, t, dw, OC, CUDA_R_32F, acc ? 1.0f : 0.0f);
    return false;
}

/* matmul_backward_dgelu's bias gradient, on the compute stream: the
 * DGELU_BGRAD epilogue's sums (summed: in the scratch's first C floats)
 * added, else the column sum of dpre; nothing without dpre_bias. */
void bias_of_dpre(tg_o o, float *dpre_bias, const void *dpre, bool summed, int N, int C, bool acc) {
    if (summed) accumulate(cuda_ctx_of(o)->stream, dpre_bias, (const float *)cuda_ctx_of(o)->scratch, C, acc);
    else if (dpre_bias) cuda_bias_backward(o, dpre_bias, dpre, N, C, acc);
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
    const lt_epilogue ep = {bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT, bias, NULL};
    if (lt_product(ctx, lt_main_lane(ctx), "matmul forward", false, false, OC, N, C, w, OC, inp, C, t, out, OC, t, 0.0f, ep))
        return;
    /* No algorithm with the bias epilogue: write the bias into every row and add the product to it. */
    broadcast_rows(o, out, bias, N, OC);
    lt_gemm(ctx, lt_main_lane(ctx), "matmul forward (onto the bias)", false, false, OC, N, C, w, OC, inp, C, t, out, OC, t, 1.0f);
}

void cuda_matmul_forward_gelu(tg_o o, void *out, void *pre, const void *inp, const void *w, const void *bias, int N, int C,
                              int OC) {
    if (N <= 0 || OC <= 0) return;
    cuda_ctx *ctx = cuda_ctx_of(o);
    /* cuda_matmul_forward's product (out^T [OC, N] = w^T @ inp^T, the bias
     * along D's OC rows) with the GELU_AUX_BIAS epilogue: D = out = gelu(x)
     * and the aux output pre = x, x the product plus the bias, pre laid out
     * as out (column-major [OC, N], ld OC; cuBLASLt wants that ld divisible
     * by 8). It saves gelu_forward's read of pre and write of out. The
     * GELU is cuBLASLt's tanh form on the float32 x: the bits may differ
     * from gelu_forward(pre) (ops.h). */
    const lt_epilogue ep = {CUBLASLT_EPILOGUE_GELU_AUX_BIAS, bias, pre};
    if (bias && OC % 8 == 0 &&
        lt_product(ctx, lt_main_lane(ctx), "matmul forward (GELU)", false, false, OC, N, C, w, OC, inp, C, act_type(o), out, OC,
                   act_type(o), 0.0f, ep))
        return;
    /* no algorithm with the epilogue: the two ops it stands for */
    cuda_matmul_forward(o, pre, inp, w, bias, N, C, OC);
    cuda_gelu_forward(o, out, pre, (size_t)N * OC);
}

void cuda_matmul_backward(tg_o o, void *dinp, float *dw, float *dbias, const void *dout, const void *inp, const void *w, int N,
                          int C, int OC, bool acc) {
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (N <= 0) { /* no rows: no gradient to add; written, an empty sum */
        if (dw && !acc) CUDA_CHECK(cudaMemsetAsync(dw, 0, (size_t)C * OC * sizeof(float), ctx->stream));
        if (dbias) cuda_bias_backward(o, dbias, dout, N, OC, acc);
        return;
    }
    const cudaDataType t = act_type(o);
    bool bias_done = !dbias;
    lt_lane side;
    if (dinp && dw && side_lane(ctx, dbias ? (size_t)OC * sizeof(float) : 0, &side)) {
        fork_side(ctx);
        dinp_product(ctx, t, dinp, dout, w, N, C, OC, NO_EPILOGUE);
        bias_done = dw_product(ctx, side, t, dw, dbias, dout, inp, N, C, OC, acc);
        join_side(ctx);
    } else {
        if (dinp) dinp_product(ctx, t, dinp, dout, w, N, C, OC, NO_EPILOGUE);
        if (dw) bias_done = dw_product(ctx, lt_main_lane(ctx), t, dw, dbias, dout, inp, N, C, OC, acc);
    }
    if (!bias_done) cuda_bias_backward(o, dbias, dout, N, OC, acc); /* no epilogue took it */
}

void cuda_matmul_backward_dgelu(tg_o o, void *dpre, float *dpre_bias, float *dw, const void *dout, const void *inp,
                                const void *w, const void *pre, int N, int C, int OC, bool acc) {
    if (N <= 0) { /* no rows: empty sums */
        cuda_matmul_backward(o, NULL, dw, NULL, NULL, NULL, NULL, 0, C, OC, acc);
        if (dpre_bias) cuda_bias_backward(o, dpre_bias, NULL, 0, C, acc);
        return;
    }
    cuda_ctx *ctx = cuda_ctx_of(o);
    const cudaDataType t = act_type(o);
    /* dpre = gelu'(pre) * (dout @ w^T): the input-gradient product with the
     * DGELU epilogue, pre its aux input laid out as dpre (row-major [N, C] =
     * column-major [C, N], ld C; cuBLASLt wants that ld divisible by 8).
     * cuBLASLt's GELU is the tanh approximation, as ours (PyTorch decomposes
     * its cuBLASLt GELU epilogue into gelu(approximate="tanh")).
     * The bias gradient comes from the same epilogue (DGELU_BGRAD) only in
     * fp32: cuBLASLt writes it in D's type (cublasLt.h, BIAS_POINTER), so in
     * bf16 it would round each micro-batch's bias gradient to bf16, and our
     * float32 column sum of dpre keeps it exact instead. The epilogue
     * overwrites its bias output while ours may accumulate: it writes into
     * the scratch, which is then added to dpre_bias (or written there: acc). */
    const bool bgrad = dpre_bias && o->act == TG_F32 && (size_t)C * sizeof(float) <= ctx->scratch_bytes;
    const lt_epilogue ep = {bgrad ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU, bgrad ? ctx->scratch : NULL, pre};
    /* kernels.dw_overlap: the weight gradient (no bias) on the side stream
     * beside the input gradient, its GELU and the bias gradient (a column
     * sum in bf16: memory beside the product's arithmetic), the last after
     * the join where its partials would reach the side's workspace */
    lt_lane side;
    const bool overlap = dw && side_lane(ctx, bgrad ? (size_t)C * sizeof(float) : 0, &side);
    if (overlap) fork_side(ctx);
    const bool fused = C % 8 == 0 && dinp_product(ctx, t, dpre, dout, w, N, C, OC, ep);
    if (!fused) { /* no algorithm with the epilogue: the product, then the GELU's backward in place */
        dinp_product(ctx, t, dpre, dout, w, N, C, OC, NO_EPILOGUE);
        cuda_gelu_backward(o, dpre, pre, dpre, (size_t)N * C);
    }
    if (overlap) dw_product(ctx, side, t, dw, NULL, dout, inp, N, C, OC, acc);
    const bool summed = fused && bgrad; /* the epilogue's sums, in the scratch's first C floats */
    const bool bias_beside = !overlap || summed || !dpre_bias ||
                             cuda_bias_backward_scratch(o, N, C) <= ctx->scratch_bytes - ctx->lt_workspace_bytes;
    if (bias_beside) bias_of_dpre(o, dpre_bias, dpre, summed, N, C, acc);
    if (overlap) join_side(ctx);
    if (!bias_beside) bias_of_dpre(o, dpre_bias, dpre, summed, N, C, acc);
    if (dw && !overlap) dw_product(ctx, lt_main_lane(ctx), t, dw, NULL, dout, inp, N, C, OC, acc);
}

void cuda_lmhead_forward(tg_o o, void *logits, const void *x, const void *wte, int N, int C, int V) {
    if (N <= 0 || V <= 0) return;
    cuda_ctx *ctx = cuda_ctx_of(o);
    const cudaDataType t = act_type(o);
    /* logits[N, V] = x[N, C] @ wte[V, C]^T. Column-major: logits^T [V, N] = wte [V, C] @ x^T [C, N]:
     *   wte    row-major [V, C] = column-major [C, V], ld C; wte itself [V, C]: A, op T   (m = V, k = C)
     *   x      row-major [N, C] = column-major [C, N], ld C:                    B, op N   (n = N)
     *   logits row-major [N, V] = column-major [V, N], ld V:                    D, beta 0 */
    lt_gemm(ctx, lt_main_lane(ctx), "lm head forward", true, false, V, N, C, wte, C, x, C, t, logits, V, t, 0.0f);
}

void cuda_lmhead_backward(tg_o o, void *dx, float *dwte, const void *dlogits, const void *x, const void *wte, int N, int C,
                          int V, bool acc) {
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (N <= 0) { /* no rows: dwte, if written, an empty sum */
        if (dwte && !acc) CUDA_CHECK(cudaMemsetAsync(dwte, 0, (size_t)V * C * sizeof(float), ctx->stream));
        return;
    }
    const cudaDataType t = act_type(o);
    /* dx[N, C] = dlogits[N, V] @ wte[V, C]. Column-major: dx^T [C, N] = wte^T [C, V] @ dlogits^T [V, N]:
     *   wte     row-major [V, C] = column-major [C, V], ld C: A, op N   (m = C, k = V)
     *   dlogits row-major [N, V] = column-major [V, N], ld V: B, op N   (n = N)
     *   dx      row-major [N, C] = column-major [C, N], ld C: D, beta 0 */
    if (dx)
        lt_gemm(ctx, lt_main_lane(ctx), "lm head backward (dx)", false, false, C, N, V, wte, C, dlogits, V, t, dx, C, t, 0.0f);
    /* dwte[V, C] (+)= dlogits^T [V, N] @ x [N, C]. Column-major: dwte^T [C, V] = x^T [C, N] @ dlogits [N, V]:
     *   x       row-major [N, C] = column-major [C, N], ld C:                  A, op N   (m = C, k = N)
     *   dlogits row-major [N, V] = column-major [V, N], ld V; dlogits [N, V]: B, op T   (n = V)
     *   dwte    row-major [V, C] float32 = column-major [C, V], ld C:          D, beta 1 (acc) or 0 */
    if (dwte)
        lt_gemm(ctx, lt_main_lane(ctx), "lm head backward (dwte)", false, true, C, V, N, x, C, dlogits, V, t, dwte, C, CUDA_R_32F,
                acc ? 1.0f : 0.0f);
}
