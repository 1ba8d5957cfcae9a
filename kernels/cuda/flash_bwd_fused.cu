/* Fused causal attention, backward, as one mma.sync kernel: five products
 * a tile, where flash_bwd.cu's dq kernel and dk, dv kernel do seven
 * between them (both recompute S = Q K^T and dP = dout V^T). Any device
 * with bf16 tensor cores (sm_80 on; on Hopper the wgmma backward is the
 * other route), head sizes 64, 96 and 128, no dropout. For
 * bench_attention to time against the two kernels (every run's): which is
 * faster is for a GPU to say (issue 36).
 *
 * A block is flash_bwd.cu's dk, dv kernel at one key tile a warp (64 keys,
 * 4 warps of 16; the query tiles of 64 rows from the diagonal to T double
 * buffered by cp.async; flash_bwd_mma.cuh's fb_dkv_block for S^T, dP^T,
 * dv and dk, so dk and dv have that kernel's bits), plus dq's share:
 *   - each warp stores its dS^T fragments (bf16, as they enter dk's
 *     product) into a 64 x 64 tile, keys as rows;
 *   - after a block barrier, warp w takes the tile's queries 16w .. 16w +
 *     15: dS (the tile read transposed by ldmatrix) times the block's K
 *     (kept staged for the block's life), over its 64 keys (on the
 *     diagonal tile only the keys up to its rows: the rest are masked);
 *   - the share goes as float32 to its own slot (dq_slots.cuh), and
 *     flash_dq_reduce_kernel adds each row's slots in key-tile order: a
 *     fixed order, no atomics, the same bits run after run. dq differs from
 *     the dq kernel's by float32's rounding of the sum in another order.
 * One more block barrier a query tile than the dk, dv kernel (dS^T in,
 * before dq's product), and at T = 1024, head size 64, 2.2 MB of slots a
 * pair written and read once. */
#include "kernels/cuda/flash_bwd_fused.cuh"

#include <type_traits>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/dq_slots.cuh"
#include "kernels/cuda/flash_bwd_mma.cuh"

namespace {

/* dq slots of 64-key blocks: one query tile a key block. */
#define FF_KB 1
static_assert(FB_ROWS == DQS_ROWS, "a dq slot holds one query tile");

/* Where the block's rows live in its dynamic shared memory, in tiles of
 * fb_tile<HS>: tiles 0 and 1 (Q, dout) and 2 and 3 the two buffers of the
 * query tiles; K at tile 4 for the block's life (dq's product reads it);
 * V through tile 2 where the warps hold its fragments (fb_v_held: read
 * before buffer 1 takes its first query tile), else at tile 5. Then dS^T,
 * 64 keys x 64 queries (fb_tile<FB_ROWS>: padded rows, conflict-free for
 * ldmatrix and the warps' 4-byte stores). */
#define FF_K_TILE 4
template <int HS>
static __host__ __device__ constexpr int ff_v_tile() {
    return fb_v_held<HS, 1>() ? 2 : 5;
}
template <int HS>
static __host__ __device__ constexpr int ff_tiles() {
    return fb_v_held<HS, 1>() ? 5 : 6;
}
template <int HS>
static constexpr int ff_shared_bytes() {
    return ff_tiles<HS>() * (int)sizeof(fb_tile<HS>) + (int)sizeof(fb_tile<FB_ROWS>);
}

/* Columns of dq's share a pass: half, so that the pass's accumulators fit
 * beside dk's and dv's (at head size 64 in the dk, dv kernel's 168
 * registers: ff_min_blocks; in one pass ptxas took 213 on sm_80 and 219 on
 * sm_90a, 2 blocks an SM). */
template <int HS>
static __host__ __device__ constexpr int ff_dq_cols() {
    return HS / 2;
}

/* Blocks an SM asked of ptxas: at head size 64 the dk, dv kernel's 3 (168
 * registers, no spills on either architecture; the 55296 bytes of shared
 * memory a block fit 3 on Hopper's 227 KiB an SM, 2 on sm_80's 164);
 * beyond, what it chooses (one pass of dq at 64 with 3 asked spilled 24
 * bytes on sm_90a). */
template <int HS>
static __host__ __device__ constexpr int ff_min_blocks() {
    return HS <= 64 ? 3 : 1;
}

/* The warp's dS^T fragment (keys key0 + g, + 8 as rows; queries col0 +
 * 2t, + 1, + 8, + 9 as columns) into the dS^T tile. */
static __device__ __forceinline__ void ff_stage_ds(fb_tile<FB_ROWS> &dst, const uint32_t ds[4], int key0, int col0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < 4; i++) /* fragment i: key g + 8 (i % 2), queries 8 (i / 2) + 2t, + 1 */
        fb_store_pair(dst.e + (key0 + g + 8 * (i & 1)) * fb_tile<FB_ROWS>::ld + col0 + 8 * (i >> 1) + 2 * t, ds[i]);
}

/* The warp's share of dq for query tile q0 over the block's keys k0 ..
 * k0 + 63 (queries q0 + 16w .. + 15, warp w), dS K, into slot (64 x HS
 * float32, row-major; unscaled). k_tiles: the 16-key tiles of the block
 * its rows see. Columns in passes of ff_dq_cols. */
template <int HS>
static __device__ __forceinline__ void ff_dq_share(float *slot, const fb_tile<FB_ROWS> &dst, const fb_tile<HS> &ks, int k_tiles) {
    constexpr int NC = ff_dq_cols<HS>(), ld = fb_tile<HS>::ld;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, warp = threadIdx.x >> 5;
#pragma unroll
    for (int c0 = 0; c0 < HS; c0 += NC) {
        float dq[NC / 8][4] = {};
        for (int kk = 0; kk < k_tiles; kk++) { /* keys 16 kk .. 16 kk + 15, in order */
            uint32_t a[4];
            mma_load_a_transposed(a, dst.e + 16 * kk * fb_tile<FB_ROWS>::ld + 16 * warp, fb_tile<FB_ROWS>::ld);
#pragma unroll
            for (int n8 = 0; n8 < NC / 8; n8 += 2) {
                uint32_t bf[2][2];
                mma_load_b_cols_x2(bf, ks.e + 16 * kk * ld + c0 + 8 * n8, ld);
                mma_bf16_16816(dq[n8], a, bf[0]);
                mma_bf16_16816(dq[n8 + 1], a, bf[1]);
            }
        }
#pragma unroll
        for (int half = 0; half < 2; half++) {
            float *row = slot + (size_t)(16 * warp + g + 8 * half) * HS + c0 + 2 * t;
#pragma unroll
            for (int n8 = 0; n8 < NC / 8; n8++) dqs_store2(row + 8 * n8, dq[n8][2 * half], dq[n8][2 * half + 1]);
        }
    }
}

/* dk and dv of 64 keys (warp w: keys k0 + 16w ..) and the block's dq
 * shares, over the query tiles from the diagonal to T; the first keys
 * (seen by the most rows) go to the first blocks, every pair's before any
 * pair's later keys (fl_grid). Query tile n's Q and dout are in buffer
 * n % 2, its statistics in lse2_t[n % 2], D_t[n % 2]; tile n + 1 is
 * copied into the other buffer while n is used. Per tile, two block
 * barriers: dS^T complete before dq's product, and the next tile in (and
 * this one's readers, dS^T's among them, done) before the next. */
template <int HS, bool DROP>
__global__ void __launch_bounds__(FB_THREADS, ff_min_blocks<HS>())
    flash_bwd_fused_kernel(__nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv, const float *lse,
                           const float *D, float *dq_slots, int p0, int T, int NH, float scale, tg_dropout drop) {
    drop = tg_dropout_read_step(drop);
    extern __shared__ __align__(16) unsigned char fb_shared[]; /* ff_shared_bytes<HS>() */
    fb_tile<HS> *tiles = reinterpret_cast<fb_tile<HS> *>(fb_shared);
    fb_tile<FB_ROWS> &dst = *reinterpret_cast<fb_tile<FB_ROWS> *>(fb_shared + ff_tiles<HS>() * sizeof(fb_tile<HS>));
    __shared__ float lse2_t[2][FB_ROWS], D_t[2][FB_ROWS];
    constexpr bool v_held = fb_v_held<HS, 1>();
    constexpr int v_tile = ff_v_tile<HS>();
    const int k0 = fl_grid_key_tile() * FB_ROWS, j = fl_grid_pair(), p = p0 + j, b = p / NH, h = p % NH, C = NH * HS;
    const int warp = threadIdx.x >> 5, ld = fb_tile<HS>::ld, kw = k0 + 16 * warp;
    const fb_pair c = {b, h, T, scale * FB_LOG2E, drop};
    float *slots = dq_slots + (size_t)j * dqs_slots<FF_KB>(T) * dqs_slot_floats<HS>();
    /* k and v rows, then the diagonal query tile, as two groups: the fragments load while the tile lands */
    fb_stage_async<HS>(tiles[FF_K_TILE], qkv, 3 * C, C + h * HS, b, k0, T);
    fb_stage_async<HS>(tiles[v_tile], qkv, 3 * C, 2 * C + h * HS, b, k0, T);
    async_commit();
    fb_stage_async<HS>(tiles[0], qkv, 3 * C, h * HS, b, k0, T);
    fb_stage_async<HS>(tiles[1], dout, C, h * HS, b, k0, T);
    async_commit();
    if (threadIdx.x < FB_ROWS) fb_row_stats(lse2_t[0][threadIdx.x], D_t[0][threadIdx.x], lse, D, p, j, k0 + threadIdx.x, T);
    async_wait<1>();
    __syncthreads();
    uint32_t kf[1][HS / 16][4], vf[1][v_held ? HS / 16 : 1][4];
    std::conditional_t<v_held, fb_held, fb_staged<HS>> v_of[1]; /* v as an A operand */
    const __nv_bfloat16 *vrows = tiles[v_tile].e + 16 * warp * ld;
    fb_rows_as_a<HS>(kf[0], tiles[FF_K_TILE].e + 16 * warp * ld);
    if constexpr (v_held) fb_rows_as_a<HS>(vf[0], vrows), v_of[0] = fb_held{vf[0]};
    else v_of[0] = fb_staged<HS>{vrows};
    float dk[1][HS / 8][4] = {}, dv[1][HS / 8][4] = {};
    async_wait<0>();
    __syncthreads(); /* the diagonal tile is in, and the v readers are done: buffer 1 is free */
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
            if (qt < kw) continue; /* warp-uniform: above the warp's diagonal (no query there reads these keys) */
            const bool edge[1] = {qt == kw || qt + 16 > T};
            uint32_t ds[1][4];
            fb_dkv_block<HS, 1, DROP>(dk, dv, kf, v_of, qs + (qt - q0) * ld, gs + (qt - q0) * ld, lse2_t[n] + (qt - q0),
                                      D_t[n] + (qt - q0), &kw, qt, edge, c, ds);
            ff_stage_ds(dst, ds[0], 16 * warp, qt - q0);
        }
        __syncthreads(); /* the tile's dS^T is in */
        /* warp-uniform: rows past T are never read; on the diagonal tile warp w's rows see key tiles 0 .. w */
        if (q0 + 16 * warp < T)
            ff_dq_share<HS>(slots + dqs_slot<FF_KB>(q0 / FB_ROWS, k0 / FB_ROWS) * dqs_slot_floats<HS>(), dst, tiles[FF_K_TILE],
                            q0 == k0 ? warp + 1 : FB_ROWS / 16);
        if (more && threadIdx.x < FB_ROWS) { /* their loads had the tile's products to land */
            lse2_t[n ^ 1][threadIdx.x] = lse2_next;
            D_t[n ^ 1][threadIdx.x] = D_next;
        }
        async_wait<0>();
        __syncthreads(); /* the next tile is in, and this one's readers (dS^T's too) are done */
    }
    fb_store<HS>(dqkv, dk[0], 3 * C, C + h * HS, b, kw, T, scale);
    fb_store<HS>(dqkv, dv[0], 3 * C, 2 * C + h * HS, b, kw, T, 1.0f);
}

/* The kernel, then the sum of the slots, at head size HS. */
template <int HS>
void ff_launch(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv, const float *lse,
               const float *D, float *dq_slots, int p0, int np, int T, int NH, float scale) {
    const dim3 grid = fl_grid_pairs_first(np, T, FB_ROWS);
    constexpr int shared = ff_shared_bytes<HS>();
    const void *kernel = (const void *)flash_bwd_fused_kernel<HS, false>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
    flash_bwd_fused_kernel<HS, false><<<grid, FB_THREADS, shared, ctx->stream>>>(dqkv, dout, qkv, lse, D, dq_slots, p0, T, NH,
                                                                                 scale, tg_dropout{});
    CUDA_LAUNCHED("flash_bwd_fused_kernel");
    flash_dq_reduce_kernel<HS, FF_KB><<<dqs_reduce_blocks(np, T, HS), 256, 0, ctx->stream>>>(dqkv, dq_slots, p0, np, T, NH,
                                                                                             scale);
    CUDA_LAUNCHED("flash_dq_reduce_kernel");
}

} // namespace

bool flash_bwd_fused_built(int HS) { return HS == 64 || HS == 96 || HS == 128; }

size_t flash_bwd_fused_slot_bytes(int T, int HS) { return dqs_pair_bytes<FF_KB>(T, HS); }

void flash_bwd_fused(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv, const float *lse,
                     const float *D, float *dq_slots, int p0, int np, int T, int NH, int HS, float scale) {
    if (np <= 0 || T <= 0) return;
    if (HS == 64)
        ff_launch<64>(ctx, dqkv, dout, qkv, lse, D, dq_slots, p0, np, T, NH, scale);
    else if (HS == 96)
        ff_launch<96>(ctx, dqkv, dout, qkv, lse, D, dq_slots, p0, np, T, NH, scale);
    else if (HS == 128)
        ff_launch<128>(ctx, dqkv, dout, qkv, lse, D, dq_slots, p0, np, T, NH, scale);
}
