/* The attention backward as one mma.sync kernel of five products a tile
 * (flash_bwd_fused.cu), as flash_bwd.cu's rounds call it: D
 * (rowsum(dout * out)) of the round's pairs p0 .. p0 + np already in. */
#ifndef KERNELS_CUDA_FLASH_BWD_FUSED_CUH
#define KERNELS_CUDA_FLASH_BWD_FUSED_CUH

#include <cuda_bf16.h>

#include "kernels/cuda/flash.cuh"

/* Whether the fused backward is built for head size HS (64, 96 and 128,
 * the benchmarks'; any device with bf16 tensor cores). */
bool flash_bwd_fused_built(int HS);

/* The float32 scratch one pair's dq shares take at length T and head size
 * HS (dq_slots.cuh's 64-key slots). */
size_t flash_bwd_fused_slot_bytes(int T, int HS);

/* dq, dk and dv of pairs p0 .. p0 + np without dropout (lse: every
 * pair's rows; D: the round's, pair j at D + j T), dq through dq_slots
 * (np times flash_bwd_fused_slot_bytes(T, HS), 16-byte aligned). The
 * caller checked flash_bwd_fused_built and the tensors' 16-byte alignment. */
void flash_bwd_fused(cuda_ctx *ctx, __nv_bfloat16 *dqkv, const __nv_bfloat16 *dout, const __nv_bfloat16 *qkv, const float *lse,
                     const float *D, float *dq_slots, int p0, int np, int T, int NH, int HS, float scale);

#endif
