/* The block-level pieces of attention's backward on bf16 tensor cores
 * (flash_bwd.cu's kernels for bf16 activations with HS a multiple of 16 up
 * to FL_HS_MAX): FB_ROWS rows of q, k, v or dout staged in shared memory
 * as bf16 by 16-byte cp.async copies (double buffered by the kernels: the
 * next tile lands while the current one is used), each warp owning 16 of
 * the block's rows (32 in the dq kernel up to head size 64:
 * fb_dq_row_tiles), and the 16 x 16 blocks of scores and gradients as
 * mma.sync products (mma.cuh) with float32 accumulators. HS is a template argument so that
 * the fragment and accumulator arrays are registers.
 * Rounding: dS and P * keep are rounded to bf16 to become the A operand of
 * the second products (dq += dS k, dk += dS^T q, dv += (P keep)^T dout),
 * as flash attention does; everything else accumulates in float32. */
#ifndef KERNELS_CUDA_FLASH_BWD_MMA_CUH
#define KERNELS_CUDA_FLASH_BWD_MMA_CUH

#include <string.h>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/flash.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/vec.cuh"

#define FB_ROWS 64                /* query rows or keys per block */
#define FB_THREADS 128            /* 4 warps of 16 rows each */
#define FB_PAD 8                  /* bf16 after each staged row: rows stay 16-byte aligned, fragment loads conflict-free */
#define FB_LOG2E 1.4426950408889634f

/* FB_ROWS staged rows of one head: row r at e + r * (HS + FB_PAD). */
template <int HS>
struct fb_tile {
    static constexpr int ld = HS + FB_PAD;
    alignas(16) __nv_bfloat16 e[FB_ROWS * ld];
};

/* Whether the dk, dv kernel holds the warp's v fragments in registers
 * (HS / 2 of them a key tile, beside k's and the HS accumulators of dk and
 * dv). From HS 128 (one key tile a warp) they no longer fit in 255
 * registers (ptxas spilled 44 bytes): the block's v rows then stay staged
 * in shared memory and each fragment is loaded where it is used. */
template <int HS, int KT = 1>
static __host__ __device__ constexpr bool fb_v_held() {
    return HS * KT <= 112;
}

/* Key tiles of 16 keys each warp of the dk, dv kernel owns: one (a block
 * of FB_ROWS keys). Two (mma_bwd_variants, at head size 64, for timing)
 * feed each Q or dout fragment loaded from shared memory to two
 * products, as the dq kernel's two row tiles do. */
template <int HS>
static __host__ __device__ constexpr int fb_dkv_key_tiles() {
    return 1;
}

/* Where the dk, dv kernel stages its block's k and v rows (FB_ROWS x KT
 * each): k from tile 2 on, through buffer 1 before the second query tile
 * takes it, then v after k's KT tiles where the warps hold v's fragments
 * (they pass through too), or from tile 4 on where they are loaded at
 * each use (past both buffers: they stay). With DQ (flash_bwd_fused.cuh)
 * k goes after v's tiles instead, where it stays for dq's product. */
template <int HS, int KT>
static __host__ __device__ constexpr int fb_dkv_v_tile() {
    return fb_v_held<HS, KT>() ? 2 + KT : (2 + KT > 4 ? 2 + KT : 4);
}
template <int HS, int KT, bool DQ>
static __host__ __device__ constexpr int fb_dkv_k_tile() {
    return DQ ? fb_dkv_v_tile<HS, KT>() + KT : 2;
}

/* Row tiles of 16 query rows each warp of the dq kernel owns: two up to
 * head size 64, so that each K or V fragment loaded from shared memory
 * feeds two products (shared-memory requests per product halved, as the
 * forward's fm_row_tiles); one beyond, where the second tile's fragments
 * and accumulators would not fit in registers. A dq block has FB_ROWS x
 * MT query rows. */
template <int HS>
static __host__ __device__ constexpr int fb_dq_row_tiles() {
    return HS <= 64 ? 2 : 1;
}

/* The tile kernels' dynamic shared memory: two tiles (K and V, or Q and
 * dout) for each of two buffers, the tiles being used and the next ones;
 * for the dq kernel (MT row tiles a warp) the block's q and dout rows (MT
 * tiles each) in tiles 2 onwards, before buffer 1 takes its first key
 * tile; for the dk, dv kernel (KT key tiles a warp) its k and v rows
 * (fb_dkv_v_tile, fb_dkv_k_tile), and with DQ the dS^T tile after them. */
template <int HS>
static constexpr int fb_dq_shared_bytes(int MT) {
    return (2 + 2 * MT) * (int)sizeof(fb_tile<HS>);
}
template <int HS, int KT, bool DQ>
static constexpr int fb_dkv_shared_bytes() {
    if (DQ) /* then the dS^T tile, 64 keys x 64 queries */
        return (fb_dkv_k_tile<HS, KT, DQ>() + KT) * (int)sizeof(fb_tile<HS>) + (int)sizeof(fb_tile<FB_ROWS>);
    const int tiles = fb_dkv_v_tile<HS, KT>() + KT;
    return (tiles > 4 ? tiles : 4) * (int)sizeof(fb_tile<HS>);
}

/* What the probabilities of one (sequence, head) pair depend on besides
 * the scores: scale2 = scale * log2(e) (P = 2^(scale2 s - lse log2(e))). */
struct fb_pair {
    int b, h, T;
    float scale2;
    tg_dropout drop;
};

/* 8 bf16 (16 bytes, both ends 16-byte aligned): one vector load and store. */
static __device__ __forceinline__ void fb_copy8(__nv_bfloat16 *dst, const __nv_bfloat16 *src) {
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(src);
#else
    vec_check16(dst, "fb_copy8 (destination)");
    vec_check16(src, "fb_copy8 (source)");
    memcpy(dst, src, 16);
#endif
}

/* 8 bf16 from src (16-byte aligned), widened: one vector load. */
static __device__ __forceinline__ void fb_load8(float dst[8], const __nv_bfloat16 *src) {
    alignas(16) __nv_bfloat16 h[8];
    fb_copy8(h, src);
#pragma unroll
    for (int i = 0; i < 8; i++) dst[i] = __bfloat162float(h[i]);
}

static __device__ __forceinline__ void fb_zero8(__nv_bfloat16 *dst) {
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<uint4 *>(dst) = make_uint4(0u, 0u, 0u, 0u);
#else
    vec_check16(dst, "fb_zero8");
    memset(dst, 0, 16);
#endif
}

/* Two adjacent bf16 (4-byte aligned) from one register (mma_pack's). */
static __device__ __forceinline__ void fb_store_pair(__nv_bfloat16 *dst, uint32_t pair) {
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<uint32_t *>(dst) = pair;
#else
    memcpy(dst, &pair, 4);
#endif
}

/* tile row r = src[(b * T + r0 + r) * width + off ...] over HS columns,
 * zero for rows at or past T (masked, but must not be NaN). The launcher
 * checks src is 16-byte aligned; width and off are multiples of 16. The
 * rows come by cp.async (async_copy.cuh): they land after the caller's
 * async_commit and async_wait, and a __syncthreads shows them to the other
 * threads; the zero rows are plain stores. */
template <int HS>
static __device__ void fb_stage_async(fb_tile<HS> &tile, const __nv_bfloat16 *src, int width, int off, int b, int r0, int T) {
    constexpr int chunks = HS / 8; /* 16-byte pieces per row */
    const __nv_bfloat16 *rows = src + ((size_t)b * T + r0) * width + off;
    for (int e = threadIdx.x; e < FB_ROWS * chunks; e += FB_THREADS) {
        const int r = e / chunks, c = 8 * (e % chunks);
        __nv_bfloat16 *d = tile.e + r * fb_tile<HS>::ld + c;
        if (r0 + r < T)
            async_copy16(d, rows + (size_t)r * width + c);
        else
            fb_zero8(d);
    }
}

/* The A fragments (HS / 16 steps over the head's columns) of the 16 rows
 * starting at `rows` of a staged tile: the warp's q, dout, k or v, loaded
 * once and kept in registers. */
template <int HS>
static __device__ __forceinline__ void fb_rows_as_a(uint32_t a[HS / 16][4], const __nv_bfloat16 *rows) {
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) mma_load_a(a[kk], rows + 16 * kk, fb_tile<HS>::ld);
}

/* The warp's 16 rows as the A operand of fb_dots, step kk (columns 16 kk
 * .. 16 kk + 15 of the head) into a: fragments held in registers
 * (fb_rows_as_a's), or rows staged in shared memory, loaded at each use. */
struct fb_held {
    const uint32_t (*f)[4];
    __device__ __forceinline__ void operator()(int kk, uint32_t a[4]) const {
        a[0] = f[kk][0], a[1] = f[kk][1], a[2] = f[kk][2], a[3] = f[kk][3];
    }
};
template <int HS>
struct fb_staged {
    const __nv_bfloat16 *rows;
    __device__ __forceinline__ void operator()(int kk, uint32_t a[4]) const { mma_load_a(a, rows + 16 * kk, fb_tile<HS>::ld); }
};

/* For each of R row tiles, acc[i] (two n8 accumulators: a 16 x 16 block) =
 * the tile's 16 rows (A operand a_of[i]: fb_held or fb_staged) dotted with
 * the 16 staged rows starting at `rows`. Each B fragment is loaded once for
 * the R products; each tile's products run in the same order whatever R. */
template <int HS, int R, typename A>
static __device__ __forceinline__ void fb_dots(float acc[R][2][4], const A *a_of, const __nv_bfloat16 *rows) {
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int n = 0; n < 2; n++) acc[i][n][0] = acc[i][n][1] = acc[i][n][2] = acc[i][n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) {
        uint32_t bf[2][2];
        mma_load_b_rows_x2(bf, rows + 16 * kk, fb_tile<HS>::ld);
#pragma unroll
        for (int i = 0; i < R; i++) {
            uint32_t a[4];
            a_of[i](kk, a);
            mma_bf16_16816(acc[i][0], a, bf[0]);
            mma_bf16_16816(acc[i][1], a, bf[1]);
        }
    }
}

/* For each of R row tiles, acc[i] (16 x HS) += a[i] (16 x 16) times the 16
 * staged rows starting at `rows`; each B fragment loaded once for the R. */
template <int HS, int R>
static __device__ __forceinline__ void fb_accumulate(float acc[R][HS / 8][4], const uint32_t a[R][4], const __nv_bfloat16 *rows) {
#pragma unroll
    for (int n8 = 0; n8 < HS / 8; n8 += 2) {
        uint32_t bf[2][2];
        mma_load_b_cols_x2(bf, rows + 8 * n8, fb_tile<HS>::ld);
#pragma unroll
        for (int i = 0; i < R; i++) {
            mma_bf16_16816(acc[i][n8], a[i], bf[0]);
            mma_bf16_16816(acc[i][n8 + 1], a[i], bf[1]);
        }
    }
}

/* One element of a 16 x 16 block: from the score s = q . k and dp =
 * dout . v, returns dS = P (dp keep - D) and sets *kept = P keep, both 0
 * where masked; lse2 = lse log2(e). Only blocks on the diagonal or past T
 * (edge) need the mask. DROP: dropout is on (without it, no dropout code).
 * EDGE: the caller may pass edge true; without it the mask test is not
 * compiled at all (the blocks of whole tiles before the diagonal, most of
 * them, carry no per-element branch). FTZ: the forward's exp2_ftz (one
 * MUFU.EX2; a probability under 2^-126 flushed to 0, as it is to bf16's
 * P anyway bar denormals), where exp2f keeps denormal results at the cost
 * of a compare and two predicated multiplies around it: sm_90a's
 * instructions (the cubin's 16-byte words) fell by 280 to 296 in each
 * wgmma backward instance with it. */
template <bool DROP, bool EDGE, bool FTZ = false>
static __device__ __forceinline__ float fb_ds(float *kept, float s, float dp, float lse2, float D, int query, int key,
                                              bool edge, const fb_pair &c) {
    if (EDGE && edge && !fl_visible(query, 0, key, 0, c.T)) {
        *kept = 0.0f;
        return 0.0f;
    }
    const float x = s * c.scale2 - lse2;
    const float prob = FTZ ? exp2_ftz(x) : exp2f(x), keep = DROP ? fl_drop(c.drop, c.b, c.h, query, key, c.T) : 1.0f;
    *kept = prob * keep;
    return prob * (dp * keep - D);
}

/* fb_ds's FTZ in the mma.sync kernels at head size HS: every size but 48,
 * where the dk, dv kernel (128 registers for its blocks an SM) spilled 4
 * bytes with it on sm_90a (ptxas, CUDA 13.0). */
template <int HS>
static __host__ __device__ constexpr bool fb_ftz() {
    return HS != 48;
}

/* Whether any of R tiles' blocks needs the mask (edge: one flag a tile). */
template <int R>
static __device__ __forceinline__ bool fb_any(const bool edge[R]) {
    bool any = false;
#pragma unroll
    for (int i = 0; i < R; i++) any = any || edge[i];
    return any;
}

/* fb_dq_block's work, the mask compiled in only with EDGE (fb_ds). */
template <int HS, int R, bool DROP, bool EDGE>
static __device__ __forceinline__ void fb_dq_block_of(float dq[R][HS / 8][4], const uint32_t qf[R][HS / 16][4],
                                                      const uint32_t gf[R][HS / 16][4], const __nv_bfloat16 *krows,
                                                      const __nv_bfloat16 *vrows, const float lse2[R][2], const float D[R][2],
                                                      const int qw[R], int kt, const bool edge[R], const fb_pair &c) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float s[R][2][4], dp[R][2][4], kept;
    fb_held qa[R], ga[R];
#pragma unroll
    for (int i = 0; i < R; i++) qa[i] = fb_held{qf[i]}, ga[i] = fb_held{gf[i]};
    fb_dots<HS, R>(s, qa, krows);
    fb_dots<HS, R>(dp, ga, vrows);
    uint32_t ds[R][4];
#pragma unroll
    for (int i = 0; i < R; i++) {
#pragma unroll
        for (int n = 0; n < 2; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) { /* accumulator e: query g + 8 (e / 2), key 8 n + 2 t + e % 2 */
                const int row = g + 8 * (e >> 1), col = 8 * n + 2 * t + (e & 1);
                s[i][n][e] = fb_ds<DROP, EDGE, fb_ftz<HS>()>(&kept, s[i][n][e], dp[i][n][e], lse2[i][e >> 1], D[i][e >> 1], qw[i] + row,
                                               kt + col, edge[i], c);
            }
        mma_a_from_accumulators(ds[i], s[i][0], s[i][1]);
    }
    fb_accumulate<HS, R>(dq, ds, krows);
}

/* dq of R row tiles of 16 query rows (tile i from qw[i]) += dS k over the
 * 16 keys from kt, staged at krows, vrows; qf[i], gf[i]: the tile's q and
 * dout fragments; lse2[i], D[i]: of its rows qw[i] + g and qw[i] + g + 8;
 * edge[i]: the block touches the diagonal or T. With two tiles, the
 * instance without the mask runs where neither block needs it (most
 * blocks; edge is warp-uniform). One tile (head sizes from 80, and the
 * diagonal at 64 and below) keeps the masked instance only: a second one
 * took ptxas from 165 to 180 registers at head size 96 (3 blocks per SM
 * to 2), and asking for 3 made it spill. Each tile's arithmetic is the
 * same for any R (fb_dots, fb_accumulate), so R = 2 gives the bits of two
 * calls with R = 1. */
template <int HS, int R, bool DROP>
static __device__ void fb_dq_block(float dq[R][HS / 8][4], const uint32_t qf[R][HS / 16][4], const uint32_t gf[R][HS / 16][4],
                                   const __nv_bfloat16 *krows, const __nv_bfloat16 *vrows, const float lse2[R][2],
                                   const float D[R][2], const int qw[R], int kt, const bool edge[R], const fb_pair &c) {
    if (R == 1 || fb_any<R>(edge))
        fb_dq_block_of<HS, R, DROP, true>(dq, qf, gf, krows, vrows, lse2, D, qw, kt, edge, c);
    else
        fb_dq_block_of<HS, R, DROP, false>(dq, qf, gf, krows, vrows, lse2, D, qw, kt, edge, c);
}

/* fb_dkv_block's work, the mask compiled in only with EDGE (fb_ds). One
 * tile runs EDGE only where its block needs the mask: the constant lets
 * nvcc keep the statistics' loads behind the test (reading edge[0], it
 * hoisted them above the products, and ptxas spilled at head size 128). */
template <int HS, int R, bool DROP, bool EDGE, typename V>
static __device__ __forceinline__ void fb_dkv_block_of(float dk[R][HS / 8][4], float dv[R][HS / 8][4],
                                                       const uint32_t kf[R][HS / 16][4], const V *v_of,
                                                       const __nv_bfloat16 *qrows, const __nv_bfloat16 *grows, const float *lse2,
                                                       const float *D, const int kw[R], int qt, const bool edge[R],
                                                       const fb_pair &c, uint32_t ds[R][4]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float s[R][2][4], dp[R][2][4], kept[R][2][4];
    fb_held ka[R];
#pragma unroll
    for (int i = 0; i < R; i++) ka[i] = fb_held{kf[i]};
    fb_dots<HS, R>(s, ka, qrows);
    fb_dots<HS, R>(dp, v_of, grows);
    uint32_t pk[R][4];
#pragma unroll
    for (int i = 0; i < R; i++) {
#pragma unroll
        for (int n = 0; n < 2; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) { /* accumulator e: key g + 8 (e / 2), query 8 n + 2 t + e % 2 */
                const int col = 8 * n + 2 * t + (e & 1);
                s[i][n][e] = fb_ds<DROP, EDGE, fb_ftz<HS>()>(&kept[i][n][e], s[i][n][e], dp[i][n][e], lse2[col], D[col], qt + col,
                                               kw[i] + g + 8 * (e >> 1), R == 1 || edge[i], c);
            }
        mma_a_from_accumulators(pk[i], kept[i][0], kept[i][1]);
        mma_a_from_accumulators(ds[i], s[i][0], s[i][1]);
    }
    fb_accumulate<HS, R>(dv, pk, grows);
    fb_accumulate<HS, R>(dk, ds, qrows);
}

/* dk, dv of R key tiles of 16 keys (tile i from kw[i]) += over 16 query
 * rows from qt staged at qrows, grows (q, dout); kf[i]: the tile's k
 * fragments, v_of[i] its v rows as an A operand (fb_held or fb_staged:
 * fb_v_held); lse2, D: the query rows' statistics (16 from qt); edge[i]:
 * the block touches the diagonal or T (warp-uniform; where no tile's
 * does, the instance without the mask runs). The scores come out
 * transposed (keys as rows), so dS^T and (P keep)^T are accumulators that
 * become A fragments directly; ds[i] gets tile i's dS^T fragment (bf16,
 * unscaled: a fused kernel's dq product takes it; the dk, dv kernel
 * leaves it). Each tile's arithmetic is the same for any R (fb_dots,
 * fb_accumulate): R = 2 gives the bits of two calls with 1. */
template <int HS, int R, bool DROP, typename V>
static __device__ void fb_dkv_block(float dk[R][HS / 8][4], float dv[R][HS / 8][4], const uint32_t kf[R][HS / 16][4],
                                    const V *v_of, const __nv_bfloat16 *qrows, const __nv_bfloat16 *grows, const float *lse2,
                                    const float *D, const int kw[R], int qt, const bool edge[R], const fb_pair &c,
                                    uint32_t ds[R][4]) {
    if (fb_any<R>(edge))
        fb_dkv_block_of<HS, R, DROP, true>(dk, dv, kf, v_of, qrows, grows, lse2, D, kw, qt, edge, c, ds);
    else
        fb_dkv_block_of<HS, R, DROP, false>(dk, dv, kf, v_of, qrows, grows, lse2, D, kw, qt, edge, c, ds);
}

/* The statistics of query row t of pair p (chunk pair j): lse log2(e) and
 * D, 0 past T. */
static __device__ __forceinline__ void fb_row_stats(float &lse2, float &Dt, const float *lse, const float *D, int p, int j, int t,
                                                    int T) {
    lse2 = t < T ? lse[(size_t)p * T + t] * FB_LOG2E : 0.0f;
    Dt = t < T ? D[(size_t)j * T + t] : 0.0f;
}

/* Row r (counted from the block's first) of the rows staged from tile
 * `first` on: MT tiles of FB_ROWS rows one after the other. */
template <int HS>
static __device__ __forceinline__ const __nv_bfloat16 *fb_staged_row(const fb_tile<HS> *tiles, int first, int r) {
    return tiles[first + r / FB_ROWS].e + (r % FB_ROWS) * fb_tile<HS>::ld;
}

/* Rows r0 + g and r0 + g + 8 of the warp's accumulators (16 x HS) times
 * mul into dst's head columns [off, off + HS) as bf16, rows past T left. */
template <int HS>
static __device__ void fb_store(__nv_bfloat16 *dst, const float acc[HS / 8][4], int width, int off, int b, int r0, int T,
                                float mul) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int row = r0 + g + 8 * half;
        if (row >= T) continue;
        __nv_bfloat16 *base = dst + ((size_t)b * T + row) * width + off + 2 * t;
#pragma unroll
        for (int n8 = 0; n8 < HS / 8; n8++)
            fb_store_pair(base + 8 * n8, mma_pack(acc[n8][2 * half] * mul, acc[n8][2 * half + 1] * mul));
    }
}

#endif
