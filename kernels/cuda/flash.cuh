/* Shared pieces of the fused causal attention (flash_fwd.cu, flash_bwd.cu),
 * the CUDA twin of kernels/cpu/attention.c: tiles of FL_TILE query rows and
 * FL_TILE keys of one (sequence, head) pair p = b * NH + h staged in shared
 * memory as float32 (bf16 is widened on load, so the arithmetic is float32
 * in both precisions), the causal mask, and the dropout factor drawn from
 * the CPU's counter (util/rng_core.h), so masks are bit-identical. Tiles
 * wholly above the diagonal are never visited. The tensor-core forward
 * (bf16; its tiles in flash_fwd_mma.cuh and flash_mma.cuh) takes only fl_drop, fl_min,
 * fl_tile_row, the fl_grid helpers and FL_MAX_PAIRS from here. */
#ifndef KERNELS_CUDA_FLASH_CUH
#define KERNELS_CUDA_FLASH_CUH

#include <math.h>

#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/exp2_ftz.cuh"
#include "kernels/cuda/kernels.h"
#include "util/rng_core.h"

#define FL_TILE 16                   /* query rows and keys per tile */
#define FL_THREADS 128               /* threads per block: 8 per tile row */
#define FL_HS_MAX 128                /* largest head size the tiles hold */
#define FL_COLS (FL_HS_MAX / 8)      /* accumulator columns per thread */
#define FL_MAX_PAIRS 65535           /* pairs per launch (grid.y's limit, where the CUDA-core kernels put them) */

typedef float fl_tile[FL_TILE][FL_HS_MAX];
typedef float fl_square[FL_TILE][FL_TILE + 1]; /* +1: no bank conflicts on columns */

static __host__ __device__ __forceinline__ int fl_min(int a, int b) { return a < b ? a : b; }

/* The tensor-core kernels' row tiles: the first of the 16 rows, counted from
 * the block's first, of warp w's row tile i when each warp owns MT tiles
 * (contiguous: warp w owns rows 16 MT w .. 16 MT (w + 1) - 1). */
template <int MT>
static __device__ __forceinline__ int fl_tile_row(int w, int i) {
    return 16 * (MT * w + i);
}

/* The tensor-core kernels' grids: the launch's pairs, each cut into tiles
 * of tile_rows query rows (or keys), in one of three orders, chosen at run
 * time (an argument of the kernels, not an instance each; kernels.h's
 * cuda_flash_order). A block's rank is its tile's place in its pair,
 * longest first (the last query rows, which see every key; or the first
 * keys, which every row sees). The block scheduler starts blocks in about
 * the order of their linear index, x fastest (observed behaviour, not a
 * documented guarantee). No order changes any bits: each block does the
 * same work.
 * - CUDA_FLASH_PAIRS_FIRST (every run's): pairs along x, ranks along y,
 *   so every pair's longest tile starts before any pair's second longest
 *   and the shortest fill the kernel's end. With the tiles along x, each
 *   pair's ran longest to shortest and the last pairs' longest started
 *   near the end: a model of the GPT-2 124M and Megatron 1.2B grids (132
 *   SMs sharing their time among resident blocks) put that order 9 to 15%
 *   over the ideal and this one 2 to 3% (unmeasured on a GPU). But it
 *   keeps every pair's K and V (or Q and dout) live at once.
 * - CUDA_FLASH_TILES_FIRST (the order before c30e2f3): ranks along x,
 *   pairs along y: a pair's tiles run together, and so share its K and V
 *   in L2.
 * - CUDA_FLASH_L2_GROUPS: a linear grid of groups of `group` consecutive
 *   pairs (fl_l2_group: their K and V fit in part of L2), ranked longest
 *   first within each group, the groups one after the other (the last
 *   may be smaller).
 * T / 64 tiles stay within grid.y's 65535 (model.seq_len <= 2^20); the
 * CUDA-core kernels' 16-row tiles could exceed it, and keep the tiles
 * along x. */
struct fl_map {
    int order, pairs, tiles, group;
};
struct fl_launch {
    dim3 grid;
    fl_map map;
};

/* L2 of the cards the order is tuned for (H100 and H200: 50 MiB; the A100
 * has 40) and the share of it a group's K and V may take, leaving the rest
 * to Q, dout, the outputs and the other kernels' lines. */
#define FL_L2_BYTES (50 << 20)
#define FL_L2_SHARE 2

/* Pairs a CUDA_FLASH_L2_GROUPS group holds: as many as have their K and V
 * (2 T HS elements of elem_bytes each) within FL_L2_BYTES / FL_L2_SHARE,
 * at least 1. GPT-2 124M (T 1024, HS 64, bf16: 256 KiB a pair): 100;
 * the Megatron 1.2B model (HS 96): 66. */
static inline int fl_l2_group(int T, int HS, int elem_bytes) {
    const size_t pair = 2 * (size_t)T * (size_t)HS * (size_t)elem_bytes;
    const size_t g = (size_t)(FL_L2_BYTES / FL_L2_SHARE) / (pair > 0 ? pair : 1);
    return g < 1 ? 1 : g > 65535 ? 65535 : (int)g;
}

/* Every run's order. */
static inline cuda_flash_order fl_order_default() { return cuda_flash_order{CUDA_FLASH_PAIRS_FIRST, 0}; }

/* The grid of `pairs` pairs of T rows in tiles of tile_rows, in order o
 * (its groups of o.group pairs, or fl_l2_group's at head size HS in bf16
 * when 0). */
static inline fl_launch fl_grid(int pairs, int T, int tile_rows, cuda_flash_order o, int HS) {
    const int tiles = (T + tile_rows - 1) / tile_rows;
    if (tiles > 65535) {
        tg_err e;
        tg_fail(&e, "attention: T = %d makes %d tiles of %d rows a pair, over grid.y's 65535", T, tiles, tile_rows);
        tg_die("train_gpt", &e);
    }
    const fl_map map = {o.order, pairs, tiles, o.group > 0 ? o.group : fl_l2_group(T, HS, 2)};
    if (o.order == CUDA_FLASH_TILES_FIRST) return fl_launch{dim3((unsigned)tiles, (unsigned)pairs), map};
    if (o.order == CUDA_FLASH_L2_GROUPS) return fl_launch{dim3((unsigned)pairs * (unsigned)tiles), map}; /* < 2^31: 65535 x 65535 */
    return fl_launch{dim3((unsigned)pairs, (unsigned)tiles), map};
}

/* Whether o is an order fl_grid knows (the _shaped entry points refuse others). */
static inline bool fl_order_known(cuda_flash_order o) { return o.order >= 0 && o.order < CUDA_FLASH_ORDERS && o.group >= 0; }

/* This block's pair (counted from the launch's first) and rank (0: the
 * pair's longest tile). */
struct fl_block {
    int pair, rank;
};
static __device__ __forceinline__ fl_block fl_grid_block(const fl_map &m) {
    if (m.order == CUDA_FLASH_TILES_FIRST) return fl_block{(int)blockIdx.y, (int)blockIdx.x};
    if (m.order == CUDA_FLASH_L2_GROUPS) {
        /* group g holds pairs g G .. g G + n - 1 (n = G but in the last), its
         * n tiles-long ranks one after the other from linear block g G tiles */
        const int L = (int)blockIdx.x, first = L / (m.group * m.tiles) * m.group;
        const int n = fl_min(m.group, m.pairs - first), i = L - first * m.tiles;
        return fl_block{first + i % n, i / n};
    }
    return fl_block{(int)blockIdx.x, (int)blockIdx.y};
}
/* The backward's kernels keep the pairs-first order as a grid of their
 * own (fl_grid_pairs_first): the order as an argument took their
 * registers up by up to 19 (dq at head size 96: 165 to 184 on sm_90a, 3
 * blocks an SM to 2) and made five instances spill, where the forward's
 * launch bounds held. */
static inline dim3 fl_grid_pairs_first(int pairs, int T, int tile_rows) {
    return fl_grid(pairs, T, tile_rows, fl_order_default(), 0).grid;
}
/* A pairs-first block's pair, query tile (the last first) and key tile
 * (the first first), from the block index alone. */
static __device__ __forceinline__ int fl_grid_pair() { return (int)blockIdx.x; }
static __device__ __forceinline__ int fl_grid_query_tile() { return (int)(gridDim.y - 1 - blockIdx.y); }
static __device__ __forceinline__ int fl_grid_key_tile() { return (int)blockIdx.y; }

/* A persistent launch's item n for this block (gridDim.x blocks, about
 * one an SM, over a list of `items` longest first): the list dealt round
 * by round, every other round in reverse (round n gives block b item n G
 * + b, or n G + G - 1 - b), so that a block first in one round is last in
 * the next and each block's sum of work stays near the mean (a model of
 * the GPT-2 124M forward on 132 SMs: within 4% of the ideal, where
 * dealing every round forwards was 9% over). False past the list's end:
 * only the last round runs out, so the first n without an item ends the
 * block's share. */
static __device__ __forceinline__ bool fl_persistent_item(int n, int items, int &idx) {
    const int G = (int)gridDim.x, b = (int)blockIdx.x;
    idx = n * G + ((n & 1) ? G - 1 - b : b);
    return idx < items;
}
/* A block's query tile (forward, dq): the last first, as the last rows see
 * the most keys. */
static __device__ __forceinline__ int fl_grid_query_tile(const fl_map &m, const fl_block &at) { return m.tiles - 1 - at.rank; }
/* A block's key tile (dk, dv): the first first, as every row sees the
 * first keys. */
static __device__ __forceinline__ int fl_grid_key_tile(const fl_block &at) { return at.rank; }

/* The dropout factor of probability (b, h, t, t2) of this rank (1 when p <= 0). */
static __device__ __forceinline__ float fl_drop(const tg_dropout &d, int b, int h, int t, int t2, int T) {
    if (d.p <= 0.0f) return 1.0f;
    uint64_t seq = d.row0 + (uint64_t)b, head = (uint64_t)(d.head0 + h);
    return rng_dropout_scale(d.p, d.seed, tg_dropout_stream(&d),
                             ((seq * (uint64_t)d.heads_total + head) * (uint64_t)T + (uint64_t)t) * (uint64_t)T + (uint64_t)t2);
}

/* tile[r][i] = src[(b * T + r0 + r) * width + off + i] widened to float,
 * zero for rows at or past T (they are masked, but must not be NaN). */
template <typename E>
static __device__ void fl_load_tile(fl_tile tile, const E *src, int width, int off, int b, int r0, int T, int HS) {
    for (int e = threadIdx.x; e < FL_TILE * HS; e += blockDim.x) {
        const int r = e / HS, i = e % HS, t = r0 + r;
        tile[r][i] = t < T ? tg_load(src, ((size_t)b * T + t) * width + off + i) : 0.0f;
    }
}

/* Causal mask: key k0 + c is visible from query q0 + r. */
static __device__ __forceinline__ bool fl_visible(int q0, int r, int k0, int c, int T) {
    return k0 + c <= q0 + r && q0 + r < T;
}

/* out[r][c] = scale * a[r] . b[c] over HS, in a fixed order. */
static inline __device__ void fl_products(fl_square out, const fl_tile a, const fl_tile b, int HS, float scale) {
    for (int e = threadIdx.x; e < FL_TILE * FL_TILE; e += blockDim.x) {
        const int r = e / FL_TILE, c = e % FL_TILE;
        float s = 0.0f;
        for (int i = 0; i < HS; i++) s += a[r][i] * b[c][i];
        out[r][c] = s * scale;
    }
}

/* acc[j] (column threadIdx.x % 8 + 8 j of row threadIdx.x / 8) += sum over
 * c of w[r][c] * m[c][i] (transposed: w[c][r] when wt). */
static inline __device__ void fl_accumulate(float *acc, const fl_square w, const fl_tile m, int HS, bool wt) {
    const int r = threadIdx.x >> 3, c8 = threadIdx.x & 7;
#pragma unroll
    for (int j = 0; j < FL_COLS; j++) {
        const int i = c8 + 8 * j;
        if (i >= HS) break;
        float s = acc[j];
        for (int c = 0; c < FL_TILE; c++) s += (wt ? w[c][r] : w[r][c]) * m[c][i];
        acc[j] = s;
    }
}

/* Stores acc (the thread's columns of tile row r) into row r0 + r of dst
 * at column offset off, times mul, when the row exists. */
template <typename E>
static __device__ void fl_store_row(E *dst, const float *acc, int width, int off, int b, int r0, int T, int HS, float mul) {
    const int r = threadIdx.x >> 3, c8 = threadIdx.x & 7;
    if (r0 + r >= T) return;
#pragma unroll
    for (int j = 0; j < FL_COLS; j++) {
        const int i = c8 + 8 * j;
        if (i >= HS) break;
        tg_store(dst, ((size_t)b * T + r0 + r) * width + off + i, acc[j] * mul);
    }
}

/* Entry k (in table order) of head size HS in a table of kernel variants
 * (each with an `hs`): the shapes built for tuning (flash_fwd.cu's
 * fm_variants, flash_bwd.cu's mma_bwd_variants); NULL past the last. */
template <class V, size_t N>
static const V *fl_variant(const V (&table)[N], int HS, int k) {
    for (const V &v : table)
        if (v.hs == HS && k-- == 0) return &v;
    return NULL;
}

/* Refuses what the tiles cannot hold (a configuration error, before launch). */
static inline void fl_check_shape(int HS, const char *what) {
    if (HS <= FL_HS_MAX) return;
    tg_err e;
    tg_fail(&e, "%s: head size %d exceeds the fused attention's %d (model.n_embd / model.n_head)", what, HS, FL_HS_MAX);
    tg_die("train_gpt", &e);
}

#endif
