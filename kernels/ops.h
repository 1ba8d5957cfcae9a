/* The backend interface: every kernel the orchestrator (model/gpt.c) calls.
 * A backend is one tg_ops instance: the CPU's is static, the CUDA one is
 * created per process (it holds the device, stream and cuBLASLt handle in
 * ctx); every entry takes the instance as its first argument.
 * Buffers are backend memory the orchestrator never dereferences. Types:
 *   void *   "activation type", o->act: float32 on the CPU; bfloat16 or
 *            float32 on CUDA (train.precision). Activations, their
 *            gradients, and the parameters' working copy.
 *   float *  always float32: gradients of parameters, fp32 master weights,
 *            AdamW moments, LayerNorm statistics, losses and softmax stats.
 * Shapes: N = B*T rows, C = width, OC = output width; weights are stored as
 * Hugging Face GPT-2 does, [in, out].
 * Convention: outputs named d* of weights and biases ACCUMULATE (+=), so
 * gradient accumulation over micro-batches needs no extra pass; activation
 * gradients are overwritten unless a comment says otherwise. */
#ifndef KERNELS_OPS_H
#define KERNELS_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "parallel/comm.h"
#include "util/dtype.h"
#include "util/err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One dropout site of one forward: element i of the site is kept when
 * rng_uniform(seed, stream, row0 * width + i) >= p and then scaled by
 * 1/(1-p), i counting within this rank's rows (for attention: over
 * [heads, T, T] per sequence, with the rank's first head at head0 of
 * heads_total). p = 0: no dropout (and no draws). */
typedef struct tg_dropout {
    float p;
    uint64_t seed, stream;
    uint64_t row0;           /* global index of this rank's first row (token, or sequence for attention) */
    int head0, heads_total;  /* attention only */
} tg_dropout;

typedef struct tg_ops tg_ops;
typedef const tg_ops *tg_o;

struct tg_ops {
    const char *name;        /* "cpu", "cuda" */
    char device[320];        /* what runs the kernels, for the start-up line */
    tg_dtype act;            /* element type of activations and working weights */
    void *ctx;               /* the backend's own state (NULL for the CPU) */
    size_t workspace_bytes;  /* fixed backend memory beyond the model's buffers (budgeted) */
    /* How communicators move this backend's buffers (host staging on a GPU). */
    comm_memory mem;

    /* memory: bytes, in backend memory */
    void *(*alloc)(tg_o o, size_t bytes, const char *what);
    void (*free)(tg_o o, void *p);
    void (*upload)(tg_o o, void *dst, const void *host_src, size_t bytes);
    void (*download)(tg_o o, void *host_dst, const void *src, size_t bytes);
    void (*zero)(tg_o o, void *p, size_t bytes);
    /* dst[n] (activation type) = src[n] (float32), both backend memory: the
     * working copy of the master weights. dst == src is allowed when the
     * activation type is float32 (then nothing happens). */
    void (*cast_params)(tg_o o, void *dst, const float *src, size_t n);
    /* n activation-type elements to host float32. */
    void (*download_floats)(tg_o o, float *host_dst, const void *src, size_t n);
    /* Timing on the device's clock: timer_begin marks the stream (a CUDA
     * event); timer_end_ms marks it again, waits for that mark, and returns
     * the milliseconds between the two. -1 where there is no device clock
     * (the CPU: the caller uses the wall clock). */
    void (*timer_begin)(tg_o o);
    double (*timer_end_ms)(tg_o o);
    /* Highest backend memory in use since creation, measured by the device
     * (CUDA: cudaMemGetInfo, less what was in use before the first
     * allocation); 0 where the backend cannot measure it. */
    size_t (*mem_peak)(tg_o o);
    /* Dense peak TFLOP/s of the device at the activation type; 0 unknown. */
    double (*peak_tflops)(tg_o o);
    /* Releases ctx and the instance (NULL for static tables). */
    void (*destroy)(tg_ops *o);

    /* x = wte[token - vocab_start] (zero row for tokens outside this rank's
     * [vocab_start, vocab_start + vocab_local)) + wpe[t] (if wpe != NULL). */
    void (*encoder_forward)(tg_o o, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T, int C,
                            int vocab_start, int vocab_local);
    /* dwte, dwpe accumulate; either may be NULL. */
    void (*encoder_backward)(tg_o o, float *dwte, float *dwpe, const void *dout, const int32_t *tokens, int B, int T, int C,
                             int vocab_start, int vocab_local);

    /* LayerNorm over the last dim, eps 1e-5; saves mean and 1/std per row. */
    void (*layernorm_forward)(tg_o o, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b,
                              int N, int C);
    /* dinp ACCUMULATES (it is the residual stream's gradient), dw, db too. */
    void (*layernorm_backward)(tg_o o, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w,
                               const float *mean, const float *rstd, int N, int C);

    /* out[N,OC] = inp[N,C] @ w[C,OC] (+ bias if non-NULL). */
    void (*matmul_forward)(tg_o o, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC);
    /* dinp = dout @ w^T (skipped if NULL); dw += inp^T @ dout; dbias += column sums (if non-NULL). */
    void (*matmul_backward)(tg_o o, void *dinp, float *dw, float *dbias, const void *dout, const void *inp, const void *w,
                            int N, int C, int OC);
    /* logits[N,V] = x[N,C] @ wte[V,C]^T (the LM head tied to the embedding). */
    void (*lmhead_forward)(tg_o o, void *logits, const void *x, const void *wte, int N, int C, int V);
    /* dx = dlogits @ wte; dwte += dlogits^T @ x. */
    void (*lmhead_backward)(tg_o o, void *dx, float *dwte, const void *dlogits, const void *x, const void *wte, int N, int C,
                            int V);

    /* Causal self-attention of this rank's NH heads. qkv rows hold
     * [q heads | k heads | v heads], each NH*HS wide. No T x T buffer: lse
     * [B, NH, T] (float32) keeps each query row's log-sum-exp of its scaled
     * scores, and the backward recomputes the probabilities from q, k and
     * lse (flash attention), with D = rowsum(dout * out) for the softmax's
     * gradient; out is the forward's output. dqkv is overwritten. */
    void (*attention_forward)(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, tg_dropout drop);
    void (*attention_backward)(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B,
                               int T, int NH, int HS, tg_dropout drop);

    /* GELU, tanh approximation. Backward may run in place (dinp == dout). */
    void (*gelu_forward)(tg_o o, void *out, const void *inp, size_t n);
    void (*gelu_backward)(tg_o o, void *dinp, const void *inp, const void *dout, size_t n);

    /* out[n, c] = dropout(x[n, c] + bias[c]) + res[n, c] over N rows (out may
     * alias x or res): a row-parallel layer's bias, added after the
     * reduction, its dropout, and the residual connection. */
    void (*bias_residual_add)(tg_o o, void *out, const void *x, const void *bias, const void *res, int N, int C,
                              tg_dropout drop);
    /* out = dropout(in) over N rows of C (in place allowed): the embedding's
     * dropout forward, and every dropout's backward (the same mask). */
    void (*dropout)(tg_o o, void *out, const void *in, int N, int C, tg_dropout drop);
    /* dbias[c] += sum over rows of dout[:, c]. */
    void (*bias_backward)(tg_o o, float *dbias, const void *dout, int N, int C);
    /* Rows [row_start, row_start + N) of the flattened [B, T] token grid:
     * out[n] += wpe[(row_start + n) % T], and its gradient dwpe[...] += dout[n]. */
    void (*position_forward)(tg_o o, void *out, const void *wpe, int row_start, int N, int T, int C);
    void (*position_backward)(tg_o o, float *dwpe, const void *dout, int row_start, int N, int T, int C);

    /* Vocab-parallel cross-entropy in three passes, so that a TP group can
     * combine the per-row statistics between them. Columns >= n_real of this
     * rank's V columns are padding and never get probability. Statistics
     * are float32, computed in float32 from the logits.
     * 1) rowmax[N] = max over this rank's real logits. */
    void (*xent_rowmax)(tg_o o, float *rowmax, const void *logits, int N, int V, int n_real);
    /* 2) stats[2N] = (sum exp(logit - rowmax), target logit or 0 when the
     *    target is not among this rank's columns [vocab_start, +V)). */
    void (*xent_stats)(tg_o o, float *stats, const void *logits, const float *rowmax, const int32_t *targets, int N, int V,
                       int n_real, int vocab_start);
    /* 3) losses[N] = log(sumexp) + rowmax - target logit; the logits are
     *    overwritten by their gradient (softmax - onehot) * dloss. */
    void (*xent_finish)(tg_o o, float *losses, void *logits, const float *rowmax, const float *stats, const int32_t *targets,
                        int N, int V, int n_real, int vocab_start, float dloss);

    /* Sum of squares (accumulated in double), for the global gradient norm. */
    double (*sum_squares)(tg_o o, const float *x, size_t n);
    /* x *= s */
    void (*scale)(tg_o o, float *x, float s, size_t n);
    /* torch.optim.AdamW on one tensor's float32 master weights p;
     * bc1 = 1 - beta1^t, bc2 = 1 - beta2^t. When work != (void *)p it also
     * writes the updated weights, in the activation type, to work. */
    void (*adamw)(tg_o o, float *p, void *work, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, float bc1, float bc2);
};

/* Fixed device memory of the CUDA backend beyond the model's buffers: the
 * cuBLASLt workspace and the kernels' scratch (kernels/cuda/cuda_ctx.h). */
#define OPS_CUDA_LT_WORKSPACE_BYTES ((size_t)32 << 20)
#define OPS_CUDA_SCRATCH_BYTES ((size_t)64 << 20)

/* The null backend (kernels/ops_null.c): kernels that do nothing, memory that
 * does not exist; a step run on it only issues its collectives (the
 * planner counts them). Activations of type act. Destroy with ops_destroy. */
tg_ops *ops_null_create(tg_dtype act);

/* The float32 CPU backend. */
const tg_ops *ops_cpu(void);
/* bf16 storage on the CPU (the CPU kernels' bf16 build, kernels/cpu/act.h):
 * float32 arithmetic on widened loads, each stored output rounded to bf16
 * once; for testing the bf16 paths without a GPU. Destroy with ops_destroy. */
tg_ops *ops_cpu_bf16_create(tg_err *e);

/* The CUDA backend on visible device `local_rank` modulo the device count
 * (ranks beyond it share devices round-robin: shm tests of TP on one GPU),
 * with activations in `act`; NULL with a message when this build has no
 * CUDA (make GPU=1) or the device cannot be used. */
tg_ops *ops_cuda_create(int local_rank, tg_dtype act, tg_err *e);
/* Visible CUDA devices (0 without CUDA or without a device). */
int ops_cuda_device_count(void);
/* True when this binary was built with make GPU=1. */
int ops_cuda_compiled(void);

/* Dense peak TFLOP/s of the GPU whose name contains a known model name, at
 * activation type act (bf16 tensor cores, or plain fp32); 0 when unknown.
 * The one table of peaks: the trainer's MFU, and through
 * `train_gpt --peak-tflops NAME [bf16|fp32]` the benchmark and sweep scripts. */
double ops_peak_tflops(const char *device_name, tg_dtype act);

/* Destroys a backend made by a *_create function (no-op for static ones). */
void ops_destroy(const tg_ops *o);

#ifdef __cplusplus
}
#endif

#endif
