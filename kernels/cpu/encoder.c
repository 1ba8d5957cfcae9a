/* Token + position embedding, with vocab-parallel lookup. */
#include "kernels/cpu/kernels.h"

void CPU_KERNEL(encoder_forward)(tg_o o, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T,
                                 int C, int vocab_start, int vocab_local) {
    (void)o;
    act_t *y = out;
    const act_t *te = wte, *pe = wpe;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < B * T; n++) {
        act_t *row = y + (size_t)n * C;
        int local = tokens[n] - vocab_start;
        const act_t *tok = local >= 0 && local < vocab_local ? te + (size_t)local * C : NULL; /* NULL: a zero row */
        const act_t *pos = pe ? pe + (size_t)(n % T) * C : NULL;
        for (int c = 0; c < C; c++) {
            float v = tok ? act_load(tok[c]) : 0.0f;
            if (pos) v += act_load(pos[c]);
            row[c] = act_store(v);
        }
    }
}

void CPU_KERNEL(encoder_backward)(tg_o o, float *dwte, float *dwpe, const void *dout, const int32_t *tokens, int B, int T,
                                  int C, int vocab_start, int vocab_local) {
    (void)o;
    const act_t *dy = dout;
    /* Rows of dwte may repeat across positions, so the scatter-add runs in
     * position order on one thread (cheap: B*T*C adds) to stay deterministic. */
    if (dwte) {
        for (int n = 0; n < B * T; n++) {
            int local = tokens[n] - vocab_start;
            if (local < 0 || local >= vocab_local) continue;
            float *d = dwte + (size_t)local * C;
            const act_t *g = dy + (size_t)n * C;
            for (int c = 0; c < C; c++) d[c] += act_load(g[c]);
        }
    }
    if (dwpe) {
#pragma omp parallel for schedule(static)
        for (int t = 0; t < T; t++) {
            float *d = dwpe + (size_t)t * C;
            for (int b = 0; b < B; b++) {
                const act_t *g = dy + ((size_t)b * T + t) * C;
                for (int c = 0; c < C; c++) d[c] += act_load(g[c]);
            }
        }
    }
}

void CPU_KERNEL(position_forward)(tg_o o, void *out, const void *wpe, int row_start, int N, int T, int C) {
    (void)o;
    act_t *y = out;
    const act_t *pe = wpe;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        act_t *row = y + (size_t)n * C;
        const act_t *p = pe + (size_t)((row_start + n) % T) * C;
        for (int c = 0; c < C; c++) row[c] = act_store(act_load(row[c]) + act_load(p[c]));
    }
}

void CPU_KERNEL(position_backward)(tg_o o, float *dwpe, const void *dout, int row_start, int N, int T, int C, bool acc) {
    (void)o;
    const act_t *dy = dout;
    /* Each position's rows are summed in row order by one thread, onto 0
     * when writing (every position, also one no local row is at). */
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        float *d = dwpe + (size_t)t * C;
        if (!acc)
            for (int c = 0; c < C; c++) d[c] = 0.0f;
        int first = ((t - row_start) % T + T) % T; /* first local row at position t */
        for (int n = first; n < N; n += T) {
            const act_t *g = dy + (size_t)n * C;
            for (int c = 0; c < C; c++) d[c] += act_load(g[c]);
        }
    }
}
