/* 2^x in one MUFU.EX2 (ex2.approx.ftz.f32: about 2 ulp; results below
 * FLT_MIN flushed to +0), for the softmaxes of the flash forward and
 * backward and the cross-entropy. exp2f and expf compile to ex2.approx.f32 without ftz (the
 * PTX of these kernels before), which ptxas must wrap in extra instructions
 * to keep denormal results (a compare and two predicated multiplies, as
 * NVIDIA's compilers lower it; not disassembled here, where no disassembler
 * is installed), and expf adds a multiply by log2(e): several instructions
 * per element, where these kernels' inner loops spend a handful. A
 * probability under 2^-126 is 0 to bf16 and to a float32 sum alike. The
 * emulation computes exp2f and flushes the same way. */
#ifndef KERNELS_CUDA_EXP2_FTZ_CUH
#define KERNELS_CUDA_EXP2_FTZ_CUH

#include <math.h>

#define EXP2_LOG2E 1.44269504088896341f /* e^x = 2^(x log2(e)) */

static __device__ __forceinline__ float exp2_ftz(float x) {
#if defined(__CUDA_ARCH__)
    return __nvvm_ex2_approx_ftz_f(x); /* NVVM's builtin: visible to its optimizer, unlike an asm */
#else
    const float y = exp2f(x);
    return y < 1.17549435e-38f ? 0.0f : y; /* FLT_MIN; NaN passes */
#endif
}

#endif
