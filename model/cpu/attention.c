/* Causal multi-head self-attention, scaled by 1/sqrt(HS). The probabilities
 * are kept for the backward pass (positions after t are stored as 0). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/cpu/kernels.h"
#include "util/err.h"

/* Dropout factor of probability (b, h, t, t2) of this rank. */
static float att_drop(const tg_dropout *d, int b, int h, int t, int t2, int T) {
    if (d->p <= 0) return 1.0f;
    uint64_t seq = d->row0 + (uint64_t)b, head = (uint64_t)(d->head0 + h);
    return cpu_dropout_scale(d, ((seq * (uint64_t)d->heads_total + head) * (uint64_t)T + (uint64_t)t) * (uint64_t)T + (uint64_t)t2);
}

static float dot(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

void cpu_attention_forward(float *out, float *att, const float *qkv, int B, int T, int NH, int HS, tg_dropout drop) {
    const int C3 = 3 * NH * HS, Cl = NH * HS;
    const float scale = 1.0f / sqrtf((float)HS);
#pragma omp parallel for collapse(3) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * C3 + h * HS;
                float *a = att + (((size_t)b * NH + h) * T + t) * T;
                float maxv = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + ((size_t)b * T + t2) * C3 + Cl + h * HS;
                    a[t2] = dot(q, k, HS) * scale;
                    if (a[t2] > maxv) maxv = a[t2];
                }
                float sum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    a[t2] = expf(a[t2] - maxv);
                    sum += a[t2];
                }
                float inv = 1.0f / sum;
                for (int t2 = 0; t2 <= t; t2++) a[t2] *= inv;
                for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
                float *o = out + ((size_t)b * T + t) * Cl + h * HS;
                memset(o, 0, (size_t)HS * sizeof(float));
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + ((size_t)b * T + t2) * C3 + 2 * Cl + h * HS;
                    float p = a[t2] * att_drop(&drop, b, h, t, t2, T);
                    for (int i = 0; i < HS; i++) o[i] += p * v[i];
                }
            }
}

/* One (batch, head) pair: only that head's columns of dqkv are written, so
 * pairs run in parallel without races. */
static void attention_backward_head(float *dqkv, const float *dout, const float *qkv, const float *att, float *datt, int b,
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
        const float *a = att + (((size_t)b * NH + h) * T + t) * T;
        const float *g = dout + ((size_t)b * T + t) * Cl + h * HS;
        const float *q = qkv + ((size_t)b * T + t) * C3 + h * HS;
        float *dq = dqkv + ((size_t)b * T + t) * C3 + h * HS;
        float weighted = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *v = qkv + ((size_t)b * T + t2) * C3 + 2 * Cl + h * HS;
            float *dv = dqkv + ((size_t)b * T + t2) * C3 + 2 * Cl + h * HS;
            /* out = sum_t2 drop(a)[t2] v[t2]: gradients through the kept probabilities */
            float keep = att_drop(drop, b, h, t, t2, T);
            datt[t2] = dot(g, v, HS) * keep;
            weighted += a[t2] * datt[t2];
            for (int i = 0; i < HS; i++) dv[i] += a[t2] * keep * g[i];
        }
        for (int t2 = 0; t2 <= t; t2++) {
            const float *k = qkv + ((size_t)b * T + t2) * C3 + Cl + h * HS;
            float *dk = dqkv + ((size_t)b * T + t2) * C3 + Cl + h * HS;
            float dpre = a[t2] * (datt[t2] - weighted) * scale;
            for (int i = 0; i < HS; i++) {
                dq[i] += dpre * k[i];
                dk[i] += dpre * q[i];
            }
        }
    }
}

void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int NH, int HS,
                            tg_dropout drop) {
#pragma omp parallel
    {
        float *datt = tg_malloc((size_t)T * sizeof(float), "attention backward scratch");
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) attention_backward_head(dqkv, dout, qkv, att, datt, b, h, T, NH, HS, &drop);
        free(datt);
    }
}
