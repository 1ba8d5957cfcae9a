/* The per-op timer (kernels/timed.h). One wrapper per timed slot of
 * kernels/ops.h, generated from TIMED_OPS; every other slot passes its
 * call on to the wrapped backend (no slot may call a backend function with
 * the wrapper's table: the function would take the timer's state for its
 * own). */
#include "kernels/timed.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Every op a step's time can go to: name, parameters, arguments. */
#define TIMED_OPS(X)                                                                                                       \
    X(upload, (tg_o o, void *dst, const void *src, size_t bytes), (dst, src, bytes))                                       \
    X(download, (tg_o o, void *dst, const void *src, size_t bytes), (dst, src, bytes))                                     \
    X(zero, (tg_o o, void *p, size_t bytes), (p, bytes))                                                                   \
    X(cast_params, (tg_o o, void *dst, const float *src, size_t n), (dst, src, n))                                         \
    X(download_floats, (tg_o o, float *dst, const void *src, size_t n), (dst, src, n))                                     \
    X(encoder_forward,                                                                                                     \
      (tg_o o, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T, int C, int vs, int vl),   \
      (out, tokens, wte, wpe, B, T, C, vs, vl))                                                                            \
    X(encoder_backward,                                                                                                    \
      (tg_o o, float *dwte, float *dwpe, const void *dout, const int32_t *tokens, int B, int T, int C, int vs, int vl),    \
      (dwte, dwpe, dout, tokens, B, T, C, vs, vl))                                                                         \
    X(layernorm_forward,                                                                                                   \
      (tg_o o, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b, int N, int C),          \
      (out, mean, rstd, inp, w, b, N, C))                                                                                  \
    X(layernorm_backward,                                                                                                  \
      (tg_o o, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w, const float *mean,     \
       const float *rstd, int N, int C),                                                                                   \
      (dinp, dw, db, dout, inp, w, mean, rstd, N, C))                                                                      \
    X(matmul_forward_gelu,                                                                                                 \
      (tg_o o, void *out, void *pre, const void *inp, const void *w, const void *bias, int N, int C, int OC),             \
      (out, pre, inp, w, bias, N, C, OC))                                                                                  \
    X(matmul_forward, (tg_o o, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC),         \
      (out, inp, w, bias, N, C, OC))                                                                                       \
    X(matmul_backward,                                                                                                     \
      (tg_o o, void *dinp, float *dw, float *dbias, const void *dout, const void *inp, const void *w, int N, int C,       \
       int OC),                                                                                                            \
      (dinp, dw, dbias, dout, inp, w, N, C, OC))                                                                           \
    X(matmul_backward_dgelu,                                                                                               \
      (tg_o o, void *dpre, float *dpre_bias, float *dw, const void *dout, const void *inp, const void *w, const void *pre,  \
       int N, int C, int OC),                                                                                              \
      (dpre, dpre_bias, dw, dout, inp, w, pre, N, C, OC))                                                                  \
    X(lmhead_forward, (tg_o o, void *logits, const void *x, const void *wte, int N, int C, int V),                         \
      (logits, x, wte, N, C, V))                                                                                           \
    X(lmhead_backward,                                                                                                     \
      (tg_o o, void *dx, float *dwte, const void *dlogits, const void *x, const void *wte, int N, int C, int V),           \
      (dx, dwte, dlogits, x, wte, N, C, V))                                                                                \
    X(attention_forward,                                                                                                   \
      (tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, tg_dropout drop),                     \
      (out, lse, qkv, B, T, NH, HS, drop))                                                                                 \
    X(attention_backward,                                                                                                  \
      (tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B, int T, int NH,    \
       int HS, tg_dropout drop),                                                                                           \
      (dqkv, dout, out, qkv, lse, B, T, NH, HS, drop))                                                                     \
    X(gelu_forward, (tg_o o, void *out, const void *inp, size_t n), (out, inp, n))                                         \
    X(gelu_backward, (tg_o o, void *dinp, const void *inp, const void *dout, size_t n), (dinp, inp, dout, n))              \
    X(bias_residual_add,                                                                                                   \
      (tg_o o, void *out, const void *x, const void *bias, const void *res, int N, int C, tg_dropout drop),                \
      (out, x, bias, res, N, C, drop))                                                                                     \
    X(bias_residual_layernorm,                                                                                             \
      (tg_o o, void *out, void *ln_out, float *mean, float *rstd, const void *x, const void *bias, const void *res,        \
       const void *w, const void *b, int N, int C, tg_dropout drop),                                                       \
      (out, ln_out, mean, rstd, x, bias, res, w, b, N, C, drop))                                                           \
    X(dropout, (tg_o o, void *out, const void *in, int N, int C, tg_dropout drop), (out, in, N, C, drop))                  \
    X(bias_backward, (tg_o o, float *dbias, const void *dout, int N, int C), (dbias, dout, N, C))                          \
    X(position_forward, (tg_o o, void *out, const void *wpe, int row_start, int N, int T, int C),                          \
      (out, wpe, row_start, N, T, C))                                                                                      \
    X(position_backward, (tg_o o, float *dwpe, const void *dout, int row_start, int N, int T, int C),                      \
      (dwpe, dout, row_start, N, T, C))                                                                                    \
    X(xent_partial,                                                                                                        \
      (tg_o o, float *rowmax, float *local_max, float *stats, const void *logits, const int32_t *targets, int N, int V,    \
       int n_real, int vocab_start),                                                                                       \
      (rowmax, local_max, stats, logits, targets, N, V, n_real, vocab_start))                                              \
    X(xent_rescale, (tg_o o, float *stats, const float *local_max, const float *rowmax, int N),                            \
      (stats, local_max, rowmax, N))                                                                                       \
    X(xent_finish,                                                                                                         \
      (tg_o o, float *losses, void *logits, const float *rowmax, const float *stats, const int32_t *targets, int N, int V, \
       int n_real, int vocab_start, float dloss),                                                                          \
      (losses, logits, rowmax, stats, targets, N, V, n_real, vocab_start, dloss))                                          \
    X(xent_fused,                                                                                                          \
      (tg_o o, float *losses, void *logits, const int32_t *targets, int N, int V, int n_real, float dloss),                \
      (losses, logits, targets, N, V, n_real, dloss))                                                                      \
    X(loss_accumulate, (tg_o o, tg_step_stats *s, const float *losses, int N), (s, losses, N))                             \
    X(loss_finish, (tg_o o, tg_step_stats *s, int n_micro, float divisor), (s, n_micro, divisor))                          \
    X(grad_sumsq, (tg_o o, tg_step_stats *s, const float *g, const tg_spans *spans), (s, g, spans))                        \
    X(grad_clip_factor, (tg_o o, tg_step_stats *s, int reduced, double max_norm), (s, reduced, max_norm))                  \
    X(adamw,                                                                                                               \
      (tg_o o, float *p, void *work, const float *g, float *m, float *v, const tg_spans *spans, const tg_adamw_args *a,    \
       const tg_step_stats *s),                                                                                            \
      (p, work, g, m, v, spans, a, s))

enum {
#define OP_ENUM(name, params, args) OP_##name,
    TIMED_OPS(OP_ENUM)
#undef OP_ENUM
        OP_COUNT
};

static const char *const OP_NAMES[OP_COUNT] = {
#define OP_NAME(name, params, args) #name,
    TIMED_OPS(OP_NAME)
#undef OP_NAME
};

/* One call of this step: its op, its events (NULL without a device clock)
 * and the host's time inside it. */
typedef struct {
    int op;
    void *start, *stop;
    double host_ms;
} timed_call;

typedef struct {
    double calls, device_ms, host_ms;
} op_total;

typedef struct {
    const tg_ops *inner;
    timed_call *calls; /* this step's, in order */
    size_t n_calls, cap_calls;
    void **events;     /* created once, reused every step */
    size_t n_events, used_events;
    op_total total[OP_COUNT];
    int steps;
    tg_ops *self;
} timed_state;

static double host_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static void *next_event(timed_state *t) {
    if (t->used_events == t->n_events) {
        t->events = tg_realloc(t->events, (t->n_events + 1) * sizeof *t->events, "op timer events");
        t->events[t->n_events++] = t->inner->event_create(t->inner);
    }
    return t->events[t->used_events++];
}

/* Starts a call's record: returns its index (the list may move later). */
static size_t call_begin(timed_state *t, int op) {
    if (t->n_calls == t->cap_calls) {
        t->cap_calls = t->cap_calls ? 2 * t->cap_calls : 1024;
        t->calls = tg_realloc(t->calls, t->cap_calls * sizeof *t->calls, "op timer calls");
    }
    timed_call *c = &t->calls[t->n_calls];
    c->op = op;
    c->start = c->stop = NULL;
    if (t->inner->event_create) {
        c->start = next_event(t);
        c->stop = next_event(t);
        t->inner->event_record(t->inner, c->start);
    }
    c->host_ms = host_ms();
    return t->n_calls++;
}

static void call_end(timed_state *t, size_t i) {
    timed_call *c = &t->calls[i];
    c->host_ms = host_ms() - c->host_ms;
    if (c->stop) t->inner->event_record(t->inner, c->stop);
}

#define ARGS(...) __VA_ARGS__
#define OP_WRAPPER(name, params, args)                        \
    static void timed_##name params {                         \
        timed_state *t = o->ctx;                              \
        const size_t call = call_begin(t, OP_##name);         \
        t->inner->name(t->inner, ARGS args);                  \
        call_end(t, call);                                    \
    }
TIMED_OPS(OP_WRAPPER)
#undef OP_WRAPPER

const tg_ops *ops_timed_inner(tg_o timed) { return ((const timed_state *)timed->ctx)->inner; }

/* The untimed slots pass the call on with the wrapped backend, whose own
 * state (CUDA's context) they need. */
static void *pass_alloc(tg_o o, size_t bytes, const char *what) {
    const tg_ops *in = ops_timed_inner(o);
    return in->alloc(in, bytes, what);
}
static void pass_free(tg_o o, void *p) { ops_timed_inner(o)->free(ops_timed_inner(o), p); }
static void pass_timer_begin(tg_o o) { ops_timed_inner(o)->timer_begin(ops_timed_inner(o)); }
static double pass_timer_end_ms(tg_o o) { return ops_timed_inner(o)->timer_end_ms(ops_timed_inner(o)); }
static size_t pass_mem_peak(tg_o o) { return ops_timed_inner(o)->mem_peak(ops_timed_inner(o)); }
static double pass_peak_tflops(tg_o o) { return ops_timed_inner(o)->peak_tflops(ops_timed_inner(o)); }

static void timed_destroy(tg_ops *o) {
    timed_state *t = o->ctx;
    for (size_t i = 0; i < t->n_events; i++) t->inner->event_destroy(t->inner, t->events[i]);
    free(t->events);
    free(t->calls);
    ops_destroy(t->inner);
    free(t);
    free(o);
}

tg_ops *ops_timed_create(const tg_ops *inner, tg_err *e) {
    if (inner->event_create && (!inner->event_record || !inner->event_elapsed_ms || !inner->event_destroy)) {
        tg_fail(e, "op timer: the %s backend has only some of the event functions", inner->name);
        return NULL;
    }
    timed_state *t = tg_calloc(1, sizeof *t, "op timer");
    tg_ops *o = tg_calloc(1, sizeof *o, "op timer");
    *o = *inner;
    o->ctx = t;
    o->destroy = timed_destroy;
    o->alloc = pass_alloc;
    o->free = pass_free;
    o->timer_begin = pass_timer_begin;
    o->timer_end_ms = pass_timer_end_ms;
    o->mem_peak = pass_mem_peak;
    o->peak_tflops = pass_peak_tflops;
    o->event_create = NULL; /* the timer's own: nobody times the timer */
    o->event_record = NULL;
    o->event_elapsed_ms = NULL;
    o->event_destroy = NULL;
    o->graph_capture_begin = NULL; /* a graph would hide the ops from the timer */
    o->graph_capture_end = NULL;
    o->graph_launch = NULL;
    o->graph_release = NULL;
#define OP_SLOT(name, params, args) o->name = inner->name ? timed_##name : NULL;
    TIMED_OPS(OP_SLOT)
#undef OP_SLOT
    t->inner = inner;
    t->self = o;
    return o;
}

int ops_timed_steps(tg_o timed) { return ((const timed_state *)timed->ctx)->steps; }

void ops_timed_end_step(tg_o timed, bool count) {
    timed_state *t = timed->ctx;
    if (count) {
        for (size_t i = 0; i < t->n_calls; i++) {
            const timed_call *c = &t->calls[i];
            op_total *tot = &t->total[c->op];
            tot->calls += 1;
            tot->host_ms += c->host_ms;
            tot->device_ms += c->start ? t->inner->event_elapsed_ms(t->inner, c->start, c->stop) : c->host_ms;
        }
        t->steps++;
    }
    t->n_calls = 0;
    t->used_events = 0;
}

/* Ops that ran, by device time, slowest first. */
static int by_device_ms(const void *a, const void *b, void *totals) {
    const op_total *tot = totals;
    const double x = tot[*(const int *)a].device_ms, y = tot[*(const int *)b].device_ms;
    return x < y ? 1 : x > y ? -1 : *(const int *)a - *(const int *)b;
}

void ops_timed_write(tg_o timed, FILE *f, bool tsv) {
    const timed_state *t = timed->ctx;
    if (t->steps == 0) return;
    int order[OP_COUNT], n = 0;
    double all = 0;
    for (int k = 0; k < OP_COUNT; k++)
        if (t->total[k].calls > 0) {
            order[n++] = k;
            all += t->total[k].device_ms;
        }
    qsort_r(order, (size_t)n, sizeof order[0], by_device_ms, (void *)t->total);
    const double steps = t->steps;
    if (tsv) fprintf(f, "op\tcalls_per_step\tdevice_ms_per_step\thost_ms_per_step\tshare\n");
    else fprintf(f, "%-20s %10s %12s %12s %7s\n", "op", "calls/step", "device ms", "host ms", "share");
    for (int i = 0; i < n; i++) {
        const op_total *tot = &t->total[order[i]];
        const double share = all > 0 ? tot->device_ms / all : 0;
        if (tsv)
            fprintf(f, "%s\t%.2f\t%.4f\t%.4f\t%.4f\n", OP_NAMES[order[i]], tot->calls / steps, tot->device_ms / steps,
                    tot->host_ms / steps, share);
        else
            fprintf(f, "%-20s %10.1f %12.3f %12.3f %6.1f%%\n", OP_NAMES[order[i]], tot->calls / steps,
                    tot->device_ms / steps, tot->host_ms / steps, 100 * share);
    }
}
