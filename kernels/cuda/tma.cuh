/* Hopper (sm_90) bulk tensor copies (TMA): one thread asks the copy
 * engine for a whole box of a tensor, described by a tensor map made on
 * the host (kernels/cuda/tensor_map.h) and passed to the kernel as
 * `const __grid_constant__ CUtensorMap map` (the wrappers take &map).
 *
 * Load: tma_load_2d..4d(dst, &map, bar, c0, c1, ...) copies the box whose
 * first element has coordinates (c0, c1, ...) (innermost first, elements;
 * may lie partly outside the tensor: those elements read as zero) into
 * shared memory at dst, in the map's layout: rows of box[0] elements,
 * dense, with the map's swizzle applied to the absolute shared address
 * (16-byte chunk bits 4-6 XOR address bits 7-9 for 128B; 4-5 with 7-8 for
 * 64B; 4 with 7 for 32B). dst is 128-byte aligned, 1024 for the 128B
 * swizzle (512 for 64B, 256 for 32B). On landing, the box's bytes are
 * taken off bar's transaction count: the issuing thread must have
 * announced them (mbar_arrive_expect_tx, kernels/cuda/mbarrier.cuh) in the
 * same phase, and readers mbar_wait on bar before reading dst.
 *
 * Store: after the tile is written to shared memory, each writer calls
 * fence_proxy_async_shared(), then a barrier; one thread calls
 * tma_store_2d..4d(&map, src, c0, ...), tma_store_commit(), and
 * tma_store_wait<0>() before src is reused or the thread exits; elements
 * outside the tensor are not written.
 *
 * Under the emulation (tests/emu/emu_tma.cpp) a load's destination reads
 * NaN (0xff) from its issue until a wait on its barrier needs it; it then
 * lands, reading global memory at that moment. A misaligned destination,
 * a map not made by cuTensorMapEncodeTiled, a phase that completes with
 * copies of its own still in flight (bytes not announced) and a box that
 * never lands are errors (tests/emu/test_tma.cu). */
#ifndef KERNELS_CUDA_TMA_CUH
#define KERNELS_CUDA_TMA_CUH

#include <cuda.h>
#include <stdint.h>

#include "kernels/cuda/mbarrier.cuh"

/* Brings the map's 128 bytes into the descriptor cache ahead of its copies. */
static __device__ __forceinline__ void tma_prefetch_map(const CUtensorMap *map) {
#if defined(MBAR_SM90)
    asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)(uintptr_t)map) : "memory");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::tma_prefetch(map);
#else
    (void)map;
#endif
}

#if defined(MBAR_SM90)
#define TMA_LOAD_ASM(N, COORDS, ...)                                                                                        \
    asm volatile("cp.async.bulk.tensor." #N "d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, " COORDS     \
                 "], [%2];\n" ::"r"(mbar_smem(dst)),                                                                         \
                 "l"((uint64_t)(uintptr_t)map), "r"(mbar_smem(bar)), __VA_ARGS__                                             \
                 : "memory")
#define TMA_STORE_ASM(N, COORDS, ...)                                                                                       \
    asm volatile("cp.async.bulk.tensor." #N "d.global.shared::cta.bulk_group [%0, " COORDS "], [%1];\n" ::"l"(             \
                     (uint64_t)(uintptr_t)map),                                                                              \
                 "r"(mbar_smem(src)), __VA_ARGS__                                                                            \
                 : "memory")
#endif

static __device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1) {
#if defined(MBAR_SM90)
    TMA_LOAD_ASM(2, "{%3, %4}", "r"(c0), "r"(c1));
#elif defined(EMU_CUDA_EMU_H)
    const int c[2] = {c0, c1};
    ::emu::tma_load(dst, map, bar, c, 2);
#else
    (void)dst; (void)map; (void)bar; (void)c0; (void)c1;
#endif
}

static __device__ __forceinline__ void tma_load_3d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1,
                                                   int c2) {
#if defined(MBAR_SM90)
    TMA_LOAD_ASM(3, "{%3, %4, %5}", "r"(c0), "r"(c1), "r"(c2));
#elif defined(EMU_CUDA_EMU_H)
    const int c[3] = {c0, c1, c2};
    ::emu::tma_load(dst, map, bar, c, 3);
#else
    (void)dst; (void)map; (void)bar; (void)c0; (void)c1; (void)c2;
#endif
}

static __device__ __forceinline__ void tma_load_4d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1,
                                                   int c2, int c3) {
#if defined(MBAR_SM90)
    TMA_LOAD_ASM(4, "{%3, %4, %5, %6}", "r"(c0), "r"(c1), "r"(c2), "r"(c3));
#elif defined(EMU_CUDA_EMU_H)
    const int c[4] = {c0, c1, c2, c3};
    ::emu::tma_load(dst, map, bar, c, 4);
#else
    (void)dst; (void)map; (void)bar; (void)c0; (void)c1; (void)c2; (void)c3;
#endif
}

static __device__ __forceinline__ void tma_store_2d(const CUtensorMap *map, const void *src, int c0, int c1) {
#if defined(MBAR_SM90)
    TMA_STORE_ASM(2, "{%2, %3}", "r"(c0), "r"(c1));
#elif defined(EMU_CUDA_EMU_H)
    const int c[2] = {c0, c1};
    ::emu::tma_store(map, src, c, 2);
#else
    (void)map; (void)src; (void)c0; (void)c1;
#endif
}

static __device__ __forceinline__ void tma_store_3d(const CUtensorMap *map, const void *src, int c0, int c1, int c2) {
#if defined(MBAR_SM90)
    TMA_STORE_ASM(3, "{%2, %3, %4}", "r"(c0), "r"(c1), "r"(c2));
#elif defined(EMU_CUDA_EMU_H)
    const int c[3] = {c0, c1, c2};
    ::emu::tma_store(map, src, c, 3);
#else
    (void)map; (void)src; (void)c0; (void)c1; (void)c2;
#endif
}

static __device__ __forceinline__ void tma_store_4d(const CUtensorMap *map, const void *src, int c0, int c1, int c2,
                                                    int c3) {
#if defined(MBAR_SM90)
    TMA_STORE_ASM(4, "{%2, %3, %4, %5}", "r"(c0), "r"(c1), "r"(c2), "r"(c3));
#elif defined(EMU_CUDA_EMU_H)
    const int c[4] = {c0, c1, c2, c3};
    ::emu::tma_store(map, src, c, 4);
#else
    (void)map; (void)src; (void)c0; (void)c1; (void)c2; (void)c3;
#endif
}

/* Closes the group of this thread's stores issued since the last commit. */
static __device__ __forceinline__ void tma_store_commit() {
#if defined(MBAR_SM90)
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::tma_store_commit();
#endif
}

/* Returns when at most `pending` of this thread's committed store groups
 * still read their shared-memory source (which may then be rewritten). */
template <int pending>
static __device__ __forceinline__ void tma_store_wait() {
#if defined(MBAR_SM90)
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(pending) : "memory");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::tma_store_wait(pending);
#endif
}

#endif
