/* Linear layers and the tied LM head, on top of cpu_gemm. */
#include <string.h>

#include "model/cpu/gemm.h"
#include "model/cpu/kernels.h"

void cpu_matmul_forward(float *out, const float *inp, const float *w, const float *bias, int N, int C, int OC) {
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof(float));
    }
    cpu_gemm(false, false, N, OC, C, inp, C, w, OC, bias ? 1.0f : 0.0f, out, OC);
}

/* dbias[o] += sum over rows of dout[:, o], column blocks in parallel, rows in order. */
void cpu_bias_backward(float *dbias, const float *dout, int N, int OC) {
    const int block = 64;
#pragma omp parallel for schedule(static)
    for (int o0 = 0; o0 < OC; o0 += block) {
        int o1 = o0 + block < OC ? o0 + block : OC;
        float acc[64] = {0};
        for (int n = 0; n < N; n++) {
            const float *g = dout + (size_t)n * OC;
            for (int o = o0; o < o1; o++) acc[o - o0] += g[o];
        }
        for (int o = o0; o < o1; o++) dbias[o] += acc[o - o0];
    }
}

void cpu_matmul_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w, int N,
                         int C, int OC) {
    if (dinp) cpu_gemm(false, true, N, C, OC, dout, OC, w, OC, 0.0f, dinp, C);
    cpu_gemm(true, false, C, OC, N, inp, C, dout, OC, 1.0f, dw, OC);
    if (dbias) cpu_bias_backward(dbias, dout, N, OC);
}

void cpu_lmhead_forward(float *logits, const float *x, const float *wte, int N, int C, int V) {
    cpu_gemm(false, true, N, V, C, x, C, wte, C, 0.0f, logits, V);
}

void cpu_lmhead_backward(float *dx, float *dwte, const float *dlogits, const float *x, const float *wte, int N, int C, int V) {
    cpu_gemm(false, false, N, C, V, dlogits, V, wte, C, 0.0f, dx, C);
    cpu_gemm(true, false, V, C, N, dlogits, V, x, C, 1.0f, dwte, C);
}
