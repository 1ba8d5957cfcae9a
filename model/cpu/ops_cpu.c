/* The CPU backend's table: host memory and the float32 kernels of
 * model/cpu/kernels.h, adapted to the ops.h calling form (the instance
 * first, activation-type buffers as void *: always float here). */
#include <stdlib.h>
#include <string.h>

#include "model/cpu/gemm.h"
#include "model/cpu/kernels.h"
#include "model/ops.h"
#include "util/err.h"

static void *host_alloc(tg_o o, size_t bytes, const char *what) {
    (void)o;
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) {
        tg_err e;
        tg_fail(&e, "out of memory allocating %zu bytes for %s", bytes, what);
        tg_die("train_gpt", &e);
    }
    return p;
}

static void host_free(tg_o o, void *p) { (void)o; free(p); }
static void host_copy(tg_o o, void *dst, const void *src, size_t bytes) { (void)o; if (dst != src) memmove(dst, src, bytes); }
static void host_zero(tg_o o, void *p, size_t bytes) { (void)o; memset(p, 0, bytes); }
static void host_cast(tg_o o, void *dst, const float *src, size_t n) { host_copy(o, dst, src, n * sizeof(float)); }
static void host_floats(tg_o o, float *dst, const void *src, size_t n) { host_copy(o, dst, src, n * sizeof(float)); }
static void host_sync(tg_o o) { (void)o; }
static void host_timer_begin(tg_o o) { (void)o; }
static double host_timer_end_ms(tg_o o) { (void)o; return -1.0; }
static size_t host_mem_peak(tg_o o) { (void)o; return 0; }
static double host_peak_tflops(tg_o o) { (void)o; return 0.0; }

static void encoder_forward(tg_o o, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T, int C,
                            int vs, int vl) {
    (void)o;
    cpu_encoder_forward(out, tokens, wte, wpe, B, T, C, vs, vl);
}
static void encoder_backward(tg_o o, float *dwte, float *dwpe, const void *dout, const int32_t *tokens, int B, int T, int C,
                             int vs, int vl) {
    (void)o;
    cpu_encoder_backward(dwte, dwpe, dout, tokens, B, T, C, vs, vl);
}
static void layernorm_forward(tg_o o, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b,
                              int N, int C) {
    (void)o;
    cpu_layernorm_forward(out, mean, rstd, inp, w, b, N, C);
}
static void layernorm_backward(tg_o o, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w,
                               const float *mean, const float *rstd, int N, int C) {
    (void)o;
    cpu_layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
}
static void matmul_forward(tg_o o, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    (void)o;
    cpu_matmul_forward(out, inp, w, bias, N, C, OC);
}
static void matmul_backward(tg_o o, void *dinp, float *dw, float *dbias, const void *dout, const void *inp, const void *w,
                            int N, int C, int OC) {
    (void)o;
    cpu_matmul_backward(dinp, dw, dbias, dout, inp, w, N, C, OC);
}
static void lmhead_forward(tg_o o, void *logits, const void *x, const void *wte, int N, int C, int V) {
    (void)o;
    cpu_lmhead_forward(logits, x, wte, N, C, V);
}
static void lmhead_backward(tg_o o, void *dx, float *dwte, const void *dlogits, const void *x, const void *wte, int N, int C,
                            int V) {
    (void)o;
    cpu_lmhead_backward(dx, dwte, dlogits, x, wte, N, C, V);
}
static void attention_forward(tg_o o, void *out, void *att, const void *qkv, int B, int T, int NH, int HS, tg_dropout d) {
    (void)o;
    cpu_attention_forward(out, att, qkv, B, T, NH, HS, d);
}
static void attention_backward(tg_o o, void *dqkv, const void *dout, const void *qkv, const void *att, int B, int T, int NH,
                               int HS, tg_dropout d) {
    (void)o;
    cpu_attention_backward(dqkv, dout, qkv, att, B, T, NH, HS, d);
}
static void gelu_forward(tg_o o, void *out, const void *inp, size_t n) { (void)o; cpu_gelu_forward(out, inp, n); }
static void gelu_backward(tg_o o, void *dinp, const void *inp, const void *dout, size_t n) {
    (void)o;
    cpu_gelu_backward(dinp, inp, dout, n);
}
static void add(tg_o o, void *out, const void *a, const void *b, size_t n) { (void)o; cpu_add(out, a, b, n); }
static void bias_residual_add(tg_o o, void *out, const void *x, const void *bias, const void *res, int N, int C,
                              tg_dropout d) {
    (void)o;
    cpu_bias_residual_add(out, x, bias, res, N, C, d);
}
static void dropout(tg_o o, void *out, const void *in, int N, int C, tg_dropout d) { (void)o; cpu_dropout(out, in, N, C, d); }
static void bias_backward(tg_o o, float *dbias, const void *dout, int N, int C) { (void)o; cpu_bias_backward(dbias, dout, N, C); }
static void position_forward(tg_o o, void *out, const void *wpe, int row_start, int N, int T, int C) {
    (void)o;
    cpu_position_forward(out, wpe, row_start, N, T, C);
}
static void position_backward(tg_o o, float *dwpe, const void *dout, int row_start, int N, int T, int C) {
    (void)o;
    cpu_position_backward(dwpe, dout, row_start, N, T, C);
}
static void xent_rowmax(tg_o o, float *rowmax, const void *logits, int N, int V, int n_real) {
    (void)o;
    cpu_xent_rowmax(rowmax, logits, N, V, n_real);
}
static void xent_stats(tg_o o, float *stats, const void *logits, const float *rowmax, const int32_t *targets, int N, int V,
                       int n_real, int vocab_start) {
    (void)o;
    cpu_xent_stats(stats, logits, rowmax, targets, N, V, n_real, vocab_start);
}
static void xent_finish(tg_o o, float *losses, void *logits, const float *rowmax, const float *stats, const int32_t *targets,
                        int N, int V, int n_real, int vocab_start, float dloss) {
    (void)o;
    cpu_xent_finish(losses, logits, rowmax, stats, targets, N, V, n_real, vocab_start, dloss);
}
static double sum_squares(tg_o o, const float *x, size_t n) { (void)o; return cpu_sum_squares(x, n); }
static void scale(tg_o o, float *x, float s, size_t n) { (void)o; cpu_scale(x, s, n); }
static void adamw(tg_o o, float *p, void *work, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                  float eps, float weight_decay, float bc1, float bc2) {
    cpu_adamw(p, g, m, v, n, lr, beta1, beta2, eps, weight_decay, bc1, bc2);
    host_copy(o, work, p, n * sizeof(float)); /* float32 working copy: a no-op when it is p itself */
}

static const tg_ops CPU_OPS = {
    .name = "cpu",
    .device = "host CPU, float32",
    .act = TG_F32,
    .ctx = NULL,
    .workspace_bytes = 0,
    .mem = {NULL, comm_host_copy, comm_host_copy, comm_host_copy, 0, NULL},
    .alloc = host_alloc,
    .free = host_free,
    .upload = host_copy,
    .download = host_copy,
    .zero = host_zero,
    .cast_params = host_cast,
    .download_floats = host_floats,
    .synchronize = host_sync,
    .timer_begin = host_timer_begin,
    .timer_end_ms = host_timer_end_ms,
    .mem_peak = host_mem_peak,
    .peak_tflops = host_peak_tflops,
    .destroy = NULL,
    .encoder_forward = encoder_forward,
    .encoder_backward = encoder_backward,
    .layernorm_forward = layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .matmul_forward = matmul_forward,
    .matmul_backward = matmul_backward,
    .lmhead_forward = lmhead_forward,
    .lmhead_backward = lmhead_backward,
    .attention_forward = attention_forward,
    .attention_backward = attention_backward,
    .gelu_forward = gelu_forward,
    .gelu_backward = gelu_backward,
    .add = add,
    .bias_residual_add = bias_residual_add,
    .dropout = dropout,
    .bias_backward = bias_backward,
    .position_forward = position_forward,
    .position_backward = position_backward,
    .xent_rowmax = xent_rowmax,
    .xent_stats = xent_stats,
    .xent_finish = xent_finish,
    .sum_squares = sum_squares,
    .scale = scale,
    .adamw = adamw,
};

const tg_ops *ops_cpu(void) { return &CPU_OPS; }
