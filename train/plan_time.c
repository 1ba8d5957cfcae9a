#include "train/plan_time.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { CLASS_PRODUCT, CLASS_ATTENTION, CLASS_MEMORY, CLASS_SCALAR, CLASSES } op_class;
static const char *const CLASS_NAMES[CLASSES] = {"product (matmul_*, lmhead_*)", "attention", "memory-bound", "scalar"};

/* Every op the per-op timer names (kernels/timed.c), with its class. */
#define METERED_OPS(X)                                                                                                 \
    X(upload, CLASS_MEMORY) X(download, CLASS_MEMORY) X(zero, CLASS_MEMORY) X(cast_params, CLASS_MEMORY)               \
    X(download_floats, CLASS_MEMORY) X(encoder_forward, CLASS_MEMORY) X(encoder_backward, CLASS_MEMORY)                \
    X(layernorm_forward, CLASS_MEMORY) X(layernorm_backward, CLASS_MEMORY) X(matmul_forward, CLASS_PRODUCT)            \
    X(matmul_forward_gelu, CLASS_PRODUCT)                                                                              \
    X(matmul_backward, CLASS_PRODUCT) X(matmul_backward_dgelu, CLASS_PRODUCT) X(lmhead_forward, CLASS_PRODUCT)         \
    X(lmhead_backward, CLASS_PRODUCT) X(attention_forward, CLASS_ATTENTION) X(attention_backward, CLASS_ATTENTION)     \
    X(gelu_forward, CLASS_MEMORY) X(gelu_backward, CLASS_MEMORY) X(bias_residual_add, CLASS_MEMORY)                    \
    X(bias_residual_layernorm, CLASS_MEMORY) X(dropout, CLASS_MEMORY) X(bias_backward, CLASS_MEMORY)                   \
    X(position_forward, CLASS_MEMORY) X(position_backward, CLASS_MEMORY) X(xent_partial, CLASS_MEMORY)                 \
    X(xent_rescale, CLASS_MEMORY) X(xent_finish, CLASS_MEMORY) X(xent_fused, CLASS_MEMORY)                             \
    X(loss_accumulate, CLASS_MEMORY) X(loss_finish, CLASS_SCALAR) X(grad_sumsq, CLASS_MEMORY)                          \
    X(grad_clip_factor, CLASS_SCALAR) X(adamw, CLASS_MEMORY)

enum {
#define M_ENUM(name, cls) M_##name,
    METERED_OPS(M_ENUM)
#undef M_ENUM
        M_COUNT
};
static const char *const OP_NAMES[M_COUNT] = {
#define M_NAME(name, cls) #name,
    METERED_OPS(M_NAME)
#undef M_NAME
};
static const op_class OP_CLASS[M_COUNT] = {
#define M_CLASS(name, cls) cls,
    METERED_OPS(M_CLASS)
#undef M_CLASS
};

struct plan_calib {
    double launch_s;              /* one call's floor: the table's cheapest call */
    double s_per_unit[M_COUNT];   /* seconds per FLOP, byte or call */
    double product_s_per_flop;
};

typedef struct meter {
    const tg_ops *inner;
    const plan_calib *calib;
    double work[M_COUNT], calls[M_COUNT];
    double seconds;
} meter;

static void note(tg_o o, int op, double work) {
    meter *m = o->ctx;
    m->work[op] += work;
    m->calls[op] += 1;
    if (m->calib) m->seconds += m->calib->launch_s + work * m->calib->s_per_unit[op];
}

/* Bytes of n activations. */
static double act(tg_o o, double n) { return n * (double)tg_dtype_bytes(o->act); }

/* Elements of the spans' tensors inside their windows (ZeRO: this rank's). */
static double span_elements(const tg_spans *s) {
    double n = 0;
    for (int i = 0; i < s->n; i++)
        for (int c = 0; c < s->span[i].count; c++) {
            size_t at = 0, b, end, moment;
            while (tg_span_next(&s->span[i], c, &at, &b, &end, &moment)) n += (double)(end - b);
        }
    return n;
}

/* ---- one wrapper per op: its work from its arguments ---- */

static void m_upload(tg_o o, void *dst, const void *src, size_t bytes) { (void)dst, (void)src, note(o, M_upload, (double)bytes); }
static void m_download(tg_o o, void *dst, const void *src, size_t bytes) {
    note(o, M_download, (double)bytes);
    ((const meter *)o->ctx)->inner->download(((const meter *)o->ctx)->inner, dst, src, bytes); /* zeros for the host */
}
static void m_zero(tg_o o, void *p, size_t bytes) { (void)p, note(o, M_zero, (double)bytes); }
static void m_cast_params(tg_o o, void *dst, const float *src, size_t n) { (void)dst, (void)src, note(o, M_cast_params, 4.0 * n + act(o, n)); }
static void m_download_floats(tg_o o, float *dst, const void *src, size_t n) {
    note(o, M_download_floats, 4.0 * n);
    ((const meter *)o->ctx)->inner->download_floats(((const meter *)o->ctx)->inner, dst, src, n);
}
static void m_encoder_forward(tg_o o, void *out, const int32_t *tok, const void *wte, const void *wpe, int B, int T, int C,
                              int vs, int vl) {
    (void)out, (void)tok, (void)wte, (void)wpe, (void)vs, (void)vl;
    note(o, M_encoder_forward, act(o, 2.0 * B * T * C));
}
static void m_encoder_backward(tg_o o, float *dwte, float *dwpe, const void *dout, const int32_t *tok, int B, int T, int C,
                               int vs, int vl) {
    (void)dwte, (void)dwpe, (void)dout, (void)tok, (void)vs, (void)vl;
    note(o, M_encoder_backward, act(o, (double)B * T * C) + 8.0 * B * T * C);
}
static void m_layernorm_forward(tg_o o, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b,
                                int N, int C) {
    (void)out, (void)mean, (void)rstd, (void)inp, (void)w, (void)b;
    note(o, M_layernorm_forward, act(o, 2.0 * N * C));
}
static void m_layernorm_backward(tg_o o, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w,
                                 const float *mean, const float *rstd, int N, int C) {
    (void)dinp, (void)dw, (void)db, (void)dout, (void)inp, (void)w, (void)mean, (void)rstd;
    note(o, M_layernorm_backward, act(o, 4.0 * N * C));
}
static void m_matmul_forward(tg_o o, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    (void)out, (void)inp, (void)w, (void)bias;
    note(o, M_matmul_forward, 2.0 * N * C * OC);
}
/* The product priced as one; the GELU in its epilogue adds no pass over memory. */
static void m_matmul_forward_gelu(tg_o o, void *out, void *pre, const void *inp, const void *w, const void *bias, int N, int C,
                                  int OC) {
    (void)out, (void)pre, (void)inp, (void)w, (void)bias;
    note(o, M_matmul_forward_gelu, 2.0 * N * C * OC);
}
/* A backward product: one N x C x OC product per gradient it makes. */
static double backward_flops(const void *dinp, const void *dw, int N, int C, int OC) {
    return 2.0 * N * C * OC * ((dinp != NULL) + (dw != NULL));
}
static void m_matmul_backward(tg_o o, void *dinp, float *dw, float *dbias, const void *dout, const void *inp, const void *w,
                              int N, int C, int OC) {
    (void)dbias, (void)dout, (void)inp, (void)w;
    note(o, M_matmul_backward, backward_flops(dinp, dw, N, C, OC));
}
static void m_matmul_backward_dgelu(tg_o o, void *dpre, float *dpre_bias, float *dw, const void *dout, const void *inp,
                                    const void *w, const void *pre, int N, int C, int OC) {
    (void)dpre_bias, (void)dout, (void)inp, (void)w, (void)pre;
    note(o, M_matmul_backward_dgelu, backward_flops(dpre, dw, N, C, OC));
}
static void m_lmhead_forward(tg_o o, void *logits, const void *x, const void *wte, int N, int C, int V) {
    (void)logits, (void)x, (void)wte;
    note(o, M_lmhead_forward, 2.0 * N * C * V);
}
static void m_lmhead_backward(tg_o o, void *dx, float *dwte, const void *dlogits, const void *x, const void *wte, int N, int C,
                              int V) {
    (void)dlogits, (void)x, (void)wte;
    note(o, M_lmhead_backward, backward_flops(dx, dwte, N, C, V));
}
/* Causal attention: half of the T x T scores; 2 products forward, 5 backward. */
static double attention_flops(int B, int T, int NH, int HS, int products) {
    return products * 2.0 * B * NH * (double)T * T * HS / 2;
}
static void m_attention_forward(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, tg_dropout d) {
    (void)out, (void)lse, (void)qkv, (void)d;
    note(o, M_attention_forward, attention_flops(B, T, NH, HS, 2));
}
static void m_attention_backward(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse,
                                 int B, int T, int NH, int HS, tg_dropout d) {
    (void)dqkv, (void)dout, (void)out, (void)qkv, (void)lse, (void)d;
    note(o, M_attention_backward, attention_flops(B, T, NH, HS, 5));
}
static void m_gelu_forward(tg_o o, void *out, const void *inp, size_t n) { (void)out, (void)inp, note(o, M_gelu_forward, act(o, 2.0 * n)); }
static void m_gelu_backward(tg_o o, void *dinp, const void *inp, const void *dout, size_t n) {
    (void)dinp, (void)inp, (void)dout;
    note(o, M_gelu_backward, act(o, 3.0 * n));
}
static void m_bias_residual_add(tg_o o, void *out, const void *x, const void *bias, const void *res, int N, int C, tg_dropout d) {
    (void)out, (void)x, (void)bias, (void)res, (void)d;
    note(o, M_bias_residual_add, act(o, 3.0 * N * C));
}
static void m_bias_residual_layernorm(tg_o o, void *out, void *ln_out, float *mean, float *rstd, const void *x, const void *bias,
                                      const void *res, const void *w, const void *b, int N, int C, tg_dropout d) {
    (void)out, (void)ln_out, (void)mean, (void)rstd, (void)x, (void)bias, (void)res, (void)w, (void)b, (void)d;
    note(o, M_bias_residual_layernorm, act(o, 4.0 * N * C));
}
static void m_dropout(tg_o o, void *out, const void *in, int N, int C, tg_dropout d) {
    (void)out, (void)in, (void)d;
    note(o, M_dropout, act(o, 2.0 * N * C));
}
static void m_bias_backward(tg_o o, float *dbias, const void *dout, int N, int C) { (void)dbias, (void)dout, note(o, M_bias_backward, act(o, (double)N * C)); }
static void m_position_forward(tg_o o, void *out, const void *wpe, int row_start, int N, int T, int C) {
    (void)out, (void)wpe, (void)row_start, (void)T;
    note(o, M_position_forward, act(o, 3.0 * N * C));
}
static void m_position_backward(tg_o o, float *dwpe, const void *dout, int row_start, int N, int T, int C) {
    (void)dwpe, (void)dout, (void)row_start, (void)T;
    note(o, M_position_backward, act(o, (double)N * C) + 8.0 * N * C);
}
static void m_xent_partial(tg_o o, float *rowmax, float *local_max, float *stats, const void *logits, const int32_t *targets,
                           int N, int V, int n_real, int vocab_start) {
    (void)rowmax, (void)local_max, (void)stats, (void)logits, (void)targets, (void)n_real, (void)vocab_start;
    note(o, M_xent_partial, act(o, (double)N * V));
}
static void m_xent_rescale(tg_o o, float *stats, const float *local_max, const float *rowmax, int N) {
    (void)stats, (void)local_max, (void)rowmax;
    note(o, M_xent_rescale, 16.0 * N);
}
static void m_xent_finish(tg_o o, float *losses, void *logits, const float *rowmax, const float *stats, const int32_t *targets,
                          int N, int V, int n_real, int vocab_start, float dloss) {
    (void)losses, (void)logits, (void)rowmax, (void)stats, (void)targets, (void)n_real, (void)vocab_start, (void)dloss;
    note(o, M_xent_finish, act(o, 2.0 * N * V));
}
static void m_xent_fused(tg_o o, float *losses, void *logits, const int32_t *targets, int N, int V, int n_real, float dloss) {
    (void)losses, (void)logits, (void)targets, (void)n_real, (void)dloss;
    note(o, M_xent_fused, act(o, 2.0 * N * V));
}
static void m_loss_accumulate(tg_o o, tg_step_stats *s, const float *losses, int N) { (void)s, (void)losses, note(o, M_loss_accumulate, 4.0 * N); }
static void m_loss_finish(tg_o o, tg_step_stats *s, int n_micro, float divisor) { (void)s, (void)n_micro, (void)divisor, note(o, M_loss_finish, 1); }
static void m_grad_sumsq(tg_o o, tg_step_stats *s, const float *g, const tg_spans *spans) { (void)s, (void)g, note(o, M_grad_sumsq, 4.0 * span_elements(spans)); }
static void m_grad_clip_factor(tg_o o, tg_step_stats *s, int reduced, double max_norm) {
    (void)s, (void)reduced, (void)max_norm;
    note(o, M_grad_clip_factor, 1);
}
/* AdamW reads gradient, master, both moments, writes master, moments and the working copy. */
static void m_adamw(tg_o o, float *p, void *work, const float *g, float *m, float *v, const tg_spans *spans,
                    const tg_adamw_args *a, const tg_step_stats *s) {
    (void)p, (void)work, (void)g, (void)m, (void)v, (void)a, (void)s;
    const double n = span_elements(spans);
    note(o, M_adamw, 28.0 * n + act(o, n));
}

static void meter_destroy(tg_ops *o) {
    meter *m = o->ctx;
    ops_destroy((tg_ops *)m->inner);
    free(m);
    free(o);
}

tg_ops *plan_meter_create(tg_dtype act_type, const plan_calib *calib) {
    meter *m = tg_calloc(1, sizeof *m, "plan meter");
    m->inner = ops_null_create(act_type);
    m->calib = calib;
    tg_ops *o = tg_malloc(sizeof *o, "plan meter");
    *o = *m->inner;
    o->name = "meter";
    o->ctx = m;
    o->destroy = meter_destroy;
#define M_SLOT(name, cls) o->name = m_##name;
    METERED_OPS(M_SLOT)
#undef M_SLOT
    return o;
}

double plan_meter_seconds(tg_o o) { return ((const meter *)o->ctx)->seconds; }

void plan_meter_reset(tg_o o) {
    meter *m = o->ctx;
    memset(m->work, 0, sizeof m->work);
    memset(m->calls, 0, sizeof m->calls);
    m->seconds = 0;
}

/* ---- the fit ---- */

static int op_of(const char *name) {
    for (int k = 0; k < M_COUNT; k++)
        if (strcmp(OP_NAMES[k], name) == 0) return k;
    return -1;
}

static void add_note(char *notes, size_t n, const char *fmt, const char *path, int line, const char *op, double a, double b) {
    const size_t used = strlen(notes);
    if (used + 1 < n) snprintf(notes + used, n - used, fmt, path, line, op, a, b);
}

/* Time of the table's launch floor: its cheapest call. */
static double launch_floor_s(const op_table *t) {
    double floor = INFINITY;
    for (int i = 0; i < t->n; i++)
        if (t->rows[i].calls > 0 && t->rows[i].device_ms / 1e3 / t->rows[i].calls < floor)
            floor = t->rows[i].device_ms / 1e3 / t->rows[i].calls;
    return isfinite(floor) ? floor : 0;
}

/* Each op the table has: its rate over its work at the table's shape. */
static int fit_rows(const op_table *t, const meter *m, plan_calib *c, double time[CLASSES], double work[CLASSES], char *notes,
                    size_t n, tg_err *e) {
    for (int i = 0; i < t->n; i++) {
        const op_row *r = &t->rows[i];
        const int k = op_of(r->name);
        if (k < 0) return tg_fail(e, "%s:%d: op: '%s' is not an op the trainer times (kernels/timed.c)", t->path, r->line, r->name);
        if (r->calls <= 0) continue;
        if (m->calls[k] == 0) {
            add_note(notes, n, "%s:%d: %s: %g calls per step in the table, %g in a step at its shape: not used; ",
                     t->path, r->line, r->name, r->calls, 0);
            continue;
        }
        if (fabs(r->calls - m->calls[k]) > 0.005 + 1e-3 * m->calls[k])
            add_note(notes, n, "%s:%d: %s: %g calls per step in the table, %g in a step at its shape; ", t->path, r->line,
                     r->name, r->calls, m->calls[k]);
        const double rest = fmax(0, r->device_ms / 1e3 - r->calls * c->launch_s);
        const double w = m->work[k] * r->calls / m->calls[k]; /* the table's calls, of the dry step's shapes */
        if (w <= 0) continue;
        c->s_per_unit[k] = rest / w;
        time[OP_CLASS[k]] += rest;
        work[OP_CLASS[k]] += w;
    }
    return 0;
}

plan_calib *plan_calib_fit(const op_table *t, tg_o counted, char *notes, size_t n, tg_err *e) {
    const meter *m = counted->ctx;
    plan_calib *c = tg_calloc(1, sizeof *c, "calibration");
    for (int k = 0; k < M_COUNT; k++) c->s_per_unit[k] = -1;
    c->launch_s = launch_floor_s(t);
    double time[CLASSES] = {0}, work[CLASSES] = {0};
    if (fit_rows(t, m, c, time, work, notes, n, e)) {
        free(c);
        return NULL;
    }
    for (int cl = CLASS_PRODUCT; cl <= CLASS_MEMORY; cl++)
        if (work[cl] <= 0 && cl != CLASS_ATTENTION) {
            tg_fail(e, "%s: no %s op with calls in the table: its rate cannot be calibrated", t->path, CLASS_NAMES[cl]);
            free(c);
            return NULL;
        }
    c->product_s_per_flop = time[CLASS_PRODUCT] / work[CLASS_PRODUCT];
    /* An op the table lacks runs at its class's rate (attention without
     * rows: the products'; a scalar op: the launch alone). */
    for (int k = 0; k < M_COUNT; k++) {
        if (c->s_per_unit[k] >= 0) continue;
        const op_class cl = OP_CLASS[k];
        c->s_per_unit[k] = cl == CLASS_SCALAR ? 0 : work[cl] > 0 ? time[cl] / work[cl] : c->product_s_per_flop;
    }
    return c;
}

void plan_calib_free(plan_calib *c) { free(c); }
double plan_calib_seconds_per_flop(const plan_calib *c) { return c->product_s_per_flop; }
double plan_calib_launch_s(const plan_calib *c) { return c->launch_s; }
