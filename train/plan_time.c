#include "train/plan_time.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/op_work.h"

typedef enum { CLASS_PRODUCT, CLASS_ATTENTION, CLASS_MEMORY, CLASS_SCALAR, CLASSES } op_class;
static const char *const CLASS_NAMES[CLASSES] = {"product (matmul_*, lmhead_*)", "attention", "memory-bound", "scalar"};

/* Every op the per-op timer names (kernels/op_work.h's TIMED_OPS), with its
 * class: a name missing here or there stops the build (M_##name, m_##name). */
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

/* ---- one wrapper per op: its work from its arguments (kernels/op_work.h),
 * then the null backend's call (which gives the host zeros to download) ---- */

#define ARGS(...) __VA_ARGS__
#define M_WRAPPER(name, params, args, unit, work)        \
    static void m_##name params {                        \
        const tg_ops *inner = ((const meter *)o->ctx)->inner; \
        note(o, M_##name, (work));                       \
        inner->name(inner, ARGS args);                   \
    }
TIMED_OPS(M_WRAPPER)
#undef M_WRAPPER
#undef ARGS

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
#define M_SLOT(name, cls) o->name = m->inner->name ? m_##name : NULL; /* an optional op the null backend lacks stays absent */
    METERED_OPS(M_SLOT)
#undef M_SLOT
    return o;
}

static int op_of(const char *name);

double plan_meter_work(tg_o o, const char *name, double *calls) {
    const meter *m = o->ctx;
    const int k = op_of(name);
    *calls = k < 0 ? 0 : m->calls[k];
    return k < 0 ? 0 : m->work[k];
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
