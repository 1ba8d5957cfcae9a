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
 *    of 32, 64B-swizzled), so a tile lands in the layout the products read.
 *    K and V each have their barriers, as FlashAttention-3's: stage s's K
 *    is gated by full_k[s] (one arrival with expect_tx of its bytes: the
 *    phase completes when its boxes landed) and empty_k[s] (one arrival
 *    per consumer warp once its scores product no longer reads it), V by
 *    full_v[s] and empty_v[s] (once its P V product is done). A tile's V
 *    is read a turn after its K (P V of tile kt runs in turn kt + 1), so
 *    one barrier for both held each K a turn longer than its product
 *    needed it: with two stages (head sizes 96 and 128) the next tile's
 *    copy was issued only once the tile before's P V was done, late in the
 *    turn before the one that reads it, and each turn waited for a copy.
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
 * O += P V of the tile before is in flight (fw3_consume_item).
 * Persistent form (cuda_attention_forward_wgmma_ws_persistent, for
 * bench_attention to time; head sizes 64 and 96): one block an SM, each
 * over its share of the blocks' items (fw3_schedule), with Q in two
 * buffers and the ring running on across items, so that a block's next
 * Q and key tiles load while it finishes the item before, where one
 * block an item leaves the SM's tensor cores idle through each block's
 * start and end. */
#include <limits.h>

#include "kernels/cuda/block_clock.cuh"
#include "kernels/cuda/flash_fwd_wgmma.cuh"
#include "kernels/cuda/mbarrier.cuh"
#include "kernels/cuda/smem_layout.h"
#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/tma.cuh"

namespace {

#define FW3_ROWS 128                 /* query rows per block: two consumer warpgroups of 64 */
#define FW3_KEYS 128                 /* keys per staged K or V tile */
#define FW3_THREADS 384              /* the producer warpgroup, then the two consumers */
#define FW3_CONSUMER_WARPS 8         /* arrivals on an empty barrier */
#define FW3_PRODUCER_REGS 24         /* 128 * 24 + 256 * 240 <= 64K registers of the SM */
#define FW3_CONSUMER_REGS 240
/* The phase profile's parts and phases (block_profile.h; the PROF
 * instance only): the producer's thread, then each consumer warpgroup. */
enum { FW3_PH_START, FW3_PH_RING_FULL, FW3_PH_ISSUE_COPIES };
enum { FW3_PH_ENTRY, FW3_PH_FIRST_DATA, FW3_PH_DATA, FW3_PH_TURN, FW3_PH_ISSUE, FW3_PH_SCORES, FW3_PH_SOFTMAX, FW3_PH_PV,
       FW3_PH_RESCALE, FW3_PH_STORE };
template <bool PROF>
using fw3_laps = bc_laps<PROF, CUDA_PROFILE_PHASES>;
/* K and V tiles in flight: 3 at head size 64 (113 KiB), 2 at 96 and 128
 * (121 and 161 KiB), where 3 would take 169 and 225: over sm_80's 163 KiB
 * a block, which t_kernel_resources holds every kernel to, and at 128
 * nearly all of an H100 SM's 227 (FlashAttention-3 stages 2 there too). */
template <int HS>
__host__ __device__ static constexpr int fw3_stages() {
    return HS == 64 ? 3 : 2;
}
/* Q buffers (each two tiles, one a consumer warpgroup): the persistent
 * launch loads the next item's Q while the consumers still read this
 * one's; one block, one item, needs one. */
template <bool PERSIST>
__host__ __device__ static constexpr int fw3_q_buffers() {
    return PERSIST ? 2 : 1;
}
/* The persistent launch at head size HS: 64 and 96 (129 and 145 KiB with
 * the second Q buffer); at 128 it would take 193, over the 163 KiB a
 * block that t_kernel_resources holds every kernel to. */
__host__ __device__ static constexpr bool fw3_persistent_built(int HS) { return HS == 64 || HS == 96; }
/* The instances with one exponential in POLY on the FMA units (exp2_poly,
 * FlashAttention-4's trade), for bench_attention to time against every
 * run's: head size 64, where the exponentials weigh most against the
 * products (half the products of 128 for as many exponentials). */
__host__ __device__ static constexpr bool fw3_poly_built(int HS, int poly) { return HS == 64 && (poly == 4 || poly == 8); }
/* A K or V tile of FW3_KEYS rows; a stage: K, then V. */
template <int HS>
__host__ __device__ static constexpr int fw3_kv_bytes() {
    return (int)head_tile<HS>::template bytes<FW3_KEYS>();
}
template <int HS>
__host__ __device__ static constexpr int fw3_stage_bytes() {
    return 2 * fw3_kv_bytes<HS>();
}
/* Q's buffers (two tiles each), then the stages (K, then V). */
template <int HS, bool PERSIST>
__host__ __device__ static constexpr int fw3_tiles_bytes() {
    return fw3_q_buffers<PERSIST>() * 2 * fw_tile_bytes<HS>() + fw3_stages<HS>() * fw3_stage_bytes<HS>();
}
/* The tiles, then the barriers (q_full and q_empty a Q buffer; full_k,
 * full_v, empty_k and empty_v a stage); +1024: tiles 1024-aligned (base
 * offset 0) */
template <int HS, bool PERSIST>
__host__ __device__ static constexpr int fw3_shared_bytes() {
    return 1024 + fw3_tiles_bytes<HS, PERSIST>() + (2 * fw3_q_buffers<PERSIST>() + 4 * fw3_stages<HS>()) * 8;
}

/* The block's shared memory, carved from the dynamic allocation. */
struct fw3_smem {
    unsigned char *q;     /* Q buffer qb: consumer c's tile at q + (2 qb + c - 1) tile */
    unsigned char *stage; /* stage s: K at stage + s * fw3_stage_bytes, V one tile after */
    uint64_t *q_full, *q_empty, *full_k, *full_v, *empty_k, *empty_v;
};

/* The tensor maps of one call, passed by value (__grid_constant__): one
 * per column chunk (head_tiles.cuh) of q, k and v; chunk 1's only where
 * the head size has one. */
struct fw3_maps {
    CUtensorMap q[2], k[2], v[2];
};

#if defined(FW_BODY) /* the body's pieces (sm_90a, the emulation): unused in nvcc's other passes */
/* Key tiles of the 128-row query tile that starts at q0: up to its last row. */
static __host__ __device__ __forceinline__ int fw3_key_tiles(int q0, int T) {
    return (fl_min(q0 + FW3_ROWS, T) + FW3_KEYS - 1) / FW3_KEYS;
}

/* A block's work item: pair `pair` (of the whole call), query tile
 * q_tile. */
struct fw3_item {
    int pair, q_tile;
};

/* The items of a launch over pairs p0 .. p0 + pairs - 1, of `tiles` query
 * tiles each, in the longest-first order (every pair's last tile, then
 * every pair's last but one, ...). A plain launch (a block an item:
 * fl_grid_pairs_first's grid, whose blocks the hardware starts in that
 * order) gives block its own item, n = 0. A persistent one (gridDim.x
 * blocks, about one an SM) deals the list as fl_persistent_item does. */
struct fw3_schedule {
    int p0, pairs, tiles;
    bool persistent;
    __device__ __forceinline__ bool item(int n, fw3_item &it) const {
        if (!persistent) {
            it = fw3_item{p0 + fl_grid_pair(), fl_grid_query_tile()};
            return n == 0;
        }
        int idx;
        if (!fl_persistent_item(n, pairs * tiles, idx)) return false;
        it = fw3_item{p0 + idx % pairs, tiles - 1 - idx / pairs};
        return true;
    }
};

/* Ping-pong: the consumer warpgroups take turns issuing their products
 * (named barrier FW3_BAR_TURN + c - 1 is warpgroup c's turn: it syncs
 * there, 256 threads, the other arrives once its own products are
 * issued), so that one's softmax runs while the tensor core works on the
 * other's. Warpgroup 1 goes first (warpgroup 2 arrives there before its
 * loop); each warpgroup's item of n tiles makes n + 1 turns
 * (fw3_consume_item), the same for both, so the turns alternate across a
 * persistent block's items too. Warpgroup 2's very last pass, after
 * warpgroup 1's last turn, is left out (no one would meet it). take()
 * always syncs; pass(block_last) arrives unless this is that pass. */
#define FW3_BAR_TURN 1
struct fw3_turns {
    int mine, other;
    bool leaves_last; /* warpgroup 2 */
    __device__ __forceinline__ void take() const { named_bar_sync(mine, 256); }
    __device__ __forceinline__ void pass(bool block_last) const {
        if (!(block_last && leaves_last)) named_bar_arrive(other, 256);
    }
};

template <int HS, bool PERSIST>
static __device__ fw3_smem fw3_carve(unsigned char *raw) {
    fw3_smem m;
    m.q = smem_align_1k(raw);
    m.stage = m.q + fw3_q_buffers<PERSIST>() * 2 * fw_tile_bytes<HS>();
    m.q_full = (uint64_t *)(m.q + fw3_tiles_bytes<HS, PERSIST>());
    m.q_empty = m.q_full + fw3_q_buffers<PERSIST>();
    m.full_k = m.q_empty + fw3_q_buffers<PERSIST>();
    m.full_v = m.full_k + fw3_stages<HS>();
    m.empty_k = m.full_v + fw3_stages<HS>();
    m.empty_v = m.empty_k + fw3_stages<HS>();
    return m;
}

/* One K or V tile of keys t0 .. into the ring at dst, by the producer's
 * thread: once its slot's last reader released it (empty, at parity
 * `released`), announced on full and copied. */
template <int HS, bool PROF>
static __device__ __forceinline__ void fw3_ring_load(unsigned char *dst, const CUtensorMap (&map)[2], uint64_t *empty, uint64_t *full,
                                                     unsigned released, int h, int t0, int b, fw3_laps<PROF> &clk) {
    mbar_wait(empty, released);
    clk.lap(FW3_PH_RING_FULL);
    mbar_arrive_expect_tx(full, fw3_kv_bytes<HS>());
    ht_load<HS, FW3_KEYS>(dst, map, full, h, t0, b);
    clk.lap(FW3_PH_ISSUE_COPIES);
}

/* The producer's one thread, over the block's items: item n's Q (two
 * tiles) into buffer n % QBUF once the consumers released that buffer's
 * item before, then its key tiles 0 .. k_tiles - 1 into the ring: the
 * block's g-th tile (counted over its items) into stage g % STAGES, its K
 * once tile g - STAGES's K is released, then its V once that tile's V
 * is. */
template <int HS, bool PERSIST, bool PROF>
static __device__ void fw3_produce(const fw3_maps &maps, const fw3_smem &sm, const fw3_schedule &sched, int NH, int T,
                                   fw3_laps<PROF> &clk) {
    constexpr int STAGES = fw3_stages<HS>(), QBUF = fw3_q_buffers<PERSIST>();
    constexpr int tile = fw_tile_bytes<HS>();
    for (int c = 0; c < head_tile<HS>::chunks; c++) {
        tma_prefetch_map(&maps.q[c]);
        tma_prefetch_map(&maps.k[c]);
        tma_prefetch_map(&maps.v[c]);
    }
    clk.lap(FW3_PH_START);
    int g = 0;
    fw3_item it;
    for (int n = 0; sched.item(n, it); n++) {
        const int b = it.pair / NH, h = it.pair % NH, q0 = it.q_tile * FW3_ROWS, k_tiles = fw3_key_tiles(q0, T), qb = n % QBUF;
        unsigned char *q = sm.q + qb * 2 * tile;
        mbar_wait(&sm.q_empty[qb], ((n / QBUF) & 1) ^ 1); /* its first use passes at once */
        clk.lap(FW3_PH_RING_FULL);
        mbar_arrive_expect_tx(&sm.q_full[qb], 2 * tile);
        ht_load<HS, FW_KEYS>(q, maps.q, &sm.q_full[qb], h, q0, b);
        ht_load<HS, FW_KEYS>(q + tile, maps.q, &sm.q_full[qb], h, q0 + FW_KEYS, b);
        clk.lap(FW3_PH_ISSUE_COPIES);
        for (int kt = 0; kt < k_tiles; kt++, g++) {
            const int s = g % STAGES;
            const unsigned released = ((unsigned)(g / STAGES) & 1u) ^ 1u; /* round 0 passes at once */
            unsigned char *k = sm.stage + s * fw3_stage_bytes<HS>();
            fw3_ring_load<HS>(k, maps.k, &sm.empty_k[s], &sm.full_k[s], released, h, kt * FW3_KEYS, b, clk);
            fw3_ring_load<HS>(k + fw3_kv_bytes<HS>(), maps.v, &sm.empty_v[s], &sm.full_v[s], released, h, kt * FW3_KEYS, b, clk);
        }
    }
}

/* The warp's arrival on bar (a stage's empty K or V, or a Q buffer's)
 * once its products no longer read what bar guards. */
static __device__ __forceinline__ void fw3_release(uint64_t *bar) {
    __syncwarp(); /* every lane has waited for the products that read it */
    if (((int)threadIdx.x & 31) == 0) mbar_arrive(bar);
}

/* The softmax of key tile k0's scores for the warp's rows r0 ..: masked
 * where the tile reaches the warpgroup's rows (q0w: its first; uniform).
 * POLY: fw_softmax's. */
template <int POLY>
static __device__ __forceinline__ void fw3_softmax(float (&s)[FW3_KEYS / 2], float m[2], float l[2], float m_prev[2], fm_lane_pos &at,
                                                   int r0, int q0w, int k0, float scale_log2, int T) {
    at.k0 = k0;
    const fm_reach reach = fm_reach_of<FW3_KEYS>(r0, k0);
    if (k0 + FW3_KEYS <= q0w)
        fw_softmax<true, FW3_KEYS, POLY>(s, m, l, m_prev, reach, at, scale_log2, T);
    else
        fw_softmax<false, FW3_KEYS, POLY>(s, m, l, m_prev, reach, at, scale_log2, T);
}

/* What a consumer warpgroup's item reads and writes: its Q tile and the
 * barriers of that Q buffer (q_release NULL where no later item of the
 * block reuses it), its rows' outputs, and its place in the ring (g0: the
 * block's tiles before the item's first). */
struct fw3_part {
    const unsigned char *qs;
    uint64_t *q_full, *q_release;
    unsigned q_parity;
    __nv_bfloat16 *out;
    float *lse_rows;
    int q0w, k_tiles, g0;
    bool block_last; /* the block's last item: its last turn is the block's last */
};

/* Consumer warpgroup: rows q0w .. q0w + 63 against key tiles 0 .. k_tiles
 * - 1 as they land; then its rows stored. Pipelined within the warpgroup
 * (FlashAttention-3's intra-warpgroup overlap): one turn issues S = Q K^T
 * of tile kt and O += P V of tile kt - 1, and tile kt's softmax runs while
 * that second product is in flight; O's rescale to the new max waits for
 * it. k_tiles + 1 turns: tile 0's scores, one a tile after, the last
 * tile's P V. Tile kt's K is released once its scores are in, its V once
 * P V of it is done (a turn later). A row sees the operations of
 * fw_key_tile in the same order (so the mma.sync forward's bits under the
 * emulation). The Q buffer is
 * released once the last scores are in, before the last P V and the
 * stores, so that the producer can refill it in their time. */
template <int HS, bool PROF, int POLY>
static __device__ void fw3_consume_item(const fw3_smem &sm, const fw3_part &w, size_t stride, const fw3_turns &turns, float scale_log2,
                                        int T, fw3_laps<PROF> &clk) {
    constexpr int STAGES = fw3_stages<HS>();
    const int t = (int)threadIdx.x & 127, warp = t >> 5, lane = t & 31;
    constexpr int kv = fw3_kv_bytes<HS>(), stage = fw3_stage_bytes<HS>();
    float o[HS / 2], s[FW3_KEYS / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, m_prev[2];
    uint32_t a[FW3_KEYS / 16][4];
#pragma unroll
    for (int i = 0; i < HS / 2; i++) o[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < FW3_KEYS / 2; i++) s[i] = 0.0f;
    const int r0 = w.q0w + 16 * warp;
    fm_lane_pos at{{r0 + (lane >> 2), r0 + (lane >> 2) + 8}, 0, lane & 3};
    clk.lap(FW3_PH_ENTRY);
    mbar_wait(w.q_full, w.q_parity);
    mbar_wait(&sm.full_k[w.g0 % STAGES], (w.g0 / STAGES) & 1);
    clk.lap(FW3_PH_FIRST_DATA);
    turns.take(); /* turn 0: tile 0's scores */
    clk.lap(FW3_PH_TURN);
    wgmma_fence();
    fw_issue_scores<HS, FW3_KEYS>(s, w.qs, sm.stage + (w.g0 % STAGES) * stage);
    wgmma_commit();
    turns.pass(false);
    clk.lap(FW3_PH_ISSUE);
    wgmma_wait<0>();
    wgmma_fence_operand(s);
    clk.lap(FW3_PH_SCORES);
    fw3_release(&sm.empty_k[w.g0 % STAGES]);
    fw3_softmax<POLY>(s, m, l, m_prev, at, r0, w.q0w, 0, scale_log2, T);
    clk.lap(FW3_PH_SOFTMAX);
    fw_rescale<HS>(o, m_prev, m);
    fw_pack<FW3_KEYS>(a, s);
    clk.lap(FW3_PH_RESCALE);
    for (int kt = 1; kt < w.k_tiles; kt++) {
        const int g = w.g0 + kt, st = g % STAGES, before = (g - 1) % STAGES;
        mbar_wait(&sm.full_k[st], (g / STAGES) & 1);
        mbar_wait(&sm.full_v[before], ((g - 1) / STAGES) & 1); /* landed a turn ago, as a rule */
        clk.lap(FW3_PH_DATA);
        wgmma_fence_operand(o);
        turns.take();
        clk.lap(FW3_PH_TURN);
        wgmma_fence(); /* s, o and a were last touched by this thread's registers */
        fw_issue_scores<HS, FW3_KEYS>(s, w.qs, sm.stage + st * stage);
        wgmma_commit();
        fw_issue_pv<HS, FW3_KEYS>(o, a, sm.stage + before * stage + kv);
        wgmma_commit();
        turns.pass(false);
        clk.lap(FW3_PH_ISSUE);
        wgmma_wait<1>(); /* the scores; P V of tile kt - 1 may still run */
        wgmma_fence_operand(s);
        clk.lap(FW3_PH_SCORES);
        fw3_release(&sm.empty_k[st]);
        fw3_softmax<POLY>(s, m, l, m_prev, at, r0, w.q0w, kt * FW3_KEYS, scale_log2, T);
        clk.lap(FW3_PH_SOFTMAX);
        wgmma_wait<0>(); /* P V of tile kt - 1: o and a are free */
        wgmma_fence_operand(o);
        clk.lap(FW3_PH_PV);
        fw3_release(&sm.empty_v[before]);
        fw_rescale<HS>(o, m_prev, m);
        fw_pack<FW3_KEYS>(a, s);
        clk.lap(FW3_PH_RESCALE);
    }
    if (w.q_release) fw3_release(w.q_release); /* every scores product of the item is waited for */
    const int g_last = w.g0 + w.k_tiles - 1, last = g_last % STAGES;
    mbar_wait(&sm.full_v[last], (g_last / STAGES) & 1);
    wgmma_fence_operand(o);
    turns.take(); /* the last turn: the last tile's P V */
    clk.lap(FW3_PH_TURN);
    wgmma_fence();
    fw_issue_pv<HS, FW3_KEYS>(o, a, sm.stage + last * stage + kv);
    wgmma_commit();
    turns.pass(w.block_last);
    clk.lap(FW3_PH_ISSUE);
    wgmma_wait<0>();
    wgmma_fence_operand(o);
    clk.lap(FW3_PH_PV);
    fw3_release(&sm.empty_v[last]);
    fw_store_rows<HS>(w.out, stride, w.lse_rows, reinterpret_cast<const float(*)[4]>(o), m, l, at, T);
    clk.lap(FW3_PH_STORE);
}

/* Consumer warpgroup c (1 or 2) over the block's items: its 64 of each
 * item's 128 rows (fw3_consume_item), following the producer's Q buffers
 * and ring. */
template <int HS, bool PERSIST, bool PROF, int POLY>
static __device__ void fw3_consume(const fw3_smem &sm, int c, const fw3_schedule &sched, __nv_bfloat16 *out, float *lse,
                                   const fw3_turns &turns, int NH, float scale_log2, int T, fw3_laps<PROF> &clk) {
    constexpr int QBUF = fw3_q_buffers<PERSIST>();
    const size_t C = (size_t)NH * HS;
    fw3_item it, next, later;
    int g = 0;
    bool more = sched.item(0, it);
    for (int n = 0; more; n++, it = next) {
        more = sched.item(n + 1, next); /* the block's item after this one, if any */
        const int b = it.pair / NH, h = it.pair % NH, q0w = it.q_tile * FW3_ROWS + (c - 1) * FW_KEYS, qb = n % QBUF;
        fw3_part w;
        w.qs = sm.q + (2 * qb + c - 1) * fw_tile_bytes<HS>();
        w.q_full = &sm.q_full[qb];
        w.q_parity = (unsigned)(n / QBUF) & 1;
        w.q_release = sched.item(n + QBUF, later) ? &sm.q_empty[qb] : NULL;
        w.out = out + (size_t)b * T * C + (size_t)h * HS;
        w.lse_rows = lse + (size_t)it.pair * T;
        w.q0w = q0w;
        w.k_tiles = fw3_key_tiles(it.q_tile * FW3_ROWS, T);
        w.g0 = g;
        w.block_last = !more;
        fw3_consume_item<HS, PROF, POLY>(sm, w, C, turns, scale_log2, T, clk);
        g += w.k_tiles;
    }
}
#endif

/* The blocks of a launch over pairs p0 .. p0 + pairs - 1: a block an item
 * (query rows [q0, q0 + 128) of a pair, key tiles up to its last row),
 * longest first (fw3_schedule), or with PERSIST gridDim.x blocks, each
 * over its share of the items, so that a block's next Q and key tiles
 * arrive while it finishes the item before (FlashAttention-3's persistent
 * kernel; the same rows, the same operations, so the same bits). A
 * template on the head size and the ring's depth (fw3_stages), so that
 * launches name it (the emulation checks their shared memory opt-in by
 * that name). PROF: the phase profile (bench_attention's); POLY > 0: one
 * exponential in POLY by exp2_poly (fw3_poly_built). */
template <int HS, int STAGES, bool PERSIST, bool PROF, int POLY>
__global__ void __launch_bounds__(FW3_THREADS, 1)
    flash_forward_wgmma_ws_kernel(const __grid_constant__ fw3_maps maps, __nv_bfloat16 *out, float *lse, int p0, int pairs, int T,
                                  int NH, float scale_log2, cuda_block_profile *prof) {
#if defined(FW_BODY)
    fw3_laps<PROF> clk;
    static_assert(!(PROF && PERSIST), "a record a block: the block-an-item launch only");
    const uint32_t rec_tiles = (uint32_t)fw3_key_tiles(fl_grid_query_tile() * FW3_ROWS, T);
    clk.begin(PROF ? prof + blockIdx.x + gridDim.x * blockIdx.y : NULL, rec_tiles);
    static_assert(STAGES == fw3_stages<HS>(), "the shared memory is carved for fw3_stages");
    static_assert(fw3_shared_bytes<HS, PERSIST>() <= 227 * 1024, "over a block's shared memory on sm_90");
    static_assert(!PERSIST || fw3_persistent_built(HS), "no persistent instance at this head size");
    constexpr int QBUF = fw3_q_buffers<PERSIST>();
    extern __shared__ __align__(1024) unsigned char fw3_shared[]; /* fw3_shared_bytes<HS, PERSIST>() */
    const fw3_smem sm = fw3_carve<HS, PERSIST>(fw3_shared);
    const fw3_schedule sched{p0, pairs, (T + FW3_ROWS - 1) / FW3_ROWS, PERSIST};
    const int wg = (int)threadIdx.x >> 7;
    if (threadIdx.x == 0) {
        for (int qb = 0; qb < QBUF; qb++) {
            mbar_init(&sm.q_full[qb], 1);
            mbar_init(&sm.q_empty[qb], FW3_CONSUMER_WARPS);
        }
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&sm.full_k[s], 1);
            mbar_init(&sm.full_v[s], 1);
            mbar_init(&sm.empty_k[s], FW3_CONSUMER_WARPS);
            mbar_init(&sm.empty_v[s], FW3_CONSUMER_WARPS);
        }
        mbar_fence_init();
    }
    __syncthreads();
    if (wg == 0) {
        setmaxnreg_dec<FW3_PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            fw3_produce<HS, PERSIST, PROF>(maps, sm, sched, NH, T, clk);
            clk.record(0);
        }
        return;
    }
    setmaxnreg_inc<FW3_CONSUMER_REGS>();
    /* both warpgroups take every tile: an item's rows and its last key tile start together */
    static_assert(FW3_KEYS == FW3_ROWS, "the warpgroups' tiles and turns assume one key tile a block of rows");
    const fw3_turns turns{FW3_BAR_TURN + wg - 1, FW3_BAR_TURN + 2 - wg, wg == 2};
    if (wg == 2) named_bar_arrive(FW3_BAR_TURN, 256); /* warpgroup 1 goes first */
    fw3_consume<HS, PERSIST, PROF, POLY>(sm, wg, sched, out, lse, turns, NH, scale_log2, T, clk);
    if ((threadIdx.x & 127) == 0) clk.record(wg);
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

/* Launches the instance at head size HS over every pair: a block an item,
 * or with PERSIST at most `blocks` blocks (<= 0: one an SM); with PROF
 * each block's phase profile into prof[block] (one launch: the caller
 * holds B NH to FL_MAX_PAIRS). */
template <int HS, bool PERSIST, bool PROF = false, int POLY = 0>
static void fw3_launch(cuda_ctx *ctx, void *out, float *lse, const void *qkv, int B, int T, int NH, int blocks,
                       cuda_block_profile *prof = NULL) {
    const float scale_log2 = 1.44269504f / sqrtf((float)HS); /* as flash_fwd.cu's */
    fw3_maps maps;
    fw3_make_maps<HS>(&maps, (const __nv_bfloat16 *)qkv, B, T, NH);
    const void *kernel = (const void *)flash_forward_wgmma_ws_kernel<HS, fw3_stages<HS>(), PERSIST, PROF, POLY>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, fw3_shared_bytes<HS, PERSIST>()));
    const int tiles = (T + FW3_ROWS - 1) / FW3_ROWS, most = blocks > 0 ? blocks : ctx->sm_count;
    /* persistent: a launch's items, and fw3_schedule's n G + G, within an int */
    const int per_launch = PERSIST ? fl_min(FL_MAX_PAIRS, (INT_MAX - 65536) / tiles) : FL_MAX_PAIRS;
    for (int p0 = 0; p0 < B * NH; p0 += per_launch) {
        const int pairs = fl_min(per_launch, B * NH - p0);
        const dim3 grid = PERSIST ? dim3((unsigned)fl_min(pairs * tiles, fl_min(most, 65535))) : fl_grid_pairs_first(pairs, T, FW3_ROWS);
        constexpr int shared = fw3_shared_bytes<HS, PERSIST>();
        flash_forward_wgmma_ws_kernel<HS, fw3_stages<HS>(), PERSIST, PROF, POLY><<<grid, FW3_THREADS, shared, ctx->stream>>>(
            maps, (__nv_bfloat16 *)out, lse, p0, pairs, T, NH, scale_log2, prof);
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
    head_tile_dispatch(HS, [&](auto hs) { fw3_launch<decltype(hs)::value, false>(ctx, out, lse, qkv, B, T, NH, 0); });
    return 1;
}

int cuda_attention_forward_wgmma_ws_persistent(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS,
                                               tg_dropout drop, int blocks) {
    if (!fw_has_instance(o, HS, drop) || !fw3_persistent_built(HS)) return 0;
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (B <= 0 || T <= 0 || NH <= 0) return 1;
    if (!fm_aligned16(qkv)) return cuda_attention_forward_wgmma(o, out, lse, qkv, B, T, NH, HS, drop);
    if (HS == 64)
        fw3_launch<64, true>(ctx, out, lse, qkv, B, T, NH, blocks);
    else
        fw3_launch<96, true>(ctx, out, lse, qkv, B, T, NH, blocks);
    return 1;
}

size_t cuda_attention_forward_wgmma_ws_blocks(int B, int T, int NH) {
    return B > 0 && T > 0 && NH > 0 ? (size_t)B * NH * ((T + FW3_ROWS - 1) / FW3_ROWS) : 0;
}

int cuda_attention_forward_wgmma_ws_profile(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS,
                                            cuda_block_profile *records) {
    if (!fw_has_instance(o, HS, tg_dropout{}) || (HS != 64 && HS != 96)) return 0;
    if (B <= 0 || T <= 0 || NH <= 0 || B * NH > FL_MAX_PAIRS || !fm_aligned16(qkv)) return 0;
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (HS == 64)
        fw3_launch<64, false, true>(ctx, out, lse, qkv, B, T, NH, 0, records);
    else
        fw3_launch<96, false, true>(ctx, out, lse, qkv, B, T, NH, 0, records);
    return 1;
}

const char *cuda_attention_forward_wgmma_ws_phase(int part, int phase) {
    static const char *const producer[] = {"start", "ring full", "issue copies"};
    static const char *const consumer[] = {"start", "first data", "data", "turn", "issue",
                                           "scores", "softmax", "P V", "rescale", "store"};
    static_assert(sizeof consumer / sizeof consumer[0] == CUDA_PROFILE_PHASES, "a name a consumer phase");
    if (part == 0) return phase >= 0 && phase < (int)(sizeof producer / sizeof producer[0]) ? producer[phase] : NULL;
    return part > 0 && part < CUDA_PROFILE_PARTS && phase >= 0 && phase < CUDA_PROFILE_PHASES ? consumer[phase] : NULL;
}

int cuda_attention_forward_wgmma_ws_poly(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, int poly) {
    if (!fw_has_instance(o, HS, tg_dropout{}) || !fw3_poly_built(HS, poly) || !fm_aligned16(qkv)) return 0;
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (B <= 0 || T <= 0 || NH <= 0) return 1;
    if (poly == 4)
        fw3_launch<64, false, false, 4>(ctx, out, lse, qkv, B, T, NH, 0);
    else
        fw3_launch<64, false, false, 8>(ctx, out, lse, qkv, B, T, NH, 0);
    return 1;
}
