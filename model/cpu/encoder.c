/* Token + position embedding, with vocab-parallel lookup. */
#include <string.h>

#include "model/cpu/kernels.h"

void cpu_encoder_forward(float *out, const int32_t *tokens, const float *wte, const float *wpe, int B, int T, int C,
                         int vocab_start, int vocab_local) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < B * T; n++) {
        float *o = out + (size_t)n * C;
        int local = tokens[n] - vocab_start;
        if (local >= 0 && local < vocab_local) memcpy(o, wte + (size_t)local * C, (size_t)C * sizeof(float));
        else memset(o, 0, (size_t)C * sizeof(float));
        if (wpe) {
            const float *p = wpe + (size_t)(n % T) * C;
            for (int c = 0; c < C; c++) o[c] += p[c];
        }
    }
}

void cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B, int T, int C,
                          int vocab_start, int vocab_local) {
    /* Rows of dwte may repeat across positions, so the scatter-add runs in
     * position order on one thread (cheap: B*T*C adds) to stay deterministic. */
    if (dwte) {
        for (int n = 0; n < B * T; n++) {
            int local = tokens[n] - vocab_start;
            if (local < 0 || local >= vocab_local) continue;
            float *d = dwte + (size_t)local * C;
            const float *g = dout + (size_t)n * C;
            for (int c = 0; c < C; c++) d[c] += g[c];
        }
    }
    if (dwpe) {
#pragma omp parallel for schedule(static)
        for (int t = 0; t < T; t++) {
            float *d = dwpe + (size_t)t * C;
            for (int b = 0; b < B; b++) {
                const float *g = dout + ((size_t)b * T + t) * C;
                for (int c = 0; c < C; c++) d[c] += g[c];
            }
        }
    }
}

void cpu_position_forward(float *out, const float *wpe, int row_start, int N, int T, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *o = out + (size_t)n * C;
        const float *p = wpe + (size_t)((row_start + n) % T) * C;
        for (int c = 0; c < C; c++) o[c] += p[c];
    }
}

void cpu_position_backward(float *dwpe, const float *dout, int row_start, int N, int T, int C) {
    /* Each position's rows are summed in row order by one thread. */
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        float *d = dwpe + (size_t)t * C;
        int first = ((t - row_start) % T + T) % T; /* first local row at position t */
        for (int n = first; n < N; n += T) {
            const float *g = dout + (size_t)n * C;
            for (int c = 0; c < C; c++) d[c] += g[c];
        }
    }
}
