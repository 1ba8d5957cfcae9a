/* Causal multi-head self-attention, scaled by 1/sqrt(HS). The probabilities
 * are kept for the backward pass (positions after t are stored as 0). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kernels.h"
#include "util/err.h"

/* Dropout factor of probability (b, h, t, t2) of this rank. */
static float att_drop(const tg_dropout *d, int b, int h, int t, int t2, int T) {
    if (d->p <= 0) return 1.0f;
    uint64_t seq = d->row0 + (uint64_t)b, head = (uint64_t)(d->head0 + h);
    return cpu_dropout_scale(d, ((seq * (uint64_t)d->heads_total + head) * (uint64_t)T + (uint64_t)t) * (uint64_t)T + (uint64_t)t2);
}

static float dot(const act_t *a, const act_t *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += act_load(a[i]) * act_load(b[i]);
    return s;
}

/* Row t of one (batch, head): probabilities into a (float scratch of T),
 * then att, and the weighted sum of values into acc (HS floats), then out. */
static void attention_row(act_t *out, act_t *att, const act_t *qkv, float *a, float *acc, int b, int h, int t, int T, int NH,
                          int HS, const tg_dropout *drop) {
    const int C3 = 3 * NH * HS, Cl = NH * HS;
    const float scale = 1.0f / sqrtf((float)HS);
    const act_t *q = qkv + ((size_t)b * T + t) * C3 + h * HS;
    float maxv = -INFINITY;
    for (int t2 = 0; t2 <= t; t2++) {
        const act_t *k = qkv + ((size_t)b * T + t2) * C3 + Cl + h * HS;
        a[t2] = dot(q, k, HS) * scale;
        if (a[t2] > maxv) maxv = a[t2];
    }
    float sum = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) {
        a[t2] = expf(a[t2] - maxv);
        sum += a[t2];
    }
    float inv = 1.0f / sum;
    act_t *arow = att + (((size_t)b * NH + h) * T + t) * T;
    for (int t2 = 0; t2 <= t; t2++) {
        a[t2] *= inv;
        arow[t2] = act_store(a[t2]);
    }
    for (int t2 = t + 1; t2 < T; t2++) arow[t2] = act_store(0.0f);
    memset(acc, 0, (size_t)HS * sizeof(float));
    for (int t2 = 0; t2 <= t; t2++) {
        const act_t *v = qkv + ((size_t)b * T + t2) * C3 + 2 * Cl + h * HS;
        float p = a[t2] * att_drop(drop, b, h, t, t2, T);
        for (int i = 0; i < HS; i++) acc[i] += p * act_load(v[i]);
    }
    act_t *o = out + ((size_t)b * T + t) * Cl + h * HS;
    for (int i = 0; i < HS; i++) o[i] = act_store(acc[i]);
}

void CPU_KERNEL(attention_forward)(tg_o o, void *out, void *att, const void *qkv, int B, int T, int NH, int HS,
                                   tg_dropout drop) {
    (void)o;
#pragma omp parallel
    {
        float *scratch = tg_malloc((size_t)(T + HS) * sizeof(float), "attention scratch");
#pragma omp for collapse(3) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++) attention_row(out, att, qkv, scratch, scratch + T, b, h, t, T, NH, HS, &drop);
        free(scratch);
    }
}

/* One (batch, head) pair: only that head's columns of dqkv are written, so
 * pairs run in parallel without races. */
static void attention_backward_head(float *dqkv, const act_t *dout, const act_t *qkv, const act_t *att, float *datt, int b,
                                    int h, int T, int NH, int HS, const tg_dropout *drop) {
    const int C3 = 3 * NH * HS, Cl = NH * HS;
    const float scale = 1.0f / sqrtf((float)HS);
    for (int t = 0; t < T; t++) {
        float *dq = dqkv + ((size_t)b * T + t) * C3 + h * HS;
        memset(dq, 0, (size_t)HS * sizeof(float));
        memset(dq + Cl, 0, (size_t)HS * sizeof(float));
        memset(dq + 2 * Cl, 0, (size_t)HS * sizeof(float));
    }
    for (int t = 0; t < T; t++) {
        const act_t *a = att + (((size_t)b * NH + h) * T + t) * T;
        const act_t *g = dout + ((size_t)b * T + t) * Cl + h * HS;
        const act_t *q = qkv + ((size_t)b * T + t) * C3 + h * HS;
        float *dq = dqkv + ((size_t)b * T + t) * C3 + h * HS;
        float weighted = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            const act_t *v = qkv + ((size_t)b * T + t2) * C3 + 2 * Cl + h * HS;
            float *dv = dqkv + ((size_t)b * T + t2) * C3 + 2 * Cl + h * HS;
            /* out = sum_t2 drop(a)[t2] v[t2]: gradients through the kept probabilities */
            float keep = att_drop(drop, b, h, t, t2, T);
            datt[t2] = dot(g, v, HS) * keep;
            weighted += act_load(a[t2]) * datt[t2];
            for (int i = 0; i < HS; i++) dv[i] += act_load(a[t2]) * keep * act_load(g[i]);
        }
        for (int t2 = 0; t2 <= t; t2++) {
            const act_t *k = qkv + ((size_t)b * T + t2) * C3 + Cl + h * HS;
            float *dk = dqkv + ((size_t)b * T + t2) * C3 + Cl + h * HS;
            float dpre = act_load(a[t2]) * (datt[t2] - weighted) * scale;
            for (int i = 0; i < HS; i++) {
                dq[i] += dpre * act_load(k[i]);
                dk[i] += dpre * act_load(q[i]);
            }
        }
    }
}

void CPU_KERNEL(attention_backward)(tg_o o, void *dqkv, const void *dout, const void *qkv, const void *att, int B, int T,
                                    int NH, int HS, tg_dropout drop) {
    (void)o;
    /* dq, dk, dv accumulate over rows: in float32 (a view of dqkv). */
    const size_t n = (size_t)B * T * 3 * NH * HS;
    float *dqkv_f = act_view(dqkv, n, false);
#pragma omp parallel
    {
        float *datt = tg_malloc((size_t)T * sizeof(float), "attention backward scratch");
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) attention_backward_head(dqkv_f, dout, qkv, att, datt, b, h, T, NH, HS, &drop);
        free(datt);
    }
    act_view_end(dqkv, dqkv_f, n);
}
