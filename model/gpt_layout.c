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

int gpt_dims_of(gpt_dims *d, const gpt_shape *s, int tp, int tp_rank, tg_err *e) {
    memset(d, 0, sizeof *d);
    d->L = s->n_layer;
    d->NH = s->n_head;
    d->C = s->n_embd;
    d->T = s->seq_len;
    d->V = s->vocab_size;
    if (d->C % d->NH) return tg_fail(e, "model.n_embd (%d) must be divisible by model.n_head (%d)", d->C, d->NH);
    if (d->NH % tp) return tg_fail(e, "model.n_head (%d) must be divisible by parallel.tp (%d)", d->NH, tp);
    d->HS = d->C / d->NH;
    /* Padding to a multiple of vocab_multiple * tp gives every rank an equal,
     * aligned slice; padded rows are never saved, so checkpoints do not care. */
    int mult = s->vocab_multiple * tp;
    d->Vp = (d->V + mult - 1) / mult * mult;
    d->tp = tp;
    d->tp_rank = tp_rank;
    d->NH_local = d->NH / tp;
    d->V_local = d->Vp / tp;
    d->vocab_start = tp_rank * d->V_local;
    d->sp = s->sp && tp > 1;
    d->sp_regather = d->sp && s->sp_regather;
    d->recompute = s->recompute;
    d->dropout = s->dropout;
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

/* Every tensor starts on a multiple of this many elements (32 bytes in
 * float32, 16 in bf16), so matrix-product libraries see aligned operands
 * whatever the widths; the gaps hold zeros that no tensor owns. */
#define TENSOR_ALIGN 8

static size_t gcd(size_t a, size_t b) { return b ? gcd(b, a % b) : a; }

/* n rounded up to a multiple of TENSOR_ALIGN and of d->param_align. */
static size_t align_elems(const gpt_dims *d, size_t n) {
    const size_t extra = d->param_align > 1 ? (size_t)d->param_align : 1;
    const size_t a = TENSOR_ALIGN / gcd(TENSOR_ALIGN, extra) * extra;
    return (n + a - 1) / a * a;
}

/* Fills g->tensors and the per-kind offsets; returns the total element
 * count, gaps included. */
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
        g->kind_size[k] = align_elems(d, (size_t)lr * lc); /* the per-layer stride */
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
            off += g->kind_size[k];
        }
    }
    return off;
}

long long gpt_full_index(const gpt *g, const gpt_tensor *t, size_t local) {
    return gpt_full_index_at(g, t, local, g->d.tp_rank);
}

long long gpt_full_index_at(const gpt *g, const gpt_tensor *t, size_t local, int tp_rank) {
    const gpt_dims *d = &g->d;
    const int vocab_start = tp_rank * d->V_local;
    long long r = (long long)(local / (size_t)t->cols), c = (long long)(local % (size_t)t->cols);
    switch (t->split) {
    case SPLIT_NONE: break;
    case SPLIT_VOCAB:
        r += vocab_start;
        if (r >= d->V) return -1;
        break;
    case SPLIT_COLS: c += (long long)tp_rank * t->cols; break;
    case SPLIT_QKV_COLS: {
        long long per = t->cols / 3, part = c / per, within = c % per;
        c = part * (t->full_cols / 3) + (long long)tp_rank * per + within;
        break;
    }
    case SPLIT_ROWS: r += (long long)tp_rank * t->rows; break;
    }
    return r * t->full_cols + c;
}

static void set_buf(act_buf *b, size_t size, int slots, size_t elem) {
    b->size = size;
    b->slots = slots;
    b->elem = elem;
}

int gpt_act_table(gpt_acts *a, const gpt_dims *d, int B, int T, tg_dtype act, act_entry *out, int max) {
    const size_t N = (size_t)B * T, C = (size_t)d->C, t = (size_t)d->tp, Ns = d->sp ? N / t : N;
    const int L = d->L;
    /* Slots: every layer keeps its own unless recomputation rebuilds it.
     * Selective recomputes only the GELU output (cheap, elementwise): the
     * attention keeps only lse (B*NH*T floats), nothing worth recomputing. */
    const int full = d->recompute == RECOMPUTE_FULL ? 1 : L;
    const int sel = d->recompute == RECOMPUTE_NONE ? L : 1;
    const size_t sp_only = d->sp ? 1 : 0;
    /* A LayerNorm's output as kept: this rank's rows when SP gathers it
     * again in the backward pass (into ln_full, the one buffer of all rows
     * every LayerNorm's gather fills), else all rows (gathered from
     * ln_shard under SP). */
    const size_t ln_kept = d->sp_regather ? Ns * C : N * C, ln_full = d->sp_regather ? N * C : 0;
    const size_t ln_shard = d->sp && !d->sp_regather ? Ns * C : 0;
    /* Float32 whatever the activation type: token ids, LayerNorm and
     * softmax statistics, losses. */
    const act_buf *const f32[] = {&a->tokens, &a->targets, &a->ln1_mean, &a->ln1_rstd, &a->ln2_mean, &a->ln2_rstd,
                                  &a->lse, &a->lnf_mean, &a->lnf_rstd, &a->losses, &a->rowmax, &a->xstats};
    struct { act_buf *b; size_t size; int slots; act_kind kind; } rows[] = {
        {&a->tokens, N, 1, ACT_KEPT}, {&a->targets, N, 1, ACT_KEPT},
        {&a->resid, Ns * C, L + 1, ACT_KEPT},
        {&a->ln1, ln_kept, full, ACT_KEPT}, {&a->ln1_mean, Ns, full, ACT_KEPT}, {&a->ln1_rstd, Ns, full, ACT_KEPT},
        {&a->qkv, N * 3 * C / t, full, ACT_KEPT}, {&a->atty, N * C / t, full, ACT_KEPT},
        {&a->lse, N * (size_t)d->NH_local, full, ACT_ATTENTION},
        {&a->res2, Ns * C, full, ACT_KEPT},
        {&a->ln2, ln_kept, full, ACT_KEPT}, {&a->ln2_mean, Ns, full, ACT_KEPT}, {&a->ln2_rstd, Ns, full, ACT_KEPT},
        {&a->fch, N * 4 * C / t, full, ACT_KEPT}, {&a->fch_gelu, N * 4 * C / t, sel, ACT_KEPT},
        {&a->lnf, ln_kept, 1, ACT_KEPT}, {&a->lnf_mean, Ns, 1, ACT_KEPT}, {&a->lnf_rstd, Ns, 1, ACT_KEPT},
        {&a->logits, N * (size_t)d->V_local, 1, ACT_LOGITS},
        {&a->losses, N, 1, ACT_KEPT}, {&a->rowmax, N, 1, ACT_KEPT}, {&a->xstats, 2 * N, 1, ACT_KEPT},
        {&a->proj, N * C, 1, ACT_SCRATCH}, {&a->ln_shard, ln_shard, 1, ACT_SCRATCH},
        {&a->ln_full, ln_full, 1, ACT_SCRATCH},
        {&a->dres, Ns * C, 1, ACT_SCRATCH}, {&a->dres_full, sp_only * N * C, 1, ACT_SCRATCH},
        {&a->dln_full, N * C, 1, ACT_SCRATCH}, {&a->dln, sp_only * Ns * C, 1, ACT_SCRATCH},
        {&a->dqkv, N * 3 * C / t, 1, ACT_SCRATCH}, {&a->datty, N * C / t, 1, ACT_SCRATCH},
        {&a->dfc, N * 4 * C / t, 1, ACT_SCRATCH},
        {&a->ddrop, d->dropout > 0 ? Ns * C : 0, 1, ACT_SCRATCH},
    };
    int n = (int)(sizeof rows / sizeof rows[0]);
    if (n > max) return -1;
    for (int i = 0; i < n; i++) {
        size_t elem = tg_dtype_bytes(act);
        for (size_t k = 0; k < sizeof f32 / sizeof f32[0]; k++)
            if (rows[i].b == f32[k]) elem = 4;
        set_buf(rows[i].b, rows[i].size, rows[i].slots, elem);
        out[i] = (act_entry){rows[i].b, rows[i].kind};
    }
    return n;
}

size_t gpt_act_bytes(const act_buf *b) { return ((size_t)b->slots * b->size * b->elem + 63) / 64 * 64; }

size_t gpt_param_count(const gpt_dims *d) {
    gpt g;
    memset(&g, 0, sizeof g);
    g.d = *d;
    const size_t n = gpt_layout_params(&g);
    free(g.tensors);
    return n;
}

double gpt_model_flops_per_token(const gpt_dims *d, double full_params) {
    return 6.0 * full_params + 12.0 * d->L * (double)d->C * d->T;
}

double gpt_executed_flops_per_token(const gpt_dims *d, double full_params) {
    const double rerun = d->recompute == RECOMPUTE_FULL ? d->L * (16.0 * d->C * (double)d->C + 4.0 * d->T * (double)d->C) : 0;
    return gpt_model_flops_per_token(d, full_params) + rerun;
}

gpt_budget gpt_budget_of(const gpt_dims *d, int B, int T, size_t n_alloc, tg_dtype act, size_t workspace) {
    gpt_acts a;
    act_entry table[64];
    int n = gpt_act_table(&a, d, B, T, act, table, 64);
    size_t by_kind[ACT_KINDS] = {0};
    for (int i = 0; i < n; i++) by_kind[table[i].kind] += gpt_act_bytes(table[i].buf);
    const size_t F = sizeof(float);
    gpt_budget b;
    /* The working weights, plus float32 master weights when they differ
     * and the model keeps them (else the optimizer counts them). */
    b.params = n_alloc * tg_dtype_bytes(act) + (act == TG_F32 || d->master_in_optim ? 0 : n_alloc * F);
    b.workspace = workspace;
    b.grads = n_alloc * F;
    b.optim = 0;
    b.acts_attention = by_kind[ACT_ATTENTION];
    b.acts_kept = by_kind[ACT_KEPT] + by_kind[ACT_ATTENTION];
    b.logits = by_kind[ACT_LOGITS];
    b.scratch = by_kind[ACT_SCRATCH];
    b.tokens = 0;
    b.total = b.params + b.grads + b.acts_kept + b.logits + b.scratch + b.workspace;
    return b;
}
