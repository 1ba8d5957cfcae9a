/* Fused causal attention, backward (flash attention): the probabilities are
 * recomputed from q, k and the forward's lse, P = exp(scale q.k - lse), and
 * with keep the dropout factor and D = rowsum(dout * out) per query row:
 *   dP = (dout . v) * keep,  dS = P * (dP - D),
 *   dq = scale sum dS k,  dk = scale sum dS^T q,  dv = sum (P * keep)^T dout.
 * Deterministic, no atomics: one kernel per query tile sums dq over its key
 * tiles, another per key tile sums dk and dv over its query tiles (each
 * recomputes P); D comes first, into ctx->scratch (as many pairs per round
 * as it holds; bf16 rows read by 16-byte loads, summed in the same order). Tiles wholly above the diagonal are never visited.
 * Two flavours of the tile kernels:
 *   - bf16 activations, HS a multiple of 16 (<= 128), 16-byte aligned
 *     tensors: tensor cores (flash_bwd_mma.cuh), blocks of 64 rows, 4 warps
 *     of 16 (dq: of 128 rows, 4 warps of 32, up to head size 64), the
 *     streamed tiles (K and V for dq, Q and dout for dk and dv)
 *     double buffered in dynamic shared memory, the next one copied in by
 *     cp.async while the current one is used; the products in bf16 with
 *     float32 accumulation, dS and P * keep rounded to bf16 before the
 *     second products, so results differ from the CPU twin by bf16
 *     roundings (within the kernel tests' 1e-2).
 *     The dq kernel's row tiles a warp are the tuned fb_dq_row_tiles, the
 *     dk, dv kernel's key tiles fb_dkv_key_tiles; at head size 64 other
 *     counts are built too, to be timed against them on a GPU
 *     (mma_bwd_variants, cuda_attention_backward_shaped).
 *   - otherwise (float32, other head sizes): CUDA cores, float32 tiles of
 *     16 rows (flash_bwd_core.cuh), the CPU's arithmetic in a fixed order.
 * cuda_attention_backward_fused (bench_attention only, for now) runs the
 * tensor-core backward as one kernel of five products a tile instead
 * (flash_bwd_fused.cuh: the dk, dv kernel with DQ, dq's shares through
 * slots after D).
 * With kernels.attention = wgmma (compute capability 9.0, bf16, head size
 * 64, 96 or 128, no dropout): after D, one kernel on Hopper's warpgroup MMA
 * (flash_bwd_wgmma.cu) per key tile for dk, dv and each tile's share of
 * dq, the shares in the scratch after D, then a fixed-order sum of them
 * for dq (the rounds hold as many pairs as D and the shares fit; where
 * not even one pair's shares fit, dq by the mma.sync kernel). */
#include <type_traits>

#include "kernels/cuda/flash.cuh"
#include "kernels/cuda/flash_bwd_core.cuh"
#include "kernels/cuda/flash_bwd_fused.cuh"
#include "kernels/cuda/flash_bwd_mma.cuh"
#include "kernels/cuda/flash_bwd_wgmma.cuh"
#include "kernels/cuda/flash_rowdot.cuh"
#include "kernels/cuda/head_tiles.cuh"

namespace {

/* dq of FB_ROWS x MT query rows on tensor cores (MT = fb_dq_row_tiles, or
 * another count for tuning: mma_bwd_variants):
 * key tiles up to the diagonal; warp w owns row tiles fl_tile_row<MT>(w, i)
 * (16 rows each). The last rows (the most keys) go to the first blocks,
 * every pair's before any pair's earlier rows (fl_grid), so that the
 * longest blocks do not start last. Key tile n has its K and V in
 * buffer n % 2 of the dynamic shared memory (tiles[2 (n % 2)] and the
 * next), and tile n + 1 is copied into the other buffer by cp.async while
 * tile n is used; the block's q and dout rows are staged first in tiles 2
 * .. 2 + MT - 1 and 2 + MT .. 2 + 2 MT - 1 (buffer 1 and, with two row
 * tiles, two more). Where both of a warp's row tiles see a 16-key block,
 * one call does both (each K and V fragment loaded once); elsewhere (the
 * second tile's diagonal block, a tile past T) each alone: the same bits. */
template <int HS, bool DROP, int MT>
__global__ void __launch_bounds__(FB_THREADS)
    flash_dq_mma_kernel(__nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv, const float *lse,
                        const float *D, int p0, int T, int NH, float scale, tg_dropout drop) {
    drop = tg_dropout_read_step(drop);
    extern __shared__ __align__(16) unsigned char fb_shared[]; /* fb_dq_shared_bytes<HS>(MT) */
    fb_tile<HS> *tiles = reinterpret_cast<fb_tile<HS> *>(fb_shared);
    const int q0 = fl_grid_query_tile() * FB_ROWS * MT, j = fl_grid_pair(), p = p0 + j, b = p / NH, h = p % NH, C = NH * HS;
    const int g = (threadIdx.x & 31) >> 2, warp = threadIdx.x >> 5, ld = fb_tile<HS>::ld;
    const fb_pair c = {b, h, T, scale * FB_LOG2E, drop};
    int qw[MT];
    float lse2[MT][2], Dr[MT][2];
#pragma unroll
    for (int i = 0; i < MT; i++) {
        qw[i] = q0 + fl_tile_row<MT>(warp, i);
#pragma unroll
        for (int half = 0; half < 2; half++) fb_row_stats(lse2[i][half], Dr[i][half], lse, D, p, j, qw[i] + g + 8 * half, T);
    }
    /* q and dout rows, then key tile 0, as two groups: the fragments load while tile 0 lands */
#pragma unroll
    for (int i = 0; i < MT; i++) {
        fb_stage_async<HS>(tiles[2 + i], qkv, 3 * C, h * HS, b, q0 + FB_ROWS * i, T);
        fb_stage_async<HS>(tiles[2 + MT + i], dout, C, h * HS, b, q0 + FB_ROWS * i, T);
    }
    async_commit();
    fb_stage_async<HS>(tiles[0], qkv, 3 * C, C + h * HS, b, 0, T);
    fb_stage_async<HS>(tiles[1], qkv, 3 * C, 2 * C + h * HS, b, 0, T);
    async_commit();
    async_wait<1>();
    __syncthreads();
    uint32_t qf[MT][HS / 16][4], gf[MT][HS / 16][4];
#pragma unroll
    for (int i = 0; i < MT; i++) {
        fb_rows_as_a<HS>(qf[i], fb_staged_row<HS>(tiles, 2, qw[i] - q0));
        fb_rows_as_a<HS>(gf[i], fb_staged_row<HS>(tiles, 2 + MT, qw[i] - q0));
    }
    float dq[MT][HS / 8][4] = {};
    async_wait<0>();
    __syncthreads(); /* key tile 0 is in, and the q and dout readers are done: buffer 1 is free */
    const int k_end = fl_min(q0 + FB_ROWS * MT, T);
    for (int k0 = 0; k0 < k_end; k0 += FB_ROWS) {
        const int cur = 2 * ((k0 / FB_ROWS) & 1), next = 2 - cur;
        if (k0 + FB_ROWS < k_end) { /* the next key tile into the other buffer: its readers passed the last barrier */
            fb_stage_async<HS>(tiles[next], qkv, 3 * C, C + h * HS, b, k0 + FB_ROWS, T);
            fb_stage_async<HS>(tiles[next + 1], qkv, 3 * C, 2 * C + h * HS, b, k0 + FB_ROWS, T);
            async_commit();
        }
        const __nv_bfloat16 *ks = tiles[cur].e, *vs = tiles[cur + 1].e;
        /* warp-uniform: up to the diagonal of the warp's last row tile (its tiles are contiguous) */
        for (int kt = k0; kt < k0 + FB_ROWS && kt <= qw[MT - 1] && qw[0] < T; kt += 16) {
            const __nv_bfloat16 *krows = ks + (kt - k0) * ld, *vrows = vs + (kt - k0) * ld;
            bool sees[MT], edge[MT];
#pragma unroll
            for (int i = 0; i < MT; i++) {
                sees[i] = kt <= qw[i] && qw[i] < T;
                edge[i] = kt == qw[i] || qw[i] + 16 > T;
            }
            if (MT == 2 && sees[0] && sees[MT - 1]) {
                fb_dq_block<HS, MT, DROP>(dq, qf, gf, krows, vrows, lse2, Dr, qw, kt, edge, c);
                continue;
            }
#pragma unroll
            for (int i = 0; i < MT; i++)
                if (sees[i]) fb_dq_block<HS, 1, DROP>(dq + i, qf + i, gf + i, krows, vrows, lse2 + i, Dr + i, qw + i, kt, edge + i, c);
        }
        async_wait<0>();
        __syncthreads(); /* the next tile is in, and this one's readers are done */
    }
#pragma unroll
    for (int i = 0; i < MT; i++) fb_store<HS>(dqkv, dq[i], 3 * C, h * HS, b, qw[i], T, scale);
}

/* dk and dv of FB_ROWS x KT keys on tensor cores (KT = fb_dkv_key_tiles,
 * or another count for tuning: mma_bwd_variants): query tiles from the
 * diagonal to T; warp w owns key tiles fl_tile_row<KT>(w, i) (16 keys
 * each). The first keys (seen by the most rows) go to the first blocks,
 * every pair's before any pair's later keys (fl_grid). Query tile n (from
 * the diagonal) has its Q and dout in buffer
 * n % 2 of the dynamic shared memory and its rows' statistics in
 * lse2_t[n % 2], D_t[n % 2]; tile n + 1 is copied into the other buffer by
 * cp.async (its statistics read into registers) while tile n is used; the
 * block's k rows, and its v rows where the warps hold them, pass through
 * tiles 2 onwards first (fb_dkv_v_tile). Where both of a warp's key tiles
 * see a 16-row query block, one call does both (each Q and dout fragment
 * loaded once); elsewhere (the second tile's diagonal) the first alone:
 * the same bits. DQ (one key tile a warp; flash_bwd_fused.cuh): also
 * each query tile's dq share over the block's keys, into its slot of
 * dq_slots (the round's pairs), after a second block barrier a tile. */
template <int HS, bool DROP, int KT, bool DQ = false>
__global__ void __launch_bounds__(FB_THREADS, fb_dkv_min_blocks<HS, DQ>())
    flash_dkv_mma_kernel(__nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv, const float *lse,
                         const float *D, float *dq_slots, int p0, int T, int NH, float scale, tg_dropout drop) {
    static_assert(!DQ || KT == 1, "dq's share is taken at one key tile a warp");
    drop = tg_dropout_read_step(drop);
    extern __shared__ __align__(16) unsigned char fb_shared[]; /* fb_dkv_shared_bytes<HS, KT, DQ>() */
    fb_tile<HS> *tiles = reinterpret_cast<fb_tile<HS> *>(fb_shared);
    __shared__ float lse2_t[2][FB_ROWS], D_t[2][FB_ROWS];
    constexpr bool v_held = fb_v_held<HS, KT>();
    constexpr int v_tile = fb_dkv_v_tile<HS, KT>(), k_tile = fb_dkv_k_tile<HS, KT, DQ>();
    const int k0 = fl_grid_key_tile() * FB_ROWS * KT, j = fl_grid_pair(), p = p0 + j, b = p / NH, h = p % NH, C = NH * HS;
    const int warp = threadIdx.x >> 5, ld = fb_tile<HS>::ld;
    const fb_pair c = {b, h, T, scale * FB_LOG2E, drop};
    int kw[KT];
#pragma unroll
    for (int i = 0; i < KT; i++) kw[i] = k0 + fl_tile_row<KT>(warp, i);
    /* k and v rows, then the diagonal query tile, as two groups: the fragments load while the tile lands */
#pragma unroll
    for (int i = 0; i < KT; i++) {
        fb_stage_async<HS>(tiles[k_tile + i], qkv, 3 * C, C + h * HS, b, k0 + FB_ROWS * i, T);
        fb_stage_async<HS>(tiles[v_tile + i], qkv, 3 * C, 2 * C + h * HS, b, k0 + FB_ROWS * i, T);
    }
    async_commit();
    fb_stage_async<HS>(tiles[0], qkv, 3 * C, h * HS, b, k0, T);
    fb_stage_async<HS>(tiles[1], dout, C, h * HS, b, k0, T);
    async_commit();
    if (threadIdx.x < FB_ROWS) fb_row_stats(lse2_t[0][threadIdx.x], D_t[0][threadIdx.x], lse, D, p, j, k0 + threadIdx.x, T);
    async_wait<1>();
    __syncthreads();
    uint32_t kf[KT][HS / 16][4], vf[KT][v_held ? HS / 16 : 1][4];
    std::conditional_t<v_held, fb_held, fb_staged<HS>> v_of[KT]; /* each key tile's v as an A operand */
#pragma unroll
    for (int i = 0; i < KT; i++) {
        const __nv_bfloat16 *vrows = fb_staged_row<HS>(tiles, v_tile, kw[i] - k0);
        fb_rows_as_a<HS>(kf[i], fb_staged_row<HS>(tiles, k_tile, kw[i] - k0));
        if constexpr (v_held) fb_rows_as_a<HS>(vf[i], vrows), v_of[i] = fb_held{vf[i]};
        else v_of[i] = fb_staged<HS>{vrows};
    }
    float dk[KT][HS / 8][4] = {}, dv[KT][HS / 8][4] = {};
    async_wait<0>();
    __syncthreads(); /* the diagonal tile is in, and the k and v readers are done: buffer 1 is free */
    for (int q0 = k0; q0 < T; q0 += FB_ROWS) { /* k0 is tile-aligned: the diagonal tile starts at k0 */
        const int n = ((q0 - k0) / FB_ROWS) & 1, cur = 2 * n, next = 2 - cur;
        const bool more = q0 + FB_ROWS < T;
        float lse2_next = 0.0f, D_next = 0.0f;
        if (more) { /* the next query tile into the other buffer: its readers passed the last barrier */
            fb_stage_async<HS>(tiles[next], qkv, 3 * C, h * HS, b, q0 + FB_ROWS, T);
            fb_stage_async<HS>(tiles[next + 1], dout, C, h * HS, b, q0 + FB_ROWS, T);
            async_commit();
            if (threadIdx.x < FB_ROWS) fb_row_stats(lse2_next, D_next, lse, D, p, j, q0 + FB_ROWS + threadIdx.x, T);
        }
        const __nv_bfloat16 *qs = tiles[cur].e, *gs = tiles[cur + 1].e;
        for (int qt = q0; qt < q0 + FB_ROWS && qt < T; qt += 16) {
            if (qt < kw[0]) continue; /* warp-uniform: above the warp's diagonal */
            const __nv_bfloat16 *qrows = qs + (qt - q0) * ld, *grows = gs + (qt - q0) * ld;
            const float *lse2_q = lse2_t[n] + (qt - q0), *D_q = D_t[n] + (qt - q0);
            bool edge[KT];
            uint32_t ds[KT][4]; /* dS^T's fragments: without DQ, dq is the other kernel's */
#pragma unroll
            for (int i = 0; i < KT; i++) edge[i] = qt == kw[i] || qt + 16 > T;
            if (qt >= kw[KT - 1]) /* every key tile sees the block (they are contiguous) */
                fb_dkv_block<HS, KT, DROP>(dk, dv, kf, v_of, qrows, grows, lse2_q, D_q, kw, qt, edge, c, ds);
            else if constexpr (KT > 1) /* the first alone */
                fb_dkv_block<HS, 1, DROP>(dk, dv, kf, v_of, qrows, grows, lse2_q, D_q, kw, qt, edge, c, ds);
            if constexpr (DQ) fb_stage_ds(*fb_dkv_ds_tile<HS, KT>(fb_shared), ds[0], 16 * warp, qt - q0);
        }
        if constexpr (DQ) {
            __syncthreads(); /* the tile's dS^T is in */
            /* warp-uniform: rows past T are never read; on the diagonal tile warp w's rows see key tiles 0 .. w */
            float *slot = dq_slots + ((size_t)j * dqs_slots<FB_FUSED_KB>(T) + dqs_slot<FB_FUSED_KB>(q0 / FB_ROWS, k0 / FB_ROWS)) *
                                         dqs_slot_floats<HS>();
            if (q0 + 16 * warp < T)
                fb_dq_share<HS>(slot, *fb_dkv_ds_tile<HS, KT>(fb_shared), tiles[k_tile], q0 == k0 ? warp + 1 : FB_ROWS / 16);
        }
        if (more && threadIdx.x < FB_ROWS) { /* their loads had the tile's products to land */
            lse2_t[n ^ 1][threadIdx.x] = lse2_next;
            D_t[n ^ 1][threadIdx.x] = D_next;
        }
        async_wait<0>();
        __syncthreads(); /* the next tile is in, and this one's readers (with DQ dS^T's too) are done */
    }
#pragma unroll
    for (int i = 0; i < KT; i++) {
        fb_store<HS>(dqkv, dk[i], 3 * C, C + h * HS, b, kw[i], T, scale);
        fb_store<HS>(dqkv, dv[i], 3 * C, 2 * C + h * HS, b, kw[i], T, 1.0f);
    }
}

/* Whether the tensor-core kernels take this backward: bf16, a head size
 * they are built for, and tensors their 16-byte copies can read. */
static bool mma_fits(const void *dqkv, const void *dout, const void *qkv, int HS) {
    const uintptr_t any = (uintptr_t)dqkv | (uintptr_t)dout | (uintptr_t)qkv;
    return HS % 16 == 0 && HS <= FL_HS_MAX && any % 16 == 0;
}

/* The dq kernel (MT row tiles a warp) for pairs p0 .. p0 + np, one head
 * size and dropout setting (DROP: an instance of its own, so that a run
 * without dropout carries none of its code). */
template <int HS, bool DROP, int MT>
void mma_dq_kernel(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv, const float *lse,
                   const float *D, int p0, int np, int T, int NH, float scale, tg_dropout drop) {
    const dim3 dq_grid = fl_grid_pairs_first(np, T, FB_ROWS * MT);
    /* over the default 48 KiB from HS = 64 (dq) and 96 (dk, dv): opt in */
    constexpr int dq_shared = fb_dq_shared_bytes<HS>(MT);
    const void *dq_kernel = (const void *)flash_dq_mma_kernel<HS, DROP, MT>;
    CUDA_CHECK(cudaFuncSetAttribute(dq_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dq_shared));
    flash_dq_mma_kernel<HS, DROP, MT><<<dq_grid, FB_THREADS, dq_shared, ctx->stream>>>(dqkv, dout, qkv, lse, D, p0, T, NH, scale,
                                                                                        drop);
    CUDA_LAUNCHED("flash_dq_mma_kernel");
}

/* The dq kernel, then the dk, dv kernel (KT key tiles a warp). */
template <int HS, bool DROP, int MT, int KT>
void mma_gradient_kernels(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv,
                          const float *lse, const float *D, int p0, int np, int T, int NH, float scale, tg_dropout drop) {
    mma_dq_kernel<HS, DROP, MT>(ctx, dqkv, dout, qkv, lse, D, p0, np, T, NH, scale, drop);
    const dim3 dkv_grid = fl_grid_pairs_first(np, T, FB_ROWS * KT);
    constexpr int dkv_shared = fb_dkv_shared_bytes<HS, KT, false>();
    const void *dkv_kernel = (const void *)flash_dkv_mma_kernel<HS, DROP, KT>;
    CUDA_CHECK(cudaFuncSetAttribute(dkv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dkv_shared));
    flash_dkv_mma_kernel<HS, DROP, KT><<<dkv_grid, FB_THREADS, dkv_shared, ctx->stream>>>(dqkv, dout, qkv, lse, D, (float *)NULL,
                                                                                           p0, T, NH, scale, drop);
    CUDA_LAUNCHED("flash_dkv_mma_kernel");
}

/* The fused backward at head size HS (flash_bwd_fused.cuh): the dk, dv
 * kernel with DQ, then the sum of the round's dq slots. */
template <int HS>
void mma_fused_kernels(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv,
                       const float *lse, const float *D, float *dq_slots, int p0, int np, int T, int NH, float scale) {
    const dim3 grid = fl_grid_pairs_first(np, T, FB_ROWS);
    constexpr int shared = fb_dkv_shared_bytes<HS, 1, true>();
    const void *kernel = (const void *)flash_dkv_mma_kernel<HS, false, 1, true>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
    flash_dkv_mma_kernel<HS, false, 1, true><<<grid, FB_THREADS, shared, ctx->stream>>>(dqkv, dout, qkv, lse, D, dq_slots, p0, T,
                                                                                       NH, scale, tg_dropout{});
    CUDA_LAUNCHED("flash_dkv_mma_kernel");
    flash_dq_reduce_kernel<HS, FB_FUSED_KB><<<dqs_reduce_grid(np, T, HS), 256, 0, ctx->stream>>>(dqkv, dq_slots, p0, T, NH, scale);
    CUDA_LAUNCHED("flash_dq_reduce_kernel");
}

/* The dq slots of a round of np pairs (dq_slots.cuh: the wgmma and the
 * fused backward's): in the scratch after their D, 256-aligned
 * (flash_backward keeps room). */
static float *round_dq_slots(const float *D, int np, int T) {
    const size_t at = ((size_t)np * T * sizeof(float) + 255) & ~(size_t)255;
    return (float *)((char *)D + at);
}

/* kernels.attention = wgmma (head size 64, 96 or 128, no dropout, compute capability
 * 9.0, aligned: the caller checked flash_bwd_wgmma_fits): the whole
 * backward on Hopper's warpgroup MMA, dq through the slots, in FORM
 * (BW_DQ_SLOTS every run's; BW_DQ_SUMMED, the slots summed in the kernel by
 * each query tile's last key block: CUDA_WGMMA_DQ_SUMMED; BW_DQ_KV_SHARED,
 * K and V read from shared memory at head size 64 too:
 * cuda_attention_backward_wgmma_kv_shared). */
template <bw_dq_form FORM>
static void wgmma_gradients(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv,
                            const float *lse, const float *D, int p0, int np, int T, int NH, int HS, float scale,
                            tg_dropout drop) {
    flash_bwd_wgmma(ctx, dqkv, dout, qkv, lse, D, round_dq_slots(D, np, T), p0, np, T, NH, HS, scale, drop, FORM);
}
/* The same where the scratch cannot hold one pair's slots: dq by the
 * mma.sync kernel (its tuned row tiles at the wgmma backward's head sizes,
 * 64, 96 and 128), dk and dv on wgmma. */
static void wgmma_dkv_gradients(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv,
                                const float *lse, const float *D, int p0, int np, int T, int NH, int HS, float scale,
                                tg_dropout drop) {
    head_tile_dispatch(HS, [&](auto hs) {
        constexpr int H = decltype(hs)::value;
        mma_dq_kernel<H, false, fb_dq_row_tiles<H>()>(ctx, dqkv, dout, qkv, lse, D, p0, np, T, NH, scale, drop);
    });
    flash_bwd_wgmma(ctx, dqkv, dout, qkv, lse, D, NULL, p0, np, T, NH, HS, scale, drop, BW_DQ_SLOTS);
}

/* The fused mma.sync backward (flash_bwd_fused.cuh: five products a
 * tile, dq through the slots; head sizes fb_fused_built, no dropout: the
 * caller's). */
static void fused_gradients(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv,
                            const float *lse, const float *D, int p0, int np, int T, int NH, int HS, float scale, tg_dropout) {
    float *slots = round_dq_slots(D, np, T);
    if (HS == 64)
        mma_fused_kernels<64>(ctx, dqkv, dout, qkv, lse, D, slots, p0, np, T, NH, scale);
    else if (HS == 96)
        mma_fused_kernels<96>(ctx, dqkv, dout, qkv, lse, D, slots, p0, np, T, NH, scale);
    else
        mma_fused_kernels<128>(ctx, dqkv, dout, qkv, lse, D, slots, p0, np, T, NH, scale);
}

/* dq, dk, dv of pairs p0 .. p0 + np on tensor cores, the tuned row tiles;
 * HS is tried from 16 up to FL_HS_MAX in steps of 16 (one instantiation
 * each). */
template <int HS>
void mma_gradients(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv, const float *lse,
                   const float *D, int p0, int np, int T, int NH, int hs, float scale, tg_dropout drop) {
    if (hs != HS) {
        if constexpr (HS + 16 <= FL_HS_MAX)
            mma_gradients<HS + 16>(ctx, dqkv, dout, qkv, lse, D, p0, np, T, NH, hs, scale, drop);
        return;
    }
    constexpr int MT = fb_dq_row_tiles<HS>(), KT = fb_dkv_key_tiles<HS>();
    if (drop.p > 0.0f) /* dropout on: the instances that carry its code */
        mma_gradient_kernels<HS, true, MT, KT>(ctx, dqkv, dout, qkv, lse, D, p0, np, T, NH, scale, drop);
    else
        mma_gradient_kernels<HS, false, MT, KT>(ctx, dqkv, dout, qkv, lse, D, p0, np, T, NH, scale, drop);
}

/* dq, dk, dv of pairs p0 .. p0 + np on CUDA cores, float32 tiles. */
template <typename E>
void core_gradients(cuda_ctx *ctx, E *dqkv, const E *dout, const E *qkv, const float *lse, const float *D, int p0, int np,
                    int T, int NH, int HS, float scale, tg_dropout drop) {
    const dim3 grid((unsigned)((T + FL_TILE - 1) / FL_TILE), (unsigned)np);
    flash_dq_kernel<<<grid, FL_THREADS, 0, ctx->stream>>>(dqkv, dout, qkv, lse, D, p0, T, NH, HS, scale, drop);
    CUDA_LAUNCHED("flash_dq_kernel");
    flash_dkv_kernel<<<grid, FL_THREADS, 0, ctx->stream>>>(dqkv, dout, qkv, lse, D, p0, T, NH, HS, scale, drop);
    CUDA_LAUNCHED("flash_dkv_kernel");
}

/* The tile kernels of one round (D in for pairs p0 .. p0 + np). */
template <typename E>
using round_kernels = void (*)(cuda_ctx *, E *, const E *, const E *, const float *, const float *, int, int, int, int, int,
                               float, tg_dropout);

/* The tile kernels every run takes, by activation type. */
static void gradients(cuda_ctx *ctx, float *dqkv, const float *dout, const float *qkv, const float *lse, const float *D, int p0,
                      int np, int T, int NH, int HS, float scale, tg_dropout drop) {
    core_gradients(ctx, dqkv, dout, qkv, lse, D, p0, np, T, NH, HS, scale, drop);
}
static void gradients(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv, const float *lse,
                      const float *D, int p0, int np, int T, int NH, int HS, float scale, tg_dropout drop) {
    if (mma_fits(dqkv, dout, qkv, HS))
        mma_gradients<16>(ctx, dqkv, dout, qkv, lse, D, p0, np, T, NH, HS, scale, drop);
    else
        core_gradients(ctx, dqkv, dout, qkv, lse, D, p0, np, T, NH, HS, scale, drop);
}

/* Scratch a round of the backward keeps for aligning the extra (when there
 * is one) behind the round's D. */
static size_t round_room(size_t pair_extra) { return pair_extra > 0 ? 256 : 0; }
/* Scratch each pair of a round takes: its D (T floats) and pair_extra. */
static size_t round_pair_bytes(int T, size_t pair_extra) { return (size_t)T * sizeof(float) + pair_extra; }
/* The pairs a round of the backward holds in the kernel scratch. */
static size_t round_pairs(const cuda_ctx *ctx, int T, size_t pair_extra) {
    const size_t room = round_room(pair_extra);
    return ctx->scratch_bytes > room ? (ctx->scratch_bytes - room) / round_pair_bytes(T, pair_extra) : 0;
}

/* D, then the tile kernels `tiles` (a round_kernels<E>, or a lambda of
 * its arguments), round by round of at most max_pairs pairs (as many as
 * the scratch holds); pair_extra: scratch bytes `tiles` takes a pair after
 * the round's D (256-aligned: the wgmma backward's dq slots), 0 for none. */
template <typename E, typename F>
void flash_backward(cuda_ctx *ctx, E *dqkv, const E *dout, const E *out, const E *qkv, const float *lse, int B, int T, int NH,
                    int HS, tg_dropout drop, F tiles, size_t pair_extra = 0, int max_pairs = FL_MAX_PAIRS) {
    const float scale = 1.0f / sqrtf((float)HS);
    const size_t fit = round_pairs(ctx, T, pair_extra);
    if (fit == 0) {
        tg_err e;
        tg_fail(&e, "attention_backward: T = %d needs %zu bytes of kernel scratch, there are %zu", T,
                round_pair_bytes(T, pair_extra) + round_room(pair_extra), ctx->scratch_bytes);
        tg_die("train_gpt", &e);
    }
    const int chunk = (int)(fit < (size_t)max_pairs ? fit : (size_t)max_pairs);
    float *D = (float *)ctx->scratch;
    for (int p0 = 0; p0 < B * NH; p0 += chunk) {
        const int np = fl_min(chunk, B * NH - p0);
        const unsigned rows_blocks = (unsigned)fl_min((int)(((size_t)np * T + 255) / 256), 4096);
        flash_rowdot_kernel<<<rows_blocks, 256, 0, ctx->stream>>>(D, dout, out, p0, np, T, NH, HS);
        CUDA_LAUNCHED("flash_rowdot_kernel");
        tiles(ctx, dqkv, dout, qkv, lse, D, p0, np, T, NH, HS, scale, drop);
    }
}

/* ---- the tile kernels' other shapes, to time against the tuned ones (no dropout) ---- */

template <int HS, int MT, int KT>
void mma_gradients_in(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv, const float *lse,
                      const float *D, int p0, int np, int T, int NH, int hs, float scale, tg_dropout drop) {
    (void)hs; /* HS */
    mma_gradient_kernels<HS, false, MT, KT>(ctx, dqkv, dout, qkv, lse, D, p0, np, T, NH, scale, drop);
}

struct mma_bwd_variant {
    int hs, row_tiles, key_tiles;
    round_kernels<__nv_bfloat16> tiles;
};

/* For the benchmarks' head sizes (64, 96, 128), the tuned shape first,
 * then others where ptxas builds them without spills: at 64 the dq
 * kernel with one row tile, and both kernels with two tiles a warp (the dk,
 * dv kernel at 253 to 255 registers, 2 blocks an SM where one key tile
 * takes 168 and 3). Two dq row tiles spilled at 96 (20 bytes on sm_80, 16
 * on sm_90a); two key tiles are not tried beyond 64, where one already
 * takes 240 to 255. Every shape gives the same bits (each row's and each
 * key's blocks run in the same order). */
template <int HS, int MT = fb_dq_row_tiles<HS>(), int KT = fb_dkv_key_tiles<HS>()>
constexpr mma_bwd_variant mma_bwd_variant_of() {
    return {HS, MT, KT, mma_gradients_in<HS, MT, KT>};
}
static const mma_bwd_variant mma_bwd_variants[] = {
    mma_bwd_variant_of<64>(),
    mma_bwd_variant_of<64, 1, 1>(),
    mma_bwd_variant_of<64, 2, 2>(),
    mma_bwd_variant_of<96>(),
    mma_bwd_variant_of<128>(),
};

} // namespace

void cuda_attention_backward(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B,
                             int T, int NH, int HS, tg_dropout drop) {
    if (B <= 0 || T <= 0 || NH <= 0 || HS <= 0) return;
    fl_check_shape(HS, "attention_backward");
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (ctx->wgmma_backward && cuda_attention_backward_wgmma(o, dqkv, dout, out, qkv, lse, B, T, NH, HS, drop)) return;
    if (o->act == TG_BF16)
        flash_backward<__nv_bfloat16>(ctx, (__nv_bfloat16 *)dqkv, (const __nv_bfloat16 *)dout, (const __nv_bfloat16 *)out,
                                      (const __nv_bfloat16 *)qkv, lse, B, T, NH, HS, drop, round_kernels<__nv_bfloat16>(gradients));
    else
        flash_backward<float>(ctx, (float *)dqkv, (const float *)dout, (const float *)out, (const float *)qkv, lse, B, T, NH, HS,
                              drop, round_kernels<float>(gradients));
}

int cuda_attention_backward_wgmma(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B,
                                  int T, int NH, int HS, tg_dropout drop) {
    return cuda_attention_backward_wgmma_dq(o, dqkv, dout, out, qkv, lse, B, T, NH, HS, drop, CUDA_WGMMA_DQ_SLOTS, NULL);
}

/* The bytes a pair of the wgmma backward's dq takes in the scratch: its
 * slots, and with the slots summed in the kernel their counts too. */
typedef size_t (*slot_bytes_fn)(int T, int HS);
static slot_bytes_fn wgmma_slot_bytes(bool summed) {
    return summed ? flash_bwd_wgmma_sum_bytes : flash_bwd_wgmma_slot_bytes;
}

int cuda_attention_backward_wgmma_dq(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse,
                                     int B, int T, int NH, int HS, tg_dropout drop, cuda_wgmma_dq want, cuda_wgmma_dq *taken) {
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (o->act != TG_BF16 || !flash_bwd_wgmma_fits(ctx, dqkv, dout, qkv, HS, drop)) return 0;
    /* dq through the slots where the scratch holds one pair's (with its D); otherwise by mma.sync */
    const int T_room = T > 0 ? T : 1; /* the route of an empty call too */
    const bool summed = want == CUDA_WGMMA_DQ_SUMMED;
    const size_t slots = wgmma_slot_bytes(summed)(T_room, HS);
    const bool dq_slots = want != CUDA_WGMMA_DQ_MMA && round_pairs(ctx, T_room, slots) > 0;
    if (taken) *taken = dq_slots ? want : CUDA_WGMMA_DQ_MMA;
    if (B <= 0 || T <= 0 || NH <= 0) return 1;
    const round_kernels<__nv_bfloat16> tiles = !dq_slots ? wgmma_dkv_gradients
                                               : summed   ? wgmma_gradients<BW_DQ_SUMMED>
                                                          : wgmma_gradients<BW_DQ_SLOTS>;
    flash_backward<__nv_bfloat16>(ctx, (__nv_bfloat16 *)dqkv, (const __nv_bfloat16 *)dout, (const __nv_bfloat16 *)out,
                                  (const __nv_bfloat16 *)qkv, lse, B, T, NH, HS, drop, tiles, dq_slots ? slots : 0);
    return 1;
}

/* A bf16 backward without dropout whose dq goes through slots of
 * slot_bytes(T, HS) a pair (bench_attention's routes): 0 (nothing run)
 * where the scratch cannot hold one pair's, else gradients over the
 * rounds (nothing for an empty call) and 1. */
template <typename F>
static int slots_backward(cuda_ctx *ctx, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B,
                          int T, int NH, int HS, slot_bytes_fn slot_bytes, F gradients, int max_pairs = FL_MAX_PAIRS) {
    const int T_room = T > 0 ? T : 1; /* the answer of an empty call too */
    const size_t slots = slot_bytes(T_room, HS);
    if (round_pairs(ctx, T_room, slots) == 0) return 0; /* not one pair's slots */
    if (B > 0 && T > 0 && NH > 0)
        flash_backward<__nv_bfloat16>(ctx, (__nv_bfloat16 *)dqkv, (const __nv_bfloat16 *)dout, (const __nv_bfloat16 *)out,
                                      (const __nv_bfloat16 *)qkv, lse, B, T, NH, HS, tg_dropout{}, gradients, slots, max_pairs);
    return 1;
}

/* bench_attention's wgmma backward forms, each with dq by the slots: 0
 * where `built` is false (the form's head sizes) or the wgmma backward
 * does not fit the call, else as slots_backward. */
template <typename F>
static int wgmma_form(tg_o o, bool built, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B,
                      int T, int NH, int HS, F gradients, int max_pairs = FL_MAX_PAIRS,
                      slot_bytes_fn slot_bytes = flash_bwd_wgmma_slot_bytes) {
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (o->act != TG_BF16 || !built || !flash_bwd_wgmma_fits(ctx, dqkv, dout, qkv, HS, tg_dropout{})) return 0;
    return slots_backward(ctx, dqkv, dout, out, qkv, lse, B, T, NH, HS, slot_bytes, gradients, max_pairs);
}

int cuda_attention_backward_wgmma_rounds(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv,
                                         const float *lse, int B, int T, int NH, int HS, size_t round_slot_bytes, int summed) {
    const slot_bytes_fn slot_bytes = wgmma_slot_bytes(summed);
    const size_t pairs = round_slot_bytes / slot_bytes(T > 0 ? T : 1, HS);
    const int max_pairs = pairs < 1 ? 1 : pairs < FL_MAX_PAIRS ? (int)pairs : FL_MAX_PAIRS;
    if (summed)
        return wgmma_form(o, true, dqkv, dout, out, qkv, lse, B, T, NH, HS, wgmma_gradients<BW_DQ_SUMMED>, max_pairs, slot_bytes);
    return wgmma_form(o, true, dqkv, dout, out, qkv, lse, B, T, NH, HS, wgmma_gradients<BW_DQ_SLOTS>, max_pairs, slot_bytes);
}

int cuda_attention_backward_wgmma_kv_shared(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv,
                                            const float *lse, int B, int T, int NH, int HS) {
    return wgmma_form(o, HS == 64, dqkv, dout, out, qkv, lse, B, T, NH, HS, wgmma_gradients<BW_DQ_KV_SHARED>);
}

int cuda_attention_backward_wgmma_two_stages(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv,
                                             const float *lse, int B, int T, int NH, int HS) {
    return wgmma_form(o, HS == 64 || HS == 96, dqkv, dout, out, qkv, lse, B, T, NH, HS, wgmma_gradients<BW_DQ_TWO_STAGES>);
}

int cuda_attention_backward_wgmma_persistent(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv,
                                             const float *lse, int B, int T, int NH, int HS, int blocks) {
    auto persistent = [blocks](cuda_ctx *c, __nv_bfloat16 *g, const __nv_bfloat16 *go, const __nv_bfloat16 *x, const float *l,
                               const float *D, int p0, int np, int t, int nh, int hs, float scale, tg_dropout) {
        flash_bwd_wgmma_persistent(c, g, go, x, l, D, round_dq_slots(D, np, t), p0, np, t, nh, hs, scale, blocks);
    };
    return wgmma_form(o, HS == 64, dqkv, dout, out, qkv, lse, B, T, NH, HS, persistent);
}

size_t cuda_attention_backward_wgmma_blocks(int B, int T, int NH) {
    return B > 0 && T > 0 && NH > 0 ? (size_t)B * NH * ((T + 127) / 128) : 0;
}

int cuda_attention_backward_wgmma_profile(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse,
                                          int B, int T, int NH, int HS, cuda_block_profile *records) {
    /* every run's route (dq by slots), each round's blocks profiled into their pairs' records */
    auto profiled = [records](cuda_ctx *c, __nv_bfloat16 *g, const __nv_bfloat16 *go, const __nv_bfloat16 *x, const float *l,
                              const float *D, int p0, int np, int t, int nh, int hs, float scale, tg_dropout) {
        flash_bwd_wgmma_profiled(c, g, go, x, l, D, round_dq_slots(D, np, t), p0, np, t, nh, hs, scale, records);
    };
    return wgmma_form(o, flash_bwd_wgmma_profile_built(HS), dqkv, dout, out, qkv, lse, B, T, NH, HS, profiled);
}

int cuda_attention_backward_fused(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B,
                                  int T, int NH, int HS) {
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (o->act != TG_BF16 || !fb_fused_built(HS) || !mma_fits(dqkv, dout, qkv, HS)) return 0;
    return slots_backward(ctx, dqkv, dout, out, qkv, lse, B, T, NH, HS, dqs_pair_bytes<FB_FUSED_KB>, fused_gradients);
}

int cuda_attention_backward_shapes(int HS, cuda_flash_bwd_shape *shapes, int max) {
    int n = 0;
    for (const mma_bwd_variant *v; (v = fl_variant(mma_bwd_variants, HS, n)) != NULL; n++)
        if (n < max) shapes[n] = cuda_flash_bwd_shape{v->row_tiles, v->key_tiles};
    return n;
}

int cuda_attention_backward_shaped(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B,
                                   int T, int NH, int HS, int k) {
    const mma_bwd_variant *v = fl_variant(mma_bwd_variants, HS, k);
    if (o->act != TG_BF16 || !v || !mma_fits(dqkv, dout, qkv, HS)) return 0;
    if (B > 0 && T > 0 && NH > 0)
        flash_backward<__nv_bfloat16>(cuda_ctx_of(o), (__nv_bfloat16 *)dqkv, (const __nv_bfloat16 *)dout, (const __nv_bfloat16 *)out,
                                      (const __nv_bfloat16 *)qkv, lse, B, T, NH, HS, tg_dropout{}, v->tiles);
    return 1;
}
