/* A kernel's phase profile summed up (kernels/cuda/block_profile.h's
 * records, one a block): how the blocks filled the SMs, a block's cycles
 * as a fixed part plus a part a tile, and where each part's cycles went.
 * bench_attention prints it for the TMA forward; plain C, so that a unit
 * test checks the sums on made-up records (tests/t_block_profile.sh). */
#ifndef TESTS_GPU_BLOCK_PROFILE_H
#define TESTS_GPU_BLOCK_PROFILE_H

#include <stdio.h>

#include "kernels/cuda/block_profile.h"

typedef struct {
    int blocks, sms;      /* records summed, distinct SMs among them */
    int missing;          /* records no block wrote whole (no start, or a compute part with no end) */
    int producer_missing; /* summed records whose part 0 has no end (a kernel with a producer: it wrote none) */
    double tiles;         /* the blocks' tiles */
    double span_ns;       /* first start to last end, by %globaltimer */
    double timer_step_ns; /* the closest two distinct %globaltimer readings: a multiple of its step */
    double held;          /* on each SM from its first block's start to its last's end, the share a block held it (cycles) */
    double gap_cycles;    /* median on an SM from a block's end to the next one's start (0: none) */
    double clock_ghz;     /* the blocks' cycles over their nanoseconds */
    double fixed, per_tile; /* a block's cycles = fixed + per_tile x tiles (least squares) */
    double cycles[CUDA_PROFILE_PARTS][CUDA_PROFILE_PHASES]; /* summed over the blocks */
    double part_cycles[CUDA_PROFILE_PARTS];
} block_profile_sum;

/* The consumers: parts 1 .. CUDA_PROFILE_PARTS - 1; a block's end and
 * cycles are its last consumer's. */
void block_profile_summarize(const cuda_block_profile *recs, int n, block_profile_sum *sum);

/* A phase's name, NULL past the part's last (the kernel's table). */
typedef const char *(*block_phase_name)(int part, int phase);

/* '#' lines: label, then the sums (per tile: each phase's cycles over the
 * blocks' tiles, and its share of the part's time; the producer's line
 * only where part 0 has phases). */
void block_profile_print(FILE *f, const char *label, const block_profile_sum *sum, block_phase_name name);

#endif
