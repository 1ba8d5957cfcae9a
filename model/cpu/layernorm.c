/* LayerNorm (eps 1e-5) forward and backward. */
#include <math.h>
#include <stdlib.h>

#include "model/cpu/kernels.h"
#include "util/err.h"

#define LN_EPS 1e-5f

void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b, int N,
                           int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float sum = 0.0f;
        for (int c = 0; c < C; c++) sum += x[c];
        float m = sum / C;
        float var = 0.0f;
        for (int c = 0; c < C; c++) {
            float d = x[c] - m;
            var += d * d;
        }
        float s = 1.0f / sqrtf(var / C + LN_EPS);
        float *o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * w[c] + b[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

void cpu_layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                            const float *mean, const float *rstd, int N, int C) {
    /* dinp rows are independent; dw/db are column sums over rows, which are
     * taken per column in row order after the row pass (deterministic). */
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *g = dout + (size_t)n * C;
        float m = mean[n], s = rstd[n];
        float sum_dn = 0.0f, sum_dn_xhat = 0.0f;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * s;
            float dn = w[c] * g[c];
            sum_dn += dn;
            sum_dn_xhat += dn * xhat;
        }
        sum_dn /= C;
        sum_dn_xhat /= C;
        float *d = dinp + (size_t)n * C;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * s;
            d[c] += (w[c] * g[c] - sum_dn - xhat * sum_dn_xhat) * s;
        }
    }
    /* Column sums in blocks of columns, each block walking all rows. */
    const int block = 64;
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += block) {
        int c1 = c0 + block < C ? c0 + block : C;
        float accw[64] = {0}, accb[64] = {0};
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *g = dout + (size_t)n * C;
            float m = mean[n], s = rstd[n];
            for (int c = c0; c < c1; c++) {
                accw[c - c0] += (x[c] - m) * s * g[c];
                accb[c - c0] += g[c];
            }
        }
        for (int c = c0; c < c1; c++) {
            dw[c] += accw[c - c0];
            db[c] += accb[c - c0];
        }
    }
}
