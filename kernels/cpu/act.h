/* The activation element type of the CPU kernels. Every kernel source in
 * kernels/cpu is compiled twice (see the Makefile): as is, for float32, and
 * with TG_CPU_BF16, for bfloat16 storage. Kernels read activation-type
 * buffers through act_load (which widens bf16 to float), compute in float32,
 * and write each stored output once through act_store (which rounds it to
 * bf16), so the bf16 flavour keeps the CUDA bf16 contract: fp32 arithmetic,
 * one rounding per stored output, float32 gradients and statistics. In the
 * float32 flavour both are the identity, so its arithmetic is unchanged. */
#ifndef KERNELS_CPU_ACT_H
#define KERNELS_CPU_ACT_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/dtype.h"
#include "util/err.h"

#ifdef TG_CPU_BF16
typedef uint16_t act_t;
#define ACT_DTYPE TG_BF16
#define CPU_KERNEL(name) cpu_bf16_##name
static inline float act_load(act_t x) { return tg_bf16_to_f32(x); }
static inline act_t act_store(float v) { return tg_f32_to_bf16(v); }
#else
typedef float act_t;
#define ACT_DTYPE TG_F32
#define CPU_KERNEL(name) cpu_##name
static inline float act_load(act_t x) { return x; }
static inline act_t act_store(float v) { return v; }
#endif

/* A float32 view of n activation-type outputs, for kernels that accumulate
 * an output in place over many steps (matrix products, attention): the
 * buffer itself in the float32 flavour; in the bf16 one a float copy (of the
 * current values when `keep`, else uninitialised) that act_view_end rounds
 * into the buffer once and frees. */
static inline float *act_view(act_t *dst, size_t n, bool keep) {
#ifdef TG_CPU_BF16
    float *f = tg_malloc(n * sizeof(float) + 1, "bf16 output view");
    if (keep)
        for (size_t i = 0; i < n; i++) f[i] = act_load(dst[i]);
    return f;
#else
    (void)n;
    (void)keep;
    return dst;
#endif
}

static inline void act_view_end(act_t *dst, float *view, size_t n) {
#ifdef TG_CPU_BF16
    for (size_t i = 0; i < n; i++) dst[i] = act_store(view[i]);
    free(view);
#else
    (void)dst;
    (void)view;
    (void)n;
#endif
}

#endif
