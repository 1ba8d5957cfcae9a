/* Vocab-parallel softmax cross-entropy in three passes (see model/ops.h). */
#include <math.h>

#include "model/cpu/kernels.h"

void cpu_xent_rowmax(float *rowmax, const float *logits, int N, int V, int n_real) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * V;
        float m = -INFINITY;
        for (int v = 0; v < n_real; v++) m = l[v] > m ? l[v] : m;
        rowmax[n] = m;
    }
}

void cpu_xent_stats(float *stats, const float *logits, const float *rowmax, const int32_t *targets, int N, int V, int n_real,
                    int vocab_start) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * V;
        const float m = rowmax[n];
        double sum = 0.0; /* a float running sum over 50k columns drifts by ~1e-5 relative */
        for (int v = 0; v < n_real; v++) sum += expf(l[v] - m);
        int local = targets[n] - vocab_start;
        stats[2 * n] = (float)sum;
        stats[2 * n + 1] = (local >= 0 && local < n_real) ? l[local] : 0.0f;
    }
}

void cpu_xent_finish(float *losses, float *logits, const float *rowmax, const float *stats, const int32_t *targets, int N,
                     int V, int n_real, int vocab_start, float dloss) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *l = logits + (size_t)n * V;
        float m = rowmax[n], sum = stats[2 * n];
        losses[n] = logf(sum) + m - stats[2 * n + 1];
        float inv = 1.0f / sum;
        int local = targets[n] - vocab_start;
        for (int v = 0; v < n_real; v++) {
            float p = expf(l[v] - m) * inv;
            l[v] = (p - (v == local ? 1.0f : 0.0f)) * dloss;
        }
        for (int v = n_real; v < V; v++) l[v] = 0.0f;
    }
}
