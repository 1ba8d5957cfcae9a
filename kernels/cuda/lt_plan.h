/* cuBLASLt products for the launchers of matmul.cu (C++ only). A product's
 * plan (matmul descriptor, the three layouts, the algorithm: the
 * heuristic's first, or the one kernels.lt_tune picks among its top
 * candidates, lt_tune.h) is built once per key and kept in the context's table
 * (lt_plan.cu); a call then only sets its pointers and runs. */
#ifndef KERNELS_CUDA_LT_PLAN_H
#define KERNELS_CUDA_LT_PLAN_H

#include "kernels/cuda/cuda_ctx.h"

/* What cuBLASLt does to a product before it stores it:
 *   CUBLASLT_EPILOGUE_DEFAULT      nothing
 *   CUBLASLT_EPILOGUE_BIAS         D[i, j] += bias[i]; bias: m entries of D's type, read
 *   CUBLASLT_EPILOGUE_GELU_AUX_BIAS  x = D[i, j] + bias[i] (BIAS), then aux[i, j] = x and
 *                                  D[i, j] = gelu(x), gelu the tanh approximation applied
 *                                  to the float32 x; aux: D's type, laid out as D (ld ldd),
 *                                  WRITTEN
 *   CUBLASLT_EPILOGUE_DGELU        D = gelu'(aux) * D, gelu the tanh approximation;
 *                                  aux: the GELU's input, D's type, laid out as D (ld ldd)
 *   CUBLASLT_EPILOGUE_DGELU_BGRAD  DGELU, and bias[i] = sum over j of D[i, j]: m entries
 *                                  of D's type, OVERWRITTEN
 *   CUBLASLT_EPILOGUE_BGRADA       D as DEFAULT, and bias[i] = sum over the product's k of
 *                                  op(A)[i, k] (the gradient of a bias added along A's m
 *                                  rows): m entries of D's type, OVERWRITTEN
 * bias and aux are addresses handed to cuBLASLt, which writes through them
 * where the epilogue outputs (BGRAD*, GELU_AUX_BIAS's aux); this code never
 * writes through them. */
struct lt_epilogue {
    cublasLtEpilogue_t kind;
    const void *bias;
    const void *aux;
};

/* Where a product runs: its stream and cuBLASLt workspace. Every plan is
 * chosen for a workspace of the context's lt_workspace_bytes, and a lane's
 * holds that many, so a key runs the same algorithm, hence the same bits,
 * on either lane: the context's own (lt_main_lane), or the weight
 * gradients' beside it (matmul.cu, kernels.dw_overlap). */
struct lt_lane {
    cudaStream_t stream;
    void *workspace;
};
static inline lt_lane lt_main_lane(const cuda_ctx *ctx) { return lt_lane{ctx->stream, ctx->lt_workspace}; }

/* One column-major product, accumulated in float32:
 *   D[m, n] = epilogue(op(A)[m, k] @ op(B)[k, n] + beta * D)
 * A is stored [m, k] (trans_a false) or [k, m] (trans_a true), column-major
 * with leading dimension lda; B likewise [k, n] or [n, k] with ldb. A and B
 * have type ab; D has type d, leading dimension ldd, and is also the C
 * operand (read when beta = 1). Returns false, having run nothing, only when
 * an epilogue is asked for and cuBLASLt has no algorithm with it; with no
 * epilogue that stops the program, as does any other failure. */
bool lt_product(cuda_ctx *ctx, const lt_lane &lane, const char *what, bool trans_a, bool trans_b, int m, int n, int k,
                const void *A, int lda, const void *B, int ldb, cudaDataType ab, void *D, int ldd, cudaDataType d, float beta,
                lt_epilogue ep);

/* lt_product without an epilogue: it always runs (or the program stops). */
void lt_gemm(cuda_ctx *ctx, const lt_lane &lane, const char *what, bool trans_a, bool trans_b, int m, int n, int k, const void *A,
             int lda, const void *B, int ldb, cudaDataType ab, void *D, int ldd, cudaDataType d, float beta);

#endif
