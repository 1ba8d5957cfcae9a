/* LayerNorm (eps 1e-5) forward and backward, and the forward after a
 * residual add (bias_residual_layernorm). */
#include <math.h>

#include "kernels/cpu/kernels.h"

#define LN_EPS 1e-5f

void CPU_KERNEL(layernorm_forward)(tg_o o, void *out, float *mean, float *rstd, const void *inp, const void *w,
                                   const void *b, int N, int C) {
    (void)o;
    const act_t *wt = w, *bs = b;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const act_t *x = (const act_t *)inp + (size_t)n * C;
        float sum = 0.0f;
        for (int c = 0; c < C; c++) sum += act_load(x[c]);
        float m = sum / C;
        float var = 0.0f;
        for (int c = 0; c < C; c++) {
            float d = act_load(x[c]) - m;
            var += d * d;
        }
        float s = 1.0f / sqrtf(var / C + LN_EPS);
        act_t *y = (act_t *)out + (size_t)n * C;
        for (int c = 0; c < C; c++) y[c] = act_store((act_load(x[c]) - m) * s * act_load(wt[c]) + act_load(bs[c]));
        mean[n] = m;
        rstd[n] = s;
    }
}

/* The two kernels in sequence: the CPU is the reference, which the fused
 * CUDA kernel matches bit for bit, so it stays the plain composition. */
void CPU_KERNEL(bias_residual_layernorm)(tg_o o, void *out, void *ln_out, float *mean, float *rstd, const void *x,
                                         const void *bias, const void *res, const void *w, const void *b, int N, int C,
                                         tg_dropout drop) {
    CPU_KERNEL(bias_residual_add)(o, out, x, bias, res, N, C, drop);
    CPU_KERNEL(layernorm_forward)(o, ln_out, mean, rstd, out, w, b, N, C);
}

/* dw, db (+)= column sums over rows (acc), in blocks of columns, each block
 * walking all rows in order (deterministic). */
static void layernorm_param_grads(float *dw, float *db, const act_t *dout, const act_t *inp, const float *mean,
                                  const float *rstd, int N, int C, bool acc) {
    const int block = 64;
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += block) {
        int c1 = c0 + block < C ? c0 + block : C;
        float accw[64] = {0}, accb[64] = {0};
        for (int n = 0; n < N; n++) {
            const act_t *x = inp + (size_t)n * C, *g = dout + (size_t)n * C;
            float m = mean[n], s = rstd[n];
            for (int c = c0; c < c1; c++) {
                accw[c - c0] += (act_load(x[c]) - m) * s * act_load(g[c]);
                accb[c - c0] += act_load(g[c]);
            }
        }
        for (int c = c0; c < c1; c++) {
            dw[c] = (acc ? dw[c] : 0.0f) + accw[c - c0];
            db[c] = (acc ? db[c] : 0.0f) + accb[c - c0];
        }
    }
}

void CPU_KERNEL(layernorm_backward)(tg_o o, void *dinp, float *dw, float *db, const void *dout, const void *inp,
                                    const void *w, const float *mean, const float *rstd, int N, int C, bool dacc, bool acc) {
    (void)o;
    const act_t *wt = w;
    /* dinp rows are independent. */
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const act_t *x = (const act_t *)inp + (size_t)n * C, *g = (const act_t *)dout + (size_t)n * C;
        float m = mean[n], s = rstd[n];
        float sum_dn = 0.0f, sum_dn_xhat = 0.0f;
        for (int c = 0; c < C; c++) {
            float xhat = (act_load(x[c]) - m) * s;
            float dn = act_load(wt[c]) * act_load(g[c]);
            sum_dn += dn;
            sum_dn_xhat += dn * xhat;
        }
        sum_dn /= C;
        sum_dn_xhat /= C;
        act_t *d = (act_t *)dinp + (size_t)n * C;
        for (int c = 0; c < C; c++) {
            float xhat = (act_load(x[c]) - m) * s;
            d[c] = act_store((dacc ? act_load(d[c]) : 0.0f) + (act_load(wt[c]) * act_load(g[c]) - sum_dn - xhat * sum_dn_xhat) * s);
        }
    }
    layernorm_param_grads(dw, db, dout, inp, mean, rstd, N, C, acc);
}
