/* Linear layers and the tied LM head, on top of cpu_gemm_typed: operands in
 * the activation type, products accumulated in float32 (a view of an
 * activation-type output, rounded once at the end in the bf16 flavour). */
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernels.h"

void CPU_KERNEL(matmul_forward)(tg_o o, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    (void)o;
    const size_t n = (size_t)N * OC;
    float *y = act_view(out, n, false);
    if (bias) {
        const act_t *bs = bias;
#pragma omp parallel for schedule(static)
        for (int r = 0; r < N; r++)
            for (int c = 0; c < OC; c++) y[(size_t)r * OC + c] = act_load(bs[c]);
    }
    cpu_gemm_typed(ACT_DTYPE, false, false, N, OC, C, inp, C, w, OC, bias ? 1.0f : 0.0f, y, OC);
    act_view_end(out, y, n);
}

/* dbias[o] (+)= sum over rows of dout[:, o], column blocks in parallel, rows in order. */
void CPU_KERNEL(bias_backward)(tg_o o, float *dbias, const void *dout, int N, int OC, bool acc) {
    (void)o;
    const int block = 64;
#pragma omp parallel for schedule(static)
    for (int o0 = 0; o0 < OC; o0 += block) {
        int o1 = o0 + block < OC ? o0 + block : OC;
        float sum[64] = {0};
        for (int n = 0; n < N; n++) {
            const act_t *g = (const act_t *)dout + (size_t)n * OC;
            for (int c = o0; c < o1; c++) sum[c - o0] += act_load(g[c]);
        }
        for (int c = o0; c < o1; c++) dbias[c] = (acc ? dbias[c] : 0.0f) + sum[c - o0];
    }
}

void CPU_KERNEL(matmul_backward)(tg_o o, void *dinp, float *dw, float *dbias, const void *dout, const void *inp,
                                 const void *w, int N, int C, int OC, bool acc) {
    if (dinp) {
        float *dx = act_view(dinp, (size_t)N * C, false);
        cpu_gemm_typed(ACT_DTYPE, false, true, N, C, OC, dout, OC, w, OC, 0.0f, dx, C);
        act_view_end(dinp, dx, (size_t)N * C);
    }
    if (dw) cpu_gemm_typed(ACT_DTYPE, true, false, C, OC, N, inp, C, dout, OC, acc ? 1.0f : 0.0f, dw, OC);
    if (dbias) CPU_KERNEL(bias_backward)(o, dbias, dout, N, OC, acc);
}

/* The composition the op stands for: the projection's backward, the GELU's
 * backward in place, the bias gradient; bitwise what the three calls give. */
void CPU_KERNEL(matmul_backward_dgelu)(tg_o o, void *dpre, float *dpre_bias, float *dw, const void *dout, const void *inp,
                                       const void *w, const void *pre, int N, int C, int OC, bool acc) {
    CPU_KERNEL(matmul_backward)(o, dpre, dw, NULL, dout, inp, w, N, C, OC, acc);
    CPU_KERNEL(gelu_backward)(o, dpre, pre, dpre, (size_t)N * C);
    if (dpre_bias) CPU_KERNEL(bias_backward)(o, dpre_bias, dpre, N, C, acc);
}

void CPU_KERNEL(lmhead_forward)(tg_o o, void *logits, const void *x, const void *wte, int N, int C, int V) {
    (void)o;
    float *y = act_view(logits, (size_t)N * V, false);
    cpu_gemm_typed(ACT_DTYPE, false, true, N, V, C, x, C, wte, C, 0.0f, y, V);
    act_view_end(logits, y, (size_t)N * V);
}

void CPU_KERNEL(lmhead_backward)(tg_o o, void *dx, float *dwte, const void *dlogits, const void *x, const void *wte, int N,
                                 int C, int V, bool acc) {
    (void)o;
    if (dx) {
        float *g = act_view(dx, (size_t)N * C, false);
        cpu_gemm_typed(ACT_DTYPE, false, false, N, C, V, dlogits, V, wte, C, 0.0f, g, C);
        act_view_end(dx, g, (size_t)N * C);
    }
    if (dwte) cpu_gemm_typed(ACT_DTYPE, true, false, V, C, N, dlogits, V, x, C, acc ? 1.0f : 0.0f, dwte, C);
}
