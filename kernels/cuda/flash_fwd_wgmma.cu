/* Fused causal attention, forward, on Hopper's warpgroup MMA (sm_90a wgmma;
 * kernels/cuda/wgmma.cuh): bf16, head sizes 64, 96 and 128, no dropout. The first step
 * of the FlashAttention-3 path (issue 36): the same arithmetic and outputs
 * as flash_fwd.cu's mma.sync forward (out, and lse = max + log(sum) per row
 * in the same [pair][T] layout, so flash_bwd.cu consumes them unchanged),
 * with the products issued by one warpgroup.
 *
 * One block: one consumer warpgroup (4 warps, 128 threads) owning 64 query
 * rows of one pair, warp w rows 16w .. 16w + 15. Q and each tile of 64 keys
 * of K and V sit in shared memory in head_tiles.cuh's swizzled column
 * chunks (canonical layouts of kernels/cuda/smem_layout.h), brought in by
 * cp.async two tiles deep (the next while the current
 * is used; fw_stage is the one function a bulk tensor copy on mbarriers
 * will replace). Per key tile: S = Q K^T by wgmma_ss (Q and K K-major),
 * then the mma.sync path's online softmax (fm_softmax_row: wgmma's
 * accumulators are mma.sync's C fragments, 8 columns at a time), the
 * diagonal tile masked by select there, P rounded to bf16 and packed
 * straight from the accumulators into A fragments (mma_a_from_accumulators),
 * and O += P V by wgmma_rs with V MN-major.
 * Each row's softmax sees the same 64-key tiles as the mma.sync forward's,
 * so the maxima, sums and roundings are the same operations; the products'
 * internal order is the tensor core's (equal bits are not promised on a GPU).
 *
 * Builds: the kernel's body needs sm_90a (__CUDA_ARCH_FEAT_SM90_ALL); for
 * other device architectures it is a trap, and the host launches it only on
 * compute capability 9.0 (kernels.attention = wgmma, ops_cuda.c). Under the
 * emulation (tests/emu) it runs on wgmma.cuh's stand-ins.
 * The per-tile arithmetic (fw_key_tile, fw_store_rows) is in
 * flash_fwd_wgmma.cuh, shared with the warp-specialized forward on TMA
 * (flash_fwd_wgmma_ws.cu, kernels.attention = wgmma_ws); this kernel stays
 * as its reference until that one has run on a GPU. */
#include "kernels/cuda/flash_fwd_wgmma.cuh"
#include "kernels/cuda/mbarrier.cuh"

namespace {

#define FW_ROWS 64     /* query rows per block: one warpgroup */
#define FW_THREADS 128 /* one warpgroup */

/* Q, then two stages of K and V; +1024: the tiles start 1024-aligned (base offset 0) */
template <int HS>
__host__ __device__ static constexpr int fw_shared_bytes() {
    return 5 * fw_tile_bytes<HS>() + 1024;
}

#if defined(FW_BODY)
/* Rows t0 .. t0 + 63 of a row-major bf16 matrix (src: its row 0 at the
 * head's column; stride elements per row) into the swizzled tile, zero at
 * and past T (padding keys are multiplied, then masked: they must be
 * finite). vec: 16-byte cp.async copies (they land after async_commit and
 * async_wait); otherwise, and for the zero rows, plain stores. Either way
 * the caller makes them visible to the tensor core (fence_proxy_async_shared, mbarrier.cuh).
 * Element 8c of row r lands at ht_offset (for V read MN-major, the same
 * bytes: smem_layout.h's table with n inside one chunk). */
template <int HS>
static __device__ void fw_stage(unsigned char *tile, const __nv_bfloat16 *src, size_t stride, int t0, int T, bool vec) {
    ht_stage<HS, FW_KEYS, FW_THREADS>(tile, src, stride, t0, T, vec);
}

#endif

/* One block: query rows [q0, q0 + 64) of pair p0 + fl_grid_pair() (longest
 * first, fl_grid), key tiles up to the block's last row; tile kt's K and V
 * in stage kt % 2, tile kt + 1 copied into the other while kt is used. */
template <int HS>
__global__ void __launch_bounds__(FW_THREADS, 1)
    flash_forward_wgmma_kernel(__nv_bfloat16 *out, float *lse, const __nv_bfloat16 *qkv, int p0, int T, int NH, float scale_log2,
                               bool vec) {
#if defined(FW_BODY)
    constexpr int tile = fw_tile_bytes<HS>();
    extern __shared__ __align__(1024) unsigned char fw_shared[]; /* fw_shared_bytes<HS>() */
    unsigned char *qs = smem_align_1k(fw_shared);
    unsigned char *kv = qs + tile; /* stage s: K at kv + 2 s tile, V one tile after */
    const int q0 = fl_grid_query_tile() * FW_ROWS;
    const int p = p0 + fl_grid_pair(), b = p / NH, h = p % NH, C = NH * HS;
    const int warp = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31, g = lane >> 2;
    const size_t stride = 3 * (size_t)C;
    const __nv_bfloat16 *src = qkv + (size_t)b * T * stride + (size_t)h * HS;

    fw_stage<HS>(qs, src + (size_t)q0 * stride, stride, 0, T - q0, vec);
    fw_stage<HS>(kv, src + C, stride, 0, T, vec);
    fw_stage<HS>(kv + tile, src + 2 * C, stride, 0, T, vec);
    async_commit();

    float o[HS / 2], s[32], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < HS / 2; i++) o[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < 32; i++) s[i] = 0.0f;
    const int r0 = q0 + 16 * warp;
    fm_lane_pos at{{r0 + g, r0 + g + 8}, 0, lane & 3};
    const int k_tiles = (fl_min(q0 + FW_ROWS, T) + FW_KEYS - 1) / FW_KEYS;
    for (int kt = 0; kt < k_tiles; kt++) {
        const int k0 = kt * FW_KEYS;
        unsigned char *ks = kv + (kt & 1) * 2 * tile;
        if (kt + 1 < k_tiles) { /* the other stage's readers passed the last iteration's barrier */
            unsigned char *next = kv + ((kt + 1) & 1) * 2 * tile;
            fw_stage<HS>(next, src + C, stride, k0 + FW_KEYS, T, vec);
            fw_stage<HS>(next + tile, src + 2 * C, stride, k0 + FW_KEYS, T, vec);
            async_commit();
            async_wait<1>(); /* tile kt (and Q) are in; tile kt + 1 may still be in flight */
        } else {
            async_wait<0>();
        }
        fence_proxy_async_shared(); /* cp.async's and plain stores, to the tensor core's reads */
        __syncthreads();
        at.k0 = k0;
        const fm_reach reach = fm_reach_of<FW_KEYS>(r0, k0);
        if (k0 + FW_KEYS <= q0) /* block-uniform: every row sees every key */
            fw_key_tile<HS, true>(s, o, m, l, qs, ks, ks + tile, reach, at, scale_log2, T);
        else
            fw_key_tile<HS, false>(s, o, m, l, qs, ks, ks + tile, reach, at, scale_log2, T);
        __syncthreads(); /* stage kt % 2's readers are done: the next iteration refills it */
    }
    fw_store_rows<HS>(out + (size_t)b * T * C + (size_t)h * HS, (size_t)C, lse + (size_t)p * T,
                  reinterpret_cast<const float(*)[4]>(o), m, l, at, T);
#else
    asm volatile("trap;"); /* not sm_90a: the host never launches it here */
#endif
}

} // namespace

/* Launches the instance at head size HS over every pair. */
template <int HS>
static void fw_launch(cuda_ctx *ctx, void *out, float *lse, const void *qkv, int B, int T, int NH) {
    const float scale_log2 = 1.44269504f / sqrtf((float)HS); /* as flash_fwd.cu's */
    const bool vec = fm_aligned16(qkv);
    const void *kernel = (const void *)flash_forward_wgmma_kernel<HS>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, fw_shared_bytes<HS>()));
    for (int p0 = 0; p0 < B * NH; p0 += FL_MAX_PAIRS) {
        const dim3 grid = fl_grid_pairs_first(fl_min(FL_MAX_PAIRS, B * NH - p0), T, FW_ROWS);
        flash_forward_wgmma_kernel<HS><<<grid, FW_THREADS, fw_shared_bytes<HS>(), ctx->stream>>>(
            (__nv_bfloat16 *)out, lse, (const __nv_bfloat16 *)qkv, p0, T, NH, scale_log2, vec);
        CUDA_LAUNCHED("flash_forward_wgmma_kernel");
    }
}

int cuda_attention_wgmma_head_size(int hs) { return head_tile_built(hs); }

int cuda_attention_forward_wgmma(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, tg_dropout drop) {
    if (!fw_has_instance(o, HS, drop)) return 0;
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (B <= 0 || T <= 0 || NH <= 0) return 1;
    head_tile_dispatch(HS, [&](auto hs) { fw_launch<decltype(hs)::value>(ctx, out, lse, qkv, B, T, NH); });
    return 1;
}
