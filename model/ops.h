/* The backend interface: every kernel the orchestrator (model/gpt.c) calls.
 * One table per backend; buffers are backend memory the orchestrator never
 * dereferences. Shapes: N = B*T rows, C = width, OC = output width; weights
 * are stored as Hugging Face GPT-2 does, [in, out].
 * Convention: outputs named d* of weights and biases ACCUMULATE (+=), so
 * gradient accumulation over micro-batches needs no extra pass; activation
 * gradients are overwritten unless a comment says otherwise. */
#ifndef MODEL_OPS_H
#define MODEL_OPS_H

#include <stddef.h>
#include <stdint.h>

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

typedef struct tg_ops {
    const char *name;

    /* memory */
    void *(*alloc)(size_t bytes, const char *what);
    void (*free)(void *p);
    void (*upload)(void *dst, const void *host_src, size_t bytes);
    void (*download)(void *host_dst, const void *src, size_t bytes);
    void (*zero)(void *p, size_t bytes);

    /* x = wte[token - vocab_start] (zero row for tokens outside this rank's
     * [vocab_start, vocab_start + vocab_local)) + wpe[t] (if wpe != NULL). */
    void (*encoder_forward)(float *out, const int32_t *tokens, const float *wte, const float *wpe, int B, int T, int C,
                            int vocab_start, int vocab_local);
    /* dwte, dwpe accumulate; either may be NULL. */
    void (*encoder_backward)(float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B, int T, int C,
                             int vocab_start, int vocab_local);

    /* LayerNorm over the last dim, eps 1e-5; saves mean and 1/std per row. */
    void (*layernorm_forward)(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b, int N,
                              int C);
    /* dinp ACCUMULATES (it is the residual stream's gradient), dw, db too. */
    void (*layernorm_backward)(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                               const float *mean, const float *rstd, int N, int C);

    /* out[N,OC] = inp[N,C] @ w[C,OC] (+ bias if non-NULL). */
    void (*matmul_forward)(float *out, const float *inp, const float *w, const float *bias, int N, int C, int OC);
    /* dinp = dout @ w^T (skipped if NULL); dw += inp^T @ dout; dbias += column sums (if non-NULL). */
    void (*matmul_backward)(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w, int N,
                            int C, int OC);
    /* logits[N,V] = x[N,C] @ wte[V,C]^T (the LM head tied to the embedding). */
    void (*lmhead_forward)(float *logits, const float *x, const float *wte, int N, int C, int V);
    /* dx = dlogits @ wte; dwte += dlogits^T @ x. */
    void (*lmhead_backward)(float *dx, float *dwte, const float *dlogits, const float *x, const float *wte, int N, int C,
                            int V);

    /* Causal self-attention of this rank's NH heads. qkv rows hold
     * [q heads | k heads | v heads], each NH*HS wide; att keeps the
     * probabilities [B, NH, T, T] for the backward pass. */
    void (*attention_forward)(float *out, float *att, const float *qkv, int B, int T, int NH, int HS, tg_dropout drop);
    void (*attention_backward)(float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int NH,
                               int HS, tg_dropout drop);

    /* GELU, tanh approximation. Backward may run in place (dinp == dout). */
    void (*gelu_forward)(float *out, const float *inp, size_t n);
    void (*gelu_backward)(float *dinp, const float *inp, const float *dout, size_t n);

    /* out = a + b (out may alias a). */
    void (*add)(float *out, const float *a, const float *b, size_t n);
    /* out[n, c] = dropout(x[n, c] + bias[c]) + res[n, c] over N rows (out may
     * alias x or res): a row-parallel layer's bias, added after the
     * reduction, its dropout, and the residual connection. */
    void (*bias_residual_add)(float *out, const float *x, const float *bias, const float *res, int N, int C,
                              tg_dropout drop);
    /* out = dropout(in) over N rows of C (in place allowed): the embedding's
     * dropout forward, and every dropout's backward (the same mask). */
    void (*dropout)(float *out, const float *in, int N, int C, tg_dropout drop);
    /* dbias[c] += sum over rows of dout[:, c]. */
    void (*bias_backward)(float *dbias, const float *dout, int N, int C);
    /* Rows [row_start, row_start + N) of the flattened [B, T] token grid:
     * out[n] += wpe[(row_start + n) % T], and its gradient dwpe[...] += dout[n]. */
    void (*position_forward)(float *out, const float *wpe, int row_start, int N, int T, int C);
    void (*position_backward)(float *dwpe, const float *dout, int row_start, int N, int T, int C);

    /* Vocab-parallel cross-entropy in three passes, so that a TP group can
     * combine the per-row statistics between them. Columns >= n_real of this
     * rank's V columns are padding and never get probability.
     * 1) rowmax[N] = max over this rank's real logits. */
    void (*xent_rowmax)(float *rowmax, const float *logits, int N, int V, int n_real);
    /* 2) stats[2N] = (sum exp(logit - rowmax), target logit or 0 when the
     *    target is not among this rank's columns [vocab_start, +V)). */
    void (*xent_stats)(float *stats, const float *logits, const float *rowmax, const int32_t *targets, int N, int V,
                       int n_real, int vocab_start);
    /* 3) losses[N] = log(sumexp) + rowmax - target logit; the logits are
     *    overwritten by their gradient (softmax - onehot) * dloss. */
    void (*xent_finish)(float *losses, float *logits, const float *rowmax, const float *stats, const int32_t *targets, int N,
                        int V, int n_real, int vocab_start, float dloss);

    /* Sum of squares (in double), for the global gradient norm. */
    double (*sum_squares)(const float *x, size_t n);
    /* x *= s */
    void (*scale)(float *x, float s, size_t n);
    /* torch.optim.AdamW on one tensor; bc1 = 1 - beta1^t, bc2 = 1 - beta2^t. */
    void (*adamw)(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps,
                  float weight_decay, float bc1, float bc2);
} tg_ops;

const tg_ops *ops_cpu(void);

#endif
