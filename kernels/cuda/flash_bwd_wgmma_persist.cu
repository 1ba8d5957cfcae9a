/* The wgmma backward (flash_bwd_wgmma.cu) as a persistent kernel, at head
 * size 64 (GPT-2's), with dq by the slots: bench_attention's row "wgmma:
 * persistent"; no run takes it yet.
 *
 * Why: a block of the plain launch owns one 128-key block of a pair and
 * starts cold: its barriers set up, its first statistics, K, V and first
 * query tiles each a memory latency away, and it ends with dk and dv's
 * stores. At GPT-2 124M a block runs 9 query tiles on average (about 34
 * us on 2026-11-30: 3.8 us a tile), and nothing of the next block's
 * start overlaps this one's end. Here about one block an SM runs the key
 * blocks dealt to it (fl_persistent_item: longest first, every other
 * round in reverse), and the copies run ahead across its items: the ring
 * of Q and dout stages and the row statistics are counted over the
 * block's tiles, not an item's, so the next item's first tiles and
 * statistics arrive while this one finishes; K and V come in two sets,
 * the next item's copied into the other set once every thread has left
 * the item before (after this item's first block barrier). Every tile is
 * the plain launch's (bw_query_tile, bw_dq_tile: the same operations,
 * the same slots), so dk, dv and dq have the plain launch's bits.
 * Whether it pays is for a GPU (bench_attention), as the profile's `held`
 * and fixed part a block say how much a block's start and end cost.
 * Not at head sizes 96 and 128: a second set of K and V does not fit
 * beside three stages under sm_80's 163 KiB a block. */
#include "kernels/cuda/flash_bwd_wgmma.cuh"

#include "kernels/cuda/flash_bwd_wgmma_tile.cuh"

namespace {

#define BWP_HS 64
#define BWP_STAGES 3 /* every run's at head size 64 (flash_bwd_wgmma.cu's bw_stages) */

/* Shared memory: two sets of K and V (set s: K of warpgroups 0 and 1,
 * then V of 0 and 1), two dS^T tiles, the stages of Q and dout, the
 * mbarriers (kv_full[2], full[BWP_STAGES]), +1024 (the tiles start
 * 1024-aligned). */
static __host__ __device__ constexpr int bwp_shared_bytes() {
    return (int)((8 + 2 * BWP_STAGES) * bw_tile_bytes<BWP_HS>() + 2 * bw_ds_bytes() + (2 + BWP_STAGES) * 8 + 1024);
}
static_assert(bwp_shared_bytes() + 2 * 2 * BW_ROWS * 4 <= 166912, "within sm_80's shared memory a block, as every kernel");

#if defined(BW_BODY) /* the body's pieces: sm_90a, or the emulation */
/* A block's work item: key block kb (keys 128 kb ..) of the round's pair j. */
struct bwp_item {
    int j, kb;
};

/* The round's items longest first (every pair's first key block, then
 * every pair's second, ...: the plain launch's order), dealt by
 * fl_persistent_item. */
struct bwp_schedule {
    int np, kbs;
    __device__ __forceinline__ bool item(int n, bwp_item &it) const {
        int idx;
        if (!fl_persistent_item(n, np * kbs, idx)) return false;
        it = bwp_item{idx % np, idx / np};
        return true;
    }
};

/* What every tile of the block reads: the maps, the round, the carved
 * shared memory. */
struct bwp_block {
    const bw_maps *maps;
    bwp_schedule sched;
    int p0, T, NH;
    float scale;
    const float *lse, *D;
    float *dq_slots;
    __nv_bfloat16 *dqkv;
    unsigned char *kvs, *dss, *stages;
    uint64_t *kv_full, *full;
};

/* Thread 0's copies of item n's K and V (if it exists) into set n % 2. */
static __device__ void bwp_load_keys(const bwp_block &x, int n) {
    bwp_item it = {0, 0};
    if (!x.sched.item(n, it)) return;
    constexpr uint32_t tile = bw_tile_bytes<BWP_HS>();
    const int p = x.p0 + it.j;
    unsigned char *ks = x.kvs + (n & 1) * 4 * tile;
    bw_load_keys<BWP_HS>(ks, ks + 2 * tile, *x.maps, &x.kv_full[n & 1], p % x.NH, it.kb * BW_KEYS, p / x.NH);
}

/* Thread 0's next copy of Q and dout: the block's tile g, query rows q0
 * of item n, into stage g % BWP_STAGES; after an item's last tile the
 * next item's first (its diagonal), until the block's items run out. */
struct bwp_copies {
    int g, n, q0;
    bool more;
    __device__ void issue_next(const bwp_block &x) {
        if (!more) return;
        bwp_item it = {0, 0};
        x.sched.item(n, it);
        const int p = x.p0 + it.j, st = g % BWP_STAGES;
        bw_load_query_tile<BWP_HS>(x.stages + st * 2 * bw_tile_bytes<BWP_HS>(), *x.maps, &x.full[st], p % x.NH, q0, p / x.NH);
        g++, q0 += BW_ROWS;
        if (q0 < x.T) return;
        more = x.sched.item(++n, it);
        q0 = it.kb * BW_KEYS;
    }
};

/* Item n (it) of the block, from the block's tile g: each query tile as
 * the plain launch's loop runs it, the next tile's statistics (the next
 * item's first after the last) copied meanwhile; after the item's first
 * block barrier thread 0 copies item n + 1's K and V (items 0 and 1's
 * were copied first). dk and dv stored at the end. Returns the block's
 * tile count after the item. */
static __device__ __forceinline__ int bwp_run_item(const bwp_block &x, bwp_copies &copies, float (*lse2_t)[BW_ROWS],
                                                   float (*D_t)[BW_ROWS], int n, bwp_item it, int g) {
    constexpr uint32_t tile = bw_tile_bytes<BWP_HS>();
    const int T = x.T, k0 = it.kb * BW_KEYS, p = x.p0 + it.j, b = p / x.NH, h = p % x.NH, C = x.NH * BWP_HS;
    const int wg = (int)threadIdx.x >> 7, kw = k0 + 16 * ((int)threadIdx.x >> 5), wg_k0 = k0 + BW_WG_KEYS * wg;
    const float *lse_rows = x.lse + (size_t)p * T, *D_rows = x.D + (size_t)it.j * T;
    float *slots = x.dq_slots + (size_t)it.j * dqs_slots<BW_KB>(T) * dqs_slot_floats<BWP_HS>();
    bwp_item next = {0, 0};
    const bool has_next = x.sched.item(n + 1, next);
    const unsigned char *ks = x.kvs + (n & 1) * 4 * tile, *vs = ks + 2 * tile;
    const fb_pair c = {b, h, T, x.scale * FB_LOG2E, tg_dropout{}};
    bw_laps<false> clk;
    float dk[BWP_HS / 2], dv[BWP_HS / 2];
#pragma unroll
    for (int i = 0; i < BWP_HS / 2; i++) dk[i] = dv[i] = 0.0f;
    mbar_wait(&x.kv_full[n & 1], (uint32_t)(n >> 1) & 1u);
    bw_kv_held<true> kv;
    kv.load(ks + wg * tile, vs + wg * tile);
    for (int q0 = k0; q0 < T; q0 += BW_ROWS, g++) {
        const int par = g & 1, st = g % BWP_STAGES;
        unsigned char *qs = x.stages + st * 2 * tile, *ds_n = x.dss + par * bw_ds_bytes();
        if (threadIdx.x == 0) copies.issue_next(x); /* tile g + BWP_STAGES - 1, into the stage tile g - 1 left */
        if (q0 + BW_ROWS < T)
            bw_stats_copy(lse2_t[par ^ 1], D_t[par ^ 1], lse_rows, D_rows, q0 + BW_ROWS, T);
        else if (has_next)
            bw_stats_copy(lse2_t[par ^ 1], D_t[par ^ 1], x.lse + (size_t)(x.p0 + next.j) * T, x.D + (size_t)next.j * T,
                          next.kb * BW_KEYS, T);
        mbar_wait(&x.full[st], (uint32_t)(g / BWP_STAGES) & 1u);
        bw_query_tile_at<BWP_HS, true, true>(dk, dv, ks + wg * tile, vs + wg * tile, kv, qs, qs + tile, ds_n, lse2_t[par], D_t[par],
                                             q0, kw, wg, wg_k0, bw_first_issuer<BWP_HS>(par), c, clk);
        bw_stats_land(lse2_t[par ^ 1]);
        fence_proxy_async_shared(); /* dS^T's plain stores, to the tensor core's reads */
        __syncthreads();            /* as the plain launch's; after the item's first, item n - 1 is done with its set */
        if (threadIdx.x == 0 && q0 == k0 && n >= 1) bwp_load_keys(x, n + 1);
        bw_dq_tile<BWP_HS>(slots + dqs_slot<BW_KB>(q0 / BW_ROWS, it.kb) * dqs_slot_floats<BWP_HS>(), ds_n, ks, wg, par);
    }
    bw_store_dkv<BWP_HS>(x.dqkv, dk, dv, C, h, b, kw, T, x.scale);
    return g;
}
#endif

/* gridDim.x blocks (at most the round's items), each over the items
 * fl_persistent_item deals it; dq's shares into the round's slots, which
 * flash_dq_reduce_kernel sums after, as after the plain launch. A
 * template on the head size (BWP_HS only), so that launches name it (the
 * emulation checks their shared memory opt-in by that name). */
template <int HS>
__global__ void __launch_bounds__(BW_THREADS, 1)
    flash_bwd_wgmma_persistent_kernel(const __grid_constant__ bw_maps maps, __nv_bfloat16 *dqkv, const float *lse, const float *D,
                                      float *dq_slots, int p0, int np, int T, int NH, float scale) {
#if defined(BW_BODY)
    static_assert(HS == BWP_HS, "built at head size 64 only");
    constexpr uint32_t tile = bw_tile_bytes<BWP_HS>();
    extern __shared__ __align__(1024) unsigned char bwp_shared[]; /* bwp_shared_bytes() */
    __shared__ float lse2_t[2][BW_ROWS], D_t[2][BW_ROWS];
    unsigned char *kvs = smem_align_1k(bwp_shared), *dss = kvs + 8 * tile, *stages = dss + 2 * bw_ds_bytes();
    uint64_t *kv_full = (uint64_t *)(stages + 2 * BWP_STAGES * tile);
    const bwp_block x = {&maps, {np, (T + BW_KEYS - 1) / BW_KEYS}, p0, T, NH, scale, lse, D, dq_slots, dqkv,
                         kvs, dss, stages, kv_full, kv_full + 2};
    bwp_item it = {0, 0};
    if (!x.sched.item(0, it)) return; /* the launch has at most one block an item: never, but whole blocks if so */
    if (threadIdx.x == 0) {
        mbar_init(&kv_full[0], 1);
        bw_init_barriers<BWP_STAGES>(&kv_full[1], x.full); /* kv_full[1], the stages', the fence */
    }
    bw_stats_copy(lse2_t[0], D_t[0], lse + (size_t)(p0 + it.j) * T, D + (size_t)it.j * T, it.kb * BW_KEYS, T);
    bw_stats_land(lse2_t[0]);
    __syncthreads(); /* the barriers' inits, the first tile's statistics */
    bwp_copies copies = {0, 0, it.kb * BW_KEYS, true};
    if (threadIdx.x == 0) {
        bwp_load_keys(x, 0);
        bwp_load_keys(x, 1);
        for (int i = 0; i < BWP_STAGES - 1; i++) copies.issue_next(x);
    }
    for (int n = 0, g = 0; x.sched.item(n, it); n++) g = bwp_run_item(x, copies, lse2_t, D_t, n, it, g);
#else
    asm volatile("trap;"); /* not sm_90a: the host never launches it here */
#endif
}

} // namespace

int flash_bwd_wgmma_persistent(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv,
                               const float *lse, const float *D, float *dq_slots, int p0, int np, int T, int NH, int HS, float scale,
                               int blocks) {
    if (HS != BWP_HS || !dq_slots || !flash_bwd_wgmma_fits(ctx, dqkv, dout, qkv, HS, tg_dropout{})) return 0;
    if (np <= 0 || T <= 0) return 1;
    bw_maps maps;
    bw_make_maps<BWP_HS>(&maps, qkv, dout, p0, np, T, NH);
    const int items = np * ((T + BW_KEYS - 1) / BW_KEYS), most = blocks > 0 ? blocks : ctx->sm_count;
    const dim3 grid((unsigned)fl_min(items, fl_min(most, 65535)));
    constexpr int bytes = bwp_shared_bytes();
    bw_allow_shared((const void *)flash_bwd_wgmma_persistent_kernel<BWP_HS>, bytes);
    flash_bwd_wgmma_persistent_kernel<BWP_HS><<<grid, BW_THREADS, bytes, ctx->stream>>>(maps, dqkv, lse, D, dq_slots, p0, np, T, NH, scale);
    CUDA_LAUNCHED("flash_bwd_wgmma_persistent_kernel");
    flash_dq_reduce_kernel<BWP_HS, BW_KB><<<dqs_reduce_grid(np, T, BWP_HS), 256, 0, ctx->stream>>>(dqkv, dq_slots, p0, T, NH, scale);
    CUDA_LAUNCHED("flash_dq_reduce_kernel");
    return 1;
}
