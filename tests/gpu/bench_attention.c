/* The fused attention alone, timed on the device at the benchmark models'
 * shapes: the forward in each block shape built for the head size, then
 * the backward in each of its shapes (the dq kernel's row tiles and the
 * dk, dv kernel's key tiles a warp), the
 * tuned shape (which every run takes) first in both: kernels/cuda/
 * kernels.h's cuda_attention_forward_shaped and _backward_shaped; then the
 * backward as one kernel of five products a tile
 * (cuda_attention_backward_fused), and on Hopper the wgmma kernels. The
 * tuned forward runs in each order of the blocks (kernels.h's
 * cuda_flash_order: pairs first, every run's; tiles first, the order
 * before; L2 groups), the rest in every run's order (the backward's only). So that a
 * lent GPU decides the tile shapes and the order in one short call, and the attention's
 * own rate sits beside PyTorch's (scripts/attention_reference.py).
 *
 *   build/gpu/bench_attention [--shape B,NH,T,HS]... [--warmup N] [--runs N]
 *
 * Default shapes: GPT-2 124M at micro-batch 16 (16,12,1024,64), the
 * Megatron 1.2B model at 8 (8,16,1024,96), and head size 128
 * (8,16,1024,128). Each time is the device's (CUDA events around one call,
 * after N warm-up calls; --warmup 5 and --runs 20 by default): median,
 * min and max. TFLOP/s counts the causal half of the products, as
 * scripts/attention_reference.py and the op table's rate columns do
 * (kernels/op_work.h): forward 2 B NH T^2 HS (issue 36's 2 B T^2 C a
 * layer), backward 2.5 times that; of_ceiling is that rate over the
 * device's products' ceiling (kernels/op_rates.h, named on a '#' line; NA
 * for a device not in its table). Without dropout, bf16.
 *
 * Every shape's result is checked against the tuned shape's: the same bits
 * in every order, for every backward shape and for a forward shape with the same keys per
 * tile (only the roundings of the online softmax depend on that), else
 * within 2e-2 of the largest value (bf16's rounding of P and out at
 * another running max). A failed check prints "not ok" on its row and
 * makes the exit status 1; no CUDA device makes it 2 (as
 * test_cuda_kernels), bad options 3. Output: one tab-separated row per
 * measurement under a header line, and lines starting with '#' that say
 * what ran where. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/kernels.h"
#include "kernels/op_rates.h"
#include "kernels/ops.h"
#include "tests/gpu/bench_attention.h"
#include "util/dtype.h"
#include "util/err.h"
#include "util/rng_core.h"

#define MAX_SHAPES 8
#define MAX_CASES 16
#define BENCH_SEED 20261128u

typedef struct {
    int warmup, runs;
    attn_case cases[MAX_CASES];
    int n_cases;
} bench_opts;

typedef struct {
    double median, min, max;
} timing;

static int usage(const char *prog) {
    fprintf(stderr,
            "usage: %s [--shape B,NH,T,HS]... [--warmup N] [--runs N]\n"
            "  times the fused attention (bf16, causal, no dropout): the forward and the backward in each\n"
            "  block shape built for the head size. Default shapes: 16,12,1024,64 8,16,1024,96 8,16,1024,128\n",
            prog);
    return 3;
}

static int parse_count(const char *s, int lo, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > 100000) return 0;
    *out = (int)v;
    return 1;
}

static int parse_case(const char *s, attn_case *c) {
    char tail;
    if (sscanf(s, "%d,%d,%d,%d%c", &c->B, &c->NH, &c->T, &c->HS, &tail) != 4) return 0;
    return c->B > 0 && c->NH > 0 && c->T > 0 && c->HS > 0 && c->B <= 4096 && c->NH <= 4096 && c->T <= 1 << 20 &&
           c->HS <= 4096;
}

/* 1 when the command line is good (opts filled), else 0 with a message. */
static int parse_opts(int argc, char **argv, bench_opts *opts) {
    static const attn_case defaults[] = {{16, 12, 1024, 64}, {8, 16, 1024, 96}, {8, 16, 1024, 128}};
    *opts = (bench_opts){.warmup = 5, .runs = 20};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(arg, "--shape") == 0 && val) {
            if (opts->n_cases == MAX_CASES || !parse_case(val, &opts->cases[opts->n_cases])) {
                fprintf(stderr, "bench_attention: --shape '%s': want B,NH,T,HS (positive; at most %d shapes)\n", val, MAX_CASES);
                return 0;
            }
            opts->n_cases++;
        } else if (strcmp(arg, "--warmup") == 0 && val) {
            if (!parse_count(val, 0, &opts->warmup)) {
                fprintf(stderr, "bench_attention: --warmup '%s': want a whole number from 0\n", val);
                return 0;
            }
        } else if (strcmp(arg, "--runs") == 0 && val) {
            if (!parse_count(val, 1, &opts->runs)) {
                fprintf(stderr, "bench_attention: --runs '%s': want a whole number from 1\n", val);
                return 0;
            }
        } else {
            fprintf(stderr, "bench_attention: unknown or incomplete option '%s'\n", arg);
            return 0;
        }
        i++;
    }
    if (opts->n_cases == 0) {
        memcpy(opts->cases, defaults, sizeof defaults);
        opts->n_cases = (int)(sizeof defaults / sizeof defaults[0]);
    }
    return 1;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* What a timed call runs: the forward or the backward in shape `shape`
 * of the head size's list, its blocks in `order`; shape SHAPE_WGMMA: the
 * wgmma forward or backward (dq by route `dq`), SHAPE_WGMMA_WS: the
 * warp-specialized forward, SHAPE_FUSED: the fused mma.sync backward,
 * SHAPE_WGMMA_KV_SHARED: the wgmma backward with K and V read from shared
 * memory at head size 64, SHAPE_WGMMA_TWO_STAGES: with two stages of Q and
 * dout at head sizes 64 and 96, SHAPE_WGMMA_PERSISTENT: as a persistent
 * kernel at head size 64, SHAPE_WGMMA_L2_ROUNDS: in rounds of at most
 * L2_ROUND_BYTES of dq slots, SHAPE_WGMMA_L2_ROUNDS_SUMMED: the same with
 * the slots summed in the kernel. */
#define SHAPE_WGMMA (-1)
#define SHAPE_WGMMA_WS (-2)
#define SHAPE_FUSED (-3)
#define SHAPE_WGMMA_KV_SHARED (-4)
#define SHAPE_WGMMA_WS_PERSISTENT (-5)
#define SHAPE_WGMMA_TWO_STAGES (-6)
#define SHAPE_WGMMA_WS_POLY4 (-7)
#define SHAPE_WGMMA_WS_POLY8 (-8)
#define SHAPE_WGMMA_PERSISTENT (-9)
#define SHAPE_WGMMA_L2_ROUNDS (-10)
#define SHAPE_WGMMA_L2_ROUNDS_SUMMED (-11)
/* Half an H200's 50 MB L2: the slots a round writes, read back by its
 * reduction, beside the round's Q, K, V and dout. */
#define L2_ROUND_BYTES ((size_t)24 << 20)
typedef struct {
    tg_o o;
    const attn_case *c;
    const attn_buffers *buf;
    int backward, shape;
    cuda_flash_order order;
    cuda_wgmma_dq dq; /* the wgmma backward's only */
} attn_call;

/* The wgmma forward of row shape `shape` (SHAPE_WGMMA, _WS,
 * _WS_PERSISTENT, one block an SM, or _WS_POLY4 and 8, one exponential in
 * 4 or 8 on the FMA units), once: 1 when it has an instance here. */
static int run_forward_wgmma(tg_o o, int shape, const attn_case *c, const attn_buffers *b) {
    const tg_dropout none = {0};
    if (shape == SHAPE_WGMMA_WS_POLY4 || shape == SHAPE_WGMMA_WS_POLY8)
        return cuda_attention_forward_wgmma_ws_poly(o, b->out, b->lse, b->qkv, c->B, c->T, c->NH, c->HS,
                                                    shape == SHAPE_WGMMA_WS_POLY4 ? 4 : 8);
    if (shape == SHAPE_WGMMA) return cuda_attention_forward_wgmma(o, b->out, b->lse, b->qkv, c->B, c->T, c->NH, c->HS, none);
    if (shape == SHAPE_WGMMA_WS) return cuda_attention_forward_wgmma_ws(o, b->out, b->lse, b->qkv, c->B, c->T, c->NH, c->HS, none);
    return cuda_attention_forward_wgmma_ws_persistent(o, b->out, b->lse, b->qkv, c->B, c->T, c->NH, c->HS, none, 0);
}

/* The persistent wgmma backward at a block an SM (the form
 * bench_backward_wgmma_form takes). */
static int persistent_backward(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B,
                               int T, int NH, int HS) {
    return cuda_attention_backward_wgmma_persistent(o, dqkv, dout, out, qkv, lse, B, T, NH, HS, 0);
}

/* The wgmma backward in rounds of at most L2_ROUND_BYTES of dq slots (the
 * form bench_backward_wgmma_form takes). */
static int l2_rounds_backward(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B,
                              int T, int NH, int HS) {
    return cuda_attention_backward_wgmma_rounds(o, dqkv, dout, out, qkv, lse, B, T, NH, HS, L2_ROUND_BYTES, 0);
}
/* As l2_rounds_backward, the slots summed in the kernel (CUDA_WGMMA_DQ_SUMMED's route). */
static int l2_rounds_summed_backward(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B,
                                     int T, int NH, int HS) {
    return cuda_attention_backward_wgmma_rounds(o, dqkv, dout, out, qkv, lse, B, T, NH, HS, L2_ROUND_BYTES, 1);
}

static void run_call(const attn_call *call) {
    const attn_case *c = call->c;
    const attn_buffers *b = call->buf;
    if (call->backward && call->shape == SHAPE_FUSED)
        cuda_attention_backward_fused(call->o, b->dqkv, b->dout, b->tuned_out, b->qkv, b->lse, c->B, c->T, c->NH, c->HS);
    else if (call->backward && call->shape == SHAPE_WGMMA_KV_SHARED)
        cuda_attention_backward_wgmma_kv_shared(call->o, b->dqkv, b->dout, b->tuned_out, b->qkv, b->lse, c->B, c->T, c->NH, c->HS);
    else if (call->backward && call->shape == SHAPE_WGMMA_TWO_STAGES)
        cuda_attention_backward_wgmma_two_stages(call->o, b->dqkv, b->dout, b->tuned_out, b->qkv, b->lse, c->B, c->T, c->NH, c->HS);
    else if (call->backward && call->shape == SHAPE_WGMMA_PERSISTENT)
        persistent_backward(call->o, b->dqkv, b->dout, b->tuned_out, b->qkv, b->lse, c->B, c->T, c->NH, c->HS);
    else if (call->backward && call->shape == SHAPE_WGMMA_L2_ROUNDS)
        l2_rounds_backward(call->o, b->dqkv, b->dout, b->tuned_out, b->qkv, b->lse, c->B, c->T, c->NH, c->HS);
    else if (call->backward && call->shape == SHAPE_WGMMA_L2_ROUNDS_SUMMED)
        l2_rounds_summed_backward(call->o, b->dqkv, b->dout, b->tuned_out, b->qkv, b->lse, c->B, c->T, c->NH, c->HS);
    else if (call->backward && call->shape == SHAPE_WGMMA)
        cuda_attention_backward_wgmma_dq(call->o, b->dqkv, b->dout, b->tuned_out, b->qkv, b->lse, c->B, c->T, c->NH, c->HS,
                                         (tg_dropout){0}, call->dq, NULL);
    else if (call->backward)
        cuda_attention_backward_shaped(call->o, b->dqkv, b->dout, b->tuned_out, b->qkv, b->lse, c->B, c->T, c->NH, c->HS,
                                       call->shape);
    else if (call->shape < 0) /* the forward's SHAPE_ values: the wgmma forwards */
        run_forward_wgmma(call->o, call->shape, c, b);
    else
        cuda_attention_forward_shaped(call->o, b->out, b->lse, b->qkv, c->B, c->T, c->NH, c->HS, call->shape, call->order);
}

/* Median, min and max of `runs` calls, each between two device marks, after `warmup`. */
static timing time_call(const attn_call *call, const bench_opts *opts) {
    double *ms = tg_malloc((size_t)opts->runs * sizeof *ms, "bench_attention: times");
    for (int i = 0; i < opts->warmup; i++) run_call(call);
    for (int i = 0; i < opts->runs; i++) {
        call->o->timer_begin(call->o);
        run_call(call);
        ms[i] = call->o->timer_end_ms(call->o);
    }
    qsort(ms, (size_t)opts->runs, sizeof *ms, cmp_double);
    const int n = opts->runs;
    timing t = {n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]), ms[0], ms[n - 1]};
    free(ms);
    return t;
}

/* n bf16 values uniform in [-amp, amp) from stream `stream` into device memory. */
static void *device_random(tg_o o, size_t n, float amp, uint64_t stream, const char *what) {
    uint16_t *h = tg_malloc(n * sizeof *h, what);
    for (size_t i = 0; i < n; i++) h[i] = tg_f32_to_bf16(amp * (2.0f * rng_uniform_core(BENCH_SEED, stream, i) - 1.0f));
    void *d = o->alloc(o, n * sizeof *h, what);
    o->upload(o, d, h, n * sizeof *h);
    free(h);
    return d;
}

static attn_buffers buffers_alloc(tg_o o, const attn_case *c) {
    attn_buffers b;
    b.n_qkv = (size_t)c->B * c->T * 3 * c->NH * c->HS;
    b.n_out = (size_t)c->B * c->T * c->NH * c->HS;
    b.n_lse = (size_t)c->B * c->NH * c->T;
    b.qkv = device_random(o, b.n_qkv, 1.0f, 1, "bench_attention: qkv");
    b.dout = device_random(o, b.n_out, 1.0f, 2, "bench_attention: dout");
    b.out = o->alloc(o, b.n_out * 2, "bench_attention: out");
    b.tuned_out = o->alloc(o, b.n_out * 2, "bench_attention: the tuned shape's out");
    b.dqkv = o->alloc(o, b.n_qkv * 2, "bench_attention: dqkv");
    b.tuned_dqkv = o->alloc(o, b.n_qkv * 2, "bench_attention: the tuned shape's dqkv");
    b.lse = o->alloc(o, b.n_lse * sizeof(float), "bench_attention: lse");
    return b;
}

static void buffers_free(tg_o o, attn_buffers *b) {
    void *all[] = {b->qkv, b->dout, b->out, b->tuned_out, b->dqkv, b->tuned_dqkv, b->lse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) o->free(o, all[i]);
}

/* max |got - want| / max |want| over n bf16 values; inf on a NaN or infinity. */
static double rel_err_bf16(const uint16_t *got, const uint16_t *want, size_t n) {
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double g = tg_bf16_to_f32(got[i]), w = tg_bf16_to_f32(want[i]);
        if (!isfinite(g) || !isfinite(w)) return INFINITY;
        diff = fmax(diff, fabs(g - w));
        scale = fmax(scale, fabs(w));
    }
    return diff / fmax(scale, 1e-30);
}

int check_shape(tg_o o, const void *got_dev, const void *want_dev, size_t n, int want_same_bits, char *verdict,
                       size_t len) {
    uint16_t *got = tg_malloc(n * 2, "bench_attention: a shape's result"), *want = tg_malloc(n * 2, "bench_attention: the tuned result");
    o->download(o, got, got_dev, n * 2);
    o->download(o, want, want_dev, n * 2);
    const int same = memcmp(got, want, n * 2) == 0;
    const double err = rel_err_bf16(got, want, n);
    free(got);
    free(want);
    const int ok = want_same_bits ? same : err < SHAPE_TOL;
    if (same)
        snprintf(verdict, len, "%s", "same bits");
    else if (ok)
        snprintf(verdict, len, "err=%.3g", err);
    else
        snprintf(verdict, len, "not ok: %s (err=%.3g)", want_same_bits ? "bits differ from the tuned shape's" : "too far", err);
    return ok;
}

/* TFLOP of `products` causal products (forward 2, backward 5). */
static double attention_tflop(const attn_case *c, int products) {
    return op_work_attention_flops(c->B, c->T, c->NH, c->HS, products) * 1e-12;
}

/* The orders shape k runs in: every order for the tuned shape (k = 0),
 * every run's for the others. */
static int orders_of_shape(int k) { return k == 0 ? CUDA_FLASH_ORDERS : 1; }

/* An order's name in the rows, with its group size at this case's T and
 * head size ("L2 groups of 100"). */
static void order_label(const attn_case *c, int order, char *out, size_t len) {
    if (order == CUDA_FLASH_L2_GROUPS)
        snprintf(out, len, "%s of %d", cuda_flash_order_name(order), cuda_flash_l2_group(c->T, c->HS));
    else
        snprintf(out, len, "%s", cuda_flash_order_name(order));
}

/* A row; ceiling: the products' TFLOP/s (<= 0: unknown, NA). */
static void print_row(const attn_case *c, const char *op, const char *shape, int order, timing t, double tflop,
                      double ceiling, const char *check) {
    char ord[48], of[16] = "NA";
    order_label(c, order, ord, sizeof ord);
    const double rate = tflop / (t.median * 1e-3);
    if (ceiling > 0) snprintf(of, sizeof of, "%.3f", rate / ceiling);
    printf("%d,%d,%d,%d\t%s\t%s\t%s\t%.4f\t%.4f\t%.4f\t%.1f\t%s\t%s\n", c->B, c->NH, c->T, c->HS, op, shape, ord, t.median,
           t.min, t.max, rate, of, check);
    fflush(stdout);
}

/* The wgmma forwards (kernels.attention = wgmma and wgmma_ws; compute
 * capability 9.0, head sizes 64, 96 and 128): a row each against the tuned mma.sync
 * shape (within the tolerance: the tensor cores' orders may differ), or a
 * note where they have no instance. Returns the failed checks. */
static int bench_forward_wgmma(tg_o o, const attn_case *c, const attn_buffers *buf, const bench_opts *opts,
                               double ceiling) {
    static const struct {
        int shape;
        const char *name;
    } rows[] = {
        {SHAPE_WGMMA, "wgmma: 64 query rows a warpgroup, 64 keys a tile, cp.async 2 stages"},
        {SHAPE_WGMMA_WS, "wgmma_ws: 128 query rows a block (2 consumer warpgroups), 128 keys a tile, TMA 3 stages (2 at head sizes 96 and 128)"},
        {SHAPE_WGMMA_WS_PERSISTENT, "wgmma_ws persistent: wgmma_ws's blocks, one an SM, each over its share of the query tiles (head sizes 64 and 96)"},
        {SHAPE_WGMMA_WS_POLY4, "wgmma_ws poly4: as the wgmma_ws row, one exponential in 4 by a cubic on the FMA units (head size 64)"},
        {SHAPE_WGMMA_WS_POLY8, "wgmma_ws poly8: as the wgmma_ws row, one exponential in 8 by a cubic on the FMA units (head size 64)"},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const attn_call call = {.o = o, .c = c, .buf = buf, .shape = rows[i].shape, .order = {CUDA_FLASH_PAIRS_FIRST, 0}};
        o->zero(o, buf->out, buf->n_out * 2); /* a block never run leaves zeros: its check fails */
        if (!run_forward_wgmma(o, rows[i].shape, c, buf)) {
            printf("# %d,%d,%d,%d: no %.*s forward here (compute capability 9.0 and head sizes 64, 96, 128 only; persistent: 64, 96; "
                   "poly: 64)\n",
                   c->B, c->NH, c->T, c->HS, (int)strcspn(rows[i].name, ":"), rows[i].name);
            continue;
        }
        const timing t = time_call(&call, opts);
        char verdict[96];
        const int ok = check_shape(o, buf->out, buf->tuned_out, buf->n_out, 0, verdict, sizeof verdict);
        print_row(c, "forward", rows[i].name, CUDA_FLASH_PAIRS_FIRST, t, attention_tflop(c, 2), ceiling, verdict);
        failed += !ok;
    }
    return failed;
}

/* The forward in each of its shapes: rows, and the failed checks. */
static int bench_forward(tg_o o, const attn_case *c, const attn_buffers *buf, const bench_opts *opts, double ceiling) {
    cuda_flash_shape shapes[MAX_SHAPES];
    const int n = cuda_attention_forward_shapes(c->HS, shapes, MAX_SHAPES);
    int failed = 0;
    for (int k = 0; k < (n < MAX_SHAPES ? n : MAX_SHAPES); k++)
        for (int order = 0; order < orders_of_shape(k); order++) {
            const attn_call call = {.o = o, .c = c, .buf = buf, .shape = k, .order = {order, 0}};
            o->zero(o, buf->out, buf->n_out * 2); /* a block never run leaves zeros: its check fails */
            const timing t = time_call(&call, opts);
            char name[128], verdict[96];
            snprintf(name, sizeof name, "%s%d query rows a warp, %d keys a tile, Q in %s, %d blocks/SM%s", k == 0 ? "tuned: " : "",
                     16 * shapes[k].row_tiles, shapes[k].keys, shapes[k].q_shared ? "shared memory" : "registers",
                     shapes[k].blocks_per_sm, shapes[k].s_ahead ? ", next scores before softmax" : "");
            failed += !check_shape(o, buf->out, buf->tuned_out, buf->n_out, shapes[k].keys == shapes[0].keys, verdict, sizeof verdict);
            print_row(c, "forward", name, order, t, attention_tflop(c, 2), ceiling, verdict);
        }
    failed += bench_forward_wgmma(o, c, buf, opts, ceiling);
    return failed + profile_forward(o, c, buf);
}

/* One backward row of a route other than the mma.sync shapes (shape: a
 * SHAPE_ value; dq: the wgmma backward's route): timed from a zeroed dqkv
 * (a block never run leaves zeros: its check fails), against the tuned
 * shape's dqkv within the tolerance. Returns the failed checks. */
static int bench_backward_row(tg_o o, const attn_case *c, const attn_buffers *buf, const bench_opts *opts, double ceiling,
                              int shape, cuda_wgmma_dq dq, const char *name) {
    o->zero(o, buf->dqkv, buf->n_qkv * 2);
    const attn_call call = {
        .o = o, .c = c, .buf = buf, .backward = 1, .shape = shape, .order = {CUDA_FLASH_PAIRS_FIRST, 0}, .dq = dq};
    const timing t = time_call(&call, opts);
    char verdict[96];
    const int ok = check_shape(o, buf->dqkv, buf->tuned_dqkv, buf->n_qkv, 0, verdict, sizeof verdict);
    print_row(c, "backward", name, CUDA_FLASH_PAIRS_FIRST, t, attention_tflop(c, 5), ceiling, verdict);
    return !ok;
}

/* The wgmma backward (kernels.attention = wgmma; compute capability 9.0,
 * head sizes 64, 96 and 128) with dq by route `want`: a row named by the
 * route it took, against the tuned mma.sync shape's dqkv
 * (buf->tuned_dqkv, within the tolerance), or a note where it has no
 * instance (*ran 0); no row for SUMMED where the scratch has no room for
 * the slots (it would repeat the mma.sync row). Returns the failed checks. */
static int bench_backward_wgmma_dq(tg_o o, const attn_case *c, const attn_buffers *buf, const bench_opts *opts, double ceiling,
                                   cuda_wgmma_dq want, int *ran) {
    cuda_wgmma_dq taken; /* asked with no sequences: the route, nothing run (the timed calls are the only runs) */
    if (!cuda_attention_backward_wgmma_dq(o, buf->dqkv, buf->dout, buf->tuned_out, buf->qkv, buf->lse, 0, c->T, c->NH, c->HS,
                                          (tg_dropout){0}, want, &taken)) {
        printf("# %d,%d,%d,%d: no wgmma backward here (compute capability 9.0 and head sizes 64, 96 and 128 only)\n", c->B, c->NH,
               c->T, c->HS);
        *ran = 0;
        return 0;
    }
    *ran = 1;
    if (want == CUDA_WGMMA_DQ_SUMMED && taken != want) return 0; /* no room for the slots: the mma.sync row says it */
    char name[128];
    snprintf(name, sizeof name, "wgmma: 128 keys a block (64 a warpgroup), 64-row query tiles, TMA %d stages, dq by %s",
             cuda_attention_backward_wgmma_stages(c->HS), taken == CUDA_WGMMA_DQ_SLOTS ? "slots"
             : taken == CUDA_WGMMA_DQ_SUMMED ? "slots summed in the kernel"
                                             : "the mma.sync kernel");
    return bench_backward_row(o, c, buf, opts, ceiling, SHAPE_WGMMA, want, name);
}

/* The fused mma.sync backward (five products a tile, dq by 64-key slots;
 * any device, head sizes 64, 96 and 128): a row against the tuned shape's
 * dqkv (within the tolerance), or a note where it does not run. Returns
 * the failed checks. */
static int bench_backward_fused(tg_o o, const attn_case *c, const attn_buffers *buf, const bench_opts *opts, double ceiling) {
    /* asked with no sequences: whether it runs here, nothing run */
    if (!cuda_attention_backward_fused(o, buf->dqkv, buf->dout, buf->tuned_out, buf->qkv, buf->lse, 0, c->T, c->NH, c->HS)) {
        printf("# %d,%d,%d,%d: no fused backward here (head sizes 64, 96 and 128, and a kernel scratch that holds one pair's "
               "dq slots)\n",
               c->B, c->NH, c->T, c->HS);
        return 0;
    }
    return bench_backward_row(o, c, buf, opts, ceiling, SHAPE_FUSED, CUDA_WGMMA_DQ_SLOTS,
                              "fused: 64 keys a block, 5 products a tile, dq by slots");
}

/* A form of the wgmma backward (dq by slots) that no run takes, beside
 * the slots row (every run's) so that a GPU tells which pays: its row
 * (shape SHAPE_WGMMA_KV_SHARED or _TWO_STAGES, run by `form`) against the
 * tuned shape's dqkv (within the tolerance); nothing where it does not
 * run. Returns the failed checks. */
typedef int (*wgmma_backward_form)(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse,
                                   int B, int T, int NH, int HS);
static int bench_backward_wgmma_form(tg_o o, const attn_case *c, const attn_buffers *buf, const bench_opts *opts,
                                     double ceiling, wgmma_backward_form form, int shape, const char *label) {
    /* asked with no sequences: whether it runs here, nothing run */
    if (!form(o, buf->dqkv, buf->dout, buf->tuned_out, buf->qkv, buf->lse, 0, c->T, c->NH, c->HS)) return 0;
    return bench_backward_row(o, c, buf, opts, ceiling, shape, CUDA_WGMMA_DQ_SLOTS, label);
}

/* The wgmma backward's rows: dq by slots (every run's, where the scratch
 * holds them), by the same slots summed in the kernel (no second kernel
 * reads them back), then by the mma.sync dq kernel, so that a GPU tells
 * which pays: the slots' write and read (1.2 MB a pair at T = 1024 and
 * head size 64), their sum at the end of the key blocks, or the two
 * products the dq kernel repeats; at head size 64 also with K and V from
 * shared memory and as a persistent kernel, at 64 and 96 with two stages
 * of Q and dout, and in rounds whose slots fit in L2 (summed by the
 * reduction kernel, or in the kernel). */
static int bench_backward_wgmma(tg_o o, const attn_case *c, const attn_buffers *buf, const bench_opts *opts,
                                double ceiling) {
    int ran;
    int failed = bench_backward_wgmma_dq(o, c, buf, opts, ceiling, CUDA_WGMMA_DQ_SLOTS, &ran);
    if (!ran) return failed; /* its note, once */
    failed += bench_backward_wgmma_dq(o, c, buf, opts, ceiling, CUDA_WGMMA_DQ_SUMMED, &ran);
    /* at head size 64, K and V read from shared memory where every run holds them in registers */
    failed += bench_backward_wgmma_form(o, c, buf, opts, ceiling, cuda_attention_backward_wgmma_kv_shared, SHAPE_WGMMA_KV_SHARED,
                                        "wgmma: as the slots row, K and V read from shared memory (not held in registers)");
    /* at 64 and 96, two stages of Q and dout where every run has three (the same bits) */
    failed += bench_backward_wgmma_form(o, c, buf, opts, ceiling, cuda_attention_backward_wgmma_two_stages,
                                        SHAPE_WGMMA_TWO_STAGES, "wgmma: as the slots row, two stages of Q and dout (not three)");
    /* at 64, a block an SM over its share of the key blocks (the same bits) */
    failed += bench_backward_wgmma_form(o, c, buf, opts, ceiling, persistent_backward, SHAPE_WGMMA_PERSISTENT,
                                        "wgmma: as the slots row, persistent (a block an SM over its share of the key blocks)");
    /* rounds of at most 24 MB of slots, where every run's fill the 64 MB scratch (the same bits) */
    failed += bench_backward_wgmma_form(o, c, buf, opts, ceiling, l2_rounds_backward, SHAPE_WGMMA_L2_ROUNDS,
                                        "wgmma: as the slots row, rounds of at most 24 MB of dq slots (L2 50 MB), not 62");
    /* both: each tile's last key block sums slots written a moment before, in a round whose slots fit in L2 */
    failed += bench_backward_wgmma_form(o, c, buf, opts, ceiling, l2_rounds_summed_backward, SHAPE_WGMMA_L2_ROUNDS_SUMMED,
                                        "wgmma: dq by slots summed in the kernel, rounds of at most 24 MB of dq slots");
    return failed + bench_backward_wgmma_dq(o, c, buf, opts, ceiling, CUDA_WGMMA_DQ_MMA, &ran);
}

/* The backward in each of its shapes (the dq kernel's row tiles and the dk,
 * dv kernel's key tiles), from the tuned forward's output and lse: rows,
 * and the failed checks. */
static int bench_backward(tg_o o, const attn_case *c, const attn_buffers *buf, const bench_opts *opts, double ceiling) {
    cuda_flash_bwd_shape shapes[MAX_SHAPES];
    const int n = cuda_attention_backward_shapes(c->HS, shapes, MAX_SHAPES);
    int failed = 0;
    o->attention_backward(o, buf->tuned_dqkv, buf->dout, buf->tuned_out, buf->qkv, buf->lse, c->B, c->T, c->NH, c->HS,
                          (tg_dropout){0});
    for (int k = 0; k < (n < MAX_SHAPES ? n : MAX_SHAPES); k++) {
        /* the backward's only order (kernels.h) */
        const attn_call call = {.o = o, .c = c, .buf = buf, .backward = 1, .shape = k, .order = {CUDA_FLASH_PAIRS_FIRST, 0}};
        o->zero(o, buf->dqkv, buf->n_qkv * 2); /* a block never run leaves zeros: its check fails */
        const timing t = time_call(&call, opts);
        char name[96], verdict[96];
        snprintf(name, sizeof name, "%sdq: %d query rows a warp, dk dv: %d keys a warp", k == 0 ? "tuned: " : "",
                 16 * shapes[k].dq_row_tiles, 16 * shapes[k].dkv_key_tiles);
        failed += !check_shape(o, buf->dqkv, buf->tuned_dqkv, buf->n_qkv, 1, verdict, sizeof verdict);
        print_row(c, "backward", name, CUDA_FLASH_PAIRS_FIRST, t, attention_tflop(c, 5), ceiling, verdict);
    }
    failed += bench_backward_fused(o, c, buf, opts, ceiling);
    failed += bench_backward_wgmma(o, c, buf, opts, ceiling);
    return failed + profile_backward(o, c, buf);
}

/* One case (a head size with shapes built): the forward's shapes, then the
 * backward's. Returns the failed checks. */
static int bench_case(tg_o o, const attn_case *c, const bench_opts *opts, double ceiling) {
    attn_buffers buf = buffers_alloc(o, c);
    /* the tuned forward's output: the reference of the forward's checks */
    o->attention_forward(o, buf.tuned_out, buf.lse, buf.qkv, c->B, c->T, c->NH, c->HS, (tg_dropout){0});
    int failed = bench_forward(o, c, &buf, opts, ceiling);
    /* the other shapes rewrote lse: the tuned forward again, for the backward's input (the same bits) */
    o->attention_forward(o, buf.tuned_out, buf.lse, buf.qkv, c->B, c->T, c->NH, c->HS, (tg_dropout){0});
    failed += bench_backward(o, c, &buf, opts, ceiling);
    buffers_free(o, &buf);
    return failed;
}

int main(int argc, char **argv) {
    bench_opts opts;
    if (!parse_opts(argc, argv, &opts)) return usage(argv[0]);
    tg_err err;
    err.msg[0] = '\0';
    tg_ops *gpu = ops_cuda_create(0, TG_BF16, &err);
    if (!gpu) {
        printf("bench_attention: cannot create the CUDA backend: %s\n", err.msg);
        return 2;
    }
    printf("# bench_attention on %s: bf16, causal, no dropout; %d warm-up calls, then %d timed (device events)\n", gpu->device,
           opts.warmup, opts.runs);
    op_ceilings ceil;
    if (op_ceilings_find(gpu->device, TG_BF16, &ceil))
        printf("# ceiling: %.0f TFLOP/s, the products' (%s; kernels/op_rates.c)\n", ceil.tflops, ceil.tflops_source);
    else
        printf("# ceiling: none: the device is not in the table of ceilings (kernels/op_rates.c), so of_ceiling is NA\n");
    printf("shape\top\tblock\torder\tms_median\tms_min\tms_max\ttflops\tof_ceiling\tcheck\n");
    int failed = 0;
    for (int i = 0; i < opts.n_cases; i++) {
        const attn_case *c = &opts.cases[i];
        if (cuda_attention_forward_shapes(c->HS, NULL, 0) == 0 || cuda_attention_backward_shapes(c->HS, NULL, 0) == 0) {
            printf("# %d,%d,%d,%d: no block shapes are built for head size %d (kernels/cuda/flash_fwd.cu: fm_variants; "
                   "flash_bwd.cu: mma_bwd_variants)\n",
                   c->B, c->NH, c->T, c->HS, c->HS);
            failed++;
            continue;
        }
        failed += bench_case(gpu, c, &opts, ceil.tflops);
    }
    ops_destroy(gpu);
    printf("# %s\n", failed ? "some checks failed" : "every check passed");
    return failed ? 1 : 0;
}
