/* Single-precision matrix product for the CPU backend, row-major:
 *   C[M,N] = beta * C + op(A) @ op(B)
 * op(A) is M x K (A itself is K x M when trans_a), op(B) is K x N (B is
 * N x K when trans_b). beta is 0 (overwrite) or 1 (accumulate).
 * Results do not depend on the thread count: every element of C sums its
 * K products in one fixed order. */
#ifndef KERNELS_CPU_GEMM_H
#define KERNELS_CPU_GEMM_H

#include <stdbool.h>

#include "util/dtype.h"

void cpu_gemm(bool trans_a, bool trans_b, int M, int N, int K,
              const float *A, int lda, const float *B, int ldb,
              float beta, float *C, int ldc);

/* The same with a named micro-kernel ("avx512", "avx2", "generic"; NULL: the
 * best this CPU runs), falling back to the best available; returns the name
 * of the kernel that ran (tests use it to cover every kernel). */
const char *cpu_gemm_with(const char *kernel, bool trans_a, bool trans_b, int M, int N, int K, const float *A, int lda,
                          const float *B, int ldb, float beta, float *C, int ldc);

/* The same with A and B of element type `type` (float32 or bfloat16, which
 * the packing widens to float32); C stays float32. */
void cpu_gemm_typed(tg_dtype type, bool trans_a, bool trans_b, int M, int N, int K, const void *A, int lda, const void *B,
                    int ldb, float beta, float *C, int ldc);

/* The micro-kernel chosen for this CPU ("avx512", "avx2", "generic"). */
const char *cpu_gemm_kernel_name(void);

#endif
