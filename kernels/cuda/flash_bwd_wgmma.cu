/* Fused causal attention, backward, on Hopper's warpgroup MMA (sm_90a
 * wgmma; kernels/cuda/wgmma.cuh): bf16, head sizes 64, 96 and 128, no
 * dropout. The first step of the FlashAttention-3 backward (issue 36):
 * with kernels.attention = wgmma, flash_bwd.cu runs D = rowsum(dout * out)
 * as before, then this kernel instead of the mma.sync dq and dk, dv
 * kernels: five products a tile where those do seven. The arithmetic of
 * the mma.sync kernels (flash_bwd_mma.cuh's fb_ds for the probabilities
 * and dS, bf16 roundings of P and dS before the second products, float32
 * accumulation, dq and dk scaled at the store), so dk and dv are theirs
 * within the tensor cores' internal orders, and dq within float32's
 * rounding of its sum in another order.
 *
 * One block: one warpgroup (4 warps, 128 threads) owning 64 keys of one
 * pair, warp w keys 16w .. 16w + 15. K and V stay in shared memory; the
 * query tiles of 64 rows, from the diagonal's to T, pass through two
 * stages of Q and dout (cp.async: the next tile lands while the current
 * one is used). A [64 x HS] tile is kernels/cuda/head_tiles.cuh's: column
 * chunks of 64 under the 128B swizzle, at head size 96 a last chunk of 32
 * under the 64B swizzle. Per query tile:
 *   S^T = K Q^T and dP^T = V dout^T by wgmma_ss (all four K-major, N = 64
 *     queries; k16 step j reads chunk j / 4): keys are the accumulators'
 *     rows, so the query rows' statistics (lse and D, staged beside the
 *     tile) are per column;
 *   P^T and dS^T by fb_ds, rounded to bf16 and packed straight from the
 *     accumulators into A fragments (mma_a_from_accumulators);
 *   dV += P^T dout and dK += dS^T Q by wgmma_rs, dout and Q read MN-major
 *     (the query as k, the head's columns as n: one product per chunk, N
 *     = 64 or 32; ht_rs_mn);
 *   DQ: dS^T stored to shared memory (one 64 x 64 tile under the 128B
 *     swizzle at every head size), and the tile's share of dq, dS K, by
 *     wgmma_ss with both operands MN-major (dS^T as [key][query], K's
 *     chunk as [key][column]), one chunk at a time into 32 accumulators
 *     (chunk 0 with dV and dK, a second in a group of its own), written
 *     as float32 to its own slot of the scratch (one 64 x HS slot per key
 *     tile and query tile at or below the diagonal); flash_dq_reduce_kernel
 *     then sums each query row's slots in key-tile order: dq in a fixed
 *     order, no atomics, the same bits run after run. Without DQ (a
 *     scratch too small for one pair's slots, or head size 128: bw_dq)
 *     flash_bwd.cu runs the mma.sync dq kernel instead.
 * ptxas (sm_90a, CUDA 13.0): DQ at 64 226 registers, at 96 248; without DQ
 * 175 at 64, 216 at 96, 245 at 128; none spills. DQ at 128 spilled 96 to
 * 124 bytes at 254 registers (dk and dv alone are 128), so it is not built.
 * Not yet here: TMA loads on mbarriers, a producer warp, two consumer
 * warpgroups, dq reduced without the trip through global memory.
 *
 * Builds: the kernel's body needs sm_90a (__CUDA_ARCH_FEAT_SM90_ALL); for
 * other device architectures it is a trap, and flash_bwd.cu launches it
 * only on compute capability 9.0. Under the emulation (tests/emu) it runs
 * on wgmma.cuh's stand-ins. */
#include "kernels/cuda/flash_bwd_wgmma.cuh"

#include "kernels/cuda/flash_bwd_mma.cuh"
#include "kernels/cuda/head_tiles.cuh"
#include "kernels/cuda/mbarrier.cuh"
#include "kernels/cuda/smem_layout.h"
#include "kernels/cuda/wgmma.cuh"

namespace {

#define BW_KEYS 64     /* keys per block: one warpgroup */
#define BW_ROWS 64     /* query rows per staged tile */
#define BW_THREADS 128 /* one warpgroup */

/* The bytes of a [64 x HS] bf16 tile (head_tiles.cuh's chunks) and the
 * floats of a dq slot; shared memory: K, V, two stages of Q and dout, the
 * 64 x 64 dS^T tile, +1024: the tiles start 1024-aligned (base offset 0
 * under either swizzle). */
template <int HS>
static __host__ __device__ constexpr uint32_t bw_tile_bytes() { return head_tile<HS>::template bytes<BW_ROWS>(); }
template <int HS>
static __host__ __device__ constexpr size_t bw_slot_floats() { return (size_t)BW_ROWS * HS; }
template <int HS>
static __host__ __device__ constexpr int bw_shared_bytes() { return (int)(6 * bw_tile_bytes<HS>() + bw_tile_bytes<64>() + 1024); }

/* Whether the kernel takes dq's shares at head size HS: at 64 and 96; at
 * 128, dk and dv alone take 128 registers, and with dq's (even one chunk's
 * 32 at a time, in a commit group of its own after dk, dv) ptxas spilled
 * 96 to 124 bytes, so there dq is the mma.sync kernel's. */
template <int HS>
static __host__ __device__ constexpr bool bw_dq() { return HS <= 96; }

/* The slots of a pair's dq shares: key tile kt of query tile qt (kt <=
 * qt) at slot qt (qt + 1) / 2 + kt, 64 x HS float32 each. */
static __host__ __device__ __forceinline__ size_t bw_slot(int qt, int kt) { return (size_t)qt * (qt + 1) / 2 + (size_t)kt; }
static __host__ __device__ __forceinline__ size_t bw_slots(int T) {
    const int tiles = (T + BW_ROWS - 1) / BW_ROWS;
    return bw_slot(tiles, 0);
}

/* Two adjacent floats (8-byte aligned): one 8-byte access on the device. */
static __device__ __forceinline__ void bw_store2(float *dst, float x, float y) {
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<float2 *>(dst) = make_float2(x, y);
#else
    dst[0] = x, dst[1] = y;
#endif
}
static __device__ __forceinline__ void bw_load2(float v[2], const float *src) {
#if defined(__CUDA_ARCH__)
    const float2 f = *reinterpret_cast<const float2 *>(src);
    v[0] = f.x, v[1] = f.y;
#else
    v[0] = src[0], v[1] = src[1];
#endif
}

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define BW_BODY 1 /* the kernel's body: sm_90a, or the emulation (and nvcc's host pass) */
#endif

#if defined(BW_BODY)
/* Rows t0 .. t0 + 63 of a row-major bf16 matrix (src: its row 0 at the
 * head's column, 16-byte aligned; stride elements per row) into a [64 x
 * HS] tile by cp.async (landing after async_commit and async_wait), zero
 * at and past T (padding rows are multiplied, then masked: they must be
 * finite); each 8 columns where head_tiles.cuh's ht_offset puts them. The
 * caller makes the rows visible to the tensor core
 * (fence_proxy_async_shared, a barrier). */
template <int HS>
static __device__ void bw_stage(unsigned char *tile, const __nv_bfloat16 *src, size_t stride, int t0, int T) {
    ht_stage<HS, BW_ROWS, BW_THREADS>(tile, src, stride, t0, T, true);
}

/* The statistics of query rows q0 .. q0 + 63 (lse of the pair's rows, D of
 * the round's): lse log2(e) and D, 0 past T (fb_row_stats' values). */
static __device__ void bw_stats(float *lse2_t, float *D_t, const float *lse_rows, const float *D_rows, int q0, int T) {
    const int r = (int)threadIdx.x, t = q0 + r;
    if (r >= BW_ROWS) return;
    lse2_t[r] = t < T ? lse_rows[t] * FB_LOG2E : 0.0f;
    D_t[r] = t < T ? D_rows[t] : 0.0f;
}

/* dS^T (the warp's keys as rows, the tile's queries as columns; fb_ds's
 * values, rounded to bf16 as the A fragments are) into the 64 x 64 tile
 * dss, one 128-byte row per key: the MN-major A of dq's share (dS as [m =
 * query][k = key], m along the row). */
static __device__ __forceinline__ void bw_stage_ds(unsigned char *dss, const float (&ds)[32]) {
    const int lane = (int)threadIdx.x & 31, row0 = 16 * ((int)threadIdx.x >> 5) + (lane >> 2), t = lane & 3;
#pragma unroll
    for (int i = 0; i < 32; i += 2) { /* accumulators i, i + 1: key row0 + 8 (i % 4 / 2), queries 8 (i / 4) + 2 t, + 1 */
        const uint32_t at = smem_canonical_offset(SMEM_K_MAJOR, SMEM_SWIZZLE_128B, 16, 8 * 128,
                                                  (uint32_t)(row0 + 8 * ((i >> 1) & 1)), (uint32_t)(8 * (i >> 2) + 2 * t), 2);
        fb_store_pair((__nv_bfloat16 *)(dss + smem_swizzle_apply(at, SMEM_SWIZZLE_128B, 0)), mma_pack(ds[i], ds[i + 1]));
    }
}

/* Column chunk c (N columns from 64 c) of the warpgroup's dq share (warp
 * w: queries 16w .. 16w + 15 as rows) into its float32 slot, row-major 64
 * x HS. */
template <int HS, int N>
static __device__ __forceinline__ void bw_store_share(float *slot, const float (&dq)[N / 2], int c) {
    const int lane = (int)threadIdx.x & 31, row0 = 16 * ((int)threadIdx.x >> 5) + (lane >> 2), t = lane & 3;
#pragma unroll
    for (int i = 0; i < N / 2; i += 2) {
        bw_store2(slot + (row0 + 8 * ((i >> 1) & 1)) * HS + 64 * c + 8 * (i >> 2) + 2 * t, dq[i], dq[i + 1]);
    }
}

/* Chunk c of the tile's dq share, dS K (N = the chunk's columns): both
 * operands MN-major, dS^T as [key][query], K's chunk as [key][column].
 * Issued only, the caller commits and waits. */
template <int HS, int N>
static __device__ __forceinline__ void bw_dq_chunk(float (&dq)[N / 2], const unsigned char *dss, const unsigned char *ks, int c) {
#pragma unroll
    for (int kk = 0; kk < BW_KEYS / 16; kk++) /* keys 16 kk .. 16 kk + 15 as k */
        wgmma_ss<N, 1, 1>(dq, ht_mn_major<64, BW_KEYS>(dss, 0, kk), ht_mn_major<HS, BW_KEYS>(ks, c, kk), kk > 0);
}

/* One staged query tile (rows q0 ..) against the block's keys: dk, dv
 * (the warpgroup's accumulators: warp w's keys kw .. kw + 15 as rows, the
 * head's columns) += dS^T Q, P^T dout; DQ: dS K into slot (the tile's,
 * through dss). EDGE: the tile touches the diagonal or T, where fb_ds
 * masks. dq's share takes one 64-column chunk's accumulators (32
 * registers) at any head size: chunk 0 issued with dV and dK, the last
 * chunk of 32 columns (head size 96) or 64 (128) in a group of its own
 * after chunk 0 is stored, so that dk, dv (HS / 2 registers each) and dq
 * fit beside each other without spilling. */
template <int HS, bool EDGE, bool DQ>
static __device__ __forceinline__ void bw_query_tile(float (&dk)[HS / 2], float (&dv)[HS / 2], const unsigned char *ks,
                                                     const unsigned char *vs, const unsigned char *qs, const unsigned char *gs,
                                                     unsigned char *dss, float *slot, const float *lse2, const float *D, int q0,
                                                     int kw, const fb_pair &c) {
    using H = head_tile<HS>;
    static_assert(!DQ || bw_dq<HS>(), "no dq shares at this head size");
    const int lane = (int)threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float s[32], dp[32], kept[32];
    wgmma_fence(); /* s and dp were last read by this thread's registers */
#pragma unroll
    for (int step = 0; step < HS / 16; step++)
        wgmma_ss<BW_ROWS, 0, 0>(s, ht_k_major<HS, BW_KEYS>(ks, step), ht_k_major<HS, BW_ROWS>(qs, step), step > 0);
#pragma unroll
    for (int step = 0; step < HS / 16; step++)
        wgmma_ss<BW_ROWS, 0, 0>(dp, ht_k_major<HS, BW_KEYS>(vs, step), ht_k_major<HS, BW_ROWS>(gs, step), step > 0);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(s);
    wgmma_fence_operand(dp);
#pragma unroll
    for (int i = 0; i < 32; i++) { /* accumulator i: key kw + g + 8 (i % 4 / 2), query q0 + 8 (i / 4) + 2 t + i % 2 */
        const int col = 8 * (i >> 2) + 2 * t + (i & 1);
        s[i] = fb_ds<false, EDGE>(&kept[i], s[i], dp[i], lse2[col], D[col], q0 + col, kw + g + 8 * ((i >> 1) & 1), true, c);
    }
    uint32_t pa[BW_ROWS / 16][4], da[BW_ROWS / 16][4];
#pragma unroll
    for (int kk = 0; kk < BW_ROWS / 16; kk++) { /* queries 16 kk .. 16 kk + 15 as k */
        mma_a_from_accumulators(pa[kk], kept + 8 * kk, kept + 8 * kk + 4);
        mma_a_from_accumulators(da[kk], s + 8 * kk, s + 8 * kk + 4);
    }
    if (DQ) {
        bw_stage_ds(dss, s);
        fence_proxy_async_shared(); /* the plain stores, to the tensor core's reads */
        __syncthreads();            /* every warp's keys are in */
    }
    float dq[32] = {}; /* overwritten (scale_d 0 at the first step); set so no register is read undefined */
    wgmma_fence_operand(dv);
    wgmma_fence_operand(dk);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BW_ROWS / 16; kk++) ht_rs_mn<HS, BW_ROWS>(dv, pa[kk], gs, kk, 1);
#pragma unroll
    for (int kk = 0; kk < BW_ROWS / 16; kk++) ht_rs_mn<HS, BW_ROWS>(dk, da[kk], qs, kk, 1);
    if (DQ) bw_dq_chunk<HS, 64>(dq, dss, ks, 0);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(dv);
    wgmma_fence_operand(dk);
    if (DQ) {
        wgmma_fence_operand(dq);
        bw_store_share<HS, 64>(slot, dq, 0);
        if constexpr (H::chunks > 1) {
            float (&dq1)[H::cols1 / 2] = ht_part<H::cols1>(dq, 0);
            wgmma_fence(); /* dq's registers were last read by the stores */
            bw_dq_chunk<HS, H::cols1>(dq1, dss, ks, 1);
            wgmma_commit();
            wgmma_wait<0>();
            wgmma_fence_operand(dq1);
            bw_store_share<HS, H::cols1>(slot, dq1, 1);
        }
    }
}
#endif

/* One block: keys [k0, k0 + 64) of pair p0 + fl_grid_pair() (the first
 * keys first, fl_grid_pairs_first), query tiles from the diagonal to T;
 * tile n's Q and dout (and its rows' statistics) in stage n % 2, tile
 * n + 1 copied into the other while n is used. DQ: each tile's dq share
 * into the pair's slots (dq_slots: the round's pairs, bw_slots(T) each). */
template <int HS, bool DQ>
__global__ void __launch_bounds__(BW_THREADS, 1)
    flash_bwd_wgmma_kernel(__nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv, const float *lse,
                           const float *D, float *dq_slots, int p0, int T, int NH, float scale) {
#if defined(BW_BODY)
    constexpr uint32_t tile = bw_tile_bytes<HS>();
    extern __shared__ __align__(1024) unsigned char bw_shared[]; /* bw_shared_bytes<HS>() */
    __shared__ float lse2_t[2][BW_ROWS], D_t[2][BW_ROWS];
    unsigned char *ks = (unsigned char *)(((uintptr_t)bw_shared + 1023) & ~(uintptr_t)1023);
    /* dS^T (64 x 64, a whole number of KiB) after K and V; stage n: Q at stages + 2 n tile, dout after */
    unsigned char *vs = ks + tile, *dss = vs + tile, *stages = dss + bw_tile_bytes<64>();
    const int kt = fl_grid_key_tile(), k0 = kt * BW_KEYS, j = fl_grid_pair(), p = p0 + j, b = p / NH, h = p % NH, C = NH * HS;
    const int kw = k0 + 16 * ((int)threadIdx.x >> 5);
    const size_t stride = 3 * (size_t)C;
    const __nv_bfloat16 *src = qkv + (size_t)b * T * stride + (size_t)h * HS, *gsrc = dout + (size_t)b * T * C + (size_t)h * HS;
    const float *lse_rows = lse + (size_t)p * T, *D_rows = D + (size_t)j * T;
    float *slots = DQ ? dq_slots + (size_t)j * bw_slots(T) * bw_slot_floats<HS>() : NULL;

    bw_stage<HS>(ks, src + C, stride, k0, T);
    bw_stage<HS>(vs, src + 2 * C, stride, k0, T);
    bw_stage<HS>(stages, src, stride, k0, T); /* k0 is tile-aligned: the diagonal query tile starts at k0 */
    bw_stage<HS>(stages + tile, gsrc, C, k0, T);
    async_commit();
    bw_stats(lse2_t[0], D_t[0], lse_rows, D_rows, k0, T);
    const fb_pair c = {b, h, T, scale * FB_LOG2E, tg_dropout{}};
    float dk[HS / 2], dv[HS / 2];
#pragma unroll
    for (int i = 0; i < HS / 2; i++) dk[i] = dv[i] = 0.0f;
    for (int q0 = k0, n = 0; q0 < T; q0 += BW_ROWS, n ^= 1) {
        unsigned char *qs = stages + n * 2 * tile;
        if (q0 + BW_ROWS < T) { /* the other stage's readers passed the last iteration's barrier */
            unsigned char *next = stages + (n ^ 1) * 2 * tile;
            bw_stage<HS>(next, src, stride, q0 + BW_ROWS, T);
            bw_stage<HS>(next + tile, gsrc, C, q0 + BW_ROWS, T);
            async_commit();
            bw_stats(lse2_t[n ^ 1], D_t[n ^ 1], lse_rows, D_rows, q0 + BW_ROWS, T);
            async_wait<1>(); /* tile n (and K, V) are in; tile n + 1 may still be in flight */
        } else {
            async_wait<0>();
        }
        fence_proxy_async_shared(); /* cp.async's and plain stores, to the tensor core's reads */
        __syncthreads();
        float *slot = DQ ? slots + bw_slot(q0 / BW_ROWS, kt) * bw_slot_floats<HS>() : NULL;
        if (q0 == k0 || q0 + BW_ROWS > T) /* block-uniform: only these tiles hold masked scores */
            bw_query_tile<HS, true, DQ>(dk, dv, ks, vs, qs, qs + tile, dss, slot, lse2_t[n], D_t[n], q0, kw, c);
        else
            bw_query_tile<HS, false, DQ>(dk, dv, ks, vs, qs, qs + tile, dss, slot, lse2_t[n], D_t[n], q0, kw, c);
        __syncthreads(); /* stage n's and dss's readers are done: the next iteration refills them */
    }
    fb_store<HS>(dqkv, reinterpret_cast<const float(*)[4]>(dk), 3 * C, C + h * HS, b, kw, T, scale);
    fb_store<HS>(dqkv, reinterpret_cast<const float(*)[4]>(dv), 3 * C, 2 * C + h * HS, b, kw, T, 1.0f);
#else
    asm volatile("trap;"); /* not sm_90a: the host never launches it here */
#endif
}

/* dq of the round's pairs: each row's slots (key tiles 0 .. its query
 * tile, in that order) summed in float32, times scale, as bf16 into
 * dqkv's q columns; one thread per two adjacent columns. Any device: no
 * wgmma. */
template <int HS>
__global__ void flash_dq_reduce_kernel(__nv_bfloat16 *dqkv, const float *dq_slots, int p0, int np, int T, int NH, float scale) {
    constexpr size_t slot_floats = bw_slot_floats<HS>();
    const size_t n = (size_t)np * T * (HS / 2), per_pair = bw_slots(T) * slot_floats;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        const int c = 2 * (int)(e % (HS / 2)), t = (int)(e / (HS / 2) % (size_t)T), j = (int)(e / (HS / 2) / (size_t)T);
        const int qt = t / BW_ROWS, p = p0 + j, b = p / NH, h = p % NH;
        const float *at = dq_slots + (size_t)j * per_pair + bw_slot(qt, 0) * slot_floats + (t % BW_ROWS) * HS + c;
        float x = 0.0f, y = 0.0f;
        for (int kt = 0; kt <= qt; kt++, at += slot_floats) {
            float v[2];
            bw_load2(v, at);
            x += v[0];
            y += v[1];
        }
        fb_store_pair(dqkv + ((size_t)b * T + t) * 3 * NH * HS + (size_t)h * HS + c, mma_pack(x * scale, y * scale));
    }
}

/* The kernels at head size HS: with dq_slots (bw_dq<HS>), dk, dv and the
 * dq shares, then their reduction; without, dk and dv only. The emulation
 * names a launch by its source text, so each launch is its own line. */
template <int HS>
void bw_launch(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv, const float *lse,
               const float *D, float *dq_slots, int p0, int np, int T, int NH, float scale) {
    constexpr int shared = bw_shared_bytes<HS>();
    const dim3 grid = fl_grid_pairs_first(np, T, BW_KEYS);
    cudaStream_t stream = ctx->stream;
    if constexpr (bw_dq<HS>()) {
        if (dq_slots) {
            CUDA_CHECK(cudaFuncSetAttribute((const void *)flash_bwd_wgmma_kernel<HS, true>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
            flash_bwd_wgmma_kernel<HS, true><<<grid, BW_THREADS, shared, stream>>>(dqkv, dout, qkv, lse, D, dq_slots, p0, T, NH,
                                                                                   scale);
            CUDA_LAUNCHED("flash_bwd_wgmma_kernel");
            const size_t n = (size_t)np * T * (HS / 2);
            flash_dq_reduce_kernel<HS><<<(unsigned)fl_min((int)((n + 255) / 256), 4096), 256, 0, stream>>>(dqkv, dq_slots, p0, np,
                                                                                                           T, NH, scale);
            CUDA_LAUNCHED("flash_dq_reduce_kernel");
            return;
        }
    }
    CUDA_CHECK(cudaFuncSetAttribute((const void *)flash_bwd_wgmma_kernel<HS, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    shared));
    flash_bwd_wgmma_kernel<HS, false><<<grid, BW_THREADS, shared, stream>>>(dqkv, dout, qkv, lse, D, (float *)NULL, p0, T, NH,
                                                                             scale);
    CUDA_LAUNCHED("flash_bwd_wgmma_kernel");
}

} // namespace

size_t flash_bwd_wgmma_slot_bytes(int T, int HS) { return bw_slots(T) * (size_t)BW_ROWS * (size_t)HS * sizeof(float); }

int flash_bwd_wgmma(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv, const float *lse,
                    const float *D, float *dq_slots, int p0, int np, int T, int NH, int HS, float scale, tg_dropout drop) {
    if (!flash_bwd_wgmma_fits(ctx, dqkv, dout, qkv, HS, drop)) return 0;
    if (np <= 0 || T <= 0) return 1;
    head_tile_dispatch(HS, [&](auto hs) { bw_launch<decltype(hs)::value>(ctx, dqkv, dout, qkv, lse, D, dq_slots, p0, np, T, NH, scale); });
    return 1;
}

bool flash_bwd_wgmma_fits(const cuda_ctx *ctx, const void *dqkv, const void *dout, const void *qkv, int HS, tg_dropout drop) {
    const uintptr_t any = (uintptr_t)dqkv | (uintptr_t)dout | (uintptr_t)qkv;
    return head_tile_built(HS) && drop.p <= 0.0f && any % 16 == 0 && ctx->cc_major == 9 && ctx->cc_minor == 0;
}

bool flash_bwd_wgmma_dq_fits(int HS) {
    bool dq = false;
    if (head_tile_built(HS)) head_tile_dispatch(HS, [&](auto hs) { dq = bw_dq<decltype(hs)::value>(); });
    return dq;
}
