/* The null backend: every kernel does nothing and no memory exists. It lets
 * the orchestrator run a step for its side effects alone: the collectives
 * it issues, which a counting communicator tallies (train/plan.c), for
 * models of any size. Buffers are placeholders that no kernel touches;
 * downloads give zeros, so the host sees finite values. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"

/* A non-NULL address that is never dereferenced; offsets from it are only
 * passed back to these no-op kernels. */
static void *no_alloc(tg_o o, size_t bytes, const char *what) {
    (void)o; (void)bytes; (void)what;
    return (void *)(uintptr_t)4096;
}
static void no_free(tg_o o, void *p) { (void)o; (void)p; }
static void no_upload(tg_o o, void *dst, const void *src, size_t bytes) { (void)o; (void)dst; (void)src; (void)bytes; }
static void zeros_down(tg_o o, void *dst, const void *src, size_t bytes) { (void)o; (void)src; memset(dst, 0, bytes); }
static void no_zero(tg_o o, void *p, size_t bytes) { (void)o; (void)p; (void)bytes; }
static void no_cast(tg_o o, void *dst, const float *src, size_t n) { (void)o; (void)dst; (void)src; (void)n; }
static void zero_floats(tg_o o, float *dst, const void *src, size_t n) { (void)o; (void)src; memset(dst, 0, n * sizeof *dst); }
static void no_timer(tg_o o) { (void)o; }
static double no_clock(tg_o o) { (void)o; return -1.0; }
static size_t no_peak(tg_o o) { (void)o; return 0; }
static double no_tflops(tg_o o) { (void)o; return 0.0; }
static void destroy(tg_ops *o) { free(o); }

static void encoder_forward(tg_o o, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T, int C,
                            int vs, int vl) {
    (void)o; (void)out; (void)tokens; (void)wte; (void)wpe; (void)B; (void)T; (void)C; (void)vs; (void)vl;
}
static void encoder_backward(tg_o o, float *dwte, float *dwpe, const void *dout, const int32_t *tokens, int B, int T, int C,
                             int vs, int vl) {
    (void)o; (void)dwte; (void)dwpe; (void)dout; (void)tokens; (void)B; (void)T; (void)C; (void)vs; (void)vl;
}
static void layernorm_forward(tg_o o, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b,
                              int N, int C) {
    (void)o; (void)out; (void)mean; (void)rstd; (void)inp; (void)w; (void)b; (void)N; (void)C;
}
static void layernorm_backward(tg_o o, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w,
                               const float *mean, const float *rstd, int N, int C, bool dacc, bool acc) {
    (void)o; (void)dinp; (void)dw; (void)db; (void)dout; (void)inp; (void)w; (void)mean; (void)rstd; (void)N; (void)C;
    (void)dacc; (void)acc;
}
static void matmul_forward(tg_o o, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    (void)o; (void)out; (void)inp; (void)w; (void)bias; (void)N; (void)C; (void)OC;
}
static void matmul_backward(tg_o o, void *dinp, float *dw, float *dbias, const void *dout, const void *inp, const void *w,
                            int N, int C, int OC, bool acc) {
    (void)o; (void)dinp; (void)dw; (void)dbias; (void)dout; (void)inp; (void)w; (void)N; (void)C; (void)OC; (void)acc;
}
static void matmul_backward_dgelu(tg_o o, void *dpre, float *dpre_bias, float *dw, const void *dout, const void *inp,
                                  const void *w, const void *pre, int N, int C, int OC, bool acc) {
    (void)o; (void)dpre; (void)dpre_bias; (void)dw; (void)dout; (void)inp; (void)w; (void)pre; (void)N; (void)C; (void)OC;
    (void)acc;
}
static void lmhead_forward(tg_o o, void *logits, const void *x, const void *wte, int N, int C, int V) {
    (void)o; (void)logits; (void)x; (void)wte; (void)N; (void)C; (void)V;
}
static void lmhead_backward(tg_o o, void *dx, float *dwte, const void *dlogits, const void *x, const void *wte, int N, int C,
                            int V, bool acc) {
    (void)o; (void)dx; (void)dwte; (void)dlogits; (void)x; (void)wte; (void)N; (void)C; (void)V; (void)acc;
}
static void attention_forward(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, tg_dropout d) {
    (void)o; (void)out; (void)lse; (void)qkv; (void)B; (void)T; (void)NH; (void)HS; (void)d;
}
static void attention_backward(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B,
                               int T, int NH, int HS, tg_dropout d) {
    (void)o; (void)dqkv; (void)dout; (void)out; (void)qkv; (void)lse; (void)B; (void)T; (void)NH; (void)HS; (void)d;
}
static void gelu_forward(tg_o o, void *out, const void *inp, size_t n) { (void)o; (void)out; (void)inp; (void)n; }
static void gelu_backward(tg_o o, void *dinp, const void *inp, const void *dout, size_t n) {
    (void)o; (void)dinp; (void)inp; (void)dout; (void)n;
}
static void bias_residual_add(tg_o o, void *out, const void *x, const void *bias, const void *res, int N, int C,
                              tg_dropout d) {
    (void)o; (void)out; (void)x; (void)bias; (void)res; (void)N; (void)C; (void)d;
}
static void bias_residual_layernorm(tg_o o, void *out, void *ln_out, float *mean, float *rstd, const void *x,
                                    const void *bias, const void *res, const void *w, const void *b, int N, int C,
                                    tg_dropout d) {
    (void)o; (void)out; (void)ln_out; (void)mean; (void)rstd; (void)x; (void)bias; (void)res; (void)w; (void)b; (void)N;
    (void)C; (void)d;
}
static void dropout(tg_o o, void *out, const void *in, int N, int C, tg_dropout d) {
    (void)o; (void)out; (void)in; (void)N; (void)C; (void)d;
}
static void bias_backward(tg_o o, float *dbias, const void *dout, int N, int C, bool acc) {
    (void)o; (void)dbias; (void)dout; (void)N; (void)C; (void)acc;
}
static void position_forward(tg_o o, void *out, const void *wpe, int row_start, int N, int T, int C) {
    (void)o; (void)out; (void)wpe; (void)row_start; (void)N; (void)T; (void)C;
}
static void position_backward(tg_o o, float *dwpe, const void *dout, int row_start, int N, int T, int C, bool acc) {
    (void)o; (void)dwpe; (void)dout; (void)row_start; (void)N; (void)T; (void)C; (void)acc;
}
static void xent_partial(tg_o o, float *rowmax, float *local_max, float *stats, const void *logits, const int32_t *targets,
                         int N, int V, int n_real, int vocab_start) {
    (void)o; (void)rowmax; (void)local_max; (void)stats; (void)logits; (void)targets; (void)N; (void)V; (void)n_real;
    (void)vocab_start;
}
static void xent_rescale(tg_o o, float *stats, const float *local_max, const float *rowmax, int N) {
    (void)o; (void)stats; (void)local_max; (void)rowmax; (void)N;
}
static void xent_finish(tg_o o, float *losses, void *logits, const float *rowmax, const float *stats, const int32_t *targets,
                        int N, int V, int n_real, int vocab_start, float dloss) {
    (void)o; (void)losses; (void)logits; (void)rowmax; (void)stats; (void)targets; (void)N; (void)V; (void)n_real;
    (void)vocab_start; (void)dloss;
}
static void xent_fused(tg_o o, float *losses, void *logits, const int32_t *targets, int N, int V, int n_real, float dloss) {
    (void)o; (void)losses; (void)logits; (void)targets; (void)N; (void)V; (void)n_real; (void)dloss;
}
static void loss_accumulate(tg_o o, tg_step_stats *s, const float *losses, int N) { (void)o; (void)s; (void)losses; (void)N; }
static void loss_finish(tg_o o, tg_step_stats *s, int n_micro, float divisor) { (void)o; (void)s; (void)n_micro; (void)divisor; }
static void grad_sumsq(tg_o o, tg_step_stats *s, const float *g, const tg_spans *spans, int exact) {
    (void)o; (void)s; (void)g; (void)spans; (void)exact;
}
static void grad_clip_factor(tg_o o, tg_step_stats *s, int reduced, double max_norm) {
    (void)o; (void)s; (void)reduced; (void)max_norm;
}
static void adamw(tg_o o, float *p, void *work, const float *g, float *m, float *v, const tg_spans *spans, const tg_adamw_args *a,
                  const tg_step_stats *s) {
    (void)o; (void)p; (void)work; (void)g; (void)m; (void)v; (void)spans; (void)a; (void)s;
}

static void mem_none(void *ctx, void *dst, const void *src, size_t bytes) { (void)ctx; (void)dst; (void)src; (void)bytes; }
static void mem_zeros(void *ctx, void *host, const void *src, size_t bytes) { (void)ctx; (void)src; memset(host, 0, bytes); }

tg_ops *ops_null_create(tg_dtype act) {
    tg_ops *o = tg_calloc(1, sizeof *o, "null backend");
    *o = (tg_ops){
        .name = "null", .device = "none (a dry run: no kernel runs)", .act = act,
        .mem = {NULL, mem_zeros, mem_none, mem_none, 0, NULL, NULL},
        .alloc = no_alloc, .free = no_free, .upload = no_upload, .download = zeros_down, .zero = no_zero,
        .cast_params = no_cast, .download_floats = zero_floats, .timer_begin = no_timer, .timer_end_ms = no_clock,
        .mem_peak = no_peak, .peak_tflops = no_tflops, .destroy = destroy,
        .encoder_forward = encoder_forward, .encoder_backward = encoder_backward,
        .layernorm_forward = layernorm_forward, .layernorm_backward = layernorm_backward,
        .matmul_forward = matmul_forward, .matmul_backward = matmul_backward,
        .matmul_backward_dgelu = matmul_backward_dgelu,
        .lmhead_forward = lmhead_forward, .lmhead_backward = lmhead_backward,
        .attention_forward = attention_forward, .attention_backward = attention_backward,
        .gelu_forward = gelu_forward, .gelu_backward = gelu_backward, .bias_residual_add = bias_residual_add,
        .bias_residual_layernorm = bias_residual_layernorm, .dropout = dropout, .bias_backward = bias_backward,
        .position_forward = position_forward, .position_backward = position_backward, .xent_partial = xent_partial,
        .xent_rescale = xent_rescale, .xent_finish = xent_finish, .xent_fused = xent_fused, .loss_accumulate = loss_accumulate,
        .loss_finish = loss_finish, .grad_sumsq = grad_sumsq, .grad_clip_factor = grad_clip_factor, .adamw = adamw,
    };
    return o;
}
