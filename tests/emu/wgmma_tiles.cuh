/* What tests/emu/test_wgmma.cu (on the emulator) and tests/gpu/hopper_check.cu
 * (on a GPU, and on the emulator) share: bf16 operand tiles laid out in
 * shared memory by functions written from the tensor copy's pictures (rows
 * of the swizzle span, the 16-byte chunk XORed with the address bits above;
 * core matrices without a swizzle), independent of kernels/cuda/smem_layout.h,
 * and a kernel that multiplies them with kernels/cuda/wgmma.cuh. */
#ifndef TESTS_EMU_WGMMA_TILES_CUH
#define TESTS_EMU_WGMMA_TILES_CUH

#include <stdint.h>
#include <string.h>

#include <cuda_bf16.h>

#include "kernels/cuda/wgmma.cuh"

#define M 64
#define K 64
#define NMAX 256
#define GAP 2048 /* bytes between and after the tiles: perturbed descriptors read NaN there, inside shared memory */

/* How the operands lie in shared memory. */
struct layout {
    int sw;    /* swizzle span in bytes: 0 (none), 32, 64, 128 */
    int mn;    /* 1: MN-major (B as [k][n]) */
    int rows;  /* mn extent of the tile (M for A, N for B) */
};

static __host__ __device__ unsigned code_of(int sw) { return sw == 128 ? 1u : sw == 64 ? 2u : sw == 32 ? 3u : 0u; }

/* A swizzled row: byte c of a W-byte row at tile offset row_at, as the
 * tensor copy writes it (the 16-byte chunk XOR address bits 7 and up). */
static __host__ __device__ unsigned swizzled(unsigned row_at, unsigned byte, unsigned w) {
    const unsigned phase = (row_at >> 7) & (w / 16 - 1);
    return row_at + (((byte / 16) ^ phase) * 16) + byte % 16;
}

/* Byte offset of element (mn, k) in the tile, K = 64. */
static __host__ __device__ unsigned tile_offset(layout l, unsigned mn, unsigned k) {
    const unsigned w = (unsigned)l.sw;
    if (!l.mn) {
        if (!w) return (mn / 8) * (K / 8 * 128) + (k / 8) * 128 + (mn % 8) * 16 + (k % 8) * 2; /* core matrices */
        const unsigned per = w / 2; /* k per row; further k in the next atom column */
        return swizzled((k / per) * l.rows * w + mn * w, (k % per) * 2, w);
    }
    if (!w) return (mn / 8) * (K / 8 * 128) + (k / 8) * 128 + (k % 8) * 16 + (mn % 8) * 2;
    const unsigned per = w / 2; /* n per row */
    return swizzled((mn / per) * K * w + k * w, (mn % per) * 2, w);
}
static __host__ __device__ unsigned tile_bytes(layout l) { return (unsigned)l.rows * K * 2; }

/* LBO, SBO and the start offset of k16 step s, for tile_offset's layouts. */
static __host__ __device__ void tile_strides(layout l, unsigned s, unsigned *lbo, unsigned *sbo, unsigned *start) {
    const unsigned w = (unsigned)l.sw;
    if (!w) {
        *lbo = 128, *sbo = K / 8 * 128, *start = s * 256;
    } else if (!l.mn) {
        const unsigned per = w / 2;
        *lbo = 16 /* unused */, *sbo = 8 * w, *start = (16 * s / per) * l.rows * w + (16 * s % per) * 2;
    } else {
        *lbo = K * w, *sbo = 8 * w, *start = 16 * s * w;
    }
}

/* The tiles' places in dynamic shared memory: A, a gap, B, a gap; 1024-aligned. */
static __host__ __device__ unsigned b_at(layout la) { return (tile_bytes(la) + GAP + 1023) / 1024 * 1024; }
static __host__ __device__ unsigned shared_bytes(layout la, layout lb) { return b_at(la) + tile_bytes(lb) + GAP + 1024; }

static __device__ void store_bf16(unsigned char *tile, unsigned at, float v) {
    const __nv_bfloat16 h = __float2bfloat16_rn(v);
    memcpy(tile + at, &h, 2);
}

/* The A fragment of rows 16w .. 16w + 15, k 16s .. 16s + 15, from A [M][K]
 * in global memory (PTX ISA, mma.m16n8k16 .bf16 A: g = lane / 4, t = lane % 4). */
static __device__ void a_fragment(uint32_t a[4], const float *A, int s) {
    const int w = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    for (int r = 0; r < 4; r++) {
        const int row = 16 * w + g + 8 * (r & 1), col = 16 * s + 2 * t + 8 * (r >> 1);
        const __nv_bfloat16 lo = __float2bfloat16_rn(A[row * K + col]), hi = __float2bfloat16_rn(A[row * K + col + 1]);
        a[r] = (uint32_t)__bfloat16_as_ushort(lo) | (uint32_t)__bfloat16_as_ushort(hi) << 16;
    }
}

/* Ordinary stores into shared memory become visible to the tensor core's
 * (async proxy) reads after this and a barrier. */
static __device__ __forceinline__ void tiles_visible_to_wgmma() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::fence_proxy_async();
#endif
}

/* Raw descriptor bits of a perturbation (the ISA's field positions). */
enum { P_NONE, P_START, P_LBO, P_SBO, P_BASE, P_SWIZZLE };
static __host__ __device__ uint64_t perturbed(uint64_t d, int p) {
    return p == P_START ? d + 1 : p == P_LBO ? d + (1ull << 16) : p == P_SBO ? d + (1ull << 32)
         : p == P_BASE ? d | (1ull << 49) : p == P_SWIZZLE ? d ^ (1ull << 62) : d;
}

struct wg_case {
    layout la, lb;
    int a_regs;     /* A from registers */
    int first_scale; /* scale-d of the first k step: 0 overwrites C */
    int perturb_a, perturb_b;
};

/* The descriptor of k16 step s of a tile laid out as l at tile. */
static __device__ uint64_t step_desc(layout l, const unsigned char *tile, int s) {
    unsigned lbo, sbo, start;
    tile_strides(l, (unsigned)s, &lbo, &sbo, &start);
    return wgmma_desc_advance(wgmma_desc(tile, lbo, sbo, code_of(l.sw)), start);
}

/* The product's form: A from shared memory or registers, B K- or MN-major. */
enum { FORM_SS_K = 0, FORM_SS_MN = 1, FORM_RS_K = 2, FORM_RS_MN = 3, FORM_RUNTIME = -1 };
static __host__ __device__ int form_of(const wg_case &c) { return (c.a_regs ? FORM_RS_K : FORM_SS_K) + (c.lb.mn ? 1 : 0); }

/* out[wg][M][N] = C (if first_scale) + A B: A [M][K], B [K][N], C [M][N] in global memory.
 * The four k16 products as the attention kernels issue them: every descriptor and A fragment made
 * first, one fence, the products unrolled back to back, so that nothing they read or write is
 * touched while they are in flight. FORM: the form as a template argument (form_of(c) must
 * match), so that the fence, the products, the commit and the wait lie in one basic block, as
 * in the attention kernels; FORM_RUNTIME (hopper_check's kernel until 2026-12-01, and
 * test_wgmma's) picks it from c at run time, between the fence and the commit, where ptxas
 * injects warpgroup.arrive (its C7519 notes, which no attention kernel gets). LOOPED: as this
 * kernel did before the 2026-11-30 sitting, a k loop (not unrolled) that makes each step's
 * descriptors and A fragment between the products. Both failed every check on an H200
 * (results/gpu/2026-11-30_h200) and pass on the emulator; hopper_check runs them beside the
 * compile-time forms to tell whether either is the difference. */
template <int N, int LOOPED = 0, int FORM = FORM_RUNTIME>
__global__ void product_kernel(float *out, const float *A, const float *B, const float *C, wg_case c) {
#if defined(EMU_CUDA_EMU_H) /* tests/emu/prep.py rewrites the .cu files, not this header */
    unsigned char *dyn = (unsigned char *)::emu::dynamic_shared();
#else
    extern __shared__ __align__(16) unsigned char dyn[];
#endif
    unsigned char *sa = smem_align_1k(dyn), *sb = sa + b_at(c.la);
    for (int e = threadIdx.x; e < M * K; e += blockDim.x) store_bf16(sa, tile_offset(c.la, e / K, e % K), A[e]);
    for (int e = threadIdx.x; e < K * N; e += blockDim.x) store_bf16(sb, tile_offset(c.lb, e % N, e / N), B[e]);
    tiles_visible_to_wgmma();
    __syncthreads();
    const int wg = threadIdx.x / 128, w = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    float d[N / 2];
    for (int j = 0; j < N / 8; j++)
        for (int r = 0; r < 4; r++) d[4 * j + r] = C[(16 * w + g + 8 * (r >> 1)) * N + 8 * j + 2 * t + (r & 1)];
    if (!LOOPED) {
        uint64_t da[K / 16], db[K / 16];
        uint32_t a[K / 16][4];
#pragma unroll
        for (int s = 0; s < K / 16; s++) {
            da[s] = step_desc(c.la, sa, s), db[s] = step_desc(c.lb, sb, s);
            a_fragment(a[s], A, s);
        }
        da[0] = perturbed(da[0], c.perturb_a), db[0] = perturbed(db[0], c.perturb_b);
        const int form = FORM == FORM_RUNTIME ? form_of(c) : FORM; /* a constant but for FORM_RUNTIME */
        wgmma_fence();
        if (form == FORM_RS_MN) {
#pragma unroll
            for (int s = 0; s < K / 16; s++) wgmma_rs<N, 1>(d, a[s], db[s], s == 0 ? c.first_scale : 1);
        } else if (form == FORM_RS_K) {
#pragma unroll
            for (int s = 0; s < K / 16; s++) wgmma_rs<N, 0>(d, a[s], db[s], s == 0 ? c.first_scale : 1);
        } else if (form == FORM_SS_MN) {
#pragma unroll
            for (int s = 0; s < K / 16; s++) wgmma_ss<N, 0, 1>(d, da[s], db[s], s == 0 ? c.first_scale : 1);
        } else {
#pragma unroll
            for (int s = 0; s < K / 16; s++) wgmma_ss<N, 0, 0>(d, da[s], db[s], s == 0 ? c.first_scale : 1);
        }
    } else {
        wgmma_fence();
        for (int s = 0; s < K / 16; s++) {
            uint64_t da = step_desc(c.la, sa, s), db = step_desc(c.lb, sb, s);
            if (s == 0) da = perturbed(da, c.perturb_a), db = perturbed(db, c.perturb_b);
            const int scale = s == 0 ? c.first_scale : 1;
            if (c.a_regs) {
                uint32_t a[4];
                a_fragment(a, A, s);
                if (c.lb.mn) wgmma_rs<N, 1>(d, a, db, scale);
                else wgmma_rs<N, 0>(d, a, db, scale);
            } else if (c.lb.mn) wgmma_ss<N, 0, 1>(d, da, db, scale);
            else wgmma_ss<N, 0, 0>(d, da, db, scale);
        }
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(d);
    for (int j = 0; j < N / 8; j++)
        for (int r = 0; r < 4; r++) out[wg * M * N + (16 * w + g + 8 * (r >> 1)) * N + 8 * j + 2 * t + (r & 1)] = d[4 * j + r];
}

#endif
