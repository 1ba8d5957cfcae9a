/* The warp-level pieces of the tensor-core flash forward (flash_fwd.cu's
 * kernel for bf16 activations, head sizes that are multiples of 16 up to
 * FM_HS_MAX), for any block shape fm_shape describes: how many 16-row
 * query tiles each warp owns, how many keys a staged K and V tile holds,
 * and whether the warp's Q fragments stay in registers or are read from
 * shared memory at each use. Shapes that differ only in the first and
 * the third give the same bits (each row's products, softmax and sums run
 * in the same order); the number of keys per tile changes where the
 * running max is taken, and so the roundings. */
#ifndef KERNELS_CUDA_FLASH_FWD_MMA_CUH
#define KERNELS_CUDA_FLASH_FWD_MMA_CUH

#include "kernels/cuda/exp2_poly.cuh"
#include "kernels/cuda/flash.cuh"
#include "kernels/cuda/flash_mma.cuh"

/* A block of FM_WARPS warps owning MT row tiles of 16 query rows each
 * (FM_ROWS x MT rows), against staged tiles of KEYS = 8 KB keys; QS: the
 * warp's Q fragments are read from the staged Q rows at each use (fewer
 * registers, one more shared-memory load per product pair), else held in
 * registers from the start; MINB: the blocks per SM it is built for
 * (__launch_bounds__'s minimum: ptxas keeps each thread within 65536 /
 * (FM_THREADS x MINB) registers); AHEAD: the scores of the next key tile
 * are issued before this tile's softmax (two score tiles in registers,
 * K staged a tile ahead of V: flash_fwd.cu's fm_key_loop_ahead), so that
 * the exponentials overlap tensor work; the same arithmetic in the same
 * order, so the same bits. */
template <int MT_, int KB_, bool QS_, int MINB_, bool AHEAD_ = false>
struct fm_shape {
    static_assert(MT_ == 1 || MT_ == 2, "Q and the output rows are staged in one buffer of 2 KEYS rows");
    static_assert(KB_ % 8 == 0, "a staged tile is a whole number of FM_ROWS-row stagings");
    static constexpr int MT = MT_, KB = KB_, KEYS = 8 * KB_, MINB = MINB_;
    static constexpr bool QS = QS_, AHEAD = AHEAD_;
};

/* Dynamic shared memory of the forward: K and V of two key tiles (double
 * buffering: the next tile lands while the current one is used), and with
 * QS the block's Q rows after them; without, Q passes through buffer 1
 * first. Buffer 0 stages the output rows last. */
template <int HS, class S>
static constexpr int fm_forward_shared_bytes() {
    return (4 * S::KEYS + (S::QS ? FM_ROWS * S::MT : 0)) * fm_ld(HS) * (int)sizeof(__nv_bfloat16);
}

/* Keys t0 .. t0 + KEYS - 1 into one buffer, FM_ROWS rows at a time: K
 * (from src + C) at buffer, V (from src + 2 C) KEYS rows after it. */
template <int HS, int KEYS>
static __device__ __forceinline__ void fm_stage_kv(__nv_bfloat16 *buffer, const __nv_bfloat16 *src, int C, size_t stride, int t0,
                                                   int T, bool vec) {
#pragma unroll
    for (int r = 0; r < KEYS; r += FM_ROWS) {
        fm_stage_async<HS>(buffer + r * fm_ld(HS), src + C, stride, t0 + r, T, vec);
        fm_stage_async<HS>(buffer + (KEYS + r) * fm_ld(HS), src + 2 * C, stride, t0 + r, T, vec);
    }
}
/* One of them (K: from src + C, or V: from src + 2 C) alone, at rows. */
template <int HS, int KEYS>
static __device__ __forceinline__ void fm_stage_keys(__nv_bfloat16 *rows, const __nv_bfloat16 *from, size_t stride, int t0, int T,
                                                     bool vec) {
#pragma unroll
    for (int r = 0; r < KEYS; r += FM_ROWS) fm_stage_async<HS>(rows + r * fm_ld(HS), from, stride, t0 + r, T, vec);
}

/* Where a warp's row tile meets key tile k0 .. k0 + KEYS - 1: its rows
 * r0 .. r0 + 15 see the first n_blocks key blocks of 8 (0 to KEYS / 8,
 * even: keys up to its last row), and with mask some of those keys lie
 * after some of its rows (the per-element causal test is needed). */
struct fm_reach {
    int n_blocks;
    bool mask;
};
template <int KEYS>
static __device__ __forceinline__ fm_reach fm_reach_of(int r0, int k0) {
    if (k0 + KEYS <= r0) return fm_reach{KEYS / 8, false}; /* wholly before the rows */
    /* r0, k0 multiples of 16 and r0 - k0 <= KEYS - 16 here: even, at most KEYS / 8 */
    const int n = (r0 + 16 - k0) / 8;
    return fm_reach{n < 0 ? 0 : n, true}; /* the last key seen, r0 + 15, lies after rows r0 .. r0 + 14 */
}

/* The warp's Q: A fragments of its MT row tiles (HS / 16 each), held in
 * registers (f, loaded once), or with QS read from the staged rows
 * (rows: the warp's first row tile; tile i 16 i rows on) at each use. */
template <int HS, class S>
struct fm_q {
    uint32_t f[S::QS ? 1 : S::MT][HS / 16][4];
    const __nv_bfloat16 *rows;

    /* The fragment of row tile i at k block kk, from the staged rows. */
    __device__ __forceinline__ void load(uint32_t a[4], int i, int kk) const {
        mma_load_a(a, rows + 16 * i * fm_ld(HS) + 16 * kk, fm_ld(HS));
    }
    __device__ __forceinline__ void load_held() {
        if constexpr (!S::QS)
#pragma unroll
            for (int i = 0; i < S::MT; i++)
#pragma unroll
                for (int kk = 0; kk < HS / 16; kk++) load(f[i][kk], i, kk);
    }
    /* The fragment of row tile i at k block kk. */
    __device__ __forceinline__ void fragment(uint32_t a[4], int i, int kk) const {
        if constexpr (S::QS)
            load(a, i, kk);
        else
#pragma unroll
            for (int e = 0; e < 4; e++) a[e] = f[i][kk][e];
    }
};

/* Scores of the warp's MT row tiles against keys 8j .. 8j + 7 of the
 * staged tile ks into s[i][j], unscaled, for j < reach[i].n_blocks; the
 * other s[i][j] are 0. For each k block, each tile's Q fragment is taken
 * once and each 16-key pair of K fragments loaded once (one ldmatrix) for
 * every tile that sees it; reach[MT - 1] (the lowest rows) sees the most.
 * Each s[i][j] sums its k blocks in order, whatever the shape. FULL:
 * every tile sees every key (the key tile lies wholly before the block's
 * rows), so the loops have no test to break them up. */
template <int HS, class S, bool FULL>
static __device__ __forceinline__ void fm_warp_scores(float (*s)[S::KB][4], const fm_q<HS, S> &q, const __nv_bfloat16 *ks,
                                                      const fm_reach *reach) {
    constexpr int ld = fm_ld(HS), MT = S::MT;
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < S::KB; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[i][j][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) {
        uint32_t qf[MT][4];
#pragma unroll
        for (int i = 0; i < MT; i++) q.fragment(qf[i], i, kk);
#pragma unroll
        for (int j = 0; j < S::KB; j += 2) {
            if (!FULL && j >= reach[MT - 1].n_blocks) continue;
            uint32_t kf[2][2];
            mma_load_b_rows_x2(kf, ks + 8 * j * ld + 16 * kk, ld);
#pragma unroll
            for (int i = 0; i < MT; i++) {
                if (!FULL && j >= reach[i].n_blocks) continue;
                mma_bf16_16816(s[i][j], qf[i], kf[0]);
                mma_bf16_16816(s[i][j + 1], qf[i], kf[1]);
            }
        }
    }
}

/* Where this lane's scores sit in the sequence: its accumulator row i (0:
 * row g, 1: row g + 8) is query row[i]; s[j][2 i + e] is key k0 + 8 j +
 * 2 t + e (t = lane % 4). */
struct fm_lane_pos {
    int row[2], k0, t;
};

/* 2^arg, the lane's probability k of a row: with POLY > 0 every POLY-th by
 * exp2_poly (the FMA units), the rest by exp2_ftz (the SFU). */
template <int POLY>
static __device__ __forceinline__ float fm_exp2(float arg, int k) {
    if constexpr (POLY > 0)
        if (k % POLY == POLY - 1) return exp2_poly(arg);
    return exp2_ftz(arg);
}

/* One key tile of the online softmax for the lane's row i of one row tile:
 * the scores s (unscaled, KB blocks of 8 keys) become P * keep, P = 2^(scale_log2 s - m)
 * against the new running max m (log2 units), with masked keys (past
 * reach.n_blocks or, where reach.mask, after the row) at 0; the running
 * sum l (this lane's share, before dropout, like the CPU's) and the row's
 * outputs o are rescaled to the new max first. FULL: every key is seen (no
 * mask); DROP: dropout is on (p > 0; without it no dropout code at all).
 * POLY: fm_exp2's. */
template <int NB, int KB, bool FULL, bool DROP, int POLY = 0>
static __device__ __forceinline__ void fm_softmax_row(float (*s)[4], float (*o)[4], float &m, float &l, int i,
                                                      const fm_lane_pos &at, const fm_reach &reach, float scale_log2, int b, int h,
                                                      int T, const tg_dropout &drop) {
    const int row = at.row[i];
    /* The lane's max in CH chains, joined as a tree: one chain of 2 KB
     * maxes in turn held every exponential behind 2 KB dependent latencies
     * (seen in the SASS of the TMA forward: 32 FMNMX in a row a tile). Two
     * chains at 64 keys a tile, where four spilled at head size 96 (the
     * mma.sync forward's two row tiles). A max is exact, so any order gives
     * the same bits. */
    constexpr int CH = KB >= 16 ? 4 : 2;
    static_assert(2 * KB >= CH, "a chain a score at least");
    float mx[CH];
#pragma unroll
    for (int j = 0; j < KB; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            float &x = s[j][2 * i + e];
            if (!FULL && !(j < reach.n_blocks && (!reach.mask || at.k0 + 8 * j + 2 * at.t + e <= row)))
                x = -INFINITY; /* masked: 2^(-inf) = 0 below */
            const int k = 2 * j + e;
            mx[k % CH] = k < CH ? x : fmaxf(mx[k % CH], x); /* each chain starts at its first score */
        }
#pragma unroll
    for (int w = CH / 2; w > 0; w /= 2)
#pragma unroll
        for (int k = 0; k < w; k++) mx[k] = fmaxf(mx[k], mx[k + w]);
    /* The max of the unscaled scores, scaled: scale_log2 > 0 and rounding are
     * monotonic, so this is the max of the scaled scores, bit for bit, and each
     * probability below is one FFMA and one ex2 (no separate scaling pass). */
    const float m_new = fmaxf(m, fm_row_max(mx[0]) * scale_log2);
    const float base = m_new == -INFINITY ? 0.0f : m_new; /* no -inf - -inf */
    const float corr = exp2_ftz(m - base);
    m = m_new;
    l *= corr;
#pragma unroll
    for (int n = 0; n < NB; n++) {
        o[n][2 * i] *= corr;
        o[n][2 * i + 1] *= corr;
    }
    const bool dropping = DROP && row < T;
#pragma unroll
    for (int j = 0; j < KB; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            float &x = s[j][2 * i + e];
            const float prob = fm_exp2<POLY>(fmaf(x, scale_log2, -base), 2 * j + e);
            l += prob;
            x = dropping && prob > 0.0f ? prob * fl_drop(drop, b, h, row, at.k0 + 8 * j + 2 * at.t + e, T) : prob;
        }
}

/* o[i][n] (columns 8n .. 8n + 7 of row tile i) += P V over the staged
 * values vs, P the bf16 rounding of the probabilities s[i], keys of the
 * first reach[i].n_blocks accumulators only (the rest are masked). Each
 * 16-column pair of V fragments is loaded once for every tile that sees
 * its keys. FULL: as fm_warp_scores. */
template <int HS, class S, bool FULL>
static __device__ __forceinline__ void fm_warp_pv(float (*o)[HS / 8][4], const float (*s)[S::KB][4], const __nv_bfloat16 *vs,
                                                  const fm_reach *reach) {
    constexpr int ld = fm_ld(HS), MT = S::MT;
#pragma unroll
    for (int kk = 0; kk < S::KB / 2; kk++) {
        if (!FULL && 2 * kk >= reach[MT - 1].n_blocks) continue;
        uint32_t pf[MT][4];
#pragma unroll
        for (int i = 0; i < MT; i++) mma_a_from_accumulators(pf[i], s[i][2 * kk], s[i][2 * kk + 1]);
#pragma unroll
        for (int n = 0; n < HS / 8; n += 2) {
            uint32_t vf[2][2];
            mma_load_b_cols_x2(vf, vs + 16 * kk * ld + 8 * n, ld);
#pragma unroll
            for (int i = 0; i < MT; i++) {
                if (!FULL && 2 * kk >= reach[i].n_blocks) continue;
                mma_bf16_16816(o[i][n], pf[i], vf[0]);
                mma_bf16_16816(o[i][n + 1], pf[i], vf[1]);
            }
        }
    }
}

/* The second half of a key tile for the warp's MT row tiles, from its
 * scores s: the online softmax of each row, then P V (V at vs) into o. */
template <int HS, class S, bool FULL, bool DROP>
static __device__ __forceinline__ void fm_warp_softmax_pv(float (*o)[HS / 8][4], float (*m)[2], float (*l)[2], float (*s)[S::KB][4],
                                                          const __nv_bfloat16 *vs, const fm_reach *reach, const fm_lane_pos *at,
                                                          float scale_log2, int b, int h, int T, const tg_dropout &drop) {
#pragma unroll
    for (int i = 0; i < S::MT; i++) {
        if (!FULL && reach[i].n_blocks == 0) continue; /* no key seen: nothing would change */
        fm_softmax_row<HS / 8, S::KB, FULL, DROP>(s[i], o[i], m[i][0], l[i][0], 0, at[i], reach[i], scale_log2, b, h, T, drop);
        fm_softmax_row<HS / 8, S::KB, FULL, DROP>(s[i], o[i], m[i][1], l[i][1], 1, at[i], reach[i], scale_log2, b, h, T, drop);
    }
    fm_warp_pv<HS, S, FULL>(o, s, vs, reach);
}

/* One staged key tile (K at ks, V at vs) for the warp's MT row tiles:
 * scores, the online softmax of each row, then P V into o. */
template <int HS, class S, bool FULL, bool DROP>
static __device__ __forceinline__ void fm_warp_key_tile(float (*o)[HS / 8][4], float (*m)[2], float (*l)[2], const fm_q<HS, S> &q,
                                                        const __nv_bfloat16 *ks, const __nv_bfloat16 *vs, const fm_reach *reach,
                                                        const fm_lane_pos *at, float scale_log2, int b, int h, int T,
                                                        const tg_dropout &drop) {
    float s[S::MT][S::KB][4];
    fm_warp_scores<HS, S, FULL>(s, q, ks, reach);
    fm_warp_softmax_pv<HS, S, FULL, DROP>(o, m, l, s, vs, reach, at, scale_log2, b, h, T, drop);
}

/* The warp's finished rows: out = o / sum into rows 16 (MT warp + i) + g
 * (+ 8) of the bf16 staging tiles (the block's rows from 0), lse = max +
 * log(sum) of each row before T into lse_rows (the pair's, by row). */
template <int HS, int MT>
static __device__ __forceinline__ void fm_stage_output_rows(__nv_bfloat16 *tiles, float *lse_rows, const float (*o)[HS / 8][4],
                                                            const float (*m)[2], const float (*l)[2], const fm_lane_pos *at,
                                                            int warp, int T) {
    constexpr int ld = fm_ld(HS);
    const int g = ((int)threadIdx.x & 31) >> 2;
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const float sum = fm_row_sum(l[i][half]), inv = sum > 0.0f ? 1.0f / sum : 0.0f;
            __nv_bfloat16 *r = tiles + (fl_tile_row<MT>(warp, i) + g + 8 * half) * ld + 2 * at[i].t;
#pragma unroll
            for (int n = 0; n < HS / 8; n++) fm_store_pair(r + 8 * n, mma_pack(o[i][n][2 * half] * inv, o[i][n][2 * half + 1] * inv));
            if (at[i].t == 0 && at[i].row[half] < T) lse_rows[at[i].row[half]] = m[i][half] * 0.69314718f + logf(sum);
        }
}

#endif
