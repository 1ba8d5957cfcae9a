/* Kernel family: the write-first convention of the ops that make parameter
 * gradients (kernels/ops.h, `acc`): a step's first micro-batch calls them
 * with acc false, and each must then write every element of its d* outputs,
 * whatever they held (NaN here), bitwise what adding onto zeros gives (the
 * zeroing pass the step no longer runs). Covers matmul_backward (dw,
 * dbias), matmul_backward_dgelu (dw, dpre_bias), lmhead_backward (dwte),
 * bias_backward, layernorm_backward (dw, db, and dinp with dacc false, as
 * ln_f's backward writes the residual stream's gradient) and position_backward (a row
 * shard that misses most positions, and one that wraps), each also with no
 * rows at all (an empty sum is a written zero). CPU: write over NaN against
 * add onto zeros, bitwise. With CUDA (or the emulation, tests/emu): the same
 * on the CUDA backend, and its written values against the CPU's (twin.h);
 * C divisible by 8 in fp32 takes the DGELU_BGRAD epilogue, whose bias
 * gradient goes through the scratch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/kernels/check.h"

/* One op's shape: rows N, widths C and OC (the vocabulary for the LM head),
 * and for position_backward the rows' first position row0 and period T. */
typedef struct gw_shape {
    int N, C, OC, T, row0;
} gw_shape;

typedef enum { GW_MATMUL, GW_DGELU, GW_LMHEAD, GW_BIAS, GW_LAYERNORM, GW_POSITION, GW_OPS } gw_op;
static const char *const GW_NAMES[GW_OPS] = {"matmul_backward", "matmul_backward_dgelu", "lmhead_backward",
                                             "bias_backward",   "layernorm_backward",    "position_backward"};

/* Elements of the op's float32 outputs (out[0], out[1]; 0: none). */
static void gw_out_sizes(gw_op op, const gw_shape *s, size_t n[2]) {
    const size_t C = (size_t)s->C, OC = (size_t)s->OC;
    n[1] = 0;
    switch (op) {
    case GW_MATMUL: n[0] = C * OC, n[1] = OC; break;
    case GW_DGELU: n[0] = C * OC, n[1] = C; break;
    case GW_LMHEAD: n[0] = OC * C; break;
    case GW_BIAS: n[0] = C; break;
    case GW_LAYERNORM: n[0] = C, n[1] = C; break;
    case GW_POSITION: n[0] = (size_t)s->T * C; break;
    default: n[0] = 0;
    }
}

/* Inputs (backend memory): a [N, OC] gradient, a [N, C] activation, a [C, OC]
 * weight, a [N, C] GELU input; LayerNorm's w [C], mean and rstd [N] (f32). */
typedef struct gw_inputs {
    void *dout, *inp, *w, *pre, *lnw;
    float *mean, *rstd;
} gw_inputs;

/* Bytes of scratch an op needs for its activation-gradient output (dpre:
 * overwritten; LayerNorm's dinp: written (NaN before) or added to zeros). */
static size_t gw_scratch_bytes(gw_op op, const gw_shape *s, size_t act_bytes) {
    const size_t rows = (size_t)(s->N > 0 ? s->N : 1);
    return op == GW_DGELU || op == GW_LAYERNORM ? rows * (size_t)s->C * act_bytes : 0;
}

/* Fills backend memory with bytes of value v (0xff: NaN in f32 and bf16). */
static void gw_fill(tg_o o, void *p, size_t bytes, int v) {
    unsigned char *h = malloc(bytes ? bytes : 1);
    memset(h, v, bytes);
    o->upload(o, p, h, bytes);
    free(h);
}

/* One call of the op on backend o, its outputs out[0..1], with acc (and
 * LayerNorm's dinp, the scratch, with dacc = acc). */
static void gw_run(tg_o o, gw_op op, const gw_shape *s, const gw_inputs *in, void *scratch, float *const out[2], bool acc) {
    const int N = s->N, C = s->C, OC = s->OC;
    switch (op) {
    case GW_MATMUL: o->matmul_backward(o, NULL, out[0], out[1], in->dout, in->inp, in->w, N, C, OC, acc); break;
    case GW_DGELU: o->matmul_backward_dgelu(o, scratch, out[1], out[0], in->dout, in->inp, in->w, in->pre, N, C, OC, acc); break;
    case GW_LMHEAD: o->lmhead_backward(o, NULL, out[0], in->dout, in->inp, in->w, N, C, OC, acc); break;
    case GW_BIAS: o->bias_backward(o, out[0], in->inp, N, C, acc); break;
    case GW_LAYERNORM:
        gw_fill(o, scratch, gw_scratch_bytes(op, s, tg_dtype_bytes(o->act)), acc ? 0 : 0xff);
        o->layernorm_backward(o, scratch, out[0], out[1], in->pre, in->inp, in->lnw, in->mean, in->rstd, N, C, acc, acc);
        break;
    case GW_POSITION: o->position_backward(o, out[0], in->inp, s->row0, N, s->T, C, acc); break;
    default: break;
    }
}

static void gw_name(char *name, size_t size, const char *prefix, gw_op op, const gw_shape *s) {
    snprintf(name, size, "%s%s N=%d C=%d OC=%d T=%d row0=%d", prefix, GW_NAMES[op], s->N, s->C, s->OC, s->T, s->row0);
}

/* Sizes of the inputs, at least 1 element each (N may be 0). */
typedef struct gw_sizes {
    size_t dout, act, w, rows;
} gw_sizes;
static gw_sizes gw_sizes_of(const gw_shape *s) {
    const size_t rows = (size_t)(s->N > 0 ? s->N : 1);
    return (gw_sizes){rows * (size_t)s->OC, rows * (size_t)s->C, (size_t)s->C * (size_t)s->OC, rows};
}

/* ---- CPU: write over NaN == add onto zeros, bitwise ---- */
static void gw_cpu_case(tally *t, gw_op op, gw_shape s, uint64_t stream) {
    const tg_ops *o = ops_cpu();
    const gw_sizes z = gw_sizes_of(&s);
    gw_inputs in = {randf(z.dout, stream, 1), randf(z.act, stream + 1, 1), randf(z.w, stream + 2, 1),
                    randf(z.act, stream + 3, 2), randf((size_t)s.C, stream + 4, 1), randf(z.rows, stream + 5, 1),
                    randf(z.rows, stream + 6, 1)};
    for (size_t i = 0; i < z.rows; i++) in.rstd[i] = 1.5f + in.rstd[i]; /* positive */
    size_t n[2];
    gw_out_sizes(op, &s, n);
    float *written[2] = {poisoned(n[0]), n[1] ? poisoned(n[1]) : NULL};
    float *added[2] = {calloc(n[0], sizeof(float)), n[1] ? calloc(n[1], sizeof(float)) : NULL};
    const size_t scratch_bytes = gw_scratch_bytes(op, &s, sizeof(float));
    void *scratch = malloc(scratch_bytes + 4), *scratch2 = malloc(scratch_bytes + 4);
    gw_run(o, op, &s, &in, scratch, written, false);
    gw_run(o, op, &s, &in, scratch2, added, true);
    int same = op != GW_LAYERNORM || s.N == 0 || memcmp(scratch, scratch2, scratch_bytes) == 0; /* its dinp's rows too */
    size_t at = 0;
    int which = 0;
    for (int k = 0; k < 2 && same; k++)
        for (size_t i = 0; n[k] && i < n[k]; i++)
            if (memcmp(&written[k][i], &added[k][i], sizeof(float)) != 0) {
                same = 0, at = i, which = k;
                break;
            }
    char name[160];
    gw_name(name, sizeof name, "grad_write_", op, &s);
    report(t, same, name, "output %d element %zu: written %.9g, zeros plus the sum %.9g (or dinp differs)", which, at,
           same ? 0.0 : (double)written[which][at], same ? 0.0 : (double)added[which][at]);
    free(scratch), free(scratch2);
    for (int k = 0; k < 2; k++) free(written[k]), free(added[k]);
    free(in.dout), free(in.inp), free(in.w), free(in.pre), free(in.lnw), free(in.mean), free(in.rstd);
}

/* Shapes not multiples of any tile; N = 0 (no rows); a position shard of 3
 * rows of a period of 7 (4 positions no row is at) and one that wraps. */
void kcheck_grad_writes(tally *t) {
    const gw_shape rows = {11, 19, 23, 0, 0}, none = {0, 19, 23, 0, 0};
    uint64_t stream = 900;
    for (int op = 0; op < GW_POSITION; op++, stream += 8) {
        gw_cpu_case(t, (gw_op)op, rows, stream);
        gw_cpu_case(t, (gw_op)op, none, stream);
    }
    gw_cpu_case(t, GW_POSITION, (gw_shape){3, 13, 0, 7, 5}, stream);
    gw_cpu_case(t, GW_POSITION, (gw_shape){23, 13, 0, 7, 5}, stream + 8);
    gw_cpu_case(t, GW_POSITION, (gw_shape){0, 13, 0, 7, 0}, stream + 16);
}

#ifdef TG_CUDA
/* ---- CUDA: written values against the CPU's, and bitwise its own add onto zeros ---- */
#include "tests/kernels/twin.h"
#include "util/err.h"

static int gw_all_zero(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (x[i] != 0.0f || signbit(x[i])) return 0;
    return 1;
}

void cuda_test_grad_writes(env *e, int op_i, int N, int C, int OC, int T, int row0) {
    const gw_op op = (gw_op)op_i;
    const gw_shape s = {N, C, OC, T, row0};
    const gw_sizes z = gw_sizes_of(&s);
    twin dout = tw_rand(e, ACT, z.dout, -1, 1), inp = tw_rand(e, ACT, z.act, -1, 1), w = tw_rand(e, ACT, z.w, -1, 1);
    twin pre = tw_rand(e, ACT, z.act, -2, 2), lnw = tw_rand(e, ACT, (size_t)C, -1, 1);
    twin mean = tw_rand(e, F32, z.rows, -1, 1), rstd = tw_rand(e, F32, z.rows, 0.5f, 2.5f);
    const gw_inputs in_c = {dout.c, inp.c, w.c, pre.c, lnw.c, mean.c, rstd.c};
    const gw_inputs in_g = {dout.g, inp.g, w.g, pre.g, lnw.g, mean.g, rstd.g};
    size_t n[2];
    gw_out_sizes(op, &s, n);
    twin out[2] = {tw_out(e, F32, n[0]), n[1] ? tw_out(e, F32, n[1]) : (twin){0}};
    float *g_added[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++)
        if (n[k]) {
            g_added[k] = e->gpu->alloc(e->gpu, n[k] * sizeof(float), "zeros plus the sum");
            e->gpu->zero(e->gpu, g_added[k], n[k] * sizeof(float));
        }
    const size_t g_scratch = gw_scratch_bytes(op, &s, gpu_elem(e, ACT));
    void *scr_c = e->cpu->alloc(e->cpu, gw_scratch_bytes(op, &s, 4) + 4, "scratch");
    void *scr_g = e->gpu->alloc(e->gpu, g_scratch + 4, "scratch"), *scr_g2 = e->gpu->alloc(e->gpu, g_scratch + 4, "scratch");
    float *c_out[2] = {out[0].c, out[1].c}, *g_out[2] = {out[0].g, out[1].g};
    gw_run(e->cpu, op, &s, &in_c, scr_c, c_out, false);
    gw_run(e->gpu, op, &s, &in_g, scr_g, g_out, false);
    gw_run(e->gpu, op, &s, &in_g, scr_g2, g_added, true);
    sync_gpu(e);
    char name[160];
    if (op == GW_LAYERNORM && N > 0) { /* dinp written over NaN: the bits of an add onto zeros */
        unsigned char *a = tg_malloc(g_scratch + 1, "dinp"), *b = tg_malloc(g_scratch + 1, "dinp");
        e->gpu->download(e->gpu, a, scr_g, g_scratch);
        e->gpu->download(e->gpu, b, scr_g2, g_scratch);
        gw_name(name, sizeof name, "grad_write_bitwise_dinp_", op, &s);
        check_true(e, memcmp(a, b, g_scratch) == 0, name, "");
        free(a), free(b);
    }
    for (int k = 0; k < 2; k++) {
        if (!n[k]) continue;
        float *written = tg_malloc(n[k] * sizeof(float), "written"), *added = tg_malloc(n[k] * sizeof(float), "added");
        get_floats(e->gpu, TG_F32, written, out[k].g, n[k]);
        get_floats(e->gpu, TG_F32, added, g_added[k], n[k]);
        char prefix[48];
        snprintf(prefix, sizeof prefix, "grad_write_out%d_", k);
        gw_name(name, sizeof name, prefix, op, &s);
        if (N > 0) {
            check(e, out[k], e->tol, "%s", name);
        } else {
            char detail[64] = "(every element +0)";
            check_true(e, gw_all_zero(written, n[k]), name, detail);
        }
        size_t at = 0;
        while (at < n[k] && memcmp(&written[at], &added[at], sizeof(float)) == 0) at++;
        char detail[128];
        snprintf(detail, sizeof detail, "(element %zu of %zu: written %.9g, zeros plus the sum %.9g)", at, n[k],
                 at < n[k] ? (double)written[at] : 0.0, at < n[k] ? (double)added[at] : 0.0);
        snprintf(prefix, sizeof prefix, "grad_write_bitwise_out%d_", k);
        gw_name(name, sizeof name, prefix, op, &s);
        check_true(e, at == n[k], name, at == n[k] ? "" : detail);
        free(written), free(added);
        e->gpu->free(e->gpu, g_added[k]);
        tw_free(e, out[k]);
    }
    e->cpu->free(e->cpu, scr_c);
    e->gpu->free(e->gpu, scr_g);
    e->gpu->free(e->gpu, scr_g2);
    twin all[] = {dout, inp, w, pre, lnw, mean, rstd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
}

/* Every op at a shape of whole 16-byte packs (C = 72, the fused DGELU_BGRAD
 * path in fp32), one of none (C = 13), with no rows, and the position
 * shards of kcheck_grad_writes. */
void cuda_test_grad_writes_all(env *e) {
    for (int op = 0; op < GW_POSITION; op++) {
        cuda_test_grad_writes(e, op, 39, 72, 40, 0, 0);
        cuda_test_grad_writes(e, op, 7, 13, 29, 0, 0);
        cuda_test_grad_writes(e, op, 0, 16, 24, 0, 0);
    }
    cuda_test_grad_writes(e, GW_POSITION, 3, 13, 0, 7, 5);
    cuda_test_grad_writes(e, GW_POSITION, 23, 72, 0, 7, 5);
    cuda_test_grad_writes(e, GW_POSITION, 0, 13, 0, 7, 0);
}
#endif
