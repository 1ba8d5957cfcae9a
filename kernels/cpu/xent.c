/* Vocab-parallel softmax cross-entropy in passes (the statistics, their
 * rescaling to the group's max, the losses and gradient), and all at once
 * for one rank (see kernels/ops.h). Each pass is a function of one row, so
 * the fused op is the same arithmetic, row by row (its rescaling is by
 * exp(0) = 1). */
#include <math.h>

#include "kernels/cpu/kernels.h"

static float row_max(const act_t *l, int n_real) {
    float m = -INFINITY;
    for (int v = 0; v < n_real; v++) m = act_load(l[v]) > m ? act_load(l[v]) : m;
    return m;
}

/* stats[0] = sum of exp(logit - m); stats[1] = the target's logit or 0. */
static void row_stats(float stats[2], const act_t *l, float m, int n_real, int local) {
    double sum = 0.0; /* a float running sum over 50k columns drifts by ~1e-5 relative */
    for (int v = 0; v < n_real; v++) sum += expf(act_load(l[v]) - m);
    stats[0] = (float)sum;
    stats[1] = (local >= 0 && local < n_real) ? act_load(l[local]) : 0.0f;
}

/* The row's loss; its logits become the gradient. */
static float row_finish(act_t *l, float m, const float stats[2], int V, int n_real, int local, float dloss) {
    const float sum = stats[0], inv = 1.0f / sum;
    for (int v = 0; v < n_real; v++) {
        float p = expf(act_load(l[v]) - m) * inv;
        l[v] = act_store((p - (v == local ? 1.0f : 0.0f)) * dloss);
    }
    for (int v = n_real; v < V; v++) l[v] = act_store(0.0f);
    return logf(sum) + m - stats[1];
}

void CPU_KERNEL(xent_partial)(tg_o o, float *rowmax, float *local_max, float *stats, const void *logits,
                              const int32_t *targets, int N, int V, int n_real, int vocab_start) {
    (void)o;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const act_t *l = (const act_t *)logits + (size_t)n * V;
        rowmax[n] = local_max[n] = row_max(l, n_real);
        row_stats(stats + 2 * n, l, local_max[n], n_real, targets[n] - vocab_start);
    }
}

void CPU_KERNEL(xent_rescale)(tg_o o, float *stats, const float *local_max, const float *rowmax, int N) {
    (void)o;
    for (int n = 0; n < N; n++) /* a rank without real columns has the sum 0 (and a max of -inf) */
        if (stats[2 * n] > 0.0f) stats[2 * n] *= expf(local_max[n] - rowmax[n]);
}

void CPU_KERNEL(xent_finish)(tg_o o, float *losses, void *logits, const float *rowmax, const float *stats,
                             const int32_t *targets, int N, int V, int n_real, int vocab_start, float dloss) {
    (void)o;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        losses[n] = row_finish((act_t *)logits + (size_t)n * V, rowmax[n], stats + 2 * n, V, n_real, targets[n] - vocab_start,
                               dloss);
}

void CPU_KERNEL(xent_fused)(tg_o o, float *losses, void *logits, const int32_t *targets, int N, int V, int n_real,
                            float dloss) {
    (void)o;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        act_t *l = (act_t *)logits + (size_t)n * V;
        const float m = row_max(l, n_real);
        float stats[2];
        row_stats(stats, l, m, n_real, targets[n]);
        losses[n] = row_finish(l, m, stats, V, n_real, targets[n], dloss);
    }
}
