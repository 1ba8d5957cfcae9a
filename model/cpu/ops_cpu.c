/* The CPU backend's table: host memory and the float32 kernels. */
#include <stdlib.h>
#include <string.h>

#include "model/cpu/kernels.h"
#include "model/ops.h"
#include "util/err.h"

static void *host_alloc(size_t bytes, const char *what) {
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) {
        tg_err e;
        tg_fail(&e, "out of memory allocating %zu bytes for %s", bytes, what);
        tg_die("train_gpt", &e);
    }
    return p;
}

static void host_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
static void host_zero(void *p, size_t bytes) { memset(p, 0, bytes); }

static const tg_ops CPU_OPS = {
    .name = "cpu",
    .alloc = host_alloc,
    .free = free,
    .upload = host_copy,
    .download = host_copy,
    .zero = host_zero,
    .encoder_forward = cpu_encoder_forward,
    .encoder_backward = cpu_encoder_backward,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .matmul_forward = cpu_matmul_forward,
    .matmul_backward = cpu_matmul_backward,
    .lmhead_forward = cpu_lmhead_forward,
    .lmhead_backward = cpu_lmhead_backward,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .add = cpu_add,
    .bias_residual_add = cpu_bias_residual_add,
    .dropout = cpu_dropout,
    .bias_backward = cpu_bias_backward,
    .position_forward = cpu_position_forward,
    .position_backward = cpu_position_backward,
    .xent_rowmax = cpu_xent_rowmax,
    .xent_stats = cpu_xent_stats,
    .xent_finish = cpu_xent_finish,
    .sum_squares = cpu_sum_squares,
    .scale = cpu_scale,
    .adamw = cpu_adamw,
};

const tg_ops *ops_cpu(void) { return &CPU_OPS; }
