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
    int blocks, sms;  /* records summed, distinct SMs among them */
    int missing;      /* records no block wrote (a zero start, or an end before it) */
    double tiles;     /* the blocks' tiles */
    double span_ns;   /* first start to last end */
    double held;      /* the blocks' time over sms x span: how full the SMs were kept */
    double gap_ns;    /* median time on an SM from a block's end to the next one's start (0: none) */
    double clock_ghz; /* the consumers' cycles over their nanoseconds */
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
