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
 * Convention: the ops that make gradients of weights and biases (outputs
 * named d* of parameters) take `bool acc`: false, the step's first
 * micro-batch, WRITES them (=, whatever the buffer held, NaN included:
 * no separate zeroing pass); true, the later micro-batches, ACCUMULATES
 * (+=). A write is bitwise the old zero-then-add: each op computes
 * (acc ? old : 0.0f) + its sum, or starts its sum at +0 where cuBLASLt's
 * beta is 0. Which op writes each parameter's gradient first (model/gpt.c,
 * gpt_backward, the audit):
 *   matmul_backward dw, dbias (c_attn, c_fc, both c_proj; the dinp-only calls
 *     under SP write no parameter); matmul_backward_dgelu dw and dpre_bias
 *     (c_fc's bias: the fused DGELU_BGRAD path's scratch is written or added
 *     to it); bias_backward (the row-parallel biases); layernorm_backward dw,
 *     db; position_backward dwpe: every position of the T rows, also those
 *     none of this rank's rows hit (SP) - each gets its (empty) sum;
 *   lmhead_backward dwte: every row of this rank's vocabulary (a product
 *     over all of them, rows no token hits and padding included), so it runs
 *     first, and the embedding's scatter (encoder_backward, which only
 *     touches rows of tokens) always accumulates after it;
 *   attention has no parameters; TP shards are the tensors of this rank,
 *   written by the same ops; SP's replicated gradients are summed over TP
 *   after the last micro-batch, and DP's (all-reduce or ZeRO's buckets) are
 *   reduced during or after the last micro-batch's backward, so nothing
 *   reads a gradient before the first micro-batch wrote all of it.
 * Activation gradients are overwritten unless a comment says otherwise. */
#ifndef KERNELS_OPS_H
#define KERNELS_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/exact_sumsq.h"
#include "parallel/comm.h"
#include "util/dtype.h"
#include "util/err.h"
#include "util/rng_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One dropout site of one forward: element i of the site is kept when
 * rng_uniform(seed, tg_dropout_stream(&site), row0 * width + i) >= p and
 * then scaled by 1/(1-p), i counting within this rank's rows (for
 * attention: over [heads, T, T] per sequence, with the rank's first head at
 * head0 of heads_total). p = 0: no dropout (and no draws, step unread). */
typedef struct tg_dropout {
    float p;
    uint64_t seed, stream;   /* stream: the site's own, before the step's part */
    uint64_t row0;           /* global index of this rank's first row (token, or sequence for attention) */
    int head0, heads_total;  /* attention only */
    /* The step whose masks these are, in backend memory (the model's
     * tg_step_stats.in.step), read when the kernel runs rather than passed
     * by value, so that a step replayed as a CUDA graph draws its own
     * masks. NULL: step 0 (sites that are not a training step's). */
    const uint64_t *step;
} tg_dropout;

/* The stream a site's masks are drawn from: its own, moved by the step
 * (each step's sites take 2^24 streams). Dereferences site->step, so it
 * runs where that memory is (the CPU, or a CUDA kernel). */
static inline TG_HD uint64_t tg_dropout_stream(const tg_dropout *site) {
    return site->stream + ((site->step ? *site->step : 0) << 24);
}

/* The same site with its step read now and folded into its stream (step
 * NULL: the same masks). Kernels start with it, so that the step is one
 * load per thread rather than one per element (the compiler may not move
 * that load past the kernel's stores). */
static inline TG_HD tg_dropout tg_dropout_read_step(tg_dropout site) {
    if (site.p > 0.0f) site.stream = tg_dropout_stream(&site);
    site.step = NULL;
    return site;
}

/* What a step's work reads that changes from step to step: uploaded into
 * tg_step_stats.in before the work is enqueued, so that the work itself is
 * the same every step (a CUDA graph replays it). */
typedef struct tg_step_inputs {
    float lr;       /* AdamW's learning rate */
    float bc1, bc2; /* its bias corrections: 1 - beta1^t, 1 - beta2^t */
    uint64_t step;  /* t, 1-based: keys the dropout masks (tg_dropout.step) */
} tg_step_inputs;

/* The scalars of one step, in backend memory (device memory on a GPU), so
 * that a step runs without the host waiting on the device until its end. */
typedef struct tg_step_stats {
    double loss_acc; /* sum of the micro-batches' mean losses (loss_accumulate) */
    double sumsq;    /* this rank's sum of squares of the gradients it counts */
    double norm;     /* the global gradient norm */
    float loss;      /* the step's mean loss: this rank's share, then summed over DP */
    float sumsq_pieces[EXACT_SUMSQ_PIECES]; /* the same sum, exact (kernels/exact_sumsq.h), summed over TP (and DP
                                             * under ZeRO) in place: the same bits for any split of the gradients */
    float clip;      /* the factor AdamW applies to the gradients (1: none) */
    int32_t finite;  /* loss and norm finite: AdamW applies the update */
    tg_step_inputs in;
} tg_step_stats;

/* Tensors of a flat float32 buffer for the multi-tensor ops: span i is
 * count tensors of numel elements, stride elements apart from begin (one
 * parameter kind over the layers). Only the offsets inside the span's window
 * take part (ZeRO: this rank's chunk of every bucket the span's tensors lie
 * in). The window repeats every `period` elements from `origin` (at most
 * begin) and holds [lo, hi) of each period. The AdamW moments keep the
 * window's elements packed: the moment of offset origin + j * period + q
 * (lo <= q < hi) is at index moment + j * (hi - lo) + q - lo. */
#define TG_MAX_SPANS 32
typedef struct tg_window {
    size_t origin, period, lo, hi, moment;
} tg_window;
typedef struct tg_span {
    size_t begin, stride, numel;
    int count;
    int decay; /* AdamW weight decay applies */
    tg_window win;
} tg_span;
typedef struct tg_spans {
    int n;
    tg_span span[TG_MAX_SPANS];
} tg_spans;

/* The window of the whole buffer: every offset, its moment at its own index. */
static inline tg_window tg_window_whole(void) {
    const tg_window w = {0, SIZE_MAX, 0, SIZE_MAX, 0};
    return w;
}

/* The window against the n offsets from `off` (all in one tensor): returns
 * how many of them lie in off's period (the run stops at the period's end);
 * [*begin, *end) is their part inside the window (empty when *begin >=
 * *end), and an offset o there has its moment at index o + *shift (modulo
 * 2^64). The one piece of window arithmetic, for the CPU's walk
 * (tg_span_next) and the CUDA kernels' (kernels/cuda/spans.cuh). */
static inline TG_HD size_t tg_window_cut(const tg_window *w, size_t off, size_t n, size_t *begin, size_t *end,
                                          size_t *shift) {
    const size_t rel = off - w->origin, period_i = rel / w->period, q = rel - period_i * w->period;
    const size_t run = n < w->period - q ? n : w->period - q;
    const size_t qb = q > w->lo ? q : w->lo, qe = q + run < w->hi ? q + run : w->hi;
    *begin = off - q + qb;
    *end = off - q + qe;
    *shift = w->moment + period_i * (w->hi - w->lo) - w->lo + q - off;
    return run;
}

/* The next piece of tensor c (0 <= c < sp->count) of sp inside its window,
 * at or after offset *at: [*begin, *end), the moment of *begin at index
 * *moment; *at moves past it. false when the tensor has no more. */
static inline bool tg_span_next(const tg_span *sp, int c, size_t *at, size_t *begin, size_t *end, size_t *moment) {
    const size_t first = sp->begin + (size_t)c * sp->stride, last = first + sp->numel;
    for (size_t off = *at > first ? *at : first; off < last;) {
        size_t b, e, shift;
        off += tg_window_cut(&sp->win, off, last - off, &b, &e, &shift);
        if (b >= e) continue;
        *begin = b;
        *end = e;
        *moment = b + shift;
        *at = off;
        return true;
    }
    *at = last;
    return false;
}

/* AdamW's hyper-parameters that stay fixed over a run (the learning rate
 * and bias corrections of a step are in tg_step_stats). */
typedef struct tg_adamw_args {
    float beta1, beta2, eps, weight_decay;
} tg_adamw_args;

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
    /* Events for the opt-in per-op timer (kernels/timed.h): an event marks
     * the stream where it is recorded; event_elapsed_ms waits for `stop`
     * and returns the device milliseconds between two recorded events.
     * NULL where there is no device clock (the CPU: its ops are synchronous,
     * and the timer uses the wall clock). */
    void *(*event_create)(tg_o o);
    void (*event_record)(tg_o o, void *ev);
    double (*event_elapsed_ms)(tg_o o, void *start, void *stop);
    void (*event_destroy)(tg_o o, void *ev);
    /* The step as one CUDA graph. Between graph_capture_begin and
     * graph_capture_end the ops record their work instead of running it,
     * and must neither wait for the device nor allocate; graph_capture_end
     * makes the recording the backend's step graph (replacing any earlier
     * one), which graph_launch enqueues: the recorded work, with the
     * arguments it was recorded with, on the buffers as they are then.
     * Each returns 0, or -1 with e set (the device refused the capture: the
     * caller runs the step's ops itself). NULL where there are no graphs
     * (the CPU, the per-op timer). */
    int (*graph_capture_begin)(tg_o o, tg_err *e);
    int (*graph_capture_end)(tg_o o, tg_err *e);
    int (*graph_launch)(tg_o o, tg_err *e);
    /* Destroys the step graph, if any, once its launches are done. Before
     * the communicators whose collectives it holds are destroyed: NCCL
     * (2.26 and later) waits in ncclCommDestroy and ncclCommAbort until no
     * graph holds the communicator, so the other order never returns. */
    void (*graph_release)(tg_o o);

    /* x = wte[token - vocab_start] (zero row for tokens outside this rank's
     * [vocab_start, vocab_start + vocab_local)) + wpe[t] (if wpe != NULL). */
    void (*encoder_forward)(tg_o o, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T, int C,
                            int vocab_start, int vocab_local);
    /* dwte, dwpe accumulate (a scatter over the tokens: the model runs it
     * after lmhead_backward wrote dwte); either may be NULL. */
    void (*encoder_backward)(tg_o o, float *dwte, float *dwpe, const void *dout, const int32_t *tokens, int B, int T, int C,
                             int vocab_start, int vocab_local);

    /* LayerNorm over the last dim, eps 1e-5; saves mean and 1/std per row. */
    void (*layernorm_forward)(tg_o o, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b,
                              int N, int C);
    /* dinp (the residual stream's gradient) ACCUMULATES when dacc, else is
     * written (the first op of a backward pass that makes it: ln_f's, so
     * that it needs no zeroing either); dw, db as acc says. */
    void (*layernorm_backward)(tg_o o, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w,
                               const float *mean, const float *rstd, int N, int C, bool dacc, bool acc);

    /* out[N,OC] = inp[N,C] @ w[C,OC] (+ bias if non-NULL). */
    void (*matmul_forward)(tg_o o, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC);
    /* A linear layer and the GELU after it (the MLP's c_fc), where the
     * backend fuses them; NULL where it does not (the model then calls
     * matmul_forward into pre and gelu_forward from it):
     *   pre[N,OC] = inp[N,C] @ w[C,OC] + bias      out[N,OC] = gelu(pre)
     * CUDA: cuBLASLt's GELU_AUX_BIAS epilogue, which applies its GELU to the
     * float32 sum before pre is rounded and by its own formula, so out may
     * differ in the last bits from gelu_forward(pre): a recompute of out
     * must call this op again, never gelu_forward. Deterministic. */
    void (*matmul_forward_gelu)(tg_o o, void *out, void *pre, const void *inp, const void *w, const void *bias, int N, int C,
                                int OC);
    /* dinp = dout @ w^T (skipped if NULL); dw (+)= inp^T @ dout (skipped if
     * NULL); dbias (+)= column sums (if non-NULL), as acc says. The model
     * makes dinp first and the rest in a second call, beside dinp's TP
     * reduction. */
    void (*matmul_backward)(tg_o o, void *dinp, float *dw, float *dbias, const void *dout, const void *inp, const void *w,
                            int N, int C, int OC, bool acc);
    /* The backward of a linear layer whose input is gelu(pre), with the
     * GELU's backward and the bias gradient of the layer before it (the
     * MLP's c_proj after c_fc): w[C,OC], inp = gelu(pre) [N,C],
     *   dpre[N,C] = gelu'(pre) * (dout @ w^T)      (overwritten)
     *   dpre_bias[C] (+)= column sums of dpre        (if non-NULL; acc)
     *   dw[C,OC] (+)= inp^T @ dout                    (if non-NULL; acc)
     * exactly matmul_backward (dinp = dpre, no dbias), then gelu_backward in
     * place on dpre, then bias_backward of dpre into dpre_bias; CUDA fuses
     * the first two (and in fp32 the third) into cuBLASLt's epilogue. */
    void (*matmul_backward_dgelu)(tg_o o, void *dpre, float *dpre_bias, float *dw, const void *dout, const void *inp,
                                  const void *w, const void *pre, int N, int C, int OC, bool acc);
    /* logits[N,V] = x[N,C] @ wte[V,C]^T (the LM head tied to the embedding). */
    void (*lmhead_forward)(tg_o o, void *logits, const void *x, const void *wte, int N, int C, int V);
    /* dx = dlogits @ wte (skipped if NULL); dwte (+)= dlogits^T @ x (skipped
     * if NULL; acc). The model makes dx first and dwte in a second call,
     * beside dx's TP reduction. */
    void (*lmhead_backward)(tg_o o, void *dx, float *dwte, const void *dlogits, const void *x, const void *wte, int N, int C,
                            int V, bool acc);

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
    /* bias_residual_add, then layernorm_forward of its output, in one op:
     *   out[n, c] = dropout(x[n, c] + bias[c]) + res[n, c]
     *   ln_out, mean, rstd = LayerNorm of out's rows (weights w, b)
     * bitwise what the two ops give in sequence (with bf16 activations the
     * LayerNorm reads the rounded out). out may alias x or res; ln_out
     * aliases nothing. CUDA normalizes each row from the values it has just
     * computed, so out is written once and never read back. */
    void (*bias_residual_layernorm)(tg_o o, void *out, void *ln_out, float *mean, float *rstd, const void *x,
                                    const void *bias, const void *res, const void *w, const void *b, int N, int C,
                                    tg_dropout drop);
    /* out = dropout(in) over N rows of C (in place allowed): the embedding's
     * dropout forward, and every dropout's backward (the same mask). */
    void (*dropout)(tg_o o, void *out, const void *in, int N, int C, tg_dropout drop);
    /* dbias[c] (+)= sum over rows of dout[:, c], as acc says. */
    void (*bias_backward)(tg_o o, float *dbias, const void *dout, int N, int C, bool acc);
    /* Rows [row_start, row_start + N) of the flattened [B, T] token grid:
     * out[n] += wpe[(row_start + n) % T], and its gradient dwpe[...] += dout[n]
     * (acc false: each of dwpe's T rows written with its rows' sum, zero for
     * a position none of them is at). */
    void (*position_forward)(tg_o o, void *out, const void *wpe, int row_start, int N, int T, int C);
    void (*position_backward)(tg_o o, float *dwpe, const void *dout, int row_start, int N, int T, int C, bool acc);

    /* Vocab-parallel cross-entropy in two passes over the logits, so that a
     * TP group can combine the per-row statistics between them (Megatron's
     * two all-reduces: the max, then the sums). Columns >= n_real of this
     * rank's V columns are padding and never get probability. Statistics
     * are float32, computed in float32 from the logits.
     * 1) One read of this rank's logits: rowmax[N] and local_max[N] both =
     *    the max over its real logits (-inf for none; rowmax is the copy the
     *    group reduces to the global max); stats[2N] = (sum exp(logit -
     *    local_max), target logit or 0 when the target is not among this
     *    rank's columns [vocab_start, +V)). */
    void (*xent_partial)(tg_o o, float *rowmax, float *local_max, float *stats, const void *logits, const int32_t *targets,
                         int N, int V, int n_real, int vocab_start);
    /* 2) After the max's reduction, no read of the logits: each row's sum
     *    rescaled from its local max to rowmax (stats[2n] *= exp(local_max -
     *    rowmax)), ready for the group's sum. */
    void (*xent_rescale)(tg_o o, float *stats, const float *local_max, const float *rowmax, int N);
    /* 3) The second read: losses[N] = log(sumexp) + rowmax - target logit;
     *    the logits are overwritten by their gradient (softmax - onehot) *
     *    dloss. */
    void (*xent_finish)(tg_o o, float *losses, void *logits, const float *rowmax, const float *stats, const int32_t *targets,
                        int N, int V, int n_real, int vocab_start, float dloss);

    /* All three at once where one rank holds the whole vocabulary (TP = 1,
     * vocab_start 0): the losses and the logits' gradient as xent_partial,
     * xent_rescale (by 1) and xent_finish give them, from one read of the
     * logits for the statistics (a running max and sum) and one for the
     * gradient. */
    void (*xent_fused)(tg_o o, float *losses, void *logits, const int32_t *targets, int N, int V, int n_real, float dloss);

    /* ---- the step's scalars (tg_step_stats, backend memory): written on
     * the device, reduced in place by the communicators, read by the host
     * once, at the step's end ---- */
    /* s->loss_acc += (double)(float)(sum of losses[0..N) in double / N): one
     * micro-batch's mean loss. */
    void (*loss_accumulate)(tg_o o, tg_step_stats *s, const float *losses, int N);
    /* s->loss = (float)(s->loss_acc / n_micro) / divisor; s->loss_acc = 0. */
    void (*loss_finish)(tg_o o, tg_step_stats *s, int n_micro, float divisor);
    /* s->sumsq = the sum over the spans' tensors, in span and tensor order,
     * of each one's sum of squares of g (in double); with exact,
     * s->sumsq_pieces = the exact sum of the same squares
     * (exact_sumsq_pieces), the operand of the norm's all-reduces, equal on
     * every backend and for any order. It costs several times the double
     * sum (integer words a square; 0.57 ms of a GPT-2 124M step on an
     * H200), so a rank that holds every gradient asks for none: the pieces
     * then say NaN, and a norm taken from them is not finite. */
    void (*grad_sumsq)(tg_o o, tg_step_stats *s, const float *g, const tg_spans *spans, int exact);
    /* s->norm = sqrt(reduced ? exact_sumsq_value(s->sumsq_pieces) : s->sumsq)
     * (reduced: the sum was split among ranks, whose parts differ with the
     * layout, e.g. ZeRO's buckets; the exact sum keeps the norm's bits
     * independent of it); s->finite =
     * s->loss and s->norm are finite; s->clip = max_norm / (norm + 1e-6)
     * rounded to float when max_norm > 0 and that is below 1, else 1
     * (torch.nn.utils.clip_grad_norm_). */
    void (*grad_clip_factor)(tg_o o, tg_step_stats *s, int reduced, double max_norm);
    /* torch.optim.AdamW over the spans' tensors with the gradients times
     * s->clip, at the learning rate and bias corrections of s->in; nothing
     * at all unless s->finite. work and g are whole buffers (span
     * offsets); m and v hold the spans' windows packed (tg_window's moment
     * index). p, the float32 master weights, is indexed as m and v when
     * work != (void *)p (then the updated weights are also written to work
     * in the activation type; ZeRO keeps only a rank's chunks of the
     * master), and is work itself otherwise (float32 working weights).
     * Span decay 0: no weight decay. */
    void (*adamw)(tg_o o, float *p, void *work, const float *g, float *m, float *v, const tg_spans *spans,
                  const tg_adamw_args *a, const tg_step_stats *s);
};
/* Fixed device memory of the CUDA backend beyond the model's buffers: the
 * cuBLASLt workspace and the kernels' scratch (kernels/cuda/cuda_ctx.h). */
#define OPS_CUDA_LT_WORKSPACE_BYTES ((size_t)32 << 20)
#define OPS_CUDA_SCRATCH_BYTES ((size_t)64 << 20)
/* Most cuBLASLt plans (descriptors, layouts, algorithm) the CUDA backend
 * keeps, one per distinct product; a GPT step has a few dozen. Host memory. */
#define OPS_CUDA_LT_PLANS 256

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
/* How the CUDA backend o picks cuBLASLt's algorithms (kernels.lt_tune,
 * kernels/cuda/lt_tune.h): tune "off" (the heuristic's first), "time" (the
 * fastest of its top candidates, timed on a product's first call) or a
 * record file whose choices are pinned. record: the file this run's choices
 * go to when write is non-zero (time: pinned from when it exists already);
 * NULL: none. Fails on a record that cannot be read, naming file, line and
 * field. */
int ops_cuda_lt_tune(const tg_ops *o, const char *tune, const char *record, int write, tg_err *e);
/* Which attention kernels the CUDA backend o runs (kernels.attention):
 * "mma" (mma.sync, every device), "wgmma" (Hopper's warpgroup MMA for the
 * forward and the backward; for bf16, head sizes 64, 96 and 128 and no
 * dropout: hs and dropout are the run's), "wgmma_ws" (the same, its forward
 * warp-specialized on TMA) or "auto" (per head size, the forward and the
 * backward measured faster on an H200 where the wgmma kernels can run, mma
 * elsewhere; never fails). wgmma and wgmma_ws fail, naming what is
 * missing, on a device that is not compute capability 9.0, on float32
 * activations, another head size or dropout. */
int ops_cuda_attention(const tg_ops *o, const char *kernel, int hs, double dropout, tg_err *e);
/* Whether the CUDA backend o runs each layer's weight-gradient product on a
 * second stream, beside its input-gradient product (kernels.dw_overlap; the
 * same products, so the same bits). Fails, with CUDA's message, when the
 * stream or its events cannot be made. Without CUDA: nothing to do. */
int ops_cuda_dw_overlap(const tg_ops *o, int on, tg_err *e);
/* "forward F, backward B": the attention kernels ops_cuda_attention chose for o. */
void ops_cuda_attention_describe(const tg_ops *o, char *out, size_t size);
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
