/* The attention backward on Hopper's warpgroup MMA (flash_bwd_wgmma.cu),
 * as flash_bwd.cu's rounds call it: D (rowsum(dout * out)) of the round's
 * pairs p0 .. p0 + np already in. */
#ifndef KERNELS_CUDA_FLASH_BWD_WGMMA_CUH
#define KERNELS_CUDA_FLASH_BWD_WGMMA_CUH

#include <cuda_bf16.h>

#include "kernels/cuda/block_profile.h"
#include "kernels/cuda/flash.cuh"

/* Whether the wgmma backward has an instance for this run: a device of
 * compute capability 9.0, head size 64, 96 or 128, no dropout, 16-byte aligned
 * tensors (bf16 activations: the caller's type). */
bool flash_bwd_wgmma_fits(const cuda_ctx *ctx, const void *dqkv, const void *dout, const void *qkv, int HS, tg_dropout drop);

/* The float32 scratch one pair's dq shares take at length T and head size
 * HS (dq_slots). */
size_t flash_bwd_wgmma_slot_bytes(int T, int HS);

/* The forms of the kernel with dq_slots, beside every run's (BW_DQ_SLOTS:
 * K and V held in registers at head size 64, the slots summed by a second
 * kernel), for bench_attention to time against it; the same results:
 *   BW_DQ_KV_SHARED: the score products read K and V from shared memory at
 *     head size 64 too;
 *   BW_DQ_SUMMED: each query tile's slots summed in the kernel, by the
 *     last of its key blocks to finish (flash_bwd_wgmma_sum_bytes of
 *     scratch a pair);
 *   BW_DQ_TWO_STAGES: two stages of Q and dout where every run's has
 *     three (head sizes 64 and 96; at 128 every run's has two). */
typedef enum { BW_DQ_SLOTS, BW_DQ_KV_SHARED, BW_DQ_SUMMED, BW_DQ_TWO_STAGES } bw_dq_form;

/* The scratch bytes a pair takes with BW_DQ_SUMMED: its slots, then its
 * arrival counts. */
size_t flash_bwd_wgmma_sum_bytes(int T, int HS);

/* dk and dv of pairs p0 .. p0 + np (lse: every pair's rows; D: the
 * round's, pair j at D + j T) into dqkv's k and v columns, and with
 * dq_slots (np times flash_bwd_wgmma_slot_bytes(T, HS) of scratch, or
 * flash_bwd_wgmma_sum_bytes(T, HS) for BW_DQ_SUMMED, 256-byte aligned) dq
 * into its q columns too, in `form`; with NULL, dq is the caller's. 1 when
 * launched (or nothing to do), 0 (nothing run) where flash_bwd_wgmma_fits
 * is false. */
int flash_bwd_wgmma(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv, const float *lse,
                    const float *D, float *dq_slots, int p0, int np, int T, int NH, int HS, float scale, tg_dropout drop,
                    bw_dq_form form);

/* flash_bwd_wgmma in every run's form (BW_DQ_SLOTS) with dq_slots, each
 * block's phase profile into records (block_profile.h; the block of key
 * tile kb of pair p at p ceil(T / 128) + kb): bench_attention's profile.
 * 1 when launched, 0 (nothing run) at head sizes other than
 * flash_bwd_wgmma_profile_built's (64 and 96), without dq_slots, or where
 * flash_bwd_wgmma_fits is false. */
int flash_bwd_wgmma_profiled(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv,
                             const float *lse, const float *D, float *dq_slots, int p0, int np, int T, int NH, int HS, float scale,
                             cuda_block_profile *records);
int flash_bwd_wgmma_profile_built(int HS);

/* flash_bwd_wgmma in every run's form (BW_DQ_SLOTS, dq_slots required) as
 * a persistent kernel (flash_bwd_wgmma_persist.cu): at most `blocks`
 * blocks (<= 0: one an SM), each over its share of the round's key
 * blocks; the same bits. 1 when launched (or nothing to do), 0 (nothing
 * run) at head sizes other than 64, without dq_slots, or where
 * flash_bwd_wgmma_fits is false. bench_attention's row only. */
int flash_bwd_wgmma_persistent(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv,
                               const float *lse, const float *D, float *dq_slots, int p0, int np, int T, int NH, int HS, float scale,
                               int blocks);

#endif
