/* The CPU backend's table: host memory and the kernels of kernels/cpu/kernels.h,
 * which already have the ops.h calling form. Like the kernels, this file is
 * compiled once per activation type (kernels/cpu/act.h): cpu_ops_table() is the
 * float32 backend, cpu_bf16_ops_table() bf16 storage emulated over float32
 * arithmetic (for testing the bf16 paths without a GPU). */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kernels.h"
#include "kernels/ops.h"
#include "util/err.h"

#ifdef TG_CPU_BF16
#define DEVICE_NAME "host CPU, bf16 storage emulated over float32 kernels (for tests; slow)"
#else
#define DEVICE_NAME "host CPU, float32"
#endif

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
static void host_timer_begin(tg_o o) { (void)o; }
static double host_timer_end_ms(tg_o o) { (void)o; return -1.0; }
static size_t host_mem_peak(tg_o o) { (void)o; return 0; }
static double host_peak_tflops(tg_o o) { (void)o; return 0.0; }

/* dst == src only happens for float32, where the cast is the identity. */
static void cast_params(tg_o o, void *dst, const float *src, size_t n) {
    (void)o;
    if (dst == (const void *)src) return;
    act_t *d = dst;
    for (size_t i = 0; i < n; i++) d[i] = act_store(src[i]);
}

static void download_floats(tg_o o, float *dst, const void *src, size_t n) {
    (void)o;
    const act_t *s = src;
    for (size_t i = 0; i < n; i++) dst[i] = act_load(s[i]);
}

static const tg_ops TABLE = {
    .name = "cpu",
    .device = DEVICE_NAME,
    .act = ACT_DTYPE,
    .ctx = NULL,
    .workspace_bytes = 0,
    .mem = {NULL, comm_host_copy, comm_host_copy, comm_host_copy, 0, NULL, NULL},
    .alloc = host_alloc,
    .free = host_free,
    .upload = host_copy,
    .download = host_copy,
    .zero = host_zero,
    .cast_params = cast_params,
    .download_floats = download_floats,
    .timer_begin = host_timer_begin,
    .timer_end_ms = host_timer_end_ms,
    .mem_peak = host_mem_peak,
    .peak_tflops = host_peak_tflops,
    .destroy = NULL,
    .encoder_forward = CPU_KERNEL(encoder_forward),
    .encoder_backward = CPU_KERNEL(encoder_backward),
    .layernorm_forward = CPU_KERNEL(layernorm_forward),
    .layernorm_backward = CPU_KERNEL(layernorm_backward),
    .matmul_forward = CPU_KERNEL(matmul_forward),
    .matmul_backward = CPU_KERNEL(matmul_backward),
    .matmul_backward_dgelu = CPU_KERNEL(matmul_backward_dgelu),
    .lmhead_forward = CPU_KERNEL(lmhead_forward),
    .lmhead_backward = CPU_KERNEL(lmhead_backward),
    .attention_forward = CPU_KERNEL(attention_forward),
    .attention_backward = CPU_KERNEL(attention_backward),
    .gelu_forward = CPU_KERNEL(gelu_forward),
    .gelu_backward = CPU_KERNEL(gelu_backward),
    .bias_residual_add = CPU_KERNEL(bias_residual_add),
    .bias_residual_layernorm = CPU_KERNEL(bias_residual_layernorm),
    .dropout = CPU_KERNEL(dropout),
    .bias_backward = CPU_KERNEL(bias_backward),
    .position_forward = CPU_KERNEL(position_forward),
    .position_backward = CPU_KERNEL(position_backward),
    .xent_partial = CPU_KERNEL(xent_partial),
    .xent_rescale = CPU_KERNEL(xent_rescale),
    .xent_finish = CPU_KERNEL(xent_finish),
    .xent_fused = CPU_KERNEL(xent_fused),
    .loss_accumulate = CPU_KERNEL(loss_accumulate),
    .loss_finish = CPU_KERNEL(loss_finish),
    .grad_sumsq = CPU_KERNEL(grad_sumsq),
    .grad_clip_factor = CPU_KERNEL(grad_clip_factor),
    .adamw = CPU_KERNEL(adamw),
};

const tg_ops *CPU_KERNEL(ops_table)(void) { return &TABLE; }
