/* --eval and --sample: a model used, not trained. They build the run as
 * training does (same ranks, layouts and checks) without the optimizer, read
 * weights from model.init_from or out.dir's newest checkpoint, print their
 * result on rank 0's stdout and write no file. */
#include <stdlib.h>
#include <string.h>

#include "data/shard_format.h"
#include "train/hellaswag.h"
#include "train/modes.h"

sample_opts sample_opts_default(void) { return (sample_opts){NULL, -1, 1.0, 0, -1, 1}; }

/* The ranks and the config checks training has, for a mode; a projection
 * has no real weights to use. */
static void resolve_for_mode(run *r, run_purpose purpose, const char *flag) {
    tg_err e;
    r->purpose = purpose;
    if (r->cfg.parallel.project && tg_fail(&e, "%s: parallel.project is for training steps; %s needs real ranks",
                                           r->cfg.source, flag))
        tg_die(PROG, &e);
    run_resolve_topology(&r->cfg, &r->topo);
}

/* model.init_from when set; else the newest checkpoint in out.dir (the run's
 * own weights, as a resume would take them); else the seed's initial
 * weights. `what` says which, for the result line. */
static void load_weights(run *r, char *what, size_t n) {
    const tg_config *c = &r->cfg;
    char dir[1100];
    tg_err e;
    if (c->model.init_from[0]) {
        if (ckpt_load_model(c->model.init_from, r->model, &e)) tg_die(PROG, &e);
        snprintf(what, n, "%s", c->model.init_from);
    } else if (ckpt_latest(c->out.dir, dir, sizeof dir) >= 0) {
        if (ckpt_load_model(dir, r->model, &e)) tg_die(PROG, &e);
        snprintf(what, n, "%s", dir);
    } else {
        gpt_init_weights(r->model, (uint64_t)c->train.seed);
        snprintf(what, n, "the initial weights of train.seed %lld (no model.init_from, no checkpoint in %s)",
                 c->train.seed, c->out.dir);
    }
}

int mode_eval(run *r) {
    const tg_config *c = &r->cfg;
    tg_err e;
    resolve_for_mode(r, RUN_EVAL, "--eval");
    char where[CFG_PATH_MAX + 64];
    if ((!c->data.val[0] || c->out.eval_batches == 0) &&
        tg_fail(&e, "%s: --eval needs validation shards (data.val) and out.eval_batches other than 0",
                config_origin(c, "data.val out.eval_batches", where, sizeof where)))
        tg_die(PROG, &e);
    run_setup(r);
    char what[CFG_PATH_MAX + 128];
    load_weights(r, what, sizeof what);
    const float val = run_evaluate(r);
    const long long batches = config_eval_windows(c, shards_windows_per_epoch(r->val));
    printf("val loss %.6f (%lld batches of %d x %d tokens; weights: %s)\n", val, batches, c->train.global_batch,
           c->model.seq_len, what);
    run_teardown(r);
    return 0;
}

/* The prompt as tokens, with room for n more; an empty prompt is
 * <|endoftext|> (a document's start), as training's samples begin. */
static int32_t *encode_prompt(const run *r, const char *prompt, int n, int *len) {
    const int V = r->cfg.model.vocab_size;
    int32_t *toks = NULL;
    size_t count = 0, cap = 0;
    tg_err e;
    if (prompt && tokenizer_encode(r->tok, prompt, strlen(prompt), &toks, &count, &cap, &e)) {
        tg_wrap(&e, "--prompt");
        tg_die(PROG, &e);
    }
    int32_t *out = tg_malloc((count + 1 + (size_t)n) * sizeof(int32_t), "prompt");
    if (count) memcpy(out, toks, count * sizeof(int32_t));
    else out[count++] = V > GPT2_EOT_TOKEN ? GPT2_EOT_TOKEN : 0;
    free(toks);
    for (size_t i = 0; i < count; i++)
        if (out[i] >= V && tg_fail(&e, "--prompt: token %d is outside the model's vocabulary (model.vocab_size = %d)",
                                   out[i], V))
            tg_die(PROG, &e);
    *len = (int)count;
    return out;
}

int mode_sample(run *r, const sample_opts *given) {
    sample_opts o = *given;
    resolve_for_mode(r, RUN_SAMPLE, "--sample");
    if (o.max_tokens < 0) o.max_tokens = r->cfg.out.sample_tokens;
    const uint64_t seed = (uint64_t)(o.seed >= 0 ? o.seed : r->cfg.train.seed);
    run_setup(r);
    char what[CFG_PATH_MAX + 128];
    load_weights(r, what, sizeof what);
    int len;
    int32_t *toks = encode_prompt(r, o.prompt, o.max_tokens, &len);
    /* Each sample: the prompt (as the model reads it), then its tokens as
     * they are drawn; several are separated by a line naming each one's seed. */
    for (int i = 0; i < o.num_samples; i++) {
        const uint64_t seed_i = sample_seed(seed, i);
        if (o.num_samples > 1)
            printf("---- sample %d of %d (--seed %llu) ----\n", i + 1, o.num_samples, (unsigned long long)seed_i);
        sample_print(r, toks, len);
        sample_continue(r, toks, len, o.max_tokens, &o, seed_i, 0);
        printf("\n");
        fflush(stdout);
    }
    free(toks);
    run_teardown(r);
    return 0;
}

int mode_hellaswag(run *r, const char *path) {
    const tg_config *c = &r->cfg;
    tg_err e;
    resolve_for_mode(r, RUN_HELLASWAG, "--hellaswag");
    char where[CFG_PATH_MAX + 64];
    if (c->train.micro_batch < HS_ENDINGS &&
        tg_fail(&e, "%s: train.micro_batch (%d) must be at least %d for --hellaswag: a forward pass holds whole "
                    "examples, one row per ending (--set train.micro_batch=%d)",
                config_origin(c, "train.micro_batch", where, sizeof where), c->train.micro_batch, HS_ENDINGS,
                HS_ENDINGS))
        tg_die(PROG, &e);
    run_setup(r);
    char what[CFG_PATH_MAX + 128];
    load_weights(r, what, sizeof what);
    hs_set *s = hellaswag_load(path, r->tok, c->model.vocab_size, c->model.seq_len, &e);
    hs_tally t;
    if (!s || hellaswag_score(r, s, &t, &e)) tg_die(PROG, &e);
    printf("hellaswag acc_norm %.4f (%lld/%lld), acc %.4f (%lld/%lld)", (double)t.correct_norm / t.n, t.correct_norm,
           t.n, (double)t.correct / t.n, t.correct, t.n);
    if (t.cut) printf("; %lld of %lld rows cut to their last %d tokens", t.cut, t.n * HS_ENDINGS, c->model.seq_len);
    printf("; weights: %s\n", what);
    hellaswag_free(s);
    run_teardown(r);
    return 0;
}
