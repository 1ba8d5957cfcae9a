/* Causal multi-head self-attention, scaled by 1/sqrt(HS), flash-style: the
 * forward keeps only each query row's log-sum-exp (lse); the backward
 * recomputes the probabilities P = exp(s - lse) row by row and uses
 * D = rowsum(dout * out) = sum_t2 P * dP for the softmax's gradient, so no
 * T x T buffer exists. The CUDA kernels (kernels/cuda/flash_*.cu) are this
 * file's twins. */
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

/* Scaled scores of query row t against keys 0..t into s; returns their max. */
static float row_scores(float *s, const act_t *qkv, int b, int h, int t, int T, int NH, int HS) {
    const int C3 = 3 * NH * HS, Cl = NH * HS;
    const float scale = 1.0f / sqrtf((float)HS);
    const act_t *q = qkv + ((size_t)b * T + t) * C3 + h * HS;
    float maxv = -INFINITY;
    for (int t2 = 0; t2 <= t; t2++) {
        s[t2] = dot(q, qkv + ((size_t)b * T + t2) * C3 + Cl + h * HS, HS) * scale;
        if (s[t2] > maxv) maxv = s[t2];
    }
    return maxv;
}

/* Row t of one (batch, head): probabilities in a (float scratch of T), the
 * row's lse, and the weighted sum of values into acc (HS floats), then out. */
static void attention_row(act_t *out, float *lse, const act_t *qkv, float *a, float *acc, int b, int h, int t, int T, int NH,
                          int HS, const tg_dropout *drop) {
    const int C3 = 3 * NH * HS, Cl = NH * HS;
    const float maxv = row_scores(a, qkv, b, h, t, T, NH, HS);
    float sum = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) {
        a[t2] = expf(a[t2] - maxv);
        sum += a[t2];
    }
    lse[((size_t)b * NH + h) * T + t] = maxv + logf(sum);
    const float inv = 1.0f / sum;
    memset(acc, 0, (size_t)HS * sizeof(float));
    for (int t2 = 0; t2 <= t; t2++) {
        const act_t *v = qkv + ((size_t)b * T + t2) * C3 + 2 * Cl + h * HS;
        float p = a[t2] * inv * att_drop(drop, b, h, t, t2, T);
        for (int i = 0; i < HS; i++) acc[i] += p * act_load(v[i]);
    }
    act_t *o = out + ((size_t)b * T + t) * Cl + h * HS;
    for (int i = 0; i < HS; i++) o[i] = act_store(acc[i]);
}

void CPU_KERNEL(attention_forward)(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS,
                                   tg_dropout drop) {
    (void)o;
#pragma omp parallel
    {
        float *scratch = tg_malloc((size_t)(T + HS) * sizeof(float), "attention scratch");
#pragma omp for collapse(3) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++) attention_row(out, lse, qkv, scratch, scratch + T, b, h, t, T, NH, HS, &drop);
        free(scratch);
    }
}

/* Query row t of one (batch, head) in the backward: P from the scores and
 * lse, dP = (dout . v) * keep, dS = P * (dP - D) * scale, then dq, dk, dv. */
static void attention_backward_row(float *dqkv, const act_t *dout, const act_t *out, const act_t *qkv, const float *lse,
                                   float *p, int b, int h, int t, int T, int NH, int HS, const tg_dropout *drop) {
    const int C3 = 3 * NH * HS, Cl = NH * HS;
    const float scale = 1.0f / sqrtf((float)HS);
    const act_t *g = dout + ((size_t)b * T + t) * Cl + h * HS;
    const act_t *q = qkv + ((size_t)b * T + t) * C3 + h * HS;
    float *dq = dqkv + ((size_t)b * T + t) * C3 + h * HS;
    const float row_lse = lse[((size_t)b * NH + h) * T + t];
    const float D = dot(g, out + ((size_t)b * T + t) * Cl + h * HS, HS);
    row_scores(p, qkv, b, h, t, T, NH, HS);
    for (int t2 = 0; t2 <= t; t2++) {
        const act_t *k = qkv + ((size_t)b * T + t2) * C3 + Cl + h * HS, *v = k + Cl;
        float *dk = dqkv + ((size_t)b * T + t2) * C3 + Cl + h * HS, *dv = dk + Cl;
        const float prob = expf(p[t2] - row_lse), keep = att_drop(drop, b, h, t, t2, T);
        const float dp = dot(g, v, HS) * keep, ds = prob * (dp - D) * scale;
        for (int i = 0; i < HS; i++) {
            dv[i] += prob * keep * act_load(g[i]);
            dq[i] += ds * act_load(k[i]);
            dk[i] += ds * act_load(q[i]);
        }
    }
}

/* One (batch, head) pair: only that head's columns of dqkv are written, so
 * pairs run in parallel without races. */
static void attention_backward_head(float *dqkv, const act_t *dout, const act_t *out, const act_t *qkv, const float *lse,
                                    float *p, int b, int h, int T, int NH, int HS, const tg_dropout *drop) {
    const int C3 = 3 * NH * HS, Cl = NH * HS;
    for (int t = 0; t < T; t++) {
        float *dq = dqkv + ((size_t)b * T + t) * C3 + h * HS;
        memset(dq, 0, (size_t)HS * sizeof(float));
        memset(dq + Cl, 0, (size_t)HS * sizeof(float));
        memset(dq + 2 * Cl, 0, (size_t)HS * sizeof(float));
    }
    for (int t = 0; t < T; t++) attention_backward_row(dqkv, dout, out, qkv, lse, p, b, h, t, T, NH, HS, drop);
}

void CPU_KERNEL(attention_backward)(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse,
                                    int B, int T, int NH, int HS, tg_dropout drop) {
    (void)o;
    /* dq, dk, dv accumulate over rows: in float32 (a view of dqkv). */
    const size_t n = (size_t)B * T * 3 * NH * HS;
    float *dqkv_f = act_view(dqkv, n, false);
#pragma omp parallel
    {
        float *p = tg_malloc((size_t)T * sizeof(float), "attention backward scratch");
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) attention_backward_head(dqkv_f, dout, out, qkv, lse, p, b, h, T, NH, HS, &drop);
        free(p);
    }
    act_view_end(dqkv, dqkv_f, n);
}
