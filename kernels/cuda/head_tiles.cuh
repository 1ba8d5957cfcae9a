/* Tiles of one head's columns for the Hopper attention kernels (wgmma,
 * sm_90a) at head sizes 64, 96 and 128: ROWS rows (keys or queries) of HS
 * bf16 columns, stored as column chunks so that every chunk is one of the
 * PTX ISA's canonical swizzled layouts (kernels/cuda/smem_layout.h):
 *   chunk c holds columns 64c .. 64c + 63 as ROWS rows of 128 bytes under
 *   the 128B swizzle; at head size 96 the last chunk holds columns 64 .. 95
 *   as ROWS rows of 64 bytes under the 64B swizzle.
 * Chunk c starts ROWS * 128 * c bytes into the tile, so a tile is ROWS *
 * HS * 2 bytes, and with the tile 1024-aligned every chunk sits on its
 * swizzle's boundary (base offset 0). A chunk of 32 columns gets its own
 * swizzle rather than half of a 128-byte row: the ISA's MN-major swizzled
 * layouts span whole atoms (64 columns at 128B), and an N = 32 product on
 * half an atom is not one of them.
 *
 * The same layout serves as the K-major operand (Q, K in Q K^T: k16 step
 * j reads columns 16j .. 16j + 15, inside one chunk) and the MN-major B
 * (V in P V: one product per chunk, N = the chunk's columns). The bulk
 * tensor copy writes it with one box per chunk (box columns = the chunk's,
 * swizzle = its span); cp.async writes it through ht_offset. */
#ifndef KERNELS_CUDA_HEAD_TILES_CUH
#define KERNELS_CUDA_HEAD_TILES_CUH

#include <type_traits>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/smem_layout.h"
#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/tma.cuh"
#include "kernels/cuda/vec.cuh"
#include "kernels/cuda/wgmma.cuh"
#include "kernels/ops.h"

/* Whether the Hopper attention kernels are built at head size HS: the one
 * list of their head sizes. */
static __host__ __device__ constexpr bool head_tile_built(int HS) { return HS == 64 || HS == 96 || HS == 128; }

/* Whether the Hopper attention kernels run a call: a built head size, no
 * dropout, and the device running this build's sm_90a code (compute
 * capability 9.0 with a build that has it: cuda_ctx.sm90a_code). Each
 * caller adds what its own kernels need (dtype, alignment). */
static inline bool head_tile_runs(const cuda_ctx *ctx, int HS, tg_dropout drop) {
    return head_tile_built(HS) && drop.p <= 0.0f && ctx->sm90a_code;
}

/* Calls f with head size HS as a compile-time constant (an
 * std::integral_constant<int, HS>), HS one head_tile_built accepts: the
 * one place a run-time head size picks an instance. */
template <typename F>
static inline void head_tile_dispatch(int HS, F &&f) {
    if (HS == 64)
        f(std::integral_constant<int, 64>{});
    else if (HS == 96)
        f(std::integral_constant<int, 96>{});
    else
        f(std::integral_constant<int, 128>{});
}

/* The column chunks of head size HS; chunk 1's figures stand for chunk 0's
 * where there is no chunk 1 (head size 64), so that every expression is a
 * valid template argument. */
template <int HS>
struct head_tile {
    static_assert(head_tile_built(HS), "the Hopper attention kernels take head sizes 64, 96 and 128");
    static constexpr int chunks = (HS + 63) / 64;
    static constexpr int cols1 = HS > 64 ? HS - 64 : 64; /* columns of chunk 1 */
    __host__ __device__ static constexpr int cols(int c) { return c == 0 ? 64 : cols1; }
    __host__ __device__ static constexpr uint32_t row_bytes(int c) { return 2u * (uint32_t)cols(c); }
    __host__ __device__ static constexpr unsigned swizzle(int c) { return cols(c) == 64 ? SMEM_SWIZZLE_128B : SMEM_SWIZZLE_64B; }
    __host__ __device__ static constexpr uint32_t sbo(int c) { return 8u * row_bytes(c); } /* between 8-row groups (swizzle atoms) */
    template <int ROWS>
    __host__ __device__ static constexpr uint32_t chunk_at(int c) { return (uint32_t)(ROWS * 128 * c); }
    template <int ROWS>
    __host__ __device__ static constexpr uint32_t bytes() { return (uint32_t)(ROWS * HS * 2); }
};

/* Byte offset in a ROWS-row tile of columns col .. col + 7 (col a multiple
 * of 8) of row r, after the swizzle: the tile is 1024-aligned, so the
 * pattern on the offset is the one on the shared address. */
template <int HS, int ROWS>
static __host__ __device__ __forceinline__ uint32_t ht_offset(int r, int col) {
    using H = head_tile<HS>;
    const int c = col / 64;
    const uint32_t at = smem_canonical_offset(SMEM_K_MAJOR, H::swizzle(c), 16, H::sbo(c), (uint32_t)r, (uint32_t)(col % 64), 2);
    return H::template chunk_at<ROWS>(c) + smem_swizzle_apply(at, H::swizzle(c), 0);
}

/* The K-major descriptor of a ROWS-row tile for k16 step j (columns 16j ..
 * 16j + 15): chunk j / 4, 32 bytes a step along its swizzled rows. */
template <int HS, int ROWS>
static __device__ __forceinline__ uint64_t ht_k_major(const unsigned char *tile, int j) {
    using H = head_tile<HS>;
    const int c = j / 4;
    return wgmma_desc_advance(wgmma_desc(tile + H::template chunk_at<ROWS>(c), 16, H::sbo(c), H::swizzle(c)), 32u * (uint32_t)(j % 4));
}

/* The MN-major descriptor of chunk c of a ROWS-row tile for k16 step kk
 * (rows 16kk .. 16kk + 15 as k, the chunk's columns as n): the B of a
 * product with N = the chunk's columns. LBO (between atoms along n) is
 * never used: a chunk is one atom wide. */
template <int HS, int ROWS>
static __device__ __forceinline__ uint64_t ht_mn_major(const unsigned char *tile, int c, int kk) {
    using H = head_tile<HS>;
    return wgmma_desc_advance(wgmma_desc(tile + H::template chunk_at<ROWS>(c), H::template bytes<ROWS>(), H::sbo(c), H::swizzle(c)),
                              16u * H::row_bytes(c) * (uint32_t)kk);
}

/* The accumulators of columns 64c .. of a [64 x HS] product (d[4j ..] holds
 * columns 8j ..), as the array a product of N = the chunk's columns takes. */
template <int N>
static __device__ __forceinline__ float (&ht_part(float *d, int c))[N / 2] {
    return *reinterpret_cast<float(*)[N / 2]>(d + 32 * c);
}

/* D[64 x HS] (+)= A[64 x 16] B[16 x HS], A from registers (wgmma_rs), B the
 * MN-major k16 step kk of a ROWS-row tile: one product per chunk. */
template <int HS, int ROWS>
static __device__ __forceinline__ void ht_rs_mn(float *d, const uint32_t a[4], const unsigned char *tile, int kk, int scale_d) {
    using H = head_tile<HS>;
    wgmma_rs<64, 1>(ht_part<64>(d, 0), a, ht_mn_major<HS, ROWS>(tile, 0, kk), scale_d);
    if constexpr (H::chunks > 1) wgmma_rs<H::cols1, 1>(ht_part<H::cols1>(d, 1), a, ht_mn_major<HS, ROWS>(tile, 1, kk), scale_d);
}

/* D[64 x HS] (+)= A[64 x 16] B[16 x HS], A an MN-major shared operand
 * (desc_a), B as in ht_rs_mn. */
template <int HS, int ROWS>
static __device__ __forceinline__ void ht_ss_mn(float *d, uint64_t desc_a, const unsigned char *tile, int kk, int scale_d) {
    using H = head_tile<HS>;
    wgmma_ss<64, 1, 1>(ht_part<64>(d, 0), desc_a, ht_mn_major<HS, ROWS>(tile, 0, kk), scale_d);
    if constexpr (H::chunks > 1)
        wgmma_ss<H::cols1, 1, 1>(ht_part<H::cols1>(d, 1), desc_a, ht_mn_major<HS, ROWS>(tile, 1, kk), scale_d);
}

/* The calling warp's 16 rows of a warpgroup's [64 x 64] tile (one
 * 128B-swizzled chunk: warp w of the warpgroup rows 16w ..) as wgmma A
 * fragments, one per k16 step, by ldmatrix: lane 8m + i gives row i + 8
 * (m % 2), 16-byte column unit 2 step + m / 2, where the swizzle put it.
 * The wgmma backward's K and V held in registers; bench_wgmma's A. */
static __device__ __forceinline__ void ht_a_fragments(uint32_t (&a)[4][4], const unsigned char *tile) {
    const int lane = (int)threadIdx.x & 31, m = lane >> 3;
    const uint32_t row = (uint32_t)(16 * (((int)threadIdx.x >> 5) & 3) + (lane & 7) + 8 * (m & 1));
#pragma unroll
    for (int step = 0; step < 4; step++) {
        const uint32_t at = smem_canonical_offset(SMEM_K_MAJOR, SMEM_SWIZZLE_128B, 16, 8 * 128, row, (uint32_t)(16 * step + 8 * (m >> 1)), 2);
        mma_ldmatrix_x4<false>(a[step], (const __nv_bfloat16 *)(tile + smem_swizzle_apply(at, SMEM_SWIZZLE_128B, 0)));
    }
}

/* Rows t0 .. t0 + ROWS - 1 of a [T x HS] bf16 matrix (rows `stride`
 * elements apart) into a ROWS-row tile, THREADS threads 8 columns at a
 * time: by cp.async where vec (src 16-byte aligned), else by plain loads;
 * rows past T are zeros. The counter is unsigned so that ht_offset's chunk
 * and in-chunk column fold (an int cost the backward 4 registers). */
template <int HS, int ROWS, int THREADS>
static __device__ __forceinline__ void ht_stage(unsigned char *tile, const __nv_bfloat16 *src, size_t stride, int t0, int T, bool vec) {
    for (unsigned e = threadIdx.x; e < ROWS * (HS / 8); e += THREADS) {
        const int r = (int)(e / (HS / 8)), c = (int)(e % (HS / 8)), t = t0 + r;
        __nv_bfloat16 *d = (__nv_bfloat16 *)(tile + ht_offset<HS, ROWS>(r, 8 * c));
        const __nv_bfloat16 *s = src + (size_t)t * stride + 8 * c;
        if (t >= T)
            vec_store((uint32_t *)d, vec_pack<uint32_t>{});
        else if (vec)
            async_copy16(d, s);
        else
            for (int i = 0; i < 8; i++) d[i] = s[i];
    }
}

/* The tensor maps of one [B, T, NH, HS] bf16 activation (tensor_map.h's
 * heads view: token rows row_elems elements apart, base at head 0's
 * column 0), one per column chunk, boxes of box_rows tokens by the chunk's
 * columns, swizzled by the chunk's span: a copy lands as a box_rows-row
 * tile's chunk. Dies naming `name` where the driver refuses a map. */
template <int HS>
static void ht_make_maps(CUtensorMap (&dst)[2], const char *name, const void *base, int B, int T, int NH, size_t row_elems,
                         int box_rows) {
    using H = head_tile<HS>;
    for (int c = 0; c < H::chunks; c++) {
        tg_err e;
        if (tma_map_heads(&dst[c], name, base, B, T, NH, HS, row_elems, box_rows, H::cols(c), (int)H::row_bytes(c), &e))
            tg_die("train_gpt", &e);
    }
}

/* Tokens t0 .. t0 + ROWS - 1 of head h of sequence b into a ROWS-row tile
 * by the bulk tensor copy, one copy per column chunk (maps from
 * ht_make_maps with box_rows ROWS), landing on bar (whose expect_tx the
 * caller counts: the tile's bytes). */
template <int HS, int ROWS>
static __device__ __forceinline__ void ht_load(unsigned char *tile, const CUtensorMap (&map)[2], uint64_t *bar, int h, int t0, int b) {
    using H = head_tile<HS>;
#pragma unroll
    for (int c = 0; c < H::chunks; c++) tma_load_4d(tile + H::template chunk_at<ROWS>(c), &map[c], bar, 64 * c, h, t0, b);
}

#endif
