/* Row-wise vector operations: bias + residual, dropout. */
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
