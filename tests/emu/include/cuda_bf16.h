/* Emulated cuda_bf16.h (tests/emu): bfloat16 storage and the conversions
 * the kernels use, round to nearest even as on the device. Deliberately
 * minimal (no arithmetic operators), so a kernel relying on more fails to
 * compile here rather than silently doing something else. */
#ifndef EMU_CUDA_BF16_H
#define EMU_CUDA_BF16_H
#include <stdint.h>
#include <string.h>

struct __nv_bfloat16 {
    unsigned short __x;
};
typedef __nv_bfloat16 nv_bfloat16;

static inline float __bfloat162float(__nv_bfloat16 h) {
    uint32_t u = (uint32_t)h.__x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    __nv_bfloat16 h;
    if ((u & 0x7fffffffu) > 0x7f800000u) { /* NaN: the device returns the canonical 0x7fff */
        h.__x = 0x7fff;
        return h;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    h.__x = (unsigned short)(u >> 16);
    return h;
}
static inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) {
    __nv_bfloat16 h;
    h.__x = u;
    return h;
}
#endif
