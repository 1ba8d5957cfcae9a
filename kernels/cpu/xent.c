/* Vocab-parallel softmax cross-entropy in three passes (see kernels/ops.h). */
#include <math.h>

#include "kernels/cpu/kernels.h"

void CPU_KERNEL(xent_rowmax)(tg_o o, float *rowmax, const void *logits, int N, int V, int n_real) {
    (void)o;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const act_t *l = (const act_t *)logits + (size_t)n * V;
        float m = -INFINITY;
        for (int v = 0; v < n_real; v++) m = act_load(l[v]) > m ? act_load(l[v]) : m;
        rowmax[n] = m;
    }
}

void CPU_KERNEL(xent_stats)(tg_o o, float *stats, const void *logits, const float *rowmax, const int32_t *targets, int N,
                            int V, int n_real, int vocab_start) {
    (void)o;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const act_t *l = (const act_t *)logits + (size_t)n * V;
        const float m = rowmax[n];
        double sum = 0.0; /* a float running sum over 50k columns drifts by ~1e-5 relative */
        for (int v = 0; v < n_real; v++) sum += expf(act_load(l[v]) - m);
        int local = targets[n] - vocab_start;
        stats[2 * n] = (float)sum;
        stats[2 * n + 1] = (local >= 0 && local < n_real) ? act_load(l[local]) : 0.0f;
    }
}

void CPU_KERNEL(xent_finish)(tg_o o, float *losses, void *logits, const float *rowmax, const float *stats,
                             const int32_t *targets, int N, int V, int n_real, int vocab_start, float dloss) {
    (void)o;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        act_t *l = (act_t *)logits + (size_t)n * V;
        float m = rowmax[n], sum = stats[2 * n];
        losses[n] = logf(sum) + m - stats[2 * n + 1];
        float inv = 1.0f / sum;
        int local = targets[n] - vocab_start;
        for (int v = 0; v < n_real; v++) {
            float p = expf(act_load(l[v]) - m) * inv;
            l[v] = act_store((p - (v == local ? 1.0f : 0.0f)) * dloss);
        }
        for (int v = n_real; v < V; v++) l[v] = act_store(0.0f);
    }
}
