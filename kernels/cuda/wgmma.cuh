/* Hopper's warpgroup MMA (sm_90a): wgmma.mma_async.sync.aligned.m64nNk16
 * .f32.bf16.bf16, its fence, commit_group and wait_group, and shared-memory
 * descriptors (kernels/cuda/smem_layout.h holds their address math).
 *
 * A warpgroup is 4 consecutive warps (threads 128g .. 128g + 127 of the
 * block); every wrapper here is executed by all 128 threads together, with
 * the same descriptors and template arguments (.sync.aligned). One product
 * D[64 x N] (+)= A[64 x 16] B[16 x N], float32 accumulators:
 *   wgmma_ss<N, tnsp_a, tnsp_b>(d, desc_a, desc_b, scale_d): A and B in
 *     shared memory through descriptors; tnsp 0 = K-major (A as [m][k], B as
 *     [n][k]: K in Q K^T), 1 = MN-major (B as [k][n]: V in P V);
 *   wgmma_rs<N, tnsp_b>(d, a, desc_b, scale_d): A from registers, each warp w
 *     holding rows 16w .. 16w + 15 in mma.sync m16n8k16's A fragment
 *     (kernels/cuda/mma.cuh: a[0] A[g][2t..2t+1], a[1] A[g+8][2t..], a[2]
 *     A[g][2t+8..], a[3] A[g+8][2t+8..], g = lane / 4, t = lane % 4);
 *   scale_d 0 overwrites D, 1 accumulates; N in 16, 32, 64, 128, 256.
 * Accumulators (float d[N / 2] per thread, the ISA's D fragment): warp w
 * holds rows 16w .. 16w + 15; per 8 columns j, d[4j .. 4j + 3] are mma.sync
 * m16n8's C fragment: d[4j], d[4j+1] = D[16w + g][8j + 2t], [8j + 2t + 1];
 * d[4j+2], d[4j+3] = D[16w + g + 8][8j + 2t], [8j + 2t + 1]. So packed to
 * bf16 pairs, 16 columns of them are an A fragment for wgmma_rs (P V):
 * mma_a_from_accumulators(a, d + 8i, d + 8i + 4) (kernels/cuda/mma.cuh) is
 * the A of k16 step i (columns 16i .. 16i + 15 of D; tests/emu/test_wgmma.cu).
 *
 * Order of use (the ISA's rules):
 *   wgmma_fence() before the first product, and between the thread's own
 *   register accesses to accumulators (or A fragments) and a product using
 *   them; wgmma_commit() closes the group of products issued since the last;
 *   wgmma_wait<N>() returns when all but the N newest committed groups are
 *   done: accumulators and A-fragment registers are not to be touched, nor
 *   operand tiles in shared memory rewritten, before their group is waited
 *   for. wgmma_fence_operand(d) keeps the compiler from moving accumulator
 *   accesses across the asynchronous region (call it after the wait and
 *   before the product, as CUTLASS does). Tiles written by ordinary stores
 *   need a fence.proxy.async (kernels/cuda/mbarrier.cuh) and a barrier
 *   before a product reads them; tiles written by the bulk tensor copy do not.
 *
 * Descriptors: wgmma_desc(tile, lbo, sbo, swizzle) from a pointer into
 * shared memory (16-byte aligned; 1024-byte aligned for the 128B swizzle,
 * 512 for 64B, 256 for 32B, so that base offset 0 is right);
 * wgmma_desc_advance(desc, bytes) moves its start (the next k16 step:
 * 32 bytes in a K-major swizzled row; 16 rows in an MN-major tile).
 *
 * Builds: under __CUDA_ARCH__ with the sm_90a features
 * (__CUDA_ARCH_FEAT_SM90_ALL) the PTX; on another device architecture a
 * trap (callers choose the Hopper path at run time); under the emulation
 * (tests/emu, EMU_CUDA_EMU_H) stand-ins that exchange across the warpgroup,
 * decode descriptors as the ISA says and defer the products to the wait
 * (tests/emu/emu_wgmma.cpp; what they check: tests/emu/README.md); nvcc's
 * host pass: never called. tests/gpu/hopper_check.cu compiles every wrapper
 * for sm_90a and, on a GPU, compares them with a CPU product. */
#ifndef KERNELS_CUDA_WGMMA_CUH
#define KERNELS_CUDA_WGMMA_CUH

#include <stdint.h>

#include "kernels/cuda/smem_layout.h"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WGMMA_PTX 1
#endif

/* The 18-bit shared address of p (in the block's shared memory) that a
 * descriptor holds. */
static __device__ __forceinline__ uint32_t wgmma_shared_address(const void *p) {
#if defined(__CUDA_ARCH__)
    return (uint32_t)__cvta_generic_to_shared(p);
#elif defined(EMU_CUDA_EMU_H)
    return ::emu::wgmma_shared_address(p);
#else
    (void)p;
    return 0;
#endif
}

/* A descriptor of the tile at p (base offset 0; smem_layout.h). */
static __device__ __forceinline__ uint64_t wgmma_desc(const void *p, uint32_t lbo, uint32_t sbo, unsigned swizzle) {
    return smem_desc_make(wgmma_shared_address(p), lbo, sbo, swizzle);
}

/* desc with its start address moved by bytes (a multiple of 16; the start
 * stays in its 14-bit field, as CUTLASS steps along K). */
static __device__ __forceinline__ uint64_t wgmma_desc_advance(uint64_t desc, uint32_t bytes) {
    return (desc & ~(uint64_t)0x3fff) | ((desc + (bytes >> 4)) & 0x3fff);
}

static __device__ __forceinline__ void wgmma_fence() {
#if defined(WGMMA_PTX)
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#elif defined(__CUDA_ARCH__)
    asm volatile("trap;");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::wgmma_fence();
#endif
}

static __device__ __forceinline__ void wgmma_commit() {
#if defined(WGMMA_PTX)
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#elif defined(__CUDA_ARCH__)
    asm volatile("trap;");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::wgmma_commit();
#endif
}

template <int pending>
static __device__ __forceinline__ void wgmma_wait() {
    static_assert(pending >= 0 && pending <= 7, "wgmma.wait_group takes 0 to 7");
#if defined(WGMMA_PTX)
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(pending) : "memory");
#elif defined(__CUDA_ARCH__)
    asm volatile("trap;");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::wgmma_wait(pending);
#endif
}

/* Keeps the compiler from moving accesses to d across this point (the
 * asynchronous products write d behind its back). */
template <int R>
static __device__ __forceinline__ void wgmma_fence_operand(float (&d)[R]) {
#if defined(__CUDA_ARCH__)
    for (int i = 0; i < R; i++) asm volatile("" : "+f"(d[i])::"memory");
#else
    (void)d;
#endif
}

#if defined(WGMMA_PTX)
/* The PTX of each N: d's N / 2 registers, then the operands; scale-d as a
 * predicate, imm-scale-a and -b 1 (no negation). */
template <int N>
struct wgmma_n;

template <>
struct wgmma_n<16> {
    template <int tnsp_a, int tnsp_b>
    static __device__ __forceinline__ void ss(float *d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {"
                     "%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, %11, %12;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(tnsp_a), "n"(tnsp_b));
    }
    template <int tnsp_b>
    static __device__ __forceinline__ void rs(float *d, const uint32_t *a, uint64_t desc_b, int scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {"
                     "%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, %14;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(tnsp_b));
    }
};

template <>
struct wgmma_n<32> {
    template <int tnsp_a, int tnsp_b>
    static __device__ __forceinline__ void ss(float *d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, %19, %20;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(tnsp_a), "n"(tnsp_b));
    }
    template <int tnsp_b>
    static __device__ __forceinline__ void rs(float *d, const uint32_t *a, uint64_t desc_b, int scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, %22;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(tnsp_b));
    }
};

template <>
struct wgmma_n<64> {
    template <int tnsp_a, int tnsp_b>
    static __device__ __forceinline__ void ss(float *d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, %35, %36;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(tnsp_a), "n"(tnsp_b));
    }
    template <int tnsp_b>
    static __device__ __forceinline__ void rs(float *d, const uint32_t *a, uint64_t desc_b, int scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(tnsp_b));
    }
};

template <>
struct wgmma_n<128> {
    template <int tnsp_a, int tnsp_b>
    static __device__ __forceinline__ void ss(float *d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, %67, %68;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(tnsp_a), "n"(tnsp_b));
    }
    template <int tnsp_b>
    static __device__ __forceinline__ void rs(float *d, const uint32_t *a, uint64_t desc_b, int scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(tnsp_b));
    }
};

template <>
struct wgmma_n<256> {
    template <int tnsp_a, int tnsp_b>
    static __device__ __forceinline__ void ss(float *d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, %131, %132;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                   "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                   "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                   "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                   "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                   "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                   "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(tnsp_a), "n"(tnsp_b));
    }
    template <int tnsp_b>
    static __device__ __forceinline__ void rs(float *d, const uint32_t *a, uint64_t desc_b, int scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, %134;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                   "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                   "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                   "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                   "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                   "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                   "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(tnsp_b));
    }
};
#endif

template <int N>
struct wgmma_supported {
    static const bool value = N == 16 || N == 32 || N == 64 || N == 128 || N == 256;
};

/* D (+)= A B, A and B from shared memory (see the top of this file). */
template <int N, int tnsp_a, int tnsp_b>
static __device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    static_assert(wgmma_supported<N>::value, "wgmma_ss: N is 16, 32, 64, 128 or 256");
    static_assert((tnsp_a == 0 || tnsp_a == 1) && (tnsp_b == 0 || tnsp_b == 1), "tnsp is 0 or 1");
#if defined(WGMMA_PTX)
    wgmma_n<N>::template ss<tnsp_a, tnsp_b>(d, desc_a, desc_b, scale_d);
#elif defined(__CUDA_ARCH__)
    asm volatile("trap;");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::wgmma_mma(d, N, desc_a, NULL, desc_b, scale_d, tnsp_a, tnsp_b);
#else
    (void)d, (void)desc_a, (void)desc_b, (void)scale_d;
#endif
}

/* D (+)= A B, A from registers (mma.sync's A fragment per warp), B from shared memory. */
template <int N, int tnsp_b>
static __device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t a[4], uint64_t desc_b, int scale_d) {
    static_assert(wgmma_supported<N>::value, "wgmma_rs: N is 16, 32, 64, 128 or 256");
    static_assert(tnsp_b == 0 || tnsp_b == 1, "tnsp is 0 or 1");
#if defined(WGMMA_PTX)
    wgmma_n<N>::template rs<tnsp_b>(d, a, desc_b, scale_d);
#elif defined(__CUDA_ARCH__)
    asm volatile("trap;");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::wgmma_mma(d, N, 0, a, desc_b, scale_d, 0, tnsp_b);
#else
    (void)d, (void)a, (void)desc_b, (void)scale_d;
#endif
}

#endif
