/* Kernel family: matrix products: the GEMM micro-kernels, linear layers and the tied LM head (matmul_*, lmhead_*).
 * CPU: each kernel against a double-precision reference and its backward
 * against finite differences (tests/kernels/check.h); with CUDA (or the
 * emulation, tests/emu) also the CUDA backend against the CPU one
 * (tests/kernels/twin.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gemm.h"
#include "tests/kernels/check.h"

/* ---- gemm ---- */
static void test_gemm_kernel(tally *t, const char *kernel) {
    const int shapes[][3] = {{37, 53, 300}, {6, 32, 1}, {1, 4100, 17}, {129, 70, 513}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int beta = 0; beta < 2; beta++) {
                    int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                    float *A = randf((size_t)M * K, 1, 1), *B = randf((size_t)K * N, 2, 1);
                    float *C = beta ? randf((size_t)M * N, 3, 1) : poisoned((size_t)M * N);
                    double *want = malloc(sizeof(double) * M * N);
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) {
                            double acc = beta ? C[(size_t)i * N + j] : 0.0;
                            for (int k = 0; k < K; k++)
                                acc += (double)(ta ? A[(size_t)k * M + i] : A[(size_t)i * K + k]) *
                                       (tb ? B[(size_t)j * K + k] : B[(size_t)k * N + j]);
                            want[(size_t)i * N + j] = acc;
                        }
                    const char *ran = cpu_gemm_with(kernel, ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, (float)beta, C, N);
                    char name[96];
                    snprintf(name, sizeof name, "gemm_%s_%dx%dx%d_t%d%d_beta%d", ran, M, N, K, ta, tb, beta);
                    expect_close(t, name, C, want, (size_t)M * N, 1e-5, 1e-5 * sqrt(K));
                    free(A); free(B); free(C); free(want);
                }
}

/* Every micro-kernel this CPU can run (a kernel it cannot run falls back to
 * one already covered, so its cases are skipped rather than repeated). */
void kcheck_gemm(tally *t) {
    const char *kernels[] = {"avx512", "avx2", "generic"};
    for (int i = 0; i < 3; i++) {
        float a = 1, b = 1, c;
        if (strcmp(cpu_gemm_with(kernels[i], false, false, 1, 1, 1, &a, 1, &b, 1, 0.0f, &c, 1), kernels[i]) != 0) {
            printf("# gemm kernel %s: not supported by this CPU, not tested\n", kernels[i]);
            continue;
        }
        test_gemm_kernel(t, kernels[i]);
    }
}

/* ---- matmul (with bias) ---- */
typedef struct { int N, C, OC; const double *x, *w, *b; int wrt; } mm_ctx;
static void mm_ref(const double *x, const double *w, const double *b, double *y, int N, int C, int OC) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double acc = b ? b[o] : 0;
            for (int c = 0; c < C; c++) acc += x[n * C + c] * w[c * OC + o];
            y[n * OC + o] = acc;
        }
}
static void mm_fd(const double *p, double *y, void *vctx) {
    mm_ctx *k = vctx;
    mm_ref(k->wrt == 0 ? p : k->x, k->wrt == 1 ? p : k->w, k->wrt == 2 ? p : k->b, y, k->N, k->C, k->OC);
}
void kcheck_matmul(tally *t) {
    const int N = 13, C = 29, OC = 41;
    float *x = randf(N * C, 20, 1), *w = randf(C * OC, 21, 1), *b = randf(OC, 22, 1), *R = randf(N * OC, 23, 1);
    double *xd = to_d(x, N * C), *wd = to_d(w, C * OC), *bd = to_d(b, OC), *Rd = to_d(R, N * OC);
    double *want = malloc(sizeof(double) * N * OC);
    mm_ref(xd, wd, bd, want, N, C, OC);
    float *out = poisoned(N * OC);
    cpu_matmul_forward(NULL, out, x, w, b, N, C, OC);
    expect_close(t, "matmul_forward_bias", out, want, N * OC, 1e-5, 1e-5);
    mm_ref(xd, wd, NULL, want, N, C, OC);
    free(out);
    out = poisoned(N * OC);
    cpu_matmul_forward(NULL, out, x, w, NULL, N, C, OC);
    expect_close(t, "matmul_forward_nobias", out, want, N * OC, 1e-5, 1e-5);
    float *dx = poisoned(N * C), *dw = randf(C * OC, 24, 1), *db = randf(OC, 25, 1);
    double *dw0 = to_d(dw, C * OC), *db0 = to_d(db, OC);
    cpu_matmul_backward(NULL, dx, dw, db, R, x, w, N, C, OC, true);
    mm_ctx k = {N, C, OC, xd, wd, bd, 0};
    double *g = fd_grad(mm_fd, &k, xd, N * C, Rd, N * OC, 1e-4);
    expect_close(t, "matmul_backward_dinp_fd", dx, g, N * C, 1e-5, 1e-5);
    free(g);
    k.wrt = 1;
    g = fd_grad(mm_fd, &k, wd, C * OC, Rd, N * OC, 1e-4);
    for (int i = 0; i < C * OC; i++) g[i] += dw0[i];
    expect_close(t, "matmul_backward_dw_fd", dw, g, C * OC, 1e-5, 1e-5);
    free(g);
    k.wrt = 2;
    g = fd_grad(mm_fd, &k, bd, OC, Rd, N * OC, 1e-4);
    for (int i = 0; i < OC; i++) g[i] += db0[i];
    expect_close(t, "matmul_backward_dbias_fd", db, g, OC, 1e-5, 1e-5);
    free(g);
    free(x); free(w); free(b); free(R); free(xd); free(wd); free(bd); free(Rd); free(want); free(out); free(dx);
    free(dw); free(db); free(dw0); free(db0);
}

/* ---- matmul backward with the GELU's backward and the bias gradient ---- */
static double dgelu_ref(double x) {
    const double k = sqrt(2 / M_PI), th = tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * k * (1 + 3 * 0.044715 * x * x);
}
void kcheck_matmul_dgelu(tally *t) {
    const int N = 11, C = 24, OC = 19;
    float *inp = randf(N * C, 140, 1), *w = randf(C * OC, 141, 1), *pre = randf(N * C, 142, 3), *dout = randf(N * OC, 143, 1);
    float *dpre = poisoned(N * C), *dw = randf(C * OC, 144, 1), *db = randf(C, 145, 1);
    double *want_dpre = malloc(sizeof(double) * N * C), *want_dw = to_d(dw, C * OC), *want_db = to_d(db, C);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double acc = 0;
            for (int o = 0; o < OC; o++) acc += (double)dout[n * OC + o] * w[c * OC + o];
            want_dpre[n * C + c] = acc * dgelu_ref(pre[n * C + c]);
            want_db[c] += want_dpre[n * C + c];
        }
    for (int c = 0; c < C; c++)
        for (int o = 0; o < OC; o++)
            for (int n = 0; n < N; n++) want_dw[c * OC + o] += (double)inp[n * C + c] * dout[n * OC + o];
    cpu_matmul_backward_dgelu(NULL, dpre, db, dw, dout, inp, w, pre, N, C, OC, true);
    expect_close(t, "matmul_backward_dgelu_dpre", dpre, want_dpre, N * C, 1e-5, 1e-5);
    expect_close(t, "matmul_backward_dgelu_dbias", db, want_db, C, 1e-5, 1e-5);
    expect_close(t, "matmul_backward_dgelu_dw", dw, want_dw, C * OC, 1e-5, 1e-5);
    free(inp); free(w); free(pre); free(dout); free(dpre); free(dw); free(db); free(want_dpre); free(want_dw); free(want_db);
}

/* ---- LM head (tied) ---- */
typedef struct { int N, C, V; const double *x, *wte; int wrt; } lm_ctx;
static void lm_ref(const double *x, const double *wte, double *y, int N, int C, int V) {
    for (int n = 0; n < N; n++)
        for (int v = 0; v < V; v++) {
            double acc = 0;
            for (int c = 0; c < C; c++) acc += x[n * C + c] * wte[v * C + c];
            y[n * V + v] = acc;
        }
}
static void lm_fd(const double *p, double *y, void *vctx) {
    lm_ctx *k = vctx;
    lm_ref(k->wrt == 0 ? p : k->x, k->wrt == 1 ? p : k->wte, y, k->N, k->C, k->V);
}
void kcheck_lmhead(tally *t) {
    const int N = 11, C = 19, V = 45;
    float *x = randf(N * C, 30, 1), *wte = randf(V * C, 31, 1), *R = randf(N * V, 32, 1);
    double *xd = to_d(x, N * C), *wd = to_d(wte, V * C), *Rd = to_d(R, N * V), *want = malloc(sizeof(double) * N * V);
    lm_ref(xd, wd, want, N, C, V);
    float *out = poisoned(N * V);
    cpu_lmhead_forward(NULL, out, x, wte, N, C, V);
    expect_close(t, "lmhead_forward", out, want, N * V, 1e-5, 1e-5);
    float *dx = poisoned(N * C), *dwte = randf(V * C, 33, 1);
    double *dw0 = to_d(dwte, V * C);
    cpu_lmhead_backward(NULL, dx, dwte, R, x, wte, N, C, V, true);
    lm_ctx k = {N, C, V, xd, wd, 0};
    double *g = fd_grad(lm_fd, &k, xd, N * C, Rd, N * V, 1e-4);
    expect_close(t, "lmhead_backward_dx_fd", dx, g, N * C, 1e-5, 1e-5);
    free(g);
    k.wrt = 1;
    g = fd_grad(lm_fd, &k, wd, V * C, Rd, N * V, 1e-4);
    for (int i = 0; i < V * C; i++) g[i] += dw0[i];
    expect_close(t, "lmhead_backward_dwte_fd", dwte, g, V * C, 1e-5, 1e-5);
    free(g);
    free(x); free(wte); free(R); free(xd); free(wd); free(Rd); free(want); free(out); free(dx); free(dwte); free(dw0);
}

#ifdef TG_CUDA
/* ---- CUDA against the CPU ---- */
#include "util/rng_core.h"
#include "tests/kernels/twin.h"
#include "util/err.h"

#ifdef TG_CUDA_EMU
#include "tests/emu/emu_hooks.h"
#define LT_EPILOGUE_BIAS 4u          /* CUBLASLT_EPILOGUE_BIAS */
#define LT_EPILOGUE_DGELU 192u       /* CUBLASLT_EPILOGUE_DGELU */
#define LT_EPILOGUE_DGELU_BGRAD 208u /* CUBLASLT_EPILOGUE_DGELU_BGRAD */
#endif
/* epilogue_calls' kinds, in the GPU build too (where it answers 0) */
#define LT_EPILOGUE_BGRADA 256u        /* CUBLASLT_EPILOGUE_BGRADA */
#define LT_EPILOGUE_GELU_AUX_BIAS 164u /* CUBLASLT_EPILOGUE_GELU_AUX_BIAS */

/* Under the emulation: whether cuBLASLt ran epilogue `kind` `want` times
 * since the count `before` (a fused path or its fallback); else nothing. */
static void expect_epilogue_calls(env *e, unsigned kind, long before, long want, const char *name) {
#ifdef TG_CUDA_EMU
    const long ran = emu_lt_matmul_calls(kind) - before;
    char detail[96];
    snprintf(detail, sizeof detail, "(cuBLASLt ran epilogue %u %ld times; expected %ld)", kind, ran, want);
    check_true(e, ran == want, name, detail);
#else
    (void)e, (void)kind, (void)before, (void)want, (void)name;
#endif
}

/* emu_lt_matmul_calls(kind) under the emulation, else 0. */
static long epilogue_calls(unsigned kind) {
#ifdef TG_CUDA_EMU
    return emu_lt_matmul_calls(kind);
#else
    (void)kind;
    return 0;
#endif
}

/* Whether cuBLASLt offers epilogues here: under the emulation, unless told
 * to refuse them (EMU_LT_NO_EPILOGUE). */
static int epilogues_offered(void) {
#ifdef TG_CUDA_EMU
    return !emu_lt_epilogues_refused();
#else
    return 1;
#endif
}

/* matmul_forward and matmul_backward against the CPU. With a bias the
 * forward takes cuBLASLt's BIAS epilogue, or, where the heuristic has no
 * algorithm for it, writes the bias into every row and adds the product.
 * The backward's bias gradient comes from the weight gradient's product
 * (BGRADA) when both are asked for, else from the column-sum kernel. dw
 * and dbias start from the same random values on both sides, so a bias
 * gradient written where it should be added fails. Under the emulation
 * the test also checks which path ran. */
void cuda_test_matmul(env *e, int N, int C, int OC) {
    NEED(e, matmul_forward);
    NEED(e, matmul_backward);
    twin inp = tw_rand(e, ACT, (size_t)N * C, -1, 1), w = tw_rand(e, ACT, (size_t)C * OC, -1, 1);
    twin bias = tw_rand(e, ACT, OC, -1, 1);
    for (int with_bias = 1; with_bias >= 0; with_bias--) {
        twin out = tw_out(e, ACT, (size_t)N * OC);
        e->cpu->matmul_forward(e->cpu, out.c, inp.c, w.c, with_bias ? bias.c : NULL, N, C, OC);
#ifdef TG_CUDA_EMU
        const long bias0 = emu_lt_matmul_calls(LT_EPILOGUE_BIAS);
#endif
        e->gpu->matmul_forward(e->gpu, out.g, inp.g, w.g, with_bias ? bias.g : NULL, N, C, OC);
        check(e, out, e->tol, "matmul_forward%s N=%d C=%d OC=%d", with_bias ? "_bias" : "_no_bias", N, C, OC);
#ifdef TG_CUDA_EMU
        if (with_bias) {
            const long fused = emu_lt_matmul_calls(LT_EPILOGUE_BIAS) - bias0, want = !emu_lt_epilogues_refused();
            char detail[96], name[96];
            snprintf(detail, sizeof detail, "(cuBLASLt ran BIAS %ld times; expected %ld)", fused, want);
            snprintf(name, sizeof name, "matmul_forward_bias_epilogue N=%d C=%d OC=%d", N, C, OC);
            check_true(e, fused == want, name, detail);
        }
#endif
        tw_free(e, out);
    }
    twin dout = tw_rand(e, ACT, (size_t)N * OC, -1, 1);
    for (int which = 0; which < 4; which++) { /* everything, dbias NULL, dinp NULL, dw NULL */
        const int use_dinp = which != 2, use_dbias = which != 1, use_dw = which != 3;
        twin dinp = tw_out(e, ACT, (size_t)N * C);
        twin dw = tw_rand(e, F32, (size_t)C * OC, -1, 1), dbias = tw_rand(e, F32, OC, -1, 1); /* accumulate */
        e->cpu->matmul_backward(e->cpu, use_dinp ? dinp.c : NULL, use_dw ? dw.c : NULL, use_dbias ? dbias.c : NULL, dout.c, inp.c,
                                w.c, N, C, OC, true);
        const long bgrada0 = epilogue_calls(LT_EPILOGUE_BGRADA);
        e->gpu->matmul_backward(e->gpu, use_dinp ? dinp.g : NULL, use_dw ? dw.g : NULL, use_dbias ? dbias.g : NULL, dout.g, inp.g,
                                w.g, N, C, OC, true);
        const char *tag = which == 0 ? "" : which == 1 ? "_dbias_null" : which == 2 ? "_dinp_null" : "_dw_null";
        if (use_dinp) check(e, dinp, e->tol, "matmul_backward%s dinp N=%d C=%d OC=%d", tag, N, C, OC);
        if (use_dw) check(e, dw, e->tol, "matmul_backward%s dw N=%d C=%d OC=%d", tag, N, C, OC);
        if (use_dbias) check(e, dbias, e->tol, "matmul_backward%s dbias N=%d C=%d OC=%d", tag, N, C, OC);
        char name[96];
        snprintf(name, sizeof name, "matmul_backward%s_bgrada_epilogue N=%d C=%d OC=%d", tag, N, C, OC);
        expect_epilogue_calls(e, LT_EPILOGUE_BGRADA, bgrada0,
                              use_dw && use_dbias && epilogues_offered() && scratch_holds((size_t)OC * sizeof(float)), name);
        tw_free(e, dinp);
        tw_free(e, dw);
        tw_free(e, dbias);
    }
    tw_free(e, dout);
    tw_free(e, inp);
    tw_free(e, w);
    tw_free(e, bias);
}

/* The GELU's output from matmul_forward_gelu: in fp32 with the epilogue
 * (OC divisible by 8) 5e-5, as the DGELU epilogue's dpre below (cuBLASLt's
 * own float32 GELU on the unrounded sum), else the usual tolerance. */
static double gelu_epilogue_tol(const env *e, int OC) {
    return e->act == TG_F32 && OC % 8 == 0 ? 5e-5 : e->tol;
}

/* Whether two device buffers of n activation-type elements hold the same bits. */
static int same_bits(env *e, const void *a, const void *b, size_t n) {
    const size_t bytes = n * gpu_elem(e, ACT);
    char *x = tg_malloc(bytes, "bits"), *y = tg_malloc(bytes, "bits");
    sync_gpu(e);
    e->gpu->download(e->gpu, x, a, bytes);
    e->gpu->download(e->gpu, y, b, bytes);
    const int same = memcmp(x, y, bytes) == 0;
    free(x);
    free(y);
    return same;
}

/* matmul_forward_gelu (the MLP's c_fc with its GELU) against the CPU's
 * composition (matmul_forward into pre, gelu_forward from it; the CPU has
 * no fused op) and against the CUDA backend's own unfused pair (within
 * the tolerance: cuBLASLt's GELU is applied to the float32 sum, ours to
 * the rounded pre, by other formulas); a second call gives the same bits
 * (a recompute relies on it). OC divisible by 8 takes cuBLASLt's
 * GELU_AUX_BIAS epilogue, other OC the unfused fallback; under the
 * emulation the test also checks which ran. */
void cuda_test_matmul_gelu(env *e, int N, int C, int OC) {
    NEED(e, matmul_forward);
    NEED(e, gelu_forward);
    if (!need(e, "matmul_forward_gelu", 1, e->gpu->matmul_forward_gelu != NULL)) return;
    twin inp = tw_rand(e, ACT, (size_t)N * C, -1, 1), w = tw_rand(e, ACT, (size_t)C * OC, -1, 1);
    twin bias = tw_rand(e, ACT, OC, -1, 1);
    twin pre = tw_out(e, ACT, (size_t)N * OC), out = tw_out(e, ACT, (size_t)N * OC);
    e->cpu->matmul_forward(e->cpu, pre.c, inp.c, w.c, bias.c, N, C, OC);
    e->cpu->gelu_forward(e->cpu, out.c, pre.c, (size_t)N * OC);
    const long fused0 = epilogue_calls(LT_EPILOGUE_GELU_AUX_BIAS);
    e->gpu->matmul_forward_gelu(e->gpu, out.g, pre.g, inp.g, w.g, bias.g, N, C, OC);
    check(e, pre, e->tol, "matmul_forward_gelu pre N=%d C=%d OC=%d", N, C, OC);
    check(e, out, gelu_epilogue_tol(e, OC), "matmul_forward_gelu out N=%d C=%d OC=%d", N, C, OC);
    char name[96];
    snprintf(name, sizeof name, "matmul_forward_gelu_epilogue N=%d C=%d OC=%d", N, C, OC);
    expect_epilogue_calls(e, LT_EPILOGUE_GELU_AUX_BIAS, fused0, OC % 8 == 0 && epilogues_offered(), name);

    /* the unfused pair on the GPU, into second buffers */
    twin pre2 = tw_out(e, ACT, (size_t)N * OC), out2 = tw_out(e, ACT, (size_t)N * OC);
    e->gpu->matmul_forward(e->gpu, pre2.g, inp.g, w.g, bias.g, N, C, OC);
    e->gpu->gelu_forward(e->gpu, out2.g, pre2.g, (size_t)N * OC);
    const size_t n = (size_t)N * OC;
    float *fused = tg_malloc(n * sizeof(float), "fused"), *plain = tg_malloc(n * sizeof(float), "unfused");
    sync_gpu(e);
    get_floats(e->gpu, e->act, fused, pre.g, n);
    get_floats(e->gpu, e->act, plain, pre2.g, n);
    snprintf(name, sizeof name, "matmul_forward_gelu_pre_vs_unfused N=%d C=%d OC=%d", N, C, OC);
    compare_floats(e, fused, plain, n, e->tol, name);
    get_floats(e->gpu, e->act, fused, out.g, n);
    get_floats(e->gpu, e->act, plain, out2.g, n);
    snprintf(name, sizeof name, "matmul_forward_gelu_out_vs_unfused N=%d C=%d OC=%d", N, C, OC);
    compare_floats(e, fused, plain, n, gelu_epilogue_tol(e, OC), name);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) differ += fused[i] != plain[i];
    printf("# %s matmul_forward_gelu N=%d C=%d OC=%d: %zu of %zu GELU outputs differ in bits from the unfused pair's\n",
           tg_dtype_name(e->act), N, C, OC, differ, n);
    free(fused);
    free(plain);

    /* again into the second buffers: the same bits */
    e->gpu->matmul_forward_gelu(e->gpu, out2.g, pre2.g, inp.g, w.g, bias.g, N, C, OC);
    snprintf(name, sizeof name, "matmul_forward_gelu_repeat_bitwise N=%d C=%d OC=%d", N, C, OC);
    check_true(e, same_bits(e, out.g, out2.g, n) && same_bits(e, pre.g, pre2.g, n), name, "(a second call changed bits)");
    twin all[] = {inp, w, bias, pre, out, pre2, out2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
}

/* dpre's tolerance. In fp32 the DGELU epilogue (C % 8 == 0) gets 5e-5, not
 * 1e-5: cuBLASLt evaluates GELU's derivative by its own float32 formula. On
 * an H200 (results/gpu/2026-11-27_h200) dpre was 7e-6 to 1.2e-5 off the
 * CPU with the epilogue, against 1.3e-6 for the same product without it
 * and 1.6e-7 for the unfused fallback; a wrong derivative is off by far
 * more. The fallback and bf16 keep the usual tolerance. */
static double dgelu_epilogue_tol(const env *e, int C) {
    return e->act == TG_F32 && C % 8 == 0 ? 5e-5 : e->tol;
}

/* matmul_backward_dgelu against the CPU's composition (matmul_backward,
 * gelu_backward, bias_backward). C divisible by 8 takes cuBLASLt's DGELU
 * epilogue (DGELU_BGRAD in fp32, with the bias gradient), other C the
 * unfused fallback; under the emulation the test also checks which ran
 * (always the fallback when the emulated heuristic refuses epilogues). */
void cuda_test_matmul_dgelu(env *e, int N, int C, int OC) {
    NEED(e, matmul_backward_dgelu);
    twin inp = tw_rand(e, ACT, (size_t)N * C, -1, 1), w = tw_rand(e, ACT, (size_t)C * OC, -1, 1);
    twin pre = tw_rand(e, ACT, (size_t)N * C, -4, 4), dout = tw_rand(e, ACT, (size_t)N * OC, -1, 1);
    for (int with_bias = 1; with_bias >= 0; with_bias--) {
        twin dpre = tw_out(e, ACT, (size_t)N * C);
        twin dw = tw_rand(e, F32, (size_t)C * OC, -1, 1), dbias = tw_rand(e, F32, C, -1, 1); /* accumulate */
#ifdef TG_CUDA_EMU
        const long dgelu0 = emu_lt_matmul_calls(LT_EPILOGUE_DGELU), bgrad0 = emu_lt_matmul_calls(LT_EPILOGUE_DGELU_BGRAD);
#endif
        e->cpu->matmul_backward_dgelu(e->cpu, dpre.c, with_bias ? dbias.c : NULL, dw.c, dout.c, inp.c, w.c, pre.c, N, C, OC,
                                      true);
        e->gpu->matmul_backward_dgelu(e->gpu, dpre.g, with_bias ? dbias.g : NULL, dw.g, dout.g, inp.g, w.g, pre.g, N, C, OC,
                                      true);
        const char *tag = with_bias ? "" : "_dbias_null";
        check(e, dpre, dgelu_epilogue_tol(e, C), "matmul_backward_dgelu%s dpre N=%d C=%d OC=%d", tag, N, C, OC);
        check(e, dw, e->tol, "matmul_backward_dgelu%s dw N=%d C=%d OC=%d", tag, N, C, OC);
        if (with_bias) check(e, dbias, e->tol, "matmul_backward_dgelu dbias N=%d C=%d OC=%d", N, C, OC);
#ifdef TG_CUDA_EMU
        const int fused = C % 8 == 0 && !emu_lt_epilogues_refused(), bgrad = fused && with_bias && e->act == TG_F32;
        const long dgelu = emu_lt_matmul_calls(LT_EPILOGUE_DGELU) - dgelu0;
        const long bgrads = emu_lt_matmul_calls(LT_EPILOGUE_DGELU_BGRAD) - bgrad0;
        char detail[128], name[96];
        snprintf(detail, sizeof detail, "(cuBLASLt ran DGELU %ld and DGELU_BGRAD %ld times; expected %d and %d)", dgelu, bgrads,
                 fused && !bgrad, bgrad);
        snprintf(name, sizeof name, "matmul_backward_dgelu%s_epilogue N=%d C=%d OC=%d", tag, N, C, OC);
        check_true(e, dgelu == (fused && !bgrad) && bgrads == bgrad, name, detail);
#endif
        tw_free(e, dpre);
        tw_free(e, dw);
        tw_free(e, dbias);
    }
    twin all[] = {inp, w, pre, dout};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
}

/* ---- the cuBLASLt plan table (kernels/cuda/lt_plan.cu) ---- */

/* The heuristic calls so far (emulation only; -1 on a real GPU, where the
 * counts are not checked but the results still are). */
static long heuristic_calls(void) {
#ifdef TG_CUDA_EMU
    return emu_lt_heuristic_calls();
#else
    return -1;
#endif
}

/* Checks that the products since `before` ran the heuristic `want` times. */
static void expect_heuristics(env *e, long before, long want, const char *name) {
    const long now = heuristic_calls();
    if (now < 0) return;
    char detail[96];
    snprintf(detail, sizeof detail, "(%ld heuristic calls, expected %ld)", now - before, want);
    check_true(e, now - before == want, name, detail);
}

/* A view of t from logical element `at` on (both sides): an operand whose
 * pointer has another alignment. Not to be freed. */
static twin tw_from(env *e, twin t, size_t at) {
    twin v = {(float *)t.c + at, (char *)t.g + at * gpu_elem(e, t.k), t.n - at, t.k};
    return v;
}

/* out = inp @ w (no bias) on both sides, compared when `name` is given. */
static void forward_pair(env *e, twin out, twin inp, twin w, int N, int C, int OC, const char *name) {
    e->cpu->matmul_forward(e->cpu, out.c, inp.c, w.c, NULL, N, C, OC);
    e->gpu->matmul_forward(e->gpu, out.g, inp.g, w.g, NULL, N, C, OC);
    if (name) check(e, out, e->tol, "%s N=%d C=%d OC=%d", name, N, C, OC);
}

/* A product repeated runs the heuristic once; another k, or an operand of
 * another alignment, gets a plan of its own and the right result; past the
 * table's OPS_CUDA_LT_PLANS plans, products still run right, building their
 * plan every call, while the kept ones stay kept. Shapes used nowhere else
 * (the table lives as long as the backend). Last in run_all: it fills the
 * table. */
void cuda_test_lt_plans(env *e) {
    NEED(e, matmul_forward);
    const int N = 5, C = 24, OC = 40, shift = (int)(8 / gpu_elem(e, ACT)); /* shift: 8 bytes */
    twin inp = tw_rand(e, ACT, (size_t)N * C + shift, -1, 1), w = tw_rand(e, ACT, (size_t)C * OC, -1, 1);
    twin out = tw_out(e, ACT, (size_t)N * OC);
    long h = heuristic_calls();
    forward_pair(e, out, inp, w, N, C, OC, "lt_plans_first");
    for (int i = 0; i < 3; i++) forward_pair(e, out, inp, w, N, C, OC, i == 2 ? "lt_plans_repeated" : NULL);
    expect_heuristics(e, h, 1, "lt_plans_one_heuristic_for_four_calls");
    /* dw += inp^T @ dout is a product over k = N rows: with fewer rows, only k changes */
    twin dout = tw_rand(e, ACT, (size_t)N * OC, -1, 1), dw = tw_rand(e, F32, (size_t)C * OC, -1, 1);
    for (int rows = N - 2; rows <= N; rows += 2) {
        h = heuristic_calls();
        e->cpu->matmul_backward(e->cpu, NULL, dw.c, NULL, dout.c, inp.c, w.c, rows, C, OC, true);
        e->gpu->matmul_backward(e->gpu, NULL, dw.g, NULL, dout.g, inp.g, w.g, rows, C, OC, true);
        check(e, dw, e->tol, "lt_plans_dw_k=%d C=%d OC=%d", rows, C, OC);
        expect_heuristics(e, h, 1, rows == N ? "lt_plans_other_k_own_plan" : "lt_plans_dw_first");
    }
    h = heuristic_calls();
    for (int i = 0; i < 2; i++) forward_pair(e, out, tw_from(e, inp, shift), w, N, C, OC, "lt_plans_inp_8_byte_aligned");
    expect_heuristics(e, h, 1, "lt_plans_other_alignment_own_plan");

    /* Past the table's capacity: K distinct k (N = 1, OC = 3), each new. */
    const int K = OPS_CUDA_LT_PLANS + 8, OC3 = 3;
    twin x = tw_rand(e, ACT, K, -1, 1), wk = tw_rand(e, ACT, (size_t)K * OC3, -1, 1), y = tw_out(e, ACT, OC3);
    h = heuristic_calls();
    for (int k = 1; k <= K; k++) forward_pair(e, y, x, wk, 1, k, OC3, k == K ? "lt_plans_past_capacity" : NULL);
    expect_heuristics(e, h, K, "lt_plans_past_capacity_one_heuristic_each");
    h = heuristic_calls();
    for (int i = 0; i < 2; i++) forward_pair(e, y, x, wk, 1, K, OC3, "lt_plans_past_capacity_repeated");
    expect_heuristics(e, h, 2, "lt_plans_past_capacity_not_kept");
    h = heuristic_calls();
    forward_pair(e, out, inp, w, N, C, OC, "lt_plans_first_again");
    expect_heuristics(e, h, 0, "lt_plans_kept_plan_still_kept");
    if (heuristic_calls() < 0) printf("# lt_plans: heuristic counts are checked under the emulation only\n");
    twin all[] = {inp, w, out, dout, dw, x, wk, y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
}

void cuda_test_lmhead(env *e, int N, int C, int V) {
    NEED(e, lmhead_forward);
    NEED(e, lmhead_backward);
    twin x = tw_rand(e, ACT, (size_t)N * C, -1, 1), wte = tw_rand(e, ACT, (size_t)V * C, -1, 1);
    twin logits = tw_out(e, ACT, (size_t)N * V);
    e->cpu->lmhead_forward(e->cpu, logits.c, x.c, wte.c, N, C, V);
    e->gpu->lmhead_forward(e->gpu, logits.g, x.g, wte.g, N, C, V);
    check(e, logits, e->tol, "lmhead_forward N=%d C=%d V=%d", N, C, V);
    twin dlogits = tw_rand(e, ACT, (size_t)N * V, -1, 1), dx = tw_out(e, ACT, (size_t)N * C);
    twin dwte = tw_rand(e, F32, (size_t)V * C, -1, 1); /* accumulates */
    e->cpu->lmhead_backward(e->cpu, dx.c, dwte.c, dlogits.c, x.c, wte.c, N, C, V, true);
    e->gpu->lmhead_backward(e->gpu, dx.g, dwte.g, dlogits.g, x.g, wte.g, N, C, V, true);
    check(e, dx, e->tol, "lmhead_backward dx N=%d C=%d V=%d", N, C, V);
    check(e, dwte, e->tol, "lmhead_backward dwte N=%d C=%d V=%d", N, C, V);
    twin all[] = {x, wte, logits, dlogits, dx, dwte};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
}
#endif
