/* Clocks for a kernel's phase profile (kernels/cuda/block_profile.h), read
 * only by instances built with it: bench_attention's profile rows, which
 * say where a block's time goes where Nsight Compute is not at hand.
 *
 *  - bc_cycles(): the SM's cycle counter (clock64), for the phases of one
 *    warpgroup: cheap (one CS2R), and the phases' sum is the warpgroup's
 *    time on its SM.
 *  - bc_global_ns(): %globaltimer, the device's nanoseconds, comparable
 *    across SMs, for when blocks start and end.
 *  - bc_smid(): the SM the block runs on.
 * Under the emulation the two clocks are the host's monotonic nanoseconds
 * and the SM is the block's index modulo BC_EMU_SMS (blocks run in turn
 * there: the figures only exercise the records). */
#ifndef KERNELS_CUDA_BLOCK_CLOCK_CUH
#define KERNELS_CUDA_BLOCK_CLOCK_CUH

#include <stdint.h>

#include "kernels/cuda/block_profile.h"
#if defined(EMU_CUDA_EMU_H)
#include <time.h>
#endif

#define BC_EMU_SMS 4

#if defined(EMU_CUDA_EMU_H)
static inline uint64_t bc_emu_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#endif

static __device__ __forceinline__ uint64_t bc_cycles() {
#if defined(__CUDA_ARCH__)
    return (uint64_t)clock64();
#elif defined(EMU_CUDA_EMU_H)
    return bc_emu_ns();
#else
    return 0;
#endif
}

static __device__ __forceinline__ uint64_t bc_global_ns() {
#if defined(__CUDA_ARCH__)
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#elif defined(EMU_CUDA_EMU_H)
    return bc_emu_ns();
#else
    return 0;
#endif
}

static __device__ __forceinline__ uint32_t bc_smid() {
#if defined(__CUDA_ARCH__)
    uint32_t id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    return id;
#elif defined(EMU_CUDA_EMU_H)
    return (blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)) % BC_EMU_SMS;
#else
    return 0;
#endif
}

/* A warpgroup's cycles by phase: begin(rec, tiles) starts the clock at
 * the block's record rec (thread 0 writes its start, SM and tiles);
 * lap(k) adds the cycles since the last lap (or begin) to phase k;
 * record(part) writes them as part `part` of the record. With ON false
 * every call is empty, so the instances every run takes carry no clock
 * reads and no registers. */
template <bool ON, int PHASES>
struct bc_laps {
    static_assert(PHASES <= CUDA_PROFILE_PHASES, "a record holds CUDA_PROFILE_PHASES phases a part");
    uint64_t last;
    uint32_t cycles[PHASES];
    cuda_block_profile *rec;
    __device__ __forceinline__ void begin(cuda_block_profile *block_rec, uint32_t tiles) {
        if constexpr (ON) {
            last = bc_cycles();
            rec = block_rec;
#pragma unroll
            for (int k = 0; k < PHASES; k++) cycles[k] = 0;
            if (threadIdx.x == 0) {
                rec->start_cycles = last;
                rec->start_ns = bc_global_ns();
                rec->smid = bc_smid();
                rec->tiles = tiles;
            }
        }
    }
    __device__ __forceinline__ void lap(int phase) {
        if constexpr (ON) {
            const uint64_t now = bc_cycles();
            cycles[phase] += (uint32_t)(now - last);
            last = now;
        }
    }
    __device__ __forceinline__ void record(int part) const {
        if constexpr (ON) {
#pragma unroll
            for (int k = 0; k < PHASES; k++) rec->cycles[part][k] = cycles[k];
            rec->end_cycles[part] = bc_cycles();
            rec->end_ns[part] = bc_global_ns();
        }
    }
};

#endif
