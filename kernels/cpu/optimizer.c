/* The optimizer's side of a step on the CPU: the loss and gradient-norm
 * scalars of tg_step_stats (host memory here), and AdamW over the
 * parameter spans. The arithmetic is the reference the CUDA twins are
 * checked against; every sum runs in a fixed order. */
#include <math.h>

#include "kernels/cpu/kernels.h"

void CPU_KERNEL(loss_accumulate)(tg_o o, tg_step_stats *s, const float *losses, int N) {
    (void)o;
    double sum = 0.0;
    for (int i = 0; i < N; i++) sum += losses[i];
    s->loss_acc += (double)(float)(sum / N);
}

void CPU_KERNEL(loss_finish)(tg_o o, tg_step_stats *s, int n_micro, float divisor) {
    (void)o;
    s->loss = (float)(s->loss_acc / n_micro) / divisor;
    s->loss_acc = 0.0;
}

/* Sum of squares in double over fixed-size chunks added in chunk order:
 * the same result for any thread count; and, with exact not NULL, the exact
 * sum added to *exact (kernels/exact_sumsq.h), the same for any split. */
static double sum_squares(const float *x, size_t n, exact_sumsq *exact) {
    const size_t chunk = 1 << 14;
    size_t n_chunks = (n + chunk - 1) / chunk;
    double total = 0.0;
#pragma omp parallel for schedule(static) ordered
    for (size_t c = 0; c < n_chunks; c++) {
        double s = 0.0;
        exact_sumsq part = {{0}, 0};
        size_t end = (c + 1) * chunk < n ? (c + 1) * chunk : n;
        for (size_t i = c * chunk; i < end; i++) {
            s += (double)x[i] * x[i];
            if (exact) exact_sumsq_add(&part, x[i]);
        }
#pragma omp ordered
        {
            total += s;
            if (exact) exact_sumsq_merge(exact, &part);
        }
    }
    return total;
}

void CPU_KERNEL(grad_sumsq)(tg_o o, tg_step_stats *s, const float *g, const tg_spans *spans, int exact) {
    (void)o;
    double total = 0.0;
    exact_sumsq sum = {{0}, exact ? 0 : EXACT_SUMSQ_NAN}; /* none asked for: the pieces say NaN */
    for (int i = 0; i < spans->n; i++)
        for (int c = 0; c < spans->span[i].count; c++) {
            size_t at = 0, b, e, moment;
            while (tg_span_next(&spans->span[i], c, &at, &b, &e, &moment))
                total += sum_squares(g + b, e - b, exact ? &sum : NULL);
        }
    s->sumsq = total;
    exact_sumsq_pieces(&sum, s->sumsq_pieces);
}

void CPU_KERNEL(grad_clip_factor)(tg_o o, tg_step_stats *s, int reduced, double max_norm) {
    (void)o;
    s->norm = sqrt(reduced ? exact_sumsq_value(s->sumsq_pieces) : s->sumsq);
    s->finite = isfinite(s->loss) && isfinite(s->norm);
    const double coef = max_norm / (s->norm + 1e-6); /* torch: max_norm / (norm + 1e-6), at most 1 */
    s->clip = max_norm > 0.0 && coef < 1.0 ? (float)coef : 1.0f;
}

/* AdamW on elements [b, e) of the whole buffers, whose moments are m and
 * v from index k, as are their master weights p when there is a working
 * copy w (else p is the working weights, at the elements' own index). */
static void adamw_range(float *p, act_t *w, const float *g, float *m, float *v, size_t k, size_t b, size_t e,
                        const tg_adamw_args *a, const tg_step_stats *s, float weight_decay) {
    /* The order of torch.optim.AdamW (single-tensor path): decay, moments,
     * then p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps). */
    const float lr = s->in.lr, clip = s->clip, step_size = lr / s->in.bc1, bc2_sqrt = sqrtf(s->in.bc2);
#pragma omp parallel for schedule(static)
    for (size_t i = b; i < e; i++) {
        const size_t j = k + (i - b); /* element i's moment */
        const size_t pj = w ? j : i;  /* its master weight */
        const float gi = g[i] * clip; /* exact when clip is 1 */
        float pi = p[pj] * (1.0f - lr * weight_decay);
        float mi = a->beta1 * m[j] + (1.0f - a->beta1) * gi;
        float vi = a->beta2 * v[j] + (1.0f - a->beta2) * gi * gi;
        m[j] = mi;
        v[j] = vi;
        p[pj] = pi - step_size * mi / (sqrtf(vi) / bc2_sqrt + a->eps);
        if (w) w[i] = act_store(p[pj]);
    }
}

void CPU_KERNEL(adamw)(tg_o o, float *p, void *work, const float *g, float *m, float *v, const tg_spans *spans,
                       const tg_adamw_args *a, const tg_step_stats *s) {
    (void)o;
    if (!s->finite) return;
    act_t *w = work == (void *)p ? NULL : work; /* the working copy, unless it is p itself */
    for (int i = 0; i < spans->n; i++) {
        const tg_span *sp = &spans->span[i];
        for (int c = 0; c < sp->count; c++) {
            size_t at = 0, b, e, k;
            while (tg_span_next(sp, c, &at, &b, &e, &k))
                adamw_range(p, w, g, m, v, k, b, e, a, s, sp->decay ? a->weight_decay : 0.0f);
        }
    }
}
