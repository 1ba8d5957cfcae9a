/* The CPU backend's kernels (float32, OpenMP). Each is documented at its
 * slot in model/ops.h; every reduction sums in a fixed order, so results do
 * not depend on the number of threads. */
#ifndef MODEL_CPU_KERNELS_H
#define MODEL_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "model/ops.h"

void cpu_encoder_forward(float *out, const int32_t *tokens, const float *wte, const float *wpe, int B, int T, int C,
                         int vocab_start, int vocab_local);
void cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B, int T, int C,
                          int vocab_start, int vocab_local);
void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b, int N,
                           int C);
void cpu_layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                            const float *mean, const float *rstd, int N, int C);
void cpu_matmul_forward(float *out, const float *inp, const float *w, const float *bias, int N, int C, int OC);
void cpu_matmul_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w, int N,
                         int C, int OC);
void cpu_lmhead_forward(float *logits, const float *x, const float *wte, int N, int C, int V);
void cpu_lmhead_backward(float *dx, float *dwte, const float *dlogits, const float *x, const float *wte, int N, int C, int V);
void cpu_attention_forward(float *out, float *att, const float *qkv, int B, int T, int NH, int HS, tg_dropout drop);
void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int NH, int HS,
                            tg_dropout drop);
void cpu_gelu_forward(float *out, const float *inp, size_t n);
void cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);
void cpu_add(float *out, const float *a, const float *b, size_t n);
void cpu_bias_residual_add(float *out, const float *x, const float *bias, const float *res, int N, int C, tg_dropout drop);
void cpu_dropout(float *out, const float *in, int N, int C, tg_dropout drop);
/* The kept-and-scaled factor of element i of a site: 0 or 1/(1-p). */
float cpu_dropout_scale(const tg_dropout *drop, uint64_t index);
void cpu_bias_backward(float *dbias, const float *dout, int N, int C);
void cpu_position_forward(float *out, const float *wpe, int row_start, int N, int T, int C);
void cpu_position_backward(float *dwpe, const float *dout, int row_start, int N, int T, int C);
void cpu_xent_rowmax(float *rowmax, const float *logits, int N, int V, int n_real);
void cpu_xent_stats(float *stats, const float *logits, const float *rowmax, const int32_t *targets, int N, int V, int n_real,
                    int vocab_start);
void cpu_xent_finish(float *losses, float *logits, const float *rowmax, const float *stats, const int32_t *targets, int N,
                     int V, int n_real, int vocab_start, float dloss);
double cpu_sum_squares(const float *x, size_t n);
void cpu_scale(float *x, float s, size_t n);
void cpu_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps,
               float weight_decay, float bc1, float bc2);

#endif
