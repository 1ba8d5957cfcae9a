/* Whole-buffer vector operations: bias + residual, dropout, norms, scaling,
 * AdamW. */
#include <math.h>

#include "kernels/cpu/kernels.h"

void CPU_KERNEL(bias_residual_add)(tg_o o, void *out, const void *x, const void *bias, const void *res, int N, int C,
                                   tg_dropout drop) {
    (void)o;
    act_t *y = out;
    const act_t *in = x, *bs = bias, *r = res;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)n * C + c;
            float v = act_load(in[i]) + act_load(bs[c]);
            if (drop.p > 0) v *= cpu_dropout_scale(&drop, (drop.row0 + (uint64_t)n) * (uint64_t)C + (uint64_t)c);
            y[i] = act_store(v + act_load(r[i]));
        }
}

void CPU_KERNEL(dropout)(tg_o o, void *out, const void *in, int N, int C, tg_dropout drop) {
    (void)o;
    act_t *y = out;
    const act_t *x = in;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)n * C + c;
            float v = act_load(x[i]);
            if (drop.p > 0) v *= cpu_dropout_scale(&drop, (drop.row0 + (uint64_t)n) * (uint64_t)C + (uint64_t)c);
            y[i] = act_store(v);
        }
}

double CPU_KERNEL(sum_squares)(tg_o o, const float *x, size_t n) {
    (void)o;
    /* Fixed-size chunks summed in chunk order: the same result for any
     * thread count. */
    const size_t chunk = 1 << 14;
    size_t n_chunks = (n + chunk - 1) / chunk;
    double total = 0.0;
#pragma omp parallel for schedule(static) ordered
    for (size_t c = 0; c < n_chunks; c++) {
        double s = 0.0;
        size_t end = (c + 1) * chunk < n ? (c + 1) * chunk : n;
        for (size_t i = c * chunk; i < end; i++) s += (double)x[i] * x[i];
#pragma omp ordered
        total += s;
    }
    return total;
}

void CPU_KERNEL(scale)(tg_o o, float *x, float s, size_t n) {
    (void)o;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

void CPU_KERNEL(adamw)(tg_o o, float *p, void *work, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                       float beta2, float eps, float weight_decay, float bc1, float bc2) {
    (void)o;
    /* The working copy, unless it is the master weights themselves. */
    act_t *w = work == (void *)p ? NULL : work;
    /* The order of torch.optim.AdamW (single-tensor path): decay, moments,
     * then p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps). */
    const float step_size = lr / bc1, bc2_sqrt = sqrtf(bc2);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float pi = p[i] * (1.0f - lr * weight_decay);
        float mi = beta1 * m[i] + (1.0f - beta1) * g[i];
        float vi = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
        if (w) w[i] = act_store(p[i]);
    }
}
