/* Kernel family: the fused mma.sync attention backward (kernels.h's
 * cuda_attention_backward_fused, kernels/cuda/flash_bwd_fused.cuh: five
 * products a tile, dq's shares through float32 slots summed in a fixed
 * order). No CPU part: the backward's CPU checks are attention.c's. With
 * CUDA (or the emulation, tests/emu) against the CPU twin, dk and dv bit
 * for bit against attention_backward (the same products in the same
 * order), dq within the tolerance of its, the same bits run after run and
 * round by round, and what it has no instance for refused. */
#include <stdio.h>
#include <stdlib.h>

#include "tests/kernels/check.h"

#ifdef TG_CUDA
#include "kernels/cuda/kernels.h"
#include "tests/kernels/twin.h"

/* The scratch a round of one pair takes: its D (T floats), 256 bytes to
 * align the slots, and one 64 x HS float32 slot per 64-key block and query
 * tile at or below the diagonal (n (n + 1) / 2 for n query tiles). Worked
 * out here from the layout dq_slots.cuh describes, not taken from
 * it. */
static size_t fused_pair_bytes(int T, int HS) {
    const size_t n = (size_t)(T + 63) / 64;
    return (size_t)T * sizeof(float) + 256 + n * (n + 1) / 2 * 64 * (size_t)HS * sizeof(float);
}

/* One case, from the CPU forward's out and lse. Where the kernel scratch
 * (shrunk under the emulation's EMU_SCRATCH_BYTES) cannot hold one pair's
 * round, the call must refuse and run nothing. */
static void fused_case(env *e, int B, int T, int NH, int HS, float amp) {
    attn_bwd a = attn_bwd_inputs(e, B, T, NH, HS, amp);
    const size_t bytes = a.dqkv.n * gpu_elem(e, ACT);
    char shape[96], name[256], detail[64];
    snprintf(shape, sizeof shape, "B=%d T=%d NH=%d HS=%d amp=%g", B, T, NH, HS, (double)amp);
    /* the two kernels every run takes */
    e->gpu->attention_backward(e->gpu, a.dqkv.g, a.dout.g, a.out_r.g, a.qkv.g, a.lse_r.g, B, T, NH, HS, (tg_dropout){0});
    void *two = gpu_bytes(e, a.dqkv);
    poison(e->gpu, a.dqkv.g, bytes);
    const int ran = cuda_attention_backward_fused(e->gpu, a.dqkv.g, a.dout.g, a.out_r.g, a.qkv.g, a.lse_r.g, B, T, NH, HS);
    sync_gpu(e);
    if (!scratch_holds(fused_pair_bytes(T, HS))) {
        snprintf(name, sizeof name, "attention_backward_fused refuses a scratch without one pair's slots, nothing written: %s",
                 shape);
        void *got = gpu_bytes(e, a.dqkv);
        int untouched = 1;
        for (size_t i = 0; i < bytes; i++) untouched = untouched && ((const unsigned char *)got)[i] == 0xff;
        check_true(e, ran == 0 && untouched, name, "");
        free(got);
    } else {
        snprintf(name, sizeof name, "attention_backward_fused runs %s", shape);
        check_true(e, ran == 1, name, "");
        check(e, a.dqkv, e->tol, "attention_backward_fused dqkv %s", shape);
        void *got = gpu_bytes(e, a.dqkv);
        snprintf(name, sizeof name, "attention_backward_fused dk, dv: attention_backward's bits: %s", shape);
        check_true(e, attn_bwd_same_kv(&a, got, two), name, "");
        /* dq: the same dS and K, summed in another order (per 64 keys, then over the blocks) */
        const double diff = bf16_rel_diff(got, two, a.dqkv.n);
        snprintf(detail, sizeof detail, "err=%.3g tol=%.3g", diff, (double)e->tol);
        snprintf(name, sizeof name, "attention_backward_fused dqkv within the tolerance of attention_backward's: %s", shape);
        check_true(e, diff <= e->tol, name, detail);
        /* deterministic: no atomics, every sum in a fixed order */
        poison(e->gpu, a.dqkv.g, bytes);
        const int again = cuda_attention_backward_fused(e->gpu, a.dqkv.g, a.dout.g, a.out_r.g, a.qkv.g, a.lse_r.g, B, T, NH, HS);
        snprintf(name, sizeof name, "attention_backward_fused run twice, the same bits: %s", shape);
        check_true(e, again == 1 && gpu_holds(e, a.dqkv, got), name, "");
        free(got);
    }
    free(two);
    attn_bwd_free(e, &a);
}

/* Partial tiles (T = 5, 77, 130), several pairs, the diagonal tile's
 * masked keys, T = 300 (five query tiles, so each block's later tiles take
 * the other buffer of both parities), at head sizes 64, 96 (the 1.2B
 * model's) and 128 (V staged, not held); then the refusals. */
void cuda_test_attention_fused(env *e) {
    NEED(e, attention_backward);
    if (e->act != TG_BF16) {
        check_true(e, cuda_attention_backward_fused(e->gpu, NULL, NULL, NULL, NULL, NULL, 1, 1, 1, 64) == 0,
                   "attention_backward_fused refuses float32 activations", "");
        return;
    }
    fused_case(e, 1, 5, 1, 64, 1.0f);
    fused_case(e, 2, 77, 2, 64, 1.0f);
    fused_case(e, 1, 200, 2, 64, 2.0f);
    fused_case(e, 1, 300, 1, 64, 1.0f);
    fused_case(e, 1, 130, 2, 96, 2.0f);
    fused_case(e, 1, 150, 1, 128, 2.0f);
    if (!e->quick) {
        fused_case(e, 2, 256, 3, 64, 1.0f);
        fused_case(e, 1, 300, 1, 96, 1.0f);
        fused_case(e, 1, 77, 2, 128, 4.0f);
    }
    check_true(e, cuda_attention_backward_fused(e->gpu, NULL, NULL, NULL, NULL, NULL, 1, 1, 1, 80) == 0,
               "attention_backward_fused: no instance at HS=80", "");
    check_true(e, cuda_attention_backward_fused(e->gpu, (void *)2, NULL, NULL, NULL, NULL, 1, 1, 1, 64) == 0,
               "attention_backward_fused: no instance for tensors not 16-byte aligned", "");
}
#else
/* The CPU build has no fused backward to check. */
typedef int attention_fused_cpu_empty;
#endif
