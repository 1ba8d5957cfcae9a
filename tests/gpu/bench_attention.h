/* What tests/gpu/bench_attention.c shares with its profile rows
 * (bench_attention_profile.c): a case, its device buffers, and the check
 * of a result against the tuned shape's. */
#ifndef TESTS_GPU_BENCH_ATTENTION_H
#define TESTS_GPU_BENCH_ATTENTION_H

#include <stddef.h>

#include "kernels/ops.h"

/* The tolerance of a result whose bits may differ from the tuned shape's,
 * against its largest value. */
#define SHAPE_TOL 2e-2

typedef struct {
    int B, NH, T, HS;
} attn_case;

/* The device buffers of one case. */
typedef struct {
    void *qkv, *out, *dout, *dqkv, *tuned_out, *tuned_dqkv;
    float *lse;
    size_t n_qkv, n_out, n_lse;
} attn_buffers;

/* The check of a shape's n bf16 results (got) against the tuned shape's
 * (want), both device memory: into `verdict` ("same bits", "err=E", or
 * "not ok ..."); 1 when it passed. */
int check_shape(tg_o o, const void *got_dev, const void *want_dev, size_t n, int want_same_bits, char *verdict, size_t len);

/* The TMA forward's and the wgmma backward's phase profiles: '# profile'
 * lines (tests/gpu/block_profile.h), or one saying there is no profiled
 * instance here. Each returns its failed checks. */
int profile_forward(tg_o o, const attn_case *c, const attn_buffers *buf);
int profile_backward(tg_o o, const attn_case *c, const attn_buffers *buf);

#endif
