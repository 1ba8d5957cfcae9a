/* One warp's bf16 tensor-core product, D[16x8] += A[16x16] B[16x8] with
 * float32 accumulation (PTX mma.sync.aligned.m16n8k16.row.col.f32.bf16),
 * and the fragment layout of the PTX ISA it expects. With g = lane / 4 and
 * t = lane % 4, each 32-bit register holds two bf16, the lower column (or
 * k) index in the low half:
 *   a[0]: A[g][2t..2t+1]    a[1]: A[g+8][2t..2t+1]
 *   a[2]: A[g][2t+8..2t+9]  a[3]: A[g+8][2t+8..2t+9]
 *   b[0]: B[2t..2t+1][g]    b[1]: B[2t+8..2t+9][g]
 *   d[0..1]: D[g][2t..2t+1] d[2..3]: D[g+8][2t..2t+1]
 * Under the emulation (tests/emu) the instruction is a stand-in that
 * exchanges the fragments across the warp in exactly this layout. */
#ifndef KERNELS_CUDA_MMA_CUH
#define KERNELS_CUDA_MMA_CUH

#include <stdint.h>

static __device__ __forceinline__ void mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2]) {
#if defined(__CUDA_ARCH__)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(EMU_CUDA_EMU_H)
    emu_mma_m16n8k16_bf16(d, a, b);
#else
    (void)d; (void)a; (void)b; /* nvcc's host pass: never called on the host */
#endif
}

#endif
