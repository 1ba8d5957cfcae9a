/* The wgmma backward's per-tile pieces (flash_bwd_wgmma.cu, whose head
 * comment says what the kernel does with them): the block's sizes, the
 * tensor maps, the copies of K, V, Q, dout and the row statistics, one
 * query tile's five products against a warpgroup's keys (bw_query_tile),
 * and the tile's dq share into its slot (bw_dq_tile). Included by
 * flash_bwd_wgmma.cu and flash_bwd_wgmma_persist.cu only. */
#ifndef KERNELS_CUDA_FLASH_BWD_WGMMA_TILE_CUH
#define KERNELS_CUDA_FLASH_BWD_WGMMA_TILE_CUH

#include <string.h>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/block_clock.cuh"
#include "kernels/cuda/dq_slots.cuh"
#include "kernels/cuda/flash_bwd_mma.cuh"
#include "kernels/cuda/head_tiles.cuh"
#include "kernels/cuda/mbarrier.cuh"
#include "kernels/cuda/smem_layout.h"
#include "kernels/cuda/tma.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace {

#define BW_KEYS 128    /* keys per block: two warpgroups of 64 */
#define BW_WG_KEYS 64  /* keys per warpgroup */
#define BW_ROWS 64     /* query rows per staged tile */
#define BW_THREADS 256 /* two warpgroups */

/* The phases of the profiled instance (PROF; block_profile.h), each
 * warpgroup's a part of its own (1 and 2; no part 0). */
enum { BW_PH_START, BW_PH_KEYS, BW_PH_DATA, BW_PH_TURN, BW_PH_SCORES, BW_PH_SOFTMAX, BW_PH_DKDV, BW_PH_BARRIER, BW_PH_DQ,
       BW_PH_STORE };
template <bool PROF>
using bw_laps = bc_laps<PROF, CUDA_PROFILE_PHASES>;

/* The bytes of a [64 x HS] bf16 tile (head_tiles.cuh's chunks), and of a 128 x 64 dS^T tile. */
template <int HS>
static __host__ __device__ constexpr uint32_t bw_tile_bytes() { return head_tile<HS>::template bytes<BW_ROWS>(); }
static __host__ __device__ constexpr uint32_t bw_ds_bytes() { return head_tile<64>::template bytes<BW_KEYS>(); }

/* The tensor maps of one call, by value (__grid_constant__): per column
 * chunk (head_tiles.cuh) of q, k and v inside qkv and of dout, boxes of 64
 * tokens. */
struct bw_maps {
    CUtensorMap q[2], k[2], v[2], g[2];
};

/* The maps of q, k, v inside qkv [B, T, 3, NH, HS] and of dout [B, T, NH,
 * HS] for pairs p0 .. p0 + np: B covers their sequences (the copies read
 * no others). */
template <int HS>
static void bw_make_maps(bw_maps *maps, const __nv_bfloat16 *qkv, const __nv_bfloat16 *dout, int p0, int np, int T, int NH) {
    const size_t C = (size_t)NH * HS;
    const int B = (p0 + np - 1) / NH + 1;
    memset(maps, 0, sizeof *maps);
    ht_make_maps<HS>(maps->q, "qkv (queries)", qkv, B, T, NH, 3 * C, BW_ROWS);
    ht_make_maps<HS>(maps->k, "qkv (keys)", qkv + C, B, T, NH, 3 * C, BW_ROWS);
    ht_make_maps<HS>(maps->v, "qkv (values)", qkv + 2 * C, B, T, NH, 3 * C, BW_ROWS);
    ht_make_maps<HS>(maps->g, "dout", dout, B, T, NH, C, BW_ROWS);
}

/* The dynamic shared memory a kernel instance opts in to. */
static void bw_allow_shared(const void *kernel, int bytes) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

/* The named barrier that orders the warpgroups' score products in a tile
 * (the tile's first issuer, bw_first_issuer, arrives once its products are
 * issued; the other syncs before issuing its own); 0 is __syncthreads'. */
#define BW_BAR_TURN 1

/* The dq slots (dq_slots.cuh) of 128-key blocks: two query tiles a key block. */
#define BW_KB 2
static_assert(BW_ROWS == DQS_ROWS, "a dq slot holds one query tile");

/* Whether a warpgroup holds its 64 keys' K and V as wgmma A fragments in
 * registers (32 at head size 64), so that the score products read only Q
 * and dout from shared memory: by the datasheet's rates an m64n64k16
 * product with both operands there keeps shared memory as busy as the
 * tensor cores (docs/design.md). A model: bench_attention times both
 * forms. At 96 and 128 the fragments do not fit beside dk and dv. */
template <int HS>
static __host__ __device__ constexpr bool bw_kv_in_registers() {
    return HS == 64;
}

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define BW_BODY 1 /* the kernel's body: sm_90a, or the emulation (and nvcc's host pass) */
#endif

#if defined(BW_BODY)
/* Thread 0's copies of query tile q0 of pair (b, h), Q then dout, into a
 * stage, landing on bar with both tiles' bytes expected (rows past T are
 * zeros: padding rows are multiplied, then masked; they must be finite). */
template <int HS>
static __device__ __forceinline__ void bw_load_query_tile(unsigned char *stage, const bw_maps &maps, uint64_t *bar, int h, int q0,
                                                          int b) {
    constexpr uint32_t tile = bw_tile_bytes<HS>();
    mbar_arrive_expect_tx(bar, 2 * tile);
    ht_load<HS, BW_ROWS>(stage, maps.q, bar, h, q0, b);
    ht_load<HS, BW_ROWS>(stage + tile, maps.g, bar, h, q0, b);
}

/* Thread 0's copies of the block's K and V (keys k0 .., a tile per
 * warpgroup), landing on bar. */
template <int HS>
static __device__ __forceinline__ void bw_load_keys(unsigned char *ks, unsigned char *vs, const bw_maps &maps, uint64_t *bar, int h,
                                                    int k0, int b) {
    constexpr uint32_t tile = bw_tile_bytes<HS>();
    mbar_arrive_expect_tx(bar, 4 * tile);
    for (int w = 0; w < 2; w++) {
        ht_load<HS, BW_ROWS>(ks + w * tile, maps.k, bar, h, k0 + BW_WG_KEYS * w, b);
        ht_load<HS, BW_ROWS>(vs + w * tile, maps.v, bar, h, k0 + BW_WG_KEYS * w, b);
    }
}

/* Thread 0's inits of the block's barriers: K and V's, and a stage's each. */
template <int STAGES>
static __device__ __forceinline__ void bw_init_barriers(uint64_t *kv_full, uint64_t *full) {
    mbar_init(kv_full, 1);
#pragma unroll
    for (int i = 0; i < STAGES; i++) mbar_init(&full[i], 1);
    mbar_fence_init();
}

/* Thread 0's first copies: the block's K and V (keys k0 ..), and query
 * tiles 0 .. STAGES - 2 into their stages (k0 is tile-aligned: the
 * diagonal query tile starts at k0); the kernel's loop issues the rest. */
template <int HS, int STAGES>
static __device__ __forceinline__ void bw_first_copies(unsigned char *ks, unsigned char *vs, unsigned char *stages,
                                                       const bw_maps &maps, uint64_t *kv_full, uint64_t *full, int h, int k0,
                                                       int b, int T) {
    constexpr uint32_t tile = bw_tile_bytes<HS>();
    bw_load_keys<HS>(ks, vs, maps, kv_full, h, k0, b);
#pragma unroll
    for (int i = 0; i < STAGES - 1; i++)
        if (k0 + BW_ROWS * i < T) bw_load_query_tile<HS>(stages + i * 2 * tile, maps, &full[i], h, k0 + BW_ROWS * i, b);
}

/* The statistics of query rows q0 .. q0 + 63 (lse of the pair's rows, D of
 * the round's) into lse2_t and D_t, zeros past T: threads 0 .. 63 issue a
 * cp.async each and go on, so no warp waits on the loads (a plain load
 * here held warps 0 and 1, and so both warpgroups' products, for a memory
 * latency each tile); bw_stats_land finishes them. */
static __device__ void bw_stats_copy(float *lse2_t, float *D_t, const float *lse_rows, const float *D_rows, int q0, int T) {
    const int r = (int)threadIdx.x, t = q0 + r;
    if (r >= BW_ROWS) return;
    const bool in = t < T;
    async_copy4_or_zero(&lse2_t[r], lse_rows + (in ? t : 0), in);
    async_copy4_or_zero(&D_t[r], D_rows + (in ? t : 0), in);
    async_commit();
}

/* Waits for the calling thread's bw_stats_copy and scales its lse by
 * log2(e) in place (fb_row_stats' values: lse log2(e) and D, 0 past T);
 * the block barrier after it shows both to every thread. The kernel calls
 * it at every tile, the last too, where no copy was issued and it scales
 * values nobody reads again: ptxas held the condition in registers, and
 * at head size 128 with dq spilled 8 bytes. */
static __device__ void bw_stats_land(float *lse2_t) {
    const int r = (int)threadIdx.x;
    if (r >= BW_ROWS) return;
    async_wait<0>();
    lse2_t[r] *= FB_LOG2E;
}

/* dS^T (the warp's keys as rows, the tile's queries as columns; fb_ds's
 * values, rounded to bf16 as the A fragments are) into the 128 x 64 tile
 * dss, one 128-byte row per key of the block (warp w: rows 16w ..): the
 * MN-major A of dq's share (dS as [m = query][k = key], m along the row). */
static __device__ __forceinline__ void bw_stage_ds(unsigned char *dss, const float (&ds)[32]) {
    const int lane = (int)threadIdx.x & 31, row0 = 16 * ((int)threadIdx.x >> 5) + (lane >> 2), t = lane & 3;
#pragma unroll
    for (int i = 0; i < 32; i += 2) { /* accumulators i, i + 1: key row0 + 8 (i % 4 / 2), queries 8 (i / 4) + 2 t, + 1 */
        const uint32_t at = smem_canonical_offset(SMEM_K_MAJOR, SMEM_SWIZZLE_128B, 16, 8 * 128,
                                                  (uint32_t)(row0 + 8 * ((i >> 1) & 1)), (uint32_t)(8 * (i >> 2) + 2 * t), 2);
        fb_store_pair((__nv_bfloat16 *)(dss + smem_swizzle_apply(at, SMEM_SWIZZLE_128B, 0)), mma_pack(ds[i], ds[i + 1]));
    }
}

/* Column chunk c (N columns from 64 c) of a dq share (warp w of the
 * warpgroup: queries 16w .. 16w + 15 as rows) into its float32 slot,
 * row-major 64 x HS. */
template <int HS, int N>
static __device__ __forceinline__ void bw_store_share(float *slot, const float (&dq)[N / 2], int c) {
    const int lane = (int)threadIdx.x & 31, row0 = 16 * (((int)threadIdx.x >> 5) & 3) + (lane >> 2), t = lane & 3;
#pragma unroll
    for (int i = 0; i < N / 2; i += 2) {
        dqs_store2(slot + (row0 + 8 * ((i >> 1) & 1)) * HS + 64 * c + 8 * (i >> 2) + 2 * t, dq[i], dq[i + 1]);
    }
}

/* Chunk c of the tile's dq share over the block's 128 keys, dS K (N = the
 * chunk's columns), by the calling warpgroup into its slot: both operands
 * MN-major, dS^T as [key][query] (dss), K's chunk as [key][column] (the
 * two warpgroups' tiles, ks and ks + tile, one after the other as k). One
 * chain of eight k16 steps, so the 128 keys' sum is the tensor core's,
 * then one float32 slot. */
template <int HS, int N>
static __device__ __forceinline__ void bw_dq_share(float *slot, const unsigned char *dss, const unsigned char *ks, int c) {
    constexpr uint32_t tile = bw_tile_bytes<HS>();
    float dq[N / 2] = {}; /* overwritten (scale_d 0 at the first step); set so no register is read undefined */
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BW_KEYS / 16; kk++) /* keys 16 kk .. 16 kk + 15 as k */
        wgmma_ss<N, 1, 1>(dq, ht_mn_major<64, BW_KEYS>(dss, 0, kk), ht_mn_major<HS, BW_WG_KEYS>(ks + (kk / 4) * tile, c, kk % 4),
                          kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(dq);
    bw_store_share<HS, N>(slot, dq, c);
}

/* A warpgroup's K and V as A fragments (bw_kv_in_registers), loaded from
 * its tiles ks and vs; else empty. */
template <bool HELD>
struct bw_kv_held {
    uint32_t k[4][4], v[4][4];
    __device__ __forceinline__ void load(const unsigned char *ks, const unsigned char *vs) {
        ht_a_fragments(k, ks);
        ht_a_fragments(v, vs);
    }
};
template <>
struct bw_kv_held<false> {
    __device__ __forceinline__ void load(const unsigned char *, const unsigned char *) {}
};

/* Whether the warpgroups take the larger part of a tile's dq share in
 * turns (bw_dq_tile): where the parts differ, at head sizes 64 (all or
 * nothing) and 96 (chunks of 64 and 32 columns); at 128 the chunks are
 * equal, and turns there cost 4 bytes of spill (ptxas, sm_90a). */
template <int HS>
static __host__ __device__ constexpr bool bw_dq_in_turns() {
    return head_tile<HS>::chunks == 1 || head_tile<HS>::cols1 < 64;
}

/* The warpgroup that issues a tile's score products first (BW_BAR_TURN),
 * par the tile's parity: the one with less of the tile before's dq share
 * (bw_dq_tile) to finish, so that it goes on with this tile's products
 * while the other finishes. With bw_dq_in_turns, warpgroup par ^ 1 took
 * the larger part of the tile before's share, so par goes first; at 128,
 * warpgroup 0. Which goes first changes no sum (each warpgroup's products
 * are its own). */
template <int HS>
static __device__ __forceinline__ int bw_first_issuer(int par) {
    return bw_dq_in_turns<HS>() ? par : 0;
}

/* One staged query tile (rows q0 ..) against warpgroup wg's 64 keys (ks,
 * vs: its K and V): dk, dv (its accumulators: warp w's keys kw .. kw + 15
 * as rows, the head's columns) += dS^T Q, P^T dout, waited for; DQ: dS^T
 * into the warpgroup's rows of dss. EDGE: the tile touches the warpgroup's
 * diagonal or T, where fb_ds masks. The other warpgroup issues its score
 * products after warpgroup `first`'s (BW_BAR_TURN; bw_first_issuer), so
 * that first's softmax runs while the tensor core works on the other's,
 * and the other's while it works on first's dk and dv. KVR:
 * the score products take K and V from kv (bw_kv_in_registers). clk: the
 * profiled instance's phases (bw_laps). */
template <int HS, bool EDGE, bool DQ, bool KVR, bool PROF>
static __device__ __forceinline__ void bw_query_tile(float (&dk)[HS / 2], float (&dv)[HS / 2], const unsigned char *ks,
                                                     const unsigned char *vs, const bw_kv_held<KVR> &kv,
                                                     const unsigned char *qs, const unsigned char *gs, unsigned char *dss,
                                                     const float *lse2, const float *D, int q0, int kw, int wg, int first,
                                                     const fb_pair &c, bw_laps<PROF> &clk) {
    const int lane = (int)threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float s[32], dp[32], kept[32];
    if (wg != first) named_bar_sync(BW_BAR_TURN, BW_THREADS);
    clk.lap(BW_PH_TURN);
    wgmma_fence(); /* s and dp were last read by this thread's registers */
    if constexpr (KVR) {
#pragma unroll
        for (int step = 0; step < HS / 16; step++) wgmma_rs<BW_ROWS, 0>(s, kv.k[step], ht_k_major<HS, BW_ROWS>(qs, step), step > 0);
#pragma unroll
        for (int step = 0; step < HS / 16; step++) wgmma_rs<BW_ROWS, 0>(dp, kv.v[step], ht_k_major<HS, BW_ROWS>(gs, step), step > 0);
    } else {
#pragma unroll
        for (int step = 0; step < HS / 16; step++)
            wgmma_ss<BW_ROWS, 0, 0>(s, ht_k_major<HS, BW_WG_KEYS>(ks, step), ht_k_major<HS, BW_ROWS>(qs, step), step > 0);
#pragma unroll
        for (int step = 0; step < HS / 16; step++)
            wgmma_ss<BW_ROWS, 0, 0>(dp, ht_k_major<HS, BW_WG_KEYS>(vs, step), ht_k_major<HS, BW_ROWS>(gs, step), step > 0);
    }
    wgmma_commit();
    if (wg == first) named_bar_arrive(BW_BAR_TURN, BW_THREADS);
    wgmma_wait<0>();
    wgmma_fence_operand(s);
    wgmma_fence_operand(dp);
    clk.lap(BW_PH_SCORES);
#pragma unroll
    for (int i = 0; i < 32; i++) { /* accumulator i: key kw + g + 8 (i % 4 / 2), query q0 + 8 (i / 4) + 2 t + i % 2 */
        const int col = 8 * (i >> 2) + 2 * t + (i & 1);
        s[i] = fb_ds<false, EDGE, true>(&kept[i], s[i], dp[i], lse2[col], D[col], q0 + col, kw + g + 8 * ((i >> 1) & 1), true, c);
    }
    uint32_t pa[BW_ROWS / 16][4], da[BW_ROWS / 16][4];
#pragma unroll
    for (int kk = 0; kk < BW_ROWS / 16; kk++) { /* queries 16 kk .. 16 kk + 15 as k */
        mma_a_from_accumulators(pa[kk], kept + 8 * kk, kept + 8 * kk + 4);
        mma_a_from_accumulators(da[kk], s + 8 * kk, s + 8 * kk + 4);
    }
    if (DQ) bw_stage_ds(dss, s);
    clk.lap(BW_PH_SOFTMAX);
    wgmma_fence_operand(dv);
    wgmma_fence_operand(dk);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BW_ROWS / 16; kk++) ht_rs_mn<HS, BW_ROWS>(dv, pa[kk], gs, kk, 1);
#pragma unroll
    for (int kk = 0; kk < BW_ROWS / 16; kk++) ht_rs_mn<HS, BW_ROWS>(dk, da[kk], qs, kk, 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(dv);
    wgmma_fence_operand(dk);
    clk.lap(BW_PH_DKDV);
}

/* bw_query_tile for warpgroup wg (its keys from wg_k0) with the masked
 * instance only where the tile holds masked scores: it touches the
 * warpgroup's diagonal or T (c.T). The choice is warpgroup-uniform. */
template <int HS, bool DQ, bool KVR, bool PROF>
static __device__ __forceinline__ void bw_query_tile_at(float (&dk)[HS / 2], float (&dv)[HS / 2], const unsigned char *ks,
                                                        const unsigned char *vs, const bw_kv_held<KVR> &kv, const unsigned char *qs,
                                                        const unsigned char *gs, unsigned char *dss, const float *lse2, const float *D,
                                                        int q0, int kw, int wg, int wg_k0, int first, const fb_pair &c,
                                                        bw_laps<PROF> &clk) {
    if (q0 < wg_k0 + BW_WG_KEYS || q0 + BW_ROWS > c.T)
        bw_query_tile<HS, true, DQ, KVR>(dk, dv, ks, vs, kv, qs, gs, dss, lse2, D, q0, kw, wg, first, c, clk);
    else
        bw_query_tile<HS, false, DQ, KVR>(dk, dv, ks, vs, kv, qs, gs, dss, lse2, D, q0, kw, wg, first, c, clk);
}

/* A block's dk (scaled) and dv, warp rows kw .., into dqkv's k and v
 * columns of head h (C = NH HS). */
template <int HS>
static __device__ __forceinline__ void bw_store_dkv(__nv_bfloat16 *dqkv, const float (&dk)[HS / 2], const float (&dv)[HS / 2], int C,
                                                    int h, int b, int kw, int T, float scale) {
    fb_store<HS>(dqkv, reinterpret_cast<const float(*)[4]>(dk), 3 * C, C + h * HS, b, kw, T, scale);
    fb_store<HS>(dqkv, reinterpret_cast<const float(*)[4]>(dv), 3 * C, 2 * C + h * HS, b, kw, T, 1.0f);
}

/* The tile's dq share over the block's keys (both warpgroups' dS^T in dss,
 * every thread past the barrier after its stores) into slot, split
 * between the warpgroups by column chunk: at head size 64 (one chunk) the
 * warpgroup of the tile's parity n takes it; at 96 that one takes chunk 0
 * (64 columns) and the other chunk 1 (32), so that each takes the larger
 * every other tile (bw_dq_in_turns); at 128 warpgroup w takes chunk w. A
 * chunk's product and store are the same whichever warpgroup runs them:
 * the same bits. */
template <int HS>
static __device__ __forceinline__ void bw_dq_tile(float *slot, const unsigned char *dss, const unsigned char *ks, int wg, int n) {
    using H = head_tile<HS>;
    if constexpr (H::chunks == 1) {
        if (wg == n) bw_dq_share<HS, 64>(slot, dss, ks, 0);
    } else {
        if (wg == (bw_dq_in_turns<HS>() ? n : 0))
            bw_dq_share<HS, 64>(slot, dss, ks, 0);
        else
            bw_dq_share<HS, H::cols1>(slot, dss, ks, 1);
    }
}
#endif

} // namespace

#endif
