/* The attention backward as one mma.sync kernel of five products a tile:
 * the pieces flash_bwd.cu's dk, dv kernel adds with DQ (one key tile a
 * warp), where the dq kernel and the dk, dv kernel do seven between them
 * (both recompute S = Q K^T and dP = dout V^T). Any device with bf16
 * tensor cores, head sizes 64, 96 and 128 (fb_fused_built), no dropout;
 * for bench_attention to time against the two kernels (every run's):
 * which is faster is for a GPU to say (issue 36).
 *   - each warp stores its dS^T fragments (bf16, as they enter dk's
 *     product) into a 64 x 64 tile, keys as rows (fb_stage_ds);
 *   - after a block barrier, warp w takes the query tile's rows 16w ..
 *     16w + 15: dS (the tile read transposed by ldmatrix) times the
 *     block's K, which stays staged for the block's life, over its 64 keys
 *     (on the diagonal tile only the keys up to its rows: the rest are
 *     masked) (fb_dq_share);
 *   - the share goes as float32 to its own slot (dq_slots.cuh), and
 *     flash_dq_reduce_kernel adds each row's slots in key-tile order: a
 *     fixed order, no atomics, the same bits run after run. dk and dv are
 *     the dk, dv kernel's bits; dq differs from the dq kernel's by
 *     float32's rounding of the sum in another order.
 * One more block barrier a query tile than the dk, dv kernel, and at T =
 * 1024, head size 64, 2.2 MB of slots a pair written and read once. */
#ifndef KERNELS_CUDA_FLASH_BWD_FUSED_CUH
#define KERNELS_CUDA_FLASH_BWD_FUSED_CUH

#include "kernels/cuda/dq_slots.cuh"
#include "kernels/cuda/flash_bwd_mma.cuh"

/* dq slots of 64-key blocks: one query tile a key block. */
#define FB_FUSED_KB 1
static_assert(FB_ROWS == DQS_ROWS, "a dq slot holds one query tile");

/* The head sizes the fused backward is built for (the benchmarks'). */
static inline bool fb_fused_built(int HS) { return HS == 64 || HS == 96 || HS == 128; }

/* Columns of dq's share a pass: half, so that the pass's accumulators fit
 * beside dk's and dv's (at head size 64 in the dk, dv kernel's 168
 * registers: fb_dkv_min_blocks; in one pass ptxas took 213 on sm_80 and
 * 219 on sm_90a, 2 blocks an SM). */
template <int HS>
static __host__ __device__ constexpr int fb_dq_share_cols() {
    return HS / 2;
}

/* Blocks an SM asked of ptxas by the dk, dv kernel: with DQ at head size
 * 64, the 3 it takes without (168 registers, no spills on either
 * architecture; the 55296 bytes of shared memory a block fit 3 on
 * Hopper's 227 KiB an SM, 2 on sm_80's 164; one pass of dq with 3 asked
 * spilled 24 bytes on sm_90a). Otherwise 0: nvcc then writes no
 * .minnctapersm, as without the argument, and ptxas chooses as before
 * (with 1 written, it gave the kernel without DQ up to 32 registers
 * more, 3 blocks an SM to 2 at head size 64). */
template <int HS, bool DQ>
static __host__ __device__ constexpr int fb_dkv_min_blocks() {
    return DQ && HS <= 64 ? 3 : 0;
}

/* The dS^T tile in the dk, dv kernel's dynamic shared memory, after its
 * k rows (fb_dkv_shared_bytes with DQ). */
template <int HS, int KT>
static __device__ __forceinline__ fb_tile<FB_ROWS> *fb_dkv_ds_tile(unsigned char *shared) {
    return reinterpret_cast<fb_tile<FB_ROWS> *>(shared + (fb_dkv_k_tile<HS, KT, true>() + KT) * sizeof(fb_tile<HS>));
}

/* The warp's dS^T fragment (keys key0 + g, + 8 as rows; queries col0 +
 * 2t, + 1, + 8, + 9 as columns) into the dS^T tile (fb_tile<FB_ROWS>:
 * padded rows, conflict-free for these 4-byte stores and for ldmatrix). */
static __device__ __forceinline__ void fb_stage_ds(fb_tile<FB_ROWS> &dst, const uint32_t ds[4], int key0, int col0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < 4; i++) /* fragment i: key g + 8 (i % 2), queries 8 (i / 2) + 2t, + 1 */
        fb_store_pair(dst.e + (key0 + g + 8 * (i & 1)) * fb_tile<FB_ROWS>::ld + col0 + 8 * (i >> 1) + 2 * t, ds[i]);
}

/* The warp's share of dq for a query tile over the block's 64 keys
 * (queries 16w .. + 15 of the tile, warp w), dS K, into slot (64 x HS
 * float32, row-major; unscaled). k_tiles: the 16-key tiles of the block
 * its rows see. Columns in passes of fb_dq_share_cols. */
template <int HS>
static __device__ __forceinline__ void fb_dq_share(float *slot, const fb_tile<FB_ROWS> &dst, const fb_tile<HS> &ks, int k_tiles) {
    constexpr int NC = fb_dq_share_cols<HS>(), ld = fb_tile<HS>::ld;
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

#endif
