/* bf16 storage on the CPU: the float32 kernels run on float copies of
 * bfloat16 activations and working weights, and their outputs are rounded
 * back to bf16 once. Slow (every op converts its operands); it exists so
 * that the bf16 paths of the orchestrator (element sizes, master weights,
 * bf16 collectives) run and are tested on machines without a GPU. Numerics
 * follow the CUDA bf16 path's contract: fp32 arithmetic, one rounding per
 * stored output, fp32 master weights, gradients and statistics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/cpu/kernels.h"
#include "model/ops.h"
#include "util/err.h"

/* A float32 copy of n bf16 elements (NULL for NULL). */
static float *widen(const void *src, size_t n) {
    if (!src) return NULL;
    float *f = tg_malloc(n * sizeof(float) + 1, "bf16 emulation");
    const uint16_t *h = src;
    for (size_t i = 0; i < n; i++) f[i] = tg_bf16_to_f32(h[i]);
    return f;
}

/* Rounds n floats into bf16 dst and frees src. */
static void narrow(void *dst, float *src, size_t n) {
    uint16_t *h = dst;
    for (size_t i = 0; i < n; i++) h[i] = tg_f32_to_bf16(src[i]);
    free(src);
}

/* An uninitialised float buffer for an overwritten output. */
static float *scratch(size_t n) { return tg_malloc(n * sizeof(float) + 1, "bf16 emulation"); }

static void cast_params(tg_o o, void *dst, const float *src, size_t n) {
    (void)o;
    uint16_t *h = dst;
    for (size_t i = 0; i < n; i++) h[i] = tg_f32_to_bf16(src[i]);
}

static void download_floats(tg_o o, float *dst, const void *src, size_t n) {
    (void)o;
    const uint16_t *h = src;
    for (size_t i = 0; i < n; i++) dst[i] = tg_bf16_to_f32(h[i]);
}

static void encoder_forward(tg_o o, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T, int C,
                            int vs, int vl) {
    (void)o;
    const size_t N = (size_t)B * T;
    float *w = widen(wte, (size_t)vl * C), *p = widen(wpe, (size_t)T * C), *y = scratch(N * C);
    cpu_encoder_forward(y, tokens, w, p, B, T, C, vs, vl);
    narrow(out, y, N * C);
    free(w);
    free(p);
}

static void encoder_backward(tg_o o, float *dwte, float *dwpe, const void *dout, const int32_t *tokens, int B, int T, int C,
                             int vs, int vl) {
    (void)o;
    float *d = widen(dout, (size_t)B * T * C);
    cpu_encoder_backward(dwte, dwpe, d, tokens, B, T, C, vs, vl);
    free(d);
}

static void layernorm_forward(tg_o o, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b,
                              int N, int C) {
    (void)o;
    const size_t n = (size_t)N * C;
    float *x = widen(inp, n), *wf = widen(w, C), *bf = widen(b, C), *y = scratch(n);
    cpu_layernorm_forward(y, mean, rstd, x, wf, bf, N, C);
    narrow(out, y, n);
    free(x);
    free(wf);
    free(bf);
}

static void layernorm_backward(tg_o o, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w,
                               const float *mean, const float *rstd, int N, int C) {
    (void)o;
    const size_t n = (size_t)N * C;
    float *dx = widen(dinp, n), *d = widen(dout, n), *x = widen(inp, n), *wf = widen(w, C);
    cpu_layernorm_backward(dx, dw, db, d, x, wf, mean, rstd, N, C);
    narrow(dinp, dx, n);
    free(d);
    free(x);
    free(wf);
}

static void matmul_forward(tg_o o, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    (void)o;
    float *x = widen(inp, (size_t)N * C), *wf = widen(w, (size_t)C * OC), *b = widen(bias, OC), *y = scratch((size_t)N * OC);
    cpu_matmul_forward(y, x, wf, b, N, C, OC);
    narrow(out, y, (size_t)N * OC);
    free(x);
    free(wf);
    free(b);
}

static void matmul_backward(tg_o o, void *dinp, float *dw, float *dbias, const void *dout, const void *inp, const void *w,
                            int N, int C, int OC) {
    (void)o;
    float *d = widen(dout, (size_t)N * OC), *x = widen(inp, (size_t)N * C), *wf = widen(w, (size_t)C * OC);
    float *dx = dinp ? scratch((size_t)N * C) : NULL;
    cpu_matmul_backward(dx, dw, dbias, d, x, wf, N, C, OC);
    if (dx) narrow(dinp, dx, (size_t)N * C);
    free(d);
    free(x);
    free(wf);
}

static void lmhead_forward(tg_o o, void *logits, const void *x, const void *wte, int N, int C, int V) {
    (void)o;
    float *xf = widen(x, (size_t)N * C), *w = widen(wte, (size_t)V * C), *y = scratch((size_t)N * V);
    cpu_lmhead_forward(y, xf, w, N, C, V);
    narrow(logits, y, (size_t)N * V);
    free(xf);
    free(w);
}

static void lmhead_backward(tg_o o, void *dx, float *dwte, const void *dlogits, const void *x, const void *wte, int N, int C,
                            int V) {
    (void)o;
    float *d = widen(dlogits, (size_t)N * V), *xf = widen(x, (size_t)N * C), *w = widen(wte, (size_t)V * C);
    float *g = scratch((size_t)N * C);
    cpu_lmhead_backward(g, dwte, d, xf, w, N, C, V);
    narrow(dx, g, (size_t)N * C);
    free(d);
    free(xf);
    free(w);
}

static void attention_forward(tg_o o, void *out, void *att, const void *qkv, int B, int T, int NH, int HS, tg_dropout d) {
    (void)o;
    const size_t N = (size_t)B * T, na = (size_t)B * NH * T * T;
    float *q = widen(qkv, N * 3 * NH * HS), *y = scratch(N * NH * HS), *a = scratch(na);
    cpu_attention_forward(y, a, q, B, T, NH, HS, d);
    narrow(out, y, N * NH * HS);
    narrow(att, a, na);
    free(q);
}

static void attention_backward(tg_o o, void *dqkv, const void *dout, const void *qkv, const void *att, int B, int T, int NH,
                               int HS, tg_dropout d) {
    (void)o;
    const size_t N = (size_t)B * T;
    float *dy = widen(dout, N * NH * HS), *q = widen(qkv, N * 3 * NH * HS), *a = widen(att, (size_t)B * NH * T * T);
    float *dq = scratch(N * 3 * NH * HS);
    cpu_attention_backward(dq, dy, q, a, B, T, NH, HS, d);
    narrow(dqkv, dq, N * 3 * NH * HS);
    free(dy);
    free(q);
    free(a);
}

static void gelu_forward(tg_o o, void *out, const void *inp, size_t n) {
    (void)o;
    float *x = widen(inp, n), *y = scratch(n);
    cpu_gelu_forward(y, x, n);
    narrow(out, y, n);
    free(x);
}

static void gelu_backward(tg_o o, void *dinp, const void *inp, const void *dout, size_t n) {
    (void)o;
    float *x = widen(inp, n), *d = widen(dout, n), *dx = scratch(n);
    cpu_gelu_backward(dx, x, d, n);
    narrow(dinp, dx, n);
    free(x);
    free(d);
}

static void add(tg_o o, void *out, const void *a, const void *b, size_t n) {
    (void)o;
    float *af = widen(a, n), *bf = widen(b, n), *y = scratch(n);
    cpu_add(y, af, bf, n);
    narrow(out, y, n);
    free(af);
    free(bf);
}

static void bias_residual_add(tg_o o, void *out, const void *x, const void *bias, const void *res, int N, int C, tg_dropout d) {
    (void)o;
    const size_t n = (size_t)N * C;
    float *xf = widen(x, n), *b = widen(bias, C), *r = widen(res, n), *y = scratch(n);
    cpu_bias_residual_add(y, xf, b, r, N, C, d);
    narrow(out, y, n);
    free(xf);
    free(b);
    free(r);
}

static void dropout(tg_o o, void *out, const void *in, int N, int C, tg_dropout d) {
    (void)o;
    const size_t n = (size_t)N * C;
    float *x = widen(in, n), *y = scratch(n);
    cpu_dropout(y, x, N, C, d);
    narrow(out, y, n);
    free(x);
}

static void bias_backward(tg_o o, float *dbias, const void *dout, int N, int C) {
    (void)o;
    float *d = widen(dout, (size_t)N * C);
    cpu_bias_backward(dbias, d, N, C);
    free(d);
}

static void position_forward(tg_o o, void *out, const void *wpe, int row_start, int N, int T, int C) {
    (void)o;
    float *y = widen(out, (size_t)N * C), *w = widen(wpe, (size_t)T * C);
    cpu_position_forward(y, w, row_start, N, T, C);
    narrow(out, y, (size_t)N * C);
    free(w);
}

static void position_backward(tg_o o, float *dwpe, const void *dout, int row_start, int N, int T, int C) {
    (void)o;
    float *d = widen(dout, (size_t)N * C);
    cpu_position_backward(dwpe, d, row_start, N, T, C);
    free(d);
}

static void xent_rowmax(tg_o o, float *rowmax, const void *logits, int N, int V, int n_real) {
    (void)o;
    float *l = widen(logits, (size_t)N * V);
    cpu_xent_rowmax(rowmax, l, N, V, n_real);
    free(l);
}

static void xent_stats(tg_o o, float *stats, const void *logits, const float *rowmax, const int32_t *targets, int N, int V,
                       int n_real, int vocab_start) {
    (void)o;
    float *l = widen(logits, (size_t)N * V);
    cpu_xent_stats(stats, l, rowmax, targets, N, V, n_real, vocab_start);
    free(l);
}

static void xent_finish(tg_o o, float *losses, void *logits, const float *rowmax, const float *stats, const int32_t *targets,
                        int N, int V, int n_real, int vocab_start, float dloss) {
    (void)o;
    float *l = widen(logits, (size_t)N * V);
    cpu_xent_finish(losses, l, rowmax, stats, targets, N, V, n_real, vocab_start, dloss);
    narrow(logits, l, (size_t)N * V);
}

static void adamw(tg_o o, float *p, void *work, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                  float eps, float weight_decay, float bc1, float bc2) {
    cpu_adamw(p, g, m, v, n, lr, beta1, beta2, eps, weight_decay, bc1, bc2);
    cast_params(o, work, p, n);
}

static void destroy(tg_ops *o) { free(o); }

/* Everything else is the float32 CPU backend's. */
static tg_ops make_table(void) {
    tg_ops t = *ops_cpu();
    t.name = "cpu";
    snprintf(t.device, sizeof t.device, "host CPU, bf16 storage emulated over float32 kernels (for tests; slow)");
    t.act = TG_BF16;
    t.cast_params = cast_params;
    t.download_floats = download_floats;
    t.encoder_forward = encoder_forward;
    t.encoder_backward = encoder_backward;
    t.layernorm_forward = layernorm_forward;
    t.layernorm_backward = layernorm_backward;
    t.matmul_forward = matmul_forward;
    t.matmul_backward = matmul_backward;
    t.lmhead_forward = lmhead_forward;
    t.lmhead_backward = lmhead_backward;
    t.attention_forward = attention_forward;
    t.attention_backward = attention_backward;
    t.gelu_forward = gelu_forward;
    t.gelu_backward = gelu_backward;
    t.add = add;
    t.bias_residual_add = bias_residual_add;
    t.dropout = dropout;
    t.bias_backward = bias_backward;
    t.position_forward = position_forward;
    t.position_backward = position_backward;
    t.xent_rowmax = xent_rowmax;
    t.xent_stats = xent_stats;
    t.xent_finish = xent_finish;
    t.adamw = adamw;
    return t;
}

tg_ops *ops_cpu_bf16_create(tg_err *e) {
    tg_ops *o = malloc(sizeof *o);
    if (!o) {
        tg_fail(e, "out of memory creating the bf16 CPU backend");
        return NULL;
    }
    *o = make_table();
    o->destroy = destroy;
    return o;
}
