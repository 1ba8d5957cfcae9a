/* 2^x for x <= 0 on the FMA and integer units, where exp2_ftz takes the
 * SFU (MUFU.EX2: 16 a clock an SM, against 128 FMAs): the softmax's
 * exponentials at head size 64 keep the SFU about as busy as the tensor
 * cores (a count of the TMA forward's SASS: 66 MUFU a warp a tile, 8
 * cycles each), so FlashAttention-4 computes a share of them this way.
 *
 *   x = max(x, -127); n = round(x) (by adding 1.5 2^23: n lands in the
 *   float's low mantissa bits); f = x - n in [-1/2, 1/2];
 *   2^f ~ 1 + f (c1 + f (c2 + f c3)), a cubic fitted to the relative
 *   error (iteratively reweighted least squares, tests/kernels/attention.c
 *   checks the bound: under 1.1e-4, against bf16's 3.9e-3 half-step);
 *   2^x = that float with n added to its exponent: (bits of the sum) << 23
 *   + its bits, one integer shift-add, no conversion instruction.
 *
 * Eight instructions (FMNMX, 3 FADD, 3 FFMA, one LEA), every one on a pipe
 * that is not the SFU's. -inf gives exactly 0 (n = -127, f = 0, 2^f =
 * 1.0: the exponent field 127 - 127), 0 exactly 1; below 2^-126 the
 * results are tiny positive numbers (no flush), where exp2_ftz flushes.
 * Only for x <= 0: a NaN gives 0 (fmaxf drops it; exp2_ftz keeps it, and
 * a NaN score reaches the row's max and so its other exponentials), and
 * x >= 128 carries into the sign bit.
 * Plain float arithmetic: the emulation computes the device's bits.
 * Usable from C too (the test's bound). */
#ifndef KERNELS_CUDA_EXP2_POLY_CUH
#define KERNELS_CUDA_EXP2_POLY_CUH

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define EXP2_POLY_FN static __host__ __device__ __forceinline__
#else
#define EXP2_POLY_FN static inline
#endif

#define EXP2_POLY_C1 0.693282902f
#define EXP2_POLY_C2 0.242210373f
#define EXP2_POLY_C3 0.0550085828f
#define EXP2_POLY_ROUND 12582912.0f /* 1.5 2^23: x + it rounds x to an integer in the low mantissa bits */

EXP2_POLY_FN float exp2_poly(float x) {
    x = fmaxf(x, -127.0f);
    const float shifted = x + EXP2_POLY_ROUND, n = shifted - EXP2_POLY_ROUND, f = x - n;
    const float p = fmaf(f, fmaf(f, fmaf(f, EXP2_POLY_C3, EXP2_POLY_C2), EXP2_POLY_C1), 1.0f);
    uint32_t pb, nb;
    memcpy(&pb, &p, 4);
    memcpy(&nb, &shifted, 4); /* n in the low bits, two's complement: << 23 leaves n << 23 mod 2^32 */
    const uint32_t r = pb + (nb << 23);
    float y;
    memcpy(&y, &r, 4);
    return y;
}

#endif
