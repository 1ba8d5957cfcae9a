/* Element types of the buffers kernels and collectives move: float32, and
 * bfloat16 (the top half of a float32, rounded to nearest even). */
#ifndef UTIL_DTYPE_H
#define UTIL_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum { TG_F32, TG_BF16 } tg_dtype;

static inline size_t tg_dtype_bytes(tg_dtype t) { return t == TG_BF16 ? 2 : 4; }
static inline const char *tg_dtype_name(tg_dtype t) { return t == TG_BF16 ? "bf16" : "fp32"; }

/* Host conversions (the device has its own intrinsics); NaN stays NaN. */
static inline float tg_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint16_t tg_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

#endif
