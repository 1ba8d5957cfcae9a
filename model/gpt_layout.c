/* Where every parameter of one rank's shard lives, how it maps to the full
 * checkpoint tensor, and how many bytes a run needs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt.h"
#include "model/gpt_internal.h"

const param_spec GPT_PARAM_SPECS[P_KINDS] = {
    [P_WTE] = {"wte.weight", false, SPLIT_VOCAB, true, INIT_NORMAL},
    [P_WPE] = {"wpe.weight", false, SPLIT_NONE, true, INIT_NORMAL},
    [P_LN1_W] = {"h.%d.ln_1.weight", true, SPLIT_NONE, false, INIT_ONE},
    [P_LN1_B] = {"h.%d.ln_1.bias", true, SPLIT_NONE, false, INIT_ZERO},
    [P_QKV_W] = {"h.%d.attn.c_attn.weight", true, SPLIT_QKV_COLS, true, INIT_NORMAL},
    [P_QKV_B] = {"h.%d.attn.c_attn.bias", true, SPLIT_QKV_COLS, false, INIT_ZERO},
    [P_ATTPROJ_W] = {"h.%d.attn.c_proj.weight", true, SPLIT_ROWS, true, INIT_RESIDUAL},
    [P_ATTPROJ_B] = {"h.%d.attn.c_proj.bias", true, SPLIT_NONE, false, INIT_ZERO},
    [P_LN2_W] = {"h.%d.ln_2.weight", true, SPLIT_NONE, false, INIT_ONE},
    [P_LN2_B] = {"h.%d.ln_2.bias", true, SPLIT_NONE, false, INIT_ZERO},
    [P_FC_W] = {"h.%d.mlp.c_fc.weight", true, SPLIT_COLS, true, INIT_NORMAL},
    [P_FC_B] = {"h.%d.mlp.c_fc.bias", true, SPLIT_COLS, false, INIT_ZERO},
    [P_FCPROJ_W] = {"h.%d.mlp.c_proj.weight", true, SPLIT_ROWS, true, INIT_RESIDUAL},
    [P_FCPROJ_B] = {"h.%d.mlp.c_proj.bias", true, SPLIT_NONE, false, INIT_ZERO},
    [P_LNF_W] = {"ln_f.weight", false, SPLIT_NONE, false, INIT_ONE},
    [P_LNF_B] = {"ln_f.bias", false, SPLIT_NONE, false, INIT_ZERO},
};

int gpt_dims_from_config(gpt_dims *d, const tg_config *c, int tp, int tp_rank, tg_err *e) {
    memset(d, 0, sizeof *d);
    d->L = c->model.n_layer;
    d->NH = c->model.n_head;
    d->C = c->model.n_embd;
    d->T = c->model.seq_len;
    d->V = c->model.vocab_size;
    if (d->C % d->NH) return tg_fail(e, "model.n_embd (%d) must be divisible by model.n_head (%d)", d->C, d->NH);
    if (d->NH % tp) return tg_fail(e, "model.n_head (%d) must be divisible by parallel.tp (%d)", d->NH, tp);
    d->HS = d->C / d->NH;
    /* Padding to a multiple of vocab_multiple * tp gives every rank an equal,
     * aligned slice; padded rows are never saved, so checkpoints do not care. */
    int mult = c->model.vocab_multiple * tp;
    d->Vp = (d->V + mult - 1) / mult * mult;
    d->tp = tp;
    d->tp_rank = tp_rank;
    d->NH_local = d->NH / tp;
    d->V_local = d->Vp / tp;
    d->vocab_start = tp_rank * d->V_local;
    return 0;
}

/* Full (checkpoint) and local shapes of one kind. */
static void shapes_of(const gpt_dims *d, param_kind k, int *fr, int *fc, int *lr, int *lc) {
    const int C = d->C, t = d->tp;
    switch (k) {
    case P_WTE: *fr = d->V; *fc = C; *lr = d->V_local; *lc = C; return;
    case P_WPE: *fr = d->T; *fc = C; *lr = d->T; *lc = C; return;
    case P_QKV_W: *fr = C; *fc = 3 * C; *lr = C; *lc = 3 * C / t; return;
    case P_QKV_B: *fr = 1; *fc = 3 * C; *lr = 1; *lc = 3 * C / t; return;
    case P_ATTPROJ_W: *fr = C; *fc = C; *lr = C / t; *lc = C; return;
    case P_FC_W: *fr = C; *fc = 4 * C; *lr = C; *lc = 4 * C / t; return;
    case P_FC_B: *fr = 1; *fc = 4 * C; *lr = 1; *lc = 4 * C / t; return;
    case P_FCPROJ_W: *fr = 4 * C; *fc = C; *lr = 4 * C / t; *lc = C; return;
    default: *fr = 1; *fc = C; *lr = 1; *lc = C; return; /* LayerNorms, replicated biases */
    }
}

/* Fills g->tensors and the per-kind offsets; returns the total float count. */
size_t gpt_layout_params(gpt *g) {
    const gpt_dims *d = &g->d;
    int n = 0;
    for (int k = 0; k < P_KINDS; k++) n += GPT_PARAM_SPECS[k].per_layer ? d->L : 1;
    g->tensors = tg_calloc((size_t)n, sizeof(gpt_tensor), "parameter table");
    g->n_tensors = n;
    size_t off = 0;
    int i = 0;
    for (int k = 0; k < P_KINDS; k++) {
        const param_spec *s = &GPT_PARAM_SPECS[k];
        int fr, fc, lr, lc;
        shapes_of(d, (param_kind)k, &fr, &fc, &lr, &lc);
        g->kind_offset[k] = off;
        g->kind_size[k] = (size_t)lr * lc;
        int layers = s->per_layer ? d->L : 1;
        for (int l = 0; l < layers; l++, i++) {
            gpt_tensor *t = &g->tensors[i];
            t->kind = (param_kind)k;
            t->layer = s->per_layer ? l : -1;
            snprintf(t->name, sizeof t->name, s->name_fmt, l);
            t->full_rows = fr;
            t->full_cols = fc;
            t->rows = lr;
            t->cols = lc;
            t->split = s->split;
            t->decay = s->decay;
            t->is_1d = (k != P_WTE && k != P_WPE && fr == 1);
            t->offset = off;
            t->numel = (size_t)lr * lc;
            off += t->numel;
        }
    }
    return off;
}

long long gpt_full_index(const gpt *g, const gpt_tensor *t, size_t local) {
    const gpt_dims *d = &g->d;
    long long r = (long long)(local / (size_t)t->cols), c = (long long)(local % (size_t)t->cols);
    switch (t->split) {
    case SPLIT_NONE: break;
    case SPLIT_VOCAB:
        r += d->vocab_start;
        if (r >= d->V) return -1;
        break;
    case SPLIT_COLS: c += (long long)d->tp_rank * t->cols; break;
    case SPLIT_QKV_COLS: {
        long long per = t->cols / 3, part = c / per, within = c % per;
        c = part * (t->full_cols / 3) + (long long)d->tp_rank * per + within;
        break;
    }
    case SPLIT_ROWS: r += (long long)d->tp_rank * t->rows; break;
    }
    return r * t->full_cols + c;
}

/* Floats per token of each activation, for one layer and for the model's
 * ends; the same table sizes the allocation (gpt_acts.c) and the budget. */
act_sizes gpt_act_sizes(const gpt_dims *d) {
    const size_t C = (size_t)d->C, t = (size_t)d->tp;
    act_sizes s;
    s.layer_kept = C + 2          /* ln1 + mean, rstd */
                   + 3 * C / t    /* qkv */
                   + C / t        /* attention output */
                   + C            /* residual after attention */
                   + C + 2        /* ln2 + mean, rstd */
                   + 4 * C / t    /* fc pre-GELU */
                   + 4 * C / t    /* fc post-GELU */
                   + C;           /* residual after MLP */
    s.layer_att_per_token_T = (size_t)d->NH_local; /* times T: probabilities */
    s.model_kept = C + C + 2 + 1 + 1 + 2;      /* encoded, lnf + stats, losses, rowmax, xent stats */
    s.logits = (size_t)d->V_local;
    s.scratch = C + C + 3 * C / t + C / t + 4 * C / t; /* dresidual, dln, dqkv, datt, dfc */
    return s;
}

gpt_budget gpt_budget_of(const gpt_dims *d, int B, int T) {
    gpt g;
    memset(&g, 0, sizeof g);
    g.d = *d;
    size_t n_params = gpt_layout_params(&g);
    free(g.tensors);
    act_sizes s = gpt_act_sizes(d);
    size_t tokens = (size_t)B * T, F = sizeof(float);
    gpt_budget b;
    b.params = n_params * F;
    b.grads = n_params * F;
    b.optim = 2 * n_params * F;
    b.acts_attention = (size_t)d->L * tokens * s.layer_att_per_token_T * T * F;
    b.acts_kept = (size_t)d->L * tokens * s.layer_kept * F + tokens * s.model_kept * F + b.acts_attention
                  + 2 * tokens * sizeof(int32_t);
    b.logits = tokens * s.logits * F;
    b.scratch = tokens * s.scratch * F;
    b.total = b.params + b.grads + b.optim + b.acts_kept + b.logits + b.scratch;
    return b;
}
