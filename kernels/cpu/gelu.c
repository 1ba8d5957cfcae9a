/* GELU with the tanh approximation (GPT-2's "gelu_new"). */
#include <math.h>

#include "kernels/cpu/kernels.h"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

void CPU_KERNEL(gelu_forward)(tg_o o, void *out, const void *inp, size_t n) {
    (void)o;
    act_t *y = out;
    const act_t *in = inp;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = act_load(in[i]);
        y[i] = act_store(0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x))));
    }
}

void CPU_KERNEL(gelu_backward)(tg_o o, void *dinp, const void *inp, const void *dout, size_t n) {
    (void)o;
    act_t *dx = dinp;
    const act_t *in = inp, *dy = dout;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = act_load(in[i]);
        float u = GELU_K * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float du = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        dx[i] = act_store(act_load(dy[i]) * (0.5f * (1.0f + th) + 0.5f * x * sech2 * du));
    }
}
