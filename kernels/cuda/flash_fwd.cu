/* Fused causal attention, forward (flash attention): one block per tile of
 * query rows of one pair, key/value tiles streamed through shared memory up
 * to the diagonal (tiles above it never visited), an online softmax
 * (running max and sum per row), dropout on the probabilities, out = sum
 * P * keep * v / sum P, and lse = max + log(sum) kept for the backward. No
 * T x T buffer. Two kernels:
 * - bf16 activations with HS % 16 == 0, HS <= FM_HS_MAX: tensor cores
 *   (flash_fwd_mma.cuh, flash_mma.cuh, mma.cuh). 4 warps own 32 query rows each of a 128-row
 *   block up to head size 64, 16 each of a 64-row block beyond
 *   (fm_row_tiles); Q stays in registers as A fragments; K and V tiles of 64 keys are double
 *   buffered in dynamic shared memory, the next copied in by cp.async
 *   (async_copy.cuh) while the tensor cores use the current one; S = Q K^T
 *   and O += P V are bf16 mma.sync products with float32 accumulation, the
 *   softmax runs on the accumulators (each row spread over 4 lanes) in
 *   base 2 (the scale folds log2(e) in), and P, rounded to bf16, is fed to
 *   P V straight from the score accumulators. Rounding: the scores are
 *   exact products of the bf16 inputs summed in float32 (in the tensor
 *   cores' order); P (after dropout) and out are rounded to bf16, as
 *   FlashAttention does; the row sums and lse stay float32 and sum P before
 *   dropout, as the CPU does.
 *   So the result differs from kernels/cpu/attention.c's float32 twin by
 *   bf16 rounding (the kernel tests' bf16 tolerance, 1e-2).
 *   That block shape (fm_tuned) is the one every run takes; a few others are
 *   built beside it for head sizes 64, 96 and 128 (fm_variants), to be timed
 *   against it on a GPU through cuda_attention_forward_shaped
 *   (tests/gpu/bench_attention.c).
 * - otherwise (float32, or head sizes such as 24): CUDA cores, FL_TILE rows
 *   and keys per tile, float32 arithmetic; in float32 it matches the CPU to
 *   1e-5. */
#include "kernels/cuda/flash.cuh"
#include "kernels/cuda/flash_fwd_mma.cuh"

namespace {

/* Rows of the score tile s become P * keep with the running statistics
 * updated: one thread per row (FL_TILE threads), so sums run in key order. */
static __device__ void online_softmax(fl_square s, float *row_max, float *row_sum, float *row_corr, int q0, int k0, int b,
                                      int h, int T, const tg_dropout &drop) {
    const int r = threadIdx.x;
    if (r >= FL_TILE) return;
    const float m_old = row_max[r];
    float m_new = m_old;
    for (int c = 0; c < FL_TILE; c++)
        if (fl_visible(q0, r, k0, c, T)) m_new = fmaxf(m_new, s[r][c]);
    if (m_new == -INFINITY) { /* a padding row past T: contributes nothing */
        for (int c = 0; c < FL_TILE; c++) s[r][c] = 0.0f;
        row_corr[r] = 1.0f;
        return;
    }
    float sum = 0.0f;
    for (int c = 0; c < FL_TILE; c++) {
        const float p = fl_visible(q0, r, k0, c, T) ? expf(s[r][c] - m_new) : 0.0f;
        sum += p;
        s[r][c] = p > 0.0f ? p * fl_drop(drop, b, h, q0 + r, k0 + c, T) : 0.0f;
    }
    row_corr[r] = expf(m_old - m_new);
    row_sum[r] = row_sum[r] * row_corr[r] + sum;
    row_max[r] = m_new;
}

template <typename E>
__global__ void __launch_bounds__(FL_THREADS)
    flash_forward_kernel(E *out, float *lse, const E *qkv, int p0, int T, int NH, int HS, float scale, tg_dropout drop) {
    drop = tg_dropout_read_step(drop);
    __shared__ fl_tile q, k, v;
    __shared__ fl_square s;
    __shared__ float row_max[FL_TILE], row_sum[FL_TILE], row_corr[FL_TILE];
    const int q0 = blockIdx.x * FL_TILE, p = p0 + blockIdx.y, b = p / NH, h = p % NH, C = NH * HS;
    fl_load_tile(q, qkv, 3 * C, h * HS, b, q0, T, HS);
    if (threadIdx.x < FL_TILE) {
        row_max[threadIdx.x] = -INFINITY;
        row_sum[threadIdx.x] = 0.0f;
    }
    float acc[FL_COLS];
#pragma unroll
    for (int j = 0; j < FL_COLS; j++) acc[j] = 0.0f;
    const int r = threadIdx.x >> 3, c8 = threadIdx.x & 7;
    const int k_end = fl_min(q0 + FL_TILE, T); /* tiles above the diagonal are skipped */
    for (int k0 = 0; k0 < k_end; k0 += FL_TILE) {
        __syncthreads(); /* the previous tile's readers are done */
        fl_load_tile(k, qkv, 3 * C, C + h * HS, b, k0, T, HS);
        fl_load_tile(v, qkv, 3 * C, 2 * C + h * HS, b, k0, T, HS);
        __syncthreads();
        fl_products(s, q, k, HS, scale);
        __syncthreads();
        online_softmax(s, row_max, row_sum, row_corr, q0, k0, b, h, T, drop);
        __syncthreads();
        const float corr = row_corr[r];
#pragma unroll
        for (int j = 0; j < FL_COLS; j++) acc[j] *= corr;
        fl_accumulate(acc, s, v, HS, false);
    }
    if (q0 + r >= T) return;
    fl_store_row(out, acc, C, h * HS, b, q0, T, HS, 1.0f / row_sum[r]);
    if (c8 == 0) lse[(size_t)p * T + q0 + r] = row_max[r] + logf(row_sum[r]);
}

template <typename E>
void flash_forward(cuda_ctx *ctx, E *out, float *lse, const E *qkv, int B, int T, int NH, int HS, tg_dropout drop) {
    const float scale = 1.0f / sqrtf((float)HS);
    const unsigned q_tiles = (unsigned)((T + FL_TILE - 1) / FL_TILE);
    for (int p0 = 0; p0 < B * NH; p0 += FL_MAX_PAIRS) {
        const int np = fl_min(FL_MAX_PAIRS, B * NH - p0);
        flash_forward_kernel<<<dim3(q_tiles, (unsigned)np), FL_THREADS, 0, ctx->stream>>>(out, lse, qkv, p0, T, NH, HS, scale,
                                                                                         drop);
        CUDA_LAUNCHED("flash_forward_kernel");
    }
}

/* ---- tensor cores: bf16, HS % 16 == 0, HS <= FM_HS_MAX ---- */

/* Row tiles of 16 query rows each warp owns: two up to head size 64, so
 * that each K or V fragment loaded from shared memory feeds two products
 * (shared-memory requests per product halved, as FlashAttention 2's
 * 128-row blocks of 4 warps); one beyond, where the second tile's scores,
 * outputs and Q fragments would not fit in registers. */
template <int HS>
static __host__ __device__ constexpr int fm_row_tiles() {
    return HS <= 64 ? 2 : 1;
}

/* Blocks per SM the forward is built for (__launch_bounds__'s minimum):
 * ptxas then keeps each thread within 65536 / (128 x blocks) registers.
 * Two where a warp holds two row tiles (up to head size 64) or a 112- or
 * 128-wide head's Q and accumulators, or carries the dropout code; three
 * at 80 and 96 without dropout, where 168 registers hold everything (with
 * dropout, three spilled 36 bytes at 96). Left to itself, ptxas chose the
 * same occupancy, except at head sizes 16 and 32 with the ex2.approx.ftz
 * softmax (exp2_ftz): there it aimed for three blocks and spilled 4 and 12
 * bytes to get them. */
template <int HS, bool DROP>
static __host__ __device__ constexpr int fm_blocks_per_sm() {
    return !DROP && (HS == 80 || HS == 96) ? 3 : 2;
}

/* The shape every run takes: 64-key tiles, Q in registers, the row tiles
 * and occupancy above. Other shapes are built for a few head sizes only,
 * to be timed against it (fm_variants). */
template <int HS, bool DROP>
using fm_tuned = fm_shape<fm_row_tiles<HS>(), 8, false, fm_blocks_per_sm<HS, DROP>()>;

/* The key tiles of a block (without S::AHEAD): tile kt's K and V sit in
 * buffer kt % 2, and tile kt + 1 is copied into the other buffer while
 * tile kt is used; one barrier a tile. Without dropout, key tiles wholly
 * before the block's rows (all but its last one or two) take the unmasked
 * fm_warp_key_tile (with it, the second copy of the dropout code made
 * ptxas spill at head size 16). Tile 0 comes with the kernel's Q. */
template <int HS, bool DROP, class S>
static __device__ __forceinline__ void fm_key_loop(float (*o)[HS / 8][4], float (*m)[2], float (*l)[2], fm_lane_pos *at,
                                                   const fm_q<HS, S> &q, __nv_bfloat16 *tiles, const __nv_bfloat16 *src, int C,
                                                   size_t stride, int T, bool vec, int q0, int warp, int k_tiles, float scale_log2,
                                                   int b, int h, const tg_dropout &drop) {
    constexpr int MT = S::MT, KEYS = S::KEYS, tile = KEYS * fm_ld(HS);
    for (int kt = 0; kt < k_tiles; kt++) {
        const int k0 = kt * KEYS;
        if (kt + 1 < k_tiles) { /* tile kt + 1 into the other buffer: its readers passed the last barrier */
            fm_stage_kv<HS, KEYS>(tiles + ((kt + 1) & 1) * 2 * tile, src, C, stride, k0 + KEYS, T, vec);
            async_commit();
        }
        fm_reach reach[MT];
#pragma unroll
        for (int i = 0; i < MT; i++) {
            reach[i] = fm_reach_of<KEYS>(q0 + fl_tile_row<MT>(warp, i), k0);
            at[i].k0 = k0;
        }
        const __nv_bfloat16 *ks = tiles + (kt & 1) * 2 * tile, *vs = ks + tile;
        if (!DROP && k0 + KEYS <= q0) /* block-uniform: every row tile sees every key (fm_reach_of's first case) */
            fm_warp_key_tile<HS, S, true, DROP>(o, m, l, q, ks, vs, reach, at, scale_log2, b, h, T, drop);
        else if (reach[MT - 1].n_blocks > 0) /* warp-uniform: the tile is not wholly after the warp's rows */
            fm_warp_key_tile<HS, S, false, DROP>(o, m, l, q, ks, vs, reach, at, scale_log2, b, h, T, drop);
        async_wait<0>();
        __syncthreads(); /* tile kt + 1 is in, and tile kt's readers are done */
    }
}

/* How warp `warp` of the block of rows from q0 meets the key tile from
 * k0 (reach: each row tile's fm_reach_of): 2 every row sees every key and
 * there is no dropout (block-uniform: the unmasked code), 1 the warp sees
 * some keys, 0 none (warp-uniform: the tile is wholly after its rows). */
template <int MT, int KEYS, bool DROP>
static __device__ __forceinline__ int fm_tile_kind(fm_reach *reach, int q0, int warp, int k0) {
#pragma unroll
    for (int i = 0; i < MT; i++) reach[i] = fm_reach_of<KEYS>(q0 + fl_tile_row<MT>(warp, i), k0);
    return !DROP && k0 + KEYS <= q0 ? 2 : reach[MT - 1].n_blocks > 0 ? 1 : 0;
}

/* The scores of a key tile (K at ks) of kind `kind` (fm_tile_kind's; none
 * for 0), and then its softmax and P V (V at vs): the code the kernel's
 * usual loop runs for that kind, in two halves. */
template <int HS, class S>
static __device__ __forceinline__ void fm_kind_scores(float (*s)[S::KB][4], const fm_q<HS, S> &q, const __nv_bfloat16 *ks,
                                                      const fm_reach *reach, int kind) {
    if (kind == 2)
        fm_warp_scores<HS, S, true>(s, q, ks, reach);
    else if (kind == 1)
        fm_warp_scores<HS, S, false>(s, q, ks, reach);
}
template <int HS, class S, bool DROP>
static __device__ __forceinline__ void fm_kind_softmax_pv(float (*o)[HS / 8][4], float (*m)[2], float (*l)[2], float (*s)[S::KB][4],
                                                          const __nv_bfloat16 *vs, const fm_reach *reach, const fm_lane_pos *at,
                                                          int kind, float scale_log2, int b, int h, int T, const tg_dropout &drop) {
    if (kind == 2)
        fm_warp_softmax_pv<HS, S, true, DROP>(o, m, l, s, vs, reach, at, scale_log2, b, h, T, drop);
    else if (kind == 1)
        fm_warp_softmax_pv<HS, S, false, DROP>(o, m, l, s, vs, reach, at, scale_log2, b, h, T, drop);
}

/* The key tiles of a block with S::AHEAD: the scores of tile kt + 1 are
 * issued before the softmax of tile kt, so that its exponentials overlap
 * tensor work (two score tiles in registers). K runs a tile ahead of V:
 * tile kt's K lies in buffer kt % 2's K rows, its V in buffer kt % 2's V
 * rows, and at the top of iteration kt (one barrier: K of kt + 1 and V of
 * kt are in, and the readers of K of kt and V of kt - 1 are done) K of kt
 * + 2 and V of kt + 1 are copied into the rows those readers left. Tile
 * 0 comes with the kernel's Q; K of tile 1 lands under tile 0's scores.
 * Each tile's arithmetic is the usual loop's (fm_tile_kind picks the same
 * code), so the bits are those of the shape without AHEAD. */
template <int HS, bool DROP, class S>
static __device__ __forceinline__ void fm_key_loop_ahead(float (*o)[HS / 8][4], float (*m)[2], float (*l)[2], fm_lane_pos *at,
                                                         const fm_q<HS, S> &q, __nv_bfloat16 *tiles, const __nv_bfloat16 *src,
                                                         int C, size_t stride, int T, bool vec, int q0, int warp, int k_tiles,
                                                         float scale_log2, int b, int h, const tg_dropout &drop) {
    constexpr int MT = S::MT, KB = S::KB, KEYS = S::KEYS, tile = KEYS * fm_ld(HS);
    float s[MT][KB][4], s_next[MT][KB][4];
    fm_reach reach[MT], reach_next[MT];
    int kind = fm_tile_kind<MT, KEYS, DROP>(reach, q0, warp, 0);
    if (k_tiles > 1) { /* buffer 1 is free (the caller's last barrier) */
        fm_stage_keys<HS, KEYS>(tiles + 2 * tile, src + C, stride, KEYS, T, vec);
        async_commit();
    }
    fm_kind_scores<HS, S>(s, q, tiles, reach, kind);
    for (int kt = 0; kt < k_tiles; kt++) {
        async_wait<0>();
        __syncthreads(); /* K of kt + 1 and V of kt are in; K of kt and V of kt - 1 are free */
        if (kt + 2 < k_tiles) fm_stage_keys<HS, KEYS>(tiles + (kt & 1) * 2 * tile, src + C, stride, (kt + 2) * KEYS, T, vec);
        if (kt + 1 < k_tiles) {
            fm_stage_keys<HS, KEYS>(tiles + ((kt + 1) & 1) * 2 * tile + tile, src + 2 * C, stride, (kt + 1) * KEYS, T, vec);
            async_commit();
        }
        int kind_next = 0;
        if (kt + 1 < k_tiles) {
            kind_next = fm_tile_kind<MT, KEYS, DROP>(reach_next, q0, warp, (kt + 1) * KEYS);
            fm_kind_scores<HS, S>(s_next, q, tiles + ((kt + 1) & 1) * 2 * tile, reach_next, kind_next);
        }
#pragma unroll
        for (int i = 0; i < MT; i++) at[i].k0 = kt * KEYS;
        fm_kind_softmax_pv<HS, S, DROP>(o, m, l, s, tiles + (kt & 1) * 2 * tile + tile, reach, at, kind, scale_log2, b, h, T, drop);
        kind = kind_next;
#pragma unroll
        for (int i = 0; i < MT; i++) {
            reach[i] = reach_next[i];
#pragma unroll
            for (int j = 0; j < KB; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) s[i][j][e] = s_next[i][j][e];
        }
    }
    __syncthreads(); /* the last V's readers are done (nothing is in flight) */
}

/* One block: query rows [q0, q0 + FM_ROWS MT) of pair p0 + its pair (map),
 * warp w row tiles MT w .. MT w + MT - 1 (16 rows each), against key tiles
 * of S::KEYS keys. Query blocks run longest first, in the order `map`
 * says (fl_grid: every run's takes every pair's last rows before any
 * pair's earlier ones).
 * Two buffers of K and V tiles in dynamic shared memory (K, then V), filled
 * by cp.async while the other is used (fm_key_loop, or fm_key_loop_ahead
 * with S::AHEAD); Q and key tile 0 come first, Q passing through buffer 1
 * (or with S::QS staying in its own rows after the buffers), the output
 * rows through buffer 0 last. vec: qkv and out allow 16-byte accesses.
 * DROP: dropout on (an instance of its own, so that the usual run without
 * it carries no dropout code). */
template <int HS, bool DROP, class S>
__global__ void __launch_bounds__(FM_THREADS, S::MINB)
    flash_forward_mma_kernel(__nv_bfloat16 *out, float *lse, const __nv_bfloat16 *qkv, int p0, int T, int NH, float scale_log2,
                             tg_dropout drop, bool vec, fl_map map) {
    drop = tg_dropout_read_step(drop);
    constexpr int ld = fm_ld(HS), NB = HS / 8, MT = S::MT, KEYS = S::KEYS, tile = KEYS * ld;
    extern __shared__ __align__(16) __nv_bfloat16 fm_tiles[]; /* fm_forward_shared_bytes<HS, S>() */
    const fl_block blk = fl_grid_block(map);
    const int q0 = fl_grid_query_tile(map, blk) * FM_ROWS * MT;
    const int p = p0 + blk.pair, b = p / NH, h = p % NH, C = NH * HS;
    const int warp = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31, g = lane >> 2;
    const size_t stride = 3 * (size_t)C;
    const __nv_bfloat16 *src = qkv + (size_t)b * T * stride + (size_t)h * HS;

    /* Q, then key tile 0, as two groups: Q's fragments load while tile 0 lands */
    __nv_bfloat16 *qs = fm_tiles + (S::QS ? 4 : 2) * tile;
#pragma unroll
    for (int i = 0; i < MT; i++) fm_stage_async<HS>(qs + i * FM_ROWS * ld, src, stride, q0 + i * FM_ROWS, T, vec);
    async_commit();
    fm_stage_kv<HS, KEYS>(fm_tiles, src, C, stride, 0, T, vec);
    async_commit();
    async_wait<1>();
    __syncthreads();
    fm_q<HS, S> q;
    q.rows = qs + fl_tile_row<MT>(warp, 0) * ld;
    q.load_held();
    async_wait<0>();
    __syncthreads(); /* tile 0 is in, and (without S::QS) Q's readers are done: buffer 1 is free */

    float o[MT][NB][4], m[MT][2], l[MT][2];
    fm_lane_pos at[MT];
#pragma unroll
    for (int i = 0; i < MT; i++) {
        const int r0 = q0 + fl_tile_row<MT>(warp, i);
        at[i] = fm_lane_pos{{r0 + g, r0 + g + 8}, 0, lane & 3};
        m[i][0] = m[i][1] = -INFINITY;
        l[i][0] = l[i][1] = 0.0f;
#pragma unroll
        for (int n = 0; n < NB; n++) o[i][n][0] = o[i][n][1] = o[i][n][2] = o[i][n][3] = 0.0f;
    }
    const int k_tiles = (fl_min(q0 + FM_ROWS * MT, T) + KEYS - 1) / KEYS; /* up to the block's last row */
    if constexpr (S::AHEAD)
        fm_key_loop_ahead<HS, DROP, S>(o, m, l, at, q, fm_tiles, src, C, stride, T, vec, q0, warp, k_tiles, scale_log2, b, h, drop);
    else
        fm_key_loop<HS, DROP, S>(o, m, l, at, q, fm_tiles, src, C, stride, T, vec, q0, warp, k_tiles, scale_log2, b, h, drop);

    /* every buffer is free (the loop's last barrier): buffer 0 stages the output rows */
    fm_stage_output_rows<HS, MT>(fm_tiles, lse + (size_t)p * T, o, m, l, at, warp, T);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < MT; i++)
        fm_unstage<HS>(out + (size_t)b * T * C + (size_t)h * HS, (size_t)C, fm_tiles + i * FM_ROWS * ld, q0 + i * FM_ROWS, T, vec);
}

/* The forward's launches for one head size, dropout setting (DROP: an
 * instance of its own, as the backward's mma_gradient_kernels), shape and
 * order of the blocks. */
template <int HS, bool DROP, class S>
void launch_forward_mma(cuda_ctx *ctx, __nv_bfloat16 *out, float *lse, const __nv_bfloat16 *qkv, int B, int T, int NH,
                        tg_dropout drop, cuda_flash_order order) {
    const float scale_log2 = 1.44269504f / sqrtf((float)HS); /* log2(e) / sqrt(HS): exp(x) = 2^(x log2(e)) */
    const bool vec = fm_aligned16(out) && fm_aligned16(qkv);
    constexpr int shared = fm_forward_shared_bytes<HS, S>(); /* over the default 48 KiB from HS = 96: opt in */
    const void *kernel = (const void *)flash_forward_mma_kernel<HS, DROP, S>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
    for (int p0 = 0; p0 < B * NH; p0 += FL_MAX_PAIRS) {
        const fl_launch l = fl_grid(fl_min(FL_MAX_PAIRS, B * NH - p0), T, FM_ROWS * S::MT, order, HS);
        flash_forward_mma_kernel<HS, DROP, S><<<l.grid, FM_THREADS, shared, ctx->stream>>>(out, lse, qkv, p0, T, NH, scale_log2,
                                                                                           drop, vec, l.map);
        CUDA_LAUNCHED("flash_forward_mma_kernel");
    }
}

template <int HS>
void flash_forward_mma(cuda_ctx *ctx, __nv_bfloat16 *out, float *lse, const __nv_bfloat16 *qkv, int B, int T, int NH,
                       tg_dropout drop) {
    if (drop.p > 0.0f)
        launch_forward_mma<HS, true, fm_tuned<HS, true>>(ctx, out, lse, qkv, B, T, NH, drop, fl_order_default());
    else
        launch_forward_mma<HS, false, fm_tuned<HS, false>>(ctx, out, lse, qkv, B, T, NH, drop, fl_order_default());
}

/* The tensor-core forward when it has an instance for HS; false otherwise. */
bool flash_forward_tensor_cores(cuda_ctx *ctx, __nv_bfloat16 *out, float *lse, const __nv_bfloat16 *qkv, int B, int T, int NH,
                                int HS, tg_dropout drop) {
    switch (HS) {
    case 16: flash_forward_mma<16>(ctx, out, lse, qkv, B, T, NH, drop); return true;
    case 32: flash_forward_mma<32>(ctx, out, lse, qkv, B, T, NH, drop); return true;
    case 48: flash_forward_mma<48>(ctx, out, lse, qkv, B, T, NH, drop); return true;
    case 64: flash_forward_mma<64>(ctx, out, lse, qkv, B, T, NH, drop); return true;
    case 80: flash_forward_mma<80>(ctx, out, lse, qkv, B, T, NH, drop); return true;
    case 96: flash_forward_mma<96>(ctx, out, lse, qkv, B, T, NH, drop); return true;
    case 112: flash_forward_mma<112>(ctx, out, lse, qkv, B, T, NH, drop); return true;
    case 128: flash_forward_mma<128>(ctx, out, lse, qkv, B, T, NH, drop); return true;
    default: return false;
    }
}

/* ---- shapes to time against the tuned one (no dropout) ---- */

typedef void (*fm_launch)(cuda_ctx *, __nv_bfloat16 *, float *, const __nv_bfloat16 *, int, int, int, tg_dropout,
                          cuda_flash_order);

struct fm_variant {
    int hs;
    cuda_flash_shape shape;
    fm_launch launch;
};

template <int HS, class S>
constexpr fm_variant fm_variant_of() {
    return fm_variant{HS, cuda_flash_shape{S::MT, S::KEYS, S::QS, S::MINB, S::AHEAD}, launch_forward_mma<HS, false, S>};
}

/* For the benchmarks' head sizes (GPT-2's 64, the Megatron 1.2B model's 96,
 * and 128), the tuned shape first, then single steps away from it: one
 * row tile where it has two and the other way round (at 96 with Q read from
 * shared memory, FlashAttention 2's 128 x 64 block on sm80 and sm90),
 * 128-key tiles, and one row tile of 64-key tiles with the next tile's
 * scores issued before this one's softmax (S::AHEAD: the tuned shape's
 * bits; 185, 208 to 211 and 233 to 234 registers on sm_80 and sm_90a at
 * 64, 96 and 128, 2 blocks an SM). Each is built without spills
 * (t_kernel_resources); three more that ptxas spilled on sm_80 and sm_90a
 * are left out: 128 keys with two row tiles at 64 (FlashAttention 2's
 * block there: 184 and 16 bytes), two row tiles at 128 (56 and 56), and
 * the tuned two row tiles at 64 with AHEAD (180 and 252: its two score
 * tiles take 128 registers). */
static const fm_variant fm_variants[] = {
    fm_variant_of<64, fm_tuned<64, false>>(),
    fm_variant_of<64, fm_shape<1, 8, false, 3>>(),
    fm_variant_of<64, fm_shape<1, 16, false, 2>>(),
    fm_variant_of<64, fm_shape<1, 8, false, 2, true>>(),
    fm_variant_of<96, fm_tuned<96, false>>(),
    fm_variant_of<96, fm_shape<2, 8, true, 2>>(),
    fm_variant_of<96, fm_shape<1, 16, false, 2>>(),
    fm_variant_of<96, fm_shape<1, 8, false, 2, true>>(),
    fm_variant_of<128, fm_tuned<128, false>>(),
    fm_variant_of<128, fm_shape<1, 16, false, 1>>(),
    fm_variant_of<128, fm_shape<1, 8, false, 2, true>>(),
};

} // namespace

void cuda_attention_forward(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, tg_dropout drop) {
    if (B <= 0 || T <= 0 || NH <= 0 || HS <= 0) return;
    fl_check_shape(HS, "attention_forward");
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (ctx->attention_forward == CUDA_FORWARD_WGMMA_WS && cuda_attention_forward_wgmma_ws(o, out, lse, qkv, B, T, NH, HS, drop))
        return;
    if (ctx->attention_forward == CUDA_FORWARD_WGMMA && cuda_attention_forward_wgmma(o, out, lse, qkv, B, T, NH, HS, drop)) return;
    if (o->act == TG_BF16) {
        __nv_bfloat16 *o16 = (__nv_bfloat16 *)out;
        const __nv_bfloat16 *qkv16 = (const __nv_bfloat16 *)qkv;
        if (!flash_forward_tensor_cores(ctx, o16, lse, qkv16, B, T, NH, HS, drop))
            flash_forward(ctx, o16, lse, qkv16, B, T, NH, HS, drop);
    } else
        flash_forward(ctx, (float *)out, lse, (const float *)qkv, B, T, NH, HS, drop);
}

int cuda_attention_forward_shapes(int HS, cuda_flash_shape *shapes, int max) {
    int n = 0;
    for (const fm_variant *v; (v = fl_variant(fm_variants, HS, n)) != NULL; n++)
        if (n < max) shapes[n] = v->shape;
    return n;
}

int cuda_attention_forward_shaped(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, int k,
                                  cuda_flash_order order) {
    const fm_variant *v = fl_variant(fm_variants, HS, k);
    if (o->act != TG_BF16 || !v || !fl_order_known(order)) return 0;
    if (B > 0 && T > 0 && NH > 0)
        v->launch(cuda_ctx_of(o), (__nv_bfloat16 *)out, lse, (const __nv_bfloat16 *)qkv, B, T, NH, tg_dropout{}, order);
    return 1;
}

const char *cuda_flash_order_name(int order) {
    static const char *const names[CUDA_FLASH_ORDERS] = {"pairs first", "tiles first", "L2 groups"};
    return order >= 0 && order < CUDA_FLASH_ORDERS ? names[order] : NULL;
}

int cuda_flash_l2_group(int T, int HS) { return fl_l2_group(T, HS, 2); }
