/* dq summed in a fixed order without atomics, for the attention backward
 * kernels that own a block of keys and so see every query tile at or below
 * its diagonal (flash_bwd_wgmma.cu's 128-key blocks, flash_bwd_fused.cuh's
 * 64-key ones): each block writes its share of dq for each such query tile
 * (64 rows, dS K over the block's keys, float32, unscaled) into a slot of
 * its own in the kernel scratch; flash_dq_reduce_kernel then adds each
 * query row's slots in key-block order, so that dq has the same bits run
 * after run and whatever the blocks' order on the device.
 * KB: query tiles a key block spans (1 for 64 keys, 2 for 128). */
#ifndef KERNELS_CUDA_DQ_SLOTS_CUH
#define KERNELS_CUDA_DQ_SLOTS_CUH

#include <cuda_bf16.h>

#include "kernels/cuda/flash.cuh"
#include "kernels/cuda/flash_bwd_mma.cuh"

#define DQS_ROWS 64 /* query rows a slot */

/* The floats of one slot: 64 rows of HS, row-major. */
template <int HS>
static __host__ __device__ constexpr size_t dqs_slot_floats() {
    return (size_t)DQS_ROWS * HS;
}

/* The slot of key block kb (kb <= qt / KB) in query tile qt, counted from
 * a pair's first: the tiles before qt hold sum over i < qt of (i / KB + 1)
 * slots, which with m = qt / KB and r = qt % KB is qt + KB m (m - 1) / 2
 * + r m. */
template <int KB>
static __host__ __device__ __forceinline__ size_t dqs_slot(int qt, int kb) {
    const size_t m = (size_t)(qt / KB), r = (size_t)(qt % KB);
    return (size_t)qt + KB * (m * m - m) / 2 + r * m + (size_t)kb;
}
/* The slots of one pair at length T. */
template <int KB>
static __host__ __device__ __forceinline__ size_t dqs_slots(int T) {
    return dqs_slot<KB>((T + DQS_ROWS - 1) / DQS_ROWS, 0);
}
/* The scratch bytes of one pair's slots. */
template <int KB>
static size_t dqs_pair_bytes(int T, int HS) {
    return dqs_slots<KB>(T) * (size_t)DQS_ROWS * (size_t)HS * sizeof(float);
}

/* The bytes of one pair's arrival counts, an int per query tile (the
 * kernels that sum the slots themselves: flash_bwd_wgmma.cu's SUM). */
static inline size_t dqs_counts_bytes(int T) { return (size_t)((T + DQS_ROWS - 1) / DQS_ROWS) * sizeof(int); }

/* Two adjacent floats (8-byte aligned): one 8-byte store on the device. */
static __device__ __forceinline__ void dqs_store2(float *dst, float x, float y) {
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<float2 *>(dst) = make_float2(x, y);
#else
    dst[0] = x, dst[1] = y;
#endif
}
/* Four adjacent floats (16-byte aligned): one 16-byte load on the device,
 * from L2 (ld.global.cg): other blocks wrote them, and the summing block's
 * SM may hold stale lines of the scratch in its L1. */
static __device__ __forceinline__ void dqs_load4(float v[4], const float *src) {
#if defined(__CUDA_ARCH__)
    const float4 f = __ldcg(reinterpret_cast<const float4 *>(src));
    v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
#else
    for (int i = 0; i < 4; i++) v[i] = src[i];
#endif
}

/* Four adjacent columns of one query row: its n slots from at (key block
 * 0's) on, summed in float32 in key-block order, times scale, as bf16 at
 * dst (4 columns, 8-byte aligned). Every sum of the slots is this one:
 * the same bits whichever kernel or block runs it. */
template <int HS>
static __device__ __forceinline__ void dqs_sum_store4(__nv_bfloat16 *dst, const float *at, int n, float scale) {
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 4
    for (int kb = 0; kb < n; kb++, at += dqs_slot_floats<HS>()) {
        float v[4];
        dqs_load4(v, at);
        for (int i = 0; i < 4; i++) sum[i] += v[i];
    }
    fb_store_pair(dst, mma_pack(sum[0] * scale, sum[1] * scale));
    fb_store_pair(dst + 2, mma_pack(sum[2] * scale, sum[3] * scale));
}

/* The calling thread's earlier stores made visible to every block, and
 * its later loads made to see what other blocks made visible so: around
 * dqs_count, as CUTLASS's barrier does, fence.acq_rel.gpu (__threadfence
 * is fence.sc.gpu, which also orders fences among themselves: more than
 * this needs). In the emulation gcc's builtins, which its race check
 * follows (tests/emu/emu_race_atomic.cpp). */
static __device__ __forceinline__ void dqs_fence() {
#if defined(__CUDA_ARCH__)
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}
/* One more arrival at *count; what it held before (atomicAdd). */
static __device__ __forceinline__ int dqs_count(int *count) {
#if defined(__CUDA_ARCH__)
    return atomicAdd(count, 1);
#else
    return __atomic_fetch_add(count, 1, __ATOMIC_RELAXED);
#endif
}

namespace {

/* dq of the round's pairs p0 .. p0 + np: each row's slots (key blocks 0 ..
 * its query tile / KB, in that order) summed in float32, times scale, as
 * bf16 into dqkv's q columns; one thread per four adjacent columns of a
 * row, a pair a grid row (blockIdx.y), so that the index math is 32-bit
 * and divides by constants only (a 64-bit division by T a thread, where
 * every thread reads at most T / 64 / KB + 1 slots, would cost more
 * instructions than its loads); 16-byte loads (the slots are 256-aligned,
 * a row's columns 4-aligned), several slots' loads in flight. Any device. */
template <int HS, int KB>
__global__ void flash_dq_reduce_kernel(__nv_bfloat16 *dqkv, const float *dq_slots, int p0, int T, int NH, float scale) {
    constexpr size_t slot_floats = dqs_slot_floats<HS>();
    const int j = (int)blockIdx.y, e = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (e >= T * (HS / 4)) return;
    const int c = 4 * (e % (HS / 4)), t = e / (HS / 4), qt = t / DQS_ROWS, p = p0 + j, b = p / NH, h = p % NH;
    const float *at = dq_slots + ((size_t)j * dqs_slots<KB>(T) + dqs_slot<KB>(qt, 0)) * slot_floats + (t % DQS_ROWS) * HS + c;
    dqs_sum_store4<HS>(dqkv + ((size_t)b * T + t) * 3 * NH * HS + (size_t)h * HS + c, at, qt / KB + 1, scale);
}

} // namespace

/* flash_dq_reduce_kernel's grid of 256-thread blocks for np pairs (at
 * most FL_MAX_PAIRS, a round's): a row of blocks a pair (the launch is
 * its callers': the emulation finds launches in .cu files). */
static inline dim3 dqs_reduce_grid(int np, int T, int HS) {
    return dim3((unsigned)(((size_t)T * (HS / 4) + 255) / 256), (unsigned)np);
}

#endif
