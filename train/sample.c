/* Sampling from the model during training: every rank runs the same
 * forwards and draws the same tokens (the gathered logits and the
 * counter-based generator agree bitwise); rank 0 prints. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/shard_format.h"
#include "train/run.h"
#include "util/rng.h"

/* Draws from the softmax over the real vocabulary with a counter-based
 * uniform, so a sample is a pure function of (seed, step, position). */
static int sample_token(const float *logits, int V, float u) {
    float maxv = -INFINITY;
    for (int v = 0; v < V; v++) maxv = logits[v] > maxv ? logits[v] : maxv;
    double sum = 0.0;
    for (int v = 0; v < V; v++) sum += exp(logits[v] - maxv);
    double target = u * sum, acc = 0.0;
    for (int v = 0; v < V; v++) {
        acc += exp(logits[v] - maxv);
        if (acc > target) return v;
    }
    return V - 1;
}

/* Rows and length of the forward that exposes position t-1: the first t
 * tokens, padded under SP to a multiple of tp; past seq_len, the full
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

/* Every rank runs the same forwards and draws the same tokens (the gathered
 * logits and the generator agree bitwise); rank 0 prints. */
void run_sample(run *r) {
    const tg_config *c = &r->cfg;
    const gpt_dims *d = &r->model->d;
    const int n = c->out.sample_tokens < c->model.seq_len - 1 ? c->out.sample_tokens : c->model.seq_len - 1;
    const int pad = d->sp ? d->tp : 1; /* SP splits the rows over TP */
    const int32_t start = c->model.vocab_size > GPT2_EOT_TOKEN ? GPT2_EOT_TOKEN : 0; /* <|endoftext|> starts a document */
    int32_t *toks = tg_malloc((size_t)pad * c->model.seq_len * sizeof(int32_t), "sample");
    float *local = tg_malloc((size_t)d->V_local * sizeof(float), "sample logits");
    float *logits = tg_malloc((size_t)d->Vp * sizeof(float), "sample logits");
    tg_err e;
    for (int i = 0; i < pad * c->model.seq_len; i++) toks[i] = start;
    gpt_set_dropout(r->model, 0.0f, 0, 0, 0); /* sampling runs the model without dropout */
    printf("---- sample at step %d ----\n", r->state.step);
    for (int t = 1; t <= n; t++) {
        int B, T;
        sample_shape(c, pad, t, &B, &T);
        for (int b = 1; b < B; b++) memcpy(toks + (size_t)b * T, toks, (size_t)T * sizeof(int32_t));
        if (gpt_forward(r->model, toks, NULL, B, T, 0.0f, NULL, &e)) tg_die(PROG, &e);
        gpt_logits_at(r->model, 0, t - 1, T, local);
        if (comm_all_gather(r->tp, logits, local, (size_t)d->V_local, &e)) tg_die(PROG, &e);
        float u = rng_uniform((uint64_t)c->train.seed, rng_stream_of("sample"), ((uint64_t)r->state.step << 20) | t);
        toks[t] = sample_token(logits, c->model.vocab_size, u);
        size_t bytes;
        const char *text = tokenizer_decode(r->tok, toks[t], &bytes);
        if (text) fwrite(text, 1, bytes, stdout);
    }
    printf("\n---------------------------\n");
    fflush(stdout);
    free(logits);
    free(local);
    free(toks);
}
