/* Packed, cache-blocked SGEMM (the GotoBLAS/BLIS scheme): B is packed once per
 * (K block, N block) into NR-wide panels shared by all threads; each task packs
 * an MC x KC block of A into MR-tall panels and runs an MR x NR register-tile
 * micro-kernel over them. The micro-kernel is chosen at run time from the CPU's
 * features, so the default build stays portable (no -march=native). */
#include "kernels/cpu/gemm.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

#define KC 256
#define MC_PANELS 24   /* MC = MR * MC_PANELS rows of A per task */
#define NC 4096        /* columns of B packed at once */
#define TASK_COLS 256  /* columns of C per task (a multiple of every NR) */
#define MAX_MR 6
#define MAX_NR 32

typedef float v16f __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));

typedef void (*micro_kernel)(int kc, const float *ap, const float *bp, float *c, int ldc, bool accumulate);

/* An MR=6 x NR=(2*W) register tile: 12 accumulators of W floats, for a k-loop
 * over packed panels. Instantiated per instruction set; the vector type VEC
 * holds W floats, and the compiler maps it to zmm (AVX-512), ymm (AVX2) or
 * pairs of xmm (SSE2) registers. */
#define DEFINE_MICRO_KERNEL(NAME, VEC, W, ATTR)                                                         \
    ATTR static void NAME(int kc, const float *ap, const float *bp, float *c, int ldc, bool accumulate) { \
        VEC acc[6][2] = {{{0}}};                                                                          \
        for (int k = 0; k < kc; k++) {                                                                    \
            VEC b0, b1;                                                                                   \
            memcpy(&b0, bp + k * 2 * (W), sizeof(VEC));                                                   \
            memcpy(&b1, bp + k * 2 * (W) + (W), sizeof(VEC));                                             \
            for (int i = 0; i < 6; i++) {                                                                 \
                float a = ap[k * 6 + i];                                                                  \
                acc[i][0] += a * b0;                                                                      \
                acc[i][1] += a * b1;                                                                      \
            }                                                                                             \
        }                                                                                                 \
        for (int i = 0; i < 6; i++) {                                                                     \
            float *row = c + (size_t)i * ldc;                                                             \
            if (accumulate) {                                                                             \
                VEC c0, c1;                                                                               \
                memcpy(&c0, row, sizeof(VEC));                                                            \
                memcpy(&c1, row + (W), sizeof(VEC));                                                      \
                acc[i][0] += c0;                                                                          \
                acc[i][1] += c1;                                                                          \
            }                                                                                             \
            memcpy(row, &acc[i][0], sizeof(VEC));                                                         \
            memcpy(row + (W), &acc[i][1], sizeof(VEC));                                                   \
        }                                                                                                 \
    }

DEFINE_MICRO_KERNEL(kernel_6x32_avx512, v16f, 16, __attribute__((target("avx512f,fma"))))
DEFINE_MICRO_KERNEL(kernel_6x16_avx2, v8f, 8, __attribute__((target("avx2,fma"))))
DEFINE_MICRO_KERNEL(kernel_6x16_generic, v8f, 8, )

typedef struct {
    int mr, nr;
    micro_kernel fn;
    const char *name;
} kernel_choice;

/* The named kernel if this CPU runs it, else the best one it runs. */
static kernel_choice choose_kernel(const char *name) {
    const kernel_choice avx512 = {6, 32, kernel_6x32_avx512, "avx512"}, avx2 = {6, 16, kernel_6x16_avx2, "avx2"},
                        generic = {6, 16, kernel_6x16_generic, "generic"};
    __builtin_cpu_init();
    const bool has_fma = __builtin_cpu_supports("fma");
    const bool has_avx512 = has_fma && __builtin_cpu_supports("avx512f"), has_avx2 = has_fma && __builtin_cpu_supports("avx2");
    if (name && strcmp(name, "generic") == 0) return generic;
    if (name && strcmp(name, "avx2") == 0 && has_avx2) return avx2;
    if (has_avx512 && (!name || strcmp(name, "avx512") == 0)) return avx512;
    if (has_avx2) return avx2;
    return generic;
}

const char *cpu_gemm_kernel_name(void) { return choose_kernel(NULL).name; }

/* Element x of a float32 or bfloat16 operand, as a float: packing widens
 * bf16 operands, so the micro-kernels only ever see float32. */
static inline float operand_at(const void *M, tg_dtype type, size_t x) {
    return type == TG_BF16 ? tg_bf16_to_f32(((const uint16_t *)M)[x]) : ((const float *)M)[x];
}

/* op(A)(i, k) and op(B)(k, j) for the packing loops. */
static inline float elem_a(const void *A, tg_dtype type, int lda, bool t, int i, int k) {
    return operand_at(A, type, t ? (size_t)k * lda + i : (size_t)i * lda + k);
}
static inline float elem_b(const void *B, tg_dtype type, int ldb, bool t, int k, int j) {
    return operand_at(B, type, t ? (size_t)j * ldb + k : (size_t)k * ldb + j);
}

/* Packs rows [i0, i0+mc) x cols [k0, k0+kc) of op(A) as MR-tall panels,
 * k-major inside a panel; rows past M are zero. */
static void pack_a(float *dst, const void *A, tg_dtype type, int lda, bool t, int i0, int mc, int k0, int kc, int mr, int M) {
    for (int p = 0; p < mc; p += mr) {
        for (int k = 0; k < kc; k++)
            for (int r = 0; r < mr; r++) {
                int i = i0 + p + r;
                *dst++ = i < M ? elem_a(A, type, lda, t, i, k0 + k) : 0.0f;
            }
    }
}

/* Packs rows [k0, k0+kc) x cols [j0, j0+nc) of op(B) as NR-wide panels;
 * columns past N are zero. Panels are independent, so threads share the work. */
static void pack_b(float *dst, const void *B, tg_dtype type, int ldb, bool t, int k0, int kc, int j0, int nc, int nr, int N) {
    int panels = (nc + nr - 1) / nr;
#pragma omp parallel for schedule(static)
    for (int q = 0; q < panels; q++) {
        float *out = dst + (size_t)q * kc * nr;
        for (int k = 0; k < kc; k++)
            for (int c = 0; c < nr; c++) {
                int j = j0 + q * nr + c;
                *out++ = j < N ? elem_b(B, type, ldb, t, k0 + k, j) : 0.0f;
            }
    }
}

/* Runs the micro-kernel over one tile, going through a scratch tile when the
 * tile hangs over the edge of C. */
static void run_tile(const kernel_choice *kc_, int kc, const float *ap, const float *bp, float *c, int ldc, bool accumulate,
                     int m_valid, int n_valid) {
    if (m_valid == kc_->mr && n_valid == kc_->nr) {
        kc_->fn(kc, ap, bp, c, ldc, accumulate);
        return;
    }
    float tile[MAX_MR * MAX_NR];
    for (int i = 0; i < m_valid; i++)
        for (int j = 0; j < n_valid; j++) tile[i * kc_->nr + j] = accumulate ? c[(size_t)i * ldc + j] : 0.0f;
    kc_->fn(kc, ap, bp, tile, kc_->nr, true);
    for (int i = 0; i < m_valid; i++)
        for (int j = 0; j < n_valid; j++) c[(size_t)i * ldc + j] = tile[i * kc_->nr + j];
}

static void zero_c(int M, int N, float *C, int ldc) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++) memset(C + (size_t)i * ldc, 0, (size_t)N * sizeof(float));
}

/* The product with micro-kernel kern, A and B of element type `type`. */
static const char *gemm_run(kernel_choice kern, tg_dtype type, bool trans_a, bool trans_b, int M, int N, int K, const void *A,
                            int lda, const void *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return kern.name;
    if (K <= 0) {
        if (beta == 0.0f) zero_c(M, N, C, ldc);
        return kern.name;
    }
    const int mr = kern.mr, nr = kern.nr, mc = mr * MC_PANELS;
    int ncols = N < NC ? N : NC;
    size_t bpack_bytes = (size_t)KC * ((ncols + nr - 1) / nr * nr) * sizeof(float);
    float *bpack = aligned_alloc(64, (bpack_bytes + 63) / 64 * 64);
    if (!bpack) {
        tg_err e;
        tg_fail(&e, "out of memory packing a matrix product");
        tg_die("train_gpt", &e);
    }
    for (int j0 = 0; j0 < N; j0 += NC) {
        int nc = N - j0 < NC ? N - j0 : NC;
        for (int k0 = 0; k0 < K; k0 += KC) {
            int kc = K - k0 < KC ? K - k0 : KC;
            bool accumulate = k0 > 0 || beta != 0.0f;
            pack_b(bpack, B, type, ldb, trans_b, k0, kc, j0, nc, nr, N);
            int m_tasks = (M + mc - 1) / mc, n_tasks = (nc + TASK_COLS - 1) / TASK_COLS;
#pragma omp parallel
            {
                float *apack = tg_malloc(sizeof(float) * MC_PANELS * MAX_MR * KC, "packed matrix block");
#pragma omp for schedule(dynamic) collapse(2)
                for (int mt = 0; mt < m_tasks; mt++)
                    for (int nt = 0; nt < n_tasks; nt++) {
                        int i0 = mt * mc, mcur = M - i0 < mc ? M - i0 : mc;
                        pack_a(apack, A, type, lda, trans_a, i0, mcur, k0, kc, mr, M);
                        int jt0 = nt * TASK_COLS, jt1 = jt0 + TASK_COLS < nc ? jt0 + TASK_COLS : nc;
                        for (int jj = jt0; jj < jt1; jj += nr) {
                            const float *bp = bpack + (size_t)(jj / nr) * kc * nr;
                            int n_valid = nc - jj < nr ? nc - jj : nr;
                            for (int ii = 0; ii < mcur; ii += mr) {
                                int m_valid = mcur - ii < mr ? mcur - ii : mr;
                                float *c = C + (size_t)(i0 + ii) * ldc + j0 + jj;
                                run_tile(&kern, kc, apack + (size_t)ii * kc, bp, c, ldc, accumulate, m_valid, n_valid);
                            }
                        }
                    }
                free(apack);
            }
        }
    }
    free(bpack);
    return kern.name;
}

void cpu_gemm(bool trans_a, bool trans_b, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
              float *C, int ldc) {
    cpu_gemm_with(NULL, trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

const char *cpu_gemm_with(const char *kernel, bool trans_a, bool trans_b, int M, int N, int K, const float *A, int lda,
                          const float *B, int ldb, float beta, float *C, int ldc) {
    return gemm_run(choose_kernel(kernel), TG_F32, trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

void cpu_gemm_typed(tg_dtype type, bool trans_a, bool trans_b, int M, int N, int K, const void *A, int lda, const void *B,
                    int ldb, float beta, float *C, int ldc) {
    gemm_run(choose_kernel(NULL), type, trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc);
}
