/* The per-tile arithmetic of the Hopper attention forwards (head sizes 64,
 * 96 and 128, bf16, no dropout), shared by flash_fwd_wgmma.cu (one warpgroup, cp.async
 * staging: the reference) and flash_fwd_wgmma_ws.cu (a TMA producer warp
 * and two consumer warpgroups): one consumer warpgroup's 64 query rows
 * against one staged tile of KEYS keys (64 in the first, 128 in the
 * second), and the finished rows' stores. Tiles are 64 query rows or KEYS
 * keys of the head's columns in head_tiles.cuh's chunks (64 columns under
 * the 128B swizzle; at head size 96 a last chunk of 32 under the 64B
 * swizzle), 1024-byte aligned: Q and K read K-major, V MN-major, one P V
 * product per chunk. A row sees the operations of the mma.sync forward
 * with as many keys a tile, so the outputs are its bits under the
 * emulation (tests/kernels/attention.c). */
#ifndef KERNELS_CUDA_FLASH_FWD_WGMMA_CUH
#define KERNELS_CUDA_FLASH_FWD_WGMMA_CUH

#include "kernels/cuda/flash.cuh"
#include "kernels/cuda/flash_fwd_mma.cuh"
#include "kernels/cuda/head_tiles.cuh"

#define FW_KEYS 64 /* keys (or query rows) per staged tile */

/* Whether the Hopper forwards run a call: bf16 activations and
 * head_tile_runs. */
static inline bool fw_has_instance(tg_o o, int HS, tg_dropout drop) {
    return o->act == TG_BF16 && head_tile_runs(cuda_ctx_of(o), HS, drop);
}

/* Bytes of a staged tile at head size HS. */
template <int HS>
__host__ __device__ static constexpr int fw_tile_bytes() {
    return (int)head_tile<HS>::template bytes<FW_KEYS>();
}

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FW_BODY 1 /* the kernels' bodies: sm_90a, or the emulation (and nvcc's host pass) */
#endif

#if defined(FW_BODY)
/* The finished rows of warp w: out = o / sum (bf16) for rows before T, lse
 * = max + log(sum) into lse_rows (the pair's, by row). A lane's two
 * columns go in one 4-byte store where out is 4-byte aligned (the row's
 * offset, row stride + 2 t + 8 n, is even: stride is NH HS), else one
 * each (as every store was before: 2-byte stores, twice the instructions). */
template <int HS>
static __device__ void fw_store_rows(__nv_bfloat16 *out, size_t stride, float *lse_rows, const float (*o)[4], const float m[2],
                                     const float l[2], const fm_lane_pos &at, int T) {
    const bool pairs = ((uintptr_t)out & 3u) == 0 && stride % 2 == 0;
    for (int half = 0; half < 2; half++) {
        const float sum = fm_row_sum(l[half]), inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        const int row = at.row[half];
        if (row >= T) continue;
        __nv_bfloat16 *r = out + (size_t)row * stride + 2 * at.t;
        if (pairs) {
#pragma unroll
            for (int n = 0; n < HS / 8; n++)
                fm_store_pair(r + 8 * n, mma_pack(o[n][2 * half] * inv, o[n][2 * half + 1] * inv));
        } else {
#pragma unroll
            for (int n = 0; n < HS / 8; n++) {
                r[8 * n] = __float2bfloat16_rn(o[n][2 * half] * inv);
                r[8 * n + 1] = __float2bfloat16_rn(o[n][2 * half + 1] * inv);
            }
        }
        if (at.t == 0) lse_rows[row] = m[half] * 0.69314718f + logf(sum);
    }
}

/* The pieces of one staged tile of KEYS keys (64, or 128 in
 * flash_fwd_wgmma_ws.cu), for a warpgroup's 64 query rows (a Q tile of
 * FW_KEYS rows): S = Q K^T issued into s (not committed; scale-d 0 at the
 * first step). */
template <int HS, int KEYS>
static __device__ __forceinline__ void fw_issue_scores(float (&s)[KEYS / 2], const unsigned char *qs, const unsigned char *ks) {
#pragma unroll
    for (int step = 0; step < HS / 16; step++) /* columns 16 step .. 16 step + 15 */
        wgmma_ss<KEYS, 0, 0>(s, ht_k_major<HS, FW_KEYS>(qs, step), ht_k_major<HS, KEYS>(ks, step), step > 0);
}

/* O += P V issued (not committed): a, P as the A fragments of keys 16 kk ..
 * 16 kk + 15 (fw_pack); V's 16 rows for each, one product per column chunk. */
template <int HS, int KEYS>
static __device__ __forceinline__ void fw_issue_pv(float (&o)[HS / 2], const uint32_t (&a)[KEYS / 16][4], const unsigned char *vs) {
#pragma unroll
    for (int kk = 0; kk < KEYS / 16; kk++) ht_rs_mn<HS, KEYS>(o, a[kk], vs, kk, 1);
}

/* The online softmax of the warp's two accumulator rows a lane (the
 * mma.sync forward's fm_softmax_row): s becomes P in place, m and l the
 * new running max and sum; m_prev gets the old max, for fw_rescale. The
 * outputs are not touched, so that this may run while a product still
 * writes them. FULL: the tile lies wholly before the rows (no mask).
 * POLY: fm_softmax_row's (a share of the exponentials by exp2_poly). */
template <bool FULL, int KEYS, int POLY = 0>
static __device__ __forceinline__ void fw_softmax(float (&s)[KEYS / 2], float m[2], float l[2], float m_prev[2], const fm_reach &reach,
                                                  const fm_lane_pos &at, float scale_log2, int T) {
    float(*sf)[4] = reinterpret_cast<float(*)[4]>(s);
    const tg_dropout none{};
    for (int i = 0; i < 2; i++) {
        m_prev[i] = m[i];
        fm_softmax_row<0, KEYS / 8, FULL, false, POLY>(sf, NULL, m[i], l[i], i, at, reach, scale_log2, 0, 0, T, none);
    }
}

/* The outputs' rows moved from running max m_prev to m: the factor
 * fm_softmax_row applies to l, computed as it computes it. */
template <int HS>
static __device__ __forceinline__ void fw_rescale(float (&o)[HS / 2], const float m_prev[2], const float m[2]) {
    float(*of)[4] = reinterpret_cast<float(*)[4]>(o);
    for (int i = 0; i < 2; i++) {
        const float base = m[i] == -INFINITY ? 0.0f : m[i], corr = exp2_ftz(m_prev[i] - base);
#pragma unroll
        for (int n = 0; n < HS / 8; n++) {
            of[n][2 * i] *= corr;
            of[n][2 * i + 1] *= corr;
        }
    }
}

/* P (s after fw_softmax) rounded to bf16 and packed as wgmma_rs's A
 * fragments: keys 16 kk .. 16 kk + 15 are accumulator blocks 2 kk, 2 kk + 1. */
template <int KEYS>
static __device__ __forceinline__ void fw_pack(uint32_t (&a)[KEYS / 16][4], float (&s)[KEYS / 2]) {
    float(*sf)[4] = reinterpret_cast<float(*)[4]>(s);
#pragma unroll
    for (int kk = 0; kk < KEYS / 16; kk++) mma_a_from_accumulators(a[kk], sf[2 * kk], sf[2 * kk + 1]);
}

/* One staged key tile, each product waited for before the next step (the
 * one-warpgroup forward): S = Q K^T, the online softmax, O += bf16(P) V.
 * FULL: the tile lies wholly before the block's rows (no mask). */
template <int HS, bool FULL>
static __device__ __forceinline__ void fw_key_tile(float (&s)[32], float (&o)[HS / 2], float m[2], float l[2], const unsigned char *qs,
                                                   const unsigned char *ks, const unsigned char *vs, const fm_reach &reach,
                                                   const fm_lane_pos &at, float scale_log2, int T) {
    wgmma_fence(); /* s and o were last touched by this thread's registers */
    fw_issue_scores<HS, FW_KEYS>(s, qs, ks);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(s);
    float m_prev[2];
    fw_softmax<FULL, FW_KEYS>(s, m, l, m_prev, reach, at, scale_log2, T);
    fw_rescale<HS>(o, m_prev, m);
    uint32_t a[FW_KEYS / 16][4];
    fw_pack<FW_KEYS>(a, s);
    wgmma_fence_operand(o);
    wgmma_fence();
    fw_issue_pv<HS, FW_KEYS>(o, a, vs);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(o);
}

#endif

#endif
