/* Sampling from the model: during training (from <|endoftext|>, every
 * out.sample_every steps) and for --sample (from a prompt). Every rank runs
 * the same forwards and draws the same tokens (the gathered logits and the
 * counter-based generator agree bitwise); rank 0 prints. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/shard_format.h"
#include "train/modes.h"
#include "util/rng.h"

static int argmax(const float *logits, int V) {
    int best = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    return best;
}

static int descending(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* The k-th largest logit: tokens below it are left out of the draw (ties
 * with it stay in, so the set does not depend on the order of equal values). */
static float top_k_threshold(const float *logits, int V, int k, float *scratch) {
    if (k <= 0 || k >= V) return -INFINITY;
    memcpy(scratch, logits, (size_t)V * sizeof(float));
    qsort(scratch, (size_t)V, sizeof(float), descending);
    return scratch[k - 1];
}

/* Draws from the softmax of logits / temperature over the real vocabulary
 * (restricted to the top k), with the uniform u; temperature 0 is greedy. */
static int draw_token(const float *logits, int V, const sample_opts *o, float u, float *scratch) {
    if (o->temperature <= 0) return argmax(logits, V);
    const float floor_logit = top_k_threshold(logits, V, o->top_k, scratch);
    const float maxv = logits[argmax(logits, V)];
    double sum = 0.0;
    for (int v = 0; v < V; v++)
        if (logits[v] >= floor_logit) sum += exp((double)(logits[v] - maxv) / o->temperature);
    double target = u * sum, acc = 0.0;
    int last = 0;
    for (int v = 0; v < V; v++) {
        if (logits[v] < floor_logit) continue;
        acc += exp((double)(logits[v] - maxv) / o->temperature);
        if (acc > target) return v;
        last = v;
    }
    return last;
}

/* Rows and length of the forward that exposes position t-1 (t <= seq_len):
 * the t tokens, padded under SP to a multiple of tp; past seq_len, the full
 * sequence repeated over enough rows that B*T divides by tp (rows agree, as
 * the model is causal and rows independent). */
static void sample_shape(const tg_config *c, int pad, int t, int *B, int *T) {
    int len = (t + pad - 1) / pad * pad, rows = 1;
    if (len > c->model.seq_len) {
        len = c->model.seq_len;
        while ((rows * len) % pad) rows++;
    }
    *B = rows;
    *T = len;
}

/* The logits of the next token after the last `ctx` tokens (ctx <= seq_len),
 * gathered over TP into logits (Vp floats). fwd holds pad x seq_len tokens. */
static void next_logits(run *r, const int32_t *ctx_tokens, int ctx, int32_t *fwd, float *local, float *logits) {
    const tg_config *c = &r->cfg;
    const gpt_dims *d = &r->model->d;
    const int pad = d->sp ? d->tp : 1; /* SP splits the rows over TP */
    tg_err e;
    int B, T;
    sample_shape(c, pad, ctx, &B, &T);
    memcpy(fwd, ctx_tokens, (size_t)ctx * sizeof(int32_t));
    for (int i = ctx; i < T; i++) fwd[i] = ctx_tokens[ctx - 1]; /* filler after the context: never seen by it */
    for (int b = 1; b < B; b++) memcpy(fwd + (size_t)b * T, fwd, (size_t)T * sizeof(int32_t));
    const gpt_rows_span last = {ctx - 1, 1}; /* the LM head at the one position sampled from */
    if (gpt_forward_rows(r->model, fwd, NULL, B, T, &last, 1, &e)) tg_die(PROG, &e);
    gpt_logits_at(r->model, 0, local);
    if (comm_all_gather(r->tp, logits, local, (size_t)d->V_local, &e)) tg_die(PROG, &e);
}

void sample_print(const run *r, const int32_t *toks, int n) {
    for (int i = 0; i < n; i++) {
        size_t bytes;
        const char *text = r->tok ? tokenizer_decode(r->tok, toks[i], &bytes) : NULL;
        if (text) fwrite(text, 1, bytes, stdout);
    }
    fflush(stdout);
}

uint64_t sample_seed(uint64_t seed, int i) {
    /* 53 bits, so that --seed takes it back (its range is a double's whole numbers) */
    return i == 0 ? seed : rng_bits(seed, rng_stream_of("sample seed"), (uint64_t)i) & ((1ull << 53) - 1);
}

void sample_continue(run *r, int32_t *toks, int len, int n, const sample_opts *o, uint64_t seed,
                     uint64_t counter_base) {
    const tg_config *c = &r->cfg;
    const gpt_dims *d = &r->model->d;
    tg_err e;
    if (r->opt && optim_weights_current(r->opt, r->model, &e)) tg_die(PROG, &e); /* ZeRO: the last update's gather */
    int32_t *fwd = tg_malloc((size_t)d->tp * c->model.seq_len * sizeof(int32_t), "sample");
    float *local = tg_malloc((size_t)d->V_local * sizeof(float), "sample logits");
    float *logits = tg_malloc((size_t)d->Vp * sizeof(float), "sample logits");
    float *scratch = tg_malloc((size_t)d->Vp * sizeof(float), "sample top-k");
    gpt_set_dropout(r->model, 0.0f, 0, 0); /* sampling runs the model without dropout */
    for (int p = len; p < len + n; p++) {
        const int ctx = p < c->model.seq_len ? p : c->model.seq_len; /* a window sliding over the last seq_len */
        next_logits(r, toks + p - ctx, ctx, fwd, local, logits);
        const float u = rng_uniform(seed, rng_stream_of("sample"), counter_base + (uint64_t)p);
        toks[p] = draw_token(logits, c->model.vocab_size, o, u, scratch);
        sample_print(r, toks + p, 1); /* each token as it comes, as a terminal reader expects */
    }
    free(scratch);
    free(logits);
    free(local);
    free(fwd);
}

/* Training's sample: from <|endoftext|> (a document's start, printed first
 * as --sample prints its prompt), within one context, at temperature 1 over
 * the whole vocabulary, keyed by the step. */
void run_sample(run *r) {
    const tg_config *c = &r->cfg;
    const int n = c->out.sample_tokens < c->model.seq_len - 1 ? c->out.sample_tokens : c->model.seq_len - 1;
    int32_t *toks = tg_malloc((size_t)(n + 1) * sizeof(int32_t), "sample");
    toks[0] = c->model.vocab_size > GPT2_EOT_TOKEN ? GPT2_EOT_TOKEN : 0;
    const sample_opts whole_softmax = {NULL, n, 1.0, 0, -1, 1};
    printf("---- sample at step %d ----\n", r->state.step);
    sample_print(r, toks, 1);
    sample_continue(r, toks, 1, n, &whole_softmax, (uint64_t)c->train.seed, (uint64_t)r->state.step << 20);
    printf("\n---------------------------\n");
    fflush(stdout);
    free(toks);
}
