/* The work of one kernel call, from its arguments: FLOPs for the products
 * and the attention core, bytes moved for everything else, one unit a call
 * for the scalar ops. The one model both the per-op timer's rate columns
 * (kernels/timed.c, kernels/op_rates.h) and the planner's time model
 * (train/plan_time.c) price calls by, so a table's rates and --plan's
 * calibration agree on what an op does. */
#ifndef KERNELS_OP_WORK_H
#define KERNELS_OP_WORK_H

#include "kernels/ops.h"

/* What an op's work counts, and so which ceiling its rate is held against. */
typedef enum {
    OP_UNIT_FLOP,      /* tensor-core products: TFLOP/s against the products' ceiling */
    OP_UNIT_BYTE,      /* device memory moved: GB/s against the memory's ceiling */
    OP_UNIT_HOST_BYTE, /* bytes across the host link: GB/s, no ceiling in the table */
    OP_UNIT_CALL       /* a scalar op: one unit a call, no rate */
} op_unit;

/* Bytes of n elements of o's activation type. */
double op_work_act_bytes(tg_o o, double n);
/* Elements of the spans' tensors inside their windows (ZeRO: this rank's). */
double op_work_span_elements(const tg_spans *s);
/* A backward product: one N x C x OC product per gradient it makes. */
double op_work_backward_flops(const void *dinp, const void *dw, int N, int C, int OC);
/* Causal attention: half of the T x T scores, `products` products of
 * 2 B NH (T^2 / 2) HS FLOPs (forward 2, backward 5: the issue's
 * 2 B T^2 C a layer forward, 2.5 times that backward). */
double op_work_attention_flops(int B, int T, int NH, int HS, int products);
/* AdamW reads gradient, master, both moments, writes master, moments and the working copy. */
double op_work_adamw_bytes(tg_o o, const tg_spans *spans);

/* Every op a step's time can go to: X(name, parameters, arguments, unit,
 * work of one call as an expression over the parameters). */
#define TIMED_OPS(X)                                                                                                       \
    X(upload, (tg_o o, void *dst, const void *src, size_t bytes), (dst, src, bytes), OP_UNIT_HOST_BYTE, (double)bytes)     \
    X(download, (tg_o o, void *dst, const void *src, size_t bytes), (dst, src, bytes), OP_UNIT_HOST_BYTE, (double)bytes)   \
    X(zero, (tg_o o, void *p, size_t bytes), (p, bytes), OP_UNIT_BYTE, (double)bytes)                                      \
    X(cast_params, (tg_o o, void *dst, const float *src, size_t n), (dst, src, n), OP_UNIT_BYTE,                           \
      4.0 * n + op_work_act_bytes(o, n))                                                                                   \
    X(download_floats, (tg_o o, float *dst, const void *src, size_t n), (dst, src, n), OP_UNIT_HOST_BYTE, 4.0 * n)         \
    X(encoder_forward,                                                                                                     \
      (tg_o o, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T, int C, int vs, int vl),   \
      (out, tokens, wte, wpe, B, T, C, vs, vl), OP_UNIT_BYTE, op_work_act_bytes(o, 2.0 * B * T * C))                       \
    X(encoder_backward,                                                                                                    \
      (tg_o o, float *dwte, float *dwpe, const void *dout, const int32_t *tokens, int B, int T, int C, int vs, int vl),    \
      (dwte, dwpe, dout, tokens, B, T, C, vs, vl), OP_UNIT_BYTE,                                                           \
      op_work_act_bytes(o, (double)B * T * C) + 8.0 * B * T * C)                                                           \
    X(layernorm_forward,                                                                                                   \
      (tg_o o, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b, int N, int C),          \
      (out, mean, rstd, inp, w, b, N, C), OP_UNIT_BYTE, op_work_act_bytes(o, 2.0 * N * C))                                 \
    X(layernorm_backward,                                                                                                  \
      (tg_o o, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w, const float *mean,     \
       const float *rstd, int N, int C, bool dacc, bool acc),                                                              \
      (dinp, dw, db, dout, inp, w, mean, rstd, N, C, dacc, acc), OP_UNIT_BYTE, op_work_act_bytes(o, 4.0 * N * C))                     \
    X(matmul_forward_gelu,                                                                                                 \
      (tg_o o, void *out, void *pre, const void *inp, const void *w, const void *bias, int N, int C, int OC),             \
      (out, pre, inp, w, bias, N, C, OC), OP_UNIT_FLOP, 2.0 * N * C * OC)                                                  \
    X(matmul_forward, (tg_o o, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC),         \
      (out, inp, w, bias, N, C, OC), OP_UNIT_FLOP, 2.0 * N * C * OC)                                                       \
    X(matmul_backward,                                                                                                     \
      (tg_o o, void *dinp, float *dw, float *dbias, const void *dout, const void *inp, const void *w, int N, int C,       \
       int OC, bool acc),                                                                                                  \
      (dinp, dw, dbias, dout, inp, w, N, C, OC, acc), OP_UNIT_FLOP, op_work_backward_flops(dinp, dw, N, C, OC))                 \
    X(matmul_backward_dgelu,                                                                                               \
      (tg_o o, void *dpre, float *dpre_bias, float *dw, const void *dout, const void *inp, const void *w, const void *pre,  \
       int N, int C, int OC, bool acc),                                                                                    \
      (dpre, dpre_bias, dw, dout, inp, w, pre, N, C, OC, acc), OP_UNIT_FLOP, op_work_backward_flops(dpre, dw, N, C, OC))        \
    X(lmhead_forward, (tg_o o, void *logits, const void *x, const void *wte, int N, int C, int V),                         \
      (logits, x, wte, N, C, V), OP_UNIT_FLOP, 2.0 * N * C * V)                                                            \
    X(lmhead_backward,                                                                                                     \
      (tg_o o, void *dx, float *dwte, const void *dlogits, const void *x, const void *wte, int N, int C, int V, bool acc), \
      (dx, dwte, dlogits, x, wte, N, C, V, acc), OP_UNIT_FLOP, op_work_backward_flops(dx, dwte, N, C, V))                       \
    X(attention_forward,                                                                                                   \
      (tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, tg_dropout drop),                     \
      (out, lse, qkv, B, T, NH, HS, drop), OP_UNIT_FLOP, op_work_attention_flops(B, T, NH, HS, 2))                         \
    X(attention_backward,                                                                                                  \
      (tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B, int T, int NH,    \
       int HS, tg_dropout drop),                                                                                           \
      (dqkv, dout, out, qkv, lse, B, T, NH, HS, drop), OP_UNIT_FLOP, op_work_attention_flops(B, T, NH, HS, 5))             \
    X(gelu_forward, (tg_o o, void *out, const void *inp, size_t n), (out, inp, n), OP_UNIT_BYTE,                           \
      op_work_act_bytes(o, 2.0 * n))                                                                                       \
    X(gelu_backward, (tg_o o, void *dinp, const void *inp, const void *dout, size_t n), (dinp, inp, dout, n),              \
      OP_UNIT_BYTE, op_work_act_bytes(o, 3.0 * n))                                                                         \
    X(bias_residual_add,                                                                                                   \
      (tg_o o, void *out, const void *x, const void *bias, const void *res, int N, int C, tg_dropout drop),                \
      (out, x, bias, res, N, C, drop), OP_UNIT_BYTE, op_work_act_bytes(o, 3.0 * N * C))                                    \
    X(bias_residual_layernorm,                                                                                             \
      (tg_o o, void *out, void *ln_out, float *mean, float *rstd, const void *x, const void *bias, const void *res,        \
       const void *w, const void *b, int N, int C, tg_dropout drop),                                                       \
      (out, ln_out, mean, rstd, x, bias, res, w, b, N, C, drop), OP_UNIT_BYTE, op_work_act_bytes(o, 4.0 * N * C))          \
    X(dropout, (tg_o o, void *out, const void *in, int N, int C, tg_dropout drop), (out, in, N, C, drop), OP_UNIT_BYTE,   \
      op_work_act_bytes(o, 2.0 * N * C))                                                                                   \
    X(bias_backward, (tg_o o, float *dbias, const void *dout, int N, int C, bool acc), (dbias, dout, N, C, acc),          \
      OP_UNIT_BYTE,                                                                                                        \
      op_work_act_bytes(o, (double)N * C))                                                                                 \
    X(position_forward, (tg_o o, void *out, const void *wpe, int row_start, int N, int T, int C),                          \
      (out, wpe, row_start, N, T, C), OP_UNIT_BYTE, op_work_act_bytes(o, 3.0 * N * C))                                     \
    X(position_backward, (tg_o o, float *dwpe, const void *dout, int row_start, int N, int T, int C, bool acc),            \
      (dwpe, dout, row_start, N, T, C, acc), OP_UNIT_BYTE, op_work_act_bytes(o, (double)N * C) + 8.0 * N * C)                   \
    X(xent_partial,                                                                                                        \
      (tg_o o, float *rowmax, float *local_max, float *stats, const void *logits, const int32_t *targets, int N, int V,    \
       int n_real, int vocab_start),                                                                                       \
      (rowmax, local_max, stats, logits, targets, N, V, n_real, vocab_start), OP_UNIT_BYTE,                                \
      op_work_act_bytes(o, (double)N * V))                                                                                 \
    X(xent_rescale, (tg_o o, float *stats, const float *local_max, const float *rowmax, int N),                            \
      (stats, local_max, rowmax, N), OP_UNIT_BYTE, 16.0 * N)                                                               \
    X(xent_finish,                                                                                                         \
      (tg_o o, float *losses, void *logits, const float *rowmax, const float *stats, const int32_t *targets, int N, int V, \
       int n_real, int vocab_start, float dloss),                                                                          \
      (losses, logits, rowmax, stats, targets, N, V, n_real, vocab_start, dloss), OP_UNIT_BYTE,                            \
      op_work_act_bytes(o, 2.0 * N * V))                                                                                   \
    X(xent_fused,                                                                                                          \
      (tg_o o, float *losses, void *logits, const int32_t *targets, int N, int V, int n_real, float dloss),                \
      (losses, logits, targets, N, V, n_real, dloss), OP_UNIT_BYTE, op_work_act_bytes(o, 2.0 * N * V))                     \
    X(loss_accumulate, (tg_o o, tg_step_stats *s, const float *losses, int N), (s, losses, N), OP_UNIT_BYTE, 4.0 * N)     \
    X(loss_finish, (tg_o o, tg_step_stats *s, int n_micro, float divisor), (s, n_micro, divisor), OP_UNIT_CALL, 1.0)       \
    X(grad_sumsq, (tg_o o, tg_step_stats *s, const float *g, const tg_spans *spans, int exact), (s, g, spans, exact),      \
      OP_UNIT_BYTE, 4.0 * op_work_span_elements(spans))                                                                   \
    X(grad_clip_factor, (tg_o o, tg_step_stats *s, int reduced, double max_norm), (s, reduced, max_norm), OP_UNIT_CALL,   \
      1.0)                                                                                                                 \
    X(adamw,                                                                                                               \
      (tg_o o, float *p, void *work, const float *g, float *m, float *v, const tg_spans *spans, const tg_adamw_args *a,    \
       const tg_step_stats *s),                                                                                            \
      (p, work, g, m, v, spans, a, s), OP_UNIT_BYTE, op_work_adamw_bytes(o, spans))

/* The unit of the op named name; OP_UNIT_CALL, and *known (if not NULL)
 * false, for a name that is not a timed op. */
op_unit op_work_unit(const char *name, int *known);

#endif
