/* Pieces of the tensor-core flash attention's forward (bf16 activations,
 * head sizes that are multiples of 16 up to FM_HS_MAX): the block's warps
 * (4, 16 query rows each per row tile; the rest of the block's shape is
 * flash_fwd_mma.cuh's fm_shape), FM_ROWS rows at a time of a
 * tile moved between global memory and bf16 shared tiles 16 bytes at a
 * time (into shared memory by cp.async), and the reductions over the 4
 * lanes that hold one row of an mma accumulator (kernels/cuda/mma.cuh's
 * layout: row g = lane / 4 is spread over lanes 4g .. 4g + 3). */
#ifndef KERNELS_CUDA_FLASH_MMA_CUH
#define KERNELS_CUDA_FLASH_MMA_CUH

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/mma.cuh"

#define FM_WARPS 4                  /* warps per block, 16 query rows each per row tile */
#define FM_THREADS (32 * FM_WARPS)
#define FM_ROWS (16 * FM_WARPS)     /* query rows per block and row tile; rows per staging */
#define FM_PAD 8                    /* bf16 added to each shared row (see fm_ld) */
#define FM_HS_MAX 128               /* largest head size (registers: HS/2 accumulators per lane) */

/* Shared tiles' leading dimension: rows stay 16-byte aligned (HS % 8 == 0),
 * and the 4-byte offset of FM_PAD spreads the fragment loads' rows (g) and
 * k pairs (t) over distinct banks. */
static __host__ __device__ constexpr int fm_ld(int HS) { return HS + FM_PAD; }

/* Whether p may be read and written 16 bytes at a time. */
static __host__ __device__ __forceinline__ bool fm_aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* 16 bytes from src to dst, both 16-byte aligned: one vector access on the
 * device (a misaligned one faults there, so the emulation refuses it). */
static __device__ __forceinline__ void fm_copy16(void *dst, const void *src) {
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(src);
#elif defined(EMU_CUDA_EMU_H)
    if (!fm_aligned16(dst) || !fm_aligned16(src)) {
        fprintf(stderr, "emu: ERROR fm_copy16: misaligned 16-byte access (%p <- %p)\n", dst, src);
        abort();
    }
    memcpy(dst, src, 16);
#else
    (void)dst; (void)src; /* nvcc's host pass: never called on the host */
#endif
}

/* p[0], p[1] = the two bf16 of v (lo first): one 32-bit store on the device
 * (p is 4-byte aligned: an even element of a row with an even stride). */
static __device__ __forceinline__ void fm_store_pair(__nv_bfloat16 *p, uint32_t v) {
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<uint32_t *>(p) = v;
#else /* the emulation (and nvcc's host pass) */
    p[0] = __ushort_as_bfloat16((unsigned short)(v & 0xffffu));
    p[1] = __ushort_as_bfloat16((unsigned short)(v >> 16));
#endif
}

/* Rows t0 .. t0 + FM_ROWS - 1 of a row-major bf16 matrix (src: its row 0
 * at the wanted column; stride elements from row to row) into the shared
 * tile (FM_ROWS x HS, fm_ld), zero at and past row T (padding rows and
 * keys must be finite: they are multiplied, then masked). vec: src and
 * stride allow 16-byte copies, issued as cp.async (async_copy.cuh): they
 * land after the caller's async_commit and async_wait, and a __syncthreads
 * shows them to the other threads; otherwise, and for the zero rows, plain
 * stores. All FM_THREADS threads take part. */
template <int HS>
static __device__ void fm_stage_async(__nv_bfloat16 *tile, const __nv_bfloat16 *src, size_t stride, int t0, int T, bool vec) {
    constexpr int chunks = HS / 8, ld = fm_ld(HS);
    const __nv_bfloat16 *rows = src + (size_t)t0 * stride;
    for (int e = threadIdx.x; e < FM_ROWS * chunks; e += FM_THREADS) {
        const int r = e / chunks, c = 8 * (e % chunks), t = t0 + r;
        __nv_bfloat16 *d = tile + r * ld + c;
        const __nv_bfloat16 *s = rows + (size_t)r * stride + c;
        if (t < T && vec) {
            async_copy16(d, s);
        } else {
            for (int i = 0; i < 8; i++) d[i] = t < T ? s[i] : __ushort_as_bfloat16(0);
        }
    }
}

/* The reverse: the tile's rows t0 + r < T into dst (row 0 at the column;
 * stride elements per row). */
template <int HS>
static __device__ void fm_unstage(__nv_bfloat16 *dst, size_t stride, const __nv_bfloat16 *tile, int t0, int T, bool vec) {
    constexpr int chunks = HS / 8, ld = fm_ld(HS);
    for (int e = threadIdx.x; e < FM_ROWS * chunks; e += FM_THREADS) {
        const int r = e / chunks, c = 8 * (e % chunks), t = t0 + r;
        if (t >= T) continue;
        const __nv_bfloat16 *s = tile + r * ld + c;
        __nv_bfloat16 *d = dst + (size_t)t * stride + c;
        if (vec) {
            fm_copy16(d, s);
        } else {
            for (int i = 0; i < 8; i++) d[i] = s[i];
        }
    }
}

/* Max and sum over the 4 lanes (lane % 4) that hold one accumulator row. */
static __device__ __forceinline__ float fm_row_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
static __device__ __forceinline__ float fm_row_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

#endif
