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
 * One block: two warpgroups (8 warps, 256 threads) owning 128 keys of one
 * pair, warpgroup w keys 64w .. 64w + 63, warp w keys 16w .. 16w + 15 of
 * the block's. K and V stay in shared memory (a tile per warpgroup); the
 * query tiles of 64 rows, from the block's diagonal to T, pass through
 * STAGES stages of Q and dout (bw_stages: three at head sizes 64 and 96,
 * two at 128), staged once for both warpgroups. Every tile comes
 * by the bulk tensor copy (kernels/cuda/tma.cuh; tensor maps made per
 * call, a box past T reads zeros), issued by thread 0 onto an mbarrier
 * with the tile's bytes expected: K and V on kv_full once, tile n on
 * full[n % STAGES], tile n + STAGES - 1 issued when tile n's iteration
 * begins, into the stage every thread left at the last iteration's block
 * barrier; the threads wait on the phase (n / STAGES) % 2 instead of a
 * barrier of their own.
 * A [64 x HS] tile is
 * kernels/cuda/head_tiles.cuh's: column chunks of 64 under the 128B
 * swizzle, at head size 96 a last chunk of 32 under the 64B swizzle. Per
 * query tile, each warpgroup against its keys:
 *   S^T = K Q^T and dP^T = V dout^T by wgmma_ss (all four K-major, N = 64
 *     queries; k16 step j reads chunk j / 4), at head size 64 by wgmma_rs
 *     with K and V as A fragments loaded once into registers
 *     (bw_kv_in_registers: shared memory's bandwidth); keys are the
 *     accumulators' rows, so the query rows' statistics (lse and D,
 *     staged beside the tile) are per column;
 *   P^T and dS^T by fb_ds, rounded to bf16 and packed straight from the
 *     accumulators into A fragments (mma_a_from_accumulators);
 *   dV += P^T dout and dK += dS^T Q by wgmma_rs, dout and Q read MN-major
 *     (the query as k, the head's columns as n: one product per chunk, N
 *     = 64 or 32; ht_rs_mn), waited for before the barrier below (left
 *     in flight across it, they held P's and dS's fragments and cost 20
 *     to 40 registers more);
 *   DQ: dS^T stored to shared memory (both warpgroups' rows in one 128 x
 *     64 tile under the 128B swizzle at every head size); after a
 *     barrier, the tile's share of dq over the block's 128 keys, dS K, by
 *     wgmma_ss with both operands MN-major (dS^T as [key][query], K's
 *     chunk as [key][column]), one chain of eight k16 steps a chunk: at
 *     head size 64 by the warpgroup of the tile's parity, at 96 chunk 0
 *     (64 columns) by that one and chunk 1 (32) by the other, at 128
 *     chunk w by warpgroup w; written as float32 to its own slot of the
 *     scratch (one 64 x HS slot per 128-key block and query tile at or
 *     below the diagonal); flash_dq_reduce_kernel then sums each query
 *     row's slots in key-block order: dq in a fixed order, no atomics,
 *     the same bits run after run. Without DQ (a scratch too small for
 *     one pair's slots) flash_bwd.cu runs the mma.sync dq kernel instead.
 * The warpgroups issue a tile's score products in turn (on a named
 * barrier), so that one's softmax runs while the tensor core works on the
 * other's products; without the turn both would issue at once, then both
 * wait, and the tensor core would idle through both softmaxes. The one
 * with less of the tile before's dq share left goes first
 * (bw_first_issuer: at head size 64 the one that took no share, at 96 the
 * one that took the 32-column chunk), where warpgroup 0 always went
 * first: at head size 64, on every other tile, warpgroup 1 waited through
 * 0's dq product and store before it could issue.
 * Warpgroup 1 runs its first query tile, above all its keys, masked (zero
 * P and dS), so both meet every barrier. Two warpgroups a block halve the
 * Q and dout staged per key and the dq slots, and give dq 128 keys of k.
 * The statistics of tile n + 1 (lse and D) come by a 4-byte cp.async a
 * row, issued when tile n's iteration begins and waited for just before
 * its block barrier (a plain load there held the whole block for a memory
 * latency every tile).
 * ptxas (sm_90a, CUDA 13.0), with every run's stages: DQ at 64 230
 * registers, at 96 238, at 128 255; without DQ 200, 198 and 232; none
 * spills. docs/design.md has the history: the forms tried and their
 * registers.
 * SUM (bench_attention's "dq by slots summed in the kernel" row, not yet
 * any run's): no second kernel; after its last tile each block counts its
 * arrival at every query tile it shared in (an atomic per tile), and the
 * last of a tile's key blocks sums the tile's slots as the reduction
 * kernel would (dqs_sum_store4: the same bits), while they are likely
 * still in L2 (the reduction kernel reads them back from memory: 230 MB
 * a layer at GPT-2 124M). Which pays is for a GPU.
 * flash_bwd_wgmma_persist.cu runs these tiles as a persistent kernel at
 * head size 64 (bench_attention's row; the same bits).
 * Not yet here: a producer warp (setmaxnreg would leave the consumers 240
 * registers, under dq's 255 at 128), dq summed without any trip through
 * global memory (FlashAttention-3's atomics add in no fixed order).
 *
 * Builds: the kernel's body needs sm_90a (__CUDA_ARCH_FEAT_SM90_ALL); for
 * other device architectures it is a trap, and flash_bwd.cu launches it
 * only on compute capability 9.0. Under the emulation (tests/emu) it runs
 * on wgmma.cuh's stand-ins. */
#include "kernels/cuda/flash_bwd_wgmma.cuh"

#include "kernels/cuda/flash_bwd_wgmma_tile.cuh"
#include "kernels/cuda/tensor_map.h"

namespace {

/* Shared memory: K and V (a tile per warpgroup), with
 * DQ two 128 x 64 dS^T tiles (both warpgroups' keys; tile n's in n % 2),
 * STAGES stages of Q and dout, the mbarriers (kv_full, full[STAGES]),
 * +1024: the tiles start 1024-aligned (base offset 0 under either
 * swizzle). */
template <int HS, bool DQ, int STAGES>
static __host__ __device__ constexpr int bw_shared_bytes() {
    return (int)((4 + 2 * STAGES) * bw_tile_bytes<HS>() + (DQ ? 2 * bw_ds_bytes() : 0) + (1 + STAGES) * 8 + 1024);
}

/* The stages of Q and dout every run takes: three where they fit under
 * sm_80's 166912 bytes a block (which t_kernel_resources holds every
 * kernel to), at head sizes 64 and 96; two at 128. With two, tile n + 1's
 * copy had one iteration (about 1 us at GPT-2 124M, by a count of a
 * tile's work; untimed) to land before its wait; with three, tile n + 2's
 * is issued then and has two. The same arithmetic: bench_attention times
 * two stages as a row of its own (BW_DQ_TWO_STAGES). */
#define BW_STATIC_BYTES (2 * 2 * BW_ROWS * 4) /* the kernel's lse2_t and D_t */
template <int HS>
static __host__ __device__ constexpr int bw_stages() {
    return bw_shared_bytes<HS, true, 3>() + BW_STATIC_BYTES <= 166912 ? 3 : 2;
}
static_assert(bw_stages<64>() == 3 && bw_stages<96>() == 3 && bw_stages<128>() == 2, "the stages the comment above counts");

/* The profiled instance (PROF) at head sizes 64 and 96, the benchmark
 * models'; at 128 every run's takes 255 registers, and the clock's would
 * spill. */
static __host__ __device__ constexpr bool bw_profile_built(int HS) { return HS == 64 || HS == 96; }

#if defined(BW_BODY)
/* SUM, after the block's last tile: its arrival counted at each query
 * tile it shared in (dq_counts: an int a tile of each of the round's
 * pairs, zeroed before the launch), and the tiles where it is the last of
 * their qt / BW_KB + 1 key blocks summed into dq as flash_dq_reduce_kernel
 * sums them (the same bits). Each counting thread fences before its count
 * and, where it was last, after it, as CUTLASS's barrier does. last:
 * BW_THREADS 2-byte flags (the emulation's race check keeps 2-byte
 * granules) in dS^T's tiles, which no product reads any more (an array of
 * its own took head size 128 past sm_80's limit a block). */
template <int HS>
static __device__ void bw_dq_finish(uint16_t *last, __nv_bfloat16 *dqkv, const float *slots, int *dq_counts, int j, int kb,
                                    int T, int NH, int b, int h, float scale) {
    const int tiles = (T + BW_ROWS - 1) / BW_ROWS, C = NH * HS;
    int *counts = dq_counts + (size_t)j * tiles;
    for (int q = BW_KB * kb; q < tiles; q += BW_THREADS) {
        const int mine = q + (int)threadIdx.x, n = fl_min(BW_THREADS, tiles - q);
        if (mine < tiles) {
            dqs_fence();
            last[threadIdx.x] = (uint16_t)(dqs_count(&counts[mine]) == mine / BW_KB);
            if (last[threadIdx.x]) dqs_fence();
        }
        __syncthreads(); /* last[] */
        for (int i = 0; i < n; i++) {
            if (!last[i]) continue;
            const int qt = q + i, rows = fl_min(BW_ROWS, T - BW_ROWS * qt);
            const float *at = slots + dqs_slot<BW_KB>(qt, 0) * dqs_slot_floats<HS>();
            for (int e = (int)threadIdx.x; e < rows * (HS / 4); e += BW_THREADS) {
                const int r = e / (HS / 4), c = 4 * (e % (HS / 4));
                dqs_sum_store4<HS>(dqkv + ((size_t)b * T + BW_ROWS * qt + r) * 3 * C + (size_t)h * HS + c, at + r * HS + c,
                                   qt / BW_KB + 1, scale);
            }
        }
        __syncthreads(); /* last[]'s readers, before the next tiles' counts */
    }
}
#endif

/* One block: keys [k0, k0 + 128) of pair p0 + fl_grid_pair() (the first
 * keys first, fl_grid_pairs_first), warpgroup w keys k0 + 64 w .., query
 * tiles from the block's diagonal (q0 = k0) to T; tile n's Q and dout in
 * stage n % STAGES, tile n + STAGES - 1 copied into the stage tile n - 1
 * left while n is used, its rows' statistics in n % 2, tile n + 1's
 * copied into the other (maps: bw_make_maps'). Warpgroup 1's first tile lies wholly above its keys:
 * it runs it masked (dS and P zero, nothing added), so both warpgroups
 * meet the same barriers. DQ: each tile's dq share into the pair's slots
 * (dq_slots: the round's pairs, dqs_slots<BW_KB>(T) each), from dS^T tile n % 2.
 * One block barrier a tile: with DQ the one between the dS^T stores and
 * dq's product, which every thread reaches after its last reads of the
 * tile's stage and statistics and of the dS^T tile before (dq's product
 * of tile n - 1, waited for), so that the copy into that stage, the
 * statistics and the dS^T stores of the tiles after may follow; without
 * DQ, one at the tile's end. KVR: K and V held in registers
 * (bw_kv_in_registers; every run's where it holds, else bench_attention's
 * comparison). PROF: each warpgroup's phases (bw_laps) into the block's
 * record, prof[(p0 + j) key blocks + kb] (bench_attention's profile). */
template <int HS, bool DQ, bool KVR, bool SUM, int STAGES, bool PROF>
__global__ void __launch_bounds__(BW_THREADS, 1)
    flash_bwd_wgmma_kernel(const __grid_constant__ bw_maps maps, __nv_bfloat16 *dqkv, const float *lse, const float *D,
                           float *dq_slots, int *dq_counts, int p0, int T, int NH, float scale, cuda_block_profile *prof) {
#if defined(BW_BODY)
    static_assert(!KVR || bw_kv_in_registers<HS>(), "K and V held in registers at head size 64 only");
    static_assert(!SUM || DQ, "the slots summed in the kernel: with DQ only");
    static_assert(STAGES >= 2, "tile n + 1 copied while n is used");
    constexpr uint32_t tile = bw_tile_bytes<HS>();
    extern __shared__ __align__(1024) unsigned char bw_shared[]; /* bw_shared_bytes<HS, DQ, STAGES>() */
    __shared__ float lse2_t[2][BW_ROWS], D_t[2][BW_ROWS];
    unsigned char *ks = smem_align_1k(bw_shared); /* dS^T's stores then st.shared */
    /* K of warpgroups 0, 1; V of 0, 1; with DQ dS^T 0 and 1 (128 x 64 each, a whole number of KiB); stage i: Q at
       stages + 2 i tile, dout after; then the barriers */
    unsigned char *vs = ks + 2 * tile, *dss = vs + 2 * tile, *stages = dss + (DQ ? 2 * bw_ds_bytes() : 0);
    uint64_t *kv_full = (uint64_t *)(stages + 2 * STAGES * tile), *full = kv_full + 1;
    const int kb = fl_grid_key_tile(), k0 = kb * BW_KEYS, j = fl_grid_pair(), p = p0 + j, b = p / NH, h = p % NH, C = NH * HS;
    const int wg = (int)threadIdx.x >> 7, kw = k0 + 16 * ((int)threadIdx.x >> 5), wg_k0 = k0 + BW_WG_KEYS * wg;
    const float *lse_rows = lse + (size_t)p * T, *D_rows = D + (size_t)j * T;
    float *slots = DQ ? dq_slots + (size_t)j * dqs_slots<BW_KB>(T) * dqs_slot_floats<HS>() : NULL;
    bw_laps<PROF> clk;
    clk.begin(PROF ? prof + (size_t)p * gridDim.y + kb : NULL, (uint32_t)((T - k0 + BW_ROWS - 1) / BW_ROWS));
    if (threadIdx.x == 0) bw_init_barriers<STAGES>(kv_full, full);
    bw_stats_copy(lse2_t[0], D_t[0], lse_rows, D_rows, k0, T);
    bw_stats_land(lse2_t[0]);
    __syncthreads(); /* the barriers' inits, tile 0's statistics */
    clk.lap(BW_PH_START);
    if (threadIdx.x == 0) bw_first_copies<HS, STAGES>(ks, vs, stages, maps, kv_full, full, h, k0, b, T);
    const fb_pair c = {b, h, T, scale * FB_LOG2E, tg_dropout{}};
    float dk[HS / 2], dv[HS / 2];
#pragma unroll
    for (int i = 0; i < HS / 2; i++) dk[i] = dv[i] = 0.0f;
    mbar_wait(kv_full, 0);
    bw_kv_held<KVR> kv;
    kv.load(ks + wg * tile, vs + wg * tile);
    clk.lap(BW_PH_KEYS);
    /* tile n: stage st = n % STAGES, its barrier's phase (n / STAGES) % 2; par = n % 2: the statistics' and dS^T's
       buffer, and at head size 64 the warpgroup that takes dq's product (from n, not counters carried across the
       iterations: those took ptxas 8 registers more at head size 64 and spilled 4 bytes at 128) */
    for (int q0 = k0, n = 0; q0 < T; q0 += BW_ROWS, n++) {
        const int par = n & 1, st = n % STAGES, ahead = (n + STAGES - 1) % STAGES; /* tile n + STAGES - 1's: n - 1's */
        const uint32_t phase = (uint32_t)(n / STAGES) & 1u;
        unsigned char *qs = stages + st * 2 * tile;
        /* that stage's readers passed the last iteration's block barrier */
        if (threadIdx.x == 0 && q0 + BW_ROWS * (STAGES - 1) < T)
            bw_load_query_tile<HS>(stages + ahead * 2 * tile, maps, &full[ahead], h, q0 + BW_ROWS * (STAGES - 1), b);
        if (q0 + BW_ROWS < T) bw_stats_copy(lse2_t[par ^ 1], D_t[par ^ 1], lse_rows, D_rows, q0 + BW_ROWS, T);
        mbar_wait(&full[st], phase); /* tile n's Q and dout are in */
        clk.lap(BW_PH_DATA);
        const unsigned char *ks_w = ks + wg * tile, *vs_w = vs + wg * tile;
        unsigned char *ds_n = dss + par * bw_ds_bytes();
        bw_query_tile_at<HS, DQ, KVR>(dk, dv, ks_w, vs_w, kv, qs, qs + tile, ds_n, lse2_t[par], D_t[par], q0, kw, wg, wg_k0,
                                      bw_first_issuer<HS>(par), c, clk);
        bw_stats_land(lse2_t[par ^ 1]); /* tile n + 1's statistics, for every thread after the barrier (see there) */
        if (DQ) fence_proxy_async_shared(); /* dS^T's plain stores, to the tensor core's reads */
        /* with DQ: both warpgroups' keys of dS^T are in; either way stage n's and the statistics' readers are done,
           and with DQ those of dS^T tile n - 1 too: the next iterations refill them */
        __syncthreads();
        clk.lap(BW_PH_BARRIER);
        if (DQ) bw_dq_tile<HS>(slots + dqs_slot<BW_KB>(q0 / BW_ROWS, kb) * dqs_slot_floats<HS>(), ds_n, ks, wg, par);
        clk.lap(BW_PH_DQ);
    }
    bw_store_dkv<HS>(dqkv, dk, dv, C, h, b, kw, T, scale);
    if constexpr (SUM) {
        __syncthreads(); /* the last tile's dq share stored (its product, which read dS^T, waited for) */
        static_assert(bw_ds_bytes() >= 2 * BW_THREADS, "the finish's flags in dS^T's tiles");
        bw_dq_finish<HS>(reinterpret_cast<uint16_t *>(dss), dqkv, slots, dq_counts, j, kb, T, NH, b, h, scale);
    }
    clk.lap(BW_PH_STORE);
    if ((threadIdx.x & 127) == 0) clk.record(wg + 1);
#else
    asm volatile("trap;"); /* not sm_90a: the host never launches it here */
#endif
}

/* The kernels at head size HS: with dq_slots, dk, dv and the dq shares in
 * `form` (BW_DQ_SLOTS, BW_DQ_KV_SHARED and BW_DQ_TWO_STAGES: then their
 * reduction; with BW_DQ_SUMMED the round's counts, after its slots,
 * zeroed first); without, dk and dv only. The emulation names a launch by
 * its source text, so each launch is its own line. */
template <int HS>
void bw_launch(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv, const float *lse,
               const float *D, float *dq_slots, int p0, int np, int T, int NH, float scale, bw_dq_form form,
               cuda_block_profile *prof) {
    constexpr bool KVR = bw_kv_in_registers<HS>();
    constexpr int S = bw_stages<HS>();
    const dim3 grid = fl_grid_pairs_first(np, T, BW_KEYS);
    cudaStream_t stream = ctx->stream;
    bw_maps maps;
    bw_make_maps<HS>(&maps, qkv, dout, p0, np, T, NH);
    cuda_block_profile *none = NULL;
    if (!dq_slots) {
        constexpr int bytes = bw_shared_bytes<HS, false, S>();
        bw_allow_shared((const void *)flash_bwd_wgmma_kernel<HS, false, KVR, false, S, false>, bytes);
        flash_bwd_wgmma_kernel<HS, false, KVR, false, S, false><<<grid, BW_THREADS, bytes, stream>>>(
            maps, dqkv, lse, D, (float *)NULL, (int *)NULL, p0, T, NH, scale, none);
        CUDA_LAUNCHED("flash_bwd_wgmma_kernel");
        return;
    }
    constexpr int shared = bw_shared_bytes<HS, true, S>();
    if (form == BW_DQ_SUMMED) {
        int *counts = (int *)(dq_slots + (size_t)np * dqs_slots<BW_KB>(T) * dqs_slot_floats<HS>());
        CUDA_CHECK(cudaMemsetAsync(counts, 0, (size_t)np * dqs_counts_bytes(T), stream));
        bw_allow_shared((const void *)flash_bwd_wgmma_kernel<HS, true, KVR, true, S, false>, shared);
        flash_bwd_wgmma_kernel<HS, true, KVR, true, S, false><<<grid, BW_THREADS, shared, stream>>>(
            maps, dqkv, lse, D, dq_slots, counts, p0, T, NH, scale, none);
        CUDA_LAUNCHED("flash_bwd_wgmma_kernel");
        return;
    }
    if (form == BW_DQ_KV_SHARED) {
        bw_allow_shared((const void *)flash_bwd_wgmma_kernel<HS, true, false, false, S, false>, shared);
        flash_bwd_wgmma_kernel<HS, true, false, false, S, false><<<grid, BW_THREADS, shared, stream>>>(
            maps, dqkv, lse, D, dq_slots, (int *)NULL, p0, T, NH, scale, none);
        CUDA_LAUNCHED("flash_bwd_wgmma_kernel");
    } else if (form == BW_DQ_TWO_STAGES) {
        constexpr int two = bw_shared_bytes<HS, true, 2>();
        bw_allow_shared((const void *)flash_bwd_wgmma_kernel<HS, true, KVR, false, 2, false>, two);
        flash_bwd_wgmma_kernel<HS, true, KVR, false, 2, false><<<grid, BW_THREADS, two, stream>>>(
            maps, dqkv, lse, D, dq_slots, (int *)NULL, p0, T, NH, scale, none);
        CUDA_LAUNCHED("flash_bwd_wgmma_kernel");
    } else if (prof) { /* every run's form, profiled (bw_profile_built) */
        if constexpr (bw_profile_built(HS)) {
            bw_allow_shared((const void *)flash_bwd_wgmma_kernel<HS, true, KVR, false, S, true>, shared);
            flash_bwd_wgmma_kernel<HS, true, KVR, false, S, true><<<grid, BW_THREADS, shared, stream>>>(
                maps, dqkv, lse, D, dq_slots, (int *)NULL, p0, T, NH, scale, prof);
            CUDA_LAUNCHED("flash_bwd_wgmma_kernel");
        }
    } else {
        bw_allow_shared((const void *)flash_bwd_wgmma_kernel<HS, true, KVR, false, S, false>, shared);
        flash_bwd_wgmma_kernel<HS, true, KVR, false, S, false><<<grid, BW_THREADS, shared, stream>>>(
            maps, dqkv, lse, D, dq_slots, (int *)NULL, p0, T, NH, scale, none);
        CUDA_LAUNCHED("flash_bwd_wgmma_kernel");
    }
    flash_dq_reduce_kernel<HS, BW_KB><<<dqs_reduce_grid(np, T, HS), 256, 0, stream>>>(dqkv, dq_slots, p0, T, NH, scale);
    CUDA_LAUNCHED("flash_dq_reduce_kernel");
}

} // namespace

size_t flash_bwd_wgmma_slot_bytes(int T, int HS) { return dqs_pair_bytes<BW_KB>(T, HS); }

int cuda_attention_backward_wgmma_stages(int HS) {
    int stages = 0;
    if (head_tile_built(HS)) head_tile_dispatch(HS, [&](auto hs) { stages = bw_stages<decltype(hs)::value>(); });
    return stages;
}
size_t flash_bwd_wgmma_sum_bytes(int T, int HS) { return dqs_pair_bytes<BW_KB>(T, HS) + dqs_counts_bytes(T); }

int flash_bwd_wgmma(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv, const float *lse,
                    const float *D, float *dq_slots, int p0, int np, int T, int NH, int HS, float scale, tg_dropout drop,
                    bw_dq_form form) {
    if (!flash_bwd_wgmma_fits(ctx, dqkv, dout, qkv, HS, drop)) return 0;
    if (np <= 0 || T <= 0) return 1;
    head_tile_dispatch(HS, [&](auto hs) {
        bw_launch<decltype(hs)::value>(ctx, dqkv, dout, qkv, lse, D, dq_slots, p0, np, T, NH, scale, form, NULL);
    });
    return 1;
}

bool flash_bwd_wgmma_fits(const cuda_ctx *ctx, const void *dqkv, const void *dout, const void *qkv, int HS, tg_dropout drop) {
    const uintptr_t any = (uintptr_t)dqkv | (uintptr_t)dout | (uintptr_t)qkv;
    return head_tile_runs(ctx, HS, drop) && any % 16 == 0;
}

int flash_bwd_wgmma_profiled(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv,
                             const float *lse, const float *D, float *dq_slots, int p0, int np, int T, int NH, int HS, float scale,
                             cuda_block_profile *records) {
    if (!bw_profile_built(HS) || !flash_bwd_wgmma_fits(ctx, dqkv, dout, qkv, HS, tg_dropout{}) || !dq_slots) return 0;
    if (np <= 0 || T <= 0) return 1;
    if (HS == 64)
        bw_launch<64>(ctx, dqkv, dout, qkv, lse, D, dq_slots, p0, np, T, NH, scale, BW_DQ_SLOTS, records);
    else
        bw_launch<96>(ctx, dqkv, dout, qkv, lse, D, dq_slots, p0, np, T, NH, scale, BW_DQ_SLOTS, records);
    return 1;
}

int flash_bwd_wgmma_profile_built(int HS) { return bw_profile_built(HS); }

const char *cuda_attention_backward_wgmma_phase(int part, int phase) {
    static const char *const names[] = {"start", "keys",  "data",    "turn", "scores",
                                        "softmax", "dk dv", "barrier", "dq",   "store"};
    static_assert(sizeof names / sizeof names[0] == CUDA_PROFILE_PHASES, "a name a phase");
    return part > 0 && part < CUDA_PROFILE_PARTS && phase >= 0 && phase < CUDA_PROFILE_PHASES ? names[phase] : NULL;
}
