/* The CPU backend's kernels (OpenMP), in the calling form of their slots in
 * kernels/ops.h, where each is documented, so the backend's table points
 * straight at them. Activation-type buffers hold act_t (kernels/cpu/act.h):
 * the names are cpu_* in the float32 build of these sources and cpu_bf16_*
 * in the bf16 one. Every reduction sums in a fixed order, so results do not
 * depend on the number of threads. */
#ifndef KERNELS_CPU_KERNELS_H
#define KERNELS_CPU_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/act.h"
#include "kernels/ops.h"
#include "util/rng_core.h"

void CPU_KERNEL(encoder_forward)(tg_o o, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T,
                                 int C, int vocab_start, int vocab_local);
void CPU_KERNEL(encoder_backward)(tg_o o, float *dwte, float *dwpe, const void *dout, const int32_t *tokens, int B, int T,
                                  int C, int vocab_start, int vocab_local);
void CPU_KERNEL(layernorm_forward)(tg_o o, void *out, float *mean, float *rstd, const void *inp, const void *w,
                                   const void *b, int N, int C);
void CPU_KERNEL(layernorm_backward)(tg_o o, void *dinp, float *dw, float *db, const void *dout, const void *inp,
                                    const void *w, const float *mean, const float *rstd, int N, int C, bool dacc, bool acc);
void CPU_KERNEL(matmul_forward)(tg_o o, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC);
void CPU_KERNEL(matmul_backward)(tg_o o, void *dinp, float *dw, float *dbias, const void *dout, const void *inp,
                                 const void *w, int N, int C, int OC, bool acc);
void CPU_KERNEL(matmul_backward_dgelu)(tg_o o, void *dpre, float *dpre_bias, float *dw, const void *dout, const void *inp,
                                       const void *w, const void *pre, int N, int C, int OC, bool acc);
void CPU_KERNEL(lmhead_forward)(tg_o o, void *logits, const void *x, const void *wte, int N, int C, int V);
void CPU_KERNEL(lmhead_backward)(tg_o o, void *dx, float *dwte, const void *dlogits, const void *x, const void *wte, int N,
                                 int C, int V, bool acc);
void CPU_KERNEL(attention_forward)(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS,
                                   tg_dropout drop);
void CPU_KERNEL(attention_backward)(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse,
                                    int B, int T, int NH, int HS, tg_dropout drop);
void CPU_KERNEL(gelu_forward)(tg_o o, void *out, const void *inp, size_t n);
void CPU_KERNEL(gelu_backward)(tg_o o, void *dinp, const void *inp, const void *dout, size_t n);
void CPU_KERNEL(bias_residual_add)(tg_o o, void *out, const void *x, const void *bias, const void *res, int N, int C,
                                   tg_dropout drop);
void CPU_KERNEL(bias_residual_layernorm)(tg_o o, void *out, void *ln_out, float *mean, float *rstd, const void *x,
                                         const void *bias, const void *res, const void *w, const void *b, int N, int C,
                                         tg_dropout drop);
void CPU_KERNEL(dropout)(tg_o o, void *out, const void *in, int N, int C, tg_dropout drop);
void CPU_KERNEL(bias_backward)(tg_o o, float *dbias, const void *dout, int N, int C, bool acc);
void CPU_KERNEL(position_forward)(tg_o o, void *out, const void *wpe, int row_start, int N, int T, int C);
void CPU_KERNEL(position_backward)(tg_o o, float *dwpe, const void *dout, int row_start, int N, int T, int C, bool acc);
void CPU_KERNEL(xent_partial)(tg_o o, float *rowmax, float *local_max, float *stats, const void *logits,
                              const int32_t *targets, int N, int V, int n_real, int vocab_start);
void CPU_KERNEL(xent_rescale)(tg_o o, float *stats, const float *local_max, const float *rowmax, int N);
void CPU_KERNEL(xent_finish)(tg_o o, float *losses, void *logits, const float *rowmax, const float *stats,
                             const int32_t *targets, int N, int V, int n_real, int vocab_start, float dloss);
void CPU_KERNEL(xent_fused)(tg_o o, float *losses, void *logits, const int32_t *targets, int N, int V, int n_real,
                            float dloss);
void CPU_KERNEL(loss_accumulate)(tg_o o, tg_step_stats *s, const float *losses, int N);
void CPU_KERNEL(loss_finish)(tg_o o, tg_step_stats *s, int n_micro, float divisor);
void CPU_KERNEL(grad_sumsq)(tg_o o, tg_step_stats *s, const float *g, const tg_spans *spans, int exact);
void CPU_KERNEL(grad_clip_factor)(tg_o o, tg_step_stats *s, int reduced, double max_norm);
void CPU_KERNEL(adamw)(tg_o o, float *p, void *work, const float *g, float *m, float *v, const tg_spans *spans,
                       const tg_adamw_args *a, const tg_step_stats *s);

/* The CPU backend's table in this flavour (kernels/cpu/ops_cpu.c). */
const tg_ops *CPU_KERNEL(ops_table)(void);

/* The kept-and-scaled factor of element i of a dropout site: 0 or 1/(1-p). */
static inline float cpu_dropout_scale(const tg_dropout *drop, uint64_t index) {
    return rng_dropout_scale(drop->p, drop->seed, tg_dropout_stream(drop), index);
}

#endif
