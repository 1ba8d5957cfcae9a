/* Asynchronous copies from global to shared memory (sm_80+ cp.async), so
 * that a block loads its next tile while it computes on the current one.
 * Each thread's copies are performed in groups: async_commit closes the
 * group of the copies issued since the last commit; async_wait<N> returns
 * when all but the N most recently committed groups have landed. A copy's
 * destination is undefined until then, and the wait covers only the
 * calling thread's copies: other threads read them after a __syncthreads
 * that follows the wait. A thread must not exit with copies in flight.
 * Under the emulation (tests/emu) the copies wait in a per-thread queue,
 * their destinations read as NaN until waited for, and a thread that exits
 * with copies queued is an error (tests/emu/test_async_copy.cu). */
#ifndef KERNELS_CUDA_ASYNC_COPY_CUH
#define KERNELS_CUDA_ASYNC_COPY_CUH

/* 16 bytes from global src to shared dst, both 16-byte aligned. .cg: cached
 * in L2 only (the tile is read once per block from shared memory). */
static __device__ __forceinline__ void async_copy16(void *dst, const void *src) {
#if defined(__CUDA_ARCH__)
    const unsigned shared = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared), "l"(__cvta_generic_to_global(src)) : "memory");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::cp_async(dst, src, 16, 16);
#else
    (void)dst; (void)src; /* nvcc's host pass: never called on the host */
#endif
}

/* One float from global src to shared dst, or a zero where !valid (the
 * copy's src-size 0: nothing is read, so src need only be aligned): a
 * row's statistic staged without a register waiting on the load. .ca: the
 * ISA's only cache mode below 16 bytes. */
static __device__ __forceinline__ void async_copy4_or_zero(float *dst, const float *src, bool valid) {
#if defined(__CUDA_ARCH__)
    const unsigned shared = (unsigned)__cvta_generic_to_shared(dst), src_bytes = valid ? 4u : 0u;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared), "l"(__cvta_generic_to_global(src)), "r"(src_bytes)
                 : "memory");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::cp_async(dst, src, 4, valid ? 4u : 0u);
#else
    (void)dst; (void)src; (void)valid;
#endif
}

/* Closes the group of this thread's copies issued since the last commit. */
static __device__ __forceinline__ void async_commit() {
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::cp_async_commit();
#endif
}

/* Waits until at most `pending` of this thread's committed groups (the
 * newest) are still in flight. "memory": no shared-memory read moves above. */
template <int pending>
static __device__ __forceinline__ void async_wait() {
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::cp_async_wait(pending);
#endif
}

#endif
