/* Whole-buffer vector operations: residual add, norms, scaling, AdamW. */
#include <math.h>

#include "model/cpu/kernels.h"
#include "util/rng_core.h"

void cpu_add(float *out, const float *a, const float *b, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

float cpu_dropout_scale(const tg_dropout *drop, uint64_t index) {
    return rng_dropout_scale(drop->p, drop->seed, drop->stream, index);
}

void cpu_bias_residual_add(float *out, const float *x, const float *bias, const float *res, int N, int C, tg_dropout drop) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)n * C + c;
            float v = x[i] + bias[c];
            if (drop.p > 0) v *= cpu_dropout_scale(&drop, (drop.row0 + (uint64_t)n) * (uint64_t)C + (uint64_t)c);
            out[i] = v + res[i];
        }
}

void cpu_dropout(float *out, const float *in, int N, int C, tg_dropout drop) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)n * C + c;
            out[i] = drop.p > 0 ? in[i] * cpu_dropout_scale(&drop, (drop.row0 + (uint64_t)n) * (uint64_t)C + (uint64_t)c) : in[i];
        }
}

double cpu_sum_squares(const float *x, size_t n) {
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

void cpu_scale(float *x, float s, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

void cpu_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps,
               float weight_decay, float bc1, float bc2) {
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
    }
}
