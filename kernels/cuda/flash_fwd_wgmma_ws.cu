/* Fused causal attention, forward, on Hopper (sm_90a) as a warp-specialized
 * pipeline (FlashAttention-3's shape, issue 36): bf16, head sizes 64, 96
 * and 128, no dropout; kernels.attention = wgmma_ws. Outputs as flash_fwd.cu's (out,
 * and lse = max + log(sum) per row in the [pair][T] layout that
 * flash_bwd.cu reads).
 *
 * One block: 128 query rows of one pair, three warpgroups.
 *  - Warpgroup 0, the producer: lowers its registers (setmaxnreg), and one
 *    thread brings Q (two tiles of 64 rows) once, then each tile of 128
 *    keys of K and V, by the bulk tensor copy (kernels/cuda/tma.cuh) into a ring
 *    of fw3_stages stages: one box per column chunk of head_tiles.cuh (64
 *    columns 128B-swizzled by the copy engine; at head size 96 a last box
 *    of 32, 64B-swizzled), so a tile lands in the layout the products read. Stage s is
 *    gated by full[s] (one arrival with expect_tx of its K and V bytes: the
 *    phase completes when both boxes landed) and empty[s] (one arrival per
 *    consumer warp when its products no longer read the stage).
 *  - Warpgroups 1 and 2, the consumers: raise their registers; warpgroup c
 *    owns rows q0 + 64 (c - 1) .. + 63, and per key tile does what
 *    flash_fwd_wgmma.cu's warpgroup does (S = Q K^T by wgmma_ss, N = 128
 *    keys; the online softmax with the diagonal tile masked by select; O
 *    += P V by wgmma_rs), pipelined (fw3_consume). The block's last key
 *    tile holds both warpgroups' diagonals (keys and rows both start at
 *    q0), so both take every tile; warpgroup 1's half of it past its rows
 *    is masked whole.
 *    Keys 128 a tile where flash_fwd_wgmma.cu takes 64: a wgmma_ss of N =
 *    64 reads 4 KiB of shared memory per 64 x 64 x 16 product, about the
 *    128 bytes a clock an SM's shared memory gives at the tensor core's
 *    rate; N = 128 reads 6 KiB for twice the work.
 * Sizes not a multiple of the tiles: the maps have the tensor's true shape
 * (tensor_map.h's heads view), so a box reaching past T reads zeros: keys
 * past T give finite scores that the softmax masks (fm_softmax_row tests
 * the key against T, and P is 0 there, times V's zero rows), and query
 * rows past T are computed on zeros and never stored (fw_store_rows).
 * Each row sees the same 128-key tiles and the same operations as in the
 * mma.sync forward's 128-key shapes (cuda_attention_forward_shapes), so
 * the results are their bits under the emulation.
 *
 * Builds: the body needs sm_90a; for other architectures it is a trap and
 * the host launches it only on compute capability 9.0 (ops_cuda.c). Under
 * the emulation (tests/emu) the mbarrier phases, the copies' landing and
 * byte counts, and setmaxnreg's warpgroup uniformity are checked.
 * The consumers ping-pong (fw3_turns): they issue their products in turn,
 * so that one's softmax runs under the other's products.
 * And within a warpgroup, a tile's softmax runs while the warpgroup's own
 * O += P V of the tile before is in flight (fw3_consume). */
#include "kernels/cuda/flash_fwd_wgmma.cuh"
#include "kernels/cuda/mbarrier.cuh"
#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/tma.cuh"

namespace {

#define FW3_ROWS 128                 /* query rows per block: two consumer warpgroups of 64 */
#define FW3_KEYS 128                 /* keys per staged K or V tile */
#define FW3_THREADS 384              /* the producer warpgroup, then the two consumers */
#define FW3_CONSUMER_WARPS 8         /* arrivals on an empty barrier */
#define FW3_PRODUCER_REGS 24         /* 128 * 24 + 256 * 240 <= 64K registers of the SM */
#define FW3_CONSUMER_REGS 240
/* K and V tiles in flight: 3 at head size 64 (113 KiB), 2 at 96 and 128
 * (121 and 161 KiB), where 3 would take 169 and 225: over sm_80's 163 KiB
 * a block, which t_kernel_resources holds every kernel to, and at 128
 * nearly all of an H100 SM's 227 (FlashAttention-3 stages 2 there too). */
template <int HS>
__host__ __device__ static constexpr int fw3_stages() {
    return HS == 64 ? 3 : 2;
}
/* A K or V tile of FW3_KEYS rows; a stage: K, then V. */
template <int HS>
__host__ __device__ static constexpr int fw3_kv_bytes() {
    return (int)head_tile<HS>::template bytes<FW3_KEYS>();
}
template <int HS>
__host__ __device__ static constexpr int fw3_stage_bytes() {
    return 2 * fw3_kv_bytes<HS>();
}
/* Q (two tiles), then the stages. */
template <int HS>
__host__ __device__ static constexpr int fw3_tiles_bytes() {
    return 2 * fw_tile_bytes<HS>() + fw3_stages<HS>() * fw3_stage_bytes<HS>();
}
/* The tiles, then the barriers; +1024: tiles 1024-aligned (base offset 0) */
template <int HS>
__host__ __device__ static constexpr int fw3_shared_bytes() {
    return 1024 + fw3_tiles_bytes<HS>() + (1 + 2 * fw3_stages<HS>()) * 8;
}

/* The block's shared memory, carved from the dynamic allocation. */
struct fw3_smem {
    unsigned char *q;     /* 2 tiles: consumer c's Q at q + (c - 1) tile */
    unsigned char *stage; /* stage s: K at stage + s * fw3_stage_bytes, V one tile after */
    uint64_t *q_full, *full, *empty;
};

/* The tensor maps of one call, passed by value (__grid_constant__): one
 * per column chunk (head_tiles.cuh) of q, k and v; chunk 1's only where
 * the head size has one. */
struct fw3_maps {
    CUtensorMap q[2], k[2], v[2];
};

#if defined(FW_BODY)
/* Ping-pong: the consumer warpgroups take turns issuing their products
 * (named barrier FW3_BAR_TURN + c - 1 is warpgroup c's turn: it syncs
 * there, 256 threads, the other arrives once its own products are
 * issued), so that one's softmax runs while the tensor core works on the
 * other's. Warpgroup 1 goes first (warpgroup 2 arrives there before its
 * loop); each warpgroup's n tiles make n + 1 turns (fw3_consume), and
 * warpgroup 2's last pass, after warpgroup 1's last turn, is left out (no
 * one would meet it). take() always syncs; pass() arrives while
 * j < pass_turns, j counting the turns passed. */
#define FW3_BAR_TURN 1
struct fw3_turns {
    int mine, other, pass_turns;
    mutable int j;
    __device__ __forceinline__ void take() const { named_bar_sync(mine, 256); }
    __device__ __forceinline__ void pass() const {
        if (j < pass_turns) named_bar_arrive(other, 256);
        j++;
    }
};

template <int HS>
static __device__ fw3_smem fw3_carve(unsigned char *raw) {
    fw3_smem m;
    m.q = (unsigned char *)(((uintptr_t)raw + 1023) & ~(uintptr_t)1023);
    m.stage = m.q + 2 * fw_tile_bytes<HS>();
    m.q_full = (uint64_t *)(m.q + fw3_tiles_bytes<HS>());
    m.full = m.q_full + 1;
    m.empty = m.full + fw3_stages<HS>();
    return m;
}

/* The producer's one thread: Q once, then key tiles 0 .. k_tiles - 1 of
 * pair (b, h), tile kt into stage kt % STAGES once its previous
 * occupant (tile kt - STAGES) is released. */
template <int HS>
static __device__ void fw3_produce(const fw3_maps &maps, const fw3_smem &sm, int b, int h, int q0, int k_tiles) {
    constexpr int STAGES = fw3_stages<HS>();
    constexpr int tile = fw_tile_bytes<HS>();
    for (int c = 0; c < head_tile<HS>::chunks; c++) {
        tma_prefetch_map(&maps.q[c]);
        tma_prefetch_map(&maps.k[c]);
        tma_prefetch_map(&maps.v[c]);
    }
    mbar_arrive_expect_tx(sm.q_full, 2 * tile);
    ht_load<HS, FW_KEYS>(sm.q, maps.q, sm.q_full, h, q0, b);
    ht_load<HS, FW_KEYS>(sm.q + tile, maps.q, sm.q_full, h, q0 + FW_KEYS, b);
    for (int kt = 0; kt < k_tiles; kt++) {
        const int s = kt % STAGES, round = kt / STAGES;
        unsigned char *k = sm.stage + s * fw3_stage_bytes<HS>();
        mbar_wait(&sm.empty[s], (round & 1) ^ 1); /* round 0 passes at once */
        mbar_arrive_expect_tx(&sm.full[s], fw3_stage_bytes<HS>());
        ht_load<HS, FW3_KEYS>(k, maps.k, &sm.full[s], h, kt * FW3_KEYS, b);
        ht_load<HS, FW3_KEYS>(k + fw3_kv_bytes<HS>(), maps.v, &sm.full[s], h, kt * FW3_KEYS, b);
    }
}

/* The warp's release of stage st once its products no longer read it. */
static __device__ __forceinline__ void fw3_release(const fw3_smem &sm, int st) {
    __syncwarp(); /* every lane has waited for the products that read it */
    if (((int)threadIdx.x & 31) == 0) mbar_arrive(&sm.empty[st]);
}

/* The softmax of key tile k0's scores for the warp's rows r0 ..: masked
 * where the tile reaches the warpgroup's rows (q0w: its first; uniform). */
static __device__ __forceinline__ void fw3_softmax(float (&s)[FW3_KEYS / 2], float m[2], float l[2], float m_prev[2], fm_lane_pos &at,
                                                   int r0, int q0w, int k0, float scale_log2, int T) {
    at.k0 = k0;
    const fm_reach reach = fm_reach_of<FW3_KEYS>(r0, k0);
    if (k0 + FW3_KEYS <= q0w)
        fw_softmax<true, FW3_KEYS>(s, m, l, m_prev, reach, at, scale_log2, T);
    else
        fw_softmax<false, FW3_KEYS>(s, m, l, m_prev, reach, at, scale_log2, T);
}

/* Consumer warpgroup c (1 or 2): rows q0w .. q0w + 63 against key tiles
 * 0 .. k_tiles - 1 as they land; then its rows stored. Pipelined within
 * the warpgroup (FlashAttention-3's intra-warpgroup overlap): one turn
 * issues S = Q K^T of tile kt and O += P V of tile kt - 1, and tile kt's
 * softmax runs while that second product is in flight; O's rescale to the
 * new max waits for it. k_tiles + 1 turns: tile 0's scores, one a tile
 * after, the last tile's P V. A row sees the operations of fw_key_tile in
 * the same order (so the mma.sync forward's bits under the emulation). */
template <int HS>
static __device__ void fw3_consume(const fw3_smem &sm, int c, __nv_bfloat16 *out, size_t stride, float *lse_rows, int q0w,
                                   int k_tiles, const fw3_turns &turns, float scale_log2, int T) {
    constexpr int STAGES = fw3_stages<HS>();
    const int t = (int)threadIdx.x & 127, warp = t >> 5, lane = t & 31;
    constexpr int tile = fw_tile_bytes<HS>(), kv = fw3_kv_bytes<HS>(), stage = fw3_stage_bytes<HS>();
    const unsigned char *qs = sm.q + (c - 1) * tile;
    float o[HS / 2], s[FW3_KEYS / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, m_prev[2];
    uint32_t a[FW3_KEYS / 16][4];
#pragma unroll
    for (int i = 0; i < HS / 2; i++) o[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < FW3_KEYS / 2; i++) s[i] = 0.0f;
    const int r0 = q0w + 16 * warp;
    fm_lane_pos at{{r0 + (lane >> 2), r0 + (lane >> 2) + 8}, 0, lane & 3};
    mbar_wait(sm.q_full, 0);
    mbar_wait(&sm.full[0], 0);
    turns.take(); /* turn 0: tile 0's scores */
    wgmma_fence();
    fw_issue_scores<HS, FW3_KEYS>(s, qs, sm.stage);
    wgmma_commit();
    turns.pass();
    wgmma_wait<0>();
    wgmma_fence_operand(s);
    fw3_softmax(s, m, l, m_prev, at, r0, q0w, 0, scale_log2, T);
    fw_rescale<HS>(o, m_prev, m);
    fw_pack<FW3_KEYS>(a, s);
    for (int kt = 1; kt < k_tiles; kt++) {
        const int st = kt % STAGES, before = (kt - 1) % STAGES;
        mbar_wait(&sm.full[st], (kt / STAGES) & 1);
        wgmma_fence_operand(o);
        turns.take();
        wgmma_fence(); /* s, o and a were last touched by this thread's registers */
        fw_issue_scores<HS, FW3_KEYS>(s, qs, sm.stage + st * stage);
        wgmma_commit();
        fw_issue_pv<HS, FW3_KEYS>(o, a, sm.stage + before * stage + kv);
        wgmma_commit();
        turns.pass();
        wgmma_wait<1>(); /* the scores; P V of tile kt - 1 may still run */
        wgmma_fence_operand(s);
        fw3_softmax(s, m, l, m_prev, at, r0, q0w, kt * FW3_KEYS, scale_log2, T);
        wgmma_wait<0>(); /* P V of tile kt - 1: o and a are free */
        wgmma_fence_operand(o);
        fw3_release(sm, before);
        fw_rescale<HS>(o, m_prev, m);
        fw_pack<FW3_KEYS>(a, s);
    }
    const int last = (k_tiles - 1) % STAGES;
    wgmma_fence_operand(o);
    turns.take(); /* the last turn: the last tile's P V */
    wgmma_fence();
    fw_issue_pv<HS, FW3_KEYS>(o, a, sm.stage + last * stage + kv);
    wgmma_commit();
    turns.pass();
    wgmma_wait<0>();
    wgmma_fence_operand(o);
    fw3_release(sm, last);
    fw_store_rows<HS>(out, stride, lse_rows, reinterpret_cast<const float(*)[4]>(o), m, l, at, T);
}
#endif

/* One block: query rows [q0, q0 + 128) of pair p0 + fl_grid_pair()
 * (longest first, fl_grid), key tiles up to the block's last row. A
 * template on the head size and the ring's depth (fw3_stages), so that
 * launches name it (the emulation checks their shared memory opt-in by
 * that name). */
template <int HS, int STAGES>
__global__ void __launch_bounds__(FW3_THREADS, 1)
    flash_forward_wgmma_ws_kernel(const __grid_constant__ fw3_maps maps, __nv_bfloat16 *out, float *lse, int p0, int T, int NH,
                                  float scale_log2) {
#if defined(FW_BODY)
    static_assert(STAGES == fw3_stages<HS>(), "the shared memory is carved for fw3_stages");
    static_assert(fw3_shared_bytes<HS>() <= 227 * 1024, "over a block's shared memory on sm_90");
    extern __shared__ __align__(1024) unsigned char fw3_shared[]; /* fw3_shared_bytes<HS>() */
    const fw3_smem sm = fw3_carve<HS>(fw3_shared);
    const int q0 = fl_grid_query_tile() * FW3_ROWS;
    const int p = p0 + fl_grid_pair(), b = p / NH, h = p % NH, C = NH * HS, wg = (int)threadIdx.x >> 7;
    const int k_tiles = (fl_min(q0 + FW3_ROWS, T) + FW3_KEYS - 1) / FW3_KEYS;
    if (threadIdx.x == 0) {
        mbar_init(sm.q_full, 1);
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&sm.full[s], 1);
            mbar_init(&sm.empty[s], FW3_CONSUMER_WARPS);
        }
        mbar_fence_init();
    }
    __syncthreads();
    if (wg == 0) {
        setmaxnreg_dec<FW3_PRODUCER_REGS>();
        if (threadIdx.x == 0) fw3_produce<HS>(maps, sm, b, h, q0, k_tiles);
        return;
    }
    setmaxnreg_inc<FW3_CONSUMER_REGS>();
    const int q0w = q0 + (wg - 1) * FW_KEYS;
    /* both warpgroups take every tile: the block's rows and its last key tile start together */
    static_assert(FW3_KEYS == FW3_ROWS, "the warpgroups' tiles and turns assume one key tile a block of rows");
    const fw3_turns turns{FW3_BAR_TURN + wg - 1, FW3_BAR_TURN + 2 - wg, k_tiles + 1 - (wg == 2), 0};
    if (wg == 2) named_bar_arrive(FW3_BAR_TURN, 256); /* warpgroup 1 goes first */
    fw3_consume<HS>(sm, wg, out + (size_t)b * T * C + (size_t)h * HS, (size_t)C, lse + (size_t)p * T, q0w, k_tiles, turns,
                scale_log2, T);
#else
    asm volatile("trap;"); /* not sm_90a: the host never launches it here */
#endif
}

/* The maps of q, k and v inside qkv [B, T, 3, NH, HS]: per column chunk
 * (head_tiles.cuh), boxes of 64 tokens by the chunk's columns of one
 * head, swizzled by its span. */
template <int HS>
static void fw3_make_maps(fw3_maps *maps, const __nv_bfloat16 *qkv, int B, int T, int NH) {
    const size_t C = (size_t)NH * HS;
    memset(maps, 0, sizeof *maps);
    ht_make_maps<HS>(maps->q, "qkv (queries)", qkv, B, T, NH, 3 * C, FW_KEYS);
    ht_make_maps<HS>(maps->k, "qkv (keys)", qkv + C, B, T, NH, 3 * C, FW3_KEYS);
    ht_make_maps<HS>(maps->v, "qkv (values)", qkv + 2 * C, B, T, NH, 3 * C, FW3_KEYS);
}

/* Launches the instance at head size HS over every pair. */
template <int HS>
static void fw3_launch(cuda_ctx *ctx, void *out, float *lse, const void *qkv, int B, int T, int NH) {
    const float scale_log2 = 1.44269504f / sqrtf((float)HS); /* as flash_fwd.cu's */
    fw3_maps maps;
    fw3_make_maps<HS>(&maps, (const __nv_bfloat16 *)qkv, B, T, NH);
    const void *kernel = (const void *)flash_forward_wgmma_ws_kernel<HS, fw3_stages<HS>()>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, fw3_shared_bytes<HS>()));
    for (int p0 = 0; p0 < B * NH; p0 += FL_MAX_PAIRS) {
        const dim3 grid = fl_grid_pairs_first(fl_min(FL_MAX_PAIRS, B * NH - p0), T, FW3_ROWS);
        flash_forward_wgmma_ws_kernel<HS, fw3_stages<HS>()><<<grid, FW3_THREADS, fw3_shared_bytes<HS>(), ctx->stream>>>(
            maps, (__nv_bfloat16 *)out, lse, p0, T, NH, scale_log2);
        CUDA_LAUNCHED("flash_forward_wgmma_ws_kernel");
    }
}

} // namespace

int cuda_attention_forward_wgmma_ws(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS,
                                    tg_dropout drop) {
    if (!fw_has_instance(o, HS, drop)) return 0;
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (B <= 0 || T <= 0 || NH <= 0) return 1;
    /* the copy engine reads 16-byte aligned tensors only: the cp.async forward takes the rest */
    if (!fm_aligned16(qkv)) return cuda_attention_forward_wgmma(o, out, lse, qkv, B, T, NH, HS, drop);
    head_tile_dispatch(HS, [&](auto hs) { fw3_launch<decltype(hs)::value>(ctx, out, lse, qkv, B, T, NH); });
    return 1;
}
