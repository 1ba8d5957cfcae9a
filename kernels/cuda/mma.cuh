/* One warp's bf16 tensor-core product, D[16x8] += A[16x16] B[16x8] with
 * float32 accumulation (PTX mma.sync.aligned.m16n8k16.row.col.f32.bf16),
 * the fragment layout of the PTX ISA it expects, and loaders that build the
 * fragments from bf16 tiles in shared memory. With g = lane / 4 and
 * t = lane % 4, each 32-bit register holds two bf16, the lower column (or
 * k) index in the low half:
 *   a[0]: A[g][2t..2t+1]    a[1]: A[g+8][2t..2t+1]
 *   a[2]: A[g][2t+8..2t+9]  a[3]: A[g+8][2t+8..2t+9]
 *   b[0]: B[2t..2t+1][g]    b[1]: B[2t+8..2t+9][g]
 *   d[0..1]: D[g][2t..2t+1] d[2..3]: D[g+8][2t..2t+1]
 * So the accumulators of two products side by side (D over columns 0..7
 * and 8..15) are, packed to bf16 pairs, exactly the A fragment of a 16x16
 * matrix: mma_a_from_accumulators (flash attention's P @ V without a trip
 * through shared memory).
 * Under the emulation (tests/emu) the instruction is a stand-in that
 * exchanges the fragments across the warp in exactly this layout; the
 * loaders are plain code and run as they are (tests/emu/test_mma.cu). */
#ifndef KERNELS_CUDA_MMA_CUH
#define KERNELS_CUDA_MMA_CUH

#include <cuda_bf16.h>
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

/* Two bf16 as one register, lo in the low half. */
static __device__ __forceinline__ uint32_t mma_pair(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    return (uint32_t)__bfloat16_as_ushort(lo) | ((uint32_t)__bfloat16_as_ushort(hi) << 16);
}

/* Two floats rounded to bf16 (nearest even) as one register. */
static __device__ __forceinline__ uint32_t mma_pack(float lo, float hi) {
    return mma_pair(__float2bfloat16_rn(lo), __float2bfloat16_rn(hi));
}

/* p[0], p[1] as one register: one 32-bit shared-memory load on the device
 * (p is 4-byte aligned: an even element of a row with an even stride). */
static __device__ __forceinline__ uint32_t mma_adjacent(const __nv_bfloat16 *p) {
#if defined(__CUDA_ARCH__)
    return *reinterpret_cast<const uint32_t *>(p);
#else
    return mma_pair(p[0], p[1]);
#endif
}

/* A[r][c] = tile[r * ld + c], r, c < 16 (row-major; ld even). */
static __device__ __forceinline__ void mma_load_a(uint32_t a[4], const __nv_bfloat16 *tile, int ld) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const __nv_bfloat16 *r0 = tile + g * ld + 2 * t, *r8 = r0 + 8 * ld;
    a[0] = mma_adjacent(r0);
    a[1] = mma_adjacent(r8);
    a[2] = mma_adjacent(r0 + 8);
    a[3] = mma_adjacent(r8 + 8);
}

/* A[r][c] = tile[c * ld + r], r, c < 16: the transpose of a row-major tile
 * (dS^T, P^T in attention's backward). */
static __device__ __forceinline__ void mma_load_a_transposed(uint32_t a[4], const __nv_bfloat16 *tile, int ld) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const __nv_bfloat16 *c0 = tile + 2 * t * ld + g; /* rows 2t, 2t+1 of the stored tile, column g */
    a[0] = mma_pair(c0[0], c0[ld]);
    a[1] = mma_pair(c0[8], c0[ld + 8]);
    a[2] = mma_pair(c0[8 * ld], c0[9 * ld]);
    a[3] = mma_pair(c0[8 * ld + 8], c0[9 * ld + 8]);
}

/* B[k][n] = tile[n * ld + k], k < 16, n < 8: each output column n is a
 * stored row (K in Q K^T, V in dO V^T). ld even. */
static __device__ __forceinline__ void mma_load_b_rows(uint32_t b[2], const __nv_bfloat16 *tile, int ld) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const __nv_bfloat16 *p = tile + g * ld + 2 * t;
    b[0] = mma_adjacent(p);
    b[1] = mma_adjacent(p + 8);
}

/* B[k][n] = tile[k * ld + n], k < 16, n < 8: B stored as it is used (V in
 * P V, K in dS K, Q in dS^T Q). */
static __device__ __forceinline__ void mma_load_b_cols(uint32_t b[2], const __nv_bfloat16 *tile, int ld) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const __nv_bfloat16 *p = tile + 2 * t * ld + g;
    b[0] = mma_pair(p[0], p[ld]);
    b[1] = mma_pair(p[8 * ld], p[9 * ld]);
}

/* The A fragment of the 16x16 matrix whose columns 0..7 are the
 * accumulators lo and columns 8..15 the accumulators hi, rounded to bf16. */
static __device__ __forceinline__ void mma_a_from_accumulators(uint32_t a[4], const float lo[4], const float hi[4]) {
    a[0] = mma_pack(lo[0], lo[1]);
    a[1] = mma_pack(lo[2], lo[3]);
    a[2] = mma_pack(hi[0], hi[1]);
    a[3] = mma_pack(hi[2], hi[3]);
}

#endif
