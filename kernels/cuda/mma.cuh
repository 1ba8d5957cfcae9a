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
 * The loaders take whole 8x8 quarters by ldmatrix (four per instruction:
 * one shared-memory request per 8x8 matrix, and the transposed loads of B
 * stored as it is used cost no more than the others).
 * Under the emulation (tests/emu) both instructions are stand-ins that
 * exchange addresses or fragments across the warp in exactly the PTX
 * ISA's layouts (tests/emu/test_mma.cu). */
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

/* Two floats rounded to bf16 (nearest even) as one register: on the device
 * one cvt.rn.bf16x2.f32 (its first source goes to the high half), where the
 * two __float2bfloat16_rn gave two cvt.rn.bf16.f32 and a mov to pair them
 * in the PTX (whether ptxas fused those was not visible: no disassembler
 * here). */
static __device__ __forceinline__ uint32_t mma_pack(float lo, float hi) {
#if defined(__CUDA_ARCH__)
    uint32_t pair;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(pair) : "f"(hi), "f"(lo));
    return pair;
#else
    return mma_pair(__float2bfloat16_rn(lo), __float2bfloat16_rn(hi));
#endif
}

/* ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: four 8x8 bf16
 * matrices from shared memory in one warp-wide load. Lane 8m + i gives the
 * address of row i of matrix m (16 bytes, 16-byte aligned); lane 4i + j
 * gets in r[m] elements 2j, 2j + 1 of row i of matrix m, or with trans of
 * column i (rows 2j, 2j + 1): exactly the A, B and accumulator layouts
 * above, one 8x8 quarter per register. Every lane of the warp must run it
 * (warp-uniform control flow). Under the emulation: emu::ldmatrix. */
template <bool trans>
static __device__ __forceinline__ void mma_ldmatrix_x4(uint32_t r[4], const __nv_bfloat16 *row) {
#if defined(__CUDA_ARCH__)
    const unsigned at = (unsigned)__cvta_generic_to_shared(row);
    if (trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(at));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(at));
#elif defined(EMU_CUDA_EMU_H)
    ::emu::ldmatrix(r, 4, trans, row);
#else
    (void)r; (void)row; /* nvcc's host pass: never called on the host */
#endif
}

/* The 16 x 16 block of a tile at rows 8 (m & 1) + i and columns 8 (m >> 1):
 * the row lane 8m + i addresses for quarters in A's register order (rows
 * 0-7 then 8-15 of columns 0-7, then of columns 8-15). */
static __device__ __forceinline__ const __nv_bfloat16 *mma_quarter_row(const __nv_bfloat16 *tile, int ld) {
    const int lane = threadIdx.x & 31, m = lane >> 3, i = lane & 7;
    return tile + (8 * (m & 1) + i) * ld + 8 * (m >> 1);
}

/* A[r][c] = tile[r * ld + c], r, c < 16 (row-major; ld a multiple of 8,
 * tile 16-byte aligned, in shared memory). */
static __device__ __forceinline__ void mma_load_a(uint32_t a[4], const __nv_bfloat16 *tile, int ld) {
    mma_ldmatrix_x4<false>(a, mma_quarter_row(tile, ld));
}

/* A[r][c] = tile[c * ld + r], r, c < 16: the transpose of a stored 16 x
 * 16 block (dS from dS^T), read by ldmatrix's trans. Quarter m of A's
 * register order (rows 8 (m & 1), columns 8 (m >> 1)) is the stored block
 * at rows 8 (m >> 1), columns 8 (m & 1). */
static __device__ __forceinline__ void mma_load_a_transposed(uint32_t a[4], const __nv_bfloat16 *tile, int ld) {
    const int lane = threadIdx.x & 31, m = lane >> 3, i = lane & 7;
    mma_ldmatrix_x4<true>(a, tile + (8 * (m >> 1) + i) * ld + 8 * (m & 1));
}

/* B fragments of two 8-column blocks, b[h][.] for columns n = 8h .. 8h + 7,
 * with B[k][n] = tile[n * ld + k], k < 16: each output column n is a stored
 * row (K in Q K^T, V in dO V^T). Quarters: rows n 0-7 at k 0-7 and 8-15,
 * then rows 8-15, so the quarter rows are the transpose of A's order. */
static __device__ __forceinline__ void mma_load_b_rows_x2(uint32_t b[2][2], const __nv_bfloat16 *tile, int ld) {
    const int lane = threadIdx.x & 31, m = lane >> 3, i = lane & 7;
    uint32_t r[4];
    mma_ldmatrix_x4<false>(r, tile + (8 * (m >> 1) + i) * ld + 8 * (m & 1));
    b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
}

/* B fragments of two 8-column blocks as above, with B[k][n] = tile[k * ld
 * + n]: B stored as it is used (V in P V, K in dS K, Q in dS^T Q), read
 * transposed by ldmatrix: quarters at k 0-7, 8-15 of columns 0-7, then of
 * columns 8-15 (A's order). */
static __device__ __forceinline__ void mma_load_b_cols_x2(uint32_t b[2][2], const __nv_bfloat16 *tile, int ld) {
    uint32_t r[4];
    mma_ldmatrix_x4<true>(r, mma_quarter_row(tile, ld));
    b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
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
