/* The CUDA backend against the CPU backend: every op of kernels/ops.h run on
 * both with the same fresh random inputs (seeded, uniform, never all zeros),
 * with float32 and with bfloat16 activations.
 *
 *   build/gpu/test_cuda_kernels [--quick]      --quick skips the large cases
 *
 * The checks live with their kernel family in tests/kernels/<family>.c
 * (cuda_test_*), the shared helpers in tests/kernels/twin.c; this file runs
 * them in a fixed order (the random streams follow it).
 *
 * Relative error, per output tensor: max_i |cuda_i - cpu_i| divided by
 * max(max_i |cpu_i|, 1e-30). A NaN or infinity on either side fails, and so
 * does a reference that is all zeros (the check would prove nothing).
 * Tolerances (strict <): 1e-5 with fp32 activations (5e-5 for the DGELU
 * epilogue's dpre: tests/kernels/matmul.c), 1e-2 with bf16; float32
 * outputs computed from float32 inputs only (the loss and norm scalars,
 * AdamW's p, m, v) are held to 1e-5 in both (grad_sumsq's double to 1e-12,
 * grad_clip_factor's scalars and AdamW's p, m, v also exactly: the same bits).
 * With bf16 activations the CPU is given the bf16-rounded inputs (exactly
 * what the GPU holds), so only the CUDA kernel's own rounding is measured.
 * Overwritten outputs are poisoned first (0xff bytes: NaN in float32 and in
 * bf16) on both sides; accumulating outputs start from the same random
 * values on both sides, so accumulate-vs-overwrite mistakes show.
 * Prints "ok PRECISION NAME err=E" or "not ok PRECISION NAME - err=E tol=T"
 * per check and a last line "N passed, M failed"; exits 1 if any failed, 2 if the CUDA backend
 * cannot be created (no device: the GPU test runner reads that as "no GPU").
 *
 * Every entry of kernels/ops.h, and the test that runs it:
 *   [x] alloc, free                   all tests
 *   [x] upload, download              cuda_test_memory (round trip), all tests
 *   [x] zero                          cuda_test_memory (a sub-range; the rest untouched)
 *   [x] timer_begin/timer_end_ms      after every CUDA call (a wait)
 *   [x] mem_peak, peak_tflops         cuda_test_memory
 *   [x] destroy                       ops_destroy at the end of each precision
 *   [x] cast_params                   cuda_test_cast_params (fp32 dst != src and dst == src, bf16)
 *   [x] download_floats               cuda_test_download_floats
 *   [x] encoder_forward/backward      cuda_test_encoder (wpe and NULL, dwte/dwpe NULL, vocab_start != 0,
 *                                     tokens in, at the edges of and outside the rank's range, repeats;
 *                                     rows in 16-byte packs and element by element)
 *   [x] position_forward/backward     cuda_test_position (row_start 0 and a row shard; packs and not)
 *   [x] layernorm_forward/backward    cuda_test_layernorm (the backward fused, element by element and
 *                                     in packs, held in registers (4 and 8 a lane) or looped over,
 *                                     over 48 KiB of shared memory, and over its shared memory in
 *                                     three kernels)
 *   [x] matmul_forward/backward       cuda_test_matmul (bias and NULL; dinp NULL, dbias NULL, dw NULL; with dw:
 *                                     the bias gradient from the BGRADA epilogue)
 *   [x] matmul_forward_gelu           cuda_test_matmul_gelu (GPU only: against the CPU's matmul_forward then
 *                                     gelu_forward, and the GPU's; OC divisible by 8: the GELU_AUX_BIAS
 *                                     epilogue, odd OC: the fallback; a second call bitwise the first)
 *   [x] matmul_backward_dgelu         cuda_test_matmul_dgelu (dpre_bias and NULL; C divisible by 8: the DGELU
 *                                     epilogue, DGELU_BGRAD in fp32; odd C: the unfused fallback;
 *                                     under the emulation also which epilogue ran)
 *   [x] (kernels.dw_overlap)          cuda_test_dw_overlap (matmul_backward and _dgelu, each path, with the
 *                                     weight gradient on a second stream: bitwise the calls in turn)
 *   [x] (cuBLASLt plan table)         cuda_test_lt_plans (one heuristic per shape; other k, other
 *                                     alignment: own plan; past the table's size: still right; last)
 *   [x] lmhead_forward/backward       cuda_test_lmhead
 *   [x] attention_forward/backward    cuda_test_attention (p = 0 and 0.2 with head0 != 0),
 *                                     cuda_test_attention_shapes (odd T, 1-3 heads, HS 16 to 128:
 *                                     several tensor-core tiles in bf16; peaked rows, misaligned qkv),
 *                                     cuda_test_attention_backward_tiles (the tensor-core backward's blocks),
 *                                     cuda_test_attention_forward_shapes (the forward's other block shapes
 *                                     and the backward's dq row tiles, kernels/cuda/kernels.h's
 *                                     cuda_attention_forward_shaped and cuda_attention_backward_shaped),
 *                                     cuda_test_attention_wgmma (Hopper's kernels), cuda_test_attention_auto
 *                                     (kernels.attention = auto's choices), cuda_test_attention_fused
 *                                     (the five-product mma.sync backward, cuda_attention_backward_fused)
 *   [x] gelu_forward/backward         cuda_test_gelu (backward also in place), cuda_test_gelu_unaligned,
 *                                     cuda_test_gelu_tails (the exponential's overflow, the largest floats)
 *   [x] bias_residual_add             cuda_test_bias_residual (p = 0 and 0.2; out == x, out == res; rows of
 *                                     72 elements (vector packs) and 13 (element by element))
 *   [x] bias_residual_layernorm       cuda_test_residual_layernorm (against the CPU and bitwise against
 *                                     bias_residual_add then layernorm_forward on the GPU; p = 0 and 0.2;
 *                                     out == x, out == res; C = 72, 768 (packs), 100, 36 (packs in fp32
 *                                     only), 13; without dropout, rows of packs loaded at once (C = 768,
 *                                     1000, 1536); misaligned rows; rows too wide for shared memory)
 *   [x] dropout                       cuda_test_dropout (p = 0 and 0.2; in place), cuda_test_dropout_step
 *                                     (the step read from device memory when the op runs)
 *   [x] bias_backward                 cuda_test_bias_backward (16-byte packs of columns; C = 13: element
 *                                     by element; C = 100: packs in fp32 only; 40000 rows: the finish's
 *                                     staged rounds of row groups)
 *   [x] xent_partial/rescale/finish   cuda_test_xent (padding, vocab_start != 0, targets in and out)
 *   [x] xent_fused                    cuda_test_xent_fused (padding; packed rows and not; bf16 rows staged
 *                                     in shared memory and rows too wide for it)
 *   [x] loss_accumulate, loss_finish  cuda_test_loss (two micro-batches, then the mean over them and DP)
 *   [x] grad_sumsq                    cuda_test_grad_sumsq (spans with gaps, a window cutting tensors)
 *   [x] grad_clip_factor              cuda_test_clip_factor (clipping or not, reduced sum, NaN loss, inf norm)
 *   [x] adamw                         cuda_test_adamw (spans, window, clip factor, not finite: no change;
 *                                     fp32: work == p and work != p; bf16: work != p; runs four
 *                                     elements at a time and one by one, offsets and moments shifted
 *                                     by other than a multiple of 4) */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "tests/kernels/twin.h"
#include "util/dtype.h"
#include "util/err.h"

/* ---- the whole table at one precision ---- */

static void run_large(env *e);

static void run_all(env *e) {
    /* sizes that are multiples of no tile: B*T = 39 rows, C = 72, 3 heads of 24 */
    const int B = 3, T = 13, N = B * T, C = 72, NH = 3, HS = C / NH;
    const tg_dropout none = {0};
    const tg_dropout rows = {0.2f, 1234, 77, 11, 0, 0, NULL};
    const tg_dropout rows_far = {0.2f, 1234, 79, 100000000, 0, 0, NULL}; /* element counters past 2^32 */
    const tg_dropout heads = {0.2f, 1234, 78, 5, 1, 5, NULL};              /* heads 1..3 of 5 */
    const tg_dropout heads_far = {0.2f, 1234, 83, 20000000, 1, 5, NULL};   /* counters past 2^32 */
    const size_t odd = 1001, mid = 100003;

    cuda_test_memory(e);
    cuda_test_cast_params(e, mid);
    cuda_test_download_floats(e, mid);
    cuda_test_encoder(e, B, T, C, 50, 97, 200);
    cuda_test_position(e, 0, N, T, C);
    cuda_test_position(e, 7, 20, T, C);
    cuda_test_encoder(e, 2, 5, 13, 50, 97, 200); /* rows of 13: element by element (72: 16-byte packs) */
    cuda_test_position(e, 3, 10, 5, 13);
    cuda_test_layernorm(e, N, C);
    cuda_test_layernorm(e, 5, 13);    /* no packs; fewer rows than the backward's 8 warps */
    cuda_test_layernorm(e, 7, 100);   /* packs in fp32, not in bf16 */
    cuda_test_layernorm(e, 1001, 40); /* 126 row groups of 8 rows (GROUPS_FILL), the last of 1 */
    cuda_test_layernorm(e, 9, 1000);  /* packs held in registers: 4 a lane in bf16, 8 in fp32 */
    if (scratch_holds(2 * 1600 * sizeof(float))) /* one row group's partials of dw and db */
        cuda_test_layernorm(e, 64, 1600); /* GPT-2 XL's width: the one-pass backward over 48 KiB of shared memory (opted in) */
    if (scratch_holds(2 * 2560 * sizeof(float)))
        cuda_test_layernorm(e, 5, 2560); /* GPT-3 2.7B's width: one pass, the packs looped over (10 a lane in bf16);
                                          * its 160 KiB of column sums fit an A100's shared memory too */
    if (scratch_holds(2 * 4000 * sizeof(float)))
        cuda_test_layernorm(e, 3, 4000); /* the backward's column sums over its shared memory: three kernels */
    cuda_test_matmul(e, N, C, 3 * C);
    cuda_test_matmul(e, N, C, 4 * C);
    cuda_test_matmul(e, N, 4 * C, C);
    cuda_test_matmul_dgelu(e, N, 4 * C, C); /* the MLP's shapes */
    cuda_test_matmul_dgelu(e, 13, 40, 29);  /* odd N and OC, the epilogue */
    cuda_test_matmul_dgelu(e, 13, 29, 41);  /* odd C: the fallback */
    cuda_test_matmul_gelu(e, N, C, 4 * C);  /* the MLP's c_fc: the GELU_AUX_BIAS epilogue */
    cuda_test_matmul_gelu(e, 13, 40, 29);   /* odd OC: the fallback */
    cuda_test_dw_overlap(e);                /* kernels.dw_overlap: the same bits */
    cuda_test_lmhead(e, N, C, 1000);
    cuda_test_attention(e, B, T, NH, HS, none);
    cuda_test_attention(e, B, T, NH, HS, heads);
    cuda_test_attention(e, B, T, NH, HS, heads_far);
    cuda_test_attention_shapes(e);
    cuda_test_attention_backward_tiles(e);
    cuda_test_attention_forward_shapes(e);
    cuda_test_attention_fused(e);
    cuda_test_gelu(e, (size_t)N * 4 * C);
    cuda_test_gelu(e, odd);
    cuda_test_gelu_unaligned(e, mid);
    cuda_test_gelu_tails(e);
    cuda_test_bias_residual(e, N, C, none);
    cuda_test_bias_residual(e, N, C, rows);
    cuda_test_bias_residual(e, N, C, rows_far);
    cuda_test_dropout(e, N, C, none);
    cuda_test_dropout(e, N, C, rows);
    cuda_test_bias_residual(e, 7, 13, rows); /* rows of 13: no 16-byte packs */
    cuda_test_dropout(e, 7, 13, rows);
    cuda_test_bias_backward(e, N, C);
    cuda_test_bias_backward(e, N, 4 * C);
    cuda_test_bias_backward(e, 7, 13);  /* no packs */
    cuda_test_bias_backward(e, 5, 100); /* packs in fp32, not in bf16 */
    cuda_test_bias_backward(e, 40000, 40); /* 625 row groups: the finish stages them in three rounds */
    cuda_test_residual_layernorm(e, N, C, none, 0);
    cuda_test_residual_layernorm(e, N, C, rows, 0);
    cuda_test_residual_layernorm(e, N, C, rows_far, 0);
    cuda_test_residual_layernorm(e, 7, 100, rows, 0); /* packs in fp32, not in bf16 */
    cuda_test_residual_layernorm(e, 7, 36, none, 0);  /* the same */
    cuda_test_residual_layernorm(e, 5, 13, rows, 0);  /* no packs */
    cuda_test_residual_layernorm(e, 13, 768, rows, 0); /* 8 rows per block: a partial last block */
    /* without dropout, rows of up to 8 packs a lane are loaded at once: 4 (bf16) and 8 (fp32) a lane, the last
     * lanes' last pack past the row (C 1000); 6 of 8 (bf16) and looped (fp32, 12 a lane) at C 1536 */
    cuda_test_residual_layernorm(e, 13, 768, none, 0);
    cuda_test_residual_layernorm(e, 9, 1000, none, 0);
    cuda_test_residual_layernorm(e, 9, 1536, none, 0);
    cuda_test_residual_layernorm(e, 7, 72, rows, 1);  /* misaligned rows: element by element */
    cuda_test_residual_layernorm(e, 3, 12290, rows, 0); /* rows over the shared memory: the unfused kernels */
    cuda_test_xent(e, N, 1000, 997, 2000); /* rows of whole 16-byte packs */
    cuda_test_xent(e, N, 1000, 1000, 0);
    cuda_test_xent(e, 5, 1001, 998, 1001); /* element by element */
    cuda_test_xent_fused(e, N, 1000, 997); /* rows of whole 16-byte packs */
    cuda_test_xent_fused(e, 5, 1001, 1001); /* element by element */
    cuda_test_xent_fused(e, 3, 20000, 19990); /* bf16 staged, 4 or 5 packs a thread: running maxima that rise */
    cuda_test_xent_fused(e, 2, 40000, 39999); /* bf16 staged, 9 or 10 packs a thread: copies issued while adding */
    cuda_test_xent_fused(e, 2, 116232, 116000); /* a bf16 row over 227 KB of shared memory: the kernel that reads twice */
    cuda_test_loss(e, N);
    cuda_test_loss(e, (int)odd);
    cuda_test_grad_sumsq(e, 1, false);
    cuda_test_grad_sumsq(e, 1, true);
    cuda_test_grad_sumsq(e, 37, true);
    cuda_test_clip_factor(e);
    if (e->act == TG_F32) cuda_test_adamw(e, 37, 1);
    cuda_test_adamw(e, 1, 0);
    cuda_test_adamw(e, 37, 0);
    cuda_test_dropout_step(e, N, C); /* after the others: their random inputs stay as they were */
    cuda_test_grad_writes_all(e);    /* acc false: every parameter gradient written over NaN */
    if (!e->quick) run_large(e);
    /* Hopper's kernels (TMA, mbarriers, wgmma) after every other op's checks: the first GPU to run
       them may deadlock one, and the sitting's timeout then keeps the lines of the checks before */
    cuda_test_attention_auto(e);
    cuda_test_attention_wgmma(e);
    cuda_test_lt_plans(e); /* last: it fills the backend's plan table */
}

/* larger cases: GEMM tiling, many blocks of partial sums, long rows */
static void run_large(env *e) {
    const tg_dropout none = {0};
    const size_t big = ((size_t)3 << 20) + 5;
    printf("# %s: large cases\n", tg_dtype_name(e->act));
    cuda_test_encoder(e, 8, 256, 768, 6288, 6288, 50257);
    cuda_test_position(e, 512, 2048, 1024, 768);
    cuda_test_layernorm(e, 1024, 768);
    cuda_test_layernorm(e, 16384, 768);
    cuda_test_matmul(e, 1024, 768, 3 * 768);
    cuda_test_matmul(e, 1024, 4 * 768, 768);
    cuda_test_matmul_dgelu(e, 1024, 4 * 768, 768);
    cuda_test_matmul_gelu(e, 1024, 768, 4 * 768);
    cuda_test_lmhead(e, 1024, 768, 5000);
    /* a long sequence (16 key tiles of 64) on 2 x 2 heads, where 2 x 12
     * made these 4 checks about half of the emulated run's time */
    cuda_test_attention(e, 2, 1000, 2, 64, none);
    cuda_test_attention(e, 2, 1000, 2, 64, (tg_dropout){0.2f, 1234, 80, 1000000, 12, 48, NULL});
    cuda_test_gelu(e, big);
    cuda_test_bias_residual(e, 1024, 768, (tg_dropout){0.2f, 1234, 81, 3000000, 0, 0, NULL});
    cuda_test_dropout(e, 1024, 3072, (tg_dropout){0.2f, 1234, 82, 2000000, 0, 0, NULL});
    cuda_test_bias_backward(e, 16384, 3072);
    cuda_test_residual_layernorm(e, 1024, 768, (tg_dropout){0.2f, 1234, 84, 3000000, 0, 0, NULL}, 0);
    cuda_test_residual_layernorm(e, 3, 6144, none, 0); /* the widest fused row in fp32: one per block */
    cuda_test_xent(e, 257, 50304, 50257, 0);
    cuda_test_xent_fused(e, 257, 50304, 50257);
    cuda_test_xent(e, 129, 6288, 6241, 44016); /* the last rank of TP = 8 over GPT-2's vocabulary */
    cuda_test_loss(e, 16384);
    cuda_test_grad_sumsq(e, 3001, true);
    cuda_test_cast_params(e, big);
    cuda_test_adamw(e, 3001, 0);
}

int main(int argc, char **argv) {
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else {
            fprintf(stderr, "usage: %s [--quick]   (--quick skips the large cases)\n", argv[0]);
            return 1; /* 2 means "no device" to tests/gpu/run_gpu.sh */
        }
    }
    const tg_dtype precisions[2] = {TG_F32, TG_BF16};
    int passed = 0, failed = 0;
    for (int i = 0; i < 2; i++) {
        tg_err err;
        err.msg[0] = '\0';
        tg_ops *gpu = ops_cuda_create(0, precisions[i], &err);
        if (!gpu) {
            if (i == 0) { /* no usable device at all */
                printf("test_cuda_kernels: cannot create the CUDA backend: %s\n", err.msg);
                return 2;
            }
            printf("not ok %s ops_cuda_create - (%s)\n", tg_dtype_name(precisions[i]), err.msg);
            failed++;
            continue;
        }
        env e = {ops_cpu(), gpu, precisions[i], precisions[i] == TG_BF16 ? TOL_BF16 : TOL_F32, 1, quick, 0, 0};
        printf("# %s activations on %s\n", tg_dtype_name(e.act), gpu->device);
        if (gpu->act != precisions[i]) {
            char detail[96];
            snprintf(detail, sizeof detail, "(asked for %s, the backend says %s)", tg_dtype_name(precisions[i]),
                     tg_dtype_name(gpu->act));
            check_true(&e, 0, "ops_cuda_create_act", detail);
        }
        run_all(&e);
        ops_destroy(gpu);
        passed += e.passed;
        failed += e.failed;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
