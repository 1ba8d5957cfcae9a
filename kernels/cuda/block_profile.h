/* One block's record of a kernel's phase profile (block_clock.cuh writes
 * it on the device; tests/gpu/block_profile.c sums the records up for
 * bench_attention). Plain C, so that the host's C reads what the
 * kernels write.
 *
 * A block's warpgroups are its parts (the TMA forward's: the producer,
 * then the two consumers). Each part counts its SM cycles by phase from
 * the kernel's entry to its own end, so the phases of a part add up to
 * its time on the SM; the phases' names are the kernel's
 * (cuda_attention_*_phase). Times across SMs are %globaltimer's, which
 * may step by as much as a microsecond; those on one SM (a block's start
 * and end, the gaps between its blocks) are its cycle counter's. */
#ifndef KERNELS_CUDA_BLOCK_PROFILE_H
#define KERNELS_CUDA_BLOCK_PROFILE_H

#include <stdint.h>

#define CUDA_PROFILE_PARTS 3
#define CUDA_PROFILE_PHASES 10

typedef struct cuda_block_profile {
    uint64_t start_ns;                       /* %globaltimer at the block's entry (thread 0) */
    uint64_t end_ns[CUDA_PROFILE_PARTS];     /* and at each part's end */
    uint64_t start_cycles;                   /* the SM's clock (clock64) at the block's entry */
    uint64_t end_cycles[CUDA_PROFILE_PARTS]; /* and at each part's end */
    uint32_t smid;                           /* the SM it ran on */
    uint32_t tiles;                      /* its work in the kernel's unit (the forward's: key tiles) */
    uint32_t cycles[CUDA_PROFILE_PARTS][CUDA_PROFILE_PHASES];
} cuda_block_profile;

#endif
