/* 16-byte vector access for the elementwise kernels: a pack is 16 bytes of
 * elements (8 bf16 or 4 float), moved with one 128-bit load or store, and
 * element loops index with 32-bit integers where the sizes allow (64-bit
 * division and multiplication cost several instructions each on the GPU).
 * A kernel runs packs when the launcher found every pointer 16-byte aligned
 * (vec_aligned), then the remaining elements one by one; the per-element
 * arithmetic is the same either way, so results do not depend on the path. */
#ifndef KERNELS_CUDA_VEC_CUH
#define KERNELS_CUDA_VEC_CUH

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

template <typename T>
struct alignas(16) vec_pack {
    static constexpr int N = 16 / (int)sizeof(T);
    T e[N];
};

/* A 16-byte access at a misaligned address faults on the device; the
 * emulation (plain memcpy) would not notice, so it refuses one here. */
static __device__ __forceinline__ void vec_check16(const void *p, const char *what) {
#if defined(EMU_CUDA_EMU_H) && !defined(__CUDA_ARCH__)
    if (((uintptr_t)p & 15u) != 0) {
        fprintf(stderr, "emu: ERROR %s: misaligned 16-byte access (%p)\n", what, p);
        abort();
    }
#else
    (void)p;
    (void)what;
#endif
}

template <typename T>
static __device__ __forceinline__ vec_pack<T> vec_load(const T *p) {
    vec_pack<T> v;
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<uint4 *>(&v) = *reinterpret_cast<const uint4 *>(p);
#else
    vec_check16(p, "vec_load");
    memcpy(&v, p, sizeof v);
#endif
    return v;
}

template <typename T>
static __device__ __forceinline__ void vec_store(T *p, const vec_pack<T> &v) {
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<uint4 *>(p) = *reinterpret_cast<const uint4 *>(&v);
#else
    vec_check16(p, "vec_store");
    memcpy(p, &v, sizeof v);
#endif
}

/* A hint that the 128-byte line holding p is read soon: fetched into L2
 * now, so that the load that follows finds it there rather than in device
 * memory. No effect on any value (the emulation ignores it). */
static __device__ __forceinline__ void vec_prefetch_l2(const void *p) {
#if defined(__CUDA_ARCH__)
    asm volatile("prefetch.L2 [%0];\n" ::"l"(p));
#else
    (void)p;
#endif
}

/* Every pointer given is 16-byte aligned (NULL counts as aligned). */
static inline bool vec_aligned(const void *a, const void *b = NULL, const void *c = NULL, const void *d = NULL) {
    return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d) & 15u) == 0;
}

/* Rows of C elements of T at these pointers go in 16-byte packs: every
 * pointer aligned and each row whole packs. */
template <typename T>
static inline bool vec_rows(int C, const void *a, const void *b = NULL, const void *c = NULL, const void *d = NULL) {
    return C % vec_pack<T>::N == 0 && vec_aligned(a, b, c, d);
}

/* The elementwise launches: blocks of VEC_THREADS, at most VEC_MAX_BLOCKS
 * of them (the grid-stride loops cover the rest). */
#define VEC_THREADS 256
#define VEC_MAX_BLOCKS (1u << 16)

/* The grid for n elements in packs of P. */
static inline unsigned vec_grid(size_t n, int P) {
    const size_t packs = (n + (size_t)P - 1) / (size_t)P, blocks = (packs + VEC_THREADS - 1) / VEC_THREADS;
    return blocks < VEC_MAX_BLOCKS ? (unsigned)blocks : VEC_MAX_BLOCKS;
}

/* Packs a lane of a warp-per-row kernel takes of a row of C elements, as
 * the instance that holds them all in registers: 4 or 8 (the MAXP of
 * layernorm.cu's and residual_ln.cu's held instances), or 0 (over 8, or
 * no packs: the kernel's loop). */
template <typename T>
static inline int vec_held_packs(int C, bool packs) {
    const int per_lane = (C + 32 * vec_pack<T>::N - 1) / (32 * vec_pack<T>::N);
    return !packs ? 0 : per_lane <= 4 ? 4 : per_lane <= 8 ? 8 : 0;
}

/* 32-bit indices suffice: n elements, and a grid-stride loop of `stride`
 * threads never steps past 2^32 - 1. */
static inline bool vec_index32(size_t n, size_t stride) { return n + stride < ((size_t)1 << 32); }

#endif
