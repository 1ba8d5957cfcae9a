/* Fused causal attention, forward (flash attention): one block per tile of
 * query rows of one pair, key/value tiles streamed through shared memory up
 * to the diagonal (tiles above it never visited), an online softmax
 * (running max and sum per row), dropout on the probabilities, out = sum
 * P * keep * v / sum P, and lse = max + log(sum) kept for the backward. No
 * T x T buffer. Two kernels:
 * - bf16 activations with HS % 16 == 0, HS <= FM_HS_MAX: tensor cores
 *   (flash_mma.cuh, mma.cuh). 4 warps own 32 query rows each of a 128-row
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
 * - otherwise (float32, or head sizes such as 24): CUDA cores, FL_TILE rows
 *   and keys per tile, float32 arithmetic; in float32 it matches the CPU to
 *   1e-5. */
#include "kernels/cuda/flash.cuh"
#include "kernels/cuda/flash_mma.cuh"

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

#define FM_KEY_BLOCKS (FM_ROWS / 8) /* score accumulators (8 keys each) per staged key tile */

/* Row tiles of 16 query rows each warp owns: two up to head size 64, so
 * that each K or V fragment loaded from shared memory feeds two products
 * (shared-memory requests per product halved, as FlashAttention 2's
 * 128-row blocks of 4 warps); one beyond, where the second tile's scores
 * and outputs would not fit in registers. A block has FM_ROWS x MT query
 * rows. */
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

/* Where a warp's row tile meets key tile k0 .. k0 + FM_ROWS - 1: its rows
 * r0 .. r0 + 15 see the first n_blocks key blocks of 8 (0 to FM_KEY_BLOCKS,
 * even: keys up to its last row), and with mask some of those keys lie
 * after some of its rows (the per-element causal test is needed). */
struct fm_reach {
    int n_blocks;
    bool mask;
};
static __device__ __forceinline__ fm_reach fm_reach_of(int r0, int k0) {
    if (k0 + FM_ROWS <= r0) return fm_reach{FM_KEY_BLOCKS, false}; /* wholly before the rows */
    const int n = (r0 + 16 - k0) / 8; /* r0, k0 multiples of 16: even, at most FM_KEY_BLOCKS here */
    return fm_reach{n < 0 ? 0 : n, true}; /* the last key seen, r0 + 15, lies after rows r0 .. r0 + 14 */
}

/* Scores of the warp's MT row tiles (A fragments q[i], HS / 16 of them)
 * against keys 8j .. 8j + 7 of the staged tile ks into s[i][j], unscaled,
 * for j < reach[i].n_blocks; the other s[i][j] are 0. Each 16-key pair of
 * K fragments is loaded once (one ldmatrix) for every tile that sees it;
 * reach[MT - 1] (the lowest rows) sees the most. FULL: every tile sees
 * every key (the key tile lies wholly before the block's rows), so the
 * loops have no test to break them up. */
template <int HS, int MT, bool FULL>
static __device__ __forceinline__ void warp_scores(float (*s)[FM_KEY_BLOCKS][4], const uint32_t (*q)[HS / 16][4],
                                                   const __nv_bfloat16 *ks, const fm_reach *reach) {
    constexpr int ld = fm_ld(HS);
#pragma unroll
    for (int j = 0; j < FM_KEY_BLOCKS; j += 2) {
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[i][j][e] = s[i][j + 1][e] = 0.0f;
        if (!FULL && j >= reach[MT - 1].n_blocks) continue;
#pragma unroll
        for (int kk = 0; kk < HS / 16; kk++) {
            uint32_t kf[2][2];
            mma_load_b_rows_x2(kf, ks + 8 * j * ld + 16 * kk, ld);
#pragma unroll
            for (int i = 0; i < MT; i++) {
                if (!FULL && j >= reach[i].n_blocks) continue;
                mma_bf16_16816(s[i][j], q[i][kk], kf[0]);
                mma_bf16_16816(s[i][j + 1], q[i][kk], kf[1]);
            }
        }
    }
}

/* Where this lane's scores sit in the sequence: its accumulator row i (0:
 * row g, 1: row g + 8) is query row[i]; s[j][2 i + e] is key k0 + 8 j +
 * 2 t + e (t = lane % 4). */
struct lane_pos {
    int row[2], k0, t;
};

/* One key tile of the online softmax for the lane's row i of one row tile:
 * the scores s (unscaled) become P * keep, P = 2^(scale_log2 s - m)
 * against the new running max m (log2 units), with masked keys (past
 * reach.n_blocks or, where reach.mask, after the row) at 0; the running
 * sum l (this lane's share, before dropout, like the CPU's) and the row's
 * outputs o are rescaled to the new max first. FULL: every key is seen (no
 * mask); DROP: dropout is on (p > 0; without it no dropout code at all). */
template <int NB, bool FULL, bool DROP>
static __device__ __forceinline__ void softmax_row(float (*s)[4], float (*o)[4], float &m, float &l, int i, const lane_pos &at,
                                                   const fm_reach &reach, float scale_log2, int b, int h, int T,
                                                   const tg_dropout &drop) {
    const int row = at.row[i];
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < FM_KEY_BLOCKS; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            float &x = s[j][2 * i + e];
            if (!FULL && !(j < reach.n_blocks && (!reach.mask || at.k0 + 8 * j + 2 * at.t + e <= row)))
                x = -INFINITY; /* masked: 2^(-inf) = 0 below */
            mx = fmaxf(mx, x);
        }
    /* The max of the unscaled scores, scaled: scale_log2 > 0 and rounding are
     * monotonic, so this is the max of the scaled scores, bit for bit, and each
     * probability below is one FFMA and one ex2 (no separate scaling pass). */
    const float m_new = fmaxf(m, fm_row_max(mx) * scale_log2);
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
    for (int j = 0; j < FM_KEY_BLOCKS; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            float &x = s[j][2 * i + e];
            const float prob = exp2_ftz(fmaf(x, scale_log2, -base));
            l += prob;
            x = dropping && prob > 0.0f ? prob * fl_drop(drop, b, h, row, at.k0 + 8 * j + 2 * at.t + e, T) : prob;
        }
}

/* o[i][n] (columns 8n .. 8n + 7 of row tile i) += P V over the staged
 * values vs, P the bf16 rounding of the probabilities s[i], keys of the
 * first reach[i].n_blocks accumulators only (the rest are masked). Each
 * 16-column pair of V fragments is loaded once for every tile that sees
 * its keys. FULL: as warp_scores. */
template <int HS, int MT, bool FULL>
static __device__ __forceinline__ void warp_pv(float (*o)[HS / 8][4], const float (*s)[FM_KEY_BLOCKS][4],
                                               const __nv_bfloat16 *vs, const fm_reach *reach) {
    constexpr int ld = fm_ld(HS);
#pragma unroll
    for (int kk = 0; kk < FM_KEY_BLOCKS / 2; kk++) {
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

/* One staged key tile (K at ks, V at vs) for the warp's MT row tiles:
 * scores, the online softmax of each row, then P V into o. */
template <int HS, int MT, bool FULL, bool DROP>
static __device__ __forceinline__ void warp_key_tile(float (*o)[HS / 8][4], float (*m)[2], float (*l)[2],
                                                     const uint32_t (*qf)[HS / 16][4], const __nv_bfloat16 *ks,
                                                     const __nv_bfloat16 *vs, const fm_reach *reach, const lane_pos *at,
                                                     float scale_log2, int b, int h, int T, const tg_dropout &drop) {
    float s[MT][FM_KEY_BLOCKS][4];
    warp_scores<HS, MT, FULL>(s, qf, ks, reach);
#pragma unroll
    for (int i = 0; i < MT; i++) {
        if (!FULL && reach[i].n_blocks == 0) continue; /* no key seen: nothing would change */
        softmax_row<HS / 8, FULL, DROP>(s[i], o[i], m[i][0], l[i][0], 0, at[i], reach[i], scale_log2, b, h, T, drop);
        softmax_row<HS / 8, FULL, DROP>(s[i], o[i], m[i][1], l[i][1], 1, at[i], reach[i], scale_log2, b, h, T, drop);
    }
    warp_pv<HS, MT, FULL>(o, s, vs, reach);
}

/* The warp's finished rows: out = o / sum into rows 16 (MT warp + i) + g
 * (+ 8) of the bf16 staging tiles (the block's rows from 0), lse = max +
 * log(sum) of each row before T into lse_rows (the pair's, by row). */
template <int HS, int MT>
static __device__ __forceinline__ void stage_output_rows(__nv_bfloat16 *tiles, float *lse_rows, const float (*o)[HS / 8][4],
                                                         const float (*m)[2], const float (*l)[2], const lane_pos *at, int warp,
                                                         int T) {
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

/* Dynamic shared memory of the forward: K and V of two key tiles (double
 * buffering: the next tile lands while the current one is used). Buffer 1
 * first holds the block's Q (FM_ROWS x MT rows), buffer 0 last its output
 * rows: two tiles each, room for MT <= 2. */
template <int HS>
static constexpr int fm_forward_shared_bytes() {
    static_assert(fm_row_tiles<HS>() <= 2, "Q and the output rows are staged in one buffer of two tiles");
    return 4 * FM_ROWS * fm_ld(HS) * (int)sizeof(__nv_bfloat16);
}

/* One block: query rows [q0, q0 + FM_ROWS MT) of pair p0 + blockIdx.y,
 * warp w row tiles MT w .. MT w + MT - 1 (16 rows each). Query blocks run
 * in reverse (the longest rows first). Key tile kt's K and V sit in buffer
 * kt % 2 (K, then V, in dynamic shared memory), and tile kt + 1 is copied
 * into the other buffer by cp.async while tile kt is used; Q passes through
 * buffer 1 first, the output rows through buffer 0 last. vec: qkv and out
 * allow 16-byte accesses. DROP: dropout on (an instance of its own, so that
 * the usual run without it carries no dropout code). Without dropout, key
 * tiles wholly before the block's rows (all but its last one or two) take
 * the unmasked warp_key_tile (with it, the second copy of the dropout code
 * made ptxas spill at head size 16). */
template <int HS, bool DROP>
__global__ void __launch_bounds__(FM_THREADS, fm_blocks_per_sm<HS, DROP>())
    flash_forward_mma_kernel(__nv_bfloat16 *out, float *lse, const __nv_bfloat16 *qkv, int p0, int T, int NH, float scale_log2,
                             tg_dropout drop, bool vec) {
    drop = tg_dropout_read_step(drop);
    constexpr int ld = fm_ld(HS), NB = HS / 8, tile = FM_ROWS * ld, MT = fm_row_tiles<HS>();
    extern __shared__ __align__(16) __nv_bfloat16 fm_tiles[]; /* fm_forward_shared_bytes<HS>() */
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * FM_ROWS * MT;
    const int p = p0 + (int)blockIdx.y, b = p / NH, h = p % NH, C = NH * HS;
    const int warp = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31, g = lane >> 2;
    const size_t stride = 3 * (size_t)C;
    const __nv_bfloat16 *src = qkv + (size_t)b * T * stride + (size_t)h * HS;

    /* Q, then key tile 0, as two groups: Q's fragments load while tile 0 lands */
    __nv_bfloat16 *qs = fm_tiles + 2 * tile;
#pragma unroll
    for (int i = 0; i < MT; i++) fm_stage_async<HS>(qs + i * tile, src, stride, q0 + i * FM_ROWS, T, vec);
    async_commit();
    fm_stage_async<HS>(fm_tiles, src + C, stride, 0, T, vec);
    fm_stage_async<HS>(fm_tiles + tile, src + 2 * C, stride, 0, T, vec);
    async_commit();
    async_wait<1>();
    __syncthreads();
    uint32_t qf[MT][HS / 16][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int kk = 0; kk < HS / 16; kk++) mma_load_a(qf[i][kk], qs + fl_tile_row<MT>(warp, i) * ld + 16 * kk, ld);
    async_wait<0>();
    __syncthreads(); /* tile 0 is in, and Q's readers are done: buffer 1 is free */

    float o[MT][NB][4], m[MT][2], l[MT][2];
    lane_pos at[MT];
#pragma unroll
    for (int i = 0; i < MT; i++) {
        const int r0 = q0 + fl_tile_row<MT>(warp, i);
        at[i] = lane_pos{{r0 + g, r0 + g + 8}, 0, lane & 3};
        m[i][0] = m[i][1] = -INFINITY;
        l[i][0] = l[i][1] = 0.0f;
#pragma unroll
        for (int n = 0; n < NB; n++) o[i][n][0] = o[i][n][1] = o[i][n][2] = o[i][n][3] = 0.0f;
    }
    const int k_tiles = (fl_min(q0 + FM_ROWS * MT, T) + FM_ROWS - 1) / FM_ROWS; /* up to the block's last row */
    for (int kt = 0; kt < k_tiles; kt++) {
        const int k0 = kt * FM_ROWS;
        if (kt + 1 < k_tiles) { /* tile kt + 1 into the other buffer: its readers passed the last barrier */
            __nv_bfloat16 *next = fm_tiles + ((kt + 1) & 1) * 2 * tile;
            fm_stage_async<HS>(next, src + C, stride, k0 + FM_ROWS, T, vec);
            fm_stage_async<HS>(next + tile, src + 2 * C, stride, k0 + FM_ROWS, T, vec);
            async_commit();
        }
        fm_reach reach[MT];
#pragma unroll
        for (int i = 0; i < MT; i++) {
            reach[i] = fm_reach_of(q0 + fl_tile_row<MT>(warp, i), k0);
            at[i].k0 = k0;
        }
        const __nv_bfloat16 *ks = fm_tiles + (kt & 1) * 2 * tile, *vs = ks + tile;
        if (!DROP && k0 + FM_ROWS <= q0) /* block-uniform: every row tile sees every key (reach_of's first case) */
            warp_key_tile<HS, MT, true, DROP>(o, m, l, qf, ks, vs, reach, at, scale_log2, b, h, T, drop);
        else if (reach[MT - 1].n_blocks > 0) /* warp-uniform: the tile is not wholly after the warp's rows */
            warp_key_tile<HS, MT, false, DROP>(o, m, l, qf, ks, vs, reach, at, scale_log2, b, h, T, drop);
        async_wait<0>();
        __syncthreads(); /* tile kt + 1 is in, and tile kt's readers are done */
    }

    /* every buffer is free (the loop's last barrier): buffer 0 stages the output rows */
    stage_output_rows<HS, MT>(fm_tiles, lse + (size_t)p * T, o, m, l, at, warp, T);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < MT; i++)
        fm_unstage<HS>(out + (size_t)b * T * C + (size_t)h * HS, (size_t)C, fm_tiles + i * tile, q0 + i * FM_ROWS, T, vec);
}

/* The forward's launches for one head size and dropout setting (DROP: an
 * instance of its own, as the backward's mma_gradient_kernels). */
template <int HS, bool DROP>
void launch_forward_mma(cuda_ctx *ctx, __nv_bfloat16 *out, float *lse, const __nv_bfloat16 *qkv, int B, int T, int NH,
                        tg_dropout drop) {
    const float scale_log2 = 1.44269504f / sqrtf((float)HS); /* log2(e) / sqrt(HS): exp(x) = 2^(x log2(e)) */
    const bool vec = fm_aligned16(out) && fm_aligned16(qkv);
    constexpr int block_rows = FM_ROWS * fm_row_tiles<HS>();
    const unsigned q_blocks = (unsigned)((T + block_rows - 1) / block_rows);
    constexpr int shared = fm_forward_shared_bytes<HS>(); /* over the default 48 KiB from HS = 96: opt in */
    CUDA_CHECK(cudaFuncSetAttribute((const void *)flash_forward_mma_kernel<HS, DROP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    shared));
    for (int p0 = 0; p0 < B * NH; p0 += FL_MAX_PAIRS) {
        const dim3 grid(q_blocks, (unsigned)fl_min(FL_MAX_PAIRS, B * NH - p0));
        flash_forward_mma_kernel<HS, DROP><<<grid, FM_THREADS, shared, ctx->stream>>>(out, lse, qkv, p0, T, NH, scale_log2, drop,
                                                                                      vec);
        CUDA_LAUNCHED("flash_forward_mma_kernel");
    }
}

template <int HS>
void flash_forward_mma(cuda_ctx *ctx, __nv_bfloat16 *out, float *lse, const __nv_bfloat16 *qkv, int B, int T, int NH,
                       tg_dropout drop) {
    if (drop.p > 0.0f)
        launch_forward_mma<HS, true>(ctx, out, lse, qkv, B, T, NH, drop);
    else
        launch_forward_mma<HS, false>(ctx, out, lse, qkv, B, T, NH, drop);
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

} // namespace

void cuda_attention_forward(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, tg_dropout drop) {
    if (B <= 0 || T <= 0 || NH <= 0 || HS <= 0) return;
    fl_check_shape(HS, "attention_forward");
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (o->act == TG_BF16) {
        __nv_bfloat16 *o16 = (__nv_bfloat16 *)out;
        const __nv_bfloat16 *qkv16 = (const __nv_bfloat16 *)qkv;
        if (!flash_forward_tensor_cores(ctx, o16, lse, qkv16, B, T, NH, HS, drop))
            flash_forward(ctx, o16, lse, qkv16, B, T, NH, HS, drop);
    } else
        flash_forward(ctx, (float *)out, lse, (const float *)qkv, B, T, NH, HS, drop);
}
