/* The CUDA backend's launchers: each matches its slot in kernels/ops.h (same
 * name without the cuda_ prefix, same documentation) and dispatches on
 * o->act (bf16 or fp32 activations). Every launcher only enqueues work on
 * cuda_ctx_of(o)->stream; none synchronizes. One kernel family per file:
 *   encoder.cu    encoder_forward/backward, position_forward/backward
 *   layernorm.cu  layernorm_forward/backward
 *   gelu.cu       gelu_forward/backward
 *   residual.cu   bias_residual_add, dropout, bias_backward
 *   residual_ln.cu bias_residual_layernorm (residual.cuh and layernorm.cuh shared with the two above)
 *   step_stats.cu loss_accumulate, loss_finish, grad_sumsq, grad_clip_factor
 *   optimizer.cu  adamw (multi-tensor), cast_params, to_float
 *   matmul.cu     matmul_forward(_gelu)/backward, matmul_backward_dgelu, lmhead_forward/backward (cuBLASLt)
 *   lt_plan.cu    the cuBLASLt products under matmul.cu, their plans kept per shape (lt_plan.h)
 *   flash_fwd.cu  attention_forward (fused, causal; flash.cuh shared), and its other block shapes for tuning
 *   flash_bwd.cu  attention_backward
 *   xent.cu       xent_partial, xent_rescale, xent_finish, xent_fused
 *   graph.cu      graph_capture_begin/end, graph_launch, graph_release (host code: the step as a CUDA graph)
 *   arch_probe.cu cuda_sm90a_code (cuda_ctx.h): whether the code the device runs has sm_90a's features */
#ifndef KERNELS_CUDA_KERNELS_H
#define KERNELS_CUDA_KERNELS_H

#include "kernels/ops.h"
#include "kernels/cuda/block_profile.h"

#ifdef __cplusplus
extern "C" {
#endif

int cuda_graph_capture_begin(tg_o o, tg_err *e);
int cuda_graph_capture_end(tg_o o, tg_err *e);
int cuda_graph_launch(tg_o o, tg_err *e);
void cuda_graph_release(tg_o o);
void cuda_graphs_drop(void *ctx); /* comm_memory.drop_graphs: ctx is the cuda_ctx */

void cuda_encoder_forward(tg_o o, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T, int C,
                          int vocab_start, int vocab_local);
void cuda_encoder_backward(tg_o o, float *dwte, float *dwpe, const void *dout, const int32_t *tokens, int B, int T, int C,
                           int vocab_start, int vocab_local);
void cuda_position_forward(tg_o o, void *out, const void *wpe, int row_start, int N, int T, int C);
void cuda_position_backward(tg_o o, float *dwpe, const void *dout, int row_start, int N, int T, int C, bool acc);

void cuda_layernorm_forward(tg_o o, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b, int N,
                            int C);
void cuda_layernorm_backward(tg_o o, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w,
                             const float *mean, const float *rstd, int N, int C, bool dacc, bool acc);

void cuda_gelu_forward(tg_o o, void *out, const void *inp, size_t n);
void cuda_gelu_backward(tg_o o, void *dinp, const void *inp, const void *dout, size_t n);

void cuda_bias_residual_add(tg_o o, void *out, const void *x, const void *bias, const void *res, int N, int C,
                            tg_dropout drop);
void cuda_bias_residual_layernorm(tg_o o, void *out, void *ln_out, float *mean, float *rstd, const void *x, const void *bias,
                                  const void *res, const void *w, const void *b, int N, int C, tg_dropout drop);
void cuda_dropout(tg_o o, void *out, const void *in, int N, int C, tg_dropout drop);
void cuda_bias_backward(tg_o o, float *dbias, const void *dout, int N, int C, bool acc);
/* The bytes of the kernel scratch, from its start, that cuda_bias_backward
 * of N rows of C columns writes (its partials), so that a caller can run it
 * beside other work on the scratch's far end (matmul.cu). */
size_t cuda_bias_backward_scratch(tg_o o, int N, int C);

void cuda_xent_fused(tg_o o, float *losses, void *logits, const int32_t *targets, int N, int V, int n_real, float dloss);
void cuda_loss_accumulate(tg_o o, tg_step_stats *s, const float *losses, int N);
void cuda_loss_finish(tg_o o, tg_step_stats *s, int n_micro, float divisor);
void cuda_grad_sumsq(tg_o o, tg_step_stats *s, const float *g, const tg_spans *spans, int exact);
void cuda_grad_clip_factor(tg_o o, tg_step_stats *s, int reduced, double max_norm);
void cuda_adamw(tg_o o, float *p, void *work, const float *g, float *m, float *v, const tg_spans *spans,
                const tg_adamw_args *a, const tg_step_stats *s);
void cuda_cast_params(tg_o o, void *dst, const float *src, size_t n);
/* dst[n] float32 (device) = src[n] activation type (device). */
void cuda_to_float(tg_o o, float *dst, const void *src, size_t n);

void cuda_matmul_forward(tg_o o, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC);
void cuda_matmul_forward_gelu(tg_o o, void *out, void *pre, const void *inp, const void *w, const void *bias, int N, int C,
                              int OC);
void cuda_matmul_backward(tg_o o, void *dinp, float *dw, float *dbias, const void *dout, const void *inp, const void *w, int N,
                          int C, int OC, bool acc);
void cuda_matmul_backward_dgelu(tg_o o, void *dpre, float *dpre_bias, float *dw, const void *dout, const void *inp,
                                const void *w, const void *pre, int N, int C, int OC, bool acc);
void cuda_lmhead_forward(tg_o o, void *logits, const void *x, const void *wte, int N, int C, int V);
void cuda_lmhead_backward(tg_o o, void *dx, float *dwte, const void *dlogits, const void *x, const void *wte, int N, int C,
                          int V, bool acc);

void cuda_attention_forward(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, tg_dropout drop);
void cuda_attention_backward(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B,
                             int T, int NH, int HS, tg_dropout drop);

/* The order in which the tensor-core attention's blocks are launched
 * (kernels/cuda/flash.cuh's fl_grid; no order changes any bits): pairs
 * along x and their tiles along y, longest first (every run's); the tiles
 * along x, pairs along y (the order before c30e2f3); groups of `group`
 * consecutive pairs, each group's tiles longest first, with group 0
 * meaning cuda_flash_l2_group's (their K and V within half the L2 of a
 * 50 MiB card). For tuning: the forward's _shaped entry point below. */
enum { CUDA_FLASH_PAIRS_FIRST, CUDA_FLASH_TILES_FIRST, CUDA_FLASH_L2_GROUPS, CUDA_FLASH_ORDERS };
typedef struct cuda_flash_order {
    int order, group;
} cuda_flash_order;
/* "pairs first", "tiles first", "L2 groups"; NULL for another number. */
const char *cuda_flash_order_name(int order);
/* The pairs of an L2 group at T and head size HS in bf16. */
int cuda_flash_l2_group(int T, int HS);

/* A block shape of the tensor-core attention forward (bf16, head sizes that
 * are multiples of 16): 16-row query tiles per warp (4 warps a block),
 * keys per staged K and V tile, whether the warp's Q fragments are read
 * from shared memory at each use (else held in registers), the blocks
 * per SM its registers are budgeted for, and whether the next key tile's
 * scores are issued before this tile's softmax (s_ahead). */
typedef struct cuda_flash_shape {
    int row_tiles, keys, q_shared, blocks_per_sm, s_ahead;
} cuda_flash_shape;
/* For tuning (tests/gpu/bench_attention.c): the shapes built for head size
 * HS, the one every run takes first (none for most head sizes). Writes at
 * most max of them; returns how many there are. */
int cuda_attention_forward_shapes(int HS, cuda_flash_shape *shapes, int max);
/* attention_forward without dropout in shape k of that list, its blocks
 * in `order`: 1, or 0 (nothing run) when the list has no shape k, the
 * order is not one of the above or the activations are not bf16. The
 * result has the bits of shape 0's in any order wherever the two have the
 * same keys per tile. */
int cuda_attention_forward_shaped(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, int k,
                                  cuda_flash_order order);
/* 1 where the Hopper attention kernels below are built at head size hs
 * (64, 96 and 128: head_tiles.cuh), else 0. */
int cuda_attention_wgmma_head_size(int hs);
/* attention_forward on Hopper's warpgroup MMA (flash_fwd_wgmma.cu; sm_90a
 * code only): 1 when run, 0 (nothing run) where it has no instance: a
 * device that is not compute capability 9.0, activations not bf16, a head
 * size cuda_attention_wgmma_head_size refuses, or dropout. Same outputs
 * and layouts as attention_forward's. */
int cuda_attention_forward_wgmma(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, tg_dropout drop);
/* attention_backward on Hopper's warpgroup MMA (flash_bwd_wgmma.cu;
 * sm_90a code only; dq by the mma.sync kernel where the kernel scratch
 * cannot hold one pair's dq shares): 1 when run, 0 (nothing run) where it
 * has no instance: a device that is not compute capability 9.0,
 * activations not bf16, a head size cuda_attention_wgmma_head_size
 * refuses, dropout, or tensors not 16-byte aligned. Same outputs as attention_backward's; deterministic (no
 * atomics: every sum in a fixed order). */
int cuda_attention_backward_wgmma(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B,
                                  int T, int NH, int HS, tg_dropout drop);
/* How the wgmma backward takes dq: through its fixed-order slots (a
 * second kernel sums them; the kernel scratch must hold one pair's), the
 * same slots summed in the kernel (SUMMED: each query tile's by the last
 * of its key blocks to finish, counted by an atomic; the same sum in the
 * same order, so the same bits), or by the mma.sync dq kernel beside dk
 * and dv on wgmma. */
typedef enum { CUDA_WGMMA_DQ_SLOTS, CUDA_WGMMA_DQ_MMA, CUDA_WGMMA_DQ_SUMMED } cuda_wgmma_dq;
/* cuda_attention_backward_wgmma with dq by `want` where it can (SLOTS
 * and SUMMED fall back to MMA where the scratch cannot hold the slots),
 * for bench_attention to time them; *taken (may be NULL): the route run
 * (set also for B = 0, which runs nothing). Same returns. */
int cuda_attention_backward_wgmma_dq(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse,
                                     int B, int T, int NH, int HS, tg_dropout drop, cuda_wgmma_dq want, cuda_wgmma_dq *taken);
/* The wgmma backward, dq by its slots, with the score products reading K
 * and V from shared memory at head size 64, where every run holds them in
 * registers (flash_bwd_wgmma.cu's bw_kv_in_registers): for bench_attention
 * to time the two; the same results. 1 when run; 0 (nothing run) at other
 * head sizes, with dropout, off bf16 or a compute capability other than
 * 9.0, or where the scratch cannot hold one pair's dq slots. */
int cuda_attention_backward_wgmma_kv_shared(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv,
                                            const float *lse, int B, int T, int NH, int HS);
/* The wgmma backward, dq by its slots, with two stages of Q and dout at
 * head sizes 64 and 96, where every run has three (flash_bwd_wgmma.cu's
 * bw_stages: each tile's copy issued two tiles ahead, not one): for
 * bench_attention to time the two; the same bits. Returns as
 * cuda_attention_backward_wgmma_kv_shared's (0 at head size 128, where
 * every run has two). */
int cuda_attention_backward_wgmma_two_stages(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv,
                                             const float *lse, int B, int T, int NH, int HS);
/* The wgmma backward, dq by its slots, in rounds of at most
 * round_slot_bytes of slots (at least one pair a round), where every run's
 * rounds are as many pairs as the kernel scratch holds (about 62 MB of
 * slots at T 1024, over an H200's 50 MB L2): for bench_attention to time
 * rounds whose slots stay in L2 between the kernel that writes them and
 * the reduction that reads them; summed: the slots summed in the kernel
 * (CUDA_WGMMA_DQ_SUMMED's route, its counts in the round's bytes), where
 * each tile's last key block reads them soon after the others wrote them.
 * The same bits. Returns as cuda_attention_backward_wgmma_kv_shared's
 * (head sizes 64, 96 and 128). */
int cuda_attention_backward_wgmma_rounds(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv,
                                         const float *lse, int B, int T, int NH, int HS, size_t round_slot_bytes, int summed);
/* The wgmma backward, dq by its slots, as a persistent kernel at head size
 * 64: at most `blocks` blocks (<= 0: one an SM), each over its share of
 * the key blocks, longest first, the next one's K, V, first query tiles
 * and statistics copied while it finishes one (flash_bwd_wgmma_persist.cu):
 * for bench_attention to time against every run's launch (a block a key
 * block); the same bits. Returns as cuda_attention_backward_wgmma_kv_shared's. */
int cuda_attention_backward_wgmma_persistent(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv,
                                             const float *lse, int B, int T, int NH, int HS, int blocks);
/* The wgmma backward in every run's form (dq by slots) with each block's
 * phase profile (block_profile.h: each warpgroup's SM cycles by phase,
 * named by cuda_attention_backward_wgmma_phase; tiles: the block's query
 * tiles of 64 rows) written to records, device memory for
 * cuda_attention_backward_wgmma_blocks(B, T, NH) of them (128 keys a
 * block): bench_attention's profile. An instance of its own with the
 * clock reads, the same results. 1 when run; 0 (nothing run) where it
 * has no instance (head sizes 64 and 96, bf16, no dropout, compute
 * capability 9.0, aligned) or the scratch cannot hold a pair's slots. */
size_t cuda_attention_backward_wgmma_blocks(int B, int T, int NH);
int cuda_attention_backward_wgmma_profile(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse,
                                          int B, int T, int NH, int HS, cuda_block_profile *records);
const char *cuda_attention_backward_wgmma_phase(int part, int phase);
/* The stages of Q and dout every run of the wgmma backward has at head
 * size HS (0 where it has no instance), for bench_attention's labels. */
int cuda_attention_backward_wgmma_stages(int HS);
/* cuda_attention_forward_wgmma as a warp-specialized pipeline (flash_fwd_wgmma_ws.cu: a TMA
 * producer warp, two consumer warpgroups, mbarriers; tensor maps made per
 * call): 1 when run, 0 where it has no instance (as above). A qkv not
 * 16-byte aligned, which the copy engine cannot read, runs
 * cuda_attention_forward_wgmma. */
int cuda_attention_forward_wgmma_ws(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS,
                                    tg_dropout drop);
/* cuda_attention_forward_wgmma_ws as a persistent kernel (FlashAttention-3's):
 * at most `blocks` blocks (<= 0: one an SM), each over its share of the
 * query tiles, so that its next tile's loads overlap the end of the one
 * before; the same bits. For bench_attention to time against the block-
 * a-tile launch that runs. 1 when run; 0 where that has no instance and
 * at head size 128 (the second Q buffer does not fit); a qkv not 16-byte
 * aligned runs cuda_attention_forward_wgmma. */
int cuda_attention_forward_wgmma_ws_persistent(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS,
                                               tg_dropout drop, int blocks);
/* cuda_attention_forward_wgmma_ws (no dropout) with each block's phase
 * profile (block_profile.h: the producer's and each consumer warpgroup's
 * SM cycles by phase, named by cuda_attention_forward_wgmma_ws_phase;
 * tiles: the block's key tiles) written to records, device memory for
 * cuda_attention_forward_wgmma_ws_blocks(B, T, NH) of them: bench_attention's
 * profile rows. An instance of its own with the clock reads, the same
 * results. 1 when run; 0 (nothing run) where it has no instance (head
 * sizes 64 and 96), a qkv not 16-byte aligned, or over FL_MAX_PAIRS pairs. */
size_t cuda_attention_forward_wgmma_ws_blocks(int B, int T, int NH);
int cuda_attention_forward_wgmma_ws_profile(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS,
                                            cuda_block_profile *records);
/* A phase's name (part 0: the producer, 1 and 2: the consumers), or NULL
 * past the part's last. */
const char *cuda_attention_forward_wgmma_ws_phase(int part, int phase);
/* cuda_attention_forward_wgmma_ws (no dropout) with one exponential of
 * the softmax in `poly` (4 or 8) computed by a cubic on the FMA units
 * (kernels/cuda/exp2_poly.cuh: FlashAttention-4's trade, the SFU's
 * exponentials being as many clocks as the products at head size 64),
 * for bench_attention to time against every run's: within the bf16
 * tolerance of it, not its bits. 1 when run; 0 (nothing run) at head
 * sizes other than 64, another poly, or a qkv not 16-byte aligned. */
int cuda_attention_forward_wgmma_ws_poly(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, int poly);
/* A shape of the tensor-core attention backward: 16-row query tiles per
 * warp of the dq kernel, and 16-key tiles per warp of the dk, dv kernel. */
typedef struct cuda_flash_bwd_shape {
    int dq_row_tiles, dkv_key_tiles;
} cuda_flash_bwd_shape;
/* The same for the backward: its shapes built for head size HS, the tuned
 * one first (written into shapes, at most max); and attention_backward
 * without dropout in shape k: 1, or 0 (nothing run) when there is no
 * shape k, the activations are not bf16 or the tensors not 16-byte
 * aligned. Every shape gives attention_backward's bits. Its blocks run
 * pairs first only (flash.cuh's fl_grid_pairs_first says why). */
int cuda_attention_backward_shapes(int HS, cuda_flash_bwd_shape *shapes, int max);
int cuda_attention_backward_shaped(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B,
                                   int T, int NH, int HS, int k);

/* attention_backward without dropout as one mma.sync kernel of five
 * products a tile (flash_bwd_fused.cuh: dk and dv as attention_backward's,
 * dq's shares through float32 slots summed in a fixed order), for
 * bench_attention to time against the two kernels every run takes: 1
 * when run, 0 (nothing run) where it has no instance (activations not
 * bf16, a head size other than 64, 96 and 128, tensors not 16-byte
 * aligned) or the kernel scratch cannot hold one pair's slots. */
int cuda_attention_backward_fused(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B,
                                  int T, int NH, int HS);

void cuda_xent_partial(tg_o o, float *rowmax, float *local_max, float *stats, const void *logits, const int32_t *targets,
                       int N, int V, int n_real, int vocab_start);
void cuda_xent_rescale(tg_o o, float *stats, const float *local_max, const float *rowmax, int N);
void cuda_xent_finish(tg_o o, float *losses, void *logits, const float *rowmax, const float *stats, const int32_t *targets,
                      int N, int V, int n_real, int vocab_start, float dloss);

#ifdef __cplusplus
}
#endif

/* Shared by the .cu files: element access in either activation type. */
#ifdef __CUDACC__
#include <cuda_bf16.h>
static __device__ __forceinline__ float tg_load(const float *p, size_t i) { return p[i]; }
static __device__ __forceinline__ float tg_load(const __nv_bfloat16 *p, size_t i) { return __bfloat162float(p[i]); }
static __device__ __forceinline__ void tg_store(float *p, size_t i, float v) { p[i] = v; }
static __device__ __forceinline__ void tg_store(__nv_bfloat16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }
/* Launch grid for n items at `threads` per block. */
static inline unsigned tg_blocks(size_t n, unsigned threads) { return (unsigned)((n + threads - 1) / threads); }
#endif

#endif
