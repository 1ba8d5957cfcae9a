/* Hopper (sm_90) synchronization for producer/consumer kernels: mbarriers
 * in shared memory, named barriers and setmaxnreg.
 *
 * An mbarrier (a 64-bit word in shared memory, 8-byte aligned) counts a
 * phase: the phase completes when its pending arrivals reach zero AND its
 * transaction count (bytes announced by expect_tx, taken off by the bulk
 * copies that land on it, kernels/cuda/tma.cuh) is zero; then the next
 * phase begins with `count` arrivals pending. Phases are numbered from 0;
 * mbar_wait(bar, parity) returns once the phase of that parity (0 even, 1
 * odd) before the current one has completed, so a consumer waits on phase
 * k's parity k & 1, and a producer's first wait on an empty slot (parity
 * 1 after init) passes at once.
 *
 * Protocol: one thread inits every barrier, then mbar_fence_init() and a
 * __syncthreads before any other thread uses them. A producer thread calls
 * mbar_arrive_expect_tx(bar, bytes) then issues the copies on bar;
 * consumers mbar_wait(bar, phase & 1), use the data, then arrive on the
 * slot's `empty` barrier.
 *
 * Named barriers (ids 1 to 15; 0 is __syncthreads'): the `n` threads
 * (a multiple of 32, whole warps) of a barrier meet; named_bar_arrive
 * counts without waiting (a producer telling a consumer group it may go).
 *
 * setmaxnreg: each warpgroup (128 threads, 4 whole warps) executes it
 * uniformly; the count is a multiple of 8 in [24, 256]. ptxas honours it
 * only in a kernel whose registers at entry it can fix: declare the kernel
 * __launch_bounds__(threads, 1), else ptxas ignores it (C7508).
 *
 * Under the emulation (tests/emu/emu_tma.cpp) each of these is checked:
 * the phases exactly as above, a wait that cannot complete yields to the
 * other threads, a block where no thread can move is a deadlock error, a
 * named barrier's count must be a multiple of 32 and agree among its
 * threads, setmaxnreg must be warpgroup-uniform (tests/emu/test_tma.cu). */
#ifndef KERNELS_CUDA_MBARRIER_CUH
#define KERNELS_CUDA_MBARRIER_CUH

#include <stdint.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define MBAR_SM90 1
/* A shared-memory address as the 32-bit operand the instructions take. */
static __device__ __forceinline__ uint32_t mbar_smem(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
#endif

/* Sets *bar to phase 0 with `count` arrivals expected per phase. */
static __device__ __forceinline__ void mbar_init(uint64_t *bar, unsigned count) {
#if defined(MBAR_SM90)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(mbar_smem(bar)), "r"(count) : "memory");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::mbar_init(bar, count);
#else
    (void)bar; (void)count;
#endif
}

/* Makes the inits visible to the other threads and to the copy engine
 * (the async proxy); a __syncthreads must follow before their first use. */
static __device__ __forceinline__ void mbar_fence_init() {
#if defined(MBAR_SM90)
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::fence_proxy_async();
#endif
}

/* Orders this thread's earlier shared-memory writes before later bulk
 * copies that read them (a TMA store of a tile written by threads). */
static __device__ __forceinline__ void fence_proxy_async_shared() {
#if defined(MBAR_SM90)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::fence_proxy_async();
#endif
}

/* One arrival on the current phase; returns the state token (unused by
 * the parity waits). */
static __device__ __forceinline__ uint64_t mbar_arrive(uint64_t *bar) {
#if defined(MBAR_SM90)
    uint64_t state;
    asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];\n" : "=l"(state) : "r"(mbar_smem(bar)) : "memory");
    return state;
#elif defined(EMU_CUDA_EMU_H)
    return ::emu::mbar_arrive(bar, 0);
#else
    (void)bar;
    return 0;
#endif
}

/* Announces `bytes` more to land on the current phase, then arrives: the
 * producer's call before it issues the phase's copies. */
static __device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, unsigned bytes) {
#if defined(MBAR_SM90)
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(mbar_smem(bar)), "r"(bytes) : "memory");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::mbar_arrive(bar, bytes);
#else
    (void)bar; (void)bytes;
#endif
}

/* Announces `bytes` more to land on the current phase, without arriving. */
static __device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, unsigned bytes) {
#if defined(MBAR_SM90)
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(mbar_smem(bar)), "r"(bytes) : "memory");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::mbar_expect_tx(bar, bytes);
#else
    (void)bar; (void)bytes;
#endif
}

/* Whether the phase of `parity` before the current one has completed (one
 * try: the hardware may wait a while inside it). */
static __device__ __forceinline__ bool mbar_try_wait(uint64_t *bar, unsigned parity) {
#if defined(MBAR_SM90)
    uint32_t done;
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(mbar_smem(bar)), "r"(parity)
                 : "memory");
    return done != 0;
#elif defined(EMU_CUDA_EMU_H)
    return ::emu::mbar_try_wait(bar, parity);
#else
    (void)bar; (void)parity;
    return true;
#endif
}

/* Returns when the phase of `parity` has completed; "memory": no read of
 * the data it guards moves above. On the device the retry loop is inside
 * one asm block, so that to the compiler the wait is one instruction and
 * the warp leaves it converged: the warp-wide .aligned instructions that
 * follow (bar.sync, wgmma) need every lane, where lanes leaving a C++ loop
 * in different trips reconverge only where the compiler puts it. */
static __device__ __forceinline__ void mbar_wait(uint64_t *bar, unsigned parity) {
#if defined(MBAR_SM90)
    asm volatile("{\n .reg .pred p;\n mbar_wait_retry:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 " @!p bra mbar_wait_retry;\n}\n" ::"r"(mbar_smem(bar)),
                 "r"(parity)
                 : "memory");
#else
    while (!mbar_try_wait(bar, parity)) {
    }
#endif
}

/* Ends *bar's life as a barrier (before its bytes are reused as data). */
static __device__ __forceinline__ void mbar_inval(uint64_t *bar) {
#if defined(MBAR_SM90)
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(mbar_smem(bar)) : "memory");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::mbar_inval(bar);
#else
    (void)bar;
#endif
}

/* Waits until `threads` threads (a multiple of 32) reached named barrier
 * `id` (1 to 15) by named_bar_sync or named_bar_arrive. */
static __device__ __forceinline__ void named_bar_sync(int id, int threads) {
#if defined(MBAR_SM90)
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::named_bar(id, threads, true);
#else
    (void)id; (void)threads;
#endif
}

/* Counts this thread toward named barrier `id` without waiting (the
 * threads of whole warps execute it, as named_bar_sync). */
static __device__ __forceinline__ void named_bar_arrive(int id, int threads) {
#if defined(MBAR_SM90)
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#elif defined(EMU_CUDA_EMU_H)
    ::emu::named_bar(id, threads, false);
#else
    (void)id; (void)threads;
#endif
}

/* Raises (inc) or lowers (dec) this warpgroup's registers per thread to
 * `regs` (a multiple of 8 in [24, 256]): producer warpgroups give theirs to
 * the consumers. sm_90a only; elsewhere nothing. */
template <int regs>
static __device__ __forceinline__ void setmaxnreg_inc() {
    static_assert(regs % 8 == 0 && regs >= 24 && regs <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(regs));
#elif defined(EMU_CUDA_EMU_H)
    ::emu::setmaxnreg(regs, true);
#endif
}
template <int regs>
static __device__ __forceinline__ void setmaxnreg_dec() {
    static_assert(regs % 8 == 0 && regs >= 24 && regs <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(regs));
#elif defined(EMU_CUDA_EMU_H)
    ::emu::setmaxnreg(regs, false);
#endif
}

#endif
