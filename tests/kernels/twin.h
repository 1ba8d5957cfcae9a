/* The CUDA-against-CPU checks' helpers: one logical tensor held by both
 * backends (a twin), fresh seeded random inputs, and the comparison of the
 * CUDA result with the CPU one. Relative error, per output tensor:
 * max_i |cuda_i - cpu_i| divided by max(max_i |cpu_i|, 1e-30); a NaN or
 * infinity on either side fails, and so does an all-zero reference.
 * Tolerances (strict <): 1e-5 with fp32 activations, 1e-2 with bf16; float32
 * outputs computed from float32 inputs only are held to 1e-5 in both. With
 * bf16 activations the CPU is given the bf16-rounded inputs, so only the CUDA
 * kernel's own rounding is measured. Overwritten outputs are poisoned first
 * (0xff bytes: NaN in float32 and bf16) on both sides. Each check prints
 * "ok PRECISION NAME ..." or "not ok PRECISION NAME - err=E tol=T ...".
 * Compiled only with CUDA (make GPU=1) or its emulation (tests/emu). */
#ifndef TESTS_KERNELS_TWIN_H
#define TESTS_KERNELS_TWIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"
#include "util/dtype.h"

#define TOL_F32 1e-5
#define TOL_BF16 1e-2
#define TINY 1e-30
#define SEED 20240607u

typedef struct env {
    tg_o cpu, gpu;
    tg_dtype act;      /* the CUDA backend's activation type */
    double tol;        /* for activation-type outputs and outputs computed from them */
    uint64_t stream;   /* next random stream: every input is fresh */
    int quick;
    int passed, failed;
} env;

/* What a buffer holds: the activation type (float32 on the CPU, e->act on
 * the GPU), float32 on both, or int32 token ids. */
typedef enum { ACT, F32, I32 } kind;

/* One logical tensor held by both backends. */
typedef struct twin {
    void *c, *g;
    size_t n;
    kind k;
} twin;

#define NEED(e, op)                                                      \
    do {                                                                 \
        if (!need((e), #op, (e)->cpu->op != NULL, (e)->gpu->op != NULL)) \
            return;                                                      \
    } while (0)

/* One check's line; counts it in e. */
void twin_report(env *e, int ok, double err, double tol, const char *name, const char *detail);
/* Both tables must have the op; a missing one is a failure, not a skip. */
int need(env *e, const char *op, int in_cpu, int in_gpu);
/* Waits for the GPU's queue, so that an asynchronous failure is blamed on
 * the op just run. */
void sync_gpu(env *e);
tg_dtype gpu_type(const env *e, kind k);
size_t gpu_elem(const env *e, kind k);
/* n host floats to/from backend memory of element type t. */
void put_floats(tg_o o, tg_dtype t, void *dst, const float *src, size_t n);
void get_floats(tg_o o, tg_dtype t, float *dst, const void *src, size_t n);
/* 0xff bytes: NaN in float32 and in bf16. */
void poison(tg_o o, void *p, size_t bytes);
twin tw_alloc(env *e, kind k, size_t n, const char *what);
/* An overwritten output: poisoned on both sides. */
twin tw_out(env *e, kind k, size_t n);
/* Given host values (bf16-rounded for the CPU side when the GPU holds bf16). */
twin tw_vals(env *e, kind k, const float *h, size_t n);
/* n fresh uniform values in [lo, hi) from the next random stream. */
float *host_rand(env *e, size_t n, float lo, float hi);
twin tw_rand(env *e, kind k, size_t n, float lo, float hi);
twin tw_ints(env *e, const int32_t *h, size_t n);
/* The CPU side's values as host floats (the caller frees them). */
float *cpu_values(env *e, twin src);
/* A copy of src on both sides. */
twin tw_ref(env *e, twin src);
void tw_free(env *e, twin t);
double rel_err(const float *got, const float *want, size_t n, size_t *at);
void compare_floats(env *e, const float *got, const float *want, size_t n, double tol, const char *name);
/* Compares the two sides of t after the calls that wrote it. */
void check(env *e, twin t, double tol, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* A pass/fail fact that is not a tensor comparison. */
void check_true(env *e, int ok, const char *name, const char *detail);
/* Whether the backend's kernel scratch holds `bytes` (twin.c). */
int scratch_holds(size_t bytes);
/* The backend bytes of t's GPU side (the caller frees them). */
void *gpu_bytes(env *e, twin t);
/* Whether t's GPU side holds the bytes `want` (from gpu_bytes). */
int gpu_holds(env *e, twin t, const void *want);
/* max |got - want| over n bf16 values, relative to max |want| (infinity
 * where got is not finite). */
double bf16_rel_diff(const void *got, const void *want, size_t n);

/* A causal attention backward's inputs on both sides, without dropout
 * (tests/kernels/attention.c): qkv uniform in [-amp, amp), the CPU
 * forward's out and lse (as references), dout uniform in [-1, 1), and
 * dqkv holding the CPU backward's result on its CPU side, its GPU side
 * poisoned. */
typedef struct attn_bwd {
    int B, T, NH, HS;
    twin qkv, out, lse, out_r, lse_r, dout, dqkv;
} attn_bwd;
attn_bwd attn_bwd_inputs(env *e, int B, int T, int NH, int HS, float amp);
void attn_bwd_free(env *e, attn_bwd *a);
/* Whether two bf16 dqkv downloads of a's shape hold the same bytes in
 * every row's k and v columns (dk, dv). */
int attn_bwd_same_kv(const attn_bwd *a, const void *x, const void *y);

/* The families' CUDA checks (tests/kernels/<family>.c), in run_all's order. */
void cuda_test_memory(env *e);
void cuda_test_cast_params(env *e, size_t n);
void cuda_test_download_floats(env *e, size_t n);
void cuda_test_encoder(env *e, int B, int T, int C, int vocab_start, int vocab_local, int vocab_all);
void cuda_test_position(env *e, int row_start, int N, int T, int C);
void cuda_test_layernorm(env *e, int N, int C);
void cuda_test_matmul(env *e, int N, int C, int OC);
void cuda_test_matmul_dgelu(env *e, int N, int C, int OC);
void cuda_test_matmul_gelu(env *e, int N, int C, int OC);
void cuda_test_lt_plans(env *e);
void cuda_test_dw_overlap(env *e);
void cuda_test_lmhead(env *e, int N, int C, int V);
void cuda_test_attention(env *e, int B, int T, int NH, int HS, tg_dropout drop);
void cuda_test_attention_shapes(env *e);
void cuda_test_attention_backward_tiles(env *e);
void cuda_test_attention_forward_shapes(env *e);
void cuda_test_attention_auto(env *e);
void cuda_test_attention_wgmma(env *e);
void cuda_test_attention_fused(env *e);
void cuda_test_gelu(env *e, size_t n);
void cuda_test_gelu_unaligned(env *e, size_t n);
void cuda_test_gelu_tails(env *e);
void cuda_test_bias_residual(env *e, int N, int C, tg_dropout drop);
void cuda_test_dropout(env *e, int N, int C, tg_dropout drop);
void cuda_test_dropout_step(env *e, int N, int C);
void cuda_test_bias_backward(env *e, int N, int C);
void cuda_test_residual_layernorm(env *e, int N, int C, tg_dropout drop, int misaligned);
void cuda_test_xent(env *e, int N, int V, int n_real, int vocab_start);
void cuda_test_xent_fused(env *e, int N, int V, int n_real);
void cuda_test_loss(env *e, int N);
void cuda_test_grad_sumsq(env *e, size_t k, bool windowed);
void cuda_test_clip_factor(env *e);
void cuda_test_adamw(env *e, size_t k, int work_is_p);
/* tests/kernels/grad_writes.c: one op (its index there) at one shape, and every op at the shapes it runs */
void cuda_test_grad_writes(env *e, int op, int N, int C, int OC, int T, int row0);
void cuda_test_grad_writes_all(env *e);

#endif
